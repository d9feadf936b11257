"""TFLite AVERAGE_POOL_2D and MAX_POOL_2D -> AVG_POOL2D / MAX_POOL2D (+ CLAMP for a fused activation).

TFLM requires the input and output quantization to agree (scales within 1e-6, equal zero points) and works on
the stored integers: the average sums the raw values of the in-bounds taps and divides rounding half away from
zero, which is TOSA AVG_POOL2D with input_zp = output_zp = 0 (docs/semantics.md §8.4); the maximum starts from the type
minimum over the in-bounds taps (TOSA MAX_POOL2D). Both then clamp to the fused activation range."""

from __future__ import annotations

from ...ir.graph import Op
from ..base import Lowerer, rule
from ..common import crop_input
from .common import fused_bounds, operands, quantized, rank4, same_type, tfl_window, window_output


@rule("tfl.average_pool_2d", "tfl.max_pool_2d")
def lower_pool_2d(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, (1,))
    qx, qy = quantized(lw, x), quantized(lw, y)
    same_type(lw, x, y)
    rank4(lw, x, "N, H, W, C")
    if abs(float(qx.scale) - float(qy.scale)) > 1e-6 or qx.zero_point != qy.zero_point:
        raise lw.error(f"input and output quantization must agree (TFLM), got {qx.describe()} and {qy.describe()}")
    win = tfl_window(lw, x, (int(lw.attr("filter_height")), int(lw.attr("filter_width"))))
    window_output(lw, x, y, win, x.shape[3])
    lo, hi = fused_bounds(lw, y)
    clamp = (lo, hi) != (y.dtype.min, y.dtype.max)
    out = lw.temp(f"{y.name}_pool", y.shape, y.dtype) if clamp else y.name
    attrs = dict(kernel=list(win.kernel), stride=list(win.stride), pad=list(win.pad))
    if op.kind == "tfl.average_pool_2d":
        attrs.update(input_zp=0, output_zp=0, acc_type="i32")
    lw.emit("AVG_POOL2D" if op.kind == "tfl.average_pool_2d" else "MAX_POOL2D", [crop_input(lw, x.name, win)],
            [out], **attrs)
    if clamp:
        lw.emit("CLAMP", [out], [y.name], min_val=lo, max_val=hi)
