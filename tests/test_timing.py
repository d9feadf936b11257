"""The cycle estimates of the Cortex-M timing models (qcodegen/verify/timing, applied by the QEMU counting plugin)
on short hand-analysed assembly functions: each function's cycles are derived below, instruction by instruction,
from the rules of its core's model (the Cortex-M4 rules are the TRM's; see the module docstrings), and the
plugin's estimate must equal them exactly -- the static costs, the taken-branch penalties, loop iterations and,
on Cortex-M4, the unaligned-access cycles seen at run time."""

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from qcodegen.codegen import generate, load_target
from qcodegen.compiler import plan
from qcodegen.errors import BuildError
from qcodegen.frontends import load_model
from qcodegen.verify.runners import binutil, cannot_count, counting_prefix, get_runner, read_count, unavailable
from qcodegen.verify.timing import CORES, disassemble, timing_model
from qcodegen.verify.timing.disasm import decode, split_mnemonic

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Kernel:
    name: str
    args: str            # C arguments after the buffer
    asm: str             # body, one instruction per line; "@ n" = its cycles by the model's rules
    cycles: int
    instructions: int


# Cortex-M4 (TRM Table 3-1, 3.3.2): P = 2.
M4 = [
    Kernel("m4_memory", "0, 0", """
        ldr   r2, [r0]          @ 2  first after the call's branch: nothing to pipeline with
        ldr   r3, [r0, #4]      @ 1  pipelined behind a load whose result (r2) it does not address with
        ldr   r1, [r0, r3]      @ 2  addressed by r3, the load's result just before: not pipelined
        add.w r3, r0, #8        @ 1
        ldr   r2, [r3]          @ 3  2 + 1: its address r3 comes from the data processing just before
        str   r2, [r0, r1]      @ 1  register-offset store after a load: 2 - 1
        str   r2, [r0, #16]     @ 1  immediate-offset store
        ldr   r2, [r0, #20]     @ 2  nothing pipelines after a store
        ldrd  r2, r3, [r0, #24] @ 3  1 + N, N = 2
        push  {r4, r5, r6}      @ 4  1 + N
        pop   {r4, r5, r6}      @ 4  1 + N
        bx    lr                @ 3  1 + P
        """, 27, 12),
    Kernel("m4_loop", "4, 3", """
        movs  r3, #0            @ 1
    1:  smlad r3, r2, r2, r3    @ 1 x 4
        sxtb16 r2, r2           @ 1 x 4
        subs  r1, #1            @ 1 x 4
        bne.n 1b                @ 1 x 4, + P when taken (3 times): 10
        cmp   r3, #0            @ 1  (16-bit)
        it    ne                @ 0  folded onto the 16-bit CMP
        movne r3, #1            @ 1
        udiv  r0, r3, r2        @ 12 the upper bound of 2-12
        bx    lr                @ 3
        """, 40, 22),
    Kernel("m4_unaligned", "0, 0", """
        ldr   r1, [r0, #1]      @ 4  2 + 2: a byte-aligned word
        ldr   r2, [r0, #2]      @ 2  1 (pipelined) + 1: a halfword-aligned word
        ldrh  r3, [r0, #3]      @ 2  1 (pipelined) + 1: a byte-aligned halfword
        ldrh  r3, [r0, #4]      @ 1  pipelined, aligned
        str   r1, [r0, #5]      @ 3  1 + 2: a byte-aligned word
        bx    lr                @ 3
        """, 15, 6),
]

# Cortex-M7 (the simple dual-issue model): P = 1. "cN" is the issue cycle.
M7 = [
    Kernel("m7_pairs", "0, 0", """
        ldr   r2, [r0]          @ 1  c0
        ldr   r3, [r0, #4]      @ 0  c0: two loads pair (two load ports)
        add   r1, r2, r3        @ 1  c1: word loads' latency 1
        mul   ip, r1, r1        @ 1  c2: reads r1, written by the instruction before (no pairing)
        add   r2, r2, #1        @ 0  c2: an ALU operation pairs with the multiply
        mla   r3, ip, ip, r3    @ 2  c4: multiply latency 2 on its multiplicand ip
        mla   r3, r1, r1, r3    @ 1  c5: the accumulator r3 (ready c6) is read a cycle late
        str   r3, [r0, #8]      @ 1  c6: store data r3 (ready c7) is read a cycle late
        sxtb16 r1, r1           @ 1  c7: a DSP instruction is never the second of a pair
        ldrb  r2, [r0, #1]      @ 0  c7: pairs behind it
        adds  r2, #1            @ 2  c9: byte loads' latency 2
        ldr   r3, [r0, r2]      @ 2  c11: its address r2 (ready c10) is read a cycle early
        ldmia r0, {r1, r2, r3}  @ 2  c12: alone, one cycle per two registers
        bx    lr                @ 2  c14, + P
        """, 16, 14),
    Kernel("m7_loop", "3, 1", """
    1:  add   r3, r3, r2, lsl #1  @ 1  c0
        add   r0, r0, r2, lsl #2  @ 1  c1: two shifted operands never pair
        subs  r1, #1              @ 0  c1: pairs
        bne.n 1b                  @ 1  c2, + P taken (2 of 3 times)
        bx    lr                  @ 2  the loop's branch holds the branch unit: c3, + P
        """, 3 * 3 + 2 + 2, 13),
]

# Cortex-M55 (MVE on a dual-beat core; the scalar pipeline): P = 2, a taken LE costs nothing extra.
M55 = [
    Kernel("m55_beats", "2, 0", """
        vldrw.u32  q0, [r0]          @ 1  c0, the load/store pipeline c0-c1
        vldrw.u32  q1, [r0, #16]     @ 2  c2: the load/store pipeline is busy with the first load's beats
        vadd.i32   q2, q0, q1        @ 1  c3: load latency 1; integer pipeline
        vmul.i32   q3, q2, q0        @ 1  c4: multiply pipeline
        vstrw.32   q3, [r0, #32]     @ 1  c5: the multiply's result (latency 2) is forwarded a cycle early to a store
        vqmovnb.s32 q4, q2           @ 1  c6: integer pipeline, latency 3
        vstrh.32   q4, [r0, #48]     @ 3  c9: a narrowing result is not forwarded
        vctp.32    r1                @ 1  c10: control pipeline, one cycle
        vpst                         @ 1  c11
        vaddt.i32  q0, q0, q0        @ 1  c12
        vaddv.u32  r2, q0            @ 1  c13: multiply pipeline, latency 2
        adds       r2, #1            @ 2  c15
        movs       r3, #0            @ 0  c15: a 16-bit MOV issues beside a 16-bit instruction
        bx         lr                @ 3  c16, + P
        """, 19, 14),
    Kernel("m55_loop", "3, 0", """
        push       {r4, lr}          @ 3  1 + N
        movs       r2, #0            @ 1  not beside the PUSH: a multi-cycle instruction issues alone
        dls        lr, r1            @ 1
    1:  vldrb.u8   q0, [r0], #16     @ 1 x 3
        vmlava.u8  r2, q0, q0        @ 1 x 3: the next cycle, on the multiply pipeline
        le         lr, 1b            @ 1 x 3, a taken LE adds nothing
        pop        {r4, pc}          @ 5  1 + N, + P
        """, 3 + 1 + 1 + 3 * 3 + 5, 3 + 3 * 3 + 1),
]

KERNELS = {"cortex-m4": M4, "cortex-m7": M7, "cortex-m55": M55}


def _asm(kernel: Kernel) -> str:
    lines = [line.split("@")[0].rstrip() for line in kernel.asm.strip().splitlines()]
    body = "\n".join(f'  "{line.strip()}\\n"' for line in lines)
    return (f'__asm__(".text\\n.align 2\\n.global {kernel.name}\\n.type {kernel.name}, %function\\n'
            f'.thumb_func\\n{kernel.name}:\\n"\n{body}\n  ".size {kernel.name}, . - {kernel.name}\\n");\n')


def _main(kernels: list[Kernel]) -> str:
    decls = "".join(f"int {k.name}(uint32_t *buf, int a, int b);\n" for k in kernels)
    calls = "".join(f"  sink += {k.name}(buf, {k.args});\n" for k in kernels)
    return ("#include <stdint.h>\n" + decls
            + "static uint32_t buf[32] __attribute__((aligned(16))) = {0x300, 8, 12};\n"
            + "".join(_asm(k) for k in kernels)
            + "int main(int argc, char **argv) {\n  volatile int sink = 0;\n  (void)argc; (void)argv;\n"
            + calls + "  return 0;\n}\n")


@pytest.fixture(scope="module", params=sorted(KERNELS))
def built(request, tmp_path_factory):
    target = load_target(request.param)
    reason = unavailable(target) or cannot_count(target)
    if reason:
        pytest.skip(f"{target.name}: {reason}")
    outdir = tmp_path_factory.mktemp(target.name)
    model = generate(plan(load_model(ROOT / "examples" / "kws_like.json")), outdir, target, harness=True)
    (outdir / "main.c").write_text(_main(KERNELS[target.name]))
    runner = get_runner(target)
    return target, runner, runner.executable(model)


def test_hand_analysed_kernels(built, tmp_path):
    target, runner, exe = built
    for kernel in KERNELS[target.name]:
        result = tmp_path / f"{kernel.name}.txt"
        prefix = counting_prefix(target, exe, kernel.name, result)
        subprocess.run(runner.command(prefix, exe, []), check=True, capture_output=True, timeout=60)
        count = read_count(target, result)
        assert (count.instructions, count.cycles) == (kernel.instructions, kernel.cycles), kernel.name
        assert count.timing_model == timing_model(target).label


def test_an_executed_instruction_missing_from_the_table_is_an_error(built, tmp_path):
    """No silent default: a timing table without the kernel's first instruction makes the count fail."""
    target, runner, exe = built
    kernel = KERNELS[target.name][0]
    result = tmp_path / "count.txt"
    prefix = counting_prefix(target, exe, kernel.name, result)
    table = re.search(r"timing=([^,]+)", prefix[-1]).group(1)
    partial = tmp_path / "partial.timing"
    partial.write_text("".join(Path(table).read_text().splitlines(keepends=True)[1:]))
    prefix[-1] = prefix[-1].replace(table, str(partial))
    subprocess.run(runner.command(prefix, exe, []), check=True, capture_output=True, timeout=60)
    with pytest.raises(BuildError, match="1 executed instructions are missing"):
        read_count(target, result)


def test_every_instruction_of_a_model_is_classified(built):
    """The disassembly of a whole harness (model, C library, start-up) decodes into operations the models know:
    nothing falls to the unknown-mnemonic default."""
    target, _, exe = built
    core = timing_model(target)
    unknown = {i.text for run in disassemble(binutil(target, "objdump"), exe, core.machine) for i in run
               if i.op == i.text.split(".")[0] and not _known(i.op)}
    assert not unknown


def _known(op: str) -> bool:
    from qcodegen.verify.timing.disasm import _SCALAR, _VECTOR_OPS
    return op in _SCALAR or bool(_VECTOR_OPS.fullmatch(op)) or op in ("it", "vpst", "vpt")


@pytest.mark.parametrize("text, op, cond, sets_flags, predicated", [
    ("ldreq.w", "ldr", "eq", False, False), ("lsls", "lsl", None, True, False), ("adcs", "adc", None, True, False),
    ("movcs", "mov", "cs", False, False), ("bls.n", "b", "ls", False, False), ("bleq", "bl", "eq", False, False),
    ("teq", "teq", None, False, False), ("subseq", "sub", "eq", True, False), ("smlal", "smlal", None, False, False),
    ("vldrbt.u8", "vldrb", None, False, True), ("vmovlt.s16", "vmovlt", None, False, False),
    ("vmovltt.s16", "vmovlt", None, False, True), ("vcmpe.f64", "vcmpe", None, False, False),
    ("vseleq.f64", "vsel", "eq", False, False), ("itte", "it", None, False, False),
    ("vpstt", "vpst", None, False, False), ("vqmovnb.s32", "vqmovnb", None, False, False),
])
def test_mnemonics(text, op, cond, sets_flags, predicated):
    m = split_mnemonic(text)
    assert (m.op, m.cond, m.sets_flags, m.predicated) == (op, cond, sets_flags, predicated)


def test_operands():
    ldrd = decode(0, "e8f0 6702", "ldrd", "r6, r7, [r0], #8")
    assert (ldrd.writes, ldrd.address) == (("r6", "r7", "r0"), ("r0",))
    add = decode(0, "4418", "add", "r0, r3")
    assert (add.writes, add.reads) == (("r0",), ("r3", "r0"))
    push = decode(0, "ed2d 8b10", "vpush", "{d8-d15}")
    assert push.transfers == 16 and push.writes == ("r13",)
    branch = decode(0, "f00f c001", "le", "lr, d2 <f+0x92>")
    assert branch.writes_pc and branch.falls_through and "q1" not in branch.reads  # d2 is an address here
    assert CORES["cortex-m4"].costs([decode(0, "4770", "bx", "lr")])[0].taken == 2
