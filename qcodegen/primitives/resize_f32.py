"""RESIZE_F32 (qcodegen extension): onnxruntime's float path for a QDQ model's bilinear Resize (DequantizeLinear,
Resize mode "linear", QuantizeLinear), every float32 operation emulated exactly with integers (runtime/qc_runtime.h
qc_f32s_*; docs/semantics.md §14.2, docs/onnx.md).

Over two adjacent axes (H = `axis`, W = axis + 1) of x, for output position (y, x) and each element of the other
axes, all float32, round to nearest even, in this order (onnxruntime 1.32's UpsampleBilinear):
    f(i, j) = f32(x[i, j] - in_zp) * in_scale                                         (DequantizeLinear)
    r = ((((wx2[x] * wy2[y]) * f(y1, x1) + (wx1[x] * wy2[y]) * f(y1, x2))
          + (wx2[x] * wy1[y]) * f(y2, x1)) + (wx1[x] * wy1[y]) * f(y2, x2))
    out = clamp(round_half_even(r / out_scale), qmin - out_zp, qmax - out_zp) + out_zp  (MLAS QuantizeLinear)
with y1 = ys[y][0], y2 = ys[y][1], wy1 = wy[y][0], wy2 = wy[y][1] (likewise for x): source indices and float32
weights in [0, 1] computed at plan time as onnxruntime computes them (the lowering). The scales lie in
[2^-40, 2^40] and every nonzero weight product is at least 2^-60 (checked): every intermediate is then a normal
float32 or zero (module docstring of binary_f32).

inputs: x (i8, u8, i16, u16); attrs: axis, ys, xs ([n, 2] integers), wy, wx ([n, 2] float32), in_scale, in_zp,
out_scale, out_zp, qmin, qmax. Output: x's shape with H, W replaced by len(ys), len(xs); i8, u8, i16 or u16.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .binary_f32 import SCALE_RANGE
from .rescale_f32 import mantissa_exponent

_TYPES = ("i8", "u8", "i16", "u16")
MIN_WEIGHT_PRODUCT = 2.0 ** -60


@dataclass(frozen=True, eq=False)
class ResizeF32Params:
    """The attributes of a RESIZE_F32 step (module docstring), typed."""

    axis: int
    ys: np.ndarray
    xs: np.ndarray
    wy: np.ndarray
    wx: np.ndarray
    in_scale: np.float32
    in_zp: int
    out_scale: np.float32
    out_zp: int
    qmin: int
    qmax: int

    @classmethod
    def of(cls, io: StepIO) -> ResizeF32Params:
        a = io.attrs
        keys = ("axis", "ys", "xs", "wy", "wx", "in_scale", "in_zp", "out_scale", "out_zp", "qmin", "qmax")
        missing = [k for k in keys if k not in a]
        require(not missing, f"RESIZE_F32: missing attributes {missing}")
        return cls(int(a["axis"]), np.asarray(a["ys"], np.int64).reshape(-1, 2),
                   np.asarray(a["xs"], np.int64).reshape(-1, 2),
                   np.asarray(a["wy"], np.float64).astype(np.float32).reshape(-1, 2),
                   np.asarray(a["wx"], np.float64).astype(np.float32).reshape(-1, 2), np.float32(a["in_scale"]),
                   int(a["in_zp"]), np.float32(a["out_scale"]), int(a["out_zp"]), int(a["qmin"]), int(a["qmax"]))

    def coefficients(self) -> list[np.ndarray]:
        """The four float32 weight products [out_h, out_w] in the order of the sum: c11, c21, c12, c22."""
        wy1, wy2 = self.wy[:, 0, None], self.wy[:, 1, None]
        wx1, wx2 = self.wx[None, :, 0], self.wx[None, :, 1]
        return [wx2 * wy2, wx1 * wy2, wx2 * wy1, wx1 * wy1]


def resize_f32(p: ResizeF32Params, x: np.ndarray) -> np.ndarray:
    """The float32 definition (module docstring) in numpy float32 operations, as int64."""
    a = p.axis
    f = (np.asarray(x, np.int64) - p.in_zp).astype(np.float32) * p.in_scale

    def tap(i: int, j: int) -> np.ndarray:
        rows = np.take(f, p.ys[:, i], axis=a)
        return np.take(rows, p.xs[:, j], axis=a + 1)

    view = (1,) * a + (len(p.ys), len(p.xs)) + (1,) * (f.ndim - a - 2)
    c11, c21, c12, c22 = (c.reshape(view) for c in p.coefficients())
    r = c11 * tap(0, 0) + c21 * tap(0, 1)
    r = r + c12 * tap(1, 0)
    r = r + c22 * tap(1, 1)
    v = np.clip((r / p.out_scale).astype(np.float32), np.float32(p.qmin - p.out_zp), np.float32(p.qmax - p.out_zp))
    return np.rint(v).astype(np.int64) + p.out_zp


@register
class ResizeF32(Primitive):
    name = "RESIZE_F32"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        p, shape = ResizeF32Params.of(io), list(io.ins[0].shape)
        shape[p.axis:p.axis + 2] = [len(p.ys), len(p.xs)]
        return [tuple(shape)]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1 and len(io.outs) == 1, "RESIZE_F32: needs one input and one output")
        x, y = io.ins[0], io.outs[0]
        require(x.dtype.name in _TYPES and y.dtype.name in _TYPES, f"RESIZE_F32: types {x.dtype} -> {y.dtype}")
        p = ResizeF32Params.of(io)
        require(0 <= p.axis <= len(x.shape) - 2, f"RESIZE_F32: axis {p.axis} needs a following axis in "
                                                 f"{list(x.shape)}")
        for name, idx, w, n in (("ys", p.ys, p.wy, x.shape[p.axis]), ("xs", p.xs, p.wx, x.shape[p.axis + 1])):
            require(len(idx) > 0 and bool(np.all((idx >= 0) & (idx < n))), f"RESIZE_F32: {name} outside [0, {n})")
            require(w.shape == idx.shape and bool(np.all((w >= 0) & (w <= 1))), f"RESIZE_F32: weights of {name} "
                                                                                 "must be in [0, 1]")
        products = np.concatenate([c.reshape(-1) for c in p.coefficients()])
        require(bool(np.all((products == 0) | (products >= MIN_WEIGHT_PRODUCT))), "RESIZE_F32: a weight product "
                                                                                   "below 2^-60")
        for s in (p.in_scale, p.out_scale):
            require(bool(SCALE_RANGE[0] <= s <= SCALE_RANGE[1]), f"RESIZE_F32: scale {float(s)!r} outside "
                                                                 "[2^-40, 2^40]")
        require(x.dtype.min <= p.in_zp <= x.dtype.max and y.dtype.min <= p.out_zp <= y.dtype.max,
                "RESIZE_F32: a zero point outside its type")
        require(y.dtype.min <= p.qmin <= p.qmax <= y.dtype.max, f"RESIZE_F32: bounds [{p.qmin}, {p.qmax}] outside "
                                                                f"{y.dtype}")
        super().check(io)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [resize_f32(ResizeF32Params.of(io), args[0])]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        p = ResizeF32Params.of(io)
        return Ranges([(p.qmin, p.qmax)])

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        p = ResizeF32Params.of(io)
        out = {"ys": p.ys.astype(np.int32), "xs": p.xs.astype(np.int32)}
        for key, w in (("wy", p.wy), ("wx", p.wx)):
            m, k = mantissa_exponent(w)
            out[f"{key}_m"], out[f"{key}_k"] = m.astype(np.int32), k.astype(np.int16)
        return out

    def template_context(self, io: StepIO) -> dict:
        p, shape = ResizeF32Params.of(io), io.ins[0].shape
        m, k = mantissa_exponent(np.array([p.in_scale, p.out_scale], np.float32))
        return dict(outer=int(np.prod(shape[:p.axis], dtype=np.int64)), h=shape[p.axis], w=shape[p.axis + 1],
                    inner=int(np.prod(shape[p.axis + 2:], dtype=np.int64)), oh=len(p.ys), ow=len(p.xs),
                    m=[int(v) for v in m], k=[int(v) for v in k], in_zp=p.in_zp, out_zp=p.out_zp,
                    lo=p.qmin - p.out_zp, hi=p.qmax - p.out_zp)
