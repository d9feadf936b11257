"""The .tflite importer: op kinds and attributes, tensors and quantization, constant folding, and one-line errors
for corrupted, truncated, float, hybrid, stateful and unsupported models."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from qcodegen.cli import main
from qcodegen.compiler import plan
from qcodegen.errors import GraphError, QcError, UnsupportedError
from qcodegen.frontends import load_model
from qcodegen.verify.tflm_oracle import OpSpec, TensorSpec, build_model, check_tflite, single_op_model

pytest.importorskip("tflite_micro", reason="needs tflite-micro (pip install 'qcodegen[tflite]')")

# the shared data dir as tests/conftest.py defines it (QC_SHARED_DIR, default ../shared from the project root)
SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parent.parent.parent / "shared"))
MODELS = SHARED / "testdata" / "tflite" / "models"
needs_models = pytest.mark.skipif(not MODELS.is_dir(), reason=f"shared test data not found at {MODELS}")
T = TensorSpec


def write(tmp_path, blob, name="m.tflite"):
    path = tmp_path / name
    path.write_bytes(blob)
    return path


def one_line_error(path, capsys):
    assert main(["compile", str(path), "-o", str(path.parent / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qcodegen: error:") and err.count("\n") == 1, err
    return err


@needs_models
def test_simple_add_inputs_in_file_order_and_exact_scales():
    g = load_model(MODELS / "simple_add_model.tflite")
    assert g.inputs == ["serving_default_input_1:0", "serving_default_input_2:0"]
    assert g.outputs == ["PartitionedCall:0"]
    assert g.options == {"rescale_rounding": "double_round", "source": "tflite"}
    (op,) = g.ops
    assert op.kind == "tfl.add" and op.inputs == g.inputs
    assert op.attrs["fused_activation_function"] == "NONE" and op.attrs["pot_scale_int16"] is True
    q = g.tensors[g.inputs[0]].quant
    assert q.scale == float(np.float32(q.scale)) and abs(q.scale - 0.04072537) < 1e-8  # the file's float32
    assert q.zero_point == -2


@needs_models
def test_person_detect_conv_attributes_and_per_channel_weights():
    g = load_model(MODELS / "person_detect.tflite")
    first = g.ops[0]
    assert first.kind == "tfl.depthwise_conv_2d"
    assert {k: first.attrs[k] for k in ("padding", "stride_h", "stride_w", "depth_multiplier",
                                         "fused_activation_function", "dilation_h_factor")} == {
        "padding": "SAME", "stride_h": 2, "stride_w": 2, "depth_multiplier": 8, "fused_activation_function": "RELU6",
        "dilation_h_factor": 1}
    w = g.tensors[first.inputs[1]]
    assert w.is_const and w.dtype.name == "i8" and w.quant.kind == "per_axis" and w.quant.axis == 3
    # the file labels the bias with the depthwise output axis 3 although it is 1-D: read as axis 0
    b = g.tensors[first.inputs[2]]
    assert b.dtype.name == "i32" and b.quant.axis == 0 and b.quant.scales.size == 8
    assert [op.kind for op in g.ops[-3:]] == ["tfl.conv_2d", "tfl.reshape", "tfl.softmax"]


def test_int4_weights_unpacked_and_absent_bias(tmp_path):
    w4 = np.array([[-8, 7, 3], [-1, 0, 5]], np.int8)
    blob = single_op_model("FULLY_CONNECTED", [T((1, 3), scale=0.1), T((2, 3), "int4", scale=0.5, data=w4), None],
                           [T((1, 2), scale=0.2)])
    g = load_model(write(tmp_path, blob))
    (op,) = g.ops
    assert len(op.inputs) == 2  # the absent trailing bias is dropped
    w = g.tensors[op.inputs[1]]
    assert w.dtype.name == "i4" and w.data.tolist() == w4.tolist()


def test_multiple_outputs_duplicate_names_and_unnamed_tensors(tmp_path):
    x = T((4,), scale=0.1, name="same")
    y1, y2 = T((4,), scale=0.1, name="same"), T((4,), scale=0.1)
    y2.name = ""
    blob = build_model([OpSpec("RELU", [x], [y2]), OpSpec("RELU6", [x], [y1])], [x], [y1, y2])
    g = load_model(write(tmp_path, blob))
    assert len(set(g.tensors)) == 3
    assert g.outputs[0] != g.inputs[0] and g.outputs[0].startswith("same")
    assert [g.tensors[n].shape for n in g.outputs] == [(4,), (4,)]
    assert [op.kind for op in g.ops] == ["tfl.relu", "tfl.relu6"]


def test_constant_chains_are_folded_with_tflite_arithmetic(tmp_path):
    # const int8 -> DEQUANTIZE -> QUANTIZE (another scale) -> RESHAPE -> ADD: only the ADD remains, and its
    # folded operand must be what TFLM computes at run time
    c = T((2, 3), scale=0.03, zero_point=5, data=np.array([[-128, -3, 0], [7, 90, 127]], np.int8))
    cf, cq, cr = T((2, 3), "float32"), T((2, 3), scale=0.07, zero_point=-1), T((1, 2, 3), scale=0.07, zero_point=-1)
    x, y = T((1, 2, 3), scale=0.05, zero_point=2), T((1, 2, 3), scale=0.1, zero_point=-4)
    ops = [OpSpec("DEQUANTIZE", [c], [cf]), OpSpec("QUANTIZE", [cf], [cq]),
           OpSpec("RESHAPE", [cq, T((3,), "int32", data=np.array([1, 2, 3], np.int32))], [cr],
                  {"newShape": [1, 2, 3]}),
           OpSpec("ADD", [x, cr], [y])]
    path = write(tmp_path, build_model(ops, [x], [y]))
    g = load_model(path)
    assert [op.kind for op in g.ops] == ["tfl.add"]
    assert g.tensors[g.ops[0].inputs[1]].is_const
    result = check_tflite(path, samples=4)
    assert result.bit_exact, result.first_mismatch


def test_corrupted_file(tmp_path, capsys):
    junk = bytearray(np.random.default_rng(3).integers(0, 256, 3000, dtype=np.uint8).tobytes())
    junk[4:8] = b"TFL3"
    path = write(tmp_path, bytes(junk))
    with pytest.raises(GraphError, match="corrupt or truncated"):
        load_model(path)
    assert "corrupt" in one_line_error(path, capsys)


def test_not_a_tflite_file(tmp_path, capsys):
    path = write(tmp_path, b"this is not a flatbuffer at all")
    with pytest.raises(GraphError, match="not a TFLite flatbuffer"):
        load_model(path)
    one_line_error(path, capsys)
    with pytest.raises(GraphError, match="not a TFLite flatbuffer"):
        load_model(write(tmp_path, b"TFL", "short.tflite"))


@needs_models
@pytest.mark.parametrize("keep", [0.05, 0.5, 0.95])
def test_truncated_file(tmp_path, capsys, keep):
    raw = (MODELS / "person_detect.tflite").read_bytes()
    path = write(tmp_path, raw[:int(len(raw) * keep)])
    with pytest.raises(GraphError):
        plan(load_model(path))
    one_line_error(path, capsys)


def test_float_model_is_refused(tmp_path, capsys):
    blob = single_op_model("FULLY_CONNECTED", [T((1, 4), "float32"), T((3, 4), "float32", data=np.ones((3, 4))), None],
                           [T((1, 3), "float32")])
    path = write(tmp_path, blob)
    with pytest.raises(UnsupportedError, match="float model: tfl.fully_connected"):
        load_model(path)
    assert "fully quantized" in one_line_error(path, capsys)


def test_hybrid_model_is_refused(tmp_path):
    blob = single_op_model("FULLY_CONNECTED", [T((1, 4), "float32"), T((3, 4), scale=0.1, data=np.ones((3, 4))),
                                               None], [T((1, 3), "float32")])
    with pytest.raises(UnsupportedError, match="hybrid"):
        load_model(write(tmp_path, blob))


def test_float_io_through_quantize_and_dequantize_is_accepted(tmp_path):
    xf, x, y, yf = T((2, 8), "float32"), T((2, 8), scale=0.02, zero_point=4), T((2, 8), scale=0.02, zero_point=4), \
        T((2, 8), "float32")
    ops = [OpSpec("QUANTIZE", [xf], [x]), OpSpec("RELU", [x], [y]), OpSpec("DEQUANTIZE", [y], [yf])]
    result = check_tflite(write(tmp_path, build_model(ops, [xf], [yf])), samples=3)
    assert result.bit_exact, result.first_mismatch


def test_unsupported_operators_are_listed_at_once(tmp_path, capsys):
    x = T((2, 3), scale=0.1)
    a, b, c = T((2, 3), scale=0.1), T((2, 3), scale=0.1), T((2, 3), scale=0.1)
    ops = [OpSpec("FLOOR", [x], [a]), OpSpec("RELU", [a], [b]), OpSpec("NEG", [b], [c])]
    path = write(tmp_path, build_model(ops, [x], [c]))
    with pytest.raises(UnsupportedError, match=r"unsupported operators: tfl\.floor, tfl\.neg$"):
        plan(load_model(path))
    err = one_line_error(path, capsys)
    assert "tfl.floor" in err and "tfl.neg" in err


def test_operators_on_unsupported_types_are_listed_at_once(tmp_path):
    x, x2 = T((4,), scale=0.1), T((4,), scale=0.1)
    b, nb = T((4,), "bool"), T((4,), "bool")
    ops = [OpSpec("GREATER", [x, x2], [b]), OpSpec("LOGICAL_NOT", [b], [nb])]
    with pytest.raises(UnsupportedError, match=r"tfl\.greater \(BOOL\), tfl\.logical_not \(BOOL\)"):
        load_model(write(tmp_path, build_model(ops, [x, x2], [nb])))


def test_missing_tflite_extra(tmp_path, monkeypatch):
    path = write(tmp_path, single_op_model("RELU", [T((2,), scale=0.1)], [T((2,), scale=0.1)]))
    for name in [m for m in sys.modules if m == "tflite_micro" or m.startswith("tflite_micro.")]:
        monkeypatch.setitem(sys.modules, name, None)  # "import tflite_micro..." now raises ImportError
    with pytest.raises(QcError, match=r"pip install 'qcodegen\[tflite\]'"):
        load_model(path)
