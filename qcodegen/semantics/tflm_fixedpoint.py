"""The fixed-point building blocks TFLite Micro's reference kernels use (gemmlowp's fixedpoint.h and
tflite::GetReciprocal / CalculateInputRadius / MultiplyByQuantizedMultiplier), re-derived from their
definitions and vectorized over int64 numpy arrays that hold int32 (or int16) values.

Plan-time only: the lowerings evaluate TFLM's integer algorithms with these functions (over every possible
input of a table, or as the numpy reference of the SOFTMAX primitive). Every function reproduces the C++
integer result bit for bit, including the saturations; additions that C++ performs in int32 wrap here.

Fixed-point values are raw integers: a Q(k) value with k integer bits stores real * 2^(31 - k) in int32.
"""

from __future__ import annotations

import math

import numpy as np

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1


def _q(real: float, integer_bits: int = 0) -> int:
    """A gemmlowp fixed-point constant: round(real * 2^(31 - integer_bits)) (what its CHECKED_FIXEDPOINT_CONSTANT
    asserts; no value here is near a tie)."""
    return round(real * 2.0 ** (31 - integer_bits))


_EXP_MINUS_ONE_EIGHTH = _q(math.exp(-1 / 8))  # 1895147668
_ONE_THIRD = _q(1 / 3)  # 715827883
_EXP_BARREL = tuple((k, _q(math.exp(-(2.0 ** k)))) for k in range(-2, 5))  # (k, exp(-2^k)): 1672461947 ... 242
_Q2_48_OVER_17 = _q(48 / 17, 2)  # 1515870810
_Q2_NEG_32_OVER_17 = _q(-32 / 17, 2)  # -1010580540



def _i64(x) -> np.ndarray:
    return np.asarray(x, np.int64)


def wrap(x, bits: int = 32) -> np.ndarray:
    """Two's complement wrap of an exact integer to `bits` bits (what a C++ int32/int16 result holds)."""
    half = 1 << (bits - 1)
    return ((_i64(x) + half) & ((1 << bits) - 1)) - half


def saturate(x, bits: int = 32) -> np.ndarray:
    half = 1 << (bits - 1)
    return np.clip(_i64(x), -half, half - 1)


def trunc_div_pot(x, exponent: int) -> np.ndarray:
    """x / 2^exponent truncated toward zero (C integer division by a positive power of two)."""
    x = _i64(x)
    return np.where(x >= 0, x >> exponent, -((-x) >> exponent))


def srdhm(a, b, bits: int = 32) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul (VQRDMULH): the high half of 2*a*b with the nudge of gemmlowp
    (+2^(bits-2) for a*b >= 0, 1 - 2^(bits-2) otherwise) and C's truncating division; MIN*MIN saturates."""
    a, b = _i64(a), _i64(b)
    lo = -(1 << (bits - 1))
    ab = a * b
    nudge = np.where(ab >= 0, 1 << (bits - 2), 1 - (1 << (bits - 2)))
    high = trunc_div_pot(ab + nudge, bits - 1)
    return np.where((a == lo) & (b == lo), (1 << (bits - 1)) - 1, high)


def sdhm16(a, b) -> np.ndarray:
    """TFLite's SaturatingDoublingHighMul for int16 (SQDMULH): truncating 2*a*b / 2^16, MIN*MIN saturates."""
    a, b = _i64(a), _i64(b)
    return np.where((a == I16_MIN) & (b == I16_MIN), I16_MAX, trunc_div_pot(a * b, 15))


def rdbpot(x, exponent) -> np.ndarray:
    """RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from zero (0 <= exponent <= 31 in
    gemmlowp; the same formula up to 62 here)."""
    x, e = _i64(x), _i64(exponent)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def srmbpot(x, exponent: int, bits: int = 32) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT<exponent>: a saturating left shift, or a rounding right shift."""
    x = _i64(x)
    if exponent > 0:
        limit = (1 << (bits - 1 - exponent)) - 1
        shifted = x * (1 << exponent)
        return np.where(x > limit, (1 << (bits - 1)) - 1, np.where(x < -limit, -(1 << (bits - 1)), shifted))
    if exponent < 0:
        return rdbpot(x, -exponent)
    return x


def rescale(x, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp::Rescale between Q formats of int32 raw values."""
    return srmbpot(x, src_integer_bits - dst_integer_bits)


def rounding_half_sum(a, b) -> np.ndarray:
    """(a + b) / 2 rounded to nearest, ties away from zero (VRHADD): (sum + sign(sum)) / 2, truncating."""
    s = _i64(a) + _i64(b)
    return trunc_div_pot(s + np.where(s >= 0, 1, -1), 1)


def one_q(integer_bits: int) -> int:
    """The raw value of 1.0 in Q(integer_bits) (Q0 saturates to INT32_MAX)."""
    return I32_MAX if integer_bits == 0 else 1 << (31 - integer_bits)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite's double-rounding MultiplyByQuantizedMultiplier(int32 x, m, s): RDBPOT(SRDHM(x * 2^max(s, 0),
    m), max(-s, 0)); the left shift wraps in int32 as the C++ does."""
    s = _i64(shift)
    left, right = np.maximum(s, 0), np.maximum(-s, 0)
    return rdbpot(srdhm(wrap(_i64(x) << left), multiplier), right)


def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: a 4th-order Taylor expansion around -1/8."""
    x = wrap(_i64(a) + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(wrap(srdhm(wrap(x4_over_4 + x3), _ONE_THIRD) + x2), 1)
    return wrap(_EXP_MINUS_ONE_EIGHTH + srdhm(_EXP_MINUS_ONE_EIGHTH, wrap(x + poly)))


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """exp(a) for a <= 0 in Q(integer_bits), result Q0.31: the exp of a mod 1/4 on [-1/4, 0), times
    exp(-2^k) for every bit k of the remainder; saturates to 1 at 0 (and to 0 below -32)."""
    a = _i64(a)
    fractional_bits = 31 - integer_bits
    quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        rescale(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = wrap(a_mod_quarter_minus_quarter - a)
    for k, multiplier in _EXP_BARREL:
        if integer_bits > k:
            bit = 1 << (fractional_bits + k)
            result = np.where((remainder & bit) != 0, srdhm(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, I32_MAX, result)


def _newton_reciprocal_q2(a) -> np.ndarray:
    """Newton-Raphson estimate of 1 / ((a + 1) / 2) in Q2.29 for a in Q0.31 (three iterations from 48/17 -
    32/17 * d), shared by one_over_one_plus_x and one_minus_x_over_one_plus_x."""
    half_denominator = rounding_half_sum(a, I32_MAX)
    x = wrap(_Q2_48_OVER_17 + srdhm(half_denominator, _Q2_NEG_32_OVER_17))
    for _ in range(3):
        one_minus_dx = wrap(one_q(2) - srdhm(half_denominator, x))
        x = wrap(x + rescale(srdhm(x, one_minus_dx), 4, 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """1 / (1 + a) for a in [0, 1), Q0.31 in and out."""
    return rescale(_newton_reciprocal_q2(a), 1, 0)  # x/2 as Q1 (same raw), then to Q0


def one_minus_x_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """(1 - a) / (1 + a) for a in [0, 1), Q0.31 in and out."""
    return rescale(wrap(_newton_reciprocal_q2(a) - one_q(2)), 2, 0)


def logistic(a, integer_bits: int) -> np.ndarray:
    """gemmlowp::logistic: 1 / (1 + exp(-a)) for a in Q(integer_bits), result Q0.31."""
    a = _i64(a)
    positive = a > 0
    magnitude = np.where(positive, a, wrap(-a))
    if_positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(wrap(-magnitude), integer_bits))
    if_negative = wrap(I32_MAX - if_positive)
    return np.where(a == 0, 1 << 30, np.where(positive, if_positive, if_negative))


def tanh(a, integer_bits: int) -> np.ndarray:
    """gemmlowp::tanh for a in Q(integer_bits), result Q0.31: (1 - exp(-2|a|)) / (1 + exp(-2|a|)) with the
    sign of a (exp evaluated on -|a| read as Q(integer_bits + 1), which is -2|a|)."""
    a = _i64(a)
    negative = a < 0
    minus_magnitude = np.where(negative, a, wrap(-a))
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(minus_magnitude, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, wrap(-t), t))


def count_leading_zeros32(x) -> np.ndarray:
    """Leading zero bits of positive int32 values (as uint32)."""
    x = _i64(x)
    return 32 - np.frexp(x.astype(np.float64))[1].astype(np.int64)  # frexp exponent = bit length (exact)


def get_reciprocal(x, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """tflite::GetReciprocal for x > 0 in Q(x_integer_digits): returns (1 / x normalised to Q0.31 in
    [1/2, 1), num_bits_over_unit)."""
    x = _i64(x)
    headroom_plus_one = count_leading_zeros32(x)
    shifted_minus_one = wrap(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), x_integer_digits - headroom_plus_one


def calculate_input_radius(input_integer_bits: int, input_left_shift: int, total_signed_bits: int = 31) -> int:
    """tflite::CalculateInputRadius: floor((2^ib - 1) * 2^(tsb - ib) / 2^left_shift) (exact in double)."""
    numerator = ((1 << input_integer_bits) - 1) << (total_signed_bits - input_integer_bits)
    if input_left_shift >= 0:
        return numerator >> input_left_shift
    return numerator << -input_left_shift


def lut_lookup16(value, lut: np.ndarray) -> np.ndarray:
    """tflite::LUTLookup(int16): a 513-entry table interpolated with 7 fraction bits, rounding the slope term
    (= (TOSA TABLE i16 + 64) >> 7); the int16 result wraps as the C++ cast does."""
    v = _i64(value)
    t = np.asarray(lut, np.int64)
    idx = 256 + (v >> 7)
    base = t[idx]
    return wrap(base + (((t[idx + 1] - base) * (v & 0x7F) + 64) >> 7), 16)


def _round_f32(v: np.float32) -> np.float32:
    """TfLiteRound(float): std::round, ties away from zero."""
    return np.float32(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)))


def expf(v: np.float32) -> np.float32:
    """std::exp(float), correctly rounded (through double): what glibc's expf returns."""
    return np.float32(np.exp(np.float64(v)))


def lut_populate_int16(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int,
                       transform) -> np.ndarray:
    """tflite::LUTPopulate<int16_t> (float32 arithmetic throughout): 512 samples of `transform` over the input
    range, each biased by half the interpolation error at the segment midpoint, plus the last point."""
    f32 = np.float32
    in_scale, out_scale = f32(input_scale), f32(output_scale)
    input_min = in_scale * f32(I16_MIN - input_zero_point)
    input_max = in_scale * f32(I16_MAX - input_zero_point)
    output_min = out_scale * f32(I16_MIN - output_zero_point)
    output_max = out_scale * f32(I16_MAX - output_zero_point)
    step = (input_max - input_min) / f32(512)
    half_step = step / f32(2)
    inv = f32(65536) / (output_max - output_min)
    xs = input_min + np.arange(513, dtype=np.float32) * step
    values = np.array([transform(x) for x in xs], np.float32)
    mids = np.array([transform(x + half_step) for x in xs[:512]], np.float32)
    sample = _round_f32(values[:512] * inv)
    midpoint_interp = _round_f32((values[1:] * inv + sample) / f32(2))
    bias = _round_f32((midpoint_interp - _round_f32(mids * inv)) / f32(2))
    last = _round_f32(transform(input_max) * inv)
    lut = np.append(np.clip(sample - bias, f32(I16_MIN), f32(I16_MAX)), np.clip(last, f32(I16_MIN), f32(I16_MAX)))
    return lut.astype(np.int64)
