"""Builder of operator-format (QOperator) ONNX test models with onnx.helper: many independent cases, each its own
graph inputs and outputs, in one model, so that one C build and one onnxruntime session check them all."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ELEM = {"u8": TensorProto.UINT8, "i8": TensorProto.INT8, "f32": TensorProto.FLOAT, "i32": TensorProto.INT32,
        "i64": TensorProto.INT64, "i16": TensorProto.INT16, "u16": TensorProto.UINT16}
NP = {"u8": np.uint8, "i8": np.int8, "f32": np.float32, "i32": np.int32, "i64": np.int64, "i16": np.int16,
      "u16": np.uint16}


@dataclass
class Models:
    """Nodes, initializers and graph inputs / outputs of one multi-case model."""

    seed: int = 0
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    ms_domain: bool = False

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, values: np.ndarray | float | int, dt: str) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(values, NP[dt]), name))
        return name

    def qparams(self, scale: float | list[float], zp: int | list[int], dt: str) -> list[str]:
        return [self.const(np.asarray(scale, np.float32), "f32"), self.const(zp, dt)]

    def input(self, shape: tuple[int, ...], dt: str) -> str:
        name = self.name("in")
        self.inputs.append(helper.make_tensor_value_info(name, ELEM[dt], list(shape)))
        return name

    def output(self, name: str, shape: tuple[int, ...] | None, dt: str) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, ELEM[dt], None if shape is None else list(shape)))

    def node(self, op: str, inputs: list[str], ms: bool = False, **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], domain="com.microsoft" if ms else "", **attrs))
        self.ms_domain |= ms
        return out

    def weights(self, shape: tuple[int, ...], dt: str) -> str:
        lo, hi = (-127, 127) if dt == "i8" else (0, 255)
        return self.const(self.rng.integers(lo, hi, shape, endpoint=True), dt)

    def model(self, opset: int = 17) -> bytes:
        graph = helper.make_graph(self.nodes, "cases", self.inputs, self.outputs, self.inits)
        opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if self.ms_domain
                                                     else [])
        return helper.make_model(graph, opset_imports=opsets).SerializeToString()
