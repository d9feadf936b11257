"""The parameters of one RESCALE step (docs/semantics.md §3.6), typed. Steps keep TOSA's attribute names in
their attrs (the JSON/TOSA boundary and the inspect/report output); readers go through `RescaleParams`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..fixedpoint import Rounding


def _ints(values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in (values if hasattr(values, "__iter__") else [values]))


@dataclass(frozen=True)
class RescaleParams:
    """multiplier/shift: one entry, or one per channel along `axis`; out_min/out_max: a fused output clamp in
    the interpreted output domain (None: the output type's bound); odd_ties (rounding half_even only, 0/1 like
    the multiplier; None: the parity of output_zp): the ties of the scaled value go to the odd neighbour where 1,
    so that the value after an odd zero point is the even one; exceptions ((channel, accumulator, value) triples,
    rounding single and an i32 input only): where the input of `channel` equals `accumulator`, the value before the
    output clamp is `value` instead (a float32 requantization's exceptions to single rounding, docs/semantics.md
    §14.5)."""

    multiplier: tuple[int, ...]
    shift: tuple[int, ...]
    input_zp: int
    output_zp: int
    scale32: bool = True
    rounding: Rounding = Rounding.SINGLE
    per_channel: bool = False
    axis: int = -1
    input_unsigned: bool = False
    output_unsigned: bool = False
    out_min: int | None = None
    out_max: int | None = None
    odd_ties: tuple[int, ...] | None = None
    exceptions: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self) -> None:
        # normalise what callers pass (lists, numpy integers, rounding names) so equal parameters compare equal
        object.__setattr__(self, "multiplier", _ints(self.multiplier))
        object.__setattr__(self, "shift", _ints(self.shift))
        object.__setattr__(self, "input_zp", int(self.input_zp))
        object.__setattr__(self, "output_zp", int(self.output_zp))
        object.__setattr__(self, "rounding", Rounding.parse(self.rounding))
        if self.odd_ties is not None:
            object.__setattr__(self, "odd_ties", _ints(self.odd_ties))
        object.__setattr__(self, "exceptions", tuple(tuple(int(v) for v in e) for e in self.exceptions))

    @property
    def ties_to_odd(self) -> tuple[int, ...]:
        """odd_ties with its default (the parity of the output zero point)."""
        return self.odd_ties if self.odd_ties is not None else (self.output_zp % 2,)

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> RescaleParams:
        odd = attrs.get("odd_ties")
        return cls(multiplier=attrs["multiplier"], shift=attrs["shift"], input_zp=attrs["input_zp"],
                   output_zp=attrs["output_zp"], scale32=bool(attrs.get("scale32", True)),
                   rounding=attrs.get("rounding", "single_round"), per_channel=bool(attrs.get("per_channel", False)),
                   axis=int(attrs.get("axis", -1)), input_unsigned=bool(attrs.get("input_unsigned", False)),
                   output_unsigned=bool(attrs.get("output_unsigned", False)), out_min=attrs.get("out_min"),
                   out_max=attrs.get("out_max"), odd_ties=None if odd is None else odd,
                   exceptions=attrs.get("exceptions", ()))

    def to_attrs(self) -> dict[str, Any]:
        """The step attributes under TOSA's names; the optional ones only where they differ from their default."""
        attrs: dict[str, Any] = dict(multiplier=list(self.multiplier), shift=list(self.shift), input_zp=self.input_zp,
                                     output_zp=self.output_zp, scale32=self.scale32, rounding=self.rounding.value,
                                     per_channel=self.per_channel, axis=self.axis)
        optional = dict(input_unsigned=self.input_unsigned or None, output_unsigned=self.output_unsigned or None,
                        out_min=self.out_min, out_max=self.out_max,
                        odd_ties=None if self.odd_ties is None else list(self.odd_ties),
                        exceptions=[list(e) for e in self.exceptions] or None)
        return attrs | {k: v for k, v in optional.items() if v is not None}
