"""StableHLO element-wise ops on quantized tensors (docs/semantics.md §7.4).

- Unary ops (abs, negate, sign, floor, ceil, round_*, sqrt, rsqrt, cbrt, exponential, exponential_minus_one, log,
  log_plus_one, sine, cosine, tan, tanh, logistic) on 8/16-bit storage: a full table of the interpreter's
  dequantize -> f32 op -> quantize for every stored value (TABLE for i8 -> i8, LOOKUP otherwise). Exact.
- clamp with constant scalar bounds: the same, the bounds baked into the table.
- binary ops (add, subtract, multiply, maximum, minimum, divide, remainder, power, atan2, compare): the form
  qcodegen/lower/stablehlo/binary.py chooses and proves against the float definition (every pair of 8-bit operands
  enumerated at plan time); the verdict is a schedule exactness record.
- add of one i32 per-axis type (a bias add): ADD of the stored values, as the interpreter.
- select: SELECT, operands mapped to the result type when theirs differs.
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...ir.schedule import Exactness
from ...semantics import stablehlo as sem
from ..base import Lowerer, rule
from . import binary
from .common import as_type, is_const, lookup, operands, per_tensor, reshaped, table_inputs

_TABLE_BINARY = ("divide", "remainder", "power", "atan2")


def _short(op: Op) -> str:
    return op.kind.split(".", 1)[1]


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


_BINARY = ("add", "subtract", "multiply", "maximum", "minimum", *_TABLE_BINARY)


@rule(*(f"stablehlo.{name}" for name in _BINARY), "stablehlo.compare")
def lower_binary(lw: Lowerer, op: Op) -> None:
    """The form binary.plan_binary chooses and proves; its verdict goes into the schedule's exactness records."""
    (a, b), (y,) = operands(lw, op, 2)
    kind = _short(op)
    if kind == "add" and all(t.quant is not None and t.quant.kind == "per_axis" for t in (a, b, y)):
        _add_per_axis(lw, a, b, y)
        return
    if kind == "compare":
        direction = str(lw.attr("comparison_direction"))
        if direction not in sem.COMPARE:
            raise lw.error(f"unknown comparison_direction {direction!r}")
        kind = f"compare.{direction}"
        q_y = None
    else:
        q_y = per_tensor(lw, y)
        if kind in ("maximum", "minimum") and y.dtype.name not in ("i8", "i16", "i32"):
            raise UnsupportedError(f"{lw.label}: {kind} of {y.dtype} values")
    q_a, q_b = per_tensor(lw, a), per_tensor(lw, b)
    try:
        plan = binary.plan_binary(kind, q_a, q_b, q_y, lw.graph.options.get(binary.OPTION, binary.EXACT))
    except UnsupportedError as exc:
        raise UnsupportedError(f"{lw.label}: {exc}") from None
    plan.form.emit(lw, a, b, y)
    lw.schedule.exactness.append(plan.record(lw.label, op.kind, binary.describe_types(q_a, q_b, q_y)))


def _add_per_axis(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor) -> None:
    """The interpreter's per-axis add: identical i32 types, the stored values added (zero points 0)."""
    if not (sem.same_type(a.quant, b.quant) and sem.same_type(a.quant, y.quant) and y.dtype.name == "i32"
            and not np.any(y.quant.zero_points)):
        raise UnsupportedError(f"{lw.label}: per-axis add needs one i32 per-axis type with zero points 0")
    lw.emit("ADD", [a.name, b.name], [y.name])
    lw.schedule.exactness.append(Exactness(
        lw.label, "stablehlo.add", "i32 per-axis x i32 per-axis -> i32 per-axis", "ADD of the stored values",
        "construction", 0, 0, 0, "the exact integer sum (the interpreter's integer form); the float32 definition "
        "rounds sums beyond 2^24"))


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
