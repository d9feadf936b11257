"""How each source format converts between float and the stored integers at a model's inputs and outputs: what the
generated header's `<name>_quantize_input<i>` / `<name>_dequantize_output<i>` helpers compute (per-tensor types).

- TFLite (`reference_ops::AffineQuantize`): zp + TfLiteRound(x / scale), the division in float32, ties away from
  zero, the zero point added after rounding, then saturated.
- StableHLO (`uniform_quantize`), MLIR quant, qcodegen JSON (`quantize`): round half to even of
  f32(x / scale) + f32(zp), saturated; NaN becomes the storage minimum (the QUANTIZE primitive).
- Dequantize (every format): f32(q - zp) * f32(scale). TFLite computes double(scale) * (q - zp) and rounds to
  float; for storage of at most 16 bits that product is exact in double, so both round the same exact value once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.quant import QuantType


@dataclass(frozen=True)
class EdgeQuantization:
    scale: np.float32
    zero_point: int
    qmin: int
    qmax: int
    round_fn: str  # qc_runtime.h: qc_round_half_away_f32 or qc_round_half_even_f32
    zero_point_in_float: bool  # added to x / scale in float32 before rounding (else to the rounded integer)
    clamp_lo: np.float32  # bounds of the value before rounding: rounding stays in range, NaN excluded
    clamp_hi: np.float32
    rule: str  # one line for the header comment


_RULES = {
    "tflite": ("qc_round_half_away_f32", False, "zp + round half away from zero of x / scale (float32), saturated "
                                                "(TFLite AffineQuantize)"),
}
_DEFAULT = ("qc_round_half_even_f32", True, "round half to even of x / scale + zp (float32), saturated, NaN -> "
                                            "storage minimum")


def edge_quantization(q: QuantType | None, source_format: str) -> EdgeQuantization | None:
    """The float conversion of a per-tensor quantized input/output of a model from `source_format`, or None."""
    if q is None or q.kind != "per_tensor":
        return None
    round_fn, zp_in_float, rule = _RULES.get(source_format, _DEFAULT)
    zp = int(q.zero_point)
    # bounds of the rounded value: one past the storage range keeps saturation exact and maps NaN to the minimum
    offset = 0 if zp_in_float else zp
    lo, hi = q.storage_min - offset - 1, q.storage_max - offset + 1
    return EdgeQuantization(np.float32(q.scale), zp, q.storage_min, q.storage_max, round_fn, zp_in_float,
                            np.float32(lo), np.float32(hi), rule)
