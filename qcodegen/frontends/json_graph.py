"""The qcodegen JSON graph format (docs/json-format.md): tensors with quantized types and constant data,
source-level ops, inputs and outputs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError
from ..ir.dtypes import dtype
from ..ir.graph import Graph, Op, Tensor
from ..ir.quant import QuantType


def _quant(spec: dict[str, Any], where: str, storage: str) -> QuantType:
    if not isinstance(spec, dict):
        raise GraphError(f"{where}: 'quant' must be an object")
    kw: dict[str, Any] = {}
    for key in ("storage_min", "storage_max"):
        if key in spec:
            kw[key] = int(spec[key])
    try:
        if "block_sizes" in spec:
            return QuantType(dtype(storage), np.asarray(spec["scales"], np.float64),
                             np.asarray(spec.get("zero_points", np.zeros_like(spec["scales"])), np.int64),
                             block_sizes=tuple(int(b) for b in spec["block_sizes"]), **kw)
        if "axis" in spec:
            return QuantType.per_axis(storage, spec["scales"], spec.get("zero_points", 0), int(spec["axis"]),
                                      **kw)
        return QuantType.per_tensor(storage, float(spec["scale"]), int(spec.get("zero_point", 0)), **kw)
    except KeyError as exc:
        raise GraphError(f"{where}: quant needs {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise GraphError(f"{where}: malformed quant: {exc}") from None


def _data(spec: Any, t: Tensor, where: str) -> np.ndarray:
    if isinstance(spec, list):
        try:
            return np.asarray(spec, np.float64 if t.dtype.is_float else np.int64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise GraphError(f"{where}: malformed data: {exc}") from None
    if isinstance(spec, dict) and "base64" in spec:
        try:
            raw = base64.b64decode(spec["base64"], validate=True)
        except ValueError as exc:
            raise GraphError(f"{where}: bad base64 data: {exc}") from None
        np_type = t.dtype.numpy.newbyteorder("<")
        if t.dtype.is_packed:
            nib = np.frombuffer(raw, np.uint8)
            vals = np.stack([nib & 0xF, nib >> 4], axis=1).reshape(-1)[: t.size].astype(np.int64)
            return np.where(vals >= 8, vals - 16, vals) if t.dtype.signed else vals
        if len(raw) != t.size * np_type.itemsize:
            raise GraphError(f"{where}: base64 data has {len(raw)} bytes, expected {t.size * np_type.itemsize}")
        return np.frombuffer(raw, np_type).astype(t.dtype.numpy)
    if isinstance(spec, dict) and "random" in spec:
        r = spec["random"]
        rng = np.random.default_rng(int(r.get("seed", 0)))
        if t.dtype.is_float:
            return rng.uniform(float(r.get("min", -1)), float(r.get("max", 1)), t.shape).astype(np.float32)
        lo, hi = t.value_range
        return rng.integers(int(r.get("min", lo)), int(r.get("max", hi)), t.shape, endpoint=True)
    raise GraphError(f"{where}: 'data' must be a list, {{'base64': ...}} or {{'random': {{...}}}}")


def graph_from_dict(doc: Any) -> Graph:
    if not isinstance(doc, dict):
        raise GraphError("the JSON document must be an object")
    if doc.get("format", "qcodegen-graph") != "qcodegen-graph":
        raise GraphError(f"unknown format {doc.get('format')!r}, expected 'qcodegen-graph'")
    graph = Graph(str(doc.get("name", "model")), options=dict(doc.get("options", {})))
    tensors = doc.get("tensors")
    if not isinstance(tensors, list):
        raise GraphError("'tensors' must be a list")
    for i, spec in enumerate(tensors):
        if not isinstance(spec, dict) or "name" not in spec:
            raise GraphError(f"tensors[{i}] must be an object with a 'name'")
        name = str(spec["name"])
        where = f"tensor {name!r}"
        if name in graph.tensors:
            raise GraphError(f"{where} is defined twice")
        try:
            shape = tuple(int(d) for d in spec.get("shape", ()))
            storage = str(spec["dtype"])
        except KeyError as exc:
            raise GraphError(f"{where}: missing {exc.args[0]!r}") from None
        except (TypeError, ValueError):
            raise GraphError(f"{where}: shape must be a list of integers") from None
        quant = _quant(spec["quant"], where, storage) if spec.get("quant") is not None else None
        t = Tensor(name, shape, dtype(storage), quant)
        if "data" in spec:
            t.data = _data(spec["data"], t, where)
        graph.tensors[name] = t
    ops = doc.get("ops")
    if not isinstance(ops, list):
        raise GraphError("'ops' must be a list")
    for i, spec in enumerate(ops):
        if not isinstance(spec, dict) or "op" not in spec:
            raise GraphError(f"ops[{i}] must be an object with an 'op'")
        inputs, outputs = spec.get("inputs", []), spec.get("outputs", [])
        if not (isinstance(inputs, list) and isinstance(outputs, list)):
            raise GraphError(f"ops[{i}]: 'inputs' and 'outputs' must be lists of tensor names")
        attrs = spec.get("attrs", {})
        if not isinstance(attrs, dict):
            raise GraphError(f"ops[{i}]: 'attrs' must be an object")
        graph.ops.append(Op(str(spec["op"]), [str(n) for n in inputs], [str(n) for n in outputs], attrs,
                            str(spec.get("name", ""))))
    graph.inputs = [str(n) for n in doc.get("inputs", [])]
    graph.outputs = [str(n) for n in doc.get("outputs", [])]
    return graph


def load_json(path: Path) -> Graph:
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise GraphError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError:
        raise GraphError(f"{path}: not a UTF-8 text file") from None
    return graph_from_dict(doc)
