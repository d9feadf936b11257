"""MLIR types -> qcodegen types, and the StableHLO verifier rules on quantized types that qcodegen relies on.

`convert_type` validates a `!quant.uniform` type as MLIR's quant dialect and StableHLO do (scale inside the
expressed type's range, zero point inside the storage range, quantized dimension inside the rank, one scale
per element of that dimension) and raises GraphError; element types qcodegen cannot compile raise
UnsupportedError *after* that validation. `verify_op` checks the op-level constraints of the StableHLO spec on
quantized operands (per-axis quantization only where the spec allows it, matching baseline types, the
reshape/transpose/broadcast_in_dim, convolution and dot_general quantization constraints) and raises GraphError
naming the source position. Dynamic and unranked shapes pass verification and are rejected afterwards as
unsupported (`require_static`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import GraphError, UnsupportedError
from ..ir.dtypes import DType, dtype
from ..ir.quant import QuantType
from .mlir import ast
from .mlir.types import FloatType, IntegerType, TensorType, Type, UniformQuantType

# smallest positive (subnormal) and largest finite value of each expressed type (MLIR's scale range)
_FLOAT_RANGE = {"f16": (2.0 ** -24, 65504.0), "bf16": (2.0 ** -133, 3.3895313892515355e38),
                "f32": (2.0 ** -149, 3.4028234663852886e38), "f64": (5e-324, 1.7976931348623157e308)}
_INT_DTYPES = {("signless", 4): "i4", ("signless", 8): "i8", ("signless", 16): "i16", ("signless", 32): "i32",
               ("signless", 64): "i64", ("signed", 4): "i4", ("signed", 8): "i8", ("signed", 16): "i16",
               ("signed", 32): "i32", ("unsigned", 4): "u4", ("unsigned", 8): "u8", ("unsigned", 16): "u16"}
# ops whose operands or results may be per-axis quantized (StableHLO's HLO_TensorOrPerAxisQuantizedTensor)
PER_AXIS_OPS = {"stablehlo.uniform_quantize", "stablehlo.uniform_dequantize", "stablehlo.add",
                "stablehlo.bitcast_convert", "stablehlo.broadcast_in_dim", "stablehlo.constant",
                "stablehlo.convolution", "stablehlo.dot_general", "stablehlo.reshape", "stablehlo.transpose",
                "stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_reshape", "stablehlo.get_dimension_size",
                "stablehlo.custom_call", "stablehlo.outfeed", "stablehlo.send", "stablehlo.tuple", "func.return",
                "quant.qcast", "quant.dcast", "quant.scast"}
# element-wise ops whose quantized operands and result must share one baseline type (storage, expressed type)
ELEMENTWISE = {"abs", "add", "atan2", "cbrt", "ceil", "cosine", "divide", "exponential", "exponential_minus_one",
               "floor", "log", "log_plus_one", "logistic", "maximum", "minimum", "multiply", "negate", "power",
               "remainder", "round_nearest_afz", "round_nearest_even", "rsqrt", "sign", "sine", "sqrt", "subtract",
               "tan", "tanh", "clamp", "select"}


@dataclass(frozen=True)
class TensorT:
    """A converted tensor type. shape None: unranked; a None dimension: dynamic."""

    shape: tuple[int | None, ...] | None
    element: Type  # the MLIR element type (IntegerType, FloatType or UniformQuantType)
    dtype: DType | None  # None when qcodegen has no such element type (rejected by require_supported)
    quant: QuantType | None

    @property
    def quantized(self) -> bool:
        return isinstance(self.element, UniformQuantType)

    @property
    def per_axis(self) -> bool:
        return self.quantized and self.element.axis is not None

    @property
    def static(self) -> bool:
        return self.shape is not None and None not in self.shape

    def describe(self) -> str:
        dims = "*x" if self.shape is None else "".join(f"{'?' if d is None else d}x" for d in self.shape)
        return f"tensor<{dims}{self.element}>"


def _element_dtype(element: Type) -> DType | None:
    if isinstance(element, UniformQuantType):
        element = element.storage
    if isinstance(element, IntegerType):
        if element.width == 1:
            return dtype("bool")
        name = _INT_DTYPES.get((element.signedness, element.width))
        return dtype(name) if name else None
    if isinstance(element, FloatType) and element.name == "f32":
        return dtype("f32")
    return None


def _check_quant(q: UniformQuantType, shape: tuple[int | None, ...] | None, where: str) -> None:
    if q.storage.signedness == "signed":
        raise GraphError(f"{where}: quantized storage type {q.storage} is not a StableHLO storage type (use signless "
                         f"i{q.storage.width} or unsigned u{q.storage.width})")
    low, high = _FLOAT_RANGE.get(q.expressed.name, (0.0, math.inf))
    for scale in q.scales:
        if not (math.isfinite(scale) and scale > 0):
            raise GraphError(f"{where}: illegal scale: {scale}")
        if not low <= scale <= high:
            raise GraphError(f"{where}: scale {scale:e} out of expressed type range [{low:e}, {high:e}]")
    for zp in q.zero_points:
        if not q.storage.min_value <= zp <= q.storage.max_value:
            raise GraphError(f"{where}: illegal zero point {zp}: outside the {q.storage} storage range")
    rank = None if shape is None else len(shape)
    if q.axis is not None:
        if q.axis < 0:
            raise GraphError(f"{where}: illegal quantized dimension: {q.axis}")
        if rank is not None and q.axis >= rank:
            raise GraphError(f"{where}: quantized dimension {q.axis} must be less than the tensor rank {rank}")
        if rank is not None and shape[q.axis] is not None and shape[q.axis] != len(q.scales):
            raise GraphError(f"{where}: quantized dimension {q.axis} has size {shape[q.axis]} but the type has "
                             f"{len(q.scales)} scales")
    for dim, block in q.block_sizes:
        if dim < 0 or (rank is not None and dim >= rank) or block <= 0:
            raise GraphError(f"{where}: illegal sub-channel block {dim}:{block} for a rank-{rank} tensor")


def _quant_type(q: UniformQuantType, dt: DType, shape: tuple[int, ...] | None) -> QuantType | None:
    blocks = None
    if q.block_sizes:
        if shape is None or None in shape:
            return None
        sizes = dict(q.block_sizes)
        blocks = tuple(sizes.get(d, extent) for d, extent in enumerate(shape))
    scales = np.asarray(q.scales, np.float64).reshape(q.scales_shape)
    zps = np.asarray(q.zero_points, np.int64).reshape(q.scales_shape)
    return QuantType(dt, scales, zps, axis=q.axis, block_sizes=blocks, storage_min=q.storage_min,
                     storage_max=q.storage_max)


def convert_type(t: Type, where: str) -> TensorT:
    """A tensor type (or a scalar element type, read as rank 0), validated."""
    shape: tuple[int | None, ...] | None = ()
    element = t
    if isinstance(t, TensorType):
        shape, element = t.shape, t.element
    dt = _element_dtype(element)
    quant = None
    if isinstance(element, UniformQuantType):
        _check_quant(element, shape, where)
        if dt is not None:
            quant = _quant_type(element, dt, shape)
            if quant is not None and shape is not None and None not in shape:
                quant.validate(shape, where)
    return TensorT(shape, element, dt, quant)


def require_supported(t: TensorT, where: str) -> None:
    """UnsupportedError unless qcodegen can hold values of this type (static shape, known element type)."""
    if not t.static:
        raise UnsupportedError(f"{where}: dynamic or unranked tensors are not supported ({t.describe()})")
    if t.dtype is None:
        raise UnsupportedError(f"{where}: element type {t.element} is not supported")
    if t.quantized and t.element.expressed.name != "f32":
        raise UnsupportedError(f"{where}: quantized types expressed in {t.element.expressed} are not supported "
                               "(f32 only)")
    if t.quantized and t.quant is None:
        raise UnsupportedError(f"{where}: quantized type {t.element} is not supported")


# ----------------------------------------------------------------------------------------------- op rules


@dataclass
class OpView:
    """What the op rules see: the op, its converted operand and result types, and where it is."""

    op: ast.Operation
    operands: list[TensorT]
    results: list[TensorT]
    where: str

    @property
    def short(self) -> str:
        return self.op.name.split(".", 1)[-1]

    def fail(self, message: str) -> GraphError:
        return GraphError(f"{self.where}: '{self.op.name}' op {message}")

    def int_attr(self, name: str, default: int) -> int:
        a = self.op.attr(name)
        return a.value if isinstance(a, ast.IntegerAttr) else default

    def ints(self, name: str) -> tuple[int, ...]:
        a = self.op.attr(name)
        try:
            return ast.int_list(a) if a is not None else ()
        except TypeError:
            raise self.fail(f"attribute {name} must be a list of integers") from None


def _same_params(a: UniformQuantType, b: UniformQuantType) -> bool:
    return a.scales == b.scales and a.zero_points == b.zero_points


def _check_per_axis_use(v: OpView) -> None:
    if v.op.name in PER_AXIS_OPS:
        return
    for kind, types in (("operand", v.operands), ("result", v.results)):
        for i, t in enumerate(types):
            if t.per_axis:
                raise v.fail(f"{kind} #{i} must be a tensor or per-tensor quantized tensor, but got "
                             f"'{t.describe()}'")


def _check_baseline(v: OpView) -> None:
    """Quantized operands and results of an element-wise op share storage and expressed type."""
    quantized = [t for t in v.operands + v.results if t.quantized]
    if not quantized:
        return
    first = quantized[0].element
    for t in quantized[1:]:
        if (t.element.storage, t.element.expressed) != (first.storage, first.expressed):
            raise v.fail(f"requires the same baseline type for its quantized operands and results, got "
                         f"'{first}' and '{t.element}'")
    shaped = [t.shape for t in v.operands + v.results if t.shape]
    if v.short not in ("select", "clamp") and any(s != shaped[0] for s in shaped):
        raise v.fail("requires all operands and results to have the same shape")


def _same_quantization(v: OpView, src: TensorT, dst: TensorT) -> None:
    """reshape / transpose (C1): the element type is kept; per axis only the dimension may move."""
    if src.quantized != dst.quantized:
        raise v.fail("expects both the operand and the result to be quantized or neither")
    if not src.quantized:
        return
    a, b = src.element, dst.element
    if src.per_axis != dst.per_axis or (a.storage, a.expressed, a.storage_min, a.storage_max) != (
            b.storage, b.expressed, b.storage_min, b.storage_max):
        raise v.fail(f"expects the same quantized element type, got '{a}' and '{b}'")
    if not _same_params(a, b):
        raise v.fail("expect same quantization scales and zero_points" if src.per_axis
                     else "expect same quantization scale and zero_point")


def _verify_transpose(v: OpView) -> None:
    src, dst = v.operands[0], v.results[0]
    perm = v.ints("permutation")
    if src.per_axis and dst.per_axis and dst.element.axis < len(perm) and perm[dst.element.axis] != src.element.axis:
        raise v.fail(f"operand quantization_dimension {src.element.axis} is not same as "
                     f"permutation[{dst.element.axis}] = {perm[dst.element.axis]}")
    _same_quantization(v, src, dst)


def _verify_reshape(v: OpView) -> None:
    src, dst = v.operands[0], v.results[0]
    _same_quantization(v, src, dst)
    if not (src.per_axis and src.static and dst.static):
        return
    a, b = src.element.axis, dst.element.axis
    if src.shape[a] != dst.shape[b]:
        raise v.fail("expect same quantization dimension size for operand and result")
    if math.prod(src.shape[:a]) != math.prod(dst.shape[:b]):
        raise v.fail("product of dimensions before quantization dimension must match between operand and result")


def _verify_broadcast(v: OpView) -> None:
    src, dst = v.operands[0], v.results[-1]
    if src.quantized != dst.quantized:
        raise v.fail("expects both the operand and the result to be quantized or neither")
    if not src.quantized:
        return
    a, b = src.element, dst.element
    if (a.storage, a.expressed) != (b.storage, b.expressed) or src.per_axis != dst.per_axis:
        raise v.fail(f"expects the same quantized element type, got '{a}' and '{b}'")
    if not src.per_axis:
        if not _same_params(a, b):
            raise v.fail("expect same quantization scale and zero_point")
        return
    dims = v.ints("broadcast_dimensions")
    if dims and dims[a.axis] != b.axis:
        raise v.fail(f"result quantization_dimension {b.axis} not same as broadcast_dimensions[{a.axis}] = "
                     f"{dims[a.axis]}")
    for i in range(len(b.scales)):
        j = 0 if len(a.scales) == 1 else i
        if j >= len(a.scales):
            break
        if b.scales[i] != a.scales[j]:
            raise v.fail(f"mismatch result scale {i} ({b.scales[i]:e}) and operand scale {j} ({a.scales[j]:e})")
        if b.zero_points[i] != a.zero_points[j]:
            raise v.fail(f"mismatch result zero_point {i} ({b.zero_points[i]}) and operand zero_point {j} "
                         f"({a.zero_points[j]})")


def _bit_width(t: TensorT) -> int | None:
    element = t.element.storage if t.quantized else t.element
    return element.width if isinstance(element, IntegerType | FloatType) else None


def _verify_bitcast(v: OpView) -> None:
    src, dst = v.operands[0], v.results[0]
    width = _bit_width(src)
    if width is not None and width == _bit_width(dst) and src.shape != dst.shape:
        raise v.fail("operand and result shapes must match except for the innermost dimension of the shape with "
                     "the smaller element type")


def _verify_uniform_quantize(v: OpView) -> None:
    src, dst = v.operands[0], v.results[0]
    if not dst.quantized:
        raise v.fail(f"result #0 must be a quantized tensor, got '{dst.describe()}'")
    expressed = src.element.expressed if src.quantized else src.element
    if str(dst.element.expressed) != str(expressed):
        raise v.fail(f"Expressed type of result expected to be '{expressed}', but got '{dst.element.expressed}'")
    if src.per_axis and dst.per_axis and src.element.axis != dst.element.axis:
        raise v.fail("cannot requantize while changing the quantization axis")
    if src.shape != dst.shape:
        raise v.fail("requires the same shape for operand and result")


def _verify_uniform_dequantize(v: OpView) -> None:
    src, dst = v.operands[0], v.results[0]
    if not src.quantized:
        raise v.fail(f"operand #0 must be a quantized tensor, got '{src.describe()}'")
    if str(dst.element) != str(src.element.expressed):
        raise v.fail(f"result element type must be the expressed type '{src.element.expressed}'")
    if src.shape != dst.shape:
        raise v.fail("requires the same shape for operand and result")


def _verify_dot_like(v: OpView, rhs_axis_ok: Callable[[int], str | None], res_axis_ok: Callable[[int], str | None]
                     ) -> None:
    """The quantization constraints shared by convolution (C28-C34) and dot_general (C14-C20)."""
    lhs, rhs, res = v.operands[0], v.operands[1], v.results[0]
    if not (lhs.quantized or rhs.quantized or res.quantized):
        return
    if not rhs.quantized or lhs.quantized != res.quantized:
        raise v.fail("rhs should be quantized for quantized operations and is_quantized(lhs)=is_quantized(result) "
                     "should hold")
    r = rhs.element
    if r.axis is not None:
        message = rhs_axis_ok(r.axis)
        if message:
            raise v.fail(message)
    if v.short == "dot_general" and any(r.zero_points):
        raise v.fail("Zero points of rhs should be 0" if r.axis is not None else "Zero point of rhs should be 0")
    if not lhs.quantized:  # hybrid: float lhs and result, quantized weights
        if not (str(lhs.element) == str(res.element) == str(r.expressed)):
            raise v.fail("mismatched rhs quantization expressed type and lhs and result element type")
        return
    if res.per_axis:
        message = res_axis_ok(res.element.axis)
        if message:
            raise v.fail(message)
    if lhs.element.storage != r.storage:
        raise v.fail("mismatched lhs and rhs quantization storage types")
    if not (str(lhs.element.expressed) == str(r.expressed) == str(res.element.expressed)):
        raise v.fail("mismatched lhs, rhs and result quantization expressed types")
    if rhs.per_axis != res.per_axis:
        raise v.fail("mismatched rhs and result quantization granularity")


def _check_axes(v: OpView, what: str, axes: tuple[int, ...], rank: int, count: int | None = None) -> None:
    """`axes` (of an operand of rank `rank`) unique and in range, `count` of them where given."""
    if count is not None and len(axes) != count:
        raise v.fail(f"{what} has {len(axes)} dimensions, expected {count}")
    if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise v.fail(f"{what} {list(axes)} must be distinct dimensions in [0, {rank})")


def _static(*types: TensorT) -> bool:
    return all(t.static for t in types)


def _verify_convolution_structure(v: OpView, dims: ast.ConvDimensionNumbers) -> None:
    """The StableHLO convolution constraints on dimension numbers, window attributes and group counts
    (C1-C23) that the lowering relies on."""
    if len(v.operands) != 2 or len(v.results) != 1 or not _static(*v.operands, *v.results):
        return
    (lhs, rhs), res = v.operands, v.results[0]
    n = len(lhs.shape)
    if len(rhs.shape) != n or len(res.shape) != n or n < 2:
        raise v.fail(f"needs lhs, rhs and result of one rank >= 2, got {lhs.shape}, {rhs.shape}, {res.shape}")
    _check_axes(v, "input dimensions", (dims.input_batch_dimension, *dims.input_spatial_dimensions,
                                        dims.input_feature_dimension), n, n)
    _check_axes(v, "kernel dimensions", (dims.kernel_input_feature_dimension, dims.kernel_output_feature_dimension,
                                         *dims.kernel_spatial_dimensions), n, n)
    _check_axes(v, "output dimensions", (dims.output_batch_dimension, *dims.output_spatial_dimensions,
                                         dims.output_feature_dimension), n, n)
    for name in ("window_strides", "lhs_dilation", "rhs_dilation"):
        values = v.ints(name)
        if values and (len(values) != n - 2 or min(values) < 1):
            raise v.fail(f"{name} {list(values)} must be {n - 2} positive values")
    padding = v.op.attr("padding")
    if isinstance(padding, ast.DenseElementsAttr) and padding.type.shape != (n - 2, 2):
        raise v.fail(f"padding must have shape [{n - 2}, 2]")
    groups, batch_groups = v.int_attr("feature_group_count", 1), v.int_attr("batch_group_count", 1)
    features, batch = lhs.shape[dims.input_feature_dimension], lhs.shape[dims.input_batch_dimension]
    outputs = rhs.shape[dims.kernel_output_feature_dimension]
    if groups < 1 or batch_groups < 1 or (groups > 1 and batch_groups > 1):
        raise v.fail(f"feature_group_count {groups} and batch_group_count {batch_groups} must be positive, one "
                     f"of them 1")
    if features % groups or batch % batch_groups or outputs % groups or outputs % batch_groups \
            or rhs.shape[dims.kernel_input_feature_dimension] * groups != features:
        raise v.fail(f"group counts ({groups}, {batch_groups}) do not divide the batch {batch}, input features "
                     f"{features} and output features {outputs}, or the kernel's input features")


def _verify_dot_general_structure(v: OpView, dims: ast.DotDimensionNumbers) -> None:
    """The StableHLO dot_general constraints on batching and contracting dimensions (C1-C10)."""
    if len(v.operands) != 2 or not _static(*v.operands):
        return
    lhs, rhs = v.operands
    if len(dims.lhs_batching_dimensions) != len(dims.rhs_batching_dimensions) or \
            len(dims.lhs_contracting_dimensions) != len(dims.rhs_contracting_dimensions):
        raise v.fail("needs as many lhs as rhs batching dimensions, and contracting dimensions")
    _check_axes(v, "lhs batching and contracting dimensions",
                dims.lhs_batching_dimensions + dims.lhs_contracting_dimensions, len(lhs.shape))
    _check_axes(v, "rhs batching and contracting dimensions",
                dims.rhs_batching_dimensions + dims.rhs_contracting_dimensions, len(rhs.shape))
    for a, b in zip(dims.lhs_batching_dimensions + dims.lhs_contracting_dimensions,
                    dims.rhs_batching_dimensions + dims.rhs_contracting_dimensions, strict=True):
        if lhs.shape[a] != rhs.shape[b]:
            raise v.fail(f"lhs dimension {a} ({lhs.shape[a]}) and rhs dimension {b} ({rhs.shape[b]}) differ")


def _verify_convolution(v: OpView) -> None:
    dims = v.op.attr("dimension_numbers")
    if not isinstance(dims, ast.ConvDimensionNumbers):
        raise v.fail("needs dimension_numbers")
    _verify_convolution_structure(v, dims)
    _verify_dot_like(
        v, lambda axis: None if axis == dims.kernel_output_feature_dimension else
        "quantization dimension of rhs should be same with kernel_output_feature_dimension",
        lambda axis: None if axis == dims.output_feature_dimension else
        "quantization dimension of result should be same with output_feature_dimension")


def _verify_dot_general(v: OpView) -> None:
    dims = v.op.attr("dot_dimension_numbers")
    if not isinstance(dims, ast.DotDimensionNumbers):
        raise v.fail("needs dot_dimension_numbers")
    _verify_dot_general_structure(v, dims)
    _verify_dot_like(
        v, lambda axis: "Quantization dimension of rhs should not be in the contracting dimension of rhs"
        if axis in dims.rhs_contracting_dimensions else None, lambda axis: None)


# dimension attributes: (attribute, operand index or -1 for the result whose rank bounds them, a permutation?)
_DIMENSIONS = {
    "stablehlo.transpose": ("permutation", 0, True), "stablehlo.reduce": ("dimensions", 0, False),
    "stablehlo.reverse": ("dimensions", 0, False), "stablehlo.broadcast_in_dim": ("broadcast_dimensions", -1, False),
    "stablehlo.concatenate": ("dimension", 0, False),
}


def _check_dimensions(v: OpView) -> None:
    """Dimension attributes distinct and inside the rank (a permutation for transpose), gather's dimension
    numbers of the gather kind, slice bounds inside the operand."""
    if v.op.name == "stablehlo.gather" and not isinstance(v.op.attr("dimension_numbers"),
                                                          ast.GatherDimensionNumbers):
        raise v.fail("needs #stablehlo.gather dimension_numbers")
    if v.op.name == "stablehlo.slice" and v.operands and v.operands[0].static:
        shape = v.operands[0].shape
        start, limit, strides = v.ints("start_indices"), v.ints("limit_indices"), v.ints("strides") or (1,) * len(shape)
        if not len(start) == len(limit) == len(strides) == len(shape) or not all(
                0 <= a <= b <= d and s > 0 for a, b, s, d in zip(start, limit, strides, shape, strict=True)):
            raise v.fail(f"start {list(start)}, limit {list(limit)} and strides {list(strides)} do not fit the "
                         f"operand shape {list(shape)}")
    if v.op.name not in _DIMENSIONS:
        return
    name, which, permutation = _DIMENSIONS[v.op.name]
    types = v.operands if which >= 0 else v.results
    attr = v.op.attr(name)
    if not types or types[which].shape is None or attr is None:
        return
    rank = len(types[which].shape)
    dims = (attr.value,) if isinstance(attr, ast.IntegerAttr) else v.ints(name)
    _check_axes(v, name, dims, rank, rank if permutation else None)


_RULES: dict[str, Callable[[OpView], None]] = {
    "stablehlo.transpose": _verify_transpose, "stablehlo.reshape": _verify_reshape,
    "stablehlo.broadcast_in_dim": _verify_broadcast, "stablehlo.dynamic_broadcast_in_dim": _verify_broadcast,
    "stablehlo.bitcast_convert": _verify_bitcast, "stablehlo.uniform_quantize": _verify_uniform_quantize,
    "stablehlo.uniform_dequantize": _verify_uniform_dequantize, "stablehlo.convolution": _verify_convolution,
    "stablehlo.dot_general": _verify_dot_general,
}


# operands and results of the ops with rules (dynamic_broadcast_in_dim: operand and output dimensions)
_ARITY = {"stablehlo.dynamic_broadcast_in_dim": (2, 1), "stablehlo.convolution": (2, 1),
          "stablehlo.dot_general": (2, 1)}


def verify_op(v: OpView) -> None:
    """Raise GraphError when the op breaks a StableHLO constraint on quantized types."""
    if v.op.name in _RULES:
        operands, results = _ARITY.get(v.op.name, (1, 1))
        if len(v.operands) != operands or len(v.results) != results:
            raise v.fail(f"takes {operands} operand(s) and gives {results} result(s), got {len(v.operands)} and "
                         f"{len(v.results)}")
    _check_per_axis_use(v)
    _check_dimensions(v)
    if v.op.name.startswith("stablehlo.") and v.short in ELEMENTWISE:
        _check_baseline(v)
    rule = _RULES.get(v.op.name)
    if rule is not None:
        rule(v)
