"""The pipeline: Graph -> validated -> lowered -> checked -> passes -> ranges -> memory plan."""

from __future__ import annotations

from . import primitives
from .errors import GraphError, QcError
from .ir.graph import Graph
from .ir.schedule import MemoryGoal, Schedule
from .lower import lower_graph
from .plan.memory import plan_memory
from .plan.passes import run_passes
from .plan.ranges import analyse_ranges
from .primitives.hybrid_conv2d import MODES as HYBRID_MODES


def check_schedule(schedule: Schedule) -> None:
    for k, step in enumerate(schedule.steps):
        try:
            primitives.get(step.op).check(schedule.io(step))
        except GraphError as exc:
            where = f" ({step.source})" if step.source else ""
            raise type(exc)(f"step {k}{where}: {exc}") from None


def plan(graph: Graph, hybrid: str | None = None, memory: MemoryGoal | None = None) -> Schedule:
    """hybrid: the kernel of hybrid ops (float lhs, quantized constant weights; docs/schemes.md), one of
    HYBRID_MODES; None keeps the graph's option (default "weight-only"). memory: what the memory planner aims at
    (default: MemoryGoal(), the "balanced" policy; docs/semantics.md §10.2)."""
    if hybrid is not None:
        if hybrid not in HYBRID_MODES:
            raise QcError(f"hybrid mode {hybrid!r}: expected one of {', '.join(HYBRID_MODES)}")
        graph.options["hybrid"] = hybrid
    graph.validate()
    schedule = lower_graph(graph)
    if memory is not None:
        schedule.memory_goal = memory
    check_schedule(schedule)
    run_passes(schedule)
    check_schedule(schedule)
    analyse_ranges(schedule)
    plan_memory(schedule)
    return schedule
