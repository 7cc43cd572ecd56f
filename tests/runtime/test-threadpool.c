/* dntrace threadpool and analyze/'s thread-pool analysis:
 *   - the analysis on event sequences made here, whose answers are known by construction (worker
 *     counts, adjustments by reason, the starvation line, events delivered out of time order, the
 *     rows per second);
 *   - `dntrace threadpool -p` on the sample starving its pool (--pool-starve: work items blocking
 *     5 s arriving 10 a second), recorded until the sample's pool grew by two threads: Starvation
 *     adjustments are reported, the threads grow, and the growth is the one the sample saw
 *     (ThreadPool.ThreadCount, as it printed it), and the queue length (System.Runtime's counter)
 *     too (its PendingWorkItemCount);
 *   - the command line: JSON that Python reads, a trace without thread-pool events said in one
 *     line. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>

#include "../lib/analysis-feed.h"
#include "../lib/ntr-writer.h"
#include "../lib/run.h"
#include "../lib/background-cr.h"
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
  cr_expect(strstr(text, "thread pool starvation: 3 adjustments for Starvation, the thread goal grew from 2 to 5 over 2.0 s"),
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

/* The "pool N queue M" lines the sample printed: the largest N and M; the lines and the latest N
 * since the mark, and the N of the first of them. */
struct pool {
  unsigned most, queue, lines;
  int marked;
  unsigned after, first, last;
};

static void on_pool(void *ud, const char *line) {
  struct pool *p = ud;
  unsigned c, q;
  if (sscanf(line, "pool %u queue %u", &c, &q) == 2) {
    p->lines++;
    if (c > p->most) p->most = c;
    if (q > p->queue) p->queue = q;
    if (p->marked && p->after++ == 0) p->first = c;
    p->last = c;
  }
}

/* Since the mark (dntrace's session running), the pool grew by two threads, over twelve lines or
 * more (three seconds of the sample's own clock: System.Runtime's counters, each second, have come
 * too). The threads are added by the gate thread, the pool's only way to grow while every worker
 * sleeps: Starvation adjustments. */
static int grew_by_two(void *ud) {
  struct pool *p = ud;
  return p->after >= 12 && p->last >= p->first + 2;
}

/* One line since the mark: printed after it. */
static int a_line_after(void *ud) { return ((struct pool *)ud)->after >= 1; }

static int a_line(void *ud) { return ((struct pool *)ud)->lines >= 1; }

Test(threadpool_live, starvation_of_the_sample_is_reported, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  const char *const args[] = {"--pool-starve", "--no-cpu", "--no-blocking", "--no-alloc", "--no-exceptions",
                              "--no-counters", NULL};
  dnt_target t;
  char pid[32];
  dnt_start_sample(&t, args, pid, sizeof pid);
  struct lines sl = {.fd = t.stdout_fd};
  struct pool p = {0};
  cr_assert(lines_until(&sl, on_pool, &p, a_line), "the sample printed no 'pool' line");
  unsigned before = p.most; /* the threads before the recording */
  struct bg b;
  const char *const dargs[] = {"threadpool", "-p", pid, "--format", "json", NULL};
  bg_start(&b, dargs);
  int up = bg_wait_text(&b, "Recording the thread pool");
  char *err = slurp(b.err);
  cr_assert(up, "dntrace threadpool -p did not start its session (status %d): %s", b.status, err);
  free(err);
  lines_read(&sl, on_pool, &p);
  p.marked = 1;
  int grew = lines_until(&sl, on_pool, &p, grew_by_two);
  unsigned first = p.first, last = p.last, lines = p.after;
  int status = bg_finish(&b, SIGINT);
  char *out = slurp(b.out);
  err = slurp(b.err);
  bg_remove(&b);
  /* what the sample printed until then, and a line printed after dntrace returned: the pool the
   * sample had once the session was over */
  lines_read(&sl, on_pool, &p);
  p.after = 0;
  int after = lines_until(&sl, on_pool, &p, a_line_after);
  unsigned most = p.most, queue = p.queue;
  const char *context = dnt_run_context(t.pid);
  dnt_target_stop(&t);
  cr_assert(grew, "while dntrace recorded, the sample's pool went from %u to %u threads in %u lines, not 2 more (%s)",
            first, last, lines, context);
  cr_assert_eq(status, 0, "dntrace threadpool -p, stopped by Ctrl+C: status %d: %s", status, err);
  cr_assert(after, "the sample printed nothing after dntrace returned");
  const char *st = strstr(out, "\"starvation\":{");
  cr_assert(st, "no starvation reported:\n%.2000s", out);
  unsigned adjustments, from, to;
  cr_assert_eq(sscanf(st, "\"starvation\":{\"adjustments\":%u,\"threadsFrom\":%u,\"threadsTo\":%u", &adjustments, &from,
                      &to),
               3, "%.300s", st);
  /* the gate thread added the threads the sample saw come while the session ran */
  cr_expect_geq(adjustments, 1, "%u Starvation adjustments; the sample's pool grew from %u to %u threads (%s)",
                adjustments, first, last, context);
  cr_expect_gt(to, from, "threads from %u to %u", from, to);
  /* the growth the trace shows is the pool the sample saw: at most what it counted once the
   * session was over, and more than it had before the recording began */
  cr_expect_leq(to, most, "goal %u, the sample's ThreadPool.ThreadCount at most %u after the session", to, most);
  cr_expect_gt(to, before, "goal %u, the sample had %u threads before the recording", to, before);
  /* the queue grows by the work items nobody takes: System.Runtime's queue-length counter saw it,
   * never longer than the sample's own ThreadPool.PendingWorkItemCount (it empties only once the
   * pool has some 50 threads: 10 items a second, 5 s each) */
  const char *ql = strstr(out, "\"queueLength\":{\"max\":");
  double qmax;
  cr_assert(ql && sscanf(ql, "\"queueLength\":{\"max\":%lf", &qmax) == 1, "no queue length:\n%.2000s", out);
  cr_log_info("threadpool -p: %u Starvation adjustments, goal %u -> %u; the sample's pool %u -> %u threads while "
              "recording (%u before, %u after); queue at most %.0f by the counter, %u by the sample; %s",
              adjustments, from, to, first, last, before, most, qmax, queue, context);
  cr_expect(qmax >= 1 && qmax <= queue, "queue at most %.1f by the counter, %u by the sample (%s)", qmax, queue,
            context);
  free(out);
  free(err);
}

/* ---- the command line ---- */

Test(threadpool_cli, a_trace_without_pool_events_says_so_in_one_line) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  snprintf(trace, sizeof trace, "%s/zetslief__nettrace/perf.nettrace", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "threadpool", trace, NULL), 1, "nothing to analyse: exit 1 in every analysis: %s",
               r.err);
  cr_expect(strstr(r.err, "no thread-pool event in this trace"), "%s", r.err);
  cr_expect_str_eq(r.out, "", "no report of nothing");
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

/* ---- the completed-items counter, spread over the seconds it counts ---- */

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* System.Runtime's once-a-second counter lands near the seconds' boundaries: each increment is
 * shared among the seconds of the interval it counted (issue 30 item 5: "21924, 0, 41277, 0"),
 * and the Enqueued/Dequeued columns the trace has no events for are left out. A written trace:
 * a worker-thread start at 100 ms, then three increments of 1000, each over the 1 s before it,
 * at 1.5, 2.5 and 3.5 s: 500, 1000, 1000 and 500 in seconds 0 to 3. */
Test(threadpool_cli, completed_items_are_spread_over_their_interval) {
  char dir[] = "/tmp/dnt-tpspread-XXXXXX", trace[64];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  ntrw w;
  ntrw_trace t = {1000, 1000000, 8, 4321, 2, 1000000, NULL, 0}; /* a microsecond clock */
  ntrw_md start = {1, "Microsoft-Windows-DotNETRuntime", 50, "ThreadPoolWorkerThreadStart", 0x10000, 0, 4, -1,
                   NULL, 0, 0, 1};
  static const ntrw_field payload[] = {{"Name", 18, NULL, NULL, 0, 0}, {"Increment", 14, NULL, NULL, 0, 0},
                                       {"IntervalSec", 13, NULL, NULL, 0, 0}};
  static const ntrw_field object[] = {{"Payload", 1, NULL, payload, 3, 0}};
  ntrw_md counter = {2, "System.Runtime", 1, "EventCounters", 0, 0, 4, -1, object, 1, 0, 0};
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &start);
  ntrw_metadata(&w, &counter);
  ntrw_block_end(&w);
  ntrw_ev_begin(&w, 1);
  uint8_t pool[10] = {0};
  put_le(pool, 2, 4); /* ActiveWorkerThreadCount 2, RetiredWorkerThreadCount 0, ClrInstanceID 0 */
  ntrw_ev ev = {.metadata_id = 1, .seq = 1, .thread = 7, .capture_thread = 7, .ts = 1000 + 100000, .payload = pool,
                .payload_size = sizeof pool};
  ntrw_event(&w, &ev);
  static const char name[] = "threadpool-completed-items-count";
  uint8_t c[2 * sizeof name + 12];
  for (size_t i = 0; i < sizeof name; i++) c[2 * i] = (uint8_t)name[i], c[2 * i + 1] = 0;
  double inc = 1000;
  float interval = 1.0f;
  memcpy(c + 2 * sizeof name, &inc, 8);
  memcpy(c + 2 * sizeof name + 8, &interval, 4);
  for (int k = 0; k < 3; k++) {
    ntrw_ev e = {.metadata_id = 2, .seq = (uint32_t)k + 2, .thread = 7, .capture_thread = 7,
                 .ts = 1000 + 1500000 + 1000000 * (uint64_t)k, .payload = c, .payload_size = sizeof c};
    ntrw_event(&w, &e);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  FILE *fp = fopen(trace, "wb");
  cr_assert(fp && fwrite(w.buf, 1, w.len, fp) == w.len);
  fclose(fp);
  ntrw_release(&w);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "threadpool", trace, "--format", "json", NULL), 0, "%s", r.err);
  double want[] = {500, 1000, 1000, 500};
  const char *at = r.out;
  for (int s = 0; s < 4; s++) {
    at = strstr(at, "\"completed\":");
    cr_assert(at, "second %d: %.2000s", s, r.out);
    at += strlen("\"completed\":");
    cr_expect(fabs(atof(at) - want[s]) < 0.01, "second %d: %.3f completed, %.0f wanted", s, atof(at), want[s]);
  }
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "threadpool", trace, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, " Completed ") && !strstr(r.out, "Enqueued"), "%s", r.out);
  cr_expect(strstr(r.out, "(no ThreadPoolEnqueue/Dequeue events in the trace"), "%s", r.out);
  dnt_run_free(&r);
  unlink(trace);
  rmdir(dir);
}
