"""The kernels' stack scratch the report counts (KernelChoice.stack_scratch, the report's kernel_stack_scratch) against
the stack frames GCC gives the step functions (-fstack-usage) on Cortex-M4, Cortex-M55 and RV32: every step function's
frame holds its scratch (scratch <= frame), and beyond it no more than FRAME_REST bytes (registers saved, the
kernels' parameter structs, alignment), so a scratch array the choice does not count fails the test."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen import api
from qcodegen.codegen import generate, load_target
from qcodegen.compiler import plan
from qcodegen.frontends import load_model
from qcodegen.kernels import plan_kernels
from qcodegen.verify.runners import unavailable

# The most a step function's frame holds besides the arrays counted: up to 9 core and 16 FP registers saved (100 B),
# a kernel's parameter struct (qc_dsp_dwr_params: 16 words), the tables of a window's tap pointers (up to 12 words),
# a few pointers and the 8-byte alignment of the arrays; the largest such rest measured on these models (GCC 12 -O2)
# is 160 B (a Cortex-M4 dw_table step over tap tables, Cortex-M55 qc_mve_conv_rows_s8's step).
FRAME_REST = 256

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("QC_SHARED_DIR", ROOT / ".." / "shared"))
PERSON = SHARED / "testdata" / "tflite" / "models" / "person_detect.tflite"


def _kind(choice) -> str | None:
    """Which scratch of the Cortex-M4/M55 or RV32 kernels a step uses (None: only small or gathered windows)."""
    params = choice.params
    if choice.window_rows and not (choice.window_rows == "in_place" and choice.stack_scratch == 0):
        return f"window_rows {choice.window_rows}"
    if getattr(params, "q15_copy", 0):
        return "q15 copy"
    if choice.form in ("dw_rows", "dw_plane"):
        return choice.form
    if getattr(params, "geometry", ()):
        return f"{choice.form} rows"
    return None


def _frames(folder: Path, target_name: str) -> tuple[dict[str, int], dict[str, int], set[str]]:
    """The frame and the scratch (bytes) of every step function of the models compiled for the target, and the
    scratch kinds they use."""
    target = load_target(target_name)
    models = [ROOT / "examples" / "kws_like.json", ROOT / "examples" / "mobilenet_like.json"]
    if target_name == "cortex-m4" and PERSON.exists():
        models.append(PERSON)  # MobileNetV1 0.25: the pointwise steps' weights copied as int16 pairs
    frames, scratch, kinds = {}, {}, set()
    for model in models:
        name = re.sub(r"\W", "_", model.stem)
        schedule = plan(load_model(model))
        out = generate(schedule, folder / target_name / name, target, name)
        assert out.plan is not None
        # (-fno-ipa-icf: identical step functions keep their own frames)
        subprocess.run([target.cc, *target.cflags, "-fstack-usage", "-fno-ipa-icf", "-c", f"{name}.c"],
                       cwd=out.outdir, check=True)
        su = (out.outdir / f"{name}.su").read_text()
        got = {m[1]: int(m[2]) for m in re.finditer(rf":({name}_step\d+)(?:\.\w+)?\t(\d+)\t", su)}
        for s in out.plan.steps:
            fn = f"{name}_step{s.index}"
            # (a step function without a frame: GCC removed it, a step storing in place has no code)
            assert fn in got or s.choice.stack_scratch == 0, fn
            if fn in got:
                frames[fn], scratch[fn] = got[fn], s.choice.stack_scratch
                kind = _kind(s.choice)
                if kind:
                    kinds.add(kind)
    return frames, scratch, kinds


@pytest.mark.parametrize("target_name, expected", [
    ("cortex-m4", {"window_rows padded", "window_rows in_place", "dw_rows"}),
    ("cortex-m55", {"conv_px rows", "dw_s8 rows"}),
    ("riscv32", {"dw_plane"})])
def test_reported_scratch_bounds_the_step_frames(tmp_path: Path, target_name: str, expected: set[str]) -> None:
    reason = unavailable(load_target(target_name))
    if reason:
        pytest.skip(reason)
    frames, scratch, kinds = _frames(tmp_path, target_name)
    if target_name == "cortex-m4" and PERSON.exists():
        expected = expected | {"q15 copy"}
    assert kinds >= expected
    over = {fn: (frames[fn], scratch[fn]) for fn in frames if not scratch[fn] <= frames[fn] <= scratch[fn] + FRAME_REST}
    assert not over, f"step functions whose frame (bytes) is not within [scratch, scratch + {FRAME_REST}]: {over}"


def test_report_ram_holds_the_largest_scratch(tmp_path: Path) -> None:
    """The report's kernel_stack_scratch is the largest step's (the steps run one after another), a part of ram in the
    report and the metadata, and its first text line says it."""
    target = load_target("cortex-m4")
    model = ROOT / "examples" / "kws_like.json"
    steps = plan_kernels(plan(load_model(model)), target, "kws_like").steps
    largest = max(steps, key=lambda s: s.choice.stack_scratch)
    assert largest.choice.stack_scratch > 0
    result = api.compile(model, tmp_path, target="cortex-m4")
    report = result.report
    assert report["kernel_stack_scratch"] == {"bytes": largest.choice.stack_scratch, "step": largest.index,
                                              "kernel": largest.choice.kernel}
    io_bytes = sum(int(np.prod(t["shape"])) for t in report["inputs"] + report["outputs"])  # int8 inputs and outputs
    assert report["ram"] == {"bytes": report["arena_bytes"] + io_bytes + largest.choice.stack_scratch,
                             "parts": ["arena", "I/O buffers", "kernel stack scratch"]}
    metadata = json.loads((tmp_path / "kws_like.json").read_text())
    assert metadata["ram"]["stack_scratch_bytes"] == largest.choice.stack_scratch
    first = (tmp_path / "kws_like_report.txt").read_text().splitlines()[0]
    assert first.endswith(f"stack scratch of kernels: {largest.choice.stack_scratch:,} B (step {largest.index}, "
                          f"{largest.choice.kernel})")
