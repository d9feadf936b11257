/* qc_cortex_m_startup.c: start-up code of the qcodegen harness on Cortex-M boards emulated by QEMU
 * (mps2-an386, mps2-an500, mps3-an547), linked with newlib's rdimon (semihosting) C library and
 * -nostartfiles. The reset handler enables the FPU / MVE when the build uses them, zeroes .bss, opens the
 * semihosting standard streams, fetches the command line through semihosting (SYS_GET_CMDLINE, split at
 * spaces), runs main() and exits with its status (semihosting SYS_EXIT through newlib's exit()).
 * The stack is the top of RAM (vector table), the heap grows from the end of .bss: nothing depends on what
 * the board reports through SYS_HEAPINFO. A fault ends the emulation with a failure status.
 * SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>

#define QC_SYS_GET_CMDLINE 0x15u
#define QC_SYS_EXIT 0x18u
#define QC_MAX_ARGS 64

extern uint32_t __bss_start__[], __bss_end__[];
int main(int argc, char **argv);
void initialise_monitor_handles(void);
void qc_reset_handler(void);
void qc_fault_handler(void);
void _init(void);
void _fini(void);

/* Referenced by newlib's constructor / destructor walkers (normally from crti.o); C needs neither. */
void _init(void) {}
void _fini(void) {}

static uint32_t qc_semihost(uint32_t op, void *arg) {
  register uint32_t r0 __asm__("r0") = op;
  register void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

static int qc_split(char *s, char **argv) {
  int argc = 0;
  while (*s && argc < QC_MAX_ARGS) {
    while (*s == ' ') *s++ = '\0';
    if (!*s) break;
    argv[argc++] = s;
    while (*s && *s != ' ') ++s;
  }
  argv[argc] = NULL;
  return argc;
}

void qc_reset_handler(void) {
  static char cmdline[4096];
  static char *argv[QC_MAX_ARGS + 1];
  struct { char *buf; uint32_t len; } request;
  uint32_t *p;
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  volatile uint32_t *cpacr = (volatile uint32_t *)0xE000ED88u;
  *cpacr |= 0xFu << 20; /* CP10 and CP11 full access */
  __asm__ volatile("dsb\n\tisb" : : : "memory");
#endif
  for (p = __bss_start__; p != __bss_end__; ++p) *p = 0;
  initialise_monitor_handles();
  request.buf = cmdline;
  request.len = sizeof cmdline - 1;
  if (qc_semihost(QC_SYS_GET_CMDLINE, &request) != 0) request.len = 0;
  cmdline[request.len < sizeof cmdline ? request.len : sizeof cmdline - 1] = '\0';
  exit(main(qc_split(cmdline, argv), argv));
}

void qc_fault_handler(void) {
  qc_semihost(QC_SYS_EXIT, (void *)0x20023u); /* ADP_Stopped_RunTimeErrorUnknown: QEMU exits with 1 */
  for (;;) {
  }
}

/* Initial stack pointer, reset vector, then the 14 system exceptions (reserved slots included). */
__asm__(
    "  .section .qc_vectors, \"a\", %progbits\n"
    "  .align 2\n"
    "  .global qc_vectors\n"
    "qc_vectors:\n"
    "  .word __qc_stack_top\n"
    "  .word qc_reset_handler\n"
    "  .rept 14\n"
    "  .word qc_fault_handler\n"
    "  .endr\n"
    "  .text\n");
