"""Cortex-M55 timing model: an in-order scalar pipeline much like the Cortex-M4's, plus the Helium (MVE) unit of
a dual-beat implementation (the Armv8.1-M architecture's beat-wise execution; the pipelines and latencies below are
those of the compilers' Cortex-M55 scheduling description, as ARM's Technical Reference Manual gives no cycle
tables).

- MVE: a 128-bit instruction executes as 4 beats of 32 bits, 2 per cycle, so it holds its pipeline for 2 cycles.
  The MVE unit has four pipelines -- load/store, integer, multiply / floating point, and control (VCTP, VPST,
  VPNOT: 1 cycle) -- and one instruction issues per cycle, so consecutive MVE instructions on different pipelines
  overlap (the second beat pair of one with the first of the next): VLDR; VMLA; VLDR; VMLA take 1 cycle each,
  two VLDRs in a row 2 each. Result latencies: contiguous loads and simple integer operations 1; rounding and
  saturating shifts, multiplies, multiply-accumulates and across-vector reductions 2 (forwarded a cycle early
  into stores); narrowing moves and shifts (VQMOVN, VQRSHRN, VMOVN) 3; gather loads 2.
- Scalar: ALU 1 cycle, latency 1; ALU with a shifted register operand, loads, multiplies and MACs, saturating and
  SIMD DSP instructions: latency 2. LDM / STM / PUSH / POP: 1 + N (as on the Cortex-M4). SDIV / UDIV 12 (upper
  bound). Two 16-bit instructions issue together when one of them is a NOP, IT, branch, ADD / SUB of an
  immediate, MOV or UXT / SXT, the second does not read the first's result, and neither takes several cycles.
- Branches: 1, plus P = 2 when taken; a taken LE / LETP (low-overhead loop end) costs nothing extra (the loop is
  assumed to run from the loop cache).
- Floating point (scalar): 1 cycle on the floating-point pipeline, latency 2; VDIV / VSQRT 14.
Not modelled: TCM / cache wait states, the store-to-load hazard of VSTR followed by VLDR, interrupts."""

from __future__ import annotations

import re

from .base import is_divide, is_double, is_dsp, is_floating, is_memory, is_multiple, is_multiply
from .disasm import Insn
from .scoreboard import ScoreboardCore, Timing

_INTEGER = re.compile(
    r"v(and|bic|orr|orn|eor|mvn|q?r?shl|r?shr|sli|sri|shlc|movl[tb]|shll[tb]|[id]?w?dup|maxa?|mina?|abs|neg|qabs|"
    r"qneg|qadd|qsub|r?hadd|hsub|abd|cls|clz|rev(16|32|64)|psel|adci?|sbci?|brsr|h?cadd|add|sub|maxa?v|mina?v|"
    r"abav|q?movu?n[tb]|q?r?shru?n[tb])")
_INTEGER_2 = re.compile(r"vr(shl|shr)|vq(r?shl)|vadci?|vsbci?|vmaxa?v|vmina?v")
_INTEGER_3 = re.compile(r"vq?movu?n[tb]|vq?r?shru?n[tb]|vabav")
_CONTROL = frozenset(("vctp", "vpst", "vpnot"))
_SECONDARY = re.compile(r"nop|it|b|add|sub|mov|[su]xt[bh]")  # may share a cycle with another 16-bit instruction


def _mve(insn: Insn) -> Timing:
    op = insn.op
    if op in _CONTROL:
        return Timing(unit="control", single=True)
    if is_memory(insn):
        gather = any(r.startswith("q") for r in insn.address)
        interleaved = re.match(r"v(ld|st)[24]", op) is not None
        return Timing(latency=2 if gather or interleaved else 1, unit="load-store", busy=2, single=True)
    if _INTEGER.fullmatch(op) and not insn.m.dtype.startswith("f"):
        latency = 3 if _INTEGER_3.fullmatch(op) else 2 if _INTEGER_2.fullmatch(op) else 1
        return Timing(latency=latency, unit="integer", busy=2, single=True, forwards_to_stores=latency == 2)
    lane = op == "vmov" and "[" in insn.operands
    if op == "vmov" and not lane and "#" not in insn.operands:  # VMOV Qd, Qm is VORR
        return Timing(unit="integer", busy=2, single=True)
    latency = 1 if lane or op in ("vcmp", "vpt") else 2
    return Timing(latency=latency, unit="multiply", busy=2, single=True, forwards_to_stores=latency == 2)


def timing(insn: Insn) -> Timing:
    if insn.vector:
        return _mve(insn)
    if is_floating(insn):
        if insn.op in ("vdiv", "vsqrt"):
            return Timing(occupancy=14, latency=14, unit="multiply", single=True)
        if is_multiple(insn):
            return Timing(occupancy=1 + insn.transfers, unit="load-store", single=True)
        return Timing(latency=2, unit="load-store" if is_memory(insn) else "multiply", single=True)
    if is_multiple(insn):
        return Timing(occupancy=1 + insn.transfers, latency=1, single=True)
    if is_memory(insn):
        return Timing(latency=2, single=is_double(insn) or insn.size == 4)
    if is_divide(insn):
        return Timing(occupancy=12, latency=12, single=True)
    if is_multiply(insn) or (is_dsp(insn) and not re.fullmatch(r"[su]xt[bh]", insn.op)) or insn.shifted:
        return Timing(latency=2, single=True)
    if insn.op in ("lsll", "lsrl", "asrl") or insn.op.startswith(("uq", "sq", "sr", "ur")):
        return Timing(latency=2, single=True)
    return Timing(single=insn.size == 4)


def _pairs(first: Insn, second: Insn) -> bool:
    if first.size != 2 or second.size != 2 or first.vector or second.vector:
        return False
    if not (_secondary(first) or _secondary(second)):
        return False
    return not set(first.writes) & (set(second.reads) | set(second.writes))


def _secondary(insn: Insn) -> bool:
    if not _SECONDARY.fullmatch(insn.op):
        return False
    return insn.op not in ("add", "sub") or "#" in insn.operands


class CortexM55(ScoreboardCore):
    stores_read_forwarded = True
    name = "cortex-m55"
    version = 1
    machine = "armv8.1-m.main"
    branch_penalty = 2


    def timing(self, insn: Insn) -> Timing:
        return timing(insn)

    def pairs(self, first: Insn, second: Insn) -> bool:
        return _pairs(first, second)

    def taken_penalty(self, insn: Insn) -> int:
        return 0 if insn.op in ("le", "letp") else super().taken_penalty(insn)
