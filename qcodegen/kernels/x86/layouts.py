"""Weight layouts of the x86 kernels (runtime/x86/), made at generation time from a step's constant weights, bias
and requantization by the kernel choice (choice.py): the orders in which the kernels walk them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _x86_blocks8(rows: np.ndarray, group: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for the blocked kernels (qc_x86_conv.h qc_x86_gemm_s8), whose int32 lanes are
    8 output channels: per block of 8 rows and per group of `group` row elements (the last group padded with zeros),
    8 * group bytes: the group of row 0, then of rows 1 .. 7. The rows after the last block of 8 are left out (the
    step reads them from the OHWI array)."""
    w = np.asarray(rows, np.int64)
    w = np.pad(w, ((0, 0), (0, -w.shape[1] % group)))
    blocks, groups = w.shape[0] // 8, w.shape[1] // group
    b = w[:blocks * 8].reshape(blocks, 8, groups, group)  # block, row, group, element
    return b.transpose(0, 2, 1, 3).reshape(-1).astype(np.int8)


def madd_2x8(rows: np.ndarray) -> np.ndarray:
    """_x86_blocks8 by pairs (AVX2 qc_x86_madd_blocks: VPMOVSXBW of 16 bytes, then VPMADDWD against a broadcast int16
    pair)."""
    return _x86_blocks8(rows, 2)


def dpbusd_4x8(rows: np.ndarray) -> np.ndarray:
    """_x86_blocks8 by groups of 4 (VNNI qc_x86_dpbusd_blocks: VPDPBUSD of 32 bytes against 4 broadcast unsigned
    bytes; AVX2 qc_x86_ubs_blocks: VPMADDUBSW against 4 broadcast nibbles)."""
    return _x86_blocks8(rows, 4)


def gemm_starts(rows: np.ndarray, bias: np.ndarray, unsigned_zp: int | None) -> np.ndarray:
    """The accumulators' start of each blocked row (the first rows // 8 * 8 rows of [rows, k]) of the blocked
    kernels: the bias, less (128 + izp) * the row sum for windows packed as u = x + 128 (unsigned_zp = 128 + izp:
    the sum of u * w less that is the sum of (x - izp) * w), as int32 modulo 2^32 like the kernels' lanes (which end
    at the exact accumulator, in int32)."""
    w = np.asarray(rows, np.int64)
    blocked = w.shape[0] // 8 * 8
    starts = np.asarray(bias, np.int64)[:blocked]
    if unsigned_zp is not None:
        starts = starts - unsigned_zp * w[:blocked].sum(axis=1)
    return (starts & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def zero_point_terms(rows: np.ndarray, factor: int) -> np.ndarray:
    """factor times the sum of each weight row ([rows, k]), int32: the correction subtracted from a row's sum of x * w
    (factor izp) or of (x + 128) * w (factor 128 + izp) to give the sum of (x - izp) * w (|factor| <= 255, rows of at
    most 65,535 elements: |term| <= 255 * 128 * 65535 < 2^31)."""
    return (factor * np.asarray(rows, np.int64).sum(axis=1)).astype(np.int32)


def x86_rq8(multipliers: Sequence[int], shifts: Sequence[int]) -> np.ndarray:
    """The per-channel constants of qc_x86_rq8_store (qc_x86.h) for each whole block of 8 channels: with every shift at
    least 33, 32 int32 per block (m, mo, s - 32, 2^(s - 33), 8 of each; mo: lane 2i holds the multiplier of lane
    2i + 1, where VPMULDQ reads the odd lanes' multipliers, the odd lanes 0), as qc_x86_scale32x8_s33p reads them;
    else 16 (m, then s)."""
    m, s = np.asarray(multipliers, np.int64), np.asarray(shifts, np.int64)
    blocks = m.size // 8
    m, s = m[:blocks * 8].reshape(blocks, 8), s[:blocks * 8].reshape(blocks, 8)
    if s.size and s.min() >= 33:
        mo = np.zeros_like(m)
        mo[:, 0::2] = m[:, 1::2]
        cols = [m, mo, s - 32, 1 << (s - 33)]
    else:
        cols = [m, s]
    return np.stack(cols, axis=1).reshape(-1).astype(np.int32)


def madd_dw_pairs(taps: np.ndarray) -> np.ndarray:
    """Depthwise weights ([taps, channels], multiplier 1) for VPMADDWD by pairs of taps (qc_x86_dw8_taps2): per pair
    of taps t, t + 1 (t even; the tap after the last is 0) and per channel c, the int16 pair (w[t][c], w[t + 1][c]);
    pair t / 2 starts at t * channels, so channel c of the pair of tap t is at t * channels + 2 * c."""
    w = np.asarray(taps, np.int64)
    w = np.pad(w, ((0, w.shape[0] % 2), (0, 0)))
    return w.reshape(-1, 2, w.shape[1]).transpose(0, 2, 1).reshape(-1).astype(np.int16)


def x86_dw_rows(taps: np.ndarray, kw: int) -> np.ndarray:
    """Depthwise weights ([kh * kw, channels], multiplier 1; channels a multiple of 8) for the kernel over rows of int16
    tap pairs (qc_x86_dw.h qc_x86_dw_rows): per block of 8 channels, per kernel row ky and per pair of horizontally
    adjacent taps kx = 2q, 2q + 1 (the tap after the last of an odd row is 0), the 8 int16 pairs
    (w[ky][2q][c], w[ky][2q + 1][c]) of the block's channels c: 16 int16 per (block, ky, q), in that order."""
    channels = taps.shape[1]
    w = np.asarray(taps, np.int64).reshape(-1, kw, channels)  # ky, kx, channel
    w = np.pad(w, ((0, 0), (0, kw % 2), (0, 0)))
    kh, pairs = w.shape[0], w.shape[1] // 2
    b = w.reshape(kh, pairs, 2, channels // 8, 8)  # ky, q, tap of the pair, block, channel
    return b.transpose(3, 0, 1, 4, 2).reshape(-1).astype(np.int16)


def x86_dw_params(taps: np.ndarray, bias: np.ndarray, izp: int, multipliers: Sequence[int],
                  shifts: Sequence[int]) -> np.ndarray:
    """The per-channel constants of the same kernel ([taps, channels] weights, channels a multiple of 8; the bias of
    every channel), 40 int32 per block of 8 channels: the accumulators' start bias[c] - izp * the sum of channel c's
    weights over the taps (modulo 2^32, like the kernel's int32 lanes: the exact accumulator fits int32), the
    multipliers m, then mo (lane 2i: the multiplier of lane 2i + 1, where VPMULDQ reads the odd lanes' multipliers;
    the odd lanes 0), then when every shift is at least 33 (qc_x86_scale32x8_s33r) s - 32 and 2^(s - 33), else
    (qc_x86_scale32x8) s and 0. Per-tensor scales apply to every channel."""
    w = np.asarray(taps, np.int64)
    channels = w.shape[1]
    start = np.asarray(bias, np.int64) - izp * w.sum(axis=0)
    m = np.broadcast_to(np.asarray(multipliers, np.int64), (channels,))
    s = np.broadcast_to(np.asarray(shifts, np.int64), (channels,))
    mo = np.zeros(channels, np.int64)
    mo[0::2] = m[1::2]
    wide = bool(s.min() >= 33)
    cols = [start, m, mo, s - 32 if wide else s, (1 << np.maximum(s - 33, 0)) if wide else np.zeros(channels, np.int64)]
    words = np.stack([c.reshape(-1, 8) for c in cols], axis=1)  # block, column, lane
    return (words.reshape(-1) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
