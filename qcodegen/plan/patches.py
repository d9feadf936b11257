"""Patch-based execution below the layer-wise memory bound (docs/semantics.md §10.2).

The layer-wise schedule holds every step's whole input and output at once. Here the leading steps of a *chain*
(window steps -- CONV2D, DEPTHWISE_CONV2D, AVG_POOL2D, MAX_POOL2D -- and row-wise element-wise steps, each
reading the one before, NHWC with batch 1) run band by band: each band computes the next `rows` rows of the
stage's output and, going backwards, exactly the rows of every earlier step that no earlier band computed. A
window step's band reads a window of its input rows: the rows its taps reach that earlier bands produced (the
halo, carried over from the previous band's window as a copy of those rows) followed by the rows the producer
computed in this band. Padding is the source's on the outer sides of the first and last band and none between
bands (TOSA's exact output-size rule holds for every band by construction). The band outputs are the stage's
output's rows: a CONCAT along the rows, whose inputs the memory planner stores in place (views), so the producers
write straight into the output.

Every band step is an ordinary step -- the same primitive, weights and parameters on fewer rows -- so the same
sums of the same values give the same integers: the numpy reference runs the transformed schedule, `verify`
checks the C against it, and tests compare its outputs with the untransformed schedule's. No MAC is computed
twice; the cost is the copies of halo rows and band windows and more, smaller kernel calls.

The planner picks the stage (how many chain steps) and the band height by the memory goal (MemoryGoal): it
plans the arena of each candidate (the fusion passes and the memory planner run on a copy) and estimates its
extra instructions with a cost model fitted on Cortex-M4 (MAC_COST, CHANNEL_COST, COPY_COST)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from .. import primitives
from ..errors import QcError
from ..ir.dtypes import DTYPES
from ..ir.rescale import RescaleParams
from ..ir.schedule import CONST, OUTPUT, TEMP, Buffer, MemoryGoal, Patching, Schedule, Step
from ..primitives.pool import reciprocal_scale
from .passes import PASSES, schedule_pass

if TYPE_CHECKING:
    from .memory import MemoryPlan

WINDOW_OPS = ("CONV2D", "DEPTHWISE_CONV2D", "AVG_POOL2D", "MAX_POOL2D")
ROW_WISE_OPS = ("RESCALE", "CLAMP", "TABLE", "CAST", "SYMMETRIC_LUT")  # one data input, same shape out

ROWS = (1, 2, 3, 4, 6, 8)  # band heights tried (rows of the stage's output)
MAX_PATCH_STEPS = 4096  # layers x bands of a stage (planning time grows with them; the bench models need < 500)

# cost model, in Cortex-M4 instructions, fitted on the benchmark models by bench/memory_bench.py --fit (mean error
# 0.7% of an inference, at most 5%): per MAC of the layer-wise plan; per output channel of every convolution call
# (the kernels' per-call set-up, requantization parameters and window edges grow with the channels); per byte a
# data-movement step copies
MAC_COST = 1.5
CHANNEL_COST = 27.0
COPY_COST = 4.7
BALANCED_OVERHEAD = 0.03  # "balanced": the smallest arena whose estimated extra instructions stay within this


@dataclass(frozen=True)
class Layer:
    """A chain step's geometry along the rows: output rows [lo, hi) read input rows need(lo, hi)."""

    index: int  # in schedule.steps
    rows_in: int
    rows_out: int
    kernel: int = 1  # (KH - 1) * dilation + 1
    stride: int = 1
    pad_top: int = 0
    pool: bool = False  # a global average pool: its sum runs band by band (_Builder.pool_sum)
    row_wise: bool = False  # an element-wise step (ROW_WISE_OPS)

    @property
    def window(self) -> bool:
        return (self.kernel, self.stride, self.pad_top) != (1, 1, 0)

    def need(self, lo: int, hi: int) -> tuple[int, int]:
        return max(0, lo * self.stride - self.pad_top), min(self.rows_in, (hi - 1) * self.stride - self.pad_top
                                                             + self.kernel)

    def pads(self, lo: int, hi: int) -> tuple[int, int]:
        """Top and bottom padding of the band computing output rows [lo, hi)."""
        return (max(0, self.pad_top - lo * self.stride),
                max(0, (hi - 1) * self.stride - self.pad_top + self.kernel - self.rows_in))


def _layer(schedule: Schedule, k: int) -> Layer | None:
    """The row geometry of step k if it can run band by band: NHWC batch-1 data in and out, constants beside."""
    step = schedule.steps[k]
    if not step.inputs or len(step.outputs) != 1:
        return None
    x, y = schedule.buffers[step.inputs[0]], schedule.buffers[step.outputs[0]]
    consts = [schedule.buffers[n] for n in step.inputs[1:]]
    if (x.kind == CONST or len(x.shape) != 4 or len(y.shape) != 4 or x.shape[0] != 1
            or any(b.kind != CONST for b in consts) or y.kind not in (TEMP, OUTPUT)):
        return None
    if step.op in ROW_WISE_OPS:
        r = RescaleParams.from_attrs(step.attrs) if step.op == "RESCALE" else None
        if x.shape != y.shape or (r is not None and r.per_channel and r.axis % 4 != 3):
            return None
        return Layer(k, x.shape[1], y.shape[1], row_wise=True)
    if step.op not in WINDOW_OPS:
        return None
    win = primitives.get(step.op).window(schedule.io(step))
    pool = (step.op == "AVG_POOL2D" and y.shape[1:3] == (1, 1) and win.kernel == x.shape[1:3] and not any(win.pad)
            and x.dtype.name == "i8")
    return Layer(k, x.shape[1], y.shape[1], (win.kernel[0] - 1) * win.dilation[0] + 1, win.stride[0], win.pad[0],
                 pool)


def chains(schedule: Schedule) -> list[list[Layer]]:
    """Maximal chains of steps that can run band by band, each reading the one before, whose intermediate
    results feed only the next step (and are no model output or next state), up to a global average pool. Only
    chains with a window step."""
    users: dict[str, list[int]] = {}
    for k, step in enumerate(schedule.steps):
        for n in dict.fromkeys(step.inputs):
            users.setdefault(n, []).append(k)
    found, taken = [], set()
    for k in range(len(schedule.steps)):
        layer = _layer(schedule, k)
        if layer is None or k in taken:
            continue
        chain = [layer]
        while not chain[-1].pool:  # a global pool ends a chain: its output exists only after the last band
            out = schedule.steps[chain[-1].index].outputs[0]
            nxt = users.get(out, [])
            if out in schedule.live_out() or len(nxt) != 1:
                break
            following = _layer(schedule, nxt[0])
            if following is None or schedule.steps[nxt[0]].inputs.count(out) != 1 \
                    or schedule.steps[nxt[0]].inputs[0] != out:
                break
            chain.append(following)
        taken.update(layer.index for layer in chain)
        if any(layer.window for layer in chain):
            found.append(chain)
    return found


def streamable(chain: list[Layer], n: int) -> bool:
    """Whether the first n steps of a chain make a stage: it holds a window step before any global pool and ends
    with a layer's last row-wise step."""
    stage = chain[:n]
    return not (n < len(chain) and chain[n].row_wise) and any(layer.window and not layer.pool for layer in stage)


def _band_height(stage: list[Layer]) -> int:
    """The rows a stage's bands are cut from: its output's, or a global pool's input's."""
    return stage[-1].rows_in if stage[-1].pool else stage[-1].rows_out


def _band_rows(stage: list[Layer], rows: int) -> list[list[tuple[int, int]]]:
    """Per layer, per band: the output rows [lo, hi) it computes (going backwards from the stage's bands; a
    global pool at the end sums the rows of its input band by band: its own output is whole after the last)."""
    if stage[-1].pool and len(stage) > 1:
        ranges = _band_rows(stage[:-1], rows)
        return ranges + [[(0, 0)] * (len(ranges[-1]) - 1) + [(0, 1)]]
    last = stage[-1].rows_out
    bands = [(lo, min(lo + rows, last)) for lo in range(0, last, rows)]
    ranges = [bands]
    for layer in reversed(stage[1:]):
        produced, mine = 0, []
        for lo, hi in ranges[0]:
            top = layer.need(lo, hi)[1] if hi > lo else produced
            mine.append((produced, max(produced, top)))
            produced = max(produced, top)
        ranges.insert(0, mine)
    return ranges


@dataclass
class _Rows:
    """Rows [lo, hi) of a stage tensor, held in buffer `name`."""

    name: str
    lo: int
    hi: int


def _rescale(multiplier: int, shift: int, input_zp: int, output_zp: int) -> dict:
    """RESCALE attributes: one scale, single rounding (AVG_POOL2D's apply_scale_32), saturating."""
    return RescaleParams([multiplier], [shift], input_zp, output_zp).to_attrs()


class _Builder:
    """Emits the band steps of one stage into a new step list."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.steps: list[Step] = []
        self.consts: dict[tuple, str] = {}

    def buffer(self, like: str, rows: int, tag: str, shape: tuple[int, ...] | None = None) -> str:
        """A new temporary like `like` with `rows` rows (or, given `shape`, an i32 one of that shape)."""
        src = self.schedule.buffers[like]
        name = self.schedule.fresh_name(f"{like}_{tag}")
        if shape is None:
            self.schedule.add_buffer(Buffer(name, (src.shape[0], rows, *src.shape[2:]), src.dtype, TEMP,
                                            quant=src.quant))
        else:
            self.schedule.add_buffer(Buffer(name, shape, DTYPES["i32"], TEMP))
        return name

    def rows_of(self, held: _Rows, lo: int, hi: int, source: str, tag: str, copy: bool = False) -> _Rows:
        """Rows [lo, hi) of `held` (a SLICE unless they are all of it and no `copy` is asked for)."""
        if (lo, hi) == (held.lo, held.hi) and not copy:
            return held
        buf = self.schedule.buffers[held.name]
        name = self.buffer(held.name, hi - lo, tag)
        self.steps.append(Step("SLICE", [held.name], [name], {"start": [0, lo - held.lo, 0, 0],
                                                              "size": [1, hi - lo, *buf.shape[2:]]}, source))
        return _Rows(name, lo, hi)

    def join(self, parts: list[_Rows], like: str, source: str, tag: str) -> _Rows:
        parts = [p for p in parts if p.hi > p.lo]
        if len(parts) == 1:
            return parts[0]
        name = self.buffer(like, parts[-1].hi - parts[0].lo, tag)
        self.steps.append(Step("CONCAT", [p.name for p in parts], [name], {"axis": 1}, source))
        return _Rows(name, parts[0].lo, parts[-1].hi)

    def pool_sum(self, pool: Step, rows: _Rows, total: str | None) -> str:
        """total + the sum of (x - input_zp) over `rows` of a global average pool's input, per channel (i32
        [1, 1, 1, C]): a DEPTHWISE_CONV2D with weights 1 over the band (the i8 values are read as they are), then
        a REDUCE_SUM over it and the running total -- not an ADD: the fusion passes would join a chain of ADDs
        into one loop at the end, which keeps every partial sum live."""
        y, source = pool.outputs[0], f"{pool.source} [sum rows {rows.lo}:{rows.hi}]"
        _, r, w, c = self.schedule.buffers[rows.name].shape
        part = self.buffer(y, 0, f"p{rows.lo}", (1, 1, 1, c))
        izp, _ = primitives.get("AVG_POOL2D").zero_points(self.schedule.io(pool))
        attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "input_zp": izp, "weight_zp": 0,
                 "acc_type": "i32"}
        ones = self.const("pool_ones", np.ones((r, w, c, 1), np.int8), "i8")
        self.steps.append(Step("DEPTHWISE_CONV2D", [rows.name, ones, self.const("pool_zero", np.zeros(c, np.int32),
                                                                               "i32")], [part], attrs, source))
        if total is None:
            return part
        joined = self.buffer(y, 0, f"j{rows.lo}", (1, 2, 1, c))
        self.steps.append(Step("CONCAT", [total, part], [joined], {"axis": 1}, source))
        acc = self.buffer(y, 0, f"s{rows.lo}", (1, 1, 1, c))
        self.steps.append(Step("REDUCE_SUM", [joined], [acc], {"axis": 1}, source))
        return acc

    def const(self, base: str, values: np.ndarray, dtype: str) -> str:
        """A constant holding `values` (one per content)."""
        key = (dtype, values.shape, values.tobytes())
        if key not in self.consts:
            name = self.schedule.fresh_name(base)
            self.schedule.add_buffer(Buffer(name, values.shape, DTYPES[dtype], CONST, values))
            self.consts[key] = name
        return self.consts[key]

    def pool_mean(self, pool: Step, total: str) -> None:
        """The pool's output from the sum of all its taps: AVG_POOL2D's own scaling (one RESCALE)."""
        x = self.schedule.buffers[pool.inputs[0]]
        multiplier, shift = reciprocal_scale(x.shape[1] * x.shape[2])
        _, ozp = primitives.get("AVG_POOL2D").zero_points(self.schedule.io(pool))
        self.steps.append(Step("RESCALE", [total], [pool.outputs[0]], _rescale(multiplier, shift, 0, ozp),
                               pool.source))


def stream(schedule: Schedule, stage: list[Layer], rows: int) -> Patching:
    """Replace the stage's steps by band steps computing `rows` rows of its output at a time."""
    steps = list(schedule.steps)
    ranges = _band_rows(stage, rows)
    builder = _Builder(schedule)
    stage_in = steps[stage[0].index].inputs[0]
    output = steps[stage[-1].index].outputs[0]
    carry: list[_Rows | None] = [None] * len(stage)
    outputs: list[str] = []
    total: str | None = None  # a global pool's running sum
    for t in range(len(ranges[-1])):
        new: _Rows | None = None  # rows of the current layer's input computed in this band
        for j, layer in enumerate(stage):
            if layer.pool:
                assert new is not None
                total = builder.pool_sum(steps[layer.index], new, total)
                continue
            lo, hi = ranges[j][t]
            if hi == lo:
                new = None
                continue
            step = steps[layer.index]
            source = f"{step.source} [rows {lo}:{hi}]" if step.source else f"[rows {lo}:{hi}]"
            x = step.inputs[0]
            need = layer.need(lo, hi)
            if j == 0:
                window = builder.rows_of(_Rows(stage_in, 0, layer.rows_in), *need, source, "in")
            else:
                held = [p for p in (carry[j], new) if p is not None]
                parts = [builder.rows_of(p, max(need[0], p.lo), p.hi, source, "part")
                         for p in held if p.hi > max(need[0], p.lo)]
                window = builder.join(parts, x, source, "win")
            assert (window.lo, window.hi) == need, (layer, lo, hi, window, need)
            attrs = dict(step.attrs)
            if layer.window:
                top, bottom = layer.pads(lo, hi)
                attrs["pad"] = [top, bottom, *list(step.attrs["pad"])[2:]]
            following = j + 1 < len(stage) and ranges[j + 1][t][1] > ranges[j + 1][t][0]
            held = carry[j + 1] if following else None
            if held is not None:  # the next window's halo moves to its head now, not while this step runs
                carry[j + 1] = builder.rows_of(held, held.lo, held.hi, source, "head", copy=True)
            out = builder.buffer(step.outputs[0], hi - lo, f"r{lo}")
            builder.steps.append(Step(step.op, [window.name, *step.inputs[1:]], [out], attrs, source))
            later = [ranges[j][u] for u in range(t + 1, len(ranges[j])) if ranges[j][u][1] > ranges[j][u][0]]
            keep = layer.need(*later[0])[0] if later and j > 0 else need[1]
            carry[j] = builder.rows_of(window, keep, need[1], source, "halo") if keep < need[1] else None
            new = _Rows(out, lo, hi)
        if new is not None:
            outputs.append(new.name)
    if total is not None:
        builder.pool_mean(steps[stage[-1].index], total)
    else:
        builder.steps.append(Step("CONCAT", outputs, [output], {"axis": 1},
                                  f"{steps[stage[-1].index].source} [bands]"))
    # the bands replace the stage's steps, at the place of its first (the rest of the graph reads only its output)
    members = {layer.index for layer in stage}
    first = stage[0].index
    schedule.steps[:] = ([s for k, s in enumerate(steps[:first]) if k not in members] + builder.steps
                         + [s for k, s in enumerate(steps[first:], first) if k not in members])
    for layer in stage[:-1]:
        del schedule.buffers[steps[layer.index].outputs[0]]
    sources = tuple(dict.fromkeys(steps[layer.index].source for layer in stage))
    return Patching(sources, len(stage), output, rows, len(ranges[-1]), 0, 0, 0, 0.0)


@dataclass(frozen=True)
class Candidate:
    """A patch configuration (chain, leading steps, rows per band; steps 0: the layer-wise schedule) and what it
    costs: arena (or, unplaced, its lower bound), live-set bound, copied bytes, extra kernel calls and the extra
    instructions of the cost model as a fraction of the layer-wise plan's."""

    chain: int
    steps: int
    rows: int
    arena: int
    bound: int
    copied_bytes: int = 0
    extra_calls: int = 0
    overhead: float = 0.0
    placed: bool = False


@dataclass
class Cost:
    """What the cost model counts in an executed schedule (beyond its MACs)."""

    calls: int = 0  # steps that run code (a data-movement step whose inputs are all views runs none)
    channels: int = 0  # output channels of the convolution calls (CONV2D, DEPTHWISE_CONV2D, fused or not)
    copied_bytes: int = 0  # bytes the data-movement steps copy
    macs: int = 0

    @property
    def instructions(self) -> float:
        """The extra instructions the model predicts (the MACs aside)."""
        return CHANNEL_COST * self.channels + COPY_COST * self.copied_bytes


def cost(schedule: Schedule, plan: MemoryPlan) -> Cost:
    """The cost model's counts over every step the generated code runs (execution order)."""
    from .fuse import execution_order

    total = Cost()
    for _, step in execution_order(schedule):
        io = schedule.io(step)
        prim = primitives.get(step.op)
        total.macs += prim.macs(io)
        views = prim.views(io)
        if views:
            operands = step.inputs + step.outputs
            stored = {operands[v] for v, _, _ in views if operands[v] in plan.view_of}
            moved = sum(schedule.buffers[n].nbytes for n in (step.inputs if step.op == "CONCAT" else step.outputs)
                        if n not in stored)
            total.copied_bytes += moved
            total.calls += moved > 0
            continue
        total.calls += 1
        conv = step.attrs["parts"][0] if step.op == "FUSED_CONV" else step
        if conv.op in ("CONV2D", "DEPTHWISE_CONV2D"):
            total.channels += io.outs[0].shape[-1]
    return total


def _copy(schedule: Schedule) -> Schedule:
    return replace(schedule, buffers=dict(schedule.buffers), steps=list(schedule.steps), fused={}, notes=[])


def _later_passes() -> list:
    return PASSES[PASSES.index(patch_based_execution) + 1:]


def _memory_plan(schedule: Schedule, place: bool) -> MemoryPlan:
    # imported here: the fusion passes (memory.py imports fuse.py) must register after this pass (passes.py)
    from .memory import memory_plan

    return memory_plan(schedule, place)


def _plan(schedule: Schedule, place: bool) -> tuple[MemoryPlan, Cost]:
    """Run the passes after this one on `schedule` (a copy) and plan its memory."""
    for later in _later_passes():
        later(schedule)
    plan = _memory_plan(schedule, place)
    return plan, cost(schedule, plan)


class _Search:
    """Plans candidates on copies of the schedule, relative to the layer-wise plan."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        from .fuse import execution_order

        self.chains = chains(schedule)
        layer_wise = _copy(schedule)
        plan, self.base_cost = _plan(layer_wise, True)
        self.base = Candidate(-1, 0, 0, plan.arena_size, plan.lower_bound, placed=True)
        # the layer-wise live bytes at each schedule step (its execution position's; fused steps: the group's last)
        order = [k for k, _ in execution_order(layer_wise)]
        self.live = {k: plan.live_bytes[p] for p, k in enumerate(order)} if plan.live_bytes else {}
        self.trials: dict[tuple[int, int, int], Schedule] = {}  # transformed copies, the later passes run
        self.found: dict[tuple[tuple[int, int, int], bool], Candidate] = {}

    def rest(self, stage: list[Layer]) -> int:
        """The most bytes live at once outside the stage (they stay: the layer-wise plan's)."""
        inside = {layer.index for layer in stage}
        return max((v for k, v in self.live.items() if k not in inside), default=0)

    def evaluate(self, c: int, n: int, rows: int, place: bool = False) -> Candidate:
        """The candidate's arena (placed) or live-set bound (not placed), and its cost."""
        key = (c, n, rows)
        if key not in self.trials:
            trial = _copy(self.schedule)
            stream(trial, self.chains[c][:n], rows)
            for later in _later_passes():
                later(trial)
            self.trials[key] = trial
        if (key, place) not in self.found:
            trial = self.trials[key]
            plan = _memory_plan(trial, place)
            counts = cost(trial, plan)
            extra = counts.instructions - self.base_cost.instructions
            self.found[key, place] = Candidate(c, n, rows, plan.arena_size, plan.lower_bound,
                                               counts.copied_bytes - self.base_cost.copied_bytes,
                                               counts.calls - self.base_cost.calls,
                                               extra / max(MAC_COST * self.base_cost.macs, 1.0), place)
        return self.found[key, place]

    def ends(self, c: int) -> list[int]:
        """Stage lengths worth trying: a stage ends after a layer's row-wise steps, holds a window step, and its
        first band (of one row) needs at most half of the first step's output rows."""
        chain, found = self.chains[c], []
        for n in range(1, len(chain) + 1):
            stage = chain[:n]
            if not streamable(chain, n):
                continue
            if n * _band_height(stage) > MAX_PATCH_STEPS:
                continue
            first = _band_rows(stage, 1)[0]
            if len(first) >= 3 and 2 * first[0][1] <= stage[0].rows_out:
                found.append(n)
        return found

    def heights(self, c: int, n: int) -> list[int]:
        height = _band_height(self.chains[c][:n])
        return [r for r in ROWS if 3 * r <= height and n * -(-height // r) <= MAX_PATCH_STEPS]

    def explore(self, goal: MemoryGoal) -> list[Candidate]:
        """Rows 1 at each stage end while the arena can still shrink, then taller bands at the best ends."""
        for c in range(len(self.chains)):
            best, worse = self.base.bound, 0
            for n in self.ends(c):
                stage = self.chains[c][:n]
                if self.rest(stage) >= best:
                    continue  # what stays outside the stage already needs that much
                cand = self.evaluate(c, n, 1)
                worse = worse + 1 if cand.bound >= best and cand.bound > self.rest(stage) else 0
                best = min(best, cand.bound)
                if worse >= 2:
                    break  # deeper stages only hold more halos
            if goal.policy == "min" and goal.arena_limit is None:
                continue  # one-row bands have the smallest arenas
            ranked = sorted((f for f in self.found.values() if f.chain == c), key=lambda f: f.bound)[:3]
            for cand in ranked:  # taller bands cost less and need more: up to the first the goal accepts
                for rows in self.heights(c, cand.steps)[1:]:
                    taller = self.evaluate(c, cand.steps, rows)
                    if taller.bound >= self.base.bound or (taller.bound > goal.arena_limit if goal.arena_limit
                                                           is not None else taller.overhead <= BALANCED_OVERHEAD):
                        break
        return [self.base, *self.found.values()]


def _objective(goal: MemoryGoal):  # noqa: ANN202 - a sort key of candidates
    """Sort key of the candidates the goal accepts (None: not acceptable)."""
    if goal.arena_limit is not None:
        limit = goal.arena_limit
        return lambda c: None if c.arena > limit else (c.overhead, c.arena)
    if goal.policy == "min":
        return lambda c: (c.arena, c.overhead)
    if goal.policy == "balanced":
        return lambda c: None if c.overhead > BALANCED_OVERHEAD else (c.arena, c.overhead)
    return lambda c: (c.steps > 0,)


def choose(schedule: Schedule, goal: MemoryGoal) -> tuple[Candidate, Candidate]:
    """The layer-wise plan and the plan the memory goal asks for: the best few candidates by their live-set bound,
    then placed."""
    search = _Search(schedule)
    if goal.stage is not None:
        n, rows = goal.stage
        if not search.chains or rows < 1 or not 1 <= n <= len(search.chains[0]) \
                or not streamable(search.chains[0], n):
            raise QcError(f"no patch configuration {goal.stage} (steps of the first chain, rows per band)")
        return search.base, search.evaluate(0, n, rows, True)
    key = _objective(goal)
    ranked = sorted((c for c in search.explore(goal) if key(c) is not None), key=key)
    placed = [search.base] + [search.evaluate(c.chain, c.steps, c.rows, True) for c in ranked[:3] if c.steps]
    accepted = sorted((c for c in placed if key(c) is not None), key=key)
    if not accepted:
        smallest = min(c.arena for c in placed)
        raise QcError(f"no plan fits an arena of {goal.arena_limit:,} B: the smallest found is {smallest:,} B")
    return search.base, accepted[0]


@schedule_pass
def patch_based_execution(schedule: Schedule) -> None:
    goal = schedule.memory_goal
    if goal.policy == "speed" and goal.arena_limit is None and goal.stage is None:
        schedule.layer_bound = _Search(schedule).base.bound
        return
    base, best = choose(schedule, goal)
    schedule.layer_bound = base.bound
    if best.steps == 0:
        return
    stage = chains(schedule)[best.chain][:best.steps]
    patching = stream(schedule, stage, best.rows)
    schedule.patching = replace(patching, copied_bytes=best.copied_bytes, extra_steps=best.extra_calls,
                                estimated_overhead=best.overhead)
    schedule.notes.append(
        f"patch-based execution: {best.steps} steps ({patching.sources[0]} .. {patching.sources[-1]}) run in "
        f"{patching.bands} bands of {best.rows} row(s) of {patching.output!r}: arena {best.arena:,} B (layer-wise "
        f"{base.arena:,} B), halos carried (0 MACs recomputed), {best.copied_bytes:,} B more copied, "
        f"{best.extra_calls} more kernel calls, about {100 * best.overhead:.1f}% more instructions (cost model)")
