"""The benchmark scripts (bench/, run by hand) measure with the same machinery as `qcodegen verify`: on one small
model and Cortex-M4, targets_bench's instruction count and cycle estimate equal verify's, and `qcodegen profile`'s
per-layer counts add up to them (the Cortex-M steps are already out of line, so the profiling build is the same
code); `compile --profile` puts them in the report. targets_bench's same-ISA comparison with XNNPACK on a host
without ISAs wider than AVX2."""

import argparse
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
    assert row["cycles"] == verified["cycles_estimate"] > verified["instructions"]
    assert row["timing_model"] == verified["timing_model"] == "qc-cortex-m4-v1"
    assert (row["text_bytes"], row["rodata_bytes"]) == (verified["text_bytes"], verified["rodata_bytes"])

    capsys.readouterr()
    assert qcodegen(["profile", str(fc_model), "-t", "cortex-m4", "--json"]) == 0
    profiled = json.loads(capsys.readouterr().out)
    layers = profiled["layers"]
    assert profiled["instructions"] == sum(r["instructions"] for r in layers) == verified["instructions"]
    assert profiled["cycles_estimate"] == sum(r["cycles_estimate"] for r in layers) == verified["cycles_estimate"]
    assert profiled["macs"] == sum(r["macs"] for r in layers) == row["macs"]
    assert all(r["instructions"] > 0 for r in layers if r["macs"])

    assert qcodegen(["compile", str(fc_model), "-t", "cortex-m4", "-o", str(tmp_path / "out"), "--profile"]) == 0
    report = json.loads(next((tmp_path / "out").glob("*_report.json")).read_text())
    assert report["instructions_per_layer"] == [r["instructions"] for r in layers[:-1]]
    html = next((tmp_path / "out").glob("*_report.html")).read_text()
    assert "Instructions per layer (cortex-m4)" in html


def test_same_isa_reference_on_hosts_without_wider_isas():
    """An AVX2-only host (an AMD EPYC without AVX-512): XNNPACK as shipped is the same-ISA reference, so the
    same-ISA goal is decided from it instead of "not met" over n/a columns; with a wider ISA the masked run is."""
    avx2_host = frozenset({"sse4_2", "avx", "avx2", "fma", "bmi2"})
    assert targets_bench.same_isa_reference(avx2_host) == "as shipped"
    for wider in ("avx512f", "avx_vnni", "amx_int8"):
        assert targets_bench.same_isa_reference(avx2_host | {wider}) == "masked"

    rows = [targets_bench.Row(m, "x86-avx2", macs=1, bit_exact=True, ours_us=50.0, xnnpack_us=100.0)
            for m in models.MLPERF]  # what an AVX2-only host measures: no masked XNNPACK run
    same_isa = [g for g in targets_bench.goals(rows, "as shipped") if "same ISA" in g]
    assert len(same_isa) == 1 and "no ISA wider than AVX2" in same_isa[0]
    assert "met (ds_cnn 0.50" in same_isa[0] and "not met" not in same_isa[0]
    rows[0].ours_us = 150.0
    assert "**not met** (ds_cnn 1.50" in next(g for g in targets_bench.goals(rows, "as shipped") if "same ISA" in g)
    masked = next(g for g in targets_bench.goals(rows, "masked") if "same ISA" in g)
    assert "not measured" in masked and "not met" not in masked  # n/a reference: never a verdict


def test_update_replaces_rows_and_evaluates_goals_again():
    """`--update`: the re-measured rows replace theirs, the others stay as written, and the goals are evaluated over
    the merged rows (a partial re-run once left issue 18's goal lines quoting the rows it replaced)."""
    args = argparse.Namespace(same_isa="masked", weight_layout="compact", targets=[])
    rows = [targets_bench.Row(m, t, macs=1000, bit_exact=True, samples=3, instructions=1500, cycles=2500,
                              text_bytes=9000, arena=64, notes=[f"{m} {t} note"])
            for m in models.MLPERF for t in ("cortex-m4", "cortex-m55")]
    rows.append(targets_bench.Row("ds_cnn", "hexagon-hvx", macs=3000, bit_exact=True, samples=3, instructions=900,
                                  packets=333))
    before = targets_bench.report(rows, args, "python bench/targets_bench.py --write R.md", 60.0)
    header, read = targets_bench.read_report(before)
    assert targets_bench.table(read) == targets_bench.table(rows)
    assert [r.notes for r in read] == [r.notes for r in rows] and read[-1].packets == 333

    faster = targets_bench.Row("ds_cnn", "cortex-m4", macs=1000, bit_exact=True, samples=3, instructions=1100,
                               cycles=1900, text_bytes=9000, arena=64)
    after = targets_bench.update_report(before, [faster], args, "python bench/targets_bench.py --targets cortex-m4",
                                        30.0, why="a new kernel")
    assert "- cortex-m4 rows re-measured (" in after and "30 s" not in after and after.count("a new kernel") == 1
    changed = [line for line in after.splitlines() if line.startswith("| ds_cnn | cortex-m4 |")]
    assert changed == [targets_bench.table([faster]).splitlines()[2]]
    kept = [line for line in before.splitlines() if line.startswith("| ") and "| ds_cnn | cortex-m4 |" not in line]
    assert all(line in after.splitlines() for line in kept)
    assert "ds_cnn cortex-m4 note" not in after and "ds_cnn cortex-m55 note" in after
    goal = next(line for line in after.splitlines() if "(issue 18) cortex-m4 <= 1.2 instructions" in line)
    assert "(ds_cnn 1.100, mobilenet_v1_025 1.500)" in goal
    with pytest.raises(SystemExit, match="fast weight layout"):
        targets_bench.update_report(before, [faster], argparse.Namespace(**{**vars(args), "weight_layout": "fast"}),
                                    "", 1.0)
