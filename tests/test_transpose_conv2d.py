"""TRANSPOSE_CONV2D: the reference == values computed by hand from the TOSA pseudocode and == a naive scatter
loop, ERROR_IFs, accumulator bounds, and generated C == reference (hypothesis; clang with sanitizers)."""

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.codegen import generate, load_target
from qcodegen.errors import GraphError
from qcodegen.reference import run_reference
from qcodegen.testing import Const, Var, assert_bit_exact, prepare, step_schedule
from qcodegen.verify import verify_schedule
from qcodegen.verify.runners import HarnessRunner

ACC = {"i8": "i32", "i16": "i48"}


def tconv_case(x, w, bias, out_pad=(0, 0, 0, 0), stride=(1, 1), x_dtype="i8", w_dtype="i8", out=None, **attrs):
    """One step; x is a shape (random input), w [OC, KH, KW, IC] and bias are constants."""
    w = np.asarray(w)
    n, ih, iw, _ = x
    oc, kh, kw, _ = w.shape
    top, bottom, left, right = out_pad
    shape = out or (n, (ih - 1) * stride[0] + top + bottom + kh, (iw - 1) * stride[1] + left + right + kw, oc)
    acc = ACC[x_dtype]
    attrs = dict(dict(out_pad=list(out_pad), stride=list(stride), input_zp=0, weight_zp=0, acc_type=acc), **attrs)
    return step_schedule("TRANSPOSE_CONV2D", [Var(x, x_dtype), Const(w, w_dtype), Const(np.asarray(bias), acc)],
                         [(shape, acc)], **attrs)


def reference(sched, x):
    return run_reference(prepare(sched), [x])["out0"]


def naive(x, w, bias, out_pad, stride, izp=0, wzp=0):
    """Scatter every input pixel through the kernel (TOSA's loop order), out_pad shifting/cropping."""
    n, ih, iw, ic = x.shape
    oc, kh, kw, _ = w.shape
    top, bottom, left, right = out_pad
    oh, ow = (ih - 1) * stride[0] + top + bottom + kh, (iw - 1) * stride[1] + left + right + kw
    out = np.zeros((n, oh, ow, oc), np.int64) + np.asarray(bias, np.int64)
    for b, iy, ix, c, ky, kx, o in np.ndindex(n, ih, iw, ic, kh, kw, oc):
        oy, ox = iy * stride[0] + top + ky, ix * stride[1] + left + kx
        if 0 <= oy < oh and 0 <= ox < ow:
            out[b, oy, ox, o] += (int(x[b, iy, ix, c]) - izp) * (int(w[o, ky, kx, c]) - wzp)
    return out


# ---- hand-computed examples ----

def test_stride2_stamps_disjoint_blocks():
    # each input pixel writes x * w into its own 2x2 block; bias 5
    x = np.array([1, 2, 3, 4], np.int8).reshape(1, 2, 2, 1)
    w = np.array([1, 10, 100, -100]).reshape(1, 2, 2, 1)
    out = reference(tconv_case((1, 2, 2, 1), w, [5], stride=(2, 2)), x)[0, :, :, 0]
    assert out.tolist() == [[6, 15, 7, 25], [105, -95, 205, -195], [8, 35, 9, 45], [305, -295, 405, -395]]


def test_stride1_overlapping_taps_sum():
    # x = [1, 2], w = [3, 5]: out = [1*3, 1*5 + 2*3, 2*5]
    x = np.array([1, 2], np.int8).reshape(1, 1, 2, 1)
    out = reference(tconv_case((1, 1, 2, 1), np.array([3, 5]).reshape(1, 1, 2, 1), [0]), x)
    assert out.reshape(-1).tolist() == [3, 11, 10]


def test_out_pad_crops_and_extends():
    # top -1 drops the first row; right +2 adds two columns no tap reaches (bias only); zero points subtracted
    x = np.array([3, 4], np.int8).reshape(1, 2, 1, 1)  # x - izp = [2, 3]
    w = np.array([1, 2]).reshape(1, 2, 1, 1) + 1  # w - wzp = [1, 2]
    out = reference(tconv_case((1, 2, 1, 1), w, [100], out_pad=(-1, 0, 0, 2), stride=(2, 1), input_zp=1,
                               weight_zp=1), x)
    # rows before cropping: [2*1, 2*2, 3*1, 3*2] -> [4, 3, 6] (+100); columns: [v, 100, 100]
    assert out[0, :, :, 0].tolist() == [[104, 100, 100], [103, 100, 100], [106, 100, 100]]


def test_reference_equals_naive_scatter():
    rng = np.random.default_rng(7)
    for stride, out_pad in [((2, 3), (0, 0, 0, 0)), ((3, 1), (-2, 1, 2, -1)), ((1, 2), (1, -2, -1, 0))]:
        x = rng.integers(-128, 128, (2, 3, 4, 3)).astype(np.int8)
        w = rng.integers(-128, 128, (2, 3, 2, 3))
        bias = rng.integers(-99, 99, 2)
        sched = tconv_case(x.shape, w, bias, out_pad=out_pad, stride=stride, input_zp=-7, weight_zp=3)
        assert np.array_equal(reference(sched, x), naive(x, w, bias, out_pad, stride, -7, 3))


# ---- ERROR_IF and plan-time checks ----

W = np.ones((2, 3, 3, 4), np.int64)


@pytest.mark.parametrize("bad", [
    dict(out_pad=(-3, 0, 0, 0)),  # out_pad must be > -KH
    dict(out_pad=(0, 0, 0, -3)),
    dict(stride=(0, 1)),
    dict(x_dtype="i16", input_zp=2),  # zero point only for i8
    dict(w_dtype="i4", weight_zp=1),
    dict(input_zp=-129),
    dict(acc_type="i48"),  # i8 x i8 accumulates in i32
    dict(bias=[1, 2, 3]),  # neither [OC] nor [1]
    dict(x=(1, 4, 4, 3)),  # channel mismatch
    dict(out=(1, 7, 6, 2)),  # output shape differs from the inferred one
])
def test_error_if(bad):
    args = {**dict(x=(1, 4, 4, 4), w=W, bias=[0, 0]), **bad}
    with pytest.raises(GraphError):
        prepare(tconv_case(**args))


def test_accumulator_bound_per_stride_phase():
    # stride 2, kernel 2: every output pixel gets exactly one tap, 3 * x or -2 * x with x in [-128, 127]
    w = np.array([3, -2]).reshape(1, 1, 2, 1)
    sched = prepare(tconv_case((1, 1, 4, 1), w, [10], stride=(1, 2)))
    assert sched.steps[0].acc_bound == (10 - 3 * 128, 10 + 3 * 127)
    assert sched.steps[0].widened is None
    wide = prepare(tconv_case((1, 1, 4, 1), w, [(1 << 31) - 100], stride=(1, 2))).steps[0]
    assert "TRANSPOSE_CONV2D" in wide.widened.reason and "overflow" in wide.widened.reason  # an int64 accumulator


# ---- generated C == reference ----

@st.composite
def tconv_params(draw):
    x_dtype, w_dtype = draw(st.sampled_from([("i8", "i8"), ("i8", "i4"), ("i16", "i8")]))
    n, ih, iw, ic, oc = (draw(st.integers(1, k)) for k in (2, 4, 4, 5, 4))
    kh, kw, sy, sx = (draw(st.integers(1, 4)) for _ in range(4))
    out_pad = tuple(draw(st.integers(-k + 1, 2)) for k in (kh, kh, kw, kw))
    if (ih - 1) * sy + out_pad[0] + out_pad[1] + kh < 1 or (iw - 1) * sx + out_pad[2] + out_pad[3] + kw < 1:
        out_pad = (0, 0, 0, 0)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w_lo, w_hi = (-8, 7) if w_dtype == "i4" else (-128, 127)
    w = rng.integers(w_lo, w_hi, (oc, kh, kw, ic), endpoint=True)
    b_max = 1 << (20 if x_dtype == "i8" else 40)
    bias = rng.integers(-b_max, b_max, draw(st.sampled_from([oc, 1])))
    izp = draw(st.integers(-128, 127)) if x_dtype == "i8" else 0
    wzp = draw(st.sampled_from([0, 3, -128])) if w_dtype == "i8" else 0
    return tconv_case((n, ih, iw, ic), w, bias, out_pad=out_pad, stride=(sy, sx), x_dtype=x_dtype, w_dtype=w_dtype,
                      input_zp=izp, weight_zp=wzp)


@given(sched=tconv_params())
def test_c_matches_reference(sched):
    assert_bit_exact(sched, samples=2)


def test_clang_sanitizers():
    sched = tconv_case((1, 3, 4, 2), np.arange(-12, 12).reshape(2, 2, 3, 2) % 16 - 8, [1, -1], out_pad=(-1, 2, 1, -2),
                       stride=(3, 2), w_dtype="i4", input_zp=-128)
    target = dataclasses.replace(load_target("generic"), cc="clang")
    runner = HarnessRunner(target, ("-fsanitize=address,undefined", "-fno-sanitize-recover=all"))
    prepare(sched)
    with tempfile.TemporaryDirectory() as tmp:
        model = generate(sched, Path(tmp), target, harness=True)
        assert verify_schedule(sched, model, runner, samples=2).bit_exact
