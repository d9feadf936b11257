"""StableHLO element-wise ops on quantized tensors (docs/semantics.md §7.4).

- Unary ops (abs, negate, sign, floor, ceil, round_*, sqrt, rsqrt, cbrt, exponential, exponential_minus_one, log,
  log_plus_one, sine, cosine, tan, tanh, logistic) on 8/16-bit storage: a full table of the interpreter's
  dequantize -> f32 op -> quantize for every stored value (TABLE for i8 -> i8, LOOKUP otherwise). Exact.
- clamp with constant scalar bounds: the same, the bounds baked into the table.
- add: the interpreter's integer form -- each operand requantized to the result scale in i32 (tables of its merged
  formula for 8-bit operands, the result zero point folded into the second), ADD, CLAMP, CAST. Exact. 16-bit
  operands use qcodegen's generic add (RESCALE half to even; the tables would be 256 KB each).
- subtract, multiply: qcodegen's generic sub / mul with RESCALE rounding half to even (the graph option of every
  StableHLO graph): equal to the float definition except within float32 rounding error of a tie.
- divide, remainder, power, atan2, compare (and everything else the interpreter evaluates as float on two 8-bit
  operands): a two-input LOOKUP of 65,536 entries, exact.
- maximum, minimum: MAXIMUM / MINIMUM of the stored values when operands and result share one type (what the
  interpreter does); otherwise each operand is first mapped to the result type (quantize is monotone). Exact.
- select: SELECT, operands mapped to the result type when theirs differs.
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.dtypes import DType, dtype
from ...ir.graph import Op, Tensor
from ...semantics import stablehlo as sem
from ..base import RULES, Lowerer, rule
from .common import as_type, i32_type, is_const, lookup, operands, per_tensor, reshaped, table_inputs

_TABLE_BINARY = ("divide", "remainder", "power", "atan2")


def _short(op: Op) -> str:
    return op.kind.split(".", 1)[1]


def delegate(lw: Lowerer, op: Op, kind: str) -> None:
    """Lower `op` with qcodegen's generic rule for `kind` (same operands, no fused activation)."""
    proxy = Op(kind, op.inputs, op.outputs, {}, op.name)
    lw.op = proxy
    try:
        RULES[kind](lw, proxy)
    finally:
        lw.op = op


@rule(*(f"stablehlo.{name}" for name in sem.UNARY))
def lower_unary(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    qx, qy = per_tensor(lw, x), per_tensor(lw, y)
    table_inputs(lw, x)
    lookup(lw, [x.name], sem.unary_table(sem.UNARY[_short(op)], qx, qy), y.name, y.dtype)


@rule("stablehlo.clamp")
def lower_clamp(lw: Lowerer, op: Op) -> None:
    (lo, x, hi), (y,) = operands(lw, op, 3)
    qx, qy = per_tensor(lw, x), per_tensor(lw, y)
    bounds = []
    for t in (lo, hi):
        if not is_const(lw, t.name) or len(set(np.asarray(t.data).reshape(-1).tolist())) != 1:
            raise UnsupportedError(f"{lw.label}: clamp bounds must be constants with one value")
        bounds.append(sem.dequantize(np.asarray(t.data).reshape(-1)[:1], per_tensor(lw, t))[0])
    table_inputs(lw, x)
    table = sem.unary_table(lambda v: np.minimum(np.maximum(v, bounds[0]), bounds[1]), qx, qy)
    lookup(lw, [x.name], table, y.name, y.dtype)


def _table2(lw: Lowerer, op: Op, fn: sem.FloatFn, out_dtype: DType) -> None:
    (a, b), (y,) = operands(lw, op, 2)
    qa, qb = per_tensor(lw, a), per_tensor(lw, b)
    table_inputs(lw, a, b)
    a_name, b_name = (reshaped(lw, t.name, (1,) * (len(y.shape) - len(t.shape)) + t.shape) for t in (a, b))
    a_grid = sem.dequantize(sem.storage_grid(a.dtype), qa)[:, None]
    b_grid = sem.dequantize(sem.storage_grid(b.dtype), qb)[None, :]
    with np.errstate(all="ignore"):
        values = fn(a_grid, b_grid)
    table = values.astype(np.int64) if out_dtype.name == "bool" else sem.quantize(values, per_tensor(lw, y))
    lookup(lw, [a_name, b_name], table.reshape(-1), y.name, out_dtype)


@rule(*(f"stablehlo.{name}" for name in _TABLE_BINARY))
def lower_table_binary(lw: Lowerer, op: Op) -> None:
    _table2(lw, op, sem.BINARY[_short(op)], lw.tensor_out(0).dtype)


@rule("stablehlo.compare")
def lower_compare(lw: Lowerer, op: Op) -> None:
    direction = str(lw.attr("comparison_direction"))
    if direction not in sem.COMPARE:
        raise lw.error(f"unknown comparison_direction {direction!r}")
    _table2(lw, op, sem.COMPARE[direction], lw.tensor_out(0).dtype)


def _generic_types(a: Tensor, b: Tensor, y: Tensor) -> bool:
    """Whether qcodegen's generic add/sub/mul rules take these operands (one 8/16-bit storage type, 16-bit zero
    points 0)."""
    return (a.dtype == b.dtype == y.dtype and a.dtype.name in ("i8", "i16")
            and all(t.dtype.bits == 8 or t.quant.zero_point == 0 for t in (a, b, y)))


@rule("stablehlo.add")
def lower_add(lw: Lowerer, op: Op) -> None:
    (a, b), (y,) = operands(lw, op, 2)
    if all(t.quant is not None and t.quant.kind == "per_axis" for t in (a, b, y)):
        _add_per_axis(lw, a, b, y)
        return
    qa, qb, qy = per_tensor(lw, a), per_tensor(lw, b), per_tensor(lw, y)
    if a.dtype.bits > 8 or b.dtype.bits > 8:
        if not _generic_types(a, b, y):
            raise UnsupportedError(f"{lw.label}: add of {a.dtype} and {b.dtype} into {y.dtype}")
        delegate(lw, op, "add")
        return
    table_inputs(lw, a)
    table_inputs(lw, b)
    wide = i32_type(qy)
    terms = []
    for t, q, offset in ((a, qa, 0), (b, qb, qy.zero_point)):
        tmp = lw.temp(f"{y.name}_{t.name}_i32", t.shape, "i32")
        lookup(lw, [t.name], sem.requantize(sem.storage_grid(t.dtype), q, wide) - offset, tmp, dtype("i32"))
        terms.append(tmp)
    acc = lw.temp(f"{y.name}_acc", y.shape, "i32")
    lw.emit("ADD", terms, [acc])
    clamped = lw.temp(f"{y.name}_clamped", y.shape, "i32")
    lw.emit("CLAMP", [acc], [clamped], min_val=qy.storage_min, max_val=qy.storage_max)
    lw.emit("CAST", [clamped], [y.name])


def _add_per_axis(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor) -> None:
    """The interpreter's per-axis add: identical i32 types, the stored values added (zero points 0)."""
    if not (sem.same_type(a.quant, b.quant) and sem.same_type(a.quant, y.quant) and y.dtype.name == "i32"
            and not np.any(y.quant.zero_points)):
        raise UnsupportedError(f"{lw.label}: per-axis add needs one i32 per-axis type with zero points 0")
    lw.emit("ADD", [a.name, b.name], [y.name])


@rule("stablehlo.subtract", "stablehlo.multiply")
def lower_sub_mul(lw: Lowerer, op: Op) -> None:
    (a, b), (y,) = operands(lw, op, 2)
    for t in (a, b, y):
        per_tensor(lw, t)
    if _generic_types(a, b, y):
        delegate(lw, op, "sub" if _short(op) == "subtract" else "mul")
        return
    _table2(lw, op, sem.BINARY[_short(op)], y.dtype)


@rule("stablehlo.maximum", "stablehlo.minimum")
def lower_extremum(lw: Lowerer, op: Op) -> None:
    (a, b), (y,) = operands(lw, op, 2)
    qy = per_tensor(lw, y)
    for t in (a, b):
        per_tensor(lw, t)
    if y.dtype.name not in ("i8", "i16", "i32"):
        raise UnsupportedError(f"{lw.label}: {_short(op)} of {y.dtype} values")
    names = [as_type(lw, t, qy, f"{y.name}_{t.name}_q") for t in (a, b)]
    lw.emit(_short(op).upper(), names, [y.name])


@rule("stablehlo.select")
def lower_select(lw: Lowerer, op: Op) -> None:
    (pred, a, b), (y,) = operands(lw, op, 3)
    if pred.dtype.name != "bool":
        raise lw.error(f"pred {pred.name!r} must be i1")
    names = [a.name, b.name]
    if y.quant is not None:
        qy = per_tensor(lw, y)
        names = [as_type(lw, t, qy, f"{y.name}_{t.name}_q") for t in (a, b)]
    p = reshaped(lw, pred.name, (1,) * len(y.shape)) if pred.shape == () else pred.name
    lw.emit("SELECT", [p] + names, [y.name])
