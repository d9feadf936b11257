"""State of streaming TFLite models, as TFLite Micro keeps it, turned into the Graph's state variables
(qcodegen/ir/state.py): the graph stays a function of (inputs, state) -> (outputs, next state).

- Variable tensors (`is_variable`): SVDF's activation state (input 4), which the op updates in place. The SVDF op
  gets the next value as a second output. TFLM's reset fills a variable tensor with its zero point (int8) or 0
  (ResetTensorData; its buffer data, if any, is ignored).
- Resource variables: VAR_HANDLE names a variable (by shared_name); READ_VARIABLE yields its value at that point,
  ASSIGN_VARIABLE replaces it. A variable starts as the byte (int8) of its zero point repeated
  (MicroResourceVariables::Allocate), then CALL_ONCE's init subgraph assigns its initial values on the first
  invocation; here that subgraph is evaluated at import (it may hold VAR_HANDLE and ASSIGN_VARIABLE of constants).
  READ_VARIABLE outputs alias the current value (a copy only for a model output); every read and assignment of
  a variable must have one shape, type and quantization (TFLM copies raw bytes between them).

TFLM's interpreter.reset() restores the zero-point fill but does not run CALL_ONCE again; the generated
`<name>_init` restores the model's initial state, init subgraph included (docs/semantics.md §12.11).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UnsupportedError, shorten
from ..ir.graph import Tensor
from ..ir.state import StateVar, same_quant

if TYPE_CHECKING:
    from .tflite import _Importer

RESOURCE_OPS = ("tfl.var_handle", "tfl.read_variable", "tfl.assign_variable", "tfl.call_once")
SVDF_STATE_INPUT = 4


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


def _same_spec(a: Tensor, b: Tensor) -> bool:
    return (a.shape, a.dtype) == (b.shape, b.dtype) and same_quant(a.quant, b.quant)


def default_fill(t: Tensor, resource: bool) -> np.ndarray:
    """TFLM's reset value: the zero point of an int8 variable tensor (0 otherwise); a resource variable is
    memset with the low byte of its zero point whatever its type."""
    zp = t.quant.zero_point if t.quant is not None and t.quant.kind == "per_tensor" else 0
    if resource:
        byte = np.uint8(zp & 0xFF)
        return np.full(t.size * t.dtype.container_bytes, byte, np.uint8).view(t.dtype.numpy).reshape(t.shape)
    return np.full(t.shape, zp if t.dtype.name == "i8" else 0, t.dtype.numpy)


@dataclass
class _Var:
    """One state variable while subgraph 0 is read."""

    label: str  # base name of its graph tensor
    source: str
    tensor: str | None = None  # the graph tensor of the value at the start of an invocation
    current: str | None = None  # the graph tensor holding its value at this point of subgraph 0
    initial: np.ndarray | None = None
    source_index: int | None = None  # subgraph-0 tensor holding the value after an invocation
    init_value: Tensor | None = None  # assigned by CALL_ONCE's init subgraph


class TfliteState:
    """Subgraph 0's state: what the importer asks while it converts the operators in order."""

    def __init__(self, imp: _Importer) -> None:
        self.imp = imp
        self.handles: dict[int, str] = {}  # resource tensor index -> shared name
        self.resources: dict[str, _Var] = {}
        self.variables: dict[int, _Var] = {}  # variable tensor index -> its state
        self.accessed = False  # a READ/ASSIGN_VARIABLE was seen (CALL_ONCE must come before)

    def error(self, i: int, kind: str, message: str) -> UnsupportedError:
        return UnsupportedError(f"{self.imp.where}: operator #{i} ({kind}): {message}")

    # --- resource variables ------------------------------------------------------------------------
    def absorb(self, i: int, op: Any, kind: str) -> bool:
        """Handle a resource-variable operator (True), which leaves no op in the graph (a READ_VARIABLE of a
        model output leaves a copy)."""
        if kind not in RESOURCE_OPS:
            return False
        ins = [j for j in (op.inputs if op.inputs is not None else []) if j >= 0]
        outs = list(op.outputs if op.outputs is not None else [])
        if kind == "tfl.var_handle":
            name = _text(getattr(op.builtinOptions, "sharedName", None))
            if len(outs) != 1 or not name:
                raise self.error(i, kind, "expects one output and a shared_name")
            self.handles[outs[0]] = name
            self.resources.setdefault(name, _Var(name, f"resource variable {shorten(name)}"))
        elif kind == "tfl.call_once":
            if self.accessed:
                raise self.error(i, kind, "CALL_ONCE after a READ_VARIABLE or ASSIGN_VARIABLE is not supported")
            self.run_init_subgraph(int(getattr(op.builtinOptions, "initSubgraphIndex", 0)))
        elif kind == "tfl.read_variable":
            if len(ins) != 1 or len(outs) != 1:
                raise self.error(i, kind, "expects one input and one output")
            self.accessed = True
            self.read(i, kind, self.resource(i, kind, ins[0]), outs[0])
        else:
            if len(ins) != 2 or outs:
                raise self.error(i, kind, "expects two inputs and no output")
            self.accessed = True
            var = self.resource(i, kind, ins[0])
            value = self.imp.tensor(ins[1])
            self.declare(i, kind, var, self.imp.graph.tensors[value])
            var.current, var.source_index = value, ins[1]
        return True

    def resource(self, i: int, kind: str, index: int) -> _Var:
        if index not in self.handles:
            raise self.error(i, kind, f"resource tensor {index} is not the output of a VAR_HANDLE of subgraph 0")
        return self.resources[self.handles[index]]

    def declare(self, i: int, kind: str, var: _Var, like: Tensor) -> None:
        """The variable's tensor, made from the first value read or assigned; later ones must match it."""
        if var.tensor is None:  # named after the variable, unless a tensor of the model has that name
            taken = {_text(t.name) for t in self.imp.tensors}
            name = self.imp.unique_name(var.label if var.label not in taken else f"{var.label}_state")
            graph = self.imp.graph
            graph.tensors[name] = Tensor(name, like.shape, like.dtype, like.quant)
            var.tensor = var.current = name
            var.initial = default_fill(graph.tensors[name], resource=True)
            if var.init_value is not None:
                if not _same_spec(var.init_value, like):
                    raise self.error(i, kind, f"CALL_ONCE assigns {var.source} a value of another shape, type "
                                              f"or quantization than {shorten(like.name)}")
                var.initial = np.asarray(var.init_value.data).astype(like.dtype.numpy).reshape(like.shape)
        elif not _same_spec(self.imp.graph.tensors[var.tensor], like):
            raise self.error(i, kind, f"{shorten(like.name)} reads or assigns {var.source} with another shape, type or "
                                      f"quantization than its first use (raw bytes reinterpreted: not supported)")

    def read(self, i: int, kind: str, var: _Var, out: int) -> None:
        """READ_VARIABLE: its output aliases the current value; a model output gets a copy (tfl.read_variable)."""
        self.declare(i, kind, var, self.imp.probe(out))
        if out in (self.imp.sg.outputs if self.imp.sg.outputs is not None else []):
            self.imp.add_op(kind, [var.current], [self.imp.tensor(out)], i)
        else:
            self.imp.names[out] = var.current

    def run_init_subgraph(self, index: int) -> None:
        """CALL_ONCE's subgraph, at import: the constant each variable is assigned."""
        sub = self.imp.for_subgraph(index)
        handles: dict[int, str] = {}
        for k, op in enumerate(sub.sg.operators or []):
            kind = sub.kind(op)
            ins = [j for j in (op.inputs if op.inputs is not None else []) if j >= 0]
            if kind == "tfl.var_handle" and op.outputs is not None and len(op.outputs) == 1:
                name = _text(getattr(op.builtinOptions, "sharedName", None))
                handles[int(op.outputs[0])] = name
                self.resources.setdefault(name, _Var(name, f"resource variable {shorten(name)}"))
            elif kind == "tfl.assign_variable" and len(ins) == 2 and ins[0] in handles:
                value = sub.graph.tensors[sub.tensor(ins[1])]
                if not value.is_const:
                    raise UnsupportedError(f"{self.imp.where}: CALL_ONCE subgraph {index}, operator #{k}: the "
                                           f"assigned value {shorten(value.name)} is not a constant")
                self.resources[handles[ins[0]]].init_value = value
            else:
                raise UnsupportedError(f"{self.imp.where}: CALL_ONCE subgraph {index}, operator #{k} ({kind}): "
                                       f"only VAR_HANDLE and ASSIGN_VARIABLE of constants are supported")

    # --- variable tensors ----------------------------------------------------------------------------
    def rewrite(self, i: int, kind: str, inputs: list[int], ins: list[str], outs: list[str]
                ) -> tuple[list[str], list[str]]:
        """An operator's input and output names with the state threaded through: SVDF reads the current value
        of its variable tensor and gets its next value as a second output."""
        tensors = self.imp.tensors
        for pos, j in enumerate(inputs):
            if not tensors[j].isVariable:
                continue
            if kind != "tfl.svdf" or pos != len(inputs) - 1:
                raise self.error(i, kind, f"keeps state in variable tensor {shorten(ins[pos])}; variable tensors are "
                                          f"supported as SVDF's activation state only")
            var = self.variables.get(j)
            if var is None:
                t = self.imp.graph.tensors[ins[pos]]
                var = self.variables[j] = _Var(ins[pos], f"variable tensor {shorten(ins[pos])}", ins[pos], ins[pos],
                                               default_fill(t, resource=False), source_index=j)
            t = self.imp.graph.tensors[var.tensor]
            nxt = self.imp.unique_name(f"{var.tensor}_next")
            self.imp.graph.tensors[nxt] = Tensor(nxt, t.shape, t.dtype, t.quant)
            ins = [*ins[:pos], var.current, *ins[pos + 1:]]
            outs = [*outs, nxt]
            var.current = nxt
        return ins, outs

    def state_vars(self) -> list[StateVar]:
        """The graph's state: every variable subgraph 0 reads or assigns, in order of first use."""
        found = [v for v in [*self.variables.values(), *self.resources.values()] if v.tensor is not None]
        return [StateVar(v.tensor, v.current, v.initial, v.source, v.source_index) for v in found]
