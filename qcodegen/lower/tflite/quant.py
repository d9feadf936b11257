"""TFLite's MultiplyByQuantizedMultiplier as RESCALE steps (the arithmetic itself: qcodegen/semantics/tflite.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UnsupportedError
from ...fixedpoint import Rounding
from ...ir.rescale import RescaleParams
from ...ir.schedule import Step
from ...semantics.tflite import Pair, tosa_scale16, tosa_scale32
from ..base import Lowerer


def emit_mbqm(lw: Lowerer, src: str, dst: str, pairs: list[Pair], input_zp: int = 0, output_zp: int = 0,
              bounds: tuple[int, int] | None = None, wide: bool = False, value_bound: int | None = None) -> Step:
    """RESCALE src -> dst computing clamp(MBQM(x - input_zp, m, s) + output_zp) with TFLite's (m, s): one pair,
    or one per channel of the last axis. wide=True: the 16x8 kernels' int64 MultiplyByQuantizedMultiplier
    (16-bit multipliers, i48 input).

    value_bound (|x - input_zp| can reach it): when TOSA's value REQUIRE of a shift <= 31 (TFLite exponent
    s >= 0: |x| < 2^(30 - s)) could fail, MBQM is computed as MUL(x, m, shift 31 - s) instead (TFLite's single
    rounding for s >= 0, no REQUIRE on x), then + output_zp, CLAMP and CAST."""
    if value_bound is not None and len(pairs) == 1 and not wide and pairs[0][0] and pairs[0][1] >= 0 and \
            value_bound >= 1 << (30 - pairs[0][1]):
        return _mbqm_by_mul(lw, src, dst, pairs[0], input_zp, output_zp, bounds)
    tosa = [tosa_scale16(p) if wide else tosa_scale32(p) for p in pairs]
    extra: dict[str, Any] = {} if bounds is None else dict(out_min=int(bounds[0]), out_max=int(bounds[1]))
    return lw.emit_rescale(src, dst, RescaleParams(multiplier=[m for m, _ in tosa], shift=[s for _, s in tosa],
                                                   input_zp=int(input_zp), output_zp=int(output_zp), scale32=not wide,
                                                   rounding=(Rounding.SINGLE if wide else Rounding.DOUBLE).value,
                                                   per_channel=len(pairs) > 1, **extra))


def _mbqm_by_mul(lw: Lowerer, src: str, dst: str, pair: Pair, input_zp: int, output_zp: int,
                 bounds: tuple[int, int] | None) -> Step:
    """MBQM for exponent s >= 0 (single rounding): TOSA MUL(x, m) with shift 31 - s, in i32."""
    m, s = pair
    if s > 31:
        raise UnsupportedError(f"{lw.label}: TFLite multiplier exponent {s} overflows int32")
    buf, out = lw.schedule.buffers[src], lw.buffer(dst)
    ones = (1,) * len(buf.shape)
    if input_zp:  # x - zp in i32, exactly: scale 1.0 = (2^30, 30) with |x - zp| < 2^29
        wide = lw.temp(f"{src}_i32", buf.shape, "i32")
        lw.emit_rescale(src, wide, RescaleParams(multiplier=[1 << 30], shift=[30], input_zp=int(input_zp), output_zp=0))
        src = wide
    elif buf.dtype.name != "i32":
        wide = lw.temp(f"{src}_i32", buf.shape, "i32")
        lw.emit("CAST", [src], [wide])
        src = wide
    scaled = lw.temp(f"{dst}_mbqm", buf.shape, "i32")
    lw.emit("MUL", [src, lw.const(f"{dst}_m", np.full(ones, m), "i32")], [scaled], shift=31 - s)
    if output_zp:
        shifted = lw.temp(f"{dst}_zp", buf.shape, "i32")
        lw.emit("ADD", [scaled, lw.const(f"{dst}_ozp", np.full(ones, output_zp), "i32")], [shifted])
        scaled = shifted
    lo, hi = bounds if bounds is not None else (out.dtype.min, out.dtype.max)
    if out.dtype.name == "i32":
        return lw.emit("CLAMP", [scaled], [dst], min_val=int(lo), max_val=int(hi))
    clamped = lw.temp(f"{dst}_clamp", buf.shape, "i32")
    lw.emit("CLAMP", [scaled], [clamped], min_val=int(lo), max_val=int(hi))
    return lw.emit("CAST", [clamped], [dst])
