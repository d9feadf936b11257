"""The Cortex-M55 Helium (MVE) kernels of runtime/mve on their own: one bare-metal program (cross-compiled with the
cortex-m55 target's flags, run under qemu-system-arm with semihosting) calls every kernel family and variant on
seeded random and extreme operands; its results must equal the numpy primitives (CONV2D, DEPTHWISE_CONV2D,
RESCALE) on the same values, element for element. The weights and constants are laid out by the family's own
layouts (qcodegen/kernels/mve/layouts.py), so the layouts are checked with the kernels."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import generate, load_target
from qcodegen.kernel_testing import (
    I32,
    KernelProgram,
    conv_accumulators,
    depthwise_accumulators,
    depthwise_row,
    rescale,
)
from qcodegen.kernels.mve import layouts
from qcodegen.resources import data_path
from qcodegen.testing import Var, prepare, step_schedule
from qcodegen.verify.build import compile_cached
from qcodegen.verify.runners import SemihostingRunner, content_addressed, unavailable

TARGET = load_target("cortex-m55")
ROUNDINGS = ("single_round", "double_round")  # the kernels' dbl 0, 1
FILES = ("qc_mve.h", "qc_mve_conv.h", "qc_mve.c")


class Program(KernelProgram):
    """The checks calling the MVE kernels, each in a function of its own (like a generated step: the kernels' asm
    needs up to 11 core registers, which main() with every check inlined does not leave)."""

    def __init__(self) -> None:
        super().__init__(("qc_mve_conv.h",))

    def source(self) -> str:
        cases = [f"static __attribute__((noinline)) void qc_case{i}(void) {body}" for i, body in enumerate(self.body)]
        calls = "\n".join(f"  qc_case{i}();" for i in range(len(self.body)))
        return super().source().replace("\n".join(self.body), calls).replace("int main(", "\n".join(cases) +
                                                                          "\nint main(", 1)

    def run(self, workdir: Path) -> np.ndarray:
        """Build the program with the kernels (qc_mve.c compiled once, cached by content), the target's start-up code
        and linker script; run it under qemu-system-arm."""
        tiny = step_schedule("RESCALE", [Var((1,), "i8")], [((1,), "i8")], multiplier=[1 << 30], shift=[31],
                             input_zp=0, output_zp=0, scale32=True, rounding="single_round")
        generate(prepare(tiny), workdir, TARGET, harness=True)  # qc_cortex_m_startup.c, qc_cortex_m.ld
        for name in FILES:
            (workdir / name).write_bytes((data_path("runtime") / "mve" / name).read_bytes())
        (workdir / "kernels_test.c").write_text(self.source())
        headers = [workdir / h for h in FILES if h.endswith(".h")]
        kernels = compile_cached([workdir / "qc_mve.c"], [TARGET.cc, *TARGET.cflags, "-c"], ".o", headers=headers)
        ldflags = [content_addressed(workdir / f) if f == "qc_cortex_m.ld" else f for f in TARGET.ldflags]
        exe = compile_cached([workdir / "kernels_test.c", workdir / "qc_cortex_m_startup.c"],
                             [TARGET.cc, *TARGET.cflags], ".exe", [str(kernels), *ldflags])
        out = workdir / "out.bin"
        cmd = SemihostingRunner(TARGET).command(list(TARGET.emulator), exe, [str(out)])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-1000:]
        return np.frombuffer(out.read_bytes(), "<i4").astype(I32)


def _scales(rng: np.random.Generator, channels: int, per_channel: bool) -> tuple[list[int], list[int]]:
    """Shifts 33..36 (the kernels are exact from 32; there the double rounding's 2^30 is 1/8 .. 1/64 of the rounding
    step, so that it changes many results) with multipliers in [2^19, 2^22), which bring accumulators of up to ~2^21
    inside and around int8; the first channel's multiplier 2^31 - 1 (saturating)."""
    n = channels if per_channel else 1
    mults = [int(v) for v in rng.integers(1 << 19, 1 << 22, n)]
    mults[0] = (1 << 31) - 1
    return mults, [int(v) for v in rng.integers(33, 37, n)]


def _dot_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_mve_dot_s8 and qc_mve_dot_4rows_s8 over whole and partial 16-byte chunks, extreme and random values."""
    for k in (1, 3, 15, 16, 17, 40, 1000):
        x = rng.integers(-128, 128, (2, k))
        w = rng.integers(-128, 128, (4, k))
        x[0, :], w[0, :], w[1, :] = -128, -128, 127
        xs, ws = prog.array("int8_t", x), prog.array("int8_t", w)
        sums = (x[:, None, :] * w[None, :, :]).sum(axis=2)  # [pixel, row]
        prog.check(f"  int32_t r[1] = {{qc_mve_dot_s8({xs}, {ws} + {k}, {k})}};", "r", sums[0, 1:2])
        prog.check(f"  int32_t r[4]; qc_mve_dot_4rows_s8({xs} + {k}, {ws}, {k}, r);", "r", sums[1])


def _conv_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_mve_conv_{1px,2px}_{s8,s16}: rows within one chunk, whole chunks, a tail chunk, the looped long rows;
    whole blocks of 4 rows and a last partial block; per-tensor and per-channel scales, both roundings, clamps;
    a pair, and a last odd pixel paired with itself; runs of 2 and 3 contiguous pixels (qc_mve_conv_run_*)."""
    shapes = [(3, 6), (16, 4), (17, 13), (40, 8), (135, 5), (264, 4)]
    for i, (k, rows) in enumerate(shapes):
        for out16 in (0, 1):
            pc, dbl, clamp = i % 2, (i + out16) % 2, (i // 2 + out16) % 2
            izp, zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
            full = (-32768, 32767) if out16 else (-128, 127)
            lo, hi = ((-3000, 9000) if out16 else (-60, 70)) if clamp else full
            x = rng.integers(-128, 128, (3, k))
            x[0] = -128
            w = rng.integers(-128, 128, (rows, k))
            w[0] = 127
            bias = rng.integers(-(1 << 20), 1 << 20, rows)
            mults, shifts = _scales(rng, rows, bool(pc))
            if out16:
                mults = [min(m << 7, (1 << 31) - 1) for m in mults]
            acc = conv_accumulators(x, w, bias, izp)
            expected = rescale(acc, mults, shifts, ROUNDINGS[dbl], zp, lo, hi, "i16" if out16 else "i8")
            stream = prog.array("int32_t", layouts.mve_pw4x2(w, rows, bias, izp, mults, shifts))
            ctype, suffix = ("int16_t", "s16") if out16 else ("int8_t", "s8")
            params = (f"  const qc_mve_conv_params P = {{{stream}, {rows}, {k}, {dbl}, {zp}, {lo}, "
                      f"{hi}}};\n  {ctype} y[{3 * rows}];\n")
            xs = prog.array("int8_t", x)
            # one call a function, as in a step (the asm needs 11 core registers); the last pixel paired with itself
            # through a pointer the compiler does not see as the same (as the call site's select)
            prog.check(params + f"  qc_mve_conv_2px_{suffix}(&P, {xs}, {xs} + {k}, y, {rows});", "y", expected[:2])
            prog.check(params + f"  const int8_t *volatile x2 = {xs} + {2 * k};\n"
                       f"  qc_mve_conv_2px_{suffix}(&P, x2, {xs} + {2 * k}, y, 0);", "y", expected[2])
            prog.check(params + f"  qc_mve_conv_1px_{suffix}(&P, {xs} + {k}, y);", "y", expected[1])
            prog.check(params + f"  qc_mve_conv_run_{suffix}(&P, {xs}, y, {3 - i % 2});", "y", expected[:3 - i % 2])


def _conv_rows_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_mve_conv_rows_{s8,s16}: MobileNetV1's first convolution (3x3 stride 2 over 3 channels, padding after the
    input), a batch of 2 with padding on every side and an odd output width (the last pixel of each row alone), a
    pad value other than the input zero point, rows of 16 inputs, and input columns past the last window (the rows'
    copies cut short); the windows against numpy's, both roundings, clamps, whole and partial blocks of 4 rows."""
    # channels, (batch, height, width), kernel, stride, padding (top, bottom, left, right), output channels
    shapes = [(3, (1, 7, 9), (3, 3), (2, 2), (0, 1, 0, 1), 8), (1, (2, 6, 5), (4, 3), (1, 1), (1, 2, 1, 1), 5),
              (2, (1, 6, 7), (3, 2), (2, 1), (1, 1, 0, 1), 12), (4, (1, 5, 8), (2, 4), (1, 2), (0, 0, 0, 0), 4)]
    for i, (c, (batch, h, wd), (kh, kw), (sy, sx), (pt, pb, pl, pr), rows) in enumerate(shapes):
        out16, dbl, clamp = i % 2, i // 2 % 2, (i + 1) // 2 % 2
        izp, zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        pad = izp if i != 2 else int(rng.integers(-128, 128))
        full = (-32768, 32767) if out16 else (-128, 127)
        lo, hi = ((-3000, 9000) if out16 else (-60, 70)) if clamp else full
        x = rng.integers(-128, 128, (batch, h, wd, c))
        x[0, 0] = -128
        padded = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=pad)
        oh, ow = (h + pt + pb - kh) // sy + 1, (wd + pl + pr - kw) // sx + 1
        windows = np.array([padded[b, oy * sy:oy * sy + kh, ox * sx:ox * sx + kw].reshape(-1)
                            for b in range(batch) for oy in range(oh) for ox in range(ow)])
        k = kh * kw * c
        w = rng.integers(-128, 128, (rows, k))
        w[0] = 127
        bias = rng.integers(-(1 << 12), 1 << 12, rows)
        # scales of 2^-11 .. 2^-7 (int8) and 2^-5 .. 2^-1 (int16) over accumulators of ~2^15: most outputs inside the
        # clamp, so that a tap read from the wrong place changes them
        per = rows if i % 2 == 0 else 1
        mults = [int(m) for m in rng.integers(1 << 28, 1 << 31, per)]
        shifts = [int(v) for v in rng.integers(33, 35, per) + (0 if out16 else 6)]
        expected = rescale(conv_accumulators(windows, w, bias, izp), mults, shifts, ROUNDINGS[dbl], zp, lo, hi,
                           "i16" if out16 else "i8")
        cols = (ow - 1) * sx + kw
        geometry = (batch, h, wd, c, oh, ow, kh, kw, sy, sx, pt, pl, cols, pad)
        ctype, suffix = ("int16_t", "s16") if out16 else ("int8_t", "s8")
        stream = prog.array("int32_t", layouts.mve_pw4x2(w, rows, bias, izp, mults, shifts))
        prog.check(f"  const qc_mve_conv_params P = {{{stream}, {rows}, {k}, {dbl}, {zp}, {lo}, {hi}}};\n"
                   f"  const qc_mve_conv_geo G = {{{', '.join(map(str, geometry))}}};\n"
                   f"  {ctype} y[{expected.size}];\n  int8_t scratch[{kh * cols * c + 2 * (k + 16)}];\n"
                   f"  qc_mve_conv_rows_{suffix}(&P, &G, {prog.array('int8_t', x)}, y, scratch);", "y", expected)


def _dw_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_mve_dw_s8_* (both roundings, with and without a clamp) and qc_mve_dw_s32: a run of the pixels of an output
    row (tap offsets from the first pixel's window) and single pixels over a table of the taps' addresses; one and
    several blocks of 16 channels (3x3: the 9 pointers in registers, set once per run of whole blocks and advanced
    by the stride, per pixel from 2 blocks on), a last partial block, fewer than 16 channels with several pixels
    per vector (copies), 3x3 at strides 1 and 2, 1x2 at stride 2. The int8 outputs' weights lie in [-127, 127]
    (qc_mve_dw_s8_* add tap pairs in int16), channel 0's all -127 over a row of -128 inputs: tap pairs of
    2 * 128 * 127, the int16 limit."""
    shapes = [(16, (3, 3), 1), (40, (3, 3), 1), (19, (1, 2), 2), (8, (3, 3), 1), (4, (3, 3), 1), (2, (1, 2), 1),
              (32, (3, 3), 2)]
    variants = [(dbl, clamp) for dbl in (0, 1) for clamp in (0, 1)] + [(None, 0)]
    for i, (c, (kh, kw), stride) in enumerate(shapes):
        for j, (dbl, clamp) in enumerate(variants):
            izp, zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
            lo, hi = (-90, 40) if clamp else (-128, 127)
            case = depthwise_row(rng, c, (kh, kw), stride, 10, izp, -128 if dbl is None else -127)
            acc, taps, offsets, bias, pixels = case.acc, case.taps, case.offsets, case.bias, case.acc.shape[0]
            tab, xs = prog.array("uintptr_t", offsets), prog.array("int8_t", case.x)
            one = (i + j) % pixels
            addresses = "".join(f"  t[{t}] = (uintptr_t)({xs} + {one * stride * c} + {off});\n"
                                for t, off in enumerate(offsets))
            if dbl is None:
                base = prog.array("int32_t", layouts.mve_dw_starts(taps, c, bias, izp))
                params = (f"  const qc_mve_dw_s32_params P = {{{prog.array('int8_t', taps)}, {base}, {c}, {kh * kw}}};"
                          f"\n  int32_t y[{pixels * c}];\n")
                fn, expected = "qc_mve_dw_s32", acc
            else:
                copies = 16 // c if c < 16 and 16 % c == 0 and stride == 1 else 1
                mults, shifts = _scales(rng, c, j % 2 == 0)
                pr = layouts.mve_dw_params(taps, c, bias, izp, mults, shifts, zp, lo, hi, copies)
                w16 = layouts.mve_dw_w16(taps, c, copies)
                params = (f"  const qc_mve_dw_params P = {{{prog.array('int8_t', w16)}, {prog.array('int32_t', pr)}, "
                          f"{c}, {kh * kw}, {copies}, {zp}, {lo}, {hi}}};\n  int8_t y[{pixels * c}];\n")
                fn = f"qc_mve_dw_s8_{'double' if dbl else 'single'}{'_clamp' if clamp else ''}"
                expected = rescale(acc, mults, shifts, ROUNDINGS[dbl], zp, lo, hi)
            prog.check(params + f"  {fn}(&P, {tab}, {xs}, y, {pixels}, {stride * c});", "y", expected)
            prog.check(params + f"  uintptr_t t[{kh * kw}];\n{addresses}  {fn}(&P, t, NULL, y, 1, 0);", "y",
                       expected[one])


def _dw_rows_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_mve_dw_s8_rows over each requantizing kernel: windows reading padding on every side (a batch of 2, the
    ring's rows reused across its images), stride 2 with padding only after the input, dilation 2 (a ring of 5
    rows), a 2x3 window (taps not 9: the table loop) with strides 1 and 2, a pad value other than the input zero
    point, 8 channels (2 pixels a vector; rows of 56 bytes: the copies' predicated tails) and 40 (a partial
    block); weights in [-127, 127], channel 0's -127 over a row of -128 inputs (tap pairs at the int16 limit)."""
    # channels, (batch, height, width), kernel, stride, dilation, pad (top, bottom, left, right), pad value = izp
    shapes = [(32, (2, 5, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), True),
              (16, (1, 8, 8), (3, 3), (2, 2), (1, 1), (0, 1, 0, 1), True),
              (16, (1, 6, 5), (3, 3), (1, 1), (2, 2), (2, 2, 2, 2), True),
              (48, (1, 4, 7), (2, 3), (1, 2), (1, 1), (1, 0, 1, 1), True),
              (16, (1, 6, 8), (3, 3), (2, 2), (1, 1), (1, 0, 1, 0), False),
              (8, (1, 4, 7), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), True),
              (40, (1, 3, 3), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), True)]
    for i, (c, (batch, h, wd), (kh, kw), stride, dilation, pad, izp_pad) in enumerate(shapes):
        dbl, clamp = i % 2, i // 2 % 2
        izp, zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        pad_value = izp if izp_pad else int(rng.integers(-128, 128))
        lo, hi = (-90, 40) if clamp else (-128, 127)
        x = rng.integers(-128, 128, (batch, h, wd, c))
        x[0, 0, 0] = 127
        x[:, 1] = -128
        w = rng.integers(-127, 128, (kh, kw, c))
        w[..., 0] = -127
        bias = rng.integers(-(1 << 20), 1 << 20, c)
        acc = np.concatenate([depthwise_accumulators(x[b:b + 1], w, bias, izp, stride, pad, dilation, pad_value)
                              for b in range(batch)])
        _, oh, ow, _ = acc.shape
        mults, shifts = _scales(rng, c, i % 3 == 0)
        taps = w.reshape(kh * kw, c)
        copies = 16 // c if c < 16 and stride[1] == 1 else 1
        pr = layouts.mve_dw_params(taps, c, bias, izp, mults, shifts, zp, lo, hi, copies)
        slots, cols = (kh - 1) * dilation[0] + 1, (ow - 1) * stride[1] + (kw - 1) * dilation[1] + 1
        geometry = (batch, h, wd, oh, ow, kh, kw, *stride, *dilation, pad[0], pad[2], slots, cols, pad_value)
        fn = f"qc_mve_dw_s8_{'double' if dbl else 'single'}{'_clamp' if clamp else ''}"
        tab = prog.array("uintptr_t", [((first + ky * dilation[0]) % slots * cols + kx * dilation[1]) * c
                                       for first in range(slots) for ky in range(kh) for kx in range(kw)])
        prog.check(f"  const qc_mve_dw_params P = {{{prog.array('int8_t', layouts.mve_dw_w16(taps, c, copies))}, "
                   f"{prog.array('int32_t', pr)}, {c}, {kh * kw}, {copies}, {zp}, {lo}, {hi}}};\n"
                   f"  const qc_mve_dw_geo G = {{{', '.join(map(str, geometry))}}};\n"
                   f"  int8_t y[{acc.size}], scratch[{slots * cols * c}];\n"
                   f"  qc_mve_dw_s8_rows({fn}, &P, &G, {tab}, {prog.array('int8_t', x)}, y, scratch);", "y",
                   rescale(acc.reshape(-1, c), mults, shifts, ROUNDINGS[dbl], zp, lo, hi))


def _gather_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_mve_gather_rows: runs of 1, 9 (MobileNetV1's first convolution: 3 x 3 taps of 3 channels) and 16 elements
    at a row stride (the source's last run followed by 16 - n bytes: whole 16-byte loads); the window's elements in
    run order (each run's 16-byte store overwritten by the next run)."""
    for n, rows, stride in ((1, 4, 5), (9, 3, 288), (16, 2, 16), (12, 5, 40)):
        x = rng.integers(-128, 128, (rows - 1) * stride + 16)
        window = np.concatenate([x[r * stride:r * stride + n] for r in range(rows)])
        prog.check(f"  int8_t y[{rows * n + 16}];\n  qc_mve_gather_rows(y, {prog.array('int8_t', x)}, {stride}, "
                   f"{n}, {rows});", "y", window)


def _mla_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_mve_mla_s8: one tap of the portable depthwise loops, whole groups of 4 and a predicated tail."""
    for n in (4, 7, 33):
        x, w = rng.integers(-128, 128, n), rng.integers(-128, 128, n)
        start = rng.integers(-(1 << 24), 1 << 24, n)
        izp = int(rng.integers(-128, 128))
        acc = prog.array("int32_t", start, const=False)
        prog.check(f"  qc_mve_mla_s8({acc}, {prog.array('int8_t', x)}, {prog.array('int8_t', w)}, {n}, {izp});", acc,
                   start + (x - izp) * w)


def test_kernels_against_the_numpy_primitives(tmp_path):
    reason = unavailable(TARGET)
    if reason:
        pytest.skip(f"cortex-m55: {reason}")
    prog = Program()
    rng = np.random.default_rng(55)
    _dot_cases(prog, rng)
    _conv_cases(prog, rng)
    _conv_rows_cases(prog, rng)
    _dw_cases(prog, rng)
    _dw_rows_cases(prog, rng)
    _mla_cases(prog, rng)
    _gather_cases(prog, rng)
    assert prog.mismatches(prog.run(tmp_path)) == ""
