/* Criterion glue for what a test needs of the machine beyond the sample target (target-cr.h): CI's
 * rule, the public corpus, python3 and the TraceEvent oracle; each is found here once, skipped
 * without, and under CI=true its absence is a failure, so a CI run never passes by skipping.
 * Static helpers, one copy per test program, like target-cr.h. */
#ifndef DNT_TEST_ENV_CR_H
#define DNT_TEST_ENV_CR_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

static inline int in_ci(void) {
  const char *ci = getenv("CI");
  return ci && strcmp(ci, "true") == 0;
}

/* The public corpus's folder ($DNT_CORPUS, else ../shared/corpus beside the source tree) into
 * buf, returned; skips the test when it is not there (no INDEX.md in it). */
static inline const char *corpus_dir(char *buf, size_t cap) {
  const char *d = getenv("DNT_CORPUS"), *src = getenv("DNT_SRCDIR");
  if (d && *d)
    snprintf(buf, cap, "%s", d);
  else
    snprintf(buf, cap, "%s/../shared/corpus", src ? src : "..");
  char index[4200];
  snprintf(index, sizeof index, "%s/INDEX.md", buf);
  if (access(index, R_OK) != 0) {
    if (in_ci()) cr_assert_fail("no corpus at %s (CI=true: a missing corpus is a failure)", buf);
    cr_skip_test("no corpus at %s (set DNT_CORPUS)", buf);
  }
  return buf;
}

/* `dntrace events CORPUS/FILE ARGS...` (NULL-terminated, 12 at most) into r (freed by the
 * caller), 2 minutes at most. Returns its status. */
static inline int corpus_events(struct dnt_run *r, const char *corpus, const char *file, ...) {
  char path[8192];
  char *argv[16];
  int n = 0;
  snprintf(path, sizeof path, "%s/%s", corpus, file);
  argv[n++] = (char *)dnt_bin();
  argv[n++] = "events";
  argv[n++] = path;
  va_list ap;
  va_start(ap, file);
  const char *a;
  while ((a = va_arg(ap, const char *)) && n < 15) argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;
  return dnt_run_argv(r, argv, NULL, 120000);
}

/* Whether a file name is a trace's: .nettrace, .netperf, or either zipped. */
static inline int corpus_is_trace(const char *name) {
  size_t n = strlen(name);
  return (n > 9 && strcmp(name + n - 9, ".nettrace") == 0) || (n > 13 && strcmp(name + n - 13, ".nettrace.zip") == 0) ||
         (n > 8 && strcmp(name + n - 8, ".netperf") == 0) || (n > 12 && strcmp(name + n - 12, ".netperf.zip") == 0);
}

/* Calls fn with the path of every file of the corpus's folders (one level down: OWNER__REPO/FILE)
 * whose name want accepts. */
static inline void corpus_each(const char *dir, int (*want)(const char *name), void (*fn)(void *ud, const char *path),
                               void *ud) {
  DIR *top = opendir(dir);
  cr_assert(top, "cannot open %s", dir);
  struct dirent *d, *e;
  while ((d = readdir(top))) {
    if (d->d_name[0] == '.') continue;
    char sub[8192];
    snprintf(sub, sizeof sub, "%s/%s", dir, d->d_name);
    DIR *in = opendir(sub);
    if (!in) continue;
    while ((e = readdir(in))) {
      if (!want(e->d_name)) continue;
      char path[16384];
      snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
      fn(ud, path);
    }
    closedir(in);
  }
  closedir(top);
}

/* Whether python3 runs here (the JSON checks need it): skips the test without it. */
static inline void require_python(void) {
  if (system("python3 -c 1 >/dev/null 2>&1") != 0) {
    if (in_ci()) cr_assert_fail("python3 is not installed (CI=true)");
    cr_skip_test("needs python3 for the JSON check");
  }
}

/* Whether go runs here (go tool pprof, the reference reader of pprof files): skips the test
 * without it. */
static inline void require_go(void) {
  if (system("command -v go >/dev/null 2>&1") == 0) return;
  if (in_ci()) cr_assert_fail("no 'go' on PATH (CI=true: ./bootstrap.sh installs golang-go)");
  cr_skip_test("needs go tool pprof (apt-get install golang-go)");
}

/* Runs `python3 -c py ARGS...` (NULL-terminated) and expects it to exit 0: py's asserts are the
 * test's, their message in the failure. */
static inline void expect_python(const char *py, ...) {
  char *argv[16] = {"/usr/bin/env", "python3", "-c", (char *)py};
  int n = 4;
  va_list ap;
  va_start(ap, py);
  const char *a;
  while ((a = va_arg(ap, const char *)) && n < 15) argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;
  struct dnt_run r;
  dnt_run_argv(&r, argv, NULL, 60000);
  cr_expect_eq(r.status, 0, "%s", r.err);
  dnt_run_free(&r);
}

/* The JSON report of `dntrace CMD CORPUS/FILE --format json [--top TOP]` (TOP may be NULL),
 * written with -o into a new folder, held to py: python3 code that reads it (sys.argv[1]). */
static inline void expect_json_report(const char *cmd, const char *file, const char *top, const char *py) {
  char dir[4096], trace[8192], tmp[] = "/tmp/dnt-json-XXXXXX", out[64];
  corpus_dir(dir, sizeof dir);
  require_python();
  snprintf(trace, sizeof trace, "%s/%s", dir, file);
  cr_assert(mkdtemp(tmp));
  snprintf(out, sizeof out, "%s/report.json", tmp);
  struct dnt_run r;
  if (top) dnt_run_dntrace(&r, cmd, trace, "--format", "json", "--top", top, "-o", out, NULL);
  else dnt_run_dntrace(&r, cmd, trace, "--format", "json", "-o", out, NULL);
  cr_assert_eq(r.status, 0, "dntrace %s %s: %s", cmd, trace, r.err);
  dnt_run_free(&r);
  expect_python(py, out, NULL);
  unlink(out);
  rmdir(tmp);
}

/* The oracle, tests/bench-traceevent built by `make check` into the build tree (check_DATA in
 * tests/Makemodule.am; dotnet restores TraceEvent from NuGet): its DLL's path, or NULL when it or
 * dotnet is not there (the caller skips); under CI=true that is a failure (what: the analysis it
 * is the oracle of, for the message). */
static inline const char *te_oracle(const char *what) {
  static char dll[4096];
  const char *b = getenv("DNT_BUILDDIR");
  snprintf(dll, sizeof dll, "%s/tests/oracle-te/out/BenchTraceEvent.dll", b ? b : ".");
  if (access(dll, R_OK) == 0 && system("command -v dotnet >/dev/null 2>&1") == 0) return dll;
  if (in_ci()) cr_assert_fail("no TraceEvent oracle at %s (CI=true: it is %s's oracle)", dll, what);
  return NULL;
}

/* te_oracle, skipping the test without it. */
static inline const char *te_oracle_or_skip(const char *what) {
  const char *dll = te_oracle(what);
  if (!dll) cr_skip_test("dotnet is not installed: no TraceEvent to compare with");
  return dll;
}

/* `dotnet ORACLE TRACE --mode MODE` into te (freed by the caller), 2 minutes at most. Returns its
 * status. */
static inline int te_run(struct dnt_run *te, const char *dll, const char *trace, const char *mode) {
  char *const argv[] = {"/usr/bin/env", "dotnet", (char *)dll, (char *)trace, "--mode", (char *)mode, NULL};
  return dnt_run_argv(te, argv, NULL, 120000);
}

/* How many events TraceEvent reads in trace (its "parse" mode): the count, -1 when it failed (the
 * test fails then, with TraceEvent's words). */
static inline long te_event_count(const char *dll, const char *trace) {
  struct dnt_run r;
  cr_assert_eq(te_run(&r, dll, trace, "parse"), 0, "TraceEvent: %s", r.err);
  long n = -1;
  const char *parsed = strstr(r.out, "parse: ");
  if (!parsed || sscanf(parsed, "parse: %ld events", &n) != 1) n = -1;
  dnt_run_free(&r);
  return n;
}

/* What `dntrace info` says of trace: its events, and (may be NULL) its span and when its first
 * event came after the trace began, in seconds of the trace's own clock. The test fails when info
 * does, or says an event was lost. */
static inline long trace_info_events(const char *trace, double *span, double *first_at) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", trace, NULL), 0, "%s", r.err);
  cr_expect_eq(strstr(r.err, "misses"), NULL, "no event counted lost: %s", r.err);
  long events = -1;
  double s = -1, at = -1;
  const char *ev = strstr(r.out, "Events              : "), *d = strstr(r.out, "Duration            : ");
  cr_assert(ev && sscanf(ev, "Events              : %ld", &events) == 1, "%s", r.out);
  cr_assert(d && sscanf(d, "Duration            : %lf s (first to last event; the first at +%lf s)", &s, &at) == 2,
            "%s", r.out);
  if (span) *span = s;
  if (first_at) *first_at = at;
  dnt_run_free(&r);
  return events;
}

/* One of Microsoft's diagnostics tools from NuGet (dotnet-gcdump, dotnet-dump), the oracles
 * ./bootstrap.sh installs into build-tools/dotnet-tools (or $DNT_DOTNET_TOOLS): its path; without
 * it the test fails under CI=true, else skips. */
static inline const char *diag_tool(const char *name) {
  static char path[4200];
  const char *dir = getenv("DNT_DOTNET_TOOLS"), *src = getenv("DNT_SRCDIR");
  if (dir && *dir) snprintf(path, sizeof path, "%s/%s", dir, name);
  else snprintf(path, sizeof path, "%s/build-tools/dotnet-tools/%s", src ? src : ".", name);
  if (access(path, X_OK) != 0) {
    if (in_ci()) cr_assert_fail("no %s (CI=true: ./bootstrap.sh deps installs it): %s", name, path);
    cr_skip_test("no %s (./bootstrap.sh deps installs it): %s", name, path);
  }
  return path;
}

/* A flight recorder's window saved around the sample's --spike-at 8 with a 6 s ring: it begins
 * seconds after the session did (the ring cut its start), spans the ring, holds the spike's hot
 * method, and TraceEvent reads as many events as dntrace. what: the window's writer, for the
 * messages. */
static inline void expect_spike_window(const char *ring, const char *what) {
  double span = -1, first_at = -1;
  long events = trace_info_events(ring, &span, &first_at);
  /* timing: the trace's own clock, not the test's */
  cr_expect_geq(first_at, 1.0, "%s: the ring cut the session's start: the first event at +%.3f s", what, first_at);
  cr_expect_geq(span, 5.0, "%s: the window spans the ring: %.3f s", what, span);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "report", ring, "--hide-idle", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "Sample.SpikeWork.Burn"), "%s: the spike's hot method: %s", what, r.out);
  dnt_run_free(&r);
  long te = te_event_count(te_oracle_or_skip(what), ring);
  cr_expect_eq(te, events, "%s: TraceEvent %ld, dntrace %ld", what, te, events);
}

#endif
