"""Reports of a planned schedule: per-step cost, fixed-point parameters, bounds, the memory plan and the kernels a
target runs. The byte counts are those of what is written: the constant arrays of the kernel plan (the arrays of
`<name>_weights.c` on that target and weight layout) and the arena size of `<NAME>_ARENA_SIZE`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from . import primitives
from .codegen.targets import load_target
from .ir.rescale import RescaleParams
from .ir.schedule import TEMP, Exactness, Schedule, StepIO
from .ir.state import StateVar
from .kernels import KernelPlan, plan_kernels
from .kernels.names import c_identifier


def _short(values: Any) -> Any:
    """A fixed-point parameter as one int, or a list when it differs per channel. Attributes of this name are
    lists on RESCALE but scalars on other primitives (MUL's shift, SOFTMAX's multiplier and shift)."""
    if values is None:
        return None
    values = [int(v) for v in np.atleast_1d(values).reshape(-1)]  # a list per channel, or one value (MUL shift)
    return values[0] if len(set(values)) == 1 else values


def requantization_form(io: StepIO) -> str | None:
    """How a RESCALE or RESCALE_F32 step's C requantizes (docs/semantics.md §14.5): its rounding, and the
    exceptions to single rounding its stores compare; a RESCALE_F32's C function."""
    if io.step.op == "RESCALE_F32":
        return primitives.get("RESCALE_F32").form(io)[0]
    if io.step.op != "RESCALE":
        return None
    r = RescaleParams.from_attrs(io.attrs)
    if not r.exceptions:
        return r.rounding.value
    channels = len({c for c, _, _ in r.exceptions})
    return f"{r.rounding.value} + {len(r.exceptions)} exception(s) in {channels} channel(s)"


def generic_plan(schedule: Schedule) -> KernelPlan:
    """The kernel plan of the generic target (the default of `compile` and `inspect`)."""
    return plan_kernels(schedule, load_target("generic"), c_identifier(schedule.name))


def layers(schedule: Schedule, plan: KernelPlan) -> list[dict[str, Any]]:
    """The steps as the generated code runs them (a fused group is one layer), in order: position, the schedule
    step indices it covers, op (a fused step lists its parts), source op, output shape and type, MACs, the flash
    bytes of the weights-file arrays it reads first (arrays shared by later layers are counted once), its output's
    arena slice (offset and bytes; None for model inputs/outputs, constants and outputs computed in a state's
    memory), and the kernel the plan chose (with its reason and the weight layout it reads)."""
    rows: list[dict[str, Any]] = []
    nbytes = {a.name: a.nbytes for a in plan.arrays}
    counted: set[str] = set()
    for position, s in enumerate(plan.steps):
        step = schedule.fused.get(s.index, schedule.steps[s.index])
        io = schedule.io(step)
        members = step.attrs.get("steps") or [s.index]
        first = [n for n in s.arrays if n not in counted]
        counted.update(s.arrays)
        out = io.outs[0]
        in_arena = out.kind == TEMP and out.home is None
        rows.append({
            "position": position,
            "steps": list(members),
            "op": step.op if len(members) == 1 else f"{step.op}({'+'.join(schedule.steps[j].op for j in members)})",
            "source": schedule.steps[members[-1]].source or schedule.steps[members[0]].source,
            "output": out.name,
            "shape": list(out.shape),
            "dtype": out.dtype.name,
            "macs": primitives.get(step.op).macs(io),
            "weights_bytes": sum(nbytes[n] for n in first),
            "arena_offset": out.offset if in_arena else None,
            "arena_bytes": out.nbytes if in_arena else None,
            "kernel": s.choice.kernel,
            "kernel_reason": s.choice.reason,
            "weight_layout": s.choice.layout,
        })
    return rows


def stack_scratch(plan: KernelPlan) -> dict[str, Any]:
    """The kernels' stack scratch (KernelChoice.stack_scratch): the steps run one after another, so the most any
    step needs, with the first step (schedule index) needing it and its kernel; bytes 0 (step None) when none."""
    worst = max(plan.steps, key=lambda s: s.choice.stack_scratch, default=None)
    if worst is None or worst.choice.stack_scratch == 0:
        return {"bytes": 0, "step": None, "kernel": None}
    return {"bytes": worst.choice.stack_scratch, "step": worst.index, "kernel": worst.choice.kernel}


def stack_scratch_text(scratch: dict[str, Any]) -> str:
    """The scratch as the text report and the CLI say it."""
    if not scratch["bytes"]:
        return "stack scratch of kernels: 0 B"
    return f"stack scratch of kernels: {scratch['bytes']:,} B (step {scratch['step']}, {scratch['kernel']})"


def arena_blocks(schedule: Schedule) -> list[dict[str, Any]]:
    """Every tensor placed in the arena: name, offset, bytes and its lifetime (first and last position in
    execution order, inclusive), sorted by offset then first use."""
    blocks = [{"name": b.name, "offset": b.offset, "bytes": b.nbytes, "first": b.live[0], "last": b.live[1]}
              for b in schedule.buffers.values() if b.kind == TEMP and b.offset is not None and b.live is not None]
    return sorted(blocks, key=lambda b: (b["offset"], b["first"]))


def inspect_dict(schedule: Schedule, plan: KernelPlan | None = None, target: str = "generic") -> dict[str, Any]:
    """The report of `schedule` with the kernel plan of what was (or would be) written for `target` (default: the
    generic target's plan)."""
    plan = plan or generic_plan(schedule)
    group = {j: k for k, f in schedule.fused.items() for j in f.attrs["steps"]}  # fused member -> its group
    choices = {s.index: s.choice for s in plan.steps}
    steps = []
    for j, step in enumerate(schedule.steps):
        io = schedule.io(step)
        steps.append({
            "op": step.op,
            "source": step.source,
            "inputs": list(step.inputs),
            "outputs": list(step.outputs),
            "shapes": {b.name: list(b.shape) for b in io.ins + io.outs},
            "dtypes": {b.name: b.dtype.name for b in io.ins + io.outs},
            "macs": primitives.get(step.op).macs(io),
            "multiplier": _short(step.attrs.get("multiplier")),
            "shift": _short(step.attrs.get("shift")),
            "requantization": requantization_form(io),
            "acc_bound": list(step.acc_bound) if step.acc_bound else None,
            "widened": None if step.widened is None else {"reason": step.widened.reason,
                                                          "bound": list(step.widened.bound)},
            "arena_offset": {b.name: b.offset for b in io.outs if b.kind == TEMP and b.home is None},
            "kernel": choices[group.get(j, j)].kernel,
            "fused_into": group[j] if group.get(j, j) != j else None,
        })
        if schedule.state:  # outputs written into a state's memory
            steps[-1]["state"] = {b.name: b.home for b in io.outs if b.home is not None}
    p = schedule.patching
    return {
        "name": schedule.name,
        "target": target,
        "weight_layout": plan.layout,
        "kernel_family": plan.family,
        "arena_bytes": schedule.arena_size,
        "arena_lower_bound_bytes": schedule.arena_lower_bound,
        "arena_layer_bound_bytes": schedule.layer_bound or schedule.arena_lower_bound,
        "memory_goal": {"policy": schedule.memory_goal.policy, "arena_limit": schedule.memory_goal.arena_limit},
        "recomputed_macs": p.recomputed_macs if p else 0,
        "patching": None if p is None else {
            "sources": list(p.sources), "steps": p.steps, "output": p.output, "rows": p.rows, "bands": p.bands,
            "recomputed_macs": p.recomputed_macs, "copied_bytes": p.copied_bytes, "extra_steps": p.extra_steps,
            "estimated_overhead": round(p.estimated_overhead, 4)},
        "weights_bytes": plan.weights_bytes,
        "weights_arrays": len(plan.arrays),
        "kernel_stack_scratch": stack_scratch(plan),
        "kernel_files": [f.rsplit("/", 1)[-1] for f in plan.files],
        "macs": sum(s["macs"] for s in steps),
        "inputs": [_io(schedule, n) for n in schedule.inputs],
        "outputs": [_io(schedule, n) for n in schedule.outputs],
        "state_bytes": sum(schedule.buffers[v.name].nbytes for v in schedule.state),
        "state": [_state(schedule, v) for v in schedule.state],
        "notes": list(schedule.notes),
        "exactness": [asdict(e) for e in schedule.exactness],
        "steps": steps,
        "layers": layers(schedule, plan),
        "arena": arena_blocks(schedule),
    }


def _state(schedule: Schedule, v: StateVar) -> dict[str, Any]:
    """A state variable: its values are kept across runs; next is the buffer holding the value after a run,
    computed in the state's memory (in_place) or copied there at the end."""
    b = schedule.buffers[v.name]
    return {"name": v.name, "source": v.source, "shape": list(b.shape), "dtype": b.dtype.name, "bytes": b.nbytes,
            "next": v.next, "in_place": schedule.buffers[v.next].home == v.name}


def _io(schedule: Schedule, name: str) -> dict[str, Any]:
    b = schedule.buffers[name]
    out: dict[str, Any] = {"name": name, "shape": list(b.shape), "dtype": b.dtype.name}
    if b.quant is not None and b.quant.kind == "per_tensor":
        out["scale"] = b.quant.scale
        out["zero_point"] = b.quant.zero_point
    return out


def inspect_text(d: dict[str, Any]) -> str:
    """The text form of a report dictionary (`inspect_dict`)."""
    where = f"; target {d['target']}, weight layout {d['weight_layout']}" if "weight_layout" in d else ""
    goal = d["memory_goal"]
    lines = [f"model {d['name']}: {len(d['steps'])} steps, {d['macs']:,} MACs, weights {d['weights_bytes']:,} B "
             f"({d.get('weights_arrays', 0)} arrays{where}), arena {d['arena_bytes']:,} B (live-set lower bound "
             f"{d['arena_lower_bound_bytes']:,} B; layer-wise bound {d['arena_layer_bound_bytes']:,} B; memory "
             f"{goal['policy']}" + (f", arena limit {goal['arena_limit']:,} B" if goal["arena_limit"] is not None
                                    else "") + ")"
             + (f", state {d['state_bytes']:,} B in {len(d['state'])} variable(s)" if d["state"] else "")
             + f", {stack_scratch_text(d['kernel_stack_scratch'])}"]
    if d["patching"]:
        p = d["patching"]
        lines.append(f"patch-based execution: {p['steps']} steps ({p['sources'][0]} .. {p['sources'][-1]}) in "
                     f"{p['bands']} bands of {p['rows']} row(s) of {p['output']!r}; recomputed MACs "
                     f"{p['recomputed_macs']:,}, {p['copied_bytes']:,} B more copied, {p['extra_steps']} more "
                     f"kernel calls, about {100 * p['estimated_overhead']:.1f}% more instructions (cost model)")
    header = (f"{'#':>3}  {'op':<18} {'output shape':<18} {'MACs':>11}  {'mult/shift':<22} {'acc bound':<26} "
              f"{'arena':<9} kernel")
    lines += [header, "-" * len(header)]
    for k, s in enumerate(d["steps"]):
        out = s["outputs"][0]
        shape = "x".join(str(v) for v in s["shapes"][out]) + f" {s['dtypes'][out]}"
        ms = ""
        if s["multiplier"] is not None:
            m, sh = s["multiplier"], s["shift"]
            ms = f"{m}/{sh}" if isinstance(m, int) and isinstance(sh, int) else f"per-channel ({len(_listify(m))})"
        acc = f"[{s['acc_bound'][0]}, {s['acc_bound'][1]}]" if s["acc_bound"] else ""
        offs = s["arena_offset"].get(out)
        arena = f"@{offs}" if offs is not None else ("(fused)" if out in s["arena_offset"] else "(io)")
        arena = f"(state {s['state'][out]})" if out in s.get("state", {}) else arena
        kernel = f"(step {s['fused_into']})" if s.get("fused_into") is not None else s.get("kernel", "")
        lines.append(f"{k:>3}  {s['op']:<18} {shape:<18} {s['macs']:>11,}  {ms:<22} {acc:<26} {arena:<9} {kernel}")
    for note in d["notes"]:
        lines.append(f"note: {note}")
    for k, s in enumerate(d["steps"]):
        if s["requantization"] and (s["op"] == "RESCALE_F32" or "exception" in s["requantization"]):
            lines.append(f"requantization: step {k} ({s['source'] or s['op']}): {s['requantization']}")
    for k, s in enumerate(d["steps"]):
        if s["widened"]:
            lines.append(f"widened: step {k} ({s['source'] or s['op']}): int64, saturated: {s['widened']['reason']}")
    for record in d["exactness"]:
        lines.append(f"exactness: {Exactness(**record).describe()}")
    return "\n".join(lines)


def _listify(v: Any) -> list:
    return v if isinstance(v, list) else [v]
