"""CONCAT, PAD, RESHAPE, TRANSPOSE, SLICE: generated C == numpy reference over random shapes and
parameters, hand-computed examples, in-place RESHAPE/CLAMP through the memory planner, ERROR_IF."""

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.codegen import generate, load_target
from qcodegen.errors import GraphError
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.kernels import plan_kernels
from qcodegen.reference import run_reference
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule
from qcodegen.verify.runners import unavailable

TYPES = ["i8", "u8", "i16", "u16", "i32", "f32"]
shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)


def one(op, in_shape, out_shape, dt="i16", **attrs):
    return step_schedule(op, [Var(in_shape, dt)], [(out_shape, dt)], **attrs)


def ref(sched, *xs):
    arrays = [np.asarray(x, sched.buffers[n].dtype.numpy) for x, n in zip(xs, sched.inputs, strict=True)]
    return run_reference(prepare(sched), arrays)["out0"].tolist()


# ---- hand-computed examples -----------------------------------------------------------------------

def test_examples():
    x = [[1, 2, 3], [4, 5, 6]]
    assert ref(one("TRANSPOSE", (2, 3), (3, 2), perms=[1, 0]), x) == [[1, 4], [2, 5], [3, 6]]
    assert ref(one("SLICE", (2, 3), (1, 2), start=[1, 1], size=[1, 2]), x) == [[5, 6]]
    assert ref(one("RESHAPE", (2, 3), (3, 2), shape=[3, 2]), x) == [[1, 2], [3, 4], [5, 6]]
    assert ref(one("PAD", (2, 3), (3, 5), padding=[0, 1, 2, 0], pad_const=-9), x) == [
        [-9, -9, 1, 2, 3], [-9, -9, 4, 5, 6], [-9, -9, -9, -9, -9]]
    cat = step_schedule("CONCAT", [Var((2, 1), "i8"), Var((2, 2), "i8")], [((2, 3), "i8")], axis=1)
    assert ref(cat, [[7], [8]], [[1, 2], [3, 4]]) == [[7, 1, 2], [8, 3, 4]]


def test_transpose_rank3_index_rule():
    # out[i] = in[t] with t[perms[j]] = i[j]: out[a, b, c] = in[b, c, a] for perms [2, 0, 1]
    x = np.arange(24).reshape(2, 3, 4)
    out = np.array(ref(one("TRANSPOSE", (2, 3, 4), (4, 2, 3), perms=[2, 0, 1]), x))
    assert out.shape == (4, 2, 3) and out[3, 1, 2] == x[1, 2, 3] and out[1, 0, 2] == x[0, 2, 1]


def test_pad_f32_constant_and_value_range():
    sched = one("PAD", (2, 2), (2, 4), "f32", padding=[0, 0, 1, 1], pad_const=-0.5)
    assert ref(sched, [[1.5, 2.0], [-0.0, 3.0]]) == [[-0.5, 1.5, 2.0, -0.5], [-0.5, -0.0, 3.0, -0.5]]
    assert_bit_exact(sched, samples=2)
    sched = prepare(step_schedule("PAD", [Var((3,), "i8", 0, 10)], [((5,), "i8")], padding=[1, 1],
                                  pad_const=-128))
    assert sched.buffers["out0"].value_range == (-128, 10)


def chain_schedule():
    """CLAMP in -> t1, RESHAPE t1 -> t2, CLAMP t2 -> t3, TRANSPOSE t3 -> out: steps 1 and 2 run in place."""
    s = Schedule("chain")
    s.add_buffer(Buffer("x", (4, 6), dtype("i8"), INPUT))
    for name, shape in (("t1", (4, 6)), ("t2", (2, 12)), ("t3", (2, 12))):
        s.add_buffer(Buffer(name, shape, dtype("i8"), TEMP))
    s.add_buffer(Buffer("y", (12, 2), dtype("i8"), OUTPUT))
    s.inputs, s.outputs = ["x"], ["y"]
    s.steps = [Step("CLAMP", ["x"], ["t1"], dict(min_val=-100, max_val=100)),
               Step("RESHAPE", ["t1"], ["t2"], dict(shape=[2, 12])),
               Step("CLAMP", ["t2"], ["t3"], dict(min_val=-50, max_val=120)),
               Step("TRANSPOSE", ["t3"], ["y"], dict(perms=[1, 0]))]
    return s


def test_inplace_reshape_emits_no_code():
    sched = prepare(chain_schedule())
    b = sched.buffers
    assert b["t1"].offset == b["t2"].offset == b["t3"].offset  # the planner chained the in-place steps
    with tempfile.TemporaryDirectory() as tmp:
        model = generate(sched, Path(tmp), load_target("generic"))
        body = (model.outdir / "chain.c").read_text().split("step 1: RESHAPE")[1].split("step 2")[0]
    assert "for (" not in body and "(void)in0;" in body
    assert_bit_exact(sched, samples=3)


def test_reshape_copies_when_not_aliased():
    sched = prepare(one("RESHAPE", (4, 6), (24,), shape=[24]))  # model input -> model output: a copy
    assert_bit_exact(sched, samples=2)


@pytest.mark.parametrize("bad", [
    lambda: one("TRANSPOSE", (2, 3), (3, 2), perms=[1, 1]),
    lambda: one("TRANSPOSE", (2, 3), (3, 2), perms=[1, 0, 2]),
    lambda: one("SLICE", (2, 3), (1, 2), start=[1, 2], size=[1, 2]),  # past the end
    lambda: one("SLICE", (2, 3), (1, 2), start=[-1, 0], size=[1, 2]),
    lambda: one("SLICE", (2, 3), (1,), start=[0], size=[1]),  # rank mismatch
    lambda: one("RESHAPE", (2, 3), (4, 2), shape=[4, 2]),
    lambda: one("RESHAPE", (2, 3), (6,), shape=[-1]),
    lambda: one("PAD", (2, 3), (2, 2), padding=[0, 0, -1, 0]),
    lambda: one("PAD", (2, 3), (2, 4), padding=[0, 0, 1, 1]),  # output shape disagrees
    lambda: one("PAD", (2, 3), (2, 5), "i8", padding=[0, 0, 1, 1], pad_const=200),
    lambda: one("PAD", (2, 3), (4, 3), padding=[1, 1]),  # too few padding values
    lambda: step_schedule("CONCAT", [Var((2, 1), "i8"), Var((3, 2), "i8")], [((2, 3), "i8")], axis=1),
    lambda: step_schedule("CONCAT", [Var((2, 1), "i8"), Var((2, 2), "i16")], [((2, 3), "i8")], axis=1),
    lambda: step_schedule("CONCAT", [Var((2, 1), "i8"), Var((2, 2), "i8")], [((2, 3), "i8")], axis=2),
    lambda: step_schedule("TRANSPOSE", [Var((2, 3), "i8")], [((3, 2), "i16")], perms=[1, 0]),
])
def test_error_if(bad):
    with pytest.raises(GraphError):
        prepare(bad())


# ---- property tests -------------------------------------------------------------------------------

@given(shape=shapes, dt=st.sampled_from(TYPES), data=st.data())
def test_transpose_c_matches_reference(shape, dt, data):
    perms = data.draw(st.permutations(range(len(shape))))
    out = tuple(shape[p] for p in perms)
    assert_bit_exact(one("TRANSPOSE", shape, out, dt, perms=list(perms)), samples=2)


@given(shape=shapes, dt=st.sampled_from(TYPES), data=st.data())
def test_slice_c_matches_reference(shape, dt, data):
    start = [data.draw(st.integers(0, d - 1)) for d in shape]
    size = [data.draw(st.integers(1, d - b)) for d, b in zip(shape, start, strict=True)]
    assert_bit_exact(one("SLICE", shape, tuple(size), dt, start=start, size=size), samples=2)


@given(shape=shapes, dt=st.sampled_from(TYPES), data=st.data())
def test_pad_c_matches_reference(shape, dt, data):
    padding = data.draw(st.lists(st.integers(0, 2), min_size=2 * len(shape), max_size=2 * len(shape)))
    if dt == "f32":
        const = data.draw(st.floats(-4, 4, width=32))
    else:
        d = dtype(dt)
        const = data.draw(st.integers(d.min, d.max))
    out = tuple(n + padding[2 * k] + padding[2 * k + 1] for k, n in enumerate(shape))
    assert_bit_exact(one("PAD", shape, out, dt, padding=padding, pad_const=const), samples=2)


@given(shape=shapes, dt=st.sampled_from(TYPES), data=st.data())
def test_concat_c_matches_reference(shape, dt, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    extents = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    ins = [Var(shape[:axis] + (e,) + shape[axis + 1:], dt) for e in extents]
    out = shape[:axis] + (sum(extents),) + shape[axis + 1:]
    assert_bit_exact(step_schedule("CONCAT", ins, [(out, dt)], axis=axis), samples=2)


@given(shape=shapes, dt=st.sampled_from(TYPES), data=st.data())
def test_reshape_c_matches_reference(shape, dt, data):
    flat = data.draw(st.permutations([d for d in shape]))  # same size, other order
    assert_bit_exact(one("RESHAPE", shape, tuple(flat), dt, shape=list(flat)), samples=2)



def movement_chain_schedule(dt: str) -> Schedule:
    """SLICE of whole rows (one contiguous run) and of columns (a run per row), PAD (a run per row), CONCAT (a run
    per row of each input), TRANSPOSE (element loops): one model of block copies and element loops."""
    s = Schedule(f"moves_{dt}")
    s.add_buffer(Buffer("x", (6, 5), dtype(dt), INPUT))
    for name, shape in (("rows", (3, 5)), ("padded", (4, 7)), ("cols", (4, 3)), ("joined", (4, 10))):
        s.add_buffer(Buffer(name, shape, dtype(dt), TEMP))
    s.add_buffer(Buffer("y", (10, 4), dtype(dt), OUTPUT))
    s.inputs, s.outputs = ["x"], ["y"]
    s.steps = [Step("SLICE", ["x"], ["rows"], dict(start=[2, 0], size=[3, 5])),
               Step("PAD", ["rows"], ["padded"], dict(padding=[1, 0, 1, 1], pad_const=0)),
               Step("SLICE", ["x"], ["cols"], dict(start=[1, 1], size=[4, 3])),
               Step("CONCAT", ["cols", "padded"], ["joined"], dict(axis=1)),
               Step("TRANSPOSE", ["joined"], ["y"], dict(perms=[1, 0]))]
    return s


@pytest.mark.parametrize("dt", ["i8", "i16", "f32"])
def test_cortex_m_block_copies(dt, tmp_path):
    """Cortex-M: every contiguous run of a data-movement step is one qc_cm_copy (5 here: the rows SLICE, PAD's
    rows, the columns SLICE's rows, CONCAT's two inputs' rows; TRANSPOSE keeps its element loop); bit-exact
    under QEMU."""
    target = load_target("cortex-m4")
    if unavailable(target):
        pytest.skip(f"cortex-m4: {unavailable(target)}")
    sched = prepare(movement_chain_schedule(dt))
    model = generate(sched, tmp_path, target)
    code = (model.outdir / f"{model.name}.c").read_text()
    assert code.count("qc_cm_copy(") == 5
    assert_bit_exact(sched, samples=2, target=target)


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_cortex_m_copy_files_with_the_steps_that_copy_runs(target):
    """The Cortex-M kernel families give qc_cm_copy's files to the data-movement steps with a contiguous run (the
    SLICEs, PAD, CONCAT of movement_chain_schedule), not to TRANSPOSE (element loops only)."""
    kp = plan_kernels(prepare(movement_chain_schedule("i8")), load_target(target), "moves")
    files = {s.op: s.choice.files for s in kp.steps}
    copy = ("cortex-m/qc_cm_copy.h", "cortex-m/qc_cm_copy.c")
    assert files == {"SLICE": copy, "PAD": copy, "CONCAT": copy, "TRANSPOSE": ()}
