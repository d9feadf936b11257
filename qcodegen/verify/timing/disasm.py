"""Thumb instructions of an executable as the timing models see them, from GNU objdump's disassembly (binutils
decodes every instruction of these cores, MVE included with `-m armv8.1-m.main`; QEMU 7.2's own disassembler,
capstone 4, does not know MVE): address, size, the mnemonic taken apart (operation, condition, flag setting,
VPT predication, data type) and the registers read, written and used to form an address."""

from __future__ import annotations

import bisect
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...errors import BuildError

CONDITIONS = frozenset("eq ne cs hs cc lo mi pl vs vc hi ls ge lt gt le al".split())

# Scalar operations (ARMv7E-M and ARMv8.1-M mainline) whose names a condition or an S suffix may extend.
_DSP_PARALLEL = [f"{p}{op}" for p in ("s", "q", "sh", "u", "uq", "uh")
                 for op in ("add16", "add8", "asx", "sax", "sub16", "sub8")]
_SCALAR = frozenset("""
    adc add addw adr and asr b bfc bfi bic bkpt bl blx bx cbnz cbz clrex clz cmn cmp cpsid cpsie dmb dsb eor isb
    ldm ldmia ldmdb ldmfd ldmea ldr ldrb ldrbt ldrd ldrex ldrexb ldrexh ldrh ldrht ldrsb ldrsbt ldrsh ldrsht ldrt
    lsl lsr mla mls mov movt movw mrs msr mul mvn neg nop orn orr pkhbt pkhtb pld pli pop push qadd qdadd qdsub
    qsub rbit rev rev16 revsh ror rrx rsb sbc sbfx sdiv sel sev smlabb smlabt smlatb smlatt smlad smladx smlal
    smlalbb smlalbt smlaltb smlaltt smlald smlaldx smlawb smlawt smlsd smlsdx smlsld smlsldx smmla smmlar smmls
    smmlsr smmul smmulr smuad smuadx smulbb smulbt smultb smultt smull smulwb smulwt smusd smusdx ssat ssat16 stm
    stmia stmdb stmea stmfd str strb strbt strd strex strexb strexh strh strht strt sub subw svc sxtab sxtab16
    sxtah sxtb sxtb16 sxth tbb tbh teq tst ubfx udf udiv umaal umlal umull usad8 usada8 usat usat16 uxtab uxtab16
    uxtah uxtb uxtb16 uxth wfe wfi yield
    le letp wls wlstp dls dlstp lctp csel csinc csinv csneg cset csetm cinc cinv cneg lsll lsrl asrl uqshll
    uqrshll sqshll sqrshrl srshrl urshrl uqshl uqrshl sqshl sqrshr srshr urshr bf bfx bfl bflx bfcsel
    """.split()) | frozenset(_DSP_PARALLEL)

_REG_ALIASES = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12", "sp": "r13", "lr": "r14", "pc": "r15"}
_REG = re.compile(r"\b(r1[0-5]|r[0-9]|sb|sl|fp|ip|sp|lr|pc|q[0-7]|[sd][0-9]{1,2})\b")
_RANGE = re.compile(r"\b([rsdq])([0-9]{1,2})-[rsdq]?([0-9]{1,2})\b")
_SHIFTED = re.compile(r",\s*(lsl|lsr|asr|ror)\s|,\s*rrx\b")
_TARGET = re.compile(r"\b[0-9a-f]+\s*<[^>]*>")  # a branch target: "efe <name+0x46>"
_LINE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(\S+)\s*(.*)$")


def _register(name: str) -> str:
    """r0-r15, or q0-q7 for the vector and floating-point registers (s4 and d2 are parts of q1)."""
    name = _REG_ALIASES.get(name, name)
    if name[0] == "s":
        return f"q{int(name[1:]) // 4}"
    if name[0] == "d":
        return f"q{int(name[1:]) // 2}"
    return name


def _expand(text: str) -> str:
    return _RANGE.sub(lambda m: ", ".join(f"{m[1]}{i}" for i in range(int(m[2]), int(m[3]) + 1)), text)


def registers(text: str) -> list[str]:
    """The registers named in operand text, in order (repeats kept), register ranges ("{d8-d15}") expanded."""
    return [_register(found) for found in _REG.findall(_expand(text))]


def words(reglist: str) -> int:
    """32-bit words moved by a register list: one per core or single-precision register, two per D register."""
    return sum(2 if found[0] == "d" else 1 for found in _REG.findall(_expand(reglist)))


@dataclass(frozen=True)
class Mnemonic:
    op: str              # the operation: "ldr", "smlad", "vldrw", "it"
    cond: str | None     # condition code of a conditional instruction (IT block, branch)
    sets_flags: bool     # S suffix
    predicated: bool     # MVE instruction inside a VPT block (T/E suffix)
    dtype: str           # MVE / floating-point data type ("s32", "u8", "f64"), "" if none


def split_mnemonic(text: str) -> Mnemonic:
    """Take an objdump mnemonic apart: "ldreq.w" -> ldr + eq; "lsls" -> lsl + S; "vldrbt.u8" -> vldrb + T."""
    head, _, qual = text.lower().partition(".")
    dtype = "" if qual in ("w", "n") else qual  # .w / .n: the encoding width, which Insn.size gives
    block = re.fullmatch(r"(it|vpst|vpt)[te]{0,3}", head)
    if block:
        return Mnemonic(block.group(1), None, False, False, dtype)
    if head.startswith("v"):
        return _split_vector(head, dtype)
    cond = head[-2:] if head[-2:] in CONDITIONS and _scalar_stem(head[:-2]) else None
    stem = head[:-2] if cond and head not in _SCALAR else head
    cond = cond if stem != head else None
    if stem in _SCALAR:
        return Mnemonic(stem, cond, False, False, dtype)
    if stem.endswith("s") and stem[:-1] in _SCALAR:
        return Mnemonic(stem[:-1], cond, True, False, dtype)
    return Mnemonic(head, None, False, False, dtype)  # unknown: the models cost it as a plain operation


def _scalar_stem(stem: str) -> bool:
    return stem in _SCALAR or (stem.endswith("s") and stem[:-1] in _SCALAR)


# MVE and floating-point operations (after the data type is removed). Names ending in T or B (top / bottom
# halves: VMOVLT, VQMOVNB, VMULLT, VCVTB) are operations of their own, not VPT-predicated forms.
_VECTOR_OPS = re.compile(
    r"v(ldr[bhwd]?|str[bhwd]?|ld[24][0-3]|st[24][0-3]|ldm(ia|db)?|stm(ia|db)?|push|pop|lldm|lstm|mov|mvn|dup|"
    r"[id]w?dup|add|sub|mul|mla|mls|mlas|mulh|rmulh|q?r?dmulh|q?r?dml[as]dhx?|q?r?dmlas?h|ml[as]dava?x?|mlava?|"
    r"ml[as]ldava?x?|rml[as]ldavha?x?|addva?|addlva?|max|min|maxa|mina|maxn?m?a?v|minn?m?a?v|maxnma?|minnma?|abs|"
    r"neg|qabs|qneg|and|orr|orn|eor|bic|q?r?shl|r?shr|sli|sri|shlc|qadd|qsub|r?hadd|hsub|h?cadd|abd|abav|cls|clz|"
    r"rev(16|32|64)|cmul|cmla|fm[as]|fnm[as]|nml[as]|nmul|sel|cvt[abnmrpz]?|rint[anmpxrz]|div|sqrt|mrs|msr|ins|"
    r"movx|cmpe?|ctp|pnot|psel|adci?|sbci?|brsr|scclrm|"
    r"movl[tb]|q?movu?n[tb]|q?r?shru?n[tb]|mull[tb]|qdmull[tb]|shll[tb]|cvt[tb])")


def _split_vector(head: str, dtype: str) -> Mnemonic:
    if _VECTOR_OPS.fullmatch(head):
        return Mnemonic(head, None, False, False, dtype)
    if head[-1] in "te" and _VECTOR_OPS.fullmatch(head[:-1]):
        return Mnemonic(head[:-1], None, False, True, dtype)
    if head[-2:] in CONDITIONS and _VECTOR_OPS.fullmatch(head[:-2]):  # VSEL<cc>, or an FP op in an IT block
        return Mnemonic(head[:-2], head[-2:], False, False, dtype)
    return Mnemonic(head, None, False, False, dtype)


@dataclass(frozen=True)
class Insn:
    addr: int
    size: int                  # bytes: 2 or 4
    text: str                  # the mnemonic as objdump prints it
    m: Mnemonic
    operands: str              # operand text without comment and branch-target symbol
    writes: tuple[str, ...]    # registers written (r0-r15, q0-q7)
    reads: tuple[str, ...]     # registers read (address registers included)
    address: tuple[str, ...]   # registers that form a memory address
    transfers: int             # 32-bit words moved by a register-list load / store (0 for others)
    shifted: bool              # a register operand shifted by the instruction (", lsl #2")
    register_offset: bool      # a load / store addressed by base + register
    vector: bool               # an MVE instruction (Q registers or VPT / tail predication)

    @property
    def op(self) -> str:
        return self.m.op

    @property
    def writes_pc(self) -> bool:
        return self.op in _BRANCHES or "r15" in self.writes

    @property
    def falls_through(self) -> bool:
        """Execution may continue with the next instruction (false for an unconditional jump or return)."""
        if not self.writes_pc:
            return True
        return self.m.cond is not None or self.op in ("cbz", "cbnz", "le", "letp", "wls", "wlstp")


_BRANCHES = frozenset("b bl blx bx cbz cbnz tbb tbh le letp wls wlstp".split())
_NO_DESTINATION = frozenset("""
    cmp cmn tst teq b bx cbz cbnz tbb tbh it nop pld pli dmb dsb isb bkpt svc sev wfe wfi yield udf msr cpsid
    cpsie clrex lctp bf bfx bfl bflx bfcsel vpst vpt vcmp vcmpe vctp vpnot vmsr
    """.split())
_LINKS = frozenset("bl blx le letp wls wlstp dls dlstp".split())  # write LR (and nothing else)
_TWO_DESTINATIONS = re.compile(
    r"smull|umull|smlal|umlal|umaal|smlaldx?|smlsldx?|smlal[bt][bt]|lsll|lsrl|asrl|uqr?shll|sqr?shrl|[su]rshrl|"
    r"vml[as]ldava?x?|vrml[as]ldavha?x?|vaddlva?")
_ACCUMULATES = re.compile(
    r"smlal|umlal|umaal|smlaldx?|smlsldx?|smlal[bt][bt]|lsll|lsrl|asrl|uqr?shll|sqr?shrl|[su]rshrl|movt|bfi|"
    r"v.*va|v.*vha|vmlas?|vfm[as]|vq?r?dmlas?h|vsli|vsri|vmovn[tb]|vq?movu?n[tb]|vq?r?shru?n[tb]")


# Thumb's two-operand forms ("adds r0, #1", "add r0, r3") read their destination too
_BINARY = frozenset("adc add and asr bic eor lsl lsr mul orn orr ror sbc sub".split())


def is_store(op: str) -> bool:
    return op.startswith(("str", "stm", "vstr", "vstm", "vst2", "vst4")) or op in ("push", "vpush")


def is_load(op: str) -> bool:
    return op.startswith(("ldr", "ldm", "vldr", "vldm", "vld2", "vld4")) or op in ("pop", "vpop")


def _memory(op: str, operands: str) -> tuple[list[str], list[str], list[str], int, bool]:
    """writes, reads, address registers, words moved by a register list, register offset -- of a load or store
    ("ldr r0, [r1, r2]", "vstrb.8 q4, [r7], #16", "ldmia r0!, {r1, r2}", "push {r4, lr}")."""
    listed = re.search(r"\{([^}]*)\}", operands)
    if listed:
        data, transfers = registers(listed.group(1)), words(listed.group(1))
        address = ["r13"] if op in ("push", "pop", "vpush", "vpop") else registers(operands[:listed.start()])[:1]
        writeback = op in ("push", "pop", "vpush", "vpop") or "!" in operands
        register_offset = False
    else:
        before, _, inside = operands.partition("[")
        inside, _, after = inside.partition("]")
        data, address, transfers = registers(before), registers(inside) + registers(after), 0
        writeback = "!" in after or after.strip().startswith(",")
        register_offset = len(registers(inside)) > 1
    base = address[:1] if writeback else []
    if is_load(op):
        return data + base, address, address, transfers, register_offset
    return base, data + address, address, transfers, register_offset


def decode(addr: int, raw: str, text: str, operands: str) -> Insn:
    """One instruction from its objdump fields (raw bytes as hex halfwords, mnemonic, operand text)."""
    operands = _TARGET.sub("", re.split(r"\s@", operands)[0]).strip()
    m = split_mnemonic(text)
    op = m.op
    if is_load(op) or is_store(op):
        writes, reads, address, transfers, register_offset = _memory(op, operands)
    else:
        regs = registers(operands)
        if op in _LINKS or op in _NO_DESTINATION:
            count = 0
        elif _TWO_DESTINATIONS.fullmatch(op) or (op == "vmov" and regs[1:2] and regs[0][0] == regs[1][0] == "r"
                                                   and len(regs) > 2):  # VMOV r0, r1, d0
            count = 2
        else:
            count = 1
        two_operand = op in _BINARY and operands.count(",") == 1
        writes = ["r14"] if op in _LINKS else regs[:count]
        reads = [r for r in regs[count:] if op not in _LINKS or r != "r14"]
        reads += regs[:count] if _ACCUMULATES.fullmatch(op) or two_operand else []
        address, transfers, register_offset = [], 0, False
    shifted = bool(_SHIFTED.search(operands)) and not (is_load(op) or is_store(op))
    vector = bool(re.search(r"\bq[0-7]\b", operands)) or op in ("vctp", "vpst", "vpt", "vpnot")
    return Insn(addr, 2 * len(raw.split()), text, m, operands, tuple(dict.fromkeys(writes)),
                tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(address)), transfers, shifted, register_offset,
                vector)


_SYMBOL = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_DIRECT = re.compile(r"\b([0-9a-f]+)\s*<[^>]*>")
_INDIRECT = re.compile(r"(blx|bx)\S*\s+(?!lr\b)\w+|(mov|add|ldr)\S*\s+pc\s*,")  # not a return (bx lr, pop {pc})


@dataclass
class _Function:
    start: int
    lines: list[tuple[str, str, str, str] | None]  # (address, raw bytes, mnemonic, operands); None: data
    calls: set[int]                                 # addresses its direct branches and calls go to
    indirect: bool                                  # it jumps or calls through a register (not a return)


def _functions(listing: str) -> list[_Function]:
    functions: list[_Function] = []
    for line in listing.splitlines():
        if line.endswith(">:"):
            symbol = _SYMBOL.match(line)
            if symbol:
                functions.append(_Function(int(symbol.group(1), 16), [], set(), False))
            continue
        fields = line.split("\t")
        if len(fields) < 3 or not functions or not fields[0].endswith(":"):
            continue
        if fields[2].startswith("."):  # data in the code: .word / .short literal pools
            functions[-1].lines.append(None)
            continue
        text, operands = fields[2].strip(), "\t".join(fields[3:])
        code = re.split(r"\s@", operands)[0] if "@" in operands else operands
        if "<" in code:
            target = _DIRECT.search(code)
            if target:
                functions[-1].calls.add(int(target.group(1), 16))
        if text.startswith("b") or "pc" in code:
            functions[-1].indirect |= bool(_INDIRECT.match(f"{text} {code}"))
        functions[-1].lines.append((fields[0].strip()[:-1], fields[1].strip(), text, operands))
    return functions


def _reachable(functions: list[_Function], entry: int) -> list[_Function]:
    """The functions the code at `entry` can reach through direct branches and calls (all of them if one of those
    jumps through a register)."""
    starts = [f.start for f in functions]
    seen: dict[int, _Function] = {}
    todo = [entry]
    while todo:
        at = bisect.bisect_right(starts, todo.pop()) - 1
        if at < 0 or functions[at].start in seen:
            continue
        function = seen[functions[at].start] = functions[at]
        if function.indirect:
            return functions
        todo.extend(function.calls)
    return sorted(seen.values(), key=lambda f: f.start)


def disassemble(objdump: str, exe: Path, machine: str, entry: int | None = None) -> list[list[Insn]]:
    """The instructions of the functions of `exe` (those reachable from `entry` when given), one list per run of
    code in address order (a symbol or a literal pool starts a new run)."""
    proc = subprocess.run([objdump, "-d", "-m", machine, str(exe)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{objdump} failed on {exe}: {proc.stderr.strip()[:300]}")
    functions = _functions(proc.stdout)
    runs: list[list[Insn]] = []
    for function in functions if entry is None else _reachable(functions, entry):
        runs.append([])
        for line in function.lines:
            if line is None:
                runs.append([])
            else:
                runs[-1].append(decode(int(line[0], 16), *line[1:]))
    return [run for run in runs if run]
