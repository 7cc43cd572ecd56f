/* `dntrace waits` (perf/waits.c): made-up recordings, as perf script prints them, whose waits and
 * wakers are known by construction; then a real `collect --native` of the sample target with
 * --handoff, where thread setter wakes thread waiter every 10 ms from Sample.Handoff.SignalWaiter
 * and blocking-work sleeps 50 ms of every 150 (Thread.Sleep(50) after Task.Delay(100)).
 *
 * The real test does not need the machine to itself: load stretches the sample's cadence, so
 * perf's own records of the same run (its span, waiter's sleeps, setter's wake-ups) and the
 * kernel's account of each thread's time (/proc's schedstat, polled while perf records) set the
 * expectations, and the test checks that waits' answer agrees with them. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dnt-perf.h"
#include "dnt-profile.h"
#include "../lib/nt-scan.h"
#include "../lib/perf-text.h"
#include "../lib/run.h"
#include "../lib/sched-poll-cr.h"
#include "../lib/target-cr.h"

static double absd(double x) { return x < 0 ? -x : x; }

/* ---- made-up recordings ---- */

#define MS 1000000ull /* ns */

/* an address of its own for each name, as perf names an address alike wherever it appears */
static unsigned addr_of(const char *name) {
  unsigned h = 2166136261u;
  for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
  return h & 0xffffff;
}

static void header(struct text *t, const char *comm, int tid, uint64_t ns, const char *event) {
  line(t, "%s 100/%d %llu.%09llu: %s: ", comm, tid, (unsigned long long)(ns / 1000000000ull),
       (unsigned long long)(ns % 1000000000ull), event);
}

/* a switch-out in state (S, R...) to next, with the kernel frames given, leaf first, then the
 * user frames (sym@dso) */
static void switch_out(struct text *t, const char *comm, int tid, uint64_t ns, const char *state, int next,
                       const char *const *kernel, const char *const *user) {
  header(t, comm, tid, ns, "sched:sched_switch");
  line(t, "prev_comm=%s prev_pid=%d prev_prio=120 prev_state=%s ==> next_comm=other next_pid=%d next_prio=120\n", comm,
       tid, state, next);
  for (unsigned k = 0; kernel && kernel[k]; k++) line(t, "\tffffffff81%06x %s ([kernel.kallsyms])\n", addr_of(kernel[k]), kernel[k]);
  for (unsigned u = 0; user && user[u]; u++) line(t, "\t    %x %s (/usr/lib/libwork.so)\n", addr_of(user[u]), user[u]);
  line(t, "\n");
}

static void waking(struct text *t, const char *comm, int tid, uint64_t ns, const char *wakee, int wakee_tid,
                   const char *const *kernel, const char *const *user) {
  header(t, comm, tid, ns, "sched:sched_waking");
  line(t, "comm=%s pid=%d prio=120 target_cpu=001\n", wakee, wakee_tid);
  for (unsigned k = 0; kernel && kernel[k]; k++) line(t, "\tffffffff81%06x %s ([kernel.kallsyms])\n", addr_of(kernel[k]), kernel[k]);
  for (unsigned u = 0; user && user[u]; u++) line(t, "\t    %x %s (/usr/lib/libwork.so)\n", addr_of(user[u]), user[u]);
  line(t, "\n");
}

static void clock_sample(struct text *t, const char *comm, int tid, uint64_t ns) {
  header(t, comm, tid, ns, "cpu-clock/freq=999/");
  line(t, "\n\t    %x Spin (/usr/lib/libwork.so)\n\n", addr_of("Spin"));
}

static const char *const futex_k[] = {"__schedule", "schedule", "futex_wait", "do_futex", NULL};
static const char *const sleep_k[] = {"__schedule", "schedule", "do_nanosleep", "hrtimer_nanosleep", NULL};
static const char *const epoll_k[] = {"__schedule", "schedule", "ep_poll", "do_epoll_wait", NULL};
static const char *const wake_k[] = {"try_to_wake_up", "wake_up_q", "futex_wake", "do_futex", NULL};
static const char *const timer_k[] = {"try_to_wake_up", "hrtimer_wakeup", "__hrtimer_run_queues", "hrtimer_interrupt",
                                      "asm_sysvec_apic_timer_interrupt", NULL};
static const char *const waiter_u[] = {"pthread_cond_wait", "WaitLoop", "start_thread", NULL};
static const char *const setter_u[] = {"SignalWaiter", "SetLoop", "start_thread", NULL};
static const char *const spin_u[] = {"Spin", "start_thread", NULL};

/* The known story, times in ms from 1 s:
 *   waiter (7) blocks in a futex at 0, setter (8) wakes it at 10 from SignalWaiter and is
 *     preempted at 10.1 in its favour: one wait of 10.1 ms, woken by setter;
 *   sleeper (9) sleeps at 0; a timer interrupt that hit setter wakes it at 50; perf samples it
 *     at 50.2: one wait of 50.2 ms, no waker in the process;
 *   poller (10) blocks in epoll at 0; nothing recorded wakes it; it runs at 100: 100 ms, none;
 *   waiter is preempted at 20 (runnable: no wait) and blocks again at 30 until the end (left out). */
static void story(struct text *t) {
  t->len = 0;
  switch_out(t, "waiter", 7, 1000 * MS, "S", 8, futex_k, waiter_u);
  switch_out(t, "sleeper", 9, 1000 * MS, "S", 0, sleep_k, spin_u);
  switch_out(t, "poller", 10, 1000 * MS, "S", 0, epoll_k, spin_u);
  waking(t, "setter", 8, 1010 * MS, "waiter", 7, wake_k, setter_u);
  switch_out(t, "setter", 8, 1010 * MS + MS / 10, "R", 7, NULL, setter_u);
  switch_out(t, "waiter", 7, 1020 * MS, "R", 8, NULL, spin_u);
  switch_out(t, "waiter", 7, 1030 * MS, "S", 8, futex_k, waiter_u);
  waking(t, "setter", 8, 1050 * MS, "sleeper", 9, timer_k, spin_u);
  clock_sample(t, "sleeper", 9, 1050 * MS + MS / 5);
  clock_sample(t, "poller", 10, 1100 * MS);
}

struct analysed {
  char json[1 << 16], folded[1 << 16];
  struct dnt_waits_info info;
};

/* The story fed in pieces of `piece` bytes through the analysis, then its JSON and folded views. */
static void analyse(const struct text *t, size_t piece, const struct dnt_waits_filter *f,
                    const char *managed_of_waiter, struct analysed *out) {
  struct dnt_profile *prof = dnt_profile_new();
  dnt_waits *w = dnt_waits_new();
  struct dnt_symtab perfmap = {0};
  cr_assert(prof && w);
  dnt_perf_reader *r = dnt_waits_reader(w, prof, &perfmap);
  cr_assert(r);
  for (size_t off = 0; off < t->len; off += piece)
    cr_assert_eq(dnt_perf_reader_feed(r, t->buf + off, off + piece <= t->len ? piece : t->len - off), 0);
  cr_assert_eq(dnt_perf_reader_finish(r), 0);
  if (managed_of_waiter) {
    const char *names[] = {"Sample!Sample.Program.Main", managed_of_waiter, DNT_UNMANAGED_FRAME};
    cr_assert_eq(dnt_waits_managed_sample(w, 7, 1005 * MS, names, 3), 0);
  }
  cr_assert_eq(dnt_waits_finish(w, prof, f, &out->info), 0);
  cr_assert_eq(dnt_profile_finish(prof), 0);
  FILE *fp = fmemopen(out->json, sizeof out->json, "w");
  cr_assert_eq(dnt_waits_write_json(prof, 0, fp), 0);
  fclose(fp);
  fp = fmemopen(out->folded, sizeof out->folded, "w");
  cr_assert_eq(dnt_profile_write(prof, DNT_PROFILE_FOLDED, "waits", fp), 0);
  fclose(fp);
  dnt_perf_reader_free(r);
  dnt_waits_free(w);
  dnt_profile_free(prof);
  dnt_symtab_release(&perfmap);
}

/* The JSON row (one a line) of thread name, or NULL. */
static const char *row_of(const char *json, const char *thread, char *buf, size_t cap) {
  char key[64];
  snprintf(key, sizeof key, "\"thread\":\"%s\"", thread);
  const char *hit = strstr(json, key);
  if (!hit) return NULL;
  const char *start = hit, *end = strchr(hit, '\n');
  while (start > json && start[-1] != '\n') start--;
  size_t n = end ? (size_t)(end - start) : strlen(start);
  if (n >= cap) n = cap - 1;
  memcpy(buf, start, n);
  buf[n] = '\0';
  return buf;
}

static double field_num(const char *row, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "\"%s\":", name);
  const char *p = strstr(row, key);
  return p ? strtod(p + strlen(key), NULL) : -1;
}

Test(waits, made_up_story) {
  struct text *t = malloc(sizeof *t);
  struct analysed *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  story(t);
  analyse(t, t->len, NULL, NULL, a);
  cr_expect_eq(a->info.intervals, 3, "three waits ended: %llu", (unsigned long long)a->info.intervals);
  cr_expect_eq(a->info.unended, 1, "waiter's last wait never ended");
  cr_expect_eq(a->info.interrupt_wakings, 1, "the timer's wake-up is told apart");
  char row[4096];
  cr_assert(row_of(a->json, "waiter", row, sizeof row), "%s", a->json);
  cr_expect(absd(field_num(row, "ms") - 10.1) < 1e-6, "waiter waited 10.1 ms: %s", row);
  cr_expect_eq(field_num(row, "count"), 1);
  cr_expect(strstr(row, "\"waker\":\"setter\""), "%s", row);
  cr_expect(strstr(row, "\"kind\":\"futex/monitor\""), "%s", row);
  cr_expect(strstr(row, "libwork.so!SignalWaiter"), "the waker's stack: %s", row);
  cr_assert(row_of(a->json, "sleeper", row, sizeof row), "%s", a->json);
  cr_expect(absd(field_num(row, "ms") - 50.2) < 1e-6, "%s", row);
  cr_expect(strstr(row, "\"waker\":null") && strstr(row, "\"kind\":\"sleep\""), "%s", row);
  cr_expect(strstr(row, "\"waker_stack\":[]"), "an interrupt's stack is not a waker's: %s", row);
  cr_assert(row_of(a->json, "poller", row, sizeof row), "%s", a->json);
  cr_expect(absd(field_num(row, "ms") - 100) < 1e-6, "%s", row);
  cr_expect(strstr(row, "\"waker\":null") && strstr(row, "\"kind\":\"epoll/socket\""), "%s", row);
  cr_expect_null(row_of(a->json, "setter", row, sizeof row), "setter never waited (it was preempted)");
  /* the waker's frames stand above the waiter's, each stack root first */
  const char *f = strstr(a->folded, "WaitLoop"), *sep = strstr(a->folded, "[woken_by_setter]");
  const char *sig = strstr(a->folded, "SignalWaiter"), *wake = strstr(a->folded, "try_to_wake_up");
  cr_assert(f && sep && sig && wake, "%s", a->folded);
  cr_expect(f < sep && sep < sig && sig < wake, "blocked stack, separator, waker root to leaf:\n%s", a->folded);
  cr_expect(strstr(a->folded, "[no_waker_in_the_process]"), "%s", a->folded);
  /* any split of perf's text gives the same answer */
  for (size_t piece = 1; piece < 64; piece = piece * 2 + 1) {
    analyse(t, piece, NULL, NULL, b);
    cr_expect_str_eq(b->json, a->json, "pieces of %zu bytes", piece);
  }
  free(t);
  free(a);
  free(b);
}

Test(waits, filters_and_managed_stacks) {
  struct text *t = malloc(sizeof *t);
  struct analysed *a = malloc(sizeof *a);
  char row[4096];
  story(t);
  struct dnt_waits_filter by_name = {.name = "sleeper"};
  analyse(t, t->len, &by_name, NULL, a);
  cr_expect_eq(a->info.kept, 1);
  cr_expect(row_of(a->json, "sleeper", row, sizeof row) && !row_of(a->json, "waiter", row, sizeof row));
  struct dnt_waits_filter by_tid = {.tid = 10};
  analyse(t, t->len, &by_tid, NULL, a);
  cr_expect(row_of(a->json, "poller", row, sizeof row) && a->info.kept == 1, "%s", a->json);
  struct dnt_waits_filter longer = {.min_ms = 20};
  analyse(t, t->len, &longer, NULL, a);
  cr_expect_eq(a->info.kept, 2, "the 10.1 ms wait is left out");
  /* EventPipe's samples: only managed threads count, and the managed stack goes below perf's
   * frames when perf's chain did not reach the thread's start (waiter's chain does: not used) */
  analyse(t, t->len, NULL, "Sample!Sample.Handoff.WaitLoop", a);
  cr_expect_eq(a->info.kept, 1, "only the managed thread's wait: %s", a->json);
  cr_assert(row_of(a->json, "waiter", row, sizeof row), "%s", a->json);
  cr_expect_null(strstr(row, "Sample!Sample.Handoff.WaitLoop"), "a whole chain keeps its own frames: %s", row);
  free(t);
  free(a);
}

Test(waits, kinds) {
  const char *nanosleep[] = {"[kernel]!__schedule", "[kernel]!do_nanosleep", "[kernel]!hrtimer_nanosleep"};
  const char *dotnet_sleep[] = {"Sample!Main", "System.Private.CoreLib!System.Threading.Thread.Sleep",
                                "[kernel]!futex_wait"};
  const char *futex[] = {"libc.so.6!x", "[kernel]!futex_wait_queue", "[kernel]!__schedule"};
  const char *sock[] = {"[kernel]!tcp_recvmsg", "[kernel]!sk_wait_data"};
  const char *io[] = {"[kernel]!vfs_read", "[kernel]!io_schedule"};
  const char *fault[] = {"[kernel]!asm_exc_page_fault", "[kernel]!handle_mm_fault", "[kernel]!io_schedule"};
  const char *other[] = {"[kernel]!__schedule", "libc.so.6!futex_wait"};
  cr_expect_str_eq(dnt_waits_kind(nanosleep, 3, 0), "sleep");
  cr_expect_str_eq(dnt_waits_kind(nanosleep, 3, 1), "sleep", "a nanosleep is one whoever ended it");
  cr_expect_str_eq(dnt_waits_kind(dotnet_sleep, 3, 0), "sleep");
  cr_expect_str_eq(dnt_waits_kind(dotnet_sleep, 3, 1), "futex/monitor",
                   "inside Thread.Sleep, a wait a thread ended is the runtime's (its resume after a suspension)");
  cr_expect_str_eq(dnt_waits_kind(futex, 3, 0), "futex/monitor");
  cr_expect_str_eq(dnt_waits_kind(sock, 2, 1), "epoll/socket");
  cr_expect_str_eq(dnt_waits_kind(io, 2, 1), "file I/O");
  cr_expect_str_eq(dnt_waits_kind(fault, 3, 0), "page fault", "a fault's I/O is the fault's");
  cr_expect_str_eq(dnt_waits_kind(other, 2, 0), "other", "only kernel frames say the kind");
}

/* ---- the sample target ---- */

static char *slurp(const char *path) {
  FILE *fp = fopen(path, "re");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  rewind(fp);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, fp);
  fclose(fp);
  buf[got] = '\0';
  return buf;
}

/* ---- what the same run measured, to set waits' answer against ----
 * (tests/lib/sched-poll-cr.h: the kernel's account of each thread's time over perf's window) */

/* What perf's own records say (`perf script`, not dntrace's reading of them): the first and the
 * last record; waiter's first and last switch-out asleep (prev_state not R); setter's wake-ups
 * of waiter (sched_waking, recorded in the waker's context), by time. */
struct perf_seen {
  uint64_t first_ns, last_ns, first_out, last_out;
  uint64_t *wakes;
  size_t nwakes;
};

static void perf_seen(const char *data, pid_t waiter, pid_t setter, struct perf_seen *ps) {
  char cmd[512], line[4096], pid_field[32];
  snprintf(cmd, sizeof cmd, "perf script -i '%s' -F tid,time,event,trace --ns 2>/dev/null", data);
  snprintf(pid_field, sizeof pid_field, " pid=%d ", (int)waiter);
  FILE *p = popen(cmd, "r");
  cr_assert(p, "%s", cmd);
  memset(ps, 0, sizeof *ps);
  size_t cap = 0;
  while (fgets(line, sizeof line, p)) {
    int tid, at;
    unsigned long long sec, ns;
    char event[128];
    if (sscanf(line, " %d %llu.%llu: %127s %n", &tid, &sec, &ns, event, &at) != 4) continue;
    uint64_t t = sec * 1000000000ull + ns;
    if (!ps->first_ns || t < ps->first_ns) ps->first_ns = t;
    if (t > ps->last_ns) ps->last_ns = t;
    const char *trace = line + at;
    if (tid == waiter && strcmp(event, "sched:sched_switch:") == 0 && strstr(trace, " prev_state=") &&
        !strstr(trace, " prev_state=R")) {
      if (!ps->first_out) ps->first_out = t;
      ps->last_out = t;
    }
    if (tid == setter && strcmp(event, "sched:sched_waking:") == 0 && strstr(trace, pid_field)) {
      if (ps->nwakes == cap) cr_assert(ps->wakes = realloc(ps->wakes, (cap = cap ? 2 * cap : 1024) * sizeof *ps->wakes));
      ps->wakes[ps->nwakes++] = t;
    }
  }
  cr_assert_eq(pclose(p), 0, "%s", cmd);
  cr_assert(ps->last_ns > ps->first_ns && ps->last_out > ps->first_out, "perf recorded waiter's sleeps: %s", cmd);
}

/* setter's wake-ups of waiter in (from, to] */
static unsigned long wakes_between(const struct perf_seen *ps, uint64_t from, uint64_t to) {
  unsigned long n = 0;
  for (size_t i = 0; i < ps->nwakes; i++) n += ps->wakes[i] > from && ps->wakes[i] <= to;
  return n;
}

#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

struct sums {
  double ms, by_setter_in_signal, sleep_ms;
  unsigned long count, by_setter, sleeps;
};

/* Sums the JSON rows of thread (one row a line). */
static struct sums sum_rows(const char *json, const char *thread) {
  struct sums s = {0};
  char key[64];
  snprintf(key, sizeof key, "\"thread\":\"%s\"", thread);
  for (const char *l = json; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    const char *eol = strchr(l, '\n');
    size_t n = eol ? (size_t)(eol - l) : strlen(l);
    char *row = strndup(l, n);
    if (strstr(row, key)) {
      double ms = field_num(row, "ms");
      unsigned long count = (unsigned long)field_num(row, "count");
      s.ms += ms;
      s.count += count;
      const char *ws = strstr(row, "\"waker_stack\":");
      if (strstr(row, "\"waker\":\"setter\"")) {
        s.by_setter += count;
        if (ws && strstr(ws, "Sample!Sample.Handoff.SignalWaiter")) s.by_setter_in_signal += ms;
      }
      if (strstr(row, "\"kind\":\"sleep\"")) {
        s.sleep_ms += ms;
        s.sleeps += count;
      }
    }
    free(row);
  }
  return s;
}

/* Every expectation comes from the same run: perf's own records (the span, waiter's sleeps,
 * setter's wake-ups), the kernel's account of waiter's and blocking-work's time over them, the
 * trace's own samples (read by nt-scan, not by dntrace); so however the machine's load stretched
 * the sample's cadence, waits must agree with what it did. */
Test(waits_runtime, handoff_and_sleep_of_the_sample, .timeout = 240) {
  DNT_REQUIRE_PERF();
  dnt_target t;
  const char *const args[] = {"--handoff", NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000, .args = args};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  const pid_t setter = (pid_t)dnt_target_thread_named(t.pid, "setter");
  const pid_t tids[POLL_TIDS] = {(pid_t)dnt_target_thread_named(t.pid, "waiter"),
                                 (pid_t)dnt_target_thread_named(t.pid, "blocking-work")};
  cr_assert(setter && tids[0] && tids[1], "the sample's threads setter (%d), waiter (%d), blocking-work (%d)",
            (int)setter, (int)tids[0], (int)tids[1]);
  char dir[] = "/tmp/dnt-waits-XXXXXX", trace[128], data[128], json[128], folded[128], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/run.nettrace", dir);
  snprintf(data, sizeof data, "%s/run.perf.data", dir);
  snprintf(json, sizeof json, "%s/waits.json", dir);
  snprintf(folded, sizeof folded, "%s/waits.folded", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  char *const collect[] = {(char *)dnt_bin(), "collect", "-p", pid, "--native", "--duration", "3s", "-o", trace, NULL};
  struct sched_poll poll;
  double steal = steal_ms();
  sched_poll_start(&poll, t.pid, tids);
  int rc = dnt_run_argv(&r, collect, NULL, 90000);
  int unread = sched_poll_stop(&poll);
  steal = steal_ms() - steal;
  char context[256];
  snprintf(context, sizeof context, "%s", dnt_run_context(t.pid));
  cr_assert_eq(rc, 0, "collect --native: %s%s", r.out, r.err);
  cr_assert_eq(unread, 0, "/proc/%d/task/%d/schedstat read every 5 ms while collect ran", (int)t.pid, unread);
  dnt_run_free(&r);
  dnt_target_stop(&t);

  char *const waits[] = {(char *)dnt_bin(), "waits", trace, "--format", "json", "-o", json, NULL};
  rc = dnt_run_argv(&r, waits, NULL, 60000);
  cr_assert_eq(rc, 0, "waits: %s%s", r.out, r.err);
  dnt_run_free(&r);
  char *out = slurp(json);
  cr_assert(out, "%s written", json);

  struct perf_seen ps;
  perf_seen(data, tids[0], setter, &ps);
  double span = (double)(ps.last_ns - ps.first_ns) / 1e6, range = (double)(ps.last_out - ps.first_out) / 1e6;
  struct kernel_time kw = kernel_time(&poll, 0, ps.first_out, ps.last_out),
                     kb = kernel_time(&poll, 1, ps.first_ns, ps.last_ns);
  free(poll.rows);
  unsigned long wakes = wakes_between(&ps, ps.first_out, ps.last_out);
  free(ps.wakes);
  char seen[768];
  snprintf(seen, sizeof seen,
           "perf recorded %.0f ms; waiter slept first and last %.0f ms apart, woken %lu times by setter in between, "
           "and ran %.1f ms, runnable %.1f ms (+-%.1f); blocking-work ran %.1f ms, runnable %.1f ms (+-%.1f); "
           "%.0f ms stolen by the hypervisor; %s",
           span, range, wakes, kw.run_ms, kw.wait_ms, kw.err_ms, kb.run_ms, kb.wait_ms, kb.err_ms, steal, context);

  /* perf's recording holds every sample of the trace (collect starts perf first, stops it last):
   * the trace's own timestamps (CLOCK_MONOTONIC, as perf's) */
  static struct nt_scan scan;
  memset(&scan, 0, sizeof scan);
  cr_assert_eq(nt_scan_file(trace, &scan), 0, "%s read by nt-scan", trace);
  uint64_t ep_first = UINT64_MAX, ep_last = 0;
  for (int i = 0; i < scan.ncounts; i++)
    if (strcmp(scan.counts[i].provider, SAMPLER) == 0 && scan.counts[i].count) {
      if (scan.counts[i].first_ts < ep_first) ep_first = scan.counts[i].first_ts;
      if (scan.counts[i].last_ts > ep_last) ep_last = scan.counts[i].last_ts;
    }
  cr_assert(ep_last && scan.qpc_frequency == 1000000000ull, "SampleProfiler samples stamped in ns: %llu Hz",
            (unsigned long long)scan.qpc_frequency);
  cr_expect(ep_first >= ps.first_ns && ep_last <= ps.last_ns,
            "the trace's samples (%.3f..%.3f s) inside perf's recording (%.3f..%.3f s); %s", (double)ep_first / 1e9,
            (double)ep_last / 1e9, (double)ps.first_ns / 1e9, (double)ps.last_ns / 1e9, seen);

  /* waiter: between its first and last sleep perf saw, it was blocked all the time it did not
   * run or wait for a CPU (the kernel's account), each wait ended by setter's wake-up: as many
   * waits woken by setter as perf recorded wake-ups of it by setter in between (a wake-up that
   * came before the waiter was switched out ends no wait: a few less; the wait begun by the last
   * sleep may have ended too: one more), and nearly all of it in Sample.Handoff.SignalWaiter */
  struct sums w = sum_rows(out, "waiter");
  /* timing: perf's own timestamps and the kernel's account of the same stretch; no clock */
  double w_lo = range - kw.run_ms - kw.wait_ms - kw.err_ms - 1, w_hi = span + 1;
  cr_expect(w.ms >= w_lo && w.ms <= w_hi, "waiter blocked %.1f ms, expected %.1f..%.1f; %s", w.ms, w_lo, w_hi, seen);
  unsigned long slack = 2 + wakes / 50;
  cr_expect(w.by_setter <= wakes + 1 && w.by_setter + slack >= wakes,
            "%lu waits of waiter woken by setter (%lu waits in all), %lu wake-ups; %s", w.by_setter, w.count, wakes,
            seen);
  cr_expect_geq(w.by_setter_in_signal, 0.95 * w.ms,
                "%.1f of waiter's %.1f blocked ms woken by setter in Sample.Handoff.SignalWaiter; %s",
                w.by_setter_in_signal, w.ms, seen);
  /* blocking-work: Thread.Sleep(50) after each Task.Delay(100): at most one sleep in 150 ms of
   * the recording; each one wait its timer ended (a wake-up by an interrupt taken for a thread of
   * the process would cut it short; one that a thread ended is the runtime's, not a sleep), from
   * the switch-out to perf's next sign of the thread: its 50 ms, the timer's lateness (its slack,
   * the hypervisor's steal), then the time the woken thread waited for a CPU and ran before perf
   * saw it, which the kernel counts */
  struct sums b = sum_rows(out, "blocking-work");
  double per_sleep = b.sleeps ? b.sleep_ms / (double)b.sleeps : 0;
  double b_hi = 50.0 * (double)b.sleeps + 2.0 * (double)b.sleeps + steal + kb.run_ms + kb.wait_ms + kb.err_ms;
  cr_expect(b.sleeps >= 1 && (double)b.sleeps <= span / 150 + 2,
            "blocking-work: %lu sleeps in %.0f ms (one a 150 ms at most); %s", b.sleeps, span, seen);
  /* timing: a sleep of 50 ms that the timer ended cannot end sooner; perf's own timestamps */
  cr_expect_geq(per_sleep, 49.9, "blocking-work's %lu sleeps last %.2f ms each (Thread.Sleep(50)); %s", b.sleeps,
                per_sleep, seen);
  cr_expect_leq(b.sleep_ms, b_hi, "blocking-work slept %.1f ms in %lu sleeps, at most %.1f; %s", b.sleep_ms, b.sleeps,
                b_hi, seen);
  cr_log_info("perf span %.0f ms; waiter: %lu waits, %.1f ms blocked, %.1f%% woken by setter in SignalWaiter; "
              "blocking-work: %lu sleeps, %.0f ms",
              span, w.count, w.ms, w.ms > 0 ? 100 * w.by_setter_in_signal / w.ms : 0, b.sleeps, b.sleep_ms);
  fprintf(stderr, "# waiter %.1f ms blocked (%.1f..%.1f), %lu waits woken by setter of %lu wake-ups; blocking-work %lu "
                  "sleeps, %.1f ms (%.2f each, at most %.1f in all); %s\n",
          w.ms, w_lo, w_hi, w.by_setter, wakes, b.sleeps, b.sleep_ms, per_sleep, b_hi, seen);
  free(out);

  /* the profile: for waiter, the waker's frames above the waiter's */
  char *const fold[] = {(char *)dnt_bin(), "waits", trace, "--thread", "waiter", "--format", "folded", "-o", folded, NULL};
  rc = dnt_run_argv(&r, fold, NULL, 60000);
  cr_assert_eq(rc, 0, "waits --format folded: %s%s", r.out, r.err);
  dnt_run_free(&r);
  out = slurp(folded);
  cr_assert(out, "%s written", folded);
  const char *l = strstr(out, "[woken_by_setter]");
  cr_assert(l, "a line woken by setter:\n%.2000s", out);
  while (l > out && l[-1] != '\n') l--;
  const char *eol = strchr(l, '\n');
  char *one = strndup(l, eol ? (size_t)(eol - l) : strlen(l));
  const char *wait = strstr(one, "Sample.Handoff.WaitLoop"), *sep = strstr(one, "[woken_by_setter]");
  const char *sig = strstr(one, "Sample.Handoff.SignalWaiter");
  cr_expect(wait && sep && sig && wait < sep && sep < sig, "waiter's WaitLoop, then the separator, then setter's "
                                                           "SignalWaiter:\n%s", one);
  free(one);
  free(out);
  /* the text table's columns stay in place whatever the names (issue 28 item 25): "woken by"
   * begins at the header's column on every row, after two spaces */
  char *const table[] = {(char *)dnt_bin(), "waits", trace, NULL};
  cr_assert_eq(dnt_run_argv(&r, table, NULL, 60000), 0, "%s", r.err);
  const char *hdr = strstr(r.out, "woken by");
  cr_assert(hdr, "%s", r.out);
  const char *hl = hdr;
  while (hl > r.out && hl[-1] != '\n') hl--;
  size_t col = 0;
  for (const char *p = hl; p < hdr; p++) col += ((unsigned char)*p & 0xC0) != 0x80;
  int rows = 0;
  for (const char *line = strchr(hdr, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
    const char *p = line + 1;
    size_t c = 0;
    char before[2] = {0, 0};
    for (; *p && *p != '\n' && c < col; p++)
      if (((unsigned char)*p & 0xC0) != 0x80) before[0] = before[1], before[1] = *p, c++;
    cr_expect(c == col && before[0] == ' ' && before[1] == ' ' && *p != ' ', "row %d shifted: %.200s", rows, line + 1);
    rows++;
  }
  cr_expect_gt(rows, 0);
  dnt_run_free(&r);
  /* a thread it has not: the threads it has, by id and name (issue 28 item 15) */
  char *const none[] = {(char *)dnt_bin(), "waits", trace, "--thread", "nosuch", NULL};
  cr_assert_eq(dnt_run_argv(&r, none, NULL, 60000), 1, "%s", r.err);
  cr_expect(strstr(r.err, "no waits of thread 'nosuch'") && strstr(r.err, "; its threads:\n"), "%s", r.err);
  char listed[64];
  snprintf(listed, sizeof listed, "  %d  waiter\n", (int)tids[0]);
  cr_expect(strstr(r.err, listed) && strstr(r.err, "  blocking-work\n"), "want '%s' in %s", listed, r.err);
  dnt_run_free(&r);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(waits_cli, bad_input) {
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "waits", NULL), 2, "no trace: usage");
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "waits", "x.nettrace", "--min-ms", "-1", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "waits", "/nonexistent/x.nettrace", NULL), 1);
  cr_expect(strchr(r.err, '\n') == strrchr(r.err, '\n'), "one line: %s", r.err);
  dnt_run_free(&r);
  /* a trace without perf's part beside it: not a --native recording */
  char dir[] = "/tmp/dnt-waits-cli-XXXXXX", trace[128], data[128];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/plain.nettrace", dir);
  snprintf(data, sizeof data, "%s/plain.perf.data", dir);
  FILE *fp = fopen(trace, "w");
  cr_assert(fp);
  fputs("Nettrace", fp);
  fclose(fp);
  cr_expect_eq(dnt_run_dntrace(&r, "waits", trace, NULL), 1);
  cr_expect(strstr(r.err, "collect --native") && strchr(r.err, '\n') == strrchr(r.err, '\n'),
            "one line that says how to record: %s", r.err);
  dnt_run_free(&r);
  /* perf's file beside it is not perf's */
  fp = fopen(data, "w");
  cr_assert(fp);
  fputs("not perf data\n", fp);
  fclose(fp);
  cr_expect_eq(dnt_run_dntrace(&r, "waits", trace, NULL), 1);
  cr_expect(strstr(r.err, "perf script failed") && strchr(r.err, '\n') == strrchr(r.err, '\n'), "one line: %s", r.err);
  /* with perf's own reason, not only its exit code (issue 29 item 8) */
  cr_expect(strstr(r.err, "(exit 255): incompatible file format"), "perf's words: %s", r.err);
  dnt_run_free(&r);
  /* a perf that crashes (a stand-in on PATH: a real one cannot be made to): its signal, named */
  char bin[160], fake[200], path_env[4300];
  snprintf(bin, sizeof bin, "%s/bin", dir);
  snprintf(fake, sizeof fake, "%s/perf", bin);
  cr_assert_eq(mkdir(bin, 0700), 0);
  fp = fopen(fake, "w");
  cr_assert(fp);
  fputs("#!/bin/sh\nkill -SEGV $$\n", fp);
  fclose(fp);
  cr_assert_eq(chmod(fake, 0700), 0);
  snprintf(path_env, sizeof path_env, "PATH=%s:%s", bin, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  const char *const env[] = {path_env, NULL};
  char *const argv[] = {(char *)dnt_bin(), "waits", trace, NULL};
  cr_expect_eq(dnt_run_argv(&r, argv, env, DNT_HANG_MS), 1, "%s", r.err);
  cr_expect(strstr(r.err, "(killed by signal 11, Segmentation fault)"), "the signal named: %s", r.err);
  dnt_run_free(&r);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}
