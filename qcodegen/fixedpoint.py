"""Fixed-point arithmetic of TOSA 1.0 (docs/semantics.md §3), vectorized in int64 numpy.

Everything here is exact integer arithmetic; the only float is the plan-time conversion of a real
scale into a (multiplier, shift) pair, done in float64 exactly as MLIR's computeMultiplierAndShift.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import numpy as np

from .errors import GraphError, PlanError


class Rounding(StrEnum):
    SINGLE = "single_round"
    INEXACT = "inexact_round"  # TOSA EXT-INEXACTROUND: only an error bound is specified; qcodegen computes
    # it exactly like SINGLE_ROUND (the reference model uses float32 here, which is within that bound)
    DOUBLE = "double_round"
    HALF_EVEN = "half_even"  # qcodegen extension (docs/semantics.md §3.4), only for float-defined sources: the RESCALE
    # result (scaled value + output zero point) is rounded half to even, so ties of the scaled value go to the odd
    # neighbour when the output zero point is odd (`odd_ties`)

    @classmethod
    def parse(cls, value: str | Rounding) -> Rounding:
        if isinstance(value, Rounding):
            return value
        key = value.lower()
        for member in cls:
            if key in (member.value, member.name.lower()):
                return member
        raise GraphError(f"unknown rounding mode {value!r} (known: {', '.join(m.value for m in cls)})")


class Unpredictable(PlanError):
    """A TOSA REQUIRE condition failed: the result would be unpredictable."""


def scale_to_multiplier_shift(scale: float, bits: int = 32) -> tuple[int, int]:
    """Real scale -> (multiplier, shift) with multiplier * 2**-shift ~= scale (MLIR, docs/semantics.md §4.1).

    The mantissa is rounded half away from zero (C's std::round), not with Python's round().
    Raises PlanError when the scale needs a shift below 2 (scale >= 2**29 for 32-bit multipliers).
    """
    if not (math.isfinite(scale) and scale >= 0):
        raise PlanError(f"cannot express scale {scale!r} as a fixed-point multiplier")
    if scale == 0:
        return 0, 31 if bits == 32 else 15
    top = 31 if bits == 32 else 15
    mantissa, exponent = math.frexp(scale)
    multiplier = math.floor(mantissa * (1 << top) + 0.5)
    if multiplier == 1 << top:
        multiplier //= 2
        exponent += 1
    shift = top - exponent
    if shift > 62:
        multiplier >>= min(31, shift - 62)
        shift = 62
    if shift < 2:
        raise PlanError(f"scale {scale!r} is too large for a RESCALE (shift {shift} < 2)")
    return multiplier, shift


def _check_scale_params(m: np.ndarray, shift: np.ndarray) -> None:
    if np.any(m < 0):
        raise Unpredictable(f"RESCALE multiplier {int(m[m < 0].flat[0])} is negative")
    bad = (shift < 2) | (shift > 62)
    if np.any(bad):
        raise Unpredictable(f"RESCALE shift {int(shift[bad].flat[0])} is outside [2, 62]")


def _floor_shift_half_even(product: np.ndarray, shift: np.ndarray, odd_ties: Any) -> np.ndarray:
    quotient = product >> shift
    remainder = product - (quotient << shift)
    half = np.left_shift(np.int64(1), shift - 1)
    round_up = (remainder > half) | ((remainder == half) & ((quotient & 1) != np.asarray(odd_ties, np.int64)))
    return quotient + round_up


def apply_scale_32(value, multiplier, shift, rounding: Rounding = Rounding.SINGLE, odd_ties: Any = 0
                   ) -> np.ndarray:
    """TOSA apply_scale_32 (double_round per `rounding`), plus the HALF_EVEN extension: ties to the even neighbour,
    or to the odd one where `odd_ties` (0/1, broadcast like the multiplier) is 1 -- for an odd output zero point
    added next. int64 result."""
    v = np.asarray(value, np.int64)
    m = np.asarray(multiplier, np.int64)
    s = np.asarray(shift, np.int64)
    _check_scale_params(m, s)
    v, m, s = np.broadcast_arrays(v, m, s)
    limit = np.left_shift(np.int64(1), np.minimum(s, 32) - 1)
    bad = (s <= 31) & ((v < -limit) | (v >= limit))
    if np.any(bad):
        i = np.flatnonzero(bad)[0]
        raise Unpredictable(f"RESCALE value {int(v.flat[i])} is out of range for shift {int(s.flat[i])} "
                            f"(TOSA REQUIRE)")
    if rounding is Rounding.HALF_EVEN:
        return _floor_shift_half_even(v * m, s, odd_ties)
    rnd = np.left_shift(np.int64(1), s - 1)
    if rounding is Rounding.DOUBLE:
        rnd = rnd + np.where(s > 31, np.where(v >= 0, 1 << 30, -(1 << 30)), 0)
    return (v * m + rnd) >> s


def apply_scale_16(value, multiplier, shift) -> np.ndarray:
    """TOSA apply_scale_16: int48 value, int16 multiplier; REQUIRE the result fits int32."""
    v = np.asarray(value, np.int64)
    m = np.asarray(multiplier, np.int64)
    s = np.asarray(shift, np.int64)
    _check_scale_params(m, s)
    result = (v * m + np.left_shift(np.int64(1), s - 1)) >> s
    if np.any((result < -(1 << 31)) | (result > (1 << 31) - 1)):
        raise Unpredictable("RESCALE apply_scale_16 result does not fit int32 (TOSA REQUIRE)")
    return result


def round_half_away(x: Any) -> Any:
    """Round half away from zero (C's std::round, TfLiteRound), exactly: a Python int for a scalar, an int64
    array for an array. |x| + 0.5 is exact in float64 below 2^52; doubles at or above 2^52 are integers."""
    a = np.asarray(x, np.float64)
    r = np.where(np.abs(a) < 2.0 ** 52, np.copysign(np.floor(np.abs(a) + 0.5), a), a)
    return int(r) if r.ndim == 0 else r.astype(np.int64)


def round_half_away_div(acc: np.ndarray, count: np.ndarray) -> np.ndarray:
    """acc / count rounded half away from zero, in exact integer arithmetic."""
    acc = np.asarray(acc, np.int64)
    count = np.asarray(count, np.int64)
    magnitude = (np.abs(acc) + count // 2) // count
    return np.where(acc < 0, -magnitude, magnitude)
