"""Import of the ONNX operators that select elements at indices known at compile time (docs/onnx.md): Gather
with constant indices, Split, and Resize in mode "nearest". Each becomes data movement on the stored values, the
output keeping the input's type and quantization (onnxruntime runs them on the quantized data in QDQ models too).
Resize "linear" / "cubic" (float data, which a QDQ model quantizes around it) -> onnx.ResizeInterpolate with
onnxruntime's per-axis source indices and float32 weights (bilinear_taps, bicubic_taps):

Gather (axis, constant indices of any rank) -> onnx.Gather (axis, 1-D `indices` attr) [+ onnx.Reshape];
Split -> one onnx.Slice per output; Resize nearest (constant scales or sizes) -> one onnx.Gather per resized axis,
its indices computed as onnxruntime computes them (float32 coordinate transformation, then the nearest mode).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import shorten
from ..ir.graph import Tensor
from ..ir.limits import element_count
from .onnx_import import Importer, importer
from .onnx_model import Node

F32 = np.float32


def _gather(imp: Importer, x: Tensor, axis: int, indices: list[int], out: str | None = None) -> Tensor:
    """x's elements at `indices` along `axis` (one onnx.Gather); `out` names the result (default: a fresh name)."""
    shape = (*x.shape[:axis], len(indices), *x.shape[axis + 1:])
    element_count(shape, f"{imp.label}: output")
    name = out if out is not None else imp.fresh(f"{x.name}_g{axis}")
    y = imp.new_tensor(name, shape, x.dtype.name, x.quant)
    imp.emit("Gather", [x.name], [y.name], axis=axis, indices=indices)
    return y


def _per_tensor(imp: Importer, x: Tensor) -> None:
    if x.quant is not None and x.quant.kind != "per_tensor":
        raise imp.unsupported(f"{x.quant.kind} quantized {shorten(x.name)} (supported: per tensor)")


def _axis(imp: Importer, rank: int, default: int) -> int:
    axis = int(imp.attr("axis", default))
    if not -rank <= axis < rank:
        raise imp.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


@importer("Gather")
def gather(imp: Importer, node: Node) -> None:
    imp.counts((2, 2))
    x = imp.tensor_in(0)
    axis = _axis(imp, len(x.shape), 0)
    _per_tensor(imp, x)
    index = imp.const_in(1, "indices")
    if not np.issubdtype(index.dtype, np.integer):
        raise imp.error(f"indices must be integers, got {index.dtype}")
    dim = x.shape[axis]
    if np.any((index < -dim) | (index >= dim)):
        raise imp.error(f"an index is outside [{-dim}, {dim - 1}] (axis {axis} of {shorten(x.name)})")
    flat = [int(i) % dim for i in index.reshape(-1)]
    if not flat:
        raise imp.unsupported("Gather with no indices (an empty result)")
    shape = (*x.shape[:axis], *index.shape, *x.shape[axis + 1:])
    if index.ndim == 1:
        _gather(imp, x, axis, flat, imp.name_out())
        return
    picked = _gather(imp, x, axis, flat)
    y = imp.new_tensor(imp.name_out(), shape, x.dtype.name, x.quant)
    imp.emit("Reshape", [picked.name], [y.name], shape=list(shape))


@importer("Split")
def split(imp: Importer, node: Node) -> None:
    imp.counts((1, 2), (1, max(1, len(node.outputs))))
    x = imp.tensor_in(0)
    axis = _axis(imp, len(x.shape), 0)
    _per_tensor(imp, x)
    dim = x.shape[axis]
    sizes = imp.int_list_in(1, "split", required=False) if imp.opset >= 13 else imp.attr("split", None, list)
    if sizes is None:
        parts = int(imp.attr("num_outputs", len(node.outputs)))
        if parts != len(node.outputs) or parts < 1:
            raise imp.error(f"num_outputs {parts} does not match the {len(node.outputs)} outputs")
        chunk = -(-dim // parts)  # the last part may be smaller (opset 18)
        sizes = [min(chunk, dim - k * chunk) for k in range(parts)]
    sizes = [int(s) for s in sizes]
    if len(sizes) != len(node.outputs) or sum(sizes) != dim or min(sizes) < 0:
        raise imp.error(f"split sizes {sizes} do not divide axis {axis} of length {dim} into {len(node.outputs)} "
                        "outputs")
    begin = 0
    for j, size in enumerate(sizes):
        if node.outputs[j] and size:
            start = [0] * len(x.shape)
            start[axis] = begin
            y = imp.new_tensor(imp.name_out(j), (*x.shape[:axis], size, *x.shape[axis + 1:]), x.dtype.name, x.quant)
            imp.emit("Slice", [x.name], [y.name], begin=start, steps=[1] * len(x.shape))
        elif node.outputs[j]:
            raise imp.unsupported(f"Split output {shorten(node.outputs[j])} is empty")
        begin += size


def _source_coordinate(mode: str, out_len: int, in_len: int, scale: np.float32) -> np.ndarray:
    """onnxruntime's GetOriginalCoordinateFromResizedCoordinate, float32, for every output index."""
    x = np.arange(out_len, dtype=F32)
    if mode == "half_pixel":
        return (x + F32(0.5)) / scale - F32(0.5)
    if mode == "pytorch_half_pixel":
        return (x + F32(0.5)) / scale - F32(0.5) if out_len > 1 else np.zeros(out_len, F32)
    if mode == "tf_half_pixel_for_nn":
        return (x + F32(0.5)) / scale
    if mode == "asymmetric":
        return x / scale
    # align_corners
    return x * F32(in_len - 1) / F32(out_len - 1) if out_len > 1 else np.zeros(out_len, F32)


_NEAREST: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # round_prefer_floor: ties (x == trunc(x) + 0.5) go down, others round half away from zero (std::round)
    "round_prefer_floor": lambda v: np.where(v == np.trunc(v) + F32(0.5), np.floor(v),
                                             np.sign(v) * np.floor(np.abs(v) + F32(0.5))),
    "round_prefer_ceil": lambda v: np.sign(v) * np.floor(np.abs(v) + F32(0.5)),
    "floor": np.floor,
    "ceil": np.ceil,
}
_COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn", "asymmetric", "align_corners")


def bilinear_taps(mode: str, out_len: int, in_len: int, scale: np.float32) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's SetupUpsampleBilinear along one axis: per output index the source indices [i1, i2] of the
    clamped float32 source coordinate c and their float32 weights [|c - i2|, |c - i1|] (0.5 each when i1 == i2)."""
    c = np.arange(out_len, dtype=F32) if scale == 1 else _source_coordinate(mode, out_len, in_len, scale)
    c = np.clip(c.astype(F32), F32(0), F32(in_len - 1))
    i1 = np.minimum(c.astype(np.int64), in_len - 1)
    i2 = np.minimum(i1 + 1, in_len - 1)
    w1, w2 = np.abs(c - i2.astype(F32)), np.abs(c - i1.astype(F32))
    same = i1 == i2
    w1, w2 = np.where(same, F32(0.5), w1), np.where(same, F32(0.5), w2)
    return np.stack([i1, i2], axis=1), np.stack([w1, w2], axis=1).astype(F32)


def _cubic_coefficients(s: np.ndarray, a: np.float32) -> np.ndarray:
    """onnxruntime's GetCubicCoeffs: the four float32 weights of the taps at -1, 0, 1, 2 for fractions s."""
    one, two, three, four, five, eight = (F32(v) for v in (1, 2, 3, 4, 5, 8))
    d = np.abs(s).astype(F32)

    def outer(t: np.ndarray) -> np.ndarray:
        return ((a * t - five * a) * t + eight * a) * t - four * a

    def inner(t: np.ndarray) -> np.ndarray:
        return ((a + two) * t - (a + three)) * t * t + one

    return np.stack([outer(d + one), inner(d), inner(one - d), outer(two - d)], axis=1).astype(F32)


def bicubic_taps(mode: str, out_len: int, in_len: int, scale: np.float32, a: np.float32,
                 exclude_outside: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """onnxruntime's ResizeBiCubic along one axis: per output index the four source indices floor(c) - 1 .. + 2
    (clamped to the axis), their float32 weights (GetCubicCoeffs of c - floor(c); with exclude_outside those of
    taps outside the axis 0) and the weights' float32 sum in tap order (1 without exclude_outside)."""
    c = (np.arange(out_len, dtype=F32) if scale == 1 else _source_coordinate(mode, out_len, in_len, scale)).astype(F32)
    base = np.floor(c).astype(np.int64)
    taps = base[:, None] + np.arange(-1, 3)[None, :]
    weights = _cubic_coefficients((c - base.astype(F32)).astype(F32), a)
    sums = np.ones(out_len, F32)
    if exclude_outside:
        weights = np.where((taps >= 0) & (taps < in_len), weights, F32(0)).astype(F32)
        sums = np.add.accumulate(weights, axis=1, dtype=F32)[:, -1]
    return np.clip(taps, 0, in_len - 1), weights, sums


def _interpolate(imp: Importer, x: Tensor, out: list[int], factors: list[np.float32], coordinate: str,
                 mode: str) -> None:
    """Resize linear / cubic over the last two axes (rank 2, or rank 4 with N and C unchanged, as onnxruntime
    requires) of float data: onnx.ResizeInterpolate (RESIZE_F32's taps and weights), which the QDQ folding
    quantizes (onnxruntime's float path between DQ and Q)."""
    rank = len(x.shape)
    if x.dtype.name != "f32":
        raise imp.unsupported(f"Resize {mode} of {x.dtype} data (onnxruntime's 8-bit kernel truncates; supported: "
                              "float data between DequantizeLinear and QuantizeLinear)")
    if rank not in (2, 4) or (rank == 4 and (factors[0] != 1 or factors[1] != 1)):
        raise imp.unsupported(f"Resize {mode} of rank {rank} with scales {[float(f) for f in factors]} (supported: "
                              "over the last two axes of rank 2 or 4)")
    axis = rank - 2
    if mode == "linear":
        (ys, wy), (xs, wx) = (bilinear_taps(coordinate, out[a], x.shape[a], factors[a]) for a in (axis, axis + 1))
        attrs = {"form": "bilinear"}
    else:
        a, exclude = F32(imp.attr("cubic_coeff_a", -0.75)), bool(int(imp.attr("exclude_outside", 0)))
        (ys, wy, y_div), (xs, wx, x_div) = (bicubic_taps(coordinate, out[k], x.shape[k], factors[k], a, exclude)
                                            for k in (axis, axis + 1))
        wx = (wx / x_div[:, None]).astype(F32)  # coefficient / sum, as onnxruntime divides each before the product
        attrs = {"form": "bicubic", "y_div": y_div.tolist()}
    y = imp.new_tensor(imp.name_out(), tuple(out), x.dtype.name, None)
    imp.emit("ResizeInterpolate", [x.name], [y.name], axis=axis, ys=ys.tolist(), xs=xs.tolist(), wy=wy.tolist(),
             wx=wx.tolist(), **attrs)


@importer("Resize")
def resize(imp: Importer, node: Node) -> None:
    imp.counts((1, 4))
    if imp.opset < 11:
        raise imp.unsupported("Resize before opset 11 (Resize-10's fixed coordinate rules)")
    x = imp.tensor_in(0)
    rank = len(x.shape)
    mode = str(imp.attr("mode", "nearest"))
    if mode not in ("nearest", "linear", "cubic"):
        raise imp.unsupported(f"Resize mode {mode!r} (supported: 'nearest', which selects stored values, and "
                              "'linear', 'cubic' between DequantizeLinear and QuantizeLinear)")
    coordinate = str(imp.attr("coordinate_transformation_mode", "half_pixel"))
    nearest = str(imp.attr("nearest_mode", "round_prefer_floor"))
    if coordinate not in _COORDINATE_MODES or nearest not in _NEAREST:
        raise imp.unsupported(f"Resize coordinate_transformation_mode {coordinate!r} / nearest_mode {nearest!r} "
                              f"(supported: {', '.join(_COORDINATE_MODES)} / {', '.join(_NEAREST)})")
    if imp.attr("axes", None, list) is not None or str(imp.attr("keep_aspect_ratio_policy", "stretch")) != "stretch":
        raise imp.unsupported("Resize with axes or keep_aspect_ratio_policy (opset 18)")
    if mode != "nearest" and int(imp.attr("antialias", 0)):
        raise imp.unsupported(f"Resize {mode} with antialias (onnxruntime's separate antialiasing kernel)")
    scales, sizes = imp.const_in(2, "scales", required=False), imp.const_in(3, "sizes", required=False)
    if scales is not None and scales.size and sizes is not None and sizes.size:
        raise imp.error("scales and sizes are both given")
    if sizes is not None and sizes.size:
        if sizes.shape != (rank,):
            raise imp.error(f"sizes has shape {list(sizes.shape)}, the data rank {rank}")
        out = [int(v) for v in sizes]
        factors = [F32(o) / F32(i) for o, i in zip(out, x.shape, strict=True)]
    elif scales is not None and scales.size == rank:
        factors = [F32(s) for s in scales.reshape(-1)]
        if not all(np.isfinite(f) and f > 0 for f in factors):
            raise imp.error(f"Resize scales {[float(f) for f in factors]} must be finite and positive")
        out = [int(np.floor(F32(i) * f)) for i, f in zip(x.shape, factors, strict=True)]
    else:
        raise imp.error(f"Resize needs {rank} scales or sizes")
    if any(o < 1 for o in out) or any(not f > 0 for f in factors):
        raise imp.error(f"Resize to {out} (scales {[float(f) for f in factors]}) is empty or negative")
    element_count(out, f"{imp.label}: output")
    _per_tensor(imp, x)
    if tuple(out) == tuple(x.shape):  # onnxruntime copies the data whatever the scales
        y = imp.new_tensor(imp.name_out(), x.shape, x.dtype.name, x.quant)
        imp.emit("Reshape", [x.name], [y.name], shape=list(x.shape))
        return
    if mode != "nearest":
        _interpolate(imp, x, out, factors, coordinate, mode)
        return
    current = x
    resized = [a for a in range(rank) if out[a] != x.shape[a] or factors[a] != 1]
    for a in resized:
        coords = _source_coordinate(coordinate, out[a], x.shape[a], factors[a])
        index = np.clip(_NEAREST[nearest](coords.astype(F32)), 0, x.shape[a] - 1).astype(np.int64)
        current = _gather(imp, current, a, [int(i) for i in index], imp.name_out() if a == resized[-1] else None)
