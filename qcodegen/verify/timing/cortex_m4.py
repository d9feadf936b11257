"""Cortex-M4 timing model, from the Technical Reference Manual (ARM DDI 0439, r0p1): Table 3-1 "Processor
instruction set summary" (cycles with zero wait-state memory), section 3.3.2 "Load/store timings" and the FPU
chapter's instruction timings.

- Data processing, multiply and multiply-accumulate (MUL, MLA, MLS, SMULL, UMULL, SMLAL, UMLAL), every DSP
  instruction (SMLAD, SMLABB, SXTB16, QADD, SSAT, ...): 1 cycle. SDIV / UDIV: 2-12 cycles by early
  termination on the operands' values, which the plugin does not see: the upper bound, 12.
- LDR / LDRB / LDRH / LDRSB / LDRSH: 2 cycles; 1 when it follows a single load whose destination does not form
  its address (the address phase pipelines with the data phase of the load before it). STR with an immediate
  offset: 1 (the store's data phase overlaps the next instruction); STR with a register offset: 2, 1 right after
  a single load (nothing pipelines after a store). LDRD / STRD, LDM / STM / PUSH / POP: 1 + N registers, never
  pipelined. A load or store whose address register the instruction just before it computed (data processing):
  one more cycle (no forwarding path to the address generation).
- Unaligned word / halfword accesses (seen at run time by the plugin): a byte-aligned halfword or halfword-aligned
  word +1, a byte-aligned word +2.
- Branches B, BL, BX, BLX, CBZ / CBNZ: 1, plus P when taken (TBB / TBH: 2 + P); any other write of the PC (POP
  {..., pc}, LDR pc, MOV pc) adds P to its own cycles. P, the pipeline refill, is 1 to 3 by the alignment and
  width of the target and by whether the address was speculated early: the model takes 2.
- IT: 1, or 0 when folded onto a 16-bit instruction just before it.
- Floating point (FPv4-SP): VLDR / VSTR 2, VLDM / VSTM / VPUSH / VPOP 1 + N words, VMLA / VMLS / VNMLA / VNMLS /
  VFMA / VFMS 3, VDIV / VSQRT 14, VMOV of a register pair 2, the others 1.
- Barriers: DMB / DSB 1, ISB 1 + P. Everything else (moves, compares, hints): 1.
Not modelled: wait states, the extra cycle a literal load (LDR Rx, [PC, #imm]) may take for contention with the
fetch unit, interrupts, condition-failed instructions (charged as executed)."""

from __future__ import annotations

from dataclasses import dataclass

from .base import (
    Core,
    fp_double,
    is_divide,
    is_double,
    is_floating,
    is_memory,
    is_multiple,
    is_single_transfer,
)
from .disasm import Insn, is_load

P = 2


@dataclass
class M4State:
    previous: Insn | None = None


def _data_processing(insn: Insn) -> bool:
    return not (is_memory(insn) or insn.writes_pc or insn.op in ("it", "nop") or is_floating(insn))


class CortexM4(Core[M4State]):
    name = "cortex-m4"
    version = 1
    machine = "armv7e-m"
    branch_penalty = P

    def fresh(self) -> M4State:
        return M4State()

    def issue(self, state: M4State, insn: Insn) -> int:
        prev, state.previous = state.previous, insn
        if insn.op == "it":
            return 0 if prev is not None and prev.size == 2 else 1
        cycles = self._cycles(insn, prev)
        if is_memory(insn) and prev is not None and _data_processing(prev) and set(prev.writes) & set(insn.address):
            cycles += 1
        return cycles

    def _cycles(self, insn: Insn, prev: Insn | None) -> int:
        if is_floating(insn):
            return _floating(insn)
        if is_multiple(insn) or is_double(insn):
            return 1 + (insn.transfers or 2)
        if is_single_transfer(insn):
            pipelined = (prev is not None and is_single_transfer(prev) and is_load(prev.op) and not prev.writes_pc
                         and not set(prev.writes) & set(insn.address))
            if is_load(insn.op) or insn.register_offset or insn.op.startswith("strex"):
                return 1 if pipelined else 2
            return 1
        if is_divide(insn):
            return 12
        if insn.op in ("tbb", "tbh"):
            return 2
        if insn.op == "isb":
            return 1 + P
        return 1

    def unaligned_penalty(self, insn: Insn) -> bool:
        return is_single_transfer(insn) and not insn.op.endswith(("b", "bt", "sb", "sbt", "exb"))


def _floating(insn: Insn) -> int:
    op = insn.op
    if op in ("vldr", "vstr"):
        return 2
    if op.startswith(("vldm", "vstm")) or op in ("vpush", "vpop"):
        return 1 + insn.transfers
    if op in ("vmla", "vmls", "vnmla", "vnmls", "vfma", "vfms", "vfnma", "vfnms"):
        return 3
    if op in ("vdiv", "vsqrt"):
        return 14 if not fp_double(insn) else 28
    if op == "vmov" and len(insn.writes) + len(insn.reads) > 2:
        return 2
    return 1
