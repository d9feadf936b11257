/* qc_insncount.c: a QEMU TCG plugin (plugin API version 1, QEMU 6.x to 8.x) that counts the guest
 * instructions executed inside call windows: a window opens when the instruction at entry=ADDR executes
 * (the first instruction of <name>_run, counted) and closes when the instruction at a stop=ADDR executes
 * (the return site in the caller, not counted). Everything executed in between -- the function and all its
 * callees, compiler runtime helpers included -- is counted. Several stop= arguments may be given.
 * out=FILE receives "calls C\ninsns N\n" at exit (N summed over the C windows).
 * Per-segment mode (bench/profile_steps.py): each mark=ADDR (an address inside the window, e.g. the return site
 * of one step call) closes a segment: the instructions executed in the window since the previous mark (or the
 * entry) are added to that mark's count, written as "mark ADDR insns N hits H" lines.
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
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                           void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, void (*cb)(unsigned int, void *),
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *), void *userdata);

QC_EXPORT int qemu_plugin_version = 1;

/* A translation block holding the entry or a stop address: its instructions are counted by a callback
 * that knows where, inside the block, the window opens or closes. */
struct marked_tb {
  size_t n_insns;
  size_t n_marks;
  struct { size_t index; int kind; } marks[]; /* kind: KIND_ENTRY, KIND_STOP or a segment mark's number */
};

enum { KIND_ENTRY = -1, KIND_STOP = -2 };

static uint64_t entry_addr = UINT64_MAX;
static uint64_t mark_addr[QC_MAX_MARKS], mark_insns[QC_MAX_MARKS], mark_hits[QC_MAX_MARKS];
static size_t n_marks;
static uint64_t last_mark; /* value of total at the entry or the last segment mark */
static uint64_t stop_addr[QC_MAX_STOPS];
static size_t n_stops;
static const char *out_path;

static uint64_t total;   /* every instruction executed so far */
static uint64_t opened;  /* value of total when the current window opened */
static bool active;
static uint64_t counted, calls;

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

static void marked_exec(unsigned int vcpu, void *udata) {
  const struct marked_tb *m = udata;
  size_t pos = 0;
  (void)vcpu;
  for (size_t i = 0; i < m->n_marks; i++) {
    total += m->marks[i].index - pos;
    pos = m->marks[i].index;
    if (m->marks[i].kind == KIND_ENTRY && !active) {
      active = true;
      opened = last_mark = total;
    } else if (m->marks[i].kind == KIND_STOP && active) {
      active = false;
      counted += total - opened;
      calls++;
    } else if (m->marks[i].kind >= 0 && active) {
      mark_insns[m->marks[i].kind] += total - last_mark;
      mark_hits[m->marks[i].kind]++;
      last_mark = total;
    }
  }
  total += m->n_insns - pos;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  size_t n = qemu_plugin_tb_n_insns(tb), marks = 0;
  struct marked_tb *m;
  (void)id;
  for (size_t i = 0; i < n; i++) {
    uint64_t pc = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
    marks += (pc == entry_addr) + is_stop(pc) + (mark_of(pc) >= 0);
  }
  if (marks == 0) {
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &total, n);
    return;
  }
  m = malloc(sizeof *m + marks * sizeof m->marks[0]); /* lives as long as the translation: never freed */
  if (!m) abort();
  m->n_insns = n;
  m->n_marks = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t pc = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
    if (mark_of(pc) >= 0) { m->marks[m->n_marks].index = i; m->marks[m->n_marks++].kind = mark_of(pc); }
    if (is_stop(pc)) { m->marks[m->n_marks].index = i; m->marks[m->n_marks++].kind = KIND_STOP; }
    if (pc == entry_addr) { m->marks[m->n_marks].index = i; m->marks[m->n_marks++].kind = KIND_ENTRY; }
  }
  qemu_plugin_register_vcpu_tb_exec_cb(tb, marked_exec, QEMU_PLUGIN_CB_NO_REGS, m);
}

static void at_exit(qemu_plugin_id_t id, void *udata) {
  FILE *f;
  (void)id; (void)udata;
  if (!out_path) return;
  f = fopen(out_path, "w");
  if (!f) return;
  fprintf(f, "calls %llu\ninsns %llu\n", (unsigned long long)calls, (unsigned long long)counted);
  for (size_t i = 0; i < n_marks; i++)
    fprintf(f, "mark %#llx insns %llu hits %llu\n", (unsigned long long)mark_addr[i],
            (unsigned long long)mark_insns[i], (unsigned long long)mark_hits[i]);
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
