"""TFLite Micro's LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU and PRELU: the generated C equals TFLM on every int8
input (and on all 65,536 int16 inputs where TFLM supports int16), the SYMMETRIC_LUT primitive's C equals its
reference, and the gemmlowp building blocks equal values computed by hand from their definitions."""

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.codegen.targets import Target
from qcodegen.compiler import plan
from qcodegen.errors import GraphError, PlanError, UnsupportedError
from qcodegen.frontends.tflite import load_tflite
from qcodegen.lower.tflite.activations import LUT16, SIGMOID_TABLE_ENV, int16_sigmoid_prescale, sigmoid_table_u16
from qcodegen.primitives.symmetric_lut import LutParams, symmetric_lookup
from qcodegen.semantics import tflm_fixedpoint as fp
from qcodegen.testing import Const, Var, assert_bit_exact, prepare, step_schedule, tflm_vs_c
from qcodegen.verify import tflm_oracle as tflm

pytest.importorskip("tflite_micro", reason="TFLM oracle tests need tflite-micro (pip install 'qcodegen[tflite]')")


T, OpSpec = tflm.TensorSpec, tflm.OpSpec

ALL_I8 = np.arange(-128, 128, dtype=np.int8)
ALL_I16 = np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256)
STRICT = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1")
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g")


# A monotone Q0.16 sigmoid table of our own (rounded sigmoid(i/24)) for the SYMMETRIC_LUT primitive tests.
SIGMOID_LIKE = np.minimum(np.floor(65536 / (1 + np.exp(-np.arange(256) / 24)) + 0.5), 65535).astype(np.int64)

def tflm_vs_c_chunks(tmp_path: Path, opcode: str, cases: list[tuple[T, T, dict]], x: np.ndarray) -> set[str]:
    """tflm_vs_c over models of at most 3 cases of 65,536 int16 values (TFLM's test arena holds 1 MiB);
    returns the primitives used."""
    ops = set()
    for k in range(0, len(cases), 3):
        chunk = cases[k:k + 3]
        (tmp_path / str(k)).mkdir()
        sched = tflm_vs_c(tmp_path / str(k), parallel(opcode, chunk), [[x] * len(chunk)])
        ops |= {s.op for s in sched.steps}
    return ops


def parallel(opcode: str, cases: list[tuple[T, T, dict]], extra: list[T | None] | None = None) -> bytes:
    """One model holding an independent `opcode` op per case (one C build, one TFLM run for all)."""
    ops = [OpSpec(opcode, [x, *(extra or [])], [y], options) for x, y, options in cases]
    inputs = [x for x, _, _ in cases] + [t for t in extra or [] if t is not None and t.data is None]
    return tflm.build_model(ops, inputs, [y for _, y, _ in cases])


# --- gemmlowp building blocks: values by hand ---------------------------------------------------------------
def test_fixed_point_blocks_by_hand():
    # SRDHM = floor((a*b + 2^30) / 2^31) (VQRDMULH); MIN*MIN saturates
    assert fp.srdhm([1 << 30, -3, 3, -(1 << 31)], [1 << 30, 1 << 30, 1 << 30, -(1 << 31)]).tolist() == [
        1 << 29, -1, 2, (1 << 31) - 1]
    # RDBPOT: ties away from zero; 7/4 = 1.75 -> 2
    assert fp.rdbpot([5, -5, -4, 7, -7, 6], [1, 1, 1, 2, 2, 2]).tolist() == [3, -3, -2, 2, -2, 2]
    # saturating left shift by 2 of values around 2^29
    assert fp.srmbpot([(1 << 29) - 1, 1 << 29, -(1 << 29), -(1 << 29) - 1], 2).tolist() == [
        (1 << 31) - 4, (1 << 31) - 1, -(1 << 31), -(1 << 31)]
    assert fp.rounding_half_sum([3, -3, 4], [0, 0, 1]).tolist() == [2, -2, 3]
    # MultiplyByQuantizedMultiplier double-rounds: docs/semantics.md §5.3 table (m = 2^30, s = -2)
    assert fp.multiply_by_quantized_multiplier([3, -4, -12], 1 << 30, -2).tolist() == [1, -1, -2]
    # CalculateInputRadius(4, 27) = floor(15 * 2^27 / 2^27); (5, 25) = floor(31 * 2^26 / 2^25)
    assert fp.calculate_input_radius(4, 27) == 15 and fp.calculate_input_radius(5, 25, 31) == 62
    # exp(0) = 1 (saturated), exp below -32 with 6 integer bits = 0; logistic(0) = 1/2; tanh(0) = 0
    assert fp.exp_on_negative_values([0, -(33 << 25)], 6).tolist() == [(1 << 31) - 1, 0]
    assert fp.logistic([0], 4).tolist() == [1 << 30] and fp.tanh([0], 4).tolist() == [0]
    # GetReciprocal(2^21 in Q12.19 = 4.0): x << 10 = 2^31 -> input 0 to 1/(1+x); 2 bits over unit
    assert fp.get_reciprocal([1 << 21], 12)[1].tolist() == [2]
    assert fp.count_leading_zeros32([1, (1 << 31) - 1, 1 << 21]).tolist() == [31, 1, 10]


def test_int16_prescale_by_hand():
    # 2^-12 is TFLM's power-of-two case: y = 3x; tanh also takes 2^-11 (6x). Otherwise 12288 * scale doubled
    # until it exceeds 16383.5: scale 1.0 -> 24576 with shift 1.
    assert int16_sigmoid_prescale(2.0 ** -12, False) == (3, 0)
    assert int16_sigmoid_prescale(2.0 ** -11, True) == (6, 0)
    assert int16_sigmoid_prescale(2.0 ** -11, False) == (24576, 12)
    assert int16_sigmoid_prescale(1.0, False) == (24576, 1)


# --- SYMMETRIC_LUT primitive ----------------------------------------------------------------------------------
def test_symmetric_lut_by_hand():
    # table [0, 10, 30], 2 fraction bits: w = 5 -> h 1, f 1: 10*4 + 1*20 = 60; w >= 8 saturates to 99
    params = LutParams(frac_bits=2, saturation=99, bias=2, shift=2, neg_offset=100)
    table = np.array([0, 10, 30])
    got = symmetric_lookup(params, table, np.array([5, -5, 0, 8, -9, 3]))
    assert got.tolist() == [(60 + 2) >> 2, 100 - ((60 + 2) >> 2), 0, (99 + 2) >> 2, 100 - 25, (30 + 2) >> 2]


@given(kind=st.sampled_from(sorted(LUT16)), lo=st.integers(-(1 << 20), 0), span=st.integers(0, 1 << 21),
       data=st.data())
def test_symmetric_lut_c_matches_reference(kind, lo, span, data):
    table = SIGMOID_LIKE if data.draw(st.booleans()) else np.sort(
        np.array(data.draw(st.lists(st.integers(32768, 65534), min_size=2, max_size=40)), np.int64))
    sched = step_schedule("SYMMETRIC_LUT", [Var((7, 9), "i32", lo, lo + span), Const(table, "u16")],
                          [((7, 9), "i16")], **LUT16[kind])
    try:
        prepare(sched)
    except PlanError:  # the random table does not fit the output type
        return
    assert_bit_exact(sched, samples=2)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_symmetric_lut_strict_and_sanitized(cc):
    target = Target(name=f"{cc}-strict", description="", cc=cc, cflags=STRICT, ldflags=("-lm",))
    for kind in LUT16:
        sched = step_schedule("SYMMETRIC_LUT", [Var((300,), "i32", -(1 << 31), (1 << 31) - 1),
                                                Const(SIGMOID_LIKE, "u16")], [((300,), "i16")], **LUT16[kind])
        assert_bit_exact(sched, samples=2, runner="harness", extra_cflags=SANITIZE, target=target)


def test_symmetric_lut_rejects():
    bad = step_schedule("SYMMETRIC_LUT", [Var((4,), "i32"), Var((3,), "u16")], [((4,), "i16")], **LUT16["tfl.tanh"])
    with pytest.raises(GraphError, match="constant"):
        prepare(bad)
    wide = step_schedule("SYMMETRIC_LUT", [Var((4,), "i32"), Const(np.array([1 << 15, 0]), "u16")],
                         [((4,), "i16")], frac_bits=0, saturation=0, bias=0, shift=0, neg_offset=0)
    with pytest.raises(PlanError, match="do not fit"):
        prepare(wide)


# --- int8: every input equals TFLM ------------------------------------------------------------------------------
# (input scale, input zp): scale 0.5 puts the LOGISTIC/TANH radius at |d| = 15 exactly; tiny and huge scales
# saturate early or never
SIGMOID_INPUTS = [(0.5, 0), (0.07, 5), (0.0123, -128), (1e-4, 3), (3.0, 127), (0.1, -20)]


@pytest.mark.parametrize("opcode, out_quant", [("LOGISTIC", (1 / 256, -128)), ("TANH", (1 / 128, 0))])
def test_int8_sigmoid_all_inputs(tmp_path, opcode, out_quant):
    cases = [(T((256,), "int8", s, zp), T((256,), "int8", *out_quant), {}) for s, zp in SIGMOID_INPUTS]
    sched = tflm_vs_c(tmp_path, parallel(opcode, cases), [[ALL_I8] * len(cases)])
    assert [s.op for s in sched.steps] == ["TABLE"] * len(cases)


def test_int8_hard_swish_all_inputs(tmp_path):
    quants = [((0.05, -10), (0.03, -60)), ((0.1, 0), (0.1, 0)), ((0.02, 100), (0.015, -128)),
              ((0.5, -128), (0.8, -100)), ((0.001, 3), (0.2, 0))]
    cases = [(T((256,), "int8", *qi), T((256,), "int8", *qo), {}) for qi, qo in quants]
    tflm_vs_c(tmp_path, parallel("HARD_SWISH", cases), [[ALL_I8] * len(cases)])


def test_int8_leaky_relu_all_inputs(tmp_path):
    params = [(0.2, (0.05, -10), (0.03, -60)), (-0.7, (0.05, 0), (0.06, 20)), (1.5, (0.01, 127), (0.02, -128)),
              (0.0, (0.1, 5), (0.1, 5)), (0.3, (0.5, 0), (0.001, 0))]
    cases = [(T((256,), "int8", *qi), T((256,), "int8", *qo), {"alpha": a}) for a, qi, qo in params]
    tflm_vs_c(tmp_path, parallel("LEAKY_RELU", cases), [[ALL_I8] * len(cases)])


def test_int8_prelu_scalar_alpha_is_a_table(tmp_path):
    alpha = T((1,), "int8", 0.02, 3, data=np.array([-90]))
    cases = [(T((256,), "int8", 0.05, -7), T((256,), "int8", 0.04, 10), {}),
             (T((256,), "int8", 0.3, 100), T((256,), "int8", 0.1, -128), {})]
    sched = tflm_vs_c(tmp_path, parallel("PRELU", cases, [alpha]), [[ALL_I8] * 2])
    assert [s.op for s in sched.steps] == ["TABLE", "TABLE"]


# --- int16 and tensor alpha ---------------------------------------------------------------------------------------
# scales: the power-of-two cases (MUL by 3 or 6), a scale whose shift is 0 (MUL), general scales (RESCALE)
INT16_SCALES = [2.0 ** -12, 2.0 ** -11, 2.0, 1.0, 3e-4, 1e-5, 0.0123]


@pytest.mark.skipif(not os.environ.get(SIGMOID_TABLE_ENV), reason=f"{SIGMOID_TABLE_ENV} is not set (TFLM's "
                    "sigmoid_table_uint16 is not shipped with qcodegen)")
@pytest.mark.parametrize("opcode", ["LOGISTIC", "TANH"])
def test_int16_sigmoid_all_inputs(tmp_path, opcode):
    cases = [(T((256, 256), "int16", s, 0), T((256, 256), "int16", 1 / 32768, 0), {}) for s in INT16_SCALES]
    assert tflm_vs_c_chunks(tmp_path, opcode, cases, ALL_I16) == {"MUL", "RESCALE", "SYMMETRIC_LUT"}


def test_int16_leaky_relu_all_inputs(tmp_path):
    params = [(0.3, 0.001, 0.0013), (-0.7, 0.001, 0.0005), (1.5, 0.002, 0.001), (0.01, 1e-4, 3e-3)]
    cases = [(T((256, 256), "int16", si, 0), T((256, 256), "int16", so, 0), {"alpha": a}) for a, si, so in params]
    assert tflm_vs_c_chunks(tmp_path, "LEAKY_RELU", cases, ALL_I16) == {"RESCALE", "ADD", "SUB"}


def test_prelu_tensor_alpha(tmp_path):
    rng = np.random.default_rng(7)
    x8 = rng.integers(-128, 128, (2, 4, 5, 6)).astype(np.int8)
    x16 = rng.integers(-32768, 32768, (2, 4, 5, 6)).astype(np.int16)
    a8 = rng.integers(-128, 128, (5, 6)).astype(np.int8)
    xa, aa = T((2, 4, 5, 6), "int8", 0.05, -7), T((5, 6), "int8", 0.02, 3)
    x16s = T((2, 4, 5, 6), "int16", 0.001, 0)
    const_alpha = T((1, 1, 6), "int8", 0.02, -5, data=rng.integers(-128, 128, (1, 1, 6)))
    ops = [OpSpec("PRELU", [xa, aa], [ya := T((2, 4, 5, 6), "int8", 0.04, 10)]),
           OpSpec("PRELU", [xa, const_alpha], [yc := T((2, 4, 5, 6), "int8", 0.03, -3)]),
           OpSpec("PRELU", [x16s, const_alpha], [y16 := T((2, 4, 5, 6), "int16", 0.0015, 0)])]
    x8[0, 0, 0, :] = -128
    x16[0, 0, 0, :] = [-32768, 32767, 0, -1, 1, -32768]
    tflm_vs_c(tmp_path, tflm.build_model(ops, [xa, aa, x16s], [ya, yc, y16]), [[x8, a8, x16]])


# --- rejected models ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opcode, x, y, error", [
    ("LOGISTIC", T((4,), "int8", 0.1, 0), T((4,), "int8", 1 / 256, 0), GraphError),  # int8 needs output zp -128
    ("LOGISTIC", T((4,), "int16", 1e-3, 0), T((4,), "int16", 1 / 256, 0), GraphError),  # int16 output 2^-15
    ("TANH", T((4,), "int16", 3.0, 0), T((4,), "int16", 1 / 32768, 0), UnsupportedError),  # multiplier > int16
    ("HARD_SWISH", T((4,), "int16", 1e-3, 0), T((4,), "int16", 1e-3, 0), UnsupportedError),  # TFLM: int8 only
])
def test_rejected(tmp_path, opcode, x, y, error):
    path = tmp_path / "bad.tflite"
    path.write_bytes(tflm.single_op_model(opcode, [x], [y]))
    with pytest.raises(error):
        plan(load_tflite(path))


def test_int16_sigmoid_table_must_be_supplied(monkeypatch, tmp_path):
    monkeypatch.delenv(SIGMOID_TABLE_ENV, raising=False)
    with pytest.raises(UnsupportedError, match=SIGMOID_TABLE_ENV):
        sigmoid_table_u16("op tfl.logistic")
    bad = tmp_path / "table.txt"
    bad.write_text("1, 2, 3")
    monkeypatch.setenv(SIGMOID_TABLE_ENV, str(bad))
    with pytest.raises(UnsupportedError, match="256 non-decreasing"):
        sigmoid_table_u16("op tfl.logistic")
    bad.write_text(", ".join(str(v) for v in SIGMOID_LIKE))
    assert sigmoid_table_u16("op").tolist() == SIGMOID_LIKE.tolist()
