"""ARGMAX (TOSA 1.0): i8/i16 -> i32 index of the maximum along `axis` (the axis is removed). The first
maximal index wins, so an all-minimum row gives 0."""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, axis_attr, register, require
from .reduce import axis_split, check_axis

_TYPES = ("i8", "i16")


@register
class ArgMax(Primitive):
    """attrs: axis."""

    name = "ARGMAX"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        shape = io.ins[0].shape
        axis = axis_attr(io)
        return [shape[:axis] + shape[axis + 1:]]

    def check(self, io: StepIO) -> None:
        check_axis("ARGMAX", io.ins[0].shape, axis_attr(io))
        super().check(io)
        x, y = io.ins[0].dtype, io.outs[0].dtype
        require(x.name in _TYPES, f"ARGMAX: input type {x} is not one of {list(_TYPES)}")
        require(y.name == "i32", f"ARGMAX: output type must be i32, got {y}")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [np.argmax(args[0], axis=axis_attr(io)).astype(np.int64)]  # numpy: first maximum

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([(0, io.ins[0].shape[axis_attr(io)] - 1)])

    def template_context(self, io: StepIO) -> dict:
        return axis_split(io.ins[0].shape, axis_attr(io))
