"""BINARY_F32 (onnxruntime's float path for a quantized Add / Sub / Mul): the numpy reference == an independent
scalar float32 evaluation in onnxruntime's order (Python double arithmetic rounded to binary32 after every
operation, which is correctly rounded for +, -, *, / of binary32 operands since 53 >= 2 * 24 + 2; Python's round()
is half to even); the generated C == the reference on random, tie, zero, saturating and tiny / huge scale cases.
All C cases in one schedule (one build)."""

import struct

import numpy as np
import pytest

from qcodegen.errors import QcError
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import INPUT, OUTPUT, Buffer, Schedule, Step
from qcodegen.primitives.binary_f32 import BinaryF32Params, binary_f32
from qcodegen.testing import Var, assert_bit_exact, assert_clang_sanitized, prepare, step_schedule

_TYPES = {"i8": (-128, 127), "u8": (0, 255), "i16": (-32768, 32767), "u16": (0, 65535)}


def _f32(x: float) -> float:
    """x rounded to binary32 (half to even), infinite beyond its range."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


def _scalar(p: BinaryF32Params, a: int, b: int) -> int:
    fa = _f32((a - p.a_zp) * float(p.a_scale))
    fb = _f32((b - p.b_zp) * float(p.b_scale))
    r = _f32({"add": fa + fb, "sub": fa - fb, "mul": fa * fb}[p.operation])
    v = _f32(r / float(p.y_scale))
    return round(min(max(v, p.qmin - p.y_zp), p.qmax - p.y_zp)) + p.y_zp  # MLAS: clamp, then round


def _params(op: str, scales, zps, out: str) -> BinaryF32Params:
    lo, hi = _TYPES[out]
    return BinaryF32Params(op, *[np.float32(s) for s in scales[:1]], zps[0], np.float32(scales[1]), zps[1],
                           np.float32(scales[2]), zps[2], lo, hi)


# (op, a type, b type, out type, scales, zero points): ties (power-of-two scales), decimal scales, 2^-40 / 2^40
_CASES = [
    ("add", "i16", "i16", "i16", (0.5, 0.25, 1.0), (0, 3, -2)),
    ("sub", "i16", "i16", "i16", (0.5, 0.5, 0.25), (7, -9, 0)),
    ("mul", "i16", "i16", "i16", (2.0 ** -8, 2.0 ** -9, 2.0 ** -10), (0, 0, 5)),
    ("add", "u16", "u16", "u16", (0.00041, 0.00053, 0.00071), (32773, 32757, 32772)),
    ("sub", "u16", "i16", "u16", (0.00049, 0.00037, 0.00061), (12, -300, 40000)),
    ("mul", "i16", "u16", "i16", (0.0003, 0.0007, 2.1e-7), (-5, 32768, 11)),
    ("add", "i16", "i16", "i8", (1e-3, 3e-3, 0.37), (100, -100, 3)),
    ("mul", "i8", "i16", "u16", (0.05, 0.001, 0.00013), (3, 0, 0)),
    ("add", "i16", "i16", "i16", (2.0 ** -40, 2.0 ** 40, 2.0 ** 40), (0, 0, 0)),
    ("sub", "i16", "i16", "i16", (2.0 ** 40, 2.0 ** 40, 2.0 ** -40), (1, -1, 0)),  # saturation both ways
    ("mul", "i16", "i16", "i16", (2.0 ** -40, 2.0 ** -40, 2.0 ** -40), (0, 0, 0)),  # products 2^-80 -> 0
    ("mul", "i16", "i16", "i16", (2.0 ** 40, 2.0 ** 40, 2.0 ** -40), (0, 0, 0)),
    ("sub", "i16", "i16", "i16", (0.1, 0.1, 0.1), (0, 0, 0)),  # cancellation: a - b of equal values
    # |b| 2^20 to 2^27 times smaller than a small |a|: whether b survives the sum decides the tie r / 2 = k + 1/2
    ("add", "i16", "i16", "i16", (1.0, 2.0 ** -36, 2.0), (0, 0, 0)),
    ("sub", "i16", "i16", "i16", (1.0, 2.0 ** -37, 2.0), (0, 0, 0)),
]
_SMALL_A = 8  # the cases from here on draw a from [-8, 8]
_SMALL_FROM = len(_CASES) - 2


def _operands(rng: np.random.Generator, a_t: str, b_t: str, n: int, small_a: bool = False
              ) -> tuple[np.ndarray, np.ndarray]:
    edges = np.array([-32768, -32767, -129, -128, -1, 0, 1, 2, 127, 128, 255, 256, 32767, 32768, 65535])
    a_range = (-_SMALL_A, _SMALL_A) if small_a else _TYPES[a_t]
    a = np.concatenate([rng.integers(*a_range, n, endpoint=True), edges])
    b = np.concatenate([rng.integers(*_TYPES[b_t], n, endpoint=True), edges[::-1]])
    return np.clip(a, *_TYPES[a_t]), np.clip(b, *_TYPES[b_t])


@pytest.mark.parametrize("index", range(len(_CASES)))
def test_reference_equals_scalar_float32(index):
    op, a_t, b_t, out, scales, zps = _CASES[index]
    p = _params(op, scales, zps, out)
    a, b = _operands(np.random.default_rng(index), a_t, b_t, 400, index >= _SMALL_FROM)
    want = [_scalar(p, int(x), int(y)) for x, y in zip(a, b, strict=True)]
    assert binary_f32(p, a, b).tolist() == want


def test_ties_decide_and_a_changed_rounding_fails():
    """Exact half-integer quotients round to even: half away from zero would differ (the test would notice)."""
    p = _params("add", (0.5, 0.25, 1.0), (0, 0, 0), "i16")
    a, b = np.arange(-40, 40), np.arange(40, -40, -1) * 3
    got = binary_f32(p, a, b)
    exact = a * 0.5 + b * 0.25
    assert np.count_nonzero(exact % 1 == 0.5) > 10
    assert got.tolist() == np.rint(exact).astype(np.int64).tolist()
    assert got.tolist() != (np.sign(exact) * np.floor(np.abs(exact) + 0.5)).astype(np.int64).tolist()


def _schedule(n: int, broadcast: bool) -> tuple[Schedule, list[np.ndarray]]:
    """Every case of _CASES as one step of one schedule; with `broadcast`, b is a [1, n] row of a's [3, n]."""
    sched = Schedule("binf32")
    rng = np.random.default_rng(3)
    data = []
    for i, (op, a_t, b_t, out, scales, zps) in enumerate(_CASES):
        a, b = _operands(rng, a_t, b_t, n, i >= _SMALL_FROM)
        a_shape, b_shape = (a.size,), (b.size,)
        if broadcast:
            a = np.concatenate([a, np.roll(a, 1), np.roll(a, 2)])
            a_shape, b_shape = (3, b.size), (1, b.size)
        names = [f"a{i}", f"b{i}", f"y{i}"]
        for name, shape, t, kind in ((names[0], a_shape, a_t, INPUT), (names[1], b_shape, b_t, INPUT),
                                     (names[2], a_shape, out, OUTPUT)):
            sched.add_buffer(Buffer(name, shape, dtype(t), kind))
        sched.inputs += names[:2]
        sched.outputs.append(names[2])
        p = _params(op, scales, zps, out)
        sched.steps.append(Step("BINARY_F32", names[:2], names[2:], dict(
            operation=op, a_scale=float(p.a_scale), a_zp=p.a_zp, b_scale=float(p.b_scale), b_zp=p.b_zp,
            y_scale=float(p.y_scale), y_zp=p.y_zp, qmin=p.qmin, qmax=p.qmax), source=f"case {i}"))
        data += [a.reshape(a_shape).astype(dtype(a_t).numpy), b.reshape(b_shape).astype(dtype(b_t).numpy)]
    return sched, data


@pytest.mark.parametrize("broadcast", [False, True])
def test_c_equals_reference(broadcast):
    sched, data = _schedule(3000, broadcast)
    assert_bit_exact(sched, inputs=[data])


def test_c_sanitized():
    sched, _ = _schedule(8, True)
    assert_clang_sanitized(prepare(sched), samples=1)


def test_scale_outside_the_normal_range_is_refused():
    with pytest.raises(QcError, match="outside"):
        prepare(step_schedule("BINARY_F32", [Var((4,), "i16"), Var((4,), "i16")], [((4,), "i16")], operation="add",
                              a_scale=1e-20, a_zp=0, b_scale=1.0, b_zp=0, y_scale=1.0, y_zp=0, qmin=-32768,
                              qmax=32767))
