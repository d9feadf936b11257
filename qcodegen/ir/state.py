"""State variables: values a model keeps from one invocation to the next (streaming models: SVDF activation
history, TFLite resource variables).

A graph or schedule stays a pure function of (inputs, state) -> (outputs, next state): the state tensor `name`
holds the value at the start of an invocation and is read like an input (no step writes it); `next` names the
tensor that holds the value at the end of the invocation (`name` itself when nothing assigns it). Where `next` is
stored -- in the state's own memory, or in the arena and copied back at the end -- is the memory planner's
decision (qcodegen/plan/memory.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .quant import QuantType


@dataclass
class StateVar:
    name: str
    next: str
    initial: np.ndarray  # the value before the first invocation (and after init), in the tensor's storage type
    source: str = ""  # what the source format calls it, for reports and messages
    source_index: int | None = None  # the source-format tensor holding the value after an invocation (oracles)


def same_quant(a: QuantType | None, b: QuantType | None) -> bool:
    """Two tensors' quantizations are the same (both None, or equal values)."""
    return a is b or (a is not None and a.same_as(b))
