"""SOFTMAX (qcodegen extension; TOSA has no softmax): TFLite Micro's quantized softmax along the last axis,
reference_ops::Softmax (int8 input) and reference_ops::SoftmaxInt16 (int16 input). Per row, mx = max(x).

int8 input: inputs [x (i8), exp_table (i32 [256], constant)]; output i8 or i16; no attributes.
exp_table[k] is the Q0.31 exp of the scaled difference -k (gemmlowp exp_on_negative_values of
MultiplyByQuantizedMultiplierGreaterThanOne(-k)), 0 where TFLM skips the element (-k < diff_min); the lowering
computes it at plan time. With e = exp_table[mx - x]:
    sum = sum over the row of RDBPOT(e, 12)                  (Q12.19, int32 accumulator)
    recip, nb = GetReciprocal(sum, 12)                       (Q0.31 in [1/2, 1), bits over unit)
    out = clamp(RDBPOT(SRDHM(recip, e), nb + 31 - bits) + type_min)
A skipped element (e = 0) gives type_min, as in TFLM. Where TFLM aborts (exponent > 31: i8 output with
sum >= 2^28, i.e. rows of 512 or more near-equal values) this primitive still rounds by the larger power of two.

int16 input: inputs [x (i16), exp_lut, recip_lut (i16 [513], constant)]; output i16; attrs multiplier, shift
(TFLite's pair for MultiplyByQuantizedMultiplier). LUT = tflite::LUTLookup (7 fraction bits, rounded slope):
    e = LUT(exp_lut, clamp16(MBQM(x - mx, multiplier, shift) + 32767));  sum = sum of e over the row (int32)
    h = clz32(sum);  r = LUT(recip_lut, clamp16((((sum << (h - 1)) + 2^13) >> 14) - 3 * 2^15))
    out = clamp(((e * r + 2^(30 - h)) >> (31 - h)), 0, 32767)
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphError, PlanError
from ..ir.schedule import CONST, Buffer, StepIO
from ..semantics import tflm_fixedpoint as fp
from .base import Primitive, Ranges, register, require

ACC_INTEGER_BITS = 12
TABLE_SIZE = 256
LUT16_SIZE = 513


def softmax_rows(x: np.ndarray, exp_table: np.ndarray, out_bits: int) -> np.ndarray:
    """The int8-input result over the last axis of int64 `x`."""
    e = np.asarray(exp_table, np.int64)[x.max(axis=-1, keepdims=True) - x]
    total = fp.rescale(e, 0, ACC_INTEGER_BITS).sum(axis=-1, keepdims=True)
    recip, bits_over_unit = fp.get_reciprocal(total, ACC_INTEGER_BITS)
    low = -(1 << (out_bits - 1))
    out = fp.rdbpot(fp.srdhm(recip, e), bits_over_unit + 31 - out_bits) + low
    return np.clip(out, low, -low - 1)


def softmax16_rows(x: np.ndarray, exp_lut: np.ndarray, recip_lut: np.ndarray, multiplier: int,
                   shift: int) -> np.ndarray:
    """The int16-input result over the last axis of int64 `x`."""
    scaled = fp.multiply_by_quantized_multiplier(x - x.max(axis=-1, keepdims=True), multiplier, shift)
    e = fp.lut_lookup16(np.clip(scaled + fp.I16_MAX, fp.I16_MIN, fp.I16_MAX), exp_lut)
    total = e.sum(axis=-1, keepdims=True)
    headroom_plus_one = fp.count_leading_zeros32(total)
    normalized = ((total << (headroom_plus_one - 1)) + (1 << 13)) >> 14
    recip = fp.lut_lookup16(np.clip(normalized - 3 * (1 << 15), fp.I16_MIN, fp.I16_MAX), recip_lut)
    right = 31 - headroom_plus_one
    return np.clip((e * recip + (np.int64(1) << (right - 1))) >> right, 0, fp.I16_MAX)


def _constant(table: Buffer, what: str, dtype: str, size: int) -> None:
    require(table.dtype.name == dtype and table.shape == (size,),
            f"SOFTMAX: {what} must be {dtype} [{size}], got {table.dtype} {list(table.shape)}")
    if table.kind != CONST or table.data is None:
        raise GraphError(f"SOFTMAX: {what} must be a constant")


@register
class Softmax(Primitive):
    """inputs: [x, exp_table] (i8 x) or [x, exp_lut, recip_lut] (i16 x, attrs multiplier, shift)."""

    name = "SOFTMAX"

    def infer_shapes(self, io: StepIO) -> list[tuple[int, ...]]:
        return [io.ins[0].shape]

    @staticmethod
    def wide(io: StepIO) -> bool:
        return io.ins[0].dtype.name == "i16"

    @staticmethod
    def input_scale(io: StepIO) -> tuple[int, int]:
        """The (multiplier, shift) of the int16 form's input differences ((0, 0) for int8, which has none)."""
        return int(io.attrs.get("multiplier", 0)), int(io.attrs.get("shift", 0))

    def check(self, io: StepIO) -> None:
        require(len(io.outs) == 1 and len(io.ins) == (3 if self.wide(io) else 2),
                "SOFTMAX: needs inputs [x, exp_table] (int8) or [x, exp_lut, recip_lut] (int16) and 1 output")
        super().check(io)
        x, y = io.ins[0], io.outs[0]
        require(x.dtype.name in ("i8", "i16"), f"SOFTMAX: input type {x.dtype} is not i8 or i16")
        require(len(x.shape) >= 1 and x.size > 0, f"SOFTMAX: input shape {list(x.shape)} has no last axis")
        if self.wide(io):
            require(y.dtype.name == "i16", f"SOFTMAX: int16 input gives int16 output, got {y.dtype}")
            _constant(io.ins[1], "exp_lut", "i16", LUT16_SIZE)
            _constant(io.ins[2], "recip_lut", "i16", LUT16_SIZE)
            lut = io.ins[1].data.astype(np.int64)
            require(bool(np.all(lut >= 0)) and int(fp.lut_lookup16(fp.I16_MAX, lut)) > 0,
                    "SOFTMAX: exp_lut must be non-negative and positive at 0 (the row maximum)")
            require("multiplier" in io.attrs and "shift" in io.attrs, "SOFTMAX: int16 needs multiplier and shift")
            m, s = self.input_scale(io)
            require(0 <= m <= fp.I32_MAX and -31 <= s <= 30, f"SOFTMAX: multiplier {m} / shift {s} out of range")
            return
        require(y.dtype.name in ("i8", "i16"), f"SOFTMAX: output type {y.dtype} is not i8 or i16")
        _constant(io.ins[1], "exp_table", "i32", TABLE_SIZE)
        table = io.ins[1].data
        require(bool(np.all(table >= 0)), "SOFTMAX: exp_table entries must be non-negative Q0.31 values")
        require(int(table[0]) > 0, "SOFTMAX: exp_table[0] (the row maximum) must be positive")

    def reference(self, io: StepIO, args: list[np.ndarray]) -> list[np.ndarray]:
        x = args[0].astype(np.int64)
        if self.wide(io):
            return [softmax16_rows(x, args[1], args[2], *self.input_scale(io))]
        return [softmax_rows(x, args[1], io.outs[0].dtype.bits)]

    def value_ranges(self, io: StepIO, in_ranges: list[tuple[int, int]]) -> Ranges:
        depth = io.ins[0].shape[-1]
        if self.wide(io):
            lut = io.ins[1].data.astype(np.int64)
            acc = (int(fp.lut_lookup16(fp.I16_MAX, lut)), depth * int(lut.max()))  # the maximum: d = 0
            out = (0, fp.I16_MAX)
        else:
            terms = fp.rescale(io.ins[1].data.astype(np.int64), 0, ACC_INTEGER_BITS)
            acc = (int(terms[0]), depth * int(terms.max()))  # the maximum contributes terms[0] > 0
            out = (io.outs[0].dtype.min, io.outs[0].dtype.max)
        if acc[1] > fp.I32_MAX:
            raise PlanError(f"SOFTMAX: a row of {depth} values can overflow the int32 sum of exponentials "
                            f"(bound {acc[1]})")
        return Ranges([out], acc=acc)

    def macs(self, io: StepIO) -> int:
        return io.ins[0].size

    def template_context(self, io: StepIO) -> dict:
        depth = io.ins[0].shape[-1]
        y = io.outs[0].dtype
        multiplier, shift = self.input_scale(io)
        return dict(rows=io.ins[0].size // depth, depth=depth, acc_bits=ACC_INTEGER_BITS, wide=self.wide(io),
                    exponent_offset=31 - y.bits, lo=y.min, hi=y.max, multiplier=multiplier, left=max(shift, 0),
                    right=max(-shift, 0))
