"""The portable kernels: every step runs the generic loops of its template (templates/generic/), reading its
operands as the schedule holds them."""

from __future__ import annotations

from collections.abc import Callable, Container

from .. import primitives
from ..ir.schedule import StepIO
from ..primitives.fused import part_ios
from .conv import ConvStep, conv_step, loops_scratch
from .names import ArrayNames
from .record import EwPart, KernelChoice

STEP_ATTRIBUTES = ""


def portable(io: StepIO, reason: str = "portable C99 loops", **fields) -> KernelChoice:
    """The generic template's loops for the step (a convolution's gathered window on the stack)."""
    template = primitives.get(io.step.op).template
    if io.step.op == "FUSED_CONV":
        template = primitives.get(io.attrs["parts"][0].op).template
    c = conv_step(io)
    scratch = loops_scratch(c) if c is not None else 0
    return KernelChoice(f"c:{template.removesuffix('.c.j2')}", reason, stack_scratch=scratch, **fields)


def vector_parts(io: StepIO, ctypes: Container[str], part: Callable[[StepIO], EwPart | None],
                 forms: str) -> tuple[EwPart, ...] | KernelChoice:
    """The parts of an element-wise chain in a vector family's exact forms (`part`: one part's form or None), or the
    portable choice with the reason it may not: an operand not a signed integer of `ctypes`, or a part without a
    form (`forms` says which there are)."""
    if not (io.outs[0].dtype.ctype in ctypes and all(
            b.dtype.ctype in ctypes and b.dtype.name.startswith("i") and not b.dtype.is_packed for b in io.ins)):
        return portable(io, "operands not all signed 8, 16 or 32-bit integers")
    parts = tuple(part(p) for p in part_ios(io))
    if any(p is None for p in parts):
        return portable(io, f"a part without an exact vector form ({forms})")
    return parts


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
