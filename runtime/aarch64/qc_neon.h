/* qc_neon.h: qcodegen's int8 kernels for AArch64 Advanced SIMD (NEON; targets aarch64-neon, aarch64-dotprod).
 * Which kernel a step runs, the weight layout it reads and its constants are decided at generation time
 * (qcodegen/kernels/aarch64/; docs/targets.md "Per-ISA kernels"); the model's step functions call them with constant
 * parameter structs.
 *
 * Form: `static inline` functions of this header, compiled into each model and specialized by the compiler for the
 * constant shapes, offsets and requantization of the step that calls them (loops of constant trip counts unrolled,
 * tap offsets as immediates). Measured: the same kernels out of line (as a shared object would be) take 7-107% more
 * instructions per MAC on the bench models (docs/targets.md "AArch64 (neon, dotprod): which form each kernel family
 * takes").
 *
 * Names: qc_neon_<op>_<variant>_<output>:
 *   dot_s8, dot_4rows_s8             sums of int8 products (SMULL + SADALP; with the dot-product extension, SDOT);
 *   conv_s32                         every output channel of one pixel as int32 accumulators, 4 rows per input;
 *   conv_{s8,s16}                    the same, 8 rows per block, requantized in vector lanes (qc_neon_rq8);
 *   dw_{s8,s16,s32}                  depthwise convolution of one output pixel, 16 channels in registers.
 * qc_neon_sdot.h adds the convolutions by SDOT by element (dot-product extension).
 *
 * Exactness. Integer dot products are exact in any order: each product of int8 values is at most 2^14 in magnitude,
 * rows are at most 65,535 long (a sum below 2^30), and the input zero point enters as izp * (the sum of a weight row),
 * made at generation time (|izp * sum| < 2^8 * 2^7 * 65,535 < 2^31). Sums kept in vector lanes are modular (the
 * lanes wrap), so any order of their terms gives the exact value whenever the final value fits int32, which range
 * analysis proves for every step that reaches these kernels (widened steps run the portable loops). Scalar sums add
 * the bias last, to an exact partial sum below 2^31.
 * C99 with ACLE intrinsics; -Wall -Wextra -Werror -pedantic clean. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_NEON_H
#define QC_NEON_H

#include <arm_neon.h>
#include <stdint.h>

#include "qc_runtime.h"

#define QC_NEON_INLINE static inline __attribute__((always_inline, unused))

/* ---- Requantization ------------------------------------------------------------------------------------------- */

/* The requantization of a step's int32 accumulators to its int8 or int16 outputs (TOSA RESCALE with scale32, input
   zero point 0, SINGLE_ROUND or DOUBLE_ROUND with shifts > 31; each shift 2 <= s <= 62): per channel, the
   multipliers mult[c] and minus the shifts nsh[c] (int64: the SRSHL operands; qc_neon_widen_shifts), or per
   tensor m and s; dbl: double rounding; zp: the output zero point; lo, hi: the clamp. */
typedef struct {
  const int32_t *mult;
  const int64_t *nsh;
  int32_t per_channel, m, s, dbl, zp, lo, hi;
} qc_neon_rq_params;

/* nsh[c] = neg[c], c < n: minus the shifts of a step (int8 in flash) as the int64 operands of SRSHL, once per step
   (int64 arrays in flash would take 7 more bytes per channel). */
QC_NEON_INLINE void qc_neon_widen_shifts(const int8_t *neg, int32_t n, int64_t *nsh) {
  for (int32_t c = 0; c < n; ++c) {
    nsh[c] = neg[c];
  }
}

/* TOSA apply_scale_32 of the 4 int32 lanes of v (multipliers m; n0, n1: minus the shifts of lanes 0-1 and 2-3), as
   qc_scale32_single (dbl = 0) or qc_scale32_double_gt31 (dbl = 1) compute it: with p = v * m (SMULL, exact)
   + 2^30 * (v < 0 ? -1 : 1) when dbl (SMLAL, exact: the DOUBLE_ROUND term 2^30 - 2^31 * (v < 0)), SRSHL by -s gives
   floor((p + 2^(s-1)) / 2^s) (the architecture adds the rounding constant without overflow), truncated to int32
   (UZP1: the low halves). */
QC_NEON_INLINE int32x4_t qc_neon_scale32x4(int32x4_t v, int32x4_t m, int64x2_t n0, int64x2_t n1, int dbl) {
  int64x2_t p0 = vmull_s32(vget_low_s32(v), vget_low_s32(m)), p1 = vmull_high_s32(v, m);
  if (dbl) {
    const int32x4_t sg = vorrq_s32(vshrq_n_s32(v, 31), vdupq_n_s32(1));
    p0 = vmlal_n_s32(p0, vget_low_s32(sg), 1 << 30);
    p1 = vmlal_high_n_s32(p1, sg, 1 << 30);
  }
  return vuzp1q_s32(vreinterpretq_s32_s64(vrshlq_s64(p0, n0)), vreinterpretq_s32_s64(vrshlq_s64(p1, n1)));
}

/* qc_clamp64((int64_t)q + zp, lo, hi) of 8 int32 lanes (q0, q1), for lo - zp and hi - zp in int32 (8/16-bit
   outputs: clamping q to [lo - zp, hi - zp] first gives the same values without overflow), as int16 lanes. */
QC_NEON_INLINE int16x8_t qc_neon_zp_clamp8(int32x4_t q0, int32x4_t q1, int32_t zp, int32_t lo, int32_t hi) {
  const int32x4_t l = vdupq_n_s32(lo - zp), h = vdupq_n_s32(hi - zp), z = vdupq_n_s32(zp);
  q0 = vaddq_s32(vminq_s32(vmaxq_s32(q0, l), h), z);
  q1 = vaddq_s32(vminq_s32(vmaxq_s32(q1, l), h), z);
  return vcombine_s16(vmovn_s32(q0), vmovn_s32(q1));
}

/* The output element size of a kernel's stores: int8, int16 (requantized) or int32 (the accumulators). */
enum { QC_NEON_S8 = 1, QC_NEON_S16 = 2, QC_NEON_S32 = 4 };

/* Requantizes the accumulators a0, a1 of channels c .. c + 7 (R) and stores them at y (out: QC_NEON_S8 or _S16). */
QC_NEON_INLINE void qc_neon_rq8(const qc_neon_rq_params *R, int32x4_t a0, int32x4_t a1, int32_t c, void *y, int out) {
  int32x4_t q0, q1;
  if (R->per_channel) {
    const int32x4x2_t m = vld1q_s32_x2(R->mult + c);
    const int64x2x4_t n = vld1q_s64_x4(R->nsh + c);
    q0 = qc_neon_scale32x4(a0, m.val[0], n.val[0], n.val[1], R->dbl);
    q1 = qc_neon_scale32x4(a1, m.val[1], n.val[2], n.val[3], R->dbl);
  } else {
    const int32x4_t m = vdupq_n_s32(R->m);
    const int64x2_t n = vdupq_n_s64(-(int64_t)R->s);
    q0 = qc_neon_scale32x4(a0, m, n, n, R->dbl);
    q1 = qc_neon_scale32x4(a1, m, n, n, R->dbl);
  }
  if (out == QC_NEON_S16) {
    vst1q_s16((int16_t *)y, qc_neon_zp_clamp8(q0, q1, R->zp, R->lo, R->hi));
  } else if (R->lo == -128 && R->hi == 127) {
    /* clamp(q + zp, -128, 127) by saturating narrows: q to int16 (SQXTN), + zp (SQADD; |zp| <= 128, so a saturated
       q stays out of the int8 range), to int8 (SQXTN) */
    vst1_s8((int8_t *)y, vqmovn_s16(vqaddq_s16(vqmovn_high_s32(vqmovn_s32(q0), q1), vdupq_n_s16((int16_t)R->zp))));
  } else {
    vst1_s8((int8_t *)y, vmovn_s16(qc_neon_zp_clamp8(q0, q1, R->zp, R->lo, R->hi)));
  }
}

/* The same for one accumulator of channel c, with the scalar functions of qc_runtime.h, stored at y[0]. */
QC_NEON_INLINE void qc_neon_rq1(const qc_neon_rq_params *R, int32_t acc, int32_t c, void *y, int out) {
  const int32_t m = R->per_channel ? R->mult[c] : R->m;
  const int s = R->per_channel ? (int)-R->nsh[c] : R->s;
  const int32_t q = R->dbl ? qc_scale32_double_gt31(acc, m, s) : qc_scale32_single(acc, m, s);
  const int64_t v = qc_clamp64((int64_t)q + R->zp, R->lo, R->hi);
  if (out == QC_NEON_S16) {
    *(int16_t *)y = (int16_t)v;
  } else {
    *(int8_t *)y = (int8_t)v;
  }
}

/* Requantizes the n accumulators acc of channels 0 .. n - 1 (R) into y (out: QC_NEON_S8 or _S16): by 8 channels in
   vector lanes, the last n % 8 by qc_neon_rq1. */
QC_NEON_INLINE void qc_neon_rq_array(const qc_neon_rq_params *R, const int32_t *acc, int32_t n, void *y, int out) {
  int32_t c = 0;
  for (; c + 8 <= n; c += 8) {
    qc_neon_rq8(R, vld1q_s32(acc + c), vld1q_s32(acc + c + 4), c, (int8_t *)y + c * out, out);
  }
  for (; c < n; ++c) {
    qc_neon_rq1(R, acc[c], c, (int8_t *)y + c * out, out);
  }
}

/* The exceptions to the single rounding of a float32 requantization (enumerated at plan time: docs/semantics.md
   §14.5): where the accumulator acc[ch[e]] of channel ch[e] is ea[e], its output y[ch[e]] (out: QC_NEON_S8 or _S16),
   already requantized, becomes ev[e]; e < count, compares only. */
QC_NEON_INLINE void qc_neon_except(const int32_t *ch, const int32_t *ea, const int32_t *ev, int32_t count,
                                   const int32_t *acc, void *y, int out) {
  for (int32_t e = 0; e < count; ++e) {
    if (acc[ch[e]] == ea[e]) {
      if (out == QC_NEON_S16) {
        ((int16_t *)y)[ch[e]] = (int16_t)ev[e];
      } else {
        ((int8_t *)y)[ch[e]] = (int8_t)ev[e];
      }
    }
  }
}

/* ---- Dot products ---------------------------------------------------------------------------------------------- */

#if defined(__ARM_FEATURE_DOTPROD)
/* sum of a[i] * b[i], i < n: SDOT adds four int8 products into each int32 lane, 16 then 8 elements a step. */
static inline __attribute__((unused)) int32_t qc_neon_dot_s8(const int8_t *a, const int8_t *b, int32_t n) {
  int32x4_t v = vdupq_n_s32(0);
  const int32_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (int32_t i = 0; i < n16; i += 16) {
    v = vdotq_s32(v, vld1q_s8(a + i), vld1q_s8(b + i));
  }
  int32_t s = vaddvq_s32(v);
  if (n8 > n16) {
    const int32_t i = n16;
    s += vaddv_s32(vdot_s32(vdup_n_s32(0), vld1_s8(a + i), vld1_s8(b + i)));
  }
  for (int32_t i = n8; i < n; ++i) {
    s += (int32_t)a[i] * b[i];
  }
  return s;
}

/* s[r] = qc_neon_dot_s8(a, w + r * n, n) for the 4 rows r < 4 at w: each input vector loaded once for all four. */
static inline __attribute__((unused)) void qc_neon_dot_4rows_s8(const int8_t *a, const int8_t *w, int32_t n,
                                                                int32_t *s) {
  int32x4_t v0 = vdupq_n_s32(0), v1 = v0, v2 = v0, v3 = v0;
  const int32_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (int32_t i = 0; i < n16; i += 16) {
    const int8x16_t va = vld1q_s8(a + i);
    v0 = vdotq_s32(v0, va, vld1q_s8(w + i));
    v1 = vdotq_s32(v1, va, vld1q_s8(w + n + i));
    v2 = vdotq_s32(v2, va, vld1q_s8(w + 2 * n + i));
    v3 = vdotq_s32(v3, va, vld1q_s8(w + 3 * n + i));
  }
  int32x4_t v = vpaddq_s32(vpaddq_s32(v0, v1), vpaddq_s32(v2, v3));
  if (n8 > n16) {
    const int32_t i = n16;
    const int8x8_t va = vld1_s8(a + i);
    const int32x2_t z = vdup_n_s32(0);
    const int32x4_t h0 = vcombine_s32(vdot_s32(z, va, vld1_s8(w + i)), vdot_s32(z, va, vld1_s8(w + n + i)));
    const int32x4_t h1 = vcombine_s32(vdot_s32(z, va, vld1_s8(w + 2 * n + i)),
                                      vdot_s32(z, va, vld1_s8(w + 3 * n + i)));
    v = vaddq_s32(v, vpaddq_s32(h0, h1));
  }
  for (int32_t i = n8; i < n; ++i) {
    const int32_t x = a[i];
    const int32_t t[4] = {x * w[i], x * w[n + i], x * w[2 * n + i], x * w[3 * n + i]};
    v = vaddq_s32(v, vld1q_s32(t));
  }
  vst1q_s32(s, v);
}
#else
/* v + the products of the 16 int8 pairs of a and b: SMULL (int8 x int8 -> int16, at most 2^14) and SADALP (pairwise
   add into the int32 lanes). */
static inline __attribute__((unused)) int32x4_t qc_neon_mla16_s8(int32x4_t v, int8x16_t a, int8x16_t b) {
  v = vpadalq_s16(v, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(v, vmull_high_s8(a, b));
}

/* sum of a[i] * b[i], i < n: 16 then 8 elements a step, the rest scalar. */
static inline __attribute__((unused)) int32_t qc_neon_dot_s8(const int8_t *a, const int8_t *b, int32_t n) {
  int32x4_t v = vdupq_n_s32(0);
  const int32_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (int32_t i = 0; i < n16; i += 16) {
    v = qc_neon_mla16_s8(v, vld1q_s8(a + i), vld1q_s8(b + i));
  }
  if (n8 > n16) {
    const int32_t i = n16;
    v = vpadalq_s16(v, vmull_s8(vld1_s8(a + i), vld1_s8(b + i)));
  }
  int32_t s = vaddvq_s32(v);
  for (int32_t i = n8; i < n; ++i) {
    s += (int32_t)a[i] * b[i];
  }
  return s;
}

/* s[r] = qc_neon_dot_s8(a, w + r * n, n) for the 4 rows r < 4 at w: each input vector loaded once for all four. */
static inline __attribute__((unused)) void qc_neon_dot_4rows_s8(const int8_t *a, const int8_t *w, int32_t n,
                                                                int32_t *s) {
  int32x4_t v0 = vdupq_n_s32(0), v1 = v0, v2 = v0, v3 = v0;
  const int32_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (int32_t i = 0; i < n16; i += 16) {
    const int8x16_t va = vld1q_s8(a + i);
    v0 = qc_neon_mla16_s8(v0, va, vld1q_s8(w + i));
    v1 = qc_neon_mla16_s8(v1, va, vld1q_s8(w + n + i));
    v2 = qc_neon_mla16_s8(v2, va, vld1q_s8(w + 2 * n + i));
    v3 = qc_neon_mla16_s8(v3, va, vld1q_s8(w + 3 * n + i));
  }
  if (n8 > n16) {
    const int32_t i = n16;
    const int8x8_t va = vld1_s8(a + i);
    v0 = vpadalq_s16(v0, vmull_s8(va, vld1_s8(w + i)));
    v1 = vpadalq_s16(v1, vmull_s8(va, vld1_s8(w + n + i)));
    v2 = vpadalq_s16(v2, vmull_s8(va, vld1_s8(w + 2 * n + i)));
    v3 = vpadalq_s16(v3, vmull_s8(va, vld1_s8(w + 3 * n + i)));
  }
  int32x4_t v = vpaddq_s32(vpaddq_s32(v0, v1), vpaddq_s32(v2, v3));
  for (int32_t i = n8; i < n; ++i) {
    const int32_t x = a[i];
    const int32_t t[4] = {x * w[i], x * w[n + i], x * w[2 * n + i], x * w[3 * n + i]};
    v = vaddq_s32(v, vld1q_s32(t));
  }
  vst1q_s32(s, v);
}
#endif

/* ---- Convolutions as dot products of weight rows ---------------------------------------------------------------- */

/* The constants of a convolution step (CONV2D, or FUSED_CONV: its requantization in rq): w: the int8 weight rows
   [rows][k] (OHWI); wq: the rows re-laid for SDOT by element (qc_neon_sdot.h; kn elements each: k, or the padded
   window length); bias: per channel (bias_pc) or one; zc: izp * the sum of each row (NULL when izp = 0). */
typedef struct {
  const int8_t *w, *wq;
  const int32_t *bias, *zc;
  int32_t rows, k, kn, bias_pc;
  qc_neon_rq_params rq;
} qc_neon_conv_params;

/* The bias of channels c .. c + 3, less their zero-point terms. */
QC_NEON_INLINE int32x4_t qc_neon_conv_start4(const qc_neon_conv_params *P, int32_t c) {
  const int32x4_t b = P->bias_pc ? vld1q_s32(P->bias + c) : vdupq_n_s32(P->bias[0]);
  return P->zc ? vsubq_s32(b, vld1q_s32(P->zc + c)) : b;
}

/* The accumulator of output channel oc of the window x from its int8 row: bias + (sum - zero-point term). */
QC_NEON_INLINE int32_t qc_neon_conv_acc1(const qc_neon_conv_params *P, const int8_t *x, int32_t oc) {
  const int32_t s = qc_neon_dot_s8(x, P->w + oc * P->k, P->k) - (P->zc ? P->zc[oc] : 0);
  return P->bias[P->bias_pc ? oc : 0] + s;
}

/* The accumulators of every output channel of the window x (P->k elements) at acc[0 .. rows - 1]: 4 rows per
   qc_neon_dot_4rows_s8, then the rest one by one. */
QC_NEON_INLINE void qc_neon_conv_s32(const qc_neon_conv_params *P, const int8_t *x, int32_t *acc) {
  const int32_t blocked = P->rows / 4 * 4;
  for (int32_t oc0 = 0; oc0 < blocked; oc0 += 4) {
    int32_t s[4];
    qc_neon_dot_4rows_s8(x, P->w + oc0 * P->k, P->k, s);
    for (int32_t r = 0; r < 4; ++r) {
      const int32_t oc = oc0 + r;
      acc[oc] = P->bias[P->bias_pc ? oc : 0] + (s[r] - (P->zc ? P->zc[oc] : 0));
    }
  }
  for (int32_t oc = blocked; oc < P->rows; ++oc) {
    acc[oc] = qc_neon_conv_acc1(P, x, oc);
  }
}

/* Every output channel of the window x requantized (P->rq) to y: 8 rows per block (two qc_neon_dot_4rows_s8, the
   requantization in vector lanes), the rows after the last block one by one. */
QC_NEON_INLINE void qc_neon_conv_rq(const qc_neon_conv_params *P, const int8_t *x, void *y, int out) {
  const int32_t blocked = P->rows / 8 * 8;
  for (int32_t oc0 = 0; oc0 < blocked; oc0 += 8) {
    int32_t s[8];
    qc_neon_dot_4rows_s8(x, P->w + oc0 * P->k, P->k, s);
    qc_neon_dot_4rows_s8(x, P->w + (oc0 + 4) * P->k, P->k, s + 4);
    const int32x4_t a0 = vaddq_s32(vld1q_s32(s), qc_neon_conv_start4(P, oc0));
    const int32x4_t a1 = vaddq_s32(vld1q_s32(s + 4), qc_neon_conv_start4(P, oc0 + 4));
    qc_neon_rq8(&P->rq, a0, a1, oc0, (char *)y + oc0 * out, out);
  }
  for (int32_t oc = blocked; oc < P->rows; ++oc) {
    qc_neon_rq1(&P->rq, qc_neon_conv_acc1(P, x, oc), oc, (char *)y + oc * out, out);
  }
}

QC_NEON_INLINE void qc_neon_conv_s8(const qc_neon_conv_params *P, const int8_t *x, int8_t *y) {
  qc_neon_conv_rq(P, x, y, QC_NEON_S8);
}

QC_NEON_INLINE void qc_neon_conv_s16(const qc_neon_conv_params *P, const int8_t *x, int16_t *y) {
  qc_neon_conv_rq(P, x, y, QC_NEON_S16);
}

/* ---- Depthwise convolution (channel multiplier 1) --------------------------------------------------------------- */

/* The constants of a depthwise step: w: the int8 weights [kh * kw][n]; bias: per channel (bias_pc) or one; start:
   -izp * the sum of each channel's weights over the taps (NULL when izp = 0: the accumulators start at 0); padrow:
   n pad values (read by the taps outside the input of a border pixel, for windows of at most 9 taps); the input
   image ih x iw x n, the window kh x kw, dilations dy, dx; pad_value (larger windows add pad_value * w for a tap
   outside); pairs: no weight is -128, so that two taps' products add up in int16 lanes (|x w| <= 128 * 127, two
   sum to at most 32,512). Every partial sum stays within |start| + taps * 2^14 < 2^30 for at most 4096 taps; the
   bias is added last, to the exact sum. */
typedef struct {
  const int8_t *w, *padrow;
  const int32_t *bias, *start;
  int32_t n, ih, iw, kh, kw, dy, dx, pad_value, pairs, bias_pc;
  qc_neon_rq_params rq;
} qc_neon_dw_params;

/* 0 <= i < n, by one unsigned comparison. */
QC_NEON_INLINE int qc_neon_inside(int32_t i, int32_t n) { return (uint32_t)i < (uint32_t)n; }

/* The accumulators of a block of up to 16 channels: v[0..3] (channels 0-3, 4-7, 8-11, 12-15) for the groups of 8,
   t[] for the channels after the last group of 8 (a last block of fewer than 16). */
typedef struct {
  int32x4_t v[4];
  int32_t t[8];
} qc_neon_dw_acc;

/* Adds one tap (inputs x, weights w; channel c0 of the block at both) to the cn channels of A: SMULL (|x w| <= 2^14)
   and SADDW into the int32 lanes. */
QC_NEON_INLINE void qc_neon_dw_tap(qc_neon_dw_acc *A, const int8_t *x, const int8_t *w, int32_t cn) {
  if (cn >= 16) {
    const int8x16_t xv = vld1q_s8(x), wv = vld1q_s8(w);
    const int16x8_t t = vmull_s8(vget_low_s8(xv), vget_low_s8(wv)), u = vmull_high_s8(xv, wv);
    A->v[0] = vaddw_s16(A->v[0], vget_low_s16(t));
    A->v[1] = vaddw_high_s16(A->v[1], t);
    A->v[2] = vaddw_s16(A->v[2], vget_low_s16(u));
    A->v[3] = vaddw_high_s16(A->v[3], u);
  } else if (cn >= 8) {
    const int16x8_t t = vmull_s8(vld1_s8(x), vld1_s8(w));
    A->v[0] = vaddw_s16(A->v[0], vget_low_s16(t));
    A->v[1] = vaddw_high_s16(A->v[1], t);
  }
  for (int32_t j = cn / 8 * 8; j < cn; ++j) {
    A->t[j - cn / 8 * 8] += (int32_t)x[j] * w[j];
  }
}

/* Adds two taps (x0, w0 and x1, w1) when no weight is -128: their products summed in int16 lanes (SMULL, SMLAL; at
   most 32,512 in magnitude), then widened. */
QC_NEON_INLINE void qc_neon_dw_tap2(qc_neon_dw_acc *A, const int8_t *x0, const int8_t *w0, const int8_t *x1,
                                    const int8_t *w1, int32_t cn) {
  if (cn >= 16) {
    const int8x16_t xa = vld1q_s8(x0), wa = vld1q_s8(w0), xb = vld1q_s8(x1), wb = vld1q_s8(w1);
    const int16x8_t t = vmlal_s8(vmull_s8(vget_low_s8(xa), vget_low_s8(wa)), vget_low_s8(xb), vget_low_s8(wb));
    const int16x8_t u = vmlal_high_s8(vmull_high_s8(xa, wa), xb, wb);
    A->v[0] = vaddw_s16(A->v[0], vget_low_s16(t));
    A->v[1] = vaddw_high_s16(A->v[1], t);
    A->v[2] = vaddw_s16(A->v[2], vget_low_s16(u));
    A->v[3] = vaddw_high_s16(A->v[3], u);
  } else if (cn >= 8) {
    const int16x8_t t = vmlal_s8(vmull_s8(vld1_s8(x0), vld1_s8(w0)), vld1_s8(x1), vld1_s8(w1));
    A->v[0] = vaddw_s16(A->v[0], vget_low_s16(t));
    A->v[1] = vaddw_high_s16(A->v[1], t);
  }
  for (int32_t j = cn / 8 * 8; j < cn; ++j) {
    A->t[j - cn / 8 * 8] += (int32_t)x0[j] * w0[j] + (int32_t)x1[j] * w1[j];
  }
}

/* Adds pad_value * w (a tap outside the input of a window of more than 9 taps). */
QC_NEON_INLINE void qc_neon_dw_pad(qc_neon_dw_acc *A, int32_t pad_value, const int8_t *w, int32_t cn) {
#pragma GCC unroll 2
  for (int32_t g = 0; g < cn / 8; ++g) {
    const int16x8_t t = vmovl_s8(vld1_s8(w + 8 * g));
    A->v[2 * g] = vmlal_n_s16(A->v[2 * g], vget_low_s16(t), (int16_t)pad_value);
    A->v[2 * g + 1] = vmlal_high_n_s16(A->v[2 * g + 1], t, (int16_t)pad_value);
  }
  for (int32_t j = cn / 8 * 8; j < cn; ++j) {
    A->t[j - cn / 8 * 8] += pad_value * w[j];
  }
}

/* The accumulators of channels c0 .. c0 + cn - 1 of one output pixel: bias + the sum over its taps, requantized to y
   (out QC_NEON_S8, _S16) or stored as int32 (QC_NEON_S32); y at the pixel's channel 0. The taps: x (the pixel's
   window origin, tap (ky, kx) at x + (ky dy iw + kx dx) n) when the window is inside the input (src NULL); else, for
   at most 9 taps, src[t] (the tap's input pixel, or padrow); else the input image xn and the window origin iy0, ix0,
   taps outside the input skipped (pad_value 0) or adding pad_value * w. */
QC_NEON_INLINE void qc_neon_dw_block(const qc_neon_dw_params *P, const int8_t *x, const int8_t *const *src,
                                     const int8_t *xn, int32_t iy0, int32_t ix0, int32_t c0, int32_t cn, void *y,
                                     int out) {
  const int32_t n = P->n, taps = P->kh * P->kw;
  qc_neon_dw_acc A;
#pragma GCC unroll 4
  for (int32_t v = 0; v < cn / 8 * 2; ++v) {
    A.v[v] = P->start ? vld1q_s32(P->start + c0 + 4 * v) : vdupq_n_s32(0);
  }
  for (int32_t j = cn / 8 * 8; j < cn; ++j) {
    A.t[j - cn / 8 * 8] = P->start ? P->start[c0 + j] : 0;
  }
  const int8_t *w = P->w + c0;
  if (taps <= 9) {
    const int32_t paired = P->pairs ? taps / 2 * 2 : 0;
#pragma GCC unroll 9
    for (int32_t t = 0; t < paired; t += 2) {
      const int8_t *x0 = src ? src[t] + c0 : x + ((t / P->kw) * P->dy * P->iw + (t % P->kw) * P->dx) * n + c0;
      const int8_t *x1 = src ? src[t + 1] + c0
                             : x + (((t + 1) / P->kw) * P->dy * P->iw + ((t + 1) % P->kw) * P->dx) * n + c0;
      qc_neon_dw_tap2(&A, x0, w + t * n, x1, w + (t + 1) * n, cn);
    }
#pragma GCC unroll 9
    for (int32_t t = paired; t < taps; ++t) {
      const int8_t *xt = src ? src[t] + c0 : x + ((t / P->kw) * P->dy * P->iw + (t % P->kw) * P->dx) * n + c0;
      qc_neon_dw_tap(&A, xt, w + t * n, cn);
    }
  } else {
    for (int32_t ky = 0; ky < P->kh; ++ky) {
      const int32_t iy = iy0 + ky * P->dy;
      for (int32_t kx = 0; kx < P->kw; ++kx) {
        const int32_t ix = ix0 + kx * P->dx;
        const int8_t *wc = w + (ky * P->kw + kx) * n;
        if (x) {
          qc_neon_dw_tap(&A, x + (ky * P->dy * P->iw + kx * P->dx) * n + c0, wc, cn);
        } else if (qc_neon_inside(iy, P->ih) && qc_neon_inside(ix, P->iw)) {
          qc_neon_dw_tap(&A, xn + (iy * P->iw + ix) * n + c0, wc, cn);
        } else if (P->pad_value != 0) {
          qc_neon_dw_pad(&A, P->pad_value, wc, cn);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int32_t g = 0; g < cn / 8; ++g) {
    const int32_t c = c0 + 8 * g;
    const int32x4_t b0 = P->bias_pc ? vld1q_s32(P->bias + c) : vdupq_n_s32(P->bias[0]);
    const int32x4_t b1 = P->bias_pc ? vld1q_s32(P->bias + c + 4) : vdupq_n_s32(P->bias[0]);
    const int32x4_t acc0 = vaddq_s32(A.v[2 * g], b0), acc1 = vaddq_s32(A.v[2 * g + 1], b1);
    if (out == QC_NEON_S32) {
      vst1q_s32((int32_t *)y + c, acc0);
      vst1q_s32((int32_t *)y + c + 4, acc1);
    } else {
      qc_neon_rq8(&P->rq, acc0, acc1, c, (char *)y + c * out, out);
    }
  }
  for (int32_t j = cn / 8 * 8; j < cn; ++j) {
    const int32_t c = c0 + j;
    const int32_t acc = P->bias[P->bias_pc ? c : 0] + A.t[j - cn / 8 * 8];
    if (out == QC_NEON_S32) {
      ((int32_t *)y)[c] = acc;
    } else {
      qc_neon_rq1(&P->rq, acc, c, (char *)y + c * out, out);
    }
  }
}

/* Every channel of one output pixel, in blocks of 16 (the last one of the rest): the window at x when it is inside
   the input (interior), else over the input image xn from the window origin iy0, ix0 (its taps' input pixels in a
   table, or read with bounds checks for more than 9 taps). */
QC_NEON_INLINE void qc_neon_dw(const qc_neon_dw_params *P, const int8_t *xn, int32_t iy0, int32_t ix0, int interior,
                               void *y, int out) {
  const int32_t full = P->n / 16 * 16, taps = P->kh * P->kw;
  const int8_t *x = interior ? xn + (iy0 * P->iw + ix0) * P->n : (const int8_t *)0;
  const int8_t *src[9];
  const int8_t *const *table = (const int8_t *const *)0;
  if (!interior && taps <= 9) {
    for (int32_t ky = 0; ky < P->kh; ++ky) {
      const int32_t iy = iy0 + ky * P->dy;
      for (int32_t kx = 0; kx < P->kw; ++kx) {
        const int32_t ix = ix0 + kx * P->dx;
        src[ky * P->kw + kx] = qc_neon_inside(iy, P->ih) && qc_neon_inside(ix, P->iw) ? xn + (iy * P->iw + ix) * P->n
                                                                                      : P->padrow;
      }
    }
    table = src;
  }
  for (int32_t c0 = 0; c0 < full; c0 += 16) {
    qc_neon_dw_block(P, x, table, xn, iy0, ix0, c0, 16, y, out);
  }
  if (full < P->n) {
    qc_neon_dw_block(P, x, table, xn, iy0, ix0, full, P->n - full, y, out);
  }
}

QC_NEON_INLINE void qc_neon_dw_s8(const qc_neon_dw_params *P, const int8_t *xn, int32_t iy0, int32_t ix0,
                                  int interior, int8_t *y) {
  qc_neon_dw(P, xn, iy0, ix0, interior, y, QC_NEON_S8);
}

QC_NEON_INLINE void qc_neon_dw_s16(const qc_neon_dw_params *P, const int8_t *xn, int32_t iy0, int32_t ix0,
                                   int interior, int16_t *y) {
  qc_neon_dw(P, xn, iy0, ix0, interior, y, QC_NEON_S16);
}

QC_NEON_INLINE void qc_neon_dw_s32(const qc_neon_dw_params *P, const int8_t *xn, int32_t iy0, int32_t ix0,
                                   int interior, int32_t *y) {
  qc_neon_dw(P, xn, iy0, ix0, interior, y, QC_NEON_S32);
}

#endif
