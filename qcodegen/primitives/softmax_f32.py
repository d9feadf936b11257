"""SOFTMAX_F32 (qcodegen extension): onnxruntime's QLinearSoftmax (qlinear_softmax.cc) over the last axis of 8-bit
data, its float32 arithmetic emulated exactly with integers (docs/semantics.md §14.2, docs/onnx.md;
runtime/qc_runtime.h qc_f32_*).

For each row x[0..D-1] with maximum m (all float32, round to nearest even, in this order):
    e[j] = table[x[j] - m + 255]                  (a plan-time table of 256 positive float32 values)
    sum  = (...((e[0] + e[1]) + e[2]) + ...) + e[D-1]
    q[j] = round_half_even((e[j] * y_scale) / sum) + output_zp
    out[j] = min(q[j], qmax) + out_offset    (q >= output_zp: the quotient is not negative)
The table and y_scale (an integer-valued float32, floor(1 / y_scale)) come from the lowering
(qcodegen/semantics/onnxruntime.py softmax_table). Values that would be subnormal in float32 (exponentials of
very negative arguments) only ever produce 0 here and there.

inputs: x (i8, or u8); attrs: table (256 float32), y_scale, output_zp, qmax (255 for uint8 results, 127 for int8),
out_offset (added to the stored result: -128 when uint8 results are stored as int8). Output: same shape, i8 or u8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require, require_attrs
from .rescale_f32 import mantissa_exponent

_TYPES = ("i8", "u8")


@dataclass(frozen=True, eq=False)
class SoftmaxF32Params:
    """The attributes of a SOFTMAX_F32 step (see the module docstring), typed: table (256 float32), y_scale."""

    table: np.ndarray
    y_scale: np.float32
    output_zp: int
    qmax: int
    out_offset: int

    @classmethod
    def of(cls, io: StepIO) -> SoftmaxF32Params:
        a = io.attrs
        require_attrs(a, "SOFTMAX_F32", ("table", "y_scale", "output_zp", "qmax"))
        return cls(np.asarray(a["table"], np.float64).astype(np.float32), np.float32(a["y_scale"]),
                   int(a["output_zp"]), int(a["qmax"]), int(a.get("out_offset", 0)))


@register
class SoftmaxF32(Primitive):
    name = "SOFTMAX_F32"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1 and len(io.outs) == 1, "SOFTMAX_F32: needs one input and one output")
        x, y = io.ins[0], io.outs[0]
        require(x.dtype.name in _TYPES and y.dtype.name in _TYPES, f"SOFTMAX_F32: types {x.dtype} -> {y.dtype}")
        require(len(x.shape) >= 1, "SOFTMAX_F32: rank 0 input")
        p = SoftmaxF32Params.of(io)
        table = p.table
        require(table.shape == (256,) and bool(np.all(np.isfinite(table) & (table >= 0))) and table[255] > 0,
                "SOFTMAX_F32: the table needs 256 finite non-negative float32 values, the last positive")
        ys = p.y_scale
        require(bool(np.isfinite(ys)) and ys >= 0 and ys == np.floor(ys), f"SOFTMAX_F32: y_scale {ys} must be a "
                                                                          "non-negative integer")
        super().check(io)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        x, p = args[0].astype(np.int64), SoftmaxF32Params.of(io)
        e = p.table[x - x.max(axis=-1, keepdims=True) + 255]
        total = np.add.accumulate(e, axis=-1, dtype=np.float32)[..., -1:]
        with np.errstate(over="ignore", under="ignore"):
            r = ((e * p.y_scale).astype(np.float32) / total).astype(np.float32)
        q = np.minimum(np.rint(r).astype(np.int64) + p.output_zp, p.qmax)
        return [q + p.out_offset]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        y = io.outs[0].dtype
        return Ranges([(y.min, y.max)])

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        m, k = mantissa_exponent(SoftmaxF32Params.of(io).table)
        return {"mantissa": m.astype(np.int32), "exponent": k.astype(np.int16)}

    def template_context(self, io: StepIO) -> dict:
        shape, p = io.ins[0].shape, SoftmaxF32Params.of(io)
        ys_m, ys_k = mantissa_exponent(p.y_scale)
        return dict(rows=int(np.prod(shape[:-1], dtype=np.int64)), d=shape[-1], ys_m=int(ys_m[0]),
                    ys_k=int(ys_k[0]), zp=p.output_zp, qmax=p.qmax, offset=p.out_offset)
