/* qc_mve.c: qcodegen's depthwise convolution kernels for Cortex-M55 Helium (MVE), compiled once and shared by
 * every model of a firmware (qc_mve.h describes the family). C99 with GCC inline asm and ACLE MVE intrinsics.
 * SPDX-License-Identifier: Apache-2.0 */
#include "qc_mve.h"

/* Depthwise with int8 outputs: one block of 16 channels of one output pixel, tap t reading its 16 inputs at
   tab[t] + bc. The taps go in pairs: each tap's products of the even and odd channels (VMULLB/VMULLT.S8, exact in
   int16: the weights lie in [-127, 127], checked at generation time, so |x w| <= 128 * 127), the pair's two
   products added in int16 (|sum| <= 2 * 128 * 127 = 32,512 < 2^15: exact), widened (VMOVLB/VMOVLT.S16) and added
   to a[j] (channels j, j + 4, j + 8, j + 12, started at the block's start in pr: bias - izp * the channel's weight
   sum, so that the sum over the taps of (x - izp) * w + bias is the start plus the sum of x * w; every partial sum
   stays below |bias| + taps 2^17 < 2^31, checked at generation time); an odd last tap alone, widened as it is;
   then each a[j] requantized without the zero point (qc_mve_floor32, exact for shifts 32..62: r), narrowed with
   saturation into int16 lanes (VQMOVNB/VQMOVNT: a0 | a2 the even channels, a1 | a3 the odd ones), zp added with
   saturation, narrowed with saturation into one int8x16 of the channels in order and clamped there (VMAX/VMIN.S8;
   not when lo, hi are -128, 127: clamp 0). As |zp| <= 128 and lo, hi are inside int8, that is clamp(r + zp, lo,
   hi): where r is outside int16, sat16(r) + zp and r + zp are both beyond int8 on the same side. Stored at y.
   Whole blocks: these steps in one asm statement (GCC 12 spills the constants and copies registers around the
   loop of taps). A pair is 19 instructions per 32 MACs (a tap alone 12 per 16): the 8 vector registers hold the 4
   accumulators, so the second tap's even products overwrite its weights (VMULL.S8's destination may be a source:
   each 16-bit result lane reads only the source bytes of its own beat), which are loaded again for the odd ones. */
#define QC_MVE_DW_START                                                                                           \
  "vldrw.32 %q[a0], [%[pr]]\n\tvldrw.32 %q[a1], [%[pr], #16]\n\t"                                                \
  "vldrw.32 %q[a2], [%[pr], #32]\n\tvldrw.32 %q[a3], [%[pr], #48]\n\t"
/* the int16 products in e (even channels) and o (odd) widened and added to a0..a3 */
#define QC_MVE_DW_WIDEN                                                                                           \
  "vmovlb.s16 %q[x], %q[e]\n\tvadd.i32 %q[a0], %q[a0], %q[x]\n\t"                                                  \
  "vmovlt.s16 %q[e], %q[e]\n\tvadd.i32 %q[a2], %q[a2], %q[e]\n\t"                                                  \
  "vmovlb.s16 %q[x], %q[o]\n\tvadd.i32 %q[a1], %q[a1], %q[x]\n\t"                                                  \
  "vmovlt.s16 %q[o], %q[o]\n\tvadd.i32 %q[a3], %q[a3], %q[o]\n\t"
/* a tap, its 16 inputs in x: the products with 16 weights (from w8, advanced) in e, o */
#define QC_MVE_DW_MUL                                                                                             \
  "vldrb.8 %q[w], [%[w8]], #16\n\t"                                                                               \
  "vmullb.s8 %q[e], %q[x], %q[w]\n\tvmullt.s8 %q[o], %q[x], %q[w]\n\t"
/* a tap alone: its products added to a0..a3 */
#define QC_MVE_DW_MAC QC_MVE_DW_MUL QC_MVE_DW_WIDEN
/* the second tap of a pair, its 16 inputs in x: its products (weights from w8, advanced) added to e, o in int16 */
#define QC_MVE_DW_MUL2                                                                                            \
  "vldrb.8 %q[w], [%[w8]]\n\tvmullb.s8 %q[w], %q[x], %q[w]\n\tvadd.i16 %q[e], %q[e], %q[w]\n\t"                   \
  "vldrb.8 %q[w], [%[w8]], #16\n\tvmullt.s8 %q[x], %q[x], %q[w]\n\tvadd.i16 %q[o], %q[o], %q[x]\n\t"
/* a pair of taps, LOAD1 and LOAD2 loading their inputs into x */
#define QC_MVE_DW_PAIR(load1, load2) load1 QC_MVE_DW_MUL load2 QC_MVE_DW_MUL2 QC_MVE_DW_WIDEN
/* a[j] = qc_mve_floor32(a[j], multipliers, 31 - shifts) (VQDMULH, or VQRDMULH + (v >> 31) for dbl; VRSHL) */
#define QC_MVE_DW_RQ(j, dbl)                                                                                       \
  "vldrw.32 %q[x], [%[pr], #" #j "*16+64]\n\t"                                                                    \
  QC_MVE_DW_MUL##dbl(j) "vldrw.32 %q[x], [%[pr], #" #j "*16+128]\n\t"                                              \
  "vrshl.s32 %q[a" #j "], %q[e], %q[x]\n\t"
#define QC_MVE_DW_MUL0(j) "vqdmulh.s32 %q[e], %q[a" #j "], %q[x]\n\t"
#define QC_MVE_DW_MUL1(j)                                                                                          \
  "vqrdmulh.s32 %q[e], %q[a" #j "], %q[x]\n\tvshr.s32 %q[o], %q[a" #j "], #31\n\tvadd.i32 %q[e], %q[e], %q[o]\n\t"
#define QC_MVE_DW_CLAMP0
#define QC_MVE_DW_CLAMP1                                                                                           \
  "vldrw.32 %q[w], [%[pr], #208]\n\tvmax.s8 %q[x], %q[x], %q[w]\n\t"                                              \
  "vldrw.32 %q[w], [%[pr], #224]\n\tvmin.s8 %q[x], %q[x], %q[w]\n\t"
/* the requantized int8 outputs of a0..a3 into x */
#define QC_MVE_DW_END(dbl, clamp)                                                                                  \
  QC_MVE_DW_RQ(0, dbl) QC_MVE_DW_RQ(1, dbl) QC_MVE_DW_RQ(2, dbl) QC_MVE_DW_RQ(3, dbl)                              \
  "vqmovnb.s32 %q[e], %q[a0]\n\tvqmovnt.s32 %q[e], %q[a2]\n\t"                                                    \
  "vqmovnb.s32 %q[o], %q[a1]\n\tvqmovnt.s32 %q[o], %q[a3]\n\t"                                                    \
  "vldrw.32 %q[w], [%[pr], #192]\n\tvqadd.s16 %q[e], %q[e], %q[w]\n\tvqadd.s16 %q[o], %q[o], %q[w]\n\t"          \
  "vqmovnb.s16 %q[x], %q[e]\n\tvqmovnt.s16 %q[x], %q[o]\n\t" QC_MVE_DW_CLAMP##clamp
#define QC_MVE_DW_VECTORS                                                                                         \
  [a0] "=&w"(a0), [a1] "=&w"(a1), [a2] "=&w"(a2), [a3] "=&w"(a3), [x] "=&w"(x), [w] "=&w"(wv), [e] "=&w"(e),     \
      [o] "=&w"(o)
/* the next tap of the table: its 16 inputs at *tab++ + bc into x */
#define QC_MVE_DW_TABLE_X "ldr %[xp], [%[tab]], #4\n\tadd %[xp], %[xp], %[bc]\n\tvldrb.8 %q[x], [%[xp]]\n\t"
/* One block, its taps in a loop of pairs (tap t's inputs at tab[t] + bc), an odd last tap after it. */
#define QC_MVE_DW_BLOCK(dbl, clamp)                                                                                \
  __asm__ volatile(QC_MVE_DW_START "wls lr, %[pairs], 2f\n"                                                      \
                   "1:\n\t" QC_MVE_DW_PAIR(QC_MVE_DW_TABLE_X, QC_MVE_DW_TABLE_X) "le lr, 1b\n"                     \
                   "2:\n\t"                                                                                        \
                   "tst %[taps], #1\n\tbeq 3f\n\t" QC_MVE_DW_TABLE_X QC_MVE_DW_MAC                                  \
                   "3:\n\t" QC_MVE_DW_END(dbl, clamp) "vstrb.8 %q[x], [%[y]]"                                      \
                   : QC_MVE_DW_VECTORS, [xp] "=&r"(xp), [tab] "+r"(tab), [w8] "+r"(w)                             \
                   : [pr] "r"(pr), [bc] "r"(bc), [y] "r"(y), [taps] "r"(taps), [pairs] "r"(taps >> 1)             \
                   : "lr", "cc", "memory")
/* A block of a pixel of 9 taps, their inputs' pointers t0..t8 in registers, advanced by a block each: two asm
   statements (at most 30 operands each), the accumulators between them in a0..a3; tap 4 alone (the first statement
   takes 5 pointers, the second 4 with pr and y, as GCC allocates them without moves). */
#define QC_MVE_DW_X9(t) "vldrb.8 %q[x], [%[" t "]], #16\n\t"
#define QC_MVE_DW_PAIR9(t, u) QC_MVE_DW_PAIR(QC_MVE_DW_X9(t), QC_MVE_DW_X9(u))
#define QC_MVE_DW_TAPS9_A                                                                                         \
  __asm__ volatile(QC_MVE_DW_START QC_MVE_DW_PAIR9("t0", "t1") QC_MVE_DW_PAIR9("t2", "t3") QC_MVE_DW_X9("t4")       \
                   QC_MVE_DW_MAC                                                                                   \
                   : QC_MVE_DW_VECTORS, [t0] "+r"(t0), [t1] "+r"(t1), [t2] "+r"(t2), [t3] "+r"(t3),                \
                     [t4] "+r"(t4), [w8] "+r"(w)                                                                   \
                   : [pr] "r"(pr)                                                                                  \
                   : "memory")
#define QC_MVE_DW_TAPS9_B(dbl, clamp)                                                                              \
  __asm__ volatile(QC_MVE_DW_PAIR9("t5", "t6") QC_MVE_DW_PAIR9("t7", "t8")                                         \
                   QC_MVE_DW_END(dbl, clamp) "vstrb.8 %q[x], [%[y]], #16\n\tadd %[pr], %[pr], #240"                 \
                   : [a0] "+&w"(a0), [a1] "+&w"(a1), [a2] "+&w"(a2), [a3] "+&w"(a3), [x] "=&w"(x),                  \
                     [w] "=&w"(wv), [e] "=&w"(e), [o] "=&w"(o), [t5] "+r"(t5), [t6] "+r"(t6), [t7] "+r"(t7),         \
                     [t8] "+r"(t8), [w8] "+r"(w), [pr] "+r"(pr), [y] "+r"(y)                                       \
                   :                                                                                               \
                   : "memory")

/* A whole block of 16 channels (the asm above), tap t's inputs at tab[t] + bc, weights w, constants pr. */
static inline __attribute__((always_inline)) void qc_mve_dw_block16(const uintptr_t *tab, uintptr_t bc,
    const int8_t *w, const int32_t *pr, int8_t *y, int32_t taps, int dbl, int clamp) {
  int32x4_t a0, a1, a2, a3;
  int8x16_t x, wv;
  int16x8_t e, o;
  uintptr_t xp;
  if (dbl && clamp) {
    QC_MVE_DW_BLOCK(1, 1);
  } else if (dbl) {
    QC_MVE_DW_BLOCK(1, 0);
  } else if (clamp) {
    QC_MVE_DW_BLOCK(0, 1);
  } else {
    QC_MVE_DW_BLOCK(0, 0);
  }
}

/* The last block of left < 16 channels: the same steps in C, the inputs' loads and the store predicated (the
   weights and constants past the last channel are zeros); zp, lo, hi: the output zero point and clamp. */
static inline __attribute__((always_inline)) void qc_mve_dw_part(const uintptr_t *tab, uintptr_t bc, const int8_t *w,
    const int32_t *pr, int8_t *y, int32_t left, int32_t taps, int32_t zp, int32_t lo, int32_t hi, int dbl,
    int clamp) {
  const mve_pred16_t p8 = vctp8q((uint32_t)left);
  int32x4_t a0 = vldrwq_s32(pr), a1 = vldrwq_s32(pr + 4), a2 = vldrwq_s32(pr + 8), a3 = vldrwq_s32(pr + 12);
  for (int32_t t = 0; t < taps; t += 2, w += 32) {  /* the taps in pairs, as the whole blocks */
    const int8x16_t xv = vldrbq_z_s8((const int8_t *)(tab[t] + bc), p8), wv = vldrbq_s8(w);
    int16x8_t pe = vmullbq_int_s8(xv, wv), po = vmulltq_int_s8(xv, wv);
    if (t + 1 < taps) {
      const int8x16_t xu = vldrbq_z_s8((const int8_t *)(tab[t + 1] + bc), p8), wu = vldrbq_s8(w + 16);
      pe = vaddq_s16(pe, vmullbq_int_s8(xu, wu));
      po = vaddq_s16(po, vmulltq_int_s8(xu, wu));
    }
    a0 = vaddq_s32(a0, vmovlbq_s16(pe));
    a2 = vaddq_s32(a2, vmovltq_s16(pe));
    a1 = vaddq_s32(a1, vmovlbq_s16(po));
    a3 = vaddq_s32(a3, vmovltq_s16(po));
  }
  a0 = qc_mve_floor32(a0, vldrwq_s32(pr + 16), vldrwq_s32(pr + 32), dbl);
  a1 = qc_mve_floor32(a1, vldrwq_s32(pr + 20), vldrwq_s32(pr + 36), dbl);
  a2 = qc_mve_floor32(a2, vldrwq_s32(pr + 24), vldrwq_s32(pr + 40), dbl);
  a3 = qc_mve_floor32(a3, vldrwq_s32(pr + 28), vldrwq_s32(pr + 44), dbl);
  const int16x8_t even = vqaddq_n_s16(vqmovntq_s32(vqmovnbq_s32(vuninitializedq_s16(), a0), a2), (int16_t)zp);
  const int16x8_t odd = vqaddq_n_s16(vqmovntq_s32(vqmovnbq_s32(vuninitializedq_s16(), a1), a3), (int16_t)zp);
  int8x16_t out = vqmovntq_s16(vqmovnbq_s16(vuninitializedq_s8(), even), odd);
  if (clamp) {
    out = vmaxq_s8(vminq_s8(out, vdupq_n_s8((int8_t)hi)), vdupq_n_s8((int8_t)lo));
  }
  vstrbq_p_s8(y, out, p8);
}

/* The whole blocks of 16 channels (blocks > 0) of `count` pixels of 9 taps, tap t of pixel i reading at tab[t] + b +
   i * (blocks * 16 + skip), outputs at y (the next pixel's at + blocks * 16): the 9 pointers are set once and walk
   the blocks, a pixel's last block leaving them at the next pixel's first when skip is 0 (stride 1 over contiguous
   pixels), else advanced by skip. */
static inline __attribute__((always_inline)) void qc_mve_dw_pixels9(const uintptr_t *tab, uintptr_t b,
    const int8_t *w0, const int32_t *pr0, int8_t *y, int32_t blocks, int32_t count, int32_t skip, int dbl,
    int clamp) {
  uintptr_t t0 = tab[0] + b, t1 = tab[1] + b, t2 = tab[2] + b, t3 = tab[3] + b, t4 = tab[4] + b, t5 = tab[5] + b,
            t6 = tab[6] + b, t7 = tab[7] + b, t8 = tab[8] + b;
  const int8_t *w = w0;
  const int32_t *pr = pr0, *const pr_end = pr0 + blocks * 60;
  for (int32_t k = blocks * count; k > 0; --k) {  /* (one loop: the pixels' ends by their constants' end) */
    int32x4_t a0, a1, a2, a3;
    int8x16_t x, wv;
    int16x8_t e, o;
    QC_MVE_DW_TAPS9_A;
    if (dbl && clamp) {
      QC_MVE_DW_TAPS9_B(1, 1);
    } else if (dbl) {
      QC_MVE_DW_TAPS9_B(1, 0);
    } else if (clamp) {
      QC_MVE_DW_TAPS9_B(0, 1);
    } else {
      QC_MVE_DW_TAPS9_B(0, 0);
    }
    if (pr == pr_end) {
      w = w0;
      pr = pr0;
      if (skip) {
        t0 += skip, t1 += skip, t2 += skip, t3 += skip, t4 += skip, t5 += skip, t6 += skip, t7 += skip, t8 += skip;
      }
    }
  }
}

/* qc_mve_dw_pixels9 of each requantization, out of line: one copy of its asm for the pixel runs and the pixels. */
#define QC_MVE_DW_PIXELS9_FN(name, dbl, clamp)                                                                   \
  static __attribute__((noinline)) void name(const uintptr_t *tab, uintptr_t b, const int8_t *w0,               \
                                             const int32_t *pr0, int8_t *y, int32_t blocks, int32_t count,         \
                                             int32_t skip) {                                                       \
    qc_mve_dw_pixels9(tab, b, w0, pr0, y, blocks, count, skip, dbl, clamp);                                      \
  }
QC_MVE_DW_PIXELS9_FN(qc_mve_dw_pixels9_single, 0, 0)
QC_MVE_DW_PIXELS9_FN(qc_mve_dw_pixels9_single_clamp, 0, 1)
QC_MVE_DW_PIXELS9_FN(qc_mve_dw_pixels9_double, 1, 0)
QC_MVE_DW_PIXELS9_FN(qc_mve_dw_pixels9_double_clamp, 1, 1)
#define QC_MVE_DW_PIXELS9(dbl, clamp)                                                                            \
  ((dbl) ? ((clamp) ? qc_mve_dw_pixels9_double_clamp : qc_mve_dw_pixels9_double)                               \
         : ((clamp) ? qc_mve_dw_pixels9_single_clamp : qc_mve_dw_pixels9_single))

/* All n channels of `count` output pixels, tap t of pixel i at b + i * step + tab[t]; int8 outputs at y, the next
   pixel's at + n (the constants as qc_mve_dw_params). */
static inline __attribute__((always_inline)) void qc_mve_dw_pixels(const int8_t *w, const int32_t *pr, int32_t n,
    int32_t taps, int32_t zp, int32_t lo, int32_t hi, const uintptr_t *tab, const int8_t *b, int8_t *y,
    int32_t count, int32_t step, int dbl, int clamp) {
  const int32_t n16 = n / 16 * 16, wb = taps * 16;
  if (taps == 9 && n16 == n && (n16 >= 32 || count > 1)) {  /* (one pixel of one block: the 9 pointers' set-up
                                                                costs what they save) */
    QC_MVE_DW_PIXELS9(dbl, clamp)(tab, (uintptr_t)b, w, pr, y, n16 / 16, count, step - n);
    return;
  }
  for (int32_t i = 0; i < count; ++i, b += step, y += n) {
    int32_t c = 0;
    if (taps == 9 && n16 >= 32) {
      QC_MVE_DW_PIXELS9(dbl, clamp)(tab, (uintptr_t)b, w, pr, y, n16 / 16, 1, 0);
      c = n16;
    }
    for (; c < n16; c += 16) {
      qc_mve_dw_block16(tab, (uintptr_t)b + (uintptr_t)c, w + c / 16 * wb, pr + c / 16 * 60, y + c, taps, dbl, clamp);
    }
    if (c < n) {
      qc_mve_dw_part(tab, (uintptr_t)b + (uintptr_t)c, w + c / 16 * wb, pr + c / 16 * 60, y + c, n - c, taps, zp, lo,
                     hi, dbl, clamp);
    }
  }
}

/* The pixels of qc_mve_dw_s8_*: with P->copies > 1 (fewer than 16 channels), a run of consecutive pixels (step n)
   is taken P->copies pixels at a time as one pixel of 16 channels (their inputs of a tap are the 16 bytes at the
   first one's, their outputs the 16 bytes at its output; the arrays hold the channels repeated), the pixels left
   over and single pixels with their n channels (the other lanes predicated off). The constants are read once,
   before the int8 stores (which could alias them). */
static inline __attribute__((always_inline)) void qc_mve_dw_run(const qc_mve_dw_params *P, const uintptr_t *tab,
    const int8_t *b, int8_t *y, int32_t count, int32_t step, int dbl, int clamp) {
  const int8_t *w = P->w;
  const int32_t *pr = P->pr;
  const int32_t n = P->n, taps = P->taps, copies = P->copies, zp = P->zp, lo = P->lo, hi = P->hi;
  if (copies > 1 && step == n && count >= copies) {
    const int32_t vectors = count / copies;
    qc_mve_dw_pixels(w, pr, 16, taps, zp, lo, hi, tab, b, y, vectors, 16, dbl, clamp);
    b += vectors * 16;
    y += vectors * 16;
    count -= vectors * copies;
  }
  qc_mve_dw_pixels(w, pr, n, taps, zp, lo, hi, tab, b, y, count, step, dbl, clamp);
}

void qc_mve_dw_s8_single(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y, int32_t count,
                         int32_t step) {
  qc_mve_dw_run(P, tab, b, y, count, step, 0, 0);
}

void qc_mve_dw_s8_single_clamp(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y,
                               int32_t count, int32_t step) {
  qc_mve_dw_run(P, tab, b, y, count, step, 0, 1);
}

void qc_mve_dw_s8_double(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y, int32_t count,
                         int32_t step) {
  qc_mve_dw_run(P, tab, b, y, count, step, 1, 0);
}

void qc_mve_dw_s8_double_clamp(const qc_mve_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y,
                               int32_t count, int32_t step) {
  qc_mve_dw_run(P, tab, b, y, count, step, 1, 1);
}

void qc_mve_dw_s8_rows(qc_mve_dw_fn *fn, const qc_mve_dw_params *P, const qc_mve_dw_geo *G, const uintptr_t *tab,
                       const int8_t *x, int8_t *y, int8_t *scratch) {
  const int32_t c = P->n, row = G->cols * c, slots = G->slots, taps = G->kh * G->kw;
  const int32_t left = G->pl * c, copied = G->iw * c;  /* (an exact output size puts every input column in a row) */
  for (int32_t s = 0; s < slots; ++s) {  /* the padding columns (the rows' copies leave them) */
    qc_mve_copy8(scratch + s * row, NULL, (int8_t)G->pad, left);
    qc_mve_copy8(scratch + s * row + left + copied, NULL, (int8_t)G->pad, row - left - copied);
  }
  for (int32_t n = 0; n < G->n; ++n) {
    const int8_t *xn = x + n * G->ih * G->iw * c;
    int32_t next = -G->pt;  /* the next input row to copy */
    for (int32_t oy = 0; oy < G->oh; ++oy, y += G->ow * c) {
      const int32_t iy0 = oy * G->sy - G->pt, last = iy0 + (G->kh - 1) * G->dy;
      for (int32_t r = next > iy0 ? next : iy0; r <= last; ++r) {
        const int inside = r >= 0 && r < G->ih;
        qc_mve_copy8(scratch + (r + G->pt) % slots * row + left, inside ? xn + r * G->iw * c : NULL,
                     (int8_t)G->pad, copied);
      }
      next = last + 1;
      fn(P, tab + (iy0 + G->pt) % slots * taps, scratch, y, G->ow, G->sx * c);
    }
  }
}
