"""StableHLO convolution and dot_general on quantized tensors -> CONV2D / DEPTHWISE_CONV2D / MATMUL + RESCALE.

convolution (any dimension numbers, window strides, padding, lhs and rhs dilation, window reversal, feature and
batch groups, 0 to 3 spatial dimensions):
1. the input is transposed to [N, spatial..., C], the kernel to [O, spatial..., I] (folded: kernels are constants);
2. lhs dilation inserts the input zero point between elements (PAD + RESHAPE + SLICE), negative padding crops;
3. one spatial dimension gets a unit width, three are a sum of 2-D convolutions over the kernel depth (each depth
   tap reads a strided slab of the zero-point-padded input, the output depth folded into the batch);
4. groups: feature groups equal to the channel count with one input channel per group are a DEPTHWISE_CONV2D,
   other feature or batch groups one CONV2D per group and a CONCAT;
5. CONV2D with TOSA geometry (SAME/VALID-style trailing rows that no output reads are cropped), input zero point
   (padding taps read it: real 0) and weight zero point, an i32 accumulator;
6. the accumulator (scale s_lhs * s_rhs, per output channel for per-axis weights) is RESCALEd half to even to the
   result type -- unless the result is i32 with that very scale (up to float32 precision) and zero point 0, the
   usual StableHLO form, where the accumulator is the result (the interpreter skips this scaling too);
7. a transpose to the result's dimension order.
The integer accumulator is exact. (The interpreter computes the same exact sum for NHWC/NCHW layouts without lhs
dilation; for other layouts it falls back to a float32 convolution, whose rounding the exact sum can differ from.)

Hybrid ops (float lhs and result, quantized constant weights): hybrid.py.

Sub-channel (blockwise) constant weights (no groups): one BLOCK_CONV2D, per-block partial sums weighted by integer
ratios and requantized once (blockwise.py; a kernel depth is folded into the channels); dot_general with
such weights (no batching dimensions) is a 1x1 convolution (i8 or i4 weights; i8 weights with a 4-bit storage range
are stored as packed i4).

dot_general: lhs and rhs transposed to [batch, free, contracting] and [batch, contracting, free], one MATMUL with
both zero points, the accumulator rescaled as above (per-axis rhs: per channel along the result dimension of the
rhs quantization dimension).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...ir.quant import QuantType
from ...semantics import stablehlo as sem
from ...semantics.window import SourceWindow, window
from ..base import Lowerer, rule
from ..common import crop_input, expect_shape
from .blockwise import block_conv, weight_zero_point
from .common import (
    copy,
    dilate,
    is_const,
    operands,
    output_permutation,
    per_tensor,
    permute,
    place,
    rescale_i32,
    reshaped,
    strided,
)
from .hybrid import hybrid_convolution, hybrid_dot_general, is_hybrid

_IDENTITY_RTOL = 2.0 ** -20  # result scale == s_lhs * s_rhs up to float32 precision: no rescale


@dataclass(frozen=True)
class _Axis:
    """One spatial axis of a convolution: window stride, padding (>= 0), rhs dilation."""

    stride: int
    lo: int
    hi: int
    dilation: int


def _accumulate(lw: Lowerer, parts: list[str], base: str) -> str:
    acc = parts[0]
    for k, part in enumerate(parts[1:]):
        total = lw.temp(f"{base}_sum{k}", lw.schedule.buffers[acc].shape, "i32")
        lw.emit("ADD", [acc, part], [total])
        acc = total
    return acc


class _Conv:
    """State of one convolution lowering: quantization parameters shared by its CONV2D steps."""

    def __init__(self, lw: Lowerer, izp: int, wzp: int, base: str) -> None:
        self.lw, self.izp, self.wzp, self.base = lw, izp, wzp, base

    def window2d(self, x: str, w: str, axes: tuple[_Axis, _Axis]) -> tuple[str, SourceWindow]:
        """The TOSA window of x [N, H, W, C] and w [O, KH, KW, I], and x without the rows no output reads."""
        lw = self.lw
        h, wd = lw.schedule.buffers[x].shape[1:3]
        kh, kw = lw.schedule.buffers[w].shape[1:3]
        try:
            win = window((h, wd), (kh, kw), [a.stride for a in axes], [a.dilation for a in axes],
                         [axes[0].lo, axes[0].hi, axes[1].lo, axes[1].hi])
        except ValueError as exc:
            raise lw.error(str(exc)) from None
        return crop_input(lw, x, win), win

    def conv2d(self, x: str, w: str, axes: tuple[_Axis, _Axis], groups: int) -> str:
        """[N, H, W, C] x [O, KH, KW, C / groups] -> [N, OH, OW, O] i32."""
        lw = self.lw
        n, _, _, c = lw.schedule.buffers[x].shape
        o, kh, kw, i = lw.schedule.buffers[w].shape
        x, win = self.window2d(x, w, axes)
        if groups == 1:
            return self._emit("CONV2D", x, w, win, (n, *win.out, o))
        if groups == c and i == 1:
            m = o // c
            w_hwcm = permute(lw, reshaped(lw, w, (c, m, kh, kw)), (2, 3, 0, 1))
            return self._emit("DEPTHWISE_CONV2D", x, w_hwcm, win, (n, *win.out, o))
        parts = []
        for g in range(groups):
            xg = self.slice(x, 3, g * (c // groups), c // groups)
            wg = self.slice(w, 0, g * (o // groups), o // groups)
            parts.append(self.conv2d(xg, wg, axes, 1))
        out = lw.temp(f"{self.base}_groups", (n, *win.out, o), "i32")
        lw.emit("CONCAT", parts, [out], axis=3)
        return out

    def _emit(self, prim: str, x: str, w: str, win: SourceWindow, shape: tuple[int, ...]) -> str:
        lw = self.lw
        bias = lw.const(f"{self.base}_bias", np.zeros(1, np.int64), "i32")
        acc = lw.temp(f"{self.base}_acc", shape, "i32")
        lw.emit(prim, [x, w, bias], [acc], pad=list(win.pad), stride=list(win.stride), dilation=list(win.dilation),
                input_zp=self.izp, weight_zp=self.wzp, acc_type="i32")
        return acc

    def slice(self, name: str, axis: int, start: int, size: int) -> str:
        lw = self.lw
        buf = lw.schedule.buffers[name]
        if buf.kind == "const":
            return lw.const(f"{name}_g", np.take(buf.data, range(start, start + size), axis=axis), buf.dtype)
        shape = list(buf.shape)
        begin = [0] * len(shape)
        begin[axis], shape[axis] = start, size
        out = lw.temp(f"{name}_g", tuple(shape), buf.dtype)
        lw.emit("SLICE", [name], [out], start=begin, size=shape)
        return out

    def conv_nd(self, x: str, w: str, axes: list[_Axis], groups: int) -> str:
        """[N, S..., C] x [O, K..., I] -> [N, OS..., O] for 2 or more spatial axes (3+: a sum over the first axis's
        kernel taps of convolutions of strided slabs, the output positions folded into the batch)."""
        if len(axes) == 2:
            return self.conv2d(x, w, (axes[0], axes[1]), groups)
        lw = self.lw
        n = lw.schedule.buffers[x].shape[0]
        slabs, od = self.depth_slabs(x, axes[0], lw.schedule.buffers[w].shape[1])
        parts = []
        for k, slab in enumerate(slabs):
            wk = self.slice(w, 1, k, 1)
            wk = reshaped(lw, wk, (lw.schedule.buffers[wk].shape[0], *lw.schedule.buffers[wk].shape[2:]))
            parts.append(self.conv_nd(slab, wk, list(axes[1:]), groups))
        acc = _accumulate(lw, parts, self.base)
        out_shape = lw.schedule.buffers[acc].shape
        return reshaped(lw, acc, (n, od, *out_shape[1:]))

    def depth_slabs(self, x: str, first: _Axis, kd: int) -> tuple[list[str], int]:
        """For each of the kd taps of the first spatial axis, the strided slab of the zero-point-padded input
        [N, D, S..., C] it reads, as [N * OD, S..., C] (the output depth folded into the batch); and OD."""
        lw = self.lw
        if first.lo or first.hi:
            shape = lw.schedule.buffers[x].shape
            padding = [0] * (2 * len(shape))
            padding[2], padding[3] = first.lo, first.hi
            padded = lw.temp(f"{self.base}_dpad", (shape[0], shape[1] + first.lo + first.hi, *shape[2:]),
                             lw.schedule.buffers[x].dtype)
            lw.emit("PAD", [x], [padded], padding=padding, pad_const=self.izp)
            x = padded
        shape = lw.schedule.buffers[x].shape
        span = (kd - 1) * first.dilation + 1
        if shape[1] < span:
            raise lw.error(f"the kernel ({span} with dilation) is larger than the padded input ({shape[1]})")
        od = (shape[1] - span) // first.stride + 1
        strides = [int(np.prod(shape[k + 1:])) for k in range(len(shape))]
        slab_shape = (shape[0], od, *shape[2:])
        folded = (shape[0] * od, *shape[2:])
        slabs = [strided(lw, x, k * first.dilation * strides[1], [strides[0], first.stride * strides[1], *strides[2:]],
                         slab_shape, f"{self.base}_slab{k}") for k in range(kd)]
        return [reshaped(lw, slab, folded) for slab in slabs], od


def _rescale_acc(lw: Lowerer, acc: str, scales: np.ndarray, y: Tensor, dst: str) -> None:
    """acc (i32, channels last, real value = acc * scales[channel]) -> y's quantization into dst."""
    qy = sem.f32_scales(y.quant)
    channels = lw.schedule.buffers[acc].shape[-1]
    y_scales = np.broadcast_to(qy.scales, (channels,)) if qy.kind == "per_axis" else np.full(channels, qy.scale)
    acc_scales = np.broadcast_to(scales, (channels,))
    if y.dtype.name == "i32" and not np.any(qy.zero_points) and np.all(
            np.abs(acc_scales / y_scales - 1) <= _IDENTITY_RTOL):
        copy(lw, acc, dst)
        return
    per_axis = np.ndim(scales) > 0 or qy.kind == "per_axis"
    rank = len(lw.schedule.buffers[acc].shape)
    q_acc = (QuantType.per_axis("i32", acc_scales, 0, axis=rank - 1) if per_axis
             else QuantType.per_tensor("i32", float(scales)))
    q_dst = (QuantType.per_axis(y.dtype, y_scales, np.broadcast_to(qy.zero_points, (channels,)), axis=rank - 1,
                                storage_min=qy.storage_min, storage_max=qy.storage_max) if per_axis else qy)
    rescale_i32(lw, acc, q_acc, dst, q_dst, rank - 1 if per_axis else None)


def _finish(lw: Lowerer, acc: str, scales: np.ndarray, y: Tensor, perm: list[int]) -> None:
    """Rescale the channels-last accumulator into y, transposing by `perm` to y's dimension order."""
    if perm == sorted(perm):
        _rescale_acc(lw, acc, scales, y, y.name)
        return
    tmp = lw.temp(f"{y.name}_q", lw.schedule.buffers[acc].shape, y.dtype)
    _rescale_acc(lw, acc, scales, y, tmp)
    place(lw, tmp, y, perm)


def _weights(lw: Lowerer, rhs: Tensor, lhs: Tensor) -> tuple[int, np.ndarray]:
    """The weight zero point and per-channel (or scalar) s_lhs * s_rhs (float32 scales, exact products)."""
    q = sem.f32_scales(rhs.quant)
    s_lhs = float(np.float32(lhs.quant.scale))
    if lhs.dtype.name != "i8" or rhs.dtype.name not in ("i8", "i4"):
        raise UnsupportedError(f"{lw.label}: {lhs.dtype} x {rhs.dtype} operands (i8 x i8 or i8 x i4 only)")
    if q.kind == "per_axis":
        return weight_zero_point(lw, q), s_lhs * q.scales
    if q.kind == "sub_channel":  # per-block scales: see _blockwise
        return weight_zero_point(lw, q), np.float64(s_lhs)
    return q.zero_point, np.float64(s_lhs * q.scale)


@rule("stablehlo.convolution")
def lower_convolution(lw: Lowerer, op: Op) -> None:
    (lhs, rhs), (y,) = operands(lw, op, 2)
    if is_hybrid(lhs, rhs, y):
        hybrid_convolution(lw, op)
        return
    ql = per_tensor(lw, lhs)
    if rhs.quant is None or y.quant is None:
        raise UnsupportedError(f"{lw.label}: hybrid convolutions are not supported")
    wzp, scales = _weights(lw, rhs, lhs)
    d = lw.attr("dimension_numbers")
    k = len(d.input_spatial_dimensions)
    ones = [1] * k
    strides = [int(v) for v in lw.attr("window_strides", ones)]
    padding = np.asarray(lw.attr("padding", np.zeros((k, 2), np.int64))).reshape(k, 2).astype(int)
    lhs_dil = [int(v) for v in lw.attr("lhs_dilation", ones)]
    rhs_dil = [int(v) for v in lw.attr("rhs_dilation", ones)]
    reversal = [bool(v) for v in np.asarray(lw.attr("window_reversal", [False] * k)).reshape(-1)]
    groups, batch_groups = int(lw.attr("feature_group_count", 1)), int(lw.attr("batch_group_count", 1))
    base = y.name
    x = permute(lw, lhs.name, [d.input_batch_dimension, *d.input_spatial_dimensions, d.input_feature_dimension])
    w = permute(lw, rhs.name, [d.kernel_output_feature_dimension, *d.kernel_spatial_dimensions,
                               d.kernel_input_feature_dimension])
    if any(reversal):
        if not is_const(lw, w):
            raise UnsupportedError(f"{lw.label}: window_reversal needs constant weights")
        buf = lw.schedule.buffers[w]
        w = lw.const(f"{w}_rev", np.flip(buf.data, axis=[1 + i for i, r in enumerate(reversal) if r]), buf.dtype)
    for i, f in enumerate(lhs_dil):
        x = dilate(lw, x, 1 + i, f, ql.zero_point)
    crop = [(max(-int(lo), 0), max(-int(hi), 0)) for lo, hi in padding]
    if any(a or b for a, b in crop):
        shape = lw.schedule.buffers[x].shape
        start = [0] + [a for a, _ in crop] + [0]
        size = [shape[0]] + [shape[1 + i] - a - b for i, (a, b) in enumerate(crop)] + [shape[-1]]
        tmp = lw.temp(f"{base}_crop", tuple(size), lhs.dtype)
        lw.emit("SLICE", [x], [tmp], start=start, size=size)
        x = tmp
    axes = [_Axis(s, max(int(lo), 0), max(int(hi), 0), r) for s, (lo, hi), r in zip(strides, padding, rhs_dil,
                                                                                   strict=True)]
    if k < 2:  # unit spatial axes up to two
        xs, ws = lw.schedule.buffers[x].shape, lw.schedule.buffers[w].shape
        x = reshaped(lw, x, (xs[0], *xs[1:-1], *([1] * (2 - k)), xs[-1]))
        w = reshaped(lw, w, (ws[0], *ws[1:-1], *([1] * (2 - k)), ws[-1]))
        axes += [_Axis(1, 0, 0, 1)] * (2 - k)
    conv = _Conv(lw, ql.zero_point, wzp, base)
    blockwise = rhs.quant.kind == "sub_channel"
    if blockwise:
        if groups != 1 or batch_groups != 1:
            raise UnsupportedError(f"{lw.label}: sub-channel weights in a grouped convolution")
        w_scales = np.transpose(rhs.quant.expand(rhs.shape)[0], [
            d.kernel_output_feature_dimension, *d.kernel_spatial_dimensions, d.kernel_input_feature_dimension])
        acc = _blockwise(conv, x, w, w_scales.reshape(lw.schedule.buffers[w].shape), axes, ql, rhs.quant, y)
    else:
        acc = _grouped(lw, conv, x, w, axes, groups, batch_groups)
    acc_shape = lw.schedule.buffers[acc].shape
    if k < 2:
        acc = reshaped(lw, acc, (acc_shape[0], *acc_shape[1:1 + k], acc_shape[-1]))
    perm = output_permutation(d, k)
    expect_shape(lw, y, tuple(lw.schedule.buffers[acc].shape[p] for p in perm))
    if blockwise:
        place(lw, acc, y, perm)
    else:
        _finish(lw, acc, scales, y, perm)


def _grouped(lw: Lowerer, conv: _Conv, x: str, w: str, axes: list[_Axis], groups: int, batch_groups: int) -> str:
    if batch_groups == 1:
        return conv.conv_nd(x, w, axes, groups)
    n = lw.schedule.buffers[x].shape[0]
    o = lw.schedule.buffers[w].shape[0]
    parts = [conv.conv_nd(conv.slice(x, 0, g * (n // batch_groups), n // batch_groups),
                          conv.slice(w, 0, g * (o // batch_groups), o // batch_groups), axes, groups)
             for g in range(batch_groups)]
    shape = lw.schedule.buffers[parts[0]].shape
    out = lw.temp(f"{conv.base}_bgroups", (*shape[:-1], o), "i32")
    lw.emit("CONCAT", parts, [out], axis=len(shape) - 1)
    return out


def _blockwise(conv: _Conv, x: str, w: str, w_scales: np.ndarray, axes: list[_Axis], ql: QuantType, q_w: QuantType,
               y: Tensor) -> str:
    """Sub-channel weights [O, K..., I] (per-element scales `w_scales`, 2 or 3 kernel axes): one BLOCK_CONV2D
    requantized to y's type, [N, OS..., O]. A kernel depth is folded into the channels: the depth taps' input slabs
    concatenated along the channels, the weights and scales reordered to [O, KH, KW, KD * I] to match."""
    lw = conv.lw
    depth = len(axes) == 3
    if len(axes) > 3:
        raise UnsupportedError(f"{lw.label}: sub-channel weights in a convolution with {len(axes)} spatial axes")
    if depth:
        n = lw.schedule.buffers[x].shape[0]
        o, kd, kh, kw, i = lw.schedule.buffers[w].shape
        slabs, od = conv.depth_slabs(x, axes[0], kd)
        x = lw.temp(f"{conv.base}_depth", (*lw.schedule.buffers[slabs[0]].shape[:3], kd * i),
                    lw.schedule.buffers[x].dtype)
        lw.emit("CONCAT", slabs, [x], axis=3)
        buf = lw.schedule.buffers[w]
        w = lw.const(f"{w}_depth", np.moveaxis(buf.data, 1, 3).reshape(o, kh, kw, kd * i), buf.dtype)
        w_scales = np.moveaxis(w_scales, 1, 3).reshape(o, kh, kw, kd * i)
        axes = axes[1:]
    x, win = conv.window2d(x, w, (axes[0], axes[1]))
    out = block_conv(lw, x, w, w_scales, win, ql, q_w, conv.wzp, y, conv.base)
    if depth:
        shape = lw.schedule.buffers[out].shape
        out = reshaped(lw, out, (n, od, *shape[1:]))
    return out


def _blockwise_dot(lw: Lowerer, lhs: Tensor, rhs: Tensor, y: Tensor, lf: list[int], lc: list[int], rc: list[int],
                   rf: list[int]) -> None:
    """dot_general with sub-channel constant weights and no batching dimensions: a 1x1 BLOCK_CONV2D."""
    ql = per_tensor(lw, lhs)
    if not is_const(lw, rhs.name) or y.quant.kind != "per_tensor":
        raise UnsupportedError(f"{lw.label}: sub-channel dot_general needs constant weights and a per-tensor result")
    wzp, _ = _weights(lw, rhs, lhs)
    m, kk, n = _volume(lhs, lf), _volume(lhs, lc), _volume(rhs, rf)
    x = reshaped(lw, permute(lw, lhs.name, lf + lc), (1, m, 1, kk))
    w = reshaped(lw, permute(lw, rhs.name, rf + rc), (n, 1, 1, kk))
    w_scales = np.transpose(rhs.quant.expand(rhs.shape)[0], rf + rc).reshape(n, 1, 1, kk)
    unit = _Axis(1, 0, 0, 1)
    x, win = _Conv(lw, ql.zero_point, wzp, y.name).window2d(x, w, (unit, unit))
    out = block_conv(lw, x, w, w_scales, win, ql, rhs.quant, wzp, y, y.name)
    copy(lw, reshaped(lw, out, y.shape), y.name)


def _volume(t: Tensor, dims: list[int]) -> int:
    return int(np.prod([t.shape[i] for i in dims], dtype=np.int64))


@rule("stablehlo.dot_general")
def lower_dot_general(lw: Lowerer, op: Op) -> None:
    (lhs, rhs), (y,) = operands(lw, op, 2)
    if is_hybrid(lhs, rhs, y):
        hybrid_dot_general(lw, op)
        return
    ql = per_tensor(lw, lhs)
    if rhs.quant is None or y.quant is None:
        raise UnsupportedError(f"{lw.label}: hybrid dot_general is not supported")
    d = lw.attr("dot_dimension_numbers")
    lb, rb = list(d.lhs_batching_dimensions), list(d.rhs_batching_dimensions)
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    lf = [i for i in range(len(lhs.shape)) if i not in lb + lc]
    rf = [i for i in range(len(rhs.shape)) if i not in rb + rc]
    if rhs.quant.kind == "sub_channel" and not lb:
        expect_shape(lw, y, tuple(lhs.shape[i] for i in lf) + tuple(rhs.shape[i] for i in rf))
        _blockwise_dot(lw, lhs, rhs, y, lf, lc, rc, rf)
        return
    if rhs.dtype.name != "i8" or rhs.quant.kind == "sub_channel":
        raise UnsupportedError(f"{lw.label}: {lhs.dtype} x {rhs.dtype} {rhs.quant.kind} dot_general (i8 x i8 "
                               "only; sub-channel weights without batching dimensions)")
    wzp, scales = _weights(lw, rhs, lhs)
    b, m, kk, n = _volume(lhs, lb), _volume(lhs, lf), _volume(lhs, lc), _volume(rhs, rf)
    a = reshaped(lw, permute(lw, lhs.name, lb + lf + lc), (b, m, kk))
    w = reshaped(lw, permute(lw, rhs.name, rb + rc + rf), (b, kk, n))
    acc = lw.temp(f"{y.name}_acc", (b, m, n), "i32")
    lw.emit("MATMUL", [a, w], [acc], a_zp=ql.zero_point, b_zp=wzp)
    out_shape = tuple(lhs.shape[i] for i in lb + lf) + tuple(rhs.shape[i] for i in rf)
    expect_shape(lw, y, out_shape)
    if rhs.quant.kind == "per_axis":  # channels last for the rescale, then back
        q_axis = rhs.quant.axis
        axis = rb.index(q_axis) if q_axis in rb else len(lb) + len(lf) + rf.index(q_axis)
        order = [i for i in range(len(out_shape)) if i != axis] + [axis]
        acc = permute(lw, reshaped(lw, acc, out_shape), order)
        _finish(lw, acc, scales, y, [int(i) for i in np.argsort(order)])
        return
    acc = reshaped(lw, acc, out_shape)
    _finish(lw, acc, scales, y, list(range(len(out_shape))))

