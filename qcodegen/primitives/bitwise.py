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


class _Bitwise(Pointwise):
    """Binary bitwise ops: the infix `a <operator> b` on int64 operands."""

@register
class BitwiseAnd(_Bitwise):
    name = "BITWISE_AND"
    operator = "&"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a & b


@register
class BitwiseOr(_Bitwise):
    name = "BITWISE_OR"
    operator = "|"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a | b


@register
class BitwiseXor(_Bitwise):
    name = "BITWISE_XOR"
    operator = "^"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a ^ b


@register
class BitwiseNot(Pointwise):
    name = "BITWISE_NOT"
    arity = 1
    inplace = True

    def compute(self, io: StepIO, a: np.ndarray) -> np.ndarray:
        return ~a

    def c_expr(self, io: StepIO) -> str:
        return "~a"


class _Shift(Pointwise):
    """value a shifted by b, with the REQUIRE 0 <= b < bits; the C masks the amount to stay defined."""

    def amount(self, io: StepIO, b: np.ndarray) -> np.ndarray:
        unpredictable_unless((b >= 0) & (b < self.bits(io)), self.name,
                             f"shift amount outside [0, {self.bits(io) - 1}]")
        return b


@register
class LogicalLeftShift(_Shift):
    name = "LOGICAL_LEFT_SHIFT"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return wrap_to(a << self.amount(io, b), io.outs[0].dtype)

    def c_expr(self, io: StepIO) -> str:
        return f"qc_sext_bits((uint32_t)a << ((uint32_t)b & 31u), {self.bits(io)})"


@register
class LogicalRightShift(_Shift):
    name = "LOGICAL_RIGHT_SHIFT"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        mask = (1 << self.bits(io)) - 1
        return wrap_to((a & mask) >> self.amount(io, b), io.outs[0].dtype)

    def c_expr(self, io: StepIO) -> str:
        mask = (1 << self.bits(io)) - 1
        return f"qc_sext_bits(((uint32_t)a & {mask}u) >> ((uint32_t)b & 31u), {self.bits(io)})"


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

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = in_ranges[0]  # shifting moves towards 0 (or -1); rounding adds at most 1, up to the input bound
        return Ranges([(min(lo, -1), max(hi, 0))]) if lo < 0 else Ranges([(0, max(hi, 0))])


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
        return Ranges([(0, 32)])
