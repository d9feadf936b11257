"""A QDQ model's bilinear or bicubic Resize (onnx.ResizeInterpolate on quantized data,
qcodegen/frontends/onnx_ops_gather.py) -> RESIZE_F32: onnxruntime runs it in float between DequantizeLinear and
QuantizeLinear, each float32 operation of which RESIZE_F32 emulates (exact)."""

from __future__ import annotations

from ...ir.graph import Op
from ..base import Lowerer, rule
from .common import require_f32_path_scales


@rule("onnx.ResizeInterpolate")
def lower_resize_linear(lw: Lowerer, op: Op) -> None:
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    qx, qy = lw.quant_in(0), lw.quant_out(0)
    require_f32_path_scales(lw, [x, y])
    weights = {key: lw.attr(key) for key in ("form", "ys", "xs", "wy", "wx", "y_div") if key in op.attrs}
    lw.emit("RESIZE_F32", [x.name], [y.name], axis=int(lw.attr("axis")), in_scale=qx.scale, in_zp=qx.zero_point,
            out_scale=qy.scale, out_zp=qy.zero_point, qmin=qy.storage_min, qmax=qy.storage_max, **weights)
