"""onnxruntime's float32 requantization as single rounding (qcodegen/semantics/f32_single_rounding.py,
docs/semantics.md §14.5): the window bound, the enumerated exceptions, the adjusted multipliers and the RESCALE the
planner puts in place of a RESCALE_F32 equal the float32 definition (numpy float32) on every accumulator swept;
each sweep also shows that a window one bit smaller is wrong."""

import numpy as np
import pytest

from qcodegen import primitives
from qcodegen.ir.schedule import Step, StepIO
from qcodegen.plan.single_round import as_rescale
from qcodegen.primitives.rescale_f32 import mantissa_exponent, requantize_f32
from qcodegen.semantics import f32_single_rounding as single
from qcodegen.testing import Var, assert_bit_exact, c_vs_reference, step_schedule

F32 = np.float32
WIDE = (-(1 << 31), (1 << 31) - 1)
CHUNK = 1 << 22


def in_window(a: np.ndarray, m: int, k: int, w: int) -> np.ndarray:
    """|a * m - h * 2^k| <= w for x's nearest half-integer h: with t = a * m + 2^(k-1) + w, the low k bits of t
    are at most 2 w. (The form of the C test: one add of a constant, a mask and a compare.)"""
    t = np.asarray(a, np.int64) * np.int64(m) + np.int64((1 << (k - 1)) + w)
    return (t & np.int64((1 << k) - 1)) <= 2 * w


def fast_requantize(a: np.ndarray, m: int, k: int, w: int) -> np.ndarray:
    """round_half_even(f32(f32(a) * s)) as single rounding outside the window, the exact float32 evaluation
    inside it (|a| <= the bound that `w` was computed for)."""
    a = np.asarray(a, np.int64)
    scale = np.float32(m * 2.0 ** -k)
    inside = in_window(a, m, k, w)
    out = single.single_round(a, m, k)
    out[inside] = requantize_f32(a[inside], scale).astype(np.int64)
    return out


def exceptions(m: int, k: int, acc: tuple[int, int], out: tuple[int, int], w: int | None = None) -> np.ndarray:
    """The accumulators a in [acc[0], acc[1]] where clamp(single(a), out) != clamp(reference(a), out), sorted (w:
    the window searched, default `window`)."""
    a = single.candidates(m, k, single.window(m, k, max(-acc[0], acc[1])) if w is None else w, acc, out)
    reference = requantize_f32(a, np.float32(m * 2.0 ** -k))
    return np.unique(a[np.clip(single.single_round(a, m, k), *out) != np.clip(reference, *out)])


def _mk(scale: float) -> tuple[int, int]:
    m, k = mantissa_exponent(F32(scale))
    return int(m[0]), int(k[0])


def _scales() -> list[float]:
    """Ties-heavy mantissas (1 + 2^-23, 2 - 2^-23, powers of two) at several exponents, and random ones."""
    ties = [2.0 ** -9 * (1 + 2.0 ** -23), 2.0 ** -2 * (2 - 2.0 ** -23), 2.0 ** -11 * (2 - 2.0 ** -23), 0.5]
    rng = np.random.default_rng(17)
    return ties + [float(F32(s)) for s in np.exp(rng.uniform(np.log(1e-5), np.log(0.9), 3))]


def test_every_accumulator_to_2_24():
    """Over every a in [-2^24, 2^24]: the fast path == the definition, and the exceptions enumerated from the window
    are exactly the accumulators where single rounding differs; with the window halved, the fast path is wrong
    somewhere and the enumeration misses exceptions."""
    bound = 1 << 24
    halved_wrong, halved_missed = 0, 0
    for scale in _scales():
        m, k = _mk(scale)
        w = single.window(m, k, bound)
        differs = []
        for start in range(-bound, bound + 1, CHUNK):
            a = np.arange(start, min(start + CHUNK, bound + 1), dtype=np.int64)
            ref = requantize_f32(a, F32(scale)).astype(np.int64)
            off = single.single_round(a, m, k) != ref  # the fast path is wrong where off and outside the window
            assert not np.any(off & ~in_window(a, m, k, w)), scale
            halved_wrong += np.count_nonzero(off & ~in_window(a, m, k, w >> 1))
            differs.append(a[off])
        truth = np.concatenate(differs)
        assert np.array_equal(exceptions(m, k, (-bound, bound), WIDE), truth), scale
        halved_missed += truth.size - exceptions(m, k, (-bound, bound), WIDE, w >> 1).size
    assert halved_wrong > 0 and halved_missed > 0


def test_beyond_2_24():
    """Accumulators whose float32 conversion rounds: random int32 through the fast path with the window of the
    whole int32 range, and every a of two 2^20-wide ranges near 2^27 and -2^30 against the enumeration (scales
    below 1/64: larger ones make every accumulator there a candidate)."""
    rng = np.random.default_rng(3)
    a = rng.integers(-(1 << 31), 1 << 31, 1 << 19)
    halved_missed = 0
    for scale in _scales():
        m, k = _mk(scale)
        ref = requantize_f32(a, F32(scale)).astype(np.int64)
        assert np.array_equal(fast_requantize(a, m, k, single.window(m, k, 1 << 31)), ref), scale
        if scale > 1 / 64:
            continue
        for lo in ((1 << 27) - (1 << 19), -(1 << 30)):
            acc = (lo, lo + (1 << 20) - 1)
            span = np.arange(acc[0], acc[1] + 1, dtype=np.int64)
            truth = span[single.single_round(span, m, k) != requantize_f32(span, F32(scale))]
            assert np.array_equal(exceptions(m, k, acc, WIDE), truth), (scale, lo)
            w = single.window(m, k, max(abs(acc[0]), abs(acc[1])))
            halved_missed += truth.size - exceptions(m, k, acc, WIDE, w >> 1).size
    assert halved_missed > 0


def _ranges() -> list[tuple[float, tuple[int, int], tuple[int, int]]]:
    rng = np.random.default_rng(5)
    cases = []
    for i in range(40):
        scale = float(F32(np.exp(rng.uniform(np.log(2e-5), np.log(5e-3)))))
        bound = int(rng.integers(1 << 14, 1 << 20))
        out = ((-128, 127), (0, 255), (-128, 0), (-32768, 32767))[i % 4]
        cases.append((scale, (-bound, bound + int(rng.integers(0, 1000))), out))
    return cases


def _single_rounding_errors(cases, max_exceptions: int = 0) -> tuple[int, int, int]:
    """(cases solved, of them the accumulators where the chosen multiplier with its exceptions is wrong, the
    exceptions listed; each exception is checked to be an accumulator where the multiplier alone is wrong, so
    that dropping one makes the case wrong)"""
    solved, wrong, listed = 0, 0, 0
    for scale, acc, out in cases:
        m, k = _mk(scale)
        found = single.single_rounding(m, k, acc, out, max_exceptions)
        if found is None:
            continue
        solved += 1
        a = np.arange(acc[0], acc[1] + 1, dtype=np.int64)
        got = np.clip(single.single_round(a, found.multiplier, found.shift), *out)
        for e, r in found.exceptions:
            assert got[e - acc[0]] != r, (scale, e)
            got[e - acc[0]] = r
        wrong += np.count_nonzero(got != np.clip(requantize_f32(a, F32(scale)), *out))
        listed += len(found.exceptions)
    return solved, wrong, listed


def test_adjusted_multiplier_every_accumulator(monkeypatch):
    """Every accumulator of 40 (scale, range, clamp) cases: the single-rounding multiplier found (exact or
    adjusted) equals the definition, without exceptions and with the exceptions it lists (at most 32 a case),
    every one of which is needed. The search covers 2 W (the float32 error W plus moves of the multiplier up
    to W); with a search one bit smaller than W (W / 4 patched in: 2 * W / 4), some result is wrong."""
    cases = _ranges()
    solved, wrong, _ = _single_rounding_errors(cases)
    assert solved >= 25 and wrong == 0
    solved_listing, wrong, listed = _single_rounding_errors(cases, single.MAX_EXCEPTIONS)
    assert solved_listing > solved and listed > 0 and wrong == 0
    exact_window = single.window
    monkeypatch.setattr(single, "window", lambda m, k, bound: exact_window(m, k, bound) >> 2)
    single.single_rounding.cache_clear()  # its results are memoized
    assert _single_rounding_errors(cases)[1] > 0
    single.single_rounding.cache_clear()


@pytest.mark.parametrize("out,zp,lo,hi", [("i8", -128, -128, 127), ("i8", 3, -100, 120), ("i16", 0, -32768, 32767)])
def test_planner_rescale_equals_rescale_f32(out, zp, lo, hi):
    """The RESCALE the planner puts in place of a per-channel RESCALE_F32 (normalised multipliers, zero point,
    clamp, axis) computes the RESCALE_F32 reference on every accumulator of the proven range."""
    rng = np.random.default_rng(11)
    scales = [float(F32(s)) for s in np.exp(rng.uniform(np.log(1e-4), np.log(3e-3), 6))]
    sched = step_schedule("RESCALE_F32", [Var((1, 6), "i32")], [((1, 6), out)], scale=scales, output_zp=zp,
                          out_min=lo, out_max=hi)
    io = sched.io(sched.steps[0])
    io.ins[0].value_range = (-70000, 65000)
    found = as_rescale(io)
    assert found is not None
    a = np.repeat(np.arange(-70000, 65001, dtype=np.int64)[:, None], 6, axis=1)
    rescale = StepIO(Step("RESCALE", io.step.inputs, io.step.outputs, found[0].to_attrs()), io.ins, io.outs)
    primitives.get("RESCALE").check(rescale)
    expected = primitives.get("RESCALE_F32").reference(io, [a])[0]
    assert np.array_equal(primitives.get("RESCALE").reference(rescale, [a])[0], expected)


def _window_case(rows: int = 4096) -> tuple[list[float], np.ndarray]:
    """Per-channel scales and [rows, channels] int32 accumulators, half inside the window of the whole int32 range
    (the exact emulation decides) and half outside (single rounding) where the scale leaves any outside."""
    scales = _scales()
    rng = np.random.default_rng(23)
    columns = []
    for scale in scales:
        m, k = _mk(scale)
        a = rng.integers(-(1 << 31), 1 << 31, 1 << 20)
        inside = in_window(a, m, k, single.window(m, k, 1 << 31))
        columns.append(np.resize(np.concatenate([a[inside][: rows // 2], a[~inside][: rows // 2]]), rows))
    return scales, np.stack(columns, axis=1).astype(np.int32)


def test_c_window_form(monkeypatch):
    """RESCALE_F32 in the window form (i32 output: qc_scale_f32_fast) == its reference in C, on accumulators inside
    and outside the windows; with the windows one bit smaller the C differs."""
    scales, data = _window_case()
    sched = step_schedule("RESCALE_F32", [Var(data.shape, "i32")], [(data.shape, "i32")], scale=scales)
    assert primitives.get("RESCALE_F32").form(sched.io(sched.steps[0]))[1] == "window"
    assert_bit_exact(sched, inputs=[[data]])
    exact_window = single.window
    monkeypatch.setattr(single, "window", lambda m, k, bound: exact_window(m, k, bound) >> 1)
    assert not c_vs_reference(sched, inputs=[[data]]).bit_exact


def test_c_single_form_every_int16():
    """A RESCALE_F32 the planner cannot replace (u8 output) but proves a single rounding for, two of its channels
    with adjusted multipliers (the exact ones are wrong on some int16 input): qc_scale32_single in C == the float32
    definition on every int16 input of every channel."""
    scales = [0.0123, 2.0 ** -7 * (1 + 2.0 ** -23), 0.007076498586684465, 0.025012141093611717]
    data = np.repeat(np.arange(-32768, 32768, dtype=np.int16)[:, None], len(scales), axis=1)
    sched = step_schedule("RESCALE_F32", [Var(data.shape, "i16")], [(data.shape, "u8")], scale=scales,
                          output_zp=128)
    _, form, args = primitives.get("RESCALE_F32").form(sched.io(sched.steps[0]))
    assert form == "single"
    a = data[:, 0].astype(np.int64)
    for scale, multiplier, shift in zip(scales[2:], args["multiplier"][2:], args["shift"][2:], strict=True):
        exact = single.normalized(*_mk(scale))
        assert (int(multiplier), int(shift)) != exact and int(shift) == exact[1]
        wrong = np.clip(single.single_round(a, *exact), -128, 127) != np.clip(requantize_f32(a, F32(scale)), -128, 127)
        assert wrong.any()
    assert_bit_exact(sched, inputs=[[data]])
