/* dntrace serve: one long-running agent for one process, a list, or every .NET process it can
 * see, with the endpoints a Go program has (net/http/pprof) and Prometheus' /metrics, so that
 * Grafana Alloy, Pyroscope, Parca and Prometheus scrape it as they scrape Go services.
 *
 * Everything runs on one libuv loop, never run from inside a callback: per target a counters
 * session (counters/) whose latest values /metrics answers from memory; per profile request an
 * EventPipe session of its own, started asynchronously, read into a profile (profile/) as the
 * stream arrives, and answered (gzip pprof) when the runtime has sent its rundown, through the
 * HTTP server's deferred replies. A profile request therefore never holds up /metrics.
 *
 *   targets   -p PID[,PID..] (kept, 503 once gone), -n NAME (the next process of that name after
 *             a restart), --all (every process with a diagnostic socket; a rescan every
 *             --rescan adds new ones, exited ones are dropped)
 *   labels    pid, process and each --label k=v, on every series and every profile's samples
 *   bounds    one profile, one allocs and one threads request per target at a time (429),
 *             MAX_JOBS in all (429), seconds <= MAX_SECONDS (400), the HTTP server's own
 *             request-size and connection caps */
#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "builtin.h"
#include "dnt-counters.h"
#include "dnt-profile.h"
#include "ntr.h"
#include "options.h"
#include "session.h"
#include "target.h"
#include "util.h"

#define DEFAULT_LISTEN "127.0.0.1:6060" /* Go's usual pprof port */
#define COUNTERS_BUFFER_MB 16
#define PROFILE_BUFFER_MB 64
#define RECONNECT_MS 1000
#define DEFAULT_RESCAN_MS 5000
#define DEFAULT_SECONDS 30 /* as Go's /debug/pprof/profile */
#define DEFAULT_ALLOCS_SECONDS 5 /* Go's allocs answers at once: a scraper asking without seconds= waits little */
#define MAX_SECONDS 300
#define MAX_JOBS 8          /* profile sessions at once, all targets together */
#define THREADS_WINDOW_MS 20 /* the sampler runs this long for a threads snapshot (as `stacks`) */
#define STOP_GRACE_MS 30000 /* how long the runtime may take to send its rundown after StopTracing */
#define SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define MAX_LABELS 32

enum job_kind { JOB_PROFILE, JOB_ALLOCS, JOB_THREADS, JOB_KINDS };
static const char *const job_names[JOB_KINDS] = {"profile", "allocs", "threads"};

struct serve_options {
  const char *pids, *name, *listen, *push;
  uint64_t push_interval_ms;
  int all;
  struct dnt_strlist labels;
  uint64_t rescan_ms;
  double refresh;
  struct dnt_counter_specs specs;
};

struct serve;
struct job;
struct pusher;

struct target {
  struct serve *sv;
  struct target *next;
  int pid;
  char name[256];
  unsigned long long key; /* its socket's key (the process's start time): one process, not a pid */
  dnt_session s;          /* the counters session */
  int opened;             /* s was opened (dnt_session_close owes it) */
  ntr_parser *parser;
  dnt_counters_decoder *decoder;
  struct dnt_counter_table table;
  char *prom_labels; /* pid="..",process="..",k="v" */
  int live, ended, seen;
  struct job *jobs[JOB_KINDS]; /* the request of each kind running on it */
  struct pusher *push;         /* --push: its windows and what waits to be sent */
};

struct serve {
  uv_loop_t *loop;
  const struct serve_options *o;
  struct dnt_counters_wire wire;
  dnt_http_server *http;
  struct target *targets;
  size_t ntargets;
  const char **label_kv; /* the --label pairs, split: key, value, ... (keys and values heap) */
  size_t nlabels;
  unsigned njobs;
  uv_timer_t reconnect, rescan, push_tick;
  char push_host[256], push_path[1024]; /* --push URL, split */
  int push_port;
  uv_signal_t sigint, sigterm;
  int quitting;
};

/* ---- one profile request ---- */

struct job {
  struct serve *sv;
  struct target *t;
  enum job_kind kind;
  int debug; /* threads?debug=1: text */
  uint64_t window_ms;
  dnt_session s;
  ntr_parser *parser;
  struct dnt_profile *prof;
  dnt_http_pending *pending;
  uv_timer_t timer;
  int pid;        /* the target's, kept: the work below never looks at the target */
  char name[256];
  int stopped, ended, released;
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
};

#define MAX_BACKLOG (64u << 20) /* bytes waiting for the parser before the job gives up */

static void on_job_timer_closed(uv_handle_t *h) {
  struct job *j = h->data;
  ntr_parser_free(j->parser);
  dnt_profile_free(j->prof);
  free(j->in);
  free(j->busy);
  free(j->answer.body);
  free(j);
}

/* Ends the job: its session and its slot on the target now, its memory once no work item runs
 * and the timer is closed. */
static void job_release(struct job *j) {
  if (j->released) return;
  j->released = 1;
  dnt_session_close(&j->s);
  if (j->t && !j->push) j->t->jobs[j->kind] = NULL;
  if (!j->push) j->sv->njobs--;
  if (!j->working) uv_close((uv_handle_t *)&j->timer, on_job_timer_closed);
}

static void job_answer_text(struct job *j, int status, const char *text) {
  if (!j->pending) return;
  struct dnt_http_reply rep = {.status = status, .body = dnt_xstrdup(text)};
  rep.body_len = strlen(rep.body);
  dnt_http_pending_answer(j->pending, &rep);
  j->pending = NULL;
}

/* The client left before its answer: nothing more to send; the session goes now. */
static void on_job_gone(void *ud) {
  struct job *j = ud;
  j->pending = NULL;
  if (j->s.starting) {
    job_release(j); /* its start is dropped with the stream */
    return;
  }
  dnt_session_abandon(&j->s); /* on_job_end releases it */
}

static void name_profile_thread(void *ud, unsigned long long tid, const char *name) {
  if (name[0]) dnt_profile_name_thread(ud, tid, name);
}

struct thread_row {
  uint64_t tid;
  uint32_t *frames;
  size_t n;
};

struct thread_rows {
  struct thread_row *v;
  size_t n, cap;
};

static void collect_thread(void *ud, uint64_t tid, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct thread_rows *l = ud;
  (void)samples, (void)ms;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->v = dnt_xrealloc(l->v, l->cap * sizeof *l->v);
  }
  struct thread_row *r = &l->v[l->n++];
  r->tid = tid;
  r->n = n;
  r->frames = dnt_xmalloc((n ? n : 1) * sizeof *frames);
  memcpy(r->frames, frames, n * sizeof *frames);
}

static int by_row_tid(const void *a, const void *b) {
  uint64_t x = ((const struct thread_row *)a)->tid, y = ((const struct thread_row *)b)->tid;
  return (x > y) - (x < y);
}

/* threads?debug=1: every thread's stack as `dntrace stacks` prints it, leaf first. */
static void write_threads_text(FILE *fp, const struct job *j) {
  struct thread_rows l = {0};
  dnt_profile_each_stack(j->prof, collect_thread, &l);
  if (l.n) qsort(l.v, l.n, sizeof *l.v, by_row_tid);
  fprintf(fp, "Process %d (%s): %zu managed thread%s\n\n", j->pid, j->name, l.n, l.n == 1 ? "" : "s");
  for (size_t i = 0; i < l.n; i++) {
    const char *name = dnt_profile_thread_name(j->prof, l.v[i].tid);
    char *safe = dnt_safe_text(name ? name : "");
    fprintf(fp, "Thread (0x%llX) %llu%s%s:\n", (unsigned long long)l.v[i].tid, (unsigned long long)l.v[i].tid,
            safe[0] ? " " : "", safe);
    free(safe);
    for (size_t f = l.v[i].n; f > 0; f--) {
      const char *fn = dnt_profile_name(j->prof, l.v[i].frames[f - 1]);
      char *text = dnt_safe_text(strcmp(fn, DNT_UNMANAGED_FRAME) == 0 ? "[Native Frames]" : fn);
      fprintf(fp, "  %s\n", text);
      free(text);
    }
    fputc('\n', fp);
    free(l.v[i].frames);
  }
  free(l.v);
}

/* ---- the work items (thread pool): nothing here touches the loop ---- */

static void work_parse(uv_work_t *w) {
  struct job *j = w->data;
  if (j->parse_failed) return;
  int rc = ntr_parser_feed(j->parser, j->busy, j->nbusy);
  if (rc < 0 && rc != NTR_EOF) {
    j->parse_failed = 1;
    snprintf(j->msg, sizeof j->msg, "%s", ntr_parser_errmsg(j->parser));
  }
}

static void answer_text(struct dnt_http_reply *rep, int status, const char *text) {
  rep->status = status;
  rep->body = dnt_xstrdup(text);
  rep->body_len = strlen(rep->body);
}

/* The end of the stream: the profile finished and written (or why not) into j->answer. */
static void work_finish(uv_work_t *w) {
  struct job *j = w->data;
  struct dnt_http_reply *rep = &j->answer;
  char text[400];
  if (j->loop_failed) {
    snprintf(text, sizeof text, "process %d: %s\n", j->pid, j->loop_msg);
    answer_text(rep, 502, text);
    return;
  }
  if (j->parse_failed) {
    snprintf(text, sizeof text, "process %d sent a stream that cannot be read: %s\n", j->pid, j->msg);
    answer_text(rep, 502, text);
    return;
  }
  if (!j->stopped || ntr_parser_finish(j->parser) != 0) {
    snprintf(text, sizeof text, "process %d ended the session before the profile was complete (it exited?)\n",
             j->pid);
    answer_text(rep, 502, text);
    return;
  }
  if (j->kind == JOB_THREADS) dnt_process_threads(j->pid, name_profile_thread, j->prof);
  if (dnt_profile_failed(j->prof) || dnt_profile_finish(j->prof) != 0) {
    answer_text(rep, 500, "out of memory\n");
    return;
  }
  rep->status = 200;
  FILE *fp = open_memstream(&rep->body, &rep->body_len);
  if (!fp) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  char title[320];
  snprintf(title, sizeof title, "%s of process %d (%s)", job_names[j->kind], j->pid, j->name);
  int rc = 0;
  if (j->kind == JOB_THREADS && j->debug) {
    rep->content_type = "text/plain; charset=utf-8";
    write_threads_text(fp, j);
  } else {
    rep->content_type = "application/octet-stream";
    rc = dnt_profile_write(j->prof, DNT_PROFILE_PPROF, title, fp);
  }
  if (fclose(fp) != 0 || rc != 0) {
    free(rep->body);
    answer_text(rep, 500, "out of memory\n");
  }
}

static void job_kick(struct job *j);

/* Back on the loop after a work item. */
static void after_work(uv_work_t *w, int status) {
  struct job *j = w->data;
  (void)status;
  j->working = 0;
  if (j->released) { /* the client went, or serve stops: the memory goes now */
    uv_close((uv_handle_t *)&j->timer, on_job_timer_closed);
    return;
  }
  if (j->finishing) {
    if (j->done) {
      j->done(j, &j->answer); /* takes the body */
    } else if (j->pending) {
      dnt_http_pending_answer(j->pending, &j->answer); /* takes the body */
      j->pending = NULL;
    } else {
      free(j->answer.body); /* the client went while it was made */
    }
    j->answer.body = NULL;
    job_release(j);
    return;
  }
  job_kick(j);
}

/* Hands the next work item to the pool: the bytes that arrived, else (the stream over) the end. */
static void job_kick(struct job *j) {
  if (j->working || j->released || j->finishing) return;
  j->work.data = j;
  if (j->nin) {
    uint8_t *t = j->busy;
    size_t cap = j->capbusy;
    j->busy = j->in, j->nbusy = j->nin, j->capbusy = j->capin;
    j->in = t, j->nin = 0, j->capin = cap;
    j->working = 1;
    uv_queue_work(j->sv->loop, &j->work, work_parse, after_work);
  } else if (j->ended) {
    j->finishing = j->working = 1;
    uv_queue_work(j->sv->loop, &j->work, work_finish, after_work);
  }
}

static void on_job_data(void *ud, const uint8_t *p, size_t n) {
  struct job *j = ud;
  if (j->loop_failed || j->released) return;
  if (j->nin + n > MAX_BACKLOG) { /* the parser cannot keep up: give up rather than grow */
    j->loop_failed = 1;
    snprintf(j->loop_msg, sizeof j->loop_msg, "more than %u MiB waiting to be parsed", MAX_BACKLOG >> 20);
    dnt_session_abandon(&j->s);
    return;
  }
  if (j->nin + n > j->capin) {
    size_t cap = j->capin ? j->capin : 65536;
    while (cap < j->nin + n) cap *= 2;
    j->in = dnt_xrealloc(j->in, cap);
    j->capin = cap;
  }
  memcpy(j->in + j->nin, p, n);
  j->nin += n;
  job_kick(j);
}

/* The stream is over (rundown sent, the process gone, or abandoned): the last bytes and the
 * profile are made on the pool, then answered (after_work). */
static void on_job_end(void *ud) {
  struct job *j = ud;
  j->ended = 1;
  if (!j->pending && !j->done) {
    job_release(j);
    return;
  }
  job_kick(j);
}

static void on_job_timer(uv_timer_t *h) {
  struct job *j = h->data;
  if (!j->stopped) { /* the window is over: the runtime sends its rundown, then ends the stream */
    j->stopped = 1;
    dnt_session_stop(&j->s);
    if (!j->s.ended) uv_timer_start(&j->timer, on_job_timer, STOP_GRACE_MS, 0);
    return;
  }
  snprintf(j->loop_msg, sizeof j->loop_msg, "no rundown within %d s of StopTracing", STOP_GRACE_MS / 1000);
  j->loop_failed = 1;
  dnt_session_abandon(&j->s); /* on_job_end answers */
}

static void on_job_started(void *ud, int rc) {
  struct job *j = ud;
  if (rc) {
    char text[700];
    snprintf(text, sizeof text, "process %d refused the session: %s\n", j->pid, j->s.reply_msg);
    job_answer_text(j, 502, text);
    if (j->done) {
      struct dnt_http_reply failed = {.status = 502};
      j->done(j, &failed);
    }
    job_release(j);
    return;
  }
  if (j->started) j->started(j);
  if (j->window_ms) uv_timer_start(&j->timer, on_job_timer, j->window_ms, 0);
}

static const dnt_session_cb job_cb = {on_job_data, on_job_end};

/* --push windows: a sample counts in the window whose span holds its time (the worker's call). */
static int keep_in_window(void *ud, uint64_t thread, uint64_t time_ns) {
  struct job *j = ud;
  (void)thread;
  return time_ns >= j->from_ns && time_ns < __atomic_load_n(&j->until_ns, __ATOMIC_ACQUIRE);
}

struct pusher {
  struct job *cur, *next; /* the window sampling now; the next one, starting */
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

/* Starts a job of kind on t for window_ms and defers rep's answer to it. 0, or the HTTP status
 * to answer now (with text written into err). */
static int job_start(struct serve *sv, struct target *t, enum job_kind kind, uint64_t window_ms, int debug,
                     struct dnt_http_reply *rep, char *err, size_t cap) {
  struct job *j = calloc(1, sizeof *j);
  if (!j) return snprintf(err, cap, "out of memory\n"), 500;
  j->sv = sv;
  j->t = t;
  j->kind = kind;
  j->debug = debug;
  j->window_ms = window_ms;
  j->pid = t->pid;
  snprintf(j->name, sizeof j->name, "%s", t->name);
  if (!(j->prof = dnt_profile_new())) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_profile_set_source(j->prof, kind == JOB_ALLOCS    ? DNT_SOURCE_ALLOCATIONS
                                  : kind == JOB_THREADS ? DNT_SOURCE_THREADS
                                                        : DNT_SOURCE_SAMPLER);
  const char *kv[2 * (MAX_LABELS + 2)];
  char pid[24];
  snprintf(pid, sizeof pid, "%d", t->pid);
  size_t n = 0;
  kv[n++] = "pid", kv[n++] = pid, kv[n++] = "process", kv[n++] = t->name;
  for (size_t i = 0; i < 2 * sv->nlabels; i++) kv[n++] = sv->label_kv[i];
  if (dnt_profile_set_labels(j->prof, kv, n / 2) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  if (ntr_parser_new(&j->parser, &cb, j->prof, NULL) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  uv_timer_init(sv->loop, &j->timer);
  j->timer.data = j;
  j->push = rep == NULL;
  if (j->push) {
    j->until_ns = UINT64_MAX;
    dnt_profile_set_filter(j->prof, keep_in_window, j);
  } else {
    t->jobs[kind] = j;
    sv->njobs++;
  }

  struct dnt_session_target want = {.pid = t->pid};
  if (dnt_session_open(&j->s, sv->loop, &want) != 0) { /* it printed why */
    snprintf(err, cap, "process %d cannot be reached (it exited?)\n", t->pid);
    job_release(j);
    return 502;
  }
  /* the sampler for stacks, or the GC keyword at verbose level for GCAllocationTick with its
   * stack; the method rundown at the end names the frames either way */
  dsipc_provider prov = kind == JOB_ALLOCS
                            ? (dsipc_provider){.name = RUNTIME_PROVIDER, .keywords = 0x1, .level = 5, .args = NULL}
                            : (dsipc_provider){.name = SAMPLE_PROFILER, .keywords = 0, .level = 4, .args = NULL};
  dsipc_session_config cfg = {.buffer_mb = PROFILE_BUFFER_MB, .format = 1, .request_rundown = 1,
                              .rundown_keyword = DSIPC_DEFAULT_RUNDOWN_KEYWORD, .request_stackwalk = 1,
                              .providers = &prov, .n_providers = 1};
  if (dnt_session_start_async(&j->s, 2, &cfg, &job_cb, j, on_job_started) != 0) {
    snprintf(err, cap, "cannot start a session on process %d: %s\n", t->pid, j->s.reply_msg);
    job_release(j);
    return 502;
  }
  if (j->push) {
    t->push->next = j;
    return 0;
  }
  if (!(j->pending = dnt_http_defer(rep, on_job_gone, j))) {
    snprintf(err, cap, "out of memory\n");
    dnt_session_close(&j->s);
    job_release(j);
    return 500;
  }
  return 0;
}

/* ---- --push: windows of thread time sent to Pyroscope's /ingest ---- */

#define PUSH_TIMEOUT_MS 10000
#define PUSH_BACKOFF_MAX_MS 30000
#define PUSH_BOUNDARY "dntrace-pprof-5e1f0c2a9d"

static int64_t unix_now(void) {
  uv_timeval64_t tv;
  uv_gettimeofday(&tv);
  return tv.tv_sec;
}

/* Percent-encodes s into fp as a query value (RFC 3986's unreserved characters kept). */
static void put_query_value(FILE *fp, const char *s) {
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr("-._~", ch))
      fputc(ch, fp);
    else
      fprintf(fp, "%%%02X", ch);
  }
}

static void push_send(struct target *t);

static void on_retry(uv_timer_t *h) { push_send(h->data); }

static void on_posted(void *ud, int status, const char *msg) {
  struct target *t = ud;
  struct pusher *p = t->push;
  p->post = NULL;
  if (status >= 200 && status < 300) {
    free(p->q[0].body);
    free(p->q[0].target);
    memmove(&p->q[0], &p->q[1], (p->nq - 1) * sizeof p->q[0]);
    p->nq--;
    p->sent++;
    p->backoff_ms = 0;
    if (p->away) printf("push: %s:%d takes profiles again\n", t->sv->push_host, t->sv->push_port), fflush(stdout);
    p->away = 0;
    push_send(t);
    return;
  }
  p->failed++;
  if (!p->away) {
    if (status > 0) printf("push: %s:%d answered %d; trying again\n", t->sv->push_host, t->sv->push_port, status);
    else printf("push: %s:%d: %s; trying again\n", t->sv->push_host, t->sv->push_port, msg);
    fflush(stdout);
  }
  p->away = 1;
  p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : 1000;
  if (p->backoff_ms > PUSH_BACKOFF_MAX_MS) p->backoff_ms = PUSH_BACKOFF_MAX_MS;
  uv_timer_start(&p->retry, on_retry, p->backoff_ms, 0);
}

/* Sends the oldest window waiting, unless one is on its way or a retry is due. */
static void push_send(struct target *t) {
  struct pusher *p = t->push;
  struct serve *sv = t->sv;
  if (!p->nq || p->post || uv_is_active((uv_handle_t *)&p->retry)) return;
  char *copy = dnt_xmalloc(p->q[0].len); /* kept for a retry */
  memcpy(copy, p->q[0].body, p->q[0].len);
  int rc = dnt_http_post_start(sv->loop, sv->push_host, sv->push_port, p->q[0].target,
                               "multipart/form-data; boundary=" PUSH_BOUNDARY, copy, p->q[0].len, PUSH_TIMEOUT_MS,
                               on_posted, t, &p->post);
  if (rc) on_posted(t, rc, uv_strerror(rc));
}

/* A window's pprof: queued as Pyroscope's ingest wants it, the newest dropped when 2 wait. */
static void push_done(struct job *j, struct dnt_http_reply *answer) {
  struct target *t = j->t;
  char *pprof = answer->body;
  size_t len = answer->body_len;
  answer->body = NULL;
  if (t && t->push && t->push->cur == j) t->push->cur = NULL; /* it failed: the next starts afresh */
  if (t && t->push && t->push->next == j) t->push->next = NULL;
  if (!t || answer->status != 200 || !pprof) {
    free(pprof);
    return;
  }
  struct pusher *p = t->push;
  if (p->nq == sizeof p->q / sizeof p->q[0]) { /* the server is away: memory stays flat */
    p->dropped++;
    free(pprof);
    return;
  }
  struct serve *sv = t->sv;
  struct window *w = &p->q[p->nq];
  FILE *fp = open_memstream(&w->body, &w->len);
  if (!fp) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  fputs("--" PUSH_BOUNDARY "\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n",
        fp);
  fwrite(pprof, 1, len, fp);
  fputs("\r\n--" PUSH_BOUNDARY "\r\nContent-Disposition: form-data; name=\"sample_type_config\"; "
        "filename=\"sample_type_config.json\"\r\nContent-Type: application/json\r\n\r\n"
        "{\"wall\":{\"units\":\"nanoseconds\",\"aggregation\":\"sum\",\"display-name\":\"wall\",\"sampled\":true},"
        "\"samples\":{\"units\":\"samples\",\"aggregation\":\"sum\",\"display-name\":\"samples\",\"sampled\":true}}"
        "\r\n--" PUSH_BOUNDARY "--\r\n",
        fp);
  if (fclose(fp) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  free(pprof);
  char *target = NULL;
  size_t tlen = 0;
  fp = open_memstream(&target, &tlen);
  if (!fp) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  /* name=APP{labels}: the process's name, its pid and process, every --label */
  char *name = NULL, pid[24];
  size_t nlen = 0;
  FILE *np = open_memstream(&name, &nlen);
  if (!np) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  snprintf(pid, sizeof pid, "%d", t->pid);
  fprintf(np, "%s{pid=%s,process=%s", t->name, pid, t->name);
  for (size_t i = 0; i < sv->nlabels; i++) fprintf(np, ",%s=%s", sv->label_kv[2 * i], sv->label_kv[2 * i + 1]);
  fputc('}', np);
  fclose(np);
  fprintf(fp, "%s/ingest?name=", strcmp(sv->push_path, "/") == 0 ? "" : sv->push_path);
  put_query_value(fp, name);
  fprintf(fp, "&from=%lld&until=%lld&format=pprof&spyName=dntrace", (long long)j->from_unix, (long long)j->until_unix);
  fclose(fp);
  free(name);
  w->target = target;
  p->nq++;
  push_send(t);
}

static void push_started(struct job *j) {
  struct pusher *p = j->t->push;
  uint64_t boundary = uv_hrtime(); /* CLOCK_MONOTONIC ns, as the runtime's timestamps on Linux */
  j->from_ns = boundary;
  j->from_unix = unix_now();
  struct job *old = p->cur;
  p->cur = j;
  p->next = NULL;
  if (old) {
    __atomic_store_n(&old->until_ns, boundary, __ATOMIC_RELEASE);
    old->until_unix = j->from_unix;
    old->stopped = 1;
    dnt_session_stop(&old->s); /* its rundown names its frames; then push_done */
    if (!old->s.ended) uv_timer_start(&old->timer, on_job_timer, STOP_GRACE_MS, 0);
  }
}

/* Every --push-interval: the next window starts; once it samples, the current one stops. */
static void push_roll(struct serve *sv, struct target *t) {
  struct pusher *p = t->push;
  if (!p || p->next || !t->live) return;
  char err[700];
  if (job_start(sv, t, JOB_PROFILE, 0, 0, NULL, err, sizeof err) != 0) return; /* tried again next time */
  p->next->done = push_done;
  p->next->started = push_started;
}

static void on_push_tick(uv_timer_t *h) {
  struct serve *sv = h->data;
  for (struct target *t = sv->targets; t; t = t->next) push_roll(sv, t);
}

static void on_pusher_closed(uv_handle_t *h) {
  struct pusher *p = h->data;
  for (size_t i = 0; i < p->nq; i++) free(p->q[i].body), free(p->q[i].target);
  free(p);
}

static struct pusher *pusher_new(struct serve *sv) {
  struct pusher *p = calloc(1, sizeof *p);
  if (!p) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  uv_timer_init(sv->loop, &p->retry);
  p->retry.data = NULL; /* the target, once it has one */
  return p;
}

/* The target goes: its windows are dropped, its queue with it. */
static void pusher_free(struct target *t) {
  struct pusher *p = t->push;
  if (!p) return;
  t->push = NULL;
  dnt_http_post_cancel(p->post);
  struct job *js[2] = {p->cur, p->next};
  for (int i = 0; i < 2; i++)
    if (js[i]) {
      js[i]->t = NULL;
      job_release(js[i]);
    }
  p->retry.data = p;
  uv_close((uv_handle_t *)&p->retry, on_pusher_closed);
}

/* ---- the counters of each target ---- */

static int on_value(void *ud, const dnt_counter_value *v) {
  struct target *t = ud;
  if (dnt_counter_table_put(&t->table, v) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  return 0;
}

static void on_counters_data(void *ud, const uint8_t *p, size_t n) {
  struct target *t = ud;
  int rc = ntr_parser_feed(t->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) { /* a stream we cannot read: this target's counters stop here */
    dnt_warning("process %d: the counters stream does not parse: %s", t->pid, ntr_parser_errmsg(t->parser));
    dnt_session_abandon(&t->s);
  }
}

static void on_counters_end(void *ud) {
  struct target *t = ud;
  t->live = 0;
  t->ended = 1;
  dnt_counter_table_clear(&t->table);
  if (t->sv->quitting) return;
  printf("Process %d (%s) ended its session\n", t->pid, t->name);
  fflush(stdout); /* -n: on_reconnect finds the next one; --all: on_rescan drops it */
}

static void on_counters_started(void *ud, int rc) {
  struct target *t = ud;
  if (rc) {
    dnt_warning("process %d refused the counters session: %s", t->pid, t->s.reply_msg);
    t->ended = 1;
    return;
  }
  t->live = 1;
  printf("Following process %d (%s)\n", t->pid, t->name);
  fflush(stdout);
  push_roll(t->sv, t); /* --push: its first window */
}

static const dnt_session_cb counters_cb = {on_counters_data, on_counters_end};

/* The target's labels for /metrics (pid, process, --label pairs). */
static void make_prom_labels(struct serve *sv, struct target *t) {
  const char *kv[2 * (MAX_LABELS + 2)];
  char pid[24];
  snprintf(pid, sizeof pid, "%d", t->pid);
  size_t n = 0;
  kv[n++] = "pid", kv[n++] = pid, kv[n++] = "process", kv[n++] = t->name;
  for (size_t i = 0; i < 2 * sv->nlabels; i++) kv[n++] = sv->label_kv[i];
  free(t->prom_labels);
  if (!(t->prom_labels = dnt_prom_label_pairs(kv, n / 2))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
}

/* Opens pid as a target and starts its counters session without waiting. NULL when it cannot
 * be reached (quiet: under --all a process may be gone by now). */
static struct target *target_add(struct serve *sv, int pid, unsigned long long key) {
  struct target *t = calloc(1, sizeof *t);
  if (!t) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  t->sv = sv;
  t->pid = pid;
  t->key = key;
  struct dnt_session_target want = {.pid = pid};
  t->opened = 1;
  if (dnt_session_open(&t->s, sv->loop, &want) != 0) goto fail;
  snprintf(t->name, sizeof t->name, "%s", t->s.target.name);
  make_prom_labels(sv, t);
  if (sv->o->push) {
    t->push = pusher_new(sv);
    t->push->retry.data = t;
  }
  const char *sid = sv->wire.session_id[0] ? sv->wire.session_id : NULL;
  if (!(t->decoder = dnt_counters_decoder_new(&sv->o->specs, sid, on_value, t)) ||
      ntr_parser_new(&t->parser, dnt_counters_decoder_callbacks(), t->decoder, NULL) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dsipc_session_config cfg = {.buffer_mb = COUNTERS_BUFFER_MB, .format = 1, .providers = sv->wire.v,
                              .n_providers = sv->wire.n};
  if (dnt_session_start_async(&t->s, 2, &cfg, &counters_cb, t, on_counters_started) != 0) {
    dnt_warning("cannot start a session on process %d: %s", pid, t->s.reply_msg);
    goto fail;
  }
  t->next = sv->targets;
  sv->targets = t;
  sv->ntargets++;
  return t;
fail:
  dnt_session_close(&t->s);
  pusher_free(t);
  ntr_parser_free(t->parser);
  dnt_counters_decoder_free(t->decoder);
  free(t->prom_labels);
  free(t);
  return NULL;
}

static void target_free(struct target *t) {
  for (int k = 0; k < JOB_KINDS; k++)
    if (t->jobs[k]) t->jobs[k]->t = NULL, t->jobs[k] = NULL; /* see job_release: the slot is gone */
  pusher_free(t);
  dnt_session_close(&t->s);
  ntr_parser_free(t->parser);
  dnt_counters_decoder_free(t->decoder);
  dnt_counter_table_release(&t->table);
  free(t->prom_labels);
  free(t);
}

/* Drops the targets whose process has ended (--all, -n) and has no request running. */
static void drop_ended(struct serve *sv) {
  for (struct target **pp = &sv->targets; *pp;) {
    struct target *t = *pp;
    int busy = t->jobs[0] || t->jobs[1] || t->jobs[2];
    if (t->ended && !busy) {
      *pp = t->next;
      sv->ntargets--;
      target_free(t);
    } else {
      pp = &t->next;
    }
  }
}

/* -n NAME: the next process of that name, once the last one has ended. */
static void on_reconnect(uv_timer_t *h) {
  struct serve *sv = h->data;
  drop_ended(sv);
  if (sv->targets) return; /* still following one */
  int pid = dnt_target_find_by_name(sv->o->name);
  if (pid) target_add(sv, pid, 0);
}

struct scan {
  struct serve *sv;
};

static int on_endpoint(const dsipc_endpoint *ep, void *ud) {
  struct scan *sc = ud;
  for (struct target *t = sc->sv->targets; t; t = t->next)
    if (t->pid == ep->host_pid && t->key == ep->key) {
      t->seen = 1;
      return 0;
    }
  struct target *t = target_add(sc->sv, ep->host_pid, ep->key);
  if (t) t->seen = 1;
  return 0;
}

/* --all: every process with a diagnostic socket; the ones gone are dropped. */
static void on_rescan(uv_timer_t *h) {
  struct serve *sv = h->data;
  struct scan sc = {sv};
  for (struct target *t = sv->targets; t; t = t->next) t->seen = 0;
  dsipc_endpoint_list(on_endpoint, &sc);
  for (struct target *t = sv->targets; t; t = t->next)
    if (!t->seen && !t->live) t->ended = 1;
  drop_ended(sv);
}

/* ---- HTTP ---- */

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static void write_metrics(struct serve *sv, FILE *fp, struct dnt_http_reply *rep) {
  const struct dnt_counter_table *tables[256];
  const char *labels[256];
  size_t n = 0;
  for (struct target *t = sv->targets; t && n < 256; t = t->next)
    if (t->live) tables[n] = &t->table, labels[n++] = t->prom_labels;
  if (!n) {
    rep->status = 503; /* Prometheus marks the target down (up == 0) */
    if (sv->o->name) fprintf(fp, "no session: waiting for a process named '%s'\n", sv->o->name);
    else fputs("no session: no target process is running\n", fp);
    return;
  }
  rep->status = 200;
  rep->content_type = PROM_CONTENT_TYPE;
  if (dnt_counters_prom_write_many(fp, tables, labels, n) < 0) rep->status = 500;
}

static void write_index(struct serve *sv, FILE *fp) {
  fputs("dntrace serve: the endpoints of a Go program (net/http/pprof) for .NET processes\n\n"
        "/metrics                                  the counters of every target (Prometheus text)\n"
        "/debug/pprof/profile?seconds=N&pid=P      thread time of managed stacks over N s (pprof; default 30, at most 300)\n"
        "/debug/pprof/allocs?seconds=N&pid=P       allocation samples with stacks over N s (pprof; default 5)\n"
        "/debug/pprof/threads?pid=P[&debug=1]      every managed thread's stack now (pprof, or text with debug=1)\n"
        "/debug/pprof/goroutine                    the same as threads (the name Go's scrapers ask for)\n\n"
        "pid= may be left out when there is one target.\n\ntargets:\n",
        fp);
  for (struct target *t = sv->targets; t; t = t->next) {
    char *name = dnt_safe_text(t->name);
    fprintf(fp, "  pid %d  %s  %s", t->pid, name, t->live ? "running" : t->ended ? "ended" : "starting");
    if (t->push)
      fprintf(fp, "  push: %llu sent, %llu dropped, %llu failed attempts, %zu waiting", t->push->sent,
              t->push->dropped, t->push->failed, t->push->nq);
    fputc('\n', fp);
    free(name);
  }
  if (!sv->targets) fputs("  (none yet)\n", fp);
}

/* The target a request names with pid=, or the only one. NULL with the status and text set. */
static struct target *request_target(struct serve *sv, const char *path, FILE *fp, int *status) {
  char v[32];
  int n = dnt_http_query_get(path, "pid", v, sizeof v);
  if (n == -2 || n == 0) {
    *status = 400;
    fputs("pid: not a process id\n", fp);
    return NULL;
  }
  if (n < 0) {
    size_t live = 0;
    struct target *only = NULL;
    for (struct target *t = sv->targets; t; t = t->next)
      if (!t->ended) live++, only = t;
    if (live == 1) return only;
    *status = live ? 400 : 503;
    fputs(live ? "several target processes: say which with pid= (see /debug/pprof/)\n"
               : "no target process is running\n",
          fp);
    return NULL;
  }
  char *end;
  long pid = strtol(v, &end, 10);
  if (*end || pid <= 0 || pid > 0x3fffffff) {
    *status = 400;
    fprintf(fp, "pid: '%s' is not a process id\n", v);
    return NULL;
  }
  for (struct target *t = sv->targets; t; t = t->next)
    if (t->pid == pid && !t->ended) return t;
  *status = 404;
  fprintf(fp, "pid %ld is not a target of this serve (see /debug/pprof/)\n", pid);
  return NULL;
}

/* seconds=N: 1..MAX_SECONDS, dflt when absent. -1 with the text written when bad. */
static long request_seconds(const char *path, long dflt, FILE *fp) {
  char v[32];
  int n = dnt_http_query_get(path, "seconds", v, sizeof v);
  if (n == -1) return dflt;
  char *end;
  long s = n > 0 ? strtol(v, &end, 10) : 0;
  if (n <= 0 || *end || s < 1 || s > MAX_SECONDS) {
    fprintf(fp, "seconds: a whole number of seconds from 1 to %d\n", MAX_SECONDS);
    return -1;
  }
  return s;
}

static int path_is(const char *path, const char *want) {
  size_t n = dnt_http_path_len(path);
  return strlen(want) == n && strncmp(path, want, n) == 0;
}

static void on_http(void *ud, const char *path, struct dnt_http_reply *rep) {
  struct serve *sv = ud;
  FILE *fp = open_memstream(&rep->body, &rep->body_len);
  if (!fp) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  rep->status = 200;
  enum job_kind kind = JOB_KINDS;
  int deferred = 0;
  if (path_is(path, "/metrics")) {
    write_metrics(sv, fp, rep);
  } else if (path_is(path, "/") || path_is(path, "/debug/pprof/") || path_is(path, "/debug/pprof")) {
    write_index(sv, fp);
  } else if (path_is(path, "/debug/pprof/profile")) {
    kind = JOB_PROFILE;
  } else if (path_is(path, "/debug/pprof/allocs")) {
    kind = JOB_ALLOCS;
  } else if (path_is(path, "/debug/pprof/threads") || path_is(path, "/debug/pprof/goroutine")) {
    kind = JOB_THREADS;
  } else {
    rep->status = 404;
    fputs("not found: see /debug/pprof/ for the endpoints\n", fp);
  }
  if (kind != JOB_KINDS) {
    int status = 0;
    long seconds = kind == JOB_THREADS ? 0
                   : request_seconds(path, kind == JOB_ALLOCS ? DEFAULT_ALLOCS_SECONDS : DEFAULT_SECONDS, fp);
    char dbg[8];
    int debug = dnt_http_query_get(path, "debug", dbg, sizeof dbg) > 0 && strcmp(dbg, "0") != 0;
    struct target *t = seconds < 0 ? NULL : request_target(sv, path, fp, &status);
    if (seconds < 0) {
      rep->status = 400;
    } else if (!t) {
      rep->status = status;
    } else if (t->jobs[kind]) {
      rep->status = 429; /* as Go's handler: one profile of a kind at a time */
      fprintf(fp, "a %s request for process %d is already running\n", job_names[kind], t->pid);
    } else if (sv->njobs >= MAX_JOBS) {
      rep->status = 429;
      fprintf(fp, "%d profile requests are already running\n", MAX_JOBS);
    } else {
      char err[700];
      uint64_t window = kind == JOB_THREADS ? THREADS_WINDOW_MS : (uint64_t)seconds * 1000;
      status = job_start(sv, t, kind, window, debug, rep, err, sizeof err);
      if (status) {
        rep->status = status;
        fputs(err, fp);
      } else {
        deferred = 1;
      }
    }
  }
  if (fclose(fp) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (deferred) { /* the job answers; the server sends nothing now */
    free(rep->body);
    rep->body = NULL;
    rep->body_len = 0;
  }
}

/* ---- options ---- */

static int parse_counters(void *field, const char *arg) {
  char err[512];
  if (dnt_counter_specs_parse(field, arg, err, sizeof err) < 0) return dnt_error("--counters: %s", err);
  return 0;
}

static int parse_refresh(void *field, const char *arg) {
  char *end;
  double *refresh = field;
  *refresh = strtod(arg, &end);
  if (*end || end == arg || !(*refresh >= 0.1) || *refresh > 86400)
    return dnt_error("--refresh-interval: '%s' is not a number of seconds (0.1 or more)", arg);
  return 0;
}

#define O(f) offsetof(struct serve_options, f)
static const struct dnt_option serve_options[] = {
    DNT_OPT_STRING('p', "process-id", "PID[,PID..]", O(pids), "the processes to serve"),
    DNT_OPT_STRING('n', "name", "NAME", O(name), "the process of that name, and the next one after a restart"),
    DNT_OPT_FLAG(0, "all", O(all), "every .NET process this user can see; new ones are added, ended\n"
                                   "ones dropped"),
    {.kind = DNT_OPT_DURATION, .long_name = "rescan", .argh = "TIME", .offset = O(rescan_ms),
     .help = "--all: how often to look for new processes (default 5s)"},
    DNT_OPT_LIST(0, "label", "KEY=VALUE", O(labels), "a label on every series and profile (repeatable)"),
    DNT_OPT_STRING(0, "listen", "ADDR", O(listen), "HOST:PORT to listen on (default 127.0.0.1:6060)"),
    DNT_OPT_PARSE(0, "counters", "LIST", O(specs), parse_counters,
                  "the counters of /metrics, as 'counters' takes them (default\nSystem.Runtime)"),
    DNT_OPT_PARSE(0, "refresh-interval", "SEC", O(refresh), parse_refresh, "seconds between counter values (default 1)"),
    DNT_OPT_STRING(0, "push", "URL", O(push), "send thread-time windows to Pyroscope at URL (http://HOST:PORT)"),
    {.kind = DNT_OPT_DURATION, .long_name = "push-interval", .argh = "TIME", .offset = O(push_interval_ms),
     .help = "--push: the length of a window (default 10s)"},
    DNT_OPT_END(),
};
#undef O

const struct dnt_usage usage_serve = {
    .synopsis = "dntrace serve (-p PID[,PID..] | -n NAME | --all) [--label KEY=VALUE]... [--listen ADDR] [--counters LIST] [--refresh-interval SEC] [--rescan TIME] [--push URL [--push-interval TIME]]",
    .summary = "Serve /metrics and Go's /debug/pprof endpoints for .NET processes (an agent)",
    .options = serve_options,
};

/* Splits the --label pairs into sv->label_kv. 0, or DNT_EXIT_USAGE with the error printed. */
static int check_labels(struct serve *sv, const struct dnt_strlist *l) {
  if (l->n > MAX_LABELS) return dnt_error("--label: at most %d labels", MAX_LABELS), DNT_EXIT_USAGE;
  sv->label_kv = dnt_xmalloc((2 * l->n + 1) * sizeof *sv->label_kv);
  for (size_t i = 0; i < l->n; i++) {
    const char *eq = strchr(l->v[i], '=');
    size_t klen = eq ? (size_t)(eq - l->v[i]) : 0;
    int ok = klen > 0 && !(l->v[i][0] >= '0' && l->v[i][0] <= '9') && strncmp(l->v[i], "__", 2) != 0;
    for (size_t k = 0; ok && k < klen; k++) {
      char ch = l->v[i][k];
      ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
    }
    char *key = dnt_xstrdup(l->v[i]);
    key[klen] = '\0';
    if (ok && (strcmp(key, "pid") == 0 || strcmp(key, "process") == 0 || strcmp(key, "provider") == 0 ||
               strcmp(key, "quantile") == 0 || strcmp(key, "thread_id") == 0 || strcmp(key, "thread_name") == 0)) {
      dnt_error("--label: '%s' is a label serve sets itself", key);
      free(key);
      sv->nlabels = i;
      return DNT_EXIT_USAGE;
    }
    if (!ok) {
      dnt_error("--label: '%s' is not KEY=VALUE (KEY: letters, digits and _, not starting with a digit or __)",
                l->v[i]);
      free(key);
      sv->nlabels = i;
      return DNT_EXIT_USAGE;
    }
    sv->label_kv[2 * i] = key;
    sv->label_kv[2 * i + 1] = dnt_xstrdup(eq + 1);
    sv->nlabels = i + 1;
  }
  return 0;
}

/* ---- the command ---- */

static void quit(struct serve *sv) {
  if (sv->quitting) return;
  sv->quitting = 1;
  dnt_http_server_close(sv->http); /* every deferred request's job is abandoned with it */
  sv->http = NULL;
  uv_close((uv_handle_t *)&sv->reconnect, NULL);
  uv_close((uv_handle_t *)&sv->rescan, NULL);
  uv_close((uv_handle_t *)&sv->push_tick, NULL);
  for (struct target *t = sv->targets; t; t = t->next) pusher_free(t); /* windows unsent are dropped */
  uv_close((uv_handle_t *)&sv->sigint, NULL);
  uv_close((uv_handle_t *)&sv->sigterm, NULL);
  for (struct target *t = sv->targets; t; t = t->next) dnt_session_close(&t->s);
}

static void on_signal(uv_signal_t *h, int signum) {
  (void)signum;
  quit(h->data);
}

int cmd_serve(int argc, char **argv) {
  struct serve_options o = {.refresh = 1.0};
  struct serve sv;
  memset(&sv, 0, sizeof sv);
  sv.o = &o;
  char err[512];
  int rc = dnt_options_parse(&usage_serve, "serve", argc, argv, &o);
  if (rc) {
    rc = rc == DNT_OPTIONS_DONE ? 0 : rc;
    goto out;
  }
  rc = DNT_EXIT_USAGE;
  if (!!o.pids + !!o.name + !!o.all != 1) {
    dnt_error("say which processes to serve: -p PID[,PID..], -n NAME or --all (one of them)");
    goto out;
  }
  if (o.rescan_ms && !o.all) {
    dnt_error("--rescan goes with --all");
    goto out;
  }
  if (o.push_interval_ms && !o.push) {
    dnt_error("--push-interval goes with --push");
    goto out;
  }
  if (o.push_interval_ms && o.push_interval_ms < 1000) {
    dnt_error("--push-interval: a window of 1s at least");
    goto out;
  }
  if (o.push && dnt_http_url_parse(o.push, sv.push_host, sizeof sv.push_host, &sv.push_port, sv.push_path,
                                   sizeof sv.push_path) != 0) {
    dnt_error("--push: '%s' is not http://HOST[:PORT][/PATH]", o.push);
    goto out;
  }
  if ((rc = check_labels(&sv, &o.labels)) != 0) goto out;
  rc = DNT_EXIT_FAILURE;
  if (o.specs.n == 0 && dnt_counter_specs_parse(&o.specs, DNT_COUNTERS_DEFAULT, err, sizeof err) < 0) goto out;
  if (dnt_counters_wire_build(&sv.wire, &o.specs, o.refresh, 1000, 10) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  sv.loop = uv_default_loop();
#if defined(__GLIBC__)
  /* the thread pool's workers would each get a malloc arena of their own, and an agent's RSS
   * would creep up for minutes (10.2 MB after 2 min of 1 s push windows, 8.4 MB with one arena) */
  mallopt(M_ARENA_MAX, 1);
#endif

  /* the targets named are checked before anything listens: a wrong pid is an error at once */
  if (o.pids) {
    for (const char *p = o.pids; *p;) {
      char *end;
      long pid = strtol(p, &end, 10);
      if (end == p || pid <= 0 || pid > 0x3fffffff || (*end && *end != ',')) {
        dnt_error("-p: '%s' is not a list of process ids", o.pids);
        rc = DNT_EXIT_USAGE;
        goto out;
      }
      if (!target_add(&sv, (int)pid, 0)) {
        rc = DNT_EXIT_NOTARGET;
        goto out;
      }
      p = *end ? end + 1 : end;
    }
  } else if (o.name) {
    int pid = dnt_target_find_by_name(o.name);
    if (pid && !target_add(&sv, pid, 0)) {
      rc = DNT_EXIT_NOTARGET;
      goto out;
    }
    if (!pid) printf("No process named '%s' yet; waiting for one\n", o.name);
  }
  if (dnt_http_server_start(sv.loop, o.listen ? o.listen : DEFAULT_LISTEN, on_http, &sv, &sv.http, err, sizeof err) !=
      0) {
    dnt_error("%s", err);
    goto out;
  }
  uv_timer_init(sv.loop, &sv.reconnect);
  uv_timer_init(sv.loop, &sv.rescan);
  uv_timer_init(sv.loop, &sv.push_tick);
  sv.reconnect.data = sv.rescan.data = sv.push_tick.data = &sv;
  if (o.push) {
    uint64_t every = o.push_interval_ms ? o.push_interval_ms : 10000;
    uv_timer_start(&sv.push_tick, on_push_tick, 0, every);
  }
  if (o.name) uv_timer_start(&sv.reconnect, on_reconnect, RECONNECT_MS, RECONNECT_MS);
  if (o.all) uv_timer_start(&sv.rescan, on_rescan, 0, o.rescan_ms ? o.rescan_ms : DEFAULT_RESCAN_MS);
  uv_signal_init(sv.loop, &sv.sigint);
  uv_signal_init(sv.loop, &sv.sigterm);
  sv.sigint.data = sv.sigterm.data = &sv;
  uv_signal_start(&sv.sigint, on_signal, SIGINT);
  uv_signal_start(&sv.sigterm, on_signal, SIGTERM);
  const char *listen = o.listen ? o.listen : DEFAULT_LISTEN, *colon = strrchr(listen, ':');
  printf("Serving at http://%.*s:%d/ (/metrics, /debug/pprof/)\nPress Ctrl+C to stop.\n", (int)(colon - listen),
         colon == listen ? "127.0.0.1" : listen, dnt_http_server_port(sv.http));
  fflush(stdout);
  dnt_loop_run(sv.loop, UV_RUN_DEFAULT, __func__);
  rc = 0;

out:
  if (sv.loop) {
    if (!sv.quitting) dnt_http_server_close(sv.http);
    for (struct target *t = sv.targets, *next; t; t = next) {
      next = t->next;
      target_free(t);
    }
    sv.targets = NULL;
    while (dnt_loop_run(sv.loop, UV_RUN_NOWAIT, __func__)) {}
    uv_loop_close(sv.loop);
  }
  for (size_t i = 0; i < 2 * sv.nlabels; i++) free((char *)sv.label_kv[i]);
  free(sv.label_kv);
  free(o.labels.v);
  dnt_counters_wire_release(&sv.wire);
  dnt_counter_specs_release(&o.specs);
  int out = dnt_finish_stdout();
  return rc ? rc : out;
}
