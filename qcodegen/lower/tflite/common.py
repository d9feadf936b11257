"""Helpers shared by the TFLite lowering rules (qcodegen/lower/tflite/): operand checks, constant
parameters, fused activations, TFLite's SAME/VALID windows."""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...ir.quant import QuantType
from ...semantics.tflite import activation_range
from ...semantics.window import SourceWindow, window
from ..base import Lowerer
from ..common import expect_shape

QUANT_TYPES = ("i8", "i16")


def operands(lw: Lowerer, op: Op, n_in: tuple[int, ...], n_out: int = 1) -> tuple[list[Tensor], list[Tensor]]:
    """The op's input and output tensors, checking their counts (n_in: the accepted input counts)."""
    if len(op.inputs) not in n_in or len(op.outputs) != n_out:
        want = " or ".join(str(n) for n in n_in)
        raise lw.error(f"expects {want} inputs and {n_out} output(s), got {len(op.inputs)} and {len(op.outputs)}")
    return [lw.tensor_in(i) for i in range(len(op.inputs))], [lw.tensor_out(i) for i in range(n_out)]


def quantized(lw: Lowerer, t: Tensor, types: tuple[str, ...] = QUANT_TYPES, any_zero_point: bool = False
              ) -> QuantType:
    """The per-tensor quantization of an activation tensor of one of `types` (16-bit: zero point 0 unless
    any_zero_point)."""
    if t.dtype.name not in types:
        raise lw.error(f"tensor {t.name!r} has type {t.dtype}; supported: {', '.join(types)}")
    if t.quant is None:
        raise lw.error(f"tensor {t.name!r} is not quantized")
    if t.quant.kind != "per_tensor":
        raise lw.error(f"tensor {t.name!r} must be quantized per tensor, got {t.quant.kind}")
    if t.dtype.bits == 16 and t.quant.zero_point != 0 and not any_zero_point:
        raise lw.error(f"16-bit tensor {t.name!r} must have zero point 0, got {t.quant.zero_point}")
    return t.quant


def same_type(lw: Lowerer, *tensors: Tensor) -> None:
    if len({t.dtype for t in tensors}) > 1:
        raise lw.error("operands must share one type, got " + ", ".join(f"{t.name!r}: {t.dtype}" for t in tensors))


def fused_bounds(lw: Lowerer, y: Tensor) -> tuple[int, int]:
    """Output limits of the op's fused_activation_function (CalculateActivationRangeQuantized)."""
    act = lw.attr("fused_activation_function", "NONE")
    try:
        return activation_range(y.quant, y.dtype, act)
    except UnsupportedError as exc:
        raise UnsupportedError(f"{lw.label}: {exc}") from None


def const_ints(lw: Lowerer, t: Tensor, what: str) -> list[int]:
    """The values of a constant integer parameter tensor (shape, perm, paddings, begin, axis...)."""
    if not t.is_const or t.dtype.is_float:
        raise lw.error(f"{what} {t.name!r} must be a constant integer tensor")
    return [int(v) for v in np.asarray(t.data).reshape(-1)]


def tfl_window(lw: Lowerer, x: Tensor, kernel: tuple[int, int], dilation: tuple[int, int] = (1, 1)) -> SourceWindow:
    """The window of a TFLite NHWC op from stride_h/stride_w and padding SAME/VALID (ComputePaddingHeightWidth:
    SAME pads (total // 2) before, the rest after)."""
    padding = lw.attr("padding")
    if padding not in ("SAME", "VALID"):
        raise lw.error(f"padding {padding!r} is not supported (SAME or VALID)")
    stride = (int(lw.attr("stride_h")), int(lw.attr("stride_w")))
    try:
        return window(x.shape[1:3], kernel, stride, dilation, padding)
    except ValueError as exc:
        raise lw.error(str(exc)) from None


def window_output(lw: Lowerer, x: Tensor, y: Tensor, win: SourceWindow, channels: int) -> None:
    expect_shape(lw, y, (x.shape[0], *win.out, channels))


def rank4(lw: Lowerer, t: Tensor, layout: str) -> None:
    if len(t.shape) != 4:
        raise lw.error(f"tensor {t.name!r} must have rank 4 ({layout}), got shape {list(t.shape)}")
