"""The TOSA front ends (.tosa flatbuffers and TOSA MLIR text) and the tosa.* lowering rules.

Graphs are written with tosa-tools' serializer, compiled to C by qcodegen and compared bit for bit with the TOSA
reference model running the same file; the MLIR reader must build the same graph from `tosa-opt --tosa-deserialize`
output and from hand-written text. Also: constant data decoding, shape operands, ERROR_IF / REQUIRE / unsupported
classification."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ts = pytest.importorskip("tosa_serializer", reason="needs tosa-tools (pip install '.[oracles]')")
trm = pytest.importorskip("tosa_reference_model", reason="needs tosa-tools (pip install '.[oracles]')")

from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.errors import GraphError, UnsupportedError  # noqa: E402
from qcodegen.fixedpoint import Unpredictable  # noqa: E402
from qcodegen.frontends import load_model  # noqa: E402
from qcodegen.frontends.tosa import decode_data, load_tosa  # noqa: E402
from qcodegen.frontends.tosa_mlir import load_tosa_mlir  # noqa: E402
from qcodegen.verify import get_runner  # noqa: E402

DT = ts.DType
NUMPY = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "BOOL": np.bool_}


class Builder:
    """A TOSA graph written with tosa-tools' serializer (TOSA 1.0)."""

    def __init__(self) -> None:
        self.ser = ts.TosaSerializer("", ts.ConstMode.EMBED, 1, 0, 0, False)
        self.inputs: list[tuple[str, list[int], str]] = []
        self.n = 0

    def input(self, shape: list[int], dtype: str) -> str:
        name = f"in{len(self.inputs)}"
        self.ser.addInputTensor(ts.TosaSerializerTensor(name, shape, getattr(DT, dtype)))
        self.inputs.append((name, shape, dtype))
        return name

    def const(self, values, dtype: str) -> str:
        arr = np.asarray(values)
        self.n += 1
        name = f"c{self.n}"
        store = np.int64 if dtype == "SHAPE" else NUMPY[dtype]
        self.ser.addConst(list(arr.shape), getattr(DT, dtype), arr.astype(store), name=name)
        return name

    def zp(self, value: int, dtype: str = "INT8") -> str:
        return self.const([value], dtype)

    def temp(self, shape: list[int], dtype: str) -> str:
        return self.ser.addIntermediate(shape, getattr(DT, dtype)).name

    def output(self, shape: list[int], dtype: str) -> str:
        return self.ser.addOutput(shape, getattr(DT, dtype)).name

    def op(self, name: str, inputs: list[str], output: str, attr: str | None = None, *args) -> str:
        a = ts.TosaSerializerAttribute()
        getattr(a, attr or "".join(p.capitalize() for p in name.split("_")) + "Attribute")(*args)
        self.ser.addOperator(getattr(ts.Op, name), inputs, [output], a)
        return output

    def save(self, path: Path) -> Path:
        path.write_bytes(bytes(self.ser.serialize()))
        return path

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        arrays = []
        for _, shape, dtype in self.inputs:
            if dtype == "BOOL":
                arrays.append(rng.integers(0, 1, size=shape, endpoint=True).astype(np.bool_))
            else:
                info = np.iinfo(NUMPY[dtype])
                arrays.append(rng.integers(info.min, info.max, size=shape, endpoint=True).astype(NUMPY[dtype]))
        return arrays


def reference_model(path: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    outs, status = trm.run(path.read_bytes(), inputs)
    assert status == trm.GraphStatus.TOSA_VALID
    return [np.asarray(o) for o in outs]


def qcodegen_outputs(graph, inputs: list[np.ndarray], tmp: Path) -> list[np.ndarray]:
    schedule = plan(graph)
    target = load_target("generic")
    model = generate(schedule, tmp / "c", target)
    outputs, _ = get_runner(target).run(model, inputs)
    return outputs


def assert_same_as_reference(path: Path, inputs: list[np.ndarray], tmp: Path, graph=None) -> None:
    ours = qcodegen_outputs(graph or load_tosa(path), inputs, tmp)
    ref = reference_model(path, inputs)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref, strict=True):
        assert a.shape == b.shape and np.array_equal(a, b.astype(a.dtype)), f"{a} != {b}"


# ---- graphs ----------------------------------------------------------------------------------------------------

def conv_block() -> Builder:
    """CONV2D (zero points, padding, stride) -> per-channel double-round RESCALE -> CLAMP, and AVG_POOL2D."""
    b = Builder()
    x = b.input([1, 5, 6, 3], "INT8")
    rng = np.random.default_rng(1)
    w = b.const(rng.integers(-128, 127, size=(4, 3, 3, 3)), "INT8")
    bias = b.const(rng.integers(-3000, 3000, size=4), "INT32")
    acc = b.op("CONV2D", [x, w, bias, b.zp(-7), b.zp(3)], b.temp([1, 3, 6, 4], "INT32"), None,
               [1, 1, 1, 1], [2, 1], [1, 1], False, DT.INT32)
    r = b.op("RESCALE", [acc, b.const([1 << 30, 1518500250, 1073741824 + 7, 2000000000], "INT32"),
                         b.const([40, 41, 39, 42], "INT8"), b.zp(0, "INT32"), b.zp(-5)], b.temp([1, 3, 6, 4], "INT8"),
             None, True, ts.RoundingMode.DOUBLE_ROUND, True, False, False)
    lo, hi = (ts.TosaSerializer.convertDataToUint8Vec(DT.INT8, [v]) for v in (-100, 90))
    b.op("CLAMP", [r], b.output([1, 3, 6, 4], "INT8"), None, lo, hi, ts.NanPropagationMode.PROPAGATE)
    b.op("AVG_POOL2D", [x, b.zp(-128), b.zp(10)], b.output([1, 5, 3, 3], "INT8"), None, [3, 2], [1, 2],
         [1, 1, 0, 0], DT.INT32)
    return b


def integer_ops() -> Builder:
    """Shifts, bitwise ops, comparisons, SELECT, NEGATE with zero points, CLZ, INTDIV, CAST to and from bool."""
    b = Builder()
    x = b.input([2, 3, 4], "INT32")
    y = b.input([2, 1, 4], "INT8")
    shifted = b.op("ARITHMETIC_RIGHT_SHIFT", [x, b.const(np.full((1, 1, 4), 3), "INT32")], b.temp([2, 3, 4], "INT32"),
                   None, True)
    masked = b.op("BITWISE_AND", [shifted, b.const(np.full((1, 1, 1), 0x00FF00FF), "INT32")],
                  b.temp([2, 3, 4], "INT32"))
    big = b.op("GREATER", [masked, b.const(np.full((1, 1, 1), 1 << 20), "INT32")], b.temp([2, 3, 4], "BOOL"))
    b.op("SELECT", [big, x, b.op("CLZ", [x], b.temp([2, 3, 4], "INT32"))], b.output([2, 3, 4], "INT32"))
    neg = b.op("NEGATE", [y, b.zp(-3), b.zp(9)], b.temp([2, 1, 4], "INT8"))
    b.op("LOGICAL_LEFT_SHIFT", [neg, b.const(np.full((2, 1, 4), 5), "INT8")], b.output([2, 1, 4], "INT8"))
    b.op("INTDIV", [x, b.const(np.array([7, -3, 1000, -1]).reshape(1, 1, 4), "INT32")], b.output([2, 3, 4], "INT32"),
         "IntDivAttribute")
    as_bool = b.op("CAST", [y], b.temp([2, 1, 4], "BOOL"))
    b.op("CAST", [b.op("LOGICAL_NOT", [as_bool], b.temp([2, 1, 4], "BOOL"))], b.output([2, 1, 4], "INT16"))
    return b


def movement() -> Builder:
    """PAD (a shape operand and pad_const) -> TILE -> REVERSE -> SLICE -> RESHAPE, GATHER, RESIZE + RESCALE."""
    b = Builder()
    x = b.input([1, 2, 3, 2], "INT8")
    padded = b.op("PAD", [x, b.const([0, 0, 1, 0, 0, 2, 0, 0], "SHAPE"), b.zp(-9)], b.temp([1, 3, 5, 2], "INT8"))
    tiled = b.op("TILE", [padded, b.const([2, 1, 1, 2], "SHAPE")], b.temp([2, 3, 5, 4], "INT8"))
    rev = b.op("REVERSE", [tiled], b.temp([2, 3, 5, 4], "INT8"), None, 2)
    sliced = b.op("SLICE", [rev, b.const([1, 0, 1, 1], "SHAPE"), b.const([1, 3, 3, 2], "SHAPE")],
                  b.temp([1, 3, 3, 2], "INT8"))
    b.op("RESHAPE", [sliced, b.const([3, 6], "SHAPE")], b.output([3, 6], "INT8"))
    values = b.input([2, 4, 3], "INT16")
    idx = b.const(np.array([[3, 0, 3], [1, 2, 0]]), "INT32")
    b.op("GATHER", [values, idx], b.output([2, 3, 3], "INT16"))
    up = b.op("RESIZE", [x, b.const([4, 2, 3, 1], "SHAPE"), b.const([-1, 0], "SHAPE"), b.const([1, 0], "SHAPE")],
              b.temp([1, 4, 7, 2], "INT32"), None, ts.ResizeMode.BILINEAR)
    b.op("RESCALE", [up, b.const([1 << 30], "INT32"), b.const([33], "INT8"), b.zp(0, "INT32"), b.zp(0)],
         b.output([1, 4, 7, 2], "INT8"), None, True, ts.RoundingMode.SINGLE_ROUND, False, False, False)
    return b


GRAPHS = {"conv_block": conv_block, "integer_ops": integer_ops, "movement": movement}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_c_matches_the_reference_model(name, tmp_path):
    b = GRAPHS[name]()
    path = b.save(tmp_path / f"{name}.tosa")
    for seed in (0, 1):
        inputs = b.random_inputs(seed)
        if name == "integer_ops":  # keep INTDIV's REQUIRE (no INT32_MIN / -1)
            inputs[0] = np.maximum(inputs[0], np.int32(-(1 << 31) + 1))
        assert_same_as_reference(path, inputs, tmp_path)


def _tosa_opt() -> str | None:
    return shutil.which("tosa-opt")


@pytest.mark.skipif(_tosa_opt() is None, reason="tosa-opt (tosa-tools) is not on PATH")
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_mlir_reader_builds_the_same_graph(name, tmp_path):
    path = GRAPHS[name]().save(tmp_path / f"{name}.tosa")
    empty = tmp_path / "empty.mlir"
    empty.write_text("module {}\n")
    text = subprocess.run([_tosa_opt(), f"--tosa-deserialize=tosa-flatbuffer-filename={path}", str(empty)],
                          check=True, capture_output=True, text=True).stdout
    mlir = tmp_path / f"{name}.mlir"  # (tosa-opt prints a version warning on stdout: not MLIR)
    mlir.write_text("\n".join(line for line in text.splitlines() if not line.startswith("WARNING")))
    assert canonical(load_tosa_mlir(mlir)) == canonical(load_tosa(path))


def canonical(graph):
    """The graph with its internal tensor names replaced by their order of first use."""
    names = {n: n for n in graph.inputs + graph.outputs}
    for op in graph.ops:
        for n in op.inputs + op.outputs:
            names.setdefault(n, f"t{len(names)}")
    tensors = {names[n]: (t.shape, t.dtype.name, None if t.data is None else t.data.tolist())
               for n, t in graph.tensors.items() if n in names}
    return ([(o.kind, [names[n] for n in o.inputs], [names[n] for n in o.outputs], o.attrs) for o in graph.ops],
            tensors, graph.inputs, graph.outputs)


HAND_WRITTEN = """
module {
  func.func @main(%arg0: tensor<2x3xi8> {tosa.tensor_name = "x"}) -> (tensor<2x3xi8> {tosa.tensor_name = "y"}) {
    %m = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
    %s = "tosa.const"() <{values = dense<31> : tensor<1xi8>}> : () -> tensor<1xi8>
    %zi = "tosa.const"() <{values = dense<-1> : tensor<1xi8>}> : () -> tensor<1xi8>
    %zo = "tosa.const"() <{values = dense<4> : tensor<1xi8>}> : () -> tensor<1xi8>
    %shape = tosa.const_shape {values = dense<[3, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
    %0 = tosa.rescale %arg0, %m, %s, %zi, %zo {input_unsigned = false, output_unsigned = false,
        per_channel = false, rounding_mode = SINGLE_ROUND, scale32 = true}
        : (tensor<2x3xi8>, tensor<1xi32>, tensor<1xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<2x3xi8>
    %1 = tosa.reshape %0, %shape : (tensor<2x3xi8>, !tosa.shape<2>) -> tensor<3x2xi8>
    %2 = tosa.clamp %1 {max_val = 20 : i8, min_val = -20 : i8} : (tensor<3x2xi8>) -> tensor<3x2xi8>
    %3 = tosa.transpose %2 {perms = array<i32: 1, 0>} : (tensor<3x2xi8>) -> tensor<2x3xi8>
    return %3 : tensor<2x3xi8>
  }
}
"""


def test_hand_written_mlir(tmp_path):
    path = tmp_path / "hand.mlir"
    path.write_text(HAND_WRITTEN)
    graph = load_tosa_mlir(path)
    assert [op.kind for op in graph.ops] == ["tosa.rescale", "tosa.reshape", "tosa.clamp", "tosa.transpose"]
    assert graph.ops[1].attrs == {"shape": [3, 2]} and graph.ops[2].attrs["min_val"] == -20
    assert graph.inputs == ["x"] and graph.outputs == ["y"]
    x = np.array([[-128, -1, 0], [5, 40, 127]], np.int8)
    # (x + 1) * 2^30 / 2^31 rounded half up, + 4, then clamped to [-20, 20]; reshape + transpose undo each other
    # only as far as the element order goes: out[i][j] = v[j * 2 + i] of the flattened rescaled values
    v = np.clip(np.floor((x.astype(np.int64) + 1) / 2 + 0.5).astype(np.int64) + 4, -20, 20).reshape(3, 2).T
    assert np.array_equal(qcodegen_outputs(graph, [x], tmp_path)[0], v)


# ---- constant data, shapes, attributes --------------------------------------------------------------------------

def test_decode_data():
    assert decode_data(bytes([0xE1, 0x07]), "INT4", 3, "t").tolist() == [1, -2, 7]  # low nibble first
    six = (1).to_bytes(6, "little") + (-2 % (1 << 48)).to_bytes(6, "little")
    assert decode_data(six, "INT48", 2, "t").tolist() == [1, -2]
    assert decode_data(bytes([1, 0, 1]), "BOOL", 3, "t").tolist() == [1, 0, 1]
    assert decode_data((-3).to_bytes(8, "little", signed=True), "SHAPE", 1, "t").tolist() == [-3]
    with pytest.raises(GraphError, match="bytes"):
        decode_data(bytes(3), "INT32", 1, "t")


def test_reader_attributes_and_shapes(tmp_path):
    graph = load_model(movement().save(tmp_path / "m.tosa"))  # the .tosa dispatch
    ops = {op.kind: op for op in graph.ops}
    assert ops["tosa.pad"].attrs == {"padding": [0, 0, 1, 0, 0, 2, 0, 0]} and len(ops["tosa.pad"].inputs) == 2
    assert ops["tosa.resize"].attrs == {"mode": "BILINEAR", "scale": [4, 2, 3, 1], "offset": [-1, 0],
                                        "border": [1, 0]}
    assert ops["tosa.rescale"].attrs["rounding_mode"] == "SINGLE_ROUND"
    conv = {op.kind: op for op in load_tosa(conv_block().save(tmp_path / "c.tosa")).ops}
    assert conv["tosa.conv2d"].attrs == {"acc_type": "i32", "dilation": [1, 1], "local_bound": False,
                                         "pad": [1, 1, 1, 1], "stride": [2, 1]}
    assert (conv["tosa.clamp"].attrs["min_val"], conv["tosa.clamp"].attrs["max_val"]) == (-100, 90)


def test_shape_operators_are_evaluated(tmp_path):
    b = Builder()
    x = b.input([2, 3], "INT16")
    dim = b.op("DIM", [x], b.ser.addIntermediateShape(1).name, None, 1)
    shape = b.op("CONCAT_SHAPE", [b.const([2], "SHAPE"), dim], b.ser.addIntermediateShape(2).name)
    b.op("RESHAPE", [b.input([6], "INT16"), shape], b.output([2, 3], "INT16"))
    graph = load_tosa(b.save(tmp_path / "s.tosa"))
    assert [op.kind for op in graph.ops] == ["tosa.reshape"] and graph.ops[0].attrs == {"shape": [2, 3]}
    assert graph.inputs == ["in1"]  # in0 is read only for its shape (DIM)


def test_constant_graph_output_is_copied(tmp_path):
    b = Builder()
    b.ser.addOutputTensor(b.ser.addConst([1, 3], DT.INT8, np.array([[1, -2, 3]], np.int8), name="k"))
    graph = load_tosa(b.save(tmp_path / "k.tosa"))
    assert [op.kind for op in graph.ops] == ["tosa.identity"] and graph.inputs == [] and graph.outputs == ["k"]
    assert qcodegen_outputs(graph, [], tmp_path)[0].tolist() == [[1, -2, 3]]


# ---- what is rejected, and how ----------------------------------------------------------------------------------

def _rescale(shift: int = 30, zp_const: bool = True, zp_shape=(1,)) -> Builder:
    b = Builder()
    x = b.input([2, 2], "INT8")
    zp = b.const(np.zeros(zp_shape), "INT8") if zp_const else b.input(list(zp_shape), "INT8")
    b.op("RESCALE", [x, b.const([1 << 30], "INT32"), b.const([shift], "INT8"), zp, b.zp(0)],
         b.output([2, 2], "INT8"), None, True, ts.RoundingMode.SINGLE_ROUND, False, False, False)
    return b


def test_run_time_zero_point_is_unsupported(tmp_path):
    with pytest.raises(UnsupportedError, match="must be a constant"):
        plan(load_tosa(_rescale(zp_const=False).save(tmp_path / "r.tosa")))


def test_zero_point_must_be_a_one_element_vector(tmp_path):
    with pytest.raises(GraphError, match=r"must have shape \[1\]"):
        plan(load_tosa(_rescale(zp_shape=(1, 1)).save(tmp_path / "r.tosa")))


def test_plan_time_require_is_unpredictable(tmp_path):
    with pytest.raises(Unpredictable, match="shift in"):
        plan(load_tosa(_rescale(shift=63).save(tmp_path / "r.tosa")))


def test_error_if_is_rejected_before_code_generation(tmp_path):
    b = Builder()
    x = b.input([1, 4, 4, 1], "INT8")
    b.op("MAX_POOL2D", [x], b.output([1, 2, 2, 1], "INT8"), None, [2, 2], [3, 3], [0, 0, 0, 0],
         ts.NanPropagationMode.PROPAGATE)
    with pytest.raises(GraphError, match="not divisible by stride"):
        plan(load_tosa(b.save(tmp_path / "p.tosa")))


def test_level_limit_on_rank(tmp_path):
    b = Builder()
    x = b.input([1] * 7, "INT8")
    b.op("REVERSE", [x], b.output([1] * 7, "INT8"), None, 0)
    with pytest.raises(GraphError, match="level 8K"):
        plan(load_tosa(b.save(tmp_path / "r.tosa")))


def test_wrong_operand_list_is_an_error(tmp_path):
    b = Builder()
    x = b.input([2], "INT32")
    b.op("ADD", [x, x, x], b.output([2], "INT32"))
    with pytest.raises(GraphError, match="expects 2 input"):
        plan(load_tosa(b.save(tmp_path / "a.tosa")))


def test_unsupported_type(tmp_path):
    b = Builder()
    b.ser.addInputTensor(ts.TosaSerializerTensor("x", [2], DT.FP16))
    b.op("CAST", ["x"], b.output([2], "INT8"))
    with pytest.raises(UnsupportedError, match="FP16 is not supported"):
        load_tosa(b.save(tmp_path / "f.tosa"))


def test_unsupported_operator(tmp_path):
    b = Builder()
    b.ser.addInputTensor(ts.TosaSerializerTensor("x", [2], DT.FP32))
    b.op("ERF", ["x"], b.output([2], "FP32"))
    with pytest.raises(UnsupportedError, match="unsupported operators: tosa.erf"):
        plan(load_tosa(b.save(tmp_path / "e.tosa")))


def test_not_a_tosa_file(tmp_path):
    path = tmp_path / "x.tosa"
    path.write_bytes(b"\x10\x00\x00\x00TFL3" + bytes(16))
    with pytest.raises(GraphError, match="not a TOSA flatbuffer"):
        load_tosa(path)
