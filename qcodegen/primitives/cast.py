"""CAST between integer types (TOSA 1.0 int <-> int; u8/u16 are a qcodegen extension).

Widening sign-extends (zero-extends from u8/u16); narrowing keeps the low bits (wraps: i16 300 -> i8 44),
unlike RESCALE, which saturates. Float conversions are not CAST: use QUANTIZE (f32 -> int) and DEQUANTIZE
(int -> f32). The C never converts an out-of-range value to a signed type (implementation-defined): a
wrapping cast takes the low bits as uint32_t and re-signs them arithmetically.
"""

from __future__ import annotations

import numpy as np

from ..ir.dtypes import DType, wrap_to
from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require

_TYPES = ("i8", "u8", "i16", "u16", "i32")



def _widens(src: DType, dst: DType) -> bool:
    return dst.min <= src.min and src.max <= dst.max


@register
class Cast(Primitive):
    name = "CAST"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    def check(self, io: StepIO) -> None:
        super().check(io)
        for which, dt in (("input", io.ins[0].dtype), ("output", io.outs[0].dtype)):
            require(dt.name in _TYPES, f"CAST: {which} type {dt} is not one of {list(_TYPES)} "
                                       "(float conversions are QUANTIZE/DEQUANTIZE)")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [wrap_to(args[0].astype(np.int64), io.outs[0].dtype)]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = in_ranges[0]
        dst = io.outs[0].dtype
        if dst.min <= lo and hi <= dst.max:
            return Ranges([(lo, hi)])
        return Ranges([(dst.min, dst.max)])

    def template_context(self, io: StepIO) -> dict:
        src, dst = io.ins[0].dtype, io.outs[0].dtype
        return dict(widens=_widens(src, dst), mask=(1 << dst.bits) - 1,
                    sign=(1 << (dst.bits - 1)) if dst.signed else 0)
