/* Private to agent/: what the files of the server (`dntrace serve`'s engine) share (serve.c:
 * targets, HTTP; serve-job.c: one profile request, its session parsed on the thread pool;
 * serve-cpu.c: --cpu, perf beside that session; serve-push.c: --push windows). */
#ifndef DNT_SERVE_INT_H
#define DNT_SERVE_INT_H

#include <stdint.h>
#include <uv.h>

#include "agent-int.h"
#include "dnt-agent.h"
#include "dnt-analyze.h"
#include "dnt-counters.h"
#include "dnt-http.h"
#include "dnt-perf.h"
#include "dnt-profile.h"
#include "dsipc.h"
#include "ntr.h"

#define COUNTERS_BUFFER_MB 16
#define PROFILE_BUFFER_MB 64
#define RECONNECT_MS 1000
#define DEFAULT_RESCAN_MS 5000
#define DEFAULT_SECONDS 30 /* as Go's /debug/pprof/profile */
#define DEFAULT_ALLOCS_SECONDS 5 /* Go's allocs answers at once: a scraper asking without seconds= waits little */
#define MAX_SECONDS 300
#define MAX_JOBS 8          /* profile sessions at once, all targets together */
#define THREADS_WINDOW_MS 20 /* the sampler runs this long for a threads snapshot (as `stacks`) */
#define HEAP_TIMEOUT_MS 120000 /* a heap walk not over by then is given up (gcdump's --timeout) */
#define HEAP_KEYWORDS 0x1980001 /* GC | Type | GCHeapDump | GCHeapCollect | GCHeapAndTypeNames */
#define HEAP_BUFFER_MB 1024 /* the walk is a burst: dotnet-gcdump asks for as much */
#define STOP_GRACE_MS 30000 /* how long the runtime may take to send its rundown after StopTracing */
#define SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define METHOD_KEYWORDS 0x18 /* Loader | Jit: MethodLoadVerbose, ModuleLoad (--cpu's names) */
#define MAX_LABELS DNT_SERVER_MAX_LABELS
#define CPU_HZ 99 /* --cpu: perf's samples per second and CPU (Go samples at 100 Hz; 99 keeps clear of timers) */

struct job;
struct pusher;
#define serve dnt_server /* the engine's own name, public (dnt-agent.h) */

enum job_kind { JOB_PROFILE, JOB_ALLOCS, JOB_THREADS, JOB_HEAP, JOB_KINDS };
extern const char *const serve_job_names[JOB_KINDS]; /* "profile", "allocs", "threads", "heap" */

struct target {
  struct serve *sv;
  struct target *next;
  int pid;
  char name[256];
  unsigned long long key; /* its socket's key (the process's start time): one process, not a pid */
  dsipc_endpoint ep;       /* its diagnostic socket (--cpu turns the perf map on through it) */
  struct dnt_follow *f;    /* agent/: its session (counters, the rules' events, --ring), its rules, its ring */
  char *ring_path;         /* a save-ring under way writes here */
  struct dnt_counter_table table;
  char *prom_labels; /* pid="..",process="..",k="v" */
  int table_full;    /* out of memory once: said */
  int live, ended, seen;
  struct job *jobs[JOB_KINDS]; /* the request of each kind running on it */
  struct pusher *push;         /* --push: its windows and what waits to be sent */
};

struct serve {
  struct dnt_server_config c; /* the caller's (its pointers borrowed) */
  uv_loop_t *loop;
  dnt_http_server *http;
  struct target *targets;
  unsigned njobs;
  uv_timer_t reconnect, rescan, push_tick;
  int timers; /* the timers are initialised (closed on the way out) */
  int quitting;
  struct dnt_incidents *incidents; /* --rule: what fired and its actions */
  struct dnt_follow_config fc;     /* what every target's following shares */
};

/* A line for the caller (say_kind: the log, a note, a warning). */
#define serve_say(sv, kind, ...) dnt__say((sv)->c.say, (sv)->c.say_ud, kind, __VA_ARGS__)

struct job {
  struct serve *sv;
  struct target *t;
  enum job_kind kind;
  int debug; /* threads?debug=1: text */
  uint64_t window_ms;
  dsipc_session *s; /* its session (NULL once closed) */
  int starting;     /* the runtime has not answered its start yet */
  ntr_parser *parser;
  struct dnt_profile *prof;
  struct dnt_heap_analysis *heap; /* a heap request's walk (prof then holds only the labels) */
  dnt_http_pending *pending;
  uv_timer_t timer;
  int pid;        /* the target's, kept: the work below never looks at the target */
  char name[256];
  int stopped, ended, released, closing;
  int session_up; /* the session has started (the window starts with it, and with perf for --cpu) */
  int parse_failed; /* the worker's: read on the loop only after its work item */
  char msg[256];
  int loop_failed;  /* the loop's: the stream given up on (backlog, no rundown) */
  char loop_msg[256];
  /* the stream's bytes are parsed on libuv's thread pool, one work item at a time: parsing the
   * rundown and writing the profile take tens of milliseconds, which the loop (and /metrics)
   * must not wait for. While a work item runs, only it touches parser and prof. */
  uv_work_t work;
  int working, finishing;
  uint8_t *in, *busy;      /* bytes arrived / being parsed */
  size_t nin, capin, nbusy, capbusy;
  struct dnt_http_reply answer; /* what the last work item made */
  /* --push windows: no HTTP client waits; done() gets the answer, and the samples kept are those
   * from from_ns (inclusive) to until_ns (exclusive, CLOCK_MONOTONIC ns as the runtime's
   * timestamps), so that windows in turn neither miss nor repeat a sample */
  int push;
  void (*done)(struct job *j, struct dnt_http_reply *answer);
  void (*started)(struct job *j);
  uint64_t from_ns, until_ns; /* until_ns: read by the worker, written by the loop (atomics) */
  int64_t from_unix, until_unix;
  struct job *stopping_next; /* a --push window stopped, not yet sent: its pusher's list */
  struct cpu_run *cpu;       /* --cpu: perf records beside the session, which carries the method events */
};

/* --cpu: `perf record -e cpu-clock` of the target beside the job's session (which then carries
 * the method events), `perf script` read into the profile on the thread pool (serve-cpu.c). */
struct cpu_run {
  struct dnt_perf_record perf;
  struct dnt_perfmap_run pm; /* the runtime's perf map, on for the request: it names JIT code */
  char ep_path[4096];        /* the target's diagnostic socket (the perf map is turned on through it) */
  int ns_pid;
  char dir[256], data[300];  /* a directory of our own for perf.data ($TMPDIR/dntrace-perf-PID-XXXXXX) */
  int state, perf_ok, cleaned;
  uv_work_t work; /* its own work items (the perf map on, the cleanup), beside the job's */
  int working;
  dnt_perf_reader *reader; /* names perf's frames: kept until the profile is written */
  struct dnt_symtab perfmap;
};

struct pusher {
  struct job *cur, *next; /* the window sampling now; the next one, starting */
  struct job *stopping;   /* windows stopped, their rundown or profile still to come */
  struct window {
    char *body, *target; /* the multipart body; /ingest?name=...&from=&until=... */
    size_t len;
  } q[2];                 /* what waits to be sent: at most 2 windows, then the newest is dropped */
  size_t nq;
  dnt_http_post *post;
  uv_timer_t retry;
  unsigned backoff_ms;
  unsigned long long sent, dropped, failed;
  int away; /* said once per outage */
};

/* ---- serve-job.c ---- */

/* Starts a job of kind on t for window_ms (0: until stopped, a --push window) and defers rep's
 * answer to it (rep NULL: a --push window, t->push->next). 0, or the HTTP status to answer now
 * (with text written into err). */
int serve_job_start(struct serve *sv, struct target *t, enum job_kind kind, uint64_t window_ms, int debug,
                    struct dnt_http_reply *rep, char *err, size_t cap);
/* Ends the job: its session and slot now, its memory once no work item runs. */
void serve_job_release(struct job *j);
/* The job's timer: the window is over (StopTracing), then the rundown's deadline. */
void serve_job_timer(uv_timer_t *h);

/* --cpu: something of the request's perf side is over: the job goes on (its window, its end,
 * its memory). */
void serve_job_progress(struct job *j);
/* The window is over now (StopTracing, perf stopped). */
void serve_job_window_over(struct job *j);

/* Labels every sample of prof: pid, process, the --label pairs. 0, or -1 when out of memory. */
int serve_job_labels(struct serve *sv, const struct target *t, struct dnt_profile *prof);
/* rep's answer: status, and text as its body (out of memory: no body). */
void serve_answer_text(struct dnt_http_reply *rep, int status, const char *text);
/* A target's labels as key, value pairs into kv (2 * (MAX_LABELS + 2) entries; pid_buf holds its
 * pid's text, 24 bytes, both the caller's): pid, process, the --label pairs. Returns the pairs. */
size_t serve_target_label_kv(const struct serve *sv, const struct target *t, const char **kv, char *pid_buf);

/* ---- serve-cpu.c ---- */

/* --cpu: whether perf may watch t (at perf_event_paranoid 2, only one's own processes). 0, or
 * 503 with the reason written into err. */
int serve_cpu_check(const struct target *t, char *err, size_t cap);
/* --cpu, a profile job j on t: perf's side begun (the perf map on, then perf record). 0, or the
 * HTTP status to answer now (with text written into err). */
int serve_cpu_begin(struct job *j, const struct target *t, char *err, size_t cap);
int serve_cpu_recording(const struct job *j); /* perf records */
int serve_cpu_recorded(const struct job *j);  /* perf has exited (or never started), its handles closed */
void serve_cpu_stop(struct job *j);           /* perf stops (the window is over, or the job goes) */
/* On the thread pool, the method events parsed: perf's samples into j->prof. 0, or -1 with the
 * error answer written into rep. */
int serve_cpu_profile(struct job *j, struct dnt_http_reply *rep);
/* The job goes: 1 once perf's side is over and cleaned up (the perf map off, perf.data removed);
 * 0 while it is not, serve_job_progress then comes again. */
int serve_cpu_idle(struct job *j);
void serve_cpu_free(struct cpu_run *c); /* NULL: nothing */

/* ---- serve-push.c ---- */

struct pusher *serve_pusher_new(struct serve *sv); /* NULL when out of memory */
/* The target goes: its windows are dropped, its queue with it. NULL push: nothing. */
void serve_pusher_free(struct target *t);
/* Starts t's next window (a no-op while one is starting or t is not live). */
void serve_push_roll(struct serve *sv, struct target *t);
/* Every --push-interval: the next window of every target. */
void serve_push_tick(uv_timer_t *h);

#endif
