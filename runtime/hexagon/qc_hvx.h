/* qc_hvx.h: qcodegen's int8 kernels for Hexagon with HVX in 128-byte mode (target hexagon-hvx; clang 14's
 * hexagon_types.h / hexagon_protos.h intrinsics, -mhvx -mhvx-length=128b). Which kernel a step runs is decided at
 * generation time (qcodegen/kernels/hvx/; docs/targets.md "Hexagon"), its constants laid out then
 * (qcodegen/kernels/hvx/layouts.py).
 *
 * qc_hvx_conv_rq_s8 (a CONV2D pixel: VRMPY dot products, 32 weight rows a vector, requantized in vectors by
 * qc_hvx_requant and stored as int8) and qc_hvx_dw_rq_s8 (a whole DEPTHWISE_CONV2D image: int16 products
 * accumulated by VMPY into 64 lanes, requantized in vectors) take a constant params struct per step: not inlined
 * (one copy per model: weight layout "compact"), or their _inline forms, specialized per step by the compiler
 * (weight layout "fast": more .text, fewer instructions).
 * Both apply the exceptions to the single rounding to the requantized lanes (qc_hvx_except).
 * qc_hvx_dot_rows32_s8 (int32 sums, the step stores them) and qc_hvx_dw_tap_s8 (one depthwise tap of the portable
 * loops) serve the steps without an int8 requantized output. C99; -Wall -Wextra -Werror -pedantic clean.
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_HVX_H
#define QC_HVX_H

#include <hexagon_protos.h>
#include <hexagon_types.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__HVX__) || __HVX_LENGTH__ != 128
#error "qc_hvx.h needs HVX in 128-byte mode (-mhvx -mhvx-length=128b)"
#endif

/* A 128-byte vector at any address (vmemu): the weights and the sums are not 128-byte aligned. */
typedef HVX_UVector qc_hvx_uvec;

/* The int32 word of the n <= 4 int8 values x[0..n) (little-endian, the bytes past n zero): the four bytes one VRMPY
   lane multiplies by its four weights. */
static inline __attribute__((always_inline, unused)) int32_t qc_hvx_word(const int8_t *x, int32_t n) {
  uint32_t word = 0;
  for (int32_t i = 0; i < n; ++i) {
    word |= (uint32_t)(uint8_t)x[i] << (8 * i);
  }
  return (int32_t)word;
}

/* acc + the dot products of the word-splat row x (words whole words, then the word `last` when tail) with one
   block of rows32 weights w (lane l: the rows' word j at w[j]), by VRMPY: four int8 x int8 products into each int32
   lane per instruction. */
static inline __attribute__((always_inline, unused)) HVX_Vector qc_hvx_dot_block(HVX_Vector acc, const int8_t *x,
                                                                                 const qc_hvx_uvec *w, int32_t words,
                                                                                 int32_t tail, int32_t last) {
  for (int32_t j = 0; j < words; ++j) {
    int32_t xw;
    __builtin_memcpy(&xw, x + 4 * j, 4);
    acc = Q6_Vw_vrmpyacc_VwVbVb(acc, w[j], Q6_V_vsplat_R(xw));
  }
  if (tail) {
    acc = Q6_Vw_vrmpyacc_VwVbVb(acc, w[words], Q6_V_vsplat_R(last));
  }
  return acc;
}

/* s[r] = the sum of x[i] * w[r][i], i < k, for the 32 * blocks rows r of w, laid out as rows32 (wl): block b,
   word j is the vector whose lane l holds w[32 b + l][4 j .. 4 j + 3] (rows past the last and elements past k are
   zero). Each VRMPY adds to lane l the four products of the word j of x (splat to every lane) with those weights.
   Exact: a product is at most 2^14 in magnitude, a lane's sum at most 2^14 k < 2^31 for k <= 65,535 (the choice
   keeps k there). The last k % 4 elements of x are read byte by byte (never past x[k - 1]); their weights' missing
   bytes are zero, and so are the word's. */
static inline __attribute__((unused)) void qc_hvx_dot_rows32_s8(const int8_t *x, const int8_t *wl, int32_t k,
                                                                int32_t blocks, int32_t *s) {
  const int32_t words = k / 4, tail = k % 4, stride = (k + 3) / 4;
  const int32_t last = qc_hvx_word(x + 4 * words, tail);
  for (int32_t b = 0; b < blocks; ++b) {
    const qc_hvx_uvec *w = (const qc_hvx_uvec *)(const void *)(wl + (int32_t)128 * stride * b);
    *(qc_hvx_uvec *)(void *)(s + 32 * b) = qc_hvx_dot_block(Q6_V_vzero(), x, w, words, tail, last);
  }
}

/* The requantization of 32 int32 accumulators to int8 (TFLite's MultiplyByQuantizedMultiplier, TOSA RESCALE), in
   vectors: qc_hvx_scale (steps 1-3: y from acc, m and r), qc_hvx_requant (step 4).
   rq: the 2 vectors of the block's 32 channels (qcodegen/kernels/hvx/layouts.py rq32): m (the multiplier,
   0 <= m < 2^31) and r = shift - 31 (0 <= r <= 31). The result is clamp(y + zp, lo, hi) with, for the TOSA shift
   s = 31 + r and P = acc * m (exact, up to 2^62 in magnitude):
     rnd = 1: y = RDBPOT(SRDHM(acc, m), r) = floor((P + 2^(s-1) + [r > 0] (acc >= 0 ? 2^30 : -2^30)) / 2^s), TOSA
              DOUBLE_ROUND (= MultiplyByQuantizedMultiplier, docs/semantics.md §5.2); with r = 0 the single round
              at shift 31;
     rnd = 0: y = floor((P + 2^(s-1)) / 2^s), TOSA SINGLE_ROUND, for r >= 1.
   Why it is exact, per lane (ml = m mod 2^16 unsigned, mh = floor(m / 2^16), so P = acc mh 2^16 + acc ml):
   1. VMPYE gives e = floor(acc ml / 2^16). VMPYO:<<1:rnd:sat:shift adds acc mh and rounds at 2^15:
      h = floor((e + acc mh + 2^14) / 2^15) = floor((P - b + 2^30) / 2^31) with b = acc ml mod 2^16 (multiply the
      inner fraction by 2^16). N = P + 2^30 is b modulo 2^16 (acc mh 2^16 and 2^30 are multiples of 2^16), so
      N mod 2^31 >= b and removing b does not cross a multiple of 2^31: h = floor((P + 2^30) / 2^31) = SRDHM, for
      every int32 acc and m (the saturation needs acc = m = -2^31, excluded by m >= 0). Without rnd the same
      argument with N = P gives floor(P / 2^31).
   2. floor((P + R) / 2^s) with R a multiple of 2^31 is floor((floor(P / 2^31) + R / 2^31) / 2^r) (nested floors):
      rnd = 0 rounds h half up at r; rnd = 1 applies RDBPOT (h / 2^r rounded half away from zero), which
      docs/semantics.md §5.2 shows equals DOUBLE_ROUND (the sign of h replaces the sign of acc).
   3. Both are floor((h + c) / 2^r) with half = 2^(r - 1) (0 for r = 0) and c = half, except c = half - 1 where
      rnd = 1, r > 0 and h < 0 (a tie rounds down, away from zero). With p = 2^r (VASL of 1 by r; 2^31 is
      0x80000000 in the unsigned lane) and g = -1 where rnd = 1 and h < 0 (VASR of h by 31), else 0:
      c = (p + g) >> 1 (logical): p >> 1 = half for every r; (p - 1) >> 1 = 2^(r - 1) - 1 = half - 1 for r > 0,
      and 0 = half for r = 0 (no rounding step, nothing to adjust). c is in [0, 2^30].
   4. floor((h + c) / 2^r) is (h >> r) + (((h & (p - 1)) + c) >> r), the second shift logical:
      0 <= (h & (p - 1)) + c < 2^31 + 2^30, no int32 overflow (h + c could overflow).
   5. (qc_hvx_requant) y + zp saturates to int32 (VADD:sat) before the clamp to [lo, hi], a sub-range of int32: the
      clamp of the exact sum.
   Steps 3-4 derive p - 1 and c from r in 4 vector instructions (VASL, VSUB, VADD, VLSR; the VASR of h by 31 only
   for rnd = 1), so a block keeps 8 bytes per channel. */
static inline __attribute__((always_inline, unused)) HVX_Vector qc_hvx_scale(HVX_Vector acc, HVX_Vector m,
                                                                             HVX_Vector r, int32_t rnd) {
  const HVX_Vector e = Q6_Vw_vmpye_VwVuh(acc, m);
  const HVX_Vector h = rnd ? Q6_Vw_vmpyoacc_VwVwVh_s1_rnd_sat_shift(e, acc, m)
                           : Q6_Vw_vmpyoacc_VwVwVh_s1_sat_shift(e, acc, m);
  const HVX_Vector one = Q6_V_vsplat_R(1);
  const HVX_Vector p = Q6_Vw_vasl_VwVw(one, r), mask = Q6_Vw_vsub_VwVw(p, one);
  const HVX_Vector c = Q6_Vuw_vlsr_VuwR(rnd ? Q6_Vw_vadd_VwVw(p, Q6_Vw_vasr_VwR(h, 31)) : p, 1);
  const HVX_Vector frac = Q6_Vw_vlsr_VwVw(Q6_Vw_vadd_VwVw(Q6_V_vand_VV(h, mask), c), r);
  return Q6_Vw_vadd_VwVw(Q6_Vw_vasr_VwVw(h, r), frac);
}

/* qc_hvx_scale by the 2 vectors at rq (m, r), then clamp(y + zp, lo, hi) (step 5). */
static inline __attribute__((always_inline, unused)) HVX_Vector qc_hvx_requant(HVX_Vector acc, const int32_t *rq,
                                                                               int32_t rnd, HVX_Vector zp,
                                                                               HVX_Vector lo, HVX_Vector hi) {
  const qc_hvx_uvec *v = (const qc_hvx_uvec *)(const void *)rq;
  const HVX_Vector y = qc_hvx_scale(acc, v[0], v[1], rnd);
  return Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(Q6_Vw_vadd_VwVw_sat(y, zp), lo), hi);
}

/* Stores bytes 0 .. n - 1 of v at y (1 <= n <= 128): rotated by VLALIGN to y's offset in its aligned 128-byte
   vector, then written by one or two byte-masked aligned stores (vmem with a predicate of the bytes y .. y + n - 1
   in that vector and the next): only y[0 .. n) is written. */
static inline __attribute__((always_inline, unused)) void qc_hvx_store_bytes(HVX_Vector v, int8_t *y, int32_t n) {
  const int32_t off = (int32_t)((uintptr_t)y & 127u), end = off + n;
  HVX_Vector *base = (HVX_Vector *)(uintptr_t)((uintptr_t)y - (uintptr_t)off);
  const HVX_Vector r = Q6_V_vlalign_VVR(v, v, off);
  if (end <= 128) {
    Q6_vmem_QRIV(Q6_Q_and_QQn(Q6_Q_vsetq2_R(end), Q6_Q_vsetq_R(off)), base, r);
  } else {
    Q6_vmem_QRIV(Q6_Q_not_Q(Q6_Q_vsetq_R(off)), base, r);
    Q6_vmem_QRIV(Q6_Q_vsetq_R(end - 128), base + 1, r);
  }
}

/* Stores the int8 values of the halfword lanes 0 .. n - 1 of h (each within int8) at y: narrowed by VPACKE (the
   low byte of each halfword: lane i -> byte i). */
static inline __attribute__((always_inline, unused)) void qc_hvx_store_h8(HVX_Vector h, int8_t *y, int32_t n) {
  qc_hvx_store_bytes(Q6_Vb_vpacke_VhVh(Q6_V_vzero(), h), y, n);
}

/* The exceptions to the single rounding (docs/semantics.md §14.5; qcodegen/primitives/rescale.py exception_arrays):
   es[c] .. es[c + 1] - 1 index the channels ec, accumulators ea and output values ev (clamped) of the exceptions of
   channel c (epc: per channel; else es[0] .. es[1] - 1 are every channel's). es NULL: none. */
typedef struct {
  const int32_t *es, *ec, *ea, *ev;
  int32_t epc;
} qc_hvx_exceptions;

/* 0, 1, .., 31: the lanes' indices. */
static const int32_t qc_hvx_iota[32] __attribute__((aligned(128), unused)) = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

/* The first exception of channels c0 .. c1 - 1 and the one past their last (per tensor: all); equal when they have
   none. es is ascending. */
static inline __attribute__((always_inline, unused)) void qc_hvx_exception_range(const qc_hvx_exceptions *x,
                                                                                 int32_t c0, int32_t c1,
                                                                                 int32_t *e0, int32_t *e1) {
  *e0 = x->epc ? x->es[c0] : 0;
  *e1 = x->epc ? x->es[c1] : x->es[1];
}

/* q (the requantized int32 lanes) with the exceptions e0 .. e1 - 1 applied: where a lane's accumulator (acc) is an
   exception's and (per channel) its channel (chan: per lane) the exception's channel, the exception's value. In
   vectors: two compares, a predicate and and a VMUX per exception. */
static inline __attribute__((always_inline, unused)) HVX_Vector qc_hvx_except(const qc_hvx_exceptions *x,
                                                                              HVX_Vector acc, HVX_Vector chan,
                                                                              HVX_Vector q, int32_t e0, int32_t e1) {
  for (int32_t e = e0; e < e1; ++e) {
    HVX_VectorPred hit = Q6_Q_vcmp_eq_VwVw(acc, Q6_V_vsplat_R(x->ea[e]));
    if (x->epc) {
      hit = Q6_Q_and_QQ(hit, Q6_Q_vcmp_eq_VwVw(chan, Q6_V_vsplat_R(x->ec[e])));
    }
    q = Q6_V_vmux_QVV(hit, Q6_V_vsplat_R(x->ev[e]), q);
  }
  return q;
}

/* A CONV2D step with an int8 requantized output, for qc_hvx_conv_rq_s8: w (rows32), start (the accumulators'
   start per row, blocks x 32 int32: bias - izp x the row's sum, modulo 2^32), rq (qc_hvx_requant's 2 vectors
   per block, or one set for every block: rq_stride 0), k, blocks, rows, rnd, zp, lo, hi, and the exceptions to the
   single rounding (exc.es NULL: none). */
typedef struct {
  const int8_t *w;
  const int32_t *start;
  const int32_t *rq;
  int32_t k, blocks, rows, rq_stride, rnd, zp, lo, hi;
  qc_hvx_exceptions exc;
} qc_hvx_conv_params;

/* y[r] = the requantized start[r] + the sum of x[i] * w[r][i] (qc_hvx_dot_block, qc_hvx_requant) for the rows
   r < rows of one pixel, the exceptions of the block's channels applied (qc_hvx_except) before the store. The
   int32 lanes add modulo 2^32: the exact accumulator fits int32 (range analysis), so the modular sum is it. exc:
   the step has exceptions (exc.es not NULL); without, no code for them. */
static inline __attribute__((always_inline, unused)) void
qc_hvx_conv_rq_s8_core(const qc_hvx_conv_params *params, const int8_t *x, int8_t *y, int32_t exc) {
  const qc_hvx_conv_params copy = *params, *p = &copy; /* not reloaded after each store through the int8_t *y */
  const int32_t words = p->k / 4, tail = p->k % 4, stride = (p->k + 3) / 4;
  const int32_t last = qc_hvx_word(x + 4 * words, tail);
  const HVX_Vector zp = Q6_V_vsplat_R(p->zp), lo = Q6_V_vsplat_R(p->lo), hi = Q6_V_vsplat_R(p->hi);
  for (int32_t b = 0; b < p->blocks; ++b) {
    const qc_hvx_uvec *w = (const qc_hvx_uvec *)(const void *)(p->w + (int32_t)128 * stride * b);
    const HVX_Vector acc = qc_hvx_dot_block(*(const qc_hvx_uvec *)(const void *)(p->start + 32 * b), x, w, words,
                                            tail, last);
    const int32_t n = p->rows - 32 * b < 32 ? p->rows - 32 * b : 32;
    HVX_Vector q = qc_hvx_requant(acc, p->rq + p->rq_stride * b, p->rnd, zp, lo, hi);
    int32_t e0 = 0, e1 = 0;
    if (exc) {
      qc_hvx_exception_range(&p->exc, 32 * b, 32 * b + n, &e0, &e1);
    }
    if (e0 < e1) { /* lane l: channel 32 b + l */
      const HVX_Vector chan = Q6_Vw_vadd_VwVw(*(const HVX_Vector *)(const void *)qc_hvx_iota, Q6_V_vsplat_R(32 * b));
      q = qc_hvx_except(&p->exc, acc, chan, q, e0, e1);
    }
    qc_hvx_store_h8(Q6_Vh_vpacke_VwVw(Q6_V_vzero(), q), y + 32 * b, n);
  }
}

/* Specialized per step when inlined with constant params (weight layout "fast"). */
static inline __attribute__((always_inline, unused)) void
qc_hvx_conv_rq_s8_inline(const qc_hvx_conv_params *params, const int8_t *x, int8_t *y) {
  qc_hvx_conv_rq_s8_core(params, x, y, params->exc.es != NULL);
}

/* Shared by the steps of a model (weight layout "compact": one copy, a call per pixel): the steps without
   exceptions, and those with (the code of the exceptions only in this copy). */
static __attribute__((noinline, unused)) void qc_hvx_conv_rq_s8(const qc_hvx_conv_params *params,
                                                                const int8_t *x, int8_t *y) {
  qc_hvx_conv_rq_s8_core(params, x, y, 0);
}
static __attribute__((noinline, unused)) void qc_hvx_conv_rq_exc_s8(const qc_hvx_conv_params *params,
                                                                    const int8_t *x, int8_t *y) {
  qc_hvx_conv_rq_s8_core(params, x, y, 1);
}

/* acc[c] += (x[c] - izp) * w[c] for the n channels c of one depthwise tap (n a multiple of 32; acc: the pixel's
   int32 accumulators, as the portable loop keeps them). Per block of 64 channels (the last may be 32): the int8
   inputs and weights copied into a vector (never read past x[n - 1], w[n - 1]), widened in order to int16
   (VUNPACK: byte i -> halfword i, bytes 0..63 in the low vector), the product taken in int16 (VMPYI: exact, as
   |x - izp| <= 255 and |w| <= 128 give |product| <= 32,640 < 2^15), widened in order to int32 (halfword i -> word
   i: channels 0..31 in the low vector, 32..63 in the high one) and added to acc: the sums the portable loop makes,
   in the same order, so no other intermediate value than its own. */
static inline __attribute__((unused)) void qc_hvx_dw_tap_s8(int32_t *acc, const int8_t *x, const int8_t *w,
                                                            int32_t n, int32_t izp) {
  for (int32_t c0 = 0; c0 < n; c0 += 64) {
    const int32_t m = n - c0 < 64 ? n - c0 : 64;
    HVX_Vector xb = Q6_V_vzero(), wb = Q6_V_vzero();
    __builtin_memcpy(&xb, x + c0, (unsigned)m);
    __builtin_memcpy(&wb, w + c0, (unsigned)m);
    HVX_Vector xh = Q6_V_lo_W(Q6_Wh_vunpack_Vb(xb));
    if (izp) {
      xh = Q6_Vh_vsub_VhVh(xh, Q6_Vh_vsplat_R(izp));
    }
    const HVX_VectorPair p = Q6_Ww_vunpack_Vh(Q6_Vh_vmpyi_VhVh(xh, Q6_V_lo_W(Q6_Wh_vunpack_Vb(wb))));
    qc_hvx_uvec *a = (qc_hvx_uvec *)(void *)(acc + c0);
    a[0] = Q6_Vw_vadd_VwVw(a[0], Q6_V_lo_W(p));
    if (m == 64) {
      a[1] = Q6_Vw_vadd_VwVw(a[1], Q6_V_hi_W(p));
    }
  }
}

/* The vector pad with the int8 values of the pixels j < cnt of a group that are inside the input row (0 <= ix + j
   < iw) at bytes j n .. j n + n - 1 (x + off: pixel 0's channels, only read where inside). This and
   qc_hvx_load_tail_s8 fill a vector byte by byte through memory: the vector's first store (vmem) and the byte
   stores (memb) to the same bytes must not share a packet. clang 14 packed them together where it knew the count
   (inlined into the kernels specialized per step, or a constant count propagated into the out-of-line copy), and
   qemu-hexagon then kept the vector store's bytes: wrong vectors (qc_hvx_dw_rq_s8_core with 8 channels, one pixel
   a block; an element-wise step of one element). QC_HVX_PACKET_BARRIER (an empty asm statement with a memory
   clobber, which ends a packet) separates them. Both are rare paths (the borders, buffers of fewer than 128 bytes),
   not inlined. */
#define QC_HVX_PACKET_BARRIER() __asm__ __volatile__("" : : : "memory")
static __attribute__((noinline, unused)) HVX_Vector qc_hvx_gather_s8(const int8_t *x, int32_t off, int32_t ix,
                                                                     int32_t cnt, int32_t n, int32_t iw,
                                                                     HVX_Vector pad) {
  HVX_Vector v = pad;
  int8_t *b = (int8_t *)(void *)&v;
  QC_HVX_PACKET_BARRIER();
  for (int32_t j = 0; j < cnt; ++j) {
    for (int32_t c = 0; ix + j >= 0 && ix + j < iw && c < n; ++c) {
      b[j * n + c] = x[off + j * n + c];
    }
  }
  return v;
}

/* The first need bytes at x, then zeros. */
static __attribute__((noinline, unused)) HVX_Vector qc_hvx_load_tail_s8(const int8_t *x, int32_t need) {
  HVX_Vector v = Q6_V_vzero();
  int8_t *b = (int8_t *)(void *)&v;
  QC_HVX_PACKET_BARRIER();
  for (int32_t i = 0; i < need; ++i) {
    b[i] = x[i];
  }
  return v;
}

/* The 128 bytes at x + off of a buffer of size bytes when they are inside it; else its bytes from x + off to the
   end, then zeros: the buffer's last 128 bytes shifted down by VALIGN, or (a buffer of fewer than 128 bytes) the
   need <= size - off bytes at x + off copied. HVX loads whole vectors, and a load must not read past the buffer. */
static inline __attribute__((always_inline, unused)) HVX_Vector qc_hvx_load_s8(const int8_t *x, int32_t size,
                                                                               int32_t off, int32_t need) {
  if (size - off >= 128) {
    return *(const qc_hvx_uvec *)(const void *)(x + off);
  }
  if (size >= 128) {
    return Q6_V_valign_VVR(Q6_V_vzero(), *(const qc_hvx_uvec *)(const void *)(x + size - 128), 128 - (size - off));
  }
  return qc_hvx_load_tail_s8(x + off, need);
}

/* A DEPTHWISE_CONV2D step (multiplier 1) with int8 requantized outputs, for qc_hvx_dw_rq_s8
   (qcodegen/kernels/hvx/layouts.py dw_w16, dw_starts, dw_rq): w (per block of 64 lanes, per tap ky * kw + kx, the
   64 weights as int16, zeros past the last channel), start (per block, the biases of its 32 even lanes, then of
   its 32 odd ones), rq (per block, qc_hvx_requant's vectors of the even lanes, then of the odd ones; rq_stride 0:
   one pair for every block), the channels n, blocks, copies (pixels a block: 1, or 64 / n for n < 64 dividing 64
   with stride sx 1, one block, whose lanes hold the channels `copies` times), the window (kernel kh x kw over an
   ih x iw input, oh x ow outputs, strides sy, sx, dilations dy, dx, padding top pt, left pl), the input zero point
   izp, the value pad that padding taps read, rnd, zp, lo, hi of the requantization and its exceptions to the
   single rounding (exc.es NULL: none). */
typedef struct {
  const int16_t *w;
  const int32_t *start;
  const int32_t *rq;
  int32_t n, blocks, copies, rq_stride, kh, kw, ih, iw, oh, ow, sy, sx, dy, dx, pt, pl, izp, pad, rnd, zp, lo, hi;
  qc_hvx_exceptions exc;
} qc_hvx_dw_params;

/* The whole step over one image: per group of `copies` output pixels of a row (the last may be shorter) and
   block of 64 lanes, the int32 accumulators of the even lanes and of the odd ones (a vector pair) start from the
   biases, and each tap adds its products: the 64 int8 inputs (stride 1: the group's pixels' channels are
   contiguous; pad for a tap outside the input, gathered pixel by pixel for a group across the left or right
   border) widened in order to int16 (VUNPACK), minus izp (|x - izp| <= 255), times the int16 weights by VMPY:acc
   (Vxx.w += Vu.h * Vv.h: halfword 2i into the even vector's lane i, 2i + 1 into the odd one's), modulo 2^32 (the
   exact accumulator fits int32: range analysis). Both vectors are requantized (qc_hvx_requant), put back in lane
   order by VSHUFFE (low halfwords, even then odd) and the group's bytes stored (lanes past it are not); the
   exceptions of the block's channels are applied to the even and the odd lanes before (qc_hvx_except; exc: the
   step has exceptions, as qc_hvx_conv_rq_s8_core). */
static inline __attribute__((always_inline, unused)) void
qc_hvx_dw_rq_s8_core(const qc_hvx_dw_params *params, const int8_t *x, int8_t *y, int32_t exc) {
  const qc_hvx_dw_params copy = *params, *p = &copy; /* not reloaded after each store through the int8_t *y */
  const int32_t size = p->ih * p->iw * p->n, taps = p->kh * p->kw;
  const HVX_Vector zp = Q6_V_vsplat_R(p->zp), lo = Q6_V_vsplat_R(p->lo), hi = Q6_V_vsplat_R(p->hi);
  const HVX_Vector izp = Q6_Vh_vsplat_R(p->izp), pad = Q6_Vb_vsplat_R(p->pad);
  for (int32_t oy = 0; oy < p->oh; ++oy) {
    const int32_t iy0 = oy * p->sy - p->pt;
    for (int32_t ox = 0; ox < p->ow; ox += p->copies) {
      const int32_t ix0 = ox * p->sx - p->pl, cnt = p->ow - ox < p->copies ? p->ow - ox : p->copies;
      int8_t *yp = y + (oy * p->ow + ox) * p->n;
      for (int32_t b = 0; b < p->blocks; ++b) {
        const int32_t m = cnt * p->n - 64 * b < 64 ? cnt * p->n - 64 * b : 64;
        const qc_hvx_uvec *s = (const qc_hvx_uvec *)(const void *)(p->start + 64 * b);
        const qc_hvx_uvec *w = (const qc_hvx_uvec *)(const void *)(p->w + 64 * taps * b);
        HVX_VectorPair acc = Q6_W_vcombine_VV(s[1], s[0]);
        for (int32_t ky = 0; ky < p->kh; ++ky) {
          const int32_t iy = iy0 + ky * p->dy, row = iy >= 0 && iy < p->ih;
          for (int32_t kx = 0; kx < p->kw; ++kx) {
            const int32_t ix = ix0 + kx * p->dx, off = (iy * p->iw + ix) * p->n + 64 * b;
            HVX_Vector xv = pad;
            if (row && ix >= 0 && ix + cnt <= p->iw) {
              xv = qc_hvx_load_s8(x, size, off, m);
            } else if (row && p->copies > 1) { /* a group of pixels across the left or right border */
              xv = qc_hvx_gather_s8(x, off, ix, cnt, p->n, p->iw, pad);
            }
            const HVX_Vector xh = Q6_Vh_vsub_VhVh(Q6_V_lo_W(Q6_Wh_vunpack_Vb(xv)), izp);
            acc = Q6_Ww_vmpyacc_WwVhVh(acc, xh, w[ky * p->kw + kx]);
          }
        }
        const int32_t *rq = p->rq + p->rq_stride * b;
        HVX_Vector even = qc_hvx_requant(Q6_V_lo_W(acc), rq, p->rnd, zp, lo, hi);
        HVX_Vector odd = qc_hvx_requant(Q6_V_hi_W(acc), rq + 2 * 32, p->rnd, zp, lo, hi);
        int32_t e0 = 0, e1 = 0;
        if (exc) {
          qc_hvx_exception_range(&p->exc, p->copies > 1 ? 0 : 64 * b, p->copies > 1 ? p->n : 64 * b + m, &e0, &e1);
        }
        if (e0 < e1) {
          /* block lane j = 2 i (even vector lane i) or 2 i + 1 (odd): channel 64 b + j, or j mod n (copies, n a
             power of two); lanes past the last channel are not stored */
          const HVX_Vector two_i = Q6_Vw_vadd_VwVw(*(const HVX_Vector *)(const void *)qc_hvx_iota,
                                                   *(const HVX_Vector *)(const void *)qc_hvx_iota);
          const HVX_Vector mask = Q6_V_vsplat_R(p->copies > 1 ? p->n - 1 : -1);
          const HVX_Vector ce = Q6_V_vand_VV(Q6_Vw_vadd_VwVw(two_i, Q6_V_vsplat_R(64 * b)), mask);
          const HVX_Vector co = Q6_V_vand_VV(Q6_Vw_vadd_VwVw(two_i, Q6_V_vsplat_R(64 * b + 1)), mask);
          even = qc_hvx_except(&p->exc, Q6_V_lo_W(acc), ce, even, e0, e1);
          odd = qc_hvx_except(&p->exc, Q6_V_hi_W(acc), co, odd, e0, e1);
        }
        qc_hvx_store_h8(Q6_Vh_vshuffe_VhVh(odd, even), yp + 64 * b, m);
      }
    }
  }
}

/* Specialized per step when inlined with constant params (weight layout "fast"). */
static inline __attribute__((always_inline, unused)) void
qc_hvx_dw_rq_s8_inline(const qc_hvx_dw_params *params, const int8_t *x, int8_t *y) {
  qc_hvx_dw_rq_s8_core(params, x, y, params->exc.es != NULL);
}

/* Shared by the steps of a model (weight layout "compact": one copy, a call per image): without exceptions, and
   with them. */
static __attribute__((noinline, unused)) void qc_hvx_dw_rq_s8(const qc_hvx_dw_params *params,
                                                              const int8_t *x, int8_t *y) {
  qc_hvx_dw_rq_s8_core(params, x, y, 0);
}
static __attribute__((noinline, unused)) void qc_hvx_dw_rq_exc_s8(const qc_hvx_dw_params *params,
                                                                  const int8_t *x, int8_t *y) {
  qc_hvx_dw_rq_s8_core(params, x, y, 1);
}

#endif
