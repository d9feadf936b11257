/* qc_mve.h: qcodegen's int8 kernels for Cortex-M55 Helium (MVE, the M-profile vector extension: 128-bit vectors,
 * tail predication). Which kernel a step runs, and the weight layout it reads, is decided at generation time
 * (qcodegen/kernels/mve/; docs/targets.md "Cortex-M55"). Two forms, chosen per kernel family by the measured
 * instructions and code size:
 *   - the depthwise kernels (qc_mve_dw_*) are functions of qc_mve.c, compiled once and shared by every model of a
 *     firmware;
 *   - the convolutions (qc_mve_conv_*, qc_mve_dot_*, and the depthwise int32 sums qc_mve_dw_s32) are static
 *     functions of qc_mve_conv.h, compiled into each model that uses them and specialized by the compiler for the
 *     constant row length, channels and requantization of the step that calls them (their inline asm is unrolled
 *     over the row's 16-byte chunks);
 *   - the vector helpers of this header (requantization, AVG_POOL2D sums, element-wise chains) are static inline
 *     functions the generated steps call with their constants.
 *
 * Names: qc_mve_<op>_<variant>_<dtype>:
 *   conv_{1px,2px}_{s8,s16}    every output channel of 1 or 2 output pixels, requantized to int8 / int16 inside;
 *   conv_run_{s8,s16}          every pixel of a 1x1 stride-1 step (contiguous pixels), in pairs;
 *   conv_rows_{s8,s16}         every pixel of a step whose window rows are runs of at most 16 inputs, one output
 *                              row at a time over its input rows copied with their padding;
 *   copy8, gather_rows         copies of rows (a value where there is no source) and of a window's runs;
 *   dot_s8, dot_4rows_s8       sums of int8 products of 1 or 4 weight rows (the step requantizes);
 *   dw_s8_<rq>[_clamp], dw_s32 depthwise convolution pixels, requantized to int8 (rq: single, double: TOSA
 *                              SINGLE_ROUND / DOUBLE_ROUND; _clamp: a clamp inside int8) or as int32 sums;
 *   dw_s8_rows                 a whole depthwise step, one dw_s8_* call per output row over padded input rows;
 *   mla_s8                     one depthwise tap of the portable loops;
 *   pool_sum_s8_{s16,s32}      AVG_POOL2D window sums of int8 channels;
 *   ew_*                       the parts of a requantizing element-wise chain, 4 int32 lanes at a time.
 * The weight layouts (mve_pw4x2, mve_dw_w16, mve_dw_params) are made at generation time
 * (qcodegen/kernels/mve/layouts.py). C99 with GCC inline asm and ACLE MVE intrinsics; -Wall -Wextra -Werror
 * -pedantic clean. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_MVE_H
#define QC_MVE_H

#include <arm_mve.h>
#include <stddef.h>
#include <stdint.h>

/* The kernels' inline asm needs every allocatable core register; GCC without optimization keeps a frame pointer
   and cannot allocate them ("impossible constraints"). */
#if defined(__GNUC__) && !defined(__OPTIMIZE__)
#error "qcodegen: compile the Cortex-M kernels with optimization (-O1, -O2, -O3, -Os, or -Og for debugging), not -O0"
#endif

#define QC_MVE_INLINE static inline __attribute__((always_inline, unused))

/* TOSA apply_scale_32 of 4 lanes for 32 <= s <= 62, exactly, without the zero point (s1 = 31 - s, a VRSHL count:
   a rounding arithmetic right shift by s - 31): qc_scale32_double_gt31 (dbl) or qc_scale32_single.
   VQRDMULH gives floor((2 v m + 2^31) / 2^32) = floor((v m + 2^30) / 2^31) (it saturates only for v = m = -2^31;
   m >= 0), VQDMULH floor(v m / 2^31). With X = v m + R0 (R0 = 2^30 - 2^31 (v < 0) when dbl, else 0),
   q = floor(X / 2^31) is that minus (v < 0) when dbl (adding v >> 31), else VQDMULH. Then, as 2^(s-1) is a
   multiple of 2^31, floor((X + 2^(s-1)) / 2^s) = floor((q + 2^(s-32)) / 2^(s-31)) (write q = h 2^(s-31) + e,
   0 <= e < 2^(s-31)): VRSHL by 31 - s (its rounding sum is not truncated). |q| <= 2^30 + 1: no overflow. */
QC_MVE_INLINE int32x4_t qc_mve_floor32(int32x4_t v, int32x4_t m, int32x4_t s1, int dbl) {
  const int32x4_t q = dbl ? vaddq_s32(vqrdmulhq_s32(v, m), vshrq_n_s32(v, 31)) : vqdmulhq_s32(v, m);
  return vrshlq_s32(q, s1);
}

/* qc_mve_floor32 plus the zero point zp (|result| <= 2^30 + |zp|). */
QC_MVE_INLINE int32x4_t qc_mve_scale32(int32x4_t v, int32x4_t m, int32x4_t s1, int32_t zp, int dbl) {
  const int32x4_t r = qc_mve_floor32(v, m, s1, dbl);
  return zp ? vaddq_n_s32(r, zp) : r;
}

/* The n int8 at src copied to dst (a convolution's gathered window row): whole 16-byte chunks, then the rest
   tail-predicated (VCTP8: the lanes past n are neither loaded nor stored). */
QC_MVE_INLINE void qc_mve_copy_s8(int8_t *dst, const int8_t *src, int32_t n) {
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    vstrbq_s8(dst + i, vldrbq_s8(src + i));
  }
  if (i < n) {
    const mve_pred16_t p = vctp8q((uint32_t)(n - i));
    vstrbq_p_s8(dst + i, vldrbq_z_s8(src + i, p), p);
  }
}

/* d[0 .. bytes) = s[...] (s NULL: the byte v everywhere), 16 bytes a load and store, the last ones predicated (a
   tail-predicated low-overhead loop). */
QC_MVE_INLINE void qc_mve_copy8(int8_t *d, const int8_t *s, int8_t v, int32_t bytes) {
  int8x16_t q = vdupq_n_s8(v);
  if (s) {
    __asm__ volatile("wlstp.8 lr, %[k], 2f\n1:\n\tvldrb.8 %q[q], [%[s]], #16\n\tvstrb.8 %q[q], [%[d]], #16\n\t"
                     "letp lr, 1b\n2:"
                     : [q] "=&w"(q), [s] "+r"(s), [d] "+r"(d) : [k] "r"(bytes) : "lr", "memory");
  } else {
    __asm__ volatile("wlstp.8 lr, %[k], 2f\n1:\n\tvstrb.8 %q[q], [%[d]], #16\n\tletp lr, 1b\n2:"
                     : [d] "+r"(d) : [q] "w"(q), [k] "r"(bytes) : "lr", "memory");
  }
}

/* A convolution's window of `rows` runs of n <= 16 int8 (run r at src + r * stride, 16 bytes readable from each)
   gathered to dst + r * n: each run by one 16-byte load and store; dst holds 16 - n bytes more than the window (a
   run's last 16 - n bytes, overwritten by the next run's). Unrolled: rows is a constant. */
QC_MVE_INLINE void qc_mve_gather_rows(int8_t *dst, const int8_t *src, int32_t stride, int32_t n, int32_t rows) {
#pragma GCC unroll 16
  for (int32_t r = 0; r < rows; ++r) {
    vstrbq_s8(dst + r * n, vldrbq_s8(src + r * stride));
  }
}

/* ---- depthwise ---- */

/* The constants of qc_mve_dw_s8_*: w: the mve_dw_w16 weights (per block of 16 channels and tap, 16 int8); pr: the
   mve_dw_params (per block, 60 int32: the accumulators' start, the multipliers and 31 - shift, 16 int32 each in
   the lane order of the accumulators, a[j] = channels j, j + 4, j + 8, j + 12; the output zero point as 8 int16,
   the clamp's lo and hi as 16 int8 each); n: the channels; taps: the window's taps; copies: with fewer than 16
   channels, the pixels one vector holds in a run of consecutive pixels (16 / n; the arrays were made with the
   channels repeated that often), else 1; zp: the output zero point; lo, hi: the clamp (inside int8). */
typedef struct {
  const int8_t *w;
  const int32_t *pr;
  int32_t n, taps, copies, zp, lo, hi;
} qc_mve_dw_params;

/* All channels of `count` output pixels of a depthwise convolution (multiplier 1), tap t of pixel i reading its n
   input channels at b + i * step + tab[t] (tab: byte offsets from b, or addresses with b = NULL), requantized to
   int8 at y (the next pixel's outputs at + n). */
void qc_mve_dw_s8_single(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y, int32_t count,
                         int32_t step);
void qc_mve_dw_s8_single_clamp(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y,
                               int32_t count, int32_t step);
void qc_mve_dw_s8_double(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y, int32_t count,
                         int32_t step);
void qc_mve_dw_s8_double_clamp(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y,
                               int32_t count, int32_t step);

/* The type of qc_mve_dw_s8_{single,double}[_clamp]. */
typedef void qc_mve_dw_fn(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y, int32_t count,
                          int32_t step);

/* The geometry of qc_mve_dw_s8_rows: batches n, input ih x iw, output oh x ow, kernel kh x kw, stride sy, sx,
   dilation dy, dx, top and left padding pt, pl; the scratch's rows (slots = (kh - 1) dy + 1) of cols = (ow - 1) sx +
   (kw - 1) dx + 1 pixels; pad: the value a tap outside the input reads. */
typedef struct {
  int32_t n, ih, iw, oh, ow, kh, kw, sy, sx, dy, dx, pt, pl, slots, cols, pad;
} qc_mve_dw_geo;

/* A whole depthwise step one output row at a time, by one call of fn (one of qc_mve_dw_s8_*) per row over
   `scratch`, a ring of G->slots padded input rows (input row r in slot (r + pt) mod slots, its pixels from column pl
   on, the pad value around them and in the rows outside the input): every pixel of the row is interior there, its
   taps at offsets from the scratch (tab: slots tables of kh * kw, one per slot of the window's first row, made at
   generation time), stepping by sx pixels. Each input row is copied once per batch (16 bytes a load and store,
   tail-predicated); the padding columns are written once. */
void qc_mve_dw_s8_rows(qc_mve_dw_fn *fn, const qc_mve_dw_params *P, const qc_mve_dw_geo *G, const uintptr_t *tab,
                       const int8_t *x, int8_t *y, int8_t *scratch);

/* The constants of qc_mve_dw_s32 (qc_mve_conv.h): w: the int8 weights [taps][n] (as the graph holds them); base:
   the accumulators' start per channel, bias[c] - izp * the sum of channel c's weights (made at generation time);
   n; taps. */
typedef struct {
  const int8_t *w;
  const int32_t *base;
  int32_t n, taps;
} qc_mve_dw_s32_params;

/* acc[i] += (x[i] - izp) * w[i] for i < n (one tap of the portable depthwise loops; exact in int32: the loops'
   accumulators are proven to fit). */
QC_MVE_INLINE void qc_mve_mla_s8(int32_t *acc, const int8_t *x, const int8_t *w, int32_t n, int32_t izp) {
  const int32_t n4 = n / 4 * 4;
  for (int32_t i = 0; i < n4; i += 4) {
    const int32x4_t p = vmulq_s32(vsubq_n_s32(vldrbq_s32(x + i), izp), vldrbq_s32(w + i));
    vstrwq_s32(acc + i, vaddq_s32(vldrwq_s32(acc + i), p));
  }
  if (n4 < n) {
    const mve_pred16_t t = vctp32q((uint32_t)(n - n4));
    const int32x4_t p = vmulq_s32(vsubq_n_s32(vldrbq_z_s32(x + n4, t), izp), vldrbq_z_s32(w + n4, t));
    vstrwq_p_s32(acc + n4, vaddq_s32(vldrwq_z_s32(acc + n4, t), p), t);
  }
}

/* ---- AVG_POOL2D ---- */

/* sum[c] for c < channels: the sum over ky in [ky0, ky1), kx in [kx0, kx1) of x[ky * row + kx * channels + c]
   (x: the window's first input pixel; row: the elements of an input row), in int16 lanes (VLDRB.S16, VADD.I16:
   modular like the portable loop's int16 casts; the caller proves |sum| <= 128 * taps <= 32767) or int32 lanes;
   blocks of 8 / 4 channels, the last one tail-predicated (inactive lanes load zeros and are not stored). */
QC_MVE_INLINE void qc_mve_pool_sum_s8_s16(int16_t *sum, const int8_t *x, int32_t channels, int32_t row,
                                          int32_t ky0, int32_t ky1, int32_t kx0, int32_t kx1) {
  for (int32_t c = 0; c < channels; c += 8) {
    const mve_pred16_t p = vctp16q((uint32_t)(channels - c));
    int16x8_t v = vdupq_n_s16(0);
    for (int32_t ky = ky0; ky < ky1; ++ky) {
      const int8_t *xr = x + ky * row + c;
      for (int32_t kx = kx0; kx < kx1; ++kx) {
        v = vaddq_s16(v, channels % 8 ? vldrbq_z_s16(xr + kx * channels, p) : vldrbq_s16(xr + kx * channels));
      }
    }
    if (channels % 8) {
      vstrhq_p_s16(sum + c, v, p);
    } else {
      vstrhq_s16(sum + c, v);
    }
  }
}

QC_MVE_INLINE void qc_mve_pool_sum_s8_s32(int32_t *sum, const int8_t *x, int32_t channels, int32_t row,
                                          int32_t ky0, int32_t ky1, int32_t kx0, int32_t kx1) {
  for (int32_t c = 0; c < channels; c += 4) {
    const mve_pred16_t p = vctp32q((uint32_t)(channels - c));
    int32x4_t v = vdupq_n_s32(0);
    for (int32_t ky = ky0; ky < ky1; ++ky) {
      const int8_t *xr = x + ky * row + c;
      for (int32_t kx = kx0; kx < kx1; ++kx) {
        v = vaddq_s32(v, channels % 4 ? vldrbq_z_s32(xr + kx * channels, p) : vldrbq_s32(xr + kx * channels));
      }
    }
    if (channels % 4) {
      vstrwq_p_s32(sum + c, v, p);
    } else {
      vstrwq_s32(sum + c, v);
    }
  }
}

/* ---- element-wise chains (FUSED_ELEMENTWISE) ----
   The generated step runs its parts on 4 int32 lanes at a time, the last 4 tail-predicated (p = VCTP32 of the
   elements left): inactive lanes load zeros and are not stored. Every part's values are int32 (each is in its own
   output type, signed 8, 16 or 32 bits); vector adds wrap like the (int32_t) casts of the portable loop. */
QC_MVE_INLINE int32x4_t qc_mve_ew_load_s8(const int8_t *x, mve_pred16_t p) { return vldrbq_z_s32(x, p); }
QC_MVE_INLINE int32x4_t qc_mve_ew_load_s16(const int16_t *x, mve_pred16_t p) { return vldrhq_z_s32(x, p); }
QC_MVE_INLINE int32x4_t qc_mve_ew_load_s32(const int32_t *x, mve_pred16_t p) { return vldrwq_z_s32(x, p); }
QC_MVE_INLINE void qc_mve_ew_store_s8(int8_t *y, int32x4_t v, mve_pred16_t p) { vstrbq_p_s32(y, v, p); }
QC_MVE_INLINE void qc_mve_ew_store_s16(int16_t *y, int32x4_t v, mve_pred16_t p) { vstrhq_p_s32(y, v, p); }
QC_MVE_INLINE void qc_mve_ew_store_s32(int32_t *y, int32x4_t v, mve_pred16_t p) { vstrwq_p_s32(y, v, p); }
QC_MVE_INLINE int32x4_t qc_mve_ew_add(int32x4_t a, int32x4_t b) { return vaddq_s32(a, b); }
QC_MVE_INLINE int32x4_t qc_mve_ew_sub(int32x4_t a, int32x4_t b) { return vsubq_s32(a, b); }

/* min(max(v, lo), hi), a side left out where it is the int32 bound (no effect). */
QC_MVE_INLINE int32x4_t qc_mve_ew_clamp(int32x4_t v, int32_t lo, int32_t hi) {
  const int32x4_t r = lo > INT32_MIN ? vmaxq_s32(v, vdupq_n_s32(lo)) : v;
  return hi < INT32_MAX ? vminq_s32(r, vdupq_n_s32(hi)) : r;
}

/* RESCALE (per tensor, 32-bit scale, multiplier m >= 0) of v - izp, exact for 32 <= shift <= 62 (qc_mve_scale32,
   s1 = 31 - shift), clamped to lo..hi. The input's value minus izp fits int32 (it is in a signed type of at most
   16 bits when izp != 0: TOSA RESCALE). */
QC_MVE_INLINE int32x4_t qc_mve_ew_rescale32(int32x4_t v, int32_t izp, int32_t m, int32_t s1, int32_t zp, int dbl,
                                            int32_t lo, int32_t hi) {
  const int32x4_t a = izp ? vsubq_n_s32(v, izp) : v;
  return qc_mve_ew_clamp(qc_mve_scale32(a, vdupq_n_s32(m), vdupq_n_s32(s1), zp, dbl), lo, hi);
}

/* RESCALE by a multiplier 2^k and a shift s <= 31 with n = k - s (exact, either rounding), by one VRSHL by n:
   n >= 0: (v - izp) << n (the rounding term 2^(s-1) is below the multiple of 2^s; the caller proves the result
   fits int32 with the output's bounds); n < 0: a rounding right shift by -n, floor((v + 2^(-n-1)) / 2^(-n)), the
   same, computed without overflow; then + zp saturating (VQADD, which clamps like the int64 sum: lo..hi is inside
   int32), clamped to lo..hi. */
QC_MVE_INLINE int32x4_t qc_mve_ew_rescale_pow2(int32x4_t v, int32_t izp, int32_t n, int32_t zp, int32_t lo,
                                               int32_t hi) {
  const int32x4_t a = izp ? vsubq_n_s32(v, izp) : v;
  int32x4_t r = a;
  if (__builtin_constant_p(n) && n > 0 && n < 32) {  /* (the immediate forms where the count is a constant) */
    r = vshlq_n_s32(a, n);
  } else if (__builtin_constant_p(n) && n < 0 && n >= -32) {
    r = vrshrq_n_s32(a, -n);
  } else if (n) {
    r = vrshlq_n_s32(a, n);
  }
  return qc_mve_ew_clamp(zp ? vqaddq_n_s32(r, zp) : r, lo, hi);
}

#endif
