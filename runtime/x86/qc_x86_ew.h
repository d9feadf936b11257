/* qc_x86_ew.h: qcodegen's x86-64 element-wise chains (FUSED_ELEMENTWISE; see qc_x86.h for the form), 8 elements at a
 * time in int32 lanes: loads of int8/16/32 inputs, the parts (RESCALE with a 32-bit multiplier, SINGLE_ROUND or
 * DOUBLE_ROUND, shifts 2 .. 62: the same TOSA apply_scale_32 as the scalar qc_scale32_* of qc_runtime.h; CLAMP;
 * ADD / SUB into int32, wrapping as the scalar (int32_t) cast) and the narrowing stores. Every value of a part is in
 * its output type, so int32 lanes hold it exactly and the narrowing stores (qc_x86_store8_*) are exact. The kernel
 * choice (qcodegen/kernels/x86/choice.py) takes the chains whose every part qualifies.
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_X86_EW_H
#define QC_X86_EW_H

#include "qc_x86.h"

/* 8 elements at p as int32 lanes. */
QC_X86_INLINE __m256i qc_x86_ew_load8_s8(const int8_t *p) {
  return qc_x86_load8_s32(p);
}
QC_X86_INLINE __m256i qc_x86_ew_load8_s16(const int16_t *p) {
  return _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
}
QC_X86_INLINE __m256i qc_x86_ew_load8_s32(const int32_t *p) {
  return qc_x86_load8_i32(p);
}

/* RESCALE of the 8 int32 lanes v (each in the part's input type): (v - izp) scaled by the multiplier m and shift s
   (dbl: DOUBLE_ROUND, for s > 31), qc_x86_scale32x8_s33 for s >= 33, else qc_x86_scale32x8; or, with shl >= 0 (m =
   2^k with k >= s and single rounding), (v - izp) << shl, shl = k - s: floor((v 2^k + 2^(s-1)) / 2^s) =
   v 2^(k-s) (the round is below 2^s), truncated to int32 (the low 32 bits, as VPSLLD). Then, with clamp, + zp and
   clamped to lo .. hi (qc_x86_zp_clamp8: lo - zp and hi - zp in int32; the scalar qc_clamp64 of the int64 sum). */
QC_X86_INLINE __m256i qc_x86_ew_rescale(__m256i v, int32_t izp, int32_t m, int32_t s, int dbl, int32_t shl, int clamp,
                                        int32_t zp, int32_t lo, int32_t hi) {
  if (izp) {
    v = _mm256_sub_epi32(v, _mm256_set1_epi32(izp));
  }
  if (shl > 0) {
    v = _mm256_slli_epi32(v, shl);
  } else if (shl < 0) {
    v = s >= 33 ? qc_x86_scale32x8_s33(v, _mm256_set1_epi32(m), _mm256_set1_epi32(s), dbl)
                : qc_x86_scale32x8(v, _mm256_set1_epi32(m), _mm256_set1_epi32(s), dbl);
  }
  return clamp ? qc_x86_zp_clamp8(v, zp, lo, hi) : v;
}
/* CLAMP of the 8 int32 lanes to lo .. hi. */
QC_X86_INLINE __m256i qc_x86_ew_clamp(__m256i v, int32_t lo, int32_t hi) {
  return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi));
}
/* ADD / SUB into int32 (wrapping). */
QC_X86_INLINE __m256i qc_x86_ew_add(__m256i a, __m256i b) {
  return _mm256_add_epi32(a, b);
}
QC_X86_INLINE __m256i qc_x86_ew_sub(__m256i a, __m256i b) {
  return _mm256_sub_epi32(a, b);
}

#endif
