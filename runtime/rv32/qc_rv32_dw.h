/* qc_rv32_dw.h: the depthwise convolution of qcodegen's scalar RISC-V RV32IM kernels (target riscv32; chosen by
 * qcodegen/kernels/rv32/choice.py, form "dw_plane"). int8 inputs and weights, weight zero point 0, channel
 * multiplier 1, at most QC_RV32_DW_MAX_TAPS taps.
 * Channel by channel, the channel's input plane is copied into the caller's buffer `pl` with its padding
 * (pad_value, written once per call), so that every output pixel reads all its taps at constant offsets from its
 * corner; the channel's tap weights stay in registers over its pixels, and each accumulator starts from
 * base = bias - izp * (the sum of the weights): the sum over all taps of (x - izp) * w is base - bias + the sum of
 * x * w, with x = pad_value outside the input (TOSA's padding). The kernel choice bounds every partial sum below
 * |bias| + taps * 2^17 < 2^31.
 * A static inline function called once per step with the addresses of static const parameter records: inlined,
 * the records' fields are constants, the tap loops are unrolled (GCC unroll pragmas) so the weights live in
 * registers and the offsets are immediates, and the store's branches fold (measured as fast as loops written per
 * step). C99 + GCC pragmas; -Wall -Wextra -Werror -pedantic clean. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_RV32_DW_H
#define QC_RV32_DW_H

#include <stdint.h>

#include "qc_runtime.h"
#include "qc_rv32.h"

#define QC_RV32_DW_MAX_TAPS 16

/* The geometry of a step: batches n, channels; input ih x iw; output oh x ow with strides sy, sx; the padded plane
   height x width, holding input rows [0, rows) and columns [0, cols) at plane row top + iy, column left + ix, the
   rest pad_value when `padded`; a row's copy fully unrolled when `unrolled`; the taps' offsets from an output
   pixel's corner in the plane; the input zero point izp. */
typedef struct {
  int32_t n, channels, ih, iw, oh, ow, sy, sx;
  int32_t height, width, rows, cols, top, left, padded, pad_value, unrolled;
  int32_t taps, offsets[QC_RV32_DW_MAX_TAPS];
  int32_t izp;
} qc_rv32_dw_geometry;

/* The store of an output: bytes 4: the int32 accumulator as it is; bytes 1 or 2: int8 / int16, requantized by
   qc_rv32_scale32 in `mode` (QC_RV32_SINGLE, ...) with the zero point zp2p1 = 2 * zp + 1, clamped to [lo, hi]; the
   multiplier and shift per channel from mult / shift, or m / s when those are NULL. */
typedef struct {
  int32_t bytes;
  const int32_t *mult;
  const int8_t *shift;
  int32_t m, s, zp2p1, mode, lo, hi;
} qc_rv32_dw_store;

static inline __attribute__((always_inline, unused)) void qc_rv32_dw_put(const qc_rv32_dw_store *st, void *y,
                                                                         int32_t i, int32_t acc, int32_t m,
                                                                         int32_t s) {
  if (st->bytes == 4) {
    ((int32_t *)y)[i] = acc;
  } else {
    const int32_t v = qc_clamp32(qc_rv32_scale32(acc, m, s, st->zp2p1, st->mode), st->lo, st->hi);
    if (st->bytes == 1) {
      ((int8_t *)y)[i] = (int8_t)v;
    } else {
      ((int16_t *)y)[i] = (int16_t)v;
    }
  }
}

/* y[p * channels + c] for every output pixel p and channel c of a depthwise convolution of x (NHWC) by w
   ([taps, channels]) plus the bias (per channel when bias_pc, else bias[0]); pl: height * width bytes. */
static inline __attribute__((always_inline, unused)) void qc_rv32_dw_plane(const qc_rv32_dw_geometry *g,
                                                                           const qc_rv32_dw_store *st,
                                                                           const int8_t *x, const int8_t *w,
                                                                           const int32_t *bias, int32_t bias_pc,
                                                                           void *y, int8_t *pl) {
  const int32_t C = g->channels;
  if (g->padded) {
    for (int32_t i = 0; i < g->height * g->width; ++i) {
      pl[i] = (int8_t)g->pad_value;
    }
  }
  for (int32_t n = 0; n < g->n; ++n) {
    const int8_t *xn = x + n * g->ih * g->iw * C;
    for (int32_t c = 0; c < C; ++c) {
      for (int32_t iy = 0; iy < g->rows; ++iy) {
        const int8_t *src = xn + iy * g->iw * C + c;
        int8_t *dst = pl + (iy + g->top) * g->width + g->left;
        if (g->unrolled) {
#pragma GCC unroll 16
          for (int32_t ix = 0; ix < g->cols; ++ix) {
            dst[ix] = src[ix * C];
          }
        } else {
          qc_rv32_copy(src, C, dst, 1, g->cols);
        }
      }
      int32_t wt[QC_RV32_DW_MAX_TAPS];
      int32_t wsum = 0;
#pragma GCC unroll 16
      for (int32_t t = 0; t < g->taps; ++t) {
        wt[t] = w[t * C + c];
        wsum += wt[t];
      }
      const int32_t base = bias[bias_pc ? c : 0] - g->izp * wsum;
      const int32_t m = st->mult ? st->mult[c] : st->m;
      const int32_t s = st->shift ? st->shift[c] : st->s;
      for (int32_t oy = 0; oy < g->oh; ++oy) {
        const int8_t *row = pl + oy * g->sy * g->width;
        for (int32_t ox = 0; ox < g->ow; ++ox) {
          const int8_t *q = row + ox * g->sx;
          int32_t acc = base;
#pragma GCC unroll 16
          for (int32_t t = 0; t < g->taps; ++t) {
            acc += q[g->offsets[t]] * wt[t];
          }
          qc_rv32_dw_put(st, y, ((n * g->oh + oy) * g->ow + ox) * C + c, acc, m, s);
        }
      }
    }
  }
}

#endif
