"""Helpers to check one primitive (or a short chain) in generated C against its numpy reference.
Used by the test-suite and handy when adding a primitive."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .codegen import Target, generate, load_target
from .compiler import check_schedule
from .ir.dtypes import dtype
from .ir.quant import QuantType
from .ir.schedule import CONST, INPUT, OUTPUT, Buffer, Schedule, Step
from .plan.memory import plan_memory
from .plan.ranges import analyse_ranges
from .verify import VerifyResult, get_runner, verify_schedule


@dataclass
class Var:
    """A model input of the test schedule, random over [lo, hi] (default: the dtype range)."""

    shape: tuple[int, ...]
    dtype: str
    lo: int | None = None
    hi: int | None = None


@dataclass
class Const:
    values: np.ndarray
    dtype: str


def step_schedule(op: str, inputs: list[Var | Const], outputs: list[tuple[tuple[int, ...], str]],
                  name: str = "t", **attrs: Any) -> Schedule:
    """A schedule with a single step of `op`; its outputs are the model outputs."""
    sched = Schedule(name)
    in_names = []
    for i, spec in enumerate(inputs):
        bname = f"in{i}"
        d = dtype(spec.dtype)
        if isinstance(spec, Const):
            sched.add_buffer(Buffer(bname, tuple(np.shape(spec.values)), d, CONST,
                                    np.asarray(spec.values).astype(d.numpy)))
        else:
            quant = None
            if not d.is_float and (spec.lo is not None or spec.hi is not None):
                lo = d.min if spec.lo is None else spec.lo
                hi = d.max if spec.hi is None else spec.hi
                quant = QuantType.per_tensor(d, 1.0, 0, storage_min=lo, storage_max=hi)
            sched.add_buffer(Buffer(bname, tuple(spec.shape), d, INPUT, quant=quant))
            sched.inputs.append(bname)
        in_names.append(bname)
    out_names = []
    for j, (shape, dt) in enumerate(outputs):
        sched.add_buffer(Buffer(f"out{j}", tuple(shape), dtype(dt), OUTPUT))
        out_names.append(f"out{j}")
    sched.outputs = out_names
    sched.steps.append(Step(op, in_names, out_names, attrs, source=f"test {op}"))
    return sched


def prepare(schedule: Schedule) -> Schedule:
    check_schedule(schedule)
    analyse_ranges(schedule)
    plan_memory(schedule)
    return schedule


def c_vs_reference(schedule: Schedule, samples: int = 3, seed: int = 0, target: str | Target = "generic",
                   runner: str | None = None, extra_cflags: tuple[str, ...] = (),
                   inputs: list[list[np.ndarray]] | None = None) -> VerifyResult:
    """Plan (checks, ranges, memory), generate C, run it and compare with the reference."""
    prepare(schedule)
    return verify_planned(schedule, samples, seed, target, runner, extra_cflags, inputs)


def verify_planned(schedule: Schedule, samples: int = 3, seed: int = 0, target: str | Target = "generic",
                   runner: str | None = None, extra_cflags: tuple[str, ...] = (),
                   inputs: list[list[np.ndarray]] | None = None) -> VerifyResult:
    """Generate C for an already planned schedule (e.g. from qcodegen.compiler.plan), run it and compare with
    the reference (what `qcodegen verify` does)."""
    tgt = load_target(target) if isinstance(target, str) else target
    with tempfile.TemporaryDirectory(prefix="qc-test-") as tmp:
        model = generate(schedule, Path(tmp), tgt, harness=True)
        return verify_schedule(schedule, model, get_runner(tgt, runner, extra_cflags), samples=samples,
                               seed=seed, inputs=inputs)


def assert_bit_exact(schedule: Schedule, **kw: Any) -> None:
    result = c_vs_reference(schedule, **kw)
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"


def tflm_vs_c(workdir: Path, model: bytes, batches: list[list[np.ndarray]]) -> Schedule:
    """Compile .tflite bytes with qcodegen and run the C, TFLite Micro and the numpy reference on every batch;
    assert every output element is equal. Returns the planned schedule. Needs tflite-micro."""
    from .compiler import plan
    from .frontends.tflite import load_tflite
    from .verify.tflm_oracle import verify_against_tflm

    path = workdir / "model.tflite"
    path.write_bytes(model)
    schedule = plan(load_tflite(path))
    target = load_target("generic")
    generated = generate(schedule, workdir / "c", target)
    runner = get_runner(target)
    for result in (verify_against_tflm(path, schedule, generated, runner, inputs=batches),
                   verify_schedule(schedule, generated, runner, inputs=batches)):
        assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"
    return schedule


SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all")


def assert_clang_sanitized(schedule: Schedule, samples: int = 2) -> None:
    """Build the harness with clang, the generic target's -Werror flags and ASan/UBSan; run it bit-exact."""
    import dataclasses

    target = dataclasses.replace(load_target("generic"), cc="clang")
    assert_bit_exact(schedule, samples=samples, runner="harness", extra_cflags=SANITIZE_FLAGS, target=target)
