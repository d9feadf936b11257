"""ONNX pooling on 8-bit NHWC data (docs/onnx.md).

MaxPool: MAX_POOL2D on the stored values (padding never wins), exact.
QLinearGlobalAveragePool: onnxruntime sums the raw values in int32 and adds -x_zero_point * N, then requantizes
with MlasRequantizeOutput at the float32 scale x_scale / (y_scale * float(N)): the window sum as a
DEPTHWISE_CONV2D with unit weights (input zero point removed, no int32 copy of the input), then RESCALE_F32 --
onnxruntime's result bit for bit.
QLinearAveragePool (onnxruntime averages dequantized float32 values, summed in order): the exact window sum as
above and one RESCALE rounding half to even by x_scale / (count * y_scale) -- the average of the definition, which
equals onnxruntime's float32 evaluation except within float32 rounding error of a tie. Windows with different
counts (padding excluded from the count) are not supported.
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...fixedpoint import Rounding
from ...ir.graph import Op, Tensor
from ...semantics.onnxruntime import f32_product, f32_quotient
from ..base import Lowerer, rule
from ..common import crop_input, expect_shape
from .common import nhwc, requantize_f32, tosa_window


def _window_sum(lw: Lowerer, x: Tensor, kernel: tuple[int, int], attrs: dict, acc: str) -> None:
    """acc (i32, NHWC) = sum of (x - zero point) over each window (padding contributes 0)."""
    win = tosa_window(lw, x.shape[1:3], kernel, attrs)
    c = x.shape[3]
    ones = lw.const(f"{acc}_ones", np.ones((*kernel, c, 1), np.int64), "i8")
    zero = lw.const(f"{acc}_bias", np.zeros(1, np.int64), "i32")
    lw.emit("DEPTHWISE_CONV2D", [crop_input(lw, x.name, win), ones, zero], [acc], pad=list(win.pad),
            stride=list(win.stride), dilation=[1, 1], input_zp=x.quant.zero_point, weight_zp=0, acc_type="i32")


@rule("onnx.MaxPool")
def lower_max_pool(lw: Lowerer, op: Op) -> None:
    nhwc(lw)
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    if any(d != 1 for d in lw.attr("dilations", [1, 1])):
        raise UnsupportedError(f"{lw.label}: dilated max pooling is not supported")
    win = tosa_window(lw, x.shape[1:3], tuple(lw.attr("kernel")), op.attrs)
    expect_shape(lw, y, (x.shape[0], *win.out, x.shape[3]))
    lw.emit("MAX_POOL2D", [crop_input(lw, x.name, win)], [y.name], kernel=list(win.kernel),
            stride=list(win.stride), pad=list(win.pad))


@rule("onnx.QLinearGlobalAveragePool")
def lower_global_average_pool(lw: Lowerer, op: Op) -> None:
    nhwc(lw)
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    n, h, w, c = x.shape
    acc = lw.temp(f"{y.name}_sum", (n, 1, 1, c), "i32")
    _window_sum(lw, x, (h, w), dict(pads=[0, 0, 0, 0], strides=[1, 1]), acc)
    scale = f32_quotient(x.quant.scale, f32_product(y.quant.scale, np.float32(h * w)))
    requantize_f32(lw, acc, y, scale)


@rule("onnx.QLinearAveragePool")
def lower_average_pool(lw: Lowerer, op: Op) -> None:
    nhwc(lw)
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    kernel = tuple(lw.attr("kernel"))
    if any(lw.attr("pads")) and not lw.attr("count_include_pad", 0):
        raise UnsupportedError(f"{lw.label}: padded average pooling that excludes the padding from the count "
                               "(count_include_pad 0) is not supported")
    acc = lw.temp(f"{y.name}_sum", y.shape, "i32")
    _window_sum(lw, x, kernel, op.attrs, acc)
    count = kernel[0] * kernel[1]
    lw.rescale(acc, y.name, x.quant.scale / (count * y.quant.scale), output_zp=y.quant.zero_point,
               rounding=Rounding.HALF_EVEN, out_min=y.quant.storage_min, out_max=y.quant.storage_max)
