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



def starts(bias: np.ndarray, izp_terms: np.ndarray) -> np.ndarray:
    """The accumulators' start of each row, bias - izp x the row's sum (izp_terms), modulo 2^32 like the kernel's
    int32 lanes, padded with zeros to whole blocks of 32 (qc_hvx_conv_rq_s8)."""
    rows = izp_terms.size
    start = (np.asarray(bias, np.int64) - izp_terms) & 0xFFFFFFFF
    return np.pad(start, (0, -rows % LANES)).astype(np.uint32).view(np.int32)


RQ_VECTORS = 2  # qc_hvx_requant's vectors per block of 32 channels: m and r (8 bytes a channel)


def rq32(multipliers: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """qc_hvx_requant's 2 int32 vectors per block of 32 channels (multipliers / shifts: one per channel, TOSA
    shifts 31..62): m and r = shift - 31 (the kernel derives 2^r - 1 and the rounding constant from r and the
    rounding). Channels past the last: m = 0 (outputs zp)."""
    m = np.asarray(multipliers, np.int64)
    r = np.asarray(shifts, np.int64) - 31
    pad = -m.size % LANES
    cols = [m, r]
    blocks = np.stack([np.pad(c, (0, pad)).reshape(-1, LANES) for c in cols], axis=1)  # [block, vector, lane]
    return blocks.reshape(-1).astype(np.int32)


DW_BLOCK = 64  # channels of a qc_hvx_dw_rq_s8 block: 64 int16 products a vector


def _even_odd(values: np.ndarray, fill: int, copies: int) -> np.ndarray:
    """Per-channel values repeated `copies` times (pixels a block), padded with `fill` to whole blocks of 64 lanes,
    as [block, parity, 32]: lane 64 b + 2 i + parity."""
    v = np.tile(np.asarray(values, np.int64), copies)
    v = np.pad(v, (0, -v.size % DW_BLOCK), constant_values=fill)
    return v.reshape(-1, LANES, 2).transpose(0, 2, 1)


def dw_w16(taps: np.ndarray, copies: int = 1) -> np.ndarray:
    """Depthwise weights [taps, channels] (multiplier 1) as qc_hvx_dw_rq_s8 reads them: per block of 64 lanes (the
    channels repeated `copies` times), per tap, the 64 weights as int16 (zeros past the last lane)."""
    w = np.tile(np.asarray(taps, np.int64), copies)
    t, c = w.shape
    w = np.pad(w, ((0, 0), (0, -c % DW_BLOCK)))
    return w.reshape(t, -1, DW_BLOCK).transpose(1, 0, 2).reshape(-1).astype(np.int16)


def dw_starts(bias: np.ndarray, copies: int = 1) -> np.ndarray:
    """The biases per block of 64 lanes: the 32 even lanes', then the 32 odd ones' (qc_hvx_dw_rq_s8)."""
    return _even_odd(bias, 0, copies).reshape(-1).astype(np.int32)


def dw_rq(multipliers: np.ndarray, shifts: np.ndarray, copies: int = 1) -> np.ndarray:
    """rq32 per block of 64 lanes: the even lanes' 2 vectors, then the odd ones' (qc_hvx_dw_rq_s8)."""
    m, s = _even_odd(multipliers, 0, copies), _even_odd(shifts, 31, copies)
    return np.concatenate([rq32(m[b, parity], s[b, parity]) for b in range(m.shape[0]) for parity in (0, 1)])
