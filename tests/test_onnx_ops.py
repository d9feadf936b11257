"""ONNX operator-format ops, generated C == onnxruntime's CPU execution provider, bit for bit. Each model holds many
independent cases (one C build, one onnxruntime session): QLinearConv (groups, depthwise with a multiplier,
strides, dilations, asymmetric and SAME padding, per-channel), QLinearMatMul (constant and variable B), QGemm
(transposes, alpha, bias, float result), the com.microsoft element-wise ops and pools, QLinearSoftmax of both
opset semantics, data movement, and the float boundary (Quantize/DequantizeLinear per axis)."""

import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the ONNX front end needs onnx (pip install 'qcodegen[onnx]')")
pytest.importorskip("onnxruntime", reason="the oracle is onnxruntime (pip install 'qcodegen[oracles]')")

from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.frontends.onnx import import_onnx_bytes  # noqa: E402
from qcodegen.verify import get_runner  # noqa: E402
from qcodegen.verify.check import random_inputs, verify_schedule  # noqa: E402
from qcodegen.verify.onnx_oracle import compare_with_oracle, onnxruntime_oracle  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from onnx_cases import NP, Models  # noqa: E402


def _conv(m: Models, dt: str, x_shape, w_shape, per_channel: bool, **attrs) -> None:
    x = m.input(x_shape, dt)
    oc = w_shape[0]
    w_scale = list(m.rng.uniform(0.002, 0.02, oc)) if per_channel else 0.01
    w_zp = [0] * oc if per_channel else 0
    x_q = m.qparams(0.05, 3 if dt == "i8" else 131, dt)
    y_q = m.qparams(0.11, -7 if dt == "i8" else 120, dt)
    bias = m.const(m.rng.integers(-3000, 3000, oc), "i32")
    w = m.weights(w_shape, "i8")
    y = m.node("QLinearConv", [x, *x_q, w, *m.qparams(w_scale, w_zp, "i8"), *y_q, bias], **attrs)
    m.output(y, None, dt)


def _matmul(m: Models, dt: str, a_shape, b_shape, const_b: bool) -> None:
    a = m.input(a_shape, dt)
    b = m.weights(b_shape, dt) if const_b else m.input(b_shape, dt)
    y = m.node("QLinearMatMul", [a, *m.qparams(0.03, 5 if dt == "i8" else 128, dt), b,
                                 *m.qparams(0.02, -2 if dt == "i8" else 126, dt), *m.qparams(0.4, 1, dt)])
    m.output(y, None, dt)


def _qgemm(m: Models, dt: str, float_out: bool) -> None:
    a = m.input((3, 20), dt)
    b = m.weights((7, 20), "i8")
    c = m.const(m.rng.integers(-500, 500, 7), "i32")
    b_q = m.qparams(list(m.rng.uniform(0.005, 0.02, 7)), [0] * 7, "i8")
    y_q = [] if float_out else m.qparams(0.3, 4 if dt == "i8" else 130, dt)
    y = m.node("QGemm", [a, *m.qparams(0.04, 2 if dt == "i8" else 128, dt), b, *b_q, c, *y_q], ms=True,
               transB=1, alpha=0.75)
    m.output(y, None, "f32" if float_out else dt)


def _binary(m: Models, op: str, dt: str, b_shape) -> None:
    a = m.input((2, 5, 7), dt)
    b = m.input(b_shape, dt)
    zp = (4, -9, 1) if dt == "i8" else (120, 140, 128)
    y = m.node(op, [a, *m.qparams(0.031, zp[0], dt), b, *m.qparams(0.047, zp[1], dt),
                    *m.qparams(0.06 if op == "QLinearAdd" else 0.012, zp[2], dt)], ms=True)
    m.output(y, None, dt)


def _unary(m: Models, op: str, dt: str, **attrs) -> None:
    x = m.input((3, 50), dt)
    out_q = m.qparams(1 / 256, -128 if dt == "i8" else 0, dt) if op == "QLinearSigmoid" else m.qparams(0.02, 3, dt)
    y = m.node(op, [x, *m.qparams(0.07, 10 if dt == "i8" else 135, dt), *out_q], ms=True, **attrs)
    m.output(y, None, dt)


def _pools(m: Models, dt: str) -> None:
    x = m.input((1, 6, 9, 8), dt)
    x_q = m.qparams(0.05, 2 if dt == "i8" else 127, dt)
    glob = m.node("QLinearGlobalAveragePool", [x, *x_q, *m.qparams(0.013, 1 if dt == "i8" else 129, dt)], ms=True)
    m.output(glob, None, dt)
    mx = m.node("MaxPool", [m.node("QLinearConv", [x, *x_q, m.weights((4, 6, 1, 1), "i8"),
                                                   *m.qparams(0.01, 0, "i8"), *m.qparams(0.2, 0, dt)])],
                kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    m.output(mx, None, dt)


def _softmax(m: Models, dt: str) -> None:
    zp_out = -128 if dt == "i8" else 0
    x = m.input((2, 10), dt)
    y = m.node("QLinearSoftmax", [x, *m.qparams(0.15, 0, dt), *m.qparams(1 / 256, zp_out, dt)], ms=True,
               axis=1, opset=13)
    m.output(y, None, dt)
    x4 = m.input((1, 3, 2, 4), dt)
    y4 = m.node("QLinearSoftmax", [x4, *m.qparams(0.06, 5 if dt == "i8" else 130, dt),
                                   *m.qparams(1 / 256, zp_out, dt)], ms=True, axis=1, opset=12)
    m.output(y4, None, dt)
    y5 = m.node("QLinearSoftmax", [x4, *m.qparams(0.06, 5 if dt == "i8" else 130, dt),
                                   *m.qparams(1 / 128, zp_out, dt)], ms=True, axis=2, opset=13)
    m.output(y5, None, dt)


def _movement(m: Models, dt: str) -> None:
    x = m.input((1, 4, 6, 5), dt)
    x_q = m.qparams(0.05, 3 if dt == "i8" else 128, dt)
    conv = m.node("QLinearConv", [x, *x_q, m.weights((6, 4, 3, 3), "i8"), *m.qparams(0.01, 0, "i8"),
                                  *x_q], pads=[1, 1, 1, 1])  # NHWC inside, NCHW for what follows
    m.output(m.node("Flatten", [conv], axis=1), None, dt)
    m.output(m.node("Transpose", [conv], perm=[0, 2, 3, 1]), None, dt)
    m.output(m.node("Slice", [conv, m.const([1, 0], "i32"), m.const([6, 5], "i32"), m.const([2, 3], "i32"),
                              m.const([2, 2], "i32")]), None, dt)
    m.output(m.node("Pad", [conv, m.const([0, 0, 1, 2, 0, 1, 0, 0], "i64"), m.const(3 if dt == "i8" else 128, dt)]),
             None, dt)
    concat = m.node("QLinearConcat", [*m.qparams(0.07, 0 if dt == "i8" else 128, dt), conv, *x_q, x, *x_q, conv,
                                      *m.qparams(0.05, 3 if dt == "i8" else 128, dt)], ms=True, axis=1)
    m.output(concat, None, dt)
    flat = m.node("Squeeze", [m.node("Reshape", [x, m.const([1, 1, 120], "i64")]), m.const([0, 1], "i64")])
    m.output(m.node("Unsqueeze", [flat, m.const([0], "i64")]), None, dt)


def _boundary(m: Models) -> None:
    x = m.input((2, 3, 4), "f32")
    q = m.node("QuantizeLinear", [x, m.const([0.02, 0.05, 0.011], "f32"), m.const([3, -2, 0], "i8")], axis=1)
    m.output(m.node("DequantizeLinear", [q, m.const([0.02, 0.05, 0.011], "f32"), m.const([3, -2, 0], "i8")],
                    axis=1), None, "f32")
    m.output(q, None, "i8")


@pytest.fixture(scope="module", params=["i8", "u8"])
def models(request):
    dt = request.param
    m = Models(seed=11 if dt == "i8" else 12)
    _conv(m, dt, (1, 3, 9, 9), (8, 3, 3, 3), True, pads=[1, 1, 1, 1])
    _conv(m, dt, (2, 4, 11, 10), (5, 4, 3, 2), False, pads=[0, 1, 1, 0], strides=[2, 2], dilations=[2, 1])
    _conv(m, dt, (1, 6, 7, 8), (12, 1, 3, 3), True, group=6, auto_pad="SAME_UPPER", strides=[2, 1])
    _conv(m, dt, (1, 4, 6, 6), (6, 2, 3, 3), True, group=2, pads=[2, 2, 2, 2], dilations=[2, 2])
    _matmul(m, dt, (2, 3, 24), (24, 9), const_b=True)
    _matmul(m, dt, (2, 5, 6), (2, 6, 4), const_b=False)
    _qgemm(m, dt, float_out=False)
    _qgemm(m, dt, float_out=True)
    for op in ("QLinearAdd", "QLinearMul"):
        _binary(m, op, dt, (2, 5, 7))
    _binary(m, "QLinearAdd", dt, (1,))
    _unary(m, "QLinearSigmoid", dt)
    _unary(m, "QLinearLeakyRelu", dt, alpha=0.13)
    _pools(m, dt)
    _softmax(m, dt)
    _movement(m, dt)
    _boundary(m)
    raw = m.model()
    return raw, plan(import_onnx_bytes(raw, f"cases_{dt}", f"cases_{dt}"))


def test_cases_bit_exact_with_onnxruntime(models, tmp_path):
    raw, schedule = models
    target = load_target("generic")
    generated = generate(schedule, tmp_path, target)
    runner = get_runner(target)
    result = compare_with_oracle(onnxruntime_oracle(raw), schedule, generated, runner, samples=6, seed=3,
                                 name="onnxruntime")
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"
    reference = verify_schedule(schedule, generated, runner, samples=2, seed=4)
    assert reference.bit_exact, f"C vs numpy reference: {reference.first_mismatch}"


@pytest.mark.parametrize("dt", ["i8", "u8"])
def test_average_pool_differs_from_onnxruntime_only_at_ties(dt, tmp_path):
    """QLinearAveragePool: the C rounds the exact average (docs/onnx.md); onnxruntime sums float32 values. Every
    element where they differ has an exact value within 2^-12 of a tie, and the C rounds that value correctly."""
    m = Models(seed=5)
    x = m.input((1, 6, 9, 8), dt)
    x_zp, y_zp = (2, -3) if dt == "i8" else (130, 125)
    y = m.node("QLinearAveragePool", [x, *m.qparams(0.05, x_zp, dt), *m.qparams(0.04, y_zp, dt)], ms=True,
               kernel_shape=[3, 2], strides=[2, 2])
    m.output(y, None, dt)
    raw = m.model()
    schedule = plan(import_onnx_bytes(raw, "avg", "avg"))
    rng = np.random.default_rng(0)
    batches = [random_inputs(schedule, rng) for _ in range(8)]
    generated = generate(schedule, tmp_path, load_target("generic"))
    runner = get_runner(load_target("generic"))
    oracle = onnxruntime_oracle(raw)
    differing = 0
    for batch in batches:
        got = runner.run(generated, batch)[0][0].astype(np.int64)
        want = oracle(batch)[0].astype(np.int64)
        windows = np.lib.stride_tricks.sliding_window_view(batch[0].astype(np.int64) - x_zp, (3, 2), axis=(2, 3))
        sums = windows[:, :, ::2, ::2].sum(axis=(-1, -2))
        exact = [Fraction(int(s)) * Fraction(float(np.float32(0.05))) / (6 * Fraction(float(np.float32(0.04))))
                 for s in sums.reshape(-1)]
        for i in np.flatnonzero(got.reshape(-1) != want.reshape(-1)):
            v = exact[i]
            assert abs(v - math.floor(v) - Fraction(1, 2)) < Fraction(1, 4096), f"not a tie: {float(v)}"
            differing += 1
        rounded = [round(v) + y_zp for v in exact]  # Python's round of a Fraction: half to even, exact
        assert np.array_equal(np.clip(rounded, -128 if dt == "i8" else 0, 127 if dt == "i8" else 255),
                              got.reshape(-1))
    print(f"QLinearAveragePool {dt}: {differing} of {8 * got.size} elements differ from onnxruntime (ties)")


@pytest.mark.parametrize("dt", ["i8", "u8"])
@pytest.mark.parametrize("op,scalar", [("QLinearAdd", ""), ("QLinearAdd", "b"), ("QLinearMul", "")])
def test_element_wise_tables_equal_onnxruntime_on_every_operand_pair(op, scalar, dt):
    """The plan-time tables (qcodegen/semantics/onnxruntime.py) against onnxruntime itself over all 65,536 pairs of
    stored values, for scales that tell the compiler's FMA contractions apart."""
    from qcodegen.ir.quant import QuantType
    from qcodegen.semantics.onnxruntime import add_table, mul_table

    rng = np.random.default_rng(7)
    lo = -128 if dt == "i8" else 0
    grid = np.arange(lo, lo + 256)
    for _ in range(3):
        scales = [float(np.float32(s)) for s in rng.uniform(0.01, 0.1, 3)]
        zps = [int(z) for z in rng.integers(lo, lo + 256, 3)]
        m = Models(seed=0)
        a = m.input((256, 256), dt)
        b = m.input((1,) if scalar else (256, 256), dt)
        y = m.node(op, [a, *m.qparams(scales[0], zps[0], dt), b, *m.qparams(scales[1], zps[1], dt),
                        *m.qparams(scales[2], zps[2], dt)], ms=True)
        m.output(y, None, dt)
        oracle = onnxruntime_oracle(m.model())
        column = np.repeat(grid[:, None], 256, axis=1).astype(np.int8 if dt == "i8" else np.uint8)
        if scalar:
            want = np.stack([oracle([column, np.array([v], column.dtype)])[0][:, 0] for v in grid], axis=1)
        else:
            want = oracle([column, column.T.copy()])[0]
        q = [QuantType.per_tensor(dt, s, z) for s, z in zip(scales, zps, strict=True)]
        table = add_table(*q, scalar) if op == "QLinearAdd" else mul_table(*q)
        assert np.array_equal(table.reshape(256, 256), want.astype(np.int64))


_ACTIVATIONS = {"Sigmoid": {}, "Tanh": {}, "LeakyRelu": {"alpha": 0.13}, "HardSigmoid": {"alpha": 0.3, "beta": 0.4},
                "HardSwish": {}}


@pytest.mark.parametrize("dt", ["i8", "u8", "i16", "u16"])
def test_activation_tables_equal_onnxruntime_on_every_stored_value(dt):
    """DequantizeLinear -> Sigmoid / Tanh / LeakyRelu / HardSigmoid / HardSwish -> QuantizeLinear in onnxruntime
    (8-bit: its QLinear lookup tables or float kernels; 16-bit: its float kernels, MLAS's rational approximations
    for Sigmoid and Tanh) against the plan-time tables at all 256 / 65,536 stored inputs (uint data rebased to signed
    storage, as the importer stores it); the correctly rounded Sigmoid and Tanh differ from onnxruntime at 16 bits."""
    from qcodegen.ir.quant import QuantType
    from qcodegen.semantics import onnxruntime as ort_math

    info = np.iinfo(NP[dt])
    offset = 0 if info.min < 0 else (info.max + 1) // 2
    stored = np.arange(info.min, info.max + 1)
    storage = "i8" if info.bits == 8 else "i16"
    sx = float(np.float32(9.0 / (info.max - info.min)))  # inputs about -4.5 .. 4.5
    zx, sy, zy = info.min + (info.max - info.min) // 2 + 3, float(np.float32(2.1 / (info.max - info.min))), offset
    m = Models(seed=0)
    x = m.node("DequantizeLinear", [m.input((stored.size,), dt), *m.qparams(sx, zx, dt)])
    for op, attrs in _ACTIVATIONS.items():
        m.output(m.node("QuantizeLinear", [m.node(op, [x], **attrs), *m.qparams(sy, zy, dt)]), None, dt)
    results = onnxruntime_oracle(m.model(opset=21))([stored.astype(NP[dt])])
    qx, qy = QuantType.per_tensor(storage, sx, zx - offset), QuantType.per_tensor(storage, sy, zy - offset)
    functions = [ort_math.sigmoid, ort_math.tanh, ort_math.leaky_relu(0.13), ort_math.hard_sigmoid(0.3, 0.4),
                 ort_math.hard_swish]
    for op, fn, got in zip(_ACTIVATIONS, functions, results, strict=True):
        assert np.array_equal(ort_math.unary_table(qx, qy, fn), got.astype(np.int64) - offset), op
    if info.bits == 16:
        correctly_rounded = [lambda v: (1 / (1 + np.exp(-v.astype(np.float64)))).astype(np.float32),
                             lambda v: np.tanh(v.astype(np.float64)).astype(np.float32)]
        for fn, got in zip(correctly_rounded, results, strict=False):
            assert not np.array_equal(ort_math.unary_table(qx, qy, fn), got.astype(np.int64) - offset)


def _f32(exact: Fraction) -> Fraction:
    """`exact` rounded to the nearest float32, ties to even (exact rational arithmetic)."""
    near = np.float32(float(exact))
    candidates = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(np.array(c).view(np.uint32)) & 1))
    return Fraction(float(best))


def _mlas_scalar(x: float, bound: float, numerator: list[float], denominator: list[float]) -> Fraction:
    """x * P(x^2) / Q(x^2) as the FMA3 kernels compute it, one element in exact rationals: each fused multiply-add
    and each other operation rounded once to float32."""
    v = Fraction(float(min(max(np.float32(x), np.float32(-bound)), np.float32(bound))))
    x2 = _f32(v * v)

    def horner(coefficients: list[float]) -> Fraction:
        c = [Fraction(float(np.float32(ci))) for ci in coefficients]
        acc = _f32(x2 * c[0] + c[1])
        for ci in c[2:]:
            acc = _f32(acc * x2 + ci)
        return acc

    return _f32(_f32(v * horner(numerator)) / horner(denominator))


def test_mlas_logistic_and_tanh_equal_a_scalar_rational_evaluation():
    """sigmoid / tanh (numpy, fused multiply-adds via float64 pairs) against the same kernels evaluated one element at
    a time in exact rationals, at sampled inputs: the clamp bounds, near zero, and random values."""
    from qcodegen.semantics import onnxruntime as ort_math

    rng = np.random.default_rng(3)
    x = np.concatenate([[0.0, -18.0, 18.0, 9.0, -9.0, 25.0, -1e-6, 3e-8], rng.uniform(-20, 20, 150),
                        rng.normal(0, 0.01, 50)]).astype(np.float32)
    got_sigmoid, got_tanh = ort_math.sigmoid(x), ort_math.tanh(x)
    logistic = (list(ort_math.LOGISTIC_NUMERATOR), list(ort_math.LOGISTIC_DENOMINATOR))
    tanh = (list(ort_math.TANH_NUMERATOR), list(ort_math.TANH_DENOMINATOR))
    for i, v in enumerate(x):
        want = max(_f32(_mlas_scalar(v, 18.0, *logistic) + Fraction(1, 2)), Fraction(0))
        assert Fraction(float(got_sigmoid[i])) == want, f"sigmoid({v})"
        assert Fraction(float(got_tanh[i])) == _mlas_scalar(v, 9.0, *tanh), f"tanh({v})"


def test_clang_strict_and_sanitized():
    """The ONNX templates (RESCALE_F32, SOFTMAX_F32, QUANTIZE with the zero point after rounding, uint8 at the edges)
    under clang -Werror and ASan/UBSan (no 64 KB tables: clang's sanitizer build of those takes minutes)."""
    from qcodegen.testing import assert_clang_sanitized

    m = Models(seed=3)
    _conv(m, "u8", (1, 3, 9, 9), (8, 3, 3, 3), True, pads=[1, 1, 1, 1])
    _softmax(m, "i8")
    _qgemm(m, "u8", float_out=True)
    _boundary(m)
    assert_clang_sanitized(plan(import_onnx_bytes(m.model(), "sanitized", "sanitized")))
