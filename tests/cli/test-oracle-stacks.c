/* test-oracle-stacks.c: the stack of every sample, held to TraceEvent's (issue #13).
 *
 * For every trace of the public corpus (../shared/corpus, or $DNT_CORPUS) with SampleProfiler
 * samples, and for a trace collected here from the sample target, each sample dntrace's profile
 * keeps (its timeline: thread, time and stack, what the speedscope and Chromium writers walk) is
 * matched one to one, by thread and time, with a sample TraceEvent's TraceLog yields, and their
 * stacks, root to leaf, must be the same once the two naming schemes are mapped (norm_te and
 * norm_ours below); the time TraceEvent's SampleProfilerThreadTimeComputer gives each sample
 * (dotnet-trace convert's computer) must be the time to the thread's next sample in dntrace's
 * timeline, and each thread's total dntrace's (dnt_profile_thread_ms), within 0.1%.
 * The oracle is tests/bench-traceevent --mode samplestacks (SampleStacks.cs), built by `make
 * check` into tests/oracle-te when the .NET SDK is there; under CI=true its absence is a failure.
 *
 * The file users get is held to the same samples: `dntrace convert --format speedscope --weight
 * samples`, read by python3's json module (a consumer of its own), each thread's profile expanded
 * (a run of one stack is written once with its count) is TraceEvent's samples of that thread in
 * time order, stack for stack.
 *
 * A trace written here (names_follow_traceevent_rules) puts every naming rule below on one stack
 * and holds both dntrace and TraceEvent to it.
 *
 * Every corpus trace with samples is covered whole: TraceEvent reads all six in about 3 s, the
 * 30 MB HeartRateMonitor trace included (dntrace in well under a second each). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dnt-profile.h"
#include "../lib/record-cr.h"
#include "../lib/env-cr.h"
#include "../lib/files-cr.h"
#include "../lib/nt-scan.h"
#include "../lib/ntr-writer.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

static char corpus[4096];
static const char *oracle;

static void need_corpus(void) { corpus_dir(corpus, sizeof corpus); }
static void need_oracle(void) { oracle = te_oracle_or_skip("the sample stacks"); }

/* ---- the two naming schemes, mapped to one ----
 * A frame is "module!method" on both sides, but built differently; each rule below is one
 * documented difference, everything else must be equal byte for byte.
 *
 * TraceEvent (TraceEventStackSource.GetFrameName): ModuleFiles[i].Name + "!" + FullMethodName.
 *  - M1 module case: TraceModuleFile's constructor lowercases the path it is given
 *    (TraceLog.cs, "Normalize to lower case"); dntrace keeps the ModuleILPath's case. Module
 *    names are compared in lower case.
 *  - M2 unknown module: a method whose ModuleID no ModuleLoad or rundown named is filed by
 *    TraceLog (GetOrCreateManagedModule) under an empty module file, whose FilePath and so Name
 *    is the literal "ManagedModule" (never lowercased: a real ManagedModule.dll would be
 *    "managedmodule"); dntrace writes "?" for that module. "ManagedModule" becomes "?".
 *  - F1 signature: FullMethodName is MethodNamespace + "." + MethodName + the MethodSignature from
 *    its first '(' (TraceLog.GetFullName); dntrace's is namespace.name. The last balanced
 *    "(...)" group is dropped from TraceEvent's.
 *  - F2 empty namespace: TraceEvent writes the "." anyway (".Main", "..ctor"); dntrace writes no
 *    dot. One leading "." is dropped from TraceEvent's method.
 *  - U  unnamed code: an address no method covers is "0x" + its hex for TraceEvent (the oracle
 *    sets ShowUnknownAddresses) after "?!" (no module) or "module!" (an address in a native
 *    module's range: dntrace knows no native modules); dntrace writes "?!0xADDR". TraceEvent's
 *    module of such a frame is dropped: the address must be the same. Counted on both sides.
 *  - P  pseudo-frames: the computer puts the sample's kind under its leaf: CPU_TIME for a Managed
 *    sample, UNMANAGED_CODE_TIME for an External one; dntrace writes UNMANAGED_CODE_TIME for an
 *    External one and nothing for a Managed one. The oracle writes the kind apart (its LEAF
 *    field): CPU_TIME adds nothing, UNMANAGED_CODE_TIME adds that frame.
 *  - P2 a Managed sample without a single frame: TraceEvent has nothing under the thread but
 *    CPU_TIME; dntrace gives a stack with no frame UNMANAGED_CODE_TIME, whatever its kind, so
 *    that every sample has a leaf for its top tables and flame graphs to charge. Mapped, and
 *    counted apart ("stackless"): the runtime walks a Managed sample's managed stack, so a real
 *    one has frames (none in the corpus); the written trace below has two.
 * Frames are joined with '\t' (no name holds one). */

/* TraceEvent names frames from the trace alone: so does dntrace here, in this process's profiles
 * and in the dntrace it runs (DNT_IMAGE_NAMES=0). Its names from ReadyToRun images, for code the
 * trace leaves unnamed, are held to the target's own mappings in tests/runtime/test-web.c. */
__attribute__((constructor)) static void names_from_the_trace_alone(void) {
  setenv("DNT_IMAGE_NAMES", "0", 1);
  dnt_profile_image_names(0);
}

static void lower(char *s, size_t n) {
  for (size_t i = 0; i < n; i++) s[i] = (char)tolower((unsigned char)s[i]);
}

/* One TraceEvent frame (len bytes) into out (rules M1, M2, F1, F2, U). */
static void norm_te(const char *f, size_t len, char *out, size_t cap, unsigned *unnamed) {
  const char *bang = memchr(f, '!', len);
  size_t mlen = bang ? (size_t)(bang - f) : 0;
  const char *meth = bang ? bang + 1 : f;
  size_t flen = len - (size_t)(meth - f);
  cr_assert(bang, "a TraceEvent frame without '!': %.*s", (int)len, f);
  if (flen > 2 && strncmp(meth, "0x", 2) == 0 && strspn(meth + 2, "0123456789abcdef") == flen - 2) { /* U */
    snprintf(out, cap, "?!%.*s", (int)flen, meth);
    ++*unnamed;
    return;
  }
  if (flen && meth[flen - 1] == ')') { /* F1: the last balanced (...) */
    int depth = 0;
    for (size_t i = flen; i-- > 0;) {
      if (meth[i] == ')') depth++;
      else if (meth[i] == '(' && --depth == 0) {
        flen = i;
        break;
      }
    }
  }
  if (flen && meth[0] == '.') meth++, flen--; /* F2 */
  if (mlen == 13 && strncmp(f, "ManagedModule", 13) == 0) f = "?", mlen = 1; /* M2 */
  snprintf(out, cap, "%.*s!%.*s", (int)mlen, f, (int)flen, meth);
  lower(out, mlen < cap ? mlen : 0);
}

/* One of dntrace's frames into out (rules M1, U). */
static void norm_ours(const char *f, char *out, size_t cap, unsigned *unnamed) {
  if (strncmp(f, "?!0x", 4) == 0) { /* U */
    snprintf(out, cap, "%s", f);
    ++*unnamed;
    return;
  }
  const char *bang = strchr(f, '!');
  size_t mlen = bang ? (size_t)(bang - f) : 0;
  if (bang) snprintf(out, cap, "%.*s%s", (int)mlen, f, bang);
  else snprintf(out, cap, "%s", f);
  lower(out, mlen < cap ? mlen : 0);
}

/* ---- the samples of both sides ---- */

struct sample {
  unsigned long long tid;
  double ms;     /* since the trace's start */
  double weight; /* TraceEvent's Metric; NAN when the computer weighed none */
  char *stack;   /* normalized frames, root first, '\t' between */
  unsigned unnamed;
  int stackless; /* TraceEvent's: a Managed sample without frames (rule P2) */
};

struct samples {
  struct sample *v;
  size_t n, cap;
};

static struct sample *add(struct samples *s) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 4096;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    cr_assert(s->v, "out of memory");
  }
  memset(&s->v[s->n], 0, sizeof s->v[0]);
  return &s->v[s->n++];
}

static void samples_free(struct samples *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i].stack);
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* A growing string of frames. */
struct buf {
  char *p;
  size_t n, cap;
};

static void put(struct buf *b, const char *s) {
  size_t len = strlen(s);
  if (b->n + len + 2 > b->cap) {
    b->cap = (b->n + len + 2) * 2;
    b->p = realloc(b->p, b->cap);
    cr_assert(b->p, "out of memory");
  }
  if (b->n) b->p[b->n++] = '\t';
  memcpy(b->p + b->n, s, len + 1);
  b->n += len;
}

struct ours {
  const struct dnt_profile *prof;
  struct samples *s;
};

static void our_sample(void *ud, uint64_t thread, double t_us, double ms, const uint32_t *frames, size_t n) {
  struct ours *o = ud;
  struct sample *s = add(o->s);
  s->tid = thread;
  s->ms = t_us / 1000.0;
  s->weight = NAN;
  struct buf b = {0};
  put(&b, "");
  b.n = 0;
  for (size_t i = 0; i < n; i++) {
    char name[4096];
    norm_ours(dnt_profile_name(o->prof, frames[i]), name, sizeof name, &s->unnamed);
    put(&b, name);
  }
  s->stack = b.p;
}

/* TraceEvent's samples of one trace: the oracle's lines after "trace PATH", up to the next
 * "trace " line: "s TID TIME_MS WEIGHT|- LEAF<TAB>frames..." */
static void read_te(const char *text, const char *path, struct samples *out) {
  size_t plen = strlen(path);
  const char *p = text;
  while ((p = strstr(p, "trace ")) && !((p == text || p[-1] == '\n') && strncmp(p + 6, path, plen) == 0 &&
                                         p[6 + plen] == '\n'))
    p++;
  cr_assert(p, "the oracle says nothing of %s", path);
  p = strchr(p, '\n') + 1;
  while (strncmp(p, "s ", 2) == 0 || strncmp(p, "a ", 2) == 0) { /* a sample, an allocation event */
    int allocation = *p == 'a';
    const char *eol = strchr(p, '\n');
    cr_assert(eol, "oracle line without its end");
    struct sample *s = add(out);
    char weight[64], leaf[64], head[256];
    int used = 0;
    /* sscanf on a copy of the line's head: on the whole text, each call would measure all of it */
    const char *tab = memchr(p, '\t', (size_t)(eol - p));
    size_t hlen = (size_t)((tab ? tab : eol) - p);
    cr_assert_lt(hlen, sizeof head, "oracle line: %.120s", p);
    memcpy(head, p, hlen);
    head[hlen] = '\0';
    cr_assert_eq(sscanf(head + 1, " %llu %lf %63s %63s%n", &s->tid, &s->ms, weight, leaf, &used), 4,
                 "oracle line: %.120s", p);
    used++;
    s->weight = strcmp(weight, "-") == 0 ? NAN : strtod(weight, NULL);
    struct buf b = {0};
    put(&b, "");
    b.n = 0;
    const char *f = p + used;
    if (*f == '\t') f++;
    while (f < eol) {
      const char *end = memchr(f, '\t', (size_t)(eol - f));
      if (!end) end = eol;
      char name[4096];
      norm_te(f, (size_t)(end - f), name, sizeof name, &s->unnamed);
      if (end > f) put(&b, name);
      f = end < eol ? end + 1 : eol;
    }
    if (strcmp(leaf, "UNMANAGED_CODE_TIME") == 0) put(&b, DNT_UNMANAGED_FRAME); /* P */
    else cr_assert_str_eq(leaf, "CPU_TIME", "oracle line: %.120s", p);
    if (b.n == 0) { /* P2 (an allocation event may come without a stack: not counted) */
      put(&b, DNT_UNMANAGED_FRAME);
      s->stackless = !allocation;
    }
    s->stack = b.p;
    p = eol + 1;
  }
}

static int by_thread_time(const void *a, const void *b) {
  const struct sample *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return x->ms < y->ms ? -1 : x->ms > y->ms;
}

/* Two clocks of one sample: TraceEvent's TimeStampRelativeMSec and dntrace's, both from the
 * same QPC ticks over the same sync point: the same but for the doubles' rounding (1e-11 ms seen
 * on the corpus). 1 ns. */
#define SAME_TIME_MS 0.000001

struct verdict {
  size_t samples, unnamed, te_unnamed, stackless, stack_diffs, weight_diffs, unmatched_ours, unmatched_te;
  double max_dt; /* ms between the two clocks of a matched sample */
};

static void show(const char *what, const struct sample *o, const struct sample *t) {
  cr_log_error("%s: thread %llu at %.6f ms (TraceEvent %.6f ms):\n  dntrace:    %s\n  TraceEvent: %s", what, o->tid,
               o->ms, t ? t->ms : NAN, o->stack, t ? t->stack : "(none)");
}

/* Matches ours and TraceEvent's (both sorted by thread, then time) one to one and compares. A
 * truncated trace: TraceEvent (ContinueOnError) stops earlier than dntrace, which reads up to
 * the cut; samples of dntrace's after TraceEvent's last are not held against it. */
static void compare(const char *path, struct samples *ours, struct samples *te, const struct dnt_profile *prof,
                    int truncated, struct verdict *v) {
  qsort(ours->v, ours->n, sizeof *ours->v, by_thread_time);
  qsort(te->v, te->n, sizeof *te->v, by_thread_time);
  double te_last = -INFINITY;
  for (size_t j = 0; j < te->n; j++) te_last = fmax(te_last, te->v[j].ms);
  size_t i = 0, j = 0;
  while (i < ours->n || j < te->n) {
    struct sample *o = i < ours->n ? &ours->v[i] : NULL, *t = j < te->n ? &te->v[j] : NULL;
    int cmp = !o ? 1 : !t ? -1 : o->tid != t->tid ? (o->tid < t->tid ? -1 : 1)
            : fabs(o->ms - t->ms) <= SAME_TIME_MS ? 0 : o->ms < t->ms ? -1 : 1;
    if (cmp < 0) {
      if (!(truncated && o->ms > te_last) && v->unmatched_ours++ < 5)
        show("a sample TraceEvent does not have", o, NULL);
      i++;
      continue;
    }
    if (cmp > 0) {
      if (v->unmatched_te++ < 5)
        cr_log_error("%s: TraceEvent's sample of thread %llu at %.6f ms is not dntrace's: %s", path, t->tid, t->ms,
                     t->stack);
      j++;
      continue;
    }
    v->samples++;
    v->max_dt = fmax(v->max_dt, fabs(o->ms - t->ms));
    v->unnamed += o->unnamed;
    v->te_unnamed += t->unnamed;
    v->stackless += (size_t)t->stackless;
    if (strcmp(o->stack, t->stack) != 0 && v->stack_diffs++ < 5) show("stacks differ", o, t);
    /* the computer's time for it: to the thread's next sample in dntrace's timeline; none for
     * the thread's last (and for one at or before the trace's start: it passes on no time) */
    const struct sample *next = i + 1 < ours->n && ours->v[i + 1].tid == o->tid ? &ours->v[i + 1] : NULL;
    if (isnan(t->weight)) {
      if (next && o->ms > 0 && !(truncated && next->ms > te_last) && v->weight_diffs++ < 5)
        show("TraceEvent weighs no time for a sample that is not its thread's last", o, t);
    } else {
      double want = next ? next->ms - o->ms : NAN;
      /* the Metric is a float (7 digits) */
      if (!(fabs(t->weight - want) <= 1e-6 * want + 1e-5) && v->weight_diffs++ < 5)
        cr_log_error("%s: thread %llu at %.6f ms: TraceEvent weighs %.6f ms, the next sample is %.6f ms later", path,
                     o->tid, o->ms, t->weight, want);
    }
    i++, j++;
  }
  /* per thread: dntrace's total against the sum of the computer's Metrics */
  for (size_t k = 0; k < dnt_profile_nthreads(prof); k++) {
    unsigned long long tid = dnt_profile_thread_id(prof, k);
    double te_ms = 0, ours_ms = dnt_profile_thread_ms(prof, k);
    for (size_t m = 0; m < te->n; m++)
      if (te->v[m].tid == tid && !isnan(te->v[m].weight)) te_ms += te->v[m].weight;
    cr_log_info("%s: thread %llu: %.3f ms, TraceEvent %.3f ms", path, tid, ours_ms, te_ms);
    if (truncated) cr_expect_leq(te_ms, ours_ms * 1.001 + 1e-9, "%s: thread %llu", path, tid);
    else cr_expect(fabs(ours_ms - te_ms) <= 0.001 * te_ms + 1e-9, "%s: thread %llu: %.3f ms, TraceEvent %.3f ms",
                   path, tid, ours_ms, te_ms);
  }
}

/* ---- the speedscope file ----
 * python3 reads it and writes "F<TAB>name" per shared frame, then per profile "P<TAB>name" and
 * per sample "S<TAB>weight<TAB>frame,frame,..." (root first). */
static const char *speedscope_dump =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "w = sys.stdout.write\n"
    "for f in d['shared']['frames']: w('F\\t' + f['name'] + '\\n')\n"
    "for p in d['profiles']:\n"
    "    assert p['type'] == 'sampled' and p['unit'] == 'none', p['name']\n"
    "    assert len(p['samples']) == len(p['weights']), p['name']\n"
    "    w('P\\t' + p['name'] + '\\n')\n"
    "    for s, n in zip(p['samples'], p['weights']):\n"
    "        assert n == int(n) and n > 0, n\n"
    "        w('S\\t%d\\t%s\\n' % (n, ','.join(map(str, s))))\n";

static char *line_end(char *p) {
  char *e = strchr(p, '\n');
  cr_assert(e, "python's dump ends mid-line");
  *e = '\0';
  return e + 1;
}

/* te: sorted by thread and time. Each profile, in thread order (the timeline's), must be the
 * samples TraceEvent has of its thread. */
static void check_speedscope(const char *path, const struct dnt_profile *prof, const struct samples *te,
                             int truncated) {
  char dir[] = "/tmp/dnt-oracle-ss-XXXXXX";
  cr_assert(mkdtemp(dir));
  char ss[64], py[64];
  snprintf(ss, sizeof ss, "%s/t.json", dir);
  snprintf(py, sizeof py, "%s/dump.py", dir);
  FILE *fp = fopen(py, "w");
  cr_assert(fp);
  fputs(speedscope_dump, fp);
  fclose(fp);
  struct dnt_run r;
  /* --no-async: each sample on its own thread, as the oracle's samples (the stitched file's
   * threads are held to TraceEvent's in tests/cli/test-weights.c) */
  cr_assert_eq(dnt_run_dntrace(&r, "convert", path, "--format", "speedscope", "--weight", "samples", "--no-async", "-o",
                               ss, NULL),
               0, "%s: %s", path, r.err);
  dnt_run_free(&r);
  char *argv[] = {"/usr/bin/env", "python3", py, ss, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "%s: python3 cannot read the speedscope file: %s", path,
               r.err);
  unlink(ss);
  unlink(py);
  rmdir(dir);

  char **frames = NULL;
  size_t nframes = 0, capframes = 0, j = 0, expanded = 0, diffs = 0, profiles = 0;
  unsigned long long tid = 0;
  size_t end = 0; /* past the current thread's samples in te */
  char *p = r.out;
  while (*p) {
    char *line = p;
    p = line_end(p);
    if (line[0] == 'F') {
      if (nframes == capframes) {
        capframes = capframes ? 2 * capframes : 1024;
        frames = realloc(frames, capframes * sizeof *frames);
        cr_assert(frames);
      }
      char name[4096];
      unsigned unnamed = 0;
      norm_ours(line + 2, name, sizeof name, &unnamed);
      frames[nframes++] = strdup(name);
    } else if (line[0] == 'P') {
      /* the next thread of TraceEvent's: profiles come a thread at a time, by thread id */
      cr_assert(truncated || j == end, "%s: thread %llu: speedscope has %zu samples, TraceEvent more", path, tid, j);
      j = end;
      cr_assert_lt(j, te->n, "%s: a profile for a thread TraceEvent has no samples of: %s", path, line + 2);
      tid = te->v[j].tid;
      for (end = j; end < te->n && te->v[end].tid == tid; end++) continue;
      const char *given = dnt_profile_thread_name(prof, tid);
      char label[600];
      if (given && *given) snprintf(label, sizeof label, "%s (%llu)", given, tid);
      else snprintf(label, sizeof label, "Thread %llu", tid);
      cr_assert_str_eq(line + 2, label, "%s: profile %zu", path, profiles);
      profiles++;
    } else {
      char *q = line + 2;
      unsigned long n = strtoul(q, &q, 10);
      struct buf b = {0};
      put(&b, "");
      b.n = 0;
      for (q++; *q;) {
        unsigned long f = strtoul(q, &q, 10);
        cr_assert_lt(f, nframes, "%s: frame %lu", path, f);
        put(&b, frames[f]);
        if (*q == ',') q++;
      }
      for (unsigned long k = 0; k < n; k++, j++, expanded++) {
        if (j >= end) {
          cr_assert(truncated, "%s: thread %llu: speedscope has more samples than TraceEvent's %zu", path, tid, end);
          break;
        }
        if (strcmp(b.p, te->v[j].stack) != 0 && diffs++ < 5)
          cr_log_error("%s: speedscope, thread %llu, sample at %.6f ms:\n  speedscope: %s\n  TraceEvent: %s", path, tid,
                       te->v[j].ms, b.p, te->v[j].stack);
      }
      free(b.p);
    }
  }
  cr_assert(truncated || (j == end && end == te->n), "%s: speedscope has fewer threads or samples than TraceEvent",
            path);
  cr_log_info("%s: speedscope: %zu profiles, %zu samples; %zu differ from TraceEvent's", path, profiles, expanded,
              diffs);
  cr_expect_eq(diffs, 0, "%s: %zu of speedscope's samples differ from TraceEvent's", path, diffs);
  for (size_t f = 0; f < nframes; f++) free(frames[f]);
  free(frames);
  dnt_run_free(&r);
}

/* ---- one run ---- */

struct trace {
  char path[8192 + 512];
  struct dnt_profile *prof;
  int truncated;
  struct samples ours, te;
};

/* dntrace's side: 1, or 0 when the trace has no samples (or is a NetPerf one, refused). */
static int load_ours(struct trace *tr) {
  tr->prof = dnt_profile_new();
  cr_assert(tr->prof);
  dnt_profile_keep_timeline(tr->prof);
  char msg[1024];
  int rc = dnt_profile_load(tr->prof, tr->path, msg, sizeof msg);
  if (rc < 0 || dnt_profile_samples(tr->prof) == 0) {
    cr_assert(rc >= 0 || strstr(msg, "NetPerf"), "%s: %s", tr->path, msg);
    dnt_profile_free(tr->prof);
    tr->prof = NULL;
    return 0;
  }
  tr->truncated = rc == 1;
  struct ours o = {tr->prof, &tr->ours};
  cr_assert_eq(dnt_profile_each_sample(tr->prof, our_sample, &o), 0);
  return 1;
}

/* Runs the oracle on the n traces and compares; returns how many stackless Managed samples (rule
 * P2) they had. */
static size_t run_oracle(struct trace *traces, size_t n) {
  size_t stackless = 0;
  char *argv[72] = {"/usr/bin/env", "dotnet", (char *)oracle, "--mode", "samplestacks"};
  cr_assert_leq(n, 64);
  for (size_t i = 0; i < n; i++) argv[5 + i] = traces[i].path;
  argv[5 + n] = NULL;
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 240000), 0, "the oracle failed: %s", r.err);
  for (size_t i = 0; i < n; i++) {
    struct verdict v = {0};
    read_te(r.out, traces[i].path, &traces[i].te);
    compare(traces[i].path, &traces[i].ours, &traces[i].te, traces[i].prof, traces[i].truncated, &v);
    cr_log_info("%s: %zu samples matched (dntrace %zu, TraceEvent %zu), times %.3g ms apart at most; unnamed frames: "
                "dntrace %zu, TraceEvent %zu; stackless Managed samples %zu",
                traces[i].path, v.samples, traces[i].ours.n, traces[i].te.n, v.max_dt, v.unnamed, v.te_unnamed,
                v.stackless);
    stackless += v.stackless;
    cr_expect_gt(v.samples, 0, "%s: no sample matched", traces[i].path);
    cr_expect_eq(v.unmatched_ours + v.unmatched_te, 0, "%s: %zu of dntrace's samples and %zu of TraceEvent's unmatched",
                 traces[i].path, v.unmatched_ours, v.unmatched_te);
    cr_expect_eq(v.stack_diffs, 0, "%s: %zu samples with other stacks", traces[i].path, v.stack_diffs);
    cr_expect_eq(v.weight_diffs, 0, "%s: %zu samples weighed otherwise", traces[i].path, v.weight_diffs);
    check_speedscope(traces[i].path, traces[i].prof, &traces[i].te, traces[i].truncated);
    samples_free(&traces[i].ours);
    samples_free(&traces[i].te);
    dnt_profile_free(traces[i].prof);
  }
  dnt_run_free(&r);
  return stackless;
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
  memset(t, 0, sizeof *t);
  snprintf(t->path, sizeof t->path, "%s", path);
  f->all++;
  f->n += load_ours(t);
}

/* .timeout: the oracle (240 s ceiling) and, per trace, dntrace and python (DNT_HANG_MS each): one
 * ceiling at most is reached (a failed step ends the test), beside a loaded healthy run */
Test(oracle_stacks, corpus_every_sample_equals_traceevent, .timeout = 480) {
  need_corpus();
  need_oracle();
  require_python();
  static struct trace traces[MAX_TRACES];
  struct found f = {traces, 0, 0};
  corpus_each(corpus, corpus_is_trace, add_trace, &f);
  size_t n = f.n, all = f.all;
  cr_log_info("%zu traces, %zu with samples", all, n);
  /* the corpus has six traces with samples (INDEX.md): all must be found */
  cr_assert_geq(n, 6, "only %zu traces with samples among %zu", n, all);
  cr_expect_eq(run_oracle(traces, n), 0, "Managed samples without frames (rule P2): see the log");
}

/* A trace of this machine's runtime, collected by dntrace from the sample target: its threads
 * compute, sleep and wait, so both kinds of samples and deep managed stacks are there. Recorded
 * until cpu-work (in CountPrimes) has 10 samples in it. The inner ceilings: the sample's start and
 * cpu-work's first CPU (DNT_HANG_MS each, only a hang), at most 126 s of recording, the oracle
 * (240 s) and dntrace and python (DNT_HANG_MS each); a failed step ends the test. */
Test(oracle_stacks, collected_trace_every_sample_equals_traceevent, .timeout = 600) {
  DNT_REQUIRE_TARGET();
  need_oracle();
  require_python();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  char dir[] = "/tmp/dnt-oracle-stacks-XXXXXX";
  cr_assert(mkdtemp(dir));
  static struct trace tr;
  memset(&tr, 0, sizeof tr);
  snprintf(tr.path, sizeof tr.path, "%s/t.nettrace", dir);
  pid_t cpu = dnt_wait_thread_ran(t.pid, "cpu-work", 0.1);
  static struct nt_scan s;
  dnt_collect_until(t.pid, tr.path, NULL, "Microsoft-DotNETCore-SampleProfiler", 0, cpu, 10, &s);
  dnt_target_stop(&t);
  cr_assert_eq(load_ours(&tr), 1, "the collected trace has no samples");
  cr_assert_eq(tr.truncated, 0);
  cr_expect_eq(run_oracle(&tr, 1), 0, "Managed samples without frames (rule P2): see the log");
  unlink(tr.path);
  rmdir(dir);
}

/* ---- async stacks, stitched ----
 * With the task library's events in a trace, dotnet-trace files a task's samples under the stack
 * that made it, on that stack's thread, and adds the time awaits waited (AWAIT_TIME): the
 * oracle's --mode stitched (Stitched.cs) gives each (thread, stack) the computer fills, with its
 * samples and their summed Metric. dntrace's profile read with DNT_TASKS_STITCHED must hold the
 * same pairs, the same time within 0.1% (and 1 us), and the same samples but for each thread's
 * last, which TraceEvent leaves out (no later one weighs it) and dntrace keeps with no time: in
 * all, as many more samples as the trace has threads with samples. Rules M1 to P2 as above;
 * STARTING TASK and AWAIT_TIME are named alike. */

struct keyed {
  char *key; /* "TID\tframe\tframe..." */
  unsigned long long n;
  double ms;
};

struct keyeds {
  struct keyed *v;
  size_t n, cap;
};

static void keyed_add(struct keyeds *k, char *key, unsigned long long n, double ms) {
  if (k->n == k->cap) {
    k->cap = k->cap ? 2 * k->cap : 1024;
    k->v = realloc(k->v, k->cap * sizeof *k->v);
    cr_assert(k->v, "out of memory");
  }
  k->v[k->n++] = (struct keyed){key, n, ms};
}

static int by_key(const void *a, const void *b) { return strcmp(((const struct keyed *)a)->key, ((const struct keyed *)b)->key); }

/* Sorts and merges equal keys (two stacks of dntrace's may differ only in what the rules map). */
static void keyed_merge(struct keyeds *k) {
  if (k->n) qsort(k->v, k->n, sizeof *k->v, by_key);
  size_t out = 0;
  for (size_t i = 0; i < k->n; i++) {
    if (out && strcmp(k->v[out - 1].key, k->v[i].key) == 0) {
      k->v[out - 1].n += k->v[i].n;
      k->v[out - 1].ms += k->v[i].ms;
      free(k->v[i].key);
      continue;
    }
    k->v[out++] = k->v[i];
  }
  k->n = out;
}

static void keyed_free(struct keyeds *k) {
  for (size_t i = 0; i < k->n; i++) free(k->v[i].key);
  free(k->v);
  memset(k, 0, sizeof *k);
}

struct stitched_ours {
  const struct dnt_profile *prof;
  struct keyeds *k;
};

static void stitched_stack(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct stitched_ours *o = ud;
  char tid[32];
  unsigned unnamed = 0;
  snprintf(tid, sizeof tid, "%llu", (unsigned long long)thread);
  struct buf b = {0};
  put(&b, tid);
  for (size_t i = 0; i < n; i++) {
    char name[4096];
    norm_ours(dnt_profile_name(o->prof, frames[i]), name, sizeof name, &unnamed);
    put(&b, name);
  }
  keyed_add(o->k, b.p, samples, ms);
}

/* The oracle's lines for path: "activities N threads T", then "k TID COUNT MS<TAB>frames...<TAB>LEAF". */
static void read_stitched(const char *text, const char *path, struct keyeds *k, unsigned long long *activities,
                          unsigned long long *threads) {
  size_t plen = strlen(path);
  const char *p = text;
  while ((p = strstr(p, "trace ")) && !((p == text || p[-1] == '\n') && strncmp(p + 6, path, plen) == 0 &&
                                         p[6 + plen] == '\n'))
    p++;
  cr_assert(p, "the oracle says nothing of %s", path);
  p = strchr(p, '\n') + 1;
  cr_assert_eq(sscanf(p, "activities %llu threads %llu", activities, threads), 2, "oracle line: %.80s", p);
  p = strchr(p, '\n') + 1;
  while (strncmp(p, "k ", 2) == 0) {
    const char *eol = strchr(p, '\n'), *tab = strchr(p, '\t');
    cr_assert(eol && tab && tab < eol, "oracle line: %.120s", p);
    unsigned long long tid, n;
    double ms;
    cr_assert_eq(sscanf(p, "k %llu %llu %lf", &tid, &n, &ms), 3, "oracle line: %.120s", p);
    char head[32];
    unsigned unnamed = 0;
    snprintf(head, sizeof head, "%llu", tid);
    struct buf b = {0};
    put(&b, head);
    size_t frames = 0;
    const char *f = tab + 1;
    while (f < eol) {
      const char *end = memchr(f, '\t', (size_t)(eol - f));
      if (!end) end = eol;
      size_t len = (size_t)(end - f);
      int last = end == eol;
      char name[4096];
      if (last && len == 8 && strncmp(f, "CPU_TIME", 8) == 0) { /* P: a Managed sample adds nothing */
      } else if ((len == 13 && strncmp(f, "STARTING TASK", 13) == 0) || (len == 10 && strncmp(f, "AWAIT_TIME", 10) == 0) ||
                 (last && len == 19 && strncmp(f, "UNMANAGED_CODE_TIME", 19) == 0)) {
        snprintf(name, sizeof name, "%.*s", (int)len, f);
        put(&b, name), frames++;
      } else {
        norm_te(f, len, name, sizeof name, &unnamed);
        put(&b, name), frames++;
      }
      f = end < eol ? end + 1 : eol;
    }
    if (!frames) put(&b, DNT_UNMANAGED_FRAME); /* P2 */
    keyed_add(k, b.p, n, ms);
    p = eol + 1;
  }
}

/* Holds dntrace's stitched profile of each of the n traces to the oracle's; returns how many of
 * them have events TraceEvent stitches with. */
static size_t compare_stitched(char *const *paths, size_t n) {
  char *argv[72] = {"/usr/bin/env", "dotnet", (char *)oracle, "--mode", "stitched"};
  cr_assert_leq(n, 64);
  for (size_t i = 0; i < n; i++) argv[5 + i] = paths[i];
  argv[5 + n] = NULL;
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 240000), 0, "the oracle failed: %s", r.err);
  size_t with = 0;
  for (size_t i = 0; i < n; i++) {
    struct keyeds te = {0}, ours = {0};
    unsigned long long activities, threads;
    read_stitched(r.out, paths[i], &te, &activities, &threads);
    struct dnt_profile *prof = dnt_profile_new();
    cr_assert(prof);
    dnt_profile_set_tasks(prof, DNT_TASKS_STITCHED);
    char msg[1024];
    int rc = dnt_profile_load(prof, paths[i], msg, sizeof msg);
    cr_assert_eq(rc, 0, "%s: %s", paths[i], msg);
    struct stitched_ours o = {prof, &ours};
    cr_assert_eq(dnt_profile_each_stack(prof, stitched_stack, &o), 0);
    keyed_merge(&te);
    keyed_merge(&ours);
    with += activities > 0;
    size_t diffs = 0, a = 0, b = 0;
    unsigned long long extra = 0;
    while (a < ours.n || b < te.n) {
      int cmp = a == ours.n ? 1 : b == te.n ? -1 : strcmp(ours.v[a].key, te.v[b].key);
      const struct keyed *x = cmp <= 0 ? &ours.v[a] : NULL, *y = cmp >= 0 ? &te.v[b] : NULL;
      double xm = x ? x->ms : 0, ym = y ? y->ms : 0;
      unsigned long long xn = x ? x->n : 0, yn = y ? y->n : 0;
      extra += xn - (xn >= yn ? yn : xn);
      if ((fabs(xm - ym) > 0.001 * ym + 0.001 || xn < yn) && diffs++ < 5)
        cr_log_error("%s: %llu samples %.3f ms in dntrace, %llu %.3f ms in TraceEvent: thread %s", paths[i], xn, xm, yn,
                     ym, x ? x->key : y->key);
      a += cmp <= 0;
      b += cmp >= 0;
    }
    cr_log_info("%s: %llu events TraceEvent stitches with; %zu stacks (TraceEvent %zu), %zu differ", paths[i],
                activities, ours.n, te.n, diffs);
    cr_expect_eq(diffs, 0, "%s: %zu stacks differ from TraceEvent's", paths[i], diffs);
    cr_expect_eq(extra, threads, "%s: %llu samples more than TraceEvent's, for %llu threads' last", paths[i], extra,
                 threads);
    keyed_free(&te);
    keyed_free(&ours);
    dnt_profile_free(prof);
  }
  dnt_run_free(&r);
  return with;
}

static void add_path(void *ud, const char *path) {
  struct keyeds *k = ud;
  keyed_add(k, strdup(path), 0, 0);
}

/* Every corpus trace with samples, stitched: those without task events must come out as before,
 * those with them as dotnet-trace files them. */
Test(oracle_stacks, corpus_stitched_stacks_equal_traceevent, .timeout = 480) {
  need_corpus();
  need_oracle();
  struct keyeds all = {0};
  corpus_each(corpus, corpus_is_trace, add_path, &all);
  /* the traces dntrace reads (not the NetPerf ones) with samples: TraceEvent's or its tasks' */
  char *paths[64];
  size_t n = 0;
  for (size_t i = 0; i < all.n; i++) {
    struct dnt_profile *prof = dnt_profile_new();
    dnt_profile_set_tasks(prof, DNT_TASKS_STITCHED);
    char msg[1024];
    if (dnt_profile_load(prof, all.v[i].key, msg, sizeof msg) == 0 && dnt_profile_samples(prof) && n < 64)
      paths[n++] = all.v[i].key;
    dnt_profile_free(prof);
  }
  size_t with = compare_stitched(paths, n);
  cr_log_info("%zu traces compared, %zu with task or work item events", n, with);
  /* INDEX.md: objver4 (the thread pool's work items) and task_trace (awaits, no sampler) */
  cr_expect_geq(with, 2, "the corpus has two traces with events TraceEvent stitches with");
  keyed_free(&all);
}

/* The sample's --async chain (tests/targets/sample/AsyncWork.cs: async-driver waits for Outer,
 * which awaits Middle, which awaits Inner, which awaits Task.Delay(1) and then counts primes on
 * a pool thread), recorded with the default profile and async-tasks until the trace holds 200
 * ends of awaits (about 50 chains). The driver begins a chain only when the last one is over, so
 * only the chain in flight when the recording began (its awaits began before the trace) cannot
 * be stitched: every sample of Inner's prime counting after the driver's first await in the
 * trace must be filed under the driver, below Outer, Middle and STARTING TASK; with --no-async
 * (DNT_TASKS_SAMPLES) none is, each stays on its pool thread under the pool's dispatch. Then the
 * same trace, stitched, is held to TraceEvent's stacks and times as the corpus is. */

struct inner_view {
  const struct dnt_profile *prof;
  unsigned long long driver;
  double first_begin_us; /* the driver's first TaskWaitBegin in the trace */
  size_t stitched, plain, early, wrong;
};

static int frame_is(const struct dnt_profile *p, uint32_t id, const char *name) {
  return strcmp(dnt_profile_name(p, id), name) == 0;
}

static void inner_sample(void *ud, uint64_t thread, double t_us, double ms, const uint32_t *frames, size_t n) {
  struct inner_view *v = ud;
  (void)ms;
  /* Inner's own prime counting: CountPrimes called by Inner's state machine */
  if (n < 2 || !frame_is(v->prof, frames[n - 1], "Sample!Sample.CpuWork.CountPrimes") ||
      !frame_is(v->prof, frames[n - 2], "Sample!Sample.AsyncWork+<Inner>d__4.MoveNext"))
    return;
  if (t_us < v->first_begin_us) { /* the chain in flight as the recording began */
    v->early++;
    return;
  }
  int outer = -1, middle = -1, marker = -1, dispatch = -1;
  for (size_t i = 0; i < n; i++) {
    const char *f = dnt_profile_name(v->prof, frames[i]);
    if (outer < 0 && strcmp(f, "Sample!Sample.AsyncWork.Outer") == 0) outer = (int)i;
    if (middle < 0 && strcmp(f, "Sample!Sample.AsyncWork.Middle") == 0) middle = (int)i;
    if (strcmp(f, "STARTING TASK") == 0) marker = (int)i;
    if (strcmp(f, "System.Private.CoreLib!System.Threading.ThreadPoolWorkQueue.Dispatch") == 0) dispatch = (int)i;
  }
  if (thread == v->driver && outer >= 0 && outer < middle && middle < marker && marker < (int)n - 2 && dispatch < 0)
    v->stitched++;
  else if (thread != v->driver && outer < 0 && marker < 0 && dispatch >= 0)
    v->plain++;
  else if (v->wrong++ < 5)
    cr_log_error("Inner's work at %.3f ms on thread %llu, %zu frames: Outer at %d, Middle at %d, STARTING TASK at %d, "
                 "the pool's Dispatch at %d",
                 t_us / 1000, (unsigned long long)thread, n, outer, middle, marker, dispatch);
}

static void inner_view_of(const char *path, enum dnt_profile_tasks tasks, struct inner_view *v) {
  struct dnt_profile *prof = dnt_profile_new();
  cr_assert(prof);
  dnt_profile_keep_timeline(prof);
  dnt_profile_set_tasks(prof, tasks);
  char msg[1024];
  cr_assert_eq(dnt_profile_load(prof, path, msg, sizeof msg), 0, "%s", msg);
  v->prof = prof;
  v->stitched = v->plain = v->early = v->wrong = 0;
  cr_assert_eq(dnt_profile_each_sample(prof, inner_sample, v), 0);
  dnt_profile_free(prof);
}

Test(oracle_stacks, async_chain_stitched_under_its_callers, .timeout = 600) {
  DNT_REQUIRE_TARGET();
  need_oracle();
  dnt_target t;
  const char *const args[] = {"--async", "--no-cpu", "--no-blocking", "--no-alloc", "--no-exceptions", "--no-counters",
                              NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  unsigned long long driver = dnt_target_thread_named(t.pid, "async-driver");
  cr_assert(driver, "the sample's async-driver thread");
  char dir[] = "/tmp/dnt-oracle-async-XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/async.nettrace", dir);
  static struct nt_scan scan;
  const char *const extra[] = {"--profile", "cpu-sampling,async-tasks", NULL};
  dnt_collect_until(t.pid, path, extra, "System.Threading.Tasks.TplEventSource", 11, 0, 200, &scan);
  dnt_target_stop(&t);
  /* the driver's first await in the trace: `dntrace events`, "TIME_S TID ..." */
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--provider", "System.Threading.Tasks.TplEventSource", "--name",
                               "TaskWaitBegin", NULL),
               0, "%s", r.err);
  struct inner_view v = {.driver = driver, .first_begin_us = -1};
  for (const char *line = r.out; *line && v.first_begin_us < 0;) {
    double secs;
    unsigned long long tid;
    if (sscanf(line, "%lf %llu", &secs, &tid) == 2 && tid == driver) v.first_begin_us = secs * 1e6;
    const char *nl = strchr(line, '\n');
    line = nl ? nl + 1 : line + strlen(line);
  }
  dnt_run_free(&r);
  cr_assert_geq(v.first_begin_us, 0, "an await of the driver's in the trace");

  inner_view_of(path, DNT_TASKS_STITCHED, &v);
  cr_log_info("stitched: Inner's work %zu samples under the driver's chain, %zu on pool threads, %zu before the "
              "driver's first await (at %.3f ms)",
              v.stitched, v.plain, v.early, v.first_begin_us / 1000);
  cr_expect_gt(v.stitched, 0, "Inner's work is filed under the driver, below Outer, Middle and STARTING TASK");
  cr_expect_eq(v.plain + v.wrong, 0, "after the driver's first await, every sample of Inner's work is stitched");
  size_t stitched = v.stitched;
  inner_view_of(path, DNT_TASKS_SAMPLES, &v);
  cr_expect_eq(v.plain, stitched, "--no-async: the same samples, each on its pool thread under the pool's dispatch");
  cr_expect_eq(v.stitched + v.wrong, 0, "--no-async: nothing stitched");

  char *paths[] = {path};
  cr_expect_eq(compare_stitched(paths, 1), 1, "the trace has the task library's events");
  unlink(path);
  rmdir(dir);
}

/* ---- names, by construction ----
 * A trace written here: three modules and a jitted method in each, on one sample's stack, with
 * a method of no namespace (rule F2), one of a module never loaded (M2) and an address no method
 * covers (U); a thread whose first sample precedes the trace's start; one whose samples have no
 * stack (P2).
 *   1 /app/Foo.ni.dll as both its IL and native path (CoreCLR's NGEN image logged as its own IL
 *     image): TraceEvent drops the ".ni" (ManagedModuleLoadOrUnload), so dntrace must: "Foo"
 *   2 /app/Bar.ni.dll, native path /app/native/Bar.ni.dll: the paths differ, nothing dropped:
 *     "Bar.ni"
 *   3 /app/Baz.exe as both: no ".ni" to drop: "Baz"
 * The expected names follow from those rules; then the oracle reads the same file and every
 * sample must match, as above (TraceEvent must agree with the rules as written here). */

#define RUNTIME "Microsoft-Windows-DotNETRuntime"

struct bytes {
  uint8_t b[1024];
  uint32_t n;
};

static void b_u16(struct bytes *b, uint16_t v) { memcpy(b->b + b->n, &v, 2), b->n += 2; }
static void b_u32(struct bytes *b, uint32_t v) { memcpy(b->b + b->n, &v, 4), b->n += 4; }
static void b_u64(struct bytes *b, uint64_t v) { memcpy(b->b + b->n, &v, 8), b->n += 8; }
static void b_wstr(struct bytes *b, const char *s) { /* ASCII as UTF-16LE, with its NUL */
  do b_u16(b, (uint16_t)(unsigned char)*s);
  while (*s++);
}
static void b_zero(struct bytes *b, uint32_t n) { memset(b->b + b->n, 0, n), b->n += n; }

/* ModuleLoad, version 2 (the runtime's manifest): ids, flags, the two paths, then the PDB fields */
static void module_load(struct bytes *b, uint64_t id, const char *il, const char *native) {
  b->n = 0;
  b_u64(b, id), b_u64(b, 100 + id), b_u32(b, 0), b_u32(b, 0);
  b_wstr(b, il), b_wstr(b, native);
  b_u16(b, 0);
  b_zero(b, 16), b_u32(b, 0), b_wstr(b, "");
  b_zero(b, 16), b_u32(b, 0), b_wstr(b, "");
}

/* MethodLoadVerbose, version 1: MethodFlags 8 is Jitted (TraceLog files jitted methods only) */
static void method_load(struct bytes *b, uint64_t module, uint64_t start, const char *ns, const char *name) {
  b->n = 0;
  b_u64(b, 1000 + module), b_u64(b, module), b_u64(b, start), b_u32(b, 0x100), b_u32(b, 0x06000001), b_u32(b, 8);
  b_wstr(b, ns), b_wstr(b, name), b_wstr(b, "void  (int32)");
  b_u16(b, 0);
}

static void write_modules_trace(const char *path) {
  ntrw w;
  ntrw_trace t = {.sync_qpc = 1000, .freq = 1000000, .pointer_size = 8, .pid = 4242, .cpus = 1, .sampling_ns = 1000000};
  ntrw_md md[] = {
      {.id = 1, .provider = SAMPLER, .event_id = 0, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 2, .provider = RUNTIME, .event_id = 152, .version = 2, .level = 4, .keywords = 0x8, .name = "",
       .opcode = -1, .no_fields = 1},
      {.id = 3, .provider = RUNTIME, .event_id = 143, .version = 1, .level = 5, .keywords = 0x10, .name = "",
       .opcode = -1, .no_fields = 1},
  };
  /* leaf first: Foo's method called Bar's, which called into unnamed code (0x9010), which called
   * the lost module's method, which called Baz's two (return addresses inside each).
   * Not a return address at a method's very end (0x2100, a call as its last instruction):
   * there the two differ on purpose. dntrace names a caller frame by the byte before its
   * return address, the call itself (as perf and pprof do), so 0x2100 is App.Bar.Call; TraceEvent
   * looks the address up as it is and finds no method ("?!0x2100"), or the next method if one
   * starts there. None was seen in the corpus or in traces of the sample target. */
  static const uint64_t stack[] = {0x3010, 0x4010, 0x5010, 0x9010, 0x2020, 0x1030};
  static const uint64_t unnamed[] = {0x9010};
  const uint64_t *const frames[] = {stack, unnamed};
  const uint32_t nframes[] = {6, 1};
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  for (size_t i = 0; i < 3; i++) ntrw_metadata(&w, &md[i]);
  ntrw_block_end(&w);
  ntrw_stacks(&w, 1, 2, frames, nframes);
  ntrw_ev_begin(&w, 1);
  /* thread 8, the weights' edges: a sample before the trace's start (sync 1000) passes on no
   * time; an External one weighs the 2 ms to the next; the last, none: 2 ms in all */
  static const uint32_t kinds8[] = {2, 1, 2};
  static const uint64_t ts8[] = {900, 2500, 4500};
  uint32_t seq8 = 1;
  ntrw_ev first8 = {.metadata_id = 1, .seq = seq8++, .thread = 8, .capture_thread = 8, .stack_id = 2, .ts = ts8[0],
                    .payload = (const uint8_t *)&kinds8[0], .payload_size = 4};
  ntrw_event(&w, &first8);
  static struct bytes p[8];
  module_load(&p[0], 1, "/app/Foo.ni.dll", "/app/Foo.ni.dll");
  module_load(&p[1], 2, "/app/Bar.ni.dll", "/app/native/Bar.ni.dll");
  module_load(&p[2], 3, "/app/Baz.exe", "/app/Baz.exe");
  method_load(&p[3], 1, 0x1000, "App.Foo", "Main");
  method_load(&p[4], 2, 0x2000, "App.Bar", "Call");
  method_load(&p[5], 3, 0x3000, "App.Baz", "Work");
  method_load(&p[6], 3, 0x4000, "", "Helper");
  method_load(&p[7], 9, 0x5000, "App.Lost", "Run"); /* module 9 was never loaded */
  uint32_t seq = 1;
  uint64_t ts = 1100;
  for (size_t i = 0; i < 8; i++) {
    ntrw_ev ev = {.metadata_id = i < 3 ? 2 : 3, .seq = seq++, .thread = 7, .capture_thread = 7, .ts = ts++,
                  .payload = p[i].b, .payload_size = p[i].n};
    ntrw_event(&w, &ev);
  }
  /* three Managed samples 1 ms apart on that stack: two weighed, the last not */
  static const uint32_t managed = 2;
  for (int i = 0; i < 3; i++) {
    ntrw_ev ev = {.metadata_id = 1, .seq = seq++, .thread = 7, .capture_thread = 7, .stack_id = 1,
                  .ts = 2000 + 1000 * (uint64_t)i, .payload = (const uint8_t *)&managed, .payload_size = 4};
    ntrw_event(&w, &ev);
  }
  /* thread 9: Managed, External, Managed samples without a stack (stack id 0; rule P2), 1 ms
   * apart: 2 ms */
  for (int i = 0; i < 3; i++) {
    ntrw_ev ev = {.metadata_id = 1, .seq = (uint32_t)i + 1, .thread = 9, .capture_thread = 9, .stack_id = 0,
                  .ts = 2200 + 1000 * (uint64_t)i, .payload = (const uint8_t *)&kinds8[i], .payload_size = 4};
    ntrw_event(&w, &ev);
  }
  for (int i = 1; i < 3; i++) {
    ntrw_ev ev = {.metadata_id = 1, .seq = seq8++, .thread = 8, .capture_thread = 8, .stack_id = 2, .ts = ts8[i],
                  .payload = (const uint8_t *)&kinds8[i], .payload_size = 4};
    ntrw_event(&w, &ev);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);
}

Test(oracle_stacks, names_follow_traceevent_rules) {
  char dir[] = "/tmp/dnt-oracle-mod-XXXXXX";
  cr_assert(mkdtemp(dir));
  static struct trace tr;
  memset(&tr, 0, sizeof tr);
  snprintf(tr.path, sizeof tr.path, "%s/modules.nettrace", dir);
  write_modules_trace(tr.path);
  cr_assert_eq(load_ours(&tr), 1, "the written trace has no samples");
  cr_assert_eq(tr.ours.n, 9);
  for (size_t t = 0; t < dnt_profile_nthreads(tr.prof); t++)
    cr_expect(fabs(dnt_profile_thread_ms(tr.prof, t) - 2.0) < 1e-9, "thread %llu: %.6f ms",
              (unsigned long long)dnt_profile_thread_id(tr.prof, t), dnt_profile_thread_ms(tr.prof, t));
  /* norm_ours lowercases the module only */
  cr_expect_str_eq(tr.ours.v[0].stack,
                   "foo!App.Foo.Main\tbar.ni!App.Bar.Call\t?!0x9010\t?!App.Lost.Run\tbaz!Helper\tbaz!App.Baz.Work");
  need_oracle();
  require_python();
  cr_expect_eq(run_oracle(&tr, 1), 2, "thread 9's two Managed samples without a stack");
  unlink(tr.path);
  rmdir(dir);
}

/* ---- async rules, by construction ----
 * A trace written here puts each rule of docs/async-stacks.md on a few events, the ones the
 * sample's chain and the corpus do not have among them: a task scheduled, started and completed
 * (7, 8, 9) with its body under Task.InnerInvoke (the helper is the cut, not the Run frame above
 * it); a continuation scheduled (12); the pool's work item (61, 62) and its worker's wait (57,
 * after which samples are plain); a blocking wait (behavior 1: ends as it starts); an await made
 * from inside a continuation, twice with the same stack (a loop: the recursion guard, and one
 * node for both turns); an await without a stack (STARTING TASK alone); the end of an await
 * whose begin the trace lacks (dropped). The driver is thread 1, the pool's threads 2 and 3.
 * TraceEvent reads it through the oracle and both must agree; two stacks are also worked out by
 * hand from the rules. */

#define TPL "System.Threading.Tasks.TplEventSource"

/* methods: the program's at 0x1000 (module 1), the core library's at 0x2000 (module 2), 0x100 each */
enum { M_MAIN = 0x1000, M_OUTER = 0x1100, M_MIDDLE = 0x1200, M_INNER = 0x1300, M_PRIMES = 0x1400, M_WORK = 0x1500,
       M_LAMBDA = 0x1600, M_WAITBEGIN = 0x2000, M_RUN = 0x2100, M_INVOKE = 0x2200, M_EXECUTE = 0x2300,
       M_DISPATCH = 0x2400, M_SCHEDULED = 0x2500, M_QUEUE = 0x2600 };

struct async_writer {
  ntrw w;
  uint32_t seq[4];
  uint64_t ts;
};

static void async_event(struct async_writer *a, uint32_t md, uint64_t thread, uint32_t stack, const void *payload,
                        uint32_t size) {
  ntrw_ev ev = {.metadata_id = md, .seq = ++a->seq[thread], .thread = thread, .capture_thread = thread,
                .stack_id = stack, .ts = a->ts += 100, .payload = payload, .payload_size = size};
  ntrw_event(&a->w, &ev);
}

static void async_sample(struct async_writer *a, uint64_t thread, uint32_t stack) {
  static const uint32_t managed = 2;
  async_event(a, 1, thread, stack, &managed, 4);
}

/* a task library event: scheduler 1, originating task 0, then the task (and for a wait its
 * behavior: 2 an await, 1 a blocking wait) */
static void async_task(struct async_writer *a, uint32_t md, uint64_t thread, uint32_t stack, uint32_t task,
                       uint32_t behavior) {
  uint32_t p[5] = {1, 0, task, behavior, 0};
  async_event(a, md, thread, stack, p, behavior ? 20 : 12);
}

static void async_pool(struct async_writer *a, uint32_t md, uint64_t thread, uint32_t stack, uint64_t work) {
  uint8_t p[10] = {0};
  memcpy(p, &work, 8);
  async_event(a, md, thread, stack, p, 10);
}

static void write_async_trace(const char *path) {
  static struct async_writer a;
  memset(&a, 0, sizeof a);
  ntrw_trace t = {.sync_qpc = 1000, .freq = 1000000, .pointer_size = 8, .pid = 4343, .cpus = 1, .sampling_ns = 1000000};
  ntrw_md md[] = {
      {.id = 1, .provider = SAMPLER, .event_id = 0, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 2, .provider = RUNTIME, .event_id = 152, .version = 2, .level = 4, .keywords = 0x8, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 3, .provider = RUNTIME, .event_id = 143, .version = 1, .level = 5, .keywords = 0x10, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 4, .provider = TPL, .event_id = 7, .name = "TaskScheduled", .version = 1, .level = 4, .keywords = 3, .opcode = -1, .no_fields = 1},
      {.id = 5, .provider = TPL, .event_id = 8, .name = "TaskStarted", .version = 0, .level = 4, .keywords = 3, .opcode = -1, .no_fields = 1},
      {.id = 6, .provider = TPL, .event_id = 9, .name = "TaskCompleted", .version = 1, .level = 4, .keywords = 3, .opcode = -1, .no_fields = 1},
      {.id = 7, .provider = TPL, .event_id = 10, .name = "TaskWaitBegin", .version = 3, .level = 4, .keywords = 3, .opcode = -1, .no_fields = 1},
      {.id = 8, .provider = TPL, .event_id = 11, .name = "TaskWaitEnd", .version = 0, .level = 5, .keywords = 3, .opcode = -1, .no_fields = 1},
      {.id = 9, .provider = TPL, .event_id = 12, .name = "AwaitTaskContinuationScheduled", .version = 0, .level = 4, .keywords = 3, .opcode = -1, .no_fields = 1},
      {.id = 10, .provider = RUNTIME, .event_id = 57, .version = 0, .level = 4, .keywords = 0x10000, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 11, .provider = RUNTIME, .event_id = 61, .version = 0, .level = 5, .keywords = 0x80000000, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 12, .provider = RUNTIME, .event_id = 62, .version = 0, .level = 5, .keywords = 0x80000000, .name = "", .opcode = -1, .no_fields = 1},
  };
  /* leaf first; a caller's frame is a return address inside it */
  static const uint64_t idle_main[] = {M_MAIN + 0x10};
  static const uint64_t await_main[] = {M_WAITBEGIN + 0x10, M_INNER + 0x10, M_MIDDLE + 0x10, M_OUTER + 0x10, M_MAIN + 0x10};
  static const uint64_t counting[] = {M_PRIMES + 0x10, M_INNER + 0x20, M_RUN + 0x10, M_DISPATCH + 0x10};
  static const uint64_t schedule[] = {M_SCHEDULED + 0x10, M_OUTER + 0x20, M_MAIN + 0x10};
  static const uint64_t body[] = {M_WORK + 0x10, M_LAMBDA + 0x10, M_INVOKE + 0x10, M_RUN + 0x20, M_EXECUTE + 0x10, M_DISPATCH + 0x10};
  static const uint64_t queue[] = {M_QUEUE + 0x10, M_MAIN + 0x20};
  static const uint64_t idle_pool[] = {M_DISPATCH + 0x20};
  static const uint64_t await_again[] = {M_WAITBEGIN + 0x10, M_INNER + 0x20, M_RUN + 0x10, M_DISPATCH + 0x10};
  const uint64_t *const frames[] = {idle_main, await_main, counting, schedule, body, queue, idle_pool, await_again};
  const uint32_t nframes[] = {1, 5, 4, 3, 6, 2, 1, 4};
  enum { S_IDLE_MAIN = 1, S_AWAIT_MAIN, S_COUNTING, S_SCHEDULE, S_BODY, S_QUEUE, S_IDLE_POOL, S_AWAIT_AGAIN };
  ntrw_init(&a.w, 0);
  ntrw_trace_hdr(&a.w, &t);
  ntrw_md_begin(&a.w);
  for (size_t i = 0; i < sizeof md / sizeof md[0]; i++) ntrw_metadata(&a.w, &md[i]);
  ntrw_block_end(&a.w);
  ntrw_stacks(&a.w, 1, 8, frames, nframes);
  ntrw_ev_begin(&a.w, 1);
  a.ts = 2000;
  static struct bytes p[16];
  const char *corelib = "/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.0/System.Private.CoreLib.dll";
  module_load(&p[0], 1, "/app/Sample.dll", "/app/Sample.dll");
  module_load(&p[1], 2, corelib, corelib);
  method_load(&p[2], 1, M_MAIN, "Sample.Program", "Main");
  method_load(&p[3], 1, M_OUTER, "Sample.AsyncWork", "Outer");
  method_load(&p[4], 1, M_MIDDLE, "Sample.AsyncWork", "Middle");
  method_load(&p[5], 1, M_INNER, "Sample.AsyncWork+<Inner>d__4", "MoveNext");
  method_load(&p[6], 1, M_PRIMES, "Sample.CpuWork", "CountPrimes");
  method_load(&p[7], 1, M_WORK, "Sample.Jobs", "Work");
  method_load(&p[8], 1, M_LAMBDA, "Sample.Jobs+<>c", "<Start>b__0_0");
  method_load(&p[9], 2, M_WAITBEGIN, "System.Threading.Tasks.TplEventSource", "TaskWaitBegin");
  method_load(&p[10], 2, M_RUN, "System.Threading.ExecutionContext", "RunInternal");
  method_load(&p[11], 2, M_INVOKE, "System.Threading.Tasks.Task", "InnerInvoke");
  method_load(&p[12], 2, M_EXECUTE, "System.Threading.Tasks.Task", "ExecuteWithThreadLocal");
  method_load(&p[13], 2, M_DISPATCH, "System.Threading.ThreadPoolWorkQueue", "Dispatch");
  method_load(&p[14], 2, M_SCHEDULED, "System.Threading.Tasks.TplEventSource", "TaskScheduled");
  method_load(&p[15], 2, M_QUEUE, "System.Threading.ThreadPool", "UnsafeQueueUserWorkItem");
  for (size_t i = 0; i < 16; i++) async_event(&a, i < 2 ? 2 : 3, 1, 0, p[i].b, p[i].n);
  for (uint64_t th = 1; th <= 3; th++) async_sample(&a, th, th == 1 ? S_IDLE_MAIN : S_IDLE_POOL);
  /* an await's end whose begin was before the trace: dropped */
  async_task(&a, 8, 3, 0, 99, 0);
  async_sample(&a, 3, S_COUNTING);
  /* the chain: the driver awaits (5); its continuation counts on thread 2, which awaits again
   * twice from there with one stack (6, then 7: a loop), each continued on thread 2 and 3 */
  async_task(&a, 7, 1, S_AWAIT_MAIN, 5, 2);
  async_sample(&a, 1, S_IDLE_MAIN);
  async_task(&a, 8, 2, 0, 5, 0);
  async_sample(&a, 2, S_COUNTING);
  async_sample(&a, 2, S_COUNTING);
  async_task(&a, 7, 2, S_AWAIT_AGAIN, 6, 2);
  async_sample(&a, 2, S_IDLE_POOL);
  async_task(&a, 8, 2, 0, 6, 0);
  async_sample(&a, 2, S_AWAIT_AGAIN); /* the guard: the same frames as the level above */
  async_sample(&a, 2, S_COUNTING);
  async_task(&a, 7, 2, S_AWAIT_AGAIN, 7, 2);
  async_task(&a, 8, 3, 0, 7, 0);
  async_sample(&a, 3, S_COUNTING);
  async_sample(&a, 3, S_COUNTING);
  /* a blocking wait on the driver: it ends as it starts */
  async_task(&a, 7, 1, S_AWAIT_MAIN, 8, 1);
  async_task(&a, 8, 1, 0, 8, 0);
  async_sample(&a, 1, S_IDLE_MAIN);
  /* a task: scheduled by the driver, run on thread 3 under InnerInvoke, completed */
  async_task(&a, 4, 1, S_SCHEDULE, 9, 0);
  async_sample(&a, 1, S_IDLE_MAIN);
  async_task(&a, 5, 3, 0, 9, 0);
  async_sample(&a, 3, S_BODY);
  async_sample(&a, 3, S_BODY);
  async_task(&a, 6, 3, 0, 9, 0);
  async_sample(&a, 3, S_IDLE_POOL);
  /* a continuation scheduled (12), then its TaskScheduled (7) ignored, run on thread 2 */
  async_task(&a, 9, 1, S_SCHEDULE, 10, 0);
  async_task(&a, 4, 1, S_SCHEDULE, 10, 0);
  async_task(&a, 5, 2, 0, 10, 0);
  async_sample(&a, 2, S_BODY);
  async_task(&a, 6, 2, 0, 10, 0);
  /* a work item queued by the driver, run on thread 3; the worker's wait makes it plain */
  async_pool(&a, 11, 1, S_QUEUE, 0xabc0);
  async_pool(&a, 12, 3, 0, 0xabc0);
  async_sample(&a, 3, S_BODY);
  async_event(&a, 10, 3, 0, (const uint32_t[3]){1, 0, 0}, 10);
  async_sample(&a, 3, S_BODY);
  /* an await without a stack, continued on thread 2 */
  async_task(&a, 7, 1, 0, 11, 2);
  async_task(&a, 8, 2, 0, 11, 0);
  async_sample(&a, 2, S_COUNTING);
  for (uint64_t th = 1; th <= 3; th++) async_sample(&a, th, th == 1 ? S_IDLE_MAIN : S_IDLE_POOL);
  ntrw_block_end(&a.w);
  ntrw_end(&a.w);
  dnt_write_file(path, a.w.buf, a.w.len);
  ntrw_release(&a.w);
}

Test(oracle_stacks, async_rules_follow_traceevent) {
  need_oracle();
  char dir[] = "/tmp/dnt-async-rules-XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[64];
  snprintf(path, sizeof path, "%s/rules.nettrace", dir);
  write_async_trace(path);
  char *paths[] = {path};
  cr_expect_eq(compare_stitched(paths, 1), 1, "the written trace has the task library's events");
  /* by hand: the task's body on thread 3 is filed under the driver, after the stack that
   * scheduled it and STARTING TASK, cut at Task.InnerInvoke (leaving the lambda and Work); the
   * count in the loop's second turn (thread 3) stands under one STARTING TASK per level: the
   * driver's await, the first turn's await (the second's is the same node) */
  struct dnt_profile *prof = dnt_profile_new();
  dnt_profile_set_tasks(prof, DNT_TASKS_STITCHED);
  char msg[512];
  cr_assert_eq(dnt_profile_load(prof, path, msg, sizeof msg), 0, "%s", msg);
  struct keyeds ours = {0};
  struct stitched_ours o = {prof, &ours};
  cr_assert_eq(dnt_profile_each_stack(prof, stitched_stack, &o), 0);
  static const char *const want[] = {
      "1\tsample!Sample.Program.Main\tsample!Sample.AsyncWork.Outer\t"
      "system.private.corelib!System.Threading.Tasks.TplEventSource.TaskScheduled\t"
      "STARTING TASK\tsample!Sample.Jobs+<>c.<Start>b__0_0\tsample!Sample.Jobs.Work",
      "1\tsample!Sample.Program.Main\tsample!Sample.AsyncWork.Outer\tsample!Sample.AsyncWork.Middle\t"
      "sample!Sample.AsyncWork+<Inner>d__4.MoveNext\tsystem.private.corelib!System.Threading.Tasks.TplEventSource.TaskWaitBegin\t"
      "STARTING TASK\tsample!Sample.AsyncWork+<Inner>d__4.MoveNext\t"
      "system.private.corelib!System.Threading.Tasks.TplEventSource.TaskWaitBegin\tSTARTING TASK\t"
      "sample!Sample.AsyncWork+<Inner>d__4.MoveNext\tsample!Sample.CpuWork.CountPrimes",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    int found = 0;
    for (size_t k = 0; k < ours.n && !found; k++) found = strcmp(ours.v[k].key, want[i]) == 0;
    cr_expect(found, "a stack worked out by hand: %s", want[i]);
  }
  keyed_free(&ours);
  dnt_profile_free(prof);
  unlink(path);
  rmdir(dir);
}

/* A task started again on the thread it first started on while that thread had no activity
 * (TraceEvent's rule lets it: its earlier one below it is still none) puts the thread's
 * activities in a loop: a task's end then walks them. The walk ends (TraceEvent's would not),
 * the thread is back to its own code, and its next sample is plain. */
/* .timeout: only a loop in the walk reaches it (the test takes milliseconds) */
Test(oracle_stacks, a_task_started_twice_does_not_loop, .timeout = 60) {
  char dir[] = "/tmp/dnt-async-loop-XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[64];
  snprintf(path, sizeof path, "%s/loop.nettrace", dir);
  static struct async_writer a;
  memset(&a, 0, sizeof a);
  ntrw_trace t = {.sync_qpc = 1000, .freq = 1000000, .pointer_size = 8, .pid = 4444, .cpus = 1, .sampling_ns = 1000000};
  ntrw_md md[] = {
      {.id = 1, .provider = SAMPLER, .event_id = 0, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 4, .provider = TPL, .event_id = 7, .name = "TaskScheduled", .level = 4, .keywords = 3, .opcode = -1, .no_fields = 1},
      {.id = 5, .provider = TPL, .event_id = 8, .name = "TaskStarted", .level = 4, .keywords = 3, .opcode = -1, .no_fields = 1},
      {.id = 6, .provider = TPL, .event_id = 9, .name = "TaskCompleted", .level = 4, .keywords = 3, .opcode = -1, .no_fields = 1},
  };
  static const uint64_t work[] = {0x1010, 0x2010};
  const uint64_t *const frames[] = {work};
  const uint32_t nframes[] = {2};
  ntrw_init(&a.w, 0);
  ntrw_trace_hdr(&a.w, &t);
  ntrw_md_begin(&a.w);
  for (size_t i = 0; i < sizeof md / sizeof md[0]; i++) ntrw_metadata(&a.w, &md[i]);
  ntrw_block_end(&a.w);
  ntrw_stacks(&a.w, 1, 1, frames, nframes);
  ntrw_ev_begin(&a.w, 1);
  a.ts = 2000;
  async_task(&a, 4, 1, 1, 20, 0);
  async_task(&a, 4, 1, 1, 21, 0);
  async_task(&a, 5, 2, 0, 20, 0); /* thread 2's first event: it had no activity */
  async_task(&a, 5, 2, 0, 21, 0);
  async_task(&a, 5, 2, 0, 20, 0); /* again: 20 above 21 above 20 */
  async_task(&a, 6, 2, 0, 99, 0); /* an unknown task's end walks them */
  async_sample(&a, 2, 1);
  async_sample(&a, 2, 1);
  ntrw_block_end(&a.w);
  ntrw_end(&a.w);
  dnt_write_file(path, a.w.buf, a.w.len);
  ntrw_release(&a.w);
  struct dnt_profile *prof = dnt_profile_new();
  dnt_profile_set_tasks(prof, DNT_TASKS_STITCHED);
  char msg[512];
  cr_assert_eq(dnt_profile_load(prof, path, msg, sizeof msg), 0, "%s", msg);
  struct keyeds ours = {0};
  struct stitched_ours o = {prof, &ours};
  cr_assert_eq(dnt_profile_each_stack(prof, stitched_stack, &o), 0);
  int plain = 0;
  for (size_t k = 0; k < ours.n; k++) plain |= strcmp(ours.v[k].key, "2\t?!0x2010\t?!0x1010") == 0;
  cr_expect(plain, "thread 2's samples after the walk are its own");
  keyed_free(&ours);
  dnt_profile_free(prof);
  unlink(path);
  rmdir(dir);
}
