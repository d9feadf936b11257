"""onnxruntime's CPU arithmetic of quantized operators, as exact numpy functions of the stored values (used at plan
time to derive scales and tables, and by the references of the primitives that reproduce it; docs/onnx.md).

All of it is IEEE binary32 arithmetic, round to nearest even, one operation at a time, in the order of
onnxruntime's sources (MLAS x86-64 kernels; quantize_linear_matmul.cc, qlinearconv.cc, quant_gemm.cc,
qlinear_lookup_table.cc, qladd.cpp / qladd_avx2.cpp, qlmul.cpp, the FMA3 logistic and tanh kernels). Fused
multiply-adds (the AVX2 QLinearAdd kernel's _mm256_fmadd_ps, the polynomials' vfmadd*ps) are rounded once, exactly
(f32_fma).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ir.quant import QuantType

FloatFn = Callable[[np.ndarray], np.ndarray]
F32 = np.float32


def f32_product(*factors: float | np.ndarray) -> np.ndarray:
    """factor0 * factor1 * ... left to right, each product rounded to float32 (C++ float arithmetic)."""
    out = np.asarray(factors[0], F32)
    with np.errstate(over="ignore", under="ignore"):
        for f in factors[1:]:
            out = (out * np.asarray(f, F32)).astype(F32)
    return out


def f32_quotient(a: float | np.ndarray, b: float | np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        return (np.asarray(a, F32) / np.asarray(b, F32)).astype(F32)


def output_scale(x: QuantType, w_scales: float | np.ndarray, y: QuantType, alpha: float = 1.0) -> np.ndarray:
    """The requantization scale of QLinearConv / QLinearMatMul (x_scale * w_scale[c] / y_scale) and QGemm
    (alpha * a_scale * b_scale[c] / y_scale): float32, products left to right, then the division."""
    factors = (x.scale, w_scales) if alpha == 1.0 else (F32(alpha), x.scale, w_scales)
    return f32_quotient(f32_product(*factors), y.scale)


def f32_fma(x: np.ndarray, y: np.ndarray | float, z: np.ndarray | float) -> np.ndarray:
    """x * y + z rounded once to float32 (IEEE fusedMultiplyAdd), for float32 values whose product x * y is exact
    in float64 (at most 53 significant bits: e.g. x an integer below 2^29 and y a float32).

    The sum is computed exactly as a float64 pair (TwoSum); its float32 rounding is that of the high part unless
    the high part lies exactly halfway between two float32 values, where the low part decides."""
    x64, y64, z64 = (np.asarray(v, F32).astype(np.float64) for v in (x, y, z))
    with np.errstate(all="ignore"):  # infinities and NaN propagate as in float32
        p = x64 * y64
        hi = p + z64
        b = hi - p
        lo = (p - (hi - b)) + (z64 - b)
        r = hi.astype(F32)
        toward = np.nextafter(r, np.where(hi > r.astype(np.float64), F32(np.inf), F32(-np.inf)))
        tie = (hi != r.astype(np.float64)) & (hi == (r.astype(np.float64) + toward.astype(np.float64)) / 2)
        push = tie & (lo != 0) & ((lo > 0) == (hi > r.astype(np.float64)))
        return np.where(push, toward, r).astype(F32)


def dequantize(stored: np.ndarray, q: QuantType) -> np.ndarray:
    """x_scale * float(x - zero_point) in float32 (the lookup-table operators' dequantization)."""
    return f32_product(q.scale, (np.asarray(stored, np.int64) - q.zero_point).astype(F32))


def quantize(values: np.ndarray, q: QuantType) -> np.ndarray:
    """MlasQuantizeLinear: round_half_even(clamp(v / scale, qmin - zp, qmax - zp)) + zp (float32; NaN -> qmin)."""
    v = f32_quotient(values, q.scale)
    lo, hi = F32(q.storage_min - q.zero_point), F32(q.storage_max - q.zero_point)
    v = np.where(v >= lo, v, lo)
    v = np.where(v > hi, hi, v)
    return np.rint(v).astype(np.int64) + q.zero_point


def storage_grid(q: QuantType) -> np.ndarray:
    """Every stored value of an 8- or 16-bit type, in table order (storage minimum first)."""
    return np.arange(q.storage.min, q.storage.max + 1, dtype=np.int64)


def unary_table(qx: QuantType, qy: QuantType, fn: FloatFn) -> np.ndarray:
    """onnxruntime's float path of `fn` (float32 -> float32) at every stored value (256 or 65,536 entries):
    dequantize, fn, MlasQuantizeLinear."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return quantize(fn(dequantize(storage_grid(qx), qx)).astype(F32), qy)


def float_binary_table(qa: QuantType, qb: QuantType, qc: QuantType,
                       fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """A binary float op between DequantizeLinear and QuantizeLinear, as onnxruntime runs a QDQ group it does not
    fuse: both operands dequantized in float32, `fn` in float32, MlasQuantizeLinear. Rows: a, columns: b."""
    a = dequantize(storage_grid(qa), qa)[:, None]
    b = dequantize(storage_grid(qb), qb)[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        return quantize(fn(a, b).astype(F32), qc).reshape(-1)


def hard_sigmoid(alpha: float, beta: float) -> FloatFn:
    """max(0, min(1, alpha * x + beta)), the product and the sum each rounded to float32 (no fused multiply-add):
    equal to onnxruntime's CPU kernel at every stored value measured (docs/onnx.md), not read from its sources."""
    a, b = F32(alpha), F32(beta)
    return lambda v: np.clip(((a * v).astype(F32) + b).astype(F32), F32(0), F32(1))


def hard_swish(v: np.ndarray) -> np.ndarray:
    """x * HardSigmoid(x) with alpha 1/6, beta 0.5 (ONNX's definition), in float32."""
    return (v * hard_sigmoid(1 / 6, 0.5)(v)).astype(F32)


def leaky_relu(alpha: float) -> FloatFn:
    a = F32(alpha)
    return lambda v: np.where(v >= 0, v, f32_product(a, v))


def _horner_fma(x2: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """c0 * x2^n + ... + cn by Horner's rule, each step one fused multiply-add (vfmadd*ps)."""
    c = [F32(v) for v in coefficients]
    acc = f32_fma(x2, c[0], c[1])
    for ci in c[2:]:
        acc = f32_fma(acc, x2, ci)
    return acc


def _mlas_rational(v: np.ndarray, bound: float, numerator: tuple[float, ...],
                   denominator: tuple[float, ...]) -> np.ndarray:
    """x * P(x^2) / Q(x^2) with x = v clamped to [-bound, bound]: the shape of MLAS's logistic and tanh kernels
    (Eigen's coefficients; x^2, x * P and the quotient rounded to float32, P and Q by fused multiply-adds)."""
    x = np.minimum(np.maximum(np.asarray(v, F32), F32(-bound)), F32(bound))
    x2 = (x * x).astype(F32)
    with np.errstate(all="ignore"):
        return ((x * _horner_fma(x2, numerator)).astype(F32) / _horner_fma(x2, denominator)).astype(F32)


LOGISTIC_NUMERATOR = (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
               2.48287947061529e-01)
LOGISTIC_DENOMINATOR = (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
               1.16817656904453e-01, 9.93151921023180e-01)
TANH_NUMERATOR = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
           1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
TANH_DENOMINATOR = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)


def sigmoid(v: np.ndarray) -> np.ndarray:
    """MlasComputeLogistic as x86-64 CPUs with AVX2 and FMA3 run it (MlasComputeLogisticF32KernelFma3):
    max(0, x * P(x^2) / Q(x^2) + 0.5), x clamped to [-18, 18]."""
    ratio = _mlas_rational(v, 18.0, LOGISTIC_NUMERATOR, LOGISTIC_DENOMINATOR)
    return np.maximum((ratio + F32(0.5)).astype(F32), F32(0))


def tanh(v: np.ndarray) -> np.ndarray:
    """MlasComputeTanh as x86-64 CPUs with AVX2 and FMA3 run it (MlasComputeTanhF32KernelFma3): x * P(x^2) /
    Q(x^2), x clamped to [-9, 9]."""
    return _mlas_rational(v, 9.0, TANH_NUMERATOR, TANH_DENOMINATOR)


def _saturate(v: np.ndarray, q: QuantType) -> np.ndarray:
    """cvtps2dq (round half to even; NaN and out-of-range values become INT32_MIN) and the saturating packs of the
    8-bit kernels."""
    v = v.astype(np.float64)
    v = np.where(np.isnan(v) | (v < -2.0 ** 31) | (v >= 2.0 ** 31), -2.0 ** 31, v)
    return np.clip(np.rint(v), q.storage.min, q.storage.max).astype(np.int64)


def scalar_operand(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> str:
    """Which operand onnxruntime's broadcasting loop (BroadcastLooper) hands to QLinearAdd's kernel as a scalar:
    the loop walks spans of the innermost output dimensions; an operand broadcast along the innermost dimension
    that is not 1 is one value per span ("a" / "b"), otherwise both are vectors (""). Shapes in ONNX's layout."""
    rank = max(len(a_shape), len(b_shape))
    a = (1,) * (rank - len(a_shape)) + tuple(a_shape)
    b = (1,) * (rank - len(b_shape)) + tuple(b_shape)
    if int(np.prod(a)) == 1 and int(np.prod(b)) > 1:
        return "a"
    for da, db in zip(reversed(a), reversed(b), strict=True):
        if max(da, db) > 1:
            return "a" if da == 1 else "b" if db == 1 else ""
    return ""


def add_table(qa: QuantType, qb: QuantType, qc: QuantType, scalar: str = "") -> np.ndarray:
    """QLinearAdd on x86-64 with AVX2 and FMA (qladd_avx2.cpp, as onnxruntime's build compiles it): r_a = s_a / s_c,
    r_b = s_b / s_c, the fixed part f = zp_c - fma(zp_a, r_a, r_b * zp_b) (the compiler contracts
    r_a * zp_a + r_b * zp_b), then fma(a, r_a, fma(b, r_b, f)) on the stored values; a scalar operand ("a" / "b")
    is folded into f first, also by a (contracted) fma. Rows: a, columns: b (65,536 entries). The contractions
    were established against onnxruntime 1.32 over all operand pairs of random scales (tests/test_onnx_ops.py)."""
    r_a, r_b = f32_quotient(qa.scale, qc.scale), f32_quotient(qb.scale, qc.scale)
    fixed = F32(F32(qc.zero_point) - f32_fma(F32(qa.zero_point), r_a, f32_product(r_b, qb.zero_point)))
    a = storage_grid(qa).astype(F32)[:, None]
    b = storage_grid(qb).astype(F32)[None, :]
    if scalar == "b":
        v = f32_fma(np.broadcast_to(a, (a.size, b.size)), r_a, f32_fma(b, r_b, fixed))
    elif scalar == "a":
        v = f32_fma(np.broadcast_to(b, (a.size, b.size)), r_b, f32_fma(a, r_a, fixed))
    else:
        v = f32_fma(np.broadcast_to(a, (a.size, b.size)), r_a, f32_fma(b, r_b, fixed))
    return _saturate(v, qc).reshape(-1)


def mul_table(qa: QuantType, qb: QuantType, qc: QuantType) -> np.ndarray:
    """QLinearMul on x86-64 (qlmul.cpp, SSE2): p = (a - zp_a) * (b - zp_b) in integers, then
    float(p) * (s_a * s_b / s_c) + float(zp_c), rounded half to even and saturated. Rows: a, columns: b."""
    ratio = f32_quotient(f32_product(qa.scale, qb.scale), qc.scale)
    p = (storage_grid(qa) - qa.zero_point)[:, None] * (storage_grid(qb) - qb.zero_point)[None, :]
    v = (f32_product(p.astype(F32), ratio) + F32(qc.zero_point)).astype(F32)
    return _saturate(v, qc).reshape(-1)


def softmax_table(x_scale: float, reduce_len: int) -> np.ndarray:
    """QLinearSoftmax's table (qlinear_softmax.cc, float results): with bit_shift = max(0, log(FLT_MAX / D) - 5)
    / x_scale (the quotient in float32, the rest in double), entry i = float32(exp((i - 255 + bit_shift) *
    x_scale)) in double: exp(s * (x - max)) scaled up so that the sum of D entries stays below FLT_MAX."""
    scale = float(F32(x_scale))
    ratio = float(f32_quotient(np.finfo(F32).max, F32(reduce_len)))
    bit_shift = max(0.0, math.log(ratio) - 5.0) / scale
    return np.array([math.exp((i - 255 + bit_shift) * scale) for i in range(256)], np.float64).astype(F32)


def softmax_output_scale(y_scale: float) -> np.float32:
    """floor(1.0f / y_scale) in float32: QLinearSoftmax multiplies by it, then divides by the sum."""
    return F32(np.floor(f32_quotient(F32(1.0), y_scale)))
