"""uint8 data as int8, uint16 data as int16 (a Graph -> Graph rewrite after import and layout).

Every quantized computation reads an unsigned value q only as q - zero_point, or compares it with others of the
same type, so storing q - 128 (uint16: q - 32768) with zero point zp - 128 (zp - 32768) in the signed type changes
no result (the shift is exact and preserves order); it lets the signed primitives (whose input zero points TOSA
allows only for int8; MAX_POOL2D and GATHER take int16, not uint16) run unsigned models without a conversion per op.
Constants are shifted at compile time, the integer operators' zero-point attributes and constant pad values with
them. Unsigned graph inputs and outputs keep their type: one onnx.Rebase (q <-> q - offset) converts them at the
boundary. Tensors only QuantizeLinear / DequantizeLinear touch stay unsigned.
"""

from __future__ import annotations

import numpy as np

from ..ir.dtypes import dtype
from ..ir.graph import Graph, Op, Tensor
from ..ir.quant import QuantType

# ops whose onnxruntime kernels compute in float32 on the stored values themselves (not only on q - zp): their
# rounding depends on the representation, so the lowering recomputes them on the uint8 values
_STORED_VALUE_ARITHMETIC = ("onnx.QLinearAdd", "onnx.QLinearMul", "onnx.QLinearSoftmax")
_FLOAT_BOUNDARY = ("onnx.QuantizeLinear", "onnx.DequantizeLinear")
_ZERO_POINT_ATTRS = {"onnx.ConvInteger": ("x_zero_point", "w_zero_point"),
                     "onnx.MatMulInteger": ("a_zero_point", "b_zero_point")}


# unsigned storage type -> (signed storage type, offset subtracted from the stored values)
SIGNED = {"u8": ("i8", 128), "u16": ("i16", 32768)}


def _shifted(dtype: str, q: QuantType | None) -> QuantType:
    signed, offset = SIGNED[dtype]
    if q is None:
        return QuantType.per_tensor(signed, 1.0, -offset)
    return QuantType(signed, q.scales, q.zero_points - offset, axis=q.axis, block_sizes=q.block_sizes,
                     storage_min=q.storage_min - offset, storage_max=q.storage_max - offset)


def _fresh(graph: Graph, base: str) -> str:
    name = base
    while name in graph.tensors:
        name += "_"
    return name


def _shift_attrs(op: Op, unsigned: dict[str, int]) -> None:
    for position, key in enumerate(_ZERO_POINT_ATTRS.get(op.kind, ())):
        if op.inputs[position] in unsigned:
            value, offset = op.attrs[key], unsigned[op.inputs[position]]
            op.attrs[key] = [v - offset for v in value] if isinstance(value, list) else value - offset
    if op.kind == "onnx.Pad" and op.inputs[0] in unsigned:
        op.attrs["value"] -= unsigned[op.inputs[0]]


def rebase_unsigned(graph: Graph) -> None:
    # the unsigned tensors an integer computation touches (QuantizeLinear / DequantizeLinear read any type)
    unsigned = {n: SIGNED[graph.tensors[n].dtype.name][1] for op in graph.ops if op.kind not in _FLOAT_BOUNDARY
                for n in op.inputs + op.outputs if graph.tensors[n].dtype.name in SIGNED}
    if not unsigned:
        return
    for op in graph.ops:
        _shift_attrs(op, unsigned)
        if op.kind in _STORED_VALUE_ARITHMETIC:
            op.attrs["unsigned"] = op.outputs[0] in unsigned
    boundary_in = [n for n in graph.inputs if n in unsigned]
    boundary_out = [n for n in graph.outputs if n in unsigned and n not in graph.inputs]
    for name in set(unsigned) - set(boundary_in) - set(boundary_out):
        t = graph.tensors[name]
        signed = SIGNED[t.dtype.name][0]
        data = None if t.data is None else (t.data.astype(np.int32) - unsigned[name]).astype(dtype(signed).numpy)
        graph.tensors[name] = Tensor(name, t.shape, signed, _shifted(t.dtype.name, t.quant), data)
    renames: dict[str, str] = {}
    head, tail = [], []
    for name in boundary_in + boundary_out:
        t = graph.tensors[name]
        signed = SIGNED[t.dtype.name][0]
        inner = _fresh(graph, f"{name}__{signed}")
        graph.tensors[inner] = Tensor(inner, t.shape, signed, _shifted(t.dtype.name, t.quant))
        if name in boundary_in:
            head.append(Op("onnx.Rebase", [name], [inner], name=f"{name} as {signed}"))
        else:
            tail.append(Op("onnx.Rebase", [inner], [name], name=f"{name} as {t.dtype.name}"))
        renames[name] = inner
    for op in graph.ops:
        op.inputs = [renames.get(n, n) for n in op.inputs]
        op.outputs = [renames.get(n, n) if n in boundary_out else n for n in op.outputs]
    graph.ops = head + graph.ops + tail
