"""QUANTIZE (f32 -> integer) and DEQUANTIZE (integer -> f32): qcodegen primitives with the semantics of
docs/semantics.md §12.2 (StableHLO uniform_quantize / uniform_dequantize, MLIR quant.qcast / quant.dcast).

QUANTIZE:   v = x / scale (f32 division); v = v + f32(zero_point) (f32 addition); clamp to
            [f32(qmin), f32(qmax)] with NaN -> qmin; round half to even; convert (then clamp to
            [qmin, qmax] in integers, which only matters for i32 bounds that f32 rounds outward).
DEQUANTIZE: f32(q - zero_point) * scale, the subtraction exact in integers, then one f32 multiply.

Scales and zero points are per tensor, per axis (lists along `axis`), or per block (sub-channel: attr
`block_sizes`, one per dimension, with scale / zero_point arrays shaped shape // block_sizes; the C indexes the
block of each element with literal divisions). The numpy reference computes in
float32 one IEEE operation at a time; the C does the same operations with float variables and is built
with -ffp-contract=off. Bit-exactness assumes IEEE binary32 with FLT_EVAL_METHOD == 0 (SSE, AArch64, Arm
FPU / soft-float; not x87), round-to-nearest for the division, addition and multiplication, and
|q - zero_point| < 2^53 (exact int64 -> float32 conversion through double in numpy).
The C rounds with qc_round_half_even_f32 (exact, rounding-mode independent, no libm); the reference uses
np.rint, the definition.
"""

from __future__ import annotations

import numpy as np

from ..ir.dtypes import F32
from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .elementwise import c_literal
from .reduce import axis_split

_INT_TYPES = ("i4", "u4", "i8", "u8", "i16", "u16", "i32")


class _QuantParams(Primitive):
    """attrs: scale (float, list along `axis`, or array per block), zero_point (int, list or array), axis (with
    list scales), block_sizes (with block arrays)."""

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    @staticmethod
    def blocked(io: StepIO) -> bool:
        return "block_sizes" in io.attrs

    @staticmethod
    def block_sizes(io: StepIO) -> tuple[int, ...]:
        return tuple(int(b) for b in io.attrs["block_sizes"])

    def per_axis(self, io: StepIO) -> bool:
        return not self.blocked(io) and np.ndim(io.attrs["scale"]) == 1

    def axis(self, io: StepIO) -> int:
        rank = len(io.ins[0].shape)
        return int(io.attrs.get("axis", -1)) % rank if self.per_axis(io) else rank

    def params(self, io: StepIO) -> tuple[np.ndarray, np.ndarray]:
        """float32 scales and int64 zero points, one per channel or block (one entry when per tensor), flat."""
        with np.errstate(over="ignore"):  # beyond float32: inf, which the scale checks refuse
            scale = np.asarray(io.attrs["scale"], np.float64).astype(np.float32).reshape(-1)
        zp = np.broadcast_to(np.asarray(io.attrs["zero_point"], np.int64).reshape(-1), scale.shape)
        return scale, zp

    def grid(self, io: StepIO) -> tuple[int, ...]:
        """The block grid (shape // block_sizes) of a sub-channel quantization."""
        return tuple(e // b for e, b in zip(io.ins[0].shape, self.block_sizes(io), strict=True))

    def view(self, io: StepIO, values: np.ndarray) -> np.ndarray:
        """Per-channel or per-block values shaped to broadcast against the data."""
        if self.blocked(io):
            values = values.reshape(self.grid(io))
            for dim, block in enumerate(self.block_sizes(io)):
                values = np.repeat(values, block, axis=dim)
            return values
        if not self.per_axis(io):
            return values.reshape(())
        shape = [1] * len(io.ins[0].shape)
        shape[self.axis(io)] = values.size
        return values.reshape(shape)

    def check_blocks(self, io: StepIO) -> None:
        a, shape = io.attrs, io.ins[0].shape
        blocks = list(self.block_sizes(io))
        require(len(blocks) == len(shape), f"{self.name}: {len(blocks)} block sizes for rank {len(shape)}")
        require(all(b > 0 and e % b == 0 for e, b in zip(shape, blocks, strict=True)),
                f"{self.name}: block sizes {blocks} do not divide the shape {list(shape)}")
        grid = self.grid(io)
        require(np.shape(a["scale"]) == grid, f"{self.name}: scales shaped {list(np.shape(a['scale']))}, expected "
                                              f"{list(grid)} (shape // block_sizes)")
        require(np.ndim(a["zero_point"]) == 0 or np.shape(a["zero_point"]) == grid,
                f"{self.name}: zero points shaped {list(np.shape(a['zero_point']))}, expected {list(grid)}")

    def check_params(self, io: StepIO, storage_lo: int, storage_hi: int) -> None:
        a = io.attrs
        if self.blocked(io):
            self.check_blocks(io)
        elif self.per_axis(io):
            rank = len(io.ins[0].shape)
            axis = int(a.get("axis", -1))
            require(-rank <= axis < rank, f"{self.name}: axis {axis} out of range for rank {rank}")
            n = io.ins[0].shape[axis % rank]
            require(len(a["scale"]) == n, f"{self.name}: {len(a['scale'])} scales for axis {axis} of size {n}")
            require(np.ndim(a["zero_point"]) == 0 or len(a["zero_point"]) == n,
                    f"{self.name}: {np.size(a['zero_point'])} zero points for {n} scales")
        else:
            require(np.ndim(a["scale"]) == 0, f"{self.name}: scale must be a number, a list or block_sizes")
            require(np.ndim(a["zero_point"]) == 0, f"{self.name}: a list of zero points needs a list of scales")
        scale, zp = self.params(io)
        require(bool(np.all(np.isfinite(scale) & (scale > 0))),
                f"{self.name}: every scale must be finite and > 0 in float32, got {a['scale']}")
        require(bool(np.all((zp >= storage_lo) & (zp <= storage_hi))),
                f"{self.name}: zero point {a['zero_point']} outside [{storage_lo}, {storage_hi}]")

    def block_index(self, io: StepIO) -> str:
        """C expression of the block number of flat element i (row-major over the block grid)."""
        shape, grid = io.ins[0].shape, self.grid(io)
        terms = []
        for dim, (extent, block, count) in enumerate(zip(shape, self.block_sizes(io), grid, strict=True)):
            if count == 1:
                continue
            stride = int(np.prod(shape[dim + 1:], dtype=np.int64))
            grid_stride = int(np.prod(grid[dim + 1:], dtype=np.int64))
            term = f"(i / {stride}) % {extent}" if dim else f"i / {stride}"
            terms.append(f"(({term}) / {block}) * {grid_stride}")
        return " + ".join(terms) or "0"

    def template_context(self, io: StepIO) -> dict:
        scale, zp = self.params(io)
        geometry = axis_split(io.ins[0].shape, self.axis(io)) if self.per_axis(io) else {}
        blocked = dict(block_index=self.block_index(io)) if self.blocked(io) else {}
        return dict(geometry, **blocked, per_axis=self.per_axis(io), blocked=self.blocked(io),
                    size=io.ins[0].size, scale=c_literal(scale[0], F32), zp=int(zp[0]))


_ROUNDINGS = {"half_even": "qc_round_half_even_f32", "half_away_from_zero": "qc_round_half_away_f32"}


@register
class Quantize(_QuantParams):
    """f32 -> integer. attrs: scale, zero_point, axis, qmin, qmax (storage range, inside the output type;
    e.g. [-8, 7] for 4-bit data in i8), rounding: "half_even" (default; StableHLO, MLIR quant) or
    "half_away_from_zero" (TFLite's TfLiteRound), nan_value (the result for a NaN input; default qmin),
    zero_point_after_rounding (ONNX QuantizeLinear, onnxruntime's MLAS: v = x / scale clamped to
    [qmin - zp, qmax - zp], rounded, then + zp in integers; default false: zp added in f32 before rounding)."""

    name = "QUANTIZE"

    @staticmethod
    def storage(io: StepIO) -> tuple[int, int]:
        require("qmin" in io.attrs and "qmax" in io.attrs, "QUANTIZE: attributes qmin and qmax are required")
        return int(io.attrs["qmin"]), int(io.attrs["qmax"])

    def check(self, io: StepIO) -> None:
        super().check(io)
        x, y = io.ins[0].dtype, io.outs[0].dtype
        require(x.name == "f32", f"QUANTIZE: input type must be f32, got {x}")
        require(y.name in _INT_TYPES, f"QUANTIZE: output type {y} is not one of {list(_INT_TYPES)}")
        qmin, qmax = self.storage(io)
        nan_value = self.nan_value(io)
        require(qmin <= nan_value <= qmax, f"QUANTIZE: nan_value {nan_value} is outside [{qmin}, {qmax}]")
        require(self.rounding(io) in _ROUNDINGS, f"QUANTIZE: rounding must be one of {sorted(_ROUNDINGS)}")
        require(y.min <= qmin <= qmax <= y.max, f"QUANTIZE: [qmin, qmax] = [{qmin}, {qmax}] is empty or "
                                                f"outside the {y} range")
        self.check_params(io, qmin, qmax)

    def nan_value(self, io: StepIO) -> int:
        return int(io.attrs.get("nan_value", self.storage(io)[0]))

    @staticmethod
    def rounding(io: StepIO) -> str:
        return io.attrs.get("rounding", "half_even")

    @staticmethod
    def zero_point_after_rounding(io: StepIO) -> bool:
        return bool(io.attrs.get("zero_point_after_rounding", False))

    def float_bounds(self, io: StepIO) -> tuple[np.float32, np.float32]:
        qmin, qmax = self.storage(io)
        return np.float32(qmin), np.float32(qmax)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        scale, zp = self.params(io)
        lo, hi = self.float_bounds(io)
        qmin, qmax = self.storage(io)
        x = args[0].astype(np.float32)
        after = self.zero_point_after_rounding(io)
        zp_f32 = self.view(io, zp.astype(np.float32))
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            v = x / self.view(io, scale)
            if after:  # integer bounds minus integer zero points: exact in float32
                lo, hi = (lo - zp_f32).astype(np.float32), (hi - zp_f32).astype(np.float32)
            else:
                v = v + zp_f32
            v = np.where(v >= lo, v, lo)  # NaN -> qmin
            v = np.where(v > hi, hi, v)
            if self.rounding(io) == "half_even":
                r = np.rint(v).astype(np.int64)
            else:  # trunc, then the exact fraction decides (as qc_round_half_away_f32)
                t = np.trunc(v)
                frac = v - t
                r = t.astype(np.int64) + (frac >= np.float32(0.5)) - (frac <= np.float32(-0.5))
        if after:
            r = r + self.view(io, zp)
        return [np.where(np.isnan(x), self.nan_value(io), np.clip(r, qmin, qmax))]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([self.storage(io)])

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        if not (self.per_axis(io) or self.blocked(io)):
            return {}
        scale, zp = self.params(io)
        return {"scale": scale, "zero_point": zp.astype(np.float32)}

    def template_context(self, io: StepIO) -> dict:
        lo, hi = self.float_bounds(io)
        qmin, qmax = self.storage(io)
        _, zp = self.params(io)
        after = self.zero_point_after_rounding(io)
        if after and not (self.per_axis(io) or self.blocked(io)):
            lo, hi = np.float32(lo - np.float32(zp[0])), np.float32(hi - np.float32(zp[0]))
        return dict(super().template_context(io), lo=c_literal(lo, F32), hi=c_literal(hi, F32), after=after,
                    qmin_f32=c_literal(np.float32(qmin), F32), qmax_f32=c_literal(np.float32(qmax), F32),
                    zp_f32=c_literal(np.float32(zp[0]), F32), qmin=qmin, qmax=qmax,
                    int_clamp=float(lo) < qmin or float(hi) > qmax,
                    nan_value=self.nan_value(io) if self.nan_value(io) != qmin else None,
                    round_fn=_ROUNDINGS[self.rounding(io)])


@register
class Dequantize(_QuantParams):
    """integer -> f32. attrs: scale, zero_point, axis."""

    name = "DEQUANTIZE"

    def check(self, io: StepIO) -> None:
        super().check(io)
        x, y = io.ins[0].dtype, io.outs[0].dtype
        require(x.name in _INT_TYPES, f"DEQUANTIZE: input type {x} is not one of {list(_INT_TYPES)}")
        require(y.name == "f32", f"DEQUANTIZE: output type must be f32, got {y}")
        self.check_params(io, x.min, x.max)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        scale, zp = self.params(io)
        diff = args[0].astype(np.int64) - self.view(io, zp)
        with np.errstate(over="ignore"):
            return [diff.astype(np.float32) * self.view(io, scale)]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([(0, 0)])  # not tracked for float buffers

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        if not (self.per_axis(io) or self.blocked(io)):
            return {}
        scale, zp = self.params(io)
        return {"scale": scale, "zero_point": zp.astype(np.int32)}

    def template_context(self, io: StepIO) -> dict:
        x = io.ins[0].dtype
        _, zp = self.params(io)
        fits = x.bits <= 16 or not np.any(zp)  # q - zp fits int32
        return dict(super().template_context(io), diff_type="int32_t" if fits else "int64_t")

