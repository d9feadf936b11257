"""Helpers shared by the ONNX lowering rules: the RESCALE_F32 that reproduces onnxruntime's requantization,
convolution / pooling windows in TOSA form, and the scale range of the emulated float32 paths."""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Tensor
from ...primitives.binary_f32 import SCALE_RANGE
from ...semantics.window import SourceWindow, window
from ..base import Lowerer


def requantize_f32(lw: Lowerer, acc: str, y: Tensor, scales: np.ndarray, dst: str | None = None,
                   axis: int = -1) -> None:
    """RESCALE_F32 of i32 accumulator `acc` into y's quantization (onnxruntime's MlasRequantizeOutput)."""
    values = [float(s) for s in np.atleast_1d(np.asarray(scales, np.float32)).reshape(-1)]
    if len(set(values)) == 1:
        values = values[:1]
    lw.emit("RESCALE_F32", [acc], [dst or y.name], scale=values, axis=axis, output_zp=y.quant.zero_point,
            out_min=y.quant.storage_min, out_max=y.quant.storage_max)


def tosa_window(lw: Lowerer, in_hw: tuple[int, ...], kernel: tuple[int, ...], attrs: dict) -> SourceWindow:
    """The window of an ONNX-imported NHWC op (attrs pads [top, left, bottom, right], strides, dilations)."""
    t, left, b, r = attrs["pads"]
    try:
        return window(tuple(in_hw), tuple(kernel), tuple(attrs["strides"]), tuple(attrs.get("dilations", (1, 1))),
                      [t, b, left, r])
    except ValueError as exc:
        raise lw.error(str(exc)) from None


def nhwc(lw: Lowerer) -> None:
    """The current op must have been given the channels-last layout by the front end."""
    if lw.attr("layout", "NCHW") != "NHWC":
        raise lw.error("expects channels-last data (the ONNX front end's layout pass sets layout NHWC)")


def require_f32_path_scales(lw: Lowerer, tensors: list[Tensor]) -> None:
    """BINARY_F32 and RESIZE_F32 emulate binary32 without subnormals or infinities: scales in [2^-40, 2^40]."""
    scales = [t.quant.scale for t in tensors]
    if not all(SCALE_RANGE[0] <= s <= SCALE_RANGE[1] for s in scales):
        raise UnsupportedError(f"{lw.label}: scales {scales} of {', '.join(repr(t.name) for t in tensors)} "
                               "(supported: 2^-40 to 2^40, where onnxruntime's float32 path stays normal)")
