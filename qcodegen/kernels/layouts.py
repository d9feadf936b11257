"""Weight layouts shared by kernel families."""

from __future__ import annotations

import numpy as np


def row_sums(values: np.ndarray, rows: int) -> np.ndarray:
    """The sum of each row of int8 weights ([rows, k]) as int32: a kernel's input-zero-point correction made at
    generation time (so that the int8 rows need not be read, nor kept, for it)."""
    return np.asarray(values, np.int64).reshape(rows, -1).sum(axis=1).astype(np.int32)
