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

/* qc_scale32_double for a shift s > 31 (the usual TFLite case), without a branch on s. */
QC_INLINE int32_t qc_scale32_double_gt31(int32_t v, int32_t m, int s) {
  const int64_t round = ((int64_t)1 << (s - 1)) + ((int64_t)1 << 30) - (v < 0 ? ((int64_t)1 << 31) : 0);
  return (int32_t)qc_asr64((int64_t)v * m + round, s);
}

/* qcodegen extension: v * m / 2^s rounded half to even (float-defined sources, docs/semantics.md §3.4); with ties to
 * the odd neighbour when the output zero point added next is odd, so that the final value is the even one. */
QC_INLINE int32_t qc_scale32_half_parity(int32_t v, int32_t m, int s, int odd_ties) {
  int64_t p = (int64_t)v * m;
  int64_t q = qc_asr64(p, s);
  int64_t rem = p - q * ((int64_t)1 << s);
  int64_t half = (int64_t)1 << (s - 1);
  return (int32_t)(q + (rem > half || (rem == half && (q & 1) != odd_ties)));
}
QC_INLINE int32_t qc_scale32_half_even(int32_t v, int32_t m, int s) { return qc_scale32_half_parity(v, m, s, 0); }
QC_INLINE int32_t qc_scale32_half_odd(int32_t v, int32_t m, int s) { return qc_scale32_half_parity(v, m, s, 1); }

/* TOSA apply_scale_16: int48 value (held in int64), int16 multiplier. */
QC_INLINE int32_t qc_scale16(int64_t v, int16_t m, int s) {
  return (int32_t)qc_asr64(v * m + ((int64_t)1 << (s - 1)), s);
}

QC_INLINE int64_t qc_clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
QC_INLINE int32_t qc_clamp32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* The low `bits` bits of u (1 <= bits <= 32) read as a two's complement number (TOSA truncate<iN>). */
QC_INLINE int32_t qc_sext_bits(uint32_t u, int bits) {
  const uint32_t sign = (uint32_t)1 << (bits - 1);
  const uint32_t low = bits == 32 ? u : u & ((sign << 1) - 1u);
  return (int32_t)((int64_t)(low ^ sign) - (int64_t)sign);
}

/* Packed 4-bit constants: two per byte, low nibble first. */
QC_INLINE int32_t qc_i4_get(const uint8_t *p, int32_t i) {
  int32_t nib = (p[i >> 1] >> ((i & 1) * 4)) & 0xF;
  return nib >= 8 ? nib - 16 : nib;
}
QC_INLINE int32_t qc_u4_get(const uint8_t *p, int32_t i) { return (p[i >> 1] >> ((i & 1) * 4)) & 0xF; }

/* float -> int64 rounding half to even, for |v| < 2^62 (callers clamp first; NaN must not reach it).
 * Exact and independent of the FP rounding mode and of libm: v - trunc(v) is representable in float. */
QC_INLINE int64_t qc_round_half_even_f32(float v) {
  const int64_t t = (int64_t)v;
  const float frac = v - (float)t;
  if (frac > 0.5f || (frac == 0.5f && t % 2 != 0)) return t + 1;
  if (frac < -0.5f || (frac == -0.5f && t % 2 != 0)) return t - 1;
  return t;
}

/* Round a float already clamped to the int64 range half away from zero (TFLite's TfLiteRound), exactly. */
QC_INLINE int64_t qc_round_half_away_f32(float v) {
  const int64_t t = (int64_t)v;
  const float frac = v - (float)t;
  return t + (frac >= 0.5f) - (frac <= -0.5f);
}

/* gemmlowp fixed point as TFLite Micro uses it (numpy twin: qcodegen/semantics/tflm_fixedpoint.py). Q0 = Q0.31. */

/* Two's complement wrap of an int64 to int32, without implementation-defined conversions. */
QC_INLINE int32_t qc_wrap32(int64_t v) {
  v &= (int64_t)0xFFFFFFFF;
  return (int32_t)(v > INT32_MAX ? v - ((int64_t)1 << 32) : v);
}

/* SaturatingRoundingDoublingHighMul (VQRDMULH): 2ab / 2^32 with gemmlowp's nudge, truncating division. */
QC_INLINE int32_t qc_srdhm32(int32_t a, int32_t b) {
  const int64_t ab = (int64_t)a * b;
  const int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30);
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

/* RoundingDivideByPOT: x / 2^e rounded to nearest, ties away from zero (0 <= e <= 62). */
QC_INLINE int64_t qc_rdbpot64(int64_t x, int e) {
  const int64_t mask = ((int64_t)1 << e) - 1;
  const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return qc_asr64(x, e) + ((x & mask) > threshold ? 1 : 0);
}

/* SaturatingRoundingMultiplyByPOT with a positive exponent: x * 2^e saturated to int32 (1 <= e <= 30). */
QC_INLINE int32_t qc_sat_shl32(int32_t x, int e) {
  const int32_t limit = (int32_t)(((int64_t)1 << (31 - e)) - 1);
  if (x > limit) return INT32_MAX;
  if (x < -limit) return INT32_MIN;
  return (int32_t)((int64_t)x * ((int64_t)1 << e));
}

/* Leading zero bits of a non-zero 32-bit value. */
QC_INLINE int qc_clz32(uint32_t x) {
  int n = 0;
  while (!(x & 0x80000000u)) {
    x <<= 1;
    ++n;
  }
  return n;
}

/* gemmlowp one_over_one_plus_x_for_x_in_0_1: 1 / (1 + a), a in Q0, three Newton-Raphson steps in Q2. */
QC_INLINE int32_t qc_one_over_one_plus_x_q0(int32_t a) {
  const int64_t sum = (int64_t)a + INT32_MAX;
  const int32_t half_den = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
  int32_t x = qc_wrap32((int64_t)1515870810 + qc_srdhm32(half_den, -1010580540));
  int k;
  for (k = 0; k < 3; ++k) {
    const int32_t one_minus = qc_wrap32(((int64_t)1 << 29) - qc_srdhm32(half_den, x));
    x = qc_wrap32((int64_t)x + qc_sat_shl32(qc_srdhm32(x, one_minus), 2));
  }
  return qc_sat_shl32(x, 1);
}

/* TFLite's double-rounding MultiplyByQuantizedMultiplier of an int32 with exponent left - right (one of them 0):
 * RDBPOT(SRDHM(x * 2^left, m), right), the product wrapping to int32 as in TFLite. */
QC_INLINE int32_t qc_tflm_mbqm(int32_t x, int32_t m, int left, int right) {
  return (int32_t)qc_rdbpot64(qc_srdhm32(qc_wrap32((int64_t)x * ((int64_t)1 << left)), m), right);
}

/* tflite::LUTLookup(int16): a 513-entry table with 7 fraction bits and a rounded slope term. */
QC_INLINE int16_t qc_tflm_lut16(const int16_t *lut, int32_t v) {
  const int32_t idx = 256 + qc_asr32(v, 7);
  const int32_t base = lut[idx];
  return (int16_t)(base + qc_asr32((lut[idx + 1] - base) * (v & 0x7F) + 64, 7));
}

/* tflite::GetReciprocal: 1 / x for x > 0 in Q(integer_digits), as a Q0 value in [1/2, 1) and the number of
 * bits over unit. */
QC_INLINE int32_t qc_tflm_reciprocal(int32_t x, int integer_digits, int *bits_over_unit) {
  const int headroom_plus_one = qc_clz32((uint32_t)x);
  const uint32_t shifted = ((uint32_t)x << headroom_plus_one) - 0x80000000u;
  *bits_over_unit = integer_digits - headroom_plus_one;
  return qc_one_over_one_plus_x_q0((int32_t)shifted);
}

/* Float32 arithmetic emulated exactly with integers (the StableHLO interpreter's requantization,
 * RESCALE_F32_AFFINE). A float32 value is (negative, mantissa < 2^24, exponent): +-mantissa * 2^exponent; the
 * callers keep every value normal (plan-time checks), so "round to 24 significant bits, ties to even" is the
 * binary32 rounding. */

/* u * 2^*e rounded to 24 significant bits, ties to even; *e takes the bits shifted out. */
QC_INLINE uint64_t qc_f32_round24(uint64_t u, int *e) {
  int n = 0;
  while ((u >> n) >= ((uint64_t)1 << 24)) ++n;
  if (n > 0) {
    const uint64_t rem = u & (((uint64_t)1 << n) - 1u), half = (uint64_t)1 << (n - 1);
    u >>= n;
    u += rem > half || (rem == half && (u & 1u) != 0);
    if (u == ((uint64_t)1 << 24)) {  /* the rounding carried into a 25th bit */
      u >>= 1;
      ++n;
    }
    *e += n;
  }
  return u;
}

/* round_half_even(f32(f32(f32(x) * m) + c)), m = mm * 2^me >= 0, c = (c_neg ? -1 : 1) * cm * 2^ce, for
 * |x| <= 2^31; results of 2^40 or more in magnitude come back as +-2^40 (callers clamp to a 32-bit range).
 * The sum aligns both terms 30 bits below the larger exponent: the larger term is exact, the smaller one loses its
 * low bits only when its exponent is more than 30 smaller, and then only into a jammed sticky bit (bit 0 set). The
 * sum is then above 2^52 (mantissas are at least 2^23), so its rounding position is bit 29 or higher and the jammed bit decides only whether
 * the discarded part is zero, exactly as the lost bits would. */
QC_INLINE int64_t qc_f32_affine(int64_t x, uint32_t mm, int me, int c_neg, uint32_t cm, int ce) {
  const int guard = 30;
  const int x_neg = x < 0;
  int ex = 0, ep, es;
  uint64_t p, s;
  int s_neg;
  p = qc_f32_round24(x_neg ? (uint64_t)(-x) : (uint64_t)x, &ex);  /* f32(x) */
  ep = ex + me;
  p = qc_f32_round24(p * mm, &ep);                                 /* f32(f32(x) * m), p * mm < 2^48 */
  if (cm == 0) {
    s = p; es = ep; s_neg = x_neg;
  } else if (p == 0) {
    s = cm; es = ce; s_neg = c_neg;
  } else {
    const int top = ep > ce ? ep : ce, base = top - guard;
    int64_t terms[2];
    const uint64_t mant[2] = {p, cm};
    const int exps[2] = {ep, ce}, negs[2] = {x_neg, c_neg};
    int64_t sum;
    int i;
    for (i = 0; i < 2; ++i) {
      const int d = exps[i] - base;  /* <= guard */
      uint64_t v;
      if (d >= 0) {
        v = mant[i] << d;                                   /* < 2^54 */
      } else if (d > -64) {
        v = (mant[i] >> -d) | ((mant[i] & (((uint64_t)1 << -d) - 1u)) != 0);
      } else {
        v = 1;                                              /* only the sticky bit is left */
      }
      terms[i] = negs[i] ? -(int64_t)v : (int64_t)v;
    }
    sum = terms[0] + terms[1];
    s_neg = sum < 0;
    es = base;
    s = qc_f32_round24(s_neg ? (uint64_t)(-sum) : (uint64_t)sum, &es);  /* f32(p + c) */
  }
  if (s == 0) return 0;
  if (es >= 0) {
    const int64_t v = es >= 40 || (s >> (40 - es)) != 0 ? ((int64_t)1 << 40) : (int64_t)(s << es);
    return s_neg ? -v : v;
  }
  if (es < -25) return 0;  /* |s| < 2^24 * 2^-26 = 1/4 */
  {
    const int k = -es;
    const uint64_t rem = s & (((uint64_t)1 << k) - 1u), half = (uint64_t)1 << (k - 1);
    const uint64_t q = (s >> k) + (rem > half || (rem == half && ((s >> k) & 1u) != 0));
    return s_neg ? -(int64_t)q : (int64_t)q;
  }
}

#endif /* QC_RUNTIME_H */
