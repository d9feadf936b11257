"""Broadcasting binary ops on integers: ADD, SUB (i32) and MUL (i8/i16/i32 -> i32), TOSA 1.0.

Also home of `loop_nest`, the shared helper that turns an N-d traversal (extents + one stride vector per
operand) into a collapsed loop nest with C index expressions; the broadcasting ops and the data-movement
ops (templates/generic/_loops.j2) are built on it.

Overflow policy (TOSA: ADD/SUB overflow and MUL-with-shift overflow are REQUIRE, i.e. unpredictable;
MUL without shift keeps the low 32 bits of the product). The numpy reference follows TOSA exactly (it raises
Unpredictable for a failed REQUIRE and wraps a shift-0 product). The generated C computes in int64. Where the
input ranges admit a result outside int32, range analysis widens the step (Step.widened): the C saturates the
int64 result to int32 (equal to TOSA's result wherever TOSA defines one), and the output bound is the
saturated one; a shift-0 MUL that can wrap is wrapped explicitly (qc_wrap32), as TOSA defines it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..fixedpoint import Unpredictable
from ..ir.dtypes import DType
from ..ir.schedule import StepIO, Widening
from .base import Primitive, Ranges, broadcast_shape, full_shape_inputs, register, require

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


@dataclass(frozen=True)
class LoopNest:
    """Loops `for (int32_t iK = 0; iK < dims[K]; ++iK)` and one C index expression per operand (`bases` plus
    `strides[operand][K]` times iK)."""

    dims: list[int]
    index: list[str]
    strides: list[list[int]]
    bases: list[int]

    @property
    def contiguous_run(self) -> int:
        """The innermost loop's extent when every operand's index steps by 1 along it (one block copy), else 0."""
        return self.dims[-1] if self.dims and all(s[-1] == 1 for s in self.strides) else 0

    def outer(self) -> LoopNest:
        """The nest without its innermost loop: the operands' indices at its first iteration."""
        return LoopNest(self.dims[:-1], [_index_expr(b, s[:-1]) for b, s in zip(self.bases, self.strides,
                                                                                   strict=True)],
                        [s[:-1] for s in self.strides], self.bases)


def contiguous_strides(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int]:
    """Strides of a (TOSA-broadcast) operand walked along `out_shape`: 0 on broadcast dimensions."""
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(shape, out_shape, contiguous_strides(shape),
                                                               strict=True)]


def _index_expr(base: int, strides: list[int]) -> str:
    terms = [f"i{k}" if s == 1 else f"i{k} * {s}" for k, s in enumerate(strides) if s]
    if base or not terms:
        terms.insert(0, str(base))
    return " + ".join(terms)


def loop_nest(extents: list[int] | tuple[int, ...], strides: list[list[int]],
              bases: list[int] | None = None) -> LoopNest:
    """Collapse a traversal: drop extent-1 dimensions and merge neighbours that are contiguous for every
    operand, so a plain copy becomes one loop and a broadcast a few."""
    bases = bases or [0] * len(strides)
    dims = [(e, [s[k] for s in strides]) for k, e in enumerate(extents) if e != 1]
    merged: list[tuple[int, list[int]]] = []
    for extent, st in dims:
        if merged and all(p == q * extent for p, q in zip(merged[-1][1], st, strict=True)):
            merged[-1] = (merged[-1][0] * extent, st)
        else:
            merged.append((extent, st))
    per_operand = [[st[j] for _, st in merged] for j in range(len(strides))]
    return LoopNest([e for e, _ in merged], [_index_expr(b, s) for b, s in zip(bases, per_operand, strict=True)],
                    per_operand, bases)


def broadcast_nest(io: StepIO) -> LoopNest:
    """Loop nest over the output of a broadcasting op; index 0..n-1 = inputs, last = output."""
    out_shape = io.outs[0].shape
    strides = [broadcast_strides(b.shape, out_shape) for b in io.ins] + [contiguous_strides(out_shape)]
    return loop_nest(out_shape, strides)


def c_literal(value: float, dtype: DType) -> str:
    """A C literal of `value` as an element of `dtype`: exact hex float for f32, INT32_MIN spelled safely."""
    if dtype.is_float:
        v = np.float32(value)
        if np.isnan(v):
            return "(0.0f / 0.0f)"
        if np.isinf(v):
            return "(1.0f / 0.0f)" if v > 0 else "(-1.0f / 0.0f)"
        mantissa, exponent = abs(float(v)).hex().split("p")
        return ("-" if np.signbit(v) else "") + f"{mantissa.rstrip('0').rstrip('.')}p{exponent}f"
    v = int(value)
    return "(-2147483647 - 1)" if v == I32_MIN else str(v)


def _fits_i32(values: np.ndarray) -> bool:
    return bool(np.all((values >= I32_MIN) & (values <= I32_MAX)))


class _Binary(Primitive):
    """Two same-typed inputs, TOSA broadcasting, i32 output, computed as an int64 C expression of a, b."""

    in_types: ClassVar[tuple[str, ...]] = ("i32",)

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [broadcast_shape(io.ins[0].shape, io.ins[1].shape, self.name)]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 2 and len(io.outs) == 1, f"{self.name}: needs 2 inputs and 1 output")
        super().check(io)
        a, b, y = io.ins[0].dtype, io.ins[1].dtype, io.outs[0].dtype
        require(a == b, f"{self.name}: input types differ ({a} vs {b})")
        require(a.name in self.in_types, f"{self.name}: input type {a} is not one of {list(self.in_types)}")
        require(y.name == "i32", f"{self.name}: output type must be i32, got {y}")

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact int64 result (before any TOSA wrap)."""
        raise NotImplementedError

    def wrap(self, io: StepIO, r: np.ndarray) -> np.ndarray:
        """What TOSA does with an out-of-range exact result (default: REQUIRE, unpredictable)."""
        if not _fits_i32(r):
            raise Unpredictable(f"{self.name}: result leaves int32 (TOSA REQUIRE)")
        return r

    def c_expr(self, io: StepIO) -> str:
        """C expression of the int64 operands `a`, `b`."""
        raise NotImplementedError

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        a, b = (x.astype(np.int64) for x in args)
        return [self.wrap(io, self.compute(io, a, b))]

    def exact_bounds(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> tuple[int, int]:
        """[min, max] of the exact (int64) result over the input ranges, at the corners of the input box (each
        op is monotone in each operand, or bilinear: MUL)."""
        (alo, ahi), (blo, bhi) = in_ranges
        corners = self.compute(io, np.array([alo, alo, ahi, ahi], np.int64), np.array([blo, bhi, blo, bhi],
                                                                                       np.int64))
        return int(corners.min()), int(corners.max())

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = self.exact_bounds(io, in_ranges)
        if lo >= I32_MIN and hi <= I32_MAX:
            return Ranges([(lo, hi)])
        (alo, ahi), (blo, bhi) = in_ranges
        reason = (f"{self.name}: inputs in [{alo}, {ahi}] and [{blo}, {bhi}] give results in [{lo}, {hi}], which "
                  f"can leave int32")
        return Ranges([(max(lo, I32_MIN), min(hi, I32_MAX))], widened=Widening(reason, (lo, hi)))

    def inplace_inputs(self, io: StepIO) -> tuple[int, ...]:
        return full_shape_inputs(io)  # binary.c.j2 reads a and b before it stores the element

    def template_context(self, io: StepIO) -> dict:
        widened = io.step.widened is not None  # (then the C saturates the int64 result to int32)
        return dict(nest=broadcast_nest(io), expr=self.c_expr(io), saturate=(I32_MIN, I32_MAX) if widened else None)


@register
class Add(_Binary):
    """ADD: out = a + b (i32, REQUIRE no overflow)."""

    name = "ADD"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def c_expr(self, io: StepIO) -> str:
        return "a + b"


@register
class Sub(_Binary):
    """SUB: out = a - b (i32, REQUIRE no overflow)."""

    name = "SUB"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a - b

    def c_expr(self, io: StepIO) -> str:
        return "a - b"


@register
class Mul(_Binary):
    """MUL: attrs shift (int, default 0; must be 0 unless the inputs are i32).
    i32 with shift > 0: (a*b + 2^(shift-1)) >> shift in 64 bits, REQUIRE the result fits int32; computed as
    ((a*b >> (shift-1)) + 1) >> 1 (floor shifts), which is equal and cannot overflow int64 even for shift 63.
    Otherwise the product keeps its low 32 bits (TOSA apply_mul_s); the planner rejects wrapping ranges."""

    name = "MUL"
    in_types = ("i8", "i16", "i32")

    @staticmethod
    def shift(io: StepIO) -> int:
        return int(io.attrs.get("shift", 0))

    def check(self, io: StepIO) -> None:
        super().check(io)
        s = self.shift(io)
        require(0 <= s <= 63, f"MUL: shift {s} outside [0, 63]")
        require(s == 0 or io.ins[0].dtype.name == "i32", f"MUL: shift {s} needs i32 inputs, "
                                                         f"got {io.ins[0].dtype}")

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        s = self.shift(io)
        p = a * b  # |a*b| <= 2^62: exact in int64
        return (((p >> (s - 1)) + 1) >> 1) if s else p

    def wrap(self, io: StepIO, r: np.ndarray) -> np.ndarray:
        if self.shift(io):
            return super().wrap(io, r)
        return ((r - I32_MIN) & 0xFFFFFFFF) + I32_MIN  # apply_mul_s: low 32 bits

    def wraps(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> bool:
        """Whether a shift-0 product of operands in these ranges can leave int32 (TOSA keeps its low 32 bits)."""
        lo, hi = self.exact_bounds(io, in_ranges)
        return self.shift(io) == 0 and (lo < I32_MIN or hi > I32_MAX)

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        if self.wraps(io, in_ranges):
            return Ranges([(I32_MIN, I32_MAX)])
        return super().value_ranges(io, in_ranges)

    def c_expr(self, io: StepIO) -> str:
        s = self.shift(io)
        if s:
            return f"qc_asr64(qc_asr64(a * b, {s - 1}) + 1, 1)"
        ranges = [b.value_range or (b.dtype.min, b.dtype.max) for b in io.ins]
        return "qc_wrap32(a * b)" if self.wraps(io, ranges) else "a * b"

    def macs(self, io: StepIO) -> int:
        return io.outs[0].size
