"""Bitwise operators and shifts (TOSA 1.0): BITWISE_AND, BITWISE_OR, BITWISE_XOR, BITWISE_NOT, LOGICAL_LEFT_SHIFT,
LOGICAL_RIGHT_SHIFT, ARITHMETIC_RIGHT_SHIFT (i8/i16/i32, output of the input type) and CLZ (i32).

Shifts: REQUIRE 0 <= shift < width of the type. LOGICAL_LEFT_SHIFT keeps the low bits of value << shift;
LOGICAL_RIGHT_SHIFT shifts the zero-extended value (i8 -1 >> 1 = 127); ARITHMETIC_RIGHT_SHIFT shifts the
sign-extended value and, with attribute round = true, adds bit shift-1 of the value (round half up).
CLZ counts the leading zero bits of the 32-bit pattern (CLZ(0) = 32, CLZ(negative) = 0).
"""

from __future__ import annotations

import numpy as np

from ..ir.dtypes import wrap_to
from ..ir.schedule import StepIO
from .base import Ranges, register
from .pointwise import Pointwise, unpredictable_unless


def _span(lo: int, hi: int) -> int:
    """The least k with [lo, hi] inside [-2^k, 2^k - 1]: the two's complement bits below the sign."""
    return max((v if v >= 0 else ~v).bit_length() for v in (lo, hi))


class _Bitwise(Pointwise):
    """Binary bitwise ops: the infix `a <operator> b` on int64 operands. Results of operands in [-2^k, 2^k - 1]
    stay there; the subclasses tighten that for non-negative operands."""

    def nonnegative_bounds(self, a: tuple[int, int], b: tuple[int, int], k: int) -> tuple[int, int]:
        raise NotImplementedError

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        a, b = in_ranges
        k = max(_span(*a), _span(*b))
        if a[0] >= 0 and b[0] >= 0:
            return Ranges([self.nonnegative_bounds(a, b, k)])
        return Ranges([(-(1 << k), (1 << k) - 1)])

@register
class BitwiseAnd(_Bitwise):
    name = "BITWISE_AND"
    operator = "&"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a & b

    def nonnegative_bounds(self, a: tuple[int, int], b: tuple[int, int], k: int) -> tuple[int, int]:
        return 0, min(a[1], b[1])

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        nonnegative = [hi for lo, hi in in_ranges if lo >= 0]  # a & b <= b for any a when b >= 0
        if len(nonnegative) == 1:
            return Ranges([(0, nonnegative[0])])
        return super().value_ranges(io, in_ranges)


@register
class BitwiseOr(_Bitwise):
    name = "BITWISE_OR"
    operator = "|"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a | b

    def nonnegative_bounds(self, a: tuple[int, int], b: tuple[int, int], k: int) -> tuple[int, int]:
        return max(a[0], b[0]), (1 << k) - 1


@register
class BitwiseXor(_Bitwise):
    name = "BITWISE_XOR"
    operator = "^"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a ^ b

    def nonnegative_bounds(self, a: tuple[int, int], b: tuple[int, int], k: int) -> tuple[int, int]:
        return 0, (1 << k) - 1


@register
class BitwiseNot(Pointwise):
    name = "BITWISE_NOT"
    arity = 1

    def compute(self, io: StepIO, a: np.ndarray) -> np.ndarray:
        return ~a

    def c_expr(self, io: StepIO) -> str:
        return "~a"

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = in_ranges[0]
        return Ranges([(~hi, ~lo)])


class _Shift(Pointwise):
    """value a shifted by b, with the REQUIRE 0 <= b < bits; the C masks the amount to stay defined.
    Range analysis: the result over the input range for each amount the range of b allows (shift(a, b) is
    monotone in a for a fixed b); the output type's range when b may break the REQUIRE (the C then shifts by the
    masked amount) or the result may wrap."""

    def amount(self, io: StepIO, b: np.ndarray) -> np.ndarray:
        unpredictable_unless((b >= 0) & (b < self.bits(io)), self.name,
                             f"shift amount outside [0, {self.bits(io) - 1}]")
        return b

    def shifted_bounds(self, io: StepIO, lo: int, hi: int, b: int) -> tuple[int, int] | None:
        """[min, max] of the results of a in [lo, hi] shifted by b, or None when they may wrap."""
        raise NotImplementedError

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        (lo, hi), (b_lo, b_hi) = in_ranges
        dt = io.outs[0].dtype
        if b_lo < 0 or b_hi >= self.bits(io):
            return Ranges([(dt.min, dt.max)])
        bounds = [self.shifted_bounds(io, lo, hi, b) for b in range(b_lo, b_hi + 1)]
        if any(r is None for r in bounds):
            return Ranges([(dt.min, dt.max)])
        return Ranges([(min(r[0] for r in bounds), max(r[1] for r in bounds))])


@register
class LogicalLeftShift(_Shift):
    name = "LOGICAL_LEFT_SHIFT"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return wrap_to(a << self.amount(io, b), io.outs[0].dtype)

    def c_expr(self, io: StepIO) -> str:
        return f"qc_sext_bits((uint32_t)a << ((uint32_t)b & 31u), {self.bits(io)})"

    def shifted_bounds(self, io: StepIO, lo: int, hi: int, b: int) -> tuple[int, int] | None:
        dt = io.outs[0].dtype
        return (lo << b, hi << b) if dt.min <= lo << b and hi << b <= dt.max else None


@register
class LogicalRightShift(_Shift):
    name = "LOGICAL_RIGHT_SHIFT"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        mask = (1 << self.bits(io)) - 1
        return wrap_to((a & mask) >> self.amount(io, b), io.outs[0].dtype)

    def c_expr(self, io: StepIO) -> str:
        mask = (1 << self.bits(io)) - 1
        return f"qc_sext_bits(((uint32_t)a & {mask}u) >> ((uint32_t)b & 31u), {self.bits(io)})"

    def shifted_bounds(self, io: StepIO, lo: int, hi: int, b: int) -> tuple[int, int] | None:
        if lo >= 0:
            return lo >> b, hi >> b
        return (0, ((1 << self.bits(io)) - 1) >> b) if b else None  # a negative value's pattern, shifted


@register
class ArithmeticRightShift(_Shift):
    """attrs: round (bool, default false)."""

    name = "ARITHMETIC_RIGHT_SHIFT"

    @staticmethod
    def rounds(io: StepIO) -> bool:
        return bool(io.attrs.get("round", False))

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        b = self.amount(io, b)
        result = a >> b
        if self.rounds(io):
            result = result + np.where(b > 0, (a >> np.maximum(b - 1, 0)) & 1, 0)
        return result

    def c_expr(self, io: StepIO) -> str:
        shifted = "qc_asr64(a, (int)(b & 31))"
        if not self.rounds(io):
            return shifted
        return f"{shifted} + ((b & 31) > 0 ? qc_asr64(a, (int)(b & 31) - 1) & 1 : 0)"

    def shifted_bounds(self, io: StepIO, lo: int, hi: int, b: int) -> tuple[int, int] | None:
        if self.rounds(io) and b > 0:  # (a >> b) + bit b-1 of a = floor((a + 2^(b-1)) / 2^b)
            return (lo + (1 << (b - 1))) >> b, (hi + (1 << (b - 1))) >> b
        return lo >> b, hi >> b

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        if in_ranges[1][0] < 0 or in_ranges[1][1] >= self.bits(io):  # any (masked) amount: towards 0 or -1,
            lo, hi = in_ranges[0]  # rounding adds at most 1, up to the input bound
            return Ranges([(min(lo, -1), max(hi, 0))]) if lo < 0 else Ranges([(0, max(hi, 0))])
        return super().value_ranges(io, in_ranges)


@register
class Clz(Pointwise):
    """i32 only."""

    name = "CLZ"
    arity = 1
    in_types = ("i32",)

    def compute(self, io: StepIO, a: np.ndarray) -> np.ndarray:
        u = a & 0xFFFFFFFF
        bit_length = sum(((u >> k) > 0).astype(np.int64) for k in range(32))
        return 32 - bit_length

    def c_expr(self, io: StepIO) -> str:
        return "a == 0 ? 32 : qc_clz32((uint32_t)a)"

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = in_ranges[0]  # CLZ falls as a non-negative value grows; negative values have none
        least = 0 if lo < 0 else 32 - max(hi, 0).bit_length()
        most = 32 - lo.bit_length() if lo >= 0 else 32 if hi >= 0 else 0
        return Ranges([(least, most)])
