/* qc_neon_sdot.h: qcodegen's requantized convolutions by SDOT by element (AArch64 with the dot-product extension,
 * target aarch64-dotprod; see qc_neon.h). The weight rows are re-laid at generation time (sdot_4x4,
 * qcodegen/kernels/aarch64/layouts.py): per block of 4 rows and per group of 4 row elements, 16 bytes, the group of
 * row 0, then of rows 1, 2, 3, so that lane r of one accumulator takes row r of the block and the input needs no
 * horizontal sums: SDOT by element multiplies the 16 weight bytes by the group's 4 input bytes (broadcast from one
 * lane of the input vector) and adds 4 products into each lane. Blocks of 16 rows (then 8) are requantized in vector
 * lanes (qc_neon_rq8); the rows after the last block of 8 are read from the int8 rows (qc_neon_conv_acc1). The sums
 * start at bias - izp * the row sum and wrap in the lanes: exact, as the final sums fit int32 (qc_neon.h).
 * C99 with ACLE intrinsics; -Wall -Wextra -Werror -pedantic clean. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_NEON_SDOT_H
#define QC_NEON_SDOT_H

#include <string.h> /* memcpy: the call sites of pixel pairs copy the even window */

#include "qc_neon.h"

#if !defined(__ARM_FEATURE_DOTPROD)
#error "qc_neon_sdot.h needs the dot-product extension (-march=armv8.2-a+dotprod or later)"
#endif

/* Adds to a[b], b < nb, the sums of the nb blocks of 4 rows at w (sdot_4x4, rows of n elements, n % 8 == 0; block b
   at w + 4 n b) with the input x. */
QC_NEON_INLINE void qc_neon_sdot_rows(const int8_t *x, const int8_t *w, int32_t n, int32_t nb, int32x4_t *a) {
  const int32_t n16 = n / 16 * 16;
#pragma GCC unroll 4
  for (int32_t i = 0; i < n16; i += 16) {
    const int8x16_t xv = vld1q_s8(x + i);
#pragma GCC unroll 4
    for (int32_t b = 0; b < nb; ++b) {
      const int8_t *p = w + 4 * (b * n + i);
      a[b] = vdotq_laneq_s32(a[b], vld1q_s8(p), xv, 0);
      a[b] = vdotq_laneq_s32(a[b], vld1q_s8(p + 16), xv, 1);
      a[b] = vdotq_laneq_s32(a[b], vld1q_s8(p + 32), xv, 2);
      a[b] = vdotq_laneq_s32(a[b], vld1q_s8(p + 48), xv, 3);
    }
  }
  if (n16 < n) {
    const int8x8_t xv = vld1_s8(x + n16);
#pragma GCC unroll 4
    for (int32_t b = 0; b < nb; ++b) {
      const int8_t *p = w + 4 * (b * n + n16);
      a[b] = vdotq_lane_s32(a[b], vld1q_s8(p), xv, 0);
      a[b] = vdotq_lane_s32(a[b], vld1q_s8(p + 16), xv, 1);
    }
  }
}

/* qc_neon_sdot_rows of two inputs (x0 into a, x1 into c): each re-laid weight vector is loaded once for both. */
QC_NEON_INLINE void qc_neon_sdot_rows2(const int8_t *x0, const int8_t *x1, const int8_t *w, int32_t n, int32_t nb,
                                       int32x4_t *a, int32x4_t *c) {
  const int32_t n16 = n / 16 * 16;
#pragma GCC unroll 4
  for (int32_t i = 0; i < n16; i += 16) {
    const int8x16_t xv = vld1q_s8(x0 + i), yv = vld1q_s8(x1 + i);
#pragma GCC unroll 4
    for (int32_t b = 0; b < nb; ++b) {
      const int8_t *p = w + 4 * (b * n + i);
      const int8x16_t w0 = vld1q_s8(p), w1 = vld1q_s8(p + 16), w2 = vld1q_s8(p + 32), w3 = vld1q_s8(p + 48);
      a[b] = vdotq_laneq_s32(a[b], w0, xv, 0);
      c[b] = vdotq_laneq_s32(c[b], w0, yv, 0);
      a[b] = vdotq_laneq_s32(a[b], w1, xv, 1);
      c[b] = vdotq_laneq_s32(c[b], w1, yv, 1);
      a[b] = vdotq_laneq_s32(a[b], w2, xv, 2);
      c[b] = vdotq_laneq_s32(c[b], w2, yv, 2);
      a[b] = vdotq_laneq_s32(a[b], w3, xv, 3);
      c[b] = vdotq_laneq_s32(c[b], w3, yv, 3);
    }
  }
  if (n16 < n) {
    const int8x8_t xv = vld1_s8(x0 + n16), yv = vld1_s8(x1 + n16);
#pragma GCC unroll 4
    for (int32_t b = 0; b < nb; ++b) {
      const int8_t *p = w + 4 * (b * n + n16);
      const int8x16_t w0 = vld1q_s8(p), w1 = vld1q_s8(p + 16);
      a[b] = vdotq_lane_s32(a[b], w0, xv, 0);
      c[b] = vdotq_lane_s32(c[b], w0, yv, 0);
      a[b] = vdotq_lane_s32(a[b], w1, xv, 1);
      c[b] = vdotq_lane_s32(c[b], w1, yv, 1);
    }
  }
}

/* The output channels oc0 .. oc0 + 4 nb - 1 (nb = 2 or 4 blocks of 4 rows) of the window x0 (outputs at y0) and,
   when pair (a constant of the caller: the compiler keeps one path), of x1 (y1), requantized. */
QC_NEON_INLINE void qc_neon_sdot_block(const qc_neon_conv_params *P, const int8_t *x0, const int8_t *x1,
                                       int32_t oc0, int32_t nb, void *y0, void *y1, int out, int pair) {
  int32x4_t a[4], c[4];
#pragma GCC unroll 4
  for (int32_t b = 0; b < nb; ++b) {
    a[b] = qc_neon_conv_start4(P, oc0 + 4 * b);
    c[b] = a[b];
  }
  if (pair) {
    qc_neon_sdot_rows2(x0, x1, P->wq + oc0 * P->kn, P->kn, nb, a, c);
  } else {
    qc_neon_sdot_rows(x0, P->wq + oc0 * P->kn, P->kn, nb, a);
  }
#pragma GCC unroll 2
  for (int32_t h = 0; h < nb / 2; ++h) {
    qc_neon_rq8(&P->rq, a[2 * h], a[2 * h + 1], oc0 + 8 * h, (char *)y0 + (oc0 + 8 * h) * out, out);
  }
  if (pair) {
#pragma GCC unroll 2
    for (int32_t h = 0; h < nb / 2; ++h) {
      qc_neon_rq8(&P->rq, c[2 * h], c[2 * h + 1], oc0 + 8 * h, (char *)y1 + (oc0 + 8 * h) * out, out);
    }
  }
}

/* Every output channel of the window x0 (P->kn elements; the rows after the last block of 8 read P->k of them),
   requantized to y0, and with pair of a second window x1 to y1: blocks of 16 rows, then 8, then the rest one by
   one. */
QC_NEON_INLINE void qc_neon_conv_sdot(const qc_neon_conv_params *P, const int8_t *x0, const int8_t *x1, void *y0,
                                      void *y1, int out, int pair) {
  const int32_t b16 = P->rows / 16 * 16, full = P->rows / 8 * 8;
  for (int32_t oc0 = 0; oc0 < b16; oc0 += 16) {
    qc_neon_sdot_block(P, x0, x1, oc0, 4, y0, y1, out, pair);
  }
  if (full > b16) {
    qc_neon_sdot_block(P, x0, x1, b16, 2, y0, y1, out, pair);
  }
  for (int32_t oc = full; oc < P->rows; ++oc) {
    qc_neon_rq1(&P->rq, qc_neon_conv_acc1(P, x0, oc), oc, (char *)y0 + oc * out, out);
    if (pair) {
      qc_neon_rq1(&P->rq, qc_neon_conv_acc1(P, x1, oc), oc, (char *)y1 + oc * out, out);
    }
  }
}

/* One window x, its outputs at y. */
QC_NEON_INLINE void qc_neon_conv_sdot_s8(const qc_neon_conv_params *P, const int8_t *x, int8_t *y) {
  qc_neon_conv_sdot(P, x, x, y, y, QC_NEON_S8, 0);
}

QC_NEON_INLINE void qc_neon_conv_sdot_s16(const qc_neon_conv_params *P, const int8_t *x, int16_t *y) {
  qc_neon_conv_sdot(P, x, x, y, y, QC_NEON_S16, 0);
}

/* Two windows x0, x1 (two output pixels), their outputs at y0, y1: each weight vector loaded once for both. */
QC_NEON_INLINE void qc_neon_conv_sdot2_s8(const qc_neon_conv_params *P, const int8_t *x0, const int8_t *x1,
                                          int8_t *y0, int8_t *y1) {
  qc_neon_conv_sdot(P, x0, x1, y0, y1, QC_NEON_S8, 1);
}

QC_NEON_INLINE void qc_neon_conv_sdot2_s16(const qc_neon_conv_params *P, const int8_t *x0, const int8_t *x1,
                                           int16_t *y0, int16_t *y1) {
  qc_neon_conv_sdot(P, x0, x1, y0, y1, QC_NEON_S16, 1);
}

#endif
