# ruff: noqa: E501  (the MLIR programs below keep one op per line)
"""The StableHLO front end: MLIR types -> QuantType, attributes, golden checks, constant feeding and folding,
`.mlir` dispatch, and the float32 formulas of the reference interpreter that the tables are built from."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from qcodegen.cli import main
from qcodegen.errors import GraphError, QcError, UnsupportedError
from qcodegen.frontends import load_model
from qcodegen.frontends import stablehlo as shlo
from qcodegen.frontends.mlir import ast
from qcodegen.ir.quant import QuantType
from qcodegen.semantics import stablehlo as sem
from qcodegen.verify import golden

SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
CORPUS = SHARED / "testdata" / "stablehlo"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared test data not found: {CORPUS} "
                                                               "(set QC_SHARED_DIR)")

TYPES = """
func.func @types(%a: tensor<2x3x!quant.uniform<i8<-100:100>:f32, 0.5:-3>>,
                 %b: tensor<2x3x!quant.uniform<u8:f32:1, {0.25:128, 0.5:127, 1.0:0}>>,
                 %c: tensor<2x4x!quant.uniform<i16:f32:{0:1, 1:2}, {{0.5, 0.25}, {1.0:1, 2.0:-1}}>>,
                 %d: tensor<3xi1>, %e: tensor<3xf32>) -> tensor<2x3x!quant.uniform<i8<-100:100>:f32, 0.5:-3>> {
  %t = "stablehlo.transpose"(%a) {permutation = array<i64: 1, 0>} : (tensor<2x3x!quant.uniform<i8<-100:100>:f32, 0.5:-3>>) -> tensor<3x2x!quant.uniform<i8<-100:100>:f32, 0.5:-3>>
  %r = stablehlo.reshape %t : (tensor<3x2x!quant.uniform<i8<-100:100>:f32, 0.5:-3>>) -> tensor<2x3x!quant.uniform<i8<-100:100>:f32, 0.5:-3>>
  func.return %r : tensor<2x3x!quant.uniform<i8<-100:100>:f32, 0.5:-3>>
}
"""


def _write(tmp_path: Path, text: str, name: str = "p.mlir") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_quantized_types(tmp_path: Path) -> None:
    (fn,) = shlo.functions(_write(tmp_path, TYPES))
    graph = shlo.convert(fn).graph
    a, b, c, d, e = (graph.tensors[n] for n in ("a", "b", "c", "d", "e"))
    assert a.dtype.name == "i8" and a.quant.kind == "per_tensor"
    assert (a.quant.storage_min, a.quant.storage_max, a.quant.scale, a.quant.zero_point) == (-100, 100, 0.5, -3)
    assert b.dtype.name == "u8" and b.quant.kind == "per_axis" and b.quant.axis == 1
    assert b.quant.scales.tolist() == [0.25, 0.5, 1.0] and b.quant.zero_points.tolist() == [128, 127, 0]
    assert c.dtype.name == "i16" and c.quant.kind == "sub_channel" and c.quant.block_sizes == (1, 2)
    assert c.quant.scales.tolist() == [[0.5, 0.25], [1.0, 2.0]] and c.quant.zero_points.tolist() == [[0, 0], [1, -1]]
    assert d.dtype.name == "bool" and e.dtype.name == "f32" and d.quant is None
    assert fn.quantized and graph.inputs == ["a", "b", "c", "d", "e"]
    ops = graph.ops
    assert [op.kind for op in ops] == ["stablehlo.transpose", "stablehlo.reshape"]
    assert ops[0].attrs == {"permutation": [1, 0]} and ops[0].name == "p.mlir:6"


ATTRS = """
!q = !quant.uniform<i8:f32, 1.0>
func.func @attrs(%x: tensor<1x4x4x2x!q>, %w: tensor<3x3x2x2x!q>, %i: tensor<2x1xi32>) {
  %c = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 1], pad = [[1, 1], [0, 2]], rhs_dilate = [1, 2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x4x2x!q>, tensor<3x3x2x2x!q>) -> tensor<1x2x2x2x!quant.uniform<i32:f32, 1.0>>
  %g = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1, 2, 3], collapsed_slice_dims = [0], start_index_map = [1], index_vector_dim = 1>, slice_sizes = array<i64: 1, 2, 4, 2>}> : (tensor<1x4x4x2x!q>, tensor<2x1xi32>) -> tensor<2x2x4x2x!q>
  %z = stablehlo.constant dense<-128> : tensor<!q>
  %r = "stablehlo.reduce"(%x, %z) ({
    ^bb0(%a: tensor<!q>, %b: tensor<!q>):
      %m = "stablehlo.maximum"(%a, %b) : (tensor<!q>, tensor<!q>) -> tensor<!q>
      "stablehlo.return"(%m) : (tensor<!q>) -> ()
  }) {dimensions = array<i64: 1, 2>} : (tensor<1x4x4x2x!q>, tensor<!q>) -> tensor<1x2x!q>
  %k = stablehlo.compare LT, %i, %i, SIGNED : (tensor<2x1xi32>, tensor<2x1xi32>) -> tensor<2x1xi1>
  func.return
}
"""


def test_attributes(tmp_path: Path) -> None:
    (fn,) = shlo.functions(_write(tmp_path, ATTRS))
    conv, gather, reduce, compare = shlo.convert(fn).graph.ops
    assert isinstance(conv.attrs["dimension_numbers"], ast.ConvDimensionNumbers)
    assert conv.attrs["window_strides"] == [2, 1] and conv.attrs["rhs_dilation"] == [1, 2]
    assert conv.attrs["padding"].tolist() == [[1, 1], [0, 2]] and conv.attrs["feature_group_count"] == 1
    assert gather.attrs["slice_sizes"] == [1, 2, 4, 2]
    assert gather.attrs["dimension_numbers"].start_index_map == (1,)
    assert reduce.attrs["body"] == "stablehlo.maximum" and reduce.attrs["dimensions"] == [1, 2]
    assert compare.attrs["comparison_direction"] == "LT" and compare.attrs["compare_type"] == "SIGNED"


CHECKS = """
func.func @checks() {
  %c = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %g = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %q = stablehlo.uniform_quantize %c : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.5>>
  %d = stablehlo.uniform_dequantize %q : (tensor<2x!quant.uniform<i8:f32, 0.5>>) -> tensor<2xf32>
  %s = stablehlo.bitcast_convert %q : (tensor<2x!quant.uniform<i8:f32, 0.5>>) -> tensor<2xi8>
  %e = stablehlo.custom_call @check.eq(%g, %d) : (tensor<2xf32>, tensor<2xf32>) -> tensor<i1>
  %i = stablehlo.constant dense<[2, 4]> : tensor<2xi8>
  %f = stablehlo.custom_call @check.eq(%s, %i) : (tensor<2xi8>, tensor<2xi8>) -> tensor<i1>
  stablehlo.custom_call @check.expect_almost_eq(%d, %g) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
  "check.expect_almost_eq_const"(%d) {value = dense<[1.0, 2.0]> : tensor<2xf32>, tolerance = 5.000000e-01 : f64} : (tensor<2xf32>) -> ()
  check.expect_eq_const %s, dense<[2, 4]> : tensor<2xi8>
  check.expect_eq %s, %s : tensor<2xi8>
  func.return
}
"""


def test_checks_and_feeds(tmp_path: Path) -> None:
    (fn,) = shlo.functions(_write(tmp_path, CHECKS))
    program = shlo.convert(fn)
    kinds = [(c.kind, c.actual, c.tolerance) for c in program.checks]
    assert kinds == [("check.eq", "d", 1e-4), ("check.eq", "s", None), ("check.expect_almost_eq", "d", 1e-3),
                     ("check.expect_almost_eq_const", "d", 0.5), ("check.expect_eq_const", "s", None),
                     ("check.expect_eq", "s", None)]
    assert np.array_equal(program.checks[1].expected, [2, 4])
    shlo.finalize(program, [c.actual for c in program.checks])
    graph = program.graph
    assert graph.inputs == ["c"] and list(program.feeds) == ["c"]  # the quantized data constant is fed
    assert "g" not in graph.tensors and "i" not in graph.tensors  # golden values are not part of the model
    verdict, results = golden.verify_golden(_write(tmp_path, CHECKS))
    assert verdict.bit_exact and results[0].status == "pass" and len(results[0].checks) == 6


WEIGHTS = """
!q = !quant.uniform<i8:f32, 0.5>
func.func @main() -> tensor<1x3x2xf32> {
  %x = stablehlo.constant dense<[[[1.0], [2.0], [3.0], [4.0]]]> : tensor<1x4x1xf32>
  %w = stablehlo.constant dense<[[[1.0, -1.0]], [[0.5, 2.0]]]> : tensor<2x1x2xf32>
  %xq = stablehlo.uniform_quantize %x : (tensor<1x4x1xf32>) -> tensor<1x4x1x!q>
  %wq = stablehlo.uniform_quantize %w : (tensor<2x1x2xf32>) -> tensor<2x1x2x!q>
  %wt = "stablehlo.transpose"(%wq) {permutation = array<i64: 0, 1, 2>} : (tensor<2x1x2x!q>) -> tensor<2x1x2x!q>
  %c = stablehlo.convolution(%xq, %wt) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x1x!q>, tensor<2x1x2x!q>) -> tensor<1x3x2x!quant.uniform<i32:f32, 0.25>>
  %d = stablehlo.uniform_dequantize %c : (tensor<1x3x2x!quant.uniform<i32:f32, 0.25>>) -> tensor<1x3x2xf32>
  func.return %d : tensor<1x3x2xf32>
}
"""


def test_weights_fold_data_feeds(tmp_path: Path) -> None:
    """The conv input constant becomes the model input; the weights (through a transpose) are folded."""
    graph = load_model(_write(tmp_path, WEIGHTS))
    assert graph.inputs == ["x"] and graph.tensors["x"].dtype.name == "f32"
    assert graph.tensors["wt"].is_const and graph.tensors["wt"].data.tolist() == [[[2, -2]], [[1, 4]]]
    assert [op.kind for op in graph.ops] == ["stablehlo.uniform_quantize", "stablehlo.convolution",
                                             "stablehlo.uniform_dequantize"]
    assert graph.outputs == ["d"] and graph.options["rescale_rounding"] == "half_even"


def test_compile_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, WEIGHTS)
    assert main(["compile", str(path), "-o", str(tmp_path / "out"), "--name", "conv1d"]) == 0
    assert (tmp_path / "out" / "conv1d.c").is_file()
    assert main(["verify", str(path), "--samples", "3"]) == 0
    assert "bit-exact against the numpy reference" in capsys.readouterr().out


def test_several_functions_need_main(tmp_path: Path) -> None:
    text = TYPES + TYPES.replace("@types", "@other")
    with pytest.raises(QcError, match="2 functions .*@types, @other.* one @main"):
        load_model(_write(tmp_path, text))


@pytest.mark.parametrize(("text", "message"), [
    ("func.func @f(%a: tensor<2xi32>) -> tensor<2xi32> {\n  %0 = \"tosa.abs\"(%a) : (tensor<2xi32>) -> "
     "tensor<2xi32>\n  %1 = stablehlo.abs %0 : tensor<2xi32>\n  func.return %1 : tensor<2xi32>\n}\n", "mixes"),
    ("func.func @f(%a: tensor<2xi32>) -> tensor<2xi32> {\n  func.return %a : tensor<2xi32>\n}\n",
     "no StableHLO or TOSA operations"),
])
def test_dialect_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(QcError, match=message):
        load_model(_write(tmp_path, text))


def test_dialect_dispatch(tmp_path: Path) -> None:
    tosa = _write(tmp_path, "func.func @f(%a: tensor<2xi32>) -> tensor<2xi32> {\n  %0 = \"tosa.abs\"(%a) : "
                            "(tensor<2xi32>) -> tensor<2xi32>\n  func.return %0 : tensor<2xi32>\n}\n")
    assert shlo.dialect_of(shlo.functions(tosa), tosa) == "tosa"
    assert shlo.dialect_of(shlo.functions(_write(tmp_path, WEIGHTS, "w.mlir")), "w.mlir") == "stablehlo"
    with pytest.raises(QcError, match="not a StableHLO program"):
        shlo.load_programs(tosa)


@pytest.mark.parametrize(("body", "error", "message"), [
    ("%0 = stablehlo.abs %a : tensor<2xbf16>", UnsupportedError, "element type bf16 is not supported"),
    ("%0 = stablehlo.abs %q : tensor<2x!quant.uniform<i8:f32:0, {0.1, 0.2}>>", GraphError,
     "per-tensor quantized"),
    ("%0 = \"stablehlo.uniform_quantize\"(%e) : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.1:200>>",
     GraphError, "illegal zero point 200"),
    ("%0 = stablehlo.cosine %q : tensor<2x!quant.uniform<i8:f32:0, {0.1, 0.2}>>", GraphError,
     r"p\.mlir:\d+:\d+: 'stablehlo\.cosine' op operand #0"),
])
def test_rejections(tmp_path: Path, body: str, error: type, message: str) -> None:
    text = ("func.func @f(%a: tensor<2xbf16>, %e: tensor<2xf32>, %q: tensor<2x!quant.uniform<i8:f32:0, {0.1, 0.2}>>)"
            f" {{\n  {body}\n  func.return\n}}\n")
    (fn,) = shlo.functions(_write(tmp_path, text))
    with pytest.raises(error, match=message):
        shlo.convert(fn)


# --------------------------------------------------------------------- the interpreter's float32 formulas


def test_interpreter_formulas_by_hand() -> None:
    """Worked examples of the interpreter's arithmetic (docs/semantics.md §7.2, the spec's examples)."""
    axis = QuantType.per_axis("i8", [0.1, 0.5], [-30, -20], axis=0)
    assert sem.quantize(np.array([4.0, 15.0], np.float32), axis).tolist() == [10, 10]
    to = QuantType.per_axis("i8", [0.1, 0.2], [-20, -30], axis=0)
    assert sem.requantize(np.array([10, 10]), axis, to).tolist() == [20, 45]
    assert sem.dequantize(np.array([10, 10]), axis).tolist() == [4.0, 15.0]
    q = QuantType.per_tensor("i8", 0.5, 1)
    # 1.25 / 0.5 + 1 = 3.5 -> 4 (ties to even), 0.75 / 0.5 + 1 = 2.5 -> 2, NaN -> 0, +-inf saturate
    assert sem.quantize(np.array([1.25, 0.75, math.nan, math.inf, -math.inf], np.float32), q).tolist() == [
        4, 2, 0, 127, -128]
    assert sem.to_storage(np.array([2.9, -2.9, 1e10, math.nan]), q.storage).tolist() == [2, -2, 127, 0]
    table = sem.unary_table(sem.UNARY["negate"], q, q)
    assert table.shape == (256,) and table[128 + 1] == 1 and table[128 + 3] == -1  # -(3 - 1) * 0.5 -> -1 + 1


def test_check_semantics() -> None:
    """The interpreter's almost-equal: NaN equals NaN, infinities only themselves, |a - b| <= tolerance."""
    check = shlo.Check("check.eq", "x", np.zeros(1), 1e-4, "here")
    got = np.array([np.nan, np.inf, 1.0, 1.0, 0.0], np.float32)
    want = np.array([np.nan, np.inf, 1.00009, 1.0002, -np.inf], np.float32)
    result = golden.compare(check, got, want)
    assert (result.mismatches, result.index) == (2, [4])
    exact = shlo.Check("check.expect_eq", "x", np.zeros(1), None, "here")
    assert golden.compare(exact, np.array([1, 2], np.int8), np.array([1, 3])).mismatches == 1
    close = shlo.Check("check.expect_close", "x", np.zeros(1), None, "here", ulps=(0, 3))
    one = np.float32(1.0)
    near = np.array([one, np.nextafter(one, np.float32(2)), one + np.float32(2 ** -21)], np.float32)
    assert golden.compare(close, near, np.full(3, one, np.float32)).mismatches == 1  # 16 ulps away


@needs_corpus
def test_compile_corpus_main(tmp_path: Path) -> None:
    """`qcodegen compile` on a corpus file takes its @main (the other functions are float/integer tests)."""
    graph = load_model(CORPUS / "quantized" / "add_qi8.mlir")
    assert graph.name == "main" and graph.inputs == ["cst_0", "cst"] and graph.outputs == ["v3"]


def test_golden_statuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Float-only functions are skipped (a file of only those is an error), functions with arguments cannot run."""
    floats = _write(tmp_path, "func.func @f() {\n  %c = stablehlo.constant dense<1.0> : tensor<2xf32>\n"
                              "  %d = stablehlo.add %c, %c : tensor<2xf32>\n"
                              "  check.expect_almost_eq_const %d, dense<2.0> : tensor<2xf32>\n  func.return\n}\n")
    assert main(["verify", str(floats), "--against", "golden"]) == 2
    assert "no quantized function to verify" in capsys.readouterr().err
    args = _write(tmp_path, CHECKS.replace("@checks()", "@checks(%a: tensor<2xf32>)"), "a.mlir")
    (result,) = golden.prepare(args)
    assert result.status == "error" and "arguments a have no values" in result.reason
