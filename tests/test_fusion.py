"""Fusion passes (qcodegen/plan/fuse.py, qcodegen/primitives/fused.py): a fused group's C == the numpy reference
of its unfused steps, bit for bit; fused intermediates get no arena space; groups are only formed where legal.
Also the generic convolution kernels' paths the one-step tests do not reach (windows larger than the gather
buffer)."""

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen import primitives
from qcodegen.codegen import generate, load_target
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import CONST, INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.plan.fuse import execution_order, fuse_conv_rescale, fuse_elementwise
from qcodegen.reference import run_reference
from qcodegen.testing import assert_bit_exact, prepare, verify_planned
from qcodegen.verify import verify_schedule
from qcodegen.verify.runners import HarnessRunner


def _schedule(name: str, inputs: dict, consts: dict, temps: dict, outputs: dict, steps: list[Step]) -> Schedule:
    """Buffers given as name -> (shape, dtype) (consts: name -> (array, dtype))."""
    sched = Schedule(name)
    for n, (shape, dt) in inputs.items():
        sched.add_buffer(Buffer(n, shape, dtype(dt), INPUT))
        sched.inputs.append(n)
    for n, (values, dt) in consts.items():
        values = np.asarray(values)
        sched.add_buffer(Buffer(n, values.shape, dtype(dt), CONST, values.astype(dtype(dt).numpy)))
    for kind, group in ((TEMP, temps), (OUTPUT, outputs)):
        for n, (shape, dt) in group.items():
            sched.add_buffer(Buffer(n, shape, dtype(dt), kind))
    sched.outputs = list(outputs)
    sched.steps = steps
    return sched


def conv_rescale(x_shape, w, bias, out_shape, op, multiplier, shift, rounding, out_zp=0, out_range=None,
                 **conv_attrs):
    attrs = dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0, acc_type="i32")
    attrs.update(conv_attrs)
    rescale = dict(multiplier=list(multiplier), shift=list(shift), input_zp=0, output_zp=out_zp, scale32=True,
                   rounding=rounding, per_channel=len(multiplier) > 1)
    if out_range:
        rescale.update(out_min=out_range[0], out_max=out_range[1])
    return _schedule(
        "cr", {"x": (x_shape, "i8")}, {"w": (w, "i8"), "b": (bias, "i32")}, {"acc": (out_shape, "i32")},
        {"y": (out_shape, "i8")},
        [Step(op, ["x", "w", "b"], ["acc"], attrs, "conv"), Step("RESCALE", ["acc"], ["y"], rescale, "rescale")])


def fused(sched: Schedule) -> Schedule:
    fuse_conv_rescale(sched)
    fuse_elementwise(sched)
    return prepare(sched)


@st.composite
def conv_rescale_cases(draw):
    op = draw(st.sampled_from(["CONV2D", "DEPTHWISE_CONV2D"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n, c, m = draw(st.integers(1, 2)), draw(st.sampled_from([1, 3, 8, 16, 20])), draw(st.sampled_from([1, 1, 2]))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    sy, sx, dy, dx = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2)), 1
    pt, pb, pl, pr = (draw(st.integers(0, k - 1)) for k in (kh, kh, kw, kw))
    oh, ow = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    ih, iw = (oh - 1) * sy + (kh - 1) * dy + 1 - pt - pb, (ow - 1) * sx + (kw - 1) * dx + 1 - pl - pr
    if ih < 1 or iw < 1:
        ih, iw, pt, pb, pl, pr = ih + pt + pb, iw + pl + pr, 0, 0, 0, 0
    oc = draw(st.sampled_from([1, 5, 16])) if op == "CONV2D" else c * m
    w_shape = (oc, kh, kw, c) if op == "CONV2D" else (kh, kw, c, m)
    w = rng.integers(-128, 127, w_shape, endpoint=True)
    bias = rng.integers(-(1 << 20), 1 << 20, draw(st.sampled_from([oc, 1])))
    channels = draw(st.sampled_from([oc, 1]))
    rounding = draw(st.sampled_from(["double_round", "single_round"]))
    multiplier = rng.integers(1 << 30, (1 << 31) - 1, channels)
    shift = rng.integers(draw(st.sampled_from([28, 32])), 46, channels)
    izp = draw(st.sampled_from([0, -128, 17]))
    pad_value = draw(st.sampled_from([None, -128, 3]))
    extra = {} if pad_value is None else {"pad_value": pad_value}
    out_range = draw(st.sampled_from([None, (-128, 127), (-100, 6)]))
    return conv_rescale((n, ih, iw, c), w, bias, (n, oh, ow, oc), op, multiplier, shift, rounding,
                        out_zp=int(rng.integers(-128, 128)), out_range=out_range, pad=[pt, pb, pl, pr],
                        stride=[sy, sx], dilation=[dy, dx], input_zp=izp, **extra)


@given(sched=conv_rescale_cases())
def test_fused_conv_matches_unfused_reference(sched):
    fused(sched)
    assert [s.op for _, s in execution_order(sched)] == ["FUSED_CONV"]
    assert sched.buffers["acc"].offset is None  # the accumulator never reaches memory
    result = verify_planned(sched, samples=2)
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"


def add_chain(shape=(2, 5, 8), a_zp=-3, b_zp=10):
    """TFLite ADD as the lowering emits it: (x - zp) << 20, double-round rescale each, ADD, rescale + clamp."""
    def rs(src, dst, m, s, izp=0, ozp=0, rounding="double_round", **extra):
        attrs = dict(multiplier=[m], shift=[s], input_zp=izp, output_zp=ozp, scale32=True, rounding=rounding,
                     per_channel=False)
        return Step("RESCALE", [src], [dst], dict(attrs, **extra), "add")
    temps = {n: (shape, "i32") for n in ("a1", "a2", "b1", "b2", "s")}
    steps = [rs("a", "a1", 1 << 30, 10, izp=a_zp, rounding="single_round"), rs("a1", "a2", 1559125387, 38),
             rs("b", "b1", 1 << 30, 10, izp=b_zp, rounding="single_round"), rs("b1", "b2", 1 << 30, 31),
             Step("ADD", ["a2", "b2"], ["s"], {}, "add"),
             rs("s", "y", 2147345509, 50, ozp=-128, out_min=-128, out_max=100)]
    return _schedule("add", {"a": (shape, "i8"), "b": (shape, "i8")}, {}, temps, {"y": (shape, "i8")}, steps)


def test_elementwise_chain_fuses_into_one_loop():
    unfused = prepare(add_chain())
    sched = fused(add_chain())
    assert [s.op for _, s in execution_order(sched)] == ["FUSED_ELEMENTWISE"]
    assert sched.arena_size == 0 and unfused.arena_size > 0  # no i32 temporaries at all
    assert_bit_exact(sched, samples=3)


def test_shared_intermediate_stays_in_memory():
    # b1 also feeds a second output: it must be computed and stored, so only a2's chain and the ADD fuse
    sched = add_chain()
    sched.add_buffer(Buffer("z", (2, 5, 8), dtype("i8"), OUTPUT))
    sched.outputs.append("z")
    sched.steps.append(Step("RESCALE", ["b1"], ["z"], dict(multiplier=[1 << 30], shift=[40], input_zp=0,
                                                            output_zp=0, scale32=True, rounding="single_round")))
    fused(sched)
    order = execution_order(sched)
    fused_steps = [s for _, s in order if s.op == "FUSED_ELEMENTWISE"]
    assert len(fused_steps) == 1 and "b1" in fused_steps[0].inputs
    assert sched.buffers["b1"].offset is not None and sched.buffers["a1"].offset is None
    assert_bit_exact(sched, samples=2)


def test_half_even_and_unsigned_rescales_are_not_fused():
    # half-even (StableHLO) roundings stay visible to the golden checks' tie tracing; unsigned RESCALEs stay alone
    sched = conv_rescale((1, 3, 3, 2), np.ones((2, 1, 1, 2)), [0, 0], (1, 3, 3, 2), "CONV2D", [1 << 30] * 2,
                         [33, 34], "half_even")
    unsigned = _schedule("u", {"x": ((4, 8), "i8")}, {}, {"t": ((4, 8), "i8")}, {"y": ((4, 8), "i8")}, [
        Step("RESCALE", ["x"], ["t"], dict(multiplier=[1 << 30], shift=[31], input_zp=128, output_zp=-5,
                                           scale32=True, rounding="single_round", input_unsigned=True)),
        Step("CLAMP", ["t"], ["y"], dict(min_val=-100, max_val=100))])
    for s in (sched, unsigned):
        fused(s)
        assert not s.fused
        assert_bit_exact(s, samples=2)


def test_conv_whose_accumulator_is_an_output_is_not_fused():
    sched = conv_rescale((1, 3, 3, 2), np.ones((2, 1, 1, 2)), [0, 0], (1, 3, 3, 2), "CONV2D", [1 << 30], [33],
                         "double_round")
    sched.buffers["acc"].kind = OUTPUT
    sched.outputs.append("acc")
    fused(sched)
    assert not sched.fused
    assert_bit_exact(sched, samples=2)


def test_fused_step_reference_is_its_parts():
    sched = fused(add_chain())
    (k, step), = execution_order(sched)
    rng = np.random.default_rng(3)
    x = [rng.integers(-128, 128, (2, 5, 8)).astype(np.int8) for _ in range(2)]
    got = primitives.get(step.op).reference(sched.io(step), x)[0]
    assert np.array_equal(got, run_reference(sched, x)["y"])
    assert primitives.get(step.op).value_ranges(sched.io(step), [(-128, 127)] * 2).outputs[0] == \
        sched.buffers["y"].value_range


@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D"])
def test_large_window_is_summed_tap_by_tap(op):
    # K = 2 * 2 * 1100 > the 4096-element gather buffer: the tap-by-tap path, with padding read as pad_value
    rng = np.random.default_rng(5)
    c = 1100
    w = rng.integers(-128, 128, (3, 2, 2, c) if op == "CONV2D" else (2, 2, c, 1))
    oc = 3 if op == "CONV2D" else c
    sched = conv_rescale((1, 2, 3, c), w, rng.integers(-1000, 1000, oc), (1, 2, 3, oc), op, [1 << 30], [40],
                         "double_round", pad=[1, 0, 0, 1], input_zp=-7, pad_value=12)
    assert_bit_exact(fused(sched), samples=2)


def test_fused_conv_clang_sanitizers():
    """The fused templates with clang's -Werror flags, run as the harness under ASan/UBSan."""
    rng = np.random.default_rng(9)
    sched = fused(conv_rescale((1, 5, 6, 3), rng.integers(-128, 128, (3, 3, 3, 2)), rng.integers(-99, 99, 6),
                               (1, 3, 3, 6), "DEPTHWISE_CONV2D", rng.integers(1 << 30, 1 << 31, 6),
                               rng.integers(30, 40, 6), "double_round", out_zp=-5, pad=[1, 1, 1, 0],
                               stride=[2, 2], input_zp=-128, pad_value=4))
    target = dataclasses.replace(load_target("generic"), cc="clang")
    runner = HarnessRunner(target, ("-fsanitize=address,undefined", "-fno-sanitize-recover=all"))
    for s in (sched, fused(add_chain())):
        with tempfile.TemporaryDirectory() as tmp:
            model = generate(s, Path(tmp), target, harness=True)
            result = verify_schedule(s, model, runner, samples=2)
        assert result.bit_exact, result.first_mismatch
