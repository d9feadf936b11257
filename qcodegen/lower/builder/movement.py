"""Data movement: concat, reshape, transpose, pad, slice. Values are moved unchanged; when the output's
quantization differs from an input's, that input is RESCALEd (concat: before, the others: after moving).
Quantized tensors must be quantized per tensor; unquantized ones may be i8, i16 or i32."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Op, Tensor
from ..base import Lowerer, rule
from ..common import check_dtypes, expect_shape, requantize, same_quant

_TYPES = ("i8", "i16", "i32")


def _check_operand(lw: Lowerer, t: Tensor, y: Tensor) -> None:
    check_dtypes(lw, (t, y), _TYPES)
    if (t.quant is None) != (y.quant is None):
        raise lw.error(f"tensors {t.name!r} and {y.name!r} must both be quantized or both not")
    for u in (t, y):
        if u.quant is not None and u.quant.kind != "per_tensor":
            raise lw.error(f"tensor {u.name!r} must be quantized per tensor, got {u.quant.kind}")
    if t.quant is None and t.dtype != y.dtype:
        raise lw.error(f"tensor {t.name!r} is {t.dtype} but {y.name!r} is {y.dtype}")


def _unary(lw: Lowerer, op: Op) -> tuple[Tensor, Tensor]:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise lw.error(f"expects 1 input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    _check_operand(lw, x, y)
    return x, y


def _move(lw: Lowerer, prim: str, x: Tensor, y: Tensor, **attrs: Any) -> None:
    """prim x -> y, through a temporary and a RESCALE when the quantization differs."""
    if same_quant(x.quant, y.quant):
        lw.emit(prim, [x.name], [y.name], **attrs)
        return
    tmp = lw.temp(f"{y.name}_moved", y.shape, x.dtype)
    lw.emit(prim, [x.name], [tmp], **attrs)
    requantize(lw, tmp, x.quant, y.name, y.quant)


def _int_list(lw: Lowerer, key: str, length: int) -> list[int]:
    value = lw.attr(key)
    if not (isinstance(value, list) and len(value) == length and all(isinstance(v, int) for v in value)):
        raise lw.error(f"attribute {key!r} must be a list of {length} integers, got {value!r}")
    return value


@rule("reshape")
def lower_reshape(lw: Lowerer, op: Op) -> None:
    x, y = _unary(lw, op)
    shape = lw.attr("shape", list(y.shape))
    if not (isinstance(shape, list) and all(isinstance(d, int) for d in shape)):
        raise lw.error(f"attribute 'shape' must be a list of integers, got {shape!r}")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if shape.count(-1) > 1 or known <= 0 or x.size % known:
            raise lw.error(f"cannot infer the -1 in shape {shape} for {x.size} elements")
        shape = [x.size // known if d == -1 else d for d in shape]
    expect_shape(lw, y, tuple(shape))
    if y.size != x.size:
        raise lw.error(f"cannot reshape {list(x.shape)} ({x.size} elements) to {list(y.shape)}")
    _move(lw, "RESHAPE", x, y, shape=list(y.shape))


@rule("transpose")
def lower_transpose(lw: Lowerer, op: Op) -> None:
    x, y = _unary(lw, op)
    perms = _int_list(lw, "perms", len(x.shape))
    if sorted(perms) != list(range(len(x.shape))):
        raise lw.error(f"perms {perms} is not a permutation of the {len(x.shape)} axes")
    expect_shape(lw, y, tuple(x.shape[p] for p in perms))
    _move(lw, "TRANSPOSE", x, y, perms=perms)


@rule("pad")
def lower_pad(lw: Lowerer, op: Op) -> None:
    x, y = _unary(lw, op)
    padding = lw.attr("padding")
    if isinstance(padding, list) and all(isinstance(p, list) for p in padding):  # [[low, high], ...]
        padding = [v for p in padding for v in p]
    if not (isinstance(padding, list) and len(padding) == 2 * len(x.shape)
            and all(isinstance(v, int) and v >= 0 for v in padding)):
        raise lw.error(f"padding must give non-negative [low, high] pairs for each of the {len(x.shape)} axes, "
                       f"got {lw.attr('padding')!r}")
    expect_shape(lw, y, tuple(d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(x.shape)))
    pad_const = x.quant.zero_point if x.quant is not None else 0
    _move(lw, "PAD", x, y, padding=padding, pad_const=pad_const)


@rule("slice")
def lower_slice(lw: Lowerer, op: Op) -> None:
    x, y = _unary(lw, op)
    start = _int_list(lw, "start", len(x.shape))
    size = [d - s if z == -1 else z
            for d, s, z in zip(x.shape, start, _int_list(lw, "size", len(x.shape)), strict=True)]
    if any(s < 0 or z < 1 or s + z > d for d, s, z in zip(x.shape, start, size, strict=True)):
        raise lw.error(f"slice start {start} size {lw.attr('size')} is outside the input shape {list(x.shape)}")
    expect_shape(lw, y, tuple(size))
    _move(lw, "SLICE", x, y, start=start, size=size)


@rule("concat")
def lower_concat(lw: Lowerer, op: Op) -> None:
    if not op.inputs or len(op.outputs) != 1:
        raise lw.error(f"expects at least 1 input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
    y = lw.tensor_out(0)
    rank = len(y.shape)
    axis = lw.attr("axis")
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise lw.error(f"axis {axis!r} is out of range for rank {rank}")
    axis %= rank
    parts = []
    for i in range(len(op.inputs)):
        t = lw.tensor_in(i)
        _check_operand(lw, t, y)
        if len(t.shape) != rank or any(a != b for k, (a, b) in enumerate(zip(t.shape, y.shape, strict=True))
                                       if k != axis):
            raise lw.error(f"input {t.name!r} of shape {list(t.shape)} does not fit output shape "
                           f"{list(y.shape)} along axis {axis}")
        name = t.name
        if not same_quant(t.quant, y.quant):
            name = lw.temp(f"{t.name}_rq", t.shape, y.dtype)
            requantize(lw, t.name, t.quant, name, y.quant)
        parts.append(name)
    total = sum(lw.tensor_in(i).shape[axis] for i in range(len(op.inputs)))
    if total != y.shape[axis]:
        raise lw.error(f"inputs sum to {total} along axis {axis}, output {y.name!r} has {y.shape[axis]}")
    lw.emit("CONCAT", parts, [y.name], axis=axis)
