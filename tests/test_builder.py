"""The Python builder: builder -> JSON -> graph round trips exactly; invalid graphs are rejected with a
GraphError naming the tensor or op."""

import json
import math

import numpy as np
import pytest

from qcodegen.compiler import plan
from qcodegen.errors import GraphError
from qcodegen.frontends import load_model
from qcodegen.frontends.builder import GraphBuilder, Random
from qcodegen.frontends.json_graph import graph_from_dict
from qcodegen.ir.graph import Graph


def assert_same_graph(a: Graph, b: Graph) -> None:
    assert (a.name, a.inputs, a.outputs, a.options) == (b.name, b.inputs, b.outputs, b.options)
    assert list(a.tensors) == list(b.tensors)
    for name, t in a.tensors.items():
        u = b.tensors[name]
        assert (t.shape, t.dtype) == (u.shape, u.dtype), name
        assert (t.quant is None) == (u.quant is None), name
        if t.quant is not None:
            for attr in ("storage", "axis", "block_sizes", "storage_min", "storage_max"):
                assert getattr(t.quant, attr) == getattr(u.quant, attr), (name, attr)
            np.testing.assert_array_equal(t.quant.scales, u.quant.scales)
            np.testing.assert_array_equal(t.quant.zero_points, u.quant.zero_points)
        assert (t.data is None) == (u.data is None), name
        if t.data is not None:
            assert t.data.dtype == u.data.dtype
            np.testing.assert_array_equal(t.data.view(np.uint8), u.data.view(np.uint8))
    assert [(o.kind, o.name, o.inputs, o.outputs, o.attrs) for o in a.ops] == \
           [(o.kind, o.name, o.inputs, o.outputs, o.attrs) for o in b.ops]


def rich_builder() -> tuple[GraphBuilder, dict[str, np.ndarray]]:
    """Every quant kind and data encoding; returns the explicit arrays by tensor name."""
    rng = np.random.default_rng(0)
    arrays = {
        "w_big": rng.integers(-127, 128, (16, 3, 3, 8)),             # > 256 values: base64
        "w_i4": rng.integers(-8, 8, (1, 3, 3, 33)),                   # odd count of packed nibbles
        "fc_w": rng.integers(-128, 128, (4, 6)),                      # small: a JSON list
        "table": rng.standard_normal(300).astype(np.float32),          # f32 base64
    }
    b = GraphBuilder("rich", rescale_rounding="double_round")
    x = b.input("x", (1, 6, 6, 8), "i8", scale=0.0123456789, zero_point=-128)
    x16 = b.input("x16", (2, 6), "i16", scale=3e-5, storage_min=-32767, storage_max=32767)
    y = b.conv2d(x, arrays["w_big"], w_scales=rng.uniform(0.001, 0.01, 16).tolist(), out_scale=0.07,
                 out_zero_point=-3, bias=Random((16,), 4, -99, 99), stride=[2, 1], dilation=1, padding=[1, 0, 1, 1],
                 activation="relu6", name="conv")
    y = b.depthwise_conv2d(y, Random((1, 3, 3, 32), 7, -8, 7), w_scales=0.02, w_dtype="i4", out_scale=0.05,
                           padding="SAME", name="dw")
    b.output(b.mean(y, [1, 2], keepdims=False, out_scale=0.02, out_zero_point=1))
    b.output(b.fully_connected(x16, arrays["fc_w"], w_scales=[0.1, 0.2, 0.3, 0.4], out_scale=0.01,
                               bias=np.array([1, -1, 2, -2]), name="fc"))
    b.const("w_i4", arrays["w_i4"], "i4", scale=0.5)
    b.const("table", arrays["table"], "f32")
    b.tensor("blocked", (4, 6), "i8", scale=[[0.1, 0.2], [0.3, 0.4]], zero_point=[[0, 1], [2, 3]],
             block_sizes=(2, 3), data=Random((4, 6), 9))
    return b, arrays


def test_builder_json_graph_round_trip(tmp_path):
    b, arrays = rich_builder()
    built = b.build()
    text = b.to_json(tmp_path / "rich.json")
    parsed = graph_from_dict(json.loads(text))
    parsed.validate()
    assert_same_graph(built, parsed)
    loaded = load_model(tmp_path / "rich.json")
    loaded.validate()
    assert_same_graph(built, loaded)
    np.testing.assert_array_equal(built.tensors["conv_w"].data, arrays["w_big"])
    np.testing.assert_array_equal(built.tensors["w_i4"].data, arrays["w_i4"])
    np.testing.assert_array_equal(built.tensors["fc_w"].data, arrays["fc_w"])
    np.testing.assert_array_equal(built.tensors["table"].data.view(np.uint32), arrays["table"].view(np.uint32))
    doc = json.loads(text)
    specs = {t["name"]: t for t in doc["tensors"]}
    assert "base64" in specs["conv_w"]["data"] and isinstance(specs["fc_w"]["data"], list)
    assert specs["dw_w"]["data"] == {"random": {"seed": 7, "min": -8, "max": 7}}
    assert specs["conv_b"]["quant"]["axis"] == 0 and specs["x16"]["quant"]["storage_min"] == -32767
    assert doc["options"] == {"rescale_rounding": "double_round"}
    assert len(text.splitlines()) == len(doc["tensors"]) + len(doc["ops"]) + 11  # one line per tensor / op


def test_built_graph_plans_and_bias_scales_follow_the_weights():
    b, _ = rich_builder()
    graph = b.build()
    bias = graph.tensors["conv_b"].quant
    np.testing.assert_array_equal(bias.scales, 0.0123456789 * graph.tensors["conv_w"].quant.scales)
    schedule = plan(graph)
    assert schedule.outputs == ["mean", "fc"]


def test_builder_defaults_and_names():
    b = GraphBuilder("names")
    x = b.input("x", (1, 4, 4, 2), "i8", scale=0.1, zero_point=3, storage_min=-127)
    p = b.max_pool2d(x, 2)
    assert (p.name, p.shape, p.quant.scale, p.quant.zero_point, p.quant.storage_min) == (
        "max_pool2d", (1, 2, 2, 2), 0.1, 3, -127)
    assert b.avg_pool2d(x, 2).name == "avg_pool2d"
    assert b.max_pool2d(x, 3, stride=1, padding="SAME").name == "max_pool2d_1"
    r = b.reshape(p, (1, -1))
    assert r.shape == (1, 8)
    assert b.transpose(x, [0, 3, 1, 2]).shape == (1, 2, 4, 4)
    assert b.slice(x, [0, 1, 0, 0], [-1, 2, -1, 1]).shape == (1, 2, 4, 1)
    assert b.pad(x, [0, 0, 1, 1, 2, 0, 0, 0]).shape == (1, 6, 6, 2)
    assert b.concat([x, x], axis=-1).shape == (1, 4, 4, 4)
    assert b.mean(x, [1, 2], keepdims=True).shape == (1, 1, 1, 2)
    assert b.add(x, b.input("v", (2,), "i8", scale=0.1), 0.2).shape == (1, 4, 4, 2)


# --- invalid graphs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(scale=0.1, zero_point=200), "tensor 'x': zero point 200 is outside the storage range [-128, 127]"),
    (dict(scale=0.1, zero_point=-128, storage_min=-127), "tensor 'x': zero point -128 is outside the storage"),
    (dict(scale=0.0), "tensor 'x': every scale must be finite and > 0, got 0.0"),
    (dict(scale=-0.5), "tensor 'x': every scale must be finite and > 0, got -0.5"),
    (dict(scale=math.nan), "tensor 'x': every scale must be finite and > 0, got nan"),
    (dict(scale=math.inf), "tensor 'x': every scale must be finite and > 0, got inf"),
    (dict(scale=[0.1, 0.2], axis=1), "tensor 'x': per-axis type has 2 scales but dimension 1 has size 4"),
    (dict(scale=[0.1, 0.2], axis=3), "tensor 'x': quantization axis 3 out of range for rank 2"),
    (dict(scale=[[0.1], [0.2]], block_sizes=(2, 4)), "tensor 'x': block size 2 does not divide dimension 0 "
                                                     "(size 3)"),
    (dict(scale=0.1, storage_min=-200), "tensor 'x': storage range [-200, 127] is not inside i8"),
])
def test_invalid_quantization_rejected_by_builder_and_json(kwargs, message):
    with pytest.raises(GraphError) as info:
        GraphBuilder("bad").input("x", (3, 4), "i8", **kwargs)
    assert message in str(info.value)
    doc = {"name": "bad", "inputs": ["x"], "outputs": ["y"],
           "tensors": [{"name": "x", "shape": [3, 4], "dtype": "i8"}, {"name": "y", "shape": [3, 4], "dtype": "i8"}],
           "ops": [{"op": "reshape", "inputs": ["x"], "outputs": ["y"]}]}
    quant = {"storage_min": kwargs["storage_min"]} if "storage_min" in kwargs else {}
    if "axis" in kwargs or "block_sizes" in kwargs:
        quant.update(scales=kwargs["scale"], zero_points=np.zeros(np.shape(kwargs["scale"]), int).tolist())
        quant.update({k: kwargs[k] for k in ("axis", "block_sizes") if k in kwargs})
    else:
        quant.update(scale=kwargs["scale"], zero_point=kwargs.get("zero_point", 0))
    doc["tensors"][0]["quant"] = quant
    with pytest.raises(GraphError) as info:
        graph_from_dict(json.loads(json.dumps(doc))).validate()
    assert message in str(info.value)


def _graph(tensors, ops, inputs=("x",), outputs=("y",)):
    return graph_from_dict({"name": "g", "tensors": tensors, "ops": ops, "inputs": list(inputs),
                            "outputs": list(outputs)})


def _t(name, shape=(2, 3), dt="i8", quantized=True, **extra):
    quant = {"quant": {"scale": 0.1, "zero_point": 0}} if quantized else {}
    return {"name": name, "shape": list(shape), "dtype": dt, **quant, **extra}


@pytest.mark.parametrize("tensors, ops, inputs, outputs, message", [
    ([_t("x"), _t("y")], [{"op": "relu", "name": "r", "inputs": ["x", "ghost"], "outputs": ["y"]}], ["x"], ["y"],
     "op relu 'r': input 'ghost' is not a tensor of the graph"),
    ([_t("x"), _t("t"), _t("y")], [{"op": "add", "name": "a", "inputs": ["x", "t"], "outputs": ["y"]}], ["x"],
     ["y"], "op add 'a': input 't' is dangling (no producer, not a graph input, not a constant)"),
    ([_t("x"), _t("t"), _t("y")],
     [{"op": "add", "name": "a", "inputs": ["x", "y"], "outputs": ["t"]},
      {"op": "relu", "name": "r", "inputs": ["t"], "outputs": ["y"]}], ["x"], ["y"],
     "cycle in the graph through op"),
    ([_t("x"), _t("y")], [{"op": "relu", "name": "r", "inputs": ["x"], "outputs": ["y"]},
                          {"op": "relu6", "name": "r6", "inputs": ["x"], "outputs": ["y"]}], ["x"], ["y"],
     "tensor 'y' is produced twice (op relu 'r' and op relu6 'r6')"),
    ([_t("x"), _t("y"), _t("z")], [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}], ["x"], ["z"],
     "graph output 'z' is never produced"),
    ([_t("x"), _t("u"), _t("y")], [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}], ["x", "u"], ["y"],
     "graph input 'u' is never used"),
    ([_t("x"), _t("w", data=[1, 2, 300, 4, 5, 6]), _t("y")],
     [{"op": "add", "inputs": ["x", "w"], "outputs": ["y"]}], ["x"], ["y"],
     "constant 'w': values [1, 300] exceed the storage range [-128, 127]"),
    ([_t("x"), _t("w", data=[1, 2, 3]), _t("y")], [{"op": "add", "inputs": ["x", "w"], "outputs": ["y"]}], ["x"],
     ["y"], "constant 'w': 3 values for shape [2, 3]"),
    ([_t("x"), _t("y", (0, 3))], [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}], ["x"], ["y"],
     "tensor 'y': every dimension must be positive"),
])
def test_invalid_structure_rejected(tensors, ops, inputs, outputs, message):
    with pytest.raises(GraphError) as info:
        _graph(tensors, ops, inputs, outputs).validate()
    assert message in str(info.value)


@pytest.mark.parametrize("tensors, ops, message", [
    ([_t("x"), _t("y", (3, 3))], [{"op": "relu", "name": "r", "inputs": ["x"], "outputs": ["y"]}],
     "op relu 'r': output 'y' has shape [3, 3], expected [2, 3]"),
    ([_t("x"), _t("y", dt="i32")], [{"op": "relu", "name": "r", "inputs": ["x"], "outputs": ["y"]}],
     "op relu 'r': tensor 'y' has dtype i32; expected one of i8, i16"),
    ([_t("x", (1, 4, 4, 2)), _t("w", (3, 1, 1, 5), data={"random": {"seed": 1}}), _t("y", (1, 4, 4, 3))],
     [{"op": "conv2d", "name": "c", "inputs": ["x", "w"], "outputs": ["y"]}],
     "op conv2d 'c': input 'x' has 2 channels, weights 'w' expect 5"),
    ([_t("x", (1, 4, 4, 2)), _t("w", (3, 1, 1, 2), dt="i16", data={"random": {"seed": 1}}), _t("y", (1, 4, 4, 3))],
     [{"op": "conv2d", "name": "c", "inputs": ["x", "w"], "outputs": ["y"]}],
     "op conv2d 'c': tensor 'w' has dtype i16; expected one of i8, i4"),
    ([_t("x", (2, 3), quantized=False), _t("y", (6,), dt="i16", quantized=False)],
     [{"op": "reshape", "name": "rs", "inputs": ["x"], "outputs": ["y"]}],
     "op reshape 'rs': tensor 'x' is i8 but 'y' is i16"),
])
def test_shape_and_dtype_mismatches_rejected_when_planning(tensors, ops, message):
    with pytest.raises(GraphError) as info:
        plan(_graph(tensors, ops))
    assert message in str(info.value)


def test_builder_rejects_early():
    b = GraphBuilder("early")
    x = b.input("x", (1, 4, 4, 2), "i8", scale=0.1)
    with pytest.raises(GraphError, match="tensor 'x' is defined twice"):
        b.input("x", (1,), "i8")
    with pytest.raises(GraphError, match="unknown tensor 'nope'"):
        b.output("nope")
    with pytest.raises(GraphError, match="tensor 'w': data of shape \\[2\\] for shape \\[3\\]"):
        b.tensor("w", (3,), "i8", data=[1, 2])
    with pytest.raises(GraphError, match="op 'conv2d': the window .* is larger than the padded input"):
        b.conv2d(x, Random((2, 5, 5, 2), 1), w_scales=0.1)
    with pytest.raises(GraphError, match="graph 'early' has no outputs"):
        b.build()
