"""Every shared .tflite model ($QC_SHARED_DIR/testdata/tflite/**) and every shipped example goes through every
command in-process (qcodegen.cli.main): inspect (text and JSON), compile with and without --harness, run and
verify (against the numpy reference). A command either succeeds or refuses the model with the one-line error
(exit 2) that every other command gives too: no traceback, and no input that one command accepts and another
crashes on. Each model is planned once (planned_once) and its C built once (the content-addressed build cache
serves run too). Agreement with TFLite Micro is tested where it is the subject (test_tflite_models.py,
test_seanet.py, test_tflite_*.py)."""

import copy
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from qcodegen import api
from qcodegen.cli import main
from qcodegen.errors import QcError
from qcodegen.ir.schedule import Schedule
from qcodegen.verify.check import random_inputs

ROOT = Path(__file__).resolve().parent.parent
# the shared data dir as tests/conftest.py defines it (QC_SHARED_DIR, default ../shared from the project root)
SHARED = Path(os.environ.get("QC_SHARED_DIR", ROOT.parent / "shared"))
TFLITE = SHARED / "testdata" / "tflite"
EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if p.suffix in (".json", ".mlir"))
HAS_TFLM = importlib.util.find_spec("tflite_micro") is not None


def models() -> list:
    params = [pytest.param(p, id=f"examples/{p.name}") for p in EXAMPLES]
    if not TFLITE.is_dir():
        return params + [pytest.param(None, marks=pytest.mark.skip(
            reason=f"shared test data not found at {TFLITE} (set QC_SHARED_DIR)"), id="shared")]
    skip = [] if HAS_TFLM else [pytest.mark.skip(reason="reading .tflite needs tflite-micro (pip install "
                                                        "'qcodegen[tflite]')")]
    return params + [pytest.param(p, marks=skip, id=str(p.relative_to(TFLITE)))
                     for p in sorted(TFLITE.rglob("*.tflite"))]


def command(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one in-process CLI call; an exception is a traceback and fails the test."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    if code == 2:
        assert err.startswith("qcodegen: error: ") and err.count("\n") == 1, f"{argv[0]}: {err!r}"
    return code, out, err


@pytest.fixture
def planned_once(monkeypatch) -> Callable[[Path], Schedule]:
    """The commands of one test plan its model once: qcodegen.api.plan (which every command calls) returns copies
    of one planned schedule (a refusal is raised anew each time). Returns that planning function."""
    memo: dict[tuple[str, str | None, str | None, int | None], Schedule] = {}
    original = api.plan

    def plan(model: Path | str, *, hybrid: str | None = None, memory: str | None = None,
             arena_limit: int | None = None) -> Schedule:
        key = (str(model), hybrid, memory, arena_limit)
        if key not in memo:
            memo[key] = original(model, hybrid=hybrid, memory=memory, arena_limit=arena_limit)
        return copy.deepcopy(memo[key])

    monkeypatch.setattr(api, "plan", plan)
    return plan


@pytest.mark.parametrize("model", models())
def test_every_command(model: Path, tmp_path: Path, capsys, planned_once):
    try:
        schedule = planned_once(model)
    except QcError as exc:  # refused: every command says so in one line
        refused = f"qcodegen: error: {exc}\n"
        for argv in (["inspect", model], ["compile", model, "-o", tmp_path / "c"], ["verify", model]):
            assert command(capsys, *argv) == (2, "", refused)
        return

    code, out, _ = command(capsys, "inspect", model)
    assert code == 0 and out.startswith(f"model {schedule.name}:")
    code, out, _ = command(capsys, "inspect", model, "--json")
    assert code == 0 and json.loads(out)["arena_bytes"] == schedule.arena_size

    for folder, harness in ((tmp_path / "lib", []), (tmp_path / "exe", ["--harness"])):
        assert command(capsys, "compile", model, "-o", folder, "--name", "m", *harness)[0] == 0
        written = {p.name for p in folder.iterdir()}
        assert {"m.h", "m.c", "m_weights.c", "m_report.json", "m_report.txt"} <= written
        assert ({"main.c", "Makefile"} <= written) == bool(harness)

    rng = np.random.default_rng(0)
    argv = ["run", model]
    for i, arr in enumerate(random_inputs(schedule, rng)):
        np.save(tmp_path / f"in{i}.npy", arr)
        argv += ["-i", tmp_path / f"in{i}.npy"]
    argv += [x for j in range(len(schedule.outputs)) for x in ("-o", tmp_path / f"out{j}.npy")]
    assert command(capsys, *argv)[0] == 0
    for j, name in enumerate(schedule.outputs):
        assert np.load(tmp_path / f"out{j}.npy").shape == schedule.buffers[name].shape

    code, out, _ = command(capsys, "verify", model, "--samples", "2", "--json")
    result = json.loads(out)
    assert code == 0 and result["bit_exact"], result
