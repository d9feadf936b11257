"""Planner rewrites (qcodegen/plan/rewrite.py): the rewritten step computes the same integers as the original."""

import numpy as np
import pytest

from qcodegen import primitives
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import CONST, INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.plan.rewrite import depthwise_single_channel_as_conv, rescale_before_reshape
from qcodegen.reference import run_reference
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


def _dense_rescale(view: tuple[int, ...], scales: list[float], axis: int) -> Schedule:
    """The ONNX Gemm lowering: CONV2D [3, 1, 1, 6] accumulator -> RESHAPE `view` -> RESCALE_F32 (`scales` along
    `axis`) -> int8 output."""
    rng = np.random.default_rng(len(scales) + axis)
    sched = Schedule("dense")
    for name, shape, dt, kind, values in [
            ("x", (3, 1, 1, 10), "i8", INPUT, None), ("w", (6, 1, 1, 10), "i8", CONST, rng.integers(-127, 128,
                                                                                                   (6, 1, 1, 10))),
            ("b", (6,), "i32", CONST, rng.integers(-2000, 2000, 6)), ("acc", (3, 1, 1, 6), "i32", TEMP, None),
            ("view", view, "i32", TEMP, None), ("y", view, "i8", OUTPUT, None)]:
        sched.add_buffer(Buffer(name, shape, dtype(dt), kind, None if values is None else values.astype(
            dtype(dt).numpy)))
    sched.inputs, sched.outputs = ["x"], ["y"]
    sched.steps = [Step("CONV2D", ["x", "w", "b"], ["acc"], dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1],
                                                                input_zp=0, weight_zp=0, acc_type="i32")),
                   Step("RESHAPE", ["acc"], ["view"], dict(shape=list(view))),
                   Step("RESCALE_F32", ["view"], ["y"], dict(scale=scales, axis=axis, output_zp=-3))]
    return sched


@pytest.mark.parametrize(("view", "scales", "axis", "moved_axis"), [
    ((3, 6), [0.0031, 0.0042, 0.0017, 0.0029, 0.0051, 0.0023], -1, 3),
    ((1, 3, 6, 1), [0.0031, 0.0042, 0.0017, 0.0029, 0.0051, 0.0023], 2, 3),
    ((2, 9), [0.0037], -1, None),  # per tensor: any RESHAPE
    ((6, 3), [0.0031, 0.0042, 0.0017], -1, -1)])  # channels of 3 elements after 3 rows of 6: kept
def test_rescale_moves_before_the_reshape(view, scales, axis, moved_axis):
    """The RESCALE_F32 reads the convolution's accumulator, its channel axis mapped, a RESHAPE after it; the
    reference gives the same integers (20 random inputs)."""
    sched = _dense_rescale(view, scales, axis)
    xs = [np.random.default_rng(seed).integers(-128, 128, (3, 1, 1, 10)).astype(np.int8) for seed in range(20)]
    expected = [run_reference(sched, [x])["y"] for x in xs]
    rescale_before_reshape(sched)
    ops = [s.op for s in sched.steps]
    if moved_axis == -1:
        assert ops == ["CONV2D", "RESHAPE", "RESCALE_F32"]
        return
    assert ops == ["CONV2D", "RESCALE_F32", "RESHAPE"] and sched.steps[1].inputs == ["acc"]
    assert sched.steps[1].attrs["axis"] == (axis if moved_axis is None else moved_axis)
    assert sched.buffers[sched.steps[1].outputs[0]].shape == (3, 1, 1, 6) and sched.steps[2].outputs == ["y"]
    for x, y in zip(xs, expected, strict=True):
        np.testing.assert_array_equal(run_reference(sched, [x])["y"], y)
