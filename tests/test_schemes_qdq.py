"""QDQ graphs (docs/schemes.md "QDQ graphs"): float ops between uniform_quantize -> uniform_dequantize pairs fold
into quantized ops (qcodegen/frontends/stablehlo_qdq.py); the reverse decomposition and the float evaluator
(qcodegen/frontends/stablehlo_float.py) give the float definition that `qcodegen verify --against float`
(qcodegen/verify/float_accuracy.py) measures the generated C against.

Accuracy asserted here (verify --against float, tolerance 0): the elements where the C differs from the float
definition, counted on seeded inputs, and that every one of them is an f32 tie (the float32 evaluation and the
exactly rounded value differ there) -- except for the blockwise example, whose int16 block ratios move the value
before the final rounding by at most its recorded bound (tests/test_schemes_subchannel.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from qcodegen.cli import main
from qcodegen.compiler import plan
from qcodegen.errors import UnsupportedError
from qcodegen.frontends import load_model
from qcodegen.frontends.mlir.ast import ConvDimensionNumbers, DotDimensionNumbers
from qcodegen.frontends.stablehlo import convert, load_programs
from qcodegen.frontends.stablehlo_float import decompose, evaluate, float_reference
from qcodegen.frontends.stablehlo_qdq import fold_qdq
from qcodegen.ir.graph import Graph, Op, Tensor
from qcodegen.ir.quant import QuantType
from qcodegen.testing import verify_planned

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
from make_scheme_examples import qdq_mlp  # noqa: E402

Q_X = "!quant.uniform<i8:f32, 0.02:-3>"
Q_W = "!quant.uniform<i8:f32:1, {0.004, 0.005, 0.0035}>"
Q_Y = "!quant.uniform<i8:f32, 0.01:-128>"
Q_W1 = "!quant.uniform<i8:f32, 0.004>"

DENSE = f"""
func.func @main(%x: tensor<1x4xf32>) -> tensor<1x3xf32> {{
  %w = stablehlo.constant dense<[[0.1, -0.2, 0.3], [0.06, 0.5, -0.4], [0.2, 0.2, 0.2], [-0.3, 0.1, 0.0]]>
    : tensor<4x3xf32>
  %b = stablehlo.constant dense<[0.01, -0.02, 0.3]> : tensor<3xf32>
  %xq = stablehlo.uniform_quantize %x : (tensor<1x4xf32>) -> tensor<1x4x{Q_X}>
  %xd = stablehlo.uniform_dequantize %xq : (tensor<1x4x{Q_X}>) -> tensor<1x4xf32>
  %wq = stablehlo.uniform_quantize %w : (tensor<4x3xf32>) -> tensor<4x3x{Q_W}>
  %wd = stablehlo.uniform_dequantize %wq : (tensor<4x3x{Q_W}>) -> tensor<4x3xf32>
  %d = stablehlo.dot_general %xd, %wd, contracting_dims = [1] x [0]
    : (tensor<1x4xf32>, tensor<4x3xf32>) -> tensor<1x3xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<1x3xf32>
  %s = stablehlo.add %d, %bb : tensor<1x3xf32>
  %z = stablehlo.constant dense<0.0> : tensor<1x3xf32>
  %r = stablehlo.maximum %s, %z : tensor<1x3xf32>
  %yq = stablehlo.uniform_quantize %r : (tensor<1x3xf32>) -> tensor<1x3x{Q_Y}>
  %y = stablehlo.uniform_dequantize %yq : (tensor<1x3x{Q_Y}>) -> tensor<1x3xf32>
  func.return %y : tensor<1x3xf32>
}}
"""


def _write(tmp_path: Path, text: str, name: str = "model.mlir") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _as_written(path: Path) -> Graph:
    program = convert(load_programs(path)[0])
    program.graph.outputs = list(program.returns)
    return program.graph


def _summary(graph: Graph) -> list[tuple[str, str]]:
    """(op kind, result type) per op, types as `describe()` strings (f32 for float)."""
    out = []
    for op in graph.ops:
        t = graph.tensors[op.outputs[0]]
        out.append((op.kind.split(".", 1)[1], t.quant.describe() if t.quant else str(t.dtype)))
    return out


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------------------------------ folding


def test_dense_bias_relu_folds(tmp_path: Path) -> None:
    """dq(x) . dq(w) + float bias, ReLU, quantize: a dot_general into the i32 accumulator type (scale 0.02 * s_w per
    column), an i32 add of the bias quantized to it, a requantization to T and a MAXIMUM with quantize_T(0)."""
    path = _write(tmp_path, DENSE)
    graph = load_model(path)
    assert _summary(graph) == [
        ("uniform_quantize", "i8 scale=0.02 zp=-3"), ("dot_general", "i32 per_axis (3 scales)"),
        ("add", "i32 per_axis (3 scales)"), ("uniform_quantize", "i8 scale=0.01 zp=-128"),
        ("maximum", "i8 scale=0.01 zp=-128"), ("uniform_dequantize", "f32")]
    dot, add, relu = graph.ops[1], graph.ops[2], graph.ops[4]
    acc = graph.tensors[dot.outputs[0]].quant
    np.testing.assert_allclose(acc.scales, [0.02 * 0.004, 0.02 * 0.005, 0.02 * 0.0035])
    assert acc.axis == 1 and not np.any(acc.zero_points)
    # weights: w / s_w rounded half to even (no ties here); column 2: 0.3 / 0.0035 = 85.7 -> 86, -0.4 / 0.0035 = -114.3
    w = graph.tensors[dot.inputs[1]]
    assert w.data.tolist() == [[25, -40, 86], [15, 100, -114], [50, 40, 57], [-75, 20, 0]]
    # bias / (0.02 s_w): 0.01 / 0.00008 = 125, -0.02 / 0.0001 = -200, 0.3 / 0.00007 = 4285.7 -> 4286
    assert graph.tensors[add.inputs[1]].data.tolist() == [[125, -200, 4286]]
    assert graph.tensors[relu.inputs[1]].data.tolist() == [[-128, -128, -128]]  # quantize_T(0.0) = zero point
    sched = plan(graph)
    assert verify_planned(sched, samples=4).bit_exact


def test_transposed_per_channel_weights(tmp_path: Path) -> None:
    """PT2E's linear layer: weights [out, in] per channel on axis 0, dequantized, transposed: the transpose moves
    the stored values (axis 0 -> 1) and folds with the constant; the same program as DENSE results."""
    w_t = "[[0.1, 0.06, 0.2, -0.3], [-0.2, 0.5, 0.2, 0.1], [0.3, -0.4, 0.2, 0.0]]"
    q_t = Q_W.replace("f32:1,", "f32:0,")
    text = DENSE.replace(f"%wq = stablehlo.uniform_quantize %w : (tensor<4x3xf32>) -> tensor<4x3x{Q_W}>",
                         f"%wt = stablehlo.constant dense<{w_t}> : tensor<3x4xf32>\n"
                         f"  %wtq = stablehlo.uniform_quantize %wt : (tensor<3x4xf32>) -> tensor<3x4x{q_t}>\n"
                         f"  %wtd = stablehlo.uniform_dequantize %wtq : (tensor<3x4x{q_t}>) -> tensor<3x4xf32>")
    text = text.replace(f"%wd = stablehlo.uniform_dequantize %wq : (tensor<4x3x{Q_W}>) -> tensor<4x3xf32>",
                        "%wd = stablehlo.transpose %wtd, dims = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>")
    assert "%wq" not in text
    graph = load_model(_write(tmp_path, text))
    reference = load_model(_write(tmp_path, DENSE, "dense.mlir"))
    assert _summary(graph) == _summary(reference)
    assert graph.tensors[graph.ops[1].inputs[1]].data.tolist() == reference.tensors[
        reference.ops[1].inputs[1]].data.tolist()
    assert verify_planned(plan(graph), samples=2).bit_exact


SUB_W = "!quant.uniform<i8<-8:7>:f32:{0:2, 1:1}, {{0.05, 0.1}, {0.1, 0.2}}>"
SUB_CHANNEL = f"""
func.func @main(%x: tensor<1x4xf32>) -> tensor<1x2xf32> {{
  %w = stablehlo.constant dense<[[0.1, 0.2], [0.3, -0.4], [0.06, 0.6], [-0.7, 0.8]]> : tensor<4x2xf32>
  %wq = stablehlo.uniform_quantize %w : (tensor<4x2xf32>) -> tensor<4x2x{SUB_W}>
  %wd = stablehlo.uniform_dequantize %wq : (tensor<4x2x{SUB_W}>) -> tensor<4x2xf32>
  %xq = stablehlo.uniform_quantize %x : (tensor<1x4xf32>) -> tensor<1x4x{Q_X}>
  %xd = stablehlo.uniform_dequantize %xq : (tensor<1x4x{Q_X}>) -> tensor<1x4xf32>
  %d = stablehlo.dot_general %xd, %wd, contracting_dims = [1] x [0]
    : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  %yq = stablehlo.uniform_quantize %d : (tensor<1x2xf32>) -> tensor<1x2x{Q_Y}>
  %y = stablehlo.uniform_dequantize %yq : (tensor<1x2x{Q_Y}>) -> tensor<1x2xf32>
  func.return %y : tensor<1x2xf32>
}}
"""


def test_sub_channel_weights(tmp_path: Path) -> None:
    """Float weights quantized to a sub-channel type at compile time (blocks of 2 rows, one scale per block and
    column): 0.1 / 0.05 = 2, 0.3 / 0.05 = 6 | 0.2 / 0.1 = 2, -0.4 / 0.1 = -4 | 0.06 / 0.1 = 0.6 -> 1, -0.7 / 0.1 = -7 |
    0.6 / 0.2 = 3, 0.8 / 0.2 = 4; the dot_general then has the quantize's type as result (blockwise lowering)."""
    graph = load_model(_write(tmp_path, SUB_CHANNEL))
    assert _summary(graph) == [("uniform_quantize", "i8 scale=0.02 zp=-3"),
                               ("dot_general", "i8 scale=0.01 zp=-128"), ("uniform_dequantize", "f32")]
    w = graph.tensors[graph.ops[1].inputs[1]]
    assert w.quant.kind == "sub_channel" and w.data.tolist() == [[2, 2], [6, -4], [1, 3], [-7, 4]]
    assert verify_planned(plan(graph), samples=4).bit_exact


def test_weight_only_qdq_becomes_hybrid(tmp_path: Path) -> None:
    """A float lhs (not dequantized) times dequantized constant weights: the hybrid op (float lhs, quantized
    constant rhs, float result; docs/schemes.md "Hybrid weight-only ops"), not a refusal."""
    text = DENSE.replace("%d = stablehlo.dot_general %xd, %wd", "%d = stablehlo.dot_general %x, %wd").replace(
        "%s = stablehlo.add %d, %bb : tensor<1x3xf32>", "%s = stablehlo.add %bb, %bb : tensor<1x3xf32>").replace(
        "func.return %y : tensor<1x3xf32>", "func.return %d : tensor<1x3xf32>")
    graph = load_model(_write(tmp_path, text))
    assert _summary(graph) == [("dot_general", "f32")]
    assert graph.tensors[graph.ops[0].inputs[1]].quant.kind == "per_axis"
    assert verify_planned(plan(graph), samples=2).bit_exact



def test_example_folds_to_integer_ops(tmp_path: Path) -> None:
    """examples/qdq_mlp.mlir (regenerated here): conv + bias + ReLU, max pool, flatten, dense + i32 bias."""
    path = _write(tmp_path, qdq_mlp())
    assert path.read_text() == (EXAMPLES / "qdq_mlp.mlir").read_text()
    graph = load_model(path)
    assert _summary(graph) == [
        ("uniform_quantize", "i8 scale=0.0078125 zp=0"), ("convolution", "i32 per_axis (4 scales)"),
        ("add", "i32 per_axis (4 scales)"), ("uniform_quantize", "i8 scale=0.02 zp=-128"),
        ("maximum", "i8 scale=0.02 zp=-128"), ("reduce_window", "i8 scale=0.02 zp=-128"),
        ("reshape", "i8 scale=0.02 zp=-128"), ("dot_general", "i32 per_axis (10 scales)"),
        ("add", "i32 per_axis (10 scales)"), ("uniform_quantize", "i8 scale=0.05 zp=3"),
        ("uniform_dequantize", "f32")]
    sched = plan(graph)
    assert {s.op for s in sched.steps} - {"RESHAPE", "TRANSPOSE"} == {
        "QUANTIZE", "CONV2D", "ADD", "RESCALE_F32_AFFINE", "MAXIMUM", "MAX_POOL2D", "MATMUL", "DEQUANTIZE"}
    assert verify_planned(sched, samples=4).bit_exact


MOVES = f"""
func.func @main(%x: tensor<2x3xf32>, %u: tensor<2x3xf32>) -> tensor<4x4xf32> {{
  %xq = stablehlo.uniform_quantize %x : (tensor<2x3xf32>) -> tensor<2x3x{Q_X}>
  %xd = stablehlo.uniform_dequantize %xq : (tensor<2x3x{Q_X}>) -> tensor<2x3xf32>
  %uq = stablehlo.uniform_quantize %u : (tensor<2x3xf32>) -> tensor<2x3x{Q_Y}>
  %ud = stablehlo.uniform_dequantize %uq : (tensor<2x3x{Q_Y}>) -> tensor<2x3xf32>
  %t = stablehlo.transpose %xd, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %r = stablehlo.reshape %t : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %c = stablehlo.concatenate %r, %ud, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %p = stablehlo.pad %c, %zero, low = [0, 1], high = [0, 0], interior = [0, 0]
    : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x4xf32>
  %yq = stablehlo.uniform_quantize %p : (tensor<4x4xf32>) -> tensor<4x4x{Q_Y}>
  %y = stablehlo.uniform_dequantize %yq : (tensor<4x4x{Q_Y}>) -> tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}}
"""


def test_movement_and_requantize(tmp_path: Path) -> None:
    """transpose / reshape of a dequantized value move the stored values (x's type); the concatenate of two types
    takes the quantize's type; pad's float 0.0 becomes the zero point; dq -> q of one type is a copy."""
    path = _write(tmp_path, MOVES)
    graph = load_model(path)
    assert _summary(graph) == [
        ("uniform_quantize", "i8 scale=0.02 zp=-3"), ("uniform_quantize", "i8 scale=0.01 zp=-128"),
        ("transpose", "i8 scale=0.02 zp=-3"), ("reshape", "i8 scale=0.02 zp=-3"),
        ("concatenate", "i8 scale=0.01 zp=-128"), ("pad", "i8 scale=0.01 zp=-128"),
        ("uniform_dequantize", "f32")]
    pad = graph.ops[5]
    assert graph.tensors[pad.inputs[1]].data.tolist() == -128
    assert verify_planned(plan(graph), samples=4).bit_exact
    # dq -> q to another type: a requantization (quantized -> quantized uniform_quantize)
    twice = MOVES.replace("%yq = stablehlo.uniform_quantize %p", "%yq = stablehlo.uniform_quantize %pq0").replace(
        "%p = stablehlo.pad", "%pf = stablehlo.pad").replace(
        "  %yq =", f"  %pq = stablehlo.uniform_quantize %pf : (tensor<4x4xf32>) -> tensor<4x4x{Q_X}>\n"
        f"  %pq0 = stablehlo.uniform_dequantize %pq : (tensor<4x4x{Q_X}>) -> tensor<4x4xf32>\n  %yq =")
    graph = load_model(_write(tmp_path, twice, "twice.mlir"))
    assert _summary(graph)[-3:] == [("pad", "i8 scale=0.02 zp=-3"), ("uniform_quantize", "i8 scale=0.01 zp=-128"),
                                    ("uniform_dequantize", "f32")]
    assert graph.tensors[graph.ops[-2].inputs[0]].quant is not None  # quantized -> quantized
    assert verify_planned(plan(graph), samples=4).bit_exact

Q_A, Q_B, Q_C, Q_D = ("!quant.uniform<i8:f32, 0.05:2>", "!quant.uniform<i8:f32, 0.03:-128>",
                      "!quant.uniform<i8:f32, 0.1:-100>", "!quant.uniform<i8:f32, 0.0078125>")
POOLS = f"""
func.func @main(%x: tensor<1x4x4x2xf32>) -> tensor<1x2xf32> {{
  %xq = stablehlo.uniform_quantize %x : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2x{Q_A}>
  %xd = stablehlo.uniform_dequantize %xq : (tensor<1x4x4x2x{Q_A}>) -> tensor<1x4x4x2xf32>
  %lo = stablehlo.constant dense<0.0> : tensor<f32>
  %hi = stablehlo.constant dense<6.0> : tensor<f32>
  %r6 = stablehlo.clamp %lo, %xd, %hi
    : (tensor<f32>, tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
  %aq = stablehlo.uniform_quantize %r6 : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2x{Q_B}>
  %ad = stablehlo.uniform_dequantize %aq : (tensor<1x4x4x2x{Q_B}>) -> tensor<1x4x4x2xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = "stablehlo.reduce_window"(%ad, %zero) ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%m) : (tensor<f32>) -> ()
  }}) {{window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}}
    : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %sq = stablehlo.uniform_quantize %sum : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2x{Q_C}>
  %sd = stablehlo.uniform_dequantize %sq : (tensor<1x2x2x2x{Q_C}>) -> tensor<1x2x2x2xf32>
  %t = stablehlo.tanh %sd : tensor<1x2x2x2xf32>
  %tq = stablehlo.uniform_quantize %t : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2x{Q_D}>
  %td = stablehlo.uniform_dequantize %tq : (tensor<1x2x2x2x{Q_D}>) -> tensor<1x2x2x2xf32>
  %ninf = stablehlo.constant dense<-3.0e38> : tensor<f32>
  %mx = stablehlo.reduce(%td init: %ninf) applies stablehlo.maximum across dimensions = [1, 2]
    : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2xf32>
  %yq = stablehlo.uniform_quantize %mx : (tensor<1x2xf32>) -> tensor<1x2x{Q_D}>
  %y = stablehlo.uniform_dequantize %yq : (tensor<1x2x{Q_D}>) -> tensor<1x2xf32>
  func.return %y : tensor<1x2xf32>
}}
"""


def test_relu6_sum_pool_tanh_max_reduce(tmp_path: Path) -> None:
    """clamp(0, v, 6) -> T: bounds quantized to T (0 -> -128, 6 / 0.03 - 128 = 72); a sum reduce_window's 0.0 init
    becomes the operand's zero point (-128); tanh folds to a table; a max reduce's -3e38 init the storage minimum."""
    graph = load_model(_write(tmp_path, POOLS))
    assert _summary(graph) == [
        ("uniform_quantize", "i8 scale=0.05 zp=2"), ("clamp", "i8 scale=0.03 zp=-128"),
        ("reduce_window", "i8 scale=0.1 zp=-100"), ("tanh", "i8 scale=0.0078125 zp=0"),
        ("reduce", "i8 scale=0.0078125 zp=0"), ("uniform_dequantize", "f32")]
    consts = [[graph.tensors[n].data.tolist() for n in op.inputs if graph.tensors[n].is_const] for op in graph.ops]
    assert consts[1:5] == [[-128, 72], [-128], [], [-128]]
    assert verify_planned(plan(graph), samples=4).bit_exact


Q_E, Q_F = "!quant.uniform<i8:f32, 0.04:-5>", "!quant.uniform<i8:f32, 0.03:1>"
AVERAGES = f"""
func.func @main(%x: tensor<1x4x4x2xf32>) -> tensor<1x2xf32> {{
  %xq = stablehlo.uniform_quantize %x : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2x{Q_A}>
  %xd = stablehlo.uniform_dequantize %xq : (tensor<1x4x4x2x{Q_A}>) -> tensor<1x4x4x2xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = "stablehlo.reduce_window"(%xd, %zero) ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%m) : (tensor<f32>) -> ()
  }}) {{window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}}
    : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %four = stablehlo.constant dense<4.0> : tensor<1x2x2x2xf32>
  %avg = stablehlo.divide %sum, %four : tensor<1x2x2x2xf32>
  %aq = stablehlo.uniform_quantize %avg : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2x{Q_E}>
  %ad = stablehlo.uniform_dequantize %aq : (tensor<1x2x2x2x{Q_E}>) -> tensor<1x2x2x2xf32>
  %tot = stablehlo.reduce(%ad init: %zero) applies stablehlo.add across dimensions = [1, 2]
    : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2xf32>
  %quarter = stablehlo.constant dense<0.25> : tensor<1x2xf32>
  %mean = stablehlo.multiply %quarter, %tot : tensor<1x2xf32>
  %yq = stablehlo.uniform_quantize %mean : (tensor<1x2xf32>) -> tensor<1x2x{Q_F}>
  %y = stablehlo.uniform_dequantize %yq : (tensor<1x2x{Q_F}>) -> tensor<1x2xf32>
  func.return %y : tensor<1x2xf32>
}}
"""


def test_average_pooling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Sum pooling / 4 and a global sum * 0.25: dividing by (multiplying by) a positive constant only changes the
    scale, so the sum gets the result scale times 4 (0.04 * 4 = 0.16; 0.03 / 0.25 = 0.12) and a retyping bitcast
    keeps the stored values. The float definition rounds the sum, its quotient and the quantization in float32: 3 of
    60 outputs (30 samples) differ from the C, all f32 ties; with --max-error-lsb 1 the check passes."""
    path = _write(tmp_path, AVERAGES)
    graph = load_model(path)
    assert _summary(graph) == [
        ("uniform_quantize", "i8 scale=0.05 zp=2"), ("reduce_window", "i8 scale=0.16 zp=-5"),
        ("bitcast_convert", "i8 scale=0.04 zp=-5"), ("reduce", "i8 scale=0.12 zp=1"),
        ("bitcast_convert", "i8 scale=0.03 zp=1"), ("uniform_dequantize", "f32")]
    assert verify_planned(plan(graph), samples=4).bit_exact
    code, out = _cli(capsys, "verify", str(path), "--against", "float", "--samples", "30", "--json")
    assert code == 1 and out["elements_off"] == out["elements_on_ties"] == 3 and out["max_error_lsb"] == 1
    code, out = _cli(capsys, "verify", str(path), "--against", "float", "--samples", "30", "--json",
                     "--max-error-lsb", "1")
    assert code == 0 and out["pass"] and out["mismatches"] == 0 and out["elements_off"] == 3



@pytest.mark.parametrize(("old", "new", "message"), [
    ("%wd = stablehlo.uniform_dequantize %wq : (tensor<4x3x{Q_W}>) -> tensor<4x3xf32>", "%wd = stablehlo.add %w, %w : "
     "tensor<4x3xf32>", "float dot_general between quantized values could not be folded into a quantized op: "
     "operand 1 ('wd') is not a uniform_dequantize result"),
    ("%y = stablehlo.uniform_dequantize %yq : (tensor<1x3x{Q_Y}>) -> tensor<1x3xf32>\n  func.return %y",
     "func.return %r", "float dot_general between quantized values could not be folded into a quantized op: its "
     "result is not only quantized"),
])
def test_refusals(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = DENSE.replace(old.replace("{Q_W}", Q_W).replace("{Q_Y}", Q_Y), new)
    assert text != DENSE
    with pytest.raises(UnsupportedError, match="model.mlir:") as info:
        load_model(_write(tmp_path, text))
    assert message in str(info.value)


def test_bias_refused_after_sub_channel_weights(tmp_path: Path) -> None:
    text = SUB_CHANNEL.replace("%yq = stablehlo.uniform_quantize %d", "%yq = stablehlo.uniform_quantize %s").replace(
        "  %yq =", "  %b = stablehlo.constant dense<[[0.1, 0.2]]> : tensor<1x2xf32>\n"
        "  %s = stablehlo.add %d, %b : tensor<1x2xf32>\n  %yq =")
    with pytest.raises(UnsupportedError, match="float dot_general between quantized values could not be folded into "
                       "a quantized op: its bias add needs a per-tensor lhs and per-tensor or per-output-channel "
                       "weights"):
        load_model(_write(tmp_path, text))


# ------------------------------------------------------------------------------------------ decomposition


QUANTIZED = f"""
func.func @main(%x: tensor<1x4xf32>) -> tensor<1x3xf32> {{
  %c = stablehlo.constant dense<[[25, -40, 86], [15, 100, -114], [50, 40, 57], [-75, 20, 0]]> : tensor<4x3xi8>
  %w = "quant.scast"(%c) : (tensor<4x3xi8>) -> tensor<4x3x{Q_W1}>
  %xq = stablehlo.uniform_quantize %x : (tensor<1x4xf32>) -> tensor<1x4x{Q_X}>
  %d = stablehlo.dot_general %xq, %w, contracting_dims = [1] x [0]
    : (tensor<1x4x{Q_X}>, tensor<4x3x{Q_W1}>) -> tensor<1x3x{Q_Y}>
  %t = stablehlo.tanh %d : (tensor<1x3x{Q_Y}>) -> tensor<1x3x{Q_X}>
  %s = stablehlo.add %t, %t : (tensor<1x3x{Q_X}>, tensor<1x3x{Q_X}>) -> tensor<1x3x{Q_Y}>
  %r2 = stablehlo.uniform_quantize %s : (tensor<1x3x{Q_Y}>) -> tensor<1x3x{Q_X}>
  %y = stablehlo.uniform_dequantize %r2 : (tensor<1x3x{Q_X}>) -> tensor<1x3xf32>
  func.return %y : tensor<1x3xf32>
}}
"""


def _structure(graph: Graph) -> list[tuple[str, list[str], list[str], list[str]]]:
    types = lambda names: [graph.tensors[n].quant.describe() if graph.tensors[n].quant  # noqa: E731
                           else str(graph.tensors[n].dtype) for n in names]
    return [(op.kind, op.inputs, op.outputs, types(op.inputs + op.outputs)) for op in graph.ops]


def test_fold_of_decompose_reproduces_quantized(tmp_path: Path) -> None:
    """fold(decompose(q)) has q's ops, operands and types; its float evaluation equals q's."""
    path = _write(tmp_path, QUANTIZED)
    original = _as_written(path)
    float_graph = decompose(original)
    assert all(op.kind in ("stablehlo.uniform_quantize", "stablehlo.uniform_dequantize", "quant.scast")
               or all(float_graph.tensors[n].quant is None for n in op.inputs + op.outputs)
               for op in float_graph.ops)
    x = np.array([[0.5, -1.0, 0.3, 2.0]], np.float32)
    expected = float_reference(original, [x])
    assert np.array_equal(evaluate(float_graph, [x])["y"], expected[0])
    refolded = fold_qdq(decompose(original))
    assert _structure(refolded) == _structure(original)
    folded_example = load_model(EXAMPLES / "qdq_mlp.mlir")  # accumulator types, bias adds, pooling, movement
    assert _structure(fold_qdq(decompose(folded_example))) == _structure(folded_example)


def test_decompose_of_fold_evaluates_as_qdq(tmp_path: Path) -> None:
    """The folded program's float definition equals the QDQ program's float meaning, sample for sample (no bias:
    every fold keeps the per-op float definition exactly)."""
    text = DENSE.replace("%r = stablehlo.maximum %s, %z", "%r = stablehlo.maximum %d, %z").replace(
        "%s = stablehlo.add %d, %bb : tensor<1x3xf32>\n", "")
    path = _write(tmp_path, text)
    qdq = _as_written(path)
    folded = fold_qdq(_as_written(path))
    assert "stablehlo.dot_general" in [op.kind for op in folded.ops]
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.uniform(-3, 3, (1, 4)).astype(np.float32)
        assert np.array_equal(evaluate(qdq, [x])["y"], float_reference(folded, [x])[0])


# ------------------------------------------------------------------------------------------ float evaluator


def _graph(kind: str, inputs: dict[str, np.ndarray | tuple[int, ...]], shape: tuple[int, ...], **attrs) -> Graph:
    g = Graph("g")
    for name, v in inputs.items():
        is_shape = isinstance(v, tuple)
        g.tensors[name] = Tensor(name, v if is_shape else np.shape(v), "f32",
                                 data=None if is_shape else np.asarray(v, np.float32))
        if is_shape:
            g.inputs.append(name)
    g.tensors["y"] = Tensor("y", shape, "f32")
    g.ops.append(Op(kind, list(inputs), ["y"], attrs, "test"))
    g.outputs = ["y"]
    return g


def _run(g: Graph, *xs: list) -> list:
    return evaluate(g, [np.asarray(x, np.float32) for x in xs])["y"].tolist()


def test_float_evaluator_hand_computed() -> None:
    dot = _graph("stablehlo.dot_general", {"a": (2, 2), "b": (2, 1)}, (2, 1),
                 dot_dimension_numbers=DotDimensionNumbers((), (), (1,), (0,)))
    assert _run(dot, [[1, 2], [3, 4]], [[5], [6]]) == [[17], [39]]  # 1*5 + 2*6, 3*5 + 4*6
    conv = _graph("stablehlo.convolution", {"x": (1, 4, 1), "w": np.reshape([1, 0, -1], (3, 1, 1))}, (1, 4, 1),
                  dimension_numbers=ConvDimensionNumbers(0, 2, (1,), 1, 2, (0,), 0, 2, (1,)),
                  padding=np.array([[1, 1]]))
    # [0, 1, 2, 3, 4, 0] * [1, 0, -1]: 0 - 2, 1 - 3, 2 - 4, 3 - 0
    assert _run(conv, np.reshape([1, 2, 3, 4], (1, 4, 1))) == [[[-2], [-2], [-2], [3]]]
    pool = _graph("stablehlo.reduce_window", {"x": (4, 4), "init": np.float32(-1e30)}, (2, 2),
                  body="stablehlo.maximum", window_dimensions=[2, 2], window_strides=[2, 2])
    assert _run(pool, np.arange(16).reshape(4, 4)) == [[5, 7], [13, 15]]
    red = _graph("stablehlo.reduce", {"x": (2, 2), "init": np.float32(0.5)}, (2,), body="stablehlo.add",
                 dimensions=[1])
    assert _run(red, [[1, 2], [3, 4]]) == [3.5, 7.5]
    pad = _graph("stablehlo.pad", {"x": (3,), "v": np.float32(9)}, (5,), edge_padding_low=[1],
                 edge_padding_high=[-1], interior_padding=[1])
    assert _run(pad, [1, 2, 3]) == [9, 1, 9, 2, 9]  # [1, 9, 2, 9, 3] -> low 1 -> high -1
    q = QuantType.per_tensor("i8", 0.1, 2)
    g = _graph("stablehlo.uniform_quantize", {"x": (3,)}, (3,))
    g.tensors["y"] = Tensor("y", (3,), "i8", q)
    # 0.31 / 0.1 + 2 = 5.1 -> 5; -0.44 / 0.1 + 2 = -2.4 -> -2; 1000 + 2 saturates at 127
    assert evaluate(g, [np.array([0.31, -0.44, 100.0], np.float32)])["y"].tolist() == [5, -2, 127]
    with pytest.raises(UnsupportedError, match="float evaluator has no stablehlo.fft"):
        evaluate(_graph("stablehlo.fft", {"x": (2,)}, (2,)), [np.zeros(2, np.float32)])


# ------------------------------------------------------------------------------------------ verify --against float


def test_cli_against_float(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(EXAMPLES / "qdq_mlp.mlir")
    code, out = _cli(capsys, "verify", example, "--against", "float", "--samples", "20", "--json")
    assert code == 0 and out["pass"] is True and out["bit_exact"] is None and out["mismatches"] == 0
    assert out["max_error_lsb"] == 0 and out["elements_off"] == 0 and out["per_output"][0]["name"] == "yd"
    code, out = _cli(capsys, "verify", example, "--against", "float", "--samples", "2", "--json",
                     "--max-error-lsb", "-1")
    assert code == 1 and out["pass"] is False
    assert main(["verify", str(EXAMPLES / "kws_like.json"), "--against", "float"]) == 2
    assert "StableHLO programs only" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "samples", "off", "ties"), [
    ("subchannel_i4_dense", 8, 1, 0),  # the int16 block ratios (within their bound of a tie)
    ("wide_reduce", 8, 0, 0),
    ("qdq_mlp", 4, 0, 0),
])
def test_example_accuracy(capsys: pytest.CaptureFixture[str], name: str, samples: int, off: int, ties: int) -> None:
    """Elements off the float definition and, of them, f32 ties (module docstring)."""
    path = str(EXAMPLES / f"{name}.mlir")
    code, out = _cli(capsys, "verify", path, "--against", "float", "--samples", str(samples), "--json")
    assert (out["elements_off"], out["elements_on_ties"]) == (off, ties), out
    assert code == (1 if off else 0) and out["max_error_lsb"] == (1 if off else 0)
