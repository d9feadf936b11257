/* qc_rv32_dot.h: the RV32IM register-block dot products of qc_rv32.h, static functions compiled into each model
 * that includes them and kept out of line (a call per block of rows):
 *   s[j * R + r] = the sum over i < n of x[i * XS + j] * w[i * R + r], r < R, j < P,
 * for R weight rows (re-laid rv32_r<R> at generation time, qcodegen/kernels/rv32/layouts.py: per element i, the R
 * rows' elements in turn; a last block padded with zero rows) times the P pixels of a group of XS whose windows
 * are interleaved element by element. GCC specializes them for the row lengths of the steps that call them
 * (IPA-CP), which it cannot across object files: compiled once as shared functions they took 1.4% more
 * instructions and 536 B more .text on the kws_like example (docs/targets.md "RISC-V").
 * Each kernel keeps its R x P sums in registers over the whole row and walks the R re-laid weight rows with one
 * pointer: per element, LB of the R weights, then per pixel LB of its input and R MUL + ADD. The asm blocks are
 * volatile, so that they stay in this order: GCC's scheduling of the C hoists every load of the unrolled loop and
 * spills sums, and one block cannot take all the sums (30 operands at most). The offsets are literal expressions
 * (U * R + r, U * XS + j) that the assembler evaluates. The sums are exact: at most 65,535 products of at most
 * 2^14. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_RV32_DOT_H
#define QC_RV32_DOT_H

#include <stdint.h>

/* The weights of element U of a block of R rows: w0..w(R-1) = w[U * R + r]. */
#define QC_RV32_W4(U)                                                                                               \
  __asm__ __volatile__("lb %[w0], " #U "*4(%[w])\n\t"                                                             \
                       "lb %[w1], " #U "*4+1(%[w])\n\t"                                                           \
                       "lb %[w2], " #U "*4+2(%[w])\n\t"                                                           \
                       "lb %[w3], " #U "*4+3(%[w])\n\t"                                                           \
                       : [w0] "=&r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3)                            \
                       : [w] "r"(w)                                                                                \
                       : "memory")
#define QC_RV32_W8(U)                                                                                               \
  __asm__ __volatile__("lb %[w0], " #U "*8(%[w])\n\t"                                                             \
                       "lb %[w1], " #U "*8+1(%[w])\n\t"                                                           \
                       "lb %[w2], " #U "*8+2(%[w])\n\t"                                                           \
                       "lb %[w3], " #U "*8+3(%[w])\n\t"                                                           \
                       "lb %[w4], " #U "*8+4(%[w])\n\t"                                                           \
                       "lb %[w5], " #U "*8+5(%[w])\n\t"                                                           \
                       "lb %[w6], " #U "*8+6(%[w])\n\t"                                                           \
                       "lb %[w7], " #U "*8+7(%[w])\n\t"                                                           \
                       : [w0] "=&r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3), [w4] "=&r"(w4),           \
                         [w5] "=&r"(w5), [w6] "=&r"(w6), [w7] "=&r"(w7)                                            \
                       : [w] "r"(w)                                                                                \
                       : "memory")

/* Pixel J of element U (input x[U * XS + J]) into its sums sJ_r: MUL by weight r, ADD. */
#define QC_RV32_MAC(r) "mul %[t], %[xv], %[w" #r "]\n\tadd %[s" #r "], %[s" #r "], %[t]\n\t"
#define QC_RV32_X4(J, U, XS)                                                                                        \
  __asm__ __volatile__("lb %[xv], " #U "*" #XS "+" #J "(%[x])\n\t" QC_RV32_MAC(0) QC_RV32_MAC(1) QC_RV32_MAC(2)  \
                           QC_RV32_MAC(3)                                                                           \
                       : [s0] "+r"(s##J##_0), [s1] "+r"(s##J##_1), [s2] "+r"(s##J##_2), [s3] "+r"(s##J##_3),      \
                         [xv] "=&r"(xv), [t] "=&r"(t)                                                              \
                       : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3), [x] "r"(x)                      \
                       : "memory")
#define QC_RV32_X8(J, U, XS)                                                                                        \
  __asm__ __volatile__("lb %[xv], " #U "*" #XS "+" #J "(%[x])\n\t" QC_RV32_MAC(0) QC_RV32_MAC(1) QC_RV32_MAC(2)  \
                           QC_RV32_MAC(3) QC_RV32_MAC(4) QC_RV32_MAC(5) QC_RV32_MAC(6) QC_RV32_MAC(7)               \
                       : [s0] "+r"(s##J##_0), [s1] "+r"(s##J##_1), [s2] "+r"(s##J##_2), [s3] "+r"(s##J##_3),      \
                         [s4] "+r"(s##J##_4), [s5] "+r"(s##J##_5), [s6] "+r"(s##J##_6), [s7] "+r"(s##J##_7),      \
                         [xv] "=&r"(xv), [t] "=&r"(t)                                                              \
                       : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3), [w4] "r"(w4), [w5] "r"(w5),     \
                         [w6] "r"(w6), [w7] "r"(w7), [x] "r"(x)                                                    \
                       : "memory")

/* One element U of R rows x P pixels (P pixel statements after the weights' loads). */
#define QC_RV32_E4x1(U, XS) { int32_t w0, w1, w2, w3, xv, t; QC_RV32_W4(U); QC_RV32_X4(0, U, XS); }
#define QC_RV32_E4x2(U, XS)                                                                                         \
  { int32_t w0, w1, w2, w3, xv, t; QC_RV32_W4(U); QC_RV32_X4(0, U, XS); QC_RV32_X4(1, U, XS); }
#define QC_RV32_E4x3(U, XS)                                                                                         \
  { int32_t w0, w1, w2, w3, xv, t; QC_RV32_W4(U); QC_RV32_X4(0, U, XS); QC_RV32_X4(1, U, XS); QC_RV32_X4(2, U, XS); }
#define QC_RV32_E4x4(U, XS)                                                                                         \
  {                                                                                                                 \
    int32_t w0, w1, w2, w3, xv, t;                                                                                  \
    QC_RV32_W4(U);                                                                                                  \
    QC_RV32_X4(0, U, XS); QC_RV32_X4(1, U, XS); QC_RV32_X4(2, U, XS); QC_RV32_X4(3, U, XS);                         \
  }
#define QC_RV32_E8x1(U, XS) { int32_t w0, w1, w2, w3, w4, w5, w6, w7, xv, t; QC_RV32_W8(U); QC_RV32_X8(0, U, XS); }
#define QC_RV32_E8x2(U, XS)                                                                                         \
  { int32_t w0, w1, w2, w3, w4, w5, w6, w7, xv, t; QC_RV32_W8(U); QC_RV32_X8(0, U, XS); QC_RV32_X8(1, U, XS); }

/* The sums of pixel J (declared 0) and their stores s[J * R + r]. */
#define QC_RV32_SUMS4(J) int32_t s##J##_0 = 0, s##J##_1 = 0, s##J##_2 = 0, s##J##_3 = 0
#define QC_RV32_SUMS8(J) QC_RV32_SUMS4(J), s##J##_4 = 0, s##J##_5 = 0, s##J##_6 = 0, s##J##_7 = 0
#define QC_RV32_OUT4(J) s[J * 4] = s##J##_0; s[J * 4 + 1] = s##J##_1; s[J * 4 + 2] = s##J##_2; s[J * 4 + 3] = s##J##_3
#define QC_RV32_OUT8(J)                                                                                             \
  s[J * 8] = s##J##_0; s[J * 8 + 1] = s##J##_1; s[J * 8 + 2] = s##J##_2; s[J * 8 + 3] = s##J##_3;                   \
  s[J * 8 + 4] = s##J##_4; s[J * 8 + 5] = s##J##_5; s[J * 8 + 6] = s##J##_6; s[J * 8 + 7] = s##J##_7

/* The row: four elements per iteration, then the n % 4 last ones. */
#define QC_RV32_ROW(R, XS, E)                                                                                       \
  const int8_t *const end = w + (n & ~3) * R, *const last = w + n * R;                                              \
  for (; w < end; w += 4 * R, x += 4 * XS) {                                                                        \
    E(0, XS) E(1, XS) E(2, XS) E(3, XS)                                                                             \
  }                                                                                                                 \
  for (; w < last; w += R, x += XS) {                                                                               \
    E(0, XS)                                                                                                        \
  }

static __attribute__((noinline, unused)) void qc_rv32_dot_rows4x4_s8(const int8_t *x, const int8_t *w, int32_t n,
                                                                      int32_t *s) {
  QC_RV32_SUMS4(0);
  QC_RV32_SUMS4(1);
  QC_RV32_SUMS4(2);
  QC_RV32_SUMS4(3);
  QC_RV32_ROW(4, 4, QC_RV32_E4x4)
  QC_RV32_OUT4(0);
  QC_RV32_OUT4(1);
  QC_RV32_OUT4(2);
  QC_RV32_OUT4(3);
}

static __attribute__((noinline, unused)) void qc_rv32_dot_rows4x1_of4_s8(const int8_t *x, const int8_t *w, int32_t n,
                                                                          int32_t *s) {
  QC_RV32_SUMS4(0);
  QC_RV32_ROW(4, 4, QC_RV32_E4x1)
  QC_RV32_OUT4(0);
}

static __attribute__((noinline, unused)) void qc_rv32_dot_rows4x2_of4_s8(const int8_t *x, const int8_t *w, int32_t n,
                                                                          int32_t *s) {
  QC_RV32_SUMS4(0);
  QC_RV32_SUMS4(1);
  QC_RV32_ROW(4, 4, QC_RV32_E4x2)
  QC_RV32_OUT4(0);
  QC_RV32_OUT4(1);
}

static __attribute__((noinline, unused)) void qc_rv32_dot_rows4x3_of4_s8(const int8_t *x, const int8_t *w, int32_t n,
                                                                          int32_t *s) {
  QC_RV32_SUMS4(0);
  QC_RV32_SUMS4(1);
  QC_RV32_SUMS4(2);
  QC_RV32_ROW(4, 4, QC_RV32_E4x3)
  QC_RV32_OUT4(0);
  QC_RV32_OUT4(1);
  QC_RV32_OUT4(2);
}

static __attribute__((noinline, unused)) void qc_rv32_dot_rows8x2_s8(const int8_t *x, const int8_t *w, int32_t n,
                                                                      int32_t *s) {
  QC_RV32_SUMS8(0);
  QC_RV32_SUMS8(1);
  QC_RV32_ROW(8, 2, QC_RV32_E8x2)
  QC_RV32_OUT8(0);
  QC_RV32_OUT8(1);
}

static __attribute__((noinline, unused)) void qc_rv32_dot_rows8x1_of2_s8(const int8_t *x, const int8_t *w, int32_t n,
                                                                          int32_t *s) {
  QC_RV32_SUMS8(0);
  QC_RV32_ROW(8, 2, QC_RV32_E8x1)
  QC_RV32_OUT8(0);
}

static __attribute__((noinline, unused)) void qc_rv32_dot_rows8x1_s8(const int8_t *x, const int8_t *w, int32_t n,
                                                                      int32_t *s) {
  QC_RV32_SUMS8(0);
  QC_RV32_ROW(8, 1, QC_RV32_E8x1)
  QC_RV32_OUT8(0);
}

#endif
