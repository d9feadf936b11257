"""GATHER and SCATTER (TOSA 1.0): hand-computed examples, REQUIRE violations (index out of range, a row written
twice), ERROR_IFs, and generated C == numpy reference."""

import dataclasses
import shutil

import numpy as np
import pytest

from qcodegen.codegen import load_target
from qcodegen.errors import GraphError
from qcodegen.fixedpoint import Unpredictable
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule


def indices(n, w, k, valid):
    """Random test indices stay in [0, K) when `valid`."""
    return Var((n, w), "i32", 0, k - 1) if valid else Var((n, w), "i32")


def gather(n, k, c, w, dt="i16", valid=True):
    return step_schedule("GATHER", [Var((n, k, c), dt), indices(n, w, k, valid)], [((n, w, c), dt)])


def scatter(n, k, c, w, dt="i16", valid=True):
    return step_schedule("SCATTER", [Var((n, k, c), dt), indices(n, w, k, valid), Var((n, w, c), dt)],
                         [((n, k, c), dt)])


def ref(sched, *xs):
    arrays = [np.asarray(x, sched.buffers[n].dtype.numpy) for x, n in zip(xs, sched.inputs, strict=True)]
    return run_reference(prepare(sched), arrays)["out0"].tolist()


def test_examples():
    values = [[[1, 2], [3, 4], [5, 6]]]
    assert ref(gather(1, 3, 2, 3), values, [[2, 0, 2]]) == [[[5, 6], [1, 2], [5, 6]]]
    assert ref(scatter(1, 3, 2, 2), np.zeros((1, 3, 2)), [[2, 0]], [[[7, 8], [9, 10]]]) == [
        [[9, 10], [0, 0], [7, 8]]]


def test_require_violations():
    with pytest.raises(Unpredictable, match="outside"):
        ref(gather(1, 3, 1, 1, valid=False), [[[1], [2], [3]]], [[3]])
    with pytest.raises(Unpredictable, match="written twice"):
        ref(scatter(1, 3, 1, 2), np.zeros((1, 3, 1)), [[1, 1]], [[[7], [8]]])


@pytest.mark.parametrize("ins, out, message", [
    ([((1, 3, 2), "i8"), ((1, 2), "i16")], ((1, 2, 2), "i8"), "indices must be i32"),
    ([((1, 3, 2), "i8"), ((2, 2), "i32")], ((1, 2, 2), "i8"), r"indices must be \[N, W\]"),
    ([((3, 2), "i8"), ((1, 2), "i32")], ((1, 2, 2), "i8"), "rank 3"),
    ([((1, 3, 2), "i8"), ((1, 2), "i32")], ((1, 3, 2), "i8"), "output shapes"),
])
def test_gather_error_if(ins, out, message):
    with pytest.raises(GraphError, match=message):
        prepare(step_schedule("GATHER", [Var(s, dt) for s, dt in ins], [out]))


def test_scatter_input_shape_error_if():
    sched = step_schedule("SCATTER", [Var((1, 3, 2), "i8"), Var((1, 2), "i32"), Var((1, 2, 3), "i8")],
                          [((1, 3, 2), "i8")])
    with pytest.raises(GraphError, match="input must be"):
        prepare(sched)


@pytest.mark.parametrize("dt", ["bool", "i8", "i16", "i32"])
def test_gather_c_matches_reference(dt):
    assert_bit_exact(gather(2, 5, 3, 4, dt), samples=3)


@pytest.mark.parametrize("dt", ["i8", "i32"])
def test_scatter_c_matches_reference(dt):
    rng = np.random.default_rng(0)
    sched = scatter(2, 6, 3, 4, dt)
    batches = []
    for _ in range(3):  # distinct rows per batch (a row written twice is unpredictable)
        idx = np.stack([rng.permutation(6)[:4] for _ in range(2)]).astype(np.int32)
        values = rng.integers(-100, 100, size=(2, 6, 3)).astype(dt.replace("i", "int"))
        x = rng.integers(-100, 100, size=(2, 4, 3)).astype(dt.replace("i", "int"))
        batches.append([values, idx, x])
    assert_bit_exact(sched, inputs=batches)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
def test_clang_sanitizers():
    target = dataclasses.replace(load_target("generic"), cc="clang")
    assert_bit_exact(gather(2, 4, 3, 5, "i8"), samples=2, runner="harness", target=target,
                     extra_cflags=("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"))
