"""Widened steps (Step.widened, qcodegen/plan/ranges.py): where the input bounds do not prove a step's int32/i48
arithmetic in range, the planner computes it in int64 and saturates what it stores, instead of refusing the graph.
The C of widened steps equals the numpy reference on data TOSA defines (close to the int32 limits, partial sums
beyond them), saturates on data that breaks a TOSA REQUIRE (where the reference raises Unpredictable), stays
UBSan-clean there, and uses the portable kernels on every target; inspect and the notes list every widened step."""

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import generate, load_target
from qcodegen.fixedpoint import Unpredictable
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import Step
from qcodegen.plan.fuse import fuse_conv_rescale
from qcodegen.reference import run_reference
from qcodegen.report import inspect_dict, inspect_text
from qcodegen.testing import SANITIZE_FLAGS, Const, Var, assert_bit_exact, prepare, step_schedule
from qcodegen.verify import get_runner
from qcodegen.verify.runners import unavailable

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
CONV = dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0, acc_type="i32")


def run_c(schedule, inputs, target="generic", sanitize=False):
    """The generated C's outputs on `inputs` (no reference: the data may break a TOSA REQUIRE)."""
    tgt = load_target(target)
    if sanitize:
        tgt = dataclasses.replace(tgt, cc="clang")
    with tempfile.TemporaryDirectory(prefix="qc-wide-") as tmp:
        model = generate(schedule, Path(tmp), tgt, harness=True)
        runner = get_runner(tgt, "harness" if sanitize else None, SANITIZE_FLAGS if sanitize else ())
        return [o.tolist() for o in runner.run(model, inputs)[0]]


def add(a_range, b_range, n=4):
    return prepare(step_schedule("ADD", [Var((n,), "i32", *a_range), Var((n,), "i32", *b_range)], [((n,), "i32")]))


def test_add_widened_near_the_limits_and_saturated_beyond():
    sched = add((0, I32_MAX), (-1, 1))
    step = sched.steps[0]
    assert step.widened.bound == (-1, I32_MAX + 1) and sched.buffers["out0"].value_range == (-1, I32_MAX)
    a = np.array([I32_MAX - 1, I32_MAX, 0, 5], np.int32)
    b = np.array([1, -1, -1, 1], np.int32)
    assert_bit_exact(sched, inputs=[[a, b]])
    over = [np.array([I32_MAX, I32_MAX, 0, 0], np.int32), np.array([1, 0, 0, 0], np.int32)]
    with pytest.raises(Unpredictable):  # TOSA REQUIRE: the result leaves int32
        run_reference(sched, over)
    assert run_c(sched, over, sanitize=True) == [[I32_MAX, I32_MAX, 0, 0]]  # saturated, no undefined behaviour


def test_mul_with_shift_widened():
    sched = prepare(step_schedule("MUL", [Var((3,), "i32"), Var((3,), "i32")], [((3,), "i32")], shift=1))
    assert sched.steps[0].widened is not None
    assert_bit_exact(sched, inputs=[[np.array([1 << 16, -(1 << 16), 46341], np.int32),
                                     np.array([1 << 15, 1 << 16, 46341], np.int32)]])


def test_inspect_and_notes_list_widened_steps():
    sched = add((0, I32_MAX), (0, 1))
    step = inspect_dict(sched)["steps"][0]
    assert step["widened"] == {"reason": sched.steps[0].widened.reason, "bound": [0, I32_MAX + 1]}
    assert "can leave int32" in step["widened"]["reason"]
    assert any("widened 1 step(s) to int64" in note for note in sched.notes)
    assert "widened: step 0 (test ADD): int64, saturated: ADD: inputs in" in inspect_text(inspect_dict(sched))
    assert inspect_dict(add((0, 5), (0, 1)))["steps"][0]["widened"] is None


def conv_near_limit(bias, op="CONV2D", k=48):
    """A 1x1 convolution over k int8 channels, constant weights +-127 and a bias close to an int32 limit: the
    declared input range admits sums beyond int32 (widened), data with small sums does not."""
    w = np.where(np.arange(k) % 2, 127, -127)
    if op == "CONV2D":
        weights, out = w.reshape(1, 1, 1, k), (1, 2, 2, 1)
    else:
        weights, out = w.reshape(1, 1, k, 1), (1, 2, 2, k)
    return step_schedule(op, [Var((1, 2, 2, k), "i8"), Const(weights, "i8"), Const(np.array([bias]), "i32")],
                         [(out, "i32")], **CONV)


@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D"])
def test_widened_convolution_accumulates_in_int64(op):
    """CONV2D: products of +16129 on the first 24 channels, -16129 on the others: after the bias, the partial sums
    leave int32 in the C's order (bias first), the TOSA sum (bias added last) does not. DEPTHWISE: one tap per
    channel, results 16129 below the limit. The int64 accumulator gives TOSA's result, UBSan-clean."""
    sched = prepare(conv_near_limit(I32_MAX - 100, op))
    assert "accumulator could overflow" in sched.steps[0].widened.reason
    w = sched.buffers["in1"].data.reshape(-1)
    sign = np.where(np.arange(48) < 24, 1, -1) if op == "CONV2D" else -1
    x = np.broadcast_to(w * sign, (1, 2, 2, 48)).astype(np.int8)
    assert_bit_exact(sched, inputs=[[x]])
    want = I32_MAX - 100 if op == "CONV2D" else I32_MAX - 100 - 16129
    assert np.unique(run_c(sched, [x], sanitize=True)[0]).tolist() == [want]


@pytest.mark.parametrize("target", ["x86-avx2", "aarch64-dotprod", "cortex-m4"])
def test_widened_convolution_uses_the_portable_kernel(target):
    """A target's int32 dot-product kernels are not used for a widened step (they accumulate in int32)."""
    tgt = load_target(target)
    proven, widened = prepare(conv_near_limit(1000)), prepare(conv_near_limit(I32_MAX - 100))
    assert proven.steps[0].widened is None and widened.steps[0].widened is not None
    with tempfile.TemporaryDirectory() as tmp:
        step_c = {}
        for name, sched in (("proven", proven), ("widened", widened)):
            model = generate(sched, Path(tmp) / name, tgt)
            step_c[name] = (Path(tmp) / name / f"{model.name}.c").read_text().split(f"{model.name}_step0(")[1]
    assert "int64_t acc = " in step_c["widened"] and "qc_dot" not in step_c["widened"]
    assert "qc_" in step_c["proven"] and "int64_t acc" not in step_c["proven"]
    if unavailable(tgt) is None:
        x = np.full((1, 2, 2, 48), 3, np.int8)
        assert_bit_exact(widened, inputs=[[x]], target=target)


def test_widened_convolution_leaves_its_fused_group():
    sched = conv_near_limit(I32_MAX - 100)
    acc = sched.buffers["out0"]
    acc.kind = "temp"
    sched.buffers["y"] = dataclasses.replace(acc, name="y", dtype=dtype("i8"), kind="output")
    sched.outputs = ["y"]
    sched.steps.append(Step("RESCALE", ["out0"], ["y"], dict(multiplier=[1 << 30], shift=[40], input_zp=0,
                                                              output_zp=0, scale32=True, rounding="double_round")))
    fuse_conv_rescale(sched)
    assert sched.fused
    prepare(sched)
    assert not sched.fused and "1 fused group(s) containing them run unfused" in sched.notes[-1]
    x = np.full((1, 2, 2, 48), -7, np.int8)
    assert_bit_exact(sched, inputs=[[x]])


def test_widened_reductions():
    """MATMUL, TRANSPOSE_CONV2D, CONV3D, REDUCE_SUM: bounds beyond int32, data near the limits."""
    big = I32_MAX - 50
    matmul = prepare(step_schedule("MATMUL", [Var((1, 1, 40000), "i8"), Var((1, 40000, 1), "i8")],
                                   [((1, 1, 1), "i32")], a_zp=-128, b_zp=-128))
    a = np.full((1, 1, 40000), -1, np.int8)
    tconv = prepare(step_schedule("TRANSPOSE_CONV2D", [Var((1, 2, 2, 3), "i8"), Const(np.ones((1, 1, 1, 3)), "i8"),
                                                       Const(np.array([big]), "i32")], [((1, 2, 2, 1), "i32")],
                                  out_pad=[0, 0, 0, 0], stride=[1, 1], input_zp=0, weight_zp=0, acc_type="i32"))
    conv3d = prepare(step_schedule("CONV3D", [Var((1, 1, 2, 2, 3), "i8"), Const(np.ones((1, 1, 1, 1, 3)), "i8"),
                                              Const(np.array([big]), "i32")], [((1, 1, 2, 2, 1), "i32")],
                                   pad=[0] * 6, stride=[1, 1, 1], dilation=[1, 1, 1], input_zp=0, weight_zp=0,
                                   acc_type="i32"))
    rsum = prepare(step_schedule("REDUCE_SUM", [Var((2, 3), "i32")], [((2, 1), "i32")], axis=1))
    small = np.array([[[[16, -2, 5], [-128, 127, 0]], [[-100, 50, 66], [1, 1, 1]]]], np.int8)
    cases = [(matmul, [a, a.reshape(1, 40000, 1)]), (tconv, [small]), (conv3d, [small.reshape(1, 1, 2, 2, 3)]),
             (rsum, [np.array([[1 << 30, (1 << 30) - 1, -5], [I32_MIN, 1 << 30, 1 << 30]], np.int32)])]
    for sched, inputs in cases:
        assert sched.steps[0].widened is not None, sched.steps[0].op
        assert_bit_exact(sched, inputs=[inputs])


def test_widened_avg_pool_i16():
    """256 x 256 taps of i16 can sum beyond int32: an int64 sum, then the reciprocal scaling."""
    sched = prepare(step_schedule("AVG_POOL2D", [Var((1, 256, 256, 1), "i16")], [((1, 1, 1, 1), "i16")],
                                  kernel=[256, 256], stride=[1, 1], pad=[0, 0, 0, 0], input_zp=0, output_zp=0))
    assert sched.steps[0].widened is not None
    assert_bit_exact(sched, samples=2)
    full = np.full((1, 256, 256, 1), -32768, np.int16)  # the sum is -2^31 exactly: still int32
    assert_bit_exact(sched, inputs=[[full]])


def test_rescale_with_a_data_dependent_require():
    """Shift 30 admits |value| < 2^29 only: for a full-range i32 input that is decided on the data."""
    sched = prepare(step_schedule("RESCALE", [Var((3,), "i32")], [((3,), "i8")], multiplier=[1 << 30], shift=[30],
                                  input_zp=0, output_zp=-3, scale32=True, rounding="single_round"))
    assert "out of range for shift 30" in sched.steps[0].widened.reason
    assert sched.buffers["out0"].value_range == (-128, 127)
    assert_bit_exact(sched, inputs=[[np.array([(1 << 29) - 1, -(1 << 29), 100], np.int32)]])
    beyond = [np.array([1 << 29, I32_MIN, I32_MAX], np.int32)]
    with pytest.raises(Unpredictable):
        run_reference(sched, beyond)
    assert all(-128 <= v <= 127 for v in run_c(sched, beyond, sanitize=True)[0])
