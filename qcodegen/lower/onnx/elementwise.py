"""com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu on 8-bit data, and a QDQ model's
quantized Sub and Tanh (which onnxruntime runs in float between DQ and Q) -> tables of onnxruntime's float32
arithmetic (qcodegen/semantics/onnxruntime.py), exact by construction.

Sigmoid, LeakyRelu, Tanh, HardSigmoid, HardSwish: a table of the stored input, as onnxruntime itself builds for 8
bits (256 entries; Sigmoid and Tanh: MLAS's rational approximations, emulated); 16-bit data (no QLinear kernel:
onnxruntime runs the float op between DQ and Q) the same function over 65,536 entries. Add and Mul: a
65,536-entry LOOKUP of the x86-64 kernels' formulas over both stored operands (numpy broadcasting; the kernel's
scalar or vector form as onnxruntime's broadcasting loop picks it, decided at import); Sub, and an int8 QDQ Add
of a constant (attr float_path, which onnxruntime does not fuse): of the float path (dequantize, add / subtract,
quantize, float32).
Operands or results of 16 bits (2^32 pairs, no table): BINARY_F32, the float path's float32 operations emulated
per element (onnxruntime has no 16-bit QLinearAdd / QLinearMul and runs them in float).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op
from ...ir.quant import QuantType
from ...semantics.onnxruntime import (
    add_table,
    float_binary_table,
    hard_sigmoid,
    hard_swish,
    leaky_relu,
    mul_table,
    sigmoid,
    tanh,
    unary_table,
)
from ..base import Lowerer, rule
from ..common import align_rank
from .common import require_f32_path_scales
from .tables import table, table2


@rule("onnx.QLinearSigmoid", "onnx.QLinearLeakyRelu", "onnx.Tanh", "onnx.HardSigmoid", "onnx.HardSwish")
def lower_unary(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    if x.dtype.bits not in (8, 16) or y.dtype.bits not in (8, 16):
        raise UnsupportedError(f"{lw.label}: {x.dtype} -> {y.dtype} (supported: 8- and 16-bit data)")
    if op.kind == "onnx.HardSigmoid":
        fn = hard_sigmoid(float(lw.attr("alpha")), float(lw.attr("beta")))
    else:
        fn = {"onnx.QLinearSigmoid": sigmoid, "onnx.Tanh": tanh, "onnx.HardSwish": hard_swish}.get(
            op.kind) or leaky_relu(float(lw.attr("alpha")))
    table(lw, x, unary_table(x.quant, y.quant, fn), y.name, y.dtype)


_BINARY_F32_OPS = {"onnx.QLinearAdd": "add", "onnx.Sub": "sub", "onnx.QLinearMul": "mul"}


@rule("onnx.QLinearAdd", "onnx.QLinearMul", "onnx.Sub")
def lower_binary(lw: Lowerer, op: Op) -> None:
    a, b, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    scalar = str(lw.attr("scalar", ""))  # onnxruntime's kernel form, from the ONNX-layout shapes (import)
    try:
        broadcast_ok = np.broadcast_shapes(a.shape, b.shape) == tuple(y.shape)
    except ValueError:
        broadcast_ok = False
    if not broadcast_ok:
        raise UnsupportedError(f"{lw.label}: {list(a.shape)} and {list(b.shape)} do not broadcast to the result's "
                               f"{list(y.shape)}")
    rank = len(y.shape)
    if max(a.dtype.bits, b.dtype.bits, y.dtype.bits) > 8:  # 2^32 operand pairs: onnxruntime's float path (no
        # QLinear kernel for 16-bit data), each float32 operation emulated (BINARY_F32)
        qa, qb, qy = lw.quant_in(0), lw.quant_in(1), lw.quant_out(0)
        require_f32_path_scales(lw, [a, b, y])
        lw.emit("BINARY_F32", [align_rank(lw, a.name, rank), align_rank(lw, b.name, rank)], [y.name],
                operation=_BINARY_F32_OPS[op.kind], a_scale=qa.scale, a_zp=qa.zero_point, b_scale=qb.scale,
                b_zp=qb.zero_point, y_scale=qy.scale, y_zp=qy.zero_point, qmin=qy.storage_min, qmax=qy.storage_max)
        return
    quants = [t.quant for t in (a, b, y)]
    unsigned = bool(lw.attr("unsigned", False))
    if unsigned:  # onnxruntime's arithmetic on the uint8 values (the storage here is int8, q - 128)
        quants = [QuantType.per_tensor("u8", q.scale, q.zero_point + 128) for q in quants]
    if op.kind == "onnx.Sub" or lw.attr("float_path", False):  # onnxruntime runs a QDQ model's Sub (no
        # QLinear kernel) and an int8 Add of a constant (not fused) in float between DQ and Q
        values = float_binary_table(*quants, np.subtract if op.kind == "onnx.Sub" else np.add)
    elif op.kind == "onnx.QLinearAdd":
        values = add_table(*quants, scalar)
    else:
        values = mul_table(*quants)
    values = values - 128 if unsigned else values
    table2(lw, align_rank(lw, a.name, rank), align_rank(lw, b.name, rank), values, y.name, y.dtype)
