"""TFLite Micro's LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU and PRELU, bit for bit (docs/semantics.md §8.5).

int8: the kernel's integer algorithm (below, written from TFLM's reference kernels with the gemmlowp building
blocks of qcodegen.semantics.tflm_fixedpoint) runs at plan time over all 256 inputs and becomes a TABLE.
int16 (zero points 0):
- LOGISTIC / TANH: TFLM rescales the input to its table scale ((x * m + round) >> shift: a single-round
  RESCALE, or a MUL when shift is 0) and interpolates its 256-entry sigmoid table on |y| (9 / 8 fraction bits,
  mirrored for y < 0): SYMMETRIC_LUT.
- LEAKY_RELU: d >= 0 ? MBQM(d, identity) : +-MBQM(d, |alpha|). MBQM(d) is 0 or has the sign of d, so this is
  max(MBQM(d, id), 0) +- min(MBQM(d, |alpha|), 0): two clamped double-round RESCALEs, ADD (SUB for a negative
  alpha) and a saturating RESCALE to int16.
PRELU (int8/int16 input, int8 alpha tensor): the same split with the negative part
MBQM(min(d, 0) * (alpha - zp_a), m2) (RESCALE, MUL, RESCALE); an int8 PRELU with one alpha value is a TABLE.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...errors import UnsupportedError
from ...fixedpoint import round_half_away
from ...ir.graph import Op, Tensor
from ...ir.quant import QuantType
from ...ir.rescale import RescaleParams
from ...semantics import tflm_fixedpoint as fp
from ...semantics.tflite import Pair, f32, quantize_multiplier_exponent, tosa_scale32
from ..base import Lowerer, rule
from ..common import align_rank
from .common import operands, quantized, same_type

Kernel = Callable[[np.ndarray], np.ndarray]  # int64 input values -> int64 output values

IDENTITY = (1 << 30, 30)  # TOSA RESCALE by exactly 1.0


# --- TFLM's integer kernels (plan time, vectorized over int64 input values) ----------------------------
def _radius_kernel(x: np.ndarray, zp: int, scale: float, body: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The int8 LOGISTIC/TANH frame: d = x - zp is rescaled to Q4.27 by (m, s) from frexp(scale * 2^27)
    (QuantizeMultiplier gives the same pair for any float32 scale: its mantissa has 24 bits, so no rounding
    and no 2^31 fix-up happens); |d| >= radius saturates."""
    m, s = quantize_multiplier_exponent(scale * float(1 << 27))
    radius = fp.calculate_input_radius(4, s, 31)
    d = x - zp
    core = np.clip(body(fp.multiply_by_quantized_multiplier(d, m, s)), -128, 127)
    return np.where(d <= -radius, -128, np.where(d >= radius, 127, core))


def logistic_int8(x: np.ndarray, q_in: QuantType) -> np.ndarray:
    return _radius_kernel(x, q_in.zero_point, q_in.scale, lambda v: fp.rdbpot(fp.logistic(v, 4), 23) - 128)


def tanh_int8(x: np.ndarray, q_in: QuantType) -> np.ndarray:
    return _radius_kernel(x, q_in.zero_point, q_in.scale, lambda v: fp.rdbpot(fp.tanh(v, 4), 24))


def checked_log2(value: float) -> tuple[int, bool]:
    """tflite::CheckedLog2 in float32: (rounded log2, whether value is a power of two within 1e-3)."""
    log2 = f32(f32(np.log(f32(value))) * (f32(1.0) / f32(np.log(f32(2.0)))))
    rounded = f32(round_half_away(float(log2)))
    return int(rounded), abs(float(f32(log2 - rounded))) < 1e-3


def int16_sigmoid_prescale(scale: float, tanh: bool) -> tuple[int, int]:
    """The int16 LOGISTIC/TANH input (multiplier, right shift) of TFLM's Prepare and Eval: y = (x * m +
    round) >> shift maps the input to the table scale 1/(3 * 4096) (2^-12 scales: m = 3 << shift, shift 0)."""
    log2, pot = checked_log2(scale)
    shift = 12 + log2
    if pot and shift in ((0, 1) if tanh else (0,)):
        return 3 << shift, 0
    multiplier = scale * 4096.0 * 3.0
    shift = 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift


# SYMMETRIC_LUT attributes reproducing TFLM's int16 post-processing (see the primitive's docstring):
# logistic: y >= 0 ? (R + 2^9) >> 10 : (2^25 - R + 2^9 - 1) >> 10 = 32768 - ((R + 2^9) >> 10);
# tanh:     y >= 0 ? (R - 2^23 + 2^7) >> 8 : (2^23 - R + 2^7 - 1) >> 8 = -((R - 2^23 + 2^7) >> 8).
LUT16 = {
    "tfl.logistic": dict(frac_bits=9, saturation=0x7FFF << 10, bias=1 << 9, shift=10, neg_offset=1 << 15),
    "tfl.tanh": dict(frac_bits=8, saturation=0xFFFF << 8, bias=(1 << 7) - (1 << 23), shift=8, neg_offset=0),
}


def downscale_multiplier_16(m: int) -> int:
    """tflite::DownScaleInt32ToInt16Multiplier: round a Q0.31 multiplier to Q0.15, saturating."""
    return fp.I16_MAX if m >= fp.I32_MAX - (1 << 15) else (m + (1 << 15)) >> 16


def hard_swish_params(q_in: QuantType, q_out: QuantType) -> tuple[Pair, Pair]:
    """(output multiplier, reluish multiplier) as (Q0.15 multiplier, exponent), from float32 scales."""
    hires = f32(f32(1.0 / 128.0) * f32(q_in.scale))
    pairs = []
    for real in (hires / f32(q_out.scale), hires / f32(3.0 / 32768.0)):
        m, e = quantize_multiplier_exponent(float(f32(real)))
        pairs.append((downscale_multiplier_16(m), e))
    return pairs[0], pairs[1]


def _rdbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT on int16 (the mask and threshold are int16 values)."""
    mask = int(fp.wrap((1 << exponent) - 1, 16))
    remainder = fp.wrap(x & mask, 16)
    threshold = fp.wrap((mask >> 1) + (x < 0), 16)
    return fp.wrap((x >> exponent) + (remainder > threshold), 16)


def hard_swish_int8(x: np.ndarray, q_in: QuantType, q_out: QuantType) -> np.ndarray:
    """reference_ops::HardSwish<int8_t> (int16 fixed point throughout)."""
    (m_out, e_out), (m_relu, e_relu) = hard_swish_params(q_in, q_out)
    hires = fp.wrap(fp.wrap(x - q_in.zero_point, 16) * 128, 16)
    preshift_out = fp.srdhm(hires, m_out, bits=16)
    reluish = hires
    if e_relu > 0:
        reluish = fp.saturate(reluish * (1 << (e_relu - 1)), 16)
    reluish = fp.srdhm(reluish, m_relu, bits=16)
    if e_relu > 0:
        reluish = fp.saturate(reluish * 2, 16)
    if e_relu < 0:
        reluish = _rdbpot16(reluish, -e_relu)
    reluish = (reluish + (1 << 15)) >> 1
    out = _rdbpot16(fp.sdhm16(reluish, preshift_out), -e_out)
    return np.clip(fp.wrap(out + q_out.zero_point, 16), -128, 127)


def leaky_relu_pairs(q_in: QuantType, q_out: QuantType, alpha: float) -> tuple[Pair, Pair, bool]:
    """(identity pair, |alpha| pair, alpha < 0): TFLM forms both ratios in float32."""
    alpha_real = float(f32(f32(f32(q_in.scale) * f32(alpha)) / f32(q_out.scale)))
    identity_real = float(f32(f32(q_in.scale) / f32(q_out.scale)))
    return quantize_multiplier_exponent(identity_real), quantize_multiplier_exponent(abs(alpha_real)), alpha_real < 0


def leaky_relu_values(x: np.ndarray, q_in: QuantType, q_out: QuantType, alpha: float, dt_bits: int) -> np.ndarray:
    """reference_ops::QuantizeLeakyRelu."""
    (mi, si), (ma, sa), negative = leaky_relu_pairs(q_in, q_out, alpha)
    d = x - q_in.zero_point
    scaled = fp.multiply_by_quantized_multiplier(d, ma, sa)
    out = np.where(d >= 0, fp.multiply_by_quantized_multiplier(d, mi, si), -scaled if negative else scaled)
    return np.clip(out + q_out.zero_point, -(1 << (dt_bits - 1)), (1 << (dt_bits - 1)) - 1)


def prelu_pairs(q_in: QuantType, q_alpha: QuantType, q_out: QuantType) -> tuple[Pair, Pair]:
    """CalculatePreluParams: in/out and in*alpha/out in double."""
    return (quantize_multiplier_exponent(q_in.scale / q_out.scale),
            quantize_multiplier_exponent(q_in.scale * q_alpha.scale / q_out.scale))


def prelu_values(x: np.ndarray, alpha: np.ndarray, q_in: QuantType, q_alpha: QuantType, q_out: QuantType,
                 dt_bits: int) -> np.ndarray:
    """reference_ops::BroadcastPrelu4DSlow (alpha broadcast against x)."""
    (m1, s1), (m2, s2) = prelu_pairs(q_in, q_alpha, q_out)
    d = x - q_in.zero_point
    negative = fp.multiply_by_quantized_multiplier(fp.wrap(d * (alpha - q_alpha.zero_point)), m2, s2)
    out = np.where(d >= 0, fp.multiply_by_quantized_multiplier(d, m1, s1), negative)
    return np.clip(out + q_out.zero_point, -(1 << (dt_bits - 1)), (1 << (dt_bits - 1)) - 1)


# --- lowering ----------------------------------------------------------------------------------------
def _unary(lw: Lowerer, op: Op) -> tuple[Tensor, Tensor, QuantType, QuantType]:
    (x,), (y,) = operands(lw, op, (1,))
    same_type(lw, x, y)
    if y.shape != x.shape:
        raise lw.error(f"output shape {list(y.shape)} differs from input shape {list(x.shape)}")
    return x, y, quantized(lw, x), quantized(lw, y)


SIGMOID_TABLE_ENV = "QC_TFLM_SIGMOID_TABLE"


def sigmoid_table_u16(where: str) -> np.ndarray:
    """TFLM's sigmoid_table_uint16 (256 entries, Q0.16), which its int16 LOGISTIC and TANH interpolate.
    Its entries are hand-tuned (no rounding of sigmoid(i/24) reproduces them), and qcodegen ships no
    third-party tables: the user points QC_TFLM_SIGMOID_TABLE at a text file holding the 256 values."""
    path = os.environ.get(SIGMOID_TABLE_ENV)
    if not path:
        raise UnsupportedError(f"{where}: int16 LOGISTIC/TANH need TFLM's sigmoid_table_uint16: save its 256 values "
                               f"(tensorflow/lite/kernels/internal/common.h) to a text file and set "
                               f"{SIGMOID_TABLE_ENV} to its path")
    try:
        values = np.array([int(v) for v in re.findall(r"-?\d+", Path(path).read_text())], np.int64)
    except OSError as exc:
        raise UnsupportedError(f"{where}: cannot read {SIGMOID_TABLE_ENV}={path}: {exc.strerror}") from None
    if values.shape != (256,) or values.min() < 0 or values.max() > 0xFFFF or np.any(np.diff(values) < 0):
        raise UnsupportedError(f"{where}: {SIGMOID_TABLE_ENV}={path} must hold 256 non-decreasing u16 values")
    return values


def shared_const(lw: Lowerer, name: str, values: np.ndarray, dt: str) -> str:
    """A model-independent constant table, emitted once per schedule however many ops use it."""
    buf = lw.schedule.buffers.get(name)
    if buf is not None and buf.data is not None and np.array_equal(buf.data, values):
        return name
    return lw.const(name, values, dt)


def emit_table8(lw: Lowerer, x: Tensor, y: Tensor, kernel: Kernel) -> None:
    """y = TABLE(x) with the kernel evaluated on every int8 value."""
    values = kernel(np.arange(-128, 128, dtype=np.int64))
    table = lw.const(f"{y.name}_table", values, "i8")
    lw.emit("TABLE", [x.name, table], [y.name])


def _rescale(lw: Lowerer, src: str, dst: str, pair: Pair, input_zp: int = 0, output_zp: int = 0,
             **clamp: int) -> None:
    """RESCALE computing MBQM(x - input_zp, pair) + output_zp (TFLite double rounding), optionally clamped."""
    m, shift = tosa_scale32(pair)
    lw.emit_rescale(src, dst, RescaleParams(multiplier=[m], shift=[shift], input_zp=int(input_zp),
                                            output_zp=int(output_zp), rounding="double_round", **clamp))


def _identity(lw: Lowerer, src: str, dst: str, input_zp: int = 0, output_zp: int = 0, **clamp: int) -> None:
    lw.emit_rescale(src, dst, RescaleParams(multiplier=[IDENTITY[0]], shift=[IDENTITY[1]], input_zp=int(input_zp),
                                            output_zp=int(output_zp), rounding="double_round", **clamp))


@rule("tfl.logistic", "tfl.tanh")
def lower_sigmoid(lw: Lowerer, op: Op) -> None:
    x, y, q_in, q_out = _unary(lw, op)
    if x.dtype.name == "i8":
        if op.kind == "tfl.logistic":
            if q_out.zero_point != -128:
                raise lw.error(f"int8 LOGISTIC needs output zero point -128, got {q_out.zero_point}")
            emit_table8(lw, x, y, lambda v: logistic_int8(v, q_in))
        else:
            emit_table8(lw, x, y, lambda v: tanh_int8(v, q_in))
        return
    log2, pot = checked_log2(q_out.scale)
    if not pot or log2 != -15:
        raise lw.error(f"int16 {op.kind[4:].upper()} needs output scale 2^-15, got {q_out.scale!r}")
    multiplier, shift = int16_sigmoid_prescale(q_in.scale, op.kind == "tfl.tanh")
    scaled = lw.temp(f"{y.name}_in", x.shape, "i32")
    if shift == 0:  # y = x * m exactly
        if multiplier > fp.I16_MAX:
            raise UnsupportedError(f"{lw.label}: input scale {q_in.scale!r} is too large for TFLM's int16 kernel")
        m = lw.const(f"{y.name}_m", np.full((1,) * len(x.shape), multiplier), "i16")
        lw.emit("MUL", [x.name, m], [scaled], shift=0)
    else:  # (x * m + 2^(shift-1)) >> shift as a single-round RESCALE; shift >= 17 meets the value REQUIRE
        k = max(0, 17 - shift)
        lw.emit_rescale(x.name, scaled, RescaleParams(multiplier=[multiplier << k], shift=[shift + k], input_zp=0,
                                                      output_zp=0))
    table = shared_const(lw, "tflm_sigmoid_table", sigmoid_table_u16(lw.label), "u16")
    lw.emit("SYMMETRIC_LUT", [scaled, table], [y.name], **LUT16[op.kind])


@rule("tfl.hard_swish")
def lower_hard_swish(lw: Lowerer, op: Op) -> None:
    x, y, q_in, q_out = _unary(lw, op)
    if x.dtype.name != "i8":
        raise UnsupportedError(f"{lw.label}: TFLite Micro's HARD_SWISH supports int8 only, got {x.dtype}")
    if hard_swish_params(q_in, q_out)[0][1] > 0:
        raise lw.error("HARD_SWISH output multiplier exponent must be <= 0 (TFLM)")
    emit_table8(lw, x, y, lambda v: hard_swish_int8(v, q_in, q_out))


def _split_sum(lw: Lowerer, y: Tensor, positive: str, negative: str, subtract: bool, q_out: QuantType) -> None:
    """y = saturate(positive +- negative + zp_out): ADD/SUB in int32, then an exact RESCALE to y's type."""
    total = lw.temp(f"{y.name}_sum", y.shape, "i32")
    lw.emit("SUB" if subtract else "ADD", [positive, negative], [total])
    _identity(lw, total, y.name, output_zp=q_out.zero_point)


@rule("tfl.leaky_relu")
def lower_leaky_relu(lw: Lowerer, op: Op) -> None:
    x, y, q_in, q_out = _unary(lw, op)
    alpha = float(lw.attr("alpha"))
    if not math.isfinite(alpha):
        raise lw.error(f"alpha {alpha!r} is not finite")
    if x.dtype.name == "i8":
        emit_table8(lw, x, y, lambda v: leaky_relu_values(v, q_in, q_out, alpha, 8))
        return
    identity, scaled, negative = leaky_relu_pairs(q_in, q_out, alpha)
    pos, neg = lw.temp(f"{y.name}_pos", x.shape, "i32"), lw.temp(f"{y.name}_neg", x.shape, "i32")
    _rescale(lw, x.name, pos, identity, out_min=0)
    _rescale(lw, x.name, neg, scaled, out_max=0)
    _split_sum(lw, y, pos, neg, negative, q_out)


@rule("tfl.prelu")
def lower_prelu(lw: Lowerer, op: Op) -> None:
    (x, a), (y,) = operands(lw, op, (2,))
    same_type(lw, x, y)
    q_in, q_out = quantized(lw, x), quantized(lw, y)
    q_alpha = quantized(lw, a, ("i8",))  # TFLM reads alpha as int8 for int8 and int16 inputs
    try:
        out_shape = np.broadcast_shapes(x.shape, a.shape)
    except ValueError:
        raise lw.error(f"alpha shape {list(a.shape)} does not broadcast to {list(x.shape)}") from None
    if out_shape != x.shape or y.shape != x.shape:
        raise lw.error(f"output shape {list(y.shape)} must equal the input shape {list(x.shape)}")
    if x.dtype.name == "i8" and a.is_const and np.unique(a.data).size == 1:
        alpha = int(np.asarray(a.data).flat[0])
        emit_table8(lw, x, y, lambda v: prelu_values(v, np.int64(alpha), q_in, q_alpha, q_out, 8))
        return
    pair1, pair2 = prelu_pairs(q_in, q_alpha, q_out)
    pos, dneg = lw.temp(f"{y.name}_pos", x.shape, "i32"), lw.temp(f"{y.name}_dneg", x.shape, "i32")
    _rescale(lw, x.name, pos, pair1, input_zp=q_in.zero_point, out_min=0)
    _identity(lw, x.name, dneg, input_zp=q_in.zero_point, out_max=0)
    if a.is_const:
        shape = (1,) * (len(x.shape) - len(a.shape)) + a.shape
        alpha32 = lw.const(f"{y.name}_alpha", (a.data.astype(np.int64) - q_alpha.zero_point).reshape(shape), "i32")
    else:
        alpha32 = lw.temp(f"{a.name}_i32", a.shape, "i32")
        _identity(lw, a.name, alpha32, input_zp=q_alpha.zero_point)
        alpha32 = align_rank(lw, alpha32, len(x.shape))
    product, neg = lw.temp(f"{y.name}_prod", x.shape, "i32"), lw.temp(f"{y.name}_neg", x.shape, "i32")
    lw.emit("MUL", [dneg, alpha32], [product], shift=0)
    _rescale(lw, product, neg, pair2)
    _split_sum(lw, y, pos, neg, False, q_out)
