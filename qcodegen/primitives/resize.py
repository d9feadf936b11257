"""RESIZE (TOSA 1.0) of NHWC integer images, NEAREST or BILINEAR, with TOSA's integer coordinate arithmetic.

attrs: scale [y_n, y_d, x_n, x_d], offset [y, x], border [y, x], mode ("NEAREST" | "BILINEAR").
Types: i8 -> i8 (NEAREST) or i32 (BILINEAR); i16 -> i16 (NEAREST) or i48 (BILINEAR).
For output row oy: y = oy * y_d + offset_y, iy = floor(y / y_n), dy = y - iy * y_n, rows iy0 = max(iy, 0) and
iy1 = min(iy + 1, IH - 1) (likewise columns). BILINEAR: out = v00 (y_n - dy)(x_n - dx) + v01 (y_n - dy) dx +
v10 dy (x_n - dx) + v11 dy dx, exact (the weights sum to y_n * x_n). NEAREST: row iy1 when 2 dy >= y_n, else iy0.
The per-row and per-column coordinates are computed at plan time and emitted as constant tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .geometry import int_list

# (input type, mode) -> output type
_TYPES = {("i8", "NEAREST"): "i8", ("i8", "BILINEAR"): "i32", ("i16", "NEAREST"): "i16", ("i16", "BILINEAR"): "i48"}
_MAX_SIZE = 16384


def _axis(size: int, out: int, n: int, d: int, offset: int) -> dict[str, np.ndarray]:
    """Source positions of each output position along one axis."""
    pos = np.arange(out, dtype=np.int64) * d + offset
    i = pos // n  # floor division
    frac = pos - i * n
    lo, hi = np.maximum(i, 0), np.minimum(i + 1, size - 1)
    return dict(lo=lo, hi=hi, frac=frac, nearest=np.where(2 * frac >= n, hi, lo))


@register
class Resize(Primitive):
    name = "RESIZE"

    @staticmethod
    def params(io: StepIO) -> dict[str, Any]:
        a = io.attrs
        yn, yd, xn, xd = int_list(a, "scale", 4, "RESIZE")
        oy, ox = int_list(a, "offset", 2, "RESIZE")
        by, bx = int_list(a, "border", 2, "RESIZE")
        return dict(yn=yn, yd=yd, xn=xn, xd=xd, oy=oy, ox=ox, by=by, bx=bx, mode=str(a.get("mode", "")).upper())

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        n, ih, iw, c = io.ins[0].shape
        p = self.params(io)
        return [(n, self._extent("height", ih, p["yn"], p["yd"], p["oy"], p["by"]),
                 self._extent("width", iw, p["xn"], p["xd"], p["ox"], p["bx"]), c)]

    @staticmethod
    def _extent(axis: str, size: int, n: int, d: int, offset: int, border: int) -> int:
        span = (size - 1) * n - offset + border
        require(span % d == 0, f"RESIZE: output {axis} is not exact: (({size} - 1) * {n} - {offset} + {border}) is "
                               f"not divisible by {d}")
        return span // d + 1

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1 and len(io.outs) == 1, "RESIZE: needs one input and one output")
        x, y = io.ins[0], io.outs[0]
        require(len(x.shape) == 4, f"RESIZE: input must be NHWC (rank 4), got {list(x.shape)}")
        p = self.params(io)
        require(p["mode"] in ("NEAREST", "BILINEAR"), f"RESIZE: unknown mode {p['mode']!r}")
        out = _TYPES.get((x.dtype.name, p["mode"]))
        require(out is not None, f"RESIZE: input type {x.dtype} is not i8 or i16")
        require(y.dtype.name == out, f"RESIZE: {p['mode']} on {x.dtype} gives {out}, got {y.dtype}")
        for axis in ("y", "x"):
            n, d, offset, border = p[f"{axis}n"], p[f"{axis}d"], p[f"o{axis}"], p[f"b{axis}"]
            require(n > 0 and d > 0, f"RESIZE: scale {axis} {n}/{d} must be positive")
            require(n <= 1 << 11, f"RESIZE: scale_{axis}_n {n} > 2048")
            require(d < 16 * n, f"RESIZE: scale_{axis}_d {d} >= 16 * scale_{axis}_n (downscale below 1/16)")
            require(-n <= offset < 16 * n, f"RESIZE: offset_{axis} {offset} outside [-{n}, {16 * n})")
            require(-16 * n <= border < n, f"RESIZE: border_{axis} {border} outside [{-16 * n}, {n})")
        require(len(y.shape) == 4 and max(*x.shape[1:3], *y.shape[1:3]) < _MAX_SIZE,
                f"RESIZE: image sizes must be below {_MAX_SIZE}")
        super().check(io)

    def _axes(self, io: StepIO) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        p = self.params(io)
        (_, ih, iw, _), (_, oh, ow, _) = io.ins[0].shape, io.outs[0].shape
        return _axis(ih, oh, p["yn"], p["yd"], p["oy"]), _axis(iw, ow, p["xn"], p["xd"], p["ox"])

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        p = self.params(io)
        x = args[0].astype(np.int64)
        ry, rx = self._axes(io)
        if p["mode"] == "NEAREST":
            return [x[:, ry["nearest"]][:, :, rx["nearest"]]]
        dy, dx = ry["frac"][None, :, None, None], rx["frac"][None, None, :, None]

        def at(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
            return x[:, rows][:, :, cols]

        out = (at(ry["lo"], rx["lo"]) * (p["yn"] - dy) * (p["xn"] - dx) + at(ry["lo"], rx["hi"]) * (p["yn"] - dy) * dx
               + at(ry["hi"], rx["lo"]) * dy * (p["xn"] - dx) + at(ry["hi"], rx["hi"]) * dy * dx)
        return [out]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        p = self.params(io)
        lo, hi = in_ranges[0]
        unit = 1 if p["mode"] == "NEAREST" else p["yn"] * p["xn"]  # BILINEAR weights are >= 0 and sum to unit
        return Ranges([(lo * unit, hi * unit)])

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        ry, rx = self._axes(io)
        if self.params(io)["mode"] == "NEAREST":
            return {"rows": ry["nearest"].astype(np.int32), "cols": rx["nearest"].astype(np.int32)}
        return {f"{axis}_{key}": r[key].astype(np.int32) for axis, r in (("y", ry), ("x", rx))
                for key in ("lo", "hi", "frac")}

    def template_context(self, io: StepIO) -> dict[str, Any]:
        p = self.params(io)
        (n, ih, iw, c), (_, oh, ow, _) = io.ins[0].shape, io.outs[0].shape
        return dict(p, n=n, ih=ih, iw=iw, c=c, oh=oh, ow=ow, bilinear=p["mode"] == "BILINEAR",
                    acc_ctype="int32_t" if io.outs[0].dtype.name == "i32" else "int64_t")
