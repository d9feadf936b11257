"""The pipeline: Graph -> validated -> lowered -> checked -> passes -> ranges -> memory plan."""

from __future__ import annotations

from . import primitives
from .errors import GraphError
from .ir.graph import Graph
from .lower import lower_graph
from .plan.memory import plan_memory
from .plan.passes import run_passes
from .plan.ranges import analyse_ranges
from .plan.schedule import Schedule


def check_schedule(schedule: Schedule) -> None:
    for k, step in enumerate(schedule.steps):
        try:
            primitives.get(step.op).check(schedule.io(step))
        except GraphError as exc:
            where = f" ({step.source})" if step.source else ""
            raise type(exc)(f"step {k}{where}: {exc}") from None


def plan(graph: Graph) -> Schedule:
    graph.validate()
    schedule = lower_graph(graph)
    check_schedule(schedule)
    run_passes(schedule)
    check_schedule(schedule)
    analyse_ranges(schedule)
    plan_memory(schedule)
    return schedule
