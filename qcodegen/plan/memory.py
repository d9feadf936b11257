"""Static memory plan: one arena, offsets from tensor lifetimes (docs/semantics.md §10.1).

Buffers that share bytes by design form a *slot*, each member at a byte offset inside it:
- **in place**: an element-wise step writes its output over an input that dies there (any input its primitive
  allows, `Primitive.inplace_inputs`: ADD, SUB, MUL and the fused element-wise loops into either operand), when
  the output has the input's element count and is no wider;
- **views**: a CONCAT along its outermost non-unit axis keeps each input where the output holds it (the producer
  writes there and the CONCAT copies nothing for it); a SLICE of contiguous elements and a RESHAPE read their
  input's bytes where they are.
Two members of a slot may share bytes while both are live only when they hold the same values (a view and the
buffer it views, `_Planner.root`) or as an in-place step's input and output. Each candidate is checked against
every member of both slots (bytes and lifetimes), and taken only when it does not raise the peak of the live
bytes (the sum of the sizes of the slots live at a step): a view stretches its slot over the lifetime of every
member, which is worth it where the bytes are spare, not where they set the arena.

Slots are placed greedily (several orders, the smallest arena wins) at 16-byte-aligned offsets. The lower bound
reported with the arena is that peak: the most bytes of slots live across one step of the executed schedule.

State (qcodegen/ir/state.py) has its own memory, outside the arena, and is never overlaid. A state's next value
lives until the end of the run. It is computed in the state's own memory (with its whole slot) when every step
that reads the state's current value runs before the slot's first step and the slot's buffers have the state's
size, each at its start; otherwise it gets an arena slot and the generated code copies it into the state at the
end of the run."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import primitives
from ..ir.schedule import TEMP, Buffer, Schedule, Step, StepIO
from .fuse import execution_order

ALIGN = 16


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class _Slot:
    """Buffers sharing one arena region: member -> byte offset inside the slot (multiples of ALIGN)."""

    members: dict[str, int]
    first: int
    last: int
    lo: int
    hi: int
    offset: int = 0  # in the arena, set by placement

    @property
    def size(self) -> int:
        """Bytes the slot occupies (its members' extent; placement aligns what follows it)."""
        return self.hi - self.lo


@dataclass
class MemoryPlan:
    """Where every arena temporary lives: offset, lifetime (first and last position in execution order)."""

    offsets: dict[str, int]
    live: dict[str, tuple[int, int]]
    arena_size: int
    lower_bound: int  # the most bytes of slots live across one step
    view_of: dict[str, str] = field(default_factory=dict)  # buffers stored inside the one they view: no copy
    inplace: int = 0  # steps writing over an input
    live_bytes: list[int] = field(default_factory=list)  # per execution position: bytes of the slots live there
    home: dict[str, str] = field(default_factory=dict)  # buffers computed in a state's memory (at its start)
    notes: list[str] = field(default_factory=list)  # the decisions about the state


@dataclass(frozen=True)
class _Relation:
    """Views (each `a` stored `delta` bytes into `b`, holding its values) or an in-place write (`a` over `b`)."""

    view: bool
    b: str
    parts: tuple[tuple[str, int], ...]  # (a, delta)
    weight: int  # bytes of b: relations of larger buffers are tried first


class _Planner:
    def __init__(self, steps: list[Step], bufs: dict[str, Buffer], first: dict[str, int], last: dict[str, int],
                 temps: list[str], pinned: set[str]) -> None:
        self.steps, self.bufs, self.first, self.last = steps, bufs, first, last
        self.pinned = pinned  # next values of the state: computed at the start of the state's memory, if at all
        self.slot_of = {n: _Slot({n: 0}, first[n], last[n], 0, bufs[n].nbytes) for n in temps}
        self.parent: dict[str, str] = {}  # a view -> the buffer whose values it holds
        self.pairs: set[tuple[str, str]] = set()  # in-place (input, output) pairs
        self.profile = np.zeros(len(steps) + 1, np.int64)  # (a next state value lives one past the last step)
        for slot in self.slot_of.values():
            self.profile[slot.first:slot.last + 1] += slot.size
        self.inplace = 0

    def root(self, name: str) -> str:
        while name in self.parent:
            name = self.parent[name]
        return name

    def _compatible(self, a: str, b: str) -> bool:
        """Whether a and b may share bytes while both are live."""
        return self.root(a) == self.root(b) or (a, b) in self.pairs or (b, a) in self.pairs

    def _conflict(self, moving: dict[str, int], into: dict[str, int]) -> bool:
        for m, mo in moving.items():
            mf, ml, mn = self.first[m], self.last[m], self.bufs[m].nbytes
            for x, xo in into.items():
                if (mo < xo + self.bufs[x].nbytes and xo < mo + mn and mf <= self.last[x]
                        and self.first[x] <= ml and not self._compatible(m, x)):
                    return True
        return False

    def merge(self, into: str, parts: tuple[tuple[str, int], ...]) -> bool:
        """Move the slot of each `a` of `parts` into `into`'s slot so that `a` lands `delta` bytes after `into`,
        all or none: if no two members then clash and the most bytes live at once over the merged slot's
        lifetime do not rise."""
        b = self.slot_of[into]
        members, merged = dict(b.members), [(b, 0)]
        for name, delta in parts:
            a = self.slot_of[name]
            if delta % ALIGN:
                return False
            if any(a is m for m, _ in merged):
                if members[name] != members[into] + delta:
                    return False
                continue
            shift = members[into] + delta - a.members[name]
            shifted = {n: o + shift for n, o in a.members.items()}
            if self._conflict(shifted, members):
                return False
            members.update(shifted)
            merged.append((a, shift))
        slot = _Slot(members, min(m.first for m, _ in merged), max(m.last for m, _ in merged),
                     min(m.lo + d for m, d in merged), max(m.hi + d for m, d in merged))
        window = slice(slot.first, slot.last + 1)
        profile = self.profile.copy()
        for m, _ in merged:
            profile[m.first:m.last + 1] -= m.size
        profile[window] += slot.size
        if profile[window].max() > self.profile[window].max():
            return False
        self.profile = profile
        for n in slot.members:
            self.slot_of[n] = slot
        return True

    def relations(self, k: int, step: Step) -> list[_Relation]:
        """The views and in-place writes step k allows (checked against the plan when they are tried): the
        views of one step together, then each alone; an output over any input that dies here."""
        bufs, ins, outs = self.bufs, step.inputs, step.outputs
        io = StepIO(step, [bufs[n] for n in ins], [bufs[n] for n in outs])
        prim = primitives.get(step.op)
        operands = ins + outs
        views = prim.views(io)
        found = [_Relation(True, operands[w], ((operands[v], delta),), bufs[operands[w]].nbytes)
                 for v, w, delta in views
                 if operands[v] in self.slot_of and operands[w] in self.slot_of and operands.count(operands[v]) == 1
                 and bufs[operands[v]].dtype == bufs[operands[w]].dtype
                 and (not {operands[v], operands[w]} & self.pinned
                      or delta == 0 and bufs[operands[v]].nbytes == bufs[operands[w]].nbytes)]
        if len({r.b for r in found}) == 1 and len(found) > 1:
            found.insert(0, _Relation(True, found[0].b, tuple(p for r in found for p in r.parts), found[0].weight))
        if views or len(outs) != 1 or outs[0] not in self.slot_of:
            return found
        dst = outs[0]
        return [_Relation(False, src, ((dst, 0),), bufs[src].nbytes)
                for src in (ins[i] for i in prim.inplace_inputs(io))
                if src in self.slot_of and self.last[src] == k and ins.count(src) == 1
                and bufs[dst].dtype.container_bytes <= bufs[src].dtype.container_bytes
                and bufs[dst].size == bufs[src].size]

    def relate(self, r: _Relation) -> None:
        if r.view:
            names = [a for a, _ in r.parts]
            if any(a in self.parent for a in names):
                return
            for a in names:
                self.parent[a] = r.b
            if not self.merge(r.b, r.parts):
                for a in names:
                    del self.parent[a]
            return
        (dst, _), = r.parts
        if len(self.slot_of[dst].members) == 1:  # an output written over its first dying input that works
            self.pairs.add((r.b, dst))
            if self.merge(r.b, r.parts):
                self.inplace += 1
            else:
                self.pairs.discard((r.b, dst))


# placement orders tried (the smallest arena wins): largest first, earliest first, longest-lived first
_ORDERS = (lambda g: (-g.size, g.first), lambda g: (g.first, -g.size), lambda g: (g.first - g.last, -g.size))


def _place_in_order(slots: list[_Slot], best_fit: bool) -> tuple[list[int], int]:
    """Each slot, in this order, at the lowest aligned offset free over its lifetime (best_fit: in the smallest
    free gap it fits, else on top): offsets and arena size."""
    n = len(slots)
    first = np.array([g.first for g in slots])
    last = np.array([g.last for g in slots])
    size = np.array([_align(g.size) for g in slots])
    offset = np.zeros(n, np.int64)
    for i, g in enumerate(slots):
        live = np.flatnonzero((first[:i] <= g.last) & (last[:i] >= g.first))
        at, choice = 0, None
        for j in live[np.argsort(offset[live], kind="stable")]:
            gap = int(offset[j]) - at
            if gap >= size[i] and (choice is None or gap < choice[1]):
                choice = (at, gap)
                if not best_fit:
                    break
            at = max(at, int(offset[j] + size[j]))
        offset[i] = choice[0] if choice is not None else at
    return [int(o) for o in offset], _align(int((offset + [g.size for g in slots]).max())) if n else 0


def _place(slots: list[_Slot]) -> int:
    """Place the slots (the best of _ORDERS); the arena size."""
    best: tuple[int, list[_Slot], list[int]] | None = None
    for order in _ORDERS:
        ordered = sorted(slots, key=order)
        for best_fit in (False, True):
            offsets, arena = _place_in_order(ordered, best_fit)
            if best is None or arena < best[0]:
                best = (arena, ordered, offsets)
    if best is None:
        return 0
    for g, o in zip(best[1], best[2], strict=True):
        g.offset = o
    return best[0]


def memory_plan(schedule: Schedule, place: bool = True) -> MemoryPlan:
    """The memory plan of a schedule, as data (the buffers are not touched). Without `place`, only the slots and
    their live bytes (offsets 0, arena size = the lower bound): what the patch search compares."""
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
    planner = _Planner(steps, bufs, first, last, temps, {v.next for v in schedule.state})
    # larger buffers first: a view stretches its slot's lifetime, which is harmless only under the peak the
    # large buffers set; decided first, they set it lower
    relations = [r for k, step in enumerate(steps) for r in planner.relations(k, step)]
    for r in sorted(relations, key=lambda r: -r.weight):
        planner.relate(r)
    slots = list({id(s): s for s in planner.slot_of.values()}.values())
    homes, notes = _place_state(schedule, steps, planner)
    slots = [s for s in slots if not any(n in homes for n in s.members)]
    bound = int(planner.profile.max()) if slots else 0
    arena = _place(slots) if place else bound
    offsets = {n: s.offset + o - s.lo for s in slots for n, o in s.members.items()}
    offsets.update({n: 0 for n in homes})
    return MemoryPlan(offsets, {n: (first[n], last[n]) for n in temps}, arena, bound, dict(planner.parent),
                      planner.inplace, [int(v) for v in planner.profile] if slots else [], homes, notes)


def _place_state(schedule: Schedule, steps: list[Step], planner: _Planner) -> tuple[dict[str, str], list[str]]:
    """Put each state's next value (with its whole slot) into the state's own memory where that is safe: buffer ->
    state for those, and the notes of the decisions. Their slots leave the live bytes of the arena."""
    bufs = schedule.buffers
    homes: dict[str, str] = {}
    notes = []
    for v in schedule.state:
        state: Buffer = bufs[v.name]
        if v.next == v.name:
            continue
        slot = planner.slot_of.get(v.next)
        reads = [k for k, step in enumerate(steps) if v.name in step.inputs]
        if (slot is not None and all(k < slot.first for k in reads) and all(
                bufs[n].nbytes == state.nbytes and o == slot.lo for n, o in slot.members.items())):
            homes.update({n: v.name for n in slot.members})
            planner.profile[slot.first:slot.last + 1] -= slot.size
            notes.append(f"state {v.name!r}: next value computed in place ({state.nbytes} B)")
        else:
            notes.append(f"state {v.name!r}: next value {v.next!r} copied into the state at the end of the run "
                         f"({state.nbytes} B)")
    return homes, notes


def plan_memory(schedule: Schedule) -> None:
    plan = memory_plan(schedule)
    for name, offset in plan.offsets.items():
        buf = schedule.buffers[name]
        buf.offset, buf.home = offset, plan.home.get(name)
        buf.live = plan.live[name]
    schedule.arena_size = plan.arena_size
    schedule.arena_lower_bound = plan.lower_bound
    schedule.notes += plan.notes
