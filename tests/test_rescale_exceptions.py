"""Single rounding with exceptions (docs/semantics.md §14.5): a FUSED_CONV whose RESCALE lists accumulators with
their own values. The generated code of every kernel family (portable C; the MVE and RV32 dot products with the
template's store; the x86, AArch64, HVX and RVV vector requantization with qc_x86_except8 / qc_neon_except /
qc_hvx_except / qc_rvv_except; under QEMU the Cortex-M4 kernels' mode 4, depthwise pixels in pairs and alone)
equals the reference on inputs chosen so that the exceptions are hit; the reference itself is checked to differ
from the RESCALE without them there (so a store that ignores them fails)."""

from __future__ import annotations

import numpy as np
import pytest

from qcodegen import primitives
from qcodegen.codegen import load_target
from qcodegen.ir.schedule import Step, StepIO
from qcodegen.kernel_testing import conv_accumulators, conv_schedule, depthwise_accumulators
from qcodegen.kernels import plan_kernels
from qcodegen.primitives.fused import part_ios
from qcodegen.testing import Var, c_vs_reference, step_schedule, verify_planned
from qcodegen.verify.runners import unavailable

# 10 channels: the depthwise kernels' blocks of 4 channels and the 2 after them
MULTS = [1 << 30, 1_300_000_000, 1_100_000_000, 1 << 30, 1_500_000_000, 1_200_000_000, 1 << 30, 1 << 30,
         1_400_000_000, 1 << 30]
SHIFTS = [36, 37, 36, 38, 36, 37, 36, 37, 36, 36]


def _exceptions(acc: np.ndarray, rng: np.random.Generator, per_channel: bool) -> list[tuple[int, int, int]]:
    """Up to 3 accumulators that occur in acc [..., C] per channel (none on channel 1; per tensor: 6 of any
    channel's, as channel 0's), each with a value off by one from the single rounding's: (channel, accumulator,
    value)."""
    flat = acc.reshape(-1, acc.shape[-1])
    picks = ([(c, rng.choice(np.unique(flat[:, c]), size=min(3, c + 1), replace=False)) for c in range(flat.shape[1])
              if c != 1] if per_channel else [(0, rng.choice(np.unique(flat), size=6, replace=False))])
    listed = []
    for c, accumulators in picks:
        for a in accumulators.tolist():
            single = (a * MULTS[c] + (1 << (SHIFTS[c] - 1))) >> SHIFTS[c]
            listed.append((c, int(a), single + 3 + 1 - 2 * (a % 2)))
    return listed


def _case(op: str, per_channel: bool, channels: int | None = None) -> tuple:
    """(schedule, input, accumulators) of a FUSED_CONV with exceptions hit by the input."""
    rng = np.random.default_rng(17)
    c = channels or (len(MULTS) if per_channel or op == "CONV2D" else 8)  # depthwise per tensor: 8 (Cortex-M pairs)
    if op == "CONV2D":
        x = rng.integers(-128, 128, (1, 4, 5, 8))  # 20 pixels: 6 triples and a pair on Cortex-M
        w = rng.integers(-8, 9, (c, 1, 1, 8))
        bias = rng.integers(-500, 500, c)
        acc = conv_accumulators(x.reshape(-1, 8), w.reshape(c, 8), bias, 0)
        shapes = dict(x_shape=x.shape, y_shape=(1, 4, 5, c), w=w)
    else:
        x = rng.integers(-128, 128, (1, 7, 7, c))  # rows of 5 pixels: 2 pairs and one on Cortex-M
        w = rng.integers(-8, 9, (3, 3, c))
        bias = rng.integers(-500, 500, c)
        acc = depthwise_accumulators(x, w, bias, 0)
        shapes = dict(x_shape=x.shape, y_shape=acc.shape, w=w.reshape(3, 3, c, 1))
    n = c if per_channel else 1
    sched = conv_schedule(op, bias=bias, izp=0, mults=MULTS[:n], shifts=SHIFTS[:n], rounding="single_round",
                          exceptions=_exceptions(acc, rng, per_channel), **shapes)
    return sched, x.astype(np.int8), acc


def _rescale_without_exceptions_differs(sched, acc: np.ndarray) -> int:
    """How many outputs the exceptions change in the reference."""
    _, rescale = part_ios(sched.io(next(iter(sched.fused.values()))))
    acc = acc.reshape(-1, *rescale.ins[0].shape[1:])  # a batch of the step's inputs
    plain = dict(rescale.step.attrs)
    plain.pop("exceptions")
    with_exc = primitives.get("RESCALE").reference(rescale, [acc])[0]
    rescale.step.attrs, saved = plain, rescale.step.attrs
    without = primitives.get("RESCALE").reference(rescale, [acc])[0]
    rescale.step.attrs = saved
    return int(np.count_nonzero(with_exc != without))


def _check(op: str, target: str, per_channel: bool, cortex_m_kernels: tuple[str, ...],
           channels: int | None = None) -> str:
    """Checks the case on `target`; returns its kernel."""
    t = load_target(target)
    reason = unavailable(t)
    if reason:
        pytest.skip(f"{target}: {reason}")
    sched, x, acc = _case(op, per_channel, channels)
    assert _rescale_without_exceptions_differs(sched, acc) >= 5
    kernel = next(s.choice.kernel for s in plan_kernels(sched, t, "t").steps)
    if target == "cortex-m4":  # requantized in the kernels (mode 4)
        assert kernel in cortex_m_kernels, kernel
    if target.startswith("x86"):  # requantized in vectors (qc_x86_rq8_store, qc_x86_dw_rows), then the exceptions
        assert kernel in ("qc_x86_madd_blocks", "qc_x86_dpbusd_blocks", "qc_x86_dw8", "qc_x86_dw_rows"), kernel
    if target == "hexagon-hvx":  # requantized in vectors with the exceptions (qc_hvx_except)
        assert kernel in ("qc_hvx_conv_rq_exc_s8", "qc_hvx_dw_rq_exc_s8"), kernel
    if target == "riscv64-rvv":  # requantized in vectors with the exceptions (qc_rvv_except)
        assert next(s.choice.params.rq.exceptions for s in plan_kernels(sched, t, "t").steps)
    result = verify_planned(sched, target=target, inputs=[[x]])
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"
    return kernel


@pytest.mark.parametrize("target", ["generic", "cortex-m4", "x86-avx2", "x86-avx512vnni", "aarch64-neon",
                                    "aarch64-dotprod", "cortex-m55", "riscv32", "riscv64-rvv", "hexagon-hvx"])
@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D"])
def test_fused_store_takes_the_exceptions(op, target):
    _check(op, target, True, ("qc_dsp_conv_3px_s8x2_single_pc_exc_g2", "qc_dsp_dw_s8_single_pc_exc"))


@pytest.mark.parametrize("target", ["generic", "cortex-m4", "x86-avx2", "hexagon-hvx", "riscv64-rvv"])
@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D"])
def test_per_tensor_exceptions(op, target):
    _check(op, target, False, ("qc_dsp_conv_3px_s8x2_single_exc_g2", "qc_dsp_dw_s8_single_exc_c4"))


@pytest.mark.parametrize("target", ["x86-avx2", "x86-avx512vnni"])
def test_x86_depthwise_rows_take_the_exceptions(target):
    """Per channel, 8 channels: qc_x86_dw_rows (per tensor: test_per_tensor_exceptions)."""
    assert _check("DEPTHWISE_CONV2D", target, True, (), channels=8) == "qc_x86_dw_rows"


@pytest.mark.parametrize("target", ["generic", "cortex-m4", "x86-avx2", "hexagon-hvx"])
def test_dense_layer_takes_the_exceptions(target):
    """One output pixel (an ONNX MatMul / Gemm as qcodegen/plan/rewrite.py leaves it: the RESCALE fused into the
    1x1 CONV2D; Cortex-M4: the one-pixel dot kernels with the template's store), 6 inputs whose accumulators
    include every exception."""
    t = load_target(target)
    reason = unavailable(t)
    if reason:
        pytest.skip(f"{target}: {reason}")
    rng = np.random.default_rng(23)
    c, k = len(MULTS), 24
    xs = rng.integers(-128, 128, (6, k))
    w, bias = rng.integers(-8, 9, (c, 1, 1, k)), rng.integers(-500, 500, c)
    acc = conv_accumulators(xs, w.reshape(c, k), bias, 0)
    sched = conv_schedule("CONV2D", x_shape=(1, 1, 1, k), y_shape=(1, 1, 1, c), w=w, bias=bias, izp=0, mults=MULTS,
                          shifts=SHIFTS, rounding="single_round", exceptions=_exceptions(acc, rng, True))
    assert _rescale_without_exceptions_differs(sched, acc) >= 12
    kernel = next(s.choice.kernel for s in plan_kernels(sched, t, "t").steps)
    assert "dot_4rows" in kernel if target == "cortex-m4" else kernel == "qc_x86_ubs_blocks" if target == "x86-avx2" \
        else kernel == "qc_hvx_conv_rq_exc_s8" if target == "hexagon-hvx" else True
    result = verify_planned(sched, target=target, inputs=[[x.reshape(1, 1, 1, k).astype(np.int8)] for x in xs])
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"


def test_unfused_rescale_takes_the_exceptions():
    """A RESCALE with exceptions left unfused (templates/generic/rescale.c.j2), per channel on axis 1."""
    rng = np.random.default_rng(3)
    acc = rng.integers(-3000, 3000, (4, 3, 50)).astype(np.int32)
    mults, shifts = [1_300_000_000, 1 << 30, 1_100_000_000], [38, 37, 38]
    listed = [(c, int(a), int((a * mults[c] + (1 << (shifts[c] - 1))) >> shifts[c]) - 2 + 1 - 2 * (c % 2))
              for c in range(3) for a in rng.choice(acc[:, c].reshape(-1), 4, replace=False).tolist()]
    sched = step_schedule("RESCALE", [Var(acc.shape, "i32")], [(acc.shape, "i8")], multiplier=mults, shift=shifts,
                          input_zp=0, output_zp=-2, scale32=True, rounding="single_round", per_channel=True, axis=1,
                          exceptions=[list(e) for e in listed])
    io = sched.io(sched.steps[0])
    plain = primitives.get("RESCALE").reference(
        StepIO(Step("RESCALE", io.step.inputs, io.step.outputs, {k: v for k, v in io.attrs.items()
                                                                 if k != "exceptions"}), io.ins, io.outs), [acc])[0]
    assert np.count_nonzero(primitives.get("RESCALE").reference(io, [acc])[0] != plain) >= 12
    result = c_vs_reference(sched, inputs=[[acc]])
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"
