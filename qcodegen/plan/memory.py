"""Static memory plan: one arena, liveness-based offsets (greedy by size), in-place where legal.

The lower bound reported next to it is the largest total size of temporaries live across one step.

State (qcodegen/ir/state.py) has its own memory, outside the arena. A state's next value lives until the end
of the run. It is computed in the state's own memory (with its whole in-place chain) when every step that reads
the state's current value runs before the chain's first step and the chain's buffers have the state's element
size; otherwise it gets an arena slot and the generated code copies it into the state at the end of the run."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import primitives
from ..ir.schedule import TEMP, Buffer, Schedule, Step
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
    for v in schedule.state:  # computed for the next invocation: live until the end of the run
        if v.next in last:
            last[v.next] = len(steps)
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
    in_state = _place_state(schedule, steps, group_of)
    groups = [g for g in groups if id(g) not in in_state]
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


def _place_state(schedule: Schedule, steps: list[Step], group_of: dict[str, _Group]) -> set[int]:
    """Put each state's next value (with its in-place chain) into the state's own memory where that is safe;
    returns the ids of the groups placed there and notes the decisions."""
    bufs = schedule.buffers
    placed: set[int] = set()
    for v in schedule.state:
        state: Buffer = bufs[v.name]
        if v.next == v.name:
            continue
        group = group_of.get(v.next)
        reads = [k for k, step in enumerate(steps) if v.name in step.inputs]
        if (group is not None and all(k < group.first for k in reads) and all(
                bufs[n].dtype.container_bytes == state.dtype.container_bytes for n in group.names)):
            for n in group.names:
                bufs[n].home, bufs[n].offset = v.name, 0
            placed.add(id(group))
            schedule.notes.append(f"state {v.name!r}: next value computed in place ({state.nbytes} B)")
        else:
            schedule.notes.append(f"state {v.name!r}: next value {v.next!r} copied into the state at the end of "
                                  f"the run ({state.nbytes} B)")
    return placed
