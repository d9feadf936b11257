"""Tensors, source-level ops and graphs, with structural validation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GraphError, shorten
from .dtypes import DType, dtype
from .limits import ModelBudget
from .quant import QuantType
from .state import StateVar, same_quant


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: DType
    quant: QuantType | None = None
    data: np.ndarray | None = None  # constant value (unpacked storage integers, or float32)

    def __post_init__(self) -> None:
        self.shape = tuple(int(d) for d in self.shape)
        self.dtype = dtype(self.dtype)

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def value_range(self) -> tuple[int, int]:
        """Storage range of the values this tensor can hold (quant storage range if quantized)."""
        if self.quant is not None:
            return self.quant.storage_min, self.quant.storage_max
        return self.dtype.min, self.dtype.max


@dataclass
class Op:
    kind: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""


@dataclass
class Graph:
    name: str
    tensors: dict[str, Tensor] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    state: list[StateVar] = field(default_factory=list)  # values kept across invocations (qcodegen/ir/state.py)

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise GraphError(f"unknown tensor {shorten(name)}") from None

    def op_label(self, op: Op) -> str:
        return f"op {op.kind} {shorten(op.name)}" if op.name else f"op {op.kind} #{self.ops.index(op)}"

    def validate(self) -> None:
        """Structural checks; the lowering rules check each op's own attributes, shapes and types."""
        if not self.outputs:
            raise GraphError(f"graph {shorten(self.name)} has no outputs")
        for what, names in (("input", self.inputs), ("output", self.outputs)):
            seen: set[str] = set()
            for n in names:
                if n in seen:
                    raise GraphError(f"graph {what} {shorten(n)} is listed twice")
                seen.add(n)
        budget = ModelBudget()
        for name, t in self.tensors.items():
            if name != t.name:
                raise GraphError(f"tensor registered as {shorten(name)} is named {shorten(t.name)}")
            empty_shape_value = t.shape == (0,) and t.dtype.name == "i64"  # a TOSA shape value of rank 0
            if any(d <= 0 for d in t.shape) and not empty_shape_value:
                raise GraphError(f"tensor {shorten(name)}: every dimension must be positive, got {list(t.shape)}")
            budget.declare(t.shape, t.dtype.container_bytes, f"tensor {shorten(name)}")
            if t.quant is not None:
                if t.dtype != t.quant.storage:
                    raise GraphError(f"tensor {shorten(name)}: dtype {t.dtype} differs from its quantized "
                                     f"storage type {t.quant.storage}")
                t.quant.validate(t.shape, f"tensor {shorten(name)}")
            if t.data is not None:
                self._validate_const(t)
        producers: dict[str, Op] = {}
        graph_inputs = set(self.inputs)
        for op in self.ops:
            label = self.op_label(op)
            for n in op.inputs:
                if n not in self.tensors:
                    raise GraphError(f"{label}: input {shorten(n)} is not a tensor of the graph")
            for n in op.outputs:
                if n not in self.tensors:
                    raise GraphError(f"{label}: output {shorten(n)} is not a tensor of the graph")
                if n in producers:
                    raise GraphError(f"tensor {shorten(n)} is produced twice ({self.op_label(producers[n])} "
                                     f"and {label})")
                if self.tensors[n].is_const or n in graph_inputs:
                    raise GraphError(f"{label}: output {shorten(n)} is a constant or a graph input")
                producers[n] = op
        for n in self.inputs:
            t = self.tensor(n)
            if t.is_const:
                raise GraphError(f"graph input {shorten(n)} is a constant")
        states = self._validate_state(producers)
        for n in self.outputs:
            t = self.tensor(n)
            if n not in producers and n not in graph_inputs and not t.is_const:
                raise GraphError(f"graph output {shorten(n)} is never produced")
        consumed = {n for op in self.ops for n in op.inputs} | set(self.outputs)
        for op in self.ops:
            for n in op.inputs:
                t = self.tensors[n]
                if n not in producers and n not in graph_inputs and n not in states and not t.is_const:
                    raise GraphError(f"{self.op_label(op)}: input {shorten(n)} is dangling (no producer, "
                                     f"not a graph input, not a constant)")
        for n in self.inputs:
            if n not in consumed:
                raise GraphError(f"graph input {shorten(n)} is never used")
        self.ops = self._topological_order(producers)

    def _validate_state(self, producers: dict[str, Op]) -> set[str]:
        """State tensors are read like inputs and never produced; each next value is a tensor of the graph with
        the state's shape and type. Returns the state tensor names."""
        names = {v.name for v in self.state}
        if len(names) != len(self.state):
            raise GraphError("a tensor is declared as state twice")
        for v in self.state:
            t = self.tensor(v.name)
            if t.is_const or v.name in self.inputs or v.name in producers:
                raise GraphError(f"state {shorten(v.name)} is a constant, a graph input or produced by an op")
            nxt = self.tensor(v.next)
            if (nxt.shape, nxt.dtype) != (t.shape, t.dtype) or not same_quant(nxt.quant, t.quant):
                raise GraphError(f"state {shorten(v.name)}: next value {shorten(v.next)} has shape {list(nxt.shape)}, "
                                 f"{nxt.dtype}, "
                                 f"expected {list(t.shape)}, {t.dtype} with the same quantization")
            if v.next != v.name and v.next in names:
                raise GraphError(f"state {shorten(v.name)}: next value is another state's value ({shorten(v.next)})")
            if np.shape(v.initial) != t.shape or np.asarray(v.initial).dtype != t.dtype.numpy:
                raise GraphError(f"state {shorten(v.name)}: initial value must be {t.dtype.numpy} of shape "
                                 f"{list(t.shape)}")
        return names

    def _validate_const(self, t: Tensor) -> None:
        data = np.asarray(t.data)
        if data.shape != t.shape:
            if data.size != t.size:
                raise GraphError(f"constant {shorten(t.name)}: {data.size} values for shape {list(t.shape)}")
            data = data.reshape(t.shape)
        if t.dtype.is_float:
            t.data = data.astype(np.float32)
            return
        if not np.issubdtype(data.dtype, np.integer):
            if not np.all(np.isfinite(data)) or np.any(data != np.round(data)):
                raise GraphError(f"constant {shorten(t.name)}: {t.dtype} data must be integers")
        ints = data.astype(np.int64)
        lo, hi = t.value_range
        if ints.size and (ints.min() < lo or ints.max() > hi):
            raise GraphError(f"constant {shorten(t.name)}: values [{ints.min()}, {ints.max()}] exceed the "
                             f"storage range [{lo}, {hi}]")
        t.data = ints.astype(t.dtype.numpy)

    def _topological_order(self, producers: dict[str, Op]) -> list[Op]:
        state: dict[int, int] = {}  # 1 = visiting, 2 = done
        order: list[Op] = []
        for root in self.ops:
            stack: list[tuple[Op, int]] = [(root, 0)]
            while stack:
                op, i = stack.pop()
                key = id(op)
                if i == 0:
                    if state.get(key) == 2:
                        continue
                    if state.get(key) == 1:
                        raise GraphError(f"cycle in the graph through {self.op_label(op)}")
                    state[key] = 1
                if i < len(op.inputs):
                    stack.append((op, i + 1))
                    dep = producers.get(op.inputs[i])
                    if dep is not None:
                        if state.get(id(dep)) == 1:
                            raise GraphError(f"cycle in the graph through {self.op_label(dep)}")
                        if state.get(id(dep)) != 2:
                            stack.append((dep, 0))
                else:
                    state[key] = 2
                    order.append(op)
        return order
