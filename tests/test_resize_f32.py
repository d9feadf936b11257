"""RESIZE_F32 (onnxruntime's float path for a QDQ bilinear Resize): the numpy reference == an independent scalar
float32 evaluation in onnxruntime's order (Python double arithmetic rounded to binary32 after every operation:
correctly rounded for +, -, *, / of binary32 operands; round() is half to even), and not the same as the
separable order (so the check decides the order); the generated C == the reference for rank 2 and rank 4 (both
layouts), 8- and 16-bit types, weights from every coordinate mode, random weights and 2^-40 / 2^40 scales. All
C cases in one schedule (one build)."""

import struct

import numpy as np
import pytest

from qcodegen.errors import QcError
from qcodegen.frontends.onnx_ops_gather import bilinear_taps
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import INPUT, OUTPUT, Buffer, Schedule, Step
from qcodegen.primitives.resize_f32 import ResizeF32Params, resize_f32
from qcodegen.testing import Var, assert_bit_exact, assert_clang_sanitized, prepare, step_schedule

F32 = np.float32


def _f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


def _scalar(p: ResizeF32Params, x: np.ndarray) -> np.ndarray:
    """Element by element, Python floats rounded to binary32 after every operation."""
    a = p.axis
    out_shape = list(x.shape)
    out_shape[a:a + 2] = [len(p.ys), len(p.xs)]
    out = np.zeros(out_shape, np.int64)
    lo, hi = p.qmin - p.out_zp, p.qmax - p.out_zp
    for index in np.ndindex(*out_shape):
        r, c = index[a], index[a + 1]
        wy1, wy2 = (float(w) for w in p.wy[r])
        wx1, wx2 = (float(w) for w in p.wx[c])

        def tap(i: int, j: int, idx=index, r=r, c=c) -> float:
            src = list(idx)
            src[a:a + 2] = [int(p.ys[r][i]), int(p.xs[c][j])]
            return _f32((int(x[tuple(src)]) - p.in_zp) * float(p.in_scale))

        terms = [(_f32(wx2 * wy2), tap(0, 0)), (_f32(wx1 * wy2), tap(0, 1)), (_f32(wx2 * wy1), tap(1, 0)),
                 (_f32(wx1 * wy1), tap(1, 1))]
        total = _f32(terms[0][0] * terms[0][1])
        for w, f in terms[1:]:
            total = _f32(total + _f32(w * f))
        v = _f32(total / float(p.out_scale))
        out[index] = round(min(max(v, lo), hi)) + p.out_zp
    return out


def _taps(mode: str, n_out: int, n_in: int, rng: np.random.Generator | None = None):
    if rng is None:
        return bilinear_taps(mode, n_out, n_in, F32(n_out) / F32(n_in))
    idx = np.sort(rng.integers(0, n_in, (n_out, 2)), axis=1)
    w = rng.random((n_out, 2)).astype(F32)
    w[0] = [0.0, 1.0]
    w[-1] = [2.0 ** -30, 0.5]
    return idx, w


def _params(axis: int, taps_y, taps_x, scales, zps, out: str) -> ResizeF32Params:
    d = dtype(out)
    return ResizeF32Params(axis, taps_y[0], taps_x[0], taps_y[1], taps_x[1], F32(scales[0]), zps[0], F32(scales[1]),
                           zps[1], d.min, d.max)


# (x shape, axis, x type, out type, y taps, x taps, scales, zero points); None taps: random indices and weights
_CASES = [
    ((1, 5, 6, 3), 1, "i8", "i8", ("half_pixel", 10), ("half_pixel", 12), (0.037, 0.041), (1, -2)),
    ((2, 4, 5, 7), 2, "i8", "i8", ("align_corners", 9), ("asymmetric", 3), (0.05, 0.05), (3, 3)),
    ((6, 7), 0, "i16", "i16", ("pytorch_half_pixel", 11), ("tf_half_pixel_for_nn", 4), (0.00041, 0.00043), (5, -2)),
    ((1, 4, 3, 2), 1, "u16", "u16", None, None, (0.0003, 0.0007), (32768, 30000)),
    ((1, 3, 4, 5), 1, "u8", "i16", None, ("half_pixel", 9), (2.0 ** -40, 2.0 ** -40), (128, 0)),
    ((1, 3, 4, 5), 1, "i16", "i8", ("half_pixel", 7), None, (2.0 ** 40, 2.0 ** -40), (0, 0)),  # saturation
    ((1, 3, 4, 5), 1, "i16", "i16", ("asymmetric", 6), ("half_pixel", 5), (2.0 ** 40, 2.0 ** 40), (-7, 0)),
]


def _case_params(i: int) -> tuple[ResizeF32Params, tuple[int, ...], str]:
    shape, axis, x_t, out, ty, tx, scales, zps = _CASES[i]
    rng = np.random.default_rng(i)
    taps = [_taps(t[0], t[1], shape[axis + k]) if t else _taps("", shape[axis + k] + 3, shape[axis + k], rng)
            for k, t in enumerate((ty, tx))]
    return _params(axis, *taps, scales, zps, out), shape, x_t


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
    rows = [np.take(f, p.ys[:, i], axis=1) for i in range(2)]
    taps = [[np.take(r, p.xs[:, j], axis=2) for j in range(2)] for r in rows]
    wx1, wx2 = p.wx[None, None, :, 0, None], p.wx[None, None, :, 1, None]
    wy1, wy2 = p.wy[None, :, 0, None, None], p.wy[None, :, 1, None, None]
    top, bottom = (wx2 * t[0] + wx1 * t[1] for t in taps)
    separable = np.rint(np.clip((wy2 * top + wy1 * bottom) / p.out_scale, p.qmin - p.out_zp, p.qmax - p.out_zp))
    assert np.count_nonzero(separable.astype(np.int64) + p.out_zp != resize_f32(p, x)) > 0


def _schedule() -> tuple[Schedule, list[np.ndarray]]:
    sched = Schedule("resf32")
    rng = np.random.default_rng(5)
    data = []
    for i in range(len(_CASES)):
        p, shape, x_t = _case_params(i)
        out_shape = list(shape)
        out_shape[p.axis:p.axis + 2] = [len(p.ys), len(p.xs)]
        sched.add_buffer(Buffer(f"x{i}", shape, dtype(x_t), INPUT))
        sched.add_buffer(Buffer(f"y{i}", tuple(out_shape), dtype(_CASES[i][3]), OUTPUT))
        sched.inputs.append(f"x{i}")
        sched.outputs.append(f"y{i}")
        sched.steps.append(Step("RESIZE_F32", [f"x{i}"], [f"y{i}"], dict(
            axis=p.axis, ys=p.ys.tolist(), xs=p.xs.tolist(), wy=p.wy.tolist(), wx=p.wx.tolist(),
            in_scale=float(p.in_scale), in_zp=p.in_zp, out_scale=float(p.out_scale), out_zp=p.out_zp, qmin=p.qmin,
            qmax=p.qmax), source=f"case {i}"))
        data.append(_input(rng, shape, x_t))
    return sched, data


def test_c_equals_reference():
    sched, data = _schedule()
    assert_bit_exact(sched, inputs=[data])
    assert_bit_exact(sched, samples=20, seed=3)


def test_c_sanitized():
    assert_clang_sanitized(prepare(_schedule()[0]), samples=1)


def test_tiny_weight_products_are_refused():
    with pytest.raises(QcError, match="2\\^-60"):
        prepare(step_schedule("RESIZE_F32", [Var((3, 3), "i8")], [((2, 3), "i8")], axis=0, ys=[[0, 1], [1, 2]],
                              xs=[[0, 1], [1, 2], [2, 2]], wy=[[2.0 ** -31, 1.0], [0.5, 0.5]],
                              wx=[[0.0, 1.0], [2.0 ** -31, 0.5], [0.5, 0.5]], in_scale=0.1, in_zp=0, out_scale=0.1,
                              out_zp=0, qmin=-128, qmax=127))
