"""Kernel choice for RISC-V RVV 1.0 (target riscv64-rvv; kernels in runtime/rvv/qc_rvv.h, call sites in
templates/rvv/_dot.c.j2, the depthwise loops in the shared skeleton templates/vector/_dw_blocks.c.j2).

int8 x int8 convolutions with weight zero point 0 and constant weights:
- CONV2D whose output channels are dot products of whole rows (the `channels` hook): VWMUL + VWREDSUM over
  vsetvl strips, four weight rows per input load (qc_rvv_dot_rows4_s8, the rows after the last block of four by
  qc_rvv_dot_s8); a FUSED_CONV whose requantization has the vector form (32-bit scale, single rounding or double
  rounding with shifts > 31, int8 or int16 outputs) stores the pixel's channels in vsetvl strips
  (qc_rvv_requantize_pixel), others store channel by channel; the input zero point as izp x the row sums made at
  generation time;
- DEPTHWISE_CONV2D (multiplier 1, at most 4096 taps, int32 sums stored or requantized): blocks of 16 channels in one
  int32 register group over the taps, stored as int32, requantized in vector form, or channel by channel.
Convolutions whose weights are not constant run the portable loops."""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.schedule import StepIO
from ..conv import ConvStep, Requantization
from ..generic import conv_or_portable, portable
from ..names import ArrayNames
from ..record import KernelChoice, step_array
from . import layouts

FILES = ("rvv/qc_rvv.h",)
STEP_ATTRIBUTES = ""
MAX_DW_TAPS = 4096  # |the zero-point start| + taps 2^14 < 2^30 (vector/_dw_blocks.c.j2)


@dataclass(frozen=True)
class VectorRequantization:
    """The C initializer of a qc_rvv_rq (runtime/rvv/qc_rvv.h) for a FUSED_CONV whose requantization has the vector
    form: per channel (the step's p1_multiplier / p1_shift arrays) or the literal multiplier and shift, rounding
    (dbl), output zero point, range and bits; exceptions: the step's p1_exc_* arrays (the exceptions to the single
    rounding, qc_rvv_except)."""

    per_channel: bool
    multiplier: int
    shift: int
    dbl: int
    zp: int
    lo: int
    hi: int
    bits: int
    exceptions: bool


def vector_requantization(rq: Requantization | None, out_ctype: str) -> VectorRequantization | None:
    """The vector form of rq (qc_rvv_requantize): a 32-bit scale, SINGLE_ROUND or DOUBLE_ROUND with every shift > 31
    (qc_scale32_double_gt31), outputs of 8 or 16 bits, the exceptions to the single rounding applied in vectors
    (qc_rvv_except); None when it has none."""
    if not (rq and rq.scale32 and rq.fn in ("qc_scale32_single", "qc_scale32_double_gt31")
            and out_ctype in ("int8_t", "int16_t")):
        return None
    return VectorRequantization(rq.per_channel, rq.multipliers[0], rq.shifts[0],
                                int(rq.fn == "qc_scale32_double_gt31"), rq.output_zp, rq.lo, rq.hi,
                                8 if out_ctype == "int8_t" else 16, bool(rq.exceptions))


@dataclass(frozen=True)
class DotRows:
    """form "dot_rows": each output pixel's channels as dot products of rows, four rows a call for the first
    `blocked` rows (qc_rvv_dot_rows4_s8), one at a time after (qc_rvv_dot_s8); the zero-point terms in
    arrays["zero_point_terms"] when izp != 0; rq: stored in vsetvl strips by qc_rvv_requantize_pixel (the sums
    first into qc_acc), else channel by channel by the template's store."""

    rows: int
    k: int
    blocked: int
    rq: VectorRequantization | None


@dataclass(frozen=True)
class DepthwiseBlocks:
    """form "dw_blocks" (vector/_dw_blocks.c.j2 with blocks of 16 channels): store "s32" (the int32 sums), "vector"
    (qc_rvv_requantize with rq) or "scalar" (channel by channel by the template's store)."""

    store: str
    rq: VectorRequantization | None


def choose(io: StepIO, index: int, names: ArrayNames, layout: str) -> KernelChoice:
    c = conv_or_portable(io)
    if isinstance(c, KernelChoice):
        return c
    if c.op == "CONV2D":
        return _conv(c, names) or portable(io, _why_not_conv(c))
    return _depthwise(c) or portable(io, _why_not_depthwise(c))


def _why_not_conv(c: ConvStep) -> str:
    if not c.channels_hook:
        return "a window of more than 4096 elements: summed tap by tap"
    return "not int8 x int8 with weight zero point 0, constant weights and rows of at most 65,535 elements"


def _conv(c: ConvStep, names: ArrayNames) -> KernelChoice | None:
    if not (c.channels_hook and c.int8 and c.wzp == 0 and c.constant_weights and c.k <= 65535):
        return None
    arrays = {}
    if c.izp != 0:
        arrays["zero_point_terms"] = step_array(names, "izp_terms", layouts.zero_point_terms(c.weight_rows(), c.izp))
    rq = vector_requantization(c.rq, c.y.dtype.ctype)
    params = DotRows(c.rows, c.k, c.rows // 4 * 4, rq)
    reason = f"int8 x int8, weight zero point 0, constant rows of {c.k} elements"
    if rq:
        reason += ", requantized in vector form (32-bit scale, single or double rounding with shifts > 31)"
    return KernelChoice("qc_rvv_dot_rows4_s8", reason, form="dot_rows", arrays=arrays, params=params, files=FILES)


def _why_not_depthwise(c: ConvStep) -> str:
    return (f"not int8 x int8 with weight zero point 0, multiplier 1, at most {MAX_DW_TAPS} taps and int32 sums "
            "stored or requantized")


def _depthwise(c: ConvStep) -> KernelChoice | None:
    if not (c.int8 and c.wzp == 0 and c.m == 1 and c.taps <= MAX_DW_TAPS and c.y.dtype.ctype != "int64_t"
            and (c.rq is not None or c.y.dtype.ctype == "int32_t")):
        return None
    rq = vector_requantization(c.rq, c.y.dtype.ctype)
    store = "s32" if c.rq is None else "vector" if rq else "scalar"
    reason = f"int8 x int8, weight zero point 0, multiplier 1, {c.taps} taps, stored {store}"
    return KernelChoice("qc_rvv_dw_tap", reason, form="dw_blocks", params=DepthwiseBlocks(store, rq), files=FILES)


__all__ = ["STEP_ATTRIBUTES", "choose", "vector_requantization"]
