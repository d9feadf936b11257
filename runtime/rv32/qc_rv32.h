/* qc_rv32.h: qcodegen's int8 kernels for scalar RISC-V RV32IM (target riscv32: no P or V extension). There is no
 * multiply-accumulate, so a MAC costs at least MUL + ADD; the loads are what blocking saves. Which kernel a step
 * runs, and the weight layout it reads, is decided at generation time (qcodegen/kernels/rv32/; docs/targets.md
 * "RISC-V"). Two forms, chosen by the measured instructions and code size:
 *   - the register-block dot products qc_rv32_dot_rows<R>x<P>[_of<XS>]_s8 (R weight rows x P output pixels whose
 *     windows are interleaved in groups of XS, = P when absent) are static functions of qc_rv32_dot.h, compiled
 *     into each model and specialized by the compiler for its row lengths (measured smaller and faster than
 *     shared copies);
 *   - the requantization and the copies are static inline functions of this header, called by the generated
 *     steps with constant arguments (the compiler folds the mode and the strides).
 * C99 with GCC inline asm; -Wall -Wextra -Werror -pedantic clean. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_RV32_H
#define QC_RV32_H

#include <stdint.h>

/* The requantization modes of qc_rv32_scale32 (the kernel choice picks one per step). */
#define QC_RV32_SINGLE 0    /* TOSA SINGLE_ROUND, shifts 33..62 */
#define QC_RV32_DOUBLE 1    /* TOSA DOUBLE_ROUND, shifts 33..62 */
#define QC_RV32_DOUBLE_29 2 /* TOSA DOUBLE_ROUND, shifts 32..62, accumulators |v| < 2^29 */

/* TOSA apply_scale_32 of v by (m, s) plus the zero point zp, exactly (zp2p1 = 2 * zp + 1; 16-bit zero points),
   instead of a 64-bit product and shift. The shifts are SRA (an arithmetic shift of negative values: asm, not C's
   implementation-defined one).
   QC_RV32_SINGLE and QC_RV32_DOUBLE (qc_scale32_single, qc_scale32_double_gt31), 33 <= s <= 62: with
   X = v * m + R0 (R0 = 0, or for the double rounding 2^30 when v >= 0 and -2^30 when v < 0), the value is
   floor((X + 2^(s-1)) / 2^s) + zp, and floor((X + 2^(s-1)) / 2^s) = floor((q + 1) / 2) with q = floor(X / 2^(s-1))
   (write X = q * 2^(s-1) + e, 0 <= e < 2^(s-1)); adding the even 2 * zp inside the halving is exact. Since
   s - 1 >= 32, q = floor(H / 2^(s-33)) with H = floor(X / 2^32). For R0 = 0, H is the high word of the 64-bit
   product v * m: MULH. Else, with the product P = v * m = hi * 2^32 + lo (hi = MULH, lo = MUL as an unsigned word),
   and R0 written as c - 2^32 * (v < 0) with the unsigned word c = 2^30 + 2^31 * (v < 0) (= 2^30 - 2^31 + 2^32 for
   v < 0), X = (hi - (v < 0)) * 2^32 + (lo + c), and 0 <= lo + c < 2^33, so H = hi - (v < 0) + carry, carry the
   carry out of the 32-bit sum lo + c. |v * m| <= 2^62 so |hi| <= 2^30, |H| <= 2^30 + 1 and |q| <= 2^30 + 1: no
   overflow in q + zp2p1.
   QC_RV32_DOUBLE_29 (qc_scale32_double_gt31), 32 <= s <= 62 and |v| < 2^29 (bounded at generation time from the
   weights and biases): q = floor(X / 2^(s-1)) as above. 4 * v fits in int32, so MULH(4 * v, m) =
   floor(4 * v * m / 2^32) = floor(v * m / 2^30) = G, and floor(X / 2^30) = G + R0 / 2^30 = G +- 1 (R0 is a multiple
   of 2^30); q = floor(floor(X / 2^30) / 2^(s-31)) (s - 1 >= 30). |v * m| < 2^60, so |G| <= 2^30 and no sum
   overflows. */
static inline __attribute__((always_inline, unused)) int32_t qc_rv32_scale32(int32_t v, int32_t m, int32_t s,
                                                                           int32_t zp2p1, int mode) {
  int32_t h;
  if (mode == QC_RV32_DOUBLE_29) {
    int32_t sgn;
    __asm__("mulh %0, %1, %2" : "=r"(h) : "r"(v * 4), "r"(m));
    __asm__("srai %0, %1, 31\n\tori %0, %0, 1" : "=r"(sgn) : "r"(v)); /* -1 or 1 */
    h += sgn;
    __asm__("sra %0, %0, %1" : "+r"(h) : "r"(s - 31));
  } else {
    __asm__("mulh %0, %1, %2" : "=r"(h) : "r"(v), "r"(m));
    if (mode == QC_RV32_DOUBLE) {
      const uint32_t neg = (uint32_t)v >> 31;
      const uint32_t lo = (uint32_t)v * (uint32_t)m;
      const uint32_t sum = lo + (0x40000000u | neg << 31);
      h += (int32_t)(sum < lo) - (int32_t)neg;
    }
    __asm__("sra %0, %0, %1" : "+r"(h) : "r"(s - 33));
  }
  h += zp2p1;
  __asm__("srai %0, %0, 1" : "+r"(h));
  return h;
}

/* d[i * ds] = x[i * xs], i < n, four per iteration (immediate offsets once inlined with literal strides). */
static inline __attribute__((always_inline, unused)) void qc_rv32_copy(const int8_t *x, int32_t xs, int8_t *d,
                                                                       int32_t ds, int32_t n) {
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    d[i * ds] = x[i * xs];
    d[(i + 1) * ds] = x[(i + 1) * xs];
    d[(i + 2) * ds] = x[(i + 2) * xs];
    d[(i + 3) * ds] = x[(i + 3) * xs];
  }
  for (; i < n; ++i) {
    d[i * ds] = x[i * xs];
  }
}

/* The window x (k elements) of pixel j of a group of P into the interleaved windows of the qc_rv32_dot_rows*
   kernels, at xb = their start + j. */
static inline __attribute__((always_inline, unused)) void qc_rv32_dot_rows_window(const int8_t *x, int8_t *xb,
                                                                                  int32_t P, int32_t k) {
  qc_rv32_copy(x, 1, xb, P, k);
}

#endif
