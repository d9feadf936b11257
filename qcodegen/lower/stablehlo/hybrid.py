"""Hybrid StableHLO dot_general / convolution: float32 lhs and result, quantized constant rhs, meaning
op(lhs, dequantize(rhs)) (StableHLO's hybrid quantized ops) -> one HYBRID_CONV2D (qcodegen/primitives/hybrid_conv2d.py).

The weights stay i8 (or packed i4: i4 storage, or i8 with a 4-bit storage range such as i8<-8:7>) in flash, in OHWI
layout, with one float32 scale and zero point per (input-channel block, output channel): per-tensor and per-axis
weights are one block, sub-channel weights blocks of the input feature (contracting) dimension. The graph option
"hybrid" (`qcodegen ... --hybrid`) picks the kernel: "weight-only" (default; float arithmetic, the error is float
rounding only) or "dynamic-range" (the lhs window of each output pixel quantized to i8 at run time, integer dot).

dot_general (no batching dimensions): lhs -> [1, M, 1, K] (free, contracting), rhs -> [N, 1, 1, K]: a 1x1
convolution of M pixels; the result [M, N] is the dot_general result order. convolution: 1 or 2 spatial dimensions,
any dimension numbers, window strides, non-negative padding, rhs dilation; lhs dilation, window reversal, feature and
batch groups are refused. A quantized rhs that is not a constant is refused (weight-only means constant weights).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...semantics.window import window
from ..base import Lowerer
from ..common import crop_input, expect_shape
from .blockwise import narrowed
from .common import is_const, operands, output_permutation, permute, place, reshaped


def is_hybrid(lhs: Tensor, rhs: Tensor, y: Tensor) -> bool:
    return lhs.quant is None and y.quant is None and rhs.quant is not None


def _block_size(values: np.ndarray) -> int:
    """The largest block size along the last axis of [O, C] over which every row is constant."""
    c = values.shape[1]
    sizes = (bs for bs in range(c, 0, -1) if c % bs == 0)
    return next(bs for bs in sizes if np.all(values.reshape(-1, c // bs, bs) == values[:, ::bs, None]))


def _weights(lw: Lowerer, rhs: Tensor, perm: list[int], ohwi: tuple[int, ...]) -> tuple[str, dict]:
    """The constant rhs transposed by `perm` and reshaped to OHWI `ohwi`, with the HYBRID_CONV2D attributes
    scale [B, O] and zero_point [B, O]."""
    if not is_const(lw, rhs.name):
        raise UnsupportedError(f"{lw.label}: hybrid {lw.op.kind.split('.')[-1]} needs constant quantized weights "
                               f"(weight-only quantization); the rhs {rhs.name!r} is computed at run time")
    if rhs.dtype.name not in ("i8", "i4"):
        raise UnsupportedError(f"{lw.label}: hybrid weights must have i8 or i4 storage, got {rhs.dtype}")
    q = rhs.quant
    scales, zps = (np.transpose(np.asarray(v), perm).reshape(ohwi) for v in q.expand(rhs.shape))
    flat_s, flat_z = scales.reshape(ohwi[0], -1, ohwi[3]), zps.reshape(ohwi[0], -1, ohwi[3])
    if np.any(flat_s != flat_s[:, :1]) or np.any(flat_z != flat_z[:, :1]):
        raise UnsupportedError(f"{lw.label}: hybrid weights with blocks along a spatial kernel dimension (blocks "
                               "along the input or output feature dimension only)")
    per_oc_s, per_oc_z = flat_s[:, 0, :], flat_z[:, 0, :]
    bs = int(np.gcd(_block_size(per_oc_s), _block_size(per_oc_z)))  # divides C, both constant over it
    w = reshaped(lw, permute(lw, rhs.name, perm), ohwi)
    return narrowed(lw, w, q), dict(scale=per_oc_s[:, ::bs].T.tolist(), zero_point=per_oc_z[:, ::bs].T.tolist())


def _emit(lw: Lowerer, x: str, w: str, attrs: dict, out_hw: tuple[int, int], y: Tensor, **geometry: list[int]
          ) -> str:
    """HYBRID_CONV2D of x [N, H, W, C] and OHWI weights into f32 [N, out_hw..., O]: y itself when it has that
    shape, else a new buffer."""
    shape = (lw.schedule.buffers[x].shape[0], *out_hw, lw.schedule.buffers[w].shape[0])
    out = y.name if tuple(y.shape) == shape else lw.temp(f"{y.name}_hybrid", shape, "f32")
    lw.emit("HYBRID_CONV2D", [x, w], [out], mode=lw.graph.options.get("hybrid", "weight-only"), **geometry, **attrs)
    return out


def hybrid_dot_general(lw: Lowerer, op: Op) -> None:
    (lhs, rhs), (y,) = operands(lw, op, 2)
    d = lw.attr("dot_dimension_numbers")
    if list(d.lhs_batching_dimensions):
        raise UnsupportedError(f"{lw.label}: hybrid dot_general with batching dimensions is not supported")
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    lf = [i for i in range(len(lhs.shape)) if i not in lc]
    rf = [i for i in range(len(rhs.shape)) if i not in rc]
    m, k, n = (int(np.prod([t.shape[i] for i in dims], dtype=np.int64))
               for t, dims in ((lhs, lf), (lhs, lc), (rhs, rf)))
    expect_shape(lw, y, tuple(lhs.shape[i] for i in lf) + tuple(rhs.shape[i] for i in rf))
    w, attrs = _weights(lw, rhs, rf + rc, (n, 1, 1, k))
    x = reshaped(lw, permute(lw, lhs.name, lf + lc), (1, m, 1, k))
    out = _emit(lw, x, w, attrs, (m, 1), y, pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1])
    if out != y.name:
        lw.emit("RESHAPE", [out], [y.name], shape=list(y.shape))


def hybrid_convolution(lw: Lowerer, op: Op) -> None:
    (lhs, rhs), (y,) = operands(lw, op, 2)
    d = lw.attr("dimension_numbers")
    k = len(d.input_spatial_dimensions)
    ones = [1] * k
    padding = np.asarray(lw.attr("padding", np.zeros((k, 2), np.int64))).reshape(k, 2).astype(int)
    refused = {"1 or 2 spatial dimensions": k in (1, 2), "negative padding": bool(np.all(padding >= 0)),
               "lhs dilation": [int(v) for v in lw.attr("lhs_dilation", ones)] == ones,
               "window reversal": not np.any(np.asarray(lw.attr("window_reversal", [False] * k))),
               "feature groups": int(lw.attr("feature_group_count", 1)) == 1,
               "batch groups": int(lw.attr("batch_group_count", 1)) == 1}
    bad = [what for what, ok in refused.items() if not ok]
    if bad:
        raise UnsupportedError(f"{lw.label}: hybrid convolution: {', '.join(bad)} not supported (only "
                               "1 or 2 spatial dimensions without lhs dilation, reversal or groups)")
    x = permute(lw, lhs.name, [d.input_batch_dimension, *d.input_spatial_dimensions, d.input_feature_dimension])
    kperm = [d.kernel_output_feature_dimension, *d.kernel_spatial_dimensions, d.kernel_input_feature_dimension]
    kshape = [rhs.shape[i] for i in kperm]
    unit = [1] * (2 - k)
    w, attrs = _weights(lw, rhs, kperm, (kshape[0], *kshape[1:-1], *unit, kshape[-1]))
    xs = lw.schedule.buffers[x].shape
    x = reshaped(lw, x, (xs[0], *xs[1:-1], *unit, xs[-1]))
    strides = [int(v) for v in lw.attr("window_strides", ones)] + unit
    dilation = [int(v) for v in lw.attr("rhs_dilation", ones)] + unit
    pads = [int(v) for v in padding.reshape(-1)] + [0, 0] * (2 - k)
    h, wd = lw.schedule.buffers[x].shape[1:3]
    kh, kw = lw.schedule.buffers[w].shape[1:3]
    try:
        win = window((h, wd), (kh, kw), strides, dilation, pads)
    except ValueError as exc:
        raise lw.error(str(exc)) from None
    acc = _emit(lw, crop_input(lw, x, win), w, attrs, win.out, y, pad=list(win.pad), stride=list(win.stride),
                dilation=list(win.dilation))
    shape = lw.schedule.buffers[acc].shape
    acc = reshaped(lw, acc, (shape[0], *shape[1:1 + k], shape[-1]))
    perm = output_permutation(d, k)
    expect_shape(lw, y, tuple(lw.schedule.buffers[acc].shape[p] for p in perm))
    if acc != y.name:
        place(lw, acc, y, perm)
