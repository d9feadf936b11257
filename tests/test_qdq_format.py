"""The QDQ folding is format-neutral (qcodegen/frontends/qdq.py): a format other than StableHLO folds through its own
table. The toy table below spells its ops the ONNX way (QuantizeLinear / DequantizeLinear with scale and zero-point
operands, Reshape with a static shape operand, Add, Relu without operands): what an ONNX table provides."""

from __future__ import annotations

import numpy as np
import pytest

from qcodegen.errors import UnsupportedError
from qcodegen.frontends.qdq import QdqFormat, fold_qdq
from qcodegen.frontends.stablehlo_qdq import STABLEHLO
from qcodegen.ir.graph import Graph, Op, Tensor
from qcodegen.ir.quant import QuantType


def _quantize(values: np.ndarray, q: QuantType) -> np.ndarray:
    """ONNX's QuantizeLinear: round half to even after the division, then the zero point, saturated."""
    return np.clip(np.rint(np.asarray(values, np.float32) / np.float32(q.scale)) + q.zero_point, q.storage_min,
                   q.storage_max).astype(np.int64)


def _no_evaluation(graph: Graph, op: Op, args: list[np.ndarray]) -> np.ndarray:
    raise UnsupportedError(f"{op.kind} is not evaluated here")


TOY = QdqFormat(
    name="toy-onnx", quantize=frozenset({"QuantizeLinear"}), dequantize=frozenset({"DequantizeLinear"}),
    requantize_kind="QuantizeLinear", dequantize_kind="DequantizeLinear", retype_kind="Retype",
    movement={"Reshape": ()}, contractions=frozenset({"MatMul"}), reductions=frozenset(),
    elementwise=frozenset({"Add", "Relu"}), activations={"Relu": 0}, scalings={"Mul": False, "Div": True},
    bias_add="Add", output_channel_axis=lambda graph, op, axis: None, quantize_values=_quantize,
    evaluate=_no_evaluation, static_operands={"Reshape": (1,), "QuantizeLinear": (1, 2), "DequantizeLinear": (1, 2)})

QX, QY = QuantType.per_tensor("i8", 0.1, 2), QuantType.per_tensor("i8", 0.05, -3)


def _graph() -> Graph:
    """x -> Q -> DQ -> Reshape(shape) -> Add(1.0) -> Relu -> Q -> DQ -> y."""
    t = [Tensor("x", (2, 3), "f32"), Tensor("sx", (), "f32", data=np.float32(0.1)),
         Tensor("zx", (), "i8", data=np.int8(2)), Tensor("xq", (2, 3), "i8", QX), Tensor("xd", (2, 3), "f32"),
         Tensor("shape", (1,), "i32", data=np.array([6])), Tensor("r", (6,), "f32"),
         Tensor("one", (6,), "f32", data=np.ones(6, np.float32)), Tensor("s", (6,), "f32"), Tensor("t", (6,), "f32"),
         Tensor("sy", (), "f32", data=np.float32(0.05)), Tensor("zy", (), "i8", data=np.int8(-3)),
         Tensor("yq", (6,), "i8", QY), Tensor("y", (6,), "f32")]
    ops = [Op("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), Op("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
           Op("Reshape", ["xd", "shape"], ["r"]), Op("Add", ["r", "one"], ["s"]), Op("Relu", ["s"], ["t"]),
           Op("QuantizeLinear", ["t", "sy", "zy"], ["yq"]), Op("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    return Graph("toy", {x.name: x for x in t}, ops, ["x"], ["y"])


def test_toy_format_folds_through_its_table() -> None:
    graph = fold_qdq(_graph(), TOY)
    assert [(op.kind, op.inputs, op.outputs) for op in graph.ops] == [
        ("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        ("Reshape", ["xq", "shape"], ["r_q"]),  # the stored values move; the static shape stays
        ("Add", ["r_q", "one_q"], ["s"]),
        ("Relu", ["s"], ["yq"]),  # the commuting activation keeps the quantize's type and takes its result
        ("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    assert graph.tensors["r_q"].quant is QX and graph.tensors["s"].quant is QY
    assert graph.tensors["one_q"].data.tolist() == [17] * 6  # 1.0 / 0.05 - 3, the toy's quantize formula
    assert graph.tensors["shape"].data.tolist() == [6]


def test_a_graph_without_qdq_patterns_is_unchanged() -> None:
    graph = _graph()
    graph.ops = graph.ops[:1]
    graph.outputs = ["xq"]
    assert fold_qdq(graph, TOY).ops == graph.ops and fold_qdq(graph, STABLEHLO).ops == graph.ops


def test_unfolded_float_op_names_its_reason() -> None:
    """An op outside the table's kinds that reads a dequantized value is refused, naming the op."""
    graph = _graph()
    graph.ops[3].kind = "Sin"
    with pytest.raises(UnsupportedError, match="op Sin #3: float Sin between quantized values could not be folded"):
        fold_qdq(graph, TOY)
