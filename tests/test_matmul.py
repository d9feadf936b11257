"""MATMUL: the reference == values computed by hand, ERROR_IFs, accumulator bounds, generated C == reference."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.reference import run_reference
from qcodegen.testing import Const, Var, assert_bit_exact, prepare, step_schedule

ACC = {"i8": "i32", "i16": "i48"}


def matmul_case(a_shape, b, dtype="i8", out_dtype=None, a_lo=None, a_hi=None, **attrs):
    """b: an array (constant B) or a shape (variable B)."""
    n, h, _ = a_shape
    b_in = Var(b, dtype) if isinstance(b, tuple) else Const(np.asarray(b), dtype)
    w = b[2] if isinstance(b, tuple) else np.shape(b)[2]
    return step_schedule("MATMUL", [Var(a_shape, dtype, a_lo, a_hi), b_in], [((n, h, w), out_dtype or ACC[dtype])],
                         **attrs)


def test_hand_computed_with_zero_points():
    # A - a_zp = [[1, 2], [3, 4]], B - b_zp = [[5, 6], [7, 8]] -> [[19, 22], [43, 50]]
    a = (np.array([[1, 2], [3, 4]]) - 3).astype(np.int8).reshape(1, 2, 2)
    b = (np.array([[5, 6], [7, 8]]) + 10).reshape(1, 2, 2)
    sched = prepare(matmul_case((1, 2, 2), b, a_zp=-3, b_zp=10))
    assert run_reference(sched, [a])["out0"].tolist() == [[[19, 22], [43, 50]]]


def test_hand_computed_i16_i48():
    # (-32768)^2 * 2 = 2^31 needs more than int32
    a = np.full((1, 1, 2), -32768, np.int16)
    sched = prepare(matmul_case((1, 1, 2), (1, 2, 1), "i16"))
    out = run_reference(sched, [a, np.full((1, 2, 1), -32768, np.int16)])["out0"]
    assert out.reshape(-1).tolist() == [1 << 31]


@pytest.mark.parametrize("bad", [
    dict(a_shape=(1, 2, 3), b=(1, 4, 2)),  # C mismatch
    dict(a_shape=(2, 2, 3), b=(1, 3, 2)),  # N mismatch
    dict(a_shape=(1, 2, 3), b=(1, 3, 2), dtype="i16", a_zp=1),  # zero point only for i8
    dict(a_shape=(1, 2, 3), b=(1, 3, 2), b_zp=-129),  # outside i8
    dict(a_shape=(1, 2, 3), b=(1, 3, 2), out_dtype="i48"),  # i8 accumulates in i32
])
def test_error_if(bad):
    with pytest.raises(GraphError):
        prepare(matmul_case(**bad))


def test_mixed_input_types_rejected():
    sched = step_schedule("MATMUL", [Var((1, 2, 3), "i8"), Var((1, 3, 2), "i16")], [((1, 2, 2), "i32")])
    with pytest.raises(GraphError, match="both"):
        prepare(sched)


def test_bound_from_constant_b():
    # A - a_zp in [-2, 3]; columns of B: (1, -4) and (0, 2)
    sched = prepare(matmul_case((1, 1, 2), np.array([[1, 0], [-4, 2]]).reshape(1, 2, 2), a_lo=-1, a_hi=4, a_zp=1))
    # column 0: [-2, 3] + [-12, 8]; column 1: [-4, 6]
    assert sched.steps[0].acc_bound == (-14, 11)


@pytest.mark.parametrize("c, overflows", [(33025, False), (33026, True)])
def test_i32_overflow(c, overflows):
    # variable B: (A + 128)(B + 128) reaches 255 * 255 per term
    step = prepare(matmul_case((1, 1, c), (1, c, 1), a_zp=-128, b_zp=-128)).steps[0]
    assert step.acc_bound == (0, c * 255 * 255)
    assert (step.widened is not None) == overflows  # widened: an int64 accumulator
    assert not overflows or "MATMUL" in step.widened.reason and "overflow" in step.widened.reason


@given(dtype=st.sampled_from(["i8", "i16"]), const_b=st.booleans(), dims=st.tuples(*[st.integers(1, 9)] * 4),
       zps=st.tuples(st.sampled_from([0, -128, 127]) | st.integers(-128, 127), st.integers(-128, 127)),
       seed=st.integers(0, 2**32 - 1))
def test_c_matches_reference(dtype, const_b, dims, zps, seed):
    n, h, c, w = dims
    n = min(n, 3)
    if const_b:
        lo, hi = (-128, 127) if dtype == "i8" else (-32768, 32767)
        b = np.random.default_rng(seed).integers(lo, hi, (n, c, w), endpoint=True)
    else:
        b = (n, c, w)
    a_zp, b_zp = zps if dtype == "i8" else (0, 0)
    assert_bit_exact(matmul_case((n, h, c), b, dtype, a_zp=a_zp, b_zp=b_zp), samples=2)
