"""Weight layouts of the x86 kernels (templates/avx2, avxvnni, avx512vnni), made at generation time. Transitional:
the x86 families still choose their kernels in their templates (qcodegen/kernels/legacy.py)."""

from __future__ import annotations

import numpy as np


def _x86_blocks8(values: np.ndarray, rows: int, group: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for the x86 blocked kernels (templates/avx2/_dot.c.j2 `gemm`), whose int32
    lanes are 8 output channels: per block of 8 rows and per group of `group` row elements (the last group padded
    with zeros), 8 * group bytes: the group of row 0, then of rows 1 .. 7. The rows after the last block of 8 are
    left out (the kernel reads them from the OHWI array)."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    w = np.pad(w, ((0, 0), (0, -w.shape[1] % group)))
    blocks, groups = rows // 8, w.shape[1] // group
    b = w[:blocks * 8].reshape(blocks, 8, groups, group)  # block, row, group, element
    return b.transpose(0, 2, 1, 3).reshape(-1).astype(np.int8)


def madd_2x8(values: np.ndarray, rows: int) -> np.ndarray:
    """_x86_blocks8 by pairs (AVX2: VPMOVSXBW of 16 bytes, then VPMADDWD against a broadcast int16 pair)."""
    return _x86_blocks8(values, rows, 2)


def dpbusd_4x8(values: np.ndarray, rows: int) -> np.ndarray:
    """_x86_blocks8 by groups of 4 (VNNI: VPDPBUSD of 32 bytes against 4 broadcast unsigned bytes)."""
    return _x86_blocks8(values, rows, 4)


def madd_dw_pairs(values: np.ndarray, channels: int) -> np.ndarray:
    """Depthwise weights ([taps, channels], multiplier 1) for VPMADDWD by pairs of taps (AVX2): per pair of taps
    t, t + 1 (t even; the tap after the last is 0) and per channel c, the int16 pair (w[t][c], w[t + 1][c]); pair
    t / 2 starts at t * channels, so channel c of the pair of tap t is at t * channels + 2 * c."""
    w = np.asarray(values, np.int64).reshape(-1, channels)
    w = np.pad(w, ((0, w.shape[0] % 2), (0, 0)))
    return w.reshape(-1, 2, channels).transpose(0, 2, 1).reshape(-1).astype(np.int16)


def x86_dw_rows(values: np.ndarray, channels: int, kw: int) -> np.ndarray:
    """Depthwise weights ([kh, kw, channels], multiplier 1; channels a multiple of 8) for the AVX2 kernel over rows of
    int16 tap pairs (templates/avx2/_dot.c.j2 `depthwise`): per block of 8 channels, per kernel row ky and per pair
    of horizontally adjacent taps kx = 2q, 2q + 1 (the tap after the last of an odd row is 0), the 8 int16 pairs
    (w[ky][2q][c], w[ky][2q + 1][c]) of the block's channels c: 16 int16 per (block, ky, q), in that order."""
    w = np.asarray(values, np.int64).reshape(-1, kw, channels)  # ky, kx, channel
    w = np.pad(w, ((0, 0), (0, kw % 2), (0, 0)))
    kh, pairs = w.shape[0], w.shape[1] // 2
    b = w.reshape(kh, pairs, 2, channels // 8, 8)  # ky, q, tap of the pair, block, channel
    return b.transpose(3, 0, 1, 4, 2).reshape(-1).astype(np.int16)


def x86_dw_params(values: np.ndarray, channels: int, bias: np.ndarray, izp: int, multipliers: list[int],
                  shifts: list[int]) -> np.ndarray:
    """The per-channel constants of the same kernel, 40 int32 per block of 8 channels (channels a multiple of 8):
    the accumulators' start bias[c] (or bias[0]) - izp * the sum of channel c's weights over the taps (modulo 2^32,
    like the kernel's int32 lanes: the exact accumulator fits int32), the multipliers m, then mo (lane 2i: the
    multiplier of lane 2i + 1, where VPMULDQ reads the odd lanes' multipliers; the odd lanes 0), then when every
    shift is at least 33 (qc_scale32x8_s33r) s - 32 and 2^(s - 33), else (qc_scale32x8) s and 0. Per-tensor scales
    apply to every channel."""
    w = np.asarray(values, np.int64).reshape(-1, channels)
    start = np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (channels,)) - izp * w.sum(axis=0)
    m = np.broadcast_to(np.asarray(multipliers, np.int64), (channels,))
    s = np.broadcast_to(np.asarray(shifts, np.int64), (channels,))
    mo = np.zeros(channels, np.int64)
    mo[0::2] = m[1::2]
    wide = bool(s.min() >= 33)
    cols = [start, m, mo, s - 32 if wide else s, (1 << np.maximum(s - 33, 0)) if wide else np.zeros(channels, np.int64)]
    words = np.stack([c.reshape(-1, 8) for c in cols], axis=1)  # block, column, lane
    return (words.reshape(-1) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


# TRANSITIONAL: the re-layouts this family's templates ask for by name (`relayout(operand, kind, rows, ...)`,
# qcodegen/kernels/legacy.py): kind -> (C type, function). Removed when the family gets a choice module.
LEGACY_RELAYOUTS = {
    "madd_2x8": ("int8_t", madd_2x8),
    "dpbusd_4x8": ("int8_t", dpbusd_4x8),
    "madd_dw_pairs": ("int16_t", madd_dw_pairs),
    "x86_dw_rows": ("int16_t", x86_dw_rows),
    "x86_dw_params": ("int32_t", x86_dw_params),
}
