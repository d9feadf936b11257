/* int8_peak.c: the exact int8 multiply-accumulate throughput of this x86 CPU per instruction set, in MACs per
 * nanosecond, one thread: the ceiling for any int8 kernel using that instruction (bench, run by hand):
 *
 *     cc -O2 -o /tmp/int8_peak bench/int8_peak.c && /tmp/int8_peak
 *
 * - avx2: VPMADDWD ymm (16 int16 x int16 products summed in pairs into 8 int32) + VPADDD into the accumulator:
 *   the exact int8 form without VNNI (int8 sign-extended to int16; VPMADDUBSW's int16 sums saturate for int8
 *   operands, so they are not exact);
 * - avx-vnni: VPDPBUSD ymm (32 u8 x s8 products into 8 int32 accumulators);
 * - avx512-vnni: VPDPBUSD zmm (64 products into 16 int32 accumulators).
 * Each loop keeps 12 independent accumulators (more than latency x throughput) over register operands only, so
 * that the multiply ports are the limit; best of 5 runs of 20 M iterations of 12 instructions.
 * SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 199309L
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define ITERATIONS 20000000L
#define ACCUMULATORS 12

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define X12(s) s(0) s(1) s(2) s(3) s(4) s(5) s(6) s(7) s(8) s(9) s(10) s(11)
#define AVX2_STEP(i) "vpmaddwd %%ymm12, %%ymm13, %%ymm14\n\tvpaddd %%ymm14, %%ymm" #i ", %%ymm" #i "\n\t"
#define AVX2_STEP2(i) "vpmaddwd %%ymm12, %%ymm13, %%ymm15\n\tvpaddd %%ymm15, %%ymm" #i ", %%ymm" #i "\n\t"
#define VNNI256_STEP(i) "%{vex%} vpdpbusd %%ymm12, %%ymm13, %%ymm" #i "\n\t"
#define VNNI512_STEP(i) "vpdpbusd %%zmm12, %%zmm13, %%zmm" #i "\n\t"

/* Each function runs ITERATIONS loops of ACCUMULATORS instructions (AVX2: pairs) and returns the MACs done. */
__attribute__((target("avx2"))) static double avx2(void) {
    for (long n = ITERATIONS; n > 0; --n) {
        /* two scratch registers in turn so that consecutive VPMADDWD are independent */
        __asm__ volatile(AVX2_STEP(0) AVX2_STEP2(1) AVX2_STEP(2) AVX2_STEP2(3) AVX2_STEP(4) AVX2_STEP2(5)
                         AVX2_STEP(6) AVX2_STEP2(7) AVX2_STEP(8) AVX2_STEP2(9) AVX2_STEP(10) AVX2_STEP2(11)
                         ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                         "xmm10", "xmm11", "xmm14", "xmm15");
    }
    return (double)ITERATIONS * ACCUMULATORS * 16;
}

__attribute__((target("avx2,avxvnni"))) static double avx_vnni(void) {
    for (long n = ITERATIONS; n > 0; --n) {
        __asm__ volatile(X12(VNNI256_STEP) ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                         "xmm8", "xmm9", "xmm10", "xmm11");
    }
    return (double)ITERATIONS * ACCUMULATORS * 32;
}

__attribute__((target("avx512f,avx512vnni"))) static double avx512_vnni(void) {
    for (long n = ITERATIONS; n > 0; --n) {
        __asm__ volatile(X12(VNNI512_STEP) ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                         "xmm8", "xmm9", "xmm10", "xmm11");
    }
    __asm__ volatile("vzeroupper");
    return (double)ITERATIONS * ACCUMULATORS * 64;
}

static void measure(const char *name, double (*kernel)(void)) {
    double best = 0.0;
    for (int run = 0; run < 5; ++run) {
        const double start = seconds();
        const double macs = kernel();
        const double rate = macs / ((seconds() - start) * 1e9);
        best = rate > best ? rate : best;
    }
    printf("%-12s %6.1f MACs/ns\n", name, best);
}

/* CPUID leaf 7, subleaf `sub`, register `reg` (0 EAX .. 3 EDX), bit `bit` (the OS saving the registers is assumed:
   a Linux that runs on such a CPU does). */
static int has(unsigned sub, int reg, int bit) {
    unsigned r[4] = {0, 0, 0, 0};
    if (!__get_cpuid_count(7, sub, &r[0], &r[1], &r[2], &r[3])) {
        return 0;
    }
    return (int)((r[reg] >> bit) & 1u);
}

int main(void) {
    if (!has(0, 1, 5)) {
        printf("no AVX2\n");
        return 1;
    }
    measure("avx2", avx2);
    if (has(1, 0, 4)) {
        measure("avx-vnni", avx_vnni);
    }
    if (has(0, 2, 11) && has(0, 1, 16)) {
        measure("avx512-vnni", avx512_vnni);
    }
    return 0;
}
