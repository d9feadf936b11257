"""Instructions (and estimated cycles) per schedule step of one inference on a QEMU target (a profiling build; not
a test).

    python bench/profile_steps.py examples/kws_like.json -t cortex-m4
    python bench/profile_steps.py ds_cnn mobilenet_v1_025 -t cortex-m4 cortex-m55      # bench/models.py models

The model is generated as usual, then its step functions are marked noinline in a copy of model.c (so the
generated code of normal builds is untouched; inlining inside the steps is unchanged, only the step calls stay
calls). The harness runs under QEMU with the counting plugin (runtime/qemu/qc_insncount.c) in its per-segment
mode: the return site of each step call in <name>_run closes a segment, so a step's count covers its argument
set-up, call and body with every callee. Prints per step: op, MACs, instructions, instructions/MAC, share, and on
the Cortex-M targets the estimated cycles and cycles/MAC of the core's timing model (qcodegen/verify/timing).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qcodegen import primitives  # noqa: E402
from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.frontends import load_model  # noqa: E402
from qcodegen.ir.schedule import Schedule, Step  # noqa: E402
from qcodegen.plan.fuse import execution_order  # noqa: E402
from qcodegen.verify import random_inputs  # noqa: E402
from qcodegen.verify.runners import binutil, counting_prefix, get_runner, read_count, write_raw  # noqa: E402

_CALL = re.compile(r"^\s*([0-9a-f]+):\s*\S+\s+([0-9a-f]+) <(\w+)(\.\w+\.\d+)?>")  # name.constprop.0 too


def model_file(name: str, workdir: Path) -> Path:
    """A model path, or a bench model by name (bench/models.py: the MLPerf-Tiny-shaped models, person_detect)."""
    if Path(name).exists():
        return Path(name)
    from bench.models import model_path  # noqa: PLC0415 (pulls in TFLM's model builder only when needed)
    return model_path(name, workdir)


def label(schedule: Schedule, step: Step) -> str:
    """The op, with the ops of a fused group's steps."""
    members = step.attrs.get("steps")
    return f"{step.op}({'+'.join(schedule.steps[j].op for j in members)})" if members else step.op


def return_sites(objdump: str, exe: Path, run: str) -> dict[str, int]:
    """Step function -> the return site of its call in `run` (the instruction after the call)."""
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", f"--disassemble={run}", str(exe)],
                         capture_output=True, text=True, check=True).stdout
    lines = [ln for ln in out.splitlines() if re.match(r"^\s*[0-9a-f]+:", ln)]
    sites = {}
    for line, following in zip(lines, lines[1:], strict=False):
        call = _CALL.match(line)
        if call and "_step" in call.group(3):
            sites[call.group(3)] = int(following.split(":")[0], 16)
    return sites


def profile(path: Path, target_name: str, workdir: Path) -> list[dict]:
    schedule = plan(load_model(path))
    target = load_target(target_name)
    name = re.sub(r"\W", "_", path.stem)
    model = generate(schedule, workdir / f"{name}_{target_name}", target, name=name, harness=True)
    source = model.outdir / f"{name}.c"
    source.write_text(re.sub(rf"^static void ({name}_step\d+)\(", r"__attribute__((noinline)) static void \1(",
                             source.read_text(), flags=re.MULTILINE))  # (where the target does not already)
    runner = get_runner(target, measure=True)
    exe = runner.executable(model)
    sites = return_sites(binutil(target, "objdump"), exe, f"{name}_run")
    inputs = random_inputs(schedule, np.random.default_rng(0))
    files = []
    for i, (buf, arr) in enumerate(zip(model.inputs, inputs, strict=True)):
        files.append(workdir / f"in{i}.bin")
        write_raw(files[-1], arr.astype(buf.dtype.numpy), buf.dtype.is_packed)
    files += [workdir / f"out{i}.bin" for i in range(len(model.outputs))]
    result = workdir / "marks.txt"
    prefix = counting_prefix(target, exe, f"{name}_run", result, marks=tuple(sites.values()))
    subprocess.run(runner.command(prefix, exe, [str(f) for f in files]), check=True, capture_output=True,
                   stdin=subprocess.DEVNULL, timeout=900)
    count = read_count(target, result)
    rows = []
    for k, step in execution_order(schedule):
        insns, cycles = count.marks.get(sites.get(f"{name}_step{k}", -1), (0, 0 if count.cycles is not None else None))
        rows.append(dict(step=k, op=label(schedule, step), macs=primitives.get(step.op).macs(schedule.io(step)),
                         insns=insns, cycles=cycles))
    rest_cycles = None if count.cycles is None else count.cycles - sum(r["cycles"] for r in rows)
    rows.append(dict(step="-", op="(rest of _run)", macs=0, insns=count.instructions - sum(r["insns"] for r in rows),
                     cycles=rest_cycles))
    return rows


def table(rows: list[dict]) -> str:
    total = sum(r["insns"] for r in rows)
    macs = sum(r["macs"] for r in rows)
    timed = all(r["cycles"] is not None for r in rows)
    cycles = sum(r["cycles"] for r in rows) if timed else 0
    head = f"{'step':>4}  {'op':<44} {'MACs':>9} {'instr':>10} {'instr/MAC':>9} {'share':>6}"
    out = [head + (f" {'cycles':>10} {'cyc/MAC':>7}" if timed else "")]
    for r in rows:
        line = (f"{r['step']:>4}  {r['op']:<44} {r['macs']:>9,} {r['insns']:>10,} {_per(r['insns'], r['macs']):>9} "
                f"{100 * r['insns'] / max(total, 1):5.1f}%")
        out.append(line + (f" {r['cycles']:>10,} {_per(r['cycles'], r['macs']):>7}" if timed else ""))
    last = f"{'':>4}  {'total':<44} {macs:>9,} {total:>10,} {total / max(macs, 1):>9.2f}"
    out.append(last + (f" {'':>6} {cycles:>10,} {cycles / max(macs, 1):>7.2f}" if timed else ""))
    return "\n".join(out)


def _per(value: int, macs: int) -> str:
    return f"{value / macs:.2f}" if macs else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="model files, or names of bench/models.py's models")
    ap.add_argument("-t", "--targets", nargs="+", default=["cortex-m4"])
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="qc-prof-") as tmp:
        workdir = Path(tmp)
        for name in args.models:
            path = model_file(name, workdir)
            for target in args.targets:
                print(f"## {name} on {target}\n```\n{table(profile(path, target, workdir))}\n```\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
