"""RESCALE (TOSA 1.0 §RESCALE) with an optional fused output clamp and a per-channel axis (docs/semantics.md §3.6)."""

from __future__ import annotations

import numpy as np

from ..fixedpoint import Rounding, Unpredictable, apply_scale_16, apply_scale_32
from ..ir.rescale import RescaleParams
from ..ir.schedule import StepIO, Widening
from .base import Primitive, Ranges, register, require

_IN_TYPES = {"i8", "u8", "i16", "u16", "i32", "i48"}
_OUT_TYPES = {"i8", "u8", "i16", "u16", "i32"}


def _interpretation(dtype_name: str, unsigned_flag: bool) -> tuple[int, bool]:
    bits = int(dtype_name[1:])
    return bits, unsigned_flag or dtype_name.startswith("u")


def type_range(bits: int, unsigned: bool) -> tuple[int, int]:
    return (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _as_unsigned(lo: int, hi: int, bits: int) -> tuple[int, int]:
    """The range of the `bits`-bit patterns of values in [lo, hi] read as unsigned numbers."""
    if lo >= 0 or hi < 0:
        return lo % (1 << bits), hi % (1 << bits)
    return 0, (1 << bits) - 1


def _as_signed(lo: int, hi: int, bits: int) -> tuple[int, int]:
    """The range of unsigned values in [lo, hi] (< 2^bits) stored as `bits`-bit two's complement numbers."""
    half = 1 << (bits - 1)
    if hi < half or lo >= half:
        return (lo - 2 * half, hi - 2 * half) if lo >= half else (lo, hi)
    return -half, half - 1


def exception_list(exceptions: tuple[tuple[int, int, int], ...], lo: int, hi: int) -> dict[str, np.ndarray]:
    """(channel, accumulator, value) exceptions in channel order as three int32 arrays: exc_channel, exc_acc and
    exc_value (clamped to [lo, hi])."""
    ordered = sorted(exceptions)
    return {"exc_channel": np.array([c for c, _, _ in ordered], np.int32),
            "exc_acc": np.array([a for _, a, _ in ordered], np.int32),
            "exc_value": np.clip([v for _, _, v in ordered], lo, hi).astype(np.int32)}


def exception_arrays(exceptions: tuple[tuple[int, int, int], ...], channels: int, lo: int,
                     hi: int) -> dict[str, np.ndarray]:
    """The exceptions as the stores read them: exc_start[c] .. exc_start[c + 1] - 1 index channel c's accumulators
    (exc_acc) and values (exc_value; exception_list); {} without exceptions."""
    if not exceptions:
        return {}
    listed = exception_list(exceptions, lo, hi)
    counts = np.bincount(listed.pop("exc_channel"), minlength=channels)
    return {"exc_start": np.concatenate([[0], np.cumsum(counts)]).astype(np.int32), **listed}


@register
class Rescale(Primitive):
    """attrs: the fields of `RescaleParams` (qcodegen/ir/rescale.py), read through `typed`."""

    name = "RESCALE"
    inplace = True

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    @staticmethod
    def typed(io: StepIO) -> RescaleParams:
        return RescaleParams.from_attrs(io.attrs)

    @staticmethod
    def params(io: StepIO) -> dict:
        r = Rescale.typed(io)
        in_bits, in_unsigned = _interpretation(io.ins[0].dtype.name, r.input_unsigned)
        out_bits, out_unsigned = _interpretation(io.outs[0].dtype.name, r.output_unsigned)
        rank = len(io.ins[0].shape)
        axis = r.axis % rank if rank else 0
        lo, hi = type_range(out_bits, out_unsigned)
        lo = lo if r.out_min is None else max(lo, r.out_min)
        hi = hi if r.out_max is None else min(hi, r.out_max)
        return dict(in_bits=in_bits, in_unsigned=in_unsigned, out_bits=out_bits, out_unsigned=out_unsigned,
                    axis=axis, lo=lo, hi=hi, rounding=r.rounding, scale32=r.scale32, per_channel=r.per_channel)

    def check(self, io: StepIO) -> None:
        super().check(io)
        r, p = self.typed(io), self.params(io)
        x, y = io.ins[0], io.outs[0]
        require(x.dtype.name in _IN_TYPES, f"RESCALE: input type {x.dtype} is not one of {sorted(_IN_TYPES)}")
        require(y.dtype.name in _OUT_TYPES, f"RESCALE: output type {y.dtype} is not one of {sorted(_OUT_TYPES)}")
        for which, zp, bits, unsigned in (("input", r.input_zp, p["in_bits"], p["in_unsigned"]),
                                          ("output", r.output_zp, p["out_bits"], p["out_unsigned"])):
            if bits == 8:
                lo, hi = type_range(8, unsigned)
                require(lo <= zp <= hi, f"RESCALE: {which} zero point {zp} outside the {which} type")
            elif bits == 16 and unsigned:
                require(zp in (0, 32768), f"RESCALE: u16 {which} zero point must be 0 or 32768, got {zp}")
            else:
                require(zp == 0, f"RESCALE: {which} zero point must be 0 for {bits}-bit data, got {zp}")
        require(not (p["scale32"] and x.dtype.name == "i48"), "RESCALE: scale32 with an i48 input")
        require(p["scale32"] or p["rounding"] in (Rounding.SINGLE, Rounding.INEXACT),
                f"RESCALE: rounding {p['rounding'].value} needs scale32")
        require(not (p["in_unsigned"] and p["out_unsigned"]), "RESCALE: input and output both unsigned")
        require(not (p["in_unsigned"] and (p["out_bits"] == 32 or p["in_bits"] >= 32)),
                "RESCALE: unsigned input with a 32/48-bit input or an i32 output")
        require(not (p["out_unsigned"] and (p["in_bits"] >= 32 or p["out_bits"] == 32)),
                "RESCALE: unsigned output with a 32/48-bit input or an i32 output")
        require(not p["per_channel"] or len(x.shape) >= 1, "RESCALE: per_channel on a rank-0 tensor")
        channels = x.shape[p["axis"]] if p["per_channel"] else 1
        m, s = np.asarray(r.multiplier, np.int64), np.asarray(r.shift, np.int64)
        require(m.shape == (channels,) and s.shape == (channels,),
                f"RESCALE: {m.size} multipliers / {s.size} shifts for {channels} channel(s)")
        mmax = (1 << 31) - 1 if p["scale32"] else (1 << 15) - 1
        require(bool(np.all((m >= -mmax - 1) & (m <= mmax))), "RESCALE: multiplier outside its type")
        require(bool(np.all((s >= -128) & (s <= 127))), "RESCALE: shift outside int8")
        odd = self.odd_ties(io)
        require(r.odd_ties is None or (p["rounding"] is Rounding.HALF_EVEN and odd.size in (1, channels)
                                        and bool(np.all((odd == 0) | (odd == 1)))),
                f"RESCALE: odd_ties needs rounding half_even and one 0/1 value per channel, got {r.odd_ties}")
        require(p["lo"] <= p["hi"], f"RESCALE: empty output clamp [{p['lo']}, {p['hi']}]")
        require(not r.exceptions or (x.dtype.name == "i32" and p["scale32"] and p["rounding"] is Rounding.SINGLE
                                     and all(0 <= c < channels for c, _, _ in r.exceptions)),
                "RESCALE: exceptions need an i32 input, scale32, rounding single_round and channels in range")
        if np.any(m < 0) or np.any((s < 2) | (s > 62)):
            raise Unpredictable("RESCALE: multiplier must be >= 0 and shift in [2, 62] (TOSA REQUIRE)")

    @staticmethod
    def odd_ties(io: StepIO) -> np.ndarray:
        return np.asarray(Rescale.typed(io).ties_to_odd, np.int64)

    def _apply(self, io: StepIO, v: np.ndarray, channel_axis: int | None) -> np.ndarray:
        t, p = self.typed(io), self.params(io)
        m = np.asarray(t.multiplier, np.int64)
        s = np.asarray(t.shift, np.int64)
        if p["per_channel"] and channel_axis is not None:
            view = [1] * v.ndim
            view[channel_axis] = m.size
            m, s = m.reshape(view), s.reshape(view)
        else:  # one scale: scalars keep the value's shape (rank 0 included)
            m, s = m.reshape(-1)[0], s.reshape(-1)[0]
        odd = self.odd_ties(io)
        if p["per_channel"] and channel_axis is not None:
            odd = odd.reshape(view) if odd.size > 1 else odd[0]
        else:
            odd = odd[0]
        if p["scale32"]:
            r = apply_scale_32(v, m, s, p["rounding"], odd_ties=odd)
        else:
            r = apply_scale_16(v, m, s)
        r = r + t.output_zp
        if np.any((r < -(1 << 31)) | (r > (1 << 31) - 1)):
            raise Unpredictable("RESCALE: adding the output zero point overflows int32 (TOSA REQUIRE)")
        if t.exceptions:
            r = self._except(t, v, np.array(r, np.int64), channel_axis if p["per_channel"] else None)
        return np.clip(r, p["lo"], p["hi"])

    @staticmethod
    def _except(t: RescaleParams, v: np.ndarray, r: np.ndarray, channel_axis: int | None) -> np.ndarray:
        """r with the value of each exception where the input of its channel equals its accumulator."""
        for channel, acc, value in t.exceptions:
            at: list[slice | int] = [slice(None)] * r.ndim
            if channel_axis is not None:
                at[channel_axis] = channel
            view = r[tuple(at)] if r.ndim else r
            view[np.broadcast_to(v, r.shape)[tuple(at)] == acc] = value
        return r

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        p = self.params(io)
        v = args[0].astype(np.int64)
        if p["in_unsigned"]:
            v &= (1 << p["in_bits"]) - 1
        v = v - self.typed(io).input_zp
        r = self._apply(io, v, p["axis"])
        if p["out_unsigned"] and io.outs[0].dtype.signed:  # the unsigned bit pattern in a signed container
            r = r.astype(np.dtype(f"uint{p['out_bits']}")).view(io.outs[0].dtype.numpy)
        return [r]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        p = self.params(io)
        lo, hi = in_ranges[0]
        if p["in_unsigned"]:
            lo, hi = _as_unsigned(lo, hi, p["in_bits"])
        ends = np.array([[lo], [hi]], np.int64) - self.typed(io).input_zp
        widened = None
        try:
            r = self._apply(io, ends, 1)  # rows: low/high input, columns: channels (monotone per channel)
            out = (int(r.min()), int(r.max()))
        except Unpredictable as exc:  # a data-dependent REQUIRE: the C (int64, clamped) stays in [lo, hi]
            out = (p["lo"], p["hi"])
            widened = Widening(f"RESCALE: inputs in [{lo}, {hi}]: {exc}", (lo, hi))
        if p["out_unsigned"] and io.outs[0].dtype.signed:
            out = _as_signed(*out, p["out_bits"])  # the bit patterns stored in the signed container
        return Ranges([out], widened=widened)

    def constants(self, io: StepIO) -> dict[str, np.ndarray]:
        if not self.params(io)["per_channel"]:
            return self.exception_arrays(io)
        mtype = np.int32 if self.params(io)["scale32"] else np.int16
        t = self.typed(io)
        consts = {"multiplier": np.asarray(t.multiplier, mtype), "shift": np.asarray(t.shift, np.int8)}
        odd = self.odd_ties(io)
        if len(set(odd.tolist())) > 1:
            consts["odd_ties"] = odd.astype(np.int8)
        return consts | self.exception_arrays(io)

    def exception_arrays(self, io: StepIO) -> dict[str, np.ndarray]:
        t, p = self.typed(io), self.params(io)
        return exception_arrays(t.exceptions, len(t.multiplier), p["lo"], p["hi"])

    def template_context(self, io: StepIO) -> dict:
        t, p = self.typed(io), self.params(io)
        shape = io.ins[0].shape
        axis = p["axis"] if p["per_channel"] else len(shape)
        outer = int(np.prod(shape[:axis], dtype=np.int64))
        channels = shape[axis] if p["per_channel"] else 1
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64)) if p["per_channel"] else 1
        odd = self.odd_ties(io)
        half_even = ("qc_scale32_half_parity" if len(set(odd.tolist())) > 1 else
                     "qc_scale32_half_odd" if odd[0] else "qc_scale32_half_even")
        func = {Rounding.SINGLE: "qc_scale32_single", Rounding.INEXACT: "qc_scale32_single",
                Rounding.DOUBLE: "qc_scale32_double", Rounding.HALF_EVEN: half_even}
        fn = func[p["rounding"]] if p["scale32"] else "qc_scale16"
        if fn == "qc_scale32_double" and min(t.shift) > 31:
            fn = "qc_scale32_double_gt31"  # the same function without the branch on the shift
        return dict(p, outer=outer, channels=channels, inner=inner, scale_fn=fn, exceptions=bool(t.exceptions),
                    in_ctype="uint" if p["in_unsigned"] else "int",
                    multiplier=t.multiplier[0], shift=t.shift[0])
