"""BINARY_F32 (qcodegen extension): onnxruntime's float path for Add, Sub and Mul between DequantizeLinear and
QuantizeLinear (a QDQ model's 16-bit element-wise ops, whose 2^32 operand pairs no table holds), every float32
operation emulated exactly with integers (runtime/qc_runtime.h qc_f32s_*; docs/semantics.md §14.2, docs/onnx.md).

Per element, a and b broadcast (TOSA: equal ranks), all float32, round to nearest even, in this order:
    fa = f32(a - a_zp) * a_scale                (DequantizeLinear; a - a_zp is exact in float32)
    fb = f32(b - b_zp) * b_scale
    r  = fa + fb | fa - fb | fa * fb           (attr `operation`: add, sub, mul)
    y  = clamp(round_half_even(r / y_scale), qmin - y_zp, qmax - y_zp) + y_zp   (MLAS QuantizeLinear)
The scales lie in [2^-40, 2^40] (checked): then every intermediate is a normal float32 (|fa| <= 2^57, a nonzero
product >= 2^-80) or a quotient whose rounding only decides saturation (above 2^40) or zero (below 1/2), so the
binary32 results need no subnormals and no infinities.

inputs: a, b (i8, u8, i16, u16); attrs: operation, a_scale, a_zp, b_scale, b_zp, y_scale, y_zp, qmin, qmax. Output: the
output type (i8, u8, i16, u16).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, broadcast_shape, full_shape_inputs, register, require, require_attrs
from .elementwise import broadcast_nest
from .rescale_f32 import mantissa_exponent

_TYPES = ("i8", "u8", "i16", "u16")
_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
SCALE_RANGE = (2.0 ** -40, 2.0 ** 40)


@dataclass(frozen=True)
class BinaryF32Params:
    """The attributes of a BINARY_F32 step (module docstring), typed."""

    operation: str
    a_scale: np.float32
    a_zp: int
    b_scale: np.float32
    b_zp: int
    y_scale: np.float32
    y_zp: int
    qmin: int
    qmax: int

    @classmethod
    def of(cls, io: StepIO) -> BinaryF32Params:
        a = io.attrs
        keys = ("operation", "a_scale", "a_zp", "b_scale", "b_zp", "y_scale", "y_zp", "qmin", "qmax")
        require_attrs(a, "BINARY_F32", keys)
        return cls(str(a["operation"]), np.float32(a["a_scale"]), int(a["a_zp"]), np.float32(a["b_scale"]),
                   int(a["b_zp"]), np.float32(a["y_scale"]), int(a["y_zp"]), int(a["qmin"]), int(a["qmax"]))

    @property
    def scales(self) -> tuple[np.float32, np.float32, np.float32]:
        return self.a_scale, self.b_scale, self.y_scale


def binary_f32(p: BinaryF32Params, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The float32 definition itself (numpy float32 operations, module docstring), as int64."""
    fa = (np.asarray(a, np.int64) - p.a_zp).astype(np.float32) * p.a_scale
    fb = (np.asarray(b, np.int64) - p.b_zp).astype(np.float32) * p.b_scale
    with np.errstate(over="ignore"):
        v = (_OPS[p.operation](fa, fb) / p.y_scale).astype(np.float32)
    v = np.clip(v, np.float32(p.qmin - p.y_zp), np.float32(p.qmax - p.y_zp))
    return np.rint(v).astype(np.int64) + p.y_zp


@register
class BinaryF32(Primitive):
    name = "BINARY_F32"

    def inplace_inputs(self, io: StepIO) -> tuple[int, ...]:
        return full_shape_inputs(io) if io.ins[0].dtype.bits >= io.outs[0].dtype.bits else ()

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [broadcast_shape(io.ins[0].shape, io.ins[1].shape, self.name)]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 2 and len(io.outs) == 1, "BINARY_F32: needs inputs [a, b] and one output")
        for buf in (*io.ins, io.outs[0]):
            require(buf.dtype.name in _TYPES, f"BINARY_F32: type {buf.dtype} is not one of {list(_TYPES)}")
        p = BinaryF32Params.of(io)
        require(p.operation in _OPS, f"BINARY_F32: operation {p.operation!r} is not one of {list(_OPS)}")
        for s in p.scales:
            require(bool(SCALE_RANGE[0] <= s <= SCALE_RANGE[1]), f"BINARY_F32: scale {float(s)!r} outside "
                                                                 "[2^-40, 2^40] (subnormal or infinite float32 "
                                                                 "intermediates are not emulated)")
        y = io.outs[0].dtype
        require(y.min <= p.qmin <= p.qmax <= y.max, f"BINARY_F32: bounds [{p.qmin}, {p.qmax}] outside {y}")
        for buf, zp in zip(io.ins, (p.a_zp, p.b_zp), strict=True):
            require(buf.dtype.min <= zp <= buf.dtype.max, f"BINARY_F32: zero point {zp} outside {buf.dtype}")
        require(y.min <= p.y_zp <= y.max, f"BINARY_F32: zero point {p.y_zp} outside {y}")
        super().check(io)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [binary_f32(BinaryF32Params.of(io), args[0], args[1])]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        p = BinaryF32Params.of(io)
        return Ranges([(p.qmin, p.qmax)])

    def template_context(self, io: StepIO) -> dict:
        p = BinaryF32Params.of(io)
        m, k = mantissa_exponent(np.array(p.scales, np.float32))
        return dict(nest=broadcast_nest(io), operation=p.operation, m=[int(v) for v in m], k=[int(v) for v in k],
                    a_zp=p.a_zp, b_zp=p.b_zp, y_zp=p.y_zp, lo=p.qmin - p.y_zp, hi=p.qmax - p.y_zp)
