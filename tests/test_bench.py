"""The benchmark scripts (bench/, run by hand) measure with the same machinery as `qcodegen verify`: on one small
model and Cortex-M4, targets_bench's instruction count equals verify's, and profile_steps' per-step counts add up
to it (the Cortex-M steps are already out of line, so the profiling copy of model.c is the same code)."""

import json
import sys
from pathlib import Path

import pytest

from qcodegen.cli import main as qcodegen
from qcodegen.codegen import load_target
from qcodegen.verify.runners import cannot_count, unavailable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

pytest.importorskip("tflite_micro", reason="the bench models are built with tflite-micro's model builder")
models = pytest.importorskip("bench.models")
targets_bench = pytest.importorskip("bench.targets_bench")
profile_steps = pytest.importorskip("bench.profile_steps")


@pytest.fixture
def fc_model(tmp_path) -> Path:
    reason = unavailable(load_target("cortex-m4")) or cannot_count(load_target("cortex-m4"))
    if reason:
        pytest.skip(f"cortex-m4: {reason}")
    return models.model_path("fc_autoencoder", tmp_path)


def test_bench_scripts_count_what_verify_counts(fc_model, tmp_path, capsys):
    assert qcodegen(["verify", str(fc_model), "-t", "cortex-m4", "--samples", "1", "--json"]) == 0
    verified = json.loads(capsys.readouterr().out)

    out = tmp_path / "rows.json"
    assert targets_bench.main(["--models", "fc_autoencoder", "--targets", "cortex-m4", "--samples", "1",
                               "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["bit_exact"] is True and row["instructions"] == verified["instructions"]
    assert (row["text_bytes"], row["rodata_bytes"]) == (verified["text_bytes"], verified["rodata_bytes"])

    steps = profile_steps.profile(fc_model, "cortex-m4", tmp_path)
    assert sum(r["insns"] for r in steps) == verified["instructions"]
    assert sum(r["macs"] for r in steps) == row["macs"]
