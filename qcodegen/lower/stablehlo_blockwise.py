"""Sub-channel (blockwise) quantized weights of StableHLO dot_general / convolution: one int32 partial sum per block.

The weights (in [O, spatial..., I] layout) are split into contiguous input-channel segments over which every output
channel has one scale s_lhs * s_w[block, o]; each segment is an ordinary CONV2D over the sliced input channels and
the sliced weights (i8 or i4 constants, 4-bit packed two per byte by the codegen). The partial sums are brought to a
common per-channel i32 scale c[o] = max_block(s_lhs * s_w[block, o]) * 2^-e by a RESCALE rounding half to even with
a full-precision multiplier (ratio <= 2^e), added with an ADD chain, and the sum is rescaled once to the result.

e is the largest exponent (<= 24) with sum_block B_block * 2^e <= 2^28, B_block the largest |partial sum| of the
block (largest |x - x_zp| times the largest column sum of |w - w_zp|): the rescaled partial sums and every prefix
of the ADD chain then stay below 2^28 in magnitude (no int32 overflow; the planner's range analysis re-derives and
checks the same bounds), and each rescaled value v * ratio < 2^28 keeps |v| below 2^(shift - 1) as TOSA RESCALE
requires. The rounding error per block is at most 0.5 * c[o], i.e. 2^-(e+1) of the coarsest block's unit.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..fixedpoint import Rounding
from ..ir.quant import QuantType
from .base import Lowerer

_BUDGET_BITS = 28
_MAX_EXTRA_BITS = 24


def segments(lw: Lowerer, scales: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous input-channel ranges [start, stop) of one scale per output channel. `scales`: per-element weight
    scales in [O, spatial..., I] layout."""
    o, i = scales.shape[0], scales.shape[-1]
    cols = scales.reshape(o, -1, i)
    if np.any(cols != cols[:, :1, :]):
        raise UnsupportedError(f"{lw.label}: sub-channel blocks along a spatial kernel dimension are not supported "
                               "(blocks along the input or output feature dimension only)")
    per_channel = cols[:, 0, :]
    starts = [0] + [k for k in range(1, i) if np.any(per_channel[:, k] != per_channel[:, k - 1])]
    return list(zip(starts, starts[1:] + [i], strict=True))


def narrowed(lw: Lowerer, name: str, q: QuantType) -> str:
    """Constant weights whose storage range fits 4 bits (e.g. i8<-8:7>) as an i4 constant (packed in flash)."""
    buf = lw.schedule.buffers[name]
    if buf.dtype.name == "i4" or not (-8 <= q.storage_min and q.storage_max <= 7):
        return name
    return lw.const(f"{name}_i4", buf.data, "i4")


def weight_zero_point(lw: Lowerer, q: QuantType) -> int:
    zps = np.unique(q.zero_points)
    if zps.size != 1:
        raise UnsupportedError(f"{lw.label}: weights with different zero points per channel or block")
    return int(zps[0])


def partial_bound(weights: np.ndarray, wzp: int, q_in: QuantType) -> int:
    """Largest |partial sum| of a block: weights [O, ..., I_block] against any input in q_in's storage range."""
    x_max = max(abs(q_in.storage_min - q_in.zero_point), abs(q_in.storage_max - q_in.zero_point))
    col = np.abs(weights.astype(np.int64) - wzp).reshape(weights.shape[0], -1).sum(axis=1)
    return int(col.max(initial=0)) * x_max


def common_exponent(bounds: list[int]) -> int:
    """The e of the module docstring: the finest common scale whose rescaled partial sums stay below 2^28."""
    total = max(sum(bounds), 1)
    e = 0
    while e < _MAX_EXTRA_BITS and total << (e + 1) <= 1 << _BUDGET_BITS:
        e += 1
    if total << e > 1 << _BUDGET_BITS:
        raise UnsupportedError(f"blockwise partial sums up to {total} exceed the 2^{_BUDGET_BITS} budget")
    return e


def combine(lw: Lowerer, parts: list[str], scales: list[np.ndarray], bounds: list[int], base: str
            ) -> tuple[str, np.ndarray]:
    """Sum channels-last i32 partial sums of per-channel scales `scales` at a common scale: (sum, its scales)."""
    if len(parts) == 1:
        return parts[0], scales[0]
    common = np.max(scales, axis=0) * 2.0 ** -common_exponent(bounds)
    acc = None
    for k, (part, s) in enumerate(zip(parts, scales, strict=True)):
        shape = lw.schedule.buffers[part].shape
        scaled = lw.temp(f"{base}_blk{k}", shape, "i32")
        lw.rescale(part, scaled, s / common, axis=len(shape) - 1, rounding=Rounding.HALF_EVEN)
        if acc is None:
            acc = scaled
            continue
        total = lw.temp(f"{base}_bsum{k}", shape, "i32")
        lw.emit("ADD", [acc, scaled], [total])
        acc = total
    return acc, common
