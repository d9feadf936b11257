"""TOSA operators (kinds "tosa.<op>", from the .tosa and TOSA MLIR front ends) -> qcodegen primitives, 1:1.

TOSA 1.0 passes zero points, RESCALE multipliers and shifts, the MUL shift and PAD's pad_const as tensor operands.
qcodegen bakes parameters into the generated C, so those operands must be constants: they become attributes of the
step, and a run-time value raises UnsupportedError. Shape operands (always static here) arrive as attributes: the
front ends evaluate them. Everything else is checked by the primitives: TOSA's ERROR_IF conditions raise GraphError
when the schedule is checked, before any C is generated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op
from ...ir.rescale import RescaleParams
from ..base import Lowerer, Rule, rule


@dataclass(frozen=True)
class Mapping:
    """How a TOSA operator maps onto a primitive.

    data: the leading operands that stay step inputs (None: all of them, for CONCAT);
    operands: step attribute <- index of a constant one-element operand (zero points, shift, pad_const);
    attrs: TOSA attributes copied to the step."""

    prim: str
    data: int | None
    operands: dict[str, int] = field(default_factory=dict)
    attrs: tuple[str, ...] = ()


_ZP = {"input_zp": 3, "weight_zp": 4}
_AVG_POOL = Mapping("AVG_POOL2D", 1, {"input_zp": 1, "output_zp": 2},
                    ("kernel", "stride", "pad", "acc_type"))
_MAX_POOL = Mapping("MAX_POOL2D", 1, attrs=("kernel", "stride", "pad"))
_CONV = ("pad", "stride", "dilation", "acc_type")
MAPPINGS: dict[str, Mapping] = {
    "argmax": Mapping("ARGMAX", 1, attrs=("axis",)),
    "avg_pool2d": _AVG_POOL,
    "avg_pool2d_adaptive": _AVG_POOL,
    "conv2d": Mapping("CONV2D", 3, _ZP, _CONV),
    "conv3d": Mapping("CONV3D", 3, _ZP, _CONV),
    "depthwise_conv2d": Mapping("DEPTHWISE_CONV2D", 3, _ZP, _CONV),
    "transpose_conv2d": Mapping("TRANSPOSE_CONV2D", 3, _ZP, ("out_pad", "stride", "acc_type")),
    "matmul": Mapping("MATMUL", 2, {"a_zp": 2, "b_zp": 3}),
    "max_pool2d": _MAX_POOL,
    "max_pool2d_adaptive": _MAX_POOL,
    "clamp": Mapping("CLAMP", 1, attrs=("min_val", "max_val")),
    "mul": Mapping("MUL", 2, {"shift": 2}),
    "table": Mapping("TABLE", 2),
    "reduce_all": Mapping("REDUCE_ALL", 1, attrs=("axis",)),
    "reduce_any": Mapping("REDUCE_ANY", 1, attrs=("axis",)),
    "reduce_max": Mapping("REDUCE_MAX", 1, attrs=("axis",)),
    "reduce_min": Mapping("REDUCE_MIN", 1, attrs=("axis",)),
    "reduce_sum": Mapping("REDUCE_SUM", 1, attrs=("axis",)),
    "concat": Mapping("CONCAT", None, attrs=("axis",)),
    "pad": Mapping("PAD", 1, {"pad_const": 1}, ("padding",)),
    "reshape": Mapping("RESHAPE", 1, attrs=("shape",)),
    "reverse": Mapping("REVERSE", 1, attrs=("axis",)),
    "slice": Mapping("SLICE", 1, attrs=("start", "size")),
    "tile": Mapping("TILE", 1, attrs=("multiples",)),
    "transpose": Mapping("TRANSPOSE", 1, attrs=("perms",)),
    "gather": Mapping("GATHER", 2),
    "row_gather": Mapping("GATHER", 2, {"row_count": 2}),
    "scatter": Mapping("SCATTER", 3),
    "resize": Mapping("RESIZE", 1, attrs=("scale", "offset", "border", "mode")),
    "select": Mapping("SELECT", 3),
    "negate": Mapping("NEGATE", 1, {"input_zp": 1, "output_zp": 2}),
    "arithmetic_right_shift": Mapping("ARITHMETIC_RIGHT_SHIFT", 2, attrs=("round",)),
}
# operators whose TOSA form is exactly the primitive's: all operands are data, no attributes
_PLAIN = ("add", "sub", "maximum", "minimum", "intdiv", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
          "logical_and", "logical_or", "logical_xor", "logical_not", "logical_left_shift", "logical_right_shift",
          "abs", "clz", "equal", "greater", "greater_equal")
_ARITY = {"bitwise_not": 1, "logical_not": 1, "abs": 1, "clz": 1}
MAPPINGS.update({name: Mapping(name.upper(), _ARITY.get(name, 2)) for name in _PLAIN})


def expect_operands(lw: Lowerer, op: Op, inputs: int | None, outputs: int = 1) -> None:
    """TOSA ERROR_IF on the operand lists: exactly `inputs` inputs (None: at least one) and `outputs` outputs."""
    if inputs is None and not op.inputs:
        raise lw.error("needs at least one input")
    if inputs is not None and len(op.inputs) != inputs:
        raise lw.error(f"expects {inputs} input(s), got {len(op.inputs)}")
    if len(op.outputs) != outputs:
        raise lw.error(f"expects {outputs} output(s), got {len(op.outputs)}")


MAX_RANK = 6  # TOSA level 8K


def check_level(lw: Lowerer, op: Op) -> None:
    """The TOSA level 8K limit on tensor ranks (a LEVEL_CHECK, i.e. an ERROR_IF)."""
    for name in op.inputs + op.outputs:
        rank = len(lw.graph.tensors[name].shape)
        if rank > MAX_RANK:
            raise lw.error(f"tensor {name!r} has rank {rank}; TOSA level 8K allows at most {MAX_RANK}")


def tosa_rule(kind: str) -> Callable[[Rule], Rule]:
    """Register the lowering of TOSA operator `kind`, after the level checks."""
    def register(fn: Rule) -> Rule:
        def checked(lw: Lowerer, op: Op) -> None:
            check_level(lw, op)
            fn(lw, op)
        rule(f"tosa.{kind}")(checked)
        return fn
    return register


def const_operand(lw: Lowerer, index: int, what: str) -> np.ndarray:
    """The flat values (int64) of constant operand `index`; UnsupportedError when it is computed at run time."""
    t = lw.tensor_in(index)
    if not t.is_const:
        raise UnsupportedError(f"{lw.label}: {what} (operand {index}, {t.name!r}) must be a constant; qcodegen "
                               f"bakes it into the generated code")
    return np.asarray(t.data).astype(np.int64).reshape(-1)


def const_scalar(lw: Lowerer, index: int, what: str) -> int:
    """A [1] operand (zero point, shift, pad_const): a rank-1 tensor of one element, as TOSA 1.0 requires."""
    if lw.tensor_in(index).shape != (1,):
        raise lw.error(f"{what} must have shape [1], got {list(lw.tensor_in(index).shape)}")
    return int(const_operand(lw, index, what)[0])


def _operand_attrs(lw: Lowerer, m: Mapping) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for key, index in m.operands.items():
        attrs[key] = const_scalar(lw, index, key)
    for key in m.attrs:
        attrs[key] = lw.attr(key)
    return attrs


def _expected_inputs(m: Mapping) -> int | None:
    if m.data is None:
        return None
    return max([m.data] + [index + 1 for index in m.operands.values()])


def _lower_mapped(lw: Lowerer, op: Op) -> None:
    m = MAPPINGS[op.kind.removeprefix("tosa.")]
    expect_operands(lw, op, _expected_inputs(m))
    data = op.inputs if m.data is None else op.inputs[:m.data]
    lw.emit(m.prim, list(data), list(op.outputs), **_operand_attrs(lw, m))


for _name in MAPPINGS:
    tosa_rule(_name)(_lower_mapped)


@tosa_rule("rescale")
def lower_rescale(lw: Lowerer, op: Op) -> None:
    """Zero points of an unsigned side are stored as the container's bit pattern (u8 128 in an INT8 tensor)."""
    expect_operands(lw, op, 5)
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    scale32 = bool(lw.attr("scale32"))
    mult_type = "i32" if scale32 else "i16"
    if lw.tensor_in(1).dtype.name != mult_type:
        raise lw.error(f"the multiplier must be {mult_type} when scale32 is {scale32}, got "
                       f"{lw.tensor_in(1).dtype}")
    zps = []
    for index, t, flag in ((3, x, "input_unsigned"), (4, y, "output_unsigned")):
        zp = const_scalar(lw, index, flag.replace("unsigned", "zp"))
        if lw.attr(flag) and not t.dtype.is_float:
            zp &= (1 << t.dtype.bits) - 1
        zps.append(zp)
    lw.emit_rescale(x.name, y.name, RescaleParams(
        multiplier=const_operand(lw, 1, "multiplier").tolist(), shift=const_operand(lw, 2, "shift").tolist(),
        input_zp=zps[0], output_zp=zps[1], scale32=scale32, rounding=str(lw.attr("rounding_mode")).lower(),
        per_channel=bool(lw.attr("per_channel")), input_unsigned=bool(lw.attr("input_unsigned")),
        output_unsigned=bool(lw.attr("output_unsigned"))))


@tosa_rule("identity")
def lower_identity(lw: Lowerer, op: Op) -> None:
    expect_operands(lw, op, 1)
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    lw.emit("RESHAPE", [x.name], [y.name], shape=list(x.shape))


@tosa_rule("cast")
def lower_cast(lw: Lowerer, op: Op) -> None:
    """int <-> int is CAST; bool -> int is SELECT(b, 1, 0); int -> bool is NOT(EQUAL(x, 0))."""
    expect_operands(lw, op, 1)
    x, y = lw.tensor_in(0), lw.tensor_out(0)
    if x.dtype.name != "bool" and y.dtype.name != "bool":
        lw.emit("CAST", [x.name], [y.name])
        return
    if x.dtype.name == y.dtype.name:
        raise lw.error("CAST from bool to bool is not a TOSA cast")
    ones = (1,) * len(x.shape)
    if x.dtype.name == "bool":
        one, zero = (lw.const(f"{y.name}_{v}", np.full(ones, v), y.dtype) for v in (1, 0))
        lw.emit("SELECT", [x.name, one, zero], [y.name])
        return
    zero = lw.const(f"{x.name}_zero", np.zeros(ones), x.dtype)
    is_zero = lw.temp(f"{y.name}_is_zero", y.shape, "bool")
    lw.emit("EQUAL", [x.name, zero], [is_zero])
    lw.emit("LOGICAL_NOT", [is_zero], [y.name])


@tosa_rule("matmul_t")
def lower_matmul_t(lw: Lowerer, op: Op) -> None:
    """MATMUL_T (TOSA 1.1 draft): A [N, H, C] times B [D, W, C] transposed, D = N or 1 (B broadcast over N).
    B is transposed to [D, C, W] (and tiled to N) for MATMUL."""
    expect_operands(lw, op, 4)
    a, b = lw.tensor_in(0), lw.tensor_in(1)
    if len(a.shape) != 3 or len(b.shape) != 3 or b.shape[0] not in (1, a.shape[0]):
        raise lw.error(f"A {list(a.shape)} and B {list(b.shape)} must be [N, H, C] and [D, W, C] with D = N or 1")
    d, w, c = b.shape
    bt = lw.temp(f"{b.name}_t", (d, c, w), b.dtype)
    lw.emit("TRANSPOSE", [b.name], [bt], perms=[0, 2, 1])
    if d != a.shape[0]:
        tiled = lw.temp(f"{b.name}_tiled", (a.shape[0], c, w), b.dtype)
        lw.emit("TILE", [bt], [tiled], multiples=[a.shape[0], 1, 1])
        bt = tiled
    lw.emit("MATMUL", [a.name, bt], list(op.outputs), a_zp=const_scalar(lw, 2, "A_zp"),
            b_zp=const_scalar(lw, 3, "B_zp"))


def _plain_values(lw: Lowerer, op: Op, inputs: int) -> None:
    """A 1.1-draft block-scaled operator on plain values: `inputs` operands and block_size 1 (ERROR_IF otherwise).
    One more operand (a scale tensor) makes it block-scaled (MX) data, which is not supported."""
    if len(op.inputs) == inputs + 1:
        raise UnsupportedError(f"{lw.label}: block-scaled (MX) tensors are not supported")
    expect_operands(lw, op, inputs)
    if lw.attr("block_size") != "BLOCK_SIZE_1":
        raise lw.error(f"block_size must be BLOCK_SIZE_1 for tensors without scales, got {lw.attr('block_size')}")


@tosa_rule("reshape_block_scaled")
def lower_reshape_block_scaled(lw: Lowerer, op: Op) -> None:
    _plain_values(lw, op, 1)
    lw.emit("RESHAPE", list(op.inputs), list(op.outputs), shape=lw.attr("shape"))


@tosa_rule("row_gather_block_scaled")
def lower_row_gather_block_scaled(lw: Lowerer, op: Op) -> None:
    _plain_values(lw, op, 3)
    lw.emit("GATHER", op.inputs[:2], list(op.outputs), row_count=const_scalar(lw, 2, "row_count"))
