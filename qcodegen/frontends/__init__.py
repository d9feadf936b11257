"""Front ends: one module per input format; each produces a Graph and nothing else."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import QcError
from ..ir.graph import Graph


def load_model(path: str | Path) -> Graph:
    path = Path(path)
    if not path.exists():
        raise QcError(f"{path}: no such file")
    if path.is_dir():
        raise QcError(f"{path}: is a directory, expected a model file")
    suffix = path.suffix.lower()
    if suffix == ".json":
        from .json_graph import load_json
        return load_json(path)
    if suffix == ".tflite":
        from .tflite import load_tflite
        return load_tflite(path)
    if suffix == ".onnx":
        from .onnx import load_onnx
        return load_onnx(path)
    if suffix == ".tosa":
        from .tosa import load_tosa
        return load_tosa(path)
    if suffix == ".mlir":
        return _load_mlir(path)
    raise QcError(f"{path}: unknown model format {suffix or '(no extension)'!r} (supported: .json, .tflite, .tosa, "
                  ".mlir, .onnx)")


def _load_mlir(path: Path) -> Graph:
    """StableHLO or TOSA by the dialect of the ops (a mix is an error)."""
    from .stablehlo import dialect_of, functions, load_stablehlo
    if dialect_of(functions(path), path) == "stablehlo":
        return load_stablehlo(path)
    if importlib.util.find_spec(f"{__name__}.tosa_mlir") is None:
        raise QcError(f"{path}: TOSA MLIR is not supported yet")
    from .tosa_mlir import load_tosa_mlir
    return load_tosa_mlir(path)
