"""uint8 data as int8 (a Graph -> Graph rewrite after import and layout).

Every quantized computation reads a uint8 value q only as q - zero_point, or compares it with others of the same
type, so storing q - 128 with zero point zp - 128 in int8 changes no result; it lets the int8 primitives (whose
input zero points TOSA allows only for int8) run uint8 models without a conversion per op. Constants are shifted
at compile time, the integer operators' zero-point attributes and constant pad values with them. uint8 graph
inputs and outputs keep their type: one onnx.Rebase (q <-> q - 128) converts them at the boundary. Tensors only
QuantizeLinear / DequantizeLinear touch stay uint8.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Op, Tensor
from ..ir.quant import QuantType

# ops whose onnxruntime kernels compute in float32 on the stored values themselves (not only on q - zp): their
# rounding depends on the representation, so the lowering recomputes them on the uint8 values
_STORED_VALUE_ARITHMETIC = ("onnx.QLinearAdd", "onnx.QLinearMul", "onnx.QLinearSoftmax")
_FLOAT_BOUNDARY = ("onnx.QuantizeLinear", "onnx.DequantizeLinear")
_ZERO_POINT_ATTRS = {"onnx.ConvInteger": ("x_zero_point", "w_zero_point"),
                     "onnx.MatMulInteger": ("a_zero_point", "b_zero_point")}


def _shifted(q: QuantType | None) -> QuantType:
    if q is None:
        return QuantType.per_tensor("i8", 1.0, -128)
    return QuantType("i8", q.scales, q.zero_points - 128, axis=q.axis, block_sizes=q.block_sizes,
                     storage_min=q.storage_min - 128, storage_max=q.storage_max - 128)


def _fresh(graph: Graph, base: str) -> str:
    name = base
    while name in graph.tensors:
        name += "_"
    return name


def _shift_attrs(op: Op, unsigned: set[str]) -> None:
    for position, key in enumerate(_ZERO_POINT_ATTRS.get(op.kind, ())):
        if op.inputs[position] in unsigned:
            value = op.attrs[key]
            op.attrs[key] = [v - 128 for v in value] if isinstance(value, list) else value - 128
    if op.kind == "onnx.Pad" and op.inputs[0] in unsigned:
        op.attrs["value"] -= 128


def rebase_unsigned(graph: Graph) -> None:
    # the uint8 tensors an integer computation touches (QuantizeLinear / DequantizeLinear read any type)
    unsigned = {n for op in graph.ops if op.kind not in _FLOAT_BOUNDARY for n in op.inputs + op.outputs
                if graph.tensors[n].dtype.name == "u8"}
    if not unsigned:
        return
    for op in graph.ops:
        _shift_attrs(op, unsigned)
        if op.kind in _STORED_VALUE_ARITHMETIC:
            op.attrs["unsigned"] = op.outputs[0] in unsigned
    boundary_in = [n for n in graph.inputs if n in unsigned]
    boundary_out = [n for n in graph.outputs if n in unsigned and n not in graph.inputs]
    for name in unsigned - set(boundary_in) - set(boundary_out):
        t = graph.tensors[name]
        data = None if t.data is None else (t.data.astype(np.int16) - 128).astype(np.int8)
        graph.tensors[name] = Tensor(name, t.shape, "i8", _shifted(t.quant), data)
    renames: dict[str, str] = {}
    head, tail = [], []
    for name in boundary_in + boundary_out:
        t = graph.tensors[name]
        inner = _fresh(graph, f"{name}__i8")
        graph.tensors[inner] = Tensor(inner, t.shape, "i8", _shifted(t.quant))
        if name in boundary_in:
            head.append(Op("onnx.Rebase", [name], [inner], name=f"{name} as int8"))
        else:
            tail.append(Op("onnx.Rebase", [inner], [name], name=f"{name} as uint8"))
        renames[name] = inner
    for op in graph.ops:
        op.inputs = [renames.get(n, n) for n in op.inputs]
        op.outputs = [renames.get(n, n) if n in boundary_out else n for n in op.outputs]
    graph.ops = head + graph.ops + tail
