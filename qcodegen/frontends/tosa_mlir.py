"""TOSA MLIR text (the tosa dialect, as `tosa-opt --tosa-deserialize` prints it) -> Graph.

The graph is the same one the .tosa reader builds (TosaGraphBuilder in tosa.py): operators become
"tosa.<name>" with the same attribute names and values (dense arrays as lists, enums by name, acc_type as a dtype
name), `tosa.const` values become constant tensors, `tosa.const_shape` values and the shape operators are
evaluated, and shape operands become attributes. Tensor names are the `tosa.tensor_name` attributes of the function
arguments and results when present (so a graph converted from a .tosa file keeps its names), else the SSA names
without the `%`. The function read is `main`, or the only function of the module.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError, UnsupportedError
from ..ir.dtypes import dtype
from ..ir.graph import Graph, Tensor
from ..ir.limits import ModelBudget
from .mlir import ast, parse_file
from .mlir.types import FloatType, IntegerType, OpaqueType, TensorType, UniformQuantType
from .tosa import TosaGraphBuilder

# attributes the MLIR printer omits when they hold their default, per operator (the flatbuffer always has them)
_DEFAULTS: dict[str, dict[str, Any]] = {
    **{op: {"local_bound": False} for op in ("CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D")},
    **{op: {"nan_mode": "PROPAGATE"} for op in ("ARGMAX", "CLAMP", "MAXIMUM", "MINIMUM", "MAX_POOL2D",
                                                 "MAX_POOL2D_ADAPTIVE", "REDUCE_MAX", "REDUCE_MIN")},
}
_ENUM_NAMES = {"NEAREST_NEIGHBOR": "NEAREST"}  # MLIR spelling -> flatbuffer spelling


def _dtype(element: Any, where: str) -> str:
    if isinstance(element, UniformQuantType):
        element = element.storage
    if isinstance(element, IntegerType):
        if element.width == 1:
            return "bool"
        prefix = "u" if element.unsigned else "i"
        if element.width in (4, 8, 16, 32, 48, 64) and f"{prefix}{element.width}" != "u32":
            return f"{prefix}{element.width}"
    if isinstance(element, FloatType) and element.name == "f32":
        return "f32"
    raise UnsupportedError(f"{where}: element type {element} is not supported")


def _is_shape(t: Any) -> bool:
    return isinstance(t, OpaqueType) and (t.dialect, t.name) == ("tosa", "shape")


def _tensor_shape(t: Any, where: str) -> tuple[int, ...]:
    if not isinstance(t, TensorType):
        raise UnsupportedError(f"{where}: type {t} is not a tensor type")
    if t.is_dynamic:
        raise UnsupportedError(f"{where}: dynamic shape {t} is not supported")
    return tuple(t.shape)


def _attribute(value: Any) -> Any:
    """An MLIR attribute as the plain value the .tosa reader gives for the same field."""
    if isinstance(value, ast.DenseArrayAttr):
        return list(value.values)
    if isinstance(value, ast.DenseElementsAttr):
        return value.flat()
    if isinstance(value, ast.ArrayAttr):
        return [_attribute(e) for e in value.elements]
    if isinstance(value, (ast.IntegerAttr, ast.FloatAttr, ast.BoolAttr, ast.StringAttr)):
        return value.value
    if isinstance(value, ast.EnumAttr):
        return _ENUM_NAMES.get(value.value, value.value)
    if isinstance(value, ast.TypeAttr):
        return _dtype(value.type, "attribute")
    if isinstance(value, ast.UnitAttr):
        return True
    raise UnsupportedError(f"attribute {value!r} is not supported")


def _function(modules: list[ast.Module], where: str) -> ast.Func:
    if len(modules) != 1:
        raise UnsupportedError(f"{where}: {len(modules)} modules ('// -----' chunks); one is supported")
    funcs = [f for f in modules[0].functions if f.body is not None]
    main = [f for f in funcs if f.name == "main"]
    if main or len(funcs) == 1:
        return (main or funcs)[0]
    raise GraphError(f"{where}: no function 'main' and {len(funcs)} functions")


class _MlirReader:
    def __init__(self, func: ast.Func, builder: TosaGraphBuilder):
        self.func = func
        self.builder = builder
        self.names: dict[ast.ValueRef, str] = {}
        self.budget = ModelBudget()

    def name_values(self) -> None:
        """Tensor names: tosa.tensor_name of arguments and results, else the SSA name."""
        for arg in self.func.arguments:
            self.names[arg.value] = self._declared(arg.attributes, arg.name)
        ret = self._return()
        for k, value in enumerate(ret.operands if ret else []):
            attrs = self.func.result_attributes[k] if k < len(self.func.result_attributes) else {}
            if value not in self.names and "tosa.tensor_name" in attrs:
                self.names[value] = self._declared(attrs, str(value))

    @staticmethod
    def _declared(attrs: dict[str, Any], default: str) -> str:
        name = attrs.get("tosa.tensor_name")
        return name.value if isinstance(name, ast.StringAttr) else default.lstrip("%")

    def _return(self) -> ast.Operation | None:
        ops = self.func.operations
        return ops[-1] if ops and ops[-1].name in ("func.return", "return") else None

    def name(self, value: ast.ValueRef) -> str:
        return self.names.setdefault(value, str(value).lstrip("%"))

    def declare(self, name: str, t: Any, where: str, data: np.ndarray | None = None) -> None:
        if _is_shape(t):
            if not t.body.isdigit():
                raise UnsupportedError(f"{where}: shape type {t} is not supported")
            rank = self.budget.declare([int(t.body)], 8, where)
            self.builder.add_shape(name, rank, None if data is None else self._values(data, rank, t, where).tolist())
            return
        shape = _tensor_shape(t, where)
        try:
            dt = _dtype(t.element, where)
        except UnsupportedError as exc:  # an error only if an operator uses the tensor
            self.builder.add_unsupported(name, str(exc))
            return
        count = self.budget.declare(shape, dtype(dt).container_bytes, where)
        if data is not None:
            data = self._values(data, count, t, where).reshape(shape)
        self.builder.add_tensor(Tensor(name, shape, dt, data=data))

    @staticmethod
    def _values(data: np.ndarray, count: int, t: Any, where: str) -> np.ndarray:
        if data.size != count:
            raise GraphError(f"{where}: {data.size} constant values for the result type {t}")
        return data.reshape(-1)

    def arguments(self) -> list[str]:
        names = []
        for arg in self.func.arguments:
            name = self.name(arg.value)
            self.declare(name, arg.type, f"argument {arg.name}")
            names.append(name)
        return names

    def operations(self) -> list[str]:
        for k, op in enumerate(self.func.operations):
            where = f"line {op.line}: {op.name}"
            if op.name in ("func.return", "return"):
                if k != len(self.func.operations) - 1:
                    raise GraphError(f"{where}: return before the end of the function")
                return [self.name(v) for v in op.operands]
            if not op.name.startswith("tosa."):
                raise UnsupportedError(f"{where}: only tosa operations are supported in a TOSA program")
            kind = op.name.removeprefix("tosa.").upper()
            attrs = dict(_DEFAULTS.get(kind, {}))
            attrs.update((key, _attribute(value)) for key, value in {**op.attributes, **op.properties}.items()
                         if not key.startswith("tosa."))
            data = None
            if kind in ("CONST", "CONST_SHAPE"):
                values = op.attr("values")
                if not isinstance(values, ast.DenseElementsAttr):
                    raise GraphError(f"{where}: needs a dense 'values' attribute")
                data = np.asarray(values.flat(), np.float32 if _dtype_is_float(values.type) else np.int64)
                attrs = {}
            if len(op.result_types) != len(op.results):
                raise GraphError(f"{where}: {len(op.results)} results but {len(op.result_types)} result types")
            outputs = [self.name(v) for v in op.results]
            for name, t in zip(outputs, op.result_types, strict=True):
                self.declare(name, t, where, data)
            self.builder.add_op(kind, [self.name(v) for v in op.operands], outputs, attrs, where)
        raise GraphError(f"function {self.func.name!r} does not end with a return")


def _dtype_is_float(t: TensorType) -> bool:
    return isinstance(t.element, FloatType)


def load_tosa_mlir(path: str | Path) -> Graph:
    """A Graph from a TOSA MLIR file (tosa dialect operations in one function)."""
    path = Path(path)
    func = _function(parse_file(path), str(path))
    builder = TosaGraphBuilder(re.sub(r"\W", "_", path.stem) or "model")
    reader = _MlirReader(func, builder)
    reader.name_values()
    inputs = reader.arguments()
    outputs = reader.operations()
    return builder.finish(inputs, outputs)
