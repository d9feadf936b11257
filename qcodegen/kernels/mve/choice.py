"""Kernel choice for Cortex-M55 Helium (MVE) (target cortex-m55; kernels in runtime/mve/, call sites in
templates/mve/_dot.c.j2).

int8 x int8 convolutions with weight zero point 0 and rows of at most 65,535 elements:
- CONV2D with constant weights and bias, at least 4 output channels, int8 or int16 outputs of an exact 32-bit
  requantization (shifts >= 33; int8 outputs: |zero point| <= 32640): every output channel of a pixel pair
  (qc_mve_conv_2px_*: each weight chunk serves both pixels; a last odd pixel pairs with itself) or of one pixel
  (qc_mve_conv_1px_*), per block of 4 channels one asm statement over the mve_pw4x2 stream (starts, weights,
  scales), requantized in vectors (int8 outputs of pixel pairs: a block's 8 values narrowed in one vector, one
  scatter store); 1x1 stride-1 steps (contiguous pixels) by one call over all their pairs (qc_mve_conv_run_*);
  gathered windows whose rows are runs of at most 16 inputs (dilation 1) by one call over the step
  (qc_mve_conv_rows_*: an output row's input rows copied with their padding, the pairs' windows gathered from
  there);
- other CONV2D: 4 weight rows per input vector (qc_mve_dot_4rows_s8), the step requantizing each sum;
- DEPTHWISE_CONV2D (multiplier 1, constant weights and bias, |bias| + taps 2^17 < 2^31): blocks of 16 channels in
  registers over the taps, one call per run of interior pixels of an output row (qc_mve_dw_s8_*: int8 outputs of an
  exact 32-bit requantization, weights in [-127, 127]: tap pairs added in int16, requantized and narrowed in
  registers; a step reading padding, where copying its input rows costs less than its border pixels' calls and
  tables: one call per output row over a stack ring of padded input rows, qc_mve_dw_s8_rows; qc_mve_dw_s32: int32
  sums, stored as they are or requantized by the step); other int8 depthwise: the portable loops with a vector tap
  (qc_mve_mla_s8).
Besides: AVG_POOL2D window sums of int8 inputs in vectors (qc_mve_pool_sum_*), FUSED_ELEMENTWISE chains of exact
requantizations, clamps and int32 additions 4 lanes at a time (qc_mve_ew_*), and every FUSED_CONV output stored by
template C with the SMLAL requantization of runtime/cortex-m/qc_cm_rq.h where it is exact."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import primitives
from ...ir.schedule import StepIO
from ...primitives.fused import part_context
from ...primitives.geometry import WindowLoops
from ..conv import PATCH_LIMIT, ConvStep, Requantization, loops_scratch, table_scratch
from ..cortex_m_dsp.choice import RQ_FILES, data_movement, exact_s33, requant_store
from ..generic import conv_or_portable, portable, vector_parts
from ..names import ArrayNames
from ..record import EwPart, KernelChoice, RequantStore, step_array
from . import layouts

HEADER = ("mve/qc_mve.h",)
# the convolutions and the depthwise int32 sums: static kernels of a header, specialized per step (their asm unrolled
# over the row's chunks; the sums of a step's few channels); the int8 depthwise kernels: functions of qc_mve.c,
# shared by the models of a firmware
CONV_FILES = HEADER + ("mve/qc_mve_conv.h",)
DW_FILES = HEADER + ("mve/qc_mve.c",)
# measured: steps inlined into <name>_run share its registers with the kernels' asm, and spill
STEP_ATTRIBUTES = "__attribute__((noinline))"
INT8_RANGE = (-128, 127)
DW_ROWS_SCRATCH = 8192  # bytes of padded input rows of qc_mve_dw_s8_rows (on the stack)
CONV_ROWS_SCRATCH = 8192  # bytes of padded input rows and windows of qc_mve_conv_rows_* (on the stack)
# instructions (GCC 12 -O2 disassembly, measured): a qc_mve_dw_s8_* call's prologue and set-up, a border pixel's table
# of taps; in qc_mve_dw_s8_rows a row's call and offsets, and the copy of 16 input bytes
DW_CALL_COST, DW_TABLE_COST, DW_ROW_COST, DW_COPY_COST = 90, 70, 120, 3
# qc_mve_conv_store_pair8 adds the output zero point to int16-saturated lanes: exact for |zp| <= 2^15 - 128
INT8_ZP_MAX = 32640


def _dbl(rq: Requantization) -> int:
    return 0 if rq.fn == "qc_scale32_single" else 1


@dataclass(frozen=True)
class ConvPixels:
    """form "conv_px": fn (qc_mve_conv_2px_* for pixel pairs, or qc_mve_conv_1px_*) per pair or pixel, every output
    channel requantized inside; the qc_mve_conv_params: rows, k, dbl, zp, lo, hi (the scales are in the stream).
    run (1x1 stride-1 pairs: pixel p's inputs at x + p k): the whole step by one qc_mve_conv_run_* call; geometry
    (pairs of gathered windows whose rows are runs of at most 16 inputs): the whole step by qc_mve_conv_rows_* over
    a scratch of padded input rows (`scratch` bytes on the stack), its qc_mve_conv_geo."""

    fn: str
    pairs: bool
    pixels: int
    rows: int
    k: int
    dbl: int
    zp: int
    lo: int
    hi: int
    run: bool = False
    geometry: tuple[int, ...] = ()
    scratch: int = 0


@dataclass(frozen=True)
class DotRows:
    """form "dot_4rows": qc_mve_dot_4rows_s8 per block of 4 weight rows of one pixel, the rows after the last block
    by qc_mve_dot_s8; the step adds the bias, subtracts the zero-point terms (the array "zero_point_terms" when the
    input zero point is not 0) and stores (requantized through the `requantize` hook)."""

    rows: int
    k: int


@dataclass(frozen=True)
class Depthwise:
    """form "dw_s8" (qc_mve_dw_s8_*, the qc_mve_dw_params) or "dw_s32" (qc_mve_dw_s32, the qc_mve_dw_s32_params):
    fn per run of interior pixels of an output row (runs) or per pixel (then int32 sums stored by the step,
    requantized or not); n channels, taps; copies: pixels per vector of a run (fewer than 16 channels); zp, lo, hi:
    the int8 requantization's; geometry (dw_s8, when not empty): the whole step by qc_mve_dw_s8_rows over fn, one
    call per output row over a scratch of padded input rows (`scratch` bytes on the stack), its qc_mve_dw_geo."""

    fn: str
    runs: bool
    n: int
    taps: int
    copies: int = 1
    zp: int = 0
    lo: int = 0
    hi: int = 0
    geometry: tuple[int, ...] = ()
    scratch: int = 0


@dataclass(frozen=True)
class PoolSum:
    """form "pool_sum": fn (qc_mve_pool_sum_s8_s16 / _s32, the sum type of templates/generic/avg_pool2d.c.j2)."""

    fn: str


@dataclass(frozen=True)
class Elementwise:
    """form "ew_vector": 4 elements a step, tail-predicated: the inputs loaded by `loads`, the parts in order, the
    last one's value stored by `store`."""

    loads: tuple[str, ...]
    parts: tuple[EwPart, ...]
    store: str


def choose(io: StepIO, index: int, names: ArrayNames, layout: str) -> KernelChoice:
    op = io.step.op
    moves = data_movement(io)
    if moves is not None:
        return moves
    if op == "AVG_POOL2D":
        return _pool(io)
    if op == "FUSED_ELEMENTWISE":
        return _elementwise(io)
    c = conv_or_portable(io)
    if isinstance(c, KernelChoice):
        return c
    store = requant_store(c.rq)
    extra = dict(requantize=store, files=RQ_FILES if store else ())
    if c.op == "CONV2D":
        return _conv(c, names, store) or portable(io, _why_not_conv(c), **extra)
    return _depthwise(c, names, store) or _dw_mla(c, store) or portable(io, _why_not_depthwise(c), **extra)


def _int8_rows(c: ConvStep) -> bool:
    return c.int8 and c.wzp == 0 and c.k <= 65535


def _why_not_conv(c: ConvStep) -> str:
    if not c.channels_hook:
        return f"window of {c.k} elements > {PATCH_LIMIT}: summed tap by tap"
    if not _int8_rows(c):
        return "not int8 x int8 with weight zero point 0 and rows of at most 65,535 elements"
    return "non-constant weights with an input zero point"


def _exact_vector(c: ConvStep) -> bool:
    """The vector requantization of qc_mve_conv_* computes the step's outputs exactly (no exceptions to the single
    rounding: the template's store compares them)."""
    return (c.rq is not None and exact_s33(c.rq) and not c.rq.exceptions
            and (c.y.dtype.ctype == "int16_t" or c.y.dtype.ctype == "int8_t" and abs(c.rq.output_zp) <= INT8_ZP_MAX))


def _conv(c: ConvStep, names: ArrayNames, store: RequantStore | None) -> KernelChoice | None:
    if not (c.channels_hook and _int8_rows(c)):
        return None
    base = f"int8 x int8, weight zero point 0, rows of {c.k} elements"
    if c.constant_weights and c.bias_abs_max is not None and c.rows >= 4 and _exact_vector(c):
        return _conv_pixels(c, names, f"{base}, constant weights and bias, {c.rows} rows (>= 4), "
                            f"{c.y.dtype.ctype} outputs of an exact 32-bit requantization (shifts >= 33), "
                            f"{c.pixels} pixel{'s in pairs' if c.pixels >= 2 else ''}")
    arrays = {}
    if c.izp != 0:
        if not c.constant_weights:
            return None
        terms = (c.izp * c.weight_rows().sum(axis=1)).astype(np.int32)
        arrays["zero_point_terms"] = step_array(names, "izp_terms", terms)
    reason = f"{base}, the step requantizes" if c.rq is not None else base
    return KernelChoice("qc_mve_dot_4rows_s8", reason, "int8", "dot_4rows", arrays, DotRows(c.rows, c.k),
                        requantize=store, files=CONV_FILES + (RQ_FILES if store else ()),
                        stack_scratch=loops_scratch(c))


def _conv_pixels(c: ConvStep, names: ArrayNames, reason: str) -> KernelChoice:
    rq = c.rq
    assert rq is not None
    stream = layouts.mve_pw4x2(c.w.data, c.rows, c.bias_per_row(), c.izp, list(rq.multipliers), list(rq.shifts))
    pairs = c.pixels >= 2
    run = pairs and c.contiguous
    geometry, scratch = _conv_rows(c) if pairs else ((), 0)
    if run:
        reason += ", contiguous pixels: every pair by one call"
    if geometry:
        reason += f", one output row at a time over {scratch} B of padded input rows"
    form = "rows" if geometry else "run" if run else "2px" if pairs else "1px"
    fn = f"qc_mve_conv_{form}_{'s16' if c.y.dtype.ctype == 'int16_t' else 's8'}"
    params = ConvPixels(fn, pairs, c.pixels, c.rows, c.k, _dbl(rq), rq.output_zp, rq.lo, rq.hi, run, geometry,
                        scratch)
    arrays = {"stream": step_array(names, "pw4x2", stream)}
    # the rows' scratch, or the gathered windows: a pair's two (qc_win, the `window` hook) or one pixel's
    windows = loops_scratch(c) + (c.k if pairs and c.gathered else 0)
    return KernelChoice(fn, reason, "mve_pw4x2", "conv_px", arrays, params, frozenset({1, 2}),
                        step_constants=False, files=CONV_FILES, stack_scratch=scratch if geometry else windows)


def _conv_rows(c: ConvStep) -> tuple[tuple[int, ...], int]:
    """The qc_mve_conv_geo of qc_mve_conv_rows_* and its scratch's bytes (the kh padded input rows of an output row,
    then a pair's windows with the 16 bytes of slack of qc_mve_gather_rows), or ((), 0) where the step keeps the
    loops over its pixels: a window read in place, dilation, window rows of more than 16 inputs, or a scratch above
    CONV_ROWS_SCRATCH."""
    g = c.window
    cols = (g.ow - 1) * g.sx + g.kw
    scratch = g.kh * cols * g.c + 2 * (c.k + 16)
    if c.direct or g.dy != 1 or g.dx != 1 or g.kw * g.c > 16 or scratch > CONV_ROWS_SCRATCH:
        return (), 0
    return (g.n, g.ih, g.iw, g.c, g.oh, g.ow, g.kh, g.kw, g.sy, g.sx, g.pt, g.pl, cols, c.pad_value), scratch


def _why_not_depthwise(c: ConvStep) -> str:
    return "not int8 x int8 with weight zero point 0 and multiplier 1"


def _depthwise(c: ConvStep, names: ArrayNames, store: RequantStore | None) -> KernelChoice | None:
    bias = c.bias_abs_max
    if not (c.int8 and c.wzp == 0 and c.m == 1 and c.taps <= 4096 and c.y.dtype.ctype != "int64_t"
            and (c.rq is not None or c.y.dtype.ctype == "int32_t") and c.constant_weights and bias is not None
            and bias + c.taps * 2 ** 17 < 2 ** 31):
        return None
    g = c.window
    taps = c.weight_rows()
    reason = (f"int8 x int8, weight zero point 0, multiplier 1, {c.taps} taps, constant weights and bias, "
              f"|bias| + taps 2^17 < 2^31")
    arrays = {}
    if g.has_interior:
        offsets = [(ky * g.dy * g.iw + kx * g.dx) * c.rows for ky in range(g.kh) for kx in range(g.kw)]
        arrays["taps"] = step_array(names, "tap_offsets", np.array(offsets, np.uint32), "uintptr_t")
    rq = c.rq
    # qc_mve_dw_s8_* add a pair of taps' products in int16: exact with weights in [-127, 127] (TFLite's int8 range)
    if (rq is not None and exact_s33(rq) and not rq.exceptions and c.y.dtype.name == "i8"
            and int(taps.min()) >= -127):
        copies = 16 // c.rows if c.rows < 16 and 16 % c.rows == 0 and g.sx == 1 else 1
        arrays["w16"] = step_array(names, "dw_w16", layouts.mve_dw_w16(taps, c.rows, copies))
        arrays["params"] = step_array(names, "dw_params", layouts.mve_dw_params(
            taps, c.rows, c.bias_per_row(), c.izp, list(rq.multipliers), list(rq.shifts), rq.output_zp, rq.lo, rq.hi,
            copies))
        fn = f"qc_mve_dw_s8_{'double' if _dbl(rq) else 'single'}{'' if (rq.lo, rq.hi) == INT8_RANGE else '_clamp'}"
        geometry, scratch = _padded_rows(c)
        if geometry:
            arrays["taps"] = step_array(names, "dw_slot_offsets", _slot_offsets(g, c.rows), "uintptr_t")
            reason += f", one call per output row over {scratch} B of padded input rows"
        params = Depthwise(fn, True, c.rows, c.taps, copies, rq.output_zp, rq.lo, rq.hi, geometry, scratch)
        return KernelChoice(fn, reason + ", int8 outputs of an exact 32-bit requantization (shifts >= 33), weights "
                            "in [-127, 127] (tap pairs in int16)",
                            "mve_dw_w16", "dw_s8", arrays, params, frozenset({1, 2}), step_constants=False,
                            files=DW_FILES, stack_scratch=scratch or table_scratch(c, True))
    arrays["base"] = step_array(names, "dw_starts", layouts.mve_dw_starts(taps, c.rows, c.bias_per_row(),
                                                                                      c.izp))
    runs = rq is None
    params = Depthwise("qc_mve_dw_s32", runs, c.rows, c.taps)
    return KernelChoice("qc_mve_dw_s32", reason + (", int32 sums" if runs else ", requantized by the step"), "int8",
                        "dw_s32", arrays, params, frozenset({2}), step_constants=not runs,
                        requantize=None if runs else store, files=CONV_FILES + (RQ_FILES if store else ()),
                        stack_scratch=table_scratch(c, runs))


def _padded_rows(c: ConvStep) -> tuple[tuple[int, ...], int]:
    """The qc_mve_dw_geo of qc_mve_dw_s8_rows and its scratch's bytes, or ((), 0) where the step keeps a call per
    run of interior pixels and one per border pixel: without padding, a scratch above DW_ROWS_SCRATCH, or where
    copying the input rows costs more than the border pixels' tables and calls (_border_cost)."""
    g = c.window
    slots, cols = _ring(g)
    scratch = slots * cols * c.rows
    if g.all_interior or scratch > DW_ROWS_SCRATCH:
        return (), 0
    copied_rows = len({oy * g.sy - g.pt + ky * g.dy for oy in range(g.oh) for ky in range(g.kh)})
    vectors = -(-g.iw * c.rows // 16)
    rows_cost = g.n * (g.oh * DW_ROW_COST + copied_rows * vectors * DW_COPY_COST)
    if rows_cost >= _border_cost(g):
        return (), 0
    return (g.n, g.ih, g.iw, g.oh, g.ow, g.kh, g.kw, g.sy, g.sx, g.dy, g.dx, g.pt, g.pl, slots, cols,
            c.pad_value), scratch


def _ring(g: WindowLoops) -> tuple[int, int]:
    """(slots, cols) of the scratch of qc_mve_dw_s8_rows: the rows a window spans, the pixels an output row reads."""
    return (g.kh - 1) * g.dy + 1, (g.ow - 1) * g.sx + (g.kw - 1) * g.dx + 1


def _slot_offsets(g: WindowLoops, channels: int) -> np.ndarray:
    """The taps' offsets in the scratch of qc_mve_dw_s8_rows (rows of `cols` pixels in a ring of `slots`): a table of
    kh * kw per slot of the window's first row."""
    slots, cols = _ring(g)
    return np.array([((first + ky * g.dy) % slots * cols + kx * g.dx) * channels for first in range(slots)
                     for ky in range(g.kh) for kx in range(g.kw)], np.uint32)


def _border_cost(g: WindowLoops) -> int:
    """The instructions the calls and tables of a step's pixels that read padding cost qc_mve_dw_s8_* without the
    scratch (estimated from the GCC 12 disassembly): in a row whose windows' rows are inside the input, a call for
    the run of interior pixels and a call and a table per other pixel; in the other rows, every pixel's."""
    run = g.cols[1] - g.cols[0]
    inner = sum(1 for oy in range(g.oh) if g.rows[0] <= oy < g.rows[1])
    border = inner * (g.ow - run) + (g.oh - inner) * g.ow
    return g.n * ((inner if run else 0) * DW_CALL_COST + border * (DW_CALL_COST + DW_TABLE_COST))


def _dw_mla(c: ConvStep, store: RequantStore | None) -> KernelChoice | None:
    if not (c.int8 and c.wzp == 0 and c.m == 1):
        return None
    return KernelChoice("qc_mve_mla_s8", "int8 x int8, weight zero point 0, multiplier 1: the portable loops, a "
                        "vector tap", requantize=store, form="dw_mla", files=HEADER + (RQ_FILES if store else ()),
                        stack_scratch=loops_scratch(c))


def _pool(io: StepIO) -> KernelChoice:
    ctx = primitives.get("AVG_POOL2D").template_context(io)
    if ctx["widened"] or io.ins[0].dtype.name != "i8":
        return portable(io)
    g = ctx["win"]
    bits = 16 if g.taps <= 255 else 32  # |sum| <= 128 taps: int16 up to 255 taps
    fn = f"qc_mve_pool_sum_s8_s{bits}"
    return KernelChoice(fn, f"int8 inputs, {g.taps} taps: int{bits} sums", form="pool_sum",
                        params=PoolSum(fn), files=HEADER)


_EW_TYPES = {"int8_t": "s8", "int16_t": "s16", "int32_t": "s32"}
_EXACT_RESCALE_FNS = ("qc_scale32_single", "qc_scale32_double", "qc_scale32_double_gt31")


def _pow2(m: int) -> int | None:
    return m.bit_length() - 1 if 0 < m < 2 ** 31 and m & (m - 1) == 0 else None


def _ew_part(part: StepIO) -> EwPart | None:
    """The vector form of one part of a FUSED_ELEMENTWISE chain, or None when it has none (exact forms only)."""
    ctx = part_context(part)
    op = ctx["op"]
    if op == "CLAMP":
        return EwPart("qc_mve_ew_clamp", (ctx["lo"], ctx["hi"]))
    if op in ("ADD", "SUB"):
        return EwPart(f"qc_mve_ew_{op.lower()}") if ctx["out_ctype"] == "int32_t" else None
    if op != "RESCALE":
        return None
    rq = ctx["rq"]
    m, s, zp = rq.multiplier, rq.shift, rq.output_zp
    if not (rq.scale32 and not rq.per_channel and m >= 0 and -65536 < zp < 65536 and rq.fn in _EXACT_RESCALE_FNS):
        return None
    if 32 <= s <= 62:
        return EwPart("qc_mve_ew_rescale32", (rq.input_zp, m, 31 - s, zp, 0 if rq.fn == "qc_scale32_single" else 1,
                                              rq.lo, rq.hi))
    k = _pow2(m)
    if s >= 2 and k is not None:
        return EwPart("qc_mve_ew_rescale_pow2", (rq.input_zp, k - s, zp, rq.lo, rq.hi))
    return None


def _elementwise(io: StepIO) -> KernelChoice:
    parts = vector_parts(io, _EW_TYPES, _ew_part, "RESCALE: per tensor, 32-bit scale, shifts 32..62 or a "
                         "power-of-two multiplier; CLAMP; int32 ADD, SUB")
    if isinstance(parts, KernelChoice):
        return parts
    params = Elementwise(tuple(f"qc_mve_ew_load_{_EW_TYPES[b.dtype.ctype]}" for b in io.ins),
                         parts,
                         f"qc_mve_ew_store_{_EW_TYPES[io.outs[0].dtype.ctype]}")
    return KernelChoice("qc_mve_ew", "exact vector forms of every part, 4 lanes, tail-predicated", form="ew_vector",
                        params=params, files=HEADER)
