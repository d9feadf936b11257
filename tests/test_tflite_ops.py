"""Single-op TFLite models built here (tflite-micro's model_editor), compiled and checked bit for bit against
TFLite Micro; plus the TFLite fixed-point helpers (qcodegen/semantics/tflite.py) against values derived by
hand from TFLite's definitions."""

import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.compiler import plan
from qcodegen.errors import UnsupportedError
from qcodegen.fixedpoint import Unpredictable
from qcodegen.frontends import load_model
from qcodegen.ir.dtypes import I8, I16
from qcodegen.ir.quant import QuantType
from qcodegen.semantics.tflite import (
    activation_range,
    mbqm,
    mbqm64,
    quantize_multiplier_exponent,
    quantize_multiplier_smaller_than_one_exp,
    tosa_scale16,
    tosa_scale32,
)
from qcodegen.semantics.tflm_fixedpoint import multiply_by_quantized_multiplier
from qcodegen.verify.tflm_oracle import OpSpec, TensorSpec, build_model, check_tflite, single_op_model

pytest.importorskip("tflite_micro", reason="needs tflite-micro (pip install 'qcodegen[tflite]')")

RNG = np.random.default_rng(20260)
T = TensorSpec
SAME, VALID = 0, 1
RELU, RELU_N1_TO_1, RELU6 = 1, 2, 3


def weights(shape, lo=-127, hi=127):
    return RNG.integers(lo, hi, shape, endpoint=True).astype(np.int8)


def per_channel(n, base=0.004):
    return [base * (1 + 0.37 * i) for i in range(n)]


def const_i32(values):
    return T((len(values),), "int32", data=np.array(values, np.int32))


def bias(n, dtype="int32", scales=None, magnitude=4000):
    data = RNG.integers(-magnitude, magnitude, n)
    scale = scales if scales is not None else [1e-4] * n
    return T((n,), dtype, data=data, scale=scale, zero_point=[0] * n, axis=0)


def conv_cases():
    x = T((2, 9, 10, 3), scale=0.05, zero_point=-3)
    w = T((4, 3, 3, 3), scale=per_channel(4), zero_point=[0] * 4, axis=0, data=weights((4, 3, 3, 3)))
    wt = T((4, 3, 3, 3), scale=0.02, data=weights((4, 3, 3, 3)))  # per tensor
    x16 = T((1, 7, 8, 3), "int16", scale=0.001)
    w16 = T((5, 3, 2, 3), scale=per_channel(5, 0.01), zero_point=[0] * 5, axis=0, data=weights((5, 3, 2, 3)))
    w4 = T((4, 3, 3, 3), "int4", scale=per_channel(4, 0.05), zero_point=[0] * 4, axis=0,
           data=RNG.integers(-8, 8, (4, 3, 3, 3)))
    y = T((2, 5, 5, 4), scale=0.2, zero_point=7)
    return {
        "conv_stride2_same_relu6": single_op_model("CONV_2D", [x, w, bias(4)], [y], padding=SAME, strideW=2,
                                                   strideH=2, fusedActivationFunction=RELU6),
        "conv_dilation_valid_per_tensor": single_op_model(
            "CONV_2D", [x, wt, bias(4)], [T((2, 5, 4, 4), scale=0.3, zero_point=-100)], padding=VALID, strideW=1,
            strideH=1, dilationHFactor=2, dilationWFactor=3),
        "conv_stride_hw_differ_no_bias_relu": single_op_model(
            "CONV_2D", [x, w, None], [T((2, 9, 4, 4), scale=0.1, zero_point=0)], padding=SAME, strideW=3,
            strideH=1, fusedActivationFunction=RELU),
        "conv_grouped_2_groups": single_op_model(
            "CONV_2D", [T((1, 6, 7, 6), scale=0.05, zero_point=4), w, bias(4)],
            [T((1, 3, 4, 4), scale=0.2, zero_point=-9)], padding=SAME, strideW=2, strideH=2),
        "conv_weight_zero_point_ignored": single_op_model(
            "CONV_2D", [x, T((4, 3, 3, 3), scale=0.02, zero_point=5, data=weights((4, 3, 3, 3))), bias(4)], [y],
            padding=SAME, strideW=2, strideH=2),
        "conv_int4_weights": single_op_model("CONV_2D", [x, w4, bias(4)], [T((2, 5, 5, 4), scale=0.6, zero_point=2)],
                                             padding=SAME, strideW=2, strideH=2),
        "conv_16x8_int64_bias": single_op_model(
            "CONV_2D", [x16, w16, bias(5, "int64", magnitude=200000)], [T((1, 4, 4, 5), "int16", scale=0.004)],
            padding=SAME, strideW=2, strideH=2),
        "conv_16x8_int32_bias": single_op_model(
            "CONV_2D", [x16, w16, bias(5, "int32", magnitude=200000)], [T((1, 5, 7, 5), "int16", scale=0.003)],
            padding=VALID, strideW=1, strideH=1, fusedActivationFunction=RELU_N1_TO_1),
    }


def depthwise_cases():
    x = T((1, 9, 8, 3), scale=0.05, zero_point=10)
    w = T((1, 3, 3, 6), scale=per_channel(6), zero_point=[0] * 6, axis=3, data=weights((1, 3, 3, 6)))
    x16 = T((1, 6, 7, 2), "int16", scale=0.002)
    w16 = T((1, 2, 3, 4), scale=per_channel(4, 0.02), zero_point=[0] * 4, axis=3, data=weights((1, 2, 3, 4)))
    return {
        "depthwise_multiplier2_stride2_same": single_op_model(
            "DEPTHWISE_CONV_2D", [x, w, bias(6)], [T((1, 5, 4, 6), scale=0.25, zero_point=-5)], padding=SAME,
            strideW=2, strideH=2, depthMultiplier=2, fusedActivationFunction=RELU),
        "depthwise_dilation_valid": single_op_model(
            "DEPTHWISE_CONV_2D", [x, w, bias(6)], [T((1, 5, 2, 6), scale=0.25, zero_point=-5)], padding=VALID,
            strideW=1, strideH=1, depthMultiplier=2, dilationHFactor=2, dilationWFactor=3),
        "depthwise_16x8": single_op_model(
            "DEPTHWISE_CONV_2D", [x16, w16, bias(4, "int64")], [T((1, 6, 7, 4), "int16", scale=0.003)],
            padding=SAME, strideW=1, strideH=1, depthMultiplier=2),
    }


def fully_connected_cases():
    x = T((2, 3, 20), scale=0.04, zero_point=5)
    w_pc = T((8, 20), scale=per_channel(8, 0.01), zero_point=[0] * 8, axis=0, data=weights((8, 20)))
    w_pt = T((8, 20), scale=0.013, data=weights((8, 20)))
    x16 = T((3, 16), "int16", scale=0.001)
    w16 = T((6, 16), scale=0.02, data=weights((6, 16)))
    return {
        "fc_per_channel_keep_num_dims": single_op_model(
            "FULLY_CONNECTED", [x, w_pc, bias(8)], [T((2, 3, 8), scale=0.1, zero_point=-2)], keepNumDims=True),
        "fc_per_tensor_flattens": single_op_model(
            "FULLY_CONNECTED", [x, w_pt, bias(8)], [T((6, 8), scale=0.1, zero_point=-2)]),
        "fc_per_tensor_weight_zero_point_subtracted": single_op_model(
            "FULLY_CONNECTED", [x, T((8, 20), scale=0.013, zero_point=-7, data=weights((8, 20), -100, 100)), bias(8)],
            [T((6, 8), scale=0.1, zero_point=-2)]),
        "fc_no_bias_relu": single_op_model("FULLY_CONNECTED", [x, w_pt, None], [T((6, 8), scale=0.05, zero_point=-128)],
                                           fusedActivationFunction=RELU),
        "fc_16x8_int64_bias": single_op_model(
            "FULLY_CONNECTED", [x16, w16, bias(6, "int64")], [T((3, 6), "int16", scale=0.01)]),
        "fc_16x8_int32_bias": single_op_model(
            "FULLY_CONNECTED", [x16, w16, bias(6, "int32")], [T((3, 6), "int16", scale=0.01)]),
    }


def transpose_conv_cases():
    x = T((1, 4, 5, 3), scale=0.05, zero_point=2)
    w = T((4, 3, 3, 3), scale=per_channel(4, 0.01), zero_point=[0] * 4, axis=0, data=weights((4, 3, 3, 3)))
    x16 = T((1, 3, 4, 2), "int16", scale=0.001)
    w16 = T((3, 4, 2, 2), scale=per_channel(3, 0.02), zero_point=[0] * 3, axis=0, data=weights((3, 4, 2, 2)))
    return {
        "transpose_conv_stride2_same": single_op_model(
            "TRANSPOSE_CONV", [const_i32([1, 8, 10, 4]), w, x, bias(4)], [T((1, 8, 10, 4), scale=0.3, zero_point=1)],
            padding=SAME, strideW=2, strideH=2),
        "transpose_conv_stride2_valid_no_bias": single_op_model(
            "TRANSPOSE_CONV", [const_i32([1, 9, 11, 4]), w, x, None], [T((1, 9, 11, 4), scale=0.3, zero_point=1)],
            padding=VALID, strideW=2, strideH=2),
        "transpose_conv_stride3_kernel2_gaps": single_op_model(
            "TRANSPOSE_CONV", [const_i32([1, 12, 15, 4]), w, x, bias(4)], [T((1, 12, 15, 4), scale=0.2, zero_point=0)],
            padding=SAME, strideW=3, strideH=3),
        "transpose_conv_16x8": single_op_model(
            "TRANSPOSE_CONV", [const_i32([1, 6, 8, 3]), w16, x16, bias(3, "int64")],
            [T((1, 6, 8, 3), "int16", scale=0.004)], padding=SAME, strideW=2, strideH=2),
    }


def pool_cases():
    x = T((2, 7, 8, 3), scale=0.1, zero_point=-5)
    y = T((2, 4, 4, 3), scale=0.1, zero_point=-5)
    x16 = T((1, 5, 6, 2), "int16", scale=0.01)
    return {
        "avg_pool_stride2_same": single_op_model("AVERAGE_POOL_2D", [x], [y], padding=SAME, strideW=2, strideH=2,
                                                 filterWidth=3, filterHeight=3),
        "avg_pool_even_count_relu6": single_op_model(
            "AVERAGE_POOL_2D", [x], [T((2, 6, 7, 3), scale=0.1, zero_point=-5)], padding=VALID, strideW=1, strideH=1,
            filterWidth=2, filterHeight=2, fusedActivationFunction=RELU6),
        "avg_pool_16": single_op_model("AVERAGE_POOL_2D", [x16], [T((1, 3, 3, 2), "int16", scale=0.01)],
                                       padding=SAME, strideW=2, strideH=2, filterWidth=2, filterHeight=4),
        "max_pool_stride2_same_relu": single_op_model("MAX_POOL_2D", [x], [y], padding=SAME, strideW=2, strideH=2,
                                                      filterWidth=2, filterHeight=3, fusedActivationFunction=RELU),
        "max_pool_16_valid": single_op_model("MAX_POOL_2D", [x16], [T((1, 2, 5, 2), "int16", scale=0.01)],
                                             padding=VALID, strideW=1, strideH=2, filterWidth=2, filterHeight=2),
    }


def elementwise_cases():
    a = T((2, 3, 4), scale=0.07, zero_point=-20)
    b = T((3, 1), scale=0.02, zero_point=10)  # broadcast, a different (smaller) scale
    same = T((2, 3, 4), scale=0.07, zero_point=-20)  # equal scales: both operands take the exact shift path
    y = T((2, 3, 4), scale=0.09, zero_point=3)
    a16 = T((2, 3, 4), "int16", scale=0.0007)
    b16 = T((4,), "int16", scale=0.0002)
    y16 = T((2, 3, 4), "int16", scale=0.0009)
    tiny = T((3, 1), scale=1e-11, zero_point=0)  # s / (2 * 0.07) < 2^-32: its multiplier flushes to zero
    return {
        "add_broadcast_scales": single_op_model("ADD", [a, b], [y]),
        "add_equal_scales_relu6": single_op_model("ADD", [a, same], [y], fusedActivationFunction=RELU6),
        "add_tiny_scale_flushes": single_op_model("ADD", [a, tiny], [y]),
        "add_16": single_op_model("ADD", [a16, b16], [y16], fusedActivationFunction=RELU),
        "sub_broadcast_scales": single_op_model("SUB", [b, a], [y]),
        "sub_16": single_op_model("SUB", [a16, b16], [y16]),
        "mul_broadcast_scales": single_op_model("MUL", [a, b], [y]),
        "mul_zero_points_0_relu_n1": single_op_model(
            "MUL", [T((2, 3, 4), scale=0.05), T((2, 3, 4), scale=0.1)], [T((2, 3, 4), scale=0.01)],
            fusedActivationFunction=RELU_N1_TO_1),
        "mul_16_large_multiplier": single_op_model("MUL", [a16, b16], [T((2, 3, 4), "int16", scale=1e-7)]),
        "maximum_broadcast": single_op_model("MAXIMUM", [a, b], [same]),
        "minimum_16": single_op_model("MINIMUM", [a16, b16], [y16]),
        "relu_requantizes": single_op_model("RELU", [T((3, 90), scale=0.05, zero_point=-10)],
                                            [T((3, 90), scale=0.03, zero_point=-128)]),
        "relu_16": single_op_model("RELU", [T((3, 90), "int16", scale=0.0005)], [T((3, 90), "int16", scale=0.0003)]),
        "relu6": single_op_model("RELU6", [T((3, 90), scale=0.05, zero_point=-10)],
                                 [T((3, 90), scale=0.05, zero_point=-10)]),
    }


def quantize_cases():
    x = T((3, 90), scale=0.05, zero_point=-10)
    return {
        "quantize_float_to_int8": single_op_model("QUANTIZE", [T((4, 50), "float32")],
                                                  [T((4, 50), scale=0.0123, zero_point=3)]),
        "quantize_float_to_int16": single_op_model("QUANTIZE", [T((4, 50), "float32")],
                                                   [T((4, 50), "int16", scale=0.0005)]),
        "requantize_int8": single_op_model("QUANTIZE", [x], [T((3, 90), scale=0.011, zero_point=20)]),
        "requantize_int16_to_int8": single_op_model("QUANTIZE", [T((3, 90), "int16", scale=0.0005)],
                                                    [T((3, 90), scale=0.011, zero_point=20)]),
        "requantize_int8_to_int16_upscale": single_op_model("QUANTIZE", [x], [T((3, 90), "int16", scale=0.0001)]),
        "requantize_int32_to_int16": single_op_model("QUANTIZE", [T((3, 90), "int32", scale=1.5e-7)],
                                                     [T((3, 90), "int16", scale=0.0009)]),
        "requantize_int16_to_int32": single_op_model("QUANTIZE", [T((3, 90), "int16", scale=0.0005)],
                                                     [T((3, 90), "int32", scale=1.5e-7)]),
        # TFLite exponent >= 0 with |x| beyond TOSA's value REQUIRE: computed as MUL with shift (single rounding)
        "requantize_int16_to_int32_mul_path": single_op_model("QUANTIZE", [T((3, 90), "int16", scale=0.0015)],
                                                              [T((3, 90), "int32", scale=0.0015 / 49152)]),
        "requantize_int8_zp_to_int32_mul_path": single_op_model(
            "QUANTIZE", [T((3, 90), scale=6.0, zero_point=-128)], [T((3, 90), "int32", scale=1e-6)]),
        "dequantize": single_op_model("DEQUANTIZE", [x], [T((3, 90), "float32")]),
    }


def movement_cases():
    x = T((2, 6, 5, 4), scale=0.05, zero_point=-3)
    q = dict(scale=0.05, zero_point=-3)
    pads = T((4, 2), "int32", data=np.array([[0, 1], [2, 0], [1, 1], [0, 0]], np.int32))
    x16 = T((2, 3, 4), "int16", scale=0.0007)

    def strided(begin, end, strides, out, **masks):
        return single_op_model("STRIDED_SLICE", [x, const_i32(begin), const_i32(end), const_i32(strides)],
                               [T(out, **q)], **masks)

    return {
        "reshape": single_op_model("RESHAPE", [x, const_i32([2, 30, 4])], [T((2, 30, 4), **q)], newShape=[2, 30, 4]),
        "squeeze": single_op_model("SQUEEZE", [T((1, 6, 1, 4), **q)], [T((6, 4), **q)], squeezeDims=[0, 2]),
        "transpose": single_op_model("TRANSPOSE", [x, const_i32([0, 3, 1, 2])], [T((2, 4, 6, 5), **q)]),
        "slice_size_minus_one": single_op_model("SLICE", [x, const_i32([1, 2, 0, 1]), const_i32([1, -1, 3, 2])],
                                                [T((1, 4, 3, 2), **q)]),
        "pad_int8_uses_zero_point": single_op_model("PAD", [x, pads], [T((3, 8, 7, 4), **q)]),
        "padv2_constant": single_op_model("PADV2", [x, pads, T((1,), data=np.array([17], np.int8), **q)],
                                          [T((3, 8, 7, 4), **q)]),
        "pad_16": single_op_model("PAD", [x16, T((3, 2), "int32", data=np.array([[1, 0], [0, 2], [3, 1]], np.int32))],
                                  [T((3, 5, 8), "int16", scale=0.0007)]),
        "concatenation_axis1": single_op_model("CONCATENATION", [x, T((2, 2, 5, 4), **q), x], [T((2, 14, 5, 4), **q)],
                                               axis=1),
        "concatenation_16_scales_differ": single_op_model(
            "CONCATENATION", [x16, T((2, 3, 2), "int16", scale=0.0002)], [T((2, 3, 6), "int16", scale=0.0009)],
            axis=-1),
        "strided_slice_stride2": strided([0, 1, 0, 1], [2, 6, 5, 4], [1, 2, 2, 1], (2, 3, 3, 3)),
        "strided_slice_masks_negative": strided([1, -4, 0, 0], [0, -1, 4, 3], [1, 1, 3, 2], (1, 3, 2, 2),
                                                beginMask=0b0100, endMask=0b0001),
        "strided_slice_shrink": strided([1, 0, 2, 0], [2, 6, 3, 4], [1, 3, 1, 1], (2, 4), shrinkAxisMask=0b0101),
        "arg_max": single_op_model("ARG_MAX", [T((2, 3, 4), scale=0.07, zero_point=-20), const_i32([1])],
                                   [T((2, 4), "int32")], outputType=2),
        "arg_max_negative_axis": single_op_model("ARG_MAX", [T((3, 7), scale=0.1), const_i32([-1])],
                                                 [T((3,), "int32")], outputType=2),
    }


CASES = {**conv_cases(), **depthwise_cases(), **fully_connected_cases(), **transpose_conv_cases(), **pool_cases(),
         **elementwise_cases(), **quantize_cases(), **movement_cases()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_single_op_bit_exact_with_tflm(name, tmp_path):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(CASES[name])
    result = check_tflite(path, samples=3, seed=zlib.crc32(name.encode()))
    assert result.bit_exact, f"{name}: {result.mismatches} mismatches, first {result.first_mismatch}"


def test_concatenation_of_differently_scaled_int8_requantizes(tmp_path):
    # TFLM refuses int8 CONCATENATION with inputs quantized unlike the output; qcodegen requantizes them, which
    # must equal TFLM running QUANTIZE on each input and then the (equal-scale) CONCATENATION.
    a, b = T((2, 3), scale=0.1, zero_point=3), T((2, 5), scale=0.025, zero_point=-7)
    y = T((2, 8), scale=0.07, zero_point=1)
    ours = tmp_path / "concat.tflite"
    ours.write_bytes(single_op_model("CONCATENATION", [a, b], [y], axis=1))
    qa, qb = T((2, 3), scale=0.07, zero_point=1), T((2, 5), scale=0.07, zero_point=1)
    oracle = tmp_path / "oracle.tflite"
    oracle.write_bytes(build_model([OpSpec("QUANTIZE", [a], [qa]), OpSpec("QUANTIZE", [b], [qb]),
                                    OpSpec("CONCATENATION", [qa, qb], [y], {"axis": 1})], [a, b], [y]))
    from qcodegen.codegen import generate, load_target
    from qcodegen.verify import get_runner
    from qcodegen.verify.tflm_oracle import verify_against_tflm

    schedule = plan(load_model(ours))
    target = load_target("generic")
    model = generate(schedule, tmp_path / "c", target)
    result = verify_against_tflm(oracle, schedule, model, get_runner(target), samples=4, seed=5)
    assert result.bit_exact, result.first_mismatch


def test_quantize_float_ties_round_away_from_zero(tmp_path):
    path = tmp_path / "q.tflite"
    path.write_bytes(single_op_model("QUANTIZE", [T((6,), "float32")], [T((6,), scale=0.5, zero_point=3)]))
    ties = np.array([0.25, -0.25, 0.75, -0.75, 1.25, -1.25], np.float32)  # x / 0.5 = +-0.5, +-1.5, +-2.5
    result = check_tflite(path, inputs=[[ties]])
    assert result.bit_exact, result.first_mismatch


# ---- TFLite fixed-point parameters, by hand from quantization_util.cc / common.cc ----

def test_quantize_multiplier_by_hand():
    assert quantize_multiplier_exponent(1.0) == (1 << 30, 1)
    assert quantize_multiplier_exponent(0.5) == (1 << 30, 0)
    assert quantize_multiplier_exponent(0.0) == (0, 0)
    assert quantize_multiplier_exponent(0.75) == (3 << 29, 0)
    # std::round ties away from zero: mantissa * 2^31 = 2^30 + 0.5 exactly
    assert quantize_multiplier_exponent(0.5 + 2.0 ** -32) == ((1 << 30) + 1, 0)
    # the mantissa rounds up to 2^31: halved, exponent + 1
    assert quantize_multiplier_exponent(1.0 - 2.0 ** -40) == (1 << 30, 1)
    # exponents below -31 flush to (0, 0); -31 itself is kept
    assert quantize_multiplier_exponent(2.0 ** -33) == (0, 0)
    assert quantize_multiplier_exponent(2.0 ** -32) == (1 << 30, -31)
    assert quantize_multiplier_smaller_than_one_exp(0.25) == (1 << 30, -1)
    with pytest.raises(UnsupportedError, match="must be in"):
        quantize_multiplier_smaller_than_one_exp(1.0)


def test_tosa_parameters_by_hand():
    assert tosa_scale32((1 << 30, 0)) == (1 << 30, 31)
    assert tosa_scale32((1 << 30, -3)) == (1 << 30, 34)
    assert tosa_scale32((0, 0)) == (0, 62)  # flushed: any shift gives 0, 62 has no value REQUIRE
    assert tosa_scale16((1 << 30, -3)) == (1 << 14, 18)
    assert tosa_scale16(((1 << 30) + (1 << 15), 0)) == ((1 << 14) + 1, 15)  # (m + 2^15) >> 16
    assert tosa_scale16((0x7FFF0000, 0)) == (0x7FFF, 15)  # saturates


def test_mbqm_by_hand():
    # docs/semantics.md §5.3: m = 2^30, TFLite exponent -2 (TOSA shift 33): x * 1/8 double-rounded
    assert mbqm(np.array([3, -4, -12, 4, -3]), (1 << 30, -2)).tolist() == [1, -1, -2, 1, 0]
    # exponent > 0: SRDHM(x * 2, 2^30) = x exactly
    assert mbqm(np.array([-5, 7]), (1 << 30, 1)).tolist() == [-5, 7]
    # 16x8: reduced multiplier 2^14, total shift 16: 1000 / 4 = 250, -1002 / 4 = -250.5 -> -250 (half up)
    assert mbqm64(np.array([1000, -1002]), (1 << 30, -1)).tolist() == [250, -250]
    with pytest.raises(Unpredictable):  # TOSA's value REQUIRE: shift 31 needs |x| < 2^30
        mbqm(np.array([1 << 30]), (1 << 30, 0))


def test_activation_range_by_hand():
    q = QuantType.per_tensor("i8", float(np.float32(0.1)), -10)
    assert activation_range(q, I8, "NONE") == (-128, 127)
    assert activation_range(q, I8, "RELU") == (-10, 127)
    assert activation_range(q, I8, "RELU6") == (-10, 50)
    assert activation_range(q, I8, "RELU_N1_TO_1") == (-20, 0)
    # 6.0f / 2.4f is exactly 2.5 in float32 (2.4999999 in double): rounds away to 3 -> -128 + 3 (TFLM gives -125)
    assert activation_range(QuantType.per_tensor("i8", float(np.float32(2.4)), -128), I8, "RELU6") == (-128, -125)
    assert activation_range(QuantType.per_tensor("i16", 0.001, 0), I16, "RELU6") == (0, 6000)


@given(x=st.integers(-(1 << 31), (1 << 31) - 1), m=st.integers(1 << 30, (1 << 31) - 1), s=st.integers(-31, 4))
def test_mbqm_equals_gemmlowp_composition(x, m, s):
    # the RESCALE form (TOSA DOUBLE_ROUND, shift 31 - s) == RDBPOT(SRDHM(x << s, m), -s) where TOSA's value
    # REQUIRE holds (outside it TFLite's x << s overflows or TOSA is unpredictable)
    if s >= 0 and not -(1 << (30 - s)) <= x < (1 << (30 - s)):
        return
    assert int(mbqm(np.array([x]), (m, s))[0]) == int(multiply_by_quantized_multiplier(x, m, s))
