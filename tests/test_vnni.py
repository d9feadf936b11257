"""The x86 VNNI targets (targets/x86-avxvnni.toml, x86-avx512vnni.toml; templates/avxvnni/_dot.c.j2): they run
natively where the CPU has the extensions and are reported unavailable with the missing flags otherwise; their
VPDPBUSD dot rows (u8 = x + 128 against s8 weights, minus (128 + izp) * the row sum) stay exact at the largest row
length the kernels accept (k = 65535 products of magnitude up to 255 * 128: the int32 bound of the proof in the
template). The common SIMD cases (awkward lengths, zero points, requantizing
stores, depthwise) run for these targets in tests/test_simd.py."""

import numpy as np
import pytest

from qcodegen.codegen import generate, load_target
from qcodegen.testing import Const, Var, c_vs_reference, prepare, step_schedule, verify_planned
from qcodegen.verify import runners

VNNI = {"x86-avxvnni": "avx_vnni", "x86-avx512vnni": "avx512_vnni"}  # target: its VNNI cpu flag


@pytest.mark.parametrize("name", list(VNNI))
def test_missing_cpu_flag_is_reported(name, monkeypatch):
    """With the VNNI flag missing from /proc/cpuinfo the target is unavailable, with that flag as the reason;
    with every flag it requires present it is available (its tools permitting)."""
    tgt = load_target(name)
    required = frozenset(tgt.extra["requires_cpu"])
    assert VNNI[name] in required
    monkeypatch.setattr(runners, "_cpu_flags", lambda: required - {VNNI[name]})
    assert runners.unavailable(tgt) == f"this CPU lacks {VNNI[name]}"
    monkeypatch.setattr(runners, "_cpu_flags", lambda: required)
    assert runners.unavailable(tgt) == (f"missing {tgt.cc}" if tgt.missing_tools() else None)


@pytest.mark.parametrize("name", list(VNNI))
def test_longest_rows_exact(name):
    """1x1 CONV2D over k = 65535 input channels (the longest row the VNNI kernels take; 65535 = 64 * 1023 + 63:
    vector blocks, a masked tail of 63 bytes, and on AVX-VNNI 3 scalar bytes), 13 output channels (a block of 8,
    one of 4 and a single row), input zero point -128: with x = 127 every (x - izp) * w of the all -128 row is
    -32640 and its sum -2139062400, the u8 sum and the correction both at their bounds."""
    tgt = load_target(name)
    reason = runners.unavailable(tgt)
    if reason:
        pytest.skip(f"{name}: {reason}")
    k, oc = 65535, 13
    w = np.random.default_rng(7).integers(-2, 3, (oc, 1, 1, k))
    w[0], w[1], w[9], w[12] = -128, 127, -128, 127
    sched = step_schedule("CONV2D", [Var((1, 1, 1, k), "i8"), Const(w, "i8"), Const(np.zeros(oc), "i32")],
                          [((1, 1, 1, oc), "i32")], pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1],
                          input_zp=-128, weight_zp=0, acc_type="i32")
    extremes = [[np.full((1, 1, 1, k), v, np.int8)] for v in (127, -128)]
    result = c_vs_reference(sched, target=tgt, inputs=extremes)
    assert result.bit_exact, f"{name}: {result.mismatches} mismatches, first {result.first_mismatch}"


@pytest.mark.parametrize("name", list(VNNI))
@pytest.mark.parametrize("k", [4, 8, 16])
def test_short_rows(name, k, tmp_path):
    """1x1 CONV2D with rows of 4, 8 or 16 bytes (qc_vnni_dot_rows8_short_s8: 8, 4 or 2 rows per vector, lanes
    reordered) over 21 output channels (two blocks of 8 with different weights, one of 4, one single), 3 pixels,
    input zero point 5, random and extreme inputs."""
    tgt = load_target(name)
    reason = runners.unavailable(tgt)
    if reason:
        pytest.skip(f"{name}: {reason}")
    oc = 21
    w = np.random.default_rng(k).integers(-128, 128, (oc, 1, 1, k))
    w[0], w[9] = -128, 127
    sched = step_schedule("CONV2D", [Var((1, 1, 3, k), "i8"), Const(w, "i8"), Const(np.arange(oc) * 7 - 60, "i32")],
                          [((1, 1, 3, oc), "i32")], pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1],
                          input_zp=5, weight_zp=0, acc_type="i32")
    rng = np.random.default_rng(1)
    inputs = [[rng.integers(-128, 128, (1, 1, 3, k)).astype(np.int8)]]
    inputs += [[np.full((1, 1, 3, k), v, np.int8)] for v in (127, -128)]
    generate(prepare(sched), tmp_path, tgt)
    assert "qc_vnni_dot_rows8_short_s8(xp" in (tmp_path / "t.c").read_text()
    result = verify_planned(sched, target=tgt, inputs=inputs)
    assert result.bit_exact, f"{name} k={k}: {result.mismatches} mismatches, first {result.first_mismatch}"
