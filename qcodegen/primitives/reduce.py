"""REDUCE_SUM (i32), REDUCE_MAX and REDUCE_MIN (i8/i16/i32), TOSA 1.0: reduce along `axis`, keeping it
with size 1. The C sums in index order in an int32 accumulator; range analysis proves that no partial sum
in that order leaves int32 and reports the accumulator bound, or else widens the step (an int64 accumulator,
the sum saturated to int32: TOSA's result wherever a partial sum overflowing is not a REQUIRE violation)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..fixedpoint import Unpredictable
from ..ir.schedule import StepIO
from .base import Primitive, Ranges, axis_attr, register, require
from .elementwise import I32_MAX, I32_MIN
from .geometry import accumulator_context, accumulator_ranges


def check_axis(op: str, shape: tuple[int, ...], axis: int) -> None:
    """TOSA ERROR_IF(axis < 0 || axis >= rank): negative axes are not accepted."""
    require(0 <= axis < len(shape), f"{op}: axis {axis} out of range for rank {len(shape)}")


def axis_split(shape: tuple[int, ...], axis: int) -> dict[str, int]:
    """View `shape` as [outer, n, inner] around `axis`."""
    return dict(outer=int(np.prod(shape[:axis], dtype=np.int64)), n=shape[axis],
                inner=int(np.prod(shape[axis + 1:], dtype=np.int64)))


class _Reduce(Primitive):
    types: ClassVar[tuple[str, ...]] = ("i8", "i16", "i32")
    # C: accumulator start (`first` = the element at k = 0) and combine expression of `acc`, `v`
    init: ClassVar[str] = "first"
    combine: ClassVar[str]

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        shape = list(io.ins[0].shape)
        axis = axis_attr(io)
        if 0 <= axis < len(shape):
            shape[axis] = 1
        return [tuple(shape)]

    def check(self, io: StepIO) -> None:
        check_axis(self.name, io.ins[0].shape, axis_attr(io))
        super().check(io)
        x, y = io.ins[0].dtype, io.outs[0].dtype
        require(x.name in self.types, f"{self.name}: type {x} is not one of {list(self.types)}")
        require(y == x, f"{self.name}: output type {y} differs from input type {x}")

    def reduce(self, x: np.ndarray, axis: int) -> np.ndarray:
        raise NotImplementedError

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [self.reduce(args[0].astype(np.int64), axis_attr(io))]

    def template_context(self, io: StepIO) -> dict:
        return dict(axis_split(io.ins[0].shape, axis_attr(io)), init=self.init, combine=self.combine,
                    acc_ctype=io.outs[0].dtype.ctype, saturate=None)


@register
class ReduceSum(_Reduce):
    """attrs: axis. i32 only."""

    name = "REDUCE_SUM"
    types = ("i32",)
    init = "0"
    combine = "acc + v"

    def reduce(self, x: np.ndarray, axis: int) -> np.ndarray:
        partial = np.cumsum(x, axis=axis)  # every partial sum in the C order (TOSA REQUIRE on each add)
        if partial.size and (partial.min() < I32_MIN or partial.max() > I32_MAX):
            raise Unpredictable("REDUCE_SUM: a partial sum leaves int32 (TOSA REQUIRE)")
        return x.sum(axis=axis, keepdims=True)

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = in_ranges[0]
        n = io.ins[0].shape[axis_attr(io)]
        acc = (min(0, lo * n), max(0, hi * n))  # partial sums of k <= n terms, and the initial 0
        overflow = None
        if acc[0] < I32_MIN or acc[1] > I32_MAX:
            overflow = (f"REDUCE_SUM: {n} terms in [{lo}, {hi}] can overflow the int32 accumulator "
                        f"(bound [{acc[0]}, {acc[1]}])")
        result = accumulator_ranges((lo * n, hi * n), overflow, 32)
        return Ranges(result.outputs, acc=acc, widened=result.widened)

    def template_context(self, io: StepIO) -> dict:
        return dict(super().template_context(io), **accumulator_context(io, "i32"))

    def macs(self, io: StepIO) -> int:
        return io.ins[0].size


class _Extreme(_Reduce):
    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([in_ranges[0]])


@register
class ReduceMax(_Extreme):
    """attrs: axis."""

    name = "REDUCE_MAX"
    combine = "v > acc ? v : acc"

    def reduce(self, x: np.ndarray, axis: int) -> np.ndarray:
        return x.max(axis=axis, keepdims=True)


@register
class ReduceMin(_Extreme):
    """attrs: axis."""

    name = "REDUCE_MIN"
    combine = "v < acc ? v : acc"

    def reduce(self, x: np.ndarray, axis: int) -> np.ndarray:
        return x.min(axis=axis, keepdims=True)
