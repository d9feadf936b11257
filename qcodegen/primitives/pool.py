"""AVG_POOL2D and MAX_POOL2D (TOSA 1.0): windows over NHWC i8/i16 inputs; padding taps are ignored."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..fixedpoint import Rounding, apply_scale_32
from ..ir.schedule import StepIO, Widening
from .base import Primitive, Ranges, register, require
from .geometry import Window, accumulator_context, int_list

_TYPES = ("i8", "i16")


def reciprocal_scale(count: int) -> tuple[int, int]:
    """TOSA reciprocal_scale: k = bitlen(count - 1), multiplier ((2^30 + 1) << k) / count, shift 30 + k."""
    k = (count - 1).bit_length()
    return (((1 << 30) + 1) << k) // count, 30 + k


class PoolBase(Primitive):
    """attrs: kernel [kh, kw], stride [sy, sx], pad [top, bottom, left, right]."""

    def window(self, io: StepIO) -> Window:
        kernel = int_list(io.attrs, "kernel", 2, self.name)
        return Window.from_attrs(self.name, io.ins[0], (kernel[0], kernel[1]), io.attrs, dilated=False)

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        n, _, _, c = io.ins[0].shape
        return [(n, *self.window(io).out_hw, c)]

    def check(self, io: StepIO) -> None:
        op = self.name
        require(len(io.ins) == 1 and len(io.outs) == 1, f"{op}: needs one input and one output")
        x, y = io.ins[0], io.outs[0]
        require(x.dtype.name in _TYPES, f"{op}: input type must be i8 or i16, got {x.dtype}")
        require(y.dtype == x.dtype, f"{op}: output type {y.dtype} must equal the input type {x.dtype}")
        win = self.window(io)
        (kh, kw), (pt, pb, pl, pr) = win.kernel, win.pad
        require(max(pt, pb) < kh and max(pl, pr) < kw,
                f"{op}: pad {list(win.pad)} must be smaller than the kernel {list(win.kernel)}")
        super().check(io)

    def template_context(self, io: StepIO) -> dict[str, Any]:
        return dict(win=self.window(io).loops())


@register
class AvgPool2D(PoolBase):
    """acc = sum of (x - input_zp) over in-bounds taps (int32), count = number of in-bounds taps;
    out = clip(apply_scale_32(acc, reciprocal_scale(count), single round) + output_zp).
    attrs: kernel, stride, pad, input_zp, output_zp, acc_type ("i32")."""

    name = "AVG_POOL2D"

    @staticmethod
    def zero_points(io: StepIO) -> tuple[int, int]:
        return int(io.attrs.get("input_zp", 0)), int(io.attrs.get("output_zp", 0))

    def check(self, io: StepIO) -> None:
        super().check(io)
        dt = io.ins[0].dtype
        acc_type = str(io.attrs.get("acc_type", "i32")).lower()
        require(acc_type == "i32", f"AVG_POOL2D: acc_type must be i32, got {acc_type}")
        for which, zp in zip(("input", "output"), self.zero_points(io), strict=True):
            if dt.name == "i8":
                require(dt.min <= zp <= dt.max, f"AVG_POOL2D: {which} zero point {zp} is outside i8")
            else:
                require(zp == 0, f"AVG_POOL2D: {which} zero point must be 0 for {dt}, got {zp}")

    def counts(self, io: StepIO) -> np.ndarray:
        """[OH, OW]: in-bounds taps of each window."""
        return self.window(io).mask().sum(axis=(2, 3))

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        izp, ozp = self.zero_points(io)
        acc = (self.window(io).patches(args[0], izp) - izp).sum(axis=(3, 4))  # padding reads izp: adds 0
        counts = self.counts(io)
        scales = np.array([reciprocal_scale(int(c)) for c in counts.reshape(-1)], np.int64)
        mult, shift = (scales[:, j].reshape(1, *counts.shape, 1) for j in (0, 1))
        out = apply_scale_32(acc, mult, shift, Rounding.SINGLE) + ozp
        dt = io.outs[0].dtype
        return [np.clip(out, dt.min, dt.max)]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        izp, ozp = self.zero_points(io)
        lo, hi = in_ranges[0]
        counts = self.counts(io)
        fewest, most = int(counts.min()), int(counts.max())
        # the C kernel sums raw inputs, then subtracts count * izp: bound both forms
        worst = most * max(abs(lo), abs(hi), abs(lo - izp), abs(hi - izp))
        acc = (min(fewest * (lo - izp), most * (lo - izp)), max(fewest * (hi - izp), most * (hi - izp)))
        dt = io.outs[0].dtype
        if worst > (1 << 31) - 1:  # widened: an int64 sum, saturated to int32 before the reciprocal scaling
            where = self.name + (f" ({io.step.source})" if io.step.source else "")
            reason = f"{where}: the i32 accumulator could overflow ({most} taps of |x| up to {worst // most})"
            return Ranges([(dt.min, dt.max)], acc=acc, widened=Widening(reason, acc))
        # a rounded mean of values in [lo, hi] - izp stays in that interval
        out = (int(np.clip(lo - izp + ozp, dt.min, dt.max)), int(np.clip(hi - izp + ozp, dt.min, dt.max)))
        return Ranges([out], acc=acc)

    def macs(self, io: StepIO) -> int:
        """Accumulations (one per window tap), for the report."""
        return int(np.prod(io.outs[0].shape, dtype=np.int64)) * self.window(io).taps

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        """Reciprocal scales of border windows, indexed by count - 1 (interior windows use literals)."""
        win = self.window(io)
        if not win.reads_padding:
            return {}
        pairs = [reciprocal_scale(c) for c in range(1, int(self.counts(io).max()) + 1)]
        return {"recip_multiplier": np.array([m for m, _ in pairs], np.int32),
                "recip_shift": np.array([s for _, s in pairs], np.int8)}

    def template_context(self, io: StepIO) -> dict[str, Any]:
        izp, ozp = self.zero_points(io)
        mult, shift = reciprocal_scale(self.window(io).taps)
        dt = io.outs[0].dtype
        return dict(super().template_context(io), izp=izp, ozp=ozp, multiplier=mult, shift=shift,
                    lo=dt.min, hi=dt.max, **accumulator_context(io, "i32"))


@register
class MaxPool2D(PoolBase):
    """out = max of x over in-bounds taps (initialised to the type minimum; no zero points)."""

    name = "MAX_POOL2D"

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        fill = io.ins[0].dtype.min  # a padding tap never wins: it equals the initial value
        return [self.window(io).patches(args[0], fill).max(axis=(3, 4))]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([in_ranges[0]])  # pad < kernel: every window holds at least one input value

    def template_context(self, io: StepIO) -> dict[str, Any]:
        return dict(super().template_context(io), lo=io.ins[0].dtype.min)
