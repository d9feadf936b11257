"""MLIR text parser: every corpus chunk parses, structure spot checks, pretty == generic forms, positioned errors."""

import os
import re
from pathlib import Path

import numpy as np
import pytest

from qcodegen.errors import GraphError, QcError
from qcodegen.frontends.mlir import MlirSyntaxError, parse_chunks, parse_file, parse_module
from qcodegen.frontends.mlir.ast import (
    ArrayAttr,
    BoolAttr,
    ConvDimensionNumbers,
    DenseArrayAttr,
    DenseElementsAttr,
    DialectAttr,
    DictAttr,
    DotDimensionNumbers,
    EnumAttr,
    FloatAttr,
    GatherDimensionNumbers,
    IntegerAttr,
    Operation,
    Region,
    ScatterDimensionNumbers,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
    ValueRef,
    int_list,
)
from qcodegen.frontends.mlir.types import (
    ComplexType,
    FloatType,
    FunctionType,
    IndexType,
    IntegerType,
    OpaqueType,
    TensorType,
    TupleType,
    UniformQuantType,
)

SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))

CORPUS = SHARED / "testdata" / "stablehlo"
FILES = sorted(CORPUS.glob("*.mlir")) + sorted(CORPUS.glob("quantized/*.mlir")) if CORPUS.is_dir() else []
NO_CORPUS = f"StableHLO corpus not found at {CORPUS} (set QC_SHARED_DIR)"
needs_corpus = pytest.mark.skipif(not FILES, reason=NO_CORPUS)
I64 = IntegerType(64)
F32 = FloatType("f32")


def corpus(name: str) -> list:
    return parse_file(CORPUS / name)


def functions(name: str) -> dict:
    """Functions of all chunks of a corpus file by name (the last one wins for repeated names)."""
    return {f.name: f for m in corpus(name) for f in m.functions}


def walk(region: Region):
    for block in region.blocks:
        for op in block.operations:
            yield op
            for nested in op.regions:
                yield from walk(nested)


def all_ops(module):
    for func in module.functions:
        if func.body:
            yield from walk(func.body)
    yield from module.operations


def one_op(text: str) -> Operation:
    """The first operation of a function body around ``text``."""
    module = parse_module(f"func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %p: tensor<2x3xi1>, "
                          f"%s: tensor<f32>, %i: tensor<i32>, %v: tensor<4xf32>, %w: tensor<4xf32>, "
                          f"%q: tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>) {{\n  {text}\n"
                          f"  return\n}}", "t.mlir")
    return module.functions[0].operations[0]


def attrs(op: Operation) -> dict:
    return {**op.attributes, **op.properties}


# --------------------------------------------------------------------------------------------------- whole corpus

@pytest.mark.parametrize("path", FILES or [pytest.param(None, marks=pytest.mark.skip(reason=NO_CORPUS))],
                         ids=lambda p: p.name if p else "none")
def test_corpus_file_parses_with_file_positions(path):
    text = path.read_text()
    lines = text.splitlines()
    modules = parse_file(path)
    assert len(modules) == len(re.findall(r"(?m)^// -----", text)) + 1
    for module in modules:
        for func in module.functions:
            assert lines[func.line - 1][func.col - 1:].startswith("func.func")
        for op in all_ops(module):
            assert len(op.operand_types) == len(op.operands), (op.name, op.line)
            assert not op.results or len(op.result_types) == len(op.results), (op.name, op.line)
            start = lines[op.line - 1][op.col - 1:]
            assert start.startswith(("%", '"', op.name, "return")), (path.name, op.line, op.col, start[:30])


@needs_corpus
def test_chunk_line_offsets_are_marker_lines():
    text = (CORPUS / "quantized_ops.mlir").read_text()
    markers = [i + 1 for i, line in enumerate(text.splitlines()) if line.startswith("// -----")]
    modules = corpus("quantized_ops.mlir")
    assert [m.line_offset for m in modules] == [0] + [line - 1 for line in markers]
    assert [m.functions[0].name for m in modules] == ["uniform_quantize", "uniform_quantize", "uniform_dequantize",
                                                      "uniform_qdq", "quantized_add"]


# --------------------------------------------------------------------------------------------------- quant types

@needs_corpus
def test_per_axis_quant_type_and_check_op():
    ops = corpus("quantized_ops.mlir")[0].functions[0].operations
    assert [op.name for op in ops] == ["stablehlo.constant", "stablehlo.uniform_quantize", "stablehlo.bitcast_convert",
                                       "check.expect_eq_const", "func.return"]
    q = ops[1].result_types[0].element
    assert isinstance(q, UniformQuantType) and q.per_axis and not q.sub_channel
    assert (q.axis, q.scales, q.zero_points, q.scale_texts) == (0, (0.1, 0.5), (-30, -20), ("0.1", "0.5"))
    assert (q.storage, q.expressed, q.storage_min, q.storage_max) == (IntegerType(8, "signless"), F32, -128, 127)
    assert str(q) == "!quant.uniform<i8:f32:0, {0.1:-30, 0.5:-20}>"
    check = ops[3]
    assert check.operands == [ValueRef("%bitcast_result")] and check.attr("value").values == (10, 10)


@needs_corpus
def test_quant_types_from_verifier_file():
    funcs = functions("ops_stablehlo_quantized.mlir")
    args = funcs["ops_per_axis_quantization"].arguments
    q = args[0].type.element
    assert (q.storage_min, q.storage_max, q.axis, q.scales, q.zero_points) == (-128, 127, 2, (0.1, 0.5), (-30, -20))
    assert args[0].type.shape == (1, 2, 2) and args[3].type == OpaqueType("stablehlo", "token")
    clamp = funcs["negative_clamp_quantization"]
    assert clamp.arguments[0].type.element.storage == IntegerType(8, "unsigned")
    assert clamp.arguments[0].type.element.storage_max == 255
    illegal = funcs["quantized_element_type_c11"]
    assert illegal.arguments[0].type.element.axis == -1  # rejected by the verifier, not by the parser


@needs_corpus
def test_scales_are_exact_and_zero_point_optional():
    ops = corpus("quantized/dot_general_batch_dimensions_lhs_float32_8_4_3_3_4__rhs_float32_4_8_3_4_2__"
                 "dimensionnumbers____4_3___3_2_____0_1___1_0_qi8.mlir")[0].functions[0].operations
    q = ops[3].result_types[0].element
    assert q.scale_texts == ("0.0039215452530804804",) and q.scales == (float("0.0039215452530804804"),)
    assert q.zero_points == (0,)
    accumulator = ops[6].operand_types[0].element
    assert accumulator.storage == IntegerType(32, "signless") and accumulator.scale_texts == ("1.537803731274151E-5",)
    assert ops[5].attr("dot_dimension_numbers") == DotDimensionNumbers((0, 1), (1, 0), (4, 3), (3, 2))


def test_quant_type_forms():
    def quant(text):
        return one_op(f'%0 = "x.y"() : () -> tensor<2x2x{text}>').result_types[0].element

    narrow = quant("!quant.uniform<i8<-127:127>:f32, 1.0e-2>")
    assert (narrow.storage_min, narrow.storage_max, narrow.scales, narrow.zero_points) == (-127, 127, (0.01,), (0,))
    unsigned = quant("!quant.uniform<u8:f32, 0.5:128>")
    assert unsigned.storage == IntegerType(8, "unsigned") and unsigned.zero_points == (128,)
    signed = quant("!quant.uniform<si8:f32, 0.5>")
    assert signed.storage == IntegerType(8, "signed") != quant("!quant.uniform<i8:f32, 0.5>").storage
    assert str(signed) == "!quant.uniform<si8:f32, 0.5:0>"
    sub = quant("!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0:10, 3.0:20}, {4.0:30, 5.0}}>")
    assert sub.sub_channel and sub.block_sizes == ((0, 1), (1, 2)) and sub.scales_shape == (2, 2)
    assert sub.scales == (2.0, 3.0, 4.0, 5.0) and sub.zero_points == (10, 20, 30, 0)
    assert str(sub) == "!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0:10, 3.0:20}, {4.0:30, 5.0:0}}>"
    assert quant("!quant.uniform<i16:f32:1, {0.2:20, 0.1:10}>").scales_shape == (2,)


# --------------------------------------------------------------------------------------------------- dense values

@needs_corpus
def test_dense_literals_of_all_element_types():
    modules = corpus("quantized/add_qi8.mlir")

    def values(index):
        return [op.attr("value").flat() for op in modules[index].functions[0].operations[:2]]

    assert values(4) == [[0, 1, 8, -9, 0], [-128, -1, 8, -9, 127]]
    assert values(11) == [[0, 4294967296], [18446744073709551615, 4294967296]]
    assert values(12) == [[False, False, True, True], [False, True, False, True]]
    assert values(1) == [[0, 2], [1, 1]]  # ui2 splat
    bf16 = values(13)[0]
    assert bf16[:3] == [0.0, -0.0, 1.0] and bf16[6:9] == [np.inf, np.inf, -np.inf] and bf16[10] == 9.18355e-41
    expected = modules[13].functions[0].operations[3].attr("value").flat()
    assert np.isnan(expected[9])  # 0x7FC0
    assert modules[17].functions[0].operations[0].attr("value").flat() == [1.5 + 2.5j, 7.5 + 5.5j]
    empty = modules[20].functions[0].operations[3].attr("value")
    assert empty.type.shape == (2, 0, 3) and empty.flat() == []


@needs_corpus
def test_hex_blob_matches_independent_decoding():
    name = ("quantized/conv_general_dilated_padding_lhs_float32_2_3_9_10__rhs_float32_3_3_4_5__windowstrides__1_1__"
            "padding_-5318452038191342786_qi8.mlir")
    blob = re.search(r'%cst = stablehlo.constant dense<"0x([0-9A-F]+)">', (CORPUS / name).read_text())[1]
    value = corpus(name)[0].functions[0].operations[0].attr("value")
    assert isinstance(value, DenseElementsAttr) and value.type == TensorType((2, 3, 9, 10), F32) and not value.splat
    assert np.array_equal(np.array(value.flat(), np.float32), np.frombuffer(bytes.fromhex(blob), "<f4"))


def test_dense_hex_forms():
    def value(text):
        return one_op(f"%0 = stablehlo.constant {text}").attr("value")

    assert value('dense<"0xFF7F0080"> : tensor<2xi16>').flat() == [32767, -32768]
    assert value('dense<"0xFF7F0080"> : tensor<2xui16>').flat() == [32767, 32768]
    assert value('dense<"0x0F"> : tensor<3xi4>').flat() == [-1, -1, -1]  # one element: splat
    assert value('dense<"0x003C00C0"> : tensor<2xf16>').flat() == [1.0, -2.0]
    assert value('dense<"0x803F"> : tensor<bf16>').flat() == [1.0]
    assert value('dense<"0x0000803F00000040"> : tensor<1xcomplex<f32>>').flat() == [1 + 2j]
    assert value("dense<[[1, 255], [-128, 0]]> : tensor<2x2xi8>").flat() == [1, -1, -128, 0]  # signless wraps
    assert value("dense<[0x7F800000, -1.5, 2]> : tensor<3xf32>").flat() == [np.inf, -1.5, 2.0]
    assert value("dense<[inf, -inf]> : tensor<2xf64>").flat() == [np.inf, -np.inf]
    assert value("dense<[(1, 2), (3, -4)]> : tensor<2xcomplex<i8>>").flat() == [1 + 2j, 3 - 4j]
    assert value("dense<[1, 2]> : tensor<2x!quant.uniform<i8:f32, 0.5>>").flat() == [1, 2]


# --------------------------------------------------------------------------------------------------- op structure

@needs_corpus
def test_convolution_pretty_form():
    ops = corpus("quantized/convolution_qi8.mlir")[0].functions[0].operations
    conv = ops[5]
    assert conv.name == "stablehlo.convolution" and conv.operands == [ValueRef("%1"), ValueRef("%0")]
    assert conv.attr("dimension_numbers") == ConvDimensionNumbers(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))
    assert conv.attr("window_strides") == DenseArrayAttr(I64, (4, 4))
    assert conv.attr("lhs_dilation") == DenseArrayAttr(I64, (2, 2)) and conv.attr("padding") is None
    assert conv.attr("feature_group_count") == IntegerAttr(1, I64)
    assert conv.result_types[0].element.storage == IntegerType(32, "signless")
    assert ops[8].name == "stablehlo.custom_call" and ops[8].attr("call_target_name") == StringAttr("check.eq")
    assert ops[9].name == "func.return" and ops[9].operand_types == [TensorType((), IntegerType(1))]


@needs_corpus
def test_convolution_layouts_and_padding():
    conv = functions("stablehlo_legalize_quant_to_int.mlir")["conv2d_nchw"].operations[0]
    assert conv.attr("dimension_numbers") == ConvDimensionNumbers(0, 1, (2, 3), 1, 0, (2, 3), 0, 1, (2, 3))
    assert conv.attr("padding").flat() == [3, 3, 3, 3] and conv.attr("window_strides") == DenseArrayAttr(I64, (2, 2))
    name = ("quantized/conv_general_dilated_padding_lhs_float32_2_3_9_10__rhs_float32_3_3_4_5__windowstrides__1_1__"
            "padding_-5318452038191342786_qi8.mlir")
    padding = corpus(name)[0].functions[0].operations[7].attr("padding")
    assert padding.type == TensorType((2, 2), I64) and padding.flat() == [1, 2, 0, 0]


@needs_corpus
def test_gather_properties():
    gather = corpus("quantized/gather_qi8.mlir")[0].functions[0].operations[4]
    assert gather.name == "stablehlo.gather" and len(gather.operands) == 2
    assert gather.properties["dimension_numbers"] == GatherDimensionNumbers(
        offset_dims=(2, 3), collapsed_slice_dims=(0,), start_index_map=(1, 0), index_vector_dim=2)
    assert gather.attr("slice_sizes") == DenseArrayAttr(I64, (1, 2, 2))
    assert gather.attr("indices_are_sorted") == BoolAttr(True)


@needs_corpus
def test_region_bodies_from_verifier_file():
    funcs = functions("ops_stablehlo_quantized.mlir")
    reduce = funcs["reduce_per_tensor_quantization"].operations[0]
    [block] = reduce.regions[0].blocks
    assert block.label == "^bb0" and [a.name for a in block.arguments] == ["%arg2", "%arg3"]
    assert [op.name for op in block.operations] == ["stablehlo.add", "stablehlo.return"]
    assert int_list(reduce.attr("dimensions")) == (0,)
    sort = funcs["sort_per_tensor_quantization"]
    assert sort.operations[0].results == [ValueRef("%0", 0), ValueRef("%0", 1)]
    assert len(sort.operations[0].regions[0].blocks[0].arguments) == 4
    assert sort.operations[1].operands == [ValueRef("%0", 0), ValueRef("%0", 1)]
    assert len(sort.result_types) == 2
    assert len(funcs["select_and_scatter_per_tensor_quantization"].operations[0].regions) == 2
    loop = funcs["while_per_tensor_quantization"].operations[0]
    assert [r.blocks[0].operations[-1].name for r in loop.regions] == ["stablehlo.return", "stablehlo.return"]
    assert loop.result_types[0].shape == (None,) and loop.result_types[0].is_dynamic
    scatter = funcs["scatter_per_tensor_quantization"].operations[0].attr("scatter_dimension_numbers")
    assert scatter == ScatterDimensionNumbers((1,), (0, 1), (), (), (0, 1), 1)
    send = funcs["ops_per_tensor_quantization"].operations
    channel = next(op for op in send if op.name == "stablehlo.send").attr("channel_handle")
    assert channel == DialectAttr("stablehlo", "channel_handle", {"handle": IntegerAttr(5), "type": IntegerAttr(2)})
    compare = next(op for op in send if op.name == "stablehlo.compare")
    assert compare.attr("comparison_direction") == EnumAttr("LT", "stablehlo", "comparison_direction")
    reduce_scatter = next(op for op in send if op.name == "stablehlo.all_gather")
    assert reduce_scatter.attr("replica_groups").flat() == [0, 1]
    unranked = funcs["negative_gather_quantization"].arguments[0].type
    assert unranked.shape is None and unranked.is_dynamic


@needs_corpus
def test_composite_and_bounds_from_legalize_file():
    funcs = functions("stablehlo_legalize_quant_to_int.mlir")
    ops = funcs["decompose_composite_ops"].operations
    assert ops[2].name == "stablehlo.composite" and ops[2].attr("name") == StringAttr("stablehlo.add")
    assert ops[2].attr("decomposition") == SymbolRefAttr(("stablehlo.add.impl",))
    bounded = funcs["uniform_quantize_and_dequantize_type_exensions"].arguments[0].type
    assert bounded.shape == (None, None)
    assert bounded.encoding == DialectAttr("stablehlo", "bounds", {}, (IntegerAttr(4), IntegerAttr(4)))


# --------------------------------------------------------------------------------------------------- pretty forms

PRETTY_VS_GENERIC = [
    ("stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>",
     '"stablehlo.transpose"(%a) <{permutation = array<i64: 1, 0>}> : (tensor<2x3xf32>) -> tensor<3x2xf32>'),
    ("stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<2x3xf32>",
     '"stablehlo.broadcast_in_dim"(%s) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>'),
    ("stablehlo.concatenate %a, %b, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>",
     '"stablehlo.concatenate"(%a, %b) {dimension = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> '
     "tensor<4x3xf32>"),
    ("stablehlo.pad %a, %s, low = [0, 1], high = [2, 0], interior = [1, 0] : (tensor<2x3xf32>, tensor<f32>) -> "
     "tensor<5x4xf32>",
     '"stablehlo.pad"(%a, %s) {edge_padding_low = array<i64: 0, 1>, edge_padding_high = array<i64: 2, 0>, '
     "interior_padding = array<i64: 1, 0>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<5x4xf32>"),
    ("stablehlo.slice %a [0:2, 1:3:2] : (tensor<2x3xf32>) -> tensor<2x1xf32>",
     '"stablehlo.slice"(%a) {start_indices = array<i64: 0, 1>, limit_indices = array<i64: 2, 3>, '
     "strides = array<i64: 1, 2>} : (tensor<2x3xf32>) -> tensor<2x1xf32>"),
    ("stablehlo.iota dim = 1 : tensor<2x3xi32>",
     '"stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<2x3xi32>'),
    ("stablehlo.compare GT, %a, %b, FLOAT : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>",
     '"stablehlo.compare"(%a, %b) {comparison_direction = #stablehlo<comparison_direction GT>, '
     "compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>"),
    ("stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [1] x [1], "
     "precision = [DEFAULT, HIGH] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2xf32>",
     '"stablehlo.dot_general"(%a, %b) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], '
     "rhs_batching_dimensions = [0], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, "
     "precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision HIGH>]} : "
     "(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2xf32>"),
    ("stablehlo.convolution(%a, %b) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [2], "
     "pad = [[1, 0]], lhs_dilate = [1], rhs_dilate = [2], reverse = [false]} {batch_group_count = 1 : i64} : "
     "(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>",
     '"stablehlo.convolution"(%a, %b) {dimension_numbers = #stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>, '
     "window_strides = array<i64: 2>, padding = dense<[[1, 0]]> : tensor<1x2xi64>, lhs_dilation = array<i64: 1>, "
     "rhs_dilation = array<i64: 2>, window_reversal = array<i1: false>, batch_group_count = 1 : i64} : "
     "(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>"),
    ("stablehlo.reduce_precision %a, format = e5m10 : tensor<2x3xf32>",
     '"stablehlo.reduce_precision"(%a) {exponent_bits = 5 : i32, mantissa_bits = 10 : i32} : '
     "(tensor<2x3xf32>) -> tensor<2x3xf32>"),
    ("stablehlo.custom_call @foo(%a) {backend_config = \"\"} : (tensor<2x3xf32>) -> tensor<2x3xf32>",
     '"stablehlo.custom_call"(%a) {call_target_name = "foo", backend_config = ""} : '
     "(tensor<2x3xf32>) -> tensor<2x3xf32>"),
    ("stablehlo.select %p, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>",
     '"stablehlo.select"(%p, %a, %b) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>'),
    ("stablehlo.add %a, %b : tensor<2x3xf32>",
     '"stablehlo.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>'),
    ("stablehlo.dynamic_slice %a, %i, %i, sizes = [1, 2] : (tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> "
     "tensor<1x2xf32>",
     '"stablehlo.dynamic_slice"(%a, %i, %i) {slice_sizes = array<i64: 1, 2>} : '
     "(tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>"),
    ("stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>",
     '"stablehlo.constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>'),
]


@pytest.mark.parametrize("pretty,generic", PRETTY_VS_GENERIC,
                         ids=[re.match(r'"([\w.]+)"', generic)[1] for _, generic in PRETTY_VS_GENERIC])
def test_pretty_form_equals_generic_form(pretty, generic):
    a, b = one_op(f"%0 = {pretty}"), one_op(f"%0 = {generic}")
    assert (a.name, a.operands, attrs(a), a.operand_types, a.result_types) == \
        (b.name, b.operands, attrs(b), b.operand_types, b.result_types)


def test_reduce_pretty_forms():
    applied = one_op("%0 = stablehlo.reduce(%a init: %s) applies stablehlo.add across dimensions = [1] : "
                     "(tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>")
    assert applied.operands == [ValueRef("%a"), ValueRef("%s")] and int_list(applied.attr("dimensions")) == (1,)
    [block] = applied.regions[0].blocks
    add, ret = block.operations
    assert [a.type for a in block.arguments] == [TensorType((), F32)] * 2
    assert (add.name, add.operands, add.result_types) == ("stablehlo.add", [a.value for a in block.arguments],
                                                          [TensorType((), F32)])
    assert ret.name == "stablehlo.return" and ret.operands == add.results
    module = parse_module("""
func.func @f(%x: tensor<2x3xf32>, %y: tensor<2x3xi32>, %c: tensor<f32>, %d: tensor<i32>) {
  %0:2 = stablehlo.reduce(%x init: %c), (%y init: %d) across dimensions = [0] :
      (tensor<2x3xf32>, tensor<2x3xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
   reducer(%a1: tensor<f32>, %b1: tensor<f32>) (%a2: tensor<i32>, %b2: tensor<i32>)  {
    %1 = stablehlo.maximum %a1, %b1 : tensor<f32>
    %2 = stablehlo.maximum %a2, %b2 : tensor<i32>
    stablehlo.return %1, %2 : tensor<f32>, tensor<i32>
  }
  return
}""")
    op = module.functions[0].operations[0]
    assert [v.name for v in op.operands] == ["%x", "%y", "%c", "%d"]
    assert [a.name for a in op.regions[0].blocks[0].arguments] == ["%a1", "%a2", "%b1", "%b2"]
    assert op.regions[0].blocks[0].operations[2].operand_types == [TensorType((), F32), TensorType((), IntegerType(32))]


def test_while_and_call_pretty_forms():
    module = parse_module("""
func.func @f(%n: tensor<i32>, %x: tensor<f32>) -> tensor<f32> {
  %0:2 = stablehlo.while(%iterArg = %n, %iterArg_0 = %x) : tensor<i32>, tensor<f32>
   cond {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.compare  GT, %iterArg, %c,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = func.call @g(%iterArg_0) : (tensor<f32>) -> tensor<f32>
    stablehlo.return %iterArg, %1 : tensor<i32>, tensor<f32>
  }
  return %0#1 : tensor<f32>
}
func.func private @g(%y: tensor<f32>) -> tensor<f32> {
  %0 = call @g(%y) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}""")
    loop = module.functions[0].operations[0]
    assert loop.operands == [ValueRef("%n"), ValueRef("%x")] and len(loop.result_types) == 2
    assert [[a.name for a in r.blocks[0].arguments] for r in loop.regions] == [["%iterArg", "%iterArg_0"]] * 2
    assert loop.regions[1].blocks[0].operations[0].attr("callee") == SymbolRefAttr(("g",))
    assert module.function("g").visibility == "private"
    assert module.function("g").operations[0].name == "func.call"


def test_tosa_generic_and_pretty_forms():
    module = parse_module("""
func.func @t(%x: tensor<1x4xi32>) -> tensor<1x4xi8> {
  %m = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
  %s = "tosa.const"() <{values = dense<30> : tensor<1xi8>}> : () -> tensor<1xi8>
  %iz = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
  %oz = "tosa.const"() <{values = dense<-1> : tensor<1xi8>}> : () -> tensor<1xi8>
  %0 = tosa.rescale %x, %m, %s, %iz, %oz {input_unsigned = false, output_unsigned = false, per_channel = false,
      rounding_mode = SINGLE_ROUND, scale32 = true} : (tensor<1x4xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>,
      tensor<1xi8>) -> tensor<1x4xi8>
  %shape = tosa.const_shape {values = dense<[4, 1]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %1 = tosa.reshape %0, %shape : (tensor<1x4xi8>, !tosa.shape<2>) -> tensor<4x1xi8>
  %2 = "tosa.clamp"(%0) <{max_val = 127 : i8, min_val = -128 : i8, nan_mode = #tosa<nan_mode PROPAGATE>}>
      : (tensor<1x4xi8>) -> tensor<1x4xi8>
  return %2 : tensor<1x4xi8>
}""")
    ops = module.functions[0].operations
    assert ops[0].properties["values"] == DenseElementsAttr(TensorType((1,), IntegerType(32)), (1073741824,))
    rescale = ops[4]
    assert len(rescale.operands) == 5 and rescale.attr("rounding_mode") == EnumAttr("SINGLE_ROUND")
    assert rescale.attr("scale32") == BoolAttr(True) and rescale.result_types == [TensorType((1, 4), IntegerType(8))]
    assert ops[5].attr("values").flat() == [4, 1] and ops[5].attr("values").type.element == IndexType()
    assert ops[6].operand_types[1] == OpaqueType("tosa", "shape", "2")
    assert ops[7].attr("min_val") == IntegerAttr(-128, IntegerType(8))
    assert ops[7].attr("nan_mode") == EnumAttr("PROPAGATE", "tosa", "nan_mode")


# --------------------------------------------------------------------------------------------------- attributes, types

def test_attribute_kinds():
    op = one_op('"x.y"() {i = 7 : i64, u = 255 : ui8, n = -3, f = 1.5e-3 : f32, h = 0x7F800000 : f32, t = true, '
                's = "a\\"b\\0A", arr = [1, "x"], da = array<i32: 1, -2>, dd = array<i1: true, false>, '
                'd = {k = unit, flag}, ty = tensor<?x2xbf16>, fn = (i32) -> (), sym = @a::@b, e = RNE, '
                'en = #stablehlo<precision HIGHEST>, alg = #stablehlo.dot_algorithm<lhs_precision_type = tf32>, '
                'c = #stablehlo.conv<raw input_batch_dimension = 0, input_feature_dimension = 3, '
                'input_spatial_dimensions = [1, 2], kernel_input_feature_dimension = 2, '
                'kernel_output_feature_dimension = 3, kernel_spatial_dimensions = [0, 1], output_batch_dimension = 0, '
                'output_feature_dimension = 3, output_spatial_dimensions = [1, 2]>, "quoted key" = 1} : () -> ()')
    a = op.attributes
    assert a["i"] == IntegerAttr(7, I64) and a["u"] == IntegerAttr(255, IntegerType(8, "unsigned"))
    assert a["n"] == IntegerAttr(-3) and a["f"] == FloatAttr(1.5e-3, "1.5e-3", F32)
    assert a["h"].value == np.inf and a["h"].text == "0x7F800000"
    assert a["t"] == BoolAttr(True) and a["s"] == StringAttr('a"b\n')
    assert a["arr"] == ArrayAttr((IntegerAttr(1), StringAttr("x")))
    assert a["da"] == DenseArrayAttr(IntegerType(32), (1, -2)) and a["dd"].values == (True, False)
    assert a["d"] == DictAttr({"k": UnitAttr(), "flag": UnitAttr()})
    assert a["ty"] == TypeAttr(TensorType((None, 2), FloatType("bf16")))
    assert a["fn"] == TypeAttr(FunctionType((IntegerType(32),), ()))
    assert a["sym"] == SymbolRefAttr(("a", "b")) and a["e"] == EnumAttr("RNE")
    assert a["en"] == EnumAttr("HIGHEST", "stablehlo", "precision")
    assert a["alg"].fields == {"lhs_precision_type": TypeAttr(FloatType("tf32"))}
    assert a["c"] == ConvDimensionNumbers(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))
    assert a["quoted key"] == IntegerAttr(1)


def test_types_and_aliases():
    module = parse_module("""
!qi8 = !quant.uniform<i8:f32, 0.25:3>
#dot = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>
module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @f(%a: tensor<*xf32> {jax.arg_info = "a"}, %b: tuple<tensor<si8>, complex<f64>>,
                      %c: tensor<4x!qi8>, %d: index) -> (tensor<f32> {jax.result_info = ""}, none)
      attributes {some.attr} {
    %0 = "x.y"() {dims = #dot} : () -> tensor<f32> loc("file.py":3:1)
    return %0, %0 : tensor<f32>, tensor<f32> loc(callsite(#loc1 at #loc2))
  } loc(#loc3)
  func.func private @decl(tensor<2xf32>, i32) -> tensor<2xf32>
}
#loc1 = loc("x")
""")
    assert module.name == "m" and module.attributes == {"mhlo.num_partitions": IntegerAttr(1, IntegerType(32))}
    f = module.function("f")
    assert f.arguments[0].type == TensorType(None, F32) and f.arguments[0].attributes == {
        "jax.arg_info": StringAttr("a")}
    assert f.arguments[1].type == TupleType((TensorType((), IntegerType(8, "signed")), ComplexType(FloatType("f64"))))
    assert f.arguments[2].type.element.scales == (0.25,) and f.arguments[3].type == IndexType()
    assert len(f.result_types) == 2 and f.result_attributes[0] == {"jax.result_info": StringAttr("")}
    assert f.attributes == {"some.attr": UnitAttr()}
    assert f.operations[0].attr("dims") == DotDimensionNumbers((), (), (1,), (0,))
    decl = module.function("decl")
    assert decl.body is None and [str(a.type) for a in decl.arguments] == ["tensor<2xf32>", "i32"]


def test_int_list_accepts_all_integer_list_forms():
    assert int_list(DenseArrayAttr(I64, (1, 2))) == (1, 2)
    assert int_list(DenseElementsAttr(TensorType((2,), I64), (3, 4))) == (3, 4)
    assert int_list(DenseElementsAttr(TensorType((3,), I64), (5,), splat=True)) == (5, 5, 5)
    assert int_list(ArrayAttr((IntegerAttr(6),))) == (6,)
    with pytest.raises(TypeError):
        int_list(ArrayAttr((StringAttr("x"),)))


# --------------------------------------------------------------------------------------------------- errors

ERRORS = [  # (statement on line 3, text at the reported column or None for "return" on line 4, message)
    ("%0 = stablehlo.transpose %a, perm = [1, 0] : tensor<2x3xf32>", "perm", "expected SSA value or 'dims ='"),
    ("%0 = stablehlo.add %a, %b", None, "expected ':' and the types of 'stablehlo.add', found 'return'"),
    ("%0 = stablehlo.frobnicate %a, 3 : tensor<2x3xf32>", "3", "expected SSA value in 'stablehlo.frobnicate'"),
    ("%0 = stablehlo.constant dense<[1, 2, 3]> : tensor<2xi8>", "tensor", "shape [3] does not match [2]"),
    ("%0 = stablehlo.constant dense<[1, 300]> : tensor<2xi8>", "300", "integer 300 does not fit i8"),
    ("%0 = stablehlo.constant dense<[[1], [2, 3]]> : tensor<2x1xi8>", "[2", "rows have different shapes"),
    ('%0 = stablehlo.constant dense<"0x0102"> : tensor<3xi8>', '"0x', "hex blob has 2 bytes"),
    ("%0 = stablehlo.constant dense_resource<blob> : tensor<2xf32>", "dense_", "'dense_resource' attributes are not"),
    ("%0 = stablehlo.constant dense<1> : tensor<?xf32>", "tensor", "statically shaped"),
    ("%0 = stablehlo.add %a, %zz : tensor<2x3xf32>", "%zz", "use of undefined %zz"),
    ("%a = stablehlo.add %a, %b : tensor<2x3xf32>", "%a", "redefinition of %a"),
    ('%0:2 = "x.y"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>', ": (", "has 1 results but 2 are bound"),
    ('%0 = "x.y"(%a, %b) : (tensor<2x3xf32>) -> tensor<2x3xf32>', ":", "has 2 operands but 1 operand types"),
    ("%0 = stablehlo.compare XX, %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>", "XX",
     "expected comparison_direction (EQ, NE, GE, GT, LE, LT), found 'XX'"),
    ("%0 = stablehlo.convolution(%a, %b) dim_numbers = [b, 0, f]x[0, i, o]->[b, f, f], window = {} : "
     "(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>", "f],", "dimension 'f' appears twice"),
    ("%0 = stablehlo.convolution(%a, %b) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {step = [1]} : "
     "(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>", "step", "unknown window attribute 'step'"),
    ('%0 = "x.y"() : () -> tensor<2x!quant.uniform<i8:f32, {0.1:1}>>', "{0.1", "needs a quantized dimension"),
    ('%0 = "x.y"() : () -> tensor<2x!quant.uniform<i8<-200:127>:f32, 1.0>>', "<-200", "storage range -200:127"),
    ('%0 = "x.y"() : () -> tensor<2x!quant.uniform<i8:i32, 1.0>>', "i32", "expected float expressed type"),
    ('%0 = "x.y"() : () -> tensor<2x3>', "3>", "expected type, found '3'"),
    ('%0 = "x.y"() : () -> !unknown', "!unknown", "undefined type alias '!unknown'"),
    ('%0 = "x.y"() {a = 1, a = 2} : () -> ()', "a = 2", "duplicate attribute 'a'"),
    ('%0 = "x.y"() {a = #stablehlo.gather<oops = [1]>} : () -> ()', "#", "unknown field 'oops'"),
    ("%0 = ' ", "'", "unexpected character \"'\""),
    ('%0 = "x.y', '"', "unterminated string"),
    ("frobnicate %a", "frob", "unknown operation 'frobnicate'"),
    ("%0 = stablehlo.reduce(%a init: %s) applies add across dimensions = [1] : "
     "(tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>", "add", "expected operation name after 'applies'"),
]


@pytest.mark.parametrize("body,anchor,message", ERRORS, ids=[e[2][:30] for e in ERRORS])
def test_error_positions(body, anchor, message):
    text = ("func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %s: tensor<f32>) {\n"
            f"  // a comment\n  {body}\n  return\n}}\n")
    line, col = (4, 3) if anchor is None else (3, 3 + body.index(anchor))
    with pytest.raises(MlirSyntaxError) as info:
        parse_module(text, "bad.mlir")
    assert isinstance(info.value, GraphError)
    assert (info.value.line, info.value.col) == (line, col), str(info.value)
    assert str(info.value).startswith(f"bad.mlir:{line}:{col}: ") and message in str(info.value)


def test_error_positions_are_file_positions_across_chunks():
    text = 'func.func @a() {\n  return\n}\n// -----\nfunc.func @b() {\n  return\n}\n// -----\n\n  %0 = "x"(%q) : '
    with pytest.raises(MlirSyntaxError, match=r"^in\.mlir:10:18: expected '\(', found end of input"):
        parse_chunks(text, "in.mlir")
    with pytest.raises(MlirSyntaxError, match=r"^in\.mlir:11:1: expected '\(', found end of input"):  # chunk end
        parse_chunks(text + "\n// -----\n", "in.mlir")
    modules = parse_chunks(text.rsplit("// -----", 1)[0], "in.mlir")
    assert [(m.line_offset, m.functions[0].name, m.functions[0].line) for m in modules] == [(0, "a", 1), (3, "b", 5)]


@pytest.mark.parametrize("text", [
    "func.func @f() {\n  %0 = stablehlo.constant dense<" + "[" * 5000 + "1" + "]" * 5000 + "> : tensor<f32>\n}",
    "!a = " + "tuple<" * 5000,
    '"x.y"() ({' * 2000,
    '"x.y"() {a = ' + "[" * 5000,
])
def test_deep_nesting_is_a_syntax_error(text):
    with pytest.raises(MlirSyntaxError, match="nesting deeper than"):
        parse_module(text)


def test_parse_file_reports_unreadable_input(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_bytes(b"func.func @f() {\n  return \xff\n}\n")
    with pytest.raises(MlirSyntaxError, match=r"bad\.mlir:2:10: expected UTF-8 text"):
        parse_file(bad)
    with pytest.raises(QcError, match="cannot read"):
        parse_file(tmp_path / "missing.mlir")


def test_quant_cast_short_forms():
    q = "tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>"
    qcast = one_op(f"%0 = quant.qcast %v : tensor<4xf32> to {q}")
    assert qcast.name == "quant.qcast" and qcast.operands == [ValueRef("%v")]
    assert str(qcast.operand_types[0]) == "tensor<4xf32>" and qcast.result_types[0].element.scales == (0.5,)
    dcast = one_op(f"%0 = quant.dcast %q : {q} to tensor<4xf32>")
    assert str(dcast.result_types[0]) == "tensor<4xf32>" and dcast.operand_types[0].element.zero_points == (0,)
    with pytest.raises(MlirSyntaxError, match="'to'"):
        one_op(f"%0 = quant.qcast %v : tensor<4xf32>, {q}")


def test_check_tolerance_keyword():
    almost = one_op("check.expect_almost_eq %v, %w, tolerance = 2.5e-1 : tensor<4xf32>")
    assert almost.attr("tolerance") == FloatAttr(0.25, "2.5e-1", None) and len(almost.operand_types) == 2
    const = one_op("check.expect_almost_eq_const %v, dense<1.0> : tensor<4xf32>, tolerance = 1.0e-3")
    assert const.attr("tolerance") == FloatAttr(1e-3, "1.0e-3", None)
    assert str(const.operand_types[0]) == "tensor<4xf32>"
