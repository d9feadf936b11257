"""Constant arrays of the HVX kernels (runtime/hexagon/qc_hvx.h) made at generation time."""

from __future__ import annotations

import numpy as np

LANES = 32  # int32 lanes of a 128-byte vector: the weight rows of one VRMPY


def rows32_bytes(rows: int, k: int) -> int:
    """The bytes of rows32 of a [rows, k] weight array: rows padded to a multiple of 32, k to a multiple of 4."""
    return -(-rows // LANES) * LANES * -(-k // 4) * 4


def rows32(rows: np.ndarray) -> np.ndarray:
    """The int8 weight rows [rows, k] as qc_hvx_dot_rows32_s8 reads them: per block of 32 rows, per word j of a row,
    the 128-byte vector whose lane l (bytes 4 l .. 4 l + 3) holds row 32 b + l's elements 4 j .. 4 j + 3; rows past
    the last and elements past k are zero (they add 0 to the sums)."""
    r, k = rows.shape
    padded = np.zeros((-(-r // LANES) * LANES, -(-k // 4) * 4), np.int8)
    padded[:r, :k] = rows
    blocks = padded.reshape(-1, LANES, padded.shape[1] // 4, 4)  # [block, lane, word, byte]
    return np.ascontiguousarray(blocks.transpose(0, 2, 1, 3)).reshape(-1)

