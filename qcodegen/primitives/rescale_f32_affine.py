"""RESCALE_F32_AFFINE (qcodegen extension): an integer requantized the way the StableHLO reference interpreter
does it in float32 (its merged requantization, docs/stablehlo.md), computed exactly with integers.

    out = clamp(round_half_even(f32(f32(f32(x) * scale[c]) + offset[c])), out_min, out_max)

f32(x) is the IEEE binary32 conversion of the integer x, `*` and `+` are binary32 operations (round to nearest,
ties to even), scale and offset are binary32 values per tensor or per channel along `axis`. Clamping before or
after the final rounding is the same, the bounds being integers.

The numpy reference is that definition in numpy float32. The C (runtime/qc_runtime.h qc_f32_affine) emulates the
three binary32 roundings and the final rounding in integer arithmetic, the constants given at plan time as exact
(mantissa, exponent) pairs with normalised 24-bit mantissas. The plan-time checks keep every intermediate a normal
binary32 number: scale 0 or in [2^-100, 2^64], offset 0 or of magnitude in [2^-100, 2^40].

inputs: x (i8, i16 or i32). attrs: scale, offset (lists of float32 values: one, or one per channel along `axis`),
axis (default -1), out_min / out_max (default the output type range). Output: i8, u8, i16, u16 or i32.
"""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import register, require
from .reduce import axis_split
from .rescale_f32 import F32Requantization

_SCALE_RANGE = (2.0 ** -100, 2.0 ** 64)
_OFFSET_RANGE = (2.0 ** -100, 2.0 ** 40)


def mantissa_exponent(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 values as exact (negative, mantissa, exponent): |v| = mantissa * 2^exponent with
    2^23 <= mantissa < 2^24 (0, 0 for zero)."""
    v = np.asarray(values, np.float32).astype(np.float64).reshape(-1)
    frac, exp = np.frexp(np.abs(v))  # |v| = frac * 2^exp, frac in [0.5, 1)
    mantissa = np.rint(frac * (1 << 24)).astype(np.int64)
    exponent = np.where(mantissa == 0, 0, exp.astype(np.int64) - 24)
    return (v < 0).astype(np.int64), mantissa, exponent


def affine_f32(x: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """round_half_even(f32(f32(f32(x) * scale) + offset)) as float64 (exact integers)."""
    with np.errstate(over="ignore"):
        v = np.asarray(x, np.int64).astype(np.float32) * np.asarray(scale, np.float32)
        v = v + np.asarray(offset, np.float32)
    return np.rint(v.astype(np.float64))


@register
class RescaleF32Affine(F32Requantization):
    name = "RESCALE_F32_AFFINE"
    KEYS = ("scale", "offset")

    def _check(self, io: StepIO) -> None:
        scale, offset = self.values(io, "scale"), self.values(io, "offset")
        require(scale.size >= 1 and offset.size == scale.size,
                f"RESCALE_F32_AFFINE: {scale.size} scales and {offset.size} offsets")
        for name, v, (lo, hi) in (("scale", scale, _SCALE_RANGE), ("offset", np.abs(offset), _OFFSET_RANGE)):
            require(bool(np.all((v == 0) | ((v >= lo) & (v <= hi)))) and bool(np.all(scale >= 0)),
                    f"RESCALE_F32_AFFINE: every {name} must be 0 or of magnitude in [{lo:g}, {hi:g}] "
                    f"(scales >= 0), got {io.attrs[name]}")

    def _requantize(self, io: StepIO, x: np.ndarray, *constants: np.ndarray) -> np.ndarray:
        lo, hi = self.bounds(io)
        return np.clip(affine_f32(x, *constants), lo, hi).astype(np.int64)

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        if not self.per_channel(io):
            return {}
        _, sm, se = mantissa_exponent(self.values(io, "scale"))
        cn, cm, ce = mantissa_exponent(self.values(io, "offset"))
        return {"scale_mantissa": sm.astype(np.int32), "scale_exponent": se.astype(np.int16),
                "offset_negative": cn.astype(np.int8), "offset_mantissa": cm.astype(np.int32),
                "offset_exponent": ce.astype(np.int16)}

    def template_context(self, io: StepIO) -> dict:
        _, sm, se = mantissa_exponent(self.values(io, "scale"))
        cn, cm, ce = mantissa_exponent(self.values(io, "offset"))
        lo, hi = self.bounds(io)
        per_channel = self.per_channel(io)
        geometry = axis_split(io.ins[0].shape, self.axis(io)) if per_channel else {}
        return dict(geometry, per_channel=per_channel, size=io.ins[0].size, scale_mantissa=int(sm[0]),
                    scale_exponent=int(se[0]), offset_negative=int(cn[0]), offset_mantissa=int(cm[0]),
                    offset_exponent=int(ce[0]), lo=lo, hi=hi)
