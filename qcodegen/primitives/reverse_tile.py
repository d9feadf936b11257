"""REVERSE and TILE (TOSA 1.0 data movement), as strided copies in templates/generic/data_movement.c.j2.

REVERSE (attr axis): out[.., i, ..] = in[.., n - 1 - i, ..], one copy walking the input backwards along the axis.
TILE (attr multiples): out[i] = in[i % shape1]; one copy over the output seen as [m0, d0, m1, d1, ...] that reads
the input with stride 0 along each repetition dimension.
"""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import axis_attr, register, require
from .data_movement import Copy, _copy, _Movement
from .elementwise import contiguous_strides
from .reduce import check_axis


class _StridedCopy(_Movement):
    @property
    def template(self) -> str:
        return "data_movement.c.j2"


@register
class Reverse(_StridedCopy):
    """attrs: axis."""

    name = "REVERSE"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1, "REVERSE: needs one input")
        check_axis(self.name, io.ins[0].shape, axis_attr(io))
        super().check(io)

    def move(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        return np.flip(args[0], axis=axis_attr(io))

    def copies(self, io: StepIO) -> list[Copy]:
        shape, axis = io.ins[0].shape, axis_attr(io)
        strides = contiguous_strides(shape)
        src = [-s if k == axis else s for k, s in enumerate(strides)]
        return [_copy(0, shape, src, strides, src_base=(shape[axis] - 1) * strides[axis])]


@register
class Tile(_StridedCopy):
    """attrs: multiples (one per dimension, >= 1)."""

    name = "TILE"

    @staticmethod
    def multiples(io: StepIO) -> list[int]:
        return [int(m) for m in io.attrs["multiples"]]

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [tuple(d * m for d, m in zip(io.ins[0].shape, self.multiples(io), strict=False))]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1, "TILE: needs one input")
        shape, multiples = io.ins[0].shape, self.multiples(io)
        require(len(multiples) == len(shape), f"TILE: {len(multiples)} multiples for rank {len(shape)}")
        require(len(io.outs) == 1 and len(io.outs[0].shape) == len(shape),
                f"TILE: output rank must equal the input rank {len(shape)}")
        require(min(multiples, default=1) >= 1, f"TILE: multiples {multiples} must be >= 1")
        super().check(io)

    def move(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        return np.tile(args[0], self.multiples(io))

    def copies(self, io: StepIO) -> list[Copy]:
        shape = io.ins[0].shape
        src, dst = contiguous_strides(shape), contiguous_strides(io.outs[0].shape)
        extents, src_strides, dst_strides = [], [], []
        for d, m, s, o in zip(shape, self.multiples(io), src, dst, strict=True):
            extents += [m, d]
            src_strides += [0, s]
            dst_strides += [d * o, o]
        return [_copy(0, tuple(extents), src_strides, dst_strides)]
