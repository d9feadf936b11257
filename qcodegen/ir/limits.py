"""Resource limits: the most data a model may declare, checked from the declared shapes before any array is made.

Every front end counts each tensor it declares (constant or not) against two limits, so a hostile or damaged file
cannot make qcodegen allocate more than it declares legitimately: a shape of [2147483647] with random data, a
splat `dense<0>` of a huge tensor type, a flatbuffer buffer claiming gigabytes. The defaults are far above what a
model for a microcontroller or DSP needs (a 4096 x 4096 weight matrix is 2^24 elements); both can be raised:

- `QC_MAX_TENSOR_ELEMENTS` (default 2^24 = 16,777,216): elements of any one tensor;
- `QC_MAX_MODEL_BYTES` (default 2^30 = 1 GiB): bytes of all tensors of a model together (one element of each
  tensor counted at its unpacked size: 1 byte for i4/i8/bool, 4 for i32/f32, 8 for i48/i64).

A tensor also has at most MAX_RANK dimensions (models use up to 6; numpy's own limit is 64).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import GraphError, LimitError

TENSOR_ELEMENTS_ENV = "QC_MAX_TENSOR_ELEMENTS"
MODEL_BYTES_ENV = "QC_MAX_MODEL_BYTES"
DEFAULT_TENSOR_ELEMENTS = 1 << 24
DEFAULT_MODEL_BYTES = 1 << 30
MAX_RANK = 16


def _from_environment(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text, 0)
    except ValueError:
        value = 0
    if value <= 0:
        raise LimitError(f"environment variable {name}={text[:40]!r}: expected a positive integer")
    return value


@dataclass(frozen=True)
class Limits:
    tensor_elements: int
    model_bytes: int

    @classmethod
    def current(cls) -> Limits:
        """The limits in force: the defaults, or the environment variables' values."""
        return cls(_from_environment(TENSOR_ELEMENTS_ENV, DEFAULT_TENSOR_ELEMENTS),
                   _from_environment(MODEL_BYTES_ENV, DEFAULT_MODEL_BYTES))


def element_count(shape: Iterable[int], where: str, limits: Limits | None = None) -> int:
    """Elements of a declared shape (exact integer arithmetic); GraphError for a negative dimension, LimitError
    above the per-tensor limit or MAX_RANK."""
    limits = limits or Limits.current()
    dims = list(shape)
    if len(dims) > MAX_RANK:
        raise LimitError(f"{where}: rank {len(dims)} is above the limit of {MAX_RANK} dimensions")
    count = 1
    for d in dims:
        if d < 0:
            raise GraphError(f"{where}: negative dimension in shape {_short(dims)}")
        count *= d
        # each dimension on its own too: a zero among them does not make huge extents usable
        if count > limits.tensor_elements or d > limits.tensor_elements:
            raise LimitError(f"{where}: shape {_short(dims)} is beyond the limit of {limits.tensor_elements} "
                             f"elements per tensor ({TENSOR_ELEMENTS_ENV})")
    return count


def _short(dims: list[int]) -> str:
    text = str(dims)
    return text if len(text) <= 80 else text[:79] + "…]"


class ModelBudget:
    """The running total of the bytes the tensors of one model declare."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits.current()
        self.total = 0

    def declare(self, shape: Iterable[int], element_bytes: int, where: str) -> int:
        """Count one tensor (shape, unpacked bytes per element); its element count, or LimitError."""
        count = element_count(shape, where, self.limits)
        self.total += count * element_bytes
        if self.total > self.limits.model_bytes:
            raise LimitError(f"{where}: the model's tensors take more than {self.limits.model_bytes} bytes (limit "
                             f"{MODEL_BYTES_ENV})")
        return count
