"""Quantized reductions with a wider accumulator (docs/schemes.md; StableHLO's quantized-reduction RFC): option 2
(uniform_quantize to i32 -> reduce -> uniform_quantize back) and option 1 (three-region reduce with conversion
regions) lower to RESCALE to i32, REDUCE_SUM, one RESCALE. Generated C == numpy reference bit for bit; against the
float definition, the elements that differ (counted) are all f32 ties; the range analysis proves (or refuses) the
int32 accumulator."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from qcodegen.cli import main
from qcodegen.compiler import plan
from qcodegen.errors import PlanError, UnsupportedError
from qcodegen.frontends import load_model
from qcodegen.ir.schedule import Schedule
from qcodegen.reference import run_reference
from qcodegen.report import inspect_dict
from qcodegen.testing import verify_planned

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
from make_scheme_examples import wide_reduce  # noqa: E402


def _against_float(tmp_path: Path, text: str, samples: int) -> tuple[int, int]:
    """(elements off the float definition, of them on f32 ties) over `samples` seeded inputs (verify --against
    float, generic C)."""
    path = tmp_path / "float.mlir"
    path.write_text(text)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["verify", str(path), "--against", "float", "--samples", str(samples), "--json"])
    report = json.loads(out.getvalue())
    return report["elements_off"], report["elements_on_ties"]


def _planned(tmp_path: Path, text: str) -> Schedule:
    path = tmp_path / "model.mlir"
    path.write_text(text)
    return plan(load_model(path))


def test_example_bit_exact_and_accuracy(tmp_path: Path) -> None:
    """256 frames x 64 features: acc bound [-31744, 33536] = 256 x [-124, 131]. The output RESCALE multiplies by
    exactly 1/16 and rounds the result (with its odd zero point) half to even, as the float definition: equal on
    every output of 8 samples."""
    sched = _planned(tmp_path, wide_reduce())
    assert [s.op for s in sched.steps] == ["QUANTIZE", "RESCALE", "REDUCE_SUM", "RESCALE", "RESHAPE", "DEQUANTIZE"]
    report = inspect_dict(sched)
    assert report["steps"][2]["acc_bound"] == [-31744, 33536]
    assert verify_planned(sched, samples=4).bit_exact
    assert _against_float(tmp_path, wide_reduce(), 8) == (0, 0)


def test_reference_hand_computed(tmp_path: Path) -> None:
    # 2 frames x 1 feature, x scale 0.05 zp -4, y scale 0.05 * 2 / 16 = 0.00625 zp 1: sums of (q + 4) / 0.125 + 1
    sched = _planned(tmp_path, wide_reduce(frames=2, features=1))
    x = np.array([[[0.1], [0.05]]], np.float32)  # q = 2 - 4 = -2 and 1 - 4 = -3; sum (2 + 1) = 3 -> 3 * 8 + 1 = 25
    assert run_reference(sched, [x])["y"].tolist() == [[25]]


OPTION1 = """func.func @main(%x: tensor<3x40xf32>) -> tensor<3xf32> {
  %xq = stablehlo.uniform_quantize %x : (tensor<3x40xf32>) -> tensor<3x40xX>
  %c = stablehlo.constant dense<3> : tensor<i8>
  %init = "quant.scast"(%c) : (tensor<i8>) -> tensor<X>
  %r = "stablehlo.reduce"(%xq, %init) ({
    ^bb0(%a: tensor<X>):
      %w = stablehlo.uniform_quantize %a : (tensor<X>) -> tensor<A>
      "stablehlo.return"(%w) : (tensor<A>) -> ()
  }, {
    ^bb0(%l: tensor<A>, %m: tensor<A>):
      %s = stablehlo.add %l, %m : tensor<A>
      "stablehlo.return"(%s) : (tensor<A>) -> ()
  }, {
    ^bb0(%t: tensor<A>):
      %o = stablehlo.uniform_quantize %t : (tensor<A>) -> tensor<Y>
      "stablehlo.return"(%o) : (tensor<Y>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<3x40xX>, tensor<X>) -> tensor<3xY>
  %y = stablehlo.uniform_dequantize %r : (tensor<3xY>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
""".replace("X", "!quant.uniform<i8:f32, 0.05:3>").replace("Y", "!quant.uniform<i8:f32, 0.3:-1>")


def test_option1_conversion_regions(tmp_path: Path) -> None:
    """Accumulator scale 0.025 = 0.05 / 2 (exact input conversion, m = 2): the sum of q - 3 has scale 0.05. Against
    the float definition 3 of 48 outputs differ (16 samples), all f32 ties."""
    sched = _planned(tmp_path, OPTION1.replace("A", "!quant.uniform<i32:f32, 0.025:5>"))
    assert [s.op for s in sched.steps] == ["QUANTIZE", "RESCALE", "REDUCE_SUM", "RESCALE", "RESHAPE", "DEQUANTIZE"]
    assert verify_planned(sched, samples=4).bit_exact
    assert _against_float(tmp_path, OPTION1.replace("A", "!quant.uniform<i32:f32, 0.025:5>"), 16) == (3, 3)


def test_inexact_accumulator_conversion_rejected(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="not exact"):
        _planned(tmp_path, OPTION1.replace("A", "!quant.uniform<i32:f32, 0.03>"))


def test_declared_accumulator_overflow_refused(tmp_path: Path) -> None:
    # m = 0.05 / 1e-7 = 500,000: 40 terms of |q - 3| <= 131 reach 2.62e9 > 2^31 - 1 in the declared type
    with pytest.raises(PlanError, match="declared i32 accumulator"):
        _planned(tmp_path, OPTION1.replace("A", "!quant.uniform<i32:f32, 1.0e-7>"))


def test_range_analysis_widens_overflow(tmp_path: Path) -> None:
    """i16 operand, zero point 0 (q in [-32768, 32767]): 65,536 frames still fit ([-2^31, 2^31 - 2^16]); 65,537
    can reach -2^31 - 32768: REDUCE_SUM's range analysis widens the step (an int64 sum, saturated to int32)."""
    wide = inspect_dict(_planned(tmp_path, wide_reduce(frames=65537, features=1, storage="i16", zp=0)))["steps"][2]
    assert "REDUCE_SUM" in wide["widened"]["reason"] and wide["widened"]["bound"] == [-65537 * 32768, 65537 * 32767]
    sched = _planned(tmp_path, wide_reduce(frames=65536, features=1, storage="i16", zp=0))
    assert inspect_dict(sched)["steps"][2]["acc_bound"] == [-65536 * 32768, 65536 * 32767]
    assert inspect_dict(sched)["steps"][2]["widened"] is None


def _one_region(text: str) -> str:
    """OPTION1 without its conversion regions: a one-region body on the accumulator type (implicit conversions)."""
    start, stop = text.index("    ^bb0(%a"), text.index("    ^bb0(%l")
    text = text[:start] + text[stop:]
    start, stop = text.index("  }, {\n    ^bb0(%t"), text.index("  }) {dimensions")
    return (text[:start] + text[stop:]).replace("({\n  }, {\n", "({\n")


def test_one_region_body_and_reduce_window(tmp_path: Path) -> None:
    acc = "!quant.uniform<i32:f32, 0.05>"
    implicit = _planned(tmp_path, _one_region(OPTION1.replace("A", acc)))
    assert [s.op for s in implicit.steps][1:4] == ["RESCALE", "REDUCE_SUM", "RESCALE"]
    assert verify_planned(implicit, samples=3).bit_exact
    window = (OPTION1.replace("A", acc).replace('"stablehlo.reduce"', '"stablehlo.reduce_window"')
              .replace("{dimensions = array<i64: 1>}",
                       "{window_dimensions = array<i64: 1, 8>, window_strides = array<i64: 1, 8>}")
              .replace("tensor<3xf32>", "tensor<3x5xf32>").replace("tensor<3x!", "tensor<3x5x!"))
    sched = _planned(tmp_path, window)
    assert "DEPTHWISE_CONV2D" in [s.op for s in sched.steps]
    assert verify_planned(sched, samples=3).bit_exact
