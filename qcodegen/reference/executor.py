"""Execute a schedule step by step with each primitive's numpy reference."""

from __future__ import annotations

import numpy as np

from .. import primitives
from ..errors import QcError
from ..ir.schedule import CONST, Schedule


def check_inputs(schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Inputs must have exactly the model's element type and shape; never convert silently."""
    if len(inputs) != len(schedule.inputs):
        raise QcError(f"model {schedule.name!r} takes {len(schedule.inputs)} input(s), got {len(inputs)}")
    checked = []
    for i, (name, arr) in enumerate(zip(schedule.inputs, inputs, strict=True)):
        buf = schedule.buffers[name]
        arr = np.asarray(arr)
        if arr.dtype != buf.dtype.numpy:
            raise QcError(f"input {i} ({name!r}) must be {buf.dtype.numpy} ({buf.dtype}), got {arr.dtype}")
        if arr.shape != buf.shape:
            raise QcError(f"input {i} ({name!r}) must have shape {list(buf.shape)}, got {list(arr.shape)}")
        if buf.quant is not None and arr.size:
            lo, hi = buf.quant.storage_min, buf.quant.storage_max
            if arr.min() < lo or arr.max() > hi:
                raise QcError(f"input {i} ({name!r}) has values outside the storage range [{lo}, {hi}]")
        checked.append(np.require(arr, requirements="C"))
    return checked


State = dict[str, np.ndarray]


def sequence_frames(schedule: Schedule, arrays: list[np.ndarray]) -> tuple[list[list[np.ndarray]], bool]:
    """The invocations a streaming model runs on `arrays`, and whether they form a sequence: every array has the
    input's shape (one invocation) or a leading sequence axis of one length T >= 1 (T invocations)."""
    shapes = [schedule.buffers[n].shape for n in schedule.inputs]
    stacked = [np.ndim(a) == len(s) + 1 and np.shape(a)[1:] == s for a, s in zip(arrays, shapes, strict=False)]
    if len(arrays) != len(shapes) or not any(stacked):
        return [check_inputs(schedule, arrays)], False
    lengths = {np.shape(a)[0] for a in arrays}
    if not all(stacked) or len(lengths) != 1 or 0 in lengths:
        got = [list(np.shape(a)) for a in arrays]
        raise QcError(f"model {schedule.name!r}: a sequence needs a leading axis of one length T >= 1 on every "
                      f"input, shapes (T, ...) of {[list(s) for s in shapes]}; got {got}")
    return [check_inputs(schedule, [a[t] for a in arrays]) for t in range(lengths.pop())], True


def initial_state(schedule: Schedule) -> State:
    """The values of the state variables before the first invocation (empty for a stateless model)."""
    return {v.name: np.asarray(v.initial).copy() for v in schedule.state}


def next_state(schedule: Schedule, values: dict[str, np.ndarray]) -> State:
    """The state after the invocation that computed `values` (run_reference's result)."""
    return {v.name: values[v.next].copy() for v in schedule.state}


def run_reference(schedule: Schedule, inputs: list[np.ndarray], state: State | None = None) -> dict[str, np.ndarray]:
    """Values of every buffer after running the schedule (inputs, constants and state included). `state`: the
    state at the start of this invocation (default: the initial state); next_state() gives the one after it."""
    values: dict[str, np.ndarray] = {}
    for name, arr in zip(schedule.inputs, check_inputs(schedule, inputs), strict=True):
        values[name] = arr
    values.update(initial_state(schedule) if state is None else {v.name: state[v.name] for v in schedule.state})
    for name, buf in schedule.buffers.items():
        if buf.kind == CONST:
            values[name] = buf.data
    for k, step in enumerate(schedule.steps):
        io = schedule.io(step)
        results = primitives.get(step.op).reference(io, [values[n] for n in step.inputs])
        for buf, res in zip(io.outs, results, strict=True):
            res = np.asarray(res)
            if res.shape != buf.shape:
                raise AssertionError(f"step {k} {step.op}: reference produced shape {res.shape} for "
                                     f"{buf.name!r} of shape {buf.shape}")
            if not buf.dtype.is_float and res.size:
                lo, hi = int(res.min()), int(res.max())
                if lo < buf.dtype.min or hi > buf.dtype.max:
                    raise AssertionError(f"step {k} {step.op}: reference values [{lo}, {hi}] exceed "
                                         f"{buf.dtype} for {buf.name!r}")
            values[buf.name] = res.astype(buf.dtype.numpy)
    return values
