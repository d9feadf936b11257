"""Weight layouts of the Cortex-M55 (MVE) kernels (runtime/mve/), made at generation time from a step's constants by
the kernel choice (choice.py)."""

from __future__ import annotations

import numpy as np


def mve_r4x16(values: np.ndarray, rows: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for VMLADAVA by blocks of 4 rows: per block of 4 rows and per chunk of 16 row
    elements (the rows padded with zeros to whole chunks, and with zero rows to whole blocks), the chunk of row 0,
    then of rows 1, 2, 3 (one pointer walks a block)."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    w = np.pad(w, ((0, -rows % 4), (0, -w.shape[1] % 16)))
    return w.reshape(-1, 4, w.shape[1] // 16, 16).transpose(0, 2, 1, 3).reshape(-1).astype(np.int8)


def mve_pw4x2(values: np.ndarray, rows: int, bias: np.ndarray, izp: int, multipliers: list[int],
              shifts: list[int]) -> np.ndarray:
    """One int32 stream per block of 4 rows of int8 weights ([rows, k]) for the Cortex-M55 convolution kernels
    (qc_mve_conv_{1px,2px}_*: one pointer walks it): the rows' int8 chunks of mve_r4x16 as words, the 4 accumulator
    starts base[r] = bias[r] (or bias[0]) - izp * the sum of row r (modulo 2^32, like the kernel's int32 sums: the
    exact sum fits int32), then the 4 multipliers and the 4 VRSHL counts 31 - shift (per-tensor scales repeated: with
    them as loop constants GCC 12 found no registers for the pair's asm). The rows after the last whole block make
    a last block with zero rows (starts, multipliers and counts 0)."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    blocks, pad = -(-rows // 4), -rows % 4
    base = np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (rows,)) - izp * w.sum(axis=1)
    per_row = [np.broadcast_to(np.asarray(v, np.int64), (rows,)) for v in (multipliers, 31 - np.asarray(shifts))]
    parts = [mve_r4x16(values, rows).view(np.uint8).reshape(blocks, -1).view("<i4").astype(np.int64),
             np.pad(base, (0, pad)).reshape(blocks, 4)]
    parts += [np.pad(v, (0, pad)).reshape(blocks, 4) for v in per_row]
    return (np.concatenate(parts, axis=1).reshape(-1) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def mve_dw_params(values: np.ndarray, channels: int, bias: np.ndarray, izp: int, multipliers: list[int],
                  shifts: list[int], zp: int, lo: int, hi: int, copies: int = 1) -> np.ndarray:
    """Per block of 16 channels of a depthwise convolution (qc_mve_dw_s8_*), 60 int32: the
    accumulators' start base[c] = bias[c] (or bias[0]) - izp * the sum of channel c's weights over the taps, the
    multipliers and 31 - shift (a VRSHL count), each as 16 int32 in the lane order of the widening products:
    channels j, j + 4, j + 8, j + 12 for j = 0..3 (the channels past the last are 0); then the output zero point
    as 8 int16, the clamp's lo and hi as 16 int8 each (vectors for VQADD, VMAX, VMIN). Per-tensor scales apply to
    every channel. copies > 1 (channels * copies <= 16): the channels repeated `copies` times, for that many
    pixels per vector."""
    w = np.asarray(values, np.int64).reshape(-1, channels)
    base = np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (channels,)) - izp * w.sum(axis=0)
    cols = [np.tile(np.broadcast_to(col, (channels,)), copies)
            for col in (base, np.asarray(multipliers, np.int64), 31 - np.asarray(shifts, np.int64))]
    channels *= copies
    blocks = -(-channels // 16)
    out = np.zeros((blocks, 3, 4, 4), np.int64)  # block, part, j, lane
    for part, col in enumerate(cols):
        padded = np.pad(col, (0, blocks * 16 - channels)).reshape(blocks, 4, 4)  # block, lane, j
        out[:, part] = padded.transpose(0, 2, 1)
    vectors = np.concatenate([np.full(8, zp, np.int16).view(np.int32), np.full(16, lo, np.int8).view(np.int32),
                              np.full(16, hi, np.int8).view(np.int32)]).astype(np.int64)
    words = np.concatenate([out.reshape(blocks, -1), np.tile(vectors, (blocks, 1))], axis=1)
    return words.reshape(-1).astype(np.int32)


def mve_dw_w16(values: np.ndarray, channels: int, copies: int = 1) -> np.ndarray:
    """Depthwise weights ([taps, channels], multiplier 1) per block of 16 channels and tap, 16 int8 (zeros past the
    last channel): one pointer walks a block's taps (qc_mve_dw_s8_*). copies > 1: the channels
    repeated (as mve_dw_params)."""
    w = np.tile(np.asarray(values, np.int64).reshape(-1, channels), copies)
    channels *= copies
    blocks = -(-channels // 16)
    w = np.pad(w, ((0, 0), (0, blocks * 16 - channels)))
    return w.reshape(w.shape[0], blocks, 16).transpose(1, 0, 2).reshape(-1).astype(np.int8)


def mve_dw_starts(values: np.ndarray, channels: int, bias: np.ndarray, izp: int) -> np.ndarray:
    """The accumulators' start of each channel of a depthwise convolution ([taps, channels] weights, multiplier 1),
    bias[c] (or bias[0]) - izp * the sum of channel c's weights over the taps, int32, in channel order
    (qc_mve_dw_s32: the caller bounds it)."""
    w = np.asarray(values, np.int64).reshape(-1, channels)
    return (np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (channels,)) - izp * w.sum(axis=0)).astype(np.int32)
