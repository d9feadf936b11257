"""Fused steps: a short chain of primitive steps computed by one C function, so that the intermediate buffers
never reach memory. The planner's fusion passes (qcodegen/plan/fuse.py) build them.

A fused step's attrs hold `parts`, the original steps in order, whose operands are named "in<i>" / "out0"
(the fused step's own operands, by position) or "t<k>" (intermediates, described by `internal`: name ->
Buffer), and `steps`, the indices of those steps in the schedule. Everything but the C is the parts' own code:
the numpy reference runs the parts' references one after the other, range analysis chains their value_ranges
(raising as they would), and `check` is the parts' checks, so a fused step means exactly what its parts mean,
bit for bit. The schedule keeps the parts as its steps (see qcodegen/plan/fuse.py).

FUSED_CONV: CONV2D or DEPTHWISE_CONV2D (i32 accumulator), then a RESCALE of the accumulator (per tensor or per
output channel, 32-bit scale): the convolution template requantizes each accumulator as it stores it.
FUSED_ELEMENTWISE: element-wise steps over one shape (RESCALE per tensor, CLAMP, the binary and point-wise
integer ops without broadcasting), one loop computing every part per element in int64 locals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GraphError
from ..ir.rescale import RescaleParams
from ..ir.schedule import Buffer, Step, StepIO
from .base import Primitive, Ranges, full_shape_inputs, get, register, require
from .elementwise import _Binary
from .pointwise import Pointwise


def operand_names(io: StepIO) -> dict[str, Buffer]:
    """The buffers the parts' operand names stand for."""
    names = {f"in{i}": b for i, b in enumerate(io.ins)}
    names.update({f"out{i}": b for i, b in enumerate(io.outs)})
    names.update(io.attrs["internal"])
    return names


def part_ios(io: StepIO) -> list[StepIO]:
    bufs = operand_names(io)
    return [StepIO(p, [bufs[n] for n in p.inputs], [bufs[n] for n in p.outputs]) for p in io.attrs["parts"]]


class Fused(Primitive):
    """attrs: parts (list of Step), internal (dict name -> Buffer), steps (schedule indices of the parts)."""

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.outs[0].shape]

    def check(self, io: StepIO) -> None:
        require(len(io.outs) == 1, f"{self.name}: needs exactly one output")
        parts = io.attrs.get("parts") or []
        require(len(parts) >= 2, f"{self.name}: needs at least two parts")
        produced = {f"in{i}" for i in range(len(io.ins))}
        for part in part_ios(io):
            require(all(n in produced for n in part.step.inputs),
                    f"{self.name}: part {part.step.op} reads an operand no earlier part computes")
            get(part.step.op).check(part)
            produced.update(part.step.outputs)
        require(parts[-1].outputs == ["out0"], f"{self.name}: the last part must compute out0")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        values = {f"in{i}": a for i, a in enumerate(args)}
        for part in part_ios(io):
            results = get(part.step.op).reference(part, [values[n] for n in part.step.inputs])
            for name, buf, res in zip(part.step.outputs, part.outs, results, strict=True):
                values[name] = np.asarray(res).astype(buf.dtype.numpy)
        return [values["out0"]]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        ranges = {f"in{i}": r for i, r in enumerate(in_ranges)}
        acc = None
        for part in part_ios(io):
            result = get(part.step.op).value_ranges(part, [ranges[n] for n in part.step.inputs])
            ranges.update(zip(part.step.outputs, result.outputs, strict=True))
            acc = acc or result.acc
        return Ranges([ranges["out0"]], acc=acc)

    def macs(self, io: StepIO) -> int:
        return sum(get(p.step.op).macs(p) for p in part_ios(io))

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        return {f"p{k}_{key}": v for k, p in enumerate(part_ios(io))
                for key, v in get(p.step.op).constants(p).items()}


@dataclass(frozen=True)
class Requantization:
    """How C applies a RESCALE to one value (a FUSED_CONV's accumulator, a FUSED_ELEMENTWISE part): the C scale
    function of its rounding (qc_scale32_single, qc_scale32_double(_gt31), qc_scale32_half_even, qc_scale16),
    per channel or not, the multipliers and shifts (one per channel, or one), zero points and output bounds, and
    the accumulators that are exceptions to its single rounding ((channel, accumulator, value); the step's exc_*
    constants: the template's stores compare each accumulator with its channel's; a kernel that requantizes inside
    takes them itself (Cortex-M mode 3, AArch64 qc_neon_except) or is not chosen).
    Templates read it by attribute; target kernel choices read it to pick exact cheaper forms."""

    fn: str
    per_channel: bool
    scale32: bool
    multipliers: tuple[int, ...]
    shifts: tuple[int, ...]
    input_zp: int
    output_zp: int
    lo: int
    hi: int
    exceptions: tuple[tuple[int, int, int], ...] = ()

    @property
    def multiplier(self) -> int:
        """The multiplier of a per-tensor scale (the first channel's otherwise)."""
        return self.multipliers[0]

    @property
    def shift(self) -> int:
        return self.shifts[0]

    @property
    def min_shift(self) -> int:
        """The smallest shift (for target kernels exact only above some shift)."""
        return min(self.shifts)


def requantization(rescale: StepIO) -> Requantization:
    """The Requantization of a RESCALE step."""
    ctx = get("RESCALE").template_context(rescale)
    r = RescaleParams.from_attrs(rescale.attrs)
    return Requantization(ctx["scale_fn"], bool(ctx["per_channel"]), bool(ctx["scale32"]), r.multiplier, r.shift,
                          r.input_zp, r.output_zp, int(ctx["lo"]), int(ctx["hi"]), r.exceptions)


def fusable_rescale(rescale: StepIO, channel_axis_last: bool) -> bool:
    """A RESCALE a fused template can apply: signed in and out, not half-even (whose ties the golden checks
    trace), per tensor or (when allowed) per channel on the last axis; with exceptions only where channels are
    allowed (the convolutions' stores)."""
    try:
        get("RESCALE").check(rescale)
    except GraphError:
        return False
    p = get("RESCALE").params(rescale)
    if p["in_unsigned"] or p["out_unsigned"] or p["rounding"].value == "half_even":
        return False
    if RescaleParams.from_attrs(rescale.attrs).exceptions and not channel_axis_last:
        return False
    if p["per_channel"]:
        return channel_axis_last and p["axis"] == len(rescale.ins[0].shape) - 1
    return len(RescaleParams.from_attrs(rescale.attrs).multiplier) == 1


@register
class FusedConv(Fused):
    """parts: [CONV2D | DEPTHWISE_CONV2D (in0, in1, in2 -> t0), RESCALE (t0 -> out0)]."""

    name = "FUSED_CONV"

    def check(self, io: StepIO) -> None:
        super().check(io)
        conv, rescale = part_ios(io)
        require(conv.step.op in ("CONV2D", "DEPTHWISE_CONV2D") and rescale.step.op == "RESCALE",
                "FUSED_CONV: parts must be a convolution and a RESCALE")
        require(conv.step.inputs == ["in0", "in1", "in2"] and rescale.step.inputs == conv.step.outputs,
                "FUSED_CONV: the RESCALE must read the convolution's accumulator")
        require(conv.outs[0].dtype.name == "i32" and fusable_rescale(rescale, True),
                "FUSED_CONV: needs an i32 accumulator and a signed, per-tensor or last-axis RESCALE")

    def template_context(self, io: StepIO) -> dict[str, Any]:
        conv, rescale = part_ios(io)
        prim = get(conv.step.op)
        return dict(prim.template_context(conv), inner=prim.template, rq=requantization(rescale))


def scalar_expr(part: StepIO) -> str | None:
    """C expression of one element of an element-wise part, in terms of its int64 operands `a`, `b`, `c`, or
    None when the part is not element-wise over equal shapes."""
    prim = get(part.step.op)
    if any(b.shape != part.outs[0].shape for b in part.ins):
        return None
    if part.step.op == "RESCALE" and fusable_rescale(part, False):
        rq = requantization(part)
        value = f"(a - ({rq.input_zp}))"
        scaled = (f"{rq.fn}((int32_t){value}, {rq.multiplier}, {rq.shift})" if rq.scale32 else
                  f"{rq.fn}({value}, (int16_t)({rq.multiplier}), {rq.shift})")
        return f"qc_clamp64((int64_t){scaled} + ({rq.output_zp}), {rq.lo}LL, {rq.hi}LL)"
    if part.step.op == "CLAMP" and not part.ins[0].dtype.is_float:
        lo, hi = (int(v) for v in get("CLAMP").bounds(part))
        return f"qc_clamp64(a, {lo}LL, {hi}LL)"
    if isinstance(prim, _Binary | Pointwise) and part.outs[0].dtype.name in ("i8", "i16", "i32"):
        return f"({part.outs[0].dtype.ctype})({prim.c_expr(part)})"
    return None


@register
class FusedElementwise(Fused):
    """parts: element-wise steps over one shape (scalar_expr), the last computing out0."""

    name = "FUSED_ELEMENTWISE"

    def inplace_inputs(self, io: StepIO) -> tuple[int, ...]:
        return full_shape_inputs(io)  # every input element is read before the output element is stored

    def check(self, io: StepIO) -> None:
        super().check(io)
        for part in part_ios(io):
            require(scalar_expr(part) is not None,
                    f"FUSED_ELEMENTWISE: part {part.step.op} is not element-wise over the output shape")

    def template_context(self, io: StepIO) -> dict[str, Any]:
        parts = [dict(out=p.step.outputs[0], expr=scalar_expr(p), args=list(zip("abc", p.step.inputs, strict=False)),
                      **part_context(p)) for p in part_ios(io)]
        return dict(size=io.outs[0].size, parts=parts)


def part_context(part: StepIO) -> dict[str, Any]:
    """What a vectorizing `elementwise` hook (templates/generic/_dot.c.j2) needs of a part besides its scalar
    expression: op, out_ctype, and rq (RESCALE: a Requantization) or lo/hi (CLAMP)."""
    ctx: dict[str, Any] = dict(op=part.step.op, out_ctype=part.outs[0].dtype.ctype)
    if part.step.op == "RESCALE":
        ctx["rq"] = requantization(part)
    elif part.step.op == "CLAMP":
        ctx["lo"], ctx["hi"] = (int(v) for v in get("CLAMP").bounds(part))
    return ctx


def fused_step(op: str, parts: list[Step], internal: dict[str, Buffer], inputs: list[str], output: str,
               source: str) -> Step:
    return Step(op, inputs, [output], dict(parts=parts, internal=internal), source)
