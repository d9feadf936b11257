"""TFLM's seanet int16 (16x8) golden vectors: every single-op model of $QC_SHARED_DIR/testdata/tflite/seanet
compiled by qcodegen, its C run on the CSV inputs (as `qcodegen run` does), every output element equal to the
golden CSV (and the numpy reference of the schedule too).

An op whose lowering rule has not landed yet is a strict xfail, so the case turns into a failure to look at
as soon as the rule exists.

QC_SEANET_TARGET=T runs the same checks with the C built for target T and run on its runner (a sweep by hand,
docs/targets.md; default generic, in-process)."""

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import generate, load_target
from qcodegen.compiler import plan
from qcodegen.lower import RULES
from qcodegen.reference import run_reference
from qcodegen.verify import get_runner
from qcodegen.verify.runners import unavailable

pytest.importorskip("tflite_micro", reason="reading .tflite needs tflite-micro (pip install 'qcodegen[tflite]')")
from qcodegen.frontends.tflite import load_tflite  # noqa: E402

# the shared data dir as tests/conftest.py defines it (QC_SHARED_DIR, default ../shared from the project root)
SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parent.parent.parent / "shared"))
SEANET = SHARED / "testdata" / "tflite" / "seanet"
KINDS = {"conv": "tfl.conv_2d"}  # directory -> op kind where the names differ
TARGET = os.environ.get("QC_SEANET_TARGET", "generic")


def cases() -> list:
    if not SEANET.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"seanet golden vectors not found under {SEANET} "
                                                                 f"(set QC_SHARED_DIR)"))]
    params = []
    for model in sorted(SEANET.glob("*/*.tflite"), key=lambda p: (p.parent.name, len(p.stem), p.stem)):
        kind = KINDS.get(model.parent.name, f"tfl.{model.parent.name}")
        marks = [pytest.mark.xfail(reason=f"the {kind} lowering has not landed", strict=True)] if kind not in RULES \
            else []
        params.append(pytest.param(model, marks=marks, id=f"{model.parent.name}/{model.stem}"))
    return params


def read_csv(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    """A CSV of one tensor in row-major order; the file name ends with its element type (int16, int32)."""
    dtype = np.dtype(path.stem.rsplit("_", 1)[1])
    values = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=1)
    info = np.iinfo(dtype)
    assert values.min() >= info.min and values.max() <= info.max, f"{path.name}: values outside {dtype}"
    return values.reshape(shape).astype(dtype)


def one(pattern: Path) -> Path:
    found = sorted(pattern.parent.glob(pattern.name))
    assert len(found) == 1, f"expected one file matching {pattern}, found {found}"
    return found[0]


@pytest.mark.parametrize("model", cases())
def test_seanet_golden(model: Path):
    graph = load_tflite(model)
    schedule = plan(graph)
    feeds = {name: read_csv(one(model.with_name(f"{model.stem}_input{i}_*.csv")), graph.tensors[name].shape)
             for i, name in enumerate(graph.inputs)}
    inputs = [feeds[name] for name in schedule.inputs]
    (out_name,) = schedule.outputs
    golden = read_csv(one(model.with_name(f"{model.stem}_golden_*.csv")), schedule.buffers[out_name].shape)
    target = load_target(TARGET)
    if unavailable(target):
        pytest.skip(f"{TARGET}: {unavailable(target)}")
    with tempfile.TemporaryDirectory(prefix="qc-seanet-") as tmp:
        generated = generate(schedule, Path(tmp), target, harness=target.runner != "host")
        (got,), _ = get_runner(target).run(generated, inputs)
    assert got.dtype == golden.dtype, f"output type {got.dtype}, golden {golden.dtype}"
    diff = np.flatnonzero(got.reshape(-1) != golden.reshape(-1))
    assert diff.size == 0, (f"{diff.size} of {golden.size} elements differ; first at {int(diff[0])}: "
                            f"C {int(got.reshape(-1)[diff[0]])}, golden {int(golden.reshape(-1)[diff[0]])}")
    reference = run_reference(schedule, inputs)[out_name]
    assert np.array_equal(reference.reshape(-1), golden.reshape(-1)), "numpy reference differs from the golden"
