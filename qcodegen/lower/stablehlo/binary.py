"""StableHLO's quantized add, subtract and multiply: integer forms that equal the float definition, proved at plan
time (docs/stablehlo.md "Binary element-wise ops").

The definition (StableHLO's per-op meaning of quantized ops, evaluated as the reference interpreter evaluates its
QDQ fallback): dequantize both operands in float32, the float32 op, quantize (divide by the scale and add the zero
point in float32, clamp, round half to even) -- `sem.binary_table`. Rounding each operand to output units and
adding the rounded terms rounds twice and is off by one for a fifth of the pairs of unrelated scales; the forms
below round once:

- **sum of tables** (add, subtract of 8-bit operands): `T_a[a] + T_b[b]` in i32 (two 256-entry LOOKUPs, ADD), then
  one RESCALE by 2^-k adding the zero point and clamping. The tables are not rounded terms but a solution of the
  difference constraints "for every operand pair with definition r, T_a[a] + T_b[b] lies strictly inside the
  interval that rounds to r - zp at 2^-k" (one-sided where r is clamped): 256 + 256 unknowns, 2 x 65,536
  constraints, solved by Bellman-Ford relaxation (vectorised, started from the rounded terms) or proved infeasible
  (a negative cycle). A solution at k gives one at k + 1 (doubled), so the smallest feasible k is found by
  bisection below the largest k whose sums fit int32 with margin. The solution reproduces the definition's float32
  rounding at ties too; it is infeasible only where that rounding is inconsistent with any sum of two functions
  (exact ties resolved differently by different pairs on one line, e.g. scales 0.05 + 0.1 -> 0.2). Then the
  compact form is the rounded terms at the largest k.
- **product** (multiply): `(a - zp_a) (b - zp_b)` exact in i32 (CAST, ADD, MUL), one RESCALE half to even by
  `f32(s_a) f32(s_b) / f32(s_y)` (31-bit multiplier). Equal to the exactly rounded product; the float32 definition
  differs where its own roundings straddle a boundary (exact ties of "nice" scales).
- **rescaled sum** (add, subtract with a 16-bit operand): each operand RESCALEd half to even into output units x 2^k
  (k the largest with every term below 2^28), ADD / SUB, one RESCALE by 2^-k. Bound: each term is within 1/2 + 1/8
  unit of 2^-k (rounding, and the 31-bit multiplier's 2^-31 relative error on terms below 2^28), so the value before
  the final rounding is within 1.25 * 2^-k output LSB of the exact one: the result is the exactly rounded value
  except within that distance of a tie.
- **table**: a two-input LOOKUP of the definition itself (65,536 entries, 64 KB for 8-bit results): exact by
  construction.

**Proof.** For 8-bit operand pairs the chosen form is lowered on its own over the 256 x 256 grid of stored values
and run by the numpy references of its primitives (which the generated C equals bit for bit), and every pair is
compared with the definition (`enumeration`); wider operands compare a seeded sample of 65,536 pairs (`sample`).
Pairs that differ are classified: an **f32 tie** where the definition's float32 evaluation and the exactly rounded
value (`sem.exact_binary`) differ. The verdict is an `Exactness` record of the schedule (`qcodegen inspect`).

**Choice** (graph option `binary_ops`): "exact" (default) takes the compact form when the enumeration proves it
exact and the two-input table otherwise (8-bit pairs); "compact" keeps the compact form and reports the pairs that
differ. Plans are cached per (op, operand and result types).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedError
from ...fixedpoint import Rounding
from ...ir.dtypes import dtype
from ...ir.graph import Graph, Op, Tensor
from ...ir.quant import QuantType
from ...ir.schedule import OUTPUT, Exactness
from ...reference.executor import run_reference
from ...semantics import stablehlo as sem
from ..base import Lowerer
from ..common import max_offset
from .common import add_channels, as_type, lookup, rescale_i32, reshaped

Emit = Callable[[Lowerer, Tensor, Tensor, Tensor], None]
OPTION, EXACT, COMPACT = "binary_ops", "exact", "compact"
CHOICES = (EXACT, COMPACT)
SAMPLE = 1 << 16  # pairs compared for operands too wide to enumerate
_TERM_LIMIT = 1 << 28  # rescaled terms and table entries stay below this: sums fit int32 with margin
_MAX_K = 24  # beyond float32's precision a finer intermediate cannot change what matches the definition
_INF = np.int64(1) << 60
_TABLE_TYPES = ("i8", "u8")  # operand pairs of these are enumerated (and may fall back to a table)
_INDEX_TYPES = ("i8", "u8", "i16", "u16")


@dataclass(frozen=True)
class Form:
    """One integer form of a binary op: how to emit it, and what to call it in reports."""

    name: str
    emit: Emit
    detail: str = ""


@dataclass(frozen=True)
class Plan:
    """The chosen form and its verdict against the definition."""

    form: Form
    method: str
    cases: int
    off: int
    ties: int
    detail: str

    def record(self, source: str, op: str, types: str) -> Exactness:
        return Exactness(source, op, types, self.form.name, self.method, self.cases, self.off, self.ties,
                         self.detail)


def _key(q: QuantType | None) -> tuple | None:
    if q is None:
        return None
    return q.storage.name, float(np.float32(q.scale)), q.zero_point, q.storage_min, q.storage_max


def _type(key: tuple | None) -> QuantType | None:
    if key is None:
        return None
    name, scale, zp, lo, hi = key
    return QuantType.per_tensor(name, scale, zp, storage_min=lo, storage_max=hi)


def describe_types(q_a: QuantType, q_b: QuantType, q_y: QuantType | None) -> str:
    a, b, y = (f"{q.storage}:{float(np.float32(q.scale)):.6g}:{q.zero_point}" if q is not None else "i1"
               for q in (q_a, q_b, q_y))
    return f"{a} x {b} -> {y}"


def plan_binary(kind: str, q_a: QuantType, q_b: QuantType, q_y: QuantType | None, policy: str) -> Plan:
    """The form of a binary op for these per-tensor types (scales taken as float32), with its verdict. kind: add,
    subtract, multiply, maximum, minimum, divide, remainder, power, atan2 or compare.<direction> (q_y None: i1)."""
    if policy not in CHOICES:
        raise UnsupportedError(f"graph option {OPTION}={policy!r}: expected {EXACT!r} or {COMPACT!r}")
    return _plan(kind, _key(q_a), _key(q_b), _key(q_y), policy)


@functools.lru_cache(maxsize=256)
def _plan(kind: str, key_a: tuple, key_b: tuple, key_y: tuple | None, policy: str) -> Plan:
    q_a, q_b, q_y = (_type(k) for k in (key_a, key_b, key_y))
    enumerable = q_a.storage.name in _TABLE_TYPES and q_b.storage.name in _TABLE_TYPES
    if kind in ("add", "subtract"):
        form = _sum_tables(kind, q_a, q_b, q_y) if enumerable else _rescaled_sum(kind, q_a, q_b, q_y)
    elif kind == "multiply":
        form = _product(q_a, q_b, q_y)
    elif kind in ("maximum", "minimum"):
        form = _extremum(kind, q_a, q_b)
    else:
        form = table_form(kind, q_a, q_b)
    method = "enumeration" if enumerable else "sample"
    off, ties, cases = _compare(kind, form, q_a, q_b, q_y, sample=not enumerable)
    if off == 0 or policy == COMPACT or not enumerable:
        return Plan(form, method, cases, off, ties, form.detail)
    detail = (f"{form.name} differs on {off:,} pairs ({ties:,} f32 ties){'; ' + form.detail if form.detail else ''}"
              f"; graph option {OPTION}={COMPACT} keeps it")
    table = table_form(kind, q_a, q_b)
    off, ties, cases = _compare(kind, table, q_a, q_b, q_y, sample=False)
    return Plan(table, method, cases, off, ties, detail)


# ------------------------------------------------------------------------------------------------ forms


def table_form(kind: str, q_a: QuantType, q_b: QuantType) -> Form:
    """A two-input LOOKUP of the definition for every pair of stored values (8/16-bit operands, 65,536 entries at
    most)."""
    if q_a.storage.name not in _INDEX_TYPES or q_b.storage.name not in _INDEX_TYPES or (
            q_a.storage.bits + q_b.storage.bits > 16):
        raise UnsupportedError(f"{kind} of {q_a.storage} and {q_b.storage} operands: a table of the definition "
                               "would exceed 65,536 entries")

    def emit(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor) -> None:
        grid_a, grid_b = (np.arange(t.dtype.min, t.dtype.max + 1)[index] for t, index in
                          ((a, np.s_[:, None]), (b, np.s_[None, :])))
        table = definition(kind, grid_a, grid_b, a.quant, b.quant, y.quant)
        lookup(lw, [_aligned(lw, a, y), _aligned(lw, b, y)], table.reshape(-1), y.name, y.dtype)

    return Form(f"{(1 << (q_a.storage.bits + q_b.storage.bits)):,}-entry table of the definition", emit)


def definition(kind: str, a: np.ndarray, b: np.ndarray, q_a: QuantType, q_b: QuantType, q_y: QuantType | None
               ) -> np.ndarray:
    """The op's definition on stored values a, b (broadcast): dequantize in float32, the float32 op, quantize
    (storage integers), or 0 / 1 for compare."""
    fa, fb = sem.dequantize(a, q_a), sem.dequantize(b, q_b)
    with np.errstate(all="ignore"):
        if kind.startswith("compare."):
            return sem.COMPARE[kind.split(".", 1)[1]](fa, fb).astype(np.int64)
        return sem.quantize(sem.BINARY[kind](fa, fb), q_y)


def _aligned(lw: Lowerer, t: Tensor, y: Tensor) -> str:
    return reshaped(lw, t.name, (1,) * (len(y.shape) - len(t.shape)) + t.shape)


def _grid(q: QuantType) -> np.ndarray:
    return np.arange(q.storage_min, q.storage_max + 1, dtype=np.int64)


def _ratio(q: QuantType, q_y: QuantType) -> float:
    return float(np.float32(q.scale)) / float(np.float32(q_y.scale))


def _largest_k(*terms: float) -> int:
    """The largest k with every term * 2^k below _TERM_LIMIT (at most _MAX_K)."""
    worst = max(terms)
    return min(_MAX_K, math.floor(math.log2(_TERM_LIMIT / worst))) if worst > 0 else _MAX_K


def _sum_tables(kind: str, q_a: QuantType, q_b: QuantType, q_y: QuantType) -> Form:
    sign = -1 if kind == "subtract" else 1
    ga, gb = _grid(q_a), _grid(q_b)
    k_max = _largest_k(max_offset(q_a) * _ratio(q_a, q_y) + 1, max_offset(q_b) * _ratio(q_b, q_y) + 1)
    if k_max < 0:
        raise UnsupportedError(f"{kind} of {q_a.describe()} and {q_b.describe()} into {q_y.describe()}: operand "
                               "values too large in output units")

    def rounded(k: int) -> tuple[np.ndarray, np.ndarray]:
        return (np.rint((ga - q_a.zero_point) * (_ratio(q_a, q_y) * 2.0 ** k)).astype(np.int64),
                sign * np.rint((gb - q_b.zero_point) * (_ratio(q_b, q_y) * 2.0 ** k)).astype(np.int64))

    solve = functools.partial(_solve, definition(kind, ga[:, None], gb[None, :], q_a, q_b, q_y), q_y, rounded)
    if solve(k_max) is None:
        ta, tb = rounded(k_max)
        return _tables_form(ta, tb, k_max, q_a, q_b, f"no k <= {k_max} is exact (rounded terms at k = {k_max})")
    lo, hi = 0, k_max  # solve(hi) succeeds
    while lo < hi:
        mid = (lo + hi) // 2
        if solve(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    ta, tb = solve(lo)
    return _tables_form(ta, tb, lo, q_a, q_b, f"tables solved for k = {lo} (k <= {k_max} fit int32)")


def _solve(wanted: np.ndarray, q_y: QuantType, rounded: Callable[[int], tuple[np.ndarray, np.ndarray]], k: int
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """Tables T_a, T_b with T_a[i] + T_b[j] inside the interval of (wanted[i, j] - zp) * 2^k (module docstring),
    or None when none exist. Unknowns u = T_a, v = -T_b: lo <= u[i] - v[j] <= hi."""
    half = (1 << k) >> 1
    margin = 1 if k else 0  # k > 0: strictly inside, so the final rounding never meets a tie
    base = (wanted - q_y.zero_point) << k
    lo = np.where(wanted <= q_y.storage_min, -_INF, base - half + margin)
    hi = np.where(wanted >= q_y.storage_max, _INF, base + half - margin)
    ta, tb = rounded(k)
    u, v = ta, -tb
    for _ in range(u.size + v.size + 1):
        nu = np.minimum(u, (v[None, :] + hi).min(axis=1))
        nv = np.minimum(v, (nu[:, None] - lo).min(axis=0))
        if np.array_equal(nu, u) and np.array_equal(nv, v):
            return u, -v
        u, v = nu, nv
    return None


def _full_table(values: np.ndarray, q: QuantType) -> np.ndarray:
    """Entries for every value of the storage type (those outside a narrowed storage range never occur)."""
    index = np.clip(np.arange(q.storage.min, q.storage.max + 1), q.storage_min, q.storage_max) - q.storage_min
    return values[index]


def _tables_form(ta: np.ndarray, tb: np.ndarray, k: int, q_a: QuantType, q_b: QuantType, detail: str) -> Form:
    full_a, full_b = _full_table(ta, q_a), _full_table(tb, q_b)

    def emit(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor) -> None:
        terms = []
        for t, table in ((a, full_a), (b, full_b)):
            tmp = lw.temp(f"{y.name}_{t.name}_i32", t.shape, "i32")
            lookup(lw, [t.name], table, tmp, dtype("i32"))
            terms.append(tmp)
        acc = lw.temp(f"{y.name}_acc", y.shape, "i32")
        lw.emit("ADD", terms, [acc])
        _finish(lw, acc, k, y)

    return Form(f"sum of two 256-entry tables at 2^{k} output units, one rounding", emit, detail)


def _fine(q_y: QuantType, k: int) -> QuantType:
    """i32 in output units x 2^k (zero point 0): f32(s_y) 2^-k."""
    return QuantType.per_tensor("i32", float(np.float32(q_y.scale)) * 2.0 ** -k)


def _finish(lw: Lowerer, acc: str, k: int, y: Tensor) -> None:
    """y = clamp(round_half_even(acc 2^-k) + zp_y)."""
    rescale_i32(lw, acc, _fine(y.quant, k), y.name, sem.f32_scales(y.quant), None)


def _centered(lw: Lowerer, t: Tensor, base: str) -> str:
    """t - zp_t as i32 (CAST, ADD)."""
    tmp = lw.temp(base, t.shape, "i32")
    lw.emit("CAST", [t.name], [tmp])
    return add_channels(lw, tmp, np.array([-t.quant.zero_point]), None)


def _rescaled_sum(kind: str, q_a: QuantType, q_b: QuantType, q_y: QuantType) -> Form:
    k = _largest_k(max_offset(q_a) * _ratio(q_a, q_y), max_offset(q_b) * _ratio(q_b, q_y))
    if k < 0:
        raise UnsupportedError(f"{kind} of {q_a.describe()} and {q_b.describe()} into {q_y.describe()}: operand "
                               "values too large in output units")

    def emit(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor) -> None:
        fine = _fine(y.quant, k)
        terms = []
        for t in (a, b):
            tmp = lw.temp(f"{y.name}_{t.name}_fine", t.shape, "i32")
            lw.rescale(_centered(lw, t, f"{y.name}_{t.name}_i32"), tmp, float(np.float32(t.quant.scale)) / fine.scale,
                       rounding=Rounding.HALF_EVEN)
            terms.append(tmp)
        acc = lw.temp(f"{y.name}_acc", y.shape, "i32")
        lw.emit("SUB" if kind == "subtract" else "ADD", terms, [acc])
        _finish(lw, acc, k, y)

    return Form(f"operands rescaled to 2^{k} output units, one rounding", emit,
                f"before the final rounding within 1.25 * 2^-{k} LSB of the exact value")


def _product(q_a: QuantType, q_b: QuantType, q_y: QuantType) -> Form:
    bound = max_offset(q_a) * max_offset(q_b)
    if bound >= 1 << 31:
        raise UnsupportedError(f"multiply of {q_a.describe()} and {q_b.describe()}: the product of the operands "
                               f"minus their zero points reaches {bound:,}, beyond int32")

    def emit(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor) -> None:
        terms = [_centered(lw, t, f"{y.name}_{t.name}_i32") for t in (a, b)]
        acc = lw.temp(f"{y.name}_acc", y.shape, "i32")
        lw.emit("MUL", terms, [acc])
        product = QuantType.per_tensor("i32", float(np.float32(a.quant.scale)) * float(np.float32(b.quant.scale)))
        rescale_i32(lw, acc, product, y.name, sem.f32_scales(y.quant), None)

    return Form("exact product, one RESCALE half to even", emit)


def _extremum(kind: str, q_a: QuantType, q_b: QuantType) -> Form:
    """MAXIMUM / MINIMUM of the stored values, an operand of another type first mapped to the result's by a table
    of quantize(dequantize(x)): quantize is monotone, so quantize(max(u, v)) = max(quantize(u), quantize(v))."""

    def emit(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor) -> None:
        names = [as_type(lw, t, y.quant, f"{y.name}_{t.name}_q") for t in (a, b)]
        lw.emit(kind.upper(), names, [y.name])

    return Form(f"{kind.upper()} of the stored values in the result's type", emit)


# ------------------------------------------------------------------------------------------------ proof


def run_form(form: Form, q_a: QuantType, q_b: QuantType, q_y: QuantType | None, a: np.ndarray, b: np.ndarray
             ) -> np.ndarray:
    """The form lowered on its own for operands a, b (broadcasting numpy shapes of equal rank) and run by the numpy
    references of its primitives."""
    y_shape = np.broadcast_shapes(a.shape, b.shape)
    y = Tensor("y", y_shape, q_y.storage, q_y) if q_y is not None else Tensor("y", y_shape, "bool")
    graph = Graph("probe", {"a": Tensor("a", a.shape, q_a.storage, q_a), "b": Tensor("b", b.shape, q_b.storage, q_b),
                            "y": y}, [], ["a", "b"], ["y"],
                  {"rescale_rounding": Rounding.HALF_EVEN.value})
    op = Op("stablehlo.probe", ["a", "b"], ["y"], {}, "probe")
    graph.ops.append(op)
    lw = Lowerer(graph)
    lw.op = op
    form.emit(lw, *(graph.tensors[n] for n in ("a", "b", "y")))
    lw.buffer("y").kind = OUTPUT
    lw.schedule.outputs = ["y"]
    inputs = [x.astype(q.storage.numpy) for x, q in ((a, q_a), (b, q_b))]
    return run_reference(lw.schedule, inputs)["y"].astype(np.int64)


def _compare(kind: str, form: Form, q_a: QuantType, q_b: QuantType, q_y: QuantType | None, sample: bool
             ) -> tuple[int, int, int]:
    """(pairs that differ from the definition, of those f32 ties, pairs compared): every pair of stored values, or a
    seeded sample."""
    if sample:
        rng = np.random.default_rng(0)
        a = rng.integers(q_a.storage_min, q_a.storage_max + 1, SAMPLE)
        b = rng.integers(q_b.storage_min, q_b.storage_max + 1, SAMPLE)
    else:
        a, b = _grid(q_a)[:, None], _grid(q_b)[None, :]
    got = run_form(form, q_a, q_b, q_y, a, b)
    want = definition(kind, a, b, q_a, q_b, q_y)
    differ = np.nonzero(got != want)
    if kind not in sem.EXACT_BINARY or not differ[0].size:
        return int(differ[0].size), 0, int(got.size)
    a_off, b_off = np.broadcast_to(a, got.shape)[differ], np.broadcast_to(b, got.shape)[differ]
    exact = sem.exact_binary(kind, a_off, b_off, q_a, q_b, q_y)
    return int(a_off.size), int(np.count_nonzero(exact != want[differ])), int(got.size)
