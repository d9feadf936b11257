"""qcodegen's Python API: load a model, compile it to a C folder, run it, verify it, inspect its plan, list targets.

The command-line interface (qcodegen/cli.py) is a thin layer over these functions; docs/python-api.md shows them in
use. A `model` argument is a file path (any supported format: .tflite, .tosa, .mlir, .json, ...) or an already
loaded `Graph` (oracles that read the source file, such as `--against tflm`, need the path)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .codegen import generate, list_targets, load_target
from .codegen.render import GeneratedModel, c_identifier
from .codegen.state import state_layout
from .codegen.targets import Target
from .compiler import plan as plan_graph
from .errors import QcError
from .frontends import load_model
from .ir.graph import Graph
from .ir.schedule import MEMORY_POLICIES, MemoryGoal, Schedule
from .kernels import KernelPlan
from .output_folder import OutputFolder
from .reference.executor import check_inputs, sequence_frames
from .report import inspect_dict, inspect_text

Model = str | Path | Graph
Progress = Callable[[int, int], None]


def load(path: str | Path) -> Graph:
    """Read a model file into a Graph (the format from the file's suffix)."""
    return load_model(path)


def memory_goal(memory: str | None = None, arena_limit: int | None = None) -> MemoryGoal:
    """What the memory planner aims at (docs/semantics.md §10.2): a policy (`MEMORY_POLICIES`; default
    "balanced") or, with `arena_limit`, the plan with the fewest extra instructions whose arena fits that many
    bytes."""
    if memory is not None and memory not in MEMORY_POLICIES:
        raise QcError(f"memory policy {memory!r}: expected one of {', '.join(MEMORY_POLICIES)}")
    if arena_limit is not None and arena_limit < 0:
        raise QcError(f"--arena-limit must be a number of bytes >= 0, got {arena_limit}")
    return MemoryGoal(memory or "balanced", arena_limit)


def plan(model: Model, *, hybrid: str | None = None, memory: str | None = None,
         arena_limit: int | None = None) -> Schedule:
    """Lower and plan a model: the Schedule of integer steps with its memory plan and range proofs. `memory`,
    `arena_limit`: the memory goal (`memory_goal`)."""
    graph = model if isinstance(model, Graph) else load(model)
    return plan_graph(graph, hybrid=hybrid, memory=memory_goal(memory, arena_limit))


@dataclass
class CompileResult:
    """What `compile` wrote and what it costs. `report` is the report dictionary (`<name>_report.json`)."""

    name: str
    target: str
    outdir: Path
    files: list[Path]
    arena_bytes: int
    arena_lower_bound_bytes: int
    weights_bytes: int
    macs: int
    code_bytes: int | None  # .text of the model's C for the target (None: the target's tools are missing)
    report: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def rom_bytes(self) -> int | None:
        """Flash: code + constant data (weights and tables), or None when the code size is unknown."""
        return None if self.code_bytes is None else self.code_bytes + self.weights_bytes


def _source_hash(model: Model) -> str | None:
    if isinstance(model, Graph):
        return None
    return "sha256:" + hashlib.sha256(Path(model).read_bytes()).hexdigest()


def compile(model: Model, output: str | Path | None = None, *, target: str = "generic", name: str | None = None,
            harness: bool = False, weight_layout: str | None = None, hybrid: str | None = None,
            force: bool = False, profile: bool = False, memory: str | None = None,
            arena_limit: int | None = None) -> CompileResult:
    """Generate the C folder of `model` for `target` and its reports (`<name>_report.{txt,json,html,csv}`), build
    files (`CMakeLists.txt`, `<name>.mk`) and metadata (`<name>.json`).

    `output` defaults to a folder named after the model. A folder that a previous compile wrote is emptied of that
    compile's files first; a folder holding files qcodegen did not write is refused unless `force`. `profile`: run
    one inference on the target (under QEMU) and add the instructions (and estimated cycles) of each layer to the
    reports."""
    tgt = load_target(target, weight_layout)
    schedule = plan(model, hybrid=hybrid, memory=memory, arena_limit=arena_limit)
    cname = c_identifier(name or schedule.name)
    folder = OutputFolder(Path(output) if output is not None else Path(cname), force=force)
    folder.prepare()
    generated = generate(schedule, folder.path, tgt, name=cname, harness=harness)
    from .build_files import write_build_files, write_metadata
    from .verify.runners import code_size

    sizes = code_size(tgt, generated) if not tgt.missing_tools() else {}
    report = _report(schedule, tgt, sizes, generated.plan)
    if profile:
        from .verify.profile import as_json
        from .verify.profile import profile as profile_layers

        rows = profile_layers(schedule, tgt)
        report["instructions_per_layer"] = [r.instructions for r in rows[:-1]]
        report["profile"] = as_json(rows, tgt)
    files = list(generated.files)
    files += _write_reports(folder.path, cname, report)
    files += write_build_files(generated, tgt)
    options = {"harness": harness, "weight_layout": tgt.extra.get("weight_layout", "compact"), "hybrid": hybrid,
               "memory": schedule.memory_goal.policy, "arena_limit": arena_limit}
    files.append(write_metadata(generated, tgt, report, options, _source_hash(model)))
    files.append(folder.commit(files, {"name": cname, "target": tgt.name}))
    return CompileResult(cname, tgt.name, folder.path, files, schedule.arena_size, schedule.arena_lower_bound,
                         report["weights_bytes"], report["macs"], sizes.get("text_bytes"), report)


def _report(schedule: Schedule, target: Target, sizes: dict[str, int], kernels: KernelPlan | None) -> dict[str, Any]:
    """The report of what was written: its kernel plan's arrays, the measured code size."""
    report = inspect_dict(schedule, kernels, target.name)
    report["version"] = __version__
    io_bytes = sum(schedule.buffers[n].nbytes for n in schedule.inputs + schedule.outputs)
    report["ram"] = {"bytes": schedule.arena_size + io_bytes, "parts": ["arena", "I/O buffers"]}
    if schedule.state:  # one state per stream (docs/semantics.md §13); the struct's bytes
        report["ram"]["bytes"] += state_layout(schedule, c_identifier).size
        report["ram"]["parts"].append("state")
    if report["kernel_stack_scratch"]["bytes"]:  # the steps' stack arrays (the caller's stack, not the arena)
        report["ram"]["bytes"] += report["kernel_stack_scratch"]["bytes"]
        report["ram"]["parts"].append("kernel stack scratch")
    if "text_bytes" in sizes:
        report["code_bytes"] = sizes["text_bytes"]
        report["rom"] = {"bytes": sizes["text_bytes"] + report["weights_bytes"], "parts": ["code", "weights"]}
    return report


def _write_reports(outdir: Path, name: str, report: dict[str, Any]) -> list[Path]:
    from .report_html import render_csv, render_html

    texts = {f"{name}_report.json": json.dumps(report, indent=1) + "\n",
             f"{name}_report.txt": inspect_text(report) + "\n",
             f"{name}_report.html": render_html(report),
             f"{name}_report.csv": render_csv(report)}
    written = []
    for fname, text in texts.items():
        path = outdir / fname
        path.write_text(text)
        written.append(path)
    return written


def run(model: Model, inputs: Sequence[np.ndarray], *, target: str = "generic", weight_layout: str | None = None,
        hybrid: str | None = None, memory: str | None = None, arena_limit: int | None = None) -> list[np.ndarray]:
    """Run the generated C once on `inputs` (arrays of the model's exact input types and shapes); the outputs.

    A streaming model (docs/semantics.md §13) starts from its initial state; it also takes a sequence: every input
    with a leading axis of one length T, run as T invocations on one state, the outputs stacked the same way."""
    tgt = load_target(target, weight_layout)
    schedule = plan(model, hybrid=hybrid, memory=memory, arena_limit=arena_limit)
    frames, stacked = sequence_frames(schedule, list(inputs)) if schedule.state else \
        ([check_inputs(schedule, list(inputs))], False)
    from .verify import get_runner

    with tempfile.TemporaryDirectory(prefix="qc-run-") as tmp:
        generated = generate(schedule, Path(tmp), tgt, harness=tgt.runner == "harness")
        got, _ = get_runner(tgt).run_sequence(generated, frames)
    return [np.stack(per) if stacked else per[0] for per in zip(*got, strict=True)]


def profile(model: Model, *, target: str, weight_layout: str | None = None, hybrid: str | None = None,
            seed: int = 0, memory: str | None = None, arena_limit: int | None = None) -> list[Any]:
    """Instructions (and estimated cycles) of each layer of one inference on `target` (a target whose runner counts
    instructions under QEMU): `LayerCount` rows in execution order, then the rest of the run function."""
    from .verify.profile import profile as profile_layers

    return profile_layers(plan(model, hybrid=hybrid, memory=memory, arena_limit=arena_limit),
                          load_target(target, weight_layout), seed=seed)


def inspect(model: Model, *, hybrid: str | None = None, target: str = "generic",
            weight_layout: str | None = None, memory: str | None = None,
            arena_limit: int | None = None) -> dict[str, Any]:
    """The plan as data: per-step records (`steps`), layers in execution order (`layers`, with the kernel each runs
    on `target` and why), the arena's tensors (`arena`), totals (`macs`, `weights_bytes`: the arrays `compile`
    writes for that target and weight layout, `arena_bytes`, `arena_lower_bound_bytes`, `arena_layer_bound_bytes`),
    the memory goal and patch-based execution (`memory_goal`, `patching`, `recomputed_macs`) and planner notes. The
    model is rendered (not written) for the target: its kernel plan is what `compile` writes."""
    from .codegen.render import render_model

    tgt = load_target(target, weight_layout)
    schedule = plan(model, hybrid=hybrid, memory=memory, arena_limit=arena_limit)
    return inspect_dict(schedule, render_model(schedule, tgt).plan, tgt.name)


@dataclass(frozen=True)
class TargetStatus:
    """A target and whether this machine can build and run it."""

    name: str
    description: str
    ready: bool
    counts_instructions: bool
    reason: str | None  # why it is not ready, or why instructions are not counted

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "ready": self.ready,
                "counts_instructions": self.counts_instructions, "reason": self.reason}


def targets() -> list[TargetStatus]:
    """Every target, the default (`generic`) first."""
    from .verify.runners import cannot_count, unavailable

    found = []
    for t in sorted(list_targets(), key=lambda t: (t.name != "generic", t.name)):
        reason = unavailable(t)
        if reason:
            found.append(TargetStatus(t.name, t.description, False, False, reason))
        elif t.runner == "host":
            found.append(TargetStatus(t.name, t.description, True, False, None))
        else:
            no_count = cannot_count(t)
            found.append(TargetStatus(t.name, t.description, True, no_count is None, no_count))
    return found


# --- verify ------------------------------------------------------------------------------------------------------
@dataclass
class VerifyOptions:
    target: Target
    samples: int
    seed: int
    hybrid: str | None
    max_error_lsb: float | None
    progress: Progress | None
    float_model: Path | None = None
    memory: str | None = None
    arena_limit: int | None = None

    def plan(self, model: Model) -> Schedule:
        return plan(model, hybrid=self.hybrid, memory=self.memory, arena_limit=self.arena_limit)


Oracle = Callable[[Model, VerifyOptions], Any]
ORACLES: dict[str, tuple[str, Oracle]] = {}  # name -> (what it is, for messages; the check)


def oracle(name: str, description: str) -> Callable[[Oracle], Oracle]:
    """Register `verify --against NAME`."""
    def register(fn: Oracle) -> Oracle:
        ORACLES[name] = (description, fn)
        return fn
    return register


def _generated_run(schedule: Schedule, options: VerifyOptions, body: Callable[[GeneratedModel, Any], Any]) -> Any:
    """Generate the C into a temporary folder, then `body(model, runner)`; adds the runner's measurements."""
    from .verify import get_runner

    with tempfile.TemporaryDirectory(prefix="qc-verify-") as tmp:
        generated = generate(schedule, Path(tmp), options.target, harness=options.target.runner == "harness")
        runner = get_runner(options.target, measure=True)
        result = body(generated, runner)
        result.extra.update(runner.measurements(generated))
    return result


def _model_file(model: Model, suffix: str, against: str, what: str) -> Path:
    if isinstance(model, Graph) or Path(model).suffix.lower() != suffix:
        raise QcError(f"--against {against} needs {what}")
    return Path(model)


@oracle("reference", "the numpy reference")
def _against_reference(model: Model, options: VerifyOptions) -> Any:
    from .verify import verify_schedule

    schedule = options.plan(model)
    return _generated_run(schedule, options, lambda g, r: verify_schedule(
        schedule, g, r, samples=options.samples, seed=options.seed, progress=options.progress))


@oracle("tflm", "TFLite Micro")
def _against_tflm(model: Model, options: VerifyOptions) -> Any:
    path = _model_file(model, ".tflite", "tflm", "a .tflite model")
    from .verify.tflm_oracle import verify_against_tflm

    schedule = options.plan(path)
    return _generated_run(schedule, options, lambda g, r: verify_against_tflm(
        path, schedule, g, r, samples=options.samples, seed=options.seed, progress=options.progress))


@oracle("tosa-ref", "the TOSA reference model (numpy reference of the schedule)")
def _against_tosa(model: Model, options: VerifyOptions) -> Any:
    from .verify.tosa_oracle import verify_against_tosa

    return verify_against_tosa(options.plan(model), samples=options.samples, seed=options.seed,
                               progress=options.progress)


@oracle("golden", "the StableHLO program's check ops")
def _against_golden(model: Model, options: VerifyOptions) -> Any:
    path = _model_file(model, ".mlir", "golden", "a StableHLO test program (.mlir) with check ops")
    from .verify.golden import verify_golden

    return verify_golden(path, options.target)[0]


@oracle("float", "the float definition")
def _against_float(model: Model, options: VerifyOptions) -> Any:
    if options.float_model is not None:
        return _against_float_model(model, options)
    path = _model_file(model, ".mlir", "float",
                       "a model file: the float definition is available for StableHLO programs only")
    from .verify.float_accuracy import float_definition, verify_against_float

    definition = float_definition(path, load(path))
    schedule = options.plan(path)
    tolerance = 0.0 if options.max_error_lsb is None else options.max_error_lsb
    return _generated_run(schedule, options, lambda g, r: verify_against_float(
        definition, schedule, g, r, samples=options.samples, seed=options.seed, tolerance_lsb=tolerance,
        progress=options.progress))


def _against_onnx(model: Model, options: VerifyOptions, against: str) -> Any:
    path = _model_file(model, ".onnx", against, "a .onnx model")
    from .verify.onnx_oracle import verify_against_onnx

    schedule = plan(path, hybrid=options.hybrid)
    return _generated_run(schedule, options, lambda g, r: verify_against_onnx(
        path, against, schedule, g, r, samples=options.samples, seed=options.seed))


@oracle("onnxruntime", "onnxruntime")
def _against_onnxruntime(model: Model, options: VerifyOptions) -> Any:
    return _against_onnx(model, options, "onnxruntime")


@oracle("onnx-ref", "the ONNX reference evaluator")
def _against_onnx_reference(model: Model, options: VerifyOptions) -> Any:
    return _against_onnx(model, options, "onnx-ref")


def _against_float_model(model: Model, options: VerifyOptions) -> Any:
    """Accuracy against the float original of a quantized model (per output and per layer)."""
    from .verify.accuracy import verify_against_float_model

    assert options.float_model is not None
    if not options.float_model.is_file():
        raise QcError(f"{options.float_model}: no such file")
    schedule = options.plan(model)
    return _generated_run(schedule, options, lambda g, r: verify_against_float_model(
        options.float_model, schedule, g, r, samples=options.samples, seed=options.seed,
        tolerance_lsb=options.max_error_lsb))


def verify(model: Model, *, target: str = "generic", against: str = "reference", samples: int = 10, seed: int = 0,
           weight_layout: str | None = None, hybrid: str | None = None, max_error_lsb: float | None = None,
           progress: Progress | None = None, float_model: str | Path | None = None, memory: str | None = None,
           arena_limit: int | None = None) -> Any:
    """Check the generated C of `model` against an oracle (`ORACLES`: reference, tflm, tosa-ref, golden, float,
    onnxruntime, onnx-ref).

    Returns a result with `passed` and `as_json()` (the `verify --json` object); bit-exact oracles also have
    `bit_exact`, `samples`, `mismatches` and `first_mismatch`. `float` measures accuracy against the float
    definition, never bit-exactness (docs/schemes.md); with `float_model` (the float .tflite a quantized .tflite was
    made from) it reports error metrics per output and per layer instead (docs/accuracy.md). `progress(done, total)`
    is called per sample."""
    if samples < 1:
        raise QcError("--samples must be at least 1")
    if against not in ORACLES:
        raise QcError(f"unknown oracle {against!r} (known: {', '.join(ORACLES)})")
    if float_model is not None and against != "float":
        raise QcError("--float-model goes with --against float")
    options = VerifyOptions(load_target(target, weight_layout), samples, seed, hybrid, max_error_lsb, progress,
                            None if float_model is None else Path(float_model), memory, arena_limit)
    memory_goal(memory, arena_limit)  # a bad goal is a usage error even for oracles that do not plan
    return ORACLES[against][1](model, options)
