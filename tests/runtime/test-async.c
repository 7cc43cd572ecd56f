/* test-async.c: async code read as its author wrote it (issue 27), in every view a user has. The
 * sample's --async chain (tests/targets/sample/AsyncWork.cs: async-driver waits for Outer, which
 * awaits Middle, which awaits Inner, which awaits Task.Delay(1) and counts primes on a pool
 * thread) recorded with `collect --profile cpu-sampling,async-tasks`: by default Inner's prime
 * counting is shown under the driver, below Outer, Middle and STARTING TASK, in report, folded,
 * speedscope, Chromium, pprof and the flame graph; `--no-async` leaves it on the pool threads.
 * That the stacks and times are TraceEvent's is tests/cli/test-oracle-stacks.c's part. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/env-cr.h"
#include "../lib/nt-scan.h"
#include "../lib/record-cr.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

#define TPL "System.Threading.Tasks.TplEventSource"

static char dir[] = "/tmp/dnt-async-XXXXXX";
static char trace[128];
static unsigned long long driver;

/* The chain, recorded until it holds 200 ends of awaits (about 50 chains); each test records its
 * own (Criterion runs each in a process of its own). */
static void record(void) {
  if (trace[0]) return;
  DNT_REQUIRE_TARGET();
  dnt_target t;
  const char *const args[] = {"--async", "--no-cpu", "--no-blocking", "--no-alloc", "--no-exceptions", "--no-counters",
                              NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  driver = dnt_target_thread_named(t.pid, "async-driver");
  cr_assert(driver, "the sample's async-driver thread");
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/async.nettrace", dir);
  static struct nt_scan scan;
  const char *const extra[] = {"--profile", "cpu-sampling,async-tasks", NULL};
  dnt_collect_until(t.pid, trace, extra, TPL, 11, 0, 200, &scan);
  dnt_target_stop(&t);
}

static void cleanup(void) {
  if (!trace[0]) return;
  unlink(trace);
  rmdir(dir);
}

TestSuite(async, .fini = cleanup);

/* `dntrace report --threads --focus CountPrimes`: the tables of the threads whose samples are in
 * prime counting. Stitched, the driver has one, with STARTING TASK and Outer in it (inclusive);
 * unstitched, it has none. */
Test(async, report_files_the_work_under_the_driver, .timeout = 300) {
  record();
  char head[64];
  snprintf(head, sizeof head, "\nThread %llu (async-driver, ", driver);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, "--threads", "--focus", "CountPrimes", "--inclusive", "-n", "40",
                               NULL),
               0, "%s", r.err);
  const char *table = strstr(r.out, head);
  cr_assert(table, "the driver's table holds Inner's work:\n%s", r.out);
  const char *next = strstr(table + 1, "\nThread ");
  size_t len = next ? (size_t)(next - table) : strlen(table);
  char *mine = strndup(table, len);
  cr_expect(strstr(mine, "  STARTING TASK\n"), "%s", mine);
  cr_expect(strstr(mine, "  Sample!Sample.AsyncWork.Outer\n"), "%s", mine);
  cr_expect(strstr(mine, "  Sample!Sample.CpuWork.CountPrimes"), "%s", mine);
  free(mine);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, "--threads", "--focus", "CountPrimes", "--no-async", NULL), 0, "%s",
               r.err);
  cr_expect_null(strstr(r.out, head), "--no-async: the driver counts no primes:\n%s", r.out);
  cr_expect_null(strstr(r.out, "STARTING TASK"), "--no-async: nothing stitched:\n%s", r.out);
  cr_expect(strstr(r.out, ".NET TP Worker"), "--no-async: the pool threads count them:\n%s", r.out);
  dnt_run_free(&r);
}

/* folded: Inner's work on the driver's lines, after Outer, Middle and STARTING_TASK (spaces are
 * underscores in folded stacks); unstitched, on pool threads under the pool's dispatch. */
Test(async, folded_stacks_run_from_outer_to_the_work, .timeout = 300) {
  record();
  char mine[64];
  snprintf(mine, sizeof mine, "Thread %llu;", driver);
  for (int no_async = 0; no_async < 2; no_async++) {
    struct dnt_run r;
    if (no_async)
      cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "folded", "--no-async", "-o", "-", NULL), 0, "%s",
                   r.err);
    else
      cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "folded", "-o", "-", NULL), 0, "%s", r.err);
    size_t work = 0, stitched = 0, pooled = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
      if (!strstr(line, "Sample!Sample.AsyncWork+<Inner>d__4.MoveNext;Sample!Sample.CpuWork.CountPrimes ")) continue;
      work++;
      const char *outer = strstr(line, ";Sample!Sample.AsyncWork.Outer;"), *middle = strstr(line, ";Sample!Sample.AsyncWork.Middle;");
      const char *marker = strstr(line, ";STARTING_TASK;");
      if (strncmp(line, mine, strlen(mine)) == 0 && outer && middle && marker && outer < middle && middle < marker)
        stitched++;
      if (strncmp(line, mine, strlen(mine)) != 0 && !marker && strstr(line, "ThreadPoolWorkQueue.Dispatch;")) pooled++;
    }
    cr_log_info("%s: %zu stacks of Inner's work, %zu stitched under the driver, %zu on pool threads",
                no_async ? "--no-async" : "stitched", work, stitched, pooled);
    cr_assert_gt(work, 0);
    if (no_async) cr_expect_eq(pooled, work, "--no-async: every stack of Inner's work on a pool thread");
    else cr_expect_gt(stitched, 0, "Inner's work under the driver's Outer, Middle and STARTING TASK");
    dnt_run_free(&r);
  }
}

/* speedscope (python's json: the driver's profile has a sample running from Outer through
 * STARTING TASK to CountPrimes) and Chromium (a CountPrimes frame on the driver's timeline). */
Test(async, speedscope_and_chromium_show_it_on_the_driver, .timeout = 300) {
  record();
  require_python();
  char ss[160], ch[160], tid[32];
  snprintf(ss, sizeof ss, "%s/a.speedscope.json", dir);
  snprintf(ch, sizeof ch, "%s/a.chromium.json", dir);
  snprintf(tid, sizeof tid, "%llu", driver);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "speedscope", "-o", ss, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  expect_python("import json, sys\n"
                "d = json.load(open(sys.argv[1]))\n"
                "names = [f['name'] for f in d['shared']['frames']]\n"
                "p = [p for p in d['profiles'] if p['name'] == 'async-driver (%s)' % sys.argv[2]]\n"
                "assert len(p) == 1, [q['name'] for q in d['profiles']]\n"
                "def chain(s):\n"
                "    f = [names[i] for i in s]\n"
                "    want = ['Sample!Sample.AsyncWork.Outer', 'Sample!Sample.AsyncWork.Middle', 'STARTING TASK',\n"
                "            'Sample!Sample.CpuWork.CountPrimes']\n"
                "    k = 0\n"
                "    for n in f:\n"
                "        if k < len(want) and n == want[k]: k += 1\n"
                "    return k == len(want)\n"
                "assert any(chain(s) for s in p[0]['samples']), 'no sample from Outer to CountPrimes'\n",
                ss, tid, NULL);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "chromium", "-o", ch, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  expect_python("import json, sys\n"
                "d = json.load(open(sys.argv[1]))\n"
                "ev = d['traceEvents'] if isinstance(d, dict) else d\n"
                "tid = int(sys.argv[2])\n"
                "mine = [e for e in ev if e.get('ph') == 'X' and e.get('tid') == tid]\n"
                "assert any(e['name'].endswith('CountPrimes') for e in mine), 'CountPrimes on the driver'\n"
                "assert any(e['name'] == 'STARTING TASK' for e in mine), 'STARTING TASK on the driver'\n",
                ch, tid, NULL);
  unlink(ss);
  unlink(ch);
}

/* pprof, read by go tool pprof: a sample labelled with the driver's name runs through STARTING
 * TASK to CountPrimes; the flame graph draws STARTING TASK and AWAIT_TIME. */
Test(async, pprof_and_the_flame_graph_show_it, .timeout = 300) {
  record();
  require_go();
  char pb[160], svg[160], cmd[512];
  snprintf(pb, sizeof pb, "%s/a.pb.gz", dir);
  snprintf(svg, sizeof svg, "%s/a.svg", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "pprof", "-o", pb, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  snprintf(cmd, sizeof cmd, "go tool pprof -traces -tagfocus=thread_name=async-driver -focus=CountPrimes %s", pb);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "%s", r.err);
  const char *marker = strstr(r.out, "STARTING TASK"), *work = strstr(r.out, "CountPrimes");
  cr_expect(marker && work && strstr(r.out, "thread_name:") && strstr(r.out, "async-driver"),
            "pprof: the driver's samples run through STARTING TASK to CountPrimes:\n%.2000s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "flamegraph", "-o", svg, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  FILE *fp = fopen(svg, "r");
  cr_assert(fp);
  static char text[1 << 24];
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  cr_expect(strstr(text, "STARTING TASK"), "the flame graph draws STARTING TASK");
  cr_expect(strstr(text, "AWAIT_TIME"), "the flame graph draws AWAIT_TIME");
  unlink(pb);
  unlink(svg);
}

/* The analyses that keep their events' stacks stitch them too: Inner's throw (InnerCheck, once a
 * chain) sits under the driver's Outer, Middle and STARTING TASK in `dntrace exceptions`'s folded
 * stacks, and on the pool's threads with --no-async; every throw is in both, once. */
Test(async, exceptions_thrown_in_tasks_sit_under_their_callers, .timeout = 300) {
  record();
  char mine[64];
  snprintf(mine, sizeof mine, "Thread %llu;", driver);
  unsigned long long totals[2] = {0, 0};
  for (int no_async = 0; no_async < 2; no_async++) {
    struct dnt_run r;
    if (no_async)
      cr_assert_eq(dnt_run_dntrace(&r, "exceptions", trace, "--format", "folded", "--no-async", "-o", "-", NULL), 0,
                   "%s", r.err);
    else
      cr_assert_eq(dnt_run_dntrace(&r, "exceptions", trace, "--format", "folded", "-o", "-", NULL), 0, "%s", r.err);
    unsigned long long stitched = 0, pooled = 0, other = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
      if (!strstr(line, ";Sample!Sample.AsyncWork.InnerCheck;")) continue;
      unsigned long long n = strtoull(strrchr(line, ' ') + 1, NULL, 10);
      const char *outer = strstr(line, ";Sample!Sample.AsyncWork.Outer;"), *marker = strstr(line, ";STARTING_TASK;");
      if (strncmp(line, mine, strlen(mine)) == 0 && outer && marker && outer < marker) stitched += n;
      else if (strncmp(line, mine, strlen(mine)) != 0 && !marker && strstr(line, "ThreadPoolWorkQueue.Dispatch;")) pooled += n;
      else other += n;
    }
    totals[no_async] = stitched + pooled + other;
    cr_log_info("%s: Inner's throws: %llu under the driver, %llu on pool threads, %llu elsewhere",
                no_async ? "--no-async" : "stitched", stitched, pooled, other);
    cr_expect_eq(other, 0, "each throw either under the driver's chain or on a pool thread");
    if (no_async) cr_expect_eq(stitched, 0, "--no-async: nothing stitched");
    else cr_expect_gt(stitched, 0, "Inner's throws under the driver's Outer and STARTING TASK");
    dnt_run_free(&r);
  }
  cr_expect_gt(totals[0], 0);
  cr_expect_eq(totals[0], totals[1], "every throw once, stitched or not");
}
