/* qc_minilibc.h: the few C library functions the qcodegen harness (main.c) uses, for freestanding
 * targets without a C library (riscv64-unknown-elf-gcc on Debian). Implemented in qc_minilibc.c on top
 * of Linux system calls, so the harness runs under QEMU user mode. Not a general-purpose libc: fprintf
 * knows %s %d %ld %lu %%, strtol base 10. SPDX-License-Identifier: Apache-2.0 */
#ifndef QC_MINILIBC_H
#define QC_MINILIBC_H

#include <stddef.h>

#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2

typedef struct qc_file { int fd; } FILE;
extern FILE qc_stderr_file, qc_stdout_file;
#define stderr (&qc_stderr_file)
#define stdout (&qc_stdout_file)

FILE *fopen(const char *path, const char *mode);
int fclose(FILE *f);
int fseek(FILE *f, long offset, int whence);
long ftell(FILE *f);
size_t fread(void *dst, size_t size, size_t n, FILE *f);
size_t fwrite(const void *src, size_t size, size_t n, FILE *f);
int fprintf(FILE *f, const char *fmt, ...);

long strtol(const char *s, char **end, int base);
void exit(int status);

int strcmp(const char *a, const char *b);
size_t strlen(const char *s);
void *memset(void *dst, int c, size_t n);
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);

#endif /* QC_MINILIBC_H */
