"""Kernel choice for Hexagon HVX in 128-byte mode (target hexagon-hvx; kernels in runtime/hexagon/qc_hvx.h, call
sites in templates/hvx/_dot.c.j2).

CONV2D (pointwise, general: each pixel's gathered window, fully connected: one pixel) of int8 x int8 with weight
zero point 0, constant weights and rows of at most 65,535 elements: the output channels of a pixel as VRMPY dot
products, 32 rows a vector (rows32 weights, which replace the int8 weights; rows padded to a multiple of 32, their
length to a multiple of 4 with zeros). With a constant bias and an int8 output whose requantization qc_hvx_requant
computes exactly (vector_rnd), qc_hvx_conv_rq_s8 starts from bias - izp x the row sums and requantizes and stores
in vectors; else qc_hvx_dot_rows32_s8 gives the sums and the template's store requantizes them channel by channel.
DEPTHWISE_CONV2D of int8 x int8 with weight zero point 0 and multiplier 1: with constant weights and bias and such
an int8 output, qc_hvx_dw_rq_s8 runs the whole step (any channel count: blocks of 64 lanes zero-padded at plan
time, or 64 / n neighbouring pixels a block); else, for a multiple of 32 channels, each in-bounds tap of the
portable loops by qc_hvx_dw_tap_s8. FUSED_ELEMENTWISE: elementwise.py. Other steps run the portable loops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.schedule import StepIO
from ...primitives.geometry import WindowLoops
from ...primitives.rescale import exception_list
from ..conv import ConvStep, Requantization, exception_const_arrays
from ..generic import conv_or_portable, portable
from ..layouts import row_sums
from ..names import ArrayNames
from ..record import ConstArray, KernelChoice, const_array, step_array
from . import elementwise, layouts

FILES = ("hexagon/qc_hvx.h",)
STEP_ATTRIBUTES = ""
MAX_ROW = 65535  # |a lane's sum| <= 2^14 k < 2^31 (qc_hvx_dot_rows32_s8)


@dataclass(frozen=True)
class DotRows32:
    """form "dot_rows32": a pixel's `rows` sums from `blocks` blocks of 32 rows of length k (qc_hvx_dot_rows32_s8,
    arrays["weights"]: rows32), the zero-point terms in arrays["zero_point_terms"] when izp != 0."""

    rows: int
    k: int
    blocks: int


@dataclass(frozen=True)
class ConvRq:
    """form "conv_rq": fn (qc_hvx_conv_rq_s8, or its _inline form) per pixel (VRMPY sums from arrays["starts"],
    requantized to int8 in vectors: arrays["rq"], rq_stride 0 when one set serves every block), the
    qc_hvx_conv_params fields; the exceptions to the single rounding in arrays["exc_start"], ["exc_channel"],
    ["exc_acc"], ["exc_value"] when it has any (epc: listed per channel)."""

    fn: str
    rows: int
    k: int
    blocks: int
    rq_stride: int
    rnd: int
    zp: int
    lo: int
    hi: int
    epc: bool


@dataclass(frozen=True)
class DepthwiseRq:
    """form "dw_rq": fn (qc_hvx_dw_rq_s8, or its _inline form) per image (arrays["w16"], ["starts"], ["rq"]), the
    qc_hvx_dw_params fields after the arrays (rq_stride 0 when one pair of requantization sets serves every
    block; the window's from `window`; the exceptions as for ConvRq)."""

    fn: str
    n: int
    blocks: int
    copies: int
    rq_stride: int
    window: WindowLoops
    izp: int
    pad: int
    rnd: int
    zp: int
    lo: int
    hi: int
    epc: bool


@dataclass(frozen=True)
class DepthwiseTap:
    """form "dw_tap": each in-bounds tap of the portable depthwise loops by qc_hvx_dw_tap_s8 over the n channels
    (input zero point izp); the padding taps, the start and the stores stay portable."""

    n: int
    izp: int


def choose(io: StepIO, index: int, names: ArrayNames, layout: str) -> KernelChoice:
    if io.step.op == "FUSED_ELEMENTWISE":
        return elementwise.choose(io)
    c = conv_or_portable(io)
    if isinstance(c, KernelChoice):
        return c
    if c.op == "CONV2D":
        return _conv(c, names, layout) or portable(io, _why_not_conv(c))
    why = "depthwise not int8 x int8 with weight zero point 0, multiplier 1 and a multiple of 32 channels"
    return _depthwise_rq(c, names, layout) or _depthwise(c) or portable(io, why)


def _why_not_conv(c: ConvStep) -> str:
    if not c.channels_hook:
        return "a window of more than 4096 elements: summed tap by tap"
    return f"not int8 x int8 with weight zero point 0, constant weights and rows of at most {MAX_ROW} elements"


def vector_rnd(rq: Requantization | None, out_ctype: str) -> int | None:
    """qc_hvx_requant's rnd for `rq` (1: DOUBLE_ROUND, or any rounding with every shift 31; 0: SINGLE_ROUND with
    every shift above 31), None when it does not compute rq exactly: int8 outputs of a 32-bit scale with
    multipliers in [0, 2^31) and shifts 31..62 (TFLite exponents 0 and below). Exceptions to the single rounding
    are applied after the vector store (qc_hvx_except)."""
    if not (rq is not None and out_ctype == "int8_t" and rq.scale32 and -128 <= rq.lo and rq.hi <= 127
            and 31 <= rq.min_shift and max(rq.shifts) <= 62 and min(rq.multipliers) >= 0):
        return None
    if rq.fn in ("qc_scale32_double", "qc_scale32_double_gt31") or max(rq.shifts) == 31:
        return 1
    return 0 if rq.fn == "qc_scale32_single" and rq.min_shift >= 32 else None


def _rq_lanes(rq: Requantization, n: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """The multipliers and shifts of `n` lanes (one value repeated, or one a channel) and whether the rounding is
    away from zero (DOUBLE_ROUND) rather than single."""
    mults = np.broadcast_to(np.asarray(rq.multipliers, np.int64), (n,))
    shifts = np.broadcast_to(np.asarray(rq.shifts, np.int64), (n,))
    return mults, shifts, rq.fn != "qc_scale32_single"


def _exception_arrays(rq: Requantization, names: ArrayNames) -> dict[str, ConstArray]:
    """The exceptions to the single rounding as qc_hvx_exceptions reads them: exception_const_arrays and each
    exception's channel (exc_channel, in the same order); {} without exceptions."""
    arrays = exception_const_arrays(rq, names)
    if arrays:
        arrays["exc_channel"] = step_array(names, "exc_channel",
                                           exception_list(rq.exceptions, rq.lo, rq.hi)["exc_channel"])
    return arrays


def _kernel(kind: str, layout: str, rq: Requantization) -> str:
    """qc_hvx_<kind>_rq_s8: the shared kernel (its copy with the exceptions' code for a step that has any), or its
    _inline form for the weight layout "fast" (specialized per step)."""
    if layout == "fast":
        return f"qc_hvx_{kind}_rq_s8_inline"
    return f"qc_hvx_{kind}_rq_exc_s8" if rq.exceptions else f"qc_hvx_{kind}_rq_s8"


def _conv(c: ConvStep, names: ArrayNames, layout: str) -> KernelChoice | None:
    if not (c.channels_hook and c.int8 and c.wzp == 0 and c.constant_weights and c.k <= MAX_ROW):
        return None
    rows = c.weight_rows()
    weights = const_array(names.relaid(c.w.name, "rows32"), layouts.rows32(rows))
    terms = c.izp * row_sums(rows, c.rows).astype(np.int64)  # |izp x sum| <= 2^7 2^7 k < 2^31
    blocks = -(-c.rows // layouts.LANES)
    reason = f"int8 x int8, weight zero point 0, constant rows of {c.k} elements, {blocks} blocks of 32 rows"
    rnd = vector_rnd(c.rq, c.y.dtype.ctype)
    if rnd is not None and c.bias_abs_max is not None:
        return _conv_rq(c, names, weights, terms, rnd, reason, _kernel("conv", layout, c.rq))
    arrays = {"weights": weights}
    if c.izp != 0:
        arrays["zero_point_terms"] = step_array(names, "izp_terms", terms.astype(np.int32))
    return KernelChoice("qc_hvx_dot_rows32_s8", reason, layout="rows32", form="dot_rows32", arrays=arrays,
                        params=DotRows32(c.rows, c.k, blocks), unread=frozenset({1}), files=FILES)


def _conv_rq(c: ConvStep, names: ArrayNames, weights: ConstArray, terms: np.ndarray, rnd: int, reason: str,
             fn: str) -> KernelChoice:
    rq = c.rq
    assert rq is not None
    one_set = not rq.per_channel
    mults, shifts, away = _rq_lanes(rq, layouts.LANES if one_set else c.rows)
    arrays = {"weights": weights, "starts": step_array(names, "starts", layouts.starts(c.bias_per_row(), terms)),
              "rq": step_array(names, "rq32", layouts.rq32(mults, shifts)), **_exception_arrays(rq, names)}
    rq_stride = 0 if one_set else layouts.RQ_VECTORS * layouts.LANES
    params = ConvRq(fn, c.rows, c.k, -(-c.rows // layouts.LANES), rq_stride, rnd, rq.output_zp, rq.lo, rq.hi,
                    rq.per_channel)
    return KernelChoice(fn, f"{reason}, constant bias, int8 outputs requantized in vectors "
                        f"({'double' if away else 'single'} rounding, shifts 31..62)", layout="rows32",
                        form="conv_rq", arrays=arrays, params=params, unread=frozenset({1, 2}),
                        step_constants=False, files=FILES)


def _depthwise_rq(c: ConvStep, names: ArrayNames, layout: str) -> KernelChoice | None:
    rnd = vector_rnd(c.rq, c.y.dtype.ctype)
    g = c.window
    if not (rnd is not None and c.rq is not None and c.int8 and c.wzp == 0 and c.m == 1 and c.constant_weights
            and c.bias_abs_max is not None):
        return None
    rq = c.rq
    # pixels a block: channels that divide 64 with stride 1 fill the 64 lanes with neighbouring pixels
    copies = layouts.DW_BLOCK // c.rows if c.rows < layouts.DW_BLOCK and layouts.DW_BLOCK % c.rows == 0 \
        and g.sx == 1 else 1
    chans = 2 * layouts.LANES if not rq.per_channel else c.rows
    mults, shifts, away = _rq_lanes(rq, chans)
    tile = copies if rq.per_channel else 1
    arrays = {"w16": step_array(names, "dw_w16", layouts.dw_w16(c.weight_rows(), copies)),
              "starts": step_array(names, "dw_starts", layouts.dw_starts(c.bias_per_row(), copies)),
              "rq": step_array(names, "dw_rq", layouts.dw_rq(mults, shifts, tile)),
              **_exception_arrays(rq, names)}
    blocks = -(-c.rows * copies // layouts.DW_BLOCK)
    fn = _kernel("dw", layout, rq)
    rq_stride = 2 * layouts.RQ_VECTORS * layouts.LANES if rq.per_channel else 0  # even and odd lanes' vectors
    params = DepthwiseRq(fn, c.rows, blocks, copies, rq_stride, g, c.izp, c.pad_value, rnd, rq.output_zp, rq.lo,
                         rq.hi, rq.per_channel)
    pixels = f"{copies} pixel{'s' if copies > 1 else ''} a block"
    return KernelChoice(fn, f"int8 x int8, weight zero point 0, multiplier 1, constant weights and "
                        f"bias, {blocks} blocks of 64 lanes ({pixels}), int8 outputs requantized in vectors "
                        f"({'double' if away else 'single'} rounding, shifts 31..62)", layout="dw_w16",
                        form="dw_rq", arrays=arrays, params=params, unread=frozenset({1, 2}),
                        step_constants=False, files=FILES)


def _depthwise(c: ConvStep) -> KernelChoice | None:
    if not (c.int8 and c.wzp == 0 and c.m == 1 and c.rows % layouts.LANES == 0):
        return None
    return KernelChoice("qc_hvx_dw_tap_s8", f"int8 x int8, weight zero point 0, multiplier 1, {c.rows} channels "
                        "(a multiple of 32)", form="dw_tap", params=DepthwiseTap(c.rows, c.izp), files=FILES)


__all__ = ["STEP_ATTRIBUTES", "choose"]
