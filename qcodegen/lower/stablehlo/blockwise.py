"""Sub-channel (blockwise) quantized weights of StableHLO dot_general / convolution: one BLOCK_CONV2D step
(qcodegen/primitives/block_conv2d.py; docs/schemes.md "Sub-channel (blockwise) quantization").

The weights (in [O, KH, KW, I] layout) are split into contiguous input-channel segments over which every output
channel has one scale; BLOCK_CONV2D blocks are the segments' greatest common length (a segment longer than that is
several blocks with the same ratio). Block b of output channel o has the unit u[b, o] = s_lhs * s_w[b, o]; its int32
partial sum P_b is weighted by an integer ratio r[b, o] = round(R[o] * u[b, o] / top[o]), top[o] = max_b u[b, o], so
that sum_b P_b * r[b, o] is the dot product in units of c[o] = top[o] / R[o], and one output RESCALE (half to even)
from c[o] to the result's type requantizes it.

Overflow: with B[b, o] the largest |P_b| (largest |x - x_zp| times the sum of |w - w_zp| over the block), R[o] is at
most (2^31 - 1) // sum_b B[b, o] (and at most 32767: the ratios are int16), so |sum_b P_b * r[b, o]| and each of its
prefixes stay within int32 (the primitive's value_ranges re-derives this from the constant weights and raises
PlanError otherwise). Precision: the ratio rounding moves the sum by at most sum_b B[b, o] * |R u / top - r| units of
c[o] (<= 0.5 c[o] sum_b B[b, o]); R[o] is the candidate with the smallest such bound (relative to top[o]) among
the 256 largest allowed values and the largest allowed power of two (exact for power-of-two scale ratios). The worst
bound over the channels, in output LSBs, is recorded in the schedule notes (`ratio_error_lsb`).

Wide form (`wide=True`, the ONNX lowering's: onnxruntime requantizes in float32, StableHLO's RESCALE semantics stay
as above): int32 ratios (up to 31 bits) and an int64 ratio-weighted sum (BLOCK_CONV2D's i48 output), requantized by
RESCALE_F32, round_half_even(f32(f32(total) * S[o])), with a float32 S[o] chosen first: the smallest float32
S[o] >= top[o] / (R[o] * y_s[o]), R[o] = min(2^31 - 1, (2^47 - 1) // sum_b B[b, o]) - 1, then r[b, o] =
round(u[b, o] / (y_s[o] * S[o])) <= R[o] (so every prefix of the sum stays below 2^47, re-derived by
value_ranges). The ratio rounding
moves the result by at most S[o] * sum_b B[b, o] * |u / (y_s S) - r| output LSBs (`ratio_error_lsb`), the two
binary32 roundings by at most (2^-23 + 2^-48) |total * S[o]|, which matters only for results inside the output
range, |total * S| <= Y = max(|out_min - y_zp|, |out_max - y_zp|) + 1 (`f32_error_lsb`)."""

from __future__ import annotations

import math

import numpy as np

from ...errors import UnsupportedError
from ...fixedpoint import Rounding, scale_to_multiplier_shift
from ...ir.graph import Tensor
from ...ir.quant import QuantType
from ...semantics.window import SourceWindow
from ..base import Lowerer
from .common import is_const

_RATIO_MAX = (1 << 15) - 1  # int16 ratios
_SUM_MAX = (1 << 31) - 1  # int32 ratio-weighted sums
_CANDIDATES = 256  # values of R[o] tried below the largest allowed one
_CHUNK = 64  # output channels per step of the search
_WIDE_RATIO_MAX = (1 << 31) - 1  # int32 ratios
_WIDE_SUM_MAX = (1 << 47) - 1  # i48 ratio-weighted sums


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


def block_bounds(weights: np.ndarray, wzp: int, q_in: QuantType, blocks: int) -> np.ndarray:
    """[B, O]: the largest |partial sum| of each block and output channel, weights [O, ..., I] against any input in
    q_in's storage range."""
    x_max = max(abs(q_in.storage_min - q_in.zero_point), abs(q_in.storage_max - q_in.zero_point))
    o, i = weights.shape[0], weights.shape[-1]
    w = np.abs(weights.astype(np.int64) - wzp).reshape(o, -1, blocks, i // blocks)
    return w.sum(axis=(1, 3)).T * x_max


def ratios(units: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Units [B, O] and block bounds [B, O] -> (ratios [B, O] int64, common scale c [O], the ratio rounding's error
    bound [O] in units of c) as in the module docstring."""
    top = units.max(axis=0)
    limit = np.minimum(_RATIO_MAX, _SUM_MAX // np.maximum(bounds.sum(axis=0), 1))
    if np.any(limit < 1):
        raise UnsupportedError(f"blockwise partial sums up to {int(bounds.sum(axis=0).max())} exceed int32")
    caps = np.concatenate([np.maximum(limit[None, :] - np.arange(_CANDIDATES)[:, None], 1),
                           2 ** np.floor(np.log2(limit))[None, :].astype(np.int64)])  # [K, O]
    share = units / top
    r = np.zeros(units.shape, np.int64)
    cap = np.zeros(limit.shape, np.int64)
    for lo in range(0, units.shape[1], _CHUNK):  # candidates x blocks x a chunk of channels at a time
        part = slice(lo, lo + _CHUNK)
        exact = caps[:, None, part] * share[None, :, part]
        rounded = np.floor(exact + 0.5)
        best = np.argmin((bounds[None, :, part] * np.abs(exact - rounded)).sum(axis=1) / caps[:, part], axis=0)
        cols = np.arange(best.size)
        r[:, part] = rounded[best, :, cols].T
        cap[part] = caps[best, lo + cols]
    err = (bounds * np.abs(cap * share - r)).sum(axis=0)
    return r, top / cap, err


def wide_ratios(units: np.ndarray, bounds: np.ndarray, y_scales: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                      np.ndarray]:
    """Units [B, O], block bounds [B, O] and the result's scales [O] -> (ratios [B, O] int64, the float32
    requantization scales S [O], the ratio rounding's error bound [O] in output LSBs), the wide form above."""
    cap = np.minimum(_WIDE_RATIO_MAX, _WIDE_SUM_MAX // np.maximum(bounds.sum(axis=0), 1)) - 1
    if np.any(cap < 1):
        raise UnsupportedError(f"blockwise partial sums up to {int(bounds.sum(axis=0).max())} exceed 48 bits")
    wanted = units.max(axis=0) / (cap * y_scales)
    scale = wanted.astype(np.float32)
    scale = np.where(scale < wanted, np.nextafter(scale, np.float32(np.inf)), scale)  # rounded up: r <= cap
    if not np.all(np.isfinite(scale) & (scale >= np.finfo(np.float32).tiny)):
        raise UnsupportedError(f"blockwise requantization scales {scale.tolist()} are outside float32's normal range")
    s64 = scale.astype(np.float64)
    exact = units / (y_scales * s64)
    r = np.floor(exact + 0.5)
    return r.astype(np.int64), scale, s64 * (bounds * np.abs(exact - r)).sum(axis=0)


def _result_type(lw: Lowerer, y: Tensor, channels: int) -> tuple[np.ndarray, int]:
    """Per-channel scales of the result and its (single) zero point; the result types one RESCALE produces."""
    qy = y.quant
    zps = np.unique(qy.zero_points)
    if y.dtype.name not in ("i8", "i16", "i32") or zps.size != 1 or (y.dtype.name != "i8" and zps[0] != 0):
        raise UnsupportedError(f"{lw.label}: sub-channel weights need an i8 result (or i16 / i32 without zero "
                               f"point) with one zero point, got {y.dtype} with zero points {zps.tolist()}")
    scales = np.broadcast_to(qy.scales, (channels,)) if qy.kind == "per_axis" else np.full(channels, qy.scale)
    return scales.astype(np.float32).astype(np.float64), int(zps[0])


def block_conv(lw: Lowerer, x: str, w: str, w_scales: np.ndarray, win: SourceWindow, ql: QuantType, q_w: QuantType,
               wzp: int, y: Tensor, base: str, wide: bool = False) -> str:
    """One BLOCK_CONV2D of x [N, H, W, I] (TOSA window `win`) with constant weights w [O, KH, KW, I] of
    per-element scales `w_scales`, requantized to y's type (by the step's RESCALE, or in the wide form by a
    RESCALE_F32 of its int64 sums). Returns the [N, OH, OW, O] result buffer."""
    if not is_const(lw, w):
        raise UnsupportedError(f"{lw.label}: sub-channel weights must be constants")
    weights = lw.schedule.buffers[w].data
    o, i = weights.shape[0], weights.shape[-1]
    size = math.gcd(*[stop - start for start, stop in segments(lw, w_scales)])
    units = float(np.float32(ql.scale)) * w_scales.reshape(o, -1, i)[:, 0, ::size].T.astype(np.float32).astype(
        np.float64)  # [B, O], float32 scales as the interpreter's
    bounds = block_bounds(weights, wzp, ql, i // size)
    y_scales, y_zp = _result_type(lw, y, o)
    n = lw.schedule.buffers[x].shape[0]
    out = lw.temp(f"{base}_q", (n, *win.out, o), y.dtype)
    geometry = dict(pad=list(win.pad), stride=list(win.stride), dilation=list(win.dilation), input_zp=ql.zero_point,
                    weight_zp=wzp)
    clamp = dict(output_zp=y_zp, out_min=int(y.quant.storage_min), out_max=int(y.quant.storage_max))
    try:
        r, scale_or_common, err = wide_ratios(units, bounds, y_scales) if wide else ratios(units, bounds)
    except UnsupportedError as exc:
        raise UnsupportedError(f"{lw.label}: {exc}") from None
    if wide:
        span = max(abs(clamp["out_min"] - y_zp), abs(clamp["out_max"] - y_zp)) + 1
        lw.schedule.notes.append(f"{base}: blockwise ratio rounding <= {float(err.max()):.3g} output LSB "
                                 f"(ratio_error_lsb), float32 requantization <= {span * (2.0**-23 + 2.0**-48):.3g}"
                                 " (f32_error_lsb)")
        total = lw.temp(f"{base}_total", (n, *win.out, o), "i48")
        lw.emit("BLOCK_CONV2D", [x, narrowed(lw, w, q_w), lw.const(f"{base}_ratio", r, "i32")], [total], **geometry)
        lw.emit("RESCALE_F32", [total], [out], scale=[float(v) for v in scale_or_common], axis=3, **clamp)
        return out
    lw.schedule.notes.append(f"{base}: blockwise ratio rounding <= "
                             f"{float((err * scale_or_common / y_scales).max()):.3g} output LSB (ratio_error_lsb)")
    pairs = [scale_to_multiplier_shift(float(c / s)) for c, s in zip(scale_or_common, y_scales, strict=True)]
    lw.emit("BLOCK_CONV2D", [x, narrowed(lw, w, q_w), lw.const(f"{base}_ratio", r, "i16")], [out], **geometry,
            multiplier=[m for m, _ in pairs], shift=[s for _, s in pairs], rounding=Rounding.HALF_EVEN.value,
            **clamp)
    return out
