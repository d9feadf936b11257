"""add, sub, mul on quantized tensors, numpy broadcasting, optional fused activation.

add / sub follow StableHLO's TOSA legalisation (docs/semantics.md §7.3): both operands are RESCALEd to i32 in units of
max2 / 2^L (max2 = 2 max(s_a, s_b); L = 20 for 8-bit data, 15 for 16-bit), added in i32 and RESCALEd back.
No overflow: an operand becomes (q - zp) * s / max2 * 2^L with s / max2 <= 1/2, so |term| <= 255 * 2^19 (8-bit)
or 32768 * 2^14 (16-bit, zp 0) and the sum stays below 2^30.

mul RESCALEs the operands to i32 at scale 1.0 (exact) only to remove their zero points (skipped when both are
0: MUL then takes the 8/16-bit operands directly), multiplies in i32 (shift 0) and RESCALEs by s_a s_b / s_out.
No overflow: |(a - zp_a)(b - zp_b)| <= 255 * 255 for 8-bit data, <= 2^30 for 16-bit data (zero points 0)."""

from __future__ import annotations

import math

from ...ir.graph import Op, Tensor
from ..base import Lowerer, rule
from ..common import (
    activation_bounds,
    align_rank,
    broadcast_out_shape,
    check_dtypes,
    max_offset,
    rescale_output,
    to_i32,
)


def _binary_operands(lw: Lowerer, op: Op) -> tuple[Tensor, Tensor, Tensor]:
    if len(op.inputs) != 2 or len(op.outputs) != 1:
        raise lw.error(f"expects 2 inputs and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
    a, b, y = lw.tensor_in(0), lw.tensor_in(1), lw.tensor_out(0)
    for i in (0, 1):
        lw.quant_in(i)
    lw.quant_out(0)
    check_dtypes(lw, (a, b, y), ("i8", "i16"))
    if not a.dtype == b.dtype == y.dtype:
        raise lw.error(f"operands and result must share one storage type, got {a.dtype}, {b.dtype} -> {y.dtype}")
    for t in (a, b, y):
        if t.dtype.bits == 16 and t.quant.zero_point != 0:
            raise lw.error(f"16-bit tensor {t.name!r} must have zero point 0, got {t.quant.zero_point}")
    shape = broadcast_out_shape(lw, [a.shape, b.shape])
    if shape != y.shape:
        raise lw.error(f"output shape {list(y.shape)} differs from the broadcast shape {list(shape)}")
    return a, b, y


@rule("add", "sub")
def lower_add_sub(lw: Lowerer, op: Op) -> None:
    a, b, y = _binary_operands(lw, op)
    left_shift = 15 if y.dtype.bits == 16 else 20
    max2 = 2.0 * max(a.quant.scale, b.quant.scale)
    factors = [t.quant.scale / max2 * 2.0 ** left_shift for t in (a, b)]
    terms = [align_rank(lw, to_i32(lw, t.name, t.quant.zero_point, f), len(y.shape))
             for t, f in zip((a, b), factors, strict=True)]
    acc = lw.temp(f"{y.name}_acc", y.shape, "i32")
    lw.emit(op.kind.upper(), terms, [acc])
    bound = sum(math.ceil(max_offset(t.quant) * f) + 1 for t, f in zip((a, b), factors, strict=True))
    rescale_output(lw, acc, y, max2 / (y.quant.scale * 2.0 ** left_shift), bound, **activation_bounds(lw, y.quant))


@rule("mul")
def lower_mul(lw: Lowerer, op: Op) -> None:
    a, b, y = _binary_operands(lw, op)
    if a.quant.zero_point == b.quant.zero_point == 0:
        terms = [a.name, b.name]
    else:
        terms = [to_i32(lw, t.name, t.quant.zero_point) for t in (a, b)]
    terms = [align_rank(lw, t, len(y.shape)) for t in terms]
    acc = lw.temp(f"{y.name}_acc", y.shape, "i32")
    lw.emit("MUL", terms, [acc], shift=0)
    rescale_output(lw, acc, y, a.quant.scale * b.quant.scale / y.quant.scale,
                   max_offset(a.quant) * max_offset(b.quant), **activation_bounds(lw, y.quant))
