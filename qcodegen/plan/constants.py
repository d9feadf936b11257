"""Constant layouts: a RESHAPE or TRANSPOSE of a constant (the layout changes converters put between a weight
tensor and its convolution, e.g. TFLite -> TOSA: depthwise [1, KH, KW, C] -> [KH, KW, C, 1], fully connected
[OC, K] -> [OC, 1, 1, K]) is done at plan time: its output becomes a constant holding the moved values. The
consumers then see constant weights: range analysis bounds their sums with the actual values, zero points fold
into the bias, the targets' kernels re-lay the weights, and no arena space or copy is spent on them."""

from __future__ import annotations

from .. import primitives
from ..ir.schedule import CONST, Schedule
from .passes import schedule_pass

LAYOUT_OPS = ("RESHAPE", "TRANSPOSE")


@schedule_pass
def fold_constant_layouts(schedule: Schedule) -> None:
    kept, folded = [], 0
    for step in schedule.steps:
        io = schedule.io(step)
        out = io.outs[0]
        if (step.op not in LAYOUT_OPS or out.name in schedule.outputs
                or not all(b.kind == CONST and b.data is not None for b in io.ins)):
            kept.append(step)
            continue
        values = primitives.get(step.op).reference(io, [b.data for b in io.ins])[0]
        out.kind, out.data = CONST, values.astype(out.dtype.numpy).reshape(out.shape)
        folded += 1
    schedule.steps[:] = kept
    if folded:
        schedule.notes.append(f"{folded} RESHAPE/TRANSPOSE step(s) of constants done at plan time (constant "
                              f"results)")
