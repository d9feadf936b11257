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

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError, QcError, UnsupportedError, shorten
from ..ir.dtypes import dtype
from ..ir.graph import Graph, Op, Tensor
from ..ir.limits import ModelBudget
from . import tosa_schema as S
from .flatbuffer import FlatbufferError, FlatTable, N, root_table, runtime_missing

# TOSA element type -> qcodegen dtype
DTYPES = {"BOOL": "bool", "INT4": "i4", "INT8": "i8", "INT16": "i16", "INT32": "i32", "INT48": "i48",
          "INT64": "i64", "FP32": "f32"}
# little-endian storage of constant data: numpy type per TOSA element type (INT4 and INT48 are special)
_STORAGE = {"BOOL": "u1", "INT8": "i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8", "SHAPE": "<i8",
            "FP32": "<f4"}

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
            raise GraphError(f"tensor {shorten(t.name)} is declared twice")
        self.graph.tensors[t.name] = t

    def add_shape(self, name: str, rank: int, values: Shape | None) -> None:
        if name in self.graph.tensors or name in self.shapes:
            raise GraphError(f"shape {shorten(name)} is declared twice")
        self.shape_ranks[name] = rank
        self.set_shape(name, values, f"shape {shorten(name)}")

    def set_shape(self, name: str, values: Shape | None, where: str) -> None:
        if values is not None and len(values) != self.shape_ranks[name]:
            raise GraphError(f"{where}: a shape of length {len(values)} for {shorten(name)}, declared of length "
                             f"{self.shape_ranks[name]}")
        self.shapes[name] = None if values is None else [int(v) for v in values]

    def add_unsupported(self, name: str, reason: str) -> None:
        """A tensor of an element type qcodegen does not support: an error only if an operator uses it."""
        self.unsupported[name] = reason

    def add_op(self, kind: str, inputs: list[str], outputs: list[str], attrs: dict[str, Any], where: str) -> None:
        """Operator `kind` (TOSA name, upper case); `where` names it in messages."""
        for n in inputs + outputs:
            if n not in self.graph.tensors and n not in self.shapes and n not in self.unsupported:
                raise GraphError(f"{where}: {shorten(n)} is not a tensor of the graph")
        if kind in CONSTANT_OPS:
            if inputs or len(outputs) != 1 or not (outputs[0] in self.unsupported or self.known(outputs[0])):
                raise GraphError(f"{where}: needs no inputs and one output holding its value")
            return
        odd = [n for n in inputs + outputs if n in self.unsupported]
        if odd and kind in SHAPE_OPS:
            raise GraphError(f"{where}: operand {shorten(odd[0])} of a shape operator is not a shape value")
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
            raise UnsupportedError(f"{where}: shape {shorten(name)} is not known when the graph is compiled")
        return value

    def finish(self, inputs: list[str], outputs: list[str]) -> Graph:
        g = self.graph
        for n in outputs:
            if n in self.shapes:  # a (static) shape value as a graph output: an i64 constant [rank]
                values = self.shape_value(n, f"graph output {shorten(n)}")
                g.tensors[n] = Tensor(n, (len(values),), "i64", data=np.array(values, np.int64))
                del self.shapes[n]
        for n in inputs + outputs:
            if n in self.shapes:
                raise UnsupportedError(f"graph input/output {shorten(n)} is a shape value (dynamic shapes are not "
                                       f"supported)")
            if n in self.unsupported:
                raise UnsupportedError(self.unsupported[n])
            if n not in g.tensors:
                raise GraphError(f"graph input/output {shorten(n)} is not a tensor of the graph")
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

def decode_data(raw: bytes | np.ndarray, tosa_type: str, count: int, where: str) -> np.ndarray:
    """Flat constant values (int64, or float32 for FP32) from the little-endian TOSA serialization."""
    raw = np.frombuffer(bytes(raw), np.uint8)
    if tosa_type == "INT4":  # two per byte, low nibble first
        if raw.size < (count + 1) // 2:
            raise GraphError(f"{where}: {raw.size} bytes of INT4 data for {count} elements")
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
    return values


def _enum_name(table: tuple[str, ...] | dict[int, str], value: int) -> str | None:
    if isinstance(table, dict):
        return table.get(value)
    return table[value] if 0 <= value < len(table) else None


class _FlatbufferReader:
    """Reads the main block of a TosaGraph (qcodegen.frontends.tosa_schema: slots and types of its tables)."""

    def __init__(self, block: FlatTable, builder: TosaGraphBuilder) -> None:
        self.block = block
        self.builder = builder
        self.budget = ModelBudget()
        self.operators = block.children(S.BLOCK_OPERATORS, "operator")

    @staticmethod
    def kind(o: FlatTable) -> str:
        code = o.scalar(S.OPERATOR_OP, N.Uint32Flags)
        return _enum_name(S.OPS, code) or f"UNKNOWN({code})"

    def tensor_type(self, code: int) -> str:
        return _enum_name(S.DTYPE, code) or f"UNKNOWN({code})"

    def tensors(self) -> None:
        constant_outputs = set()
        for o in self.operators:
            outputs = o.strings(S.OPERATOR_OUTPUTS)
            if self.kind(o) in CONSTANT_OPS and len(outputs) == 1:
                constant_outputs.add(outputs[0])
        for t in self.block.children(S.BLOCK_TENSORS, "tensor"):
            name = t.string(S.TENSOR_NAME)
            where = f"tensor {shorten(name)}"
            if t.scalar(S.TENSOR_UNRANKED, N.BoolFlags, False) or t.scalar(S.TENSOR_VARIABLE, N.BoolFlags, False):
                raise UnsupportedError(f"{where}: unranked and variable tensors are not supported")
            if t.scalar(S.TENSOR_OFFSET, N.Uint64Flags) > 1 or t.scalar(S.TENSOR_SIZE, N.Uint64Flags):
                raise UnsupportedError(f"{where}: data stored outside the flatbuffer (offset/size) is not supported")
            shape = tuple(int(d) for d in t.numbers(S.TENSOR_SHAPE, N.Int32Flags))
            tosa_type = self.tensor_type(t.scalar(S.TENSOR_TYPE, N.Uint32Flags))
            if tosa_type not in DTYPES and tosa_type != "SHAPE":
                self.builder.add_unsupported(name, f"{where}: element type {tosa_type} is not supported "
                                                   f"(supported: {', '.join(DTYPES)})")
                continue
            # (dynamic dimensions, negative, need EXT-DYNAMIC: rejected here)
            count = self.budget.declare(shape, 8 if tosa_type == "SHAPE" else dtype(DTYPES[tosa_type]).container_bytes,
                                        where)
            raw = t.numbers(S.TENSOR_DATA, N.Uint8Flags)
            data = decode_data(raw, tosa_type, count, where) if raw.size or name in constant_outputs else None
            if tosa_type == "SHAPE":
                self.builder.add_shape(name, count, None if data is None else data.tolist())
            else:
                self.builder.add_tensor(Tensor(name, shape, DTYPES[tosa_type],
                                               data=None if data is None else data.reshape(shape)))
        for s in self.block.children(S.BLOCK_SHAPES, "shape"):  # shape values kept apart from the tensors (1.1 drafts)
            name, rank = s.string(S.SHAPE_NAME), s.scalar(S.SHAPE_RANK, N.Uint32Flags)
            where = f"shape {shorten(name)}"
            self.budget.declare([rank], 8, where)
            raw = s.numbers(S.SHAPE_DATA, N.Uint8Flags)
            data = decode_data(raw, "SHAPE", rank, where) if raw.size or name in constant_outputs else None
            self.builder.add_shape(name, rank, None if data is None else data.tolist())

    def read_operators(self) -> None:
        for i, o in enumerate(self.operators):
            kind = self.kind(o)
            where = f"operator {i} ({kind})"
            inputs, outputs = o.strings(S.OPERATOR_INPUTS), o.strings(S.OPERATOR_OUTPUTS)
            attrs = self.attributes(o, kind, where)
            if kind == "CLAMP" and inputs and inputs[0] in self.builder.graph.tensors:
                self.clamp_bounds(attrs, self.builder.graph.tensors[inputs[0]], where)
            self.builder.add_op(kind, inputs, outputs, attrs, where)

    def attributes(self, o: FlatTable, kind: str, where: str) -> dict[str, Any]:
        """The fields of the operator's attribute table by their schema names (enums by name, acc_type as a dtype)."""
        union_type = o.scalar(S.OPERATOR_ATTRIBUTE_TYPE, N.Uint8Flags)
        table = o.child(S.OPERATOR_ATTRIBUTE, f"attribute of {where}")
        if union_type == 0 or table is None:
            return {}
        if _enum_name(S.OPS, union_type) != kind:
            raise GraphError(f"{where}: its attribute table is the one of "
                             f"{_enum_name(S.OPS, union_type) or f'UNKNOWN({union_type})'}")
        values: dict[str, Any] = {}
        for slot, (field, kind_of_field) in enumerate(S.ATTRIBUTES.get(kind, ())):
            if kind_of_field == "int32":
                values[field] = table.scalar(slot, N.Int32Flags)
            elif kind_of_field == "bool":
                values[field] = table.scalar(slot, N.BoolFlags, False)
            elif kind_of_field == "string":
                values[field] = table.string(slot)
            elif kind_of_field in ("[int32]", "[ubyte]"):
                flags = N.Int32Flags if kind_of_field == "[int32]" else N.Uint8Flags
                values[field] = table.numbers(slot, flags).tolist()
            else:
                values[field] = self.enum_value(field, kind_of_field, table.scalar(slot, N.Uint32Flags), where)
        return values

    @staticmethod
    def enum_value(field: str, enum: str, value: int, where: str) -> str:
        name = _enum_name(S.ENUMS[enum], value)
        if name is None:
            raise GraphError(f"{where}: unknown {field} {value}")
        return DTYPES.get(name, name.lower()) if enum == "DType" else name

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
        return self.block.strings(S.BLOCK_INPUTS), self.block.strings(S.BLOCK_OUTPUTS)


def graph_from_tosa(raw: bytes, name: str = "model") -> Graph:
    """A Graph from the bytes of a TOSA flatbuffer (the main block of its first region)."""
    missing = runtime_missing("tosa")
    if missing is not None:
        raise missing
    root = root_table(raw, S.FILE_IDENTIFIER, "TOSA")
    regions = root.children(S.GRAPH_REGIONS, "region")
    blocks = regions[0].children(S.REGION_BLOCKS, "block") if regions else []
    if not blocks:
        raise GraphError("the TOSA graph has no region with a basic block")
    if len(regions) > 1 or len(blocks) > 1:
        raise UnsupportedError("TOSA graphs with several regions or blocks (control flow) are not supported")
    builder = TosaGraphBuilder(name)
    reader = _FlatbufferReader(blocks[0], builder)
    reader.tensors()
    reader.read_operators()
    return builder.finish(*reader.interface())


def load_tosa(path: str | Path) -> Graph:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise QcError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return graph_from_tosa(raw, re.sub(r"\W", "_", path.stem) or "model")
    except FlatbufferError as exc:
        raise FlatbufferError(f"{path}: {exc}") from None
