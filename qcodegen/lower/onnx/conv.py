"""ONNX convolutions and matrix products -> CONV2D / DEPTHWISE_CONV2D / MATMUL + RESCALE_F32 (docs/onnx.md).

QLinearConv, ConvInteger (NHWC data from the front end's layout pass, OIHW constant weights): group 1 is one
CONV2D (weights re-laid OHWI), one input channel per group a DEPTHWISE_CONV2D (weights [KH, KW, C, M]), other
groups one CONV2D per group on a channel SLICE, the accumulators CONCATenated. Padding taps read the input zero
point (contributing 0), as onnxruntime's im2col pads with it. The int32 accumulator (with the int32 bias) is exact;
QLinearConv then requantizes it with RESCALE_F32 at onnxruntime's float32 scale x_scale * w_scale[c] / y_scale,
so the result is onnxruntime's bit for bit. ConvInteger's result is the accumulator. A QDQ model's ConvTranspose
is one TRANSPOSE_CONV2D, requantized the same way (onnxruntime runs it in float: docs/onnx.md).

QLinearMatMul, MatMulInteger, com.microsoft QGemm: a constant 2-D B is a fully connected layer, a 1x1 CONV2D over
A viewed as [rows, 1, 1, K] (weights B^T, per-column scales per output channel, QGemm's bias C as the bias); other
products one MATMUL over [batch, M, K] x [batch, K, N]. QGemm's scale is alpha * a_scale * b_scale[c] (/ y_scale),
in float32 in that order; without y_scale its float result is f32(acc) * scale (a DEQUANTIZE of the accumulator).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...semantics.onnxruntime import f32_product, output_scale
from ..base import Lowerer, rule
from ..common import crop_input, expect_shape, reshape
from .common import nhwc, requantize_f32, tosa_window


def _eight_bit(lw: Lowerer, *tensors: Tensor) -> None:
    for t in tensors:
        if t.quant is not None and t.quant.kind == "sub_channel":
            raise UnsupportedError(f"{lw.label}: blockwise (block_size) quantized {t.name!r} (supported: per tensor "
                                   "or per channel)")
        if t.dtype.name != "i8":
            raise lw.error(f"tensor {t.name!r} has type {t.dtype}; expected 8-bit data (uint8 is stored as int8)")


def _weight_zero_points(w: Tensor) -> int | np.ndarray:
    """One weight zero point, or one per output channel when they differ."""
    zps = np.asarray(w.quant.zero_points, np.int64).reshape(-1)
    return int(zps[0]) if np.unique(zps).size == 1 else zps


def _subtract_zero_points(lw: Lowerer, prim: str, src: str, raw: str, acc: str, taps: tuple[int, ...], zps: np.ndarray,
                          geometry: dict) -> None:
    """acc = raw - zp[c] * S, where raw accumulated the weights without their zero points and S is the window sum
    of (x - x_zp) (a convolution with unit weights): sum (x - x_zp)(w - zp) = sum (x - x_zp) w - zp sum (x - x_zp),
    exact in integers. Per-channel weight zero points that differ, which the primitives do not take."""
    ones = lw.const(f"{acc}_ones", np.ones(taps, np.int64), "i8")
    zero = lw.const(f"{acc}_zero", np.zeros(1, np.int64), "i32")
    raw_shape = lw.schedule.buffers[raw].shape
    sums = lw.temp(f"{acc}_window", (*raw_shape[:3], taps[-1] if prim == "DEPTHWISE_CONV2D" else 1), "i32")
    lw.emit(prim, [src, ones, zero], [sums], **geometry)
    zp = lw.const(f"{acc}_wzp", zps.reshape(1, 1, 1, -1), "i32")
    product = lw.temp(f"{acc}_zp_terms", raw_shape, "i32")
    lw.emit("MUL", [sums, zp], [product], shift=0)
    lw.emit("SUB", [raw, product], [acc])


def _bias(lw: Lowerer, b: Tensor | None, name: str) -> str:
    if b is None:
        return lw.const(f"{name}_bias", np.zeros(1, np.int64), "i32")
    if not b.is_const or b.dtype.name != "i32":
        raise lw.error(f"bias {b.name!r} must be a constant int32 tensor")
    return lw.const(f"{b.name}_flat", b.data.reshape(-1).astype(np.int64), "i32")


def _convolve(lw: Lowerer, x: Tensor, w: Tensor, bias: str, acc: str, x_zp: int, w_zp: int | np.ndarray) -> None:
    """The int32 accumulator of one convolution (any group count) of NHWC x with OIHW weights w; w_zp one zero
    point or one per output channel."""
    m, cg, kh, kw = w.shape
    n, ih, iw, c = x.shape
    group = int(lw.attr("group", 1))
    win = tosa_window(lw, (ih, iw), (kh, kw), lw.op.attrs)
    shape = (n, *win.out, m)
    expect_shape(lw, lw.tensor_out(0), shape)
    per_channel = not isinstance(w_zp, int)
    geometry = dict(pad=list(win.pad), stride=list(win.stride), dilation=list(win.dilation), input_zp=x_zp,
                    weight_zp=0 if per_channel else w_zp, acc_type="i32")
    data = w.data.astype(np.int64)
    src = crop_input(lw, x.name, win)
    raw = lw.temp(f"{acc}_raw", shape, "i32") if per_channel else acc
    if group == 1:
        w_ohwi = lw.const(f"{w.name}_ohwi", data.transpose(0, 2, 3, 1), w.dtype)
        lw.emit("CONV2D", [src, w_ohwi, bias], [raw], **geometry)
        if per_channel:
            _subtract_zero_points(lw, "CONV2D", src, raw, acc, (1, kh, kw, c), w_zp, geometry)
        return
    if cg == 1 and group == c and not (per_channel and m != c):
        mult = m // group
        w_hwcm = lw.const(f"{w.name}_hwcm", data.reshape(c, mult, kh, kw).transpose(2, 3, 0, 1), w.dtype)
        lw.emit("DEPTHWISE_CONV2D", [src, w_hwcm, bias], [raw], **geometry)
        if per_channel:
            _subtract_zero_points(lw, "DEPTHWISE_CONV2D", src, raw, acc, (kh, kw, c, 1), w_zp, geometry)
        return
    if per_channel:
        raise UnsupportedError(f"{lw.label}: grouped convolution with weight zero points that differ per channel")
    mg = m // group
    biases = lw.schedule.buffers[bias].data.astype(np.int64)
    parts = []
    crop = lw.schedule.buffers[src].shape
    for g in range(group):
        xg = lw.temp(f"{acc}_x{g}", (*crop[:3], cg), x.dtype)
        lw.emit("SLICE", [src], [xg], start=[0, 0, 0, g * cg], size=[*crop[:3], cg])
        wg = lw.const(f"{w.name}_g{g}", data[g * mg:(g + 1) * mg].transpose(0, 2, 3, 1), w.dtype)
        bg = lw.const(f"{bias}_g{g}", biases[g * mg:(g + 1) * mg] if biases.size > 1 else biases, "i32")
        part = lw.temp(f"{acc}_g{g}", (*shape[:3], mg), "i32")
        lw.emit("CONV2D", [xg, wg, bg], [part], **geometry)
        parts.append(part)
    lw.emit("CONCAT", parts, [acc], axis=3)


@rule("onnx.QLinearConv", "onnx.ConvInteger")
def lower_conv(lw: Lowerer, op: Op) -> None:
    nhwc(lw)
    x, w, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    _eight_bit(lw, x, w)
    integer = op.kind == "onnx.ConvInteger"
    bias = _bias(lw, lw.tensor_in(2) if len(op.inputs) == 3 else None, y.name)
    if integer:
        w_zp = np.asarray(lw.attr("w_zero_point"), np.int64).reshape(-1)
        _convolve(lw, x, w, bias, y.name, int(lw.attr("x_zero_point")),
                  int(w_zp[0]) if np.unique(w_zp).size == 1 else np.resize(w_zp, w.shape[0]))
        return
    _eight_bit(lw, y)
    acc = lw.temp(f"{y.name}_acc", y.shape, "i32")
    _convolve(lw, x, w, bias, acc, x.quant.zero_point, _weight_zero_points(w))
    requantize_f32(lw, acc, y, output_scale(x.quant, w.quant.scales, y.quant))


@rule("onnx.QLinearConvTranspose")
def lower_conv_transpose(lw: Lowerer, op: Op) -> None:
    """A QDQ model's ConvTranspose: TRANSPOSE_CONV2D (weights [C, M, kH, kW] re-laid [M, kH, kW, C]) with the
    int32 bias, exact, then RESCALE_F32 at x_scale * w_scale[m] / y_scale as for QLinearConv."""
    nhwc(lw)
    x, w, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    _eight_bit(lw, x, w, y)
    w_zp = _weight_zero_points(w)
    if not isinstance(w_zp, int):
        raise UnsupportedError(f"{lw.label}: weight zero points that differ per channel")
    bias = _bias(lw, lw.tensor_in(2) if len(op.inputs) == 3 else None, y.name)
    w_mhwc = lw.const(f"{w.name}_ohwi", w.data.astype(np.int64).transpose(1, 2, 3, 0), w.dtype)
    acc = lw.temp(f"{y.name}_acc", y.shape, "i32")
    lw.emit("TRANSPOSE_CONV2D", [x.name, w_mhwc, bias], [acc], out_pad=list(lw.attr("out_pad")),
            stride=list(lw.attr("stride")), input_zp=x.quant.zero_point, weight_zp=w_zp, acc_type="i32")
    expect_shape(lw, y, lw.buffer(acc).shape)
    requantize_f32(lw, acc, y, output_scale(x.quant, w.quant.scales, y.quant))


def _rows(lw: Lowerer, a: Tensor, transpose: bool) -> tuple[str, int, int]:
    """A as a [rows, K] matrix (a TRANSPOSE for QGemm's transA): its buffer, rows and K."""
    name = a.name
    if transpose:
        k, m = a.shape
        name = lw.temp(f"{a.name}_t", (m, k), a.dtype)
        lw.emit("TRANSPOSE", [a.name], [name], perms=[1, 0])
        return name, m, k
    k = a.shape[-1]
    return name, a.size // k, k


def _fully_connected(lw: Lowerer, a: Tensor, b_kn: np.ndarray, b: Tensor, bias: str, acc_rows: str,
                     a_zp: int, b_zp: int | np.ndarray, trans_a: bool = False) -> None:
    """acc_rows [rows, 1, 1, N] = A [rows, K] x B [K, N] (a 1x1 CONV2D); b_zp one or one per column."""
    src, rows, k = _rows(lw, a, trans_a)
    if b_kn.shape[0] != k:
        raise lw.error(f"A has {k} columns, B {b_kn.shape[0]} rows")
    n_out = b_kn.shape[1]
    x4 = reshape(lw, src, (rows, 1, 1, k))
    w4 = lw.const(f"{b.name}_o11k", b_kn.T.reshape(n_out, 1, 1, k), b.dtype)
    per_column = not isinstance(b_zp, int)
    geometry = dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=a_zp,
                    weight_zp=0 if per_column else b_zp, acc_type="i32")
    raw = lw.temp(f"{acc_rows}_raw", (rows, 1, 1, n_out), "i32") if per_column else acc_rows
    lw.emit("CONV2D", [x4, w4, bias], [raw], **geometry)
    if per_column:
        _subtract_zero_points(lw, "CONV2D", x4, raw, acc_rows, (1, 1, 1, k), np.resize(b_zp, n_out), geometry)


def _matmul(lw: Lowerer, a: Tensor, b: Tensor, acc: str, a_zp: int, b_zp: int) -> None:
    """acc (y's shape, i32) = A x B with numpy batching: equal batch dimensions, or a 2-D B."""
    *a_batch, m, k = a.shape if len(a.shape) > 1 else (1, *a.shape)
    *b_batch, k2, n = b.shape if len(b.shape) > 1 else (*b.shape, 1)
    y_shape = lw.buffer(acc).shape
    if not b_batch:
        batch, rows = 1, int(np.prod(a_batch, dtype=np.int64)) * m
    elif list(a_batch) == list(b_batch):
        batch, rows = int(np.prod(a_batch, dtype=np.int64)), m
    else:
        raise UnsupportedError(f"{lw.label}: MatMul batch dimensions {a_batch} x {b_batch} (supported: equal, "
                               "or a 2-D B)")
    a3 = reshape(lw, a.name, (batch, rows, k))
    b3 = reshape(lw, b.name, (batch, k2, n))
    out = lw.temp(f"{acc}_3d", (batch, rows, n), "i32")
    lw.emit("MATMUL", [a3, b3], [out], a_zp=a_zp, b_zp=b_zp)
    lw.emit("RESHAPE", [out], [acc], shape=list(y_shape))


def _b_zero_point(lw: Lowerer, zps: list[int] | np.ndarray) -> int:
    values = np.unique(np.asarray(zps, np.int64))
    if values.size != 1:
        raise UnsupportedError(f"{lw.label}: B has different zero points per column (supported for a constant "
                               "2-D B)")
    return int(values[0])


@rule("onnx.QLinearMatMul", "onnx.MatMulInteger")
def lower_matmul(lw: Lowerer, op: Op) -> None:
    a, b, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    _eight_bit(lw, a, b)
    integer = op.kind == "onnx.MatMulInteger"
    if integer:
        a_zp, b_zps = int(lw.attr("a_zero_point")), np.asarray(lw.attr("b_zero_point"), np.int64).reshape(-1)
    else:
        a_zp, b_zps = a.quant.zero_point, np.asarray(b.quant.zero_points, np.int64).reshape(-1)
    b_zp = int(b_zps[0]) if np.unique(b_zps).size == 1 else b_zps
    acc = y.name if integer else lw.temp(f"{y.name}_acc", y.shape, "i32")
    if b.is_const and len(b.shape) == 2 and len(a.shape) >= 2:
        rows = lw.temp(f"{y.name}_rows", (a.size // a.shape[-1], 1, 1, b.shape[1]), "i32")
        _fully_connected(lw, a, b.data.astype(np.int64), b, _bias(lw, None, y.name), rows, a_zp, b_zp)
        lw.emit("RESHAPE", [rows], [acc], shape=list(y.shape))
    else:
        _matmul(lw, a, b, acc, a_zp, _b_zero_point(lw, b_zps))
    if not integer:
        _eight_bit(lw, y)
        requantize_f32(lw, acc, y, output_scale(a.quant, b.quant.scales, y.quant))


@rule("onnx.QGemm")
def lower_qgemm(lw: Lowerer, op: Op) -> None:
    a, b, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    _eight_bit(lw, a, b)
    if not b.is_const:
        raise UnsupportedError(f"{lw.label}: B {b.name!r} must be a constant")
    b_kn = b.data.astype(np.int64)
    if lw.attr("trans_b", 0):
        b_kn = b_kn.T
    bias = _bias(lw, lw.tensor_in(2) if len(op.inputs) == 3 else None, y.name)
    rows = lw.temp(f"{y.name}_rows", (y.shape[0], 1, 1, y.shape[1]), "i32")
    _fully_connected(lw, a, b_kn, b, bias, rows, a.quant.zero_point, _weight_zero_points(b),
                     trans_a=bool(lw.attr("trans_a", 0)))
    acc = reshape(lw, rows, y.shape)
    alpha = float(lw.attr("alpha", 1.0))
    if y.quant is None:
        values = [float(s) for s in np.atleast_1d(f32_product(np.float32(alpha), a.quant.scale, b.quant.scales))]
        per_column = {"scale": values, "zero_point": [0] * len(values), "axis": 1}
        lw.emit("DEQUANTIZE", [acc], [y.name], **({"scale": values[0], "zero_point": 0} if len(values) == 1
                                                  else per_column))
        return
    _eight_bit(lw, y)
    requantize_f32(lw, acc, y, output_scale(a.quant, b.quant.scales, y.quant, alpha))
