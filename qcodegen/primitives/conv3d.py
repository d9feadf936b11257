"""CONV3D (TOSA 1.0 §CONV3D): NDHWC input [N, ID, IH, IW, IC], weights [OC, KD, KH, KW, IC], bias [OC] or [1].

attrs: pad [d0, d1, top, bottom, left, right], stride [sd, sy, sx], dilation [dd, dy, dx], input_zp, weight_zp,
acc_type ("i32" for i8 input, "i48" for i16). Output [N, OD, OH, OW, OC] of the accumulator type:
acc = bias[oc] + sum over the in-bounds taps (kd, ky, kx, ic) of (x - input_zp) * (w - weight_zp)
(out-of-bounds taps contribute nothing), each output extent O = (I - 1 + pads - (K - 1) * dilation) / stride + 1,
which must divide exactly (idiv_check). TOSA REQUIRE: the accumulator never leaves its type (the reference checks
the tap sum and the biased sum on the data; range analysis bounds every partial sum for the declared ranges).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .conv2d import ConvBase
from .geometry import (
    _output_extent,
    acc_bits,
    accumulator_check,
    accumulator_context,
    accumulator_ranges,
    int_list,
    operand_interval,
    required_accumulator,
)

_TYPES = {("i8", "i8"): "i32", ("i8", "i4"): "i32", ("i16", "i8"): "i48"}
_AXES = ("depth", "height", "width")


@dataclass(frozen=True)
class Conv3DGeometry:
    """Input [n, *size, ic] (size: depth, height, width), weights [oc, *kernel, ic], pad [front, back, top, bottom,
    left, right], stride and dilation (depth, height, width)."""

    n: int
    size: tuple[int, int, int]
    ic: int
    oc: int
    kernel: tuple[int, int, int]
    pad: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]


@register
class Conv3D(Primitive):
    name = "CONV3D"

    @staticmethod
    def geometry(io: StepIO) -> Conv3DGeometry:
        n, *size, ic = io.ins[0].shape
        oc, *kernel, _ = io.ins[1].shape
        return Conv3DGeometry(n, (size[0], size[1], size[2]), ic, oc, (kernel[0], kernel[1], kernel[2]),
                              int_list(io.attrs, "pad", 6, "CONV3D"), int_list(io.attrs, "stride", 3, "CONV3D"),
                              int_list(io.attrs, "dilation", 3, "CONV3D"))

    def out_size(self, io: StepIO) -> tuple[int, ...]:
        g = self.geometry(io)
        require(min(g.pad) >= 0, f"CONV3D: pad {list(g.pad)} must be >= 0")
        require(min(g.stride) >= 1, f"CONV3D: stride {list(g.stride)} must be >= 1")
        require(min(g.dilation) >= 1, f"CONV3D: dilation {list(g.dilation)} must be >= 1")
        return tuple(_output_extent("CONV3D", _AXES[k], g.size[k], g.kernel[k], g.stride[k],
                                    g.dilation[k], g.pad[2 * k], g.pad[2 * k + 1]) for k in range(3))

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        g = self.geometry(io)
        return [(g.n, *self.out_size(io), g.oc)]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 3 and len(io.outs) == 1, "CONV3D: needs inputs (x, weights, bias) and one output")
        x, w, b = io.ins
        require(len(x.shape) == 5 and len(w.shape) == 5, f"CONV3D: input and weights must be rank 5, got "
                                                         f"{list(x.shape)} and {list(w.shape)}")
        acc = _TYPES.get((x.dtype.name, w.dtype.name))
        require(acc is not None, f"CONV3D: unsupported input x weight types {x.dtype} x {w.dtype} "
                                 f"(supported: i8 x i8, i8 x i4, i16 x i8)")
        p = ConvBase.params(io)
        require(p.acc_type == acc, f"CONV3D: acc_type must be {acc} for {x.dtype} x {w.dtype}, "
                                      f"got {p.acc_type}")
        require(io.outs[0].dtype.name == acc and b.dtype.name == acc,
                f"CONV3D: output and bias types must be {acc}, got {io.outs[0].dtype} and {b.dtype}")
        require(x.shape[4] == w.shape[4], f"CONV3D: input has {x.shape[4]} channels, the weights "
                                          f"{list(w.shape)} expect {w.shape[4]}")
        require(len(b.shape) == 1 and b.shape[0] in (1, w.shape[0]),
                f"CONV3D: bias shape {list(b.shape)} must be [{w.shape[0]}] or [1]")
        for which, zp, dt in (("input", p.izp, x.dtype), ("weight", p.wzp, w.dtype)):
            if dt.name == "i8":
                require(dt.min <= zp <= dt.max, f"CONV3D: {which} zero point {zp} is outside i8")
            else:
                require(zp == 0, f"CONV3D: {which} zero point must be 0 for {dt} {which}s, got {zp}")
        super().check(io)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        g, p = self.geometry(io), ConvBase.params(io)
        pad = g.pad
        xp = np.pad(args[0].astype(np.int64) - p.izp, ((0, 0), (pad[0], pad[1]), (pad[2], pad[3]),
                                                          (pad[4], pad[5]), (0, 0)))  # padding taps add 0
        index = [np.arange(o)[:, None] * s + np.arange(k)[None, :] * d
                 for o, s, k, d in zip(self.out_size(io), g.stride, g.kernel, g.dilation, strict=True)]
        taps = xp[:, index[0][:, None, None, :, None, None], index[1][None, :, None, None, :, None],
                  index[2][None, None, :, None, None, :], :]  # [N, OD, OH, OW, KD, KH, KW, IC]
        w = args[1].astype(np.int64) - p.wzp
        acc = np.tensordot(taps, w, axes=([4, 5, 6, 7], [1, 2, 3, 4]))
        return [required_accumulator(self.name, acc, args[2].astype(np.int64), acc_bits(p.acc_type))]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        """Border outputs sum fewer taps: the input interval is widened to include 0 (an absent tap)."""
        p = ConvBase.params(io)
        lo, hi = in_ranges[0][0] - p.izp, in_ranges[0][1] - p.izp
        w_lo, w_hi = operand_interval(io.ins[1], in_ranges[1])
        oc = io.ins[1].shape[0]
        taps = (w_lo.reshape(oc, -1) - p.wzp, w_hi.reshape(oc, -1) - p.wzp)
        where = self.name + (f" ({io.step.source})" if io.step.source else "")
        bits = acc_bits(p.acc_type)
        acc, overflow = accumulator_check(where, taps, (min(lo, 0), max(hi, 0)),
                                          operand_interval(io.ins[2], in_ranges[2]), bits)
        return accumulator_ranges(acc, overflow, bits)

    def macs(self, io: StepIO) -> int:
        return int(np.prod(io.outs[0].shape, dtype=np.int64)) * int(np.prod(io.ins[1].shape[1:], dtype=np.int64))

    def template_context(self, io: StepIO) -> dict[str, Any]:
        g, p = self.geometry(io), ConvBase.params(io)
        (kd, kh, kw), (sd, sy, sx), (dd, dy, dx) = g.kernel, g.stride, g.dilation
        (idp, ih, iw), (od, oh, ow) = g.size, self.out_size(io)
        return dict(p.context(), n=g.n, id=idp, ih=ih, iw=iw, ic=g.ic, oc=g.oc, kd=kd, kh=kh, kw=kw, sd=sd,
                    sy=sy, sx=sx, dd=dd, dy=dy, dx=dx, od=od, oh=oh, ow=ow, pd=g.pad[0], pt=g.pad[2],
                    pl=g.pad[4], **accumulator_context(io, p.acc_type), bias_per_channel=io.ins[2].shape[0] > 1)
