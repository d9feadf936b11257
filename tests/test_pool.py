"""AVG_POOL2D and MAX_POOL2D: the reference == values computed by hand from the TOSA pseudocode, ERROR_IFs,
ranges, and generated C == reference (hypothesis; plus clang with sanitizers)."""


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.primitives.pool import reciprocal_scale
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, assert_clang_sanitized, prepare, step_schedule


def pool_case(op, x, out_hw, kernel, stride=(1, 1), pad=(0, 0, 0, 0), dtype="i8", out_dtype=None, lo=None, hi=None,
              **attrs):
    n, _, _, c = x
    return step_schedule(op, [Var(x, dtype, lo, hi)], [((n, *out_hw, c), out_dtype or dtype)], kernel=list(kernel),
                         stride=list(stride), pad=list(pad), **attrs)


def reference(sched, x):
    return run_reference(prepare(sched), [x])["out0"]


# ---- hand-computed examples ----

def test_reciprocal_scale_by_hand():
    # k = bitlen(count - 1), multiplier = ((2^30 + 1) << k) // count, shift = 30 + k
    assert reciprocal_scale(1) == ((1 << 30) + 1, 30)
    assert reciprocal_scale(2) == ((1 << 30) + 1, 31)
    assert reciprocal_scale(3) == (4294967300 // 3, 32) == (1431655766, 32)
    assert reciprocal_scale(9) == (17179869200 // 9, 34) == (1908874355, 34)


def test_negative_tie_rounds_away_from_zero():
    # docs/semantics.md §6.3: acc = -509, count = 2 -> -255 (half up would give -254)
    x = np.array([-255, -254], np.int16).reshape(1, 1, 2, 1)
    sched = pool_case("AVG_POOL2D", (1, 1, 2, 1), (1, 1), (1, 2), dtype="i16")
    assert reference(sched, x).reshape(-1).tolist() == [-255]
    assert reference(sched, -x).reshape(-1).tolist() == [255]


def test_zero_point_tie_differs_from_raw_average():
    # docs/semantics.md §8.4: values {2, 3} with zp 10: (-8 - 7) / 2 = -7.5 -> -8, + 10 = 2 (TFLite's raw mean gives 3)
    x = np.array([2, 3], np.int8).reshape(1, 1, 2, 1)
    sched = pool_case("AVG_POOL2D", (1, 1, 2, 1), (1, 1), (1, 2), input_zp=10, output_zp=10)
    assert reference(sched, x).reshape(-1).tolist() == [2]


def test_border_counts():
    # 3x3 input, 3x3 kernel, pad 1: corner windows average 4 taps, edges 6, the centre 9
    x = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 36]], np.int8).reshape(1, 3, 3, 1)
    sched = pool_case("AVG_POOL2D", (1, 3, 3, 1), (3, 3), (3, 3), pad=(1, 1, 1, 1))
    # windows holding the 36: (1,1): 36/9 = 4; (1,2), (2,1): 36/6 = 6; (2,2): 36/4 = 9
    assert reference(sched, x)[0, :, :, 0].tolist() == [[0, 0, 0], [0, 4, 6], [0, 6, 9]]


def test_output_clipped_with_zero_point():
    x = np.full((1, 2, 2, 1), 127, np.int8)
    sched = pool_case("AVG_POOL2D", (1, 2, 2, 1), (1, 1), (2, 2), input_zp=-128, output_zp=-1)
    assert reference(sched, x).reshape(-1).tolist() == [127]  # 255 - 1 clipped
    prepare(sched)
    assert sched.buffers["out0"].value_range == (-1, 127)


def test_max_pool_ignores_padding():
    # all inputs negative: padding must not contribute a 0
    x = np.array([[-100, -90], [-80, -70]], np.int8).reshape(1, 2, 2, 1)
    sched = pool_case("MAX_POOL2D", (1, 2, 2, 1), (2, 2), (2, 2), pad=(1, 0, 1, 0))
    assert reference(sched, x)[0, :, :, 0].tolist() == [[-100, -90], [-80, -70]]


def test_max_pool_stride_and_minimum():
    x = np.array([-128, -128, 5, -7, 3, 3], np.int8).reshape(1, 1, 6, 1)
    sched = pool_case("MAX_POOL2D", (1, 1, 6, 1), (1, 3), (1, 2), stride=(1, 2))
    assert reference(sched, x).reshape(-1).tolist() == [-128, 5, 3]


# ---- ERROR_IF and plan-time checks ----

@pytest.mark.parametrize("op", ["AVG_POOL2D", "MAX_POOL2D"])
@pytest.mark.parametrize("bad", [
    dict(out_hw=(4, 4), pad=(2, 0, 0, 0), x=(1, 4, 5, 1)),  # pad_top >= kernel_y
    dict(out_hw=(5, 6), pad=(0, 0, 0, 2)),  # pad_right >= kernel_x
    dict(out_hw=(2, 2), stride=(2, 2)),  # (5 - 2) / 2 is not exact
    dict(out_hw=(4, 4), kernel=(0, 2)),
    dict(out_hw=(4, 4), stride=(1, 0)),
    dict(out_hw=(4, 4), pad=(0, -1, 0, 1)),
    dict(out_hw=(4, 4), dtype="i32"),
    dict(out_hw=(4, 4), out_dtype="i16"),
    dict(out_hw=(3, 3)),
])
def test_pool_error_if(op, bad):
    args = {**dict(x=(1, 5, 5, 1), kernel=(2, 2)), **bad}
    with pytest.raises(GraphError):
        prepare(pool_case(op, **args))


@pytest.mark.parametrize("bad", [
    dict(dtype="i16", input_zp=1),
    dict(dtype="i16", output_zp=-1),
    dict(input_zp=-129),
    dict(output_zp=128),
    dict(acc_type="i48"),
])
def test_avg_pool_zero_point_rules(bad):
    with pytest.raises(GraphError):
        prepare(pool_case("AVG_POOL2D", (1, 3, 3, 1), (2, 2), (2, 2), **bad))


@pytest.mark.parametrize("size, overflows", [(256, True), (255, False)])
def test_avg_pool_i32_overflow(size, overflows):
    # i16: 256 * 256 taps of -32768 reach -2^31 in the raw sum (the conservative bound rejects it)
    step = prepare(pool_case("AVG_POOL2D", (1, size, 256, 1), (1, 1), (size, 256), dtype="i16")).steps[0]
    assert step.acc_bound == (-size * 256 * 32768, size * 256 * 32767)
    assert (step.widened is not None) == overflows  # widened: an int64 sum (tests/test_widening.py runs it)
    assert not overflows or "AVG_POOL2D" in step.widened.reason and "overflow" in step.widened.reason


# ---- generated C == reference ----

@st.composite
def pool_params(draw, op):
    dtype = draw(st.sampled_from(["i8", "i16"]))
    dims = []
    for _ in range(2):
        k, s = draw(st.integers(1, 4)), draw(st.integers(1, 3))
        lo, hi = draw(st.integers(0, k - 1)), draw(st.integers(0, k - 1))
        outs = [o for o in range(1, 6) if 1 <= (o - 1) * s + k - lo - hi <= 9]
        o = draw(st.sampled_from(outs))
        dims.append(((o - 1) * s + k - lo - hi, o, k, s, lo, hi))
    (ih, oh, kh, sy, pt, pb), (iw, ow, kw, sx, pl, pr) = dims
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 8))
    attrs = {}
    if op == "AVG_POOL2D" and dtype == "i8":
        zps = st.sampled_from([0, -128, 127]) | st.integers(-128, 127)
        attrs = dict(input_zp=draw(zps), output_zp=draw(zps))
    return pool_case(op, (n, ih, iw, c), (oh, ow), (kh, kw), (sy, sx), (pt, pb, pl, pr), dtype, **attrs)


@given(sched=pool_params("AVG_POOL2D"))
def test_avg_pool_c_matches_reference(sched):
    assert_bit_exact(sched, samples=2)


@given(sched=pool_params("MAX_POOL2D"))
def test_max_pool_c_matches_reference(sched):
    assert_bit_exact(sched, samples=2)


@pytest.mark.parametrize("sched", [
    pool_case("AVG_POOL2D", (2, 7, 6, 3), (3, 4), (3, 2), (3, 2), (1, 1, 1, 1), input_zp=-128, output_zp=5),
    pool_case("AVG_POOL2D", (1, 5, 5, 2), (5, 5), (3, 3), pad=(1, 1, 1, 1), dtype="i16"),
    pool_case("MAX_POOL2D", (1, 6, 6, 4), (3, 3), (3, 3), (2, 2), (1, 0, 0, 1), dtype="i16"),
], ids=["avg-i8-zp", "avg-i16", "max-i16"])
def test_clang_sanitizers(sched):
    """clang with the target's -Werror flags, run as the harness under ASan/UBSan."""
    assert_clang_sanitized(sched)
