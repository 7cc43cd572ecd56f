/* perf/: Linux perf beside a .NET process. `perf record` as a child of the caller's libuv loop,
 * the `perf script` reader, the runtime's perf map and ELF-less symbol ranges, the CPU states of
 * threads, and perf samples turned into a profile. One public header; the library never prints and
 * never exits: errors and warnings come back as messages. */
#ifndef DNT_PERF_H
#define DNT_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "dsipc.h"
#include "dnt-profile.h"

/* ============================================================================================== */
/* A push parser for the text `perf script` prints, fed any split of its output, in constant
 * memory. dntrace runs perf itself, so the fields are ours to choose:
 *
 *   perf script -i FILE --ns --show-mmap-events -F comm,pid,tid,time,event,ip,sym,dso,trace
 *
 * which prints, per sample, a header `COMM PID/TID SECONDS.NANOS: EVENT: [TRACE]` (COMM may hold
 * spaces: ".NET TP Worker") and its callchain leaf first, one `\t  HEX SYM (DSO)` line a frame,
 * then a blank line; and a `... PERF_RECORD_MMAP2 PID/TID: [0xSTART(0xLEN) @ PGOFF ...]: PROT
 * FILE` line per executable mapping.
 *
 * perf prints a frame inside a file-backed mapping as an offset into that file, not as the
 * address it ran at. JIT code under W^X runs from `/memfd:doublemapper`, a file too, so the
 * address of a managed frame (what the runtime's perf map and method events give) is recovered
 * from the mappings: start + offset - pgoff (see dnt_perf_maps_absolute). */

#define DNT_PERF_MAX_LINE (64 * 1024)
#define DNT_PERF_MAX_FRAMES 512

/* Strings are valid only during the callback. */
typedef struct dnt_perf_frame {
  uint64_t addr;   /* as printed: an offset into dso for a file-backed mapping */
  const char *sym; /* NULL when perf printed [unknown] */
  const char *dso; /* NULL when perf printed [unknown] */
} dnt_perf_frame;

typedef struct dnt_perf_sample {
  const char *comm; /* the thread's name */
  int pid, tid;
  uint64_t time_ns; /* the clock perf recorded with (-k CLOCK_MONOTONIC: EventPipe's clock) */
  const char *event; /* "cpu-clock", "sched:sched_switch" */
  uint64_t period;   /* perf's period field when printed (cpu-clock: the ns of CPU time the sample
                        stands for, which perf adjusts to keep its frequency); 0 when not */
  const char *trace; /* a tracepoint's fields ("prev_comm=... ==> next_comm=..."), else "" */
  const dnt_perf_frame *frames; /* leaf first */
  size_t nframes;
  /* A sched tracepoint read from perf.data (dnt_perfdata_sched) rather than from perf script's
   * text: trace is "", comm "" and frames none; its fields are these. */
  int decoded;
  int left_runnable;  /* sched_switch: prev_state printed as R or R+ (preempted, not asleep) */
  uint64_t woken_tid; /* sched_waking: the thread woken (its pid field; 0 none) */
} dnt_perf_sample;

typedef struct dnt_perf_mmap {
  int pid;
  uint64_t start, len, pgoff, time_ns;
  const char *prot; /* "r-xp" */
  const char *file;
} dnt_perf_mmap;

typedef struct dnt_perf_script_cb {
  int (*on_sample)(void *ud, const dnt_perf_sample *s); /* non-zero stops the parse with it */
  int (*on_mmap)(void *ud, const dnt_perf_mmap *m);
} dnt_perf_script_cb;

typedef struct dnt_perf_script dnt_perf_script;

/* An observer of samples (valid only during the call): dnt_perf_reader_observe, dnt_perf_load. */
typedef void (*dnt_perf_observe_fn)(void *ud, const dnt_perf_sample *s);

/* cb is copied; ud is borrowed. NULL when out of memory. Free with dnt_perf_script_free. */
dnt_perf_script *dnt_perf_script_new(const dnt_perf_script_cb *cb, void *ud);
void dnt_perf_script_free(dnt_perf_script *p);

/* Feeds n bytes (any split). 0, a callback's non-zero value, or -ENOMEM. A malformed line is
 * counted and skipped (perf's own warnings share the stream), never fatal. */
int dnt_perf_script_feed(dnt_perf_script *p, const char *buf, size_t n);
/* The end of the input: a last sample without its blank line is delivered. */
int dnt_perf_script_finish(dnt_perf_script *p);

/* Whether a sample's event is `name`, also as perf prints it with its terms ("cpu-clock/freq=999/"). */
int dnt_perf_event_is(const char *event, const char *name);

struct dnt_perf_script_stats {
  uint64_t bytes, samples, mmaps, malformed_lines, truncated_chains;
};
void dnt_perf_script_stats(const dnt_perf_script *p, struct dnt_perf_script_stats *out);

/* ---- the scheduler's tracepoints read from perf.data itself ----
 * perf script spends most of its time on a recording of switches printing each tracepoint
 * through its format string, and compare needs two numbers of each: they are read from the file
 * (perfdata.c), and perf script prints the cpu-clock samples alone (-F trace: with no fields). */

#define DNT_PERFDATA_UNSUPPORTED (-1000) /* not a file in the form read here: have perf print it */

struct dnt_perfdata_stats {
  uint64_t switches, wakings;
  unsigned tracepoint_events;       /* the file's tracepoint events (perf script refuses -F trace: without) */
  unsigned other_tracepoint_events; /* those not read here (others, or a format not understood) */
};

/* Hands every sched:sched_switch and sched:sched_waking sample of the perf.data file in buf (len
 * bytes, borrowed) to fn, in the file's order, as a dnt_perf_sample with
 * `decoded` set (valid only during the call). The whole file is checked first, so fn sees all its
 * samples or none. fn NULL: the check alone. stats (caller-owned, may be NULL): what was found. 0; DNT_PERFDATA_UNSUPPORTED for a file in another form (pipe mode, big endian,
 * compressed, tracepoints without their formats...: perf script can still print it), or -ENOMEM;
 * then msg (caller-owned, cap bytes) says why. */
int dnt_perfdata_sched(const uint8_t *buf, size_t len, dnt_perf_observe_fn fn, void *ud,
                       struct dnt_perfdata_stats *stats, char *msg, size_t cap);
/* The same on the perf.data file open at fd (borrowed; read with pread, its offset unchanged),
 * a few MiB at a time, so that memory stays flat in the file's size. A file cut while it is read
 * is DNT_PERFDATA_UNSUPPORTED ("the file was cut..."): fn may then have seen part of it. */
int dnt_perfdata_sched_fd(int fd, dnt_perf_observe_fn fn, void *ud, struct dnt_perfdata_stats *stats, char *msg,
                          size_t cap);

/* A perf.data cut short (its header claims records past the end of the file: a full disk, a copy
 * stopped; perf script then fails without printing one sample), open at fd (borrowed): a copy
 * written to out (borrowed, an empty file) holding every whole record, its header saying so,
 * without the feature sections (they followed the data). 0 when the copy was written (*kept of
 * the *claimed bytes of records in it); 1 when the file is not cut (nothing written: perf script
 * reads it as it is, or says what it is); a negative errno with msg (caller-owned, cap bytes). */
int dnt_perfdata_mend(int fd, int out, uint64_t *kept, uint64_t *claimed, char *msg, size_t cap);

/* ---- the mappings of one run, to turn printed offsets back into addresses ---- */

typedef struct dnt_perf_maps dnt_perf_maps;

/* NULL when out of memory. Free with dnt_perf_maps_free. */
dnt_perf_maps *dnt_perf_maps_new(void);
void dnt_perf_maps_free(dnt_perf_maps *m);
/* Records an executable mapping (its file copied). 0 or -ENOMEM. */
int dnt_perf_maps_add(dnt_perf_maps *m, const dnt_perf_mmap *mm);
/* The address a frame ran at: for a frame printed as an offset into dso, the mapping of that
 * file (in pid) holding the offset gives start + addr - pgoff; a frame with no file mapping
 * (anonymous code, the kernel) was printed as its address already. 0 when dso is mapped but not
 * at that offset. */
uint64_t dnt_perf_maps_absolute(const dnt_perf_maps *m, int pid, const dnt_perf_frame *f);

/* ============================================================================================== */
/* Code address ranges and their names: the runtime's perf map (/tmp/perf-PID.map, written with
 * DOTNET_PerfMapEnabled or after the IPC EnablePerfMap command), for the frames perf cannot name. */

struct dnt_symbol {
  uint64_t start, end;
  uint32_t seq; /* the order added: of two ranges that start alike, the later wins */
  char *name;
};

/* Caller-provided storage, zeroed (= empty); free with dnt_symtab_release. */
struct dnt_symtab {
  struct dnt_symbol *v;
  size_t n, cap;
  int sorted;
};

/* Adds [start, start + size) (name copied). 0 or -ENOMEM. */
int dnt_symtab_add(struct dnt_symtab *t, uint64_t start, uint64_t size, const char *name);
/* The name of the innermost range holding addr, or NULL. Sorts on first use after adds. */
const char *dnt_symtab_find(struct dnt_symtab *t, uint64_t addr);
void dnt_symtab_release(struct dnt_symtab *t);

/* Reads a perf map (`STARTHEX SIZEHEX NAME` lines) into t, streaming. Lines that are not that are
 * counted in *bad (may be NULL), not fatal. 0, or -errno when the file cannot be read. */
int dnt_perfmap_load(struct dnt_symtab *t, const char *path, size_t *bad);

/* A perf map name as a frame name: `int32 [Sample] Sample.CpuWork::CountPrimes(int32)[OptimizedTier1]`
 * -> `Sample!Sample.CpuWork.CountPrimes`, as the EventPipe view names it; a stub
 * (`stub ReportStubBlock<X>`) -> `[stub] ReportStubBlock<X>`. Writes into out and returns it. */
const char *dnt_perfmap_frame_name(const char *raw, char *out, size_t cap);

/* ============================================================================================== */
/* What perf saw each thread of a target do, and the state of a thread at any moment of the
 * recording: on a CPU, blocked (asleep) or runnable (preempted or woken, waiting for a CPU).
 * Fed with the samples of `perf script` (cpu-clock, and sched_switch/sched_waking where tracefs
 * was readable); used by `dntrace compare` to classify EventPipe's samples. Both sides use
 * CLOCK_MONOTONIC nanoseconds. docs/native-stacks.md explains the method and its error bound. */

enum dnt_cpu_state {
  DNT_ON_CPU,
  DNT_OFF_BLOCKED,
  DNT_OFF_RUNNABLE,
  DNT_UNCOVERED, /* outside what perf recorded */
};

typedef struct dnt_cpu_states dnt_cpu_states;

/* An empty record; NULL when out of memory. Free with dnt_cpu_states_free. */
dnt_cpu_states *dnt_cpu_states_new(void);
void dnt_cpu_states_free(dnt_cpu_states *cs);

/* One sample of perf script (a dnt_perf_observe_fn; ud is the dnt_cpu_states). Samples may come
 * in any order. Other events are ignored. 0, or -ENOMEM (then the record is unusable). */
int dnt_cpu_states_add(dnt_cpu_states *cs, const dnt_perf_sample *s);
void dnt_cpu_states_observe(void *ud, const dnt_perf_sample *s);
/* A thread's name, better than perf's comm (the target's /proc at recording time); before
 * dnt_cpu_states_finish. 0, or -ENOMEM. */
int dnt_cpu_states_name(dnt_cpu_states *cs, uint64_t tid, const char *name);
/* The names of a `.threads` file (collect --native: "TID<TAB>NAME" lines, the target's /proc at
 * recording time) through dnt_cpu_states_name. Lines that are not that are skipped, and so is a
 * line longer than 255 bytes. 0, -errno when the file cannot be read, or -ENOMEM. */
int dnt_cpu_states_load_names(dnt_cpu_states *cs, const char *path);

/* After the last sample: sorts, measures perf's period and takes the sampler's own brief stops
 * out (window_ms 0: one and a half periods). 0, or -ENOMEM. */
int dnt_cpu_states_finish(dnt_cpu_states *cs, double window_ms);
/* The state of thread tid at time t_ns; only after dnt_cpu_states_finish. */
enum dnt_cpu_state dnt_cpu_state_at(const dnt_cpu_states *cs, uint64_t tid, uint64_t t_ns);

struct dnt_cpu_states_info {
  double period_ms, window_ms;  /* perf's measured period, the window used */
  uint64_t cpu_samples;         /* cpu-clock samples of the target */
  uint64_t first_ns, last_ns;   /* what perf recorded */
  int has_switches;             /* sched_switch records were there */
  int incomplete;               /* memory ran out while adding: the record misses samples */
};
void dnt_cpu_states_info(const dnt_cpu_states *cs, struct dnt_cpu_states_info *out);
/* perf's view of one thread: its name ("" unknown; borrowed from cs) and cpu-clock samples. */
const char *dnt_cpu_states_thread(const dnt_cpu_states *cs, uint64_t tid, uint64_t *cpu_samples);
/* The CPU time of thread tid by its cpu-clock samples' periods added up (ns): what perf measured
 * it ran, however perf adjusted its period; 0 when the samples carried no period. */
uint64_t dnt_cpu_states_thread_cpu_ns(const dnt_cpu_states *cs, uint64_t tid);

/* ============================================================================================== */
/* `perf script` output of one process turned into a dnt_profile: the frames' addresses recovered
 * from the mappings (the perf script reader above), managed frames named by the profile's own method table (a
 * nettrace with method events loaded into it first) or else the runtime's perf map, native and
 * kernel frames by perf's symbols (`libcoreclr.so!Symbol`, `[kernel]!schedule`). From there
 * report, folded stacks, speedscope and flame graphs work as for an EventPipe trace. */

typedef struct dnt_perf_reader dnt_perf_reader;

/* Reads samples of `event` (e.g. "cpu-clock"; "": none, for observers alone) of process pid (0: every process) into prof
 * (borrowed), weighing each sample_ms. perfmap (borrowed, may be NULL) names JIT code the
 * method table does not. Both must outlive the reader, which must outlive dnt_profile_finish
 * (it names frames then). NULL when out of memory; free with dnt_perf_reader_free. */
dnt_perf_reader *dnt_perf_reader_new(struct dnt_profile *prof, int pid, const char *event, double sample_ms,
                                     struct dnt_symtab *perfmap);
void dnt_perf_reader_free(dnt_perf_reader *r);

/* Feeds `perf script` text (any split). 0 or -ENOMEM. */
int dnt_perf_reader_feed(dnt_perf_reader *r, const char *buf, size_t n);
/* The end of the text. 0 or -ENOMEM. Then call dnt_profile_finish(prof). */
int dnt_perf_reader_finish(dnt_perf_reader *r);

/* Samples taken, and how many of their frames no table could name. */
void dnt_perf_reader_stats(const dnt_perf_reader *r, struct dnt_perf_script_stats *st, uint64_t *samples_used);

/* Sees every sample perf script gave (all events, sched_switch too), before the profile does
 * (dnt_perf_observe_fn, above). */
void dnt_perf_reader_observe(dnt_perf_reader *r, dnt_perf_observe_fn fn, void *ud);

struct dnt_perf_load_info; /* below */

/* For an observer: s's frames as the addresses they ran at, leaf first, into ips (caller-owned,
 * room for DNT_PERF_MAX_FRAMES), and what perf named them kept for the profile's naming chain.
 * The number of frames, or -ENOMEM. */
int dnt_perf_reader_addresses(dnt_perf_reader *r, const dnt_perf_sample *s, uint64_t *ips);

/* Runs `perf script` on data (argv, no shell) into r, read as a stream, with the call chains of
 * the tracepoints printed too (sched_switch, sched_waking: `dntrace waits`); the runtime's perf
 * map `map` (may be NULL or missing) is loaded first into the symtab r was made with. info:
 * caller-owned, filled in. 0, or -1 with info->error. */
int dnt_perf_reader_run(dnt_perf_reader *r, const char *data, const char *map, struct dnt_perf_load_info *info);

/* What dnt_perf_load has to say: the error when it fails, warnings (lines) when it goes on
 * without a part, and how fast perf script's text was read. */
struct dnt_perf_load_info {
  char error[1024];
  char warnings[2048];
  uint64_t script_bytes;
  double script_seconds; /* perf script's run, reading included */
  uint64_t sched_read;   /* sched tracepoints read from the file itself (dnt_perfdata_sched) */
};

/* The post-processing of a recording: the perf map copy `map` (may be NULL or missing) loaded,
 * then `perf script` run on `data` (argv, no shell) and read as a stream into prof. fn (may be
 * NULL) observes every sample: the sched tracepoints first, read from the file itself (`decoded`
 * set), then perf script's; perf script prints the tracepoints (chain-less) only for a file
 * dnt_perfdata_sched cannot read or one with other tracepoints, and never without fn. The frames
 * are named when prof is finished, which is the caller's to do once prof has the method table of
 * the trace recorded beside (dnt_profile_methods_only and a load of that trace: after this call,
 * so that the trace's pass can also see what perf saw). perfmap: caller-owned storage for the map
 * (release it after the profile). info: caller-owned, filled in. Returns the reader (free it
 * after prof), or NULL (info->error). */
dnt_perf_reader *dnt_perf_load(struct dnt_profile *prof, const char *data, const char *map, double sample_ms,
                               struct dnt_symtab *perfmap, dnt_perf_observe_fn fn, void *ud,
                               struct dnt_perf_load_info *info);

/* ============================================================================================== */
/* Linux perf beside an EventPipe session, for `dntrace perf` and `collect --native`: the checks
 * that say in one line why perf cannot run, `perf record` as a child on the caller's libuv loop
 * (argv, never a shell), and the runtime's perf map turned on for the run and off again. */

/* perf on PATH and allowed to watch process pid; 0, 1 with a warning in msg (it may, but not all of
 * it), or -1 with the fix in msg (caller-owned, cap bytes). pid 0: no target chosen yet, only what
 * holds for any target is checked (perf installed, perf not root's alone). */
int dnt_perf_check(int pid, char *msg, size_t cap);

/* The kernel's rule for kernel.perf_event_paranoid (`paranoid`), for a caller of effective uid
 * `euid` and a target `pid` of effective uid `target_uid`: at 1 or less anyone may watch (ptrace
 * rules apply), at 2 a user may watch the user space of its own processes (perf then falls back to
 * :u events), at 3 (Debian's default) only root. Same returns as dnt_perf_check. */
int dnt_perf_check_access(int paranoid, unsigned euid, int pid, unsigned target_uid, char *msg, size_t cap);

/* Whether perf may record the scheduler's switches here (tracefs readable). */
int dnt_perf_can_trace_sched(void);

struct dnt_perf_record {
  uv_process_t proc;
  uv_pipe_t err;
  int running, status, signal, started;
  char err_text[16 * 1024];
  size_t err_len;
  char ctl_dir[256], ctl_arg[600]; /* perf's control fifos, removed when it exits */
  char msg[17 * 1024];             /* why start or ok failed (perf's own words included) */
  int ctl_fd, ack_fd;
  void (*on_exit)(void *ud);
  void *ud;
  int open_handles; /* the libuv handles of pr not closed yet */
  /* dnt_perf_record_start_async's: perf's ack watched on the loop, with a deadline */
  uv_poll_t ack_poll;
  uv_timer_t ack_timer;
  int waiting, polling;
  char ack[16];
  size_t ack_len;
  void (*on_started)(void *ud, int rc);
  void (*on_closed)(void *ud);
};

/* Children (perf record) are started through argv_prefix + their own argv, e.g. a helper that
 * makes them die with the caller (PR_SET_PDEATHSIG): a killed dntrace must not leave perf
 * recording. NULL: started directly. argv_prefix: borrowed for the life of the process. */
void dnt_perf_set_child_wrapper(const char *const *argv_prefix);

/* Removes what a killed dntrace left in tmpdir (NULL: $TMPDIR or /tmp): perf's control
 * directories of processes that no longer exist. Returns how many were removed. */
int dnt_perf_remove_stale(const char *tmpdir);

/* Perf maps left on by a dntrace that was killed before turning them off (SIGKILL, a crash):
 * each one whose target still runs is turned off again and, if that run made the file, the file
 * removed; the file a run made is removed too when its target is gone and no process has its pid.
 * Lines saying what was done go to report (caller-owned, cap bytes). Returns how many maps were
 * turned off. dnt_perfmap_begin/end keep the notes this needs. */
int dnt_perfmap_restore_forgotten(char *report, size_t cap);

/* Starts `perf record -e cpu-clock/freq=hz/ [-e sched:sched_switch -e sched:sched_waking] -g
 * -k CLOCK_MONOTONIC -D -1 --control fifo:... -p pid -o out` and returns once perf records (its
 * events turned on through the control fifo and acknowledged), so that what follows is all in
 * the recording. on_exit(ud) is called once perf has exited. pr: caller-owned, lives until then.
 * 0 or -1 (the error in pr->msg; a perf that started is being stopped: run the loop to its exit). */
int dnt_perf_record_start(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, int sched, const char *out,
                          void (*on_exit)(void *ud), void *ud);
/* The same without waiting for perf on the loop (dntrace serve, whose loop answers /metrics
 * meanwhile), cpu-clock alone, and with -N: perf's build-id cache (~/.debug) gets no copy of
 * the files sampled, as the recording is read at once: returns once perf is started; on_started(ud, rc) comes on the loop when perf
 * records (rc 0: its events on and acknowledged) or will not (rc -1, why in pr->msg, perf
 * stopped if it ran); then on_closed(ud) once perf has exited and every handle of pr is closed:
 * only then may pr's memory go. Both always come, never from inside this call. pr: caller-owned.
 * After it, dnt_perf_record_stop and (after on_closed) dnt_perf_record_ok as for the blocking start. */
void dnt_perf_record_start_async(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, const char *out,
                                void (*on_started)(void *ud, int rc), void (*on_closed)(void *ud), void *ud);
/* Asks perf to stop (SIGINT: it writes its file, then exits). */
void dnt_perf_record_stop(struct dnt_perf_record *pr);
/* After exit: whether perf did its job (1); if not (0), pr->msg says why, in its own words. */
int dnt_perf_record_ok(struct dnt_perf_record *pr, const char *out);

/* The runtime's perf map for the length of a run: on through IPC unless the environment had it
 * on already, off again (and its file removed if the run made it) at the end. */
struct dnt_perfmap_run {
  int was_on, we_enabled, existed;
  int saved;          /* end copied the map to its save_to */
  int pid;            /* the target whose map this run turned on */
  char path[2200];    /* the map as seen from here, through /proc/PID/root */
  char warning[2400]; /* what did not work, after begin and after end ("" when all did) */
};
/* For the process pid (ns_pid: its pid in its own namespace, 0 if the same) whose diagnostic
 * socket is ep_path (borrowed). m: caller-owned. */
void dnt_perfmap_begin(struct dnt_perfmap_run *m, int pid, int ns_pid, const char *ep_path);
/* Copies the map to save_to (if not NULL), then turns it off (a target that has ended is not
 * warned about). */
void dnt_perfmap_end(struct dnt_perfmap_run *m, const char *ep_path, int target_ended, const char *save_to);

/* ============================================================================================== */
/* Why threads wait (`dntrace waits`): every off-CPU interval of a thread (a sched_switch out in a
 * sleeping state, to the next sign of it running: a switch in, a cpu-clock sample, a record made
 * in its context), the stack it blocked in, and its waker: the thread whose sched_waking of it
 * came last before it ran, with that thread's stack at the wake-up. perf records a wake-up in the
 * waker's context, so with `perf record -p` only wakers inside the target are seen; a wake-up
 * from an interrupt (a timer ending a sleep) is recorded in whatever thread the interrupt hit,
 * and is told apart by its kernel frames: both are "no waker in the process".
 *
 * The intervals become samples of a profile (caller-owned), weighing their length, with the
 * waker's frames stacked above the waiter's (PerfView's ready-thread shape): root first, the
 * blocked stack, a `[woken by THREAD]` frame (or `[no waker in the process]`), the waker's stack.
 * glibc is built without frame pointers, so perf's chain of a thread blocked in the kernel often
 * stops in libc; the blocked thread's managed stack then comes from EventPipe's SampleProfiler
 * samples of it taken while it was blocked (dnt_waits_managed_sample), put below perf's frames. */

typedef struct dnt_waits dnt_waits;

/* NULL when out of memory. Free with dnt_waits_free (NULL is fine). */
dnt_waits *dnt_waits_new(void);
void dnt_waits_free(dnt_waits *w);

/* Runs perf script on data into w (a reader made for prof, counting none of perf's samples into
 * it, whose naming chain then names perf's frames: the perf map `map` loaded into perfmap,
 * perf's own symbols). prof and perfmap: caller-owned, must outlive the reader. Returns the
 * reader (free it after prof is finished), or NULL with info->error. */
dnt_perf_reader *dnt_waits_load(dnt_waits *w, struct dnt_profile *prof, const char *data, const char *map,
                                struct dnt_symtab *perfmap, struct dnt_perf_load_info *info);

/* The same with the caller feeding `perf script` text (printed as dnt_perf_reader_run runs it)
 * through dnt_perf_reader_feed and _finish: for tests and fuzzing. The reader (caller's to free,
 * after prof is finished) feeds w until dnt_waits_finish. NULL when out of memory. */
dnt_perf_reader *dnt_waits_reader(dnt_waits *w, struct dnt_profile *prof, struct dnt_symtab *perfmap);

/* A SampleProfiler sample of thread tid at t_ns (CLOCK_MONOTONIC), its managed frames' names root
 * first (copied; UNMANAGED_CODE_TIME is left out). Marks tid as a managed thread: once any is
 * given, only the intervals of managed threads are kept. 0 or -ENOMEM. */
int dnt_waits_managed_sample(dnt_waits *w, uint64_t tid, uint64_t t_ns, const char *const *names, size_t n);

/* A thread's name (copied; the last one given wins; else perf's comm). 0 or -ENOMEM. */
int dnt_waits_name_thread(dnt_waits *w, uint64_t tid, const char *name);
/* Each name of a `.threads` file (collect --native: "TID<TAB>NAME" lines, the target's /proc at
 * recording time) given to fn (name borrowed for the call); other lines and lines over 255 bytes
 * are skipped. 0, -errno when the file cannot be read, or fn's nonzero. */
int dnt_threads_file_each(const char *path, int (*fn)(void *ud, uint64_t tid, const char *name), void *ud);
/* The names of a `.threads` file (collect --native: "TID<TAB>NAME" lines, the target's /proc at
 * recording time); other lines and lines over 255 bytes are skipped. 0, -errno when the file
 * cannot be read, or -ENOMEM. */
int dnt_waits_load_names(dnt_waits *w, const char *path);

/* Which intervals finish keeps: of one thread (tid, else name, else all), at least min_ms long. */
struct dnt_waits_filter {
  uint64_t tid;
  const char *name; /* borrowed */
  double min_ms;
};

struct dnt_waits_info {
  uint64_t intervals, kept, unended; /* unended: still blocked when perf stopped (left out) */
  uint64_t switches, wakings, interrupt_wakings;
  double kept_ms;
};

/* Pairs the intervals and adds those the filter (borrowed; NULL: all) keeps to prof (before
 * dnt_profile_finish), naming its threads. Call once, after perf's text. info: caller-owned
 * (may be NULL). 0 or -ENOMEM. */
int dnt_waits_finish(dnt_waits *w, struct dnt_profile *prof, const struct dnt_waits_filter *f,
                     struct dnt_waits_info *info);

/* After dnt_waits_finish: each thread it has events of that a filter could keep (the managed
 * ones, when any is known), with its name (NULL: none), in thread id order. */
void dnt_waits_each_thread(const dnt_waits *w, void (*fn)(void *ud, uint64_t tid, const char *name), void *ud);

/* The wait's kind from the names of a blocked stack's frames (`[kernel]!futex_wait`..., and
 * System.Threading.Thread.Sleep, a futex wait on Linux, for a sleep when no thread of the
 * process ended the wait: woken_by_a_thread 0): "sleep", "futex/monitor", "epoll/socket",
 * "file I/O", "page fault" or "other". names: borrowed. */
const char *dnt_waits_kind(const char *const *names, size_t n, int woken_by_a_thread);

/* The views of a finished profile of waits: blocked time by (thread, blocked stack, waker
 * stack), longest first, its top rows (0: all) as a text table or as JSON, written to fp
 * (caller-owned). 0, or -ENOMEM. */
int dnt_waits_write_table(const struct dnt_profile *prof, size_t top, FILE *fp);
int dnt_waits_write_json(const struct dnt_profile *prof, size_t top, FILE *fp);

/* Names the threads of prof perf left unnamed (":TID") as the kernel names them now, where they
 * still run (dntrace perf, serve --cpu). 0, or -1 when out of memory. */
int dnt_perf_name_threads(struct dnt_profile *prof, int pid);

#endif
