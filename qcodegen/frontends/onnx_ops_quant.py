"""Import of QuantizeLinear / DequantizeLinear (the float boundary) and the com.microsoft element-wise QLinear
operators.

QuantizeLinear -> onnx.QuantizeLinear [x f32] -> y (per tensor, per axis, or blocked along `axis` by block_size;
int4/uint4/int8/uint8/int16/uint16). DequantizeLinear -> onnx.DequantizeLinear [x] -> y f32 (also int32 data).
QLinearAdd, QLinearMul -> onnx.QLinearAdd / onnx.QLinearMul [a, b] (numpy broadcasting); QLinearSigmoid,
QLinearLeakyRelu (alpha) -> [x]; QLinearSoftmax -> [x] with axis and the opset its semantics follow;
QLinearConcat -> onnx.QLinearConcat [x...] with axis.
"""

from __future__ import annotations

import numpy as np

from ..errors import shorten
from ..ir.graph import Tensor
from ..semantics.onnxruntime import scalar_operand
from .onnx_import import Importer, importer, ms, storage_dtype
from .onnx_model import ELEM_TYPES, Node

_Q_TYPES = ("u8", "i8", "u16", "i16", "u4", "i4")


def _axis(imp: Importer, rank: int) -> int:
    axis = int(imp.attr("axis", 1))
    if rank and not -rank <= axis < rank:
        raise imp.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _q_params(imp: Importer, x_shape: tuple[int, ...], storage: str, scale_i: int, zp_i: int):
    scale = imp.scale_in(scale_i, "scale")
    zp = imp.zero_point_in(zp_i, "zero point", storage, scale.shape)
    block = int(imp.attr("block_size", 0))
    axis = _axis(imp, len(x_shape)) if (scale.size > 1 or block) else None
    return imp.quant_type(storage, scale, zp, x_shape, axis, block, what="quantization")


@importer("QuantizeLinear")
@ms("QuantizeLinear")  # quantize_static writes the contrib ops for 4-bit and 16-bit types before opset 21
def quantize_linear(imp: Importer, node: Node) -> None:
    imp.counts((2, 3))
    x = imp.tensor_in(0)
    if x.dtype.name != "f32":  # a constant (QAT exports' float weights) is quantized by the QDQ folding
        raise imp.unsupported(f"input {shorten(x.name)} must be a float32 tensor (got {x.dtype})")
    if imp.name_in(2, required=False) is not None:
        storage = imp.zero_point_type(2, "u8")
    else:
        out_type = int(imp.attr("output_dtype", 0))
        storage = ELEM_TYPES.get(out_type, (None,))[0] if out_type else "u8"
    if storage not in _Q_TYPES:
        raise imp.unsupported(f"quantized type {storage} is not supported (supported: {', '.join(_Q_TYPES)})")
    q = _q_params(imp, x.shape, storage_dtype(imp, storage), 1, 2)
    y = imp.new_tensor(imp.name_out(), x.shape, q.storage.name, q)
    imp.emit("QuantizeLinear", [x.name], [y.name])


@importer("DequantizeLinear")
@ms("DequantizeLinear")
def dequantize_linear(imp: Importer, node: Node) -> None:
    imp.counts((2, 3))
    x = imp.tensor_in(0)
    if x.dtype.name not in _Q_TYPES + ("i32",):
        raise imp.unsupported(f"input {shorten(x.name)} has type {x.dtype} (supported: {', '.join(_Q_TYPES)}, i32)")
    imp.bind(x, _q_params(imp, x.shape, x.dtype.name, 1, 2), "input")
    y = imp.new_tensor(imp.name_out(), x.shape, "f32")
    imp.emit("DequantizeLinear", [x.name], [y.name])


def broadcast(imp: Importer, *tensors: Tensor) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(t.shape for t in tensors)))
    except ValueError:
        raise imp.error(f"shapes {[list(t.shape) for t in tensors]} do not broadcast") from None


def _eight_bit_operand(imp: Importer, i: int, scale_i: int, zp_i: int, what: str) -> Tensor:
    t = imp.tensor_in(i)
    if t.dtype.name not in ("u8", "i8"):
        raise imp.unsupported(f"{what} {shorten(t.name)} has type {t.dtype} (supported: uint8, int8)")
    imp.bind(t, imp.qlinear_params(scale_i, zp_i, t, what), what)
    return t


@ms("QLinearAdd", "QLinearMul")
def qlinear_binary(imp: Importer, node: Node) -> None:
    imp.counts((7, 8))
    a = _eight_bit_operand(imp, 0, 1, 2, "A")
    b = _eight_bit_operand(imp, 3, 4, 5, "B")
    if a.dtype != b.dtype:
        raise imp.error(f"A is {a.dtype}, B {b.dtype}")
    qc = imp.qlinear_params(6, 7, a.dtype.name, "C")
    y = imp.new_tensor(imp.name_out(), broadcast(imp, a, b), a.dtype.name, qc)
    imp.emit(node.op_type, [a.name, b.name], [y.name], scalar=scalar_operand(a.shape, b.shape))


@ms("QLinearSigmoid", "QLinearLeakyRelu")
def qlinear_unary(imp: Importer, node: Node) -> None:
    imp.counts((4, 5))
    x = _eight_bit_operand(imp, 0, 1, 2, "X")
    qy = imp.qlinear_params(3, 4, x.dtype.name, "Y")
    y = imp.new_tensor(imp.name_out(), x.shape, x.dtype.name, qy)
    attrs = {"alpha": float(np.float32(imp.attr("alpha", 0.01)))} if node.op_type == "QLinearLeakyRelu" else {}
    imp.emit(node.op_type, [x.name], [y.name], **attrs)


@ms("QLinearSoftmax")
def qlinear_softmax(imp: Importer, node: Node) -> None:
    imp.counts((4, 5))
    x = _eight_bit_operand(imp, 0, 1, 2, "X")
    qy = imp.qlinear_params(3, 4, x.dtype.name, "Y")
    opset = int(imp.attr("opset", kind=int))
    rank = len(x.shape)
    axis = int(imp.attr("axis", 1 if opset < 13 else -1))
    if not -rank <= axis < rank:
        raise imp.error(f"axis {axis} is out of range for rank {rank}")
    y = imp.new_tensor(imp.name_out(), x.shape, x.dtype.name, qy)
    imp.emit("QLinearSoftmax", [x.name], [y.name], axis=axis % rank, opset=opset)


@ms("QLinearConcat")
def qlinear_concat(imp: Importer, node: Node) -> None:
    n = len(node.inputs)
    if n < 5 or (n - 2) % 3:
        raise imp.error(f"expects Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, got {n} inputs")
    parts = [_eight_bit_operand(imp, i, i + 1, i + 2, f"input {i // 3}") for i in range(2, n, 3)]
    if len({t.dtype for t in parts}) != 1:
        raise imp.error("inputs of different types")
    ranks = {len(t.shape) for t in parts}
    rank = ranks.pop()
    if ranks:
        raise imp.error("inputs of different ranks")
    axis = int(imp.attr("axis", kind=int))
    if not -rank <= axis < rank:
        raise imp.error(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    for t in parts[1:]:
        if any(t.shape[d] != parts[0].shape[d] for d in range(rank) if d != axis):
            raise imp.error(f"input shapes {[list(p.shape) for p in parts]} differ outside axis {axis}")
    shape = list(parts[0].shape)
    shape[axis] = sum(t.shape[axis] for t in parts)
    qy = imp.qlinear_params(0, 1, parts[0].dtype.name, "Y")
    y = imp.new_tensor(imp.name_out(), tuple(shape), parts[0].dtype.name, qy)
    imp.emit("QLinearConcat", [t.name for t in parts], [y.name], axis=axis)
