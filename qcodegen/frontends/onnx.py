""".onnx models -> Graph (docs/onnx.md).

1. onnx_model: the protobuf, validated at the boundary (clean GraphError / UnsupportedError on any defect);
2. onnx_import + onnx_ops_*: nodes -> Graph ops on quantized tensors, in ONNX's NCHW layout, constants folded;
   QDQ models' float ops folded by the shared QDQ folding into the operator-format ops (onnx_qdq);
3. onnx_layout: channels-last layout for the convolutions and pools, transposes only where needed;
4. onnx_unsigned: uint8 data stored as int8 (zero points - 128), uint8 graph inputs/outputs converted once.
The graph option `rescale_rounding` is TOSA's single rounding (the few integer RESCALEs the ONNX lowering emits are
exact, or half to even where it says so); requantizations that reproduce onnxruntime use RESCALE_F32.
"""

from __future__ import annotations

from pathlib import Path

from ..ir.graph import Graph
from . import onnx_ops_float, onnx_ops_gather, onnx_ops_nn, onnx_ops_quant, onnx_ops_shape  # noqa: F401  (importers)
from .onnx_import import Importer
from .onnx_layout import to_channels_last
from .onnx_model import parse
from .onnx_qdq import fold_onnx_qdq
from .onnx_unsigned import rebase_unsigned


def import_onnx_bytes(raw: bytes, where: str, name: str) -> Graph:
    """The Graph of an ONNX model given as bytes (`where` names it in error messages)."""
    graph = fold_onnx_qdq(Importer(parse(raw, where, name), where).run(), where)
    to_channels_last(graph)
    rebase_unsigned(graph)
    return graph


def load_onnx(path: str | Path) -> Graph:
    path = Path(path)
    return import_onnx_bytes(path.read_bytes(), str(path), path.stem)
