"""Rewrites of steps into equivalent steps that the kernels handle better (run before folding and fusion)."""

from __future__ import annotations

import numpy as np

from ..ir.schedule import CONST, Buffer, Schedule
from .passes import schedule_pass


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

