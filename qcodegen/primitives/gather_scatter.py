"""GATHER and SCATTER (TOSA 1.0): rows of values [N, K, C] selected by i32 indices [N, W].

GATHER [values, indices] -> out [N, W * R, C], out[n, w * R + r, :] = values[n, indices[n, w] + r, :] for
r < R = attr row_count (default 1, TOSA GATHER; R > 1 is the 1.1 draft's ROW_GATHER).
SCATTER [values_in, indices, input [N, W, C]] -> out [N, K, C]: values_in, then out[n, indices[n, w], :] =
input[n, w, :].
REQUIREs (unpredictable, checked by the reference on the data): 0 <= index and index + R <= K, and for SCATTER no
row written twice. The C clamps each index into [0, K - R] so that no data can make it read or write outside its
buffers.
Types: i8/i16/i32 values (bool too, a qcodegen extension).
"""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .pointwise import unpredictable_unless

_TYPES = ("bool", "i8", "i16", "i32")


def _indices(op: str, idx: np.ndarray, k: int, rows: int = 1) -> np.ndarray:
    unpredictable_unless((idx >= 0) & (idx <= k - rows), op, f"an index is outside [0, {k - rows}]")
    return idx.astype(np.int64)


class _Rows(Primitive):
    """Shared checks: values [N, K, C] (input 0), indices [N, W] (input 1)."""

    arity: int

    def check(self, io: StepIO) -> None:
        op = self.name
        require(len(io.ins) == self.arity and len(io.outs) == 1,
                f"{op}: needs {self.arity} inputs and 1 output, got {len(io.ins)} and {len(io.outs)}")
        values, indices = io.ins[0], io.ins[1]
        require(len(values.shape) == 3, f"{op}: values must be rank 3 [N, K, C], got {list(values.shape)}")
        require(len(indices.shape) == 2 and indices.shape[0] == values.shape[0],
                f"{op}: indices must be [N, W] with N = {values.shape[0]}, got {list(indices.shape)}")
        require(indices.dtype.name == "i32", f"{op}: indices must be i32, got {indices.dtype}")
        require(values.dtype.name in _TYPES, f"{op}: type {values.dtype} is not one of {list(_TYPES)}")
        for b in io.ins[2:] + io.outs:
            require(b.dtype == values.dtype, f"{op}: operand types differ ({values.dtype} vs {b.dtype})")
        super().check(io)

    @staticmethod
    def row_count(io: StepIO) -> int:
        return int(io.attrs.get("row_count", 1))

    def template_context(self, io: StepIO) -> dict:
        (n, k, c), w = io.ins[0].shape, io.ins[1].shape[1]
        return dict(n=n, k=k, c=c, w=w, rows=self.row_count(io))


@register
class Gather(_Rows):
    """attrs: row_count (default 1)."""

    name = "GATHER"
    arity = 2

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        (n, _, c), w = io.ins[0].shape, io.ins[1].shape[-1]
        return [(n, w * self.row_count(io), c)]

    def check(self, io: StepIO) -> None:
        rows = self.row_count(io)
        require(rows >= 1, f"GATHER: row_count {rows} must be >= 1")
        require(len(io.ins[0].shape) != 3 or rows <= io.ins[0].shape[1],
                f"GATHER: row_count {rows} exceeds the {io.ins[0].shape[1]} rows of the values")
        super().check(io)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        values, idx = args
        rows = self.row_count(io)
        first = _indices(self.name, idx, values.shape[1], rows)
        every = (first[:, :, None] + np.arange(rows)).reshape(first.shape[0], -1)  # [N, W * R]
        return [np.take_along_axis(values, every[:, :, None], axis=1)]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([in_ranges[0]])


@register
class Scatter(_Rows):
    name = "SCATTER"
    arity = 3

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    def check(self, io: StepIO) -> None:
        super().check(io)
        (n, _, c), (_, w), x = io.ins[0].shape, io.ins[1].shape, io.ins[2].shape
        require(x == (n, w, c), f"SCATTER: input must be [N, W, C] = {[n, w, c]}, got {list(x)}")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        values, idx, x = args
        rows = _indices(self.name, idx, values.shape[1])
        unpredictable_unless(all(len(set(r)) == len(r) for r in rows.tolist()), self.name,
                             "a row is written twice")
        out = values.copy()
        np.put_along_axis(out, rows[:, :, None], x, axis=1)
        return [out]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        (vlo, vhi), _, (xlo, xhi) = in_ranges
        return Ranges([(min(vlo, xlo), max(vhi, xhi))])
