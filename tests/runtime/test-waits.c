/* `dntrace waits` (perf/waits.c): made-up recordings, as perf script prints them, whose waits and
 * wakers are known by construction; then a real `collect --native` of the sample target with
 * --handoff, where thread setter wakes thread waiter every 10 ms from Sample.Handoff.SignalWaiter
 * and blocking-work sleeps 50 ms of every 150 (Thread.Sleep(50) after Task.Delay(100)).
 *
 * The real test runs alone (tests/Makemodule.am orders it after every other test): the waits it
 * measures are only the target's own when nothing else competes for the two cores. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dnt-perf.h"
#include "dnt-profile.h"
#include "../lib/perf-text.h"
#include "../lib/run.h"
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

/* The span perf recorded, in ms: its first and last records, read from perf itself. */
static double perf_span_ms(const char *data) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "perf script -i '%s' --ns -F time 2>/dev/null | sed -n '1p;$p'", data);
  FILE *p = popen(cmd, "r");
  double first = 0, last = 0;
  cr_assert(p);
  cr_expect_eq(fscanf(p, " %lf: %lf:", &first, &last), 2);
  pclose(p);
  return (last - first) * 1000;
}

struct sums {
  double ms, by_setter_in_signal, sleep_ms;
  unsigned long count, sleeps;
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
      s.ms += ms;
      s.count += (unsigned long)field_num(row, "count");
      const char *ws = strstr(row, "\"waker_stack\":");
      if (strstr(row, "\"waker\":\"setter\"") && ws && strstr(ws, "Sample!Sample.Handoff.SignalWaiter"))
        s.by_setter_in_signal += ms;
      if (strstr(row, "\"kind\":\"sleep\"")) {
        s.sleep_ms += ms;
        s.sleeps += (unsigned long)field_num(row, "count");
      }
    }
    free(row);
  }
  return s;
}

Test(waits_runtime, handoff_and_sleep_of_the_sample, .timeout = 240) {
  DNT_REQUIRE_PERF();
  dnt_target t;
  const char *const args[] = {"--handoff", NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000, .args = args};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char dir[] = "/tmp/dnt-waits-XXXXXX", trace[128], data[128], json[128], folded[128], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/run.nettrace", dir);
  snprintf(data, sizeof data, "%s/run.perf.data", dir);
  snprintf(json, sizeof json, "%s/waits.json", dir);
  snprintf(folded, sizeof folded, "%s/waits.folded", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  char *const collect[] = {(char *)dnt_bin(), "collect", "-p", pid, "--native", "--duration", "3s", "-o", trace, NULL};
  int rc = dnt_run_argv(&r, collect, NULL, 90000);
  cr_assert_eq(rc, 0, "collect --native: %s%s", r.out, r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);

  char *const waits[] = {(char *)dnt_bin(), "waits", trace, "--format", "json", "-o", json, NULL};
  rc = dnt_run_argv(&r, waits, NULL, 60000);
  cr_assert_eq(rc, 0, "waits: %s%s", r.out, r.err);
  dnt_run_free(&r);
  char *out = slurp(json);
  cr_assert(out, "%s written", json);
  double span = perf_span_ms(data);
  cr_assert_gt(span, 2000, "perf recorded %.0f ms of the 3 s", span);

  /* waiter: blocked nearly all the time (it only reads a byte between waits), every ~10 ms */
  struct sums w = sum_rows(out, "waiter");
  cr_expect_gt(w.ms, 0.8 * span, "waiter blocked %.0f ms of %.0f", w.ms, span);
  cr_expect(w.count > span / 10 / 3 && w.count < span / 10 * 1.2, "%lu waits of waiter in %.0f ms (one per ~10 ms)",
            w.count, span);
  cr_expect_geq(w.by_setter_in_signal, 0.95 * w.ms,
                "%.1f of waiter's %.1f blocked ms woken by setter in Sample.Handoff.SignalWaiter", w.by_setter_in_signal,
                w.ms);
  /* blocking-work: Thread.Sleep(50) after each Task.Delay(100): about a third of its time asleep,
   * each sleep one wait its timer ended (a wake-up by an interrupt taken for a thread of the
   * process would cut the time; the runtime's own waits inside Thread.Sleep, ended by the
   * sampler's resume, counted as sleep would make it ~3% longer and the sleeps shorter) */
  struct sums b = sum_rows(out, "blocking-work");
  cr_expect(b.sleep_ms > 0.2 * span && b.sleep_ms < 0.45 * span, "blocking-work slept %.0f ms of %.0f", b.sleep_ms,
            span);
  double per_sleep = b.sleeps ? b.sleep_ms / (double)b.sleeps : 0;
  cr_expect(per_sleep >= 45 && per_sleep < 80, "blocking-work's %lu sleeps last %.1f ms each (Thread.Sleep(50))",
            b.sleeps, per_sleep);
  cr_log_info("perf span %.0f ms; waiter: %lu waits, %.1f ms blocked, %.1f%% woken by setter in SignalWaiter; "
              "blocking-work: %lu sleeps, %.0f ms",
              span, w.count, w.ms, w.ms > 0 ? 100 * w.by_setter_in_signal / w.ms : 0, b.sleeps, b.sleep_ms);
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
  dnt_run_free(&r);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}
