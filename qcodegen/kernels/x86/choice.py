"""Kernel choice for x86-64 (targets x86-avx2, x86-avxvnni, x86-avx512vnni; kernels in runtime/x86/, call sites in
templates/x86/_dot.c.j2). One choice for two instruction-set levels (Isa): AVX2, and VNNI (VPDPBUSD / VPDPWSSD,
AVX-VNNI or AVX-512 VNNI: the same choices, the instructions picked by the header from the compiler's flags).

int8 x int8 convolutions with weight zero point 0 and rows of at most 65,535 elements:
- CONV2D with constant weights and bias, rows of at most 2048 elements, at least 8 output channels, an int32
  accumulator requantized to int8 / int16 by qc_x86_rq8_store (a 32-bit scale, SINGLE_ROUND, or DOUBLE_ROUND with
  every shift > 31; the exceptions to the single rounding after it): the blocked kernels (form "gemm": up to 4
  pixels x 16 channels in int32 lanes; AVX2: windows as int16 x - izp, madd_2x8 weights, VPMADDWD; one pixel on
  AVX2: VPMADDUBSW on the nibbles of x + 128 against dpbusd_4x8 weights; VNNI: VPDPBUSD of x + 128 against
  dpbusd_4x8 weights), the rows after the last block of 8 one by one;
- other CONV2D (form "rows"): AVX2, with that requantization, blocks of 8 rows (VPMADDWD) requantized in vectors,
  else blocks of 4 rows; VNNI: blocks of 8 rows (several short rows per vector for rows of 4, 8 or 16 bytes), a
  block of 4, the rest one by one (VPDPBUSD); the input-zero-point terms made at generation time (weights that are
  not constant: at run time);
- DEPTHWISE_CONV2D (multiplier 1): requantized as above, at most 9 taps without dilation, constant weights and
  bias, channels a multiple of 8, a band of at least kh widened rows in 64 KiB: the kernel over rows of int16 tap
  pairs (form "dw_rows"); else blocks of 8 channels in int32 lanes over the taps (form "dw_blocks", the vector/
  skeleton: taps by pairs with VPMADDWD on madd_dw_pairs when there are at most 9 and the weights are constant).
FUSED_ELEMENTWISE chains of per-tensor RESCALE (32-bit), CLAMP and int32 ADD / SUB over int8/16/32 values: 8
elements at a time (form "elementwise"). Everything else: the portable loops (AVG_POOL2D with the channels
innermost: templates/x86/_dot.c.j2 `pool_channels_inner`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ... import primitives
from ...ir.schedule import CONST, StepIO
from ...primitives.fused import part_ios
from ...primitives.geometry import WindowLoops
from ..conv import PATCH_LIMIT, ConvStep, Requantization, exception_const_arrays, loops_scratch
from ..generic import conv_or_portable, portable
from ..names import ArrayNames
from ..record import ConstArray, KernelChoice, const_array, step_array
from . import layouts

COMMON = ("x86/qc_x86.h",)
CONV_FILES = COMMON + ("x86/qc_x86_conv.h",)
DW_FILES = COMMON + ("x86/qc_x86_dw.h",)
EW_FILES = COMMON + ("x86/qc_x86_ew.h",)
STEP_ATTRIBUTES = ""
GEMM_MAX_ROW = 2048  # the longest row of the blocked kernels (the packed windows of 4 pixels on the stack)
GEMM_PIXELS = 4  # pixels per call of the blocked kernels
DW_ROWS_SCRATCH = 65536  # bytes of widened rows of qc_x86_dw_rows (on the stack)
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


@dataclass(frozen=True)
class Isa:
    """An instruction-set level of the family: name (for the reasons), vnni (VPDPBUSD / VPDPWSSD)."""

    name: str
    vnni: bool


AVX2 = Isa("AVX2", False)
VNNI = Isa("VNNI", True)


@dataclass(frozen=True)
class Rq8:
    """qc_x86_rq (qc_x86.h): the vector requantization of 8 channels. per_channel: the constants are the step's
    x86_rq8 array ("rq"), else multiplier m and shift s; s33: every shift >= 33; dbl: DOUBLE_ROUND; zp, lo, hi: the
    output zero point and clamp; sat: int8 over the whole int8 range (saturating packs); bits: 8 or 16;
    channel_exceptions: the exceptions to the single rounding (the choice's arrays "exc_start", "exc_acc",
    "exc_value", if any) are per channel."""

    per_channel: bool
    m: int
    s: int
    s33: bool
    dbl: bool
    zp: int
    lo: int
    hi: int
    sat: bool
    bits: int
    channel_exceptions: bool


@dataclass(frozen=True)
class Gemm:
    """form "gemm": the blocked kernel qc_x86_gemm_s8 (kern: QC_X86_MADD, QC_X86_UBS or QC_X86_DPBUSD) over groups of
    np pixels (the last group: pixels % np), each pixel's window packed by `pack` (into qc_xw[p % np]: planes of kpad
    elements of xtype; pack_arg: its last argument, the input zero point or kpad, if any; while it is gathered when
    `packed`); the rows from `blocked` on one by one with dot (the int8 window and rows), less their zero-point
    terms when corrected."""

    kern: str
    pack: str
    pack_arg: int | None
    xtype: str
    pixels: int
    np: int
    rows: int
    blocked: int
    k: int
    kpad: int
    kq: int
    planes: int
    izp: int
    packed: bool
    dot: str
    corrected: bool
    rq: Rq8


@dataclass(frozen=True)
class DotRows:
    """form "rows": per pixel, blocks of 8 rows by fn8 (lanes = rows; with rq requantized in vectors, else stored one
    by one), then a block of 4 by fn4, then single rows by fn1 (empty names: no such blocks); every sum less its
    row's zero-point term (correction: "none", "array" made at generation time, or "runtime": qc_x86_row_sums of the
    rows times factor into qc_zc)."""

    fn8: str
    fn4: str
    fn1: str
    rows: int
    k: int
    correction: str
    factor: int
    bias_per_channel: bool
    rq: Rq8 | None


@dataclass(frozen=True)
class DwRows:
    """form "dw_rows": qc_x86_dw_rows (qc_x86_dw.h) with the qc_x86_dw_rows_params of the step's geometry g (its
    channels: g.c, multiplier 1), the band plan (wp, step, nb) and the scratch: span rows of rowlen int16; rq: its
    zero point, clamp, rounding and output type (the per-channel constants are in the kernel's "params" array)."""

    g: WindowLoops
    pad: int
    vpad: bool
    hpad: bool
    wp: int
    step: int
    nb: int
    rowlen: int
    span: int
    rq: Rq8


@dataclass(frozen=True)
class DwBlocks:
    """form "dw_blocks": the blocks of 8 channels of qc_x86_dw.h in the register-blocked skeleton
    (templates/vector/_dw_blocks.c.j2); paired: taps by pairs on the madd_dw_pairs array ("pairs"); rq: the
    vector requantization of whole blocks (None: int32 outputs stored as they are, when int32; else each output
    stored by the step); int32: the outputs are the int32 accumulators."""

    paired: bool
    izp: int
    pad: int
    bias_per_channel: bool
    int32: bool
    rq: Rq8 | None


@dataclass(frozen=True)
class EwPart:
    """One part of an element-wise chain: op (rescale, clamp, add, sub), args (value names: v_in<i> or t<k>), out
    (its value's name); rescale: qc_x86_ew_rescale's izp, m, s, dbl, shl (>= 0: a shift left, m a power of two),
    clamp (then zp, lo, hi); clamp: lo, hi."""

    op: str
    args: tuple[str, ...]
    out: str
    izp: int = 0
    m: int = 0
    s: int = 0
    dbl: bool = False
    shl: int = -1
    clamp: bool = False
    zp: int = 0
    lo: int = 0
    hi: int = 0


@dataclass(frozen=True)
class Elementwise:
    """form "elementwise": 8 elements at a time over the first n8 of size, the rest from zero-padded copies; ins:
    the inputs' C types; out: the output's; parts in order (the last one's value is stored)."""

    size: int
    n8: int
    ins: tuple[str, ...]
    out: str
    parts: tuple[EwPart, ...]


def chooser(isa: Isa):
    """The family's `choose` for the instruction-set level isa."""

    def choose(io: StepIO, index: int, names: ArrayNames, layout: str) -> KernelChoice:
        if io.step.op == "FUSED_ELEMENTWISE":
            return _elementwise(io) or portable(io, "a part is not a per-tensor 32-bit RESCALE, CLAMP or int32 "
                                                   "ADD / SUB over int8/16/32 values")
        c = conv_or_portable(io)
        if isinstance(c, KernelChoice):
            return c
        if c.op == "CONV2D":
            return _conv(isa, io, c, names)
        return _depthwise(isa, io, c, names)

    return choose


# ---- requantization ----

def _vector_rq(c: ConvStep, acc32: bool) -> bool:
    """qc_x86_rq8_store computes the step's requantization: an int32 accumulator, a 32-bit scale, SINGLE_ROUND or
    DOUBLE_ROUND with every shift > 31 (qc_scale32_double_gt31), int8 / int16 outputs; exceptions to the single
    rounding after the vector store (qc_x86_except8). (The RESCALE of an i32 accumulator has input zero point 0.)"""
    rq = c.rq
    return (acc32 and rq is not None and rq.scale32 and rq.fn in ("qc_scale32_single", "qc_scale32_double_gt31")
            and c.y.dtype.name in ("i8", "i16"))


def _rq8(rq: Requantization, y_bits: int) -> Rq8:
    return Rq8(rq.per_channel, rq.multipliers[0], rq.shifts[0], rq.min_shift >= 33, rq.fn == "qc_scale32_double_gt31",
               rq.output_zp, rq.lo, rq.hi, y_bits == 8 and rq.lo == -128 and rq.hi == 127, y_bits, rq.per_channel)



def _rq_arrays(rq: Requantization, c: ConvStep, names: ArrayNames) -> dict[str, ConstArray]:
    """The constants of qc_x86_rq: per channel the x86_rq8 array ("rq"), and the exceptions' arrays."""
    arrays = exception_const_arrays(rq, names)
    if rq.per_channel:
        arrays["rq"] = step_array(names, "rq8", layouts.x86_rq8(rq.multipliers, rq.shifts))
    return arrays


def _acc32(io: StepIO) -> bool:
    """The convolution accumulates in int32 (acc_type i32, not widened)."""
    conv = part_ios(io)[0] if io.step.op == "FUSED_CONV" else io
    return primitives.get(conv.step.op).params(conv).acc_type == "i32"


def _bits(c: ConvStep) -> int:
    return 8 if c.y.dtype.name == "i8" else 16


# ---- CONV2D ----

def _int8_rows(c: ConvStep) -> bool:
    return c.int8 and c.wzp == 0 and c.k <= 65535


def _conv(isa: Isa, io: StepIO, c: ConvStep, names: ArrayNames) -> KernelChoice:
    if not c.channels_hook:
        return portable(io, f"window of {c.k} elements > {PATCH_LIMIT}: summed tap by tap")
    if not _int8_rows(c):
        return portable(io, "not int8 x int8 with weight zero point 0 and rows of at most 65,535 elements")
    vector = _vector_rq(c, _acc32(io))
    base = "int8 x int8, weight zero point 0"
    if (vector and c.rows >= 8 and c.constant_weights and c.bias_abs_max is not None and c.k <= GEMM_MAX_ROW):
        return _gemm(isa, c, names, f"{base}, constant weights and bias, rows of {c.k} <= {GEMM_MAX_ROW} "
                     f"elements, {c.rows} >= 8 rows, int32 accumulators requantized by qc_x86_rq8_store")
    return _rows(isa, c, names, vector, f"{base}, rows of {c.k} <= 65,535 elements")


def _gemm(isa: Isa, c: ConvStep, names: ArrayNames, reason: str) -> KernelChoice:
    assert c.rq is not None
    one = c.pixels == 1
    if isa.vnni:
        kern, pack, xtype, group, planes, blocks, unsigned = "QC_X86_DPBUSD", "qc_x86_pack_u8", "uint8_t", 4, 1, \
            "qc_x86_dpbusd_blocks", True
        reason += f", {c.pixels} pixels: VPDPBUSD"
    elif one:
        kern, pack, xtype, group, planes, blocks, unsigned = "QC_X86_UBS", "qc_x86_pack_nibbles", "uint8_t", 4, 2, \
            "qc_x86_ubs_blocks", True
        reason += ", one pixel: VPMADDUBSW on nibbles"
    else:
        kern, pack, xtype, group, planes, blocks, unsigned = "QC_X86_MADD", "qc_x86_pack_s16", "int16_t", 2, 1, \
            "qc_x86_madd_blocks", False
        reason += f", {c.pixels} pixels: VPMADDWD"
    rows = c.weight_rows()
    blocked = c.rows // 8 * 8
    layout = "dpbusd_4x8" if group == 4 else "madd_2x8"
    arrays = {"weights": const_array(names.relaid(c.w.name, layout), getattr(layouts, layout)(rows)),
              "starts": step_array(names, "starts",
                                 layouts.gemm_starts(rows, c.bias_per_row(), 128 + c.izp if unsigned else None)),
              **_rq_arrays(c.rq, c, names)}
    # the rows after the last block of 8: the int8 window and rows, the zero-point terms of the kernel's sums
    dot, factor = ("qc_x86_vnni_dot_s8", 128 + c.izp) if isa.vnni else ("qc_x86_dot_s8", c.izp)
    corrected = blocked < c.rows and factor != 0
    if corrected:
        arrays["zero_point_terms"] = step_array(names, "izp_terms",
                                                 layouts.zero_point_terms(rows, factor))
    kpad = (c.k + group - 1) // group * group
    pack_arg = {"QC_X86_MADD": c.izp, "QC_X86_UBS": kpad}.get(kern)
    params = Gemm(kern, pack, pack_arg, xtype, c.pixels, min(GEMM_PIXELS, c.pixels), c.rows, blocked, c.k, kpad,
                  kpad // group, planes, c.izp, c.gathered and blocked == c.rows, dot, corrected, _rq8(c.rq, _bits(c)))
    whole = blocked == c.rows
    # the stack: the packed windows of a group of pixels (qc_xw; the gathered window xp when not packed into them)
    packed = params.np * kpad * planes * (2 if xtype == "int16_t" else 1)
    windows = loops_scratch(c) - (c.k if params.packed else 0)
    return KernelChoice(blocks, reason, layout, "gemm", arrays, params, frozenset({1, 2}) if whole else frozenset(),
                        step_constants=not whole, files=CONV_FILES, stack_scratch=packed + windows)


def _rows(isa: Isa, c: ConvStep, names: ArrayNames, vector: bool, reason: str) -> KernelChoice:
    arrays = {}
    if isa.vnni:
        short = c.k in (4, 8, 16)
        fn8 = "qc_x86_vnni_dot_8rows_short_s8" if short else "qc_x86_vnni_dot_8rows_s8"
        fn4, fn1, factor = "qc_x86_vnni_dot_4rows_s8", "qc_x86_vnni_dot_s8", 128 + c.izp
        rq = vector
        reason += ": VPDPBUSD, blocks of 8 rows" + (" (several rows per vector)" if short else "") + ", then 4, then 1"
    elif vector and c.rows >= 8:
        fn8, fn4, fn1, factor, rq = "qc_x86_dot_8rows_s8", "", "qc_x86_dot_s8", c.izp, True
        reason += ": VPMADDWD, blocks of 8 rows requantized in vectors, then 1"
    else:
        fn8, fn4, fn1, factor, rq = "", "qc_x86_dot_4rows_s8", "qc_x86_dot_s8", c.izp, False
        reason += ": VPMADDWD, blocks of 4 rows, then 1"
    correction = "none" if factor == 0 else "array" if c.constant_weights else "runtime"
    if correction == "array":
        arrays["zero_point_terms"] = step_array(names, "izp_terms",
                                                 layouts.zero_point_terms(c.weight_rows(), factor))
    rq8 = None
    if rq and c.rows >= 8:
        assert c.rq is not None
        rq8 = _rq8(c.rq, _bits(c))
        arrays.update(_rq_arrays(c.rq, c, names))
    params = DotRows(fn8, fn4, fn1, c.rows, c.k, correction, factor, c.bias_per_channel, rq8)
    return KernelChoice(fn8 or fn4, reason, "int8", "rows", arrays, params, files=CONV_FILES,
                        stack_scratch=(4 * c.rows if correction == "runtime" else 0) + loops_scratch(c))


# ---- DEPTHWISE_CONV2D ----

def _depthwise(isa: Isa, io: StepIO, c: ConvStep, names: ArrayNames) -> KernelChoice:
    if not (c.int8 and c.wzp == 0 and c.m == 1 and c.taps <= 4096 and c.y.dtype.ctype != "int64_t"
            and (c.rq is not None or c.y.dtype.ctype == "int32_t")):
        return portable(io, "not int8 x int8 with weight zero point 0, multiplier 1, at most 4096 taps, a "
                            "requantized or int32 output")
    vector = _vector_rq(c, _acc32(io))
    g = c.window
    plan = _rows_plan(g, c.rows)
    if (vector and c.constant_weights and c.bias_abs_max is not None and c.rows % 8 == 0 and g.dx == 1
            and g.dy == 1 and c.taps <= 9 and plan is not None):
        return _dw_rows(isa, c, names, plan)
    return _dw_blocks(c, names, vector)


def _rows_plan(g: dict[str, Any], channels: int) -> tuple[int, int, int] | None:
    """(wp, step, nb) of qc_x86_dw_rows: the positions of a widened row, 2 when the stride is even (the taps' pairs
    start at even positions: every other position), the output rows of a band whose widened rows fit the scratch
    (None when kh rows do not)."""
    wp = (g.ow - 1) * g.sx + 2 * ((g.kw + 1) // 2) - 1
    step = 2 if g.sx % 2 == 0 else 1
    rows = DW_ROWS_SCRATCH // ((wp + step - 1) // step * channels * 4)
    if rows < g.kh:
        return None
    return wp, step, min(g.oh, (rows - g.kh) // g.sy + 1)


def _dw_rows(isa: Isa, c: ConvStep, names: ArrayNames, plan: tuple[int, int, int]) -> KernelChoice:
    assert c.rq is not None
    g, (wp, step, nb) = c.window, plan
    taps = c.weight_rows()
    arrays = {"weights": const_array(names.relaid(c.w.name, "x86_dw_rows"), layouts.x86_dw_rows(taps, g.kw)),
              "params": step_array(names, "dw_params", layouts.x86_dw_params(taps, c.bias_per_row(), c.izp,
                                                                                  c.rq.multipliers, c.rq.shifts)),
              **exception_const_arrays(c.rq, names)}
    rowlen = (wp + step - 1) // step * c.rows * 2
    params = DwRows(g, c.pad_value, g.pt > 0 or (g.oh - 1) * g.sy + g.kh - g.pt > g.ih,
                    g.pl > 0 or wp - g.pl >= g.iw, wp, step, nb, rowlen, (nb - 1) * g.sy + g.kh,
                    dataclasses.replace(_rq8(c.rq, _bits(c)), per_channel=False))  # (constants: in dw_params)
    reason = (f"int8 x int8, weight zero point 0, multiplier 1, {c.taps} <= 9 taps, no dilation, constant weights "
              f"and bias, {c.rows} channels (a multiple of 8), requantized by qc_x86_rq8_store, bands of {nb} output "
              f"rows in {DW_ROWS_SCRATCH // 1024} KiB: "
              + ("VPDPWSSD" if isa.vnni else "VPMADDWD") + " on rows of int16 tap pairs")
    return KernelChoice("qc_x86_dw_rows", reason, "x86_dw_rows", "dw_rows", arrays, params, frozenset({1, 2}),
                        step_constants=False, files=DW_FILES,
                        stack_scratch=2 * params.span * rowlen + (g.c if params.hpad else 0))


def _dw_blocks(c: ConvStep, names: ArrayNames, vector: bool) -> KernelChoice:
    paired = c.taps <= 9 and c.constant_weights
    arrays: dict[str, ConstArray] = {}
    if paired:
        arrays["pairs"] = const_array(names.relaid(c.w.name, "madd_dw_pairs"),
                                      layouts.madd_dw_pairs(c.weight_rows()))
    rq = None
    if vector and c.rows >= 8:  # (whole blocks of 8 channels to requantize in vectors)
        assert c.rq is not None
        rq = _rq8(c.rq, _bits(c))
        arrays.update(_rq_arrays(c.rq, c, names))
    params = DwBlocks(paired, c.izp, c.pad_value, c.bias_per_channel, c.rq is None, rq)
    reason = (f"int8 x int8, weight zero point 0, multiplier 1, {c.taps} taps: blocks of 8 channels over the taps"
              + (" (by pairs: VPMADDWD)" if paired else " (VPMULLD)"))
    return KernelChoice("qc_x86_dw8", reason, "madd_dw_pairs" if paired else "int8", "dw_blocks", arrays, params,
                        files=DW_FILES)


# ---- FUSED_ELEMENTWISE ----

def _elementwise(io: StepIO) -> KernelChoice | None:
    vector_types = ("int8_t", "int16_t", "int32_t")
    out = io.outs[0].dtype.ctype
    if out not in vector_types:
        return None
    for b in io.ins:
        if (b.dtype.ctype not in vector_types or not b.dtype.name.startswith("i")
                or (b.kind == CONST and b.dtype.is_packed)):
            return None
    parts = []
    for p in primitives.get(io.step.op).template_context(io)["parts"]:
        part = _ew_part(p)
        if part is None:
            return None
        parts.append(part)
    size = io.outs[0].size
    params = Elementwise(size, size // 8 * 8, tuple(b.dtype.ctype for b in io.ins), out, tuple(parts))
    return KernelChoice("qc_x86_ew_*", "per-tensor 32-bit RESCALE (shifts 2 .. 62, SINGLE_ROUND or DOUBLE_ROUND), "
                        "CLAMP and int32 ADD / SUB over int8/16/32 values: 8 elements at a time",
                        form="elementwise", params=params, files=EW_FILES)


def _ew_part(p: dict[str, Any]) -> EwPart | None:
    args = tuple(v if v.startswith("t") else f"v_{v}" for _, v in p["args"])
    if p["op"] == "RESCALE":
        rq = p["rq"]
        if not (rq.scale32 and not rq.per_channel and 2 <= rq.shift <= 62
                and rq.fn in ("qc_scale32_single", "qc_scale32_double", "qc_scale32_double_gt31")
                and INT32_MIN <= rq.input_zp <= INT32_MAX
                and INT32_MIN <= rq.lo - rq.output_zp and rq.hi - rq.output_zp <= INT32_MAX):
            return None
        m, s = rq.multiplier, rq.shift
        dbl = rq.fn == "qc_scale32_double_gt31" or (rq.fn == "qc_scale32_double" and s > 31)
        power = m.bit_length() - 1 if m > 0 and m & (m - 1) == 0 else -1
        shl = power - s if power >= s and not dbl else -1
        clamp = not (rq.lo == INT32_MIN and rq.hi == INT32_MAX and rq.output_zp == 0)
        return EwPart("rescale", args, p["out"], rq.input_zp, m, s, dbl, shl, clamp, rq.output_zp, rq.lo, rq.hi)
    if p["op"] == "CLAMP" and INT32_MIN <= p["lo"] and p["hi"] <= INT32_MAX:
        return EwPart("clamp", args, p["out"], lo=int(p["lo"]), hi=int(p["hi"]))
    if p["op"] in ("ADD", "SUB") and p["out_ctype"] == "int32_t":
        return EwPart(p["op"].lower(), args, p["out"])
    return None
