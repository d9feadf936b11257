/* qc_hexagon_start.c: program entry and Linux system calls of the freestanding Hexagon harness (run by
 * qemu-hexagon in user mode; the rest of the C library is qc_minilibc.c), and the integer and binary32 division
 * functions that clang calls on Hexagon, which has no divide instruction (the compiler runtime library is not
 * linked: -nostdlib). SPDX-License-Identifier: Apache-2.0 */
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

/* binary32 division a / b, correctly rounded (to nearest, ties to even), as IEEE 754 defines it: the float
 * arithmetic of the generated code (e.g. an ONNX QuantizeLinear's x / scale) must equal the host's. Hexagon has no
 * divide instruction and the compiler runtime is not linked. In integers: the significands ma, mb (24 bits, the
 * implicit bit set; subnormals normalized) give q = floor(ma 2^26 / mb), of 26 or 27 bits, with `sticky` when the
 * division is inexact; a / b = (q + f) 2^e with 0 <= f < 1 (f > 0 iff sticky). round_pack keeps 24 significant bits
 * (fewer for a subnormal result), rounds the dropped bits, and the sticky bit, to nearest even, and packs. */
static uint32_t round_pack(uint32_t sign, uint64_t q, int32_t e, int sticky) {
  const int32_t bits = 64 - __builtin_clzll(q);
  int32_t biased = e + bits - 1 + 127; /* the leading bit is 2^(e + bits - 1) */
  int32_t shift = bits - 24;           /* >= 2 here: q has at least 26 bits */
  if (biased <= 0) {                   /* subnormal: the significand's last bit is 2^-149 */
    shift += 1 - biased;
    biased = 0;
  }
  if (shift > 40) { /* q < 2^27: below half of the last bit, rounds to 0 */
    return sign;
  }
  const uint64_t m = q >> shift, dropped = q & (((uint64_t)1 << shift) - 1), half = (uint64_t)1 << (shift - 1);
  const uint64_t up = dropped > half || (dropped == half && (sticky || (m & 1)));
  /* biased >= 1: m in [2^23, 2^24) holds the implicit bit, which adds 1 to the exponent field (hence biased - 1);
     a carry of the rounding into 2^24 moves to the next exponent by the same addition. Subnormal: m <= 2^23. */
  const uint64_t packed = (biased > 0 ? (uint64_t)(biased - 1) << 23 : 0) + m + up;
  return sign | (packed >= 0x7f800000u ? 0x7f800000u : (uint32_t)packed);
}

/* The significand of the finite non-zero binary32 magnitude u (24 bits, the implicit bit set) and its exponent:
 * u = m 2^*e. */
static uint64_t significand(uint32_t u, int32_t *e) {
  const uint32_t field = u >> 23;
  uint64_t m = u & 0x7fffffu;
  if (field == 0) { /* subnormal: m 2^-149 */
    const int32_t s = __builtin_clzll(m) - 40;
    *e = -149 - s;
    return m << s;
  }
  *e = (int32_t)field - 150;
  return m | 0x800000u;
}

float __hexagon_divsf3(float a, float b);

float __hexagon_divsf3(float a, float b) {
  uint32_t ua, ub, r;
  __builtin_memcpy(&ua, &a, 4);
  __builtin_memcpy(&ub, &b, 4);
  const uint32_t sign = (ua ^ ub) & 0x80000000u, xa = ua & 0x7fffffffu, xb = ub & 0x7fffffffu;
  if (xa > 0x7f800000u || xb > 0x7f800000u || (xa == xb && (xa == 0 || xa == 0x7f800000u))) {
    r = 0x7fc00000u; /* NaN: a NaN operand, 0 / 0, inf / inf */
  } else if (xa == 0x7f800000u || xb == 0) {
    r = sign | 0x7f800000u;
  } else if (xa == 0 || xb == 0x7f800000u) {
    r = sign;
  } else {
    int32_t ea, eb;
    const uint64_t ma = significand(xa, &ea), mb = significand(xb, &eb);
    uint64_t rem;
    const uint64_t q = udivmod64(ma << 26, mb, &rem);
    r = round_pack(sign, q, ea - eb - 26, rem != 0);
  }
  float f;
  __builtin_memcpy(&f, &r, 4);
  return f;
}
