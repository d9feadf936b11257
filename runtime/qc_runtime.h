/* qcodegen runtime: fixed-point helpers shared by every generated model (TOSA 1.0 semantics).
 * C99, header-only, no allocation. Every helper is exact integer arithmetic with int64 intermediates,
 * and never shifts a negative number left or relies on the implementation-defined right shift of a
 * negative number. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_RUNTIME_H
#define QC_RUNTIME_H

#include <stdint.h>
#include <stddef.h>

#if defined(__GNUC__) || defined(__clang__)
#define QC_INLINE static __inline__ __attribute__((always_inline))
#else
#define QC_INLINE static
#endif

/* floor(x / 2^s) for 0 <= s <= 62, without relying on >> of negative values. */
QC_INLINE int64_t qc_asr64(int64_t x, int s) { return x >= 0 ? x >> s : ~(~x >> s); }
QC_INLINE int32_t qc_asr32(int32_t x, int s) { return x >= 0 ? x >> s : ~(~x >> s); }

/* TOSA apply_scale_32, SINGLE_ROUND (and INEXACT_ROUND, computed the same way). */
QC_INLINE int32_t qc_scale32_single(int32_t v, int32_t m, int s) {
  return (int32_t)qc_asr64((int64_t)v * m + ((int64_t)1 << (s - 1)), s);
}

/* TOSA apply_scale_32, DOUBLE_ROUND: an extra +-2^30 (sign of the value) when the shift exceeds 31. */
QC_INLINE int32_t qc_scale32_double(int32_t v, int32_t m, int s) {
  int64_t round = (int64_t)1 << (s - 1);
  if (s > 31) round += v >= 0 ? ((int64_t)1 << 30) : -((int64_t)1 << 30);
  return (int32_t)qc_asr64((int64_t)v * m + round, s);
}

/* qcodegen extension: v * m / 2^s rounded half to even (float-defined sources, SEMANTICS §7). */
QC_INLINE int32_t qc_scale32_half_even(int32_t v, int32_t m, int s) {
  int64_t p = (int64_t)v * m;
  int64_t q = qc_asr64(p, s);
  int64_t rem = p - q * ((int64_t)1 << s);
  int64_t half = (int64_t)1 << (s - 1);
  return (int32_t)(q + (rem > half || (rem == half && (q & 1) != 0)));
}

/* TOSA apply_scale_16: int48 value (held in int64), int16 multiplier. */
QC_INLINE int32_t qc_scale16(int64_t v, int16_t m, int s) {
  return (int32_t)qc_asr64(v * m + ((int64_t)1 << (s - 1)), s);
}

QC_INLINE int64_t qc_clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
QC_INLINE int32_t qc_clamp32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* Packed 4-bit constants: two per byte, low nibble first. */
QC_INLINE int32_t qc_i4_get(const uint8_t *p, int32_t i) {
  int32_t nib = (p[i >> 1] >> ((i & 1) * 4)) & 0xF;
  return nib >= 8 ? nib - 16 : nib;
}
QC_INLINE int32_t qc_u4_get(const uint8_t *p, int32_t i) { return (p[i >> 1] >> ((i & 1) * 4)) & 0xF; }

#endif /* QC_RUNTIME_H */
