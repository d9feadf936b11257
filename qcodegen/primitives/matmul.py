"""MATMUL (TOSA 1.0 §MATMUL): out[n, h, w] = sum over c of (A[n, h, c] - a_zp) * (B[n, c, w] - b_zp).
i8 -> i32, i16 -> i48; zero points only for i8 (the v1.0.1 ERROR_IF has an is_same typo, docs/semantics.md §6.2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .geometry import (
    acc_bits,
    accumulator_check,
    accumulator_context,
    accumulator_ranges,
    operand_interval,
    required_accumulator,
)

_ACC = {"i8": "i32", "i16": "i48"}


@register
class MatMul(Primitive):
    """Inputs A [N, H, C], B [N, C, W] (constant or variable); attrs a_zp, b_zp."""

    name = "MATMUL"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        (n, h, _), (_, _, w) = io.ins[0].shape, io.ins[1].shape
        return [(n, h, w)]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 2 and len(io.outs) == 1, "MATMUL: needs inputs (A, B) and one output")
        a, b = io.ins
        require(len(a.shape) == 3 and len(b.shape) == 3, f"MATMUL: A and B must be rank 3, got {list(a.shape)} "
                                                         f"and {list(b.shape)}")
        require(a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1],
                f"MATMUL: A {list(a.shape)} and B {list(b.shape)} do not match as [N, H, C] x [N, C, W]")
        require(a.dtype == b.dtype and a.dtype.name in _ACC,
                f"MATMUL: A and B must both be i8 or both i16, got {a.dtype} and {b.dtype}")
        acc = _ACC[a.dtype.name]
        require(io.outs[0].dtype.name == acc, f"MATMUL: output type must be {acc}, got {io.outs[0].dtype}")
        for key in ("a_zp", "b_zp"):
            zp = int(io.attrs.get(key, 0))
            if a.dtype.name == "i8":
                require(-128 <= zp <= 127, f"MATMUL: {key} {zp} is outside i8")
            else:
                require(zp == 0, f"MATMUL: {key} must be 0 for {a.dtype} inputs, got {zp}")
        super().check(io)

    @staticmethod
    def zero_points(io: StepIO) -> tuple[int, int]:
        return int(io.attrs.get("a_zp", 0)), int(io.attrs.get("b_zp", 0))

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        a_zp, b_zp = self.zero_points(io)
        acc = np.matmul(args[0].astype(np.int64) - a_zp, args[1].astype(np.int64) - b_zp)
        return [required_accumulator(self.name, acc, np.zeros(1, np.int64), acc_bits(io.outs[0].dtype.name))]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        a_zp, b_zp = self.zero_points(io)
        lo, hi = operand_interval(io.ins[1], in_ranges[1])
        # channels: (n, w) columns of B; terms: its C rows
        cols_lo, cols_hi = (np.moveaxis(v, 2, 1).reshape(-1, v.shape[1]) - b_zp for v in (lo, hi))
        zero = np.zeros(1, np.int64)
        where = "MATMUL" + (f" ({io.step.source})" if io.step.source else "")
        bits = acc_bits(io.outs[0].dtype.name)
        acc, overflow = accumulator_check(where, (cols_lo, cols_hi), (in_ranges[0][0] - a_zp, in_ranges[0][1] - a_zp),
                                          (zero, zero), bits)
        return accumulator_ranges(acc, overflow, bits)

    def macs(self, io: StepIO) -> int:
        return int(np.prod(io.outs[0].shape, dtype=np.int64)) * io.ins[0].shape[2]

    def template_context(self, io: StepIO) -> dict[str, Any]:
        (n, h, c), w = io.ins[0].shape, io.ins[1].shape[2]
        a_zp, b_zp = self.zero_points(io)
        return dict(n=n, h=h, c=c, w=w, a_zp=a_zp, b_zp=b_zp, **accumulator_context(io, io.outs[0].dtype.name))
