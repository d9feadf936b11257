"""TFLite flatbuffers (.tflite) -> Graph.

Ops become "tfl.<builtin name in lower case>" with the builtin options as snake_case attributes (enums as their
names: padding "SAME"/"VALID", fused_activation_function "NONE"/"RELU"/...). Constant tensors keep their data;
scales are float64 arrays holding the exact float32 values of the file, so double products of them reproduce
TFLite's arithmetic. Graph inputs and outputs follow the file order (subgraph 0).

Only fully quantized models are accepted: a float tensor may only enter a QUANTIZE (model input) or leave a
DEQUANTIZE (model output). Trivial ops on constants (QUANTIZE, DEQUANTIZE, RESHAPE, SQUEEZE, EXPAND_DIMS) are
folded here with TFLite's own arithmetic.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import GraphError, QcError, UnsupportedError, install_hint, shorten
from ..ir.dtypes import dtype
from ..ir.graph import Graph, Op, Tensor
from ..ir.limits import ModelBudget
from ..ir.quant import QuantType
from .tflite_state import RESOURCE_OPS, TfliteState

_TYPES = {"INT8": "i8", "UINT8": "u8", "INT16": "i16", "INT32": "i32", "INT64": "i64", "FLOAT32": "f32",
          "INT4": "i4"}
_ENUM_FIELDS = {"padding": "Padding", "fusedActivationFunction": "ActivationFunctionType",
                "weightsFormat": "FullyConnectedOptionsWeightsFormat", "outputType": "TensorType",
                "inDataType": "TensorType", "outDataType": "TensorType", "quantizedBiasType": "TensorType",
                "idxOutType": "TensorType", "mode": "MirrorPadMode"}
_FOLDABLE = {"tfl.quantize", "tfl.dequantize", "tfl.reshape", "tfl.squeeze", "tfl.expand_dims"}


def _schema() -> ModuleType:
    try:
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated
    except ImportError:
        raise QcError(f"reading .tflite needs the TFLite extra: {install_hint('tflite')}") from None
    return schema_py_generated


def _enum_names(schema: ModuleType, enum: str) -> dict[int, str]:
    return {v: k for k, v in vars(getattr(schema, enum)).items() if not k.startswith("_")}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return _text(value)
    return value


def _options(schema: ModuleType, opts: Any) -> dict[str, Any]:
    if opts is None:
        return {}
    attrs = {}
    for key, value in vars(opts).items():
        if key in _ENUM_FIELDS and isinstance(value, int):
            value = _enum_names(schema, _ENUM_FIELDS[key]).get(value, value)
        attrs[_snake(key)] = _plain(value)
    return attrs


def _parse(schema: ModuleType, raw: bytes, where: str) -> Any:
    if len(raw) < 8:
        raise GraphError(f"{where}: not a TFLite flatbuffer ({len(raw)} bytes)")
    if raw[4:8] != b"TFL3":
        raise GraphError(f"{where}: not a TFLite flatbuffer (file identifier {raw[4:8]!r}, expected b'TFL3')")
    try:
        model = schema.ModelT.InitFromPackedBuf(raw, 0)
    except Exception as exc:  # the generated parser fails with arbitrary errors on damaged input
        raise GraphError(f"{where}: corrupt or truncated TFLite flatbuffer ({type(exc).__name__}: {exc})"[:300]
                         ) from None
    if not model.subgraphs:
        raise GraphError(f"{where}: the model has no subgraph")
    return model


class _Importer:
    """Builds the Graph of subgraph 0 of a parsed ModelT."""

    def __init__(self, schema: ModuleType, model: Any, raw: bytes, name: str, where: str, subgraph: int = 0) -> None:
        self.schema, self.model, self.raw, self.where = schema, model, raw, where
        if not 0 <= subgraph < len(model.subgraphs):
            raise self.fail(f"subgraph index {subgraph} out of range ({len(model.subgraphs)} subgraphs)")
        self.sg = model.subgraphs[subgraph]
        self.tensors = self.sg.tensors or []
        self.type_names = _enum_names(schema, "TensorType")
        self.op_names = _enum_names(schema, "BuiltinOperator")
        self.graph = Graph(name, options={"rescale_rounding": "double_round", "source": "tflite"})
        self.names: dict[int, str] = {}
        self.budget = ModelBudget()
        self.state = TfliteState(self)

    def for_subgraph(self, index: int) -> _Importer:
        """An importer of another subgraph of the same model (CALL_ONCE's init subgraph)."""
        return _Importer(self.schema, self.model, self.raw, f"{self.graph.name}_sg{index}", self.where, index)

    def fail(self, message: str) -> GraphError:
        return GraphError(f"{self.where}: {message}")

    # --- tensors ------------------------------------------------------------------------------
    def tensor(self, index: int) -> str:
        """The graph tensor of tensor `index`, created on first use."""
        if index in self.names:
            return self.names[index]
        tensor = self.probe(index)
        self.graph.tensors[tensor.name] = tensor
        self.names[index] = tensor.name
        return tensor.name

    def unique_name(self, base: str, index: int | None = None) -> str:
        name = base
        while name in self.graph.tensors:  # TFLite names need not be unique
            name = f"{base}_{index}" if name == base and index is not None else f"{name}_"
        return name

    def probe(self, index: int) -> Tensor:
        """Tensor `index` as the graph would hold it, not added to the graph."""
        if not 0 <= index < len(self.tensors):
            raise self.fail(f"tensor index {index} out of range ({len(self.tensors)} tensors)")
        t = self.tensors[index]
        name = self.unique_name(_text(t.name) if t.name else f"t{index}", index)
        type_name = self.type_names.get(t.type, str(t.type))
        if type_name not in _TYPES:
            raise UnsupportedError(f"{self.where}: tensor {shorten(name)} has type {type_name}, which qcodegen does "
                                   f"not support (supported: {', '.join(_TYPES)})")
        if t.sparsity is not None:
            raise UnsupportedError(f"{self.where}: tensor {shorten(name)} is sparse; sparse tensors are not supported")
        shape = tuple(int(d) for d in (t.shape if t.shape is not None else ()))
        self.budget.declare(shape, dtype(_TYPES[type_name]).container_bytes, f"{self.where}: tensor {shorten(name)}")
        tensor = Tensor(name, shape, _TYPES[type_name], self.quant(t, name, shape, _TYPES[type_name]))
        tensor.data = self.data(t, tensor)
        return tensor

    def quant(self, t: Any, name: str, shape: tuple[int, ...], storage: str) -> QuantType | None:
        q = t.quantization
        if q is None or q.scale is None or len(q.scale) == 0 or storage == "f32":
            return None
        if q.details is not None:
            raise UnsupportedError(f"{self.where}: tensor {shorten(name)} uses custom/blockwise quantization details")
        scales = np.asarray(q.scale, np.float32).astype(np.float64)
        zps = np.asarray(q.zeroPoint if q.zeroPoint is not None and len(q.zeroPoint) else [0], np.int64)
        if scales.size == 1:
            return QuantType.per_tensor(storage, float(scales[0]), int(zps[0]))
        if zps.size not in (1, scales.size):
            raise self.fail(f"tensor {shorten(name)}: {scales.size} scales but {zps.size} zero points")
        axis = int(q.quantizedDimension)
        if len(shape) == 1 and axis != 0 and shape[0] == scales.size:
            axis = 0  # converters label biases with the conv's output axis (e.g. 3 for a depthwise bias)
        return QuantType.per_axis(storage, scales, zps, axis)

    def data(self, t: Any, tensor: Tensor) -> np.ndarray | None:
        buffers = self.model.buffers or []
        if t.buffer == 0 or t.isVariable:  # TFLM ignores a variable tensor's data (tflite_state.default_fill)
            return None
        if not 0 <= t.buffer < len(buffers):
            raise self.fail(f"tensor {shorten(tensor.name)} refers to buffer {t.buffer} of {len(buffers)}")
        buf = buffers[t.buffer]
        if buf.data is not None and len(buf.data):
            raw = np.asarray(buf.data, np.uint8).tobytes()
        elif buf.offset > 1 and buf.size:
            raw = self.raw[buf.offset:buf.offset + buf.size]
        else:
            return None
        if tensor.dtype.is_packed:
            nib = np.frombuffer(raw, np.uint8)
            vals = np.stack([nib & 0xF, nib >> 4], axis=1).reshape(-1).astype(np.int8)
            vals = np.where(vals >= 8, vals - 16, vals)
        else:
            vals = np.frombuffer(raw, tensor.dtype.numpy.newbyteorder("<"))
        if vals.size < tensor.size or (not tensor.dtype.is_packed and vals.size != tensor.size):
            raise self.fail(f"constant {shorten(tensor.name)}: buffer holds {len(raw)} bytes for shape "
                            f"{list(tensor.shape)}")
        return vals[:tensor.size].astype(tensor.dtype.numpy).reshape(tensor.shape)

    # --- ops ----------------------------------------------------------------------------------
    def kind(self, op: Any) -> str:
        codes = self.model.operatorCodes or []
        if not 0 <= op.opcodeIndex < len(codes):
            raise self.fail(f"operator code index {op.opcodeIndex} out of range")
        oc = codes[op.opcodeIndex]
        code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
        name = self.op_names.get(code, f"opcode_{code}")
        if name == "CUSTOM":
            return f"tfl.custom.{_text(oc.customCode)}"
        return f"tfl.{name.lower()}"

    def check_types(self) -> None:
        """All operators that touch tensors of unsupported types, in one error."""
        bad = {}
        for op in self.sg.operators or []:
            for j in [*(op.inputs if op.inputs is not None else []), *(op.outputs if op.outputs is not None else [])]:
                if 0 <= j < len(self.tensors):
                    type_name = self.type_names.get(self.tensors[j].type, str(self.tensors[j].type))
                    if type_name == "RESOURCE" and self.kind(op) in RESOURCE_OPS:
                        continue
                    if type_name not in _TYPES:
                        bad.setdefault(self.kind(op), set()).add(type_name)
        if bad:
            listed = ", ".join(f"{kind} ({'/'.join(sorted(types))})" for kind, types in sorted(bad.items()))
            raise UnsupportedError(f"{self.where}: unsupported tensor types in operators: {listed} (supported: "
                                   f"{', '.join(_TYPES)})")

    def build(self) -> Graph:
        self.check_types()
        for i, op in enumerate(self.sg.operators or []):
            kind = self.kind(op)
            if self.state.absorb(i, op, kind):
                continue
            inputs = list(op.inputs if op.inputs is not None else [])
            if kind == "tfl.svdf":  # the bias (input 3) is optional, the state (the last input) is not
                inputs = [j for j in inputs if j >= 0]
            while inputs and inputs[-1] < 0:  # absent trailing optional inputs (e.g. no bias)
                inputs.pop()
            if any(j < 0 for j in inputs):
                raise UnsupportedError(f"{self.where}: operator #{i} ({kind}) has an absent optional "
                                       f"input before a present one")
            outs = [self.tensor(j) for j in (op.outputs if op.outputs is not None else [])]
            ins, outs = self.state.rewrite(i, kind, inputs, [self.tensor(j) for j in inputs], outs)
            self.add_op(kind, ins, outs, i, op)
        self.graph.state = self.state.state_vars()
        self.graph.inputs = [self.tensor(j) for j in (self.sg.inputs if self.sg.inputs is not None else [])]
        self.graph.outputs = [self.tensor(j) for j in (self.sg.outputs if self.sg.outputs is not None else [])]
        for what, names in (("input", self.graph.inputs), ("output", self.graph.outputs)):
            if len(set(names)) != len(names):
                raise self.fail(f"a tensor is listed twice as a model {what}: {names}")
        _fold_constants(self.graph)
        _reject_float(self.graph, self.where)
        return self.graph

    def add_op(self, kind: str, ins: list[str], outs: list[str], i: int, op: Any = None) -> None:
        options = _options(self.schema, op.builtinOptions) if op is not None else {}
        self.graph.ops.append(Op(kind, ins, outs, options, name=outs[0] if outs else f"#{i}"))


# --- constant folding ---------------------------------------------------------------------------
def _fold(graph: Graph, op: Op) -> np.ndarray | None:
    from ..semantics.tflite import dequantize_values, quantize_values, requantize_values

    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    if op.kind in ("tfl.reshape", "tfl.squeeze", "tfl.expand_dims"):
        return x.data.reshape(y.shape) if x.dtype == y.dtype and x.size == y.size else None
    if x.quant is None and op.kind == "tfl.dequantize" or y.quant is None and op.kind == "tfl.quantize":
        return None
    if op.kind == "tfl.dequantize" and y.dtype.is_float:
        return dequantize_values(x.data, x.quant)
    if op.kind == "tfl.quantize" and x.dtype.is_float:
        return quantize_values(x.data, y.quant, y.dtype)
    if op.kind == "tfl.quantize" and x.quant is not None and x.quant.kind == y.quant.kind == "per_tensor":
        return requantize_values(x.data, x.quant, y.quant, y.dtype)
    return None


def _fold_constants(graph: Graph) -> None:
    """Replace foldable ops whose inputs are all constant (and whose output is not a model output)."""
    kept = []
    for op in graph.ops:
        if (op.kind in _FOLDABLE and op.inputs and len(op.outputs) == 1 and op.outputs[0] not in graph.outputs
                and graph.tensors[op.inputs[0]].is_const):
            value = _fold(graph, op)
            if value is not None:
                graph.tensors[op.outputs[0]].data = value
                continue
        kept.append(op)
    graph.ops = kept
    used = {n for op in graph.ops for n in op.inputs + op.outputs} | set(graph.inputs) | set(graph.outputs)
    used |= {n for v in graph.state for n in (v.name, v.next)}
    graph.tensors = {n: t for n, t in graph.tensors.items() if n in used}


def _reject_float(graph: Graph, where: str) -> None:
    """Fully quantized models only: float may only enter a QUANTIZE or leave a DEQUANTIZE."""
    for op in graph.ops:
        ins = [graph.tensors[n] for n in op.inputs]
        outs = [graph.tensors[n] for n in op.outputs]
        if op.kind == "tfl.quantize":
            ins = ins[1:] if ins and ins[0].dtype.is_float and not ins[0].is_const else ins
        if op.kind == "tfl.dequantize":
            outs = []
        floats = [t for t in ins + outs if t.dtype.is_float]
        if not floats:
            continue
        weights = [t for t in ins if t.is_const and t.quant is not None]
        kind = "hybrid (weight-only quantized)" if weights else "float"
        raise UnsupportedError(f"{where}: {kind} model: {op.kind} {shorten(op.name)} computes on float32 tensor "
                               f"{shorten(floats[0].name)}; qcodegen compiles fully quantized (int8/int16) models only")


def load_tflite(path: str | Path) -> Graph:
    path = Path(path)
    schema = _schema()
    raw = path.read_bytes()
    model = _parse(schema, raw, str(path))
    try:
        return _Importer(schema, model, raw, path.stem, str(path)).build()
    except (TypeError, ValueError, IndexError, AttributeError) as exc:  # damaged tables that parsed lazily
        raise GraphError(f"{path}: corrupt TFLite model ({type(exc).__name__}: {exc})"[:300]) from None
