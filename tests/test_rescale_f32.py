"""RESCALE_F32: the integer C emulation of onnxruntime's float32 requantization == its definition evaluated in numpy
float32 (int32 -> float32 conversion, float32 multiply, round half to even), on ties, accumulators where float32
drops bits, tiny / subnormal / huge scales and saturation. One C build per case list."""

import numpy as np
import pytest

from qcodegen.errors import GraphError
from qcodegen.primitives.rescale_f32 import mantissa_exponent, requantize_f32
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, assert_clang_sanitized, prepare, step_schedule

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
F32 = np.float32


def _case(values: np.ndarray, scales: list[float], out: str = "i32", **attrs):
    """A [rows, len(scales)] i32 input, one scale per column; `values` fills it (rows = len // columns)."""
    cols = len(scales)
    data = np.asarray(values, np.int64).reshape(-1, cols).astype(np.int32)
    sched = step_schedule("RESCALE_F32", [Var(data.shape, "i32")], [(data.shape, out)],
                          scale=[float(s) for s in scales], **attrs)
    return sched, data


def _exact(values, scales, out="i32", **attrs):
    sched, data = _case(values, scales, out, **attrs)
    assert_bit_exact(sched, inputs=[[data]])


def _edge_accumulators() -> np.ndarray:
    powers = [1 << p for p in range(31)]
    around = sorted({v + d for v in powers for d in (-3, -2, -1, 0, 1, 2, 3)} | {I32_MAX, I32_MAX - 1, 0})
    vals = np.array(around, np.int64)
    vals = vals[(vals >= 0) & (vals <= I32_MAX)]
    return np.concatenate([vals, -vals, [I32_MIN, I32_MIN + 1, 16777217, -16777217, 16777219, 33554435]])


def test_mantissa_exponent_is_exact():
    scales = np.array([1.0, 0.5, 3.0e-5, np.finfo(np.float32).tiny, 1.4e-45, 1e-40, 3.4e38, 0.0], np.float32)
    m, k = mantissa_exponent(scales)
    assert np.all(m < 1 << 24)
    assert [float(mm) * 2.0 ** -int(kk) for mm, kk in zip(m, k, strict=True)] == [float(s) for s in scales]


def test_definition_ties_and_dropped_bits():
    # f32(2^24 + 1) = 2^24 (the conversion drops a bit); 0.5 * odd is a tie, rounded to even
    assert requantize_f32(np.array([3, 5, -3, 16777217]), F32(0.5)).tolist() == [2.0, 2.0, -2.0, 8388608.0]
    # the float32 product rounds before the final rounding: some exact products just off a tie land on it
    rng = np.random.default_rng(0)
    acc = rng.integers(1 << 20, 1 << 26, 200000)
    s = F32(0.0123456)
    exact = np.rint(acc.astype(np.float64) * float(s))
    assert np.count_nonzero(exact != requantize_f32(acc, s)) > 0


@pytest.mark.parametrize("scales", [
    [0.5, 0.25, 1.0, 2.0, 1.5, 0.75, 3.0],  # exact ties for many accumulators
    [0.0036789, 1.0 / 3.0, 0.1, 7.77e-4, 0.999999, 1.0000001, 12345.678],
    [1.4e-45, 1e-40, float(np.finfo(np.float32).tiny), 2.0 ** -30, 3e-10, 0.0, 1e-20],  # subnormal and tiny
    [3.4e38, 1e30, 2.0 ** 20, 65536.0, 2.0 ** 31, 1e10, 7.0],  # huge: saturation
])
def test_edge_accumulators_bit_exact(scales):
    acc = _edge_accumulators()
    rows = -(-acc.size // len(scales))
    values = np.resize(acc, rows * len(scales)).reshape(rows, len(scales))
    values = np.concatenate([values, np.roll(values, 1, axis=0)])  # every accumulator meets every scale
    _exact(values, scales)


def test_random_pairs_bit_exact():
    rng = np.random.default_rng(17)
    scales = (2.0 ** rng.uniform(-40, 8, 64)).astype(np.float32)
    acc = np.concatenate([rng.integers(I32_MIN, I32_MAX, 20000, endpoint=True),
                          rng.integers(-(1 << 25), 1 << 25, 20000), rng.integers(-5000, 5000, 24000)])
    _exact(acc, scales)


def test_int64_accumulators_bit_exact():
    """i48 input (the int64 accumulator of 16 x 8-bit products): f32(acc) drops up to 23 bits below 2^47."""
    powers = np.array([1 << p for p in range(24, 47)], np.int64)
    around = (powers[:, None] + np.arange(-3, 4)[None, :]).reshape(-1)
    rng = np.random.default_rng(2)
    values = np.concatenate([around, -around, rng.integers(-(1 << 47), 1 << 47, 4000), [0, (1 << 47) - 1]])
    scales = [2.0 ** -30, 3.3e-9, 1.0 / 3.0 * 2.0 ** -20, 7.1e-12]
    values = np.resize(values, (values.size // len(scales) + 1) * len(scales)).reshape(-1, len(scales))
    sched = step_schedule("RESCALE_F32", [Var(values.shape, "i48")], [(values.shape, "i32")], scale=scales)
    assert_bit_exact(sched, inputs=[[values]])
    assert_clang_sanitized(sched)


def test_ties_near_float_rounding_boundaries():
    """Accumulators whose exact product lies within a float32 ulp of k + 1/2: the float32 rounding decides."""
    rng = np.random.default_rng(3)
    scales, values = [], []
    for _ in range(32):
        target = float(rng.integers(1, 200)) + 0.5
        acc = int(rng.integers(1000, 1 << 26))
        s = F32(target / acc)
        scales.append(float(s))
        values.append([acc + d for d in range(-64, 64)])
    _exact(np.array(values).T, scales)


@pytest.mark.parametrize("out,zp,lo,hi", [("i8", -3, -128, 127), ("i8", 10, -20, 100), ("u8", 128, 0, 255),
                                          ("i16", 0, -32768, 32767), ("u16", 100, 0, 65535)])
def test_output_types_zero_point_and_clamp(out, zp, lo, hi):
    rng = np.random.default_rng(5)
    acc = rng.integers(-(1 << 20), 1 << 20, 4096)
    _exact(acc, [0.00041, 0.0021, 0.013, 1.3], out=out, output_zp=zp, out_min=lo, out_max=hi)


def test_per_channel_on_a_middle_axis():
    shape = (2, 3, 4, 5)
    sched = step_schedule("RESCALE_F32", [Var(shape, "i32", -(1 << 24), 1 << 24)], [(shape, "i8")],
                          scale=[0.001, 0.0023, 0.5], axis=1, output_zp=-5)
    assert_bit_exact(sched, samples=3)


def test_reference_and_value_ranges():
    sched = prepare(step_schedule("RESCALE_F32", [Var((3, 2), "i32", -1000, 1000)], [((3, 2), "i8")],
                                  scale=[0.01, 0.5], output_zp=4))
    assert sched.buffers["out0"].value_range == (-128, 127)
    out = run_reference(sched, [np.array([[-1000, 1000], [5, -5], [0, 3]], np.int32)])["out0"]
    assert out.tolist() == [[-6, 127], [4, 2], [4, 6]]


@pytest.mark.parametrize("bad", [
    dict(scale=[float("inf")]), dict(scale=[-0.5]), dict(scale=[0.5, 0.5, 0.5]), dict(scale=[0.5], output_zp=300),
    dict(scale=[0.5], out_min=10, out_max=0),
])
def test_bad_attributes_rejected(bad):
    with pytest.raises(GraphError):
        prepare(step_schedule("RESCALE_F32", [Var((2, 2), "i32")], [((2, 2), "i8")], **bad))


def test_clang_strict_and_sanitized():
    sched = step_schedule("RESCALE_F32", [Var((64, 4), "i32")], [((64, 4), "i8")],
                          scale=[1.4e-45, 0.0007, 0.5, 3.4e38], output_zp=-7)
    assert_clang_sanitized(sched)
