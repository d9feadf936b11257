"""The ONNX front end's import of validated nodes (onnx_model.Model) into a Graph in ONNX's own layout (NCHW).

Each supported (domain, op_type) has an import function (modules onnx_ops_*.py register them with @importer)
that checks the node's inputs and attributes, computes its output shapes and types, and emits Graph ops on
quantized tensors: the quantization parameters that QLinear operators pass as inputs (scales, zero points)
become the QuantType of the tensors they describe, so that an op means the same whether it came from an operator-
format model (QLinearConv) or, later, from a folded QDQ pattern (DequantizeLinear -> Conv -> QuantizeLinear).
Graph op kinds are "onnx.<OpType>" for both domains (the com.microsoft QLinear ops keep their names).

Nodes whose inputs are all constants (shape arithmetic: Shape of a static tensor, Gather, Concat, Cast, ...) are
evaluated here with onnx's reference evaluator and become constants; QuantizeLinear and DequantizeLinear are kept
(their constant operands are the weights of quantized ops).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import GraphError, UnsupportedError, shorten
from ..ir.dtypes import dtype
from ..ir.graph import Graph, Op, Tensor
from ..ir.limits import element_count
from ..ir.quant import QuantType
from .onnx_model import ELEM_TYPES, MS_DOMAIN, Model, Node, onnx_module, type_name

ImportFn = Callable[["Importer", Node], None]
IMPORTERS: dict[tuple[str, str], ImportFn] = {}
_KEEP = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}  # never folded on constants
_NUMPY_DTYPES = {"f32": "f32", "f16": "f32", "f64": "f32"}  # float constants are read as float32


def importer(*op_types: str, domain: str = "") -> Callable[[ImportFn], ImportFn]:
    def register(fn: ImportFn) -> ImportFn:
        for op_type in op_types:
            IMPORTERS[(domain, op_type)] = fn
        return fn
    return register


def ms(*op_types: str) -> Callable[[ImportFn], ImportFn]:
    return importer(*op_types, domain=MS_DOMAIN)


def _dtype_of(elem: int) -> str | None:
    return ELEM_TYPES.get(elem, (None, 0, ""))[0]


_ATTR_KINDS = {int: "an integer", float: "a number", str: "a string", list: "a list of integers"}


def _attr_is(value: Any, kind: type) -> bool:
    if kind is list:
        return isinstance(value, list) and all(isinstance(v, int) for v in value)
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


class Importer:
    """State while importing one model: the Graph under construction, the constants, the current node."""

    def __init__(self, model: Model, where: str) -> None:
        self.model, self.where = model, where
        self.opset = model.opsets[""]
        self.graph = Graph(model.name, options={"source": "onnx"})
        self.consts: dict[str, np.ndarray] = dict(model.initializers)
        self.const_types = dict(model.initializer_types)
        self.node: Node | None = None
        for v in model.inputs:
            dt = _dtype_of(v.elem)
            if dt not in ("f32", "u8", "i8", "u16", "i16", "i32", "u4", "i4"):
                raise UnsupportedError(f"{where}: graph input {shorten(v.name)} has element type {type_name(v.elem)} "
                                       "(supported: FLOAT, UINT8, INT8, UINT16, INT16, INT32, UINT4, INT4)")
            if v.shape is None:
                raise UnsupportedError(f"{where}: graph input {shorten(v.name)} has no shape; qcodegen needs static "
                                       "shapes")
            self.graph.tensors[v.name] = Tensor(v.name, v.shape, dt)
            self.graph.inputs.append(v.name)

    # --- errors -------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        return f"{self.where}: {self.node.label}" if self.node else self.where

    def error(self, message: str) -> GraphError:
        return GraphError(f"{self.label}: {message}")

    def unsupported(self, message: str) -> UnsupportedError:
        return UnsupportedError(f"{self.label}: {message}")

    # --- node access --------------------------------------------------------------------------
    def name_in(self, i: int, required: bool = True) -> str | None:
        assert self.node is not None
        name = self.node.inputs[i] if i < len(self.node.inputs) else ""
        if not name:
            if required:
                raise self.error(f"input {i} is required")
            return None
        return name

    def name_out(self, i: int = 0) -> str:
        assert self.node is not None
        if i >= len(self.node.outputs) or not self.node.outputs[i]:
            raise self.error(f"output {i} is required")
        return self.node.outputs[i]

    def counts(self, inputs: tuple[int, int], outputs: tuple[int, int] = (1, 1)) -> None:
        assert self.node is not None
        n_in = len(self.node.inputs)
        n_out = len([o for o in self.node.outputs if o])
        if not inputs[0] <= n_in <= inputs[1]:
            raise self.error(f"expects {inputs[0]}..{inputs[1]} inputs, got {n_in}")
        if not outputs[0] <= n_out <= outputs[1] or len(self.node.outputs) > outputs[1]:
            raise self.unsupported(f"expects {outputs[0]}..{outputs[1]} outputs, got {len(self.node.outputs)}")

    def attr(self, key: str, default: Any = ..., kind: type | None = None) -> Any:
        """Attribute `key` of the current node, checked to be of `kind` (by default the type of `default`: int,
        float (an int too), str, or list: of integers)."""
        assert self.node is not None
        if key not in self.node.attrs:
            if default is ...:
                raise self.error(f"missing attribute {shorten(key)}")
            return default
        value = self.node.attrs[key]
        kind = kind or (type(default) if default not in (..., None) else None)
        if kind is not None and not _attr_is(value, kind):
            raise self.error(f"attribute {shorten(key)} must be {_ATTR_KINDS[kind]}, got {shorten(value, 40)}")
        return value

    def ints_attr(self, key: str, length: int, default: int) -> list[int]:
        value = self.attr(key, None, list)
        if value is None:
            return [default] * length
        if len(value) != length:
            raise self.error(f"attribute {shorten(key)} must be {length} integers, got {shorten(value, 40)}")
        return value

    # --- tensors ------------------------------------------------------------------------------
    def const(self, name: str | None) -> np.ndarray | None:
        return None if name is None else self.consts.get(name)

    def const_in(self, i: int, what: str, required: bool = True) -> np.ndarray | None:
        name = self.name_in(i, required)
        if name is None:
            return None
        value = self.const(name)
        if value is None:
            if name in self.const_types:
                raise self.unsupported(f"{what} {shorten(name)} has element type {type_name(self.const_types[name])}")
            raise self.unsupported(f"{what} {shorten(name)} must be a constant (an initializer or computed from "
                                   "constants)")
        return value

    def int_list_in(self, i: int, what: str, required: bool = True) -> list[int] | None:
        value = self.const_in(i, what, required)
        if value is None:
            return None
        if value.ndim > 1 or not np.issubdtype(value.dtype, np.integer):
            raise self.error(f"{what} must be a 1-D integer tensor, got {value.dtype} {list(value.shape)}")
        return [int(v) for v in value.reshape(-1)]

    def tensor(self, name: str) -> Tensor:
        """The Graph tensor of `name` (an initializer becomes a constant tensor on first use)."""
        if name in self.graph.tensors:
            return self.graph.tensors[name]
        value = self.consts.get(name)
        if value is None:
            if name in self.const_types:
                raise self.unsupported(f"tensor {shorten(name)} has element type {type_name(self.const_types[name])}")
            raise self.error(f"tensor {shorten(name)} is not defined")
        dt = self._const_dtype(name, value)
        data = value.astype(np.float32) if dt == "f32" else value
        t = Tensor(name, tuple(value.shape), dt, data=data)
        self.graph.tensors[name] = t
        return t

    def _const_dtype(self, name: str, value: np.ndarray) -> str:
        dt = _dtype_of(self.const_types.get(name, 0))
        if dt is None:
            dt = {"float32": "f32", "float64": "f32", "float16": "f32", "int8": "i8", "uint8": "u8",
                  "int16": "i16", "uint16": "u16", "int32": "i32", "int64": "i64", "bool": "bool"}.get(
                value.dtype.name)
        dt = _NUMPY_DTYPES.get(dt, dt)
        if dt is None or dt not in ("f32", "u8", "i8", "u16", "i16", "i32", "i64", "bool", "u4", "i4"):
            raise self.unsupported(f"constant {shorten(name)} has unsupported element type {value.dtype}")
        return dt

    def tensor_in(self, i: int) -> Tensor:
        return self.tensor(self.name_in(i))

    def new_tensor(self, name: str, shape: tuple[int, ...], dt: str, quant: QuantType | None = None) -> Tensor:
        if name in self.graph.tensors or name in self.consts:
            raise self.error(f"tensor {shorten(name)} is defined twice")
        t = Tensor(name, tuple(int(d) for d in shape), dt, quant)
        self.graph.tensors[name] = t
        return t

    def fresh(self, base: str) -> str:
        name = base
        while name in self.graph.tensors or name in self.consts:
            name += "_"
        return name

    def label_name(self, output: str) -> str:
        """The name an op emitted for the current node carries: the node's, else its ONNX output's."""
        assert self.node is not None
        return self.node.name or output

    def emit(self, kind: str, inputs: list[str], outputs: list[str], **attrs: Any) -> Op:
        op = Op(f"onnx.{kind}", inputs, outputs, attrs, name=self.label_name(outputs[0]))
        self.graph.ops.append(op)
        return op

    # --- quantization parameters ----------------------------------------------------------------
    def scale_in(self, i: int, what: str) -> np.ndarray:
        """A scale input as float32 values (float32 or float16 in the file; both exact in float32)."""
        value = self.const_in(i, what)
        if not np.issubdtype(value.dtype, np.floating):
            raise self.error(f"{what} must be a float tensor, got {value.dtype}")
        scales = np.asarray(value, np.float32)
        if not np.all(np.isfinite(scales) & (scales > 0)):
            raise self.error(f"{what} must be finite and > 0, got {scales.reshape(-1)[:4].tolist()}")
        return scales

    def zero_point_in(self, i: int, what: str, storage: str, shape: tuple[int, ...]) -> np.ndarray:
        """A zero-point input (absent: 0) as int64 of `shape`; its element type must be the data's."""
        name = self.name_in(i, required=False)
        if name is None:
            return np.zeros(shape, np.int64)
        value = self.const_in(i, what)
        elem = _dtype_of(self.const_types.get(name, 0)) or self._const_dtype(name, value)
        if elem != storage:
            raise self.error(f"{what} {shorten(name)} has type {elem}, the data {storage}")
        if value.shape != shape and not (value.size == 1 and int(np.prod(shape)) == 1):
            raise self.error(f"{what} has shape {list(value.shape)}, its scale {list(shape)}")
        return value.astype(np.int64).reshape(shape)

    def zero_point_type(self, i: int, default: str) -> str:
        """The element type of zero-point input i (the type of the data it describes), or `default` if absent."""
        name = self.name_in(i, required=False)
        if name is None:
            return default
        value = self.const_in(i, "zero point")
        dt = _dtype_of(self.const_types.get(name, 0)) or self._const_dtype(name, value)
        if dt not in ("u8", "i8", "u16", "i16", "i32", "u4", "i4"):
            raise self.unsupported(f"zero point {shorten(name)} has type {dt}; quantized type {dt} is not supported")
        return dt

    def integer_zero_point(self, i: int, data: Tensor, n: int, what: str) -> list[int]:
        """A zero point of an integer operator (ConvInteger, MatMulInteger): absent (0), one, or n values of the
        data's type."""
        name = self.name_in(i, required=False)
        if name is None:
            return [0]
        value = self.const_in(i, what)
        dt = _dtype_of(self.const_types.get(name, 0)) or self._const_dtype(name, value)
        if dt != data.dtype.name:
            raise self.error(f"{what} has type {dt}, its data {shorten(data.name)} {data.dtype}")
        if value.size not in (1, n) or value.ndim > 1:
            raise self.unsupported(f"{what} of shape {list(value.shape)} (supported: one value, or {n})")
        return [int(v) for v in value.reshape(-1)]

    def quant_type(self, storage: str, scale: np.ndarray, zero_point: np.ndarray, data_shape: tuple[int, ...],
                   axis: int | None = None, block_size: int = 0, what: str = "") -> QuantType:
        """The QuantType of ONNX quantization parameters: a scalar or [1] scale is per tensor, a 1-D one per axis
        along `axis`, one of the data's rank blocked along `axis` by `block_size` (opset 21)."""
        scale = np.asarray(scale, np.float32)
        zp = np.asarray(zero_point, np.int64)
        if scale.size == 1 and scale.ndim <= 1 and not block_size:
            return QuantType.per_tensor(storage, float(scale.reshape(-1)[0]), int(zp.reshape(-1)[0]))
        rank = len(data_shape)
        if axis is None or not -rank <= axis < rank:
            raise self.error(f"{what}: quantization axis {axis} is out of range for rank {rank}")
        axis %= rank
        if block_size:
            want = list(data_shape)
            if block_size <= 0 or data_shape[axis] % block_size:
                raise self.unsupported(f"{what}: block_size {block_size} does not divide dimension {axis} "
                                       f"({data_shape[axis]}); partial blocks are not supported")
            want[axis] = data_shape[axis] // block_size
            if list(scale.shape) != want:
                raise self.error(f"{what}: blocked scales have shape {list(scale.shape)}, expected {want}")
            blocks = [1] * rank
            blocks[axis] = block_size
            return QuantType(storage, scale.astype(np.float64), zp.reshape(scale.shape), block_sizes=tuple(blocks))
        if scale.ndim != 1 or scale.size != data_shape[axis]:
            raise self.error(f"{what}: {scale.size} scales for axis {axis} of size {data_shape[axis]}")
        return QuantType.per_axis(storage, scale.astype(np.float64), zp.reshape(-1), axis)

    def qlinear_params(self, scale_i: int, zp_i: int, data: Tensor | str, what: str,
                       axis: int | None = None) -> QuantType:
        """The (scale, zero point) input pair of a QLinear operator for `data` (a tensor or its ONNX dtype)."""
        storage = data if isinstance(data, str) else data.dtype.name
        scale = self.scale_in(scale_i, f"{what} scale")
        zp = self.zero_point_in(zp_i, f"{what} zero point", storage, scale.shape)
        shape = () if isinstance(data, str) else data.shape
        return self.quant_type(storage, scale, zp, shape, axis, what=what)

    def bind(self, t: Tensor, q: QuantType, what: str) -> None:
        """Give `t` the quantization `q` an operator reads it with: a tensor seen for the first time (a graph
        input, a constant) takes it; a quantized one must already have it."""
        if t.dtype.name != q.storage.name:
            raise self.error(f"{what} {shorten(t.name)} is {t.dtype}, its quantization parameters are {q.storage}")
        if t.quant is None:
            if t.dtype.is_float:
                raise self.error(f"{what} {shorten(t.name)} is float, expected quantized {q.storage}")
            t.quant = q
            return
        if not same_quant(t.quant, q):
            raise self.unsupported(f"{what} {shorten(t.name)} is read as {q.describe()} but was produced as "
                                   f"{t.quant.describe()}; reinterpreting stored values is not supported")

    # --- driver -------------------------------------------------------------------------------
    def run(self) -> Graph:
        for node in self.model.nodes:
            self.node = node
            if not any(node.outputs):  # every ONNX operator has an output
                raise self.error("has no output")
            if self._fold(node):
                continue
            fn = IMPORTERS.get((node.domain, node.op_type))
            if fn is None:
                raise UnsupportedError(f"{self.label}: operator {shorten(node.op_type)} is not supported by the ONNX "
                                       "front end (docs/onnx.md lists the supported operators)")
            fn(self, node)
        self.node = None
        for v in self.model.outputs:
            if v.name not in self.graph.tensors:
                self.tensor(v.name)
            self.graph.outputs.append(v.name)
        return self.graph

    def _fold(self, node: Node) -> bool:
        """Evaluate a default-domain node whose inputs are all constants (or Shape / Size of a static tensor)."""
        if node.domain or node.op_type in _KEEP:
            return False
        names = [n for n in node.inputs if n]
        if node.op_type in ("Shape", "Size") and names and names[0] in self.graph.tensors:
            shape = self.graph.tensors[names[0]].shape
            if node.op_type == "Size":
                self._set_const(node.outputs[0], np.array(int(np.prod(shape, dtype=np.int64)), np.int64))
                return True
            start, end = self.attr("start", 0), self.attr("end", len(shape))
            self._set_const(node.outputs[0], np.array(shape[start:end], np.int64))
            return True
        if node.op_type == "Constant":
            self._set_const(node.outputs[0], self._constant_value(node))
            return True
        if not names or any(n not in self.consts for n in names):
            return False
        outputs = self._evaluate(node)
        for name, value in zip(node.outputs, outputs, strict=False):
            if name:
                self._set_const(name, np.asarray(value))
        return True

    def _constant_value(self, node: Node) -> np.ndarray:
        attrs = node.attrs
        if len(attrs) != 1:
            raise self.error(f"Constant needs exactly one value attribute, got {sorted(attrs)}")
        key, value = next(iter(attrs.items()))
        if key == "value":
            if value is None:
                raise self.unsupported("Constant of an unsupported element type")
            return value
        if key in ("value_float", "value_floats"):
            return np.asarray(value, np.float32)
        if key in ("value_int", "value_ints"):
            return np.asarray(value, np.int64)
        raise self.unsupported(f"Constant with attribute {shorten(key)}")

    def _set_const(self, name: str, value: np.ndarray) -> None:
        if name in self.consts or name in self.graph.tensors:
            raise self.error(f"output {shorten(name)} is defined twice")
        self.consts[name] = value

    def _evaluate(self, node: Node) -> list[Any]:
        onnx = onnx_module()
        self._check_fold_size(node)
        from onnx import helper, numpy_helper
        from onnx.reference import ReferenceEvaluator

        inits = [numpy_helper.from_array(np.asarray(self.consts[n]), n) for n in dict.fromkeys(i for i in node.inputs
                                                                                              if i)]
        proto = helper.make_node(node.op_type, node.inputs, node.outputs, **node.attrs)
        outs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.outputs if o]
        graph = helper.make_graph([proto], "fold", [], outs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            results = ReferenceEvaluator(model).run(None, {})
        except Exception as exc:  # the evaluator raises whatever its kernels raise
            raise self.error(f"cannot evaluate this node on its constant inputs ({type(exc).__name__}: "
                             f"{exc})"[:300]) from None
        for name, value in zip(node.outputs, results, strict=False):
            element_count(np.shape(value), f"{self.label}: output {shorten(name)}")
        return results

    def _check_fold_size(self, node: Node) -> None:
        """The ops whose constant result can be far larger than their inputs (a shape or a count as data): their
        result's size against the resource limits before the evaluator allocates it."""
        op, ins = node.op_type, [self.consts.get(n) for n in node.inputs]
        where = f"{self.label}: output {shorten(node.outputs[0] if node.outputs else '')}"
        with np.errstate(all="ignore"):
            if op in ("ConstantOfShape", "Expand") and len(ins) >= (1 if op == "ConstantOfShape" else 2):
                shape = [int(d) for d in np.asarray(ins[-1]).reshape(-1)]
                if op == "Expand":
                    element_count(shape, where)
                    shape = shape + [int(d) for d in np.shape(ins[0])]  # (the broadcast is at most both)
                element_count(shape, where)
            elif op == "Tile" and len(ins) == 2:
                repeats = [int(d) for d in np.asarray(ins[1]).reshape(-1)]
                element_count(repeats + [int(np.size(ins[0]))], where)
            elif op == "Range" and len(ins) == 3 and all(np.size(v) == 1 for v in ins):
                start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in ins)
                count = (limit - start) / delta if delta else float("inf")
                if not np.isfinite(count):
                    raise self.error(f"Range from {start} to {limit} by {delta}: not a finite count")
                element_count([max(int(np.ceil(count)), 0)], where)
            elif op in ("Resize", "Upsample") and ins and ins[0] is not None:
                self._check_resize(op, ins, where)

    def _check_resize(self, op: str, ins: list, where: str) -> None:
        """The output size of a constant Resize / Upsample, from its `sizes` or its `scales`, within the limits."""
        sizes = ins[3] if op == "Resize" and len(ins) > 3 else None
        if sizes is not None and np.size(sizes):
            element_count([int(d) for d in np.asarray(sizes).reshape(-1)], where)
            return
        scales = ins[2] if op == "Resize" and len(ins) > 2 else ins[1] if op == "Upsample" and len(ins) > 1 else None
        if scales is None or not np.size(scales):
            return
        factors = np.asarray(scales, np.float64).reshape(-1)
        if not np.all(np.isfinite(factors)):
            raise self.error(f"{op} scales {factors.tolist()[:8]}: not finite")
        element_count([int(np.floor(d * f)) for d, f in zip(np.shape(ins[0]), factors, strict=False)], where)


def same_quant(a: QuantType, b: QuantType) -> bool:
    return (a.storage == b.storage and a.kind == b.kind and a.axis == b.axis and a.block_sizes == b.block_sizes
            and a.scales.shape == b.scales.shape and bool(np.all(a.scales == b.scales))
            and bool(np.all(a.zero_points == b.zero_points)))


def quantized(imp: Importer, t: Tensor, what: str) -> QuantType:
    """The quantization of an operand that must be quantized (8/16-bit integer data)."""
    if t.quant is None:
        raise imp.error(f"{what} {shorten(t.name)} ({t.dtype}) is not quantized")
    return t.quant


def storage_dtype(imp: Importer, elem_name: str) -> str:
    if elem_name not in ("u8", "i8", "u16", "i16", "i32", "u4", "i4"):
        raise imp.unsupported(f"quantized type {elem_name} is not supported")
    return dtype(elem_name).name
