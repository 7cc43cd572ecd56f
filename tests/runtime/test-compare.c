/* `dntrace compare` and the thread states behind it (src/cpu-states.c): what perf's records say
 * a thread was doing at a moment, on made-up recordings with known answers; then a real
 * `collect --native` of the sample target, where cpu-work burns a CPU and blocking-work sleeps.
 *
 * The real test runs alone (tests/Makemodule.am orders its log after every other test's): the
 * cpu-work thread is on a CPU nearly all the time only when no other test competes for the two
 * cores, and what is checked is that compare tells that apart from waiting. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dnt-perf.h"
#include "../lib/perf-text.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"

/* ---- made-up recordings, as perf script prints them ---- */

#define MS 1000000ull /* ns */

static void clock_sample(struct text *t, int tid, const char *comm, uint64_t ns) {
  line(t, "%s 100/%d %llu.%09llu: cpu-clock/freq=999/: \n\t    55d0c0de1234 Work (/memfd:doublemapper (deleted))\n\n",
       comm, tid, (unsigned long long)(ns / 1000000000ull), (unsigned long long)(ns % 1000000000ull));
}

static void switch_out(struct text *t, int tid, const char *comm, uint64_t ns, const char *state) {
  line(t, "%s 100/%d %llu.%09llu: sched:sched_switch: prev_comm=%s prev_pid=%d prev_prio=120 prev_state=%s ==> "
          "next_comm=swapper/0 next_pid=0 next_prio=120\n\tffffffff8100 __schedule ([kernel.kallsyms])\n\n",
       comm, tid, (unsigned long long)(ns / 1000000000ull), (unsigned long long)(ns % 1000000000ull), comm, tid,
       state);
}

static void waking(struct text *t, int waker, int tid, const char *comm, uint64_t ns) {
  line(t, "waker 100/%d %llu.%09llu: sched:sched_waking: comm=%s pid=%d prio=120 target_cpu=001\n\n", waker,
       (unsigned long long)(ns / 1000000000ull), (unsigned long long)(ns % 1000000000ull), comm, tid);
}

static int add_sample(void *ud, const dnt_perf_sample *s) { return dnt_cpu_states_add(ud, s); }

/* Parses the text in pieces of `piece` bytes (any split must do) into a finished record. */
static dnt_cpu_states *states_of(const struct text *t, size_t piece) {
  dnt_cpu_states *cs = dnt_cpu_states_new();
  cr_assert(cs);
  static const dnt_perf_script_cb cb = {add_sample, NULL};
  dnt_perf_script *p = dnt_perf_script_new(&cb, cs);
  cr_assert(p);
  for (size_t off = 0; off < t->len; off += piece)
    cr_assert_eq(dnt_perf_script_feed(p, t->buf + off, off + piece <= t->len ? piece : t->len - off), 0);
  cr_assert_eq(dnt_perf_script_finish(p), 0);
  dnt_perf_script_free(p);
  cr_assert_eq(dnt_cpu_states_finish(cs, 0), 0);
  return cs;
}

/* A busy thread 7 sampled by cpu-clock every 1 ms from 1 s to 1.1 s, suspended by the
 * SampleProfiler at 1.0505 s for 70 us (a switch-out asleep, then a wake-up by the sampler). */
static void busy_thread(struct text *t) {
  for (int i = 0; i <= 100; i++) clock_sample(t, 7, "busy", 1000 * MS + (uint64_t)i * MS);
  switch_out(t, 7, "busy", 1050 * MS + MS / 2, "S");
  waking(t, 3, 7, "busy", 1050 * MS + MS / 2 + 70000);
}

Test(cpu_states, a_busy_thread_is_on_cpu_through_the_samplers_own_suspension) {
  static struct text t;
  t.len = 0;
  busy_thread(&t);
  dnt_cpu_states *cs = states_of(&t, t.len);
  struct dnt_cpu_states_info info;
  dnt_cpu_states_info(cs, &info);
  cr_expect(info.period_ms > 0.99 && info.period_ms < 1.02, "period %.3f ms from 1 ms gaps", info.period_ms);
  cr_expect(info.has_switches);
  cr_expect_eq(info.cpu_samples, 101);
  /* inside the suspension itself, and between samples */
  cr_expect_eq(dnt_cpu_state_at(cs, 7, 1050 * MS + MS / 2 + 30000), DNT_ON_CPU);
  cr_expect_eq(dnt_cpu_state_at(cs, 7, 1020 * MS + MS / 2), DNT_ON_CPU);
  /* outside what perf recorded */
  cr_expect_eq(dnt_cpu_state_at(cs, 7, 999 * MS), DNT_UNCOVERED);
  cr_expect_eq(dnt_cpu_state_at(cs, 7, 1101 * MS), DNT_UNCOVERED);
  /* a thread perf never saw: it never ran */
  cr_expect_eq(dnt_cpu_state_at(cs, 8, 1050 * MS), DNT_OFF_BLOCKED);
  dnt_cpu_states_free(cs);
}

Test(cpu_states, the_samplers_preemption_and_double_suspension_on_a_busy_machine) {
  /* what perf recorded of a busy thread while the machine was short of CPU: the sampler's
   * thread takes its CPU (preempted), then suspends it twice over, then lets it run on */
  static struct text t;
  t.len = 0;
  for (int i = 0; i <= 100; i++) clock_sample(&t, 7, "busy", 1000 * MS + (uint64_t)i * MS);
  uint64_t x = 1040 * MS + 300000;
  switch_out(&t, 7, "busy", x, "R");
  switch_out(&t, 7, "busy", x + 88000, "S");
  waking(&t, 3, 7, "busy", x + 161000);
  switch_out(&t, 7, "busy", x + 193000, "S");
  waking(&t, 3, 7, "busy", x + 250000);
  /* and a preemption that lasts: 3 ms without running */
  switch_out(&t, 7, "busy", 1060 * MS + 100000, "R");
  dnt_cpu_states *cs = states_of(&t, t.len);
  cr_expect_eq(dnt_cpu_state_at(cs, 7, x + 120000), DNT_ON_CPU, "inside the suspension");
  cr_expect_eq(dnt_cpu_state_at(cs, 7, x + 220000), DNT_ON_CPU, "inside the second one");
  dnt_cpu_states_free(cs);
  /* the lasting preemption: the samples at 1061..1063 ms are taken out for it */
  t.len = 0;
  for (int i = 0; i <= 100; i++)
    if (i < 61 || i > 63) clock_sample(&t, 7, "busy", 1000 * MS + (uint64_t)i * MS);
  switch_out(&t, 7, "busy", 1060 * MS + 100000, "R");
  cs = states_of(&t, t.len);
  cr_expect_eq(dnt_cpu_state_at(cs, 7, 1062 * MS), DNT_OFF_RUNNABLE);
  cr_expect_eq(dnt_cpu_state_at(cs, 7, 1064 * MS + 100000), DNT_ON_CPU);
  dnt_cpu_states_free(cs);
}

Test(cpu_states, sleeping_preempted_and_woken) {
  static struct text t;
  t.len = 0;
  busy_thread(&t); /* gives perf's period and span */
  /* thread 9 runs, sleeps 10..60 ms, is woken at 60 ms and gets its CPU by 61 ms; then it is
   * preempted at 80 ms and runs again by 85 ms */
  uint64_t base = 1000 * MS;
  clock_sample(&t, 9, "sleeper", base + 9 * MS);
  switch_out(&t, 9, "sleeper", base + 10 * MS, "S");
  waking(&t, 3, 9, "sleeper", base + 60 * MS);
  clock_sample(&t, 9, "sleeper", base + 61 * MS);
  clock_sample(&t, 9, "sleeper", base + 62 * MS);
  switch_out(&t, 9, "sleeper", base + 80 * MS, "R+");
  clock_sample(&t, 9, "sleeper", base + 85 * MS);
  /* thread 11 sleeps at 20 ms and is woken by something outside the target (no waking record):
   * perf sees it run at 40 ms */
  switch_out(&t, 11, "outside", base + 20 * MS, "D");
  clock_sample(&t, 11, "outside", base + 40 * MS);
  for (size_t piece = 1; piece <= 4096; piece = piece * 3 + 1) {
    dnt_cpu_states *cs = states_of(&t, piece);
    cr_expect_eq(dnt_cpu_state_at(cs, 9, base + 9 * MS + 500000), DNT_ON_CPU, "piece %zu", piece);
    cr_expect_eq(dnt_cpu_state_at(cs, 9, base + 30 * MS), DNT_OFF_BLOCKED, "piece %zu", piece);
    cr_expect_eq(dnt_cpu_state_at(cs, 9, base + 60 * MS + 500000), DNT_OFF_RUNNABLE, "woken, not yet running");
    cr_expect_eq(dnt_cpu_state_at(cs, 9, base + 70 * MS), DNT_ON_CPU, "running since 61 ms");
    cr_expect_eq(dnt_cpu_state_at(cs, 9, base + 82 * MS), DNT_OFF_RUNNABLE, "preempted");
    cr_expect_eq(dnt_cpu_state_at(cs, 9, base + 86 * MS), DNT_ON_CPU);
    cr_expect_eq(dnt_cpu_state_at(cs, 11, base + 30 * MS), DNT_OFF_BLOCKED);
    cr_expect_eq(dnt_cpu_state_at(cs, 11, base + 41 * MS), DNT_ON_CPU, "woken from outside, seen running");
    uint64_t n;
    cr_expect_str_eq(dnt_cpu_states_thread(cs, 9, &n), "sleeper");
    cr_expect_eq(n, 4);
    dnt_cpu_states_free(cs);
  }
}

Test(cpu_states, without_switches_the_window_decides) {
  static struct text t;
  t.len = 0;
  for (int i = 0; i <= 100; i++) clock_sample(&t, 7, "busy", 1000 * MS + (uint64_t)i * MS);
  /* thread 5 runs from 20 to 30 ms only */
  for (int i = 20; i <= 30; i++) clock_sample(&t, 5, "burst", 1000 * MS + (uint64_t)i * MS);
  dnt_cpu_states *cs = states_of(&t, 7);
  struct dnt_cpu_states_info info;
  dnt_cpu_states_info(cs, &info);
  cr_expect_not(info.has_switches);
  cr_expect_eq(dnt_cpu_state_at(cs, 5, 1025 * MS + MS / 2), DNT_ON_CPU);
  cr_expect_eq(dnt_cpu_state_at(cs, 5, 1030 * MS + info.window_ms * 0.9 * MS), DNT_ON_CPU, "within the window");
  cr_expect_eq(dnt_cpu_state_at(cs, 5, 1040 * MS), DNT_OFF_BLOCKED);
  cr_expect_eq(dnt_cpu_state_at(cs, 5, 1010 * MS), DNT_OFF_BLOCKED);
  dnt_cpu_states_free(cs);
}

Test(cpu_states, thread_names_that_look_like_fields) {
  /* a thread may call itself anything up to 15 bytes; the fields are found after its name */
  static struct text t;
  t.len = 0;
  busy_thread(&t);
  switch_out(&t, 12, "x prev_state=R", 1010 * MS, "S");
  waking(&t, 3, 13, "a pid=9 prio=1", 1020 * MS);
  switch_out(&t, 13, "a pid=9 prio=1", 1010 * MS, "S");
  dnt_cpu_states *cs = states_of(&t, t.len);
  cr_expect_eq(dnt_cpu_state_at(cs, 12, 1050 * MS), DNT_OFF_BLOCKED, "asleep, not preempted");
  cr_expect_eq(dnt_cpu_state_at(cs, 13, 1030 * MS), DNT_OFF_RUNNABLE, "thread 13 woken (not 9)");
  cr_expect_eq(dnt_cpu_state_at(cs, 9, 1030 * MS), DNT_OFF_BLOCKED, "no thread 9");
  dnt_cpu_states_free(cs);
}

/* ---- the real thing ---- */

struct thread_row {
  unsigned long samples;
  double on, blocked, runnable, perf_cpu;
};

/* The per-thread row of compare's table for a thread name. */
static int thread_row(const char *out, const char *name, struct thread_row *row) {
  const char *table = strstr(out, "Per thread");
  if (!table) return -1;
  for (const char *p = strchr(table, '\n'); p && p[1] && p[1] != '\n'; p = strchr(p + 1, '\n')) {
    unsigned long tid;
    char got[17];
    if (sscanf(p + 1, " %lu %16s %lu %lf%% %lf%% %lf%% %lf%%", &tid, got, &row->samples, &row->on, &row->blocked,
               &row->runnable, &row->perf_cpu) == 7 &&
        strcmp(got, name) == 0)
      return 0;
  }
  return -1;
}

static char *slurp(const char *path) {
  FILE *fp = fopen(path, "re");
  if (!fp) return NULL;
  static char buf[4 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  return buf;
}

/* A perf that cannot record tracepoints, as where tracefs is not mounted: a wrapper in dir that
 * refuses any sched: event and hands everything else to the real perf. Returns "PATH=dir:...". */
static char *perf_without_tracepoints(const char *dir) {
  char real[512] = "", script[1200], path[600];
  FILE *which = popen("command -v perf", "r");
  cr_assert(which);
  cr_assert(fgets(real, sizeof real, which), "perf on PATH");
  pclose(which);
  real[strcspn(real, "\n")] = '\0';
  snprintf(path, sizeof path, "%s/perf", dir);
  FILE *fp = fopen(path, "w");
  cr_assert(fp);
  snprintf(script, sizeof script,
           "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in sched:*) echo 'event syntax error: tracepoint' >&2; "
           "exit 129;; esac; done\nexec '%s' \"$@\"\n",
           real);
  fputs(script, fp);
  fclose(fp);
  cr_assert_eq(chmod(path, 0755), 0);
  const char *old = getenv("PATH");
  char *env = malloc(strlen(dir) + strlen(old ? old : "") + 8);
  sprintf(env, "PATH=%s:%s", dir, old ? old : "");
  return env;
}

/* What dntrace wrote to DNT_TRACE_OPENS: how many times it opened a trace (-1: nothing written). */
static int opens_count(const char *path) {
  FILE *fp = fopen(path, "r");
  int n = -1;
  if (fp) {
    if (fscanf(fp, "%d", &n) != 1) n = -1;
    fclose(fp);
  }
  return n;
}

/* collect --native then compare on the sample target; with_switches 0: perf cannot record the
 * scheduler's tracepoints, so compare judges by cpu-clock samples alone. Returns 0 without judging
 * when the machine did not give cpu-work most of a CPU (another process took it: cpu-work waited
 * runnable) and last_try is 0: the classification checks need a thread that runs; else 1. */
static int compare_run(int with_switches, int last_try) {
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char dir[] = "/tmp/dnt-compare-XXXXXX", trace[128], pid[16], path[192];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/run.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  char *path_env = with_switches ? NULL : perf_without_tracepoints(dir);
  const char *const env[] = {path_env, NULL};
  char *const collect[] = {(char *)dnt_bin(), "collect", "-p", pid, "--native", "--duration", "5s", "-o", trace, NULL};
  int rc = dnt_run_argv(&r, collect, path_env ? env : NULL, 60000);
  cr_assert_eq(rc, 0, "collect --native: %s%s", r.out, r.err);
  cr_expect(strstr(r.out, "dntrace compare"), "collect says how to compare:\n%s", r.out);
  if (!with_switches)
    cr_expect(strstr(r.err, "tracefs"), "says the switches cannot be recorded, and the fix:\n%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  snprintf(path, sizeof path, "%s/run.perf.data", dir);
  cr_assert_eq(access(path, R_OK), 0, "%s written", path);

  char *const compare[] = {(char *)dnt_bin(), "compare", trace, "--format", "folded", "--top", "20", NULL};
  char opens_file[160], opens_env[200];
  snprintf(opens_file, sizeof opens_file, "%s/opens", dir);
  snprintf(opens_env, sizeof opens_env, "DNT_TRACE_OPENS=%s", opens_file);
  const char *const compare_env[] = {opens_env, path_env, NULL};
  rc = dnt_run_argv(&r, compare, compare_env, 60000);
  cr_assert_eq(rc, 0, "compare: %s%s", r.out, r.err);
  /* one pass over the trace feeds every view and the names of perf's frames */
  cr_expect_eq(opens_count(opens_file), 1, "compare opened %s %d times", trace, opens_count(opens_file));
  cr_expect(strstr(r.out, with_switches ? "and the scheduler's switches" : "no scheduler switches"),
            "says what it judged by:\n%s", r.out);
  struct thread_row cpu, blocking;
  cr_assert_eq(thread_row(r.out, "cpu-work", &cpu), 0, "a cpu-work row:\n%s", r.out);
  cr_assert_eq(thread_row(r.out, "blocking-work", &blocking), 0, "a blocking-work row:\n%s", r.out);
  if ((cpu.perf_cpu <= 75 || cpu.runnable > 5) && !last_try) {
    fprintf(stderr, "# cpu-work had %.1f%% of a CPU and waited for one %.1f%% of its samples: the machine is busy, "
                "recording again\n", cpu.perf_cpu, cpu.runnable);
    dnt_run_free(&r);
    char again[256];
    snprintf(again, sizeof again, "rm -rf '%s'", dir);
    cr_assert_eq(system(again), 0);
    free(path_env);
    return 0;
  }
  /* EventPipe's view: thread time, the same for a thread that burns a CPU and one that sleeps */
  cr_expect_gt(cpu.samples, 1000, "%s", r.out);
  double ratio = (double)blocking.samples / (double)cpu.samples;
  cr_expect(ratio > 0.8 && ratio < 1.25, "similar thread time: %lu vs %lu samples", blocking.samples, cpu.samples);
  /* perf's view, independently: cpu-work had most of a CPU (this test runs alone so that it can;
   * perf's own estimate, samples times the period, reads 80-90% for a thread that never leaves
   * the CPU on a loaded 2-CPU VM, its samples coming 1.2 ms apart at 999 Hz, and 70% once the
   * machine's load is 5) */
  cr_expect_gt(cpu.perf_cpu, 60, "perf says cpu-work had %.1f%% of a CPU:\n%s", cpu.perf_cpu, r.out);
  cr_expect_lt(blocking.perf_cpu, 5, "perf says blocking-work had %.1f%% of a CPU", blocking.perf_cpu);
  /* the classification */
  cr_expect_geq(cpu.on, 90, "cpu-work samples on-CPU: %.1f%%\n%s", cpu.on, r.out);
  cr_expect_geq(blocking.blocked + blocking.runnable, 90, "blocking-work samples off-CPU: %.1f%%\n%s",
                blocking.blocked + blocking.runnable, r.out);
  cr_expect_geq(blocking.blocked, 80, "blocking-work asleep: %.1f%%", blocking.blocked);
  /* the per-function table puts the perf share of CountPrimes beside EventPipe's */
  const char *row = strstr(r.out, "Sample!Sample.CpuWork.CountPrimes");
  double ep_share = 0, perf_share = 0;
  if (row) {
    while (row > r.out && row[-1] != '\n') row--;
    cr_expect_eq(sscanf(row, " %lf%% %lf%%", &ep_share, &perf_share), 2, "%s", r.out);
  }
  cr_expect_gt(perf_share, 50, "perf's share of CountPrimes %.1f%%:\n%s", perf_share, r.out);
  cr_expect_lt(ep_share, perf_share, "EventPipe spreads its samples over every thread");
  dnt_run_free(&r);

  /* the true CPU profile holds CountPrimes and not WaitLoop; the off-CPU one holds WaitLoop */
  snprintf(path, sizeof path, "%s/run.oncpu.folded", dir);
  const char *on = slurp(path);
  cr_assert(on, "%s written", path);
  cr_expect(strstr(on, "Sample.CpuWork.CountPrimes"), "on-CPU has CountPrimes");
  unsigned long wait_on = 0, total_on = 0;
  for (const char *p = on; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
    const char *eol = strchr(p, '\n'), *sp = eol ? eol : p + strlen(p);
    while (sp > p && sp[-1] != ' ') sp--;
    unsigned long n = strtoul(sp, NULL, 10);
    total_on += n;
    const char *hit = strstr(p, "WaitLoop");
    if (hit && (!eol || hit < eol)) wait_on += n;
  }
  cr_expect_lt((double)wait_on, 0.02 * (double)total_on, "WaitLoop on-CPU: %lu of %lu", wait_on, total_on);
  snprintf(path, sizeof path, "%s/run.offcpu.folded", dir);
  const char *off = slurp(path);
  cr_assert(off, "%s written", path);
  cr_expect(strstr(off, "Sample.BlockingWork.WaitLoop"), "off-CPU has WaitLoop");

  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
  free(path_env);
  return 1;
}

/* One test, the two runs one after the other: two targets at once would share the CPUs. A run
 * whose cpu-work did not get most of a CPU (a VM whose neighbours take its CPUs) is recorded
 * again, four times at most. */
Test(compare_runtime, true_cpu_and_off_cpu_of_the_sample, .timeout = 600) {
  DNT_REQUIRE_PERF();
  for (int with_switches = 1; with_switches >= 0; with_switches--)
    for (int attempt = 0; !compare_run(with_switches, attempt == 4); attempt++) {}
}

Test(compare_cli, errors) {
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "compare", NULL), 2, "no trace: usage");
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "compare", "x.nettrace", "--window", "-1", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "compare", "/nonexistent/x.nettrace", NULL), 1);
  cr_expect(strstr(r.err, "collect --native"), "says how to record: %s", r.err);
  dnt_run_free(&r);
}
