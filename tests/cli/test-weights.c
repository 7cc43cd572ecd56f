/* test-weights.c: dntrace's sample weights. First the rule on a trace written here, with the
 * weights worked out by hand from TraceEvent's SampleProfilerThreadTimeComputer; then against
 * TraceEvent itself, the reference. For every trace
 * of the public corpus (../shared/corpus, or $DNT_CORPUS) with samples (the SampleProfiler's, and
 * the GC's allocation events, which TraceEvent's computer counts as samples of running code),
 * each thread's time in dntrace's speedscope output (its profile's endValue less its startValue)
 * is the thread time that TraceEvent's SampleProfilerThreadTimeComputer gives it, called over
 * every event as `dotnet-trace convert` calls it, within 0.1%, and its sample count (folded,
 * --weight samples) is the number of those events TraceEvent read on it. In a trace with the task
 * library's or the thread pool's work item events, both move a task's samples to the thread that
 * made the task and add the time awaits waited (async stacks, issue 27): there each thread's time
 * is compared, and the samples in all, TraceEvent's plus each thread's last, which it does not
 * weigh. The oracle is tests/bench-traceevent (--mode threadtime), built
 * by `make check` into tests/oracle-te when the .NET SDK is there; under CI=true its absence is a
 * failure. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dnt-profile.h"
#include "../lib/env-cr.h"
#include "../lib/ntr-writer.h"
#include "../lib/run.h"
#include "ntr.h"

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

static char corpus[4096];
static const char *oracle;

static void need_corpus(void) { corpus_dir(corpus, sizeof corpus); }
static void need_oracle(void) { oracle = te_oracle_or_skip("the sample weights"); }

/* The thread of a speedscope profile named "Thread N" or "NAME (N)" (p: at its name's quote). */
static unsigned long long profile_thread(const char *p) {
  const char *end = strstr(p + 1, "\",\"unit\"");
  cr_assert(end, "a profile's name: %.80s", p);
  if (strncmp(p, "\"Thread ", 8) == 0) return strtoull(p + 8, NULL, 10);
  const char *open = end;
  while (open > p && *open != '(') open--;
  cr_assert(open > p && end[-1] == ')', "a profile named NAME (TID): %.*s", (int)(end - p + 1), p);
  return strtoull(open + 1, NULL, 10);
}

/* Our side: per thread, the time of speedscope's profiles (named "Thread N", or "NAME (N)" where
 * the trace names the thread; their endValue less their startValue, in ms: a profile starts where
 * its thread's first sample is) */
static void read_speedscope(const char *json, struct totals *tt) {
  const char *p = json;
  while ((p = strstr(p, "{\"type\":\"sampled\",\"name\":"))) {
    unsigned long long tid = profile_thread(p + 25);
    const char *e = strstr(p, "\"endValue\":"), *s = strstr(p, "\"startValue\":");
    cr_assert(e && s && s < e, "a speedscope profile without startValue and endValue");
    struct thread_total *t = thread_of(tt, tid);
    t->ms = strtod(e + 11, NULL) - strtod(s + 13, NULL); /* the profile spans its thread's time */
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

/* The oracle's lines for one trace, after "trace PATH": "activities N", then "thread TID EVENTS
 * SAMPLES MS": TraceEvent's totals of path (and in *activities, the events it stitches async
 * stacks with: the task library's, the thread pool's work items) */
static void read_oracle(const char *text, const char *path, struct totals *tt, unsigned long long *activities) {
  size_t len = strlen(path);
  const char *p = text;
  while ((p = strstr(p, "trace ")) && !(strncmp(p + 6, path, len) == 0 && p[6 + len] == '\n')) p++;
  cr_assert(p, "the oracle says nothing of %s", path);
  p += 6 + len + 1;
  cr_assert_eq(sscanf(p, "activities %llu", activities), 1, "oracle line: %.80s", p);
  p = strchr(p, '\n') + 1;
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
  unsigned long long activities; /* events TraceEvent stitches async stacks with */
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
  /* speedscope in samples: unit "none", each thread's endValue its count */
  cr_assert_eq(dnt_run_dntrace(&r, "convert", tr->path, "--format", "speedscope", "--weight", "samples", "-o", "-", NULL),
               0, "%s: %s", tr->path, r.err);
  struct totals counts = {.n = 0};
  read_speedscope(r.out, &counts);
  cr_assert(strstr(r.out, "\"unit\":\"none\"") && !strstr(r.out, "\"unit\":\"milliseconds\""), "%s", tr->path);
  cr_assert_eq(counts.n, tr->tt.n, "%s: a profile per thread", tr->path);
  for (size_t i = 0; i < counts.n; i++)
    cr_assert_eq((unsigned long long)counts.t[i].ms, thread_of(&tr->tt, counts.t[i].tid)->samples, "%s: thread %llu",
                 tr->path, counts.t[i].tid);
  dnt_run_free(&r);
  return 1;
}

static void compare(struct trace *tr) {
  const char *path = tr->path;
  if (tr->activities) { /* a task's samples are filed under the thread that made it */
    unsigned long long ours = 0, theirs = 0, threads = 0;
    for (size_t i = 0; i < tr->tt.n; i++) {
      const struct thread_total *t = &tr->tt.t[i];
      cr_log_info("%s: thread %llu: %llu samples, %.3f ms; TraceEvent %llu events of its own, %llu samples filed "
                  "under it, %.3f ms",
                  path, t->tid, t->samples, t->ms, t->te_events, t->te_samples, t->te_ms);
      ours += t->samples;
      theirs += t->te_samples;
      threads += t->te_events > 0;
      if (tr->truncated) cr_assert_leq(t->te_ms, t->ms * 1.001, "%s: thread %llu", path, t->tid);
      else if (t->te_ms == 0) cr_assert_eq(t->ms, 0, "%s: thread %llu: %.3f ms, TraceEvent none", path, t->tid, t->ms);
      else
        cr_assert(t->ms > t->te_ms * 0.999 && t->ms < t->te_ms * 1.001, "%s: thread %llu: %.3f ms, TraceEvent %.3f ms",
                  path, t->tid, t->ms, t->te_ms);
    }
    cr_log_info("%s: %llu task and work item events; %llu samples, TraceEvent %llu weighed on %llu threads", path,
                tr->activities, ours, theirs, threads);
    if (!tr->truncated) cr_assert_eq(ours, theirs + threads, "%s: each thread's last sample is the difference", path);
    return;
  }
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

#define MAX_TRACES 64

/* The corpus's traces with samples, in traces[0..n) (all: the traces read) */
struct found {
  struct trace *traces;
  size_t n, all;
};

static void add_trace(void *ud, const char *path) {
  struct found *f = ud;
  cr_assert_lt(f->n, MAX_TRACES, "more traces with samples than the test holds");
  struct trace *t = &f->traces[f->n];
  snprintf(t->path, sizeof t->path, "%s", path);
  f->all++;
  f->n += read_ours(t);
}

/* .timeout: the oracle (240 s ceiling) and dntrace per trace (DNT_HANG_MS each): one ceiling at
 * most is reached (a failed step ends the test), beside a loaded healthy run */
Test(weights, corpus_thread_time_equals_traceevent, .timeout = 480) {
  need_corpus();
  need_oracle();
  static struct trace traces[MAX_TRACES];
  struct found f = {traces, 0, 0};
  corpus_each(corpus, corpus_is_trace, add_trace, &f);
  size_t n = f.n, all = f.all;
  cr_log_info("%zu traces, %zu with samples", all, n);
  /* the corpus has six traces with samples (INDEX.md): all must be found */
  cr_assert_geq(n, 6, "only %zu traces with samples among %zu", n, all);

  /* TraceEvent on all of them in one run (its runtime starts once) */
  char *argv[MAX_TRACES + 6] = {"/usr/bin/env", "dotnet", (char *)oracle, "--mode", "threadtime"};
  for (size_t i = 0; i < n; i++) argv[5 + i] = traces[i].path;
  argv[5 + n] = NULL;
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 240000), 0, "the oracle failed: %s", r.err);
  for (size_t i = 0; i < n; i++) {
    read_oracle(r.out, traces[i].path, &traces[i].tt, &traces[i].activities);
    compare(&traces[i]);
  }
  dnt_run_free(&r);
}

/* ---- the rule, by construction ----
 * A trace in microsecond ticks (sync time 1000), samples of the SampleProfiler (payload: its type,
 * 1 External, 2 Managed) on stacks A and B:
 *   thread 1: 2000 Managed A, 3000 External A, 3500 Managed B, 13500 Managed B (after a 10 ms gap)
 *   thread 2: 2500 External A (its only sample)
 *   thread 3: 500 Managed A (before the trace's start), 1500 Managed A, 2500 Managed A
 * TraceEvent's rule weighs each sample by the time to its thread's next, whichever the kinds:
 *   thread 1: Managed A 1 ms, External A 0.5 ms, Managed B 10 ms + 0 (the last): 11.5 ms
 *   thread 2: 0 ms (a last sample)
 *   thread 3: the sample before the start passes on no time, 1500 -> 2500: 1 ms, the last 0 */

#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

struct synth {
  uint64_t thread, ts;
  uint32_t type, stack;
};
static const struct synth synth[] = {
    {3, 500, 2, 1},  {3, 1500, 2, 1}, {1, 2000, 2, 1},  {2, 2500, 1, 1},
    {3, 2500, 2, 1}, {1, 3000, 1, 1}, {1, 3500, 2, 2},  {1, 13500, 2, 2},
};
#define NSYNTH (sizeof synth / sizeof synth[0])

static void write_synth(ntrw *w) {
  ntrw_trace t = {.sync_qpc = 1000, .freq = 1000000, .pointer_size = 8, .pid = 1, .cpus = 1, .sampling_ns = 1000000};
  ntrw_md md = {.id = 1, .provider = SAMPLER, .event_id = 0, .name = "", .opcode = -1, .no_fields = 1};
  static const uint64_t fa[] = {0x1000, 0x2000}, fb[] = {0x3000, 0x2000};
  const uint64_t *const frames[] = {fa, fb};
  const uint32_t nframes[] = {2, 2};
  static uint8_t payload[NSYNTH][4];
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &t);
  ntrw_md_begin(w);
  ntrw_metadata(w, &md);
  ntrw_block_end(w);
  ntrw_stacks(w, 1, 2, frames, nframes);
  ntrw_ev_begin(w, 1);
  for (size_t i = 0; i < NSYNTH; i++) {
    memcpy(payload[i], &synth[i].type, 4);
    ntrw_ev ev = {.metadata_id = 1, .seq = (uint32_t)i + 1, .thread = synth[i].thread, .capture_thread = synth[i].thread,
                  .stack_id = synth[i].stack, .ts = synth[i].ts, .payload = payload[i], .payload_size = 4};
    ntrw_event(w, &ev);
  }
  ntrw_block_end(w);
  ntrw_end(w);
}

/* keeps every sample but thread 1's External one (compare's views filter so) */
static int drop_external(void *ud, uint64_t thread, uint64_t ns) {
  (void)ud;
  return !(thread == 1 && ns == 3000 * 1000);
}

struct stack_sums {
  double ms[4][2]; /* [thread][leaf is UNMANAGED_CODE_TIME] */
  uint64_t samples[4];
  const struct dnt_profile *p;
};

static void sum_stack(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct stack_sums *s = ud;
  cr_assert(thread >= 1 && thread <= 3 && n > 0);
  int external = strcmp(dnt_profile_name(s->p, frames[n - 1]), DNT_UNMANAGED_FRAME) == 0;
  s->ms[thread][external] += ms;
  s->samples[thread] += samples;
}

static struct dnt_profile *load_synth(dnt_profile_keep_fn keep) {
  ntrw w;
  write_synth(&w);
  struct dnt_profile *p = dnt_profile_new();
  cr_assert(p);
  if (keep) dnt_profile_set_filter(p, keep, NULL);
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  ntr_parser *parser;
  cr_assert_eq(ntr_parser_new(&parser, &cb, p, NULL), 0);
  /* fed in small pieces: the weights must not depend on how the bytes come */
  for (size_t off = 0; off < w.len; off += 7) {
    int last = w.len - off <= 7;
    cr_assert_eq(ntr_parser_feed(parser, w.buf + off, last ? w.len - off : 7), last ? NTR_EOF : 0, "%s",
                 ntr_parser_errmsg(parser));
  }
  cr_assert_eq(ntr_parser_finish(parser), 0);
  ntr_parser_free(parser);
  ntrw_release(&w);
  cr_assert_eq(dnt_profile_finish(p), 0);
  return p;
}

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

Test(weights, rule_by_construction) {
  struct dnt_profile *p = load_synth(NULL);
  cr_assert_eq(dnt_profile_samples(p), NSYNTH);
  struct stack_sums s = {.p = p};
  cr_assert_eq(dnt_profile_each_stack(p, sum_stack, &s), 0);
  cr_expect(NEAR(s.ms[1][0], 11.0) && NEAR(s.ms[1][1], 0.5), "thread 1: managed %.6f, external %.6f", s.ms[1][0],
            s.ms[1][1]);
  cr_expect(NEAR(s.ms[2][0] + s.ms[2][1], 0), "thread 2 (one sample): %.6f", s.ms[2][1]);
  cr_expect(NEAR(s.ms[3][0], 1.0), "thread 3: %.6f", s.ms[3][0]);
  cr_expect_eq(s.samples[1], 4);
  cr_expect_eq(s.samples[2], 1);
  cr_expect_eq(s.samples[3], 3);
  cr_expect(NEAR(dnt_profile_total_ms(p), 12.5), "total %.6f", dnt_profile_total_ms(p));
  for (size_t t = 0; t < dnt_profile_nthreads(p); t++) {
    uint64_t tid = dnt_profile_thread_id(p, t);
    double want = tid == 1 ? 11.5 : tid == 3 ? 1.0 : 0;
    cr_expect(NEAR(dnt_profile_thread_ms(p, t), want), "thread %llu: %.6f ms", (unsigned long long)tid,
              dnt_profile_thread_ms(p, t));
  }
  /* the busiest thread has 4 samples: too few to measure the pace (10 needed) */
  cr_expect_eq(dnt_profile_measured_ms(p), 0);
  /* exclusive time by function: frame 0x1000 (A's leaf) is unnamed, ?!0x1000 */
  struct dnt_profile_row rows[8];
  size_t n = dnt_profile_top(p, (size_t)-1, 0, rows, 8);
  cr_assert_geq(n, 2);
  cr_expect_str_eq(rows[0].name, "?!0x3000", "B's leaf first: 10 ms");
  cr_expect(NEAR(rows[0].exclusive_ms, 10.0) && rows[0].exclusive == 2);
  /* --weight samples ranks by counts: A's managed leaf (4 samples) before B's (2) */
  dnt_profile_set_weight(p, DNT_WEIGHT_SAMPLES);
  n = dnt_profile_top(p, (size_t)-1, 0, rows, 8);
  cr_expect_str_eq(rows[0].name, "?!0x1000");
  cr_expect_eq(rows[0].exclusive, 4);
  dnt_profile_free(p);

  /* a filtered-out sample still ends the time of the one before it, and its own is not counted */
  p = load_synth(drop_external);
  memset(&s, 0, sizeof s);
  s.p = p;
  cr_assert_eq(dnt_profile_each_stack(p, sum_stack, &s), 0);
  cr_expect(NEAR(s.ms[1][0], 11.0) && NEAR(s.ms[1][1], 0), "thread 1 filtered: %.6f %.6f", s.ms[1][0], s.ms[1][1]);
  cr_expect_eq(s.samples[1], 3);
  dnt_profile_free(p);
}
