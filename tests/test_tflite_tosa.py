"""TOSA graphs made by the TFLite -> TOSA converter (tosa-converter-for-tflite, then tosa-opt --tosa-serialize) from
int8 and int16x8 TFLite models compile, and their C reproduces TFLite Micro's outputs bit for bit
(scripts/tflite_tosa_check.py runs the full set of models; this is its small CI subset). The convolutions of
these graphs are proven in int32; only the int8 softmax's reciprocal iterations are widened. Where the converter's
graph is not TFLM's function (the int16 softmax), qcodegen still equals the TOSA reference model."""

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tosa_converter_for_tflite", reason="needs tosa-converter-for-tflite (pip install '.[test]')")
pytest.importorskip("tosa_reference_model", reason="needs tosa-tools (pip install '.[test]')")
pytest.importorskip("tflite_micro", reason="needs tflite-micro (pip install '.[test]')")
import tosa_reference_model  # noqa: E402

from qcodegen.compiler import plan  # noqa: E402
from qcodegen.frontends import load_model  # noqa: E402
from qcodegen.ir.schedule import CONST  # noqa: E402
from qcodegen.reference import run_reference  # noqa: E402
from qcodegen.verify import random_inputs  # noqa: E402
from qcodegen.verify.tflm_oracle import TflmModel  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODELS = Path(os.environ.get("QC_SHARED_DIR", ROOT.parent / "shared")) / "testdata" / "tflite" / "models"


def _script():
    spec = importlib.util.spec_from_file_location("qc_tflite_tosa_check", ROOT / "scripts" / "tflite_tosa_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


check = _script()
if shutil.which("tosa-opt") is None and not (Path(sys.executable).parent / "tosa-opt").is_file():
    pytest.skip("tosa-opt (tosa-tools) is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """Small MLPerf-Tiny-shaped models (bench/models.py layer sequences) and the activations graph."""
    models = check.bench_models()
    folder = tmp_path_factory.mktemp("tflite")
    builders = {
        "ds_cnn_small": lambda: models.ds_cnn(channels=24, blocks=1, frames=25, logits_std=2.0),
        "ds_cnn_16x8_small": lambda: models.ds_cnn(channels=24, blocks=1, frames=25, activations="int16",
                                                   logits_std=2.0),
        "ds_cnn_16x8_wide": lambda: models.ds_cnn(channels=24, blocks=1, frames=25, activations="int16",
                                                  logits_std=8.0),
        "resnet8": models.resnet8,
        "activations": lambda: check.activations_model(models),
    }
    paths = {}
    for name, build in builders.items():
        paths[name] = folder / f"{name}.tflite"
        paths[name].write_bytes(build())
    return paths


def _shared(name: str) -> Path:
    path = SHARED_MODELS / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} not found (set QC_SHARED_DIR)")
    return path


@pytest.mark.parametrize("name", ["hello_world_int8", "micro_speech_quantized", "ds_cnn_small", "ds_cnn_16x8_small",
                                  "resnet8", "activations"])
def test_converted_graph_equals_tflm(name, built, tmp_path):
    path = built[name] if name in built else _shared(name)
    result = check.check(path, tmp_path, samples=4, seed=1)
    assert not result.error, result.error
    assert result.mismatches == 0 and result.elements > 0, result.first
    assert result.unpredictable == 0 and result.refmodel_unpredictable == 0 and result.refmodel_mismatches == 0
    schedule = plan(load_model(str(tmp_path / path.stem / f"{path.stem}.tosa")))
    for step in schedule.steps:
        assert not (step.widened and step.op in ("CONV2D", "DEPTHWISE_CONV2D", "AVG_POOL2D")), step.source
    assert len(result.widened) <= 6  # at most the softmax's reciprocal (Newton-Raphson) iterations


def test_int16_softmax_legalization_wraps_where_tflm_saturates(built, tmp_path):
    """The converter's int16 SOFTMAX: (x - max) * scale + 32767, CAST to i16, TABLE. TFLM saturates the scaled
    difference to int16 before its exp table; the CAST wraps it. With logits spread wider than the table's 10
    units, every row with a wrapping element differs from TFLM; qcodegen equals the TOSA reference model."""
    path = built["ds_cnn_16x8_wide"]
    tosa = check.convert(path, tmp_path)
    schedule = plan(load_model(str(tosa)))
    add = next(s for s in schedule.steps if s.op == "ADD" and schedule.buffers[s.inputs[1]].kind == CONST
               and np.all(schedule.buffers[s.inputs[1]].data == 32767))  # the table index: scaled diff + 32767
    tflm = TflmModel(path.read_bytes())
    rng = np.random.default_rng(3)
    wrapping_rows = 0
    for _ in range(4):
        batch = random_inputs(schedule, rng)
        values = run_reference(schedule, batch)
        ours = values[schedule.outputs[0]].reshape(-1)
        refmodel, status = tosa_reference_model.run(tosa.read_bytes(), batch)
        assert status.name == "TOSA_VALID" and np.array_equal(refmodel[0].reshape(-1), ours)
        wraps = bool((values[add.outputs[0]] < -32768).any())
        wrong = not np.array_equal(tflm.run(batch, 1)[0].reshape(-1), ours)
        assert wraps == wrong
        wrapping_rows += wraps
    assert wrapping_rows > 0
