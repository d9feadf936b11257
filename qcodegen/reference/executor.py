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


def run_reference(schedule: Schedule, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Values of every buffer after running the schedule (inputs and constants included)."""
    values: dict[str, np.ndarray] = {}
    for name, arr in zip(schedule.inputs, check_inputs(schedule, inputs), strict=True):
        values[name] = arr
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
