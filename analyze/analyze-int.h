/* analyze/: what its files share beyond the public header (dnt-analyze.h). */
#ifndef DNT_ANALYZE_INT_H
#define DNT_ANALYZE_INT_H

#include <stdint.h>
#include <string.h>

#include "dnt-analyze.h"
#include "dnt-profile.h"

#define DNT__RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define DNT__RUNDOWN_PROVIDER "Microsoft-Windows-DotNETRuntimeRundown"

/* ms since the trace's sync time, from a timestamp in the trace's ticks (0 without a clock). */
double dnt__ms_of(uint64_t ts, uint64_t sync_qpc, uint64_t qpc_freq);

/* The trace's clock and pointer size (from on_trace) and the span of the events an analysis saw
 * (every event, before it is filtered): every analysis keeps one. Caller-provided storage, zeroed. */
struct dnt__clock {
  uint64_t sync_qpc, qpc_freq;
  uint32_t pointer_size;
  int have_time;
  uint64_t first_ts, last_ts;
};

static inline void dnt__clock_on_trace(struct dnt__clock *c, const ntr_trace *t) {
  c->sync_qpc = t->sync_time_qpc;
  c->qpc_freq = t->qpc_frequency;
  c->pointer_size = t->pointer_size;
}

static inline void dnt__clock_see(struct dnt__clock *c, uint64_t ts) {
  if (!c->have_time || ts < c->first_ts) c->first_ts = ts;
  if (!c->have_time || ts > c->last_ts) c->last_ts = ts;
  c->have_time = 1;
}

/* ms of ts since the trace's sync time */
static inline double dnt__clock_ms(const struct dnt__clock *c, uint64_t ts) {
  return dnt__ms_of(ts, c->sync_qpc, c->qpc_freq);
}

/* the span of the events seen, in ms (0: none seen) */
static inline double dnt__clock_span_ms(const struct dnt__clock *c) {
  return c->have_time ? dnt__clock_ms(c, c->last_ts) - dnt__clock_ms(c, c->first_ts) : 0;
}

/* the session's length in ms: from the trace's start (its sync time: when the session began) to
 * its last event, so that a rate counts the quiet seconds before the first event too; the
 * events' own span when the sync time is not before them (0: none seen) */
static inline double dnt__clock_session_ms(const struct dnt__clock *c) {
  double since_sync = c->have_time ? dnt__clock_ms(c, c->last_ts) : 0, span = dnt__clock_span_ms(c);
  return since_sync > span ? since_sync : span;
}

/* the size of a payload's pointers: the trace's, 8 unless it says 4 */
static inline uint32_t dnt__clock_ptr(const struct dnt__clock *c) { return c->pointer_size == 4 ? 4 : 8; }

/* held.c: events held until the next sequence point, then handled in time order (then in arrival
 * order), as TraceEvent sorts them: within a block the runtime writes its events thread by thread,
 * not in time order, and a sequence point says every thread's buffer has been flushed. An
 * analysis's held event is a struct of its own whose first member is a struct dnt__held_key.
 * Caller-provided storage: dnt__held_init, dnt__held_release. */
struct dnt__held_key {
  uint64_t ts, order;
};
struct dnt__held {
  void *v; /* n events of `size` bytes */
  size_t n, cap, size, max;
  uint64_t order;
};
/* handles one event (borrowed for the call): 0, or nonzero to stop (out of memory) */
typedef int (*dnt__held_fn)(void *ud, void *event);

/* size: the analysis's event struct; past max events held (a trace without sequence points) they
 * are handled early. */
void dnt__held_init(struct dnt__held *h, size_t size, size_t max);
void dnt__held_release(struct dnt__held *h);
/* A slot for an event at ts, zeroed but for its key, at the end of those held: dnt__held_keep holds
 * it, until then the next slot is the same one. Handles those held first past max (with handle,
 * ud). NULL when out of memory or when handling failed. */
void *dnt__held_slot(struct dnt__held *h, uint64_t ts, dnt__held_fn handle, void *ud);
static inline void dnt__held_keep(struct dnt__held *h) { h->n++; }
/* Handles the events held, in time order, and forgets them: 0, or what a handle() that failed
 * returned (those after it are dropped). */
int dnt__held_flush(struct dnt__held *h, dnt__held_fn handle, void *ud);

/* Whether md is the runtime provider's, its provider compared once for a run of events of one
 * metadata. Caller-provided storage, zeroed. */
struct dnt__runtime_md {
  const ntr_metadata *md;
  int runtime;
};

static inline int dnt__is_runtime(struct dnt__runtime_md *c, const ntr_metadata *md) {
  if (md != c->md) {
    c->md = md;
    c->runtime = strcmp(md->provider, DNT__RUNTIME_PROVIDER) == 0;
  }
  return c->runtime;
}

/* An integer field of a decoded payload, all 64 bits of it (a double holds 53: pointers and ids
 * would merge); 0 when absent or not an integer. */
uint64_t dnt__record_u64(const dnt_record *r, const char *name);

/* The schema's layout of a runtime event, remembered: a schema lookup costs more than decoding
 * the payload, and an analysis reads a few kinds of events many times. Caller-provided storage,
 * zeroed. NULL when the schema does not know the event. */
#define DNT__LAYOUTS 16
struct dnt__layouts {
  struct {
    uint32_t id, version, nfields;
    const ntr_field *fields;
  } v[DNT__LAYOUTS];
  size_t n;
};
const ntr_field *dnt__layout(struct dnt__layouts *c, const struct dnt_schema *schema, const ntr_metadata *md,
                             uint32_t *nfields);

/* event-stacks.c: the stacks of the events an analysis counts (exceptions thrown, waits for a
 * lock), kept in a profile (profile/: named through the trace's method table and rundown at the
 * end, written by its flame graph, folded, speedscope and pprof writers). Each stack gets one
 * more frame at its leaf that names what the analysis counts it under, its key (the exception
 * type and message, the lock): PerfView's "Throw(Type) message" frame. The frame is a made-up
 * address the trace's methods cannot cover, named by label(). Caller-provided storage, zeroed;
 * release with dnt__event_stacks_release. */
/* A managed method's name, module or not: `?!Namespace.Type.Method` is a method whose module the
 * trace did not name (no loader events nor rundown), `?!0x...` no method at all. */
int dnt__managed_frame(const char *name);
/* Whether a frame is the program's own code: managed, and not of the framework's assemblies (by
 * module, or by namespace when the module is unknown) nor a dynamic method (a lambda the framework
 * compiled). */
int dnt__user_frame(const char *name);

typedef void (*dnt__stack_label_fn)(void *ud, size_t key, char *buf, size_t cap);

struct dnt__key_stacks {
  dnt_analysis_stack *v; /* the key's stacks, heaviest first */
  size_t n;
  uint64_t other_count;  /* what did not fit in the `top` kept */
  double other_weight;
};

struct dnt__event_stacks {
  struct dnt_profile *prof;
  dnt__stack_label_fn label;
  void *ud;
  /* what was counted: per key and stack under its leaf (the profile's stack id), open addressing
   * (index + 1, 0: empty); memory grows with the distinct pairs, each stack stored once */
  struct dnt__key_stack {
    size_t key;
    uint32_t stack;
    uint64_t count;
    double ms;
  } *pairs;
  size_t npairs, cappairs;
  size_t *table;
  size_t table_cap;
  int oom;
  /* after finish: per key (nkeys), and all keys together (the leaf frame left out); the frames'
   * names arrays, one a distinct stack, shared by the keys that have it */
  struct dnt__key_stacks *by_key, all;
  size_t nkeys;
  const char ***names;
  size_t nnames;
};

/* 0, or -ENOMEM. by_time: the profile's writers weigh the stacks by their ms (else by counts);
 * what: what its samples are (dnt_profile_describe; static). */
int dnt__event_stacks_init(struct dnt__event_stacks *s, dnt__stack_label_fn label, void *ud, int by_time,
                           const char *what);
/* Every event goes through here: the method, module and thread events name the frames. 0, or
 * nonzero when out of memory. */
int dnt__event_stacks_on_trace(struct dnt__event_stacks *s, const ntr_trace *t);
int dnt__event_stacks_on_event(struct dnt__event_stacks *s, const ntr_event *ev);
int dnt__event_stacks_on_thread(struct dnt__event_stacks *s, const ntr_thread *t);
/* Whether the events' stacks are stitched under their async tasks' creators (the default). */
void dnt__event_stacks_stitch(struct dnt__event_stacks *s, int on);
/* Sequence points reach the profile: its stack ids and the events it holds in time order. */
int dnt__event_stacks_on_sequence_point(struct dnt__event_stacks *s, const ntr_sequence_point *sp);
/* One event's stack (frames leaf first, borrowed; n may be 0: the leaf frame alone) counted under
 * key with weight ms. */
void dnt__event_stacks_add(struct dnt__event_stacks *s, size_t key, uint64_t thread, uint64_t time,
                           const uint64_t *frames, size_t n, double ms);
/* Names the frames and gathers each key's `top` heaviest stacks (by ms when by_time, else by
 * count), merged across threads, and the `top` heaviest of all. 0, or -ENOMEM. */
int dnt__event_stacks_finish(struct dnt__event_stacks *s, size_t nkeys, size_t top, int by_time);
void dnt__event_stacks_release(struct dnt__event_stacks *s);

/* What the analyses that keep their events' stacks (exceptions.c, locks.c) share: the first
 * member of their struct. The schema (borrowed) and a record to decode payloads into, the clock,
 * the provider of the last metadata, the stacks, the sticky out-of-memory flag. */
struct dnt__stacked {
  const struct dnt_schema *schema;
  dnt_record rec;
  struct dnt__layouts layouts;
  struct dnt__runtime_md runtime_md;
  struct dnt__clock clock;
  int failed, finished;
  struct dnt__event_stacks stacks;
};

/* s zeroed first (calloc); the stacks' label, by_time and what as dnt__event_stacks_init takes
 * them, ud: the analysis (label's). 0, or -ENOMEM (dnt__stacked_release it then). */
int dnt__stacked_init(struct dnt__stacked *s, const struct dnt_schema *schema, dnt__stack_label_fn label, void *ud,
                      int by_time, const char *what);
void dnt__stacked_release(struct dnt__stacked *s);
/* The parser callbacks with nothing of the analysis's own (ud: the analysis, its struct beginning
 * with a struct dnt__stacked); nonzero when out of memory. */
int dnt__stacked_on_trace(void *ud, const ntr_trace *t);
int dnt__stacked_on_thread(void *ud, const ntr_thread *t);
int dnt__stacked_on_sequence_point(void *ud, const ntr_sequence_point *sp);
/* What every event goes through first, in the analysis's on_event: the clock, the stacks' method
 * table. 1 when ev is a runtime event for the analysis to look at, 0 when not, -1 when the
 * analysis has failed (on_event returns nonzero). */
int dnt__stacked_on_event(struct dnt__stacked *s, const ntr_event *ev);

/* dominators.c: the dominator tree of nodes 0..n-1 reached from a virtual root n whose
 * successors are roots[0..nroots); v's successors are succ[start[v]..start[v+1]) (entries of
 * DNT__NO_NODE or >= n are skipped: references outside the graph). Fills idom[0..n-1] (the
 * immediate dominator; n: only the virtual root; DNT__NO_NODE: not reached) and order[0..*nreached)
 * (the reached nodes, a dominator before what it dominates). 0, or -1 when out of memory. */
#define DNT__NO_NODE UINT32_MAX
int dnt__dominators(uint32_t n, const uint64_t *start, const uint32_t *succ, const uint32_t *roots, uint64_t nroots,
                    uint32_t *idom, uint32_t *order, uint32_t *nreached);

/* ---- heap snapshots (heap.c builds one from a walk, gcdump-file.c reads and writes files,
 * heap-graph.c and heap-view.c answer from it) ----
 * A heap's object graph: nodes 0..nnodes-1, the objects and, above them, the nodes PerfView's
 * graphs put in to name the roots ("[.NET Roots]", "[static vars]", "[static var T.f]"...: nodes
 * of a synthetic type). v's references are succ[start[v] .. start[v + 1]), node indexes. */
struct dnt__heap_type_info {
  char *name;    /* as the reports show it ("List<T>"); owned */
  char *module;  /* the module's file name, or NULL; owned */
  int synthetic; /* a root's name, not objects' */
};

struct dnt_heap {
  uint32_t nnodes, root;
  uint32_t *type;    /* per node, into types */
  uint32_t *size;    /* per node, bytes (0 for a synthetic node); UINT32_MAX: in big[] */
  struct dnt__big_size {
    uint32_t node;
    uint64_t size;
  } *big; /* the objects of 4 GiB and more (a very large array), by node */
  size_t nbig;
  uint64_t *address; /* per node (0 for a synthetic node) */
  uint64_t *start;   /* nnodes + 1 */
  uint32_t *succ;
  struct dnt__heap_type_info *types;
  uint32_t ntypes;
  uint32_t pointer_size; /* 8, or 4 (a 32-bit process's) */
  dnt_heap_origin origin;
  char *process_name;    /* origin.process points here */
  /* computed on demand (heap-graph.c) */
  int rows_done, failed;
  dnt_heap_type *rows;
  size_t nrows;
  dnt_heap_summary summary;
};

/* Node v's bytes (dnt__heap_size: also those of 4 GiB and more). */
uint64_t dnt__heap_big_size(const struct dnt_heap *h, uint32_t v);
static inline uint64_t dnt__heap_size(const struct dnt_heap *h, uint32_t v) {
  return h->size[v] != UINT32_MAX ? h->size[v] : dnt__heap_big_size(h, v);
}

/* A new empty graph (calloc'd, pointer size 8), NULL when out of memory. */
struct dnt_heap *dnt__heap_new(void);
/* Adds a type; its index, or UINT32_MAX when out of memory. name and module copied (module may be
 * NULL). */
uint32_t dnt__heap_add_type(struct dnt_heap *h, const char *name, const char *module, int synthetic);

/* The graph's dominator tree from its root (dnt__dominators): idom[] and order[] (nnodes each,
 * the caller's to free), the count reached. 0, or -1 when out of memory. */
int dnt__heap_dominators(const struct dnt_heap *h, uint32_t **idom, uint32_t **order, uint32_t *reached);

/* Paths of types, as a tree (heap-paths.c, heap-profile.c): each path is its parent path and one
 * more type, with what ends there. Zeroed to begin. */
struct dnt__type_path {
  uint32_t parent, type;
  uint64_t objects, bytes;
};
struct dnt__type_paths {
  struct dnt__type_path *v;
  size_t n, cap;
  uint32_t *slot; /* open-addressed (parent, type) -> index + 1 */
  size_t nslots;
};
/* The path `parent` + type (parent UINT32_MAX: a path of one type), added when new: its index,
 * UINT32_MAX when out of memory. */
uint32_t dnt__path_of(struct dnt__type_paths *p, uint32_t parent, uint32_t type);
void dnt__type_paths_release(struct dnt__type_paths *p);

/* The views' common part: one stack as text lines (a head line of lead and its count, then its
 * frames leaf first, under indent) or as a JSON object; with_ms: its weight is a wait. */
void dnt__write_stack_text(FILE *fp, const dnt_analysis_stack *st, const char *indent, const char *lead, int with_ms);
void dnt__write_stack_json(FILE *fp, const dnt_analysis_stack *st, int with_ms);

/* A payload's number (decoded as a double) as an integer: a hostile trace can put anything in a
 * field, and a double out of an integer type's range converts to nothing defined (UBSan found it
 * through fuzz-gc); NaN reads as 0, what is beyond the range as its end. */
static inline uint32_t dnt__u32_of(double x) { return x >= 4294967295.0 ? UINT32_MAX : x > 0 ? (uint32_t)x : 0; }
static inline uint64_t dnt__u64_of(double x) {
  return x >= 18446744073709551615.0 ? UINT64_MAX : x > 0 ? (uint64_t)x : 0;
}
static inline int dnt__int_of(double x, int otherwise) {
  return x >= -2147483648.0 && x < 2147483648.0 ? (int)x : otherwise;
}

#endif
