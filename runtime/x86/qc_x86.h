/* qc_x86.h: the common part of qcodegen's x86-64 kernels (AVX2; AVX-VNNI and AVX-512 VNNI where the compiler
 * flags enable them): vector loads, the VNNI instructions, the exact requantization of 8 int32 lanes (TOSA
 * apply_scale_32) and the stores of its results. The kernels are in qc_x86_conv.h (convolutions as dot products of
 * weight rows), qc_x86_dw.h (depthwise convolutions) and qc_x86_ew.h (element-wise chains). Which kernel a step
 * runs, the weight layout it reads and the constants it gets are decided at generation time
 * (qcodegen/kernels/x86/; docs/targets.md "x86").
 *
 * Form: header-only `static inline` kernels, called by the steps of a model with constant arguments (shapes,
 * zero points, the requantization of the step: parameter structs with constant members), so that the compiler
 * specializes and unrolls each one for its step (measured: docs/targets.md "x86: which form each kernel family
 * takes").
 *
 * One header for the three targets: the instruction set is chosen by the compiler's feature macros:
 *   __AVXVNNI__ (x86-avxvnni): VPDPBUSD / VPDPWSSD, VEX-encoded;
 *   __AVX512VNNI__ and __AVX512VL__ (x86-avx512vnni): the same on 256-bit vectors, EVEX-encoded, masked byte
 *     loads (AVX512BW) and the 64-bit arithmetic shift and narrowing moves of AVX-512 in the requantization;
 *   otherwise AVX2 only (x86-avx2).
 * Names: qc_x86_<op>[_<variant>]_<type>. C99 with GCC inline asm (the VNNI instructions: GCC 12's intrinsics
 * copy the accumulators of unrolled loops); -Wall -Wextra -Werror -pedantic clean.
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_X86_H
#define QC_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#define QC_X86_VNNI 512
#elif defined(__AVXVNNI__)
#define QC_X86_VNNI 256
#else
#define QC_X86_VNNI 0
#endif
#if defined(__AVX512VL__) && defined(__AVX512BW__)
#define QC_X86_AVX512 1
#else
#define QC_X86_AVX512 0
#endif

#define QC_X86_INLINE static inline __attribute__((always_inline, unused))

/* 16 int8 at p sign-extended to int16 (VPMOVSXBW). */
QC_X86_INLINE __m256i qc_x86_load16_s8(const int8_t *p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p));
}
/* 8 int8 at p sign-extended to int32 (VPMOVSXBD). */
QC_X86_INLINE __m256i qc_x86_load8_s32(const int8_t *p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
}
/* 8 int8 at p sign-extended to int16 in a 128-bit vector. */
QC_X86_INLINE __m128i qc_x86_load8_s16(const int8_t *p) {
  return _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)p));
}
QC_X86_INLINE __m256i qc_x86_load8_i32(const int32_t *p) {
  return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

#if QC_X86_VNNI
/* VPDPBUSD acc += u . w: each int32 lane gains the 4 products of its unsigned bytes u with the signed bytes w,
   wrapping (the non-saturating form). */
QC_X86_INLINE __m256i qc_x86_dpbusd(__m256i acc, __m256i u, __m256i w) {
#if QC_X86_VNNI == 512
  __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(w));
#else
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(w));
#endif
  return acc;
}
/* VPDPWSSD acc += x . w: each int32 lane gains the two int16 products of its pair, wrapping; the same bits as
   VPADDD of VPMADDWD (whose pair sums are exact: not both pairs -32768 * -32768), in one instruction. */
QC_X86_INLINE __m256i qc_x86_dpwssd(__m256i acc, __m256i x, __m256i w) {
#if QC_X86_VNNI == 512
  __asm__("%{evex%} vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(w), "vm"(x));
#else
  __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(w), "xm"(x));
#endif
  return acc;
}
#endif

/* acc + the VPMADDWD of x and w (pairs of int16 products added into int32 lanes): VPDPWSSD where the target has
   VNNI; else VPMADDWD and VPADDD, kept in this order (the empty asm keeps GCC from re-associating a chain of
   them into trees, which spills). */
QC_X86_INLINE __m256i qc_x86_madd_acc(__m256i acc, __m256i x, __m256i w) {
#if QC_X86_VNNI
  return qc_x86_dpwssd(acc, x, w);
#else
  acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, w));
  __asm__("" : "+x"(acc));
  return acc;
#endif
}

/* TOSA apply_scale_32 of the 8 int32 lanes of v (multipliers m, shifts 2 <= s <= 62 in int32 lanes), as
   qc_scale32_single (dbl = 0) or qc_scale32_double_gt31 (dbl = 1) compute it: p = v * m + round, round =
   2^(s-1) (+ 2^30 - 2^31 * (v < 0) when dbl), then floor(p / 2^s) truncated to int32. |v * m| < 2^62 and
   round <= 2^61 + 2^30, so p fits int64 exactly (VPMULDQ: 64-bit products of the even int32 lanes; the odd
   lanes are shifted down first). AVX2 has no 64-bit arithmetic shift: floor(p / 2^s) = ((p + 2^63) >> s) -
   2^(63 - s) with the logical VPSRLVQ on p + 2^63 (>= 0, and p ^ 2^63 is that sum mod 2^64). With AVX-512 the
   same p is shifted by VPSRAVQ, which gives floor(p / 2^s) directly. */
QC_X86_INLINE __m256i qc_x86_scale32x8(__m256i v, __m256i m, __m256i s, int dbl) {
  const __m256i low = _mm256_set1_epi64x(0xFFFFFFFF), one = _mm256_set1_epi64x(1);
  __m256i q[2];
  for (int h = 0; h < 2; ++h) {
    const __m256i vh = h ? _mm256_srli_epi64(v, 32) : v;
    const __m256i sh = h ? _mm256_srli_epi64(s, 32) : _mm256_and_si256(s, low);
    __m256i r = _mm256_sllv_epi64(one, _mm256_sub_epi64(sh, one));
#if QC_X86_AVX512
    if (dbl) { /* + 2^30 where v >= 0, - 2^30 where v < 0 */
      const __m256i neg = _mm256_srai_epi64(_mm256_slli_epi64(vh, 32), 63); /* -1 where v < 0 */
      r = _mm256_add_epi64(r, _mm256_xor_si256(_mm256_add_epi64(_mm256_set1_epi64x((int64_t)1 << 30), neg), neg));
    }
    q[h] = _mm256_srav_epi64(_mm256_add_epi64(_mm256_mul_epi32(vh, h ? _mm256_srli_epi64(m, 32) : m), r), sh);
#else
    const __m256i sign = _mm256_set1_epi64x(INT64_MIN);
    if (dbl) {
      const __m256i neg = _mm256_and_si256(_mm256_srai_epi32(vh, 31), low); /* 2^32 - 1 where v < 0 */
      r = _mm256_sub_epi64(_mm256_add_epi64(r, _mm256_set1_epi64x((int64_t)1 << 30)),
                           _mm256_and_si256(neg, _mm256_set1_epi64x((int64_t)1 << 31)));
    }
    const __m256i p = _mm256_add_epi64(_mm256_mul_epi32(vh, h ? _mm256_srli_epi64(m, 32) : m), r);
    q[h] = _mm256_sub_epi64(_mm256_srlv_epi64(_mm256_xor_si256(p, sign), sh), _mm256_srlv_epi64(sign, sh));
#endif
  }
  return _mm256_blend_epi32(q[0], _mm256_slli_epi64(q[1], 32), 0xAA);
}

/* qc_x86_scale32x8 for shifts 33 <= s <= 62 (m, s: int32 lanes), with one 32-bit arithmetic shift instead of the
   64-bit one: P = v * m + d (d = 2^30 where v >= 0 and -2^30 where v < 0 when dbl, else 0; exact in int64 as
   there) and p = P + 2^(s-1). As s >= 33, 2^(s-1) = 2^32 * 2^(s-33), so floor(p / 2^32) = hi + 2^(s-33) with
   hi = floor(P / 2^32), the high int32 half of P (|hi| <= 2^30 + 1, so the sum fits int32), and floor(p / 2^s) =
   floor(floor(p / 2^32) / 2^(s-32)) (nested floor divisions), which VPSRAVD computes (s - 32 <= 30). */
QC_X86_INLINE __m256i qc_x86_scale32x8_s33(__m256i v, __m256i m, __m256i s, int dbl) {
  __m256i pe = _mm256_mul_epi32(v, m), po = _mm256_mul_epi32(_mm256_srli_epi64(v, 32), _mm256_srli_epi64(m, 32));
  if (dbl) { /* d = (2^30 ^ neg) - neg: 2^30 where neg = 0, -2^30 where neg = -1 (v < 0), per int64 lane */
    const __m256i neg = _mm256_srai_epi32(v, 31), r = _mm256_set1_epi64x((int64_t)1 << 30);
    const __m256i ne = _mm256_shuffle_epi32(neg, 0xA0), no = _mm256_shuffle_epi32(neg, 0xF5);
    pe = _mm256_add_epi64(pe, _mm256_sub_epi64(_mm256_xor_si256(r, ne), ne));
    po = _mm256_add_epi64(po, _mm256_sub_epi64(_mm256_xor_si256(r, no), no));
  }
  const __m256i hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
  const __m256i one = _mm256_set1_epi32(1), s32 = _mm256_sub_epi32(s, _mm256_set1_epi32(32));
  return _mm256_srav_epi32(_mm256_add_epi32(hi, _mm256_sllv_epi32(one, _mm256_sub_epi32(s32, one))), s32);
}

/* qc_x86_scale32x8_s33 with its per-lane constants in registers: m, mo (lane 2i: m of lane 2i + 1, the odd
   lanes' multipliers where VPMULDQ reads them), s32 = s - 32 and rnd = 2^(s-33); the same hi = floor(P / 2^32),
   with double rounding found without the 64-bit sign-dependent d: Q = v * m + 2^30 (so P = Q - 2^31 * n, n = 1
   where v < 0), t = floor(Q / 2^31) (bits 31 .. 62 of Q: VPSRLQ 31 of the even lanes' products, VPSLLQ 1 of the
   odd ones' puts them in the high half) and hi = floor((t - n) / 2) = floor(floor((Q - 2^31 n) / 2^31) / 2)
   (nested floor divisions), t - n = t + (v >> 31) by VPADDD and the halving by VPSRAD. No int32 wraps: m in
   [0, 2^31), v in [-2^31, 2^31), so -2^62 + 2^31 + 2^30 <= Q < 2^62 - 2^31 and -2^31 + 1 <= t <= 2^31 - 2. */
QC_X86_INLINE __m256i qc_x86_scale32x8_s33r(__m256i v, __m256i m, __m256i mo, __m256i rnd, __m256i s32, int dbl) {
  __m256i pe = _mm256_mul_epi32(v, m), po = _mm256_mul_epi32(_mm256_srli_epi64(v, 32), mo), hi;
  if (dbl) {
    const __m256i d = _mm256_set1_epi64x((int64_t)1 << 30);
    pe = _mm256_add_epi64(pe, d);
    po = _mm256_add_epi64(po, d);
    const __m256i t = _mm256_blend_epi32(_mm256_srli_epi64(pe, 31), _mm256_slli_epi64(po, 1), 0xAA);
    hi = _mm256_srai_epi32(_mm256_add_epi32(t, _mm256_srai_epi32(v, 31)), 1);
  } else {
    hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
  }
  return _mm256_srav_epi32(_mm256_add_epi32(hi, rnd), s32);
}

/* qc_x86_scale32x8_s33r with its constants made at generation time at r (a block of the x86_rq8 layout, every
   shift >= 33: m, mo, s - 32, 2^(s-33), 8 int32 each). */
QC_X86_INLINE __m256i qc_x86_scale32x8_s33p(__m256i v, const int32_t *r, int dbl) {
  return qc_x86_scale32x8_s33r(v, qc_x86_load8_i32(r), qc_x86_load8_i32(r + 8), qc_x86_load8_i32(r + 24),
                               qc_x86_load8_i32(r + 16), dbl);
}

/* qc_clamp64((int64_t)q + zp, lo, hi) of 8 int32 lanes, for lo - zp and hi - zp in int32 (8/16-bit outputs:
   clamping q to [lo - zp, hi - zp] first gives the same values without overflow). */
QC_X86_INLINE __m256i qc_x86_zp_clamp8(__m256i q, int32_t zp, int32_t lo, int32_t hi) {
  q = _mm256_min_epi32(_mm256_max_epi32(q, _mm256_set1_epi32(lo - zp)), _mm256_set1_epi32(hi - zp));
  return _mm256_add_epi32(q, _mm256_set1_epi32(zp));
}

/* Stores 8 int32 lanes already in range as int8 / int16 / int32 (saturating packs, or with AVX-512 the
   truncating VPMOVDB / VPMOVDW: the same values in range). */
QC_X86_INLINE void qc_x86_store8_s8(int8_t *y, __m256i q) {
#if QC_X86_AVX512
  _mm_storel_epi64((__m128i *)(void *)y, _mm256_cvtepi32_epi8(q));
#else
  const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  _mm_storel_epi64((__m128i *)(void *)y, _mm_packs_epi16(h, h));
#endif
}
QC_X86_INLINE void qc_x86_store8_s16(int16_t *y, __m256i q) {
#if QC_X86_AVX512
  _mm_storeu_si128((__m128i *)(void *)y, _mm256_cvtepi32_epi16(q));
#else
  _mm_storeu_si128((__m128i *)(void *)y, _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)));
#endif
}
QC_X86_INLINE void qc_x86_store8_s32(int32_t *y, __m256i q) {
  _mm256_storeu_si256((__m256i *)(void *)y, q);
}
QC_X86_INLINE void qc_x86_store4_s32(int32_t *y, __m128i q) {
  _mm_storeu_si128((__m128i *)(void *)y, q);
}
/* qc_clamp64((int64_t)q + zp, -128, 127) of 8 int32 lanes stored as int8, by saturating packs: q to int16
   (VPACKSSDW), + zp (VPADDSW; |zp| <= 128, so a saturated q stays out of the int8 range), to int8 (VPACKSSWB). */
QC_X86_INLINE void qc_x86_store8_s8_sat(int8_t *y, __m256i q, int32_t zp) {
  const __m128i h = _mm_adds_epi16(_mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)),
                                   _mm_set1_epi16((int16_t)zp));
  _mm_storel_epi64((__m128i *)(void *)y, _mm_packs_epi16(h, h));
}
/* Stores the 8 int32 lanes of q0 at y0 and of q1 at y1 as int8, each qc_clamp64((int64_t)q + zp, -128, 127) (as
   qc_x86_store8_s8_sat; lanes already in range with zp = 0: as they are): VPACKSSDW of both, VPERMQ to put each
   pixel's 8 values in one 128-bit half, VPADDSW, VPACKSSWB of the halves, the low and high 8 bytes stored. */
QC_X86_INLINE void qc_x86_store8x2_s8_sat(int8_t *y0, int8_t *y1, __m256i q0, __m256i q1, int32_t zp) {
  const __m256i h = _mm256_adds_epi16(_mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8),
                                      _mm256_set1_epi16((int16_t)zp));
  const __m128i r = _mm_packs_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  _mm_storel_epi64((__m128i *)(void *)y0, r);
  _mm_storeh_pi((__m64 *)(void *)y1, _mm_castsi128_ps(r));
}

/* The requantization of a convolution's int32 accumulators (the RESCALE of a FUSED_CONV, 32-bit scale, SINGLE_ROUND
   or DOUBLE_ROUND with every shift > 31, 8- or 16-bit outputs), 8 channels at a time (qc_x86_rq8_store):
     pc: per-channel constants per block of 8 channels (the x86_rq8 layout: with every shift >= 33, 32 int32 per
         block, m, mo, s - 32, 2^(s-33) as qc_x86_scale32x8_s33p reads them; else 16, m then s), or NULL: one
         multiplier m and shift s for every channel;
     s33: every shift >= 33 (qc_x86_scale32x8_s33[p], else qc_x86_scale32x8); dbl: DOUBLE_ROUND;
     zp, lo, hi: output zero point and clamp; sat: int8 outputs over the whole int8 range (saturating packs, no
         clamp); bits: 8 or 16 (the outputs' type);
     es, ea, ev: the exceptions to the single rounding (docs/semantics.md §14.5), or NULL: es[c] .. es[c + 1] - 1
         index the accumulators ea and values ev of channel c (epc: per channel; else per tensor, c = 0). */
typedef struct {
  const int32_t *pc;
  int32_t m, s, s33, dbl, zp, lo, hi, sat, bits;
  const int32_t *es, *ea, *ev;
  int32_t epc;
} qc_x86_rq;

/* The exceptions of R among the 8 accumulators acc of channels c0 .. c0 + 7, stored at element `at` of y: where a
   lane's accumulator is one of its channel's, its output (already stored) becomes the listed value; compares only,
   and none where these channels have no exception. */
QC_X86_INLINE void qc_x86_except8(const qc_x86_rq *R, __m256i acc, int32_t c0, void *y, int32_t at) {
  if (R->es[R->epc ? c0 : 0] == R->es[R->epc ? c0 + 8 : 1]) {
    return;
  }
  int32_t a[8];
  _mm256_storeu_si256((__m256i *)a, acc);
  for (int32_t i = 0; i < 8; ++i) {
    const int32_t c = R->epc ? c0 + i : 0;
    for (int32_t e = R->es[c]; e < R->es[c + 1]; ++e) {
      if (a[i] == R->ea[e]) {
        if (R->bits == 8) {
          ((int8_t *)y)[at + i] = (int8_t)R->ev[e];
        } else {
          ((int16_t *)y)[at + i] = (int16_t)R->ev[e];
        }
      }
    }
  }
}

/* The 8 int32 lanes q of channels c0 .. c0 + 7 (c0 a multiple of 8) requantized by R and stored at element `at` of
   y (int8_t or int16_t by R->bits). */
QC_X86_INLINE void qc_x86_rq8_store(const qc_x86_rq *R, __m256i acc, int32_t c0, void *y, int32_t at) {
  __m256i q;
  if (R->pc && R->s33) {
    q = qc_x86_scale32x8_s33p(acc, R->pc + c0 * 4, R->dbl);
  } else {
    const __m256i m = R->pc ? qc_x86_load8_i32(R->pc + c0 * 2) : _mm256_set1_epi32(R->m);
    const __m256i s = R->pc ? qc_x86_load8_i32(R->pc + c0 * 2 + 8) : _mm256_set1_epi32(R->s);
    q = R->s33 ? qc_x86_scale32x8_s33(acc, m, s, R->dbl) : qc_x86_scale32x8(acc, m, s, R->dbl);
  }
  if (R->sat) {
    qc_x86_store8_s8_sat((int8_t *)y + at, q, R->zp);
  } else if (R->bits == 8) {
    qc_x86_store8_s8((int8_t *)y + at, qc_x86_zp_clamp8(q, R->zp, R->lo, R->hi));
  } else {
    qc_x86_store8_s16((int16_t *)y + at, qc_x86_zp_clamp8(q, R->zp, R->lo, R->hi));
  }
  if (R->es) {
    qc_x86_except8(R, acc, c0, y, at);
  }
}

/* The accumulators of the 8 channels c0 ..: their sums `raw`, + the bias (b[c0 ..] per channel, else b[0]), - their
   zero-point terms zc[c0 ..] (NULL: none), modulo 2^32 like the lanes (the exact accumulators are in int32). */
QC_X86_INLINE __m256i qc_x86_acc8(__m256i raw, const int32_t *b, int32_t c0, int per_channel, const int32_t *zc) {
  const __m256i acc = _mm256_add_epi32(raw, per_channel ? qc_x86_load8_i32(b + c0) : _mm256_set1_epi32(b[0]));
  return zc ? _mm256_sub_epi32(acc, qc_x86_load8_i32(zc + c0)) : acc;
}

#endif
