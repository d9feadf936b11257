/* qc_hvx.h: qcodegen's int8 kernels for Hexagon with HVX in 128-byte mode (target hexagon-hvx; clang 14's
 * hexagon_types.h / hexagon_protos.h intrinsics, -mhvx -mhvx-length=128b). Which kernel a step runs is decided at
 * generation time (qcodegen/kernels/hvx/; docs/targets.md "Hexagon"). The kernels are static inline functions of
 * this header, called by the generated steps with constant arguments, so that the compiler specializes them per step.
 *
 * qc_hvx_dot_rows32_s8: the dot products of an input row with weight rows laid out 32 rows to a vector
 * (qcodegen/kernels/hvx/layouts.py rows32): VRMPY (Q6_Vw_vrmpyacc_VwVbVb), four int8 x int8 products summed into
 * each of 32 int32 lanes per instruction; qc_hvx_dw_tap_s8: one tap of a depthwise convolution over its channels,
 * 64 a vector of int16 products. C99; -Wall -Wextra -Werror -pedantic clean.
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_HVX_H
#define QC_HVX_H

#include <hexagon_protos.h>
#include <hexagon_types.h>
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
    HVX_Vector acc = Q6_V_vzero();
    for (int32_t j = 0; j < words; ++j) {
      int32_t xw;
      __builtin_memcpy(&xw, x + 4 * j, 4);
      acc = Q6_Vw_vrmpyacc_VwVbVb(acc, w[j], Q6_V_vsplat_R(xw));
    }
    if (tail) {
      acc = Q6_Vw_vrmpyacc_VwVbVb(acc, w[words], Q6_V_vsplat_R(last));
    }
    *(qc_hvx_uvec *)(void *)(s + 32 * b) = acc;
  }
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

#endif
