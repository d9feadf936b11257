"""The x86 kernels of runtime/x86 on their own: a small C driver, compiled with each x86 target's flags (AVX2; AVX-VNNI;
AVX-512 VNNI: the header picks the instructions) into a shared library called through cffi on the host, runs every
kernel family and variant on seeded random and extreme operands; its results must equal the numpy primitives
(CONV2D, DEPTHWISE_CONV2D, RESCALE) on the same values, element for element. The weights and constants are laid out
by the family's own layouts (qcodegen/kernels/x86/layouts.py), so the layouts are checked with the kernels."""

from __future__ import annotations

import cffi
import numpy as np
import pytest

from qcodegen.codegen import load_target
from qcodegen.ir.dtypes import dtype
from qcodegen.kernel_testing import conv_accumulators, depthwise_accumulators, rescale
from qcodegen.kernels.x86 import layouts
from qcodegen.resources import data_path
from qcodegen.verify.build import compile_cached
from qcodegen.verify.runners import unavailable

I64 = np.int64
DRIVER = r"""
#include "qc_x86_conv.h"
#include "qc_x86_dw.h"
#include "qc_x86_ew.h"

static qc_x86_rq t_rq(const int32_t *pc, const int32_t *v) {
  qc_x86_rq r;
  r.pc = pc;
  r.m = v[0], r.s = v[1], r.s33 = v[2], r.dbl = v[3], r.zp = v[4], r.lo = v[5], r.hi = v[6], r.sat = v[7];
  r.bits = v[8];
  r.es = r.ea = r.ev = NULL, r.epc = 0;  /* no exceptions to the single rounding */
  return r;
}

int t_vnni(void) {
  return QC_X86_VNNI;
}

/* qc_x86_rq8_store of channels lanes of acc (a multiple of 8) into y. */
void t_rq8(const int32_t *acc, int32_t channels, const int32_t *pc, const int32_t *v, void *y) {
  const qc_x86_rq r = t_rq(pc, v);
  for (int32_t c0 = 0; c0 < channels; c0 += 8) {
    qc_x86_rq8_store(&r, qc_x86_load8_i32(acc + c0), c0, y, c0);
  }
}

/* The np <= 4 windows of k int8 at x (window j at x + j * k) packed for kern, then qc_x86_gemm_s8 into y. */
void t_gemm(int kern, const int8_t *x, int32_t np, int32_t k, int32_t izp, const int8_t *w, const int32_t *starts,
            int32_t rows, const int32_t *pc, const int32_t *v, void *y) {
  static int16_t s16[4 * 2048];
  static uint8_t u8[4 * 4096];
  const int32_t group = kern == QC_X86_MADD ? 2 : 4, kpad = (k + group - 1) / group * group;
  const int32_t planes = kern == QC_X86_UBS ? 2 : 1;
  const qc_x86_gemm_params g = {w, starts, rows, rows / 8 * 8, kpad / group, kpad * planes};
  const qc_x86_rq r = t_rq(pc, v);
  memset(s16, 0, sizeof s16);
  memset(u8, 0, sizeof u8);
  for (int32_t j = 0; j < np; ++j) {
    if (kern == QC_X86_MADD) {
      qc_x86_pack_s16(s16 + j * g.xs, x + j * k, k, izp);
    } else if (kern == QC_X86_UBS) {
      qc_x86_pack_nibbles(u8 + j * g.xs, x + j * k, k, kpad);
    } else {
      qc_x86_pack_u8(u8 + j * g.xs, x + j * k, k);
    }
  }
  const void *xp = kern == QC_X86_MADD ? (const void *)s16 : (const void *)u8;
  switch (np) { /* constant window counts, as the generated call sites pass them */
  case 1: qc_x86_gemm_s8(&g, &r, kern, xp, 1, y); break;
  case 2: qc_x86_gemm_s8(&g, &r, kern, xp, 2, y); break;
  case 3: qc_x86_gemm_s8(&g, &r, kern, xp, 3, y); break;
  default: qc_x86_gemm_s8(&g, &r, kern, xp, 4, y); break;
  }
}

/* The dot products of a with the 8 rows of n at w: out[0 .. 7] 8 rows, [8 .. 11] 4 rows, [12] one, then with VNNI
   the same of (a + 128), and [26 .. 33] the short rows (n = 4, 8, 16). */
void t_dots(const int8_t *a, const int8_t *w, int32_t n, int32_t *out) {
  qc_x86_store8_s32(out, qc_x86_dot_8rows_s8(a, w, n));
  qc_x86_store4_s32(out + 8, qc_x86_dot_4rows_s8(a, w, n));
  out[12] = qc_x86_dot_s8(a, w, n);
#if QC_X86_VNNI
  qc_x86_store8_s32(out + 13, qc_x86_vnni_dot_8rows_s8(a, w, n));
  qc_x86_store4_s32(out + 21, qc_x86_vnni_dot_4rows_s8(a, w, n));
  out[25] = qc_x86_vnni_dot_s8(a, w, n);
  if (n == 4 || n == 8 || n == 16) {
    qc_x86_store8_s32(out + 26, qc_x86_vnni_dot_8rows_short_s8(a, w, n));
  }
#endif
}

void t_row_sums(int32_t *zc, const int8_t *w, int32_t rows, int32_t n, int32_t c) {
  qc_x86_row_sums(zc, w, rows, n, c);
}

/* qc_x86_dw_rows: geo = n, ih, iw, c, oh, ow, kh, kw, sy, sx, pt, pl, pad, vpad, hpad, wp, step, nb. */
void t_dw_rows(const int16_t *w, const int32_t *params, const int32_t *geo, const int32_t *v, const int8_t *x,
               void *y) {
  static int16_t rows[32768];
  static int8_t padpix[512];
  const qc_x86_dw_rows_params p = {w, params, geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7],
                                   geo[8], geo[9], geo[10], geo[11], geo[12], geo[13], geo[14], geo[15], geo[16],
                                   geo[17]};
  const qc_x86_rq r = t_rq(NULL, v);
  memset(padpix, geo[12], sizeof padpix);
  qc_x86_dw_rows(&p, &r, x, y, rows, padpix);
}

/* The blocks of the depthwise skeleton over the taps t < taps of c channels (x, w: [taps][c]; pad[t]: tap t is
   padding, read as pad_value): out[c ..] by pairs of taps on madd_dw_pairs (pairs; no padding taps), out[0 .. c)
   one by one; zc: the starts (or NULL). */
void t_dw8(const int8_t *x, const int8_t *w, const int16_t *pairs, const int32_t *zc, const uint8_t *pad,
           int32_t pad_value, int32_t taps, int32_t c, int32_t *out) {
  const int32_t full = c / 8 * 8;
  for (int32_t c0 = 0; c0 < full; c0 += 8) {
    __m256i a = qc_x86_dw8_start(zc ? zc + c0 : NULL), b = a;
    for (int32_t t = 0; t < taps; ++t) {
      a = pad[t] ? qc_x86_dw8_pad(a, pad_value, w + t * c + c0) : qc_x86_dw8_tap(a, x + t * c + c0, w + t * c + c0);
    }
    for (int32_t t = 0; t < taps; t += 2) {
      const int8_t *x1 = t + 1 < taps ? x + (t + 1) * c + c0 : x + t * c + c0;
      b = qc_x86_dw8_taps2(b, x + t * c + c0, x1, pairs + t * c + 2 * c0);
    }
    qc_x86_store8_s32(out + c0, a);
    qc_x86_store8_s32(out + c + c0, b);
  }
  if (full < c) {
    int32_t a[8];
    qc_x86_dw_start_n(a, zc ? zc + full : NULL, c - full);
    for (int32_t t = 0; t < taps; ++t) {
      if (pad[t]) {
        qc_x86_dw_pad_n(a, pad_value, w + t * c + full, c - full);
      } else {
        qc_x86_dw_tap_n(a, x + t * c + full, w + t * c + full, c - full);
      }
    }
    memcpy(out + full, a, (size_t)(c - full) * sizeof(int32_t));
  }
}

/* qc_x86_ew_rescale (args: izp, m, s, dbl, shl, clamp, zp, lo, hi) of n (a multiple of 8) int16 values into int32. */
void t_ew_rescale(const int16_t *v, int32_t n, const int32_t *g, int32_t *out) {
  for (int32_t i = 0; i < n; i += 8) {
    qc_x86_store8_s32(out + i, qc_x86_ew_rescale(qc_x86_ew_load8_s16(v + i), g[0], g[1], g[2], g[3], g[4], g[5],
                                                 g[6], g[7], g[8]));
  }
}
"""
CDEF = """
int t_vnni(void);
void t_rq8(const int32_t *acc, int32_t channels, const int32_t *pc, const int32_t *v, void *y);
void t_gemm(int kern, const int8_t *x, int32_t np, int32_t k, int32_t izp, const int8_t *w, const int32_t *starts,
            int32_t rows, const int32_t *pc, const int32_t *v, void *y);
void t_dots(const int8_t *a, const int8_t *w, int32_t n, int32_t *out);
void t_row_sums(int32_t *zc, const int8_t *w, int32_t rows, int32_t n, int32_t c);
void t_dw_rows(const int16_t *w, const int32_t *params, const int32_t *geo, const int32_t *v, const int8_t *x,
               void *y);
void t_dw8(const int8_t *x, const int8_t *w, const int16_t *pairs, const int32_t *zc, const uint8_t *pad,
           int32_t pad_value, int32_t taps, int32_t c, int32_t *out);
void t_ew_rescale(const int16_t *v, int32_t n, const int32_t *g, int32_t *out);
"""
KERNS = {"madd": 0, "ubs": 1, "dpbusd": 2}  # qc_x86_gemm_s8's kern (QC_X86_MADD, QC_X86_UBS, QC_X86_DPBUSD)


class Driver:
    """The driver compiled with a target's flags and loaded; `call(name, *args)` passes numpy arrays as pointers."""

    def __init__(self, target: str, workdir) -> None:
        tgt = load_target(target)
        source = workdir / "x86_kernels_driver.c"
        source.write_text(DRIVER)
        headers = sorted((data_path("runtime") / "x86").glob("*.h"))
        lib = compile_cached([source], [tgt.cc, *tgt.cflags, f"-I{data_path('runtime') / 'x86'}", "-shared", "-fPIC"],
                             ".so", headers=headers)
        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        self.lib = self.ffi.dlopen(str(lib))
        self.vnni = bool(self.lib.t_vnni())

    def call(self, name: str, *args) -> None:
        """Arrays (written in place: outputs must be C-contiguous) go as void pointers, None as NULL."""
        buffers = [self.ffi.from_buffer(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in args]
        getattr(self.lib, name)(*[self.ffi.NULL if b is None else
                                  self.ffi.cast("void *", b) if isinstance(b, self.ffi.CData) else b
                                  for b in buffers])


@pytest.fixture(scope="module", params=["x86-avx2", "x86-avxvnni", "x86-avx512vnni"])
def driver(request, tmp_path_factory) -> Driver:
    reason = unavailable(load_target(request.param))
    if reason:
        pytest.skip(f"{request.param}: {reason}")
    return Driver(request.param, tmp_path_factory.mktemp(request.param))


def _rescale(acc: np.ndarray, mults, shifts, rounding: str, zp: int, lo: int, hi: int, out: str = "i8") -> np.ndarray:
    """RESCALE of int32 accumulators [..., channels] (per channel when several multipliers), in the output type."""
    assert acc.min() >= -(1 << 31) and acc.max() < 1 << 31
    return rescale(acc, mults, shifts, rounding, zp, lo, hi, out).astype(dtype(out).numpy)


def _rq_args(mults, shifts, rounding: str, zp: int, lo: int, hi: int, bits: int) -> tuple[np.ndarray | None,
                                                                                       np.ndarray]:
    """The x86_rq8 constants (per channel: layouts.x86_rq8; per tensor: None) and the other fields of qc_x86_rq."""
    per_channel = len(mults) > 1
    pc = layouts.x86_rq8(mults, shifts) if per_channel else None
    sat = bits == 8 and (lo, hi) == (-128, 127)
    v = [mults[0], shifts[0], min(shifts) >= 33, rounding == "double_round", zp, lo, hi, sat, bits]
    return pc, np.array(v, np.int32)


def _scales(rng: np.random.Generator, n: int, lowest: int, acc: np.ndarray) -> tuple[list[int], list[int]]:
    """Multipliers and shifts (>= lowest) that map the accumulators acc [..., channels] (per channel when n > 1)
    onto about +-200 (so outputs spread over the int8 range and some saturate: a wrong rounding, lane or weight
    shows), random by a factor 0.5 .. 2 per channel; the first two channels at the extremes (2^31 - 1 at the lowest
    shift, 1 at 62)."""
    a = np.abs(acc.astype(I64)).reshape(-1, acc.shape[-1] if n > 1 else 1)
    mults, shifts = [], []
    for amax in np.maximum(a.max(axis=0), 1).tolist():
        top = max(lowest, min(62, 31 + (amax // 400).bit_length() - 1))
        shift = int(rng.integers(lowest, top + 1))
        shifts.append(shift)
        mults.append(int(min((1 << 31) - 1, max(1, 200 * 2.0 ** shift / amax * rng.uniform(0.5, 2)))))
    shifts[:2] = [lowest, 62][:n]
    mults[:2] = [(1 << 31) - 1, 1][:n]
    return mults, shifts


def _assert_equal(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    got, expected = np.asarray(got, I64).reshape(-1), np.asarray(expected, I64).reshape(-1)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, (f"{what}: {bad.size} of {expected.size} values differ; first at {bad[0]}: expected "
                           f"{expected[bad[0]]}, got {got[bad[0]]}")


# (rounding, smallest shift, per channel, output type, clamp): every form of qc_x86_rq8_store
RQ_VARIANTS = [(r, lo, pc, out, clamp) for r in ("single_round", "double_round") for lo in (32, 33)
               for pc in (False, True)
               for out, clamp in (("i8", (-128, 127)), ("i8", (-50, 90)), ("i16", (-3000, 32767)))]


def test_requantization(driver):
    """qc_x86_rq8_store: per tensor and per channel, shifts from 32 (qc_x86_scale32x8) or from 33 (_s33, _s33p), both
    roundings, int8 over the whole range (saturating packs), int8 and int16 clamps, accumulators at the int32
    extremes and random, against RESCALE."""
    rng = np.random.default_rng(86)
    for rounding, lowest, pc, out, (lo, hi) in RQ_VARIANTS:
        channels = 24
        acc = rng.integers(-(1 << 31), 1 << 31, (5, channels)).astype(np.int32)
        acc[0], acc[1, ::2], acc[1, 1::2] = -(1 << 31), (1 << 31) - 1, -(1 << 16)
        mults, shifts = _scales(rng, channels if pc else 1, lowest, acc)
        zp = int(rng.integers(-128, 128)) if out == "i8" else int(rng.integers(-1000, 1000))
        bits = 8 if out == "i8" else 16
        expected = _rescale(acc, mults, shifts, rounding, zp, lo, hi, out)
        pcs, v = _rq_args(mults, shifts, rounding, zp, lo, hi, bits)
        got = np.zeros_like(expected)
        for row in range(acc.shape[0]):
            y = np.zeros(channels, expected.dtype)
            driver.call("t_rq8", acc[row], channels, pcs, v, y)
            got[row] = y
        _assert_equal(got, expected, f"qc_x86_rq8_store {rounding} shifts>={lowest} pc={pc} {out} [{lo}, {hi}]")


@pytest.mark.parametrize("kern", list(KERNS))
def test_blocked_kernels(driver, kern):
    """qc_x86_gemm_s8 with each kernel the target has (madd_2x8 windows of x - izp; one window of nibbles against
    dpbusd_4x8; VNNI: windows of x + 128 against dpbusd_4x8), 1 .. 4 windows, 24 rows (a block of 16 and one of 8),
    rows of 1 .. 2048 elements (the packing's scalar, 4-, 8-, 16- and 32-element paths, groups padded), input zero
    points, the starts of layouts.gemm_starts, requantized per channel (shifts >= 33: _s33p) and per tensor, inputs
    and weights at the int8 extremes."""
    if kern == "dpbusd" and not driver.vnni:
        pytest.skip("VPDPBUSD: VNNI targets only")
    rng = np.random.default_rng(KERNS[kern])
    rows = 24
    for case, k in enumerate((1, 3, 6, 9, 17, 40, 333, 2048)):
        np_ = 1 if kern == "ubs" else 1 + case % 4
        izp = int(rng.integers(-128, 128))
        x = rng.integers(-128, 128, (np_, k))
        w = rng.integers(-128, 128, (rows, k))
        x[0], w[0], w[1] = (127 if izp < 0 else -128), -128, 127
        bias = rng.integers(-(1 << 20), 1 << 20, rows)
        acc = conv_accumulators(x, w, bias, izp)
        rounding = ("single_round", "double_round")[case % 2]
        mults, shifts = _scales(rng, rows if case % 3 else 1, 33 if case % 2 else 34, acc)
        lo, hi = ((-128, 127), (-100, 50))[case % 2]
        zp = int(rng.integers(-128, 128))
        expected = _rescale(acc, mults, shifts, rounding, zp, lo, hi)
        layout = layouts.madd_2x8 if kern == "madd" else layouts.dpbusd_4x8
        starts = layouts.gemm_starts(w, bias, None if kern == "madd" else 128 + izp)
        pcs, v = _rq_args(mults, shifts, rounding, zp, lo, hi, 8)
        y = np.zeros((np_, rows), np.int8)
        driver.call("t_gemm", KERNS[kern], x.astype(np.int8), np_, k, izp, layout(w), starts, rows, pcs, v, y)
        _assert_equal(y, expected, f"qc_x86_gemm_s8 {kern} k={k} pixels={np_}")


def test_dot_products(driver):
    """qc_x86_dot_{8rows,4rows,}_s8 and, on VNNI targets, qc_x86_vnni_dot_* (the sums of (x + 128) * w) and the short
    rows (4, 8, 16 bytes): row lengths over the vector, 8-element, masked and scalar tails, up to the longest row the
    kernels take (65,535 products at the int8 extremes); qc_x86_row_sums."""
    rng = np.random.default_rng(7)
    for n in (1, 3, 4, 8, 15, 16, 17, 31, 33, 100, 65535):
        a = rng.integers(-128, 128, n)
        w = rng.integers(-128, 128, (8, n))
        if n == 65535:
            a[:], w[0], w[1] = 127, -128, 127
        out = np.zeros(34, np.int32)
        driver.call("t_dots", a.astype(np.int8), w.astype(np.int8), n, out)
        sums = (w.astype(I64) * a).sum(axis=1)
        _assert_equal(out[:13], np.concatenate([sums, sums[:4], sums[:1]]), f"AVX2 dot products n={n}")
        if driver.vnni:
            unsigned = (w.astype(I64) * (a + 128)).sum(axis=1)
            short = unsigned if n in (4, 8, 16) else np.zeros(8, I64)
            _assert_equal(out[13:], np.concatenate([unsigned, unsigned[:4], unsigned[:1], short]),
                          f"VNNI dot products n={n}")
        zc = np.zeros(8, np.int32)
        driver.call("t_row_sums", zc, w.astype(np.int8), 8, n, -128 if n == 65535 else 77)
        _assert_equal(zc, (-128 if n == 65535 else 77) * w.astype(I64).sum(axis=1), f"qc_x86_row_sums n={n}")


# (channels, kh, kw, stride, pad [top, bottom, left, right], pad value, input height, width, rounding, smallest shift,
# output type and clamp)
DW_CASES = [
    (8, 3, 3, 1, (1, 1, 1, 1), -128, 5, 4, "double_round", 33, ("i8", -128, 127)),
    (16, 3, 3, 2, (1, 1, 1, 1), 0, 7, 7, "single_round", 33, ("i8", -5, 127)),
    (24, 3, 3, 2, (0, 1, 0, 1), 3, 8, 8, "double_round", 40, ("i16", -3000, 3000)),
    (40, 2, 3, 1, (1, 0, 1, 1), -7, 4, 5, "single_round", 28, ("i8", -128, 127)),
    (8, 3, 1, 3, (1, 1, 0, 0), 17, 7, 7, "double_round", 32, ("i8", -90, 100)),
    (8, 1, 5, 1, (0, 0, 2, 2), -128, 3, 9, "double_round", 33, ("i16", -32768, 32767)),
]


@pytest.mark.parametrize("case", DW_CASES, ids=[f"c{c[0]}_{c[1]}x{c[2]}_s{c[3]}" for c in DW_CASES])
def test_depthwise_rows(driver, case):
    """qc_x86_dw_rows over x86_dw_rows weights and x86_dw_params constants: windows of 1x5 .. 3x3 taps, strides 1, 2
    (every other position widened) and 3, padding on some or all sides read as pad values, two bands of output rows,
    both roundings with shifts from 28 (qc_x86_scale32x8) or from 33 (qc_x86_scale32x8_s33r), int8 and int16 outputs,
    biases near the int32 bound (the starts wrap modulo 2^32), against DEPTHWISE_CONV2D + RESCALE."""
    c, kh, kw, stride, pad, pad_value, ih, iw, rounding, lowest, (out, lo, hi) = case
    rng = np.random.default_rng(c * kh + kw)
    oh, ow = (ih + pad[0] + pad[1] - kh) // stride + 1, (iw + pad[2] + pad[3] - kw) // stride + 1
    izp = pad_value
    x = rng.integers(-128, 128, (1, ih, iw, c))
    x[0, 0] = 127
    w = rng.integers(-128, 128, (kh, kw, c))
    w[0, 0, :2] = -128
    room = (1 << 31) - kh * kw * 255 * 128 - 1
    bias = np.where(np.arange(c) % 3 == 0, np.where(np.arange(c) % 2, room, -room), rng.integers(-4096, 4096, c))
    if lowest < 32:
        bias = rng.integers(-4096, 4096, c)
    acc = depthwise_accumulators(x, w, bias, izp, (stride, stride), pad, pad_value=pad_value)
    mults, shifts = _scales(rng, c, lowest, acc)
    zp = int(rng.integers(-100, 100))
    expected = _rescale(acc, mults, shifts, rounding, zp, lo, hi, out)
    taps = w.reshape(kh * kw, c).astype(I64)
    wp = (ow - 1) * stride + 2 * ((kw + 1) // 2) - 1
    step = 2 if stride % 2 == 0 else 1
    nb = max(1, oh // 2)  # (two bands or more)
    geo = [1, ih, iw, c, oh, ow, kh, kw, stride, stride, pad[0], pad[2], pad_value,
           pad[0] > 0 or (oh - 1) * stride + kh - pad[0] > ih, pad[2] > 0 or wp - pad[2] >= iw, wp, step, nb]
    bits = 8 if out == "i8" else 16
    _, v = _rq_args(mults, shifts, rounding, zp, lo, hi, bits)
    y = np.zeros(expected.shape, expected.dtype)
    driver.call("t_dw_rows", layouts.x86_dw_rows(taps, kw), layouts.x86_dw_params(taps, bias, izp, mults, shifts),
                np.array(geo, np.int32), v, x.astype(np.int8), y)
    _assert_equal(y, expected, f"qc_x86_dw_rows {case}")


def test_depthwise_blocks(driver):
    """The steps of the depthwise skeleton's blocks (qc_x86_dw8_*: taps one by one with padding taps, and by pairs
    on madd_dw_pairs; the last channels by qc_x86_dw_*_n) over 1 .. 9 taps and 3 .. 21 channels, from the starts
    -izp * the weights' sums, against the sums of (x - izp) * w."""
    rng = np.random.default_rng(9)
    for taps, c in ((1, 8), (2, 3), (5, 21), (9, 16), (7, 12)):
        izp, pad_value = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        x = rng.integers(-128, 128, (taps, c))
        w = rng.integers(-128, 128, (taps, c))
        x[0], w[0] = -128, -128
        pad = (np.arange(taps) % 3 == 1).astype(np.uint8)
        zc = (-izp * w.sum(axis=0)).astype(np.int32)
        xv = np.where(pad[:, None] == 1, pad_value, x)
        full = c // 8 * 8
        out = np.zeros(c + full, np.int32)
        driver.call("t_dw8", x.astype(np.int8), w.astype(np.int8), layouts.madd_dw_pairs(w), zc, pad, pad_value,
                    taps, c, out)
        one = ((xv - izp) * w).sum(axis=0)
        paired = ((x - izp) * w).sum(axis=0)[:full]
        _assert_equal(out, np.concatenate([one, paired]), f"qc_x86_dw8 taps={taps} c={c}")


def test_elementwise_rescale(driver):
    """qc_x86_ew_rescale: input zero points, shifts 17 .. 62 (qc_x86_scale32x8 and, from 33, _s33), both roundings,
    a power-of-two multiplier as a shift left, with and without the zero point and clamp, against RESCALE of int16
    values at the extremes (shifts below 32 where |v - izp| < 2^(shift - 1), as RESCALE requires; lo - zp and
    hi - zp in int32, as the kernel choice requires)."""
    rng = np.random.default_rng(11)
    v = rng.integers(-(1 << 15), 1 << 15, 64).astype(np.int16)
    v[:4] = [-(1 << 15), (1 << 15) - 1, 0, -1]
    for m, s, rounding, izp, zp, lo, hi in [((1 << 31) - 1, 17, "single_round", 5, 0, -(1 << 31), (1 << 31) - 1),
                                            (1 << 30, 31, "double_round", -3, 7, -128, 127),
                                            (1518500250, 40, "double_round", 0, -9, -1000, 1000),
                                            (123456789, 62, "single_round", 100, 0, -(1 << 31), (1 << 31) - 1),
                                            (1 << 20, 17, "single_round", 1, 3, 3 - (1 << 31), (1 << 31) - 1),
                                            (1 << 30, 33, "double_round", 0, 0, -5, 5)]:
        expected = _rescale(v.astype(I64) - izp, [m], [s], rounding, zp, lo, hi, "i32")  # (RESCALE of v, input_zp izp)
        dbl = rounding == "double_round" and s > 31
        power = m.bit_length() - 1 if m & (m - 1) == 0 else -1
        shl = power - s if power >= s and not dbl else -1
        clamp = not (lo == -(1 << 31) and hi == (1 << 31) - 1 and zp == 0)
        out = np.zeros(v.size, np.int32)
        driver.call("t_ew_rescale", v, v.size, np.array([izp, m, s, dbl, shl, clamp, zp, lo, hi], np.int32), out)
        _assert_equal(out, expected, f"qc_x86_ew_rescale m={m} s={s} {rounding}")
