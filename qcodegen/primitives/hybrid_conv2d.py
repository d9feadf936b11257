"""HYBRID_CONV2D: a float32 NHWC convolution with quantized constant weights (StableHLO "hybrid" dot_general /
convolution: op(lhs, dequantize(rhs))), the weights kept as i8 / i4 storage integers in flash.

Inputs: x [N, IH, IW, C] f32, w [O, KH, KW, C] i8 or i4 (OHWI, as CONV2D). attrs: pad [top, bottom, left, right],
stride [2], dilation [2] (TOSA geometry, Window), scale [B, O] (float32 per input-channel block b and output channel
oc; B = 1 for per-tensor / per-axis weights, block size BS = C / B), zero_point (int, or [B, O]), mode
"weight-only" (default) or "dynamic-range". A dot_general is the 1x1 case. Output [N, OH, OW, O] f32.

Every float operation below is one IEEE binary32 operation, in this order, in the C (built with -ffp-contract=off)
and in the numpy reference (float32 arrays vectorised over pixels and channels, looping over the reduction index);
taps in the padding read 0.0. The reduction order of block b is (ky, kx, ic) row-major, ic in [b*BS, (b+1)*BS).

weight-only, per output pixel p and channel oc:
    y = 0.0f
    for b:  a = 0.0f;  for each tap i of block b:  a = a + x[i] * (float)(w[oc, i] - zp[b, oc])
            y = y + a * scale[b, oc]
dynamic-range (TFLite's per-row symmetric scheme; the "row" is the output pixel's window of KH*KW*C values):
    r = max |x[i]| over the window;  sx = r / 127.0f;  inv = r > 0 ? 127.0f / r : 0.0f
    q[i] = clamp(round_half_away(x[i] * inv), -127, 127)
    y = 0.0f
    for b:  acc = sum over block b of q[i] * (w[oc, i] - zp[b, oc])   (exact int32: value_ranges proves it)
            y = y + (float)acc * (sx * scale[b, oc])
Inputs must be finite (NaN / infinity: unspecified). The error of both modes against the float definition is
bounded in qcodegen/verify/hybrid_accuracy.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..fixedpoint import round_half_away
from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .geometry import Window, accumulator_bounds, operand_interval

MODES = ("weight-only", "dynamic-range")
PATCH_LIMIT = 4096  # elements of the per-pixel stack buffers (float window, int8 quantized window)
Q_MAX = 127



def quantize_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dynamic-range quantization of float32 rows [P, K]: (q [P, K] int64 in [-127, 127], scale [P] float32)."""
    r = np.max(np.abs(rows), axis=1, initial=np.float32(0))
    with np.errstate(divide="ignore"):
        inv = np.where(r > 0, np.float32(Q_MAX) / r, np.float32(0)).astype(np.float32)
    q = np.clip(round_half_away(rows * inv[:, None]), -Q_MAX, Q_MAX)
    return q, (r / np.float32(Q_MAX)).astype(np.float32)


@register
class HybridConv2D(Primitive):
    name = "HYBRID_CONV2D"

    @staticmethod
    def window(io: StepIO) -> Window:
        return Window.of_ohwi("HYBRID_CONV2D", io)

    @staticmethod
    def scales(io: StepIO) -> np.ndarray:
        """[B, O] float32."""
        with np.errstate(over="ignore"):  # beyond float32: inf, which the scale checks refuse
            return np.asarray(io.attrs["scale"], np.float64).astype(np.float32)

    def zero_points(self, io: StepIO) -> np.ndarray:
        """[B, O] int64."""
        return np.broadcast_to(np.asarray(io.attrs.get("zero_point", 0), np.int64), self.scales(io).shape)

    @staticmethod
    def mode(io: StepIO) -> str:
        return str(io.attrs.get("mode", "weight-only"))

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        oh, ow = self.window(io).out_hw
        return [(io.ins[0].shape[0], oh, ow, io.ins[1].shape[0])]

    def check(self, io: StepIO) -> None:
        op = self.name
        require(len(io.ins) == 2 and len(io.outs) == 1, f"{op}: needs inputs (x, weights) and one output")
        x, w = io.ins
        require(x.dtype.name == "f32" and io.outs[0].dtype.name == "f32",
                f"{op}: input and output must be f32, got {x.dtype} -> {io.outs[0].dtype}")
        require(w.dtype.name in ("i8", "i4"), f"{op}: weights must be i8 or i4, got {w.dtype}")
        require(len(x.shape) == 4 and len(w.shape) == 4, f"{op}: input and weights must be rank 4, got "
                                                         f"{list(x.shape)} and {list(w.shape)}")
        require(x.shape[3] == w.shape[3], f"{op}: input has {x.shape[3]} channels, the weights {list(w.shape)} "
                                          f"expect {w.shape[3]}")
        require(self.mode(io) in MODES, f"{op}: mode must be one of {list(MODES)}, got {self.mode(io)!r}")
        scale = self.scales(io)
        require(scale.ndim == 2 and scale.shape[1] == w.shape[0] and scale.shape[0] >= 1
                and w.shape[3] % scale.shape[0] == 0,
                f"{op}: scale must be [blocks, {w.shape[0]}] with blocks dividing {w.shape[3]}, got "
                f"{list(scale.shape)}")
        require(bool(np.all(np.isfinite(scale) & (scale > 0))), f"{op}: every scale must be finite and > 0 in f32")
        zp = np.asarray(io.attrs.get("zero_point", 0))
        require(zp.ndim == 0 or zp.shape == scale.shape, f"{op}: zero_point must be a number or shaped like scale")
        require(bool(np.all((zp >= w.dtype.min) & (zp <= w.dtype.max))), f"{op}: zero point outside {w.dtype}")
        require(self._direct(io) or self.window(io).taps * x.shape[3] <= PATCH_LIMIT,
                f"{op}: a window of {self.window(io).taps * x.shape[3]} values exceeds the {PATCH_LIMIT}-element "
                "patch buffer")
        super().check(io)

    def _direct(self, io: StepIO) -> bool:
        """An unpadded 1x1 window: the kernel reads each pixel's channels in place."""
        win = self.window(io)
        return win.kernel == (1, 1) and not win.reads_padding

    def rows(self, io: StepIO, x: np.ndarray) -> np.ndarray:
        """[P, T, C] float32: each output pixel's window (T = KH * KW taps), 0.0 for padding taps."""
        n, h, w, c = x.shape
        pixel = self.window(io).patches(np.arange(n * h * w).reshape(n, h, w, 1), -1)[..., 0]
        table = np.concatenate([x.astype(np.float32).reshape(-1, c), np.zeros((1, c), np.float32)])
        return table[pixel.reshape(pixel.shape[0] * pixel.shape[1] * pixel.shape[2], -1)]

    def centred(self, io: StepIO, w: np.ndarray) -> np.ndarray:
        """[O, T, C] int64 weights minus their block's zero point."""
        o, kh, kw, c = w.shape
        zp = np.repeat(self.zero_points(io).T, c // self.scales(io).shape[0], axis=1)  # [O, C]
        return w.astype(np.int64).reshape(o, kh * kw, c) - zp[:, None, :]

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        rows, wd = self.rows(io, args[0]), self.centred(io, args[1])
        scale = self.scales(io)
        blocks, bs = scale.shape[0], wd.shape[2] // scale.shape[0]
        y = np.zeros((rows.shape[0], wd.shape[0]), np.float32)
        if self.mode(io) == "weight-only":
            wf = wd.astype(np.float32)
            for b in range(blocks):
                a = np.zeros_like(y)
                for t in range(wd.shape[1]):
                    for ic in range(b * bs, (b + 1) * bs):
                        a = a + rows[:, t, ic][:, None] * wf[None, :, t, ic]
                y = y + a * scale[b][None, :]
        else:
            q, sx = quantize_rows(rows.reshape(rows.shape[0], -1))
            q = q.reshape(rows.shape)
            for b in range(blocks):
                part = slice(b * bs, (b + 1) * bs)
                acc = np.einsum("ptc,otc->po", q[:, :, part], wd[:, :, part])  # int64: exact in any order
                y = y + acc.astype(np.float32) * (sx[:, None] * scale[b][None, :])
        return [y.reshape(self.infer_shapes(io)[0])]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        if self.mode(io) == "weight-only":
            return Ranges([(0, 0)])  # float output: not tracked
        w = io.ins[1]
        w_lo, w_hi = operand_interval(w, in_ranges[1])
        o, c, blocks = w.shape[0], w.shape[3], self.scales(io).shape[0]
        zp = np.repeat(self.zero_points(io).T, c // blocks, axis=1)[:, None, :]
        where = self.name + (f" ({io.step.source})" if io.step.source else "")
        lo, hi = 0, 0
        for part in np.split(np.arange(c), blocks):  # one int32 accumulator per block
            taps = [(v.reshape(o, -1, c) - zp)[:, :, part].reshape(o, -1) for v in (w_lo, w_hi)]
            b_lo, b_hi = accumulator_bounds(where, (taps[0], taps[1]), (-Q_MAX, Q_MAX),
                                            (np.zeros(1), np.zeros(1)), 32)
            lo, hi = min(lo, b_lo), max(hi, b_hi)
        return Ranges([(0, 0)], acc=(lo, hi))

    def macs(self, io: StepIO) -> int:
        return int(np.prod(io.outs[0].shape, dtype=np.int64)) * self.window(io).taps * io.ins[0].shape[3]

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        out = {"scale": self.scales(io).reshape(-1)}
        if np.any(self.zero_points(io)):
            out["zero_point"] = self.zero_points(io).reshape(-1).astype(np.int8)
        return out

    def template_context(self, io: StepIO) -> dict[str, Any]:
        win = self.window(io)
        blocks = self.scales(io).shape[0]
        c = io.ins[0].shape[3]
        return dict(win=win.loops(), oc=io.ins[1].shape[0], k=win.taps * c, taps=win.taps, blocks=blocks,
                    bs=c // blocks, direct=self._direct(io), dynamic=self.mode(io) == "dynamic-range",
                    has_zp=bool(np.any(self.zero_points(io))))
