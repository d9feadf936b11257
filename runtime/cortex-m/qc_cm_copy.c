/* qc_cm_copy.c: qc_cm_copy (qc_cm_copy.h), one function shared by every data-movement step of a firmware, in
 * Thumb-2 assembly (106 bytes; GCC made 276 (Cortex-M4) to 324 (Cortex-M55) of the same loops in C at -O2, and
 * MobileNetV1 is near the Cortex-M4 .text budget).
 * Forward when dst is below src or the regions are disjoint (dst - src >= n as unsigned): source and destination
 * co-aligned (dst - src a multiple of 4): bytes up to a word boundary of dst, then 32 bytes a pass as one LDM and
 * one STM of 8 registers (4 instructions per 32 bytes; newlib's memmove takes 12 per 16 aligned bytes forward).
 * Then, and for any alignment, words by LDR/STR (unaligned accesses are allowed on normal memory by ARMv7-M and
 * ARMv8-M), then the last bytes. Else (an overlap with dst above src) byte by byte backward from the ends, 4
 * instructions per byte as newlib's memmove: the memory planner places no such copy in the benchmark models
 * (their instruction counts did not change when this path lost its word and block loops, 68 bytes).
 * SPDX-License-Identifier: Apache-2.0 */
#include "qc_cm_copy.h"

/* r0 dst, r1 src, r2 n (counted down; "subs r2, #k; bcs" loops while k more bytes are left) */
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
  "  bcc .Lqc_copy_backward\n"           /* n > dst - src >= 0: the regions overlap, n >= 1 */
  "  lsls r3, r3, #30\n"                 /* dst - src: 0 mod 4 when co-aligned */
  "  bne .Lqc_copy_words\n"
  ".Lqc_copy_head:\n"
  "  lsls r3, r0, #30\n"
  "  beq .Lqc_copy_blocks\n"
  "  cbz r2, .Lqc_copy_return\n"
  "  ldrb r3, [r1], #1\n"
  "  strb r3, [r0], #1\n"
  "  subs r2, #1\n"
  "  b .Lqc_copy_head\n"
  ".Lqc_copy_blocks:\n"
  "  subs r2, #32\n"
  "  bcc .Lqc_copy_blocks_done\n"
  "  push {r4-r8, lr}\n"
  ".Lqc_copy_block:\n"
  "  ldmia r1!, {r3-r8, r12, lr}\n"
  "  stmia r0!, {r3-r8, r12, lr}\n"
  "  subs r2, #32\n"
  "  bcs .Lqc_copy_block\n"
  "  pop {r4-r8, lr}\n"
  ".Lqc_copy_blocks_done:\n"
  "  adds r2, #32\n"
  ".Lqc_copy_words:\n"
  "  subs r2, #4\n"
  "  bcc .Lqc_copy_words_done\n"
  ".Lqc_copy_word:\n"
  "  ldr r3, [r1], #4\n"
  "  str r3, [r0], #4\n"
  "  subs r2, #4\n"
  "  bcs .Lqc_copy_word\n"
  ".Lqc_copy_words_done:\n"
  "  adds r2, #4\n"
  "  beq .Lqc_copy_return\n"
  ".Lqc_copy_byte:\n"
  "  ldrb r3, [r1], #1\n"
  "  strb r3, [r0], #1\n"
  "  subs r2, #1\n"
  "  bne .Lqc_copy_byte\n"
  ".Lqc_copy_return:\n"
  "  bx lr\n"
  ".Lqc_copy_backward:\n"
  "  add r0, r2\n"
  "  add r1, r2\n"
  ".Lqc_copy_back_byte:\n"
  "  ldrb r3, [r1, #-1]!\n"
  "  strb r3, [r0, #-1]!\n"
  "  subs r2, #1\n"
  "  bne .Lqc_copy_back_byte\n"
  "  bx lr\n"
  "  .size qc_cm_copy, . - qc_cm_copy\n"
  "  .text\n");
