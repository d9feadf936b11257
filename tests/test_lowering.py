"""Lowering rules and folding passes: every source op lowered, planned and run as C == numpy reference;
activation bounds and window geometry checked against hand-computed values; passes keep results identical;
float-level sanity of conv / add / mul against float64 on the dequantized inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qcodegen.compiler import plan
from qcodegen.errors import GraphError, UnsupportedError
from qcodegen.frontends.builder import GraphBuilder, Random
from qcodegen.frontends.json_graph import graph_from_dict
from qcodegen.lower import lower_graph
from qcodegen.reference import run_reference
from qcodegen.semantics.window import window
from qcodegen.testing import prepare, verify_planned
from qcodegen.verify.check import random_inputs

EXAMPLES = settings.default.max_examples


def verified(b: GraphBuilder, samples: int = 3):
    """Plan the builder's graph, then generated C == reference; returns the planned schedule."""
    schedule = plan(b.build())
    result = verify_planned(schedule, samples=samples)
    assert result.bit_exact, f"{result.mismatches} mismatches; first: {result.first_mismatch}"
    return schedule


def steps_of(schedule, op):
    return [s for s in schedule.steps if s.op == op]


# --- window geometry (hand-computed) ----------------------------------------------------------------------

@pytest.mark.parametrize("size, k, s, d, padding, pad, out, crop", [
    (48, 3, 2, 1, "SAME", (0, 1), 24, 0),       # ceil(48/2) = 24, total pad 23*2 + 3 - 48 = 1, odd pixel at the end
    (7, 3, 2, 1, "SAME", (1, 1), 4, 0),         # total 3*2 + 3 - 7 = 2
    (6, 1, 2, 1, "SAME", (0, 0), 3, 1),         # pad would be -1: (6 - 1) % 2 = 1 row no output reads
    (6, 3, 2, 1, "VALID", (0, 0), 2, 1),        # floor((6 - 3) / 2) + 1 = 2; row 5 unused
    (9, 3, 1, 2, "VALID", (0, 0), 5, 0),        # dilated span 5
    (5, 2, 2, 1, [0, 1, 0, 1], (0, 1), 3, 0),   # (5 + 1 - 2) / 2 + 1 = 3 exactly
    (5, 2, 2, 1, [0, 2, 0, 2], (0, 1), 3, 0),   # one pad row unused: taken off the high pad
])
def test_window_geometry_by_hand(size, k, s, d, padding, pad, out, crop):
    win = window((size, size), k, s, d, padding)
    assert win.pad == (*pad, *pad) and win.out == (out, out) and win.crop == (crop, crop)


def test_window_rejects_bad_attributes():
    for kwargs in (dict(padding="FULL"), dict(padding=[1, 1, 1]), dict(padding=[0, -1, 0, 0]), dict(stride=0),
                   dict(kernel=[2, 2, 2])):
        args = dict(in_hw=(5, 5), kernel=2, stride=1, dilation=1, padding="VALID") | kwargs
        with pytest.raises(ValueError):
            window(**args)
    with pytest.raises(ValueError, match="larger than the padded input"):
        window((2, 2), 3)


# --- fused activation bounds (hand-computed) ----------------------------------------------------------------

def _conv_1x1(activation: str, out_scale: float, out_zp: int, storage: tuple[int, int] | None = None):
    b = GraphBuilder("act")
    x = b.input("x", (1, 2, 2, 2), "i8", scale=0.1, zero_point=0)
    y = b.conv2d(x, np.ones((2, 1, 1, 2), np.int64), w_scales=0.5, out_scale=out_scale, out_zero_point=out_zp,
                 activation=activation)
    if storage is not None:  # narrow the output's storage range by hand in the JSON
        doc = b.to_dict()
        doc["tensors"][-1]["quant"].update(storage_min=storage[0], storage_max=storage[1])
        b.output(y)
        doc["outputs"] = [y.name]
        return plan(graph_from_dict(doc))
    b.output(y)
    return plan(b.build())


@pytest.mark.parametrize("activation, scale, zp, bounds", [
    ("relu6", 0.05, -128, (-128, -8)),          # 6 / 0.05 = 120 -> -128 + 120
    ("relu6", 0.047, 3, (3, 127)),              # 6 / 0.047 = 127.66 -> 128; 3 + 128 > 127: storage max
    ("relu", 0.05, 10, (10, 127)),
    ("none", 0.05, 10, (-128, 127)),
    ("relu_n1_to_1", 0.4, 0, (-3, 3)),          # 1 / 0.4 = 2.5 -> 3 (half away from zero), -2.5 -> -3
])
def test_fused_activation_bounds(activation, scale, zp, bounds):
    rescale = steps_of(_conv_1x1(activation, scale, zp), "RESCALE")[-1]
    lo, hi = rescale.attrs.get("out_min", -128), rescale.attrs.get("out_max", 127)
    assert (max(lo, -128), min(hi, 127)) == bounds


def test_activation_bounds_respect_storage_range():
    rescale = steps_of(_conv_1x1("relu6", 0.01, -100, (-120, 120)), "RESCALE")[-1]
    # 6 / 0.01 = 600 -> far above: the storage max 120; relu: zp -100
    assert (rescale.attrs["out_min"], rescale.attrs["out_max"]) == (-100, 120)


def test_clamp_op_bounds_by_hand():
    b = GraphBuilder("clamp")
    x = b.input("x", (3, 4), "i8", scale=0.5, zero_point=4)
    b.output(b.clamp(x, min=-0.25, max=2.75))
    clamp = plan(b.build()).steps[-1]
    # -0.25 / 0.5 = -0.5 -> -1 (half away from zero) -> 3;  2.75 / 0.5 = 5.5 -> 6 -> 10
    assert clamp.op == "CLAMP" and (clamp.attrs["min_val"], clamp.attrs["max_val"]) == (3, 10)


# --- conv2d / depthwise_conv2d / fully_connected --------------------------------------------------------

@st.composite
def conv_cases(draw):
    kind = draw(st.sampled_from(["conv2d", "depthwise_conv2d", "fully_connected"]))
    wide = draw(st.booleans())  # i16 activations, i48 accumulator
    act = "i16" if wide else "i8"
    izp = 0 if wide else draw(st.sampled_from([-128, 0, 5, 127]))
    w_dtype = "i8" if wide else draw(st.sampled_from(["i8", "i8", "i4"]))
    wzp = draw(st.sampled_from([0, 0, -3, 2])) if w_dtype == "i8" else 0
    n = draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dil = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    h = draw(st.integers((kh - 1) * dil[0] + 1, 9))
    w = draw(st.integers((kw - 1) * dil[1] + 1, 9))
    c = draw(st.integers(1, 5))
    out_c = draw(st.integers(1, 5))
    padding = draw(st.sampled_from(["SAME", "VALID", "explicit"]))
    if padding == "explicit":
        padding = [draw(st.integers(0, 2)) for _ in range(4)]
    return dict(kind=kind, act=act, izp=izp, w_dtype=w_dtype, wzp=wzp, n=n, kernel=(kh, kw), dilation=dil,
                stride=[draw(st.integers(1, 3)), draw(st.integers(1, 3))], hw=(h, w), c=c, out_c=out_c,
                mult=draw(st.integers(1, 3)), padding=padding, per_channel=draw(st.booleans()),
                bias=draw(st.booleans()), activation=draw(st.sampled_from(["none", "relu", "relu6"])),
                seed=draw(st.integers(0, 1000)))


def build_conv(p: dict) -> GraphBuilder:
    rng = np.random.default_rng(p["seed"])
    b = GraphBuilder("conv", rescale_rounding=rng.choice(["single_round", "double_round"]))
    s_x = float(rng.uniform(0.005, 0.05))
    if p["kind"] == "fully_connected":
        x = b.input("x", (p["n"], p["c"] * 3), p["act"], scale=s_x, zero_point=p["izp"])
        w_shape, taps, channels = (p["out_c"], p["c"] * 3), p["c"] * 3, p["out_c"]
    else:
        x = b.input("x", (p["n"], *p["hw"], p["c"]), p["act"], scale=s_x, zero_point=p["izp"])
        taps = p["kernel"][0] * p["kernel"][1]
        if p["kind"] == "conv2d":
            w_shape, channels, taps = (p["out_c"], *p["kernel"], p["c"]), p["out_c"], taps * p["c"]
        else:
            channels = p["c"] * p["mult"]
            w_shape = (1, *p["kernel"], channels)
    s_w = rng.uniform(0.002, 0.02, channels) if p["per_channel"] else float(rng.uniform(0.002, 0.02))
    w_range = 7 if p["w_dtype"] == "i4" else 127
    common = dict(weights=Random(w_shape, p["seed"], -w_range, w_range), w_scales=s_w.tolist() if p["per_channel"]
                  else s_w, w_dtype=p["w_dtype"], w_zero_point=p["wzp"], activation=p["activation"],
                  out_scale=s_x * float(np.mean(s_w)) * w_range * np.sqrt(taps) / 2,
                  out_zero_point=int(rng.integers(-20, 20)) if p["act"] == "i8" else 0,
                  bias=Random((channels,), p["seed"] + 1, -3000, 3000) if p["bias"] else None)
    if p["kind"] == "fully_connected":
        y = b.fully_connected(x, **common)
    else:
        fn = b.conv2d if p["kind"] == "conv2d" else b.depthwise_conv2d
        y = fn(x, stride=p["stride"], dilation=p["dilation"], padding=p["padding"], **common)
    b.output(y)
    return b


@settings(max_examples=EXAMPLES)
@given(conv_cases())
def test_conv_family_c_matches_reference(p):
    schedule = verified(build_conv(p))
    rescale = steps_of(schedule, "RESCALE")[-1]
    assert rescale.attrs["scale32"] == (p["act"] == "i8")
    assert rescale.attrs["per_channel"] == p["per_channel"]


def test_conv_edge_cases():
    """izp = -128 with weights at the extremes, asymmetric pads + dilation + stride (docs/semantics.md §11.7, §11.11),
    depthwise with M > 1, 4-bit weights, i16 activations with an i48 accumulator and 16-bit multipliers."""
    b = GraphBuilder("edges")
    x = b.input("x", (1, 7, 8, 3), "i8", scale=0.02, zero_point=-128)
    y = b.conv2d(x, np.full((4, 3, 2, 3), 127) * np.array([1, -1, 1, -1])[:, None, None, None], w_scales=0.004,
                 out_scale=0.5, out_zero_point=3, stride=[2, 1], dilation=[1, 2], padding=[2, 0, 1, 3],
                 bias=[100, -100, 0, 7])
    y = b.depthwise_conv2d(y, Random((1, 3, 3, 12), 5, -8, 7), w_scales=np.linspace(0.01, 0.05, 12).tolist(),
                           w_dtype="i4", out_scale=0.5, out_zero_point=-1, padding="SAME", activation="relu")
    b.output(y)
    x16 = b.input("x16", (1, 5, 5, 2), "i16", scale=0.001)
    y16 = b.conv2d(x16, Random((3, 3, 3, 2), 9, -127, 127), w_scales=[0.01, 0.02, 0.03], out_scale=0.05,
                   bias=Random((3,), 3, -(1 << 40), 1 << 40), padding="SAME", activation="relu6")
    b.output(y16)
    schedule = verified(b)
    conv16 = [s for s in steps_of(schedule, "CONV2D") if s.attrs["acc_type"] == "i48"]
    assert len(conv16) == 1
    rescale16 = next(s for s in schedule.steps if conv16[0].outputs[0] in s.inputs)
    assert rescale16.attrs["scale32"] is False and max(rescale16.attrs["multiplier"]) < 1 << 15


def test_fully_connected_on_rank_3_input():
    b = GraphBuilder("fc3")
    x = b.input("x", (2, 3, 10), "i8", scale=0.05, zero_point=-7)
    b.output(b.fully_connected(x, Random((4, 10), 1), w_scales=0.01, out_scale=0.2, bias=Random((4,), 2, -99, 99)))
    schedule = verified(b)
    assert [s.op for s in schedule.steps] == ["RESHAPE", "CONV2D", "RESCALE", "RESHAPE"]


# --- add / sub / mul --------------------------------------------------------------------------------------

@st.composite
def binary_cases(draw):
    wide = draw(st.booleans())
    rank = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 5)) for _ in range(rank)]
    other = [d if draw(st.booleans()) else 1 for d in shape][draw(st.integers(0, rank - 1)):]  # broadcasting
    if draw(st.booleans()):
        shape, other = other, shape
    zp = (lambda: 0) if wide else (lambda: draw(st.integers(-128, 127)))
    scale = st.floats(1e-3, 1.0)
    return dict(kind=draw(st.sampled_from(["add", "sub", "mul"])), dtype="i16" if wide else "i8", a=shape,
                b=other, s_a=draw(scale), s_b=draw(scale), s_y=draw(scale), zps=(zp(), zp(), zp()),
                activation=draw(st.sampled_from(["none", "relu"])),
                rounding=draw(st.sampled_from(["single_round", "double_round"])))


def build_binary(p: dict) -> GraphBuilder:
    b = GraphBuilder("binary", rescale_rounding=p["rounding"])
    x = b.input("a", p["a"], p["dtype"], scale=p["s_a"], zero_point=p["zps"][0])
    y = b.input("b", p["b"], p["dtype"], scale=p["s_b"], zero_point=p["zps"][1])
    b.output(getattr(b, p["kind"])(x, y, p["s_y"], p["zps"][2], activation=p["activation"]))
    return b


@settings(max_examples=EXAMPLES)
@given(binary_cases())
def test_binary_c_matches_reference(p):
    verified(build_binary(p))


def test_add_widely_different_scales():
    """docs/semantics.md §11.16: the smaller operand's multiplier underflows towards 0; still exact."""
    p = dict(kind="add", dtype="i8", a=[4, 6], b=[6], s_a=1.0, s_b=1e-9, s_y=0.01, zps=(3, -5, 0),
             activation="none", rounding="single_round")
    schedule = verified(build_binary(p))
    assert steps_of(schedule, "ADD") and len(steps_of(schedule, "RESHAPE")) == 1  # b gets a leading 1


def test_add_input_rescale_uses_exact_shift_for_the_larger_scale():
    """The larger-scale operand is scaled by exactly 2^19: multiplier 2^30, shift 11 (docs/semantics.md §7.3)."""
    p = dict(kind="add", dtype="i8", a=[8], b=[8], s_a=0.5, s_b=0.25, s_y=0.5, zps=(0, 0, 0), activation="none",
             rounding="single_round")
    schedule = plan(build_binary(p).build())
    first = steps_of(schedule, "RESCALE")[0]
    assert (first.attrs["multiplier"], first.attrs["shift"], first.attrs["input_zp"]) == ([1 << 30], [11], 0)


def test_output_rescale_with_scale_above_one_is_preclamped():
    """i16 MUL with s_a s_b / s_out = 1: RESCALE (2^30, 30) requires |v| < 2^29 but products reach 2^30. Such
    values saturate the i16 output anyway, so an i32 CLAMP first keeps every result (values chosen by hand)."""
    p = dict(kind="mul", dtype="i16", a=[5], b=[5], s_a=1.0, s_b=1.0, s_y=1.0, zps=(0, 0, 0), activation="none",
             rounding="single_round")
    schedule = verified(build_binary(p))
    assert [s.op for s in schedule.steps] == ["MUL", "CLAMP", "RESCALE"]
    a = np.array([32767, -32768, 3, 181, -32768], np.int16)  # products 2^30 - .., -2^30 + .., -15, 32761, 2^30
    b = np.array([32767, 32767, -5, 181, -32768], np.int16)
    out = run_reference(schedule, [a, b])[schedule.outputs[0]]
    assert out.tolist() == [32767, -32768, -15, 32761, 32767]


def test_conv_output_scale_above_one_is_preclamped():
    """s_in s_w / s_out = 1024: shift 20 allows |acc| < 2^19 while 72 taps of 127 * 255 reach 2.3e6."""
    b = GraphBuilder("bigscale")
    x = b.input("x", (1, 4, 4, 8), "i8", scale=1.0, zero_point=-128)
    b.output(b.conv2d(x, np.full((2, 3, 3, 8), 127) * np.array([1, -1])[:, None, None, None], w_scales=1.0,
                      out_scale=1 / 1024, padding="SAME"))
    schedule = verified(b)
    assert [s.op for s in schedule.steps] == ["CONV2D", "CLAMP", "RESCALE"]
    assert steps_of(schedule, "CLAMP")[0].attrs == {"min_val": -(1 << 19), "max_val": (1 << 19) - 1}


# --- pools and mean ---------------------------------------------------------------------------------------

@st.composite
def pool_cases(draw):
    kind = draw(st.sampled_from(["avg_pool2d", "max_pool2d", "mean"]))
    wide = draw(st.booleans())
    shape = [draw(st.integers(1, 2)), draw(st.integers(1, 8)), draw(st.integers(1, 8)), draw(st.integers(1, 4))]
    k = [draw(st.integers(1, shape[1])), draw(st.integers(1, shape[2]))]
    requant = draw(st.booleans())
    return dict(kind=kind, dtype="i16" if wide else "i8", shape=shape, kernel=k,
                stride=[draw(st.integers(1, 3)), draw(st.integers(1, 3))],
                padding=draw(st.sampled_from(["SAME", "VALID"])), zp=0 if wide else draw(st.integers(-128, 127)),
                out=(draw(st.floats(0.01, 0.1)), 0 if wide else draw(st.integers(-128, 127))) if requant else None,
                activation=draw(st.sampled_from(["none", "relu"])),
                axes=draw(st.lists(st.integers(-4, 3), min_size=1, max_size=3, unique_by=lambda a: a % 4)),
                keepdims=draw(st.booleans()))


@settings(max_examples=EXAMPLES)
@given(pool_cases())
def test_pool_and_mean_c_match_reference(p):
    b = GraphBuilder("pool")
    x = b.input("x", p["shape"], p["dtype"], scale=0.03, zero_point=p["zp"])
    out_scale, out_zp = p["out"] or (None, None)
    if p["kind"] == "mean":
        y = b.mean(x, p["axes"], p["keepdims"], out_scale or 0.02, out_zp if p["out"] else p["zp"])
    else:
        y = getattr(b, p["kind"])(x, p["kernel"], p["stride"], p["padding"], out_scale, out_zp,
                                  activation=p["activation"])
    b.output(y)
    verified(b)


def test_avg_pool_negative_ties_and_border_counts():
    """docs/semantics.md §11.12: even counts with negative ties round half away from zero; border windows average only
    the in-bounds taps. Values chosen by hand: windows of 2 with sums -3 and 3."""
    b = GraphBuilder("avg")
    x = b.input("x", (1, 1, 4, 1), "i8", scale=0.1, zero_point=0)
    b.output(b.avg_pool2d(x, [1, 2], stride=[1, 2]))
    schedule = plan(b.build())
    out = run_reference(schedule, [np.array([-1, -2, 1, 2], np.int8).reshape(1, 1, 4, 1)])[schedule.outputs[0]]
    assert out.reshape(-1).tolist() == [-2, 2]  # -1.5 -> -2, 1.5 -> 2
    b = GraphBuilder("avg_same")
    x = b.input("x", (1, 3, 3, 1), "i8", scale=0.1, zero_point=0)
    b.output(b.avg_pool2d(x, 3, stride=1, padding="SAME"))
    schedule = plan(b.build())
    out = run_reference(schedule, [np.arange(9, dtype=np.int8).reshape(1, 3, 3, 1)])[schedule.outputs[0]]
    # corner (0, 0) averages {0, 1, 3, 4} = 2; the centre all nine = 4; corner (2, 2) {4, 5, 7, 8} = 6
    assert out.reshape(3, 3)[0, 0] == 2 and out.reshape(3, 3)[1, 1] == 4 and out.reshape(3, 3)[2, 2] == 6
    verified(b)


def test_mean_by_hand():
    b = GraphBuilder("mean")
    x = b.input("x", (1, 2, 2, 1), "i8", scale=0.5, zero_point=10)
    b.output(b.mean(x, [1, 2], out_scale=0.25, out_zero_point=-3))
    schedule = plan(b.build())
    out = run_reference(schedule, [np.array([10, 12, 14, 17], np.int8).reshape(1, 2, 2, 1)])[schedule.outputs[0]]
    # reals 0, 1, 2, 3.5 -> mean 1.625 -> 1.625 / 0.25 = 6.5 -> 7 (half up) -> 7 - 3 = 4
    assert out.reshape(-1).tolist() == [4]


# --- activations, data movement, quantize / dequantize -------------------------------------------------

def test_activations_and_data_movement():
    b = GraphBuilder("movement")
    x = b.input("x", (2, 5, 6, 3), "i8", scale=0.04, zero_point=-20)
    z = b.input("z", (2, 3, 4, 5), "i16", scale=0.001)
    r6 = b.relu6(x, out_scale=6 / 255, out_zero_point=-128)            # RESCALE + CLAMP -> fused
    r = b.relu(x)                                                       # same quant: CLAMP only
    c = b.clamp(r, min=-1.0, max=2.5, out_scale=0.05, out_zero_point=0)
    t = b.transpose(r6, [0, 3, 1, 2])                                    # (2, 3, 5, 6)
    p = b.pad(t, [0, 0, 1, 0, 0, 2, 1, 1])                               # (2, 3, 7, 8)
    s = b.slice(p, [0, 0, 2, 1], [-1, 3, 4, 5])                          # (2, 3, 4, 5)
    zq = b.requantize(z, scale=6 / 255, zero_point=-128, dt="i8")
    cat = b.concat([s, zq, s], axis=-3, out_scale=0.03, out_zero_point=5)  # rescales every input
    flat = b.reshape(cat, (2, -1))
    b.output(flat, c)
    schedule = verified(b)
    ops = [st.op for st in schedule.steps]
    assert "CLAMP" in ops and ops.count("CONCAT") == 1
    assert any("fused" in note for note in schedule.notes)


def test_quantize_dequantize_per_tensor_and_per_axis():
    b = GraphBuilder("qdq")
    f = b.input("f", (3, 4), "f32")
    q = b.quantize(f, "i8", 0.02, -3)
    qa = b.quantize(f, "i8", [0.01, 0.02, 0.03, 0.05], [0, 1, -1, 2], axis=1)
    q16 = b.quantize(f, "i16", 1e-4)
    b.output(b.dequantize(q), b.dequantize(qa), b.dequantize(q16), q)
    schedule = verified(b, samples=4)
    assert [s.op for s in schedule.steps].count("QUANTIZE") == 3


# --- errors name the op ---------------------------------------------------------------------------------

def _doc(ops, tensors, inputs=("x",), outputs=("y",)):
    return {"name": "bad", "tensors": tensors, "ops": ops, "inputs": list(inputs), "outputs": list(outputs)}


def _t(name, shape, dt="i8", scale=0.1, zp=0, **extra):
    spec = {"name": name, "shape": list(shape), "dtype": dt, **extra}
    if scale is not None:
        spec["quant"] = {"scale": scale, "zero_point": zp}
    return spec


@pytest.mark.parametrize("ops, tensors, message", [
    ([{"op": "conv2d", "name": "c1", "inputs": ["x", "w"], "outputs": ["y"]}],
     [_t("x", (1, 4, 4, 2)), _t("w", (3, 3, 3, 2), data={"random": {"seed": 1}}), _t("y", (1, 2, 2, 4))],
     "op conv2d 'c1': output 'y' has shape [1, 2, 2, 4], expected [1, 2, 2, 3]"),
    ([{"op": "conv2d", "name": "c2", "inputs": ["x", "w"], "outputs": ["y"]}],
     [_t("x", (1, 4, 4, 2)), _t("w", (3, 3, 3, 2)), _t("y", (1, 2, 2, 3))],
     "op conv2d 'c2': weights 'w' must be a constant"),
    ([{"op": "depthwise_conv2d", "name": "d", "inputs": ["x", "w"], "outputs": ["y"]}],
     [_t("x", (1, 4, 4, 2)), _t("w", (1, 3, 3, 5), data={"random": {"seed": 1}}), _t("y", (1, 2, 2, 5))],
     "op depthwise_conv2d 'd': weights 'w' must have shape [1, KH, KW, C*M] with C = 2"),
    ([{"op": "conv2d", "name": "c3", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {"activation": "gelu"}}],
     [_t("x", (1, 4, 4, 2)), _t("w", (3, 3, 3, 2), data={"random": {"seed": 1}}), _t("y", (1, 2, 2, 3))],
     "unknown activation 'gelu'"),
    ([{"op": "conv2d", "name": "c4", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {"padding": "FULL"}}],
     [_t("x", (1, 4, 4, 2)), _t("w", (3, 3, 3, 2), data={"random": {"seed": 1}}), _t("y", (1, 2, 2, 3))],
     "op conv2d 'c4': padding must be 'SAME', 'VALID' or"),
    ([{"op": "add", "name": "a", "inputs": ["x", "x"], "outputs": ["y"]}],
     [_t("x", (2, 3)), _t("y", (2, 3), "i16")],
     "op add 'a': operands and result must share one storage type"),
    ([{"op": "add", "name": "a2", "inputs": ["x", "x"], "outputs": ["y"]}],
     [_t("x", (2, 3)), _t("y", (3, 3))],
     "op add 'a2': output shape [3, 3] differs from the broadcast shape [2, 3]"),
    ([{"op": "mul", "name": "m", "inputs": ["x", "x"], "outputs": ["y"]}],
     [_t("x", (2, 3)), _t("y", (2, 3), scale=None)],
     "op mul 'm': output 'y' must be quantized"),
    ([{"op": "max_pool2d", "name": "p", "inputs": ["x"], "outputs": ["y"],
       "attrs": {"kernel": 2, "padding": [2, 0, 0, 0]}}],
     [_t("x", (1, 4, 4, 2)), _t("y", (1, 4, 3, 2))],
     "op max_pool2d 'p': padding [2, 0, 0, 0] must be smaller than the kernel"),
    ([{"op": "mean", "name": "mn", "inputs": ["x"], "outputs": ["y"], "attrs": {"axes": [1, -3]}}],
     [_t("x", (1, 4, 4, 2)), _t("y", (1, 2))],
     "op mean 'mn': axes [1, -3] repeat an axis"),
    ([{"op": "transpose", "name": "t", "inputs": ["x"], "outputs": ["y"], "attrs": {"perms": [0, 0]}}],
     [_t("x", (2, 3)), _t("y", (2, 3))],
     "op transpose 't': perms [0, 0] is not a permutation"),
    ([{"op": "concat", "name": "cc", "inputs": ["x", "x"], "outputs": ["y"], "attrs": {"axis": 0}}],
     [_t("x", (2, 3)), _t("y", (4, 4))],
     "op concat 'cc': input 'x' of shape [2, 3] does not fit output shape [4, 4]"),
    ([{"op": "quantize", "name": "q", "inputs": ["x"], "outputs": ["y"]}],
     [_t("x", (2, 3)), _t("y", (2, 3))],
     "op quantize 'q': input 'x' must be f32"),
    ([{"op": "slice", "name": "s", "inputs": ["x"], "outputs": ["y"], "attrs": {"start": [1, 0], "size": [2, 3]}}],
     [_t("x", (2, 3)), _t("y", (2, 3))],
     "op slice 's': slice start [1, 0] size [2, 3] is outside the input shape [2, 3]"),
])
def test_invalid_ops_are_rejected_naming_the_op(ops, tensors, message):
    inputs = [t["name"] for t in tensors if t["name"] != "y" and "data" not in t]
    with pytest.raises(GraphError) as info:
        plan(graph_from_dict(_doc(ops, tensors, inputs)))
    assert message in str(info.value)


def test_unknown_op_and_unsupported_weight_zero_points():
    with pytest.raises(UnsupportedError, match="unsupported operators: softmax"):
        plan(graph_from_dict(_doc([{"op": "softmax", "inputs": ["x"], "outputs": ["y"]}],
                                  [_t("x", (2, 3)), _t("y", (2, 3))])))
    w = {"name": "w", "shape": [2, 1, 1, 2], "dtype": "i8", "data": [1, 2, 3, 4],
         "quant": {"scales": [0.1, 0.1], "zero_points": [0, 1], "axis": 0}}
    with pytest.raises(UnsupportedError, match="different zero points per channel"):
        plan(graph_from_dict(_doc([{"op": "conv2d", "inputs": ["x", "w"], "outputs": ["y"]}],
                                  [_t("x", (1, 2, 2, 2)), w, _t("y", (1, 2, 2, 2))])))


# --- passes -----------------------------------------------------------------------------------------------

def _unoptimized(b: GraphBuilder):
    graph = b.build()
    return prepare(lower_graph(graph))


def test_passes_keep_results_bit_identical():
    """Zero-point folding (input zp into bias, weight zp into weights, one conv left unfolded because the folded
    bias would overflow) and RESCALE+CLAMP fusion: reference(unoptimized) == reference(optimized) == C."""
    b = GraphBuilder("passes")
    x = b.input("x", (1, 6, 6, 2), "i8", scale=0.02, zero_point=-128)
    y = b.conv2d(x, Random((4, 3, 3, 2), 1, -120, 120), w_scales=[0.01, 0.02, 0.015, 0.01], out_scale=0.1,
                 out_zero_point=-5, bias=Random((4,), 2, -1000, 1000), padding="SAME")          # izp folded
    y = b.depthwise_conv2d(y, Random((1, 3, 3, 4), 3, -100, 100), w_scales=0.01, w_zero_point=7, out_scale=0.1,
                           out_zero_point=9, padding=[1, 0, 2, 1])                            # wzp then izp folded
    y = b.depthwise_conv2d(y, np.full((1, 2, 2, 4), 127), w_scales=0.01, w_zero_point=-3, out_scale=0.1,
                           padding="SAME")                                                     # wzp kept: 130 > 127
    y = b.relu6(y, out_scale=6 / 255, out_zero_point=-128)                                     # RESCALE + CLAMP
    # a bias next to the i32 limit: unfolded |bias| + 127 * 9 * 255 fits, folded |bias'| + 127 * 9 * 256 does not
    big = b.const("big_bias", [2147483647 - 127 * 9 * 255], "i32")
    x2 = b.input("x2", (1, 3, 3, 1), "i8", scale=0.02, zero_point=-128)
    y2 = b.conv2d(x2, np.full((1, 3, 3, 1), 127), w_scales=0.01, bias=big, out_scale=1e3, name="near_limit")
    b.output(y, y2)
    before, after = _unoptimized(b), plan(b.build())
    assert len(after.steps) == len(before.steps) - 1
    convs = steps_of(after, "CONV2D") + steps_of(after, "DEPTHWISE_CONV2D")
    assert [(s.attrs["input_zp"], s.attrs["weight_zp"]) for s in convs] == [(0, 0), (-128, 0), (0, 0), (9, -3)]
    assert convs[0].attrs["pad_value"] == -128 and convs[2].attrs["pad_value"] == -5
    assert any("keep their input zero point" in n for n in after.notes)
    assert all(n in after.buffers for s in after.steps for n in s.inputs)
    rng = np.random.default_rng(3)
    batches = [random_inputs(after, rng) for _ in range(3)]
    batches.append([np.full((1, 6, 6, 2), 127, np.int8), np.full((1, 3, 3, 1), 127, np.int8)])
    for batch in batches:
        want, got = run_reference(before, batch), run_reference(after, batch)
        for name in after.outputs:
            np.testing.assert_array_equal(want[name], got[name])
    result = verify_planned(after, inputs=batches)
    assert result.bit_exact, result.first_mismatch


def test_rescale_clamp_not_fused_when_the_rescale_output_is_shared():
    b = GraphBuilder("shared")
    x = b.input("x", (4, 4), "i8", scale=0.04, zero_point=0)
    q = b.requantize(x, 0.05, 3)
    b.output(b.relu(q), b.relu6(q))
    after = plan(b.build())
    assert [s.op for s in after.steps] == ["RESCALE", "CLAMP", "CLAMP"]


# --- float-level sanity -----------------------------------------------------------------------------------

def _real(values: np.ndarray, q) -> np.ndarray:
    return (values.astype(np.float64) - q.zero_point) * q.scale


def _float_conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray, stride: int, pad: list[int]) -> np.ndarray:
    """float64 NHWC x OHWI convolution (independent of the code under test)."""
    t, bt, lf, rt = pad
    xp = np.pad(x, ((0, 0), (t, bt), (lf, rt), (0, 0)))
    oh = (xp.shape[1] - w.shape[1]) // stride + 1
    ow = (xp.shape[2] - w.shape[2]) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[0])) + bias
    for ky in range(w.shape[1]):
        for kx in range(w.shape[2]):
            patch = xp[:, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (ow - 1) + 1:stride, :]
            out += patch @ w[:, ky, kx, :].T
    return out


def _assert_close_levels(got: np.ndarray, real: np.ndarray, q, extra: float) -> None:
    """|q - clip(real / s + zp)| <= 0.5 + extra + |real / s| * 2^-30 (output LSBs)."""
    levels = real / q.scale + q.zero_point
    want = np.clip(levels, q.storage_min, q.storage_max)
    bound = 0.5 + extra + np.abs(real / q.scale) * 2.0 ** -30
    assert np.all(np.abs(got - want) <= bound), float(np.max(np.abs(got - want) - bound))


@pytest.mark.parametrize("rounding", ["single_round", "double_round"])
def test_conv_float_sanity(rounding):
    """The only rounding is the output RESCALE: error <= 0.5 LSB plus the multiplier's relative error 2^-31
    (asserted with 2^-30)."""
    rng = np.random.default_rng(1)
    b = GraphBuilder("fconv", rescale_rounding=rounding)
    x = b.input("x", (2, 7, 7, 3), "i8", scale=0.03, zero_point=-11)
    w = rng.integers(-127, 128, (5, 3, 3, 3))
    s_w = rng.uniform(0.005, 0.02, 5)
    bias = rng.integers(-2000, 2000, 5)
    y = b.conv2d(x, w, s_w.tolist(), out_scale=0.04, out_zero_point=6, bias=bias, stride=2, padding=[1, 1, 1, 1])
    b.output(y)
    schedule = plan(b.build())
    inputs = random_inputs(schedule, rng)
    got = run_reference(schedule, inputs)[y.name].astype(np.float64)
    real = _float_conv(_real(inputs[0], x.quant), w * s_w[:, None, None, None], bias * 0.03 * s_w, 2, [1, 1, 1, 1])
    _assert_close_levels(got, real, y.quant, 0.0)


@pytest.mark.parametrize("kind", ["add", "sub", "mul"])
def test_elementwise_float_sanity(kind):
    """add/sub: each operand is rounded once in units of max2 / 2^20 (<= 0.5 unit each, so <= 1 unit =
    max2 / (s_out 2^20) output LSB together) before the output rounding (0.5 LSB). mul: the product is exact;
    only the output rounding (0.5 LSB). Plus the multipliers' relative error 2^-31 (asserted with 2^-30)."""
    rng = np.random.default_rng(2)
    s_a, s_b, s_y = 0.05, 0.013, 0.07 if kind != "mul" else 0.004
    b = GraphBuilder("fbin")
    xa = b.input("a", (3, 1, 5), "i8", scale=s_a, zero_point=-30)
    xb = b.input("b", (4, 1), "i8", scale=s_b, zero_point=17)
    y = getattr(b, kind)(xa, xb, s_y, -2)
    b.output(y)
    schedule = plan(b.build())
    inputs = random_inputs(schedule, rng)
    got = run_reference(schedule, inputs)[y.name].astype(np.float64)
    ra, rb = _real(inputs[0], xa.quant), _real(inputs[1], xb.quant)
    real = {"add": ra + rb, "sub": ra - rb, "mul": ra * rb}[kind]
    extra = 0.0 if kind == "mul" else (2 * max(s_a, s_b) / (s_y * 2 ** 20)) * (1 + 2.0 ** -20)
    _assert_close_levels(got, real, y.quant, extra)
