"""Kernel choice for AArch64 NEON (targets aarch64-neon and, with SDOT, aarch64-dotprod; kernels in
runtime/aarch64/qc_neon.h and qc_neon_sdot.h, call sites in templates/neon/_dot.c.j2).

int8 x int8 convolutions with weight zero point 0, rows of at most 65,535 elements (the input-zero-point terms
made at generation time, so weights read at run time need izp = 0):
- CONV2D requantized to int8 / int16 by a vector form (scale32, SINGLE_ROUND, or DOUBLE_ROUND with every shift
  > 31), at least 8 output channels: with SDOT (aarch64-dotprod) and constant weights, blocks of 16 and 8 rows by
  SDOT by element on weights re-laid sdot_4x4 (a gathered window padded to a multiple of 8: sdot_4x4_pad8),
  output pixels in pairs from 16 rows of at least 16 elements (qc_neon_conv_sdot*); else blocks of 8 rows of 4-row
  dot products (qc_neon_conv_s8 / _s16); requantized in vector lanes;
- other CONV2D: 4 rows per dot product, int32 accumulators (qc_neon_conv_s32), stored by the step (requantized by
  the portable scalar form);
- DEPTHWISE_CONV2D (multiplier 1, at most 4096 taps, int32 or requantized outputs): blocks of 16 channels in
  registers over the taps (pairs of taps summed in int16 when no weight is -128), requantized in vector lanes by
  the same forms (qc_neon_dw_s8 / _s16) or int32 sums (qc_neon_dw_s32).
Everything else runs the portable loops."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ...ir.schedule import StepIO
from ...primitives.rescale import exception_list
from ..conv import PATCH_LIMIT, ConvStep, Requantization, loops_scratch
from ..generic import conv_or_portable, portable
from ..names import ArrayNames
from ..record import ConstArray, KernelChoice, const_array, step_array
from . import layouts

FILES = ("aarch64/qc_neon.h",)
SDOT_FILES = FILES + ("aarch64/qc_neon_sdot.h",)
OUTPUTS = {"i8": "s8", "i16": "s16"}  # the requantized outputs of the vector forms
STEP_ATTRIBUTES = ""
LAYOUTS = ("compact",)  # no layout trades flash for instructions here
MIN_PAIR_ROWS = 16  # measured: below, the window copy and the branches of a pair cost more than the shared loads


@dataclass(frozen=True)
class Requant:
    """qc_neon_rq_params: per channel (the multipliers and minus the shifts of the `channels` channels in the
    choice's arrays "multipliers", "neg_shifts"; the call site widens the shifts into int64 once per step) or per
    tensor (multiplier, shift); dbl: DOUBLE_ROUND (shifts > 31); the output zero point and clamp; exceptions: how
    many accumulators are exceptions to the single rounding (the choice's arrays "exc_channel", "exc_acc",
    "exc_value": the kernel then stores int32 sums, qc_neon_rq_array requantizes them and qc_neon_except applies
    the exceptions)."""

    per_channel: bool
    channels: int
    multiplier: int
    shift: int
    dbl: int
    zp: int
    lo: int
    hi: int
    exceptions: int = 0


@dataclass(frozen=True)
class Conv:
    """forms "conv_s32" (fn computes the int32 accumulators of every output channel of a pixel: into the output
    when `to_output`, else into an array that the step's store requantizes), "conv_rq" (fn requantizes them: rq),
    "conv_sdot" and "conv_sdot2" (SDOT by element, one pixel or pixels in pairs: fn2 for a pair, fn for a last
    odd pixel). rows, k: the weight rows and their length; kn: the re-laid rows' length (the gathered window's,
    padded to a multiple of 8); window_length: the gathered window's length (0: as it is)."""

    fn: str
    fn2: str
    rows: int
    k: int
    kn: int
    pixels: int
    bias_per_channel: bool
    rq: Requant | None
    to_output: bool


@dataclass(frozen=True)
class Depthwise:
    """form "dw": fn per output pixel (interior or border); the input image ih x iw x n, the window kh x kw with
    dilations dy, dx and pad_value; pairs: no weight is -128 (taps summed in pairs in int16); rq: the vector
    requantization (fn qc_neon_dw_s8 / _s16), else int32 sums (qc_neon_dw_s32) into the output (`to_output`) or into
    an array that the step's store requantizes."""

    fn: str
    n: int
    ih: int
    iw: int
    kh: int
    kw: int
    dy: int
    dx: int
    pad_value: int
    pairs: bool
    bias_per_channel: bool
    rq: Requant | None
    to_output: bool


def choose(io: StepIO, index: int, names: ArrayNames, layout: str, sdot: bool = False) -> KernelChoice:
    """The choice for a step on aarch64-neon (sdot: aarch64-dotprod)."""
    c = conv_or_portable(io)
    if isinstance(c, KernelChoice):
        return c
    why_not = _why_not(c)
    if why_not:
        return portable(io, why_not)
    choice = _conv(c, names, sdot) if c.op == "CONV2D" else _depthwise(c, names)
    return dataclasses.replace(choice, stack_scratch=_stack_scratch(c, choice))


def _stack_scratch(c: ConvStep, choice: KernelChoice) -> int:
    """Bytes of the stack arrays of the step's C (templates/neon/_dot.c.j2): the per-channel shifts widened to int64
    (qc_nsh), the int32 sums (qc_acc) of a pixel the kernel does not requantize, the even pixel's window of
    conv_sdot2 (qc_x0) and a convolution's gathered window."""
    p = choice.params
    nsh = 8 * p.rq.channels if p.rq is not None and p.rq.per_channel else 0
    if choice.form == "dw":
        sums = bool(p.rq.exceptions) if p.rq is not None else not p.to_output
    else:
        sums = choice.form == "conv_s32" and not p.to_output
    acc = 4 * (p.n if choice.form == "dw" else p.rows) if sums else 0
    x0 = p.kn if choice.form == "conv_sdot2" else 0
    return nsh + acc + x0 + loops_scratch(c, "", choice.window_length)


def _why_not(c: ConvStep) -> str:
    """Why no NEON kernel takes the step ("" when one does)."""
    if c.op == "CONV2D" and not c.channels_hook:
        return f"window of {c.k} elements > {PATCH_LIMIT}: summed tap by tap"
    if not (c.int8 and c.wzp == 0 and c.k <= 65535):
        return "not int8 x int8 with weight zero point 0 and rows of at most 65,535 elements"
    if c.izp != 0 and not c.constant_weights:
        return "weights read at run time with an input zero point (its terms are made at generation time)"
    if c.op == "DEPTHWISE_CONV2D" and not (c.m == 1 and c.taps <= 4096 and c.y.dtype.ctype != "int64_t"
                                           and (c.rq is not None or c.y.dtype.ctype == "int32_t")):
        return "depthwise with a channel multiplier, more than 4096 taps, or not int32 / requantized outputs"
    return ""


def _vector_rq(c: ConvStep) -> bool:
    """The step's requantization has the vector form of qc_neon_rq8 (qc_neon_scale32x4)."""
    rq = c.rq
    return (rq is not None and rq.scale32 and rq.fn in ("qc_scale32_single", "qc_scale32_double_gt31")
            and c.y.dtype.name in OUTPUTS)



def _requant(rq: Requantization, names: ArrayNames) -> tuple[Requant, dict[str, ConstArray]]:
    """The Requant of the vector form and its per-channel arrays (the multipliers; minus the shifts as int8, widened
    to SRSHL's int64 operands once per step: measured, int64 arrays made at generation time take at most 0.1% fewer
    instructions and ~3.6 KB less .text, but 7 more bytes of .rodata per channel, +19 KB on MobileNetV1)."""
    dbl = int(rq.fn == "qc_scale32_double_gt31")
    listed = exception_list(rq.exceptions, rq.lo, rq.hi) if rq.exceptions else {}
    arrays = {key: step_array(names, key, values) for key, values in listed.items()}
    if not rq.per_channel:
        return Requant(False, 0, rq.multipliers[0], rq.shifts[0], dbl, rq.output_zp, rq.lo, rq.hi,
                       len(rq.exceptions)), arrays
    arrays.update(multipliers=step_array(names, "rq_multipliers", np.array(rq.multipliers, np.int32)),
                  neg_shifts=step_array(names, "rq_neg_shifts", layouts.neg_shifts(rq.shifts)))
    return Requant(True, len(rq.shifts), 0, 0, dbl, rq.output_zp, rq.lo, rq.hi, len(rq.exceptions)), arrays


def _zero_point_terms(c: ConvStep, names: ArrayNames) -> dict[str, ConstArray]:
    if c.izp == 0:
        return {}
    terms = layouts.zero_point_terms(c.weight_rows(), c.rows, c.izp)
    return {"zero_point_terms": step_array(names, "izp_terms", terms)}


def _conv(c: ConvStep, names: ArrayNames, sdot: bool) -> KernelChoice:
    arrays = _zero_point_terms(c, names)
    reason = f"int8 x int8, weight zero point 0, rows of {c.k} elements"
    if not (_vector_rq(c) and c.rows >= 8):
        params = Conv("qc_neon_conv_s32", "", c.rows, c.k, c.k, c.pixels, c.bias_per_channel, None, c.rq is None)
        why = "int32 outputs" if c.rq is None else "fewer than 8 rows" if _vector_rq(c) else \
            "a requantization without a vector form (the portable scalar one)"
        return KernelChoice(params.fn, f"{reason}, {why}: 4 rows per dot product", form="conv_s32", arrays=arrays,
                            params=params, step_constants=c.rq is not None, files=FILES)
    assert c.rq is not None
    rq, rq_arrays = _requant(c.rq, names)
    arrays.update(rq_arrays)
    out = OUTPUTS[c.y.dtype.name]
    reason += f", {c.rows} rows, requantized to {c.y.dtype.name} in vector lanes"
    if rq.exceptions:
        params = Conv("qc_neon_conv_s32", "", c.rows, c.k, c.k, c.pixels, c.bias_per_channel, rq, False)
        return KernelChoice(params.fn, f"{reason} after 4 rows per dot product into int32, then its exceptions",
                            form="conv_s32", arrays=arrays, params=params, step_constants=False, files=FILES)
    kn = (c.k + 7) // 8 * 8 if c.gathered else c.k
    if not (sdot and c.constant_weights and kn % 8 == 0):
        params = Conv(f"qc_neon_conv_{out}", "", c.rows, c.k, c.k, c.pixels, c.bias_per_channel, rq, False)
        return KernelChoice(params.fn, f"{reason}: blocks of 8 rows", form="conv_rq", arrays=arrays, params=params,
                            step_constants=False, files=FILES)
    relaid = "sdot_4x4" if kn == c.k else "sdot_4x4_pad8"
    arrays["weights"] = const_array(names.relaid(c.w.name, relaid),
                                    getattr(layouts, relaid)(c.weight_rows(), c.rows))
    paired = kn >= 16 and c.rows >= MIN_PAIR_ROWS and c.pixels >= 2
    params = Conv(f"qc_neon_conv_sdot_{out}", f"qc_neon_conv_sdot2_{out}" if paired else "", c.rows, c.k, kn,
                  c.pixels, c.bias_per_channel, rq, False)
    reason += (f", constant weights: SDOT by element on {relaid}" +
               (f", pixels in pairs ({MIN_PAIR_ROWS}+ rows of 16+ elements)" if paired else ""))
    return KernelChoice(params.fn2 or params.fn, reason, relaid, "conv_sdot2" if paired else "conv_sdot", arrays,
                        params, frozenset() if c.rows % 8 else frozenset({1}), step_constants=False,
                        window_length=kn if c.gathered else 0, files=SDOT_FILES)


def _depthwise(c: ConvStep, names: ArrayNames) -> KernelChoice:
    g = c.window
    arrays: dict[str, ConstArray] = {}
    if c.izp != 0:
        arrays["starts"] = step_array(names, "dw_starts", layouts.dw_starts(c.weight_rows(), c.izp))
    if not g.all_interior and c.taps <= 9:
        arrays["pad_row"] = step_array(names, "pad_row", layouts.pad_row(c.rows, c.pad_value))
    pairs = c.constant_weights and int(np.min(np.asarray(c.w.data))) > -128
    reason = f"int8 x int8, weight zero point 0, {c.taps} taps, blocks of 16 channels"
    reason += ", taps in pairs (no weight -128)" if pairs else ""
    rq = None
    if _vector_rq(c):
        assert c.rq is not None
        rq, rq_arrays = _requant(c.rq, names)
        arrays.update(rq_arrays)
        fn = f"qc_neon_dw_{'s32' if rq.exceptions else OUTPUTS[c.y.dtype.name]}"
        reason += f", requantized to {c.y.dtype.name} in vector lanes" + (", then its exceptions" if rq.exceptions
                                                                          else "")
    else:
        fn = "qc_neon_dw_s32"
        reason += ", int32 sums" if c.rq is None else ", int32 sums requantized by the portable scalar form"
    params = Depthwise(fn, c.rows, g.ih, g.iw, g.kh, g.kw, g.dy, g.dx, c.pad_value, pairs,
                       c.bias_per_channel, rq, c.rq is None)
    return KernelChoice(fn, reason, form="dw", arrays=arrays, params=params,
                        step_constants=c.rq is not None and rq is None, files=FILES)
