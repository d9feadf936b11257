"""Sliding-window geometry of the source ops (conv2d, depthwise_conv2d, pools): "SAME" / "VALID" / explicit
padding -> TOSA pads, output size, and the input rows/columns no output reads.

TOSA requires (in - 1 + pad_lo + pad_hi - (k - 1) * dilation) to divide exactly by the stride. Source formats
(TFLite, TF) floor instead; the trailing rows that no output reads are then dropped: first from the high pad,
then by cropping the input (a SLICE), which never changes a result.
Functions here raise ValueError; callers turn it into a GraphError naming their op."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SourceWindow:
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, bottom, left, right (TOSA order)
    out: tuple[int, int]  # output height, width
    crop: tuple[int, int]  # input rows (bottom) and columns (right) that no output reads


def pair(value: Any, what: str) -> tuple[int, int]:
    """An int or a 2-list of positive ints."""
    vals = [value, value] if isinstance(value, int) else list(value) if isinstance(value, Sequence) else None
    if vals is None or len(vals) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        raise ValueError(f"{what} must be an integer or a list of 2 integers, got {value!r}")
    if min(vals) < 1:
        raise ValueError(f"{what} must be positive, got {value!r}")
    return vals[0], vals[1]


def _explicit_pads(padding: Any) -> tuple[int, int, int, int]:
    vals = list(padding) if isinstance(padding, Sequence) and not isinstance(padding, str) else None
    if vals is None or len(vals) != 4 or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        raise ValueError(f"padding must be 'SAME', 'VALID' or [top, bottom, left, right], got {padding!r}")
    if min(vals) < 0:
        raise ValueError(f"padding must not be negative, got {vals}")
    return vals[0], vals[1], vals[2], vals[3]


def _axis(size: int, k: int, stride: int, dil: int, lo: int, hi: int | None) -> tuple[int, int, int, int]:
    """(pad_lo, pad_hi, out, crop) for one spatial axis; hi=None means SAME."""
    span = (k - 1) * dil + 1
    if hi is None:
        out = -(-size // stride)
        total = max((out - 1) * stride + span - size, 0)
        lo, hi = total // 2, total - total // 2
    room = size + lo + hi - span
    if room < 0:
        raise ValueError(f"the window ({span} with dilation) is larger than the padded input ({size + lo + hi})")
    out = room // stride + 1
    excess = room % stride
    cut = min(excess, hi)
    return lo, hi - cut, out, excess - cut


def window(in_hw: tuple[int, int], kernel: Any, stride: Any = 1, dilation: Any = 1,
           padding: Any = "VALID") -> SourceWindow:
    k, s, d = pair(kernel, "kernel"), pair(stride, "stride"), pair(dilation, "dilation")
    if padding in ("SAME", "same"):
        pads: tuple[int | None, ...] = (0, None, 0, None)
    elif padding in ("VALID", "valid"):
        pads = (0, 0, 0, 0)
    else:
        pads = _explicit_pads(padding)
    t, b, oh, crop_h = _axis(in_hw[0], k[0], s[0], d[0], pads[0], pads[1])
    lft, r, ow, crop_w = _axis(in_hw[1], k[1], s[1], d[1], pads[2], pads[3])
    return SourceWindow(k, s, d, (t, b, lft, r), (oh, ow), (crop_h, crop_w))
