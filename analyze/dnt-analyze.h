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
/* parts: DNT_GC_ALL (every GC, then the summary), DNT_GC_SUMMARY_FIRST (the summary, then every
 * GC: a live session's many rows would scroll it out of sight) or DNT_GC_SUMMARY_ONLY. */
enum { DNT_GC_ALL, DNT_GC_SUMMARY_FIRST, DNT_GC_SUMMARY_ONLY };
void dnt_gc_write_text(FILE *fp, const struct dnt_gc_analysis *a, size_t top, int parts);
void dnt_gc_write_json(FILE *fp, const struct dnt_gc_analysis *a, size_t top);

/* ============================================================================================== */
/* JIT compilation: one row per method compiled, paired from MethodJittingStarted and the
 * MethodLoad(Verbose) that ends it on the same thread, by the rules of TraceEvent's
 * TraceLoadedDotNetRuntime JIT callbacks (JITStats.LogJitStart / MethodComplete; analyze/jit.c
 * states them), then totals by tier, the slowest methods and a startup timeline. */

/* TraceEvent's OptimizationTier: MethodFlags bits 7-9 of a jitted method's load event. */
enum { DNT_JIT_TIER_UNKNOWN, DNT_JIT_TIER_MINOPT, DNT_JIT_TIER_OPTIMIZED, DNT_JIT_TIER_QUICK, DNT_JIT_TIER_TIER1,
       DNT_JIT_TIER_TIER1_OSR, DNT_JIT_TIER_QUICK_INSTRUMENTED, DNT_JIT_TIER_TIER1_INSTRUMENTED, DNT_JIT_TIERS };

typedef struct dnt_jit_method {
  uint64_t method_id, module_id;
  int64_t tid;               /* the thread that compiled it */
  char *name;                /* "Namespace.Name(args)" as TraceEvent names it ("" from a MethodLoad
                                without a start); owned by the analysis */
  uint32_t il_size;          /* MethodJittingStarted's MethodILSize (0 without a start) */
  uint32_t native_size;      /* the load event's MethodSize */
  uint32_t flags;            /* the load event's MethodFlags (tier and extent bits cleared) */
  int tier;                  /* DNT_JIT_TIER_* (dnt_jit_tier_name) */
  uint64_t rejit_id;         /* the code version: 0 is the method's first (foreground) version */
  double start_ms;           /* JittingStarted (else the load event), ms since the trace's start */
  double jit_ms;             /* JittingStarted to the load event on the same thread */
  int completed;             /* how many load events ended it (TraceEvent's Completed) */
  int background;            /* compiled on tiering's background thread: a later code version that
                                is not on-stack replacement (TraceEvent's CompilationThreadKind) */
  int r2r_rejected;          /* MethodFlags' ReadyToRunRejectedPrecompiledCode (0x40) */
  /* private to jit.c */
  long prev_open;            /* the thread's previous method still without its load event */
} dnt_jit_method;

/* Methods compiled per 100 ms of trace, for the non-empty buckets only. */
typedef struct dnt_jit_bucket {
  double start_ms;           /* the bucket's start: a multiple of 100 ms since the trace's start */
  size_t methods;            /* methods whose compilation started in it */
  double jit_ms;             /* their JIT time */
} dnt_jit_bucket;

typedef struct dnt_jit_summary {
  size_t methods;            /* rows: every compilation begun (TraceEvent's JIT.Methods.Count) */
  size_t completions;        /* load events that ended one (TraceEvent's JITStats.Count) */
  size_t incomplete;         /* rows without a load event (begun before the trace ended) */
  size_t foreground, background;
  size_t r2r_rejected;       /* methods jitted though ReadyToRun code existed (rejected) */
  size_t r2r_entry_points;   /* R2RGetEntryPoint events: precompiled methods used (needs the
                                CompilationDiagnostic keyword) */
  uint64_t il_bytes, native_bytes;
  double total_jit_ms;       /* the sum of the completions' JIT times (TraceEvent's TotalCpuTimeMSec) */
  size_t tier_count[DNT_JIT_TIERS];
  double tier_ms[DNT_JIT_TIERS];
  double trace_ms;           /* first to last event of the trace (any event) */
  double first_ms, last_ms;  /* the first and last compilations' starts */
  const dnt_jit_bucket *timeline; /* n_timeline buckets in time order; valid until freed */
  size_t n_timeline;
} dnt_jit_summary;

struct dnt_jit_analysis;

/* A new analysis reading layouts from schema (borrowed: it must outlive the analysis). NULL when
 * out of memory. Free with dnt_jit_analysis_free (NULL is fine). */
struct dnt_jit_analysis *dnt_jit_analysis_new(const struct dnt_schema *schema);
void dnt_jit_analysis_free(struct dnt_jit_analysis *a);
/* The parser callbacks to feed it (ud: the analysis). They return nonzero only when out of memory;
 * dnt_jit_analysis_failed says so afterwards. */
void dnt_jit_analysis_callbacks(ntr_callbacks *cb);
/* -ENOMEM once an allocation failed (sticky), else 0. */
int dnt_jit_analysis_failed(const struct dnt_jit_analysis *a);
/* Once the trace is read: the summary and the timeline. Call once. */
void dnt_jit_analysis_finish(struct dnt_jit_analysis *a);
/* Every compilation begun, in the order they began; valid until the analysis is freed. */
const dnt_jit_method *dnt_jit_list(const struct dnt_jit_analysis *a, size_t *n);
const dnt_jit_summary *dnt_jit_get_summary(const struct dnt_jit_analysis *a);
/* "QuickJitted", "OptimizedTier1", ... (TraceEvent's names); static strings. */
const char *dnt_jit_tier_name(int tier);
/* The views: the methods, then the summary, the `top` slowest and the timeline, as text or as one
 * JSON object. Write to fp; the caller checks fp for errors. */
void dnt_jit_write_text(FILE *fp, const struct dnt_jit_analysis *a, size_t top);
void dnt_jit_write_json(FILE *fp, const struct dnt_jit_analysis *a, size_t top);

/* ============================================================================================== */
/* The thread pool: worker and IO thread counts over time, hill climbing's adjustments with their
 * reasons, starvation, blocking, queue traffic, from the runtime's ThreadPool keyword (0x10000)
 * events (analyze/threadpool.c). TraceEvent has no analysis of these: the counts are the events'
 * own fields. */

/* ThreadPoolWorkerThreadAdjustmentAdjustment's Reason (the runtime's ThreadAdjustmentReasonMap).
 * Also read: System.Runtime's threadpool-queue-length and threadpool-completed-items-count
 * EventCounters, for the queue. */
enum { DNT_TP_WARMUP, DNT_TP_INITIALIZING, DNT_TP_RANDOM_MOVE, DNT_TP_CLIMBING_MOVE, DNT_TP_CHANGE_POINT,
       DNT_TP_STABILIZING, DNT_TP_STARVATION, DNT_TP_THREAD_TIMED_OUT, DNT_TP_COOPERATIVE_BLOCKING, DNT_TP_REASONS };

/* One adjustment of hill climbing (its thread count goal). */
typedef struct dnt_tp_adjustment {
  double ms;                 /* since the trace's start */
  uint32_t new_count;        /* NewWorkerThreadCount */
  uint32_t reason;           /* DNT_TP_* (dnt_tp_reason_name) */
  double throughput;         /* AverageThroughput, work items per second */
} dnt_tp_adjustment;

/* The pool once per second of trace (the last value seen up to the end of that second, or the
 * previous second's). */
typedef struct dnt_tp_second {
  double start_ms;
  uint32_t workers;          /* ActiveWorkerThreadCount of the last worker Start/Stop/Wait */
  uint32_t workers_max;      /* the most seen within the second */
  uint32_t goal;             /* the last adjustment's NewWorkerThreadCount (0: none yet) */
  uint32_t io_threads;       /* the last IOThreadCount (0: none seen) */
  uint64_t enqueued, dequeued; /* ThreadPoolEnqueue / Dequeue events within the second */
  uint32_t adjustments;      /* adjustments within the second */
  double queue_length;       /* System.Runtime's threadpool-queue-length counter, its last value
                                (-1: none yet) */
  double completed;          /* threadpool-completed-items-count: each increment spread over the
                                seconds of the interval it counts (the counter's own IntervalSec
                                before its timestamp), so that a once-a-second counter does not
                                alias onto the seconds' boundaries (21924, 0, 41277, 0...) */
} dnt_tp_second;

typedef struct dnt_tp_summary {
  size_t events;             /* thread-pool events read */
  size_t worker_starts, worker_stops, worker_waits, io_creates, io_retires;
  uint32_t workers_first, workers_last, workers_min, workers_max; /* ActiveWorkerThreadCount */
  int has_workers;
  uint32_t io_max;
  int has_io;
  size_t adjustments, by_reason[DNT_TP_REASONS + 1]; /* the last: unknown reasons */
  uint32_t goal_first, goal_last, goal_max;           /* NewWorkerThreadCount */
  /* starvation: the adjustments for Starvation, and the goal from just before the first of them
   * to its highest after it */
  size_t starvation;
  uint32_t starvation_from, starvation_to;
  double starvation_first_ms, starvation_last_ms;
  size_t blocking;           /* CooperativeBlocking adjustments (threads added for blocked ones) */
  uint64_t enqueued, dequeued;
  uint32_t working_max;      /* ThreadPoolWorkingThreadCount's most (0: none seen) */
  uint32_t min_threads, max_threads; /* ThreadPoolMinMaxThreads' workers (0: not seen) */
  /* System.Runtime's EventCounters, when the trace has them (the queue length is in no event of
   * the runtime provider since the portable thread pool of .NET 7) */
  int has_queue_length;
  double queue_length_max, queue_length_last;
  int has_completed;
  uint64_t completed;        /* work items completed (threadpool-completed-items-count summed) */
  double trace_ms;
  const dnt_tp_second *seconds; /* n_seconds, from the first thread-pool event's second */
  size_t n_seconds;
} dnt_tp_summary;

struct dnt_tp_analysis;

/* Like the JIT analysis's: schema borrowed; NULL when out of memory; free(NULL) is fine. */
struct dnt_tp_analysis *dnt_tp_analysis_new(const struct dnt_schema *schema);
void dnt_tp_analysis_free(struct dnt_tp_analysis *a);
void dnt_tp_analysis_callbacks(ntr_callbacks *cb);
int dnt_tp_analysis_failed(const struct dnt_tp_analysis *a);
/* Once the trace is read. Call once. */
void dnt_tp_analysis_finish(struct dnt_tp_analysis *a);
/* Every adjustment in time order; valid until the analysis is freed. */
const dnt_tp_adjustment *dnt_tp_adjustments(const struct dnt_tp_analysis *a, size_t *n);
const dnt_tp_summary *dnt_tp_get_summary(const struct dnt_tp_analysis *a);
/* "Warmup", "Starvation", ...; "Reason(N)" beyond them in buf (24 bytes, caller's). */
const char *dnt_tp_reason_name(uint32_t reason, char buf[24]);
/* The views: the summary (starvation and blocking called out), the adjustments (the `top` last
 * when there are more) and the pool per second, as text or as one JSON object. */
void dnt_tp_write_text(FILE *fp, const struct dnt_tp_analysis *a, size_t top);
void dnt_tp_write_json(FILE *fp, const struct dnt_tp_analysis *a, size_t top);
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

/* The allocation profile's leaf frame: the type allocated, "Type System.String" (PerfView's GC
 * Heap Alloc view ends its stacks so). */
#define DNT_ALLOC_TYPE_FRAME "Type "

typedef struct dnt_alloc_type {
  const char *name;          /* as the runtime names it ("System.Byte[]"); owned by the analysis */
  double bytes;              /* estimated bytes allocated */
  double objects;            /* estimated objects (0 when unknown: see objects_known) */
  uint64_t samples;          /* the events that named it */
  double large_bytes;        /* of bytes, on the large object heap (AllocationKind 1) */
  double pinned_bytes;       /* on the pinned object heap (AllocationKind 2) */
  double large_objects, pinned_objects; /* of objects, on those heaps */
  uint64_t large_samples, pinned_samples;
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
/* Whether an allocation made by an async task is put under the stack that made the task, as the
 * profile's samples are (dnt_profile_set_tasks; on by default, where the trace has the task
 * library's events). Before the events. */
void dnt_allocs_analysis_stitch(struct dnt_allocs_analysis *a, int on);

/* The parser callbacks to feed it (ud: the analysis). They return nonzero only when out of
 * memory; dnt_allocs_analysis_failed says so afterwards. */
void dnt_allocs_analysis_callbacks(ntr_callbacks *cb);
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
/* What exceptions and locks share: the stacks of the events they count, named through the trace's
 * method table and rundown (profile/), merged across threads, heaviest first. */

struct dnt_profile; /* dnt-profile.h */

typedef struct dnt_analysis_stack {
  const char **frames; /* function names, leaf first; owned by the analysis */
  size_t nframes;      /* 0: the events carried no stack (recorded without stacks) */
  uint64_t count;      /* events with this stack */
  double weight_ms;    /* their weight: a wait's length (locks); 0 for exceptions */
} dnt_analysis_stack;

/* ============================================================================================== */
/* Exceptions thrown, by type and message, with their throw stacks, whether a catch took them, and
 * their rate over time. Every ExceptionThrown is a first-chance exception (it is logged when the
 * runtime begins to dispatch it); on its thread, the innermost exception not yet caught is the one
 * an ExceptionCatchStart catches (its MethodName is the catching method), and an ExceptionThrownStop
 * ends its dispatch. analyze/exceptions.c states the rules. */

#define DNT_EXC_CATCHES 4  /* catching methods kept per group (the rest are counted together) */
#define DNT_EXC_EXAMPLES 3 /* messages kept per group as examples */

/* What makes a group. By default the type and the throw site, the innermost frame of the
 * program's own code in the throw stack (else the innermost managed frame): one place in the code
 * is one row however its messages differ. Messages are kept as examples with their ids, GUIDs,
 * numbers and paths folded ("order {n} is not in a state to ship"), except when grouping by
 * message, where each exact message is a group. */
typedef enum { DNT_EXC_BY_SITE, DNT_EXC_BY_TYPE, DNT_EXC_BY_MESSAGE, DNT_EXC_BY_STACK } dnt_exc_grouping;
/* "site", "type", "message", "stack" to its grouping: 0, or -1 for another word. */
int dnt_exc_grouping_parse(const char *word, dnt_exc_grouping *out);

typedef struct dnt_exception_group {
  const char *type;      /* ExceptionType (owned by the analysis) */
  const char *message;   /* the most frequent message (folded unless grouped by message; "" when none) */
  const char *site;      /* the throw site's frame when grouped by site, else NULL */
  struct {
    const char *message; /* folded unless grouped by message */
    uint64_t count;
  } examples[DNT_EXC_EXAMPLES]; /* the group's messages, most frequent first; unused: NULL */
  uint64_t other_examples;      /* throws with messages beyond those */
  uint32_t hresult;      /* the first throw's ExceptionHRESULT */
  uint64_t thrown;       /* all thrown: each is a first-chance exception */
  uint64_t handled;      /* a catch began for it */
  uint64_t unhandled;    /* no catch began for it before its dispatch or the trace ended (catch
                            events being recorded) */
  uint64_t unknown;      /* whether a catch took it cannot be told: the trace has no catch events
                            (recorded at the Error level only), or more nested than tracked */
  uint64_t rethrown;     /* ExceptionFlags' ReThrown (0x04): `throw;` of a caught exception */
  uint64_t nested;       /* ExceptionFlags' Nested (0x02): thrown while another was dispatched */
  double first_ms, last_ms; /* the first and last throw, ms since the trace's start */
  struct {
    const char *method;  /* ExceptionCatchStart's MethodName (owned by the analysis) */
    uint64_t count;
  } catches[DNT_EXC_CATCHES]; /* most frequent first; unused entries have method NULL */
  uint64_t other_catches; /* caught by methods beyond those */
  /* after finish: the throw stacks, heaviest first (at most the `top` given to finish) */
  const dnt_analysis_stack *stacks;
  size_t nstacks;
  uint64_t other_stacks; /* throws with stacks beyond those */
} dnt_exception_group;

typedef struct dnt_exception_summary {
  uint64_t thrown, handled, unhandled, unknown;
  size_t groups, types;
  dnt_exc_grouping grouping;
  int catch_events;      /* the trace has ExceptionCatch/Filter/Finally/ThrownStop events, or was
                            recorded at the informational level (catches_recorded) */
  double trace_ms;       /* first to last event of the trace */
  double per_second;     /* thrown over trace_ms */
  const uint64_t *per_sec_counts; /* throws in each second since the trace's start */
  size_t seconds;
  double max_per_second; /* the busiest second's */
} dnt_exception_summary;

struct dnt_exceptions_analysis;

/* A new analysis reading layouts from schema (borrowed: it must outlive the analysis). NULL when
 * out of memory. Free with dnt_exceptions_analysis_free (NULL is fine). */
struct dnt_exceptions_analysis *dnt_exceptions_analysis_new(const struct dnt_schema *schema);
void dnt_exceptions_analysis_free(struct dnt_exceptions_analysis *a);
/* As dnt_allocs_analysis_stitch, for the throws' stacks (the groups' stacks stay the threads'). */
void dnt_exceptions_analysis_stitch(struct dnt_exceptions_analysis *a, int on);
/* The parser callbacks to feed it (ud: the analysis). They return nonzero only when out of
 * memory; dnt_exceptions_analysis_failed says so afterwards (-ENOMEM, sticky, else 0). */
void dnt_exceptions_analysis_callbacks(ntr_callbacks *cb);
int dnt_exceptions_analysis_failed(const struct dnt_exceptions_analysis *a);
/* The events were recorded at the informational level (a live session that asked for it): an
 * exception no catch took is unhandled even when the trace has no catch event at all. */
void dnt_exceptions_analysis_catches_recorded(struct dnt_exceptions_analysis *a);
/* How to group (before the trace is fed; the default is by site). */
void dnt_exceptions_analysis_group_by(struct dnt_exceptions_analysis *a, dnt_exc_grouping by);
/* message with what differs between throws of one site folded: GUIDs "{guid}", numbers "{n}"
 * (decimals and 0x... too), hex ids of 8 digits or more "{hex}", paths "{path}"; into out (cap
 * bytes, NUL-terminated, cut when it does not fit). */
void dnt_exc_fold_message(const char *message, char *out, size_t cap);
/* Once the trace is read: groups sorted by count, the `top` heaviest throw stacks of each named,
 * the summary. Call once. */
void dnt_exceptions_analysis_finish(struct dnt_exceptions_analysis *a, size_t top_stacks);
/* The groups (as dnt_exceptions_analysis_group_by says), most thrown first; valid until the analysis is freed. */
const dnt_exception_group *dnt_exceptions_list(const struct dnt_exceptions_analysis *a, size_t *n);
const dnt_exception_summary *dnt_exceptions_get_summary(const struct dnt_exceptions_analysis *a);
/* The heaviest throw stacks of all groups together (after finish). */
const dnt_analysis_stack *dnt_exceptions_stacks(const struct dnt_exceptions_analysis *a, size_t *n);
/* The throw stacks as a profile for profile/'s writers (flame graph, folded, speedscope, pprof):
 * one sample per throw, its leaf frame "Throw(Type) message"; owned by the analysis (after
 * finish). */
const struct dnt_profile *dnt_exceptions_profile(const struct dnt_exceptions_analysis *a);
/* The views: the `top` groups (0: all) with their stacks, as a text report or one JSON object.
 * Write to fp; the caller checks fp for errors. */
void dnt_exceptions_write_text(FILE *fp, const struct dnt_exceptions_analysis *a, size_t top);
void dnt_exceptions_write_json(FILE *fp, const struct dnt_exceptions_analysis *a, size_t top);

/* ============================================================================================== */
/* Lock contention: every wait of a thread for a lock, paired from ContentionStart and
 * ContentionStop on the waiting thread, by lock (.NET 8+ names it: LockID, the object locked and
 * the owner's thread) and by waiting stack. analyze/locks.c states the rules. */

typedef struct dnt_lock {
  uint64_t lock_id;      /* ContentionStart_V2's LockID; 0: not said (before .NET 8) */
  uint64_t object_id;    /* its AssociatedObjectID (the object locked), 0 when not said */
  uint64_t owner_thread; /* the owner most often named when a wait began (LockOwnerThreadID) */
  const char *owner_name; /* that thread's name when the trace names it, else NULL */
  uint64_t waits;        /* paired waits */
  double wait_ms;        /* their total: ContentionStop_V1's DurationNs, else Stop less Start */
  double max_wait_ms;
  double ts_wait_ms;     /* the same waits measured from the events' timestamps */
  uint64_t native;       /* ContentionFlags 1: waits in the runtime's native locks */
  /* after finish: the waiting stacks, heaviest first */
  const dnt_analysis_stack *stacks;
  size_t nstacks;
  uint64_t other_stacks;
} dnt_lock;

typedef struct dnt_locks_summary {
  uint64_t waits;
  double wait_ms, max_wait_ms, ts_wait_ms;
  uint64_t with_duration; /* waits whose Stop carried DurationNs (.NET 8+) */
  uint64_t unpaired;      /* a Start without its Stop (the trace ended in the wait, or lost it), or
                             a Stop without a Start */
  uint64_t locks_created; /* ContentionLockCreated events */
  size_t locks, threads;  /* distinct locks and waiting threads */
  double trace_ms;
} dnt_locks_summary;

struct dnt_locks_analysis;

/* A new analysis reading layouts from schema (borrowed: it must outlive the analysis). NULL when
 * out of memory. Free with dnt_locks_analysis_free (NULL is fine). */
struct dnt_locks_analysis *dnt_locks_analysis_new(const struct dnt_schema *schema);
void dnt_locks_analysis_free(struct dnt_locks_analysis *a);
/* As dnt_allocs_analysis_stitch, for the waits' stacks. */
void dnt_locks_analysis_stitch(struct dnt_locks_analysis *a, int on);
/* The parser callbacks to feed it (ud: the analysis); nonzero only when out of memory, which
 * dnt_locks_analysis_failed says afterwards (-ENOMEM, sticky, else 0). */
void dnt_locks_analysis_callbacks(ntr_callbacks *cb);
int dnt_locks_analysis_failed(const struct dnt_locks_analysis *a);
/* Once the trace is read: locks sorted by total wait, the `top` heaviest waiting stacks of each
 * and of all named, the summary. Call once. */
void dnt_locks_analysis_finish(struct dnt_locks_analysis *a, size_t top_stacks);
/* The locks, most waited for first; the summary; the heaviest waiting stacks of all locks
 * together. All valid until the analysis is freed (after finish). */
const dnt_lock *dnt_locks_list(const struct dnt_locks_analysis *a, size_t *n);
const dnt_locks_summary *dnt_locks_get_summary(const struct dnt_locks_analysis *a);
const dnt_analysis_stack *dnt_locks_stacks(const struct dnt_locks_analysis *a, size_t *n);
/* The waiting stacks as a profile for profile/'s writers, one sample per wait weighing its length
 * (ms), the leaf frame naming the lock ("Contention on lock 0x..."); owned by the analysis (after
 * finish). */
const struct dnt_profile *dnt_locks_profile(const struct dnt_locks_analysis *a);
/* The views: the `top` locks (0: all) with their stacks, then the stacks of all locks, as a text
 * report or one JSON object. Write to fp; the caller checks fp for errors. */
void dnt_locks_write_text(FILE *fp, const struct dnt_locks_analysis *a, size_t top);
void dnt_locks_write_json(FILE *fp, const struct dnt_locks_analysis *a, size_t top);

/* ---- heap snapshots ----
 * A heap's object graph, from the runtime's heap walk (a session with the runtime provider at
 * Verbose and the GCHeapSnapshot keywords 0x1980001: `collect --profile gc-heap-snapshot`, read
 * as it streams) or from a .gcdump file (dotnet-gcdump's and PerfView's, read and written here);
 * per type the objects, their bytes and what they retain (the dominator tree); the shortest
 * paths from the roots to an object; two snapshots' difference. A walk is complete only when its
 * GC ended, no node or edge event was lost and the references add up (a lost event shifts every
 * later object's references): only a complete walk gives a graph. */

typedef struct dnt_heap_type {
  const char *name;   /* as dotnet-gcdump names it ("List<T>"); owned by the graph */
  uint64_t count;     /* objects */
  uint64_t bytes;     /* their sizes, added */
  uint64_t retained;  /* what only they keep alive, their own bytes included */
} dnt_heap_type;

typedef struct dnt_heap_summary {
  uint64_t objects, bytes, references, roots;
  uint64_t reachable;     /* objects reached from the roots (the others were garbage) */
  uint64_t lost_events;   /* node and edge events missing from their sequences (their Index) */
  int walked;             /* the trace has a heap walk */
  int complete;           /* ... its GC ended, nothing lost, the references add up */
  int reference_mismatch; /* the references are not what the objects said */
  uint64_t unnamed_objects; /* objects whose type the walk's BulkType events never named ("(unknown
                               type)"): the runtime leaves them out when another session on the
                               process changes its events during the walk */
} dnt_heap_summary;

/* Where a snapshot came from, as a .gcdump keeps it: the process and when (UTC ns since 1970; 0
 * when unknown). process is borrowed where it is given, owned by the graph where it is read. */
typedef struct dnt_heap_origin {
  uint32_t pid;
  const char *process;
  int64_t time_unix_ns;
} dnt_heap_origin;

struct dnt_heap;
struct dnt_heap_analysis;

/* The walk. NULL when out of memory; free(NULL) is fine. */
struct dnt_heap_analysis *dnt_heap_analysis_new(void);
void dnt_heap_analysis_free(struct dnt_heap_analysis *a);
/* The parser callbacks (ud: the analysis); nonzero only when out of memory (then -ENOMEM from
 * dnt_heap_analysis_failed, sticky). */
void dnt_heap_analysis_callbacks(ntr_callbacks *cb);
int dnt_heap_analysis_failed(const struct dnt_heap_analysis *a);
/* While reading: 1 once the heap walk's GC has ended (a live session can stop). */
int dnt_heap_analysis_walked(const struct dnt_heap_analysis *a);
/* While reading: the objects and references read so far (a progress line). */
void dnt_heap_analysis_progress(const struct dnt_heap_analysis *a, uint64_t *objects, uint64_t *references);
/* Once the trace is read: the graph is built (the events' arrays freed as it is). Call once. */
void dnt_heap_analysis_finish(struct dnt_heap_analysis *a);
/* After finish: what the walk was (complete or why not). */
const dnt_heap_summary *dnt_heap_analysis_summary(const struct dnt_heap_analysis *a);
/* After finish: a complete walk's graph, handed to the caller (free with dnt_heap_free), or NULL
 * (no complete walk, out of memory, or taken already). */
struct dnt_heap *dnt_heap_analysis_take(struct dnt_heap_analysis *a);

/* .gcdump files (FastSerialization: a GCHeapDump holding a MemoryGraph). Whether the first bytes
 * of a file (n of them, 64 are enough) are a .gcdump's. */
int dnt_heap_is_gcdump(const void *head, size_t n);
/* Reads a whole .gcdump from fp (the caller's, read to its end): the graph, or NULL with the
 * reason in err (caller's, cap bytes). */
struct dnt_heap *dnt_heap_read_gcdump(FILE *fp, char *err, size_t cap);
/* Writes h as a .gcdump to fp (the caller's; write errors are its to check), as dotnet-gcdump 10
 * writes one (its report and PerfView read it), with origin (NULL: the graph's own). 0, or -1 with
 * the reason in err (out of memory, a graph too big for the format's 32-bit offsets). */
int dnt_heap_write_gcdump(FILE *fp, const struct dnt_heap *h, const dnt_heap_origin *origin, char *err, size_t cap);

void dnt_heap_free(struct dnt_heap *h); /* NULL is fine */
/* What the snapshot says of itself (set by the walk's reader from the trace, or read from the
 * file); the caller may set it before writing. origin's strings are copied. 0, or -1 when out of
 * memory. */
int dnt_heap_set_origin(struct dnt_heap *h, const dnt_heap_origin *origin);
const dnt_heap_origin *dnt_heap_get_origin(const struct dnt_heap *h);

/* The summary and the types with objects, most bytes first, a type's rows merged by name; the
 * retained sizes are computed on the first call (the dominator tree: about 50 bytes an object
 * for a moment). Valid until the graph is freed. NULL / 0 when out of memory
 * (dnt_heap_failed). */
const dnt_heap_summary *dnt_heap_summary_of(struct dnt_heap *h);
const dnt_heap_type *dnt_heap_types(struct dnt_heap *h, size_t *n);
int dnt_heap_failed(const struct dnt_heap *h);
/* The objects and their bytes alone, without the rest of the summary's work. */
void dnt_heap_count(const struct dnt_heap *h, uint64_t *objects, uint64_t *bytes);

/* What keeps objects alive: the shortest paths from the roots to the objects `target` names (an
 * address "0x...", else a type's name: exact, else every type whose name holds it), as text or
 * (json) one object: the `top` distinct paths of types, most objects first, each with its
 * objects and their bytes (an address: its one path, each step's address). Roots are named by
 * the nodes above them ("[static var Sample.Cache.Entries]"). 0; -1 when nothing matches; -2 when
 * out of memory; err (caller's, cap bytes) says which. */
int dnt_heap_write_paths(FILE *fp, struct dnt_heap *h, const char *target, size_t top, int json, char *err,
                         size_t cap);
/* Whether target names something in h (as above, without the walk): 0, -1 or -2, err set. */
int dnt_heap_paths_target(const struct dnt_heap *h, const char *target, char *err, size_t cap);

/* What changed from base to h, per type name (objects, bytes, retained bytes; types new or gone
 * included), the `top` most grown in bytes first, as text or (json) one object. 0, or -1 when out
 * of memory. */
int dnt_heap_write_diff(FILE *fp, struct dnt_heap *h, struct dnt_heap *base, size_t top, int json);

/* The heap as a profile (every profile writer draws it: pprof with inuse_objects and
 * inuse_space, a flame graph of retained bytes): each object reached from the roots a sample of
 * its bytes under the path of its dominators' types from the root (a type met again on the way
 * folds the path back to it). The caller's (dnt_profile_free); h must outlive it. NULL when out
 * of memory. */
struct dnt_profile *dnt_heap_profile(struct dnt_heap *h);

/* The views: the summary and the `top` types by bytes, as a text table or one JSON object. */
void dnt_heap_write_text(FILE *fp, struct dnt_heap *h, size_t top);
void dnt_heap_write_json(FILE *fp, struct dnt_heap *h, size_t top);

#endif
