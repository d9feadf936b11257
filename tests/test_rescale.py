"""RESCALE: generated C == numpy reference, and the reference == values computed by hand from the spec."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.fixedpoint import Rounding, Unpredictable, apply_scale_32
from qcodegen.ir.rescale import RescaleParams
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule

ROUNDINGS = ["single_round", "double_round", "half_even", "inexact_round"]


def rescale_case(x_dtype, out_dtype, mult, shift, izp=0, ozp=0, rounding="single_round", shape=(4, 3), lo=None,
                 hi=None, **kw):
    return step_schedule("RESCALE", [Var(shape, x_dtype, lo, hi)], [(shape, out_dtype)], multiplier=mult,
                         shift=shift, input_zp=izp, output_zp=ozp, scale32=kw.pop("scale32", True),
                         rounding=rounding, **kw)


def test_double_round_table_from_semantics():
    # docs/semantics.md §5.3 table: m = 2^30, shift 33
    x = np.array([3, -4, -12], np.int64)
    assert apply_scale_32(x, 1 << 30, 33, Rounding.SINGLE).tolist() == [0, 0, -1]
    assert apply_scale_32(x, 1 << 30, 33, Rounding.DOUBLE).tolist() == [1, -1, -2]


def test_reference_example_from_semantics():
    # docs/semantics.md §3.4: RESCALE i32 -> i8, m = 2^30, shift 33, double round: [3, -3, -4, -12] -> [1, 0, -1, -2]
    sched = prepare(rescale_case("i32", "i8", [1 << 30], [33], rounding="double_round", shape=(4,)))
    out = run_reference(sched, [np.array([3, -3, -4, -12], np.int32)])["out0"]
    assert out.tolist() == [1, 0, -1, -2]


def test_value_require_is_unpredictable():
    with pytest.raises(Unpredictable):
        apply_scale_32(np.array([(1 << 31) - 1]), 1 << 30, 31)


@pytest.mark.parametrize("shift", [2, 31, 32, 62])
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_shift_boundaries(shift, rounding):
    bound = (1 << (shift - 1)) if shift <= 31 else None
    lo, hi = (-bound, bound - 1) if bound else (None, None)
    assert_bit_exact(rescale_case("i32", "i32", [(1 << 31) - 1], [shift], rounding=rounding, lo=lo, hi=hi,
                                  shape=(64,)), samples=2)


def test_unsigned_io_and_zero_points():
    assert_bit_exact(rescale_case("i8", "i8", [1 << 30], [30], izp=-128, ozp=0, output_unsigned=True,
                                  shape=(3, 7)))
    assert_bit_exact(rescale_case("u8", "i8", [1 << 30], [30], izp=128, ozp=0, shape=(3, 7)))
    assert_bit_exact(rescale_case("i8", "i8", [1 << 30], [30], izp=128, ozp=-128, input_unsigned=True,
                                  shape=(3, 7)))
    assert_bit_exact(rescale_case("u16", "i16", [1 << 30], [30], izp=32768, shape=(5,)))


@pytest.mark.parametrize("bad", [
    dict(x_dtype="i32", out_dtype="u8", mult=[1 << 30], shift=[30]),
    dict(x_dtype="i8", out_dtype="i8", mult=[1 << 30], shift=[30], input_unsigned=True, output_unsigned=True),
    dict(x_dtype="i16", out_dtype="i8", mult=[1 << 30], shift=[30], izp=3),
    dict(x_dtype="i48", out_dtype="i32", mult=[1 << 30], shift=[30]),
    dict(x_dtype="i16", out_dtype="i8", mult=[1 << 14], shift=[14], scale32=False, rounding="double_round"),
    dict(x_dtype="i8", out_dtype="i32", mult=[1 << 30], shift=[30], ozp=1),
])
def test_error_if_rejected(bad):
    with pytest.raises(GraphError):
        prepare(rescale_case(**bad))


@given(
    in_out=st.sampled_from([("i8", "i8"), ("i8", "i32"), ("i16", "i16"), ("i32", "i8"), ("i32", "i16"),
                            ("i16", "i32"), ("i32", "i32"), ("u8", "i8"), ("i8", "u8")]),
    rounding=st.sampled_from(ROUNDINGS),
    per_channel=st.booleans(),
    channels=st.integers(1, 5),
    rows=st.integers(1, 4),
    data=st.data(),
)
def test_rescale_c_matches_reference(in_out, rounding, per_channel, channels, rows, data):
    x_dtype, out_dtype = in_out
    n = channels if per_channel else 1
    shifts = data.draw(st.lists(st.integers(32, 62) if x_dtype == "i32" else st.integers(2, 62), min_size=n,
                                max_size=n))
    mults = data.draw(st.lists(st.one_of(st.integers(0, (1 << 31) - 1), st.just((1 << 31) - 1),
                                         st.just(1 << 30)), min_size=n, max_size=n))
    izp = data.draw(st.integers(-128, 127)) if x_dtype == "i8" else (128 if x_dtype == "u8" else 0)
    ozp = data.draw(st.integers(-128, 127)) if out_dtype == "i8" else (data.draw(st.integers(0, 255))
                                                                         if out_dtype == "u8" else 0)
    lo = hi = None
    if min(shifts) <= 31 and x_dtype in ("i8", "i16", "u8"):
        # keep |value| < 2^(shift-1) (TOSA REQUIRE) for small shifts
        bound = (1 << (min(shifts) - 1))
        if x_dtype == "i8":
            lo, hi = max(-128, izp - bound), min(127, izp + bound - 1)
        elif x_dtype == "u8":
            lo, hi = max(0, izp - bound), min(255, izp + bound - 1)
        else:
            lo, hi = -bound, bound - 1
    sched = rescale_case(x_dtype, out_dtype, mults, shifts, izp=izp, ozp=ozp, rounding=rounding,
                         shape=(rows, channels), per_channel=per_channel, lo=lo, hi=hi)
    assert_bit_exact(sched, samples=2)


def test_scale16_i48_input():
    assert_bit_exact(rescale_case("i48", "i16", [1 << 14], [30], scale32=False, shape=(9,),
                                  lo=-(1 << 40), hi=(1 << 40)))


@given(st.lists(st.tuples(st.integers(0, (1 << 31) - 1), st.integers(2, 62)), min_size=1, max_size=4),
       st.integers(-128, 127), st.integers(-128, 127), st.sampled_from(list(Rounding)), st.booleans(),
       st.one_of(st.none(), st.integers(-128, 0)), st.one_of(st.none(), st.lists(st.integers(0, 1), min_size=1)))
def test_rescale_params_attrs_round_trip(pairs, izp, ozp, rounding, unsigned_out, out_min, odd):
    """The step attrs (TOSA names) carry every field: reading them back gives the same parameters."""
    params = RescaleParams(multiplier=[np.int64(m) for m, _ in pairs], shift=[s for _, s in pairs], input_zp=izp,
                           output_zp=ozp, rounding=rounding.value, per_channel=len(pairs) > 1,
                           output_unsigned=unsigned_out, out_min=out_min, odd_ties=odd)
    attrs = params.to_attrs()
    assert RescaleParams.from_attrs(attrs) == params
    assert all(type(v) is int for v in attrs["multiplier"] + attrs["shift"])
    assert ("output_unsigned" in attrs) == unsigned_out and ("out_max" not in attrs)
    assert params.ties_to_odd == (tuple(odd) if odd is not None else (ozp % 2,))
