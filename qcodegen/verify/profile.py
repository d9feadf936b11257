"""Instructions (and, where the core has a timing model, estimated cycles) per layer of one inference on a target
whose runner counts instructions (`qcodegen profile`, `qcodegen compile --profile`).

The model is generated as a profiling build (`generate(..., profiling=True)`: every step function stays a function
but those below; inlining inside a step is unchanged). The harness runs once under QEMU with the counting plugin in
its per-segment mode: the return site of each step call in `<name>_run` closes a segment, so a layer's count covers
its argument set-up, call and body with every callee. What the run function does besides its steps is one more row.
A step the build inlines into `<name>_run` (KernelChoice.inlined: the Cortex-M copies of qc_cm_copy runs) is inlined
here too, so the total is what `qcodegen verify` counts: its row is 0 and its instructions count in the next
step's row."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import primitives
from ..codegen import generate
from ..codegen.targets import Target
from ..errors import QcError
from ..ir.schedule import Schedule
from ..plan.fuse import execution_order
from .check import random_inputs
from .runners import (
    HarnessRunner,
    binutil,
    cannot_count,
    counting_prefix,
    direct_calls,
    get_runner,
    read_count,
    write_raw,
)

_CLONE = re.compile(r"\.\w+\.\d+$")  # GCC's clones: name.constprop.0


@dataclass
class LayerCount:
    position: int | None  # execution position (the report's layer); None for the rest of <name>_run
    op: str
    macs: int
    instructions: int
    cycles_estimate: int | None


def _return_sites(objdump: str, exe: Path, run: str) -> dict[str, int]:
    """Step function -> the return site of its call in `run` (name.constprop.0 by its name)."""
    return {_CLONE.sub("", name): site for name, _, site in direct_calls(objdump, exe, run) if "_step" in name}


def profile(schedule: Schedule, target: Target, seed: int = 0) -> list[LayerCount]:
    """One row per layer (execution order), then the rest of the run function; one inference on seeded inputs."""
    reason = cannot_count(target)
    if reason is not None:
        raise QcError(f"cannot profile on {target.name}: {reason}")
    runner = get_runner(target, measure=True)
    assert isinstance(runner, HarnessRunner)
    with tempfile.TemporaryDirectory(prefix="qc-profile-") as tmp:
        workdir = Path(tmp)
        model = generate(schedule, workdir / "model", target, harness=True, profiling=True)
        exe = runner.executable(model)
        sites = _return_sites(binutil(target, "objdump"), exe, f"{model.name}_run")
        files = []
        for i, (buf, arr) in enumerate(zip(model.inputs, random_inputs(schedule, np.random.default_rng(seed)),
                                           strict=True)):
            files.append(workdir / f"in{i}.bin")
            write_raw(files[-1], arr.astype(buf.dtype.numpy), buf.dtype.is_packed)
        files += [workdir / f"out{i}.bin" for i in range(len(model.outputs))]
        result = workdir / "marks.txt"
        prefix = counting_prefix(target, exe, f"{model.name}_run", result, marks=tuple(sites.values()))
        proc = subprocess.run(runner.command(prefix, exe, [str(f) for f in files]), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=runner.timeout)
        if proc.returncode != 0:
            raise QcError(f"profiling run failed ({proc.returncode}): {proc.stderr.strip()[:300]}")
        count = read_count(target, result)
    timed = count.cycles is not None
    rows = []
    for position, (k, step) in enumerate(execution_order(schedule)):
        insns, cycles = count.marks.get(sites.get(f"{model.name}_step{k}", -1), (0, 0 if timed else None))
        members = step.attrs.get("steps")
        op = f"{step.op}({'+'.join(schedule.steps[j].op for j in members)})" if members else step.op
        rows.append(LayerCount(position, op, primitives.get(step.op).macs(schedule.io(step)), insns,
                               cycles if timed else None))
    rest = count.cycles - sum(r.cycles_estimate or 0 for r in rows) if timed else None
    rows.append(LayerCount(None, f"(rest of {model.name}_run)", 0,
                           count.instructions - sum(r.instructions for r in rows), rest))
    return rows


def as_json(rows: list[LayerCount], target: Target) -> dict:
    return {"target": target.name, "instructions": sum(r.instructions for r in rows),
            "cycles_estimate": None if rows[0].cycles_estimate is None else sum(r.cycles_estimate or 0 for r in rows),
            "macs": sum(r.macs for r in rows), "layers": [asdict(r) for r in rows]}


def table(rows: list[LayerCount]) -> str:
    total, macs = sum(r.instructions for r in rows), sum(r.macs for r in rows)
    timed = rows[0].cycles_estimate is not None
    cycles = sum(r.cycles_estimate or 0 for r in rows)
    head = f"{'#':>4}  {'op':<44} {'MACs':>11} {'instr':>12} {'instr/MAC':>9} {'share':>6}"
    out = [head + (f" {'cycles (est.)':>13} {'cyc/MAC':>7}" if timed else "")]
    for r in rows:
        line = (f"{'' if r.position is None else r.position:>4}  {r.op[:44]:<44} {r.macs:>11,} {r.instructions:>12,} "
                f"{_per(r.instructions, r.macs):>9} {100 * r.instructions / max(total, 1):5.1f}%")
        out.append(line + (f" {r.cycles_estimate:>13,} {_per(r.cycles_estimate or 0, r.macs):>7}" if timed else ""))
    last = f"{'':>4}  {'total':<44} {macs:>11,} {total:>12,} {_per(total, macs):>9} {'':>6}"
    out.append(last + (f" {cycles:>13,} {_per(cycles, macs):>7}" if timed else ""))
    return "\n".join(out)


def _per(value: int, macs: int) -> str:
    return f"{value / macs:.2f}" if macs else "-"
