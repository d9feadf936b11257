"""What every timing model shares: the per-instruction cost record the QEMU plugin applies, the linear walk that
computes it, and the instruction classes the models cost."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from .disasm import Insn, is_load, is_store


@dataclass(frozen=True)
class Cost:
    """Estimated cycles of one instruction, as the plugin (runtime/qemu/qc_insncount.c) applies them."""
    seq: int            # executed right after the instruction before it in memory (within a run of code)
    entry: int          # executed first after a taken branch (the pipeline refilled, nothing to overlap with)
    taken: int          # extra cycles when it writes the PC and execution continues at another address
    unaligned: bool = False  # a word / halfword access that costs the Cortex-M4's unaligned-access cycles


State = TypeVar("State")


class Core(ABC, Generic[State]):
    """An in-order core's timing model: `issue` advances a pipeline state by one instruction and returns the
    cycles it adds; `costs` walks a run of code in address order (the order in which a translation block
    executes it), once from the state the previous instructions left and once from a refilled pipeline."""

    name: ClassVar[str]
    version: ClassVar[int]
    machine: ClassVar[str]        # objdump -m
    branch_penalty: ClassVar[int]  # P: pipeline refill cycles of a taken branch

    @abstractmethod
    def fresh(self) -> State:
        """The state after a pipeline refill."""

    @abstractmethod
    def issue(self, state: State, insn: Insn) -> int:
        """Cycles `insn` adds when it follows the instructions recorded in `state` (updated)."""

    def taken_penalty(self, insn: Insn) -> int:
        return self.branch_penalty if insn.writes_pc else 0

    def unaligned_penalty(self, insn: Insn) -> bool:
        return False

    def costs(self, run: list[Insn]) -> list[Cost]:
        state, out = self.fresh(), []
        for insn in run:
            entry = self.issue(self.fresh(), insn)
            out.append(Cost(self.issue(state, insn), entry, self.taken_penalty(insn), self.unaligned_penalty(insn)))
            if not insn.falls_through:
                state = self.fresh()
        return out

    @property
    def label(self) -> str:
        """The `timing_model` field of the measurements: core and model version."""
        return f"qc-{self.name}-v{self.version}"


# --- instruction classes ---------------------------------------------------------------------------------
_MULTIPLY = re.compile(r"mul|mla|mls|umull|umlal|umaal|sm(ul|la|ls|ua|us|mul|mla|mls)\w*")
_DSP = re.compile(r"[su]h?q?(add16|add8|asx|sax|sub16|sub8)|q(d?add|d?sub)|[su]sat(16)?|sel|usada?8|pkh(bt|tb)|"
                  r"[su]xta?(b16|b|h)|rev(16|sh)?|rbit|clz|bf[ci]|[su]bfx")


def is_multiply(insn: Insn) -> bool:
    return bool(_MULTIPLY.fullmatch(insn.op))


def is_divide(insn: Insn) -> bool:
    return insn.op in ("sdiv", "udiv")


def is_dsp(insn: Insn) -> bool:
    """SIMD, saturating, extend, pack, bit-field and byte-reverse operations (not the multiplies)."""
    return bool(_DSP.fullmatch(insn.op))


def is_memory(insn: Insn) -> bool:
    return is_load(insn.op) or is_store(insn.op)


def is_single_transfer(insn: Insn) -> bool:
    """LDR / STR of a byte, halfword or word (exclusive and unprivileged forms included), not LDRD or LDM."""
    return bool(re.fullmatch(r"(ldr|str)(ex)?[bh]?|ldrs[bh]|(ldr|str)(s?[bh])?t|ldrex[bh]?|strex[bh]?", insn.op))


def is_multiple(insn: Insn) -> bool:
    """A register-list transfer: LDM / STM / PUSH / POP and their floating-point forms."""
    return insn.transfers > 0 or insn.op in ("push", "pop", "vpush", "vpop")


def is_double(insn: Insn) -> bool:
    return insn.op in ("ldrd", "strd", "ldrexd", "strexd")


def is_floating(insn: Insn) -> bool:
    """A scalar floating-point (FPv4/FPv5) instruction: a V-operation on S / D registers, not MVE."""
    return insn.op.startswith("v") and not insn.vector


def fp_double(insn: Insn) -> bool:
    return insn.m.dtype.endswith("64")
