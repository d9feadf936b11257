"""Weight layouts of the RV32 kernels (runtime/rv32/qc_rv32.c), made at generation time from a step's constant
weights."""

from __future__ import annotations

import numpy as np


def _rv32_rows(rows: np.ndarray, block: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for the RV32 register blocks: per block of `block` rows and per row element
    i, the `block` rows' elements i in turn (one pointer walks a block, LB at immediate offsets); the last block
    padded with zero rows."""
    w = np.asarray(rows, np.int64)
    w = np.pad(w, ((0, -w.shape[0] % block), (0, 0)))
    return w.reshape(-1, block, w.shape[1]).transpose(0, 2, 1).reshape(-1).astype(np.int8)


def rv32_r4(rows: np.ndarray) -> np.ndarray:
    """_rv32_rows of 4 rows (qc_rv32_dot_rows4x4_s8 and its tails qc_rv32_dot_rows4x{1,2,3}_of4_s8)."""
    return _rv32_rows(rows, 4)


def rv32_r8(rows: np.ndarray) -> np.ndarray:
    """_rv32_rows of 8 rows (qc_rv32_dot_rows8x2_s8, qc_rv32_dot_rows8x1_s8, qc_rv32_dot_rows8x1_of2_s8)."""
    return _rv32_rows(rows, 8)
