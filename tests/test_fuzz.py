"""A seeded slice of the mutation campaign of scripts/fuzz.py (the full campaign, 10,000 mutants per importer, is
`python scripts/fuzz.py`): every importer's mutants, each compiled in a forked process with a 20 s timeout and a
3 GiB memory cap, must be accepted or end with one clean error line: no internal error, traceback, hang or
crash. The slice must also reach both outcomes, so it tests the compiler and the error paths."""

import importlib.util
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("qc_fuzz", Path(__file__).resolve().parents[1] / "scripts" / "fuzz.py")
fuzz = sys.modules["qc_fuzz"] = importlib.util.module_from_spec(_SPEC)  # (dataclasses look their module up)
_SPEC.loader.exec_module(fuzz)

SEED = 20261126
CASES = {"tflite": 200, "tosa": 200, "tosa-mlir": 150, "stablehlo": 200, "json": 200, "onnx": 200}


@pytest.mark.parametrize("importer", [i for i in fuzz.IMPORTERS], ids=lambda i: i.name)
def test_seeded_slice_has_no_defect(importer):
    report = fuzz.campaign([importer], CASES[importer.name], seed=SEED, quick=True, jobs=2)
    if importer.name in report.unavailable:
        pytest.skip(report.unavailable[importer.name])
    counts = report.counts[importer.name]
    assert report.problems() == 0, report.describe()
    assert counts["accepted"] > 0 and counts["error"] > 0, dict(counts)
    assert report.longest_error[0] <= fuzz.MAX_LINE
