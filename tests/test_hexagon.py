"""Target hexagon-hvx beyond the suites every cross target runs (tests/test_targets.py): the packet and
instruction counts on a hand-written function whose packets are known, and the integer and binary32 division
functions of runtime/hexagon/qc_hexagon_start.c (Hexagon has no divide instruction) against Python / numpy on edge
cases."""

import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import load_target
from qcodegen.resources import data_path
from qcodegen.verify.runners import cannot_count, counting_prefix, read_count, unavailable

TARGET = load_target("hexagon-hvx")
pytestmark = pytest.mark.skipif(bool(unavailable(TARGET)), reason=f"hexagon-hvx: {unavailable(TARGET)}")

# 14 packets, 35 instructions per call. The assembler packs each pair of small instructions into one duplex
# word (two instructions) and pads the loop's packet with a nop (an endloop packet needs two words); the
# constant extender of r2 = ##... is a word of its packet, not an instruction.
COUNTED = r"""
  .text
  .globl qc_counted
  .type qc_counted, @function
  .p2align 4
qc_counted:
  { r1 = #0; r2 = #0 }
  { loop0(.Lbody, #10) }
.Lbody:
  { r0 = add(r0, #1); r1 = add(r1, #2) }:endloop0
  { r2 = ##0x12345678 }
  { jumpr r31 }
  .size qc_counted, . - qc_counted
"""
PACKETS, INSTRUCTIONS = 1 + 1 + 10 + 1 + 1, 2 + 1 + 10 * 3 + 1 + 1

rng = np.random.default_rng(18)
I32 = [-(1 << 31), -(1 << 31) + 1, -7, -1, 1, 3, 7, (1 << 31) - 1] + \
    [int(v) for v in rng.integers(-(1 << 31), 1 << 31, 8)]
I64 = [-(1 << 63), -(1 << 63) + 1, -(1 << 40) - 3, -1, 1, 5, (1 << 32) + 1, (1 << 63) - 1] + \
    [int(v) for v in rng.integers(-(1 << 63), (1 << 63) - 1, 8, dtype=np.int64)]


def _pairs(values: list[int], bits: int) -> list[tuple[int, int]]:
    """(n, d) with d != 0, without the one signed overflow (the most negative value / -1)."""
    return [(n, d) for n in values for d in values if d != 0 and not (n == -(1 << (bits - 1)) and d == -1)]


PAIRS32, PAIRS64 = _pairs(I32, 32), _pairs(I64, 64)
U32 = [(n % (1 << 32), d % (1 << 32)) for n, d in PAIRS32]
U64 = [(n % (1 << 64), d % (1 << 64)) for n, d in PAIRS64]


def _floats() -> np.ndarray:
    """binary32 (a, b) pairs: zeros, infinities, NaN, the smallest and largest subnormals and normals, 1, 3, 10;
    quotients on exact ties of the rounding (only subnormal quotients can be: odd multiples of the smallest
    subnormal over 2 and 4), overflowing, underflowing into subnormals and to zero; random bit patterns."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1.1754942e-38, 1.1754944e-38, 3.4028235e38, 1.0,
                        3.0, -10.0], np.float32)
    pairs = [(a, b) for a in special for b in special]
    odd = (2 * rng.integers(0, 1 << 22, 8) + 1).astype(np.uint32).view(np.float32)  # odd subnormal significands
    pairs += [(t, d) for t in odd for d in (2.0, -2.0, 4.0)] + [(3e38, 1e-3), (1e-30, 1e10), (1e-40, 3.0)]
    bits = rng.integers(0, 1 << 32, (48, 2), dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([np.array(pairs, np.float32), bits])


F32 = _floats()


def _literal(v: int, suffix: str) -> str:
    return f"{v}{suffix}" if v >= 0 else f"({v + 1}{suffix} - 1)"  # no literal for the most negative value


def _tables() -> str:
    out = []
    for name, ctype, pairs, suffix in (("s32", "int32_t", PAIRS32, "L"), ("u32", "uint32_t", U32, "UL"),
                                       ("s64", "int64_t", PAIRS64, "LL"), ("u64", "uint64_t", U64, "ULL")):
        rows = ", ".join(f"{{{_literal(n, suffix)}, {_literal(d, suffix)}}}" for n, d in pairs)
        out.append(f"{ctype} {name}[{len(pairs)}][2] = {{{rows}}};\n")
        out.append(f"static {ctype} {name}_out[{len(pairs)}][2];\n")
    words = ", ".join(f"{{{a}u, {b}u}}" for a, b in F32.view(np.uint32).tolist())
    out.append(f"uint32_t f32[{len(F32)}][2] = {{{words}}};\nstatic float f32_out[{len(F32)}];\n")
    return "".join(out)


MAIN = r"""
#include <stdint.h>
#include "qc_minilibc.h"
int qc_counted(int x);
%(tables)s
/* two loops: a remainder next to its quotient would be computed from it, without the remainder function */
#define DIVIDE(t) for (i = 0; i < sizeof t / sizeof t[0]; ++i) t##_out[i][0] = t[i][0] / t[i][1]; \
                  for (i = 0; i < sizeof t / sizeof t[0]; ++i) t##_out[i][1] = t[i][0] %% t[i][1];
#define WRITE(t) (fwrite(t, 1, sizeof t, f) == sizeof t)
int main(int argc, char **argv) {
  FILE *f;
  unsigned i;
  int ok = qc_counted(0) == 10 && qc_counted(5) == 15;
  DIVIDE(s32) DIVIDE(u32) DIVIDE(s64) DIVIDE(u64)
  for (i = 0; i < sizeof f32 / sizeof f32[0]; ++i) {
    float a, b;
    memcpy(&a, &f32[i][0], 4);
    memcpy(&b, &f32[i][1], 4);
    f32_out[i] = a / b;
  }
  if (argc != 2 || !(f = fopen(argv[1], "wb"))) return 2;
  ok = WRITE(s32_out) && WRITE(u32_out) && WRITE(s64_out) && WRITE(u64_out) && WRITE(f32_out) && ok;
  return fclose(f) == 0 && ok ? 0 : 1;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hexagon")
    (folder / "counted.S").write_text(COUNTED)
    # the operand tables are writable globals: the compiler cannot fold the divisions
    (folder / "main.c").write_text(MAIN % {"tables": _tables()})
    runtime = data_path("runtime")
    sources = [folder / "main.c", folder / "counted.S", runtime / "qc_minilibc.c",
               runtime / "hexagon" / "qc_hexagon_start.c"]
    exe = folder / "program"
    cmd = [TARGET.cc, *TARGET.cflags, f"-I{runtime}", *map(str, sources), *TARGET.ldflags, "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return exe


def test_counts_packets_and_their_instructions(program, tmp_path):
    reason = cannot_count(TARGET)
    if reason:
        pytest.skip(f"hexagon-hvx: no instruction counts ({reason})")
    result = tmp_path / "count.txt"
    cmd = counting_prefix(TARGET, program, "qc_counted", result) + [str(program), str(tmp_path / "out.bin")]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "calls 2\n" in result.read_text()  # two windows, counted per call
    count = read_count(TARGET, result)
    assert (count.instructions, count.packets, count.cycles) == (INSTRUCTIONS, PACKETS, None)


def test_division_functions(program, tmp_path):
    out = tmp_path / "out.bin"
    proc = subprocess.run([*TARGET.emulator, str(program), str(out)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data, at = out.read_bytes(), 0
    for pairs, dtype in ((PAIRS32, "<i4"), (U32, "<u4"), (PAIRS64, "<i8"), (U64, "<u8")):
        got = np.frombuffer(data, dtype, 2 * len(pairs), at).reshape(-1, 2)
        at += got.nbytes
        # C: the quotient rounds toward zero, the remainder has the dividend's sign
        want = [[abs(n) // abs(d) * (1 if (n < 0) == (d < 0) else -1),
                 abs(n) % abs(d) * (1 if n >= 0 else -1)] for n, d in pairs]
        assert got.tolist() == want, dtype
    got = np.frombuffer(data, "<u4", len(F32), at)
    at += got.nbytes
    with np.errstate(all="ignore"):
        want = (F32[:, 0] / F32[:, 1]).view(np.uint32)
    nan = np.isnan(want.view(np.float32))
    assert np.isnan(got.view(np.float32))[nan].all()
    bad = np.flatnonzero(~nan & (got != want))
    assert bad.size == 0, [(F32[i].tolist(), hex(got[i]), hex(want[i])) for i in bad[:5]]
    assert at == len(data)
