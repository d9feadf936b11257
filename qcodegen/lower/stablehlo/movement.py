"""StableHLO data movement and reductions: transpose, reshape, broadcast_in_dim, concatenate, slice, reverse, pad,
gather, reduce.

Data movement copies stored values (as the interpreter does: quantized types are unchanged by these ops; operands
of another quantization are first mapped to the result's by the QDQ formula). broadcast_in_dim, strided slices
and reverse are STRIDED_COPY views; interior padding inserts the padding value with PAD + RESHAPE + SLICE.

reduce (one operand, body add / maximum / minimum): maximum / minimum reduce the stored values (REDUCE_MAX /
REDUCE_MIN per axis; the init value joins through MAXIMUM / MINIMUM unless it is the type's extreme) and map to the
result type if it differs; add removes the zero point (RESCALE to i32 at scale 1, exact), REDUCE_SUMs and
RESCALEs half to even to the result (the init value must be a real 0).

A wide accumulation (attrs["accumulator"], StableHLO's quantized-reduction RFC, qcodegen/frontends/stablehlo_reduce.py)
lowers the same way when its input conversion is exact, (q - zp) * m + zp_acc for an integer m: the int32 sum of
q - zp has scale m * s_acc. The range analysis of REDUCE_SUM (or DEPTHWISE_CONV2D for reduce_window) is the
overflow proof (PlanError otherwise); a declared accumulator that could overflow where ours does not is refused too.
"""

from __future__ import annotations

import numpy as np

from ...errors import PlanError, UnsupportedError
from ...ir.graph import Op, Tensor
from ...ir.quant import QuantType
from ...primitives.elementwise import contiguous_strides
from ...primitives.gather_slices import GatherDims
from ...semantics import stablehlo as sem
from ...semantics.stablehlo import same_type
from ..base import Lowerer, rule
from ..common import expect_shape, to_i32
from .common import as_type, copy, dilate, lookup, operands, per_tensor, permute, requantize, rescale_i32, reshaped


def _same_quant(lw: Lowerer, x: Tensor, y: Tensor, base: str) -> str:
    """x's values in y's quantization (x itself when the types agree)."""
    if x.quant is None and y.quant is None:
        if x.dtype != y.dtype:
            raise lw.error(f"{x.name!r} is {x.dtype} but {y.name!r} is {y.dtype}")
        return x.name
    if x.quant is None or y.quant is None:
        raise lw.error(f"{x.name!r} and {y.name!r} must both be quantized or neither")
    if same_type(x.quant, y.quant) or x.quant.kind != "per_tensor":
        return x.name
    return as_type(lw, x, per_tensor(lw, y), base)


@rule("stablehlo.transpose")
def lower_transpose(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    perm = [int(p) for p in lw.attr("permutation")]
    if sorted(perm) != list(range(len(x.shape))):
        raise lw.error(f"permutation {perm} is not a permutation of {len(x.shape)} dimensions")
    expect_shape(lw, y, tuple(x.shape[p] for p in perm))
    if perm == sorted(perm):
        copy(lw, x.name, y.name)
    else:
        lw.emit("TRANSPOSE", [x.name], [y.name], perms=perm)


@rule("stablehlo.reshape")
def lower_reshape(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    if x.size != y.size:
        raise lw.error(f"cannot reshape {list(x.shape)} to {list(y.shape)}")
    lw.emit("RESHAPE", [x.name], [y.name], shape=list(y.shape))


@rule("stablehlo.broadcast_in_dim")
def lower_broadcast_in_dim(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    dims = [int(d) for d in lw.attr("broadcast_dimensions")]
    if len(dims) != len(x.shape) or len(set(dims)) != len(dims) or not all(0 <= d < len(y.shape) for d in dims):
        raise lw.error(f"broadcast_dimensions {dims} do not fit {list(x.shape)} -> {list(y.shape)}")
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    src = permute(lw, x.name, order)
    view = [1] * len(y.shape)
    for i in order:
        view[dims[i]] = x.shape[i]
    if any(v not in (1, d) for v, d in zip(view, y.shape, strict=True)):
        raise lw.error(f"cannot broadcast {list(x.shape)} along {dims} to {list(y.shape)}")
    src = reshaped(lw, src, view)
    strides = [0 if v == 1 and d != 1 else s for v, d, s in zip(view, y.shape, contiguous_strides(tuple(view)),
                                                                strict=True)]
    if tuple(view) == y.shape:
        copy(lw, src, y.name)
    else:
        lw.emit("STRIDED_COPY", [src], [y.name], offset=0, strides=strides)


@rule("stablehlo.concatenate")
def lower_concatenate(lw: Lowerer, op: Op) -> None:
    y = lw.tensor_out(0)
    axis = int(lw.attr("dimension"))
    parts = [_same_quant(lw, lw.tensor_in(i), y, f"{y.name}_in{i}") for i in range(len(op.inputs))]
    lw.emit("CONCAT", parts, [y.name], axis=axis)


@rule("stablehlo.slice")
def lower_slice(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    start = [int(v) for v in lw.attr("start_indices")]
    limit = [int(v) for v in lw.attr("limit_indices")]
    steps = [int(v) for v in lw.attr("strides", [1] * len(x.shape))]
    size = [len(range(b, e, s)) for b, e, s in zip(start, limit, steps, strict=True)]
    expect_shape(lw, y, tuple(size))
    if all(s == 1 for s in steps):
        lw.emit("SLICE", [x.name], [y.name], start=start, size=size)
        return
    in_strides = contiguous_strides(x.shape)
    offset = sum(b * s for b, s in zip(start, in_strides, strict=True))
    lw.emit("STRIDED_COPY", [x.name], [y.name], offset=offset,
            strides=[k * s for k, s in zip(steps, in_strides, strict=True)])


@rule("stablehlo.reverse")
def lower_reverse(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    dims = {int(d) for d in lw.attr("dimensions")}
    in_strides = contiguous_strides(x.shape)
    offset = sum((n - 1) * s for d, (n, s) in enumerate(zip(x.shape, in_strides, strict=True)) if d in dims)
    lw.emit("STRIDED_COPY", [x.name], [y.name], offset=offset,
            strides=[-s if d in dims else s for d, s in enumerate(in_strides)])


def _scalar_const(lw: Lowerer, t: Tensor, what: str) -> int:
    if not t.is_const or t.size != 1:
        raise UnsupportedError(f"{lw.label}: the {what} must be a constant scalar")
    return int(np.asarray(t.data).reshape(-1)[0])


@rule("stablehlo.pad")
def lower_pad(lw: Lowerer, op: Op) -> None:
    (x, value), (y,) = operands(lw, op, 2)
    fill = _scalar_const(lw, value, "padding value")
    if x.quant is not None and value.quant is not None and not same_type(x.quant, value.quant):
        fill = int(sem.requantize(np.array([fill]), value.quant, x.quant)[0])
    low, high = (list(map(int, lw.attr(k))) for k in ("edge_padding_low", "edge_padding_high"))
    interior = [int(v) for v in lw.attr("interior_padding", [0] * len(x.shape))]
    name = x.name
    for axis, k in enumerate(interior):
        if k < 0:
            raise lw.error(f"negative interior padding {interior}")
        name = dilate(lw, name, axis, k + 1, fill)
    shape = list(lw.schedule.buffers[name].shape)
    padding = [v for lo, hi in zip(low, high, strict=True) for v in (max(lo, 0), max(hi, 0))]
    if any(padding):
        padded = [d + padding[2 * k] + padding[2 * k + 1] for k, d in enumerate(shape)]
        tmp = lw.temp(f"{y.name}_pad", tuple(padded), x.dtype)
        lw.emit("PAD", [name], [tmp], padding=padding, pad_const=fill)
        name, shape = tmp, padded
    start = [max(-lo, 0) for lo in low]
    size = [d - max(-lo, 0) - max(-hi, 0) for d, lo, hi in zip(shape, low, high, strict=True)]
    expect_shape(lw, y, tuple(size))
    if size != shape:
        lw.emit("SLICE", [name], [y.name], start=start, size=size)
    else:
        copy(lw, name, y.name)


@rule("stablehlo.gather")
def lower_gather(lw: Lowerer, op: Op) -> None:
    (x, idx), (y,) = operands(lw, op, 2)
    if x.quant is not None and not same_type(x.quant, y.quant):
        raise UnsupportedError(f"{lw.label}: gather changing the quantization")
    dims = lw.attr("dimension_numbers")
    attrs = {k: list(getattr(dims, k)) for k in ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                                                   "start_indices_batching_dims", "start_index_map")}
    attrs.update(index_vector_dim=int(dims.index_vector_dim), slice_sizes=[int(v) for v in lw.attr("slice_sizes")])
    GatherDims.from_attrs(attrs)
    index = idx.name
    if idx.dtype.name not in ("i8", "u8", "i16", "u16", "i32"):
        if not idx.is_const or np.abs(idx.data).max(initial=0) >= 1 << 31:
            raise UnsupportedError(f"{lw.label}: {idx.dtype} start indices (constant i64 indices that fit i32, or "
                                   "i8/i16/i32 indices)")
        index = lw.const(f"{idx.name}_i32", idx.data.astype(np.int64), "i32")
    lw.emit("GATHER_SLICES", [x.name, index], [y.name], **attrs)


_REDUCERS = {"stablehlo.maximum": ("REDUCE_MAX", "MAXIMUM"), "stablehlo.minimum": ("REDUCE_MIN", "MINIMUM"),
             "stablehlo.add": ("REDUCE_SUM", None)}


def _sum_scale(lw: Lowerer, qx: QuantType, body: str, terms: int) -> float:
    """The scale of the int32 sum of q - zp: x's scale, or m * s_acc for a wide accumulator (module docstring);
    float32 scales, as the interpreter."""
    acc = lw.attr("accumulator", None)
    if acc is None:
        return float(np.float32(qx.scale))
    if body != "stablehlo.add" or acc.kind != "per_tensor" or acc.storage.name != "i32" or qx.storage.bits > 16:
        raise UnsupportedError(f"{lw.label}: a wide accumulation needs an add body, an 8/16-bit operand and a "
                               "per-tensor i32 accumulator type")
    grid = sem.storage_grid(qx.storage)
    m = max(1, round(qx.scale / acc.scale))
    if np.any(sem.requantize(grid, qx, acc) != (grid - qx.zero_point) * m + acc.zero_point):
        raise UnsupportedError(f"{lw.label}: the conversion to the accumulator type (scale {acc.scale:g}) is not "
                               f"exact; its scale must divide the operand's ({qx.scale:g}) by an integer")
    bound = terms * max(abs(int(grid[0]) - qx.zero_point), abs(int(grid[-1]) - qx.zero_point)) * m
    if (m != 1 or acc.zero_point) and bound + abs(acc.zero_point) > acc.storage.max:  # else the range analysis
        raise PlanError(f"{lw.label}: {terms} terms can overflow the declared i32 accumulator type "
                        f"(|sum| up to {bound}, scale {acc.scale:g})")
    return float(np.float32(acc.scale)) * m


@rule("stablehlo.reduce")
def lower_reduce(lw: Lowerer, op: Op) -> None:
    (x, init), (y,) = operands(lw, op, 2)
    body = lw.attr("body", None)
    if body not in _REDUCERS:
        raise UnsupportedError(f"{lw.label}: reduce with body {body!r} (add, maximum or minimum of one operand)")
    qx, qy = per_tensor(lw, x), per_tensor(lw, y)
    init_value = _scalar_const(lw, init, "init value")
    axes = sorted(int(d) for d in lw.attr("dimensions"))
    kept = tuple(1 if k in axes else d for k, d in enumerate(x.shape))
    reducer, combine = _REDUCERS[body]
    scale = _sum_scale(lw, qx, body, int(np.prod([x.shape[a] for a in axes], dtype=np.int64)))
    if combine is None:
        if init.quant is None or init_value != init.quant.zero_point:
            raise UnsupportedError(f"{lw.label}: a sum reduction needs the init value 0 (its zero point)")
        acc = to_i32(lw, x.name, qx.zero_point)
    else:
        if x.dtype.name not in ("i8", "i16", "i32"):
            raise UnsupportedError(f"{lw.label}: reduce of {x.dtype} values")
        acc = x.name
    shape = list(x.shape)
    for axis in axes:
        shape[axis] = 1
        total = lw.temp(f"{y.name}_red", tuple(shape), lw.schedule.buffers[acc].dtype)
        lw.emit(reducer, [acc], [total], axis=axis)
        acc = total
    if combine is not None and init_value != (x.dtype.min if combine == "MAXIMUM" else x.dtype.max):
        if not same_type(init.quant, qx):
            raise UnsupportedError(f"{lw.label}: the init value must have the operand's quantized type")
        bound = lw.const(f"{y.name}_init", np.full((1,) * len(kept), init_value, np.int64), x.dtype)
        joined = lw.temp(f"{y.name}_join", kept, x.dtype)
        lw.emit(combine, [acc, bound], [joined])
        acc = joined
    out = lw.temp(f"{y.name}_kept", kept, y.dtype)
    if combine is None:
        rescale_i32(lw, acc, QuantType.per_tensor("i32", scale), out, qy, None)
    else:
        requantize(lw, acc, qx, out, qy)
    lw.emit("RESHAPE", [out], [y.name], shape=list(y.shape))


def _window_attrs(lw: Lowerer, rank: int) -> tuple[list[int], list[int], list[int], list[tuple[int, int]]]:
    ones = [1] * rank
    if any(int(v) != 1 for v in lw.attr("base_dilations", ones)):
        raise UnsupportedError(f"{lw.label}: reduce_window with base dilation")
    padding = np.asarray(lw.attr("padding", np.zeros((rank, 2), np.int64))).reshape(rank, 2)
    if np.any(padding < 0):
        raise UnsupportedError(f"{lw.label}: reduce_window with negative padding")
    return ([int(v) for v in lw.attr("window_dimensions")], [int(v) for v in lw.attr("window_strides", ones)],
            [int(v) for v in lw.attr("window_dilations", ones)], [(int(a), int(b)) for a, b in padding])


@rule("stablehlo.reduce_window")
def lower_reduce_window(lw: Lowerer, op: Op) -> None:
    """reduce_window over at most two windowed dimensions: the others fold into the batch of an NHWC pool
    (C = 1). maximum: MAX_POOL2D (padding reads the init value, which must be the type minimum); minimum: the same
    between two order-reversing tables (x -> -1 - x); add: a DEPTHWISE_CONV2D with unit weights (padding reads the
    zero point: a real 0, which the init value must be) and a half-even RESCALE to the result."""
    (x, init), (y,) = operands(lw, op, 2)
    body = lw.attr("body", None)
    if body not in _REDUCERS:
        raise UnsupportedError(f"{lw.label}: reduce_window with body {body!r} (add, maximum or minimum)")
    qx, qy = per_tensor(lw, x), per_tensor(lw, y)
    if x.dtype.name not in ("i8", "i16"):
        raise UnsupportedError(f"{lw.label}: reduce_window of {x.dtype} values")
    dims, strides, dilations, padding = _window_attrs(lw, len(x.shape))
    extra = max(0, 2 - len(x.shape))  # unit dimensions in front of a rank-0/1 operand
    shape, y_shape = (1,) * extra + x.shape, (1,) * extra + y.shape
    dims, strides, dilations = ([1] * extra + v for v in (dims, strides, dilations))
    padding = [(0, 0)] * extra + padding
    rank = len(shape)
    windowed = [d for d in range(rank) if dims[d] != 1 or strides[d] != 1 or padding[d] != (0, 0)]
    if len(windowed) > 2:
        raise UnsupportedError(f"{lw.label}: reduce_window over {len(windowed)} dimensions (at most 2)")
    windowed = sorted(windowed + [d for d in range(rank) if d not in windowed][:2 - len(windowed)])
    others = [d for d in range(rank) if d not in windowed]
    h, w = (shape[d] for d in windowed)
    batch = int(np.prod([shape[d] for d in others], dtype=np.int64))
    src = reshaped(lw, permute(lw, reshaped(lw, x.name, shape), others + windowed), (batch, h, w, 1))
    init_value = _scalar_const(lw, init, "init value")
    kernel = [dims[d] for d in windowed]
    scale = _sum_scale(lw, qx, body, int(np.prod(kernel)))
    attrs = dict(stride=[strides[d] for d in windowed], pad=[v for d in windowed for v in padding[d]])
    out_hw = [(n + lo + hi - (k - 1) * dl - 1) // s + 1 for n, k, s, dl, (lo, hi)
              in zip((h, w), kernel, attrs["stride"], [dilations[d] for d in windowed],
                     [padding[d] for d in windowed], strict=True)]
    pooled = lw.temp(f"{y.name}_pool", (batch, *out_hw, 1), "i32" if body == "stablehlo.add" else x.dtype)
    if body == "stablehlo.add":
        if init.quant is None or init_value != init.quant.zero_point:
            raise UnsupportedError(f"{lw.label}: a sum reduce_window needs the init value 0 (its zero point)")
        ones = lw.const(f"{y.name}_ones", np.ones((*kernel, 1, 1), np.int64), "i8")
        bias = lw.const(f"{y.name}_bias", np.zeros(1, np.int64), "i32")
        lw.emit("DEPTHWISE_CONV2D", [src, ones, bias], [pooled], dilation=[dilations[d] for d in windowed],
                input_zp=qx.zero_point, weight_zp=0, acc_type="i32", **attrs)
    else:
        if any(dilations[d] != 1 for d in windowed) or init_value != (
                x.dtype.min if body == "stablehlo.maximum" else x.dtype.max):
            raise UnsupportedError(f"{lw.label}: {body} reduce_window with window dilation or an init value other "
                                   "than the type's extreme")
        flip = body == "stablehlo.minimum"
        if flip:
            src = _reverse_order(lw, src)
        lw.emit("MAX_POOL2D", [src], [pooled], kernel=kernel, **attrs)
        if flip:
            pooled = _reverse_order(lw, pooled)
    kept = tuple(shape[d] for d in others) + tuple(out_hw)
    out = lw.temp(f"{y.name}_kept", (batch, *out_hw, 1), y.dtype)
    if body == "stablehlo.add":
        rescale_i32(lw, pooled, QuantType.per_tensor("i32", scale), out, qy, None)
    else:
        requantize(lw, pooled, qx, out, qy)
    inverse = [int(i) for i in np.argsort(others + windowed)]
    if tuple(kept[i] for i in inverse) != y_shape:
        raise lw.error(f"result {y.name!r} has shape {list(y.shape)}, the window gives {list(kept)}")
    if inverse != sorted(inverse):
        moved = lw.temp(f"{y.name}_moved", y_shape, y.dtype)
        lw.emit("TRANSPOSE", [reshaped(lw, out, kept)], [moved], perms=inverse)
        out = moved
    lw.emit("RESHAPE", [out], [y.name], shape=list(y.shape))


def _reverse_order(lw: Lowerer, name: str) -> str:
    """x -> -1 - x: an order-reversing bijection of a signed type (a TABLE / LOOKUP)."""
    buf = lw.schedule.buffers[name]
    tmp = lw.temp(f"{name}_rev", buf.shape, buf.dtype)
    grid = np.arange(buf.dtype.min, buf.dtype.max + 1, dtype=np.int64)
    lookup(lw, [name], -1 - grid, tmp, buf.dtype)
    return tmp
