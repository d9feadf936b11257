"""`verify --against golden`: the check ops embedded in StableHLO test programs, evaluated on the generated C.

Every func.func of the file is compiled on its own (qcodegen/frontends/stablehlo.py): the constants that feed the
program become the model's inputs, the tensors the checks look at its outputs. All functions of one call are
generated into one folder with distinct symbol prefixes and built as one shared library (host targets; harness
targets build each model), run once on the fed constants, and every check is evaluated on the C outputs as the
StableHLO reference interpreter evaluates it (stablehlo/tests/CheckOps.cpp, stablehlo-translate --interpret):

- check.expect_eq[_const], custom_call @check.expect_eq, custom_call @check.eq on integers: exact equality;
- check.expect_almost_eq[_const] (attribute `tolerance`, default 1e-4) and custom_call @check.eq on floats
  (tolerance 1e-4), custom_call @check.expect_almost_eq (1e-3): |actual - expected| <= tolerance, NaN equals NaN,
  an infinity equals only itself;
- check.expect_close: the float32 ULP distance inside [min_ulp_difference, max_ulp_difference].

A failing check reports how many elements differ, the largest absolute error and its index, and the tie flips:
elements whose value comes (through data movement and dequantization) from a RESCALE rounding half to even whose
exact pre-rounding value lies within float32 rounding error of a tie -- where qcodegen's exact integer rounding and
the interpreter's float32 evaluation may legitimately land on different sides (docs/semantics.md §12.4).
Functions without quantized types are skipped (qcodegen compiles quantized programs).
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import cffi
import numpy as np

from .. import primitives
from ..codegen import generate, load_target
from ..codegen.render import GeneratedModel, c_identifier
from ..codegen.targets import Target
from ..compiler import plan
from ..errors import QcError
from ..fixedpoint import Rounding
from ..frontends import stablehlo as shlo
from ..ir.rescale import RescaleParams
from ..ir.schedule import Schedule, Step, StepIO
from ..reference import run_reference
from .build import compile_cached
from .check import VerifyResult
from .runners import get_runner

_PASS_THROUGH = {"DEQUANTIZE", "CAST", "CLAMP"}  # element i of the output comes from element i of input 0
_TABLES = {"TABLE", "LOOKUP"}  # with one data input: element i from element i of input 0
_MOVES = {"RESHAPE", "TRANSPOSE", "SLICE", "STRIDED_COPY", "CONCAT", "PAD", "GATHER_SLICES"}
_TAG = 1 << 32  # index arrays traced through data movement: (input + 1) * 2^32 + flat index
TIE_RTOL = 2.0 ** -20  # a near-tie: within this (relative) distance of .5 after a half-even RESCALE
MAX_LISTED = 5


@dataclass
class CheckResult:
    kind: str
    where: str
    passed: bool
    size: int = 0
    mismatches: int = 0
    max_abs_error: float | None = None
    index: list[int] | None = None  # first element where the largest error occurs
    expected: Any = None
    got: Any = None
    tie_flips: list[list[int]] = field(default_factory=list)
    traced: list[str] = field(default_factory=list)  # how mismatching elements were computed

    def describe(self) -> str:
        if self.passed:
            return f"{self.kind} ({self.where}): pass"
        text = (f"{self.kind} ({self.where}): {self.mismatches} of {self.size} elements differ, max abs error "
                f"{self.max_abs_error:.6g} at index {self.index} (expected {self.expected}, got {self.got})")
        if self.tie_flips:
            shown = ", ".join(map(str, self.tie_flips[:MAX_LISTED]))
            text += f"; {len(self.tie_flips)} tie flip(s) at {shown}" + (" ..." if len(self.tie_flips) > MAX_LISTED
                                                                         else "")
        else:
            text += "; no tie flips"
        if self.traced:
            text += f" [{'; '.join(self.traced[:3])}]"
        return text


@dataclass
class FunctionResult:
    name: str
    where: str
    status: str  # "pass", "fail", "error" (cannot compile), "skip" (no quantized types)
    reason: str = ""
    checks: list[CheckResult] = field(default_factory=list)
    program: shlo.Program | None = field(default=None, repr=False)
    schedule: Schedule | None = field(default=None, repr=False)

    def describe(self) -> str:
        head = f"@{self.name} ({self.where}): {self.status.upper()}"
        if self.status in ("error", "skip"):
            return f"{head} {self.reason}"
        if self.status == "pass":
            return f"{head} ({len(self.checks)} check{'s' if len(self.checks) != 1 else ''})"
        return head + "".join(f"\n    {c.describe()}" for c in self.checks if not c.passed)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "where": self.where, "status": self.status, "reason": self.reason,
                "checks": [asdict(c) for c in self.checks]}


# ------------------------------------------------------------------------------------------- preparation


def prepare(path: str | Path) -> list[FunctionResult]:
    """Every function of the file, converted and planned (status "pending"), or skipped / failed to compile."""
    results = []
    for fn in shlo.load_programs(path):
        if not fn.quantized:
            results.append(FunctionResult(fn.name, fn.where, "skip", "not a quantized program"))
            continue
        try:
            program = shlo.convert(fn)
            if not program.checks:
                raise QcError("the function has no check ops")
            shlo.finalize(program, [c.actual for c in program.checks] + [c.expected for c in program.checks
                                                                          if isinstance(c.expected, str)])
            graph = program.graph
            graph.outputs = [n for n in graph.outputs if not graph.tensors[n].is_const]  # folded: checked as is
            unfed = [n for n in graph.inputs if n not in program.feeds]
            if unfed:
                raise QcError(f"arguments {', '.join(unfed)} have no values (golden checks run functions whose "
                              "data comes from constants)")
            schedule = plan(graph) if graph.outputs else None
        except QcError as exc:
            results.append(FunctionResult(fn.name, fn.where, "error", f"{type(exc).__name__}: {exc}"))
            continue
        results.append(FunctionResult(fn.name, fn.where, "pending", program=program, schedule=schedule))
    return results


# --------------------------------------------------------------------------------------------- running


def _inputs(result: FunctionResult) -> list[np.ndarray]:
    sched = result.schedule
    return [np.asarray(result.program.feeds[n]).astype(sched.buffers[n].dtype.numpy) for n in sched.inputs]


def _library(models: list[GeneratedModel], target: Target) -> Path:
    sources = [m.outdir / f"{m.name}{suffix}.c" for m in models for suffix in ("", "_weights")]
    return compile_cached(sources, [target.cc, *target.cflags, "-shared", "-fPIC"], ".so", list(target.ldflags))


def _run_host(models: list[GeneratedModel], batches: list[list[np.ndarray]], target: Target, jobs: int
              ) -> list[list[np.ndarray]]:
    """Build the models as `jobs` shared libraries (in parallel), then call each <name>_run once."""
    groups = [list(range(k, len(models), jobs)) for k in range(min(jobs, len(models)))]
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        libraries = list(pool.map(lambda g: _library([models[i] for i in g], target), groups))
    results: list[list[np.ndarray]] = [[] for _ in models]
    for group, lib_path in zip(groups, libraries, strict=True):
        ffi = cffi.FFI()
        ffi.cdef("\n".join(models[i].prototype() for i in group))
        lib = ffi.dlopen(str(lib_path))
        for i in group:
            results[i] = _call(ffi, lib, models[i], batches[i])
    return results


def _call(ffi: cffi.FFI, lib: Any, model: GeneratedModel, batch: list[np.ndarray]) -> list[np.ndarray]:
    outputs = [np.zeros(b.shape, b.dtype.numpy) for b in model.outputs]
    arena = np.zeros(max(model.arena_size, 1) + 16, np.uint8)
    arena_ptr = ffi.cast("void *", arena.ctypes.data + (-arena.ctypes.data) % 16)
    args = [ffi.from_buffer(f"{b.dtype.ctype}[]", np.ascontiguousarray(x, b.dtype.numpy))
            for b, x in zip(model.inputs, batch, strict=True)]
    args += [ffi.from_buffer(f"{b.dtype.ctype}[]", y) for b, y in zip(model.outputs, outputs, strict=True)]
    if getattr(lib, f"{model.name}_run")(*args, arena_ptr) != 0:
        raise QcError(f"{model.name}_run failed")
    return outputs


def execute(results: list[FunctionResult], target: str | Target = "generic", jobs: int | None = None) -> None:
    """Build and run the C of every pending function (host targets: `jobs` shared libraries built in parallel,
    default one per CPU up to 4), then evaluate its checks."""
    jobs = jobs or min(4, os.cpu_count() or 1)
    tgt = load_target(target) if isinstance(target, str) else target
    pending = [r for r in results if r.status == "pending"]
    runnable = [r for r in pending if r.schedule is not None]
    outputs: dict[int, list[np.ndarray]] = {}
    with tempfile.TemporaryDirectory(prefix="qc-golden-") as tmp:
        models = [generate(r.schedule, Path(tmp) / (f"m{k}" if tgt.runner == "harness" else ""), tgt,
                           name=f"g{k}_{c_identifier(r.name)}", harness=tgt.runner == "harness")
                  for k, r in enumerate(runnable)]
        batches = [_inputs(r) for r in runnable]
        if tgt.runner == "host":
            got = _run_host(models, batches, tgt, jobs) if models else []
        else:
            runner = get_runner(tgt)
            got = [runner.run(m, b)[0] for m, b in zip(models, batches, strict=True)]
        for r, out in zip(runnable, got, strict=True):
            outputs[id(r)] = out
    for r in pending:
        values = dict(zip(r.schedule.outputs, outputs[id(r)], strict=True)) if r.schedule else {}
        _evaluate(r, values)


def _value(r: FunctionResult, values: dict[str, np.ndarray], name: str) -> np.ndarray:
    t = r.program.graph.tensors[name]
    return t.data if t.is_const else values[name]


def _evaluate(r: FunctionResult, values: dict[str, np.ndarray]) -> None:
    reference: dict[str, np.ndarray] | None = None
    for check in r.program.checks:
        got = _value(r, values, check.actual)
        expected = check.expected if not isinstance(check.expected, str) else _value(r, values, check.expected)
        result = compare(check, got, expected)
        if not result.passed and r.schedule is not None:
            if reference is None:
                reference = run_reference(r.schedule, _inputs(r))
            _explain(result, r.schedule, reference, check.actual, got, expected, check)
        r.checks.append(result)
    r.status = "pass" if all(c.passed for c in r.checks) else "fail"


# -------------------------------------------------------------------------------------------- checks


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    def ordered(x: np.ndarray) -> np.ndarray:
        bits = x.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    return np.abs(ordered(a) - ordered(b))


def _agree(check: shlo.Check, got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Element-wise: does the check accept got against expected?"""
    if check.ulps is not None:
        d = _ulp_distance(got, expected)
        return (d >= check.ulps[0]) & (d <= check.ulps[1]) | (np.isnan(got) & np.isnan(expected))
    if check.tolerance is None or not (got.dtype.kind == "f" or expected.dtype.kind == "f"):
        return got.astype(np.float64) == expected.astype(np.float64)
    a, b = got.astype(np.float64), expected.astype(np.float64)
    with np.errstate(invalid="ignore"):
        close = np.isfinite(a) & np.isfinite(b) & (np.abs(a - b) <= check.tolerance)
    return (a == b) | (np.isnan(a) & np.isnan(b)) | close


def _shaped(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    expected = np.asarray(expected)
    return expected.reshape(got.shape) if expected.size == got.size else np.broadcast_to(expected, got.shape)


def compare(check: shlo.Check, got: np.ndarray, expected: np.ndarray) -> CheckResult:
    got = np.asarray(got)
    expected = _shaped(expected, got)
    ok = _agree(check, got, expected)
    result = CheckResult(check.kind, check.where, bool(ok.all()), size=int(got.size),
                         mismatches=int((~ok).sum()))
    if not result.passed:
        with np.errstate(invalid="ignore"):
            err = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        err = np.where(ok, -1.0, np.nan_to_num(err, nan=np.inf))
        flat = int(np.argmax(err))
        result.max_abs_error = float(err.reshape(-1)[flat])
        result.index = [int(i) for i in np.unravel_index(flat, got.shape)] if got.shape else []
        result.expected = expected.reshape(-1)[flat].item()
        result.got = got.reshape(-1)[flat].item()
    return result


# ------------------------------------------------------------------------------------------ tie flips


def _source(schedule: Schedule, step: Step, index: int, values: dict[str, np.ndarray]) -> tuple[str, int] | None:
    """The input buffer and flat index a data-movement step copied output element `index` from (None: padding)."""
    io = schedule.io(step)
    moved = [i for i in range(len(io.ins)) if not (step.op == "GATHER_SLICES" and i == 1)]
    args = [(np.arange(b.size, dtype=np.int64) + (i + 1) * _TAG).reshape(b.shape) if i in moved
            else values[b.name] for i, b in enumerate(io.ins)]
    if step.op == "PAD":
        io = StepIO(Step(step.op, step.inputs, step.outputs, dict(step.attrs, pad_const=-1)), io.ins, io.outs)
    tag = int(np.asarray(primitives.get(step.op).reference(io, args)[0]).reshape(-1)[index])
    if tag < _TAG:
        return None
    return step.inputs[tag // _TAG - 1], tag % _TAG


def _tie(schedule: Schedule, step: Step, index: int, values: dict[str, np.ndarray]) -> str | None:
    """If the half-even RESCALE `step` rounded element `index` from within float32 error of a tie, say so."""
    r = RescaleParams.from_attrs(step.attrs)
    io = schedule.io(step)
    v = int(values[step.inputs[0]].reshape(-1)[index])
    c = 0
    if r.per_channel:
        axis = r.axis % len(io.ins[0].shape)
        c = int(np.unravel_index(index, io.ins[0].shape)[axis])
    exact = Fraction((v - r.input_zp) * r.multiplier[c], 1 << r.shift[c])
    exact += r.output_zp
    distance = abs(exact - (exact.numerator // exact.denominator) - Fraction(1, 2))
    if distance <= TIE_RTOL * (abs(exact) + 1):
        return f"exact value {float(exact):.9g} at step {schedule.steps.index(step)} ({step.source})"
    return None


def trace(schedule: Schedule, values: dict[str, np.ndarray], name: str, index: int) -> list[tuple[Step, int]]:
    """The steps element `index` of buffer `name` went through, from its producer back through casts, one-input
    tables and data movement to the first step of another kind (each with the element's index in its output)."""
    path: list[tuple[Step, int]] = []
    while True:
        k = schedule.producer(name)
        if k is None:
            return path
        step = schedule.steps[k]
        path.append((step, index))
        if step.op in _PASS_THROUGH or (step.op in _TABLES and len(step.inputs) == 2):
            name = step.inputs[0]
        elif step.op in _MOVES:
            src = _source(schedule, step, index, values)
            if src is None:
                return path
            name, index = src
        else:
            return path


def _origin(path: list[tuple[Step, int]], values: dict[str, np.ndarray]) -> str:
    step, index = path[-1]
    text = f"from {step.op} ({step.source})"
    if step.op == "QUANTIZE" and np.isnan(values[step.inputs[0]].reshape(-1)[index]):
        text += " of a NaN input"
    return text


def _explain(result: CheckResult, schedule: Schedule, values: dict[str, np.ndarray], name: str, got: np.ndarray,
             expected: np.ndarray, check: shlo.Check) -> None:
    """Fill the tie flips and where the differing elements were computed."""
    ok = _agree(check, got, _shaped(expected, got))
    origins = set()
    for flat in np.flatnonzero(~ok.reshape(-1)):
        path = trace(schedule, values, name, int(flat))
        if not path:
            continue
        origins.add(_origin(path, values))
        rounding = [(s, i) for s, i in path
                    if s.op == "RESCALE" and RescaleParams.from_attrs(s.attrs).rounding is Rounding.HALF_EVEN]
        if rounding and _tie(schedule, rounding[0][0], rounding[0][1], values):
            result.tie_flips.append([int(i) for i in np.unravel_index(int(flat), got.shape)])
    result.traced = sorted(origins)


# ----------------------------------------------------------------------------------------------- API


def summary(results: list[FunctionResult]) -> dict[str, int]:
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "error", "skip")}
    counts["functions"] = len(results)
    return counts


@dataclass
class GoldenResult(VerifyResult):
    """The verdict over a test program's functions; `describe` gives one line per function and the counts."""

    functions: list[FunctionResult] = field(default_factory=list)

    def describe(self) -> str:
        counts = self.extra["summary"]
        return "\n".join([f.describe() for f in self.functions] + [
            f"{counts['functions']} function(s): {counts['pass']} pass, {counts['fail']} fail, {counts['error']} "
            f"error, {counts['skip']} skipped (not quantized)"])


def verify_golden(path: str | Path, target: str | Target = "generic") -> tuple[GoldenResult, list[FunctionResult]]:
    """Compile every function of a StableHLO test program, run the C, evaluate its checks.
    bit_exact: every quantized function passes; samples: functions run; mismatches: differing elements."""
    results = prepare(path)
    execute(results, target)
    counts = summary(results)
    if counts["skip"] == counts["functions"]:
        raise QcError(f"{path}: no quantized function to verify ({counts['functions']} function(s) skipped)")
    first = None
    for r in results:
        bad = next((c for c in r.checks if not c.passed), None)
        if bad is not None:
            first = {"function": r.name, "check": bad.kind, "where": bad.where, "index": bad.index,
                     "expected": bad.expected, "got": bad.got, "tie_flips": len(bad.tie_flips)}
            break
    mismatches = sum(c.mismatches for r in results for c in r.checks)
    verdict = GoldenResult(counts["fail"] == counts["error"] == 0, counts["pass"] + counts["fail"], mismatches,
                           first, extra={"summary": counts, "functions": [r.as_json() for r in results]},
                           functions=results)
    return verdict, results
