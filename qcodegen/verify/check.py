"""Compare generated C with the numpy reference of the same schedule, bit for bit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codegen.render import GeneratedModel
from ..ir.schedule import Schedule
from ..reference import initial_state, next_state, run_reference
from .runners import HarnessRunner, HostRunner


@dataclass
class VerifyResult:
    bit_exact: bool
    samples: int
    mismatches: int
    first_mismatch: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.bit_exact

    def as_json(self) -> dict[str, Any]:
        return {"bit_exact": self.bit_exact, "samples": self.samples, "mismatches": self.mismatches,
                "first_mismatch": self.first_mismatch, **self.extra}


def float_input_range(schedule: Schedule, name: str) -> tuple[float, float]:
    """A float input feeding a QUANTIZE covers that quantizer's range (plus 10% to exercise saturation)."""
    for step in schedule.steps:
        if step.op == "QUANTIZE" and step.inputs[0] == name:
            a = step.attrs
            scale = float(np.max(a["scale"]))
            lo = (a["qmin"] - np.max(a["zero_point"])) * scale
            hi = (a["qmax"] - np.min(a["zero_point"])) * scale
            pad = 0.1 * (hi - lo)
            return lo - pad, hi + pad
    return -1.0, 1.0


def random_inputs(schedule: Schedule, rng: np.random.Generator) -> list[np.ndarray]:
    """Seeded random inputs over each input's storage range; a few elements pinned to the range ends."""
    arrays = []
    for name in schedule.inputs:
        buf = schedule.buffers[name]
        if buf.dtype.is_float:
            lo, hi = float_input_range(schedule, name)
            arrays.append(rng.uniform(lo, hi, buf.shape).astype(np.float32))
            continue
        lo, hi = (buf.quant.storage_min, buf.quant.storage_max) if buf.quant else (buf.dtype.min, buf.dtype.max)
        arr = rng.integers(lo, hi, size=buf.shape, endpoint=True, dtype=np.int64)
        flat = arr.reshape(-1)
        if flat.size >= 4:
            picks = rng.choice(flat.size, size=max(1, flat.size // 16), replace=False)
            flat[picks] = rng.choice([lo, hi], size=picks.size)
        arrays.append(arr.astype(buf.dtype.numpy))
    return arrays


def _bits(arr: np.ndarray) -> np.ndarray:
    return arr.view(np.uint32) if arr.dtype == np.float32 else arr.astype(np.int64)


def _scalar(v: np.generic) -> int | float:
    return float(v) if np.issubdtype(type(v), np.floating) else int(v)


def _first_difference(schedule: Schedule, values: dict[str, np.ndarray], trace: dict[int, list[bytes]]
                      ) -> dict[str, Any] | None:
    for k, step in enumerate(schedule.steps):
        for j, name in enumerate(step.outputs):
            buf = schedule.buffers[name]
            if k not in trace or j >= len(trace[k]):
                continue
            got = np.frombuffer(trace[k][j], buf.dtype.numpy).reshape(buf.shape)
            want = values[name]
            diff = np.flatnonzero(_bits(got).reshape(-1) != _bits(want).reshape(-1))
            if diff.size:
                i = int(diff[0])
                return {"step": k, "op": step.op, "source": step.source, "tensor": name, "index": i,
                        "expected": _scalar(want.reshape(-1)[i]), "got": _scalar(got.reshape(-1)[i])}
    return None


class Tally:
    """Differing elements over a verification and the first of them."""

    def __init__(self) -> None:
        self.mismatches = 0
        self.first: dict[str, Any] | None = None

    def compare(self, want: np.ndarray, got: np.ndarray, where: dict[str, Any]) -> bool:
        """Count the elements of `got` that differ from `want`; True if some do."""
        diff = np.flatnonzero(_bits(np.asarray(got)).reshape(-1) != _bits(np.asarray(want)).reshape(-1))
        self.mismatches += int(diff.size)
        if diff.size and self.first is None:
            i = int(diff[0])
            self.first = {**where, "index": i, "expected": _scalar(np.asarray(want).reshape(-1)[i]),
                          "got": _scalar(np.asarray(got).reshape(-1)[i])}
        return bool(diff.size)

    def result(self, samples: int) -> VerifyResult:
        return VerifyResult(self.mismatches == 0, samples, self.mismatches, self.first)


def compare_state(tally: Tally, want: dict[str, np.ndarray], model: GeneratedModel, raw: np.ndarray | None,
                  samples: int) -> None:
    """The state after the last of `samples` invocations (the bytes of the C state struct) against the expected
    values; a mismatch is reported at the last sample with "final_state": true."""
    if model.state is None or raw is None:
        return
    got = model.state.decode(raw)
    for name, values in want.items():
        tally.compare(values, got[name], {"sample": samples - 1, "tensor": name, "final_state": True})


def verify_sequence(schedule: Schedule, model: GeneratedModel, runner: HostRunner | HarnessRunner,
                    frames: list[list[np.ndarray]]) -> VerifyResult:
    """A streaming model: the frames run in order on one state, in C and in the numpy reference; every output
    of every frame and the final state must be identical. samples = the number of frames."""
    got, got_state = runner.run_sequence(model, frames)
    tally, state = Tally(), initial_state(schedule)
    for n, frame in enumerate(frames):
        values = run_reference(schedule, frame, state)
        state = next_state(schedule, values)
        for j, name in enumerate(schedule.outputs):
            first = tally.first is None
            differs = tally.compare(values[name], got[n][j], {"sample": n, "step": schedule.producer(name),
                                                              "tensor": name})
            if differs and first and isinstance(runner, HostRunner):  # name the first differing step
                located = _first_difference(schedule, values, _trace_frame(runner, model, frames, n))
                tally.first = {"sample": n, **located} if located is not None else tally.first
    compare_state(tally, state, model, got_state, len(frames))
    return tally.result(len(frames))


def _trace_frame(runner: HostRunner, model: GeneratedModel, frames: list[list[np.ndarray]], n: int) -> dict:
    """The step trace of frame n, run on the state the frames before it left."""
    state = runner.new_state(model)
    for frame in frames[:n]:
        runner.run(model, frame, state=state)
    return runner.run(model, frames[n], trace=True, state=state)[1] or {}


def verify_schedule(schedule: Schedule, model: GeneratedModel, runner: HostRunner | HarnessRunner,
                    samples: int = 10, seed: int = 0, inputs: list[list[np.ndarray]] | None = None,
                    progress: Any = None) -> VerifyResult:
    """Seeded random inputs (or `inputs`) through the C and the numpy reference. A streaming model runs them as
    one sequence of `samples` invocations (verify_sequence)."""
    rng = np.random.default_rng(seed)
    batches = inputs if inputs is not None else [random_inputs(schedule, rng) for _ in range(samples)]
    if schedule.state:
        return verify_sequence(schedule, model, runner, batches)
    mismatches = 0
    first: dict[str, Any] | None = None
    for n, batch in enumerate(batches):
        values = run_reference(schedule, batch)
        got, _ = runner.run(model, batch)
        for j, name in enumerate(schedule.outputs):
            want = values[name]
            diff = np.flatnonzero(_bits(got[j]).reshape(-1) != _bits(want).reshape(-1))
            mismatches += int(diff.size)
            if diff.size and first is None:
                i = int(diff[0])
                first = {"sample": n, "step": schedule.producer(name), "tensor": name, "index": i,
                         "expected": _scalar(want.reshape(-1)[i]), "got": _scalar(got[j].reshape(-1)[i])}
                if isinstance(runner, HostRunner):
                    _, trace = runner.run(model, batch, trace=True)
                    located = _first_difference(schedule, values, trace or {})
                    if located is not None:
                        first = {"sample": n, **located}
        if progress is not None:
            progress(n + 1, len(batches))
    return VerifyResult(mismatches == 0, len(batches), mismatches, first)

