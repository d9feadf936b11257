"""STRIDED_COPY (qcodegen extension): out[i0, i1, ...] = in[offset + i0 * s0 + i1 * s1 + ...] over the flat input.

One data-movement primitive for the strided views TOSA spells with several ops or cannot spell: broadcasting
(stride 0), reversal (negative strides), strided slices (strides > 1) and any mix of them with a permutation.
attrs: offset (int), strides (one int per output dimension, in input elements). Every element read must lie
inside the input. Types as the other data-movement primitives (values are copied unchanged).
"""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .data_movement import Copy
from .elementwise import contiguous_strides, loop_nest

_TYPES = ("bool", "i8", "u8", "i16", "u16", "i32", "f32")


def flat_indices(offset: int, strides: list[int], shape: tuple[int, ...]) -> np.ndarray:
    """The input index read by every output element."""
    idx = np.full(shape, offset, np.int64)
    for k, (s, n) in enumerate(zip(strides, shape, strict=True)):
        view = [1] * len(shape)
        view[k] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(view)
    return idx


@register
class StridedCopy(Primitive):
    """attrs: offset, strides."""

    name = "STRIDED_COPY"

    @staticmethod
    def view(io: StepIO) -> tuple[int, list[int]]:
        """The step's offset and strides."""
        require("offset" in io.attrs and "strides" in io.attrs, "STRIDED_COPY: needs attributes offset and strides")
        return int(io.attrs["offset"]), [int(s) for s in io.attrs["strides"]]

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.outs[0].shape]  # the output shape is free; strides has one entry per output dimension

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1 and len(io.outs) == 1, "STRIDED_COPY: needs one input and one output")
        x, y = io.ins[0], io.outs[0]
        require(x.dtype.name in _TYPES, f"STRIDED_COPY: type {x.dtype} is not one of {list(_TYPES)}")
        require(y.dtype == x.dtype, f"STRIDED_COPY: output type {y.dtype} differs from input type {x.dtype}")
        offset, strides = self.view(io)
        require(len(strides) == len(y.shape), f"STRIDED_COPY: {len(strides)} strides for an output of rank "
                                              f"{len(y.shape)}")
        if y.size:
            idx = flat_indices(offset, strides, y.shape)
            require(int(idx.min()) >= 0 and int(idx.max()) < x.size,
                    f"STRIDED_COPY: reads input elements [{int(idx.min())}, {int(idx.max())}] outside [0, {x.size})")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        idx = flat_indices(*self.view(io), io.outs[0].shape)
        return [args[0].reshape(-1)[idx]]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([in_ranges[0]])

    def template_context(self, io: StepIO) -> dict:
        y, (offset, strides) = io.outs[0], self.view(io)
        nest = loop_nest(y.shape, [strides, contiguous_strides(y.shape)], [offset, 0])
        return dict(copies=[Copy(0, nest)], fill=None)
