/* qc_cm_rq.h: qcodegen's exact requantization helpers for Cortex-M cores with the DSP extension's SMLAL and SSAT
 * (Cortex-M4, M7, M55): TOSA apply_scale_32 plus the output zero point for shifts 33..62, used by the kernels of
 * qc_cm_dsp.h and by the stores of generated models (docs/targets.md "Cortex-M4/M7"). Header-only, C99 with GCC
 * inline asm. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_CM_RQ_H
#define QC_CM_RQ_H

#include <stdint.h>

/* The kernels' inline asm needs every allocatable core register; GCC without optimization keeps a frame pointer
   and cannot allocate them ("impossible constraints"). */
#if defined(__GNUC__) && !defined(__OPTIMIZE__)
#error "qcodegen: compile the Cortex-M kernels with optimization (-O1, -O2, -O3, -Os, or -Og for debugging), not -O0"
#endif

/* TOSA apply_scale_32 + zero point, for 33 <= s <= 62, exactly (zp2p1 = 2 * zp + 1): qc_scale32_double_gt31 (dbl)
   or qc_scale32_single (!dbl) of v, m, s, plus zp. With X = v * m + R0, R0 = 2^30 - 2^31 * (v < 0) when dbl, else 0,
   the value is floor((X + 2^(s-1)) / 2^s) + zp, and floor((X + 2^(s-1)) / 2^s) = floor((q + 1) / 2) with
   q = floor(X / 2^(s-1)) (write X = q * 2^(s-1) + e, 0 <= e < 2^(s-1)); adding the even 2 * zp inside the halving
   is exact. SMLAL builds X in hi:lo from hi:lo = R0 (for v < 0: hi = -1, lo = 0xC0000000; else hi = 0,
   lo = 0x40000000), exact as |X| < 2^63, and q = floor(floor(X / 2^32) / 2^(s-33)) = hi >> (s - 33) (arithmetic;
   qc_dsp_floor_s33), |q| <= 2^30: no overflow in q + zp2p1. */
static inline __attribute__((always_inline, unused)) int32_t qc_dsp_floor_s33(int32_t v, int32_t m, int32_t s,
                                                                            int dbl) {
  int32_t hi = 0;
  uint32_t lo = 0;
  if (dbl) {
    __asm__("asr %0, %1, #31" : "=r"(hi) : "r"(v));
    lo = ((uint32_t)v & 0x80000000u) | 0x40000000u;
  }
  __asm__("smlal %0, %1, %2, %3" : "+r"(lo), "+r"(hi) : "r"(v), "r"(m));
  __asm__("asr %0, %0, %1" : "+r"(hi) : "r"(s - 33));
  return hi;
}

/* The value described above: floor((q + zp2p1) / 2), q = qc_dsp_floor_s33 = floor(X / 2^(s-1)). */
static inline __attribute__((always_inline, unused)) int32_t qc_dsp_scale32_s33(int32_t v, int32_t m, int32_t s,
                                                                              int32_t zp2p1, int dbl) {
  int32_t hi = qc_dsp_floor_s33(v, m, s, dbl) + zp2p1;
  __asm__("asr %0, %0, #1" : "+r"(hi));
  return hi;
}

/* SSAT to 8 / 16 bits of qc_dsp_scale32_s33, the halving done by SSAT's shift. */
static inline __attribute__((always_inline, unused)) int32_t qc_dsp_sat8_s33(int32_t v, int32_t m, int32_t s,
                                                                           int32_t zp2p1, int dbl) {
  int32_t r;
  __asm__("ssat %0, #8, %1, asr #1" : "=r"(r) : "r"(qc_dsp_floor_s33(v, m, s, dbl) + zp2p1));
  return r;
}
static inline __attribute__((always_inline, unused)) int32_t qc_dsp_sat16_s33(int32_t v, int32_t m, int32_t s,
                                                                            int32_t zp2p1, int dbl) {
  int32_t r;
  __asm__("ssat %0, #16, %1, asr #1" : "=r"(r) : "r"(qc_dsp_floor_s33(v, m, s, dbl) + zp2p1));
  return r;
}

/* The exceptions to the single rounding (a float32 requantization's, enumerated at plan time: docs/semantics.md
   §14.5): es[k] .. es[k + 1] - 1 index channel k's accumulators ea and int8 outputs ev (pc; else es[0] .. es[1] - 1
   those of every channel). qc_dsp_excepted: whether channels c .. c + n - 1 have any (two loads and a compare, the
   test of a block of outputs); qc_dsp_except: the output y[c + k] of accumulator s[k] that is one of its channel's
   becomes the exception's (compares only). */
static inline __attribute__((always_inline, unused)) int qc_dsp_excepted(const int32_t *es, int32_t c, int32_t n,
                                                                        int pc) {
  return pc ? es[c] != es[c + n] : es[0] != es[1];
}
static inline __attribute__((always_inline, unused)) void qc_dsp_except(const int32_t *es, const int32_t *ea,
    const int32_t *ev, int32_t c, int32_t n, int pc, const int32_t *s, int8_t *y) {
  for (int32_t k = 0; k < n; ++k) {
    for (int32_t e = es[pc ? c + k : 0]; e < es[pc ? c + k + 1 : 1]; ++e) {
      if (s[k] == ea[e]) {
        y[c + k] = (int8_t)ev[e];
      }
    }
  }
}

/* max(v, lo) */
static inline __attribute__((always_inline, unused)) int32_t qc_dsp_max(int32_t v, int32_t lo) {
  return v < lo ? lo : v;
}

#endif
