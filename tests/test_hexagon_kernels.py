"""The HVX kernels of runtime/hexagon/qc_hvx.h and qc_hvx_ew.h on their own: one program, built with target
hexagon-hvx's compiler and flags and run under qemu-hexagon, calls qc_hvx_dot_rows32_s8 (weights laid out by the
family's own layouts, qcodegen/kernels/hvx/layouts.py rows32), qc_hvx_dw_tap_s8, the requantizing kernels and the
element-wise parts on seeded random and extreme operands; the results must equal the numpy primitives' (CONV2D,
DEPTHWISE_CONV2D, RESCALE) element for element. The kernel choices are checked without rendering."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import load_target
from qcodegen.kernel_testing import KernelProgram, conv_accumulators, conv_schedule, depthwise_accumulators, rescale
from qcodegen.kernels import plan_kernels
from qcodegen.kernels.hvx import layouts
from qcodegen.primitives.rescale import exception_arrays, exception_list
from qcodegen.resources import data_path
from qcodegen.verify.build import compile_cached
from qcodegen.verify.runners import unavailable

TARGET = load_target("hexagon-hvx")


def _dot_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """Rows fewer than, as many as and more than a block of 32 (padded rows), row lengths with and without a last
    partial word, up to 4096 elements; extreme values: a row of -128 x -128 (the largest sum) and -128 x 127."""
    for rows, k in ((1, 1), (10, 3), (32, 4), (32, 7), (40, 64), (64, 130), (33, 4096)):
        x = rng.integers(-128, 128, (2, k))
        w = rng.integers(-128, 128, (rows, k))
        x[0], w[0] = -128, -128
        w[-1] = 127
        sums = conv_accumulators(x, w, np.zeros(rows, np.int64), 0)  # [pixel, row]
        xs, ws = prog.array("int8_t", x), prog.array("int8_t", layouts.rows32(w))
        blocks = -(-rows // layouts.LANES)
        for pixel in range(2):
            prog.check(f"  int32_t r[{32 * blocks}];\n  qc_hvx_dot_rows32_s8({xs} + {pixel * k}, {ws}, {k}, "
                       f"{blocks}, r);", "r", sums[pixel])


def _depthwise_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """qc_hvx_dw_tap_s8 over the taps of one output pixel (a 1 x taps window) from the bias, against the numpy
    DEPTHWISE_CONV2D: 32, 64, 96 and 256 channels (a last block of 32 or 64), input zero points -128, 0 and 127;
    extreme values: x - izp = 255 with w = -128 (the largest product), -128 x -128."""
    for c, taps, izp in ((32, 3, -128), (64, 9, 0), (96, 2, 127), (256, 3, -128)):
        x = rng.integers(-128, 128, (1, 1, taps, c))
        w = rng.integers(-128, 128, (1, taps, c))
        x[0, 0, 0], w[0, 0] = 127, -128
        x[0, 0, -1], w[0, -1] = -128, -128
        bias = rng.integers(-(1 << 20), 1 << 20, c)
        acc = depthwise_accumulators(x, w, bias, izp)[0, 0, 0]
        xs, ws = prog.array("int8_t", x), prog.array("int8_t", w)
        prog.check(f"  int32_t r[{c}];\n  for (int32_t ch = 0; ch < {c}; ++ch) r[ch] = "
                   f"{prog.array('int32_t', bias)}[ch];\n  for (int32_t t = 0; t < {taps}; ++t) "
                   f"qc_hvx_dw_tap_s8(r, {xs} + t * {c}, {ws} + t * {c}, {c}, {izp});", "r", acc)


INT32 = (-(1 << 31), (1 << 31) - 1)


def _requant_operands(rng: np.random.Generator, lanes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Accumulators, multipliers and TOSA shifts (31..62) of `lanes` channels: per lane, an accumulator anywhere in
    int32, near a result in [-300, 300], or on an exact tie of the rounding (m = 2^30); the extremes of both."""
    shifts = rng.integers(31, 63, lanes)
    mults = rng.integers(0, 1 << 31, lanes)
    mults[:4] = [0, 1, (1 << 31) - 1, 1 << 30]
    acc = rng.integers(*INT32, lanes, endpoint=True)
    near = rng.random(lanes) < 0.4
    target = rng.integers(-300, 301, lanes) + rng.random(lanes)
    acc[near] = np.clip(target[near] * 2.0 ** shifts[near] / np.maximum(mults[near], 1), *INT32).astype(np.int64)
    tie = rng.random(lanes) < 0.2
    mults[tie], shifts[tie] = 1 << 30, rng.integers(32, 51, tie.sum())
    acc[tie] = (2 * rng.integers(-(1 << 9), 1 << 9, tie.sum()) + 1) << (shifts[tie] - 31)  # |acc| < 2^29
    acc[4:8] = [INT32[0], INT32[1], -1, 0]
    mults[4:8] = (1 << 31) - 1
    return acc, mults, shifts


def _requant_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """qc_hvx_requant on every lane against the numpy RESCALE, double (TFLite) and single (TOSA) rounding: the full
    int32 result (zp 0, no clamp), then int8 outputs (zero points, a ReLU clamp) stored for
    32 and fewer channels (qc_hvx_store_h8)."""
    for rounding, low in (("double_round", 31), ("single_round", 32), ("single_round", 31)):
        acc, mults, shifts = _requant_operands(rng, 32 * 16)
        shifts = np.maximum(shifts, low) if low == 32 else np.full_like(shifts, 31) if rounding == "single_round" \
            else shifts
        acc = np.where(shifts == 31, np.clip(acc, -(1 << 30), (1 << 30) - 1), acc)  # TOSA REQUIRE at shift 31
        rq = prog.array("int32_t", layouts.rq32(mults, shifts))
        rnd = int(rounding == "double_round" or low == 31)
        for zp, lo, hi, n, out in ((0, *INT32, 32, "int32_t"), (-5, -128, 127, 32, "int8_t"),
                                   (100, 100, 127, 19, "int8_t")):
            want = rescale(acc[None], mults, shifts, rounding, zp, lo, hi, "i32" if out == "int32_t" else "i8")
            want = want.reshape(16, 32)[:, :n]
            prog.check(f"  {out} r[{16 * n}];\n  for (int32_t b = 0; b < 16; ++b) {{\n    HVX_Vector a;\n"
                       f"    __builtin_memcpy(&a, {prog.array('int32_t', acc)} + 32 * b, 128);\n"
                       f"    const HVX_Vector q = qc_hvx_requant(a, {rq} + 64 * b, {rnd}, Q6_V_vsplat_R({zp}), "
                       f"Q6_V_vsplat_R({lo}), Q6_V_vsplat_R({hi}));\n"
                       + ("    __builtin_memcpy(r + 32 * b, &q, 128);\n" if out == "int32_t" else
                          f"    qc_hvx_store_h8(Q6_Vh_vpacke_VwVw(Q6_V_vzero(), q), r + {n} * b, {n});\n")
                       + "  }", "r", want)


def _store_cases(prog: KernelProgram) -> None:
    """qc_hvx_store_bytes writes y[0 .. n) only: 1, 19, 64 and 128 bytes at offsets within and across a 128-byte
    boundary of a buffer of sentinels (99), every byte of which is then checked."""
    want = np.full(512, 99)
    stores = []
    for at, n in ((0, 19), (1, 64), (120, 19), (127, 1), (200, 64), (300, 128)):
        want[at:at + n] = np.arange(n) - 60
        stores.append(f"  qc_hvx_store_bytes(v, r + {at}, {n});")
    prog.check("  static int8_t r[512] __attribute__((aligned(128)));\n  HVX_Vector v;\n"
               "  for (int32_t i = 0; i < 512; ++i) r[i] = 99;\n"
               "  for (int32_t i = 0; i < 128; ++i) ((int8_t *)(void *)&v)[i] = (int8_t)(i - 60);\n"
               + "\n".join(stores), "r", want)


def _scales(rng: np.random.Generator, channels: int, per_channel: bool, rounding: str) -> tuple[list, list]:
    """Multipliers in [2^30, 2^31) and shifts 40..44 (outputs of accumulators up to ~2^18 mostly off the clamps),
    per channel or one."""
    count = channels if per_channel else 1
    return (rng.integers(1 << 30, 1 << 31, count).tolist(), rng.integers(40, 45, count).tolist())


def _rq_vectors(prog: KernelProgram, mults: list, shifts: list, lanes: int, copies: int = 1) -> str:
    """The kernel's requantization vectors: one set (per tensor, repeated over `lanes`) or per channel (depthwise:
    `copies` pixels a block)."""
    m, s = (np.resize(mults, lanes), np.resize(shifts, lanes)) if len(mults) == 1 else (mults, shifts)
    if lanes == layouts.LANES:
        return prog.array("int32_t", layouts.rq32(np.asarray(m), np.asarray(s)))
    return prog.array("int32_t", layouts.dw_rq(np.asarray(m), np.asarray(s), copies if len(mults) > 1 else 1))




def _exceptions(prog: KernelProgram, acc: np.ndarray, want: np.ndarray, per_channel: bool, lo: int, hi: int,
                rng: np.random.Generator) -> tuple[str, np.ndarray]:
    """Exceptions to the single rounding (channel, accumulator, value) with random values in lo..hi: per channel,
    the accumulator of a random output of the last channel of each block of 32 and of the last channel (a block
    whose only exceptions are at its end); per tensor, those of 6 random outputs; and one accumulator that no output
    has. The kernels' qc_hvx_exceptions initializer and `want` with the listed values where an output's accumulator
    is listed."""
    channels = acc.shape[-1]
    flat = acc.reshape(-1, channels)
    rows = rng.integers(0, flat.shape[0], channels)
    if per_channel:
        listed = {(c, int(flat[rows[c], c])) for c in {*range(31, channels, 32), channels - 1}}
    else:
        listed = {(0, int(flat.flat[i])) for i in rng.choice(flat.size, min(6, flat.size), replace=False)}
    listed.add((channels - 1 if per_channel else 0, 1 << 30))
    exceptions = tuple((c, a, int(rng.integers(lo, hi + 1))) for c, a in sorted(listed))
    arrays = exception_arrays(exceptions, channels if per_channel else 1, lo, hi)
    got = want.reshape(-1, channels).copy()
    for c, a, v in exceptions:
        for col in [c] if per_channel else range(channels):
            got[flat[:, col] == a, col] = v
    arrays["exc_channel"] = exception_list(exceptions, lo, hi)["exc_channel"]
    names = [prog.array("int32_t", arrays[k]) for k in ("exc_start", "exc_channel", "exc_acc", "exc_value")]
    return f"{{{', '.join(names)}, {int(per_channel)}}}", got.reshape(want.shape)


NO_EXCEPTIONS = "{NULL, NULL, NULL, NULL, 0}"


def _check_forms(prog: KernelProgram, kind: str, params: str, want: np.ndarray, call, exc: bool) -> None:
    """Both forms of kernel `kind` (the shared kernel, its copy for steps with exceptions when exc, and the _inline
    form, specialized per call site: weight layout "fast") on the params struct q ({params}) by the C statement
    call(fn), int8 results in r against `want`."""
    for fn in (f"qc_hvx_{kind}_rq{'_exc' if exc else ''}_s8", f"qc_hvx_{kind}_rq_s8_inline"):
        prog.check(f"  static const qc_hvx_{kind}_params q = {{{params}}};\n  int8_t r[{want.size}];\n"
                   f"  {call(fn)}", "r", want)


def _conv_rq_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """qc_hvx_conv_rq_s8 (and its _inline form) pixel by pixel against the numpy CONV2D then RESCALE: rows fewer
    than, a multiple of and more than 32 (a last partial block), rows with a last partial word, per channel and per
    tensor scales, double and single rounding, input zero points -128 and 7, a ReLU clamp."""
    for case, (rows, k, izp, per_channel, rounding, zp, lo) in enumerate((
            (10, 3, -128, True, "double_round", -3, -128), (40, 67, 7, False, "double_round", 2, 2),
            (64, 130, -128, True, "single_round", -128, -128), (40, 5, 0, True, "single_round", 0, -128))):
        x = rng.integers(-128, 128, (3, k))
        w = rng.integers(-128, 128, (rows, k))
        bias = rng.integers(-(1 << 16), 1 << 16, rows)
        mults, shifts = _scales(rng, rows, per_channel, rounding)
        acc = conv_accumulators(x, w, bias, izp)
        want = rescale(acc, mults, shifts, rounding, zp, lo, 127)
        exc, want = _exceptions(prog, acc, want, per_channel, lo, 127, rng) if case % 2 else (NO_EXCEPTIONS, want)
        terms = izp * w.sum(axis=1)
        blocks = -(-rows // layouts.LANES)
        params = (f"{prog.array('int8_t', layouts.rows32(w))}, {prog.array('int32_t', layouts.starts(bias, terms))}, "
                  f"{_rq_vectors(prog, mults, shifts, layouts.LANES)}, {k}, {blocks}, {rows}, "
                  f"{2 * 32 if per_channel else 0}, {int(rounding == 'double_round')}, {zp}, {lo}, 127, {exc}")
        xs = prog.array('int8_t', x)
        _check_forms(prog, "conv", params, want,
                     lambda fn, xs=xs, k=k, rows=rows: f"for (int32_t p = 0; p < 3; ++p) {fn}(&q, {xs} + p * {k}, "
                                                        f"r + p * {rows});", case % 2)


def _dw_rq_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """qc_hvx_dw_rq_s8 (and its _inline form) over whole images against the numpy DEPTHWISE_CONV2D then RESCALE: 8
    channels (a block mostly padding), 40, 72 (a last partial block) and 130; padding on every side (reading the
    input zero point, or another value), strides 2, dilation 2, per channel and per tensor scales, double and single
    rounding; 8, 16 and 32 channels also 8, 4 and 2 pixels a block (copies, stride 1: groups across the borders, a
    last shorter group); an input of fewer than 128 bytes."""
    for case, (c, copies, hw, stride, pad, dilation, izp, pad_value, per_channel, rounding) in enumerate((
            (8, 1, (6, 7), (1, 1), (1, 1, 1, 1), (1, 1), -128, -128, True, "double_round"),
            (8, 8, (6, 13), (1, 1), (1, 1, 1, 1), (1, 1), -128, -128, True, "double_round"),
            (8, 8, (2, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0, 0, True, "double_round"),
            (16, 4, (5, 9), (1, 1), (0, 2, 2, 0), (2, 2), 3, -128, False, "single_round"),
            (32, 2, (3, 6), (2, 1), (1, 1, 1, 1), (1, 1), -128, -128, True, "double_round"),
            (40, 1, (7, 6), (2, 2), (1, 1, 0, 1), (1, 1), 5, 5, False, "double_round"),
            (72, 1, (6, 6), (1, 2), (2, 1, 1, 2), (2, 2), 0, -128, True, "single_round"),
            (130, 1, (4, 5), (1, 1), (0, 0, 0, 0), (1, 1), -1, -1, True, "double_round"))):
        x = rng.integers(-128, 128, (1, *hw, c))
        w = rng.integers(-128, 128, (3, 3, c))
        bias = rng.integers(-(1 << 16), 1 << 16, c)
        mults, shifts = _scales(rng, c, per_channel, rounding)
        acc = depthwise_accumulators(x, w, bias, izp, stride, pad, dilation, pad_value)
        want = rescale(acc, mults, shifts, rounding, -7, -128, 127)
        exc, want = _exceptions(prog, acc, want, per_channel, -128, 127, rng) if case % 2 else (NO_EXCEPTIONS, want)
        oh, ow = acc.shape[1:3]
        fields = [c, -(-c * copies // 64), copies, 4 * 32 if per_channel else 0, 3, 3, *hw, oh, ow, *stride,
                  *dilation, pad[0], pad[2], izp, pad_value, int(rounding == "double_round"), -7, -128, 127, exc]
        params = (f"{prog.array('int16_t', layouts.dw_w16(w.reshape(9, c), copies))}, "
                  f"{prog.array('int32_t', layouts.dw_starts(bias, copies))}, "
                  f"{_rq_vectors(prog, mults, shifts, 2 * layouts.LANES, copies)}, "
                  f"{', '.join(map(str, fields))}")
        xs = prog.array('int8_t', x)
        _check_forms(prog, "dw", params, want, lambda fn, xs=xs: f"{fn}(&q, {xs}, r);", case % 2)


def _ew_io_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """qc_hvx_ew_load then qc_hvx_ew_store, 128 elements an iteration, of int8 / int16 / int32 buffers of 1, 31,
    128, 129 and 300 elements (partial last vectors of every length class, buffers shorter than a vector) into a
    buffer of sentinels (99) 8 elements longer: every element copied, the sentinels past the end untouched; int8
    widened to int32 lanes and stored as int32 (sign extension, lane order)."""
    for ctype, (lo, hi), out in (("int8_t", (-128, 127), "int8_t"), ("int16_t", (-32768, 32767), "int16_t"),
                                 ("int32_t", INT32, "int32_t"), ("int8_t", (-128, 127), "int32_t")):
        bytes_in, bytes_out = (np.dtype(t.removesuffix("_t")).itemsize for t in (ctype, out))
        for n in (1, 31, 128, 129, 300):
            x = rng.integers(lo, hi, n, endpoint=True)
            x[:2] = (lo, hi)[:n]
            xs = prog.array(ctype, x)
            prog.check(f"  {out} r[{n + 8}];\n  for (int32_t i = 0; i < {n + 8}; ++i) r[i] = 99;\n"
                       f"  for (int32_t i = 0; i < {n}; i += 128) {{\n    HVX_Vector v[4];\n"
                       f"    qc_hvx_ew_load({xs}, {bytes_in}, {n}, i, v);\n"
                       f"    qc_hvx_ew_store(r, {bytes_out}, {n}, i, v);\n  }}", "r", np.concatenate([x, [99] * 8]))


def _ew_lanes(prog: KernelProgram, acc: np.ndarray, call: str, out: str, want: np.ndarray) -> None:
    """call (a C expression of the int32 lanes v) on the 128 values acc, 32 lanes at a time, the results stored as
    `out` against want."""
    prog.check(f"  {out} r[128];\n  for (int32_t b = 0; b < 4; ++b) {{\n    HVX_Vector v;\n"
               f"    __builtin_memcpy(&v, {prog.array('int32_t', acc)} + 32 * b, 128);\n"
               f"    const HVX_Vector q = {call};\n"
               f"    for (int32_t l = 0; l < 32; ++l) r[32 * b + l] = ({out})((const int32_t *)(const void *)&q)[l];\n"
               "  }", "r", want)


def _ew_rescale_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """qc_hvx_ew_rescale (per tensor, scalar constants: shifts 31..62, multipliers 0, 1, 2^30, 2^31 - 1 and random,
    double and single rounding, accumulators anywhere in int32, near results and on exact ties) and
    qc_hvx_ew_rescale_pow2 (2^k with shifts 1..30: shifted left, rounded right, on ties) against the numpy RESCALE:
    full int32 results, then an input zero point with int8 operands, an output zero point and a clamp."""
    for rounding in ("double_round", "single_round"):
        acc, mults, shifts = _requant_operands(rng, 128)
        for m, s in ((mults[0], 40), (1, 33), ((1 << 31) - 1, 62), (1 << 30, 31), (1 << 30, 32), (int(mults[9]), 38),
                     (int(mults[10]), int(shifts[10]))):
            a = np.where(s == 31, np.clip(acc, -(1 << 30), (1 << 30) - 1), acc)  # TOSA REQUIRE at shift 31
            if m == 1 << 30 and s > 31:
                a[:64] = (2 * rng.integers(-(1 << 9), 1 << 9, 64) + 1) << (s - 31)  # ties
            single = rounding == "single_round"
            rnd = int(not (single and s > 31))
            _ew_lanes(prog, a, f"qc_hvx_ew_rescale(v, 0, {m}, {s - 31}, {rnd}, 0, INT32_MIN, INT32_MAX)",
                      "int32_t", rescale(a[None], [m], [s], rounding, 0, *INT32, "i32")[0])
            x = rng.integers(-128, 128, 128)
            _ew_lanes(prog, x, f"qc_hvx_ew_rescale(v, -7, {m}, {s - 31}, {rnd}, 3, -100, 127)", "int8_t",
                      rescale((x + 7)[None], [m], [s], rounding, 3, -100, 127)[0])
    for k, s in ((30, 10), (30, 11), (20, 20), (28, 30), (3, 9), (0, 2)):
        n, bound = k - s, (1 << (s - 1)) - 1  # TOSA REQUIRE |v| < 2^(shift - 1) for shifts <= 31
        x = rng.integers(-bound, bound, 128, endpoint=True)
        x[:2] = -bound, bound
        if n < 0:
            x[2:34] = np.clip((2 * rng.integers(-bound, bound, 32) + 1) << (-n - 1), -bound, bound)  # ties
        _ew_lanes(prog, x, f"qc_hvx_ew_rescale_pow2(v, 0, {n}, 0, INT32_MIN, INT32_MAX)", "int32_t",
                  rescale(x[None], [1 << k], [s], "single_round", 0, *INT32, "i32")[0])
        if s >= 9:  # int8 operands minus the zero point 5
            x8 = rng.integers(-128, 128, 128)
            _ew_lanes(prog, x8, f"qc_hvx_ew_rescale_pow2(v, 5, {n}, -3, -128, 50)", "int8_t",
                      rescale((x8 - 5)[None], [1 << k], [s], "single_round", -3, -128, 50)[0])


def _run(prog: KernelProgram, workdir: Path) -> np.ndarray:
    runtime = data_path("runtime")
    # beside the source: part of the build's cache key
    for header in ("qc_minilibc.h", "hexagon/qc_hvx.h", "hexagon/qc_hvx_ew.h"):
        shutil.copyfile(runtime / header, workdir / Path(header).name)
    source = workdir / "kernels_hexagon.c"
    source.write_text(prog.source().replace("#include <stdio.h>", '#include "qc_minilibc.h"'))
    sources = [source, runtime / "qc_minilibc.c", runtime / "hexagon" / "qc_hexagon_start.c"]
    flags = [TARGET.cc, *TARGET.cflags, f"-I{workdir}"]
    exe = compile_cached(sources, flags, ".exe", list(TARGET.ldflags))
    out = workdir / "out.bin"
    proc = subprocess.run([*TARGET.emulator, str(exe), str(out)], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-1000:]
    return np.frombuffer(out.read_bytes(), "<i4").astype(np.int64)


@pytest.mark.skipif(bool(unavailable(TARGET)), reason=f"hexagon-hvx: {unavailable(TARGET)}")
def test_kernels_against_the_numpy_primitives(tmp_path):
    prog = KernelProgram(("qc_hvx.h", "qc_hvx_ew.h"))
    rng = np.random.default_rng(18)
    _dot_cases(prog, rng)
    _depthwise_cases(prog, rng)
    _requant_cases(prog, rng)
    _store_cases(prog)
    _conv_rq_cases(prog, rng)
    _dw_rq_cases(prog, rng)
    _ew_io_cases(prog, rng)
    _ew_rescale_cases(prog, rng)
    mismatches = prog.mismatches(_run(prog, tmp_path))
    assert mismatches == "", mismatches


def test_rows32_layout():
    """Block b, word j, lane l holds row 32 b + l's elements 4 j .. 4 j + 3; the padding is zero."""
    w = np.arange(40 * 7).reshape(40, 7) % 251 - 125
    got = layouts.rows32(w).reshape(2, 2, 32, 4)  # [block, word, lane, byte]
    assert got.size == layouts.rows32_bytes(40, 7) == 2 * 32 * 8
    assert got[1, 0, 3].tolist() == w[35, 0:4].tolist() and got[0, 1, 5].tolist() == [*w[5, 4:7], 0]
    assert not got[1, :, 8:].any()


def _choice(sched):
    return plan_kernels(sched, TARGET, "m").steps[-1].choice


def test_conv_choices():
    """FUSED_CONV to int8: conv_rq (starts = bias - izp x the row sums, one requantization set for a per-tensor
    scale), depthwise of 8 channels: dw_rq; int32 outputs: VRMPY rows (fewer than 32 rows padded; the int8 weights
    unread, the zero-point terms izp x the row sums), depthwise of 32: dw_tap, of 8: the portable loops; weight zero
    point not 0: the portable loops; weight layout "fast": the conv kernel's _inline form."""
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, (32, 1, 1, 8)).astype(np.int8)
    px = dict(x_shape=(1, 2, 3, 8), y_shape=(1, 2, 3, 32), w=w, bias=np.arange(32))
    rq = _choice(conv_schedule("CONV2D", **px))
    assert (rq.kernel, rq.form, rq.layout, rq.unread) == ("qc_hvx_conv_rq_s8", "conv_rq", "rows32", {1, 2})
    sums = w.reshape(32, 8).astype(int).sum(1)
    assert rq.arrays["starts"].values.tolist() == (np.arange(32) + 128 * sums).tolist()
    assert (rq.params.rows, rq.params.k, rq.params.blocks, rq.params.rq_stride, rq.params.rnd) == (32, 8, 1, 0, 1)
    full = _choice(conv_schedule("CONV2D", y_dtype="i32", **px))
    assert (full.kernel, full.form, full.layout, full.unread) == ("qc_hvx_dot_rows32_s8", "dot_rows32", "rows32",
                                                                  {1})
    assert (full.params.rows, full.params.k, full.params.blocks) == (32, 8, 1)
    assert full.arrays["weights"].values.tolist() == layouts.rows32(w.reshape(32, 8)).tolist()
    assert full.arrays["zero_point_terms"].values.tolist() == (-128 * sums).tolist()
    few = dict(px, w=w[:8], bias=np.arange(8), y_shape=(1, 2, 3, 8))
    padded = _choice(conv_schedule("CONV2D", y_dtype="i32", **few))
    assert (padded.kernel, padded.params.blocks) == ("qc_hvx_dot_rows32_s8", 1)
    assert _choice(conv_schedule("CONV2D", wzp=3, **px)).kernel == "c:conv2d"
    for c, y_dtype, kernel in ((8, "i8", "qc_hvx_dw_rq_s8"), (8, "i32", "c:depthwise_conv2d"),
                               (32, "i32", "qc_hvx_dw_tap_s8")):
        dw = rng.integers(-128, 128, (3, 3, c, 1)).astype(np.int8)
        got = _choice(conv_schedule("DEPTHWISE_CONV2D", x_shape=(1, 4, 4, c), y_shape=(1, 2, 2, c), w=dw,
                                    bias=np.zeros(c), y_dtype=y_dtype))
        assert got.kernel == kernel
    fast = load_target("hexagon-hvx", "fast")
    assert plan_kernels(conv_schedule("CONV2D", **px), fast, "m").steps[-1].choice.params.fn == \
        "qc_hvx_conv_rq_s8_inline"
