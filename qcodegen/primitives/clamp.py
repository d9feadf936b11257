"""CLAMP (TOSA 1.0): out = min(max(x, min_val), max_val).

TOSA defines CLAMP for i8 and i16; qcodegen also accepts i32 and f32 as an extension. For f32 the C and
the reference both evaluate `x < lo ? lo : (x > hi ? hi : x)`: a NaN input propagates unchanged (TOSA
nan_mode PROPAGATE) and an input equal to a bound keeps its own bits (so -0.0 stays -0.0 with min_val 0.0).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .elementwise import c_literal

_TYPES = ("i8", "i16", "i32", "f32")


@register
class Clamp(Primitive):
    """attrs: min_val, max_val (ints, or floats for f32 data)."""

    name = "CLAMP"
    inplace = True

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    @staticmethod
    def bounds(io: StepIO) -> tuple[float, float]:
        lo, hi = io.attrs["min_val"], io.attrs["max_val"]
        if io.ins[0].dtype.is_float:
            return float(np.float32(lo)), float(np.float32(hi))
        return int(lo), int(hi)

    def check(self, io: StepIO) -> None:
        super().check(io)
        x, y = io.ins[0].dtype, io.outs[0].dtype
        require(x.name in _TYPES, f"CLAMP: type {x} is not one of {list(_TYPES)}")
        require(x == y, f"CLAMP: output type {y} differs from input type {x}")
        lo, hi = self.bounds(io)
        if x.is_float:
            require(not (math.isnan(lo) or math.isnan(hi)), "CLAMP: min_val/max_val is NaN")
        else:
            require(x.min <= lo <= x.max and x.min <= hi <= x.max,
                    f"CLAMP: bounds [{lo}, {hi}] outside the {x} range")
        require(lo <= hi, f"CLAMP: max_val {hi} < min_val {lo}")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        x = args[0]
        lo, hi = (np.asarray(v, x.dtype) for v in self.bounds(io))
        return [np.where(x < lo, lo, np.where(x > hi, hi, x))]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        if io.outs[0].dtype.is_float:
            return Ranges([(0, 0)])  # not tracked for float buffers
        lo, hi = self.bounds(io)
        return Ranges([(min(max(in_ranges[0][0], lo), hi), min(max(in_ranges[0][1], lo), hi))])

    def template_context(self, io: StepIO) -> dict:
        """C literals of the bounds; None where a bound is the type's own limit (the comparison would be
        always false, which gcc -Wtype-limits rejects)."""
        lo, hi = self.bounds(io)
        dt = io.ins[0].dtype
        at_min = not dt.is_float and lo == dt.min
        at_max = not dt.is_float and hi == dt.max
        return dict(lo=None if at_min else c_literal(lo, dt), hi=None if at_max else c_literal(hi, dt))
