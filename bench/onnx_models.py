"""MLPerf-Tiny-shaped ONNX models for the ONNX front end's tests and benchmarks: float models built with
onnx.helper (random weights, the shapes of bench/models.py: DS-CNN, MobileNetV1-0.25, ResNet-8, the FC
autoencoder), quantized with onnxruntime.quantization.quantize_static in the operator (QOperator) or QDQ format,
per tensor or per channel, with int8 or uint8 activations. Needs onnx and onnxruntime (pip install
'qcodegen[onnx,oracles]'). Tests build smaller variants (fewer channels, blocks, smaller inputs)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class FloatNet:
    """An NCHW float model under construction: nodes, initializers and the running tensor name and shape."""

    name: str
    shape: tuple[int, ...]
    seed: int = 0
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.x, self.dims = "input", tuple(self.shape)

    def _new(self, base: str) -> str:
        return f"{base}{len(self.nodes)}"

    def _param(self, base: str, values: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self._new(base)
        self.inits.append(numpy_helper.from_array(values.astype(np.float32), name))
        return name

    def _node(self, op: str, inputs: list[str], dims: tuple[int, ...], **attrs: object) -> str:
        from onnx import helper

        out = self._new(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        self.x, self.dims = out, dims
        return out

    def conv(self, channels: int, kernel: tuple[int, int], stride: int = 1, group: int = 1,
             relu: bool = True) -> str:
        n, c, h, w = self.dims
        fan_in = c // group * kernel[0] * kernel[1]
        weight = self._param("w", self.rng.normal(0, np.sqrt(2.0 / fan_in), (channels, c // group, *kernel)))
        bias = self._param("b", self.rng.normal(0, 0.1, channels))
        pads = [(k - 1) // 2 for k in kernel] + [k // 2 for k in kernel]
        oh, ow = (h + pads[0] + pads[2] - kernel[0]) // stride + 1, (w + pads[1] + pads[3] - kernel[1]) // stride + 1
        self._node("Conv", [self.x, weight, bias], (n, channels, oh, ow), pads=pads, strides=[stride, stride],
                   group=group)
        return self._node("Relu", [self.x], self.dims) if relu else self.x

    def depthwise(self, stride: int = 1) -> str:
        return self.conv(self.dims[1], (3, 3), stride, group=self.dims[1])

    def add(self, other: str, relu: bool = True) -> str:
        self._node("Add", [other, self.x], self.dims)
        return self._node("Relu", [self.x], self.dims) if relu else self.x

    def global_pool(self) -> str:
        n, c = self.dims[:2]
        self._node("GlobalAveragePool", [self.x], (n, c, 1, 1))
        return self._node("Flatten", [self.x], (n, c), axis=1)

    def dense(self, units: int, relu: bool = True) -> str:
        k = self.dims[-1]
        weight = self._param("w", self.rng.normal(0, np.sqrt(2.0 / k), (k, units)))
        bias = self._param("b", self.rng.normal(0, 0.1, units))
        self._node("Gemm", [self.x, weight, bias], (self.dims[0], units))
        return self._node("Relu", [self.x], self.dims) if relu else self.x

    def softmax(self) -> str:
        return self._node("Softmax", [self.x], self.dims, axis=-1)

    def model(self) -> bytes:
        from onnx import TensorProto, helper

        graph = helper.make_graph(self.nodes, self.name,
                                  [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(self.shape))],
                                  [helper.make_tensor_value_info(self.x, TensorProto.FLOAT, list(self.dims))],
                                  self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def ds_cnn(channels: int = 64, blocks: int = 4, frames: int = 49, softmax: bool = True) -> bytes:
    """DS-CNN (KWS): conv 10x4 s2, depthwise-separable blocks, global average pool, dense 12 (, softmax)."""
    net = FloatNet("ds_cnn", (1, 1, frames, 10), seed=1)
    net.conv(channels, (10, 4), stride=2)
    for _ in range(blocks):
        net.depthwise()
        net.conv(channels, (1, 1))
    net.global_pool()
    net.dense(12, relu=False)
    if softmax:
        net.softmax()
    return net.model()


def mobilenet_v1(size: int = 96, blocks: int = 13, softmax: bool = True) -> bytes:
    """MobileNetV1 alpha 0.25 (VWW): conv 3x3 s2 8, depthwise-separable blocks, pool, dense 2 (, softmax)."""
    net = FloatNet("mobilenet_v1", (1, 3, size, size), seed=2)
    net.conv(8, (3, 3), stride=2)
    plan = [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2)] + [(128, 1)] * 5 + [(256, 2), (256, 1)]
    for channels, stride in plan[:blocks]:
        net.depthwise(stride)
        net.conv(channels, (1, 1))
    net.global_pool()
    net.dense(2, relu=False)
    if softmax:
        net.softmax()
    return net.model()


def resnet8(size: int = 32, widths: tuple[int, int, int] = (16, 32, 64), softmax: bool = True) -> bytes:
    """ResNet-8 (CIFAR-10): conv 16, three residual stacks, pool, dense 10 (, softmax)."""
    net = FloatNet("resnet8", (1, 3, size, size), seed=3)
    x = net.conv(widths[0], (3, 3))
    for channels, stride in zip(widths, (1, 2, 2), strict=True):
        dims = net.dims
        y = net.conv(channels, (3, 3), stride)
        net.conv(channels, (3, 3), relu=False)
        after = (net.x, net.dims)
        if stride != 1 or dims[1] != channels:
            net.x, net.dims = x, dims
            x = net.conv(channels, (1, 1), stride, relu=False)
        net.x, net.dims = after
        x = net.add(x)
        del y
    net.global_pool()
    net.dense(10, relu=False)
    if softmax:
        net.softmax()
    return net.model()


def autoencoder(features: int = 640, hidden: int = 128, code: int = 8, depth: int = 4) -> bytes:
    """FC autoencoder (ToyADMOS anomaly detection): features-hidden*depth-code-hidden*depth-features."""
    net = FloatNet("autoencoder", (1, features), seed=4)
    for units in [hidden] * depth + [code] + [hidden] * depth:
        net.dense(units)
    net.dense(features, relu=False)
    return net.model()


MODELS: dict[str, Callable[..., bytes]] = {"ds_cnn": ds_cnn, "mobilenet_v1": mobilenet_v1, "resnet8": resnet8,
                                           "autoencoder": autoencoder}


_QUANT_TYPES: dict[str, Callable] = {"int8": lambda t: t.QInt8, "uint8": lambda t: t.QUInt8,
                                     "int16": lambda t: t.QInt16, "uint16": lambda t: t.QUInt16,
                                     "int4": lambda t: t.QInt4}


def quantize(float_model: bytes, per_channel: bool, activations: str = "int8", reduce_range: bool = False,
             samples: int = 8, seed: int = 0, qdq: bool = False, weights: str = "int8") -> bytes:
    """quantize_static in the QOperator format (or QDQ): `weights` "int8" (or, QDQ, "int4"), `activations` "int8",
    "uint8" (or, QDQ, "int16", "uint16"), calibrated on seeded normal inputs."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    model = onnx.load_model_from_string(float_model)
    value = model.graph.input[0]
    shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{value.name: rng.normal(size=shape).astype(np.float32)} for _ in range(samples)])

        def get_next(self) -> dict | None:
            return next(self.batches, None)

    with tempfile.TemporaryDirectory(prefix="qc-onnx-q-") as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "quant.onnx"
        src.write_bytes(float_model)
        quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
                        activation_type=_QUANT_TYPES[activations](QuantType),
                        weight_type=_QUANT_TYPES[weights](QuantType), per_channel=per_channel,
                        reduce_range=reduce_range)
        return dst.read_bytes()
