"""Accuracy of HYBRID_CONV2D steps against the float definition op(lhs, dequantize(rhs)) (docs/schemes.md).

The definition is evaluated in float64: every term x_i * (w_i - zp) * scale is exact in float64 (a float32 times an
integer below 2^9 times a float32), the sum of the K terms is off by at most gamma64(K) * sum |terms|, which the
bounds below include. The C output equals the numpy reference bit for bit (tested), so the reference stands for it.

Error bounds (u = 2^-24, gamma(n) = n u / (1 - n u); no underflow, i.e. finite inputs whose nonzero products stay
above 2^-126 in magnitude; per output element, sums over its window):
- weight-only: each term x_i * w_i * s_b goes through one product rounding, at most n_b - 1 additions in its block
  sum, the multiply by the block scale and at most B - 1 additions across blocks (the first addition of each sum is
  to 0.0, exact):  |y - exact| <= gamma(n + B) * sum_i |x_i * wdeq_i|,  n = the largest block (KH*KW*C / B).
- dynamic-range: with sx, inv the computed scale and 127 / range, q_i * sx = x_i (1 + th_3) + e_i * sx, |e_i| <= 1/2,
  so the quantization error of each input is |dx_i| <= sx / 2 + gamma(3) |x_i|; the int32 dot is exact and the float
  tail ((float)acc, sx * s_b, the product, B - 1 additions) adds gamma(B + 2) relative error to each block term:
  |y - exact| <= sum_i (sx / 2 + gamma(3) |x_i|) |wdeq_i| + gamma(B + 2) * sum_i |q_i * sx * wdeq_i|.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import primitives
from ..ir.schedule import Schedule, StepIO
from ..primitives.hybrid_conv2d import HybridConv2D, quantize_rows
from ..reference import run_reference

U32 = 2.0 ** -24
U64 = 2.0 ** -53


def gamma(n: int, u: float = U32) -> float:
    return n * u / (1 - n * u)


def _terms(io: StepIO, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each output's window rows [P, K] (float64) and the dequantized weights [O, K] (float64, exact)."""
    prim: HybridConv2D = primitives.get("HYBRID_CONV2D")
    rows = prim.rows(io, x).astype(np.float64)
    wd = prim.centred(io, io.ins[1].data).astype(np.float64)
    scale = prim.scales(io).astype(np.float64)
    bs = wd.shape[2] // scale.shape[0]
    wdeq = wd * np.repeat(scale.T, bs, axis=1)[:, None, :]
    return rows.reshape(rows.shape[0], -1), wdeq.reshape(wdeq.shape[0], -1)


def exact(io: StepIO, x: np.ndarray) -> np.ndarray:
    """op(x, dequantize(w)) in float64, [P, O]."""
    rows, wdeq = _terms(io, x)
    return rows @ wdeq.T


def error_bound(io: StepIO, x: np.ndarray) -> np.ndarray:
    """The bound of the module docstring on |y - exact| (y the step's output, exact the float64 value), [P, O]."""
    prim: HybridConv2D = primitives.get("HYBRID_CONV2D")
    rows, wdeq = _terms(io, x)
    blocks = prim.scales(io).shape[0]
    k = rows.shape[1]
    aw = np.abs(wdeq).T
    magnitude = np.abs(rows) @ aw
    reference_error = gamma(k, U64) * magnitude * 2  # the float64 definition's own sum (and this bound's)
    if prim.mode(io) == "weight-only":
        return gamma(k // blocks + blocks) * magnitude + reference_error
    q, sx = quantize_rows(rows.astype(np.float32))
    sx = sx.astype(np.float64)[:, None]
    quantization = sx / 2 * aw.sum(axis=0)[None, :] + gamma(3) * magnitude
    tail = gamma(blocks + 2) * (np.abs(q).astype(np.float64) @ aw) * sx
    return (quantization + tail) * (1 + 4 * U64) + reference_error


@dataclass
class Accuracy:
    """Errors of one HYBRID_CONV2D step over some samples."""

    source: str
    mode: str
    max_abs_error: float
    max_abs_exact: float
    max_error_over_bound: float  # <= 1 when the stated bound holds

    @property
    def relative_error(self) -> float:
        """max |error| / max |exact|."""
        return self.max_abs_error / self.max_abs_exact if self.max_abs_exact else 0.0


def measure(schedule: Schedule, batches: list[list[np.ndarray]]) -> list[Accuracy]:
    """Accuracy of every HYBRID_CONV2D step of a planned schedule on the input batches."""
    found: dict[int, list[float]] = {}
    for batch in batches:
        values = run_reference(schedule, batch)
        for k, step in enumerate(schedule.steps):
            if step.op != "HYBRID_CONV2D":
                continue
            io = schedule.io(step)
            x = values[step.inputs[0]]
            want = exact(io, x)
            got = values[step.outputs[0]].astype(np.float64).reshape(want.shape)
            err = np.abs(got - want)
            acc = found.setdefault(k, [0.0, 0.0, 0.0])
            acc[0] = max(acc[0], float(err.max()))
            acc[1] = max(acc[1], float(np.abs(want).max()))
            bound = error_bound(io, x)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(bound > 0, err / bound, np.where(err > 0, np.inf, 0.0))
            acc[2] = max(acc[2], float(ratio.max()))
    return [Accuracy(schedule.steps[k].source, str(schedule.steps[k].attrs.get("mode", "weight-only")), *v)
            for k, v in found.items()]
