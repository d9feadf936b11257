"""The primitives the StableHLO lowering added: LOOKUP (full tables, one or two inputs, per channel), STRIDED_COPY
(broadcast / reverse / strided views) and GATHER_SLICES (StableHLO gather). Hand-computed examples for the
references (the gather one is the StableHLO spec's example), ERROR_IF-style checks, and generated C == reference
(hypothesis; gcc, and clang under ASan/UBSan through the harness)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.compiler import check_schedule
from qcodegen.errors import GraphError
from qcodegen.reference import run_reference
from qcodegen.testing import Const, Var, assert_bit_exact, assert_clang_sanitized, prepare, step_schedule


def run(sched, *inputs):
    bufs = [sched.buffers[n] for n in sched.inputs]
    values = run_reference(prepare(sched), [np.asarray(x, b.dtype.numpy) for x, b in zip(inputs, bufs, strict=True)])
    return values["out0"]


# ------------------------------------------------------------------------------------------------- LOOKUP


def test_lookup_one_input_by_hand():
    table = 3 * np.arange(256) - 5  # i32 entries: out = 3 (x + 128) - 5
    sched = step_schedule("LOOKUP", [Var((4,), "i8"), Const(table, "i32")], [((4,), "i32")])
    assert run(sched, [-128, -1, 0, 127]).tolist() == [-5, 376, 379, 760]
    u8 = step_schedule("LOOKUP", [Var((3,), "u8"), Const(np.arange(256)[::-1], "u8")], [((3,), "u8")])
    assert run(u8, [0, 1, 255]).tolist() == [255, 254, 0]
    assert_bit_exact(sched, samples=2)
    assert_bit_exact(u8, samples=2)


def test_lookup_per_channel_by_hand():
    tables = np.arange(3)[:, None] * 1000 + np.arange(256)[None, :]  # table c: c * 1000 + (x + 128)
    sched = step_schedule("LOOKUP", [Var((2, 3, 2), "i8"), Const(tables, "i16")], [((2, 3, 2), "i16")], axis=1)
    x = np.array([[[0, 1], [0, 1], [-128, 127]], [[5, 5], [5, 5], [5, 5]]])
    assert run(sched, x).tolist() == [[[128, 129], [1128, 1129], [2000, 2255]],
                                      [[133, 133], [1133, 1133], [2133, 2133]]]
    assert_bit_exact(sched, samples=2)


def test_lookup_two_inputs_by_hand():
    table = (np.arange(65536) % 1000) - 500  # out = ((a + 128) * 256 + b) % 1000 - 500
    sched = step_schedule("LOOKUP", [Var((2, 1), "i8"), Var((1, 3), "u8"), Const(table, "i16")], [((2, 3), "i16")])
    out = run(sched, [[-128], [1]], [[0, 7, 255]])
    assert out.tolist() == [[-500, -493, -245], [(129 * 256) % 1000 - 500, (129 * 256 + 7) % 1000 - 500,
                                                 (129 * 256 + 255) % 1000 - 500]]
    assert_bit_exact(sched, samples=2)


def test_lookup_full_i16_table_and_ranges():
    table = (np.arange(65536) * 7919) % 65536 - 32768
    sched = step_schedule("LOOKUP", [Var((64,), "i16", -10, 10), Const(table, "i16")], [((64,), "i16")])
    assert run(sched, np.arange(-10, 54) % 21 - 10).tolist() == table[np.arange(-10, 54) % 21 - 10 + 32768].tolist()
    reached = table[32768 - 10:32768 + 11]
    assert sched.buffers["out0"].value_range == (int(reached.min()), int(reached.max()))  # only reachable entries
    assert_bit_exact(sched, samples=3)


@pytest.mark.parametrize(("inputs", "attrs", "message"), [
    ([Var((4,), "i8"), Const(np.zeros(255), "i8")], {}, "table shape"),
    ([Var((4,), "i32"), Const(np.zeros(256), "i8")], {}, "input type"),
    ([Var((4,), "i16"), Var((4,), "i8"), Const(np.zeros(4), "i8")], {}, "entries exceed"),
    ([Var((4,), "i8"), Const(np.zeros(256), "i16")], {}, "differs from the output type"),
    ([Var((2, 3), "i8"), Const(np.zeros((2, 256)), "i8")], {"axis": 1}, "table shape"),
])
def test_lookup_errors(inputs, attrs, message):
    with pytest.raises(GraphError, match=message):
        check_schedule(step_schedule("LOOKUP", inputs, [((4,) if inputs[0].shape == (4,) else (2, 3), "i8")],
                                     **attrs))


@given(st.data())
def test_lookup_matches_c(data):
    kinds = ("i8", "u8", "i16", "u16")
    a = data.draw(st.sampled_from(kinds))
    two = a in ("i8", "u8") and data.draw(st.booleans())
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    out = data.draw(st.sampled_from(("i8", "i16", "i32", "u8")))
    lo, hi = {"i8": (-128, 127), "u8": (0, 255), "i16": (-32768, 32767), "i32": (-(1 << 31), (1 << 31) - 1)}[out]
    rng = np.random.default_rng(data.draw(st.integers(0, 1 << 30)))
    inputs = [Var(shape, a)]
    entries = 1 << int(a[1:])
    if two:
        b = data.draw(st.sampled_from(("i8", "u8")))
        inputs.append(Var(tuple(1 if k % 2 else d for k, d in enumerate(shape)), b))
        entries *= 256
    per_channel = not two and data.draw(st.booleans())
    axis = data.draw(st.integers(0, len(shape) - 1)) if per_channel else None
    table_shape = (shape[axis], entries) if per_channel else (entries,)
    inputs.append(Const(rng.integers(lo, hi, table_shape, endpoint=True), out))
    attrs = {"axis": axis} if per_channel else {}
    assert_bit_exact(step_schedule("LOOKUP", inputs, [(shape, out)], **attrs), samples=2, seed=1)


# ------------------------------------------------------------------------------------------- STRIDED_COPY


def strided(x_shape, out_shape, offset, strides, dtype="i8"):
    return step_schedule("STRIDED_COPY", [Var(x_shape, dtype)], [(out_shape, dtype)], offset=offset, strides=strides)


def test_strided_copy_by_hand():
    x = np.arange(12).reshape(3, 4)
    assert run(strided((3, 4), (2, 4), 4, [0, 1]), x).tolist() == [[4, 5, 6, 7], [4, 5, 6, 7]]  # broadcast row 1
    assert run(strided((3, 4), (3, 4), 11, [-4, -1]), x).tolist() == np.flip(x).tolist()  # reverse both axes
    assert run(strided((3, 4), (2, 2), 1, [8, 2]), x).tolist() == [[1, 3], [9, 11]]  # x[0::2, 1::2]
    assert run(strided((3, 4), (4, 3), 0, [1, 4]), x).tolist() == x.T.tolist()  # a transpose
    with pytest.raises(GraphError, match="outside"):
        check_schedule(strided((3, 4), (2, 4), 8, [4, 1]))


@given(st.data())
def test_strided_copy_matches_c(data):
    x_shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    size = int(np.prod(x_shape))
    out_shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    strides = [data.draw(st.integers(-size, size)) for _ in out_shape]
    span_lo = sum(min(0, s * (n - 1)) for s, n in zip(strides, out_shape, strict=True))
    span_hi = sum(max(0, s * (n - 1)) for s, n in zip(strides, out_shape, strict=True))
    if span_hi - span_lo >= size:
        strides = [0] * len(out_shape)
        span_lo = span_hi = 0
    offset = data.draw(st.integers(-span_lo, size - 1 - span_hi))
    dtype = data.draw(st.sampled_from(("i8", "i16", "i32", "u8", "f32")))
    assert_bit_exact(strided(x_shape, out_shape, offset, strides, dtype), samples=2)


# ------------------------------------------------------------------------------------------ GATHER_SLICES

SPEC_OPERAND = np.arange(1, 49).reshape(2, 3, 4, 2)
SPEC_INDICES = np.array([[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                         [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]])
SPEC_RESULT = [[[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
                [[[33, 34], [35, 36]], [[35, 36], [37, 38]], [[41, 42], [43, 44]]]],
               [[[[1, 2], [3, 4]], [[13, 14], [15, 16]], [[21, 22], [23, 24]]],
                [[[43, 44], [45, 46]], [[33, 34], [35, 36]], [[27, 28], [29, 30]]]]]
SPEC_ATTRS = dict(offset_dims=[3, 4], collapsed_slice_dims=[1], operand_batching_dims=[0],
                  start_indices_batching_dims=[1], start_index_map=[2, 1], index_vector_dim=3,
                  slice_sizes=[1, 1, 2, 2])


def gather(operand, indices, out_shape, dtype="i8", const_indices=True, **attrs):
    idx = Const(indices, "i32") if const_indices else Var(np.shape(indices), "i32", -3, 12)
    return step_schedule("GATHER_SLICES", [Var(np.shape(operand), dtype), idx], [(out_shape, dtype)], **attrs)


def test_gather_spec_example():
    """The StableHLO spec's gather example (operand batching dimensions, clamped start index 9)."""
    sched = gather(SPEC_OPERAND, SPEC_INDICES, (2, 2, 3, 2, 2), **SPEC_ATTRS)
    assert run(sched, SPEC_OPERAND).tolist() == SPEC_RESULT
    assert_bit_exact(sched, inputs=[[SPEC_OPERAND.astype(np.int8)]])


def test_gather_runtime_indices_clamped():
    """Rows of a matrix by run-time indices (TOSA-style gather), indices beyond either end clamped."""
    operand = np.arange(20).reshape(5, 4)
    sched = gather(operand, np.zeros((3, 1)), (3, 4), const_indices=False, offset_dims=[1],
                   collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 4])
    assert run(sched, operand, [[-3], [2], [12]]).tolist() == [operand[0].tolist(), operand[2].tolist(),
                                                               operand[4].tolist()]
    assert_bit_exact(sched, samples=3)


@given(st.data())
def test_gather_matches_c(data):
    """A window of a 3-D operand at one start vector per batch element (index_vector_dim last, implicit or not)."""
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=3, max_size=3)))
    sizes = [data.draw(st.integers(1, d)) for d in shape]
    batch = data.draw(st.integers(1, 3))
    implicit = data.draw(st.booleans())
    dims = [data.draw(st.integers(0, 2))] if implicit else [0, 1, 2]
    rng = np.random.default_rng(data.draw(st.integers(0, 1 << 30)))
    indices = rng.integers(-2, 6, (batch,) if implicit else (batch, 3))
    collapsed = [d for d in dims if sizes[d] == 1][:1]
    offset_sizes = [s for d, s in enumerate(sizes) if d not in collapsed]
    attrs = dict(offset_dims=list(range(1, 1 + len(offset_sizes))), collapsed_slice_dims=collapsed,
                 start_index_map=dims, index_vector_dim=1, slice_sizes=sizes)
    sched = gather(np.zeros(shape), indices, (batch, *offset_sizes), const_indices=False, **attrs)
    assert_bit_exact(sched, samples=2, inputs=[[rng.integers(-128, 127, shape).astype(np.int8),
                                                indices.astype(np.int32)]])


def test_gather_errors():
    with pytest.raises(GraphError, match="start_index_map"):
        check_schedule(gather(SPEC_OPERAND, SPEC_INDICES, (2, 2, 3, 2, 2), **{**SPEC_ATTRS, "start_index_map": [2]}))
    with pytest.raises(GraphError, match="slice size 1"):
        check_schedule(gather(SPEC_OPERAND, SPEC_INDICES, (2, 2, 3, 2, 2),
                              **{**SPEC_ATTRS, "slice_sizes": [1, 2, 2, 2]}))


@pytest.mark.parametrize("sched", [
    gather(SPEC_OPERAND, SPEC_INDICES, (2, 2, 3, 2, 2), **SPEC_ATTRS),
    strided((3, 4), (3, 4), 11, [-4, -1], "i16"),
    step_schedule("LOOKUP", [Var((3, 5), "i8"), Var((3, 1), "u8"), Const(np.arange(65536) % 251, "u8")],
                  [((3, 5), "u8")]),
], ids=["gather", "strided", "lookup2"])
def test_clang_sanitizers(sched):
    """clang with the target's -Werror flags, run as the harness under ASan/UBSan."""
    assert_clang_sanitized(sched)


# --------------------------------------------------------------------------------- RESCALE half to even, odd ties


def test_rescale_half_even_rounds_the_result_with_its_zero_point():
    """StableHLO quantizes round(x / s + zp): the tie of the scaled value goes to the neighbour that makes the
    result even. x * 0.5 for x = 1, 3, 5 is 0.5, 1.5, 2.5: with output zero point 1 the results are 2, 2, 4 (1.5,
    2.5, 3.5 rounded to even); per channel, odd_ties [0, 1] sends channel 1's ties to odd values (a zero point
    added later, by an ADD, is odd)."""
    x = Var((3,), "i32", -100, 100)
    odd_zp = step_schedule("RESCALE", [x], [((3,), "i8")], multiplier=[1 << 30], shift=[31], input_zp=0, output_zp=1,
                           scale32=True, rounding="half_even", per_channel=False)
    assert run(odd_zp, [1, 3, 5]).tolist() == [2, 2, 4]
    assert_bit_exact(odd_zp, inputs=[[np.array([1, 3, 5], np.int32)]])
    channels = step_schedule("RESCALE", [Var((3, 2), "i32", -100, 100)], [((3, 2), "i32")], multiplier=[1 << 30] * 2,
                             shift=[31] * 2, input_zp=0, output_zp=0, scale32=True, rounding="half_even",
                             per_channel=True, odd_ties=[0, 1])
    values = np.array([[1, 1], [3, 3], [5, 5]], np.int32)
    assert run(channels, values).tolist() == [[0, 1], [2, 1], [2, 3]]
    assert_bit_exact(channels, inputs=[[values]])
    bad = step_schedule("RESCALE", [x], [((3,), "i8")], multiplier=[1 << 30], shift=[31], input_zp=0, output_zp=0,
                        scale32=True, rounding="single_round", per_channel=False, odd_ties=[1])
    with pytest.raises(GraphError, match="odd_ties needs rounding half_even"):
        check_schedule(bad)
