"""The x86 VNNI targets (targets/x86-avxvnni.toml, x86-avx512vnni.toml; kernels runtime/x86/, choice
qcodegen/kernels/x86): they run natively where the CPU has the extensions and are reported unavailable with the
missing flags otherwise; their VPDPBUSD dot rows (u8 = x + 128 against s8 weights, minus (128 + izp) * the row sum)
stay exact at the largest row length the kernels accept (k = 65535 products of magnitude up to 255 * 128: the int32
bound of the proof in qc_x86_conv.h). The common SIMD cases (awkward lengths, zero points, requantizing stores,
depthwise) run for these targets in tests/test_simd.py. Also here, for every x86 target: the blocked kernel
(qc_x86_gemm_s8: groups of 4 pixels, re-laid weights; on AVX2 one pixel by qc_x86_ubs_blocks) with the 32-bit
requantization qc_x86_scale32x8_s33p at its extremes, and the depthwise kernel over rows of int16 tap pairs
(qc_x86_dw_rows)."""

from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import load_target
from qcodegen.compiler import plan
from qcodegen.frontends import load_model
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import CONST, INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.kernels import KernelChoice, plan_kernels
from qcodegen.plan.fuse import fuse_conv_rescale
from qcodegen.testing import Const, Var, c_vs_reference, prepare, step_schedule, verify_planned
from qcodegen.verify import runners

ROOT = Path(__file__).resolve().parent.parent
VNNI = {"x86-avxvnni": "avx_vnni", "x86-avx512vnni": "avx512_vnni"}  # target: its VNNI cpu flag


def _choice(sched: Schedule, target) -> KernelChoice:
    """The kernel choice of the schedule's (last) convolution step on the target."""
    return plan_kernels(prepare(sched), target, "t").steps[-1].choice


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
def test_short_rows(name, k):
    """1x1 CONV2D with rows of 4, 8 or 16 bytes (qc_x86_vnni_dot_8rows_short_s8: 8, 4 or 2 rows per vector, lanes
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
    assert _choice(sched, tgt).kernel == "qc_x86_vnni_dot_8rows_short_s8"
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
def test_blocked_kernel_shift33_extremes(name, rounding, kh, ow, c):
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
    choice = _choice(sched, tgt)
    assert choice.form == "gemm" and choice.params.rq.per_channel and choice.params.rq.s33
    assert choice.kernel == ("qc_x86_ubs_blocks" if name == "x86-avx2" and ow == 1 else
                             "qc_x86_madd_blocks" if name == "x86-avx2" else "qc_x86_dpbusd_blocks")
    inputs = [[rng.integers(-128, 128, (1, 1, ow, c)).astype(np.int8)]]
    inputs += [[np.full((1, 1, ow, c), v, np.int8)] for v in (127, -128)]
    result = verify_planned(sched, target=tgt, inputs=inputs)
    assert result.bit_exact, f"{name}: {result.mismatches} mismatches, first {result.first_mismatch}"


# (channels, kh, kw, stride, pad [top, bottom, left, right], pad value, izp, rounding, smallest shift, output range,
# input height, width): the AVX2 depthwise kernel over int16 tap pairs (qc_x86_dw_rows), then a case it
# leaves to the blocks of 8 channels (20 channels)
DW_CASES = [
    (8, 3, 3, (1, 1), (1, 1, 1, 1), -128, -128, "double_round", 33, (-128, 127), 5, 4),
    (16, 3, 3, (2, 2), (1, 1, 1, 1), 0, 5, "single_round", 33, (-5, 127), 7, 7),
    (24, 3, 3, (2, 2), (0, 1, 0, 1), 3, -7, "double_round", 40, (-100, 6), 8, 8),
    (40, 2, 3, (1, 1), (1, 0, 1, 1), -128, 0, "single_round", 28, (-128, 127), 4, 5),
    (64, 3, 3, (1, 1), (1, 1, 1, 1), -128, -128, "double_round", 33, (-128, 127), 12, 40),
    (8, 3, 1, (2, 3), (1, 1, 0, 0), 17, 17, "double_round", 33, (-128, 127), 7, 7),
    (20, 3, 3, (1, 1), (1, 1, 1, 1), -128, -128, "double_round", 33, (-128, 127), 5, 4),
]


@pytest.mark.parametrize("name", ["x86-avx2", *VNNI])
@pytest.mark.parametrize("case", DW_CASES, ids=[f"c{c[0]}_{c[1]}x{c[2]}_s{c[3][1]}" for c in DW_CASES])
def test_depthwise_pair_rows(name, case):
    """DEPTHWISE_CONV2D + per-channel RESCALE (FUSED_CONV) through the kernel over rows of int16 tap pairs: 8 .. 64
    channels (one block of 8, or 16-channel widening and a last 8), 3x3, 2x3 and 3x1 windows, strides 1, 2 and 3
    (an even stride widens every other position), padding on some or all sides with pad values -128, 0, 3, 17,
    izp != 0, both roundings with shifts from 28 (qc_scale32x8) or from 33 (qc_scale32x8_s33r, 33 and 62 present),
    multipliers 0, 1, 2^31 - 1 and random, biases near +-2^31 (the accumulators' start wraps modulo 2^32) and small
    ones, output clamps; 40 x 12 pixels of 64 channels need bands of 4 output rows (qc_rows <= 64 KiB). 20
    channels: not a multiple of 8, the blocks of 8 channels run. Random inputs and both int8 extremes."""
    c, kh, kw, stride, pad, pad_value, izp, rounding, lo, out_range, ih, iw = case
    tgt = _available(name)
    rng = np.random.default_rng(c * kh * kw + stride[1])
    oh, ow = (ih + pad[0] + pad[1] - kh) // stride[0] + 1, (iw + pad[2] + pad[3] - kw) // stride[1] + 1
    w = rng.integers(-128, 128, (kh, kw, c, 1)).astype(np.int8)
    w[0, 0, :2], w[-1, -1, 2:4] = -128, 127
    shifts = rng.integers(lo, 63, c)
    shifts[:2] = [lo, 62]
    mults = rng.integers(0, 1 << 31, c)
    mults[:4] = [(1 << 31) - 1, 1, 0, (1 << 30) + 1]
    room = (1 << 31) - kh * kw * 255 * 128 - (1 << 12)
    big = np.where(np.arange(c) % 2, room, -room) if lo >= 33 else np.zeros(c, np.int64)
    bias = np.where(np.arange(c) % 3 == 2, rng.integers(-4096, 4096, c), big)
    sched = Schedule("t")
    for bname, shape, dt, kind, values in [("x", (1, ih, iw, c), "i8", INPUT, None), ("w", w.shape, "i8", CONST, w),
                                           ("b", (c,), "i32", CONST, bias.astype(np.int32)),
                                           ("acc", (1, oh, ow, c), "i32", TEMP, None),
                                           ("y", (1, oh, ow, c), "i8", OUTPUT, None)]:
        sched.add_buffer(Buffer(bname, shape, dtype(dt), kind, values))
    sched.inputs, sched.outputs = ["x"], ["y"]
    conv = dict(pad=list(pad), stride=list(stride), dilation=[1, 1], input_zp=izp, weight_zp=0, acc_type="i32",
                pad_value=pad_value)
    rescale = dict(multiplier=mults.tolist(), shift=shifts.tolist(), input_zp=0, output_zp=int(rng.integers(-128, 128)),
                   scale32=True, per_channel=True, rounding=rounding, out_min=out_range[0], out_max=out_range[1])
    sched.steps = [Step("DEPTHWISE_CONV2D", ["x", "w", "b"], ["acc"], conv, "conv"),
                   Step("RESCALE", ["acc"], ["y"], rescale, "rs")]
    fuse_conv_rescale(sched)
    choice = _choice(sched, tgt)
    assert (choice.kernel == "qc_x86_dw_rows") == (c % 8 == 0)
    if c % 8 == 0:
        assert choice.params.rq.s33 == (lo >= 33) and ("VPDPWSSD" in choice.reason) == (name in VNNI)
        assert (choice.params.nb == oh) == (c != 64)  # one band, or bands of 4 rows
    inputs = [[rng.integers(-128, 128, (1, ih, iw, c)).astype(np.int8)]]
    inputs += [[np.full((1, ih, iw, c), v, np.int8)] for v in (127, -128)]
    result = verify_planned(sched, target=tgt, inputs=inputs)
    assert result.bit_exact, f"{name} {case}: {result.mismatches} mismatches, first {result.first_mismatch}"


@pytest.mark.parametrize("name", ["x86-avx2", *VNNI])
def test_kws_like_choices(name):
    """examples/kws_like.json planned for an x86 target, without rendering: the convolutions on the blocked
    kernels (AVX2: madd_2x8 weights for VPMADDWD, the fully connected layer on the nibble kernel; VNNI: dpbusd_4x8
    weights for VPDPBUSD), the depthwise convolutions over rows of int16 tap pairs, the element-wise chain 8 lanes at
    a time, everything else portable; the model needs the four runtime/x86 headers."""
    kp = plan_kernels(plan(load_model(ROOT / "examples" / "kws_like.json")), load_target(name), "kws")
    convs = [s.choice for s in kp.steps if s.op == "FUSED_CONV" and s.choice.form == "gemm"]
    vnni = ("qc_x86_dpbusd_blocks", "dpbusd_4x8")
    assert [(c.kernel, c.layout) for c in convs] == ([vnni] * 5 if name in VNNI else
                                                     [("qc_x86_madd_blocks", "madd_2x8")] * 4
                                                     + [("qc_x86_ubs_blocks", "dpbusd_4x8")])
    assert all({"weights", "starts", "rq"} <= set(c.arrays) for c in convs)
    assert [s.choice.kernel for s in kp.steps if s.choice.form == "dw_rows"] == ["qc_x86_dw_rows"] * 3
    assert [s.op for s in kp.steps if s.choice.form == "elementwise"] == ["FUSED_ELEMENTWISE"]
    assert {s.choice.kernel for s in kp.steps if s.choice.form == "portable"} == {
        "c:rescale", "c:concat", "c:avg_pool2d", "c:reshape"}
    assert kp.files == ("x86/qc_x86.h", "x86/qc_x86_conv.h", "x86/qc_x86_dw.h", "x86/qc_x86_ew.h")
