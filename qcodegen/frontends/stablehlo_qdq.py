"""StableHLO's table for the QDQ folding (qcodegen/frontends/qdq.py; docs/schemes.md "QDQ graphs"): which ops
quantize and dequantize (`uniform_quantize` / `quant.qcast`, `uniform_dequantize` / `quant.dcast`), move data
(reshape, transpose, broadcast_in_dim, slice, reverse, pad with its value as operand 1, concatenate), contract
(dot_general, convolution: hybrid when the lhs is float), reduce (reduce, reduce_window: operand 1 the init value),
compute element-wise (add, subtract, multiply, maximum, minimum, clamp, concatenate, the interpreter's unary ops),
commute with quantization (maximum / minimum with the value at either operand, clamp with the value as operand 1,
multiply / divide by a positive constant), and where a contraction's output channels are. Constants are quantized
with the interpreter's formula (qcodegen/semantics/stablehlo.py) and evaluated with the float evaluator.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Op
from ..semantics import stablehlo as sem
from .qdq import QdqFormat
from .qdq import fold_qdq as fold_format

QUANTIZE, DEQUANTIZE = "stablehlo.uniform_quantize", "stablehlo.uniform_dequantize"


def _output_channel_axis(graph: Graph, op: Op, weight_axis: int | None) -> int | None:
    """The result axis of the accumulator's per-channel scale: the output feature dimension of a convolution (weights
    per tensor or per output feature), the position of the quantized free rhs dimension in a dot_general's result
    (the last axis for per-tensor weights)."""
    rank = len(graph.tensors[op.outputs[0]].shape)
    if op.kind == "stablehlo.convolution":
        d = op.attrs["dimension_numbers"]
        if weight_axis is not None and weight_axis != d.kernel_output_feature_dimension:
            return None
        return int(d.output_feature_dimension)
    if weight_axis is None:
        return rank - 1
    d = op.attrs["dot_dimension_numbers"]
    rb, rc = list(d.rhs_batching_dimensions), list(d.rhs_contracting_dimensions)
    rf = [i for i in range(len(graph.tensors[op.inputs[1]].shape)) if i not in rb + rc]
    return rank - len(rf) + rf.index(weight_axis) if weight_axis in rf else None


def _transpose_axis(op: Op, axis: int) -> int | None:
    return list(op.attrs["permutation"]).index(axis) if op.kind == "stablehlo.transpose" else None


def _evaluate(graph: Graph, op: Op, args: list[np.ndarray]) -> np.ndarray:
    from .stablehlo_float import evaluate_op  # stablehlo_float imports the front end, which imports us
    return evaluate_op(graph, op, args)


STABLEHLO = QdqFormat(
    name="stablehlo",
    quantize=frozenset({QUANTIZE, "quant.qcast"}),
    dequantize=frozenset({DEQUANTIZE, "quant.dcast"}),
    requantize_kind=QUANTIZE,
    dequantize_kind=DEQUANTIZE,
    retype_kind="stablehlo.bitcast_convert",
    movement={"stablehlo.reshape": (), "stablehlo.transpose": (), "stablehlo.broadcast_in_dim": (),
              "stablehlo.slice": (), "stablehlo.reverse": (), "stablehlo.pad": (1,), "stablehlo.concatenate": ()},
    contractions=frozenset({"stablehlo.dot_general", "stablehlo.convolution"}),
    reductions=frozenset({"stablehlo.reduce", "stablehlo.reduce_window"}),
    elementwise=frozenset(f"stablehlo.{n}" for n in (*sem.UNARY, "add", "subtract", "multiply", "maximum", "minimum",
                                                     "clamp", "concatenate")),
    activations={"stablehlo.maximum": None, "stablehlo.minimum": None, "stablehlo.clamp": 1},
    scalings={"stablehlo.multiply": False, "stablehlo.divide": True},
    bias_add="stablehlo.add",
    output_channel_axis=_output_channel_axis,
    quantize_values=sem.quantize,
    evaluate=_evaluate,
    transpose_axis=_transpose_axis,
    hybrid=True,
)


def fold_qdq(graph: Graph) -> Graph:
    """Fold the QDQ patterns of a StableHLO graph in place (qcodegen/frontends/qdq.py)."""
    return fold_format(graph, STABLEHLO)
