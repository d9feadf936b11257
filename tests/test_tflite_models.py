"""Real TFLite models ($QC_SHARED_DIR/testdata/tflite/models): the generated C is bit-exact with TFLite Micro's
reference kernels on seeded random inputs (qcodegen.verify.tflm_oracle)."""

import os
from pathlib import Path

import pytest

from qcodegen.verify.tflm_oracle import check_tflite

pytest.importorskip("tflite_micro", reason="needs tflite-micro (pip install 'qcodegen[tflite]')")

# the shared data dir as tests/conftest.py defines it (QC_SHARED_DIR, default ../shared from the project root)
SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parent.parent.parent / "shared"))
MODELS = SHARED / "testdata" / "tflite" / "models"
pytestmark = pytest.mark.skipif(not MODELS.is_dir(), reason=f"shared test data not found at {MODELS}")


@pytest.mark.parametrize("name, samples, seed", [
    ("hello_world_int8", 64, 1),  # int8 in and out (the float version is not shipped); 1 input value
    ("simple_add_model", 6, 2),  # two inputs in file order
    ("micro_speech_quantized", 12, 3),  # DEPTHWISE_CONV_2D with depth multiplier 8, FC, SOFTMAX
    ("person_detect", 4, 4),  # MobileNetV1, ~7 MMAC: few samples
])
def test_model_bit_exact_with_tflm(name, samples, seed):
    result = check_tflite(MODELS / f"{name}.tflite", samples=samples, seed=seed)
    assert result.bit_exact, f"{name}: {result.mismatches} mismatches, first {result.first_mismatch}"
    assert result.samples == samples

