"""RESIZE_F32 (onnxruntime's float path for a QDQ bilinear or bicubic Resize): the numpy reference == an independent
scalar float32 evaluation in onnxruntime's order (Python double arithmetic rounded to binary32 after every operation:
correctly rounded for +, -, *, / of binary32 operands; round() is half to even), and not the same as the separable
order (so the check decides the order); the generated C == the reference for rank 2 and rank 4 (both layouts), 8- and
16-bit types, bilinear and bicubic (with and without exclude_outside's row divisors) weights from every coordinate
mode, random (negative for bicubic) weights and 2^-40 / 2^40 scales. All C cases in one schedule (one build)."""

import struct

import numpy as np
import pytest

from qcodegen.errors import QcError
from qcodegen.frontends.onnx_ops_gather import bicubic_taps, bilinear_taps
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import INPUT, OUTPUT, Buffer, Schedule, Step
from qcodegen.primitives.resize_f32 import ResizeF32Params, resize_f32
from qcodegen.testing import Var, assert_bit_exact, assert_clang_sanitized, prepare, step_schedule

F32 = np.float32


def _f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


def _scalar(p: ResizeF32Params, x: np.ndarray) -> np.ndarray:
    """Element by element, Python floats rounded to binary32 after every operation."""
    a, k = p.axis, p.ys.shape[1]
    out_shape = list(x.shape)
    out_shape[a:a + 2] = [len(p.ys), len(p.xs)]
    out = np.zeros(out_shape, np.int64)
    lo, hi = p.qmin - p.out_zp, p.qmax - p.out_zp
    for index in np.ndindex(*out_shape):
        r, c = index[a], index[a + 1]

        def tap(i: int, j: int, idx=index, r=r, c=c) -> float:
            src = list(idx)
            src[a:a + 2] = [int(p.ys[r][i]), int(p.xs[c][j])]
            return _f32((int(x[tuple(src)]) - p.in_zp) * float(p.in_scale))

        wy, wx = [float(w) for w in p.wy[r]], [float(w) for w in p.wx[c]]
        total = 0.0
        for i in range(k):
            if p.form == "bilinear":
                for j in range(k):
                    total = _f32(total + _f32(_f32(wx[j] * wy[i]) * tap(i, j)))
            else:
                row = 0.0
                for j in range(k):
                    row = _f32(row + _f32(wx[j] * tap(i, j)))
                total = _f32(total + _f32(_f32(row * wy[i]) / float(p.y_div[r])))
        v = _f32(total / float(p.out_scale))
        out[index] = round(min(max(v, lo), hi)) + p.out_zp
    return out


def _taps(spec, n_in: int, rng: np.random.Generator):
    """(indices, weights, row divisors) of one axis: a coordinate mode's (form, mode, n_out) as the importer computes
    them, or (form, None, n_out) random indices and weights (zeros, ones, tiny and negative ones for bicubic)."""
    form, mode, n_out = spec
    k = 2 if form == "bilinear" else 4
    ones = np.ones(n_out, F32)
    if mode is not None:
        scale = F32(n_out) / F32(n_in)
        if form == "bilinear":
            return (*bilinear_taps(mode, n_out, n_in, scale), ones)
        return bicubic_taps(mode, n_out, n_in, scale, F32(-0.75), n_out % 2 == 1)
    idx = np.sort(rng.integers(0, n_in, (n_out, k)), axis=1)
    if form == "bilinear":
        w = rng.random((n_out, k)).astype(F32)
        w[0], w[-1] = [0.0, 1.0], [2.0 ** -30, 0.5]
        return idx, w, ones
    w = rng.uniform(-0.7, 1.3, (n_out, k)).astype(F32)
    w[0], w[-1] = [0.0, 1.0, -2.0 ** -16, 4.0], [-0.0625, 0.5625, 0.5625, -0.0625]
    return idx, w, rng.uniform(0.5, 1.5, n_out).astype(F32)


def _params(form: str, axis: int, taps_y, taps_x, scales, zps, out: str) -> ResizeF32Params:
    d = dtype(out)
    (ys, wy, y_div), (xs, wx, _) = taps_y, taps_x
    return ResizeF32Params(axis, form, ys, xs, wy, wx, y_div, F32(scales[0]), zps[0], F32(scales[1]), zps[1], d.min,
                           d.max)


# (x shape, axis, x type, out type, form, y taps, x taps (mode or None: random), scales, zero points)
_CASES = [
    ((1, 5, 6, 3), 1, "i8", "i8", "bilinear", ("half_pixel", 10), ("half_pixel", 12), (0.037, 0.041), (1, -2)),
    ((2, 4, 5, 7), 2, "i8", "i8", "bilinear", ("align_corners", 9), ("asymmetric", 3), (0.05, 0.05), (3, 3)),
    ((6, 7), 0, "i16", "i16", "bilinear", ("pytorch_half_pixel", 11), ("tf_half_pixel_for_nn", 4), (0.00041, 0.00043),
     (5, -2)),
    ((1, 4, 3, 2), 1, "u16", "u16", "bilinear", (None, 7), (None, 5), (0.0003, 0.0007), (32768, 30000)),
    ((1, 3, 4, 5), 1, "u8", "i16", "bilinear", (None, 7), ("half_pixel", 9), (2.0 ** -40, 2.0 ** -40), (128, 0)),
    ((1, 3, 4, 5), 1, "i16", "i8", "bilinear", ("half_pixel", 7), (None, 8), (2.0 ** 40, 2.0 ** -40), (0, 0)),
    ((1, 3, 4, 5), 1, "i16", "i16", "bilinear", ("asymmetric", 6), ("half_pixel", 5), (2.0 ** 40, 2.0 ** 40), (-7, 0)),
    ((1, 5, 6, 2), 1, "i8", "i8", "bicubic", ("half_pixel", 9), ("align_corners", 13), (0.037, 0.041), (1, -2)),
    ((2, 3, 4, 5), 2, "u16", "u16", "bicubic", ("asymmetric", 7), ("pytorch_half_pixel", 3), (0.0003, 0.0004),
     (32768, 30000)),
    ((7, 6), 0, "i16", "i16", "bicubic", (None, 5), (None, 9), (0.001, 0.0007), (3, -3)),
    ((1, 3, 4, 2), 1, "i16", "i8", "bicubic", (None, 6), ("half_pixel", 7), (2.0 ** 40, 2.0 ** -40), (0, 0)),
]


def _case_params(i: int) -> tuple[ResizeF32Params, tuple[int, ...], str]:
    shape, axis, x_t, out, form, ty, tx, scales, zps = _CASES[i]
    rng = np.random.default_rng(i)
    taps = [_taps((form, *spec), shape[axis + k], rng) for k, spec in enumerate((ty, tx))]
    return _params(form, axis, *taps, scales, zps, out), shape, x_t


def _input(rng: np.random.Generator, shape, x_t: str) -> np.ndarray:
    d = dtype(x_t)
    return rng.integers(d.min, d.max, shape, endpoint=True).astype(d.numpy)


@pytest.mark.parametrize("index", range(len(_CASES)))
def test_reference_equals_scalar_float32(index):
    p, shape, x_t = _case_params(index)
    x = _input(np.random.default_rng(100 + index), shape, x_t)
    assert resize_f32(p, x).tolist() == _scalar(p, x).tolist()


def test_the_order_of_the_sum_decides():
    """Summing as two horizontal lerps then a vertical one (newer onnxruntime) gives other results on these data:
    the reference's order is the one measured against onnxruntime 1.32."""
    p, shape, x_t = _case_params(0)
    x = _input(np.random.default_rng(7), (1, 5, 6, 40), x_t)
    f = (x.astype(np.int64) - p.in_zp).astype(F32) * p.in_scale
    taps = [[np.take(np.take(f, p.ys[:, i], axis=1), p.xs[:, j], axis=2) for j in range(2)] for i in range(2)]
    wx = [p.wx[None, None, :, j, None] for j in range(2)]
    wy = [p.wy[None, :, i, None, None] for i in range(2)]
    top, bottom = (wx[0] * t[0] + wx[1] * t[1] for t in taps)
    separable = np.rint(np.clip((wy[0] * top + wy[1] * bottom) / p.out_scale, p.qmin - p.out_zp, p.qmax - p.out_zp))
    assert np.count_nonzero(separable.astype(np.int64) + p.out_zp != resize_f32(p, x)) > 0


def _schedule(cases: list[int] | None = None) -> tuple[Schedule, list[np.ndarray]]:
    sched = Schedule("resf32")
    rng = np.random.default_rng(5)
    data = []
    for i in range(len(_CASES)) if cases is None else cases:
        p, shape, x_t = _case_params(i)
        out_shape = list(shape)
        out_shape[p.axis:p.axis + 2] = [len(p.ys), len(p.xs)]
        sched.add_buffer(Buffer(f"x{i}", shape, dtype(x_t), INPUT))
        sched.add_buffer(Buffer(f"y{i}", tuple(out_shape), dtype(_CASES[i][3]), OUTPUT))
        sched.inputs.append(f"x{i}")
        sched.outputs.append(f"y{i}")
        sched.steps.append(Step("RESIZE_F32", [f"x{i}"], [f"y{i}"], dict(
            axis=p.axis, form=p.form, ys=p.ys.tolist(), xs=p.xs.tolist(), wy=p.wy.tolist(), wx=p.wx.tolist(),
            y_div=p.y_div.tolist(),
            in_scale=float(p.in_scale), in_zp=p.in_zp, out_scale=float(p.out_scale), out_zp=p.out_zp, qmin=p.qmin,
            qmax=p.qmax), source=f"case {i}"))
        data.append(_input(rng, shape, x_t))
    return sched, data


def test_c_equals_reference():
    sched, data = _schedule()
    assert_bit_exact(sched, inputs=[data])
    assert_bit_exact(sched, samples=20, seed=3)


def test_c_sanitized():
    assert_clang_sanitized(prepare(_schedule([0, 3, 9])[0]), samples=1)  # NHWC bilinear, random, bicubic / y_div


def test_tiny_weight_products_are_refused():
    with pytest.raises(QcError, match="2\\^-60"):
        prepare(step_schedule("RESIZE_F32", [Var((3, 3), "i8")], [((2, 3), "i8")], axis=0, form="bilinear",
                              ys=[[0, 1], [1, 2]],
                              xs=[[0, 1], [1, 2], [2, 2]], wy=[[2.0 ** -31, 1.0], [0.5, 0.5]],
                              wx=[[0.0, 1.0], [2.0 ** -31, 0.5], [0.5, 0.5]], in_scale=0.1, in_zp=0, out_scale=0.1,
                              out_zp=0, qmin=-128, qmax=127))
