"""Range analysis: bound every integer buffer and every accumulator, proving no intermediate overflows.

Primitives compute output bounds from input bounds (and constant values). Inputs are bounded by their quantized
storage range, constants by their values. Where the bounds do not prove that a step's arithmetic stays in its
type (an int32 sum of unbounded terms, the reciprocal iterations of a softmax, ...), the primitive widens the step
instead (Step.widened: int64 arithmetic, the stored result saturated to the output type), and that step's output
bound is what the saturated C can store. A widened step is taken out of its fused group: the fused kernels
compute in the proven types. Primitives that cannot widen raise PlanError naming the step."""

from __future__ import annotations

from .. import primitives
from ..errors import PlanError
from ..ir.schedule import CONST, Schedule, Step


def analyse_ranges(schedule: Schedule) -> None:
    for buf in schedule.buffers.values():
        if buf.dtype.is_float:
            buf.value_range = None
        elif buf.kind == CONST:
            data = buf.data.astype("int64")
            buf.value_range = (int(data.min()), int(data.max())) if data.size else (0, 0)
        elif buf.quant is not None and buf.kind == "input":
            buf.value_range = (buf.quant.storage_min, buf.quant.storage_max)
        else:
            buf.value_range = (buf.dtype.min, buf.dtype.max)
    for k, step in enumerate(schedule.steps):
        io = schedule.io(step)
        in_ranges = [b.value_range if b.value_range is not None else (0, 0) for b in io.ins]
        try:
            result = primitives.get(step.op).value_ranges(io, in_ranges)
        except PlanError as exc:
            raise type(exc)(f"step {k}{_where(step.source)}: {exc}") from None
        outputs = result.outputs
        if step.op == "LOGICAL_LEFT_SHIFT":
            outputs = [_intersect(outputs[0], _normalized(schedule, step))]
        for buf, rng in zip(io.outs, outputs, strict=True):
            if not buf.dtype.is_float:
                buf.value_range = (int(rng[0]), int(rng[1]))
        step.acc_bound = result.acc
        step.widened = result.widened
    _report_widened(schedule)


def _intersect(a: tuple[int, int], b: tuple[int, int] | None) -> tuple[int, int]:
    return a if b is None else (max(a[0], b[0]), min(a[1], b[1]))


def _normalized(schedule: Schedule, step: Step) -> tuple[int, int] | None:
    """The bound of x << (CLZ(x) - c), elementwise, for 0 <= x < 2^(32 - c): a normalisation (fixed-point
    reciprocals: the TFLite -> TOSA softmax) leaves 32 - c significant bits, so the result is 0 or in
    [2^(31 - c), 2^(32 - c) - 1]. Intervals alone lose that relation between the value and its shift."""
    x, amount = step.inputs
    sub = _producer(schedule, amount, "SUB")
    clz = sub and _producer(schedule, sub.inputs[0], "CLZ")
    c = sub and schedule.buffers[sub.inputs[1]]
    if not clz or clz.inputs[0] != x or c.kind != CONST or c.data.size != 1:
        return None
    c_value = int(c.data.reshape(-1)[0])
    lo, hi = schedule.buffers[x].value_range or (-1, 0)
    shapes = {schedule.buffers[n].shape for n in (x, amount, step.outputs[0])}
    if len(shapes) != 1 or lo < 0 or not 1 <= c_value <= 31 or hi >= 1 << (32 - c_value):
        return None
    return 0 if lo == 0 else 1 << (31 - c_value), (1 << (32 - c_value)) - 1


def _producer(schedule: Schedule, name: str, op: str) -> Step | None:
    k = schedule.producer(name)
    return schedule.steps[k] if k is not None and schedule.steps[k].op == op else None


def _where(source: str) -> str:
    return f" ({source})" if source else ""


def _report_widened(schedule: Schedule) -> None:
    widened = [k for k, s in enumerate(schedule.steps) if s.widened is not None]
    if not widened:
        return
    unfused = [last for last, f in schedule.fused.items() if set(f.attrs["steps"]) & set(widened)]
    for last in unfused:
        del schedule.fused[last]
    schedule.notes.append(
        f"widened {len(widened)} step(s) to int64 arithmetic, saturated to the output type, where the input "
        f"bounds do not prove the int32/i48 arithmetic in range (steps {', '.join(map(str, widened))}; per step: "
        f"`widened`)" + (f"; {len(unfused)} fused group(s) containing them run unfused" if unfused else ""))
