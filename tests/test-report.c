/* dntrace report on a trace of the real sample target: CountPrimes on top of cpu-work's
 * exclusive time, the blocking-work thread's time under WaitLoop in a wait, and the totals equal
 * the samples in the file (counted by the independent reader). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/nt-scan.h"
#include "lib/run.h"
#include "lib/target-cr.h"
#include "lib/target.h"

static unsigned long thread_named(pid_t pid, const char *name) {
  unsigned long tid = dnt_target_thread_named(pid, name);
  cr_assert(tid, "the target has a thread named %s", name);
  return tid;
}

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

Test(report, thread_time_of_the_sample_target, .timeout = 120) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  unsigned long cpu = thread_named(t.pid, "cpu-work"), blocking = thread_named(t.pid, "blocking-work");
  char dir[] = "/tmp/dnt-report-XXXXXX";
  cr_assert(mkdtemp(dir));
  char out[64], pid[16];
  snprintf(out, sizeof out, "%s/t.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--duration", "3s", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);

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
  cr_assert_geq(incl_pct, 90.0, "WaitLoop's inclusive share of blocking-work: %.1f%%\n%s", incl_pct, sec);
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
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  uint64_t samples = nt_scan_count(&s, "Microsoft-DotNETCore-SampleProfiler", 0, 0);
  char want[64];
  snprintf(want, sizeof want, "%llu samples on ", (unsigned long long)samples);
  cr_assert(strncmp(r.out, want, strlen(want)) == 0, "'%s' expected, got:\n%.200s", want, r.out);
  dnt_run_free(&r);
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
