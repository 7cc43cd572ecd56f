/* dntrace threadpool and analyze/'s thread-pool analysis:
 *   - the analysis on event sequences made here, whose answers are known by construction (worker
 *     counts, adjustments by reason, the starvation line, events delivered out of time order, the
 *     rows per second);
 *   - `dntrace threadpool -p` on the sample starving its pool (--pool-starve: work items blocking
 *     5 s arriving 10 a second): Starvation adjustments are reported, the threads grow, and the
 *     growth is the one the sample saw (ThreadPool.ThreadCount, as it printed it), and the queue
 *     length (System.Runtime's counter) too (its PendingWorkItemCount);
 *   - the command line: JSON that Python reads, a trace without thread-pool events said in one
 *     line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/analysis-feed.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"

/* ---- the analysis, on events made here ---- */

/* f feeding a new thread-pool analysis (f->a) */
static void feed_tp(struct feed *f) {
  struct dnt_schema *schema = schema_or_fail();
  struct dnt_tp_analysis *a = dnt_tp_analysis_new(schema);
  cr_assert(a);
  ntr_callbacks cb;
  dnt_tp_analysis_callbacks(&cb);
  feed_init(f, &cb, a, schema);
}

static void feed_free(struct feed *f) {
  dnt_tp_analysis_free(f->a);
  dnt_schema_free(f->schema);
}

/* the thread pool's events are version 0, all on thread 7 here */
static void send_tp(struct feed *f, uint32_t id, double ms) { send(f, id, 0, ms, 7); }

/* ThreadPoolWorkerThreadStart (50), Stop (51) or Wait (57) with this many active workers */
static void workers(struct feed *f, uint32_t id, double ms, uint32_t active) {
  put32(f, active), put32(f, 0), put16(f, 0);
  send_tp(f, id, ms);
}

static void adjustment(struct feed *f, double ms, uint32_t count, uint32_t reason) {
  double throughput = 12.5;
  putd(f, throughput), put32(f, count), put32(f, reason), put16(f, 0);
  send_tp(f, 55, ms);
}

Test(threadpool_rules, starvation_is_counted_from_the_goal_before_it) {
  struct feed f;
  feed_tp(&f);
  workers(&f, 50, 100, 2);
  adjustment(&f, 200, 2, DNT_TP_WARMUP);
  adjustment(&f, 1500, 3, DNT_TP_STARVATION);
  workers(&f, 50, 1501, 3);
  adjustment(&f, 2500, 4, DNT_TP_STARVATION);
  workers(&f, 50, 2501, 4);
  adjustment(&f, 3500, 5, DNT_TP_STARVATION);
  workers(&f, 50, 3501, 5);
  adjustment(&f, 3700, 6, DNT_TP_COOPERATIVE_BLOCKING);
  workers(&f, 57, 3800, 6);
  workers(&f, 51, 3900, 5);
  dnt_tp_analysis_finish(f.a);
  const dnt_tp_summary *s = dnt_tp_get_summary(f.a);
  cr_expect_eq(s->adjustments, 5);
  cr_expect_eq(s->starvation, 3);
  cr_expect_eq(s->starvation_from, 2, "the Warmup goal before the first Starvation: %u", s->starvation_from);
  cr_expect_eq(s->starvation_to, 5);
  cr_expect_float_eq(s->starvation_first_ms, 1500, 1e-9);
  cr_expect_float_eq(s->starvation_last_ms, 3500, 1e-9);
  cr_expect_eq(s->blocking, 1);
  cr_expect_eq(s->by_reason[DNT_TP_WARMUP], 1);
  cr_expect_eq(s->workers_first, 2);
  cr_expect_eq(s->workers_last, 5);
  cr_expect_eq(s->workers_min, 2);
  cr_expect_eq(s->workers_max, 6);
  cr_expect_eq(s->worker_starts, 4);
  cr_expect_eq(s->worker_stops, 1);
  cr_expect_eq(s->worker_waits, 1);
  cr_expect_eq(s->goal_max, 6);
  /* seconds 0..3: the workers at each second's end, the goal, the adjustments within it */
  cr_assert_eq(s->n_seconds, 4);
  static const uint32_t end_workers[] = {2, 3, 4, 5}, goal[] = {2, 3, 4, 6}, most[] = {2, 3, 4, 6},
                        adj[] = {1, 1, 1, 2};
  for (int i = 0; i < 4; i++) {
    cr_expect_eq(s->seconds[i].workers, end_workers[i], "second %d: %u workers", i, s->seconds[i].workers);
    cr_expect_eq(s->seconds[i].workers_max, most[i], "second %d: most %u", i, s->seconds[i].workers_max);
    cr_expect_eq(s->seconds[i].goal, goal[i], "second %d: goal %u", i, s->seconds[i].goal);
    cr_expect_eq(s->seconds[i].adjustments, adj[i], "second %d", i);
  }
  char *text = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&text, &len);
  dnt_tp_write_text(fp, f.a, 20);
  fclose(fp);
  cr_expect(strstr(text, "thread pool starvation: 3 adjustments for Starvation, threads grew from 2 to 5 over 2.0 s"),
            "%s", text);
  cr_expect(strstr(text, "blocked threads: 1 adjustment for CooperativeBlocking"), "%s", text);
  free(text);
  feed_free(&f);
}

/* Events of one block come thread by thread: held until the sequence point, then taken in time
 * order, so the last count is the latest, not the last delivered. */
Test(threadpool_rules, events_are_taken_in_time_order) {
  struct feed f;
  feed_tp(&f);
  workers(&f, 50, 300, 9);
  workers(&f, 50, 100, 3);
  adjustment(&f, 250, 7, DNT_TP_CLIMBING_MOVE);
  adjustment(&f, 50, 4, DNT_TP_STARVATION);
  cr_assert_eq(f.cb.on_sequence_point(f.a, NULL), 0);
  dnt_tp_analysis_finish(f.a);
  const dnt_tp_summary *s = dnt_tp_get_summary(f.a);
  cr_expect_eq(s->workers_first, 3);
  cr_expect_eq(s->workers_last, 9);
  cr_expect_eq(s->goal_first, 4);
  cr_expect_eq(s->goal_last, 7);
  size_t n;
  const dnt_tp_adjustment *a = dnt_tp_adjustments(f.a, &n);
  cr_assert_eq(n, 2);
  cr_expect_eq(a[0].reason, DNT_TP_STARVATION);
  cr_expect_float_eq(a[1].throughput, 12.5, 1e-9);
  feed_free(&f);
}

/* ---- the sample starving its pool ---- */

/* The largest of the "pool N queue M" lines the sample printed: N and M. */
struct pool {
  unsigned most, queue;
};

static void on_pool(void *ud, const char *line) {
  struct pool *p = ud;
  unsigned c, q;
  if (sscanf(line, "pool %u queue %u", &c, &q) == 2) {
    if (c > p->most) p->most = c;
    if (q > p->queue) p->queue = q;
  }
}

/* What the sample printed so far, on top of p. */
static unsigned read_pool(int fd, char *carry, size_t cap, unsigned most, unsigned *queue) {
  struct pool p = {most, *queue};
  dnt_target_read_lines(fd, carry, cap, on_pool, &p);
  *queue = p.queue;
  return p.most;
}

Test(threadpool_live, starvation_of_the_sample_is_reported, .timeout = 120) {
  DNT_REQUIRE_TARGET();
  const char *const args[] = {"--pool-starve", "--no-cpu", "--no-blocking", "--no-alloc", "--no-exceptions",
                              "--no-counters", NULL};
  dnt_target t;
  char pid[32], carry[8192] = "";
  dnt_start_sample(&t, args, pid, sizeof pid);
  unsigned queue_before = 0, queue = 0;
  unsigned before = read_pool(t.stdout_fd, carry, sizeof carry, 0, &queue_before);
  struct dnt_run r;
  dnt_run_dntrace(&r, "threadpool", "-p", pid, "--duration", "4s", "--format", "json", NULL);
  usleep(300 * 1000);
  unsigned most = read_pool(t.stdout_fd, carry, sizeof carry, before, &queue);
  dnt_target_stop(&t);
  cr_assert_eq(r.status, 0, "dntrace threadpool -p: %s", r.err);
  const char *st = strstr(r.out, "\"starvation\":{");
  cr_assert(st, "no starvation reported:\n%.2000s", r.out);
  unsigned adjustments, from, to;
  cr_assert_eq(sscanf(st, "\"starvation\":{\"adjustments\":%u,\"threadsFrom\":%u,\"threadsTo\":%u", &adjustments, &from,
                      &to),
               3, "%.300s", st);
  /* the gate thread adds about one thread a second while queued work makes no progress */
  cr_expect_geq(adjustments, 2, "%u Starvation adjustments in 4 s", adjustments);
  cr_expect_gt(to, from, "threads from %u to %u", from, to);
  /* the growth the trace shows is the pool the sample saw: at most what it counted by the end,
   * and more than it had before the recording began */
  cr_expect_leq(to, most, "goal %u, the sample's ThreadPool.ThreadCount at most %u", to, most);
  cr_expect_gt(to, before, "goal %u, the sample had %u threads before the recording", to, before);
  /* the queue grows by the work items nobody takes: System.Runtime's queue-length counter saw it,
   * never longer than the sample's own ThreadPool.PendingWorkItemCount */
  const char *ql = strstr(r.out, "\"queueLength\":{\"max\":");
  double qmax;
  cr_assert(ql && sscanf(ql, "\"queueLength\":{\"max\":%lf", &qmax) == 1, "no queue length:\n%.2000s", r.out);
  cr_expect(qmax >= 10 && qmax <= queue, "queue at most %.1f by the counter, %u by the sample", qmax, queue);
  dnt_run_free(&r);
}

/* ---- the command line ---- */

Test(threadpool_cli, a_trace_without_pool_events_says_so_in_one_line) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  snprintf(trace, sizeof trace, "%s/zetslief__nettrace/perf.nettrace", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "threadpool", trace, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.err, "no thread-pool event in this trace"), "%s", r.err);
  cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "one line: %s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "threadpool", NULL), 2);
  dnt_run_free(&r);
}

/* The JSON report read by Python: the adjustments by reason add up, the starvation summary is its
 * adjustments' (from the .NET Core 3.0 trace, whose pool starved). */
Test(threadpool_cli, json_report_is_json_and_its_summary_its_rows) {
  const char *py =
      "import json, sys\n"
      "d = json.load(open(sys.argv[1]))\n"
      "s, adj = d['summary'], d['adjustments']\n"
      "assert s['adjustments'] == len(adj) == sum(s['byReason'].values()), s\n"
      "starve = [a for a in adj if a['reason'] == 'Starvation']\n"
      "assert starve and s['starvation']['adjustments'] == len(starve), s\n"
      "assert s['starvation']['threadsTo'] == max(a['newWorkerThreadCount'] for a in starve), s\n"
      "assert s['starvation']['firstMSec'] == starve[0]['atMSec'], s\n"
      "assert s['goalMax'] == max(a['newWorkerThreadCount'] for a in adj), s\n"
      "assert sum(x['adjustments'] for x in d['seconds']) == len(adj), d['seconds']\n"
      "assert sum(x['enqueued'] for x in d['seconds']) == s['enqueued'], s\n";
  expect_json_report("threadpool", "microsoft__perfview/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace", NULL, py);
}
