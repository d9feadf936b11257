"""Range analysis: bound every integer buffer and every accumulator, proving no intermediate overflows.

Primitives compute output bounds from input bounds (and constant values); a primitive raises PlanError
when an accumulator could leave its type. Inputs are bounded by their quantized storage range."""

from __future__ import annotations

from .. import primitives
from ..errors import PlanError
from ..ir.schedule import CONST, Schedule


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
            where = f" ({step.source})" if step.source else ""
            raise type(exc)(f"step {k}{where}: {exc}") from None
        for buf, rng in zip(io.outs, result.outputs, strict=True):
            if not buf.dtype.is_float:
                buf.value_range = (int(rng[0]), int(rng[1]))
        step.acc_bound = result.acc
