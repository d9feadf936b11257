"""The StableHLO reference interpreter's arithmetic on quantized values, in numpy (used at plan time only).

The interpreter runs quantized programs through `stablehlo-legalize-quant-to-math` (docs/semantics.md §7.2): quantize,
dequantize, requantize and every op without an integer pattern (the "QDQ" fallback: dequantize the operands,
run the float op, quantize the result) become float32 arithmetic, evaluated one IEEE binary32 operation at a
time (APFloat, round to nearest even). Transcendental functions are evaluated in double and rounded to float32
(`mapWithUpcastToDouble`). These functions reproduce that arithmetic exactly, so tables built from them are the
interpreter's results by construction:

- dequantize(q)  = f32(i32(q) - zp) * f32(scale)
- quantize(x)    = convert(round_nearest_even(clamp(f32(qmin), x / f32(scale) + f32(zp), f32(qmax))))
- requantize(q)  = convert(round_nearest_even(clamp(f32(q) * f32(s_in / s_out) + f32(zp_out - zp_in * s_in / s_out))))
  (the merged form; the clamp only for storage narrower than 32 bits; the add only for a non-zero merged zp;
  identical types convert unchanged)
- convert(f32 -> int) truncates toward zero, saturates, and maps NaN to 0 (APFloat::convertToInteger); clamp
  propagates NaN, so a NaN quantizes to storage value 0.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.dtypes import DType
from ..ir.quant import QuantType, same_type

F32 = np.float32
FloatFn = Callable[..., np.ndarray]


def _channel_view(values: np.ndarray, q: QuantType, rank: int, axis: int | None) -> np.ndarray:
    """Per-tensor values as a scalar; per-axis values shaped to broadcast along `axis` (default q.axis) of a
    rank-`rank` array; sub-channel values expanded to every element of the tensor (one block per scale, the
    sub-channel RFC's scales[i // block_sizes])."""
    if q.kind == "per_tensor":
        return values.reshape(())
    if q.kind == "sub_channel":
        for dim, block in enumerate(q.block_sizes):
            values = np.repeat(values, block, axis=dim)
        return values
    shape = [1] * rank
    shape[q.axis if axis is None else axis] = values.size
    return values.reshape(shape)


def to_storage(x: np.ndarray, dt: DType) -> np.ndarray:
    """f32 -> integer as APFloat::convertToInteger(rmTowardZero): truncate, saturate, NaN -> 0 (int64 result)."""
    x = np.asarray(x, np.float64)
    nan = np.isnan(x)
    t = np.trunc(np.where(nan, 0.0, x))
    return np.clip(t, dt.min, dt.max).astype(np.int64)


def dequantize(q_values: np.ndarray, q: QuantType, axis: int | None = None) -> np.ndarray:
    """f32(i32(q) - zp) * f32(scale); per-axis parameters along `axis` of the values (default q.axis)."""
    q_values = np.asarray(q_values, np.int64)
    zp = _channel_view(q.zero_points, q, q_values.ndim, axis)
    diff = q_values - zp
    diff = ((diff + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)  # i32 arithmetic
    return diff.astype(F32) * _channel_view(q.scales.astype(F32), q, q_values.ndim, axis)


def quantize(x: np.ndarray, q: QuantType, axis: int | None = None) -> np.ndarray:
    """float32 -> storage integers (int64) of q, the interpreter's uniform_quantize."""
    x = np.asarray(x, F32)
    with np.errstate(all="ignore"):
        v = x / _channel_view(q.scales.astype(F32), q, x.ndim, axis)
        v = v + _channel_view(q.zero_points.astype(F32), q, x.ndim, axis)
        v = np.minimum(np.maximum(v, F32(q.storage_min)), F32(q.storage_max))
        return to_storage(np.rint(v), q.storage)


def requantize(q_values: np.ndarray, q_in: QuantType, q_out: QuantType, axis: int | None = None) -> np.ndarray:
    """q_in storage -> q_out storage (int64), the interpreter's merged requantization (per-axis parameters along
    `axis` of the values, default the types' axis)."""
    q_values = np.asarray(q_values, np.int64)
    if same_type(q_in, q_out):
        return q_values
    rank = q_values.ndim
    per_axis = q_out if q_out.kind == "per_axis" else q_in
    channels = per_axis.scales.size
    merged_zp = merged_offset(q_in, q_out, channels)
    v = q_values.astype(F32) * _channel_view(merged_scale(q_in, q_out, channels).astype(F32), per_axis, rank, axis)
    if np.any(merged_zp != 0):
        v = v + _channel_view(merged_zp.astype(F32), per_axis, rank, axis)
    if q_out.storage.bits < 32:
        v = np.minimum(np.maximum(v, F32(q_out.storage_min)), F32(q_out.storage_max))
    return to_storage(np.rint(v), q_out.storage)


def merged_scale(q_in: QuantType, q_out: QuantType, channels: int) -> np.ndarray:
    """The requantization's multiplier per channel, f32(s_in / s_out) with the ratio in double (float64 values)."""
    s_in, s_out = (np.broadcast_to(q.scales, (channels,)) for q in (q_in, q_out))
    return (s_in / s_out).astype(F32).astype(np.float64)


def merged_offset(q_in: QuantType, q_out: QuantType, channels: int) -> np.ndarray:
    """The requantization's offset per channel, f32(zp_out - zp_in * s_in / s_out) computed in double."""
    s_in, s_out = (np.broadcast_to(q.scales, (channels,)) for q in (q_in, q_out))
    z_in, z_out = (np.broadcast_to(q.zero_points, (channels,)).astype(np.float64) for q in (q_in, q_out))
    return (z_out - z_in * (s_in / s_out)).astype(F32).astype(np.float64)


def _upcast(fn: Callable[[np.ndarray], np.ndarray]) -> FloatFn:
    """A float32 op the interpreter evaluates in double and rounds to float32."""
    def apply(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(np.asarray(x, np.float64)).astype(F32)
    return apply


def _round_afz(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= F32(0.5), t + np.sign(x), t).astype(F32)


def _sign(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x) | (x == 0), x, np.sign(x)).astype(F32)


def _logistic(x: np.ndarray) -> np.ndarray:
    one = F32(1.0)
    with np.errstate(all="ignore"):
        return one / (one + _upcast(np.exp)(-x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


# unary float ops of the QDQ fallback: float32 array -> float32 array
UNARY: dict[str, FloatFn] = {
    "abs": np.abs, "negate": np.negative, "ceil": np.ceil, "floor": np.floor, "sign": _sign,
    "round_nearest_afz": _round_afz, "round_nearest_even": np.rint,
    "sqrt": _upcast(np.sqrt), "rsqrt": _upcast(_rsqrt), "cbrt": _upcast(np.cbrt),
    "exponential": _upcast(np.exp), "exponential_minus_one": _upcast(np.expm1), "log": _upcast(np.log),
    "log_plus_one": _upcast(np.log1p), "sine": _upcast(np.sin), "cosine": _upcast(np.cos),
    "tan": _upcast(np.tan), "tanh": _upcast(np.tanh), "logistic": _logistic,
}


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.fmod(a, b)  # APFloat::mod: exact, with the sign of the dividend


# binary float ops of the QDQ fallback: (float32, float32) -> float32
BINARY: dict[str, FloatFn] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "remainder": _remainder,
    "power": lambda a, b: _upcast(lambda x: np.power(x, np.asarray(b, np.float64)))(a),
    "atan2": lambda a, b: _upcast(lambda x: np.arctan2(x, np.asarray(b, np.float64)))(a),
}

COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal, "GT": np.greater, "LE": np.less_equal,
    "LT": np.less,
}


def storage_grid(dt: DType) -> np.ndarray:
    """Every value of an 8/16-bit storage type, in table order (from the type minimum up)."""
    return np.arange(dt.min, dt.max + 1, dtype=np.int64)


def unary_table(fn: FloatFn, q_in: QuantType, q_out: QuantType) -> np.ndarray:
    """quantize(fn(dequantize(x))) for every storage value x of q_in (per tensor)."""
    with np.errstate(all="ignore"):
        return quantize(fn(dequantize(storage_grid(q_in.storage), q_in)), q_out)


def binary_table(fn: FloatFn, q_a: QuantType, q_b: QuantType, q_out: QuantType) -> np.ndarray:
    """quantize(fn(dequantize(a), dequantize(b))) for every pair, flattened a-major."""
    a = dequantize(storage_grid(q_a.storage), q_a)[:, None]
    b = dequantize(storage_grid(q_b.storage), q_b)[None, :]
    with np.errstate(all="ignore"):
        return quantize(fn(a, b), q_out).reshape(-1)


def f32_scales(q: QuantType) -> QuantType:
    """q with its scales rounded to float32: the values the interpreter's arithmetic uses (f32(scale))."""
    return QuantType(q.storage, q.scales.astype(F32).astype(np.float64), q.zero_points, axis=q.axis,
                     block_sizes=q.block_sizes, storage_min=q.storage_min, storage_max=q.storage_max)


def _fraction(scale: float) -> tuple[int, int]:
    """f32(scale) as an exact fraction (numerator, power-of-two denominator)."""
    return float(F32(scale)).as_integer_ratio()


def round_exact(num: np.ndarray, den: int, q: QuantType) -> np.ndarray:
    """storage of round_half_even(num / den) + zp, clamped (num: integer object array, den > 0): the exactly rounded
    quantization of a rational value."""
    floor = num // den
    twice = 2 * (num - floor * den)
    up = (twice > den) | ((twice == den) & (floor % 2 == 1))
    return np.clip((floor + up).astype(np.int64) + q.zero_point, q.storage_min, q.storage_max)


EXACT_BINARY = ("add", "subtract", "multiply")


def exact_binary(kind: str, a: np.ndarray, b: np.ndarray, q_a: QuantType, q_b: QuantType, q_out: QuantType
                 ) -> np.ndarray:
    """The definition of add / subtract / multiply (per tensor) evaluated exactly -- real dequantized values with the
    f32 scales, the exact sum / difference / product, rounded once half to even -- for storage values a, b
    (broadcast). Where it differs from `binary_table`'s f32 evaluation, the f32 rounding errors straddle a rounding
    boundary (an "f32 tie")."""
    (na, da), (nb, db), (ny, dy) = (_fraction(q.scale) for q in (q_a, q_b, q_out))
    x = (np.asarray(a, np.int64) - q_a.zero_point).astype(object)
    z = (np.asarray(b, np.int64) - q_b.zero_point).astype(object)
    if kind == "multiply":
        return round_exact(x * z * (na * nb * dy), da * db * ny, q_out)
    sign = -1 if kind == "subtract" else 1
    common = max(da, db)  # powers of two
    return round_exact((x * (na * (common // da)) + sign * z * (nb * (common // db))) * dy, common * ny, q_out)


# ---------------------------------------------------------------- the exactly rounded definition (float64)
# The same formulas with real arithmetic in place of float32 operations: dequantized values exact in float64,
# the ops in float64, one rounding at each quantize. Where it and the float32 evaluation differ, the float32
# rounding errors straddle a rounding boundary (an "f32 tie"). A float64 value within TIE_RTOL (relative) of
# k + 1/2 is taken as an exact tie, rounded half to even.

TIE_RTOL = 2.0 ** -40


def round_ties(v: np.ndarray) -> np.ndarray:
    """Half to even, treating float64 values within TIE_RTOL of k + 1/2 as exact ties."""
    v = np.asarray(v, np.float64)
    with np.errstate(invalid="ignore"):
        low = np.floor(v)
        tie = np.abs(v - low - 0.5) <= TIE_RTOL * np.maximum(1.0, np.abs(v))
        return np.where(tie, low + (np.fmod(low, 2) != 0), np.rint(v))


def dequantize_exact(q_values: np.ndarray, q: QuantType, axis: int | None = None) -> np.ndarray:
    """(q - zp) * f32(scale) in float64 (exact for storage of up to 29 bits)."""
    q_values = np.asarray(q_values, np.int64)
    zp = _channel_view(q.zero_points, q, q_values.ndim, axis)
    scales = _channel_view(q.scales.astype(F32).astype(np.float64), q, q_values.ndim, axis)
    return (q_values - zp).astype(np.float64) * scales


def quantize_exact(x: np.ndarray, q: QuantType, axis: int | None = None) -> np.ndarray:
    """Real (float64) values -> storage integers of q, rounded once half to even (ties: round_ties)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        v = x / _channel_view(q.scales.astype(F32).astype(np.float64), q, x.ndim, axis)
        v = v + _channel_view(q.zero_points.astype(np.float64), q, x.ndim, axis)
        return to_storage(np.clip(round_ties(v), q.storage_min, q.storage_max), q.storage)


def requantize_exact(q_values: np.ndarray, q_in: QuantType, q_out: QuantType, axis: int | None = None
                     ) -> np.ndarray:
    """The merged requantization with its float32 constants, evaluated in float64 and rounded once."""
    q_values = np.asarray(q_values, np.int64)
    if same_type(q_in, q_out):
        return q_values
    rank = q_values.ndim
    per_axis = q_out if q_out.kind == "per_axis" else q_in
    channels = per_axis.scales.size
    v = (q_values.astype(np.float64) * _channel_view(merged_scale(q_in, q_out, channels), per_axis, rank, axis)
         + _channel_view(merged_offset(q_in, q_out, channels), per_axis, rank, axis))
    return to_storage(np.clip(round_ties(v), q_out.storage_min, q_out.storage_max), q_out.storage)


def _logistic64(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _round_afz64(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def _sign64(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x) | (x == 0), x, np.sign(x))


# the element-wise ops of UNARY / BINARY in float64
UNARY_EXACT: dict[str, FloatFn] = {
    "abs": np.abs, "negate": np.negative, "ceil": np.ceil, "floor": np.floor, "sign": _sign64,
    "round_nearest_afz": _round_afz64, "round_nearest_even": np.rint, "sqrt": np.sqrt, "rsqrt": _rsqrt,
    "cbrt": np.cbrt, "exponential": np.exp, "exponential_minus_one": np.expm1, "log": np.log,
    "log_plus_one": np.log1p, "sine": np.sin, "cosine": np.cos, "tan": np.tan, "tanh": np.tanh,
    "logistic": _logistic64,
}
BINARY_EXACT: dict[str, FloatFn] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "remainder": np.fmod, "power": np.power, "atan2": np.arctan2,
}
