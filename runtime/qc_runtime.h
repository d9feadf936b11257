/* qcodegen runtime: fixed-point helpers shared by every generated model (TOSA 1.0 semantics).
 * C99, header-only, no allocation. Every helper is exact integer arithmetic with int64 intermediates,
 * and never shifts a negative number left or relies on the implementation-defined right shift of a
 * negative number. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_RUNTIME_H
#define QC_RUNTIME_H

#include <stdint.h>
#include <stddef.h>
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__
#include <string.h> /* memmove: the block copies of data-movement steps on targets with a C library */
#endif

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

/* trunc(v) as an integer and *frac = v - trunc(v), for |v| < 2^62 (NaN must not reach it). Exact: the fraction is
 * representable in float. Through int32 where v fits: single-precision FPUs (Cortex-M4F/M7/M55) convert float <->
 * int32 in one instruction, float <-> int64 in a library call. */
QC_INLINE int64_t qc_trunc_f32(float v, float *frac) {
  if (v > -0x1p31f && v < 0x1p31f) {
    const int32_t t = (int32_t)v;
    *frac = v - (float)t;
    return t;
  } else {
    const int64_t t = (int64_t)v;
    *frac = v - (float)t;
    return t;
  }
}

/* float -> int64 rounding half to even, for |v| < 2^62 (callers clamp first; NaN must not reach it).
 * Exact and independent of the FP rounding mode and of libm. */
QC_INLINE int64_t qc_round_half_even_f32(float v) {
  float frac;
  const int64_t t = qc_trunc_f32(v, &frac);
  if (frac > 0.5f || (frac == 0.5f && t % 2 != 0)) return t + 1;
  if (frac < -0.5f || (frac == -0.5f && t % 2 != 0)) return t - 1;
  return t;
}

/* Round a float already clamped to the int64 range half away from zero (TFLite's TfLiteRound), exactly. */
QC_INLINE int64_t qc_round_half_away_f32(float v) {
  float frac;
  const int64_t t = qc_trunc_f32(v, &frac);
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

/* ---- float32 requantization emulated in integers (RESCALE_F32, SOFTMAX_F32, BINARY_F32, RESIZE_F32;
 * docs/semantics.md §14.1, §14.2) ---- */

/* Number of significant bits of x > 0. */
QC_INLINE int qc_bitlen64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
  return 64 - __builtin_clzll(x);
#else
  int n = 0;
  if (x >> 32) { x >>= 32; n += 32; }
  if (x >> 16) { x >>= 16; n += 16; }
  if (x >> 8) { x >>= 8; n += 8; }
  if (x >> 4) { x >>= 4; n += 4; }
  if (x >> 2) { x >>= 2; n += 2; }
  return n + (int)(x >> 1) + 1;
#endif
}

/* x / 2^s rounded to nearest, ties to even, for 1 <= s <= 63 (unsigned: no sign conventions involved). */
QC_INLINE uint64_t qc_rne_shr64(uint64_t x, int s) {
  const uint64_t q = x >> s;
  const uint64_t rem = x & ((((uint64_t)1) << s) - 1u);
  const uint64_t half = ((uint64_t)1) << (s - 1);
  return q + (uint64_t)(rem > half || (rem == half && (q & 1u)));
}

/* round_half_even(f32(f32(v) * s)) for the float32 scale s = m * 2^-k (0 <= m < 2^24), exactly as IEEE binary32
 * arithmetic in round-to-nearest-even mode computes it, saturated to [-2^40, 2^40] (callers clamp to their output
 * range), given a = |v| and the sign: qc_scale_f32 (int32 v) and qc_scale_f32_64 (int64 v) below. Proof of
 * exactness, step by step (magnitudes; every rounding here is symmetric in the sign):
 *  1. f32(v): an integer of n significant bits is a float32 exactly when n <= 24; otherwise the conversion keeps
 *     the 24 leading bits, rounding the n - 24 dropped ones half to even. So a * 2^e == f32(|v|) exactly, with
 *     a <= 2^24 (a carry may reach 2^24, still exact). |v| <= 2^63 (int32 accumulators, or the int64 ones of
 *     16 x 8-bit products), so n - 24 <= 39.
 *  2. The product f32(|v|) * s is a * m * 2^(e - k), a * m < 2^48 exact in uint64. The binary32 multiplication
 *     rounds it to 24 significant bits, half to even -- the same dropping of low bits as in step 1 -- when the
 *     result is a normal number. Results below 2^-126 (where binary32 rounds at 2^-149 instead) and results
 *     whose rounding makes them subnormal are below 1/2 either way and become 0 in step 3, as they would in float.
 *     A result above the binary32 range (infinity in float) saturates here, as it saturates after clamping there.
 *  3. p * 2^e with p <= 2^24: e >= 0 is an integer (saturated beyond 2^40); e < -25 is below 2^24 / 2^26 = 1/4,
 *     i.e. 0; otherwise p / 2^-e rounded half to even, what cvtps2dq / vcvtnq / nearbyintf do in that mode. */
QC_INLINE int64_t qc_scale_f32_magnitude(uint64_t a, int negative, int32_t m, int k) {
  uint64_t p;
  uint32_t q;
  int e = -k;
  int n;
  if (a == 0 || m == 0) return 0;
  if (a >> 24) {  /* step 1 (below 2^24 the conversion is exact) */
    n = qc_bitlen64(a);
    a = qc_rne_shr64(a, n - 24);
    e += n - 24;
  }
  p = (uint64_t)(uint32_t)a * (uint32_t)m;  /* step 2 (a <= 2^24 now: one 32 x 32 -> 64 multiply) */
  n = qc_bitlen64(p);
  q = n > 24 ? (uint32_t)qc_rne_shr64(p, n - 24) : (uint32_t)p;
  e += n > 24 ? n - 24 : 0;
  if (e >= 0) {  /* step 3; q <= 2^24, so q << 38 < 2^63 */
    p = e > 38 ? ((uint64_t)1 << 40) : (uint64_t)q << e;
    if (p > ((uint64_t)1 << 40)) p = (uint64_t)1 << 40;
  } else if (e < -25) {
    p = 0;
  } else {  /* q / 2^-e half to even in 32 bits (-e <= 25) */
    const int s = -e;
    const uint32_t t = q >> s;
    const uint32_t rem = q & ((1u << s) - 1u);
    const uint32_t half = 1u << (s - 1);
    p = t + (uint32_t)(rem > half || (rem == half && (t & 1u)));
  }
  return negative ? -(int64_t)p : (int64_t)p;
}

/* The int32 entry (accumulators of 8-bit products): the magnitude zero-extended, so the compiler keeps step 1's
 * test and the magnitude in 32 bits. */
QC_INLINE int64_t qc_scale_f32(int32_t v, int32_t m, int k) {
  return qc_scale_f32_magnitude(v < 0 ? (uint32_t)0 - (uint32_t)v : (uint32_t)v, v < 0, m, k);
}

/* The int64 entry (the i48 accumulators of 16 x 8-bit products). */
QC_INLINE int64_t qc_scale_f32_64(int64_t v, int32_t m, int k) {
  return qc_scale_f32_magnitude(v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, v < 0, m, k);
}

/* qc_scale_f32(v, m, k) for 2 <= k <= 60, 0 < m < 2^24 and |v| within the bound the window w was computed for
 * (docs/semantics.md §14.5): the float32 result differs from the exact product v * m * 2^-k by at most w * 2^-k, so
 * where v * m lies further than w from every half-integer * 2^k, both round to the same integer, which single
 * rounding floor((v * m + 2^(k-1)) / 2^k) gives. With t = v * m + 2^(k-1) + w, the low k bits of t are the
 * distance (shifted by w) past the last half-integer: at most 2 w means within w of one, and the exact emulation
 * decides; otherwise they exceed w, so floor(t / 2^k) == floor((t - w) / 2^k), the single rounding. */
QC_INLINE int64_t qc_scale_f32_fast(int32_t v, int32_t m, int k, int64_t w) {
  const int64_t t = (int64_t)v * m + ((int64_t)1 << (k - 1)) + w;
  if (((uint64_t)t & ((((uint64_t)1) << k) - 1u)) <= (uint64_t)w * 2u) return qc_scale_f32(v, m, k);
  return qc_asr64(t, k);
}

/* A non-negative float32 value m * 2^e held exactly, m in [2^23, 2^24) (or 0 for zero): SOFTMAX_F32 emulates
 * onnxruntime's float32 softmax with these, each operation rounded as binary32 rounds it (round to nearest even;
 * subnormal results, which only ever become 0 after the final rounding, are kept with 24 bits instead). */
typedef struct {
  uint64_t m;
  int e;
} qc_f32v;

/* m * 2^e (m < 2^63) rounded to 24 significant bits, half to even; m's lowest bit may be a jammed sticky bit. */
QC_INLINE qc_f32v qc_f32_round(uint64_t m, int e) {
  qc_f32v r;
  int n;
  if (m == 0) {
    r.m = 0;
    r.e = 0;
    return r;
  }
  n = qc_bitlen64(m);
  if (n > 24) {
    m = qc_rne_shr64(m, n - 24);
    e += n - 24;
    if (m >> 24) {  /* the rounding carried to 2^24 */
      m >>= 1;
      e += 1;
    }
  } else {
    m <<= 24 - n;
    e -= 24 - n;
  }
  r.m = m;
  r.e = e;
  return r;
}

/* a + b, exact sum rounded once. With a.e >= b.e + 27, b < 2^(a.e - 3) is below half an ulp of a (>= 2^(a.e - 1)). */
QC_INLINE qc_f32v qc_f32_add(qc_f32v a, qc_f32v b) {
  if (a.m == 0) return b;
  if (b.m == 0) return a;
  if (a.e < b.e) {
    const qc_f32v t = a;
    a = b;
    b = t;
  }
  if (a.e - b.e > 26) return a;
  return qc_f32_round((a.m << (a.e - b.e)) + b.m, b.e);  /* < 2^51 */
}

/* a * b: the 48-bit product rounded once. */
QC_INLINE qc_f32v qc_f32_mul(qc_f32v a, qc_f32v b) {
  return qc_f32_round(a.m * b.m, a.e + b.e);
}

/* a / b (b > 0): a quotient of at least 39 bits and the remainder jammed into its lowest bit, so the rounding to 24
 * bits (15 or more bits above it) sees the exact quotient's side of every midpoint. */
QC_INLINE qc_f32v qc_f32_div(qc_f32v a, qc_f32v b) {
  const uint64_t num = a.m << 40;
  const uint64_t q = num / b.m;
  return qc_f32_round(q | (uint64_t)(num - q * b.m != 0), a.e - b.e - 40);
}

/* round_half_even(v) as an integer, saturated at 2^40. */
QC_INLINE int64_t qc_f32_rint(qc_f32v v) {
  if (v.m == 0 || v.e < -26) return 0;  /* v < 2^24 * 2^-27 < 1/2 */
  if (v.e >= 0) return v.e > 16 ? ((int64_t)1 << 40) : (int64_t)(v.m << v.e);
  return (int64_t)qc_rne_shr64(v.m, -v.e);
}

/* A signed float32 value (-1)^neg * v (BINARY_F32: onnxruntime's float path between DequantizeLinear and
 * QuantizeLinear); the callers keep every value normal, as for qc_f32v. */
typedef struct {
  qc_f32v v;
  int neg;
} qc_f32s;

/* f32(d) * scale for |d| < 2^24 (DequantizeLinear: d = q - zero point converts exactly): one rounding. */
QC_INLINE qc_f32s qc_f32s_scaled(int32_t d, qc_f32v scale) {
  qc_f32s r;
  r.neg = d < 0;
  r.v = qc_f32_round((uint64_t)(d < 0 ? -(int64_t)d : d) * scale.m, scale.e);
  return r;
}

/* a + b. Equal signs add the magnitudes; otherwise their exact difference (|a| aligned at most 26 bits above b:
 * < 2^50) is rounded once; with a.e >= b.e + 27, |b| < 2^(a.e - 3) is below a quarter ulp of a's neighbours, so
 * the sum rounds to a. */
QC_INLINE qc_f32s qc_f32s_add(qc_f32s a, qc_f32s b) {
  int64_t d;
  if (a.neg == b.neg) {
    a.v = qc_f32_add(a.v, b.v);
    return a;
  }
  if (b.v.m == 0) return a;
  if (a.v.m == 0) return b;
  if (a.v.e < b.v.e) {
    const qc_f32s t = a;
    a = b;
    b = t;
  }
  if (a.v.e - b.v.e > 26) return a;
  d = (int64_t)(a.v.m << (a.v.e - b.v.e)) - (int64_t)b.v.m;
  if (d < 0) {
    a.neg = !a.neg;
    d = -d;
  }
  a.v = qc_f32_round((uint64_t)d, b.v.e);
  return a;
}

QC_INLINE qc_f32s qc_f32s_sub(qc_f32s a, qc_f32s b) {
  b.neg = !b.neg;
  return qc_f32s_add(a, b);
}

QC_INLINE qc_f32s qc_f32s_mul(qc_f32s a, qc_f32s b) {
  a.v = qc_f32_mul(a.v, b.v);
  a.neg ^= b.neg;
  return a;
}

/* MLAS QuantizeLinear of r before the zero point: clamp(round_half_even(r / scale), lo, hi) for scale > 0 and
 * bounds within +-2^40 (qc_f32_rint saturates there). */
QC_INLINE int64_t qc_f32s_quantize(qc_f32s r, qc_f32v scale, int64_t lo, int64_t hi) {
  const int64_t q = qc_f32_rint(qc_f32_div(r.v, scale));
  const int64_t v = r.neg ? -q : q;
  return v < lo ? lo : (v > hi ? hi : v);
}

/* Float32 arithmetic emulated exactly with integers (the StableHLO interpreter's requantization,
 * RESCALE_F32_AFFINE). A float32 value is (negative, mantissa < 2^24, exponent): +-mantissa * 2^exponent; the
 * callers keep every value normal (plan-time checks), so "round to 24 significant bits, ties to even" is the
 * binary32 rounding. */

/* u * 2^*e rounded to 24 significant bits, ties to even; *e takes the bits shifted out. */
QC_INLINE uint64_t qc_f32_round24(uint64_t u, int *e) {
  const int n = u == 0 ? 0 : qc_bitlen64(u) - 24;
  if (n <= 0) return u;
  u = qc_rne_shr64(u, n);
  *e += n;
  if (u >> 24) {  /* the rounding carried into a 25th bit */
    u >>= 1;
    ++*e;
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
    const uint64_t q = qc_rne_shr64(s, -es);
    return s_neg ? -(int64_t)q : (int64_t)q;
  }
}

#endif /* QC_RUNTIME_H */
