"""TABLE (i8 direct, i16 513-entry interpolated): generated C == numpy reference, hand-computed TOSA
examples (docs/semantics.md §11.13: x = -32768, x = 32767 using entry 512, negative fractions, maximal slope),
the slope REQUIRE and ERROR_IF conditions."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError, PlanError
from qcodegen.reference import run_reference
from qcodegen.testing import Const, Var, assert_bit_exact, prepare, step_schedule


def table16(values, shape=(8,), lo=None, hi=None):
    return step_schedule("TABLE", [Var(shape, "i16", lo, hi), Const(np.asarray(values), "i16")],
                         [(shape, "i32")])


def table8(values, shape=(8,)):
    return step_schedule("TABLE", [Var(shape, "i8"), Const(np.asarray(values), "i8")], [(shape, "i8")])


def lookup(sched, x):
    dt = sched.buffers["in0"].dtype.numpy
    return run_reference(prepare(sched), [np.asarray(x, dt)])["out0"].tolist()


RAMP = np.arange(513) * 10  # t[k] = 10 k, except a distinct last entry below
RAMP[512] = -1000


def test_i16_endpoints_and_fractions():
    x = [-32768, 32767, -1, -100, -129, 0, 127, 128]
    # idx = (x + 32768) >> 7, frac = x & 0x7F, out = t[idx] * 128 + (t[idx+1] - t[idx]) * frac
    want = [
        0,                                   # idx 0, frac 0
        5110 * 128 + (-1000 - 5110) * 127,   # idx 511, frac 127: entry 512 is used
        2550 * 128 + 10 * 127,               # -1: idx 255, frac 127
        2550 * 128 + 10 * 28,                # -100: idx 255, frac 28 (-100 & 0x7F)
        2540 * 128 + 10 * 127,               # -129: idx 254, frac 127
        2560 * 128,                          # 0: idx 256, frac 0
        2560 * 128 + 10 * 127,               # 127: idx 256, frac 127
        2570 * 128,                          # 128: idx 257, frac 0
    ]
    sched = table16(RAMP)
    assert lookup(sched, x) == want
    assert_bit_exact(sched, inputs=[[np.array(x, np.int16)]])


def test_i16_maximal_slopes():
    t = np.zeros(513, np.int64)
    t[1], t[3], t[4] = 32767, -32768, -1  # slopes +32767, -32767, -32768, +32767 at idx 0..3
    t[511], t[512] = 32767, -1  # slope -32768 at idx 511 (reached by x = 32767)
    x = np.array([-32641, -32513, -32385, -32257, 32767], np.int16)  # idx 0, 1, 2, 3, 511; frac 127 each
    want = [32767 * 127, 32767 * 128 - 32767 * 127, -32768 * 127, -32768 * 128 + 32767 * 127,
            32767 * 128 - 32768 * 127]
    assert lookup(table16(t, shape=(5,)), x) == want
    assert want == [4161409, 32767, -4161536, -32895, 32640]
    assert_bit_exact(table16(t, shape=(4, 64)), samples=2)


def test_i16_slope_require():
    t = np.zeros(513, np.int64)
    t[300], t[301] = -16384, 16384  # slope 32768 does not fit int16 (TOSA REQUIRE)
    with pytest.raises(PlanError, match="slope"):
        prepare(table16(t))
    # segment 300 starts at x = 300 * 128 - 32768 = 5632: an input range below it never reaches it
    sched = table16(t, lo=-32768, hi=5631)
    prepare(sched)
    # idx <= 299: t[299] = 0 and the slope into t[300] is -16384, times frac <= 127
    assert sched.buffers["out0"].value_range == (-16384 * 127, 0)
    assert_bit_exact(sched, samples=2)


def test_i8_direct_lookup():
    t = 127 - np.arange(256)  # t[k] = 127 - k
    assert lookup(table8(t, (4,)), [-128, 127, 0, -1]) == [127, -128, -1, 0]


def test_value_range_from_table():
    t = np.clip(np.arange(256) - 128, -10, 20)
    sched = prepare(table8(t))
    assert sched.buffers["out0"].value_range == (-10, 20)
    sched = prepare(table16(RAMP, lo=-32768, hi=-32768 + 255))  # idx 0..1, frac 0..127
    assert sched.buffers["out0"].value_range == (0, 10 * 128 + 10 * 127)  # x = -32513: idx 1, frac 127


@pytest.mark.parametrize("bad", [
    lambda: table16(np.zeros(512)),  # i16 needs 513 entries
    lambda: table8(np.zeros(257)),
    lambda: step_schedule("TABLE", [Var((4,), "i16"), Const(np.zeros(513), "i16")], [((4,), "i16")]),
    lambda: step_schedule("TABLE", [Var((4,), "i8"), Const(np.zeros(256), "i16")], [((4,), "i8")]),
    lambda: step_schedule("TABLE", [Var((4,), "i8"), Var((256,), "i8")], [((4,), "i8")]),  # not constant
    lambda: step_schedule("TABLE", [Var((4,), "i32"), Const(np.zeros(513), "i32")], [((4,), "i32")]),
])
def test_error_if(bad):
    with pytest.raises(GraphError):
        prepare(bad())


@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3), data=st.data())
def test_i16_c_matches_reference(shape, data):
    seed = data.draw(st.integers(0, 2**32 - 1))
    span = data.draw(st.sampled_from([100, 4000, 16384]))
    t = np.random.default_rng(seed).integers(-span, span, 513)  # |slope| < 2 span <= 32768
    assert_bit_exact(table16(t, tuple(shape)), samples=2)


@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3), seed=st.integers(0, 2**32 - 1))
def test_i8_c_matches_reference(shape, seed):
    t = np.random.default_rng(seed).integers(-128, 128, 256)
    assert_bit_exact(table8(t, tuple(shape)), samples=2)
