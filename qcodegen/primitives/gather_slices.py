"""GATHER_SLICES (qcodegen extension): StableHLO's gather -- slices of `operand` at start positions read from
`start_indices` at run time, each start index clamped so the slice fits (TOSA's GATHER is the special case of rows
of a rank-3 tensor).

inputs: [operand (any data-movement type), start_indices (i8/u8/i16/u16/i32)]
attrs: offset_dims, collapsed_slice_dims, operand_batching_dims, start_indices_batching_dims, start_index_map,
index_vector_dim, slice_sizes -- as StableHLO's gather:
    batch_index  = result_index at the dimensions not in offset_dims
    start        = start_indices[batch_index with ':' inserted at index_vector_dim]
    operand_index[d] = clamp(start[k], 0, dim(operand, d) - slice_sizes[d])   if d = start_index_map[k]
                     + batch_index[j']                                         if d = operand_batching_dims[j]
                     + the next offset_dims coordinate of result_index          unless d is collapsed or batching
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, Ranges, register, require
from .elementwise import contiguous_strides

_TYPES = ("bool", "i8", "u8", "i16", "u16", "i32", "f32")
_INDEX_TYPES = ("i8", "u8", "i16", "u16", "i32")
_KEYS = ("offset_dims", "collapsed_slice_dims", "operand_batching_dims", "start_indices_batching_dims",
         "start_index_map", "slice_sizes")


@dataclass(frozen=True)
class GatherDims:
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...]
    start_indices_batching_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    index_vector_dim: int
    slice_sizes: tuple[int, ...]

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any]) -> GatherDims:
        values = {k: tuple(int(v) for v in attrs.get(k, ())) for k in _KEYS}
        return cls(index_vector_dim=int(attrs["index_vector_dim"]), **values)


def _parts(io: StepIO) -> tuple[GatherDims, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    return GatherDims.from_attrs(io.attrs), io.ins[0].shape, io.ins[1].shape, io.outs[0].shape


def result_shape(g: GatherDims, operand: tuple[int, ...], indices: tuple[int, ...]) -> tuple[int, ...]:
    batch = [d for k, d in enumerate(indices) if k != g.index_vector_dim]
    offsets = [s for d, s in enumerate(g.slice_sizes)
               if d not in g.collapsed_slice_dims and d not in g.operand_batching_dims]
    rank = len(batch) + len(offsets)
    out, b, o = [], iter(batch), iter(offsets)
    for d in range(rank):
        out.append(next(o) if d in g.offset_dims else next(b))
    return tuple(out)


@dataclass(frozen=True)
class _Term:
    """operand_index[d] = clamp(start component, 0, hi) (if `start` is not None) + result coordinate `coord`."""

    start: int | None
    hi: int
    coord: int | None


def _terms(g: GatherDims, operand: tuple[int, ...], indices: tuple[int, ...], rank: int
           ) -> tuple[list[_Term], list[int]]:
    """Per operand dimension its term, and the result dimensions that are batch dimensions (batch dimension j
    indexes the j-th dimension of start_indices other than index_vector_dim)."""
    batch_dims = [d for d in range(rank) if d not in g.offset_dims]
    index_dims = [k for k in range(len(indices)) if k != g.index_vector_dim]  # batch dim j <-> indices dim j
    offset_iter = iter(g.offset_dims)
    terms = []
    for d, size in enumerate(operand):
        start = g.start_index_map.index(d) if d in g.start_index_map else None
        hi = size - g.slice_sizes[d]
        if d in g.operand_batching_dims:
            j = g.start_indices_batching_dims[g.operand_batching_dims.index(d)]
            coord = batch_dims[index_dims.index(j)]
        elif d in g.collapsed_slice_dims:
            coord = None
        else:
            coord = next(offset_iter)
        terms.append(_Term(start, hi, coord))
    return terms, batch_dims


def _start_coords(g: GatherDims, indices: tuple[int, ...], k: int, batch: list) -> tuple:
    """start_indices coordinates of component k for the batch coordinates `batch` (ints or arrays)."""
    coords = list(batch)
    if g.index_vector_dim < len(indices):
        coords.insert(g.index_vector_dim, k)
    return tuple(coords)


def _distinct_in(dims: tuple[int, ...], rank: int) -> bool:
    return len(set(dims)) == len(dims) and all(0 <= d < rank for d in dims)


def _check_dims(g: GatherDims, operand: tuple[int, ...], indices: tuple[int, ...], rank: int) -> None:
    """StableHLO's gather constraints on the dimension numbers (C1-C20 of its specification)."""
    batch_rank = len(indices) - (g.index_vector_dim < len(indices))
    require(_distinct_in(g.offset_dims, rank) and list(g.offset_dims) == sorted(g.offset_dims)
            and rank == len(g.offset_dims) + batch_rank,
            f"GATHER_SLICES: offset_dims {list(g.offset_dims)} for a rank-{rank} result")
    require(_distinct_in(g.collapsed_slice_dims + g.operand_batching_dims, len(operand))
            and len(operand) == len(g.offset_dims) + len(g.collapsed_slice_dims) + len(g.operand_batching_dims),
            f"GATHER_SLICES: collapsed {list(g.collapsed_slice_dims)} and batching {list(g.operand_batching_dims)} "
            f"dimensions for a rank-{len(operand)} operand with {len(g.offset_dims)} offset dimensions")
    require(_distinct_in(g.start_index_map + g.operand_batching_dims, len(operand)),
            f"GATHER_SLICES: start_index_map {list(g.start_index_map)} for a rank-{len(operand)} operand")
    require(_distinct_in(g.start_indices_batching_dims, len(indices))
            and g.index_vector_dim not in g.start_indices_batching_dims
            and len(g.start_indices_batching_dims) == len(g.operand_batching_dims),
            f"GATHER_SLICES: start_indices_batching_dims {list(g.start_indices_batching_dims)}")


@register
class GatherSlices(Primitive):
    name = "GATHER_SLICES"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        g, operand, indices, _ = _parts(io)
        return [result_shape(g, operand, indices)]

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 2 and len(io.outs) == 1,
                "GATHER_SLICES: needs inputs (operand, start_indices) and one output")
        g, operand, indices, _ = _parts(io)
        x, idx, y = io.ins[0], io.ins[1], io.outs[0]
        require(x.dtype.name in _TYPES and y.dtype == x.dtype,
                f"GATHER_SLICES: operand/result types {x.dtype} -> {y.dtype} (one of {list(_TYPES)})")
        require(idx.dtype.name in _INDEX_TYPES,
                f"GATHER_SLICES: index type {idx.dtype} is not one of {list(_INDEX_TYPES)}")
        _check_dims(g, operand, indices, len(io.outs[0].shape))
        require(len(g.slice_sizes) == len(operand),
                f"GATHER_SLICES: {len(g.slice_sizes)} slice sizes for rank {len(operand)}")
        require(all(0 <= s <= d for s, d in zip(g.slice_sizes, operand, strict=True)),
                f"GATHER_SLICES: slice sizes {list(g.slice_sizes)} exceed the operand shape {list(operand)}")
        require(0 <= g.index_vector_dim <= len(indices),
                f"GATHER_SLICES: index_vector_dim {g.index_vector_dim} out of range")
        vector = indices[g.index_vector_dim] if g.index_vector_dim < len(indices) else 1
        require(vector == len(g.start_index_map),
                f"GATHER_SLICES: {len(g.start_index_map)} start_index_map entries for index vectors of {vector}")
        require(all(g.slice_sizes[d] == 1 for d in g.collapsed_slice_dims + g.operand_batching_dims),
                "GATHER_SLICES: collapsed and batching dimensions need slice size 1")
        super().check(io)

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        g, operand, indices, out = _parts(io)
        terms, batch_dims = _terms(g, operand, indices, len(out))
        grid = np.indices(out, dtype=np.int64) if out else np.zeros((0,), np.int64)
        batch = [grid[d] for d in batch_dims]
        starts = [args[1][_start_coords(g, indices, k, batch)].astype(np.int64)
                  for k in range(len(g.start_index_map))]
        coords = []
        for t in terms:
            c = np.zeros(out, np.int64)
            if t.start is not None:
                c = c + np.clip(starts[t.start], 0, t.hi)
            if t.coord is not None:
                c = c + grid[t.coord]
            coords.append(c)
        return [args[0][tuple(coords)]]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        return Ranges([in_ranges[0]])

    def template_context(self, io: StepIO) -> dict:
        g, operand, indices, out = _parts(io)
        terms, batch_dims = _terms(g, operand, indices, len(out))
        idx_strides = contiguous_strides(indices)
        starts = []
        for k in range(len(g.start_index_map)):
            coord = _start_coords(g, indices, k, [f"i{d}" for d in batch_dims])
            starts.append(" + ".join(f"{c} * {s}" for c, s in zip(coord, idx_strides, strict=True)) or "0")
        in_strides = contiguous_strides(operand)
        parts = []
        for t, s in zip(terms, in_strides, strict=True):
            pieces = ([f"qc_clamp32((int32_t)s{t.start}, 0, {t.hi})"] if t.start is not None else []) + (
                [f"i{t.coord}"] if t.coord is not None else [])
            if pieces:
                parts.append(f"({' + '.join(pieces)}) * {s}")
        out_strides = contiguous_strides(out)
        return dict(dims=list(out), starts=starts, in_index=" + ".join(parts) or "0",
                    out_index=" + ".join(f"i{d} * {s}" for d, s in enumerate(out_strides)) or "0")
