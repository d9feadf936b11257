/* qc_rvv.h: qcodegen's int8 kernels for RISC-V with the vector extension RVV 1.0 (target riscv64-rvv; intrinsics API
 * v0.10 as clang 14 implements it). The V extension guarantees VLEN >= 128, so an e8m1 / e32m4 register group holds
 * at least 16 elements. Which kernel a step runs is decided at generation time (qcodegen/kernels/rvv/;
 * docs/targets.md "RISC-V"). Every kernel is a static inline function of this header, called by the generated steps
 * with constant arguments (a parameter struct of constants included), so that the compiler specializes it for the
 * step: the requantization's per-channel or per-tensor scales, its rounding and output type fold away.
 *
 * Names: qc_rvv_dot_s8, qc_rvv_dot_rows4_s8: sums of int8 products of one or four weight rows (no requantization);
 * qc_rvv_requantize_*: TOSA apply_scale_32 of int32 lanes plus the output zero point, clamped, stored as int8 or
 * int16; qc_rvv_dw_*: the steps of a depthwise block of channels kept in one int32 register group over the taps.
 * C99; -Wall -Wextra -Werror -pedantic clean. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_RVV_H
#define QC_RVV_H

#include <riscv_vector.h>
#include <stddef.h>
#include <stdint.h>

#define QC_RVV_INLINE static inline __attribute__((always_inline, unused))

/* ---- Dot products: VWMUL (int8 x int8 -> int16, at most 2^14) and VWREDSUM (widening sum into an int32), strip-mined
   with vsetvl (tails included). Exact: the caller keeps rows at most 65,535 long. ---------------------------------- */

/* The sum of a[i] * b[i], i < n. */
static inline __attribute__((unused)) int32_t qc_rvv_dot_s8(const int8_t *a, const int8_t *b, int32_t n) {
  vint32m1_t s = vmv_v_x_i32m1(0, 1);
  for (int32_t i = 0; i < n;) {
    const size_t vl = vsetvl_e8m2((size_t)(n - i));
    s = vwredsum_vs_i16m4_i32m1(s, vwmul_vv_i16m4(vle8_v_i8m2(a + i, vl), vle8_v_i8m2(b + i, vl), vl), s, vl);
    i += (int32_t)vl;
  }
  return vmv_x_s_i32m1_i32(s);
}

/* s[r] = the sum of a[i] * w[r * n + i], i < n, r < 4: four weight rows per input load. */
static inline __attribute__((unused)) void qc_rvv_dot_rows4_s8(const int8_t *a, const int8_t *w, int32_t n,
                                                               int32_t *s) {
  vint32m1_t s0 = vmv_v_x_i32m1(0, 1), s1 = s0, s2 = s0, s3 = s0;
  for (int32_t i = 0; i < n;) {
    const size_t vl = vsetvl_e8m2((size_t)(n - i));
    const vint8m2_t va = vle8_v_i8m2(a + i, vl);
    s0 = vwredsum_vs_i16m4_i32m1(s0, vwmul_vv_i16m4(va, vle8_v_i8m2(w + i, vl), vl), s0, vl);
    s1 = vwredsum_vs_i16m4_i32m1(s1, vwmul_vv_i16m4(va, vle8_v_i8m2(w + n + i, vl), vl), s1, vl);
    s2 = vwredsum_vs_i16m4_i32m1(s2, vwmul_vv_i16m4(va, vle8_v_i8m2(w + 2 * n + i, vl), vl), s2, vl);
    s3 = vwredsum_vs_i16m4_i32m1(s3, vwmul_vv_i16m4(va, vle8_v_i8m2(w + 3 * n + i, vl), vl), s3, vl);
    i += (int32_t)vl;
  }
  s[0] = vmv_x_s_i32m1_i32(s0);
  s[1] = vmv_x_s_i32m1_i32(s1);
  s[2] = vmv_x_s_i32m1_i32(s2);
  s[3] = vmv_x_s_i32m1_i32(s3);
}

/* ---- Requantization ------------------------------------------------------------------------------------------- */

/* A FUSED_CONV's RESCALE of int32 accumulators: per channel (multipliers, shifts; NULL: multiplier and shift for
   every channel), SINGLE_ROUND (dbl 0: qc_scale32_single) or DOUBLE_ROUND with shifts > 31 (dbl 1:
   qc_scale32_double_gt31), shifts 2..62, the output zero point, the output range [lo, hi] and type (bits: int8 or
   int16). */
typedef struct {
  const int32_t *multipliers;
  const int8_t *shifts;
  int32_t multiplier, shift, dbl, zp, lo, hi, bits;
  const int32_t *es, *ea, *ev; /* the exceptions to the single rounding, or NULL (qc_rvv_except) */
  int32_t epc;
} qc_rvv_rq;

/* TOSA apply_scale_32 of the vl int32 lanes of v (multipliers m, shifts s as int64 lanes): p = v * m + round
   (VWMACC: the exact 64-bit sum, |v * m| < 2^62 and round <= 2^61 + 2^30), round = 2^(s-1) (+ 2^30 - 2^31 * (v < 0)
   when dbl), then floor(p / 2^s) (VSRA) truncated to int32 (VNCVT). */
QC_RVV_INLINE vint32m4_t qc_rvv_scale32(vint32m4_t v, vint32m4_t m, vint64m8_t s, int32_t dbl, size_t vl) {
  vint64m8_t r = vsll_vv_i64m8(vmv_v_x_i64m8(1, vl), vreinterpret_v_i64m8_u64m8(vsub_vx_i64m8(s, 1, vl)), vl);
  if (dbl) {
    r = vadd_vx_i64m8(r, (int64_t)1 << 30, vl);
    r = vsub_vx_i64m8_m(vmslt_vx_i32m4_b8(v, 0, vl), r, r, (int64_t)1 << 31, vl);
  }
  const vint64m8_t p = vsra_vv_i64m8(vwmacc_vv_i64m8(r, v, m, vl), vreinterpret_v_i64m8_u64m8(s), vl);
  return vncvt_x_x_w_i32m4(p, vl);
}

/* The multipliers and the shifts (as int64 lanes) of the vl channels c0.. */
QC_RVV_INLINE vint32m4_t qc_rvv_multipliers(const qc_rvv_rq *rq, int32_t c0, size_t vl) {
  return rq->multipliers ? vle32_v_i32m4(rq->multipliers + c0, vl) : vmv_v_x_i32m4(rq->multiplier, vl);
}
QC_RVV_INLINE vint64m8_t qc_rvv_shifts(const qc_rvv_rq *rq, int32_t c0, size_t vl) {
  return rq->multipliers ? vsext_vf8_i64m8(vle8_v_i8m1(rq->shifts + c0, vl), vl) : vmv_v_x_i64m8(rq->shift, vl);
}

/* q (the requantized lanes of channels c0 .. c0 + vl - 1) with the exceptions to the single rounding applied
   (docs/semantics.md §14.5; es[c] .. es[c + 1] - 1 index the accumulators ea and values ev of channel c, epc: per
   channel, else every channel's are es[0] .. es[1] - 1): per exception of the strip's channels, the lanes whose
   accumulator is its accumulator (and, per channel, the lane of its channel: VID) take its value (VMERGE). One
   compare when the strip's channels have none. */
QC_RVV_INLINE vint32m4_t qc_rvv_except(const qc_rvv_rq *rq, vint32m4_t acc, vint32m4_t q, int32_t c0, size_t vl) {
  const int32_t c1 = c0 + (int32_t)vl;
  if (rq->epc ? rq->es[c0] == rq->es[c1] : rq->es[0] == rq->es[1]) {
    return q;
  }
  for (int32_t c = rq->epc ? c0 : 0; c < (rq->epc ? c1 : 1); ++c) {
    for (int32_t e = rq->es[c]; e < rq->es[c + 1]; ++e) {
      vbool8_t hit = vmseq_vx_i32m4_b8(acc, rq->ea[e], vl);
      if (rq->epc) {
        hit = vmand_mm_b8(hit, vmseq_vx_u32m4_b8(vid_v_u32m4(vl), (uint32_t)(c - c0), vl), vl);
      }
      q = vmerge_vxm_i32m4(hit, q, rq->ev[e], vl);
    }
  }
  return q;
}

/* The vl accumulators acc of channels c0.. requantized by rq with their multipliers m and shifts s
   (qc_rvv_multipliers, qc_rvv_shifts of c0: loaded by the caller, which measured fewer instructions than loads
   inside) and stored at y (the output of channel c0): qc_clamp64((int64_t)q + zp, lo, hi) of q = qc_rvv_scale32, for
   lo - zp and hi - zp in int32 (8/16-bit outputs: clamping q to [lo - zp, hi - zp] first gives the same values
   without overflow), narrowed to rq->bits; the exceptions applied before (qc_rvv_except). */
QC_RVV_INLINE void qc_rvv_requantize(const qc_rvv_rq *rq, vint32m4_t acc, vint32m4_t m, vint64m8_t s, int32_t c0,
                                     void *y, size_t vl) {
  vint32m4_t q = vadd_vx_i32m4(vmin_vx_i32m4(vmax_vx_i32m4(qc_rvv_scale32(acc, m, s, rq->dbl, vl),
                                                           rq->lo - rq->zp, vl), rq->hi - rq->zp, vl),
                               rq->zp, vl);
  if (rq->es) {
    q = qc_rvv_except(rq, acc, q, c0, vl);
  }
  if (rq->bits == 8) {
    vse8_v_i8m1((int8_t *)y, vncvt_x_x_w_i8m1(vncvt_x_x_w_i16m2(q, vl), vl), vl);
  } else {
    vse16_v_i16m2((int16_t *)y, vncvt_x_x_w_i16m2(q, vl), vl);
  }
}

/* The vl biases of channels c0.. (per channel, or bias[0] for every channel). */
QC_RVV_INLINE vint32m4_t qc_rvv_bias(const int32_t *bias, int per_channel, int32_t c0, size_t vl) {
  return per_channel ? vle32_v_i32m4(bias + c0, vl) : vmv_v_x_i32m4(bias[0], vl);
}

/* The n outputs of one pixel (y: its first, of rq->bits) from its int32 sums acc: requantized acc[c] + bias[c]
   - zc[c] (zc: izp x the weight row sums, made at generation time; NULL when the input zero point is 0), in vsetvl
   strips. */
QC_RVV_INLINE void qc_rvv_requantize_pixel(const qc_rvv_rq *rq, const int32_t *acc, const int32_t *bias,
                                           int bias_per_channel, const int32_t *zc, void *y, int32_t n) {
  for (int32_t c0 = 0; c0 < n;) {
    const size_t vl = vsetvl_e32m4((size_t)(n - c0));
    vint32m4_t a = vadd_vv_i32m4(vle32_v_i32m4(acc + c0, vl), qc_rvv_bias(bias, bias_per_channel, c0, vl), vl);
    if (zc) {
      a = vsub_vv_i32m4(a, vle32_v_i32m4(zc + c0, vl), vl);
    }
    qc_rvv_requantize(rq, a, qc_rvv_multipliers(rq, c0, vl), qc_rvv_shifts(rq, c0, vl), c0,
                      (char *)y + c0 * (rq->bits / 8), vl);
    c0 += (int32_t)vl;
  }
}

/* ---- Depthwise: a block of vl <= 16 channels (vl = vsetvl_e32m4(n) <= VLMAX of e32m4) in one int32 register
   group over the taps: VWMUL of raw x and w (at most 2^14), VWADD.WV; a padding tap VWMACC of pad_value. ---------- */

/* The block's accumulators at the start: -izp x the channels' weight sums (zc), or 0 (zc NULL). */
QC_RVV_INLINE vint32m4_t qc_rvv_dw_start(const int32_t *zc, size_t vl) {
  return zc ? vle32_v_i32m4(zc, vl) : vmv_v_x_i32m4(0, vl);
}

/* a + x[c] * w[c], c < vl (one tap: the input pixel's and the weight row's channels of the block). */
QC_RVV_INLINE vint32m4_t qc_rvv_dw_tap(vint32m4_t a, const int8_t *x, const int8_t *w, size_t vl) {
  return vwadd_wv_i32m4(a, vwmul_vv_i16m2(vle8_v_i8m1(x, vl), vle8_v_i8m1(w, vl), vl), vl);
}

/* a + pad * w[c], c < vl (a tap outside the input, which reads pad_value). */
QC_RVV_INLINE vint32m4_t qc_rvv_dw_pad(vint32m4_t a, int16_t pad, const int8_t *w, size_t vl) {
  return vwmacc_vx_i32m4(a, pad, vsext_vf2_i16m2(vle8_v_i8m1(w, vl), vl), vl);
}

#endif
