"""BLOCK_CONV2D: a 2-D convolution with sub-channel (blockwise) weights, requantized once (docs/schemes.md).

Inputs: x [N, IH, IW, C] i8 (NHWC), w [O, KH, KW, C] i8 or i4 (OHWI), ratio [B, O] (one integer per input-channel
block b and output channel oc; block size BS = C / B). attrs: pad [top, bottom, left, right], stride, dilation (TOSA
window geometry, Window), input_zp, weight_zp. Padding taps read input_zp (they contribute 0, as in TOSA CONV2D).
The ratio's type selects the width of the ratio-weighted sum `total`:
- i16 ratios: `total` is int32 and the step requantizes it, a RESCALE of the i32 sum per output channel (attrs
  multiplier [O], shift [O] (32-bit), output_zp, rounding (as RESCALE), out_min / out_max). Output i8, i16 or i32.
- i32 ratios (the wide form): `total` is int64 and is the output, i48; a following step
  requantizes it (e.g. RESCALE_F32 of an i48 input).

Per output pixel p and channel oc, in this order (value_ranges proves that no value overflows its type):
    total = 0
    for b:  acc = sum over the taps (ky, kx, ic), ic in [b*BS, (b+1)*BS), of (x - input_zp) * (w[oc] - weight_zp)
            total = total + acc * ratio[b, oc]        (acc int32; total int32, or int64 in the wide form)
    out[p, oc] = clamp(apply_scale_32(total, multiplier[oc], shift[oc]) + output_zp, out_min, out_max)   (i16)
    out[p, oc] = total                                                                                   (i32)
The lowerings (qcodegen/lower/stablehlo/blockwise.py) choose the ratios: block b's unit s_x * s_w[b, oc] is
ratio[b, oc] units of a common per-channel scale c[oc] (up to the ratio's rounding)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import PlanError
from ..ir.dtypes import dtype
from ..ir.schedule import Buffer, Step, StepIO
from .base import Primitive, Ranges, get, register, require
from .fused import requantization
from .geometry import Window, accumulator_bounds, operand_interval

PATCH_LIMIT = 2048  # int16 elements of the per-pixel window buffer (4 KiB of stack); larger windows: read in place
RESCALE_KEYS = ("multiplier", "shift", "output_zp", "rounding", "out_min", "out_max")


@register
class BlockConv2D(Primitive):
    name = "BLOCK_CONV2D"

    @staticmethod
    def window(io: StepIO) -> Window:
        return Window.of_ohwi("BLOCK_CONV2D", io)

    @staticmethod
    def zero_points(io: StepIO) -> tuple[int, int]:
        return int(io.attrs.get("input_zp", 0)), int(io.attrs.get("weight_zp", 0))

    @staticmethod
    def blocks(io: StepIO) -> int:
        return io.ins[2].shape[0]

    @staticmethod
    def wide(io: StepIO) -> bool:
        """i32 ratios: an int64 ratio-weighted sum, output as it is (i48)."""
        return io.ins[2].dtype.name == "i32"

    def rescale_io(self, io: StepIO) -> StepIO:
        """The output requantization as a RESCALE step of the i32 sums [N, OH, OW, O] (per channel, last axis)."""
        attrs = {k: io.attrs[k] for k in RESCALE_KEYS if k in io.attrs}
        attrs.update(input_zp=0, scale32=True, per_channel=True, axis=3)
        total = Buffer("total", tuple(io.outs[0].shape), dtype("i32"))
        return StepIO(Step("RESCALE", ["total"], ["out0"], attrs, io.step.source), [total], [io.outs[0]])

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        oh, ow = self.window(io).out_hw
        return [(io.ins[0].shape[0], oh, ow, io.ins[1].shape[0])]

    def check(self, io: StepIO) -> None:
        op = self.name
        require(len(io.ins) == 3 and len(io.outs) == 1, f"{op}: needs inputs (x, weights, ratio) and one output")
        x, w, r = io.ins
        require(len(x.shape) == 4 and len(w.shape) == 4, f"{op}: input and weights must be rank 4, got "
                                                         f"{list(x.shape)} and {list(w.shape)}")
        require(x.dtype.name == "i8" and w.dtype.name in ("i8", "i4"),
                f"{op}: input must be i8 and weights i8 or i4, got {x.dtype} x {w.dtype}")
        require(x.shape[3] == w.shape[3], f"{op}: input has {x.shape[3]} channels, the weights {list(w.shape)} "
                                          f"expect {w.shape[3]}")
        require(r.dtype.name in ("i16", "i32") and len(r.shape) == 2 and r.shape[1] == w.shape[0]
                and r.shape[0] >= 1 and w.shape[3] % r.shape[0] == 0,
                f"{op}: ratio must be i16 or i32 [blocks, {w.shape[0]}] with blocks dividing {w.shape[3]}, got "
                f"{r.dtype} {list(r.shape)}")
        outs = ("i48",) if self.wide(io) else ("i8", "i16", "i32")
        require(io.outs[0].dtype.name in outs, f"{op}: with {r.dtype} ratios the output must be "
                                               f"{' or '.join(outs)}, got {io.outs[0].dtype}")
        izp, wzp = self.zero_points(io)
        require(x.dtype.min <= izp <= x.dtype.max, f"{op}: input zero point {izp} is outside {x.dtype}")
        require(w.dtype.min <= wzp <= w.dtype.max, f"{op}: weight zero point {wzp} is outside {w.dtype}")
        super().check(io)
        if not self.wide(io):
            get("RESCALE").check(self.rescale_io(io))

    def _terms(self, io: StepIO, w: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(w - weight_zp) [O, T, C] and the ratio of each weight's block, [O, 1, C] (int64)."""
        o, kh, kw, c = w.shape
        ratio = np.repeat(np.asarray(r, np.int64).T, c // r.shape[0], axis=1)
        return w.astype(np.int64).reshape(o, kh * kw, c) - self.zero_points(io)[1], ratio[:, None, :]

    def totals(self, io: StepIO, x: np.ndarray, w: np.ndarray, r: np.ndarray) -> np.ndarray:
        """The int32 sums [N, OH, OW, O] before requantization (computed in int64)."""
        izp = self.zero_points(io)[0]
        taps = self.window(io).patches(x, izp) - izp  # [N, OH, OW, KH, KW, C]
        n, oh, ow, kh, kw, c = taps.shape
        wd, ratio = self._terms(io, w, r)
        blocks = r.shape[0]
        xb = taps.reshape(n, oh, ow, kh * kw, blocks, c // blocks)
        wb = wd.reshape(wd.shape[0], kh * kw, blocks, c // blocks)
        acc = np.einsum("nhwtbk,otbk->nhwbo", xb, wb)  # one partial sum per block, int64: exact
        return np.einsum("nhwbo,bo->nhwo", acc, np.asarray(r, np.int64))

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        if self.wide(io):
            return [self.totals(io, *args)]
        return get("RESCALE").reference(self.rescale_io(io), [self.totals(io, *args)])

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        """Every block sum and every prefix of `total` (acc * ratio included) is a sum of a subset of the terms
        (x - input_zp) * (w - weight_zp) * ratio, resp. of the terms without the ratio: accumulator_bounds over the
        whole window bounds them all (sum of the largest |term|s) and raises PlanError beyond int32 (the block sums) and
        beyond int32, or 48 bits in the wide form (the ratio-weighted sum)."""
        izp, wzp = self.zero_points(io)
        lo, hi = in_ranges[0]
        if self.window(io).reads_padding:
            lo, hi = min(lo, izp), max(hi, izp)
        w_lo, w_hi = operand_interval(io.ins[1], in_ranges[1])
        r_lo, r_hi = operand_interval(io.ins[2], in_ranges[2])
        (d_lo, ra_lo), (d_hi, ra_hi) = self._terms(io, w_lo, r_lo), self._terms(io, w_hi, r_hi)
        o = d_lo.shape[0]
        where = self.name + (f" ({io.step.source})" if io.step.source else "")
        x = (lo - izp, hi - izp)
        zero = (np.zeros(1, np.int64), np.zeros(1, np.int64))
        accumulator_bounds(where + " block sum", (d_lo.reshape(o, -1), d_hi.reshape(o, -1)), x, zero, 32)
        corners = np.stack([d_lo * ra_lo, d_lo * ra_hi, d_hi * ra_lo, d_hi * ra_hi])
        scaled = (corners.min(axis=0).reshape(o, -1), corners.max(axis=0).reshape(o, -1))
        wide = self.wide(io)
        total = accumulator_bounds(where + " ratio-weighted sum", scaled, x, zero, 48 if wide else 32)
        if wide:
            return Ranges([total], acc=total)
        try:
            out = get("RESCALE").value_ranges(self.rescale_io(io), [total]).outputs
        except PlanError as exc:
            raise PlanError(f"{where}: output requantization: {exc}") from None
        return Ranges(out, acc=total)

    def macs(self, io: StepIO) -> int:
        """Multiply-accumulates of the full window (padding taps included), plus one per block and output."""
        per_out = self.window(io).taps * io.ins[0].shape[3] + self.blocks(io)
        return int(np.prod(io.outs[0].shape, dtype=np.int64)) * per_out

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        return {} if self.wide(io) else get("RESCALE").constants(self.rescale_io(io))

    def template_context(self, io: StepIO) -> dict[str, Any]:
        win = self.window(io)
        blocks, c = self.blocks(io), io.ins[0].shape[3]
        izp, wzp = self.zero_points(io)
        return dict(win=win.loops(), oc=io.ins[1].shape[0], k=win.taps * c, taps=win.taps, blocks=blocks,
                    bs=c // blocks, patch_limit=PATCH_LIMIT, izp=izp, wzp=wzp,
                    rq=None if self.wide(io) else requantization(self.rescale_io(io)))
