/* profile/: what its files share beyond the public header (dnt-profile.h). */
#ifndef DNT_PROFILE_INT_H
#define DNT_PROFILE_INT_H

#include "dnt-profile.h"

/* methods.c: the first link of the naming chain, the trace's own method table. The runtime's
 * method events (MethodLoadVerbose as it JITs, MethodDC*Verbose in the rundown) give each
 * method's code range and name, the module events each module's file name. Caller-provided
 * storage, zeroed; release with dnt__methods_release. */
struct dnt__method;
struct dnt__module;
struct dnt__image_span;
struct dnt__methods {
  struct dnt__method *v;
  size_t n, cap;
  struct dnt__module *mods;
  size_t nmods, capmods;
  struct dnt__image_span *spans; /* made with the sort */
  size_t nspans;
  int sorted;
};
/* One MethodLoadVerbose/MethodDC*Verbose or ModuleLoad/ModuleDC* event (a payload that does not
 * parse is skipped). 0, or -ENOMEM. */
int dnt__methods_on_method(struct dnt__methods *t, const ntr_event *ev);
int dnt__methods_on_module(struct dnt__methods *t, const ntr_event *ev);
/* `Module!Namespace.Type.Method` for the code at ip into buf: 1, or 0 when no method covers it.
 * An address no method covers between two precompiled (ReadyToRun) methods of one module is in
 * that module's image: `Module!0xADDR` (the rundown leaves out the image's methods whose
 * MethodDesc was never loaded, P/Invoke stubs among them: TraceEvent's `?!?`).
 * Sorts the table on its first call (after the last event). leaf: ip is a sample's own address,
 * else a return address (the call is the byte before). */
int dnt__methods_name(struct dnt__methods *t, uint64_t ip, int leaf, char *buf, size_t cap);
void dnt__methods_release(struct dnt__methods *t);

/* threads.c: thread names by thread id. Caller-provided storage, zeroed; release with
 * dnt__thread_names_release. set copies name (0, or -1 when out of memory); get returns the
 * name, owned by the table, or NULL. */
struct dnt__thread_name;
struct dnt__thread_names {
  struct dnt__thread_name *v;
  size_t n, cap;
};
int dnt__thread_names_set(struct dnt__thread_names *t, uint64_t thread, const char *name);
const char *dnt__thread_names_get(const struct dnt__thread_names *t, uint64_t thread);
void dnt__thread_names_release(struct dnt__thread_names *t);

/* activities.c: the task each thread runs, as TraceEvent's ActivityComputer tracks it from the
 * task library's and the thread pool's events (docs/async-stacks.md). Caller-provided storage,
 * zeroed; release with dnt__acts_release. An activity is known to the profile by its node: the
 * creator's node (0: a creator with none, a thread's own code), the creating event's stack and
 * thread, interned. */
#define DNT__NO_STACK UINT32_MAX
enum dnt__act_op {
  DNT__OP_NONE,
  DNT__OP_TASK_SCHEDULED,  /* TplEventSource 7 */
  DNT__OP_TASK_STARTED,    /* 8 */
  DNT__OP_TASK_COMPLETED,  /* 9 */
  DNT__OP_WAIT_BEGIN,      /* 10 */
  DNT__OP_WAIT_END,        /* 11 */
  DNT__OP_AWAIT_SCHEDULED, /* 12 */
  DNT__OP_WORKER_WAIT,     /* runtime 57 ThreadPoolWorkerThreadWait */
  DNT__OP_POOL_ENQUEUE,    /* 61 */
  DNT__OP_POOL_DEQUEUE,    /* 62 */
  DNT__OP_IO_ENQUEUE,      /* 63, 65 */
  DNT__OP_IO_DEQUEUE       /* 64 */
};
struct dnt__act_event {
  uint64_t thread, ts, id; /* id: the task's, the continuation's, the work item's */
  uint32_t stack;          /* the event's own, interned (DNT__NO_STACK: none) */
  int op, behavior;        /* behavior: TaskWaitBegin's, 1 for a blocking wait */
};
/* An await ended: the waiting code's node, and when it began and ended waiting (AWAIT_TIME). */
struct dnt__await {
  uint32_t node; /* 0: nothing to say */
  uint64_t thread, created, started;
};
struct dnt__act;
struct dnt__act_thread;
struct dnt__act_node;
struct dnt__acts {
  struct dnt__act *v;
  size_t n, cap;
  uint32_t free; /* the first free slot of v: index + 1, 0 for none */
  struct dnt__act_thread *threads;
  size_t nthreads, capthreads;
  uint32_t *thread_table;
  size_t thread_table_cap;
  uint32_t *map; /* id -> activity index + 1 */
  size_t map_n, map_cap;
  struct dnt__act_node *nodes;
  size_t nnodes, capnodes;
  uint32_t *node_table;
  size_t node_table_cap;
};
/* One event, in time order. 0, or -1 when out of memory. */
int dnt__acts_on(struct dnt__acts *a, const struct dnt__act_event *e, struct dnt__await *aw);
/* The node of the thread's current activity into *node (0: none stitched). 0, or -1 (memory). */
int dnt__acts_current_node(struct dnt__acts *a, uint64_t thread, uint32_t *node);
/* A node (1..nnodes): its creator's node, creating stack and thread. */
void dnt__acts_node(const struct dnt__acts *a, uint32_t node, uint32_t *parent, uint32_t *stack, uint64_t *thread);
size_t dnt__acts_nnodes(const struct dnt__acts *a);
void dnt__acts_release(struct dnt__acts *a);

/* pprof.c: dnt_profile_write's DNT_PROFILE_PPROF. */
int dnt__pprof_write(const struct dnt_profile *prof, const char *title, FILE *fp);

/* ---- the profile itself (profile.c; stitch.c makes its async stacks at the end) ---- */

/* A stack's frames, leaf first: its own n at frames[off], then those of the stack below it, if
 * any. An analysis's stacks share the stack under their key's leaf frame that way (one copy of a
 * deep stack for every exception group thrown from it: dnt_profile_add_stack_under). */
struct stack {
  size_t off;       /* into frames */
  uint32_t n;
  uint32_t hash;
  uint32_t below;   /* the stack below this one's frames: its index + 1, 0 for none */
  uint32_t under;   /* only ever below another: its first frame is a caller too, not a leaf */
  size_t total;     /* frames with those below */
};

struct count {
  uint64_t thread;
  uint32_t stack;
  uint32_t external; /* the thread was in native code: the leaf is UNMANAGED_CODE_TIME (and, until
                      * the end, NO_FRAMES: a task's sample of its creation alone) */
  uint32_t node;     /* until the end: the task it ran for (activities.c), 0 for none */
  uint64_t samples;
  double ms;         /* the time these samples stand for (see "weights" below) */
};

/* ---- weights ----
 * A sample stands for the time until the same thread's next sample, as TraceEvent's
 * SampleProfilerThreadTimeComputer has it (the thread time of `dotnet-trace convert`, PerfView):
 *  - each thread on its own: a thread's sample is weighed when that thread's next sample comes,
 *    whatever the other threads do;
 *  - the two kinds alike: a Managed sample (payload type 2: running managed code, TraceEvent's
 *    CPU_TIME) and an External one (1, or anything else: in native code or waiting,
 *    UNMANAGED_CODE_TIME) both last until the next sample, whichever its kind;
 *  - a long gap (a thread the sampler skipped, or suspended) counts in full for the sample
 *    before it: no cap;
 *  - a thread's first sample starts its time (nothing before it is counted); its last sample
 *    stands for no time, since no later sample bounds it (it is counted, with weight 0);
 *  - a sample not after the trace's start (its sync time) passes no time on (TraceEvent's
 *    times relative to the start must be positive);
 *  - samples later filtered out (compare's views) still bound the time of the one before.
 * So one sample per thread is pending, waiting for its successor: memory grows with threads,
 * not samples. Samples from perf (dnt_profile_add_ips) weigh their sampling period each. */
struct thread_state {
  uint64_t thread;
  uint64_t ts;       /* the pending sample's timestamp */
  uint32_t count;    /* its entry in counts + 1; 0 = filtered out, nothing to weigh */
  uint32_t stack, external, node; /* its stack: the next sample, often on the same, skips a lookup */
  size_t timeline;   /* its timeline entry + 1, whose weight comes with the next sample */
  uint64_t first, n; /* the samples on this thread: first timestamp, how many (allocations too) */
  uint64_t sampled_first, sampled_last, sampled; /* the sampler's alone: its pace */
};

/* a timeline sample a view hides (a bit of its external field, which is otherwise 0 or 1) */
#define HIDDEN 0x80000000u

struct dnt_profile {
  double sample_ms;
  struct dnt__methods methods; /* the first link of the naming chain */
  uint64_t *frames;
  size_t nframes, capframes;
  struct stack *stacks;
  size_t nstacks, capstacks;
  uint32_t *stack_table; /* open addressing: stack index + 1, 0 = empty */
  size_t stack_table_cap;
  struct count *counts;
  size_t ncounts, capcounts;
  uint32_t *count_table;
  size_t count_table_cap;
  uint64_t samples;
  /* after finish: names of functions, and per stack frame the function index */
  char **names;
  size_t nnames, capnames;
  uint32_t *name_table;
  size_t name_table_cap;
  uint32_t *frame_names; /* parallel to frames */
  uint64_t *threads;
  uint64_t *thread_samples;
  size_t nthreads;
  uint32_t unmanaged_name;
  int finished;
  int oom; /* an allocation failed: sticky (see GROW) */
  /* hot-path caches: the stream's stack ids (valid until the next sequence point, where the
   * format restarts them) to interned stacks, and the last metadata's kind */
  uint32_t *stack_cache; /* stack id -> interned index + 1, 0 = not yet */
  size_t stack_cache_cap;
  const ntr_metadata *last_md;
  int last_kind;
  /* the timeline, when kept: one entry per sample */
  int keep_timeline;
  struct sample {
    uint64_t thread, ts;
    uint32_t stack, external, node;
    double ms; /* its weight: the time to its thread's next sample, or its own (AWAIT_TIME) */
  } *timeline;
  size_t ntimeline, captimeline;
  /* samples since the last sequence point, put back in time order there: a thread's allocation
   * events come from its own buffer, the sampler's from the sampler's (profile_flush) */
  struct pending {
    uint64_t thread, ts;
    uint64_t id;        /* a task event's task, continuation or work item */
    uint32_t stack, seq; /* stack: DNT__NO_STACK for an event that has none */
    uint16_t external;
    uint8_t op;         /* OP_SAMPLE, OP_LOGGED (the GC's allocation events, counted as samples of
                         * managed code), else an enum dnt__act_op */
    uint8_t behavior;
  } *pend;
  size_t npend, cappend;
  uint32_t pend_seq;
  uint64_t sync_qpc;
  uint32_t pid; /* the traced process, from the trace's header (0: not said) */
  uint32_t pointer_size; /* the trace's: the width of the thread pool's work item ids */
  uint64_t qpc_frequency;
  /* per thread: the sample waiting for its weight, and the pace (open addressing: index + 1) */
  struct thread_state *tstates;
  size_t ntstates, captstates;
  uint32_t *tstate_table;
  size_t tstate_table_cap;
  size_t last_tstate; /* index + 1 of the last thread looked up: runs of one thread skip the hash */
  double total_ms;
  double *thread_ms; /* after finish, parallel to threads */
  enum dnt_profile_weight weight;
  /* the rest of the chain: what the trace's methods do not cover (a perf map, perf's symbols) */
  struct {
    dnt_profile_namer fn;
    void *ud;
  } resolvers[DNT_PROFILE_MAX_RESOLVERS];
  size_t nresolvers;
  int methods_only; /* a trace read for its method table: its own samples are not counted */
  dnt_profile_keep_fn keep; /* which samples count, when set */
  void *keep_ud;
  /* names: of threads (V6 thread rows, perf's comm, what a caller knows; the last one given
   * wins) and the process's command line (EventPipe's ProcessInfo event), for the timelines */
  struct dnt__thread_names thread_names;
  char *command_line;
  int fold_native; /* top tables: native time charged to the innermost managed frame */
  /* the span of the samples counted (dnt_profile_span) and whose they are */
  int64_t start_unix_ns; /* the trace's start, UTC (0: not said) */
  uint64_t last_ts;      /* the last counted sample's time, in the clock's ticks */
  int cpu_samples;       /* enum dnt_samples_kind: whose samples these are */
  const char *description; /* what the samples are (dnt_profile_describe), NULL: the sampler's */
  enum dnt_profile_source source; /* which events are the samples */
  enum dnt_profile_tasks tasks;   /* the task library's events: ignored, samples, or stitched */
  struct dnt__acts acts;          /* when stitched: each thread's task */
  char **labels;                  /* 2 * nlabels strings: key, value, ... */
  size_t nlabels;
};

/* profile.c's interning, for stitch.c: the stack of n frames (leaf first) on top of below
 * (index + 1, 0: none), kept apart from stacks of the same frames with another `under` (1: only
 * ever below others; 2: frames named already, by the caller); a name's id; a count's entry + 1.
 * 0 when out of memory (p->oom). */
uint32_t dnt__profile_intern_chain(struct dnt_profile *p, const uint64_t *frames, uint32_t n, uint32_t below, int under);
uint32_t dnt__profile_intern_name(struct dnt_profile *p, const char *name);
uint32_t dnt__profile_add_count(struct dnt_profile *p, uint64_t thread, uint32_t stack, uint32_t external,
                                uint32_t node, double ms);
/* stitch.c: the counts and timeline samples of tasks moved under the stacks that made them (on
 * the root creator's thread), once every frame is named. 0, or -1 when out of memory. */
int dnt__profile_stitch(struct dnt_profile *p);

/* pseudo-frames' addresses (no code is there), named as TraceEvent names them */
#define DNT__FRAME_STARTING_TASK 0xfffffffffffffff1ull
#define DNT__FRAME_AWAIT_TIME 0xfffffffffffffff2ull
/* a count's external bit, until the end: the sample's own frames are not a stack to cut at its
 * task's start (a TaskWaitEnd's, an AWAIT_TIME's) */
#define DNT__NO_FRAMES 2u

#endif
