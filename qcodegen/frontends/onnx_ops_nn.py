"""Import of the ONNX convolution, matrix-product and pooling operators (operator format).

QLinearConv, ConvInteger -> onnx.QLinearConv / onnx.ConvInteger [x, w(, bias)] with NCHW data, OIHW constant
weights, attrs pads [top, left, bottom, right], strides, dilations, group, layout "NCHW".
QLinearMatMul, MatMulInteger -> onnx.QLinearMatMul / onnx.MatMulInteger [a, b] (numpy matmul broadcasting).
com.microsoft QGemm -> onnx.QGemm [a, b(, c)] (quantized or float32 result), attrs alpha, trans_a, trans_b.
MaxPool (8-bit data, or float in QDQ models), com.microsoft QLinearAveragePool / QLinearGlobalAveragePool ->
onnx.MaxPool / onnx.QLinearAveragePool / onnx.QLinearGlobalAveragePool [x], layout "NCHW" (or "NHWC" for
channels_last=1).
Integer operators keep their zero points as attributes (x_zero_point, w_zero_point, a_zero_point, b_zero_point).
"""

from __future__ import annotations

import numpy as np

from ..errors import shorten
from ..ir.graph import Tensor
from ..ir.quant import QuantType
from .onnx_geometry import window_2d
from .onnx_import import Importer, importer, ms, quantized
from .onnx_model import Node

_EIGHT_BIT = ("u8", "i8")


def _eight_bit(imp: Importer, t: Tensor, what: str) -> None:
    if t.dtype.name not in _EIGHT_BIT:
        raise imp.unsupported(f"{what} {shorten(t.name)} has type {t.dtype} (supported: uint8, int8)")


def _conv_operands(imp: Importer, x: Tensor, w: Tensor) -> tuple[int, tuple[int, int]]:
    """Checks x [N, C, H, W] and constant w [M, C / group, KH, KW]; returns group and kernel."""
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise imp.unsupported(f"only 2-D convolutions (rank-4 data and weights) are supported, got x "
                              f"{list(x.shape)}, w {list(w.shape)}")
    if not w.is_const:
        raise imp.unsupported(f"weights {shorten(w.name)} must be a constant")
    group = int(imp.attr("group", 1))
    m, cg, kh, kw = w.shape
    if group < 1 or x.shape[1] != cg * group or m % group:
        raise imp.error(f"x has {x.shape[1]} channels, weights {list(w.shape)} and group {group} do not match")
    kernel = imp.attr("kernel_shape", None, list)
    if kernel is not None and list(kernel) != [kh, kw]:
        raise imp.error(f"kernel_shape {kernel} differs from the weights' {[kh, kw]}")
    return group, (kh, kw)


def _bias(imp: Importer, i: int, channels: int) -> str | None:
    name = imp.name_in(i, required=False)
    if name is None:
        return None
    b = imp.tensor(name)
    if not b.is_const or b.dtype.name != "i32" or b.shape != (channels,):
        raise imp.unsupported(f"bias {shorten(name)} must be a constant int32 [{channels}], got {b.dtype} "
                              f"{list(b.shape)}")
    return name


@importer("QLinearConv")
def qlinear_conv(imp: Importer, node: Node) -> None:
    imp.counts((8, 9))
    x, w = imp.tensor_in(0), imp.tensor_in(3)
    _eight_bit(imp, x, "input")
    _eight_bit(imp, w, "weights")
    group, kernel = _conv_operands(imp, x, w)
    imp.bind(x, imp.qlinear_params(1, 2, x, "x"), "input")
    imp.bind(w, imp.qlinear_params(4, 5, w, "w", axis=0), "weights")
    y_type = imp.zero_point_type(7, x.dtype.name)
    qy = imp.qlinear_params(6, 7, y_type, "y")
    win = window_2d(imp, x.shape[2:], kernel)
    y = imp.new_tensor(imp.name_out(), (x.shape[0], w.shape[0], *win.out_hw), y_type, qy)
    bias = _bias(imp, 8, w.shape[0])
    imp.emit("QLinearConv", [x.name, w.name] + ([bias] if bias else []), [y.name], group=group, layout="NCHW",
             **win.attrs())


@importer("ConvInteger")
def conv_integer(imp: Importer, node: Node) -> None:
    imp.counts((2, 4))
    x, w = imp.tensor_in(0), imp.tensor_in(1)
    _eight_bit(imp, x, "input")
    _eight_bit(imp, w, "weights")
    group, kernel = _conv_operands(imp, x, w)
    x_zp = imp.integer_zero_point(2, x, 1, "x_zero_point")
    w_zp = imp.integer_zero_point(3, w, w.shape[0], "w_zero_point")
    win = window_2d(imp, x.shape[2:], kernel)
    y = imp.new_tensor(imp.name_out(), (x.shape[0], w.shape[0], *win.out_hw), "i32")
    imp.emit("ConvInteger", [x.name, w.name], [y.name], group=group, layout="NCHW", x_zero_point=x_zp[0],
             w_zero_point=w_zp, **win.attrs())


def matmul_shape(imp: Importer, a: Tensor, b: Tensor) -> tuple[int, ...]:
    if len(a.shape) < 1 or len(b.shape) < 1:
        raise imp.error("MatMul operands must have rank >= 1")
    mismatch = imp.error(f"operand shapes {list(a.shape)} and {list(b.shape)} do not match for MatMul")
    # numpy's matmul rule on the shapes alone (no arrays: a hostile shape must not allocate)
    sa, sb = ((1,) + a.shape if len(a.shape) == 1 else a.shape), (b.shape + (1,) if len(b.shape) == 1 else b.shape)
    if sa[-1] != sb[-2]:
        raise mismatch
    try:
        batch = np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        raise mismatch from None
    return batch + sa[-2:-1] * (len(a.shape) > 1) + sb[-1:] * (len(b.shape) > 1)


def _b_axis(imp: Importer, b: Tensor, scale_i: int) -> int | None:
    """The axis of a per-column B quantization: [N] or [1, N] parameters of a 2-D B (onnxruntime's rule)."""
    scale = imp.const_in(scale_i, "b scale")
    if scale.size == 1:
        return None
    n = b.shape[-1]
    if scale.shape in ((n,), (1, n)) and len(b.shape) == 2:
        return len(b.shape) - 1
    raise imp.unsupported(f"b quantization parameters of shape {list(scale.shape)} for b {list(b.shape)} "
                          "(supported: one, or one per column of a 2-D b)")


@importer("QLinearMatMul")
def qlinear_matmul(imp: Importer, node: Node) -> None:
    imp.counts((8, 8))
    a, b = imp.tensor_in(0), imp.tensor_in(3)
    _eight_bit(imp, a, "a")
    _eight_bit(imp, b, "b")
    imp.bind(a, imp.qlinear_params(1, 2, a, "a"), "a")
    axis = _b_axis(imp, b, 4)
    qb = imp.qlinear_params(4, 5, b, "b", axis=axis)
    if axis is not None:
        qb = QuantType.per_axis(qb.storage, qb.scales.reshape(-1), qb.zero_points.reshape(-1), axis)
    imp.bind(b, qb, "b")
    y_type = imp.zero_point_type(7, a.dtype.name)
    y = imp.new_tensor(imp.name_out(), matmul_shape(imp, a, b), y_type, imp.qlinear_params(6, 7, y_type, "y"))
    imp.emit("QLinearMatMul", [a.name, b.name], [y.name])


@importer("MatMulInteger")
def matmul_integer(imp: Importer, node: Node) -> None:
    imp.counts((2, 4))
    a, b = imp.tensor_in(0), imp.tensor_in(1)
    _eight_bit(imp, a, "A")
    _eight_bit(imp, b, "B")
    a_zp = imp.integer_zero_point(2, a, 1, "a_zero_point")
    b_zp = imp.integer_zero_point(3, b, b.shape[-1], "b_zero_point")
    y = imp.new_tensor(imp.name_out(), matmul_shape(imp, a, b), "i32")
    imp.emit("MatMulInteger", [a.name, b.name], [y.name], a_zero_point=a_zp[0], b_zero_point=b_zp)


@ms("QGemm")
def qgemm(imp: Importer, node: Node) -> None:
    imp.counts((6, 9))
    a, b = imp.tensor_in(0), imp.tensor_in(3)
    _eight_bit(imp, a, "A")
    _eight_bit(imp, b, "B")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise imp.error(f"A and B must be 2-D, got {list(a.shape)} and {list(b.shape)}")
    trans_a, trans_b = int(imp.attr("transA", 0)), int(imp.attr("transB", 0))
    m, k = a.shape[::-1] if trans_a else a.shape
    k2, n = b.shape[::-1] if trans_b else b.shape
    if k != k2:
        raise imp.error(f"A {list(a.shape)} (transA {trans_a}) and B {list(b.shape)} (transB {trans_b}) do not match")
    imp.bind(a, imp.qlinear_params(1, 2, a, "a"), "A")
    scale = imp.const_in(4, "b scale")
    axis = None if scale.size == 1 else (0 if trans_b else 1)
    imp.bind(b, imp.qlinear_params(4, 5, b, "b", axis=axis), "B")
    c = imp.name_in(6, required=False)
    if c is not None:
        ct = imp.tensor(c)
        if not ct.is_const or ct.dtype.name != "i32" or ct.size not in (1, n) or ct.shape not in ((), (1,), (n,),
                                                                                                   (1, n)):
            raise imp.unsupported(f"C {shorten(c)} must be a constant int32 scalar, [N] or [1, N], got {ct.dtype} "
                                  f"{list(ct.shape)}")
    if imp.name_in(7, required=False) is None:
        y = imp.new_tensor(imp.name_out(), (m, n), "f32")
    else:
        y_type = imp.zero_point_type(8, a.dtype.name)
        y = imp.new_tensor(imp.name_out(), (m, n), y_type, imp.qlinear_params(7, 8, y_type, "y"))
    imp.emit("QGemm", [a.name, b.name] + ([c] if c else []), [y.name], alpha=float(imp.attr("alpha", 1.0)),
             trans_a=trans_a, trans_b=trans_b)


def _pool_input(imp: Importer, channels_last: bool, float_allowed: bool = False) -> tuple[Tensor, tuple[int, int]]:
    x = imp.tensor_in(0)
    if not (float_allowed and x.dtype.name == "f32"):
        _eight_bit(imp, x, "input")
    if len(x.shape) != 4:
        raise imp.unsupported(f"only 2-D pooling (rank-4 data) is supported, got {list(x.shape)}")
    return x, (x.shape[1:3] if channels_last else x.shape[2:])


def _pool_output_shape(x: Tensor, out_hw: tuple[int, int], channels_last: bool) -> tuple[int, ...]:
    n, c = x.shape[0], x.shape[3] if channels_last else x.shape[1]
    return (n, *out_hw, c) if channels_last else (n, c, *out_hw)


@importer("MaxPool")
def max_pool(imp: Importer, node: Node) -> None:
    imp.counts((1, 1))
    x, hw = _pool_input(imp, False, float_allowed=True)  # float: a QDQ model's, the folding moves it
    if x.dtype.name != "f32":
        quantized(imp, x, "input")
    if int(imp.attr("storage_order", 0)):
        raise imp.unsupported("storage_order 1 is not supported")
    kernel = imp.ints_attr("kernel_shape", 2, 0)
    win = window_2d(imp, hw, kernel, ceil_mode=bool(imp.attr("ceil_mode", 0)))
    y = imp.new_tensor(imp.name_out(), _pool_output_shape(x, win.out_hw, False), x.dtype.name, x.quant)
    imp.emit("MaxPool", [x.name], [y.name], layout="NCHW", **win.attrs())


@ms("QLinearAveragePool")
def qlinear_average_pool(imp: Importer, node: Node) -> None:
    imp.counts((4, 5))
    channels_last = bool(imp.attr("channels_last", 0))
    x, hw = _pool_input(imp, channels_last)
    imp.bind(x, imp.qlinear_params(1, 2, x, "x"), "input")
    kernel = imp.ints_attr("kernel_shape", 2, 0)
    win = window_2d(imp, hw, kernel, ceil_mode=bool(imp.attr("ceil_mode", 0)), dilations_allowed=False)
    qy = imp.qlinear_params(3, 4, x.dtype.name, "y")
    y = imp.new_tensor(imp.name_out(), _pool_output_shape(x, win.out_hw, channels_last), x.dtype.name, qy)
    imp.emit("QLinearAveragePool", [x.name], [y.name], layout="NHWC" if channels_last else "NCHW",
             count_include_pad=int(imp.attr("count_include_pad", 0)), **win.attrs())


@ms("QLinearGlobalAveragePool")
def qlinear_global_average_pool(imp: Importer, node: Node) -> None:
    imp.counts((5, 5))
    channels_last = bool(imp.attr("channels_last", 0))
    x, _ = _pool_input(imp, channels_last)
    imp.bind(x, imp.qlinear_params(1, 2, x, "x"), "input")
    qy = imp.qlinear_params(3, 4, x.dtype.name, "y")
    y = imp.new_tensor(imp.name_out(), _pool_output_shape(x, (1, 1), channels_last), x.dtype.name, qy)
    imp.emit("QLinearGlobalAveragePool", [x.name], [y.name], layout="NHWC" if channels_last else "NCHW")
