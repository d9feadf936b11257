"""DEPTHWISE_CONV2D (TOSA 1.0 §DEPTHWISE_CONV2D): weights [KH, KW, C, M], output channel c * M + m.
Attributes, type rules and the pad_value extension as CONV2D."""

from __future__ import annotations

import numpy as np

from ..ir.schedule import StepIO
from .base import register
from .conv2d import ConvBase
from .geometry import acc_bits, required_accumulator


@register
class DepthwiseConv2D(ConvBase):
    """acc[n, oy, ox, c * M + m] = bias[c * M + m] + sum over (ky, kx) of (x[.., c] - input_zp) *
    (w[ky, kx, c, m] - weight_zp)."""

    name = "DEPTHWISE_CONV2D"

    def kernel_hw(self, w_shape: tuple[int, ...]) -> tuple[int, int]:
        return w_shape[0], w_shape[1]

    def out_channels(self, io: StepIO) -> int:
        return io.ins[1].shape[2] * io.ins[1].shape[3]

    def expected_in_channels(self, w_shape: tuple[int, ...]) -> int:
        return w_shape[2]

    def taps_per_channel(self, io: StepIO) -> int:
        return 1

    def weight_taps(self, w: np.ndarray) -> np.ndarray:
        kh, kw, c, m = w.shape
        return w.reshape(kh * kw, c * m).T

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        taps = self.gathered(io, args[0])
        w = args[1].astype(np.int64) - self.params(io).wzp
        acc = np.einsum("nhwklc,klcm->nhwcm", taps, w)
        return [required_accumulator(self.name, acc.reshape(acc.shape[:3] + (-1,)), args[2].astype(np.int64),
                                     acc_bits(self.params(io).acc_type))]

    def template_context(self, io: StepIO) -> dict:
        return dict(super().template_context(io), m=io.ins[1].shape[3])
