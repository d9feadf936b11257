/* qc_insncount.c: a QEMU TCG plugin (plugin API version 1, QEMU 6.x to 8.x) that counts the guest
 * instructions executed inside call windows, and with a timing table estimates their cycles.
 *
 * Windows: a window opens when the instruction at entry=ADDR executes (the first instruction of <name>_run,
 * counted) and closes when the instruction at a stop=ADDR executes (the return site in the caller, not
 * counted). Everything executed in between -- the function and all its callees, compiler runtime helpers
 * included -- is counted. Several stop= arguments may be given. out=FILE receives "calls C\ninsns N\n" at exit
 * (N summed over the C windows), and "cycles K\nuntimed U\n" with a timing table.
 * Per-segment mode (bench/profile_steps.py): each mark=ADDR (an address inside the window, e.g. the return site
 * of one step call) closes a segment: the instructions executed in the window since the previous mark (or the
 * entry) are added to that mark's count, written as "mark ADDR insns N hits H cycles K" lines.
 *
 * Timing (timing=FILE, written by qcodegen/verify/timing from the disassembly and a core's timing model): one
 * line per instruction, "ADDR SEQ ENTRY TAKEN UNALIGNED" (hexadecimal address, then decimals): the cycles of the
 * instruction when the instruction before it in memory executed just before (SEQ) or when it is the first after
 * a taken branch (ENTRY), the extra cycles when it writes the PC and execution continues elsewhere (TAKEN), and
 * whether its unaligned accesses cost the Cortex-M4's extra cycles (UNALIGNED: 1). The plugin adds the dynamic
 * part: a translation block whose start differs from the address after the last instruction of the block
 * executed before it was reached by a taken branch -- that branch's TAKEN cycles are added and the block's first
 * instruction costs ENTRY --, and a memory callback on UNALIGNED instructions adds 1 cycle for a byte-aligned
 * halfword or a halfword-aligned word, 2 for a byte-aligned word. Instructions missing from the table cost 1
 * and are counted as "untimed". Unaligned-access cycles are added when the access executes: in a block that
 * holds a window boundary or a mark after its first instruction they may fall on the other side of it.
 *
 * Hexagon (packets=hexagon): QEMU translates and reports a whole packet as one instruction. The plugin then
 * counts the instructions in each packet from its encoding (32-bit words: a duplex word holds two
 * instructions, a constant extender none) for "insns" and the marks, and writes the packets as "packets P".
 *
 * Built at run time by qcodegen with the host C compiler; QEMU's qemu-plugin.h is not packaged on Debian,
 * so the few declarations needed are written out below. Single vCPU (user mode, or one-core boards).
 * SPDX-License-Identifier: Apache-2.0 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QC_EXPORT __attribute__((visibility("default")))
#define QC_MAX_STOPS 16
#define QC_MAX_MARKS 4096

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                           void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, void (*cb)(unsigned int, void *),
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn,
                                      void (*cb)(unsigned int, qemu_plugin_meminfo_t, uint64_t, void *),
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *), void *userdata);

QC_EXPORT int qemu_plugin_version = 1;

enum { KIND_ENTRY = -1, KIND_STOP = -2 };

/* One row of the timing table. */
struct cost {
  uint64_t addr;
  uint32_t seq, entry, taken, unaligned;
};

/* A translation block as the execution callback sees it: the cycles before each of its instructions when it
 * is entered in sequence (prefix[i]: instructions 0..i-1), the difference its first instruction makes when it
 * is entered by a taken branch, what the block after it needs to tell whether it was jumped to, and the
 * instructions at which a window opens or closes or a segment ends. */
struct block {
  uint64_t start, next; /* address of the first instruction, address after the last */
  uint64_t taken;       /* TAKEN cycles of the last instruction */
  int64_t entry_delta;  /* ENTRY - SEQ of the first instruction */
  size_t n_insns;
  uint64_t *before;     /* Hexagon: the instructions in the packets before each index (n_insns + 1); else NULL */
  uint64_t *prefix;     /* n_insns + 1 values, NULL without a timing table */
  uint32_t *missing;    /* n_insns + 1 counts of instructions missing from the table, NULL if none is */
  size_t n_marks;
  struct { size_t index; int kind; } marks[]; /* kind: KIND_ENTRY, KIND_STOP or a segment mark's number */
};

static uint64_t entry_addr = UINT64_MAX;
static uint64_t mark_addr[QC_MAX_MARKS], mark_insns[QC_MAX_MARKS], mark_hits[QC_MAX_MARKS];
static uint64_t mark_cycles[QC_MAX_MARKS];
static size_t n_marks;
static uint64_t stop_addr[QC_MAX_STOPS];
static size_t n_stops;
static const char *out_path;
static struct cost *table;
static size_t table_size;

static uint64_t total, cycles;           /* instructions and estimated cycles executed so far */
static uint64_t untimed;                 /* executed instructions missing from the timing table */
static uint64_t last_mark, last_mark_cycles; /* totals at the entry or the last segment mark */
static uint64_t opened, opened_cycles, opened_untimed; /* totals when the current window opened */
static bool active;
static uint64_t counted, counted_cycles, counted_untimed, calls;
static uint64_t previous_next = UINT64_MAX, previous_taken; /* of the block executed last */
static bool hexagon;     /* QEMU's instructions are Hexagon packets */
static uint64_t packets, opened_packets, counted_packets; /* Hexagon: the same for packets */

/* The instructions in a Hexagon packet: its 32-bit words (little-endian) less the constant extenders
 * (ICLASS 0), a duplex (parse bits 15:14 = 00) counting two. */
static uint64_t packet_insns(const struct qemu_plugin_insn *insn) {
  const unsigned char *data = qemu_plugin_insn_data(insn);
  size_t size = qemu_plugin_insn_size(insn);
  uint64_t n = 0;
  for (size_t k = 0; k + 4 <= size; k += 4) {
    uint32_t word = data[k] | (uint32_t)data[k + 1] << 8 | (uint32_t)data[k + 2] << 16 | (uint32_t)data[k + 3] << 24;
    n += ((word >> 14) & 3) == 0 ? 2 : (word >> 28) != 0;
  }
  return n;
}

static bool is_stop(uint64_t pc) {
  for (size_t i = 0; i < n_stops; i++)
    if (stop_addr[i] == pc) return true;
  return false;
}

static int mark_of(uint64_t pc) {
  for (size_t i = 0; i < n_marks; i++)
    if (mark_addr[i] == pc) return (int)i;
  return -1;
}

static const struct cost *cost_of(uint64_t pc) {
  size_t lo = 0, hi = table_size;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (table[mid].addr < pc) lo = mid + 1; else hi = mid;
  }
  return lo < table_size && table[lo].addr == pc ? &table[lo] : NULL;
}

static void unaligned_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata) {
  unsigned int shift = qemu_plugin_mem_size_shift(info);
  (void)vcpu; (void)udata;
  if (shift == 1 && (vaddr & 1)) cycles += 1;
  else if (shift == 2 && (vaddr & 3)) cycles += (vaddr & 1) ? 2 : 1;
}

/* Cycles before instruction `index` of `b` since the block started. */
static uint64_t cycles_before(const struct block *b, size_t index, bool jumped) {
  if (!b->prefix) return 0;
  return b->prefix[index] + (index > 0 && jumped ? (uint64_t)b->entry_delta : 0);
}

/* Instructions executed in a block before its instruction (Hexagon: packet) `index`. */
static uint64_t insns_before(const struct block *b, size_t index) {
  return b->before ? b->before[index] : index;
}

static void block_exec(unsigned int vcpu, void *udata) {
  const struct block *b = udata;
  bool jumped = b->start != previous_next;
  uint64_t base = cycles, insn_base = total, untimed_base = untimed, packet_base = packets;
  (void)vcpu;
  if (jumped) base = cycles += previous_taken;
  for (size_t i = 0; i < b->n_marks; i++) {
    size_t at = b->marks[i].index;
    total = insn_base + insns_before(b, at);
    packets = packet_base + at;
    cycles = base + cycles_before(b, at, jumped);
    untimed = untimed_base + (b->missing ? b->missing[at] : 0);
    if (b->marks[i].kind == KIND_ENTRY && !active) {
      active = true;
      opened = last_mark = total;
      opened_cycles = last_mark_cycles = cycles;
      opened_untimed = untimed;
      opened_packets = packets;
    } else if (b->marks[i].kind == KIND_STOP && active) {
      active = false;
      counted += total - opened;
      counted_cycles += cycles - opened_cycles;
      counted_untimed += untimed - opened_untimed;
      counted_packets += packets - opened_packets;
      calls++;
    } else if (b->marks[i].kind >= 0 && active) {
      mark_insns[b->marks[i].kind] += total - last_mark;
      mark_cycles[b->marks[i].kind] += cycles - last_mark_cycles;
      mark_hits[b->marks[i].kind]++;
      last_mark = total;
      last_mark_cycles = cycles;
    }
  }
  total = insn_base + insns_before(b, b->n_insns);
  packets = packet_base + b->n_insns;
  cycles = base + cycles_before(b, b->n_insns, jumped);
  untimed = untimed_base + (b->missing ? b->missing[b->n_insns] : 0);
  previous_next = b->next;
  previous_taken = b->taken;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  size_t n = qemu_plugin_tb_n_insns(tb), marks = 0;
  struct block *b;
  (void)id;
  for (size_t i = 0; i < n; i++) {
    uint64_t pc = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
    marks += (pc == entry_addr) + is_stop(pc) + (mark_of(pc) >= 0);
  }
  if (marks == 0 && !table) {
    uint64_t insns = n;
    if (hexagon) {
      insns = 0;
      for (size_t i = 0; i < n; i++) insns += packet_insns(qemu_plugin_tb_get_insn(tb, i));
      qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &packets, n);
    }
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &total, insns);
    return;
  }
  b = malloc(sizeof *b + marks * sizeof b->marks[0]); /* lives as long as the translation: never freed */
  if (!b) abort();
  b->start = qemu_plugin_tb_vaddr(tb);
  b->n_insns = n;
  b->missing = NULL;
  b->n_marks = 0;
  b->prefix = NULL;
  b->taken = 0;
  b->entry_delta = 0;
  b->next = b->start;
  b->before = NULL;
  if (hexagon) {
    b->before = malloc((n + 1) * sizeof b->before[0]);
    if (!b->before) abort();
    b->before[0] = 0;
    for (size_t i = 0; i < n; i++) b->before[i + 1] = b->before[i] + packet_insns(qemu_plugin_tb_get_insn(tb, i));
  }
  if (table) {
    b->prefix = malloc((n + 1) * sizeof b->prefix[0]);
    if (!b->prefix) abort();
    b->prefix[0] = 0;
  }
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    uint64_t pc = qemu_plugin_insn_vaddr(insn);
    if (mark_of(pc) >= 0) { b->marks[b->n_marks].index = i; b->marks[b->n_marks++].kind = mark_of(pc); }
    if (is_stop(pc)) { b->marks[b->n_marks].index = i; b->marks[b->n_marks++].kind = KIND_STOP; }
    if (pc == entry_addr) { b->marks[b->n_marks].index = i; b->marks[b->n_marks++].kind = KIND_ENTRY; }
    b->next = pc + qemu_plugin_insn_size(insn);
    if (table) {
      const struct cost *c = cost_of(pc);
      b->prefix[i + 1] = b->prefix[i] + (c ? c->seq : 1);
      b->taken = c ? c->taken : 0;
      if (i == 0 && c) b->entry_delta = (int64_t)c->entry - (int64_t)c->seq;
      if (c && c->unaligned)
        qemu_plugin_register_vcpu_mem_cb(insn, unaligned_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         NULL);
      if (!c && !b->missing) {
        b->missing = calloc(n + 1, sizeof b->missing[0]);
        if (!b->missing) abort();
      }
      if (b->missing) b->missing[i + 1] = b->missing[i] + !c;
    }
  }
  qemu_plugin_register_vcpu_tb_exec_cb(tb, block_exec, QEMU_PLUGIN_CB_NO_REGS, b);
}

static int by_addr(const void *a, const void *b) {
  uint64_t x = ((const struct cost *)a)->addr, y = ((const struct cost *)b)->addr;
  return x < y ? -1 : x > y;
}

static int load_table(const char *path) {
  FILE *f = fopen(path, "r");
  size_t cap = 1024;
  unsigned long long addr;
  unsigned seq, entry, taken, unaligned;
  if (!f) {
    fprintf(stderr, "qc_insncount: cannot open %s\n", path);
    return -1;
  }
  table = malloc(cap * sizeof *table);
  if (!table) abort();
  while (fscanf(f, "%llx %u %u %u %u", &addr, &seq, &entry, &taken, &unaligned) == 5) {
    if (table_size == cap) {
      table = realloc(table, (cap *= 2) * sizeof *table);
      if (!table) abort();
    }
    table[table_size++] = (struct cost){addr, seq, entry, taken, unaligned};
  }
  fclose(f);
  qsort(table, table_size, sizeof *table, by_addr);
  return 0;
}

static void at_exit(qemu_plugin_id_t id, void *udata) {
  FILE *f;
  (void)id; (void)udata;
  if (!out_path) return;
  f = fopen(out_path, "w");
  if (!f) return;
  fprintf(f, "calls %llu\ninsns %llu\n", (unsigned long long)calls, (unsigned long long)counted);
  if (hexagon) fprintf(f, "packets %llu\n", (unsigned long long)counted_packets);
  if (table)
    fprintf(f, "cycles %llu\nuntimed %llu\n", (unsigned long long)counted_cycles,
            (unsigned long long)counted_untimed);
  for (size_t i = 0; i < n_marks; i++)
    fprintf(f, "mark %#llx insns %llu hits %llu cycles %llu\n", (unsigned long long)mark_addr[i],
            (unsigned long long)mark_insns[i], (unsigned long long)mark_hits[i],
            (unsigned long long)mark_cycles[i]);
  fclose(f);
}

QC_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const void *info, int argc, char **argv) {
  (void)info;
  for (int i = 0; i < argc; i++) {
    if (!strncmp(argv[i], "entry=", 6)) {
      entry_addr = strtoull(argv[i] + 6, NULL, 0);
    } else if (!strncmp(argv[i], "stop=", 5) && n_stops < QC_MAX_STOPS) {
      stop_addr[n_stops++] = strtoull(argv[i] + 5, NULL, 0);
    } else if (!strncmp(argv[i], "mark=", 5) && n_marks < QC_MAX_MARKS) {
      mark_addr[n_marks++] = strtoull(argv[i] + 5, NULL, 0);
    } else if (!strncmp(argv[i], "timing=", 7)) {
      if (load_table(argv[i] + 7)) return -1;
    } else if (!strcmp(argv[i], "packets=hexagon")) {
      hexagon = true;
    } else if (!strncmp(argv[i], "out=", 4)) {
      size_t len = strlen(argv[i] + 4) + 1;
      char *copy = malloc(len);                 /* QEMU may free argv after install */
      if (!copy) return -1;
      out_path = memcpy(copy, argv[i] + 4, len);
    } else {
      fprintf(stderr, "qc_insncount: unknown argument %s\n", argv[i]);
      return -1;
    }
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
  qemu_plugin_register_atexit_cb(id, at_exit, NULL);
  return 0;
}
