"""TFLite element-wise ops, bit-exact with TFLM's reference kernels: ADD, SUB, MUL, MAXIMUM, MINIMUM, RELU,
RELU6, QUANTIZE, DEQUANTIZE. Broadcasting follows numpy (operands are reshaped to the output rank).

ADD / SUB (docs/semantics.md §8.2): every operand becomes (x - zp) * 2^L in i32 (L = 20 for int8, 15 for int16:
RESCALE(2^30, shift 10) is exact for 8-bit data; 16-bit data is CAST and multiplied by 2^15), then
MultiplyByQuantizedMultiplierSmallerThanOneExp by its multiplier (RESCALE DOUBLE_ROUND), ADD/SUB in i32 and
the output multiplier with the zero point and the fused activation; the real multipliers are formed in double
from 2 * max(s1, s2).
MUL: (x1 - zp1) * (x2 - zp2) in i32, then MultiplyByQuantizedMultiplier((double)s1 * (double)s2 / (double)s_out).
MAXIMUM / MINIMUM / RELU6 work on the stored integers (TFLM ignores the output quantization); RELU requantizes
with the multiplier of (double)s_in / (double)s_out. Activation limits are zp + round(f / scale) in float32.
QUANTIZE int -> int is Requantize (MultiplyByQuantizedMultiplier of (double)s_in / (double)s_out); float -> int
rounds x / scale (float32) and adds the zero point in integers; DEQUANTIZE is float(scale * (q - zp)), which
the f32 DEQUANTIZE primitive computes exactly (one correctly rounded product either way).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...fixedpoint import round_half_away
from ...ir.graph import Op, Tensor
from ...ir.rescale import RescaleParams
from ...semantics.tflite import Pair, f32, quantize_multiplier_exponent, quantize_multiplier_smaller_than_one_exp
from ..base import Lowerer, rule
from ..common import align_rank, broadcast_out_shape, expect_shape
from .common import fused_bounds, operands, quantized, same_type
from .quant import emit_mbqm


def _binary(lw: Lowerer, op: Op) -> tuple[Tensor, Tensor, Tensor]:
    (a, b), (y,) = operands(lw, op, (2,))
    for t in (a, b, y):
        quantized(lw, t)
    same_type(lw, a, b, y)
    expect_shape(lw, y, broadcast_out_shape(lw, [a.shape, b.shape]))
    return a, b, y


def _scaled_term(lw: Lowerer, t: Tensor, left_shift: int, pair: Pair, rank: int) -> str:
    """MultiplyByQuantizedMultiplierSmallerThanOneExp((x - zp) * 2^left_shift, m, s) as an i32 tensor."""
    term = lw.temp(f"{t.name}_shifted", t.shape, "i32")
    half = pair == (1 << 30, 0)  # the larger-scale operand: exactly (x - zp) * 2^(left_shift - 1)
    shift = left_shift - 1 if half else left_shift
    if t.dtype.bits == 8:  # (x - zp) * 2^shift exactly: multiplier 2^30, TOSA shift 30 - shift
        lw.emit_rescale(t.name, term, RescaleParams(multiplier=[1 << 30], shift=[30 - shift],
                                                    input_zp=t.quant.zero_point, output_zp=0))
    else:  # 16-bit (zero point 0): a RESCALE's value REQUIRE would fail, so CAST and MUL (docs/semantics.md §12.7)
        wide = lw.temp(f"{t.name}_i32", t.shape, "i32")
        lw.emit("CAST", [t.name], [wide])
        lw.emit("MUL", [wide, lw.const(f"{t.name}_pow2", np.full((1,) * len(t.shape), 1 << shift), "i32")], [term],
                shift=0)
    if not half:
        scaled = lw.temp(f"{t.name}_scaled", t.shape, "i32")
        emit_mbqm(lw, term, scaled, [pair])
        term = scaled
    return align_rank(lw, term, rank)


def _add_sub_pairs(lw: Lowerer, a: Tensor, b: Tensor, y: Tensor, left_shift: int) -> list[Pair]:
    """add_common.cc: the real multipliers in double from twice the larger (float32) input scale. (The
    sub_common.cc of the TFLM source tree forms them in float32, but the tflite-micro oracle's SUB matches
    the double arithmetic: the seanet SUB goldens differ by one LSB with the float32 multipliers.)"""
    sa, sb, so = (float(t.quant.scale) for t in (a, b, y))  # the files' float32 values, exactly
    twice_max = 2 * max(sa, sb)
    reals = [sa / twice_max, sb / twice_max, twice_max / ((1 << left_shift) * so)]
    try:
        return [quantize_multiplier_smaller_than_one_exp(r) for r in reals]
    except UnsupportedError as exc:
        raise UnsupportedError(f"{lw.label}: {exc} (TFLM rejects these scales)") from None


@rule("tfl.add", "tfl.sub")
def lower_add_sub(lw: Lowerer, op: Op) -> None:
    a, b, y = _binary(lw, op)
    left_shift = 15 if y.dtype.bits == 16 else 20
    pa, pb, po = _add_sub_pairs(lw, a, b, y, left_shift)
    terms = [_scaled_term(lw, t, left_shift, p, len(y.shape)) for t, p in ((a, pa), (b, pb))]
    total = lw.temp(f"{y.name}_sum", y.shape, "i32")
    lw.emit("ADD" if op.kind == "tfl.add" else "SUB", terms, [total])
    emit_mbqm(lw, total, y.name, [po], output_zp=y.quant.zero_point, bounds=fused_bounds(lw, y))


@rule("tfl.mul")
def lower_mul(lw: Lowerer, op: Op) -> None:
    a, b, y = _binary(lw, op)
    pair = quantize_multiplier_exponent(float(a.quant.scale) * float(b.quant.scale) / float(y.quant.scale))
    if a.quant.zero_point == b.quant.zero_point == 0:
        terms, bound = [a.name, b.name], a.dtype.min * b.dtype.min
    else:  # 8-bit: remove the zero points exactly (scale 1.0 = (2^30, 30))
        terms, bound = [], 1
        for t in (a, b):
            term = lw.temp(f"{t.name}_i32", t.shape, "i32")
            lw.emit_rescale(t.name, term, RescaleParams(multiplier=[1 << 30], shift=[30], input_zp=t.quant.zero_point,
                                                        output_zp=0))
            terms.append(term)
            bound *= max(t.dtype.max - t.quant.zero_point, t.quant.zero_point - t.dtype.min)
    product = lw.temp(f"{y.name}_prod", y.shape, "i32")
    lw.emit("MUL", [align_rank(lw, t, len(y.shape)) for t in terms], [product], shift=0)
    emit_mbqm(lw, product, y.name, [pair], output_zp=y.quant.zero_point, bounds=fused_bounds(lw, y),
              value_bound=bound)


@rule("tfl.maximum", "tfl.minimum")
def lower_maximum_minimum(lw: Lowerer, op: Op) -> None:
    (a, b), (y,) = operands(lw, op, (2,))
    same_type(lw, a, b, y)
    if y.dtype.name not in ("i8", "i16", "i32"):
        raise lw.error(f"type {y.dtype} is not supported (i8, i16, i32)")
    expect_shape(lw, y, broadcast_out_shape(lw, [a.shape, b.shape]))
    lw.emit(op.kind[4:].upper(), [align_rank(lw, t.name, len(y.shape)) for t in (a, b)], [y.name])


@rule("tfl.relu")
def lower_relu(lw: Lowerer, op: Op) -> None:
    """ReluQuantized: clamp(MBQM(x - zp_in, m, s) + zp_out) with (m, s) of (double)s_in / (double)s_out. (The TFLM
    source divides in float32; the tflite-micro oracle matches the double quotient on int16 data.)"""
    (x,), (y,) = operands(lw, op, (1,))
    qx, qy = quantized(lw, x), quantized(lw, y)
    same_type(lw, x, y)
    expect_shape(lw, y, x.shape)
    pair = quantize_multiplier_exponent(float(qx.scale) / float(qy.scale))
    emit_mbqm(lw, x.name, y.name, [pair], input_zp=qx.zero_point, output_zp=qy.zero_point,
              bounds=(max(y.dtype.min, qy.zero_point), y.dtype.max))


@rule("tfl.relu6")
def lower_relu6(lw: Lowerer, op: Op) -> None:
    """Relu6Quantized: the stored input clamped to [zp_in, zp_in + round(6 / s_in)] (float32), no rescale."""
    (x,), (y,) = operands(lw, op, (1,))
    qx = quantized(lw, x)
    same_type(lw, x, y)
    expect_shape(lw, y, x.shape)
    six = min(max(round_half_away(f32(6.0) / f32(qx.scale)) + qx.zero_point, x.dtype.min), x.dtype.max)
    lw.emit("CLAMP", [x.name], [y.name], min_val=qx.zero_point, max_val=six)


@rule("tfl.quantize")
def lower_quantize(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, (1,))
    expect_shape(lw, y, x.shape)
    qy = quantized(lw, y, ("i8", "i16", "i32"))
    if x.dtype.is_float:
        _quantize_float(lw, x, y)
        return
    qx = quantized(lw, x, ("i8", "i16", "i32"), any_zero_point=True)  # int16 SOFTMAX outputs have zp -32768
    if x.dtype.bits == 32 and qx.zero_point != 0:
        raise UnsupportedError(f"{lw.label}: int32 input with zero point {qx.zero_point} is not supported")
    pair = quantize_multiplier_exponent(float(qx.scale) / float(qy.scale))
    bound = max(x.dtype.max - qx.zero_point, qx.zero_point - x.dtype.min)
    src, zp = x.name, qx.zero_point
    if x.dtype.bits == 16 and zp:  # a RESCALE takes no 16-bit input zero point: x - zp in int32 first
        wide, src = lw.temp(f"{x.name}_i32", x.shape, "i32"), lw.temp(f"{x.name}_centred", x.shape, "i32")
        lw.emit("CAST", [x.name], [wide])
        lw.emit("ADD", [wide, lw.const(f"{x.name}_zp", np.full((1,) * len(x.shape), -zp), "i32")], [src])
        zp = 0
    emit_mbqm(lw, src, y.name, [pair], input_zp=zp, output_zp=qy.zero_point, value_bound=bound)


def _quantize_float(lw: Lowerer, x: Tensor, y: Tensor) -> None:
    """AffineQuantize: TfLiteRound(x / scale) in float32, + zp in integers, clamped to the type. QUANTIZE rounds
    without the zero point into i32, saturating at the type limits minus zp, and a RESCALE adds it."""
    q = y.quant
    if y.dtype.bits == 32:
        raise UnsupportedError(f"{lw.label}: float to int32 quantization is not supported")
    rounded = lw.temp(f"{y.name}_round", y.shape, "i32")
    lw.emit("QUANTIZE", [x.name], [rounded], scale=float(q.scale), zero_point=0, qmin=y.dtype.min - q.zero_point,
            qmax=y.dtype.max - q.zero_point, rounding="half_away_from_zero")
    lw.emit_rescale(rounded, y.name, RescaleParams(multiplier=[1 << 30], shift=[30], input_zp=0,
                                                   output_zp=q.zero_point))


@rule("tfl.dequantize")
def lower_dequantize(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, (1,))
    expect_shape(lw, y, x.shape)
    if not y.dtype.is_float:
        raise UnsupportedError(f"{lw.label}: dequantize to {y.dtype} is not supported (f32 only)")
    if x.quant is None or x.dtype.name not in ("i8", "i16", "i32"):
        raise lw.error(f"input {x.name!r} must be a quantized i8/i16/i32 tensor")
    if x.quant.kind == "per_tensor":
        lw.emit("DEQUANTIZE", [x.name], [y.name], scale=float(x.quant.scale), zero_point=x.quant.zero_point)
    else:
        lw.emit("DEQUANTIZE", [x.name], [y.name], scale=[float(s) for s in x.quant.scales],
                zero_point=[int(z) for z in x.quant.zero_points], axis=int(x.quant.axis))
