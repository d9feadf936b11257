"""Cortex-M7 timing model -- a deliberately simple one. ARM publishes no instruction timing tables for the
Cortex-M7 (its Technical Reference Manual describes a six-stage, in-order, dual-issue pipeline with two ALUs, two
load ports, one store port, one MAC, one branch unit and a branch predictor); the latencies below are the
commonly used figures (those of the compilers' Cortex-M7 scheduling descriptions).

- Dual issue: two consecutive instructions issue in the same cycle unless one of them issues alone (LDM / STM /
  PUSH / POP, LDRD / STRD, TBB / TBH, divisions, barriers, system and floating-point register-list instructions),
  the second is a DSP / SIMD, extend, bit-field, CLZ or byte-reverse instruction (these pair only as the first of
  two), the second reads or writes a register the first writes, or both are stores, multiplies, branches,
  shifted-operand instructions or floating-point instructions.
- Latencies: ALU 1; word loads 1, byte / halfword loads 2; multiplies and multiply-accumulates 2 (the
  accumulator is read a cycle late, so MAC chains do not stall); saturating DSP instructions (QADD, SSAT, USAD8)
  2, other DSP 1; floating point 3. Address registers and shifted operands are read a cycle early, store data a
  cycle late. SDIV / UDIV: 12 cycles alone (upper bound). LDM / STM / PUSH / POP: one cycle per two registers
  (64-bit data path); VDIV / VSQRT 14.
- Branches are assumed predicted: a taken branch costs one extra cycle (P = 1); mispredictions are not modelled.
Not modelled: caches and TCM wait states, the branch predictor's misses, unaligned-access costs, interrupts."""

from __future__ import annotations

import re

from .base import (
    is_divide,
    is_double,
    is_dsp,
    is_floating,
    is_memory,
    is_multiple,
    is_multiply,
    is_single_transfer,
)
from .disasm import Insn, is_load, is_store
from .scoreboard import ScoreboardCore, Timing

_SLOW_DSP = re.compile(r"q(d?add|d?sub)(8|16)?|uq\w+|q(asx|sax)|[su]sat(16)?|usada?8")
_ACCUMULATING = re.compile(r"mla|mls|umlal|umaal|smla\w*|smls\w*|smmla\w*|smmls\w*")
_SYSTEM = frozenset("dmb dsb isb mrs msr svc bkpt cpsid cpsie wfi wfe sev udf clrex".split())


def _alone(insn: Insn) -> bool:
    return (is_multiple(insn) or is_double(insn) or is_divide(insn) or insn.op in ("tbb", "tbh")
            or insn.op in _SYSTEM or insn.op.startswith(("ldrex", "strex")))


def _accumulator(insn: Insn) -> tuple[str, ...]:
    """The accumulator operand of a multiply-accumulate (read late)."""
    if not _ACCUMULATING.fullmatch(insn.op):
        return ()
    return tuple(insn.writes) if len(insn.writes) == 2 else insn.reads[-1:]


def timing(insn: Insn) -> Timing:
    if is_floating(insn):
        if insn.op in ("vdiv", "vsqrt"):
            return Timing(occupancy=14, latency=14, unit="fp", single=True)
        if is_multiple(insn):
            return Timing(occupancy=max(1, (insn.transfers + 1) // 2), unit="load", single=True,
                          early=insn.address)
        if is_memory(insn):
            return Timing(latency=2, unit="store" if is_store(insn.op) else "load", early=insn.address)
        return Timing(latency=3, unit="fp")
    if is_multiple(insn):
        return Timing(occupancy=max(1, (insn.transfers + 1) // 2), unit="load" if is_load(insn.op) else "store",
                      single=True, early=insn.address)
    if is_memory(insn):
        store = is_store(insn.op)
        byte_or_half = is_single_transfer(insn) and re.search(r"[bh]t?$", insn.op) is not None
        data = tuple(r for r in insn.reads if r not in insn.address) if store else ()
        return Timing(latency=2 if byte_or_half else 1, unit="store" if store else "load", early=insn.address,
                      late=data, single=is_double(insn) or insn.op.startswith(("ldrex", "strex")))
    if is_divide(insn):
        return Timing(occupancy=12, latency=12, single=True)
    if is_multiply(insn):
        return Timing(latency=2, unit="mac", late=_accumulator(insn))
    if is_dsp(insn):
        return Timing(latency=2 if _SLOW_DSP.fullmatch(insn.op) else 1, unit="simd",
                      early=insn.reads[-1:] if insn.shifted else ())
    if insn.op in ("tbb", "tbh"):
        return Timing(occupancy=2, unit="branch", single=True, early=insn.address)
    if insn.writes_pc:
        return Timing(unit="branch")
    return Timing(early=insn.reads[-1:] if insn.shifted else (), single=insn.op in _SYSTEM)


def _pairs(first: Insn, second: Insn) -> bool:
    if _alone(first) or _alone(second) or is_dsp(second):
        return False
    if set(first.writes) & (set(second.reads) | set(second.writes)):
        return False
    both = (is_store(first.op) and is_store(second.op), is_multiply(first) and is_multiply(second),
            first.writes_pc and second.writes_pc, first.shifted and second.shifted,
            is_floating(first) and is_floating(second))
    return not any(both)


class CortexM7(ScoreboardCore):
    name = "cortex-m7"
    version = 1
    machine = "armv7e-m"
    branch_penalty = 1


    def timing(self, insn: Insn) -> Timing:
        return timing(insn)

    def pairs(self, first: Insn, second: Insn) -> bool:
        return _pairs(first, second)
