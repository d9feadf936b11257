"""Weight re-layouts for a target's kernels, made at generation time from a constant operand's values: a template
calls `relayout(operand, kind)` (passed to every step template by render.py) and gets the name of a new constant
array (one per buffer and kind) holding the re-laid values."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _q15_blocks(values: np.ndarray, rows: int, block: int, pad: bool = False) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for SMLAD (Cortex-M DSP): per block of `block` rows and per group of 4 row
    elements j..j+3, for each row two int32 words of int16 halves, (w[j] | w[j+2] << 16) then
    (w[j+1] | w[j+3] << 16), matching SXTB16 of the 4 input bytes and of their rotation by 8. The rows after the
    last block are left out, and the elements after the last group of 4 (the kernel reads them as int8), or with
    `pad` they make a last group, with zeros."""
    w = _padded(values, rows, pad)
    blocks, groups = rows // block, w.shape[1] // 4
    b = w[:blocks * block, :groups * 4].reshape(blocks, block, groups, 4) & 0xFFFF  # block, row, group, element
    words = np.stack([b[..., 0] | b[..., 2] << 16, b[..., 1] | b[..., 3] << 16], axis=-1)
    return words.transpose(0, 2, 1, 3).reshape(-1).astype(np.uint32).view(np.int32)


def _padded(values: np.ndarray, rows: int, pad: bool) -> np.ndarray:
    """[rows, k] int64, with `pad` zeros appended to each row up to a multiple of 4 elements."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    return np.pad(w, ((0, 0), (0, -w.shape[1] % 4))) if pad else w


def dsp_q15x4(values: np.ndarray, rows: int) -> np.ndarray:
    """_q15_blocks of 4 rows (qc_dsp_dot_rows4_q15)."""
    return _q15_blocks(values, rows, 4)


def dsp_q15x2(values: np.ndarray, rows: int) -> np.ndarray:
    """_q15_blocks of 2 rows, padded (qc_dsp_dot2x2_q15: 2 pixels x 2 rows)."""
    return _q15_blocks(values, rows, 2, pad=True)


def _s8_blocks(values: np.ndarray, rows: int, block: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for the Cortex-M DSP kernels over blocks of rows: per block of `block` rows
    and per group of 4 row elements (the last group padded with zeros), the int32 word of the group's 4 bytes of
    each row in turn (byte j = element j, little-endian): LDRD loads two rows' words; the same flash as the int8
    rows (and the padding). The rows after the last block are left out (the kernel reads them as int8)."""
    w = _padded(values, rows, True)
    blocks, groups = rows // block, w.shape[1] // 4
    b = w[:blocks * block].reshape(blocks, block, groups, 4) & 0xFF  # block, row, group, element
    words = b[..., 0] | b[..., 1] << 8 | b[..., 2] << 16 | b[..., 3] << 24
    return words.transpose(0, 2, 1).reshape(-1).astype(np.uint32).view(np.int32)


def dsp_s8x2(values: np.ndarray, rows: int) -> np.ndarray:
    """_s8_blocks of 2 rows (qc_dsp_dot2x2: 2 pixels x 2 rows)."""
    return _s8_blocks(values, rows, 2)


def dsp_s8x4(values: np.ndarray, rows: int) -> np.ndarray:
    """_s8_blocks of 4 rows (qc_dsp_dot_rows4_s8x4)."""
    return _s8_blocks(values, rows, 4)


def row_sums(values: np.ndarray, rows: int) -> np.ndarray:
    """The sum of each row of int8 weights ([rows, k]) as int32: a kernel's input-zero-point correction made at
    generation time (so that the int8 rows need not be read, nor kept, for it)."""
    return np.asarray(values, np.int64).reshape(rows, -1).sum(axis=1).astype(np.int32)


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


def dsp_dw_q15(values: np.ndarray, channels: int) -> np.ndarray:
    """Depthwise weights ([taps, channels], multiplier 1) for SMLABB/SMLATT (Cortex-M DSP): per group of 4 channels
    c..c+3 and per tap, the int32 words (w[c] | w[c+2] << 16) and (w[c+1] | w[c+3] << 16), matching SXTB16 of the
    4 input bytes and of their rotation by 8 (one pointer walks a group's taps). The channels after the last
    group of 4 are left out."""
    w = np.asarray(values, np.int64).reshape(-1, channels)
    groups = channels // 4
    g = w[:, :groups * 4].reshape(w.shape[0], groups, 4).transpose(1, 0, 2) & 0xFFFF  # group, tap, channel
    words = np.stack([g[..., 0] | g[..., 2] << 16, g[..., 1] | g[..., 3] << 16], axis=-1)
    return words.reshape(-1).astype(np.uint32).view(np.int32)


def dsp_dw_q15_base(values: np.ndarray, channels: int, bias: np.ndarray, izp: int) -> np.ndarray:
    """dsp_dw_q15 with each group's accumulator start before its taps' words, so that one pointer walks a group:
    per group of 4 channels, base[c..c+3] then the taps' words; then base of the channels after the last group.
    base[c] = bias[c] (or bias[0] for all) - izp * the sum of channel c's weights over the taps: the start of the
    sum of x * w that gives the sum of (x - izp) * w + bias (the caller bounds it: int32)."""
    w = np.asarray(values, np.int64).reshape(-1, channels)
    base = np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (channels,)) - izp * w.sum(axis=0)
    groups = channels // 4
    words = dsp_dw_q15(values, channels).astype(np.int64).reshape(groups, w.shape[0] * 2)
    starts = base[:groups * 4].reshape(groups, 4)
    return np.concatenate([np.concatenate([starts, words], axis=1).reshape(-1), base[groups * 4:]]).astype(np.int32)


def mve_r4x16(values: np.ndarray, rows: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for VMLADAVA by blocks of 4 rows (Cortex-M55: qc_mve_dot4): per block of 4
    rows and per chunk of 16 row elements (the rows padded with zeros to whole chunks), the chunk of row 0, then of
    rows 1, 2, 3 (one pointer walks a block; loads at immediate offsets). The rows after the last block of 4 are
    left out (the kernel reads them from the OHWI array)."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    w = np.pad(w[:rows // 4 * 4], ((0, 0), (0, -w.shape[1] % 16)))
    return w.reshape(-1, 4, w.shape[1] // 16, 16).transpose(0, 2, 1, 3).reshape(-1).astype(np.int8)


def mve_pw4x2(values: np.ndarray, rows: int, bias: np.ndarray, izp: int, multipliers: list[int],
              shifts: list[int]) -> np.ndarray:
    """One int32 stream per block of 4 rows of int8 weights ([rows, k]) for the Cortex-M55 pixel-pair kernel
    (qc_mve_pw4x2: one pointer walks it): the 4 accumulator starts base[r] = bias[r] (or bias[0]) - izp * the sum
    of row r (modulo 2^32, like the kernel's int32 sums: the exact sum fits int32), the rows' int8 chunks of
    mve_r4x16 as words, then (per-channel scales only) the 4 multipliers and the 4 VRSHL counts 31 - shift. The
    rows after the last block of 4 are left out."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    blocks = rows // 4
    base = np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (rows,)) - izp * w.sum(axis=1)
    parts = [base[:blocks * 4].reshape(blocks, 4),
             mve_r4x16(values, rows).view(np.uint8).reshape(blocks, -1).view("<i4").astype(np.int64)]
    if len(multipliers) > 1:
        parts += [np.asarray(multipliers, np.int64)[:blocks * 4].reshape(blocks, 4),
                  31 - np.asarray(shifts, np.int64)[:blocks * 4].reshape(blocks, 4)]
    return (np.concatenate(parts, axis=1).reshape(-1) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def mve_dw_params(values: np.ndarray, channels: int, bias: np.ndarray, izp: int, multipliers: list[int],
                  shifts: list[int], zp: int, lo: int, hi: int, copies: int = 1) -> np.ndarray:
    """Per block of 16 channels of a depthwise convolution (Cortex-M55: qc_mve_dw_<mode>), 60 int32: the
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
    last channel): one pointer walks a block's taps (Cortex-M55: qc_mve_dw_<mode>). copies > 1: the channels
    repeated (as mve_dw_params)."""
    w = np.tile(np.asarray(values, np.int64).reshape(-1, channels), copies)
    channels *= copies
    blocks = -(-channels // 16)
    w = np.pad(w, ((0, 0), (0, blocks * 16 - channels)))
    return w.reshape(w.shape[0], blocks, 16).transpose(1, 0, 2).reshape(-1).astype(np.int8)


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


RELAYOUTS: dict[str, tuple[str, Callable[..., np.ndarray]]] = {
    "dsp_q15x4": ("int32_t", dsp_q15x4),
    "dsp_q15x2": ("int32_t", dsp_q15x2),
    "dsp_dw_q15_base": ("int32_t", dsp_dw_q15_base),
    "mve_r4x16": ("int8_t", mve_r4x16),
    "mve_pw4x2": ("int32_t", mve_pw4x2),
    "mve_dw_params": ("int32_t", mve_dw_params),
    "mve_dw_w16": ("int8_t", mve_dw_w16),
    "dsp_s8x2": ("int32_t", dsp_s8x2),
    "dsp_s8x4": ("int32_t", dsp_s8x4),
    "row_sums": ("int32_t", row_sums),
    "sdot_4x4": ("int8_t", sdot_4x4),
    "sdot_4x4_pad8": ("int8_t", sdot_4x4_pad8),
    "rv32_r4": ("int8_t", rv32_r4),
    "rv32_r8": ("int8_t", rv32_r8),
}

# Target weight layouts (`weight_layout` of a target, `--weight-layout` of the CLI): "compact" keeps the bulk of the
# weights as int8 (flash = the model's weights); "fast" also makes the re-layouts of FAST_ONLY, which take more flash
# than the int8 weights they stand for (int16 halves: twice the bytes) for fewer instructions. Depthwise re-layouts
# are not listed: depthwise weights are a few KB per model.
WEIGHT_LAYOUTS = ("compact", "fast")
FAST_ONLY = frozenset({"dsp_q15x4", "dsp_q15x2"})


def _x86_blocks8(values: np.ndarray, rows: int, group: int) -> np.ndarray:
    """Rows of int8 weights ([rows, k]) for the x86 blocked kernels (templates/avx2/_dot.c.j2 `gemm`), whose int32
    lanes are 8 output channels: per block of 8 rows and per group of `group` row elements (the last group padded
    with zeros), 8 * group bytes: the group of row 0, then of rows 1 .. 7. The rows after the last block of 8 are
    left out (the kernel reads them from the OHWI array)."""
    w = np.asarray(values, np.int64).reshape(rows, -1)
    w = np.pad(w, ((0, 0), (0, -w.shape[1] % group)))
    blocks, groups = rows // 8, w.shape[1] // group
    b = w[:blocks * 8].reshape(blocks, 8, groups, group)  # block, row, group, element
    return b.transpose(0, 2, 1, 3).reshape(-1).astype(np.int8)


def madd_2x8(values: np.ndarray, rows: int) -> np.ndarray:
    """_x86_blocks8 by pairs (AVX2: VPMOVSXBW of 16 bytes, then VPMADDWD against a broadcast int16 pair)."""
    return _x86_blocks8(values, rows, 2)


def dpbusd_4x8(values: np.ndarray, rows: int) -> np.ndarray:
    """_x86_blocks8 by groups of 4 (VNNI: VPDPBUSD of 32 bytes against 4 broadcast unsigned bytes)."""
    return _x86_blocks8(values, rows, 4)


def madd_dw_pairs(values: np.ndarray, channels: int) -> np.ndarray:
    """Depthwise weights ([taps, channels], multiplier 1) for VPMADDWD by pairs of taps (AVX2): per pair of taps
    t, t + 1 (t even; the tap after the last is 0) and per channel c, the int16 pair (w[t][c], w[t + 1][c]); pair
    t / 2 starts at t * channels, so channel c of the pair of tap t is at t * channels + 2 * c."""
    w = np.asarray(values, np.int64).reshape(-1, channels)
    w = np.pad(w, ((0, w.shape[0] % 2), (0, 0)))
    return w.reshape(-1, 2, channels).transpose(0, 2, 1).reshape(-1).astype(np.int16)


RELAYOUTS.update({"madd_2x8": ("int8_t", madd_2x8), "dpbusd_4x8": ("int8_t", dpbusd_4x8),
                  "madd_dw_pairs": ("int16_t", madd_dw_pairs)})


def x86_dw_rows(values: np.ndarray, channels: int, kw: int) -> np.ndarray:
    """Depthwise weights ([kh, kw, channels], multiplier 1; channels a multiple of 8) for the AVX2 kernel over rows of
    int16 tap pairs (templates/avx2/_dot.c.j2 `depthwise`): per block of 8 channels, per kernel row ky and per pair
    of horizontally adjacent taps kx = 2q, 2q + 1 (the tap after the last of an odd row is 0), the 8 int16 pairs
    (w[ky][2q][c], w[ky][2q + 1][c]) of the block's channels c: 16 int16 per (block, ky, q), in that order."""
    w = np.asarray(values, np.int64).reshape(-1, kw, channels)  # ky, kx, channel
    w = np.pad(w, ((0, 0), (0, kw % 2), (0, 0)))
    kh, pairs = w.shape[0], w.shape[1] // 2
    b = w.reshape(kh, pairs, 2, channels // 8, 8)  # ky, q, tap of the pair, block, channel
    return b.transpose(3, 0, 1, 4, 2).reshape(-1).astype(np.int16)


def x86_dw_params(values: np.ndarray, channels: int, bias: np.ndarray, izp: int, multipliers: list[int],
                  shifts: list[int]) -> np.ndarray:
    """The per-channel constants of the same kernel, 40 int32 per block of 8 channels (channels a multiple of 8):
    the accumulators' start bias[c] (or bias[0]) - izp * the sum of channel c's weights over the taps (modulo 2^32,
    like the kernel's int32 lanes: the exact accumulator fits int32), the multipliers m, then mo (lane 2i: the
    multiplier of lane 2i + 1, where VPMULDQ reads the odd lanes' multipliers; the odd lanes 0), then when every
    shift is at least 33 (qc_scale32x8_s33r) s - 32 and 2^(s - 33), else (qc_scale32x8) s and 0. Per-tensor scales
    apply to every channel."""
    w = np.asarray(values, np.int64).reshape(-1, channels)
    start = np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (channels,)) - izp * w.sum(axis=0)
    m = np.broadcast_to(np.asarray(multipliers, np.int64), (channels,))
    s = np.broadcast_to(np.asarray(shifts, np.int64), (channels,))
    mo = np.zeros(channels, np.int64)
    mo[0::2] = m[1::2]
    wide = bool(s.min() >= 33)
    cols = [start, m, mo, s - 32 if wide else s, (1 << np.maximum(s - 33, 0)) if wide else np.zeros(channels, np.int64)]
    words = np.stack([c.reshape(-1, 8) for c in cols], axis=1)  # block, column, lane
    return (words.reshape(-1) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


RELAYOUTS.update({"x86_dw_rows": ("int16_t", x86_dw_rows), "x86_dw_params": ("int32_t", x86_dw_params)})
