"""avg_pool2d, max_pool2d and mean.

Pools keep the input's quantization through the primitive (AVG_POOL2D averages the stored integers with
input_zp = output_zp = 0, rounding half away from zero: TFLite's semantics; padding taps are not counted) and
then RESCALE when the output quantization differs, CLAMPing for a fused activation.
mean RESCALEs to i32 removing the zero point, REDUCE_SUMs each axis and RESCALEs by s_in / (s_out * N)."""

from __future__ import annotations

import numpy as np

from ...ir.graph import Op, Tensor
from ..base import Lowerer, rule
from ..common import (
    activation_bounds,
    check_dtypes,
    crop_input,
    expect_rank,
    expect_shape,
    finish,
    max_offset,
    op_window,
    rescale_output,
    same_quant,
    to_i32,
)


def _unary_operands(lw: Lowerer, op: Op) -> tuple[Tensor, Tensor]:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise lw.error(f"expects 1 input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    lw.quant_in(0)
    lw.quant_out(0)
    check_dtypes(lw, (x, y), ("i8", "i16"))
    return x, y


@rule("avg_pool2d", "max_pool2d")
def lower_pool2d(lw: Lowerer, op: Op) -> None:
    x, y = _unary_operands(lw, op)
    expect_rank(lw, x, 4, "N, H, W, C")
    win = op_window(lw, x, lw.attr("kernel"))
    if any(p >= k for p, k in zip(win.pad, np.repeat(win.kernel, 2), strict=True)):
        raise lw.error(f"padding {list(win.pad)} must be smaller than the kernel {list(win.kernel)}")
    expect_shape(lw, y, (x.shape[0], *win.out, x.shape[3]))
    bounds = activation_bounds(lw, y.quant)
    direct = same_quant(x.quant, y.quant) and (bounds["out_min"], bounds["out_max"]) == (
        y.quant.storage_min, y.quant.storage_max)
    out = y.name if direct else lw.temp(f"{y.name}_pool", y.shape, x.dtype)
    attrs = dict(kernel=list(win.kernel), stride=list(win.stride), pad=list(win.pad))
    if op.kind == "avg_pool2d":
        attrs.update(input_zp=0, output_zp=0, acc_type="i32")
    lw.emit(op.kind.upper(), [crop_input(lw, x.name, win)], [out], **attrs)
    if not direct:
        finish(lw, out, x.quant, y, **bounds)


def _axes(lw: Lowerer, rank: int) -> list[int]:
    axes = lw.attr("axes")
    axes = [axes] if isinstance(axes, int) else axes
    if not isinstance(axes, list) or not axes or not all(isinstance(a, int) and -rank <= a < rank for a in axes):
        raise lw.error(f"axes must be a non-empty list of axes of a rank-{rank} tensor, got {axes!r}")
    norm = sorted({a % rank for a in axes})
    if len(norm) != len(axes):
        raise lw.error(f"axes {axes} repeat an axis")
    return norm


@rule("mean")
def lower_mean(lw: Lowerer, op: Op) -> None:
    x, y = _unary_operands(lw, op)
    if x.dtype.bits == 16 and x.quant.zero_point != 0:
        raise lw.error(f"16-bit input {x.name!r} must have zero point 0, got {x.quant.zero_point}")
    axes = _axes(lw, len(x.shape))
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    keepdims = bool(lw.attr("keepdims", False))
    expect_shape(lw, y, kept if keepdims else tuple(d for i, d in enumerate(x.shape) if i not in axes))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    acc = to_i32(lw, x.name, x.quant.zero_point)
    shape = list(x.shape)
    for a in axes:
        shape[a] = 1
        total = lw.temp(f"{y.name}_sum", tuple(shape), "i32")
        lw.emit("REDUCE_SUM", [acc], [total], axis=a)
        acc = total
    out = y.name if keepdims else lw.temp(f"{y.name}_q", kept, y.dtype)
    rescale_output(lw, acc, y, x.quant.scale / (y.quant.scale * count), max_offset(x.quant) * count,
                   dst=out, **activation_bounds(lw, y.quant))
    if out != y.name:
        lw.emit("RESHAPE", [out], [y.name], shape=list(y.shape))
