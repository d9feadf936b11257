"""Import of the float operators of QDQ-format models (docs/onnx.md "QDQ models"): the ops between
DequantizeLinear and QuantizeLinear, as float Graph ops that the QDQ folding (qcodegen/frontends/onnx_qdq.py)
turns into the operator-format ops.

Conv -> onnx.Conv [x, w] (NCHW, OIHW weights, the geometry attributes of QLinearConv); ConvTranspose ->
onnx.ConvTranspose [x, w] (IOHW weights, TOSA's stride / out_pad); MatMul -> onnx.MatMul [a, b]; Gemm -> onnx.Gemm
[a, b] (alpha, trans_a, trans_b). A bias (Conv's and ConvTranspose's B, Gemm's C) becomes an onnx.Add after the
product -- the bias add of the folding's pattern -- Conv's reshaped to [1, M, 1, 1] so that it broadcasts
along the channels. Add, Mul, Sub -> onnx.Add / onnx.Mul / onnx.Sub (numpy broadcasting); Relu, Clip (min, max
operands), LeakyRelu (alpha), HardSigmoid (alpha, beta), HardSwish, Sigmoid, Tanh, Softmax (axis, opset),
GlobalAveragePool, AveragePool (window attributes, count_include_pad) -> one op each; ReduceMean over the spatial
axes -> onnx.GlobalAveragePool (+ onnx.Reshape without keepdims). MaxPool and Pad read float
data too (onnx_ops_nn, onnx_ops_shape).
"""

from __future__ import annotations

import numpy as np

from ..errors import shorten
from ..ir.graph import Tensor
from ..ir.limits import element_count
from .onnx_geometry import window_2d
from .onnx_import import Importer, importer
from .onnx_model import Node
from .onnx_ops_nn import matmul_shape
from .onnx_ops_quant import broadcast, scalar_operand


def _float(imp: Importer, i: int, what: str) -> Tensor:
    t = imp.tensor_in(i)
    if t.dtype.name != "f32":
        raise imp.unsupported(f"{what} {shorten(t.name)} has type {t.dtype}; float operators read float32 (QDQ "
                              "models: a DequantizeLinear result)")
    return t


def _with_bias(imp: Importer, kind: str, inputs: list[str], shape: tuple[int, ...], bias: str | None,
               bias_shape: tuple[int, ...], **attrs: object) -> None:
    """The product, then its bias add (the folding's pattern) when there is a bias."""
    y = imp.name_out()
    element_count(shape, f"{imp.label}: output")
    if 0 in shape:
        raise imp.error(f"the output {list(shape)} is empty")
    if bias is None:
        imp.new_tensor(y, shape, "f32")
        imp.emit(kind, inputs, [y], **attrs)
        return
    b = imp.tensor(bias)
    if b.size != int(np.prod(bias_shape)) and b.size != 1:
        raise imp.error(f"bias {shorten(bias)} of shape {list(b.shape)} does not match the output's {list(shape)}")
    if b.shape != bias_shape and b.size > 1:
        shaped = imp.new_tensor(imp.fresh(f"{bias}_shaped"), bias_shape, b.dtype.name)
        imp.emit("Reshape", [bias], [shaped.name], shape=list(bias_shape))
        bias = shaped.name
    product = imp.new_tensor(imp.fresh(f"{y}_product"), shape, "f32")
    imp.emit(kind, inputs, [product.name], **attrs).name = imp.label_name(y)  # errors name the ONNX node
    imp.new_tensor(y, shape, "f32")
    imp.emit("Add", [product.name, bias], [y])


@importer("Conv")
def conv(imp: Importer, node: Node) -> None:
    imp.counts((2, 3))
    x, w = _float(imp, 0, "input"), _float(imp, 1, "weights")
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise imp.unsupported(f"only 2-D convolutions (rank-4 data and weights) are supported, got x "
                              f"{list(x.shape)}, w {list(w.shape)}")
    group = int(imp.attr("group", 1))
    m, cg, kh, kw = w.shape
    if group < 1 or x.shape[1] != cg * group or m % group:
        raise imp.error(f"x has {x.shape[1]} channels, weights {list(w.shape)} and group {group} do not match")
    win = window_2d(imp, x.shape[2:], (kh, kw))
    shape = (x.shape[0], m, *win.out_hw)
    _with_bias(imp, "Conv", [x.name, w.name], shape, imp.name_in(2, required=False), (1, m, 1, 1), group=group,
               layout="NCHW", **win.attrs())


@importer("ConvTranspose")
def conv_transpose(imp: Importer, node: Node) -> None:
    """2-D, group 1, no dilation: -> onnx.ConvTranspose [x, w (C, M, kH, kW)] with TOSA's geometry: stride and
    out_pad [top, bottom, left, right] = [-pad_top, output_padding_h - pad_bottom, -pad_left, output_padding_w -
    pad_right] (negative values crop)."""
    imp.counts((2, 3))
    x, w = _float(imp, 0, "input"), _float(imp, 1, "weights")
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise imp.unsupported(f"only 2-D transposed convolutions (rank-4 data and weights) are supported, got x "
                              f"{list(x.shape)}, w {list(w.shape)}")
    c, m, kh, kw = w.shape
    if int(imp.attr("group", 1)) != 1 or imp.ints_attr("dilations", 2, 1) != [1, 1]:
        raise imp.unsupported("ConvTranspose with groups or dilations (supported: group 1, dilations 1)")
    if str(imp.attr("auto_pad", "NOTSET")) not in ("NOTSET", "VALID") or imp.attr("output_shape", None, list):
        raise imp.unsupported("ConvTranspose with auto_pad SAME_* or output_shape (supported: explicit pads)")
    if x.shape[1] != c or imp.ints_attr("kernel_shape", 2, 0) not in ([0, 0], [kh, kw]):
        raise imp.error(f"x has {x.shape[1]} channels; weights {list(w.shape)} and kernel_shape do not match")
    sy, sx = imp.ints_attr("strides", 2, 1)
    top, left, bottom, right = imp.ints_attr("pads", 4, 0) if imp.attr("auto_pad", "NOTSET") == "NOTSET" else [0] * 4
    extra_h, extra_w = imp.ints_attr("output_padding", 2, 0)
    if min(sy, sx) < 1 or min(top, left, bottom, right, extra_h, extra_w) < 0:
        raise imp.error(f"strides {[sy, sx]}, pads and output_padding must not be negative")
    out_pad = [-top, extra_h - bottom, -left, extra_w - right]
    if min(out_pad[:2]) <= -kh or min(out_pad[2:]) <= -kw:
        raise imp.unsupported(f"pads {[top, left, bottom, right]} of a whole kernel or more")
    oh, ow = (x.shape[2] - 1) * sy + kh + out_pad[0] + out_pad[1], (x.shape[3] - 1) * sx + kw + out_pad[2] + out_pad[3]
    if oh < 1 or ow < 1:
        raise imp.error(f"the output {oh}x{ow} is empty")
    _with_bias(imp, "ConvTranspose", [x.name, w.name], (x.shape[0], m, oh, ow), imp.name_in(2, required=False),
               (1, m, 1, 1), stride=[sy, sx], out_pad=out_pad, layout="NCHW")


@importer("MatMul")
def matmul(imp: Importer, node: Node) -> None:
    imp.counts((2, 2))
    a, b = _float(imp, 0, "A"), _float(imp, 1, "B")
    imp.new_tensor(imp.name_out(), matmul_shape(imp, a, b), "f32")
    imp.emit("MatMul", [a.name, b.name], [imp.name_out()])


@importer("Gemm")
def gemm(imp: Importer, node: Node) -> None:
    imp.counts((2, 3))
    a, b = _float(imp, 0, "A"), _float(imp, 1, "B")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise imp.error(f"A and B must be 2-D, got {list(a.shape)} and {list(b.shape)}")
    trans_a, trans_b = int(imp.attr("transA", 0)), int(imp.attr("transB", 0))
    m, k = a.shape[::-1] if trans_a else a.shape
    k2, n = b.shape[::-1] if trans_b else b.shape
    if k != k2:
        raise imp.error(f"A {list(a.shape)} (transA {trans_a}) and B {list(b.shape)} (transB {trans_b}) do not match")
    bias = imp.name_in(2, required=False)
    if bias is not None and float(imp.attr("beta", 1.0)) != 1.0:
        raise imp.unsupported(f"beta {imp.attr('beta')} with a bias C (supported: 1)")
    _with_bias(imp, "Gemm", [a.name, b.name], (m, n), bias, (1, n), alpha=float(imp.attr("alpha", 1.0)),
               trans_a=trans_a, trans_b=trans_b)


@importer("Add", "Mul", "Sub")
def binary(imp: Importer, node: Node) -> None:
    imp.counts((2, 2))
    a, b = _float(imp, 0, "A"), _float(imp, 1, "B")
    imp.new_tensor(imp.name_out(), broadcast(imp, a, b), "f32")
    imp.emit(node.op_type, [a.name, b.name], [imp.name_out()], scalar=scalar_operand(a.shape, b.shape))


@importer("Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Clip", "Softmax")
def unary(imp: Importer, node: Node) -> None:
    imp.counts((1, 3) if node.op_type == "Clip" else (1, 1))
    x = _float(imp, 0, "input")
    inputs, attrs = [x.name], {}
    if node.op_type == "Clip":
        if imp.opset < 11:
            raise imp.unsupported("Clip before opset 11 (bounds as attributes)")
        for i, fill in ((1, -np.inf), (2, np.inf)):
            name = imp.name_in(i, required=False)
            bound = imp.const_in(i, "bound") if name else np.float32(fill)
            inputs.append(imp.tensor(name).name if name else _constant(imp, f"{x.name}_clip{i}", bound))
    if node.op_type == "LeakyRelu":
        attrs["alpha"] = float(np.float32(imp.attr("alpha", 0.01)))
    if node.op_type == "HardSigmoid":
        attrs.update(alpha=float(np.float32(imp.attr("alpha", 0.2))), beta=float(np.float32(imp.attr("beta", 0.5))))
    if node.op_type == "Softmax":
        rank = len(x.shape)
        axis = int(imp.attr("axis", 1 if imp.opset < 13 else -1))
        if not -rank <= axis < rank:
            raise imp.error(f"axis {axis} is out of range for rank {rank}")
        attrs.update(axis=axis % rank, opset=imp.opset)
    imp.new_tensor(imp.name_out(), x.shape, "f32")
    imp.emit(node.op_type, inputs, [imp.name_out()], **attrs)


def _constant(imp: Importer, base: str, value: np.ndarray) -> str:
    name = imp.fresh(base)
    imp.graph.tensors[name] = Tensor(name, (), "f32", data=np.asarray(value, np.float32))
    return name


@importer("GlobalAveragePool", "AveragePool")
def average_pool(imp: Importer, node: Node) -> None:
    imp.counts((1, 1))
    x = _float(imp, 0, "input")
    if len(x.shape) != 4:
        raise imp.unsupported(f"only 2-D pooling (rank-4 data) is supported, got {list(x.shape)}")
    n, c = x.shape[:2]
    if node.op_type == "GlobalAveragePool":
        imp.new_tensor(imp.name_out(), (n, c, 1, 1), "f32")
        imp.emit("GlobalAveragePool", [x.name], [imp.name_out()], layout="NCHW")
        return
    win = window_2d(imp, x.shape[2:], imp.ints_attr("kernel_shape", 2, 0), ceil_mode=bool(imp.attr("ceil_mode", 0)),
                    dilations_allowed=False)
    imp.new_tensor(imp.name_out(), (n, c, *win.out_hw), "f32")
    imp.emit("AveragePool", [x.name], [imp.name_out()], layout="NCHW",
             count_include_pad=int(imp.attr("count_include_pad", 0)), **win.attrs())


@importer("ReduceMean")
def reduce_mean(imp: Importer, node: Node) -> None:
    """Over the spatial axes of rank-4 data: the global average pool (keepdims 0: then a reshape)."""
    imp.counts((1, 2))
    x = _float(imp, 0, "input")
    rank = len(x.shape)
    axes = imp.int_list_in(1, "axes", required=False) if imp.opset >= 18 else imp.attr("axes", None, list)
    if axes is None and imp.opset >= 18 and int(imp.attr("noop_with_empty_axes", 0)):
        raise imp.unsupported("ReduceMean with noop_with_empty_axes and no axes (an identity)")
    if axes is not None and any(not -rank <= int(a) < rank for a in axes):
        raise imp.error(f"axes {list(axes)} are out of range for rank {rank}")
    axes = sorted({int(a) % rank for a in axes} if axes is not None else range(rank))
    if rank != 4 or axes != [2, 3]:
        raise imp.unsupported(f"ReduceMean over axes {axes} of rank-{rank} data (supported: the spatial axes "
                              "[2, 3] of NCHW data, as GlobalAveragePool)")
    n, c = x.shape[:2]
    keep = bool(imp.attr("keepdims", 1))
    pooled = imp.new_tensor(imp.name_out() if keep else imp.fresh(f"{imp.name_out()}_pooled"), (n, c, 1, 1), "f32")
    imp.emit("GlobalAveragePool", [x.name], [pooled.name], layout="NCHW")
    if not keep:
        imp.new_tensor(imp.name_out(), (n, c), "f32")
        imp.emit("Reshape", [pooled.name], [imp.name_out()], shape=[n, c])
