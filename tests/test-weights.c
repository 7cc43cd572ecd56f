/* test-weights.c: dntrace's sample weights against TraceEvent's, the reference. For every trace
 * of the public corpus (../shared/corpus, or $DNT_CORPUS) with SampleProfiler samples, each
 * thread's time in dntrace's speedscope output (its profile's endValue) is the thread time that
 * TraceEvent's SampleProfilerThreadTimeComputer gives it (the computation of `dotnet-trace
 * convert`), within 0.1%, and its sample count (folded, --weight samples) is the number of
 * samples TraceEvent read on it. The oracle is tests/bench-traceevent (--mode threadtime), built
 * by `make check` into tests/oracle-te when the .NET SDK is there; under CI=true its absence is a
 * failure. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/run.h"

#define MAX_THREADS 256

struct thread_total {
  unsigned long long tid, samples, te_events, te_samples;
  double ms, te_ms;
  int ours, theirs;
};

struct totals {
  struct thread_total t[MAX_THREADS];
  size_t n;
};

static struct thread_total *thread_of(struct totals *tt, unsigned long long tid) {
  for (size_t i = 0; i < tt->n; i++)
    if (tt->t[i].tid == tid) return &tt->t[i];
  cr_assert_lt(tt->n, MAX_THREADS, "more threads than the test holds");
  memset(&tt->t[tt->n], 0, sizeof tt->t[0]);
  tt->t[tt->n].tid = tid;
  return &tt->t[tt->n++];
}

static int in_ci(void) {
  const char *ci = getenv("CI");
  return ci && strcmp(ci, "true") == 0;
}

static char corpus_dir[4096];

static void need_corpus(void) {
  const char *d = getenv("DNT_CORPUS"), *src = getenv("DNT_SRCDIR");
  if (d && *d) snprintf(corpus_dir, sizeof corpus_dir, "%s", d);
  else snprintf(corpus_dir, sizeof corpus_dir, "%s/../shared/corpus", src ? src : ".");
  char idx[4200];
  snprintf(idx, sizeof idx, "%s/INDEX.md", corpus_dir);
  struct stat st;
  if (stat(idx, &st) == 0) return;
  if (in_ci()) cr_assert_fail("the corpus is missing at %s and CI=true", corpus_dir);
  cr_skip_test("no corpus at %s (set DNT_CORPUS)", corpus_dir);
}

static char oracle[4200];

static void need_oracle(void) {
  const char *b = getenv("DNT_BUILDDIR");
  snprintf(oracle, sizeof oracle, "%s/tests/oracle-te/out/BenchTraceEvent.dll", b ? b : ".");
  struct stat st;
  if (stat(oracle, &st) == 0 && system("command -v dotnet >/dev/null 2>&1") == 0) return;
  if (in_ci())
    cr_assert_fail("no TraceEvent oracle at %s (CI=true: make check builds it with the .NET SDK)", oracle);
  cr_skip_test("no TraceEvent oracle at %s (needs the .NET SDK at configure time)", oracle);
}

/* Our side: per thread, the time of speedscope's profiles ("name":"Thread N", "endValue":MS) */
static void read_speedscope(const char *json, struct totals *tt) {
  const char *p = json;
  while ((p = strstr(p, "\"name\":\"Thread "))) {
    unsigned long long tid = strtoull(p + 15, NULL, 10);
    const char *e = strstr(p, "\"endValue\":");
    cr_assert(e, "a speedscope profile without endValue");
    struct thread_total *t = thread_of(tt, tid);
    t->ms = strtod(e + 11, NULL);
    t->ours = 1;
    p = e;
  }
}

/* ... and the samples of folded stacks weighed in samples ("Thread N;...;leaf COUNT") */
static void read_folded(char *text, struct totals *tt) {
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    cr_assert_eq(strncmp(line, "Thread ", 7), 0, "folded line: %s", line);
    const char *count = strrchr(line, ' ');
    cr_assert(count, "folded line: %s", line);
    struct thread_total *t = thread_of(tt, strtoull(line + 7, NULL, 10));
    t->samples += strtoull(count + 1, NULL, 10);
  }
}

/* The oracle's lines for one trace, after "trace PATH": "thread TID EVENTS SAMPLES MS" */
static void read_oracle(const char *text, const char *path, struct totals *tt) {
  size_t len = strlen(path);
  const char *p = text;
  while ((p = strstr(p, "trace ")) && !(strncmp(p + 6, path, len) == 0 && p[6 + len] == '\n')) p++;
  cr_assert(p, "the oracle says nothing of %s", path);
  p += 6 + len + 1;
  while (strncmp(p, "thread ", 7) == 0) {
    unsigned long long tid, events, samples;
    double ms;
    cr_assert_eq(sscanf(p, "thread %llu %llu %llu %lf", &tid, &events, &samples, &ms), 4, "oracle line: %.80s", p);
    struct thread_total *t = thread_of(tt, tid);
    t->te_events = events;
    t->te_samples = samples;
    t->te_ms = ms;
    t->theirs = 1;
    const char *nl = strchr(p, '\n');
    if (!nl) break;
    p = nl + 1;
  }
}

/* A trace and dntrace's totals of it. */
struct trace {
  char path[16384];
  int truncated;
  struct totals tt;
};

/* dntrace's totals of one trace: 1, or 0 when it has no samples (dntrace says so). */
static int read_ours(struct trace *tr) {
  struct dnt_run r;
  tr->tt.n = 0;
  int rc = dnt_run_dntrace(&r, "convert", tr->path, "--format", "folded", "--weight", "samples", "-o", "-", NULL);
  if (rc != 0) {
    /* the traces without samples, and the NetPerf ones (.NET Core 2) that dntrace refuses */
    cr_assert(strstr(r.err, "no SampleProfiler samples") || strstr(r.err, "NetPerf"), "%s: %s", tr->path, r.err);
    dnt_run_free(&r);
    return 0;
  }
  tr->truncated = strstr(r.err, "truncated") != NULL;
  read_folded(r.out, &tr->tt);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", tr->path, "--format", "speedscope", "-o", "-", NULL), 0, "%s: %s",
               tr->path, r.err);
  read_speedscope(r.out, &tr->tt);
  dnt_run_free(&r);
  return 1;
}

static void compare(struct trace *tr) {
  const char *path = tr->path;
  for (size_t i = 0; i < tr->tt.n; i++) {
    const struct thread_total *t = &tr->tt.t[i];
    cr_log_info("%s: thread %llu: %llu samples, %.3f ms; TraceEvent %llu samples read, %llu weighed, %.3f ms", path,
                t->tid, t->samples, t->ms, t->te_events, t->te_samples, t->te_ms);
    cr_assert(t->theirs, "%s: thread %llu has samples for dntrace, none for TraceEvent", path, t->tid);
    cr_assert(t->samples, "%s: thread %llu has samples for TraceEvent, none for dntrace", path, t->tid);
    /* TraceEvent's rule, seen in its own output: a thread's last sample is not weighed */
    cr_assert_eq(t->te_samples + 1, t->te_events, "%s: thread %llu", path, t->tid);
    if (tr->truncated) {
      /* TraceEvent (ContinueOnError) drops the tail of a truncated trace that dntrace reads up
       * to the cut: only that it read no more can be checked */
      cr_assert_leq(t->te_events, t->samples, "%s: thread %llu", path, t->tid);
      cr_assert_leq(t->te_ms, t->ms * 1.001, "%s: thread %llu", path, t->tid);
      continue;
    }
    cr_assert_eq(t->samples, t->te_events, "%s: thread %llu: %llu samples, TraceEvent read %llu", path, t->tid,
                 t->samples, t->te_events);
    if (t->te_ms == 0) cr_assert_eq(t->ms, 0, "%s: thread %llu", path, t->tid);
    else
      cr_assert(t->ms > t->te_ms * 0.999 && t->ms < t->te_ms * 1.001, "%s: thread %llu: %.3f ms, TraceEvent %.3f ms",
                path, t->tid, t->ms, t->te_ms);
  }
}

static int is_trace(const char *name) {
  size_t n = strlen(name);
  return (n > 9 && strcmp(name + n - 9, ".nettrace") == 0) || (n > 13 && strcmp(name + n - 13, ".nettrace.zip") == 0) ||
         (n > 7 && strcmp(name + n - 7, ".netperf") == 0) || (n > 11 && strcmp(name + n - 11, ".netperf.zip") == 0);
}

#define MAX_TRACES 64

Test(weights, corpus_thread_time_equals_traceevent, .timeout = 300) {
  need_corpus();
  need_oracle();
  static struct trace traces[MAX_TRACES];
  size_t n = 0, all = 0;
  DIR *top = opendir(corpus_dir);
  cr_assert(top, "cannot open %s", corpus_dir);
  struct dirent *d;
  while ((d = readdir(top))) {
    if (d->d_name[0] == '.') continue;
    char sub[8192];
    snprintf(sub, sizeof sub, "%s/%s", corpus_dir, d->d_name);
    DIR *dir = opendir(sub);
    if (!dir) continue;
    struct dirent *f;
    while ((f = readdir(dir))) {
      if (!is_trace(f->d_name)) continue;
      cr_assert_lt(n, MAX_TRACES, "more traces with samples than the test holds");
      snprintf(traces[n].path, sizeof traces[n].path, "%s/%s", sub, f->d_name);
      all++;
      n += read_ours(&traces[n]);
    }
    closedir(dir);
  }
  closedir(top);
  cr_log_info("%zu traces, %zu with samples", all, n);
  /* the corpus has six traces with samples (INDEX.md): all must be found */
  cr_assert_geq(n, 6, "only %zu traces with samples among %zu", n, all);

  /* TraceEvent on all of them in one run (its runtime starts once) */
  char *argv[MAX_TRACES + 6] = {"/usr/bin/env", "dotnet", oracle, "--mode", "threadtime"};
  for (size_t i = 0; i < n; i++) argv[5 + i] = traces[i].path;
  argv[5 + n] = NULL;
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 240000), 0, "the oracle failed: %s", r.err);
  for (size_t i = 0; i < n; i++) {
    read_oracle(r.out, traces[i].path, &traces[i].tt);
    compare(&traces[i]);
  }
  dnt_run_free(&r);
}
