"""Build the example graphs with the Python builder and write them as JSON next to this script.

    python examples/make_examples.py

Weights are seeded random integers ({"random": {"seed": N}} in the JSON, so the files stay small); weight
scales follow He initialisation (real standard deviation sqrt(2 / fan_in), +-20% per channel). Every output
scale is calibrated: the layer is first added to a scratch copy of the graph, the numpy reference runs it on
random inputs, and the scale is chosen from the real values of its accumulator (99.9th percentile), so the
examples exercise the whole int8 range without saturating."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from qcodegen.compiler import plan
from qcodegen.frontends.builder import GraphBuilder, Random
from qcodegen.ir.graph import Tensor
from qcodegen.reference import run_reference
from qcodegen.verify.check import random_inputs

HERE = Path(__file__).resolve().parent
W_STD_LEVELS = 127 / math.sqrt(3)  # standard deviation of uniform random weights over [-127, 127]
SAMPLES = 4  # random inputs used for calibration
Layer = Callable[[GraphBuilder, float, int], Tensor]  # (builder, out_scale, out_zero_point) -> output


def output_quant(real: np.ndarray, activation: str) -> tuple[float, int]:
    """(scale, zero point) covering the real values the layer produces after its activation."""
    if activation == "relu6":
        return 6 / 255, -128
    if activation == "relu":
        return max(float(np.quantile(real, 0.999)), 1e-3) / 255, -128
    return max(float(np.quantile(np.abs(real), 0.999)), 1e-3) / 127, 0


class Net:
    """A GraphBuilder whose layers get calibrated output scales."""

    def __init__(self, name: str) -> None:
        self.b = GraphBuilder(name)
        self.seed = 0
        self.rng = np.random.default_rng(12345)

    def _seed(self) -> int:
        self.seed += 1
        return self.seed

    def _run(self, builder: GraphBuilder, output: Tensor) -> list[dict[str, np.ndarray]]:
        builder.output(output)
        schedule = plan(builder.build())
        rng = np.random.default_rng(0)
        return [run_reference(schedule, random_inputs(schedule, rng)) for _ in range(SAMPLES)]

    def real(self, t: Tensor) -> np.ndarray:
        """Real values of an existing tensor over the calibration inputs."""
        runs = self._run(copy.deepcopy(self.b), t)
        q = np.stack([r[t.name] for r in runs]).astype(np.float64)
        return (q - t.quant.zero_point) * t.quant.scale

    def calibrated(self, layer: Layer, acc_scale: Callable[[Tensor], np.ndarray], activation: str) -> Tensor:
        """Add `layer` with an output quantization fitted to its accumulator's real values
        (accumulator * acc_scale(output tensor), broadcast over the last axis)."""
        trial = copy.deepcopy(self.b)
        y = layer(trial, 1.0, 0)
        acc = np.stack([r[f"{y.name}_acc"] for r in self._run(trial, y)]).astype(np.float64)
        return layer(self.b, *output_quant(acc * acc_scale(y), activation))

    def _w_scales(self, fan_in: int, channels: int) -> list[float]:
        base = math.sqrt(2.0 / fan_in) / W_STD_LEVELS
        return (base * self.rng.uniform(0.8, 1.2, channels)).tolist()

    def conv(self, x: Tensor, out_ch: int, kernel: tuple[int, int], stride: int = 1, activation: str = "relu6",
             depthwise: bool = False) -> Tensor:
        in_ch = x.shape[3]
        fan_in = kernel[0] * kernel[1] * (1 if depthwise else in_ch)
        channels = in_ch if depthwise else out_ch
        w_scales = self._w_scales(fan_in, channels)
        w_shape = (1, *kernel, channels) if depthwise else (channels, *kernel, in_ch)
        weights, bias = Random(w_shape, self._seed(), -127, 127), Random((channels,), self._seed(), -300, 300)

        def layer(b: GraphBuilder, scale: float, zp: int) -> Tensor:
            fn = b.depthwise_conv2d if depthwise else b.conv2d
            return fn(x, weights, w_scales, scale, zp, bias=bias, stride=stride, padding="SAME",
                      activation=activation)

        return self.calibrated(layer, lambda y: x.quant.scale * np.asarray(w_scales), activation)

    def separable(self, x: Tensor, out_ch: int, stride: int = 1, activation: str = "relu6") -> Tensor:
        """Depthwise 3x3 + pointwise 1x1 (a MobileNet / DS-CNN block)."""
        dw = self.conv(x, 0, (3, 3), stride, activation, depthwise=True)
        return self.conv(dw, out_ch, (1, 1), activation=activation)

    def dense(self, x: Tensor, out_features: int) -> Tensor:
        k = x.shape[-1]
        w_scales = self._w_scales(k, out_features)
        weights, bias = Random((out_features, k), self._seed(), -127, 127), Random((out_features,), self._seed(),
                                                                                  -300, 300)

        def layer(b: GraphBuilder, scale: float, zp: int) -> Tensor:
            return b.fully_connected(x, weights, w_scales, scale, zp, bias=bias)

        return self.calibrated(layer, lambda y: x.quant.scale * np.asarray(w_scales), "none")

    def add(self, a: Tensor, b: Tensor, activation: str, name: str) -> Tensor:
        scale, zp = output_quant(np.maximum(self.real(a) + self.real(b), 0), activation)
        return self.b.add(a, b, scale, zp, activation=activation, name=name)

    def global_pool(self, x: Tensor, use_mean: bool) -> Tensor:
        """Average over H and W keeping (N, 1, 1, C)."""
        real = self.real(x).mean(axis=(2, 3))
        lo, hi = min(float(real.min()), 0.0), max(float(real.max()), 0.0)
        scale = (hi - lo) / 255
        zp = -128 - round(lo / scale)
        if use_mean:
            return self.b.mean(x, [1, 2], keepdims=True, out_scale=scale, out_zero_point=zp)
        return self.b.avg_pool2d(x, list(x.shape[1:3]), out_scale=scale, out_zero_point=zp)


def mobilenet_like() -> GraphBuilder:
    """1x48x48x3 image -> conv 3x3/2 -> 3 depthwise-separable blocks -> global mean -> 10 classes."""
    net = Net("mobilenet_like")
    y = net.b.input("image", (1, 48, 48, 3), "i8", scale=1 / 128, zero_point=0)
    y = net.conv(y, 8, (3, 3), stride=2)
    y = net.separable(y, 16)
    y = net.separable(y, 24, stride=2)
    y = net.separable(y, 32, stride=2)
    y = net.global_pool(y, use_mean=True)
    y = net.dense(y, 10)
    net.b.output(net.b.reshape(y, (1, 10), name="logits"))
    return net.b


def kws_like() -> GraphBuilder:
    """DS-CNN-like keyword spotting: 49x10 MFCC -> conv 10x4/2 -> 3 depthwise-separable blocks (a residual add
    after the second; its output, requantized, is concatenated to the third's) -> average pool -> 12 classes."""
    net = Net("kws_like")
    b = net.b
    x = b.input("mfcc", (1, 49, 10, 1), "i8", scale=0.25, zero_point=-3)
    y = net.conv(x, 16, (10, 4), stride=2, activation="relu")
    y1 = net.separable(y, 16, activation="relu")
    y2 = net.separable(y1, 16, activation="relu")
    res = net.add(y1, y2, "relu", name="residual")
    y3 = net.separable(res, 16, activation="relu")
    skip = b.requantize(res, scale=y3.quant.scale, zero_point=y3.quant.zero_point, name="skip_requant")
    both = b.concat([y3, skip], axis=3, name="concat")
    logits = net.dense(net.global_pool(both, use_mean=False), 12)
    b.output(b.reshape(logits, (1, 12), name="logits"))
    return b


def main() -> None:
    for make in (mobilenet_like, kws_like):
        builder = make()
        path = HERE / f"{builder.name}.json"
        builder.to_json(path)
        builder.build()  # validates
        print(f"wrote {path.relative_to(HERE.parent)} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
