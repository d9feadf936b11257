/* cpuid_mask.c: an LD_PRELOAD library that hides the CPU's AVX-512, AVX-VNNI (and later VEX int8/fp16
 * extensions) and AMX features from CPUID, so that run-time dispatchers (cpuinfo, used by XNNPACK) select their
 * AVX2 kernels. bench/targets_bench.py runs LiteRT's XNNPACK under it for a same-ISA comparison with the
 * x86-avx2 target.
 *
 * x86-64 Linux with CPUID faulting only (/proc/cpuinfo flag cpuid_fault): the constructor installs a SIGSEGV
 * handler and makes every CPUID of the thread trap (arch_prctl(ARCH_SET_CPUID, 0); threads created later inherit
 * it). The handler emulates a trapped CPUID: it runs the real instruction with faulting briefly off for the
 * thread, clears the feature bits in MASKED below and steps over the 2-byte instruction. Any other SIGSEGV gets
 * the default action again (a real crash still crashes). CPUIDs executed before the constructor (the dynamic
 * loader's, glibc's ifunc selection) see the real CPU. If faulting cannot be enabled, one line goes to stderr and
 * nothing is hidden; qc_cpuid_masked() tells the caller which case it is in.
 *
 * Built by the bench: cc -O2 -shared -fPIC -o libcpuid_mask.so bench/cpuid_mask.c
 * SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_SET_CPUID 0x1012 /* asm/prctl.h; arg 0: CPUID faults, arg 1: CPUID runs */
#define BIT(n) (UINT32_C(1) << (n))
#define AVX512F BIT(16)

/* Feature bits cleared, per (leaf, subleaf), in EAX, EBX, ECX, EDX order (Intel SDM vol. 2A, CPUID). */
static const struct {
    uint32_t leaf, subleaf, bits[4];
} MASKED[] = {
    {7, 0, {0,
            /* EBX: AVX512F, DQ, IFMA, PF, ER, CD, BW, VL */
            AVX512F | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31),
            /* ECX: AVX512_VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
            BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14),
            /* EDX: AVX512_4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, AVX512_FP16, AMX-TILE, AMX-INT8 */
            BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25)}},
    {7, 1, {/* EAX: AVX-VNNI, AVX512_BF16, AMX-FP16, AVX-IFMA */
            BIT(4) | BIT(5) | BIT(21) | BIT(23), 0, 0,
            /* EDX: AVX-VNNI-INT8, AVX-NE-CONVERT, AMX-COMPLEX, AVX-VNNI-INT16, AVX10 */
            BIT(4) | BIT(5) | BIT(8) | BIT(10) | BIT(19)}},
};

static int active; /* CPUID faults and on_segv emulates it */

/* The real CPUID of r[0] (leaf), r[2] (subleaf) into r[0..3] = EAX, EBX, ECX, EDX. */
static void cpuid(uint32_t r[4]) {
    __asm__ volatile("cpuid" : "+a"(r[0]), "=b"(r[1]), "+c"(r[2]), "=d"(r[3]));
}

static long set_cpuid_faulting(int on) {
    return syscall(SYS_arch_prctl, ARCH_SET_CPUID, on ? 0 : 1);
}

static void default_segv(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
}

static void on_segv(int sig, siginfo_t *info, void *context) {
    greg_t *gregs = ((ucontext_t *)context)->uc_mcontext.gregs;
    const unsigned char *rip = (const unsigned char *)gregs[REG_RIP];
    uint32_t r[4];
    size_t i;
    int saved_errno = errno;
    (void)sig;
    /* a faulting CPUID is a general protection fault (SI_KERNEL), not a page fault: RIP is readable */
    if (info->si_code != SI_KERNEL || rip[0] != 0x0F || rip[1] != 0xA2) {
        default_segv(); /* the instruction runs again and the process dies as it would have */
        return;
    }
    r[0] = (uint32_t)gregs[REG_RAX];
    r[2] = (uint32_t)gregs[REG_RCX];
    set_cpuid_faulting(0);
    cpuid(r);
    set_cpuid_faulting(1);
    for (i = 0; i < sizeof MASKED / sizeof MASKED[0]; i++) {
        if (MASKED[i].leaf == (uint32_t)gregs[REG_RAX] && MASKED[i].subleaf == (uint32_t)gregs[REG_RCX]) {
            r[0] &= ~MASKED[i].bits[0];
            r[1] &= ~MASKED[i].bits[1];
            r[2] &= ~MASKED[i].bits[2];
            r[3] &= ~MASKED[i].bits[3];
        }
    }
    gregs[REG_RAX] = r[0]; /* CPUID zero-extends into the 64-bit registers */
    gregs[REG_RBX] = r[1];
    gregs[REG_RCX] = r[2];
    gregs[REG_RDX] = r[3];
    gregs[REG_RIP] += 2;
    errno = saved_errno;
}

__attribute__((constructor)) static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0 || set_cpuid_faulting(1) != 0) {
        fprintf(stderr, "cpuid_mask: cannot enable CPUID faulting (%s): CPU features not hidden\n",
                strerror(errno));
        default_segv();
        return;
    }
    active = 1;
}

/* 1 when CPUID is being masked: faulting is on and leaf 7 reports no AVX-512 (through on_segv). */
int qc_cpuid_masked(void) {
    uint32_t r[4] = {7, 0, 0, 0};
    if (!active)
        return 0;
    cpuid(r);
    return !(r[1] & AVX512F);
}
