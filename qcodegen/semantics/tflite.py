"""TFLite's fixed-point arithmetic (tensorflow/lite/kernels/internal/quantization_util.cc, kernel_util.cc) and
their TOSA RESCALE equivalents (docs/semantics.md §4.2, §5). The only place that computes TFLite multipliers.

TFLite QuantizeMultiplier(real) -> (m, s): frexp, m = std::round(mantissa * 2^31) (half away from zero), the
2^31 fix-up, and s < -31 flushed to (0, 0). MultiplyByQuantizedMultiplier(x, m, s) (double rounding, what
TFLM's reference kernels use) equals TOSA apply_scale_32(x, m, 31 - s, DOUBLE_ROUND) wherever TOSA's value
REQUIRE holds; the 64-bit variant of the 16x8 kernels reduces m to 16 bits and equals apply_scale_16(x,
rm, 15 - s). The double-precision effective scales are formed by the kernels themselves, in their own order
(see the lowering rules); the helpers here take that double.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..fixedpoint import Rounding, apply_scale_16, apply_scale_32, round_half_away
from ..ir.dtypes import DType
from ..ir.quant import QuantType

Pair = tuple[int, int]  # TFLite (quantized_multiplier, exponent); positive exponent = left shift

ACTIVATIONS = {"NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def f32(value: float) -> np.float32:
    return np.float32(value)


def quantize_multiplier_exponent(real: float) -> Pair:
    """TFLite QuantizeMultiplier(double): (multiplier, exponent) with real ~= multiplier * 2^(exponent - 31)."""
    real = float(real)
    if not math.isfinite(real) or real < 0:
        raise UnsupportedError(f"cannot express the scale {real!r} as a TFLite fixed-point multiplier")
    if real == 0.0:
        return 0, 0
    mantissa, exponent = math.frexp(real)
    q = round_half_away(mantissa * (1 << 31))
    if q == 1 << 31:
        q //= 2
        exponent += 1
    if exponent < -31:
        return 0, 0
    return q, exponent


def quantize_multiplier_smaller_than_one_exp(real: float) -> Pair:
    """QuantizeMultiplierSmallerThanOneExp: requires 0 < real < 1 (TFLite's CHECKs)."""
    if not 0.0 < float(real) < 1.0:
        raise UnsupportedError(f"scale ratio {float(real)!r} must be in (0, 1) for this TFLite kernel")
    return quantize_multiplier_exponent(real)


def tosa_scale32(pair: Pair) -> tuple[int, int]:
    """TOSA (multiplier, shift) with apply_scale_32(x, ., ., DOUBLE_ROUND) == MultiplyByQuantizedMultiplier.

    A zero multiplier (scale 0 or flushed) gives 0 for any shift: shift 62 avoids the value REQUIRE."""
    m, s = pair
    if m == 0:
        return 0, 62
    if 31 - s < 2:
        raise UnsupportedError(f"TFLite multiplier exponent {s} is too large for a RESCALE (shift {31 - s} < 2)")
    return m, 31 - s


def tosa_scale16(pair: Pair) -> tuple[int, int]:
    """TOSA (multiplier, shift) with apply_scale_16 == the int64 MultiplyByQuantizedMultiplier of the 16x8
    kernels: the multiplier rounded to 16 bits ((m + 2^15) >> 16, saturating at 0x7FFF), shift 15 - s."""
    m, s = pair
    if 15 - s < 2:
        raise UnsupportedError(f"TFLite multiplier exponent {s} is too large for a 16-bit RESCALE")
    reduced = (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
    return reduced, 15 - s


def mbqm(x: Any, pair: Pair) -> np.ndarray:
    """The value of TFLite's MultiplyByQuantizedMultiplier(int32 x, m, s) (exact int64 numpy)."""
    m, shift = tosa_scale32(pair)
    return apply_scale_32(np.asarray(x, np.int64), m, shift, Rounding.DOUBLE)


def mbqm64(x: Any, pair: Pair) -> np.ndarray:
    """The value of TFLite's MultiplyByQuantizedMultiplier(int64 x, m, s) (16x8 kernels)."""
    m, shift = tosa_scale16(pair)
    return apply_scale_16(np.asarray(x, np.int64), m, shift)


def quantize_float(value: float, scale: float, zero_point: int) -> int:
    """zp + TfLiteRound(value / scale) with the division in float32 (kernel_util.cc Quantize)."""
    return zero_point + round_half_away(f32(value) / f32(scale))


def activation_range(q: QuantType, dt: DType, activation: str) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the fused activation's limits intersected with the type range."""
    if activation not in ACTIVATIONS:
        raise UnsupportedError(f"fused activation {activation} is not supported (supported: "
                               f"{', '.join(ACTIVATIONS)})")
    lo, hi = ACTIVATIONS[activation]
    qlo = dt.min if lo is None else max(dt.min, quantize_float(lo, q.scale, q.zero_point))
    qhi = dt.max if hi is None else min(dt.max, quantize_float(hi, q.scale, q.zero_point))
    return qlo, qhi


def quantize_values(values: np.ndarray, q: QuantType, dt: DType) -> np.ndarray | None:
    """reference_ops::AffineQuantize (float -> int): zp + TfLiteRound(x / f32(scale)), clamped. Per tensor."""
    if q.kind != "per_tensor":
        return None
    v = np.asarray(values, np.float32) / f32(q.scale)
    rounded = np.where(v < 0, -np.floor(-v.astype(np.float64) + 0.5), np.floor(v.astype(np.float64) + 0.5))
    return np.clip(rounded + q.zero_point, dt.min, dt.max).astype(dt.numpy)


def dequantize_values(values: np.ndarray, q: QuantType) -> np.ndarray:
    """reference_ops::Dequantize: float(double(scale) * (q - zp))."""
    scales, zps = q.expand(values.shape)
    return (scales * (values.astype(np.int64) - zps)).astype(np.float32)


def requantize_values(values: np.ndarray, q_in: QuantType, q_out: QuantType, dt: DType) -> np.ndarray:
    """reference_ops::Requantize with QuantizeMultiplier(double(s_in) / double(s_out))."""
    pair = quantize_multiplier_exponent(q_in.scale / q_out.scale)
    r = mbqm(values.astype(np.int64) - q_in.zero_point, pair) + q_out.zero_point
    return np.clip(r, dt.min, dt.max).astype(dt.numpy)
