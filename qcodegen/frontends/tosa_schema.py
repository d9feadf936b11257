"""The tables of the TOSA flatbuffer schema (tosa.fbs of the TOSA serialization library, as shipped with
tosa-tools 2026.8.0), written down as data: enum values, field slots and field types.

Only what the .tosa reader needs: the TosaGraph -> TosaRegion -> TosaBasicBlock -> TosaOperator / TosaTensor /
TosaShape tables and every operator's attribute table. Field slots are the order of the fields in the schema (a
union field takes two slots: its type byte, then the table). New schema entries are only ever appended, so older
files read the same.
"""

from __future__ import annotations

FILE_IDENTIFIER = b"TOSA"

# enums, value = position
DTYPE = ("UNKNOWN", "BOOL", "INT4", "INT8", "INT16", "INT32", "INT48", "FP32", "FP16", "BF16", "SHAPE", "FP8E4M3",
         "FP8E5M2", "FP6E2M3", "FP6E3M2", "FP4E2M1", "FP8UE8M0", "INT64", "MXINT8")
RESIZE_MODE = ("UNKNOWN", "NEAREST", "BILINEAR")
NAN_MODE = ("UNKNOWN", "PROPAGATE", "IGNORE")
ROUNDING_MODE = ("UNKNOWN", "SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND")
BLOCK_SIZE = {0: "UNKNOWN", 1: "BLOCK_SIZE_1", 32: "BLOCK_SIZE_32"}

# the Op enum; the Attribute union lists one table per operator in the same order, so the union type of an
# operator's attribute table equals its Op value
OPS = (
    "UNKNOWN", "ARGMAX", "AVG_POOL2D", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "FFT2D", "MATMUL", "MAX_POOL2D",
    "RFFT2D", "TRANSPOSE_CONV2D", "CLAMP", "ERF", "SIGMOID", "TANH", "ADD", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND",
    "BITWISE_OR", "BITWISE_XOR", "INTDIV", "LOGICAL_AND", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR",
    "LOGICAL_XOR", "MAXIMUM", "MINIMUM", "MUL", "POW", "SUB", "TABLE", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS",
    "EXP", "FLOOR", "LOG", "LOGICAL_NOT", "NEGATE", "RECIPROCAL", "RSQRT", "SIN", "SELECT", "EQUAL", "GREATER",
    "GREATER_EQUAL", "REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_SUM", "CONCAT",
    "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE", "TRANSPOSE", "GATHER", "SCATTER", "RESIZE", "CAST", "RESCALE",
    "CONST", "IDENTITY", "CUSTOM", "COND_IF", "WHILE_LOOP", "VARIABLE", "VARIABLE_WRITE", "VARIABLE_READ",
    "CONST_SHAPE", "MATMUL_T_BLOCK_SCALED", "CAST_FROM_BLOCK_SCALED", "CAST_TO_BLOCK_SCALED", "DIM", "CONCAT_SHAPE",
    "ADD_SHAPE", "SUB_SHAPE", "MUL_SHAPE", "SLICE_SHAPE", "EXP2_SHAPE", "LOG2_CEIL_SHAPE", "LOG2_FLOOR_SHAPE",
    "MAX_SHAPE", "MIN_SHAPE", "MOD_SHAPE", "DIV_CEIL_SHAPE", "DIV_FLOOR_SHAPE", "ASSERT_EQUAL_SHAPE",
    "CONV2D_BLOCK_SCALED", "MAX_POOL2D_ADAPTIVE", "AVG_POOL2D_ADAPTIVE", "RESHAPE_BLOCK_SCALED",
    "ROW_GATHER_BLOCK_SCALED", "ROW_GATHER", "MATMUL_T",
)

# field types of attribute tables: scalars "int32" / "bool", vectors "[int32]" / "[ubyte]", "string", or the name
# of an enum (stored as uint32)
ENUMS = {"DType": DTYPE, "ResizeMode": RESIZE_MODE, "NanPropagationMode": NAN_MODE, "RoundingMode": ROUNDING_MODE,
         "BlockSize": BLOCK_SIZE}
Field = tuple[str, str]

_CONV: tuple[Field, ...] = (("pad", "[int32]"), ("stride", "[int32]"), ("dilation", "[int32]"),
                            ("local_bound", "bool"), ("acc_type", "DType"))
_POOL: tuple[Field, ...] = (("kernel", "[int32]"), ("stride", "[int32]"), ("pad", "[int32]"))
_AXIS: tuple[Field, ...] = (("axis", "int32"),)
_NAN: tuple[Field, ...] = (("nan_mode", "NanPropagationMode"),)
_BLOCK: tuple[Field, ...] = (("block_size", "BlockSize"),)

# the fields of each operator's attribute table, in slot order (operators missing here have an empty table)
ATTRIBUTES: dict[str, tuple[Field, ...]] = {
    "ARGMAX": _AXIS + _NAN,
    "AVG_POOL2D": _POOL + (("acc_type", "DType"),),
    "AVG_POOL2D_ADAPTIVE": (("acc_type", "DType"),),
    "CONV2D": _CONV, "CONV3D": _CONV, "DEPTHWISE_CONV2D": _CONV,
    "FFT2D": (("inverse", "bool"), ("local_bound", "bool")),
    "MAX_POOL2D": _POOL + _NAN,
    "MAX_POOL2D_ADAPTIVE": _NAN,
    "RFFT2D": (("local_bound", "bool"),),
    "TRANSPOSE_CONV2D": (("out_pad", "[int32]"), ("stride", "[int32]"), ("local_bound", "bool"),
                         ("acc_type", "DType")),
    "CLAMP": (("min_val", "[ubyte]"), ("max_val", "[ubyte]")) + _NAN,
    "ARITHMETIC_RIGHT_SHIFT": (("round", "bool"),),
    "MAXIMUM": _NAN, "MINIMUM": _NAN,
    "REDUCE_ALL": _AXIS, "REDUCE_ANY": _AXIS, "REDUCE_MAX": _AXIS + _NAN, "REDUCE_MIN": _AXIS + _NAN,
    "REDUCE_PRODUCT": _AXIS, "REDUCE_SUM": _AXIS,
    "CONCAT": _AXIS, "REVERSE": _AXIS, "DIM": _AXIS,
    "RESHAPE_BLOCK_SCALED": _BLOCK, "ROW_GATHER_BLOCK_SCALED": _BLOCK, "MATMUL_T_BLOCK_SCALED": _BLOCK,
    "CAST_FROM_BLOCK_SCALED": _BLOCK, "CAST_TO_BLOCK_SCALED": _BLOCK, "CONV2D_BLOCK_SCALED": _BLOCK,
    "TRANSPOSE": (("perms", "[int32]"),),
    "RESIZE": (("mode", "ResizeMode"),),
    "RESCALE": (("scale32", "bool"), ("rounding_mode", "RoundingMode"), ("per_channel", "bool"),
                ("input_unsigned", "bool"), ("output_unsigned", "bool")),
    "CUSTOM": (("operator_name", "string"), ("domain_name", "string"), ("implementation_attrs", "[ubyte]")),
    "COND_IF": (("then_graph", "string"), ("else_graph", "string")),
    "WHILE_LOOP": (("cond_graph", "string"), ("body_graph", "string")),
    "ASSERT_EQUAL_SHAPE": (("allow_broadcast", "bool"),),
}

# field slots of the structural tables
GRAPH_REGIONS = 1  # TosaGraph: version, regions, software_version, compatibility
REGION_BLOCKS = 1  # TosaRegion: name, blocks
BLOCK_OPERATORS, BLOCK_TENSORS, BLOCK_INPUTS, BLOCK_OUTPUTS, BLOCK_SHAPES = 1, 2, 3, 4, 5  # TosaBasicBlock (0: name)
OPERATOR_OP, OPERATOR_ATTRIBUTE_TYPE, OPERATOR_ATTRIBUTE, OPERATOR_INPUTS, OPERATOR_OUTPUTS = 0, 1, 2, 3, 4
# TosaTensor: name, shape, type, data, variable, is_unranked, variable_name, offset, size (external data), then the
# block-scaled fields scale_type, scale_data, block_shape, scale_offset, scale_size
TENSOR_NAME, TENSOR_SHAPE, TENSOR_TYPE, TENSOR_DATA, TENSOR_VARIABLE, TENSOR_UNRANKED = 0, 1, 2, 3, 4, 5
TENSOR_OFFSET, TENSOR_SIZE = 7, 8
SHAPE_NAME, SHAPE_RANK, SHAPE_DATA = 0, 1, 2  # TosaShape
