"""Weight layouts of the Cortex-M4/M7 DSP kernels (runtime/cortex-m/qc_cm_dsp.c), made at generation time from a
step's constant weights. SXTB16 widens bytes 0,2 and (after a rotation by 8) bytes 1,3 of a word into 16-bit
pairs; SMLAD multiplies two such pairs and adds both products: the layouts order the weights as the kernels walk
them (one pointer, LDRD), as int8 words (s8: the same flash as the int8 weights) or as SMLAD's int16 pairs (q15:
twice the flash, no SXTB16 of the weights)."""

from __future__ import annotations

import numpy as np


def _padded(rows: np.ndarray, pad: bool) -> np.ndarray:
    """[rows, k] int64, with `pad` zeros appended to each row up to a multiple of 4 elements."""
    return np.pad(rows, ((0, 0), (0, -rows.shape[1] % 4))) if pad else rows


def _q15_blocks(rows: np.ndarray, block: int, pad: bool = False) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) as int16 pairs: per block of `block` rows and per group of 4 row elements
    j..j+3, for each row two int32 words of int16 halves, (w[j] | w[j+2] << 16) then (w[j+1] | w[j+3] << 16),
    matching SXTB16 of the 4 input bytes and of their rotation by 8. The rows after the last block are left out,
    and the elements after the last group of 4 (the kernel reads them as int8), or with `pad` they make a last
    group, with zeros."""
    w = _padded(rows, pad)
    blocks, groups = w.shape[0] // block, w.shape[1] // 4
    b = w[:blocks * block, :groups * 4].reshape(blocks, block, groups, 4) & 0xFFFF  # block, row, group, element
    words = np.stack([b[..., 0] | b[..., 2] << 16, b[..., 1] | b[..., 3] << 16], axis=-1)
    return words.transpose(0, 2, 1, 3).reshape(-1).astype(np.uint32).view(np.int32)


def dsp_q15x4(rows: np.ndarray) -> np.ndarray:
    """_q15_blocks of 4 rows (qc_dsp_dot_4rows_q15)."""
    return _q15_blocks(rows, 4)


def dsp_q15x2(rows: np.ndarray) -> np.ndarray:
    """_q15_blocks of 2 rows, padded (qc_dsp_dot_2x2_q15x2, qc_dsp_conv_*_q15x2)."""
    return _q15_blocks(rows, 2, pad=True)


def _s8_blocks(rows: np.ndarray, block: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) over blocks of rows: per block of `block` rows and per group of 4 row
    elements (the last group padded with zeros), the int32 word of the group's 4 bytes of each row in turn (byte j
    = element j, little-endian): LDRD loads two rows' words; the same flash as the int8 rows (and the padding).
    The rows after the last block are left out (the kernel reads them as int8)."""
    w = _padded(rows, True)
    blocks, groups = w.shape[0] // block, w.shape[1] // 4
    b = w[:blocks * block].reshape(blocks, block, groups, 4) & 0xFF  # block, row, group, element
    words = b[..., 0] | b[..., 1] << 8 | b[..., 2] << 16 | b[..., 3] << 24
    return words.transpose(0, 2, 1).reshape(-1).astype(np.uint32).view(np.int32)


def dsp_s8x2(rows: np.ndarray) -> np.ndarray:
    """_s8_blocks of 2 rows (qc_dsp_dot_2x2_s8x2, qc_dsp_conv_*_s8x2)."""
    return _s8_blocks(rows, 2)


def dsp_s8x4(rows: np.ndarray) -> np.ndarray:
    """_s8_blocks of 4 rows (qc_dsp_dot_4rows_s8x4)."""
    return _s8_blocks(rows, 4)


def window_rows_order(kh: int, length: int) -> np.ndarray:
    """The element order in which qc_dsp_widen_rows reads a window of kh rows of `length` elements (row r's
    element j is element r * length + j of a weight row): each row's whole words (its first length // 4 * 4
    elements), row after row, then the rows' last length % 4 elements. order[i] is the weight row element at
    position i (weight_rows()[:, order] are the rows the kernels read)."""
    whole = length // 4 * 4
    index = np.arange(kh * length).reshape(kh, length)
    return np.concatenate([index[:, :whole].reshape(-1), index[:, whole:].reshape(-1)])


def zero_point_terms(rows: np.ndarray, izp: int) -> np.ndarray:
    """izp times the sum of each weight row, int32: subtracted from a sum of x * w it gives the sum of
    (x - izp) * w (|izp * sum| <= 2^8 * 2^7 * k < 2^31 for rows of up to 65,535 elements)."""
    return (izp * rows.sum(axis=1)).astype(np.int32)


def row_starts(rows: np.ndarray, bias: np.ndarray, izp: int) -> np.ndarray:
    """bias[r] - izp * the sum of row r, int32: the start of a sum of x * w that gives bias + the sum of
    (x - izp) * w (the caller bounds it: int32)."""
    return (bias - izp * rows.sum(axis=1)).astype(np.int32)


def dsp_dw_q15(taps: np.ndarray) -> np.ndarray:
    """Depthwise weights ([taps, channels], multiplier 1) for SMLABB/SMLATT: per group of 4 channels c..c+3 and per
    tap, the int32 words (w[c] | w[c+2] << 16) and (w[c+1] | w[c+3] << 16), matching SXTB16 of the 4 input bytes
    and of their rotation by 8 (one pointer walks a group's taps). The channels after the last group of 4 are left
    out."""
    groups = taps.shape[1] // 4
    g = taps[:, :groups * 4].reshape(taps.shape[0], groups, 4).transpose(1, 0, 2) & 0xFFFF  # group, tap, channel
    words = np.stack([g[..., 0] | g[..., 2] << 16, g[..., 1] | g[..., 3] << 16], axis=-1)
    return words.reshape(-1).astype(np.uint32).view(np.int32)


def dsp_dw_q15_base(taps: np.ndarray, bias: np.ndarray, izp: int, scale: int = 1) -> np.ndarray:
    """dsp_dw_q15 with each group's accumulator start before its taps' words, so that one pointer walks a group
    (qc_dsp_dw_*): per group of 4 channels, base[c..c+3] then the taps' words; then base of the channels after the
    last group. base[c] = bias[c] - izp * the sum of channel c's weights over the taps: the start of the sum of
    x * w that gives the sum of (x - izp) * w + bias (the caller bounds it: int32). scale 2: of the doubled
    weights and bias, for the sums that qc_dsp_rq8 mode 3 takes doubled (the kernels double the int8 weights of
    the channels after the last group themselves)."""
    taps, bias = taps * scale, bias * scale
    channels = taps.shape[1]
    base = bias - izp * taps.sum(axis=0)
    groups = channels // 4
    words = dsp_dw_q15(taps).astype(np.int64).reshape(groups, taps.shape[0] * 2)
    starts = base[:groups * 4].reshape(groups, 4)
    return np.concatenate([np.concatenate([starts, words], axis=1).reshape(-1), base[groups * 4:]]).astype(np.int32)


def dsp_packed(words: np.ndarray, starts: np.ndarray, pairs: np.ndarray, zp2p1: int) -> np.ndarray:
    """A dsp_s8x2 or dsp_q15x2 array (`words`) with, per pair of rows, the rows' sums' starts before their words
    and after them each row's requantization {multiplier m, shift s, c = zp2p1 << s} (pairs: {m, s} of each row,
    [rows, 2], or [1, 2] for all rows), so that the kernel walks one pointer over all its constants
    (qc_dsp_conv_3px_*_packed: LDRD of the starts, the groups, LDRD and LDR of each row's three)."""
    rows = starts.shape[0]
    per_pair = words.reshape(rows // 2, -1)
    pairs = np.broadcast_to(pairs, (rows, 2)).astype(np.int64)
    rq = np.concatenate([pairs, zp2p1 << pairs[:, 1:]], axis=1).reshape(rows // 2, 6)
    return np.concatenate([starts.reshape(rows // 2, 2), per_pair, rq], axis=1).reshape(-1).astype(np.int32)


def dsp_dw_rows(taps: np.ndarray, bias: np.ndarray, izp: int, scale: int = 1) -> np.ndarray:
    """The constants of qc_dsp_dwr_* (3x3 depthwise weights [9, channels], tap ky * 3 + kx; multiplier 1): per
    channel 7 int32 words, the accumulator's start bias - izp * the sum of its weights (the kernel reads the
    inputs as they are, the pad value izp outside the input), then per kernel row ky the int16 pairs
    (w[ky][0] | w[ky][1] << 16) and (w[ky][1] | w[ky][2] << 16) of SMLAD / SMLABT / SMLATB. scale 2: of the doubled
    weights and bias (qc_dsp_rq8 mode 3)."""
    w, bias = taps.astype(np.int64) * scale, bias.astype(np.int64) * scale
    k = w.reshape(3, 3, -1) & 0xFFFF  # ky, kx, channel
    pairs = np.stack([k[:, 0] | k[:, 1] << 16, k[:, 1] | k[:, 2] << 16], axis=1)  # ky, pair, channel
    words = pairs.reshape(6, -1).T.astype(np.uint32).view(np.int32)
    start = (bias - izp * w.sum(axis=0)).astype(np.int32)
    return np.concatenate([start[:, None], words], axis=1).reshape(-1)
