/* dntrace locks and analyze/'s contention analysis:
 *   - the rules on event sequences made here, whose waits are known by construction (the
 *     runtime's DurationNs, or the timestamps; unpaired Starts and Stops; the owner);
 *   - the corpus traces with contention events against TraceEvent's own decoding of them
 *     (tests/bench-traceevent --mode exclocks): the same waits, the same DurationNs sum; and their
 *     flame graph's stacks weigh the waits in microseconds;
 *   - `dntrace locks -p` on the sample's two threads taking turns at one lock, recorded until the
 *     runtime counted (Monitor.LockContentionCount, as the sample printed it) forty contended
 *     waits: the waits found, the lock with its owner among the two, the waiting stack naming
 *     Sample.ContendWork.HoldLock, the waits plausible (no more than the time elapsed per waiting
 *     thread; DurationNs and the timestamps agree, but for the time the two threads spent on a CPU
 *     or waiting for one, during which the runtime reads its clock and writes the events), and a
 *     contention flame graph weighted by them;
 *   - a trace without contention says so in one line. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/analysis-feed.h"
#include "../lib/run.h"
#include "../lib/background-cr.h"
#include "../lib/target-cr.h"

#define NET10_LOADED "tbbuck__countercow/runtime-net10-loaded.nettrace"
#define NET3_WIN "microsoft__perfview/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace"
#define NO_CONTENTION "zetslief__nettrace/perf.nettrace"

/* ---- the rules, on events made here ---- */

static void start_v2(struct feed *f, double ms, uint64_t tid, uint64_t lock, uint64_t object, uint64_t owner) {
  put8(f, 0), put16(f, 0), put64(f, lock), put64(f, object), put64(f, owner);
  send_stack(f, 81, 2, ms, tid, 2);
}
static void start_v1(struct feed *f, double ms, uint64_t tid) {
  put8(f, 0), put16(f, 0);
  send_stack(f, 81, 1, ms, tid, 2);
}
static void stop_v1(struct feed *f, double ms, uint64_t tid, double duration_ns) {
  put8(f, 0), put16(f, 0), putd(f, duration_ns);
  send(f, 91, 1, ms, tid);
}
static void stop_v0(struct feed *f, double ms, uint64_t tid) {
  put8(f, 0), put16(f, 0);
  send(f, 91, 0, ms, tid);
}

Test(locks_rules, waits_are_paired_on_their_thread) {
  struct dnt_schema *schema = schema_or_fail();
  struct dnt_locks_analysis *a = dnt_locks_analysis_new(schema);
  ntr_callbacks cb;
  dnt_locks_analysis_callbacks(&cb);
  struct feed f;
  feed_init(&f, &cb, a, schema);
  start_v2(&f, 10, 1, 0xA0, 0xB0, 2), stop_v1(&f, 15, 1, 4.5e6);  /* 4.5 ms by the runtime, 5 by the clock */
  start_v2(&f, 20, 2, 0xA0, 0xB0, 1), stop_v1(&f, 30, 2, 10e6);   /* 10 and 10 */
  start_v1(&f, 40, 3), stop_v0(&f, 47, 3);                        /* before .NET 8: 7 ms, lock not named */
  stop_v1(&f, 48, 4, 1e6);                                        /* its Start before the trace */
  start_v2(&f, 50, 1, 0xA0, 0xB0, 2), start_v2(&f, 60, 1, 0xA0, 0xB0, 2), stop_v1(&f, 61, 1, 1e6); /* 1 and 1 */
  start_v2(&f, 70, 5, 0xA0, 0xB0, 1);                             /* still waiting at the end */
  dnt_locks_analysis_finish(a, 3);
  cr_assert_eq(dnt_locks_analysis_failed(a), 0);
  size_t n;
  const dnt_lock *l = dnt_locks_list(a, &n);
  cr_assert_eq(n, 2);
  cr_expect_eq(l[0].lock_id, 0xA0, "the most waited-for lock first");
  cr_expect_eq(l[0].object_id, 0xB0);
  cr_expect_eq(l[0].waits, 3);
  cr_expect_float_eq(l[0].wait_ms, 15.5, 1e-9);
  cr_expect_float_eq(l[0].ts_wait_ms, 16.0, 1e-9);
  cr_expect_float_eq(l[0].max_wait_ms, 10.0, 1e-9);
  cr_expect_eq(l[0].owner_thread, 2, "thread 2 owned it for two of the three waits");
  cr_expect_eq(l[1].lock_id, 0);
  cr_expect_eq(l[1].waits, 1);
  cr_expect_float_eq(l[1].wait_ms, 7.0, 1e-9);
  const dnt_locks_summary *s = dnt_locks_get_summary(a);
  cr_expect_eq(s->waits, 4);
  cr_expect_float_eq(s->wait_ms, 22.5, 1e-9);
  cr_expect_eq(s->with_duration, 3);
  cr_expect_eq(s->unpaired, 3, "a Stop without Start, a Start replaced, a Start at the end");
  cr_expect_eq(s->threads, 5);
  /* the waiting stacks, weighted by the waits: one stack for all three waits on 0xA0 */
  cr_assert_eq(l[0].nstacks, 1);
  cr_expect_eq(l[0].stacks[0].count, 3);
  cr_expect_float_eq(l[0].stacks[0].weight_ms, 15.5, 1e-9);
  size_t ns;
  const dnt_analysis_stack *all = dnt_locks_stacks(a, &ns);
  cr_assert_eq(ns, 1, "the same frames under both locks are one stack of all locks");
  cr_expect_eq(all[0].count, 4);
  dnt_locks_analysis_free(a);
  dnt_schema_free(schema);
}

/* ---- the corpus, against TraceEvent ---- */

static void compare_with_traceevent(const char *dll, const char *trace) {
  struct dnt_run te, r;
  te_run(&te, dll, trace, "exclocks");
  cr_assert_eq(te.status, 0, "TraceEvent on %s: %s", trace, te.err);
  unsigned long starts, stops;
  double ms;
  const char *line = strstr(te.out, "contention\t");
  cr_assert(line && sscanf(line, "contention\t%lu\t%lu\t%lf", &starts, &stops, &ms) == 3, "%s", te.out);
  cr_assert_eq(dnt_run_dntrace(&r, "locks", trace, "--format", "json", NULL), 0, "%s", r.err);
  unsigned long waits, with_duration, unpaired;
  double wait_ms;
  const char *s = strstr(r.out, "\"summary\":");
  cr_assert(s && sscanf(s, "\"summary\":{\"waits\":%lu,\"waitMSec\":%lf", &waits, &wait_ms) == 2, "%s", r.out);
  cr_assert(sscanf(strstr(s, "\"withDuration\""), "\"withDuration\":%lu,\"unpaired\":%lu", &with_duration,
                   &unpaired) == 2);
  /* every Stop ends one wait of ours, or is one unpaired Stop; every Start likewise */
  cr_expect_eq(waits, stops, "%s: %lu waits, TraceEvent %lu Stops", trace, waits, stops);
  cr_expect_eq(starts, stops, "%s: the trace pairs every wait", trace);
  cr_expect_eq(unpaired, 0);
  cr_expect_eq(with_duration, waits);
  cr_expect(fabs(wait_ms - ms) <= 1e-6 * ms + 1e-6, "%s: %.6f ms waited, TraceEvent's DurationNs sum %.6f ms",
            trace, wait_ms, ms);
  dnt_run_free(&r);
  dnt_run_free(&te);
  /* the flame graph's stacks weigh those waits in whole microseconds (each line rounded) */
  cr_assert_eq(dnt_run_dntrace(&r, "locks", trace, "--format", "folded", NULL), 0, "%s", r.err);
  double us = 0;
  size_t lines = 0;
  for (const char *l = r.out; *l; lines++) {
    const char *nl = strchr(l, '\n'), *sp = NULL;
    for (const char *c = l; c < (nl ? nl : l + strlen(l)); c++)
      if (*c == ' ') sp = c;
    cr_assert(sp, "%.200s", l);
    us += strtod(sp + 1, NULL);
    if (!nl) break;
    l = nl + 1;
  }
  cr_expect(lines > 0 && fabs(us - 1000 * wait_ms) <= (double)lines, "%s: folded stacks weigh %.0f us in %zu lines, "
            "the waits %.6f ms", trace, us, lines, wait_ms);
  dnt_run_free(&r);
}

Test(locks_traceevent, corpus_traces_with_contention, .timeout = 120) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  const char *dll = te_oracle_or_skip("the contention analysis");
  snprintf(trace, sizeof trace, "%s/" NET3_WIN, dir);
  compare_with_traceevent(dll, trace);
  snprintf(trace, sizeof trace, "%s/" NET10_LOADED, dir);
  compare_with_traceevent(dll, trace);
}

Test(locks_cli, a_trace_without_contention_says_so_in_one_line) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  snprintf(trace, sizeof trace, "%s/" NO_CONTENTION, dir);
  struct dnt_run r;
  /* nothing to analyse: one line and exit 1, as in every analysis (issue 28 item 15) */
  cr_expect_eq(dnt_run_dntrace(&r, "locks", trace, NULL), 1, "%s", r.err);
  cr_expect(strstr(r.err, "no lock contention in this trace") && !strchr(strchr(r.err, '\n') + 1, '\n'), "%s",
            r.err);
  cr_expect_str_eq(r.out, "", "no report of nothing");
  dnt_run_free(&r);
  char tmp[] = "/tmp/dnt-locks-XXXXXX", svg[64];
  cr_assert(mkdtemp(tmp));
  snprintf(svg, sizeof svg, "%s/none.svg", tmp);
  cr_expect_eq(dnt_run_dntrace(&r, "locks", trace, "--format", "flamegraph", "-o", svg, NULL), 1);
  cr_expect(strstr(r.err, "no lock contention"), "%s", r.err);
  cr_expect_neq(access(svg, F_OK), 0, "no file written");
  dnt_run_free(&r);
  rmdir(tmp);
  cr_expect_eq(dnt_run_dntrace(&r, "locks", NULL), 2);
  cr_expect(strstr(r.err, "name a trace file, or a process"), "%s", r.err);
  dnt_run_free(&r);
}

/* ---- the sample ---- */

/* The "contention N" lines the sample printed (Monitor.LockContentionCount): since the mark, how
 * many, and the N of the second of them and of the latest. */
struct contention {
  int marked;
  unsigned after;
  unsigned long second, last;
};

static void on_contention(void *ud, const char *line) {
  struct contention *c = ud;
  unsigned long n;
  if (sscanf(line, "contention %lu", &n) != 1) return;
  c->last = n;
  if (c->marked && ++c->after == 2) c->second = n;
}

/* WAITS_RECORDED contended waits counted since the second line after the mark (whose count was
 * read after the first was printed, so after the session began): they all began while it ran, and
 * all but the last of each thread (two threads, taking turns) ended before the latest line. Forty,
 * so that some name the lock's owner: the runtime reads the owner when a waiter reports its wait,
 * and a waiter preempted until the holder left finds none (0), as a busy machine makes some. */
#define WAITS_RECORDED 40

static int enough_waits(void *ud) {
  struct contention *c = ud;
  return c->after >= 2 && c->last >= c->second + WAITS_RECORDED;
}

/* The time thread tid of pid spent on a CPU or ready to run and waiting for one, in ms (its
 * /proc schedstat), -1 when it cannot be read. */
static double cpu_or_runqueue_ms(pid_t pid, unsigned long tid) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task/%lu/schedstat", (int)pid, tid);
  FILE *fp = fopen(path, "r");
  unsigned long long cpu, queued;
  int ok = fp && fscanf(fp, "%llu %llu", &cpu, &queued) == 2;
  if (fp) fclose(fp);
  return ok ? (double)(cpu + queued) / 1e6 : -1;
}

/* `dntrace locks -p PID --format FORMAT -o out`, stopped by Ctrl+C once the sample (read through
 * sl) counted WAITS_RECORDED contended waits while it recorded; *waits: how many of them ended in it. */
static void record_contention(struct lines *sl, const char *pid, const char *format, const char *out,
                              unsigned long *waits) {
  struct bg b;
  const char *const dargs[] = {"locks", "-p", pid, "--format", format, "-o", out, NULL};
  bg_start(&b, dargs);
  int up = bg_wait_text(&b, "Recording the lock contention");
  char *err = slurp(b.err);
  cr_assert(up, "dntrace locks -p did not start its session (status %d): %s", b.status, err);
  free(err);
  struct contention c = {0};
  lines_read(sl, on_contention, &c);
  c.marked = 1;
  int counted = lines_until(sl, on_contention, &c, enough_waits);
  int status = bg_finish(&b, SIGINT);
  err = slurp(b.err);
  bg_remove(&b);
  cr_assert(counted, "the sample counted %lu contended waits while dntrace recorded, not %d (%s)",
            c.after >= 2 ? c.last - c.second : 0, WAITS_RECORDED, dnt_run_context(0));
  cr_assert_eq(status, 0, "dntrace locks -p --format %s, stopped by Ctrl+C: status %d: %s", format, status, err);
  free(err);
  *waits = c.last - c.second - 2;
}

Test(locks_live, the_samples_lock_with_its_waiting_stack, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  require_python();
  const char *const args[] = {"--contend", "--no-cpu", "--no-blocking", "--no-alloc", "--no-exceptions",
                              "--no-counters", NULL};
  dnt_target t;
  char pid[32], tmp[] = "/tmp/dnt-locks-XXXXXX", out[64], folded[64];
  cr_assert(mkdtemp(tmp));
  snprintf(out, sizeof out, "%s/l.json", tmp);
  snprintf(folded, sizeof folded, "%s/l.folded", tmp);
  dnt_start_sample(&t, args, pid, sizeof pid);
  unsigned long a = dnt_target_thread_named(t.pid, "contend-a"), b = dnt_target_thread_named(t.pid, "contend-b");
  cr_assert(a && b, "the sample's threads contend-a and contend-b");
  struct lines sl = {.fd = t.stdout_fd};
  unsigned long waits, folded_waits;
  double busy0 = cpu_or_runqueue_ms(t.pid, a) + cpu_or_runqueue_ms(t.pid, b);
  record_contention(&sl, pid, "json", out, &waits);
  double busy = cpu_or_runqueue_ms(t.pid, a) + cpu_or_runqueue_ms(t.pid, b) - busy0;
  record_contention(&sl, pid, "folded", folded, &folded_waits);
  char context[256];
  snprintf(context, sizeof context, "%s", dnt_run_context(t.pid));
  dnt_target_stop(&t);
  cr_log_info("locks -p: %lu contended waits counted by the sample while recording; contend-a and -b on a CPU or "
              "waiting for one %.1f ms; %s", waits, busy, context);
  char py[8192];
  int len = snprintf(py, sizeof py,
           "import json, sys\n"
           "d = json.load(open(sys.argv[1]))\n"
           "s = d['summary']\n"
           "ctx = '%s'\n"
           "# the waits the runtime counted while the session ran (Monitor.LockContentionCount)\n"
           "assert s['waits'] >= %lu, (s, 'the sample counted %lu', ctx)\n"
           "# the sample's lock, the one waited for in HoldLock (on a busy machine another lock of the\n"
           "# process, the console's, may be waited for longer), owned by one of its two threads\n"
           "seen = [(x['lockId'], x['ownerThread'], x['waits'], x['waitMSec']) for x in d['locks']]\n"
           "mine = [x for x in d['locks'] if any('Sample!Sample.ContendWork.HoldLock' in st['frames'] for st in x['stacks'])]\n"
           "assert mine, ('no lock waited for in HoldLock: (id, owner, waits, ms)', seen, ctx)\n"
           "l = mine[0]\n"
           "assert l['lockId'] != 0 and l['objectId'] != 0, l\n"
           "assert l['ownerThread'] in (%lu, %lu), (l['ownerThread'], %lu, %lu, seen, ctx)\n"
           "assert l['waits'] >= 1, l\n"
           "# each wait is one thread's: no more than the time recorded, per waiting thread\n"
           "assert 0 < s['waitMSec'] <= s['traceMSec'] * s['threads'] * 1.01, s\n"
           "# the runtime's DurationNs and the events' timestamps agree within 3%%, but for the time the\n"
           "# two threads spent on a CPU or waiting for one (%.1f ms): the runtime reads its clock a\n"
           "# moment before it writes each event (and its stack), a thread preempted in between\n"
           "assert s['withDuration'] == s['waits'], s\n"
           "gap, allowed = abs(s['waitMSec'] - s['timestampWaitMSec']), 0.03 * s['waitMSec'] + %.3f\n"
           "assert gap <= allowed, ('DurationNs and timestamps differ by', gap, 'ms, allowed', allowed, s, ctx)\n"
           "f = l['stacks'][0]['frames']\n"
           "assert 'Sample!Sample.ContendWork.HoldLock' in f, f\n"
           "assert f.index('Sample!Sample.ContendWork.HoldLock') + 1 == f.index('Sample!Sample.ContendWork.Run'), f\n"
           "assert sum(x['waitMSec'] for x in l['stacks']) <= l['waitMSec'] * (1 + 1e-9), l\n"
           "# the flame graph's stacks: weighted by the time waited (whole microseconds, as the corpus\n"
           "# test holds them to the waits), under the lock's frame\n"
           "us = 0\n"
           "for line in open(sys.argv[2]):\n"
           "    stack, w = line.rsplit(' ', 1)\n"
           "    if 'Sample.ContendWork.HoldLock' in stack:\n"
           "        assert stack.split(';')[-1].startswith('Contention_on_lock_') or "
           "stack.split(';')[-1].startswith('Contention on lock '), stack\n"
           "        us += int(w)\n"
           "assert us > 0, ('no wait under HoldLock; the sample counted %lu', ctx)\n",
           context, waits, waits, a, b, a, b, busy, busy, folded_waits);
  cr_assert(len > 0 && (size_t)len < sizeof py, "the check fits its buffer (%d bytes)", len);
  expect_python(py, out, folded, NULL);
  unlink(out);
  unlink(folded);
  rmdir(tmp);
}
