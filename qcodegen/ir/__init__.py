"""Graph IR: dtypes, quantized types, tensors, ops and graphs."""

from .dtypes import DType, dtype
from .graph import Graph, Op, Tensor
from .quant import QuantType

__all__ = ["DType", "dtype", "Graph", "Op", "Tensor", "QuantType"]
