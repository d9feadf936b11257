"""MLPerf-Tiny-shaped ONNX models (bench/onnx_models.py: DS-CNN, MobileNetV1-0.25, ResNet-8, FC autoencoder, small
shapes here; the full ones in bench/onnx_bench.py), quantized by onnxruntime's quantize_static in the operator
format (per tensor with uint8 activations, per channel with int8) and in the QDQ format (both granularities, both
activation types; not int8 ResNet-8, where onnxruntime runs some Convs in float: docs/onnx.md), compiled and run on
generic C, an x86 SIMD target, Cortex-M4 and Cortex-M55: every output element equals onnxruntime's.

The weights are quantized with reduce_range (7 bits): onnxruntime's x86 kernels without VNNI accumulate u8 x s8
pairs in saturating int16 (MLAS, VPMADDUBSW), which 7-bit weights cannot overflow, so onnxruntime is an exact
oracle on any x86 CPU; bench/onnx_bench.py measures full-range weights on this machine."""

import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("onnx", reason="the ONNX front end needs onnx (pip install 'qcodegen[onnx]')")
pytest.importorskip("onnxruntime", reason="the oracle and quantizer are onnxruntime (pip install "
                                          "'qcodegen[oracles]')")

from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.frontends.onnx import import_onnx_bytes  # noqa: E402
from qcodegen.verify import get_runner  # noqa: E402
from qcodegen.verify.onnx_oracle import compare_with_oracle, onnxruntime_oracle  # noqa: E402
from qcodegen.verify.runners import unavailable  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
onnx_models = pytest.importorskip("bench.onnx_models")

SMALL = {
    "ds_cnn": dict(channels=16, blocks=2, frames=25),
    "mobilenet_v1": dict(size=32, blocks=4),
    "resnet8": dict(size=16, widths=(8, 16, 16)),
    "autoencoder": dict(features=64, hidden=32, depth=2),
}
CONFIGS = {"per_tensor_uint8": (False, "uint8", False), "per_channel_int8": (True, "int8", False),
           "qdq_per_tensor_uint8": (False, "uint8", True), "qdq_per_channel_int8": (True, "int8", True),
           "qdq_per_tensor_int8": (False, "int8", True), "qdq_per_channel_uint8": (True, "uint8", True)}
_CACHE: dict[tuple[str, str], bytes] = {}


def _quantized(model: str, config: str) -> bytes:
    if (model, config) not in _CACHE:
        per_channel, activations, qdq = CONFIGS[config]
        _CACHE[model, config] = onnx_models.quantize(onnx_models.MODELS[model](**SMALL[model]), per_channel,
                                                     activations, reduce_range=True, qdq=qdq)
    return _CACHE[model, config]


def _check(model: str, config: str, target_name: str, samples: int) -> None:
    target = load_target(target_name)
    reason = unavailable(target)
    if reason:
        pytest.skip(f"{target_name}: {reason}")
    raw = _quantized(model, config)
    start = time.perf_counter()
    schedule = plan(import_onnx_bytes(raw, model, model))
    seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="qc-onnx-model-") as tmp:
        generated = generate(schedule, Path(tmp), target, harness=target.runner == "harness")
        result = compare_with_oracle(onnxruntime_oracle(raw), schedule, generated, get_runner(target),
                                     samples=samples, seed=1, name="onnxruntime")
    print(f"{model} {config} {target_name}: plan {seconds:.2f} s, {result.mismatches} mismatches")
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"


@pytest.mark.parametrize("model,config", [
    ("ds_cnn", "per_tensor_uint8"), ("mobilenet_v1", "per_channel_int8"), ("resnet8", "per_tensor_uint8"),
    ("resnet8", "per_channel_int8"), ("autoencoder", "per_channel_int8"),
    ("ds_cnn", "qdq_per_tensor_uint8"), ("resnet8", "qdq_per_channel_uint8"), ("autoencoder", "qdq_per_tensor_int8"),
])
def test_generic_c_equals_onnxruntime(model, config):
    _check(model, config, "generic", samples=4)


@pytest.mark.parametrize("target,model,config", [
    ("x86-avx2", "ds_cnn", "per_channel_int8"), ("cortex-m4", "mobilenet_v1", "per_tensor_uint8"),
    ("x86-avx2", "resnet8", "qdq_per_tensor_uint8"), ("cortex-m4", "ds_cnn", "qdq_per_channel_int8"),
    ("cortex-m55", "ds_cnn", "per_tensor_uint8"), ("cortex-m4", "mobilenet_v1", "per_channel_int8"),
])
def test_targets_equal_onnxruntime(target, model, config):
    _check(model, config, target, samples=2)


def test_dense_layers_requantize_in_their_convolutions():
    """The autoencoder's dense layers (1x1 CONV2D, RESHAPE, RESCALE_F32 from the MatMul lowering), per channel: every
    RESCALE_F32 is moved before its RESHAPE (qcodegen/plan/rewrite.py) and becomes a single-rounding RESCALE on the
    convolution's channel axis, some with exceptions, each fused into its convolution."""
    schedule = plan(import_onnx_bytes(_quantized("autoencoder", "per_channel_int8"), "autoencoder", "autoencoder"))
    convs = [k for k, s in enumerate(schedule.steps) if s.op == "CONV2D"]
    rescales = [s for s in schedule.steps if s.op.startswith("RESCALE")]
    assert len(convs) == len(rescales) == 6
    assert all(s.op == "RESCALE" and s.attrs["axis"] == 3 and s.attrs["per_channel"] for s in rescales)
    assert sum(len(s.attrs.get("exceptions", [])) for s in rescales) > 0
    assert sorted(schedule.fused) == [k + 1 for k in convs]
    assert all(f.op == "FUSED_CONV" for f in schedule.fused.values())
