"""Per-ISA overrides of the convolution dot products (templates/<isa>/_dot.c.j2, hooks in
templates/generic/_dot.c.j2): on every target that has one and whose tools exist here, CONV2D stays bit-exact
with the reference for awkward row lengths (vector main loops, 8-element and scalar tails, tail
predication), for the blocked rows and the remainder rows of the output channels, with extreme values
(-128 * -128 products summed over 1000 taps) and non-zero input zero points (the weight-row correction)."""

from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import generate, list_targets
from qcodegen.codegen.targets import Target
from qcodegen.plan.schedule import Schedule
from qcodegen.testing import Const, Var, prepare, step_schedule, verify_planned
from qcodegen.verify.runners import unavailable

SIMD = [t.name for t in list_targets() if any((d / "_dot.c.j2").is_file() for d in t.template_dirs()[:-1])]
LENGTHS = {1: 0, 3: -128, 15: 127, 16: 0, 17: -5, 33: 127, 1000: -128}  # row length: input zero point
OC = 5  # four blocked rows (or two pairs) and a remainder row


@pytest.fixture(params=SIMD)
def target(request) -> Target:
    tgt = next(t for t in list_targets() if t.name == request.param)
    reason = unavailable(tgt)
    if reason:
        pytest.skip(f"{tgt.name}: {reason}")
    return tgt


def _weights(oc: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Row 0 all -128, row 1 all 127, the others random over the whole int8 range."""
    w = rng.integers(-128, 128, (oc, k))
    w[0], w[1] = -128, 127
    return w


def _conv(x_shape, w: np.ndarray, out_shape, izp: int, wzp: int = 0, op: str = "CONV2D", **attrs) -> Schedule:
    attrs = dict(dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1]), **attrs)
    bias = Const(np.arange(out_shape[-1]) * 37 - 70, "i32")
    return step_schedule(op, [Var(x_shape, "i8"), Const(w, "i8"), bias], [(out_shape, "i32")], input_zp=izp,
                         weight_zp=wzp, acc_type="i32", **attrs)


def _generated(sched: Schedule, target: Target, tmp_path: Path) -> str:
    prepare(sched)
    generate(sched, tmp_path, target)
    return (tmp_path / "t.c").read_text()


def _check(sched: Schedule, target: Target, extremes: list[np.ndarray]) -> None:
    rng = np.random.default_rng(3)
    shape = sched.buffers[sched.inputs[0]].shape
    samples = [[rng.integers(-128, 128, shape).astype(np.int8)]] + [[e.astype(np.int8)] for e in extremes]
    result = verify_planned(sched, target=target, inputs=samples)
    assert result.bit_exact, f"{target.name}: {result.mismatches} mismatches, first {result.first_mismatch}"


@pytest.mark.parametrize("k", list(LENGTHS))
def test_pointwise_row_lengths(target, k, tmp_path):
    """1x1 convolution over 3 pixels read in place (unaligned rows), k input channels."""
    w = _weights(OC, k, np.random.default_rng(k)).reshape(OC, 1, 1, k)
    sched = _conv((1, 1, 3, k), w, (1, 1, 3, OC), izp=LENGTHS[k])
    assert "qc_dot_rows_s8(xp" in _generated(sched, target, tmp_path)
    _check(sched, target, [np.full((1, 1, 3, k), -128), np.full((1, 1, 3, k), 127)])


def test_padded_window_gathered(target, tmp_path):
    """3x3 window with padding, stride and dilation, gathered into the stack buffer: K = 3 * 3 * 7 = 63."""
    w = _weights(6, 63, np.random.default_rng(9)).reshape(6, 3, 3, 7)
    sched = _conv((1, 6, 5, 7), w, (1, 3, 2, 6), izp=-128, pad=[1, 0, 2, 0], stride=[2, 2], dilation=[1, 2],
                  pad_value=-128)
    assert "qc_dot_rows_s8(xp" in _generated(sched, target, tmp_path)
    _check(sched, target, [np.full((1, 6, 5, 7), -128), np.full((1, 6, 5, 7), 127)])


def test_weight_zero_point_uses_generic_loops(target, tmp_path):
    """A non-zero weight zero point is not handled by the overrides: the portable loops run instead."""
    w = _weights(OC, 17, np.random.default_rng(4)).reshape(OC, 1, 1, 17)
    sched = _conv((1, 2, 2, 17), w, (1, 2, 2, OC), izp=3, wzp=-7)
    c = _generated(sched, target, tmp_path)
    assert "qc_dot_rows_s8(xp" not in c and "qc_dot_s8(xp" not in c
    _check(sched, target, [np.full((1, 2, 2, 17), -128)])


@pytest.mark.parametrize("m", [1, 2])
def test_depthwise_taps(target, m, tmp_path):
    """DEPTHWISE_CONV2D over 19 channels (vector main loop and predicated or scalar tail), clipped windows;
    the override (where the target has one) takes the taps of multiplier 1, the portable loops the others."""
    w = _weights(3 * 3, 19 * m, np.random.default_rng(m)).reshape(3, 3, 19, m)
    sched = _conv((1, 5, 4, 19), w, (1, 5, 4, 19 * m), izp=-128, op="DEPTHWISE_CONV2D", pad=[1, 1, 1, 1])
    c = _generated(sched, target, tmp_path)
    assert ("qc_mla_s8(acc" in c) == (m == 1 and "void qc_mla_s8(" in c)
    _check(sched, target, [np.full((1, 5, 4, 19), -128), np.full((1, 5, 4, 19), 127)])
