"""The portable kernels: every step runs the generic loops of its template (templates/generic/), reading its
operands as the schedule holds them."""

from __future__ import annotations

from .. import primitives
from ..ir.schedule import StepIO
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
