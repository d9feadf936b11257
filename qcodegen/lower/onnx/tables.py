"""Plan-time tables of onnxruntime's element-wise arithmetic (qcodegen/semantics/onnxruntime.py): exact by
construction. One input: a 256-entry TABLE (int8 -> int8) or a 65,536-entry LOOKUP (16-bit input); two 8-bit
inputs: a 65,536-entry LOOKUP."""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import DType
from ...ir.graph import Tensor
from ..base import Lowerer
from ..stablehlo.common import lookup


def table(lw: Lowerer, x: Tensor, values: np.ndarray, dst: str, out: DType) -> None:
    """dst = values[x - storage minimum]."""
    lookup(lw, [x.name], values, dst, out)


def table2(lw: Lowerer, a: str, b: str, values: np.ndarray, dst: str, out: DType) -> None:
    """dst = values[(a - min) * 256 + (b - min)], a and b broadcast (TOSA: equal ranks)."""
    lookup(lw, [a, b], values, dst, out)
