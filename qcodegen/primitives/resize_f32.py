"""RESIZE_F32 (qcodegen extension): onnxruntime's float path for a QDQ model's bilinear or bicubic Resize
(DequantizeLinear, Resize mode "linear" / "cubic", QuantizeLinear), every float32 operation emulated exactly with
integers (runtime/qc_runtime.h qc_f32s_*; docs/semantics.md §14.2, docs/onnx.md).

Over two adjacent axes (H = `axis`, W = axis + 1) of x, for output position (r, c) and each element of the other
axes, with the k source rows ys[r][i], columns xs[c][j] and float32 weights wy[r][i], wx[c][j] (k = 2 bilinear,
4 bicubic) computed at plan time as onnxruntime computes them (the importer), all float32, round to nearest even,
sums from the left (onnxruntime 1.32's UpsampleBilinear and ResizeBiCubic):
    f(i, j) = f32(x[ys[r][i], xs[c][j]] - in_zp) * in_scale                          (DequantizeLinear)
    bilinear: v = sum over i, then j, of (wx[c][j] * wy[r][i]) * f(i, j)
    bicubic:  v = sum over i of ((sum over j of wx[c][j] * f(i, j)) * wy[r][i]) / y_div[r]
    out = clamp(round_half_even(v / out_scale), qmin - out_zp, qmax - out_zp) + out_zp  (MLAS QuantizeLinear)
The scales lie in [2^-40, 2^40], every nonzero bicubic weight magnitude in [2^-30, 2^10] and y_div in
[2^-16, 4], the bilinear weights in [0, 1] with nonzero products of at least 2^-60 (checked): every product and
quotient that reaches the result is then zero or a normal float32 (|f| >= 2^-40, a nonzero row sum >= 2^-93, its
product with a weight >= 2^-123); a sum that falls below 2^-126 is exact in binary32 as here.

inputs: x (i8, u8, i16, u16); attrs: axis, form ("bilinear" or "bicubic"), ys, xs ([n, k] integers), wy, wx
([n, k] float32), y_div ([len(ys)] float32, bicubic), in_scale, in_zp, out_scale, out_zp, qmin, qmax. Output:
x's shape with H, W replaced by len(ys), len(xs); i8, u8, i16 or u16.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require, require_attrs
from .binary_f32 import SCALE_RANGE
from .rescale_f32 import mantissa_exponent

_TYPES = ("i8", "u8", "i16", "u16")
_TAPS = {"bilinear": 2, "bicubic": 4}
MIN_WEIGHT_PRODUCT = 2.0 ** -60
CUBIC_WEIGHT_RANGE = (2.0 ** -30, 2.0 ** 10)
Y_DIV_RANGE = (2.0 ** -16, 4.0)


@dataclass(frozen=True, eq=False)
class ResizeF32Params:
    """The attributes of a RESIZE_F32 step (module docstring), typed."""

    axis: int
    form: str
    ys: np.ndarray
    xs: np.ndarray
    wy: np.ndarray
    wx: np.ndarray
    y_div: np.ndarray
    in_scale: np.float32
    in_zp: int
    out_scale: np.float32
    out_zp: int
    qmin: int
    qmax: int

    @classmethod
    def of(cls, io: StepIO) -> ResizeF32Params:
        a = io.attrs
        keys = ("axis", "form", "ys", "xs", "wy", "wx", "in_scale", "in_zp", "out_scale", "out_zp", "qmin", "qmax")
        require_attrs(a, "RESIZE_F32", keys)
        form = str(a["form"])
        require(form in _TAPS, f"RESIZE_F32: form {form!r} is not one of {list(_TAPS)}")
        k = _TAPS[form]

        def table(key: str, dt: type) -> np.ndarray:
            values = np.asarray(a[key], np.float64)
            require(values.ndim == 2 and values.shape[1] == k, f"RESIZE_F32: {key} must be [n, {k}]")
            return values.astype(dt)

        ys = table("ys", np.int64)
        y_div = np.asarray(a.get("y_div", np.ones(len(ys))), np.float64).astype(np.float32).reshape(-1)
        return cls(int(a["axis"]), form, ys, table("xs", np.int64), table("wy", np.float32), table("wx", np.float32),
                   y_div, np.float32(a["in_scale"]), int(a["in_zp"]), np.float32(a["out_scale"]), int(a["out_zp"]),
                   int(a["qmin"]), int(a["qmax"]))

    def products(self) -> np.ndarray:
        """Bilinear: the float32 weight products [out_h, out_w, k, k] (wx[c][j] * wy[r][i] at [r, c, i, j])."""
        return self.wx[None, :, None, :] * self.wy[:, None, :, None]


def resize_f32(p: ResizeF32Params, x: np.ndarray) -> np.ndarray:
    """The float32 definition (module docstring) in numpy float32 operations, as int64."""
    a, k = p.axis, _TAPS[p.form]
    f = (np.asarray(x, np.int64) - p.in_zp).astype(np.float32) * p.in_scale
    lead = (1,) * a
    trail = (1,) * (f.ndim - a - 2)

    def tap(i: int, j: int) -> np.ndarray:
        return np.take(np.take(f, p.ys[:, i], axis=a), p.xs[:, j], axis=a + 1)

    def per_column(w: np.ndarray) -> np.ndarray:
        return w.reshape(lead + (1, len(p.xs)) + trail)

    def per_row(w: np.ndarray) -> np.ndarray:
        return w.reshape(lead + (len(p.ys), 1) + trail)

    v = None
    if p.form == "bilinear":
        c = p.products()
        for i in range(k):
            for j in range(k):
                term = c[:, :, i, j].reshape(lead + c.shape[:2] + trail) * tap(i, j)
                v = term if v is None else v + term
    else:
        for i in range(k):
            row = None
            for j in range(k):
                term = per_column(p.wx[:, j]) * tap(i, j)
                row = term if row is None else row + term
            term = (row * per_row(p.wy[:, i])) / per_row(p.y_div)
            v = term if v is None else v + term
    q = np.clip((v / p.out_scale).astype(np.float32), np.float32(p.qmin - p.out_zp), np.float32(p.qmax - p.out_zp))
    return np.rint(q).astype(np.int64) + p.out_zp


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
            require(w.shape == idx.shape and bool(np.all(np.isfinite(w))), f"RESIZE_F32: weights of {name} must be "
                                                                           "finite, one per index")
        if p.form == "bilinear":
            weights = np.concatenate([p.wy.reshape(-1), p.wx.reshape(-1)])
            products = p.products()
            require(bool(np.all((weights >= 0) & (weights <= 1))), "RESIZE_F32: bilinear weights must be in [0, 1]")
            require(bool(np.all((products == 0) | (products >= MIN_WEIGHT_PRODUCT))), "RESIZE_F32: a weight "
                                                                                       "product below 2^-60")
        else:
            magnitudes = np.abs(np.concatenate([p.wy.reshape(-1), p.wx.reshape(-1)]))
            lo, hi = CUBIC_WEIGHT_RANGE
            require(bool(np.all((magnitudes == 0) | ((magnitudes >= lo) & (magnitudes <= hi)))),
                    "RESIZE_F32: a bicubic weight magnitude outside [2^-30, 2^10]")
            require(p.y_div.shape == (len(p.ys),) and bool(np.all((p.y_div >= Y_DIV_RANGE[0]) &
                                                                   (p.y_div <= Y_DIV_RANGE[1]))),
                    "RESIZE_F32: y_div needs one value in [2^-16, 4] per output row")
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
        for key, w in (("wy", p.wy), ("wx", p.wx), ("y_div", p.y_div)):
            m, k = mantissa_exponent(np.abs(w))
            out[f"{key}_m"] = np.where(w.reshape(-1) < 0, -m, m).astype(np.int32)  # the sign on the mantissa
            out[f"{key}_k"] = k.astype(np.int16)
        return out

    def template_context(self, io: StepIO) -> dict:
        p, shape = ResizeF32Params.of(io), io.ins[0].shape
        m, k = mantissa_exponent(np.array([p.in_scale, p.out_scale], np.float32))
        return dict(outer=int(np.prod(shape[:p.axis], dtype=np.int64)), h=shape[p.axis], w=shape[p.axis + 1],
                    inner=int(np.prod(shape[p.axis + 2:], dtype=np.int64)), oh=len(p.ys), ow=len(p.xs),
                    m=[int(v) for v in m], k=[int(v) for v in k], in_zp=p.in_zp, out_zp=p.out_zp,
                    lo=p.qmin - p.out_zp, hi=p.qmax - p.out_zp, taps=_TAPS[p.form], bicubic=p.form == "bicubic",
                    divide=bool(np.any(p.y_div != 1)))
