"""verify --against float --float-model: error metrics of a quantized .tflite against its float original, per output
and per layer (accuracy, not bit-exactness)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from qcodegen import api
from qcodegen.cli import main
from qcodegen.verify.accuracy import tensor_error

pytestmark = pytest.mark.filterwarnings("ignore:.*experimental_preserve_all_tensors")
pytest.importorskip("ai_edge_litert", reason="needs LiteRT (pip install ai-edge-litert)")
tflm = pytest.importorskip("qcodegen.verify.tflm_oracle")


def test_metrics_by_hand():
    e = tensor_error("t", np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 2.0, 6.0]), np.full(4, 0.5))
    assert e.elements == 4 and e.mae == 0.75 and e.max_abs == 2.0
    assert e.rmse == math.sqrt((0 + 0 + 1 + 4) / 4)
    assert e.l2_relative == math.sqrt(5) / math.sqrt(1 + 4 + 4 + 36)
    assert e.cosine == (1 + 4 + 6 + 24) / (math.sqrt(30) * math.sqrt(45))
    assert e.max_abs_lsb == 4.0 and e.mae_lsb == 1.5


def _net(rng: np.random.Generator, ranges: dict[str, tuple[float, float]] | None, corrupt: bool = False):
    """A conv -> depthwise -> fully connected net: float (ranges None) or int8 with activation ranges from
    calibration (per-tensor asymmetric activations, per-channel symmetric weights, TFLite's conventions);
    `corrupt`: the first convolution's last output channel negated (a real quantization bug)."""
    T, Op = tflm.TensorSpec, tflm.OpSpec
    w1, b1 = rng.normal(0, 0.3, (8, 3, 3, 3)), rng.normal(0, 0.1, 8)
    if corrupt:
        w1[-1] = -w1[-1]
    w2, b2 = rng.normal(0, 0.3, (1, 3, 3, 8)), rng.normal(0, 0.1, 8)
    w3, b3 = rng.normal(0, 0.05, (4, 8 * 8 * 8)), rng.normal(0, 0.1, 4)
    names = ["input", "conv", "dw", "flat", "logits"]
    shapes = [(1, 8, 8, 3), (1, 8, 8, 8), (1, 8, 8, 8), (1, 512), (1, 4)]
    if ranges is None:
        act = {n: T(s, "float32", name=n) for n, s in zip(names, shapes, strict=True)}

        def weights(w, b, axis, x):  # noqa: ARG001
            return T(w.shape, "float32", data=w.astype(np.float32)), T(b.shape, "float32", data=b.astype(np.float32))
    else:
        act = {}
        for n, s in zip(names, shapes, strict=True):
            lo, hi = min(ranges[n][0], 0.0), max(ranges[n][1], 0.0)
            scale = (hi - lo) / 255
            act[n] = T(s, "int8", scale=scale, zero_point=int(round(-128 - lo / scale)), name=n)

        def weights(w, b, axis, x):
            reduce = tuple(i for i in range(w.ndim) if i != axis)
            ws = np.max(np.abs(w), axis=reduce) / 127
            q = np.round(w / np.expand_dims(ws, reduce)).astype(np.int8)
            bs = x.scale * ws
            bias = np.round(b / bs).astype(np.int32)
            return (T(w.shape, "int8", scale=list(ws), zero_point=[0] * len(ws), axis=axis, data=q),
                    T(b.shape, "int32", scale=list(bs), zero_point=[0] * len(bs), data=bias))
    c1w, c1b = weights(w1, b1, 0, act["input"])
    c2w, c2b = weights(w2, b2, 3, act["conv"])
    fcw, fcb = weights(w3, b3, 0, act["flat"])
    shape = T((2,), "int32", data=np.array([1, 512], np.int32))
    ops = [Op("CONV_2D", [act["input"], c1w, c1b], [act["conv"]], {"padding": 0, "strideW": 1, "strideH": 1,
                                                                  "fusedActivationFunction": 1}),
           Op("DEPTHWISE_CONV_2D", [act["conv"], c2w, c2b], [act["dw"]],
              {"padding": 0, "strideW": 1, "strideH": 1, "depthMultiplier": 1, "fusedActivationFunction": 3}),
           Op("RESHAPE", [act["dw"], shape], [act["flat"]], {"newShape": [1, 512]}),
           Op("FULLY_CONNECTED", [act["flat"], fcw, fcb], [act["logits"]])]
    return tflm.build_model(ops, [act["input"]], [act["logits"]])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from ai_edge_litert.interpreter import Interpreter

    root = tmp_path_factory.mktemp("accuracy")
    float_path = root / "net_float.tflite"
    float_path.write_bytes(_net(np.random.default_rng(7), None))
    interp = Interpreter(model_path=str(float_path), experimental_preserve_all_tensors=True)
    interp.allocate_tensors()
    ranges: dict[str, tuple[float, float]] = {}
    rng = np.random.default_rng(0)
    for _ in range(32):
        interp.set_tensor(interp.get_input_details()[0]["index"], rng.uniform(-1, 1, (1, 8, 8, 3)).astype(np.float32))
        interp.invoke()
        for d in interp.get_tensor_details():
            if d["name"] in ("input", "conv", "dw", "flat", "logits"):
                v = interp.get_tensor(d["index"])
                lo, hi = ranges.get(d["name"], (0.0, 0.0))
                ranges[d["name"]] = (min(lo, float(v.min())), max(hi, float(v.max())))
    ranges["input"] = (-1.0, 1.0)
    good, bad = root / "net_int8.tflite", root / "net_int8_bad.tflite"
    good.write_bytes(_net(np.random.default_rng(7), ranges))
    bad.write_bytes(_net(np.random.default_rng(7), ranges, corrupt=True))
    return float_path, good, bad


def test_quantized_model_is_close_to_its_float_original(models):
    float_path, good, _ = models
    result = api.verify(good, against="float", float_model=float_path, samples=8)
    assert result.passed and result.as_json()["bit_exact"] is None
    (out,) = result.outputs
    assert out.name == "logits" and out.elements == 8 * 4
    assert out.cosine > 0.99 and out.max_abs_lsb < 4
    assert {layer.name for layer in result.layers} == {"conv", "dw", "flat"}
    assert all(layer.cosine > 0.99 for layer in result.layers)


def test_a_quantization_bug_shows_in_the_metrics(models, capsys):
    float_path, good, bad = models
    base = api.verify(good, against="float", float_model=float_path, samples=8).outputs[0]
    wrong = api.verify(bad, against="float", float_model=float_path, samples=8).outputs[0]
    assert wrong.max_abs_lsb > 4 * base.max_abs_lsb and wrong.rmse > 4 * base.rmse and wrong.cosine < base.cosine
    code = main(["verify", str(bad), "--against", "float", "--float-model", str(float_path), "--samples", "4",
                 "--max-error-lsb", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["pass"] is False and "not a bit-exactness check" in report["statement"]
    assert main(["verify", str(good), "--against", "float", "--float-model", str(float_path), "--samples", "2"]) == 0
    text = capsys.readouterr().out
    assert "Accuracy against the float model" in text and "layer dw" in text and "output logits" in text
