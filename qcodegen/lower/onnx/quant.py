"""ONNX QuantizeLinear / DequantizeLinear -> QUANTIZE / DEQUANTIZE (the float boundary of a model).

QuantizeLinear is saturate(round_half_even(x / scale) + zero_point), the division in float32 and the zero point
added after rounding (ONNX's definition, and onnxruntime's MLAS: clamp x / scale to [qmin - zp, qmax - zp], round,
add zp): QUANTIZE with zero_point_after_rounding. DequantizeLinear is (x - zero_point) * scale: DEQUANTIZE, the
subtraction in integers, one float32 multiply. Per tensor, per axis and blocked (block_size) parameters.
"""

from __future__ import annotations

import numpy as np

from ...ir.graph import Op
from ...ir.rescale import RescaleParams
from ...semantics.onnxruntime import unary_table
from ..base import Lowerer, rule
from ..common import quant_attrs
from .tables import table


@rule("onnx.QuantizeLinear")
def lower_quantize_linear(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    q = lw.quant_out(0, per_tensor=False)
    lw.emit("QUANTIZE", [x.name], [y.name], qmin=q.storage_min, qmax=q.storage_max, zero_point_after_rounding=True,
            **quant_attrs(q))


@rule("onnx.DequantizeLinear")
def lower_dequantize_linear(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    lw.emit("DEQUANTIZE", [x.name], [y.name], **quant_attrs(lw.quant_in(0, per_tensor=False)))


@rule("onnx.Rebase")
def lower_rebase(lw: Lowerer, op: Op) -> None:
    """uint8 <-> int8 (uint16 <-> int16) storage of the same values (qcodegen/frontends/onnx_unsigned.py): q - 128 or
    q + 128 (32768), a RESCALE by 1 (multiplier 2^30, shift 30: exact) with zero point 128 (32768) on the unsigned
    side."""
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    unsigned_in = x.dtype.name.startswith("u")
    offset = 1 << (x.dtype.bits - 1)
    lw.emit_rescale(x.name, y.name, RescaleParams(multiplier=[1 << 30], shift=[30], input_zp=offset if unsigned_in
                                                  else 0, output_zp=0 if unsigned_in else offset))


@rule("onnx.Requantize")
def lower_requantize(lw: Lowerer, op: Op) -> None:
    """A QDQ model's dequantize -> [clamp] -> quantize on 8- or 16-bit data (qcodegen/frontends/onnx_qdq.py):
    onnxruntime runs the float ops, so the result is a function of the stored value, a table of its float32
    arithmetic (exact; 256 or 65,536 entries). Relu and Clip give the float bounds min / max."""
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    if x.dtype.bits not in (8, 16) or y.dtype.bits not in (8, 16):
        raise lw.error(f"requantization of {x.dtype} {x.name!r} to {y.dtype} (supported: 8- and 16-bit data)")
    lo, hi = np.float32(lw.attr("min", -np.inf)), np.float32(lw.attr("max", np.inf))
    table(lw, x, unary_table(x.quant, y.quant, lambda v: np.clip(v, lo, hi)), y.name, y.dtype)
