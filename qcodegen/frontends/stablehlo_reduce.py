"""Quantized reductions with a wider accumulator (StableHLO RFC "quantized reduction", docs/schemes.md).

Both RFC forms become one graph op: a `stablehlo.reduce` / `stablehlo.reduce_window` of the narrow operand with
`attrs["body"]` (the combiner) and `attrs["accumulator"]` (the QuantType of the wide accumulation):

- option 1: the generic op with three regions, `input_conversion` (one uniform_quantize of the operand to the
  accumulator type), the reduction body on the accumulator type, `output_conversion` (one uniform_quantize to the
  result type). A single-region body whose arguments have a quantized type other than the operand's is read with
  implicit conversions (the same thing without the conversion regions).
- option 2: `uniform_quantize` (narrow -> i32 quantized) -> reduce / reduce_window on the i32 type -> `uniform_quantize`
  back, the widened operand and the wide result used only by this chain (`fuse_wide_reductions`, a Graph -> Graph
  rewrite run by the front end).

The lowering (qcodegen/lower/stablehlo/movement.py) checks that the input conversion is exact, sums the operand
minus its zero point in int32 (the range analysis bounds the accumulator, PlanError otherwise) and RESCALEs once.
"""

from __future__ import annotations

from typing import Any

from ..errors import GraphError
from ..ir.graph import Graph, Op
from ..ir.quant import QuantType
from ..semantics.stablehlo import same_type
from .mlir import ast
from .stablehlo_verify import convert_type

REDUCTIONS = ("stablehlo.reduce", "stablehlo.reduce_window")
_QUANTIZE = "stablehlo.uniform_quantize"


def _single_op_block(region: ast.Region, n_args: int) -> tuple[ast.Block, ast.Operation] | None:
    """The block and its only op when the region is `^bb(args): %r = op(args); return %r`."""
    if len(region.blocks) != 1:
        return None
    block = region.blocks[0]
    ops = block.operations
    if len(block.arguments) != n_args or len(ops) != 2 or ops[1].name not in ("stablehlo.return", "func.return"):
        return None
    if set(ops[0].operands) != {a.value for a in block.arguments} or len(ops[0].operands) != n_args:
        return None
    return (block, ops[0]) if ops[1].operands == ops[0].results else None


def _same(a: QuantType | None, b: QuantType | None) -> bool:
    return a is b or (a is not None and b is not None and same_type(a, b))


def _conversion(region: ast.Region, where: str) -> ast.Type:
    """The result type of a conversion region (one uniform_quantize of its argument)."""
    found = _single_op_block(region, 1)
    if found is None or found[1].name != _QUANTIZE:
        raise GraphError(f"{where}: a reduction's conversion region must be a single stablehlo.uniform_quantize of "
                         "its argument")
    return found[1].result_types[0]


def region_attrs(op: ast.Operation, where: str) -> dict[str, Any]:
    """attrs["body"]: the combiner of an op's region (None unless it is a single binary op of the two block
    arguments); for reduce / reduce_window with a wide accumulation also attrs["accumulator"], the body's quantized
    type."""
    if len(op.regions) != 1 and not (op.name in REDUCTIONS and len(op.regions) == 3):
        return {"body": None}
    body = _single_op_block(op.regions[len(op.regions) // 2], 2)
    if body is None:
        return {"body": None}
    block, combiner = body
    if op.name not in REDUCTIONS:
        return {"body": combiner.name}
    attrs: dict[str, Any] = {"body": combiner.name}
    acc = convert_type(block.arguments[0].type, where)
    if len(op.regions) == 3:
        if not _same(convert_type(_conversion(op.regions[0], where), where).quant, acc.quant):
            raise GraphError(f"{where}: the input conversion must produce the body's type")
        result = convert_type(_conversion(op.regions[2], where), where)
        if not _same(result.quant, convert_type(op.result_types[0], where).quant):
            raise GraphError(f"{where}: the output conversion must produce the result type")
    operand = convert_type(op.operand_types[0], where)
    if acc.quant is not None and operand.quant is not None and not _same(acc.quant, operand.quant):
        attrs["accumulator"] = acc.quant
    return attrs


def fuse_wide_reductions(graph: Graph) -> None:
    """Option 2: uniform_quantize (narrow -> i32) -> reduce / reduce_window -> uniform_quantize becomes one
    reduction of the narrow operand with attrs["accumulator"] (the i32 type)."""
    users: dict[str, list[Op]] = {}
    for op in graph.ops:
        for n in op.inputs:
            users.setdefault(n, []).append(op)
    producer = {n: op for op in graph.ops for n in op.outputs}
    outputs = set(graph.outputs)
    dropped: set[int] = set()
    for red in graph.ops:
        if red.kind not in REDUCTIONS or len(red.inputs) != 2 or len(red.outputs) != 1 or "accumulator" in red.attrs:
            continue
        widen = producer.get(red.inputs[0])
        narrow = users.get(red.outputs[0], [])
        if widen is None or widen.kind != _QUANTIZE or len(narrow) != 1 or narrow[0].kind != _QUANTIZE:
            continue
        wide = graph.tensors[red.inputs[0]]
        src = graph.tensors[widen.inputs[0]]
        if (wide.quant is None or src.quant is None or wide.dtype.name != "i32" or src.dtype.bits > 16
                or len(users[wide.name]) != 1 or wide.name in outputs or red.outputs[0] in outputs):
            continue
        red.attrs["accumulator"] = wide.quant
        red.inputs[0] = src.name
        red.outputs[0] = narrow[0].outputs[0]
        dropped.update((id(widen), id(narrow[0])))
    graph.ops = [op for op in graph.ops if id(op) not in dropped]
