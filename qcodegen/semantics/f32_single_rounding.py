"""When onnxruntime's float32 requantization equals one integer multiply, add and shift (docs/semantics.md §14.5).

RESCALE_F32 computes y = round_half_even(f32(f32(a) * s)) for an int32 accumulator a and a float32 scale
s = m * 2^-k (m < 2^24; qcodegen/primitives/rescale_f32.py). Its exact integer emulation (qc_scale_f32) is long;
the single rounding of the exact product,

    single(a) = floor((a * m + 2^(k-1)) / 2^k)        (TOSA apply_scale_32 without double rounding),

is one 64-bit multiply-accumulate and a shift. They differ only near half-integers:

    Let x = a * s (exact) and x' = f32(f32(a) * s) (what onnxruntime rounds). Over accumulators |a| <= A:
      f32(a) == a for |a| <= 2^24, else |f32(a) - a| <= E = 2^(bitlen(A) - 25) (24 significant bits kept,
      rounded to nearest), and f32(|a|) <= A + E;
      f32(a) * m is an integer of at most bitlen((A + E) * m) bits, and binary32 keeps its 24 leading bits, so the
      product rounding moves it by at most H = 2^(bitlen((A + E) * m) - 25) (0 when it has <= 24 bits; results
      below 2^-126 are far below 1/2 and round to 0 either way).
    So |x' - x| * 2^k <= W = E * m + H. If the distance of a * m from the nearest odd multiple of 2^(k-1) (x's
    nearest half-integer, in units of 2^-k) exceeds W, x and x' lie strictly inside the same interval
    (n - 1/2, n + 1/2) and both roundings give n. Every other accumulator -- within W of a half-integer, exact
    ties included -- is a candidate, and the candidates are few: per half-integer h, the a with
    |a * m - h * 2^k| <= W, i.e. at most 2 W / m + 1 of them.

At plan time `exceptions` lists the candidates (over the accumulator range range analysis proves, and only the
half-integers strictly inside the output clamp: beyond it both results clamp alike) and evaluates both formulas
on them with numpy's float32 (the reference's own arithmetic). No exception: the requantization is exactly a
single-rounding RESCALE on that range, the multiplier normalised to [2^30, 2^31) (`normalized`).
The run-time form with the window test (qc_scale_f32_fast: single rounding outside the window, the exact float32
emulation inside) has its numpy model in tests/test_f32_single_rounding.py, swept over every accumulator in
[-2^24, 2^24].
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

MAX_MANTISSA = 1 << 24
MAX_SHIFT = 60  # beyond, s < 2^-36: excluded so that h * 2^k and a * m + W stay far inside int64


def mantissa_exponent(scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative finite float32 values as exact pairs (m, k), value = m * 2^-k with 0 <= m < 2^24 (m = 0, k = 0
    for zero; subnormals have m < 2^23)."""
    s = np.asarray(scale, np.float32).reshape(-1)
    frac, exp = np.frexp(s.astype(np.float64))  # s = frac * 2^exp, frac in [0.5, 1) (exact for float32 values)
    m = np.round(frac * MAX_MANTISSA).astype(np.int64)  # an integer for every float32 (24 significant bits)
    k = np.where(m == 0, 0, 24 - exp.astype(np.int64))
    return m, k


def requantize_f32(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """round_half_even(f32(f32(x) * scale)) as float64 (exact integers, or +-inf when the product overflows)."""
    with np.errstate(over="ignore"):
        product = np.asarray(x, np.int64).astype(np.float32) * np.asarray(scale, np.float32)
    return np.rint(product).astype(np.float64)


def bitlen(v: int) -> int:
    return int(v).bit_length()


def window(m: int, k: int, bound: int) -> int:
    """W: a bound of |f32(f32(a) * s) - a * s| * 2^k over |a| <= bound, for s = m * 2^-k (docstring above)."""
    conversion = 0 if bound <= 1 << 24 else 1 << (bitlen(bound) - 25)
    product = bitlen((bound + conversion) * m)
    return conversion * m + (0 if product <= 24 else 1 << (product - 25))


def eligible(m: int, k: int) -> bool:
    """Single rounding applies to scale m * 2^-k at all: a 24-bit mantissa and a shift the int64 form takes."""
    return 0 < m < 1 << 24 and 2 <= k <= MAX_SHIFT


def single_round(a: np.ndarray, m: int | np.ndarray, k: int | np.ndarray) -> np.ndarray:
    """floor((a * m + 2^(k-1)) / 2^k) in int64 (|a| < 2^31, m < 2^24, k <= MAX_SHIFT)."""
    a, m, k = (np.asarray(v, np.int64) for v in (a, m, k))
    return (a * m + np.left_shift(np.int64(1), k - 1)) >> k


def candidates(m: int, k: int, w: int, acc: tuple[int, int], out: tuple[int, int]) -> np.ndarray:
    """The accumulators a in [acc[0], acc[1]] within w (units of 2^-k) of a half-integer strictly inside the
    clamp `out` (the clamp before the zero point): every a whose two roundings may differ, for w >= `window`."""
    lo, hi = acc
    scale = m * 2.0 ** -k
    reach = w * 2.0 ** -k + 2  # the half-integers j + 1/2 within w / 2^k (plus a margin) of a * s's range
    j_lo = max(out[0], int(np.floor(lo * scale - reach)))
    j_hi = min(out[1] - 1, int(np.ceil(hi * scale + reach)))
    if j_lo > j_hi:
        return np.zeros(0, np.int64)
    centre = (2 * np.arange(j_lo, j_hi + 1, dtype=np.int64) + 1) << np.int64(k - 1)
    first = np.maximum(-((w - centre) // m), lo)  # ceil((centre - w) / m)
    last = np.minimum((centre + w) // m, hi)
    counts = np.maximum(last - first + 1, 0)
    offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(first, counts) + offsets


MAX_EXCEPTIONS = 32  # per channel: the fused stores compare each accumulator with this many at most


@dataclass(frozen=True)
class SingleRounding:
    """floor((a * multiplier + 2^(shift-1)) / 2^shift) == the float32 requantization over the accumulator range,
    except at the accumulators of `exceptions` ((a, r) pairs: r the float32 result within the clamp): `candidates`
    accumulators evaluated, `corrected` of them wrong with the exact multiplier m * 2^(shift-k) but right with
    `multiplier`."""

    multiplier: int
    shift: int
    candidates: int
    corrected: int
    exceptions: tuple[tuple[int, int], ...] = ()


def _most_satisfied(lower: np.ndarray, upper: np.ndarray, lo_m: int, hi_m: int, big: int) -> int:
    """The multiplier in [lo_m, hi_m] inside the most intervals [lower_i, upper_i] (the one nearest `big` among
    them): a sweep over the intervals' ends."""
    lower, upper = np.maximum(lower, lo_m), np.minimum(upper, hi_m)
    keep = lower <= upper
    points = np.concatenate([lower[keep], upper[keep], [lo_m, big]])
    points = np.unique(points[(points >= lo_m) & (points <= hi_m)])
    inside = (np.searchsorted(np.sort(lower[keep]), points, side="right")
              - np.searchsorted(np.sort(upper[keep]), points, side="left"))
    best = points[inside == inside.max()]
    return int(best[np.argmin(np.abs(best - big))])


@functools.lru_cache(maxsize=4096)  # pure; the planner and the renderer ask again for the same channels
def single_rounding(m: int, k: int, acc: tuple[int, int], out: tuple[int, int],
                    max_exceptions: int = MAX_EXCEPTIONS) -> SingleRounding | None:
    """A single-rounding multiplier for scale m * 2^-k over accumulators in `acc` and the clamp `out`, with at
    most `max_exceptions` exceptions, or None.

    With M * 2^-S = m * 2^-k (`normalized`), a multiplier M' = M + d with |d| <= D = floor(W 2^(S-k) / A) moves
    a * s by at most W 2^-k over |a| <= A. Outside the window 2 W of the half-integers, single rounding with M'
    still equals the reference (the distance exceeds the float32 error W plus the move W); inside it, each
    candidate a with reference r bounds M' by (2r - 1) 2^(S-1) <= a * M' < (2r + 1) 2^(S-1) (the side at a clamp
    bound dropped): an interval. M' is the point of [M - D, M + D] inside the most of them (nearest M); the
    candidates whose interval misses it are the exceptions, each evaluated (so the list is exact by
    construction: every other accumulator of the range gives r by single rounding with M')."""
    if not eligible(m, k):
        return None
    big, shift = normalized(m, k)
    bound = max(-acc[0], acc[1])
    w = window(m, k, bound)
    reach = (w << (shift - k)) // max(bound, 1)
    a = candidates(m, k, 2 * w, acc, out)
    r = np.clip(requantize_f32(a, np.float32(m * 2.0 ** -k)), *out).astype(np.int64)
    if a.size and max(abs(out[0]), abs(out[1])) + 1 >= 1 << (62 - shift):
        return None  # (2r + 1) 2^(S-1) would leave int64
    half = np.int64(1) << np.int64(shift - 1)
    low, high = (2 * r - 1) * half, (2 * r + 1) * half - 1  # a * M' in [low, high] where r is not a clamp bound
    has_low, has_high = r > out[0], r < out[1]
    safe = np.where(a == 0, 1, a)  # a == 0 bounds nothing (both results are 0)
    none_lo, none_hi = np.int64(-(1 << 62)), np.int64(1 << 62)
    lower = np.where(a > 0, np.where(has_low, -(-low // safe), none_lo),
                     np.where((a < 0) & has_high, -(-high // safe), none_lo))
    upper = np.where(a > 0, np.where(has_high, high // safe, none_hi),
                     np.where((a < 0) & has_low, low // safe, none_hi))
    lo_m, hi_m = big - reach, min(big + reach, (1 << 31) - 1)
    if lo_m > hi_m:
        return None
    chosen = _most_satisfied(lower, upper, lo_m, hi_m, big) if a.size else big
    got = np.clip(single_round(a, chosen, shift), *out)
    wrong = got != r
    if np.count_nonzero(wrong) > max_exceptions:
        return None
    corrected = np.count_nonzero((np.clip(single_round(a, big, shift), *out) != r) & ~wrong)
    exceptions = tuple(zip(a[wrong].tolist(), r[wrong].tolist(), strict=True))
    return SingleRounding(chosen, shift, int(a.size), int(corrected), exceptions)


def normalized(m: int, k: int) -> tuple[int, int]:
    """(m * 2^j, k + j) with m * 2^j in [2^30, 2^31) (or the largest j with k + j <= 62): the same single
    rounding with TOSA's normalised multiplier (target kernels take shifts of 33 and more)."""
    j = min(31 - bitlen(m), 62 - k)
    return m << j, k + j
