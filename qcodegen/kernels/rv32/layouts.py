"""Weight layouts of the RV32 kernels (templates/rv32/_dot.c.j2), made at generation time. Transitional: the
family still chooses its kernels in its templates (qcodegen/kernels/legacy.py)."""

from __future__ import annotations

import numpy as np


def _rv32_rows(values: np.ndarray, rows: int, block: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for the RV32 register blocks (templates/rv32/_dot.c.j2): per block of
    `block` rows and per row element i, the `block` rows' elements i in turn (one pointer walks a block, LB at
    immediate offsets); the last block padded with zero rows."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    w = np.pad(w, ((0, -rows % block), (0, 0)))
    return w.reshape(-1, block, w.shape[1]).transpose(0, 2, 1).reshape(-1).astype(np.int8)


def rv32_r4(values: np.ndarray, rows: int) -> np.ndarray:
    """_rv32_rows of 4 rows (qc_rv_dot_rows4x4 and its tails qc_rv_dot_rows4x{1,2,3}_4)."""
    return _rv32_rows(values, rows, 4)


def rv32_r8(values: np.ndarray, rows: int) -> np.ndarray:
    """_rv32_rows of 8 rows (qc_rv_dot_rows8x2, qc_rv_dot_rows8x1, qc_rv_dot_rows8x1_2)."""
    return _rv32_rows(values, rows, 8)


# TRANSITIONAL: the re-layouts this family's templates ask for by name (`relayout(operand, kind, rows, ...)`,
# qcodegen/kernels/legacy.py): kind -> (C type, function). Removed when the family gets a choice module.
LEGACY_RELAYOUTS = {
    "rv32_r4": ("int8_t", rv32_r4),
    "rv32_r8": ("int8_t", rv32_r8),
}
