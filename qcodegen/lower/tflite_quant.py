"""TFLite's fixed-point parameters (tensorflow/lite/kernels/internal/quantization_util.cc, kernel_util.cc) and
their TOSA RESCALE equivalents (SEMANTICS §1.6-1.7). The only place that computes TFLite multipliers.

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
from ..fixedpoint import Rounding, apply_scale_16, apply_scale_32
from ..ir.dtypes import DType
from ..ir.quant import QuantType
from ..plan.schedule import Step
from .base import Lowerer

Pair = tuple[int, int]  # TFLite (quantized_multiplier, exponent); positive exponent = left shift

ACTIVATIONS = {"NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def f32(value: float) -> np.float32:
    return np.float32(value)


def round_half_away(value: float) -> int:
    """std::round / TfLiteRound of a float or double: ties away from zero (exact for any double)."""
    v = float(value)
    return int(math.copysign(math.floor(abs(v) + 0.5), v)) if abs(v) < 2.0 ** 52 else int(v)


def quantize_multiplier(real: float) -> Pair:
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
    return quantize_multiplier(real)


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
    pair = quantize_multiplier(q_in.scale / q_out.scale)
    r = mbqm(values.astype(np.int64) - q_in.zero_point, pair) + q_out.zero_point
    return np.clip(r, dt.min, dt.max).astype(dt.numpy)


def emit_mbqm(lw: Lowerer, src: str, dst: str, pairs: list[Pair], input_zp: int = 0, output_zp: int = 0,
              bounds: tuple[int, int] | None = None, wide: bool = False, value_bound: int | None = None) -> Step:
    """RESCALE src -> dst computing clamp(MBQM(x - input_zp, m, s) + output_zp) with TFLite's (m, s): one pair,
    or one per channel of the last axis. wide=True: the 16x8 kernels' int64 MultiplyByQuantizedMultiplier
    (16-bit multipliers, i48 input).

    value_bound (|x - input_zp| can reach it): when TOSA's value REQUIRE of a shift <= 31 (TFLite exponent
    s >= 0: |x| < 2^(30 - s)) could fail, MBQM is computed as MUL(x, m, shift 31 - s) instead (TFLite's single
    rounding for s >= 0, no REQUIRE on x), then + output_zp, CLAMP and CAST."""
    if value_bound is not None and len(pairs) == 1 and not wide and pairs[0][0] and pairs[0][1] >= 0 and \
            value_bound >= 1 << (30 - pairs[0][1]):
        return _mbqm_by_mul(lw, src, dst, pairs[0], input_zp, output_zp, bounds)
    tosa = [tosa_scale16(p) if wide else tosa_scale32(p) for p in pairs]
    extra: dict[str, Any] = {} if bounds is None else dict(out_min=int(bounds[0]), out_max=int(bounds[1]))
    return lw.emit("RESCALE", [src], [dst], multiplier=[m for m, _ in tosa], shift=[s for _, s in tosa],
                   input_zp=int(input_zp), output_zp=int(output_zp), scale32=not wide,
                   rounding=(Rounding.SINGLE if wide else Rounding.DOUBLE).value, per_channel=len(pairs) > 1,
                   axis=-1, **extra)


def _mbqm_by_mul(lw: Lowerer, src: str, dst: str, pair: Pair, input_zp: int, output_zp: int,
                 bounds: tuple[int, int] | None) -> Step:
    """MBQM for exponent s >= 0 (single rounding): TOSA MUL(x, m) with shift 31 - s, in i32."""
    m, s = pair
    if s > 31:
        raise UnsupportedError(f"{lw.label}: TFLite multiplier exponent {s} overflows int32")
    buf, out = lw.schedule.buffers[src], lw.buffer(dst)
    ones = (1,) * len(buf.shape)
    if input_zp:  # x - zp in i32, exactly: scale 1.0 = (2^30, 30) with |x - zp| < 2^29
        wide = lw.temp(f"{src}_i32", buf.shape, "i32")
        lw.emit("RESCALE", [src], [wide], multiplier=[1 << 30], shift=[30], input_zp=int(input_zp), output_zp=0,
                scale32=True, rounding=Rounding.SINGLE.value, per_channel=False, axis=-1)
        src = wide
    elif buf.dtype.name != "i32":
        wide = lw.temp(f"{src}_i32", buf.shape, "i32")
        lw.emit("CAST", [src], [wide])
        src = wide
    scaled = lw.temp(f"{dst}_mbqm", buf.shape, "i32")
    lw.emit("MUL", [src, lw.const(f"{dst}_m", np.full(ones, m), "i32")], [scaled], shift=31 - s)
    if output_zp:
        shifted = lw.temp(f"{dst}_zp", buf.shape, "i32")
        lw.emit("ADD", [scaled, lw.const(f"{dst}_ozp", np.full(ones, output_zp), "i32")], [shifted])
        scaled = shifted
    lo, hi = bounds if bounds is not None else (out.dtype.min, out.dtype.max)
    if out.dtype.name == "i32":
        return lw.emit("CLAMP", [scaled], [dst], min_val=int(lo), max_val=int(hi))
    clamped = lw.temp(f"{dst}_clamp", buf.shape, "i32")
    lw.emit("CLAMP", [scaled], [clamped], min_val=int(lo), max_val=int(hi))
    return lw.emit("CAST", [clamped], [dst])
