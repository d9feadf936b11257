/* qc_cm_dsp.h: qcodegen's int8 kernels for the Cortex-M4/M7 DSP extension (ACLE SIMD32): per 4 bytes, SXTB16
 * sign-extends bytes 0,2 (and, after a rotation by 8, bytes 1,3) into 16-bit pairs, and SMLAD (or SMLABB/SMLATT)
 * multiplies and adds them to 32-bit sums. Which kernel a step runs, and the weight layout it reads, is decided at
 * generation time (qcodegen/kernels/cortex_m_dsp/; docs/targets.md "Cortex-M4/M7"). Two forms, chosen per kernel
 * family by the measured instructions and code size:
 *   - the depthwise kernels (qc_dsp_dw_*) are functions of qc_cm_dsp.c, compiled once and shared by every model of
 *     a firmware;
 *   - the convolutions as dot products of weight rows (qc_dsp_dot_*, qc_dsp_conv_*) are static functions of
 *     qc_cm_dsp_conv.h, compiled into each model that uses them: specialized by the compiler for the constant
 *     shapes and requantization of the step that calls them (3-6% fewer instructions, smaller code).
 *
 * Names: qc_dsp_<op>_<variant>_<weights>[_<requantization>]:
 *   dot_s8, dot_4rows_{s8,s8x4,q15}, dot_2x2_{s8x2,q15x2}  sums of int8 products (no requantization);
 *   conv_{2px,3px}_<w>_<rq>[_g<n>]   every output channel of 2 or 3 output pixels, requantized to int8 inside;
 *   conv_{2px,3px}_<w>_packed        the same for mode 2 without the clamp on doubled sums, the starts and
 *                                     requantization pairs inside the weights (dsp_packed; 3px: one asm loop);
 *   dw_s8_<rq>[_c4|_pair], dw_s32[_c4] depthwise convolution pixels, requantized to int8 or as int32 sums (_c4:
 *                                     channel counts that are multiples of 4; _pair: two pixels of a 3x3 window
 *                                     over a table of their columns);
 * where <w> is the weight layout (s8x2: int8 words of 2 rows, q15x2: their SMLAD int16 pairs; made at generation
 * time, qcodegen/kernels/cortex_m_dsp/layouts.py), <rq> the requantization (single, double: TOSA SINGLE_ROUND /
 * DOUBLE_ROUND; double_n: DOUBLE_ROUND for accumulators below 2^30 in magnitude; _pc: per-channel scales; _clamp:
 * a clamp inside int8) and _g<n> a row of n <= 10 groups of 4 elements, fully unrolled.
 * C99 with GCC inline asm; -Wall -Wextra -Werror -pedantic clean. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_CM_DSP_H
#define QC_CM_DSP_H

#include <arm_acle.h>
#include <stdint.h>
#include <string.h>

#include "qc_cm_rq.h"

/* SXTB16 of bytes 1,3 (GCC's __sxtb16 cannot take the rotation). */
static inline __attribute__((always_inline, unused)) uint32_t qc_sxtb16_ror8(uint32_t v) {
  uint32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}

/* The constants of qc_dsp_dw_*: q: the dsp_dw_q15_base words (per group of 4 channels: the accumulators' start,
   then per tap the int16 pairs w0|w2, w1|w3; then the start of the channels after the last group); w: the int8
   weights [taps][n] (read for the channels after the last group of 4); rq: the requantization pairs (int8
   outputs: qc_dsp_rq8); zp2p1 = 2 * output zp + 1; lo, hi: the clamp; n: the channels; taps: the window's taps;
   exc_start, exc_acc, exc_value: the exceptions of the _exc variants (qc_cm_rq.h qc_dsp_except), else NULL. */
typedef struct {
  const int32_t *q, *rq;
  const int8_t *w;
  int32_t n, taps, zp2p1, lo, hi;
  const int32_t *exc_start, *exc_acc, *exc_value;
} qc_dsp_dw_params;

/* X(<rq>, mode, per_channel, clamp, A): the requantization variants (qc_dsp_rq8). */
#define QC_DSP_RQ_VARIANTS(X, A)                                                                                   \
  X(single, 0, 0, 0, A) X(single_clamp, 0, 0, 1, A) X(single_pc, 0, 1, 0, A) X(single_pc_clamp, 0, 1, 1, A)        \
  X(double, 1, 0, 0, A) X(double_clamp, 1, 0, 1, A) X(double_pc, 1, 1, 0, A) X(double_pc_clamp, 1, 1, 1, A)        \
  X(double_n, 2, 0, 0, A) X(double_n_clamp, 2, 0, 1, A) X(double_n_pc, 2, 1, 0, A) X(double_n_pc_clamp, 2, 1, 1, A)
/* mode 4: the single rounding of mode 0, then the exceptions (qc_cm_rq.h qc_dsp_except) */
#define QC_DSP_RQ_EXC_VARIANTS(X, A)                                                                               \
  X(single_exc, 4, 0, 0, A) X(single_clamp_exc, 4, 0, 1, A) X(single_pc_exc, 4, 1, 0, A)                         \
  X(single_pc_clamp_exc, 4, 1, 1, A)

/* All channels of `count` output pixels of a depthwise convolution (multiplier 1), tap t of pixel i reading its n
   input channels at b + i * step + tab[t] (tab: byte offsets from b, or addresses with b = NULL): the starts in
   q plus the sum over the taps of x * w, requantized to int8 at y (dw_s8_<rq>), or as int32 at acc (dw_s32); the
   next pixel's outputs at + n. The _c4 variants take channel counts that are multiples of 4 (less code).
   dw_s8_<rq>_pair: `count` (even) output pixels of a 3x3 window whose horizontal stride equals its dilation
   (n % 4 == 0) in pairs of horizontal neighbours, column j < 4 of the first pair's windows' row ky at
   b + cols[4 ky + j] (with b = NULL: an input pixel's channels, or a row of pad values), the next pair's 2 step
   further: the pixels next to a border in pairs. */
void qc_dsp_dw_s32(const qc_dsp_dw_params *P, const uintptr_t *tab, const int8_t *b, int32_t *acc, int32_t count,
                   int32_t step);
void qc_dsp_dw_s32_c4(const qc_dsp_dw_params *P, const uintptr_t *tab, const int8_t *b, int32_t *acc, int32_t count,
                      int32_t step);
#define QC_DSP_DW_DECLARE(RQ, MODE, PC, CLAMP, A)                                                                  \
  void qc_dsp_dw_s8_##RQ(const qc_dsp_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y,            \
                         int32_t count, int32_t step);                                                             \
  void qc_dsp_dw_s8_##RQ##_c4(const qc_dsp_dw_params *P, const uintptr_t *tab, const int8_t *b, int8_t *y,       \
                              int32_t count, int32_t step);                                                \
  void qc_dsp_dw_s8_##RQ##_pair(const qc_dsp_dw_params *P, const uintptr_t *cols, const int8_t *b, int8_t *y,   \
                                int32_t count, int32_t step);
QC_DSP_RQ_VARIANTS(QC_DSP_DW_DECLARE, dw)
QC_DSP_RQ_EXC_VARIANTS(QC_DSP_DW_DECLARE, dw)

/* The constants of qc_dsp_dwr_*: w: per channel 7 int32 words, the accumulator's start, then per kernel row ky
   the int16 pairs (w[ky][0] | w[ky][1] << 16), (w[ky][1] | w[ky][2] << 16) (qcodegen/kernels/cortex_m_dsp/
   layouts.py dsp_dw_rows); rq, zp2p1, lo, hi, exc_*: as qc_dsp_dw_params; n: the channels; ih, iw, oh, ow: the
   input and output rows and columns; pt, pl: the top and left padding; pad: the value a tap outside the input
   reads; nb: the output rows of a band (the scratch: a plane of (nb + 2) x pw int16, 4-byte aligned, and nb x ow
   int32 sums); pw: the plane's row length (even, >= pl + iw, >= ow + 3). */
typedef struct {
  const int32_t *w, *rq;
  int32_t n, ih, iw, oh, ow, pt, pl, pad, nb, pw, zp2p1, lo, hi;
  const int32_t *exc_start, *exc_acc, *exc_value;
} qc_dsp_dwr_params;

/* dwr_s8_<rq>: a 3x3 depthwise convolution (stride and dilation 1, multiplier 1) of one image x [ih][iw][n] into
   y [oh][ow][n] (int8, requantized as qc_dsp_rq8), channel by channel over bands of nb output rows: the band's
   input rows of the channel widened into the plane (int16, pad values around the input), the sums of pixel pairs
   from it (SMUAD/SMLAD/SMLATB/SMLABT over (x[c-1], x[c]), (x[c+1], x[c+2]) and the kernel row's weight pairs),
   then the outputs. plane, acc: the scratch (qc_dsp_dwr_params). dwr5_s8_<rq>: the same for rows of 5 inputs and
   5 outputs (iw = ow = 5, pl = 1, pw = 6: DS-CNN's), a row's loops unrolled and its first flat pixel, a pad value's,
   not summed (qc_dsp_dwr_head_rows); its own entry, so that the models without such rows do not link its code. */
#define QC_DSP_DWR_DECLARE(RQ, MODE, PC, CLAMP, A)                                                                 \
  void qc_dsp_dwr_s8_##RQ(const qc_dsp_dwr_params *P, const int8_t *x, int8_t *y, int16_t *plane, int32_t *acc);  \
  void qc_dsp_dwr5_s8_##RQ(const qc_dsp_dwr_params *P, const int8_t *x, int8_t *y, int16_t *plane, int32_t *acc);
QC_DSP_RQ_VARIANTS(QC_DSP_DWR_DECLARE, dwr)
QC_DSP_RQ_EXC_VARIANTS(QC_DSP_DWR_DECLARE, dwr)

/* The int8 output of accumulator v requantized with q = {multiplier m, shift s less 33, or 32 in mode 2} (TOSA
   apply_scale_32 + zero point, exactly, for 33 <= s <= 62), SSAT, and with `clamp` the clamp to lo..hi. With
   X = v m + R0 (R0 = 0 for the single rounding; for the double, 2^30 - 2^31 (v < 0)), the value is
   floor((floor(X / 2^(s-1)) + 2 zp + 1) / 2) (qc_cm_rq.h).
   mode 0 (single; 4: the same, the caller then applies the exceptions): SMMUL gives floor(v m / 2^32) =
   floor(X / 2^32), then ASR by s - 33.
   mode 1 (double): qc_dsp_floor_s33 (SMLAL from hi:lo = R0).
   mode 2 (double, |v| < 2^30 so that 2v fits): SMMULR(2v, m) = floor((2 v m + 2^31) / 2^32) = floor((v m + 2^30)
   / 2^31); adding v >> 31 (-1 for v < 0: floor(t - 1) = floor(t) - 1) gives floor(X / 2^31), then ASR by s - 32.
   mode 3: mode 2 of v / 2, v the doubled accumulator (the depthwise kernels' weights and starts are doubled at
   generation time: the ADD of 2v saved); (2v) >> 31 = v >> 31. */
static inline __attribute__((always_inline, unused)) int8_t qc_dsp_rq8(int32_t v, const int32_t *q, int32_t zp2p1,
                                                               int32_t lo, int32_t hi, int mode, int clamp) {
  int32_t h, r;
  if (mode == 1) {
    h = qc_dsp_floor_s33(v, q[0], q[1] + 33, 1);
  } else if (mode == 0 || mode == 4) {
    __asm__("smmul %0, %1, %2\n\t"
            "asr %0, %0, %3" : "=&r"(h) : "r"(v), "r"(q[0]), "r"(q[1]));
  } else {
    int32_t d = v;
    if (mode == 2) {
      __asm__("add %0, %1, %1" : "=r"(d) : "r"(v));
    }
    __asm__("smmulr %0, %1, %2\n\t"
            "add %0, %0, %1, asr #31\n\t"
            "asr %0, %0, %3" : "=&r"(h) : "r"(d), "r"(q[0]), "r"(q[1]));
  }
  __asm__("ssat %0, #8, %1, asr #1" : "=r"(r) : "r"(h + zp2p1));  /* the halving inside SSAT */
  if (clamp) {
    r = r < lo ? lo : r > hi ? hi : r;
  }
  return (int8_t)r;
}

/* qc_dsp_rq8 mode 2 without the clamp as asm text, for kernels that store several outputs of one channel (pixels
   of a block) with the channel's pair {m, s} loaded once: 7 instructions per output plus the pair's 2 loads, where
   GCC, short of registers after a block's accumulators, reloads the constants. QC_DSP_RQN_FIRST loads the pair
   from r + off bytes (off: a literal) and stores accumulator a requantized at byte k of pointer y (ADD, SMMULR,
   ADD (v >> 31), ASR, ADD zp2p1, SSAT, STRB), s serving as its temporary before it is loaded; QC_DSP_RQN_NEXT does
   the same for the next accumulator of the channel with the pair in m, s and t (an accumulator already stored) as
   its temporary. The accumulators are clobbered. Operands: [m], [s] "=&r"; [r], [zp] "r". */
#define QC_DSP_RQN_FIRST(a, y, k, off) QC_DSP_RQN_FIRST_M(QC_DSP_RQN_MUL2, a, y, k, off)
#define QC_DSP_RQN_NEXT(a, y, k, t) QC_DSP_RQN_NEXT_M(QC_DSP_RQN_MUL2, a, y, k, t)
/* The same with MUL(t, a), the text of t = SMMULR of 2a (QC_DSP_RQN_MUL2) or, for a doubled accumulator (mode 3),
   of a (QC_DSP_RQN_MUL). */
#define QC_DSP_RQN_MUL2(t, a, m)                                                                                   \
  "add %[" t "], %[" a "], %[" a "]\n\t"                                                                          \
  "smmulr %[" t "], %[" t "], %[" m "]\n\t"
#define QC_DSP_RQN_MUL(t, a, m) "smmulr %[" t "], %[" a "], %[" m "]\n\t"
#define QC_DSP_RQN_FIRST_M(MUL, a, y, k, off)                                                                      \
  "ldr %[m], [%[r], #" off "]\n\t" MUL("s", a, "m")                                                              \
  "add %[" a "], %[s], %[" a "], asr #31\n\t"                                                                     \
  "ldr %[s], [%[r], #" off " + 4]\n\t" QC_DSP_RQN_STORE(a, "s", "zp", "[%[" y "], #" k "]")
#define QC_DSP_RQN_NEXT_M(MUL, a, y, k, t) QC_DSP_RQN_OUT(MUL, a, t, "m", "s", "zp", "[%[" y "], #" k "]")
/* The general text: accumulator a requantized with the pair in operands m, s, temporary t, zp2p1 in zp, stored at
   addr (the text of an address: "[%[y], #1]", "[%[y], %[rs]]"). */
#define QC_DSP_RQN_OUT(MUL, a, t, m, s, zp, addr)                                                                  \
  MUL(t, a, m) "add %[" a "], %[" t "], %[" a "], asr #31\n\t" QC_DSP_RQN_STORE(a, s, zp, addr)
#define QC_DSP_RQN_STORE(a, s, zp, addr)                                                                           \
  "asr %[" a "], %[" a "], %[" s "]\n\t"                                                                          \
  "add %[" a "], %[" a "], %[" zp "]\n\t"                                                                         \
  "ssat %[" a "], #8, %[" a "], asr #1\n\t"                                                                       \
  "strb %[" a "], " addr "\n\t"

#endif
