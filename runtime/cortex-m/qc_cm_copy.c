/* qc_cm_copy.c: qc_cm_copy (qc_cm_copy.h), one function shared by every data-movement step of a firmware.
 * Forward when dst is below src or the regions are disjoint, else backward from the ends, so each pass reads its
 * source bytes before any store can overwrite them. Co-aligned source and destination (dst - src a multiple of 4):
 * a byte head to a word boundary, then 32 bytes a pass as one LDM and one STM of 8 registers (4 instructions per
 * 32 bytes; newlib's memmove copies 16 bytes in 12 instructions forward and 1 byte in 4 backward). Then, and for
 * any alignment, words by unaligned LDR/STR (ARMv7-M and ARMv8-M allow them on normal memory) and a byte tail.
 * SPDX-License-Identifier: Apache-2.0 */
#include "qc_cm_copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__OPTIMIZE__)
#error "qcodegen: compile the Cortex-M kernels with optimization (-O1, -O2, -O3, -Os, or -Og for debugging), not -O0"
#endif

/* the registers one LDM/STM pass moves (r7, the Thumb frame pointer, and r0-r2, r12, lr left to the compiler) */
#define QC_COPY_REGS "{r3, r4, r5, r6, r8, r9, r10, r11}"
#define QC_COPY_CLOBBERS "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "memory"

static void word(unsigned char *d, const unsigned char *s) {
  uint32_t w;
  memcpy(&w, s, 4);
  memcpy(d, &w, 4);
}

void qc_cm_copy(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  const int coaligned = (((uintptr_t)d ^ (uintptr_t)s) & 3u) == 0;
  if ((uintptr_t)d - (uintptr_t)s >= n) {  /* forward: d below s (the difference wraps) or at/after s + n */
    if (coaligned && n >= 4) {
      for (; (uintptr_t)d & 3u; --n) {
        *d++ = *s++;
      }
      for (size_t passes = n >> 5; passes != 0; --passes) {
        __asm__ volatile("ldmia %0!, " QC_COPY_REGS "\n\tstmia %1!, " QC_COPY_REGS
                         : "+r"(s), "+r"(d) : : QC_COPY_CLOBBERS);
      }
      n &= 31u;
    }
    for (; n >= 4; n -= 4, d += 4, s += 4) {
      word(d, s);
    }
    for (; n != 0; --n) {
      *d++ = *s++;
    }
    return;
  }
  d += n;
  s += n;
  if (coaligned && n >= 4) {
    for (; (uintptr_t)d & 3u; --n) {
      *--d = *--s;
    }
    for (size_t passes = n >> 5; passes != 0; --passes) {
      __asm__ volatile("ldmdb %0!, " QC_COPY_REGS "\n\tstmdb %1!, " QC_COPY_REGS
                       : "+r"(s), "+r"(d) : : QC_COPY_CLOBBERS);
    }
    n &= 31u;
  }
  for (; n >= 4; n -= 4) {
    d -= 4;
    s -= 4;
    word(d, s);
  }
  for (; n != 0; --n) {
    *--d = *--s;
  }
}
