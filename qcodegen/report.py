"""Reports of a planned schedule: per-step cost, fixed-point parameters, bounds and the memory plan."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import primitives
from .ir.schedule import CONST, TEMP, Schedule
from .ir.state import StateVar
from .plan.fuse import execution_order


def _short(values: Any) -> Any:
    """A fixed-point parameter as one int, or a list when it differs per channel. Attributes of this name are
    lists on RESCALE but scalars on other primitives (MUL's shift, SOFTMAX's multiplier and shift)."""
    if values is None:
        return None
    values = [int(v) for v in np.atleast_1d(values)]
    return values[0] if len(set(values)) == 1 else values


def weights_bytes(schedule: Schedule) -> int:
    total = sum(b.nbytes for b in schedule.buffers.values() if b.kind == CONST)
    for step in schedule.steps:
        total += sum(v.nbytes for v in primitives.get(step.op).constants(schedule.io(step)).values())
    return total


def layers(schedule: Schedule) -> list[dict[str, Any]]:
    """The steps as the generated code runs them (a fused group is one layer), in order: position, the schedule
    step indices it covers, op (a fused step lists its parts), source op, output shape and type, MACs, the flash
    bytes of the constants it reads first (weights shared by later layers are counted once), and its output's
    arena slice (offset and bytes; None for model inputs/outputs and constants)."""
    rows: list[dict[str, Any]] = []
    counted: set[str] = set()
    for position, (k, step) in enumerate(execution_order(schedule)):
        io = schedule.io(step)
        prim = primitives.get(step.op)
        members = step.attrs.get("steps") or [k]
        flash = sum(b.nbytes for b in io.ins if b.kind == CONST and b.name not in counted)
        counted.update(b.name for b in io.ins if b.kind == CONST)
        flash += sum(v.nbytes for v in prim.constants(io).values())
        out = io.outs[0]
        rows.append({
            "position": position,
            "steps": list(members),
            "op": step.op if len(members) == 1 else f"{step.op}({'+'.join(schedule.steps[j].op for j in members)})",
            "source": schedule.steps[members[-1]].source or schedule.steps[members[0]].source,
            "output": out.name,
            "shape": list(out.shape),
            "dtype": out.dtype.name,
            "macs": prim.macs(io),
            "weights_bytes": flash,
            "arena_offset": out.offset if out.kind == TEMP and out.home is None else None,
            "arena_bytes": out.nbytes if out.kind == TEMP and out.home is None else None,
        })
    return rows


def arena_blocks(schedule: Schedule) -> list[dict[str, Any]]:
    """Every tensor placed in the arena: name, offset, bytes and its lifetime (first and last position in
    execution order, inclusive), sorted by offset then first use."""
    blocks = [{"name": b.name, "offset": b.offset, "bytes": b.nbytes, "first": b.live[0], "last": b.live[1]}
              for b in schedule.buffers.values() if b.kind == TEMP and b.offset is not None and b.live is not None]
    return sorted(blocks, key=lambda b: (b["offset"], b["first"]))


def inspect_dict(schedule: Schedule) -> dict[str, Any]:
    steps = []
    for step in schedule.steps:
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
            "acc_bound": list(step.acc_bound) if step.acc_bound else None,
            "widened": None if step.widened is None else {"reason": step.widened.reason,
                                                          "bound": list(step.widened.bound)},
            "arena_offset": {b.name: b.offset for b in io.outs if b.kind == TEMP and b.home is None},
        })
        if schedule.state:  # outputs written into a state's memory
            steps[-1]["state"] = {b.name: b.home for b in io.outs if b.home is not None}
    return {
        "name": schedule.name,
        "arena_bytes": schedule.arena_size,
        "arena_lower_bound_bytes": schedule.arena_lower_bound,
        "weights_bytes": weights_bytes(schedule),
        "macs": sum(s["macs"] for s in steps),
        "inputs": [_io(schedule, n) for n in schedule.inputs],
        "outputs": [_io(schedule, n) for n in schedule.outputs],
        "state_bytes": sum(schedule.buffers[v.name].nbytes for v in schedule.state),
        "state": [_state(schedule, v) for v in schedule.state],
        "notes": list(schedule.notes),
        "steps": steps,
        "layers": layers(schedule),
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
    lines = [f"model {d['name']}: {len(d['steps'])} steps, {d['macs']:,} MACs, weights {d['weights_bytes']:,} B, "
             f"arena {d['arena_bytes']:,} B (live-set lower bound {d['arena_lower_bound_bytes']:,} B)"
             + (f", state {d['state_bytes']:,} B in {len(d['state'])} variable(s)" if d["state"] else "")]
    header = f"{'#':>3}  {'op':<18} {'output shape':<18} {'MACs':>11}  {'mult/shift':<22} {'acc bound':<26} arena"
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
        lines.append(f"{k:>3}  {s['op']:<18} {shape:<18} {s['macs']:>11,}  {ms:<22} {acc:<26} {arena}")
    for note in d["notes"]:
        lines.append(f"note: {note}")
    for k, s in enumerate(d["steps"]):
        if s["widened"]:
            lines.append(f"widened: step {k} ({s['source'] or s['op']}): int64, saturated: {s['widened']['reason']}")
    return "\n".join(lines)


def _listify(v: Any) -> list:
    return v if isinstance(v, list) else [v]
