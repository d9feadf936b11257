"""conv2d, depthwise_conv2d and fully_connected -> CONV2D / DEPTHWISE_CONV2D + per-channel RESCALE.

8-bit activations accumulate in i32, 16-bit activations (zero point 0, i8 weights) in i48; the RESCALE then
uses 16-bit multipliers (scale32 = False), as TOSA requires for i48 inputs. The RESCALE scale of output channel
c is s_in * s_w[c] / s_out, computed in float64; it also applies the output zero point and the fused activation
(out_min / out_max).

fully_connected (x (..., K), w (O, K)) becomes a 1x1 CONV2D on x viewed as (B, 1, 1, K): the weights keep
their (O, K) bytes (viewed as (O, 1, 1, K)), the bias, weight zero point, 4-bit weights and per-channel
RESCALE come for free, while MATMUL would need the weights transposed to (1, K, O), a separate bias ADD and
has no 4-bit weights."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...semantics.window import SourceWindow, window
from ..base import Lowerer, rule
from ..common import (
    activation_bounds,
    check_const,
    check_dtypes,
    crop_input,
    expect_rank,
    expect_shape,
    max_offset,
    op_window,
    rescale_output,
    reshape,
)

_WEIGHT_TYPES = {"i8": ("i8", "i4"), "i16": ("i8",)}
_BIAS_TYPES = ("i32", "i48", "i64")
_BIAS_SCALE_RTOL = 1e-5  # bias scales are s_in * s_w, often computed in float32 by the source


@dataclass
class _Conv:
    """One convolution in primitive form."""

    prim: str
    x: Tensor  # source activation (its quantization)
    x_name: str  # buffer fed to the primitive (NHWC)
    w: Tensor  # source weights (their quantization)
    w_name: str  # buffer in the primitive's layout
    w_axis: int  # axis of the source weights that indexes output channels
    bias: Tensor | None
    y: Tensor
    win: SourceWindow
    acc_shape: tuple[int, ...]  # primitive output shape (N, OH, OW, OC)


def _operands(lw: Lowerer, op: Op) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    if len(op.inputs) not in (2, 3) or len(op.outputs) != 1:
        raise lw.error(f"expects inputs (x, weights[, bias]) and 1 output, got {len(op.inputs)} inputs "
                       f"and {len(op.outputs)} outputs")
    x, w, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    lw.quant_in(0)
    lw.quant_in(1, per_tensor=False)
    lw.quant_out(0)
    check_dtypes(lw, (x, y), ("i8", "i16"))
    check_dtypes(lw, (w,), _WEIGHT_TYPES[x.dtype.name])
    check_const(lw, w, "weights")
    if x.dtype.bits == 16 and x.quant.zero_point != 0:
        raise lw.error(f"16-bit input {x.name!r} must have zero point 0, got {x.quant.zero_point}")
    return x, w, lw.tensor_in(2) if len(op.inputs) == 3 else None, y


def _weight_quant(lw: Lowerer, c: _Conv) -> tuple[float | np.ndarray, int]:
    """Weight scales (one float when per tensor, else one per output channel) and the weight zero point."""
    q = c.w.quant
    if q.kind == "per_tensor":
        return q.scale, q.zero_point
    if q.kind != "per_axis" or q.axis != c.w_axis:
        raise lw.error(f"weights {c.w.name!r} must be quantized per tensor or per axis {c.w_axis} "
                       f"(output channels), got {q.kind}" + (f" on axis {q.axis}" if q.axis is not None else ""))
    if np.any(q.zero_points != q.zero_points[0]):
        raise UnsupportedError(f"{lw.label}: weights {c.w.name!r} have different zero points per channel")
    return q.scales, int(q.zero_points[0])


def _bias(lw: Lowerer, c: _Conv, acc_type: str, w_scales: float | np.ndarray) -> str:
    channels = c.acc_shape[-1]
    b = c.bias
    if b is None:
        return lw.const(f"{c.y.name}_bias", np.zeros(1, np.int64), acc_type)
    check_const(lw, b, "bias")
    check_dtypes(lw, (b,), _BIAS_TYPES)
    if b.shape not in ((channels,), (1,)):
        raise lw.error(f"bias {b.name!r} must have shape [{channels}] or [1], got {list(b.shape)}")
    if b.quant is not None:
        want = np.broadcast_to(c.x.quant.scale * np.asarray(w_scales, np.float64), (channels,))
        scales, zps = b.quant.expand(b.shape)
        if np.any(zps != 0):
            raise lw.error(f"bias {b.name!r} must have zero point 0")
        if not np.allclose(np.broadcast_to(scales, (channels,)), want, rtol=_BIAS_SCALE_RTOL, atol=0):
            raise lw.error(f"bias {b.name!r} scales must be input scale * weight scales")
    if b.dtype.name == acc_type:
        return b.name
    return lw.const(f"{b.name}_{acc_type}", b.data.astype(np.int64), acc_type)


def _acc_bound(c: _Conv, w_zp: int) -> int:
    """max over output channels of |bias| + sum of |w - w_zp| * max |x - x_zp|."""
    w = np.abs(c.w.data.astype(np.int64) - w_zp)
    per_channel = np.moveaxis(w, c.w_axis, 0).reshape(w.shape[c.w_axis], -1).sum(axis=1)
    bias = int(np.abs(c.bias.data.astype(np.int64)).max()) if c.bias is not None else 0
    return int(per_channel.max()) * max_offset(c.x.quant) + bias


def _lower(lw: Lowerer, c: _Conv) -> None:
    acc_type = "i48" if c.x.dtype.bits == 16 else "i32"
    w_scales, w_zp = _weight_quant(lw, c)
    bias = _bias(lw, c, acc_type, w_scales)
    acc = lw.temp(f"{c.y.name}_acc", c.acc_shape, acc_type)
    lw.emit(c.prim, [crop_input(lw, c.x_name, c.win), c.w_name, bias], [acc], pad=list(c.win.pad),
            stride=list(c.win.stride), dilation=list(c.win.dilation), input_zp=c.x.quant.zero_point,
            weight_zp=w_zp, acc_type=acc_type)
    out = c.y.name if c.acc_shape == c.y.shape else lw.temp(f"{c.y.name}_q", c.acc_shape, c.y.dtype)
    scale = c.x.quant.scale * np.asarray(w_scales, np.float64) / c.y.quant.scale
    bounds = activation_bounds(lw, c.y.quant)
    if acc_type == "i32":
        rescale_output(lw, acc, c.y, scale, _acc_bound(c, w_zp), dst=out, **bounds)
    else:
        lw.rescale(acc, out, scale, output_zp=c.y.quant.zero_point, scale32=False, **bounds)
    if out != c.y.name:
        lw.emit("RESHAPE", [out], [c.y.name], shape=list(c.y.shape))


@rule("conv2d")
def lower_conv2d(lw: Lowerer, op: Op) -> None:
    x, w, bias, y = _operands(lw, op)
    expect_rank(lw, x, 4, "N, H, W, C")
    expect_rank(lw, w, 4, "O, KH, KW, I")
    oc, kh, kw, ic = w.shape
    if x.shape[3] != ic:
        raise lw.error(f"input {x.name!r} has {x.shape[3]} channels, weights {w.name!r} expect {ic}")
    win = op_window(lw, x, (kh, kw), lw.attr("dilation", 1))
    shape = (x.shape[0], *win.out, oc)
    expect_shape(lw, y, shape)
    _lower(lw, _Conv("CONV2D", x, x.name, w, w.name, 0, bias, y, win, shape))


@rule("depthwise_conv2d")
def lower_depthwise_conv2d(lw: Lowerer, op: Op) -> None:
    x, w, bias, y = _operands(lw, op)
    expect_rank(lw, x, 4, "N, H, W, C")
    expect_rank(lw, w, 4, "1, KH, KW, C * M")
    one, kh, kw, cm = w.shape
    channels = x.shape[3]
    if one != 1 or cm % channels:
        raise lw.error(f"weights {w.name!r} must have shape [1, KH, KW, C*M] with C = {channels}, "
                       f"got {list(w.shape)}")
    if lw.attr("depth_multiplier", cm // channels) != cm // channels:
        raise lw.error(f"depth_multiplier {lw.attr('depth_multiplier')} does not match the weights "
                       f"({cm // channels})")
    win = op_window(lw, x, (kh, kw), lw.attr("dilation", 1))
    shape = (x.shape[0], *win.out, cm)
    expect_shape(lw, y, shape)
    w_hwcm = lw.const(f"{w.name}_hwcm", w.data.reshape(kh, kw, channels, cm // channels), w.dtype)
    _lower(lw, _Conv("DEPTHWISE_CONV2D", x, x.name, w, w_hwcm, 3, bias, y, win, shape))


@rule("fully_connected")
def lower_fully_connected(lw: Lowerer, op: Op) -> None:
    x, w, bias, y = _operands(lw, op)
    expect_rank(lw, w, 2, "O, K")
    out_features, k = w.shape
    if not x.shape or x.shape[-1] != k:
        raise lw.error(f"input {x.name!r} of shape {list(x.shape)} must end with K = {k} (weights "
                       f"{w.name!r})")
    expect_shape(lw, y, (*x.shape[:-1], out_features))
    batch = int(np.prod(x.shape[:-1], dtype=np.int64))
    x4 = reshape(lw, x.name, (batch, 1, 1, k))
    w4 = lw.const(f"{w.name}_o11k", w.data.reshape(out_features, 1, 1, k), w.dtype)
    win = window((1, 1), 1)
    _lower(lw, _Conv("CONV2D", x, x4, w, w4, 0, bias, y, win, (batch, 1, 1, out_features)))
