"""Boolean operators (TOSA 1.0): LOGICAL_AND, LOGICAL_OR, LOGICAL_XOR, LOGICAL_NOT (bool), the comparisons
EQUAL, GREATER, GREATER_EQUAL (i32 -> bool; i8 and i16 are a qcodegen extension, used to lower CAST to bool) and
SELECT (bool condition; bool/i8/i16/i32 values)."""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import Ranges, register
from .pointwise import INT_TYPES, Pointwise


class _Logical(Pointwise):
    in_types = ("bool",)


@register
class LogicalAnd(_Logical):
    name = "LOGICAL_AND"
    operator = "&&"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a != 0) & (b != 0)


@register
class LogicalOr(_Logical):
    name = "LOGICAL_OR"
    operator = "||"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a != 0) | (b != 0)


@register
class LogicalXor(_Logical):
    name = "LOGICAL_XOR"
    operator = "!="

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a != 0) != (b != 0)


@register
class LogicalNot(_Logical):
    name = "LOGICAL_NOT"
    arity = 1

    def compute(self, io: StepIO, a: np.ndarray) -> np.ndarray:
        return a == 0

    def c_expr(self, io: StepIO) -> str:
        return "!a"


class _Compare(Pointwise):
    in_types = INT_TYPES
    out_type = "bool"


@register
class Equal(_Compare):
    name = "EQUAL"
    operator = "=="

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a == b


@register
class Greater(_Compare):
    name = "GREATER"
    operator = ">"

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a > b


@register
class GreaterEqual(_Compare):
    name = "GREATER_EQUAL"
    operator = ">="

    def compute(self, io: StepIO, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a >= b


@register
class Select(Pointwise):
    """out = condition ? on_true : on_false (inputs: condition (bool), on_true, on_false)."""

    name = "SELECT"
    arity = 3
    in_types = ("bool", *INT_TYPES)
    condition_type = "bool"

    def compute(self, io: StepIO, cond: np.ndarray, on_true: np.ndarray, on_false: np.ndarray) -> np.ndarray:
        return np.where(cond != 0, on_true, on_false)

    def c_expr(self, io: StepIO) -> str:
        return "a ? b : c"

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        (_, _), (tlo, thi), (flo, fhi) = in_ranges
        return Ranges([(min(tlo, flo), max(thi, fhi))])
