"""Kernel choice for scalar RISC-V RV32IM (target riscv32; kernels in runtime/rv32/, call sites in
templates/rv32/_dot.c.j2). There is no multiply-accumulate: a MAC is at least MUL + ADD, and the loads are what the
kernels save.

int8 x int8 convolutions with weight zero point 0 and constant weights:
- CONV2D whose output channels are dot products of whole rows (the `channels` hook): register blocks of R weight
  rows x P output pixels (qc_rv32_dot_rows<R>x<P>*: 4 x 4 for 4 or more pixels, 8 x 2 for 2 or 3, 8 x 1 for one, or
  for rows longer than 2048 elements, whose P interleaved windows would not fit the stack), the weights re-laid
  rv32_r4 / rv32_r8 so that one pointer walks a block's rows element by element, the pixels' windows interleaved
  in a stack buffer (a gathered window written there directly); the input zero point as izp x the row sums made at
  generation time;
- DEPTHWISE_CONV2D (multiplier 1, at most 16 taps, constant bias, a padded input plane of at most 4096 bytes, int32
  outputs or a requantization qc_rv32_scale32 computes exactly): qc_rv32_dw_plane (runtime/rv32/qc_rv32_dw.h),
  channel by channel over a padded copy of the channel's input plane, every tap at a constant offset, the taps'
  weights in registers.
Stores of a FUSED_CONV: qc_rv32_scale32 (MULH) where it is exact: QC_RV32_DOUBLE_29 for the double rounding of
accumulators bounded below 2^29 at generation time (the kernels above), else single or double rounding for shifts
>= 33; others the portable expression. Convolutions whose weights are not constant run the portable loops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.schedule import StepIO
from ..conv import ConvStep, Requantization, loops_scratch
from ..generic import conv_or_portable, portable
from ..layouts import row_sums
from ..names import ArrayNames
from ..record import KernelChoice, RequantStore, const_array
from . import layouts

FILES = ("rv32/qc_rv32.h",)
# the register blocks: static kernels of a header, specialized per model (measured smaller and faster than shared
# copies of a .c)
DOT_FILES = FILES + ("rv32/qc_rv32_dot.h",)
DW_FILES = FILES + ("rv32/qc_rv32_dw.h",)
# measured: steps inlined into <name>_run share its registers, and the depthwise weights spill
STEP_ATTRIBUTES = "__attribute__((noinline))"
MAX_GROUPED_ROW = 2048  # the longest row taken with several pixels (their interleaved windows: P x k stack bytes)
MAX_DW_TAPS = 16  # the depthwise taps' weights are kept in registers
MAX_DW_PLANE = 4096  # bytes of the padded input plane on the stack
# qc_rv32_scale32 modes (runtime/rv32/qc_rv32.h)
SINGLE, DOUBLE, DOUBLE_29 = 0, 1, 2


def _exact_s33(rq: Requantization) -> bool:
    """qc_rv32_scale32 computes the requantization exactly for shifts >= 33 (single or double rounding, outputs
    within int16)."""
    return (rq.scale32 and rq.min_shift >= 33 and -32768 <= rq.lo and rq.hi <= 32767
            and rq.fn in ("qc_scale32_single", "qc_scale32_double", "qc_scale32_double_gt31"))


def _exact_double_29(rq: Requantization, bound: int) -> bool:
    """QC_RV32_DOUBLE_29 computes the double rounding exactly: shifts >= 32, accumulators below 2^29 (bound)."""
    return (rq.scale32 and rq.fn in ("qc_scale32_double", "qc_scale32_double_gt31") and rq.min_shift >= 32
            and -32768 <= rq.lo and rq.hi <= 32767 and bound < 2 ** 29)


def requant_store(rq: Requantization | None, bound: int = 2 ** 31) -> RequantStore | None:
    """The store form of a FUSED_CONV output (qc_rv32_scale32 clamped to the output's range), given a bound of the
    accumulators' magnitude; None: the portable expression."""
    if rq is None:
        return None
    zp2p1, clamp = 2 * rq.output_zp + 1, (rq.lo, rq.hi)
    if _exact_double_29(rq, bound):
        return RequantStore("qc_rv32_scale32", zp2p1, DOUBLE_29, clamp=clamp)
    if _exact_s33(rq):
        return RequantStore("qc_rv32_scale32", zp2p1, SINGLE if rq.fn == "qc_scale32_single" else DOUBLE, clamp=clamp)
    return None


def _bound(c: ConvStep, weight_sums: np.ndarray) -> int:
    """A bound of |bias + the sum of (x - izp) * w| over int8 inputs (the largest sum of |w| of an output channel:
    weight_sums), 2^31 when the bias is not constant."""
    bias = c.bias_abs_max
    return 2 ** 31 if bias is None else bias + (128 + abs(c.izp)) * int(weight_sums.max(initial=0))


@dataclass(frozen=True)
class RowBlocks:
    """form "rows_blocks": each output pixel's channels in blocks of `block` weight rows; the pixels in groups of
    `group` (the channels hook is called per pixel: a group's kernel runs at its last pixel, over the windows
    interleaved in qc_xb, the last pixels % group by fn_tail, a kernel of fewer pixels over windows interleaved by
    group); `interleaved`: a gathered window is written straight into its pixel's slot of qc_xb (the window and
    gather hooks); the blocks of the first `full` rows store all their sums, the last block those of the rows
    left."""

    fn: str
    fn_tail: str
    rows: int
    k: int
    block: int
    group: int
    pixels: int
    full: int
    interleaved: bool
    izp: int


@dataclass(frozen=True)
class DepthwisePlane:
    """form "dw_plane": per channel, its input plane copied into the stack buffer qc_pl (height x width; input rows
    [0, rows) at plane row top + iy, columns [0, cols) at left + ix, the rest pad_value when `padded`; the copy of a
    row unrolled when `unrolled`), then every output pixel the sum of its taps at `offsets` from the pixel's
    corner, times the channel's weights kept in registers, from base = bias - izp x the weight sum
    (runtime/rv32/qc_rv32_dw.h qc_rv32_dw_plane); outputs of out_bytes (4: the int32 accumulators, else requantized
    by the choice's RequantStore)."""

    channels: int
    taps: int
    height: int
    width: int
    rows: int
    cols: int
    top: int
    left: int
    padded: bool
    pad_value: int
    unrolled: bool
    offsets: tuple[int, ...]
    izp: int
    out_bytes: int


def choose(io: StepIO, index: int, names: ArrayNames, layout: str) -> KernelChoice:
    c = conv_or_portable(io)
    if isinstance(c, KernelChoice):
        return c
    store = requant_store(c.rq)
    extra = dict(requantize=store, files=FILES if store else ())
    if c.op == "CONV2D":
        return _conv(c, index, names) or portable(io, _why_not_conv(c), **extra)
    return _depthwise(c) or portable(io, _why_not_depthwise(c), **extra)


def _why_not_conv(c: ConvStep) -> str:
    if not c.channels_hook:
        return "a window of more than 4096 elements: summed tap by tap"
    return "not int8 x int8 with weight zero point 0, constant weights and rows of at most 65,535 elements"


def _conv(c: ConvStep, index: int, names: ArrayNames) -> KernelChoice | None:
    if not (c.channels_hook and c.int8 and c.wzp == 0 and c.constant_weights and c.k <= 65535):
        return None
    pixels = c.pixels if c.k <= MAX_GROUPED_ROW else 1
    block, group = (4, 4) if pixels >= 4 else (8, 2) if pixels >= 2 else (8, 1)
    tail = c.pixels % group if group > 1 else 0
    rows = c.weight_rows()
    arrays = {"weights": const_array(names.relaid(c.w.name, f"rv32_r{block}"),
                                     getattr(layouts, f"rv32_r{block}")(rows))}
    if c.izp != 0:
        arrays["row_sums"] = const_array(names.relaid(c.w.name, "row_sums"), row_sums(rows, c.rows))
    params = RowBlocks(_kernel(block, group, group), _kernel(block, tail, group) if tail else "", c.rows, c.k, block,
                       group, c.pixels, c.rows // block * block, group > 1 and c.gathered, c.izp)
    reason = (f"int8 x int8, weight zero point 0, constant rows of {c.k} elements, {c.pixels} pixels: blocks of "
              f"{block} rows x {group} pixels")
    # the stack: a block's sums (qc_s), a group's windows (qc_xb: the gathered ones, interleaved, in place of xp)
    windows = (c.k * group if group > 1 else 0) + loops_scratch(c) - (c.k if params.interleaved else 0)
    return KernelChoice(params.fn, reason, f"rv32_r{block}", "rows_blocks", arrays, params, frozenset({1}),
                        requantize=requant_store(c.rq, _bound(c, np.abs(rows).sum(axis=1))), files=DOT_FILES,
                        stack_scratch=4 * block * group + windows)


def _kernel(block: int, pixels: int, group: int) -> str:
    """The kernel of `block` rows x `pixels` pixels whose windows are interleaved in groups of `group`."""
    return f"qc_rv32_dot_rows{block}x{pixels}{f'_of{group}' if group != pixels else ''}_s8"


def _why_not_depthwise(c: ConvStep) -> str:
    return (f"not int8 x int8 with weight zero point 0, multiplier 1, at most {MAX_DW_TAPS} taps, a constant bias, "
            f"an int8 pad value, a padded plane of at most {MAX_DW_PLANE} bytes, |bias| + taps 2^17 < 2^31 and an "
            "int32 output or a requantization qc_rv32_scale32 computes exactly (without exceptions to the single "
            "rounding)")


def _depthwise(c: ConvStep) -> KernelChoice | None:
    g = c.window
    height = (g.oh - 1) * g.sy + (g.kh - 1) * g.dy + 1
    width = (g.ow - 1) * g.sx + (g.kw - 1) * g.dx + 1
    bias = c.bias_abs_max
    if not (c.int8 and c.wzp == 0 and c.m == 1 and c.taps <= MAX_DW_TAPS and bias is not None
            and -128 <= c.pad_value <= 127 and height * width <= MAX_DW_PLANE
            and bias + c.taps * 2 ** 17 < 2 ** 31 and not (c.rq is not None and c.rq.exceptions)):
        return None
    store = requant_store(c.rq, _bound(c, np.abs(c.weight_rows()).sum(axis=0)))
    if store is None if c.rq else c.y.dtype.ctype != "int32_t":
        return None
    rows, cols = min(g.ih, height - g.pt), min(g.iw, width - g.pl)
    padded = g.pt > 0 or g.pl > 0 or rows < height - g.pt or cols < width - g.pl
    offsets = tuple(ky * g.dy * width + kx * g.dx for ky in range(g.kh) for kx in range(g.kw))
    params = DepthwisePlane(c.rows, c.taps, height, width, rows, cols, g.pt, g.pl, padded, c.pad_value,
                            cols <= 16 and cols * c.rows <= 2048, offsets, c.izp, c.y.dtype.bits // 8)
    reason = (f"int8 x int8, weight zero point 0, multiplier 1, {c.taps} taps, constant bias, a padded plane of "
              f"{height} x {width} bytes, |bias| + taps 2^17 < 2^31, "
              + ("requantized by qc_rv32_scale32" if store else "int32 outputs"))
    return KernelChoice("qc_rv32_dw_plane", reason, form="dw_plane", params=params, requantize=store, files=DW_FILES,
                        stack_scratch=height * width)


__all__ = ["STEP_ATTRIBUTES", "choose", "requant_store"]
