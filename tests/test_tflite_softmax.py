"""TFLite Micro's SOFTMAX: the SOFTMAX primitive's C equals its reference (hypothesis, gcc/clang strict with
sanitizers), the lowering equals TFLM (int8 input: beta != 1, d exactly at diff_min, all-equal rows, int8 and
int16 outputs; int16 input: every entry of both LUTs reached), and hand-computed rows."""


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.codegen.targets import Target
from qcodegen.compiler import plan
from qcodegen.errors import GraphError, PlanError
from qcodegen.frontends.tflite import load_tflite
from qcodegen.lower.tflite.softmax import exp_table, int16_luts, softmax_params
from qcodegen.primitives.softmax import softmax_rows
from qcodegen.semantics.tflite import quantize_multiplier_exponent
from qcodegen.testing import Const, Var, assert_bit_exact, prepare, step_schedule, tflm_vs_c
from qcodegen.verify import tflm_oracle as tflm

pytest.importorskip("tflite_micro", reason="TFLM oracle tests need tflite-micro (pip install 'qcodegen[tflite]')")


T, OpSpec = tflm.TensorSpec, tflm.OpSpec
OUT = {"i8": ("int8", 1 / 256, -128), "i16": ("int16", 1 / 65536, -32768)}
STRICT = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1")
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g")


def table_for(scale: float, beta: float = 1.0) -> np.ndarray:
    params = softmax_params(beta, scale)
    assert params is not None
    return exp_table(*params)


# --- parameters and rows by hand -----------------------------------------------------------------------------------
def test_params_by_hand():
    # scale 1, beta 1: real = 2^26 -> (2^30, 27); diff_min = -floor(31 * 2^26 / 2^27) = -15
    assert softmax_params(1.0, 1.0) == ((1 << 30, 27), -15)
    # scale 1/4: 2^24 -> shift 25, diff_min = -floor(31 * 2^26 / 2^25) = -62
    assert softmax_params(1.0, 0.25) == ((1 << 30, 25), -62)
    # beta * scale * 2^26 capped at 2^31 - 1: every difference but 0 is skipped
    assert softmax_params(1.0, 64.0) == (((1 << 31) - 1, 31), 0)
    assert softmax_params(1.0, 2.0 ** -26) is None  # TFLM's multiplier > 1 check
    t = table_for(1.0)
    assert t[0] == (1 << 31) - 1 and t[15] > 0 and not t[16:].any()


@pytest.mark.parametrize("depth, i8, i16", [(1, 127, 32767), (2, 0, 0), (4, -64, -16384), (8, -96, -24576)])
def test_all_equal_rows_by_hand(depth, i8, i16):
    # 1/depth at scale 1/256 (zp -128) and 1/65536 (zp -32768); depth 1 saturates at the type maximum
    x = np.full((3, depth), 17, np.int64)
    table = table_for(0.1)
    assert softmax_rows(x, table, 8).tolist() == [[i8] * depth] * 3
    assert softmax_rows(x, table, 16).tolist() == [[i16] * depth] * 3


# --- the primitive ----------------------------------------------------------------------------------------------
@given(out=st.sampled_from(["i8", "i16"]), rows=st.integers(1, 6), depth=st.integers(1, 70),
       scale=st.floats(2.0 ** -20, 64.0), beta=st.floats(0.05, 4.0), lo=st.integers(-128, 127),
       span=st.integers(0, 255))
def test_softmax_c_matches_reference(out, rows, depth, scale, beta, lo, span):
    params = softmax_params(beta, scale)
    if params is None:
        return
    sched = step_schedule("SOFTMAX", [Var((rows, depth), "i8", lo, min(127, lo + span)),
                                      Const(exp_table(*params), "i32")], [((rows, depth), out)])
    assert_bit_exact(sched, samples=2)


def softmax16_step(shape: tuple[int, ...], scale: float, lo: int | None = None, hi: int | None = None):
    m, s = quantize_multiplier_exponent(scale / (10.0 / 65535.0))
    exp_lut, recip_lut = int16_luts()
    return step_schedule("SOFTMAX", [Var(shape, "i16", lo, hi), Const(exp_lut, "i16"), Const(recip_lut, "i16")],
                         [(shape, "i16")], multiplier=m, shift=s)


@given(rows=st.integers(1, 6), depth=st.integers(1, 300), scale=st.floats(1e-7, 1.0), lo=st.integers(-32768, 32767),
       span=st.integers(0, 65535))
def test_softmax16_c_matches_reference(rows, depth, scale, lo, span):
    assert_bit_exact(softmax16_step((rows, depth), scale, lo, min(32767, lo + span)), samples=2)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_softmax_strict_and_sanitized(cc):
    target = Target(name=f"{cc}-strict", description="", cc=cc, cflags=STRICT, ldflags=("-lm",))
    for out in ("i8", "i16"):
        sched = step_schedule("SOFTMAX", [Var((2, 3, 600), "i8"), Const(table_for(0.01), "i32")],
                              [((2, 3, 600), out)])
        assert_bit_exact(sched, samples=2, runner="harness", extra_cflags=SANITIZE, target=target)
    for scale in (1e-3, 0.9):  # 0.9: MBQM's left shift wraps, as in TFLite
        assert_bit_exact(softmax16_step((3, 700), scale), samples=2, runner="harness", extra_cflags=SANITIZE,
                         target=target)


def test_softmax_primitive_rejects():
    with pytest.raises(PlanError, match="overflow"):  # 4096 * 2^19 = 2^31
        prepare(step_schedule("SOFTMAX", [Var((4096,), "i8"), Const(table_for(0.1), "i32")], [((4096,), "i8")]))
    with pytest.raises(GraphError, match="exp_table"):
        prepare(step_schedule("SOFTMAX", [Var((4,), "i8"), Const(np.zeros(255), "i32")], [((4,), "i8")]))
    with pytest.raises(GraphError, match="constant"):
        prepare(step_schedule("SOFTMAX", [Var((4,), "i8"), Var((256,), "i32")], [((4,), "i8")]))
    with pytest.raises(GraphError, match="output type"):
        prepare(step_schedule("SOFTMAX", [Var((4,), "i8"), Const(table_for(0.1), "i32")], [((4,), "i32")]))
    with pytest.raises(PlanError, match="overflow"):  # 65,540 * 32767 > 2^31
        prepare(softmax16_step((65540,), 1e-3))


# --- against TFLM ---------------------------------------------------------------------------------------------------
# (input scale, zero point, beta): diff_min -15 and -62 (rows below hit it exactly), beta != 1, the capped
# multiplier (every non-maximal element skipped), a tiny scale (nothing skipped)
CASES = [(1.0, 0, 1.0), (0.25, 3, 1.0), (0.1, -5, 0.5), (0.02, 20, 2.5), (64.0, 0, 1.0), (0.003, -128, 1.0),
         (0.05, 7, 1e-3 * 512)]


def rows_for(diff_min: int, depth: int, rng: np.random.Generator) -> np.ndarray:
    """Random rows plus: an all-equal row, a row with d = diff_min and diff_min - 1, a row spanning -128..127."""
    x = rng.integers(-128, 128, (6, depth))
    x[0] = 9
    x[1] = 100
    x[1, 1::3] = max(-128, 100 + diff_min)
    x[1, 2::3] = max(-128, 100 + diff_min - 1)
    x[2] = np.linspace(-128, 127, depth).round()
    return x.astype(np.int8)


@pytest.mark.parametrize("out", ["i8", "i16"])
def test_softmax_equals_tflm(tmp_path, out):
    rng = np.random.default_rng(3)
    ops, inputs, outputs, data = [], [], [], []
    for k, (scale, zp, beta) in enumerate(CASES):
        depth = 5 + 9 * k
        x, y = T((2, 3, depth), "int8", scale, zp), T((2, 3, depth), *OUT[out])
        ops.append(OpSpec("SOFTMAX", [x], [y], {"beta": beta}))
        inputs.append(x)
        outputs.append(y)
        data.append(rows_for(softmax_params(beta, scale)[1], depth, rng).reshape(2, 3, depth))
    sched = tflm_vs_c(tmp_path, tflm.build_model(ops, inputs, outputs), [data])
    assert [s.op for s in sched.steps] == ["SOFTMAX"] * len(CASES)


def test_softmax16_equals_tflm(tmp_path):
    """int16: rows [0, -16k] span every exp-LUT segment (the scale maps the difference 1:1 onto the LUT input)
    and every reciprocal-LUT segment (the sum runs from 1x to 2x exp(0)); plus random rows, beta != 1."""
    rng = np.random.default_rng(4)
    sweep = np.stack([np.zeros(4096), -16 * np.arange(4096)], axis=1).astype(np.int16)
    cases = [((4096, 2), 10 / 65535, 1.0, sweep)]
    for depth, scale, beta in ((37, 1e-3, 1.0), (300, 3e-5, 2.0), (5, 0.01, 0.5), (64, 0.9, 1.0)):
        x = rng.integers(-32768, 32768, (16, depth)).astype(np.int16)
        x[0] = 5
        x[1, ::2] = 32767
        cases.append(((16, depth), scale, beta, x))
    ops, ins, outs = [], [], []
    for shape, scale, beta, _ in cases:
        x, y = T(shape, "int16", scale, 0), T(shape, "int16", 1 / 32768, 0)
        ops.append(OpSpec("SOFTMAX", [x], [y], {"beta": beta}))
        ins.append(x)
        outs.append(y)
    tflm_vs_c(tmp_path, tflm.build_model(ops, ins, outs), [[data for *_, data in cases]])


@pytest.mark.parametrize("x, y, beta, error", [
    (T((4,), "int16", 1e-3, 0), T((4,), "int8", 1 / 256, -128), 1.0, GraphError),  # int16 gives int16
    (T((4,), "int16", 1e-3, 0), T((4,), "int16", 1 / 65536, 0), 1.0, GraphError),  # int16 scale 1/32768
    (T((4,), "int8", 0.1, 0), T((4,), "int8", 1 / 256, 0), 1.0, GraphError),  # zero point must be -128
    (T((4,), "int8", 0.1, 0), T((4,), "int8", 1 / 128, -128), 1.0, GraphError),  # scale must be 1/256
    (T((4,), "int8", 2.0 ** -26, 0), T((4,), "int8", 1 / 256, -128), 1.0, GraphError),  # multiplier <= 1
])
def test_rejected(tmp_path, x, y, beta, error):
    path = tmp_path / "bad.tflite"
    path.write_bytes(tflm.single_op_model("SOFTMAX", [x], [y], beta=beta))
    with pytest.raises(error):
        plan(load_tflite(path))

