"""LOOKUP (qcodegen extension): a full lookup table indexed by the stored value of one or two 8/16-bit inputs.

Unlike TOSA's TABLE (256 entries for i8, an interpolated 513-entry table for i16), every input value has its own
entry, so any function of the stored values is exact: StableHLO's float-defined quantized ops and requantizations
are tabulated at plan time (docs/semantics.md §12.4).

inputs: [x, table] or [a, b, table]; x, a, b of type i8, u8, i16 or u16; the table a constant of the output type
(bool, i8, u8, i16, u16 or i32).
    one input:  out = table[x - min(x.dtype)]                      table shape [n]      (n = 2^bits(x))
                per channel (attr `axis`): out = table[c][x - min]  table shape [C, n]  (c = index along axis)
    two inputs: out = table[(a - min(a.dtype)) * nb + (b - min(b.dtype))], nb = 2^bits(b), TOSA broadcasting
                of a and b; table shape [na * nb], at most 65,536 entries.
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..ir.schedule import CONST, StepIO
from .base import Primitive, Ranges, axis_attr, broadcast_shape, register, require
from .elementwise import broadcast_nest
from .reduce import axis_split

_INDEX_TYPES = ("i8", "u8", "i16", "u16")
_OUT_TYPES = ("bool", "i8", "u8", "i16", "u16", "i32")
MAX_ENTRIES = 1 << 16


def entries(dtype_name: str) -> int:
    return 1 << int(dtype_name[1:])


def _offset(buf) -> int:
    return -buf.dtype.min


@register
class Lookup(Primitive):
    """attrs: axis (optional, one data input only: per-channel tables along this axis)."""

    name = "LOOKUP"

    @staticmethod
    def data(io: StepIO) -> list:
        return io.ins[:-1]

    @staticmethod
    def axis(io: StepIO) -> int | None:
        axis = io.attrs.get("axis")
        return None if axis is None else int(axis) % max(len(io.ins[0].shape), 1)

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        data = self.data(io)
        if len(data) == 1:
            return [data[0].shape]
        return [broadcast_shape(data[0].shape, data[1].shape, self.name)]

    def table_shape(self, io: StepIO) -> tuple[int, ...]:
        data = self.data(io)
        n = int(np.prod([entries(b.dtype.name) for b in data]))
        axis = self.axis(io)
        return (n,) if axis is None else (data[0].shape[axis], n)

    def check(self, io: StepIO) -> None:
        require(len(io.ins) in (2, 3) and len(io.outs) == 1, "LOOKUP: needs inputs [x, table] or [a, b, table] "
                                                            "and one output")
        data, table, y = self.data(io), io.ins[-1], io.outs[0]
        for b in data:
            require(b.dtype.name in _INDEX_TYPES, f"LOOKUP: input type {b.dtype} is not one of {list(_INDEX_TYPES)}")
        require(y.dtype.name in _OUT_TYPES, f"LOOKUP: output type {y.dtype} is not one of {list(_OUT_TYPES)}")
        require(table.dtype == y.dtype, f"LOOKUP: table type {table.dtype} differs from the output type {y.dtype}")
        if "axis" in io.attrs:
            rank = len(data[0].shape)
            require(len(data) == 1 and rank > 0 and -rank <= axis_attr(io) < rank,
                    f"LOOKUP: axis {io.attrs['axis']} needs one input of rank > {io.attrs['axis']}")
        super().check(io)
        require(self.table_shape(io)[-1] <= MAX_ENTRIES, f"LOOKUP: {self.table_shape(io)[-1]} entries exceed "
                                                         f"{MAX_ENTRIES}")
        require(table.shape == self.table_shape(io), f"LOOKUP: table shape {list(table.shape)} must be "
                                                      f"{list(self.table_shape(io))}")
        if table.kind != CONST or table.data is None:
            raise GraphError("LOOKUP: the table must be a constant")

    def _index(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        data = self.data(io)
        idx = args[0].astype(np.int64) + _offset(data[0])
        if len(data) == 2:
            idx = idx * entries(data[1].dtype.name) + (args[1].astype(np.int64) + _offset(data[1]))
        return idx

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        table = args[-1].astype(np.int64)
        idx = self._index(io, args[:-1])
        axis = self.axis(io)
        if axis is None:
            return [table[idx]]
        view = [1] * idx.ndim
        view[axis] = table.shape[0]
        return [table[np.arange(table.shape[0]).reshape(view), idx]]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        table = io.ins[-1].data.astype(np.int64)
        data = self.data(io)
        rows = [np.arange(lo, hi + 1) + _offset(b) for b, (lo, hi) in zip(data, in_ranges, strict=False)]
        idx = rows[0] if len(rows) == 1 else (rows[0][:, None] * entries(data[1].dtype.name) + rows[1][None, :])
        reached = table[..., idx.reshape(-1)]
        return Ranges([(int(reached.min()), int(reached.max()))])

    def template_context(self, io: StepIO) -> dict:
        data = self.data(io)
        axis = self.axis(io)
        ctx = dict(offsets=[_offset(b) for b in data], inputs=len(data),
                   stride=entries(data[1].dtype.name) if len(data) == 2 else 0, per_channel=axis is not None,
                   entries=self.table_shape(io)[-1])
        if len(data) == 2:
            ctx["nest"] = broadcast_nest(StepIO(io.step, data, io.outs))
        elif axis is not None:
            ctx.update(axis_split(data[0].shape, axis))
        return ctx
