"""REVERSE, TILE (data movement) and REDUCE_ALL, REDUCE_ANY (bool reductions), TOSA 1.0: hand-computed
examples, ERROR_IFs, and generated C == numpy reference over random shapes (bool data included)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.errors import GraphError
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def ref(sched, x):
    return run_reference(prepare(sched), [np.asarray(x, sched.buffers["in0"].dtype.numpy)])["out0"].tolist()


def one(op, shape, out_shape, dt="i8", **attrs):
    return step_schedule(op, [Var(shape, dt)], [(out_shape, dt)], **attrs)


def test_examples():
    x = [[1, 2, 3], [4, 5, 6]]
    assert ref(one("REVERSE", (2, 3), (2, 3), axis=1), x) == [[3, 2, 1], [6, 5, 4]]
    assert ref(one("REVERSE", (2, 3), (2, 3), axis=0), x) == [[4, 5, 6], [1, 2, 3]]
    assert ref(one("TILE", (1, 2), (2, 4), multiples=[2, 2]), [[1, 2]]) == [[1, 2, 1, 2], [1, 2, 1, 2]]
    b = [[True, False], [True, True]]
    assert ref(one("REDUCE_ALL", (2, 2), (2, 1), "bool", axis=1), b) == [[False], [True]]
    assert ref(one("REDUCE_ANY", (2, 2), (1, 2), "bool", axis=0), b) == [[True, True]]
    assert ref(one("REDUCE_ALL", (2, 2), (1, 2), "bool", axis=0), b) == [[True, False]]


@pytest.mark.parametrize("op, shape, out, attrs, message", [
    ("REVERSE", (2, 3), (2, 3), {"axis": 2}, "axis 2 out of range"),
    ("REVERSE", (2, 3), (2, 3), {"axis": -1}, "axis -1 out of range"),
    ("TILE", (2, 3), (4, 3), {"multiples": [2]}, "1 multiples for rank 2"),
    ("TILE", (2, 3), (4, 3, 1), {"multiples": [2, 1]}, "output rank"),
    ("TILE", (2, 3), (4, 6), {"multiples": [2, 1]}, "output shapes"),
    ("REDUCE_ANY", (2, 3), (2, 3), {"axis": 1}, "output shapes"),
])
def test_error_if(op, shape, out, attrs, message):
    with pytest.raises(GraphError, match=message):
        prepare(one(op, shape, out, **attrs))


def test_reduce_all_needs_bool():
    with pytest.raises(GraphError, match="not one of"):
        prepare(one("REDUCE_ALL", (2, 3), (2, 1), "i8", axis=1))


@given(shapes, st.data())
def test_c_matches_reference(shape, data):
    dt = data.draw(st.sampled_from(["bool", "i8", "i16", "i32"]))
    axis = data.draw(st.integers(0, len(shape) - 1))
    multiples = data.draw(st.lists(st.integers(1, 3), min_size=len(shape), max_size=len(shape)))
    assert_bit_exact(one("REVERSE", shape, shape, dt, axis=axis), samples=2)
    assert_bit_exact(one("TILE", shape, tuple(d * m for d, m in zip(shape, multiples, strict=True)), dt,
                         multiples=multiples), samples=2)
    reduced = tuple(1 if k == axis else d for k, d in enumerate(shape))
    assert_bit_exact(one(data.draw(st.sampled_from(["REDUCE_ALL", "REDUCE_ANY"])), shape, reduced, "bool",
                         axis=axis), samples=3)
