"""Rewrites of steps into equivalent steps that the kernels handle better (run before folding and fusion)."""

from __future__ import annotations

import math

import numpy as np

from .. import primitives
from ..ir.schedule import CONST, TEMP, Buffer, Schedule, Step
from .passes import schedule_pass

_CONVS = ("CONV2D", "DEPTHWISE_CONV2D")


@schedule_pass
def depthwise_single_channel_as_conv(schedule: Schedule) -> None:
    """A DEPTHWISE_CONV2D over one input channel (C = 1, multiplier M; e.g. a model's first layer on a grey image)
    is the CONV2D with M output channels: output channel c * M + m = m, weights [KH, KW, 1, M] -> [M, KH, KW, 1]
    (OHWI), same window, zero points, bias and accumulator. The same sums in the same order, so the same integers;
    CONV2D has the targets' register-blocked kernels, depthwise with a multiplier has only the portable loops."""
    count = 0
    for step in schedule.steps:
        if step.op != "DEPTHWISE_CONV2D":
            continue
        x, w = (schedule.buffers[n] for n in step.inputs[:2])
        if x.shape[-1] != 1 or w.kind != CONST or w.data is None or w.shape[3] == 1:
            continue
        name = schedule.fresh_name(f"{w.name}_ohwi")
        data = np.ascontiguousarray(np.transpose(w.data, (3, 0, 1, 2)))
        schedule.add_buffer(Buffer(name, data.shape, w.dtype, CONST, data, w.quant))
        step.op, step.inputs = "CONV2D", [step.inputs[0], name, *step.inputs[2:]]
        count += 1
    if count:
        schedule.notes.append(f"{count} single-channel depthwise convolution(s) computed as CONV2D")



def _same_channels(src: tuple[int, ...], dst: tuple[int, ...], axis: int) -> int | None:
    """The axis of `src` that a RESHAPE src -> dst maps element for element onto axis `axis` of `dst`: the flat
    index i is in channel (i // inner) % size of both, where `size` is the axis's length and `inner` the elements
    after it. None when no axis of `src` has that size and inner count."""
    size, inner = dst[axis], math.prod(dst[axis + 1:])
    return next((a for a in range(len(src)) if src[a] == size and math.prod(src[a + 1:]) == inner), None)


def _reshaped_accumulator(schedule: Schedule, k: int) -> tuple[int, int | None] | None:
    """For RESCALE_F32 step k reading a RESHAPE of a convolution's accumulator (each read by the next step alone):
    the RESHAPE's index and the accumulator's axis holding the RESCALE_F32's channels (None per tensor)."""
    step = schedule.steps[k]
    j = schedule.producer(step.inputs[0])
    if j is None or schedule.steps[j].op != "RESHAPE":
        return None
    reshape = schedule.steps[j]
    conv = schedule.producer(reshape.inputs[0])
    if conv is None or schedule.steps[conv].op not in _CONVS:
        return None
    if any(schedule.consumers(n) != [user] or n in schedule.live_out()
           for n, user in ((reshape.inputs[0], j), (step.inputs[0], k))):
        return None
    io = schedule.io(step)
    rescale = primitives.get(step.op)
    if not rescale.per_channel(io):
        return j, None
    axis = _same_channels(schedule.buffers[reshape.inputs[0]].shape, io.ins[0].shape, rescale.axis(io))
    return None if axis is None else (j, axis)


@schedule_pass
def rescale_before_reshape(schedule: Schedule) -> None:
    """CONV2D -> RESHAPE -> RESCALE_F32 (the ONNX MatMul / Gemm lowering: a 1x1 convolution's [rows, 1, 1, N]
    accumulator viewed as the product's shape) becomes CONV2D -> RESCALE_F32 -> RESHAPE, the channel axis mapped.
    RESCALE_F32 is element-wise per channel and the RESHAPE keeps every element's flat index and channel, so the
    same integers; the requantization then meets its convolution (single rounding with exceptions, fusion)."""
    moved = 0
    for k, step in enumerate(schedule.steps):
        found = _reshaped_accumulator(schedule, k) if step.op == "RESCALE_F32" else None
        if found is None:
            continue
        j, axis = found
        acc, y = schedule.buffers[schedule.steps[j].inputs[0]], schedule.buffers[step.outputs[0]]
        early = schedule.add_buffer(Buffer(schedule.fresh_name(f"{y.name}_{len(acc.shape)}d"), acc.shape, y.dtype,
                                           TEMP, quant=y.quant))
        attrs = dict(step.attrs) if axis is None else {**step.attrs, "axis": axis}
        schedule.steps[j] = Step(step.op, [acc.name], [early.name], attrs, step.source)
        schedule.steps[k] = Step("RESHAPE", [early.name], [y.name], {"shape": list(y.shape)}, step.source)
        moved += 1
    if moved:
        schedule.notes.append(f"{moved} RESCALE_F32 step(s) moved before the RESHAPE of their convolution's "
                              f"accumulator (channel axis mapped)")
