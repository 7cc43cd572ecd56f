/* Methods compiled by the JIT, paired by the rules of TraceEvent's JIT analysis (microsoft/perfview,
 * src/TraceEvent/Computers/TraceManagedProcess.cs: the MethodJittingStarted, MethodLoadVerbose and
 * MethodLoad callbacks of TraceLoadedDotNetRuntime, JITStats.LogJitStart and MethodComplete), so
 * that dntrace's counts and times are PerfView's:
 *
 *   MethodJittingStarted   a new row: its start, thread, IL size and name ("Namespace.Name" and the
 *                          signature from its '(' on).
 *   MethodLoadVerbose,     only when MethodFlags says Jitted (0x8): ends the thread's latest row
 *   MethodLoad             still open (no native size and no time yet), or, when there is none, is
 *                          a row of its own that took no time (its name from MethodLoadVerbose,
 *                          "" from MethodLoad). The row takes the native size, the JIT time (the
 *                          load's time less the row's start), the tier (MethodFlags bits 7-9, kept
 *                          when known) and the code version (ReJITID, MethodLoadVerbose V2+ only).
 *                          Each such event counts as a completion and adds its time to the total,
 *                          even one that lands on a row already completed but left open because it
 *                          took neither bytes nor time (TraceEvent's Completed and Count).
 *
 * A row is compiled in the background (tiering's thread) when it is a later code version that is
 * not on-stack replacement. Multicore JIT's background thread (ClrPrivate events) is not tracked.
 * Rows are kept per method compiled (what is reported), never per event. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"


enum { EV_METHOD_LOAD = 141, EV_METHOD_LOAD_VERBOSE = 143, EV_JITTING_STARTED = 145, EV_R2R_ENTRY_POINT = 159 };

/* MethodFlags (TraceEvent's MethodFlags and MethodLoadUnloadTraceDataBase) */
#define FLAG_JITTED 0x8u
#define FLAG_R2R_REJECTED 0x40u
#define TIER_SHIFT 7
#define TIER_MASK 0x7u
#define EXTENT_SHIFT 28
#define FLAGS_KEPT (~((TIER_MASK << TIER_SHIFT) | (0xfu << EXTENT_SHIFT)))

#define NAME_MAX_BYTES 4096 /* a longer name is cut: it comes from the trace */
#define BUCKET_MS 100.0
#define NO_ROW (-1L)

/* The thread's latest row still open, by thread id (open addressing; grows at half full). */
struct thread_slot {
  int64_t tid;
  long top;
  int used;
};

struct dnt_jit_analysis {
  const struct dnt_schema *schema;
  struct dnt__layouts layouts; /* the schema's layouts of the events read, remembered */
  dnt_record rec;
  struct dnt__clock clock;
  int failed, finished;
  dnt_jit_method *rows;
  size_t n, cap;
  struct thread_slot *threads;
  size_t nthreads, cap_threads;
  size_t completions, r2r_entry_points;
  double total_ms;
  dnt_jit_bucket *timeline;
  dnt_jit_summary summary;
};

struct dnt_jit_analysis *dnt_jit_analysis_new(const struct dnt_schema *schema) {
  struct dnt_jit_analysis *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->schema = schema;
  dnt_record_init(&a->rec);
  return a;
}

void dnt_jit_analysis_free(struct dnt_jit_analysis *a) {
  if (!a) return;
  for (size_t i = 0; i < a->n; i++) free(a->rows[i].name);
  free(a->rows);
  free(a->threads);
  free(a->timeline);
  dnt_record_release(&a->rec);
  free(a);
}

int dnt_jit_analysis_failed(const struct dnt_jit_analysis *a) { return a->failed ? -ENOMEM : 0; }

static int jit_on_event(void *ud, const ntr_event *ev);
static int jit_on_trace(void *ud, const ntr_trace *t);

void dnt_jit_analysis_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = jit_on_trace;
  cb->on_event = jit_on_event;
}

static int jit_on_trace(void *ud, const ntr_trace *t) {
  struct dnt_jit_analysis *a = ud;
  dnt__clock_on_trace(&a->clock, t);
  return 0;
}

/* An integer field exactly (MethodID, ModuleID, ReJITID...), 0 when absent or not an integer. */
static uint64_t u64(const struct dnt_jit_analysis *a, const char *name) {
  const dnt_value *v = dnt_record_get(&a->rec, name);
  if (!v) return 0;
  return v->kind == DNT_VALUE_UINT ? v->u : v->kind == DNT_VALUE_INT ? (uint64_t)v->i : 0;
}

static const char *str(const struct dnt_jit_analysis *a, const char *name) {
  const char *s = dnt_record_str(&a->rec, name);
  return s ? s : "";
}

/* ---- the threads' open rows ---- */

static size_t hash_tid(int64_t tid, size_t cap) { return (size_t)(((uint64_t)tid * 0x9E3779B97F4A7C15ull) >> 7) & (cap - 1); }

static struct thread_slot *thread_slot(struct dnt_jit_analysis *a, int64_t tid) {
  if (2 * (a->nthreads + 1) > a->cap_threads) {
    size_t cap = a->cap_threads ? a->cap_threads * 2 : 64;
    struct thread_slot *t = calloc(cap, sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < a->cap_threads; i++) {
      if (!a->threads[i].used) continue;
      size_t h = hash_tid(a->threads[i].tid, cap);
      while (t[h].used) h = (h + 1) & (cap - 1);
      t[h] = a->threads[i];
    }
    free(a->threads);
    a->threads = t;
    a->cap_threads = cap;
  }
  size_t h = hash_tid(tid, a->cap_threads);
  while (a->threads[h].used && a->threads[h].tid != tid) h = (h + 1) & (a->cap_threads - 1);
  if (!a->threads[h].used) {
    a->threads[h] = (struct thread_slot){.tid = tid, .top = NO_ROW, .used = 1};
    a->nthreads++;
  }
  return &a->threads[h];
}

/* ---- the rules ---- */

/* "Namespace.Name" and the signature from its '(' (TraceEvent's JITStats.GetMethodName). */
static char *method_name(const char *ns, const char *name, const char *sig) {
  const char *paren = strchr(sig, '(');
  if (!paren) paren = sig + strlen(sig);
  size_t n = strlen(ns) + 1 + strlen(name) + strlen(paren);
  if (n >= NAME_MAX_BYTES) n = NAME_MAX_BYTES - 1;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  snprintf(s, n + 1, "%s.%s%s", ns, name, paren);
  return s;
}

/* A new row on thread slot t (JITStats.LogJitStart). */
static dnt_jit_method *new_row(struct dnt_jit_analysis *a, struct thread_slot *t, char *name, double ms) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 256;
    dnt_jit_method *r = realloc(a->rows, cap * sizeof *r);
    if (!r) {
      free(name);
      return NULL;
    }
    a->rows = r;
    a->cap = cap;
  }
  dnt_jit_method *m = &a->rows[a->n];
  memset(m, 0, sizeof *m);
  m->name = name;
  m->tid = t->tid;
  m->start_ms = ms;
  m->prev_open = t->top;
  t->top = (long)a->n++;
  return m;
}

static int on_jitting_started(struct dnt_jit_analysis *a, int64_t tid, double ms) {
  struct thread_slot *t = thread_slot(a, tid);
  char *name = t ? method_name(str(a, "MethodNamespace"), str(a, "MethodName"), str(a, "MethodSignature")) : NULL;
  dnt_jit_method *m = name ? new_row(a, t, name, ms) : NULL;
  if (!m) return -ENOMEM;
  m->method_id = u64(a, "MethodID");
  m->module_id = u64(a, "ModuleID");
  m->il_size = (uint32_t)u64(a, "MethodILSize");
  return 0;
}

/* JITStats.MethodComplete */
static int on_method_load(struct dnt_jit_analysis *a, uint32_t id, int64_t tid, double ms) {
  uint32_t raw = (uint32_t)u64(a, "MethodFlags");
  if (!(raw & FLAG_JITTED)) return 0;
  struct thread_slot *t = thread_slot(a, tid);
  if (!t) return -ENOMEM;
  dnt_jit_method *m;
  if (t->top != NO_ROW) {
    m = &a->rows[t->top];
  } else { /* no start seen: a row that took no time */
    char *name = id == EV_METHOD_LOAD_VERBOSE
                     ? method_name(str(a, "MethodNamespace"), str(a, "MethodName"), str(a, "MethodSignature"))
                     : strdup("");
    m = name ? new_row(a, t, name, ms) : NULL;
    if (!m) return -ENOMEM;
    m->method_id = u64(a, "MethodID");
    m->module_id = u64(a, "ModuleID");
  }
  m->native_size = (uint32_t)u64(a, "MethodSize");
  m->jit_ms = ms - m->start_ms;
  m->flags = raw & FLAGS_KEPT;
  int tier = (int)((raw >> TIER_SHIFT) & TIER_MASK);
  if (tier != DNT_JIT_TIER_UNKNOWN) m->tier = tier;
  m->rejit_id = id == EV_METHOD_LOAD_VERBOSE ? u64(a, "ReJITID") : 0;
  m->background = m->tier != DNT_JIT_TIER_TIER1_OSR && m->rejit_id != 0;
  m->r2r_rejected = (raw & FLAG_R2R_REJECTED) != 0;
  m->completed++;
  a->completions++;
  a->total_ms += m->jit_ms;
  /* done unless it took neither bytes nor time (then TraceEvent can still end it again) */
  if ((long)(m - a->rows) == t->top && (m->native_size > 0 || m->jit_ms > 0)) t->top = m->prev_open;
  return 0;
}

static int jit_on_event(void *ud, const ntr_event *ev) {
  struct dnt_jit_analysis *a = ud;
  const ntr_metadata *md = ev->metadata;
  dnt__clock_see(&a->clock, ev->timestamp);
  if (a->failed || !md || strcmp(md->provider, DNT__RUNTIME_PROVIDER) != 0) return 0;
  switch (md->event_id) {
  case EV_METHOD_LOAD: case EV_METHOD_LOAD_VERBOSE: case EV_JITTING_STARTED: break;
  case EV_R2R_ENTRY_POINT: a->r2r_entry_points++; return 0;
  default: return 0;
  }
  uint32_t nfields;
  const ntr_field *f = dnt__layout(&a->layouts, a->schema, md, &nfields);
  if (!f) return 0;
  /* a short or odd payload keeps the fields decoded before the fault; a missing one reads as 0 */
  if (dnt_record_decode_layout(&a->rec, f, nfields, dnt__clock_ptr(&a->clock), ev->payload, ev->payload_size) ==
      NTR_ENOMEM) {
    a->failed = 1;
    return 1;
  }
  double ms = dnt__clock_ms(&a->clock, ev->timestamp);
  int64_t tid = (int64_t)ev->thread_id;
  int rc = md->event_id == EV_JITTING_STARTED ? on_jitting_started(a, tid, ms) : on_method_load(a, md->event_id, tid, ms);
  if (rc) {
    a->failed = 1;
    return 1;
  }
  return 0;
}

/* ---- after the trace ---- */

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The non-empty 100 ms buckets, from the rows' starts sorted. */
static void build_timeline(struct dnt_jit_analysis *a, dnt_jit_summary *s) {
  if (a->n == 0) return;
  double *starts = malloc(a->n * sizeof *starts);
  a->timeline = malloc(a->n * sizeof *a->timeline);
  if (!starts || !a->timeline) {
    free(starts);
    a->failed = 1;
    return;
  }
  for (size_t i = 0; i < a->n; i++) starts[i] = a->rows[i].start_ms;
  qsort(starts, a->n, sizeof *starts, cmp_double);
  size_t nb = 0;
  for (size_t i = 0; i < a->n; i++) {
    double b = floor(starts[i] / BUCKET_MS) * BUCKET_MS;
    if (nb == 0 || a->timeline[nb - 1].start_ms != b) a->timeline[nb++] = (dnt_jit_bucket){.start_ms = b};
    a->timeline[nb - 1].methods++;
  }
  /* each row's time into its bucket (binary search) */
  for (size_t i = 0; i < a->n; i++) {
    double b = floor(a->rows[i].start_ms / BUCKET_MS) * BUCKET_MS;
    size_t lo = 0, hi = nb;
    while (lo + 1 < hi) {
      size_t mid = (lo + hi) / 2;
      if (a->timeline[mid].start_ms <= b) lo = mid; else hi = mid;
    }
    if (a->rows[i].completed) a->timeline[lo].jit_ms += a->rows[i].jit_ms;
  }
  free(starts);
  s->timeline = a->timeline;
  s->n_timeline = nb;
}

void dnt_jit_analysis_finish(struct dnt_jit_analysis *a) {
  if (a->finished) return;
  a->finished = 1;
  dnt_jit_summary *s = &a->summary;
  memset(s, 0, sizeof *s);
  s->methods = a->n;
  s->completions = a->completions;
  s->total_jit_ms = a->total_ms;
  s->r2r_entry_points = a->r2r_entry_points;
  s->trace_ms = dnt__clock_span_ms(&a->clock);
  for (size_t i = 0; i < a->n; i++) {
    const dnt_jit_method *m = &a->rows[i];
    if (i == 0 || m->start_ms < s->first_ms) s->first_ms = m->start_ms;
    if (i == 0 || m->start_ms > s->last_ms) s->last_ms = m->start_ms;
    s->il_bytes += m->il_size;
    if (!m->completed) {
      s->incomplete++;
      continue;
    }
    s->native_bytes += m->native_size;
    s->r2r_rejected += m->r2r_rejected;
    if (m->background) s->background++; else s->foreground++;
    int tier = m->tier >= 0 && m->tier < DNT_JIT_TIERS ? m->tier : DNT_JIT_TIER_UNKNOWN;
    s->tier_count[tier]++;
    s->tier_ms[tier] += m->jit_ms;
  }
  build_timeline(a, s);
}

const dnt_jit_method *dnt_jit_list(const struct dnt_jit_analysis *a, size_t *n) {
  *n = a->n;
  return a->rows;
}

const dnt_jit_summary *dnt_jit_get_summary(const struct dnt_jit_analysis *a) { return &a->summary; }

const char *dnt_jit_tier_name(int tier) {
  static const char *const names[DNT_JIT_TIERS] = {"Unknown", "MinOptJitted", "Optimized", "QuickJitted",
                                                   "OptimizedTier1", "OptimizedTier1OSR", "QuickJittedInstrumented",
                                                   "OptimizedTier1Instrumented"};
  return tier >= 0 && tier < DNT_JIT_TIERS ? names[tier] : "Unknown";
}
