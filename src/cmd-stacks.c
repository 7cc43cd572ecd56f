/* dntrace stacks: the managed stack of every thread of a running process, now (dotnet-stack's
 * `report`). A short EventPipe session with the SampleProfiler and the method rundown: each
 * thread's first sample is its stack, named by the rundown; thread names from /proc. The session
 * runs its window (10 ms, or the hidden --duration) and then until the runtime's first samples
 * have arrived: a busy machine may run the sampler late, which makes the snapshot later, not
 * empty. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "builtin.h"
#include "dnt-profile.h"
#include "dnt-trace.h"
#include "ntr.h"
#include "options.h"
#include "session.h"
#include "target.h"
#include "util.h"

#define SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"

struct stacks_options {
  struct dnt_session_target target;
  int format;
  long repeat;
  uint64_t interval_ms, window_ms;
};

#define O(f) offsetof(struct stacks_options, f)
static const struct dnt_option stacks_options[] = {
    DNT_OPT_GROUP(dnt_options_target_port, O(target)),
    DNT_OPT_FORMAT("FORMAT", O(format), DNT_FORMAT_BIT(DNT_FORMAT_JSON), "json: one JSON object per snapshot, a line each"),
    DNT_OPT_COUNT(0, "repeat", "N", O(repeat), 100000, "take N snapshots (default 1)"),
    {.kind = DNT_OPT_DURATION, .long_name = "interval", .argh = "TIME", .offset = O(interval_ms),
     .help = "time between snapshots (default 1s)"},
    /* how long the sampler runs for one snapshot, as dotnet-stack's hidden --duration */
    {.kind = DNT_OPT_DURATION, .long_name = "duration", .argh = "TIME", .offset = O(window_ms), .help = NULL},
    DNT_OPT_END(),
};

const struct dnt_usage usage_stacks = {
    .synopsis = "dntrace stacks (-p PID | -n NAME | --diagnostic-port PATH) [--format json] [--repeat N] [--interval TIME]",
    .summary = "Print the managed stack of every thread of a running .NET process",
    .options = stacks_options,
};
#undef O

/* ---- one snapshot ---- */

/* How long a snapshot waits past its window for the runtime's first sample: the sampler runs
 * every millisecond once the session is on, so only a runtime that cannot suspend its threads (or
 * a stopped process) makes it wait that long; the session's own reply deadline (src/session.c). */
#define FIRST_SAMPLE_DEADLINE_MS 30000

struct snapshot {
  uv_loop_t *loop;
  dnt_session s;
  ntr_parser *parser;
  struct dnt_profile *prof;
  uv_timer_t window; /* the window, then the deadline for the first sample */
  uv_signal_t sigint, sigterm;
  int handles_open, interrupted, parse_failed;
  int window_over, stopping; /* the window has passed; the stop was asked for */
  char parse_error[256];
};

static void close_handles(struct snapshot *sn) {
  if (!sn->handles_open) return;
  sn->handles_open = 0;
  uv_close((uv_handle_t *)&sn->window, NULL);
  uv_close((uv_handle_t *)&sn->sigint, NULL);
  uv_close((uv_handle_t *)&sn->sigterm, NULL);
}

/* The runtime writes its rundown, then closes the stream. Once. */
static void stop(struct snapshot *sn) {
  if (sn->stopping) return;
  sn->stopping = 1;
  uv_timer_stop(&sn->window);
  dnt_session_stop(&sn->s);
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct snapshot *sn = ud;
  if (sn->parse_failed) return;
  int rc = ntr_parser_feed(sn->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    sn->parse_failed = 1;
    snprintf(sn->parse_error, sizeof sn->parse_error, "%s", ntr_parser_errmsg(sn->parser));
    dnt_session_abandon(&sn->s);
    return;
  }
  /* the window is over and the samples have come: the stop's flush brings the rest of the round */
  if (sn->window_over && dnt_profile_samples(sn->prof) > 0) stop(sn);
}

static void on_end(void *ud) { close_handles(ud); }

/* The deadline: no sample came; the stop's flush is the last chance for one. */
static void on_no_sample(uv_timer_t *t) { stop(t->data); }

/* The window is over: stop now if a sample came, else when the first one does. */
static void on_window(uv_timer_t *t) {
  struct snapshot *sn = t->data;
  sn->window_over = 1;
  if (dnt_profile_samples(sn->prof) > 0)
    stop(sn);
  else
    uv_timer_start(&sn->window, on_no_sample, FIRST_SAMPLE_DEADLINE_MS, 0);
}

static void on_signal(uv_signal_t *h, int sig) {
  struct snapshot *sn = h->data;
  (void)sig;
  sn->interrupted = 1;
  dnt_session_abandon(&sn->s);
  close_handles(sn);
}

/* A thread of the snapshot: its id as the runtime gave it, its first sample's frames (function
 * ids, root first). */
struct thread_stack {
  uint64_t tid;
  uint32_t *frames;
  size_t nframes;
  char name[64];
};

struct thread_list {
  struct thread_stack *v;
  size_t n, cap;
};

static void first_sample(void *ud, uint64_t tid, double t_us, double ms, const uint32_t *frames, size_t n) {
  struct thread_list *l = ud;
  (void)t_us, (void)ms;
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i].tid == tid) return; /* a later sample of a thread already listed */
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->v = dnt_xrealloc(l->v, l->cap * sizeof *l->v);
  }
  struct thread_stack *t = &l->v[l->n++];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  t->frames = dnt_xmalloc((n ? n : 1) * sizeof *frames);
  memcpy(t->frames, frames, n * sizeof *frames);
  t->nframes = n;
}

static int by_tid(const void *a, const void *b) {
  uint64_t x = ((const struct thread_stack *)a)->tid, y = ((const struct thread_stack *)b)->tid;
  return (x > y) - (x < y);
}

static void name_thread(void *ud, unsigned long long tid, const char *name) {
  struct thread_list *l = ud;
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i].tid == tid) snprintf(l->v[i].name, sizeof l->v[i].name, "%s", name);
}

/* Names the listed threads as /proc names them (src/target.h). */
static void name_threads(int pid, struct thread_list *l) { dsipc_process_threads(pid, name_thread, l); }

/* dotnet-stack's words for a thread in native code */
static const char *frame_text(const struct dnt_profile *prof, uint32_t id) {
  const char *name = dnt_profile_name(prof, id);
  return strcmp(name, DNT_UNMANAGED_FRAME) == 0 ? "[Native Frames]" : name;
}

static void print_text(const struct dnt_profile *prof, const struct snapshot *sn, const struct thread_list *l,
                       long index, long repeat) {
  if (repeat > 1) printf("# snapshot %ld of %ld\n", index + 1, repeat);
  printf("Process %d (%s): %zu managed thread%s\n\n", sn->s.target.pid, sn->s.target.name, l->n, l->n == 1 ? "" : "s");
  for (size_t i = 0; i < l->n; i++) {
    const struct thread_stack *t = &l->v[i];
    char *name = dnt_safe_text(t->name);
    printf("Thread (0x%llX) %llu%s%s:\n", (unsigned long long)t->tid, (unsigned long long)t->tid, name[0] ? " " : "",
           name);
    free(name);
    for (size_t f = t->nframes; f > 0; f--) { /* leaf first, as dotnet-stack prints */
      char *text = dnt_safe_text(frame_text(prof, t->frames[f - 1]));
      printf("  %s\n", text);
      free(text);
    }
    printf("\n");
  }
}

static void print_json(const struct dnt_profile *prof, const struct snapshot *sn, const struct thread_list *l) {
  char stamp[40];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  printf("{\"pid\":%d,\"process\":", sn->s.target.pid);
  dnt_json_string(stdout, sn->s.target.name);
  printf(",\"time\":\"%s\",\"threads\":[", stamp);
  for (size_t i = 0; i < l->n; i++) {
    const struct thread_stack *t = &l->v[i];
    printf("%s{\"tid\":%llu,\"name\":", i ? "," : "", (unsigned long long)t->tid);
    dnt_json_string(stdout, t->name);
    printf(",\"frames\":[");
    for (size_t f = t->nframes; f > 0; f--) {
      if (f != t->nframes) putchar(',');
      dnt_json_string(stdout, frame_text(prof, t->frames[f - 1]));
    }
    printf("]}");
  }
  printf("]}\n");
}

/* Takes and prints one snapshot. 0, or an exit code (the error printed). */
static int snapshot(uv_loop_t *loop, const struct stacks_options *o, long index) {
  struct snapshot sn;
  memset(&sn, 0, sizeof sn);
  sn.loop = loop;
  struct thread_list threads = {0};
  int rc = dnt_session_open(&sn.s, loop, &o->target);
  if (rc) goto out;
  rc = DNT_EXIT_FAILURE;
  if (dnt_process_stopped(sn.s.target.pid)) { /* its runtime would not answer until it runs again */
    dnt_error("process %d is stopped (SIGSTOP, a debugger): its runtime cannot give its stacks until it runs "
              "again (kill -CONT %d)",
              sn.s.target.pid, sn.s.target.pid);
    goto out;
  }
  if (!(sn.prof = dnt_profile_new())) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_profile_keep_timeline(sn.prof);
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  if (ntr_parser_new(&sn.parser, &cb, sn.prof, NULL) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");

  dsipc_provider sampler = {.name = SAMPLE_PROFILER, .keywords = 0, .level = 4, .args = NULL};
  dsipc_session_config cfg = {.buffer_mb = 64, .format = 1, .request_rundown = 1,
                              .rundown_keyword = DSIPC_DEFAULT_RUNDOWN_KEYWORD, .request_stackwalk = 1,
                              .providers = &sampler, .n_providers = 1};
  static const dnt_session_cb scb = {on_data, on_end};
  if (dnt_session_start(&sn.s, 2, &cfg, &scb, &sn) != 0) {
    rc = dnt_session_start_failed(&sn.s);
    goto out;
  }
  uv_timer_init(loop, &sn.window);
  uv_signal_init(loop, &sn.sigint);
  uv_signal_init(loop, &sn.sigterm);
  sn.window.data = sn.sigint.data = sn.sigterm.data = &sn;
  sn.handles_open = 1;
  uv_timer_start(&sn.window, on_window, o->window_ms ? o->window_ms : 10, 0);
  uv_signal_start(&sn.sigint, on_signal, SIGINT);
  uv_signal_start(&sn.sigterm, on_signal, SIGTERM);
  dnt_loop_run(loop, UV_RUN_DEFAULT, __func__);

  if (sn.interrupted) {
    rc = 128 + SIGINT;
    goto out;
  }
  if (sn.parse_failed) {
    dnt_error("process %d sent a stream that cannot be read: %s", sn.s.target.pid, sn.parse_error);
    goto out;
  }
  if (ntr_parser_finish(sn.parser) != 0) {
    dnt_error("process %d ended the session before its rundown was complete: %s", sn.s.target.pid,
              ntr_parser_errmsg(sn.parser));
    goto out;
  }
  if (dnt_profile_failed(sn.prof) || dnt_profile_finish(sn.prof) != 0 ||
      dnt_profile_each_sample(sn.prof, first_sample, &threads) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (threads.n == 0) {
    dnt_error("process %d gave no stack samples in %.0f s: its runtime's sampler never ran", sn.s.target.pid,
              (double)((o->window_ms ? o->window_ms : 10) + FIRST_SAMPLE_DEADLINE_MS) / 1000);
    goto out;
  }
  qsort(threads.v, threads.n, sizeof *threads.v, by_tid);
  name_threads(sn.s.target.pid, &threads);
  if (o->format == DNT_FORMAT_JSON)
    print_json(sn.prof, &sn, &threads);
  else
    print_text(sn.prof, &sn, &threads, index, o->repeat);
  fflush(stdout);
  rc = 0;
out:
  dnt_session_close(&sn.s);
  while (dnt_loop_run(loop, UV_RUN_NOWAIT, __func__)) {}
  for (size_t i = 0; i < threads.n; i++) free(threads.v[i].frames);
  free(threads.v);
  ntr_parser_free(sn.parser);
  dnt_profile_free(sn.prof);
  return rc;
}

/* ---- between snapshots: a wait that Ctrl+C ends ---- */

struct pause {
  uv_timer_t timer;
  uv_signal_t sigint, sigterm;
  int interrupted;
};

static void pause_close(struct pause *p) {
  uv_close((uv_handle_t *)&p->timer, NULL);
  uv_close((uv_handle_t *)&p->sigint, NULL);
  uv_close((uv_handle_t *)&p->sigterm, NULL);
}

static void on_pause_over(uv_timer_t *t) { pause_close(t->data); }

static void on_pause_signal(uv_signal_t *h, int sig) {
  struct pause *p = h->data;
  (void)sig;
  p->interrupted = 1;
  pause_close(p);
}

/* 0 after ms, or 1 when interrupted */
static int pause_for(uv_loop_t *loop, uint64_t ms) {
  struct pause p;
  memset(&p, 0, sizeof p);
  uv_timer_init(loop, &p.timer);
  uv_signal_init(loop, &p.sigint);
  uv_signal_init(loop, &p.sigterm);
  p.timer.data = p.sigint.data = p.sigterm.data = &p;
  uv_timer_start(&p.timer, on_pause_over, ms, 0);
  uv_signal_start(&p.sigint, on_pause_signal, SIGINT);
  uv_signal_start(&p.sigterm, on_pause_signal, SIGTERM);
  dnt_loop_run(loop, UV_RUN_DEFAULT, __func__);
  return p.interrupted;
}

int cmd_stacks(int argc, char **argv) {
  struct stacks_options o = {.repeat = 1, .interval_ms = 1000};
  int rc = dnt_options_parse(&usage_stacks, "stacks", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  uv_loop_t *loop = uv_default_loop();
  for (long i = 0; i < o.repeat && rc == 0; i++) {
    if (i && pause_for(loop, o.interval_ms)) break;
    rc = snapshot(loop, &o, i);
  }
  uv_loop_close(loop);
  int out = dnt_finish_stdout();
  return rc ? rc : out;
}
