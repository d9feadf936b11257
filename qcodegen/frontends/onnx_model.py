"""An .onnx protobuf -> plain, validated data (nodes, initializers as numpy arrays, typed graph inputs/outputs),
the boundary of the ONNX front end: every structural defect of the file (bad dimensions, dangling or repeated
names, initializers whose data does not match their shape, unknown opsets, subgraphs) is a GraphError naming the
file and the node or tensor, never an exception from deeper down (docs/onnx.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import GraphError, QcError, UnsupportedError, install_hint, shorten
from ..ir.limits import element_count

# ONNX TensorProto.DataType -> (qcodegen dtype name or None, bits per element)
ELEM_TYPES: dict[int, tuple[str | None, int, str]] = {
    1: ("f32", 32, "FLOAT"), 2: ("u8", 8, "UINT8"), 3: ("i8", 8, "INT8"), 4: ("u16", 16, "UINT16"),
    5: ("i16", 16, "INT16"), 6: ("i32", 32, "INT32"), 7: ("i64", 64, "INT64"), 8: (None, 0, "STRING"),
    9: ("bool", 8, "BOOL"), 10: ("f16", 16, "FLOAT16"), 11: ("f64", 64, "DOUBLE"), 12: (None, 32, "UINT32"),
    13: (None, 64, "UINT64"), 14: (None, 64, "COMPLEX64"), 15: (None, 128, "COMPLEX128"),
    16: (None, 16, "BFLOAT16"), 17: (None, 8, "FLOAT8E4M3FN"), 18: (None, 8, "FLOAT8E4M3FNUZ"),
    19: (None, 8, "FLOAT8E5M2"), 20: (None, 8, "FLOAT8E5M2FNUZ"), 21: ("u4", 4, "UINT4"), 22: ("i4", 4, "INT4"),
    23: (None, 4, "FLOAT4E2M1"), 24: (None, 8, "FLOAT8E8M0"), 25: (None, 2, "UINT2"), 26: (None, 2, "INT2"),
}
# numeric element types whose constants the front end reads (scales may be float16; shapes and axes int64)
_READABLE = {"f32", "u8", "i8", "u16", "i16", "i32", "i64", "bool", "f16", "f64", "u4", "i4"}
MIN_OPSET, MAX_OPSET = 10, 25
MS_DOMAIN = "com.microsoft"
_DOMAINS = ("", "ai.onnx", MS_DOMAIN)


def onnx_module() -> ModuleType:
    try:
        import onnx
    except ImportError:
        raise QcError(f"reading .onnx needs the ONNX extra: {install_hint('onnx')}") from None
    return onnx


def type_name(elem: int) -> str:
    return ELEM_TYPES.get(elem, (None, 0, f"type {elem}"))[2]


@dataclass
class Value:
    """A typed graph input / output: element type (ONNX enum) and static shape (None when not given)."""

    name: str
    elem: int
    shape: tuple[int, ...] | None


@dataclass
class Node:
    op_type: str
    domain: str  # "" for the default domain
    name: str
    inputs: list[str]  # "" for an absent optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    index: int = 0

    @property
    def label(self) -> str:
        kind = f"{self.domain}.{self.op_type}" if self.domain else self.op_type
        if not re.fullmatch(r"[\w.]{1,64}", kind, re.ASCII):  # a damaged op type: quoted and escaped
            kind = shorten(kind)
        return f"node #{self.index} {kind}" + (f" {shorten(self.name)}" if self.name else "")


@dataclass
class Model:
    name: str
    nodes: list[Node]
    initializers: dict[str, np.ndarray]
    initializer_types: dict[str, int]  # element type of every initializer (also the unreadable ones)
    inputs: list[Value]
    outputs: list[Value]
    opsets: dict[str, int]


def _text(value: str | bytes) -> str:
    """A string field of the protobuf: the runtime returns bytes where the file's text is not valid UTF-8."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _fail(where: str, message: str) -> GraphError:
    return GraphError(f"{where}: {message}")


def _opsets(proto: Any, where: str) -> dict[str, int]:
    opsets: dict[str, int] = {}
    for entry in proto.opset_import:
        domain = "" if _text(entry.domain) in ("", "ai.onnx") else _text(entry.domain)
        opsets[domain] = int(entry.version)
    if "" not in opsets:
        raise _fail(where, "the model imports no version of the default ONNX opset")
    if not MIN_OPSET <= opsets[""] <= MAX_OPSET:
        raise UnsupportedError(f"{where}: default opset {opsets['']} is outside the supported "
                               f"{MIN_OPSET}..{MAX_OPSET}")
    return opsets


def _dims(where: str, what: str, dims: Any) -> tuple[int, ...]:
    """A declared shape, checked against the resource limits (qcodegen/ir/limits.py) before any data is read."""
    out = tuple(int(d) for d in dims)
    if any(d < 0 for d in out):
        raise _fail(where, f"{what} has a negative dimension: {list(out)}")
    element_count(out, f"{where}: {what}")
    return out


def _expected_count(tensor: Any, shape: tuple[int, ...], bits: int) -> tuple[int, str]:
    """Number of stored items the tensor must hold and in which field (raw bytes or a typed repeated field)."""
    n = int(np.prod(shape, dtype=np.int64))
    if tensor.HasField("raw_data"):
        return (n * bits + 7) // 8, "raw_data"
    for name in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
        if len(getattr(tensor, name)):
            per_item = 2 if bits == 4 else 1  # int4/uint4 typed data: two values per int32 item
            return (n + per_item - 1) // per_item, name
    return n, "int32_data"


def read_tensor(onnx: ModuleType, tensor: Any, where: str) -> np.ndarray | None:
    """The numpy value of a TensorProto (None for element types qcodegen does not read); GraphError when its data
    does not match its shape."""
    label = f"initializer {shorten(tensor.name)}"
    if tensor.data_location == 1:  # EXTERNAL
        raise UnsupportedError(f"{where}: {label} keeps its data in an external file; save the model with "
                               "onnx.save(model, path, save_as_external_data=False)")
    if tensor.HasField("segment"):
        raise UnsupportedError(f"{where}: {label} is a segment of a tensor")
    shape = _dims(where, label, tensor.dims)
    if tensor.data_type not in ELEM_TYPES:
        raise _fail(where, f"{label} has unknown element type {tensor.data_type}")
    dtype, bits, _ = ELEM_TYPES[tensor.data_type]
    if dtype not in _READABLE:
        return None
    want, source = _expected_count(tensor, shape, bits)
    have = len(tensor.raw_data) if source == "raw_data" else len(getattr(tensor, source))
    if have != want:
        unit = "bytes" if source == "raw_data" else "values"
        raise _fail(where, f"{label}: {have} {unit} in {source} for shape {list(shape)} ({type_name(tensor.data_type)}"
                           f", {want} expected)")
    try:
        value = onnx.numpy_helper.to_array(tensor)
    except Exception as exc:  # the helper fails with assorted errors on inconsistent tensors
        raise _fail(where, f"{label}: unreadable data ({type(exc).__name__}: {exc})"[:300]) from None
    if dtype in ("i4", "u4"):
        value = value.astype(np.int8 if dtype == "i4" else np.uint8)
    return np.asarray(value).reshape(shape)


def _value(onnx: ModuleType, info: Any, where: str, what: str) -> Value:
    t = info.type
    if t.WhichOneof("value") != "tensor_type":
        raise UnsupportedError(f"{where}: {what} {shorten(info.name)} is not a tensor ({t.WhichOneof('value')})")
    tt = t.tensor_type
    shape = None
    if tt.HasField("shape"):
        dims = []
        for d in tt.shape.dim:
            if d.WhichOneof("value") != "dim_value":
                symbol = d.dim_param or "?"
                raise UnsupportedError(f"{where}: {what} {shorten(info.name)} has a symbolic dimension "
                                       f"{shorten(symbol)}; "
                                       "qcodegen needs static shapes (fix them first, e.g. with "
                                       "onnxruntime.tools.make_dynamic_shape_fixed)")
            dims.append(d.dim_value)
        shape = _dims(where, f"{what} {shorten(info.name)}", dims)
    return Value(_text(info.name), int(tt.elem_type), shape)


def _attribute(onnx: ModuleType, attr: Any, where: str) -> Any:
    kind = attr.type
    A = onnx.AttributeProto
    if kind == A.INT:
        return int(attr.i)
    if kind == A.FLOAT:
        return float(np.float32(attr.f))
    if kind == A.STRING:
        return attr.s.decode("utf-8", "replace")
    if kind == A.INTS:
        return [int(v) for v in attr.ints]
    if kind == A.FLOATS:
        return [float(np.float32(v)) for v in attr.floats]
    if kind == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    if kind == A.TENSOR:
        return read_tensor(onnx, attr.t, where)
    if kind in (A.GRAPH, A.GRAPHS):
        raise UnsupportedError(f"{where}: attribute {shorten(attr.name)} holds a subgraph; control flow (If, Loop, "
                               "Scan) is not supported")
    raise UnsupportedError(f"{where}: attribute {shorten(attr.name)} has unsupported type {kind}")


def parse(raw: bytes, where: str, default_name: str) -> Model:
    """Parse and validate one .onnx file's bytes."""
    onnx = onnx_module()
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(raw)
    except Exception as exc:  # google.protobuf.message.DecodeError and friends
        raise _fail(where, f"not an ONNX model protobuf ({type(exc).__name__}: {exc})"[:300]) from None
    if not proto.HasField("graph"):
        raise _fail(where, "not an ONNX model (no graph)")
    if proto.functions:
        raise UnsupportedError(f"{where}: model-local functions are not supported")
    opsets = _opsets(proto, where)
    g = proto.graph
    inits: dict[str, np.ndarray] = {}
    init_types: dict[str, int] = {}
    for t in g.initializer:
        name = _text(t.name)
        if not name:
            raise _fail(where, "an initializer has no name")
        if name in init_types:
            raise _fail(where, f"initializer {shorten(name)} is defined twice")
        value = read_tensor(onnx, t, where)
        init_types[name] = int(t.data_type)
        if value is not None:
            inits[name] = value
    if len(g.sparse_initializer):
        raise UnsupportedError(f"{where}: sparse initializers are not supported")
    inputs = [_value(onnx, v, where, "graph input") for v in g.input if _text(v.name) not in init_types]
    outputs = [_value(onnx, v, where, "graph output") for v in g.output]
    known = set(init_types) | {v.name for v in inputs}
    nodes = []
    for i, n in enumerate(g.node):
        domain = "" if _text(n.domain) in ("", "ai.onnx") else _text(n.domain)
        node = Node(_text(n.op_type), domain, _text(n.name), [_text(x) for x in n.input],
                    [_text(x) for x in n.output], index=i)
        if domain not in _DOMAINS:
            raise UnsupportedError(f"{where}: {node.label}: operator domain {shorten(domain)} is not supported "
                                   f"(supported: the default domain and {MS_DOMAIN})")
        if domain not in opsets:
            raise _fail(where, f"{node.label}: the model imports no version of domain {shorten(domain)}")
        label = f"{where}: {node.label}"
        for name in node.inputs:
            if name and name not in known:
                raise _fail(where, f"{node.label}: input {shorten(name)} is not a graph input, an initializer or the "
                                   "output of an earlier node (nodes must be in topological order)")
        for name in node.outputs:
            if name and name in known:
                raise _fail(where, f"{node.label}: output {shorten(name)} is already defined")
            if name:
                known.add(name)
        for attr in n.attribute:
            key = _text(attr.name)
            if key in node.attrs:
                raise _fail(where, f"{node.label}: attribute {shorten(key)} is given twice")
            node.attrs[key] = _attribute(onnx, attr, label)
        nodes.append(node)
    for v in outputs:
        if v.name not in known:
            raise _fail(where, f"graph output {shorten(v.name)} is never produced")
    if not outputs:
        raise _fail(where, "the graph has no outputs")
    return Model(_text(g.name) or default_name, nodes, inits, init_types, inputs, outputs, opsets)
