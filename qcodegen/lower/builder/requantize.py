"""requantize: q -> q with a new scale / zero point (one RESCALE)."""

from __future__ import annotations

from ...ir.graph import Op
from ..base import Lowerer, rule
from ..common import requantize


@rule("requantize")
def lower_requantize(lw: Lowerer, op: Op) -> None:
    qi, qo = lw.quant_in(0), lw.quant_out(0)
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    if x.shape != y.shape:
        raise lw.error(f"output shape {list(y.shape)} differs from input shape {list(x.shape)}")
    requantize(lw, x.name, qi, y.name, qo)
