/* qc_x86_conv.h: qcodegen's x86-64 convolutions as dot products of int8 weight rows (see qc_x86.h for the form and
 * the instruction sets). Three families, chosen per step at generation time (qcodegen/kernels/x86/choice.py):
 *   - the blocked kernels (qc_x86_gemm_*): requantized convolutions with constant weights, output pixels in groups
 *     of up to 4 x blocks of 8 or 16 output channels in int32 lanes (lane = channel: no horizontal sums), each
 *     pixel's window packed once (x - izp as int16 for VPMADDWD, x + 128 as bytes for VPDPBUSD, or its nibbles for
 *     VPMADDUBSW), the weights re-laid at generation time (qcodegen/kernels/x86/layouts.py madd_2x8, dpbusd_4x8);
 *   - dot products of 4 or 8 rows (qc_x86_dot_*): the other int8 x int8 convolutions with weight zero point 0;
 *   - the window packing of the blocked kernels (qc_x86_pack_*), also called while a window is gathered.
 * Integer dot products are exact in any order: each kernel sums the raw products and the generation time (or, for
 * weights that are not constant, qc_x86_row_sums) gives each row's input-zero-point correction; the kernel choice
 * bounds every partial sum within int32 (rows of at most 65,535 elements, products of at most 2^15 in magnitude).
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_X86_CONV_H
#define QC_X86_CONV_H

#include "qc_x86.h"

/* ---- dot products of int8 rows, AVX2: VPMOVSXBW then VPMADDWD (pairs of products, at most 2^15 each, added into
   int32 lanes), 16 then 8 elements per step, the rest scalar. ---- */

/* The sum of a[i] * b[i], i < n. */
static inline __attribute__((unused)) int32_t qc_x86_dot_s8(const int8_t *a, const int8_t *b, int32_t n) {
  __m256i v = _mm256_setzero_si256();
  const int32_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (int32_t i = 0; i < n16; i += 16) {
    v = _mm256_add_epi32(v, _mm256_madd_epi16(qc_x86_load16_s8(a + i), qc_x86_load16_s8(b + i)));
  }
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  if (n8 > n16) {
    const int32_t i = n16;
    h = _mm_add_epi32(h, _mm_madd_epi16(qc_x86_load8_s16(a + i), qc_x86_load8_s16(b + i)));
  }
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  int32_t s = _mm_cvtsi128_si32(h);
  for (int32_t i = n8; i < n; ++i) {
    s += (int32_t)a[i] * b[i];
  }
  return s;
}

/* Lane r of the result: qc_x86_dot_s8(a, w + r * n, n) for the 4 rows r < 4 (each input vector loaded once for the
   4 rows). */
static inline __attribute__((unused)) __m128i qc_x86_dot_4rows_s8(const int8_t *a, const int8_t *w, int32_t n) {
  __m256i v0 = _mm256_setzero_si256(), v1 = v0, v2 = v0, v3 = v0;
  const int32_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (int32_t i = 0; i < n16; i += 16) {
    const __m256i va = qc_x86_load16_s8(a + i);
    v0 = _mm256_add_epi32(v0, _mm256_madd_epi16(va, qc_x86_load16_s8(w + i)));
    v1 = _mm256_add_epi32(v1, _mm256_madd_epi16(va, qc_x86_load16_s8(w + n + i)));
    v2 = _mm256_add_epi32(v2, _mm256_madd_epi16(va, qc_x86_load16_s8(w + 2 * n + i)));
    v3 = _mm256_add_epi32(v3, _mm256_madd_epi16(va, qc_x86_load16_s8(w + 3 * n + i)));
  }
  /* lane j of each 128-bit half of v: partial sums of row j */
  const __m256i v = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  if (n8 > n16) {
    const int32_t i = n16;
    const __m128i va = qc_x86_load8_s16(a + i);
    const __m128i p01 = _mm_hadd_epi32(_mm_madd_epi16(va, qc_x86_load8_s16(w + i)),
                                       _mm_madd_epi16(va, qc_x86_load8_s16(w + n + i)));
    const __m128i p23 = _mm_hadd_epi32(_mm_madd_epi16(va, qc_x86_load8_s16(w + 2 * n + i)),
                                       _mm_madd_epi16(va, qc_x86_load8_s16(w + 3 * n + i)));
    h = _mm_add_epi32(h, _mm_hadd_epi32(p01, p23));
  }
  for (int32_t i = n8; i < n; ++i) {
    const int32_t x = a[i];
    h = _mm_add_epi32(h, _mm_setr_epi32(x * w[i], x * w[n + i], x * w[2 * n + i], x * w[3 * n + i]));
  }
  return h;
}

/* The sums of a[i] * w[r * n + i] for the 8 rows r < 8, as the int32 lanes of the result (lane r: row r). */
static inline __attribute__((unused)) __m256i qc_x86_dot_8rows_s8(const int8_t *a, const int8_t *w, int32_t n) {
  __m256i v0 = _mm256_setzero_si256(), v1 = v0, v2 = v0, v3 = v0, v4 = v0, v5 = v0, v6 = v0, v7 = v0;
  const int32_t n16 = n / 16 * 16, n8 = n / 8 * 8;
  for (int32_t i = 0; i < n16; i += 16) {
    const __m256i va = qc_x86_load16_s8(a + i);
    v0 = _mm256_add_epi32(v0, _mm256_madd_epi16(va, qc_x86_load16_s8(w + i)));
    v1 = _mm256_add_epi32(v1, _mm256_madd_epi16(va, qc_x86_load16_s8(w + n + i)));
    v2 = _mm256_add_epi32(v2, _mm256_madd_epi16(va, qc_x86_load16_s8(w + 2 * n + i)));
    v3 = _mm256_add_epi32(v3, _mm256_madd_epi16(va, qc_x86_load16_s8(w + 3 * n + i)));
    v4 = _mm256_add_epi32(v4, _mm256_madd_epi16(va, qc_x86_load16_s8(w + 4 * n + i)));
    v5 = _mm256_add_epi32(v5, _mm256_madd_epi16(va, qc_x86_load16_s8(w + 5 * n + i)));
    v6 = _mm256_add_epi32(v6, _mm256_madd_epi16(va, qc_x86_load16_s8(w + 6 * n + i)));
    v7 = _mm256_add_epi32(v7, _mm256_madd_epi16(va, qc_x86_load16_s8(w + 7 * n + i)));
  }
  /* per 128-bit half: lane r of h0123 / h4567 holds partial sums of row r / 4 + r */
  const __m256i h0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  const __m256i h4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(v4, v5), _mm256_hadd_epi32(v6, v7));
  __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                               _mm256_permute2x128_si256(h0123, h4567, 0x31));
  if (n8 > n16) {
    const int32_t i = n16;
    const __m128i va = qc_x86_load8_s16(a + i);
    __m128i t[8];
    for (int32_t r = 0; r < 8; ++r) {
      t[r] = _mm_madd_epi16(va, qc_x86_load8_s16(w + r * n + i));
    }
    const __m128i lo = _mm_hadd_epi32(_mm_hadd_epi32(t[0], t[1]), _mm_hadd_epi32(t[2], t[3]));
    const __m128i hi = _mm_hadd_epi32(_mm_hadd_epi32(t[4], t[5]), _mm_hadd_epi32(t[6], t[7]));
    s = _mm256_add_epi32(s, _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
  for (int32_t i = n8; i < n; ++i) {
    const int32_t x = a[i];
    s = _mm256_add_epi32(s, _mm256_setr_epi32(x * w[i], x * w[n + i], x * w[2 * n + i], x * w[3 * n + i],
                                              x * w[4 * n + i], x * w[5 * n + i], x * w[6 * n + i], x * w[7 * n + i]));
  }
  return s;
}

/* zc[r] = c * (the sum over i < n of w[r * n + i]) for r < rows: the input-zero-point correction of rows that are
   not constant (constant rows get it at generation time). |c| <= 255 and rows of at most 65,535 elements:
   |zc| <= 255 * 128 * 65535 < 2^31. */
static inline __attribute__((unused)) void qc_x86_row_sums(int32_t *zc, const int8_t *w, int32_t rows, int32_t n,
                                                          int32_t c) {
  for (int32_t r = 0; r < rows; ++r) {
    int32_t s = 0;
    for (int32_t i = 0; i < n; ++i) {
      s += w[r * n + i];
    }
    zc[r] = s * c;
  }
}

#if QC_X86_VNNI
/* ---- dot products with VPDPBUSD: u = x + 128 = x ^ 0x80 (0 .. 255), so the sum of (x - izp) * w is the sum of
   u * w less (128 + izp) * the row sum (the correction the kernel choice makes). Exactness, for rows of k <= 65535
   elements: each |u * w| <= 255 * 128 = 32640, one VPDPBUSD adds at most 4 * 32640 to a lane, and every partial
   sum (a lane, a sum of lanes, a scalar tail) is a sum of distinct products, at most 32640 * 65535 = 2139062400
   < 2^31 in magnitude: no lane or C sum ever wraps. ---- */

/* The whole 4-byte groups of the r < 32 bytes at p (VPMASKMOVD reads only those), or with AVX-512 all r bytes
   (VMOVDQU8 with a zeroing mask); the lanes past them are 0 (weight 0: no product). */
QC_X86_INLINE __m256i qc_x86_vnni_tail(const int8_t *p, int32_t r) {
#if QC_X86_VNNI == 512
  return _mm256_maskz_loadu_epi8((__mmask32)((1U << r) - 1), (const void *)p);
#else
  const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(r / 4), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_maskload_epi32((const int *)(const void *)p, m);
#endif
}
/* The elements of a row of n that the vector loads cover (the scalar tails do the rest). */
QC_X86_INLINE int32_t qc_x86_vnni_covered(int32_t n) {
#if QC_X86_VNNI == 512
  return n;
#else
  return n / 4 * 4;
#endif
}
QC_X86_INLINE __m256i qc_x86_vnni_w(const int8_t *p) {
  return _mm256_loadu_si256((const __m256i *)(const void *)p);
}
/* u = x + 128 = x ^ 0x80 of the int8 x at p (a tail: 128 past the loaded bytes, against weights 0). */
QC_X86_INLINE __m256i qc_x86_vnni_x(const int8_t *p) {
  return _mm256_xor_si256(qc_x86_vnni_w(p), _mm256_set1_epi8(-128));
}
QC_X86_INLINE __m256i qc_x86_vnni_x_tail(const int8_t *p, int32_t r) {
  return _mm256_xor_si256(qc_x86_vnni_tail(p, r), _mm256_set1_epi8(-128));
}
/* The sum of the 8 int32 lanes of v. */
QC_X86_INLINE int32_t qc_x86_hsum8(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

/* The sum over i < n of (a[i] + 128) * w[i]. */
static inline __attribute__((unused)) int32_t qc_x86_vnni_dot_s8(const int8_t *a, const int8_t *w, int32_t n) {
  const int32_t nv = n / 32 * 32;
  __m256i v = _mm256_setzero_si256();
  for (int32_t i = 0; i < nv; i += 32) {
    v = qc_x86_dpbusd(v, qc_x86_vnni_x(a + i), qc_x86_vnni_w(w + i));
  }
  if (nv < n) {
    v = qc_x86_dpbusd(v, qc_x86_vnni_x_tail(a + nv, n - nv), qc_x86_vnni_tail(w + nv, n - nv));
  }
  int32_t s = qc_x86_hsum8(v);
  for (int32_t i = qc_x86_vnni_covered(n); i < n; ++i) {
    s += (a[i] + 128) * w[i];
  }
  return s;
}

/* Lane r of the result: the sum over i < n of (a[i] + 128) * w[r * n + i], for the 4 rows r < 4 (one accumulator
   per row). */
static inline __attribute__((unused)) __m128i qc_x86_vnni_dot_4rows_s8(const int8_t *a, const int8_t *w, int32_t n) {
  const int32_t nv = n / 32 * 32;
  __m256i v0 = _mm256_setzero_si256(), v1 = v0, v2 = v0, v3 = v0;
  for (int32_t i = 0; i < nv; i += 32) {
    const __m256i u = qc_x86_vnni_x(a + i);
    v0 = qc_x86_dpbusd(v0, u, qc_x86_vnni_w(w + i));
    v1 = qc_x86_dpbusd(v1, u, qc_x86_vnni_w(w + n + i));
    v2 = qc_x86_dpbusd(v2, u, qc_x86_vnni_w(w + 2 * n + i));
    v3 = qc_x86_dpbusd(v3, u, qc_x86_vnni_w(w + 3 * n + i));
  }
  if (nv < n) {
    const __m256i u = qc_x86_vnni_x_tail(a + nv, n - nv);
    v0 = qc_x86_dpbusd(v0, u, qc_x86_vnni_tail(w + nv, n - nv));
    v1 = qc_x86_dpbusd(v1, u, qc_x86_vnni_tail(w + n + nv, n - nv));
    v2 = qc_x86_dpbusd(v2, u, qc_x86_vnni_tail(w + 2 * n + nv, n - nv));
    v3 = qc_x86_dpbusd(v3, u, qc_x86_vnni_tail(w + 3 * n + nv, n - nv));
  }
  /* per 128-bit half: lane j holds partial sums of row j */
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  for (int32_t i = qc_x86_vnni_covered(n); i < n; ++i) {
    const int32_t u = a[i] + 128;
    s = _mm_add_epi32(s, _mm_setr_epi32(u * w[i], u * w[n + i], u * w[2 * n + i], u * w[3 * n + i]));
  }
  return s;
}

/* The same for the 8 rows r < 8, as the int32 lanes of the result. */
static inline __attribute__((unused)) __m256i qc_x86_vnni_dot_8rows_s8(const int8_t *a, const int8_t *w, int32_t n) {
  const int32_t nv = n / 32 * 32;
  __m256i v0 = _mm256_setzero_si256(), v1 = v0, v2 = v0, v3 = v0, v4 = v0, v5 = v0, v6 = v0, v7 = v0;
  for (int32_t i = 0; i < nv; i += 32) {
    const __m256i u = qc_x86_vnni_x(a + i);
    v0 = qc_x86_dpbusd(v0, u, qc_x86_vnni_w(w + i));
    v1 = qc_x86_dpbusd(v1, u, qc_x86_vnni_w(w + n + i));
    v2 = qc_x86_dpbusd(v2, u, qc_x86_vnni_w(w + 2 * n + i));
    v3 = qc_x86_dpbusd(v3, u, qc_x86_vnni_w(w + 3 * n + i));
    v4 = qc_x86_dpbusd(v4, u, qc_x86_vnni_w(w + 4 * n + i));
    v5 = qc_x86_dpbusd(v5, u, qc_x86_vnni_w(w + 5 * n + i));
    v6 = qc_x86_dpbusd(v6, u, qc_x86_vnni_w(w + 6 * n + i));
    v7 = qc_x86_dpbusd(v7, u, qc_x86_vnni_w(w + 7 * n + i));
  }
  if (nv < n) {
    const __m256i u = qc_x86_vnni_x_tail(a + nv, n - nv);
    v0 = qc_x86_dpbusd(v0, u, qc_x86_vnni_tail(w + nv, n - nv));
    v1 = qc_x86_dpbusd(v1, u, qc_x86_vnni_tail(w + n + nv, n - nv));
    v2 = qc_x86_dpbusd(v2, u, qc_x86_vnni_tail(w + 2 * n + nv, n - nv));
    v3 = qc_x86_dpbusd(v3, u, qc_x86_vnni_tail(w + 3 * n + nv, n - nv));
    v4 = qc_x86_dpbusd(v4, u, qc_x86_vnni_tail(w + 4 * n + nv, n - nv));
    v5 = qc_x86_dpbusd(v5, u, qc_x86_vnni_tail(w + 5 * n + nv, n - nv));
    v6 = qc_x86_dpbusd(v6, u, qc_x86_vnni_tail(w + 6 * n + nv, n - nv));
    v7 = qc_x86_dpbusd(v7, u, qc_x86_vnni_tail(w + 7 * n + nv, n - nv));
  }
  /* per 128-bit half: lane j of h0 (h1) holds partial sums of row j (4 + j) */
  const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v4, v5), _mm256_hadd_epi32(v6, v7));
  __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
  for (int32_t i = qc_x86_vnni_covered(n); i < n; ++i) {
    const int32_t u = a[i] + 128;
    s = _mm256_add_epi32(s, _mm256_setr_epi32(u * w[i], u * w[n + i], u * w[2 * n + i], u * w[3 * n + i],
                                              u * w[4 * n + i], u * w[5 * n + i], u * w[6 * n + i], u * w[7 * n + i]));
  }
  return s;
}

/* qc_x86_vnni_dot_8rows_s8 for n = 4, 8 or 16 (called with a constant n: one branch remains): the 8 rows are 8n
   contiguous bytes, 32 / n rows per vector against the n input bytes broadcast, no tails. */
QC_X86_INLINE __m256i qc_x86_vnni_dot_8rows_short_s8(const int8_t *a, const int8_t *w, int32_t n) {
  const __m256i z = _mm256_setzero_si256(), flip = _mm256_set1_epi8(-128);
  if (n == 4) { /* lane r: row r */
    int32_t x;
    memcpy(&x, a, 4);
    return qc_x86_dpbusd(z, _mm256_xor_si256(_mm256_set1_epi32(x), flip), qc_x86_vnni_w(w));
  }
  if (n == 8) { /* lanes 2r, 2r + 1 of d0 (d1): row r (4 + r); hadd: rows 0 1 4 5 | 2 3 6 7 */
    const __m256i u =
        _mm256_xor_si256(_mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(const void *)a)), flip);
    const __m256i h = _mm256_hadd_epi32(qc_x86_dpbusd(z, u, qc_x86_vnni_w(w)), qc_x86_dpbusd(z, u, qc_x86_vnni_w(w + 32)));
    return _mm256_permute4x64_epi64(h, 0xd8);
  }
  /* n == 16: lanes 4j .. 4j + 3 of d_q: row 2q + j; two hadds: rows 0 2 4 6 | 1 3 5 7 */
  const __m256i u =
      _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a)), flip);
  const __m256i h = _mm256_hadd_epi32(
      _mm256_hadd_epi32(qc_x86_dpbusd(z, u, qc_x86_vnni_w(w)), qc_x86_dpbusd(z, u, qc_x86_vnni_w(w + 32))),
      _mm256_hadd_epi32(qc_x86_dpbusd(z, u, qc_x86_vnni_w(w + 64)), qc_x86_dpbusd(z, u, qc_x86_vnni_w(w + 96))));
  return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
#endif

/* ---- window packing of the blocked kernels: each writes the packed form of the n int8 at x at dst (dst and x do
   not overlap), by vectors, the last one overlapping the previous (it rewrites the same values). ---- */

/* dst[i] = x[i] - izp as int16 (|x - izp| <= 255): VPMADDWD operands (qc_x86_gemm_madd). */
QC_X86_INLINE void qc_x86_pack_s16(int16_t *dst, const int8_t *x, int32_t n, int32_t izp) {
  if (n >= 16) {
    const __m256i z = _mm256_set1_epi16((int16_t)izp);
    for (int32_t i = 0; i + 16 <= n; i += 16) {
      _mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm256_sub_epi16(qc_x86_load16_s8(x + i), z));
    }
    if (n % 16) {
      _mm256_storeu_si256((__m256i *)(void *)(dst + n - 16), _mm256_sub_epi16(qc_x86_load16_s8(x + n - 16), z));
    }
  } else if (n >= 8) {
    const __m128i z = _mm_set1_epi16((int16_t)izp);
    _mm_storeu_si128((__m128i *)(void *)dst, _mm_sub_epi16(qc_x86_load8_s16(x), z));
    _mm_storeu_si128((__m128i *)(void *)(dst + n - 8), _mm_sub_epi16(qc_x86_load8_s16(x + n - 8), z));
  } else if (n >= 4) { /* 4 (overlapping) elements twice: 4-byte loads, 8-byte stores */
    const __m128i z = _mm_set1_epi16((int16_t)izp);
    int32_t t0, t1;
    memcpy(&t0, x, 4);
    memcpy(&t1, x + n - 4, 4);
    _mm_storel_epi64((__m128i *)(void *)dst, _mm_sub_epi16(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(t0)), z));
    _mm_storel_epi64((__m128i *)(void *)(dst + n - 4), _mm_sub_epi16(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(t1)), z));
  } else {
    for (int32_t i = 0; i < n; ++i) {
      dst[i] = (int16_t)(x[i] - izp);
    }
  }
}

/* dst[i] = x[i] + 128 = x[i] ^ 0x80 as unsigned bytes: VPDPBUSD operands (qc_x86_gemm_vnni). */
QC_X86_INLINE void qc_x86_pack_u8(uint8_t *dst, const int8_t *x, int32_t n) {
  const __m128i f = _mm_set1_epi8(-128);
  if (n >= 32) {
    const __m256i f32 = _mm256_set1_epi8(-128);
    for (int32_t i = 0; i + 32 <= n; i += 32) {
      _mm256_storeu_si256((__m256i *)(void *)(dst + i),
                          _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + i)), f32));
    }
    if (n % 32) {
      _mm256_storeu_si256((__m256i *)(void *)(dst + n - 32),
                          _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + n - 32)), f32));
    }
  } else if (n >= 16) {
    _mm_storeu_si128((__m128i *)(void *)dst, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)x), f));
    _mm_storeu_si128((__m128i *)(void *)(dst + n - 16),
                     _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(x + n - 16)), f));
  } else if (n >= 8) {
    _mm_storel_epi64((__m128i *)(void *)dst, _mm_xor_si128(_mm_loadl_epi64((const __m128i *)(const void *)x), f));
    _mm_storel_epi64((__m128i *)(void *)(dst + n - 8),
                     _mm_xor_si128(_mm_loadl_epi64((const __m128i *)(const void *)(x + n - 8)), f));
  } else {
    for (int32_t i = 0; i < n; ++i) {
      dst[i] = (uint8_t)((uint8_t)x[i] ^ 0x80u);
    }
  }
}

/* u = x + 128 (0 .. 255) split into its nibbles: l[i] = u & 15 at dst[i] and h[i] = u >> 4 at dst[kpad + i]
   (qc_x86_gemm_ubs), by vectors of 16 bytes, the rest scalar. */
QC_X86_INLINE void qc_x86_pack_nibbles(uint8_t *dst, const int8_t *x, int32_t n, int32_t kpad) {
  const __m128i f = _mm_set1_epi8(-128), m = _mm_set1_epi8(15);
  const int32_t nv = n >= 16 ? n : 0;
  for (int32_t i = 0; i < nv; i += 16) {
    const int32_t o = i + 16 <= n ? i : n - 16;
    const __m128i u = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(x + o)), f);
    _mm_storeu_si128((__m128i *)(void *)(dst + o), _mm_and_si128(u, m));
    _mm_storeu_si128((__m128i *)(void *)(dst + kpad + o), _mm_and_si128(_mm_srli_epi16(u, 4), m));
  }
  for (int32_t i = nv; i < n; ++i) {
    const uint8_t u = (uint8_t)((uint8_t)x[i] ^ 0x80u);
    dst[i] = (uint8_t)(u & 15u);
    dst[kpad + i] = (uint8_t)(u >> 4);
  }
}

/* ---- the blocked kernels: acc[j * nb + b] (lane r: row 8b + r of the block of 8 or 16 rows, b < nb <= 2) of the
   np <= 4 windows j (at x + j * xs) gains the products of each window with the block's rows, re-laid as
   w + (b * kq + q) * (8 * group) for the kq groups q of `group` elements. ---- */

/* Lanes of unsigned int32 (int16) for the accumulators of the blocked kernels: a GNU vector type, whose `+` GCC keeps
   in the accumulators' registers (with _mm256_add_epi32 on __m256i, GCC 12 copies and spills them each step); the
   sums are modular, the same bits as VPADDD (VPADDW). */
typedef uint32_t qc_x86_u32x8 __attribute__((vector_size(32)));
typedef uint16_t qc_x86_u16x16 __attribute__((vector_size(32)));

/* AVX2, windows as int16 x - izp (qc_x86_pack_s16), weights madd_2x8 (group 2: 16 bytes, sign-extended once for
   the np windows): VPMADDWD of the broadcast int16 pair 2q, 2q + 1 of window j. */
QC_X86_INLINE void qc_x86_madd_blocks(const int16_t *x, int32_t xs, const int8_t *w, int32_t kq, int32_t np,
                                      int32_t nb, __m256i *acc) {
  qc_x86_u32x8 a[8];
#pragma GCC unroll 8
  for (int32_t i = 0; i < np * nb; ++i) {
    a[i] = (qc_x86_u32x8)acc[i];
  }
  for (int32_t q = 0; q < kq; ++q) {
    __m256i wv[2];
#pragma GCC unroll 2
    for (int32_t b = 0; b < nb; ++b) {
      wv[b] = qc_x86_load16_s8(w + (b * kq + q) * 16);
    }
#pragma GCC unroll 4
    for (int32_t j = 0; j < np; ++j) {
      int32_t t;
      memcpy(&t, x + j * xs + 2 * q, 4);
      const __m256i xv = _mm256_set1_epi32(t);
#pragma GCC unroll 2
      for (int32_t b = 0; b < nb; ++b) {
        a[j * nb + b] += (qc_x86_u32x8)_mm256_madd_epi16(xv, wv[b]);
      }
    }
  }
#pragma GCC unroll 8
  for (int32_t i = 0; i < np * nb; ++i) {
    acc[i] = (__m256i)a[i];
  }
}

/* AVX2, one window (a fully connected layer: no weight vector serves several pixels, so the weights' sign
   extension of madd_2x8 would cost as much as the products) as the nibbles of u = x + 128 (qc_x86_pack_nibbles: l
   at x, h at x + 4 kq), weights dpbusd_4x8 read as they are (group 4: 32 bytes): VPMADDUBSW of the broadcast 4
   nibbles of l (h) against them gives per int16 lane 2r (2r + 1) the 2 products of row r with elements 0, 1 (2, 3):
   |nibble * w| <= 15 * 128 = 1920, so a lane is at most 3840 in magnitude (never saturated) and the sum of 8 of
   them at most 30720 < 2^15: the int16 lanes add 8 groups exactly, then VPMADDWD by 1 (l) and by 16 (h) adds lanes
   2r, 2r + 1 into int32 lane r: the sum of u * w. Groups q0 .. q0 + n - 1 (n <= 8) into acc[b]. */
QC_X86_INLINE void qc_x86_ubs_groups(const uint8_t *x, const int8_t *w, int32_t kq, int32_t q0, int32_t n, int32_t nb,
                                     __m256i *acc) {
  qc_x86_u16x16 lo[2], hi[2];
#pragma GCC unroll 2
  for (int32_t b = 0; b < nb; ++b) {
    lo[b] = (qc_x86_u16x16)_mm256_setzero_si256();
    hi[b] = lo[b];
  }
#pragma GCC unroll 8
  for (int32_t q = q0; q < q0 + n; ++q) {
    int32_t tl, th;
    memcpy(&tl, x + 4 * q, 4);
    memcpy(&th, x + 4 * kq + 4 * q, 4);
    const __m256i xl = _mm256_set1_epi32(tl), xh = _mm256_set1_epi32(th);
#pragma GCC unroll 2
    for (int32_t b = 0; b < nb; ++b) {
      const __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(w + (b * kq + q) * 32));
      lo[b] += (qc_x86_u16x16)_mm256_maddubs_epi16(xl, wv);
      hi[b] += (qc_x86_u16x16)_mm256_maddubs_epi16(xh, wv);
      __asm__("" : "+x"(lo[b]), "+x"(hi[b])); /* keeps GCC from re-associating the sums into trees (spills) */
    }
  }
#pragma GCC unroll 2
  for (int32_t b = 0; b < nb; ++b) {
    acc[b] = _mm256_add_epi32(acc[b], _mm256_add_epi32(_mm256_madd_epi16((__m256i)lo[b], _mm256_set1_epi16(1)),
                                                       _mm256_madd_epi16((__m256i)hi[b], _mm256_set1_epi16(16))));
  }
}
QC_X86_INLINE void qc_x86_ubs_blocks(const uint8_t *x, const int8_t *w, int32_t kq, int32_t nb, __m256i *acc) {
  for (int32_t q0 = 0; q0 + 8 <= kq; q0 += 8) {
    qc_x86_ubs_groups(x, w, kq, q0, 8, nb, acc);
  }
  if (kq % 8) {
    qc_x86_ubs_groups(x, w, kq, kq / 8 * 8, kq % 8, nb, acc);
  }
}

#if QC_X86_VNNI
/* VNNI, windows as bytes u = x + 128 (qc_x86_pack_u8), weights dpbusd_4x8 (group 4): VPDPBUSD of the broadcast 4
   bytes of window j. */
QC_X86_INLINE void qc_x86_dpbusd_blocks(const uint8_t *x, int32_t xs, const int8_t *w, int32_t kq, int32_t np,
                                        int32_t nb, __m256i *acc) {
  for (int32_t q = 0; q < kq; ++q) {
    __m256i wv[2];
#pragma GCC unroll 2
    for (int32_t b = 0; b < nb; ++b) {
      wv[b] = qc_x86_vnni_w(w + (b * kq + q) * 32);
    }
#pragma GCC unroll 4
    for (int32_t j = 0; j < np; ++j) {
      int32_t t;
      memcpy(&t, x + j * xs + 4 * q, 4);
      const __m256i xv = _mm256_set1_epi32(t);
#pragma GCC unroll 2
      for (int32_t b = 0; b < nb; ++b) {
        acc[j * nb + b] = qc_x86_dpbusd(acc[j * nb + b], xv, wv[b]);
      }
    }
  }
}
#endif

/* The constants of the blocked kernels: w: the re-laid weights of the blocked rows (madd_2x8 or dpbusd_4x8);
   starts: the accumulators' start of each blocked row (the bias, less (128 + izp) * the row sum for windows of
   x + 128: the exact sum of (x - izp) * w is the sum of u * w less that; modulo 2^32 like the int32 lanes, which
   end at the exact accumulator, in int32); rows: the output channels of a pixel; blocked: those in whole blocks of
   8 (the others are not the kernels'); kq: groups of a window; xs: the packed windows' stride (elements). */
typedef struct {
  const int8_t *w;
  const int32_t *starts;
  int32_t rows, blocked, kq, xs;
} qc_x86_gemm_params;

enum { QC_X86_MADD, QC_X86_UBS, QC_X86_DPBUSD };

/* Output channels oc0 .. oc0 + 8 nb - 1 of the np packed windows at x (kernel `kern`), requantized by R, pixel j's
   at y + j * rows. */
QC_X86_INLINE void qc_x86_gemm_block(const qc_x86_gemm_params *G, const qc_x86_rq *R, int kern, const void *x,
                                     int32_t np, int32_t nb, int32_t oc0, void *y) {
  __m256i acc[8];
#pragma GCC unroll 2
  for (int32_t b = 0; b < nb; ++b) {
    const __m256i start = qc_x86_load8_i32(G->starts + oc0 + 8 * b);
#pragma GCC unroll 4
    for (int32_t j = 0; j < np; ++j) {
      acc[j * nb + b] = start;
    }
  }
  const int32_t group = kern == QC_X86_MADD ? 2 : 4;
  const int8_t *w = G->w + oc0 * G->kq * group;
  if (kern == QC_X86_MADD) {
    qc_x86_madd_blocks((const int16_t *)x, G->xs, w, G->kq, np, nb, acc);
  } else if (kern == QC_X86_UBS) {
    qc_x86_ubs_blocks((const uint8_t *)x, w, G->kq, nb, acc);
  } else {
#if QC_X86_VNNI
    qc_x86_dpbusd_blocks((const uint8_t *)x, G->xs, w, G->kq, np, nb, acc);
#endif
  }
#pragma GCC unroll 4
  for (int32_t j = 0; j < np; ++j) {
#pragma GCC unroll 2
    for (int32_t b = 0; b < nb; ++b) {
      qc_x86_rq8_store(R, acc[j * nb + b], oc0 + 8 * b, y, j * G->rows + oc0 + 8 * b);
    }
  }
}

/* Every blocked output channel of the np <= 4 packed windows at x (x + j * G->xs: qc_x86_pack_* of pixel j),
   requantized by R and stored at y (pixel j at y + j * rows), by blocks of 16 channels (4 x 2 accumulators: each
   weight vector serves 4 pixels) and a last block of 8. kern: QC_X86_MADD (windows of qc_x86_pack_s16), QC_X86_UBS
   (one window of qc_x86_pack_nibbles) or QC_X86_DPBUSD (windows of qc_x86_pack_u8; VNNI targets). */
QC_X86_INLINE void qc_x86_gemm_s8(const qc_x86_gemm_params *G, const qc_x86_rq *R, int kern, const void *x,
                                  int32_t np, void *y) {
  const int32_t b16 = G->blocked / 16 * 16;
  for (int32_t oc0 = 0; oc0 < b16; oc0 += 16) {
    qc_x86_gemm_block(G, R, kern, x, np, 2, oc0, y);
  }
  if (G->blocked > b16) {
    qc_x86_gemm_block(G, R, kern, x, np, 1, b16, y);
  }
}

#endif
