"""MAXIMUM and MINIMUM (TOSA 1.0 §MAXIMUM/§MINIMUM): element-wise with TOSA broadcasting (equal ranks, dimensions
equal or 1). TOSA defines them for i32; qcodegen also accepts i8 and i16 (output type = input type), the raw
stored integers compared as they are (what TFLite's int8/int16 MAXIMUM/MINIMUM kernels do)."""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import Primitive, register, require
from .elementwise import _Binary


class _Extremum(_Binary):
    in_types = ("i8", "i16", "i32")

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == 2 and len(io.outs) == 1, f"{self.name}: needs 2 inputs and 1 output")
        Primitive.check(self, io)
        a, b, y = io.ins[0].dtype, io.ins[1].dtype, io.outs[0].dtype
        require(a == b == y, f"{self.name}: input and output types differ ({a}, {b} -> {y})")
        require(a.name in self.in_types, f"{self.name}: type {a} is not one of {list(self.in_types)}")


@register
class Maximum(_Extremum):
    """out = max(a, b)."""

    name = "MAXIMUM"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.maximum(a, b)

    def c_expr(self, io: StepIO) -> str:
        return "a > b ? a : b"


@register
class Minimum(_Extremum):
    """out = min(a, b)."""

    name = "MINIMUM"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.minimum(a, b)

    def c_expr(self, io: StepIO) -> str:
        return "a < b ? a : b"
