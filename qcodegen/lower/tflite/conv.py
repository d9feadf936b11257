"""TFLite CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV -> CONV2D / DEPTHWISE_CONV2D /
TRANSPOSE_CONV2D + RESCALE, bit-exact with TFLM's reference kernels (docs/semantics.md §8.1).

acc = bias + sum (x - input_zp) * w in the kernel's accumulator, then MultiplyByQuantizedMultiplier per output
channel (RESCALE DOUBLE_ROUND, TOSA shift 31 - s), + output zp, clamped to the fused activation range.
Multipliers: QuantizeMultiplier((double)s_in * (double)s_w[c] / (double)s_out), the per-tensor case broadcast
(PopulateConvolutionQuantizationParams). The TFLM source's per-tensor FULLY_CONNECTED forms s_in * s_w in
float32 (GetQuantizedConvolutionMultipler), but the tflite-micro oracle matches the double product (checked
with scales where the two multipliers give different outputs), so every op uses the double product.
Conv kernels ignore the filter zero point; per-tensor FULLY_CONNECTED subtracts it. A CONV_2D whose filters are
shallower than the input (groups) becomes one CONV2D + RESCALE per group on a SLICE of the channels, then CONCAT.

16x8 (int16 activations): DEPTHWISE_CONV_2D and TRANSPOSE_CONV accumulate in int64 and use the 64-bit
MultiplyByQuantizedMultiplier (16-bit multiplier, RESCALE scale32=False); CONV_2D and FULLY_CONNECTED do the
same with an int64 bias (or none and quantized_bias_type != INT32), but with an int32 bias they accumulate in
int32 and use the 32-bit MultiplyByQuantizedMultiplier: the i48 accumulator is narrowed to i32 (range analysis
proves it fits) and RESCALEd with DOUBLE_ROUND.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...ir.rescale import RescaleParams
from ...semantics.tflite import Pair, quantize_multiplier_exponent
from ..base import Lowerer, rule
from ..common import crop_input, reshape
from .common import const_ints, fused_bounds, operands, quantized, rank4, same_type, tfl_window
from .quant import emit_mbqm

_WEIGHT_TYPES = {"i8": ("i8", "i4"), "i16": ("i8",)}


@dataclass
class _Conv:
    """What one convolution lowering needs besides the primitive step itself."""

    x: Tensor
    w: Tensor
    bias: Tensor | None
    y: Tensor
    channels: int  # output channels
    w_axis: int  # quantized dimension of the weights


def _checked(lw: Lowerer, x: Tensor, w: Tensor, y: Tensor) -> None:
    quantized(lw, x)
    quantized(lw, y)
    same_type(lw, x, y)
    if w.dtype.name not in _WEIGHT_TYPES[x.dtype.name]:
        raise UnsupportedError(f"{lw.label}: {w.dtype} weights with {x.dtype} activations are not supported "
                               f"(hybrid or unsupported model)")
    if not w.is_const:
        raise UnsupportedError(f"{lw.label}: weights {w.name!r} are not constant")
    if w.quant is None:
        raise lw.error(f"weights {w.name!r} are not quantized")


def _weight_scales(lw: Lowerer, c: _Conv) -> np.ndarray:
    """One weight scale per output channel (a per-tensor scale broadcast)."""
    q = c.w.quant
    if q.kind == "per_tensor":
        return np.full(c.channels, q.scale)
    if q.kind != "per_axis" or q.axis != c.w_axis or q.scales.size != c.channels:
        raise lw.error(f"weights {c.w.name!r} must be quantized per tensor or with {c.channels} scales on axis "
                       f"{c.w_axis}")
    return q.scales


def _channel_pairs(lw: Lowerer, c: _Conv) -> list[Pair]:
    """QuantizeMultiplier((double)s_in * (double)s_w[c] / (double)s_out) per output channel."""
    s_in, s_out = c.x.quant.scale, c.y.quant.scale
    return [quantize_multiplier_exponent(s_in * float(s) / s_out) for s in _weight_scales(lw, c)]


def _int32_accumulation(lw: Lowerer, c: _Conv) -> bool:
    """TFLM's 16x8 CONV_2D / FULLY_CONNECTED accumulate in int32 when the bias is int32 (or absent and
    quantized_bias_type says INT32)."""
    if c.x.dtype.bits != 16:
        return True
    if c.bias is not None:
        return c.bias.dtype.name == "i32"
    return lw.attr("quantized_bias_type", "FLOAT32") == "INT32"


def _bias_values(lw: Lowerer, c: _Conv) -> np.ndarray:
    """The bias per output channel (zeros without one)."""
    b = c.bias
    if b is None:
        return np.zeros(c.channels, np.int64)
    allowed = ("i32",) if c.x.dtype.bits == 8 else ("i16", "i32", "i64")
    if not b.is_const or b.dtype.name not in allowed or b.shape != (c.channels,):
        raise lw.error(f"bias {b.name!r} must be a constant {'/'.join(allowed)} tensor of shape [{c.channels}], "
                       f"got {b.dtype} {list(b.shape)}")
    return b.data.astype(np.int64)


def _accumulate(lw: Lowerer, c: _Conv, prim: str, x_name: str, w_name: str, bias: np.ndarray,
                shape: tuple[int, ...], wide: bool, **attrs: object) -> str:
    acc_type = "i48" if c.x.dtype.bits == 16 else "i32"
    acc = lw.temp(f"{c.y.name}_acc", shape, acc_type)
    lw.emit(prim, [x_name, w_name, lw.const(f"{c.y.name}_bias", bias, acc_type)], [acc],
            input_zp=c.x.quant.zero_point, acc_type=acc_type, **attrs)
    if acc_type == "i48" and not wide:  # TFLM's int32 accumulator: narrow exactly (scale 1.0 = (2^14, 14))
        narrow = lw.temp(f"{c.y.name}_acc32", shape, "i32")
        lw.emit_rescale(acc, narrow, RescaleParams(multiplier=[1 << 14], shift=[14], input_zp=0, output_zp=0,
                                                   scale32=False))
        acc = narrow
    return acc


def _requantize(lw: Lowerer, c: _Conv, acc: str, out: str, pairs: list[Pair], wide: bool) -> None:
    """acc -> out (the output, or a part of it of the accumulator's shape)."""
    shape = lw.schedule.buffers[acc].shape
    target = out if shape == lw.buffer(out).shape else lw.temp(f"{c.y.name}_q", shape, c.y.dtype)
    emit_mbqm(lw, acc, target, pairs, output_zp=c.y.quant.zero_point, bounds=fused_bounds(lw, c.y), wide=wide)
    if target != out:
        lw.emit("RESHAPE", [target], [out], shape=list(lw.buffer(out).shape))


def _conv_groups(lw: Lowerer, c: _Conv, x_name: str, attrs: dict[str, object]) -> None:
    """CONV_2D whose filters read in_channels / groups channels (TFLM's grouped convolution): one CONV2D and
    RESCALE per group on its slice of the input channels, then CONCAT of the outputs."""
    n, h, w, channels = lw.schedule.buffers[x_name].shape
    depth = c.w.shape[3]
    groups = channels // depth
    per_group = c.channels // groups if groups and channels % depth == 0 else 0
    if per_group * groups != c.channels or groups * depth != channels:
        raise lw.error(f"filters of depth {depth} do not divide the {channels} input channels and {c.channels} "
                       f"filters into groups")
    wide = not _int32_accumulation(lw, c)
    pairs, bias = _channel_pairs(lw, c), _bias_values(lw, c)
    if groups == 1:
        acc = _accumulate(lw, c, "CONV2D", x_name, c.w.name, bias, c.y.shape, wide, **attrs)
        _requantize(lw, c, acc, c.y.name, pairs, wide)
        return
    parts = []
    for g in range(groups):
        xg = lw.temp(f"{x_name}_g{g}", (n, h, w, depth), c.x.dtype)
        lw.emit("SLICE", [x_name], [xg], start=[0, 0, 0, g * depth], size=[n, h, w, depth])
        band = slice(g * per_group, (g + 1) * per_group)
        wg = lw.const(f"{c.w.name}_g{g}", c.w.data[band], c.w.dtype)
        shape = (*c.y.shape[:3], per_group)
        acc = _accumulate(lw, c, "CONV2D", xg, wg, bias[band], shape, wide, **attrs)
        parts.append(lw.temp(f"{c.y.name}_g{g}", shape, c.y.dtype))
        _requantize(lw, c, acc, parts[-1], pairs[band], wide)
    lw.emit("CONCAT", parts, [c.y.name], axis=3)


def _window_conv(lw: Lowerer, op: Op, depthwise: bool) -> None:
    (x, w, *rest), (y,) = operands(lw, op, (2, 3))
    _checked(lw, x, w, y)
    rank4(lw, x, "N, H, W, C")
    rank4(lw, w, "1, KH, KW, C*M" if depthwise else "O, KH, KW, I")
    kh, kw = w.shape[1], w.shape[2]
    dilation = (int(lw.attr("dilation_h_factor", 1)), int(lw.attr("dilation_w_factor", 1)))
    win = tfl_window(lw, x, (kh, kw), dilation)
    channels = w.shape[3] if depthwise else w.shape[0]
    if y.shape != (x.shape[0], *win.out, channels):
        raise lw.error(f"output {y.name!r} has shape {list(y.shape)}, expected {[x.shape[0], *win.out, channels]}")
    c = _Conv(x, w, rest[0] if rest else None, y, channels, 3 if depthwise else 0)
    attrs = dict(pad=list(win.pad), stride=list(win.stride), dilation=list(win.dilation), weight_zp=0)
    x_name = crop_input(lw, x.name, win)
    if not depthwise:
        _conv_groups(lw, c, x_name, attrs)
        return
    m = channels // x.shape[3]
    if w.shape[0] != 1 or channels != x.shape[3] * m or lw.attr("depth_multiplier", m) != m:
        raise lw.error(f"weights {list(w.shape)} do not fit {x.shape[3]} input channels with depth_multiplier "
                       f"{lw.attr('depth_multiplier', m)}")
    w_name = lw.const(f"{w.name}_hwcm", w.data.reshape(kh, kw, x.shape[3], m), w.dtype)
    wide = x.dtype.bits == 16  # TFLM's 16x8 depthwise always accumulates in int64
    acc = _accumulate(lw, c, "DEPTHWISE_CONV2D", x_name, w_name, _bias_values(lw, c), y.shape, wide, **attrs)
    _requantize(lw, c, acc, y.name, _channel_pairs(lw, c), wide)


@rule("tfl.conv_2d")
def lower_conv_2d(lw: Lowerer, op: Op) -> None:
    _window_conv(lw, op, depthwise=False)


@rule("tfl.depthwise_conv_2d")
def lower_depthwise_conv_2d(lw: Lowerer, op: Op) -> None:
    _window_conv(lw, op, depthwise=True)


@rule("tfl.fully_connected")
def lower_fully_connected(lw: Lowerer, op: Op) -> None:
    """TFLM: batches = output size / units, each a dot product over the weights' last dimension."""
    (x, w, *rest), (y,) = operands(lw, op, (2, 3))
    _checked(lw, x, w, y)
    if lw.attr("weights_format", "DEFAULT") != "DEFAULT":
        raise UnsupportedError(f"{lw.label}: weights_format {lw.attr('weights_format')} is not supported")
    if len(w.shape) != 2:
        raise lw.error(f"weights {w.name!r} must have shape [units, depth], got {list(w.shape)}")
    units, depth = w.shape
    batches = y.size // units if y.shape and y.shape[-1] == units else 0
    if batches * units != y.size or batches * depth != x.size:
        raise lw.error(f"shapes do not fit: input {list(x.shape)}, weights {list(w.shape)}, output {list(y.shape)}")
    c = _Conv(x, w, rest[0] if rest else None, y, units, 0)
    if w.quant.kind == "per_tensor":  # one multiplier; the filter zero point is subtracted
        pairs, weight_zp = _channel_pairs(lw, c)[:1], w.quant.zero_point
    else:
        pairs, weight_zp = _channel_pairs(lw, c), 0
    x4 = reshape(lw, x.name, (batches, 1, 1, depth))
    w4 = lw.const(f"{w.name}_o11k", w.data.reshape(units, 1, 1, depth), w.dtype)
    wide = not _int32_accumulation(lw, c)
    acc = _accumulate(lw, c, "CONV2D", x4, w4, _bias_values(lw, c), (batches, 1, 1, units), wide,
                      pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], weight_zp=weight_zp)
    _requantize(lw, c, acc, y.name, pairs, wide)


def _transpose_pad(out_size: int, in_size: int, kernel: int, stride: int, padding: str) -> tuple[int, int]:
    """TOSA out_pad (before, after) of TFLM's TRANSPOSE_CONV: ComputePaddingHeightWidth run on the output size
    (as if it were a conv input), taps land at in * stride - pad + k."""
    conv_out = (out_size + stride - 1) // stride if padding == "SAME" else (out_size + stride - kernel) // stride
    pad = max((conv_out - 1) * stride + kernel - out_size, 0) // 2
    return -pad, out_size - (in_size - 1) * stride - kernel + pad


@rule("tfl.transpose_conv")
def lower_transpose_conv(lw: Lowerer, op: Op) -> None:
    """Inputs: output_shape (int32 [4]; may be a model input, TFLM uses the output tensor's shape), weights
    [OC, KH, KW, IC], x, optional bias."""
    (shape_t, w, x, *rest), (y,) = operands(lw, op, (3, 4))
    _checked(lw, x, w, y)
    rank4(lw, x, "N, H, W, C")
    rank4(lw, w, "O, KH, KW, I")
    rank4(lw, y, "N, H, W, C")
    if shape_t.is_const and const_ints(lw, shape_t, "output_shape") != list(y.shape):
        raise lw.error(f"output_shape {const_ints(lw, shape_t, 'output_shape')} differs from the output "
                       f"{list(y.shape)}")
    if w.shape[3] != x.shape[3] or w.shape[0] != y.shape[3] or x.shape[0] != y.shape[0]:
        raise lw.error(f"shapes do not fit: input {list(x.shape)}, weights {list(w.shape)}, output {list(y.shape)}")
    padding = lw.attr("padding")
    if padding not in ("SAME", "VALID"):
        raise lw.error(f"padding {padding!r} is not supported (SAME or VALID)")
    stride = (int(lw.attr("stride_h")), int(lw.attr("stride_w")))
    if min(stride) < 1:
        raise lw.error(f"stride {list(stride)} must be >= 1")
    (top, bottom), (left, right) = (_transpose_pad(y.shape[1 + i], x.shape[1 + i], w.shape[1 + i], stride[i],
                                                   padding) for i in (0, 1))
    c = _Conv(x, w, rest[0] if rest else None, y, w.shape[0], 0)
    wide = x.dtype.bits == 16
    acc = _accumulate(lw, c, "TRANSPOSE_CONV2D", x.name, w.name, _bias_values(lw, c), y.shape, wide,
                      out_pad=[top, bottom, left, right], stride=list(stride), weight_zp=0)
    _requantize(lw, c, acc, y.name, _channel_pairs(lw, c), wide)
