"""Shared helpers of the sliding-window and dot-product primitives (CONV2D, DEPTHWISE_CONV2D, AVG_POOL2D,
MAX_POOL2D, MATMUL): TOSA 1.0 window geometry (output sizes with idiv_check, tap gathering for the numpy
references, the interior/border split the C templates use) and accumulator bounds for range analysis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PlanError
from ..fixedpoint import Unpredictable
from ..ir.schedule import CONST, Buffer, StepIO, Widening
from .base import Ranges, require


def int_list(attrs: dict[str, Any], key: str, length: int, op: str, default: list[int] | None = None
             ) -> tuple[int, ...]:
    """Attribute `key` as a tuple of `length` ints (GraphError when missing or of the wrong length)."""
    value = attrs.get(key, default)
    require(value is not None, f"{op}: missing attribute {key!r}")
    items = tuple(int(v) for v in np.asarray(value).reshape(-1))
    require(len(items) == length, f"{op}: {key} needs {length} values, got {list(items)}")
    return items


def _output_extent(op: str, axis: str, size: int, kernel: int, stride: int, dilation: int, lo: int,
                   hi: int) -> int:
    """TOSA: O = idiv_check(I - 1 + pad_lo + pad_hi - (K - 1) * dilation, stride) + 1."""
    span = size - 1 + lo + hi - (kernel - 1) * dilation
    require(span >= 0, f"{op}: the {axis} window ({kernel} taps, dilation {dilation}) is larger than the "
                       f"padded input ({size} + {lo} + {hi})")
    require(span % stride == 0, f"{op}: {axis} output size is not exact: ({size} - 1 + {lo} + {hi} - "
                                f"({kernel} - 1) * {dilation}) is not divisible by stride {stride}")
    return span // stride + 1


@dataclass(frozen=True)
class Window:
    """A 2-D window over an NHWC input: kernel (KH, KW), stride, dilation, pad [top, bottom, left, right]."""

    op: str
    in_shape: tuple[int, int, int, int]  # N, IH, IW, C
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int, int, int]

    @classmethod
    def of_ohwi(cls, op: str, io: StepIO) -> Window:
        """The window of a convolution step whose inputs are x (NHWC) and weights (OHWI)."""
        w = io.ins[1].shape
        return cls.from_attrs(op, io.ins[0], (w[1], w[2]), io.attrs)

    @classmethod
    def from_attrs(cls, op: str, x: Buffer, kernel: tuple[int, int], attrs: dict[str, Any],
                   dilated: bool = True) -> Window:
        """Parse stride/pad (and dilation when `dilated`) and check TOSA's ERROR_IFs on them."""
        require(len(x.shape) == 4, f"{op}: input must be NHWC (rank 4), got shape {list(x.shape)}")
        stride = int_list(attrs, "stride", 2, op)
        pad = int_list(attrs, "pad", 4, op)
        dilation = int_list(attrs, "dilation", 2, op) if dilated else (1, 1)
        require(min(kernel) >= 1, f"{op}: kernel {list(kernel)} must be >= 1")
        require(min(stride) >= 1, f"{op}: stride {list(stride)} must be >= 1")
        require(min(dilation) >= 1, f"{op}: dilation {list(dilation)} must be >= 1")
        require(min(pad) >= 0, f"{op}: pad {list(pad)} must be >= 0")
        require(max(*kernel, *stride, *dilation, *pad) < 1 << 31,  # (TOSA attributes are int32; so is the C)
                f"{op}: kernel, stride, dilation and pad must fit int32")
        n, ih, iw, c = x.shape
        return cls(op, (n, ih, iw, c), (int(kernel[0]), int(kernel[1])), (stride[0], stride[1]),
                   (dilation[0], dilation[1]), (pad[0], pad[1], pad[2], pad[3]))

    @property
    def out_hw(self) -> tuple[int, int]:
        _, ih, iw, _ = self.in_shape
        (kh, kw), (sy, sx), (dy, dx), (pt, pb, pl, pr) = self.kernel, self.stride, self.dilation, self.pad
        return (_output_extent(self.op, "height", ih, kh, sy, dy, pt, pb),
                _output_extent(self.op, "width", iw, kw, sx, dx, pl, pr))

    @property
    def taps(self) -> int:
        return self.kernel[0] * self.kernel[1]

    def _axis_valid(self, axis: int) -> np.ndarray:
        """[O, K] bool: whether tap k of output position o reads inside the input along `axis` (0: y, 1: x)."""
        size, k, s, d = self.in_shape[1 + axis], self.kernel[axis], self.stride[axis], self.dilation[axis]
        pos = np.arange(self.out_hw[axis])[:, None] * s - self.pad[2 * axis] + np.arange(k)[None, :] * d
        return (pos >= 0) & (pos < size)

    def mask(self) -> np.ndarray:
        """[OH, OW, KH, KW] bool: in-bounds taps."""
        vy, vx = self._axis_valid(0), self._axis_valid(1)
        return vy[:, None, :, None] & vx[None, :, None, :]

    def patches(self, x: np.ndarray, fill: int) -> np.ndarray:
        """[N, OH, OW, KH, KW, C] int64: the value every tap reads, `fill` where it falls in the padding."""
        (pt, pb, pl, pr), (oh, ow) = self.pad, self.out_hw
        xp = np.pad(x.astype(np.int64), ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
        rows = np.arange(oh)[:, None] * self.stride[0] + np.arange(self.kernel[0])[None, :] * self.dilation[0]
        cols = np.arange(ow)[:, None] * self.stride[1] + np.arange(self.kernel[1])[None, :] * self.dilation[1]
        return xp[:, rows[:, None, :, None], cols[None, :, None, :], :]

    def interior(self, axis: int) -> tuple[int, int]:
        """[lo, hi): output positions along `axis` whose taps all read inside the input (empty: lo == hi)."""
        inside = np.flatnonzero(self._axis_valid(axis).all(axis=1))
        return (int(inside[0]), int(inside[-1]) + 1) if inside.size else (0, 0)

    @property
    def reads_padding(self) -> bool:
        return not bool(self.mask().all())

    def loops(self) -> WindowLoops:
        """The loop bounds the templates and the kernel choices read (see templates/generic/_window.c.j2)."""
        n, ih, iw, c = self.in_shape
        (oh, ow), (kh, kw) = self.out_hw, self.kernel
        vy, vx = self._axis_valid(0), self._axis_valid(1)
        rows, cols = self.interior(0), self.interior(1)
        return WindowLoops(
            n=n, ih=ih, iw=iw, c=c, oh=oh, ow=ow, kh=kh, kw=kw, sy=self.stride[0], sx=self.stride[1],
            dy=self.dilation[0], dx=self.dilation[1], pt=self.pad[0], pl=self.pad[2], rows=rows, cols=cols,
            clip_top=bool((~vy[:, 0]).any()), clip_bottom=bool((~vy[:, -1]).any()),
            clip_left=bool((~vx[:, 0]).any()), clip_right=bool((~vx[:, -1]).any()),
            all_interior=not self.reads_padding, has_interior=rows[0] < rows[1] and cols[0] < cols[1])


@dataclass(frozen=True)
class WindowLoops:
    """A 2-D window's loop bounds over an NHWC input [n, ih, iw, c] and output [n, oh, ow, .]: kernel kh x kw,
    stride sy, sx, dilation dy, dx, top and left padding pt, pl; rows, cols: [lo, hi) output positions whose taps
    all read inside the input (Window.interior); clip_*: whether that side can cut a window short (the tap range
    is clipped only there); all_interior: no tap reads padding; has_interior: some output has no padded tap."""

    n: int
    ih: int
    iw: int
    c: int
    oh: int
    ow: int
    kh: int
    kw: int
    sy: int
    sx: int
    dy: int
    dx: int
    pt: int
    pl: int
    rows: tuple[int, int]
    cols: tuple[int, int]
    clip_top: bool
    clip_bottom: bool
    clip_left: bool
    clip_right: bool
    all_interior: bool
    has_interior: bool

    @property
    def pixels(self) -> int:
        """Output pixels (n * oh * ow)."""
        return self.n * self.oh * self.ow

    @property
    def taps(self) -> int:
        return self.kh * self.kw


def operand_interval(buf: Buffer, value_range: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Element-wise [lo, hi] of an operand: its actual values when constant, else its range (broadcast)."""
    if buf.kind == CONST and buf.data is not None:
        data = buf.data.astype(np.int64)
        return data, data
    lo, hi = value_range
    return np.full(buf.shape, lo, np.int64), np.full(buf.shape, hi, np.int64)


def accumulator_check(what: str, weights: tuple[np.ndarray, np.ndarray], x: tuple[int, int],
                      bias: tuple[np.ndarray, np.ndarray], acc_bits: int) -> tuple[tuple[int, int], str | None]:
    """Bound acc[c] = bias[c] + sum_t x_t * w[c, t] for x_t in [x_lo, x_hi] (zero points already removed).

    weights: ([C, T] lo, [C, T] hi) per channel and tap; bias: ([C] or [1] lo, hi). Returns the overall
    [min, max] of the accumulator, and why a partial sum in some evaluation order could leave the signed
    `acc_bits` type (conservative: |bias| + sum of max |term|), or None when none can."""
    w_lo, w_hi = weights
    corners = np.stack([w_lo * x[0], w_lo * x[1], w_hi * x[0], w_hi * x[1]])
    t_lo, t_hi = corners.min(axis=0), corners.max(axis=0)
    b_lo, b_hi = (np.asarray(b, np.int64) for b in bias)
    lo, hi = b_lo + t_lo.sum(axis=1), b_hi + t_hi.sum(axis=1)
    worst = np.maximum(np.abs(b_lo), np.abs(b_hi)) + np.maximum(np.abs(t_lo), np.abs(t_hi)).sum(axis=1)
    limit = (1 << (acc_bits - 1)) - 1
    bound = (int(lo.min()), int(hi.max())) if lo.size else (0, 0)
    if worst.size and int(worst.max()) > limit:
        c = int(np.argmax(worst))
        return bound, (f"{what}: the i{acc_bits} accumulator could overflow (channel {c}: |bias| + sum of "
                       f"|terms| <= {int(worst[c])} > {limit})")
    return bound, None


def accumulator_bounds(what: str, weights: tuple[np.ndarray, np.ndarray], x: tuple[int, int],
                       bias: tuple[np.ndarray, np.ndarray], acc_bits: int) -> tuple[int, int]:
    """accumulator_check for a step that cannot widen: PlanError when the accumulator could overflow."""
    bound, overflow = accumulator_check(what, weights, x, bias, acc_bits)
    if overflow:
        raise PlanError(f"{overflow}; use a wider accumulator or split the reduction")
    return bound


def required_accumulator(op: str, taps: np.ndarray, bias: np.ndarray, acc_bits: int) -> np.ndarray:
    """taps + bias (the reference's exact sums), after TOSA's REQUIREs that the sum of the taps and the sum with
    the bias stay in the signed `acc_bits` accumulator (Unpredictable otherwise)."""
    out = taps + bias
    limit = 1 << (acc_bits - 1)
    for what, values in (("the sum of the taps", taps), ("adding the bias", out)):
        if values.size and (values.min() < -limit or values.max() >= limit):
            raise Unpredictable(f"{op}: {what} leaves the i{acc_bits} accumulator (TOSA REQUIRE)")
    return out


def accumulator_ranges(bound: tuple[int, int], overflow: str | None, acc_bits: int) -> Ranges:
    """The Ranges of a reduction whose output is its accumulator: proven, or (overflow given) widened to an
    int64 accumulator whose result is saturated to the acc_bits type."""
    if overflow is None:
        return Ranges([bound], acc=bound)
    limit = 1 << (acc_bits - 1)
    return Ranges([(max(bound[0], -limit), min(bound[1], limit - 1))], acc=bound, widened=Widening(overflow, bound))


def acc_bits(acc_type: str) -> int:
    return 32 if acc_type == "i32" else 48


def accumulator_context(io: StepIO, acc_type: str) -> dict[str, Any]:
    """Template context of a reduction's accumulator: its C type, int64_t for i48 and for a step that range
    analysis widened (then `saturate`: the bounds of the acc_type its results are saturated to, else None),
    and `widened`, which makes the templates use the portable kernels (_window.c.j2 `dot_hooks`)."""
    widened = io.step.widened is not None
    limit = 1 << (acc_bits(acc_type) - 1)
    return dict(acc_ctype="int32_t" if acc_type == "i32" and not widened else "int64_t",
                saturate=(-limit, limit - 1) if widened else None, widened=widened)
