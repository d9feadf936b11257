"""TFLite Micro's SOFTMAX, bit for bit (docs/semantics.md §8.6): int8 input (reference_ops::Softmax, int8 or int16
output) and int16 input (reference_ops::SoftmaxInt16).

int8, plan time: PreprocessSoftmaxScaling(beta, s_in, 5) -> (m, s) with the real multiplier
min(beta * s_in * 2^26, 2^31 - 1) in double; diff_min = -CalculateInputRadius(5, s). The row difference
d = x - max(row) takes 256 values, so exp_on_negative_values(MBQM_GT1(d, m, s)) (Q5.26 -> Q0.31) becomes a
256-entry table, with 0 for d < diff_min (those elements add nothing and output the type minimum, as TFLM's
skip branch does). The SOFTMAX primitive does the row sum, GetReciprocal and the final rounding at run time.

int16: TFLM's two 513-entry LUTs (exp on [-10, 0] and 1 / (1 + x) on [0, 1]) are filled in float32 by
LUTPopulate; tflm_fixedpoint.lut_populate_int16 repeats that arithmetic (std::exp as the correctly rounded expf).
The multiplier is QuantizeMultiplier(s_in * beta / (10 / 65535)) in double.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...ir.graph import Op, Tensor
from ...primitives.softmax import TABLE_SIZE
from ...semantics import tflm_fixedpoint as fp
from ...semantics.tflite import Pair, f32, quantize_multiplier_exponent
from ..base import Lowerer, rule
from .activations import shared_const
from .common import operands, quantized

SCALED_DIFF_INTEGER_BITS = 5
MAX_REAL_MULTIPLIER = float((1 << 31) - 1)
# (input, output type) -> the output (zero point, scale) TFLM accepts; int8 output needs the scale exactly,
# int16 output within 0.1%
OUTPUT_QUANT = {("i8", "i8"): (-128, 1.0 / 256), ("i8", "i16"): (-32768, 1.0 / 65536),
                ("i16", "i16"): (0, 1.0 / 32768)}


def softmax_params(beta: float, input_scale: float) -> tuple[Pair, int] | None:
    """((m, s), diff_min) of PreprocessSoftmaxScaling and CalculateInputRadius; None where TFLM's
    QuantizeMultiplierGreaterThanOne check fails (beta * s_in * 2^26 <= 1)."""
    real = min(float(f32(beta)) * float(f32(input_scale)) * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)),
               MAX_REAL_MULTIPLIER)
    if real <= 1.0:
        return None
    pair = quantize_multiplier_exponent(real)
    return pair, -fp.calculate_input_radius(SCALED_DIFF_INTEGER_BITS, pair[1])


def exp_table(pair: Pair, diff_min: int) -> np.ndarray:
    """exp_table[k] = exp_on_negative_values(MBQM_GT1(-k)) in Q0.31, 0 where -k < diff_min."""
    d = -np.arange(TABLE_SIZE, dtype=np.int64)
    scaled = fp.multiply_by_quantized_multiplier(d, *pair)  # s >= 0: SRDHM(d * 2^s, m), as MBQM_GT1
    return np.where(d >= diff_min, fp.exp_on_negative_values(scaled, SCALED_DIFF_INTEGER_BITS), 0)


@cache
def int16_luts() -> tuple[np.ndarray, np.ndarray]:
    """TFLM's int16 softmax LUTs: exp(x) for x in [-10, 0] and 1 / (1 + x) for x in [0, 1], both to [0, 2)."""
    span = f32(fp.I16_MAX - fp.I16_MIN)
    exp_lut = fp.lut_populate_int16(f32(10.0) / span, fp.I16_MAX, f32(2.0) / span, 0, fp.expf)
    recip_lut = fp.lut_populate_int16(f32(1.0) / span, fp.I16_MIN, f32(2.0) / span, 0,
                                      lambda v: f32(1.0) / (f32(1.0) + v))
    return exp_lut, recip_lut


def _check_output(lw: Lowerer, x: Tensor, y: Tensor) -> None:
    key = (x.dtype.name, y.dtype.name)
    if key not in OUTPUT_QUANT or y.quant is None or y.quant.kind != "per_tensor":
        raise lw.error(f"SOFTMAX from {x.dtype} needs a per-tensor quantized output of type "
                       f"{' or '.join(o for i, o in OUTPUT_QUANT if i == x.dtype.name)}, got {y.dtype}")
    zp, scale = OUTPUT_QUANT[key]
    if y.quant.zero_point != zp:
        raise lw.error(f"{y.dtype} SOFTMAX output needs zero point {zp}, got {y.quant.zero_point}")
    got, want = f32(y.quant.scale), f32(scale)
    if got != want if y.dtype.name == "i8" else abs(got - want) > f32(0.001) * want:
        raise lw.error(f"{y.dtype} SOFTMAX output needs scale {scale!r}, got {y.quant.scale!r}")


def _lower_int16(lw: Lowerer, x: Tensor, y: Tensor) -> None:
    q_in = quantized(lw, x)
    m, s = quantize_multiplier_exponent(q_in.scale * float(f32(lw.attr("beta", 1.0))) / (10.0 / 65535.0))
    exp_lut, recip_lut = int16_luts()
    exp_name = shared_const(lw, "tflm_softmax_exp_lut", exp_lut, "i16")
    recip_name = shared_const(lw, "tflm_softmax_recip_lut", recip_lut, "i16")
    lw.emit("SOFTMAX", [x.name, exp_name, recip_name], [y.name], multiplier=m, shift=s)


@rule("tfl.softmax")
def lower_softmax(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, (1,))
    if y.shape != x.shape or not x.shape:
        raise lw.error(f"output shape {list(y.shape)} must equal the input shape {list(x.shape)} (rank >= 1)")
    _check_output(lw, x, y)
    if x.dtype.name == "i16":
        _lower_int16(lw, x, y)
        return
    q_in = quantized(lw, x, ("i8",))
    params = softmax_params(float(lw.attr("beta", 1.0)), q_in.scale)
    if params is None:
        raise lw.error(f"beta * input scale * 2^26 must exceed 1 (TFLM), got beta {lw.attr('beta', 1.0)!r} "
                       f"and scale {q_in.scale!r}")
    table = lw.const(f"{y.name}_exp", exp_table(*params), "i32")
    lw.emit("SOFTMAX", [x.name, table], [y.name])
