"""qcodegen as a system under test of the TOSA conformance suite.

    tosa_verif_run_tests -r -t <tests> --sut-module qcodegen.conformance.tosa_sut \\
        [--sut-module-args qcodegen.conformance.tosa_sut:target=generic]

For each test folder (desc.json + test.tosa + input .npy files) the runner compiles the graph to C for the target
(default generic), builds it, runs it on the test's inputs and writes every output under the name desc.json gives
(`ofm_file`); the test runner then moves the files aside and, for compliance tests, checks them with tosa_verify
against the reference model's results.

Graph result codes:
- TOSA_ERROR: qcodegen rejected the graph (GraphError: a TOSA ERROR_IF, or an invalid graph), before any C exists.
- TOSA_UNPREDICTABLE: a TOSA REQUIRE fails, decided at plan time (e.g. a RESCALE shift outside [2, 62]) or by
  qcodegen's numpy reference on the test's data (e.g. an i32 ADD that overflows, an index out of range).
- OTHER_ERROR: everything else (an unsupported operator or type, a build failure); the message says which.

Value ranges: TOSA tensors carry no value ranges, while qcodegen's planner proves for the declared range of each
input that no intermediate overflows, and widens the steps where it cannot (int64 arithmetic, saturated results:
Step.widened). With `ranges=data` (the default) the SUT declares each integer input's range as that of the test's
data, so raw i32 operands (e.g. ADD inputs in [-2^30, 2^30)) get proven int32 arithmetic where the data allow;
`ranges=type` declares the full element-type range (what a deployed model gets), and such steps are widened.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import numpy as np

from ..codegen import generate, load_target
from ..compiler import plan
from ..errors import GraphError, QcError, install_hint
from ..fixedpoint import Unpredictable
from ..frontends.tosa import load_tosa
from ..ir.graph import Graph
from ..ir.quant import QuantType
from ..reference import run_reference
from ..verify import get_runner

try:
    from runner.tosa_test_runner import TosaTestRunner
except ImportError as _exc:
    raise ImportError(f"qcodegen.conformance.tosa_sut needs tosa-tools: {install_hint('oracles')}") from _exc

Outcome = TosaTestRunner.TosaGraphResult


@dataclass
class Options:
    target: str = "generic"
    ranges: str = "data"  # "data": input ranges of the test's data; "type": full element-type ranges

    @classmethod
    def parse(cls, args: list[str]) -> Options:
        """`--sut-module-args qcodegen.conformance.tosa_sut:key=value` items (a bare value names the target)."""
        options = cls()
        for item in args:
            key, _, value = item.partition("=")
            if not value:
                key, value = "target", key
            if key not in ("target", "ranges") or (key == "ranges" and value not in ("data", "type")):
                raise QcError(f"tosa_sut: unknown argument {item!r} (use target=<name>, ranges=data|type)")
            setattr(options, key, value)
        return options


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _build_lock(model_dir: Path) -> threading.Lock:
    """One lock per generated C text: tosa_verif_run_tests runs tests in threads, and tests that differ only in
    their data generate the same C, which the compile cache must not build twice at once."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(model_dir.glob("*.c")))).hexdigest()
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(digest, threading.Lock())


def _load_inputs(test_dir: Path, desc: dict[str, Any], graph: Graph) -> list[np.ndarray]:
    """The test's input arrays in the graph's input order, converted to the graph's element types."""
    files = dict(zip(desc["ifm_name"], desc["ifm_file"], strict=True))
    arrays = []
    for name in graph.inputs:
        if name not in files:
            raise QcError(f"graph input {name!r} has no data file in desc.json")
        t = graph.tensors[name]
        arr = np.load(test_dir / files[name], allow_pickle=False)
        if arr.shape != t.shape:
            raise QcError(f"input {name!r}: data of shape {list(arr.shape)} for a tensor of shape {list(t.shape)}")
        if not t.dtype.is_float and arr.size and (arr.min() < t.dtype.min or arr.max() > t.dtype.max):
            raise QcError(f"input {name!r}: values outside {t.dtype}")
        arrays.append(arr.astype(t.dtype.numpy))
    return arrays


def _write_outputs(test_dir: Path, desc: dict[str, Any], names: list[str], outputs: list[np.ndarray]) -> None:
    files = dict(zip(desc["ofm_name"], desc["ofm_file"], strict=True))
    for name, arr in zip(names, outputs, strict=True):
        if name not in files:
            raise QcError(f"graph output {name!r} has no result file in desc.json")
        np.save(test_dir / files[name], arr)


def _declare_ranges(graph: Graph, inputs: list[np.ndarray]) -> None:
    for name, arr in zip(graph.inputs, inputs, strict=True):
        t = graph.tensors[name]
        if not t.dtype.is_float and t.dtype.name != "bool" and arr.size:
            lo, hi = int(arr.min()), int(arr.max())  # (scale and zero point are unused by TOSA operators)
            t.quant = QuantType.per_tensor(t.dtype, 1.0, min(max(0, lo), hi), storage_min=lo, storage_max=hi)


def run_test(test_dir: Path, desc: dict[str, Any], options: Options | None = None) -> tuple[Outcome, str | None]:
    """Compile and run one conformance test; on TOSA_VALID its outputs are written as desc.json names them."""
    options = options or Options()
    try:
        graph = load_tosa(test_dir / desc["tosa_file"])
        inputs = _load_inputs(test_dir, desc, graph)
        if options.ranges == "data":
            _declare_ranges(graph, inputs)
        schedule = plan(graph)
        run_reference(schedule, inputs)  # data-dependent TOSA REQUIREs
        target = load_target(options.target)
        with tempfile.TemporaryDirectory(prefix="qc-tosa-sut-") as tmp:
            model = generate(schedule, Path(tmp), target, harness=target.runner == "harness")
            with _build_lock(Path(tmp)):
                outputs, _ = get_runner(target).run(model, inputs)
        _write_outputs(test_dir, desc, schedule.outputs, outputs)
    except GraphError as exc:
        return Outcome.TOSA_ERROR, str(exc)
    except Unpredictable as exc:
        return Outcome.TOSA_UNPREDICTABLE, str(exc)
    except QcError as exc:
        return Outcome.OTHER_ERROR, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a qcodegen bug: report it on the test instead of stopping the whole run
        return Outcome.OTHER_ERROR, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Outcome.TOSA_VALID, None


class TosaSUTRunner(TosaTestRunner):
    """The SUT class tosa_verif_run_tests loads (`--sut-module qcodegen.conformance.tosa_sut`)."""

    def __init__(self, args: Any, runner_args: list[str], test_dir: Path) -> None:
        super().__init__(args, runner_args, test_dir)
        self.options = Options.parse(runner_args)

    def runTestGraph(self) -> tuple[Any, str | None]:  # noqa: N802  (the runner's interface)
        return run_test(Path(self.testDirPath), self.testDesc, self.options)


# ---- summarising a run of tosa_verif_run_tests ------------------------------------------------------------------

SUT = __name__.replace("__main__", "qcodegen.conformance.tosa_sut")
REFERENCE = "runner.tosa_refmodel_sut_run"
_PASS = {"EXPECTED_PASS", "EXPECTED_FAILURE"}


@dataclass
class CaseResult:
    test: Path
    operator: str
    positive: bool
    passed: bool
    reason: str = ""
    extensions: tuple[str, ...] = ()  # the TOSA extensions the test needs


def operator_of(test_dir: Path) -> str:
    """The TOSA operator a conformance test exercises (lower case)."""
    desc = json.loads((test_dir / "desc.json").read_text())
    return str(desc.get("test_details", {}).get("operator", test_dir.parent.name)).lower()


def _xunit(path: Path) -> dict[str, dict[str, str | None]]:
    """runner -> test path -> failure message (None: passed); skipped tests are left out."""
    results: dict[str, dict[str, str | None]] = {}
    for case in ElementTree.parse(path).iter("testcase"):
        if case.find("skipped") is not None:
            continue
        failure = case.find("failure")
        message = None if failure is None else (failure.get("message") or failure.text or "failed")
        results.setdefault(case.get("classname", ""), {})[case.get("name", "")] = message
    return results


def _reason(message: str) -> str:
    """The first informative line of a failure message, without the result code prefix."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    line = next((ln for ln in lines if "Error" in ln or "error" in ln), lines[0] if lines else "failed")
    return line.split(": ", 1)[1] if line.split(":", 1)[0].isupper() else line


def _same_results(test_dir: Path, desc: dict[str, Any]) -> str:
    """'' when qcodegen's result files equal the reference model's bit for bit, else what differs. Tests whose
    compliance mode is not EXACT (RESCALE_INEXACT: EXT-INEXACTROUND) are left to the runner's tosa_verify check,
    which accepts any result within the mode's error bound."""
    modes = {t.get("mode") for t in desc.get("meta", {}).get("compliance", {}).get("tensors", {}).values()}
    if modes - {"EXACT"}:
        return ""
    for name in desc["ofm_file"]:
        stem = Path(name)
        ours = test_dir / stem.with_suffix(f".{SUT}{stem.suffix}")
        ref = test_dir / stem.with_suffix(f".{REFERENCE}{stem.suffix}")
        if not (ours.is_file() and ref.is_file()):
            return f"result file {ours.name if not ours.is_file() else ref.name} is missing"
        a, b = np.load(ours), np.load(ref)
        if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
            diff = int(np.count_nonzero(a != b)) if a.shape == b.shape else -1
            return f"{name}: differs from the reference model ({a.dtype}{list(a.shape)} vs {b.dtype}" \
                   f"{list(b.shape)}, {diff} elements)"
    return ""


def collect(xunit: Path, compare: bool = True) -> list[CaseResult]:
    """qcodegen's outcome for every test of a tosa_verif_run_tests run (its xunit file). With `compare`, a passing
    positive test must also give results equal bit for bit to the reference model's (the runner checks only
    compliance tests itself; run runner.tosa_refmodel_sut_run alongside qcodegen's SUT), unless its compliance mode
    allows an error bound."""
    outcomes = []
    for name, message in _xunit(xunit).get(SUT, {}).items():
        test_dir = Path(name)
        desc = json.loads((test_dir / "desc.json").read_text())
        positive = not desc["expected_failure"]
        reason = "" if message is None else _reason(message)
        if message is None and positive and compare:
            reason = _same_results(test_dir, desc)
        needs = tuple(desc.get("test_requirements", {}).get("extensions_required", []))
        outcomes.append(CaseResult(test_dir, operator_of(test_dir), positive, not reason, reason, needs))
    return outcomes


def summary(outcomes: list[CaseResult]) -> str:
    """Totals, per-operator pass counts and the failure reasons (most frequent first)."""
    lines = []
    groups = [(kind, [o for o in outcomes if o.positive == (kind == "positive")]) for kind in ("positive", "negative")]
    groups += [(f"  needing {ext}", [o for o in outcomes if ext in o.extensions])
               for ext in sorted({e for o in outcomes for e in o.extensions})]
    for kind, group in groups:
        if group:
            passed = sum(o.passed for o in group)
            lines.append(f"{kind}: {passed}/{len(group)} passed ({100 * passed / len(group):.1f}%)")
    per_op: dict[str, list[CaseResult]] = {}
    for o in outcomes:
        per_op.setdefault(o.operator, []).append(o)
    lines.append("per operator (passed/total):")
    lines += [f"  {op:<28} {sum(o.passed for o in group):>5}/{len(group)}" for op, group in sorted(per_op.items())]
    reasons: dict[str, list[CaseResult]] = {}
    for o in outcomes:
        if not o.passed:
            reasons.setdefault(f"{o.operator}: {re.sub(r'[0-9]+', '#', o.reason)[:160]}", []).append(o)
    if reasons:
        lines.append("failures (count, operator: reason, example):")
        for key, group in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  {len(group):>5}  {key}  [{group[0].test.name}]")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qcodegen.conformance.tosa_sut",
                                     description="Summarise a tosa_verif_run_tests run of qcodegen's SUT.")
    parser.add_argument("xunit", type=Path, help="the run's xunit file (--xunit-file)")
    parser.add_argument("--no-compare", action="store_true",
                        help="do not compare results with runner.tosa_refmodel_sut_run's")
    args = parser.parse_args(argv)
    outcomes = collect(args.xunit, compare=not args.no_compare)
    print(summary(outcomes))
    return 0 if outcomes and all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
