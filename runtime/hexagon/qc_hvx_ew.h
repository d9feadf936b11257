/* qc_hvx_ew.h: qcodegen's element-wise chains (FUSED_ELEMENTWISE, e.g. TFLite's int8 ADD: both inputs minus their
 * zero points shifted left by 20, each scaled by its own multiplier, summed, the sum requantized to the output) for
 * Hexagon HVX in 128-byte mode. 128 elements an iteration, as four vectors of 32 int32 lanes in element order:
 * the int8 / int16 / int32 inputs loaded and widened (qc_hvx_ew_load), the parts (RESCALE with a 32-bit scale:
 * shifts 31..62 by qc_hvx_scale of qc_hvx.h, powers of two below by shifts; CLAMP; int32 ADD / SUB, wrapping like
 * the scalar (int32_t) casts) on each vector, the last part's lanes narrowed and stored (qc_hvx_ew_store). Every
 * value of a part is in its output type (at most int32): the lanes hold it exactly, and the narrowing (low halves)
 * is exact. The kernel choice (qcodegen/kernels/hvx/choice.py) takes the chains whose every part qualifies.
 * C99; -Wall -Wextra -Werror -pedantic clean.
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_HVX_EW_H
#define QC_HVX_EW_H

#include "qc_hvx.h"

#define QC_HVX_EW static inline __attribute__((always_inline, unused))

/* The elements i .. i + 127 of x (size elements of `bytes` bytes each: int8_t, int16_t or int32_t) as the int32
   lanes of v[0..3] in order (v[q] lane l: element i + 32 q + l), 0 past the last element. The 128 bytes of each
   vector are read by qc_hvx_load_s8 (never past x's end), then widened in order by VUNPACK (byte j -> halfword j,
   bytes 0..63 in the low vector; halfword j -> word j, halfwords 0..31 in the low vector), sign-extending. */
QC_HVX_EW void qc_hvx_ew_load(const void *x, int32_t bytes, int32_t size, int32_t i, HVX_Vector v[4]) {
  const int8_t *b = (const int8_t *)x;
  const int32_t total = size * bytes;
  HVX_Vector raw[4];
  for (int32_t j = 0; j < bytes; ++j) {
    const int32_t off = i * bytes + 128 * j;
    raw[j] = off < total ? qc_hvx_load_s8(b, total, off, total - off < 128 ? total - off : 128) : Q6_V_vzero();
  }
  if (bytes == 1) {
    const HVX_VectorPair h = Q6_Wh_vunpack_Vb(raw[0]);
    const HVX_VectorPair lo = Q6_Ww_vunpack_Vh(Q6_V_lo_W(h)), hi = Q6_Ww_vunpack_Vh(Q6_V_hi_W(h));
    v[0] = Q6_V_lo_W(lo);
    v[1] = Q6_V_hi_W(lo);
    v[2] = Q6_V_lo_W(hi);
    v[3] = Q6_V_hi_W(hi);
  } else if (bytes == 2) {
    for (int32_t j = 0; j < 2; ++j) {
      const HVX_VectorPair w = Q6_Ww_vunpack_Vh(raw[j]);
      v[2 * j] = Q6_V_lo_W(w);
      v[2 * j + 1] = Q6_V_hi_W(w);
    }
  } else {
    for (int32_t j = 0; j < 4; ++j) {
      v[j] = raw[j];
    }
  }
}

/* Stores the elements i .. min(i + 128, size) - 1 from the int32 lanes of v[0..3] (each within the output type)
   to y (size elements of `bytes` bytes): narrowed in order by VPACKE (the even halfwords, i.e. each word's low half,
   of the second operand then the first; likewise the even bytes), whole vectors by unaligned stores, a last partial
   one by qc_hvx_store_bytes (only y's bytes are written). */
QC_HVX_EW void qc_hvx_ew_store(void *y, int32_t bytes, int32_t size, int32_t i, const HVX_Vector v[4]) {
  int8_t *b = (int8_t *)y;
  const int32_t total = size * bytes;
  HVX_Vector out[4] = {v[0], v[1], v[2], v[3]};
  if (bytes == 1) {
    out[0] = Q6_Vb_vpacke_VhVh(Q6_Vh_vpacke_VwVw(v[3], v[2]), Q6_Vh_vpacke_VwVw(v[1], v[0]));
  } else if (bytes == 2) {
    out[0] = Q6_Vh_vpacke_VwVw(v[1], v[0]);
    out[1] = Q6_Vh_vpacke_VwVw(v[3], v[2]);
  }
  for (int32_t j = 0; j < bytes; ++j) {
    const int32_t off = i * bytes + 128 * j;
    if (total - off >= 128) {
      *(qc_hvx_uvec *)(void *)(b + off) = out[j];
    } else if (off < total) {
      qc_hvx_store_bytes(out[j], b + off, total - off);
    }
  }
}

/* min(max(v, lo), hi), a side left out where it is the int32 bound (no effect). */
QC_HVX_EW HVX_Vector qc_hvx_ew_clamp(HVX_Vector v, int32_t lo, int32_t hi) {
  const HVX_Vector r = lo > INT32_MIN ? Q6_Vw_vmax_VwVw(v, Q6_V_vsplat_R(lo)) : v;
  return hi < INT32_MAX ? Q6_Vw_vmin_VwVw(r, Q6_V_vsplat_R(hi)) : r;
}

/* clamp(y + zp, lo, hi) of the exact sum (lo..hi inside int32): the saturating VADD (y + zp clamped to int32), then
   the clamp to lo..hi, a sub-range. */
QC_HVX_EW HVX_Vector qc_hvx_ew_zp_clamp(HVX_Vector y, int32_t zp, int32_t lo, int32_t hi) {
  return qc_hvx_ew_clamp(zp ? Q6_Vw_vadd_VwVw_sat(y, Q6_V_vsplat_R(zp)) : y, lo, hi);
}

/* RESCALE (per tensor, 32-bit scale, multiplier 0 <= m < 2^31, TOSA shift 31 + r with 0 <= r <= 31) of v - izp
   (VSUB wraps like the scalar (int32_t) cast of the difference): qc_hvx_scale with m and r splat (rnd 0 for
   SINGLE_ROUND above shift 31, else 1; the proof is beside qc_hvx_scale), then the zero point and clamp
   (qc_hvx_ew_zp_clamp). */
QC_HVX_EW HVX_Vector qc_hvx_ew_rescale(HVX_Vector v, int32_t izp, int32_t m, int32_t r, int32_t rnd, int32_t zp,
                                       int32_t lo, int32_t hi) {
  const HVX_Vector a = izp ? Q6_Vw_vsub_VwVw(v, Q6_V_vsplat_R(izp)) : v;
  const HVX_Vector y = qc_hvx_scale(a, Q6_V_vsplat_R(m), Q6_V_vsplat_R(r), rnd);
  return qc_hvx_ew_zp_clamp(y, zp, lo, hi);
}

/* RESCALE by a multiplier 2^k and a shift s <= 30 (the roundings differ above 31 only) of v - izp (wrapping as in
   qc_hvx_ew_rescale), n = k - s:
     n >= 0: floor((v 2^k + 2^(s-1)) / 2^s) = v 2^n, the rounding term being below the multiple 2^s of v 2^k; VASL
             keeps its low 32 bits, as the scalar's (int32_t) cast of the int64 result does;
     n < 0:  with d = -n (1 <= d <= 30), dividing by 2^k: floor((v + 2^(d-1)) / 2^d) = (v >> d) +
             (((v & (2^d - 1)) + 2^(d-1)) >> d), the second shift logical on 0 <= (v & (2^d - 1)) + 2^(d-1) < 2^31
             (step 4 of qc_hvx_scale with rnd 0): no overflow;
   then the zero point and clamp (qc_hvx_ew_zp_clamp). */
QC_HVX_EW HVX_Vector qc_hvx_ew_rescale_pow2(HVX_Vector v, int32_t izp, int32_t n, int32_t zp, int32_t lo,
                                            int32_t hi) {
  const HVX_Vector a = izp ? Q6_Vw_vsub_VwVw(v, Q6_V_vsplat_R(izp)) : v;
  HVX_Vector y = a;
  if (n > 0) {
    y = Q6_Vw_vasl_VwR(a, n);
  } else if (n < 0) {
    const int32_t d = -n;
    const HVX_Vector f = Q6_V_vand_VV(a, Q6_V_vsplat_R((int32_t)(((uint32_t)1 << d) - 1u)));
    const HVX_Vector up = Q6_Vuw_vlsr_VuwR(Q6_Vw_vadd_VwVw(f, Q6_V_vsplat_R((int32_t)1 << (d - 1))), d);
    y = Q6_Vw_vadd_VwVw(Q6_Vw_vasr_VwR(a, d), up);
  }
  return qc_hvx_ew_zp_clamp(y, zp, lo, hi);
}

/* int32 ADD / SUB (wrapping, as the scalar (int32_t) casts). */
QC_HVX_EW HVX_Vector qc_hvx_ew_add(HVX_Vector a, HVX_Vector b) {
  return Q6_Vw_vadd_VwVw(a, b);
}
QC_HVX_EW HVX_Vector qc_hvx_ew_sub(HVX_Vector a, HVX_Vector b) {
  return Q6_Vw_vsub_VwVw(a, b);
}

#endif
