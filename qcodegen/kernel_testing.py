"""Helpers for the tests of the kernel families (runtime/<isa>/, qcodegen/kernels/<family>/; tests/test_*kernels.py):
a C program that calls kernels on given operands and collects their results, the numpy references (the primitives'
own) of what the kernels compute on the same operands, and convolution schedules whose kernel choices a test reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import primitives
from .ir.dtypes import dtype
from .ir.schedule import CONST, INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from .plan.fuse import fuse_conv_rescale
from .testing import Const, Var, prepare, step_schedule

I32 = np.int64  # expected values are compared as int64 (the program's results are int32)


class KernelProgram:
    """C statements calling kernels, each copying its results (as int32) into qc_out; the expected values. The
    program's main(argc, argv) writes qc_out to the file argv[1] (little-endian int32) and returns 0."""

    def __init__(self, headers: tuple[str, ...]) -> None:
        self.headers = headers
        self.decls: list[str] = []
        self.body: list[str] = []
        self.expected: list[np.ndarray] = []
        self.size = 0

    def array(self, ctype: str, values, const: bool = True) -> str:
        """A static array of `values` (16-byte aligned), its C name."""
        name = f"a{len(self.decls)}"
        flat = [int(v) for v in np.asarray(values).reshape(-1)] or [0]
        items = ", ".join("(-2147483647 - 1)" if v == -(1 << 31) else f"INT64_C({v})" if ctype == "int64_t" else str(v)
                          for v in flat)
        self.decls.append(f"static {'const ' if const else ''}{ctype} {name}[{len(flat)}] "
                          f"__attribute__((aligned(16))) = {{{items}}};")
        return name

    def check(self, statements: str, results: str, expected: np.ndarray) -> None:
        """Run `statements`, then copy the `expected.size` values of the C array `results` into qc_out."""
        n = int(expected.size)
        self.body.append(f"{{\n{statements}\n  for (int32_t i = 0; i < {n}; ++i) qc_out[{self.size} + i] = "
                         f"{results}[i];\n}}")
        self.expected.append(np.asarray(expected, I32).reshape(-1))
        self.size += n

    def source(self) -> str:
        return "\n".join(['#include <stdio.h>', *[f'#include "{h}"' for h in self.headers], *self.decls,
                          f"static int32_t qc_out[{max(self.size, 1)}];",
                          "int main(int argc, char **argv) {", "  (void)argc;", *self.body,
                          '  FILE *f = fopen(argv[1], "wb");',
                          f"  if (!f || fwrite(qc_out, 4, {self.size}, f) != {self.size}) return 1;",
                          "  return fclose(f) != 0;", "}", ""])

    def mismatches(self, got: np.ndarray) -> str:
        """"" when `got` (the program's qc_out) equals the expected values element for element, else what differs."""
        expected = np.concatenate(self.expected)
        if got.shape != expected.shape:
            return f"{got.size} values, expected {expected.size}"
        bad = np.flatnonzero(got != expected)
        if bad.size == 0:
            return ""
        return (f"{bad.size} of {expected.size} values differ; first at {bad[0]}: expected {expected[bad[0]]}, "
                f"got {got[bad[0]]}")


def conv_accumulators(x: np.ndarray, w: np.ndarray, bias: np.ndarray, izp: int) -> np.ndarray:
    """CONV2D (1x1, the pixels as a row) of x [P, k] and weights [rows, k]: [P, rows] int32 accumulators."""
    pixels, k = x.shape
    sched = step_schedule("CONV2D", [Var((1, 1, pixels, k), "i8"), Const(w.reshape(-1, 1, 1, k), "i8"),
                                     Const(bias, "i32")], [((1, 1, pixels, w.shape[0]), "i32")],
                          pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=izp, weight_zp=0, acc_type="i32")
    io = sched.io(sched.steps[0])
    args = [x.reshape(1, 1, pixels, k).astype(np.int8), w.reshape(-1, 1, 1, k).astype(np.int8), bias.astype(np.int32)]
    return primitives.get("CONV2D").reference(io, args)[0].reshape(pixels, -1)


def depthwise_accumulators(x: np.ndarray, w: np.ndarray, bias: np.ndarray, izp: int, stride: tuple[int, int] = (1, 1),
                           pad: tuple[int, int, int, int] = (0, 0, 0, 0), dilation: tuple[int, int] = (1, 1),
                           pad_value: int | None = None) -> np.ndarray:
    """DEPTHWISE_CONV2D (multiplier 1) of x [1, H, W, C] and w [KH, KW, C] (pad: top, bottom, left, right; pad_value:
    what a tap outside the input reads, izp by default): [1, OH, OW, C] int32 accumulators."""
    kh, kw, c = w.shape
    oh = (x.shape[1] + pad[0] + pad[1] - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (x.shape[2] + pad[2] + pad[3] - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    attrs = dict(pad=list(pad), stride=list(stride), dilation=list(dilation), input_zp=izp, weight_zp=0,
                 acc_type="i32", pad_value=izp if pad_value is None else pad_value)
    sched = step_schedule("DEPTHWISE_CONV2D", [Var(x.shape, "i8"), Const(w.reshape(kh, kw, c, 1), "i8"),
                                               Const(bias, "i32")], [((1, oh, ow, c), "i32")], **attrs)
    args = [x.astype(np.int8), w.reshape(kh, kw, c, 1).astype(np.int8), bias.astype(np.int32)]
    return primitives.get("DEPTHWISE_CONV2D").reference(sched.io(sched.steps[0]), args)[0]


@dataclass(frozen=True)
class DepthwiseRow:
    """A random int8 depthwise case (multiplier 1, no padding) and the first row of its output, as the row kernels
    compute it: x [1, KH + stride, W, C] (its first pixel 127), w [KH, KW, C], bias, acc [pixels, C], the taps
    [KH * KW, C] (as I32) and their offsets from a pixel's window start in x."""

    x: np.ndarray
    w: np.ndarray
    bias: np.ndarray
    acc: np.ndarray
    taps: np.ndarray
    offsets: list[int]


def depthwise_row(rng: np.random.Generator, c: int, kernel: tuple[int, int], stride: int, pixels: int,
                  izp: int, wmin: int = -128) -> DepthwiseRow:
    """Weights in [wmin, 127]; wmin > -128: channel 0's weights all wmin and input row 1 all -128, the largest
    products (|x w| = 128 |wmin|) on every tap of that row."""
    kh, kw = kernel
    x = rng.integers(-128, 128, (1, kh + stride, (pixels - 1) * stride + kw, c))
    x[0, 0] = 127
    w = rng.integers(wmin, 128, (kh, kw, c))
    if wmin > -128:
        x[0, 1] = -128
        w[..., 0] = wmin
    bias = rng.integers(-(1 << 20), 1 << 20, c)
    acc = depthwise_accumulators(x, w, bias, izp, (stride, stride))[0, 0]
    offsets = [(ky * x.shape[2] + kx) * c for ky in range(kh) for kx in range(kw)]
    return DepthwiseRow(x, w, bias, acc, w.reshape(kh * kw, c).astype(I32), offsets)


def rescale(acc: np.ndarray, mults, shifts, rounding: str, zp: int, lo: int, hi: int, out: str = "i8") -> np.ndarray:
    """RESCALE (scale32) of int32 accumulators [..., channels] to `out` (per channel when several multipliers)."""
    sched = step_schedule("RESCALE", [Var(acc.shape, "i32")], [(acc.shape, out)], multiplier=list(mults),
                          shift=list(shifts), input_zp=0, output_zp=zp, scale32=True, rounding=rounding,
                          per_channel=len(mults) > 1, out_min=lo, out_max=hi)
    return primitives.get("RESCALE").reference(sched.io(sched.steps[0]), [acc.astype(np.int32)])[0]


def conv_schedule(op: str, x_shape, w: np.ndarray, bias: np.ndarray, y_shape, y_dtype: str = "i8",
                  izp: int = -128, wzp: int = 0, mults=(1 << 30,), shifts=(38,), rounding: str = "double_round",
                  exceptions=(), **conv) -> Schedule:
    """op over int8 x (constant weights, i32 bias), its accumulator requantized to y_dtype (fused: FUSED_CONV), or
    stored as i32 (y_dtype "i32"); exceptions: the RESCALE's (channel, accumulator, value) triples."""
    sched = Schedule("t")
    acc = "y" if y_dtype == "i32" else "acc"
    for name, shape, dt, kind, values in [("x", x_shape, "i8", INPUT, None), ("w", w.shape, "i8", CONST, w),
                                          ("b", bias.shape, "i32", CONST, bias), ("acc", y_shape, "i32", TEMP, None),
                                          ("y", y_shape, y_dtype, OUTPUT, None)]:
        if name != "acc" or acc == "acc":
            sched.add_buffer(Buffer(name, tuple(shape), dtype(dt), kind, values))
    sched.inputs, sched.outputs = ["x"], ["y"]
    attrs = dict(dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1]), **conv)
    sched.steps = [Step(op, ["x", "w", "b"], [acc], dict(attrs, input_zp=izp, weight_zp=wzp, acc_type="i32"), "c")]
    if acc == "acc":
        sched.steps.append(Step("RESCALE", ["acc"], ["y"], dict(
            multiplier=list(mults), shift=list(shifts), input_zp=0, output_zp=3 if y_dtype == "i8" else 0,
            scale32=True, rounding=rounding, per_channel=len(mults) > 1,
            **({"exceptions": [list(e) for e in exceptions]} if exceptions else {})), "r"))
        fuse_conv_rescale(sched)
    return prepare(sched)
