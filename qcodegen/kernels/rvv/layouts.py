"""Constant arrays of the RVV kernels (runtime/rvv/qc_rvv.h) made at generation time: the kernels read the int8
weights as the schedule holds them."""

from __future__ import annotations

import numpy as np


def zero_point_terms(rows: np.ndarray, izp: int) -> np.ndarray:
    """izp times the sum of each weight row ([rows, k]), int32: subtracted from a sum of x * w it gives the sum of
    (x - izp) * w (|izp * sum| <= 2^8 * 2^7 * k < 2^31 for rows of up to 65,535 elements)."""
    return (izp * np.asarray(rows, np.int64).sum(axis=1)).astype(np.int32)
