"""relu, relu6, clamp: CLAMP at zp + round_half_away(bound / scale) (float64), limited to the storage range;
a RESCALE first when the input and output quantization differ (fused by the rescale+clamp pass)."""

from __future__ import annotations

import math

from ...ir.graph import Op
from ..base import Lowerer, rule
from ..common import ACTIVATIONS, check_dtypes, clamp_bounds, expect_shape, finish


@rule("relu", "relu6", "clamp")
def lower_activation(lw: Lowerer, op: Op) -> None:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise lw.error(f"expects 1 input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    lw.quant_in(0)
    lw.quant_out(0)
    check_dtypes(lw, (x, y), ("i8", "i16"))
    expect_shape(lw, y, x.shape)
    if op.kind == "clamp":
        lo, hi = lw.attr("min", None), lw.attr("max", None)
        for key, value in (("min", lo), ("max", hi)):
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value)):
                raise lw.error(f"attribute {key!r} must be a finite number, got {value!r}")
        if lo is not None and hi is not None and lo > hi:
            raise lw.error(f"min {lo} is greater than max {hi}")
    else:
        lo, hi = ACTIVATIONS[op.kind]
    finish(lw, x.name, x.quant, y, *clamp_bounds(y.quant, lo, hi))
