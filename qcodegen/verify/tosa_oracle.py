"""`verify --against tosa-ref`: the numpy reference of a schedule against the TOSA reference model running
the same schedule exported as a TOSA 1.0 graph (an independent check of qcodegen's primitives)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.schedule import Schedule
from ..reference import run_reference
from .check import VerifyResult, random_inputs
from .tosa_export import export_graph, run_graph


def _differences(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Flat indices where two arrays of the same buffer differ (float bits compared exactly)."""
    if want.dtype == np.float32:
        want, got = want.view(np.uint32), got.view(np.uint32)
    return np.flatnonzero(want.reshape(-1) != got.reshape(-1))


def _mismatch(schedule: Schedule, name: str, index: int, tosa: np.ndarray, numpy_ref: np.ndarray
              ) -> dict[str, Any]:
    k = schedule.producer(name)
    step = schedule.steps[k] if k is not None else None
    return {"step": k, "op": step.op if step else None, "source": step.source if step else "", "tensor": name,
            "index": index, "expected": tosa.reshape(-1)[index].item(),
            "got": numpy_ref.reshape(-1)[index].item()}


def _locate(schedule: Schedule, batch: list[np.ndarray], values: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """The first step (in schedule order) whose output differs, from a graph exposing every step output."""
    graph, names = export_graph(schedule, trace=True)
    outs = dict(zip(names, run_graph(graph, schedule, names, batch), strict=True))
    for step in schedule.steps:
        for name in step.outputs:
            if name in outs:
                diff = _differences(outs[name], values[name])
                if diff.size:
                    return _mismatch(schedule, name, int(diff[0]), outs[name], values[name])
    return None


def verify_against_tosa(schedule: Schedule, samples: int = 10, seed: int = 0, *,
                        inputs: list[list[np.ndarray]] | None = None, progress: Any = None) -> VerifyResult:
    """Run qcodegen's numpy reference and the TOSA reference model on the same seeded inputs (the inputs
    `verify --against reference` uses for this seed) and compare every model output exactly.

    In `first_mismatch`, `expected` is the TOSA reference model's value and `got` the numpy reference's; the
    step is the first one whose output differs (every step output is compared once a mismatch is found).
    Raises UnsupportedError for steps TOSA cannot express and QcError when the reference model reports
    TOSA_ERROR or TOSA_UNPREDICTABLE."""
    if schedule.state:
        raise UnsupportedError(f"model {schedule.name!r} keeps state across runs; --against tosa-ref compares "
                               f"stateless graphs only (use --against reference or tflm)")
    rng = np.random.default_rng(seed)
    batches = inputs if inputs is not None else [random_inputs(schedule, rng) for _ in range(samples)]
    graph, names = export_graph(schedule)
    mismatches = 0
    first: dict[str, Any] | None = None
    for n, batch in enumerate(batches):
        values = run_reference(schedule, batch)
        for name, tosa in zip(names, run_graph(graph, schedule, names, batch), strict=True):
            diff = _differences(tosa, values[name])
            mismatches += int(diff.size)
            if diff.size and first is None:
                first = {"sample": n, **(_locate(schedule, batch, values)
                                         or _mismatch(schedule, name, int(diff[0]), tosa, values[name]))}
        if progress is not None:
            progress(n + 1, len(batches))
    return VerifyResult(mismatches == 0, len(batches), mismatches, first)
