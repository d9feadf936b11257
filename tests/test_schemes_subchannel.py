"""Sub-channel (blockwise) quantization (docs/schemes.md): run-time QUANTIZE / DEQUANTIZE with per-block scales, and
constant blockwise weights of dot_general / convolution (one BLOCK_CONV2D: per-block partial sums weighted by
integer ratios, one output requantization). Generated C == numpy reference bit for bit; against the exactly rounded
definition (dequantize with the float32 scales, exact dot, quantize rounding half to even) the result differs only
where the exact value lies within the recorded ratio-rounding bound of a tie (counted); flash of blockwise i4 vs
per-channel i8 on a 640x128 dense layer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.cli import main
from qcodegen.compiler import plan
from qcodegen.errors import UnsupportedError
from qcodegen.frontends import load_model
from qcodegen.ir.schedule import Schedule
from qcodegen.reference import run_reference
from qcodegen.report import inspect_dict
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule, verify_planned

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
from make_scheme_examples import sub_channel, subchannel_dense  # noqa: E402

# ---- run-time QUANTIZE / DEQUANTIZE per block -----------------------------------------------------


def test_blockwise_quantize_hand_computed() -> None:
    # blocks (1, 2): row 0 scales 0.5 | 0.25, row 1 scales 1 | 2 with zero point 1 on the last block
    sched = step_schedule("QUANTIZE", [Var((2, 4), "f32")], [((2, 4), "i8")], scale=[[0.5, 0.25], [1.0, 2.0]],
                          zero_point=[[0, 0], [0, 1]], block_sizes=[1, 2], qmin=-128, qmax=127)
    x = np.array([[1, 1, 1, 1], [2, 2, 3, 5]], np.float32)
    # 1/0.5 = 2, 1/0.25 = 4; 2/1 = 2, 3/2 + 1 = 2.5 -> 2 (ties to even), 5/2 + 1 = 3.5 -> 4
    assert run_reference(prepare(sched), [x])["out0"].tolist() == [[2, 2, 4, 4], [2, 2, 2, 4]]
    assert_bit_exact(sched, inputs=[[x]])


@given(st.data())
def test_blockwise_quantize_dequantize_bit_exact(data: st.DataObject) -> None:
    rank = data.draw(st.integers(1, 3))
    blocks = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    grid = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    shape = tuple(b * g for b, g in zip(blocks, grid, strict=True))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    scale = rng.uniform(0.01, 2.0, grid).astype(np.float32).tolist()
    zp = rng.integers(-8, 8, grid).tolist()
    assert_bit_exact(step_schedule("QUANTIZE", [Var(shape, "f32")], [(shape, "i4")], scale=scale, zero_point=zp,
                                   block_sizes=blocks, qmin=-8, qmax=7), samples=2)
    assert_bit_exact(step_schedule("DEQUANTIZE", [Var(shape, "i8")], [(shape, "f32")], scale=scale,
                                   zero_point=zp, block_sizes=blocks), samples=2)


QDQ = """func.func @main(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %q = stablehlo.uniform_quantize %x : (tensor<4x64xf32>) -> tensor<4x64xQ>
  %r = stablehlo.uniform_dequantize %q : (tensor<4x64xQ>) -> tensor<4x64xf32>
  func.return %r : tensor<4x64xf32>
}
"""


def test_stablehlo_blockwise_qdq_at_run_time(tmp_path: Path) -> None:
    q = sub_channel("i4", {0: 1, 1: 16}, np.round(np.linspace(0.01, 0.16, 16).reshape(4, 4), 4))
    path = tmp_path / "qdq.mlir"
    path.write_text(QDQ.replace("Q", q))
    sched = plan(load_model(path))
    assert [s.op for s in sched.steps] == ["QUANTIZE", "DEQUANTIZE"]
    assert verify_planned(sched, samples=3).bit_exact


# ---- blockwise weights ----------------------------------------------------------------------------


def _off_ties(got: np.ndarray, real: np.ndarray, scale: float, zp: int, bound: float) -> int:
    """Elements of `got` that differ from the exactly rounded quantization of `real` (float32 scale); each must lie
    within `bound` output LSB of a rounding tie."""
    v = real / float(np.float32(scale)) + zp
    exact = np.clip(np.rint(v), -128, 127).astype(np.int64)
    off = got.astype(np.int64) != exact
    assert np.all(np.abs(np.abs(v - np.floor(v)) - 0.5)[off] <= bound), "a difference beyond the ratio bound"
    assert np.all(np.abs(got.astype(np.int64) - exact) <= 1)
    return int(np.count_nonzero(off))


def _ratio_bound(sched: Schedule) -> float:
    """The largest ratio_error_lsb the lowering recorded (blockwise.py)."""
    return max(float(n.split("<= ")[1].split()[0]) for n in sched.notes if "ratio_error_lsb" in n)


def _f32(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, np.float32).astype(np.float64)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.mlir"
    path.write_text(text)
    return path


def _planned(tmp_path: Path, text: str) -> Schedule:
    return plan(load_model(_write(tmp_path, text)))


def test_dense_640x128_i4_blockwise(tmp_path: Path) -> None:
    """The example layer: bit-exact C; against the exactly rounded definition 1 of 2,048 outputs differs (16
    samples), within the ratio-rounding bound of a tie; i4 weights packed in flash."""
    graph = load_model(_write(tmp_path, subchannel_dense()))
    w = graph.tensors["w"]
    weights, scales = w.data.astype(np.int64), w.quant.expand(w.shape)[0]
    sched = plan(graph)
    assert verify_planned(sched, samples=4).bit_exact
    rng = np.random.default_rng(1)
    x = rng.uniform(-4, 4, (16, 1, 640)).astype(np.float32)
    off = 0
    for sample in x:
        values = run_reference(sched, [sample])
        xq = values["xq"].astype(np.int64)
        real = (_f32(0.03125) * (xq + 3)) @ (weights * _f32(scales))
        off += _off_ties(values["y"], real, 0.25, 5, _ratio_bound(sched))
    assert off == 1
    report = inspect_dict(sched)
    assert [s["op"] for s in report["steps"] if s["op"] not in ("RESHAPE",)] == [
        "QUANTIZE", "BLOCK_CONV2D", "DEQUANTIZE"]
    assert report["arena_bytes"] <= 1152  # no per-block partial sums in memory
    assert any("ratio_error_lsb" in n and float(n.split("<= ")[1].split()[0]) < 0.5 for n in report["notes"])
    i4_weights = sum(b.size for b in sched.buffers.values() if b.kind == "const" and b.dtype.name == "i4")
    assert i4_weights == 640 * 128



def test_flash_blockwise_i4_vs_per_channel_i8(tmp_path: Path) -> None:
    """docs/schemes.md: weights_bytes of `qcodegen inspect` for the 640x128 layer."""
    blockwise = inspect_dict(_planned(tmp_path, subchannel_dense()))["weights_bytes"]
    per_channel = inspect_dict(_planned(tmp_path, subchannel_dense(per_channel_i8=True)))["weights_bytes"]
    assert per_channel >= 640 * 128, per_channel
    assert blockwise == 640 * 128 // 2 + 20 * 128 * 2 + 128 * 5  # i4 weights, int16 ratios, multipliers + shifts


CONV = """func.func @main(%x: tensor<1x6x6x8xf32>) -> tensor<1x4x4x3xf32> {
  %c = stablehlo.constant dense<W> : tensor<3x3x8x3xi8>
  %w = "quant.scast"(%c) : (tensor<3x3x8x3xi8>) -> tensor<3x3x8x3xQ>
  %xq = stablehlo.uniform_quantize %x : (tensor<1x6x6x8xf32>) -> XQ
  %y = stablehlo.convolution(%xq, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1]}
    {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (XQ, tensor<3x3x8x3xQ>) -> YQ
  %r = stablehlo.uniform_dequantize %y : (YQ) -> tensor<1x4x4x3xf32>
  func.return %r : tensor<1x4x4x3xf32>
}
""".replace("XQ", "tensor<1x6x6x8x!quant.uniform<i8:f32, 0.05:2>>").replace(
    "YQ", "tensor<1x4x4x3x!quant.uniform<i8:f32, 0.5:-1>>")


def test_convolution_blockwise_input_channels(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    w = rng.integers(-8, 8, (3, 3, 8, 3))
    scales = np.round(rng.uniform(0.01, 0.05, (4, 3)), 4)
    q = sub_channel("i8<-8:7>", {0: 3, 1: 3, 2: 2, 3: 1}, scales.reshape(1, 1, 4, 3))
    sched = _planned(tmp_path, CONV.replace("W", np.array2string(w, separator=", ", threshold=10**6))
                     .replace("Q", q))
    assert [s.op for s in sched.steps if s.op in ("CONV2D", "BLOCK_CONV2D")] == ["BLOCK_CONV2D"]
    assert sched.buffers["y_ratio"].shape == (4, 3)
    assert verify_planned(sched, samples=3).bit_exact
    x = rng.uniform(-6, 6, (1, 6, 6, 8)).astype(np.float32)
    values = run_reference(sched, [x])
    xr = _f32(0.05) * (values["xq"].astype(np.int64) - 2)
    wr = w * _f32(np.repeat(scales, 2, axis=0))
    real = np.zeros((1, 4, 4, 3))
    for i in range(4):
        for j in range(4):
            real[0, i, j] = np.einsum("abc,abco->o", xr[0, i:i + 3, j:j + 3], wr)
    assert _off_ties(values["y"], real, 0.5, -1, _ratio_bound(sched)) == 0


def test_blocks_along_spatial_kernel_dims_rejected(tmp_path: Path) -> None:
    w = np.zeros((3, 3, 8, 3), np.int64)
    q = sub_channel("i8", {0: 1, 1: 3, 2: 8, 3: 3}, np.array([[[[0.1]]], [[[0.2]]], [[[0.3]]]]))
    with pytest.raises(UnsupportedError, match="spatial"):
        _planned(tmp_path, CONV.replace("W", np.array2string(w, separator=", ")).replace("Q", q))


def test_convolution_blockwise_stride_padding(tmp_path: Path) -> None:
    """Stride 2 with padding 1 (the last input row and column no output reads are cropped), i8 weights in 2 blocks of
    4 channels, scale ratios that are powers of two (0.04 / 0.02 / 0.01): some R[o] makes the ratios exact."""
    rng = np.random.default_rng(4)
    w = rng.integers(-128, 128, (3, 3, 8, 3))
    scales = np.array([[0.04, 0.02, 0.01], [0.01, 0.04, 0.02]])
    q = sub_channel("i8", {0: 3, 1: 3, 2: 4, 3: 1}, scales.reshape(1, 1, 2, 3))
    text = (CONV.replace("W", np.array2string(w, separator=", ", threshold=10**6)).replace("Q", q)
            .replace("window = {stride = [1, 1]}", "window = {stride = [2, 2], pad = [[1, 1], [1, 1]]}")
            .replace("1x4x4x3", "1x3x3x3"))
    sched = _planned(tmp_path, text)
    step = next(s for s in sched.steps if s.op == "BLOCK_CONV2D")
    ratio = sched.buffers[step.inputs[2]].data
    assert ratio[0, 0] == 4 * ratio[1, 0] and ratio[1, 1] == 2 * ratio[0, 1] and ratio[1, 2] == 2 * ratio[0, 2]
    assert step.attrs["pad"] == [1, 0, 1, 0] and any("ratio rounding <= 0 output LSB" in n for n in sched.notes)
    assert verify_planned(sched, samples=3).bit_exact


CONV3D = """func.func @main(%x: tensor<1x4x4x4x4xf32>) -> tensor<1x4x3x3x2xf32> {
  %c = stablehlo.constant dense<W> : tensor<2x2x2x4x2xi8>
  %w = "quant.scast"(%c) : (tensor<2x2x2x4x2xi8>) -> tensor<2x2x2x4x2xQ>
  %xq = stablehlo.uniform_quantize %x : (tensor<1x4x4x4x4xf32>) -> XQ
  %y = stablehlo.convolution(%xq, %w) dim_numbers = [b, 0, 1, 2, f]x[0, 1, 2, i, o]->[b, 0, 1, 2, f],
    window = {stride = [1, 1, 1], pad = [[1, 0], [0, 0], [0, 0]]}
    {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (XQ, tensor<2x2x2x4x2xQ>) -> YQ
  %r = stablehlo.uniform_dequantize %y : (YQ) -> tensor<1x4x3x3x2xf32>
  func.return %r : tensor<1x4x3x3x2xf32>
}
""".replace("XQ", "tensor<1x4x4x4x4x!quant.uniform<i8:f32, 0.05:2>>").replace(
    "YQ", "tensor<1x4x3x3x2x!quant.uniform<i8:f32, 0.1:-1>>")


def test_convolution_3d_blockwise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 3-D convolution (depth padded by 1 in front) with 2 input-channel blocks of 2: the kernel depth folded into
    the channels of one BLOCK_CONV2D; C == reference, and equal to the float definition on 8 samples."""
    rng = np.random.default_rng(5)
    w = rng.integers(-8, 8, (2, 2, 2, 4, 2))
    scales = np.round(rng.uniform(0.01, 0.05, (2, 2)), 4)
    q = sub_channel("i8<-8:7>", {0: 2, 1: 2, 2: 2, 3: 2, 4: 1}, scales.reshape(1, 1, 1, 2, 2))
    path = _write(tmp_path, CONV3D.replace("W", np.array2string(w, separator=", ", threshold=10**6)).replace("Q", q))
    sched = plan(load_model(path))
    assert [s.op for s in sched.steps if "CONV" in s.op] == ["BLOCK_CONV2D"]
    assert verify_planned(sched, samples=3).bit_exact
    assert main(["verify", str(path), "--against", "float", "--samples", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["elements_off"] == 0
