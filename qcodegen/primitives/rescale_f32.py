"""RESCALE_F32 (qcodegen extension): an integer requantized the way onnxruntime's CPU kernels do it in float32,
computed exactly with integers (docs/semantics.md §14.1; docs/onnx.md).

    out = clamp(round_half_even(f32(f32(x) * scale[c])) + output_zp, out_min, out_max)

f32(x) is the IEEE binary32 conversion of the integer x, `*` the binary32 multiplication (both round to nearest,
ties to even) and `scale` a binary32 value per tensor or per channel along `axis`. This is MLAS's
MlasRequantizeOutput (QLinearConv, QLinearMatMul, QGemm, QLinearGlobalAveragePool): float(acc) * scale, clamped
to the output range minus the zero point, rounded to nearest even, plus the zero point. Clamping before or after
the rounding is the same, the bounds being integers.

The numpy reference is that definition, evaluated in numpy float32. The C (runtime/qc_runtime.h qc_scale_f32)
emulates both binary32 roundings and the final rounding in integer arithmetic, with the scale given as
scale = m * 2^-k (m < 2^24) at plan time. No float is executed at run time.

inputs: x (i8, i16, i32, or i48: the int64 accumulator of 16 x 8-bit products, always in the full emulation).
attrs: scale (list of float32 values: one, or one per channel along `axis`), axis
(default -1), output_zp, out_min / out_max (default the output type range). Output: i8, u8, i16, u16 or i32.
"""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from ..semantics import f32_single_rounding as single
from ..semantics.f32_single_rounding import mantissa_exponent, requantize_f32
from .base import Primitive, Ranges, register, require
from .reduce import axis_split

_IN_TYPES = ("i8", "i16", "i32")
_OUT_TYPES = ("i8", "u8", "i16", "u16", "i32")
_CTYPES = {"int8": "int", "int16": "int", "int32": "int32_t", "int64": "int64_t"}


class F32Requantization(Primitive):
    """What the float32 requantizations (RESCALE_F32 here, RESCALE_F32_AFFINE) share: one integer input, float32
    constants per tensor or per channel along `axis`, an output clamp, and a reference that is monotone per
    channel. A subclass gives its constants' names (`KEYS`, the first one the scales), `_check` of its constants
    and `_requantize` (x and its constants broadcast per channel, the result before the clamp)."""

    inplace = True
    KEYS: tuple[str, ...] = ("scale",)
    IN_TYPES: tuple[str, ...] = _IN_TYPES

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    @staticmethod
    def values(io: StepIO, key: str) -> np.ndarray:
        with np.errstate(over="ignore"):  # beyond float32: inf, which the checks refuse
            return np.asarray(io.attrs[key], np.float64).astype(np.float32).reshape(-1)

    @staticmethod
    def per_channel(io: StepIO) -> bool:
        return len(io.attrs["scale"]) > 1

    def axis(self, io: StepIO) -> int:
        rank = len(io.ins[0].shape)
        return int(io.attrs.get("axis", -1)) % rank if rank else 0

    def bounds(self, io: StepIO) -> tuple[int, int]:
        y = io.outs[0].dtype
        return max(y.min, int(io.attrs.get("out_min", y.min))), min(y.max, int(io.attrs.get("out_max", y.max)))

    def check(self, io: StepIO) -> None:
        op = self.name
        require(len(io.ins) == 1 and len(io.outs) == 1, f"{op}: needs one input and one output")
        x, y = io.ins[0], io.outs[0]
        require(x.dtype.name in self.IN_TYPES, f"{op}: input type {x.dtype} is not one of {list(self.IN_TYPES)}")
        require(y.dtype.name in _OUT_TYPES, f"{op}: output type {y.dtype} is not one of {list(_OUT_TYPES)}")
        self._check(io)
        if self.per_channel(io):
            rank, size = len(x.shape), self.values(io, "scale").size
            axis = int(io.attrs.get("axis", -1))
            require(rank > 0 and -rank <= axis < rank, f"{op}: axis {axis} out of range for rank {rank}")
            require(x.shape[axis % rank] == size, f"{op}: {size} scales for axis {axis} of size {x.shape[axis % rank]}")
        lo, hi = self.bounds(io)
        require(lo <= hi, f"{op}: empty output clamp [{lo}, {hi}]")
        super().check(io)

    def _check(self, io: StepIO) -> None:
        raise NotImplementedError

    def _requantize(self, io: StepIO, x: np.ndarray, *constants: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _apply(self, io: StepIO, x: np.ndarray, channel_axis: int | None) -> np.ndarray:
        constants = [self.values(io, key) for key in self.KEYS]
        if self.per_channel(io) and channel_axis is not None:
            view = [1] * x.ndim
            view[channel_axis] = constants[0].size
            constants = [c.reshape(view) for c in constants]
        else:
            constants = [c[0] for c in constants]
        return self._requantize(io, x, *constants)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [self._apply(io, args[0].astype(np.int64), self.axis(io))]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        ends = np.array([[in_ranges[0][0]], [in_ranges[0][1]]], np.int64)  # monotone per channel (scales >= 0)
        r = self._apply(io, ends, 1)
        return Ranges([(int(r.min()), int(r.max()))])


@register
class RescaleF32(F32Requantization):
    name = "RESCALE_F32"
    IN_TYPES = (*_IN_TYPES, "i48")

    def scales(self, io: StepIO) -> np.ndarray:
        return self.values(io, "scale")

    def _check(self, io: StepIO) -> None:
        scale, y = self.scales(io), io.outs[0]
        require(scale.size >= 1, "RESCALE_F32: needs at least one scale")
        require(bool(np.all(np.isfinite(scale) & (scale >= 0))),
                f"RESCALE_F32: scales must be finite and >= 0 in float32, got {io.attrs['scale']}")
        zp = int(io.attrs.get("output_zp", 0))
        require(y.dtype.min <= zp <= y.dtype.max, f"RESCALE_F32: output zero point {zp} is outside {y.dtype}")

    def _requantize(self, io: StepIO, x: np.ndarray, *constants: np.ndarray) -> np.ndarray:
        zp = int(io.attrs.get("output_zp", 0))
        lo, hi = self.bounds(io)
        return np.clip(requantize_f32(x, constants[0]), lo - zp, hi - zp).astype(np.int64) + zp

    def single_roundings(self, io: StepIO, max_exceptions: int = 0) -> list[single.SingleRounding] | None:
        """Per channel, the single rounding equal to this step over its input's value range but at most
        `max_exceptions` accumulators (docs/semantics.md §14.5, shifts of at least 32, where TOSA's REQUIRE bounds
        no accumulator), or None when some channel has none (or the output clamp spans 2^16 values or more: the
        enumeration runs over its half-integers; or the input is i48: the single-rounding forms take |x| < 2^31)."""
        lo, hi = self.bounds(io)
        x = io.ins[0]
        if hi - lo >= 1 << 16 or x.dtype.name == "i48":
            return None
        acc = x.value_range or (x.dtype.min, x.dtype.max)
        zp = int(io.attrs.get("output_zp", 0))
        zero = single.SingleRounding(0, 32, 0, 0)  # scale 0: every result is 0
        m, k = mantissa_exponent(self.scales(io))
        found = [single.single_rounding(mm, kk, acc, (lo - zp, hi - zp), max_exceptions) if mm else zero
                 for mm, kk in zip(m.tolist(), k.tolist(), strict=True)]
        return found if all(f is not None and f.shift >= 32 for f in found) else None

    def form(self, io: StepIO) -> tuple[str, str, dict[str, np.ndarray]]:
        """How the C computes it over the input's value range (docs/semantics.md §14.5), the C function and its
        per-channel arguments after the value: qc_scale32_single (multiplier, shift) when single rounding is
        proved for every channel; else qc_scale_f32_fast (mantissa, exponent, window: single rounding outside
        the window, the exact emulation inside) when every scale takes it; else qc_scale_f32 (mantissa,
        exponent; qc_scale_f32_64 for an i48 input)."""
        found = self.single_roundings(io)
        if found is not None:
            return "qc_scale32_single", "single", {"multiplier": np.array([f.multiplier for f in found], np.int32),
                                                   "shift": np.array([f.shift for f in found], np.int8)}
        m, k = mantissa_exponent(self.scales(io))
        x = io.ins[0]
        eligible = all(mm == 0 or single.eligible(mm, kk) for mm, kk in zip(m.tolist(), k.tolist(), strict=True))
        if eligible and x.dtype.name != "i48":  # the single-rounding forms take |x| < 2^31
            k = np.where(m == 0, 32, k)
            bound = max(-x.value_range[0], x.value_range[1]) if x.value_range else max(-x.dtype.min, x.dtype.max)
            w = [single.window(mm, kk, bound) for mm, kk in zip(m.tolist(), k.tolist(), strict=True)]
            return "qc_scale_f32_fast", "window", {"mantissa": m.astype(np.int32), "exponent": k.astype(np.int16),
                                                   "window": np.array(w, np.int64)}
        fn = "qc_scale_f32_64" if x.dtype.name == "i48" else "qc_scale_f32"
        return fn, "exact", {"mantissa": m.astype(np.int32), "exponent": k.astype(np.int16)}

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        return self.form(io)[2] if self.per_channel(io) else {}

    def template_context(self, io: StepIO) -> dict:
        fn, name, args = self.form(io)
        lo, hi = self.bounds(io)
        per_channel = self.per_channel(io)
        geometry = axis_split(io.ins[0].shape, self.axis(io)) if per_channel else {}
        return dict(geometry, per_channel=per_channel, size=io.ins[0].size, fn=fn, form=name,
                    in_ctype="int64_t" if io.ins[0].dtype.name == "i48" else "int32_t",
                    args=[dict(name=key, ctype=_CTYPES[v.dtype.name], value=int(v[0])) for key, v in args.items()],
                    output_zp=int(io.attrs.get("output_zp", 0)), lo=lo, hi=hi)
