"""quantize (f32 -> q) and dequantize (q -> f32): one QUANTIZE / DEQUANTIZE step, per tensor, per axis or per
block (sub-channel: the block grid of scales and zero points, indexed per element in the C)."""

from __future__ import annotations

from ...ir.graph import Op
from ..base import Lowerer, rule
from ..common import quant_attrs


def _operands(lw: Lowerer, float_side: str) -> tuple[str, str]:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    f = x if float_side == "input" else y
    if f.dtype.name != "f32":
        raise lw.error(f"{float_side} {f.name!r} must be f32, got {f.dtype}")
    if x.shape != y.shape:
        raise lw.error(f"output shape {list(y.shape)} differs from input shape {list(x.shape)}")
    return x.name, y.name


@rule("quantize")
def lower_quantize(lw: Lowerer, op: Op, nan_value: int | None = None) -> None:
    """`nan_value`: the storage value a NaN input becomes (default: the storage minimum)."""
    src, dst = _operands(lw, "input")
    q = lw.quant_out(0, per_tensor=False)
    extra = {} if nan_value is None else {"nan_value": nan_value}
    lw.emit("QUANTIZE", [src], [dst], qmin=q.storage_min, qmax=q.storage_max, **quant_attrs(q), **extra)


@rule("dequantize")
def lower_dequantize(lw: Lowerer, op: Op) -> None:
    src, dst = _operands(lw, "output")
    q = lw.quant_in(0, per_tensor=False)
    lw.emit("DEQUANTIZE", [src], [dst], **quant_attrs(q))
