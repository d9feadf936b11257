"""requantize: q -> q with a new scale / zero point (one RESCALE)."""

from __future__ import annotations

from ..ir.graph import Op
from .base import Lowerer, rule


@rule("requantize")
def lower_requantize(lw: Lowerer, op: Op) -> None:
    qi, qo = lw.quant_in(0), lw.quant_out(0)
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    if x.shape != y.shape:
        raise lw.error(f"output shape {list(y.shape)} differs from input shape {list(x.shape)}")
    lw.rescale(x.name, y.name, qi.scale / qo.scale, qi.zero_point, qo.zero_point,
               out_min=qo.storage_min, out_max=qo.storage_max)
