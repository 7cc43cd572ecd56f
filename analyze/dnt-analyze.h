/* analyze/: analyses of the runtime's own events in a trace, PerfView-style, built to be fed by the
 * nettrace parser as the trace streams (memory grows with what is reported, never with the number
 * of events). `gc` is the first (PerfView's GCStats); allocations, exceptions, locks, JIT and the
 * thread pool are meant to follow the same shape: an object fed ntr callbacks, a finish step, the
 * results as plain structs, and views that write to the FILE * they are given.
 *
 * One public header; the library never prints to a stream it was not given and never exits.
 * Payloads are decoded by name through trace/ (the runtime's events carry no field list, so their
 * layouts come from a dnt_schema: data/runtime-events.xml). */
#ifndef DNT_ANALYZE_H
#define DNT_ANALYZE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dnt-trace.h"
#include "ntr.h"

/* ============================================================================================== */
/* Garbage collections: one row per GC, paired from the runtime's GC events the way TraceEvent's
 * TraceLoadedDotNetRuntime/TraceGC pair them (analyze/gc.c states every rule), then a summary per
 * generation as PerfView's GCStats shows it. */

enum dnt_gc_type { DNT_GC_NONCONCURRENT = 0, DNT_GC_BACKGROUND = 1, DNT_GC_FOREGROUND = 2 };

/* The GC's generations and the large and pinned object heaps, in GCHeapStats' order. */
enum { DNT_GC_GEN0, DNT_GC_GEN1, DNT_GC_GEN2, DNT_GC_LOH, DNT_GC_POH, DNT_GC_HEAPS };

typedef struct dnt_gc {
  uint32_t number;           /* the runtime's GC count (GCStart's Count) */
  int generation;            /* the generation condemned (GCStart's Depth): 0, 1 or 2 */
  int type;                  /* enum dnt_gc_type */
  uint32_t reason;           /* GCStart's Reason (dnt_gc_reason_name) */
  int complete;              /* every event that ends it was seen (only these are reported) */
  double start_ms;           /* GCStart, ms since the trace's start */
  double duration_ms;        /* GCStart to GCEnd (0: no GCEnd) */
  double pause_start_ms;     /* when the threads began to be suspended for it */
  double pause_ms;           /* how long managed threads were stopped for it (a background GC:
                                only its suspensions, not its whole length) */
  double suspend_ms;         /* how long suspending them took */
  int has_heap_stats;        /* GCHeapStats seen: the sizes below are known */
  uint64_t size_after[DNT_GC_HEAPS];  /* bytes after the GC, per generation (POH: .NET 5+) */
  uint64_t promoted[DNT_GC_HEAPS];    /* bytes promoted (survived) */
  uint32_t pinned_objects;   /* GCHeapStats' PinnedObjectCount */
  double heap_before_mb;     /* gen0..POH before the GC, MB of 10^6 bytes (see gc.c) */
  double heap_after_mb;      /* gen0..POH after it */
  double promoted_mb;        /* gen0..POH promoted */
  /* private to gc.c */
  double alloc_tick_mb[2];   /* GCAllocationTick amounts since the previous GC: small, large */
  double size_before[DNT_GC_HEAPS]; /* GCPerHeapHistory SizeBefore summed over heaps */
  uint32_t per_heap_histories;
  int concurrent_20;         /* pause seen before GCEnd (TraceEvent's IsConcurrentGC) */
} dnt_gc;

/* Per generation (and all together) over the complete GCs. */
typedef struct dnt_gc_gen_stats {
  size_t count, induced;     /* induced: Reason Induced or InducedNotForced, as TraceEvent counts */
  double total_pause_ms, max_pause_ms, mean_pause_ms, p99_pause_ms;
  double total_promoted_mb;
} dnt_gc_gen_stats;

typedef struct dnt_gc_summary {
  dnt_gc_gen_stats gen[3], all;
  double trace_ms;           /* first to last event of the trace (any event) */
  double paused_pct;         /* all pauses over trace_ms, in % */
  double allocated_mb;       /* see alloc_source */
  double alloc_rate_mb_s;    /* allocated_mb over trace_ms */
  const char *alloc_source;  /* "GCAllocationTick" (the runtime's ~100 KB samples), "heap-size
                                deltas" (each GC's size before less the previous GC's size after),
                                or "none"; static string */
  size_t incomplete;         /* GCs begun in the trace but not finished in it (not in the rows) */
  uint32_t heaps;            /* GCGlobalHeapHistory's NumHeaps (0: not seen) */
} dnt_gc_summary;

struct dnt_gc_analysis;

/* A new analysis reading layouts from schema (borrowed: it must outlive the analysis). NULL when
 * out of memory. Free with dnt_gc_analysis_free (NULL is fine). */
struct dnt_gc_analysis *dnt_gc_analysis_new(const struct dnt_schema *schema);
void dnt_gc_analysis_free(struct dnt_gc_analysis *a);

/* The parser callbacks to feed it (ud: the analysis), for ntr_parser_new or an ntr_fanout. They
 * return nonzero only when out of memory; dnt_gc_analysis_failed says so afterwards. */
void dnt_gc_analysis_callbacks(ntr_callbacks *cb);
int dnt_gc_on_trace(void *a, const ntr_trace *t);
int dnt_gc_on_event(void *a, const ntr_event *ev);
int dnt_gc_on_sequence_point(void *a, const ntr_sequence_point *sp);
/* -ENOMEM once an allocation failed (sticky), else 0. */
int dnt_gc_analysis_failed(const struct dnt_gc_analysis *a);

/* Once the trace is read: the derived sizes of every GC, then the summary. Call once. */
void dnt_gc_analysis_finish(struct dnt_gc_analysis *a);

/* Every GC begun in the trace, complete or not, in the order they began; valid until the
 * analysis is freed. */
const dnt_gc *dnt_gc_list(const struct dnt_gc_analysis *a, size_t *n);
/* The summary (after dnt_gc_analysis_finish). */
const dnt_gc_summary *dnt_gc_get_summary(const struct dnt_gc_analysis *a);

/* "AllocSmall", "Induced", ...: TraceEvent's names of GCStart's Reason; "Reason(N)" beyond them
 * in buf (24 bytes, caller's). */
const char *dnt_gc_reason_name(uint32_t reason, char buf[24]);
/* "NonConcurrent", "Background", "Foreground", else "Type(N)" in buf. */
const char *dnt_gc_type_name(int type, char buf[24]);

/* The views: the rows (complete GCs), then the summary and the `top` longest pauses, as a text
 * table or as one JSON object. Write to fp; the caller checks fp for errors. */
void dnt_gc_write_text(FILE *fp, const struct dnt_gc_analysis *a, size_t top);
void dnt_gc_write_json(FILE *fp, const struct dnt_gc_analysis *a, size_t top);

/* ============================================================================================== */
/* Allocations: bytes and objects by type and by allocating stack, estimated from the runtime's
 * GCAllocationTick events (about one per 100 KB a heap allocates) or, on .NET 10, its randomized
 * AllocationSampled events, scaled as the runtime's design note says (analyze/allocs.c states the
 * rules). The stacks are a profile (profile/) weighed in bytes, so every profile writer draws the
 * allocation flame graph. */

struct dnt_profile;

/* Which events the estimates come from. */
enum dnt_allocs_source {
  DNT_ALLOCS_AUTO,   /* AllocationSampled when the trace has any, else GCAllocationTick */
  DNT_ALLOCS_TICK,   /* GCAllocationTick only */
  DNT_ALLOCS_SAMPLED /* AllocationSampled only */
};

typedef struct dnt_alloc_type {
  const char *name;          /* as the runtime names it ("System.Byte[]"); owned by the analysis */
  double bytes;              /* estimated bytes allocated */
  double objects;            /* estimated objects (0 when unknown: see objects_known) */
  uint64_t samples;          /* the events that named it */
  double large_bytes;        /* of bytes, on the large object heap (AllocationKind 1) */
  double pinned_bytes;       /* on the pinned object heap (AllocationKind 2) */
} dnt_alloc_type;

typedef struct dnt_allocs_summary {
  const char *source;        /* "AllocationSampled", "GCAllocationTick" or "none"; static string */
  double bytes, objects;     /* over every type */
  int objects_known;         /* objects are estimated (AllocationSampled, or ticks that all carry
                                ObjectSize: GCAllocationTick V4, .NET 10) */
  size_t types;
  uint64_t samples;          /* events of the source used */
  uint64_t tick_events, sampled_events; /* of each kind in the trace */
  double trace_ms;           /* first to last event of the trace (any event) */
} dnt_allocs_summary;

struct dnt_allocs_analysis;

/* A new analysis reading layouts from schema (borrowed: it must outlive the analysis). NULL when
 * out of memory. Free with dnt_allocs_analysis_free (NULL is fine). */
struct dnt_allocs_analysis *dnt_allocs_analysis_new(const struct dnt_schema *schema, enum dnt_allocs_source source);
void dnt_allocs_analysis_free(struct dnt_allocs_analysis *a);

/* The parser callbacks to feed it (ud: the analysis). They return nonzero only when out of
 * memory; dnt_allocs_analysis_failed says so afterwards. */
void dnt_allocs_analysis_callbacks(ntr_callbacks *cb);
int dnt_allocs_on_trace(void *a, const ntr_trace *t);
int dnt_allocs_on_thread(void *a, const ntr_thread *t);
int dnt_allocs_on_event(void *a, const ntr_event *ev);
int dnt_allocs_on_sequence_point(void *a, const ntr_sequence_point *sp);
/* -ENOMEM once an allocation failed (sticky), else 0. */
int dnt_allocs_analysis_failed(const struct dnt_allocs_analysis *a);

/* Once the trace is read: the source chosen, the types ranked, the stacks' frames named. Call
 * once; dnt_allocs_analysis_failed tells whether memory ran out. */
void dnt_allocs_analysis_finish(struct dnt_allocs_analysis *a);

/* After finish: the types of the source used, most bytes first (valid until the analysis is
 * freed), and the summary. */
const dnt_alloc_type *dnt_allocs_types(const struct dnt_allocs_analysis *a, size_t *n);
const dnt_allocs_summary *dnt_allocs_get_summary(const struct dnt_allocs_analysis *a);
/* After finish: the allocating stacks as a profile weighed in bytes (DNT_WEIGHT_BYTES), for the
 * profile writers (folded, speedscope, pprof, flame graph); owned by the analysis. */
const struct dnt_profile *dnt_allocs_profile(const struct dnt_allocs_analysis *a);

/* The views: the summary line, then the `top` types (or, by_stack, the `top` stacks with their
 * innermost frame of the program's own code), as text; or one JSON object with the types and the
 * stacks. Write to fp (the caller checks it for errors); 0, or -1 when out of memory. */
int dnt_allocs_write_text(FILE *fp, const struct dnt_allocs_analysis *a, size_t top, int by_stack);
int dnt_allocs_write_json(FILE *fp, const struct dnt_allocs_analysis *a, size_t top);

#endif
