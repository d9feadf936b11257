/* qc_minilibc.c: see qc_minilibc.h. Program entry (_start), Linux system calls (RV32 user mode; Hexagon's
 * are in hexagon/qc_hexagon_start.c), and string functions the compiler may call (memcpy, memset, memmove,
 * memcmp). SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>

#include "qc_minilibc.h"

/* The string functions below must not be turned back into calls to themselves (clang does not form library
 * calls from loops under -ffreestanding). */
#if defined(__clang__)
#define QC_NO_LIBCALL
#else
#define QC_NO_LIBCALL __attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif

/* The system call numbers of Linux's generic table, shared by RV32 and Hexagon. */
enum { SYS_OPENAT = 56, SYS_CLOSE = 57, SYS_LLSEEK = 62, SYS_READ = 63, SYS_WRITE = 64, SYS_EXIT_GROUP = 94 };
enum { AT_FDCWD = -100, O_RDONLY = 0, O_WRONLY_CREAT_TRUNC = 01 | 0100 | 01000, MAX_FILES = 8 };

int main(int argc, char **argv);
void qc_start_c(long *sp);

#if defined(__hexagon__)
/* hexagon/qc_hexagon_start.c: _start, which calls qc_start_c, and the trap into Linux */
long qc_syscall(long n, long a, long b, long c, long d, long e);
#elif defined(__riscv) && __riscv_xlen == 32
static long qc_syscall(long n, long a, long b, long c, long d, long e) {
  register long a0 __asm__("a0") = a;
  register long a1 __asm__("a1") = b;
  register long a2 __asm__("a2") = c;
  register long a3 __asm__("a3") = d;
  register long a4 __asm__("a4") = e;
  register long a7 __asm__("a7") = n;
  __asm__ volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a3), "r"(a4), "r"(a7) : "memory");
  return a0;
}

/* Linux passes argc at sp, then argv[]. Set up gp (linker relaxation) and call main. */
__asm__(
    "  .section .text._start, \"ax\", @progbits\n"
    "  .global _start\n"
    "_start:\n"
    "  .option push\n"
    "  .option norelax\n"
    "  la gp, __global_pointer$\n"
    "  .option pop\n"
    "  mv a0, sp\n"
    "  andi sp, sp, -16\n"
    "  call qc_start_c\n"
    "  .text\n");
#else
#error "qc_minilibc.c implements the Linux system calls of RV32 and Hexagon only"
#endif

void qc_start_c(long *sp) {
  exit(main((int)sp[0], (char **)(sp + 1)));
}

void exit(int status) {
  for (;;) qc_syscall(SYS_EXIT_GROUP, status, 0, 0, 0, 0);
}

FILE qc_stderr_file = {2};
FILE qc_stdout_file = {1};
static FILE files[MAX_FILES];
static int used[MAX_FILES];

FILE *fopen(const char *path, const char *mode) {
  int flags = mode[0] == 'w' ? O_WRONLY_CREAT_TRUNC : O_RDONLY;
  long fd;
  int i;
  for (i = 0; i < MAX_FILES && used[i]; ++i) {
  }
  if (i == MAX_FILES) return NULL;
  fd = qc_syscall(SYS_OPENAT, AT_FDCWD, (long)path, flags, 0644, 0);
  if (fd < 0) return NULL;
  used[i] = 1;
  files[i].fd = (int)fd;
  return &files[i];
}

int fclose(FILE *f) {
  long rc = qc_syscall(SYS_CLOSE, f->fd, 0, 0, 0, 0);
  if (f >= files && f < files + MAX_FILES) used[f - files] = 0;
  return rc < 0 ? -1 : 0;
}

static long long llseek(FILE *f, long offset, int whence) {
  long long pos = 0;
  long rc = qc_syscall(SYS_LLSEEK, f->fd, offset < 0 ? -1 : 0, offset, (long)&pos, whence);
  return rc < 0 ? -1 : pos;
}

int fseek(FILE *f, long offset, int whence) {
  return llseek(f, offset, whence) < 0 ? -1 : 0;
}

long ftell(FILE *f) {
  return (long)llseek(f, 0, SEEK_CUR);
}

size_t fread(void *dst, size_t size, size_t n, FILE *f) {
  size_t want = size * n, got = 0;
  while (got < want) {
    long rc = qc_syscall(SYS_READ, f->fd, (long)((char *)dst + got), (long)(want - got), 0, 0);
    if (rc <= 0) break;
    got += (size_t)rc;
  }
  return size ? got / size : 0;
}

size_t fwrite(const void *src, size_t size, size_t n, FILE *f) {
  size_t want = size * n, put = 0;
  while (put < want) {
    long rc = qc_syscall(SYS_WRITE, f->fd, (long)((const char *)src + put), (long)(want - put), 0, 0);
    if (rc <= 0) break;
    put += (size_t)rc;
  }
  return size ? put / size : 0;
}

static size_t put_text(char *buf, size_t pos, size_t cap, const char *s) {
  while (*s && pos < cap) buf[pos++] = *s++;
  return pos;
}

static size_t put_number(char *buf, size_t pos, size_t cap, unsigned long mag, int negative) {
  char digits[24];
  int k = 0;
  do {
    digits[k++] = (char)('0' + mag % 10u);
    mag /= 10u;
  } while (mag);
  if (negative && pos < cap) buf[pos++] = '-';
  while (k > 0 && pos < cap) buf[pos++] = digits[--k];
  return pos;
}

int fprintf(FILE *f, const char *fmt, ...) {
  char buf[512];
  size_t pos = 0, cap = sizeof buf;
  va_list ap;
  va_start(ap, fmt);
  for (; *fmt && pos < cap; ++fmt) {
    if (*fmt != '%') {
      buf[pos++] = *fmt;
      continue;
    }
    ++fmt;
    if (*fmt == 's') {
      pos = put_text(buf, pos, cap, va_arg(ap, const char *));
    } else if (*fmt == 'd') {
      int v = va_arg(ap, int);
      pos = put_number(buf, pos, cap, v < 0 ? 0ul - (unsigned long)v : (unsigned long)v, v < 0);
    } else if (fmt[0] == 'l' && fmt[1] == 'd') {
      long v = va_arg(ap, long);
      pos = put_number(buf, pos, cap, v < 0 ? 0ul - (unsigned long)v : (unsigned long)v, v < 0);
      ++fmt;
    } else if (fmt[0] == 'l' && fmt[1] == 'u') {
      pos = put_number(buf, pos, cap, va_arg(ap, unsigned long), 0);
      ++fmt;
    } else if (*fmt == '%') {
      buf[pos++] = '%';
    } else {
      break; /* unsupported conversion: stop formatting */
    }
  }
  va_end(ap);
  return fwrite(buf, 1, pos, f) == pos ? (int)pos : -1;
}

long strtol(const char *s, char **end, int base) {
  const char *p = s;
  unsigned long mag = 0;
  int negative = 0, any = 0;
  (void)base; /* base 10 only */
  while (*p == ' ' || *p == '\t') ++p;
  if (*p == '-' || *p == '+') negative = *p++ == '-';
  for (; *p >= '0' && *p <= '9'; ++p, any = 1) mag = mag * 10u + (unsigned long)(*p - '0');
  if (end) *end = (char *)(any ? p : s);
  return negative ? (long)(0ul - mag) : (long)mag;
}

int strcmp(const char *a, const char *b) {
  while (*a && *a == *b) ++a, ++b;
  return (int)(unsigned char)*a - (int)(unsigned char)*b;
}

size_t strlen(const char *s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

QC_NO_LIBCALL void *memset(void *dst, int c, size_t n) {
  unsigned char *d = dst;
  while (n--) *d++ = (unsigned char)c;
  return dst;
}

QC_NO_LIBCALL void *memcpy(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  while (n--) *d++ = *s++;
  return dst;
}

QC_NO_LIBCALL void *memmove(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (d < s) {
    while (n--) *d++ = *s++;
  } else {
    while (n--) d[n] = s[n];
  }
  return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (; n; --n, ++x, ++y)
    if (*x != *y) return (int)*x - (int)*y;
  return 0;
}
