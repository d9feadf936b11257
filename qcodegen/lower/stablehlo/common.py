"""Helpers shared by the StableHLO lowering rules (qcodegen/lower/stablehlo/): operand checks, lookup tables
of the interpreter's float formulas, requantization, and data movement that folds on constants.

Requantization (uniform_quantize quantized -> quantized, docs/semantics.md §12.4): storage of at most 8 bits (any
granularity) or 16 bits (per tensor) goes through a full LOOKUP table of the interpreter's merged formula; wider
storage through RESCALE_F32_AFFINE, the same float32 formula emulated exactly with integers. Both are exact by
construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import UnsupportedError
from ...fixedpoint import Rounding, scale_to_multiplier_shift
from ...ir.dtypes import DType
from ...ir.graph import Op, Tensor
from ...ir.quant import QuantType
from ...ir.schedule import CONST
from ...primitives.strided_copy import flat_indices
from ...semantics import stablehlo as sem
from ..base import Lowerer
from ..common import reshape


def operands(lw: Lowerer, op: Op, n_in: int | tuple[int, ...], n_out: int = 1) -> tuple[list[Tensor], list[Tensor]]:
    counts = (n_in,) if isinstance(n_in, int) else n_in
    if len(op.inputs) not in counts or len(op.outputs) != n_out:
        raise lw.error(f"expects {' or '.join(map(str, counts))} operand(s) and {n_out} result(s), got "
                       f"{len(op.inputs)} and {len(op.outputs)}")
    return [lw.tensor_in(i) for i in range(len(op.inputs))], [lw.tensor_out(i) for i in range(n_out)]


def per_tensor(lw: Lowerer, t: Tensor) -> QuantType:
    """The per-tensor quantization of a quantized operand."""
    if t.quant is None:
        raise UnsupportedError(f"{lw.label}: operand {t.name!r} is not quantized; qcodegen compiles quantized "
                               "StableHLO programs (integer and float ops outside the quantized data path are "
                               "not supported)")
    if t.quant.kind != "per_tensor":
        raise UnsupportedError(f"{lw.label}: {t.quant.kind} quantization of {t.name!r} is not supported here")
    return t.quant


def table_inputs(lw: Lowerer, *tensors: Tensor) -> None:
    """Tensors that index a lookup table: 8/16-bit storage, at most 65,536 entries in all."""
    bits = 0
    for t in tensors:
        if t.dtype.name not in ("i8", "u8", "i16", "u16"):
            raise UnsupportedError(f"{lw.label}: {t.dtype} operand {t.name!r} cannot index a lookup table "
                                   "(8/16-bit storage only)")
        bits += t.dtype.bits
    if bits > 16:
        raise UnsupportedError(f"{lw.label}: a table over {' x '.join(str(t.dtype) for t in tensors)} operands "
                               "would exceed 65,536 entries")


def lookup(lw: Lowerer, inputs: list[str], table: np.ndarray, dst: str, out: DType, axis: int | None = None) -> None:
    """dst = table[inputs] (LOOKUP; TOSA's TABLE when an i8 input maps to i8 per tensor)."""
    kinds = [lw.schedule.buffers[n].dtype.name for n in inputs]
    table_name = lw.const(f"{dst}_table", np.asarray(table, np.int64), out)
    tosa = kinds == ["i8"] and out.name == "i8" and axis is None
    lw.emit("TABLE" if tosa else "LOOKUP", inputs + [table_name], [dst], **({} if axis is None else {"axis": axis}))


def copy(lw: Lowerer, src: str, dst: str) -> None:
    """dst = src (a RESHAPE to the same shape: no code when the memory planner shares the slot)."""
    lw.emit("RESHAPE", [src], [dst], shape=list(lw.schedule.buffers[src].shape))


def output_permutation(d: Any, k: int) -> list[int]:
    """The permutation from a channels-last [N, spatial (k)..., C] result to the dimension order of a convolution's
    output (d: its ConvDimensionNumbers)."""
    perm = [0] * (k + 2)
    perm[d.output_batch_dimension] = 0
    for i, dim in enumerate(d.output_spatial_dimensions):
        perm[dim] = 1 + i
    perm[d.output_feature_dimension] = k + 1
    return perm


def place(lw: Lowerer, src: str, y: Tensor, perm: list[int]) -> None:
    """y = src transposed by `perm` (a copy when `perm` is the identity)."""
    if perm == sorted(perm):
        copy(lw, src, y.name)
    else:
        lw.emit("TRANSPOSE", [src], [y.name], perms=perm)


def is_const(lw: Lowerer, name: str) -> bool:
    return lw.schedule.buffers[name].kind == CONST


def permute(lw: Lowerer, name: str, perm: Sequence[int]) -> str:
    """`name` transposed by `perm` (folded for constants)."""
    perm = list(perm)
    if perm == sorted(perm):
        return name
    buf = lw.schedule.buffers[name]
    if buf.kind == CONST:
        return lw.const(f"{name}_t", np.transpose(buf.data, perm), buf.dtype)
    tmp = lw.temp(f"{name}_t", tuple(buf.shape[p] for p in perm), buf.dtype)
    lw.emit("TRANSPOSE", [name], [tmp], perms=perm)
    return tmp


def reshaped(lw: Lowerer, name: str, shape: Sequence[int]) -> str:
    """`name` viewed with `shape` (folded for constants)."""
    buf = lw.schedule.buffers[name]
    if buf.kind == CONST and buf.shape != tuple(shape):
        return lw.const(f"{name}_r", buf.data.reshape(shape), buf.dtype)
    return reshape(lw, name, tuple(shape))


def strided(lw: Lowerer, name: str, offset: int, strides: Sequence[int], shape: Sequence[int], base: str) -> str:
    """A STRIDED_COPY view of `name` (see qcodegen/primitives/strided_copy.py), folded for constants."""
    buf = lw.schedule.buffers[name]
    if buf.kind == CONST:
        return lw.const(base, buf.data.reshape(-1)[flat_indices(offset, list(strides), tuple(shape))], buf.dtype)
    tmp = lw.temp(base, tuple(shape), buf.dtype)
    lw.emit("STRIDED_COPY", [name], [tmp], offset=int(offset), strides=[int(s) for s in strides])
    return tmp


# ------------------------------------------------------------------------------------------ requantization


def _channel_axis(*quants: QuantType) -> int | None:
    for q in quants:
        if q.kind == "per_axis":
            return q.axis
        if q.kind != "per_tensor":
            raise UnsupportedError(f"{q.kind} quantization is not supported here")
    return None


def rescale_i32(lw: Lowerer, src: str, q_src: QuantType, dst: str, q_dst: QuantType, axis: int | None) -> None:
    """dst = round_half_even((src - zp_src) * s_src / s_dst) + zp_dst, clamped to q_dst's storage range; src an
    i32 buffer, per-channel along `axis` when either type is per axis. q_src's scales are the exact real units of
    src (the caller's float32 scales or their products); q_dst is a graph type, its scales taken as float32 as the
    interpreter does. TOSA RESCALE allows zero points only on 8-bit data and unsigned types only with 8/16-bit
    inputs, so other cases go through i32 (zero points added with ADD) and a CAST."""
    buf = lw.schedule.buffers[src]
    channels = buf.shape[axis] if axis is not None else 1
    s_src = np.broadcast_to(q_src.scales, (channels,))
    s_dst = np.broadcast_to(sem.f32_scales(q_dst).scales, (channels,))
    z_src = np.broadcast_to(q_src.zero_points, (channels,))
    z_dst = np.broadcast_to(q_dst.zero_points, (channels,))
    scale = s_src / s_dst if axis is not None else float(s_src[0] / s_dst[0])
    if np.any(z_src):
        src = add_channels(lw, src, -z_src, axis)
    out = q_dst.storage
    direct = out.name in ("i8", "i32", "i16") and (out.name == "i8" or not np.any(z_dst))
    if direct and (axis is None or not np.any(z_dst != z_dst[0])):
        _rescale(lw, src, dst, scale, int(z_dst[0]), q_dst.storage_min, q_dst.storage_max, axis)
        return
    wide = lw.temp(f"{dst}_i32", buf.shape, "i32")
    lo, hi = q_dst.storage_min - int(z_dst.min()), q_dst.storage_max - int(z_dst.max())
    _rescale(lw, src, wide, scale, 0, lo, hi, axis, odd_ties=[int(z) % 2 for z in z_dst])
    shifted = add_channels(lw, wide, z_dst, axis)
    lw.emit("CAST", [shifted], [dst])


def _rescale(lw: Lowerer, src: str, dst: str, scale: float | np.ndarray, out_zp: int, lo: int, hi: int,
             axis: int | None, **extra: Any) -> None:
    """RESCALE (half to even) of an i32 buffer. A scale >= 0.5 (shift <= 31) makes TOSA require |v| < 2^(shift-1);
    larger values then lie far outside an output range narrower than i32 and are CLAMPed first, which changes no
    result."""
    scales = np.atleast_1d(np.asarray(scale, np.float64))
    shift = min(scale_to_multiplier_shift(float(s))[1] for s in scales)
    if shift <= 31:
        limit = 1 << (shift - 1)
        if limit * float(scales.min()) <= max(abs(lo), abs(hi)) + 1:
            raise UnsupportedError(f"{lw.label}: rescaling i32 values by {float(scales.min()):.6g} into a range "
                                   f"[{lo}, {hi}] this wide is outside what RESCALE represents exactly")
        buf = lw.schedule.buffers[src]
        tmp = lw.temp(f"{src}_sat", buf.shape, "i32")
        lw.emit("CLAMP", [src], [tmp], min_val=-limit, max_val=limit - 1)
        src = tmp
    lw.rescale(src, dst, scale, output_zp=out_zp, axis=-1 if axis is None else axis, rounding=Rounding.HALF_EVEN,
               out_min=lo, out_max=hi, **extra)


def add_channels(lw: Lowerer, src: str, values: np.ndarray, axis: int | None) -> str:
    """src + values (one per channel along axis, or one value), as an i32 ADD of a broadcast constant."""
    values = np.asarray(values, np.int64)
    if not np.any(values):
        return src
    buf = lw.schedule.buffers[src]
    view = [1] * len(buf.shape)
    if axis is not None:
        view[axis] = values.size
        const = values.reshape(view)
    else:
        const = values.reshape(-1)[:1].reshape(view)
    name = lw.const(f"{src}_off", const, "i32")
    tmp = lw.temp(f"{src}_plus", buf.shape, "i32")
    lw.emit("ADD", [src, name], [tmp])
    return tmp


def requantize(lw: Lowerer, src: str, q_src: QuantType, dst: str, q_dst: QuantType, qdq: bool = False) -> None:
    """dst (q_dst storage) = the interpreter's requantization of src (q_src storage), same shape; with `qdq` (a
    requantization the QDQ folding made) quantize(dequantize(src)) for tabulated storage."""
    if sem.same_type(q_src, q_dst):
        copy(lw, src, dst)
        return
    axis = _channel_axis(q_src, q_dst)
    buf = lw.schedule.buffers[src]
    entries = 1 << q_src.storage.bits if q_src.storage.bits <= 16 else 0
    if entries and (entries <= 256 or axis is None):
        grid = sem.storage_grid(q_src.storage)
        formula = _dequantize_quantize if qdq else sem.requantize
        if axis is None:
            table = formula(grid, q_src, q_dst)
        else:
            channels = buf.shape[axis]
            table = formula(np.broadcast_to(grid, (channels, grid.size)), q_src, q_dst, axis=0)
        lookup(lw, [src], table, dst, q_dst.storage, axis)
        return
    if q_src.storage.name not in ("i8", "i16", "i32"):
        wide = lw.temp(f"{src}_i32", buf.shape, "i32")
        lw.emit("CAST", [src], [wide])
        src = wide
    channels = buf.shape[axis] if axis is not None else 1
    out = q_dst.storage
    lo, hi = (q_dst.storage_min, q_dst.storage_max) if out.bits < 32 else (out.min, out.max)
    lw.emit("RESCALE_F32_AFFINE", [src], [dst], scale=sem.merged_scale(q_src, q_dst, channels).tolist(),
            offset=sem.merged_offset(q_src, q_dst, channels).tolist(), axis=-1 if axis is None else axis,
            out_min=lo, out_max=hi)


def _dequantize_quantize(values: np.ndarray, q_src: QuantType, q_dst: QuantType, axis: int | None = None
                         ) -> np.ndarray:
    return sem.quantize(sem.dequantize(values, q_src, axis), q_dst, axis)


def as_type(lw: Lowerer, t: Tensor, q: QuantType, base: str) -> str:
    """t's stored values mapped to quantization q by the interpreter's QDQ formula quantize(dequantize(x)): a
    table, or t itself when its type already is q."""
    if sem.same_type(t.quant, q):
        return t.name
    table_inputs(lw, t)
    tmp = lw.temp(base, t.shape, q.storage)
    lookup(lw, [t.name], sem.quantize(sem.dequantize(sem.storage_grid(t.dtype), t.quant), q), tmp, q.storage)
    return tmp


def dilate(lw: Lowerer, name: str, axis: int, factor: int, fill: int) -> str:
    """Insert factor - 1 elements of value `fill` between neighbours along `axis` (StableHLO's interior padding
    and lhs_dilation): view the axis as [n, 1], PAD the new dimension to `factor`, merge, drop the tail."""
    if factor == 1:
        return name
    buf = lw.schedule.buffers[name]
    shape = list(buf.shape)
    n = shape[axis]
    split_shape = shape[:axis + 1] + [1] + shape[axis + 1:]
    padding = [0] * (2 * len(split_shape))
    padding[2 * (axis + 1) + 1] = factor - 1
    padded = lw.temp(f"{name}_dil", tuple(split_shape[:axis + 1] + [factor] + split_shape[axis + 2:]), buf.dtype)
    lw.emit("PAD", [reshaped(lw, name, split_shape)], [padded], padding=padding, pad_const=int(fill))
    merged = reshaped(lw, padded, shape[:axis] + [n * factor] + shape[axis + 1:])
    size = shape[:axis] + [(n - 1) * factor + 1] + shape[axis + 1:]
    out = lw.temp(f"{name}_dilated", tuple(size), buf.dtype)
    lw.emit("SLICE", [merged], [out], start=[0] * len(shape), size=size)
    return out
