/* qc_hexagon_start.c: program entry and Linux system calls of the freestanding Hexagon harness (run by
 * qemu-hexagon in user mode; the rest of the C library is qc_minilibc.c), and the integer division functions
 * that clang calls on Hexagon, which has no divide instruction (the compiler runtime library is not linked:
 * -nostdlib). SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>

#if !defined(__hexagon__)
#error "qc_hexagon_start.c is the Hexagon start-up code"
#endif

void qc_start_c(long *sp); /* qc_minilibc.c: calls main and exit */
long qc_syscall(long n, long a, long b, long c, long d, long e);

/* Linux passes argc at sp (r29), then argv[]. Keep the ABI's 8-byte stack alignment, clear the frame
 * pointer (the end of the frame chain) and call qc_start_c(sp); it never returns. */
__asm__(
    "  .section .text._start, \"ax\", @progbits\n"
    "  .global _start\n"
    "  .type _start, @function\n"
    "_start:\n"
    "  { r0 = r29; r29 = and(r29, #-8); r30 = #0 }\n"
    "  { call qc_start_c }\n"
    "  .size _start, . - _start\n"
    "  .text\n");

/* A Linux system call: trap0(#1) with the number in r6 and the arguments in r0..r4; the result in r0. */
long qc_syscall(long n, long a, long b, long c, long d, long e) {
  register long r0 __asm__("r0") = a;
  register long r1 __asm__("r1") = b;
  register long r2 __asm__("r2") = c;
  register long r3 __asm__("r3") = d;
  register long r4 __asm__("r4") = e;
  register long r6 __asm__("r6") = n;
  __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r3), "r"(r4), "r"(r6) : "memory");
  return r0;
}

/* Integer division: the quotient of n / d (d != 0) by restoring division from d aligned under n's leading
 * bit (count-leading-zeros is an instruction), and the remainder in *rem. No / or % here: they would call
 * these functions. C leaves division by zero undefined; it gives quotient 0 here. */
static uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t *rem) {
  uint64_t q = 0;
  if (d != 0 && n >= d) {
    int shift = __builtin_clzll(d) - __builtin_clzll(n);
    d <<= shift;
    for (; shift >= 0; --shift) {
      q <<= 1;
      if (n >= d) {
        n -= d;
        q |= 1;
      }
      d >>= 1;
    }
  }
  *rem = n;
  return q;
}

static uint32_t udivmod32(uint32_t n, uint32_t d, uint32_t *rem) {
  uint64_t r;
  const uint32_t q = (uint32_t)udivmod64(n, d, &r);
  *rem = (uint32_t)r;
  return q;
}

/* Magnitudes as unsigned numbers (well defined for the most negative value too). */
static uint64_t magnitude64(int64_t v) { return v < 0 ? 0u - (uint64_t)v : (uint64_t)v; }
static uint32_t magnitude32(int32_t v) { return v < 0 ? 0u - (uint32_t)v : (uint32_t)v; }
/* m with the sign `negative`, back in the signed type (two's complement wrap, as the hardware would). */
static int64_t signed64(uint64_t m, int negative) {
  uint64_t u = negative ? 0u - m : m;
  return u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}
static int32_t signed32(uint32_t m, int negative) {
  uint32_t u = negative ? 0u - m : m;
  return u <= INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

uint64_t __hexagon_udivdi3(uint64_t n, uint64_t d);
uint64_t __hexagon_umoddi3(uint64_t n, uint64_t d);
int64_t __hexagon_divdi3(int64_t n, int64_t d);
int64_t __hexagon_moddi3(int64_t n, int64_t d);
uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d);
uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d);
int32_t __hexagon_divsi3(int32_t n, int32_t d);
int32_t __hexagon_modsi3(int32_t n, int32_t d);

uint64_t __hexagon_udivdi3(uint64_t n, uint64_t d) {
  uint64_t r;
  return udivmod64(n, d, &r);
}

uint64_t __hexagon_umoddi3(uint64_t n, uint64_t d) {
  uint64_t r;
  (void)udivmod64(n, d, &r);
  return r;
}

int64_t __hexagon_divdi3(int64_t n, int64_t d) { /* C rounds toward zero */
  uint64_t r;
  return signed64(udivmod64(magnitude64(n), magnitude64(d), &r), (n < 0) != (d < 0));
}

int64_t __hexagon_moddi3(int64_t n, int64_t d) { /* the remainder has the dividend's sign */
  uint64_t r;
  (void)udivmod64(magnitude64(n), magnitude64(d), &r);
  return signed64(r, n < 0);
}

uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d) {
  uint32_t r;
  return udivmod32(n, d, &r);
}

uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d) {
  uint32_t r;
  (void)udivmod32(n, d, &r);
  return r;
}

int32_t __hexagon_divsi3(int32_t n, int32_t d) {
  uint32_t r;
  return signed32(udivmod32(magnitude32(n), magnitude32(d), &r), (n < 0) != (d < 0));
}

int32_t __hexagon_modsi3(int32_t n, int32_t d) {
  uint32_t r;
  (void)udivmod32(magnitude32(n), magnitude32(d), &r);
  return signed32(r, n < 0);
}
