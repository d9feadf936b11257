/* qc_mve_conv.h: qcodegen's Cortex-M55 (MVE) convolution kernels as dot products of weight rows: static functions
 * compiled into each model that uses them, specialized by the compiler for the constant row length, channels and
 * requantization of the step that calls them (qc_mve.h describes the family). VMLADAVA sums the 16 int8 products of
 * two vectors into a core register; a row's last partial 16-byte chunk (if any) is tail-predicated (VCTP8, zeroing
 * loads). C99 with GCC inline asm and ACLE MVE intrinsics. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_MVE_CONV_H
#define QC_MVE_CONV_H

#include "qc_mve.h"

/* ---- requantized convolutions: qc_mve_conv_{1px,2px}_{s8,s16} ----
   The constants of a step: q: the mve_pw4x2 stream (per block of 4 output channels, the rows after the last whole
   block padded with zero rows: the rows' 16-byte chunks, the 4 accumulator starts bias - izp * the row's sum, the
   4 multipliers and the 4 VRSHL counts 31 - shift, per-tensor scales repeated (as constants of the loop they left
   GCC 12 no registers for the pair's asm); one pointer walks it); rows: the output channels; k: the row length;
   dbl: the double rounding; zp: the output zero point; lo, hi: the clamp. */
typedef struct {
  const int32_t *q;
  int32_t rows, k, dbl, zp, lo, hi;
} qc_mve_conv_params;

/* A block's accumulator starts, multipliers and VRSHL counts 31 - shift, from q (after its weights). */
QC_MVE_INLINE const int32_t *qc_mve_conv_scales(const int32_t *q, int32x4_t *start, int32x4_t *m, int32x4_t *s1) {
  *start = vldrwq_s32(q);
  *m = vldrwq_s32(q + 4);
  *s1 = vldrwq_s32(q + 8);
  return q + 12;
}

/* A block's sums v (4 output channels) requantized (qc_mve_scale32: exact for shifts 32..62) and clamped, stored
   at y (int8, or int16 when out16; the first `left` channels only when left < 4). */
QC_MVE_INLINE void qc_mve_conv_store(int32x4_t v, int32x4_t m, int32x4_t s1, void *y, const qc_mve_conv_params *P,
                                     int32_t left, int out16) {
  const int32x4_t r = vmaxq_s32(vminq_s32(qc_mve_scale32(v, m, s1, P->zp, P->dbl), vdupq_n_s32(P->hi)),
                                vdupq_n_s32(P->lo));
  if (left < 4) {
    const mve_pred16_t p = vctp32q((uint32_t)left);
    if (out16) {
      vstrhq_p_s32((int16_t *)y, r, p);
    } else {
      vstrbq_p_s32((int8_t *)y, r, p);
    }
  } else if (out16) {
    vstrhq_s32((int16_t *)y, r);
  } else {
    vstrbq_s32((int8_t *)y, r);
  }
}

/* A full block's int8 outputs of a pixel pair: the sums va (pixel 0) and vb (pixel 1) requantized
   (qc_mve_floor32: |r| <= 2^30 + 1) and narrowed with saturation into the even and odd int16 lanes of one vector
   (channel c of pixel 0, of pixel 1, c + 1, ...), plus zp saturating, clamped, narrowed to int8: the int32 clamp of
   r + zp, as |zp| <= 32640 (checked at generation time: a lane that saturated at +-2^15 stays past the int8 range
   on its side) and lo, hi lie in int8; one scatter store of the 8 bytes at y + off (qc_mve_pair_offsets). */
QC_MVE_INLINE void qc_mve_conv_store_pair8(int32x4_t va, int32x4_t vb, int32x4_t m, int32x4_t s1, int8_t *y,
                                           uint16x8_t off, const qc_mve_conv_params *P) {
  /* VQMOVNB into va (dead): GCC copies a register that is still needed before the instruction writes it */
  int16x8_t h = vqmovnbq_s32(vreinterpretq_s16_s32(va), qc_mve_floor32(va, m, s1, P->dbl));
  h = vqmovntq_s32(h, qc_mve_floor32(vb, m, s1, P->dbl));
  const int16x8_t z = P->zp ? vqaddq_n_s16(h, (int16_t)P->zp) : h;
  if (P->lo > -128 || P->hi < 127) {
    vstrbq_scatter_offset_s16(y, off, vminq_s16(vmaxq_s16(z, vdupq_n_s16((int16_t)P->lo)),
                                                vdupq_n_s16((int16_t)P->hi)));
  } else {  /* into h, dead when zp != 0 (as above) */
    vstrbq_scatter_offset_s16(y, off, vreinterpretq_s16_s8(vqmovnbq_s16(vreinterpretq_s8_s16(h), z)));
  }
}

/* The byte offsets of qc_mve_conv_store_pair8's lanes: channel i / 2 of pixel i % 2, pixel 1 at ys. */
QC_MVE_INLINE uint16x8_t qc_mve_pair_offsets(int32_t ys) {
  const uint16x8_t i = vidupq_n_u16(0, 1);
  return vaddq_u16(vshrq_n_u16(i, 1), vmulq_n_u16(vandq_u16(i, vdupq_n_u16(1)), (uint16_t)ys));
}

/* Output pixels in pairs: per block of 4 output channels one asm statement walks the block's part of the stream;
   the 8 sums (from 0: VMLADAV for the first chunk; the 4 accumulator starts are added to their lanes after it)
   live in the even core registers (VMLADAVA's accumulators:
   constraint Te, lr included; from C, GCC 12 spills them); per 16-input chunk the pair's inputs, then per row its
   16 weights (two Q registers in turn) and 2 VMLADAVA; the last partial chunk's inputs loaded tail-predicated (VCTP
   of the tail length, set first: zeros past k; the weights are zeros there; VPR is not changed by the unpredicated
   instructions in between; MOV, not MOVS: the flags GCC keeps across the asm stay); the sums moved into two
   vectors. The int32 sums wrap like the starts (modulo 2^32): the exact sum fits int32 (range analysis).
   Every chunk is unrolled (a loop counter would need a 13th core register, which GCC does not have where it keeps
   a frame pointer: -Os), selected by assembler directives on the constant chunk count: rows of at most 8 chunks
   (the tail included) read the inputs at immediate offsets (< 128; `.if`), rows of up to QC_MVE_PW_MAX chunks
   advance the input pointers (`.rept`; the caller's copies stay). GCC estimates an asm statement's length by its
   lines, where a `.rept` body counts once: the statement carries blank lines for the copies it may hold, so that
   the estimate is never short (a branch over it is never out of range). Longer rows, rows whose length GCC does
   not see as a constant (-Og), and every row at -Os take one asm statement per chunk (measured: GCC 12's register
   allocator finds no registers for the unrolled forms in some -Os and -O1 steps: "impossible constraints"). The
   input pointers are in-out operands of the `.rept` form, which advances them: the allocator then copies them,
   rather than failing where the caller keeps them (found building ResNet-8 and DS-CNN at -Og/-Os/-O1); inputs of
   the `.if` form, which reads them at immediate offsets (no copies per block; the bench models build at -O1, -O2,
   -O3, -Os and -Og). */
#define QC_MVE_PW_ROW(op, w, s, t)                                                                                \
  "vldrb.8 %q[" w "], [%[q]], #16\n\t"                                                                           \
  op " %[" s "], %q[xa], %q[" w "]\n\t" op " %[" t "], %q[xb], %q[" w "]\n\t"
#define QC_MVE_PW_ROWS_OP(op)                                                                                    \
  QC_MVE_PW_ROW(op, "w0", "s0", "t0") QC_MVE_PW_ROW(op, "w1", "s1", "t1") QC_MVE_PW_ROW(op, "w0", "s2", "t2")      \
  QC_MVE_PW_ROW(op, "w1", "s3", "t3")
#define QC_MVE_PW_ROWS QC_MVE_PW_ROWS_OP("vmladava.s8")
/* the first chunk's (VMLADAV: the sums start at 0; the caller adds the accumulator starts to the lanes) */
#define QC_MVE_PW_ROWS_FIRST QC_MVE_PW_ROWS_OP("vmladav.s8")
/* chunk c < 8 at byte offset 16 c of the inputs, when the row has more than c whole chunks */
#define QC_MVE_PW_CHUNK_ROWS(c, rows)                                                                            \
  ".if %c[full] > " #c "\n\t"                                                                                    \
  "vldrb.8 %q[xa], [%[x0], #" #c "*16]\n\tvldrb.8 %q[xb], [%[x1], #" #c "*16]\n\t" rows ".endif\n\t"
#define QC_MVE_PW_CHUNK(c) QC_MVE_PW_CHUNK_ROWS(c, QC_MVE_PW_ROWS)
#define QC_MVE_PW_CHUNKS                                                                                         \
  QC_MVE_PW_CHUNK_ROWS(0, QC_MVE_PW_ROWS_FIRST) QC_MVE_PW_CHUNK(1) QC_MVE_PW_CHUNK(2) QC_MVE_PW_CHUNK(3) QC_MVE_PW_CHUNK(4)                   \
  QC_MVE_PW_CHUNK(5) QC_MVE_PW_CHUNK(6) QC_MVE_PW_CHUNK(7)
/* a chunk from the inputs' pointers, advancing them */
#define QC_MVE_PW_LOAD "vldrb.8 %q[xa], [%[x0]], #16\n\tvldrb.8 %q[xb], [%[x1]], #16\n\t"
#define QC_MVE_PW_NEXT QC_MVE_PW_LOAD QC_MVE_PW_ROWS
/* the tail chunk (when there is one) at the inputs' byte offset toff, predicated */
#define QC_MVE_PW_TAIL                                                                                           \
  ".if %c[tail]\n\t"                                                                                             \
  "vpstt\n\tvldrbt.8 %q[xa], [%[x0], %[toff]]\n\tvldrbt.8 %q[xb], [%[x1], %[toff]]\n\t" QC_MVE_PW_ROWS ".endif\n\t"
/* the predicate of the tail (first: t0 is free) */
#define QC_MVE_PW_VCTP ".if %c[tail]\n\tmov %[t0], %[tail]\n\tvctp.8 %[t0]\n\t.endif\n\t"
/* the sums from 0 (the chunk loop of the other forms; MOV, not MOVS, as above) */
#define QC_MVE_PW_ZERO                                                                                           \
  "mov %[s0], #0\n\tmov %[s1], #0\n\tmov %[s2], #0\n\tmov %[s3], #0\n\t"                                           \
  "mov %[t0], #0\n\tmov %[t1], #0\n\tmov %[t2], #0\n\tmov %[t3], #0\n\t"
#define QC_MVE_PW_LANES                                                                                          \
  "vmov %q[va][2], %q[va][0], %[s0], %[s2]\n\tvmov %q[va][3], %q[va][1], %[s1], %[s3]\n\t"                        \
  "vmov %q[vb][2], %q[vb][0], %[t0], %[t2]\n\tvmov %q[vb][3], %q[vb][1], %[t1], %[t3]"
/* the longest row (in chunks) of the `.rept` form, and the blank lines of its other copies (14 lines a chunk) */
#define QC_MVE_PW_MAX 40
#ifdef __OPTIMIZE_SIZE__ /* (see above) */
#define QC_MVE_PW_UNROLL 0
#else
#define QC_MVE_PW_UNROLL 1
#endif
#define QC_MVE_NL14 "\n\n\n\n\n\n\n\n\n\n\n\n\n\n"
#define QC_MVE_NL70 QC_MVE_NL14 QC_MVE_NL14 QC_MVE_NL14 QC_MVE_NL14 QC_MVE_NL14
#define QC_MVE_PW_PAD QC_MVE_NL70 QC_MVE_NL70 QC_MVE_NL70 QC_MVE_NL70 QC_MVE_NL70 QC_MVE_NL70 QC_MVE_NL70 QC_MVE_NL70
#define QC_MVE_PW_SUMS                                                                                           \
  [s0] "=&Te"(s0), [s1] "=&Te"(s1), [s2] "=&Te"(s2), [s3] "=&Te"(s3), [t0] "=&Te"(t0), [t1] "=&Te"(t1),             \
      [t2] "=&Te"(t2), [t3] "=&Te"(t3), [q] "+r"(q), [w0] "=&w"(w0), [w1] "=&w"(w1), [va] "=&w"(va), [vb] "=&w"(vb)
#define QC_MVE_PW_SUMS_ACC                                                                                       \
  [s0] "+&Te"(s0), [s1] "+&Te"(s1), [s2] "+&Te"(s2), [s3] "+&Te"(s3), [t0] "+&Te"(t0), [t1] "+&Te"(t1),             \
      [t2] "+&Te"(t2), [t3] "+&Te"(t3), [q] "+r"(q), [w0] "=&w"(w0), [w1] "=&w"(w1)
#define QC_MVE_PW_SUMS_IN QC_MVE_PW_SUMS_ACC, [xa] "=&w"(xa), [xb] "=&w"(xb)

/* The sums of one block of 4 rows for the pixels at x0, x1 (k inputs each) into va, vb; q advanced past the
   block's starts and chunks. */
QC_MVE_INLINE const int32_t *qc_mve_pw_block(const int32_t *q, const int8_t *x0, const int8_t *x1, int8x16_t xa,
                                             int8x16_t xb, int32_t k, int32x4_t *va_out, int32x4_t *vb_out) {
  int32_t s0, s1, s2, s3, t0, t1, t2, t3;
  int8x16_t w0, w1;
  int32x4_t va, vb;
  const int32_t full = k / 16, tail = k % 16;
  if (k <= 16) {  /* the pair's inputs were loaded once, before the blocks */
    __asm__(QC_MVE_PW_ROWS_FIRST QC_MVE_PW_LANES : QC_MVE_PW_SUMS : [xa] "w"(xa), [xb] "w"(xb) : "memory");
  } else if (QC_MVE_PW_UNROLL && __builtin_constant_p(k) && full + (tail ? 1 : 0) <= 8) {
    __asm__(QC_MVE_PW_VCTP QC_MVE_PW_CHUNKS QC_MVE_PW_TAIL QC_MVE_PW_LANES
            : QC_MVE_PW_SUMS, [xa] "=&w"(xa), [xb] "=&w"(xb)
            : [full] "n"(full), [tail] "n"(tail), [toff] "n"(full * 16), [x0] "r"(x0), [x1] "r"(x1)
            : "memory", "p0");
  } else if (QC_MVE_PW_UNROLL && __builtin_constant_p(k) && full <= QC_MVE_PW_MAX) {
    __asm__(QC_MVE_PW_VCTP QC_MVE_PW_LOAD QC_MVE_PW_ROWS_FIRST ".rept %c[full] - 1\n\t" QC_MVE_PW_NEXT ".endr\n\t"
            QC_MVE_PW_TAIL
            QC_MVE_PW_LANES QC_MVE_PW_PAD
            : QC_MVE_PW_SUMS, [xa] "=&w"(xa), [xb] "=&w"(xb), [x0] "+r"(x0), [x1] "+r"(x1)
            : [full] "n"(full), [tail] "n"(tail), [toff] "n"(0)
            : "memory", "p0");
  } else {
    __asm__(QC_MVE_PW_ZERO
            : [s0] "=&Te"(s0), [s1] "=&Te"(s1), [s2] "=&Te"(s2), [s3] "=&Te"(s3), [t0] "=&Te"(t0), [t1] "=&Te"(t1),
              [t2] "=&Te"(t2), [t3] "=&Te"(t3), [q] "+r"(q)
            :
            : "memory");
    for (int32_t c = 0; c < full; ++c) {
      __asm__(QC_MVE_PW_NEXT : QC_MVE_PW_SUMS_IN, [x0] "+r"(x0), [x1] "+r"(x1) : : "memory");
    }
    if (tail) {  /* the tail's inputs loaded in C (zeros past k): no core registers for x0, x1 and the predicate */
      const mve_pred16_t pt = vctp8q((uint32_t)tail);
      xa = vldrbq_z_s8(x0, pt);
      xb = vldrbq_z_s8(x1, pt);
      __asm__(QC_MVE_PW_ROWS : QC_MVE_PW_SUMS_ACC : [xa] "w"(xa), [xb] "w"(xb) : "memory");
    }
    __asm__(QC_MVE_PW_LANES : [va] "=&w"(va), [vb] "=&w"(vb)
            : [s0] "Te"(s0), [s1] "Te"(s1), [s2] "Te"(s2), [s3] "Te"(s3), [t0] "Te"(t0), [t1] "Te"(t1),
              [t2] "Te"(t2), [t3] "Te"(t3));
  }
  *va_out = va;
  *vb_out = vb;
  return q;
}

/* Every output channel of the pixels at x0 and x1 (k inputs each), requantized and stored at y and y + ys (int8, or
   int16 when out16); x1 may be x0 with ys 0 (a last odd pixel: stored twice). The rows after the last whole block
   of 4: a block of zero rows in the stream, stored predicated. */
QC_MVE_INLINE const int32_t *qc_mve_pw_rows(const qc_mve_conv_params *P, const int32_t *q, const int8_t *x0,
                                            const int8_t *x1, int8x16_t xa, int8x16_t xb, int32_t k, char *y,
                                            int32_t ys, uint16x8_t off, int32_t left, int out16) {
  int32x4_t va, vb, start, m, s1;
  q = qc_mve_conv_scales(qc_mve_pw_block(q, x0, x1, xa, xb, k, &va, &vb), &start, &m, &s1);
  va = vaddq_s32(va, start);
  vb = vaddq_s32(vb, start);
  if (!out16 && left == 4) {
    qc_mve_conv_store_pair8(va, vb, m, s1, (int8_t *)y, off, P);
  } else {
    qc_mve_conv_store(va, m, s1, y, P, left, out16);
    qc_mve_conv_store(vb, m, s1, y + ys, P, left, out16);
  }
  return q;
}

/* The most blocks of 4 rows times 16-byte chunks a row whose loop qc_mve_conv_2px unrolls. */
#define QC_MVE_PAIR_UNROLL 4

/* qc_mve_conv_2px with the scatter offsets off = qc_mve_pair_offsets(ys) (the callers over many pairs make them
   once: GCC recomputes them per pair otherwise). */
QC_MVE_INLINE void qc_mve_conv_pair(const qc_mve_conv_params *P, const int8_t *x0, const int8_t *x1, void *y,
                                    int32_t ys, uint16x8_t off, int out16) {
  const int32_t k = P->k, size = out16 ? 2 : 1, blocks = P->rows / 4;
  const int32_t *q = P->q;
  int8x16_t xa = vuninitializedq_s8(), xb = xa;
  if (k <= 16) {
    const mve_pred16_t pk = vctp8q((uint32_t)k);
    xa = k < 16 ? vldrbq_z_s8(x0, pk) : vldrbq_s8(x0);
    xb = k < 16 ? vldrbq_z_s8(x1, pk) : vldrbq_s8(x1);
  }
  char *yb = (char *)y;
  if (blocks * ((k + 15) / 16) <= QC_MVE_PAIR_UNROLL) {  /* (measured: the loop's counter and constants reloaded) */
#pragma GCC unroll 8
    for (int32_t i = 0; i < blocks; ++i, yb += 4 * size) {
      q = qc_mve_pw_rows(P, q, x0, x1, xa, xb, k, yb, ys * size, off, 4, out16);
    }
  } else {
    for (int32_t i = 0; i < blocks; ++i, yb += 4 * size) {
      q = qc_mve_pw_rows(P, q, x0, x1, xa, xb, k, yb, ys * size, off, 4, out16);
    }
  }
  if (P->rows % 4) {
    qc_mve_pw_rows(P, q, x0, x1, xa, xb, k, yb, ys * size, off, P->rows % 4, out16);
  }
}

QC_MVE_INLINE void qc_mve_conv_2px(const qc_mve_conv_params *P, const int8_t *x0, const int8_t *x1, void *y,
                                   int32_t ys, int out16) {
  qc_mve_conv_pair(P, x0, x1, y, ys, qc_mve_pair_offsets(ys), out16);
}

QC_MVE_INLINE void qc_mve_conv_2px_s8(const qc_mve_conv_params *P, const int8_t *x0, const int8_t *x1, int8_t *y,
                                      int32_t ys) {
  qc_mve_conv_2px(P, x0, x1, y, ys, 0);
}

QC_MVE_INLINE void qc_mve_conv_2px_s16(const qc_mve_conv_params *P, const int8_t *x0, const int8_t *x1, int16_t *y,
                                       int32_t ys) {
  qc_mve_conv_2px(P, x0, x1, y, ys, 1);
}

/* One output pixel: per block of 4 rows one asm statement, the 4 sums in even core registers (as above, one input
   vector per chunk), the first chunk, the other whole chunks in a loop (WLS / LE: lr is free here), then the tail
   chunk predicated. */
#define QC_MVE_PX_ROW(op, w, s) "vldrb.8 %q[" w "], [%[q]], #16\n\t" op " %[" s "], %q[xa], %q[" w "]\n\t"
#define QC_MVE_PX_ROWS_OP(op)                                                                                    \
  QC_MVE_PX_ROW(op, "w0", "s0") QC_MVE_PX_ROW(op, "w1", "s1") QC_MVE_PX_ROW(op, "w0", "s2") QC_MVE_PX_ROW(op, "w1", "s3")
#define QC_MVE_PX_ROWS QC_MVE_PX_ROWS_OP("vmladava.s8")
/* the first chunk (VMLADAV: from 0), then the other whole chunks in a loop (WLS: none when more is 0) */
#define QC_MVE_PX_FIRST "vldrb.8 %q[xa], [%[x0]], #16\n\t" QC_MVE_PX_ROWS_OP("vmladav.s8")
#define QC_MVE_PX_LOOP                                                                                           \
  "wls lr, %[more], 2f\n1:\n\tvldrb.8 %q[xa], [%[x0]], #16\n\t" QC_MVE_PX_ROWS "le lr, 1b\n2:\n\t"
#define QC_MVE_PX_TAIL "vctp.8 %[tail]\n\tvpst\n\tvldrbt.8 %q[xa], [%[x0]]\n\t" QC_MVE_PX_ROWS
#define QC_MVE_PX_LANES "vmov %q[va][2], %q[va][0], %[s0], %[s2]\n\tvmov %q[va][3], %q[va][1], %[s1], %[s3]"
#define QC_MVE_PX_OPERANDS                                                                                       \
  [s0] "=&Te"(s0), [s1] "=&Te"(s1), [s2] "=&Te"(s2), [s3] "=&Te"(s3), [q] "+r"(q), [w0] "=&w"(w0), [w1] "=&w"(w1), \
      [va] "=&w"(va), [xa] "+&w"(xa), [x0] "+r"(x0)
#define QC_MVE_PX_INPUTS [more] "r"(full - 1), [tail] "r"(tail)

/* The sums of one block of 4 rows for the pixel at x0 into the returned vector; q advanced past the block's starts
   and chunks. */
QC_MVE_INLINE const int32_t *qc_mve_px_block(const int32_t *q, const int8_t *x0, int8x16_t xa, int32_t k,
                                             int32x4_t *v_out) {
  int32_t s0, s1, s2, s3;
  int8x16_t w0, w1;
  int32x4_t va;
  const int32_t full = k / 16, tail = k % 16;
  if (k <= 16) {  /* the input was loaded once, before the blocks */
    __asm__(QC_MVE_PX_ROWS_OP("vmladav.s8") QC_MVE_PX_LANES : QC_MVE_PX_OPERANDS : QC_MVE_PX_INPUTS : "memory");
  } else if (tail) {
    __asm__(QC_MVE_PX_FIRST QC_MVE_PX_LOOP QC_MVE_PX_TAIL QC_MVE_PX_LANES
            : QC_MVE_PX_OPERANDS : QC_MVE_PX_INPUTS : "memory", "lr", "p0");
  } else {
    __asm__(QC_MVE_PX_FIRST QC_MVE_PX_LOOP QC_MVE_PX_LANES : QC_MVE_PX_OPERANDS : QC_MVE_PX_INPUTS : "memory", "lr");
  }
  *v_out = va;
  return q;
}

/* Every output channel of the pixel at x (k inputs), requantized and stored at y (int8, or int16 when out16). */
QC_MVE_INLINE const int32_t *qc_mve_px_rows(const qc_mve_conv_params *P, const int32_t *q, const int8_t *x,
                                            int8x16_t xa, int32_t k, char *y, int32_t left, int out16) {
  int32x4_t v, start, m, s1;
  q = qc_mve_conv_scales(qc_mve_px_block(q, x, xa, k, &v), &start, &m, &s1);
  v = vaddq_s32(v, start);
  qc_mve_conv_store(v, m, s1, y, P, left, out16);
  return q;
}

QC_MVE_INLINE void qc_mve_conv_1px(const qc_mve_conv_params *P, const int8_t *x, void *y, int out16) {
  const int32_t k = P->k, size = out16 ? 2 : 1, blocks = P->rows / 4;
  const int32_t *q = P->q;
  int8x16_t xa = vuninitializedq_s8();
  if (k <= 16) {
    xa = k < 16 ? vldrbq_z_s8(x, vctp8q((uint32_t)k)) : vldrbq_s8(x);
  }
  char *yb = (char *)y;
  for (int32_t i = 0; i < blocks; ++i, yb += 4 * size) {
    q = qc_mve_px_rows(P, q, x, xa, k, yb, 4, out16);
  }
  if (P->rows % 4) {
    qc_mve_px_rows(P, q, x, xa, k, yb, P->rows % 4, out16);
  }
}

QC_MVE_INLINE void qc_mve_conv_1px_s8(const qc_mve_conv_params *P, const int8_t *x, int8_t *y) {
  qc_mve_conv_1px(P, x, y, 0);
}

QC_MVE_INLINE void qc_mve_conv_1px_s16(const qc_mve_conv_params *P, const int8_t *x, int16_t *y) {
  qc_mve_conv_1px(P, x, y, 1);
}

/* Every output channel of `pixels` output pixels whose k inputs follow each other from x (pixel i at x + i k: a 1x1
   convolution at stride 1), in pairs (a last odd pixel by qc_mve_conv_1px: paired with itself, GCC 12 finds no
   registers for the in-out input pointers of the long rows' asm), stored at y (pixel i at + i rows). */
QC_MVE_INLINE void qc_mve_conv_run(const qc_mve_conv_params *P, const int8_t *x, void *y, int32_t pixels,
                                   int out16) {
  const int32_t k = P->k, ys = P->rows, step = 2 * ys * (out16 ? 2 : 1);
  const uint16x8_t off = qc_mve_pair_offsets(ys);
  char *yb = (char *)y;
  for (int32_t i = 1; i < pixels; i += 2, x += 2 * k, yb += step) {
    qc_mve_conv_pair(P, x, x + k, yb, ys, off, out16);
  }
  if (pixels % 2) {
    qc_mve_conv_1px(P, x, yb, out16);
  }
}

QC_MVE_INLINE void qc_mve_conv_run_s8(const qc_mve_conv_params *P, const int8_t *x, int8_t *y, int32_t pixels) {
  qc_mve_conv_run(P, x, y, pixels, 0);
}

QC_MVE_INLINE void qc_mve_conv_run_s16(const qc_mve_conv_params *P, const int8_t *x, int16_t *y, int32_t pixels) {
  qc_mve_conv_run(P, x, y, pixels, 1);
}

/* The geometry of qc_mve_conv_rows (dilation 1): batches n, input ih x iw x c, output oh x ow, kernel kh x kw,
   stride sy, sx, top and left padding pt, pl; the scratch's rows of cols = (ow - 1) sx + kw pixels; pad: the value
   a tap outside the input reads. */
typedef struct {
  int32_t n, ih, iw, c, oh, ow, kh, kw, sy, sx, pt, pl, cols, pad;
} qc_mve_conv_geo;

/* Every output pixel of a convolution whose windows' rows are runs of kw c <= 16 inputs, one output row at a time:
   its kh input rows copied to `scratch` with the padding around them (rows of cols pixels: pl pixels of pad, the
   input row, pad up to cols; a row outside the input all pad), so that every window is inside; then per pixel pair
   the two windows gathered from there (qc_mve_gather_rows by whole 16-byte loads: a run's 16 bytes end at most
   16 - kw c bytes past the last row, inside the windows that follow the rows; into the 2 (k + 16) bytes after
   the rows) for qc_mve_conv_2px, a last odd pixel of a row by qc_mve_conv_1px. The outputs at y (pixel i at
   + i rows). */
QC_MVE_INLINE void qc_mve_conv_rows(const qc_mve_conv_params *P, const qc_mve_conv_geo *G, const int8_t *x, void *y,
                                    int8_t *scratch, int out16) {
  const int32_t c = G->c, run = G->kw * c, row = G->cols * c, ys = P->rows * (out16 ? 2 : 1);
  const int32_t left = G->pl * c, inner = row - left < G->iw * c ? row - left : G->iw * c, step = G->sx * c;
  int8_t *const w0 = scratch + G->kh * row, *const w1 = w0 + P->k + 16;
  const uint16x8_t off = qc_mve_pair_offsets(P->rows);
  for (int32_t ky = 0; ky < G->kh; ++ky) {  /* the padding columns (the rows' copies leave them) */
    qc_mve_copy8(scratch + ky * row, NULL, (int8_t)G->pad, left);
    qc_mve_copy8(scratch + ky * row + left + inner, NULL, (int8_t)G->pad, row - left - inner);
  }
  char *yb = (char *)y;
  for (int32_t n = 0; n < G->n; ++n) {
    const int8_t *xn = x + n * G->ih * G->iw * c;
    for (int32_t oy = 0; oy < G->oh; ++oy) {
      for (int32_t ky = 0; ky < G->kh; ++ky) {
        const int32_t iy = oy * G->sy - G->pt + ky;
        qc_mve_copy8(scratch + ky * row + left, iy >= 0 && iy < G->ih ? xn + iy * G->iw * c : NULL, (int8_t)G->pad,
                     inner);
      }
      const int8_t *win = scratch;
      for (int32_t ox = 1; ox < G->ow; ox += 2, win += 2 * step, yb += 2 * ys) {
        qc_mve_gather_rows(w0, win, row, run, G->kh);
        qc_mve_gather_rows(w1, win + step, row, run, G->kh);
        qc_mve_conv_pair(P, w0, w1, yb, P->rows, off, out16);
      }
      if (G->ow % 2) {
        qc_mve_gather_rows(w0, win, row, run, G->kh);
        qc_mve_conv_1px(P, w0, yb, out16);
        yb += ys;
      }
    }
  }
}

QC_MVE_INLINE void qc_mve_conv_rows_s8(const qc_mve_conv_params *P, const qc_mve_conv_geo *G, const int8_t *x,
                                       int8_t *y, int8_t *scratch) {
  qc_mve_conv_rows(P, G, x, y, scratch, 0);
}

QC_MVE_INLINE void qc_mve_conv_rows_s16(const qc_mve_conv_params *P, const qc_mve_conv_geo *G, const int8_t *x,
                                        int16_t *y, int8_t *scratch) {
  qc_mve_conv_rows(P, G, x, y, scratch, 1);
}

/* ---- dot products of int8 rows (the step adds the bias, subtracts the zero-point terms, requantizes) ---- */

/* The sum of a[i] * b[i], i < n (exact: |sum| < 2^14 n <= 2^30 for n <= 65535). */
QC_MVE_INLINE int32_t qc_mve_dot_s8(const int8_t *a, const int8_t *b, int32_t n) {
  const int32_t n16 = n / 16 * 16;
  int32_t s = 0;
  for (int32_t i = 0; i < n16; i += 16) {
    s = vmladavaq_s8(s, vldrbq_s8(a + i), vldrbq_s8(b + i));
  }
  if (n16 < n) {
    const mve_pred16_t p = vctp8q((uint32_t)(n - n16));
    s = vmladavaq_p_s8(s, vldrbq_z_s8(a + n16, p), vldrbq_z_s8(b + n16, p), p);
  }
  return s;
}

/* s[r] = qc_mve_dot_s8(a, w + r * n, n) for the 4 rows r < 4 (each input vector loaded once). */
QC_MVE_INLINE void qc_mve_dot_4rows_s8(const int8_t *a, const int8_t *w, int32_t n, int32_t *s) {
  const int32_t n16 = n / 16 * 16;
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int32_t i = 0; i < n16; i += 16) {
    const int8x16_t va = vldrbq_s8(a + i);
    s0 = vmladavaq_s8(s0, va, vldrbq_s8(w + i));
    s1 = vmladavaq_s8(s1, va, vldrbq_s8(w + n + i));
    s2 = vmladavaq_s8(s2, va, vldrbq_s8(w + 2 * n + i));
    s3 = vmladavaq_s8(s3, va, vldrbq_s8(w + 3 * n + i));
  }
  if (n16 < n) {
    const mve_pred16_t p = vctp8q((uint32_t)(n - n16));
    const int8x16_t va = vldrbq_z_s8(a + n16, p);
    s0 = vmladavaq_p_s8(s0, va, vldrbq_z_s8(w + n16, p), p);
    s1 = vmladavaq_p_s8(s1, va, vldrbq_z_s8(w + n + n16, p), p);
    s2 = vmladavaq_p_s8(s2, va, vldrbq_z_s8(w + 2 * n + n16, p), p);
    s3 = vmladavaq_p_s8(s3, va, vldrbq_z_s8(w + 3 * n + n16, p), p);
  }
  s[0] = s0;
  s[1] = s1;
  s[2] = s2;
  s[3] = s3;
}

/* ---- depthwise as int32 sums ---- */

/* One tap of 4 channels: a + x * w (sign-extending loads; part: the lanes off in p load zeros). */
QC_MVE_INLINE int32x4_t qc_mve_dw_tap4(int32x4_t a, const int8_t *x, const int8_t *w, int part, mve_pred16_t p) {
  const int32x4_t xv = part ? vldrbq_z_s32(x, p) : vldrbq_s32(x);
  const int32x4_t wv = part ? vldrbq_z_s32(w, p) : vldrbq_s32(w);
  return vaddq_s32(a, vmulq_s32(xv, wv));
}

/* Depthwise as int32 sums of 4 channels c.. (part: the `left` < 4 channels of the last group, loads and store
   predicated), their inputs of tap t at tab[t] + b + c, weights w + t * n + c, started at base + c; a pixel of 9
   taps unrolled. */
QC_MVE_INLINE void qc_mve_dw_s32_group(const qc_mve_dw_s32_params *P, const uintptr_t *tab, uintptr_t b, int32_t c,
                                       int32_t *acc, int part, int32_t left) {
  const int32_t n = P->n, taps = P->taps;
  const mve_pred16_t p = vctp32q((uint32_t)left);
  int32x4_t a = part ? vldrwq_z_s32(P->base + c, p) : vldrwq_s32(P->base + c);
  const int8_t *w = P->w + c;
  const uintptr_t bc = b + (uintptr_t)c;
  if (taps == 9) {
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[0] + bc), w, part, p);
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[1] + bc), w + n, part, p);
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[2] + bc), w + 2 * n, part, p);
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[3] + bc), w + 3 * n, part, p);
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[4] + bc), w + 4 * n, part, p);
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[5] + bc), w + 5 * n, part, p);
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[6] + bc), w + 6 * n, part, p);
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[7] + bc), w + 7 * n, part, p);
    a = qc_mve_dw_tap4(a, (const int8_t *)(tab[8] + bc), w + 8 * n, part, p);
  } else {
    for (int32_t t = 0; t < taps; ++t, w += n) {
      a = qc_mve_dw_tap4(a, (const int8_t *)(tab[t] + bc), w, part, p);
    }
  }
  if (part) {
    vstrwq_p_s32(acc + c, a, p);
  } else {
    vstrwq_s32(acc + c, a);
  }
}

/* Depthwise as int32 sums: per block of 16 channels, the even and odd channels' products widened as in the int8
   kernel into a[j] = channels j, j + 4, j + 8, j + 12 (VLD4 / VST4 of the starts and sums in channel order), then
   groups of 4 channels from widening loads (VLDRB.S32), the last one predicated. The sums wrap like int32 (vector
   adds): the exact sum fits int32 (range analysis), and so does every partial sum (checked at generation time). */
QC_MVE_INLINE void qc_mve_dw_s32(const qc_mve_dw_s32_params *P, const uintptr_t *tab, const int8_t *b, int32_t *acc,
                                 int32_t count, int32_t step) {
  const int32_t n = P->n, n16 = n / 16 * 16, n4 = n / 4 * 4, taps = P->taps;
  for (int32_t i = 0; i < count; ++i, b += step, acc += n) {
    for (int32_t c = 0; c < n16; c += 16) {
      int32x4x4_t s = vld4q_s32(P->base + c);
      int32x4_t a0 = s.val[0], a1 = s.val[1], a2 = s.val[2], a3 = s.val[3];
      const int8_t *w = P->w + c;
      for (int32_t t = 0; t < taps; ++t, w += n) {
        const int8x16_t xv = vldrbq_s8((const int8_t *)(tab[t] + (uintptr_t)b) + c), wv = vldrbq_s8(w);
        const int16x8_t pe = vmullbq_int_s8(xv, wv), po = vmulltq_int_s8(xv, wv);
        a0 = vaddq_s32(a0, vmovlbq_s16(pe));
        a2 = vaddq_s32(a2, vmovltq_s16(pe));
        a1 = vaddq_s32(a1, vmovlbq_s16(po));
        a3 = vaddq_s32(a3, vmovltq_s16(po));
      }
      s.val[0] = a0;
      s.val[1] = a1;
      s.val[2] = a2;
      s.val[3] = a3;
      vst4q_s32(acc + c, s);
    }
    for (int32_t c = n16; c < n4; c += 4) {
      qc_mve_dw_s32_group(P, tab, (uintptr_t)b, c, acc, 0, 4);
    }
    if (n4 < n) {
      qc_mve_dw_s32_group(P, tab, (uintptr_t)b, n4, acc, 1, n - n4);
    }
  }
}

#endif
