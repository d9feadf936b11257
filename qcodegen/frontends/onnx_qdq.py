"""QDQ-format ONNX models (docs/onnx.md "QDQ models"): ONNX's table for the shared QDQ folding
(qcodegen/frontends/qdq.py), then the folded ops renamed to the operator-format ops that onnxruntime's CPU
execution provider fuses the same node groups into, so that both formats lower through the same rules.

The table: QuantizeLinear / DequantizeLinear quantize and dequantize; Reshape (also Flatten, Squeeze,
Unsqueeze, Identity), Transpose, Concat, Slice (also Split), Gather (also Resize nearest), Pad (its fill value
quantized) and MaxPool move data (MaxPool commutes with the monotone dequantization); Conv, ConvTranspose, MatMul
and Gemm contract (their bias is an Add after the product: onnx_ops_float), a dequantized int32 bias at the
accumulator's float32 scale taken as its stored integers, as onnxruntime's fused kernels add them; Add, Mul, Sub,
Sigmoid, Tanh, HardSigmoid, HardSwish, LeakyRelu, Softmax, the average pools, Resize (linear, cubic), Relu, Clip
and Concat (of differently quantized inputs, which it cannot move) compute element-wise on the quantized operands;
Relu and Clip commute with quantization (monotone, constant bounds).

After the folding (onnxruntime's fusions, measured in docs/onnx.md):
  Conv [+ bias add + requantization] -> QLinearConv; ConvTranspose [+ ...] -> onnx.QLinearConvTranspose (no
  operator-format op: onnxruntime runs it in float); MatMul -> QLinearMatMul; Gemm [+ bias ...] -> QGemm;
  Add / Mul -> QLinearAdd / QLinearMul (an int8 Add of a dequantized constant, as quantize_static writes a
  MatMul's bias, marked float_path: onnxruntime runs it in float, measured); Concat of differently quantized
  inputs -> QLinearConcat; Sigmoid, LeakyRelu, Softmax, GlobalAveragePool (also ReduceMean over H, W),
  AveragePool -> their QLinear operators; Sub, Tanh, HardSigmoid, HardSwish and ResizeInterpolate stay, on quantized
  data (onnxruntime's float path, tabulated or emulated); Relu, Clip and the remaining dequantize -> quantize pairs ->
  onnx.Requantize (8- or 16-bit: dequantize in float32, clamp to the bounds, MlasQuantizeLinear: a table, exact).
  4-bit constant weights of the products are stored as int8 (widen_4bit_weights).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..ir.graph import Graph, Op
from ..ir.quant import QuantType, same_type
from ..semantics import onnxruntime as ort
from .qdq import QdqFormat, fold_qdq, prune_dead_ops

REQUANTIZE = "onnx.Requantize"
_RENAMES = {"onnx.Conv": "onnx.QLinearConv", "onnx.ConvTranspose": "onnx.QLinearConvTranspose",
            "onnx.MatMul": "onnx.QLinearMatMul", "onnx.Gemm": "onnx.QGemm",
            "onnx.Add": "onnx.QLinearAdd", "onnx.Mul": "onnx.QLinearMul", "onnx.Sigmoid": "onnx.QLinearSigmoid",
            "onnx.LeakyRelu": "onnx.QLinearLeakyRelu", "onnx.Softmax": "onnx.QLinearSoftmax",
            "onnx.GlobalAveragePool": "onnx.QLinearGlobalAveragePool",
            "onnx.AveragePool": "onnx.QLinearAveragePool"}
_CONTRACTIONS = ("onnx.Conv", "onnx.ConvTranspose", "onnx.MatMul", "onnx.Gemm")
_PRODUCTS = tuple(_RENAMES[k] for k in _CONTRACTIONS)
# no QLinear kernels: quantized, these mean onnxruntime's float path (tabulated)
_FLOAT_PATH = ("onnx.Sub", "onnx.Tanh", "onnx.HardSigmoid", "onnx.HardSwish", "onnx.ResizeInterpolate")
_FLOAT_OPS = {*_RENAMES, *_FLOAT_PATH, "onnx.Relu", "onnx.Clip"}  # onnx_ops_float's kinds


def _output_channel_axis(graph: Graph, op: Op, weight_axis: int | None) -> int | None:
    """Conv: channel axis 1 of NCHW (weights per tensor or along their output axis 0; ConvTranspose's: axis 1);
    Gemm: the columns (B's axis 1, or 0 when transposed); MatMul: the columns of a 2-D B."""
    if op.kind == "onnx.Conv":
        return 1 if weight_axis in (None, 0) else None
    if op.kind == "onnx.ConvTranspose":  # weights [C, M, kH, kW]: output channels along axis 1
        return 1 if weight_axis in (None, 1) else None
    rank = len(graph.tensors[op.outputs[0]].shape)
    if op.kind == "onnx.Gemm":
        return 1 if weight_axis in (None, 0 if op.attrs.get("trans_b") else 1) else None
    b_rank = len(graph.tensors[op.inputs[1]].shape)
    return rank - 1 if weight_axis is None or (b_rank == 2 and weight_axis == 1) else None


def quantize_values(values: np.ndarray, q: QuantType) -> np.ndarray:
    """QuantizeLinear as onnxruntime computes it (MLAS: float32 division, clamp, round half to even), any
    granularity."""
    values = np.asarray(values, np.float32)
    scales, zps = q.expand(values.shape)
    v = ort.f32_quotient(values, scales.astype(np.float32))
    v = np.clip(v, (q.storage_min - zps).astype(np.float32), (q.storage_max - zps).astype(np.float32))
    return np.rint(v).astype(np.int64) + zps


def dequantize_values(stored: np.ndarray, q: QuantType) -> np.ndarray:
    """DequantizeLinear: (x - zero point) * scale in float32."""
    stored = np.asarray(stored, np.int64)
    scales, zps = q.expand(stored.shape)
    return ((stored - zps).astype(np.float32) * scales.astype(np.float32)).astype(np.float32)


def _evaluate(graph: Graph, op: Op, args: list[np.ndarray]) -> np.ndarray:
    """The value of the ops the folding meets on constants (bias and bound chains)."""
    out = graph.tensors[op.outputs[0]]
    if op.kind == "onnx.DequantizeLinear":
        return dequantize_values(args[0], graph.tensors[op.inputs[0]].quant)
    if op.kind == "onnx.Reshape":
        return np.reshape(args[0], out.shape)
    if op.kind == "onnx.Transpose":
        return np.transpose(args[0], op.attrs["perm"])
    raise UnsupportedError(f"{graph.op_label(op)}: {op.kind} is not evaluated on constants")


def _transpose_axis(op: Op, axis: int) -> int | None:
    return list(op.attrs["perm"]).index(axis) if op.kind == "onnx.Transpose" else None


ONNX = QdqFormat(
    name="onnx",
    quantize=frozenset({"onnx.QuantizeLinear"}),
    dequantize=frozenset({"onnx.DequantizeLinear"}),
    requantize_kind=REQUANTIZE,
    dequantize_kind="onnx.DequantizeLinear",
    retype_kind="onnx.Retype",  # never created: ONNX has no scalings in its table
    movement={"onnx.Reshape": (), "onnx.Transpose": (), "onnx.Concat": (), "onnx.Slice": (), "onnx.MaxPool": (),
              "onnx.Pad": (1,), "onnx.Gather": ()},
    contractions=frozenset(_CONTRACTIONS),
    reductions=frozenset(),
    elementwise=frozenset({"onnx.Add", "onnx.Mul", "onnx.Sub", "onnx.Sigmoid", "onnx.Tanh", "onnx.LeakyRelu",
                           "onnx.HardSigmoid", "onnx.HardSwish", "onnx.Softmax", "onnx.GlobalAveragePool",
                           "onnx.AveragePool", "onnx.Relu", "onnx.Clip", "onnx.Concat", "onnx.ResizeInterpolate"}),
    activations={"onnx.Relu": 0, "onnx.Clip": 0},
    scalings={},
    bias_add="onnx.Add",
    output_channel_axis=_output_channel_axis,
    quantize_values=quantize_values,
    evaluate=_evaluate,
    transpose_axis=_transpose_axis,
    integer_bias=True,
)


class _Rewrite:
    """Folded ops -> operator-format ops (module docstring)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def users(self, name: str) -> list[Op]:
        return [op for op in self.graph.ops if name in op.inputs]

    def run(self) -> None:
        for op in list(self.graph.ops):
            if op not in self.graph.ops or not op.outputs or self.graph.tensors[op.outputs[0]].quant is None:
                continue
            if op.kind in _CONTRACTIONS and self.graph.tensors[op.outputs[0]].dtype.name == "i32":
                self.fuse_bias(op)
            elif op.kind in ("onnx.Relu", "onnx.Clip"):
                self.clamp(op)
            elif op.kind == "onnx.Concat" and not all(
                    same_type(self.graph.tensors[n].quant, self.graph.tensors[op.outputs[0]].quant) for n in op.inputs):
                op.kind = "onnx.QLinearConcat"  # inputs of other quantizations (not moved: folded), requantized
            elif op.kind == "onnx.Add" and self.graph.tensors[op.outputs[0]].dtype.name == "i8" and any(
                    self.graph.tensors[n].is_const for n in op.inputs):
                op.attrs["float_path"] = True  # onnxruntime leaves it unfused (module docstring)
            elif op.kind == "onnx.Pad" and len(op.inputs) > 1:  # the folded fill operand -> the attribute
                op.attrs["value"] = int(np.asarray(self.graph.tensors[op.inputs[1]].data).reshape(-1)[0])
                op.inputs = op.inputs[:1]
            if op.kind in _RENAMES:
                op.kind = _RENAMES[op.kind]
        self.prune()
        self.widen_4bit_weights()
        for op in self.graph.ops:
            if (op.kind in _FLOAT_OPS and self.graph.tensors[op.outputs[0]].quant is None) or (
                    op.kind == "onnx.Pad" and len(op.inputs) > 1):
                raise UnsupportedError(f"{self.graph.op_label(op)}: float {op.kind.split('.')[-1]} outside a QDQ "
                                       "pattern (DequantizeLinear inputs, QuantizeLinear result): qcodegen compiles "
                                       "quantized models (onnxruntime.quantization.quantize_static)")

    def fuse_bias(self, op: Op) -> None:
        """contraction -> i32 accumulator, add of the i32 bias, requantization: one QLinear op with its bias."""
        acc = op.outputs[0]
        add = self.users(acc)
        requant = self.users(add[0].outputs[0]) if len(add) == 1 and add[0].kind == "onnx.Add" else []
        if op.kind == "onnx.MatMul" or len(requant) != 1 or requant[0].kind != REQUANTIZE:
            raise UnsupportedError(f"{self.graph.op_label(op)}: a {op.kind.split('.')[-1]} with a bias add is "
                                   "supported as Conv or Gemm with their bias input, requantized to 8 bits")
        bias = self.graph.tensors[add[0].inputs[1]]
        vector = bias.data[(0, slice(None), *[0] * (len(bias.shape) - 2))]  # constant but along axis 1
        name = f"{bias.name}_vector"
        self.graph.tensors[name] = type(bias)(name, (bias.shape[1],), "i32", data=vector.astype(np.int32))
        op.inputs = [*op.inputs, name]
        op.outputs = list(requant[0].outputs)
        self.graph.ops.remove(add[0])
        self.graph.ops.remove(requant[0])
        for n in (acc, add[0].outputs[0]):
            del self.graph.tensors[n]

    def clamp(self, op: Op) -> None:
        """Relu / Clip on quantized data: the requantization with float bounds (the bounds' quantized values
        dequantized: clamping before quantizing or after is the same, quantization being monotone)."""
        lo, hi = -np.inf, np.inf
        if op.kind == "onnx.Relu":
            lo = 0.0
        else:
            bounds = [self.graph.tensors[n] for n in op.inputs[1:]]
            values = [float(dequantize_values(t.data, t.quant).reshape(-1)[0]) if t.quant is not None
                      else float(np.asarray(t.data).reshape(-1)[0]) for t in bounds]
            lo, hi = values
        op.kind, op.inputs, op.attrs = REQUANTIZE, op.inputs[:1], {"min": lo, "max": hi}

    def widen_4bit_weights(self) -> None:
        """4-bit constant weights of the products (quantize_static's QInt4 / QUInt4 weight types) stored as int8:
        the same values and quantization, for the 8-bit kernels."""
        for op in self.graph.ops:
            if op.kind not in _PRODUCTS or len(op.inputs) < 2:
                continue
            w = self.graph.tensors[op.inputs[1]]
            if w.is_const and w.quant is not None and w.dtype.name in ("i4", "u4"):
                q = w.quant
                wide = QuantType("i8", q.scales, q.zero_points, axis=q.axis, block_sizes=q.block_sizes,
                                 storage_min=q.storage_min, storage_max=q.storage_max)
                self.graph.tensors[w.name] = type(w)(w.name, w.shape, "i8", wide, np.asarray(w.data, np.int8))

    def prune(self) -> None:
        """Drop ops nothing reads (the bias movement the folding left behind)."""
        prune_dead_ops(self.graph)


def fold_onnx_qdq(graph: Graph, where: str) -> Graph:
    """A QDQ model's graph in the operator-format ops (module docstring); other graphs unchanged. Errors name the
    model (`where`) and the op."""
    try:
        fold_qdq(graph, ONNX)
        _Rewrite(graph).run()
    except UnsupportedError as exc:
        raise UnsupportedError(f"{where}: {exc}") from None
    return graph
