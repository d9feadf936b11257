"""Helpers shared by the lowering rules: type checks, real -> quantized bounds, requantization, reshapes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import shorten
from ..fixedpoint import round_half_away, scale_to_multiplier_shift
from ..ir.graph import Tensor
from ..ir.quant import QuantType
from ..semantics.window import SourceWindow, window
from .base import Lowerer

ACTIVATIONS: dict[str, tuple[float | None, float | None]] = {
    "none": (None, None), "relu": (0.0, None), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0),
}



def quant_attrs(q: QuantType) -> dict[str, Any]:
    """The QUANTIZE / DEQUANTIZE attributes of a quantization: scale and zero point, per tensor, per axis (with the
    axis) or blockwise (with the block sizes)."""
    if q.kind == "per_tensor":
        return {"scale": q.scale, "zero_point": q.zero_point}
    if q.kind == "per_axis":
        return {"scale": [float(s) for s in q.scales], "zero_point": [int(z) for z in q.zero_points],
                "axis": int(q.axis)}
    return {"scale": q.scales.tolist(), "zero_point": q.zero_points.tolist(),
            "block_sizes": [int(b) for b in q.block_sizes]}


def quantize_value(value: float, q: QuantType) -> int:
    """zp + round_half_away(value / scale) in float64, limited to the storage range."""
    level = q.zero_point + round_half_away(float(value) / q.scale)
    return min(max(level, q.storage_min), q.storage_max)


def clamp_bounds(q: QuantType, lo: float | None, hi: float | None) -> tuple[int, int]:
    """Storage-level bounds of the real interval [lo, hi] (None = unbounded), inside the storage range."""
    qlo = q.storage_min if lo is None else quantize_value(lo, q)
    qhi = q.storage_max if hi is None else quantize_value(hi, q)
    return qlo, qhi


def activation_bounds(lw: Lowerer, q: QuantType) -> dict[str, int]:
    """out_min/out_max of the op's fused activation (attribute `activation`, default "none")."""
    name = lw.attr("activation", "none")
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise lw.error(f"unknown activation {shorten(name)} (known: {', '.join(ACTIVATIONS)})")
    lo, hi = clamp_bounds(q, *ACTIVATIONS[name])
    return {"out_min": lo, "out_max": hi}


def check_dtypes(lw: Lowerer, tensors: Iterable[Tensor], allowed: tuple[str, ...]) -> None:
    for t in tensors:
        if t.dtype.name not in allowed:
            raise lw.error(f"tensor {t.name!r} has dtype {t.dtype}; expected one of {', '.join(allowed)}")


def check_const(lw: Lowerer, t: Tensor, what: str) -> None:
    if not t.is_const:
        raise lw.error(f"{what} {t.name!r} must be a constant")


def same_quant(a: QuantType | None, b: QuantType | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.storage == b.storage and a.kind == b.kind == "per_tensor" and a.scale == b.scale
            and a.zero_point == b.zero_point and (a.storage_min, a.storage_max) == (b.storage_min, b.storage_max))


def requantize(lw: Lowerer, src: str, q_src: QuantType, dst: str, q_dst: QuantType) -> None:
    """One RESCALE from q_src to q_dst (per tensor), saturating to q_dst's storage range."""
    lw.rescale(src, dst, q_src.scale / q_dst.scale, q_src.zero_point, q_dst.zero_point,
               out_min=q_dst.storage_min, out_max=q_dst.storage_max)


def max_offset(q: QuantType) -> int:
    """Largest |q - zero_point| over the storage range."""
    return max(q.zero_point - q.storage_min, q.storage_max - q.zero_point)


def rescale_output(lw: Lowerer, src: str, y: Tensor, scale: float | np.ndarray, bound: int, out_min: int,
                   out_max: int, dst: str | None = None) -> None:
    """The final RESCALE of an op: i32 accumulator `src` (|values| <= bound) -> y's quantization.

    TOSA requires |v| < 2^(shift-1) when shift <= 31, i.e. for scales >= 0.5. Values that large are at least
    2^18 output steps away from zero in every channel, so they saturate the 8/16-bit output anyway: they are
    CLAMPed into the allowed range first, which changes no result."""
    scales = np.atleast_1d(np.asarray(scale, np.float64))
    shift = min(scale_to_multiplier_shift(float(s))[1] for s in scales)
    limit = 1 << (shift - 1)
    if shift <= 31 and bound >= limit and np.all(limit * scales >= 1 << 18):
        buf = lw.schedule.buffers[src]
        tmp = lw.temp(f"{src}_sat", buf.shape, buf.dtype)
        lw.emit("CLAMP", [src], [tmp], min_val=-limit, max_val=limit - 1)
        src = tmp
    lw.rescale(src, dst or y.name, scale, output_zp=y.quant.zero_point, out_min=out_min, out_max=out_max)


def to_i32(lw: Lowerer, name: str, zp: int, scale: float = 1.0) -> str:
    """RESCALE an 8/16-bit tensor to i32, removing its zero point (scale 1.0 is exact: (2^30, 30))."""
    buf = lw.schedule.buffers[name]
    tmp = lw.temp(f"{name}_i32", buf.shape, "i32")
    lw.rescale(name, tmp, scale, input_zp=zp)
    return tmp


def reshape(lw: Lowerer, name: str, shape: tuple[int, ...]) -> str:
    """`name` viewed with `shape` (a RESHAPE into a new temporary unless the shape already matches)."""
    buf = lw.schedule.buffers[name]
    if buf.shape == tuple(shape):
        return name
    tmp = lw.temp(f"{name}_r", shape, buf.dtype)
    lw.emit("RESHAPE", [name], [tmp], shape=list(shape))
    return tmp


def align_rank(lw: Lowerer, name: str, rank: int) -> str:
    """Leading 1-dimensions so that `name` has `rank` dimensions (numpy broadcasting -> TOSA broadcasting)."""
    shape = lw.schedule.buffers[name].shape
    return reshape(lw, name, (1,) * (rank - len(shape)) + shape)


def crop_input(lw: Lowerer, name: str, win: SourceWindow) -> str:
    """Drop the trailing rows/columns of an NHWC tensor that no window output reads (see window.py)."""
    if win.crop == (0, 0):
        return name
    buf = lw.schedule.buffers[name]
    n, h, w, c = buf.shape
    size = [n, h - win.crop[0], w - win.crop[1], c]
    tmp = lw.temp(f"{name}_crop", tuple(size), buf.dtype)
    lw.emit("SLICE", [name], [tmp], start=[0, 0, 0, 0], size=size)
    return tmp


def broadcast_out_shape(lw: Lowerer, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise lw.error(f"input shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast") from None


def op_window(lw: Lowerer, x: Tensor, kernel: object, dilation: object = 1) -> SourceWindow:
    """The window of an NHWC op from its `stride` and `padding` attributes."""
    try:
        return window(x.shape[1:3], kernel, lw.attr("stride", 1), dilation, lw.attr("padding", "VALID"))
    except ValueError as exc:
        raise lw.error(str(exc)) from None


def expect_shape(lw: Lowerer, t: Tensor, shape: tuple[int, ...]) -> None:
    if t.shape != tuple(shape):
        raise lw.error(f"output {t.name!r} has shape {list(t.shape)}, expected {list(shape)}")


def expect_rank(lw: Lowerer, t: Tensor, rank: int, layout: str) -> None:
    if len(t.shape) != rank:
        raise lw.error(f"tensor {t.name!r} must have rank {rank} ({layout}), got shape {list(t.shape)}")


def finish(lw: Lowerer, src: str, q_src: QuantType, y: Tensor, out_min: int, out_max: int) -> None:
    """Write `src` (quantized q_src, same shape as y) into y limited to [out_min, out_max]: a RESCALE when the
    quantization differs, then a CLAMP (the rescale+clamp pass fuses the two)."""
    if not same_quant(q_src, y.quant):
        tmp = lw.temp(f"{y.name}_rq", y.shape, y.dtype)
        requantize(lw, src, q_src, tmp, y.quant)
        src = tmp
    lw.emit("CLAMP", [src], [y.name], min_val=int(out_min), max_val=int(out_max))
