"""Data movement (TOSA 1.0): CONCAT, PAD, RESHAPE, TRANSPOSE, SLICE.

Types: bool/i4/i8/i16/i32/i48 as TOSA, plus u8/u16/f32 and i64 (shape values as graph outputs; qcodegen
extension: values are only copied). Every op is a
list of strided copies (a `loop_nest` each, from an input into the output) and, for PAD, a fill of the
output with pad_const first; they share templates/generic/data_movement.c.j2. A copy whose source already lies
where it would go is left out: the memory planner stores a RESHAPE's output and a contiguous SLICE's output in
their input's bytes, and CONCAT inputs where the output holds them (views, qcodegen/plan/memory.py); a step
with nothing left to copy emits no code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.schedule import TEMP, Buffer, StepIO
from .base import Primitive, Ranges, axis_attr, register, require
from .elementwise import LoopNest, c_literal, contiguous_strides, loop_nest

_TYPES = ("bool", "i4", "i8", "u8", "i16", "u16", "i32", "i48", "i64", "f32")


@dataclass(frozen=True)
class Copy:
    """Copy input `input` into the output along `nest` (index 0: input, index 1: output)."""

    input: int
    nest: LoopNest


def _same_types(io: StepIO) -> None:
    dt = io.ins[0].dtype
    require(dt.name in _TYPES, f"{io.step.op}: type {dt} is not one of {list(_TYPES)}")
    for b in io.ins[1:] + io.outs:
        require(b.dtype == dt, f"{io.step.op}: operand types differ ({dt} vs {b.dtype})")


def stored_at(src: Buffer, dst: Buffer, byte_offset: int) -> bool:
    """Whether temporary `src` already lies `byte_offset` bytes into `dst`, in the arena or in the same state's
    memory (copying it there does nothing)."""
    return (src.kind == TEMP and dst.kind == TEMP and src.offset is not None and dst.offset is not None
            and src.home == dst.home and src.offset == dst.offset + byte_offset)


def _union(ranges: list[tuple[int, int]]) -> tuple[int, int]:
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def _ints(io: StepIO, key: str) -> list[int]:
    return [int(v) for v in io.attrs[key]]


class _Movement(Primitive):
    def check(self, io: StepIO) -> None:
        require(len(io.outs) == 1 and len(io.ins) >= 1, f"{self.name}: needs inputs and one output")
        _same_types(io)
        super().check(io)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        return [self.move(io, args)]

    def move(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([_union(in_ranges)])

    def copies(self, io: StepIO) -> list[Copy]:
        raise NotImplementedError

    def template_context(self, io: StepIO) -> dict:
        return dict(copies=self.copies(io), fill=None)


def _copy(index: int, extents: tuple[int, ...], src_strides: list[int], dst_strides: list[int],
          src_base: int = 0, dst_base: int = 0) -> Copy:
    return Copy(index, loop_nest(extents, [src_strides, dst_strides], [src_base, dst_base]))


@register
class Concat(_Movement):
    """attrs: axis. Inputs of one type, equal except along `axis`, stacked in order."""

    name = "CONCAT"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        shape = list(io.ins[0].shape)
        axis = axis_attr(io)
        if 0 <= axis < len(shape):
            shape[axis] = sum(b.shape[axis] for b in io.ins)
        return [tuple(shape)]

    def check(self, io: StepIO) -> None:
        first = io.ins[0].shape
        axis = axis_attr(io)
        require(0 <= axis < len(first), f"CONCAT: axis {axis} out of range for rank {len(first)}")
        for b in io.ins[1:]:
            require(len(b.shape) == len(first) and all(
                x == y for k, (x, y) in enumerate(zip(b.shape, first, strict=True)) if k != axis),
                f"CONCAT: shape {list(b.shape)} does not match {list(first)} outside axis {axis}")
        super().check(io)

    def move(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(args, axis=axis_attr(io))

    def copies(self, io: StepIO) -> list[Copy]:
        axis = axis_attr(io)
        out = io.outs[0]
        out_strides = contiguous_strides(out.shape)
        result, offset = [], 0
        stored = {view: stored_at(io.ins[view], out, at) for view, _, at in self.views(io)}
        for k, b in enumerate(io.ins):
            if not stored.get(k):
                result.append(_copy(k, b.shape, contiguous_strides(b.shape), out_strides,
                                    dst_base=offset * out_strides[axis]))
            offset += b.shape[axis]
        return result

    def views(self, io: StepIO) -> list[tuple[int, int, int]]:
        """Along the outermost non-unit axis each input is one contiguous run of the output."""
        out = io.outs[0]
        if int(np.prod(out.shape[:axis_attr(io)], dtype=np.int64)) != 1:
            return []
        result, at = [], 0
        for k, b in enumerate(io.ins):
            result.append((k, len(io.ins), at))
            at += b.nbytes
        return result


@register
class Pad(_Movement):
    """attrs: padding [lo0, hi0, lo1, hi1, ...] (>= 0), pad_const (default 0; a float for f32 data)."""

    name = "PAD"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        p = _ints(io, "padding")
        return [tuple(d + p[2 * k] + p[2 * k + 1] for k, d in enumerate(io.ins[0].shape))]

    @staticmethod
    def pad_const(io: StepIO) -> float:
        v = io.attrs.get("pad_const", 0)
        return float(np.float32(v)) if io.ins[0].dtype.is_float else int(v)

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1, "PAD: needs one input")
        p = _ints(io, "padding")
        rank = len(io.ins[0].shape)
        require(len(p) == 2 * rank, f"PAD: {len(p)} padding values for rank {rank}")
        require(min(p, default=0) >= 0, f"PAD: negative padding {p}")
        super().check(io)
        dt, c = io.ins[0].dtype, self.pad_const(io)
        require(dt.is_float or dt.min <= c <= dt.max, f"PAD: pad_const {c} outside the {dt} range")

    def move(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        p = _ints(io, "padding")
        widths = [(p[2 * k], p[2 * k + 1]) for k in range(args[0].ndim)]
        return np.pad(args[0], widths, constant_values=np.asarray(self.pad_const(io), args[0].dtype))

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        if io.ins[0].dtype.is_float:
            return Ranges([(0, 0)])  # not tracked for float buffers
        c = self.pad_const(io)
        if io.outs[0].size == io.ins[0].size:
            return Ranges([in_ranges[0]])
        return Ranges([_union([in_ranges[0], (c, c)])])

    def copies(self, io: StepIO) -> list[Copy]:
        x, out_strides = io.ins[0], contiguous_strides(io.outs[0].shape)
        lows = _ints(io, "padding")[0::2]
        base = sum(lo * s for lo, s in zip(lows, out_strides, strict=True))
        return [_copy(0, x.shape, contiguous_strides(x.shape), out_strides, dst_base=base)]

    def template_context(self, io: StepIO) -> dict:
        padded = io.outs[0].size != io.ins[0].size
        return dict(super().template_context(io),
                    fill=c_literal(self.pad_const(io), io.ins[0].dtype) if padded else None)


@register
class Reshape(_Movement):
    """attrs: shape (list, no -1). Runs in place when the planner stores the output in the input's bytes."""

    name = "RESHAPE"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [tuple(_ints(io, "shape"))]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1, "RESHAPE: needs one input")
        shape = _ints(io, "shape")
        require(all(d >= 0 for d in shape), f"RESHAPE: negative dimension in {shape}")
        size = int(np.prod(shape, dtype=np.int64))
        require(size == io.ins[0].size, f"RESHAPE: {list(io.ins[0].shape)} has {io.ins[0].size} elements, "
                                        f"shape {shape} has {size}")
        super().check(io)

    def move(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        return args[0].reshape(_ints(io, "shape"))

    def views(self, io: StepIO) -> list[tuple[int, int, int]]:
        return [(1, 0, 0)]

    def copies(self, io: StepIO) -> list[Copy]:
        if stored_at(io.outs[0], io.ins[0], 0):
            return []
        n = io.ins[0].size
        return [_copy(0, (n,), [1], [1])]


@register
class Transpose(_Movement):
    """attrs: perms (output dimension j is input dimension perms[j])."""

    name = "TRANSPOSE"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [tuple(io.ins[0].shape[p] for p in _ints(io, "perms"))]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1, "TRANSPOSE: needs one input")
        perms = _ints(io, "perms")
        require(sorted(perms) == list(range(len(io.ins[0].shape))),
                f"TRANSPOSE: perms {perms} is not a permutation of the {len(io.ins[0].shape)} dimensions")
        super().check(io)

    def move(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        return np.transpose(args[0], _ints(io, "perms"))

    def copies(self, io: StepIO) -> list[Copy]:
        x, y = io.ins[0], io.outs[0]
        in_strides = contiguous_strides(x.shape)
        return [_copy(0, y.shape, [in_strides[p] for p in _ints(io, "perms")], contiguous_strides(y.shape))]


@register
class Slice(_Movement):
    """attrs: start, size (per dimension; start >= 0, size >= 1, start + size <= extent)."""

    name = "SLICE"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [tuple(_ints(io, "size"))]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 1, "SLICE: needs one input")
        shape, start, size = io.ins[0].shape, _ints(io, "start"), _ints(io, "size")
        require(len(start) == len(shape) and len(size) == len(shape),
                f"SLICE: start {start} / size {size} do not match rank {len(shape)}")
        for k, (b, n, d) in enumerate(zip(start, size, shape, strict=True)):
            require(b >= 0 and n >= 1 and b + n <= d,
                    f"SLICE: dimension {k}: start {b}, size {n} outside extent {d}")
        super().check(io)

    def move(self, io: StepIO, args: list[np.ndarray]) -> np.ndarray:
        return args[0][tuple(slice(b, b + n) for b, n in zip(_ints(io, "start"), _ints(io, "size"),
                                                            strict=True))]

    def copies(self, io: StepIO) -> list[Copy]:
        x, y = io.ins[0], io.outs[0]
        in_strides = contiguous_strides(x.shape)
        base = sum(b * s for b, s in zip(_ints(io, "start"), in_strides, strict=True))
        if any(stored_at(y, x, at) for *_, at in self.views(io)):
            return []
        return [_copy(0, y.shape, in_strides, contiguous_strides(y.shape), src_base=base)]

    def views(self, io: StepIO) -> list[tuple[int, int, int]]:
        """A slice with unit extents before some axis and whole extents after it is one contiguous run."""
        shape, start, size = io.ins[0].shape, _ints(io, "start"), _ints(io, "size")
        axis = next((a for a, n in enumerate(size) if n != 1), len(size) - 1)
        if any(size[a] != shape[a] for a in range(axis + 1, len(shape))):
            return []
        strides = contiguous_strides(shape)
        return [(1, 0, sum(b * s for b, s in zip(start, strides, strict=True)) * io.ins[0].dtype.container_bytes)]
