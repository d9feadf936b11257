/* qc_cm_dsp_conv.h: qcodegen's Cortex-M4/M7 convolutions as dot products of int8 weight rows (see qc_cm_dsp.h): sums
 * of products for 1 pixel x 4 rows or 2 pixels x 2 rows, and every output channel of two or three output pixels
 * per call with the requantization inside (int8 outputs). They are static functions of this header, compiled into
 * each model that uses them, kept out of line (the steps' loops around the calls keep their registers) and
 * specialized by the compiler for the constant arguments of the step that calls them (GCC's IPA-CP clones them
 * with the step's row length or qc_dsp_conv_params): measured on Cortex-M4, shared copies in an object file of
 * their own take 3-6% more instructions in the convolutions and more code (docs/targets.md "Cortex-M4/M7").
 * Integer dot products are exact in any order: each kernel sums the raw int8 products (at most 2^14 each, rows up
 * to 65,535 long) from a start made at generation time (the bias less the input zero point times the row sums),
 * and the kernel choice (qcodegen/kernels/cortex_m_dsp/choice.py) bounds every partial sum within int32.
 * C99 with GCC inline asm. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_CM_DSP_CONV_H
#define QC_CM_DSP_CONV_H

#include "qc_cm_dsp.h"

#define QC_DSP_CONV_KERNEL __attribute__((noinline, unused))

/* xq[2g], xq[2g + 1] = the int16 pairs (x[4g], x[4g + 2]) and (x[4g + 1], x[4g + 3]) (SXTB16), g < groups: an
   input widened once for all the weight rows of qc_dsp_dot_4rows_s8x4 / _q15. */
static inline __attribute__((always_inline, unused)) void qc_dsp_widen(const int8_t *x, int32_t groups, uint32_t *xq) {
  for (int32_t g = 0; g < groups; ++g) {
    uint32_t v;
    memcpy(&v, x + 4 * g, 4);
    xq[2 * g] = __sxtb16(v);
    xq[2 * g + 1] = qc_sxtb16_ror8(v);
  }
}

/* xq[0], xq[1] = the doubled int16 pairs of x + 128 of the 4 int8 bytes v (bytes 0,2 then 1,3): 2 (x + 128) in
   [0, 510], the sums of the packed kernels doubled (qc_dsp_rq8 mode 3) with their starts made for the zero point
   izp + 128 (the window_rows steps' biased_inputs): EOR and two ANDs of shifted operands, where SXTB16 and SADD16
   take four. */
static inline __attribute__((always_inline, unused)) void qc_dsp_widen_word_biased(uint32_t v, uint32_t *xq) {
  const uint32_t t = v ^ 0x80808080u;  /* the bytes x + 128 */
  xq[0] = (t << 1) & 0x01fe01feu;
  xq[1] = (t >> 7) & 0x01fe01feu;
}

/* xq[0], xq[1] = the int16 pairs (SXTB16) of the 4 bytes v (bytes 0,2 then 1,3), doubled with dbl (SADD16: 2x
   fits int16; the sums of the _packed kernels, qc_dsp_rq8 mode 3); dbl 2: qc_dsp_widen_word_biased. */
static inline __attribute__((always_inline, unused)) void qc_dsp_widen_word(uint32_t v, uint32_t *xq, int dbl) {
  if (dbl == 2) {
    qc_dsp_widen_word_biased(v, xq);
    return;
  }
  const uint32_t e = __sxtb16(v), o = qc_sxtb16_ror8(v);
  xq[0] = dbl ? (uint32_t)__sadd16(e, e) : e;
  xq[1] = dbl ? (uint32_t)__sadd16(o, o) : o;
}

/* qc_dsp_widen_word with one STRD (GCC stores the two words one by one). */
static inline __attribute__((always_inline, unused)) void qc_dsp_widen_pair(uint32_t v, uint32_t *xq, int dbl) {
  uint32_t q[2];
  qc_dsp_widen_word(v, q, dbl);
  __asm__("strd %[e], %[o], [%[p]]" : : [e] "r"(q[0]), [o] "r"(q[1]), [p] "r"(xq) : "memory");
}

/* xq[stride * g], xq[stride * g + 1] = qc_dsp_widen_word of x[4g .. 4g + 3], g < groups: the inputs of one pixel
   of a pair (stride 4) or a triple (stride 6), into its part of the interleaved buffer of qc_dsp_dot_2x2_* and
   qc_dsp_conv_{2px,3px}_* (xq at its first, third or fifth word). Called with a constant group count: unrolled
   for at most 10 groups, else a loop over pairs of groups (small code; one 8-byte load, each group's pairs one
   STRD: 5 instructions a group with the loop, 8 one at a time). */
static inline __attribute__((always_inline, unused)) void qc_dsp_widen_into(const int8_t *x, int32_t groups,
                                                                           uint32_t *xq, int32_t stride, int dbl) {
  if (groups <= 10) {
#pragma GCC unroll 10
    for (int32_t g = 0; g < groups; ++g, xq += stride) {
      uint32_t v;
      memcpy(&v, x + 4 * g, 4);
      qc_dsp_widen_word(v, xq, dbl);
    }
  } else {
    int32_t g = 0;
#pragma GCC unroll 1
    for (; g + 2 <= groups; g += 2, xq += 2 * stride) {
      uint32_t v, w;
      memcpy(&v, x + 4 * g, 4);
      memcpy(&w, x + 4 * g + 4, 4);
      qc_dsp_widen_pair(v, xq, dbl);
      qc_dsp_widen_pair(w, xq + stride, dbl);
    }
    if (g < groups) {
      uint32_t v;
      memcpy(&v, x + 4 * g, 4);
      qc_dsp_widen_word(v, xq, dbl);
    }
  }
}

/* qc_dsp_widen_word of a window read in place as its kh rows of len elements, row r at x + r * rs (an interior
   window of a convolution whose taps of a row are contiguous: no gathered copy), in the window_rows order
   (layouts.window_rows_order; the weights permuted to match at generation time): each row's len / 4 whole words
   (unaligned LDR), row after row, then the rows' last len % 4 elements, 4 to a group (the last group's missing
   bytes 0). xq, stride, dbl: as qc_dsp_widen_into. Called with constant kh, len, stride, dbl: unrolled for at
   most 10 groups of whole words, else a loop per row. */
static inline __attribute__((always_inline, unused)) void qc_dsp_widen_rows(const int8_t *x, int32_t rs, int32_t kh,
                                                                           int32_t len, uint32_t *xq,
                                                                           int32_t stride, int dbl) {
  const int32_t words = len / 4, tail = len % 4;
  if (kh * words <= 10) {
#pragma GCC unroll 10
    for (int32_t r = 0; r < kh; ++r) {
#pragma GCC unroll 10
      for (int32_t g = 0; g < words; ++g, xq += stride) {
        uint32_t v;
        memcpy(&v, x + r * rs + 4 * g, 4);
        qc_dsp_widen_word(v, xq, dbl);
      }
    }
  } else {
#pragma GCC unroll 1
    for (int32_t r = 0; r < kh; ++r) {
      qc_dsp_widen_into(x + r * rs, words, xq, stride, dbl);
      xq += words * stride;
    }
  }
  if (tail) {
    uint32_t v = 0;
    int32_t b = 0;
#pragma GCC unroll 16
    for (int32_t r = 0; r < kh; ++r) {
#pragma GCC unroll 4
      for (int32_t t = 0; t < tail; ++t, ++b) {
        v |= (uint32_t)(uint8_t)x[r * rs + 4 * words + t] << (8 * (b % 4));
        if (b % 4 == 3) {
          qc_dsp_widen_word(v, xq, dbl);
          xq += stride;
          v = 0;
        }
      }
    }
    if (b % 4) {
      qc_dsp_widen_word(v, xq, dbl);
    }
  }
}

/* qc_dsp_widen_into of three pixels whose inputs are k bytes apart (x, x + k, x + 2 k) into the interleaved buffer
   of a triple: per group its three words' pairs, 24 contiguous bytes, stored by three STRD (the last one moving xq):
   3 LDR, 6 SXTB16 (6 SADD16 doubled) and 3 STRD per group of the three pixels, where three calls of
   qc_dsp_widen_into store word by word. */
static inline __attribute__((always_inline, unused)) void qc_dsp_widen3(const int8_t *x, int32_t k, int32_t groups,
                                                                       uint32_t *xq, int dbl) {
#pragma GCC unroll 1
  for (int32_t g = 0; g < groups; ++g, x += 4) {
    uint32_t v[3], q[6];
    memcpy(&v[0], x, 4);
    memcpy(&v[1], x + k, 4);
    memcpy(&v[2], x + 2 * k, 4);
    qc_dsp_widen_word(v[0], q, dbl);
    qc_dsp_widen_word(v[1], q + 2, dbl);
    qc_dsp_widen_word(v[2], q + 4, dbl);
    __asm__ volatile("strd %[a], %[b], [%[p]]\n\t"  /* (volatile: its only output, xq, is not read after) */
                     "strd %[c], %[d], [%[p], #8]\n\t"
                     "strd %[e], %[f], [%[p], #16]\n\t"
                     "add %[p], %[p], #24"
                     : [p] "+r"(xq)
                     : [a] "r"(q[0]), [b] "r"(q[1]), [c] "r"(q[2]), [d] "r"(q[3]), [e] "r"(q[4]), [f] "r"(q[5])
                     : "memory");
  }
}

/* The same for a last group of n < 4 elements, the others read as 0 (and not read). */
static QC_DSP_CONV_KERNEL void qc_dsp_widen_last(const int8_t *x, int32_t n, uint32_t *xq, int dbl);

/* Sums of int8 products, exact in int32 for rows of up to 65,535 elements (each product at most 2^14). */
/* sum of a[i] * b[i], i < n. */
static QC_DSP_CONV_KERNEL int32_t qc_dsp_dot_s8(const int8_t *a, const int8_t *b, int32_t n);
/* s[r] = qc_dsp_dot_s8(a, w + r * n, n), r < 4: 4 consecutive int8 weight rows. */
static QC_DSP_CONV_KERNEL void qc_dsp_dot_4rows_s8(const int8_t *a, const int8_t *w, int32_t n, int32_t *s);
/* The same for 4 rows given as their dsp_s8x4 words (wq: per group of 4 elements, one int8 word per row) and the
   input widened as xq (qc_dsp_widen, once per pixel for all its rows); 4 * groups elements. */
static QC_DSP_CONV_KERNEL void qc_dsp_dot_4rows_s8x4(const uint32_t *xq, const int32_t *wq, int32_t groups,
                                                     int32_t *s);
/* The same for 4 rows of length n given both as their dsp_q15x4 words wq (per 4 elements, per row, the int16
   pairs SMLAD takes: no SXTB16 in the main loop) and, for the last n % 4 elements, as int8 rows w (NULL when
   n % 4 == 0); the input as int8 a and widened as xq. */
static QC_DSP_CONV_KERNEL void qc_dsp_dot_4rows_q15(const int8_t *a, const uint32_t *xq, const int32_t *wq,
                                                    const int8_t *w, int32_t n, int32_t *s);
/* s[2 * p + r] = the sum over i < 4 * groups of x_p[i] * w_r[i], p, r < 2: two pixels (xq: per group of 4, the
   pairs of the first pixel then of the second: qc_dsp_widen_into) times two weight rows (wq: their dsp_s8x2
   words, each SXTB16-unpacked once for both pixels; _q15x2: their dsp_q15x2 int16 pairs). */
static QC_DSP_CONV_KERNEL void qc_dsp_dot_2x2_s8x2(const uint32_t *xq, const int32_t *wq, int32_t groups,
                                                   int32_t *s);
static QC_DSP_CONV_KERNEL void qc_dsp_dot_2x2_q15x2(const uint32_t *xq, const int32_t *wq, int32_t groups,
                                                    int32_t *s);

/* The constants of qc_dsp_conv_*: q: the dsp_s8x2 (or dsp_q15x2) words of the weight rows; base: the sums' start
   per channel (the bias less the input zero point times the row sums); rq: the requantization pairs
   {multiplier, shift - 33 (double_n: - 32)} per channel (_pc) or one for all; rows: the output channels (even);
   groups: the 4-element groups of a row (the inputs zero-padded to whole groups); zp2p1 = 2 * output zp + 1;
   lo, hi: the clamp (_clamp variants); exc_start, exc_acc, exc_value (_exc variants, else NULL): the accumulators
   whose requantization is not the single rounding's (a float32 requantization's exceptions, enumerated at plan
   time: docs/semantics.md §14.5), exc_start[c] .. exc_start[c + 1] - 1 those of channel c (_pc; else 0 .. [1] - 1
   for all), each with its int8 output (within the clamp). */
typedef struct {
  const int32_t *q, *base, *rq;
  int32_t rows, groups, zp2p1, lo, hi;
  const int32_t *exc_start, *exc_acc, *exc_value;
} qc_dsp_conv_params;

/* ---- Sums of int8 products ----------------------------------------------------------------------------- */

/* One group of 4 elements of qc_dsp_dot_2x2_s8x2: LDRD of the two rows' int8 words (dsp_s8x2) and of the first
   pixel's pairs, SXTB16 of the weights, SMLAD into the 4 sums, LDRD of the second pixel's pairs. */
#define QC_DSP_DOT2X2_GROUP                                                                                         \
  __asm__("ldrd %[t], %[u], [%[w]], #8\n\t"                                                                       \
          "ldrd %[xe], %[xo], [%[a]], #8\n\t"                                                                     \
          "sxtb16 %[te], %[t]\n\t"                                                                                \
          "sxtb16 %[t], %[t], ror #8\n\t"                                                                         \
          "sxtb16 %[ue], %[u]\n\t"                                                                                \
          "sxtb16 %[u], %[u], ror #8\n\t"                                                                         \
          "smlad %[s0], %[xe], %[te], %[s0]\n\t"                                                                  \
          "smlad %[s0], %[xo], %[t], %[s0]\n\t"                                                                   \
          "smlad %[s1], %[xe], %[ue], %[s1]\n\t"                                                                  \
          "smlad %[s1], %[xo], %[u], %[s1]\n\t"                                                                   \
          "ldrd %[xe], %[xo], [%[a]], #8\n\t"                                                                     \
          "smlad %[s2], %[xe], %[te], %[s2]\n\t"                                                                  \
          "smlad %[s2], %[xo], %[t], %[s2]\n\t"                                                                   \
          "smlad %[s3], %[xe], %[ue], %[s3]\n\t"                                                                  \
          "smlad %[s3], %[xo], %[u], %[s3]"                                                                         \
          : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [a] "+r"(xq), [w] "+r"(wq),                 \
            [t] "=&r"(t), [u] "=&r"(u), [te] "=&r"(te), [ue] "=&r"(ue), [xe] "=&r"(xe), [xo] "=&r"(xo)             \
          :                                                                                                         \
          : "memory")

/* The same with the weights as SMLAD's int16 pairs (dsp_q15x2): LDRD of row 0's pairs, of the first pixel's,
   2 SMLAD, LDRD of the second pixel's, 2 SMLAD, LDRD of row 1's, 4 SMLAD. */
#define QC_DSP_DOT2X2_Q15_GROUP                                                                                     \
  __asm__("ldrd %[we], %[wo], [%[w]], #8\n\t"                                                                     \
          "ldrd %[xe], %[xo], [%[a]], #8\n\t"                                                                     \
          "smlad %[s0], %[xe], %[we], %[s0]\n\t"                                                                  \
          "smlad %[s0], %[xo], %[wo], %[s0]\n\t"                                                                  \
          "ldrd %[ye], %[yo], [%[a]], #8\n\t"                                                                     \
          "smlad %[s2], %[ye], %[we], %[s2]\n\t"                                                                  \
          "smlad %[s2], %[yo], %[wo], %[s2]\n\t"                                                                  \
          "ldrd %[we], %[wo], [%[w]], #8\n\t"                                                                     \
          "smlad %[s1], %[xe], %[we], %[s1]\n\t"                                                                  \
          "smlad %[s1], %[xo], %[wo], %[s1]\n\t"                                                                  \
          "smlad %[s3], %[ye], %[we], %[s3]\n\t"                                                                  \
          "smlad %[s3], %[yo], %[wo], %[s3]"                                                                        \
          : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [a] "+r"(xq), [w] "+r"(wq),                 \
            [we] "=&r"(we), [wo] "=&r"(wo), [xe] "=&r"(xe), [xo] "=&r"(xo), [ye] "=&r"(ye), [yo] "=&r"(yo)         \
          :                                                                                                         \
          : "memory")

static QC_DSP_CONV_KERNEL int32_t qc_dsp_dot_s8(const int8_t *a, const int8_t *b, int32_t n) {
  int32_t s = 0;
  const int32_t n4 = n / 4 * 4;
  for (int32_t i = 0; i < n4; i += 4) {
    uint32_t va, vb;
    memcpy(&va, a + i, 4);
    memcpy(&vb, b + i, 4);
    s = __smlad(__sxtb16(va), __sxtb16(vb), s);
    s = __smlad(qc_sxtb16_ror8(va), qc_sxtb16_ror8(vb), s);
  }
  for (int32_t i = n4; i < n; ++i) {
    s += (int32_t)a[i] * b[i];
  }
  return s;
}

static QC_DSP_CONV_KERNEL void qc_dsp_dot_4rows_s8(const int8_t *a, const int8_t *w, int32_t n, int32_t *s) {
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const int32_t n4 = n / 4 * 4;
  for (int32_t i = 0; i < n4; i += 4) {
    uint32_t va, w0, w1, w2, w3;
    memcpy(&va, a + i, 4);
    memcpy(&w0, w + i, 4);
    memcpy(&w1, w + n + i, 4);
    memcpy(&w2, w + 2 * n + i, 4);
    memcpy(&w3, w + 3 * n + i, 4);
    const uint32_t ae = __sxtb16(va), ao = qc_sxtb16_ror8(va);
    s0 = __smlad(ao, qc_sxtb16_ror8(w0), __smlad(ae, __sxtb16(w0), s0));
    s1 = __smlad(ao, qc_sxtb16_ror8(w1), __smlad(ae, __sxtb16(w1), s1));
    s2 = __smlad(ao, qc_sxtb16_ror8(w2), __smlad(ae, __sxtb16(w2), s2));
    s3 = __smlad(ao, qc_sxtb16_ror8(w3), __smlad(ae, __sxtb16(w3), s3));
  }
  for (int32_t i = n4; i < n; ++i) {
    const int32_t x = a[i];
    s0 += x * w[i];
    s1 += x * w[n + i];
    s2 += x * w[2 * n + i];
    s3 += x * w[3 * n + i];
  }
  s[0] = s0;
  s[1] = s1;
  s[2] = s2;
  s[3] = s3;
}

/* One group of 4 elements of qc_dsp_dot_4rows_s8x4: LDRD of the input's pairs, two LDRD of the rows' words,
   SXTB16 of each (and of its rotation), 8 SMLAD. */
#define QC_DSP_ROWS4_S8X4_GROUP                                                                                     \
  __asm__("ldrd %[xe], %[xo], [%[a]], #8\n\t"                                                                     \
          "ldrd %[t], %[u], [%[w]], #8\n\t"                                                                       \
          "sxtb16 %[te], %[t]\n\t"                                                                                \
          "sxtb16 %[t], %[t], ror #8\n\t"                                                                         \
          "sxtb16 %[ue], %[u]\n\t"                                                                                \
          "sxtb16 %[u], %[u], ror #8\n\t"                                                                         \
          "smlad %[s0], %[xe], %[te], %[s0]\n\t"                                                                  \
          "smlad %[s0], %[xo], %[t], %[s0]\n\t"                                                                   \
          "smlad %[s1], %[xe], %[ue], %[s1]\n\t"                                                                  \
          "smlad %[s1], %[xo], %[u], %[s1]\n\t"                                                                   \
          "ldrd %[t], %[u], [%[w]], #8\n\t"                                                                       \
          "sxtb16 %[te], %[t]\n\t"                                                                                \
          "sxtb16 %[t], %[t], ror #8\n\t"                                                                         \
          "sxtb16 %[ue], %[u]\n\t"                                                                                \
          "sxtb16 %[u], %[u], ror #8\n\t"                                                                         \
          "smlad %[s2], %[xe], %[te], %[s2]\n\t"                                                                  \
          "smlad %[s2], %[xo], %[t], %[s2]\n\t"                                                                   \
          "smlad %[s3], %[xe], %[ue], %[s3]\n\t"                                                                  \
          "smlad %[s3], %[xo], %[u], %[s3]"                                                                         \
          : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [a] "+r"(xq), [w] "+r"(wq),                 \
            [xe] "=&r"(xe), [xo] "=&r"(xo), [t] "=&r"(t), [u] "=&r"(u), [te] "=&r"(te), [ue] "=&r"(ue)             \
          :                                                                                                         \
          : "memory")

static QC_DSP_CONV_KERNEL void qc_dsp_dot_4rows_s8x4(const uint32_t *xq, const int32_t *wq, int32_t groups,
                                                     int32_t *s) {
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  uint32_t xe, xo, t, u, te, ue;
  int32_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    QC_DSP_ROWS4_S8X4_GROUP;
    QC_DSP_ROWS4_S8X4_GROUP;
  }
  if (g < groups) {
    QC_DSP_ROWS4_S8X4_GROUP;
  }
  s[0] = s0;
  s[1] = s1;
  s[2] = s2;
  s[3] = s3;
}

/* One asm block per 4 elements: LDRD of the pairs (the compiler does not pair the loads). */
static QC_DSP_CONV_KERNEL void qc_dsp_dot_4rows_q15(const int8_t *a, const uint32_t *xq, const int32_t *wq,
                                                    const int8_t *w, int32_t n, int32_t *s) {
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const int32_t n4 = n / 4 * 4;
  for (int32_t i = 0; i < n4; i += 4) {
    uint32_t xe, xo, w0, w1;
    __asm__("ldrd %[xe], %[xo], [%[a]], #8\n\t"
            "ldrd %[w0], %[w1], [%[q]], #8\n\t"
            "smlad %[s0], %[xe], %[w0], %[s0]\n\t"
            "smlad %[s0], %[xo], %[w1], %[s0]\n\t"
            "ldrd %[w0], %[w1], [%[q]], #8\n\t"
            "smlad %[s1], %[xe], %[w0], %[s1]\n\t"
            "smlad %[s1], %[xo], %[w1], %[s1]\n\t"
            "ldrd %[w0], %[w1], [%[q]], #8\n\t"
            "smlad %[s2], %[xe], %[w0], %[s2]\n\t"
            "smlad %[s2], %[xo], %[w1], %[s2]\n\t"
            "ldrd %[w0], %[w1], [%[q]], #8\n\t"
            "smlad %[s3], %[xe], %[w0], %[s3]\n\t"
            "smlad %[s3], %[xo], %[w1], %[s3]"
            : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [a] "+r"(xq), [q] "+r"(wq),
              [xe] "=&r"(xe), [xo] "=&r"(xo), [w0] "=&r"(w0), [w1] "=&r"(w1)
            :
            : "memory");
  }
  for (int32_t i = n4; i < n; ++i) {
    const int32_t x = a[i];
    s0 += x * w[i];
    s1 += x * w[n + i];
    s2 += x * w[2 * n + i];
    s3 += x * w[3 * n + i];
  }
  s[0] = s0;
  s[1] = s1;
  s[2] = s2;
  s[3] = s3;
}

static QC_DSP_CONV_KERNEL void qc_dsp_widen_last(const int8_t *x, int32_t n, uint32_t *xq, int dbl) {
  uint32_t v = 0;
  for (int32_t i = n - 1; i >= 0; --i) {
    v = v << 8 | (uint8_t)x[i];
  }
  qc_dsp_widen_word(v, xq, dbl);
}

static QC_DSP_CONV_KERNEL void qc_dsp_dot_2x2_s8x2(const uint32_t *xq, const int32_t *wq, int32_t groups,
                                                   int32_t *s) {
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  uint32_t t, u, te, ue, xe, xo;
  int32_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    QC_DSP_DOT2X2_GROUP;
    QC_DSP_DOT2X2_GROUP;
  }
  if (g < groups) {
    QC_DSP_DOT2X2_GROUP;
  }
  s[0] = s0;
  s[1] = s1;
  s[2] = s2;
  s[3] = s3;
}

static QC_DSP_CONV_KERNEL void qc_dsp_dot_2x2_q15x2(const uint32_t *xq, const int32_t *wq, int32_t groups,
                                                    int32_t *s) {
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  uint32_t we, wo, xe, xo, ye, yo;
  int32_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    QC_DSP_DOT2X2_Q15_GROUP;
    QC_DSP_DOT2X2_Q15_GROUP;
  }
  if (g < groups) {
    QC_DSP_DOT2X2_Q15_GROUP;
  }
  s[0] = s0;
  s[1] = s1;
  s[2] = s2;
  s[3] = s3;
}

/* ---- Convolutions with the requantization inside -------------------------------------------------------- */

/* Mode 4 (the _exc variants): the single rounding of mode 0, then, where rows oc and oc + 1 have exceptions
   (qc_dsp_excepted, tested once per pair of rows), qc_dsp_except for pixel j's accumulators s[2j], s[2j + 1] and
   outputs y[j] (NULL: no such pixel). */
static inline __attribute__((always_inline, unused)) void qc_dsp_conv_except(const qc_dsp_conv_params *P,
    int32_t oc, int pc, const int32_t *s, int8_t *const *y) {
  for (int32_t j = 0; j < 3 && y[j]; ++j) {
    qc_dsp_except(P->exc_start, P->exc_acc, P->exc_value, oc, 2, pc, s + 2 * j, y[j]);
  }
}

/* Every output channel (rows even) of two output pixels, int8 at y0 and y1 (y1 NULL: one pixel, given as both
   halves of x): per pair of rows the 2 x 2 sums of QC_DSP_DOT2X2_GROUP (q15: _Q15_GROUP), started at base, each
   requantized by qc_dsp_rq8. */
static inline __attribute__((always_inline, unused)) void qc_dsp_conv_pair(const qc_dsp_conv_params *P,
    const uint32_t *x,     int8_t *y0, int8_t *y1, int mode, int pc, int clamp, int q15) {
  const int32_t rows = P->rows, groups = P->groups, zp2p1 = P->zp2p1, lo = P->lo, hi = P->hi;
  const int32_t *wq = P->q, *base = P->base, *rq = P->rq;
  for (int32_t oc = 0; oc < rows; oc += 2) {
    int32_t s0 = base[oc], s1 = base[oc + 1], s2 = s0, s3 = s1;
    const uint32_t *xq = x;
    uint32_t t, u, te, ue, xe, xo, ye, yo;
    int32_t g = 0;
    if (q15) {
      uint32_t we, wo;
      for (; g + 2 <= groups; g += 2) {
        QC_DSP_DOT2X2_Q15_GROUP;
        QC_DSP_DOT2X2_Q15_GROUP;
      }
      if (g < groups) {
        QC_DSP_DOT2X2_Q15_GROUP;
      }
    } else {
      for (; g + 2 <= groups; g += 2) {
        QC_DSP_DOT2X2_GROUP;
        QC_DSP_DOT2X2_GROUP;
      }
      if (g < groups) {
        QC_DSP_DOT2X2_GROUP;
      }
    }
    (void)t, (void)u, (void)te, (void)ue, (void)ye, (void)yo;
    const int32_t *r0 = pc ? rq + 2 * oc : rq, *r1 = pc ? r0 + 2 : rq;
    y0[oc] = qc_dsp_rq8(s0, r0, zp2p1, lo, hi, mode, clamp);
    y0[oc + 1] = qc_dsp_rq8(s1, r1, zp2p1, lo, hi, mode, clamp);
    if (y1) {
      y1[oc] = qc_dsp_rq8(s2, r0, zp2p1, lo, hi, mode, clamp);
      y1[oc + 1] = qc_dsp_rq8(s3, r1, zp2p1, lo, hi, mode, clamp);
    }
    if (mode == 4 && qc_dsp_excepted(P->exc_start, oc, 2, pc)) {
      const int32_t s[4] = {s0, s1, s2, s3};
      int8_t *const y[3] = {y0, y1, NULL};
      qc_dsp_conv_except(P, oc, pc, s, y);
    }
  }
}

/* One group of 4 elements of 3 pixels x 2 rows (qc_dsp_conv_triple), as asm text: the two rows' int8 words
   (dsp_s8x2, LDRD) unpacked by SXTB16 (and of their rotation), or (q15) their int16 pairs (dsp_q15x2: row 0's two
   words, then row 1's); then per pixel LDRD of its input pairs and 4 SMLAD into s[2j], s[2j + 1]. */
#define QC_DSP_3X2_S8 QC_DSP_NX2_S8(QC_DSP_3X2_PIXELS)
#define QC_DSP_3X2_Q15 QC_DSP_NX2_Q15(QC_DSP_3X2_PIXELS)
/* The same for the pixels PX (QC_DSP_3X2_PIXEL of each). */
#define QC_DSP_NX2_S8(PX)                                                                                           \
  "ldrd %[t], %[u], [%[w]], #8\n\t"                                                                               \
  "sxtb16 %[te], %[t]\n\t"                                                                                        \
  "sxtb16 %[t], %[t], ror #8\n\t"                                                                                 \
  "sxtb16 %[ue], %[u]\n\t"                                                                                        \
  "sxtb16 %[u], %[u], ror #8\n\t" PX
#define QC_DSP_NX2_Q15(PX)                                                                                          \
  "ldrd %[te], %[t], [%[w]], #8\n\t"                                                                              \
  "ldrd %[ue], %[u], [%[w]], #8\n\t" PX
#define QC_DSP_3X2_PIXEL(a, b)                                                                                      \
  "ldrd %[xe], %[xo], [%[x]], #8\n\t"                                                                             \
  "smlad %[" a "], %[xe], %[te], %[" a "]\n\t"                                                                    \
  "smlad %[" a "], %[xo], %[t], %[" a "]\n\t"                                                                     \
  "smlad %[" b "], %[xe], %[ue], %[" b "]\n\t"                                                                    \
  "smlad %[" b "], %[xo], %[u], %[" b "]\n\t"
#define QC_DSP_1X2_PIXELS QC_DSP_3X2_PIXEL("s0", "s1")
#define QC_DSP_2X2_PIXELS QC_DSP_1X2_PIXELS QC_DSP_3X2_PIXEL("s2", "s3")
#define QC_DSP_3X2_PIXELS QC_DSP_2X2_PIXELS QC_DSP_3X2_PIXEL("s4", "s5")
/* All 14 allocatable registers (r0-r12, lr): the loop count lives in memory (cnt), decremented through t. */
#define QC_DSP_3X2_OPERANDS                                                                                         \
  : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [s4] "+r"(s4), [s5] "+r"(s5), [x] "+r"(xq),           \
    [w] "+r"(wq), [t] "=&r"(t), [u] "=&r"(u), [te] "=&r"(te), [ue] "=&r"(ue), [xe] "=&r"(xe), [xo] "=&r"(xo),         \
    [cnt] "+m"(cnt)                                                                                                 \
  :                                                                                                                 \
  : "memory", "cc"
#define QC_DSP_3X2_X8(group) group group group group group group group group
#define QC_DSP_3X2_LOOP(group)                                                                                      \
  __asm__ volatile("1:\n\t" group                                                                                 \
                   "ldr %[t], %[cnt]\n\t"                                                                         \
                   "subs %[t], %[t], #1\n\t"                                                                      \
                   "str %[t], %[cnt]\n\t"                                                                         \
                   "bne 1b" QC_DSP_3X2_OPERANDS)

/* One group: the asm of QC_DSP_3X2_Q15 (q15) or QC_DSP_3X2_S8. */
#define QC_DSP_3X2_GROUP(q15)                                                                                      \
  do {                                                                                                              \
    if (q15) {                                                                                                      \
      __asm__ volatile(QC_DSP_3X2_Q15 QC_DSP_3X2_OPERANDS);                                                         \
    } else {                                                                                                        \
      __asm__ volatile(QC_DSP_3X2_S8 QC_DSP_3X2_OPERANDS);                                                          \
    }                                                                                                               \
  } while (0)

/* The int8 outputs of both rows (channels oc, oc + 1) of qc_dsp_conv_triple's 3 pixels, accumulators s0..s5
   (clobbered), at y0 + oc, y1 + oc, y2 + oc in mode 2 without the clamp (QC_DSP_RQN_*): each row's pair loaded
   once for its 3 pixels, row 1's at r0 + off bytes (off: 8 per channel, 0 with one pair for all). One asm
   statement: per row, GCC added register moves around the statements. */
#define QC_DSP_3PX_RQN(off)                                                                                        \
  __asm__ volatile(QC_DSP_RQN_FIRST("a", "y0", "0", "0") QC_DSP_RQN_NEXT("b", "y1", "0", "a")                      \
                   QC_DSP_RQN_NEXT("c", "y2", "0", "b") QC_DSP_RQN_FIRST("d", "y0", "1", off)                      \
                   QC_DSP_RQN_NEXT("e", "y1", "1", "d") QC_DSP_RQN_NEXT("f", "y2", "1", "e")                       \
                   : [a] "+r"(s0), [b] "+r"(s2), [c] "+r"(s4), [d] "+r"(s1), [e] "+r"(s3), [f] "+r"(s5),            \
                     [m] "=&r"(m), [s] "=&r"(sh)                                                                   \
                   : [r] "r"(r0), [zp] "r"(zp2p1), [y0] "r"(y0 + oc), [y1] "r"(y1 + oc), [y2] "r"(y2 + oc)         \
                   : "memory")

/* Every output channel (rows even) of three output pixels, int8 at y0, y1, y2: per pair of rows the 3 x 2 sums
   (asm loops over groups by 8, then one by one; fixed > 0: that many groups, all unrolled: the kernels of small
   rows; GCC keeps a loop for a loop of asm, even of 2 groups), started at base, each requantized by qc_dsp_rq8. */
static inline __attribute__((always_inline, unused)) void qc_dsp_conv_triple(const qc_dsp_conv_params *P,
    const uint32_t *x,     int8_t *y0, int8_t *y1, int8_t *y2, int mode, int pc, int clamp, int q15, int32_t fixed) {
  const int32_t rows = P->rows, groups = fixed ? fixed : P->groups, zp2p1 = P->zp2p1, lo = P->lo, hi = P->hi;
  const int32_t *wq = P->q, *base = P->base, *rq = P->rq;
  for (int32_t oc = 0; oc < rows; oc += 2) {
    int32_t s0 = base[oc], s1 = base[oc + 1], s2 = s0, s3 = s1, s4 = s0, s5 = s1;
    const uint32_t *xq = x;
    uint32_t t, u, te, ue, xe, xo;
    int32_t cnt = groups >> 3;  /* (an operand of every group's asm) */
    if (fixed) {
      QC_DSP_3X2_GROUP(q15);
      if (fixed > 1) QC_DSP_3X2_GROUP(q15);
      if (fixed > 2) QC_DSP_3X2_GROUP(q15);
      if (fixed > 3) QC_DSP_3X2_GROUP(q15);
      if (fixed > 4) QC_DSP_3X2_GROUP(q15);
      if (fixed > 5) QC_DSP_3X2_GROUP(q15);
      if (fixed > 6) QC_DSP_3X2_GROUP(q15);
      if (fixed > 7) QC_DSP_3X2_GROUP(q15);
      if (fixed > 8) QC_DSP_3X2_GROUP(q15);
      if (fixed > 9) QC_DSP_3X2_GROUP(q15);
    } else {
      if (cnt) {
        if (q15) {
          QC_DSP_3X2_LOOP(QC_DSP_3X2_X8(QC_DSP_3X2_Q15));
        } else {
          QC_DSP_3X2_LOOP(QC_DSP_3X2_X8(QC_DSP_3X2_S8));
        }
      }
      cnt = groups & 7;
      if (cnt) {
        if (q15) {
          QC_DSP_3X2_LOOP(QC_DSP_3X2_Q15);
        } else {
          QC_DSP_3X2_LOOP(QC_DSP_3X2_S8);
        }
      }
    }
    const int32_t *r0 = pc ? rq + 2 * oc : rq, *r1 = pc ? r0 + 2 : rq;
    if (mode == 2 && !clamp) {  /* each row's pair loaded once for the 3 pixels (QC_DSP_3PX_RQN) */
      uint32_t m, sh;
      if (pc) {
        QC_DSP_3PX_RQN("8");
      } else {
        QC_DSP_3PX_RQN("0");
      }
      continue;
    }
    y0[oc] = qc_dsp_rq8(s0, r0, zp2p1, lo, hi, mode, clamp);
    y0[oc + 1] = qc_dsp_rq8(s1, r1, zp2p1, lo, hi, mode, clamp);
    y1[oc] = qc_dsp_rq8(s2, r0, zp2p1, lo, hi, mode, clamp);
    y1[oc + 1] = qc_dsp_rq8(s3, r1, zp2p1, lo, hi, mode, clamp);
    y2[oc] = qc_dsp_rq8(s4, r0, zp2p1, lo, hi, mode, clamp);
    y2[oc + 1] = qc_dsp_rq8(s5, r1, zp2p1, lo, hi, mode, clamp);
    if (mode == 4 && qc_dsp_excepted(P->exc_start, oc, 2, pc)) {
      const int32_t s[6] = {s0, s1, s2, s3, s4, s5};
      int8_t *const y[3] = {y0, y1, y2};
      qc_dsp_conv_except(P, oc, pc, s, y);
    }
  }
}

/* Every output channel (rows even) of n = 1, 2 or 3 output pixels whose outputs are contiguous (y, y + rows,
   y + 2 rows), mode 2 without the clamp on doubled sums (qc_dsp_rq8 mode 3: the starts, and the inputs (s8x2) or
   the int16 weights (q15x2), doubled at generation time or as the inputs are widened), over a dsp_packed array
   (per pair of rows: their starts, their words, their requantization {m, s, c}): one asm statement for all the
   rows, so that nothing is spilled or reloaded around the groups (the C loop of qc_dsp_conv_triple moved its 6
   accumulators, pointers and count through the stack per pair of rows: ~40 instructions per 24 x groups MACs).
   Per pair of rows: LDRD of the starts, the first group (2, 3 pixels: the other pixels' sums started from the
   first one's start, no MOVs), the other groups in passes of 8 (3 pixels: 16; the first pass entered at the
   first of their count % 8 (16) by a load of the PC: no remainder loop), 3 per pass for its end (x against x + 2 n
   groups words), then
   the 2 n outputs of QC_DSP_RQC_OUT (5 instructions each) with each row's {m, s, c} by LDRD and LDR from the same
   pointer (y and rows loaded into the group temporaries by one LDRD; stores at y, y + rows, y + 2 rows by register
   offsets, the one at y post-indexed) and 4 for y and the loop: for three pixels 2 + 20 groups + 3 passes + 39
   instructions per 24 groups MACs (q15: 17 per group). GB: the bytes of one group's text (every instruction
   32-bit), checked by the assembler; FIRST, REST, ROW0, ROW1: the text of the first group, of the groups of a pass
   after its first and of the outputs of each row. */
/* The int8 output of doubled accumulator a (mode 3) at addr, with the row's {m, s, c} in t, u, xe: SMMLAR adds
   c = zp2p1 << s to SMMULR(a, m) (exactly: |c| < 2^30, checked at generation time, and |SMMULR| <= 2^30), which
   is adding zp2p1 after the ASR by s (c a multiple of 2^s): the ADD of the zero point saved; then SSAT halves. */
#define QC_DSP_RQC_OUT(a, addr)                                                                                     \
  "smmlar %[x], %[" a "], %[t], %[xe]\n\t"                                                                        \
  "add %[" a "], %[x], %[" a "], asr #31\n\t"                                                                     \
  "asr %[" a "], %[" a "], %[u]\n\t"                                                                              \
  "ssat %[" a "], #8, %[" a "], asr #1\n\t"                                                                       \
  "strb %[" a "], " addr "\n\t"
/* The end of a pair of rows of the packed kernels: its 2 n outputs (ROW0, ROW1) and the loop over the pairs. */
#define QC_DSP_PACKED_ROWS(ROW0, ROW1)                                                                              \
  "ldrd %[te], %[ue], %[y]\n\t"                                                                                    \
  "ldrd %[t], %[u], [%[w]], #8\n\t"                                                                                \
  "ldr %[xe], [%[w]], #4\n\t" ROW0                                                                                 \
  "ldrd %[t], %[u], [%[w]], #8\n\t"                                                                                \
  "ldr %[xe], [%[w]], #4\n\t" ROW1                                                                                 \
  "str %[te], %[y]\n\t"                                                                                            \
  "ldr %[xo], %[yend]\n\t"                                                                                         \
  "cmp %[te], %[xo]\n\t"                                                                                           \
  "bne 1b"
#define QC_DSP_COMMA ,
/* Their operands (OUT, IN: those of the passes' entry and end, or of the constant group count). */
#define QC_DSP_PACKED_OPERANDS(OUT, IN)                                                                             \
  : [s0] "=&r"(s0), [s1] "=&r"(s1), [s2] "=&r"(s2), [s3] "=&r"(s3), [s4] "=&r"(s4), [s5] "=&r"(s5), [x] "=&r"(xq),  \
    [w] "+r"(wq), [t] "=&r"(t), [u] "=&r"(u), [te] "=&r"(te), [ue] "=&r"(ue), [xe] "=&r"(xe), [xo] "=&r"(xo),       \
    [y] "+m"(yr) OUT                                                                                                \
  : [xs] "m"(x), [yend] "m"(yend) IN                                                                                \
  : "memory", "cc"
#define QC_DSP_PACKED_LOOP(GROUP, GB, FIRST, REST, ROW0, ROW1)                                                       \
  __asm__ volatile("adr.w %[t], 2f\n\t"                                                                            \
                   "ldr %[u], %[skip]\n\t"                                                                         \
                   "mov %[te], #" #GB "\n\t"                                                                       \
                   "mla %[t], %[u], %[te], %[t]\n\t"                                                              \
                   "orr %[t], %[t], #1\n\t"                                                                        \
                   "str %[t], %[entry]\n"                                                                          \
                   "1:\n\t"                                                                                        \
                   "ldrd %[s0], %[s1], [%[w]], #8\n\t"                                                            \
                   "ldr %[x], %[xs]\n\t" FIRST                                                                     \
                   "ldr pc, %[entry]\n"                                                                            \
                   "2:\n\t" GROUP "3:\n\t"                                                                         \
                   ".ifne (3b - 2b) - " #GB "\n\t.error \"qc_cm_dsp_conv.h: a group is not " #GB " bytes\"\n\t.endif\n\t" \
                   REST                                                                                            \
                   "ldr %[t], %[xend]\n\t"                                                                         \
                   "cmp %[x], %[t]\n\t"                                                                            \
                   "bne 2b\n\t" QC_DSP_PACKED_ROWS(ROW0, ROW1)                                                \
                   QC_DSP_PACKED_OPERANDS(QC_DSP_COMMA [entry] "=m"(entry),                                      \
                                          QC_DSP_COMMA [xend] "m"(xend) QC_DSP_COMMA [skip] "m"(skip)))
/* The same for a constant count of groups (fixed: 1 .. 10), all of them unrolled (.rept): no entry by the PC, no
   passes' end; 3 pixels only (the kernels of few groups: MobileNetV1's first convolution). */
#define QC_DSP_PACKED_FIXED(GROUP, FIRST, ROW0, ROW1)                                                                \
  __asm__ volatile("1:\n\t"                                                                                        \
                   "ldrd %[s0], %[s1], [%[w]], #8\n\t"                                                            \
                   "ldr %[x], %[xs]\n\t" FIRST                                                                     \
                   ".rept %c[g] - 1\n\t" GROUP ".endr\n\t"                                                         \
                   QC_DSP_PACKED_ROWS(ROW0, ROW1) QC_DSP_PACKED_OPERANDS(, QC_DSP_COMMA [g] "i"(fixed)))
/* The outputs of row 0 (accumulators s0, s2, s4) and row 1 (s1, s3, s5) of 1, 2 or 3 pixels (at y, y + rows,
   y + 2 rows), the first pixel's last: its store (post-indexed) moves y to the next channel, no ADD. */
#define QC_DSP_RQC_OUTS1(a) QC_DSP_RQC_OUT(a, "[%[te]], #1")
#define QC_DSP_RQC_OUTS2(a, b) QC_DSP_RQC_OUT(b, "[%[te], %[ue]]") QC_DSP_RQC_OUTS1(a)
#define QC_DSP_RQC_OUTS3(a, b, c) QC_DSP_RQC_OUT(c, "[%[te], %[ue], lsl #1]") QC_DSP_RQC_OUTS2(a, b)
/* The groups of a pass after its first: 7 (1 and 2 pixels) or 15 (3 pixels: 3 instructions per 16 groups for the
   pass's end, where the kernels of many rows spend their time). */
#define QC_DSP_X7(G) G G G G G G G
#define QC_DSP_X15(G) QC_DSP_X7(G) QC_DSP_X7(G) G
#define QC_DSP_PACKED_NPX(n, q15, fixed)                                                                           \
  do {                                                                                                              \
    if (n == 1) {                                                                                                   \
      if (q15) {                                                                                                    \
        QC_DSP_PACKED_LOOP(QC_DSP_NX2_Q15(QC_DSP_1X2_PIXELS), 28, "", QC_DSP_X7(QC_DSP_NX2_Q15(QC_DSP_1X2_PIXELS)), \
                           QC_DSP_RQC_OUTS1("s0"), QC_DSP_RQC_OUTS1("s1"));                                         \
      } else {                                                                                                      \
        QC_DSP_PACKED_LOOP(QC_DSP_NX2_S8(QC_DSP_1X2_PIXELS), 40, "", QC_DSP_X7(QC_DSP_NX2_S8(QC_DSP_1X2_PIXELS)),   \
                           QC_DSP_RQC_OUTS1("s0"), QC_DSP_RQC_OUTS1("s1"));                                         \
      }                                                                                                             \
    } else if (n == 2) {                                                                                            \
      if (q15) {                                                                                                    \
        QC_DSP_PACKED_LOOP(QC_DSP_NX2_Q15(QC_DSP_2X2_PIXELS), 48, QC_DSP_NX2_Q15(QC_DSP_2X2_FIRST),                 \
                           QC_DSP_X7(QC_DSP_NX2_Q15(QC_DSP_2X2_PIXELS)), QC_DSP_RQC_OUTS2("s0", "s2"),              \
                           QC_DSP_RQC_OUTS2("s1", "s3"));                                                          \
      } else {                                                                                                      \
        QC_DSP_PACKED_LOOP(QC_DSP_NX2_S8(QC_DSP_2X2_PIXELS), 60, QC_DSP_NX2_S8(QC_DSP_2X2_FIRST),                   \
                           QC_DSP_X7(QC_DSP_NX2_S8(QC_DSP_2X2_PIXELS)), QC_DSP_RQC_OUTS2("s0", "s2"),               \
                           QC_DSP_RQC_OUTS2("s1", "s3"));                                                          \
      }                                                                                                             \
    } else if (fixed) {                                                                                             \
      if (q15) {                                                                                                    \
        QC_DSP_PACKED_FIXED(QC_DSP_3X2_Q15, QC_DSP_NX2_Q15(QC_DSP_3X2_FIRST), QC_DSP_RQC_OUTS3("s0", "s2", "s4"),    \
                            QC_DSP_RQC_OUTS3("s1", "s3", "s5"));                                                   \
      } else {                                                                                                      \
        QC_DSP_PACKED_FIXED(QC_DSP_3X2_S8, QC_DSP_NX2_S8(QC_DSP_3X2_FIRST), QC_DSP_RQC_OUTS3("s0", "s2", "s4"),     \
                            QC_DSP_RQC_OUTS3("s1", "s3", "s5"));                                                   \
      }                                                                                                             \
    } else if (q15) {                                                                                               \
      QC_DSP_PACKED_LOOP(QC_DSP_3X2_Q15, 68, QC_DSP_NX2_Q15(QC_DSP_3X2_FIRST), QC_DSP_X15(QC_DSP_3X2_Q15),         \
                         QC_DSP_RQC_OUTS3("s0", "s2", "s4"), QC_DSP_RQC_OUTS3("s1", "s3", "s5"));                  \
    } else {                                                                                                        \
      QC_DSP_PACKED_LOOP(QC_DSP_3X2_S8, 80, QC_DSP_NX2_S8(QC_DSP_3X2_FIRST), QC_DSP_X15(QC_DSP_3X2_S8),            \
                         QC_DSP_RQC_OUTS3("s0", "s2", "s4"), QC_DSP_RQC_OUTS3("s1", "s3", "s5"));                  \
    }                                                                                                               \
  } while (0)
/* The first group of 2 or 3 pixels (FIRST: the text before the PC load), which starts the other pixels' sums from
   the first one's start (s0, s1: no MOVs of the starts): the last pixel's inputs first, at their offsets from x,
   then the first pixel's, x then moved past the group. */
#define QC_DSP_NX2_FROM(a, b, off)                                                                                  \
  "ldrd %[xe], %[xo], [%[x], #" off "]\n\t"                                                                       \
  "smlad %[" a "], %[xe], %[te], %[s0]\n\t"                                                                      \
  "smlad %[" a "], %[xo], %[t], %[" a "]\n\t"                                                                     \
  "smlad %[" b "], %[xe], %[ue], %[s1]\n\t"                                                                      \
  "smlad %[" b "], %[xo], %[u], %[" b "]\n\t"
#define QC_DSP_NX2_FIRST0(bytes)                                                                                   \
  "ldrd %[xe], %[xo], [%[x]], #" bytes "\n\t"                                                                    \
  "smlad %[s0], %[xe], %[te], %[s0]\n\t"                                                                         \
  "smlad %[s0], %[xo], %[t], %[s0]\n\t"                                                                          \
  "smlad %[s1], %[xe], %[ue], %[s1]\n\t"                                                                         \
  "smlad %[s1], %[xo], %[u], %[s1]\n\t"
#define QC_DSP_2X2_FIRST QC_DSP_NX2_FROM("s2", "s3", "8") QC_DSP_NX2_FIRST0("16")
#define QC_DSP_3X2_FIRST QC_DSP_NX2_FROM("s4", "s5", "16") QC_DSP_NX2_FROM("s2", "s3", "8") QC_DSP_NX2_FIRST0("24")

static inline __attribute__((always_inline, unused)) void qc_dsp_conv_packed(const qc_dsp_conv_params *P,
    const uint32_t *x, int8_t *y, int n, int q15, int32_t fixed) {
  const int32_t *wq = P->q;
  /* the entry into the passes of 8 (16: 3 pixels) groups: at the first of the groups after the first one (2, 3
     pixels) or of all (1 pixel); with no groups left, at the passes' end (x at xend) */
  const int32_t pass = n == 3 ? 16 : 8, left = n == 1 ? P->groups : P->groups - 1;
  const int32_t rows = P->rows, skip = left ? -left & (pass - 1) : pass;
  const uint32_t *xend = x + 2 * n * P->groups;
  const int8_t *yend = y + rows;
  struct { int8_t *y; int32_t rows; } yr = {y, rows};  /* (y and the row stride by one LDRD) */
  uint32_t entry;
  int32_t s0, s1, s2, s3, s4, s5;
  const uint32_t *xq;
  uint32_t t, u, te, ue, xe, xo;
  QC_DSP_PACKED_NPX(n, q15, fixed);
}

/* dst = the dsp_packed stream of qc_dsp_conv_*_q15x2_packed (the inputs not doubled) made from src, the dsp_packed
   stream of the s8x2 kernels (rows even, groups per row): per pair of rows the 2 starts (already doubled), per group
   row 0's int8 word then row 1's -> row 0's int16 pairs (bytes 0,2 then 1,3: SXTB16 and its rotation) then row
   1's, each doubled by SADD16 (2w in [-256, 254] fits int16: the doubled sums of mode 3 as the s8x2 kernels get
   them from doubled inputs), then the 6 requantization words. Run once per step into a stack copy: the groups of
   the fast layout (17 instructions per 24 MACs instead of 20) from the compact layout's flash. */
static QC_DSP_CONV_KERNEL void qc_dsp_packed_q15x2(const int32_t *src, int32_t rows, int32_t groups, int32_t *dst) {
  for (int32_t r = 0; r < rows; r += 2) {
    memcpy(dst, src, 8);
    src += 2;
    dst += 2;
    for (int32_t g = 0; g < groups; ++g, src += 2, dst += 4) {
      uint32_t w[2], q[4];
      memcpy(w, src, 8);
      qc_dsp_widen_word(w[0], q, 1);
      qc_dsp_widen_word(w[1], q + 2, 1);
      memcpy(dst, q, 16);
    }
    memcpy(dst, src, 24);
    src += 6;
    dst += 6;
  }
}

/* The variants: one function each (a step calls the one its constants need). */
#define QC_DSP_CONV_DEFINE(RQ, MODE, PC, CLAMP, W)                                                                 \
  static QC_DSP_CONV_KERNEL void qc_dsp_conv_2px_##W##_##RQ(const qc_dsp_conv_params *P, const uint32_t *x,          \
                                                             int8_t *y0, int8_t *y1) {                             \
    qc_dsp_conv_pair(P, x, y0, y1, MODE, PC, CLAMP, QC_DSP_Q15_##W);                                               \
  }                                                                                                                \
  static QC_DSP_CONV_KERNEL void qc_dsp_conv_3px_##W##_##RQ(const qc_dsp_conv_params *P, const uint32_t *x,          \
                                                             int8_t *y0, int8_t *y1, int8_t *y2) {                 \
    qc_dsp_conv_triple(P, x, y0, y1, y2, MODE, PC, CLAMP, QC_DSP_Q15_##W, 0);                                      \
  }                                                                                                                \
  QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 1) QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 2)   \
  QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 3) QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 4)   \
  QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 5) QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 6)   \
  QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 7) QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 8)   \
  QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 9) QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, 10)
#define QC_DSP_CONV_3PX_FIXED_DEFINE(RQ, MODE, PC, CLAMP, W, G)                                                   \
  static QC_DSP_CONV_KERNEL void qc_dsp_conv_3px_##W##_##RQ##_g##G(const qc_dsp_conv_params *P, const uint32_t *x,   \
                                                                    int8_t *y0, int8_t *y1, int8_t *y2) {          \
    qc_dsp_conv_triple(P, x, y0, y1, y2, MODE, PC, CLAMP, QC_DSP_Q15_##W, G);                                      \
  }
/* The dsp_packed kernels (mode 2 without the clamp, the sums doubled: qc_dsp_rq8 mode 3) of 1, 2 and 3 pixels. */
#define QC_DSP_CONV_PACKED_DEFINE(W, N)                                                                            \
  static QC_DSP_CONV_KERNEL void qc_dsp_conv_##N##px_##W##_packed(const qc_dsp_conv_params *P, const uint32_t *x,   \
                                                                   int8_t *y) {                                    \
    qc_dsp_conv_packed(P, x, y, N, QC_DSP_Q15_##W, 0);                                                             \
  }
/* The 3-pixel dsp_packed kernels of G groups (QC_DSP_PACKED_FIXED). */
#define QC_DSP_CONV_PACKED_FIXED_DEFINE(W, G)                                                                      \
  static QC_DSP_CONV_KERNEL void qc_dsp_conv_3px_##W##_packed_g##G(const qc_dsp_conv_params *P, const uint32_t *x,  \
                                                                    int8_t *y) {                                   \
    qc_dsp_conv_packed(P, x, y, 3, QC_DSP_Q15_##W, G);                                                             \
  }
#define QC_DSP_CONV_PACKED_FIXED_DEFINES(W)                                                                         \
  QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 1) QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 2) QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 3)  \
  QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 4) QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 5) QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 6)  \
  QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 7) QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 8) QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 9)  \
  QC_DSP_CONV_PACKED_FIXED_DEFINE(W, 10)
#define QC_DSP_Q15_s8x2 0
#define QC_DSP_Q15_q15x2 1
QC_DSP_RQ_VARIANTS(QC_DSP_CONV_DEFINE, s8x2)
QC_DSP_RQ_VARIANTS(QC_DSP_CONV_DEFINE, q15x2)
QC_DSP_RQ_EXC_VARIANTS(QC_DSP_CONV_DEFINE, s8x2)
QC_DSP_RQ_EXC_VARIANTS(QC_DSP_CONV_DEFINE, q15x2)
QC_DSP_CONV_PACKED_DEFINE(s8x2, 1)
QC_DSP_CONV_PACKED_DEFINE(s8x2, 2)
QC_DSP_CONV_PACKED_DEFINE(s8x2, 3)
QC_DSP_CONV_PACKED_DEFINE(q15x2, 1)
QC_DSP_CONV_PACKED_DEFINE(q15x2, 2)
QC_DSP_CONV_PACKED_DEFINE(q15x2, 3)
QC_DSP_CONV_PACKED_FIXED_DEFINES(s8x2)
QC_DSP_CONV_PACKED_FIXED_DEFINES(q15x2)

#endif
