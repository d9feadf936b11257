"""TRANSPOSE_CONV2D (TOSA 1.0 §TRANSPOSE_CONV2D): NHWC input, weights [OC, KH, KW, IC], bias [OC] or [1].

attrs: out_pad [top, bottom, left, right] (each > -kernel; negative values crop), stride [sy, sx],
input_zp, weight_zp, acc_type ("i32" for i8 input, "i48" for i16). Output [N, OH, OW, OC] with
OH = (IH - 1) * sy + top + bottom + KH (likewise OW).
acc[n, oy, ox, oc] = bias[oc] + sum of (x[n, iy, ix, ic] - input_zp) * (w[oc, ky, kx, ic] - weight_zp) over the
taps with oy = iy * sy + top + ky and ox = ix * sx + left + kx."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .conv2d import ConvBase, check_operand_types
from .geometry import (
    acc_bits,
    accumulator_check,
    accumulator_context,
    accumulator_ranges,
    int_list,
    operand_interval,
    required_accumulator,
)


@dataclass(frozen=True)
class TransposeGeometry:
    """Input [n, ih, iw, ic], weights [oc, kh, kw, ic], out_pad top, bottom, left, right, stride sy, sx and the
    output size oh, ow."""

    n: int
    ih: int
    iw: int
    ic: int
    oc: int
    kh: int
    kw: int
    top: int
    bottom: int
    left: int
    right: int
    sy: int
    sx: int

    @property
    def oh(self) -> int:
        return (self.ih - 1) * self.sy + self.top + self.bottom + self.kh

    @property
    def ow(self) -> int:
        return (self.iw - 1) * self.sx + self.left + self.right + self.kw


@register
class TransposeConv2D(Primitive):
    name = "TRANSPOSE_CONV2D"

    @staticmethod
    def geometry(io: StepIO) -> TransposeGeometry:
        n, ih, iw, ic = io.ins[0].shape
        oc, kh, kw, _ = io.ins[1].shape
        top, bottom, left, right = int_list(io.attrs, "out_pad", 4, "TRANSPOSE_CONV2D")
        sy, sx = int_list(io.attrs, "stride", 2, "TRANSPOSE_CONV2D")
        return TransposeGeometry(n, ih, iw, ic, oc, kh, kw, top, bottom, left, right, sy, sx)

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        g = self.geometry(io)
        return [(g.n, g.oh, g.ow, g.oc)]

    def check(self, io: StepIO) -> None:
        op = self.name
        p = ConvBase.params(io)
        x, w, b = check_operand_types(io, op, p.acc_type)
        g = self.geometry(io)
        require(x.shape[3] == w.shape[3], f"{op}: input has {x.shape[3]} channels, the weights "
                                          f"{list(w.shape)} expect {w.shape[3]}")
        require(len(b.shape) == 1 and b.shape[0] in (1, g.oc),
                f"{op}: bias shape {list(b.shape)} must be [{g.oc}] or [1]")
        require(min(g.sy, g.sx) >= 1, f"{op}: stride [{g.sy}, {g.sx}] must be >= 1")
        for side, pad, k in (("top", g.top, g.kh), ("bottom", g.bottom, g.kh), ("left", g.left, g.kw),
                             ("right", g.right, g.kw)):
            require(pad > -k, f"{op}: out_pad {side} {pad} must be greater than -{k} (kernel)")
        for which, zp, dt in (("input", p.izp, x.dtype), ("weight", p.wzp, w.dtype)):
            if dt.name == "i8":
                require(dt.min <= zp <= dt.max, f"{op}: {which} zero point {zp} is outside i8")
            else:
                require(zp == 0, f"{op}: {which} zero point must be 0 for {dt} {which}s, got {zp}")
        require(g.oh >= 1 and g.ow >= 1, f"{op}: output size {g.oh}x{g.ow} is empty")
        super().check(io)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        g, p = self.geometry(io), ConvBase.params(io)
        x = args[0].astype(np.int64) - p.izp
        w = args[1].astype(np.int64) - p.wzp
        fh, fw = (g.ih - 1) * g.sy + g.kh, (g.iw - 1) * g.sx + g.kw
        full = np.zeros((g.n, fh, fw, g.oc), np.int64)  # before out_pad: row iy * sy + ky
        for ky in range(g.kh):
            for kx in range(g.kw):
                full[:, ky:ky + fh - g.kh + 1:g.sy, kx:kx + fw - g.kw + 1:g.sx, :] += np.tensordot(
                    x, w[:, ky, kx, :], axes=([3], [1]))
        out = np.zeros((g.n, g.oh, g.ow, g.oc), np.int64)
        rows = np.arange(fh) + g.top
        cols = np.arange(fw) + g.left
        keep_r = (rows >= 0) & (rows < g.oh)
        keep_c = (cols >= 0) & (cols < g.ow)
        out[:, rows[keep_r][:, None], cols[keep_c][None, :], :] = full[:, keep_r][:, :, keep_c]
        return [required_accumulator(self.name, out, args[2].astype(np.int64), acc_bits(p.acc_type))]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        """The union over the stride phases (oy - top) mod sy, (ox - left) mod sx: an output pixel sums a subset
        of the taps ky, kx of its phase (border pixels fewer; some pixels only the bias), so the input interval
        is widened to include 0 (an absent tap)."""
        g, p = self.geometry(io), ConvBase.params(io)
        lo, hi = in_ranges[0][0] - p.izp, in_ranges[0][1] - p.izp
        w_lo, w_hi = operand_interval(io.ins[1], in_ranges[1])
        bias = operand_interval(io.ins[2], in_ranges[2])
        where = self.name + (f" ({io.step.source})" if io.step.source else "")
        bits = acc_bits(p.acc_type)
        bounds, overflows = [], []
        for ry in range(min(g.sy, g.kh)):
            for rx in range(min(g.sx, g.kw)):
                taps = tuple(t[:, ry::g.sy, rx::g.sx, :].reshape(g.oc, -1) - p.wzp for t in (w_lo, w_hi))
                bound, overflow = accumulator_check(where, taps, (min(lo, 0), max(hi, 0)), bias, bits)
                bounds.append(bound)
                overflows += [overflow] if overflow else []
        acc = (min(a for a, _ in bounds), max(z for _, z in bounds))
        return accumulator_ranges(acc, overflows[0] if overflows else None, bits)

    def macs(self, io: StepIO) -> int:
        g = self.geometry(io)
        return g.n * g.ih * g.iw * g.kh * g.kw * g.ic * g.oc

    def template_context(self, io: StepIO) -> dict[str, Any]:
        p = ConvBase.params(io)
        return dict(p.context(), geom=self.geometry(io), **accumulator_context(io, p.acc_type),
                    bias_per_channel=io.ins[2].shape[0] > 1)
