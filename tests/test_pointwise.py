"""Element-wise TOSA primitives: bitwise ops and shifts, CLZ, ABS, NEGATE, INTDIV, logical ops, comparisons, SELECT.
Hand-computed examples from the TOSA 1.0 pseudocode, REQUIRE violations, ERROR_IFs, and generated C == numpy
reference over random broadcasting shapes (one C build per case)."""

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
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
BITS = {"i8": 8, "i16": 16, "i32": 32}


def run(op, dts, out_dt, *xs, **attrs):
    """The reference result of `op` on the arrays xs (inputs of types dts)."""
    arrays = [np.asarray(x) for x in xs]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    sched = prepare(step_schedule(op, [Var(a.shape, dt) for a, dt in zip(arrays, dts, strict=True)],
                                  [(shape, out_dt)], **attrs))
    inputs = [a.astype(sched.buffers[n].dtype.numpy) for a, n in zip(arrays, sched.inputs, strict=True)]
    return run_reference(sched, inputs)["out0"].tolist()


def binary(op, dt, a, b, **attrs):
    return run(op, [dt, dt], dt, a, b, **attrs)


# ---- hand-computed examples -----------------------------------------------------------------------

def test_shifts_examples():
    # LOGICAL_RIGHT_SHIFT shifts the zero-extended bit pattern
    assert binary("LOGICAL_RIGHT_SHIFT", "i8", [-1, -128, 64], [1, 7, 3]) == [127, 1, 8]
    assert binary("LOGICAL_RIGHT_SHIFT", "i16", [-2], [1]) == [32767]
    assert binary("LOGICAL_RIGHT_SHIFT", "i32", [-1], [31]) == [1]
    # LOGICAL_LEFT_SHIFT keeps the low bits: 3 << 7 = 0x180 -> 0x80 = -128 in i8
    assert binary("LOGICAL_LEFT_SHIFT", "i8", [1, 3, -1], [7, 7, 1]) == [-128, -128, -2]
    assert binary("LOGICAL_LEFT_SHIFT", "i16", [0x4001], [1]) == [-32766]
    assert binary("LOGICAL_LEFT_SHIFT", "i32", [3], [31]) == [I32_MIN]
    # ARITHMETIC_RIGHT_SHIFT: floor; round adds bit (shift - 1), i.e. rounds half up
    assert binary("ARITHMETIC_RIGHT_SHIFT", "i8", [-5, 5, 6, -6], [1, 1, 2, 2]) == [-3, 2, 1, -2]
    assert binary("ARITHMETIC_RIGHT_SHIFT", "i8", [-5, 5, 6, -6, -7], [1, 1, 2, 2, 0], round=True) == [
        -2, 3, 2, -1, -7]


def test_bitwise_and_clz_examples():
    assert binary("BITWISE_AND", "i8", [-1, 6], [5, 3]) == [5, 2]
    assert binary("BITWISE_OR", "i16", [6, -32768], [9, 1]) == [15, -32767]
    assert binary("BITWISE_XOR", "i32", [6, -1], [3, I32_MAX]) == [5, I32_MIN]
    assert run("BITWISE_NOT", ["i8"], "i8", [0, -128, 5]) == [-1, 127, -6]
    assert run("CLZ", ["i32"], "i32", [0, 1, -1, I32_MAX, 256]) == [32, 31, 0, 1, 23]


def test_arithmetic_examples():
    assert binary("INTDIV", "i32", [7, -7, 7, -7, I32_MIN], [2, 2, -2, -2, 1]) == [3, -3, -3, 3, I32_MIN]
    assert run("ABS", ["i32"], "i32", [-5, 0, I32_MAX, I32_MIN + 1]) == [5, 0, I32_MAX, I32_MAX]
    # NEGATE: clip(-(x - izp) + ozp)
    assert run("NEGATE", ["i8"], "i8", [10, -128, 127], input_zp=-3, output_zp=5) == [-8, 127, -125]
    assert run("NEGATE", ["i8"], "i8", [-128], input_zp=0, output_zp=0) == [127]
    assert run("NEGATE", ["i16"], "i16", [-32768, 5], input_zp=0, output_zp=0) == [32767, -5]


def test_logical_compare_select_examples():
    t, f = True, False
    assert run("LOGICAL_AND", ["bool", "bool"], "bool", [t, t, f, f], [t, f, t, f]) == [t, f, f, f]
    assert run("LOGICAL_OR", ["bool", "bool"], "bool", [t, t, f, f], [t, f, t, f]) == [t, t, t, f]
    assert run("LOGICAL_XOR", ["bool", "bool"], "bool", [t, t, f, f], [t, f, t, f]) == [f, t, t, f]
    assert run("LOGICAL_NOT", ["bool"], "bool", [t, f]) == [f, t]
    # broadcasting [2, 1] against [1, 3]
    a, b = [[1], [5]], [[0, 1, 7]]
    assert run("EQUAL", ["i32", "i32"], "bool", a, b) == [[f, t, f], [f, f, f]]
    assert run("GREATER", ["i32", "i32"], "bool", a, b) == [[t, f, f], [t, t, f]]
    assert run("GREATER_EQUAL", ["i32", "i32"], "bool", a, b) == [[t, t, f], [t, t, f]]
    assert run("SELECT", ["bool", "i16", "i16"], "i16", [[t], [f]], [[1, 2]], [[-1, -2]]) == [[1, 2], [-1, -2]]


@pytest.mark.parametrize("op, dts, xs", [
    ("LOGICAL_LEFT_SHIFT", ["i8", "i8"], ([1], [8])),
    ("LOGICAL_RIGHT_SHIFT", ["i16", "i16"], ([1], [-1])),
    ("ARITHMETIC_RIGHT_SHIFT", ["i32", "i32"], ([1], [32])),
    ("INTDIV", ["i32", "i32"], ([1], [0])),
    ("INTDIV", ["i32", "i32"], ([I32_MIN], [-1])),
    ("ABS", ["i32"], ([I32_MIN],)),
])
def test_require_violations_are_unpredictable(op, dts, xs):
    with pytest.raises(Unpredictable):
        run(op, dts, dts[0], *xs)


def test_negate_i32_min_is_unpredictable():
    with pytest.raises(Unpredictable):
        run("NEGATE", ["i32"], "i32", [I32_MIN], input_zp=0, output_zp=0)


@pytest.mark.parametrize("op, ins, out, attrs, message", [
    ("BITWISE_AND", [((2,), "i8"), ((2,), "i16")], ((2,), "i8"), {}, "types differ"),
    ("BITWISE_OR", [((2,), "i8"), ((3,), "i8")], ((3,), "i8"), {}, "do not broadcast"),
    ("SELECT", [((2,), "bool"), ((1, 2), "i8"), ((2,), "i8")], ((1, 2), "i8"), {}, "ranks differ"),
    ("EQUAL", [((2,), "i32"), ((2,), "i32")], ((2,), "i32"), {}, "output type must be bool"),
    ("CLZ", [((2,), "i8")], ((2,), "i8"), {}, "not one of"),
    ("LOGICAL_AND", [((2,), "i8"), ((2,), "i8")], ((2,), "i8"), {}, "not one of"),
    ("SELECT", [((2,), "i8"), ((2,), "i8"), ((2,), "i8")], ((2,), "i8"), {}, "condition type"),
    ("NEGATE", [((2,), "i16")], ((2,), "i16"), {"input_zp": 1, "output_zp": 0}, "zero point must be 0"),
    ("BITWISE_NOT", [((2,), "i8")], ((3,), "i8"), {}, "output shapes"),
])
def test_error_if(op, ins, out, attrs, message):
    sched = step_schedule(op, [Var(shape, dt) for shape, dt in ins], [out], **attrs)
    with pytest.raises(GraphError, match=message):
        prepare(sched)


# ---- generated C == reference -----------------------------------------------------------------------

def _shapes(draw, n):
    """n TOSA-broadcastable shapes (equal rank, each dimension equal or 1) of rank 0 to 4."""
    rank = draw(st.integers(0, 4))
    full = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    return [tuple(d if draw(st.booleans()) else 1 for d in full) for _ in range(n)]


@st.composite
def cases(draw):
    op = draw(st.sampled_from(["BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "BITWISE_NOT", "LOGICAL_LEFT_SHIFT",
                               "LOGICAL_RIGHT_SHIFT", "ARITHMETIC_RIGHT_SHIFT", "CLZ", "ABS", "NEGATE", "INTDIV",
                               "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT", "EQUAL", "GREATER",
                               "GREATER_EQUAL", "SELECT"]))
    dt = draw(st.sampled_from(["i8", "i16", "i32"]))
    attrs = {}
    if op in ("CLZ", "ABS", "INTDIV"):
        dt = "i32"
    if op.startswith("LOGICAL_") and "SHIFT" not in op:
        dt = "bool"
    arity = 1 if op in ("BITWISE_NOT", "CLZ", "ABS", "NEGATE", "LOGICAL_NOT") else 3 if op == "SELECT" else 2
    shapes = _shapes(draw, arity)
    ins = [Var(s, dt) for s in shapes]
    out_dt = "bool" if op in ("EQUAL", "GREATER", "GREATER_EQUAL") else dt
    if "SHIFT" in op:
        ins[1] = Var(shapes[1], dt, 0, BITS[dt] - 1)
        attrs = {"round": draw(st.booleans())} if op == "ARITHMETIC_RIGHT_SHIFT" else {}
    elif op in ("ABS", "NEGATE") and dt == "i32":
        ins[0] = Var(shapes[0], dt, I32_MIN + 1, None)
    elif op == "INTDIV":
        ins = [Var(shapes[0], dt, I32_MIN + 1, None), Var(shapes[1], dt, 1, None)]
    elif op == "SELECT":
        ins[0] = Var(shapes[0], "bool")
    if op == "NEGATE":
        zp = (draw(st.integers(-128, 127)), draw(st.integers(-128, 127))) if dt == "i8" else (0, 0)
        attrs = {"input_zp": zp[0], "output_zp": zp[1]}
    out_shape = tuple(max(d) for d in zip(*shapes, strict=True)) if shapes[0] else ()
    return op, ins, out_shape, out_dt, attrs


@given(cases())
def test_c_matches_reference(case):
    op, ins, out_shape, out_dt, attrs = case
    assert_bit_exact(step_schedule(op, ins, [(out_shape, out_dt)], **attrs), samples=3)


def test_intdiv_negative_divisors_in_c():
    rng = np.random.default_rng(1)
    a = rng.integers(I32_MIN + 1, I32_MAX, size=(3, 4), endpoint=True).astype(np.int32)
    b = rng.choice([-7, -3, -1, 1, 2, 5, 1 << 20, I32_MIN], size=(3, 4)).astype(np.int32)
    sched = step_schedule("INTDIV", [Var((3, 4), "i32"), Var((3, 4), "i32")], [((3, 4), "i32")])
    assert_bit_exact(sched, inputs=[[a, b], [b, np.where(a == 0, 1, a).astype(np.int32)]])


SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g")


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
@pytest.mark.parametrize("op, ins, out_dt, attrs", [
    ("LOGICAL_LEFT_SHIFT", [Var((2, 3), "i8"), Var((1, 3), "i8", 0, 7)], "i8", {}),
    ("LOGICAL_RIGHT_SHIFT", [Var((4,), "i32"), Var((4,), "i32", 0, 31)], "i32", {}),
    ("ARITHMETIC_RIGHT_SHIFT", [Var((3, 2), "i16"), Var((3, 1), "i16", 0, 15)], "i16", {"round": True}),
    ("CLZ", [Var((5,), "i32")], "i32", {}),
    ("ABS", [Var((5,), "i32", I32_MIN + 1, None)], "i32", {}),
    ("NEGATE", [Var((2, 2), "i8")], "i8", {"input_zp": -128, "output_zp": 127}),
    ("INTDIV", [Var((4,), "i32", I32_MIN + 1, None), Var((4,), "i32", 1, None)], "i32", {}),
    ("SELECT", [Var((2, 1), "bool"), Var((1, 3), "i32"), Var((2, 3), "i32")], "i32", {}),
    ("GREATER_EQUAL", [Var((2, 3), "i32"), Var((1, 1), "i32")], "bool", {}),
])
def test_clang_sanitizers(op, ins, out_dt, attrs):
    """clang with the target's -Werror flags, run as the harness under ASan/UBSan."""
    target = dataclasses.replace(load_target("generic"), cc="clang")
    out_shape = tuple(max(d) for d in zip(*(v.shape for v in ins), strict=True))
    sched = step_schedule(op, ins, [(out_shape, out_dt)], **attrs)
    assert_bit_exact(sched, samples=2, runner="harness", extra_cflags=SANITIZE, target=target)
