"""MAXIMUM and MINIMUM: hand-computed examples, ERROR_IFs, and generated C == reference with broadcasting."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule


def case(op, a, b, out, dtype="i8", out_dtype=None):
    return step_schedule(op, [Var(a, dtype), Var(b, dtype)], [(out, out_dtype or dtype)])


def test_by_hand_with_broadcast():
    a = np.array([[1, -5, 7], [-128, 127, 0]], np.int8)
    b = np.array([[3], [-1]], np.int8)
    for op, want in (("MAXIMUM", [[3, 3, 7], [-1, 127, 0]]), ("MINIMUM", [[1, -5, 3], [-128, -1, -1]])):
        sched = prepare(case(op, (2, 3), (2, 1), (2, 3)))
        assert run_reference(sched, [a, b])["out0"].tolist() == want


def test_i32_extremes():
    a = np.array([-(1 << 31), (1 << 31) - 1], np.int32)
    b = np.array([(1 << 31) - 1, -(1 << 31)], np.int32)
    sched = prepare(case("MAXIMUM", (2,), (2,), (2,), "i32"))
    assert run_reference(sched, [a, b])["out0"].tolist() == [(1 << 31) - 1] * 2
    assert_bit_exact(sched, inputs=[[a, b]])


@pytest.mark.parametrize("bad", [
    dict(a=(2, 3), b=(3,), out=(2, 3)),  # ranks differ (TOSA broadcasting needs equal ranks)
    dict(a=(2, 3), b=(2, 2), out=(2, 3)),  # does not broadcast
    dict(a=(2, 3), b=(2, 3), out=(2, 3), out_dtype="i32"),  # output type differs
    dict(a=(2, 3), b=(2, 3), out=(2, 3), dtype="f32"),
    dict(a=(2, 3), b=(1, 3), out=(1, 3)),  # wrong output shape
])
@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
def test_error_if(op, bad):
    with pytest.raises(GraphError):
        prepare(case(op, **bad))


@st.composite
def shapes(draw):
    out = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    a = [d if draw(st.booleans()) else 1 for d in out]
    b = [d if draw(st.booleans()) else 1 for d in out]
    return tuple(a), tuple(b), tuple(max(x, y) for x, y in zip(a, b, strict=True))


@given(op=st.sampled_from(["MAXIMUM", "MINIMUM"]), dtype=st.sampled_from(["i8", "i16", "i32"]), s=shapes())
def test_c_matches_reference(op, dtype, s):
    assert_bit_exact(case(op, *s, dtype=dtype), samples=2)
