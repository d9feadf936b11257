/* qc_cm_dsp.c: the Cortex-M4/M7 depthwise kernels declared in qc_cm_dsp.h, compiled once and shared by every model
 * of a firmware (with -ffunction-sections and the linker's --gc-sections only the variants a model calls are kept).
 * The sums are exact in any order: each starts from bias - izp * the channel's weight sum (made at generation
 * time) and adds the raw int8 products; the kernel choice (qcodegen/kernels/cortex_m_dsp/choice.py) requires
 * |bias| + taps * 2^17 < 2^31, so that no partial sum leaves int32. The variants of requantization mode 2 take the
 * weights and starts doubled (qc_dsp_rq8 mode 3: 2 x the sums; the choice requires |bias| + taps 3 2^14 < 2^30
 * for them). SPDX-License-Identifier: Apache-2.0 */
#if defined(__GNUC__) && !defined(__clang__)
/* At -Og, GCC's register allocator without these finds no registers for the 14-register asm of qc_dsp_dw_pairs in
   some variants ("impossible constraints"); every other optimization level already enables them. */
#pragma GCC optimize("expensive-optimizations")
#endif
#include "qc_cm_dsp.h"

/* ---- Depthwise convolutions ---------------------------------------------------------------------------------- */

/* The products of the input word v (4 int8 channels) and the next two dsp_dw_q15 words at q (post-incremented),
   added to a0..a3: SXTB16 (bytes 0,2 / 1,3 into 16-bit pairs) and SMLABB/SMLATT. */
#define QC_DSP_DW_MLA4                                                                                              \
  "ldrd %[w0], %[w1], [%[q]], #8\n\t"                                                                             \
  "sxtb16 %[u], %[v]\n\t"                                                                                         \
  "smlabb %[a0], %[u], %[w0], %[a0]\n\t"                                                                          \
  "smlatt %[a2], %[u], %[w0], %[a2]\n\t"                                                                          \
  "sxtb16 %[u], %[v], ror #8\n\t"                                                                                 \
  "smlabb %[a1], %[u], %[w1], %[a1]\n\t"                                                                          \
  "smlatt %[a3], %[u], %[w1], %[a3]\n\t"
/* Two taps t, t + 1 of 4 channels: their entries of the tap table (tab, + t) by one LDRD, then the input words at
   entry + bc, as QC_DSP_DW_TAP4T. */
#define QC_DSP_DW_TAP4X2(t)                                                                                         \
  __asm__("ldrd %[p0], %[p1], [%[tab], #" #t " * 4]\n\t"                                                          \
          "ldr %[v], [%[p0], %[bc]]\n\t"                                                                          \
          QC_DSP_DW_MLA4                                                                                            \
          "ldr %[v], [%[p1], %[bc]]\n\t"                                                                          \
          QC_DSP_DW_MLA4                                                                                            \
          : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [q] "+r"(q), [v] "=&r"(v),                  \
            [u] "=&r"(u), [w0] "=&r"(w0), [w1] "=&r"(w1), [p0] "=&r"(p0), [p1] "=&r"(p1)                           \
          : [tab] "r"(tab), [bc] "r"(bc)                                                                           \
          : "memory")
/* One tap, its table entry at ptr + off (off: a literal byte offset). */
#define QC_DSP_DW_TAP4T(ptr, off)                                                                                   \
  __asm__("ldr %[p0], [%[tp], #" #off "]\n\t"                                                                     \
          "ldr %[v], [%[p0], %[bc]]\n\t"                                                                          \
          QC_DSP_DW_MLA4                                                                                            \
          : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [q] "+r"(q), [v] "=&r"(v),                  \
            [u] "=&r"(u), [w0] "=&r"(w0), [w1] "=&r"(w1), [p0] "=&r"(p0)                                           \
          : [tp] "r"(ptr), [bc] "r"(bc)                                                                            \
          : "memory")

/* Two horizontally adjacent pixels A, B of a 3x3 depthwise convolution with stride = dilation 1: column j < 4 of
   input row ky (tap kx = j of A, kx = j - 1 of B) at o[4 ky + j] + bc (o: uintptr_t on the stack, read as "m"
   operands, so that all 14 registers hold the 8 accumulators and the temporaries). Per column: LDR of its word,
   SXTB16 of bytes 0,2 (ue) and 1,3 (p), then SMLABB/SMLATT with the tap's dsp_dw_q15 words (w0: w0|w2, w1: w1|w3,
   at q + k<kx>, byte offsets): B's with the previous tap's words, A's after LDRD of the next. */
#define QC_DSP_DW2_MLA(s0, s1, s2, s3)                                                                              \
  "smlabb %[" s0 "], %[ue], %[w0], %[" s0 "]\n\t"                                                                 \
  "smlatt %[" s2 "], %[ue], %[w0], %[" s2 "]\n\t"                                                                 \
  "smlabb %[" s1 "], %[p], %[w1], %[" s1 "]\n\t"                                                                  \
  "smlatt %[" s3 "], %[p], %[w1], %[" s3 "]\n\t"
#define QC_DSP_DW2_COL(c)                                                                                           \
  "ldr %[p], %[" c "]\n\t"                                                                                        \
  "ldr %[p], [%[p], %[bc]]\n\t"                                                                                   \
  "sxtb16 %[ue], %[p]\n\t"                                                                                        \
  "sxtb16 %[p], %[p], ror #8\n\t"
#define QC_DSP_DW2_ROW(ky, k0, k1, k2)                                                                              \
  __asm__(QC_DSP_DW2_COL("c0") "ldrd %[w0], %[w1], [%[q], #" #k0 "]\n\t" QC_DSP_DW2_MLA("a0", "a1", "a2", "a3")     \
          QC_DSP_DW2_COL("c1") QC_DSP_DW2_MLA("a4", "a5", "a6", "a7")                                               \
          "ldrd %[w0], %[w1], [%[q], #" #k1 "]\n\t" QC_DSP_DW2_MLA("a0", "a1", "a2", "a3")                          \
          QC_DSP_DW2_COL("c2") QC_DSP_DW2_MLA("a4", "a5", "a6", "a7")                                               \
          "ldrd %[w0], %[w1], [%[q], #" #k2 "]\n\t" QC_DSP_DW2_MLA("a0", "a1", "a2", "a3")                          \
          QC_DSP_DW2_COL("c3") QC_DSP_DW2_MLA("a4", "a5", "a6", "a7")                                               \
          : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [a4] "+r"(a4), [a5] "+r"(a5),                \
            [a6] "+r"(a6), [a7] "+r"(a7), [p] "=&r"(p), [ue] "=&r"(ue), [w0] "=&r"(w0), [w1] "=&r"(w1)               \
          : [bc] "r"(bc), [q] "r"(q), [c0] "m"(o[4 * (ky)]), [c1] "m"(o[4 * (ky) + 1]),                             \
            [c2] "m"(o[4 * (ky) + 2]), [c3] "m"(o[4 * (ky) + 3])                                                    \
          : "memory")

/* The int8 outputs of channel k of pixel A (accumulator A, doubled, clobbered) at ya + k and of B (B) at yb + k in
   mode 3 without the clamp (QC_DSP_RQN_*_M), the channel's pair at r + off bytes. One asm statement per channel
   (all four in one would need more than the 14 registers). */
#define QC_DSP_DW2_RQN(k, A, B, off)                                                                                \
  __asm__ volatile(QC_DSP_RQN_FIRST_M(QC_DSP_RQN_MUL, "a", "ya", k, off)                                           \
                   QC_DSP_RQN_NEXT_M(QC_DSP_RQN_MUL, "b", "yb", k, "a")                                            \
                   : [a] "+r"(A), [b] "+r"(B), [m] "=&r"(m), [s] "=&r"(sh)                                        \
                   : [r] "r"(r), [zp] "r"(zp2p1), [ya] "r"(ya), [yb] "r"(yb)                                        \
                   : "memory")
/* The 4 channels' outputs, their pairs at byte offsets o0..o3 from r (0 for all: one pair for every channel). */
#define QC_DSP_DW2_RQN4(o0, o1, o2, o3)                                                                            \
  QC_DSP_DW2_RQN("0", a0, a4, o0);                                                                                  \
  QC_DSP_DW2_RQN("1", a1, a5, o1);                                                                                  \
  QC_DSP_DW2_RQN("2", a2, a6, o2);                                                                                  \
  QC_DSP_DW2_RQN("3", a3, a7, o3)

/* qc_dsp_dw_pixels for pairs of pixels (count / 2 of them; n % 4 == 0): per block of 4 channels, 8 accumulators
   over the 12 input words of both windows (each word widened once for the two pixels), then the int8 outputs
   (qc_dsp_rq8) of A at y, of B at y + n. Column j < 4 of the windows' row ky is at b + cols[4 ky + j]. o: a copy of
   cols, a local array
   (so that its elements are stack operands of the asm without a register for their address, also at -Og), made
   with an opaque 0 added: GCC would otherwise read a copy of cols[] from cols itself, through a register. */
static inline __attribute__((always_inline)) void qc_dsp_dw_pairs(const qc_dsp_dw_params *P, const uintptr_t *cols,
    const int8_t *b, int8_t *y, int32_t pairs, int32_t step, int mode, int pc, int clamp) {
  const int32_t n = P->n, zp2p1 = P->zp2p1, lo = P->lo, hi = P->hi;
  const int32_t *rq = P->rq;
  uintptr_t o[12], zero = 0;
  __asm__("" : "+r"(zero));
  for (int32_t j = 0; j < 12; ++j) {
    o[j] = cols[j] + zero;
  }
  for (int32_t i = 0; i < pairs; ++i, b += 2 * step, y += 2 * n) {
    const int32_t *q = P->q;
    uintptr_t bc = (uintptr_t)b;
    for (int32_t c = 0; c < n; c += 4, bc += 4, q += 22) {
      int32_t a0 = q[0], a1 = q[1], a2 = q[2], a3 = q[3], a4 = a0, a5 = a1, a6 = a2, a7 = a3;
      uint32_t p, ue, w0, w1;
      QC_DSP_DW2_ROW(0, 16, 24, 32);
      QC_DSP_DW2_ROW(1, 40, 48, 56);
      QC_DSP_DW2_ROW(2, 64, 72, 80);
      const int32_t *r = pc ? rq + 2 * c : rq;
      if (mode == 3 && !clamp) {
        uint32_t m, sh;
        int8_t *ya = y + c, *yb = y + n + c;
        if (pc) {
          QC_DSP_DW2_RQN4("0", "8", "16", "24");
        } else {
          QC_DSP_DW2_RQN4("0", "0", "0", "0");
        }
        continue;
      }
      y[c] = qc_dsp_rq8(a0, r, zp2p1, lo, hi, mode, clamp);
      y[c + 1] = qc_dsp_rq8(a1, pc ? r + 2 : r, zp2p1, lo, hi, mode, clamp);
      y[c + 2] = qc_dsp_rq8(a2, pc ? r + 4 : r, zp2p1, lo, hi, mode, clamp);
      y[c + 3] = qc_dsp_rq8(a3, pc ? r + 6 : r, zp2p1, lo, hi, mode, clamp);
      y[n + c] = qc_dsp_rq8(a4, r, zp2p1, lo, hi, mode, clamp);
      y[n + c + 1] = qc_dsp_rq8(a5, pc ? r + 2 : r, zp2p1, lo, hi, mode, clamp);
      y[n + c + 2] = qc_dsp_rq8(a6, pc ? r + 4 : r, zp2p1, lo, hi, mode, clamp);
      y[n + c + 3] = qc_dsp_rq8(a7, pc ? r + 6 : r, zp2p1, lo, hi, mode, clamp);
      if (mode == 4 && qc_dsp_excepted(P->exc_start, c, 4, pc)) {
        const int32_t sa[4] = {a0, a1, a2, a3}, sb[4] = {a4, a5, a6, a7};
        qc_dsp_except(P->exc_start, P->exc_acc, P->exc_value, c, 4, pc, sa, y);
        qc_dsp_except(P->exc_start, P->exc_acc, P->exc_value, c, 4, pc, sb, y + n);
      }
    }
  }
}

/* All channels of `count` output pixels (qc_cm_dsp.h qc_dsp_dw_*): blocks of 4 channels in registers over all the
   taps (9 unrolled), then the last n % 4 channels from the int8 weights (c4: n is a multiple of 4, no such channel).
   Stored as int32 at acc (mode < 0), or requantized (qc_dsp_rq8 `mode`; pc: per-channel pairs) as int8 at y.
   With cols (dw_s8_<rq>_pair: count even, int8 outputs, c4), the pixels in pairs over the windows' columns at
   b + cols[] (qc_dsp_dw_pairs; tab: cols, unread). The _pair entries call this whole function with an even count,
   not qc_dsp_dw_pairs alone: without the single pixels' code (compiled, not run), in some variants and at -Og and
   -O1, GCC found no registers for the pairs' asm. */
static inline __attribute__((always_inline)) void qc_dsp_dw_pixels(const qc_dsp_dw_params *P, const uintptr_t *tab,
    const int8_t *b, int8_t *y, int32_t *acc, int32_t count, int32_t step, int mode, int pc, int clamp, int c4,
    const uintptr_t *cols) {
  const int32_t n = P->n, taps = P->taps, n4 = c4 ? n : n / 4 * 4, zp2p1 = P->zp2p1, lo = P->lo, hi = P->hi;
  const int32_t *rq = P->rq;
  if (cols) {
    uintptr_t c12[12];  /* (a local copy, as the one qc_dsp_dw_pairs makes of it: see there) */
    for (int32_t j = 0; j < 12; ++j) {
      c12[j] = cols[j];
    }
    qc_dsp_dw_pairs(P, c12, b, y, count / 2, step, mode, pc, clamp);
    b += count / 2 * 2 * step;
    y += count / 2 * 2 * n;
    count %= 2;
  }
  for (int32_t i = 0; i < count; ++i, b += step) {
    const int32_t *q = P->q;
    uintptr_t bc = (uintptr_t)b;
    for (int32_t c = 0; c < n4; c += 4, bc += 4) {
      int32_t a0, a1, a2, a3;
      __asm__("ldrd %[a0], %[a1], [%[q]], #8\n\t"
              "ldrd %[a2], %[a3], [%[q]], #8"
              : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [q] "+r"(q)
              : "m"(*(const int32_t (*)[4])q));
      uint32_t v, u, w0, w1, p0, p1;
      if (taps == 9) {
        QC_DSP_DW_TAP4X2(0);
        QC_DSP_DW_TAP4X2(2);
        QC_DSP_DW_TAP4X2(4);
        QC_DSP_DW_TAP4X2(6);
        QC_DSP_DW_TAP4T(tab, 32);
      } else {
        for (const uintptr_t *tp = tab; tp < tab + taps; ++tp) {
          QC_DSP_DW_TAP4T(tp, 0);
        }
      }
      (void)p1;
      if (mode < 0) {
        acc[c] = a0;
        acc[c + 1] = a1;
        acc[c + 2] = a2;
        acc[c + 3] = a3;
      } else {
        const int32_t *r = pc ? rq + 2 * c : rq;
        y[c] = qc_dsp_rq8(a0, r, zp2p1, lo, hi, mode, clamp);
        y[c + 1] = qc_dsp_rq8(a1, pc ? r + 2 : r, zp2p1, lo, hi, mode, clamp);
        y[c + 2] = qc_dsp_rq8(a2, pc ? r + 4 : r, zp2p1, lo, hi, mode, clamp);
        y[c + 3] = qc_dsp_rq8(a3, pc ? r + 6 : r, zp2p1, lo, hi, mode, clamp);
        if (mode == 4 && qc_dsp_excepted(P->exc_start, c, 4, pc)) {
          const int32_t sa[4] = {a0, a1, a2, a3};
          qc_dsp_except(P->exc_start, P->exc_acc, P->exc_value, c, 4, pc, sa, y);
        }
      }
    }
    for (int32_t c = n4; c < n; ++c) {
      int32_t a = q[c - n4];
      for (int32_t t = 0; t < taps; ++t) {
        a += (int32_t)((const int8_t *)(tab[t] + (uintptr_t)b))[c] * P->w[t * n + c] * (mode == 3 ? 2 : 1);
      }
      if (mode < 0) {
        acc[c] = a;
      } else {
        y[c] = qc_dsp_rq8(a, pc ? rq + 2 * c : rq, zp2p1, lo, hi, mode, clamp);
        if (mode == 4 && qc_dsp_excepted(P->exc_start, c, 1, pc)) {
          qc_dsp_except(P->exc_start, P->exc_acc, P->exc_value, c, 1, pc, &a, y);
        }
      }
    }
    if (mode < 0) {
      acc += n;
    } else {
      y += n;
    }
  }
}

void qc_dsp_dw_s32(const qc_dsp_dw_params *P, const uintptr_t *tab, const int8_t *b, int32_t *acc, int32_t count,
                   int32_t step) {
  qc_dsp_dw_pixels(P, tab, b, NULL, acc, count, step, -1, 0, 0, 0, NULL);
}
void qc_dsp_dw_s32_c4(const qc_dsp_dw_params *P, const uintptr_t *tab, const int8_t *b, int32_t *acc, int32_t count,
                      int32_t step) {
  qc_dsp_dw_pixels(P, tab, b, NULL, acc, count, step, -1, 0, 0, 1, NULL);
}

/* (mode 2: the doubled sums of mode 3) */
#define QC_DSP_DW_MODE(MODE) ((MODE) == 2 ? 3 : (MODE))
#define QC_DSP_DW_DEFINE(RQ, MODE, PC, CLAMP, A)                                                                   \
  void qc_dsp_dw_s8_##RQ(const qc_dsp_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y,            \
                         int32_t count, int32_t step) {                                                            \
    qc_dsp_dw_pixels(P, tab, b, y, NULL, count, step, QC_DSP_DW_MODE(MODE), PC, CLAMP, 0, NULL);                   \
  }                                                                                                                \
  void qc_dsp_dw_s8_##RQ##_c4(const qc_dsp_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y,       \
                              int32_t count, int32_t step) {                                                       \
    qc_dsp_dw_pixels(P, tab, b, y, NULL, count, step, QC_DSP_DW_MODE(MODE), PC, CLAMP, 1, NULL);                   \
  }                                                                                                                \
  void qc_dsp_dw_s8_##RQ##_pair(const qc_dsp_dw_params *P, const uintptr_t *cols, const int8_t *b, int8_t *y,    \
                                int32_t count, int32_t step) {                                                     \
    qc_dsp_dw_pixels(P, cols, b, y, NULL, count & ~1, step, QC_DSP_DW_MODE(MODE), PC, CLAMP, 1, cols);                \
  }
QC_DSP_RQ_VARIANTS(QC_DSP_DW_DEFINE, dw)
QC_DSP_RQ_EXC_VARIANTS(QC_DSP_DW_DEFINE, dw)

/* ---- Depthwise 3x3 over planes of one channel (qc_dsp_dwr_*) ------------------------------------------------- */

/* The sums of pixels q = 0 .. 2 pairs - 1 of a plane of one channel at a (int32, pairs >= 1): pixel q's window is
   plane[q + k pw + j], k, j < 3 (the plane's rows of pw int16 one after the other: pixel r pw + ox is output pixel
   ox of the band's row r when ox < ow, else unused). r0, r1, r2: the plane and its rows 1 and 2 (4-byte aligned).
   Per pair q, q + 1 (q even) and kernel row: LDRD of (x[q], x[q + 1]) and (x[q + 2], x[q + 3]), then
   p0 += x[q] w0 + x[q + 1] w1 (SMLAD, wa = w0 | w1 << 16) + x[q + 2] w2 (SMLABT, wb = w1 | w2 << 16),
   p1 += x[q + 1] w0 (SMLATB) + x[q + 2] w1 + x[q + 3] w2 (SMLAD): 15 instructions per 18 MACs and the pair's
   STRD; two pairs a pass (an odd count enters at the second), then the loop's end (pushed on the stack: the 14
   registers hold the 6 weight pairs, 3 row pointers, the sums' pointer, 2 loaded words and 2 sums): 35
   instructions per 2 pairs. Exact: |x| <= 128 (int8 inputs and pad values), |w| <= 256 (the doubled weights of
   mode 3), so |x w| <= 2^15 and |p| <= 9 2^15 < 2^19. */
#define QC_DSP_DWR_KROW(r, wb, first)                                                                               \
  "ldrd %[l0], %[l1], [%[" r "]], #4\n\t"                                                                         \
  first                                                                                                             \
  "smlabt %[p0], %[l1], %[" wb "], %[p0]\n\t"                                                                     \
  "smlad %[p1], %[l1], %[" wb "], %[p1]\n\t"
#define QC_DSP_DWR_NEXT(wa)                                                                                         \
  "smlad %[p0], %[l0], %[" wa "], %[p0]\n\t"                                                                      \
  "smlatb %[p1], %[l0], %[" wa "], %[p1]\n\t"
#define QC_DSP_DWR_PAIR                                                                                             \
  QC_DSP_DWR_KROW("r0", "wb0", "smuad %[p0], %[l0], %[wa0]\n\t"                                                    \
                               "smultb %[p1], %[l0], %[wa0]\n\t")                                                  \
  QC_DSP_DWR_KROW("r1", "wb1", QC_DSP_DWR_NEXT("wa1"))                                                              \
  QC_DSP_DWR_KROW("r2", "wb2", QC_DSP_DWR_NEXT("wa2"))                                                              \
  "strd %[p0], %[p1], [%[a]], #8\n"
static __attribute__((noinline)) void qc_dsp_dwr_pairs(const int16_t *r0, int32_t pw, int32_t *a,
                                                                   int32_t pairs, const int32_t *w) {
  const int16_t *r1 = r0 + pw, *r2 = r0 + 2 * pw;
  uint32_t l0, l1;
  int32_t p0 = (int32_t)(uintptr_t)(a + 2 * pairs), p1 = pairs & 1;  /* (the end, pushed; an odd count) */
  __asm__ volatile("push {%[p0]}\n\t"
                   "cmp %[p1], #0\n\t"
                   "bne 2f\n"
                   "1:\n\t" QC_DSP_DWR_PAIR
                   "2:\n\t" QC_DSP_DWR_PAIR
                   "\tldr %[p0], [sp]\n\t"
                   "cmp %[a], %[p0]\n\t"
                   "bne 1b\n\t"
                   "add sp, sp, #4"
                   : [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [a] "+r"(a), [l0] "=&r"(l0), [l1] "=&r"(l1),
                     [p0] "+r"(p0), [p1] "+r"(p1)
                   : [wa0] "r"(w[1]), [wb0] "r"(w[2]), [wa1] "r"(w[3]), [wb1] "r"(w[4]), [wa2] "r"(w[5]),
                     [wb2] "r"(w[6])
                   : "cc", "memory");
}

/* The sums of `rows` rows of 5 outputs of a band whose plane rows are pw = 6 with a leading pad value (the left
   padding 1: qc_dsp_dwr5_*): per row its flat pixel 1 alone, then 2 pairs from pixel 2, where the flat
   loop's pairs (0, 1), ... computed pixel 0 too, never an output. The lone pixel is the second sum of a pair
   (QC_DSP_DWR_HEAD: LDRD, SMULTB / SMLATB, SMLAD per kernel row and the STRD of the unused sum 0 with it: 10
   instructions). Per row 45 instructions, where 3 pairs took 52.5. Exact as qc_dsp_dwr_pairs (the same
   products). */
#define QC_DSP_DWR_HKROW(r, wb, first)                                                                              \
  "ldrd %[l0], %[l1], [%[" r "]], #4\n\t"                                                                         \
  first                                                                                                             \
  "smlad %[p1], %[l1], %[" wb "], %[p1]\n\t"
#define QC_DSP_DWR_HEAD                                                                                             \
  QC_DSP_DWR_HKROW("r0", "wb0", "smultb %[p1], %[l0], %[wa0]\n\t")                                                 \
  QC_DSP_DWR_HKROW("r1", "wb1", "smlatb %[p1], %[l0], %[wa1], %[p1]\n\t")                                          \
  QC_DSP_DWR_HKROW("r2", "wb2", "smlatb %[p1], %[l0], %[wa2], %[p1]\n\t")                                          \
  "strd %[p0], %[p1], [%[a]], #8\n\t"
static __attribute__((noinline)) void qc_dsp_dwr_head_rows(const int16_t *r0, int32_t pw, int32_t *a, int32_t rows,
                                                           const int32_t *w) {
  const int16_t *r1 = r0 + pw, *r2 = r0 + 2 * pw;
  uint32_t l0, l1;
  int32_t p0 = (int32_t)(uintptr_t)(a + rows * pw), p1;  /* (the end, pushed) */
  __asm__ volatile("push {%[p0]}\n"
                   "1:\n\t" QC_DSP_DWR_HEAD QC_DSP_DWR_PAIR QC_DSP_DWR_PAIR
                   "\tldr %[p0], [sp]\n\t"
                   "cmp %[a], %[p0]\n\t"
                   "bne 1b\n\t"
                   "add sp, sp, #4"
                   : [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [a] "+r"(a), [l0] "=&r"(l0), [l1] "=&r"(l1),
                     [p0] "+r"(p0), [p1] "=&r"(p1)
                   : [wa0] "r"(w[1]), [wb0] "r"(w[2]), [wa1] "r"(w[3]), [wb1] "r"(w[4]), [wa2] "r"(w[5]),
                     [wb2] "r"(w[6])
                   : "cc", "memory");
}

/* The constants of a channel's outputs (qc_dsp_dwr_outs): its start, requantization pair {m, s}, zp2p1, the clamp
   lo, hi, the channel c and the pixel stride n (the channels), the exceptions' arrays. */
typedef struct {
  int32_t start, q[2], zp2p1, lh[2], c, n;
  const int32_t *exc_start, *exc_acc, *exc_value;
} qc_dsp_dwr_channel;

/* The output of sum v (start included) at yc (qc_dsp_rq8; mode 4: then the channel's exceptions). */
static inline __attribute__((always_inline)) void qc_dsp_dwr_out(const qc_dsp_dwr_channel *C, int32_t v, int8_t *yc,
                                                                 int mode, int pc, int clamp) {
  *yc = qc_dsp_rq8(v, C->q, C->zp2p1, C->lh[0], C->lh[1], mode, clamp);
  if (mode == 4 && qc_dsp_excepted(C->exc_start, C->c, 1, pc)) {
    qc_dsp_except(C->exc_start, C->exc_acc, C->exc_value, C->c, 1, pc, &v, yc - C->c);
  }
}

/* qc_dsp_rq8 mode 3 without the clamp of sum v as asm text, start st added first, the zero point inside SMMLAR:
   t = c + SMMULR(v, m) with c = zp2p1 << s (exact: |SMMULR| <= 2^30 and |c| < 2^30, so t fits in int32), then
   t + (v >> 31) shifted right by s is zp2p1 + floor(X / 2^(s + 31)) (qc_dsp_rq8 mode 2; c is a multiple of 2^s),
   halved inside SSAT: ADD, SMMLAR, ADD, ASR, SSAT. */
#define QC_DSP_DWR_RQ3(v)                                                                                           \
  "add %[" v "], %[" v "], %[st]\n\t"                                                                             \
  "smmlar %[t], %[" v "], %[m], %[c]\n\t"                                                                         \
  "add %[" v "], %[t], %[" v "], asr #31\n\t"                                                                     \
  "asr %[" v "], %[" v "], %[s]\n\t"                                                                              \
  "ssat %[" v "], #8, %[" v "], asr #1\n\t"
/* A pair of sums' outputs: LDRD, 2 x QC_DSP_DWR_RQ3, 2 STRB and the next pixel: 14 instructions. */
#define QC_DSP_DWR_OPAIR                                                                                            \
  "ldrd %[v0], %[v1], [%[a]], #8\n\t" QC_DSP_DWR_RQ3("v0") QC_DSP_DWR_RQ3("v1")                                   \
  "strb %[v0], [%[y]]\n\t"                                                                                        \
  "strb %[v1], [%[y], %[n]]\n\t"                                                                                  \
  "add %[y], %[y], %[n], lsl #1\n\t"
/* The band's rows of mode 3 without the clamp (ow >= 2): per row ROW, the sums' skip to the next row and the
   rows' count (3 instructions). The 14 registers hold the pointers, counts, constants and 3 temporaries. */
#define QC_DSP_DWR_ROWS3(ROW)                                                                                       \
  __asm__ volatile("2:\n\t" ROW                                                                                    \
                   "add %[a], %[a], %[skip]\n\t"                                                                  \
                   "subs %[r], %[r], #1\n\t"                                                                      \
                   "bne 2b"                                                                                       \
                   : [a] "+r"(a), [y] "+r"(y), [r] "+r"(rows), [k] "=&r"(k), [v0] "=&r"(v0), [v1] "=&r"(v1),       \
                     [t] "=&r"(t)                                                                                 \
                   : [st] "r"(L.start), [m] "r"(L.q[0]), [s] "r"(L.q[1]), [c] "r"(L.zp2p1 * (1 << L.q[1])),     \
                     [n] "r"(n), [pp] "r"(ow >> 1), [skip] "r"(4 * (pw - ow))                                      \
                   : "cc", "memory")
/* A row of any length: its pp = ow / 2 pairs of sums two a pass (30 instructions per 4 outputs; an odd pp takes one
   pair first: LSRS leaves k = pp / 2 and pp's low bit in C, and the pair sets no flag, so BEQ reads LSRS's k == 0),
   then LAST (the last pixel of an odd row: 8); per row 5 (even pp) or 7 more with QC_DSP_DWR_ROWS3. */
#define QC_DSP_DWR_ROW3(LAST)                                                                                       \
  "lsrs %[k], %[pp], #1\n\t"                                                                                      \
  "bcc 1f\n\t" QC_DSP_DWR_OPAIR                                                                                   \
  "beq 3f\n"                                                                                                       \
  "1:\n\t" QC_DSP_DWR_OPAIR QC_DSP_DWR_OPAIR                                                                      \
  "subs %[k], %[k], #1\n\t"                                                                                       \
  "bne 1b\n"                                                                                                       \
  "3:\n\t" LAST
/* The last pixel of an odd row: 8 instructions. */
#define QC_DSP_DWR_OLAST                                                                                            \
  "ldr %[v0], [%[a]], #4\n\t" QC_DSP_DWR_RQ3("v0") "strb %[v0], [%[y]]\n\t"                                       \
  "add %[y], %[y], %[n]\n\t"

/* The outputs of one channel's sums of a band (qc_dsp_dwr_pairs: `rows` rows of ow sums, pw apart) at y (the
   channel's first output; the next pixel's n further), C copied into locals: the int8 stores could alias it. */
static inline __attribute__((always_inline)) void qc_dsp_dwr_outs(const qc_dsp_dwr_channel *C, const int32_t *a,
    int8_t *y, int32_t rows, int32_t ow, int32_t pw, int mode, int pc, int clamp, int five) {
  const qc_dsp_dwr_channel L = *C;
  const int32_t n = L.n;
  if (mode == 3 && !clamp && ow >= 2 && L.q[1] <= 21) {  /* (|zp2p1| <= 255: |zp2p1 << s| < 2^30) */
    int32_t k, v0, v1, t;
    if (five) {  /* (ow = 5, qc_dsp_dwr5_*) unrolled: 39 instructions a row, 43 with the passes */
      QC_DSP_DWR_ROWS3(QC_DSP_DWR_OPAIR QC_DSP_DWR_OPAIR QC_DSP_DWR_OLAST);
    } else if (ow & 1) {
      QC_DSP_DWR_ROWS3(QC_DSP_DWR_ROW3(QC_DSP_DWR_OLAST));
    } else {
      QC_DSP_DWR_ROWS3(QC_DSP_DWR_ROW3(""));
    }
    return;
  }
  for (int32_t r = 0; r < rows; ++r, a += pw - ow) {
    const int32_t *end = a + (ow & ~1);
    for (; a != end; a += 2, y += 2 * n) {
      const int32_t v0 = a[0] + L.start, v1 = a[1] + L.start;
      qc_dsp_dwr_out(&L, v0, y, mode, pc, clamp);
      qc_dsp_dwr_out(&L, v1, y + n, mode, pc, clamp);
    }
    if (ow & 1) {
      qc_dsp_dwr_out(&L, *a++ + L.start, y, mode, pc, clamp);
      y += n;
    }
  }
}

/* One pair of input pixels of 4 channels into the planes at d0..d3 (post-incremented by a word): the word a of
   pixel j (at s) and LOADB, the one of pixel j + 1; SXTB16 of a's bytes 0,2 and 1,3 (and b's: B0, B1, into bx),
   PKHBT / PKHTB of the two pixels' halves of a channel into its int16 pair, STR. */
#define QC_DSP_DWR_WIDEN2(LOADB, B0, B1, bx)                                                                        \
  "ldr %[a], [%[s]]\n\t" LOADB                                                                                     \
  "sxtb16 %[a0], %[a]\n\t" B0                                                                                      \
  "pkhbt %[t], %[a0], %[" bx "], lsl #16\n\t"                                                                    \
  "str %[t], [%[d0]], #4\n\t"                                                                                    \
  "pkhtb %[t], %[" bx "], %[a0], asr #16\n\t"                                                                    \
  "str %[t], [%[d2]], #4\n\t"                                                                                    \
  "sxtb16 %[a0], %[a], ror #8\n\t" B1                                                                              \
  "pkhbt %[t], %[a0], %[" bx "], lsl #16\n\t"                                                                    \
  "str %[t], [%[d1]], #4\n\t"                                                                                    \
  "pkhtb %[t], %[" bx "], %[a0], asr #16\n\t"                                                                    \
  "str %[t], [%[d3]], #4\n\t"
/* A pair of pixels and the step to the next pair (15 instructions). */
#define QC_DSP_DWR_WPAIR                                                                                            \
  QC_DSP_DWR_WIDEN2("ldr %[b], [%[s], %[n]]\n\t", "sxtb16 %[b0], %[b]\n\t", "sxtb16 %[b0], %[b], ror #8\n\t", "b0") \
  "add %[s], %[s], %[n], lsl #1\n\t"
/* An odd row's last pixel, paired with the pad values (12 instructions). */
#define QC_DSP_DWR_WTAIL QC_DSP_DWR_WIDEN2("", "", "", "pad2") "add %[s], %[s], %[n]\n\t"
/* A row of any length: its pixel pairs (k of them, pushed: the 14 registers are taken; 17 instructions per pair
   with the loop), then TAIL. */
#define QC_DSP_DWR_WROW(TAIL)                                                                                       \
  "ldr %[k], [sp]\n"                                                                                               \
  "1:\n\t" QC_DSP_DWR_WPAIR                                                                                        \
  "subs %[k], %[k], #1\n\t"                                                                                       \
  "bne 1b\n\t" TAIL
/* The rows of the widening (qc_dsp_dwr_widen4): per row ROW, the 4 plane pointers' skip to the next row (pushed)
   and the rows' loop: 8 instructions per row with the pair count's load. */
#define QC_DSP_DWR_WIDEN_ROWS(ROW)                                                                                  \
  __asm__ volatile("push {%[t]}\n\t" /* (one a PUSH: a list is stored in register order) */                   \
                   "push {%[k]}\n"                                                                                \
                   "2:\n\t" ROW                                                                                  \
                   "ldr %[t], [sp, #4]\n\t"                                                                       \
                   "add %[d0], %[d0], %[t]\n\t"                                                                   \
                   "add %[d1], %[d1], %[t]\n\t"                                                                   \
                   "add %[d2], %[d2], %[t]\n\t"                                                                   \
                   "add %[d3], %[d3], %[t]\n\t"                                                                   \
                   "subs %[r], %[r], #1\n\t"                                                                      \
                   "bne 2b\n\t"                                                                                   \
                   "add sp, sp, #8"                                                                               \
                   : [s] "+r"(s), [d0] "+r"(d0), [d1] "+r"(d1), [d2] "+r"(d2), [d3] "+r"(d3), [k] "+r"(k),         \
                     [r] "+r"(rows), [a] "=&r"(a), [b] "=&r"(b), [a0] "=&r"(a0), [b0] "=&r"(b0), [t] "+r"(t)       \
                   : [n] "r"(n), [pad2] "r"(pad2)                                                                 \
                   : "cc", "memory")

/* `rows` (>= 1) input rows of `count` (>= 2) pixels at s (n apart, the rows one after the other) of 4 channels into
   the planes at d, d + len, d + 2 len, d + 3 len (int16, d 4-byte aligned; the next row pw further), in pairs
   (QC_DSP_DWR_WIDEN2: 17 instructions per 2 pixels with the loop, where 4 LDRSB and 4 STRH a pixel took 22), an
   odd row's last pixel paired with the pad values pad2 (pad | pad << 16: the plane index after an input row's is a
   pad value of the same row, qc_dsp_dwr). Out of line, one copy for every variant (inlined into qc_dsp_dwr, GCC
   found no registers for the 14-register asm). */
static inline __attribute__((always_inline)) void qc_dsp_dwr_widen(const int8_t *s, int32_t n, int16_t *d,
    int32_t len, int32_t count, int32_t rows, int32_t pw, uint32_t pad2, int five) {
  int16_t *d0 = d, *d1 = d + len, *d2 = d + 2 * len, *d3 = d + 3 * len;
  uint32_t a, b, a0, b0;
  int32_t k = count >> 1, t = 2 * (pw - (count + 1) / 2 * 2);  /* (pushed: the pairs a row, the skip in bytes) */
  if (five) {  /* (count = 5, qc_dsp_dwr5_*) unrolled: 49 instructions a row, 54 with the pairs' loop */
    QC_DSP_DWR_WIDEN_ROWS(QC_DSP_DWR_WPAIR QC_DSP_DWR_WPAIR QC_DSP_DWR_WTAIL);
  } else if (count & 1) {
    QC_DSP_DWR_WIDEN_ROWS(QC_DSP_DWR_WROW(QC_DSP_DWR_WTAIL));
  } else {
    QC_DSP_DWR_WIDEN_ROWS(QC_DSP_DWR_WROW(""));
  }
}

static __attribute__((noinline)) void qc_dsp_dwr_widen4(const int8_t *s, int32_t n, int16_t *d, int32_t len,
                                                        int32_t count, int32_t rows, int32_t pw, uint32_t pad2) {
  qc_dsp_dwr_widen(s, n, d, len, count, rows, pw, pad2, 0);
}
static __attribute__((noinline)) void qc_dsp_dwr_widen5(const int8_t *s, int32_t n, int16_t *d, int32_t len,
                                                        int32_t count, int32_t rows, int32_t pw, uint32_t pad2) {
  qc_dsp_dwr_widen(s, n, d, len, count, rows, pw, pad2, 1);
}

/* qc_dsp_dwr_s8_<rq> (qc_cm_dsp.h): per band of nb output rows, the pad values in the planes of 4 channels,
   then per block of 4 channels their input rows widened into them (qc_dsp_dwr_widen4), and per channel the sums
   of the band's pixels in pairs (qc_dsp_dwr_pairs; five, qc_dsp_dwr5_*: row by row, qc_dsp_dwr_head_rows, and the
   widening's and the outputs' rows unrolled), then its outputs (outs: the variant's qc_dsp_dwr_outs), start + sum
   requantized (|start + sum| is the accumulator, which the kernel choice bounds below 2^31, 2^30 doubled). A
   plane: with e = pl % 2, 2e pad values, then the band's rows of pw, input column j of row r at index
   2e + r pw + pl - e + j (even: the widening stores int16 pairs), then 4 pad values (the last pair's windows read
   past the last row). Output pixel ox of row r sums the windows at flat index f = r pw + ox + e (the sums from
   index 0, the outputs from sum e). A window reaching before its row's first index reads the previous row's last
   one, a pad value (pw >= pl + iw); past its row's end, the next row's first ones, pad values
   (pw >= ow + 2 - pl). */
static inline __attribute__((always_inline)) void qc_dsp_dwr(const qc_dsp_dwr_params *P, const int8_t *x, int8_t *y,
    int16_t *plane, int32_t *acc, int pc,
    void (*outs)(const qc_dsp_dwr_channel *, const int32_t *, int8_t *, int32_t, int32_t, int32_t), int five) {
  const int32_t n = P->n, ih = P->ih, iw = P->iw, oh = P->oh, ow = P->ow, pw = P->pw, pl = P->pl, nb = P->nb;
  const int32_t e = pl & 1, len = (nb + 2) * pw + 4 + 2 * e, planes = n < 4 ? n : 4;
  const int16_t pad = (int16_t)P->pad;
  const uint32_t pad2 = (uint16_t)pad | (uint32_t)(uint16_t)pad << 16;
  qc_dsp_dwr_channel C = {0, {0, 0}, P->zp2p1, {P->lo, P->hi}, 0, n, P->exc_start, P->exc_acc, P->exc_value};
  for (int32_t b0 = 0; b0 < oh; b0 += nb) {
    const int32_t rows = oh - b0 < nb ? oh - b0 : nb, iy0 = b0 - P->pt;
    const int32_t r_lo = iy0 < 0 ? -iy0 : 0, r_hi = ih - iy0 < rows + 2 ? ih - iy0 : rows + 2;
    for (int32_t i = 0; i < planes; ++i) {  /* the pad values: all but the input rows' input columns */
      int16_t *p = plane + i * len + 2 * e;
      if (e) {  /* (the window of output pixel 0 reads index -1) */
        p[-2] = p[-1] = pad;
      }
      for (int32_t r = 0; r < rows + 2; ++r, p += pw) {
        const int32_t in = r >= r_lo && r < r_hi, left = in ? pl - e : pw;
        for (int32_t j = 0; j < left; ++j) {
          p[j] = pad;
        }
        for (int32_t j = in ? pl - e + iw : pw; j < pw; ++j) {
          p[j] = pad;
        }
      }
      p[0] = p[1] = p[2] = p[3] = pad;
    }
    for (int32_t c0 = 0; c0 < n; c0 += 4) {
      const int32_t k = n - c0 < 4 ? n - c0 : 4;
      if (k == 4 && iw >= 2 && r_hi > r_lo) {
        (five ? qc_dsp_dwr_widen5 : qc_dsp_dwr_widen4)(x + (iy0 + r_lo) * iw * n + c0, n,
                                                       plane + 2 * e + r_lo * pw + pl - e, len, iw, r_hi - r_lo, pw,
                                                       pad2);
      } else {
        for (int32_t r = r_lo; r < r_hi; ++r) {
          const int8_t *s = x + (iy0 + r) * iw * n + c0;
          int16_t *d = plane + 2 * e + r * pw + pl - e;
          for (int32_t i = 0; i < k; ++i) {
            for (int32_t j = 0; j < iw; ++j) {
              d[i * len + j] = s[i + j * n];
            }
          }
        }
      }
      for (int32_t i = 0; i < k; ++i) {
        const int32_t *w = P->w + 7 * (c0 + i), *rq = pc ? P->rq + 2 * (c0 + i) : P->rq;
        C.c = c0 + i;
        C.start = w[0];
        C.q[0] = rq[0];
        C.q[1] = rq[1];
        if (five) {
          qc_dsp_dwr_head_rows(plane + i * len, pw, acc, rows, w);
        } else {
          qc_dsp_dwr_pairs(plane + i * len, pw, acc, ((rows - 1) * pw + ow + e + 1) / 2, w);
        }
        outs(&C, acc + e, y + b0 * ow * n + c0 + i, rows, ow, pw);
      }
    }
  }
}

#define QC_DSP_DWR_DEFINE(RQ, MODE, PC, CLAMP, A)                                                                  \
  static __attribute__((noinline)) void qc_dsp_dwr_outs_##RQ(const qc_dsp_dwr_channel *C, const int32_t *a,     \
                                                             int8_t *y, int32_t rows, int32_t ow, int32_t pw) {  \
    qc_dsp_dwr_outs(C, a, y, rows, ow, pw, QC_DSP_DW_MODE(MODE), PC, CLAMP, 0);                                    \
  }                                                                                                                \
  static __attribute__((noinline)) void qc_dsp_dwr5_outs_##RQ(const qc_dsp_dwr_channel *C, const int32_t *a,    \
                                                              int8_t *y, int32_t rows, int32_t ow, int32_t pw) { \
    qc_dsp_dwr_outs(C, a, y, rows, ow, pw, QC_DSP_DW_MODE(MODE), PC, CLAMP, 1);                                    \
  }                                                                                                                \
  void qc_dsp_dwr_s8_##RQ(const qc_dsp_dwr_params *P, const int8_t *x, int8_t *y, int16_t *plane, int32_t *acc) { \
    qc_dsp_dwr(P, x, y, plane, acc, PC, qc_dsp_dwr_outs_##RQ, 0);                                                 \
  }                                                                                                                \
  void qc_dsp_dwr5_s8_##RQ(const qc_dsp_dwr_params *P, const int8_t *x, int8_t *y, int16_t *plane, int32_t *acc) { \
    qc_dsp_dwr(P, x, y, plane, acc, PC, qc_dsp_dwr5_outs_##RQ, 1);                                                \
  }
QC_DSP_RQ_VARIANTS(QC_DSP_DWR_DEFINE, dwr)
QC_DSP_RQ_EXC_VARIANTS(QC_DSP_DWR_DEFINE, dwr)
