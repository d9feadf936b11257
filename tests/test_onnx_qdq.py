"""ONNX QDQ-format ops (QuantizeLinear / DequantizeLinear around float ops), folded by the shared QDQ folding into the
operator-format ops, generated C == onnxruntime's CPU execution provider bit for bit: grouped convolution with float
weights quantized in the graph (QAT exports) and an int32 bias, Gemm with transB (PyTorch's Linear) and per-channel
weights, MatMul of two activations and with uint8 per-column weights, Pad (its fill value quantized), Add, Mul,
Sigmoid, LeakyRelu, Softmax, the average pools, Concat of two quantizations, data movement (MaxPool, Transpose,
Concat, Flatten) with and without a requantization, and Sub, Tanh, HardSigmoid, HardSwish, Relu, Clip and Resize
linear / cubic (RESIZE_F32), which onnxruntime runs in float between DQ and Q; 16-bit activations around data
movement (uint16 stored as int16) and Add / Sub / Mul (BINARY_F32). With int8 activations onnxruntime runs the groups
whose Q -> DQ pairs are shared in float (docs/onnx.md): the int8 run checks those float paths; the products read
dedicated pairs, which it fuses (a float product may round differently). Many cases in one model (one C build, one
onnxruntime session); the MLPerf-Tiny-shaped QDQ models are in test_onnx_models.py."""

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the ONNX front end needs onnx (pip install 'qcodegen[onnx]')")
pytest.importorskip("onnxruntime", reason="the oracle is onnxruntime (pip install 'qcodegen[oracles]')")

from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.errors import UnsupportedError  # noqa: E402
from qcodegen.frontends.onnx import import_onnx_bytes  # noqa: E402
from qcodegen.verify import get_runner  # noqa: E402
from qcodegen.verify.onnx_oracle import compare_with_oracle, onnxruntime_oracle  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from onnx_cases import NP, Models  # noqa: E402

_FUSED = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Mul", "Sigmoid", "LeakyRelu", "Softmax",
          "AveragePool", "GlobalAveragePool", "Relu", "Clip"}  # folded into another kind


def _qdq(m: Models, x: str, scale: float, zp: int, dt: str) -> str:
    """x -> QuantizeLinear -> DequantizeLinear (a quantized activation, float again)."""
    params = m.qparams(scale, zp, dt)
    return m.node("DequantizeLinear", [m.node("QuantizeLinear", [x, *params]), *params])


def _dq_const(m: Models, values: np.ndarray, dt: str, scale, zp, **attrs) -> str:
    return m.node("DequantizeLinear", [m.const(values, dt), *m.qparams(scale, zp, dt)], **attrs)


def _out(m: Models, x: str, scale: float, zp: int, dt: str) -> None:
    m.output(_qdq(m, x, scale, zp, dt), None, "f32")


def _zp(dt: str, signed: int) -> int:
    return signed if dt == "i8" else signed + 128


def _cases(dt: str) -> bytes:
    m = Models(seed=21 if dt == "i8" else 22)
    x = _qdq(m, m.input((1, 4, 7, 6), "f32"), 0.04, _zp(dt, 3), dt)
    w_scales = m.rng.uniform(0.004, 0.02, 6).astype(np.float32)
    w_q = m.qparams(list(w_scales), [0] * 6, "i8")  # float weights -> Q -> DQ, as QAT exports write them
    w_float = m.const(m.rng.integers(-127, 128, (6, 2, 3, 3)) * w_scales[:, None, None, None] * 1.0003, "f32")
    w = m.node("DequantizeLinear", [m.node("QuantizeLinear", [w_float, *w_q], axis=0), *w_q], axis=0)
    # the bias at the accumulator's scale, as quantize_static writes it (onnxruntime then fuses the group)
    bias = _dq_const(m, m.rng.integers(-2000, 2000, 6), "i32", list(np.float32(0.04) * w_scales), [0] * 6, axis=0)
    # the products read dedicated Q -> DQ pairs: onnxruntime then fuses them also with int8 activations
    conv_x = _qdq(m, m.input((1, 4, 7, 6), "f32"), 0.04, _zp(dt, 3), dt)
    conv = m.node("Conv", [conv_x, w, bias], group=2, pads=[1, 0, 1, 1], strides=[1, 2])
    _out(m, conv, 0.09, _zp(dt, -5), dt)
    a = _qdq(m, m.input((2, 3, 8), "f32"), 0.03, _zp(dt, 2), dt)
    b = _qdq(m, m.input((2, 8, 5), "f32"), 0.05, _zp(dt, -1), dt)
    a_own = _qdq(m, m.input((2, 3, 8), "f32"), 0.03, _zp(dt, 2), dt)
    _out(m, m.node("MatMul", [a_own, b]), 0.2, _zp(dt, 4), dt)
    _out(m, m.node("Mul", [a, _qdq(m, m.input((2, 3, 8), "f32"), 0.06, _zp(dt, 7), dt)]), 0.004, _zp(dt, 1), dt)
    _out(m, m.node("Sigmoid", [a]), 1 / 256, _zp(dt, -128), dt)
    pooled = m.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    _out(m, pooled, 0.04, _zp(dt, 3), dt)  # the same quantization: the DQ -> Q pair disappears
    _out(m, m.node("Transpose", [pooled], perm=[0, 3, 1, 2]), 0.05, _zp(dt, -9), dt)  # a requantization
    _out(m, m.node("Concat", [x, x], axis=1), 0.04, _zp(dt, 3), dt)
    other = _qdq(m, m.input((1, 4, 7, 2), "f32"), 0.09, _zp(dt, 5), dt)
    _out(m, m.node("Concat", [x, other], axis=3), 0.05, _zp(dt, -2), dt)  # two quantizations: QLinearConcat
    _out(m, m.node("Flatten", [x], axis=1), 0.04, _zp(dt, 3), dt)
    rows = _qdq(m, m.input((3, 8), "f32"), 0.05, _zp(dt, -4), dt)  # PyTorch's Linear: Gemm with transB 1
    g_scales = m.rng.uniform(0.004, 0.02, 5).astype(np.float32)
    g_w = _dq_const(m, m.rng.integers(-127, 128, (5, 8)), "i8", list(g_scales), [0] * 5, axis=0)
    g_b = _dq_const(m, m.rng.integers(-900, 900, 5), "i32", list(np.float32(0.05) * g_scales), [0] * 5, axis=0)
    _out(m, m.node("Gemm", [rows, g_w, g_b], transB=1), 0.07, _zp(dt, 6), dt)
    m_w = _dq_const(m, m.rng.integers(0, 256, (8, 4)), "u8", list(m.rng.uniform(0.004, 0.02, 4)), [120, 131, 128, 127],
                    axis=1)  # uint8 weights, per column
    rows_own = _qdq(m, m.input((3, 8), "f32"), 0.05, _zp(dt, -4), dt)
    _out(m, m.node("MatMul", [rows_own, m_w]), 0.1, _zp(dt, 0), dt)
    _out(m, m.node("Pad", [x, m.const([0, 0, 1, 2, 0, 1, 0, 0], "i64"), m.const(np.float32(0.5), "f32")]), 0.04,
         _zp(dt, 3), dt)
    _out(m, m.node("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1]), 0.03, _zp(dt, 1), dt)
    _out(m, m.node("GlobalAveragePool", [x]), 0.02, _zp(dt, 2), dt)
    _out(m, m.node("Softmax", [a], axis=-1), 1 / 256, _zp(dt, -128), dt)
    b_like = _qdq(m, m.input((2, 3, 8), "f32"), 0.07, _zp(dt, -3), dt)
    _out(m, m.node("Add", [a, b_like]), 0.15, _zp(dt, 2), dt)
    _out(m, m.node("LeakyRelu", [a], alpha=0.1), 0.05, _zp(dt, 2), dt)
    _out(m, m.node("Sub", [a, b_like]), 0.09, _zp(dt, -1), dt)  # float in onnxruntime: no QLinear kernel
    _out(m, m.node("Tanh", [a]), 1 / 128, _zp(dt, 0), dt)
    _out(m, m.node("HardSigmoid", [a], alpha=0.3, beta=0.4), 1 / 250, _zp(dt, -128), dt)
    _out(m, m.node("HardSwish", [a]), 0.02, _zp(dt, -100), dt)
    _out(m, m.node("Relu", [a]), 0.02, _zp(dt, -20), dt)  # onnxruntime runs Relu / Clip in float
    _out(m, m.node("Clip", [a, m.const(np.float32(-0.1), "f32"), m.const(np.float32(0.3), "f32")]), 0.003,
         _zp(dt, 0), dt)
    _selection_and_transposed_cases(m, x, a, dt)
    return m.model()


def _selection_and_transposed_cases(m: Models, x: str, a: str, dt: str) -> None:
    """ConvTranspose (onnxruntime runs it in float), MatMul + bias Add as quantize_static writes a Linear layer
    (onnxruntime: QLinearMatMul + QLinearAdd of a [N] bias row), ReduceMean over H, W, and the selections that
    onnxruntime runs on the quantized data: Split, Gather, Resize nearest."""
    t_scales = m.rng.uniform(0.004, 0.02, 3).astype(np.float32)
    t_w = _dq_const(m, m.rng.integers(-127, 128, (4, 3, 3, 2)), "i8", list(t_scales), [0] * 3, axis=1)
    t_b = _dq_const(m, m.rng.integers(-3000, 3000, 3), "i32", list(np.float32(0.04) * t_scales), [0] * 3, axis=0)
    t_x = _qdq(m, m.input((1, 4, 7, 6), "f32"), 0.04, _zp(dt, 3), dt)
    _out(m, m.node("ConvTranspose", [t_x, t_w, t_b], strides=[2, 3], pads=[1, 0, 2, 1], output_padding=[1, 2]),
         0.06, _zp(dt, -4), dt)
    t_w1 = _dq_const(m, m.rng.integers(-127, 128, (4, 2, 2, 2)), "i8", 0.01, 0)
    _out(m, m.node("ConvTranspose", [x, t_w1], strides=[2, 2]), 0.05, _zp(dt, 2), dt)
    rows = _qdq(m, m.node("MatMul", [_qdq(m, m.input((3, 8), "f32"), 0.05, _zp(dt, -4), dt),
                                     _dq_const(m, m.rng.integers(-127, 128, (8, 5)), "i8", 0.01, 0)]), 0.1,
                _zp(dt, 1), dt)
    bias_row = _dq_const(m, m.rng.integers(-120, 120, 5) + (0 if dt == "i8" else 128), dt, 0.02, _zp(dt, 0))
    _out(m, m.node("Add", [rows, bias_row]), 0.12, _zp(dt, -3), dt)
    _out(m, m.node("ReduceMean", [x], axes=[2, 3], keepdims=1), 0.02, _zp(dt, 2), dt)
    _out(m, m.node("ReduceMean", [x], axes=[-1, -2], keepdims=0), 0.03, _zp(dt, 0), dt)
    parts = [m.name("split") for _ in range(3)]
    m.nodes.append(__import__("onnx").helper.make_node("Split", [x, m.const([1, 2, 1], "i64")], parts, axis=1))
    for part in parts:
        _out(m, part, 0.04, _zp(dt, 3), dt)
    _out(m, m.node("Gather", [x, m.const([3, 0, 2, 0], "i64")], axis=1), 0.05, _zp(dt, 1), dt)
    _out(m, m.node("Gather", [a, m.const([[1, -1], [0, 2]], "i64")], axis=1), 0.03, _zp(dt, 2), dt)
    _out(m, m.node("Gather", [x, m.const(4, "i64")], axis=3), 0.04, _zp(dt, 3), dt)
    _out(m, m.node("Resize", [x, "", m.const([1, 1, 2, 2], "f32")], mode="nearest"), 0.04, _zp(dt, 3), dt)
    _out(m, m.node("Resize", [x, "", "", m.const([1, 4, 10, 4], "i64")], mode="nearest",
                   coordinate_transformation_mode="asymmetric", nearest_mode="floor"), 0.05, _zp(dt, 0), dt)
    _out(m, m.node("Resize", [x, "", m.const([1, 1, 1.5, 0.5], "f32")], mode="nearest",
                   coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil"), 0.04,
         _zp(dt, 3), dt)
    # bilinear: onnxruntime's float path (dequantize, float32 weights and sums, QuantizeLinear)
    _out(m, m.node("Resize", [x, "", m.const([1, 1, 2, 2], "f32")], mode="linear"), 0.037, _zp(dt, 1), dt)
    _out(m, m.node("Resize", [x, "", "", m.const([1, 4, 10, 9], "i64")], mode="linear",
                   coordinate_transformation_mode="align_corners"), 0.04, _zp(dt, 3), dt)
    _out(m, m.node("Resize", [x, "", m.const([1, 1, 0.6, 1.7], "f32")], mode="linear",
                   coordinate_transformation_mode="asymmetric"), 0.043, _zp(dt, -2), dt)
    _out(m, m.node("Resize", [x, "", m.const([1, 1, 1.5, 2.5], "f32")], mode="linear",
                   coordinate_transformation_mode="pytorch_half_pixel"), 0.041, _zp(dt, 0), dt)
    _out(m, m.node("Resize", [x, "", m.const([1, 1, 1.5, 2], "f32")], mode="cubic"), 0.045, _zp(dt, 2), dt)
    _out(m, m.node("Resize", [x, "", "", m.const([1, 4, 5, 11], "i64")], mode="cubic", cubic_coeff_a=-0.5,
                   exclude_outside=1, coordinate_transformation_mode="align_corners"), 0.043, _zp(dt, -1), dt)
    for mode in ("linear", "nearest"):  # the same shape: onnxruntime copies, whatever the scales say
        _out(m, m.node("Resize", [x, "", m.const([1, 1, 1.1, 1.05], "f32")], mode=mode), 0.04, _zp(dt, 3), dt)
    # 4-bit weights through com.microsoft DequantizeLinear, as quantize_static writes QInt4 / QUInt4 before opset 21
    # (onnxruntime runs these products in float: scales that are not decimal, whose exact products are rarely ties)
    w4_scales = list(m.rng.uniform(0.02, 0.08, 6))
    w4 = m.node("DequantizeLinear", [_int4(m, m.rng.integers(-8, 8, (6, 4, 3, 3)), True),
                                     *m.qparams(w4_scales, [0] * 6, "i8")[:1], _int4(m, [0] * 6, True)], ms=True,
                axis=0)
    _out(m, m.node("Conv", [_qdq(m, m.input((1, 4, 7, 6), "f32"), 0.0371, _zp(dt, 3), dt), w4], pads=[1, 1, 1, 1]),
         0.2913, _zp(dt, 1), dt)
    u4 = m.node("DequantizeLinear", [_int4(m, m.rng.integers(0, 16, (8, 5)), False),
                                     m.const(np.float32(0.0537), "f32"), _int4(m, 7, False)], ms=True)
    _out(m, m.node("Gemm", [_qdq(m, m.input((3, 8), "f32"), 0.0473, _zp(dt, -4), dt), u4]), 0.1931, _zp(dt, 2),
         dt)
    _sixteen_bit_cases(m, "i16" if dt == "i8" else "u16")


def _sixteen_bit_cases(m: Models, dt: str) -> None:
    """16-bit activations (com.microsoft Q/DQ, as quantize_static writes QInt16 / QUInt16 before opset 21) around
    data movement, Relu and Sigmoid / Tanh / LeakyRelu / HardSigmoid / HardSwish: onnxruntime's float path, which
    the tables of the stored input (65,536 entries) reproduce;
    Add / Sub / Mul (broadcast) and Resize linear / cubic: the float paths BINARY_F32 and RESIZE_F32 emulate."""
    zp = 0 if dt == "i16" else 32768

    def qdq16(x: str, scale: float, offset: int) -> str:
        params = m.qparams(scale, zp + offset, dt)
        return m.node("DequantizeLinear", [m.node("QuantizeLinear", [x, *params], ms=True), *params], ms=True)

    x = qdq16(m.input((1, 4, 7, 6), "f32"), 0.00041, 5)
    m.output(qdq16(m.node("Transpose", [x], perm=[0, 2, 3, 1]), 0.00067, -7), None, "f32")
    m.output(qdq16(m.node("Relu", [x]), 0.00029, 3), None, "f32")
    m.output(qdq16(m.node("Concat", [x, qdq16(m.input((1, 4, 7, 6), "f32"), 0.0005, -3)], axis=1), 0.00061, 0),
             None, "f32")
    m.output(qdq16(m.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2]), 0.00041, 9), None, "f32")
    m.output(qdq16(m.node("Gather", [x, m.const([2, 0], "i64")], axis=1), 0.00043, 0), None, "f32")
    m.output(qdq16(m.node("Resize", [x, "", m.const([1, 1, 2, 1.5], "f32")], mode="nearest"), 0.00041, 5), None,
             "f32")
    y = qdq16(m.input((1, 4, 7, 6), "f32"), 0.00053, -11)
    row = qdq16(m.input((1, 1, 1, 6), "f32"), 0.00037, 2)
    m.output(qdq16(m.node("Add", [x, y]), 0.00071, 4), None, "f32")
    m.output(qdq16(m.node("Sub", [x, row]), 0.00049, -6), None, "f32")
    m.output(qdq16(m.node("Mul", [row, y]), 0.0000071, 1), None, "f32")
    m.output(qdq16(m.node("Resize", [x, "", m.const([1, 1, 1.5, 2], "f32")], mode="linear"), 0.00043, -2), None,
             "f32")
    m.output(qdq16(m.node("Resize", [x, "", m.const([1, 1, 2, 1.5], "f32")], mode="cubic", exclude_outside=1),
                   0.00047, 1), None, "f32")
    wide = qdq16(m.input((1, 4, 7, 6), "f32"), 0.00023, -9)  # inputs up to about +-7.5: every branch of the ops
    m.output(qdq16(m.node("Sigmoid", [wide]), 1 / 65536, -32768), None, "f32")
    m.output(qdq16(m.node("Tanh", [wide]), 1 / 32768, 0), None, "f32")
    m.output(qdq16(m.node("LeakyRelu", [wide], alpha=0.13), 0.00019, -20000), None, "f32")
    m.output(qdq16(m.node("HardSigmoid", [wide], alpha=0.3, beta=0.4), 1 / 65000, -32768), None, "f32")
    m.output(qdq16(m.node("HardSwish", [wide]), 0.00013, -28000), None, "f32")


def _int4(m: Models, values, signed: bool) -> str:
    from onnx import TensorProto, helper
    name = m.name("c4_")
    values = np.asarray(values, np.int64)
    m.inits.append(helper.make_tensor(name, TensorProto.INT4 if signed else TensorProto.UINT4, list(values.shape),
                                      values.reshape(-1).tolist()))
    return name


@pytest.mark.parametrize("dt", ["i8", "u8"])
def test_qdq_cases_bit_exact_with_onnxruntime(dt, tmp_path):
    raw = _cases(dt)
    graph = import_onnx_bytes(raw, f"qdq_{dt}", f"qdq_{dt}")
    kinds = {op.kind for op in graph.ops}
    assert {"onnx.QLinearConv", "onnx.QGemm", "onnx.QLinearMatMul", "onnx.QLinearMul", "onnx.QLinearSigmoid",
            "onnx.MaxPool", "onnx.Pad",
            "onnx.QLinearAveragePool", "onnx.QLinearGlobalAveragePool", "onnx.QLinearSoftmax", "onnx.QLinearAdd",
            "onnx.QLinearLeakyRelu", "onnx.QLinearConcat", "onnx.Requantize", "onnx.QLinearConvTranspose",
            "onnx.Gather", "onnx.Slice"} <= kinds
    assert not {k for k in kinds if k.removeprefix("onnx.") in _FUSED}
    assert all(graph.tensors[op.outputs[0]].quant is not None for op in graph.ops
               if op.kind in ("onnx.Sub", "onnx.Tanh", "onnx.HardSigmoid", "onnx.HardSwish"))
    schedule = plan(graph)
    target = load_target("generic")
    generated = generate(schedule, tmp_path, target)
    result = compare_with_oracle(onnxruntime_oracle(raw), schedule, generated, get_runner(target), samples=6,
                                 seed=5, name="onnxruntime")
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"


def test_unfoldable_qdq_pattern_names_the_node():
    """A float op whose result is not quantized again stays float between quantized values: refused, naming it."""
    m = Models(seed=1)
    a = _qdq(m, m.input((2, 3), "f32"), 0.1, 0, "i8")
    m.nodes.append(__import__("onnx").helper.make_node("Relu", [a], ["plain"], name="act"))
    m.output("plain", None, "f32")
    with pytest.raises(UnsupportedError, match="'act'.*float Relu between quantized values could not be folded"):
        import_onnx_bytes(m.model(), "unfoldable", "unfoldable")


@pytest.mark.parametrize("integer", [False, True])
def test_resize_antialias_and_integer_interpolation_are_refused(integer):
    """Resize cubic with antialias (onnxruntime's separate kernel), and linear on the quantized data itself (the
    operator format: onnxruntime's 8-bit kernel truncates), are errors naming the node."""
    from onnx import helper

    m = Models(seed=4)
    x = m.input((1, 2, 3, 3), "f32")
    a = m.node("QuantizeLinear", [x, *m.qparams(0.1, 0, "i8")]) if integer else _qdq(m, x, 0.1, 0, "i8")
    m.nodes.append(helper.make_node("Resize", [a, "", m.const([1, 1, 2, 2], "f32")], ["big"], name="up",
                                    **({"mode": "linear"} if integer else {"mode": "cubic", "antialias": 1})))
    m.output(m.node("DequantizeLinear", ["big", *m.qparams(0.1, 0, "i8")]) if integer else _qdq(m, "big", 0.1, 0, "i8"),
             None, "f32")
    with pytest.raises(UnsupportedError, match=f"'up'.*{'i8 data' if integer else 'antialias'}"):
        import_onnx_bytes(m.model(), "resize", "resize")


def test_bias_at_the_accumulator_scale_keeps_its_stored_integers():
    """onnxruntime's fused QLinearConv adds the int32 bias initializer as it is; its float value (float32 products)
    divided back by the accumulator scale would lose the low bits of large values."""
    m = Models(seed=3)
    x = _qdq(m, m.input((1, 2, 3, 3), "f32"), 0.03, 0, "u8")
    w_scale = np.float32(0.007)
    stored = np.array([2 ** 25 + 1, -(2 ** 26) - 3, 12345], np.int64)
    w = _dq_const(m, m.rng.integers(-127, 128, (3, 2, 1, 1)), "i8", w_scale, 0)
    bias = _dq_const(m, stored, "i32", np.float32(0.03) * w_scale, 0)
    _out(m, m.node("Conv", [x, w, bias]), 5000.0, 128, "u8")
    graph = import_onnx_bytes(m.model(), "bias", "bias")
    conv = next(op for op in graph.ops if op.kind == "onnx.QLinearConv")
    assert graph.tensors[conv.inputs[2]].data.tolist() == stored.tolist()


def test_per_layer_accuracy_against_the_float_onnx_model(tmp_path):
    """verify --against float --float-model F.onnx: every quantized activation of a QDQ model is compared with the
    float tensor it quantizes (channels-last buffers with the NCHW float tensors: a wrong correspondence would not
    correlate)."""
    from qcodegen import api

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    onnx_models = pytest.importorskip("bench.onnx_models")
    float_model = onnx_models.ds_cnn(channels=8, blocks=1, frames=13)
    (tmp_path / "f.onnx").write_bytes(float_model)
    (tmp_path / "q.onnx").write_bytes(onnx_models.quantize(float_model, True, "int8", reduce_range=True, qdq=True))
    result = api.verify(tmp_path / "q.onnx", against="float", float_model=tmp_path / "f.onnx", samples=4)
    layers = {x.name: x for x in result.layers}
    assert {"relu1_QuantizeLinear_Output", "relu3_QuantizeLinear_Output", "relu5_QuantizeLinear_Output",
            "gemm8_QuantizeLinear_Output"} <= set(layers)
    assert all(x.cosine > 0.9 for x in layers.values()), {k: x.cosine for k, x in layers.items()}
    assert len(result.outputs) == 1 and result.outputs[0].cosine > 0.9


def test_blockwise_weights_of_a_matmul_run_as_block_conv(tmp_path):
    """opset 21 block_size on a MatMul's int4 weights, a Gemm's int8 weights (transB) and a MatMul's int8 weights
    in blocks of 16 over K = 256: the sub-channel scheme's wide form (BLOCK_CONV2D with 24-bit ratios and int64
    sums, RESCALE_F32). The reference equals the real-number product (float64 from the stored values) rounded once
    wherever that product lies further than the schedule notes' bounds from a rounding tie (16-bit ratios miss it
    on ~2% of the last output's elements), and the generated C equals the reference. onnxruntime runs the product
    in float; the differences are measured in docs/onnx.md, not asserted here."""
    from qcodegen import api
    from qcodegen.reference.executor import run_reference
    from qcodegen.verify.check import random_inputs

    m = Models(seed=4)
    w4 = m.rng.integers(-7, 8, (64, 10))
    blocks = m.rng.uniform(0.05, 0.3, (4, 10)).astype(np.float32)
    w = m.node("DequantizeLinear", [_int4(m, w4, True), m.const(blocks, "f32"),
                                    _int4(m, np.zeros((4, 10), np.int64), True)], axis=0, block_size=16)
    a = m.node("DequantizeLinear", [m.input((3, 64), "u8"), *m.qparams(0.0413, 131, "u8")])
    m.output(m.node("QuantizeLinear", [m.node("MatMul", [a, w]), *m.qparams(0.2371, 130, "u8")]), None, "u8")
    w8 = m.rng.integers(-127, 128, (6, 64))  # Gemm with transB: B [N, K] blocked along K (axis 1)
    g_blocks = m.rng.uniform(0.002, 0.02, (6, 2)).astype(np.float32)
    g = m.node("DequantizeLinear", [m.const(w8, "i8"), m.const(g_blocks, "f32"),
                                    m.const(np.zeros((6, 2), np.int64), "i8")], axis=1, block_size=32)
    b = m.node("DequantizeLinear", [m.input((2, 64), "i8"), *m.qparams(0.0271, -3, "i8")])
    m.output(m.node("QuantizeLinear", [m.node("Gemm", [b, g], transB=1), *m.qparams(0.171, 7, "i8")]), None, "i8")
    w16 = m.rng.integers(-127, 128, (256, 16))
    k_blocks = m.rng.uniform(0.002, 0.03, (16, 16)).astype(np.float32)
    k = m.node("DequantizeLinear", [m.const(w16, "i8"), m.const(k_blocks, "f32"),
                                    m.const(np.zeros((16, 16), np.int64), "i8")], axis=0, block_size=16)
    c = m.node("DequantizeLinear", [m.input((4, 256), "i8"), *m.qparams(0.031, 3, "i8")])
    m.output(m.node("QuantizeLinear", [m.node("MatMul", [c, k]), *m.qparams(0.71, -5, "i8")]), None, "i8")
    raw = m.model(21)
    schedule = plan(import_onnx_bytes(raw, "blockwise", "blockwise"))
    ops = [s.op for s in schedule.steps]
    assert ops.count("BLOCK_CONV2D") == 3 and ops.count("RESCALE_F32") == 3
    assert {schedule.buffers[s.outputs[0]].dtype.name for s in schedule.steps if s.op == "BLOCK_CONV2D"} == {"i48"}
    notes = [n for n in schedule.notes if "ratio_error_lsb" in n]
    bounds = [sum(float(part.split(" ")[0]) for part in n.split("<= ")[1:]) for n in notes]
    assert len(bounds) == 3 and max(bounds) < 1e-3
    f64 = lambda v: np.float64(np.float32(v))  # noqa: E731
    reals = [lambda x: (x - 131.0) * f64(0.0413) @ (w4 * np.repeat(blocks, 16, axis=0)) / f64(0.2371) + 130,
             lambda x: (x - -3.0) * f64(0.0271) @ (w8 * np.repeat(g_blocks, 32, axis=1)).T / f64(0.171) + 7,
             lambda x: (x - 3.0) * f64(0.031) @ (w16 * np.repeat(k_blocks, 16, axis=0)) / f64(0.71) - 5]
    rng = np.random.default_rng(1)
    near_ties = 0
    for _ in range(30):
        inputs = random_inputs(schedule, rng)
        values = run_reference(schedule, inputs)
        for real, x, out, bound, (lo, hi) in zip(reals, inputs, schedule.outputs, bounds,
                                                 [(0, 255), (-128, 127), (-128, 127)], strict=True):
            exact = real(x.astype(np.float64))
            far = np.abs(exact - np.floor(exact) - 0.5) > bound + 1e-9  # 1e-9: float64's error on exact
            want = np.clip(np.rint(exact), lo, hi)
            assert np.array_equal(values[out][far], want[far])
            near_ties += int(np.count_nonzero(~far))
    assert near_ties <= 1, near_ties
    (tmp_path / "blockwise.onnx").write_bytes(raw)
    result = api.verify(tmp_path / "blockwise.onnx", against="reference", samples=20)
    assert result.bit_exact, result.first_mismatch


def _sixteen_bit_product_cases() -> tuple[bytes, list[dict]]:
    """16-bit activations into Conv (nonzero zero points, padding, bias; grouped and depthwise), Gemm (transB),
    MatMul with a constant B and ConvTranspose (zero point 0, and a uint16 one off the middle: the zero-point
    channels), int8 weights per channel. Integer graph inputs and outputs: the stored values, for the independent
    computation below."""
    m = Models(seed=16)
    cases = []

    def case(op: str, dt: str, x_shape: tuple[int, ...], zx: int, w_shape: tuple[int, ...], y_zp: int,
             bias: bool = True, **attrs: object) -> None:
        sx, sy = np.float32(m.rng.uniform(1e-4, 3e-4)), np.float32(m.rng.uniform(0.002, 0.02))
        channels = w_shape[0] if op == "Conv" or attrs.get("transB") else w_shape[1]
        sw = m.rng.uniform(0.002, 0.02, channels).astype(np.float32)
        w = m.rng.integers(-30, 128, w_shape)  # mostly positive: accumulators beyond 2^24, where f32(acc) rounds
        b = m.rng.integers(-200000, 200000, channels)
        x = m.input(x_shape, dt)
        xd = m.node("DequantizeLinear", [x, *m.qparams(sx, zx, dt)], ms=True)
        axis = {"Conv": 0, "ConvTranspose": 1, "MatMul": 1, "Gemm": 0 if attrs.get("transB") else 1}[op]
        wd = _dq_const(m, w, "i8", list(sw), [0] * channels, axis=axis)
        inputs = [xd, wd] + ([_dq_const(m, b, "i32", list(sx * sw), [0] * channels, axis=0)] if bias else [])
        y = m.node("QuantizeLinear", [m.node(op, inputs, **attrs), *m.qparams(sy, y_zp, dt)], ms=True)
        m.output(y, None, dt)
        cases.append(dict(op=op, dt=dt, zx=zx, w=w, b=b if bias else np.zeros(channels, np.int64),
                          scale=np.float32(sx * sw) / sy, y_zp=y_zp, attrs=attrs))

    case("Conv", "i16", (1, 4, 7, 6), 1234, (6, 4, 3, 3), -321, pads=[1, 0, 1, 1], strides=[1, 2])
    case("Conv", "u16", (1, 4, 6, 6), 40000, (6, 2, 3, 3), 33000, group=2, pads=[1, 1, 1, 1])
    case("Conv", "u16", (1, 3, 5, 5), 29000, (3, 1, 3, 3), 30000, group=3, pads=[1, 1, 1, 1])
    case("Gemm", "u16", (3, 40), 51000, (5, 40), 31000, transB=1)
    case("MatMul", "i16", (2, 3, 40), -900, (40, 5), 77, bias=False)
    case("ConvTranspose", "i16", (1, 3, 4, 4), 0, (3, 4, 3, 3), 12, strides=[2, 2], pads=[1, 1, 0, 0],
         output_padding=[1, 1])
    case("ConvTranspose", "u16", (1, 3, 4, 4), 41000, (3, 4, 3, 3), 30000, strides=[2, 2], pads=[1, 0, 0, 1])
    return m.model(21), cases


def _exact_accumulator(case: dict, x: np.ndarray) -> np.ndarray:
    """sum (x - zx) * w + bias in float64 by onnx's reference evaluator (exact: integers below 2^53)."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    op, w = case["op"], case["w"].astype(np.float64)
    inits = [numpy_helper.from_array(w, "w")]
    inputs = ["x", "w"]
    if op in ("Conv", "ConvTranspose", "Gemm"):
        inits.append(numpy_helper.from_array(case["b"].astype(np.float64), "b"))
        inputs.append("b")
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], **case["attrs"])], "acc",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None)],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    (acc,) = ReferenceEvaluator(model).run(None, {"x": x.astype(np.float64) - case["zx"]})
    return np.asarray(acc)


def test_sixteen_bit_activations_into_products(tmp_path):
    """int16 / uint16 activations into Conv, Gemm, MatMul, ConvTranspose (i16 x i8 products, i48 accumulator,
    the zero point folded into the bias, RESCALE_F32 of the int64 accumulator): the numpy reference equals
    round_half_even(f32(f32(acc) * f32(x_scale * w_scale) / y_scale)) + zp of the accumulator computed
    independently (onnx's evaluator in float64), and the generated C equals the reference."""
    from qcodegen import api
    from qcodegen.reference.executor import run_reference
    from qcodegen.verify.check import random_inputs

    raw, cases = _sixteen_bit_product_cases()
    schedule = plan(import_onnx_bytes(raw, "sixteen", "sixteen"))
    assert {s.inputs[0] for s in schedule.steps if s.op == "RESCALE_F32"} <= {
        n for n, b in schedule.buffers.items() if b.dtype.name == "i48"}
    rng, largest = np.random.default_rng(0), 0.0
    for _ in range(3):
        inputs = random_inputs(schedule, rng)
        values = run_reference(schedule, inputs)
        for case, x, out in zip(cases, inputs, schedule.outputs, strict=True):
            acc = _exact_accumulator(case, x)
            largest = max(largest, float(np.abs(acc).max()))
            shape = [1] * acc.ndim
            shape[1 if case["op"] in ("Conv", "ConvTranspose") else -1] = -1
            product = acc.astype(np.float32) * case["scale"].reshape(shape)
            info = np.iinfo(NP[case["dt"]])
            want = np.clip(np.rint(product) + case["y_zp"], info.min, info.max)
            assert np.array_equal(values[out].astype(np.int64), want.astype(np.int64)), case["op"]
    assert 2 ** 24 < largest < 2 ** 47  # some accumulators lose bits in f32(acc); all fit the i48 accumulator
    (tmp_path / "sixteen.onnx").write_bytes(raw)
    result = api.verify(tmp_path / "sixteen.onnx", against="reference", samples=20)
    assert result.bit_exact, result.first_mismatch
