/* qc_cm_copy.h: the block copy of qcodegen's data-movement steps on Cortex-M (the contiguous runs of SLICE, PAD,
 * CONCAT, RESHAPE; templates/cortex-m/_block_copy.j2): memmove's semantics (the memory planner may place a copy's
 * source and destination in one buffer), 32 bytes a pass by LDM/STM when source and destination are 4-byte
 * co-aligned (docs/targets.md "Cortex-M4/M7"). C99 with GCC inline asm. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_CM_COPY_H
#define QC_CM_COPY_H

#include <stddef.h>

/* Copy n bytes from src to dst as memmove does (the regions may overlap). */
void qc_cm_copy(void *dst, const void *src, size_t n);

#endif
