"""The shared base of the element-wise integer and boolean primitives (bitwise.py, logical.py, arithmetic.py):
operands with TOSA broadcasting (equal ranks, each dimension equal or 1), one output, one numpy reference and
one C expression per primitive, rendered by templates/generic/pointwise.c.j2.

The C reads every operand as an int64_t (`a`, `b`, `c`) and stores `(out type)(expr)`: each expression yields a
value of the output type for every input (operations that could leave it, such as ABS of INT32_MIN, wrap it
explicitly), and never shifts by a negative amount or by 32 or more, whatever the data. TOSA REQUIRE violations
(a shift amount out of range, a division by zero) are detected by the numpy reference, which raises Unpredictable.
"""

from __future__ import annotations

from functools import reduce
from typing import ClassVar

import numpy as np

from ..fixedpoint import Unpredictable
from ..ir.schedule import StepIO
from .base import Primitive, broadcast_shape, full_shape_inputs, require
from .elementwise import broadcast_nest

NAMES = ("a", "b", "c")
INT_TYPES = ("i8", "i16", "i32")


def unpredictable_unless(ok: np.ndarray | bool, op: str, what: str) -> None:
    """A data-dependent TOSA REQUIRE."""
    if not np.all(ok):
        raise Unpredictable(f"{op}: {what} (TOSA REQUIRE)")


class Pointwise(Primitive):
    """`arity` operands of one type from `in_types` (the first may be `condition_type`, for SELECT), output type
    `out_type` (None: the operands' type)."""

    arity: ClassVar[int] = 2
    in_types: ClassVar[tuple[str, ...]] = INT_TYPES
    out_type: ClassVar[str | None] = None
    condition_type: ClassVar[str | None] = None

    @property
    def template(self) -> str:
        return "pointwise.c.j2"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [reduce(lambda a, b: broadcast_shape(a, b, self.name), (b.shape for b in io.ins))]

    def data_operands(self, io: StepIO) -> list:
        return io.ins[1:] if self.condition_type else io.ins

    def check(self, io: StepIO) -> None:
        require(len(io.ins) == self.arity and len(io.outs) == 1,
                f"{self.name}: needs {self.arity} input(s) and 1 output, got {len(io.ins)} and {len(io.outs)}")
        super().check(io)
        if self.condition_type:
            cond = io.ins[0].dtype
            require(cond.name == self.condition_type, f"{self.name}: condition type must be "
                                                      f"{self.condition_type}, got {cond}")
        data = self.data_operands(io)
        dt = data[0].dtype
        require(all(b.dtype == dt for b in data), f"{self.name}: operand types differ "
                                                  f"({', '.join(str(b.dtype) for b in data)})")
        require(dt.name in self.in_types, f"{self.name}: type {dt} is not one of {list(self.in_types)}")
        want = self.out_type or dt.name
        require(io.outs[0].dtype.name == want, f"{self.name}: output type must be {want}, got {io.outs[0].dtype}")

    def compute(self, io: StepIO, *args: np.ndarray) -> np.ndarray:
        """The exact TOSA result (int64), raising Unpredictable where a REQUIRE fails."""
        raise NotImplementedError

    operator: str  # binary ops written as the C infix expression `a <operator> b`

    def c_expr(self, io: StepIO) -> str:
        """C expression of the int64_t operands a, b, c giving a value of the output type (default: the
        infix `operator`, for binary ops that set one)."""
        return f"a {self.operator} b"

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        shape = io.outs[0].shape
        values = [np.broadcast_to(x.astype(np.int64), shape) for x in args]
        return [np.asarray(self.compute(io, *values), np.int64).reshape(shape)]

    def inplace_inputs(self, io: StepIO) -> tuple[int, ...]:
        return full_shape_inputs(io)  # pointwise.c.j2 reads every operand before it stores the element

    def bits(self, io: StepIO) -> int:
        """Width of the operands (the data operands for SELECT)."""
        return self.data_operands(io)[0].dtype.bits

    def template_context(self, io: StepIO) -> dict:
        return dict(nest=broadcast_nest(io), names=NAMES[:len(io.ins)], expr=self.c_expr(io))
