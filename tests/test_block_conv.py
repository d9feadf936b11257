"""BLOCK_CONV2D (qcodegen/primitives/block_conv2d.py): blockwise int32 partial sums weighted by integer ratios, one
output requantization. Hand-computed reference values, range analysis (overflow refused), and generated C == numpy
reference on random shapes, block counts, i4 / i8 weights, zero points, padding, stride and dilation; the wide form
(i32 ratios, int64 sums output as i48) at its 48-bit bound and on generic, x86-avx2 and cortex-m4."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.codegen import load_target
from qcodegen.errors import GraphError, PlanError, UnsupportedError
from qcodegen.fixedpoint import scale_to_multiplier_shift
from qcodegen.ir.schedule import Schedule
from qcodegen.lower.stablehlo.blockwise import ratios, wide_ratios
from qcodegen.reference import run_reference
from qcodegen.testing import Const, Var, assert_bit_exact, prepare, step_schedule
from qcodegen.verify.runners import unavailable


def _schedule(x_shape: tuple[int, ...], w: np.ndarray, ratio: np.ndarray, scales: list[float], out: str = "i8",
              w_type: str = "i8", pad: tuple[int, ...] = (0, 0, 0, 0), stride: tuple[int, int] = (1, 1),
              dilation: tuple[int, int] = (1, 1), izp: int = 0, wzp: int = 0, ozp: int = 0,
              rounding: str = "half_even", x_range: tuple[int, int] | None = None) -> Schedule:
    pairs = [scale_to_multiplier_shift(s) for s in scales]
    n, ih, iw, _ = x_shape
    o, kh, kw, _ = w.shape
    oh = (ih + pad[0] + pad[1] - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (iw + pad[2] + pad[3] - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    lo, hi = x_range or (None, None)
    return step_schedule("BLOCK_CONV2D", [Var(x_shape, "i8", lo, hi), Const(w, w_type), Const(ratio, "i16")],
                         [((n, oh, ow, o), out)], pad=list(pad), stride=list(stride), dilation=list(dilation),
                         input_zp=izp, weight_zp=wzp, multiplier=[m for m, _ in pairs], shift=[s for _, s in pairs],
                         output_zp=ozp, rounding=rounding)


def _wide_schedule(x_shape: tuple[int, ...], w: np.ndarray, ratio: np.ndarray, w_type: str = "i8",
                   pad: tuple[int, ...] = (0, 0, 0, 0), izp: int = 0, wzp: int = 0) -> Schedule:
    """The wide form: i32 ratios, the int64 ratio-weighted sums as the i48 output (1x1 stride and dilation)."""
    n, ih, iw, _ = x_shape
    o, kh, kw, _ = w.shape
    out = (n, ih + pad[0] + pad[1] - kh + 1, iw + pad[2] + pad[3] - kw + 1, o)
    return step_schedule("BLOCK_CONV2D", [Var(x_shape, "i8"), Const(w, w_type), Const(ratio, "i32")],
                         [(out, "i48")], pad=list(pad), stride=[1, 1], dilation=[1, 1], input_zp=izp, weight_zp=wzp)


def test_hand_computed_dense() -> None:
    """1x1 window, 4 input channels in 2 blocks of 2, 2 output channels, input zero point 1, weight zero point -1.
    x - 1 = [2, -1, 0, 3]; channel 0: w + 1 = [1, 2 | 3, -1] -> block sums 2 - 2 = 0 and 0 - 3 = -3, ratios (5, 2)
    -> total -6; x 0.25 = -1.5, + 3 = 1.5 -> 2 (the result rounded half to even: the odd zero point sends the tie of
    -1.5 to -1). Channel 1: w + 1 = [0, 1 | 1, 1] -> -1 and 3, ratios (1, 4) -> 11; x 0.25 = 2.75, + 3 = 5.75 -> 6."""
    w = np.array([[0, 1, 2, -2], [-1, 0, 0, 0]]).reshape(2, 1, 1, 4)
    sched = _schedule((1, 1, 1, 4), w, np.array([[5, 1], [2, 4]]), [0.25, 0.25], ozp=3, izp=1, wzp=-1)
    x = np.array([3, 0, 1, 4], np.int8).reshape(1, 1, 1, 4)
    assert run_reference(prepare(sched), [x])["out0"].reshape(-1).tolist() == [2, 6]
    assert_bit_exact(sched, inputs=[[x]])


def test_hand_computed_padding_reads_input_zero_point() -> None:
    """3x1 input [1, 2, 3] (zero point 2), kernel 3x1 of ones, one block, pad 1 top and bottom, ratio 3, scale 1:
    taps (x - 2) = [pad 0, -1, 0], [-1, 0, 1], [0, 1, pad 0] -> sums -1, 0, 1 -> x 3 = -3, 0, 3."""
    w = np.ones((1, 3, 1, 1), np.int64)
    sched = _schedule((1, 3, 1, 1), w, np.array([[3]]), [1.0], pad=(1, 1, 0, 0), izp=2)
    x = np.array([1, 2, 3], np.int8).reshape(1, 3, 1, 1)
    assert run_reference(prepare(sched), [x])["out0"].reshape(-1).tolist() == [-3, 0, 3]
    assert_bit_exact(sched, inputs=[[x]])


def test_i32_output_and_extreme_values() -> None:
    """docs/semantics.md §11 edges: inputs at -128 / 127, weights at the i4 extremes, zero points at their extremes, the
    int32 sum at its proven bound: |x - 127| <= 255, w + 8 = 0 or 15 (16 of each per block of 32), ratios 32767 and
    2322: 255 * 240 * 35089 = 2,147,446,800 <= 2^31 - 1 (ratio 2323 would be refused), i32 output."""
    w = np.array([-8, 7] * 32).reshape(1, 1, 1, 64)
    ratio = np.array([[32767], [2322]])
    sched = _schedule((1, 1, 2, 64), w, ratio, [2.0 ** -20], out="i32", w_type="i4", wzp=-8, izp=127)
    prepare(sched)
    assert sched.steps[0].acc_bound == (-2147446800, 0)
    x = np.array([[-128] * 64, [127] * 64], np.int8).reshape(1, 1, 2, 64)
    assert_bit_exact(sched, inputs=[[x]])


def test_overflow_refused() -> None:
    """255 * 15 * 64 taps * ratio 32767 > 2^31: the ratio-weighted sum could overflow int32."""
    w = np.full((1, 1, 1, 64), 7)
    sched = _schedule((1, 1, 1, 64), w, np.full((1, 1), 32767), [2.0 ** -20], w_type="i4", wzp=-8, izp=127)
    with pytest.raises(PlanError, match="ratio-weighted sum could overflow|i32 accumulator could overflow"):
        prepare(sched)
    ok = _schedule((1, 1, 1, 64), w, np.full((1, 1), 32767), [2.0 ** -20], w_type="i4", wzp=-8, izp=127,
                   x_range=(120, 127))  # a narrower input range fits: 7 * 15 * 64 * 32767 < 2^31
    prepare(ok)


def test_wide_form_at_its_48_bit_bound() -> None:
    """i32 ratios: the sum is int64, output as it is. |x - 127| = 255 and |w - 127| = 255 over 128 channels, ratio
    2^24 - 1: 255 * 255 * 128 * 16,777,215 = 139,640,115,888,000 < 2^47 (an int32 sum would wrap; 130 channels are
    refused). The ratio truncated to 16 or 32 bits would change the result."""
    ratio = np.array([[(1 << 24) - 1]])
    sched = _wide_schedule((1, 1, 2, 128), np.full((1, 1, 1, 128), -128), ratio, izp=127, wzp=127)
    prepare(sched)
    assert sched.steps[0].acc_bound == (0, 139640115888000)
    x = np.array([[-128] * 128, [127] * 128], np.int8).reshape(1, 1, 2, 128)
    assert run_reference(sched, [x])["out0"].reshape(-1).tolist() == [139640115888000, 0]
    assert_bit_exact(sched, inputs=[[x]])
    with pytest.raises(PlanError, match="ratio-weighted sum: the i48 accumulator could overflow"):
        prepare(_wide_schedule((1, 1, 1, 130), np.full((1, 1, 1, 130), -128), ratio, izp=127, wzp=127))
    with pytest.raises(GraphError, match="with i32 ratios the output must be i48"):
        prepare(step_schedule("BLOCK_CONV2D", [Var((1, 1, 1, 4), "i8"), Const(np.ones((1, 1, 1, 4)), "i8"),
                                               Const(np.ones((1, 1)), "i32")], [((1, 1, 1, 1), "i32")],
                              pad=[0] * 4, stride=[1, 1], dilation=[1, 1]))


@pytest.mark.parametrize("target", ["generic", "x86-avx2", "cortex-m4"])
def test_wide_form_bit_exact(target: str) -> None:
    """24-bit ratios, i4 weights in 3 blocks, padding, zero points: C == reference on each target (one build)."""
    if unavailable(load_target(target)):
        pytest.skip(f"{target}: {unavailable(load_target(target))}")
    rng = np.random.default_rng(7)
    w = rng.integers(-8, 8, (5, 3, 3, 12))
    ratio = rng.integers(1 << 23, 1 << 24, (3, 5))
    assert_bit_exact(_wide_schedule((2, 4, 5, 12), w, ratio, "i4", pad=(1, 1, 0, 2), izp=-3, wzp=2), samples=2,
                     target=target)


def test_wide_ratios_hand_computed() -> None:
    """wide_ratios: units 0.2 / 0.1 / 0.05, bounds 100 each, result scale 1: R = 2^31 - 2 (the sum bound 300 R is far
    below 2^47), S the float32 just above 0.2 / R (31-bit ratios: S's rounding moves them by up to 2^7, so it is
    rounded up to keep r <= R); the ratios are the units over S rounded, and the bound is S * sum of bounds *
    |exact - r|, far below an LSB."""
    units = np.array([[0.2], [0.1], [0.05]])
    bounds = np.full((3, 1), 100)
    r, scale, err = wide_ratios(units, bounds, np.ones(1))
    cap = (1 << 31) - 2
    assert scale.dtype == np.float32 and np.float64(scale[0]) >= 0.2 / cap
    assert np.nextafter(scale[0], np.float32(0)) < 0.2 / cap
    exact = units[:, 0] / np.float64(scale[0])
    assert r[:, 0].tolist() == np.floor(exact + 0.5).astype(np.int64).tolist()
    assert cap - 2**8 < r[0, 0] <= cap
    assert err[0] == pytest.approx(float(scale[0]) * 100 * np.abs(exact - r[:, 0]).sum(), rel=1e-12)
    assert err[0] < 1e-5
    with pytest.raises(UnsupportedError, match="exceed 48 bits"):
        wide_ratios(units, np.full((3, 1), 1 << 46), np.ones(1))


def test_check_errors() -> None:
    w = np.zeros((2, 1, 1, 6), np.int64)
    with pytest.raises(GraphError, match="blocks dividing 6"):
        prepare(_schedule((1, 1, 1, 6), w, np.ones((4, 2)), [0.5, 0.5]))
    with pytest.raises(GraphError, match="weight zero point"):
        prepare(_schedule((1, 1, 1, 6), w, np.ones((2, 2)), [0.5, 0.5], w_type="i4", wzp=8))


@given(st.data())
def test_bit_exact(data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    w_type = data.draw(st.sampled_from(["i8", "i4"]))
    blocks, bs = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 6))
    kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    sy, sx = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    dy, dx = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    pad = tuple(data.draw(st.lists(st.integers(0, 2), min_size=4, max_size=4)))
    c, o = blocks * bs, data.draw(st.integers(1, 5))
    ih = (kh - 1) * dy + 1 + sy * data.draw(st.integers(0, 2)) - pad[0] - pad[1]
    iw = (kw - 1) * dx + 1 + sx * data.draw(st.integers(0, 2)) - pad[2] - pad[3]
    if ih < 1 or iw < 1:
        ih, iw, pad = (kh - 1) * dy + 1, (kw - 1) * dx + 1, (0, 0, 0, 0)
    lo, hi = (-8, 7) if w_type == "i4" else (-128, 127)
    w = rng.integers(lo, hi + 1, (o, kh, kw, c))
    wzp = int(rng.integers(lo, hi + 1)) if data.draw(st.booleans()) else 0
    izp = int(rng.integers(-128, 128)) if data.draw(st.booleans()) else 0
    bound = 255 * (hi - lo) * kh * kw * c  # largest |block-weighted sum| per unit ratio
    ratio = rng.integers(0, max(1, min(32767, (2**31 - 1) // bound)) + 1, (blocks, o))
    scales = list(rng.uniform(2.0 ** -24, 2.0 ** -8, o))
    out = data.draw(st.sampled_from(["i8", "i16", "i32"]))
    ozp = int(rng.integers(-128, 128)) if out == "i8" else 0
    rounding = data.draw(st.sampled_from(["half_even", "single_round", "double_round"]))
    assert_bit_exact(_schedule((data.draw(st.integers(1, 2)), ih, iw, c), w, ratio, scales, out, w_type,
                               pad, (sy, sx), (dy, dx), izp, wzp, ozp, rounding), samples=2)


@pytest.mark.parametrize(("x_shape", "kernel", "pad", "w_type"), [
    ((1, 3, 3, 256), (3, 3), (1, 1, 1, 1), "i4"),  # K = 2304 > the 2048-element window buffer, padded: in place
    ((1, 3, 2, 256), (2, 1), (1, 0, 0, 0), "i8"),
    ((1, 1, 2, 2560), (1, 1), (0, 0, 0, 0), "i4"),  # a long dense row read in place
])
def test_windows_above_the_patch_buffer(x_shape: tuple[int, ...], kernel: tuple[int, int], pad: tuple[int, ...],
                                        w_type: str) -> None:
    rng = np.random.default_rng(3)
    lo, hi = (-8, 7) if w_type == "i4" else (-128, 127)
    w = rng.integers(lo, hi + 1, (3, *kernel, x_shape[3]))
    ratio = rng.integers(0, 200, (8, 3))
    assert_bit_exact(_schedule(x_shape, w, ratio, [2.0 ** -14] * 3, w_type=w_type, pad=pad, izp=-5, wzp=lo // 2,
                               ozp=7), samples=2)


def test_ratio_choice_hand_computed() -> None:
    """stablehlo_blockwise.ratios: units 0.2 / 0.1 / 0.05 with block bounds 100 each allow R up to 32767; every R
    divisible by 4 is exact, the largest is 32764 -> ratios 32764, 16382, 8191, c = 0.2 / 32764, error 0. Units
    1 / 0.3 with bounds 2^20 each: R <= (2^31 - 1) // 2^21 = 1023; 0.3 R is an integer for R = 1020 -> 1020, 306."""
    r, common, err = ratios(np.array([[0.2], [0.1], [0.05]]), np.full((3, 1), 100))
    assert r[:, 0].tolist() == [32764, 16382, 8191] and common[0] == 0.2 / 32764 and err[0] == 0
    r, _, err = ratios(np.array([[1.0], [0.3]]), np.full((2, 1), 2**20))
    assert r[:, 0].tolist() == [1020, 306] and err[0] < 1e-6
    with pytest.raises(UnsupportedError, match="exceed int32"):
        ratios(np.array([[1.0]]), np.array([[2**31]]))
