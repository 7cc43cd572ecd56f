/* `dntrace compare` and the thread states behind it (perf/cpu-states.c): what perf's records say
 * a thread was doing at a moment, on made-up recordings with known answers; then a real
 * `collect --native` of the sample target, where cpu-work burns what CPU it gets and
 * blocking-work sleeps.
 *
 * The real test does not need the machine to itself: how much CPU cpu-work gets depends on
 * whatever else runs, so the kernel's own account of each thread's time over perf's window
 * (/proc's schedstat, polled while perf records), perf's own records and the trace's own samples
 * set the expectations, and the test checks that compare's answer agrees with them. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dnt-perf.h"
#include "../lib/nt-scan.h"
#include "../lib/perf-text.h"
#include "../lib/run.h"
#include "../lib/sched-poll-cr.h"
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
  /* timing: the made-up recording's own timestamps, 1 ms apart; no clock is read */
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

/* The number compare prints right after `label` in its header (the period, the window), or -1. */
static double header_number(const char *out, const char *label) {
  const char *p = strstr(out, label);
  return p ? strtod(p + strlen(label), NULL) : -1;
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

/* The weight (each line's last field) of a folded profile's lines holding needle ("": all). */
static unsigned long long folded_weight(const char *folded, const char *needle) {
  unsigned long long sum = 0;
  for (const char *p = folded; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
    const char *eol = strchr(p, '\n'), *sp = eol ? eol : p + strlen(p);
    while (sp > p && sp[-1] != ' ') sp--;
    const char *hit = strstr(p, needle);
    if (hit && (!eol || hit < eol)) sum += strtoull(sp, NULL, 10);
  }
  return sum;
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

/* ---- what the same run measured, to set compare's answer against ----
 * (tests/lib/sched-poll-cr.h: the kernel's account of each thread's time over perf's window) */

/* What perf's own records say (`perf script`, not dntrace's reading of them): the first and the
 * last record (the span compare reports over), the cpu-clock samples of each of tids and of the
 * whole process, and the period perf sampled at (the samples' period field, in ms). */
struct perf_seen {
  uint64_t first_ns, last_ns;
  unsigned long clock[POLL_TIDS], clock_all;
  double period_ms;
};

static void perf_seen(const char *data, const pid_t *tids, struct perf_seen *ps) {
  char cmd[512], line[1024];
  snprintf(cmd, sizeof cmd, "perf script -i '%s' -F tid,time,period,event --ns 2>/dev/null", data);
  FILE *p = popen(cmd, "r");
  cr_assert(p, "%s", cmd);
  memset(ps, 0, sizeof *ps);
  double periods = 0;
  while (fgets(line, sizeof line, p)) {
    int tid;
    unsigned long long sec, ns, period;
    char event[128];
    if (sscanf(line, " %d %llu.%llu: %llu %127s", &tid, &sec, &ns, &period, event) != 5) continue;
    uint64_t t = sec * 1000000000ull + ns;
    if (!ps->first_ns || t < ps->first_ns) ps->first_ns = t;
    if (t > ps->last_ns) ps->last_ns = t;
    if (strncmp(event, "cpu-clock", 9) != 0) continue;
    ps->clock_all++;
    periods += (double)period;
    for (int i = 0; i < POLL_TIDS; i++)
      if (tid == tids[i]) ps->clock[i]++;
  }
  cr_assert_eq(pclose(p), 0, "%s", cmd);
  cr_assert(ps->clock_all && ps->last_ns > ps->first_ns, "perf recorded cpu-clock samples: %s", cmd);
  ps->period_ms = periods / (double)ps->clock_all / 1e6;
}

#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

/* collect --native then compare on the sample target; with_switches 0: perf cannot record the
 * scheduler's tracepoints, so compare judges by cpu-clock samples alone. Every expectation comes
 * from the same run: the kernel's account of cpu-work's and blocking-work's time over perf's
 * window, perf's own records, the trace's own samples (read by nt-scan, not by dntrace). However
 * little CPU the machine gave cpu-work, the classification must agree with what it got. */
static void compare_run(int with_switches) {
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  const pid_t tids[POLL_TIDS] = {(pid_t)dnt_target_thread_named(t.pid, "cpu-work"),
                                 (pid_t)dnt_target_thread_named(t.pid, "blocking-work")};
  cr_assert(tids[0] && tids[1], "the sample's threads cpu-work (%d) and blocking-work (%d)", (int)tids[0], (int)tids[1]);
  char dir[] = "/tmp/dnt-compare-XXXXXX", trace[128], data[160], pid[16], path[192];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/run.nettrace", dir);
  snprintf(data, sizeof data, "%s/run.perf.data", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  char *path_env = with_switches ? NULL : perf_without_tracepoints(dir);
  const char *const env[] = {path_env, NULL};
  char *const collect[] = {(char *)dnt_bin(), "collect", "-p", pid, "--native", "--duration", "3s", "-o", trace, NULL};
  struct sched_poll poll;
  double steal = steal_ms();
  sched_poll_start(&poll, t.pid, tids);
  int rc = dnt_run_argv(&r, collect, path_env ? env : NULL, 60000);
  int unread = sched_poll_stop(&poll);
  steal = steal_ms() - steal;
  char context[256];
  snprintf(context, sizeof context, "%s", dnt_run_context(t.pid));
  cr_assert_eq(rc, 0, "collect --native: %s%s", r.out, r.err);
  cr_assert_eq(unread, 0, "/proc/%d/task/%d/schedstat read every 5 ms while collect ran", (int)t.pid, unread);
  cr_expect(strstr(r.out, "dntrace compare"), "collect says how to compare:\n%s", r.out);
  if (!with_switches)
    cr_expect(strstr(r.err, "tracefs"), "says the switches cannot be recorded, and the fix:\n%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  cr_assert_eq(access(data, R_OK), 0, "%s written", data);

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
  double period_ms = header_number(r.out, "cpu-clock samples (");
  double window_ms = header_number(r.out, with_switches ? "Off-CPU spells under " : "sampled its thread within ");
  cr_assert(period_ms > 0 && window_ms > 0, "compare prints perf's period and its window:\n%s", r.out);

  /* what the run measured: perf's records; the kernel's time of each thread over perf's window,
   * as shares of it (run: on a CPU, wait: runnable, sleep: the rest), each give or take err */
  struct perf_seen ps;
  perf_seen(data, tids, &ps);
  double span_ms = (double)(ps.last_ns - ps.first_ns) / 1e6;
  struct kernel_time kc = kernel_time(&poll, 0, ps.first_ns, ps.last_ns), kb = kernel_time(&poll, 1, ps.first_ns, ps.last_ns);
  free(poll.rows);
  double c_run = 100 * kc.run_ms / span_ms, c_wait = 100 * kc.wait_ms / span_ms, c_sleep = 100 - c_run - c_wait;
  double b_run = 100 * kb.run_ms / span_ms, b_wait = 100 * kb.wait_ms / span_ms, b_sleep = 100 - b_run - b_wait;
  double c_err = 100 * kc.err_ms / span_ms, b_err = 100 * kb.err_ms / span_ms, stolen = 100 * steal / span_ms;
  /* the trace's samples inside perf's recording (its first to its last record; on Linux the
   * runtime stamps events with CLOCK_MONOTONIC's ns, perf's clock here): compare classifies
   * those, and says how many fell outside (a thread starved at either end leaves perf's span
   * shorter than the session) */
  static struct nt_scan scan;
  memset(&scan, 0, sizeof scan);
  scan.window_lo = ps.first_ns;
  scan.window_hi = ps.last_ns;
  cr_assert_eq(nt_scan_file(trace, &scan), 0, "%s read by nt-scan", trace);
  cr_assert_eq(scan.qpc_frequency, 1000000000ull, "the trace's clock in ns: %llu Hz",
               (unsigned long long)scan.qpc_frequency);
  unsigned long long ep_cpu = nt_scan_count_in_window(&scan, SAMPLER, 0, (uint64_t)tids[0]),
                     ep_blocking = nt_scan_count_in_window(&scan, SAMPLER, 0, (uint64_t)tids[1]),
                     ep_all = nt_scan_count(&scan, SAMPLER, 0, 0),
                     ep_outside = ep_all - nt_scan_count_in_window(&scan, SAMPLER, 0, 0);
  if (ep_outside) {
    char said[128];
    snprintf(said, sizeof said, "%llu EventPipe samples fell outside perf's recording", ep_outside);
    cr_expect(strstr(r.out, said), "compare says '%s':\n%s", said, r.out);
  } else {
    cr_expect(!strstr(r.out, "fell outside perf's recording"), "no sample outside perf's span:\n%s", r.out);
  }
  char seen[1024];
  snprintf(seen, sizeof seen,
           "perf recorded %.0f ms (cpu-clock every %.3f ms; compare's period %.2f ms, window %.2f ms); the kernel: "
           "cpu-work ran %.1f%%, runnable %.1f%%, asleep %.1f%%, blocking-work ran %.1f%%, runnable %.1f%%, "
           "asleep %.1f%% (+-%.1f, %.1f); the hypervisor stole %.0f ms; %s",
           span_ms, ps.period_ms, period_ms, window_ms, c_run, c_wait, c_sleep, b_run, b_wait, b_sleep, c_err, b_err,
           steal, context);
  fprintf(stderr, "# %s switches: cpu-work %lu samples %.1f%% on %.1f%% blocked %.1f%% runnable, perf CPU %.1f%%; "
                  "blocking-work %.1f%% on %.1f%% blocked %.1f%% runnable, perf CPU %.1f%%; %s\n",
          with_switches ? "with" : "without", cpu.samples, cpu.on, cpu.blocked, cpu.runnable, cpu.perf_cpu, blocking.on,
          blocking.blocked, blocking.runnable, blocking.perf_cpu, seen);

  /* EventPipe's view: thread time, the same for a thread that burns a CPU and one that sleeps;
   * compare classified every sample of the two threads that the trace holds inside perf's
   * recording */
  cr_expect_gt(cpu.samples, 0, "%s\n%s", seen, r.out);
  cr_expect_eq(cpu.samples, ep_cpu, "cpu-work: %lu samples classified, %llu in the trace inside perf's span; %s", cpu.samples, ep_cpu, seen);
  cr_expect_eq(blocking.samples, ep_blocking, "blocking-work: %lu samples classified, %llu in the trace inside perf's span; %s",
               blocking.samples, ep_blocking, seen);
  double ratio = (double)blocking.samples / (double)cpu.samples;
  cr_expect(ratio > 0.8 && ratio < 1.25, "similar thread time: %lu vs %lu samples; %s", blocking.samples, cpu.samples,
            seen);
  /* perf's view, independently: its CPU column is cpu-clock samples times compare's period over
   * perf's span, and a sample comes every period of a thread's CPU time; so it holds the
   * kernel's share, scaled by compare's period over perf's own (docs/native-stacks.md; the
   * period compare measures is the median gap between a thread's samples, which its short
   * off-CPU spells lengthen), give or take what the hypervisor stole (in perf's clock, not in the
   * kernel's account) */
  /* Below, at least the kernel's share, unless perf itself recorded less: its cpu-clock is a
   * timer, and a timer that fires late (interrupts held off on a machine busy with I/O) skips
   * periods, which nothing downstream can put back; then compare's column holds at least what
   * perf's own records do */
  double c_perf = 100 * (double)ps.clock[0] * ps.period_ms / span_ms, b_perf = 100 * (double)ps.clock[1] * ps.period_ms / span_ms;
  double c_lo = (c_run < c_perf ? c_run : c_perf) - 3 - c_err - stolen, c_hi = c_run * period_ms / ps.period_ms + 3 + c_err + stolen;
  cr_expect(cpu.perf_cpu >= c_lo && cpu.perf_cpu <= c_hi,
            "perf CPU of cpu-work %.1f%%, expected %.1f..%.1f (perf's own records: %.1f%%); %s", cpu.perf_cpu, c_lo,
            c_hi, c_perf, seen);
  double b_lo = (b_run < b_perf ? b_run : b_perf) - 3 - b_err - stolen, b_hi = b_run * period_ms / ps.period_ms + 3 + b_err + stolen;
  cr_expect(blocking.perf_cpu >= b_lo && blocking.perf_cpu <= b_hi,
            "perf CPU of blocking-work %.1f%%, expected %.1f..%.1f (perf's own records: %.1f%%); %s",
            blocking.perf_cpu, b_lo, b_hi, b_perf, seen);

  /* the classification, against the kernel's account of the same window. cpu-work: the sampler
   * must let a thread in managed code run to a safe point before it samples it, so its samples
   * are on-CPU at least as often as it had a CPU (docs/native-stacks.md, error bounds), and
   * runnable at most as often as it waited for one */
  cr_expect_geq(cpu.on, c_run - 5 - c_err, "cpu-work on-CPU in %.1f%% of its samples, ran %.1f%% of the time; %s",
                cpu.on, c_run, seen);
  if (with_switches) {
    cr_expect_leq(cpu.runnable, c_wait + 5 + c_err, "cpu-work runnable in %.1f%% of its samples, %.1f%% of the time; %s",
                  cpu.runnable, c_wait, seen);
    /* it sleeps only while the runtime suspends it, and each sample is taken inside such a
     * suspension, which counts as running unless it outlasts the window: a blocked sample needs a
     * sleep longer than the window of its own, or falls among the samples spread over the time
     * asleep. So at most asleep x (1 + span / (samples x window)) of them, give or take 5 points
     * (a sampler that skipped the suspension rule would make nearly all of them blocked) */
    double c_blocked_hi = c_sleep * (1 + span_ms / ((double)cpu.samples * window_ms)) + 5 + c_err;
    cr_expect_leq(cpu.blocked, c_blocked_hi, "cpu-work blocked in %.1f%% of its samples, at most %.1f%%; %s",
                  cpu.blocked, c_blocked_hi, seen);
  }
  /* blocking-work: a thread that waits in native code is sampled where it is, running or not:
   * on-CPU in about the share of time it ran, blocked at least as often as it slept (a wake-up
   * nothing in the process made, a timer's, is seen only when it runs: blocked till then);
   * without the switches, off-CPU is all blocked. 8 points, not 5: the kernel adds a wait for a
   * CPU to its count when it ends, so one in progress at either end of the window (tens of ms
   * on a loaded machine) moves its share of sleep by a point or more */
  cr_expect_leq(blocking.on, b_run + 5 + b_err, "blocking-work on-CPU in %.1f%% of its samples, ran %.1f%%; %s",
                blocking.on, b_run, seen);
  cr_expect_geq(blocking.blocked, b_sleep - 8 - b_err, "blocking-work blocked in %.1f%% of its samples, asleep %.1f%%; %s",
                blocking.blocked, b_sleep, seen);
  /* the per-function table puts the perf share of CountPrimes beside EventPipe's: CountPrimes
   * runs on cpu-work alone, so its share of perf's samples is cpu-work's share of the process's
   * (perf's own count) less its loop's caller and the kernel's entries */
  const char *row = strstr(r.out, "Sample!Sample.CpuWork.CountPrimes");
  double ep_share = 0, perf_share = 0;
  if (row) {
    while (row > r.out && row[-1] != '\n') row--;
    cr_expect_eq(sscanf(row, " %lf%% %lf%%", &ep_share, &perf_share), 2, "%s", r.out);
  }
  double cpu_share = 100.0 * (double)ps.clock[0] / (double)ps.clock_all;
  cr_expect(perf_share >= 0.9 * cpu_share - 1 && perf_share <= cpu_share + 1,
            "perf's share of CountPrimes %.1f%%, cpu-work's share of perf's samples %.1f%% (%lu of %lu); %s\n%s",
            perf_share, cpu_share, ps.clock[0], ps.clock_all, seen, r.out);
  cr_expect_lt(ep_share, perf_share, "EventPipe spreads its samples over every thread: CountPrimes %.1f%% of them, "
               "%.1f%% of perf's; %s", ep_share, perf_share, seen);
  dnt_run_free(&r);

  /* the true CPU profile holds CountPrimes and hardly any WaitLoop; the off-CPU one holds WaitLoop:
   * of the thread time EventPipe saw in WaitLoop (blocking-work's), the on-CPU profile holds
   * about the share of time blocking-work ran, as its samples do (above) */
  snprintf(path, sizeof path, "%s/run.oncpu.folded", dir);
  const char *on = slurp(path);
  cr_assert(on, "%s written", path);
  cr_expect(strstr(on, "Sample.CpuWork.CountPrimes"), "on-CPU has CountPrimes");
  unsigned long long wait_on = folded_weight(on, "WaitLoop"), total_on = folded_weight(on, "");
  snprintf(path, sizeof path, "%s/run.offcpu.folded", dir);
  const char *off = slurp(path); /* (the same buffer as on's) */
  cr_assert(off, "%s written", path);
  cr_expect(strstr(off, "Sample.BlockingWork.WaitLoop"), "off-CPU has WaitLoop");
  unsigned long long wait_off = folded_weight(off, "WaitLoop");
  double wait_on_share = 100.0 * (double)wait_on / (double)(wait_on + wait_off + !(wait_on + wait_off));
  cr_expect_leq(wait_on_share, b_run + 5 + b_err,
                "WaitLoop on-CPU: %llu of its %llu (%.1f%%; %llu on-CPU in all), blocking-work ran %.1f%%; %s", wait_on,
                wait_on + wait_off, wait_on_share, total_on, b_run, seen);

  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
  free(path_env);
}

/* One test, the two runs one after the other (each measures what the machine gave it: whatever
 * else runs beside them only changes the expectations). */
Test(compare_runtime, true_cpu_and_off_cpu_of_the_sample, .timeout = 300) {
  DNT_REQUIRE_PERF();
  compare_run(1);
  compare_run(0);
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

/* A loop of Thread.Sleep(1) (issue 28 item 4: 47% on a CPU in the true CPU profile, 1.6% by
 * perf): thread 9 sleeps 1.07 ms at a time and runs a few microseconds between (cpu-clock
 * catches it now and then), each sleep ended by its timer, which no thread of the process is
 * (perf records no wake-up): its short sleeps are sleeps, unlike the sampler's suspensions, which
 * a thread of the process ends. */
Test(cpu_states, short_sleeps_nothing_in_the_process_ended_are_blocked) {
  static struct text t;
  t.len = 0;
  busy_thread(&t); /* perf's period (1 ms) and span */
  for (int i = 0; i < 80; i++) {
    uint64_t out = 1005 * MS + (uint64_t)i * 1070000;
    if (i % 4 == 1) clock_sample(&t, 9, "sleeper", out - 20000); /* now and then cpu-clock catches it running */
    switch_out(&t, 9, "sleeper", out, "S");
  }
  dnt_cpu_states *cs = states_of(&t, t.len);
  int blocked = 0;
  for (int i = 1; i < 79; i++) blocked += dnt_cpu_state_at(cs, 9, 1005 * MS + (uint64_t)i * 1070000 + 500000) == DNT_OFF_BLOCKED;
  cr_expect_eq(blocked, 78, "%d of 78 points inside a sleep are blocked", blocked);
  /* the busy thread's own suspension, ended by the sampler (thread 3), stays on a CPU */
  cr_expect_eq(dnt_cpu_state_at(cs, 7, 1050 * MS + MS / 2 + 30000), DNT_ON_CPU);
  dnt_cpu_states_free(cs);
}
