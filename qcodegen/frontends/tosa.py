"""TOSA flatbuffers (.tosa, as written by the TOSA serialization library and the conformance generator) -> Graph.

Every operator becomes "tosa.<operator name in lower case>"; attribute fields become snake_case attributes (enums
by name: rounding_mode "SINGLE_ROUND", nan_mode "PROPAGATE", mode "BILINEAR"; acc_type as a qcodegen dtype name
"i32"/"i48"; CLAMP min_val/max_val as numbers). Zero points, multipliers, shifts and pad constants stay tensor
operands, as in TOSA 1.0; the lowering rules (qcodegen/lower/tosa/ops.py) read them when they are constants.

Shape values (CONST_SHAPE, and the shape operators DIM, ADD_SHAPE, ... of the 1.1 drafts) are static here: they
are evaluated while reading, and a shape operand becomes an attribute of the operator that takes it (PAD padding,
RESHAPE shape, SLICE start/size, TILE multiples, RESIZE scale/offset/border, adaptive pool kernel/stride/pad).
CONST operators are not kept: their outputs become constant tensors. A graph output that is a constant is produced
by an IDENTITY of a copy of it, so the graph computes every output. Graph inputs and outputs follow the order of
the main block. TOSA tensors carry no quantization: values are raw integers of their element type.

`TosaGraphBuilder` is shared with the TOSA MLIR reader (tosa_mlir.py).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError, QcError, UnsupportedError, install_hint
from ..ir.graph import Graph, Op, Tensor

# TOSA element type -> qcodegen dtype
DTYPES = {"BOOL": "bool", "INT4": "i4", "INT8": "i8", "INT16": "i16", "INT32": "i32", "INT48": "i48",
          "INT64": "i64", "FP32": "f32"}
# little-endian storage of constant data: numpy type per TOSA element type (INT4 and INT48 are special)
_STORAGE = {"BOOL": "u1", "INT8": "i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8", "SHAPE": "<i8",
            "FP32": "<f4"}
# attribute fields holding an enum, and the tosa module enum they index
_ENUMS = {"acc_type": "DType", "rounding_mode": "RoundingMode", "nan_mode": "NanPropagationMode",
          "mode": "ResizeMode", "block_size": "BlockSize"}
_ACCESSOR_SKIP = re.compile(r"^(Init|GetRootAs.*|.*BufferHasIdentifier|.*AsNumpy|.*Length|.*IsNone)$")

# shape operands of each operator, in order: they become attributes of these names
SHAPE_OPERANDS: dict[str, tuple[str, ...]] = {
    "PAD": ("padding",), "RESHAPE": ("shape",), "RESHAPE_BLOCK_SCALED": ("shape",), "SLICE": ("start", "size"),
    "TILE": ("multiples",), "RESIZE": ("scale", "offset", "border"),
    "AVG_POOL2D_ADAPTIVE": ("kernel", "stride", "pad"), "MAX_POOL2D_ADAPTIVE": ("kernel", "stride", "pad"),
}
CONSTANT_OPS = ("CONST", "CONST_SHAPE")

Shape = list[int]


def _same_length(where: str, a: Shape, b: Shape) -> None:
    if len(a) != len(b):
        raise GraphError(f"{where}: shape operands of lengths {len(a)} and {len(b)}")


def _elementwise(fn: Callable[[int, int], int], check: Callable[[int, int], bool] | None = None
                 ) -> Callable[[str, list[Shape], dict[str, Any], list[Tensor]], Shape]:
    def apply(where: str, args: list[Shape], attrs: dict[str, Any], tensors: list[Tensor]) -> Shape:
        a, b = args
        _same_length(where, a, b)
        if check is not None and not all(check(x, y) for x, y in zip(a, b, strict=True)):
            raise GraphError(f"{where}: shape operands {a} and {b} break a REQUIRE (unpredictable)")
        return [fn(x, y) for x, y in zip(a, b, strict=True)]
    return apply


def _unary(fn: Callable[[int], int], ok: Callable[[int], bool]
           ) -> Callable[[str, list[Shape], dict[str, Any], list[Tensor]], Shape]:
    def apply(where: str, args: list[Shape], attrs: dict[str, Any], tensors: list[Tensor]) -> Shape:
        if not all(ok(x) for x in args[0]):
            raise GraphError(f"{where}: shape operand {args[0]} breaks a REQUIRE (unpredictable)")
        return [fn(x) for x in args[0]]
    return apply


def _dim(where: str, args: list[Shape], attrs: dict[str, Any], tensors: list[Tensor]) -> Shape:
    shape, axis = tensors[0].shape, int(attrs.get("axis", -1))
    if not 0 <= axis < len(shape):
        raise GraphError(f"{where}: axis {axis} out of range for rank {len(shape)}")
    return [shape[axis]]


def _slice_shape(where: str, args: list[Shape], attrs: dict[str, Any], tensors: list[Tensor]) -> Shape:
    if not all(t.dtype.name == "i32" and t.shape == (1,) for t in tensors):
        raise GraphError(f"{where}: start and size must be i32 tensors of shape [1]")
    if not all(t.is_const for t in tensors):
        raise UnsupportedError(f"{where}: start and size must be constants")
    shape = args[0]
    start, size = (int(t.data.reshape(-1)[0]) for t in tensors)
    if size <= 0 or start < 0 or start + size > len(shape):
        raise GraphError(f"{where}: start {start}, size {size} outside a shape of length {len(shape)}")
    return shape[start:start + size]


def _concat_shape(where: str, args: list[Shape], attrs: dict[str, Any], tensors: list[Tensor]) -> Shape:
    if not args or any(not a for a in args):
        raise GraphError(f"{where}: needs one or more non-empty shapes")
    return [v for a in args for v in a]


def _assert_equal(where: str, args: list[Shape], attrs: dict[str, Any], tensors: list[Tensor]) -> Shape:
    a, b = args
    _same_length(where, a, b)
    broadcast = bool(attrs.get("allow_broadcast", False))
    for x, y in zip(a, b, strict=True):
        if x != y and not (broadcast and (x == 1 or y == 1)):
            raise GraphError(f"{where}: shapes {a} and {b} differ")
    return a


def _positive(x: int, y: int) -> bool:
    return x >= 0 and y >= 1


# shape operators: evaluated while reading (args: the shape operands; tensors: the tensor operands)
SHAPE_OPS: dict[str, Callable[[str, list[Shape], dict[str, Any], list[Tensor]], Shape]] = {
    "ADD_SHAPE": _elementwise(lambda x, y: x + y), "SUB_SHAPE": _elementwise(lambda x, y: x - y),
    "MUL_SHAPE": _elementwise(lambda x, y: x * y), "MAX_SHAPE": _elementwise(max), "MIN_SHAPE": _elementwise(min),
    "DIV_FLOOR_SHAPE": _elementwise(lambda x, y: x // y, _positive),
    "DIV_CEIL_SHAPE": _elementwise(lambda x, y: -(-x // y), _positive),
    "MOD_SHAPE": _elementwise(lambda x, y: x % y, _positive),
    "EXP2_SHAPE": _unary(lambda x: 1 << x, lambda x: 0 <= x < 63),
    "LOG2_FLOOR_SHAPE": _unary(lambda x: x.bit_length() - 1, lambda x: x >= 1),
    "LOG2_CEIL_SHAPE": _unary(lambda x: (x - 1).bit_length(), lambda x: x >= 1),
    "DIM": _dim, "SLICE_SHAPE": _slice_shape, "CONCAT_SHAPE": _concat_shape, "ASSERT_EQUAL_SHAPE": _assert_equal,
}


# operand signature of the shape operators: (shape operands (None: one or more), tensor operands, outputs)
_SHAPE_SIGNATURES = {"DIM": (0, 1, 1), "SLICE_SHAPE": (1, 2, 1), "CONCAT_SHAPE": (None, 0, 1),
                     "ASSERT_EQUAL_SHAPE": (2, 0, 0), "EXP2_SHAPE": (1, 0, 1), "LOG2_FLOOR_SHAPE": (1, 0, 1),
                     "LOG2_CEIL_SHAPE": (1, 0, 1)}


class TosaGraphBuilder:
    """Assembles a Graph from TOSA tensors, shape values and operators, in program order."""

    def __init__(self, name: str) -> None:
        self.graph = Graph(name)
        self.shapes: dict[str, Shape | None] = {}  # shape values; None until the operator computing it is read
        self.shape_ranks: dict[str, int] = {}  # declared length of each shape value
        self.unsupported: dict[str, str] = {}  # tensors of element types qcodegen cannot hold: why
        self.shape_only: set[str] = set()  # tensors read by shape operators (DIM) for their shape

    def add_tensor(self, t: Tensor) -> None:
        if t.name in self.graph.tensors or t.name in self.shapes:
            raise GraphError(f"tensor {t.name!r} is declared twice")
        self.graph.tensors[t.name] = t

    def add_shape(self, name: str, rank: int, values: Shape | None) -> None:
        if name in self.graph.tensors or name in self.shapes:
            raise GraphError(f"shape {name!r} is declared twice")
        self.shape_ranks[name] = rank
        self.set_shape(name, values, f"shape {name!r}")

    def set_shape(self, name: str, values: Shape | None, where: str) -> None:
        if values is not None and len(values) != self.shape_ranks[name]:
            raise GraphError(f"{where}: a shape of length {len(values)} for {name!r}, declared of length "
                             f"{self.shape_ranks[name]}")
        self.shapes[name] = None if values is None else [int(v) for v in values]

    def add_unsupported(self, name: str, reason: str) -> None:
        """A tensor of an element type qcodegen does not support: an error only if an operator uses it."""
        self.unsupported[name] = reason

    def add_op(self, kind: str, inputs: list[str], outputs: list[str], attrs: dict[str, Any], where: str) -> None:
        """Operator `kind` (TOSA name, upper case); `where` names it in messages."""
        for n in inputs + outputs:
            if n not in self.graph.tensors and n not in self.shapes and n not in self.unsupported:
                raise GraphError(f"{where}: {n!r} is not a tensor of the graph")
        if kind in CONSTANT_OPS:
            if inputs or len(outputs) != 1 or not (outputs[0] in self.unsupported or self.known(outputs[0])):
                raise GraphError(f"{where}: needs no inputs and one output holding its value")
            return
        odd = [n for n in inputs + outputs if n in self.unsupported]
        if odd and kind in SHAPE_OPS:
            raise GraphError(f"{where}: operand {odd[0]!r} of a shape operator is not a shape value")
        if odd:
            raise UnsupportedError(self.unsupported[odd[0]])
        shape_args = [self.shape_value(n, where) for n in inputs if n in self.shapes]
        tensor_args = [n for n in inputs if n not in self.shapes]
        if kind in SHAPE_OPS:
            self._evaluate(kind, shape_args, tensor_args, outputs, attrs, where)
            return
        if any(n in self.shapes for n in outputs):
            raise UnsupportedError(f"{where}: {kind} producing a shape value is not supported")
        if shape_args:
            roles = SHAPE_OPERANDS.get(kind, ())
            if len(shape_args) > len(roles):
                raise GraphError(f"{where}: {len(shape_args)} shape operand(s), {kind} takes {len(roles)}")
            attrs = dict(attrs, **dict(zip(roles, shape_args, strict=False)))
        self.graph.ops.append(Op(f"tosa.{kind.lower()}", tensor_args, list(outputs), attrs,
                                 name=f"{kind.lower()}_{len(self.graph.ops)}"))

    def _evaluate(self, kind: str, shape_args: list[Shape], tensor_args: list[str], outputs: list[str],
                  attrs: dict[str, Any], where: str) -> None:
        """A shape operator, computed now."""
        n_shapes, n_tensors, n_outputs = _SHAPE_SIGNATURES.get(kind, (2, 0, 1))
        if (n_shapes is not None and len(shape_args) != n_shapes) or len(tensor_args) != n_tensors \
                or len(outputs) != n_outputs or any(n not in self.shapes for n in outputs):
            raise GraphError(f"{where}: takes {n_shapes or 'one or more'} shape(s) and {n_tensors} tensor(s) and "
                             f"gives {n_outputs} shape(s); got {len(shape_args)} shape(s), {len(tensor_args)} "
                             f"tensor(s) and outputs {outputs}")
        value = SHAPE_OPS[kind](where, shape_args, attrs, [self.graph.tensors[n] for n in tensor_args])
        self.shape_only.update(tensor_args)
        if outputs:
            self.set_shape(outputs[0], value, where)

    def known(self, name: str) -> bool:
        """Whether `name` is a constant tensor or a known shape value."""
        if name in self.shapes:
            return self.shapes[name] is not None
        return self.graph.tensors[name].is_const

    def shape_value(self, name: str, where: str) -> Shape:
        value = self.shapes[name]
        if value is None:
            raise UnsupportedError(f"{where}: shape {name!r} is not known when the graph is compiled")
        return value

    def finish(self, inputs: list[str], outputs: list[str]) -> Graph:
        g = self.graph
        for n in outputs:
            if n in self.shapes:  # a (static) shape value as a graph output: an i64 constant [rank]
                values = self.shape_value(n, f"graph output {n!r}")
                g.tensors[n] = Tensor(n, (len(values),), "i64", data=np.array(values, np.int64))
                del self.shapes[n]
        for n in inputs + outputs:
            if n in self.shapes:
                raise UnsupportedError(f"graph input/output {n!r} is a shape value (dynamic shapes are not "
                                       f"supported)")
            if n in self.unsupported:
                raise UnsupportedError(self.unsupported[n])
            if n not in g.tensors:
                raise GraphError(f"graph input/output {n!r} is not a tensor of the graph")
        used = {n for op in g.ops for n in op.inputs} | set(outputs)
        # an input read only for its (static) shape is not an input of the compiled graph
        g.inputs, g.outputs = [n for n in inputs if n in used or n not in self.shape_only], list(outputs)
        for k, n in enumerate(g.outputs):
            t = g.tensors[n]
            if t.is_const:  # computed by copying the constant
                value = Tensor(self._fresh(f"{n}.value"), t.shape, t.dtype, data=t.data)
                g.tensors[value.name] = value
                t.data = None
                g.ops.append(Op("tosa.identity", [value.name], [n], name=f"output_{k}"))
        return g

    def _fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.graph.tensors:
            name, i = f"{base}_{i}", i + 1
        return name


# ---- the flatbuffer reader

def schema_class(name: str) -> Any:
    """Class `name` of the `tosa` flatbuffer package of tosa-tools (module tosa.<name>), imported on first use."""
    try:
        module = importlib.import_module(f"tosa.{name}")
    except ImportError:
        raise QcError(f"reading TOSA flatbuffers needs tosa-tools: {install_hint('tosa')}") from None
    return getattr(module, name)


def _enum_names(enum: str) -> dict[int, str]:
    return {v: k for k, v in vars(schema_class(enum)).items() if not k.startswith("_") and isinstance(v, int)}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _text(value: bytes | str | None) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


def decode_data(raw: bytes | np.ndarray, tosa_type: str, count: int, where: str) -> np.ndarray:
    """Flat constant values (int64, or float32 for FP32) from the little-endian TOSA serialization."""
    raw = np.frombuffer(bytes(raw), np.uint8)
    if tosa_type == "INT4":  # two per byte, low nibble first
        nib = np.stack([raw & 0xF, raw >> 4], axis=1).reshape(-1)[:count].astype(np.int64)
        values = np.where(nib >= 8, nib - 16, nib)
    elif tosa_type == "INT48":  # six bytes per element, sign-extended
        if raw.size < 6 * count:
            raise GraphError(f"{where}: {raw.size} bytes of INT48 data for {count} elements")
        six = raw[:6 * count].reshape(count, 6).astype(np.int64)
        values = (six << (8 * np.arange(6, dtype=np.int64))).sum(axis=1)
        values = np.where(values >= 1 << 47, values - (1 << 48), values)
    elif tosa_type in _STORAGE:
        store = np.dtype(_STORAGE[tosa_type])
        if raw.size < store.itemsize * count:
            raise GraphError(f"{where}: {raw.size} bytes of {tosa_type} data for {count} elements")
        values = raw[:store.itemsize * count].view(store)
        values = values.astype(np.float32 if tosa_type == "FP32" else np.int64)
    else:
        raise UnsupportedError(f"{where}: constant data of type {tosa_type} is not supported")
    if values.size != count:
        raise GraphError(f"{where}: {values.size} constant values for {count} elements")
    return values


class _FlatbufferReader:
    """Reads the main block of a TosaGraph."""

    def __init__(self, block: Any, builder: TosaGraphBuilder):
        self.block = block
        self.builder = builder
        self.types = _enum_names("DType")
        self.ops = _enum_names("Op")
        self.attribute_types = _enum_names("Attribute")
        self.enums = {field: _enum_names(enum) for field, enum in _ENUMS.items()}

    def tensors(self) -> None:
        constant_outputs = {_text(o.Outputs(0)) for o in self._operators()
                            if self.ops.get(o.Op()) in CONSTANT_OPS and o.OutputsLength() == 1}
        for i in range(self.block.TensorsLength()):
            t = self.block.Tensors(i)
            name = _text(t.Name())
            where = f"tensor {name!r}"
            if t.IsUnranked() or t.Variable():
                raise UnsupportedError(f"{where}: unranked and variable tensors are not supported")
            shape = tuple(int(d) for d in (t.ShapeAsNumpy() if t.ShapeLength() else []))
            if any(d < 0 for d in shape):  # (dynamic dimensions need EXT-DYNAMIC)
                raise GraphError(f"{where}: negative dimension in shape {list(shape)}")
            tosa_type = self.types.get(t.Type(), str(t.Type()))
            if tosa_type not in DTYPES and tosa_type != "SHAPE":
                self.builder.add_unsupported(name, f"{where}: element type {tosa_type} is not supported "
                                                   f"(supported: {', '.join(DTYPES)})")
                continue
            count = int(np.prod(shape, dtype=np.int64))
            data = None
            if t.DataLength() or name in constant_outputs:
                data = decode_data(t.DataAsNumpy() if t.DataLength() else b"", tosa_type, count, where)
            if tosa_type == "SHAPE":
                self.builder.add_shape(name, count, None if data is None else data.tolist())
            else:
                self.builder.add_tensor(Tensor(name, shape, DTYPES[tosa_type],
                                               data=None if data is None else data.reshape(shape)))
        for i in range(self.block.ShapesLength()):  # shape values kept apart from the tensors (1.1 drafts)
            s = self.block.Shapes(i)
            name, rank = _text(s.Name()), int(s.Rank())
            data = None
            if s.DataLength() or name in constant_outputs:
                data = decode_data(s.DataAsNumpy() if s.DataLength() else b"", "SHAPE", rank, f"shape {name!r}")
            self.builder.add_shape(name, rank, None if data is None else data.tolist())

    def _operators(self) -> list[Any]:
        return [self.block.Operators(i) for i in range(self.block.OperatorsLength())]

    def operators(self) -> None:
        for i, o in enumerate(self._operators()):
            kind = self.ops.get(o.Op(), f"UNKNOWN({o.Op()})")
            where = f"operator {i} ({kind})"
            inputs = [_text(o.Inputs(j)) for j in range(o.InputsLength())]
            outputs = [_text(o.Outputs(j)) for j in range(o.OutputsLength())]
            attrs = self.attributes(o, where)
            if kind == "CLAMP" and inputs and inputs[0] in self.builder.graph.tensors:
                self.clamp_bounds(attrs, self.builder.graph.tensors[inputs[0]], where)
            self.builder.add_op(kind, inputs, outputs, attrs, where)

    def attributes(self, o: Any, where: str) -> dict[str, Any]:
        kind = self.attribute_types.get(o.AttributeType(), "NONE")
        table = o.Attribute()
        if kind == "NONE" or table is None:
            return {}
        cls = schema_class(kind)
        attr = cls()
        attr.Init(table.Bytes, table.Pos)
        values: dict[str, Any] = {}
        for method, fn in inspect.getmembers(cls, inspect.isfunction):
            if _ACCESSOR_SKIP.match(method) or method.startswith("_"):
                continue
            key = _snake(method)
            if hasattr(cls, f"{method}AsNumpy"):  # a vector field
                vec = getattr(attr, f"{method}AsNumpy")()
                value: Any = [] if isinstance(vec, int) else vec.tolist()
            elif len(inspect.signature(fn).parameters) == 1:
                value = getattr(attr, method)()
            else:
                continue
            if key in self.enums:
                value = self.enum_value(key, value, where)
            values[key] = _text(value) if isinstance(value, bytes) else value
        return values

    def enum_value(self, key: str, value: int, where: str) -> str:
        name = self.enums[key].get(value)
        if name is None:
            raise GraphError(f"{where}: unknown {key} {value}")
        return DTYPES.get(name, name.lower()) if key == "acc_type" else name

    @staticmethod
    def clamp_bounds(attrs: dict[str, Any], x: Tensor, where: str) -> None:
        """CLAMP min_val/max_val are stored as the bytes of one element of the input type."""
        tosa_type = {v: k for k, v in DTYPES.items()}.get(x.dtype.name)
        for key in ("min_val", "max_val"):
            raw = bytes(attrs.get(key, []))
            if tosa_type is None or not raw:
                raise GraphError(f"{where}: {key} cannot be read for a {x.dtype} input")
            attrs[key] = decode_data(raw, tosa_type, 1, f"{where}: {key}")[0].item()

    def interface(self) -> tuple[list[str], list[str]]:
        return ([_text(self.block.Inputs(i)) for i in range(self.block.InputsLength())],
                [_text(self.block.Outputs(i)) for i in range(self.block.OutputsLength())])


def graph_from_tosa(raw: bytes, name: str = "model") -> Graph:
    """A Graph from the bytes of a TOSA flatbuffer (the main block of its first region)."""
    graph_class = schema_class("TosaGraph")
    if len(raw) < 8 or raw[4:8] != b"TOSA":
        raise GraphError(f"not a TOSA flatbuffer (file identifier {raw[4:8]!r}, expected b'TOSA')")
    try:
        root = graph_class.GetRootAs(raw, 0)
        if root.RegionsLength() < 1 or root.Regions(0).BlocksLength() < 1:
            raise GraphError("the TOSA graph has no region with a basic block")
        if root.RegionsLength() > 1 or root.Regions(0).BlocksLength() > 1:
            raise UnsupportedError("TOSA graphs with several regions or blocks (control flow) are not supported")
        builder = TosaGraphBuilder(name)
        reader = _FlatbufferReader(root.Regions(0).Blocks(0), builder)
        reader.tensors()
        reader.operators()
        return builder.finish(*reader.interface())
    except (IndexError, ValueError, TypeError, UnicodeDecodeError) as exc:  # flatbuffers on malformed data
        raise GraphError(f"malformed TOSA flatbuffer: {exc}") from None


def load_tosa(path: str | Path) -> Graph:
    path = Path(path)
    return graph_from_tosa(path.read_bytes(), re.sub(r"\W", "_", path.stem) or "model")
