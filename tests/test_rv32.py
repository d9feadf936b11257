"""RV32 requantization (runtime/rv32/qc_rv32.h qc_rv32_scale32, chosen by qcodegen/kernels/rv32): the FUSED_CONV
stores of the riscv32 target use its modes QC_RV32_SINGLE / QC_RV32_DOUBLE (MULH, and for the double rounding MUL
and a carry; shifts >= 33) or QC_RV32_DOUBLE_29 (the double rounding as MULH of 4 * acc, for accumulators below 2^29
and shifts >= 32) instead of TOSA apply_scale_32's 64-bit product. Property tests under QEMU: per output channel a
random (multiplier, shift, bias), the pixels adding consecutive inputs to the bias (consecutive accumulators: every
residue below the rounding point when the multiplier is a power of two), the biases aimed at outputs inside the
clamp, negative accumulators, both roundings, through the pointwise (CONV2D) and the depthwise kernel."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qcodegen.codegen import generate, load_target
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import CONST, INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.kernels.rv32.layouts import rv32_r4, rv32_r8
from qcodegen.plan.fuse import fuse_conv_rescale
from qcodegen.reference.executor import run_reference
from qcodegen.testing import prepare, verify_planned
from qcodegen.verify.runners import unavailable

TARGET = load_target("riscv32")
pytestmark = pytest.mark.skipif(bool(unavailable(TARGET)), reason=f"riscv32: {unavailable(TARGET)}")

OC, PIXELS = 12, 16
WINDOW = 128 * 128  # the most one 1x1 tap adds to the bias (|x| <= 128, |w| <= 128)


@st.composite
def _channel(draw, min_shift: int, bias_bound: int) -> tuple[int, int, int, int]:
    """(multiplier, shift, bias, weight): any multiplier, one near 2^31, or a power of two (exact ties), the
    bias aimed at an output inside the clamp (or beyond it, clipped to +-bias_bound)."""
    shift = draw(st.integers(min_shift, 62))
    mult = draw(st.one_of(st.integers(1, (1 << 31) - 1), st.integers((1 << 31) - 64, (1 << 31) - 1),
                          st.integers(max(0, shift - 36), 30).map(lambda j: 1 << j)))
    out = draw(st.integers(-110, 110))
    bias = (out << shift) // mult + draw(st.integers(-(1 << 12), 1 << 12))
    return mult, shift, int(np.clip(bias, -bias_bound, bias_bound)), draw(st.sampled_from([1, -1, 3, 127, -128]))


def _schedule(channels: list[tuple[int, int, int, int]], op: str, rounding: str, out_zp: int) -> Schedule:
    """A 1x1 CONV2D (one input channel) or DEPTHWISE_CONV2D (OC channels) over PIXELS pixels, + RESCALE to i8
    (per channel), fused: acc[p, c] = bias[c] + x[p, c or 0] * w[c]."""
    mults, shifts, bias, w = (list(v) for v in zip(*channels, strict=True))
    sched = Schedule("t")
    c_in = 1 if op == "CONV2D" else OC
    w_shape = (OC, 1, 1, 1) if op == "CONV2D" else (1, 1, OC, 1)
    for name, shape, dt, kind, values in [
            ("x", (1, 1, PIXELS, c_in), "i8", INPUT, None),
            ("w", w_shape, "i8", CONST, np.array(w, np.int8).reshape(w_shape)),
            ("b", (OC,), "i32", CONST, np.array(bias, np.int32)),
            ("acc", (1, 1, PIXELS, OC), "i32", TEMP, None), ("y", (1, 1, PIXELS, OC), "i8", OUTPUT, None)]:
        sched.add_buffer(Buffer(name, shape, dtype(dt), kind, values))
    sched.inputs, sched.outputs = ["x"], ["y"]
    conv = dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0, acc_type="i32")
    rescale = dict(multiplier=mults, shift=shifts, input_zp=0, output_zp=out_zp, scale32=True, per_channel=True,
                   rounding=rounding)
    sched.steps = [Step(op, ["x", "w", "b"], ["acc"], conv, "conv"), Step("RESCALE", ["acc"], ["y"], rescale, "rs")]
    fuse_conv_rescale(sched)
    return sched


# rounding, accumulators below 2^29 or up to 2^31, the qc_rv32_scale32 mode the stores use, the smallest shift it
# takes
CASES = [("single_round", False, 0, 33), ("double_round", False, 2, 32), ("double_round", True, 1, 33)]


def _stores_with(c_code: str, mode: int) -> bool:
    """Whether the step's stores call qc_rv32_scale32 in `mode` (the depthwise kernel: its store record's mode)."""
    step = c_code.split("static void t_step", 1)[1]
    return re.search(rf"qc_rv32_scale32\(acc\b[^;]*, {mode}\)|qc_rv32_dw_store qc_st = {{[^;]*\.mode = {mode},",
                     step) is not None


@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D"])
@pytest.mark.parametrize("rounding, big, mode, min_shift", CASES)
@settings(max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_requantize_helpers(op, rounding, big, mode, min_shift, data, tmp_path):
    bound = (1 << 31) - 1 - WINDOW if big else (1 << 29) - 1 - WINDOW
    channels = data.draw(st.lists(_channel(min_shift, bound), min_size=OC, max_size=OC))
    if big:  # an accumulator beyond 2^29: the step cannot use qc_rv_scale32_dbl29
        channels[0] = (channels[0][0], channels[0][1], data.draw(st.sampled_from([bound, -bound])), channels[0][3])
    sched = _schedule(channels, op, rounding, data.draw(st.integers(-128, 127)))
    prepare(sched)
    generate(sched, tmp_path, TARGET)
    assert _stores_with((tmp_path / "t.c").read_text(), mode)
    x0 = data.draw(st.integers(-128, 127 - PIXELS))
    x = (x0 + np.arange(PIXELS * (1 if op == "CONV2D" else OC)) % PIXELS).astype(np.int8)
    shape = sched.buffers["x"].shape
    inputs = [[x.reshape(shape)], [np.full(shape, -128, np.int8)], [np.full(shape, 127, np.int8)]]
    result = verify_planned(sched, target=TARGET, inputs=inputs)
    assert result.bit_exact, f"{result.mismatches} mismatches, first {result.first_mismatch}"


def test_requantize_ties_by_hand(tmp_path):
    """Multiplier 2^30, TOSA apply_scale_32 by hand, output zero point 0, accumulators at ties. SINGLE_ROUND,
    shift 33: floor((acc * 2^30 + 2^32) / 2^33) = floor((acc + 4) / 8): acc = 4, -4, 12, -12 give 1, 0, 2, -1.
    DOUBLE_ROUND, shift 32: floor((acc * 2^30 + 2^31 +- 2^30) / 2^32) = floor((acc +- 1 + 2) / 4) (+ for
    acc >= 0): acc = 2, -2, 6, -6 give 1, -1, 2, -2."""
    for rounding, shift, accs, expected, mode in [("single_round", 33, [4, -4, 12, -12], [1, 0, 2, -1], 0),
                                                  ("double_round", 32, [2, -2, 6, -6], [1, -1, 2, -2], 2)]:
        sched = _schedule([(1 << 30, shift, 0, 1)] * OC, "CONV2D", rounding, 0)
        prepare(sched)
        generate(sched, tmp_path, TARGET)
        assert _stores_with((tmp_path / "t.c").read_text(), mode)
        x = np.zeros((1, 1, PIXELS, 1), np.int8)
        x.reshape(-1)[:4] = accs
        assert run_reference(sched, [x])["y"].reshape(PIXELS, OC)[:4, 0].tolist() == expected
        assert verify_planned(sched, target=TARGET, inputs=[[x]]).bit_exact


def test_rv32_rows_relayout_by_hand():
    """rv32_r4 of 5 rows of 3 elements (w[r, i] = 3r + i): per block of 4 rows and per element, the 4 rows'
    elements; the second block is row 4 and three zero rows."""
    w = np.arange(15).reshape(5, 3)
    assert rv32_r4(w).tolist() == [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11, 12, 0, 0, 0, 13, 0, 0, 0, 14, 0, 0, 0]
    assert rv32_r8(w).reshape(3, 8)[:, 5:].tolist() == [[0] * 3] * 3
