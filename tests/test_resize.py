"""RESIZE (TOSA 1.0): hand-computed NEAREST/BILINEAR examples from the integer coordinate pseudocode, ERROR_IFs,
value ranges, and generated C == numpy reference over random geometries (i8 and i16, both modes)."""

import dataclasses
import shutil

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.codegen import load_target
from qcodegen.errors import GraphError
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule

OUT = {("i8", "NEAREST"): "i8", ("i8", "BILINEAR"): "i32", ("i16", "NEAREST"): "i16", ("i16", "BILINEAR"): "i48"}


def extent(size, n, d, offset, border):
    return ((size - 1) * n - offset + border) // d + 1


def resize(x_shape, dt, mode, scale, offset=(0, 0), border=(0, 0)):
    _, ih, iw, c = x_shape
    oh = extent(ih, scale[0], scale[1], offset[0], border[0])
    ow = extent(iw, scale[2], scale[3], offset[1], border[1])
    return step_schedule("RESIZE", [Var(x_shape, dt)], [((x_shape[0], oh, ow, c), OUT[(dt, mode)])],
                         scale=list(scale), offset=list(offset), border=list(border), mode=mode)


def ref(sched, x):
    return run_reference(prepare(sched), [np.asarray(x, np.int8)])["out0"].reshape(-1).tolist()


def test_examples():
    x = [[[[10], [20]]]]  # 1x1x2x1
    # upscale x by 2: positions 0, 1/2, 1 -> weights (2, 0), (1, 1), (0, 2) of x_n = 2
    assert ref(resize((1, 1, 2, 1), "i8", "BILINEAR", (1, 1, 2, 1)), x) == [20, 30, 40]
    assert ref(resize((1, 1, 2, 1), "i8", "NEAREST", (1, 1, 2, 1)), x) == [10, 20, 20]  # 2 dx >= x_n: upper
    # offset -1: x = -1 -> ix = floor(-1 / 2) = -1, dx = 1, both taps clamp to column 0
    assert ref(resize((1, 1, 2, 1), "i8", "BILINEAR", (1, 1, 2, 1), offset=(0, -1)), x) == [20, 20, 30, 40]
    # downscale by 2 with scale 1/2: every other column
    assert ref(resize((1, 1, 5, 1), "i8", "NEAREST", (1, 1, 1, 2)), [[[[1], [2], [3], [4], [5]]]]) == [1, 3, 5]


def test_value_range_bilinear():
    sched = prepare(step_schedule("RESIZE", [Var((1, 2, 2, 1), "i8", -3, 5)], [((1, 3, 3, 1), "i32")],
                                  scale=[4, 2, 4, 2], offset=[0, 0], border=[0, 0], mode="BILINEAR"))
    assert sched.buffers["out0"].value_range == (-3 * 16, 5 * 16)


@pytest.mark.parametrize("scale, offset, border, message", [
    ((0, 1, 1, 1), (0, 0), (0, 0), "must be positive"),
    ((4096, 1, 1, 1), (0, 0), (0, 0), "> 2048"),
    ((1, 16, 1, 1), (0, 0), (0, 0), "downscale"),
    ((2, 1, 1, 1), (-3, 0), (0, 0), "offset_y"),
    ((2, 1, 1, 1), (0, 0), (2, 0), "border_y"),
    ((2, 4, 1, 1), (0, 0), (0, 0), "not exact"),
])
def test_error_if(scale, offset, border, message):
    sched = step_schedule("RESIZE", [Var((1, 4, 4, 1), "i8")], [((1, 4, 4, 1), "i8")], scale=list(scale),
                          offset=list(offset), border=list(border), mode="NEAREST")
    with pytest.raises(GraphError, match=message):
        prepare(sched)


def test_error_if_types():
    sched = step_schedule("RESIZE", [Var((1, 2, 2, 1), "i8")], [((1, 2, 2, 1), "i8")], scale=[1, 1, 1, 1],
                          offset=[0, 0], border=[0, 0], mode="BILINEAR")
    with pytest.raises(GraphError, match="gives i32"):
        prepare(sched)


@st.composite
def geometries(draw):
    dt, mode = draw(st.sampled_from(sorted(OUT)))
    ih, iw, c = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    axes = []
    for size in (ih, iw):
        n = draw(st.integers(1, 12))
        d = draw(st.integers(1, min(15 * n, 12)))
        offset = draw(st.integers(-n, min(16 * n - 1, 20)))
        border_lo = -16 * n
        span = (size - 1) * n - offset
        # choose the border so that the output extent is exact and at least 1
        candidates = [b for b in range(border_lo, n) if (span + b) % d == 0 and span + b >= 0]
        if not candidates:
            axes.append((1, 1, 0, 0))
            continue
        axes.append((n, d, offset, draw(st.sampled_from(candidates))))
    (yn, yd, oy, by), (xn, xd, ox, bx) = axes
    return (1, ih, iw, c), dt, mode, (yn, yd, xn, xd), (oy, ox), (by, bx)


@given(geometries())
def test_c_matches_reference(geometry):
    x_shape, dt, mode, scale, offset, border = geometry
    assert_bit_exact(resize(x_shape, dt, mode, scale, offset, border), samples=2)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
@pytest.mark.parametrize("dt, mode", sorted(OUT))
def test_clang_sanitizers(dt, mode):
    target = dataclasses.replace(load_target("generic"), cc="clang")
    sched = resize((2, 3, 4, 2), dt, mode, (5, 3, 3, 2), offset=(-2, 1), border=(0, -2))
    assert_bit_exact(sched, samples=2, runner="harness", target=target,
                     extra_cflags=("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"))
