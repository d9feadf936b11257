"""CONV2D (TOSA 1.0 §CONV2D): NHWC input, OHWI weights, per-channel or broadcast bias, int32/int48 accumulator.

Extension: attribute `pad_value` (default input_zp) is the value an out-of-bounds tap reads. TOSA is
pad_value == input_zp (padding contributes 0); another value lets the planner fold input_zp into the bias
(input_zp = 0, pad_value = z, bias' = bias - z * sum(w) equals TOSA with input_zp = z)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .geometry import (
    Window,
    acc_bits,
    accumulator_check,
    accumulator_context,
    accumulator_ranges,
    operand_interval,
    required_accumulator,
)

# (input, weight) -> accumulator = output = bias type (TOSA 1.0 supported data types)
_TYPES = {("i8", "i8"): "i32", ("i8", "i4"): "i32", ("i16", "i8"): "i48"}



def check_operand_types(io: StepIO, op: str, acc_type: str) -> tuple:
    """The ERROR_IFs every 2-D convolution shares: (x, weights, bias) of rank 4, a supported type pair, and
    acc_type, output and bias types matching it. Returns the three input buffers."""
    require(len(io.ins) == 3 and len(io.outs) == 1, f"{op}: needs inputs (x, weights, bias) and one output")
    x, w, b = io.ins
    require(len(x.shape) == 4 and len(w.shape) == 4, f"{op}: input and weights must be rank 4, got "
                                                     f"{list(x.shape)} and {list(w.shape)}")
    acc = _TYPES.get((x.dtype.name, w.dtype.name))
    require(acc is not None, f"{op}: unsupported input x weight types {x.dtype} x {w.dtype} "
                             f"(supported: i8 x i8, i8 x i4, i16 x i8)")
    require(acc_type == acc, f"{op}: acc_type must be {acc} for {x.dtype} x {w.dtype}, got {acc_type}")
    require(io.outs[0].dtype.name == acc, f"{op}: output type must be {acc}, got {io.outs[0].dtype}")
    require(b.dtype.name == acc, f"{op}: bias type must be {acc}, got {b.dtype}")
    return x, w, b

@dataclass(frozen=True)
class ConvParams:
    """The scalar parameters of a convolution step (CONV2D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, CONV3D): input and
    weight zero points, the value padding taps read (TOSA: the input zero point) and the accumulator type."""

    izp: int
    wzp: int
    pad_value: int
    acc_type: str

    def context(self) -> dict[str, Any]:
        """The template context keys (ctx.izp, ctx.wzp, ctx.pad_value, ctx.acc_type)."""
        return dataclasses.asdict(self)


class ConvBase(Primitive):
    """What CONV2D and DEPTHWISE_CONV2D share: attributes, type rules, ranges, template context.
    Inputs: x [N, IH, IW, IC], weights, bias [OC] or [1]. attrs: pad, stride, dilation, input_zp,
    weight_zp, pad_value (optional), acc_type ("i32" or "i48")."""

    def kernel_hw(self, w_shape: tuple[int, ...]) -> tuple[int, int]:
        raise NotImplementedError

    def out_channels(self, io: StepIO) -> int:
        raise NotImplementedError

    def weight_taps(self, w: np.ndarray) -> np.ndarray:
        """Weights as [OC, taps] (any tap order; used for accumulator bounds)."""
        raise NotImplementedError

    def expected_in_channels(self, w_shape: tuple[int, ...]) -> int:
        raise NotImplementedError

    def window(self, io: StepIO) -> Window:
        return Window.from_attrs(self.name, io.ins[0], self.kernel_hw(io.ins[1].shape), io.attrs)

    @staticmethod
    def params(io: StepIO) -> ConvParams:
        a = io.attrs
        izp = int(a.get("input_zp", 0))
        natural = _TYPES.get((io.ins[0].dtype.name, io.ins[1].dtype.name), "i32")
        return ConvParams(izp, int(a.get("weight_zp", 0)), int(a.get("pad_value", izp)),
                          str(a.get("acc_type", natural)).lower())

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        oh, ow = self.window(io).out_hw
        return [(io.ins[0].shape[0], oh, ow, self.out_channels(io))]

    def check(self, io: StepIO) -> None:
        op = self.name
        p = self.params(io)
        x, w, b = check_operand_types(io, op, p.acc_type)
        require(x.shape[3] == self.expected_in_channels(w.shape),
                f"{op}: input has {x.shape[3]} channels, the weights {list(w.shape)} expect "
                f"{self.expected_in_channels(w.shape)}")
        oc = self.out_channels(io)
        require(len(b.shape) == 1 and b.shape[0] in (1, oc), f"{op}: bias shape {list(b.shape)} must be "
                                                            f"[{oc}] or [1]")
        for which, zp, dt in (("input", p.izp, x.dtype), ("weight", p.wzp, w.dtype)):
            if dt.name == "i8":
                require(dt.min <= zp <= dt.max, f"{op}: {which} zero point {zp} is outside i8")
            else:
                require(zp == 0, f"{op}: {which} zero point must be 0 for {dt} {which}s, got {zp}")
        require(x.dtype.min <= p.pad_value <= x.dtype.max,
                f"{op}: pad_value {p.pad_value} is outside {x.dtype}")
        super().check(io)

    def gathered(self, io: StepIO, x: np.ndarray) -> np.ndarray:
        """[N, OH, OW, KH, KW, C] taps with the input zero point removed (padding reads pad_value)."""
        p = self.params(io)
        return self.window(io).patches(x, p.pad_value) - p.izp

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        p = self.params(io)
        x, w, b = io.ins
        lo, hi = in_ranges[0]
        if self.window(io).reads_padding:
            lo, hi = min(lo, p.pad_value), max(hi, p.pad_value)
        w_lo, w_hi = operand_interval(w, in_ranges[1])
        b_lo, b_hi = operand_interval(b, in_ranges[2])
        where = f"{self.name}" + (f" ({io.step.source})" if io.step.source else "")
        bits = acc_bits(p.acc_type)
        acc, overflow = accumulator_check(where, (self.weight_taps(w_lo) - p.wzp, self.weight_taps(w_hi) - p.wzp),
                                          (lo - p.izp, hi - p.izp), (b_lo, b_hi), bits)
        return accumulator_ranges(acc, overflow, bits)

    def macs(self, io: StepIO) -> int:
        """Multiply-accumulates of the full window (padding taps included)."""
        y = io.outs[0].shape
        return int(np.prod(y, dtype=np.int64)) * self.window(io).taps * self.taps_per_channel(io)

    def taps_per_channel(self, io: StepIO) -> int:
        """Input channels summed into one output channel, per window tap."""
        raise NotImplementedError

    def template_context(self, io: StepIO) -> dict[str, Any]:
        p = self.params(io)
        win = self.window(io)
        padd = p.pad_value - p.izp
        return dict(p.context(), win=win.loops(), oc=self.out_channels(io), pad_term=padd if win.reads_padding else 0,
                    **accumulator_context(io, p.acc_type), bias_per_channel=io.ins[2].shape[0] > 1)


@register
class Conv2D(ConvBase):
    """acc[n, oy, ox, oc] = bias[oc] + sum over (ky, kx, ic) of (x - input_zp) * (w[oc, ky, kx, ic] - weight_zp),
    x read at (oy * sy - pad_top + ky * dy, ox * sx - pad_left + kx * dx) or pad_value out of bounds."""

    name = "CONV2D"

    def kernel_hw(self, w_shape: tuple[int, ...]) -> tuple[int, int]:
        return w_shape[1], w_shape[2]

    def out_channels(self, io: StepIO) -> int:
        return io.ins[1].shape[0]

    def expected_in_channels(self, w_shape: tuple[int, ...]) -> int:
        return w_shape[3]

    def taps_per_channel(self, io: StepIO) -> int:
        return io.ins[1].shape[3]

    def weight_taps(self, w: np.ndarray) -> np.ndarray:
        return w.reshape(w.shape[0], -1)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        taps = self.gathered(io, args[0])
        w = args[1].astype(np.int64) - self.params(io).wzp
        acc = np.tensordot(taps, w, axes=([3, 4, 5], [1, 2, 3]))
        return [required_accumulator(self.name, acc, args[2].astype(np.int64), acc_bits(self.params(io).acc_type))]
