"""com.microsoft QLinearSoftmax -> SOFTMAX_F32 over the last axis: onnxruntime's float32 algorithm, emulated exactly
(qcodegen/primitives/softmax_f32.py; the table from qcodegen/semantics/onnxruntime.py).

Opset 13 and later take the softmax along `axis` (a TRANSPOSE to the last axis and back, as onnxruntime does);
earlier opsets along all axes from `axis` on, flattened (a RESHAPE). onnxruntime's row sum runs in that order,
which the front end's layout pass keeps (NCHW rows for opset < 13)."""

from __future__ import annotations

import numpy as np

from ...ir.graph import Op
from ...semantics.onnxruntime import softmax_output_scale, softmax_table
from ..base import Lowerer, rule
from ..common import reshape


@rule("onnx.QLinearSoftmax")
def lower_softmax(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    axis, rank = int(lw.attr("axis")), len(x.shape)
    unsigned = bool(lw.attr("unsigned", False))
    zp = y.quant.zero_point + (128 if unsigned else 0)
    attrs = dict(y_scale=float(softmax_output_scale(y.quant.scale)), output_zp=zp, qmax=255 if unsigned else 127,
                 out_offset=-128 if unsigned else 0)
    if int(lw.attr("opset")) < 13:
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        width = x.size // rows
        flat = lw.temp(f"{y.name}_rows", (rows, width), y.dtype)
        lw.emit("SOFTMAX_F32", [reshape(lw, x.name, (rows, width))], [flat],
                table=softmax_table(x.quant.scale, width).tolist(), **attrs)
        lw.emit("RESHAPE", [flat], [y.name], shape=list(y.shape))
        return
    table = softmax_table(x.quant.scale, x.shape[axis]).tolist()
    if axis == rank - 1:
        lw.emit("SOFTMAX_F32", [x.name], [y.name], table=table, **attrs)
        return
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    moved = tuple(x.shape[p] for p in perm)
    xt, yt = lw.temp(f"{x.name}_t", moved, x.dtype), lw.temp(f"{y.name}_t", moved, y.dtype)
    lw.emit("TRANSPOSE", [x.name], [xt], perms=perm)
    lw.emit("SOFTMAX_F32", [xt], [yt], table=table, **attrs)
    lw.emit("TRANSPOSE", [yt], [y.name], perms=perm)
