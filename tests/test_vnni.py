"""The x86 VNNI targets (targets/x86-avxvnni.toml, x86-avx512vnni.toml; templates/avxvnni/_dot.c.j2): they run
natively where the CPU has the extensions and are reported unavailable with the missing flags otherwise; their
VPDPBUSD dot rows (u8 = x + 128 against s8 weights, minus (128 + izp) * the row sum) stay exact at the largest row
length the kernels accept (k = 65535 products of magnitude up to 255 * 128: the int32 bound of the proof in the
template). The common SIMD cases (awkward lengths, zero points, requantizing
stores, depthwise) run for these targets in tests/test_simd.py. Also here, for every x86 target: the blocked kernel
(avx2/_dot.c.j2 `gemm`: groups of 4 pixels, re-laid weights; on AVX2 one pixel by qc_ubs_blocks) with the 32-bit
requantization qc_scale32x8_s33p at its extremes."""

import numpy as np
import pytest

from qcodegen.codegen import generate, load_target
from qcodegen.ir.dtypes import dtype
from qcodegen.plan.fuse import fuse_conv_rescale
from qcodegen.plan.schedule import CONST, INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
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


def _available(name: str):
    tgt = load_target(name)
    reason = runners.unavailable(tgt)
    if reason:
        pytest.skip(f"{name}: {reason}")
    return tgt


@pytest.mark.parametrize("name", ["x86-avx2", *VNNI])
@pytest.mark.parametrize("rounding", ["single_round", "double_round"])
@pytest.mark.parametrize("kh, ow, c", [(3, 7, 5), (3, 1, 5), (1, 1, 2047)])
def test_blocked_kernel_shift33_extremes(name, rounding, kh, ow, c, tmp_path):
    """CONV2D + per-channel RESCALE (FUSED_CONV) over 27 output channels (a block of 16, one of 8, 3 rows one by
    one), izp -3: 3x3 (padding 1, 5 input channels: rows of k = 45, padded to the kernels' groups) over 7 output
    pixels (a group of 4 and a last group of 3) or one (gathered, on AVX2 the one-pixel kernel qc_ubs_blocks: 11
    groups of 4, 8 + 3 in its int16 lanes), or 1x1 over k = 2047 (one pixel: 511 groups + a padded one, each int16
    lane of qc_ubs_blocks at its bound 8 * 2 * 15 * 128 with the inputs 127 and the rows of -128 / 127); every shift
    in 33 .. 62 with 33 and 62 present, multipliers 1, 2^31 - 1 and random, biases near +-2^31 (TOSA bounds no
    accumulator for shifts > 31) and small ones, both roundings: qc_scale32x8_s33p against the reference at the
    64-bit products' extremes."""
    tgt = _available(name)
    rng = np.random.default_rng(33)
    oc = 27
    k = kh * kh * c
    w = rng.integers(-128, 128, (oc, kh, kh, c)).astype(np.int8)
    w[0], w[1], w[8] = -128, 127, -128
    shifts = rng.integers(33, 63, oc)
    shifts[:4] = [33, 62, 33, 62]
    mults = rng.integers(1, 1 << 31, oc)
    mults[:4] = [(1 << 31) - 1, (1 << 31) - 1, 1, (1 << 30) + 1]
    room = (1 << 31) - k * 255 * 128 - (1 << 12)
    bias = np.where(np.arange(oc) % 3 == 2, rng.integers(-4096, 4096, oc), np.where(np.arange(oc) % 2, room, -room))
    sched = Schedule("t")
    for bname, shape, dt, kind, values in [("x", (1, 1, ow, c), "i8", INPUT, None), ("w", w.shape, "i8", CONST, w),
                                           ("b", (oc,), "i32", CONST, bias.astype(np.int32)),
                                           ("acc", (1, 1, ow, oc), "i32", TEMP, None),
                                           ("y", (1, 1, ow, oc), "i8", OUTPUT, None)]:
        sched.add_buffer(Buffer(bname, shape, dtype(dt), kind, values))
    sched.inputs, sched.outputs = ["x"], ["y"]
    conv = dict(pad=[kh // 2] * 4, stride=[1, 1], dilation=[1, 1], input_zp=-3, weight_zp=0, acc_type="i32",
                pad_value=-3)
    rescale = dict(multiplier=mults.tolist(), shift=shifts.tolist(), input_zp=0, output_zp=-5, scale32=True,
                   per_channel=True, rounding=rounding)
    sched.steps = [Step("CONV2D", ["x", "w", "b"], ["acc"], conv, "conv"),
                   Step("RESCALE", ["acc"], ["y"], rescale, "rs")]
    fuse_conv_rescale(sched)
    generate(prepare(sched), tmp_path, tgt)
    code = (tmp_path / "t.c").read_text().split("static void", 1)[1]
    assert "qc_scale32x8_s33p(" in code and ("_madd_2x8" in code or "_dpbusd_4x8" in code)
    assert ("qc_ubs_blocks(" in code) == (name == "x86-avx2" and ow == 1)
    inputs = [[rng.integers(-128, 128, (1, 1, ow, c)).astype(np.int8)]]
    inputs += [[np.full((1, 1, ow, c), v, np.int8)] for v in (127, -128)]
    result = verify_planned(sched, target=tgt, inputs=inputs)
    assert result.bit_exact, f"{name}: {result.mismatches} mismatches, first {result.first_mismatch}"
