"""RESCALE_F32_AFFINE: round_half_even(f32(f32(f32(x) * scale) + offset)) emulated with integers in C
(runtime/qc_runtime.h qc_f32_affine) against the numpy float32 definition, and hand-computed cases.

The C is built once per test: 64 channels of different (scale, offset) pairs, each with values that reach every
path of the emulation -- f32(x) rounding (|x| > 2^24, ties of it), products that round, offsets far larger and far
smaller than the product (the jammed sticky bit), cancellation, results at ties of the final rounding, saturation."""

from __future__ import annotations

import numpy as np
import pytest

from qcodegen.errors import GraphError
from qcodegen.primitives.rescale_f32_affine import affine_f32, mantissa_exponent
from qcodegen.testing import Var, assert_bit_exact, c_vs_reference, step_schedule

F32 = np.float32


def _parameters(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    scales = np.concatenate([F32([1.0, 0.5, 2.0 ** -20, 1 / 3, 2.0 ** -100, 2.0 ** 60, 0.0]),
                             (10.0 ** rng.uniform(-9, 3, n - 7)).astype(F32)])
    offsets = np.concatenate([F32([0.0, -128.0, 127.0, 0.25, -1e-20, 1e9, 3.5]),
                              rng.choice([0.0, -128.0, 5.0, -0.375, 1e-3, -7e5, 123.456], n - 7).astype(F32)])
    return scales, offsets


def _values(rng: np.random.Generator, scale: float, offset: float, n: int) -> np.ndarray:
    """Random and edge values of x, a quarter of them near ties of the final rounding."""
    edges = np.array([0, 1, -1, 2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24 + 1), 2 ** 31 - 1, -2 ** 31, 2 ** 25 + 2])
    spread = rng.integers(-2 ** 31, 2 ** 31, n // 4)
    small = rng.integers(-3000, 3000, n // 4)
    near = []
    if scale > 0:
        ties = rng.integers(-2 ** 20, 2 ** 20, n // 4) + 0.5
        near = np.clip(np.round((ties - offset) / scale), -2 ** 31, 2 ** 31 - 1)
    x = np.concatenate([edges, spread, small, near]).astype(np.int64)
    return np.resize(x, n)


def test_matches_float32_on_every_path() -> None:
    rng = np.random.default_rng(7)
    channels, n = 64, 2048
    scales, offsets = _parameters(rng, channels)
    x = np.stack([_values(rng, float(s), float(o), n) for s, o in zip(scales, offsets, strict=True)], axis=1)
    sched = step_schedule("RESCALE_F32_AFFINE", [Var(x.shape, "i32")], [(x.shape, "i32")], scale=scales.tolist(),
                          offset=offsets.tolist(), axis=1)
    result = c_vs_reference(sched, samples=1, inputs=[[x.astype(np.int32)]])
    assert result.bit_exact, result.first_mismatch
    # the values really reach the interesting paths: f32(x) rounds, and final results sit on ties
    assert np.count_nonzero(np.abs(x) > 2 ** 24) > channels * n // 8
    exact = x * scales.astype(np.float64) + offsets.astype(np.float64)
    assert np.count_nonzero(np.abs(exact - np.floor(exact) - 0.5) < 1e-6) > 1000


def test_per_tensor_narrow_types_and_clamp() -> None:
    """i16 input, u8 output clamped to [3, 200]: offset 128 moves the zero."""
    sched = step_schedule("RESCALE_F32_AFFINE", [Var((257,), "i16")], [((257,), "u8")], scale=[0.0078125],
                          offset=[128.0], out_min=3, out_max=200)
    x = np.arange(-32768, 32768, 255, dtype=np.int16)[:257]
    assert_bit_exact(sched, samples=1, inputs=[[x]])


HAND = [  # x, scale, offset, result
    (2 ** 24 + 1, 1.0, 0.0, 2 ** 24),  # f32(x) rounds to even
    (2 ** 24 + 3, 1.0, 0.0, 2 ** 24 + 4),
    (5, 0.5, 0.0, 2),  # 2.5: half to even
    (7, 0.5, 0.0, 4),  # 3.5
    (5, 0.5, -128.0, -126),  # -125.5: half to even after the offset
    (65860, float(F32(0.0006453082314692438)), -128.0, -86),  # x * scale = 42.50000012 rounds to 42.5 in f32
    (1, 2.0 ** -100, 1e9, 10 ** 9),  # the product only reaches the sticky bit
]


def test_hand_computed() -> None:
    """Each case a channel of one schedule: the numpy definition and the C give the hand-computed results."""
    x, scale, offset, want = (np.array(column) for column in zip(*HAND, strict=True))
    assert np.array_equal(affine_f32(x, scale.astype(F32), offset.astype(F32)), want)
    sched = step_schedule("RESCALE_F32_AFFINE", [Var((1, len(HAND)), "i32")], [((1, len(HAND)), "i32")],
                          scale=scale.tolist(), offset=offset.tolist())
    assert_bit_exact(sched, samples=1, inputs=[[x.reshape(1, -1).astype(np.int32)]])


def test_mantissa_exponent_is_exact() -> None:
    values = F32([0.0, 1.0, -0.375, 1 / 3, 2.0 ** -100, 1e9])
    negative, mantissa, exponent = mantissa_exponent(values)
    assert np.all((mantissa == 0) | ((mantissa >= 2 ** 23) & (mantissa < 2 ** 24)))
    assert np.array_equal(np.where(negative, -1.0, 1.0) * np.ldexp(mantissa.astype(np.float64), exponent),
                          values.astype(np.float64))


@pytest.mark.parametrize(("attrs", "message"), [
    (dict(scale=[2.0 ** -120], offset=[0.0]), "every scale must be 0 or"),
    (dict(scale=[1.0], offset=[2.0 ** 50]), "every offset must be 0 or"),
    (dict(scale=[-1.0], offset=[0.0]), "scales >= 0"),
    (dict(scale=[1.0, 2.0], offset=[0.0]), "2 scales and 1 offsets"),
])
def test_checks(attrs: dict, message: str) -> None:
    from qcodegen.compiler import check_schedule
    sched = step_schedule("RESCALE_F32_AFFINE", [Var((2,), "i32")], [((2,), "i8")], **attrs)
    with pytest.raises(GraphError, match=message):
        check_schedule(sched)
