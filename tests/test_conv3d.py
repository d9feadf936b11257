"""CONV3D (TOSA 1.0): hand-computed examples (zero points, depth padding), equality with CONV2D when the depth is
1, ERROR_IFs, accumulator bounds, and generated C == numpy reference over random geometries."""

import dataclasses
import shutil

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.codegen import load_target
from qcodegen.errors import GraphError
from qcodegen.fixedpoint import Unpredictable
from qcodegen.reference import run_reference
from qcodegen.testing import Const, Var, assert_bit_exact, prepare, step_schedule


def conv3d(x_shape, w, bias, out_shape, dt="i8", wdt="i8", acc="i32", **attrs):
    attrs = {"pad": [0] * 6, "stride": [1, 1, 1], "dilation": [1, 1, 1], "input_zp": 0, "weight_zp": 0,
             "acc_type": acc, **attrs}
    return step_schedule("CONV3D", [Var(x_shape, dt), Const(np.asarray(w), wdt), Const(np.asarray(bias), acc)],
                         [(out_shape, acc)], **attrs)


def ref(sched, x):
    return run_reference(prepare(sched), [np.asarray(x, sched.buffers["in0"].dtype.numpy)])["out0"]


def test_examples():
    x = np.array([1, 2]).reshape(1, 2, 1, 1, 1)
    w = np.array([3, 4]).reshape(1, 2, 1, 1, 1)
    assert ref(conv3d(x.shape, w, [5], (1, 1, 1, 1, 1)), x).reshape(-1).tolist() == [5 + 1 * 3 + 2 * 4]
    # zero points: (x - 1) * (w + 1)
    sched = conv3d(x.shape, w, [5], (1, 1, 1, 1, 1), input_zp=1, weight_zp=-1)
    assert ref(sched, x).reshape(-1).tolist() == [5 + 0 * 4 + 1 * 5]
    # depth padding before: the first output sees only x[0] (with w[1]); padding taps contribute nothing
    sched = conv3d(x.shape, w, [5], (1, 2, 1, 1, 1), pad=[1, 0, 0, 0, 0, 0], input_zp=7)
    assert ref(sched, x).reshape(-1).tolist() == [5 + (1 - 7) * 4, 5 + (1 - 7) * 3 + (2 - 7) * 4]


def test_equals_conv2d_for_depth_one():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 127, size=(1, 1, 5, 4, 3), endpoint=True)
    w = rng.integers(-128, 127, size=(2, 1, 3, 2, 3), endpoint=True)
    bias = rng.integers(-1000, 1000, size=2)
    attrs = dict(stride=[1, 2, 1], dilation=[1, 1, 2], input_zp=-3, weight_zp=4)
    out3 = ref(conv3d(x.shape, w, bias, (1, 1, 3, 4, 2), pad=[0, 0, 1, 1, 1, 1], **attrs), x)
    sched2 = step_schedule("CONV2D", [Var((1, 5, 4, 3), "i8"), Const(w[:, 0], "i8"), Const(bias, "i32")],
                           [((1, 3, 4, 2), "i32")], pad=[1, 1, 1, 1], stride=[2, 1], dilation=[1, 2], input_zp=-3,
                           weight_zp=4, acc_type="i32")
    out2 = run_reference(prepare(sched2), [x[:, 0].astype(np.int8)])["out0"]
    assert np.array_equal(out3[:, 0], out2)


@pytest.mark.parametrize("attrs, message", [
    ({"pad": [0, 0, 0, 0, 0, -1]}, "pad"),
    ({"stride": [0, 1, 1]}, "stride"),
    ({"dilation": [1, 0, 1]}, "dilation"),
    ({"stride": [2, 1, 1]}, "not divisible"),
    ({"input_zp": 3, "dt": "i16", "wdt": "i8", "acc": "i48"}, "zero point must be 0"),
    ({"acc": "i48"}, "acc_type must be i32"),
])
def test_error_if(attrs, message):
    kw = {k: attrs.pop(k) for k in ("dt", "wdt", "acc") if k in attrs}
    sched = conv3d((1, 2, 2, 2, 1), np.ones((1, 1, 1, 1, 1)), [0], (1, 2, 2, 2, 1), **kw, **attrs)
    with pytest.raises(GraphError, match=message):
        prepare(sched)


def test_accumulator_overflow_widens():
    k = 33026 // 2 + 1  # (-128 - 127)^2 * taps > 2^31 - 1 once taps >= 33026 (docs/semantics.md §11.10)
    sched = conv3d((1, 2, 1, 1, k), np.full((1, 2, 1, 1, k), -128), [0], (1, 1, 1, 1, 1), input_zp=127,
                   weight_zp=127)
    assert "could overflow" in prepare(sched).steps[0].widened.reason  # an int64 accumulator


def test_overflow_on_the_data_is_unpredictable():
    """TOSA REQUIRE: adding the bias must not leave int32 (the reference model wraps instead)."""
    sched = conv3d((1, 1, 1, 1, 1), [[[[[1]]]]], [(1 << 31) - 1], (1, 1, 1, 1, 1))  # (the planner refuses it)
    with pytest.raises(Unpredictable, match="adding the bias"):
        run_reference(sched, [np.array([1], np.int8).reshape(1, 1, 1, 1, 1)])


@st.composite
def geometries(draw):
    dt, wdt, acc = draw(st.sampled_from([("i8", "i8", "i32"), ("i8", "i4", "i32"), ("i16", "i8", "i48")]))
    kernel = [draw(st.integers(1, 2)) for _ in range(3)]
    stride = [draw(st.integers(1, 2)) for _ in range(3)]
    dilation = [draw(st.integers(1, 2)) for _ in range(3)]
    pad = [draw(st.integers(0, 1)) for _ in range(6)]
    size, out = [], []
    for k in range(3):
        span = (kernel[k] - 1) * dilation[k]
        o = draw(st.integers(1, 3))
        i = (o - 1) * stride[k] + span + 1 - pad[2 * k] - pad[2 * k + 1]
        if i < 1:
            pad[2 * k] = pad[2 * k + 1] = 0
            i = (o - 1) * stride[k] + span + 1
        size.append(i)
        out.append(o)
    ic, oc = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    lo, hi = (-8, 7) if wdt == "i4" else (-128, 127)
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    w = rng.integers(lo, hi, size=(oc, *kernel, ic), endpoint=True)
    bias = rng.integers(-5000, 5000, size=draw(st.sampled_from([1, oc])))
    zps = dict(input_zp=draw(st.integers(-128, 127)), weight_zp=draw(st.integers(-128, 127))) if wdt == "i8" \
        and dt == "i8" else {}
    return conv3d((1, *size, ic), w, bias, (1, *out, oc), dt, wdt, acc, pad=pad, stride=stride,
                  dilation=dilation, **zps)


@given(geometries())
def test_c_matches_reference(sched):
    assert_bit_exact(sched, samples=2)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
def test_clang_sanitizers():
    target = dataclasses.replace(load_target("generic"), cc="clang")
    w = np.arange(-12, 12).reshape(2, 2, 2, 1, 3)
    sched = conv3d((1, 3, 3, 2, 3), w, [7, -7], (1, 2, 3, 4, 2), pad=[0, 1, 1, 0, 1, 1], stride=[2, 1, 1],
                   input_zp=-128, weight_zp=3)
    assert_bit_exact(sched, samples=2, runner="harness", target=target,
                     extra_cflags=("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"))
