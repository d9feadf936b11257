"""Per-ISA overrides of the convolution dot products (templates/<isa>/_dot.c.j2, hooks in
templates/generic/_dot.c.j2): on every target that has one and whose tools exist here, CONV2D stays bit-exact
with the reference for awkward row lengths (vector main loops, 8-element and scalar tails, tail
predication), for the blocked rows and the remainder rows of the output channels, with extreme values
(-128 * -128 products summed over 1000 taps) and non-zero input zero points (the weight-row correction).
Requantizing stores of FUSED_CONV (vector TOSA apply_scale_32 where the target has one, qc_scale32x<lanes>): extreme
multipliers and shifts (21..62), negative accumulators, output zero points and clamps, both roundings."""

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qcodegen.codegen import generate, list_targets, load_target
from qcodegen.codegen.targets import Target
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import CONST, INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.kernels import KernelChoice, layouts_of, plan_kernels
from qcodegen.plan.fuse import execution_order, fuse_conv_rescale, fuse_elementwise
from qcodegen.testing import Const, Var, prepare, step_schedule, verify_planned
from qcodegen.verify.runners import unavailable

SIMD = [(t.name, layout) for t in list_targets() if any((d / "_dot.c.j2").is_file() for d in t.template_dirs()[:-1])
        for layout in layouts_of(t)]
LENGTHS = {1: 0, 3: -128, 15: 127, 16: 0, 17: -5, 33: 127, 1000: -128}  # row length: input zero point
OC = 5  # four blocked rows (or two pairs) and a remainder row
# the rows kernel (qc_dot_rows_s8 or a target's variant; Cortex-M DSP: qc_dsp_dot_4rows_*, or pixels in pairs or
# triples, inputs widened first; AArch64: qc_neon_conv_*)
_ROWS = re.compile(r"qc_\w*dot_\w*rows\w*\(xp|qc_dsp_widen\w*\(xp|qc_neon_conv\w*\(&qc_cv, (qc_x0, )?xp")


@pytest.fixture(params=SIMD, ids=lambda p: p[0] if p[1] == "compact" else f"{p[0]}-{p[1]}")
def target(request) -> Target:
    tgt = load_target(*request.param)
    reason = unavailable(tgt)
    if reason:
        pytest.skip(f"{tgt.name}: {reason}")
    return tgt


def _weights(oc: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Row 0 all -128, row 1 all 127, the others random over the whole int8 range."""
    w = rng.integers(-128, 128, (oc, k))
    w[0], w[1] = -128, 127
    return w


def _conv(x_shape, w: np.ndarray, out_shape, izp: int, wzp: int = 0, op: str = "CONV2D", **attrs) -> Schedule:
    attrs = dict(dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1]), **attrs)
    bias = Const(np.arange(out_shape[-1]) * 37 - 70, "i32")
    return step_schedule(op, [Var(x_shape, "i8"), Const(w, "i8"), bias], [(out_shape, "i32")], input_zp=izp,
                         weight_zp=wzp, acc_type="i32", **attrs)


def _generated(sched: Schedule, target: Target, tmp_path: Path) -> str:
    prepare(sched)
    generate(sched, tmp_path, target)
    return (tmp_path / "t.c").read_text()


def _check(sched: Schedule, target: Target, extremes: list[np.ndarray]) -> None:
    rng = np.random.default_rng(3)
    shape = sched.buffers[sched.inputs[0]].shape
    samples = [[rng.integers(-128, 128, shape).astype(np.int8)]] + [[e.astype(np.int8)] for e in extremes]
    result = verify_planned(sched, target=target, inputs=samples)
    assert result.bit_exact, f"{target.name}: {result.mismatches} mismatches, first {result.first_mismatch}"


@pytest.mark.parametrize("k", list(LENGTHS))
def test_pointwise_row_lengths(target, k, tmp_path):
    """1x1 convolution over 3 pixels read in place (unaligned rows), k input channels."""
    w = _weights(OC, k, np.random.default_rng(k)).reshape(OC, 1, 1, k)
    sched = _conv((1, 1, 3, k), w, (1, 1, 3, OC), izp=LENGTHS[k])
    assert _ROWS.search(_generated(sched, target, tmp_path))
    _check(sched, target, [np.full((1, 1, 3, k), -128), np.full((1, 1, 3, k), 127)])


def test_padded_window_gathered(target, tmp_path):
    """3x3 window with padding, stride and dilation, gathered into the stack buffer: K = 3 * 3 * 7 = 63."""
    w = _weights(6, 63, np.random.default_rng(9)).reshape(6, 3, 3, 7)
    sched = _conv((1, 6, 5, 7), w, (1, 3, 2, 6), izp=-128, pad=[1, 0, 2, 0], stride=[2, 2], dilation=[1, 2],
                  pad_value=-128)
    assert _ROWS.search(_generated(sched, target, tmp_path))
    _check(sched, target, [np.full((1, 6, 5, 7), -128), np.full((1, 6, 5, 7), 127)])


def test_gathered_window_pixel_pairs(target, tmp_path):
    """3x3 padded window gathered into xp, K = 3 * 3 * 8 (a multiple of 4: Cortex-M DSP takes the pixels in pairs),
    an odd pixel count (5 x 3) and odd row count, a non-zero input zero point."""
    w = _weights(OC, 72, np.random.default_rng(11)).reshape(OC, 3, 3, 8)
    sched = _conv((1, 5, 3, 8), w, (1, 5, 3, OC), izp=-3, pad=[1, 1, 1, 1], pad_value=-3)
    assert _ROWS.search(_generated(sched, target, tmp_path))
    rng = np.random.default_rng(12)
    _check(sched, target, [np.full((1, 5, 3, 8), -128), rng.integers(-128, 128, (1, 5, 3, 8))])


def test_single_pixel_rows(target, tmp_path):
    """One output pixel (FULLY_CONNECTED-shaped), k a multiple of 4, row counts a multiple of 4 (Cortex-M DSP: the
    rows read as re-laid words, 4 per call) or not (4 rows per call and a remainder), non-zero input zero points,
    and a fused requantize."""
    for k, oc in ((16, 8), (1000, OC)):
        w = _weights(oc, k, np.random.default_rng(k)).reshape(oc, 1, 1, k)
        sched = _conv((1, 1, 1, k), w, (1, 1, 1, oc), izp=-128 if k == 1000 else 7)
        assert _ROWS.search(_generated(sched, target, tmp_path))
        _check(sched, target, [np.full((1, 1, 1, k), -128), np.full((1, 1, 1, k), 127)])
    scales = [SCALES[i % len(SCALES)] for i in range(24)]
    scales = [sc if sc[1] > 31 else (sc[0], 40) for sc in scales]
    bias = _big_bias(scales, 24, np.random.default_rng(3), 40)
    _check_requantized(_conv_rescale(24, "double_round", scales, bias, -128, (-128, 127), k=40, pixels=1), target,
                       tmp_path)


def test_weight_zero_point_uses_generic_loops(target, tmp_path):
    """A non-zero weight zero point is not handled by the overrides: the portable loops run instead."""
    w = _weights(OC, 17, np.random.default_rng(4)).reshape(OC, 1, 1, 17)
    sched = _conv((1, 2, 2, 17), w, (1, 2, 2, OC), izp=3, wzp=-7)
    c = _generated(sched, target, tmp_path)
    assert not _ROWS.search(c) and not re.search(r"qc_\w*dot_s8\(xp", c)
    _check(sched, target, [np.full((1, 2, 2, 17), -128)])


@pytest.mark.parametrize("m", [1, 2])
def test_depthwise_taps(target, m, tmp_path):
    """DEPTHWISE_CONV2D over 19 channels (vector main loop and predicated or scalar tail), clipped windows;
    the override (where the target has one: per tap, or the whole step) takes multiplier 1, the portable loops
    the others."""
    w = _weights(3 * 3, 19 * m, np.random.default_rng(m)).reshape(3, 3, 19, m)
    sched = _conv((1, 5, 4, 19), w, (1, 5, 4, 19 * m), izp=-128, op="DEPTHWISE_CONV2D", pad=[1, 1, 1, 1])
    c = _generated(sched, target, tmp_path)
    hooked = "qc_mla_s8(acc" in c or "/* depthwise kernel: " in c  # per-tap hook, or the `depthwise` hook
    assert hooked == (m == 1 and ("void qc_mla_s8(" in c or "/* depthwise kernel: " in c))
    _check(sched, target, [np.full((1, 5, 4, 19), -128), np.full((1, 5, 4, 19), 127)])


# (multiplier, shift) pairs: |acc| < 2^20 here (TOSA requires |acc| < 2^(shift-1) for shifts <= 31), and each
# keeps acc * m / 2^s inside int32
SCALES = [((1 << 31) - 1, 21), (1, 21), (1 << 30, 24), (1 << 30, 31), ((1 << 31) - 1, 32), (1 << 30, 33),
          (1518500250, 40), ((1 << 31) - 1, 48), ((1 << 31) - 1, 62), (123456789, 36), (1, 30), (1 << 30, 41),
          (1518500250, 42), ((1 << 31) - 1, 43)]


def _conv_rescale(oc: int, rounding: str, scales: list[tuple[int, int]], bias: np.ndarray, out_zp: int,
                  out_range: tuple[int, int], k: int = 17, pixels: int = 3, w: np.ndarray | None = None) -> Schedule:
    """1x1 CONV2D (izp -128, k input channels, oc output channels; weights w or _weights) + RESCALE to i8, fused
    into FUSED_CONV."""
    sched = Schedule("t")
    sched.add_buffer(Buffer("x", (1, 1, pixels, k), dtype("i8"), INPUT))
    sched.inputs.append("x")
    w = (_weights(oc, k, np.random.default_rng(k * oc)) if w is None else w).reshape(oc, 1, 1, k).astype(np.int8)
    sched.add_buffer(Buffer("w", w.shape, dtype("i8"), CONST, w))
    sched.add_buffer(Buffer("b", bias.shape, dtype("i32"), CONST, bias.astype(np.int32)))
    sched.add_buffer(Buffer("acc", (1, 1, pixels, oc), dtype("i32"), TEMP))
    sched.add_buffer(Buffer("y", (1, 1, pixels, oc), dtype("i8"), OUTPUT))
    sched.outputs = ["y"]
    conv = dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=-128, weight_zp=0, acc_type="i32")
    rescale = dict(multiplier=[m for m, _ in scales], shift=[s for _, s in scales], input_zp=0, output_zp=out_zp,
                   scale32=True, rounding=rounding, per_channel=len(scales) > 1, out_min=out_range[0],
                   out_max=out_range[1])
    sched.steps = [Step("CONV2D", ["x", "w", "b"], ["acc"], conv, "conv"),
                   Step("RESCALE", ["acc"], ["y"], rescale, "rescale")]
    fuse_conv_rescale(sched)
    return sched


def _fused(op: str, x_shape, w: np.ndarray, bias: np.ndarray, y_shape, conv: dict, rescale: dict) -> Schedule:
    """op (x int8 of x_shape, constant weights w and i32 bias) + RESCALE to int8 y_shape, fused into FUSED_CONV."""
    sched = Schedule("t")
    for name, shape, dt, kind, values in [("x", x_shape, "i8", INPUT, None), ("w", w.shape, "i8", CONST, w),
                                          ("b", bias.shape, "i32", CONST, bias), ("acc", y_shape, "i32", TEMP, None),
                                          ("y", y_shape, "i8", OUTPUT, None)]:
        sched.add_buffer(Buffer(name, shape, dtype(dt), kind, values))
    sched.inputs, sched.outputs = ["x"], ["y"]
    sched.steps = [Step(op, ["x", "w", "b"], ["acc"], dict(conv, weight_zp=0, acc_type="i32"), "conv"),
                   Step("RESCALE", ["acc"], ["y"], dict(rescale, input_zp=0, scale32=True), "rs")]
    fuse_conv_rescale(sched)
    return sched


def _big_bias(scales: list[tuple[int, int]], oc: int, rng: np.random.Generator, k: int = 17) -> np.ndarray:
    """Biases near +-2^31 when every shift is > 31 (TOSA allows any value there), else within the smallest
    2^(shift-1) bound (the range analysis bounds the whole accumulator tensor), less what the 1x1 window over
    k channels can add (k * 255 * 128)."""
    bound = min((1 << 31 if s > 31 else 1 << (s - 1)) for _, s in scales) - k * 255 * 128 - (1 << 10) - 1
    assert bound > 1 << 10
    return np.where(rng.integers(0, 2, oc) == 1, bound, -bound) - rng.integers(0, 1 << 10, oc)


def _check_requantized(sched: Schedule, target: Target, tmp_path: Path) -> None:
    c = _generated(sched, target, tmp_path)
    if "qc_scale32x" in c.split("static void")[0]:  # the target has a vector requantize: the step uses it
        assert "qc_scale32x" in c.split("static void", 1)[1]
    shape = sched.buffers["x"].shape
    _check(sched, target, [np.full(shape, -128), np.full(shape, 127)])


@pytest.mark.parametrize("rounding", ["single_round", "double_round"])
@pytest.mark.parametrize("k, oc", [(17, 20), (40, 16)])
def test_requantized_store(target, rounding, k, oc, tmp_path):
    """FUSED_CONV with oc output channels (vector blocks and a scalar remainder, or blocks only), k input
    channels (17: vector and scalar tails of the dot products; 40: a multiple of 8, the re-laid weights of
    aarch64-dotprod), izp = -128 (the weight-row correction); per channel: every (multiplier, shift) of SCALES
    that the window allows (for double rounding those with shifts > 31: the branch-free form), and per tensor;
    accumulators near +-2^31 where the shift allows (even channels) or small biases (odd channels: outputs off the
    clamps for shifts around 42), output zero points at both ends and a narrow clamp."""
    window = k * 255 * 128
    table = [sc for sc in SCALES if (sc[1] > 31 or rounding == "single_round" and 1 << (sc[1] - 1) > 2 * window)]
    for scales, out_zp, out_range in [([table[i % len(table)] for i in range(oc)], -128, (-128, 127)),
                                      ([(1518500250, 42)], 127, (-100, 6))]:
        rng = np.random.default_rng(oc)
        bias = np.where(np.arange(oc) % 2 == 1, rng.integers(-256, 256, oc), _big_bias(scales, oc, rng, k))
        _check_requantized(_conv_rescale(oc, rounding, scales, bias, out_zp, out_range, k=k), target, tmp_path)


@pytest.mark.parametrize("rounding, low_shift", [("single_round", 22), ("single_round", 32), ("double_round", 32)])
def test_requantized_store_random_scales(target, rounding, low_shift, tmp_path):
    """Random per-channel scales, 27 channels x 16 pixels x 3 samples per case and target (k = 16: the re-laid
    weights of aarch64-dotprod), in two regimes that
    keep the outputs off the clamps (where rounding is visible): even channels with accumulators near the
    largest value the shifts allow, any multiplier and shifts 52 .. 62; odd channels with small weights and
    biases, multipliers in [2^30, 2^31) and shifts low_shift .. low_shift + 7 (2^30 is then a large part of the
    DOUBLE_ROUND rounding term)."""
    rng = np.random.default_rng(low_shift)
    oc, k = 27, 16
    odd = np.arange(oc) % 2 == 1
    shifts = np.where(odd, rng.integers(low_shift, low_shift + 8, oc), rng.integers(52, 63, oc))
    mults = np.where(odd, rng.integers(1 << 30, 1 << 31, oc), rng.integers(1, 1 << 31, oc))
    scales = [(int(m), int(s)) for m, s in zip(mults, shifts, strict=True)]
    bias = np.where(odd, rng.integers(-256, 256, oc), _big_bias(scales, oc, rng, k))
    w = np.where(odd[:, None], rng.integers(-2, 3, (oc, k)), _weights(oc, k, rng))
    sched = _conv_rescale(oc, rounding, scales, bias, int(rng.integers(-128, 128)), (-128, 127), k=k, pixels=16, w=w)
    _check_requantized(sched, target, tmp_path)


def test_requantized_store_accumulators_near_2_30(target, tmp_path):
    """Double rounding with accumulators just below 2^30 in magnitude, where a kernel may double them (Cortex-M
    DSP: SMMULR of 2 * acc, chosen when |bias| + k * 2^15 < 2^30): 1x1 FUSED_CONV over 17 channels, biases
    +-(2^30 - 17 * 2^15 - 1) nearer 0 by up to 2^10, random multipliers and shifts 33..62, both int8 extremes."""
    rng = np.random.default_rng(30)
    oc, k = 20, 17
    scales = [(int(m), int(s)) for m, s in zip(rng.integers(1, 1 << 31, oc), rng.integers(33, 63, oc), strict=True)]
    scales[0] = ((1 << 31) - 1, 33)
    bound = (1 << 30) - k * (1 << 15) - 1
    bias = np.where(np.arange(oc) % 2 == 0, 1, -1) * (bound - rng.integers(0, 1 << 10, oc))
    sched = _conv_rescale(oc, "double_round", scales, bias, int(rng.integers(-128, 128)), (-128, 127), k=k, pixels=5)
    _check_requantized(sched, target, tmp_path)


@pytest.mark.parametrize("c, stride, pad_value, iw", [(27, 1, -128, 5), (27, 2, 0, 5), (40, 1, 5, 5), (8, 1, 3, 3)])
def test_depthwise_requantized_blocks(target, c, stride, pad_value, iw, tmp_path):
    """3x3 DEPTHWISE_CONV2D + RESCALE (FUSED_CONV) over c channels (27: a block of 16, then 8 and 3 more; 40: two
    blocks and a group of 8), padded on every side (border pixels through the pad row, pad values -128, 0, 5, 3),
    strides 1 and 2, izp -128, per-channel double rounding with shifts > 31 and small biases (outputs off the
    clamps); weights without -128 (the paired taps of aarch64, summed in int16) except in the first case; rows of
    5 pixels, and of 3 (one interior pixel: Cortex-M4/M7 pair the first two, the third alone)."""
    rng = np.random.default_rng(c * stride)
    ih = 7
    oh, ow = (ih - 1) // stride + 1, (iw - 1) // stride + 1
    w = rng.integers(-127, 128, (3, 3, c, 1)).astype(np.int8)
    w[0, :2] = -127  # a pair of taps at the int16 limit of paired products (2 * 128 * 127)
    if stride == 1 and pad_value == -128:
        w.flat[0] = -128  # no pairing (aarch64): taps one by one
    bias = rng.integers(-4096, 4096, c).astype(np.int32)
    conv = dict(pad=[1, 1, 1, 1], stride=[stride, stride], dilation=[1, 1], input_zp=-128, pad_value=pad_value)
    rescale = dict(multiplier=rng.integers(1 << 30, 1 << 31, c).tolist(), shift=rng.integers(38, 44, c).tolist(),
                   output_zp=int(rng.integers(-128, 128)), per_channel=True, rounding="double_round")
    sched = _fused("DEPTHWISE_CONV2D", (1, ih, iw, c), w, bias, (1, oh, ow, c), conv, rescale)
    _generated(sched, target, tmp_path)
    _check(sched, target, [np.full((1, ih, iw, c), -128), np.full((1, ih, iw, c), 127)])


@st.composite
def _fused_cases(draw):
    """Convolutions fused with their RESCALE for the blocked depthwise kernels and the requantizing stores:
    channel counts around the block widths, 3x3 (unrolled interior) and other windows, padding with zero and
    non-zero pad values, strides, dilation, input zero points, shifts on both sides of 33 (the exact 32-bit
    requantization starts there), any multiplier, large biases (negative accumulators; near +-2^31: accumulators at the
    int32 limits, past the bounds under which kernels start their sums at the bias), and output ranges with
    and without a fused ReLU bound."""
    op = draw(st.sampled_from(["CONV2D", "DEPTHWISE_CONV2D", "DEPTHWISE_CONV2D"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c = draw(st.sampled_from([1, 3, 4, 8, 19, 20, 48]))
    kh, kw = draw(st.sampled_from([(3, 3), (3, 3), (1, 1), (2, 3), (5, 4)]))
    sy, sx, dy = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.sampled_from([1, 1, 2]))
    pt, pb, pl, pr = (draw(st.integers(0, k - 1)) for k in (kh, kh, kw, kw))
    oh, ow = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    ih, iw = (oh - 1) * sy + (kh - 1) * dy + 1 - pt - pb, (ow - 1) * sx + kw - pl - pr
    if ih < 1 or iw < 1:
        ih, iw, pt, pb, pl, pr = ih + pt + pb, iw + pl + pr, 0, 0, 0, 0
    oc = draw(st.sampled_from([1, 5, 8])) if op == "CONV2D" else c
    w = rng.integers(-128, 127, (oc, kh, kw, c) if op == "CONV2D" else (kh, kw, c, 1), endpoint=True)
    w.flat[0] = -128
    bias = rng.integers(-(1 << 24), 1 << 24, oc)
    channels = draw(st.sampled_from([oc, 1]))
    lo = draw(st.sampled_from([33, 33, 28]))
    if lo == 33 and draw(st.booleans()):  # biases near +-2^31 (no bound on the accumulator for shifts > 31)
        bias = np.where(rng.integers(0, 2, oc) == 1, 1, -1) * ((1 << 31) - (1 << 24)) - rng.integers(0, 1 << 10, oc)
    shift = rng.integers(lo, 63, channels)
    multiplier = rng.integers(0, 1 << 31, channels)
    multiplier[0] = draw(st.sampled_from([0, 1, (1 << 31) - 1, 1 << 30]))
    out_range = draw(st.sampled_from([None, (-128, 127), (-128, 127), (-5, 127), (-100, 6)]))
    conv = dict(pad=[pt, pb, pl, pr], stride=[sy, sx], dilation=[dy, 1], weight_zp=0, acc_type="i32",
                input_zp=draw(st.sampled_from([0, -128, 17])), pad_value=draw(st.sampled_from([-128, 0, 3])))
    rescale = dict(multiplier=multiplier.tolist(), shift=shift.tolist(), input_zp=0,
                   output_zp=int(rng.integers(-128, 128)), scale32=True, per_channel=channels > 1,
                   rounding=draw(st.sampled_from(["double_round", "single_round"])))
    if out_range:
        rescale.update(out_min=out_range[0], out_max=out_range[1])
    sched = Schedule("t")
    for name, shape, dt, kind, values in [("x", (1, ih, iw, c), "i8", INPUT, None), ("w", w.shape, "i8", CONST, w),
                                          ("b", bias.shape, "i32", CONST, bias), ("acc", (1, oh, ow, oc), "i32", TEMP,
                                          None), ("y", (1, oh, ow, oc), "i8", OUTPUT, None)]:
        data = None if values is None else values.astype(dtype(dt).numpy)
        sched.add_buffer(Buffer(name, shape, dtype(dt), kind, data))
    sched.inputs, sched.outputs = ["x"], ["y"]
    sched.steps = [Step(op, ["x", "w", "b"], ["acc"], conv, "conv"), Step("RESCALE", ["acc"], ["y"], rescale, "rs")]
    fuse_conv_rescale(sched)
    return prepare(sched)


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sched=_fused_cases())
def test_fused_blocks_and_requantize(target, sched):
    """FUSED_CONV on the target (its `depthwise` and `requantize` hooks where it has them) == the reference,
    for random inputs and the int8 extremes."""
    assert sched.fused, "not fused"
    shape = sched.buffers[sched.inputs[0]].shape
    rng = np.random.default_rng(5)
    samples = [[rng.integers(-128, 128, shape).astype(np.int8)], [np.full(shape, -128, np.int8)],
               [np.full(shape, 127, np.int8)]]
    result = verify_planned(sched, target=target, inputs=samples)
    assert result.bit_exact, f"{target.name}: {result.mismatches} mismatches, first {result.first_mismatch}"


@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D"])
def test_int16_input_falls_back(target, op, tmp_path):
    """int16 inputs (i48 accumulators) are not handled by the overrides' kernels: the portable loops run, exactly
    (3x3 window with padding, 6 channels, int16 extremes)."""
    rng = np.random.default_rng(11)
    w = rng.integers(-128, 128, (6, 3, 3, 6) if op == "CONV2D" else (3, 3, 6, 1))
    bias = Const(rng.integers(-(1 << 36), 1 << 36, 6), "i48")
    sched = step_schedule(op, [Var((1, 4, 5, 6), "i16"), Const(w, "i8"), bias], [((1, 4, 5, 6), "i48")],
                          input_zp=0, weight_zp=0, acc_type="i48", pad=[1, 1, 1, 1], stride=[1, 1], dilation=[1, 1])
    c = _generated(sched, target, tmp_path)
    assert "/* depthwise kernel: " not in c and not _ROWS.search(c)
    samples = [[rng.integers(-32768, 32768, (1, 4, 5, 6)).astype(np.int16)], [np.full((1, 4, 5, 6), -32768, np.int16)]]
    result = verify_planned(sched, target=target, inputs=samples)
    assert result.bit_exact, f"{target.name}: {result.mismatches} mismatches, first {result.first_mismatch}"


# (multiplier, shift) of the middle RESCALEs of the elementwise chains (inputs |v| <= 2^28, TOSA REQUIRE
# |v| < 2^(shift-1) for shifts <= 31): the extremes of the exact vector forms (shifts 32 and 62, multipliers 0, 1,
# 2^31 - 1; powers of two below shift 32, shifted left or rounded right)
EW_SCALES = [(1 << 30, 32), ((1 << 31) - 1, 32), (0, 40), (1, 33), ((1 << 31) - 1, 62), (1559125387, 38),
             (1 << 30, 31), (1 << 30, 29), (1 << 29, 30), (1 << 20, 29), (1, 30), (1518500250, 44)]


@st.composite
def _elementwise_chains(draw):
    """TFLite-ADD-shaped FUSED_ELEMENTWISE chains: each i8/i16 input (zero point) rescaled to i32 by 2^30 / 2^10
    (i8) or 2^30 / 2^17 (i16) or rounded right (2^28 / 2^31, 2^30 / 2^31), then by an EW_SCALES scale (single
    or double rounding; when `fallback`, b's by a non-power-of-two scale below shift 32: the portable loop), ADD
    or SUB, an optional CLAMP, and a RESCALE to i8 (zero point, clamp) or i16; lengths around the vector width."""
    size = draw(st.sampled_from([1, 3, 4, 17, 37]))
    shape = (size,)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    steps, ins, temps = [], {}, {}

    def rs(src: str, dst: str, m: int, s: int, **attrs) -> Step:
        rescale = dict(multiplier=[m], shift=[s], input_zp=0, output_zp=0, scale32=True, per_channel=False,
                       rounding=draw(st.sampled_from(["double_round", "single_round"])))
        return Step("RESCALE", [src], [dst], dict(rescale, **attrs), "add")

    fallback = draw(st.booleans())
    for name in "ab":
        dt = draw(st.sampled_from(["i8", "i8", "i16"]))
        ins[name] = (shape, dt)
        temps.update({f"{name}1": (shape, "i32"), f"{name}2": (shape, "i32")})
        zp = int(rng.integers(-128, 128)) if dt == "i8" else 0
        m, s = draw(st.sampled_from([(1 << 30, 10 if dt == "i8" else 17), (1 << 28, 31), (1 << 30, 31)]))
        steps.append(rs(name, f"{name}1", m, s, input_zp=zp))
        m, s = (123456789, 31) if fallback and name == "b" else draw(st.sampled_from(EW_SCALES))
        steps.append(rs(f"{name}1", f"{name}2", m, s))
    op = draw(st.sampled_from(["ADD", "SUB"]))
    temps["s"] = (shape, "i32")
    steps.append(Step(op, ["a2", "b2"], ["s"], {}, "add"))
    last = "s"
    if draw(st.booleans()):
        temps["c"] = (shape, "i32")
        steps.append(Step("CLAMP", ["s"], ["c"], dict(min_val=-(1 << 26), max_val=1 << 27), "clamp"))
        last = "c"
    out = draw(st.sampled_from(["i8", "i16"]))
    ozp, (lo, hi) = (int(rng.integers(-128, 128)), draw(st.sampled_from([(-128, 127), (-5, 100)]))) if out == "i8" \
        else (0, (-32768, 32767))
    m, s = draw(st.sampled_from([(2147345509, 50), (1 << 30, 33), ((1 << 31) - 1, 62), (1 << 29, 31)]))
    steps.append(rs(last, "y", m, s, output_zp=ozp, out_min=lo, out_max=hi))
    sched = Schedule("t")
    for n, (shp, dt) in ins.items():
        sched.add_buffer(Buffer(n, shp, dtype(dt), INPUT))
        sched.inputs.append(n)
    for n, (shp, dt) in temps.items():
        sched.add_buffer(Buffer(n, shp, dtype(dt), TEMP))
    sched.add_buffer(Buffer("y", shape, dtype(out), OUTPUT))
    sched.outputs = ["y"]
    sched.steps = steps
    fuse_elementwise(sched)
    return prepare(sched), fallback


@settings(max_examples=16, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_elementwise_chains())
def test_elementwise_chains(target, case, tmp_path_factory):
    """FUSED_ELEMENTWISE on the target (its `elementwise` hook where it has one: Cortex-M55 vectorizes the exact
    chains, tail-predicated) == the reference, for random inputs and both extremes of each input type."""
    sched, fallback = case
    assert [s.op for _, s in execution_order(sched)] == ["FUSED_ELEMENTWISE"]
    c = _generated(sched, target, tmp_path_factory.mktemp("ew"))
    if target.name == "cortex-m55":
        assert ("vctp32q" in c.split("FUSED_ELEMENTWISE", 1)[1]) != fallback
    rng = np.random.default_rng(7)
    bufs = [sched.buffers[n] for n in sched.inputs]
    samples = [[rng.integers(b.dtype.min, b.dtype.max + 1, b.shape).astype(b.dtype.numpy) for b in bufs]]
    samples += [[np.full(b.shape, v(b), b.dtype.numpy) for b in bufs] for v in (lambda b: b.dtype.min,
                                                                                 lambda b: b.dtype.max)]
    samples += [[np.full(bufs[0].shape, bufs[0].dtype.min, bufs[0].dtype.numpy),
                 np.full(bufs[1].shape, bufs[1].dtype.max, bufs[1].dtype.numpy)]]
    result = verify_planned(sched, target=target, inputs=samples)
    assert result.bit_exact, f"{target.name}: {result.mismatches} mismatches, first {result.first_mismatch}"


@pytest.mark.parametrize("kh, kw, c, pad, izp", [(3, 3, 3, 1, -128), (3, 3, 3, 0, 5), (1, 1, 3, 1, -128),
                                                  (3, 3, 1, 1, 0), (2, 2, 3, 0, -128), (1, 3, 4, 1, 7),
                                                  (3, 3, 15, 1, -128)])
def test_requantized_gathered_windows(target, kh, kw, c, pad, izp, tmp_path):
    """FUSED_CONV of gathered windows whose row length K = kh * kw * c is not a multiple of 8 (27, 3, 9, 12, 135:
    aarch64-dotprod pads the window and the re-laid rows with zeros to a multiple of 8, sdot_4x4_pad8; 135: the
    Cortex-M DSP kernel's loops over 8 groups of 4 and then single groups, past its unrolled short rows), with and
    without padding taps, zero and non-zero input zero points; 28 output channels (a block of 16, one of 8 and 4
    rows one by one); extreme inputs and weight rows of -128 / 127."""
    rng = np.random.default_rng(kh * 100 + kw * 10 + c + pad)
    ih, iw, oc = 7, 5, 28  # odd and even pixel counts (aarch64-dotprod: pixels in pairs, the last one alone)
    oh, ow = ih + 2 * pad - kh + 1, iw + 2 * pad - kw + 1
    w = _weights(oc, kh * kw * c, rng).reshape(oc, kh, kw, c).astype(np.int8)
    bias = rng.integers(-4096, 4096, oc).astype(np.int32)
    conv = dict(pad=[pad] * 4, stride=[1, 1], dilation=[1, 1], input_zp=izp, pad_value=izp)
    rescale = dict(multiplier=rng.integers(1 << 30, 1 << 31, oc).tolist(), shift=rng.integers(36, 42, oc).tolist(),
                   output_zp=int(rng.integers(-128, 128)), per_channel=True, rounding="double_round")
    sched = _fused("CONV2D", (1, ih, iw, c), w, bias, (1, oh, ow, oc), conv, rescale)
    code = _generated(sched, target, tmp_path)
    if target.name == "aarch64-dotprod":
        assert "sdot_4x4_pad8" in code and ("qc_neon_conv_sdot2_s8(&qc_cv, qc_x0, xp" in code) == (kh * kw * c > 8)
    _check(sched, target, [np.full((1, ih, iw, c), -128), np.full((1, ih, iw, c), 127)])


@pytest.mark.parametrize("x_shape, out_hw, kernel, stride, pad, izp", [
    ((1, 25, 5, 20), (1, 1), (25, 5), (1, 1), (0, 0, 0, 0), -128),  # one window of 125 taps: int16 sums
    ((1, 16, 17, 3), (1, 1), (16, 17), (1, 1), (0, 0, 0, 0), 5),  # 272 taps: int32 sums
    ((1, 7, 7, 19), (4, 4), (3, 3), (2, 2), (1, 1, 1, 1), 0)])  # border windows (counts 4, 6, 9)
def test_avg_pool_channels(target, x_shape, out_hw, kernel, stride, pad, izp, tmp_path):
    """AVG_POOL2D (channels innermost where the target's _dot.c.j2 asks for it: NEON) with extreme inputs, input and
    output zero points, and clipped border windows."""
    sched = step_schedule("AVG_POOL2D", [Var(x_shape, "i8")], [((1, *out_hw, x_shape[-1]), "i8")],
                          kernel=list(kernel), stride=list(stride), pad=list(pad), input_zp=izp, output_zp=-3,
                          acc_type="i32")
    code = _generated(sched, target, tmp_path)
    if target.name.startswith("aarch64"):
        assert f"{'int16_t' if kernel[0] * kernel[1] <= 255 else 'int32_t'} sum[" in code
    _check(sched, target, [np.full(x_shape, -128), np.full(x_shape, 127)])

# Cortex-M55 (Helium) kernel paths that the tests above reach only by chance: depthwise of fewer than 16 channels
# with several pixels per vector (1 to 24 channels, padding values, both roundings, clamps; stride 2 falls back to
# one pixel per call), convolution pixels in pairs sharing each weight load (row lengths 3 to 80, odd and even
# pixel counts, per-tensor and per-channel scales, clamps), gathered windows in pairs (stride 2, padding, input zero
# points); each checks that the intended kernel path is the one generated.

@pytest.fixture
def m55():
    target = load_target("cortex-m55")
    reason = unavailable(target)
    if reason:
        pytest.skip(f"cortex-m55: {reason}")
    return target


def _choice(sched: Schedule, target: Target) -> KernelChoice:
    """The kernel the plan chose for the (prepared) schedule's last step."""
    return plan_kernels(sched, target, "t").steps[-1].choice


@pytest.mark.parametrize("c, stride, pad_value, iw, rounding, lo, shifts, zp", [
    (8, 1, -128, 9, "double_round", -128, (33, 40), 5), (4, 1, 0, 11, "single_round", -3, (33, 36), -100),
    (8, 1, 5, 10, "double_round", 0, (33, 35), 127), (2, 1, 3, 12, "double_round", -128, (33, 62), -128),
    (16, 1, 3, 6, "single_round", 10, (33, 34), 0), (8, 2, 1, 9, "double_round", -128, (33, 36), 20),
    (1, 1, 7, 23, "double_round", -128, (33, 36), 20), (24, 1, 0, 7, "double_round", -50, (33, 34), -20)])
def test_depthwise_few_channels(m55, c, stride, pad_value, iw, rounding, lo, shifts, zp, tmp_path):
    """3x3 depthwise, padded, izp -7: fewer than 16 channels at stride 1 put 16 // c pixels in one vector."""
    rng = np.random.default_rng(c * stride + iw)
    ih = 7 if stride == 2 else 6
    oh, ow = (ih - 1) // stride + 1, (iw - 1) // stride + 1
    w = rng.integers(-127, 128, (3, 3, c, 1)).astype(np.int8)
    bits = 21 if iw % 2 else 15
    bias = rng.integers(-(1 << bits), 1 << bits, c).astype(np.int32)
    conv = dict(pad=[1, 1, 1, 1], stride=[stride, stride], dilation=[1, 1], input_zp=-7, pad_value=pad_value)
    rescale = dict(multiplier=rng.integers(1 << 30, 1 << 31, c).tolist(), shift=rng.integers(*shifts, c).tolist(),
                   output_zp=zp, per_channel=True, rounding=rounding, out_min=lo, out_max=127)
    sched = _fused("DEPTHWISE_CONV2D", (1, ih, iw, c), w, bias, (1, oh, ow, c), conv, rescale)
    src = _generated(sched, m55, tmp_path)
    k = _choice(sched, m55)
    assert k.form == "dw_s8" and f"depthwise kernel: {k.kernel}" in src
    assert (k.params.copies > 1) == (c < 16 and stride == 1)
    _check(sched, m55, [np.full((1, ih, iw, c), -128), np.full((1, ih, iw, c), 127)])


@pytest.mark.parametrize("c, iw", [(8, 6), (4, 7)])
def test_depthwise_few_channels_unpadded(m55, c, iw, tmp_path):
    """3x3 depthwise without padding: rows of whole vectors of 16 // c pixels (8 channels, 4 pixels: every pixel
    goes through the several-pixels-per-vector constants, the single-pixel ones stay unused; found by hypothesis
    outside CI: an unused-variable error) or one pixel more."""
    rng = np.random.default_rng(c * iw)
    ih, oh, ow = 5, 3, iw - 2
    w = rng.integers(-127, 128, (3, 3, c, 1)).astype(np.int8)
    bias = rng.integers(-(1 << 15), 1 << 15, c).astype(np.int32)
    conv = dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=3, pad_value=3)
    rescale = dict(multiplier=rng.integers(1 << 30, 1 << 31, c).tolist(), shift=rng.integers(33, 40, c).tolist(),
                   output_zp=-5, per_channel=True, rounding="double_round")
    sched = _fused("DEPTHWISE_CONV2D", (1, ih, iw, c), w, bias, (1, oh, ow, c), conv, rescale)
    _generated(sched, m55, tmp_path)
    assert _choice(sched, m55).params.copies == 16 // c
    _check(sched, m55, [np.full((1, ih, iw, c), -128), np.full((1, ih, iw, c), 127)])


@pytest.mark.parametrize("c, kernel, shifts, rounding, lo, zp, wmin", [
    (48, 3, (33, 40), "double_round", -128, -128, -127), (32, 3, (33, 36), "single_round", -20, 3, 127),
    (40, 3, (33, 62), "double_round", 0, -128, -127), (64, 3, (33, 35), "single_round", -128, 100, -127),
    (32, 2, (33, 40), "double_round", -128, 5, -127), (16, 3, (33, 40), "double_round", -7, -1, -127),
    (32, 3, (33, 40), "double_round", -128, 0, -128)])
def test_depthwise_blocks(m55, c, kernel, shifts, rounding, lo, zp, wmin, tmp_path):
    """Depthwise with int8 outputs over whole blocks of 16 channels (one call per output row over padded input rows,
    qc_mve_dw_s8_rows): 3x3 pixels keep their 9 input pointers in registers (QC_MVE_DW_TAPS9_*), other blocks loop
    over the taps (2x2; one block of 16), a last partial block (40 channels) is predicated; clamps narrower than
    int8 and not, both roundings. Channel 0's weights all wmin: +-127 make tap pairs of 2 * 128 * 127 (the int16
    limit of qc_mve_dw_s8_*); with a -128 the int32 sums of qc_mve_dw_s32 instead."""
    rng = np.random.default_rng(c + kernel)
    ih, iw = 6, 7
    w = rng.integers(-127, 128, (kernel, kernel, c, 1)).astype(np.int8)
    w[..., 0, 0] = wmin
    bias = rng.integers(-(1 << 20), 1 << 20, c).astype(np.int32)
    conv = dict(pad=[1, 1, 1, 1], stride=[1, 1], dilation=[1, 1], input_zp=-9, pad_value=-9)
    oh, ow = ih + 3 - kernel, iw + 3 - kernel
    rescale = dict(multiplier=rng.integers(1 << 30, 1 << 31, c).tolist(), shift=rng.integers(*shifts, c).tolist(),
                   output_zp=zp, per_channel=True, rounding=rounding, out_min=lo, out_max=127 if lo == -128 else 90)
    sched = _fused("DEPTHWISE_CONV2D", (1, ih, iw, c), w, bias, (1, oh, ow, c), conv, rescale)
    src = _generated(sched, m55, tmp_path)
    k = _choice(sched, m55)
    if wmin == -128:
        assert k.form == "dw_s32"
    else:
        assert k.form == "dw_s8" and k.kernel.endswith("_clamp") == (lo != -128)
        assert k.params.geometry and f"qc_mve_dw_s8_rows({k.kernel}, &qc_dw" in src  # one call per output row
    _check(sched, m55, [np.full((1, ih, iw, c), -128), np.full((1, ih, iw, c), 127)])


def test_depthwise_border_pixels(m55, tmp_path):
    """Depthwise where copying the input rows costs more than the pixels reading padding (stride 2, padding after
    the input's right only: one per row): a call per row's run of interior pixels and one per border pixel over a
    table of its taps (qc_padrow outside the input), 2 blocks of 16 channels, extreme inputs."""
    rng = np.random.default_rng(2)
    c, ih, iw = 32, 9, 24
    w = rng.integers(-127, 128, (3, 3, c, 1)).astype(np.int8)
    bias = rng.integers(-(1 << 20), 1 << 20, c).astype(np.int32)
    conv = dict(pad=[0, 0, 0, 1], stride=[2, 2], dilation=[1, 1], input_zp=-9, pad_value=-9)
    rescale = dict(multiplier=rng.integers(1 << 30, 1 << 31, c).tolist(), shift=rng.integers(33, 40, c).tolist(),
                   output_zp=3, per_channel=True, rounding="double_round")
    sched = _fused("DEPTHWISE_CONV2D", (1, ih, iw, c), w, bias, (1, 4, 12, c), conv, rescale)
    src = _generated(sched, m55, tmp_path)
    k = _choice(sched, m55)
    assert k.form == "dw_s8" and not k.params.geometry and "qc_padrow" in src
    _check(sched, m55, [np.full((1, ih, iw, c), -128), np.full((1, ih, iw, c), 127)])


@pytest.mark.parametrize("k, pixels, oc, per_channel, rounding, out_range", [
    (8, 5, 16, True, "double_round", (-128, 127)), (3, 4, 6, False, "single_round", (-20, 100)),
    (32, 7, 9, True, "single_round", (0, 127)), (17, 2, 4, True, "double_round", (-128, 127)),
    (16, 3, 8, False, "double_round", (-128, 50)), (64, 5, 8, True, "double_round", (-128, 127)),
    (80, 4, 13, False, "single_round", (-5, 127)), (50, 3, 8, True, "double_round", (-128, 127)),
    (40, 3, 8, True, "double_round", (-128, 127)), (135, 3, 8, True, "double_round", (-128, 127)),
    (264, 3, 4, False, "single_round", (-128, 127)), (128, 2, 8, True, "double_round", (-128, 127))])
def test_pixel_pairs(m55, k, pixels, oc, per_channel, rounding, out_range, tmp_path):
    """1x1 FUSED_CONV with k input channels: every pixel pair by one qc_mve_conv_run_* call (asm per block of 4
    channels; chunks unrolled up to 8, then by 4 in a loop: k 135, 264; partial last chunks), odd pixel counts (the
    last one by the one-pixel kernel), leftover rows (oc % 4); biases near the accumulator's limits for short rows."""
    rng = np.random.default_rng(k * 7 + pixels)
    n = oc if per_channel else 1
    scales = [(int(m), int(s)) for m, s in zip(rng.integers(1, 1 << 31, n), rng.integers(33, 40, n), strict=True)]
    bias = _big_bias(scales, oc, rng, k) if k < 20 else rng.integers(-(1 << 20), 1 << 20, oc)
    sched = _conv_rescale(oc, rounding, scales, bias, int(rng.integers(-128, 128)), out_range, k=k, pixels=pixels)
    _check_requantized(sched, m55, tmp_path)
    k = _choice(sched, m55)
    assert k.form == "conv_px" and k.params.pairs == k.params.run == (pixels >= 2)
    assert f"{k.kernel}(&qc_pw" in (tmp_path / "t.c").read_text()


@pytest.mark.parametrize("c, oc, hw, izp", [(3, 8, (5, 6), -128), (3, 5, (4, 3), 7), (2, 12, (3, 3), 0),
                                            (6, 8, (5, 5), 3)])
def test_gathered_window_pairs(m55, c, oc, hw, izp, tmp_path):
    """3x3 stride-2 CONV2D with padding: window rows of at most 16 inputs by qc_mve_conv_rows_* (the input rows
    copied with their padding, a pair's windows gathered from there; odd output widths: a row's last pixel alone),
    longer ones (6 channels: 18) gathered per pixel into a pair's two slots (the `window` hook)."""
    rng = np.random.default_rng(c * oc)
    w = rng.integers(-128, 128, (oc, 3, 3, c)).astype(np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    oh, ow = (hw[0] + 1) // 2, (hw[1] + 1) // 2
    conv = dict(pad=[1, (oh - 1) * 2 + 2 - hw[0], 1, (ow - 1) * 2 + 2 - hw[1]], stride=[2, 2], dilation=[1, 1],
                input_zp=izp)
    rescale = dict(multiplier=rng.integers(1 << 30, 1 << 31, oc).tolist(), shift=rng.integers(33, 38, oc).tolist(),
                   output_zp=int(rng.integers(-128, 128)), per_channel=True, rounding="double_round")
    sched = _fused("CONV2D", (1, *hw, c), w, bias, (1, oh, ow, oc), conv, rescale)
    src = _generated(sched, m55, tmp_path)
    k = _choice(sched, m55)
    if 3 * c <= 16:
        assert k.params.geometry and f"{k.kernel}(&qc_pw, &qc_geo" in src
    else:
        assert not k.params.geometry and "qc_win[p & 1]" in src
    _check(sched, m55, [np.full((1, *hw, c), -128), np.full((1, *hw, c), 127)])
