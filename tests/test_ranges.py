"""Range analysis (each primitive's value_ranges): the bounds are sound (every reference result on data inside the
input ranges lies inside the output range) and tight (the output range's ends are reached), for RESCALE in all
its forms and the integer primitives converter-made TOSA graphs chain (shifts, CLZ, bitwise ops, INTDIV); constant
RESHAPE/TRANSPOSE steps become constants that the ranges see."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.fixedpoint import Unpredictable
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import CONST, TEMP, Buffer, Step
from qcodegen.plan.constants import fold_constant_layouts
from qcodegen.reference import run_reference
from qcodegen.testing import Const, Var, assert_bit_exact, prepare, step_schedule


def outcomes(sched, inputs):
    """The reference output of every input set that breaks no TOSA REQUIRE."""
    results = []
    for batch in inputs:
        try:
            results.append(run_reference(sched, batch)["out0"].astype(np.int64))
        except Unpredictable:
            continue
    return results


def assert_sound_and_tight(sched, inputs, tight=True):
    """Every result inside the planned output range; with `tight`, both ends of the range reached."""
    prepare(sched)
    lo, hi = sched.buffers["out0"].value_range
    got = outcomes(sched, inputs)
    assert got, "no input set keeps to the TOSA REQUIREs"
    seen = (min(int(r.min()) for r in got), max(int(r.max()) for r in got))
    assert lo <= seen[0] and seen[1] <= hi, f"results {seen} outside the planned range {(lo, hi)}"
    if tight:
        assert seen == (lo, hi), f"planned range {(lo, hi)}, reached only {seen}"


def interval(dt_min, dt_max):
    return st.tuples(st.integers(dt_min, dt_max), st.integers(dt_min, dt_max)).map(sorted)


# ---- RESCALE ------------------------------------------------------------------------------------------------------

# (input type, input_unsigned, output type, output_unsigned, scale32)
RESCALE_FORMS = [("i8", False, "i8", False, True), ("i8", True, "i8", False, True),
                 ("i8", False, "i8", True, True), ("i16", False, "i8", False, True), ("i16", True, "i8", False, True),
                 ("i32", False, "i16", False, True), ("i32", False, "i32", False, True),
                 ("i16", False, "i16", False, False), ("i48", False, "i32", False, False),
                 ("i16", False, "u16", False, True)]


@given(form=st.sampled_from(RESCALE_FORMS), channels=st.integers(1, 3), data=st.data(),
       rounding=st.sampled_from(["single_round", "double_round"]))
def test_rescale_ranges(form, channels, data, rounding):
    in_t, in_u, out_t, out_u, scale32 = form
    bits = int(in_t[1:])
    in_lo, in_hi = data.draw(interval(*((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if bits < 48 else
                                        (-(1 << 40), 1 << 40))))
    mmax = (1 << 31) - 1 if scale32 else (1 << 15) - 1
    mult = data.draw(st.lists(st.integers(1, mmax), min_size=channels, max_size=channels))
    least = min(bits, 40) + 2  # the value REQUIRE |v| < 2^(shift - 1) holds for every input
    shift = data.draw(st.lists(st.integers(least, 50), min_size=channels, max_size=channels))
    izp = data.draw(st.integers(-128, 127)) if in_t == "i8" and not in_u else (data.draw(st.integers(0, 255))
                                                                               if in_u and bits == 8 else 0)
    ozp = data.draw(st.integers(-128, 127)) if out_t == "i8" and not out_u else (data.draw(st.integers(0, 255))
                                                                                if out_u else 0)
    sched = step_schedule("RESCALE", [Var((2, channels), in_t, in_lo, in_hi)], [((2, channels), out_t)],
                          multiplier=mult, shift=shift, input_zp=izp, output_zp=ozp, scale32=scale32,
                          rounding=rounding if scale32 else "single_round", per_channel=channels > 1,
                          input_unsigned=in_u, output_unsigned=out_u)
    rng = np.random.default_rng(0)
    numpy_type = sched.buffers["in0"].dtype.numpy
    ends = [np.full((2, channels), v, numpy_type) for v in (in_lo, in_hi)]
    sample = [rng.integers(in_lo, in_hi, (2, channels), endpoint=True).astype(numpy_type) for _ in range(4)]
    prepare(sched)
    # the unsigned views' ends, the signed container's ends: not reached by the ends of a signed range
    tight = not (in_u and in_lo < 0 <= in_hi) and not out_u and sched.steps[0].widened is None
    assert_sound_and_tight(sched, [[x] for x in ends + sample], tight)


def test_rescale_unsigned_views():
    """u8 data in an i8 container (input_unsigned): [-128, -1] reads as [128, 255]; an unsigned output in a
    signed container stores [128, 255] as [-128, -1]."""
    sched = prepare(step_schedule("RESCALE", [Var((2,), "i8", -128, -1)], [((2,), "i8")], multiplier=[1 << 30],
                                  shift=[30], input_zp=128, output_zp=0, scale32=True, input_unsigned=True))
    assert sched.buffers["out0"].value_range == (0, 127)
    sched = prepare(step_schedule("RESCALE", [Var((2,), "i8", 0, 100)], [((2,), "i8")], multiplier=[1 << 30],
                                  shift=[30], input_zp=0, output_zp=128, scale32=True, output_unsigned=True))
    assert sched.buffers["out0"].value_range == (-128, -28)


# ---- shifts, CLZ, bitwise ops, INTDIV -------------------------------------------------------------------------------

OPS = ["LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR",
       "BITWISE_XOR", "INTDIV"]


@given(op=st.sampled_from(OPS), dt=st.sampled_from(["i8", "i16", "i32"]), data=st.data(), rounds=st.booleans())
def test_binary_integer_op_ranges_are_sound(op, dt, data, rounds):
    bits = int(dt[1:])
    full = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if op == "INTDIV":
        dt, full = "i32", (-(1 << 31), (1 << 31) - 1)
    a = data.draw(interval(*full))
    b = data.draw(interval(0, bits - 1) | interval(-2, bits + 1)) if "SHIFT" in op else data.draw(interval(*full))
    attrs = {"round": rounds} if op == "ARITHMETIC_RIGHT_SHIFT" else {}
    sched = step_schedule(op, [Var((16,), dt, *a), Var((16,), dt, *b)], [((16,), dt)], **attrs)
    rng = np.random.default_rng(1)
    numpy_type = sched.buffers["in0"].dtype.numpy
    batches = [[np.array([a[0], a[0], a[1], a[1]] * 4, numpy_type), np.array([b[0], b[1]] * 8, numpy_type)]]
    batches += [[rng.integers(*a, 16, endpoint=True).astype(numpy_type),
                 rng.integers(*b, 16, endpoint=True).astype(numpy_type)] for _ in range(6)]
    prepare(sched)
    if outcomes(sched, batches):
        assert_sound_and_tight(sched, batches, tight=False)


@pytest.mark.parametrize("op, a, b, attrs, expected", [
    ("LOGICAL_LEFT_SHIFT", (0, 16256), (17, 17), {}, (0, 16256 << 17)),  # a converter softmax's exp terms
    ("LOGICAL_LEFT_SHIFT", (-3, 5), (0, 4), {}, (-48, 80)),
    ("LOGICAL_LEFT_SHIFT", (0, 1 << 30), (0, 2), {}, (-(1 << 31), (1 << 31) - 1)),  # may wrap: the type
    ("ARITHMETIC_RIGHT_SHIFT", (0, 32640), (7, 7), {"round": True}, (0, 255)),
    ("ARITHMETIC_RIGHT_SHIFT", (-(1 << 31), (1 << 31) - 1), (3, 26), {"round": True}, (-(1 << 28), 1 << 28)),
    ("ARITHMETIC_RIGHT_SHIFT", (-7, 7), (1, 2), {}, (-4, 3)),
    ("LOGICAL_RIGHT_SHIFT", (-5, 100), (1, 3), {}, (0, ((1 << 32) - 1) >> 1)),
    ("LOGICAL_RIGHT_SHIFT", (8, 100), (1, 3), {}, (1, 50)),
    ("BITWISE_AND", (0, 200), (-50, 3000), {}, (0, 200)),
    ("BITWISE_OR", (4, 9), (2, 3), {}, (4, 15)),
    ("BITWISE_XOR", (-4, 9), (2, 3), {}, (-16, 15)),
    ("INTDIV", (-100, 7), (3, 9), {}, (-33, 2)),
    ("INTDIV", (-100, 7), (-1, 9), {}, (-100, 100)),
])
def test_binary_integer_op_ranges_are_tight(op, a, b, attrs, expected):
    sched = prepare(step_schedule(op, [Var((2,), "i32", *a), Var((2,), "i32", *b)], [((2,), "i32")], **attrs))
    assert sched.buffers["out0"].value_range == expected


@pytest.mark.parametrize("x, expected", [((0, 6291456), (9, 32)), ((1, 1), (31, 31)), ((-5, -1), (0, 0)),
                                         ((-5, 3), (0, 32)), ((1 << 20, 1 << 30), (1, 11))])
def test_clz_range(x, expected):
    sched = prepare(step_schedule("CLZ", [Var((2,), "i32", *x)], [((2,), "i32")]))
    assert sched.buffers["out0"].value_range == expected
    values = np.array(x, np.int32)
    got = run_reference(sched, [values])["out0"]
    assert expected[0] <= got.min() and got.max() <= expected[1]


def test_bitwise_not_range():
    sched = prepare(step_schedule("BITWISE_NOT", [Var((2,), "i16", -3, 40)], [((2,), "i16")]))
    assert sched.buffers["out0"].value_range == (-41, 2)


def test_constant_layouts_are_folded():
    """A RESHAPE of a constant weight tensor (as the TFLite -> TOSA converter writes depthwise weights) becomes a
    constant: the convolution's accumulator bound comes from the actual weights, not from the i8 range."""
    conv = dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0, acc_type="i32")
    sched = step_schedule("DEPTHWISE_CONV2D", [Var((1, 1, 1, 4), "i8"), Var((1, 1, 4, 1), "i8"),
                                               Const(np.zeros(4), "i32")], [((1, 1, 1, 4), "i32")], **conv)
    sched.inputs.remove("in1")
    sched.buffers["in1"].kind = TEMP
    w = np.array([[3, -1, 2, 0]], np.int8)
    sched.add_buffer(Buffer("w", w.shape, dtype("i8"), CONST, w))
    sched.steps.insert(0, Step("RESHAPE", ["w"], ["in1"], {"shape": [1, 1, 4, 1]}))
    fold_constant_layouts(sched)
    assert [s.op for s in sched.steps] == ["DEPTHWISE_CONV2D"] and sched.buffers["in1"].kind == CONST
    assert sched.buffers["in1"].data.reshape(-1).tolist() == [3, -1, 2, 0]
    assert prepare(sched).steps[0].acc_bound == (-3 * 128, 3 * 127)  # channel 0: 3 * x
    assert any("1 RESHAPE/TRANSPOSE step(s) of constants" in n for n in sched.notes)
    assert_bit_exact(sched, samples=2)


def test_constant_layout_of_a_graph_output_is_kept():
    sched = step_schedule("RESHAPE", [Const(np.array([[1, 2]]), "i8")], [((2, 1), "i8")], shape=[2, 1])
    fold_constant_layouts(sched)
    assert [s.op for s in sched.steps] == ["RESHAPE"]


def test_normalisation_shift_range():
    """x << (CLZ(x) - 1) for x in [0, 2^21]: 0 or 31 significant bits (the converter's softmax reciprocal)."""
    sched = step_schedule("CLZ", [Var((1, 1), "i32", 0, 1 << 21)], [((1, 1), "i32")])
    sched.buffers["out0"].kind = TEMP
    for name, shape in (("one", (1, 1)), ("amount", (1, 1)), ("y", (1, 1))):
        sched.add_buffer(Buffer(name, shape, dtype("i32"), CONST if name == "one" else "output",
                                np.ones(shape, np.int32) if name == "one" else None))
    sched.buffers["amount"].kind = TEMP
    sched.outputs = ["y"]
    sched.steps += [Step("SUB", ["out0", "one"], ["amount"]), Step("LOGICAL_LEFT_SHIFT", ["in0", "amount"], ["y"])]
    prepare(sched)
    assert sched.buffers["amount"].value_range == (9, 31)  # (intervals alone: a shifted value of any size)
    assert sched.buffers["y"].value_range == (0, (1 << 31) - 1)
    got = [run_reference(sched, [np.array([[v]], np.int32)])["y"].item() for v in (0, 1, 5, 1 << 21)]
    assert got == [0, 1 << 30, 5 << 28, 1 << 30]
