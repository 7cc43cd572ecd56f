/* dntrace locks and analyze/'s contention analysis:
 *   - the rules on event sequences made here, whose waits are known by construction (the
 *     runtime's DurationNs, or the timestamps; unpaired Starts and Stops; the owner);
 *   - the corpus traces with contention events against TraceEvent's own decoding of them
 *     (tests/bench-traceevent --mode exclocks): the same waits, the same DurationNs sum;
 *   - `dntrace locks -p` on the sample's two threads taking turns at one lock: the lock found with
 *     its owner among them, the waiting stack naming Sample.ContendWork.HoldLock, the waits
 *     plausible (no more than the time elapsed per waiting thread; DurationNs and the timestamps
 *     agree), and a contention flame graph weighted by them;
 *   - a trace without contention says so in one line. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <unistd.h>

#include "../lib/analysis-feed.h"
#include "../lib/run.h"
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
  cr_expect_eq(dnt_run_dntrace(&r, "locks", trace, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.err, "no lock contention in this trace") && !strchr(strchr(r.err, '\n') + 1, '\n'), "%s",
            r.err);
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

Test(locks_live, the_samples_lock_with_its_waiting_stack, .timeout = 120) {
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
  struct dnt_run r;
  dnt_run_dntrace(&r, "locks", "-p", pid, "--duration", "2s", "--format", "json", "-o", out, NULL);
  cr_expect_eq(r.status, 0, "dntrace locks -p: %s", r.err);
  dnt_run_free(&r);
  dnt_run_dntrace(&r, "locks", "-p", pid, "--duration", "1s", "--format", "folded", "-o", folded, NULL);
  cr_expect_eq(r.status, 0, "dntrace locks -p --format folded: %s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  cr_assert(a && b, "the sample's threads contend-a and contend-b");
  char py[4096];
  snprintf(py, sizeof py,
           "import json, sys\n"
           "d = json.load(open(sys.argv[1]))\n"
           "s = d['summary']\n"
           "# the sample's lock: the most waited for, owned by one of its two threads\n"
           "l = d['locks'][0]\n"
           "assert l['lockId'] != 0 and l['objectId'] != 0, l\n"
           "assert l['ownerThread'] in (%lu, %lu), (l['ownerThread'], %lu, %lu)\n"
           "assert l['waits'] >= 10, l\n"
           "# each wait is one thread's: no more than the time recorded, per waiting thread\n"
           "assert 0 < s['waitMSec'] <= s['traceMSec'] * s['threads'] * 1.01, s\n"
           "# the runtime's DurationNs and the events' timestamps agree within 3%%\n"
           "assert s['withDuration'] == s['waits'], s\n"
           "assert abs(s['waitMSec'] - s['timestampWaitMSec']) <= 0.03 * s['waitMSec'], s\n"
           "f = l['stacks'][0]['frames']\n"
           "assert 'Sample!Sample.ContendWork.HoldLock' in f, f\n"
           "assert f.index('Sample!Sample.ContendWork.HoldLock') + 1 == f.index('Sample!Sample.ContendWork.Run'), f\n"
           "assert sum(x['waitMSec'] for x in l['stacks']) <= l['waitMSec'] * (1 + 1e-9), l\n"
           "# the flame graph's stacks: weighted by the time waited (microseconds), under the lock's frame\n"
           "us = 0\n"
           "for line in open(sys.argv[2]):\n"
           "    stack, w = line.rsplit(' ', 1)\n"
           "    if 'Sample.ContendWork.HoldLock' in stack:\n"
           "        assert stack.split(';')[-1].startswith('Contention_on_lock_') or "
           "stack.split(';')[-1].startswith('Contention on lock '), stack\n"
           "        us += int(w)\n"
           "assert 1000 < us <= 2 * 1.2e6, us\n",
           a, b, a, b);
  expect_python(py, out, folded, NULL);
  unlink(out);
  unlink(folded);
  rmdir(tmp);
}
