"""StableHLO quantization ops: uniform_quantize, uniform_dequantize, bitcast_convert, convert and MLIR's
quant.qcast / quant.dcast / quant.scast.

float -> quantized and quantized -> float are the model boundary: QUANTIZE / DEQUANTIZE (float C, the
interpreter's f32 formulas, docs/semantics.md §7.2; per tensor, per axis or sub-channel with per-block scales).
quantized -> quantized is a requantization (common.requantize: a lookup table of the interpreter's merged formula
for <= 16-bit storage -- of dequantize -> quantize for the requantizations QDQ folding made (attrs["from_qdq"]) --
and RESCALE_F32_AFFINE, the merged formula emulated exactly, for wider storage). Storage <->
quantized casts move the stored integers unchanged."""

from __future__ import annotations

from ...errors import UnsupportedError
from ...ir.graph import Op
from ..base import RULES, Lowerer, rule
from .common import copy, operands, requantize


@rule("stablehlo.uniform_quantize", "quant.qcast")
def lower_uniform_quantize(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    if y.quant is None:
        raise lw.error(f"result {y.name!r} must be quantized")
    if x.quant is None:
        RULES["quantize"](lw, op, nan_value=0)  # the StableHLO interpreter quantizes NaN to storage value 0
    else:
        requantize(lw, x.name, x.quant, y.name, y.quant, qdq=bool(lw.attr("from_qdq", False)))


@rule("stablehlo.uniform_dequantize", "quant.dcast")
def lower_uniform_dequantize(lw: Lowerer, op: Op) -> None:
    RULES["dequantize"](lw, op)


@rule("stablehlo.bitcast_convert", "quant.scast")
def lower_storage_cast(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    if x.dtype.bits != y.dtype.bits or x.dtype.is_float != y.dtype.is_float or x.shape != y.shape:
        raise UnsupportedError(f"{lw.label}: bitcast from {x.dtype} {list(x.shape)} to {y.dtype} {list(y.shape)} "
                               "(only between a quantized type and its storage type)")
    if x.dtype == y.dtype:
        copy(lw, x.name, y.name)
    else:
        lw.emit("CAST", [x.name], [y.name])


@rule("stablehlo.convert")
def lower_convert(lw: Lowerer, op: Op) -> None:
    (x,), (y,) = operands(lw, op, 1)
    if x.quant is not None or y.quant is not None or x.dtype.is_float or y.dtype.is_float:
        raise UnsupportedError(f"{lw.label}: convert from {x.dtype} to {y.dtype} at run time (integer <-> integer "
                               "only; float conversions of constants are folded at plan time)")
    lw.emit("CAST", [x.name], [y.name])
