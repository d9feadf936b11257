/* qc_cm_copy.c: qc_cm_copy (qc_cm_copy.h), one function shared by every data-movement step of a firmware, in
 * Thumb-2 assembly (176 bytes; GCC made 276 (Cortex-M4) to 324 (Cortex-M55) of the same loops in C at -O2, and
 * MobileNetV1 is near the Cortex-M4 .text budget).
 * Forward when dst is below src or the regions are disjoint (dst - src >= n as unsigned), else backward from the
 * ends, so each pass reads its source bytes before any store can overwrite them. Source and destination
 * co-aligned (dst - src a multiple of 4): bytes up to a word boundary of dst, then 32 bytes a pass as one LDM and
 * one STM of 8 registers (4 instructions per 32 bytes; newlib's memmove takes 12 per 16 aligned bytes forward and 4
 * per byte backward). Then, and for any alignment, words by LDR/STR (unaligned accesses are allowed on normal
 * memory by ARMv7-M and ARMv8-M), then the last bytes. SPDX-License-Identifier: Apache-2.0 */
#include "qc_cm_copy.h"

/* r0 dst, r1 src, r2 n (counted down; "subs r2, #k; bcs" loops while k more bytes are left) */
#define QC_COPY_PART(dir, ldm, stm, load_word, store_word, load_byte, store_byte, done) \
  "  lsls r3, r3, #30\n"                    /* dst - src: 0 mod 4 when co-aligned */ \
  "  bne " dir "_words\n" \
  dir "_head:\n" \
  "  lsls r3, r0, #30\n" \
  "  beq " dir "_blocks\n" \
  "  cbz r2, " done "\n" \
  "  " load_byte "\n" \
  "  " store_byte "\n" \
  "  subs r2, #1\n" \
  "  b " dir "_head\n" \
  dir "_blocks:\n" \
  "  subs r2, #32\n" \
  "  bcc " dir "_blocks_done\n" \
  "  push {r4-r8, lr}\n" \
  dir "_block:\n" \
  "  " ldm " {r3-r8, r12, lr}\n" \
  "  " stm " {r3-r8, r12, lr}\n" \
  "  subs r2, #32\n" \
  "  bcs " dir "_block\n" \
  "  pop {r4-r8, lr}\n" \
  dir "_blocks_done:\n" \
  "  adds r2, #32\n" \
  dir "_words:\n" \
  "  subs r2, #4\n" \
  "  bcc " dir "_words_done\n" \
  dir "_word:\n" \
  "  " load_word "\n" \
  "  " store_word "\n" \
  "  subs r2, #4\n" \
  "  bcs " dir "_word\n" \
  dir "_words_done:\n" \
  "  adds r2, #4\n" \
  "  beq " done "\n" \
  dir "_byte:\n" \
  "  " load_byte "\n" \
  "  " store_byte "\n" \
  "  subs r2, #1\n" \
  "  bne " dir "_byte\n" \
  done ":\n" \
  "  bx lr\n"

__asm__(
  "  .syntax unified\n"
  "  .thumb\n"
  "  .section .text.qc_cm_copy, \"ax\", %progbits\n"
  "  .global qc_cm_copy\n"
  "  .type qc_cm_copy, %function\n"
  "  .p2align 2\n"
  "  .thumb_func\n"
  "qc_cm_copy:\n"
  "  subs r3, r0, r1\n"
  "  cmp r3, r2\n"
  "  bcc .Lqc_copy_backward\n"
  QC_COPY_PART(".Lqc_copy_fwd", "ldmia r1!,", "stmia r0!,", "ldr r3, [r1], #4", "str r3, [r0], #4",
               "ldrb r3, [r1], #1", "strb r3, [r0], #1", ".Lqc_copy_fwd_return")
  ".Lqc_copy_backward:\n"
  "  add r0, r2\n"
  "  add r1, r2\n"
  QC_COPY_PART(".Lqc_copy_bwd", "ldmdb r1!,", "stmdb r0!,", "ldr r3, [r1, #-4]!", "str r3, [r0, #-4]!",
               "ldrb r3, [r1, #-1]!", "strb r3, [r0, #-1]!", ".Lqc_copy_bwd_return")
  "  .size qc_cm_copy, . - qc_cm_copy\n"
  "  .text\n");
