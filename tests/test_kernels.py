"""The kernel-choice pass (qcodegen/kernels), without rendering: which kernel, weight layout and arrays each step
gets on a target, and why; the Cortex-M4/M7 weight layouts against their definitions element by element; and the
reports' byte counts against the arrays actually written, on every target and weight layout."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen.cli import main
from qcodegen.codegen import generate, list_targets, load_target
from qcodegen.compiler import plan
from qcodegen.frontends import load_model
from qcodegen.ir.schedule import Schedule
from qcodegen.kernel_testing import conv_schedule as _conv
from qcodegen.kernels import layouts_of, plan_kernels
from qcodegen.kernels.cortex_m_dsp import layouts
from qcodegen.kernels.record import RequantStore
from qcodegen.kernels.rv32 import layouts as rv32_layouts
from qcodegen.verify.build import compile_cached
from qcodegen.verify.runners import binutil

ROOT = Path(__file__).resolve().parent.parent
KWS = ROOT / "examples" / "kws_like.json"


def _choice(sched: Schedule, target: str = "cortex-m4", layout: str | None = None):
    """The choice of the schedule's last execution step (the fused convolution)."""
    return plan_kernels(sched, load_target(target, layout), "m").steps[-1].choice


def _w(rng, *shape, lo=-128, hi=128):
    return rng.integers(lo, hi, shape).astype(np.int8)


def test_kws_like_choices_per_target_and_layout():
    """kws_like on Cortex-M4: convolutions over pixel triples (the requantization in the kernel, int8 words of two
    rows, the fast layout their int16 pairs), depthwise channel by channel over int16 planes (25 x 5 pixels), the
    fully connected layer 4 rows a call; everything else the portable loops. The generic target: only portable
    loops and no arrays but the schedule's."""
    schedule = plan(load_model(KWS))
    for layout, w in (("compact", "s8x2"), ("fast", "q15x2")):
        kp = plan_kernels(schedule, load_target("cortex-m4", layout), "kws")
        kinds = {s.op: set() for s in kp.steps}
        for s in kp.steps:
            kinds[s.op].add((s.choice.form, s.choice.layout))
        convs = [s.choice for s in kp.steps if s.choice.form == "conv_px"]
        assert len(convs) == 4 and all(c.kernel.startswith(f"qc_dsp_conv_3px_{w}_single_pc") for c in convs)
        assert all(c.unread == {1} and not c.step_constants and c.window_length % 4 == 0 for c in convs)
        dws = [s.choice for s in kp.steps if s.choice.form == "dw_rows"]
        assert [c.kernel for c in dws] == ["qc_dsp_dwr5_s8_single_pc"] * 3 and all(c.unread == {1, 2} for c in dws)
        fc = kp.steps[-2].choice
        assert (fc.form, fc.kernel) == ("dot_4rows", "qc_dsp_dot_4rows_s8x4" if layout == "compact"
                                        else "qc_dsp_dot_4rows_q15")
        assert {s.choice.kernel for s in kp.steps if s.choice.form == "portable"} == {
            "c:fused_elementwise", "c:rescale", "c:concat", "c:avg_pool2d", "c:reshape"}
        assert kp.files == ("cortex-m/qc_cm_rq.h", "cortex-m/qc_cm_dsp.h", "cortex-m/qc_cm_dsp_conv.h",
                            "cortex-m/qc_cm_dsp.c", "cortex-m/qc_cm_copy.h", "cortex-m/qc_cm_copy.c")
    generic = plan_kernels(schedule, load_target("generic"), "kws")
    assert all(s.choice.kernel.startswith("c:") and not s.choice.arrays for s in generic.steps)
    assert generic.files == () and all(a.name.startswith(("kws_c_", "kws_v_")) for a in generic.arrays)


def test_conv_choices_and_reasons():
    """Each branch of the Cortex-M DSP convolution choice, from the step's fields alone."""
    rng = np.random.default_rng(0)
    px = dict(x_shape=(1, 2, 3, 16), y_shape=(1, 2, 3, 6))
    w = _w(rng, 6, 1, 1, 16)
    c = _choice(_conv("CONV2D", w=w, bias=np.arange(6) * 100, **px))
    # |bias| + k 2^15 < 2^30: mode 2, the sums doubled, the starts and pairs inside the weights (dsp_packed)
    # 4 groups, 6 rows: the 3-pixel kernel of that group count (the last one or two pixels: the general ones)
    assert c.form == "conv_px" and c.kernel == "qc_dsp_conv_3px_s8x2_packed_g4" and c.params.double_inputs
    assert c.params.fn2 == "qc_dsp_conv_2px_s8x2_packed"
    assert set(c.arrays) == {"weights"} and c.unread == {1, 2} and c.params.triples == 6 and "pixels" in c.reason
    starts = 2 * (np.arange(6) * 100 + 128 * w.reshape(6, 16).astype(np.int64).sum(axis=1))  # (izp -128)
    block = c.arrays["weights"].values[:2 + 8 + 6].tolist()  # the first pair of rows: 2 starts, 4 groups, 2 x 3
    assert block[:2] == starts[:2].tolist() and block[10:] == [1 << 30, 38 - 32, c.params.zp2p1 << 6] * 2
    assert c.params.run and not c.params.q15_copy  # 1x1, stride 1: the step's own loop; 6 pixels: no copy
    # 8 inputs, 144 pixels: the weights copied as int16 pairs onto the stack (16 rows: 8 pairs of 2 + 8 + 6 words)
    small = _choice(_conv("CONV2D", w=_w(rng, 16, 1, 1, 8), bias=np.zeros(16), x_shape=(1, 12, 12, 8),
                          y_shape=(1, 12, 12, 16)))
    assert (small.kernel, small.layout, small.params.q15_copy) == ("qc_dsp_conv_3px_q15x2_packed_g2",
                                                                   "dsp_s8x2_packed", 8 * 16)
    assert not small.params.double_inputs and "stack copy of 512 B" in small.reason
    big = _choice(_conv("CONV2D", w=_w(rng, 64, 1, 1, 64), bias=np.zeros(64), x_shape=(1, 12, 12, 64),
                        y_shape=(1, 12, 12, 64)))  # 32 pairs of 2 + 32 + 6 words: 9,216 B > 4 KiB
    assert big.kernel == "qc_dsp_conv_3px_s8x2_packed" and not big.params.q15_copy and big.params.double_inputs
    many = _choice(_conv("CONV2D", w=_w(rng, 64, 1, 1, 32), bias=np.zeros(64), x_shape=(1, 12, 12, 32),
                         y_shape=(1, 12, 12, 64)))  # 8 groups but 64 rows: the general kernel
    assert many.kernel == "qc_dsp_conv_3px_s8x2_packed"
    wide_c = _choice(_conv("CONV2D", w=w, bias=np.arange(6) * 100, shifts=(62,), **px))  # |zp2p1| << 30 >= 2^30
    assert wide_c.kernel == "qc_dsp_conv_3px_s8x2_double_n_g4" and set(wide_c.arrays) == {"weights", "rq", "base"}
    single = _choice(_conv("CONV2D", w=w, bias=np.arange(6) * 100, rounding="single_round", **px))
    assert single.kernel == "qc_dsp_conv_3px_s8x2_single_g4" and set(single.arrays) == {"weights", "rq", "base"}
    big = _choice(_conv("CONV2D", w=_w(rng, 6, 1, 1, 16), bias=np.full(6, 1 << 30), shifts=(40,), **px))
    assert big.kernel == "qc_dsp_conv_3px_s8x2_double_g4" and big.arrays["rq"].values.tolist() == [1 << 30, 40 - 33]
    fast = _choice(_conv("CONV2D", w=_w(rng, 6, 1, 1, 16), bias=np.zeros(6), izp=0, **px), layout="fast")
    assert fast.kernel == "qc_dsp_conv_3px_q15x2_packed_g4" and fast.unread == {1, 2} and not fast.params.double_inputs
    odd = _choice(_conv("CONV2D", w=_w(rng, 5, 1, 1, 16), bias=np.zeros(5), x_shape=(1, 2, 3, 16),
                        y_shape=(1, 2, 3, 5)))
    assert (odd.form, odd.kernel, odd.unread) == ("dot_2x2", "qc_dsp_dot_2x2_s8x2", frozenset())  # last row: int8
    assert odd.requantize == RequantStore("qc_dsp_sat8_s33", 7, 1)
    wide = _choice(_conv("CONV2D", w=_w(rng, 6, 1, 1, 16), bias=np.zeros(6), y_dtype="i16", **px))
    assert wide.form == "dot_2x2" and wide.requantize.fn == "qc_dsp_sat16_s33"
    low_shift = _choice(_conv("CONV2D", w=_w(rng, 6, 1, 1, 16), bias=np.zeros(6), shifts=(30,), **px))
    assert low_shift.form == "dot_2x2" and low_shift.requantize is None  # SMLAL is exact for shifts >= 33 only
    one = dict(x_shape=(1, 1, 1, 16), y_shape=(1, 1, 1, 8))
    assert _choice(_conv("CONV2D", w=_w(rng, 8, 1, 1, 16), bias=np.zeros(8), **one)).kernel == "qc_dsp_dot_4rows_s8x4"
    assert _choice(_conv("CONV2D", w=_w(rng, 8, 1, 1, 16), bias=np.zeros(8), **one), layout="fast").unread == {1}
    rows5 = _choice(_conv("CONV2D", w=_w(rng, 5, 1, 1, 16), bias=np.zeros(5), x_shape=(1, 1, 1, 16),
                          y_shape=(1, 1, 1, 5)), layout="fast")
    assert rows5.kernel == "qc_dsp_dot_4rows_q15" and rows5.unread == frozenset()  # the fifth row: int8
    wzp = _choice(_conv("CONV2D", w=_w(rng, 6, 1, 1, 16), bias=np.zeros(6), wzp=3, **px))
    assert wzp.kernel == "c:conv2d" and "weight zero point" in wzp.reason
    huge = _choice(_conv("CONV2D", w=_w(rng, 2, 3, 3, 460, lo=-1, hi=2), bias=np.zeros(2), x_shape=(1, 3, 3, 460),
                         y_shape=(1, 1, 1, 2), y_dtype="i32", izp=0))  # a gathered window of 4140 elements
    assert huge.kernel == "c:conv2d" and "tap by tap" in huge.reason
    direct = _choice(_conv("CONV2D", w=_w(rng, 2, 1, 1, 4140, lo=-1, hi=2), bias=np.zeros(2),
                           x_shape=(1, 1, 1, 4140), y_shape=(1, 1, 1, 2), y_dtype="i32", izp=0))  # read in place
    assert direct.kernel == "qc_dsp_dot_4rows_s8" and direct.unread == frozenset()


def test_depthwise_choices():
    rng = np.random.default_rng(1)
    dw = dict(x_shape=(1, 5, 5, 16), y_shape=(1, 3, 3, 16), w=_w(rng, 3, 3, 16, 1), bias=np.arange(16))
    c = _choice(_conv("DEPTHWISE_CONV2D", **dw))
    assert (c.kernel, c.form, c.unread) == ("qc_dsp_dw_s8_double_n_c4", "dw_table", {1, 2})
    assert set(c.arrays) == {"q", "rq", "taps", "columns"} and c.arrays["taps"].ctype == "uintptr_t"
    assert c.arrays["taps"].values.tolist() == [(ky * 5 + kx) * 16 for ky in range(3) for kx in range(3)]
    # 3x3, stride 1: pixels in pairs (the first two of each row of 3 over their 12 columns, the third alone)
    assert c.params.pair == "qc_dsp_dw_s8_double_n_pair" and c.params.pair_run == (0, 2)
    assert c.arrays["columns"].values.tolist() == [(ky * 5 + j) * 16 for ky in range(3) for j in range(4)]
    padded = _choice(_conv("DEPTHWISE_CONV2D", **dict(dw, x_shape=(1, 3, 5, 16), y_shape=(1, 1, 5, 16),
                                                      pad=[0, 0, 1, 1])))  # (one row: the planes do not pay)
    assert padded.params.pair_run == (2, 4) and set(padded.arrays) == {"q", "rq", "columns"}  # 0, 1: over tables
    strided = _choice(_conv("DEPTHWISE_CONV2D", **dict(dw, y_shape=(1, 2, 2, 16), stride=[2, 2])))
    assert strided.params.pair == "" and "columns" not in strided.arrays
    tail = _choice(_conv("DEPTHWISE_CONV2D", x_shape=(1, 5, 5, 19), y_shape=(1, 3, 3, 19), w=_w(rng, 3, 3, 19, 1),
                         bias=np.arange(19)))
    assert tail.kernel == "qc_dsp_dw_s8_double_n" and tail.unread == {2}  # the last 3 channels: int8 weights
    acc = _choice(_conv("DEPTHWISE_CONV2D", y_dtype="i32", **dw))
    assert acc.kernel == "qc_dsp_dw_s32_c4" and acc.params.runs and "rq" not in acc.arrays
    mult2 = _choice(_conv("DEPTHWISE_CONV2D", x_shape=(1, 5, 5, 8), y_shape=(1, 3, 3, 16), w=_w(rng, 3, 3, 8, 2),
                          bias=np.arange(16)))
    assert mult2.kernel == "c:depthwise_conv2d" and mult2.requantize is not None
    big = _choice(_conv("DEPTHWISE_CONV2D", **dict(dw, bias=np.full(16, (1 << 31) - 300_000))))  # + 9 taps 2^17
    assert big.kernel == "c:depthwise_conv2d"
    widened = _choice(_conv("DEPTHWISE_CONV2D", y_dtype="i32", **dict(dw, bias=np.full(16, (1 << 31) - 1))))
    assert widened.kernel == "c:depthwise_conv2d" and "widened" in widened.reason
    # 3x3 stride 1 over wide rows: channel by channel over int16 planes where its estimate is below dw_table's
    wide = _choice(_conv("DEPTHWISE_CONV2D", x_shape=(1, 24, 24, 32), y_shape=(1, 24, 24, 32), pad=[1, 1, 1, 1],
                         w=_w(rng, 3, 3, 32, 1), bias=np.arange(32)))
    assert (wide.kernel, wide.form, wide.unread, set(wide.arrays)) == ("qc_dsp_dwr_s8_double_n", "dw_rows", {1, 2},
                                                                       {"w", "rq"})
    assert (wide.params.pw, wide.params.nb, wide.params.scratch_bytes) == (26, 11, 3896)
    assert "bands of 11 output rows, 3896 B of stack" in wide.reason
    band = _choice(_conv("DEPTHWISE_CONV2D", x_shape=(1, 3, 5, 64), y_shape=(1, 1, 5, 64), pad=[0, 0, 1, 1],
                         w=_w(rng, 3, 3, 64, 1), bias=np.arange(64)))
    assert band.form == "dw_table"  # (a band of one row of 5: the planes' estimate is not below)



def test_riscv_choices():
    """The RISC-V families from the step's fields: rv32 register blocks by pixel count (4 rows x 4 pixels with a
    tail kernel, 8 x 2, 8 x 1; weights re-laid rv32_r4 / rv32_r8, izp x the row sums), qc_rv32_scale32's modes, the
    depthwise plane; rvv dot rows with the zero-point terms made at generation time, the requantization in vector
    form only for a 32-bit scale with shifts > 31 on the double rounding, depthwise blocks stored as int32, in vector
    form or channel by channel, and more than 4096 taps portable."""
    rng = np.random.default_rng(2)
    w = _w(rng, 6, 1, 1, 16)
    rows = w.reshape(6, 16).astype(np.int64)
    conv = dict(x_shape=(1, 2, 3, 16), y_shape=(1, 2, 3, 6), w=w, bias=np.arange(6))
    c = _choice(_conv("CONV2D", **conv), "riscv32")
    assert (c.kernel, c.params.fn_tail, c.layout, c.requantize.dbl) == (
        "qc_rv32_dot_rows4x4_s8", "qc_rv32_dot_rows4x2_of4_s8", "rv32_r4", 2)  # 6 pixels; accumulators < 2^29
    assert c.arrays["weights"].values.tolist() == rv32_layouts.rv32_r4(rows).tolist()
    assert c.arrays["row_sums"].values.tolist() == rows.sum(axis=1).tolist()
    for pixels, kernel in ((2, "qc_rv32_dot_rows8x2_s8"), (1, "qc_rv32_dot_rows8x1_s8")):
        few = _choice(_conv("CONV2D", **dict(conv, x_shape=(1, 1, pixels, 16), y_shape=(1, 1, pixels, 6))), "riscv32")
        assert (few.kernel, few.layout) == (kernel, "rv32_r8")
    assert _choice(_conv("CONV2D", rounding="single_round", **conv), "riscv32").requantize.dbl == 0
    v = _choice(_conv("CONV2D", **conv), "riscv64-rvv")
    assert (v.form, v.kernel, v.params.blocked, v.params.rq.dbl, v.params.rq.bits) == (
        "dot_rows", "qc_rvv_dot_rows4_s8", 4, 1, 8)
    assert v.arrays["zero_point_terms"].values.tolist() == (-128 * rows.sum(axis=1)).tolist()
    single16 = _choice(_conv("CONV2D", rounding="single_round", izp=0, y_dtype="i16", **conv), "riscv64-rvv")
    assert (single16.params.rq.dbl, single16.params.rq.bits, set(single16.arrays)) == (0, 16, set())
    for kw in (dict(shifts=(20,)), dict(y_dtype="i32")):  # a double rounding's shift <= 31; no requantization
        assert _choice(_conv("CONV2D", **dict(conv, **kw)), "riscv64-rvv").params.rq is None
    dw = dict(x_shape=(1, 5, 5, 16), y_shape=(1, 3, 3, 16), w=_w(rng, 3, 3, 16, 1), bias=np.arange(16))
    plane = _choice(_conv("DEPTHWISE_CONV2D", **dw), "riscv32")
    assert (plane.form, plane.params.offsets) == ("dw_plane", (0, 1, 2, 5, 6, 7, 10, 11, 12))
    for kw, store in ((dict(), "vector"), (dict(y_dtype="i32"), "s32"), (dict(shifts=(20,)), "scalar")):
        block = _choice(_conv("DEPTHWISE_CONV2D", **dict(dw, **kw)), "riscv64-rvv")
        assert (block.form, block.params.store) == ("dw_blocks", store)
    big = dict(x_shape=(1, 70, 70, 16), y_shape=(1, 1, 1, 16), w=_w(rng, 70, 70, 16, 1))
    for target in ("riscv32", "riscv64-rvv"):
        assert _choice(_conv("DEPTHWISE_CONV2D", **dict(dw, **big)), target).kernel == "c:depthwise_conv2d"

def test_dsp_layouts_by_hand():
    """The layouts against their definitions (docstrings of qcodegen/kernels/cortex_m_dsp/layouts.py), element by
    element: int16 pairs (w[j] | w[j+2] << 16, w[j+1] | w[j+3] << 16), int8 words (byte j = element j)."""
    rng = np.random.default_rng(2)
    rows = rng.integers(-128, 128, (6, 11))

    def pair(a, b):
        return (a & 0xFFFF) | (b & 0xFFFF) << 16

    def word(r, g):
        return sum((int(r[4 * g + j]) & 0xFF) << (8 * j) if 4 * g + j < r.size else 0 for j in range(4))

    padded = np.pad(rows, ((0, 0), (0, 1)))
    q15x2 = [pair(padded[2 * b + r][4 * g + e], padded[2 * b + r][4 * g + e + 2])
             for b in range(3) for g in range(3) for r in range(2) for e in range(2)]
    assert layouts.dsp_q15x2(rows).view(np.uint32).tolist() == q15x2
    q15x4 = [pair(rows[r][4 * g + e], rows[r][4 * g + e + 2]) for g in range(2) for r in range(4) for e in range(2)]
    assert layouts.dsp_q15x4(rows).view(np.uint32).tolist() == q15x4  # one block of 4 rows; 11 % 4 left out
    s8x2 = [word(rows[2 * b + r], g) for b in range(3) for g in range(3) for r in range(2)]
    assert layouts.dsp_s8x2(rows).view(np.uint32).tolist() == s8x2
    s8x4 = [word(rows[r], g) for g in range(3) for r in range(4)]
    assert layouts.dsp_s8x4(rows).view(np.uint32).tolist() == s8x4
    taps, bias, izp = rng.integers(-128, 128, (9, 6)), rng.integers(-1000, 1000, 6), -7
    base = bias - izp * taps.sum(axis=0)
    expected = [*base[:4], *[pair(taps[t][c], taps[t][c + 2]) for t in range(9) for c in (0, 1)], *base[4:]]
    assert layouts.dsp_dw_q15_base(taps, bias, izp).view(np.uint32).tolist() == [v & 0xFFFFFFFF for v in expected]
    assert layouts.row_starts(rows, np.arange(6), 5).tolist() == (np.arange(6) - 5 * rows.sum(axis=1)).tolist()


def _compile(target, source: Path, *flags: str) -> Path:
    return compile_cached([source], [*target.cc.split(), *target.cflags, *flags, "-c"], ".o")


LAYOUTS = [(t.name, layout) for t in list_targets() for layout in layouts_of(t)]


@pytest.mark.parametrize("target, layout", LAYOUTS, ids=[f"{t}-{lay}" for t, lay in LAYOUTS])
def test_report_bytes_are_the_written_arrays(target, layout, tmp_path, capsys):
    """`compile`'s report (and `inspect -t`): weights_bytes is the bytes of the arrays of `<name>_weights.c` as the
    target's compiler lays them out (one section per array), every array counted once, and the model's code reads
    every one of them."""
    tgt = load_target(target, layout)
    size, nm = binutil(tgt, "size"), binutil(tgt, "nm")
    missing = [t for t in (tgt.cc.split()[0], size, nm) if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{target}: missing {', '.join(missing)}")
    out = tmp_path / "out"
    assert main(["compile", str(KWS), "-t", target, "--weight-layout", layout, "-o", str(out)]) == 0
    capsys.readouterr()
    report = json.loads((out / "kws_like_report.json").read_text())
    weights = _compile(tgt, out / "kws_like_weights.c", "-fdata-sections")
    sections = subprocess.run([size, "-A", str(weights)], capture_output=True, text=True, check=True).stdout
    emitted = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\.s?rodata\.(\w+)\s+(\d+)", sections, re.M)}
    assert report["weights_bytes"] == sum(emitted.values()) and report["weights_arrays"] == len(emitted)
    assert main(["inspect", str(KWS), "-t", target, "--weight-layout", layout, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weights_bytes"] == report["weights_bytes"]
    undefined = subprocess.run([nm, "-u", str(_compile(tgt, out / "kws_like.c"))], capture_output=True, text=True,
                               check=True).stdout
    assert set(emitted) <= set(re.findall(r"\bU (\w+)", undefined))


def test_two_models_in_one_folder_share_the_kernel_files(tmp_path):
    """Two models generated into one folder for Cortex-M4: one copy of each runtime file, model-independent."""
    target = load_target("cortex-m4")
    files = {}
    for example in ("kws_like", "mobilenet_like"):
        model = generate(plan(load_model(ROOT / "examples" / f"{example}.json")), tmp_path, target)
        files[example] = {p.name for p in model.files if p.name.startswith("qc_cm_")}
    assert files["kws_like"] == files["mobilenet_like"] == {"qc_cm_rq.h", "qc_cm_dsp.h", "qc_cm_dsp_conv.h",
                                                          "qc_cm_dsp.c", "qc_cm_copy.h", "qc_cm_copy.c"}
    for name in files["kws_like"]:
        assert (tmp_path / name).read_bytes() == (ROOT / "runtime" / "cortex-m" / name).read_bytes()

