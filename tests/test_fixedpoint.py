"""qcodegen.fixedpoint against values derived by hand from docs/semantics.md §3, §4 (TOSA 1.0 scale helpers,
MLIR's computeMultiplierAndShift), RESCALE's ERROR_IF list (docs/semantics.md §3.5), and a brute-force comparison
of DOUBLE_ROUND with TFLite's MultiplyByQuantizedMultiplier rebuilt from gemmlowp formulas (docs/semantics.md §5)."""

import numpy as np
import pytest

from qcodegen.errors import GraphError, PlanError
from qcodegen.fixedpoint import Rounding, Unpredictable, apply_scale_16, apply_scale_32, scale_to_multiplier_shift
from qcodegen.testing import Var, prepare, step_schedule

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
M_MAX = (1 << 31) - 1


# ---- docs/semantics.md §4.1: mant, e = frexp(scale); q = std::round(mant * 2^31); fix-up q == 2^31;
#      shift = 31 - e; shift > 62 -> m >>= min(31, shift - 62), shift = 62; shift < 2 rejected.

@pytest.mark.parametrize("scale, expected", [
    (1.0, (1 << 30, 30)),  # frexp = (0.5, 1): q = 2^30, shift 31 - 1
    (0.5, (1 << 30, 31)),  # (0.5, 0)
    (0.75, (3 << 29, 31)),  # (0.75, 0): 0.75 * 2^31 = 3 * 2^29
    (1 - 2.0 ** -40, (1 << 30, 30)),  # mant * 2^31 = 2^31 - 2^-9 rounds to 2^31: halve, e = 1
    (2.0 ** -10, (1 << 30, 40)),  # powers of two: (2^30, 30 - k)
    (2.0 ** 5, (1 << 30, 25)),
    (2.0 ** 28, (1 << 30, 2)),  # the largest power of two with a legal shift
    (1.5 * 2.0 ** 28, (3 << 29, 2)),  # (0.75, 29)
    (2.0 ** -32, (1 << 30, 62)),  # (0.5, -31): shift exactly 62, no clamping
    (2.0 ** -40, (1 << 22, 62)),  # shift 70 -> multiplier >> 8
    (3 * 2.0 ** -45, (3 << 17, 62)),  # (0.75, -43): 3 * 2^29 >> 12
    (2.0 ** -100, (0, 62)),  # shift 130 -> multiplier >> 31 = 0
    (0.0, (0, 31)),  # frexp(0) = (0, 0)
])
def test_quantize_multiplier_by_hand(scale, expected):
    assert scale_to_multiplier_shift(scale) == expected


def test_quantize_multiplier_rounds_half_away_like_std_round():
    # mant = 0.5 + 2^-32: mant * 2^31 = 2^30 + 0.5 exactly; std::round gives 2^30 + 1, Python's round() 2^30.
    scale = 0.5 + 2.0 ** -32
    assert (scale * 2 ** 31) == (1 << 30) + 0.5 and round(scale * 2 ** 31) == 1 << 30
    assert scale_to_multiplier_shift(scale) == ((1 << 30) + 1, 31)
    # the same tie above the binary point of an odd mantissa: both roundings agree (2^30 + 2)
    assert scale_to_multiplier_shift(0.5 + 3 * 2.0 ** -32) == ((1 << 30) + 2, 31)


def test_quantize_multiplier_16_bit():
    # the 16-bit form uses 2^15 and 15 - e: scale 1.0 is (2^14, 14)
    assert scale_to_multiplier_shift(1.0, bits=16) == (1 << 14, 14)
    assert scale_to_multiplier_shift(0.75 * 2.0 ** -3, bits=16) == (3 << 13, 18)


@pytest.mark.parametrize("scale", [2.0 ** 29, 2.0 ** 29 * (1 - 2.0 ** -53), 1e12, -0.5, float("nan"),
                                   float("inf")])
def test_quantize_multiplier_rejects(scale):
    # 2^29 (1 - 2^-53): the mantissa rounds up to 2^31, the fix-up makes e = 30 and the shift 1
    with pytest.raises(PlanError):
        scale_to_multiplier_shift(scale)


# ---- docs/semantics.md §3.3, §5.3, §11: apply_scale_32 / apply_scale_16, the double-rounding table, edge cases

def scale32(values, m, s, rounding):
    return apply_scale_32(np.asarray(values, np.int64), m, s, Rounding(rounding)).tolist()


def test_double_round_table():
    # docs/semantics.md §5.3 (m = 2^30, shift 33, scale 1/8): 3 -> 0.375, -4 -> -0.5, -12 -> -1.5
    assert scale32([3, -4, -12], 1 << 30, 33, "single_round") == [0, 0, -1]
    assert scale32([3, -4, -12], 1 << 30, 33, "double_round") == [1, -1, -2]


def test_negative_ties():
    # scale 1/2 (shift 31): single round is half up; double round only acts above shift 31
    xs = [-3, -1, 1, 3]  # -1.5, -0.5, 0.5, 1.5
    assert scale32(xs, 1 << 30, 31, "single_round") == [-1, 0, 1, 2]
    assert scale32(xs, 1 << 30, 31, "double_round") == [-1, 0, 1, 2]
    assert scale32(xs, 1 << 30, 31, "half_even") == [-2, 0, 0, 2]
    # scale 1/4 at shift 32: double round adds -2^30 for negative values -> ties go away from zero
    xs = [-6, -2, 2, 6]  # -1.5, -0.5, 0.5, 1.5
    assert scale32(xs, 1 << 30, 32, "single_round") == [-1, 0, 1, 2]
    assert scale32(xs, 1 << 30, 32, "double_round") == [-2, -1, 1, 2]
    assert scale32(xs, 1 << 30, 32, "half_even") == [-2, 0, 0, 2]
    assert scale32([-10, 10, 7], 1 << 30, 32, "half_even") == [-2, 2, 2]  # -2.5, 2.5, 1.75


def test_shift_2():
    # REQUIRE -2 <= v < 2; m = 3: 3/4, -6/4 (tie up), -3/4
    assert scale32([1, -2, -1, 0], 3, 2, "single_round") == [1, -1, -1, 0]
    assert scale32([1, -2, -1], 1, 2, "double_round") == [0, 0, 0]  # 0.25, -0.5 (half up), -0.25
    with pytest.raises(Unpredictable):
        apply_scale_32(np.array([2]), 3, 2)


def test_shift_31_value_require_and_extreme_multiplier():
    # shift 31: REQUIRE -2^30 <= v < 2^30. m = 2^31 - 1, v = -2^30: (-2^61 + 2^30 + 2^30) >> 31 = -2^30 + 1
    assert scale32([-(1 << 30)], M_MAX, 31, "single_round") == [-(1 << 30) + 1]
    assert scale32([(1 << 30) - 1], 1 << 30, 31, "single_round") == [1 << 29]  # (2^30 - 1)/2 + 1/2
    for v in (1 << 30, I32_MAX, I32_MIN):
        with pytest.raises(Unpredictable):
            apply_scale_32(np.array([v]), 1 << 30, 31)


def test_shift_32_int32_min():
    # no value REQUIRE from shift 32 on. v = INT32_MIN, m = 2^31 - 1:
    # single: (-2^62 + 2^31 + 2^31) >> 32 = -2^30 + 1
    # double: (-2^62 + 2^32 - 2^30) / 2^32 = -2^30 + 0.75 -> floor -2^30
    assert scale32([I32_MIN], M_MAX, 32, "single_round") == [-(1 << 30) + 1]
    assert scale32([I32_MIN], M_MAX, 32, "double_round") == [-(1 << 30)]


def test_shift_62():
    # (2^31-1)^2 + 2^61 = 2^62 + 2^61 - 2^32 + 1 -> 1;  -2^62 + 2^31 + 2^61 -> floor(-0.49999...) = -1
    assert scale32([I32_MAX, I32_MIN], M_MAX, 62, "single_round") == [1, -1]
    assert scale32([I32_MAX, I32_MIN], M_MAX, 62, "double_round") == [1, -1]
    assert scale32([I32_MAX, I32_MIN], 1 << 30, 62, "single_round") == [0, 0]  # +-(2^61) + 2^61 -> 0 / +


@pytest.mark.parametrize("m, s", [(1 << 30, 1), (1 << 30, 63), (1 << 30, 0), (-1, 32)])
def test_scale_parameter_require(m, s):
    with pytest.raises(Unpredictable):
        apply_scale_32(np.array([1]), m, s)
    with pytest.raises(Unpredictable):
        apply_scale_16(np.array([1]), m, s)


def test_apply_scale_16():
    # ((v * m) + 2^(shift-1)) >> shift on 48-bit values; REQUIRE the result fits int32
    assert apply_scale_16(np.array([-6, 6, -2]), 1, 2).tolist() == [-1, 2, 0]  # -1.5, 1.5, -0.5: half up
    # scale 2^14 / 2^31 = 2^-17: 2^47 - 1 -> 2^30 - 2^-17 rounds to 2^30; -2^47 -> -2^30 exactly
    assert apply_scale_16(np.array([(1 << 47) - 1, -(1 << 47)]), 1 << 14, 31).tolist() == [1 << 30, -(1 << 30)]
    # at shift 30 the same value becomes 2^31 - 2^-16, which rounds to 2^31: outside int32
    with pytest.raises(Unpredictable):
        apply_scale_16(np.array([(1 << 47) - 1]), 1 << 14, 30)
    with pytest.raises(Unpredictable):
        apply_scale_16(np.array([1 << 40]), 1 << 14, 14)  # identity scale: 2^40 does not fit int32


# ---- docs/semantics.md §3.5 RESCALE ERROR_IF (graph errors) and the valid neighbours of each

def rescale(x="i8", y="i8", izp=0, ozp=0, shape=(2, 3), scale=((1 << 30,), (30,)), **attrs):
    sched = step_schedule("RESCALE", [Var(shape, x)], [(shape, y)], multiplier=list(scale[0]),
                          shift=list(scale[1]), input_zp=izp, output_zp=ozp, **attrs)
    return prepare(sched)


@pytest.mark.parametrize("case", [
    dict(x="i16", izp=1),  # non-zero zp only for 8-bit data or u16 (0 / 32768)
    dict(x="i32", izp=-1),
    dict(y="i32", ozp=1),
    dict(y="i16", ozp=-5),
    dict(x="u16", y="i16", izp=1),
    dict(x="i8", izp=128),  # outside the (signed) input type
    dict(x="u8", izp=-1),
    dict(x="i48", y="i32", scale32=True),  # scale32 with i48
    dict(x="i16", y="i16", scale=((1 << 14,), (14,)), scale32=False, rounding="double_round"),
    dict(input_unsigned=True, output_unsigned=True),
    dict(x="u8", y="u8"),
    dict(x="i8", y="i32", input_unsigned=True),  # unsigned input with an i32 output
    dict(x="i32", y="i8", input_unsigned=True),  # ... or a 32/48-bit input
    dict(x="i48", y="i16", scale32=False, input_unsigned=True),
    dict(x="i32", y="u8"),  # unsigned output with a 32-bit input
    dict(x="i32", y="i8", output_unsigned=True),
    dict(x="i8", y="i32", output_unsigned=True),  # ... or an i32 output
    dict(shape=(), per_channel=True),  # per_channel on rank 0
])
def test_rescale_error_if(case):
    with pytest.raises(GraphError):
        rescale(**case)


@pytest.mark.parametrize("case", [
    dict(x="i8", izp=-128, ozp=127),
    dict(x="u8", izp=255),
    dict(x="i8", izp=128, input_unsigned=True),
    dict(x="u16", y="i16", izp=32768),
    dict(x="i16", y="u16", ozp=32768),
    dict(x="i8", y="u8", izp=-128, ozp=128),
    dict(x="i48", y="i32", scale=((1 << 14,), (31,)), scale32=False),
    dict(x="i16", y="i16", scale=((1 << 14,), (14,)), scale32=False, rounding="single_round"),
    dict(shape=(), scale=((1 << 30,), (30,))),
])
def test_rescale_valid_neighbours(case):
    rescale(**case)


@pytest.mark.parametrize("scale", [((-1,), (30,)), ((1 << 30,), (1,)), ((1 << 30,), (63,))])
def test_rescale_scale_require_is_unpredictable(scale):
    with pytest.raises(Unpredictable):
        rescale(scale=scale)


# ---- docs/semantics.md §5.2: DOUBLE_ROUND == TFLite MultiplyByQuantizedMultiplier (gemmlowp SRDHM + RDBPOT)

def _trunc_div(n: int, d: int) -> int:
    q = abs(n) // d
    return q if n >= 0 else -q


def srdhm(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul: nudge 2^30 or 1 - 2^30, then truncating division by 2^31."""
    if a == b == I32_MIN:
        return I32_MAX
    ab = a * b
    return _trunc_div(ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30)), 1 << 31)


def rdbpot(x: int, r: int) -> int:
    """RoundingDivideByPOT: floor((x + 2^(r-1) - [x < 0]) / 2^r), round half away from zero."""
    if r == 0:
        return x
    return (x + (1 << (r - 1)) - (1 if x < 0 else 0)) >> r


def tflite_mbqm(x: int, m: int, s: int) -> int:
    """MultiplyByQuantizedMultiplier (double rounding): positive s shifts left before the multiply."""
    return srdhm(x * (1 << s), m) if s > 0 else rdbpot(srdhm(x, m), -s)


def test_gemmlowp_helpers_by_hand():
    assert srdhm(3, 1 << 30) == 2  # 1.5 -> 2 (half up via the nudge)
    assert srdhm(-3, 1 << 30) == -1  # -1.5 -> -1
    assert rdbpot(-3, 1) == -2 and rdbpot(3, 1) == 2 and rdbpot(-5, 2) == -1  # -1.5, 1.5, -1.25


def test_double_round_equals_tflite_multiply_by_quantized_multiplier():
    rng = np.random.default_rng(1492)
    n = 4000
    s = rng.integers(-31, 30, n)  # TFLite exponent; TOSA shift = 31 - s in [2, 62]
    m = rng.integers(1 << 30, 1 << 31, n)  # QuantizeMultiplier's normalised range
    m[:8] = [1 << 30, M_MAX, 1 << 30, M_MAX, 0, 1, 1 << 30, M_MAX]
    x = np.empty(n, np.int64)
    for i in range(n):  # TOSA's value REQUIRE for shift <= 31 (also keeps TFLite's x * 2^s in int32)
        lim = 1 << (30 - s[i]) if s[i] >= 0 else 1 << 31
        x[i] = rng.integers(-lim, lim)
    x[:8] = [I32_MIN, I32_MIN, I32_MAX, I32_MAX, -7, -1, -12, 5]
    s[:8] = [-1, -31, -31, -5, -3, -1, -2, -30]
    got = apply_scale_32(x, m, 31 - s, Rounding.DOUBLE)
    want = [tflite_mbqm(int(a), int(b), int(c)) for a, b, c in zip(x, m, s, strict=True)]
    assert got.tolist() == want
