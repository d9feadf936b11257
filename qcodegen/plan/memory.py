"""Static memory plan: one arena, liveness-based offsets (greedy by size), in-place where legal.

The lower bound reported next to it is the largest total size of temporaries live across one step."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import primitives
from ..ir.schedule import TEMP, Schedule
from .fuse import execution_order

ALIGN = 16


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class _Group:
    """Buffers sharing one arena slot (in-place chains)."""

    names: list[str]
    first: int
    last: int
    nbytes: int
    offset: int = 0
    members: list[str] = field(default_factory=list)


def plan_memory(schedule: Schedule) -> None:
    # a fused group runs as one step; its intermediates are no step's operands, so they get no arena space
    steps = [s for _, s in execution_order(schedule)]
    bufs = schedule.buffers
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for k, step in enumerate(steps):
        for n in step.outputs:
            first.setdefault(n, k)
            last[n] = max(last.get(n, k), k)
        for n in step.inputs:
            last[n] = k
    temps = [n for n, b in bufs.items() if b.kind == TEMP and n in first]

    group_of: dict[str, _Group] = {}
    for n in temps:
        group_of[n] = _Group([n], first[n], last[n], bufs[n].nbytes)
    for k, step in enumerate(steps):
        prim = primitives.get(step.op)
        if not (prim.inplace and step.inputs and step.outputs):
            continue
        src, dst = step.inputs[0], step.outputs[0]
        if src not in group_of or dst not in group_of or src == dst:
            continue
        if last[src] != k or step.inputs.count(src) != 1 or src in step.inputs[1:]:
            continue
        if bufs[dst].dtype.container_bytes > bufs[src].dtype.container_bytes:
            continue
        if bufs[dst].size != bufs[src].size:
            continue
        g, h = group_of[src], group_of[dst]
        if len(h.names) != 1:
            continue
        g.names.append(dst)
        g.last = max(g.last, h.last)
        g.nbytes = max(g.nbytes, h.nbytes)
        group_of[dst] = g

    groups = list({id(g): g for g in group_of.values()}.values())
    placed: list[_Group] = []
    for g in sorted(groups, key=lambda g: (-g.nbytes, g.first)):
        conflicts = sorted((p for p in placed if p.first <= g.last and g.first <= p.last),
                           key=lambda p: p.offset)
        offset = 0
        for p in conflicts:
            if offset + g.nbytes <= p.offset:
                break
            offset = max(offset, _align(p.offset + p.nbytes))
        g.offset = offset
        placed.append(g)
    for g in groups:
        for n in g.names:
            bufs[n].offset = g.offset
            bufs[n].live = (first[n], last[n])
    schedule.arena_size = max((_align(g.offset + g.nbytes) for g in groups), default=0)
    schedule.arena_lower_bound = max(
        (sum(g.nbytes for g in groups if g.first <= k <= g.last) for k in range(len(steps))), default=0)
