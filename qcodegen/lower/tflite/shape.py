"""TFLite data movement: RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, SLICE, STRIDED_SLICE, PAD, PADV2,
CONCATENATION, and ARG_MAX.

TFLM moves the stored integers unchanged (its kernels never requantize here, whatever the output tensor's
quantization says), so these lower to data-movement primitives on the raw values. The one exception is int8
CONCATENATION, which TFLM only accepts with every input quantized like the output: inputs quantized otherwise
are requantized first (Requantize arithmetic, as a QUANTIZE op would) instead of refusing the model. PAD fills
int8 tensors with the output zero point (PADV2: its constant), others with 0.
STRIDED_SLICE follows TFLM's StridedSliceStartForAxis/EndForAxis (begin/end masks, negative indices,
shrink_axis_mask; TFLM ignores `offset`, and so does this rule); a stride > 1 becomes SLICE, PAD to a multiple
of the stride, RESHAPE (n, stride), SLICE of the first column and RESHAPE back. Negative strides,
ellipsis_mask and new_axis_mask are not supported.
"""

from __future__ import annotations

import math

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...semantics.tflite import quantize_multiplier_exponent
from ..base import Lowerer, rule
from ..common import expect_shape, reshape
from .common import const_ints, operands, quantized
from .quant import emit_mbqm

_TYPES = ("i8", "i16", "i32")


def _movable(lw: Lowerer, x: Tensor, y: Tensor) -> None:
    if x.dtype != y.dtype or x.dtype.name not in _TYPES:
        raise lw.error(f"input {x.name!r} ({x.dtype}) and output {y.name!r} ({y.dtype}) must share one of the "
                       f"types {', '.join(_TYPES)}")


@rule("tfl.reshape", "tfl.squeeze", "tfl.expand_dims")
def lower_reshape(lw: Lowerer, op: Op) -> None:
    (x, *_), (y,) = operands(lw, op, (1, 2))
    _movable(lw, x, y)
    if x.size != y.size:
        raise lw.error(f"cannot reshape {list(x.shape)} ({x.size} elements) to {list(y.shape)}")
    lw.emit("RESHAPE", [x.name], [y.name], shape=list(y.shape))


@rule("tfl.transpose")
def lower_transpose(lw: Lowerer, op: Op) -> None:
    (x, perm_t), (y,) = operands(lw, op, (2,))
    _movable(lw, x, y)
    perms = [p % len(x.shape) if x.shape else p for p in const_ints(lw, perm_t, "perm")]
    if sorted(perms) != list(range(len(x.shape))):
        raise lw.error(f"perm {perms} is not a permutation of the {len(x.shape)} axes")
    expect_shape(lw, y, tuple(x.shape[p] for p in perms))
    lw.emit("TRANSPOSE", [x.name], [y.name], perms=perms)


@rule("tfl.slice")
def lower_slice(lw: Lowerer, op: Op) -> None:
    (x, begin_t, size_t), (y,) = operands(lw, op, (3,))
    _movable(lw, x, y)
    begin, size = const_ints(lw, begin_t, "begin"), const_ints(lw, size_t, "size")
    if len(begin) != len(x.shape) or len(size) != len(x.shape):
        raise lw.error(f"begin {begin} and size {size} need {len(x.shape)} entries")
    size = [d - b if s == -1 else s for d, b, s in zip(x.shape, begin, size, strict=True)]
    if any(b < 0 or s < 1 or b + s > d for d, b, s in zip(x.shape, begin, size, strict=True)):
        raise lw.error(f"slice begin {begin} size {size} is outside the input shape {list(x.shape)}")
    expect_shape(lw, y, tuple(size))
    lw.emit("SLICE", [x.name], [y.name], start=begin, size=size)


def _strided_axis(lw: Lowerer, size: int, begin: int, end: int, stride: int, axis: int) -> tuple[int, int]:
    """(start, count) of one axis: TFLM's StridedSliceStartForAxis / EndForAxis."""
    bit = 1 << axis

    def clamp(v: int) -> int:
        return min(max(v, 0), size) if stride > 0 else min(max(v, -1), size - 1)

    start = clamp(begin + size if begin < 0 else begin)
    if lw.attr("begin_mask", 0) & bit:
        start = 0 if stride > 0 else size - 1
    if lw.attr("shrink_axis_mask", 0) & bit:
        stop = start if start >= size else start + 1
    else:
        stop = clamp(end + size if end < 0 else end)
        if lw.attr("end_mask", 0) & bit:
            stop = size if stride > 0 else -1
    return start, max(math.ceil((stop - start) / stride), 0)


def _take_every(lw: Lowerer, name: str, axis: int, stride: int, count: int) -> str:
    """Elements 0, stride, 2 * stride, ... (count of them) along `axis`."""
    shape = lw.schedule.buffers[name].shape
    if stride == 1 or count == 1:
        if shape[axis] == count:
            return name
        size = list(shape)
        size[axis] = count
        out = lw.temp(f"{name}_first", tuple(size), lw.schedule.buffers[name].dtype)
        lw.emit("SLICE", [name], [out], start=[0] * len(shape), size=size)
        return out
    dtype = lw.schedule.buffers[name].dtype
    if shape[axis] < count * stride:
        padded = list(shape)
        padded[axis] = count * stride
        padding = [0] * (2 * len(shape))
        padding[2 * axis + 1] = count * stride - shape[axis]
        out = lw.temp(f"{name}_pad", tuple(padded), dtype)
        lw.emit("PAD", [name], [out], padding=padding, pad_const=0)
        name = out
    split = reshape(lw, name, (*shape[:axis], count, stride, *shape[axis + 1:]))
    first = lw.temp(f"{name}_every", (*shape[:axis], count, 1, *shape[axis + 1:]), dtype)
    lw.emit("SLICE", [split], [first], start=[0] * (len(shape) + 1), size=[*shape[:axis], count, 1, *shape[axis + 1:]])
    return reshape(lw, first, (*shape[:axis], count, *shape[axis + 1:]))


@rule("tfl.strided_slice")
def lower_strided_slice(lw: Lowerer, op: Op) -> None:
    (x, begin_t, end_t, strides_t), (y,) = operands(lw, op, (4,))
    _movable(lw, x, y)
    if lw.attr("ellipsis_mask", 0) or lw.attr("new_axis_mask", 0):
        raise UnsupportedError(f"{lw.label}: ellipsis_mask and new_axis_mask are not supported (TFLM ignores them)")
    rank = len(x.shape)
    begin, end, strides = (const_ints(lw, t, what) for t, what in ((begin_t, "begin"), (end_t, "end"),
                                                                   (strides_t, "strides")))
    if not len(begin) == len(end) == len(strides) == rank:
        raise lw.error(f"begin, end and strides need {rank} entries, got {begin}, {end}, {strides}")
    if any(s == 0 for s in strides):
        raise lw.error(f"strides {strides} must be non-zero")
    if any(s < 0 for s in strides):
        raise UnsupportedError(f"{lw.label}: negative strides {strides} are not supported")
    axes = [_strided_axis(lw, x.shape[i], begin[i], end[i], strides[i], i) for i in range(rank)]
    shrink = lw.attr("shrink_axis_mask", 0)
    kept = tuple(count for i, (_, count) in enumerate(axes) if not shrink & (1 << i))
    expect_shape(lw, y, kept)
    if any(count == 0 for _, count in axes):
        raise UnsupportedError(f"{lw.label}: the slice is empty")
    size = [min(count * s, d - start) for (start, count), s, d in zip(axes, strides, x.shape, strict=True)]
    name = x.name
    if size != list(x.shape):
        name = lw.temp(f"{y.name}_slice", tuple(size), x.dtype)
        lw.emit("SLICE", [x.name], [name], start=[start for start, _ in axes], size=size)
    for i, ((_, count), s) in enumerate(zip(axes, strides, strict=True)):
        name = _take_every(lw, name, i, s, count)
    lw.emit("RESHAPE", [name], [y.name], shape=list(y.shape))


def _pad_value(lw: Lowerer, op: Op, x: Tensor, y: Tensor) -> int:
    if len(op.inputs) == 3:
        values = const_ints(lw, lw.tensor_in(2), "constant_values")
        if len(values) != 1:
            raise lw.error(f"constant_values must hold one value, got {len(values)}")
        return values[0]
    return y.quant.zero_point if x.dtype.name == "i8" and y.quant is not None else 0


@rule("tfl.pad", "tfl.padv2")
def lower_pad(lw: Lowerer, op: Op) -> None:
    (x, pads_t, *_), (y,) = operands(lw, op, (2, 3) if op.kind == "tfl.padv2" else (2,))
    _movable(lw, x, y)
    padding = const_ints(lw, pads_t, "paddings")
    if len(padding) != 2 * len(x.shape) or min(padding, default=0) < 0:
        raise lw.error(f"paddings {padding} must give [before, after] >= 0 for each of the {len(x.shape)} axes")
    expect_shape(lw, y, tuple(d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(x.shape)))
    lw.emit("PAD", [x.name], [y.name], padding=padding, pad_const=_pad_value(lw, op, x, y))


@rule("tfl.concatenation")
def lower_concatenation(lw: Lowerer, op: Op) -> None:
    if not op.inputs or len(op.outputs) != 1:
        raise lw.error(f"expects inputs and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
    y = lw.tensor_out(0)
    rank = len(y.shape)
    axis = int(lw.attr("axis"))
    if not -rank <= axis < rank:
        raise lw.error(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    parts = []
    for i in range(len(op.inputs)):
        t = lw.tensor_in(i)
        _movable(lw, t, y)
        if len(t.shape) != rank or any(a != b for k, (a, b) in enumerate(zip(t.shape, y.shape, strict=True))
                                       if k != axis):
            raise lw.error(f"input {t.name!r} of shape {list(t.shape)} does not fit the output {list(y.shape)}")
        parts.append(_concat_part(lw, t, y))
    if sum(lw.tensor_in(i).shape[axis] for i in range(len(op.inputs))) != y.shape[axis]:
        raise lw.error(f"the inputs do not add up to the output's {y.shape[axis]} along axis {axis}")
    lw.emit("CONCAT", parts, [y.name], axis=axis)


def _concat_part(lw: Lowerer, t: Tensor, y: Tensor) -> str:
    """int8 inputs quantized unlike the output are requantized (TFLM would refuse them)."""
    if t.dtype.name != "i8" or t.quant is None or y.quant is None:
        return t.name
    qt, qy = quantized(lw, t), quantized(lw, y)
    if float(qt.scale) == float(qy.scale) and qt.zero_point == qy.zero_point:
        return t.name
    out = lw.temp(f"{t.name}_rq", t.shape, t.dtype)
    emit_mbqm(lw, t.name, out, [quantize_multiplier_exponent(float(qt.scale) / float(qy.scale))],
              input_zp=qt.zero_point, output_zp=qy.zero_point, value_bound=255)
    return out


@rule("tfl.arg_max")
def lower_arg_max(lw: Lowerer, op: Op) -> None:
    """The first maximal index along the axis (TFLM: int8 input, int32 axis and output)."""
    (x, axis_t), (y,) = operands(lw, op, (2,))
    if x.dtype.name not in ("i8", "i16") or y.dtype.name != "i32":
        raise UnsupportedError(f"{lw.label}: ARG_MAX of {x.dtype} to {y.dtype} is not supported (i8/i16 to i32)")
    axis = const_ints(lw, axis_t, "axis")
    if len(axis) != 1 or not -len(x.shape) <= axis[0] < len(x.shape):
        raise lw.error(f"axis {axis} is not one axis of a rank-{len(x.shape)} tensor")
    a = axis[0] % len(x.shape)
    expect_shape(lw, y, tuple(d for i, d in enumerate(x.shape) if i != a))
    lw.emit("ARGMAX", [x.name], [y.name], axis=a)

