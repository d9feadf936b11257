"""Kernel choice for the Cortex-M4/M7 DSP extension (targets cortex-m4, cortex-m7; kernels in
runtime/cortex-m/qc_cm_dsp.c, call sites in templates/cortex-m-dsp/_dot.c.j2).

int8 x int8 convolutions with weight zero point 0:
- CONV2D over 2+ output pixels with rows of 4..2048 elements: the pixels in pairs (qc_dsp_dot_2x2_*: each weight
  word SXTB16-unpacked once for both), or, when every output is int8 of an exact 32-bit requantization and the sums
  cannot overflow from their start, in triples with the requantization inside the kernel (qc_dsp_conv_3px_* and
  qc_dsp_conv_2px_* for the last one or two pixels; rows of at most 10 groups of 4 elements fully unrolled, _g<n>;
  the double rounding of accumulators below 2^30 without a clamp: qc_dsp_conv_{3px,2px}_<w>_packed on doubled
  sums, one asm loop over all the rows of 3, 2 or 1 pixels with the starts and requantization inside the weights,
  dsp_packed);
- one output pixel (fully connected): 4 weight rows per input word (qc_dsp_dot_4rows_*), the input widened once;
- DEPTHWISE_CONV2D (multiplier 1, constant weights and bias): blocks of 4 channels in registers over the taps,
  one call per run of interior pixels of an output row (qc_dsp_dw_*), requantized inside for int8 outputs.
Weight layout "compact" keeps the weights' flash (int8 words, dsp_s8x2 / dsp_s8x4); "fast" gives the convolutions
SMLAD's int16 pairs (dsp_q15x2 / dsp_q15x4: twice the flash, no SXTB16 of the weights). Every FUSED_CONV output
stored by template C uses the SMLAL requantization of runtime/cortex-m/qc_cm_rq.h where it is exact."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import primitives
from ...ir.schedule import CONST, StepIO
from ...primitives.data_movement import _Movement
from ...primitives.geometry import WindowLoops
from ..conv import PATCH_LIMIT, ConvStep, Requantization, exception_const_arrays, loops_scratch, table_scratch
from ..generic import conv_or_portable, portable
from ..names import ArrayNames
from ..record import ConstArray, KernelChoice, RequantStore, const_array, step_array
from . import layouts

RQ_FILES = ("cortex-m/qc_cm_rq.h",)
# the convolutions as dot products of rows: static kernels of a header, specialized per step (measured smaller and
# faster than shared copies); the depthwise kernels: functions of qc_cm_dsp.c, shared by the models of a firmware
CONV_FILES = RQ_FILES + ("cortex-m/qc_cm_dsp.h", "cortex-m/qc_cm_dsp_conv.h")
DW_FILES = RQ_FILES + ("cortex-m/qc_cm_dsp.h", "cortex-m/qc_cm_dsp.c")
# the block copy of the data-movement steps (templates/cortex-m/_block_copy.j2), shared by every Cortex-M family
COPY_FILES = ("cortex-m/qc_cm_copy.h", "cortex-m/qc_cm_copy.c")
# measured: steps inlined into <name>_run share its registers with the kernels' asm, and spill
STEP_ATTRIBUTES = "__attribute__((noinline))"
FIXED_GROUPS = 10  # rows of at most this many groups of 4 elements get a fully unrolled qc_dsp_conv_3px_*_g<n>
# packed steps of few groups and at most this many rows call qc_dsp_conv_3px_<w>_packed_g<n> (groups unrolled: no
# entry by the PC, no passes' end, a 5-instruction prologue): counted from GCC 12 -O2, ~4 instructions per pair of
# rows and ~17 per call fewer, at 296 + 68 (q15x2; s8x2 80) bytes per group after the first; with few rows the
# call's share is large, and MobileNetV1's q15x2 steps (8, 16, 32 rows) then no longer link the general kernel
FIXED_PACKED_ROWS = 32
MAX_RELAID_ROW = 2048  # the longest row the DSP dot kernels take (the stack buffer of widened inputs: 4 KiB)
WINDOW_ROWS_SCRATCH = 2048  # bytes of a convolution step's stack copy of its padded image or of the rows of a window
DW_ROWS_SCRATCH = 4096  # bytes of qc_dsp_dwr_*'s stack scratch (a band's plane of int16 and its int32 sums)
K_CHANNEL = 90  # qc_dsp_dwr_*'s instructions per channel and band outside its loops (fitted, _dw_rows_cost)
Q15_COPY_SCRATCH = 4096  # bytes of the stack copy of a step's packed weights as int16 pairs (qc_dsp_packed_q15x2)


def exact_s33(rq: Requantization) -> bool:
    """qc_dsp_scale32_s33 (qc_cm_rq.h) computes the requantization exactly: a 32-bit scale with every shift >= 33,
    single or double rounding, outputs within int16 (exceptions to the single rounding: the template's store
    compares the accumulators after it)."""
    return (rq.scale32 and rq.min_shift >= 33 and -32768 <= rq.lo and rq.hi <= 32767
            and rq.fn in ("qc_scale32_single", "qc_scale32_double", "qc_scale32_double_gt31"))


def requant_store(rq: Requantization | None) -> RequantStore | None:
    """The store form of template C for `rq` (None: the portable expression): SSAT to the output's 8 or 16 bits
    with the halving inside, then a maximum when the lower bound is above the type's (a fused ReLU), or a clamp
    when the upper bound is below it."""
    if rq is None or not exact_s33(rq):
        return None
    bits = 8 if rq.lo >= -128 and rq.hi <= 127 else 16
    dbl = 0 if rq.fn == "qc_scale32_single" else 1
    zp2p1 = 2 * rq.output_zp + 1
    if rq.hi == 2 ** (bits - 1) - 1:
        floor = None if rq.lo == -2 ** (bits - 1) else rq.lo
        return RequantStore(f"qc_dsp_sat{bits}_s33", zp2p1, dbl, floor=floor)
    return RequantStore("qc_dsp_scale32_s33", zp2p1, dbl, clamp=(rq.lo, rq.hi))


def _rq_mode(rq: Requantization, bound: int) -> int:
    """The kernels' requantization mode (qc_cm_dsp.c qc_dsp_rq8): 0 single rounding, 1 double, 2 double for
    accumulators below 2^30 in magnitude (bound: a bound of theirs), 4 single rounding with exceptions
    (qc_cm_rq.h qc_dsp_except after each block of outputs; mode 3 is the depthwise kernels' doubled mode 2)."""
    if rq.fn == "qc_scale32_single":
        return 4 if rq.exceptions else 0
    return 2 if bound < 2 ** 30 else 1


def _rq_name(rq: Requantization, mode: int) -> str:
    clamp = rq.lo > -128 or rq.hi < 127
    return ({0: "single", 1: "double", 2: "double_n", 4: "single"}[mode] + ("_pc" if rq.per_channel else "")
            + ("_clamp" if clamp else "") + ("_exc" if mode == 4 else ""))


def _rq_pairs(rq: Requantization, mode: int) -> np.ndarray:
    """{multiplier, shift - 33 (mode 2: - 32)} per channel (one pair per tensor), as qc_dsp_rq8 reads them."""
    drop = 32 if mode == 2 else 33
    return np.array([[m, s - drop] for m, s in zip(rq.multipliers, rq.shifts, strict=True)], np.int32)


@dataclass(frozen=True)
class ConvPixels:
    """form "conv_px": the pixels in triples (fn3 for the first `triples` pixels, 0 when fewer than 3) and the last
    one or two as a pair (fn2; packed: the last one alone by fn1), each call computing and requantizing every
    output channel of its pixels; qc_xq
    holds xq_words of widened inputs; window_length: the gathered window's length (whole groups of 4); packed: the
    weights are a dsp_packed array (the starts and requantization pairs inside; fn3 takes the first pixel's
    output only, the others following it), the sums doubled (the q15 weights, or double_inputs: the widened
    inputs; biased_inputs: widened as 2 (x + 128), the starts of zero point izp + 128); q15_copy: the int32 words of
    the stack copy of a compact dsp_packed array the step makes with qc_dsp_packed_q15x2 for the q15x2 kernels (0:
    none; the inputs then widened as they are); run: the pixels' inputs are contiguous (a 1x1 window of stride 1
    without padding): the step's own loop over the triples instead of the convolution template's loops."""

    fn3: str
    fn2: str
    fn1: str
    pixels: int
    triples: int
    rows: int
    groups: int
    zp2p1: int
    lo: int
    hi: int
    xq_words: int
    window_length: int
    packed: bool
    double_inputs: bool
    biased_inputs: bool
    q15_copy: int
    run: bool


@dataclass(frozen=True)
class DotPairs:
    """form "dot_2x2": the pixels in pairs, fn (qc_dsp_dot_2x2_s8x2 / _q15x2) per pair of rows (row pair r at
    weights + r * 2 * row_words), the last row of an odd count by qc_dsp_dot_s8 from the int8 weights."""

    fn: str
    pixels: int
    rows: int
    groups: int
    row_words: int
    window_length: int


@dataclass(frozen=True)
class DotRows:
    """form "dot_4rows": fn per block of 4 weight rows of one pixel (variant "q15": qc_dsp_dot_4rows_q15 over
    dsp_q15x4 words and the int8 rows' last k % 4 elements; "s8x4": qc_dsp_dot_4rows_s8x4 over dsp_s8x4 words;
    "s8": qc_dsp_dot_4rows_s8 over the int8 rows), the rows after the last block by qc_dsp_dot_s8."""

    fn: str
    variant: str
    rows: int
    k: int


@dataclass(frozen=True)
class Depthwise:
    """form "dw_table" (templates/cortex-m/_depthwise.c.j2 table_body): fn per run of interior pixels of an output
    row (runs) or per pixel; int8: fn requantizes and stores the int8 outputs (else int32 sums: stored as they
    are when runs, else requantized by the step); pair: the kernel of pixels in pairs over a table of their 12
    input columns (qc_dsp_dw_s8_<rq>_pair, 3x3 windows whose horizontal stride equals their dilation: the interior
    runs over the constant `columns`, the pairs next to a border over their addresses; fn then takes the single
    pixels; "" when the step has none); pair_run: the output columns [start, end) of the interior pairs (an even
    count from an even column: the rows' pixels are paired from their first)."""

    fn: str
    runs: bool
    int8: bool
    n: int
    taps: int
    zp2p1: int
    lo: int
    hi: int
    pair: str
    pair_run: tuple[int, int]


@dataclass(frozen=True)
class DwRows:
    """form "dw_rows": fn (qc_dsp_dwr_s8_<rq>) over one image of the step's geometry g (3x3, stride and dilation
    1): per band of nb output rows and block of 4 channels, the input rows widened into a plane of (nb + 2) x pw
    int16 per channel (4 trailing pad values after each), then channel by channel the pixels' sums (acc_len int32)
    and outputs; plane_len: the planes' int16; pad: the value a tap outside the input reads; zp2p1, lo, hi: as
    Depthwise."""

    fn: str
    g: WindowLoops
    pad: int
    nb: int
    pw: int
    plane_len: int
    acc_len: int
    zp2p1: int
    lo: int
    hi: int

    @property
    def scratch_bytes(self) -> int:
        return _dw_rows_bytes(self.plane_len, self.acc_len)


def data_movement(io: StepIO) -> KernelChoice | None:
    """The choice of a data-movement step (templates/generic/data_movement.c.j2): its loops, each contiguous run
    one qc_cm_copy (templates/cortex-m/_block_copy.j2; its files only for a step with such a run, on the template's
    condition: a copy along a contiguous run, not of packed 4-bit constants; inlined into <name>_run: MobileNetV1's
    56 copies, called from their own functions, took 68 B more of Cortex-M4 .text); None for other steps."""
    movement = primitives.get(io.step.op)
    if not isinstance(movement, _Movement):
        return None
    if not any(c.nest.contiguous_run and not (io.ins[c.input].kind == CONST and io.ins[c.input].dtype.is_packed)
               for c in movement.copies(io)):
        return portable(io)
    return portable(io, "contiguous runs by qc_cm_copy (LDM/STM when co-aligned)", files=COPY_FILES, inlined=True)


def choose(io: StepIO, index: int, names: ArrayNames, layout: str) -> KernelChoice:
    moves = data_movement(io)
    if moves is not None:
        return moves
    c = conv_or_portable(io)
    if isinstance(c, KernelChoice):
        return c
    store = requant_store(c.rq)
    extra = dict(requantize=store, files=RQ_FILES if store else ())
    if c.op == "CONV2D":
        return _conv(c, names, layout, store) or portable(io, _why_not_conv(c), **extra)
    return _depthwise(c, names, store) or portable(io, _why_not_depthwise(c), **extra)


def _int8_rows(c: ConvStep) -> bool:
    return c.int8 and c.wzp == 0 and c.k <= 65535


def _why_not_conv(c: ConvStep) -> str:
    if not c.channels_hook:
        return f"window of {c.k} elements > {PATCH_LIMIT}: summed tap by tap"
    return "not int8 x int8 with weight zero point 0 and rows of at most 65,535 elements"


def _conv(c: ConvStep, names: ArrayNames, layout: str, store: RequantStore | None) -> KernelChoice | None:
    if not (c.channels_hook and _int8_rows(c)):
        return None
    relaid = c.constant_weights and 4 <= c.k <= MAX_RELAID_ROW
    q15 = layout == "fast"
    base_reason = f"int8 x int8, weight zero point 0, constant rows of {c.k} elements (4..{MAX_RELAID_ROW})"
    if relaid and c.pixels >= 2 and c.rows >= 2:
        if c.rq is not None and exact_s33(c.rq) and c.rows % 2 == 0 and c.y.dtype.name == "i8":
            bias = c.bias_abs_max
            if bias is not None and bias + c.k * 2 ** 17 < 2 ** 31:
                return _conv_pixels(c, names, q15, f"{base_reason}, {c.pixels} pixels, {c.rows} rows (even), "
                                    f"int8 outputs of an exact 32-bit requantization (shifts >= 33), "
                                    f"|bias| + k 2^17 < 2^31")
        return _dot_pairs(c, names, q15, store, f"{base_reason}, {c.pixels} pixels, {c.rows} rows")
    if q15 and relaid and c.rows >= 4:
        return _dot_rows(c, names, "q15", store, f"{base_reason}, one pixel, weight layout fast")
    if relaid and c.rows % 4 == 0 and c.k % 4 == 0:
        return _dot_rows(c, names, "s8x4", store, f"{base_reason}, one pixel, rows and row length multiples "
                         "of 4")
    return _dot_rows(c, names, "s8", store, "int8 x int8, weight zero point 0, rows of at most 65,535 elements")


def _weights(c: ConvStep, names: ArrayNames, layout: str) -> ConstArray:
    fn = getattr(layouts, layout)
    return const_array(names.relaid(c.w.name, layout), fn(c.weight_rows()))


def _zero_point_terms(c: ConvStep, names: ArrayNames) -> dict[str, ConstArray]:
    if c.izp == 0:
        return {}
    return {"zero_point_terms": step_array(names, "izp_terms", layouts.zero_point_terms(c.weight_rows(), c.izp))}


def _conv_pixels(c: ConvStep, names: ArrayNames, q15: bool, reason: str) -> KernelChoice:
    assert c.rq is not None
    w = "q15x2" if q15 else "s8x2"
    mode = _rq_mode(c.rq, (c.bias_abs_max or 0) + c.k * 2 ** 15)
    rq = _rq_name(c.rq, mode)
    groups = (c.k + 3) // 4
    g = c.window
    window_rows = _window_rows(c)
    rows = c.weight_rows()
    if window_rows:
        rows = rows[:, layouts.window_rows_order(g.kh, g.kw * g.c)]
    starts = layouts.row_starts(rows, c.bias_per_row(), c.izp)
    pairs, zp2p1 = _rq_pairs(c.rq, mode), 2 * c.rq.output_zp + 1
    # qc_dsp_conv_3px_*_packed adds c = zp2p1 << s inside SMMLAR: exact while |c| < 2^30
    packed = rq in ("double_n", "double_n_pc") and abs(zp2p1) << int(pairs[:, 1].max()) < 2 ** 30
    q15_copy, run = 0, False
    copied = packed and not q15 and _q15_copy_pays(c.pixels, c.rows, groups, 1 if window_rows else 2)
    biased = packed and not q15 and bool(window_rows) and not copied
    if packed:  # one pointer over the starts, weights and pairs (qc_dsp_conv_3px_<w>_packed)
        # the sums doubled (qc_dsp_rq8 mode 3: no ADD per output): the int16 weights (q15, or the stack copy) or else
        # the widened inputs; mode 2 bounds |start| + the products by 2^30, so the doubled sums stay within int32
        words = layouts.dsp_q15x2(2 * rows) if q15 else layouts.dsp_s8x2(rows)
        if biased:  # the inputs widened as 2 (x + 128) (qc_dsp_widen_word_biased): the starts of zero point izp + 128
            # (the partial sums 2 bias + the 2 (x - izp) w summed + the (2 izp + 256) w not yet: each term at most
            # 510 x 128 < 2^16 in magnitude, so below 2 (|bias| + k 2^15) < 2^31, mode 2's bound)
            starts = layouts.row_starts(rows, c.bias_per_row(), c.izp + 128)
        stream = layouts.dsp_packed(words, 2 * starts, pairs, zp2p1)
        arrays = {"weights": step_array(names, f"dsp_{w}_packed", stream)}  # (by value: the weights, starts)
        unread = {1, 2}
        run = c.contiguous and c.k % 4 == 0
        if copied:
            q15_copy, w = stream.size + c.rows * groups, "q15x2"
        fn3, fn2, fn1 = (f"qc_dsp_conv_{n}px_{w}_packed" for n in (3, 2, 1))
        if groups <= FIXED_GROUPS and c.rows <= FIXED_PACKED_ROWS:
            fn3 += f"_g{groups}"
    else:
        relaid = (step_array(names, f"dsp_{w}_rows", getattr(layouts, f"dsp_{w}")(rows)) if window_rows
                  else _weights(c, names, f"dsp_{w}"))
        arrays = {"weights": relaid,
                  "rq": step_array(names, f"rq{mode}", pairs), **exception_const_arrays(c.rq, names)}
        unread = {1}
        if c.izp != 0 or not c.bias_per_channel:
            arrays["base"] = step_array(names, "base", starts)
            unread.add(2)
        fixed = f"_g{groups}" if groups <= FIXED_GROUPS else ""
        fn3, fn2, fn1 = f"qc_dsp_conv_3px_{w}_{rq}{fixed}", f"qc_dsp_conv_2px_{w}_{rq}", ""
    triples = c.pixels // 3 * 3
    params = ConvPixels(fn3 if triples else "", fn2, fn1, c.pixels, triples, c.rows, groups, zp2p1,
                        c.rq.lo, c.rq.hi, groups * (6 if c.pixels >= 3 else 4), _window_length(c), packed,
                        packed and not q15 and not q15_copy, biased, q15_copy, run)
    if window_rows:
        reason += f"; windows read row by row ({window_rows})"
    if q15_copy:
        reason += f"; the weights as int16 pairs in a stack copy of {4 * q15_copy} B made once per step"
    if run:
        reason += "; contiguous pixels: the triples in the step's own loop"
    layout = "dsp_s8x2" if q15_copy else f"dsp_{w}"
    return KernelChoice(params.fn3 or params.fn2, reason, layout + ("_packed" if packed else ""), "conv_px",
                        arrays, params, frozenset(unread), step_constants=False,
                        window_length=params.window_length, window_rows=window_rows, files=CONV_FILES,
                        stack_scratch=4 * (params.xq_words + q15_copy)
                        + loops_scratch(c, window_rows, params.window_length))


def _window_rows(c: ConvStep) -> str:
    """How qc_dsp_widen_rows reads a gathered window whose rows' taps are contiguous (KernelChoice.window_rows; ""
    when not): "in_place" (an interior window in the input, one reading padding gathered into a stack copy of as
    many input rows: the same code reads both), or "padded" from a stack copy of the image with its padding (no
    window gathered) when it fits WINDOW_ROWS_SCRATCH and the estimate of the copy is below that of the border
    windows' gathers (DS-CNN's first convolution, half of whose windows read padding)."""
    g = c.window
    if not c.gathered or (g.dx != 1 and g.kw != 1):
        return ""
    if g.all_interior:
        return "in_place"
    padded_rows, padded_cols = (g.oh - 1) * g.sy + (g.kh - 1) * g.dy + 1, (g.ow - 1) * g.sx + g.kw
    if (padded_rows * padded_cols * g.c <= WINDOW_ROWS_SCRATCH
            and _padded_copy_cost(g, padded_rows, padded_cols) < _border_gather_cost(g)):
        return "padded"
    return "in_place" if (g.kh - 1) * g.dy * g.iw * g.c + g.kw * g.c <= WINDOW_ROWS_SCRATCH else ""


def _padded_copy_cost(g: WindowLoops, padded_rows: int, padded_cols: int) -> int:
    """Estimated instructions of the "padded" copy per step (Cortex-M4, newlib): the memset of the padded image
    (~1 per 2 bytes) and a memcpy per input row (~40 with its call, for rows of a few words)."""
    return g.n * (padded_rows * padded_cols * g.c // 2 + 40 * min(g.ih, padded_rows))


def _border_gather_cost(g: WindowLoops) -> int:
    """Estimated instructions of the "in_place" gathers of the windows reading padding (the template's loops: ~6
    per window row and ~12 per tap; DS-CNN's 10x4 windows measured ~525 each), beyond reading them in place."""
    interior = max(g.rows[1] - g.rows[0], 0) * max(g.cols[1] - g.cols[0], 0)
    return (g.pixels - g.n * interior) * g.kh * (6 + 12 * g.kw)


def _q15_copy_pays(pixels: int, rows: int, groups: int, widen_saved: int) -> bool:
    """Whether a step of the packed kernels takes fewer instructions over a stack copy of its weights as int16 pairs
    (qc_dsp_packed_q15x2) of at most Q15_COPY_SCRATCH bytes, by the counts of GCC 12 -O2's code: the copy costs 15
    per group of a pair of rows (LDRD, 4 SXTB16, 4 SADD16, 2 STRD and the loop) and 12 per pair (the starts, the
    requantization words) and ~20 for the call; it saves per group of a pair of rows 3 instructions per call of the
    kernel (one per 3, 2 or 1 pixels: 4 SXTB16 and an LDRD against 2 LDRD) and per group of each pixel widen_saved
    (the inputs widened as they are: 2 SXTB16, where doubled they take 2 SADD16 more, biased 1 more)."""
    if 4 * rows // 2 * (8 + 4 * groups) > Q15_COPY_SCRATCH:
        return False
    calls = -(-pixels // 3)
    return 3 * groups * rows // 2 * calls + widen_saved * groups * pixels > (15 * groups + 12) * rows // 2 + 20


def _window_length(c: ConvStep) -> int:
    """The gathered window's length for the kernels over widened inputs: whole groups of 4 elements."""
    return (c.k + 3) // 4 * 4 if c.gathered else c.k


def _dot_pairs(c: ConvStep, names: ArrayNames, q15: bool, store: RequantStore | None,
               reason: str) -> KernelChoice:
    w = "q15x2" if q15 else "s8x2"
    arrays = {"weights": _weights(c, names, f"dsp_{w}"), **_zero_point_terms(c, names)}
    groups = (c.k + 3) // 4
    params = DotPairs(f"qc_dsp_dot_2x2_{w}", c.pixels, c.rows, groups, groups * (2 if q15 else 1),
                      _window_length(c))
    unread = frozenset() if c.rows % 2 else frozenset({1})
    return KernelChoice(params.fn, reason, f"dsp_{w}", "dot_2x2", arrays, params, unread, requantize=store,
                        window_length=params.window_length, files=CONV_FILES,
                        stack_scratch=16 * groups + loops_scratch(c, "", params.window_length))


def _dot_rows(c: ConvStep, names: ArrayNames, variant: str, store: RequantStore | None,
              reason: str) -> KernelChoice:
    arrays = dict(_zero_point_terms(c, names))
    layout = "int8"
    if variant != "s8":
        layout = "dsp_q15x4" if variant == "q15" else "dsp_s8x4"
        arrays["weights"] = _weights(c, names, layout)
    int8_read = variant == "s8" or c.rows % 4 != 0 or c.k % 4 != 0
    params = DotRows(f"qc_dsp_dot_4rows_{variant}", variant, c.rows, c.k)
    return KernelChoice(params.fn, reason, layout, "dot_4rows", arrays, params,
                        frozenset() if int8_read else frozenset({1}), requantize=store, files=CONV_FILES,
                        stack_scratch=(0 if variant == "s8" else 8 * (c.k // 4)) + loops_scratch(c))


def _why_not_depthwise(c: ConvStep) -> str:
    return ("not int8 x int8 with weight zero point 0, multiplier 1, at most 4096 taps, constant weights and "
            "bias, |bias| + taps 2^17 < 2^31")


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
    int8 = c.rq is not None and exact_s33(c.rq) and c.y.dtype.name == "i8"
    mode = _rq_mode(c.rq, bias + c.taps * 2 ** 15) if int8 and c.rq else -1
    if mode == 2 and bias + c.taps * 3 * 2 ** 14 >= 2 ** 30:  # the doubled partial sums of mode 2 in int32
        mode = 1
    rows_plan = _dw_rows_plan(c) if int8 else None
    if rows_plan is not None:
        return _dw_rows(c, names, mode, rows_plan, reason)
    # mode 2: the sums doubled (qc_cm_dsp.c: qc_dsp_rq8 mode 3 without the doubling ADD)
    arrays = {"q": step_array(names, "dw_q15_base",
                              layouts.dsp_dw_q15_base(taps, c.bias_per_row(), c.izp, 2 if mode == 2 else 1))}
    pair = ""
    if int8:
        assert c.rq is not None
        fn = f"qc_dsp_dw_s8_{_rq_name(c.rq, mode)}"
        arrays["rq"] = step_array(names, f"rq{mode}", _rq_pairs(c.rq, mode))
        arrays.update(exception_const_arrays(c.rq, names))
        reason += ", int8 outputs of an exact 32-bit requantization (shifts >= 33)"
        if (g.kh, g.kw) == (3, 3) and g.sx == g.dx and c.rows % 4 == 0:
            pair = f"{fn}_pair"
            reason += "; pixels in pairs (3x3, the horizontal stride equal to the dilation)"
    else:
        fn = "qc_dsp_dw_s32"
    if c.rows % 4 == 0:
        fn += "_c4"  # (no code for channels after the last group of 4)
    pair_run = _pair_run(g) if pair else (0, 0)
    if g.has_interior:
        offsets = [(ky * g.dy * g.iw + kx * g.dx) * c.rows for ky in range(g.kh) for kx in range(g.kw)]
        if not pair or g.all_interior:  # (else the single pixels read padding, over tables of their taps)
            arrays["taps"] = step_array(names, "tap_offsets", np.array(offsets, np.uint32), "uintptr_t")
        if pair_run[1] > pair_run[0]:  # the interior pairs' window columns: column j one stride after j - 1
            columns = [offsets[3 * ky] + j * g.sx * c.rows for ky in range(3) for j in range(4)]
            arrays["columns"] = step_array(names, "pair_columns", np.array(columns, np.uint32), "uintptr_t")
    runs = int8 or (c.rq is None and c.y.dtype.ctype == "int32_t")
    rq = c.rq
    params = Depthwise(fn, runs, int8, c.rows, c.taps, 2 * rq.output_zp + 1 if int8 and rq else 0,
                       rq.lo if int8 and rq else 0, rq.hi if int8 and rq else 0, pair, pair_run)
    unread = {2} if c.rows % 4 else {1, 2}
    return KernelChoice(fn, reason, "dsp_dw_q15_base", "dw_table", arrays, params, frozenset(unread),
                        step_constants=not runs, requantize=None if runs else store, files=DW_FILES,
                        stack_scratch=table_scratch(c, runs))


def _dw_rows_plan(c: ConvStep) -> tuple[int, int] | None:
    """(pw, nb) of qc_dsp_dwr_* for a 3x3 window of stride and dilation 1 (None: another shape, no band of one row
    fits DW_ROWS_SCRATCH, or the estimate of its instructions is not below the dw_table kernels'): the plane's row
    length pw, even (its rows 4-byte aligned for LDRD), holding the
    left padding and the input row (pl + iw), and long enough that a window reaching past its row's end reads the
    next row's left padding (ow + 2 - pl); nb: the output rows of a band."""
    g = c.window
    if (g.kh, g.kw, g.sy, g.sx, g.dy, g.dx) != (3, 3, 1, 1, 1, 1) or not -128 <= c.pad_value <= 127:
        return None
    pw = max(g.pl + g.iw, g.ow + 2 - g.pl)
    pw += pw % 2
    fits = [nb for nb in range(1, g.oh + 1)
            if _dw_rows_bytes(*_dw_rows_lengths(pw, nb, g.ow, g.c, g.pl)) <= DW_ROWS_SCRATCH]
    if not fits or _dw_rows_cost(g, pw, fits[-1]) >= _dw_table_cost(g):
        return None
    return pw, fits[-1]


def _dw_rows_cost(g: WindowLoops, pw: int, nb: int) -> int:
    """Estimated instructions of qc_dsp_dwr_* on one image, counted from its loops (GCC 12 -O2, Cortex-M4): per band
    and block of 4 channels the widening (17 per pair of input pixels, 11 for an odd row's last one, 8 per input
    row, 30 for the call; qc_dsp_dwr5_*, _dw_rows5, unrolled: 15 per pair, 7 per row), per channel the pairs' sums
    (35 per 2 pairs of flat pixels; qc_dsp_dwr5_* row by row: 13 per row and 16 per pair), the outputs (per row 14
    per pair of pixels, 2 per 2 pairs, 8 for an odd row's last pixel, 5; qc_dsp_dwr5_* unrolled: 3) and K_CHANNEL
    for the channel's constants and calls (fitted: DS-CNN's and MobileNetV1's measured steps are 0.99-1.06 times the
    estimate)."""
    cost = 0
    e = g.pl % 2
    five = _dw_rows5(g)
    widen_pair, widen_row = (15, 7) if five else (17, 8)
    row_outputs = 14 * (g.ow // 2) + 8 * (g.ow % 2) + (3 if five else 2 * (g.ow // 4) + (g.ow // 2) % 2 + 5)
    for b0 in range(0, g.oh, nb):
        rows, iy0 = min(nb, g.oh - b0), b0 - g.pt
        in_rows = min(rows + 2, g.ih - iy0) - max(0, -iy0)
        if five:
            sums = rows * (13 + 2 * 16)
        else:
            sums = 35 * (((rows - 1) * pw + g.ow + e + 1) // 2) // 2
        cost += -(-g.c // 4) * (in_rows * (widen_pair * (g.iw // 2) + 11 * (g.iw % 2) + widen_row) + 30)
        cost += g.c * (sums + rows * row_outputs + K_CHANNEL)
    return cost


def _dw_rows5(g: WindowLoops) -> bool:
    """Whether the step takes qc_dsp_dwr5_* (rows of 5 inputs and 5 outputs, the left padding 1: DS-CNN's), whose
    code the other models do not link."""
    return g.iw == g.ow == 5 and g.pl == 1


def _pair_run(g: WindowLoops) -> tuple[int, int]:
    """The output columns [start, end) of a row's interior pixels taken in pairs: an even count from an even column
    (the rows' pixels are paired from their first)."""
    first_even = g.cols[0] + g.cols[0] % 2
    return first_even, first_even + max(g.cols[1] - first_even, 0) // 2 * 2


def _dw_table_cost(g: WindowLoops) -> int:
    """Estimated instructions of the dw_table kernels on one image of a 3x3 stride-1 step (its pixels in pairs),
    fitted to their measured counts (bench/profile_steps.py): 27 per output of the pairs of an interior row's run,
    30 of the other pairs (over a table of their columns), 36 for an odd row's last pixel (over a table of its
    taps); within -3% .. +7% of DS-CNN's and MobileNetV1's steps of 32 or more channels (8 channels: 20% more).
    Channel counts that are not a multiple of 4 take single pixels: 27 per output, 36 next to a border."""
    if g.c % 4:
        interior = max(g.rows[1] - g.rows[0], 0) * max(g.cols[1] - g.cols[0], 0)
        return g.c * (36 * g.oh * g.ow - 9 * interior)
    start, end = _pair_run(g)
    interior_rows = max(g.rows[1] - g.rows[0], 0) if g.has_interior else 0
    paired = g.ow - g.ow % 2
    per_row = 27 * (end - start) + 30 * (paired - (end - start))
    return g.c * (interior_rows * per_row + (g.oh - interior_rows) * 30 * paired + g.oh * (g.ow % 2) * 36)


def _dw_rows_lengths(pw: int, nb: int, ow: int, channels: int, pl: int) -> tuple[int, int]:
    """(plane_len, acc_len) of qc_dsp_dwr_*'s scratch: per channel of a block (4, or fewer when the step has fewer)
    2 leading values when the left padding pl is odd (the input rows then start one index early, at an even one),
    nb + 2 plane rows and 4 trailing values (the last pair's window reads 2 past the last row's end), and the sums of
    every pair of the band's flat pixels (one more with the leading values)."""
    e = pl % 2
    plane_len = ((nb + 2) * pw + 4 + 2 * e) * min(channels, 4)
    acc_len = ((nb - 1) * pw + ow + e + 1) // 2 * 2
    return plane_len, acc_len


def _dw_rows_bytes(plane_len: int, acc_len: int) -> int:
    """Bytes of qc_dsp_dwr_*'s stack scratch: the planes' int16 and the sums' int32."""
    return 2 * plane_len + 4 * acc_len


def _dw_rows(c: ConvStep, names: ArrayNames, mode: int, plan: tuple[int, int], reason: str) -> KernelChoice:
    assert c.rq is not None
    g, (pw, nb) = c.window, plan
    plane_len, acc_len = _dw_rows_lengths(pw, nb, g.ow, g.c, g.pl)
    arrays = {"w": step_array(names, "dw_rows", layouts.dsp_dw_rows(c.weight_rows(), c.bias_per_row(), c.izp,
                                                                    2 if mode == 2 else 1)),
              "rq": step_array(names, f"rq{mode}", _rq_pairs(c.rq, mode)), **exception_const_arrays(c.rq, names)}
    entry = "qc_dsp_dwr5" if _dw_rows5(g) else "qc_dsp_dwr"
    params = DwRows(f"{entry}_s8_{_rq_name(c.rq, mode)}", g, c.pad_value, nb, pw, plane_len, acc_len,
                    2 * c.rq.output_zp + 1, c.rq.lo, c.rq.hi)
    reason += (f", int8 outputs of an exact 32-bit requantization (shifts >= 33); 3x3, stride and dilation 1: "
               f"channel by channel over int16 planes, bands of {nb} output rows, {params.scratch_bytes} B of stack")
    return KernelChoice(params.fn, reason, "dsp_dw_rows", "dw_rows", arrays, params, frozenset({1, 2}),
                        step_constants=False, files=DW_FILES, stack_scratch=params.scratch_bytes)
