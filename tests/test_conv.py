"""CONV2D and DEPTHWISE_CONV2D: the reference == values computed by hand from the TOSA pseudocode, ERROR_IFs,
accumulator bounds, and generated C == reference (hypothesis; plus clang with sanitizers)."""


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.reference import run_reference
from qcodegen.testing import Const, Var, assert_bit_exact, assert_clang_sanitized, prepare, step_schedule

ACC = {"i8": "i32", "i16": "i48"}


def conv_case(x, w, bias, out_hw, op="CONV2D", x_dtype="i8", w_dtype="i8", lo=None, hi=None, **attrs):
    """A one-step schedule; x is a shape (random input) and w, bias are arrays (constants)."""
    n, _, _, c = x
    oc = w.shape[0] if op == "CONV2D" else w.shape[2] * w.shape[3]
    acc = ACC[x_dtype]
    attrs = dict(dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0, acc_type=acc),
                 **attrs)
    return step_schedule(op, [Var(x, x_dtype, lo, hi), Const(np.asarray(w), w_dtype), Const(np.asarray(bias), acc)],
                         [((n, *out_hw, oc), acc)], **attrs)


def reference(sched, x):
    return run_reference(prepare(sched), [x])["out0"]


# ---- hand-computed examples (TOSA 1.0 CONV2D / DEPTHWISE_CONV2D pseudocode) ----

X3 = np.arange(1, 10, dtype=np.int8).reshape(1, 3, 3, 1)  # [[1,2,3],[4,5,6],[7,8,9]]
W_DIAG = np.array([1, 0, 0, -1]).reshape(1, 2, 2, 1)  # out = x[oy-1, ox-1] - x[oy, ox] (pad top/left 1)


def test_conv_padding_contributes_zero():
    # izp = 1: in-bounds taps read x - 1 = [[0,1,2],[3,4,5],[6,7,8]], padding taps contribute 0; bias 10
    sched = conv_case((1, 3, 3, 1), W_DIAG, [10], (3, 3), pad=[1, 0, 1, 0], input_zp=1)
    assert reference(sched, X3)[0, :, :, 0].tolist() == [[10, 9, 8], [7, 6, 6], [4, 6, 6]]


def test_conv_pad_value_differs_from_input_zp():
    # pad_value 0 with izp 1: a padding tap reads 0 - 1 = -1; only the weight-1 tap (top left) can be padding
    sched = conv_case((1, 3, 3, 1), W_DIAG, [10], (3, 3), pad=[1, 0, 1, 0], input_zp=1, pad_value=0)
    assert reference(sched, X3)[0, :, :, 0].tolist() == [[9, 8, 7], [6, 6, 6], [3, 6, 6]]


def test_conv_stride_dilation_broadcast_bias():
    # one row [1..5], taps (1, 2) at dilation 2, stride 2: out[ox] = x[2ox] + 2 x[2ox+2] - 1
    x = np.arange(1, 6, dtype=np.int8).reshape(1, 1, 5, 1)
    sched = conv_case((1, 1, 5, 1), np.array([1, 2]).reshape(1, 1, 2, 1), [-1], (1, 2), stride=[1, 2],
                      dilation=[1, 2])
    assert reference(sched, x).reshape(-1).tolist() == [1 + 6 - 1, 3 + 10 - 1]


def test_conv_extreme_zero_points():
    # izp -128, wzp 127: (127 + 128) * (-128 - 127) per tap, two taps
    x = np.full((1, 1, 1, 2), 127, np.int8)
    sched = conv_case((1, 1, 1, 2), np.full((1, 1, 1, 2), -128), [0], (1, 1), input_zp=-128, weight_zp=127)
    assert reference(sched, x).reshape(-1).tolist() == [2 * 255 * -255]


def test_conv_i16_i8_accumulates_in_i48():
    x = np.array([32767, -32768], np.int16).reshape(1, 1, 1, 2)
    sched = conv_case((1, 1, 1, 2), np.array([127, -128]).reshape(1, 1, 1, 2), [1 << 40], (1, 1), x_dtype="i16")
    assert reference(sched, x).reshape(-1).tolist() == [4161409 + 4194304 + 1099511627776]


def test_depthwise_channel_multiplier():
    # 2x2 input, 2 channels, M = 2, one output pixel; channel c*M+m
    x = np.array([[[1, 5], [2, 6]], [[3, 7], [4, 8]]], np.int8).reshape(1, 2, 2, 2)
    w = np.zeros((2, 2, 2, 2), np.int64)
    w[:, :, 0, 0] = 1  # 1 + 2 + 3 + 4
    w[0, 0, 0, 1] = 1  # x[0, 0, c0] = 1
    w[1, 1, 1, 0] = 1  # x[1, 1, c1] = 8
    w[:, :, 1, 1] = [[1, -1], [-1, 1]]  # 5 - 6 - 7 + 8
    sched = conv_case((1, 2, 2, 2), w, [100], (1, 1), op="DEPTHWISE_CONV2D")
    assert reference(sched, x).reshape(-1).tolist() == [110, 101, 108, 100]


def test_window_entirely_in_padding():
    # pad bottom 2 with a 1x1 kernel: the last two rows read only padding -> bias alone
    sched = conv_case((1, 1, 2, 1), np.array([[[[3]]]]), [7], (3, 2), pad=[0, 2, 0, 0])
    out = reference(sched, np.array([1, 2], np.int8).reshape(1, 1, 2, 1))
    assert out[0, :, :, 0].tolist() == [[10, 13], [7, 7], [7, 7]]


# ---- ERROR_IF and plan-time checks ----

W1 = np.ones((2, 3, 3, 4), np.int64)


@pytest.mark.parametrize("bad", [
    dict(out_hw=(3, 3), stride=[2, 2]),  # (6 - 1 - 2) / 2 is not exact
    dict(out_hw=(4, 4), x_dtype="i16", input_zp=3),  # zero point only for i8 input
    dict(out_hw=(4, 4), w_dtype="i4", weight_zp=1),  # zero point only for i8 weights
    dict(out_hw=(4, 4), input_zp=128),  # outside i8
    dict(out_hw=(4, 4), acc_type="i48"),  # i8 x i8 accumulates in i32
    dict(out_hw=(4, 4), x_dtype="i16", w_dtype="i4", acc_type="i48"),  # unsupported type pair
    dict(out_hw=(4, 4), pad=[0, 0, -1, 1]),
    dict(out_hw=(4, 4), stride=[0, 1]),
    dict(out_hw=(4, 4), dilation=[1, 0]),
    dict(out_hw=(4, 4), pad_value=200),
    dict(out_hw=(4, 4), bias=[1, 2, 3]),  # neither [OC] nor [1]
    dict(out_hw=(4, 4), x=(1, 6, 6, 3)),  # channel mismatch
    dict(out_hw=(5, 5)),  # output shape differs from the inferred one
])
def test_conv_error_if(bad):
    args = {**dict(x=(1, 6, 6, 4), w=W1, bias=[0, 0]), **bad}
    with pytest.raises(GraphError):
        prepare(conv_case(**args))


def test_conv_i8_bias_must_be_i32():
    sched = step_schedule("CONV2D", [Var((1, 1, 1, 1), "i8"), Const(np.ones((1, 1, 1, 1)), "i8"),
                                     Const(np.zeros(1), "i48")], [((1, 1, 1, 1), "i32")],
                          pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0, acc_type="i32")
    with pytest.raises(GraphError, match="bias type"):
        prepare(sched)


@pytest.mark.parametrize("k, bias, overflows", [(33025, 0, False), (33026, 0, True), (33025, -40000, True)])
def test_conv_i32_overflow_at_33026_taps(k, bias, overflows):
    # docs/semantics.md §11.10: 255 * 255 per term; 33025 terms still fit int32, 33026 do not, nor 33025 plus a bias:
    # then the step is widened (an int64 accumulator; tests/test_widening.py runs such steps)
    sched = prepare(conv_case((1, 1, 1, k), np.full((1, 1, 1, k), -128), [bias], (1, 1), input_zp=-128,
                              weight_zp=127))
    step = sched.steps[0]
    assert step.acc_bound == (bias - k * 255 * 255, bias)
    assert (step.widened is not None) == overflows
    if overflows:
        assert "CONV2D" in step.widened.reason and "overflow" in step.widened.reason
        assert sched.buffers[step.outputs[0]].value_range == (-(1 << 31), bias)


def test_accumulator_bound_uses_weight_values_and_pad_value():
    # weights (2, -1) on taps, x in [-3, 5], izp 1 -> x - izp in [-4, 4]; pad_value -10 -> -11 also possible
    w = np.array([2, -1]).reshape(1, 1, 2, 1)
    sched = conv_case((1, 1, 2, 1), w, [100], (1, 2), pad=[0, 0, 0, 1], input_zp=1, pad_value=-10, lo=-3, hi=5)
    prepare(sched)
    # tap terms: 2 * [-11, 4] = [-22, 8]; -1 * [-11, 4] = [-4, 11]
    assert sched.steps[0].acc_bound == (100 - 26, 100 + 19)
    assert sched.buffers["out0"].value_range == (74, 119)


# ---- generated C == reference ----

@st.composite
def axis(draw, max_in=9):
    """(in, out, kernel, stride, dilation, pad_lo, pad_hi) with an exact output size."""
    k, s, d = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    span = (k - 1) * d + 1
    lo, hi = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    outs = [o for o in range(1, 10) if 1 <= (o - 1) * s + span - lo - hi <= max_in]
    if not outs:
        lo = hi = 0
        d = 1
        span = k
        outs = [o for o in range(1, 10) if (o - 1) * s + span <= max_in]
    o = draw(st.sampled_from(outs[:4]))
    return (o - 1) * s + span - lo - hi, o, k, s, d, lo, hi


@st.composite
def conv_params(draw, op):
    types = draw(st.sampled_from([("i8", "i8"), ("i8", "i4"), ("i16", "i8")]))
    (ih, oh, kh, sy, dy, pt, pb), (iw, ow, kw, sx, dx, pl, pr) = draw(axis()), draw(axis())
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 8))
    m = draw(st.integers(1, 3))
    oc = draw(st.integers(1, 8)) if op == "CONV2D" else c * m
    x_dtype, w_dtype = types
    izp = draw(st.sampled_from([0, -128, 127]) | st.integers(-128, 127)) if x_dtype == "i8" else 0
    wzp = draw(st.sampled_from([0, 0, 5, -128])) if w_dtype == "i8" else 0
    x_min, x_max = (-128, 127) if x_dtype == "i8" else (-32768, 32767)
    pad_value = draw(st.none() | st.integers(x_min, x_max))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w_lo, w_hi = (-8, 7) if w_dtype == "i4" else (-128, 127)
    w_shape = (oc, kh, kw, c) if op == "CONV2D" else (kh, kw, c, m)
    w = rng.integers(w_lo, w_hi, w_shape, endpoint=True)
    b_max = 1 << (20 if x_dtype == "i8" else 40)
    bias = rng.integers(-b_max, b_max, draw(st.sampled_from([oc, 1])))
    attrs = dict(pad=[pt, pb, pl, pr], stride=[sy, sx], dilation=[dy, dx], input_zp=izp, weight_zp=wzp)
    if pad_value is not None:
        attrs["pad_value"] = pad_value
    return conv_case((n, ih, iw, c), w, bias, (oh, ow), op=op, x_dtype=x_dtype, w_dtype=w_dtype, **attrs)


@given(sched=conv_params("CONV2D"))
def test_conv2d_c_matches_reference(sched):
    assert_bit_exact(sched, samples=2)


@given(sched=conv_params("DEPTHWISE_CONV2D"))
def test_depthwise_c_matches_reference(sched):
    assert_bit_exact(sched, samples=2)


@given(zp=st.integers(-128, 127), data=st.data())
def test_pad_value_folds_input_zp_into_bias(zp, data):
    # izp = 0, pad_value = z, bias' = bias - z * sum(w) equals TOSA with izp = z (the planner's fold)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    w = rng.integers(-128, 127, (3, 3, 2, 2), endpoint=True)
    bias = rng.integers(-1000, 1000, 3)
    x = rng.integers(-128, 127, (1, 4, 5, 2), endpoint=True).astype(np.int8)
    geom = dict(pad=[1, 2, 0, 1], stride=[2, 1], dilation=[1, 2])
    tosa = conv_case((1, 4, 5, 2), w, bias, (3, 4), input_zp=zp, **geom)
    folded = conv_case((1, 4, 5, 2), w, bias - zp * w.sum(axis=(1, 2, 3)), (3, 4), pad_value=zp, **geom)
    assert np.array_equal(reference(tosa, x), reference(folded, x))
    assert_bit_exact(folded, inputs=[[x]])


@pytest.mark.parametrize("sched", [
    conv_case((2, 5, 6, 3), np.arange(-36, 36).reshape(4, 2, 3, 3) % 16 - 8, np.arange(4), (3, 2), w_dtype="i4",
              pad=[1, 0, 1, 0], stride=[2, 2], dilation=[1, 2], input_zp=-128, pad_value=5),
    conv_case((1, 7, 7, 3), np.arange(27).reshape(3, 3, 3, 1) - 13, [1 << 40], (4, 4), op="DEPTHWISE_CONV2D",
              x_dtype="i16", pad=[1, 1, 2, 0], stride=[2, 2], weight_zp=-3),
    conv_case((1, 5, 5, 8), np.arange(-128, 128).reshape(4, 4, 8, 2), np.arange(16), (3, 3),
              op="DEPTHWISE_CONV2D", pad=[1, 0, 0, 1], input_zp=-128, weight_zp=127),
], ids=["conv-i4-pad-value", "dw-i16-i48", "dw-m2-zp"])
def test_clang_sanitizers(sched):
    """clang with the target's -Werror flags, run as the harness under ASan/UBSan."""
    assert_clang_sanitized(sched)
