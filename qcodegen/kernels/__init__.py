"""Kernel choice: a plan pass run before rendering. For each step of a schedule on a target (and weight layout) it
decides the kernel, the weight layout it reads, the constant arrays made for it and why (qcodegen/kernels/record.py
KernelChoice), and collects every constant array the model's weights file holds (KernelPlan). Rendering reads only
the plan; `qcodegen inspect -t TARGET` shows it; the reports count its arrays.

A target names its kernel family in its TOML (`kernels = "cortex-m-dsp"`): the package qcodegen/kernels/<family>/
(dashes as underscores; found by that name, registered nowhere) exports `choose(io, index, names, layout) ->
KernelChoice`, STEP_ATTRIBUTES and LAYOUTS, its weight layouts beside it; runtime/<isa>/ holds its C kernels,
templates/<isa>/ the call sites. A target without the key runs the portable loops (generic)."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from types import ModuleType

import numpy as np

from .. import primitives
from ..errors import QcError
from ..ir.schedule import CONST, Schedule
from ..plan.fuse import execution_order
from .names import ArrayNames
from .record import ConstArray, KernelChoice, KernelPlan, StepKernel, const_array, step_array

# weight layouts (`weight_layout` of a target, `--weight-layout`): "compact" keeps the weights' flash about the
# model's int8 weights; "fast" lets a family trade flash for instructions (Cortex-M4/M7: SMLAD's int16 pairs)
WEIGHT_LAYOUTS = ("compact", "fast")


def family_of(target) -> str:
    """The kernel family of a target (codegen.targets.Target): its `kernels` key, else "generic" (the portable
    kernel choices; template overrides then change only the portable C)."""
    name = target.extra.get("kernels")
    if name is None:
        return "generic"
    family(name, target.name)
    return name


def family(name: str, target: str = "") -> ModuleType:
    """The choice module of kernel family `name` (qcodegen/kernels/<name>, dashes as underscores)."""
    module = f"{__name__}.{name.replace('-', '_')}"
    if importlib.util.find_spec(module) is None:
        raise QcError(f"target {target!r}: unknown kernel family {name!r} (no qcodegen/kernels/"
                      f"{name.replace('-', '_')})")
    return importlib.import_module(module)


def layouts_of(target) -> tuple[str, ...]:
    """The weight layouts that change the target's kernels (compact alone where fast changes nothing)."""
    return getattr(family(family_of(target)), "LAYOUTS", ("compact",))


def weight_layout(target) -> str:
    layout = target.extra.get("weight_layout", "compact")
    if layout not in WEIGHT_LAYOUTS:
        raise QcError(f"unknown weight layout {layout!r} (known: {', '.join(WEIGHT_LAYOUTS)})")
    return layout


def plan_kernels(schedule: Schedule, target, prefix: str) -> KernelPlan:
    """The kernel choice of every step of `schedule` (in execution order) on `target`, the arrays of the symbol
    prefix `prefix`."""
    layout, name = weight_layout(target), family_of(target)
    names = ArrayNames(prefix)
    choose = family(name).choose
    steps = [StepKernel(k, step.op, step.source, choose(schedule.io(step), k, names, layout))
             for k, step in execution_order(schedule)]
    files = tuple(dict.fromkeys(f for s in steps for f in s.choice.files))
    attributes = family(name).STEP_ATTRIBUTES
    return with_arrays(KernelPlan(name, layout, steps, [], files, attributes), schedule, prefix)


def with_arrays(plan: KernelPlan, schedule: Schedule, prefix: str) -> KernelPlan:
    """The plan with its arrays: every array its steps read (the schedule's constants that a step reads, 4-bit data
    packed; the steps' own constants, Primitive.constants; the arrays of their kernels), each once, the schedule's
    constants first; and each step's names of them."""
    names = ArrayNames(prefix)
    consts: dict[str, ConstArray] = {}
    others: dict[str, ConstArray] = {}
    steps = []
    for s in plan.steps:
        io = _io(schedule, s)
        read = [b for i, b in enumerate(io.ins) if b.kind == CONST and i not in s.choice.unread]
        for buf in read:
            data = pack4(buf.data) if buf.dtype.is_packed else np.asarray(buf.data)
            consts[names.const(buf.name)] = const_array(names.const(buf.name), data,
                                                        "uint8_t" if buf.dtype.is_packed else buf.dtype.ctype)
        own = []
        if s.choice.step_constants:
            own = [step_array(names, key, values)
                   for key, values in primitives.get(io.step.op).constants(io).items()]
        for array in [*own, *s.choice.arrays.values()]:
            others.setdefault(array.name, array)
        mine = [names.const(b.name) for b in read] + [a.name for a in [*own, *s.choice.arrays.values()]]
        steps.append(dataclasses.replace(s, arrays=tuple(dict.fromkeys(mine))))
    order = [b for b in schedule.buffers if names.const(b) in consts]  # the schedule's order
    found = [consts[names.const(b)] for b in order] + list(others.values())
    return dataclasses.replace(plan, steps=steps, arrays=found)


def _io(schedule: Schedule, s: StepKernel):
    return schedule.io(schedule.fused.get(s.index, schedule.steps[s.index]))


def pack4(values: np.ndarray) -> np.ndarray:
    """Pack 4-bit values two per byte, low nibble first (the harness and constant layout)."""
    flat = values.reshape(-1).astype(np.int64) & 0xF
    if flat.size % 2:
        flat = np.append(flat, 0)
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


__all__ = ["WEIGHT_LAYOUTS", "ConstArray", "KernelChoice", "KernelPlan", "StepKernel", "family_of", "layouts_of",
           "pack4", "plan_kernels", "weight_layout", "with_arrays"]
