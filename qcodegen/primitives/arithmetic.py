"""Integer arithmetic beyond ADD/SUB/MUL (TOSA 1.0): ABS (i32), NEGATE (i8/i16/i32 with zero points) and
INTDIV (i32, quotient truncated towards zero).

REQUIREs (unpredictable, raised by the reference on the data): ABS of INT32_MIN; INTDIV by 0 or INT32_MIN / -1;
NEGATE intermediates leaving int32 (only -INT32_MIN for i32 data)."""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import Ranges, register, require
from .elementwise import I32_MAX, I32_MIN
from .pointwise import Pointwise, unpredictable_unless


def _fits_i32(op: str, values: np.ndarray, what: str) -> np.ndarray:
    unpredictable_unless((values >= I32_MIN) & (values <= I32_MAX), op, f"{what} leaves int32")
    return values


@register
class Abs(Pointwise):
    name = "ABS"
    arity = 1
    in_types = ("i32",)

    def compute(self, io: StepIO, a: np.ndarray) -> np.ndarray:
        return _fits_i32(self.name, np.abs(a), "the result")

    def c_expr(self, io: StepIO) -> str:
        return "qc_wrap32(a < 0 ? -a : a)"

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = in_ranges[0]
        top = min(max(abs(lo), abs(hi)), I32_MAX)
        return Ranges([(0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), top)])


@register
class IntDiv(Pointwise):
    name = "INTDIV"
    in_types = ("i32",)

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        unpredictable_unless(b != 0, self.name, "division by zero")
        quotient = np.abs(a) // np.abs(b) * np.sign(a) * np.sign(b)
        return _fits_i32(self.name, quotient, "the quotient")

    def c_expr(self, io: StepIO) -> str:
        return "qc_wrap32(b == 0 ? 0 : a / b)"

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        """For divisors of one sign the quotient is monotone in each operand (corners); a divisor range holding
        -1, 0 or 1 allows |q| up to max |a| (0 for the C's division by 0, INT32_MIN / -1 wrapping)."""
        (alo, ahi), (blo, bhi) = in_ranges
        if blo > 0 or bhi < 0:
            q = [abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) for a in (alo, ahi) for b in (blo, bhi)]
            return Ranges([(max(min(q), I32_MIN), min(max(q), I32_MAX))])
        most = max(abs(alo), abs(ahi))
        return Ranges([(max(-most, I32_MIN), min(most, I32_MAX))])


@register
class Negate(Pointwise):
    """attrs: input_zp, output_zp (0 unless i8). out = clip(-(x - input_zp) + output_zp) in the type range."""

    name = "NEGATE"
    arity = 1

    @staticmethod
    def zero_points(io: StepIO) -> tuple[int, int]:
        return int(io.attrs.get("input_zp", 0)), int(io.attrs.get("output_zp", 0))

    def check(self, io: StepIO) -> None:
        super().check(io)
        dt = io.ins[0].dtype
        for which, zp in zip(("input", "output"), self.zero_points(io), strict=True):
            if dt.name == "i8":
                require(dt.min <= zp <= dt.max, f"NEGATE: {which} zero point {zp} is outside i8")
            else:
                require(zp == 0, f"NEGATE: {which} zero point must be 0 for {dt}, got {zp}")

    def compute(self, io: StepIO, a: np.ndarray) -> np.ndarray:
        izp, ozp = self.zero_points(io)
        value = _fits_i32(self.name, -_fits_i32(self.name, a - izp, "x - input_zp"), "the negation")
        dt = io.outs[0].dtype
        return np.clip(_fits_i32(self.name, value + ozp, "adding output_zp"), dt.min, dt.max)

    def c_expr(self, io: StepIO) -> str:
        izp, ozp = self.zero_points(io)
        dt = io.outs[0].dtype
        return f"qc_clamp64(({izp}) - a + ({ozp}), {dt.min}LL, {dt.max}LL)"

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        izp, ozp = self.zero_points(io)
        dt = io.outs[0].dtype
        lo, hi = in_ranges[0]
        ends = np.clip(np.array([izp - hi + ozp, izp - lo + ozp]), dt.min, dt.max)
        return Ranges([(int(ends[0]), int(ends[1]))])
