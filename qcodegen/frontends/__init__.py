"""Front ends: one module per input format; each produces a Graph and nothing else."""

from __future__ import annotations

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
    raise QcError(f"{path}: unknown model format {suffix or '(no extension)'!r} (supported: .json, .tflite)")
