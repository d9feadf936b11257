"""Estimated cycles of the Cortex-M targets (docs/targets.md, "Cycles"): a per-core timing model costs every
instruction of the harness executable from its disassembly; the QEMU counting plugin (runtime/qemu/
qc_insncount.c) applies the costs to the instructions it sees execute and adds what depends on the execution:
taken branches, and on Cortex-M4 unaligned accesses. An estimate from published timing rules, not a measurement
of silicon: no wait states, no caches."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ...codegen.targets import Target
from ..build import cache_dir
from .base import Core, Cost
from .cortex_m4 import CortexM4
from .cortex_m7 import CortexM7
from .cortex_m55 import CortexM55
from .disasm import Insn, disassemble

CORES: dict[str, Core] = {core.name: core for core in (CortexM4(), CortexM7(), CortexM55())}

__all__ = ["CORES", "Core", "Cost", "Insn", "cost_table", "disassemble", "timing_model"]


def timing_model(target: Target) -> Core | None:
    """The timing model of the target's core, named by the -mcpu= of its flags (None: no model)."""
    cpus = [flag.split("=", 1)[1] for flag in target.cflags if flag.startswith("-mcpu=")]
    return CORES.get(cpus[-1]) if cpus else None


def _model_source_digest() -> bytes:
    digest = hashlib.sha256()
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.read_bytes())
    return digest.digest()


def cost_table(core: Core, objdump: str, exe: Path, entry: int) -> Path:
    """The plugin's timing table (timing=FILE) for the code of `exe` reachable from `entry`: one line per
    instruction, "ADDR SEQ ENTRY TAKEN UNALIGNED". Cached by the executable's content, the entry and the timing
    models' source."""
    digest = hashlib.sha256(exe.read_bytes() + f"{core.label} {entry}".encode() + _model_source_digest())
    path = cache_dir() / f"{digest.hexdigest()[:32]}.timing"
    if path.exists():
        return path
    lines = [f"{insn.addr:x} {cost.seq} {cost.entry} {cost.taken} {int(cost.unaligned)}\n"
             for run in disassemble(objdump, exe, core.machine, entry)
             for insn, cost in zip(run, core.costs(run), strict=True)]
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(lines))
    os.replace(tmp, path)
    return path
