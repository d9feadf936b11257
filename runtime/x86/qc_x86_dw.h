/* qc_x86_dw.h: qcodegen's x86-64 depthwise convolutions (multiplier 1; see qc_x86.h for the form and the instruction
 * sets). Two kernels, chosen per step at generation time (qcodegen/kernels/x86/choice.py):
 *   - qc_x86_dw_rows: requantized windows of at most 9 taps without dilation, constant weights and bias, channels a
 *     multiple of 8: the input rows of a band of output rows widened once into int16 pairs of neighbouring pixels,
 *     so that a pair of taps of 8 channels is one 32-byte VPMADDWD (VNNI: VPDPWSSD) operand as it is;
 *   - the blocks of 8 channels in int32 lanes over the taps (qc_x86_dw8_*), the per-block steps of the register-
 *     blocked skeleton the generated step writes (templates/vector/_dw_blocks.c.j2): taps by pairs with VPMADDWD on
 *     madd_dw_pairs weights, or one by one with VPMULLD; a last block of fewer channels in scalar C (qc_x86_dw_*_n).
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_X86_DW_H
#define QC_X86_DW_H

#include "qc_x86.h"

/* ---- blocks of 8 channels (the skeleton's steps) ---- */

/* The start of a block's accumulators: the -izp * (sum of the weights over the taps) of its channels at zc, or 0
   (zc NULL: input zero point 0). */
QC_X86_INLINE __m256i qc_x86_dw8_start(const int32_t *zc) {
  return zc ? qc_x86_load8_i32(zc) : _mm256_setzero_si256();
}
/* a + x * w of one tap (8 channels: the int8 inputs at x, weights at w; VPMULLD of the sign-extended values). */
QC_X86_INLINE __m256i qc_x86_dw8_tap(__m256i a, const int8_t *x, const int8_t *w) {
  return _mm256_add_epi32(a, _mm256_mullo_epi32(qc_x86_load8_s32(x), qc_x86_load8_s32(w)));
}
/* a + pad * w of a tap outside the input. */
QC_X86_INLINE __m256i qc_x86_dw8_pad(__m256i a, int32_t pad, const int8_t *w) {
  return _mm256_add_epi32(a, _mm256_mullo_epi32(_mm256_set1_epi32(pad), qc_x86_load8_s32(w)));
}
/* a + x0 * w0 + x1 * w1 of two taps by one VPMADDWD: the inputs of both interleaved bytewise (VPUNPCKLBW) and
   sign-extended, against their int16 weight pairs at wp (madd_dw_pairs: (w0[c], w1[c]) per channel). A single tap
   pairs its input with itself against (w0[c], 0). Each lane gains at most 2 * 2^14. */
QC_X86_INLINE __m256i qc_x86_dw8_taps2(__m256i a, const int8_t *x0, const int8_t *x1, const int16_t *wp) {
  const __m128i u = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(const void *)x0),
                                      _mm_loadl_epi64((const __m128i *)(const void *)x1));
  return _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_cvtepi8_epi16(u),
                                               _mm256_loadu_si256((const __m256i *)(const void *)wp)));
}
/* The same steps for a last block of n < 8 channels, in int32_t a[n]. */
QC_X86_INLINE void qc_x86_dw_start_n(int32_t *a, const int32_t *zc, int32_t n) {
  for (int32_t j = 0; j < n; ++j) {
    a[j] = zc ? zc[j] : 0;
  }
}
QC_X86_INLINE void qc_x86_dw_tap_n(int32_t *a, const int8_t *x, const int8_t *w, int32_t n) {
  for (int32_t j = 0; j < n; ++j) {
    a[j] += (int32_t)x[j] * w[j];
  }
}
QC_X86_INLINE void qc_x86_dw_pad_n(int32_t *a, int32_t pad, const int8_t *w, int32_t n) {
  for (int32_t j = 0; j < n; ++j) {
    a[j] += pad * w[j];
  }
}

/* ---- the kernel over rows of int16 tap pairs ---- */

/* A row of qc_x86_dw_rows: for positions j < wp, every step-th (1 or 2), the c channels (a multiple of 8) of the
   input pixels j - pl and j + 1 - pl of the row x (or of pad, c bytes of the pad value, outside 0 .. iw - 1) as
   int16 pairs, pair (j, ch) at dst + (j / step * c + ch) * 2: VPUNPCKLBW / VPUNPCKHBW of 16 (8) channels of both
   pixels, then VPMOVSXBW. */
QC_X86_INLINE void qc_x86_dw_pair_row(int16_t *dst, const int8_t *x, const int8_t *pad, int32_t c, int32_t iw,
                                      int32_t pl, int32_t wp, int32_t step) {
  for (int32_t j = 0; j < wp; j += step) {
    const int8_t *a = (uint32_t)(j - pl) < (uint32_t)iw ? x + (j - pl) * c : pad;
    const int8_t *b = (uint32_t)(j + 1 - pl) < (uint32_t)iw ? x + (j + 1 - pl) * c : pad;
    int16_t *d = dst + j / step * c * 2;
    for (int32_t c0 = 0; c0 + 16 <= c; c0 += 16) {
      const __m128i xa = _mm_loadu_si128((const __m128i *)(const void *)(a + c0));
      const __m128i xb = _mm_loadu_si128((const __m128i *)(const void *)(b + c0));
      _mm256_storeu_si256((__m256i *)(void *)(d + c0 * 2), _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(xa, xb)));
      _mm256_storeu_si256((__m256i *)(void *)(d + c0 * 2 + 16), _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(xa, xb)));
    }
    if (c % 16) {
      const int32_t c0 = c - 8;
      const __m128i u = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(const void *)(a + c0)),
                                          _mm_loadl_epi64((const __m128i *)(const void *)(b + c0)));
      _mm256_storeu_si256((__m256i *)(void *)(d + c0 * 2), _mm256_cvtepi8_epi16(u));
    }
  }
}

/* The constants of qc_x86_dw_rows. w: the weights as x86_dw_rows (per block of 8 channels, per kernel row ky and per
   pair of horizontally adjacent taps kx = 2q, 2q + 1, the 8 int16 pairs of the block: a last single tap against
   0); params: x86_dw_params (per block of 8 channels, 8 int32 each: start = bias - izp * the sum of the weights,
   then the requantization: m, mo, s - 32 and 2^(s-33) when every shift >= 33 (qc_x86_scale32x8_s33r), else m, -, s);
   the geometry: n images of ih x iw x c (c a multiple of 8) to oh x ow, kh x kw taps, strides sy, sx, padding pt,
   pl read as `pad`; vpad, hpad: whether windows reach the top or bottom (left or right) padding; wp: the positions
   of a widened row ((ow - 1) * sx + 2 * ceil(kw / 2) - 1), step: 2 when sx is even (the taps' pairs start at even
   positions: every other position), else 1; nb: output rows per band (the scratch of (nb - 1) * sy + kh widened
   rows holds at most 64 KiB). */
typedef struct {
  const int16_t *w;
  const int32_t *params;
  int32_t n, ih, iw, c, oh, ow, kh, kw, sy, sx, pt, pl, pad, vpad, hpad, wp, step, nb;
} qc_x86_dw_rows_params;

/* The accumulators of the `count` (1 or 2) output pixels ox, ox + 1 of the band row at xr (block of 8 channels):
   the start st, then per kernel row ky and tap pair q the 32 bytes at position ox * sx + 2q (+ sx for the second
   pixel) of band row ky against the weights wv[ky * np + q]. Exactness: each VPMADDWD lane is x * w + x' * w'
   with int8 values (at most 2^15 in magnitude), and the int32 lanes wrap like the start (modulo 2^32) to the exact
   accumulator, which is in int32. */
QC_X86_INLINE void qc_x86_dw_rows_pixels(const qc_x86_dw_rows_params *P, const int16_t *xr, int32_t rowlen,
                                         int32_t ox, int32_t count, const __m256i *wv, __m256i st, __m256i *a) {
  const int32_t np = (P->kw + 1) / 2, c2 = P->c * 2;
#pragma GCC unroll 2
  for (int32_t k = 0; k < count; ++k) {
    a[k] = st;
  }
#pragma GCC unroll 9
  for (int32_t ky = 0; ky < P->kh; ++ky) {
#pragma GCC unroll 5
    for (int32_t q = 0; q < np; ++q) {
#pragma GCC unroll 2
      for (int32_t k = 0; k < count; ++k) {
        const int16_t *x = xr + ox * (P->sx / P->step * c2) + ky * rowlen + (k * P->sx + 2 * q) / P->step * c2;
        a[k] = qc_x86_madd_acc(a[k], _mm256_loadu_si256((const __m256i *)(const void *)x), wv[ky * np + q]);
      }
    }
  }
}

/* Requantizes and stores the `count` accumulators a of the pixels ox, ox + 1 at yr + ox * c (int8 or int16 by
   R->bits; channels c0 .. c0 + 7): qc_x86_scale32x8_s33r with the block's constants (R->s33), else
   qc_x86_scale32x8; then the exceptions to the single rounding (R->es). */
QC_X86_INLINE void qc_x86_dw_rows_store(const qc_x86_dw_rows_params *P, const qc_x86_rq *R, const __m256i *rq,
                                        const __m256i *a, int32_t count, void *yr, int32_t ox, int32_t c0) {
  __m256i q[2];
#pragma GCC unroll 2
  for (int32_t k = 0; k < count; ++k) {
    q[k] = R->s33 ? qc_x86_scale32x8_s33r(a[k], rq[0], rq[1], rq[3], rq[2], R->dbl)
                  : qc_x86_scale32x8(a[k], rq[0], rq[2], R->dbl);
    if (!R->sat) {
      q[k] = qc_x86_zp_clamp8(q[k], R->zp, R->lo, R->hi);
    }
  }
  const int32_t at = ox * P->c;
  if (R->bits == 8 && count == 2) {
    qc_x86_store8x2_s8_sat((int8_t *)yr + at, (int8_t *)yr + at + P->c, q[0], q[1], R->sat ? R->zp : 0);
  } else {
#pragma GCC unroll 2
    for (int32_t k = 0; k < count; ++k) {
      if (R->sat) {
        qc_x86_store8_s8_sat((int8_t *)yr + at + k * P->c, q[k], R->zp);
      } else if (R->bits == 8) {
        qc_x86_store8_s8((int8_t *)yr + at + k * P->c, q[k]);
      } else {
        qc_x86_store8_s16((int16_t *)yr + at + k * P->c, q[k]);
      }
    }
  }
  if (R->es) {
#pragma GCC unroll 2
    for (int32_t k = 0; k < count; ++k) {
      qc_x86_except8(R, a[k], c0, yr, at + k * P->c);
    }
  }
}

/* The depthwise convolution of x into y (P: constants and geometry; R: the requantization's zero point, clamp,
   rounding and output type, its per-channel constants in P->params) over rows of int16 tap pairs. The output rows
   go by bands of nb rows; the (nb - 1) * sy + kh input rows of a band (padding rows included: the pad value) are
   widened once each into `rows` (qc_x86_dw_pair_row; `padpix`: c bytes of the pad value, for the left and right
   padding), rows of rowlen = ceil(wp / step) * c * 2 int16. Then per block of 8 channels, with its weights and
   constants loaded once, per pair of output pixels of a row (then a last single one): the pair of kernel row ky
   and taps 2q, 2q + 1 of pixel (oy, ox) is the 32 bytes at position ox * sx + 2q of band row oy * sy + ky. */
QC_X86_INLINE void qc_x86_dw_rows(const qc_x86_dw_rows_params *P, const qc_x86_rq *R, const int8_t *x, void *y,
                                  int16_t *rows, const int8_t *padpix) {
  const int32_t np = (P->kw + 1) / 2, C = P->c;
  const int32_t rowlen = (P->wp + P->step - 1) / P->step * C * 2;
  for (int32_t n = 0; n < P->n; ++n) {
    const int8_t *xn = x + n * P->ih * P->iw * C;
    for (int32_t oyb = 0; oyb < P->oh; oyb += P->nb) {
      const int32_t nb = P->oh - oyb < P->nb ? P->oh - oyb : P->nb;
      for (int32_t r = 0; r < (nb - 1) * P->sy + P->kh; ++r) {
        const int32_t iy = oyb * P->sy - P->pt + r;
        if (P->vpad && (uint32_t)iy >= (uint32_t)P->ih) {
          for (int32_t i = 0; i < rowlen; ++i) {
            rows[r * rowlen + i] = (int16_t)P->pad;
          }
          continue;
        }
        qc_x86_dw_pair_row(rows + r * rowlen, xn + iy * P->iw * C, P->hpad ? padpix : NULL, C, P->iw, P->pl, P->wp,
                           P->step);
      }
      for (int32_t c0 = 0; c0 < C; c0 += 8) {
        __m256i wv[9], rq[4];
#pragma GCC unroll 9
        for (int32_t t = 0; t < P->kh * np; ++t) {
          wv[t] = _mm256_loadu_si256((const __m256i *)(const void *)(P->w + c0 * P->kh * np * 2 + 16 * t));
        }
        const __m256i st = qc_x86_load8_i32(P->params + c0 * 5);
        for (int32_t i = 0; i < 4; ++i) { /* m, mo, s - 32 (s), 2^(s-33): those that the requantization reads */
          rq[i] = qc_x86_load8_i32(P->params + c0 * 5 + 8 * (i + 1));
        }
        for (int32_t oy = 0; oy < nb; ++oy) {
          const int16_t *xr = rows + oy * P->sy * rowlen + c0 * 2;
          char *yr = (char *)y + (((n * P->oh + oyb + oy) * P->ow) * C + c0) * (R->bits / 8);
          __m256i a[2];
          for (int32_t ox = 0; ox < P->ow / 2 * 2; ox += 2) {
            qc_x86_dw_rows_pixels(P, xr, rowlen, ox, 2, wv, st, a);
            qc_x86_dw_rows_store(P, R, rq, a, 2, yr, ox, c0);
          }
          if (P->ow % 2) {
            qc_x86_dw_rows_pixels(P, xr, rowlen, P->ow - 1, 1, wv, st, a);
            qc_x86_dw_rows_store(P, R, rq, a, 1, yr, P->ow - 1, c0);
          }
        }
      }
    }
  }
}

#endif
