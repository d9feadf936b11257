"""The int8 TFLite models of the benchmarks (bench/tflite_bench.py, bench/targets_bench.py): MLPerf-Tiny-shaped
models built here with random int8 weights (per-channel scales) through the model builder of
qcodegen.verify.tflm_oracle -- DS-CNN KWS, MobileNetV1-0.25 (96x96x3, 2 classes), ResNet-8 and the FC autoencoder
(ToyADMOS) -- and person_detect.tflite from $QC_SHARED_DIR/testdata/tflite/models (default ../shared from the
project root). Building a model needs tflite-micro (pip install 'qcodegen[tflite]')."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from qcodegen.verify.tflm_oracle import OpSpec, TensorSpec, build_model

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("QC_SHARED_DIR", ROOT.parent / "shared"))
SAME, VALID = 0, 1
NONE, RELU = 0, 1


# --- MLPerf-Tiny-shaped models --------------------------------------------------------------------
class Net:
    """Builds an int8 TFLite model op by op, with random weights and output scales chosen so that the
    activations of random inputs spread over the int8 range (realistic, not saturated). activations="int16":
    the 16x8 scheme instead (int16 activations with zero point 0, int8 weights, int64 biases)."""

    def __init__(self, seed: int, shape: tuple[int, ...], scale: float = 0.05, zero_point: int = -10,
                 activations: str = "int8") -> None:
        self.rng = np.random.default_rng(seed)
        self.ops: list[OpSpec] = []
        self.dtype = activations
        self.lsb = 1.0 if activations == "int8" else 256.0  # activation spreads scale with the type
        self.input = TensorSpec(shape, activations, scale=scale / self.lsb, zero_point=self._zp(zero_point),
                                name="input")
        self.spread: dict[int, float] = {id(self.input): 74.0 * self.lsb}  # std of (q - zp) of every activation

    def _zp(self, zero_point: int) -> int:
        return zero_point if self.dtype == "int8" else 0

    def _activation(self, shape: tuple[int, ...], scale: float, act: int, spread: float,
                    zero_point: int | None = None) -> TensorSpec:
        zp = -128 if act == RELU else (int(self.rng.integers(-20, 20)) if zero_point is None else zero_point)
        t = TensorSpec(tuple(shape), self.dtype, scale=scale, zero_point=self._zp(zp), name=f"act{len(self.ops)}")
        self.spread[id(t)] = spread
        return t

    def _weights(self, shape: tuple[int, ...], axis: int, per_channel: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Normal weights scaled to +-127 per output channel, scales around 0.01 (one per channel)."""
        w = self.rng.normal(size=shape)
        reduce = tuple(i for i in range(len(shape)) if i != axis)
        w = np.round(w / np.abs(w).max(axis=reduce, keepdims=True) * 127).astype(np.int8)
        n = shape[axis] if per_channel else 1
        return w, 0.01 * self.rng.uniform(0.5, 2.0, n)

    def _layer(self, opcode: str, x: TensorSpec, w_shape: tuple[int, ...], w_axis: int, taps: int,
               out_shape: tuple[int, ...], act: int, per_channel: bool = True, **options: object) -> TensorSpec:
        w, w_scale = self._weights(w_shape, w_axis, per_channel)
        channels = w_shape[w_axis]
        acc_std = np.sqrt(taps) * 60.0 * self.spread[id(x)]
        bias_scale = [x.scale * float(s) for s in np.broadcast_to(w_scale, channels)]
        bias = np.round(self.rng.normal(0, 0.3 * acc_std, channels)).astype(np.int32)
        target = 45.0 * self.lsb  # std of the output in LSB
        out_scale = x.scale * float(np.mean(w_scale)) * acc_std / target
        y = self._activation(out_shape, out_scale, act, target)
        ws = TensorSpec(w_shape, scale=[float(s) for s in w_scale], zero_point=[0] * len(w_scale),
                        axis=w_axis if per_channel else None, data=w, name=f"w{len(self.ops)}")
        if not per_channel:
            ws.scale, ws.zero_point = float(w_scale[0]), 0
        bs = TensorSpec((channels,), "int32" if self.dtype == "int8" else "int64", scale=bias_scale,
                        zero_point=[0] * channels, axis=0, data=bias, name=f"b{len(self.ops)}")
        self.ops.append(OpSpec(opcode, [x, ws, bs], [y], dict(options, fusedActivationFunction=act)))
        return y

    def conv(self, x: TensorSpec, channels: int, kernel: tuple[int, int], stride: int = 1, act: int = RELU,
             padding: int = SAME) -> TensorSpec:
        n, h, w, c = x.shape
        oh, ow = _out_size(h, kernel[0], stride, padding), _out_size(w, kernel[1], stride, padding)
        return self._layer("CONV_2D", x, (channels, *kernel, c), 0, kernel[0] * kernel[1] * c,
                           (n, oh, ow, channels), act, padding=padding, strideH=stride, strideW=stride)

    def depthwise(self, x: TensorSpec, kernel: tuple[int, int] = (3, 3), stride: int = 1,
                  act: int = RELU) -> TensorSpec:
        n, h, w, c = x.shape
        oh, ow = _out_size(h, kernel[0], stride, SAME), _out_size(w, kernel[1], stride, SAME)
        return self._layer("DEPTHWISE_CONV_2D", x, (1, *kernel, c), 3, kernel[0] * kernel[1], (n, oh, ow, c), act,
                           padding=SAME, strideH=stride, strideW=stride, depthMultiplier=1)

    def fully_connected(self, x: TensorSpec, units: int, act: int = RELU) -> TensorSpec:
        depth = x.shape[-1]
        return self._layer("FULLY_CONNECTED", x, (units, depth), 0, depth, (1, units), act, per_channel=False)

    def add(self, a: TensorSpec, b: TensorSpec, act: int = RELU) -> TensorSpec:
        spread = float(np.hypot(self.spread[id(a)] * a.scale, self.spread[id(b)] * b.scale))
        y = self._activation(a.shape, spread / (45.0 * self.lsb), act, 45.0 * self.lsb)
        self.ops.append(OpSpec("ADD", [a, b], [y], dict(fusedActivationFunction=act)))
        return y

    def avg_pool(self, x: TensorSpec) -> TensorSpec:
        n, h, w, c = x.shape
        y = TensorSpec((n, 1, 1, c), self.dtype, scale=x.scale, zero_point=x.zero_point, name=f"act{len(self.ops)}")
        self.spread[id(y)] = self.spread[id(x)] / 4
        self.ops.append(OpSpec("AVERAGE_POOL_2D", [x], [y], dict(padding=VALID, strideH=1, strideW=1,
                                                                   filterHeight=h, filterWidth=w)))
        return y

    def spread_reals(self, x: TensorSpec, real_std: float) -> None:
        """Rescale the real values of the layer that computes x (its weight, bias and output scales by one factor:
        the same integers) so that x spreads over about real_std real units, as a trained net's activations do
        (else they grow layer by layer: a softmax of them is one-hot, a tanh saturates)."""
        layer = next(op for op in self.ops if op.outputs[0] is x)
        factor = real_std / (x.scale * self.spread[id(x)])
        for t in (layer.inputs[1], layer.inputs[2], x):
            t.scale = [s * factor for s in t.scale] if isinstance(t.scale, list) else t.scale * factor

    def softmax(self, x: TensorSpec, logits_std: float | None = None) -> TensorSpec:
        """SOFTMAX of x; logits_std: first spread_reals(x, logits_std)."""
        if logits_std is not None:
            self.spread_reals(x, logits_std)
        y = (TensorSpec(x.shape, scale=1.0 / 256, zero_point=-128, name="probabilities") if self.dtype == "int8" else
             TensorSpec(x.shape, "int16", scale=1.0 / 32768, zero_point=0, name="probabilities"))
        self.ops.append(OpSpec("SOFTMAX", [x], [y], dict(beta=1.0)))
        return y

    def build(self, output: TensorSpec) -> bytes:
        return build_model(self.ops, [self.input], [output])


def _out_size(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + stride - 1) // stride if padding == SAME else (size - kernel) // stride + 1


def ds_cnn(channels: int = 64, blocks: int = 4, frames: int = 49, activations: str = "int8",
           logits_std: float | None = None) -> bytes:
    """DS-CNN (KWS): conv 10x4 s2 64, four depthwise-separable blocks of 64, average pool, FC 12, softmax
    (tests build smaller variants: fewer channels, blocks or frames; activations="int16": the 16x8 scheme;
    logits_std: see Net.softmax)."""
    net = Net(1, (1, frames, 10, 1), scale=0.4, zero_point=20, activations=activations)
    x = net.conv(net.input, channels, (10, 4), stride=2)
    for _ in range(blocks):
        x = net.conv(net.depthwise(x), channels, (1, 1))
    x = net.fully_connected(net.avg_pool(x), 12, act=NONE)
    return net.build(net.softmax(x, logits_std))


def mobilenet_v1() -> bytes:
    """MobileNetV1 alpha 0.25 on 96x96x3 (VWW): conv 3x3 s2 8, 13 depthwise-separable blocks, pool, FC 2."""
    net = Net(2, (1, 96, 96, 3), scale=0.0078, zero_point=-1)
    x = net.conv(net.input, 8, (3, 3), stride=2)
    blocks = [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2)] + [(128, 1)] * 5 + [(256, 2), (256, 1)]
    for channels, stride in blocks:
        x = net.conv(net.depthwise(x, stride=stride), channels, (1, 1))
    x = net.fully_connected(net.avg_pool(x), 2, act=NONE)
    return net.build(net.softmax(x))


def resnet8() -> bytes:
    """ResNet-8 (CIFAR-10 image classification): conv 16, three residual stacks 16/32/64, pool, FC 10."""
    net = Net(3, (1, 32, 32, 3), scale=0.0078, zero_point=-1)
    x = net.conv(net.input, 16, (3, 3))
    for channels, stride in ((16, 1), (32, 2), (64, 2)):
        y = net.conv(x, channels, (3, 3), stride=stride)
        y = net.conv(y, channels, (3, 3), act=NONE)
        shortcut = x if stride == 1 else net.conv(x, channels, (1, 1), stride=stride, act=NONE)
        x = net.add(shortcut, y)
    x = net.fully_connected(net.avg_pool(x), 10, act=NONE)
    return net.build(net.softmax(x))


def autoencoder(features: int = 640, hidden: int = 128, code: int = 8) -> bytes:
    """FC autoencoder (anomaly detection): 640-128-128-128-128-8-128-128-128-128-640, FC + ReLU (tests build
    smaller variants)."""
    net = Net(4, (1, features), scale=0.1, zero_point=5)
    x = net.input
    for units in (hidden,) * 4 + (code,) + (hidden,) * 4:
        x = net.fully_connected(x, units)
    return net.build(net.fully_connected(x, features, act=NONE))


BUILT: dict[str, Callable[[], bytes]] = {"ds_cnn": ds_cnn, "mobilenet_v1_025": mobilenet_v1, "resnet8": resnet8,
                                         "fc_autoencoder": autoencoder}
MLPERF = tuple(BUILT)
ALL = ("person_detect", *MLPERF)


def model_path(name: str, workdir: Path) -> Path:
    """The .tflite file of a model: built into `workdir`, or the shared one (person_detect)."""
    if name in BUILT:
        path = workdir / f"{name}.tflite"
        path.write_bytes(BUILT[name]())
        return path
    path = SHARED / "testdata" / "tflite" / "models" / f"{name}.tflite"
    if not path.exists():
        raise SystemExit(f"{path} not found (set QC_SHARED_DIR)")
    return path
