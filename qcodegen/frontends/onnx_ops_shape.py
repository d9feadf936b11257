"""Import of the ONNX data-movement operators of quantized models. Each becomes one Graph op whose output keeps
the input's type and quantization:

Reshape, Flatten, Squeeze, Unsqueeze, Identity -> onnx.Reshape (attr shape); Transpose -> onnx.Transpose (perm);
Concat -> onnx.Concat (axis; inputs of one quantization); Pad -> onnx.Pad (pads [begin..., end...], mode
"constant" with a constant value, the stored value as attr value; float data, a QDQ model's: the value as operand
1, which the QDQ folding quantizes); Slice -> onnx.Slice (starts,
sizes, steps per axis, all normalised).
"""

from __future__ import annotations

import numpy as np

from ..errors import shorten
from ..ir.graph import Tensor
from .onnx_import import Importer, importer, same_quant
from .onnx_model import Node


def _emit_like(imp: Importer, kind: str, x: Tensor, out_shape: tuple[int, ...], **attrs: object) -> None:
    y = imp.new_tensor(imp.name_out(), out_shape, x.dtype.name, x.quant)
    imp.emit(kind, [x.name], [y.name], **attrs)


def _reshape(imp: Importer, x: Tensor, shape: tuple[int, ...]) -> None:
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise imp.error(f"cannot reshape {list(x.shape)} to {list(shape)}")
    if x.quant is not None and x.quant.kind != "per_tensor":
        raise imp.unsupported(f"reshape of {x.quant.kind} quantized {shorten(x.name)}")
    _emit_like(imp, "Reshape", x, shape, shape=list(shape))


def _axes(imp: Importer, axes: list[int], rank: int) -> list[int]:
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise imp.error(f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise imp.error(f"repeated axes {axes}")
    return out


def _axes_input(imp: Importer, i: int) -> list[int] | None:
    """Axes as an input (opset >= 13) or an attribute (earlier)."""
    if imp.opset >= 13:
        return imp.int_list_in(i, "axes", required=False)
    value = imp.attr("axes", None, list)
    return None if value is None else [int(a) for a in value]


@importer("Reshape")
def reshape(imp: Importer, node: Node) -> None:
    imp.counts((2, 2))
    x = imp.tensor_in(0)
    target = imp.int_list_in(1, "shape")
    allow_zero = bool(imp.attr("allowzero", 0))
    shape = [x.shape[i] if d == 0 and not allow_zero and i < len(x.shape) else d for i, d in enumerate(target)]
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise imp.error(f"invalid target shape {target}")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise imp.error(f"cannot reshape {list(x.shape)} to {target}")
        shape[shape.index(-1)] = x.size // known
    _reshape(imp, x, tuple(shape))


@importer("Flatten")
def flatten(imp: Importer, node: Node) -> None:
    imp.counts((1, 1))
    x = imp.tensor_in(0)
    rank = len(x.shape)
    axis = int(imp.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise imp.error(f"axis {axis} is out of range for rank {rank}")
    axis %= rank + 1
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    _reshape(imp, x, (outer, x.size // outer if outer else 0))


@importer("Squeeze")
def squeeze(imp: Importer, node: Node) -> None:
    imp.counts((1, 2))
    x = imp.tensor_in(0)
    axes = _axes_input(imp, 1)
    axes = [i for i, d in enumerate(x.shape) if d == 1] if axes is None else _axes(imp, axes, len(x.shape))
    if any(x.shape[a] != 1 for a in axes):
        raise imp.error(f"cannot squeeze axes {axes} of {list(x.shape)}")
    _reshape(imp, x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


@importer("Unsqueeze")
def unsqueeze(imp: Importer, node: Node) -> None:
    imp.counts((1, 2))
    x = imp.tensor_in(0)
    axes = _axes_input(imp, 1)
    if axes is None:
        raise imp.error("axes are required")
    rank = len(x.shape) + len(axes)
    axes = _axes(imp, axes, rank)
    dims = iter(x.shape)
    _reshape(imp, x, tuple(1 if i in axes else next(dims) for i in range(rank)))


@importer("Identity")
def identity(imp: Importer, node: Node) -> None:
    imp.counts((1, 1))
    x = imp.tensor_in(0)
    _emit_like(imp, "Reshape", x, x.shape, shape=list(x.shape))


@importer("Transpose")
def transpose(imp: Importer, node: Node) -> None:
    imp.counts((1, 1))
    x = imp.tensor_in(0)
    rank = len(x.shape)
    perm = imp.attr("perm", list(range(rank))[::-1])
    if sorted(perm) != list(range(rank)):
        raise imp.error(f"perm {perm} is not a permutation of {rank} axes")
    if x.quant is not None and x.quant.kind != "per_tensor":
        raise imp.unsupported(f"transpose of {x.quant.kind} quantized {shorten(x.name)}")
    _emit_like(imp, "Transpose", x, tuple(x.shape[p] for p in perm), perm=[int(p) for p in perm])


@importer("Concat")
def concat(imp: Importer, node: Node) -> None:
    if not node.inputs:
        raise imp.error("needs at least one input")
    parts = [imp.tensor(n) for n in node.inputs if n]
    first = parts[0]
    rank = len(first.shape)
    axis = int(imp.attr("axis", kind=int))
    if not -rank <= axis < rank:
        raise imp.error(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    for t in parts[1:]:
        if t.dtype != first.dtype or len(t.shape) != rank:
            raise imp.error(f"inputs {shorten(first.name)} and {shorten(t.name)} differ in type or rank")
        if any(t.shape[d] != first.shape[d] for d in range(rank) if d != axis):
            raise imp.error(f"input shapes {[list(p.shape) for p in parts]} differ outside axis {axis}")
        if first.quant is not None and (t.quant is None or not same_quant(t.quant, first.quant)):
            raise imp.unsupported(f"inputs {shorten(first.name)} and {shorten(t.name)} have different quantizations "
                                  "(a plain "
                                  "Concat cannot requantize; QLinearConcat can)")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in parts)
    y = imp.new_tensor(imp.name_out(), tuple(shape), first.dtype.name, first.quant)
    imp.emit("Concat", [t.name for t in parts], [y.name], axis=axis)


@importer("Pad")
def pad(imp: Importer, node: Node) -> None:
    imp.counts((1, 4))
    x = imp.tensor_in(0)
    rank = len(x.shape)
    mode = imp.attr("mode", "constant")
    if mode != "constant":
        raise imp.unsupported(f"Pad mode {shorten(mode)} is not supported (supported: constant)")
    if imp.opset >= 11:
        pads = imp.int_list_in(1, "pads")
        value = imp.const_in(2, "constant_value", required=False)
        axes = imp.int_list_in(3, "axes", required=False)
    else:
        pads, value, axes = [int(p) for p in imp.attr("pads", kind=list)], np.float32(imp.attr("value", 0.0)), None
    axes = list(range(rank)) if axes is None else _axes(imp, axes, rank)
    if len(pads) != 2 * len(axes):
        raise imp.error(f"{len(pads)} pads for {len(axes)} axes")
    full = [0] * (2 * rank)
    for j, a in enumerate(axes):
        full[a], full[rank + a] = pads[j], pads[len(axes) + j]
    if any(p < 0 for p in full):
        raise imp.unsupported(f"negative pads {full} (cropping) are not supported")
    stored = 0 if value is None else np.asarray(value).reshape(-1)
    if np.size(stored) > 1:
        raise imp.error("constant_value must be a scalar")
    shape = tuple(d + full[i] + full[rank + i] for i, d in enumerate(x.shape))
    if x.dtype.name == "f32":  # a QDQ model's: the fill value is an operand, quantized by the QDQ folding
        fill = imp.fresh(f"{imp.name_out()}_fill")
        imp.graph.tensors[fill] = Tensor(fill, (), "f32", data=np.float32(np.asarray(stored).reshape(-1)[0]
                                                                           if np.size(stored) else 0.0))
        y = imp.new_tensor(imp.name_out(), shape, "f32")
        imp.emit("Pad", [x.name, fill], [y.name], pads=full)
        return
    stored = int(np.asarray(stored).reshape(-1)[0]) if np.size(stored) else 0
    if x.quant is None or x.quant.kind != "per_tensor":
        raise imp.unsupported(f"Pad of {x.dtype} data {shorten(x.name)} that is not quantized per tensor")
    _emit_like(imp, "Pad", x, shape, pads=full, value=stored)


@importer("Slice")
def slice_(imp: Importer, node: Node) -> None:
    imp.counts((3, 5))
    x = imp.tensor_in(0)
    rank = len(x.shape)
    starts, ends = imp.int_list_in(1, "starts"), imp.int_list_in(2, "ends")
    axes = imp.int_list_in(3, "axes", required=False) or list(range(len(starts)))
    steps = imp.int_list_in(4, "steps", required=False) or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise imp.error("starts, ends, axes and steps differ in length")
    axes = _axes(imp, axes, rank)
    begin, size, stride = [0] * rank, list(x.shape), [1] * rank
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        if st <= 0:
            raise imp.unsupported(f"Slice step {st} (only positive steps are supported)")
        dim = x.shape[a]
        s = min(max(s + dim if s < 0 else s, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        begin[a], stride[a], size[a] = s, st, max(0, -(-(e - s) // st))
    if any(n == 0 for n in size):
        raise imp.unsupported("Slice with an empty result")
    if x.quant is not None and x.quant.kind != "per_tensor":
        raise imp.unsupported(f"Slice of {x.quant.kind} quantized {shorten(x.name)}")
    _emit_like(imp, "Slice", x, tuple(size), begin=begin, steps=stride)
