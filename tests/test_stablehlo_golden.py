"""The shared StableHLO corpus (openxla/stablehlo testdata: 126 quantized programs with golden outputs, and the
interpreter tests of quantized_ops.mlir) through `verify --against golden`: every quantized function is compiled to
C, run on its fed constants and checked with the interpreter's tolerance. All functions build into one library
(per compiler), so the whole corpus costs a few C builds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qcodegen.cli import main
from qcodegen.codegen import load_target
from qcodegen.verify import golden

SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
CORPUS = SHARED / "testdata" / "stablehlo"

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared test data not found: {CORPUS} (set QC_SHARED_DIR)")

FILES = sorted(p.name for p in (CORPUS / "quantized").glob("*.mlir")) if CORPUS.is_dir() else []

def _run(target) -> dict[str, list[golden.FunctionResult]]:
    paths = [CORPUS / "quantized" / f for f in FILES] + [CORPUS / "quantized_ops.mlir"]
    prepared = {p.name: golden.prepare(p) for p in paths}
    golden.execute([r for rs in prepared.values() for r in rs], target)
    return prepared


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[golden.FunctionResult]]:
    return _run("generic")


def _quantized(results: list[golden.FunctionResult]) -> list[golden.FunctionResult]:
    return [r for r in results if r.status != "skip"]


def test_corpus_size(corpus: dict[str, list[golden.FunctionResult]]) -> None:
    """126 programs, each with one quantized function (the others test float/integer types and are skipped)."""
    assert len(FILES) == 126
    assert all(len(_quantized(corpus[f])) == 1 for f in FILES)
    counts = golden.summary([r for rs in corpus.values() for r in rs])
    assert counts["error"] == 0
    assert counts["pass"] == 126 + 5  # + the 5 functions of quantized_ops.mlir


@pytest.mark.parametrize("name", FILES)
def test_program(corpus: dict[str, list[golden.FunctionResult]], name: str) -> None:
    (result,) = _quantized(corpus[name])
    assert result.status == "pass", result.describe()


def test_quantized_ops(corpus: dict[str, list[golden.FunctionResult]]) -> None:
    results = corpus["quantized_ops.mlir"]
    assert [r.name for r in results] == ["uniform_quantize", "uniform_quantize", "uniform_dequantize", "uniform_qdq",
                                         "quantized_add"]
    assert all(r.status == "pass" for r in results), [r.describe() for r in results]


def test_nan_inputs_quantize_to_zero(corpus: dict[str, list[golden.FunctionResult]]) -> None:
    """The programs whose input holds a NaN pass: StableHLO's interpreter quantizes NaN to storage value 0."""
    for name in ("ceil_qi8.mlir", "cosine_qi8.mlir", "negate_qi8.mlir", "sine_qi8.mlir", "tanh_qi8.mlir"):
        (result,) = _quantized(corpus[name])
        assert result.status == "pass", result.describe()


def test_corpus_with_clang(corpus: dict[str, list[golden.FunctionResult]]) -> None:
    """The same C built with clang (-std=c99 -Wall -Wextra -Werror -pedantic) gives the same verdicts."""
    generic = load_target("generic")
    clang = type(generic)(**{**generic.__dict__, "name": "clang", "cc": "clang"})
    again = _run(clang)
    assert {f: [r.status for r in rs] for f, rs in again.items()} == {f: [r.status for r in rs]
                                                                       for f, rs in corpus.items()}


def test_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["verify", str(CORPUS / "quantized_ops.mlir"), "--against", "golden"]) == 0
    out = capsys.readouterr().out
    assert "5 function(s): 5 pass, 0 fail, 0 error, 0 skipped" in out
    assert main(["verify", str(CORPUS / "quantized" / "tanh_qi8.mlir"), "--against", "golden"]) == 0
    out = capsys.readouterr().out
    assert "@tanh_op_test_bf16 (tanh_qi8.mlir:4): SKIP" in out
    # a wrong golden value must fail, naming the function, the element and the values
    text = (CORPUS / "quantized_ops.mlir").read_text()
    wrong = tmp_path / "wrong.mlir"
    wrong.write_text(text.replace("check.expect_eq_const %bitcast_result, dense<[10, 10]>",
                                  "check.expect_eq_const %bitcast_result, dense<[10, 11]>", 1))
    assert wrong.read_text() != text
    assert main(["verify", str(wrong), "--against", "golden"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "index [1]" in out
    assert main(["verify", str(CORPUS / "quantized" / "add_qi8.mlir"), "--against", "golden", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["bit_exact"] is True and report["summary"]["pass"] == 1 and report["summary"]["skip"] == 20
