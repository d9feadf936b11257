"""Constant arrays of the AArch64 NEON kernels (runtime/aarch64/), made at generation time from a step's constants:
the weight rows re-laid for SDOT by element (qc_neon_sdot.h), the input-zero-point terms, the depthwise starts and
pad rows, and minus the requantization's shifts."""

from __future__ import annotations

import numpy as np

from ..layouts import row_sums


def sdot_4x4(values: np.ndarray, rows: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for SDOT by element (AArch64 dotprod): per block of 4 rows and per group
    of 4 row elements, 16 bytes: the group's 4 elements of row 0, then of rows 1, 2, 3 (lane r of the SDOT
    accumulates row r). The rows after the last block of 4 and the elements after the last group of 4 are left
    out (the kernel reads them from the OHWI array)."""
    return _sdot_blocks(np.asarray(values, np.int64).reshape(rows, -1))


def sdot_4x4_pad8(values: np.ndarray, rows: int) -> np.ndarray:
    """sdot_4x4 of the rows zero-padded to a multiple of 8 elements (the kernel's input window is padded with
    zeros to the same length: the padding adds products 0 * 0)."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    return _sdot_blocks(np.pad(w, ((0, 0), (0, -w.shape[1] % 8))))


def _sdot_blocks(w: np.ndarray) -> np.ndarray:
    """The sdot_4x4 layout of [rows, k] weights."""
    blocks, groups = w.shape[0] // 4, w.shape[1] // 4
    b = w[:blocks * 4, :groups * 4].reshape(blocks, 4, groups, 4)  # block, row, group, element
    return b.transpose(0, 2, 1, 3).reshape(-1).astype(np.int8)


def zero_point_terms(values: np.ndarray, rows: int, izp: int) -> np.ndarray:
    """izp times the sum of each weight row ([rows, k] int8), int32: subtracted from a sum of x * w it gives the sum
    of (x - izp) * w (|izp * sum| <= 2^8 * 2^7 * k < 2^31 for rows of up to 65,535 elements)."""
    return (izp * row_sums(values, rows).astype(np.int64)).astype(np.int32)


def dw_starts(taps: np.ndarray, izp: int) -> np.ndarray:
    """-izp times the sum of each channel's depthwise weights over the taps ([taps, channels] int8), int32: the start
    of the sum of x * w over the taps that gives the sum of (x - izp) * w (|.| <= 2^8 * 2^7 * 4096 < 2^30)."""
    return (-izp * np.asarray(taps, np.int64).sum(axis=0)).astype(np.int32)


def neg_shifts(shifts: tuple[int, ...]) -> np.ndarray:
    """Minus each requantization shift (2..62), int8: widened once per step (qc_neon_widen_shifts) into the int64
    operands of SRSHL (a rounding shift right by s in 64-bit lanes)."""
    return (-np.asarray(shifts, np.int64)).astype(np.int8)


def pad_row(channels: int, pad_value: int) -> np.ndarray:
    """What a depthwise tap outside the input reads: `channels` copies of the pad value, int8."""
    return np.full(channels, pad_value, np.int8)
