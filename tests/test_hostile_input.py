"""Hostile input through the CLI (issue 14's classes, one small case each): every damaged model ends with exactly
one line `qcodegen: error: ...` of at most 300 characters naming the culprit and exit code 2; a bug ends with one
line `qcodegen: internal error ...` and exit code 3; limits apply before any data is made; hex scales of MLIR
quantized types are IEEE bit patterns of doubles, as MLIR reads them."""

import copy
import json
import math
from pathlib import Path

import pytest

from qcodegen.cli import EXIT_INTERNAL, EXIT_USAGE, main
from qcodegen.frontends.mlir import parse_chunks

ROOT = Path(__file__).resolve().parents[1]

# x (i8 [1, 4]) -> fully_connected with per-axis weights (3, 4) -> y (i8 [1, 3])
GRAPH = {
    "name": "m",
    "tensors": [
        {"name": "x", "shape": [1, 4], "dtype": "i8", "quant": {"scale": 0.5, "zero_point": 0}},
        {"name": "w", "shape": [3, 4], "dtype": "i8", "quant": {"scales": [0.1, 0.2, 0.3], "zero_points": 0,
                                                              "axis": 0}, "data": {"random": {"seed": 1}}},
        {"name": "y", "shape": [1, 3], "dtype": "i8", "quant": {"scale": 1.0, "zero_point": 0}},
    ],
    "ops": [{"op": "fully_connected", "name": "fc", "inputs": ["x", "w"], "outputs": ["y"]}],
    "inputs": ["x"],
    "outputs": ["y"],
}


def compile_error(tmp_path: Path, capsys, path: Path, code: int = EXIT_USAGE) -> str:
    assert main(["compile", str(path), "-o", str(tmp_path / "out"), "--harness"]) == code
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 300, err
    prefix = "qcodegen: error: " if code == EXIT_USAGE else "qcodegen: internal error"
    assert lines[0].startswith(prefix), err
    return lines[0]


def json_error(tmp_path: Path, capsys, edit) -> str:
    doc = copy.deepcopy(GRAPH)
    edit(doc)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    return compile_error(tmp_path, capsys, path)


def _tensor(doc, name):
    return next(t for t in doc["tensors"] if t["name"] == name)


@pytest.mark.parametrize("edit, message", [
    (lambda d: _tensor(d, "w").update(data={"random": {"seed": 1, "min": 100, "max": -100}}), "min <= max"),
    (lambda d: _tensor(d, "w").update(shape=[-1]), "negative dimension"),
    (lambda d: _tensor(d, "w").update(shape=[2147483647]), "QC_MAX_TENSOR_ELEMENTS"),
    (lambda d: _tensor(d, "w")["quant"].update(zero_points=[math.inf, 0, 0]), "zero points must be integers"),
    (lambda d: _tensor(d, "w")["quant"].update(zero_points=2**63), "zero points must be integers"),
    (lambda d: _tensor(d, "w")["quant"].update(zero_points=[1e308, 0, 0]), "zero points must be integers"),
    (lambda d: d["ops"][0].update(attrs={"activation": [1]}), "op fully_connected 'fc': unknown activation '[1]'"),
    (lambda d: d.update(inputs=["x", "x"]), "graph input 'x' is listed twice"),
    (lambda d: d.update(options=[1]), "'options' an object"),
    (lambda d: _tensor(d, "x").update(dtype=["i8"]), "missing 'dtype'"),
])
def test_json_classes_are_clean_errors(tmp_path, capsys, edit, message):
    assert message in json_error(tmp_path, capsys, edit)


def test_long_garbage_name_is_escaped_and_shortened(tmp_path, capsys):
    name = "\x1b[2J\u202e" + "n" * 6000

    def edit(doc):
        doc["tensors"].append({"name": name, "shape": [1], "dtype": "i8"})
        doc["inputs"].append(name)  # never used
    line = json_error(tmp_path, capsys, edit)
    assert "\\x1b[2J\\u202e" in line and "…" in line and "\x1b" not in line


def test_rescale_range_error_names_op_and_tensor(tmp_path, capsys):
    def edit(doc):
        _tensor(doc, "x")["quant"]["scale"] = 1e30
        _tensor(doc, "y")["quant"]["scale"] = 1e-30
    line = json_error(tmp_path, capsys, edit)
    assert "op fully_connected 'fc' (output 'y'): " in line and "too large for a RESCALE" in line


def test_internal_error_is_one_line_with_its_own_exit_code(tmp_path, capsys, monkeypatch):
    from qcodegen.lower import base

    def broken(lw, op):
        raise KeyError("a bug")
    monkeypatch.setitem(base.RULES, "fully_connected", broken)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(GRAPH))
    line = compile_error(tmp_path, capsys, path, EXIT_INTERNAL)
    assert "KeyError" in line and "QC_DEBUG=1" in line


QDQ = (ROOT / "examples" / "qdq_mlp.mlir").read_text()


@pytest.mark.parametrize("old, new, message", [
    # fold_bias: a broadcast_in_dim whose result shape was changed (its users expect the other one)
    ("stablehlo.broadcast_in_dim %b1, dims = [3] : (tensor<4xf32>) -> tensor<1x8x8x4xf32>",
     "stablehlo.broadcast_in_dim %b1, dims = [3] : (tensor<4xf32>) -> tensor<1x8x3x4xf32>",
     "use of %b1b as tensor<1x8x8x4xf32>, defined as tensor<1x8x3x4xf32>"),
    ("batch_group_count = 1 : i64", "batch_group_count = -1 : i64", "batch_group_count -1 must be positive"),
    ("tensor<1x8x8x2xf32>", "tensor<99999999999999999999x8x8x2xf32>", "error"),
    ("%b1b = stablehlo.broadcast_in_dim %b1, dims = [3] : (tensor<4xf32>) -> tensor<1x8x8x4xf32>",
     '%b1b = ""(%b1) : (tensor<4xf32>) -> tensor<1x8x8x4xf32>', "error"),
])
def test_stablehlo_classes_are_clean_errors(tmp_path, capsys, old, new, message):
    assert old in QDQ
    path = tmp_path / "m.mlir"
    path.write_text(QDQ.replace(old, new))
    assert message in compile_error(tmp_path, capsys, path)


def test_dot_general_contracting_dimension_out_of_range(tmp_path, capsys):
    path = tmp_path / "d.mlir"
    path.write_text("""
func.func @main(%x: tensor<2x3x!quant.uniform<i8:f32, 0.5>>) -> tensor<2x4x!quant.uniform<i8:f32, 0.25>> {
  %w = stablehlo.constant dense<1> : tensor<3x4xi8>
  %wq = stablehlo.bitcast_convert %w : (tensor<3x4xi8>) -> tensor<3x4x!quant.uniform<i8:f32, 0.5>>
  %y = stablehlo.dot_general %x, %wq, contracting_dims = [-129] x [0] : (tensor<2x3x!quant.uniform<i8:f32, 0.5>>,
      tensor<3x4x!quant.uniform<i8:f32, 0.5>>) -> tensor<2x4x!quant.uniform<i8:f32, 0.25>>
  return %y : tensor<2x4x!quant.uniform<i8:f32, 0.25>>
}
""")
    assert "distinct dimensions in [0, 2)" in compile_error(tmp_path, capsys, path)


def test_splat_beyond_the_element_limit(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("QC_MAX_TENSOR_ELEMENTS", "1000")
    path = tmp_path / "s.mlir"
    path.write_text("""
func.func @main() -> tensor<64x64xf32> {
  %c = stablehlo.constant dense<0.5> : tensor<64x64xf32>
  return %c : tensor<64x64xf32>
}
""")
    assert "s.mlir:3:3: shape [64, 64] is beyond the limit of 1000 elements" in compile_error(tmp_path, capsys, path)


def test_limits_from_the_environment_are_checked(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("QC_MAX_MODEL_BYTES", "lots")
    path = tmp_path / "m.json"
    path.write_text(json.dumps(GRAPH))
    assert "QC_MAX_MODEL_BYTES='lots': expected a positive integer" in compile_error(tmp_path, capsys, path)


def _uniform(params: str):
    text = f"func.func @f(%a: tensor<2x!quant.uniform<i8:f32, {params}>>) {{\n  return\n}}"
    return parse_chunks(text)[0].functions[0].arguments[0].type.element


def test_hex_scales_are_double_bit_patterns():
    assert _uniform("0x3FF0000000000000:0x10").scales == (1.0,)  # 1.0; the zero point 16
    assert _uniform("0x3FF0000000000000:0x10").zero_points == (16,)
    assert _uniform("0x0000000000000001").scales == (5e-324,)  # (the StableHLO verifier rejects it for f32)
    assert _uniform("0.5").scales == (0.5,)


def test_hex_scale_outside_the_expressed_range_is_an_error(tmp_path, capsys):
    path = tmp_path / "h.mlir"
    path.write_text(QDQ.replace("!quant.uniform<i8:f32, 0.0078125>", "!quant.uniform<i8:f32, 0x0000000000000001>"))
    assert "out of expressed type range" in compile_error(tmp_path, capsys, path)


def _onnx_model(edit):
    """QuantizeLinear -> QLinearConv 1x1 (group attribute) -> DequantizeLinear, float [1, 2, 3, 3] in and out, with
    `edit(model)` applied."""
    onnx = pytest.importorskip("onnx", reason="the ONNX front end needs onnx (pip install 'qcodegen[onnx]')")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    consts = {"s": np.float32(0.05), "z": np.int8(0), "w": np.ones((2, 2, 1, 1), np.int8),
              "ws": np.float32(0.02), "shape": np.array([2**40], np.int64)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("QLinearConv", ["q", "s", "z", "w", "ws", "z", "s", "z"], ["c"], group=1),
             helper.make_node("DequantizeLinear", ["c", "s", "z"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    edit(model, onnx)
    return model.SerializeToString()


def _set_group(model, onnx):
    model.graph.node[1].attribute[0].CopyFrom(onnx.helper.make_attribute("group", [1, 2]))


def _constant_of_shape(model, onnx):
    model.graph.node.insert(0, onnx.helper.make_node("ConstantOfShape", ["shape"], ["big"]))
    model.graph.output.append(onnx.helper.make_tensor_value_info("big", onnx.TensorProto.FLOAT, None))


def _resize_of_constant(model, onnx):
    """A constant Resize whose scales ask for 2^40 x the weights' elements."""
    scales = onnx.numpy_helper.from_array(__import__("numpy").array([1, 1, 2**20, 2**20], "float32"), "scales")
    model.graph.initializer.append(scales)
    model.graph.node.insert(0, onnx.helper.make_node("Resize", ["w", "", "scales"], ["big"]))
    model.graph.output.append(onnx.helper.make_tensor_value_info("big", onnx.TensorProto.INT8, None))


def _undecodable_name(model, onnx):
    model.graph.name = "g"
    raw = model.SerializeToString()
    model.ParseFromString(raw.replace(b"\x12\x01g", b"\x12\x01\xff"))  # the graph's name: one byte, not UTF-8


@pytest.mark.parametrize("edit, message", [
    (_set_group, "attribute 'group' must be an integer"),
    (_constant_of_shape, "QC_MAX_TENSOR_ELEMENTS"),
    (_resize_of_constant, "QC_MAX_TENSOR_ELEMENTS"),
    (lambda m, onnx: m.graph.node.insert(0, onnx.helper.make_node("Constant", [], [], value_int=1)), "has no output"),
    (lambda m, onnx: setattr(m.graph.node[1], "op_type", "\x00\x0bConv"), "node #1 '\\x00\\x0bConv'"),
    (lambda m, onnx: m.graph.initializer[2].dims.__setitem__(0, 2**62), "QC_MAX_TENSOR_ELEMENTS"),
])
def test_onnx_classes_are_clean_errors(tmp_path, capsys, edit, message):
    path = tmp_path / "m.onnx"
    path.write_bytes(_onnx_model(edit))
    line = compile_error(tmp_path, capsys, path)
    assert message in line and "m.onnx" in line, line


def test_onnx_text_that_is_not_utf8_compiles(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    path.write_bytes(_onnx_model(_undecodable_name))
    assert main(["compile", str(path), "-o", str(tmp_path / "out"), "--harness"]) == 0, capsys.readouterr().err


def test_onnx_protobuf_garbage_names_the_file(tmp_path, capsys):
    pytest.importorskip("onnx", reason="the ONNX front end needs onnx (pip install 'qcodegen[onnx]')")
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    line = compile_error(tmp_path, capsys, path)
    assert "m.onnx" in line and "not an ONNX model" in line, line
