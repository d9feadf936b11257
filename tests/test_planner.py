"""Memory plan: live buffers never overlap, in-place reuse is taken where legal, the lower bound holds."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from qcodegen.compiler import check_schedule
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.plan.memory import ALIGN, plan_memory
from qcodegen.plan.ranges import analyse_ranges
from qcodegen.testing import assert_bit_exact


def rescale(src, dst, narrow):
    return Step("RESCALE", [src], [dst], dict(multiplier=[1 << 30], shift=[30 if narrow else 20], input_zp=0,
                                              output_zp=0, scale32=True, rounding="single_round"))


def random_dag(draw, n_steps):
    """A DAG of RESCALE steps over i8/i32 buffers; each step reads an earlier buffer."""
    sched = Schedule("dag")
    sched.add_buffer(Buffer("x", (draw(st.integers(1, 40)),), dtype("i8"), INPUT))
    sched.inputs = ["x"]
    names = ["x"]
    for k in range(n_steps):
        src = names[draw(st.integers(max(0, len(names) - 3), len(names) - 1))]
        src_t = sched.buffers[src].dtype.name
        out_t = draw(st.sampled_from(["i8", "i32"])) if src_t == "i8" else "i8"
        name = f"t{k}"
        sched.add_buffer(Buffer(name, sched.buffers[src].shape, dtype(out_t), TEMP))
        step = rescale(src, name, narrow=(out_t == "i8"))
        if src_t == "i32":
            step.attrs["shift"] = [40]
        sched.steps.append(step)
        names.append(name)
    sched.buffers[names[-1]].kind = OUTPUT
    sched.outputs = [names[-1]]
    return sched


def lifetimes(sched):
    first, last = {}, {}
    for k, s in enumerate(sched.steps):
        for n in s.outputs:
            first.setdefault(n, k)
            last.setdefault(n, k)
        for n in s.inputs:
            last[n] = k
    return first, last


@given(st.data(), st.integers(1, 12))
def test_live_buffers_never_overlap(data, n_steps):
    sched = random_dag(data.draw, n_steps)
    check_schedule(sched)
    analyse_ranges(sched)
    plan_memory(sched)
    first, last = lifetimes(sched)
    temps = [b for b in sched.buffers.values() if b.kind == TEMP and b.name in first]
    for b in temps:
        assert b.offset % ALIGN == 0 and b.offset + b.nbytes <= sched.arena_size
    for i, a in enumerate(temps):
        for b in temps[i + 1:]:
            live_together = first[a.name] <= last[b.name] and first[b.name] <= last[a.name]
            disjoint = a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset
            # in-place: b written by the step that last reads a (same element size, element-wise)
            inplace = (first[b.name] == last[a.name] and a.offset == b.offset) or \
                      (first[a.name] == last[b.name] and a.offset == b.offset)
            assert not live_together or disjoint or inplace, (a.name, b.name)
    assert sched.arena_lower_bound <= sched.arena_size
    assert_bit_exact(sched, samples=2)


def test_inplace_chain_uses_one_slot():
    sched = Schedule("chain")
    sched.add_buffer(Buffer("x", (64,), dtype("i8"), INPUT))
    sched.inputs = ["x"]
    prev = "x"
    for k in range(4):
        sched.add_buffer(Buffer(f"t{k}", (64,), dtype("i8"), TEMP if k < 3 else OUTPUT))
        sched.steps.append(rescale(prev, f"t{k}", narrow=True))
        prev = f"t{k}"
    sched.outputs = ["t3"]
    check_schedule(sched)
    analyse_ranges(sched)
    plan_memory(sched)
    assert {sched.buffers[f"t{k}"].offset for k in range(3)} == {0}
    assert sched.arena_size == 64 and sched.arena_lower_bound == 64
    assert_bit_exact(sched, samples=2)


def test_lower_bound_counts_simultaneously_live_buffers():
    # x -> a (i32, 4*10 B) ; x -> b (i32) ; a -> c (i8) ; b -> out ; c unused later: a and b live together
    sched = Schedule("lb")
    sched.add_buffer(Buffer("x", (10,), dtype("i8"), INPUT))
    sched.inputs = ["x"]
    for n, t in (("a", "i32"), ("b", "i32"), ("c", "i8")):
        sched.add_buffer(Buffer(n, (10,), dtype(t), TEMP))
    sched.add_buffer(Buffer("y", (10,), dtype("i8"), OUTPUT))
    sched.steps = [rescale("x", "a", False), rescale("x", "b", False), rescale("a", "c", True),
                   rescale("b", "y", True)]
    for s in sched.steps[2:]:
        s.attrs["shift"] = [40]
    sched.outputs = ["y"]
    check_schedule(sched)
    analyse_ranges(sched)
    plan_memory(sched)
    assert sched.arena_lower_bound == 80  # a and b (40 B each) live across step 1 and 2; c is in place
    assert sched.arena_size >= 80
    np.testing.assert_equal(sched.buffers["a"].offset != sched.buffers["b"].offset, True)
