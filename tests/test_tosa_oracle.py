"""qcodegen's numpy primitives against the TOSA reference model (tosa-tools), bit for bit: each schedule is
exported as a TOSA 1.0 graph (qcodegen.verify.tosa_export) and compared by verify_against_tosa."""

import itertools
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcodegen import primitives
from qcodegen.errors import QcError, UnsupportedError
from qcodegen.ir.dtypes import dtype as get_dtype
from qcodegen.ir.schedule import OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.testing import Const, Var, prepare, step_schedule
from qcodegen.verify.tosa_export import run_tosa_reference, schedule_to_tosa, tosa_modules
from qcodegen.verify.tosa_oracle import verify_against_tosa

_MISSING = "the TOSA reference model is not installed (pip install 'qcodegen[oracles]')"
pytest.importorskip("tosa_serializer", reason=_MISSING)
pytest.importorskip("tosa_reference_model", reason=_MISSING)

UNITY = dict(multiplier=[1 << 30], shift=[30])


def assert_tosa_exact(sched: Schedule, samples: int = 2, seed: int = 0) -> None:
    result = verify_against_tosa(prepare(sched), samples=samples, seed=seed)
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"


def then(sched: Schedule, op: str, shape: tuple[int, ...], dt: str, **attrs) -> Schedule:
    """Append a step consuming the schedule's (single) output; its result becomes the model output."""
    prev = sched.buffers[sched.outputs[0]]
    prev.kind = TEMP
    name = f"y{len(sched.steps)}"
    sched.add_buffer(Buffer(name, tuple(shape), get_dtype(dt), OUTPUT))
    sched.steps.append(Step(op, [prev.name], [name], attrs, source=f"test {op}"))
    sched.outputs = [name]
    return sched


def random_const(rng: np.random.Generator, shape, lo: int, hi: int, dt: str) -> Const:
    return Const(rng.integers(lo, hi, shape, endpoint=True), dt)


def window_geometry(draw, kernel: tuple[int, int], dilation=(1, 1), pad_below_kernel=False):
    """(in_hw, out_hw, stride, pad) with an exact TOSA output size (idiv_check) and a non-empty input."""
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    limit = [k - 1 if pad_below_kernel else 2 for k in kernel]
    pad = [draw(st.integers(0, limit[0])), draw(st.integers(0, limit[0])),
           draw(st.integers(0, limit[1])), draw(st.integers(0, limit[1]))]
    in_hw, out_hw = [], []
    for a in range(2):
        out = draw(st.integers(1, 4))
        size = (out - 1) * stride[a] + (kernel[a] - 1) * dilation[a] + 1 - pad[2 * a] - pad[2 * a + 1]
        while size < 1:
            out += 1
            size += stride[a]
        in_hw.append(size)
        out_hw.append(out)
    return tuple(in_hw), tuple(out_hw), stride, pad


# ---- RESCALE -----------------------------------------------------------------------------------------------

RESCALE_TYPES = [("i8", "i8"), ("i8", "i32"), ("i16", "i16"), ("i32", "i8"), ("i32", "i16"), ("i16", "i32"),
                 ("i32", "i32"), ("u8", "i8"), ("i8", "u8"), ("u16", "i16"), ("i16", "u16"), ("i8", "i16")]


def _zero_point(draw, dt: str) -> int:
    if dt == "i8":
        return draw(st.integers(-128, 127))
    if dt == "u8":
        return draw(st.integers(0, 255))
    if dt == "u16":
        return draw(st.sampled_from([0, 32768]))
    return 0


@given(types=st.sampled_from(RESCALE_TYPES), rounding=st.sampled_from(["single_round", "double_round",
                                                                        "inexact_round"]),
       per_channel=st.booleans(), shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_rescale(types, rounding, per_channel, shape, data):
    x_dt, y_dt = types
    shape = tuple(shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis] if per_channel else 1
    scale32 = x_dt == "i32" or rounding == "double_round" or data.draw(st.booleans())
    top = (1 << 31) - 1 if scale32 else (1 << 15) - 1  # 16-bit multipliers without scale32
    shifts = data.draw(st.lists(st.integers(2, 62), min_size=n, max_size=n))
    mults = data.draw(st.lists(st.sampled_from([0, 1, 1 << (top.bit_length() - 1), top]) | st.integers(0, top),
                               min_size=n, max_size=n))
    izp, ozp = _zero_point(data.draw, x_dt), _zero_point(data.draw, y_dt)
    in_t = get_dtype(x_dt)
    # TOSA REQUIRE: |value| < 2^(shift-1) for shifts <= 31 (value = x - izp)
    bound = 1 << (min(min(shifts), 32) - 1)
    lo, hi = max(in_t.min, izp - bound), min(in_t.max, izp + bound - 1)
    attrs = dict(multiplier=mults, shift=shifts, input_zp=izp, output_zp=ozp, rounding=rounding,
                 per_channel=per_channel, axis=axis, scale32=scale32)
    y_t = get_dtype(y_dt)
    if data.draw(st.booleans()):  # fused clamp (qcodegen extension) -> RESCALE + CLAMP
        a, b = sorted(data.draw(st.integers(y_t.min, y_t.max)) for _ in range(2))
        attrs.update(out_min=a, out_max=b)
    sched = step_schedule("RESCALE", [Var(shape, x_dt, lo, hi)], [(shape, y_dt)], **attrs)
    assert_tosa_exact(sched)


def test_rescale_unsigned_flags_on_signed_containers():
    # i8 buffers flagged unsigned: the u8 bit pattern lives in an int8 container (docs/semantics.md §11.7)
    assert_tosa_exact(step_schedule("RESCALE", [Var((4, 5), "i8")], [((4, 5), "i8")], input_zp=128,
                                    output_zp=-3, input_unsigned=True, **UNITY))
    assert_tosa_exact(step_schedule("RESCALE", [Var((4, 5), "i8")], [((4, 5), "i8")], input_zp=-128,
                                    output_zp=200, output_unsigned=True, out_min=5, out_max=250, **UNITY))


def test_rescale_scale16_on_i16():
    assert_tosa_exact(step_schedule("RESCALE", [Var((3, 7), "i16")], [((3, 7), "i8")], multiplier=[3 << 13] * 7,
                                    shift=list(range(14, 21)), input_zp=0, output_zp=5, scale32=False,
                                    per_channel=True))


@pytest.mark.parametrize("shift", [2, 31, 32, 62])
@pytest.mark.parametrize("rounding", ["single_round", "double_round"])
def test_rescale_shift_boundaries(shift, rounding):
    bound = 1 << (min(shift, 32) - 1)
    sched = step_schedule("RESCALE", [Var((64,), "i32", -bound, bound - 1)], [((64,), "i32")],
                          multiplier=[(1 << 31) - 1], shift=[shift], input_zp=0, output_zp=0, rounding=rounding)
    assert_tosa_exact(sched, samples=3)


# ---- convolutions and MATMUL -------------------------------------------------------------------------------

CONV_TYPES = [("i8", "i8"), ("i8", "i4"), ("i16", "i8")]


@given(types=st.sampled_from(CONV_TYPES), depthwise=st.booleans(), data=st.data())
def test_convolution(types, depthwise, data):
    x_dt, w_dt = types
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    kernel = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    dilation = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    (ih, iw), (oh, ow), stride, pad = window_geometry(data.draw, kernel, dilation)
    n, c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 4))
    m = data.draw(st.integers(1, 3))  # output channels (CONV2D) or depth multiplier
    oc = c * m if depthwise else m
    w_lo, w_hi = (-8, 7) if w_dt == "i4" else (-128, 127)
    w_shape = (kernel[0], kernel[1], c, m) if depthwise else (m, kernel[0], kernel[1], c)
    acc = "i48" if x_dt == "i16" else "i32"
    izp = data.draw(st.integers(-128, 127)) if x_dt == "i8" else 0
    wzp = data.draw(st.integers(-128, 127)) if w_dt == "i8" and x_dt == "i8" else 0
    pad_value = data.draw(st.sampled_from([izp, -128, 127])) if x_dt == "i8" else 0
    bias = random_const(rng, (data.draw(st.sampled_from([1, oc])),), -5000, 5000, acc)
    op = "DEPTHWISE_CONV2D" if depthwise else "CONV2D"
    sched = step_schedule(op, [Var((n, ih, iw, c), x_dt), random_const(rng, w_shape, w_lo, w_hi, w_dt), bias],
                          [((n, oh, ow, oc), acc)], pad=pad, stride=list(stride), dilation=list(dilation),
                          input_zp=izp, weight_zp=wzp, pad_value=pad_value, acc_type=acc)
    if acc == "i48":  # the reference model cannot return INT48: scale the accumulator down to i32
        then(sched, "RESCALE", (n, oh, ow, oc), "i32", multiplier=[1 << 14], shift=[20], input_zp=0,
             output_zp=0, scale32=False)
    else:  # and requantize per channel, as a lowered convolution does
        then(sched, "RESCALE", (n, oh, ow, oc), "i8", multiplier=rng.integers(1 << 30, 1 << 31, oc).tolist(),
             shift=rng.integers(32, 42, oc).tolist(), input_zp=0, output_zp=int(rng.integers(-128, 128)),
             rounding="double_round", per_channel=True)
    assert_tosa_exact(sched)


@given(x_dt=st.sampled_from(["i8", "i16"]), b_const=st.booleans(), data=st.data())
def test_matmul(x_dt, b_const, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    n, h, c, w = (data.draw(st.integers(1, 4)) for _ in range(4))
    zp = (lambda: data.draw(st.integers(-128, 127))) if x_dt == "i8" else (lambda: 0)
    t = get_dtype(x_dt)
    b = random_const(rng, (n, c, w), t.min, t.max, x_dt) if b_const else Var((n, c, w), x_dt)
    acc = "i48" if x_dt == "i16" else "i32"
    sched = step_schedule("MATMUL", [Var((n, h, c), x_dt), b], [((n, h, w), acc)], a_zp=zp(), b_zp=zp())
    if acc == "i48":
        then(sched, "RESCALE", (n, h, w), "i32", multiplier=[1 << 14], shift=[16], input_zp=0, output_zp=0,
             scale32=False)
    assert_tosa_exact(sched)


# ---- pooling -----------------------------------------------------------------------------------------------

@given(x_dt=st.sampled_from(["i8", "i16"]), average=st.booleans(), data=st.data())
def test_pool(x_dt, average, data):
    kernel = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    (ih, iw), (oh, ow), stride, pad = window_geometry(data.draw, kernel, pad_below_kernel=True)
    n, c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))
    attrs = dict(kernel=list(kernel), stride=list(stride), pad=pad)
    if average:
        zp = (lambda: data.draw(st.integers(-128, 127))) if x_dt == "i8" else (lambda: 0)
        attrs.update(input_zp=zp(), output_zp=zp(), acc_type="i32")
    sched = step_schedule("AVG_POOL2D" if average else "MAX_POOL2D", [Var((n, ih, iw, c), x_dt)],
                          [((n, oh, ow, c), x_dt)], **attrs)
    assert_tosa_exact(sched)


def test_avg_pool_negative_ties():
    # a narrow input range makes ties (even counts, odd sums) common; borders give counts 1, 2, 3, 4, 6
    sched = step_schedule("AVG_POOL2D", [Var((1, 5, 5, 3), "i8", -3, 2)], [((1, 5, 5, 3), "i8")],
                          kernel=[3, 2], stride=[1, 1], pad=[1, 1, 1, 0], input_zp=0, output_zp=0)
    assert_tosa_exact(sched, samples=4)


# ---- TABLE -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_dt", ["i8", "i16"])
def test_table(x_dt):
    rng = np.random.default_rng(13)
    if x_dt == "i8":
        table, out = rng.integers(-128, 128, 256), "i8"
    else:  # slopes within int16 (TOSA REQUIRE); extreme entries at both ends
        table = np.clip(np.cumsum(rng.integers(-3000, 3001, 513)) - 20000, -32768, 32767)
        table[0], table[-1] = -32768, 32767 if table[-2] >= 0 else table[-2]
        out = "i32"
    sched = step_schedule("TABLE", [Var((7, 41), x_dt), Const(table, x_dt)], [((7, 41), out)])
    assert_tosa_exact(sched, samples=3)


# ---- elementwise -------------------------------------------------------------------------------------------

@st.composite
def broadcast_shapes(draw):
    out = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    a = tuple(d if draw(st.booleans()) else 1 for d in out)
    b = tuple(d if draw(st.booleans()) else 1 for d in out)
    return a, b, tuple(max(x, y) for x, y in zip(a, b, strict=True))


@given(op=st.sampled_from(["ADD", "SUB", "MUL"]), shapes=broadcast_shapes(), data=st.data())
def test_binary(op, shapes, data):
    sa, sb, so = shapes
    dt = data.draw(st.sampled_from(["i8", "i16", "i32"])) if op == "MUL" else "i32"
    attrs = {}
    if op == "MUL" and dt == "i32":  # the planner wants |a * b| >> shift to fit int32 for every input
        attrs["shift"] = data.draw(st.integers(0, 40))
        lim = (1 << 15, 1 << min(31, 15 + attrs["shift"]))
    else:
        lim = (1 << 30, 1 << 30) if dt == "i32" else (1 << 15, 1 << 15)
    sched = step_schedule(op, [Var(sa, dt, -lim[0], lim[0] - 1), Var(sb, dt, -lim[1], lim[1] - 1)],
                          [(so, "i32")], **attrs)
    assert_tosa_exact(sched)


@pytest.mark.parametrize("dt, lo, hi", [("i8", -100, 50), ("i16", -3, 3), ("i32", -(1 << 31), 12345),
                                        ("i32", 7, (1 << 31) - 1), ("f32", -0.25, 0.5)])
def test_clamp(dt, lo, hi):
    assert_tosa_exact(step_schedule("CLAMP", [Var((5, 13), dt)], [((5, 13), dt)], min_val=lo, max_val=hi))


def test_rank_0():
    # (run_reference cannot take rank-0 inputs yet: check_inputs' np.ascontiguousarray makes them rank 1)
    sched = prepare(step_schedule("CLAMP", [Var((), "i32")], [((), "i32")], min_val=-3, max_val=4))
    assert [run_tosa_reference(sched, [np.array(v, np.int32)])[0].item() for v in (-9, 0, 5)] == [-3, 0, 4]


CAST_TYPES = ["i8", "u8", "i16", "u16", "i32"]


@pytest.mark.parametrize("src, dst", list(itertools.permutations(CAST_TYPES, 2)))
def test_cast(src, dst):
    assert_tosa_exact(step_schedule("CAST", [Var((4, 33), src)], [((4, 33), dst)]))


# ---- reductions --------------------------------------------------------------------------------------------

@given(op=st.sampled_from(["REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN", "ARGMAX"]),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data())
def test_reduction(op, shape, data):
    shape = tuple(shape)
    axis = data.draw(st.integers(0, len(shape) - 1))
    if op == "REDUCE_SUM":
        dt, lo, hi = "i32", -(1 << 26), 1 << 26
    else:  # narrow ranges make ties (ARGMAX: the first maximum wins)
        dt = data.draw(st.sampled_from(["i8", "i16"] if op == "ARGMAX" else ["i8", "i16", "i32"]))
        lo, hi = sorted(data.draw(st.integers(get_dtype(dt).min, get_dtype(dt).max)) for _ in range(2))
        lo, hi = (lo, hi) if data.draw(st.booleans()) else (-2, 2)
    out_shape = tuple(d for k, d in enumerate(shape) if k != axis) if op == "ARGMAX" else \
        tuple(1 if k == axis else d for k, d in enumerate(shape))
    sched = step_schedule(op, [Var(shape, dt, lo, hi)], [(out_shape, "i32" if op == "ARGMAX" else dt)],
                          axis=axis)
    assert_tosa_exact(sched)


# ---- data movement -----------------------------------------------------------------------------------------

@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), dt=st.sampled_from(["i8", "u8", "i16", "i32"]),
       data=st.data())
def test_data_movement(shape, dt, data):
    shape = tuple(shape)
    rank = len(shape)
    t = get_dtype(dt)
    op = data.draw(st.sampled_from(["CONCAT", "PAD", "TRANSPOSE", "SLICE", "RESHAPE"]))
    inputs = [Var(shape, dt)]
    if op == "CONCAT":
        axis = data.draw(st.integers(0, rank - 1))
        extents = [data.draw(st.integers(1, 3)) for _ in range(data.draw(st.integers(1, 2)))]
        inputs += [Var(shape[:axis] + (e,) + shape[axis + 1:], dt) for e in extents]
        out = shape[:axis] + (shape[axis] + sum(extents),) + shape[axis + 1:]
        attrs = dict(axis=axis)
    elif op == "PAD":
        padding = [data.draw(st.integers(0, 2)) for _ in range(2 * rank)]
        out = tuple(d + padding[2 * k] + padding[2 * k + 1] for k, d in enumerate(shape))
        attrs = dict(padding=padding, pad_const=data.draw(st.integers(t.min, t.max)))
    elif op == "TRANSPOSE":
        perms = data.draw(st.permutations(range(rank)))
        out = tuple(shape[p] for p in perms)
        attrs = dict(perms=list(perms))
    elif op == "SLICE":
        start = [data.draw(st.integers(0, d - 1)) for d in shape]
        size = [data.draw(st.integers(1, d - s)) for d, s in zip(shape, start, strict=True)]
        out = tuple(size)
        attrs = dict(start=start, size=size)
    else:
        out = (int(np.prod(shape)),) if rank > 1 else (1, shape[0])
        attrs = dict(shape=list(out))
    assert_tosa_exact(step_schedule(op, inputs, [(out, dt)], **attrs))


# ---- the oracle itself -------------------------------------------------------------------------------------

def test_schedule_to_tosa_is_a_flatbuffer():
    sched = prepare(step_schedule("RESCALE", [Var((3,), "i32")], [((3,), "i8")], input_zp=0, output_zp=0,
                                  multiplier=[1 << 30], shift=[38]))
    graph = schedule_to_tosa(sched)
    assert isinstance(graph, bytes) and graph[4:8] == b"TOSA"  # flatbuffer file identifier


def test_outputs_in_schedule_order(capfd):
    # two steps computing the outputs in the opposite order of schedule.outputs
    sched = step_schedule("CLAMP", [Var((2, 3), "i8")], [((2, 3), "i8")], min_val=-5, max_val=5)
    sched.add_buffer(Buffer("z", (2, 3), get_dtype("i32"), OUTPUT))
    sched.steps.insert(0, Step("CAST", ["in0"], ["z"], {}))
    sched.outputs = ["z", "out0"]
    prepare(sched)
    x = np.array([[-128, -6, -5], [0, 5, 127]], np.int8)
    z, y = run_tosa_reference(sched, [x])
    assert z.dtype == np.int32 and z.tolist() == x.tolist()
    assert y.dtype == np.int8 and y.tolist() == [[-5, -5, -5], [0, 5, 5]]
    assert capfd.readouterr() == ("", "")  # the reference model's chatter stays off stdout (--json)


def test_mismatch_is_located_at_the_first_differing_step(monkeypatch):
    sched = step_schedule("RESCALE", [Var((4, 6), "i32")], [((4, 6), "i8")], input_zp=0, output_zp=0,
                          multiplier=[1 << 30], shift=[40])
    then(sched, "CLAMP", (4, 6), "i8", min_val=-50, max_val=50)
    then(sched, "CAST", (4, 6), "i16")
    prepare(sched)
    clamp = type(primitives.get("CLAMP"))
    original = clamp.reference
    monkeypatch.setattr(clamp, "reference", lambda self, io, args: [original(self, io, args)[0] // 2])
    result = verify_against_tosa(sched, samples=3, seed=5)
    assert not result.bit_exact and result.samples == 3 and result.mismatches > 0
    first = result.first_mismatch
    assert (first["step"], first["op"], first["tensor"]) == (1, "CLAMP", "y1")
    assert first["expected"] // 2 == first["got"]


def test_unpredictable_is_reported():
    # value 2^31 - 1 with shift 31 breaks apply_scale_32's REQUIRE (docs/semantics.md §3.3)
    sched = step_schedule("RESCALE", [Var((1,), "i32")], [((1,), "i8")], input_zp=0, output_zp=0,
                          multiplier=[1 << 30], shift=[31])
    with pytest.raises(QcError, match="TOSA_UNPREDICTABLE"):
        run_tosa_reference(sched, [np.array([(1 << 31) - 1], np.int32)])


def test_invalid_graph_is_reported_quietly(capfd):
    # not prepared: the reference model's own ERROR_IF (max < min) rejects the graph
    sched = step_schedule("CLAMP", [Var((3,), "i8")], [((3,), "i8")], min_val=5, max_val=-5)
    with pytest.raises(QcError, match=r"TOSA_ERROR.*max < min"):
        run_tosa_reference(sched, [np.zeros(3, np.int8)])
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@pytest.mark.parametrize("op, inputs, outputs, attrs, what", [
    ("RESCALE", [Var((3,), "i32")], [((3,), "i8")],
     dict(input_zp=0, output_zp=0, multiplier=[1 << 30], shift=[40], rounding="half_even"), "half_even"),
    ("QUANTIZE", [Var((3,), "f32")], [((3,), "i8")], dict(scale=0.5, zero_point=0, qmin=-128, qmax=127),
     "float quantization"),
    ("SOFTMAX", [Var((2, 5), "i8"), Const(np.full(256, 1 << 30), "i32")], [((2, 5), "i8")], {}, "no TOSA operator"),
    ("CONV2D", [Var((1, 2, 2, 1), "i16"), Const(np.ones((1, 1, 1, 1)), "i8"), Const(np.zeros(1), "i48")],
     [((1, 2, 2, 1), "i48")], dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1]), "i48"),
])
def test_unsupported_steps_are_named(op, inputs, outputs, attrs, what):
    sched = prepare(step_schedule(op, inputs, outputs, **attrs))
    with pytest.raises(UnsupportedError, match=what) as info:
        verify_against_tosa(sched, samples=1)
    assert what == "i48" or f"step 0 {op}" in str(info.value)


def test_i48_rescale_on_an_inner_axis_is_unsupported():
    rng = np.random.default_rng(3)
    sched = step_schedule("CONV2D", [Var((1, 3, 3, 2), "i16"), random_const(rng, (4, 1, 1, 2), -128, 127, "i8"),
                                     Const(np.zeros(4), "i48")], [((1, 3, 3, 4), "i48")], pad=[0, 0, 0, 0],
                          stride=[1, 1], dilation=[1, 1])
    then(sched, "RESCALE", (1, 3, 3, 4), "i16", multiplier=[1 << 14] * 3, shift=[22, 23, 24], input_zp=0,
         output_zp=0, scale32=False, per_channel=True, axis=1)
    with pytest.raises(UnsupportedError, match="step 1 RESCALE.*TRANSPOSE i48"):
        verify_against_tosa(prepare(sched), samples=1)


def test_missing_reference_model_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tosa_reference_model", None)
    with pytest.raises(QcError, match=r"pip install 'qcodegen\[oracles\]'"):
        tosa_modules()


def test_lowered_model_end_to_end():
    from qcodegen.compiler import plan
    from qcodegen.frontends.builder import GraphBuilder, Random

    b = GraphBuilder("net")
    x = b.input("x", (1, 9, 9, 3), "i8", scale=0.02, zero_point=-128)
    y = b.conv2d(x, weights=Random((8, 3, 3, 3), seed=1), w_scales=0.01, out_scale=0.05, out_zero_point=-128,
                 stride=2, padding="SAME", activation="relu6")
    z = b.depthwise_conv2d(y, weights=Random((1, 3, 3, 8), seed=2), w_scales=0.02, out_scale=0.04,
                           out_zero_point=3, padding="SAME")
    p = b.avg_pool2d(z, kernel=2, stride=1)
    s = b.add(p, b.max_pool2d(z, kernel=2, stride=1), out_scale=0.06, out_zero_point=-10)
    b.output(s)
    result = verify_against_tosa(plan(b.build()), samples=3, seed=1)
    assert result.bit_exact, result.first_mismatch
