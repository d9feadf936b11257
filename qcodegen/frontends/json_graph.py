"""The qcodegen JSON graph format (docs/json-format.md): tensors with quantized types and constant data,
source-level ops, inputs and outputs.

Every value of the document is checked for its JSON type before use, and every tensor is counted against the
resource limits (qcodegen/ir/limits.py) before its data is decoded or generated.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError, shorten
from ..ir.dtypes import dtype
from ..ir.graph import Graph, Op, Tensor
from ..ir.limits import ModelBudget
from ..ir.quant import QuantType


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(value: Any, where: str, what: str) -> int:
    if not _is_int(value):
        raise GraphError(f"{where}: {what} must be an integer, got {shorten(value)}")
    return value


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise GraphError(f"{where} must be a list of tensor names")
    return list(value)


def _quant(spec: dict[str, Any], where: str, storage: str) -> QuantType:
    if not isinstance(spec, dict):
        raise GraphError(f"{where}: 'quant' must be an object")
    kw = {key: _int(spec[key], where, key) for key in ("storage_min", "storage_max") if key in spec}
    try:
        if "block_sizes" in spec:
            sizes = spec["block_sizes"]
            if not isinstance(sizes, list) or not all(_is_int(b) for b in sizes):
                raise GraphError(f"{where}: 'block_sizes' must be a list of integers")
            return QuantType(dtype(storage), spec["scales"], spec.get("zero_points", np.zeros_like(spec["scales"])),
                             block_sizes=tuple(sizes), **kw)
        if "axis" in spec:
            return QuantType.per_axis(storage, spec["scales"], spec.get("zero_points", 0),
                                      _int(spec["axis"], where, "axis"), **kw)
        scale, zero_point = spec["scale"], spec.get("zero_point", 0)
        if not _is_number(scale) or not _is_int(zero_point):
            raise GraphError(f"{where}: 'scale' must be a number and 'zero_point' an integer")
        return QuantType.per_tensor(storage, scale, zero_point, **kw)
    except KeyError as exc:
        raise GraphError(f"{where}: quant needs {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise GraphError(f"{where}: malformed quant: {exc}") from None


def _data(spec: Any, t: Tensor, where: str) -> np.ndarray:
    if isinstance(spec, list):
        try:
            values = np.asarray(spec)
            if values.dtype.kind not in "biuf":
                raise GraphError(f"{where}: data must be a (nested) list of numbers")
            if t.dtype.is_float:
                return values.astype(np.float64)
            if values.dtype.kind == "f" and not np.all(np.isfinite(values) & (values == np.round(values))):
                raise GraphError(f"{where}: {t.dtype} data must be integers")
            if values.dtype.kind == "u" and values.size and values.max() >= 1 << 63:  # (numpy made it uint64)
                raise GraphError(f"{where}: data beyond the int64 range")
            return values.astype(np.int64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise GraphError(f"{where}: malformed data: {exc}") from None
    if isinstance(spec, dict) and "base64" in spec:
        return _base64(spec["base64"], t, where)
    if isinstance(spec, dict) and "random" in spec:
        return _random(spec["random"], t, where)
    raise GraphError(f"{where}: 'data' must be a list, {{'base64': ...}} or {{'random': {{...}}}}")


def _base64(text: Any, t: Tensor, where: str) -> np.ndarray:
    if not isinstance(text, str):
        raise GraphError(f"{where}: base64 data must be a string")
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise GraphError(f"{where}: bad base64 data: {exc}") from None
    if t.dtype.is_packed:
        if len(raw) != (t.size + 1) // 2:
            raise GraphError(f"{where}: base64 data has {len(raw)} bytes, expected {(t.size + 1) // 2}")
        nib = np.frombuffer(raw, np.uint8)
        vals = np.stack([nib & 0xF, nib >> 4], axis=1).reshape(-1)[: t.size].astype(np.int64)
        return np.where(vals >= 8, vals - 16, vals) if t.dtype.signed else vals
    np_type = t.dtype.numpy.newbyteorder("<")
    if len(raw) != t.size * np_type.itemsize:
        raise GraphError(f"{where}: base64 data has {len(raw)} bytes, expected {t.size * np_type.itemsize}")
    return np.frombuffer(raw, np_type).astype(t.dtype.numpy)


def _random(r: Any, t: Tensor, where: str) -> np.ndarray:
    """Seeded uniform data over [min, max] (default: the storage range; floats [-1, 1])."""
    if not isinstance(r, dict):
        raise GraphError(f"{where}: 'random' must be an object")
    seed = r.get("seed", 0)
    if not _is_int(seed) or seed < 0:
        raise GraphError(f"{where}: random 'seed' must be a non-negative integer")
    rng = np.random.default_rng(seed)
    if t.dtype.is_float:
        lo, hi = r.get("min", -1.0), r.get("max", 1.0)
        if not (_is_number(lo) and _is_number(hi) and np.isfinite([lo, hi]).all() and lo <= hi):
            raise GraphError(f"{where}: random 'min' and 'max' must be finite numbers with min <= max")
        return rng.uniform(lo, hi, t.shape).astype(np.float32)
    low, high = t.value_range
    lo, hi = r.get("min", low), r.get("max", high)
    if not (_is_int(lo) and _is_int(hi) and low <= lo <= hi <= high):
        raise GraphError(f"{where}: random 'min' and 'max' must be integers with {low} <= min <= max <= {high}")
    return rng.integers(lo, hi, t.shape, endpoint=True)


def _tensor(spec: Any, i: int, budget: ModelBudget) -> Tensor:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise GraphError(f"tensors[{i}] must be an object with a string 'name'")
    where = f"tensor {shorten(spec['name'])}"
    shape, storage = spec.get("shape", []), spec.get("dtype")
    if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
        raise GraphError(f"{where}: shape must be a list of integers")
    if not isinstance(storage, str):
        raise GraphError(f"{where}: missing 'dtype' (a string)")
    dt = dtype(storage)
    budget.declare(shape, dt.container_bytes, where)
    if any(d <= 0 for d in shape):
        raise GraphError(f"{where}: every dimension must be positive, got {shape}")
    quant = _quant(spec["quant"], where, storage) if spec.get("quant") is not None else None
    t = Tensor(spec["name"], tuple(shape), dt, quant)
    if "data" in spec:
        t.data = _data(spec["data"], t, where)
    return t


def _op(spec: Any, i: int) -> Op:
    if not isinstance(spec, dict) or not isinstance(spec.get("op"), str):
        raise GraphError(f"ops[{i}] must be an object with a string 'op'")
    attrs, name = spec.get("attrs", {}), spec.get("name", "")
    if not isinstance(attrs, dict):
        raise GraphError(f"ops[{i}]: 'attrs' must be an object")
    if not isinstance(name, str):
        raise GraphError(f"ops[{i}]: 'name' must be a string")
    return Op(spec["op"], _names(spec.get("inputs", []), f"ops[{i}]: 'inputs'"),
              _names(spec.get("outputs", []), f"ops[{i}]: 'outputs'"), attrs, name)


def graph_from_dict(doc: Any) -> Graph:
    if not isinstance(doc, dict):
        raise GraphError("the JSON document must be an object")
    if doc.get("format", "qcodegen-graph") != "qcodegen-graph":
        raise GraphError(f"unknown format {shorten(doc.get('format'))}, expected 'qcodegen-graph'")
    name, options = doc.get("name", "model"), doc.get("options", {})
    if not isinstance(name, str) or not isinstance(options, dict) or not all(
            isinstance(v, str) for v in options.values()):
        raise GraphError("'name' must be a string and 'options' an object of strings")
    graph = Graph(name, options=dict(options))
    tensors, ops = doc.get("tensors"), doc.get("ops")
    if not isinstance(tensors, list) or not isinstance(ops, list):
        raise GraphError("'tensors' and 'ops' must be lists")
    budget = ModelBudget()
    for i, spec in enumerate(tensors):
        t = _tensor(spec, i, budget)
        if t.name in graph.tensors:
            raise GraphError(f"tensor {shorten(t.name)} is defined twice")
        graph.tensors[t.name] = t
    graph.ops = [_op(spec, i) for i, spec in enumerate(ops)]
    graph.inputs = _names(doc.get("inputs", []), "'inputs'")
    graph.outputs = _names(doc.get("outputs", []), "'outputs'")
    return graph


def load_json(path: Path) -> Graph:
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise GraphError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError:
        raise GraphError(f"{path}: not a UTF-8 text file") from None
    except RecursionError:
        raise GraphError(f"{path}: JSON nested too deeply") from None
    except OSError as exc:
        raise GraphError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return graph_from_dict(doc)
