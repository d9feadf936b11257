"""ONNX data movement on stored values: RESHAPE, TRANSPOSE, CONCAT, PAD, SLICE / STRIDED_COPY, and GATHER of
constant indices (exact).

QLinearConcat requantizes each input whose quantization differs from the output's the way onnxruntime does
(dequantize, quantize: a 256-entry table of MLAS's float32 formula per input, exact), then CONCAT.
"""

from __future__ import annotations

import numpy as np

from ...ir.graph import Op, Tensor
from ...primitives.elementwise import contiguous_strides
from ...semantics.onnxruntime import unary_table
from ..base import Lowerer, rule
from ..common import reshape
from .tables import table


@rule("onnx.Reshape")
def lower_reshape(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    lw.emit("RESHAPE", [x.name], [y.name], shape=list(y.shape))


@rule("onnx.Transpose")
def lower_transpose(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    lw.emit("TRANSPOSE", [x.name], [y.name], perms=[int(p) for p in lw.attr("perm")])


@rule("onnx.Concat")
def lower_concat(lw: Lowerer, op: Op) -> None:
    lw.emit("CONCAT", list(op.inputs), [lw.tensor_out(0).name], axis=int(lw.attr("axis")))


def _same(a: Tensor, b: Tensor) -> bool:
    qa, qb = a.quant, b.quant
    return qa.scale == qb.scale and qa.zero_point == qb.zero_point


@rule("onnx.QLinearConcat")
def lower_qlinear_concat(lw: Lowerer, op: Op) -> None:
    y = lw.tensor_out(0)
    parts = []
    for i in range(len(op.inputs)):
        x = lw.tensor_in(i)
        if _same(x, y):
            parts.append(x.name)
            continue
        tmp = lw.temp(f"{y.name}_{x.name}_rq", x.shape, y.dtype)
        table(lw, x, unary_table(x.quant, y.quant, lambda v: v), tmp, y.dtype)
        parts.append(tmp)
    lw.emit("CONCAT", parts, [y.name], axis=int(lw.attr("axis")))


@rule("onnx.Pad")
def lower_pad(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    pads = [int(p) for p in lw.attr("pads")]
    rank = len(x.shape)
    padding = [v for d in range(rank) for v in (pads[d], pads[rank + d])]
    value = int(lw.attr("value"))
    if not x.dtype.min <= value <= x.dtype.max:
        raise lw.error(f"pad value {value} is outside {x.dtype}")
    lw.emit("PAD", [x.name], [y.name], padding=padding, pad_const=value)


@rule("onnx.Slice")
def lower_slice(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    begin, steps = [int(v) for v in lw.attr("begin")], [int(v) for v in lw.attr("steps")]
    if all(s == 1 for s in steps):
        lw.emit("SLICE", [x.name], [y.name], start=begin, size=list(y.shape))
        return
    in_strides = contiguous_strides(x.shape)
    offset = sum(b * s for b, s in zip(begin, in_strides, strict=True))
    lw.emit("STRIDED_COPY", [x.name], [y.name], offset=offset,
            strides=[st * s for st, s in zip(steps, in_strides, strict=True)])


@rule("onnx.Gather")
def lower_gather(lw: Lowerer, op: Op) -> None:
    """Constant indices along `axis`: a SLICE when they are consecutive, else TOSA's GATHER of rows on the data
    viewed as [outer, axis, inner] (the same indices for every outer position)."""
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    axis, indices = int(lw.attr("axis")), [int(i) for i in lw.attr("indices")]
    if indices == list(range(indices[0], indices[0] + len(indices))):
        start = [0] * len(x.shape)
        start[axis] = indices[0]
        lw.emit("SLICE", [x.name], [y.name], start=start, size=list(y.shape))
        return
    outer, inner = int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    rows = lw.const(f"{y.name}_indices", np.tile(np.asarray(indices, np.int32), (outer, 1)), "i32")
    picked = lw.temp(f"{y.name}_rows", (outer, len(indices), inner), y.dtype)
    lw.emit("GATHER", [reshape(lw, x.name, (outer, x.shape[axis], inner)), rows], [picked])
    lw.emit("RESHAPE", [picked], [y.name], shape=list(y.shape))
