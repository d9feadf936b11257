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

16-bit activations of a QDQ model (int16, or uint16 rebased to int16) use TOSA's i16 x i8 products with an i48
accumulator and input zero point 0, the zero point folded into the bias (_Activations) or, for a ConvTranspose, into
extra input channels (_zero_point_channels); RESCALE_F32 requantizes the int64 accumulator as above. Blockwise
(block_size) weights of a MatMul / Gemm go through the sub-channel scheme (_blockwise_matmul).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...ir.rescale import RescaleParams
from ...semantics.onnxruntime import f32_product, output_scale
from ...semantics.window import window
from ..base import Lowerer, rule
from ..common import crop_input, expect_shape, reshape
from ..stablehlo.blockwise import block_conv, weight_zero_point
from .common import nhwc, requantize_f32, tosa_window


def _eight_bit(lw: Lowerer, *tensors: Tensor) -> None:
    for t in tensors:
        if t.quant is not None and t.quant.kind == "sub_channel":
            raise UnsupportedError(f"{lw.label}: blockwise (block_size) quantized {t.name!r} (supported: per tensor "
                                   "or per channel)")
        if t.dtype.name != "i8":
            raise lw.error(f"tensor {t.name!r} has type {t.dtype}; expected 8-bit data (uint8 is stored as int8)")


@dataclass(frozen=True)
class _Activations:
    """A product's activation operand as the primitives take it: buffer, the zero point they subtract, the value
    padding taps read and the accumulator type. 16-bit data (TOSA's i16 x i8 products: input zero point 0, an
    i48 accumulator; uint16 rebased to int16) leaves its zero point `folded` into the bias: sum (x - z)(w - wz) =
    sum x (w - wz) - z sum (w - wz), exact, padding taps reading z."""

    name: str
    zp: int
    pad_value: int
    acc: str
    folded: int


def _activations(lw: Lowerer, x: Tensor) -> _Activations:
    zp = x.quant.zero_point
    if x.dtype.name == "i8":
        return _Activations(x.name, zp, zp, "i32", 0)
    if x.dtype.name == "i16":
        return _Activations(x.name, 0, zp, "i48", zp)
    if x.dtype.name != "u16":
        raise lw.error(f"tensor {x.name!r} has type {x.dtype}; expected 8- or 16-bit data")
    rebased = lw.temp(f"{x.name}_i16", x.shape, "i16")  # q - 32768: the same values, zero point zp - 32768
    lw.emit_rescale(x.name, rebased, RescaleParams(multiplier=[1 << 30], shift=[30], input_zp=1 << 15, output_zp=0))
    return _Activations(rebased, 0, zp - (1 << 15), "i48", zp - (1 << 15))


def _wide_result(lw: Lowerer, y: Tensor) -> None:
    """The result of a requantized product: 8- or 16-bit (RESCALE_F32's output types)."""
    if y.dtype.name not in ("i8", "i16", "u16"):
        raise lw.error(f"tensor {y.name!r} has type {y.dtype}; expected 8- or 16-bit data")


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


def _bias(lw: Lowerer, b: Tensor | None, name: str, x: _Activations | None = None,
          weight_sums: np.ndarray | None = None) -> str:
    """The bias constant in x's accumulator type, minus x.folded * weight_sums[c] (sum of w - wz per output
    channel) where x's zero point is folded into the bias (_Activations; a transposed convolution folds it
    elsewhere: _zero_point_channels)."""
    if b is not None and (not b.is_const or b.dtype.name != "i32"):
        raise lw.error(f"bias {b.name!r} must be a constant int32 tensor")
    values = np.zeros(1, np.int64) if b is None else b.data.reshape(-1).astype(np.int64)
    if x is None or weight_sums is None or not x.folded:
        return lw.const(f"{name}_bias" if b is None else f"{b.name}_flat", values, x.acc if x else "i32")
    return lw.const(f"{name}_bias_folded", values - x.folded * weight_sums, x.acc)


def _geometry(x: _Activations, w_zp: int | np.ndarray, **window: list[int]) -> dict:
    per_channel = not isinstance(w_zp, int)
    pad = {} if x.pad_value == x.zp else {"pad_value": x.pad_value}
    return dict(window, input_zp=x.zp, weight_zp=0 if per_channel else w_zp, acc_type=x.acc, **pad)


def _convolve(lw: Lowerer, x: _Activations, w: Tensor, bias: str, acc: str, w_zp: int | np.ndarray) -> None:
    """The accumulator of one convolution (any group count) of NHWC x with OIHW weights w; w_zp one zero point or
    one per output channel."""
    m, cg, kh, kw = w.shape
    n, ih, iw, c = lw.buffer(x.name).shape
    group = int(lw.attr("group", 1))
    win = tosa_window(lw, (ih, iw), (kh, kw), lw.op.attrs)
    shape = (n, *win.out, m)
    expect_shape(lw, lw.tensor_out(0), shape)
    per_channel = not isinstance(w_zp, int)
    if per_channel and x.acc != "i32":
        raise UnsupportedError(f"{lw.label}: 16-bit activations with weight zero points that differ per channel")
    geometry = _geometry(x, w_zp, pad=list(win.pad), stride=list(win.stride), dilation=list(win.dilation))
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
        xg = lw.temp(f"{acc}_x{g}", (*crop[:3], cg), lw.buffer(x.name).dtype)
        lw.emit("SLICE", [src], [xg], start=[0, 0, 0, g * cg], size=[*crop[:3], cg])
        wg = lw.const(f"{w.name}_g{g}", data[g * mg:(g + 1) * mg].transpose(0, 2, 3, 1), w.dtype)
        bg = lw.const(f"{bias}_g{g}", biases[g * mg:(g + 1) * mg] if biases.size > 1 else biases, x.acc)
        part = lw.temp(f"{acc}_g{g}", (*shape[:3], mg), x.acc)
        lw.emit("CONV2D", [xg, wg, bg], [part], **geometry)
        parts.append(part)
    lw.emit("CONCAT", parts, [acc], axis=3)


@rule("onnx.QLinearConv", "onnx.ConvInteger")
def lower_conv(lw: Lowerer, op: Op) -> None:
    nhwc(lw)
    x, w, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    integer = op.kind == "onnx.ConvInteger"
    b = lw.tensor_in(2) if len(op.inputs) == 3 else None
    if integer:
        _eight_bit(lw, x, w)
        w_zp = np.asarray(lw.attr("w_zero_point"), np.int64).reshape(-1)
        x_zp = int(lw.attr("x_zero_point"))
        _convolve(lw, _Activations(x.name, x_zp, x_zp, "i32", 0), w, _bias(lw, b, y.name), y.name,
                  int(w_zp[0]) if np.unique(w_zp).size == 1 else np.resize(w_zp, w.shape[0]))
        return
    _eight_bit(lw, w)
    _wide_result(lw, y)
    act = _activations(lw, x)
    w_zp = _weight_zero_points(w)
    acc = lw.temp(f"{y.name}_acc", y.shape, act.acc)
    sums = (w.data.astype(np.int64) - np.resize(w_zp, w.shape[0])[:, None, None, None]).sum(axis=(1, 2, 3))
    _convolve(lw, act, w, _bias(lw, b, y.name, act, sums), acc, w_zp)
    requantize_f32(lw, acc, y, output_scale(x.quant, w.quant.scales, y.quant))


@rule("onnx.QLinearConvTranspose")
def lower_conv_transpose(lw: Lowerer, op: Op) -> None:
    """A QDQ model's ConvTranspose: TRANSPOSE_CONV2D (weights [C, M, kH, kW] re-laid [M, kH, kW, C]) with the
    int32 bias, exact, then RESCALE_F32 at x_scale * w_scale[m] / y_scale as for QLinearConv."""
    nhwc(lw)
    x, w, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    _eight_bit(lw, w)
    _wide_result(lw, y)
    w_zp = _weight_zero_points(w)
    if not isinstance(w_zp, int):
        raise UnsupportedError(f"{lw.label}: weight zero points that differ per channel")
    act = _activations(lw, x)
    bias = _bias(lw, lw.tensor_in(2) if len(op.inputs) == 3 else None, y.name, act)
    src, data = _zero_point_channels(lw, act, w.data.astype(np.int64).transpose(1, 2, 3, 0), w_zp)
    w_mhwc = lw.const(f"{w.name}_ohwi", data, w.dtype)
    acc = lw.temp(f"{y.name}_acc", y.shape, act.acc)
    lw.emit("TRANSPOSE_CONV2D", [src, w_mhwc, bias], [acc], out_pad=list(lw.attr("out_pad")),
            stride=list(lw.attr("stride")), input_zp=act.zp, weight_zp=w_zp, acc_type=act.acc)
    expect_shape(lw, y, lw.buffer(acc).shape)
    requantize_f32(lw, acc, y, output_scale(x.quant, w.quant.scales, y.quant))


def _zero_point_channels(lw: Lowerer, x: _Activations, w_mhwc: np.ndarray, w_zp: int) -> tuple[str, np.ndarray]:
    """A transposed convolution's input and weights [M, kH, kW, C] with x's folded zero point z subtracted
    exactly: the taps reaching an output vary with its position, so z * sum_c (w - wz) cannot go into a bias.
    Instead E input channels holding z are appended, their weights w_e (wz + d_e, int8) chosen so that
    sum_e d_e = -sum_c (w[m, ky, kx, c] - wz) per tap: every tap then adds sum_c x_c (w_c - wz) - z sum_c (w_c - wz)
    = sum_c (x_c - z)(w_c - wz). E = ceil(max |sum_c (w - wz)| / (127 - |wz|))."""
    if not x.folded:
        return x.name, w_mhwc
    target = -(w_mhwc - w_zp).sum(axis=3)
    limit = 127 - abs(w_zp)
    parts = []
    for _ in range(-(-int(np.abs(target).max()) // limit)):
        parts.append(np.clip(target, -limit, limit))
        target = target - parts[-1]
    n, h, w, c = lw.buffer(x.name).shape
    fill = lw.const(f"{x.name}_zp_channels", np.full((n, h, w, len(parts)), x.folded), "i16")
    extended = lw.temp(f"{x.name}_with_zp", (n, h, w, c + len(parts)), "i16")
    lw.emit("CONCAT", [x.name, fill], [extended], axis=3)
    return extended, np.concatenate([w_mhwc, np.stack(parts, axis=3) + w_zp], axis=3)


def _rows(lw: Lowerer, a: _Activations, shape: tuple[int, ...], transpose: bool) -> tuple[str, int, int]:
    """A (of `shape`) as a [rows, K] matrix (a TRANSPOSE for QGemm's transA): its buffer, rows and K."""
    name = a.name
    if transpose:
        k, m = shape
        name = lw.temp(f"{a.name}_t", (m, k), lw.buffer(a.name).dtype)
        lw.emit("TRANSPOSE", [a.name], [name], perms=[1, 0])
        return name, m, k
    k = shape[-1]
    return name, int(np.prod(shape, dtype=np.int64)) // k, k


def _column_sums(b_kn: np.ndarray, b_zp: int | np.ndarray) -> np.ndarray:
    """sum over K of (B - zero point) per column: what a folded activation zero point multiplies (_bias)."""
    return (b_kn - np.resize(b_zp, b_kn.shape[1])[None, :]).sum(axis=0)


def _fully_connected(lw: Lowerer, shape: tuple[int, ...], a: _Activations, b_kn: np.ndarray, b: Tensor, bias: str,
                     acc_rows: str, b_zp: int | np.ndarray, trans_a: bool = False) -> None:
    """acc_rows [rows, 1, 1, N] = A [rows, K] x B [K, N] (a 1x1 CONV2D); b_zp one or one per column."""
    src, rows, k = _rows(lw, a, shape, trans_a)
    if b_kn.shape[0] != k:
        raise lw.error(f"A has {k} columns, B {b_kn.shape[0]} rows")
    n_out = b_kn.shape[1]
    x4 = reshape(lw, src, (rows, 1, 1, k))
    w4 = lw.const(f"{b.name}_o11k", b_kn.T.reshape(n_out, 1, 1, k), b.dtype)
    per_column = not isinstance(b_zp, int)
    if per_column and a.acc != "i32":
        raise UnsupportedError(f"{lw.label}: 16-bit activations with weight zero points that differ per column")
    geometry = _geometry(a, b_zp, pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1])
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
    integer = op.kind == "onnx.MatMulInteger"
    if b.quant is not None and b.quant.kind == "sub_channel" and not integer:
        _eight_bit(lw, a, y)
        _blockwise_matmul(lw, a, b, y)
        return
    _eight_bit(lw, b)
    if integer:
        _eight_bit(lw, a)
        a_zp, b_zps = int(lw.attr("a_zero_point")), np.asarray(lw.attr("b_zero_point"), np.int64).reshape(-1)
        x = _Activations(a.name, a_zp, a_zp, "i32", 0)
    else:
        _wide_result(lw, y)
        x, b_zps = _activations(lw, a), np.asarray(b.quant.zero_points, np.int64).reshape(-1)
    b_zp = int(b_zps[0]) if np.unique(b_zps).size == 1 else b_zps
    acc = y.name if integer else lw.temp(f"{y.name}_acc", y.shape, x.acc)
    if b.is_const and len(b.shape) == 2 and len(a.shape) >= 2:
        b_kn = b.data.astype(np.int64)
        rows = lw.temp(f"{y.name}_rows", (a.size // a.shape[-1], 1, 1, b.shape[1]), x.acc)
        bias = _bias(lw, None, y.name, x, _column_sums(b_kn, b_zp))
        _fully_connected(lw, a.shape, x, b_kn, b, bias, rows, b_zp)
        lw.emit("RESHAPE", [rows], [acc], shape=list(y.shape))
    elif x.acc != "i32":
        raise UnsupportedError(f"{lw.label}: a 16-bit MatMul needs a constant 2-D B (int8 weights)")
    else:
        _matmul(lw, a, b, acc, x.zp, _b_zero_point(lw, b_zps))
    if not integer:
        requantize_f32(lw, acc, y, output_scale(a.quant, b.quant.scales, y.quant))


def _blockwise_matmul(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor, trans_b: bool = False) -> None:
    """Constant 2-D B [K, N] (or [N, K] with trans_b) with blockwise scales (opset 21 block_size along K): the
    project's sub-channel scheme in its wide form, one BLOCK_CONV2D over A viewed as [rows, 1, 1, K] (per-block
    int32 sums weighted by int32 ratios into int64) and one RESCALE_F32. It equals the real-number product
    rounded once up to the schedule notes' ratio_error_lsb + f32_error_lsb (far below an LSB); onnxruntime runs
    the product in float (docs/onnx.md)."""
    k_axis = 1 if trans_b else 0
    if not b.is_const or len(b.shape) != 2 or b.quant.block_sizes[1 - k_axis] != 1:
        raise UnsupportedError(f"{lw.label}: blockwise B must be a constant 2-D matrix blocked along K (axis "
                               f"{k_axis})")
    b_nk = b.data.astype(np.int64) if trans_b else b.data.astype(np.int64).T
    scales_nk = np.asarray(b.quant.expand(b.shape)[0], np.float64)
    n, k = b_nk.shape
    rows = a.size // k
    x4 = reshape(lw, a.name, (rows, 1, 1, k))
    w = lw.const(f"{b.name}_o11k", b_nk.reshape(n, 1, 1, k), b.dtype)
    scales = (scales_nk if trans_b else scales_nk.T).reshape(n, 1, 1, k)
    out = block_conv(lw, x4, w, scales, window((1, 1), (1, 1)), a.quant, b.quant, weight_zero_point(lw, b.quant), y,
                     y.name, wide=True)
    lw.emit("RESHAPE", [out], [y.name], shape=list(y.shape))


@rule("onnx.QGemm")
def lower_qgemm(lw: Lowerer, op: Op) -> None:
    a, b, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    if b.quant is not None and b.quant.kind == "sub_channel":
        if len(op.inputs) == 3 or lw.attr("trans_a", 0) or float(lw.attr("alpha", 1.0)) != 1.0 or y.quant is None:
            raise UnsupportedError(f"{lw.label}: blockwise (block_size) B {b.name!r} of a Gemm with a bias, transA, "
                                   "alpha or a float result (supported: A x B, B blocked along K)")
        _eight_bit(lw, a, y)
        _blockwise_matmul(lw, a, b, y, bool(lw.attr("trans_b", 0)))
        return
    _eight_bit(lw, b)
    if not b.is_const:
        raise UnsupportedError(f"{lw.label}: B {b.name!r} must be a constant")
    b_kn = b.data.astype(np.int64)
    if lw.attr("trans_b", 0):
        b_kn = b_kn.T
    if y.quant is not None:
        _wide_result(lw, y)
    x, b_zp = _activations(lw, a), _weight_zero_points(b)
    bias = _bias(lw, lw.tensor_in(2) if len(op.inputs) == 3 else None, y.name, x, _column_sums(b_kn, b_zp))
    rows = lw.temp(f"{y.name}_rows", (y.shape[0], 1, 1, y.shape[1]), x.acc)
    _fully_connected(lw, a.shape, x, b_kn, b, bias, rows, b_zp, trans_a=bool(lw.attr("trans_a", 0)))
    acc = reshape(lw, rows, y.shape)
    alpha = float(lw.attr("alpha", 1.0))
    if y.quant is None:
        values = [float(s) for s in np.atleast_1d(f32_product(np.float32(alpha), a.quant.scale, b.quant.scales))]
        per_column = {"scale": values, "zero_point": [0] * len(values), "axis": 1}
        lw.emit("DEQUANTIZE", [acc], [y.name], **({"scale": values[0], "zero_point": 0} if len(values) == 1
                                                  else per_column))
        return
    requantize_f32(lw, acc, y, output_scale(a.quant, b.quant.scales, y.quant, alpha))
