/* GCs paired from the runtime's events, by the rules of TraceEvent's GC analysis
 * (microsoft/perfview, src/TraceEvent/Computers/TraceManagedProcess.cs: the GC callbacks of
 * TraceLoadedDotNetRuntime, TraceGarbageCollector.GetCurrentGC, TraceGC.OnEnd and the size
 * getters), so that dntrace's numbers are PerfView's. The rules, event by event (t: the event's
 * time; "the current GC": the last GC begun if it is not complete, else the background GC in
 * progress, else none):
 *
 *   GCSuspendEEBegin  Reason SuspendForGC (1) remembers its thread as the GC's suspender,
 *                     SuspendForGCPrep (6) as the background GC's; both note t as the suspension's
 *                     start. Any other reason only remembers its thread as "other".
 *   GCSuspendEEEnd    only on one of those two threads: notes t as the suspension's end, and during
 *                     a background GC adds the suspension to that GC's suspend time.
 *   GCStart           begins a GC when a suspension is under way (GC's or other) and its Count is
 *                     not the last GC's (the runtime can log a GC's start twice). Its pause starts
 *                     at the suspension's start, and its suspend time is that suspension's length;
 *                     except for the ephemeral GC a background GC starts with (a NonConcurrent GC
 *                     while the last one, a background GC, is incomplete) and for PMFullGC, whose
 *                     pause starts at the GCStart itself. A background GC's pause begins as its
 *                     suspend time.
 *   GCEnd             the current GC's duration is GCStart to GCEnd.
 *   GCHeapStats       the current GC's sizes; a background GC ends here (it never restarts the
 *                     runtime at its end).
 *   GCRestartEEEnd    only on one of the two suspending threads: for a background GC the pause
 *                     grows by this suspension (from its start, or from the GC's pause start when
 *                     the background GC's own thread did not suspend); for any other GC the pause
 *                     is its pause start to t, and the GC is complete if its GCHeapStats came.
 *                     Then no suspension is under way.
 *   GCAllocationTick  allocated bytes, small or large, charged to the next GCHeapStats' GC.
 *   GCPerHeapHistory  (64-bit traces) each heap's sizes before the GC, for the current GC.
 *   GCGlobalHeapHistory  the number of heaps.
 *
 * Sizes (MB are 10^6 bytes, as TraceEvent's): after = gen0+gen1+gen2+LOH+POH of GCHeapStats,
 * promoted likewise (TraceEvent 3.2.8, the oracle of tests/runtime/test-gc.c, counts the POH; older
 * sources stopped at the LOH). Before: the per-heap histories' SizeBefore summed over heaps and
 * generations when there are any; else estimated as TraceEvent does, from the
 * previous GC with GCHeapStats (gen0: the larger of its gen0 and the allocation ticks since; LOH:
 * the larger of its and this GC's), never from the trace's first GC. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"


enum {
  EV_GC_START = 1,
  EV_GC_END = 2,
  EV_RESTART_EE_END = 3,
  EV_HEAP_STATS = 4,
  EV_SUSPEND_EE_END = 8,
  EV_SUSPEND_EE_BEGIN = 9,
  EV_ALLOCATION_TICK = 10,
  EV_PER_HEAP_HISTORY = 204,
  EV_GLOBAL_HEAP_HISTORY = 205
};

enum { SUSPEND_FOR_GC = 1, SUSPEND_FOR_GC_PREP = 6 };
enum { REASON_INDUCED = 1, REASON_INDUCED_NOT_FORCED = 7, REASON_PM_FULL_GC = 12 };

#define NO_THREAD (-1)
#define MB 1000000.0

/* A GC event as it arrived, with the few numbers its handler reads, held until it can be handled
 * in time order (see gc_on_event). */
struct pending {
  struct dnt__held_key key;
  int64_t tid;
  uint32_t id;
  double v[11];
};
#define PENDING_MAX 65536 /* handled early past this many (a trace without sequence points) */

struct dnt_gc_analysis {
  const struct dnt_schema *schema;
  struct dnt__layouts layouts; /* the schema's layouts of the events read, remembered */
  struct dnt__held held; /* of struct pending */
  dnt_record rec;
  struct dnt__clock clock;
  int failed;
  /* the GCs, in the order they began */
  dnt_gc *gcs;
  size_t n, cap;
  /* TraceEvent's per-process state */
  int64_t suspend_tid_gc, suspend_tid_bgc, suspend_tid_other;
  double suspend_ms, suspend_end_ms;
  long current_bgc, last_completed; /* indices, -1: none */
  double alloc_tick_mb[2], alloc_tick_at_last_gc[2];
  int has_alloc_ticks;
  uint32_t heaps;
  int finished;
  dnt_gc_summary summary;
};

struct dnt_gc_analysis *dnt_gc_analysis_new(const struct dnt_schema *schema) {
  struct dnt_gc_analysis *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->schema = schema;
  dnt_record_init(&a->rec);
  a->suspend_tid_gc = a->suspend_tid_bgc = a->suspend_tid_other = NO_THREAD;
  a->suspend_ms = a->suspend_end_ms = -1;
  a->current_bgc = a->last_completed = -1;
  dnt__held_init(&a->held, sizeof(struct pending), PENDING_MAX);
  return a;
}

void dnt_gc_analysis_free(struct dnt_gc_analysis *a) {
  if (!a) return;
  dnt_record_release(&a->rec);
  dnt__held_release(&a->held);
  free(a->gcs);
  free(a);
}

int dnt_gc_analysis_failed(const struct dnt_gc_analysis *a) { return a->failed ? -ENOMEM : 0; }

static int gc_on_event(void *ud, const ntr_event *ev);
static int gc_on_sequence_point(void *ud, const ntr_sequence_point *sp);
static int gc_on_trace(void *ud, const ntr_trace *t);

void dnt_gc_analysis_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = gc_on_trace;
  cb->on_event = gc_on_event;
  cb->on_sequence_point = gc_on_sequence_point;
}

static int gc_on_trace(void *ud, const ntr_trace *t) {
  struct dnt_gc_analysis *a = ud;
  dnt__clock_on_trace(&a->clock, t);
  return 0;
}

static double num(const struct dnt_gc_analysis *a, const char *name, double dflt) {
  double v;
  return dnt_record_num(&a->rec, name, &v) == 0 ? v : dflt;
}

/* TraceGarbageCollector.GetCurrentGC */
static dnt_gc *current_gc(struct dnt_gc_analysis *a) {
  if (a->n == 0) return NULL;
  if (!a->gcs[a->n - 1].complete) return &a->gcs[a->n - 1];
  if (a->current_bgc >= 0) return &a->gcs[a->current_bgc];
  return NULL;
}

static void complete(struct dnt_gc_analysis *a, dnt_gc *gc) {
  gc->complete = 1;
  a->last_completed = gc - a->gcs;
}

/* TraceEvent's AddConcurrentPauseTime */
static void add_concurrent_pause(struct dnt_gc_analysis *a, dnt_gc *gc, double t) {
  if (a->suspend_tid_bgc > 0)
    gc->pause_ms += t - a->suspend_ms;
  else
    gc->pause_ms = t - gc->pause_start_ms;
}

static void on_suspend_begin(struct dnt_gc_analysis *a, const struct pending *e, double t) {
  uint32_t reason = dnt__u32_of(e->v[0]);
  if (reason == SUSPEND_FOR_GC) {
    a->suspend_tid_gc = e->tid;
  } else if (reason == SUSPEND_FOR_GC_PREP) {
    a->suspend_tid_bgc = e->tid;
  } else {
    a->suspend_tid_other = e->tid; /* a debugger, a thread abort...: not a GC's pause */
    return;
  }
  a->suspend_ms = t;
}

static void on_suspend_end(struct dnt_gc_analysis *a, int64_t tid, double t) {
  if (tid != a->suspend_tid_bgc && tid != a->suspend_tid_gc) return;
  if (a->suspend_tid_bgc > 0 && a->current_bgc >= 0) a->gcs[a->current_bgc].suspend_ms += t - a->suspend_ms;
  a->suspend_end_ms = t;
}

static void on_restart_end(struct dnt_gc_analysis *a, int64_t tid, double t) {
  if (tid == a->suspend_tid_other) a->suspend_tid_other = NO_THREAD;
  if (tid != a->suspend_tid_bgc && tid != a->suspend_tid_gc) return;
  dnt_gc *gc = current_gc(a);
  if (gc) {
    if (gc->type == DNT_GC_BACKGROUND) {
      add_concurrent_pause(a, gc, t);
    } else if (gc->duration_ms == 0) {
      /* no GCEnd before the restart: TraceEvent takes it for a concurrent GC of .NET 2.0, and
       * lets GCHeapStats end it */
      gc->concurrent_20 = 1;
      add_concurrent_pause(a, gc, t);
    } else {
      gc->pause_ms = t - gc->pause_start_ms;
      if (gc->has_heap_stats) complete(a, gc);
    }
  }
  a->suspend_ms = -1;
  a->suspend_tid_bgc = a->suspend_tid_gc = NO_THREAD;
}

static int on_gc_start(struct dnt_gc_analysis *a, const struct pending *e, double t) {
  uint32_t count = dnt__u32_of(e->v[0]);
  if (!(a->suspend_tid_gc > 0 || a->suspend_tid_other > 0)) return 0; /* began before the trace */
  if (a->n > 0 && a->gcs[a->n - 1].number == count) return 0;      /* logged twice */
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 64;
    dnt_gc *g = realloc(a->gcs, cap * sizeof *g);
    if (!g) return -ENOMEM;
    a->gcs = g;
    a->cap = cap;
  }
  dnt_gc gc;
  memset(&gc, 0, sizeof gc);
  gc.number = count;
  gc.generation = dnt__int_of(e->v[1], 2);
  if (gc.generation < 0 || gc.generation > 2) gc.generation = 2; /* a hostile trace: keep indices sane */
  gc.reason = dnt__u32_of(e->v[2]);
  gc.type = dnt__int_of(e->v[3], -1);
  const dnt_gc *last = a->n ? &a->gcs[a->n - 1] : NULL;
  int ephemeral_at_bgc_start = last && last->type == DNT_GC_BACKGROUND && !last->complete &&
                               gc.type == DNT_GC_NONCONCURRENT;
  if (ephemeral_at_bgc_start || gc.reason == REASON_PM_FULL_GC) {
    gc.pause_start_ms = t;
    if (gc.reason == REASON_PM_FULL_GC) {
      dnt_gc *cur = current_gc(a); /* the gen1 GC of provisional mode ends with this one's start */
      if (cur) complete(a, cur);
    }
  } else {
    gc.pause_start_ms = a->suspend_ms;
    if (a->suspend_end_ms == -1) a->suspend_end_ms = t;
    gc.suspend_ms = a->suspend_end_ms - a->suspend_ms;
  }
  gc.start_ms = t;
  if (gc.type == DNT_GC_BACKGROUND) {
    a->current_bgc = (long)a->n;
    gc.pause_ms = gc.suspend_ms;
  }
  a->gcs[a->n++] = gc;
  return 0;
}

static void on_gc_end(struct dnt_gc_analysis *a, double t) {
  dnt_gc *gc = current_gc(a);
  if (gc) gc->duration_ms = t - gc->start_ms;
}

static void on_heap_stats(struct dnt_gc_analysis *a, const struct pending *e) {
  dnt_gc *gc = current_gc(a);
  if (gc) {
    for (int g = 0; g < DNT_GC_HEAPS; g++) {
      gc->size_after[g] = dnt__u64_of(e->v[g]);
      gc->promoted[g] = dnt__u64_of(e->v[DNT_GC_HEAPS + g]);
    }
    gc->pinned_objects = dnt__u32_of(e->v[2 * DNT_GC_HEAPS]);
    gc->has_heap_stats = 1;
    if (a->has_alloc_ticks)
      for (int k = 0; k < 2; k++) gc->alloc_tick_mb[k] = a->alloc_tick_mb[k] - a->alloc_tick_at_last_gc[k];
    if (gc->type == DNT_GC_BACKGROUND && a->current_bgc >= 0) { /* where a background GC ends */
      complete(a, &a->gcs[a->current_bgc]);
      a->current_bgc = -1;
    }
    if (gc->concurrent_20) complete(a, gc);
  }
  a->alloc_tick_at_last_gc[0] = a->alloc_tick_mb[0];
  a->alloc_tick_at_last_gc[1] = a->alloc_tick_mb[1];
}

static void on_per_heap_history(struct dnt_gc_analysis *a, const struct pending *e) {
  dnt_gc *gc = current_gc(a);
  if (!gc && a->heaps > 1 && a->last_completed >= 0) gc = &a->gcs[a->last_completed];
  if (!gc) return;
  for (int g = 0; g < DNT_GC_HEAPS; g++) gc->size_before[g] += e->v[g];
  gc->per_heap_histories++;
}

/* One event, in time order. */
static int handle(void *ud, void *event) {
  struct dnt_gc_analysis *a = ud;
  const struct pending *e = event;
  double t = dnt__clock_ms(&a->clock, e->key.ts);
  switch (e->id) {
  case EV_SUSPEND_EE_BEGIN: on_suspend_begin(a, e, t); break;
  case EV_SUSPEND_EE_END: on_suspend_end(a, e->tid, t); break;
  case EV_RESTART_EE_END: on_restart_end(a, e->tid, t); break;
  case EV_GC_START: return on_gc_start(a, e, t);
  case EV_GC_END: on_gc_end(a, t); break;
  case EV_HEAP_STATS: on_heap_stats(a, e); break;
  case EV_ALLOCATION_TICK:
    a->has_alloc_ticks = 1;
    a->alloc_tick_mb[e->v[1] == 0 ? 0 : 1] += e->v[0] / MB;
    break;
  case EV_PER_HEAP_HISTORY: on_per_heap_history(a, e); break;
  case EV_GLOBAL_HEAP_HISTORY:
    if (e->v[0] > 0 && e->v[0] < 1e6) a->heaps = (uint32_t)e->v[0];
    break;
  }
  return 0;
}

/* The events held so far, in time order (then in arrival order). */
static int flush(struct dnt_gc_analysis *a) {
  int rc = dnt__held_flush(&a->held, handle, a);
  if (rc) a->failed = 1;
  return rc;
}

static int gc_on_sequence_point(void *ud, const ntr_sequence_point *sp) {
  (void)sp;
  return flush(ud) ? 1 : 0;
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

/* The numbers each handler reads, by name, into e->v (see the handlers for their places). */
static void take(struct dnt_gc_analysis *a, struct pending *e) {
  static const char *const heap_stats[11] = {
      "GenerationSize0",    "GenerationSize1",    "GenerationSize2",    "GenerationSize3",
      "GenerationSize4",    "TotalPromotedSize0", "TotalPromotedSize1", "TotalPromotedSize2",
      "TotalPromotedSize3", "TotalPromotedSize4", "PinnedObjectCount"};
  static const char *const gc_start[4] = {"Count", "Depth", "Reason", "Type"};
  static const char *const before[5] = {"Gen0SizeBefore", "Gen1SizeBefore", "Gen2SizeBefore", "Gen3SizeBefore",
                                        "Gen4SizeBefore"};
  static const char *const reason[1] = {"Reason"}, *const heaps[1] = {"NumHeaps"};
  const char *const *names = NULL;
  size_t n = 0;
  switch (e->id) {
  case EV_SUSPEND_EE_BEGIN: names = reason, n = 1; break;
  case EV_GC_START: names = gc_start, n = 4; break;
  case EV_HEAP_STATS: names = heap_stats, n = 11; break;
  case EV_PER_HEAP_HISTORY: names = before, n = 5; break;
  case EV_GLOBAL_HEAP_HISTORY: names = heaps, n = 1; break;
  default: return;
  }
  for (size_t k = 0; k < n; k++) e->v[k] = num(a, names[k], 0);
  if (e->id == EV_PER_HEAP_HISTORY) /* the manifest's layout: a struct per generation */
    for (size_t k = 0; k < 5; k++) {
      char path[32];
      snprintf(path, sizeof path, "Values[%zu].SizeBefore", k);
      double v;
      if (dnt_record_num(&a->rec, path, &v) == 0) e->v[k] = v;
    }
}

/* Events come thread by thread within a block, not in time order (a server GC's GCStart, on a GC
 * thread, arrives after the RestartEE of the thread that suspended for it): like TraceEvent, which
 * sorts them, they are held until the next sequence point (when the runtime has flushed every
 * thread's buffer) and handled in time order. Only the GC events are held. */
static int gc_on_event(void *ud, const ntr_event *ev) {
  struct dnt_gc_analysis *a = ud;
  const ntr_metadata *md = ev->metadata;
  dnt__clock_see(&a->clock, ev->timestamp);
  if (!md || strcmp(md->provider, DNT__RUNTIME_PROVIDER) != 0) return 0;
  switch (md->event_id) {
  case EV_GC_START: case EV_GC_END: case EV_RESTART_EE_END: case EV_HEAP_STATS: case EV_SUSPEND_EE_END:
  case EV_SUSPEND_EE_BEGIN: case EV_ALLOCATION_TICK: case EV_GLOBAL_HEAP_HISTORY: break;
  case EV_PER_HEAP_HISTORY: break;
  default: return 0;
  }
  double tick[2] = {0, 0};
  if (md->event_id == EV_ALLOCATION_TICK) {
    /* the one frequent GC event, read by hand: its first fields have the same places in every
     * version (AllocationAmount and AllocationKind, 32 bits each; from V2 ClrInstanceID, 16 bits,
     * then AllocationAmount64), and decoding the whole payload by its layout (the type's name
     * among it) took most of gc's time on an allocation-heavy trace */
    const uint8_t *p = ev->payload;
    size_t n = ev->payload_size;
    if (n >= 4) tick[0] = (double)le32(p);
    if (n >= 8) tick[1] = (double)le32(p + 4);
    if (md->version >= 2 && n >= 18) tick[0] = (double)le64(p + 10);
  } else {
    uint32_t nfields;
    const ntr_field *f = dnt__layout(&a->layouts, a->schema, md, &nfields);
    if (!f) return 0;
    /* a short or odd payload keeps the fields decoded before the fault; a missing one reads as 0 */
    if (dnt_record_decode_layout(&a->rec, f, nfields, dnt__clock_ptr(&a->clock), ev->payload, ev->payload_size) ==
        NTR_ENOMEM) {
      a->failed = 1;
      return 1;
    }
  }
  struct pending *e = dnt__held_slot(&a->held, ev->timestamp, handle, a);
  if (!e) {
    a->failed = 1;
    return 1;
  }
  dnt__held_keep(&a->held);
  e->tid = (int64_t)ev->thread_id;
  e->id = md->event_id;
  if (e->id == EV_ALLOCATION_TICK) {
    e->v[0] = tick[0];
    e->v[1] = tick[1];
  } else {
    take(a, e);
  }
  return 0;
}

/* ---- after the trace ---- */

/* TraceGC.GetGenSizeBeforeMB (POH estimated like gen1 and gen2) */
static double gen_size_before_mb(const struct dnt_gc_analysis *a, size_t index, int gen) {
  const dnt_gc *gc = &a->gcs[index];
  if (gc->per_heap_histories > 0) return gc->size_before[gen] / MB;
  double gen0 = gen == DNT_GC_GEN0 ? gc->alloc_tick_mb[0] : 0;
  if (index == 0) return gen0;
  const dnt_gc *prev = NULL;
  for (size_t j = index - 1;; j--) {
    if (j == 0) return 0; /* as TraceEvent: the first GC's sizes are never the estimate */
    if (a->gcs[j].has_heap_stats) {
      prev = &a->gcs[j];
      break;
    }
  }
  if (gen == DNT_GC_GEN0) return fmax((double)prev->size_after[DNT_GC_GEN0] / MB, gen0);
  if (gen == DNT_GC_LOH && gc->has_heap_stats)
    return (double)(prev->size_after[DNT_GC_LOH] > gc->size_after[DNT_GC_LOH] ? prev->size_after[DNT_GC_LOH]
                                                                                : gc->size_after[DNT_GC_LOH]) / MB;
  return (double)prev->size_after[gen] / MB;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The 99th percentile by nearest rank: the smallest pause at least 99% of them do not exceed. */
static double p99(const struct dnt_gc_analysis *a, int gen, double *scratch) {
  size_t n = 0;
  for (size_t i = 0; i < a->n; i++)
    if (a->gcs[i].complete && (gen < 0 || a->gcs[i].generation == gen)) scratch[n++] = a->gcs[i].pause_ms;
  if (n == 0) return 0;
  qsort(scratch, n, sizeof *scratch, cmp_double);
  size_t rank = (size_t)ceil(0.99 * (double)n);
  return scratch[rank ? rank - 1 : 0];
}

void dnt_gc_analysis_finish(struct dnt_gc_analysis *a) {
  if (a->finished) return;
  a->finished = 1;
  flush(a); /* those after the last sequence point */
  dnt_gc_summary *s = &a->summary;
  memset(s, 0, sizeof *s);
  s->heaps = a->heaps;
  s->trace_ms = dnt__clock_span_ms(&a->clock);
  double delta_mb = 0, prev_after = -1;
  for (size_t i = 0; i < a->n; i++) {
    dnt_gc *gc = &a->gcs[i];
    if (!gc->complete) {
      s->incomplete++;
      continue;
    }
    gc->heap_before_mb = 0;
    for (int g = 0; g < DNT_GC_HEAPS; g++) gc->heap_before_mb += gen_size_before_mb(a, i, g);
    gc->heap_after_mb = gc->promoted_mb = 0;
    for (int g = 0; g < DNT_GC_HEAPS; g++) {
      gc->heap_after_mb += (double)gc->size_after[g] / MB;
      gc->promoted_mb += (double)gc->promoted[g] / MB;
    }
    if (prev_after >= 0 && gc->heap_before_mb > prev_after) delta_mb += gc->heap_before_mb - prev_after;
    prev_after = gc->heap_after_mb;
    dnt_gc_gen_stats *gs[2] = {&s->gen[gc->generation], &s->all};
    for (int k = 0; k < 2; k++) {
      gs[k]->count++;
      gs[k]->induced += gc->reason == REASON_INDUCED || gc->reason == REASON_INDUCED_NOT_FORCED;
      gs[k]->total_pause_ms += gc->pause_ms;
      gs[k]->total_promoted_mb += gc->promoted_mb;
      if (gc->pause_ms > gs[k]->max_pause_ms) gs[k]->max_pause_ms = gc->pause_ms;
    }
  }
  double *scratch = a->n ? malloc(a->n * sizeof *scratch) : NULL;
  if (a->n && !scratch) a->failed = 1;
  for (int g = -1; g < 3; g++) {
    dnt_gc_gen_stats *gs = g < 0 ? &s->all : &s->gen[g];
    if (gs->count) gs->mean_pause_ms = gs->total_pause_ms / (double)gs->count;
    if (scratch) gs->p99_pause_ms = p99(a, g, scratch);
  }
  free(scratch);
  if (s->trace_ms > 0) s->paused_pct = s->all.total_pause_ms * 100.0 / s->trace_ms;
  if (a->has_alloc_ticks) {
    s->allocated_mb = a->alloc_tick_mb[0] + a->alloc_tick_mb[1];
    s->alloc_source = "GCAllocationTick";
  } else if (s->all.count > 1) {
    s->allocated_mb = delta_mb;
    s->alloc_source = "heap-size deltas";
  } else {
    s->alloc_source = "none";
  }
  if (s->trace_ms > 0) s->alloc_rate_mb_s = s->allocated_mb * 1000.0 / s->trace_ms;
}

const dnt_gc *dnt_gc_list(const struct dnt_gc_analysis *a, size_t *n) {
  *n = a->n;
  return a->gcs;
}

const dnt_gc_summary *dnt_gc_get_summary(const struct dnt_gc_analysis *a) { return &a->summary; }
