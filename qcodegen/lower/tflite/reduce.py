"""TFLite Micro's MEAN and SUM (reference_ops::QuantizedMeanOrSum) and REDUCE_MAX / REDUCE_MIN, bit for bit.

MEAN/SUM (int8, int16): (m, s) = QuantizeMultiplier(s_in / s_out); for MEAN over N elements TFLM folds 1/N
into the multiplier: sh = min(floor(log2 N), 32, 31 + s), m' = (m << sh) / N (truncating), s' = s - sh.
out = clamp(MBQM(sum(x) - zp_in * N, m', s') + zp_out). Lowered as RESCALE(x - zp_in -> i32), one REDUCE_SUM per
reduced axis (exact: range analysis proves every partial sum fits int32), the double-round RESCALE, and a
RESHAPE when keep_dims is false.
REDUCE_MAX/MIN (int8, input and output quantization equal): REDUCE_MAX/REDUCE_MIN per axis.
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...ir.rescale import RescaleParams
from ...semantics.tflite import Pair, quantize_multiplier_exponent, tosa_scale32
from ..base import Lowerer, rule
from .common import const_ints, operands, quantized, same_type


def resolve_axes(lw: Lowerer, axes: list[int], rank: int) -> list[int]:
    """tflite ResolveAxis: negative axes count from the end, duplicates are dropped (sorted here)."""
    resolved = set()
    for a in axes:
        if not -rank <= a < rank:
            raise lw.error(f"axis {a} out of range for rank {rank}")
        resolved.add(a % rank)
    return sorted(resolved)


def mean_multiplier(pair: Pair, count: int) -> Pair:
    """QuantizedMeanOrSum's 1/N folding: (m << sh) / N with sh = min(floor(log2 N), 32, 31 + s)."""
    m, s = pair
    sh = min(count.bit_length() - 1, 32, 31 + s)
    return (m << sh) // count, s - sh


def _reduced(lw: Lowerer, op: Op) -> tuple[Tensor, Tensor, list[int], tuple[int, ...]]:
    """Input, output, resolved axes and the keep_dims shape; checks the output shape."""
    (x, axis_t), (y,) = operands(lw, op, (2,))
    same_type(lw, x, y)
    axes = resolve_axes(lw, const_ints(lw, axis_t, "axis"), len(x.shape))
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    squeezed = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    want = kept if lw.attr("keep_dims", False) else squeezed
    if y.shape != want:
        raise lw.error(f"output shape {list(y.shape)} differs from the expected {list(want)}")
    if x.size == 0:
        raise UnsupportedError(f"{lw.label}: reducing an empty tensor is not supported")
    return x, y, axes, kept


def _reduce_axes(lw: Lowerer, prim: str, src: str, axes: list[int], dst: str) -> None:
    """One `prim` step per axis (kept with size 1), the last one writing `dst`."""
    shape = list(lw.schedule.buffers[src].shape)
    for k, a in enumerate(axes):
        shape[a] = 1
        out = dst if k == len(axes) - 1 else lw.temp(f"{dst}_r{a}", tuple(shape), lw.schedule.buffers[src].dtype)
        lw.emit(prim, [src], [out], axis=a)
        src = out


def _kept_output(lw: Lowerer, y: Tensor, kept: tuple[int, ...], dtype: str) -> str:
    """The buffer holding the keep_dims-shaped result: y itself, or a temporary that finish() RESHAPEs."""
    return y.name if y.shape == kept else lw.temp(f"{y.name}_kept", kept, dtype)


def _finish(lw: Lowerer, y: Tensor, result: str) -> None:
    if result != y.name:
        lw.emit("RESHAPE", [result], [y.name], shape=list(y.shape))


@rule("tfl.mean", "tfl.sum")
def lower_mean_sum(lw: Lowerer, op: Op) -> None:
    x, y, axes, kept = _reduced(lw, op)
    q_in, q_out = quantized(lw, x), quantized(lw, y)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    pair = quantize_multiplier_exponent(q_in.scale / q_out.scale)
    if op.kind == "tfl.mean":
        pair = mean_multiplier(pair, count)
    centred = lw.temp(f"{y.name}_x32", x.shape, "i32")
    lw.emit_rescale(x.name, centred, RescaleParams(multiplier=[1 << 30], shift=[30], input_zp=q_in.zero_point,
                                                   output_zp=0, rounding="double_round"))
    total = centred
    if axes:
        total = lw.temp(f"{y.name}_sum", kept, "i32")
        _reduce_axes(lw, "REDUCE_SUM", centred, axes, total)
    m, shift = tosa_scale32(pair)
    result = _kept_output(lw, y, kept, y.dtype.name)
    lw.emit_rescale(total, result, RescaleParams(multiplier=[m], shift=[shift], input_zp=0, output_zp=q_out.zero_point,
                                                 rounding="double_round"))
    _finish(lw, y, result)


@rule("tfl.reduce_max", "tfl.reduce_min")
def lower_reduce_extreme(lw: Lowerer, op: Op) -> None:
    x, y, axes, kept = _reduced(lw, op)
    q_in, q_out = quantized(lw, x, ("i8",)), quantized(lw, y, ("i8",))
    if q_in.scale != q_out.scale or q_in.zero_point != q_out.zero_point:
        raise lw.error("REDUCE_MAX/REDUCE_MIN need equal input and output quantization (TFLM)")
    if not axes:
        _finish(lw, y, x.name)
        return
    result = _kept_output(lw, y, kept, "i8")
    _reduce_axes(lw, "REDUCE_MAX" if op.kind == "tfl.reduce_max" else "REDUCE_MIN", x.name, axes, result)
    _finish(lw, y, result)
