"""Folding passes: zero points into constants, CLAMP into the preceding RESCALE, then dropping dead buffers.
Each keeps every result bit-identical (the tests compare the reference before and after)."""

from __future__ import annotations

import numpy as np

from .. import primitives
from ..ir.rescale import RescaleParams
from ..ir.schedule import CONST, TEMP, Buffer, Schedule, Step
from .passes import schedule_pass

_CONVS = {"CONV2D": (1, 2, 3), "DEPTHWISE_CONV2D": (0, 1)}  # weight axes summed per output channel


def _new_const(schedule: Schedule, base: str, values: np.ndarray, like: Buffer) -> str:
    name = schedule.fresh_name(base)
    schedule.add_buffer(Buffer(name, tuple(values.shape), like.dtype, CONST, values.astype(like.dtype.numpy)))
    return name


def _fold_weight_zp(schedule: Schedule, step: Step) -> bool:
    """w' = w - weight_zp when every w' fits the weight type; then weight_zp = 0."""
    wzp = primitives.get(step.op).params(schedule.io(step)).wzp
    w = schedule.buffers[step.inputs[1]]
    if wzp == 0 or w.kind != CONST:
        return False
    shifted = w.data.astype(np.int64) - wzp
    if shifted.size and (shifted.min() < w.dtype.min or shifted.max() > w.dtype.max):
        return False
    step.inputs[1] = _new_const(schedule, f"{w.name}_nozp", shifted, w)
    step.attrs["weight_zp"] = 0
    return True


def _input_bound(schedule: Schedule, name: str) -> int:
    buf = schedule.buffers[name]
    lo, hi = (buf.quant.storage_min, buf.quant.storage_max) if buf.quant is not None else (buf.dtype.min,
                                                                                            buf.dtype.max)
    return max(abs(lo), abs(hi))


def _fold_input_zp(schedule: Schedule, step: Step) -> bool | None:
    """bias' = bias - input_zp * sum_taps(w) per output channel, input_zp = 0, out-of-bounds taps read the old
    zero point (pad_value). Returns None when the folded accumulation could leave the accumulator type."""
    p = primitives.get(step.op).params(schedule.io(step))
    izp, pad_value = p.izp, p.pad_value
    w, bias = schedule.buffers[step.inputs[1]], schedule.buffers[step.inputs[2]]
    if izp == 0 or p.wzp != 0 or w.kind != CONST or bias.kind != CONST:
        return False
    weights = w.data.astype(np.int64)
    axes = _CONVS[step.op]
    taps = weights.sum(axis=axes).reshape(-1)
    folded = np.broadcast_to(bias.data.astype(np.int64), taps.shape) - izp * taps
    x_max = max(_input_bound(schedule, step.inputs[0]), abs(pad_value))
    partial = np.abs(folded) + np.abs(weights).sum(axis=axes).reshape(-1) * x_max  # any summation order
    acc = schedule.buffers[step.outputs[0]].dtype
    if partial.max() > acc.max or folded.min() < bias.dtype.min or folded.max() > bias.dtype.max:
        return None
    step.inputs[2] = _new_const(schedule, f"{bias.name}_zp", folded, bias)
    step.attrs.update(input_zp=0, pad_value=pad_value)
    return True


@schedule_pass
def fold_zero_points(schedule: Schedule) -> None:
    weights = inputs = kept = 0
    for step in schedule.steps:
        if step.op not in _CONVS:
            continue
        weights += _fold_weight_zp(schedule, step)
        result = _fold_input_zp(schedule, step)
        inputs += result is True
        kept += result is None
    if weights:
        schedule.notes.append(f"zero-point folding: weight zero point folded into the weights of {weights} "
                              f"convolution step(s)")
    if inputs:
        schedule.notes.append(f"zero-point folding: input zero point folded into the bias of {inputs} "
                              f"convolution step(s) (out-of-bounds taps read the old zero point)")
    if kept:
        schedule.notes.append(f"zero-point folding: {kept} convolution step(s) keep their input zero point "
                              f"(the folded bias could overflow the accumulator)")


def _clamp_after(schedule: Schedule, k: int) -> int | None:
    """Index of the CLAMP that alone consumes RESCALE step k's output, if it can be fused."""
    step = schedule.steps[k]
    out = step.outputs[0]
    if step.op != "RESCALE" or RescaleParams.from_attrs(step.attrs).output_unsigned or out in schedule.live_out():
        return None
    users = schedule.consumers(out)
    if len(users) != 1:
        return None
    clamp = schedule.steps[users[0]]
    if clamp.op != "CLAMP" or clamp.inputs != [out]:
        return None
    if schedule.buffers[clamp.outputs[0]].dtype != schedule.buffers[out].dtype:
        return None
    return users[0]


@schedule_pass
def fuse_rescale_clamp(schedule: Schedule) -> None:
    """RESCALE -> CLAMP becomes one RESCALE whose out_min/out_max compose both clamps:
    clamp(clamp(v, lo, hi), a, b) == clamp(v, clamp(lo, a, b), clamp(hi, a, b))."""
    fused, k = 0, 0
    while k < len(schedule.steps):
        j = _clamp_after(schedule, k)
        if j is None:
            k += 1
            continue
        rescale, clamp = schedule.steps[k], schedule.steps.pop(j)
        dt = schedule.buffers[rescale.outputs[0]].dtype
        r = RescaleParams.from_attrs(rescale.attrs)
        lo = dt.min if r.out_min is None else max(dt.min, r.out_min)
        hi = dt.max if r.out_max is None else min(dt.max, r.out_max)
        a, b = (int(v) for v in primitives.get("CLAMP").bounds(schedule.io(clamp)))
        rescale.attrs.update(out_min=min(max(lo, a), b), out_max=min(max(hi, a), b))
        rescale.outputs = list(clamp.outputs)
        if clamp.source and clamp.source != rescale.source:
            rescale.source = f"{rescale.source} + {clamp.source}"
        fused += 1
    if fused:
        schedule.notes.append(f"fused {fused} CLAMP step(s) into the preceding RESCALE")


@schedule_pass
def prune_buffers(schedule: Schedule) -> None:
    """Drop constants and temporaries no step uses any more (e.g. replaced by a folded copy)."""
    used = {n for s in schedule.steps for n in s.inputs + s.outputs}
    for name in [n for n, b in schedule.buffers.items() if b.kind in (CONST, TEMP) and n not in used]:
        del schedule.buffers[name]
