"""Primitive interface and registry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import GraphError
from ..ir.schedule import StepIO, Widening

REGISTRY: dict[str, Primitive] = {}


def register(cls: type[Primitive]) -> type[Primitive]:
    REGISTRY[cls.name] = cls()
    return cls


def get(name: str) -> Primitive:
    try:
        return REGISTRY[name]
    except KeyError:
        raise GraphError(f"unknown primitive {name!r}") from None


@dataclass
class Ranges:
    """Result of range analysis for one step."""

    outputs: list[tuple[int, int]]
    acc: tuple[int, int] | None = None  # bound of the accumulator (reductions), for the report
    widened: Widening | None = None  # the step's arithmetic is not proven in range: int64, saturated (schedule.py)


class Primitive:
    name: ClassVar[str]
    # True when output 0 may be written over input 0's memory (each output element depends only on the
    # input element at the same flat index, read before it is written, and elements are no wider).
    inplace: ClassVar[bool] = False

    def inplace_inputs(self, io: StepIO) -> tuple[int, ...]:
        """The inputs whose memory output 0 may be written over (the memory planner takes the first one that
        dies at this step): input 0 when `inplace`. Element-wise ops whose every input element is read before
        the output element at the same index is written may offer each input of the output's shape."""
        return (0,) if self.inplace else ()

    @property
    def template(self) -> str:
        return f"{self.name.lower()}.c.j2"

    def views(self, io: StepIO) -> list[tuple[int, int, int]]:
        """Data movement that copies nothing when an operand lies inside another: (view, viewed, byte offset)
        triples, operands numbered inputs first, then outputs. The memory planner stores each view `offset`
        bytes into the buffer it views where it can; the step leaves out the copies that already hold."""
        return []

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        """Output shapes implied by the inputs and attributes."""
        raise NotImplementedError

    def check(self, io: StepIO) -> None:
        """Raise GraphError for every TOSA ERROR_IF condition (and shape/dtype inconsistencies)."""
        want = self.infer_shapes(io)
        got = [b.shape for b in io.outs]
        if [tuple(s) for s in want] != got:
            raise GraphError(f"{self.name}: output shapes {got} do not match the expected {want}")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        """The numpy reference: exact integer results (int64 or the buffer dtype)."""
        raise NotImplementedError

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        """Bounds of the output values; raise PlanError when an intermediate could overflow.
        Default: the full range of each output dtype."""
        return Ranges([(b.dtype.min, b.dtype.max) for b in io.outs])

    def macs(self, io: StepIO) -> int:
        return 0

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        """Per-step constant arrays the template needs (e.g. per-channel multipliers), emitted as const."""
        return {}

    def template_context(self, io: StepIO) -> dict[str, Any]:
        """Derived values for the template (loop bounds, flags)."""
        return {}


def full_shape_inputs(io: StepIO) -> tuple[int, ...]:
    """The inputs with the output's shape (not broadcast): those an element-wise loop may write over."""
    return tuple(i for i, b in enumerate(io.ins) if b.shape == io.outs[0].shape)


def axis_attr(io: StepIO) -> int:
    """The step's `axis` attribute (ARGMAX, the reductions, CONCAT, REVERSE, LOOKUP per channel), as an int."""
    require("axis" in io.attrs, f"{io.step.op}: missing attribute 'axis'")
    return int(io.attrs["axis"])


def require(condition: bool, message: str) -> None:
    """An ERROR_IF: raise GraphError with `message` unless `condition` holds."""
    if not condition:
        raise GraphError(message)


def require_attrs(attrs: Mapping[str, object], op: str, keys: Iterable[str]) -> None:
    """A step's attributes hold every key of `keys` (GraphError naming the missing ones otherwise)."""
    missing = [k for k in keys if k not in attrs]
    require(not missing, f"{op}: missing attributes {missing}")


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...], op: str) -> tuple[int, ...]:
    """TOSA broadcasting: equal ranks, each dimension equal or 1."""
    require(len(a) == len(b), f"{op}: operand ranks differ ({list(a)} vs {list(b)})")
    out = []
    for x, y in zip(a, b, strict=True):
        require(x == y or x == 1 or y == 1, f"{op}: shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y))
    return tuple(out)
