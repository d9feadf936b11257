"""StableHLO / MLIR-quant programs (MLIR text, pretty or generic op forms) -> Graph, one per func.func.

Each op becomes a Graph op of kind "stablehlo.<op>" (or "quant.qcast" / "quant.dcast" / "quant.scast") with its
attributes converted to Python values (integers, lists, strings for enums, numpy arrays for dense elements; the
dimension-number structs of the MLIR AST as they are; a reduction body as the name of its single combiner op in
attrs["body"], and a wide quantized reduction's accumulator type in attrs["accumulator"]:
qcodegen/frontends/stablehlo_reduce.py). Tensors carry a QuantType for every `!quant.uniform` type: per tensor, per
axis, sub-channel (block sizes per dimension), narrowed storage ranges. i1 tensors are `bool` (one byte holding 0
or 1). Types and the StableHLO quantization constraints are checked on the way
(qcodegen/frontends/stablehlo_verify.py); errors name the file position.

Golden checks (`check.expect_eq_const`, `check.expect_almost_eq_const`, `check.expect_eq`, `check.expect_almost_eq`,
`check.expect_close`, and `stablehlo.custom_call @check.eq / @check.expect_eq / @check.expect_almost_eq /
@check.expect_close`) are not ops of the graph: they are returned as `Check`s (qcodegen/verify/golden.py evaluates
them).

Constants (docs/semantics.md §7.5): test programs take no arguments, constants feed them. A constant that feeds
the program's data path -- the operand of a `uniform_quantize` (float -> quantized), `bitcast_convert` or
`quant.scast` (storage -> quantized), or `quant.qcast` whose result is not only used as convolution / dot_general
weights (the rhs, possibly through data movement) or reduction init values and is not sub-channel quantized --
becomes a model input, so the generated C really computes; its value is kept in `Program.feeds`. Every other op
whose inputs are all constant is folded at plan time (numpy, with the reference interpreter's float32 arithmetic:
qcodegen/semantics/stablehlo.py): weights are quantized and transposed, index computations are evaluated,
float computations on constants are done once. Integer constants that are not data (gather indices, reduction init
values, pad values) stay constants.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError, QcError, UnsupportedError, in_context
from ..ir.dtypes import wrap_to
from ..ir.graph import Graph, Op, Tensor
from ..ir.limits import ModelBudget
from ..semantics import stablehlo as sem
from .mlir import ast, parse_file
from .mlir.types import TensorType, UniformQuantType
from .stablehlo_qdq import fold_qdq
from .stablehlo_reduce import fuse_wide_reductions, region_attrs
from .stablehlo_verify import OpView, TensorT, convert_type, require_supported, verify_op

CHECK_OPS = {"check.expect_eq_const", "check.expect_almost_eq_const", "check.expect_eq", "check.expect_almost_eq",
             "check.expect_close"}
CUSTOM_CHECKS = {"check.eq", "check.expect_eq", "check.expect_almost_eq", "check.expect_close"}
DEFAULT_TOLERANCE = 1e-4  # check.expect_almost_eq[_const] default and custom_call @check.eq on floats
CUSTOM_ALMOST_EQ_TOLERANCE = 1e-3  # custom_call @check.expect_almost_eq (stablehlo-translate --interpret)
_FEED_OPS = {"stablehlo.uniform_quantize", "stablehlo.bitcast_convert", "quant.qcast", "quant.scast"}
_MOVEMENT = {"stablehlo.transpose", "stablehlo.reshape", "stablehlo.broadcast_in_dim", "stablehlo.slice",
             "stablehlo.reverse", "stablehlo.bitcast_convert", "quant.scast"}
_WEIGHT_USES = {("stablehlo.convolution", 1), ("stablehlo.dot_general", 1), ("stablehlo.dot", 1),
                ("stablehlo.reduce", 1), ("stablehlo.reduce_window", 1)}  # and reduction init values
STABLEHLO_DIALECTS = {"stablehlo", "chlo", "quant", "check"}


@dataclass
class Check:
    """One golden check: `actual` (a tensor of the function) against a constant or a second tensor."""

    kind: str
    actual: str
    expected: np.ndarray | str
    tolerance: float | None  # None: exact equality (or ULPs for check.expect_close)
    where: str
    ulps: tuple[int, int] | None = None  # check.expect_close: allowed [min, max] ULP difference


@dataclass
class Function:
    """One func.func of an MLIR file."""

    func: ast.Func
    filename: str

    @property
    def name(self) -> str:
        return self.func.name

    @property
    def where(self) -> str:
        return f"{Path(self.filename).name}:{self.func.line}"

    @property
    def quantized(self) -> bool:
        """Whether any argument, result or op type of the function is a !quant.uniform type."""
        types = [a.type for a in self.func.arguments] + list(self.func.result_types)
        for op in _walk(self.func.operations):
            types += op.operand_types + op.result_types
        return any(isinstance(t.element if isinstance(t, TensorType) else t, UniformQuantType) for t in types)


@dataclass
class Program:
    """A converted function: its graph (inputs = arguments and fed constants), checks, returns and fed values."""

    name: str
    where: str
    graph: Graph
    checks: list[Check]
    returns: list[str]
    feeds: dict[str, np.ndarray] = field(default_factory=dict)  # input name -> constant value it replaced


def _walk(ops: list[ast.Operation]) -> list[ast.Operation]:
    out = []
    for op in ops:
        out.append(op)
        for region in op.regions:
            for block in region.blocks:
                out += _walk(block.operations)
    return out


def functions(path: str | Path) -> list[Function]:
    """Every func.func of the file (all `// -----` chunks), in order."""
    return [Function(f, m.filename) for m in parse_file(path) for f in m.functions]


def dialect_of(fns: list[Function], path: str | Path) -> str:
    """"stablehlo" or "tosa" from the dialects of the ops (other dialects are left to the front end); QcError for a
    mix of the two or neither."""
    found = {op.name.split(".", 1)[0] for fn in fns for op in _walk(fn.func.operations)}
    stablehlo, tosa = bool(found & STABLEHLO_DIALECTS), "tosa" in found
    if stablehlo and tosa:
        raise QcError(f"{path}: mixes StableHLO and TOSA operations; a .mlir model must use one of them")
    if stablehlo or tosa:
        return "stablehlo" if stablehlo else "tosa"
    raise QcError(f"{path}: no StableHLO or TOSA operations")


# ------------------------------------------------------------------------------------------ conversion


def _tensor_name(value: ast.ValueRef) -> str:
    base = value.name.lstrip("%")
    base = base if base[:1].isalpha() or base[:1] == "_" else f"v{base}"
    return f"{base}_{value.index}" if value.index else base


def _dense(attr: ast.DenseElementsAttr) -> np.ndarray:
    values = attr.flat()
    shape = attr.type.shape
    if any(isinstance(v, complex) for v in values):
        raise UnsupportedError("complex constants are not supported")
    if values and isinstance(values[0], bool):
        return np.asarray(values, np.int64).reshape(shape)
    if values and isinstance(values[0], int) and not all(-(1 << 63) <= v < 1 << 63 for v in values):
        raise UnsupportedError(f"constant of {attr.type}: values beyond the int64 range are not supported")
    if values and isinstance(values[0], float):
        with np.errstate(over="ignore"):  # a literal beyond f32: inf, as IEEE converts
            return np.asarray(values, np.float64).astype(np.float32).reshape(shape)
    return np.asarray(values, np.int64).reshape(shape)


def _attr_value(attr: ast.Attribute) -> Any:
    if isinstance(attr, ast.IntegerAttr | ast.FloatAttr | ast.BoolAttr | ast.StringAttr | ast.EnumAttr):
        return attr.value
    if isinstance(attr, ast.UnitAttr):
        return True
    if isinstance(attr, ast.DenseArrayAttr):
        return list(attr.values)
    if isinstance(attr, ast.DenseElementsAttr):
        return _dense(attr)
    if isinstance(attr, ast.ArrayAttr):
        return [_attr_value(a) for a in attr.elements]
    if isinstance(attr, ast.DictAttr):
        return {k: _attr_value(v) for k, v in attr.entries.items()}
    if isinstance(attr, ast.SymbolRefAttr):
        return "::".join(attr.path)
    return attr  # dimension-number structs, types and dialect attributes as the AST gives them


class _Converter:
    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.graph = Graph(fn.name, options={"rescale_rounding": "half_even", "source": "stablehlo"})
        self.checks: list[Check] = []
        self.returns: list[str] = []
        self.check_results: set[str] = set()
        self.budget = ModelBudget()

    def where(self, obj: ast.Operation | ast.Argument | ast.Func) -> str:
        return f"{self.fn.filename}:{obj.line}:{obj.col}"

    def name(self, value: ast.ValueRef, where: str) -> str:
        name = _tensor_name(value)
        if name in self.check_results:
            raise GraphError(f"{where}: uses the result of a check op ({value})")
        if name not in self.graph.tensors:
            raise GraphError(f"{where}: unknown value {value}")
        return name

    def add_tensor(self, name: str, t: TensorT, where: str, data: np.ndarray | None = None) -> None:
        require_supported(t, where)
        if name in self.graph.tensors:
            raise GraphError(f"{where}: value %{name} is defined twice")
        self.budget.declare(t.shape, t.dtype.container_bytes, where)
        self.graph.tensors[name] = Tensor(name, tuple(t.shape), t.dtype, t.quant, data)

    def run(self) -> Program:
        func = self.fn.func
        if func.body is None:
            raise UnsupportedError(f"{self.where(func)}: @{func.name} is a declaration without a body")
        if len(func.body.blocks) != 1:
            raise UnsupportedError(f"{self.where(func)}: @{func.name} has control flow (several blocks)")
        arg_types = [convert_type(a.type, self.where(a)) for a in func.arguments]
        result_types = [convert_type(t, self.where(func)) for t in func.result_types]
        views = [self.verify(op) for op in func.operations]  # every GraphError before any UnsupportedError
        for t in result_types:
            require_supported(t, self.where(func))
        for a, t in zip(func.arguments, arg_types, strict=True):
            self.add_tensor(_tensor_name(a.value), t, self.where(a))
            self.graph.inputs.append(_tensor_name(a.value))
        for op, view in zip(func.operations, views, strict=True):
            self.operation(op, view)
        return Program(func.name, self.fn.where, self.graph, self.checks, self.returns)

    @staticmethod
    def _check_target(op: ast.Operation) -> str | None:
        if op.name in CHECK_OPS:
            return op.name
        target = _attr_value(op.attr("call_target_name")) if op.name == "stablehlo.custom_call" else None
        return target if target in CUSTOM_CHECKS else None

    def verify(self, op: ast.Operation) -> OpView | None:
        """The op's converted types, checked against StableHLO's rules (None for returns and checks)."""
        if op.name in ("func.return", "stablehlo.return") or self._check_target(op):
            return None
        where = self.where(op)
        view = OpView(op, [convert_type(t, where) for t in op.operand_types],
                      [convert_type(t, where) for t in op.result_types], where)
        verify_op(view)
        return view

    def operation(self, op: ast.Operation, view: OpView | None) -> None:
        try:
            self._operation(op, view, self.where(op))
        except UnsupportedError as exc:  # (from reading its attributes: name the op)
            raise exc if str(exc).startswith(self.where(op)) else in_context(exc, self.where(op)) from None

    def _operation(self, op: ast.Operation, view: OpView | None, where: str) -> None:
        if op.name in ("func.return", "stablehlo.return"):
            self.returns = [_tensor_name(v) for v in op.operands]
            return
        kind = self._check_target(op)
        if kind:
            self.check(op, kind, where)
            return
        inputs = [self.name(v, where) for v in op.operands]
        if op.name == "stablehlo.constant":
            value = op.attr("value")
            if not isinstance(value, ast.DenseElementsAttr):
                raise UnsupportedError(f"{where}: constant must be dense<...>")
            name = _tensor_name(op.results[0])
            self.add_tensor(name, view.results[0], where)  # (counted against the limits before the data is made)
            self.graph.tensors[name].data = _dense(value)
            return
        outputs = [_tensor_name(v) for v in op.results]
        for name, t in zip(outputs, view.results, strict=True):
            self.add_tensor(name, t, where)
        attrs = {k: _attr_value(v) for k, v in {**op.attributes, **op.properties}.items()}
        if op.regions:
            attrs.update(region_attrs(op, where))
        label = f"{Path(self.fn.filename).name}:{op.line}"
        self.graph.ops.append(Op(op.name, inputs, outputs, attrs, name=label))

    def check(self, op: ast.Operation, kind: str, where: str) -> None:
        operands = [self.name(v, where) for v in op.operands]
        for v in op.results:
            self.check_results.add(_tensor_name(v))
        value = op.attr("value")
        tolerance = op.attr("tolerance")
        if kind.endswith("_const"):
            if len(operands) != 1 or not isinstance(value, ast.DenseElementsAttr):
                raise GraphError(f"{where}: {kind} needs one operand and a dense value")
            actual, expected = operands[0], _dense(value)
        else:
            if len(operands) != 2:
                raise GraphError(f"{where}: {kind} needs two operands")
            actual, expected = operands
            if self.graph.tensors[actual].is_const and not self.graph.tensors[expected].is_const:
                actual, expected = expected, actual
            if self.graph.tensors[expected].is_const:
                expected = self.graph.tensors[expected].data
        is_float = self.graph.tensors[actual].dtype.is_float
        if kind == "check.expect_close":
            ulps = (int(_attr_value(op.attr("min_ulp_difference") or ast.IntegerAttr(0))),
                    int(_attr_value(op.attr("max_ulp_difference") or ast.IntegerAttr(3))))
            self.checks.append(Check(kind, actual, expected, None, where, ulps))
            return
        if "almost" in kind and op.name.startswith("check."):
            tol = float(tolerance.value) if isinstance(tolerance, ast.FloatAttr) else DEFAULT_TOLERANCE
        elif "almost" in kind:
            tol = CUSTOM_ALMOST_EQ_TOLERANCE
        else:
            tol = DEFAULT_TOLERANCE if kind == "check.eq" and is_float else None
        self.checks.append(Check(kind, actual, expected, tol, where))


def convert(fn: Function) -> Program:
    """The function as written: arguments are inputs, constants are constant tensors, no outputs yet."""
    return _Converter(fn).run()


# ------------------------------------------------------------------------------------- constants


def _broadcast_in_dim(x: np.ndarray, dims: list[int], shape: tuple[int, ...]) -> np.ndarray:
    """Operand dimension i becomes result dimension dims[i]; the others are broadcast."""
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    view = [1] * len(shape)
    for i in order:
        view[dims[i]] = x.shape[i]
    return np.broadcast_to(np.transpose(x, order).reshape(view), shape).copy()


def _convert_values(x: np.ndarray, src: Tensor, dst: Tensor) -> np.ndarray:
    if dst.dtype.is_float:
        return x.astype(np.float32)
    if src.dtype.is_float:
        return sem.to_storage(x, dst.dtype)
    if dst.dtype.name == "bool":
        return x != 0
    return x.astype(np.int64) if dst.dtype.bits == 64 else wrap_to(x.astype(np.int64), dst.dtype)


def _fold_quantize(x: np.ndarray, src: Tensor, dst: Tensor) -> np.ndarray:
    if src.quant is None:
        return sem.quantize(x, dst.quant)
    return sem.requantize(x, src.quant, dst.quant)


Folder = Callable[[Op, list[np.ndarray], list[Tensor], list[Tensor]], np.ndarray]
_FOLDERS: dict[str, Folder] = {
    "stablehlo.uniform_quantize": lambda op, a, i, o: _fold_quantize(a[0], i[0], o[0]),
    "quant.qcast": lambda op, a, i, o: _fold_quantize(a[0], i[0], o[0]),
    "stablehlo.uniform_dequantize": lambda op, a, i, o: sem.dequantize(a[0], i[0].quant),
    "quant.dcast": lambda op, a, i, o: sem.dequantize(a[0], i[0].quant),
    "stablehlo.bitcast_convert": lambda op, a, i, o: a[0],
    "quant.scast": lambda op, a, i, o: a[0],
    "stablehlo.reshape": lambda op, a, i, o: a[0].reshape(o[0].shape),
    "stablehlo.transpose": lambda op, a, i, o: np.transpose(a[0], op.attrs["permutation"]),
    "stablehlo.broadcast_in_dim": lambda op, a, i, o: _broadcast_in_dim(a[0], op.attrs["broadcast_dimensions"],
                                                                        o[0].shape),
    "stablehlo.concatenate": lambda op, a, i, o: np.concatenate(a, axis=op.attrs["dimension"]),
    "stablehlo.slice": lambda op, a, i, o: a[0][tuple(slice(b, e, s) for b, e, s in zip(
        op.attrs["start_indices"], op.attrs["limit_indices"], op.attrs.get("strides", [1] * a[0].ndim),
        strict=True))],
    "stablehlo.reverse": lambda op, a, i, o: np.flip(a[0], axis=tuple(op.attrs["dimensions"])),
    "stablehlo.convert": lambda op, a, i, o: _convert_values(a[0], i[0], o[0]),
    "stablehlo.iota": lambda op, a, i, o: np.broadcast_to(np.arange(o[0].shape[op.attrs["iota_dimension"]]).reshape(
        [-1 if d == op.attrs["iota_dimension"] else 1 for d in range(len(o[0].shape))]), o[0].shape),
}


_INT_OPS: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "negate": np.negative, "abs": np.abs}


def _fold_elementwise(op: Op, args: list[np.ndarray], ins: list[Tensor], outs: list[Tensor]) -> np.ndarray | None:
    """Non-quantized element-wise ops on constants: float32 with the interpreter's arithmetic, integers with
    two's complement wrap-around."""
    short = op.kind.split(".", 1)[-1]
    if any(t.quant is not None for t in ins + outs):
        return None
    if all(t.dtype.is_float for t in ins + outs):
        if short in sem.UNARY and len(args) == 1:
            return sem.UNARY[short](args[0])
        if short in sem.BINARY and len(args) == 2:
            with np.errstate(all="ignore"):
                return np.asarray(sem.BINARY[short](args[0], args[1]), np.float32)
    elif not any(t.dtype.is_float or t.dtype.name == "bool" for t in ins + outs) and short in _INT_OPS:
        exact = _INT_OPS[short](*(a.astype(np.int64) for a in args))  # int64 itself wraps around
        return exact if outs[0].dtype.bits == 64 else wrap_to(exact, outs[0].dtype)
    return None


def _fold_op(graph: Graph, op: Op) -> bool:
    ins = [graph.tensors[n] for n in op.inputs]
    outs = [graph.tensors[n] for n in op.outputs]
    if len(outs) != 1 or not all(t.is_const for t in ins):
        return False
    folder = _FOLDERS.get(op.kind)
    args = [t.data for t in ins]
    try:  # (numpy on the op's attributes as written: a bad permutation, axis or shape fails here first)
        value = folder(op, args, ins, outs) if folder else _fold_elementwise(op, args, ins, outs)
        if value is None:
            return False
        with np.errstate(over="ignore"):  # float64 -> float32 beyond the range: inf, as IEEE converts
            outs[0].data = np.asarray(value).reshape(outs[0].shape).astype(outs[0].dtype.numpy)
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        raise GraphError(f"{op.name}: cannot evaluate {op.kind} on its constant operands ({exc})") from None
    return True


def fold_constants(graph: Graph, keep: Callable[[Op], bool] = lambda op: False) -> None:
    """Evaluate (in order) every op whose inputs are all constant, except those `keep` selects."""
    remaining = []
    for op in graph.ops:
        if keep(op) or not _fold_op(graph, op):
            remaining.append(op)
    graph.ops = remaining


def _users(graph: Graph) -> dict[str, list[tuple[Op, int]]]:
    users: dict[str, list[tuple[Op, int]]] = {}
    for op in graph.ops:
        for i, n in enumerate(op.inputs):
            users.setdefault(n, []).append((op, i))
    return users


def _weight_only(name: str, users: dict[str, list[tuple[Op, int]]], outputs: set[str]) -> bool:
    """Whether every use of `name` (through data movement) is the weights operand of a convolution/dot."""
    uses = users.get(name, [])
    if not uses or name in outputs:
        return False
    for op, i in uses:
        if (op.kind, i) in _WEIGHT_USES:
            continue
        if op.kind in _MOVEMENT and len(op.outputs) == 1 and _weight_only(op.outputs[0], users, outputs):
            continue
        return False
    return True


def _is_feed(graph: Graph, op: Op) -> bool:
    """A data-path quantize/bitcast of a constant (see the module docstring)."""
    if op.kind not in _FEED_OPS or len(op.inputs) != 1:
        return False
    src, dst = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    return src.is_const and src.quant is None and dst.quant is not None and dst.quant.kind != "sub_channel"


def finalize(program: Program, outputs: list[str]) -> Program:
    """Set the graph outputs, feed the data constants, fold the rest, drop ops no output needs."""
    graph = program.graph
    graph.outputs = list(dict.fromkeys(outputs))
    fold_qdq(graph)
    fuse_wide_reductions(graph)
    fold_constants(graph, keep=lambda op: _is_feed(graph, op))
    users = _users(graph)
    out_set = set(graph.outputs)
    for op in graph.ops:
        if _is_feed(graph, op) and not _weight_only(op.outputs[0], users, out_set):
            src = graph.tensors[op.inputs[0]]
            if src.name not in program.feeds:
                program.feeds[src.name] = src.data
                src.data = None
                graph.inputs.append(src.name)
    fold_constants(graph)
    needed = _prune(graph)
    for name in [n for n in program.feeds if n not in needed]:
        del program.feeds[name]
        graph.inputs.remove(name)
        del graph.tensors[name]
    return program


def _prune(graph: Graph) -> set[str]:
    """Drop ops no output depends on and constants nothing reads; return the names still needed."""
    needed = set(graph.outputs)
    kept = []
    for op in reversed(graph.ops):
        if any(n in needed for n in op.outputs):
            kept.append(op)
            needed.update(op.inputs + op.outputs)
    graph.ops = kept[::-1]
    for name in [n for n, t in graph.tensors.items() if n not in needed and n not in graph.inputs]:
        del graph.tensors[name]
    return needed


def load_programs(path: str | Path) -> list[Function]:
    """The functions of a StableHLO file (convert each with `convert`, then `finalize`)."""
    fns = functions(path)
    if dialect_of(fns, path) != "stablehlo":
        raise QcError(f"{path}: not a StableHLO program")
    return fns


def load_stablehlo(path: str | Path) -> Graph:
    """The graph of a file's only function, or of @main: inputs are its arguments plus fed constants, outputs its
    results."""
    fns = load_programs(path)
    if len(fns) != 1:
        mains = [f for f in fns if f.name == "main"]
        if len(mains) != 1:
            raise QcError(f"{path}: {len(fns)} functions ({', '.join('@' + f.name for f in fns[:8])}); a model "
                          "needs exactly one function or one @main")
        fns = mains
    program = convert(fns[0])
    if not program.returns:
        raise QcError(f"{path}: @{program.name} returns nothing; nothing to compile")
    return finalize(program, program.returns).graph
