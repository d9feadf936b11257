"""Uniform quantized types: per-tensor, per-axis and sub-channel (blockwise), with storage ranges.

real = scale * (q - zero_point). Scales are kept exactly as the source format gives them (float64
arrays holding the source's float32/float64 values); all derived fixed-point parameters are computed
from them at plan time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from .dtypes import DType, dtype


def _numbers(values: object, kind: type, what: str) -> np.ndarray:
    """`values` as a float64 or int64 array; ValueError (not OverflowError/TypeError) for what does not fit."""
    try:
        return np.asarray(values, dtype=kind)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{what} must be {'integers' if kind is np.int64 else 'numbers'} that fit {np.dtype(kind)} "
                         f"({exc})") from None


@dataclass(frozen=True, eq=False)
class QuantType:
    storage: DType
    scales: np.ndarray
    zero_points: np.ndarray
    axis: int | None = None
    block_sizes: tuple[int, ...] | None = None
    storage_min: int = field(default=None)  # type: ignore[assignment]
    storage_max: int = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage", dtype(self.storage))
        object.__setattr__(self, "scales", _numbers(self.scales, np.float64, "scales"))
        object.__setattr__(self, "zero_points", _numbers(self.zero_points, np.int64, "zero points"))
        if self.storage_min is None:
            object.__setattr__(self, "storage_min", self.storage.min)
        if self.storage_max is None:
            object.__setattr__(self, "storage_max", self.storage.max)

    @classmethod
    def per_tensor(cls, storage: str | DType, scale: float, zero_point: int = 0, **kw) -> QuantType:
        return cls(dtype(storage), scale, zero_point, **kw)

    @classmethod
    def per_axis(cls, storage: str | DType, scales: Sequence[float], zero_points: Sequence[int] | int,
                 axis: int, **kw) -> QuantType:
        scales_arr = _numbers(scales, np.float64, "scales")
        zps = np.broadcast_to(_numbers(zero_points, np.int64, "zero points"), scales_arr.shape).copy()
        return cls(dtype(storage), scales_arr, zps, axis=axis, **kw)

    def same_as(self, other: QuantType | None) -> bool:
        """Equal as values (QuantType compares by identity)."""
        return (other is not None and self.storage == other.storage and self.axis == other.axis
                and self.block_sizes == other.block_sizes and np.array_equal(self.scales, other.scales)
                and np.array_equal(self.zero_points, other.zero_points)
                and (self.storage_min, self.storage_max) == (other.storage_min, other.storage_max))

    @property
    def kind(self) -> str:
        if self.block_sizes is not None:
            return "sub_channel"
        return "per_axis" if self.axis is not None else "per_tensor"

    @property
    def scale(self) -> float:
        """The single scale of a per-tensor type."""
        if self.kind != "per_tensor":
            raise GraphError(f"expected a per-tensor quantized type, got {self.kind}")
        return float(self.scales)

    @property
    def zero_point(self) -> int:
        if self.kind != "per_tensor":
            raise GraphError(f"expected a per-tensor quantized type, got {self.kind}")
        return int(self.zero_points)

    def expand(self, shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Scales and zero points broadcast to every element of a tensor of `shape`."""
        shape = tuple(shape)
        if self.kind == "per_tensor":
            return (np.broadcast_to(self.scales, shape), np.broadcast_to(self.zero_points, shape))
        if self.kind == "per_axis":
            view = [1] * len(shape)
            view[self.axis] = shape[self.axis]
            return (np.broadcast_to(self.scales.reshape(view), shape),
                    np.broadcast_to(self.zero_points.reshape(view), shape))
        scales, zps = self.scales, self.zero_points
        for dim, block in enumerate(self.block_sizes):
            scales = np.repeat(scales, block, axis=dim)
            zps = np.repeat(zps, block, axis=dim)
        return scales, zps

    def validate(self, shape: Sequence[int], where: str) -> None:
        """Raise GraphError naming `where` if this type cannot describe a tensor of `shape`."""
        st = self.storage
        if st.is_float:
            raise GraphError(f"{where}: quantized storage type must be an integer type, got {st}")
        if not (st.min <= self.storage_min <= self.storage_max <= st.max):
            raise GraphError(f"{where}: storage range [{self.storage_min}, {self.storage_max}] "
                             f"is not inside {st} [{st.min}, {st.max}]")
        if not np.all(np.isfinite(self.scales)) or np.any(self.scales <= 0):
            raise GraphError(f"{where}: every scale must be finite and > 0, got {self._sample(self.scales)}")
        bad_zp = (self.zero_points < self.storage_min) | (self.zero_points > self.storage_max)
        if np.any(bad_zp):
            raise GraphError(f"{where}: zero point {int(self.zero_points[bad_zp].flat[0])} is outside the "
                             f"storage range [{self.storage_min}, {self.storage_max}]")
        if self.scales.shape != self.zero_points.shape:
            raise GraphError(f"{where}: {self.scales.shape} scales but {self.zero_points.shape} zero points")
        rank = len(shape)
        if self.kind == "per_axis":
            if not -rank <= self.axis < rank or rank == 0:
                raise GraphError(f"{where}: quantization axis {self.axis} out of range for rank {rank}")
            axis = self.axis % rank
            if self.scales.shape != (shape[axis],):
                raise GraphError(f"{where}: per-axis type has {self.scales.size} scales but dimension "
                                 f"{axis} has size {shape[axis]}")
            object.__setattr__(self, "axis", axis)
        elif self.kind == "sub_channel":
            if len(self.block_sizes) != rank:
                raise GraphError(f"{where}: {len(self.block_sizes)} block sizes for a rank-{rank} tensor")
            for dim, (extent, block) in enumerate(zip(shape, self.block_sizes, strict=True)):
                if block <= 0 or extent % block:
                    raise GraphError(f"{where}: block size {block} does not divide dimension {dim} "
                                     f"(size {extent})")
            want = tuple(e // b for e, b in zip(shape, self.block_sizes, strict=True))
            if self.scales.shape != want:
                raise GraphError(f"{where}: sub-channel scales have shape {self.scales.shape}, "
                                 f"expected {want}")
        elif self.scales.shape != ():
            raise GraphError(f"{where}: per-tensor type needs one scale, got {self.scales.shape}")

    @staticmethod
    def _sample(values: np.ndarray) -> str:
        flat = values.reshape(-1)
        bad = flat[~(np.isfinite(flat) & (flat > 0))]
        return repr(float(bad[0])) if bad.size else repr(float(flat[0]))

    def describe(self) -> str:
        rng = ""
        if (self.storage_min, self.storage_max) != (self.storage.min, self.storage.max):
            rng = f"<{self.storage_min}:{self.storage_max}>"
        if self.kind == "per_tensor":
            return f"{self.storage}{rng} scale={self.scale:.6g} zp={self.zero_point}"
        return f"{self.storage}{rng} {self.kind} ({self.scales.size} scales)"


def same_type(a: QuantType, b: QuantType) -> bool:
    """Quantized type equality (MLIR's): storage, storage range, granularity, scales and zero points."""
    return (a.storage == b.storage and a.kind == b.kind and a.axis == b.axis and a.block_sizes == b.block_sizes
            and (a.storage_min, a.storage_max) == (b.storage_min, b.storage_max)
            and a.scales.shape == b.scales.shape and bool(np.all(a.scales == b.scales))
            and bool(np.all(a.zero_points == b.zero_points)))
