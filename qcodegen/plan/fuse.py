"""Fusion passes: groups of steps whose intermediate results need never reach memory run as one fused step
(qcodegen/primitives/fused.py), which means exactly what its parts mean (same references, same checks).

The steps themselves stay in the schedule, so the numpy reference, range analysis, the reports and the TOSA
export see the primitive-level schedule. `schedule.fused` maps the last step of each group to its fused step,
which the memory planner and the code generator run in place of the group (`execution_order`); the group's
intermediate buffers get no arena space.

- fuse_conv_rescale: CONV2D / DEPTHWISE_CONV2D whose i32 accumulator is read only by one RESCALE (per tensor or
  per output channel) -> FUSED_CONV. The accumulator (4 bytes per output element) never reaches memory.
- fuse_elementwise: trees of element-wise steps over one shape whose intermediates each feed only the next step
  (e.g. TFLite ADD: RESCALE, RESCALE, RESCALE, ADD, RESCALE) -> FUSED_ELEMENTWISE, one loop, no i32 temporaries.
"""

from __future__ import annotations

from .. import primitives
from ..errors import GraphError
from ..ir.schedule import TEMP, Buffer, Schedule, Step
from ..primitives.fused import fusable_rescale, fused_step, scalar_expr
from .passes import schedule_pass

_CONVS = ("CONV2D", "DEPTHWISE_CONV2D")


def _private(schedule: Schedule, name: str, consumer: int) -> bool:
    """Whether buffer `name` is a temporary read by step `consumer` alone."""
    buf = schedule.buffers[name]
    return buf.kind == TEMP and name not in schedule.live_out() and schedule.consumers(name) == [consumer]


def execution_order(schedule: Schedule) -> list[tuple[int, Step]]:
    """(index, step) in the order the generated code runs them: a fused step at the index of its group's last
    step, the group's other steps left out."""
    members = {j for f in schedule.fused.values() for j in f.attrs["steps"]}
    return [(k, schedule.fused.get(k, s)) for k, s in enumerate(schedule.steps) if k in schedule.fused or
            k not in members]


def _members(schedule: Schedule) -> set[int]:
    return {j for f in schedule.fused.values() for j in f.attrs["steps"]}


def _add(schedule: Schedule, members: list[int], step: Step) -> bool:
    """Record fused `step` for the steps `members` (in order) if it checks."""
    step.attrs["steps"] = list(members)
    try:
        primitives.get(step.op).check(schedule.io(step))
    except GraphError:
        return False
    schedule.fused[members[-1]] = step
    return True


@schedule_pass
def fuse_conv_rescale(schedule: Schedule) -> None:
    count = 0
    for k, conv in enumerate(schedule.steps):
        acc = conv.outputs[0]
        if conv.op not in _CONVS or schedule.buffers[acc].dtype.name != "i32" or k in _members(schedule):
            continue
        users = schedule.consumers(acc)
        if len(users) != 1 or not _private(schedule, acc, users[0]) or users[0] in _members(schedule):
            continue
        rescale = schedule.steps[users[0]]
        if rescale.op != "RESCALE" or not fusable_rescale(schedule.io(rescale), True):
            continue
        parts = [Step(conv.op, ["in0", "in1", "in2"], ["t0"], conv.attrs, conv.source),
                 Step("RESCALE", ["t0"], ["out0"], rescale.attrs, rescale.source)]
        source = conv.source if rescale.source in ("", conv.source) else f"{conv.source} + {rescale.source}"
        step = fused_step("FUSED_CONV", parts, {"t0": schedule.buffers[acc]}, list(conv.inputs),
                          rescale.outputs[0], source)
        count += _add(schedule, [k, users[0]], step)
    if count:
        schedule.notes.append(f"fused {count} convolution(s) with their RESCALE (no i32 accumulator buffers)")


def _elementwise(schedule: Schedule, step: Step) -> bool:
    io = schedule.io(step)
    return len(io.outs) == 1 and not io.outs[0].dtype.is_float and scalar_expr(io) is not None


def _group_step(schedule: Schedule, members: list[int]) -> Step:
    """One FUSED_ELEMENTWISE step computing the tree of steps `members` (in schedule order, the root last)."""
    names: dict[str, str] = {}
    inputs: list[str] = []
    internal: dict[str, Buffer] = {}
    parts = []
    for j in members:
        step = schedule.steps[j]
        for n in step.inputs:
            if n not in names:
                names[n] = f"in{len(inputs)}"
                inputs.append(n)
        out = step.outputs[0]
        names[out] = "out0" if j == members[-1] else f"t{len(internal)}"
        if j != members[-1]:
            internal[names[out]] = schedule.buffers[out]
        parts.append(Step(step.op, [names[n] for n in step.inputs], [names[out]], step.attrs, step.source))
    sources = list(dict.fromkeys(schedule.steps[j].source for j in members if schedule.steps[j].source))
    return fused_step("FUSED_ELEMENTWISE", parts, internal, inputs, schedule.steps[members[-1]].outputs[0],
                      " + ".join(sources))


@schedule_pass
def fuse_elementwise(schedule: Schedule) -> None:
    taken = _members(schedule)
    groups: dict[int, list[int]] = {}  # last step -> member steps in schedule order
    for k, step in enumerate(schedule.steps):
        if k in taken or not _elementwise(schedule, step):
            continue
        members = [k]
        for name in dict.fromkeys(step.inputs):
            j = schedule.producer(name)
            if j in groups and _private(schedule, name, k):
                members = groups.pop(j) + members
        groups[k] = sorted(members)
    fused = [m for m in groups.values() if len(m) > 1 and _add(schedule, m, _group_step(schedule, m))]
    if fused:
        schedule.notes.append(f"fused {sum(len(m) for m in fused)} element-wise steps into {len(fused)} loop(s) "
                              f"(no intermediate buffers)")
