"""`qcodegen verify MODEL --against float`: the generated C against the float definition, element by element.

The float definition of a StableHLO program is the program as written -- before QDQ folding, wide-reduction fusion
and constant folding -- decomposed per op (dequantize the quantized operands, the float op, quantize the result;
qcodegen/frontends/stablehlo_float.py) and evaluated in numpy with the interpreter's float32 arithmetic. For a QDQ
program that is its own float meaning. The generated C runs on the same seeded inputs as `--against reference`
(qcodegen/verify/check.random_inputs).

Per output: a quantized output's error is |C - float definition| in storage units (LSB); a float output that is the
dequantization of a quantized tensor is measured in that tensor's LSB (|error| / scale, per element) and in
absolute units; other float outputs (hybrid ops) in absolute units only. `elements_off` counts the elements that
differ at all; `elements_on_ties` those of them where the float32 evaluation itself differs from the exactly
rounded definition (the same graph in real arithmetic, stablehlo_float.EXACT): its float32 rounding errors straddle
a rounding boundary there. The check passes when no LSB error exceeds the tolerance (default 0: every element
equal). Never reported as bit-exact: `bit_exact` is null in the JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..codegen.render import GeneratedModel
from ..errors import QcError
from ..frontends.stablehlo import convert, load_programs
from ..frontends.stablehlo_float import EXACT, float_reference
from ..ir.graph import Graph
from ..ir.schedule import Schedule
from .check import random_inputs
from .runners import HarnessRunner, HostRunner

_DEQUANTIZES = ("stablehlo.uniform_dequantize", "quant.dcast")


@dataclass
class OutputError:
    name: str
    max_error_lsb: float | None = None  # None: a float output with no quantized source
    max_abs_error: float | None = None  # float outputs only
    elements_over: int = 0  # elements whose LSB error exceeds the tolerance
    elements_off: int = 0  # elements that differ at all
    elements_on_ties: int = 0  # of elements_off: where the float32 definition differs from the exact rounding

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "max_error_lsb": self.max_error_lsb, "max_abs_error": self.max_abs_error,
                "elements_over_tolerance": self.elements_over, "elements_off": self.elements_off,
                "elements_on_ties": self.elements_on_ties}


@dataclass
class FloatAccuracyResult:
    samples: int
    tolerance_lsb: float
    outputs: list[OutputError]
    first_mismatch: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def max_error_lsb(self) -> float | None:
        values = [o.max_error_lsb for o in self.outputs if o.max_error_lsb is not None]
        return max(values) if values else None

    @property
    def passed(self) -> bool:
        worst = self.max_error_lsb
        return worst is None or worst <= self.tolerance_lsb

    def as_json(self) -> dict[str, Any]:
        return {"bit_exact": None, "samples": self.samples,
                "mismatches": sum(o.elements_over for o in self.outputs), "first_mismatch": self.first_mismatch,
                "pass": self.passed, "max_error_lsb": self.max_error_lsb, "tolerance_lsb": self.tolerance_lsb,
                "elements_off": sum(o.elements_off for o in self.outputs),
                "elements_on_ties": sum(o.elements_on_ties for o in self.outputs),
                "per_output": [o.as_json() for o in self.outputs], **self.extra}

    def describe(self) -> str:
        worst = ("no quantized output: absolute errors only" if self.max_error_lsb is None
                 else f"max |error| {_fmt(self.max_error_lsb)} LSB (tolerance {self.tolerance_lsb:g})")
        lines = [f"{'PASS' if self.passed else 'FAIL'} against the float definition: {self.samples} samples, {worst}"]
        for o in self.outputs:
            lsb = "" if o.max_error_lsb is None else f" {_fmt(o.max_error_lsb)} LSB,"
            size = lsb + (f" {o.max_abs_error:.6g} absolute," if o.max_abs_error is not None else "")
            lines.append(f"  {o.name}:" + (f" max |error|{size}" if size else "")
                         + f" {o.elements_off} element(s) off ({o.elements_on_ties} on float32 ties), "
                         f"{o.elements_over} over the tolerance")
        if self.extra:
            lines.append(", ".join(f"{k}: {v}" for k, v in self.extra.items()))
        return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def float_definition(path: str | Path, compiled: Graph) -> Graph:
    """The program as written, with the compiled graph's inputs (arguments and fed constants) as inputs."""
    if Path(path).suffix.lower() != ".mlir":
        raise QcError(f"{path}: the float definition is available for StableHLO programs only")
    try:
        fns = load_programs(path)
    except QcError as exc:
        raise QcError(f"{path}: the float definition is available for StableHLO programs only ({exc})") from None
    fn = next((f for f in fns if f.name == compiled.name), fns[0])
    program = convert(fn)
    graph = program.graph
    graph.outputs = list(dict.fromkeys(program.returns))
    for name in compiled.inputs:
        if name not in graph.inputs:
            graph.tensors[name].data = None
            graph.inputs.append(name)
    if graph.inputs != compiled.inputs or graph.outputs != compiled.outputs:
        raise QcError(f"{path}: the compiled program's inputs/outputs {compiled.inputs}/{compiled.outputs} do not "
                      f"match the program's {graph.inputs}/{graph.outputs}")
    return graph


def _lsb_scales(graph: Graph, name: str) -> np.ndarray | None:
    """Per-element scale of the quantized tensor a float output dequantizes (None if it has none)."""
    t = graph.tensors[name]
    if t.quant is not None:
        return np.ones(t.shape)
    op = next((o for o in graph.ops if name in o.outputs), None)
    if op is None or op.kind not in _DEQUANTIZES:
        return None
    src = graph.tensors[op.inputs[0]]
    return np.asarray(src.quant.expand(src.shape)[0], np.float64)


def verify_against_float(definition: Graph, schedule: Schedule, model: GeneratedModel,
                         runner: HostRunner | HarnessRunner, samples: int = 10, seed: int = 0,
                         tolerance_lsb: float = 0.0, progress: Any = None) -> FloatAccuracyResult:
    """Run the C on seeded inputs and measure each output against `definition` (see float_definition)."""
    rng = np.random.default_rng(seed)
    scales = [_lsb_scales(definition, n) for n in definition.outputs]
    errors = [OutputError(n) for n in schedule.outputs]
    first: dict[str, Any] | None = None
    for k in range(samples):
        batch = random_inputs(schedule, rng)
        want = float_reference(definition, batch)
        exact = float_reference(definition, batch, EXACT)
        got, _ = runner.run(model, batch)
        for j, (e, w, x, g, s) in enumerate(zip(errors, want, exact, got, scales, strict=True)):
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            if g.dtype.kind == "f":
                e.max_abs_error = max(e.max_abs_error or 0.0, float(diff.max(initial=0.0)))
            e.elements_off += int(np.count_nonzero(diff))
            if s is None:
                continue
            tie = np.abs(x.astype(np.float64) - w.astype(np.float64)) / s >= 0.5  # other storage values
            e.elements_on_ties += int(np.count_nonzero((diff != 0) & tie))
            lsb = np.round(diff / s, 3)  # dequantized values: whole LSBs up to float32 rounding
            e.max_error_lsb = max(e.max_error_lsb or 0.0, float(lsb.max(initial=0.0)))
            over = np.flatnonzero(lsb.reshape(-1) > tolerance_lsb)
            e.elements_over += int(over.size)
            if over.size and first is None:
                i = int(over[0])
                first = {"sample": k, "tensor": schedule.outputs[j], "index": i,
                         "expected": float(w.reshape(-1)[i]), "got": float(g.reshape(-1)[i]),
                         "error_lsb": float(lsb.reshape(-1)[i])}
        if progress is not None:
            progress(k + 1, samples)
    return FloatAccuracyResult(samples, tolerance_lsb, errors, first)

