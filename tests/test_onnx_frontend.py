"""The ONNX front end: defects of the file are one-line QcErrors naming the file and the node or tensor (never a
traceback, also for randomly damaged models), the channels-last layout inserts no transposes between
convolutions, uint8 tensors compute as int8 with unchanged uint8 I/O, and QuantizeLinear (zero point added after
rounding) equals onnxruntime and the reference evaluator at ties, through `qcodegen verify`."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX front end needs onnx (pip install 'qcodegen[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from qcodegen.cli import main as qcodegen  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.errors import GraphError, QcError, UnsupportedError  # noqa: E402
from qcodegen.frontends import load_model  # noqa: E402
from qcodegen.frontends.onnx import import_onnx_bytes  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from onnx_cases import Models  # noqa: E402


def _conv_chain() -> Models:
    """uint8 QLinearConv -> QLinearConv -> QLinearAdd -> MaxPool, uint8 graph input and output."""
    m = Models(seed=1)
    x = m.input((1, 3, 8, 8), "u8")
    q = m.qparams(0.05, 128, "u8")
    c1 = m.node("QLinearConv", [x, *q, m.weights((4, 3, 3, 3), "i8"), *m.qparams(0.01, 0, "i8"), *q],
                pads=[1, 1, 1, 1])
    c2 = m.node("QLinearConv", [c1, *q, m.weights((4, 1, 3, 3), "i8"), *m.qparams(0.01, 0, "i8"), *q],
                pads=[1, 1, 1, 1], group=4)
    add = m.node("QLinearAdd", [c1, *q, c2, *q, *q], ms=True)
    m.output(m.node("MaxPool", [add], kernel_shape=[2, 2], strides=[2, 2]), None, "u8")
    return m


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _quantize_model(**kw) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.INT8, [2, 3])
    inits = [numpy_helper.from_array(np.array(0.1, np.float32), "s"), numpy_helper.from_array(np.array(3, np.int8),
                                                                                               "z")]
    return _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], [x], [y], inits, **kw)


def _damaged(kind: str) -> bytes:
    m = _quantize_model()
    if kind == "garbage":
        return b"\x12\x34not a protobuf at all\xff\xff"
    if kind == "no_opset":
        del m.opset_import[:]
    elif kind == "old_opset":
        m.opset_import[0].version = 9
    elif kind == "initializer_size":
        m.graph.initializer[0].raw_data = b"\x00\x00"
    elif kind == "negative_dim":
        m.graph.initializer[0].dims.append(-2)
    elif kind == "dangling_input":
        m.graph.node[0].input[1] = "nowhere"
    elif kind == "redefined_output":
        m.graph.node[0].output[0] = "x"
    elif kind == "symbolic_dim":
        m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    elif kind == "external_data":
        m.graph.initializer[0].data_location = TensorProto.EXTERNAL
    elif kind == "output_not_produced":
        m.graph.output[0].name = "ghost"
    elif kind == "float_conv":
        w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
        m = _model([helper.make_node("Conv", ["x4", "w"], ["y"])],
                   [helper.make_tensor_value_info("x4", TensorProto.FLOAT, [1, 1, 2, 2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    elif kind == "subgraph":
        m.graph.node.append(helper.make_node("If", ["x"], ["w"], then_branch=m.graph, else_branch=m.graph))
    return m.SerializeToString()


@pytest.mark.parametrize("kind,error,words", [
    ("garbage", GraphError, "not an ONNX model"), ("no_opset", GraphError, "default ONNX opset"),
    ("old_opset", UnsupportedError, "opset 9"), ("initializer_size", GraphError, "initializer 's'"),
    ("negative_dim", GraphError, "negative dimension"), ("dangling_input", GraphError, "'nowhere'"),
    ("redefined_output", GraphError, "already defined"), ("symbolic_dim", UnsupportedError, "'batch'"),
    ("external_data", UnsupportedError, "external file"), ("output_not_produced", GraphError, "'ghost'"),
    ("float_conv", UnsupportedError, "Conv"), ("subgraph", UnsupportedError, "subgraph"),
])
def test_damaged_files_raise_one_line_errors(kind, error, words, tmp_path):
    path = tmp_path / f"{kind}.onnx"
    path.write_bytes(_damaged(kind))
    with pytest.raises(error) as info:
        plan(load_model(path))
    message = str(info.value)
    assert "\n" not in message and str(path) in message and words in message


def test_cli_reports_a_damaged_model_in_one_line(tmp_path, capsys):
    path = tmp_path / "bad.onnx"
    path.write_bytes(_damaged("initializer_size"))
    assert qcodegen(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qcodegen: error: ") and err.count("\n") == 1


def test_missing_extra_names_it(monkeypatch, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(_quantize_model().SerializeToString())
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(QcError, match=r"pip install 'qcodegen\[onnx\]'"):
        load_model(path)


def test_random_damage_never_escapes_as_another_exception():
    raw = bytearray(_conv_chain().model())
    rng = np.random.default_rng(0)
    loaded = 0
    for _ in range(300):
        damaged = bytearray(raw)
        for i in rng.integers(0, len(damaged), int(rng.integers(1, 4))):
            damaged[i] = int(rng.integers(0, 256))
        if rng.random() < 0.2:
            damaged = damaged[:int(rng.integers(1, len(damaged)))]
        try:
            plan(import_onnx_bytes(bytes(damaged), "damaged", "damaged"))
            loaded += 1
        except QcError:
            pass
    assert loaded < 300


def test_channels_last_layout_and_uint8_as_int8():
    schedule = plan(import_onnx_bytes(_conv_chain().model(), "chain", "chain"))
    ops = [s.op for s in schedule.steps]
    assert ops.count("TRANSPOSE") == 2  # the NCHW input in, the NCHW output out: none between the convolutions
    assert ops[0] == "RESCALE" and ops[1] == "TRANSPOSE" and ops[-1] == "RESCALE"  # uint8 <-> int8 at the edges
    assert [schedule.buffers[n].dtype.name for n in schedule.inputs + schedule.outputs] == ["u8", "u8"]
    inner = {schedule.buffers[n].dtype.name for s in schedule.steps[1:-1] for n in s.outputs}
    assert "u8" not in inner


def test_quantize_linear_adds_the_zero_point_after_rounding(tmp_path, capsys):
    """x / scale just below k + 1/2: rounding first gives k + zp; adding zp in float32 first would round up. The C
    must equal onnxruntime and the reference evaluator (per-axis scales and zero points)."""
    pytest.importorskip("onnxruntime", reason="the oracle is onnxruntime (pip install 'qcodegen[oracles]')")
    scales = np.array([0.1, 0.37, 1.0], np.float32)
    zps = np.array([3, -100, 120], np.int8)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])
    y = helper.make_tensor_value_info("y", TensorProto.INT8, [3, 8])
    inits = [numpy_helper.from_array(scales, "s"), numpy_helper.from_array(zps, "z")]
    path = tmp_path / "q.onnx"
    onnx.save(_model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)], [x], [y], inits, 21),
              path)
    for oracle in ("onnxruntime", "onnx-ref"):
        assert qcodegen(["verify", str(path), "--against", oracle, "--samples", "20", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["mismatches"] == 0
    just_below_half = np.nextafter(np.float32(0.5), np.float32(0))
    values = (np.arange(8, dtype=np.float32)[None, :] - 4 + just_below_half) * scales[:, None]
    from qcodegen.reference import run_reference
    schedule = plan(load_model(path))
    out = run_reference(schedule, [values.astype(np.float32)])["y"]
    want = np.clip(np.rint(values.astype(np.float32) / scales[:, None]) + zps[:, None], -128, 127)
    assert np.array_equal(out, want)


def test_onnx_ref_oracle_runs_opset_17_dequantize(tmp_path, capsys):
    """onnx's reference evaluator implements DequantizeLinear from version 19 only; the oracle lets version 19
    stand in for opset 17's DequantizeLinear-13 (same semantics for int8 data and float32 scales, per axis)."""
    scales = np.array([0.1, 0.37, 1.0], np.float32)
    zps = np.array([3, -100, 120], np.int8)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8])
    inits = [numpy_helper.from_array(scales, "s"), numpy_helper.from_array(zps, "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)]
    path = tmp_path / "qdq17.onnx"
    onnx.save(_model(nodes, [x], [y], inits, 17), path)
    assert qcodegen(["verify", str(path), "--against", "onnx-ref", "--samples", "20", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mismatches"] == 0 and result["samples"] == 20
