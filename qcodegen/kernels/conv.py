"""What the kernel choices need to know of a convolution step (CONV2D, DEPTHWISE_CONV2D, or either fused with
the RESCALE of its accumulator: FUSED_CONV), read from the step: typed, so that a family's predicates are plain
Python over named fields."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import primitives
from ..ir.schedule import CONST, Buffer, StepIO
from ..primitives.fused import Requantization, part_ios, requantization
from ..primitives.geometry import WindowLoops
from ..primitives.rescale import exception_arrays
from .names import ArrayNames
from .record import ConstArray, step_array

# The largest gathered window (elements) of templates/generic/conv2d.c.j2: a larger window is summed tap by tap,
# without the `channels` hook (the renderer gives the template this value).
PATCH_LIMIT = 4096


def exception_const_arrays(rq: Requantization, names: ArrayNames) -> dict[str, ConstArray]:
    """The exceptions to the single rounding as the kernels read them (exc_start, exc_acc, exc_value:
    qcodegen/primitives/rescale.py exception_arrays); {} without exceptions."""
    return {key: step_array(names, key, values)
            for key, values in exception_arrays(rq.exceptions, len(rq.multipliers), rq.lo, rq.hi).items()}


@dataclass(frozen=True)
class ConvStep:
    """A convolution step's operands and parameters.

    op: CONV2D or DEPTHWISE_CONV2D (the convolution part of a FUSED_CONV); x, w, b, y: input, weights (OHWI, or
    [KH, KW, C, M] for depthwise), bias and output buffers (y: the step's output, requantized for a FUSED_CONV);
    izp, wzp: zero points; pad_value; m: the depthwise channel multiplier (1 for CONV2D); rows: output channels
    (weight rows); k: a row's length (KH * KW * C) for CONV2D, the window's taps for DEPTHWISE_CONV2D; window:
    Window.loops() (templates/generic/_window.c.j2); rq: the fused requantization or None; widened: range
    analysis could not prove the accumulator in its type (Step.widened): int64 arithmetic, saturated (the portable
    loops only); acc_bytes: the bytes of the portable loops' accumulator type."""

    op: str
    x: Buffer
    w: Buffer
    b: Buffer
    y: Buffer
    izp: int
    wzp: int
    pad_value: int
    m: int
    rows: int
    k: int
    window: WindowLoops
    bias_per_channel: bool
    rq: Requantization | None
    widened: bool
    acc_bytes: int

    @property
    def contiguous(self) -> bool:
        """Output pixel p reads input pixel p alone: a 1x1 window of stride 1 without padding."""
        g = self.window
        return self.direct and (g.sy, g.sx, g.ih, g.iw) == (1, 1, g.oh, g.ow)

    @property
    def pixels(self) -> int:
        return self.window.pixels

    @property
    def taps(self) -> int:
        return self.window.taps

    @property
    def int8(self) -> bool:
        """int8 inputs and weights (not 4-bit, not int16)."""
        return self.x.dtype.name == "i8" and self.w.dtype.name == "i8"

    @property
    def constant_weights(self) -> bool:
        return self.w.kind == CONST and self.w.data is not None

    @property
    def bias_abs_max(self) -> int | None:
        """The largest |bias| (None when the bias is not constant)."""
        if self.b.kind != CONST or self.b.data is None:
            return None
        return int(np.max(np.abs(np.asarray(self.b.data, np.int64)), initial=0))

    @property
    def direct(self) -> bool:
        """CONV2D reads each pixel's window in place (1x1, no padding) instead of gathering it."""
        g = self.window
        return g.kh == 1 and g.kw == 1 and g.all_interior

    @property
    def channels_hook(self) -> bool:
        """CONV2D computes each pixel's output channels as dot products of whole rows (the `channels` hook of
        templates/generic/_dot.c.j2): the window is read in place or gathered (at most PATCH_LIMIT elements)."""
        return self.direct or self.k <= PATCH_LIMIT

    @property
    def gathered(self) -> bool:
        return not self.direct and self.k <= PATCH_LIMIT

    def weight_rows(self) -> np.ndarray:
        """The constant weights as int64 rows: [rows, k] for CONV2D, [taps, channels] for DEPTHWISE_CONV2D."""
        w = np.asarray(self.w.data, np.int64)
        return w.reshape(self.rows, -1) if self.op == "CONV2D" else w.reshape(self.taps, -1)

    def bias_per_row(self) -> np.ndarray:
        """The constant bias of every output channel (a per-tensor bias repeated), int64."""
        return np.broadcast_to(np.asarray(self.b.data, np.int64).reshape(-1), (self.rows,))


def loops_scratch(c: ConvStep, window_rows: str = "", window_length: int = 0) -> int:
    """Bytes of the stack arrays of the generic templates' loops: DEPTHWISE_CONV2D's accumulators of a pixel
    (depthwise_conv2d.c.j2 `acc`); the copies conv2d.c.j2 declares for a CONV2D step's windows (0 when they are read
    in place): `xpad` (window_rows "padded": the image with its padding), `xw` (window_rows "in_place" with windows
    reading padding: a window's rows as in the input), else `xp` (the gathered window, window_length or K elements);
    and `padrow` (a pixel of the pad value) when a window reads padding, unless "padded"."""
    g = c.window
    if c.op == "DEPTHWISE_CONV2D":
        return c.rows * c.acc_bytes
    if not c.gathered:
        return 0
    padrow = 0 if g.all_interior or window_rows == "padded" else g.c
    if window_rows == "padded":
        rows, cols = (g.oh - 1) * g.sy + (g.kh - 1) * g.dy + 1, (g.ow - 1) * g.sx + (g.kw - 1) * g.dx + 1
        elements = rows * cols * g.c
    elif window_rows:
        elements = 0 if g.all_interior else (g.kh - 1) * g.iw * g.c * g.dy + g.kw * g.c
    else:
        elements = window_length or c.k
    return (elements + padrow) * c.x.dtype.container_bytes


def table_scratch(c: ConvStep, runs: bool) -> int:
    """Bytes of the stack arrays of a depthwise step over tables of its taps (templates/cortex-m/_depthwise.c.j2
    table_body): `qc_padrow` (a pixel of the pad value) when a window reads padding, and the int32 sums of a pixel
    (`acc`) when its kernel does not store them (not runs); the tables of a few pointers are not counted."""
    return (0 if c.window.all_interior else c.window.c) + (0 if runs else 4 * c.rows)


def conv_step(io: StepIO) -> ConvStep | None:
    """The ConvStep of a CONV2D, DEPTHWISE_CONV2D or FUSED_CONV step (None for other steps)."""
    conv, rq = io, None
    if io.step.op == "FUSED_CONV":
        conv, rescale = part_ios(io)
        rq = requantization(rescale)
    if conv.step.op not in ("CONV2D", "DEPTHWISE_CONV2D"):
        return None
    ctx = primitives.get(conv.step.op).template_context(conv)
    g = ctx["win"]
    k = g.kh * g.kw * (g.c if conv.step.op == "CONV2D" else 1)
    return ConvStep(conv.step.op, io.ins[0], io.ins[1], io.ins[2], io.outs[0], int(ctx["izp"]), int(ctx["wzp"]),
                    int(ctx["pad_value"]), int(ctx.get("m", 1)), int(ctx["oc"]), k, g, bool(ctx["bias_per_channel"]),
                    rq, bool(ctx.get("widened")), 4 if ctx["acc_ctype"] == "int32_t" else 8)
