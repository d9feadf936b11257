"""ADD, SUB, MUL, CLAMP, CAST: generated C == numpy reference; the reference == values derived by hand
from the TOSA 1.0 text (docs/semantics.md §6, §11); ERROR_IF conditions and overflow proofs."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.fixedpoint import Unpredictable
from qcodegen.ir.dtypes import dtype as get_dtype
from qcodegen.primitives import get
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


@st.composite
def broadcast_shapes(draw, max_rank=4):
    """(a shape, b shape, output shape) under TOSA broadcasting: equal ranks, each dim equal or 1."""
    out = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=max_rank)))
    a = tuple(d if draw(st.booleans()) else 1 for d in out)
    b = tuple(d if draw(st.booleans()) else 1 for d in out)
    out = tuple(max(x, y) for x, y in zip(a, b, strict=True))
    return a, b, out


def binary(op, a, b, shapes=((4,), (4,), (4,)), dtype="i32", **attrs):
    """`a`, `b`: (lo, hi) input ranges."""
    sa, sb, so = shapes
    return step_schedule(op, [Var(sa, dtype, *a), Var(sb, dtype, *b)], [(so, "i32")], **attrs)


def ref(sched, *inputs):
    return run_reference(prepare(sched), list(inputs))["out0"].tolist()


# ---- hand-computed spec examples ------------------------------------------------------------------

def test_add_sub_examples():
    a = np.array([[1], [-7]], np.int32)  # broadcast along the last axis
    b = np.array([[10, I32_MIN + 7]], np.int32)
    s = ((2, 1), (1, 2), (2, 2))
    assert ref(binary("ADD", (-7, 1), (I32_MIN + 7, 10), s), a, b) == [[11, I32_MIN + 8], [3, I32_MIN]]
    assert ref(binary("SUB", (-7, 1), (0, 10), s), a, np.array([[10, 0]], np.int32)) == [[-9, 1], [-17, -7]]


def test_mul_shift_rounding_semantics_5():
    # (a*b + 2^(shift-1)) >> shift with an arithmetic shift: -3 >> 1 (after rounding -2 >> 1) gives -1
    a = np.array([-3, 3, -1, -5, 5, -6], np.int32)
    one = np.ones(6, np.int32)
    shapes = ((6,), (6,), (6,))
    out = ref(binary("MUL", (-6, 5), (1, 1), shapes, shift=1), a, one)
    assert out == [-1, 2, 0, -2, 3, -3]  # (-3+1)>>1, (3+1)>>1, (-1+1)>>1, (-5+1)>>1, (5+1)>>1, (-6+1)>>1
    assert ref(binary("MUL", (-6, 5), (1, 1), shapes, shift=2), a, one) == [-1, 1, 0, -1, 1, -1]


def test_mul_i32_shift_extremes():
    # INT32_MIN^2 = 2^62; with shift 63 the rounding add 2^62 would overflow int64 in a naive evaluation
    a = np.array([I32_MIN, I32_MIN, I32_MAX], np.int32)
    sched = binary("MUL", (I32_MIN, I32_MAX), (I32_MIN, I32_MAX), ((3,), (3,), (3,)), shift=63)
    assert ref(sched, a, a) == [1, 1, 0]  # (2^62 + 2^62) >> 63 = 1; ((2^31-1)^2 + 2^62) >> 63 = 0
    assert_bit_exact(sched, inputs=[[a, a]])
    sched = binary("MUL", (I32_MIN, I32_MAX), (I32_MIN, I32_MAX), ((3,), (3,), (3,)), shift=32)
    assert ref(sched, a, a) == [1 << 30, 1 << 30, (1 << 30) - 1]
    assert_bit_exact(sched, samples=2)


def test_mul_shift0_wraps_in_reference_and_c():
    # TOSA apply_mul_s keeps the low 32 bits: 65536 * 65536 = 2^32 -> 0, 65536 * 32768 = 2^31 -> INT32_MIN
    sched = binary("MUL", (-7, 1 << 16), (0, 1 << 16))
    a, b = np.array([65536, 65536, 3, -7], np.int32), np.array([65536, 32768, 5, 9], np.int32)
    assert get("MUL").reference(sched.io(sched.steps[0]), [a, b])[0].tolist() == [0, I32_MIN, 15, -63]
    assert_bit_exact(sched, inputs=[[a, b]])
    assert sched.steps[0].widened is None and sched.buffers["out0"].value_range == (I32_MIN, I32_MAX)


def test_small_int_mul_needs_no_shift():
    assert ref(binary("MUL", (-128, 127), (-128, 127), dtype="i8"), np.array([-128, -128, 127, -3], np.int8),
               np.array([-128, 127, 127, 5], np.int8)) == [16384, -16256, 16129, -15]
    assert_bit_exact(binary("MUL", (None, None), (None, None), ((3, 1), (1, 5), (3, 5)), dtype="i16"))


def test_add_overflow_widens():
    add = prepare(binary("ADD", (0, I32_MAX), (0, 1)))
    assert add.steps[0].widened.bound == (0, I32_MAX + 1) and add.buffers["out0"].value_range == (0, I32_MAX)
    sub = prepare(binary("SUB", (I32_MIN, 0), (0, 1)))
    assert sub.steps[0].widened.bound == (I32_MIN - 1, 0) and sub.buffers["out0"].value_range == (I32_MIN, 0)
    sched = binary("ADD", (0, 1), (0, 1))
    with pytest.raises(Unpredictable):  # the reference itself: TOSA REQUIRE
        get("ADD").reference(sched.io(sched.steps[0]), [np.array([I32_MAX] * 4, np.int32),
                                                          np.array([1] * 4, np.int32)])


def test_add_sub_range_extremes_fit():
    assert_bit_exact(binary("ADD", (I32_MIN, 0), (0, I32_MAX)), samples=2)
    assert_bit_exact(binary("SUB", (I32_MIN, -1), (I32_MIN + 1, 0)), samples=2)
    assert_bit_exact(binary("SUB", (0, I32_MAX), (0, I32_MAX)), samples=2)


@pytest.mark.parametrize("bad", [
    dict(op="ADD", a=(0, 1), b=(0, 1), dtype="i8"),  # ADD is i32 only
    dict(op="ADD", a=(0, 1), b=(0, 1), shapes=((4,), (3,), (4,))),  # does not broadcast
    dict(op="ADD", a=(0, 1), b=(0, 1), shapes=((4, 1), (4,), (4, 4))),  # ranks differ
    dict(op="MUL", a=(0, 1), b=(0, 1), dtype="i16", shift=1),  # shift needs i32
    dict(op="MUL", a=(0, 1), b=(0, 1), shift=64),
    dict(op="SUB", a=(0, 1), b=(0, 1), shapes=((4,), (4,), (5,))),  # wrong output shape
])
def test_binary_error_if(bad):
    kw = {k: v for k, v in bad.items() if k != "op"}
    with pytest.raises(GraphError):
        prepare(binary(bad["op"], **kw))


def test_binary_types_must_match():
    sched = step_schedule("MUL", [Var((4,), "i8"), Var((4,), "i16")], [((4,), "i32")])
    with pytest.raises(GraphError, match="types differ"):
        prepare(sched)
    sched = step_schedule("MUL", [Var((4,), "i8"), Var((4,), "i8")], [((4,), "i16")])
    with pytest.raises(GraphError, match="i32"):
        prepare(sched)


# ---- property tests: C == reference ---------------------------------------------------------------

@given(shapes=broadcast_shapes(), op=st.sampled_from(["ADD", "SUB"]), data=st.data())
def test_add_sub_c_matches_reference(shapes, op, data):
    ka, kb = data.draw(st.integers(0, 30)), data.draw(st.integers(0, 30))
    sched = binary(op, (-(1 << ka), (1 << ka) - 1), (-(1 << kb), (1 << kb) - 1), shapes)
    assert_bit_exact(sched, samples=2)


@given(shapes=broadcast_shapes(), dtype=st.sampled_from(["i8", "i16", "i32"]), data=st.data())
def test_mul_c_matches_reference(shapes, dtype, data):
    shift, ka, kb = 0, 7, 7
    if dtype == "i32":
        shift = data.draw(st.one_of(st.just(0), st.integers(1, 63)))
        ka = data.draw(st.integers(0, min(31, 30 + shift)))
        kb = min(31, 30 + shift - ka)  # |a*b| <= 2^(30+shift): the result fits int32
    elif dtype == "i16":
        ka = kb = 15
    sched = binary("MUL", (-(1 << ka), (1 << ka) - 1), (-(1 << kb), (1 << kb) - 1), shapes, dtype=dtype,
                   shift=shift)
    assert_bit_exact(sched, samples=2)


# ---- CLAMP ----------------------------------------------------------------------------------------

def clamp(dtype, lo, hi, shape=(6,), **var):
    return step_schedule("CLAMP", [Var(shape, dtype, var.get("vlo"), var.get("vhi"))], [(shape, dtype)],
                         min_val=lo, max_val=hi)


def test_clamp_examples():
    x = np.array([-128, -6, -5, 0, 6, 127], np.int8)
    assert ref(clamp("i8", -5, 5), x) == [-5, -5, -5, 0, 5, 5]
    assert ref(clamp("i8", -128, 0), x) == [-128, -6, -5, 0, 0, 0]


def test_clamp_f32_nan_propagates_and_signed_zero_kept():
    x = np.array([np.nan, -0.0, 0.0, -1.0, 2.0, 0.25], np.float32)
    sched = clamp("f32", 0.0, 1.0)
    out = run_reference(prepare(sched), [x])["out0"]
    assert np.isnan(out[0]) and np.signbit(out[1])  # NaN stays NaN; -0.0 == min_val keeps its sign
    assert out[2:].tolist() == [0.0, 0.0, 1.0, 0.25]
    assert_bit_exact(sched, inputs=[[x]])


@pytest.mark.parametrize("bad", [
    dict(dtype="i8", lo=5, hi=4),  # max < min
    dict(dtype="i8", lo=-129, hi=4),  # bound outside the type
    dict(dtype="i16", lo=0, hi=40000),
    dict(dtype="f32", lo=float("nan"), hi=1.0),
    dict(dtype="u8", lo=0, hi=1),  # type not supported
])
def test_clamp_error_if(bad):
    with pytest.raises(GraphError):
        prepare(clamp(bad["dtype"], bad["lo"], bad["hi"]))


@given(dtype=st.sampled_from(["i8", "i16", "i32", "f32"]), shape=st.lists(st.integers(1, 6), min_size=1,
                                                                          max_size=3), data=st.data())
def test_clamp_c_matches_reference(dtype, shape, data):
    if dtype == "f32":
        lo, hi = sorted(data.draw(st.lists(st.floats(-1.5, 1.5, width=32), min_size=2, max_size=2)))
    else:
        bits = int(dtype[1:])
        lo, hi = sorted(data.draw(st.lists(st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1),
                                           min_size=2, max_size=2)))
    sched = clamp(dtype, lo, hi, tuple(shape))
    assert_bit_exact(sched, samples=2)
    if dtype != "f32":
        assert sched.buffers["out0"].value_range == (lo, hi)


# ---- CAST -----------------------------------------------------------------------------------------

INT_TYPES = ["i8", "u8", "i16", "u16", "i32"]


def cast(src, dst, shape=(5,)):
    return step_schedule("CAST", [Var(shape, src)], [(shape, dst)])


@pytest.mark.parametrize("src,dst,x,want", [
    ("i16", "i8", [300, -300, 127, 128, -129], [44, -44, 127, -128, 127]),  # narrowing wraps (docs/semantics.md §11.14)
    ("i32", "i16", [70000, -70000, 32768, I32_MIN, I32_MAX], [4464, -4464, -32768, 0, -1]),
    ("u16", "i16", [65535, 32768, 1, 0, 40000], [-1, -32768, 1, 0, -25536]),
    ("u8", "i8", [200, 255, 127, 128, 0], [-56, -1, 127, -128, 0]),
    ("i8", "u8", [-56, -1, 127, -128, 0], [200, 255, 127, 128, 0]),
    ("i8", "i32", [-56, -1, 127, -128, 0], [-56, -1, 127, -128, 0]),  # widening sign-extends
    ("u8", "i16", [200, 255, 127, 128, 0], [200, 255, 127, 128, 0]),  # ... zero-extends from unsigned
    ("i16", "u16", [-1, -32768, 5, 0, 32767], [65535, 32768, 5, 0, 32767]),
])
def test_cast_examples(src, dst, x, want):
    sched = cast(src, dst)
    arr = np.array(x, get_dtype(src).numpy)
    assert ref(sched, arr) == want
    assert_bit_exact(sched, inputs=[[arr]])


def test_cast_rejects_float():
    with pytest.raises(GraphError, match="QUANTIZE"):
        prepare(cast("f32", "i8"))
    with pytest.raises(GraphError):
        prepare(cast("i8", "f32"))


@given(src=st.sampled_from(INT_TYPES), dst=st.sampled_from(INT_TYPES),
       shape=st.lists(st.integers(1, 7), min_size=1, max_size=3))
def test_cast_c_matches_reference(src, dst, shape):
    assert_bit_exact(cast(src, dst, tuple(shape)), samples=2)

