"""TABLE (TOSA 1.0): table lookup, the table a constant input.

i8:  256 x i8 table, out (i8) = table[x + 128].
i16: 513 x i16 table, out (i32) = table[idx] * 128 + (table[idx+1] - table[idx]) * frac with
     idx = (x + 32768) >> 7 and frac = x & 0x7F (a 23-bit result). TOSA REQUIRE: the slope fits int16; it is
     checked at plan time for every table segment the input range can reach.
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..fixedpoint import Unpredictable
from ..ir.schedule import CONST, StepIO
from .base import Primitive, Ranges, register, require

# input type -> (table entries, output type)
_LAYOUT = {"i8": (256, "i8"), "i16": (513, "i32")}


def _lookup(io: StepIO, x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The TOSA lookup over int64 inputs; raises Unpredictable when a reached slope leaves int16."""
    t = table.astype(np.int64)
    if io.ins[0].dtype.name == "i8":
        return t[x + 128]
    u = x + 32768
    idx, frac = u >> 7, u & 0x7F
    slope = t[idx + 1] - t[idx]
    if np.any((slope < -32768) | (slope > 32767)):
        bad = int(idx[(slope < -32768) | (slope > 32767)].flat[0])
        raise Unpredictable(f"TABLE: slope table[{bad + 1}] - table[{bad}] does not fit int16 (TOSA REQUIRE)")
    return t[idx] * 128 + slope * frac


@register
class Table(Primitive):
    """inputs: [x, table]; the table must be a constant buffer."""

    name = "TABLE"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 2 and len(io.outs) == 1, "TABLE: needs inputs [x, table] and 1 output")
        super().check(io)
        x, table, y = io.ins[0], io.ins[1], io.outs[0]
        require(x.dtype.name in _LAYOUT, f"TABLE: input type {x.dtype} is not i8 or i16")
        entries, out_type = _LAYOUT[x.dtype.name]
        require(table.dtype == x.dtype, f"TABLE: table type {table.dtype} differs from input type {x.dtype}")
        require(table.shape == (entries,), f"TABLE: {x.dtype} needs a table of shape [{entries}], "
                                           f"got {list(table.shape)}")
        require(y.dtype.name == out_type, f"TABLE: {x.dtype} input gives {out_type} output, got {y.dtype}")
        if table.kind != CONST or table.data is None:
            raise GraphError("TABLE: the table must be a constant")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [_lookup(io, args[0].astype(np.int64), args[1])]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = in_ranges[0]
        out = _lookup(io, np.arange(lo, hi + 1, dtype=np.int64), io.ins[1].data)  # every reachable input
        return Ranges([(int(out.min()), int(out.max()))])

    def template_context(self, io: StepIO) -> dict:
        return dict(interpolate=io.ins[0].dtype.name == "i16")
