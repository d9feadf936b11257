"""QUANTIZE (f32 -> int) and DEQUANTIZE (int -> f32), docs/semantics.md §12.2: generated C == numpy reference bit
for bit (float outputs compared as uint32 patterns), hand-computed examples (ties to even, saturation,
NaN -> qmin), the C rounding helper against np.rint on hard inputs, ERROR_IF conditions."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.ir.dtypes import dtype
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, c_vs_reference, prepare, step_schedule

QTYPES = ["i4", "u4", "i8", "u8", "i16", "u16", "i32"]


def quantize(out, scale=1.0, zp=0, shape=None, qmin=None, qmax=None, **attrs):
    d = dtype(out)
    shape = shape or (np.size(scale) if np.ndim(scale) else 8,)
    return step_schedule("QUANTIZE", [Var(shape, "f32")], [(shape, out)], scale=scale, zero_point=zp,
                         qmin=d.min if qmin is None else qmin, qmax=d.max if qmax is None else qmax, **attrs)


def dequantize(src, scale=1.0, zp=0, shape=(8,), lo=None, hi=None, **attrs):
    return step_schedule("DEQUANTIZE", [Var(shape, src, lo, hi)], [(shape, "f32")], scale=scale,
                         zero_point=zp, **attrs)


def run(sched, x):
    """Reference output on `x`, after checking that the C agrees bit for bit on the same input."""
    arr = np.asarray(x, sched.buffers["in0"].dtype.numpy)
    out = run_reference(prepare(sched), [arr])["out0"]
    assert_bit_exact(sched, inputs=[[arr]])
    return out


NAN, INF = float("nan"), float("inf")


# ---- QUANTIZE: hand-computed ----------------------------------------------------------------------

def test_ties_to_even_saturation_and_nan():
    x = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, 1000.0, -1000.0, NAN, INF, -INF, -0.0]
    assert run(quantize("i8", shape=(14,)), x).tolist() == [
        0, 2, 2, 0, -2, -2, 126, 127, 127, -128, -128, 127, -128, 0]


def test_scale_and_zero_point_in_float32():
    # v = x / 0.5 + 1: 0.25 -> 1.5 -> 2; -0.75 -> -0.5 -> 0; 0.75 -> 2.5 -> 2; -64.75 -> -128.5 -> -128
    assert run(quantize("i8", 0.5, 1, shape=(4,)), [0.25, -0.75, 0.75, -64.75]).tolist() == [2, 0, 2, -128]
    # u8 zp 128 scale 0.25: -40 -> -32 -> 0; 31.875 -> 255.5 -> 255; 0.125 -> 128.5 -> 128
    assert run(quantize("u8", 0.25, 128, shape=(3,)), [-40.0, 31.875, 0.125]).tolist() == [0, 255, 128]
    # 4-bit storage range in an i8 container
    q = quantize("i8", 1.0, 0, shape=(4,), qmin=-8, qmax=7)
    assert run(q, [7.5, -9.0, -8.5, 6.5]).tolist() == [7, -8, -8, 6]


def test_i32_bounds_round_outward_in_float():
    # f32(2^31 - 1) = 2^31: the float clamp admits 2^31, the integer clamp brings it back
    q = quantize("i32", shape=(5,))
    out = run(q, [3e9, -3e9, 2147483520.0, 2147483647.0, NAN]).tolist()
    assert out == [2147483647, -2147483648, 2147483520, 2147483647, -2147483648]


def test_per_axis():
    q = quantize("i8", [0.5, 2.0, 4.0], [0, -3, 5], shape=(2, 3), axis=1)
    # column scales/zps: x/0.5 + 0, x/2 - 3, x/4 + 5
    assert run(q, [[1.25, 1.0, -2.0], [-0.25, 7.0, 2.0]]).tolist() == [[2, -2, 4], [0, 0, 6]]


def test_rounding_helper_matches_rint_on_hard_inputs():
    # C rounds with qc_round_half_even_f32; the reference uses np.rint: compare on every kind of tie
    k = np.arange(-2000, 2000, dtype=np.float32)
    big = np.float32(2.0) ** np.arange(20, 32, dtype=np.float32)
    ulp = np.float32(1) - np.nextafter(np.float32(1), np.float32(0))
    edge = [0.5 - ulp / 2, 0.5 + ulp, -0.5 + ulp / 2, 1e-45, -1e-45, 8388607.5, -8388607.5, 8388608.0,
            4194303.5, 4194304.5, -4194304.5, 2147483520.0, -2147483648.0, 2147483648.0]
    bits = np.random.default_rng(0).integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    rnd = bits.view(np.float32)
    x = np.concatenate([k + 0.5, k, k - 0.25, big + 0.5, big - 0.5, -big - 0.5, np.float32(edge),
                        rnd[np.isfinite(rnd)][:3000]]).astype(np.float32)
    q = quantize("i32", 1.0, 0, shape=(x.size,))
    out = run(q, x)
    assert out[:8000].tolist() == np.rint(np.concatenate([k + 0.5, k])).astype(np.int64).tolist()
    assert out[:3].tolist() == [-2000, -1998, -1998]  # -1999.5, -1998.5, -1997.5: ties to even


# ---- DEQUANTIZE: hand-computed --------------------------------------------------------------------

def test_dequantize_examples():
    assert run(dequantize("i8", 0.5, -128, shape=(3,)), [-128, 0, 127]).tolist() == [0.0, 64.0, 127.5]
    # int -> f32 rounds to nearest even: 2^24 + 1 -> 2^24, 2^24 + 3 -> 2^24 + 4
    assert run(dequantize("i32", shape=(2,)), [16777217, 16777219]).tolist() == [16777216.0, 16777220.0]
    # q - zp is exact in int64 (not int32): (2^31 - 1) - (-1) = 2^31; -2^31 + 1 rounds to -2^31 in f32
    out = run(dequantize("i32", 1.0, -1, shape=(2,)), [2**31 - 1, -2**31]).tolist()
    assert out == [2147483648.0, -2147483648.0]
    q = dequantize("i8", [0.5, 2.0], [0, -3], shape=(2, 2), axis=1)
    assert run(q, [[1, 1], [4, -3]]).tolist() == [[0.5, 8.0], [2.0, 0.0]]


def test_dequantize_float32_product_rounding():
    # f32(0.1) = 13421773 * 2^-27; times 3 = 40265319 * 2^-27, rounded to 24 bits: 10066330 * 2^-25,
    # i.e. mantissa 0x99999A with exponent -2: bits 0x3E99999A
    out = run(dequantize("i8", 0.1, 0, shape=(1,)), [3])
    assert out.dtype == np.float32 and int(out.view(np.uint32)[0]) == 0x3E99999A


# ---- ERROR_IF -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    lambda: quantize("i8", 0.0),
    lambda: quantize("i8", -1.0),
    lambda: quantize("i8", INF),
    lambda: quantize("i8", 1e-50),  # 0 in float32
    lambda: quantize("i8", [1.0, 2.0], 0, shape=(2, 3), axis=1),  # 2 scales, axis of size 3
    lambda: quantize("i8", 1.0, [0, 1]),  # a zero-point list needs a scale list
    lambda: quantize("i8", 1.0, 10, qmin=-5, qmax=5),  # zp outside [qmin, qmax]
    lambda: quantize("i8", 1.0, 0, qmin=5, qmax=-5),
    lambda: quantize("i8", 1.0, 0, qmin=-200, qmax=5),
    lambda: quantize("i4", 1.0, 0, qmin=-9, qmax=7),
    lambda: step_schedule("QUANTIZE", [Var((4,), "f32")], [((4,), "i8")], scale=1.0, zero_point=0),  # qmin
    lambda: step_schedule("QUANTIZE", [Var((4,), "i8")], [((4,), "i8")], scale=1.0, zero_point=0, qmin=0,
                          qmax=1),
    lambda: step_schedule("QUANTIZE", [Var((4,), "f32")], [((4,), "f32")], scale=1.0, zero_point=0, qmin=0,
                          qmax=1),
    lambda: dequantize("i8", 0.0),
    lambda: dequantize("i8", 1.0, 200),  # zp outside i8
    lambda: dequantize("i8", [1.0, 2.0], 0, shape=(3,), axis=0),
    lambda: step_schedule("DEQUANTIZE", [Var((4,), "i8")], [((4,), "i16")], scale=1.0, zero_point=0),
    lambda: step_schedule("DEQUANTIZE", [Var((4,), "f32")], [((4,), "f32")], scale=1.0, zero_point=0),
])
def test_error_if(bad):
    with pytest.raises(GraphError):
        prepare(bad())


# ---- property tests -------------------------------------------------------------------------------

@st.composite
def quant_params(draw, storage_lo, storage_hi):
    """(shape, scale, zero_point, axis): per tensor or per axis, scales log-uniform over 1e-4..1e4."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    scales = st.floats(-4, 4).map(lambda e: float(np.float32(10.0 ** e)))
    zps = st.integers(storage_lo, storage_hi)
    if draw(st.booleans()):
        return shape, draw(scales), draw(zps), None
    axis = draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    scale = draw(st.lists(scales, min_size=n, max_size=n))
    zp = draw(st.one_of(zps, st.lists(zps, min_size=n, max_size=n)))
    return shape, scale, zp, draw(st.sampled_from([axis, axis - len(shape)]))


@given(out=st.sampled_from(QTYPES), narrow=st.booleans(), data=st.data())
def test_quantize_c_matches_reference(out, narrow, data):
    d = dtype(out)
    qmin, qmax = d.min, d.max
    if narrow:
        qmin, qmax = sorted(data.draw(st.lists(st.integers(d.min, d.max), min_size=2, max_size=2)))
    shape, scale, zp, axis = data.draw(quant_params(qmin, qmax))
    attrs = {} if axis is None else dict(axis=axis)
    sched = quantize(out, scale, zp, shape=shape, qmin=qmin, qmax=qmax, **attrs)
    assert_bit_exact(sched, samples=3)


@given(src=st.sampled_from(QTYPES), data=st.data())
def test_dequantize_c_matches_reference(src, data):
    d = dtype(src)
    shape, scale, zp, axis = data.draw(quant_params(d.min, d.max))
    attrs = {} if axis is None else dict(axis=axis)
    assert_bit_exact(dequantize(src, scale, zp, shape=shape, **attrs), samples=3)


def test_quantize_half_away_from_zero_ties():
    """TFLite's rounding: ties away from zero (0.5 -> 1, -0.5 -> -1, 2.5 -> 3, -2.5 -> -3), by hand."""
    x = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 300.0, np.nan], np.float32)
    sched = prepare(step_schedule("QUANTIZE", [Var((10,), "f32")], [((10,), "i8")], scale=1.0, zero_point=0,
                                  qmin=-128, qmax=127, rounding="half_away_from_zero"))
    got = run_reference(sched, [x])["out0"]
    assert got.tolist() == [1, -1, 2, -2, 3, -3, 0, 0, 127, -128]
    assert c_vs_reference(sched, inputs=[[x]]).bit_exact


def test_quantize_nan_value():
    x = np.array([np.nan, 1.0, -np.nan, 2.0], np.float32)
    sched = prepare(step_schedule("QUANTIZE", [Var((4,), "f32")], [((4,), "i8")], scale=1.0, zero_point=0,
                                  qmin=-128, qmax=127, nan_value=0))
    assert run_reference(sched, [x])["out0"].tolist() == [0, 1, 0, 2]
    assert c_vs_reference(sched, inputs=[[x]]).bit_exact
