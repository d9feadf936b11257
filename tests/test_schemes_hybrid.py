"""Hybrid weight-only ops (docs/schemes.md): StableHLO dot_general / convolution with a float lhs and quantized
constant weights -> HYBRID_CONV2D, weight-only (float kernel, weights dequantized in the loop) or dynamic-range (lhs
quantized per window at run time, int32 dot). Generated C == numpy reference bit for bit (float32 bit equality);
the error against the float definition op(lhs, dequantize(rhs)) stays within the bounds of
qcodegen/verify/hybrid_accuracy.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.cli import main
from qcodegen.compiler import plan
from qcodegen.errors import GraphError, PlanError, UnsupportedError
from qcodegen.frontends import load_model
from qcodegen.ir.schedule import Schedule
from qcodegen.reference import run_reference
from qcodegen.report import inspect_dict
from qcodegen.testing import (
    Const,
    Var,
    assert_bit_exact,
    assert_clang_sanitized,
    prepare,
    step_schedule,
    verify_planned,
)
from qcodegen.verify.check import random_inputs
from qcodegen.verify.hybrid_accuracy import error_bound, exact, measure

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
from make_scheme_examples import hybrid_conv, hybrid_dense, sub_channel  # noqa: E402

MODES = ("weight-only", "dynamic-range")


def _conv(x_shape, w: np.ndarray, wdt: str, out_shape, mode: str, scale, zero_point=0, pad=(0, 0, 0, 0),
          stride=(1, 1), dilation=(1, 1)) -> Schedule:
    return step_schedule("HYBRID_CONV2D", [Var(tuple(x_shape), "f32"), Const(w, wdt)], [(tuple(out_shape), "f32")],
                         pad=list(pad), stride=list(stride), dilation=list(dilation), scale=np.asarray(scale).tolist(),
                         zero_point=np.asarray(zero_point).tolist(), mode=mode)


# ---- the primitive: hand-computed examples --------------------------------------------------------------------


def test_weight_only_hand_computed() -> None:
    x = np.array([1.5, -2, 0.25, 4], np.float32).reshape(1, 1, 1, 4)
    w = np.array([[2, -1, 4, 3], [1, 1, -8, 0]]).reshape(2, 1, 1, 4)
    # two blocks of two channels; channel 1 has zero point 1 in both blocks
    sched = _conv(x.shape, w, "i8", (1, 1, 1, 2), "weight-only", [[0.5, 1.0], [0.25, 2.0]], [[0, 1], [0, 1]])
    # oc 0: (1.5*2 + -2*-1) * 0.5 + (0.25*4 + 4*3) * 0.25 = 2.5 + 3.25; oc 1: 0 * 1 + (0.25*-9 + 4*-1) * 2
    assert run_reference(prepare(sched), [x])["out0"].reshape(-1).tolist() == [5.75, -12.5]
    assert_bit_exact(sched, inputs=[[x]])


def test_dynamic_range_hand_computed() -> None:
    x = np.array([0.5, -1.0, 0.25, 0.0], np.float32).reshape(1, 1, 1, 4)
    w = np.array([1, 2, 3, 4]).reshape(1, 1, 1, 4)
    sched = _conv(x.shape, w, "i8", (1, 1, 1, 1), "dynamic-range", [[0.5]])
    # range 1: q = round_half_away(x * 127) = [64 (63.5), -127, 32 (31.75), 0]; acc = 64 - 254 + 96 = -94
    want = np.float32(-94) * (np.float32(1) / np.float32(127) * np.float32(0.5))
    got = run_reference(prepare(sched), [x])["out0"].reshape(-1)
    assert got.view(np.uint32).tolist() == [want.view(np.uint32)]
    zero = np.zeros_like(x)  # range 0: all q = 0 and scale 0, the result +0.0
    assert run_reference(sched, [zero])["out0"].reshape(-1).view(np.uint32).tolist() == [0]
    assert_bit_exact(sched, inputs=[[x], [zero]])


def test_padding_taps_read_zero() -> None:
    x = np.array([3.0], np.float32).reshape(1, 1, 1, 1)
    w = np.arange(1, 10).reshape(1, 3, 3, 1)
    for mode in MODES:
        sched = _conv(x.shape, w, "i8", (1, 1, 1, 1), mode, [[0.125]], pad=(1, 1, 1, 1))
        # only the centre tap (w = 5) is inside: 3 * 5 * 0.125 (dynamic: q = 127, acc 635, 635 * (3/127 * 0.125))
        got = float(run_reference(prepare(sched), [x])["out0"].reshape(-1)[0])
        assert got == pytest.approx(1.875, rel=1e-6)
        assert_bit_exact(sched, inputs=[[x]])


# ---- the primitive: properties -----------------------------------------------------------------------------------


@st.composite
def hybrid_cases(draw: st.DrawFn) -> tuple[Schedule, np.random.Generator]:
    n, h, wd = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    blocks, bs, o = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride, dil = [draw(st.integers(1, 2)) for _ in range(2)], [draw(st.integers(1, 2)) for _ in range(2)]
    pad, out = [], []
    for size, k, s, d in ((h, kh, stride[0], dil[0]), (wd, kw, stride[1], dil[1])):
        lo, hi = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        span = size - 1 + lo + hi - (k - 1) * d
        if span < 0:  # grow the padding until the window fits, then to an exact output size
            hi += -span
            span = 0
        hi += (-span) % s
        pad += [lo, hi]
        out.append((size - 1 + lo + hi - (k - 1) * d) // s + 1)
    wdt = draw(st.sampled_from(["i8", "i4"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lo, hi = (-8, 7) if wdt == "i4" else (-128, 127)
    c = blocks * bs
    w = rng.integers(lo, hi + 1, (o, kh, kw, c))
    scale = rng.uniform(0.001, 0.5, (blocks, o)).astype(np.float32)
    zp = rng.integers(lo // 2, hi // 2 + 1, (blocks, o)) if draw(st.booleans()) else 0
    sched = _conv((n, h, wd, c), w, wdt, (n, *out, o), draw(st.sampled_from(MODES)), scale, zp,
                  pad=(pad[0], pad[1], pad[2], pad[3]), stride=stride, dilation=dil)
    return sched, rng


@given(hybrid_cases())
def test_hybrid_conv2d_bit_exact(case: tuple[Schedule, np.random.Generator]) -> None:
    """C == reference bit for bit: both modes, i8 / i4, per-tensor, per-channel and blockwise scales, zero points,
    padding, stride, dilation; inputs normal(0, 1) with a few exact zeros and large values."""
    sched, rng = case
    x = rng.normal(0, 1, (2, *sched.buffers["in0"].shape)).astype(np.float32)
    x[0].reshape(-1)[::3] = 0.0
    x[1].reshape(-1)[::5] *= 1e4
    assert_bit_exact(sched, inputs=[[v] for v in x])


@given(hybrid_cases())
def test_error_within_the_stated_bound(case: tuple[Schedule, np.random.Generator]) -> None:
    sched, rng = case
    prepare(sched)
    io = sched.io(sched.steps[0])
    x = rng.normal(0, 1, sched.buffers["in0"].shape).astype(np.float32)
    y = run_reference(sched, [x])["out0"].astype(np.float64).reshape(-1, io.outs[0].shape[-1])
    assert np.all(np.abs(y - exact(io, x)) <= error_bound(io, x))


def test_sanitized_clang_build() -> None:
    """The harness built by clang with ASan/UBSan (-Werror): padded, strided, blockwise i4 with zero points."""
    rng = np.random.default_rng(9)
    w = rng.integers(-8, 8, (3, 3, 3, 4))
    for mode in MODES:
        assert_clang_sanitized(_conv((1, 5, 5, 4), w, "i4", (1, 3, 3, 3), mode, rng.uniform(0.1, 1, (2, 3)),
                                     rng.integers(-3, 3, (2, 3)), pad=(1, 1, 1, 1), stride=(2, 2)))


def test_dynamic_range_accumulator_is_proved() -> None:
    """value_ranges bounds each block's int32 sum by 127 * sum |w - zp|; a window too long for int32 is refused."""
    w = np.full((2, 1, 1, 8), -128)
    sched = prepare(_conv((1, 1, 1, 8), w, "i8", (1, 1, 1, 2), "dynamic-range", [[1.0, 1.0], [1.0, 1.0]]))
    assert sched.steps[0].acc_bound == (-127 * 128 * 4, 127 * 128 * 4)  # two blocks of 4 channels
    assert prepare(_conv((1, 1, 1, 8), w, "i8", (1, 1, 1, 2), "weight-only", [[1.0, 1.0]])).steps[0].acc_bound is None
    k = 140_000  # 127 * 128 * k > 2^31 - 1
    huge = _conv((1, 1, 1, k), np.full((1, 1, 1, k), -128), "i8", (1, 1, 1, 1), "dynamic-range", [[1.0]])
    with pytest.raises(PlanError, match="overflow"):
        prepare(huge)


@pytest.mark.parametrize("attrs, message", [
    (dict(scale=[[1.0, 1.0]]), "scale must be"),  # 2 output channels for 1
    (dict(scale=[[0.0]]), "finite and > 0"),
    (dict(scale=[[1.0]], zero_point=200), "zero point"),
    (dict(scale=[[1.0]], mode="fast"), "mode"),
])
def test_check_errors(attrs: dict, message: str) -> None:
    sched = step_schedule("HYBRID_CONV2D", [Var((1, 2, 2, 4), "f32"), Const(np.ones((1, 1, 1, 4)), "i8")],
                          [((1, 2, 2, 1), "f32")], pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], **attrs)
    with pytest.raises(GraphError, match=message):
        prepare(sched)


# ---- StableHLO programs end to end -----------------------------------------------------------------------------


def _planned(tmp_path: Path, text: str, mode: str) -> Schedule:
    path = tmp_path / "model.mlir"
    path.write_text(text)
    return plan(load_model(path), hybrid=mode)


def _accuracy(sched: Schedule, samples: int = 4):
    rng = np.random.default_rng(5)
    (acc,) = measure(sched, [random_inputs(sched, rng) for _ in range(samples)])
    return acc


@pytest.mark.parametrize("mode", MODES)
def test_example_dense_blockwise_i4(tmp_path: Path, mode: str) -> None:
    sched = _planned(tmp_path, hybrid_dense(), mode)
    assert [s.op for s in sched.steps] == ["RESHAPE", "HYBRID_CONV2D", "RESHAPE"]
    step = sched.steps[1]
    assert sched.buffers[step.inputs[1]].dtype.name == "i4" and np.shape(step.attrs["scale"]) == (20, 128)
    assert inspect_dict(sched)["weights_bytes"] == 640 * 128 // 2 + 20 * 128 * 4
    assert verify_planned(sched, samples=3).bit_exact
    acc = _accuracy(sched)
    assert acc.max_error_over_bound <= 1
    assert acc.relative_error < (1e-6 if mode == "weight-only" else 2e-2)


@pytest.mark.parametrize("mode", MODES)
def test_example_conv_per_axis_i8(tmp_path: Path, mode: str) -> None:
    sched = _planned(tmp_path, hybrid_conv(), mode)
    assert [s.op for s in sched.steps] == ["HYBRID_CONV2D"]
    assert inspect_dict(sched)["weights_bytes"] == 3 * 3 * 8 * 16 + 16 * 4
    assert verify_planned(sched, samples=3).bit_exact
    acc = _accuracy(sched)
    assert acc.max_error_over_bound <= 1
    assert acc.relative_error < (1e-6 if mode == "weight-only" else 2e-2)


DOT = """func.func @main(%x: tensor<3x2x5xf32>) -> tensor<2x4x3xf32> {
  %c = stablehlo.constant dense<W> : tensor<4x5xi8>
  %w = "quant.scast"(%c) : (tensor<4x5xi8>) -> tensor<4x5xQ>
  %y = stablehlo.dot_general %w, %x, contracting_dims = [1] x [2] : (tensor<4x5xQ>, tensor<3x2x5xf32>)
    -> tensor<4x3x2xf32>
  %t = stablehlo.transpose %y, dims = [2, 0, 1] : (tensor<4x3x2xf32>) -> tensor<2x4x3xf32>
  func.return %t : tensor<2x4x3xf32>
}
"""

DOT_RHS = """func.func @main(%x: tensor<3x2x5xf32>) -> tensor<3x2x4xf32> {
  %c = stablehlo.constant dense<W> : tensor<4x5xi8>
  %w = "quant.scast"(%c) : (tensor<4x5xi8>) -> tensor<4x5xQ>
  %y = stablehlo.dot_general %x, %w, contracting_dims = [2] x [1] : (tensor<3x2x5xf32>, tensor<4x5xQ>)
    -> tensor<3x2x4xf32>
  func.return %y : tensor<3x2x4xf32>
}
"""


@pytest.mark.parametrize("mode", MODES)
def test_dot_general_per_axis_and_narrow_storage(tmp_path: Path, mode: str) -> None:
    """Contracting dim last of a rank-3 lhs, per-axis weights on the output dim, i8<-8:7> storage (packed as i4)."""
    rng = np.random.default_rng(3)
    w = rng.integers(-8, 8, (4, 5))
    q = "!quant.uniform<i8<-8:7>:f32:0, {0.5, 0.25, 0.125, 1.0}>"
    sched = _planned(tmp_path, DOT_RHS.replace("W", np.array2string(w, separator=", ")).replace("Q", q), mode)
    hybrid = [s for s in sched.steps if s.op == "HYBRID_CONV2D"]
    assert len(hybrid) == 1 and sched.buffers[hybrid[0].inputs[1]].dtype.name == "i4"
    assert verify_planned(sched, samples=2).bit_exact
    x = np.random.default_rng(4).normal(0, 1, (3, 2, 5)).astype(np.float32)
    y = run_reference(sched, [x])[sched.outputs[0]]
    definition = np.einsum("abk,nk->abn", x.astype(np.float64), w * np.array([0.5, 0.25, 0.125, 1.0])[:, None])
    tol = 1e-6 if mode == "weight-only" else 0.05
    assert np.abs(y - definition).max() <= tol * np.abs(definition).max()


def test_dot_general_weights_as_lhs_operand_refused(tmp_path: Path) -> None:
    """StableHLO hybrid ops have the quantized operand as rhs; a quantized lhs with a float rhs is refused."""
    w = np.ones((4, 5), np.int64)
    text = DOT.replace("W", np.array2string(w, separator=", ")).replace("Q", "!quant.uniform<i8:f32, 0.5>")
    with pytest.raises((GraphError, UnsupportedError)):
        _planned(tmp_path, text, "weight-only")


CONV_NCHW = """func.func @main(%x: tensor<2x3x7x6xf32>) -> tensor<2x4x4x3xf32> {
  %c = stablehlo.constant dense<W> : tensor<4x3x3x2xi8>
  %w = "quant.scast"(%c) : (tensor<4x3x3x2xi8>) -> tensor<4x3x3x2xQ>
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1],
    window = {stride = [2, 2], pad = [[1, 1], [0, 1]], rhs_dilate = [1, 2]}
    {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x7x6xf32>, tensor<4x3x3x2xQ>)
    -> tensor<2x4x4x3xf32>
  func.return %y : tensor<2x4x4x3xf32>
}
"""


@pytest.mark.parametrize("mode", MODES)
def test_convolution_nchw_stride_padding_blockwise(tmp_path: Path, mode: str) -> None:
    """NCHW / OIHW layouts, stride 2, asymmetric padding, rhs dilation, sub-channel blocks of the input feature
    dimension (blocks of 1 input channel, zero points per block): one HYBRID_CONV2D, transposes around it."""
    rng = np.random.default_rng(6)
    w = rng.integers(-100, 100, (4, 3, 3, 2))
    scales = np.round(rng.uniform(0.01, 0.05, (4, 3)), 4).reshape(4, 3, 1, 1)
    q = sub_channel("i8", {0: 1, 1: 1, 2: 3, 3: 2}, scales)
    text = CONV_NCHW.replace("W", np.array2string(w, separator=", ")).replace("Q", q)
    sched = _planned(tmp_path, text, mode)
    step = next(s for s in sched.steps if s.op == "HYBRID_CONV2D")
    assert np.shape(step.attrs["scale"]) == (3, 4)
    assert verify_planned(sched, samples=2).bit_exact
    assert _accuracy(sched, 2).max_error_over_bound <= 1


# ---- refusals, CLI, inputs ----------------------------------------------------------------------------------


NON_CONST = """func.func @main(%x: tensor<1x8xf32>, %w: tensor<8x4x!quant.uniform<i8:f32, 0.5>>) -> tensor<1x4xf32> {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x8xf32>,
    tensor<8x4x!quant.uniform<i8:f32, 0.5>>) -> tensor<1x4xf32>
  func.return %y : tensor<1x4xf32>
}
"""


def test_non_constant_weights_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(UnsupportedError, match="constant quantized weights"):
        _planned(tmp_path, NON_CONST, "weight-only")
    path = tmp_path / "model.mlir"
    assert main(["inspect", str(path)]) == 2
    assert "constant quantized weights" in capsys.readouterr().err


def test_cli_hybrid_option(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "dense.mlir"
    path.write_text(hybrid_dense(k=64, n=8))
    assert main(["verify", str(path), "--samples", "2", "--hybrid", "dynamic-range"]) == 0
    assert main(["inspect", str(path), "--hybrid", "dynamic-range", "--json"]) == 0
    steps = __import__("json").loads(capsys.readouterr().out.splitlines()[-1])["steps"]
    assert [s["acc_bound"] for s in steps if s["op"] == "HYBRID_CONV2D"] != [None]
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(path), "--hybrid", "fast"])
    assert exc.value.code == 2


def test_float_inputs_are_normal_numbers(tmp_path: Path) -> None:
    """verify's random float inputs: finite, no subnormals, both signs."""
    sched = _planned(tmp_path, hybrid_conv(), "weight-only")
    (x,) = random_inputs(sched, np.random.default_rng(0))
    assert x.dtype == np.float32 and np.all(np.isfinite(x))
    assert not np.any((x != 0) & (np.abs(x) < np.finfo(np.float32).tiny))
    assert x.min() < 0 < x.max()


@pytest.mark.parametrize("name, make", [("hybrid_dense", hybrid_dense), ("hybrid_conv", hybrid_conv)])
def test_examples_are_generated(name: str, make) -> None:
    assert (EXAMPLES / f"{name}.mlir").read_text() == make(), "run: python examples/make_scheme_examples.py"
