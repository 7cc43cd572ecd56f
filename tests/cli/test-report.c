/* dntrace report on a trace of the real sample target: CountPrimes on top of cpu-work's
 * exclusive time, the blocking-work thread's time under WaitLoop in a wait, and the totals equal
 * the samples in the file (counted by the independent reader); with dotnet-trace's grammar
 * (topN) or --fold-native, native time charged to the managed callers, sample for sample. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/background-cr.h"
#include "../lib/record-cr.h"
#include "../lib/nt-scan.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"
#include "../lib/v6-trace.h"

/* The table that follows "Thread <tid> (" in the report, up to the next blank line. */
static char *thread_section(const char *out, unsigned long tid) {
  char head[64];
  snprintf(head, sizeof head, "\nThread %lu (", tid);
  const char *s = strstr(out, head);
  cr_assert(s, "a section for thread %lu in:\n%s", tid, out);
  const char *e = strstr(s + 1, "\n\n");
  return strndup(s, e ? (size_t)(e - s) : strlen(s));
}

/* The function on the first row of a table (after the header line). */
static char *first_function(const char *section) {
  const char *hdr = strstr(section, "Function\n");
  cr_assert(hdr);
  const char *row = hdr + strlen("Function\n");
  const char *end = strchr(row, '\n');
  char *line = strndup(row, end ? (size_t)(end - row) : strlen(row));
  char *last = strrchr(line, ' ');
  char *name = strdup(last ? last + 1 : line);
  free(line);
  return name;
}


/* ---- native time folded into its managed callers ---- */

#define MAX_FUNCS 4096
struct funcs {
  char *name[MAX_FUNCS];
  unsigned long long excl[MAX_FUNCS], incl[MAX_FUNCS];
  int n;
};

static int func_index(struct funcs *f, const char *name) {
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->name[i], name) == 0) return i;
  cr_assert_lt(f->n, MAX_FUNCS);
  f->name[f->n] = strdup(name);
  f->excl[f->n] = f->incl[f->n] = 0;
  return f->n++;
}

static void funcs_free(struct funcs *f) {
  for (int i = 0; i < f->n; i++) free(f->name[i]);
  f->n = 0;
}

/* A name as the folded writer spells it (';' and ' ' would break its format). */
static void folded_spelling(char *name) {
  for (char *c = name; *c; c++) *c = *c == ';' ? ':' : *c == ' ' ? '_' : *c;
}

/* The overall table of `report -v`: every row's sample counts by name (folded spelling). */
static void report_rows(const char *out, struct funcs *f) {
  const char *hdr = strstr(out, "Function\n");
  cr_assert(hdr, "%s", out);
  for (const char *line = hdr + strlen("Function\n"); *line && *line != '\n'; line = strchr(line, '\n') + 1) {
    unsigned long long ex, in;
    char name[2048];
    cr_assert(strlen(line) > 42 && sscanf(line + 42, "%llu %llu %2047[^\n]", &ex, &in, name) == 3, "row: %.200s", line);
    folded_spelling(name);
    int i = func_index(f, name);
    f->excl[i] = ex;
    f->incl[i] = in;
    if (!strchr(line, '\n')) break;
  }
}

/* Exclusive samples from the folded stacks, with dotnet-trace's folding done here: a stack whose
 * leaf is UNMANAGED_CODE_TIME charges the frame before it (a stack of that frame alone keeps it).
 * *native_only: the samples of such lone stacks. */
static void folded_exclusive(const char *path, struct funcs *f, unsigned long long *native_only,
                             unsigned long long *total) {
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "%s", path);
  static char line[1 << 16];
  *native_only = *total = 0;
  while (fgets(line, sizeof line, fp)) {
    char *sp = strrchr(line, ' ');
    cr_assert(sp, "%s", line);
    *sp = '\0';
    unsigned long long n = strtoull(sp + 1, NULL, 10);
    *total += n;
    char *frames = strchr(line, ';');
    cr_assert(frames, "a stack: %s", line);
    char *leaf = strrchr(frames, ';') + 1;
    if (strcmp(leaf, "UNMANAGED_CODE_TIME") == 0 && leaf - 1 > frames) {
      leaf[-1] = '\0';
      leaf = strrchr(frames, ';') + 1;
    } else if (strcmp(leaf, "UNMANAGED_CODE_TIME") == 0) {
      *native_only += n;
    }
    f->excl[func_index(f, leaf)] += n;
  }
  fclose(fp);
}

/* `report FILE topN` (dotnet-trace's grammar) and --fold-native: the UNMANAGED_CODE_TIME row is
 * gone, each function's exclusive samples are what the folded stacks give it once its native
 * leaves are charged to it, inclusive samples do not change, and every sample is still counted. */
static void check_fold_native(const char *trace, const char *dir, uint64_t samples) {
  char folded[128];
  snprintf(folded, sizeof folded, "%s/t.folded", dir);
  struct dnt_run r;
  /* in samples: the -v columns below count samples too */
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "folded", "--weight", "samples", "-o", folded, NULL),
               0, "%s", r.err);
  dnt_run_free(&r);
  static struct funcs want, plain, fold;
  unsigned long long native_only, total;
  folded_exclusive(folded, &want, &native_only, &total);
  cr_assert_eq(total, samples, "the folded stacks hold every sample");

  /* ranked by inclusive time, the tables list every function on any stack (by exclusive time,
   * only those with exclusive time) */
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, "--no-fold-native", "--inclusive", "-n", "100000", "-v", NULL), 0,
               "%s", r.err);
  report_rows(r.out, &plain);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, "topN", "--inclusive", "-n", "100000", "-v", NULL), 0, "%s",
               r.err);
  report_rows(r.out, &fold);
  char *topn = strdup(r.out);
  dnt_run_free(&r);
  /* dotnet-trace's table is the default (issue 28 item 5), and --fold-native still says it */
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, "-v", "--inclusive", "-n", "100000", NULL), 0, "%s", r.err);
  cr_assert_str_eq(r.out, topn, "the default is topN's table");
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, "--fold-native", "-v", "--inclusive", "-n", "100000", NULL), 0,
               "%s", r.err);
  cr_assert_str_eq(r.out, topn, "topN is --fold-native");
  free(topn);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, "topN", "--no-fold-native", NULL), 2, "one or the other");
  dnt_run_free(&r);

  unsigned long long sum_plain = 0, sum_fold = 0, native = 0;
  for (int i = 0; i < plain.n; i++) {
    sum_plain += plain.excl[i];
    if (strcmp(plain.name[i], "UNMANAGED_CODE_TIME") == 0) native = plain.excl[i];
  }
  cr_assert_gt(native, 0, "the sample target waits in native code");
  int native_row = 0;
  for (int i = 0; i < fold.n; i++) {
    sum_fold += fold.excl[i];
    if (strcmp(fold.name[i], "UNMANAGED_CODE_TIME") == 0) {
      native_row = 1;
      cr_assert_eq(fold.excl[i], native_only, "only stacks without a managed frame keep the native row");
    }
    int w = func_index(&want, fold.name[i]), p = func_index(&plain, fold.name[i]);
    cr_assert_eq(fold.excl[i], want.excl[w], "%s: %llu exclusive samples folded, the stacks give %llu",
                 fold.name[i], fold.excl[i], want.excl[w]);
    if (strcmp(fold.name[i], "UNMANAGED_CODE_TIME") != 0)
      cr_assert_eq(fold.incl[i], plain.incl[p], "%s: inclusive time unchanged", fold.name[i]);
  }
  cr_assert_eq(native_row, native_only > 0, "the UNMANAGED_CODE_TIME row is gone");
  cr_assert_eq(sum_plain, samples, "every sample in the exclusive column");
  cr_assert_eq(sum_fold, samples, "every sample still in the exclusive column once folded");
  /* the waits now show: what was native went to managed callers, sample for sample */
  unsigned long long moved = 0;
  for (int i = 0; i < fold.n; i++) {
    int p = func_index(&plain, fold.name[i]);
    if (strcmp(fold.name[i], "UNMANAGED_CODE_TIME") != 0) moved += fold.excl[i] - plain.excl[p];
  }
  cr_assert_eq(moved + native_only, native, "%llu native samples moved to their callers, %llu had none, of %llu",
               moved, native_only, native);
  funcs_free(&want);
  funcs_free(&plain);
  funcs_free(&fold);
  unlink(folded);
}

/* The inner ceilings: the sample's start and its threads' first CPU (DNT_HANG_MS each, only a
 * hang), at most 126 s of recording, then dntrace on the trace (DNT_HANG_MS each; a failed step
 * ends the test). */
Test(report, thread_time_of_the_sample_target, .timeout = 480) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  /* cpu-work in CountPrimes (0.1 s of CPU), blocking-work started; then a trace with 20 samples of
   * blocking-work at least, so that WaitLoop's share is one of many samples, and CountPrimes on
   * top of cpu-work's, whatever share of the CPU the machine gives the sample */
  unsigned long cpu = (unsigned long)dnt_wait_thread_ran(t.pid, "cpu-work", 0.1),
                blocking = (unsigned long)dnt_wait_thread_ran(t.pid, "blocking-work", 0);
  char dir[] = "/tmp/dnt-report-XXXXXX";
  cr_assert(mkdtemp(dir));
  char out[64];
  snprintf(out, sizeof out, "%s/t.nettrace", dir);
  static struct nt_scan s;
  dnt_collect_until(t.pid, out, NULL, "Microsoft-DotNETCore-SampleProfiler", 0, (pid_t)blocking, 20, &s);
  dnt_target_stop(&t);
  uint64_t cpu_samples = nt_scan_count(&s, "Microsoft-DotNETCore-SampleProfiler", 0, cpu);
  cr_assert_gt(cpu_samples, 0, "every sample of the runtime takes each thread: cpu-work's too");
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "report", out, "--threads", "-n", "10", NULL), 0, "%s", r.err);
  char *sec = thread_section(r.out, cpu);
  char *top = first_function(sec);
  cr_assert_str_eq(top, "Sample!Sample.CpuWork.CountPrimes", "cpu-work's top exclusive:\n%s", sec);
  free(top);
  free(sec);

  /* blocking-work: WaitLoop is on (nearly) every stack, and the time under it is a wait */
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", out, "--threads", "--inclusive", "-n", "40", NULL), 0, "%s", r.err);
  sec = thread_section(r.out, blocking);
  const char *wl = strstr(sec, "Sample!Sample.BlockingWork.WaitLoop");
  cr_assert(wl, "WaitLoop in blocking-work's inclusive table:\n%s", sec);
  const char *line = wl;
  while (line > sec && line[-1] != '\n') line--;
  double incl_pct = 0;
  const char *pct = strchr(strchr(line, '%') + 1, '%'); /* second percentage: inclusive */
  const char *num = pct;
  while (num > line && (num[-1] == '.' || (num[-1] >= '0' && num[-1] <= '9'))) num--;
  incl_pct = atof(num);
  cr_assert_geq(incl_pct, 90.0,
                "WaitLoop's inclusive share of blocking-work: %.1f%%, at least 90%% (%llu samples of it; %s)\n%s",
                incl_pct, (unsigned long long)nt_scan_count(&s, "Microsoft-DotNETCore-SampleProfiler", 0, blocking),
                dnt_run_context(0), sec);
  free(sec);
  dnt_run_free(&r);

  cr_assert_eq(dnt_run_dntrace(&r, "report", out, "--threads", "-n", "3", NULL), 0, "%s", r.err);
  sec = thread_section(r.out, blocking);
  top = first_function(sec);
  cr_assert(strcmp(top, "UNMANAGED_CODE_TIME") == 0 || strstr(top, "Sleep") || strstr(top, "Wait"),
            "blocking-work's top exclusive frame is a wait: %s\n%s", top, sec);
  free(top);
  free(sec);

  /* totals: every sample of the file, no more, no less */
  uint64_t samples = nt_scan_count(&s, "Microsoft-DotNETCore-SampleProfiler", 0, 0);
  char want[64];
  snprintf(want, sizeof want, "%llu samples on ", (unsigned long long)samples);
  cr_assert(strncmp(r.out, want, strlen(want)) == 0, "'%s' expected, got:\n%.200s", want, r.out);
  dnt_run_free(&r);
  check_fold_native(out, dir, samples);
  unlink(out);
  rmdir(dir);
}

Test(report, bad_input) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "report", "/no/such/file.nettrace", NULL), 1);
  cr_assert(strstr(r.err, "cannot open '/no/such/file.nettrace'"), "%s", r.err);
  cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", "/etc/passwd", NULL), 1);
  cr_assert(strstr(r.err, "not a nettrace file"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", NULL), 2);
  dnt_run_free(&r);
}

/* A trace cut in half still reports, with a warning; the corpus has such files too. */
Test(report, truncated_corpus_trace) {
  const char *c = getenv("DNT_CORPUS"), *src = getenv("DNT_SRCDIR");
  char path[4096];
  if (c && *c)
    snprintf(path, sizeof path, "%s/dotnet__diagnostics/trace.nettrace", c);
  else
    snprintf(path, sizeof path, "%s/../shared/corpus/dotnet__diagnostics/trace.nettrace", src ? src : ".");
  if (access(path, R_OK) != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("no corpus at %s (CI=true)", path);
    cr_skip_test("no corpus at %s", path);
  }
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "report", path, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.err, "truncated"), "%s", r.err);
  cr_assert(strstr(r.out, "samples on"), "%s", r.out);
  dnt_run_free(&r);
}

/* Times, not counts: each sample weighs the time until its thread's next, so the total is the sum
 * of the threads' spans from their first sample to their last, and each thread's header has its
 * own span; --weight samples gives counts. Expected values from the independent reader
 * (tests/lib/nt-scan.c: timestamps and counts per thread) on corpus traces of one thread (managed
 * samples only) and of several (Managed and External samples, 13 threads). */
static void report_times(const char *name) {
  const char *c = getenv("DNT_CORPUS"), *src = getenv("DNT_SRCDIR");
  char path[4096];
  if (c && *c) snprintf(path, sizeof path, "%s/%s", c, name);
  else snprintf(path, sizeof path, "%s/../shared/corpus/%s", src ? src : ".", name);
  if (access(path, R_OK) != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("no corpus at %s (CI=true)", path);
    cr_skip_test("no corpus at %s", path);
  }
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(path, &s), 0);
  const char *sampler = "Microsoft-DotNETCore-SampleProfiler";
  /* the samples: the sampler's, and the allocation events TraceEvent counts as samples too */
  static struct nt_scan_thread th[NT_SCAN_MAX];
  size_t nth = nt_scan_sample_threads(&s, th, NT_SCAN_MAX);
  uint64_t samples = 0;
  double span_ms = 0;
  for (size_t i = 0; i < nth; i++)
    samples += th[i].count, span_ms += (double)(th[i].last_ts - th[i].first_ts) * 1000.0 / (double)s.qpc_frequency;
  cr_assert_gt(samples, 0);
  cr_assert_gt(span_ms, 0);

  struct dnt_run r;
  /* --no-async: each thread's own samples, whose span its time is (stitching moves a task's
   * samples to the thread that made it, and adds the time awaits waited: held to TraceEvent in
   * tests/cli/test-oracle-stacks.c) */
  cr_assert_eq(dnt_run_dntrace(&r, "report", path, "--threads", "-n", "3", "--no-async", NULL), 0, "%s", r.err);
  unsigned long long n = 0;
  size_t threads = 0;
  double ms = 0;
  cr_assert_eq(sscanf(r.out, "%llu samples on %zu threads, %lf ms of thread time", &n, &threads, &ms), 3, "%.300s",
               r.out);
  cr_expect_eq(n, samples);
  cr_expect(fabs(ms - span_ms) <= 0.5, "%.0f ms of thread time, the threads' spans add up to %.3f ms", ms, span_ms);
  /* the nominal interval and the measured one, which the samples' pace gives: on the busiest
   * thread, its span over its samples less one */
  double busiest_span = 0;
  uint64_t busiest = 0;
  for (int i = 0; i < s.ncounts; i++)
    if (strcmp(s.counts[i].provider, sampler) == 0 && s.counts[i].event_id == 0 && s.counts[i].count > busiest) {
      busiest = s.counts[i].count;
      busiest_span = (double)(s.counts[i].last_ts - s.counts[i].first_ts) * 1000.0 / (double)s.qpc_frequency;
    }
  char want[160];
  snprintf(want, sizeof want, "Sampling interval: %.2f ms (the trace's), %.2f ms measured", s.sampling_ns / 1e6,
           busiest_span / (double)(busiest - 1));
  cr_expect(strstr(r.out, want), "'%s' expected in:\n%.400s", want, r.out);
  /* each thread's header: its samples and its span */
  for (size_t i = 0; i < nth; i++) {
    char head[64];
    snprintf(head, sizeof head, "\nThread %llu (", (unsigned long long)th[i].thread);
    const char *h = strstr(r.out, head);
    cr_assert(h, "a table for thread %llu", (unsigned long long)th[i].thread);
    unsigned long long tn = 0;
    double tms = 0;
    cr_assert_eq(sscanf(h + strlen(head), "%llu samples, %lf ms", &tn, &tms), 2, "%.80s", h);
    double want_ms = (double)(th[i].last_ts - th[i].first_ts) * 1000.0 / (double)s.qpc_frequency;
    cr_expect_eq(tn, th[i].count, "thread %llu", (unsigned long long)th[i].thread);
    cr_expect(fabs(tms - want_ms) <= 0.5, "thread %llu: %.0f ms, its span %.3f ms", (unsigned long long)th[i].thread,
              tms, want_ms);
  }
  dnt_run_free(&r);

  /* --weight samples: the overall table in counts, whose top row is at most every sample */
  cr_assert_eq(dnt_run_dntrace(&r, "report", path, "--weight", "samples", NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, "by exclusive samples"), "%.400s", r.out);
  const char *hdr = strstr(r.out, "Function\n");
  cr_assert(hdr, "%.400s", r.out);
  unsigned long long top = 0;
  double pct = 0;
  cr_assert_eq(sscanf(hdr + 9, " %llu %lf%%", &top, &pct), 2, "%.200s", hdr);
  cr_expect(top > 0 && top <= samples);
  cr_expect(fabs(pct - 100.0 * (double)top / (double)samples) < 0.06, "%llu of %llu samples: %.1f%%", top,
            (unsigned long long)samples, pct);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", path, "--weight", "cycles", NULL), 2);
  cr_expect_str_eq(r.err, "dntrace: error: --weight: 'cycles' is not time or samples\n");
  dnt_run_free(&r);
}

Test(report, times_one_thread) { report_times("microsoft__perfview/only_managed_samples.nettrace"); }
Test(report, times_many_threads) { report_times("microsoft__perfview/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace"); }

/* A `collect --native` recording's thread names, in the `.threads` file beside the trace (issue
 * 27: "collect --native already writes a thread-name file the other commands ignore"): report
 * --threads and convert's speedscope name the threads with them, over the trace's own names; a
 * thread the file does not name keeps the trace's. The trace of lib/v6-trace.h names 4001
 * cpu-work and 4002 blocking-work (the threads with samples). */
Test(report, thread_names_beside_the_trace) {
  char dir[] = "/tmp/dnt-rnames-XXXXXX", trace[64], names[64], ss[64];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  snprintf(names, sizeof names, "%s/t.threads", dir);
  snprintf(ss, sizeof ss, "%s/t.speedscope.json", dir);
  cr_assert_eq(dnt_write_v6_trace(trace), 0);
  FILE *fp = fopen(names, "w");
  cr_assert(fp);
  fputs("4001\tworker-one\n4003\tthird one\nnot a line\n", fp);
  fclose(fp);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, "--threads", NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, "\nThread 4001 (worker-one, "), "%s", r.out);
  cr_assert(strstr(r.out, "\nThread 4002 (blocking-work, "), "%s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "speedscope", "-o", ss, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  char *json = slurp(ss);
  cr_assert(strstr(json, "\"name\":\"worker-one (4001)\"") && strstr(json, "\"name\":\"blocking-work (4002)\""),
            "%.2000s", json);
  cr_assert_null(strstr(json, "\"name\":\"cpu-work"), "%.2000s", json);
  free(json);
  unlink(ss);
  unlink(names);
  unlink(trace);
  rmdir(dir);
}
