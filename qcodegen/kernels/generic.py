"""The portable kernels: every step runs the generic loops of its template (templates/generic/), reading its
operands as the schedule holds them."""

from __future__ import annotations

from .. import primitives
from ..ir.schedule import StepIO
from .conv import ConvStep, conv_step
from .names import ArrayNames
from .record import KernelChoice

STEP_ATTRIBUTES = ""


def portable(io: StepIO, reason: str = "portable C99 loops", **fields) -> KernelChoice:
    """The generic template's loops for the step."""
    template = primitives.get(io.step.op).template
    if io.step.op == "FUSED_CONV":
        template = primitives.get(io.attrs["parts"][0].op).template
    return KernelChoice(f"c:{template.removesuffix('.c.j2')}", reason, **fields)


def choose(io: StepIO, index: int, names: ArrayNames, layout: str) -> KernelChoice:
    return portable(io)


def conv_or_portable(io: StepIO) -> ConvStep | KernelChoice:
    """The ConvStep a kernel family may run, or the portable choice with the reason it may not: not a convolution,
    or widened by range analysis (int64 accumulators, saturated: the generic hooks of templates/generic/_window.c.j2
    render it)."""
    c = conv_step(io)
    if c is None:
        return portable(io)
    if c.widened:
        return portable(io, "range analysis widened the step: int64 accumulators, saturated")
    return c
