/* profile/: the profile model and its writers. Stacks of samples named through the method events
 * and the rundown, aggregated per thread and stack; the flame graph writer. One public header; the
 * library never prints and never exits. */
#ifndef DNT_PROFILE_H
#define DNT_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ntr.h"

/* ============================================================================================== */
/* Thread-time profiles from a nettrace: SampleProfiler samples with their managed stacks, named
 * through the method load and rundown events, aggregated per thread.
 *
 * Fed through nettrace callbacks while the trace streams by; memory grows with the distinct
 * stacks, methods and modules, not with the samples. Names are resolved once the stream is over,
 * because methods jitted before the session and precompiled code are only named by the rundown
 * at its end. */

#define DNT_UNMANAGED_FRAME "UNMANAGED_CODE_TIME"

/* Whether a frame name is of managed code (`Module!Namespace.Type.Method`), native code
 * (`lib.so!sym`, `lib.so!0xOFF`, `UNMANAGED_CODE_TIME`), the kernel (`[kernel]!sym`), or
 * unknown (`?!0x...`): for colouring flame graphs. 'M', 'N', 'K' or '?'. */
int dnt_frame_kind(const char *name);

struct dnt_profile;

/* A new, empty profile; NULL when out of memory. Free with dnt_profile_free (NULL is fine). */
struct dnt_profile *dnt_profile_new(void);
void dnt_profile_free(struct dnt_profile *p);

/* Keep every sample's time too (memory then grows with the samples): for timelines such as the
 * Chromium trace format. Call before loading. */
void dnt_profile_keep_timeline(struct dnt_profile *p);

/* Walks the samples of each thread in time order (needs dnt_profile_keep_timeline): t_us is
 * microseconds since the trace start (0 for a sample stamped before it, as TraceEvent times it),
 * ms its weight (the time to its thread's next sample, as in the counts; a stitched task's sample
 * is filed under the thread that made the task, among that thread's own), frames as in
 * dnt_profile_each_stack. A sample a view hides (dnt_profile_set_view) comes with frames NULL and
 * nframes 0: it ends the time of its thread's sample before it, and stands for nothing itself. */
typedef void (*dnt_profile_sample_fn)(void *ud, uint64_t thread_id, double t_us, double ms, const uint32_t *frames,
                                      size_t nframes);
int dnt_profile_each_sample(const struct dnt_profile *p, dnt_profile_sample_fn fn, void *ud); /* 0, -1: no memory */

/* ---- samples from another sampler (perf), named through the same method table ---- */

/* The weight of a sample, the samples' clock (ticks per second) and its start, for samples added
 * with dnt_profile_add_ips (perf: 1e9 ticks, CLOCK_MONOTONIC ns, the first sample's time). */
void dnt_profile_set_clock(struct dnt_profile *p, double sample_ms, uint64_t clock_hz, uint64_t start);

/* While on, a trace loaded into p gives its method table only, not its samples (the perf view of
 * `compare` names frames from the EventPipe trace it is compared with). */
void dnt_profile_methods_only(struct dnt_profile *p, int on);

/* One sample of thread: code addresses leaf first (ips borrowed for the call), at time in the
 * clock's ticks. Call before dnt_profile_finish. */
void dnt_profile_add_ips(struct dnt_profile *p, uint64_t thread, uint64_t time, const uint64_t *ips, size_t n);
/* The same, weighing ms instead of the clock's sample_ms (a blocked interval weighs its length:
 * `dntrace waits`). */
void dnt_profile_add_ips_ms(struct dnt_profile *p, uint64_t thread, uint64_t time, const uint64_t *ips, size_t n,
                            double ms);

/* One stack counted as a sample of weight ms, for analyses that weigh an event by its own measure
 * rather than a sampler's time (analyze/: an exception thrown counts once, a wait for a lock its
 * length): ips leaf first, borrowed for the call; time in the trace's ticks. The profile is
 * normally in methods-only mode then (its SampleProfiler samples not counted). Call before
 * dnt_profile_finish. */
void dnt_profile_add_stack(struct dnt_profile *p, uint64_t thread, uint64_t time, const uint64_t *ips, size_t n,
                           double ms);

/* The same with one more frame on top: leaf, an address that one of the profile's resolvers
 * names (an analysis's key made into a frame: the exception thrown, the lock waited for). The
 * stack under it (ips, n, leaf first, borrowed) is stored once however many leaves share it, so
 * the profile grows with the distinct stacks and leaves, not with their product. Returns the id
 * of that stack under the leaf (for dnt_profile_stack_names), UINT32_MAX when out of memory.
 * In a profile with DNT_TASKS_STITCHED (fed the trace's events through its callbacks, sequence
 * points included), the stack is counted in time order among the task events, and stitched under
 * the task it ran for as a sampler's would be. */
uint32_t dnt_profile_add_stack_under(struct dnt_profile *p, uint64_t thread, uint64_t time, uint64_t leaf,
                                     const uint64_t *ips, size_t n, double ms);

/* After dnt_profile_finish: how many frames the stack `id` (dnt_profile_add_stack_under's) has,
 * and, when ids is not NULL, their function ids (dnt_profile_name), leaf first, into ids (room for
 * that many; the caller's). 0 for an unknown id or a failed profile. */
size_t dnt_profile_stack_names(const struct dnt_profile *p, uint32_t id, uint32_t *ids);

/* What the samples are, for the writers that describe their file (pprof's comment), when they are
 * not a sampler's: "exceptions thrown, from the runtime's ExceptionThrown events". what is
 * borrowed: it must outlive the profile. NULL (the default): the sampler's own description. */
void dnt_profile_describe(struct dnt_profile *p, const char *what);
const char *dnt_profile_description(const struct dnt_profile *p);

/* Frames are named at dnt_profile_finish by a chain: the trace's own method table first (its
 * method load and rundown events), then each resolver added here, in order (a perf map, perf's
 * symbols...), else `?!0xADDR`. A resolver writes the name of ip into buf and returns 1, or
 * returns 0 to pass it on. leaf: ip is the sample's own address, not a return address. ud must
 * live until finish. 0, or -1 when DNT_PROFILE_MAX_RESOLVERS are there already. */
/* Code the trace's method table does not cover may still lie in a module's ReadyToRun image
 * (precompiled methods the rundown leaves out: P/Invoke stubs, the sockets' epoll wait): such a
 * frame is named from the image's file, read from the path the trace gives, as
 * `Module!Type.Method`, or `Module!0xADDR` when the file cannot tell (TraceEvent's `?!?`). 0
 * turns that off for every profile of the process (the frames stay `?!0xADDR`, as TraceEvent
 * names them); 1 is the default. */
void dnt_profile_image_names(int on);

#define DNT_PROFILE_MAX_RESOLVERS 4
typedef int (*dnt_profile_namer)(void *ud, uint64_t ip, int leaf, char *buf, size_t cap);
int dnt_profile_add_resolver(struct dnt_profile *p, dnt_profile_namer fn, void *ud);

/* The samples' clock: ticks per second and the trace's start, in ticks. */
void dnt_profile_clock(const struct dnt_profile *p, uint64_t *hz, uint64_t *start);
/* When the trace began (UTC, ns since 1970; 0 when its header does not say) and how long its
 * counted samples span (ns from the clock's start to the last one; 0 when unknown). */
void dnt_profile_span(const struct dnt_profile *p, int64_t *start_unix_ns, uint64_t *duration_ns);
/* Whose the samples are: thread time (the SampleProfiler's, running or waiting: 0), a CPU
 * sampler's (added by dnt_profile_add_ips: perf), or blocked intervals each weighing its length
 * (dnt_profile_add_ips_ms: `waits`). */
enum dnt_samples_kind { DNT_SAMPLES_THREAD_TIME = 0, DNT_SAMPLES_CPU = 1, DNT_SAMPLES_BLOCKED = 2 };
int dnt_profile_cpu_samples(const struct dnt_profile *p);

/* Names a thread (perf's comm, /proc; a trace names its threads only in V6 thread rows, read
 * with the trace): name is copied, the last one given wins. 0, or -1 when out of memory. */
int dnt_profile_name_thread(struct dnt_profile *p, uint64_t thread, const char *name);
/* The thread's name, or NULL when none was given; owned by the profile, valid until the thread
 * is named again or the profile freed. */
const char *dnt_profile_thread_name(const struct dnt_profile *p, uint64_t thread);

/* Counts only the SampleProfiler samples that keep accepts, given the sample's thread and time
 * (CLOCK_MONOTONIC ns on Linux: the trace's ticks scaled to ns), as the trace streams: the on-CPU
 * and off-CPU views of `compare`, in constant memory. Call before loading; ud must live until
 * the load ends. */
typedef int (*dnt_profile_keep_fn)(void *ud, uint64_t thread, uint64_t time_ns);
void dnt_profile_set_filter(struct dnt_profile *p, dnt_profile_keep_fn keep, void *ud);

/* Which events of a trace are its samples. Call before loading.
 * - SAMPLER (the default): the SampleProfiler's, weighed in thread time (below);
 * - ALLOCATIONS: the runtime's GCAllocationTick events (Microsoft-Windows-DotNETRuntime id 10,
 *   keyword GC at verbose level, with stacks), one every ~100 KB a thread allocates: each counts
 *   one, weighing the bytes it stands for (its AllocationAmount64, else AllocationAmount). The
 *   profile's "ms" (dnt_profile_total_ms, each stack's ms) are then bytes;
 * - THREADS: the SampleProfiler's first sample of each thread only: what every thread does now
 *   (one sample per thread, weighing no time), as Go's goroutine profile.
 * - HEAP: no event: a heap snapshot's objects, given by dnt_profile_add_objects.
 * The pprof writer names its sample types after the source: samples/count and wall (cpu for
 * perf's)/nanoseconds; alloc_objects/count and alloc_space/bytes; threads/count; inuse_objects/count
 * and inuse_space/bytes (Go's heap profile's names). */
enum dnt_profile_source { DNT_SOURCE_SAMPLER, DNT_SOURCE_ALLOCATIONS, DNT_SOURCE_THREADS, DNT_SOURCE_HEAP };
void dnt_profile_set_source(struct dnt_profile *p, enum dnt_profile_source source);
enum dnt_profile_source dnt_profile_source(const struct dnt_profile *p);

/* The task library's and the thread pool's events (a trace recorded with `--profile
 * async-tasks`), for a SAMPLER profile, as TraceEvent's thread time takes them:
 * - IGNORED (the default): not read;
 * - SAMPLES: a task's scheduling, start and waits (TplEventSource 7, 8, 10, 11, 12) are samples
 *   of running code on their own stacks, as TraceEvent counts them;
 * - STITCHED: the same, and a task's samples are put under the stack that made the task (its
 *   creator's, then `STARTING TASK`, then the task's own frames from where the task library
 *   runs it), in the profile of the thread at the root of the chain of creators; the time each
 *   awaiting method waited is added as `AWAIT_TIME` samples under its stack
 *   (docs/async-stacks.md). Set before reading. */
enum dnt_profile_tasks { DNT_TASKS_IGNORED, DNT_TASKS_SAMPLES, DNT_TASKS_STITCHED };
void dnt_profile_set_tasks(struct dnt_profile *p, enum dnt_profile_tasks tasks);

/* Labels every sample carries (`serve`: the target's pid, process and --label pairs): n (key,
 * value) pairs kv[2i], kv[2i+1], copied; the pprof writer writes them as string labels after the
 * thread's. Replaces those given before. 0, or -1 when out of memory. */
int dnt_profile_set_labels(struct dnt_profile *p, const char *const *kv, size_t n);
size_t dnt_profile_nlabels(const struct dnt_profile *p);
/* The key (i even) or value (i odd) of label i / 2; owned by the profile. */
const char *dnt_profile_label(const struct dnt_profile *p, size_t i);

/* Callbacks to hand the nettrace parser, with the profile as their ud. */
void dnt_profile_callbacks(ntr_callbacks *cb);

/* Resolves names after the last byte; call once, before the queries below. 0, or -1 when memory
 * ran out (then, or at any earlier step: the profile answers as an empty one). */
int dnt_profile_finish(struct dnt_profile *p);
/* Whether an allocation failed while loading or finishing (sticky). */
int dnt_profile_failed(const struct dnt_profile *p);

/* Weights. Every sample carries the time it stands for, TraceEvent's rule (the thread time of
 * `dotnet-trace convert` and PerfView's SampleProfiler view): the time until the same thread's
 * next sample, whichever its kind (managed code or External); a gap counts in full; a thread's
 * last sample stands for no time (no later sample bounds it). A perf sample (dnt_profile_add_ips)
 * stands for its sampling period. The profile keeps both the counts and the times; what its
 * writers and its top tables weigh is chosen here (default: time). */
enum dnt_profile_weight {
  DNT_WEIGHT_TIME,    /* milliseconds */
  DNT_WEIGHT_SAMPLES, /* plain counts */
  DNT_WEIGHT_BYTES    /* the weights given to dnt_profile_add_event: bytes (allocations) */
};
void dnt_profile_set_weight(struct dnt_profile *p, enum dnt_profile_weight w);
enum dnt_profile_weight dnt_profile_weight(const struct dnt_profile *p);

/* Counts ev (its thread and its stack, named like any sample's) as one sample weighing `weight`
 * (bytes, for an allocation profile weighed with DNT_WEIGHT_BYTES) rather than time: profiles of
 * events other than the SampleProfiler's, which the caller picks and weighs while the profile is
 * fed the same stream through its callbacks (for the method table; with
 * dnt_profile_methods_only, so that the SampleProfiler's own samples do not count). ev is
 * borrowed for the call. */
void dnt_profile_add_event(struct dnt_profile *p, const ntr_event *ev, double weight);

/* A heap snapshot's objects (a DNT_SOURCE_HEAP profile weighed in DNT_WEIGHT_BYTES): `objects`
 * objects of `bytes` bytes in all under one stack (ips leaf first, borrowed for the call; each a
 * frame a resolver names: a type), counted as that many samples weighing those bytes, on thread
 * 0 (no thread: the folded and pprof writers leave it out). Call before dnt_profile_finish. */
void dnt_profile_add_objects(struct dnt_profile *p, const uint64_t *ips, size_t n, uint64_t objects, double bytes);

/* Totals. */
uint64_t dnt_profile_samples(const struct dnt_profile *p);
double dnt_profile_total_ms(const struct dnt_profile *p); /* the samples' time */
uint32_t dnt_profile_pid(const struct dnt_profile *p); /* the traced process (0: the trace does not say) */
/* The trace's own (nominal) sampling interval, as its header says; a perf profile's period. */
double dnt_profile_sample_ms(const struct dnt_profile *p);
/* The interval actually seen between the busiest thread's samples, 0 if too few to tell. */
double dnt_profile_measured_ms(const struct dnt_profile *p);
size_t dnt_profile_nthreads(const struct dnt_profile *p);
uint64_t dnt_profile_thread_id(const struct dnt_profile *p, size_t t);
uint64_t dnt_profile_thread_samples(const struct dnt_profile *p, size_t t);
double dnt_profile_thread_ms(const struct dnt_profile *p, size_t t);

/* The traced process's command line (EventPipe's ProcessInfo event, .NET 5 and later), or NULL.
 * Owned by the profile. */
const char *dnt_profile_command_line(const struct dnt_profile *p);

/* A view: the samples of some threads, through some frame, or not through another, as pprof's
 * -focus and -ignore and PerfView's IncPats and ExcPats narrow theirs. Every table, total and
 * writer then shows those alone (hidden samples still end the time of the one before them). */
struct dnt_profile_view {
  const char *const *threads; /* thread ids (decimal) or names; none: every thread */
  size_t nthreads;
  const char *focus;          /* only samples with a frame whose name holds this, or NULL */
  const char *exclude;        /* no sample with a frame whose name holds this, or NULL */
  int hide_idle;              /* leave out threads with no sample in managed code: idle pool
                                 threads, waits, the epoll loop (their samples are all External) */
};
/* After dnt_profile_finish; once. v is read during the call. 0, or -1 when out of memory. */
int dnt_profile_set_view(struct dnt_profile *p, const struct dnt_profile_view *v);
/* The time of the samples in native code or waiting (External: UNMANAGED_CODE_TIME), of what is
 * shown. */
double dnt_profile_external_ms(const struct dnt_profile *p);

/* One row of a top-N table. name points into the profile (valid until it is freed). */
struct dnt_profile_row {
  const char *name;
  uint64_t exclusive, inclusive;       /* samples */
  double exclusive_ms, inclusive_ms;   /* their time */
};

/* While on, dnt_profile_top charges a sample taken in native code (UNMANAGED_CODE_TIME) to the
 * innermost managed frame of its stack, as dotnet-trace's report folds it: a thread blocked in a
 * wait shows the managed method that waits. A sample with no managed frame at all keeps its
 * UNMANAGED_CODE_TIME row. Totals do not change. */
void dnt_profile_fold_native(struct dnt_profile *p, int on);

/* Fills rows (caller-owned, up to max) with the top functions of thread index t, or of all
 * threads when t == (size_t)-1, by exclusive or inclusive weight (time, or samples: see
 * dnt_profile_set_weight). Returns how many, or (size_t)-1 when out of memory. */
size_t dnt_profile_top(const struct dnt_profile *p, size_t t, int by_inclusive, struct dnt_profile_row *rows,
                       size_t max);

/* Function names by id (0 .. dnt_profile_nnames - 1); owned by the profile. */
size_t dnt_profile_nnames(const struct dnt_profile *p);
const char *dnt_profile_name(const struct dnt_profile *p, uint32_t id);

/* Walks every distinct (thread, stack of addresses) with its sample count and time; frames are function
 * ids, root first, the leaf last (UNMANAGED_CODE_TIME for a thread in native code). Two stacks
 * of addresses may have the same names (two places in one method): the folded writer merges
 * them. The array is valid during the call only. */
typedef void (*dnt_profile_stack_fn)(void *ud, uint64_t thread_id, const uint32_t *frames, size_t nframes,
                                     uint64_t samples, double ms);
int dnt_profile_each_stack(const struct dnt_profile *p, dnt_profile_stack_fn fn, void *ud); /* 0, -1: no memory */

/* Reads a trace file ("-" for stdin) into the profile and finishes it. 0 for a complete trace,
 * 1 for a truncated or damaged one whose readable part was used (msg: the warning to show), -1
 * when nothing could be read or memory ran out (msg: the error). msg: caller-owned, cap bytes. */
int dnt_profile_load(struct dnt_profile *p, const char *path, char *msg, size_t cap);

/* The same for n profiles (at most NTR_FANOUT_MAX) in one pass over the trace, each with its own
 * settings (filter, methods only, timeline); the first nfinish of them are finished (the others
 * are the caller's to finish: a perf profile named after this pass). Returns as above. */
int dnt_profiles_load(struct dnt_profile *const *profs, size_t n, size_t nfinish, const char *path, char *msg,
                      size_t cap);

/* ============================================================================================== */
/* A self-contained interactive flame graph (one SVG, with search, click-to-zoom and tooltips),
 * written with libxml2, in the spirit of flamegraph.pl. */

/* What a flame graph shows: its title, what the width measures ("thread time", "on-CPU time"...:
 * said in the title), and whether each thread gets a tower of its own under the root (else the
 * threads' stacks are merged, as flamegraph.pl draws them). Strings borrowed for the call. */
struct dnt_flamegraph_opts {
  const char *title;
  const char *measure; /* NULL: "thread time" */
  int by_thread;
};

/* Writes the profile's stacks to path as one SVG. 0, or -1 with the error in msg (caller-owned,
 * cap bytes); a file that could not be finished is removed. */
int dnt_flamegraph_write(const struct dnt_profile *prof, const struct dnt_flamegraph_opts *o, const char *path,
                         char *msg, size_t cap);

/* ============================================================================================== */
/* The text writers, streamed to a FILE * (caller-owned; not closed). */

enum dnt_profile_format {
  DNT_PROFILE_FOLDED,     /* "Thread N;root;...;leaf count" per distinct (thread, stack) */
  DNT_PROFILE_SPEEDSCOPE, /* one sampled profile per thread (speedscope's file format), named after
                             the thread; samples in time order with dnt_profile_keep_timeline,
                             else each distinct stack once */
  DNT_PROFILE_CHROMIUM,   /* the process's and threads' names ("M" events), then per-thread
                             complete ("X") events (needs dnt_profile_keep_timeline) */
  DNT_PROFILE_PPROF       /* google/pprof's profile.proto, gzip-compressed (binary) */
};

/* Writes prof in format, titled title (speedscope's name, pprof's first comment). 0, or -1 when out of memory (the output
 * is then incomplete). Write errors are the caller's to check on fp. */
int dnt_profile_write(const struct dnt_profile *prof, enum dnt_profile_format format, const char *title, FILE *fp);

/* The full name ("Namespace.Outer+Inner") of TypeDef row rid (1-based) of the assembly at path, an
 * IL or ReadyToRun PE file, into buf (cap bytes): 1, or 0 when the file or its metadata does not
 * read or has no such row. */
int dnt_assembly_type_name(const char *path, uint32_t rid, char *buf, size_t cap);
/* The full name ("Namespace.Outer+Inner.Method") of MethodDef row rid, as above. */
int dnt_assembly_method_name(const char *path, uint32_t rid, char *buf, size_t cap);
/* The names a generic method's instantiation gives its type's parameters (VAR: type) and its own
 * (MVAR: method), for its signature. */
struct dnt_generic_names {
  const char *const *type, *const *method;
  size_t ntype, nmethod;
};
/* Its parameters as the runtime's debugger interface writes them: "(Int32, System.String)";
 * inst (or NULL: "!0", "!!0") names the generic parameters. */
int dnt_assembly_method_params(const char *path, uint32_t rid, const struct dnt_generic_names *inst, char *buf,
                               size_t cap);
/* Field row rid of the assembly at path: its name, its type's element type and (a class or
 * value type's) TypeDefOrRef token, and its type's signature bytes (sig, at most sigcap: *siglen,
 * 0 when longer). 1, or 0. */
int dnt_assembly_field(const char *path, uint32_t rid, char *name, size_t cap, uint8_t *element, uint32_t *token,
                       uint8_t *sig, size_t sigcap, size_t *siglen);
/* The source line of IL offset il of MethodDef row rid, from the portable PDB at path, as SOS
 * picks it (the last visible sequence point at or before il): the document's name into file
 * (cap bytes) and the line. 1, or 0 when the file, the method or a line is not there. */
int dnt_pdb_line(const char *path, uint32_t rid, uint32_t il, char *file, size_t cap, uint32_t *line);
/* The TypeDef row of the top-level type ns.name in the assembly at path, 0 when none. */
uint32_t dnt_assembly_find_type(const char *path, const char *ns, const char *name);

#endif
