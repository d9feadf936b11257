"""SYMMETRIC_LUT (qcodegen extension): an interpolated lookup of |y| mirrored for negative y, the core of
TFLite Micro's int16 LOGISTIC and TANH (which interpolate a 256-entry sigmoid table with 9 or 8 fraction
bits, not TOSA's 513-entry TABLE with 7).

inputs: [y (i32), table (n >= 2 entries, u16 or i16, constant)]; output i16 or i32 with y's shape.
attrs: frac_bits F (0..24), saturation (the value R takes from index n - 1 on), bias, shift (0..62),
neg_offset.
    w = |y|;  h = w >> F;  f = w & (2^F - 1)
    R = saturation                                  if h >= n - 1
        table[h] * 2^F + f * (table[h+1] - table[h])  otherwise
    g = floor((R + bias) / 2^shift)
    out = g if y >= 0 else neg_offset - g
Range analysis proves that every reachable output fits the output type.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from ..errors import GraphError, PlanError
from ..ir.schedule import CONST, StepIO
from .base import Primitive, Ranges, register, require, require_attrs


@dataclass(frozen=True)
class LutParams:
    """The attributes of a SYMMETRIC_LUT step (see the module docstring)."""

    frac_bits: int
    saturation: int
    bias: int
    shift: int
    neg_offset: int

    @classmethod
    def of(cls, io: StepIO) -> LutParams:
        require_attrs(io.attrs, "SYMMETRIC_LUT", (f.name for f in fields(cls)))
        return cls(*(int(io.attrs[f.name]) for f in fields(cls)))


def _core(p: LutParams, table: np.ndarray, w: np.ndarray) -> np.ndarray:
    """R + bias before the shift, for magnitudes w >= 0 (int64)."""
    t = table.astype(np.int64)
    h = w >> p.frac_bits
    inside = h < t.size - 1
    hc = np.where(inside, h, 0)
    interp = t[hc] * (1 << p.frac_bits) + (w & ((1 << p.frac_bits) - 1)) * (t[hc + 1] - t[hc])
    return np.where(inside, interp, p.saturation) + p.bias


def symmetric_lookup(p: LutParams, table: np.ndarray, y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, np.int64)
    g = _core(p, table, np.abs(y)) >> p.shift
    return np.where(y >= 0, g, p.neg_offset - g)


@register
class SymmetricLut(Primitive):
    """inputs: [y, table]; attrs frac_bits, saturation, bias, shift, neg_offset."""

    name = "SYMMETRIC_LUT"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 2 and len(io.outs) == 1, "SYMMETRIC_LUT: needs inputs [y, table] and 1 output")
        super().check(io)
        y, table, out = io.ins[0], io.ins[1], io.outs[0]
        require(y.dtype.name == "i32", f"SYMMETRIC_LUT: input type {y.dtype} is not i32")
        require(out.dtype.name in ("i16", "i32"), f"SYMMETRIC_LUT: output type {out.dtype} is not i16 or i32")
        require(table.dtype.name in ("u16", "i16") and len(table.shape) == 1 and table.shape[0] >= 2,
                f"SYMMETRIC_LUT: table must be a 1-d u16/i16 array of >= 2 entries, got {table.dtype} "
                f"{list(table.shape)}")
        if table.kind != CONST or table.data is None:
            raise GraphError("SYMMETRIC_LUT: the table must be a constant")
        p = LutParams.of(io)
        require(0 <= p.frac_bits <= 24, f"SYMMETRIC_LUT: frac_bits {p.frac_bits} outside [0, 24]")
        require(0 <= p.shift <= 62, f"SYMMETRIC_LUT: shift {p.shift} outside [0, 62]")
        for key, value in (("saturation", p.saturation), ("bias", p.bias), ("neg_offset", p.neg_offset)):
            require(abs(value) < 1 << 40, f"SYMMETRIC_LUT: {key} {value} is out of range")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [symmetric_lookup(LutParams.of(io), args[1], args[0])]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        lo, hi = in_ranges[0]
        table, p = io.ins[1].data, LutParams.of(io)
        w_lo = 0 if lo <= 0 <= hi else min(abs(lo), abs(hi))
        w_hi = max(abs(lo), abs(hi))
        # R is linear inside a segment: its extremes over [w_lo, w_hi] are at segment ends or the range ends
        seg = np.arange(table.size, dtype=np.int64) << p.frac_bits
        ends = np.concatenate([seg, seg - 1, [w_lo, w_hi]])
        ends = ends[(ends >= w_lo) & (ends <= w_hi)]
        g = _core(p, table, ends) >> p.shift
        parts = []
        if hi >= 0:
            parts += [int(g.min()), int(g.max())]
        if lo < 0:
            parts += [p.neg_offset - int(g.max()), p.neg_offset - int(g.min())]
        out = io.outs[0].dtype
        if min(parts) < out.min or max(parts) > out.max:
            raise PlanError(f"SYMMETRIC_LUT: outputs in [{min(parts)}, {max(parts)}] do not fit {out}")
        return Ranges([(min(parts), max(parts))])

    def template_context(self, io: StepIO) -> dict:
        p = LutParams.of(io)
        return dict(asdict(p), entries=io.ins[1].shape[0], mask=(1 << p.frac_bits) - 1)
