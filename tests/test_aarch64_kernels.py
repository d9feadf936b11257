"""The AArch64 NEON kernels of runtime/aarch64 on their own: one program per target (aarch64-neon, aarch64-dotprod:
the dot products differ; qc_neon_sdot.h is dotprod only; the depthwise kernels, the same C on both, run on neon),
built with the target's compiler and flags and run under qemu-aarch64, calls every kernel and variant on seeded
random and extreme operands; its results must equal the numpy primitives (CONV2D, DEPTHWISE_CONV2D, RESCALE) on the
same values, element for element. The constant arrays (SDOT weights, zero-point terms, depthwise starts, shifts, pad
rows) are made by the family's own layouts (qcodegen/kernels/aarch64/layouts.py), so the layouts are checked with
the kernels. The kernel choices are checked without rendering."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import load_target
from qcodegen.kernel_testing import KernelProgram, conv_accumulators, conv_schedule, depthwise_accumulators, rescale
from qcodegen.kernels import plan_kernels
from qcodegen.kernels.aarch64 import layouts
from qcodegen.resources import data_path
from qcodegen.verify.build import compile_cached
from qcodegen.verify.runners import unavailable

I32 = np.int64
HEADERS = ("qc_runtime.h", "aarch64/qc_neon.h", "aarch64/qc_neon_sdot.h")
OUT = {"i8": ("int8_t", "s8", -128, 127), "i16": ("int16_t", "s16", -32768, 32767)}


def _requantization(prog: KernelProgram, rng: np.random.Generator, channels: int, per_channel: bool, dbl: bool,
                    out: str, clamp: bool) -> tuple[str, str, Callable[[np.ndarray], np.ndarray]]:
    """The statements that widen a per-channel requantization's shifts (made by layouts.neg_shifts) as the call
    sites do, a qc_neon_rq_params initializer, and the numpy function that requantizes int32 accumulators
    [..., channels] as it must. Shifts 32..38 with multipliers in [2^19, 2^25) bring accumulators of ~2^17 inside
    and around the output range; the first channel's multiplier is 2^31 - 1 and a random channel's shift 62 (the
    largest)."""
    n = channels if per_channel else 1
    mults = [int(v) for v in rng.integers(1 << 19, 1 << 25, n)]
    shifts = [int(v) for v in rng.integers(32, 39, n)]
    mults[0] = (1 << 31) - 1
    if per_channel:
        shifts[int(rng.integers(1, n))] = 62
    zp = int(rng.integers(-128, 128))
    _, _, lo, hi = OUT[out]
    if clamp:
        lo, hi = lo // 2 + 7, hi // 3
    if per_channel:
        arrays = prog.array("int32_t", mults), prog.array("int8_t", layouts.neg_shifts(tuple(shifts)))
        init = f"{{{arrays[0]}, nsh, 1, 0, 0, {int(dbl)}, {zp}, {lo}, {hi}}}"
        widen = f"  int64_t nsh[{n}];\n  qc_neon_widen_shifts({arrays[1]}, {n}, nsh);\n"
    else:
        init, widen = f"{{NULL, NULL, 0, {mults[0]}, {shifts[0]}, {int(dbl)}, {zp}, {lo}, {hi}}}", ""

    def requantize(acc: np.ndarray) -> np.ndarray:
        return rescale(acc, mults, shifts, "double_round" if dbl else "single_round", zp, lo, hi, out)

    return widen, init, requantize


def _dot_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """qc_neon_dot_s8 and qc_neon_dot_4rows_s8 over lengths with and without 16- and 8-element parts and a scalar
    rest, extreme and random values."""
    for k in (1, 7, 8, 15, 16, 17, 24, 40, 1000):
        x = rng.integers(-128, 128, (2, k))
        w = rng.integers(-128, 128, (4, k))
        x[0, :], w[0, :], w[1, :] = -128, -128, 127
        xs, ws = prog.array("int8_t", x), prog.array("int8_t", w)
        sums = (x[:, None, :] * w[None, :, :]).sum(axis=2)  # [pixel, row]
        prog.check(f"  int32_t r[1] = {{qc_neon_dot_s8({xs}, {ws} + {k}, {k})}};", "r", sums[0, 1:2])
        prog.check(f"  int32_t r[4]; qc_neon_dot_4rows_s8({xs} + {k}, {ws}, {k}, r);", "r", sums[1])


def _conv_operands(prog: KernelProgram, rng: np.random.Generator, pixels: int, rows: int, k: int, kn: int,
                   izp: int, bias_pc: bool, wq: str = "NULL") -> tuple[np.ndarray, str, str]:
    """Random windows (the first all -128; each padded with zeros to kn), weights and bias; the int32 accumulators
    of the numpy CONV2D, the C windows and the qc_neon_conv_params fields up to .bias_pc."""
    x = rng.integers(-128, 128, (pixels, k))
    x[0] = -128
    w = rng.integers(-128, 128, (rows, k))
    w[0] = 127
    bias = rng.integers(-(1 << 20), 1 << 20, rows if bias_pc else 1)
    acc = conv_accumulators(x, w, np.broadcast_to(bias, rows).copy(), izp)
    if wq == "sdot":
        relaid = layouts.sdot_4x4(w, rows) if kn == k else layouts.sdot_4x4_pad8(w, rows)
        wq = prog.array("int8_t", relaid)
    zc = prog.array("int32_t", layouts.zero_point_terms(w, rows, izp)) if izp else "NULL"
    xs = prog.array("int8_t", np.pad(x, ((0, 0), (0, kn - k))))
    fields = (f".w = {prog.array('int8_t', w)}, .wq = {wq}, .bias = {prog.array('int32_t', bias)}, .zc = {zc}, "
              f".rows = {rows}, .k = {k}, .kn = {kn}, .bias_pc = {int(bias_pc)}")
    return acc, xs, fields


def _conv_cases(prog: KernelProgram, rng: np.random.Generator, sdot: bool) -> None:
    """qc_neon_conv_s32 (rows in blocks of 4 and the rest); qc_neon_conv_s8 / _s16 (blocks of 8 and the rest) with
    every requantization variant; with sdot, qc_neon_conv_sdot_* one pixel and in pairs, on sdot_4x4 (k a multiple
    of 8) and sdot_4x4_pad8 (a window padded with zeros) weights, rows in blocks of 16, 8 and the rest, with each
    requantization choice at least once."""
    for rows, k, izp, bias_pc in ((7, 13, 5, True), (12, 40, -128, False), (4, 3, 0, True)):
        acc, xs, fields = _conv_operands(prog, rng, 2, rows, k, k, izp, bias_pc)
        prog.check(f"  const qc_neon_conv_params P = {{{fields}}};\n  int32_t y[{2 * rows}];\n"
                   f"  qc_neon_conv_s32(&P, {xs}, y);\n  qc_neon_conv_s32(&P, {xs} + {k}, y + {rows});", "y", acc)
    variants = [(pc, dbl, out, clamp) for pc in (0, 1) for dbl in (0, 1) for out in ("i8", "i16") for clamp in (0, 1)]
    for i, (pc, dbl, out, clamp) in enumerate(variants):
        ctype, suffix = OUT[out][:2]
        rows, k = (8, 21) if i % 2 else (13, 40)
        acc, xs, fields = _conv_operands(prog, rng, 2, rows, k, k, int(rng.integers(-128, 128)), bool(i % 3))
        widen, rq, requantize = _requantization(prog, rng, rows, bool(pc), bool(dbl), out, bool(clamp))
        params = f"{widen}  const qc_neon_conv_params P = {{{fields}, .rq = {rq}}};\n  {ctype} y[{2 * rows}];\n"
        prog.check(params + f"  qc_neon_conv_{suffix}(&P, {xs}, y);\n"
                            f"  qc_neon_conv_{suffix}(&P, {xs} + {k}, y + {rows});", "y", requantize(acc))
        if not sdot or i % 5:  # variants 0, 5, 10, 15: each requantization choice, output type and layout
            continue
        rows, k = (29, 24) if i % 2 else (24, 37)  # sdot_4x4 (16 + 8 elements) / sdot_4x4_pad8 (37 -> 40)
        kn = (k + 7) // 8 * 8
        acc, xs, fields = _conv_operands(prog, rng, 3, rows, k, kn, int(rng.integers(-128, 128)), bool(i % 3),
                                         "sdot")
        widen, rq, requantize = _requantization(prog, rng, rows, bool(pc), bool(dbl), out, bool(clamp))
        params = f"{widen}  const qc_neon_conv_params P = {{{fields}, .rq = {rq}}};\n  {ctype} y[{3 * rows}];\n"
        prog.check(params + f"  qc_neon_conv_sdot2_{suffix}(&P, {xs}, {xs} + {kn}, y, y + {rows});\n"
                            f"  qc_neon_conv_sdot_{suffix}(&P, {xs} + {2 * kn}, y + {2 * rows});", "y",
                   requantize(acc))


def _dw_cases(prog: KernelProgram, rng: np.random.Generator) -> None:
    """qc_neon_dw_s8 / _s16 / _s32 over every output pixel of padded, strided and dilated windows (interior pixels
    by their window, border pixels by the pad row table (<= 9 taps) or bounds checks (> 9 taps, pad values other
    than 0 added)); channel counts of whole and partial blocks of 16 and groups of 8; taps in pairs or not; input
    zero point and pad value equal, different, zero."""
    shapes = [  # channels, (kh, kw), stride, dilation, pad (top, bottom, left, right), izp, pad_value
        (16, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 9, 9),
        (27, (3, 3), (2, 2), (1, 1), (0, 1, 0, 0), -128, -128),
        (21, (3, 2), (1, 2), (2, 1), (2, 2, 1, 0), 0, 0),
        (40, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), -3, 17),
        (5, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 100, 100),
    ]
    outs = ("i8", "i16", "i32")
    for i, (c, (kh, kw), stride, dilation, pad, izp, pad_value) in enumerate(shapes):
        for j, out in enumerate(outs):
            pairs = (i + j) % 2 == 0
            x = rng.integers(-128, 128, (1, 6, 7, c))
            x[0, 0] = 127
            w = rng.integers(-127 if pairs else -128, 128, (kh, kw, c))
            if not pairs:
                w[0, 0, 0] = -128
            bias_pc = (i + j) % 3 != 0
            bias = rng.integers(-(1 << 20), 1 << 20, c if bias_pc else 1)
            acc = depthwise_accumulators(x, w, np.broadcast_to(bias, c).copy(), izp, stride, pad, dilation,
                                         pad_value)[0]
            taps = w.reshape(kh * kw, c)
            start = prog.array("int32_t", layouts.dw_starts(taps, izp)) if izp else "NULL"
            padrow = prog.array("int8_t", layouts.pad_row(c, pad_value))
            if out == "i32":
                widen, rq, expected, ctype, suffix = "", "", acc, "int32_t", "s32"
            else:
                widen, init, requantize = _requantization(prog, rng, c, (i + j) % 2 == 1, j == 1, out, i % 2 == 0)
                rq, expected, (ctype, suffix) = f", .rq = {init}", requantize(acc), OUT[out][:2]
            oh, ow = acc.shape[:2]
            (dy, dx), (sy, sx) = dilation, stride
            params = (f"{widen}  const qc_neon_dw_params P = {{.w = {prog.array('int8_t', taps)}, .padrow = {padrow}, "
                      f".bias = {prog.array('int32_t', bias)}, .start = {start}, .n = {c}, .ih = 6, .iw = 7, "
                      f".kh = {kh}, .kw = {kw}, .dy = {dy}, .dx = {dx}, .pad_value = {pad_value}, "
                      f".pairs = {int(pairs)}, .bias_pc = {int(bias_pc)}{rq}}};\n")
            loops = (f"  {ctype} y[{oh * ow * c}];\n"
                     f"  for (int32_t oy = 0; oy < {oh}; ++oy) {{\n"
                     f"    for (int32_t ox = 0; ox < {ow}; ++ox) {{\n"
                     f"      const int32_t iy0 = oy * {sy} - {pad[0]}, ix0 = ox * {sx} - {pad[2]};\n"
                     f"      const int inside = iy0 >= 0 && ix0 >= 0 && iy0 + {(kh - 1) * dy} < 6 && "
                     f"ix0 + {(kw - 1) * dx} < 7;\n"
                     f"      qc_neon_dw_{suffix}(&P, {prog.array('int8_t', x)}, iy0, ix0, inside, "
                     f"y + (oy * {ow} + ox) * {c});\n    }}\n  }}")
            prog.check(params + loops, "y", expected)


def _run(prog: KernelProgram, target_name: str, workdir: Path) -> np.ndarray:
    """Build the program with the target's compiler and flags, run it under the target's emulator, its results."""
    target = load_target(target_name)
    for header in HEADERS:
        shutil.copyfile(data_path("runtime") / header, workdir / Path(header).name)
    source = workdir / f"kernels_{target_name}.c"
    source.write_text(prog.source())
    exe = compile_cached([source], [target.cc, *target.cflags], ".exe", list(target.ldflags))
    out = workdir / f"out_{target_name}.bin"
    proc = subprocess.run([*target.emulator, str(exe), str(out)], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-1000:]
    return np.frombuffer(out.read_bytes(), "<i4").astype(I32)


@pytest.mark.parametrize("target_name", ["aarch64-neon", "aarch64-dotprod"])
def test_kernels_against_the_numpy_primitives(tmp_path, target_name):
    reason = unavailable(load_target(target_name))
    if reason:
        pytest.skip(f"{target_name}: {reason}")
    sdot = target_name == "aarch64-dotprod"
    prog = KernelProgram(("qc_neon.h", "qc_neon_sdot.h") if sdot else ("qc_neon.h",))
    rng = np.random.default_rng(15)
    _dot_cases(prog, rng)
    _conv_cases(prog, rng, sdot)
    if not sdot:  # the depthwise kernels are the same C on both targets (no SDOT)
        _dw_cases(prog, rng)
    assert prog.mismatches(_run(prog, target_name, tmp_path)) == ""


def _choice(sched, target: str, index: int = -1):
    """The choice of a schedule's execution step (default: the last, the fused convolution) on an aarch64 target."""
    return plan_kernels(sched, load_target(target), "m").steps[index].choice


def test_conv_choices():
    """Each branch of the convolution choice from the step's fields alone: blocks of 8 requantized rows, SDOT by
    element (pairs of pixels from 16 rows of 16 elements; a gathered window padded to a multiple of 8), int32
    accumulators, the portable loops; the per-channel constants as the kernels read them."""
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, (16, 1, 1, 16)).astype(np.int8)
    shifts = tuple(int(s) for s in rng.integers(32, 40, 16))
    px = dict(x_shape=(1, 2, 3, 16), y_shape=(1, 2, 3, 16), w=w, bias=np.arange(16), mults=(1 << 30,) * 16,
              shifts=shifts)
    neon = _choice(conv_schedule("CONV2D", **px), "aarch64-neon")
    assert (neon.form, neon.kernel, neon.unread) == ("conv_rq", "qc_neon_conv_s8", frozenset())
    assert set(neon.arrays) == {"multipliers", "neg_shifts", "zero_point_terms"} and not neon.step_constants
    assert neon.arrays["neg_shifts"].values.tolist() == [-s for s in shifts] and neon.arrays["neg_shifts"].ctype == \
        "int8_t" and neon.params.rq.channels == 16 and neon.params.rq.dbl == 1
    assert neon.arrays["zero_point_terms"].values.tolist() == (-128 * w.reshape(16, -1).astype(int).sum(1)).tolist()
    sdot = _choice(conv_schedule("CONV2D", **px), "aarch64-dotprod")
    assert (sdot.form, sdot.kernel, sdot.layout, sdot.unread) == ("conv_sdot2", "qc_neon_conv_sdot2_s8", "sdot_4x4",
                                                                  {1})
    assert sdot.arrays["weights"].values.tolist() == layouts.sdot_4x4(w.reshape(16, -1), 16).tolist()
    assert sdot.files == ("aarch64/qc_neon.h", "aarch64/qc_neon_sdot.h") and neon.files == ("aarch64/qc_neon.h",)
    rows12 = dict(px, w=w[:12], bias=np.arange(12), mults=(1 << 30,), shifts=(38,), y_shape=(1, 2, 3, 12))
    one = _choice(conv_schedule("CONV2D", **rows12), "aarch64-dotprod")  # < 16 rows: one pixel a call
    assert (one.form, one.unread, one.params.rq.per_channel) == ("conv_sdot", frozenset(), False)  # rows 8-11: int8
    k3 = rng.integers(-128, 128, (8, 3, 3, 3)).astype(np.int8)  # a gathered window of 27 elements -> 32
    gathered = _choice(conv_schedule("CONV2D", x_shape=(1, 4, 4, 3), y_shape=(1, 2, 2, 8), w=k3, bias=np.zeros(8)),
                       "aarch64-dotprod")
    assert (gathered.layout, gathered.window_length, gathered.params.kn) == ("sdot_4x4_pad8", 32, 32)
    few = _choice(conv_schedule("CONV2D", **dict(px, w=w[:6], bias=np.zeros(6), mults=(1 << 30,), shifts=(38,),
                                                 y_shape=(1, 2, 3, 6))), "aarch64-dotprod")
    assert (few.form, few.step_constants) == ("conv_s32", True) and "fewer than 8 rows" in few.reason
    acc = _choice(conv_schedule("CONV2D", y_dtype="i32", **dict(px, mults=(1 << 30,), shifts=(38,))), "aarch64-neon")
    assert (acc.form, acc.params.to_output) == ("conv_s32", True)
    wzp = _choice(conv_schedule("CONV2D", wzp=3, **px), "aarch64-dotprod")
    assert wzp.kernel == "c:conv2d" and "weight zero point" in wzp.reason


def test_depthwise_choices_and_shared_constants():
    """Depthwise: 16-channel blocks, taps in pairs unless a weight is -128, the starts and pad row made at
    generation time; the arrays are named by their values, not by the step (the patches of one step share them)."""
    rng = np.random.default_rng(1)
    w = rng.integers(-127, 128, (3, 3, 24, 1)).astype(np.int8)
    dw = dict(x_shape=(1, 5, 5, 24), y_shape=(1, 5, 5, 24), w=w, bias=np.arange(24), pad=[1, 1, 1, 1], izp=-5)
    c = _choice(conv_schedule("DEPTHWISE_CONV2D", **dw), "aarch64-neon")
    assert (c.form, c.kernel, c.params.pairs, c.params.pad_value) == ("dw", "qc_neon_dw_s8", True, -5)
    assert c.arrays["starts"].values.tolist() == (5 * w.reshape(9, 24).astype(int).sum(0)).tolist()
    assert c.arrays["pad_row"].values.tolist() == [-5] * 24
    w[0, 0, 3, 0] = -128
    assert not _choice(conv_schedule("DEPTHWISE_CONV2D", **dw), "aarch64-dotprod").params.pairs
    acc = _choice(conv_schedule("DEPTHWISE_CONV2D", y_dtype="i32", **dw), "aarch64-neon")
    assert (acc.kernel, acc.params.to_output, acc.params.rq) == ("qc_neon_dw_s32", True, None)
    conv = conv_schedule("CONV2D", x_shape=(1, 2, 3, 16), y_shape=(1, 2, 3, 16),
                         w=rng.integers(-128, 128, (16, 1, 1, 16)).astype(np.int8), bias=np.arange(16),
                         mults=tuple(range(1 << 20, (1 << 20) + 16)), shifts=(38,) * 16)
    names = {role: a.name for role, a in _choice(conv, "aarch64-dotprod").arrays.items()}
    prefixes = {"weights": "m_c_w_sdot_4x4", "multipliers": "m_v_rq_multipliers_", "neg_shifts": "m_v_rq_neg_shifts_",
                "zero_point_terms": "m_v_izp_terms_"}
    assert all(names[role].startswith(prefix) for role, prefix in prefixes.items()), names
