"""The RISC-V kernels on their own (runtime/rv32 for target riscv32, runtime/rvv for riscv64-rvv): per target one
program, cross-compiled with the target's flags and run by its emulator, calls every kernel and variant on seeded
random and extreme operands; its results must equal the numpy primitives (CONV2D, DEPTHWISE_CONV2D, RESCALE) on the
same values, element for element. The weights are re-laid by the family's own layouts, so the layouts are checked
with the kernels."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen import primitives
from qcodegen.codegen import load_target
from qcodegen.codegen.targets import Target
from qcodegen.kernels.rv32 import layouts as rv32_layouts
from qcodegen.resources import data_path
from qcodegen.testing import Const, Var, step_schedule
from qcodegen.verify.build import compile_cached
from qcodegen.verify.runners import unavailable

I64 = np.int64


class Program:
    """C statements calling kernels, each storing its results (as int32) in qc_out; the expected values."""

    def __init__(self, includes: list[str], decls: list[str] | None = None) -> None:
        self.includes = includes
        self.decls: list[str] = list(decls or [])
        self.body: list[str] = []
        self.expected: list[np.ndarray] = []
        self.size = 0

    def array(self, ctype: str, values) -> str:
        name = f"a{len(self.decls)}"
        flat = [int(v) for v in np.asarray(values).reshape(-1)] or [0]
        items = ", ".join("(-2147483647 - 1)" if v == -(1 << 31) else str(v) for v in flat)
        self.decls.append(f"static const {ctype} {name}[{len(flat)}] = {{{items}}};")
        return name

    def check(self, statements: str, results: str, expected: np.ndarray) -> None:
        """Run `statements`, then copy the `expected.size` values of the C array `results` into qc_out."""
        n = int(expected.size)
        self.body.append(f"{{\n{statements}\n  for (int32_t i = 0; i < {n}; ++i) qc_out[{self.size} + i] = "
                         f"{results}[i];\n}}")
        self.expected.append(np.asarray(expected, I64).reshape(-1))
        self.size += n

    def source(self) -> str:
        return "\n".join([*(f'#include "{h}"' for h in self.includes), *self.decls,
                          f"static int32_t qc_out[{max(self.size, 1)}];",
                          "int main(int argc, char **argv) {", "  (void)argc;", *self.body,
                          '  FILE *f = fopen(argv[1], "wb");',
                          f"  if (!f || fwrite(qc_out, 4, {self.size}, f) != {self.size}) return 1;",
                          "  return fclose(f) != 0;", "}", ""])

    def run(self, target: Target, workdir: Path, files: list[str]) -> np.ndarray:
        """Build the program with the runtime `files` (relative to runtime/; the .c ones compiled with it) by the
        target's compiler and flags, run it under the target's emulator; the values it wrote."""
        for f in files:
            (workdir / Path(f).name).write_bytes((data_path("runtime") / f).read_bytes())
        (workdir / "kernels_test.c").write_text(self.source())
        sources = [workdir / "kernels_test.c"] + [workdir / Path(f).name for f in files if f.endswith(".c")]
        exe = compile_cached(sources, [*target.cc.split(), *target.cflags], ".exe", list(target.ldflags))
        out = workdir / "out.bin"
        proc = subprocess.run([*target.emulator, str(exe), str(out)], capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-1000:]
        got = np.frombuffer(out.read_bytes(), "<i4").astype(I64)
        expected = np.concatenate(self.expected)
        assert got.shape == expected.shape
        return got


def _assert_equal(got: np.ndarray, expected: np.ndarray) -> None:
    mismatches = np.flatnonzero(got != expected)
    assert mismatches.size == 0, (f"{mismatches.size} of {expected.size} values differ; first at {mismatches[0]}: "
                                  f"expected {expected[mismatches[0]]}, got {got[mismatches[0]]}")


def _target(name: str) -> Target:
    target = load_target(name)
    reason = unavailable(target)
    if reason:
        pytest.skip(f"{name}: {reason}")
    return target


def _conv_acc(x: np.ndarray, w: np.ndarray, bias: np.ndarray, izp: int = 0) -> np.ndarray:
    """CONV2D (1x1, the pixels as a row) of x [P, k] and weights [rows, k]: [P, rows] int32 accumulators."""
    pixels, k = x.shape
    sched = step_schedule("CONV2D", [Var((1, 1, pixels, k), "i8"), Const(w.reshape(-1, 1, 1, k), "i8"),
                                     Const(bias, "i32")], [((1, 1, pixels, w.shape[0]), "i32")],
                          pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=izp, weight_zp=0, acc_type="i32")
    args = [x.reshape(1, 1, pixels, k).astype(np.int8), w.reshape(-1, 1, 1, k).astype(np.int8), bias.astype(np.int32)]
    return primitives.get("CONV2D").reference(sched.io(sched.steps[0]), args)[0].reshape(pixels, -1)


def _rescale(acc: np.ndarray, mults, shifts, rounding: str, zp: int, out: str, lo: int, hi: int) -> np.ndarray:
    """RESCALE of int32 accumulators [..., channels] to `out` (i8 / i16; per channel when several multipliers)."""
    sched = step_schedule("RESCALE", [Var(acc.shape, "i32")], [(acc.shape, out)], multiplier=list(mults),
                          shift=list(shifts), input_zp=0, output_zp=zp, scale32=True, rounding=rounding,
                          per_channel=len(mults) > 1, out_min=lo, out_max=hi)
    return primitives.get("RESCALE").reference(sched.io(sched.steps[0]), [acc.astype(np.int32)])[0]


# (rows R, pixels P, interleaving XS) of the qc_rv32_dot_rows* kernels
RV32_BLOCKS = [(4, 4, 4), (4, 1, 4), (4, 2, 4), (4, 3, 4), (8, 2, 2), (8, 1, 2), (8, 1, 1)]


def _rv32_dot_cases(prog: Program, rng: np.random.Generator) -> None:
    """Every register block over row lengths with and without a last partial group of 4 elements, extreme rows
    (-128 x -128, -128 x 127) and a last block of fewer rows than R (the layout pads it with zero rows); the first
    block's windows interleaved by qc_rv32_dot_rows_window, the others laid out by the test."""
    for i, (rows, pixels, xs) in enumerate(RV32_BLOCKS):
        for n in (1, 3, 4, 7, 40):
            x = rng.integers(-128, 128, (xs, n))
            x[0] = -128
            real = rows - (i + n) % 2  # rows before the layout's padding
            w = rng.integers(-128, 128, (real, n))
            w[0], w[-1] = -128, 127
            expected = np.zeros((pixels, rows), I64)
            expected[:, :real] = _conv_acc(x[:pixels], w, np.zeros(real, I64))
            ws = prog.array("int8_t", getattr(rv32_layouts, f"rv32_r{rows}")(w))
            fn = f"qc_rv32_dot_rows{rows}x{pixels}{f'_of{xs}' if xs != pixels else ''}_s8"
            if i == 0:  # (the source and length through volatile reads: GCC warns of the copy's tail loop)
                xb = f"  volatile int32_t vn = {n};\n" + "".join(
                    f"  qc_rv32_dot_rows_window(hide({prog.array('int8_t', x[j])}), hide_w(xb) + {j}, {xs}, vn);\n"
                    for j in range(xs))
            else:
                xb = f"  for (int32_t e = 0; e < {xs * n}; ++e) xb[e] = {prog.array('int8_t', x.T)}[e];\n"
            prog.check(f"  int8_t xb[{xs * n}];\n{xb}  int32_t r[{rows * pixels}];\n  {fn}(xb, {ws}, {n}, r);", "r",
                       expected)


def _scales(rng: np.random.Generator, count: int, lo_shift: int) -> tuple[list[int], list[int]]:
    """Multipliers in [2^20, 2^31) (a quarter of them powers of two: exact ties), the first ones 2^31 - 1 and 1;
    shifts mostly lo_shift..lo_shift + 3 (where the double rounding's 2^30 is a large part of the rounding step,
    so that it changes many results), a quarter up to 62."""
    mults = [int(v) for v in rng.integers(1 << 20, 1 << 31, count)]
    shifts = [int(v) for v in rng.integers(lo_shift, lo_shift + 4, count)]
    for j in range(0, count - 1, 4):
        mults[j] = 1 << int(rng.integers(20, 31))
        shifts[j + 1] = int(rng.integers(lo_shift, 63))
    mults[:2] = [(1 << 31) - 1, 1]
    return mults, shifts


def _aimed(rng: np.random.Generator, mults: list[int], shifts: list[int], bound: int) -> np.ndarray:
    """Accumulators in (-bound, bound) that the scales map around the outputs' range (a tenth beyond int16, a third
    anywhere in the range), where the roundings differ."""
    out = rng.integers(-300, 300, len(mults))
    out[::10] = rng.integers(-40000, 40000, out[::10].size)
    aimed = [((int(o) << s) // m) + int(rng.integers(-(1 << 12), 1 << 12))
             for o, m, s in zip(out, mults, shifts, strict=True)]
    acc = np.array([min(max(a, -bound + 1), bound - 1) for a in aimed], I64)
    acc[::3] = rng.integers(-bound + 1, bound, acc[::3].size)
    return acc


def _rv32_scale_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_rv32_scale32 in its three modes against RESCALE to int16 (clamped as the stores do), on accumulators of
    the whole int32 range (QC_RV32_DOUBLE_29: |v| < 2^29) aimed around the outputs' range, at ties and extremes."""
    count = 240
    for mode, rounding, lo_shift, bound in ((0, "single_round", 33, 1 << 31), (1, "double_round", 33, 1 << 31),
                                            (2, "double_round", 32, 1 << 29)):
        mults, shifts = _scales(rng, count, lo_shift)
        acc = _aimed(rng, mults, shifts, bound)
        acc[:4] = [bound - 1, -bound + 1, 0, -1] if mode == 2 else [bound - 1, -bound, 1, -1]
        zp = int(rng.integers(-128, 128))
        expected = _rescale(acc.reshape(1, -1), mults, shifts, rounding, zp, "i16", -32768, 32767)
        v, m, s = (prog.array("int32_t", a) for a in (acc, mults, shifts))
        prog.check(f"  int32_t r[{count}];\n  for (int32_t i = 0; i < {count}; ++i) r[i] = qc_clamp32("
                   f"qc_rv32_scale32({v}[i], {m}[i], {s}[i], {2 * zp + 1}, {mode}), -32768, 32767);", "r", expected)


# qc_rv32_dw_plane cases: input [N, IH, IW, C], kernel, stride, dilation, pad, izp, pad_value, output (bits 32:
# the accumulators; else int8 / int16 requantized in qc_rv32_scale32 mode `mode`, per channel or per tensor)
RV32_DW_CASES = [
    ((1, 6, 5, 8), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 0, -128, 8, 2, True),    # DS-CNN's 3x3 (DOUBLE_29)
    ((2, 7, 9, 5), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), -3, -3, 32, 0, False),   # strides, batches, int32 out
    ((1, 8, 8, 3), (2, 4), (1, 2), (2, 1), (0, 1, 2, 2), 7, -128, 16, 0, False),  # dilation, uneven padding
    ((1, 6, 20, 4), (4, 4), (1, 1), (1, 1), (0, 0, 0, 0), 0, 0, 8, 1, True),      # 16 taps, rows copied in loops
    ((1, 3, 3, 2), (3, 3), (1, 1), (1, 1), (2, 2, 2, 2), 127, 127, 8, 1, False),  # more padding than input
]


def _rv32_depthwise_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_rv32_dw_plane (qc_rv32_dw.h) with the geometry the kernel choice makes for the step (rendered as the
    template renders it) against DEPTHWISE_CONV2D, then RESCALE of its accumulators for the requantized outputs;
    extreme weights, inputs and biases."""
    from qcodegen.kernels.names import ArrayNames
    from qcodegen.kernels.rv32.choice import choose

    for shape, kernel, stride, dilation, pad, izp, pad_value, bits, mode, per_channel in RV32_DW_CASES:
        n, ih, iw, c = shape
        x = rng.integers(-128, 128, shape)
        x.reshape(-1)[:3] = [-128, 127, -128]
        w = rng.integers(-128, 128, (*kernel, c, 1))
        w.reshape(-1)[:2] = [-128, 127]
        bias = rng.integers(-(1 << 16), 1 << 16, c)
        oh = (ih - 1 + pad[0] + pad[1] - (kernel[0] - 1) * dilation[0]) // stride[0] + 1
        ow = (iw - 1 + pad[2] + pad[3] - (kernel[1] - 1) * dilation[1]) // stride[1] + 1
        sched = step_schedule("DEPTHWISE_CONV2D", [Var(shape, "i8"), Const(w, "i8"), Const(bias, "i32")],
                              [((n, oh, ow, c), "i32")], pad=list(pad), stride=list(stride), dilation=list(dilation),
                              input_zp=izp, weight_zp=0, pad_value=pad_value, acc_type="i32")
        io = sched.io(sched.steps[0])
        choice = choose(io, 0, ArrayNames("t"), "compact")
        assert choice.form == "dw_plane", choice.reason
        p = choice.params
        acc = primitives.get("DEPTHWISE_CONV2D").reference(io, [x.astype(np.int8), w.astype(np.int8),
                                                               bias.astype(np.int32)])[0]
        geometry = (f"{n}, {c}, {ih}, {iw}, {oh}, {ow}, {stride[0]}, {stride[1]}, {p.height}, {p.width}, {p.rows}, "
                    f"{p.cols}, {p.top}, {p.left}, {int(p.padded)}, {p.pad_value}, {int(p.unrolled)}, {p.taps}, "
                    f"{{{', '.join(map(str, p.offsets))}}}, {p.izp}")
        if bits == 32:
            expected, ctype, store = acc, "int32_t", "4, NULL, NULL, 0, 0, 0, 0, 0, 0"
        else:
            mults, shifts = _scales(rng, max(c, 3), 37)  # (outputs around the int8 range; the modes: above)
            mults, shifts = (mults[:c], shifts[:c]) if per_channel else (mults[2:3], shifts[2:3])
            zp = int(rng.integers(-100, 100))
            lo, hi = (-128 if mode < 2 else zp, 127) if bits == 8 else (-32768, 32767)  # (mode 2: a ReLU)
            expected = _rescale(acc, mults, shifts, "single_round" if mode == 0 else "double_round", zp,
                                f"i{bits}", lo, hi)
            ctype = f"int{bits}_t"
            scales = (f"{prog.array('int32_t', mults)}, {prog.array('int8_t', shifts)}, 0, 0" if per_channel else
                      f"NULL, NULL, {mults[0]}, {shifts[0]}")
            store = f"{bits // 8}, {scales}, {2 * zp + 1}, {mode}, {lo}, {hi}"
        prog.check(f"  static const qc_rv32_dw_geometry g = {{{geometry}}};\n"
                   f"  static const qc_rv32_dw_store st = {{{store}}};\n  int8_t pl[{p.height * p.width}];\n"
                   f"  {ctype} r[{acc.size}];\n  qc_rv32_dw_plane(&g, &st, {prog.array('int8_t', x)}, "
                   f"{prog.array('int8_t', w)}, {prog.array('int32_t', bias)}, 1, r, pl);", "r", expected)


def test_rv32_kernels_against_the_numpy_primitives(tmp_path):
    target = _target("riscv32")
    # hide(p), hide_w(p): p through a volatile pointer (its array's size unknown to the compiler)
    prog = Program(["qc_minilibc.h", "qc_runtime.h", "qc_rv32.h", "qc_rv32_dot.h", "qc_rv32_dw.h"],
                   ["static const int8_t *hide(const int8_t *p) { const int8_t *volatile v = p; return v; }",
                    "static int8_t *hide_w(int8_t *p) { int8_t *volatile v = p; return v; }"])
    rng = np.random.default_rng(15)
    _rv32_dot_cases(prog, rng)
    _rv32_scale_cases(prog, rng)
    _rv32_depthwise_cases(prog, rng)
    got = prog.run(target, tmp_path, ["qc_minilibc.h", "qc_minilibc.c", "qc_runtime.h", "rv32/qc_rv32.h",
                                      "rv32/qc_rv32_dot.h", "rv32/qc_rv32_dw.h"])
    _assert_equal(got, np.concatenate(prog.expected))


def _rvv_dot_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_rvv_dot_s8 and qc_rvv_dot_rows4_s8 over rows shorter than, as long as and longer than a vsetvl strip (32
    int8 lanes at VLEN 128), with a partial last strip, and a long row of -128 x -128 products."""
    for n in (1, 31, 32, 33, 100, 4000):
        x = rng.integers(-128, 128, (1, n))
        w = rng.integers(-128, 128, (4, n))
        if n == 4000:
            x[:], w[0] = -128, -128
        expected = _conv_acc(x, w, np.zeros(4, I64))[0]
        xs, ws = prog.array("int8_t", x), prog.array("int8_t", w)
        prog.check(f"  int32_t r[4];\n  qc_rvv_dot_rows4_s8({xs}, {ws}, {n}, r);", "r", expected)
        prog.check(f"  int32_t r[1] = {{qc_rvv_dot_s8({xs}, {ws} + {3 * n}, {n})}};", "r", expected[3:])


def _rvv_requantize_cases(prog: Program, rng: np.random.Generator) -> None:
    """qc_rvv_requantize_pixel (qc_rvv_requantize in vsetvl strips) against RESCALE of acc + bias - zc: single and
    double rounding (shifts > 31), per channel and per tensor, int8 and int16 outputs with a narrowed range, bias per
    channel or not, zero-point terms or none, over more channels than a strip (16 int32 lanes) and fewer."""
    cases = [(n, dbl, per_channel, bits, bias_pc, zc) for n in (40, 5) for dbl in (0, 1)
             for per_channel, bits, bias_pc, zc in ((True, 8, True, True), (False, 16, False, False),
                                                    (True, 16, False, True), (False, 8, True, False))]
    for n, dbl, per_channel, bits, bias_pc, with_zc in cases:
        mults, shifts = _scales(rng, n, 32 if dbl else 2 + int(rng.integers(0, 20)))
        if not per_channel:
            mults, shifts = [mults[2]] * n, [shifts[2]] * n
        limit = np.array([1 << min(s - 1, 30) for s in shifts], I64)  # (TOSA: |v| < 2^(shift - 1) for shift <= 31)
        total = np.clip(_aimed(rng, mults, shifts, 1 << 30), -limit, limit - 1)
        bias = rng.integers(-(1 << 20), 1 << 20, n if bias_pc else 1)
        zc = rng.integers(-(1 << 20), 1 << 20, n) if with_zc else np.zeros(n, I64)
        acc = total - (bias if bias_pc else bias[0]) + zc
        zp = int(rng.integers(-100, 100))
        lo, hi = (-128, 127) if bits == 8 else (-32768, 32767)
        lo = zp if n == 5 else lo  # a ReLU's range
        expected = _rescale(total.reshape(1, -1), mults if per_channel else mults[:1],
                            shifts if per_channel else shifts[:1], "double_round" if dbl else "single_round",
                            zp, f"i{bits}", lo, hi)
        scales = (f"{prog.array('int32_t', mults)}, {prog.array('int8_t', shifts)}, 0, 0" if per_channel
                  else f"NULL, NULL, {mults[0]}, {shifts[0]}")
        zcs = prog.array("int32_t", zc) if with_zc else "NULL"
        prog.check(f"  const qc_rvv_rq rq = {{{scales}, {dbl}, {zp}, {lo}, {hi}, {bits}, NULL, NULL, NULL, 0}};\n"
                   f"  int{bits}_t r[{n}];\n  qc_rvv_requantize_pixel(&rq, {prog.array('int32_t', acc)}, "
                   f"{prog.array('int32_t', bias)}, {int(bias_pc)}, {zcs}, r, {n});", "r", expected)


def _rvv_depthwise_cases(prog: Program, rng: np.random.Generator) -> None:
    """A depthwise block as the skeleton runs it (qc_rvv_dw_start from the zero-point terms -izp * sum(w) or 0,
    qc_rvv_dw_pad for the taps left of the input, qc_rvv_dw_tap for the others, + qc_rvv_bias) against
    DEPTHWISE_CONV2D of a 1 x taps window over an input padded on the left (padding reads pad_value)."""
    for c, taps, pads, izp, pad_value in ((16, 9, 3, -128, -128), (5, 25, 0, 0, 0), (16, 4096, 1, 17, 0),
                                          (7, 12, 4, 0, -128)):
        x = rng.integers(-128, 128, (taps - pads, c))
        w = rng.integers(-128, 128, (taps, c))
        if taps == 4096:
            x[:], w[:] = -128, -128
        bias = rng.integers(-(1 << 20), 1 << 20, c)
        sched = step_schedule("DEPTHWISE_CONV2D", [Var((1, 1, taps - pads, c), "i8"),
                                                   Const(w.reshape(1, taps, c, 1), "i8"), Const(bias, "i32")],
                              [((1, 1, 1, c), "i32")], pad=[0, 0, pads, 0], stride=[1, 1], dilation=[1, 1],
                              input_zp=izp, weight_zp=0, pad_value=pad_value, acc_type="i32")
        expected = primitives.get("DEPTHWISE_CONV2D").reference(
            sched.io(sched.steps[0]), [x.reshape(1, 1, -1, c).astype(np.int8), w.reshape(1, taps, c, 1).astype(
                np.int8), bias.astype(np.int32)])[0].reshape(-1)
        zc = prog.array("int32_t", -izp * w.sum(axis=0)) if izp else "NULL"
        xs, ws = prog.array("int8_t", x), prog.array("int8_t", w)
        prog.check(f"  const size_t vl = vsetvl_e32m4({c});\n  vint32m4_t a = qc_rvv_dw_start({zc}, vl);\n"
                   f"  for (int32_t t = 0; t < {pads}; ++t) a = qc_rvv_dw_pad(a, {pad_value}, {ws} + t * {c}, vl);\n"
                   f"  for (int32_t t = {pads}; t < {taps}; ++t) a = qc_rvv_dw_tap(a, {xs} + (t - {pads}) * {c}, "
                   f"{ws} + t * {c}, vl);\n  int32_t r[{c}];\n"
                   f"  vse32_v_i32m4(r, vadd_vv_i32m4(a, qc_rvv_bias({prog.array('int32_t', bias)}, 1, 0, vl), vl), "
                   "vl);", "r", expected)


def test_rvv_kernels_against_the_numpy_primitives(tmp_path):
    target = _target("riscv64-rvv")
    prog = Program(["stdio.h", "qc_rvv.h"])
    rng = np.random.default_rng(15)
    _rvv_dot_cases(prog, rng)
    _rvv_requantize_cases(prog, rng)
    _rvv_depthwise_cases(prog, rng)
    got = prog.run(target, tmp_path, ["rvv/qc_rvv.h"])
    _assert_equal(got, np.concatenate(prog.expected))
