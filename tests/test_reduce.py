"""REDUCE_SUM / REDUCE_MAX / REDUCE_MIN and ARGMAX: generated C == numpy reference, hand-computed
examples (docs/semantics.md §11.15: ARGMAX ties pick the first index, an all-minimum row gives 0), the int32
accumulator proof and ERROR_IF conditions."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def reduce(op, shape, axis, dtype="i32", lo=None, hi=None, out_dtype=None):
    out = list(shape)
    out[axis] = 1
    return step_schedule(op, [Var(tuple(shape), dtype, lo, hi)], [(tuple(out), out_dtype or dtype)], axis=axis)


def argmax(shape, axis, dtype="i8", lo=None, hi=None):
    out = tuple(d for k, d in enumerate(shape) if k != axis)
    return step_schedule("ARGMAX", [Var(tuple(shape), dtype, lo, hi)], [(out, "i32")], axis=axis)


def ref(sched, x):
    dt = sched.buffers["in0"].dtype.numpy
    return run_reference(prepare(sched), [np.asarray(x, dt)])["out0"].tolist()


def test_reduce_examples():
    x = [[-5, 3, 0], [2, -7, 9]]
    assert ref(reduce("REDUCE_SUM", (2, 3), 0, lo=-10, hi=10), x) == [[-3, -4, 9]]
    assert ref(reduce("REDUCE_SUM", (2, 3), 1, lo=-10, hi=10), x) == [[-2], [4]]
    assert ref(reduce("REDUCE_MAX", (2, 3), 1, "i8"), x) == [[3], [9]]
    assert ref(reduce("REDUCE_MIN", (2, 3), 1, "i16"), x) == [[-5], [-7]]
    assert ref(reduce("REDUCE_MIN", (2, 3), 0, "i16"), x) == [[-5, -7, 0]]


def test_argmax_ties_and_all_minimum():
    x = [[3, 7, 7, 1], [-128, -128, -128, -128], [-1, -128, 127, 127]]
    sched = argmax((3, 4), 1)
    assert ref(sched, x) == [1, 0, 2]  # the first maximal index wins
    assert_bit_exact(sched, inputs=[[np.array(x, np.int8)]])
    assert ref(argmax((3, 4), 0), x) == [0, 0, 2, 2]
    sched = argmax((2, 5), 1, "i16")
    x16 = np.array([[-32768] * 5, [5, -3, 5, 32767, 32767]], np.int16)
    assert ref(sched, x16) == [0, 3]
    assert_bit_exact(sched, inputs=[[x16]])


def test_argmax_rank1_gives_rank0():
    sched = argmax((6,), 0)
    assert ref(sched, [1, 2, 9, 9, 0, 9]) == 2


def test_sum_accumulator_bound_exactly_fits():
    # 2 terms in [-2^30, 2^30 - 1]: the sums reach [-2^31, 2^31 - 2]
    sched = reduce("REDUCE_SUM", (3, 2), 1, lo=-(1 << 30), hi=(1 << 30) - 1)
    prepare(sched)
    assert sched.steps[0].acc_bound == (I32_MIN, I32_MAX - 1)
    assert sched.buffers["out0"].value_range == (I32_MIN, I32_MAX - 1)
    x = np.array([[-(1 << 30)] * 2, [(1 << 30) - 1] * 2, [5, -7]], np.int32)
    assert ref(sched, x) == [[I32_MIN], [I32_MAX - 1], [-2]]
    assert_bit_exact(sched, inputs=[[x]])


def test_sum_accumulator_bound_counts_partial_sums():
    # only positive terms: partial sums of 1..n terms and the initial 0
    sched = prepare(reduce("REDUCE_SUM", (4, 5), 0, lo=3, hi=10))
    assert sched.steps[0].acc_bound == (0, 40)
    assert sched.buffers["out0"].value_range == (12, 40)


def test_sum_overflow_widens():
    step = prepare(reduce("REDUCE_SUM", (3, 2), 1)).steps[0]  # full int32 range
    assert "overflow" in step.widened.reason and step.widened.bound == (-(1 << 32), ((1 << 31) - 1) * 2)
    sched = prepare(reduce("REDUCE_SUM", (3,), 0, lo=0, hi=(1 << 30)))  # 3 * 2^30 > int32
    assert sched.steps[0].widened.bound == (0, 3 << 30) and sched.buffers["out0"].value_range == (0, (1 << 31) - 1)


@pytest.mark.parametrize("bad", [
    lambda: reduce("REDUCE_SUM", (3, 2), 1, dtype="i8"),  # REDUCE_SUM is i32 only
    lambda: step_schedule("REDUCE_MAX", [Var((3, 2), "i8")], [((3, 1), "i8")], axis=-1),  # negative axis
    lambda: step_schedule("REDUCE_MIN", [Var((3, 2), "i8")], [((3, 1), "i8")], axis=2),  # axis >= rank
    lambda: reduce("REDUCE_MAX", (3, 2), 1, dtype="i8", out_dtype="i16"),
    lambda: step_schedule("REDUCE_MAX", [Var((3, 2), "i8")], [((3, 2), "i8")], axis=1),  # axis not kept
    lambda: step_schedule("REDUCE_MAX", [Var((3, 2), "u8")], [((3, 1), "u8")], axis=1),
    lambda: argmax((3, 2), 1, dtype="i32"),  # ARGMAX is i8/i16
    lambda: step_schedule("ARGMAX", [Var((3, 2), "i8")], [((3,), "i32")], axis=2),
    lambda: step_schedule("ARGMAX", [Var((3, 2), "i8")], [((3,), "i8")], axis=1),  # output i32
])
def test_error_if(bad):
    with pytest.raises(GraphError):
        prepare(bad())


shapes_and_axis = st.lists(st.integers(1, 6), min_size=1, max_size=4).flatmap(
    lambda s: st.tuples(st.just(tuple(s)), st.integers(0, len(s) - 1)))


@given(sa=shapes_and_axis, op=st.sampled_from(["REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN"]),
       dtype=st.sampled_from(["i8", "i16", "i32"]), data=st.data())
def test_reduce_c_matches_reference(sa, op, dtype, data):
    shape, axis = sa
    lo = hi = None
    if op == "REDUCE_SUM":
        dtype = "i32"
        bound = I32_MAX // shape[axis]
        hi = data.draw(st.integers(0, bound))
        lo = -data.draw(st.integers(0, bound))
    assert_bit_exact(reduce(op, shape, axis, dtype, lo, hi), samples=2)


@given(sa=shapes_and_axis, dtype=st.sampled_from(["i8", "i16"]), small=st.booleans())
def test_argmax_c_matches_reference(sa, dtype, small):
    shape, axis = sa
    lo, hi = (-2, 1) if small else (None, None)  # few distinct values: many ties
    assert_bit_exact(argmax(shape, axis, dtype, lo, hi), samples=2)
