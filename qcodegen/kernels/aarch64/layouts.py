"""Weight layouts of the AArch64 dotprod kernels (templates/neon-dotprod/_dot.c.j2), made at generation time.
Transitional: the family still chooses its kernels in its templates (qcodegen/kernels/legacy.py)."""

from __future__ import annotations

import numpy as np


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


# TRANSITIONAL: the re-layouts this family's templates ask for by name (`relayout(operand, kind, rows, ...)`,
# qcodegen/kernels/legacy.py): kind -> (C type, function). Removed when the family gets a choice module.
LEGACY_RELAYOUTS = {
    "sdot_4x4": ("int8_t", sdot_4x4),
    "sdot_4x4_pad8": ("int8_t", sdot_4x4_pad8),
}
