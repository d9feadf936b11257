"""The Cortex-M4/M7 DSP kernels of runtime/cortex-m on their own: one bare-metal program (cross-compiled with the
cortex-m4 target's flags, run under qemu-system-arm with semihosting) calls every kernel family and variant on
seeded random and extreme operands; its results must equal the numpy primitives (CONV2D, DEPTHWISE_CONV2D, RESCALE)
on the same values, element for element. The weights are re-laid by the kernel family's own layouts
(qcodegen/kernels/cortex_m_dsp/layouts.py), so the layouts are checked with the kernels."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import generate, load_target
from qcodegen.compiler import plan
from qcodegen.frontends import load_model
from qcodegen.kernel_testing import (
    I32,
    KernelProgram,
    conv_accumulators,
    conv_schedule,
    depthwise_accumulators,
    depthwise_row,
    rescale,
)
from qcodegen.kernels import plan_kernels
from qcodegen.kernels.cortex_m_dsp import layouts
from qcodegen.resources import data_path
from qcodegen.testing import Var, c_vs_reference, prepare, step_schedule
from qcodegen.verify.build import compile_cached
from qcodegen.verify.runners import SemihostingRunner, binutil, content_addressed, unavailable

ROOT = Path(__file__).resolve().parent.parent
TARGET = load_target("cortex-m4")
MODES = ("single", "double", "double_n")  # qc_dsp_rq8 modes 0, 1, 2


class Program(KernelProgram):
    """C statements calling the Cortex-M4/M7 kernels, each storing its results (as int32) in qc_out; the expected
    values."""

    def __init__(self) -> None:
        super().__init__(("qc_cm_dsp_conv.h",))

    def run(self, workdir: Path) -> np.ndarray:
        """Build the program with the kernels, the target's start-up code and linker script; run it."""
        return _run(workdir, self.source(), ("qc_cm_rq.h", "qc_cm_dsp.h", "qc_cm_dsp_conv.h", "qc_cm_dsp.c"))


def _run(workdir: Path, source: str, files: tuple[str, ...]) -> np.ndarray:
    """Build the C program `source` with the runtime/cortex-m files `files` (their .c compiled once), the target's
    start-up code and linker script; run it: the int32 values it writes to the file argv[1]."""
    tiny = step_schedule("RESCALE", [Var((1,), "i8")], [((1,), "i8")], multiplier=[1 << 30], shift=[31],
                         input_zp=0, output_zp=0, scale32=True, rounding="single_round")
    generate(prepare(tiny), workdir, TARGET, harness=True)  # qc_cortex_m_startup.c, qc_cortex_m.ld
    for name in files:
        (workdir / name).write_bytes((data_path("runtime") / "cortex-m" / name).read_bytes())
    (workdir / "kernels_test.c").write_text(source)
    exe = _link(workdir, [workdir / "kernels_test.c"], [workdir / f for f in files if f.endswith(".c")])
    out = workdir / "out.bin"
    cmd = SemihostingRunner(TARGET).command(list(TARGET.emulator), exe, [str(out)])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-1000:]
    return np.frombuffer(out.read_bytes(), "<i4").astype(I32)


def _link(workdir: Path, sources: list[Path], kernels: list[Path]) -> Path:
    """A Cortex-M4 executable of `sources`, the start-up code and linker script in workdir, and the runtime kernel
    files `kernels` (compiled once, cached by their own content)."""
    headers = sorted(workdir.glob("qc_cm_*.h"))
    objects = [str(compile_cached([k], [TARGET.cc, *TARGET.cflags, "-c"], ".o", headers=headers)) for k in kernels]
    ldflags = [content_addressed(workdir / f) if f == "qc_cortex_m.ld" else f for f in TARGET.ldflags]
    return compile_cached([*sources, workdir / "qc_cortex_m_startup.c"], [TARGET.cc, *TARGET.cflags], ".exe",
                          objects + ldflags)


def _scales(rng: np.random.Generator, channels: int, per_channel: bool) -> tuple[list[int], list[int]]:
    """Shifts 33..36 (the DSP kernels' range starts at 33; there the double rounding's 2^30 is 1/8 .. 1/64 of the
    rounding step, so that it changes many results) with multipliers in [2^19, 2^22), which bring accumulators of
    up to ~2^21 inside and around int8; the first channel's multiplier 2^31 - 1 (saturating)."""
    n = channels if per_channel else 1
    mults = [int(v) for v in rng.integers(1 << 19, 1 << 22, n)]
    mults[0] = (1 << 31) - 1
    shifts = [int(v) for v in rng.integers(33, 37, n)]
    return mults, shifts


def _rq_pairs(mults, shifts, mode: int) -> list[int]:
    return [v for m, s in zip(mults, shifts, strict=True) for v in (m, s - (32 if mode == 2 else 33))]


def _widen(x: str, k: int, at: str, stride: int, dbl: int = 0) -> str:
    """The C that widens the k inputs at x into qc_xq + at (dbl: doubled), as the call sites do
    (cortex-m-dsp/_dot.c.j2)."""
    text = f"  qc_dsp_widen_into({x}, {k // 4}, qc_xq + {at}, {stride}, {dbl});\n"
    if k % 4:
        text += f"  qc_dsp_widen_last({x} + {k // 4 * 4}, {k % 4}, qc_xq + {k // 4 * stride} + {at}, {dbl});\n"
    return text


def _dot_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_dsp_dot_s8 and the 4-row and 2x2 kernels over awkward lengths, extreme and random values."""
    for k in (1, 3, 4, 5, 16, 17, 40, 1000):
        x = rng.integers(-128, 128, (2, k))
        w = rng.integers(-128, 128, (4, k))
        x[0, :], w[0, :], w[1, :] = -128, -128, 127
        xs, ws = prog.array("int8_t", x), prog.array("int8_t", w)
        sums = (x[:, None, :] * w[None, :, :]).sum(axis=2)  # [pixel, row]
        prog.check(f"  int32_t r[1] = {{qc_dsp_dot_s8({xs}, {ws} + {k}, {k})}};", "r", sums[0, 1:2])
        prog.check(f"  int32_t r[4]; qc_dsp_dot_4rows_s8({xs} + {k}, {ws}, {k}, r);", "r", sums[1])
        if k >= 4:
            g = k // 4
            s8x4 = prog.array("int32_t", layouts.dsp_s8x4(w[:, :g * 4]))
            q15 = prog.array("int32_t", layouts.dsp_q15x4(w))
            xq = f"  uint32_t qc_xq[{2 * g}]; qc_dsp_widen({xs}, {g}, qc_xq);\n"
            prog.check(xq + f"  int32_t r[4]; qc_dsp_dot_4rows_s8x4(qc_xq, {s8x4}, {g}, r);", "r",
                       (x[0, :g * 4] * w[:, :g * 4]).sum(axis=1))
            prog.check(xq + f"  int32_t r[4]; qc_dsp_dot_4rows_q15({xs}, qc_xq, {q15}, {ws if k % 4 else 'NULL'}, "
                            f"{k}, r);", "r", sums[0])
        groups = (k + 3) // 4
        pair = _widen(xs, k, "0", 4) + _widen(f"{xs} + {k}", k, "2", 4)
        for name, layout in (("s8x2", layouts.dsp_s8x2), ("q15x2", layouts.dsp_q15x2)):
            wq = prog.array("int32_t", layout(w[:2]))
            prog.check(f"  uint32_t qc_xq[{4 * groups}];\n{pair}  int32_t r[4]; "
                       f"qc_dsp_dot_2x2_{name}(qc_xq, {wq}, {groups}, r);", "r", sums[:, :2].reshape(-1))


def _conv_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_dsp_conv_{2px,3px}: every requantization variant with both weight layouts, rows of 13 groups (the loop
    of 8 and the rest), and the fully unrolled _g1 .. _g10 kernels."""
    variants = [(mode, pc, clamp) for mode in range(3) for pc in (0, 1) for clamp in (0, 1)]
    shapes = [(49, variants, "")] + [(4 * g - (g % 2), [variants[g % len(variants)]], f"_g{g}") for g in range(1, 11)]
    for k, chosen, fixed in shapes:
        for mode, pc, clamp in chosen:
            rows, izp, zp = 6, int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
            lo, hi = (-60, 70) if clamp else (-128, 127)
            x = rng.integers(-128, 128, (3, k))
            x[0] = -128
            w = rng.integers(-128, 128, (rows, k))
            bias = rng.integers(-(1 << 20), 1 << 20, rows)
            mults, shifts = _scales(rng, rows, bool(pc))
            rounding = "single_round" if mode == 0 else "double_round"
            acc = conv_accumulators(x, w, bias, izp)
            assert mode != 2 or np.abs(acc).max() < 1 << 30
            expected = rescale(acc, mults, shifts, rounding, zp, lo, hi)
            rq = MODES[mode] + ("_pc" if pc else "") + ("_clamp" if clamp else "")
            base = prog.array("int32_t", layouts.row_starts(w.astype(I32), bias.astype(I32), izp))
            pairs = prog.array("int32_t", _rq_pairs(mults, shifts, mode))
            xs = prog.array("int8_t", x)
            groups = (k + 3) // 4
            for name, layout in (("s8x2", layouts.dsp_s8x2), ("q15x2", layouts.dsp_q15x2)):
                wq = prog.array("int32_t", layout(w.astype(I32)))
                params = (f"  const qc_dsp_conv_params P = {{{wq}, {base}, {pairs}, {rows}, {groups}, {2 * zp + 1}, "
                          f"{lo}, {hi}, NULL, NULL, NULL}};\n")
                triple = "".join(_widen(f"{xs} + {j * k}", k, str(2 * j), 6) for j in range(3))
                prog.check(f"{params}  uint32_t qc_xq[{6 * groups}];\n{triple}  int8_t y[{3 * rows}];\n"
                           f"  qc_dsp_conv_3px_{name}_{rq}{fixed}(&P, qc_xq, y, y + {rows}, y + {2 * rows});",
                           "y", expected)
                if not fixed:
                    pair = _widen(xs, k, "0", 4) + _widen(f"{xs} + {k}", k, "2", 4)
                    prog.check(f"{params}  uint32_t qc_xq[{4 * groups}];\n{pair}  int8_t y[{2 * rows}];\n"
                               f"  qc_dsp_conv_2px_{name}_{rq}(&P, qc_xq, y, y + {rows});", "y", expected[:2])
                    one = _widen(f"{xs} + {2 * k}", k, "0", 4) + _widen(f"{xs} + {2 * k}", k, "2", 4)
                    prog.check(f"{params}  uint32_t qc_xq[{4 * groups}];\n{one}  int8_t y[{rows}];\n"
                               f"  qc_dsp_conv_2px_{name}_{rq}(&P, qc_xq, y, NULL);", "y", expected[2])


def _packed_cases(prog: Program, rng: np.random.Generator, lengths: tuple[int, ...] = (3, 8, 32, 40, 49, 64)) -> None:
    """qc_dsp_conv_{3px,2px,1px}_*_packed over dsp_packed arrays (mode 2 without the clamp), per tensor and per channel,
    rows of 1 .. 16 groups (`lengths`): the first pass of 8 groups entered at every remainder (groups % 8 = 1, 2, 0,
    2, 5, 0; 3 pixels: passes of 16 after the first group; rows of 25 groups: two of them); the
    q15x2 kernels also over qc_dsp_packed_q15x2's copy of the s8x2 array, which must equal the q15x2 array word for
    word (these and the s8x2 kernels over triples widened by qc_dsp_widen3 where k % 4 == 0); rows of at most 10
    groups also by the 3-pixel kernels of their constant group count (qc_dsp_conv_3px_*_packed_g<G>)."""
    for i, k in enumerate(lengths):
        pc, rows, izp, zp = i % 2, 6, int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        x = rng.integers(-128, 128, (3, k))
        x[0] = -128
        w = rng.integers(-128, 128, (rows, k))
        w[0] = -128
        bias = rng.integers(-(1 << 20), 1 << 20, rows)
        mults, shifts = _scales(rng, rows, bool(pc))
        acc = conv_accumulators(x, w, bias, izp)
        assert np.abs(acc).max() < 1 << 30
        expected = rescale(acc, mults, shifts, "double_round", zp, -128, 127)
        starts = layouts.row_starts(w.astype(I32), bias.astype(I32), izp)
        pairs = np.array(_rq_pairs(mults, shifts, 2), np.int32).reshape(-1, 2)
        xs = prog.array("int8_t", x)
        groups = (k + 3) // 4
        # the sums doubled: the inputs as they are widened (s8x2) or the int16 weights (q15x2)
        streams = {name: layouts.dsp_packed(words, 2 * starts, pairs, 2 * zp + 1)
                   for name, words in (("s8x2", layouts.dsp_s8x2(w.astype(I32))),
                                       ("q15x2", layouts.dsp_q15x2(2 * w.astype(I32))))}
        s8 = prog.array("int32_t", streams["s8x2"])
        copy = f"  int32_t wq[{streams['q15x2'].size}];\n  qc_dsp_packed_q15x2({s8}, {rows}, {groups}, wq);\n"
        prog.check(copy, "wq", streams["q15x2"])
        for name, wq, dbl in (("s8x2", s8, 1), ("q15x2", prog.array("int32_t", streams["q15x2"]), 0),
                              ("q15x2", "wq", 0)):
            params = (f"{copy if wq == 'wq' else ''}  const qc_dsp_conv_params P = {{{wq}, NULL, NULL, {rows}, "
                      f"{groups}, {2 * zp + 1}, -128, 127, NULL, NULL, NULL}};\n")
            triple = "".join(_widen(f"{xs} + {j * k}", k, str(2 * j), 6, dbl) for j in range(3))
            if wq in (s8, "wq") and k % 4 == 0:  # (as the steps over contiguous pixels widen their triples)
                triple = f"  qc_dsp_widen3({xs}, {k}, {groups}, qc_xq, {dbl});\n"
            for fixed in ("", f"_g{groups}")[:1 + (groups <= 10)]:  # (the kernels of a constant group count)
                prog.check(f"{params}  uint32_t qc_xq[{6 * groups}];\n{triple}  int8_t y[{3 * rows}];\n"
                           f"  qc_dsp_conv_3px_{name}_packed{fixed}(&P, qc_xq, y);", "y", expected)
            pair = _widen(xs, k, "0", 4, dbl) + _widen(f"{xs} + {k}", k, "2", 4, dbl)
            prog.check(f"{params}  uint32_t qc_xq[{4 * groups}];\n{pair}  int8_t y[{2 * rows}];\n"
                       f"  qc_dsp_conv_2px_{name}_packed(&P, qc_xq, y);", "y", expected[:2])
            one = _widen(f"{xs} + {2 * k}", k, "0", 2, dbl)
            prog.check(f"{params}  uint32_t qc_xq[{2 * groups}];\n{one}  int8_t y[{rows}];\n"
                       f"  qc_dsp_conv_1px_{name}_packed(&P, qc_xq, y);", "y", expected[2])


def _window_rows_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_dsp_widen_rows (three windows of kh rows of `length` elements read in place from an image whose rows are
    `rs` elements apart: whole words unrolled and looped, rows' tails of 0 .. 3 elements) into the packed 3-pixel
    kernels over weights in layouts.window_rows_order, both layouts, the s8x2 inputs doubled by SADD16 or as
    2 (x + 128) (the starts of zero point izp + 128)."""
    for kh, length in ((3, 9), (10, 4), (2, 15), (3, 5), (4, 2), (3, 48)):
        rows, izp, zp, rs = 4, int(rng.integers(-128, 128)), int(rng.integers(-128, 128)), length + 7
        image = rng.integers(-128, 128, kh * rs + 2 * length)
        image[:length] = -128
        starts = [0, 3, length + 1]  # the three windows' first elements
        x = np.stack([image[s + np.arange(kh)[:, None] * rs + np.arange(length)].reshape(-1) for s in starts])
        w = rng.integers(-128, 128, (rows, kh * length))
        w[0] = -128
        bias = rng.integers(-(1 << 20), 1 << 20, rows)
        mults, shifts = _scales(rng, rows, True)
        expected = rescale(conv_accumulators(x, w, bias, izp), mults, shifts, "double_round", zp, -128, 127)
        order = w[:, layouts.window_rows_order(kh, length)].astype(I32)
        pairs = np.array(_rq_pairs(mults, shifts, 2), np.int32).reshape(-1, 2)
        xs, groups = prog.array("int8_t", image), (kh * length + 3) // 4
        for name, words, dbl in (("s8x2", layouts.dsp_s8x2(order), 1), ("s8x2", layouts.dsp_s8x2(order), 2),
                                 ("q15x2", layouts.dsp_q15x2(2 * order), 0)):
            starts2 = 2 * layouts.row_starts(order, bias.astype(I32), izp + (128 if dbl == 2 else 0))
            wq = prog.array("int32_t", layouts.dsp_packed(words, starts2, pairs, 2 * zp + 1))
            widen = "".join(f"  qc_dsp_widen_rows({xs} + {s}, {rs}, {kh}, {length}, qc_xq + {2 * j}, 6, {dbl});\n"
                            for j, s in enumerate(starts))
            prog.check(f"  const qc_dsp_conv_params P = {{{wq}, NULL, NULL, {rows}, {groups}, {2 * zp + 1}, -128, "
                       f"127, NULL, NULL, NULL}};\n  uint32_t qc_xq[{6 * groups}];\n{widen}  int8_t y[{3 * rows}];\n"
                       f"  qc_dsp_conv_3px_{name}_packed(&P, qc_xq, y);", "y", expected)


def _dw_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_dsp_dw_*: a run of the pixels of an output row (tap offsets from the first pixel's window; 3x3 at stride 1:
    pixel pairs) and single pixels over a table of the taps' addresses, for every requantization variant and the
    int32 sums, channel counts with and without a last partial group of 4 (_c4 or not), 3x3 and 1x2 windows; 3x3
    stride-1 pairs over a table of their columns, some of them pad values, and a run of pairs over the columns'
    offsets (_pair)."""
    variants = [(mode, pc, clamp) for mode in range(3) for pc in (0, 1) for clamp in (0, 1)] + [(-1, 0, 0)]
    for i, (mode, pc, clamp) in enumerate(variants):
        kernel = f"s8_{MODES[mode]}{'_pc' if pc else ''}{'_clamp' if clamp else ''}" if mode >= 0 else "s32"
        for c, (kh, kw), stride in ((16, (3, 3), 1), (19, (3, 3), 1), (8, (1, 2), 2)):
            izp, zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
            lo, hi = (-90, 40) if clamp else (-128, 127)
            case = depthwise_row(rng, c, (kh, kw), stride, 8, izp)
            acc, taps, offsets, pixels = case.acc, case.taps, case.offsets, case.acc.shape[0]
            scale = 2 if mode == 2 else 1  # (mode 2: the kernels take the sums doubled)
            q = prog.array("int32_t", layouts.dsp_dw_q15_base(taps, case.bias.astype(I32), izp, scale))
            ws = prog.array("int8_t", taps)
            tab = prog.array("uintptr_t", offsets)
            xs = prog.array("int8_t", case.x)
            fn = f"qc_dsp_dw_{kernel}{'_c4' if c % 4 == 0 else ''}"
            if mode < 0:
                expected, out_type, rq = acc, "int32_t", "NULL"
            else:
                mults, shifts = _scales(rng, c, bool(pc))
                expected = rescale(acc, mults, shifts, "single_round" if mode == 0 else "double_round", zp, lo, hi)
                out_type, rq = "int8_t", prog.array("int32_t", _rq_pairs(mults, shifts, mode))
            params = (f"  const qc_dsp_dw_params P = {{{q}, {rq}, {ws}, {c}, {kh * kw}, {2 * zp + 1}, {lo}, {hi}, "
                      "NULL, NULL, NULL};\n"
                      f"  {out_type} y[{pixels * c}];\n")
            prog.check(params + f"  {fn}(&P, {tab}, {xs}, y, {pixels}, {stride * c});", "y", expected)
            addresses = "".join(f"  t[{t}] = (uintptr_t)({xs} + {(i % pixels) * stride * c} + {off});\n"
                                for t, off in enumerate(offsets))
            prog.check(params + f"  uintptr_t t[{kh * kw}];\n{addresses}  {fn}(&P, t, NULL, y, 1, 0);", "y",
                       expected[i % pixels])
            if mode >= 0 and c % 4 == 0 and (kh, kw, stride) == (3, 3, 1):
                first = i % (pixels - 1)
                cols, acc2 = _dw_pair_columns(prog, rng, case, xs, izp, first)
                expected2 = rescale(acc2, mults, shifts, "single_round" if mode == 0 else "double_round", zp, lo, hi)
                prog.check(params + f"{cols}  qc_dsp_dw_{kernel}_pair(&P, cols, NULL, y, 2, 0);", "y", expected2)
                run = prog.array("uintptr_t", [offsets[3 * ky] + j * c for ky in range(3) for j in range(4)])
                prog.check(params + f"  qc_dsp_dw_{kernel}_pair(&P, {run}, {xs}, y, {pixels}, {c});", "y", expected)


def _dw_pair_columns(prog: Program, rng: np.random.Generator, case, xs: str, izp: int,
                     first: int) -> tuple[str, np.ndarray]:
    """The C of the table `cols` of qc_dsp_dw_s8_<rq>_pair for output pixels first, first + 1 of a 3x3 stride-1 row
    (column j of their windows' row ky: input pixel (ky, first + j)), about a third of its 12 columns a row of pad
    values (izp) instead; the two pixels' accumulators with those input pixels replaced by izp (the primitive)."""
    c = case.x.shape[-1]
    pad = prog.array("int8_t", np.full(c, izp))
    x = case.x.copy()
    lines = "  uintptr_t cols[12];\n"
    for ky in range(3):
        for j in range(4):
            if rng.random() < 0.35:
                x[0, ky, first + j] = izp
                lines += f"  cols[{4 * ky + j}] = (uintptr_t){pad};\n"
            else:
                lines += f"  cols[{4 * ky + j}] = (uintptr_t)({xs} + {(ky * x.shape[2] + first + j) * c});\n"
    acc = depthwise_accumulators(x, case.w, case.bias, izp)[0, 0]
    return lines, acc[first:first + 2]


def _dwr_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_dsp_dwr_s8_*: every requantization variant and one with exceptions (per tensor and per channel), over
    images whose input and output rows are odd and even (one pixel wide: the C loops), SAME, VALID and one-sided
    padding (an odd left padding: the planes' leading pad values), a pad value other than the input zero point,
    channel counts with a last partial block of 4, and bands of nb rows that do not divide the output's (the last
    band shorter); qc_dsp_dwr5_* on the rows of 5 (the first shape: mode 3 unclamped among them)."""
    variants = [(mode, pc, clamp, 0) for mode in range(3) for pc in (0, 1) for clamp in (0, 1)]
    variants += [(0, 0, 0, 1), (0, 1, 1, 1)]
    shapes = [((7, 5, 8), (1, 1, 1, 1), 3), ((5, 6, 6), (0, 0, 0, 0), 2), ((6, 6, 8), (1, 1, 1, 1), 4),
              ((3, 9, 4), (1, 1, 1, 1), 2), ((4, 4, 5), (2, 0, 0, 2), 3), ((3, 1, 4), (1, 1, 1, 1), 2),
              ((4, 5, 4), (1, 0, 1, 0), 3), ((5, 7, 4), (1, 1, 1, 1), 2)]
    for i, (mode, pc, clamp, exc) in enumerate(variants):
        (ih, iw, c), (pt, pb, pl, pr), nb = shapes[i % len(shapes)]
        izp, zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        pad = izp if i % 3 else int(rng.integers(-128, 128))
        lo, hi = (-90, 40) if clamp else (-128, 127)
        x = rng.integers(-128, 128, (1, ih, iw, c))
        x[0, 0] = -128
        w = rng.integers(-128, 128, (3, 3, c))
        w[..., 0] = -128
        bias = rng.integers(-(1 << 16), 1 << 16, c)  # (the taps' sums, up to 9 2^14, weigh as much)
        acc = depthwise_accumulators(x, w, bias, izp, pad=(pt, pb, pl, pr), pad_value=pad)[0]
        oh, ow = acc.shape[:2]
        pw = max(pl + iw, ow + 2 - pl)
        pw += pw % 2
        mults, shifts = _scales(rng, c, bool(pc))
        if i != 1:  # (variant 1: channel 0's multiplier saturates)
            mults[0] = int(rng.integers(1 << 19, 1 << 22))
        expected = rescale(acc, mults, shifts, "single_round" if mode == 0 else "double_round", zp, lo, hi)
        exceptions = "NULL, NULL, NULL"
        if exc:  # the accumulator of channel 1 at pixel 0 (per channel: only there) gives 55
            ea = int(acc[0, 0, 1])
            starts = [0, 1] if not pc else [0, 0] + [1] * (c - 1)
            chosen = (acc == ea) if not pc else (acc == ea) & (np.arange(c) == 1)
            expected = np.where(chosen, 55, expected)
            exceptions = ", ".join(prog.array("int32_t", v) for v in (starts, [ea], [55]))
        taps = w.reshape(9, c).astype(I32)
        consts = prog.array("int32_t", layouts.dsp_dw_rows(taps, bias.astype(I32), izp, 2 if mode == 2 else 1))
        rq = prog.array("int32_t", _rq_pairs(mults, shifts, mode))
        name = (MODES[mode] + ("_pc" if pc else "") + ("_clamp" if clamp else "") + ("_exc" if exc else ""))
        e = pl % 2  # (the planes' leading pad values and the sums' first, unused)
        five = "5" if iw == ow == 5 and pl == 1 else ""  # (DS-CNN's rows)
        plane_len, acc_len = ((nb + 2) * pw + 4 + 2 * e) * min(c, 4), ((nb - 1) * pw + ow + e + 1) // 2 * 2
        prog.check(f"  const qc_dsp_dwr_params P = {{{consts}, {rq}, {c}, {ih}, {iw}, {oh}, {ow}, {pt}, {pl}, {pad}, "
                   f"{nb}, {pw}, {2 * zp + 1}, {lo}, {hi}, {exceptions}}};\n"
                   f"  int16_t plane[{plane_len}] __attribute__((aligned(4)));\n  int32_t sums[{acc_len}];\n"
                   f"  int8_t y[{oh * ow * c}];\n"
                   f"  qc_dsp_dwr{five}_s8_{name}(&P, {prog.array('int8_t', x)}, y, plane, sums);", "y", expected)


def test_kernels_against_the_numpy_primitives(tmp_path):
    reason = unavailable(TARGET)
    if reason:
        pytest.skip(f"cortex-m4: {reason}")
    prog = Program()
    rng = np.random.default_rng(15)
    _dot_cases(prog, rng)
    _conv_cases(prog, rng)
    _packed_cases(prog, rng)
    _window_rows_cases(prog, rng)
    _dw_cases(prog, rng)
    _dwr_cases(prog, rng)
    _packed_cases(prog, rng, (100,))
    assert prog.mismatches(prog.run(tmp_path)) == ""


# (x shape, OHWI weights' shape, stride, dilation, pad [t, b, l, r], pad value or None, layout, rounding, the mode)
WINDOW_ROWS_STEPS = [
    ((1, 13, 10, 1), (16, 10, 4, 1), (2, 2), (1, 1), (4, 5, 1, 1), None, "compact", "double_round", "padded"),
    ((1, 10, 11, 3), (6, 3, 3, 3), (2, 1), (1, 1), (1, 2, 2, 0), 7, "fast", "single_round", "padded"),
    ((1, 20, 40, 3), (8, 3, 3, 3), (2, 2), (1, 1), (0, 1, 0, 1), None, "compact", "double_round", "in_place"),
    ((1, 14, 30, 5), (6, 3, 2, 5), (1, 1), (2, 1), (2, 2, 1, 0), None, "compact", "single_round", "in_place"),
    ((1, 7, 8, 3), (4, 3, 3, 3), (1, 1), (1, 1), (0, 0, 0, 0), None, "fast", "double_round", "in_place"),
]


@pytest.mark.parametrize("case", range(len(WINDOW_ROWS_STEPS)))
def test_window_rows_steps_bit_exact(case):
    """Convolution steps whose windows qc_dsp_widen_rows reads row by row (templates/generic/conv2d.c.j2): from a
    copy of the padded image ("padded", a pad value other than the input zero point in one), or in place with the
    windows reading padding gathered (one-sided and vertical padding, a vertical dilation, rows of 15 elements),
    or all interior; packed and per-call kernels, both layouts: bit-exact with the primitives."""
    x_shape, w_shape, stride, dilation, pad, pad_value, layout, rounding, mode = WINDOW_ROWS_STEPS[case]
    target = load_target("cortex-m4", layout)
    reason = unavailable(target)
    if reason:
        pytest.skip(f"cortex-m4: {reason}")
    rng = np.random.default_rng(case)
    (_, ih, iw, _), (oc, kh, kw, _) = x_shape, w_shape
    oh = (ih + pad[0] + pad[1] - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (iw + pad[2] + pad[3] - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    extra = {} if pad_value is None else {"pad_value": pad_value}
    sched = conv_schedule("CONV2D", x_shape, rng.integers(-128, 128, w_shape), rng.integers(-5000, 5000, oc),
                          (1, oh, ow, oc), izp=-3, mults=(1 << 30,), shifts=(40,), rounding=rounding,
                          pad=list(pad), stride=list(stride), dilation=list(dilation), **extra)
    choice = plan_kernels(sched, target, "m").steps[-1].choice
    assert (choice.form, choice.window_rows) == ("conv_px", mode)
    result = c_vs_reference(sched, samples=2, target=target)
    assert result.bit_exact, f"{result.mismatches} mismatches, first {result.first_mismatch}"


def _firmware_text(workdir: Path, models: list, run: bool = False) -> int:
    """.text bytes of a Cortex-M4 firmware whose main() runs `models` (GeneratedModels of one folder) once each on
    zero inputs (none: the start-up code and the C library alone); with `run`, it runs under QEMU and must exit 0."""
    lines = [f'#include "{m.name}.h"' for m in models] + ["int main(void) {", "  int rc = 0;"]
    for m in models:
        buffers = [f"static {b.dtype.ctype} {m.name}_{kind}{i}[{b.size}];" for kind, group in (("in", m.inputs),
                   ("out", m.outputs)) for i, b in enumerate(group)]
        args = [f"{m.name}_in{i}" for i in range(len(m.inputs))] + [f"{m.name}_out{i}" for i in range(len(m.outputs))]
        lines += [f"  {line}" for line in buffers]
        arena = f"static unsigned char {m.name}_arena[{m.name.upper()}_ARENA_SIZE + 1] __attribute__((aligned(16)));"
        lines += [f"  {arena}", f"  rc |= {m.name}_run({', '.join(args + [f'{m.name}_arena'])});"]
    main = workdir / f"main_{'_'.join(m.name for m in models) or 'none'}.c"
    main.write_text("\n".join(lines + ["  return rc;", "}", ""]))
    exe = _link(workdir, [main] + [s for m in models for s in m.own_sources],
                sorted({k for m in models for k in m.kernel_sources}))
    if run:
        cmd = SemihostingRunner(TARGET).command(list(TARGET.emulator), exe, [])
        assert subprocess.run(cmd, capture_output=True, timeout=300, stdin=subprocess.DEVNULL).returncode == 0
    sizes = subprocess.run([binutil(TARGET, "size"), "-A", str(exe)], capture_output=True, text=True, check=True)
    return next(int(line.split()[1]) for line in sizes.stdout.splitlines() if line.startswith(".text "))


def test_two_models_in_one_firmware_share_the_kernels(tmp_path):
    """kws_like and mobilenet_like in one Cortex-M4 firmware: its model code (.text less that of the same firmware
    without models) is below the sum of the two single-model firmwares' (both call the same depthwise kernel of
    qc_cm_dsp.c, linked once), and it runs."""
    reason = unavailable(TARGET)
    if reason:
        pytest.skip(f"cortex-m4: {reason}")
    kws, mobilenet = (generate(plan(load_model(ROOT / "examples" / f"{name}.json")), tmp_path, TARGET, harness=True)
                      for name in ("kws_like", "mobilenet_like"))
    none = _firmware_text(tmp_path, [])
    both = _firmware_text(tmp_path, [kws, mobilenet], run=True) - none
    alone = [_firmware_text(tmp_path, [m]) - none for m in (kws, mobilenet)]
    assert both < sum(alone), (both, alone)


# qc_cm_copy against newlib's memmove: sources at each alignment mod 4 in a word-aligned buffer, destinations at
# every distance -40..40 from them (both overlap directions, every alignment of the destination) and disjoint
# below and above, lengths 0..100; then long copies (the LDM/STM passes many times over) at a few distances. Each
# case fills both buffers with the same pattern (byte i: 131 i + 1 mod 256, no two neighbours equal), copies one
# with each function and compares the whole buffers (the bytes around the destination too).
COPY_PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "qc_cm_copy.h"

static uint32_t got_words[4096], want_words[4096];
static int32_t qc_out[5];  /* cases, failures, the first failing case's src, dst, n */

/* one case in the buffers' first `size` bytes */
static void copy_case(size_t size, long src, long dst, long n) {
  unsigned char *got = (unsigned char *)got_words, *want = (unsigned char *)want_words;
  for (size_t i = 0; i < size; ++i) {
    got[i] = want[i] = (unsigned char)(131u * i + 1u);
  }
  qc_cm_copy(got + dst, got + src, (size_t)n);
  memmove(want + dst, want + src, (size_t)n);
  if (memcmp(got, want, size) != 0 && qc_out[1]++ == 0) {
    qc_out[2] = (int32_t)src;
    qc_out[3] = (int32_t)dst;
    qc_out[4] = (int32_t)n;
  }
  ++qc_out[0];
}

int main(int argc, char **argv) {
  static const long far[] = {-128, 128}, long_lengths[] = {1000, 4099}, long_deltas[] = {-4101, -33, -5, -4, -1,
                                                                                       1, 3, 4, 32, 36, 4101};
  (void)argc;
  for (long a = 0; a < 4; ++a) {
    for (long n = 0; n <= 100; ++n) {
      for (long delta = -40; delta <= 40; ++delta) {
        copy_case(384, 128 + a, 128 + a + delta, n);
      }
      for (long b = 0; b < 4; ++b) {
        copy_case(384, 128 + a, 128 + a + far[0] + b, n);
        copy_case(384, 128 + a, 128 + a + far[1] + b, n);
      }
    }
    for (int k = 0; k < 2; ++k) {
      for (size_t j = 0; j < sizeof long_deltas / sizeof long_deltas[0]; ++j) {
        copy_case(sizeof got_words, 4101 + a, 4101 + a + long_deltas[j], long_lengths[k]);
      }
    }
  }
  FILE *f = fopen(argv[1], "wb");
  if (!f || fwrite(qc_out, 4, 5, f) != 5) return 1;
  return fclose(f) != 0;
}
"""


def test_copy_matches_memmove(tmp_path):
    """qc_cm_copy (the data-movement steps' block copy) equals newlib's memmove on every case of COPY_PROGRAM."""
    reason = unavailable(TARGET)
    if reason:
        pytest.skip(f"cortex-m4: {reason}")
    cases, failures, src, dst, n = _run(tmp_path, COPY_PROGRAM, ("qc_cm_copy.h", "qc_cm_copy.c"))
    assert cases == 4 * 101 * (81 + 8) + 4 * 2 * 11
    assert failures == 0, f"{failures} of {cases} cases differ; the first: src {src}, dst {dst}, {n} bytes"
