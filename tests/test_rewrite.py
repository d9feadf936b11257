"""Planner rewrites (qcodegen/plan/rewrite.py): the rewritten step computes the same integers as the original."""

import numpy as np
import pytest

from qcodegen import primitives
from qcodegen.plan.rewrite import depthwise_single_channel_as_conv
from qcodegen.testing import Const, Var, assert_bit_exact, step_schedule


def _depthwise(m: int, c: int, rng: np.random.Generator, **attrs):
    w = rng.integers(-128, 128, (3, 3, c, m))
    w[0, 0, 0, 0], w[2, 2, 0, -1] = -128, 127
    bias = Const(rng.integers(-5000, 5000, (c * m,)), "i32")
    return step_schedule("DEPTHWISE_CONV2D", [Var((2, 9, 8, c), "i8"), Const(w, "i8"), bias],
                         [((2, 5, 4, c * m), "i32")], pad=[1, 1, 1, 0], stride=[2, 2], dilation=[1, 1],
                         acc_type="i32", **attrs)


def _reference(sched, x):
    step = sched.steps[0]
    io = sched.io(step)
    args = [x] + [b.data for b in io.ins[1:]]
    return primitives.get(step.op).reference(io, args)[0]


@pytest.mark.parametrize(("izp", "wzp"), [(0, 0), (-128, 0), (5, 3)])
def test_single_channel_depthwise_becomes_conv(izp, wzp):
    rng = np.random.default_rng(abs(izp) + wzp)
    sched = _depthwise(8, 1, rng, input_zp=izp, weight_zp=wzp)
    x = rng.integers(-128, 128, (2, 9, 8, 1)).astype(np.int8)
    x[0, 0, 0, 0] = -128
    expected = _reference(sched, x)
    depthwise_single_channel_as_conv(sched)
    assert sched.steps[0].op == "CONV2D" and sched.buffers[sched.steps[0].inputs[1]].shape == (8, 3, 3, 1)
    np.testing.assert_array_equal(_reference(sched, x), expected)
    assert_bit_exact(sched, inputs=[[x]])


def test_other_depthwise_steps_are_kept():
    rng = np.random.default_rng(1)
    for m, c in ((1, 1), (2, 3)):
        sched = _depthwise(m, c, rng, input_zp=0, weight_zp=0)
        depthwise_single_channel_as_conv(sched)
        assert sched.steps[0].op == "DEPTHWISE_CONV2D"
