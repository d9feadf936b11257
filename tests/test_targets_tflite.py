"""TFLite models on every target: the generated C, built with the target's toolchain and run on its runner
(QEMU user mode, a bare-metal board with semihosting, or natively), is bit-exact with TFLite Micro's reference
kernels (run on the host) on seeded inputs. A target whose tools are missing here is skipped with the reason."""

import importlib.util
import json
import os
from pathlib import Path

import pytest

from qcodegen.cli import main
from qcodegen.codegen import list_targets, load_target
from qcodegen.verify.runners import cannot_count, unavailable
from qcodegen.verify.tflm_oracle import check_tflite

pytest.importorskip("tflite_micro", reason="needs tflite-micro (pip install 'qcodegen[tflite]')")

ROOT = Path(__file__).resolve().parent.parent
# the shared data dir as tests/conftest.py defines it (QC_SHARED_DIR, default ../shared from the project root)
MODELS = Path(os.environ.get("QC_SHARED_DIR", ROOT.parent / "shared")) / "testdata" / "tflite" / "models"
CROSS = [t.name for t in list_targets() if t.runner != "host"]
ALL = [t.name for t in list_targets()]


def _available(name: str) -> str:
    reason = unavailable(load_target(name))
    if reason:
        pytest.skip(f"{name}: {reason}")
    return name


def _shared(name: str) -> Path:
    path = MODELS / f"{name}.tflite"
    if not path.exists():
        pytest.skip(f"shared test data not found at {path}")
    return path


@pytest.mark.parametrize("target", CROSS)
@pytest.mark.parametrize("name, samples, seed", [
    ("hello_world_int8", 8, 1),  # FC + ReLU, int8 in and out
    ("micro_speech_quantized", 2, 3),  # DEPTHWISE_CONV_2D with depth multiplier 8, FC, SOFTMAX
])
def test_shared_model_on_target(target, name, samples, seed):
    result = check_tflite(_shared(name), samples=samples, seed=seed, target=_available(target))
    assert result.bit_exact, f"{name} on {target}: {result.mismatches} mismatches, first {result.first_mismatch}"
    assert result.samples == samples


# person_detect (MobileNetV1, ~7 MMAC) is slow under emulation: one user-mode and one bare-metal target
@pytest.mark.parametrize("target", ["aarch64-dotprod", "cortex-m55"])
def test_person_detect_on_target(target):
    result = check_tflite(_shared("person_detect"), samples=1, seed=4, target=_available(target))
    assert result.bit_exact, f"person_detect on {target}: {result.mismatches} mismatches, {result.first_mismatch}"


def _bench_models():
    """bench/models.py (the benchmarks' model builders; not part of the installed package)."""
    spec = importlib.util.spec_from_file_location("qc_bench_models", ROOT / "bench" / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# MLPerf-Tiny-shaped models at reduced sizes, with the same layer sequences as bench/models.py builds at full size:
# DS-CNN KWS (conv 10x4 s2, depthwise 3x3 + 1x1 conv blocks, average pool, FC, softmax) with 24 channels (not a
# multiple of any vector width), 2 blocks, 25 frames; the FC autoencoder 40-20x4-8-20x4-40.
SMALL = {"ds_cnn": {"channels": 24, "blocks": 2, "frames": 25},
         "fc_autoencoder": {"features": 40, "hidden": 20, "code": 8}}


@pytest.fixture(scope="module")
def small_models(tmp_path_factory) -> dict[str, Path]:
    models = _bench_models()
    builders = {"ds_cnn": models.ds_cnn, "fc_autoencoder": models.autoencoder}
    folder = tmp_path_factory.mktemp("mlperf")
    paths = {}
    for name, sizes in SMALL.items():
        paths[name] = folder / f"{name}_small.tflite"
        paths[name].write_bytes(builders[name](**sizes))
    return paths


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize("name", list(SMALL))
def test_mlperf_model_cli_against_tflm(target, name, small_models, capsys):
    # `qcodegen verify model.tflite -t T --against tflm --json`: the C on the target's runner, TFLM on the host,
    # plus the target's measurements (instructions where its QEMU counts them, code size)
    tgt = load_target(_available(target))
    rc = main(["verify", str(small_models[name]), "-t", target, "--against", "tflm", "--json", "--samples", "2",
               "--seed", "7"])
    result = json.loads(capsys.readouterr().out)
    assert rc == 0 and result["bit_exact"], f"{name} on {target}: {result}"
    assert result["samples"] == 2
    if tgt.runner != "host":
        assert result["text_bytes"] > 0 and result["rodata_bytes"] > 0
        if cannot_count(tgt) is None:
            assert result["instructions"] > 0
