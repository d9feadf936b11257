"""REDUCE_ALL and REDUCE_ANY (TOSA 1.0): bool reductions along `axis`, keeping it with size 1. They share
REDUCE_MAX's machinery and template (templates/generic/reduce.c.j2)."""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import Ranges, register
from .reduce import _Reduce


class _BoolReduce(_Reduce):
    types = ("bool",)

    @property
    def template(self) -> str:
        return "reduce.c.j2"

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([in_ranges[0]])


@register
class ReduceAll(_BoolReduce):
    """attrs: axis. out = true when every element along the axis is true."""

    name = "REDUCE_ALL"
    combine = "acc && v"

    def reduce(self, x: np.ndarray, axis: int) -> np.ndarray:
        return np.all(x != 0, axis=axis, keepdims=True)


@register
class ReduceAny(_BoolReduce):
    """attrs: axis. out = true when some element along the axis is true."""

    name = "REDUCE_ANY"
    combine = "acc || v"

    def reduce(self, x: np.ndarray, axis: int) -> np.ndarray:
        return np.any(x != 0, axis=axis, keepdims=True)
