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

#define DNT_EXC_CATCHES 4 /* catching methods kept per group (the rest are counted together) */

typedef struct dnt_exception_group {
  const char *type;      /* ExceptionType (owned by the analysis) */
  const char *message;   /* ExceptionMessage ("" when none) */
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
/* The parser callbacks to feed it (ud: the analysis). They return nonzero only when out of
 * memory; dnt_exceptions_analysis_failed says so afterwards (-ENOMEM, sticky, else 0). */
void dnt_exceptions_analysis_callbacks(ntr_callbacks *cb);
int dnt_exceptions_analysis_failed(const struct dnt_exceptions_analysis *a);
/* The events were recorded at the informational level (a live session that asked for it): an
 * exception no catch took is unhandled even when the trace has no catch event at all. */
void dnt_exceptions_analysis_catches_recorded(struct dnt_exceptions_analysis *a);
/* Once the trace is read: groups sorted by count, the `top` heaviest throw stacks of each named,
 * the summary. Call once. */
void dnt_exceptions_analysis_finish(struct dnt_exceptions_analysis *a, size_t top_stacks);
/* The groups (by type and message), most thrown first; valid until the analysis is freed. */
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

#endif
