/* The server: one profile request (serve-int.h). Its EventPipe session runs on the loop; the
 * stream is copied as it comes and parsed on libuv's thread pool, one work item at a time, and the
 * profile is written there too, so the loop (and /metrics) never waits for a rundown. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "dnt-trace.h"
#include "serve-int.h"

#define REPLY_TIMEOUT_MS 30000 /* a session's start enables providers in the target: seconds when busy */

const char *const serve_job_names[JOB_KINDS] = {"profile", "allocs", "threads", "heap"};

/* ---- one profile request ---- */


#define MAX_BACKLOG (64u << 20) /* bytes waiting for the parser before the job gives up */

static void on_job_timer_closed(uv_handle_t *h) {
  struct job *j = h->data;
  ntr_parser_free(j->parser);
  dnt_profile_free(j->prof);
  dnt_heap_analysis_free(j->heap);
  free(j->in);
  free(j->busy);
  free(j->answer.body);
  serve_cpu_free(j->cpu);
  free(j);
}

/* The memory goes once nothing runs for the job: no work item, and for --cpu, perf and its
 * cleanup over. */
static void job_free_when_idle(struct job *j) {
  if (!j->released || j->working || j->closing) return;
  if (j->cpu && !serve_cpu_idle(j)) return;
  j->closing = 1;
  uv_close((uv_handle_t *)&j->timer, on_job_timer_closed);
}

/* Ends the job: its session and its slot on the target now, its memory once no work item runs
 * and the timer is closed. */
void serve_job_release(struct job *j) {
  if (j->released) return;
  j->released = 1;
  dsipc_session_close(j->s);
  j->s = NULL;
  if (j->t && !j->push) j->t->jobs[j->kind] = NULL;
  if (!j->push) j->sv->njobs--;
  job_free_when_idle(j);
}

static void job_answer_text(struct job *j, int status, const char *text) {
  if (!j->pending) return;
  struct dnt_http_reply rep = {.status = status, .body = strdup(text)};
  rep.body_len = rep.body ? strlen(rep.body) : 0; /* out of memory: the status alone */
  dnt_http_pending_answer(j->pending, &rep);
  j->pending = NULL;
}

/* The client left before its answer: nothing more to send; the session goes now. */
static void on_job_gone(void *ud) {
  struct job *j = ud;
  j->pending = NULL;
  if (j->starting) {
    serve_job_release(j); /* its start is dropped with the session */
    return;
  }
  dsipc_session_abandon(j->s); /* on_job_end releases it */
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
  int failed; /* out of memory */
};

static void collect_thread(void *ud, uint64_t tid, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct thread_rows *l = ud;
  (void)samples, (void)ms;
  if (l->failed) return;
  if (l->n == l->cap) {
    struct thread_row *v = realloc(l->v, (l->cap ? 2 * l->cap : 64) * sizeof *l->v);
    if (!v) {
      l->failed = 1;
      return;
    }
    l->v = v, l->cap = l->cap ? 2 * l->cap : 64;
  }
  struct thread_row *r = &l->v[l->n];
  r->tid = tid;
  r->n = n;
  if (!(r->frames = malloc((n ? n : 1) * sizeof *frames))) {
    l->failed = 1;
    return;
  }
  memcpy(r->frames, frames, n * sizeof *frames);
  l->n++;
}

static int by_row_tid(const void *a, const void *b) {
  uint64_t x = ((const struct thread_row *)a)->tid, y = ((const struct thread_row *)b)->tid;
  return (x > y) - (x < y);
}

/* threads?debug=1: every thread's stack as `dntrace stacks` prints it, leaf first. 0, or -1 when
 * out of memory. */
static int write_threads_text(FILE *fp, const struct job *j) {
  struct thread_rows l = {0};
  dnt_profile_each_stack(j->prof, collect_thread, &l);
  if (l.failed) {
    for (size_t i = 0; i < l.n; i++) free(l.v[i].frames);
    free(l.v);
    return -1;
  }
  if (l.n) qsort(l.v, l.n, sizeof *l.v, by_row_tid);
  fprintf(fp, "Process %d (%s): %zu managed thread%s\n\n", j->pid, j->name, l.n, l.n == 1 ? "" : "s");
  for (size_t i = 0; i < l.n; i++) {
    const char *name = dnt_profile_thread_name(j->prof, l.v[i].tid);
    fprintf(fp, "Thread (0x%llX) %llu%s", (unsigned long long)l.v[i].tid, (unsigned long long)l.v[i].tid,
            name && name[0] ? " " : "");
    dnt_text_put(fp, name ? name : ""); /* a thread's name and a frame's are the target's words */
    fputs(":\n", fp);
    for (size_t f = l.v[i].n; f > 0; f--) {
      const char *fn = dnt_profile_name(j->prof, l.v[i].frames[f - 1]);
      fputs("  ", fp);
      dnt_text_put(fp, strcmp(fn, DNT_UNMANAGED_FRAME) == 0 ? "[Native Frames]" : fn);
      fputc('\n', fp);
    }
    fputc('\n', fp);
    free(l.v[i].frames);
  }
  free(l.v);
  return 0;
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

void serve_answer_text(struct dnt_http_reply *rep, int status, const char *text) {
  rep->status = status;
  rep->body = strdup(text);
  rep->body_len = rep->body ? strlen(rep->body) : 0; /* out of memory: the status alone */
}

/* A heap request's end: the walk made a graph, the graph a heap profile (each object under its
 * dominators' types: inuse_space, inuse_objects), or why not. */
static void heap_finish(struct job *j, struct dnt_http_reply *rep) {
  char text[400];
  dnt_heap_analysis_finish(j->heap);
  const dnt_heap_summary *s = dnt_heap_analysis_summary(j->heap);
  if (s->complete && s->unnamed_objects) { /* see dntrace-gcdump(1): never a profile of unnamed types */
    snprintf(text, sizeof text, "process %d: the runtime named no type for %llu objects of the walk (another session "
             "on the process has its events on): ask again once it has ended\n", j->pid,
             (unsigned long long)s->unnamed_objects);
    serve_answer_text(rep, 502, text);
    return;
  }
  struct dnt_heap *h = dnt_heap_analysis_failed(j->heap) ? NULL : dnt_heap_analysis_take(j->heap);
  if (!h && !dnt_heap_analysis_failed(j->heap)) {
    if (s->lost_events)
      snprintf(text, sizeof text, "process %d: the heap walk is incomplete: %llu of its events were lost\n", j->pid,
               (unsigned long long)s->lost_events);
    else
      snprintf(text, sizeof text, "process %d: no complete heap walk within %d s\n", j->pid, HEAP_TIMEOUT_MS / 1000);
    serve_answer_text(rep, 502, text);
    return;
  }
  struct dnt_profile *prof = h ? dnt_heap_profile(h) : NULL;
  if (prof) { /* the labels the job's own profile took on the loop (no loop data read here) */
    const char *kv[2 * (MAX_LABELS + 2)];
    size_t n = dnt_profile_nlabels(j->prof);
    for (size_t i = 0; i < 2 * n && i < sizeof kv / sizeof kv[0]; i++) kv[i] = dnt_profile_label(j->prof, i);
    if (dnt_profile_set_labels(prof, kv, n < MAX_LABELS + 2 ? n : MAX_LABELS + 2) != 0) {
      dnt_profile_free(prof);
      prof = NULL;
    }
  }
  FILE *fp = prof ? open_memstream(&rep->body, &rep->body_len) : NULL;
  char title[320];
  snprintf(title, sizeof title, "heap of process %d (%s)", j->pid, j->name);
  int rc = fp ? dnt_profile_write(prof, DNT_PROFILE_PPROF, title, fp) : -1;
  if (fp && fclose(fp) != 0) rc = -1;
  dnt_profile_free(prof);
  dnt_heap_free(h);
  if (rc != 0) {
    if (fp) free(rep->body);
    serve_answer_text(rep, 500, "out of memory\n");
    return;
  }
  rep->status = 200;
  rep->content_type = "application/octet-stream";
}

/* The end of the stream: the profile finished and written (or why not) into j->answer. */
static void work_finish(uv_work_t *w) {
  struct job *j = w->data;
  struct dnt_http_reply *rep = &j->answer;
  char text[400];
  if (j->loop_failed) {
    snprintf(text, sizeof text, "process %d: %s\n", j->pid, j->loop_msg);
    serve_answer_text(rep, 502, text);
    return;
  }
  if (j->parse_failed) {
    snprintf(text, sizeof text, "process %d sent a stream that cannot be read: %s\n", j->pid, j->msg);
    serve_answer_text(rep, 502, text);
    return;
  }
  if (!j->stopped || ntr_parser_finish(j->parser) != 0) {
    snprintf(text, sizeof text, "process %d ended the session before the profile was complete (it exited?)\n",
             j->pid);
    serve_answer_text(rep, 502, text);
    return;
  }
  if (j->kind == JOB_HEAP) {
    heap_finish(j, rep);
    return;
  }
  if (j->kind == JOB_THREADS) dsipc_process_threads(j->pid, name_profile_thread, j->prof);
  if (j->cpu && serve_cpu_profile(j, rep) != 0) return;
  if (dnt_profile_failed(j->prof) || dnt_profile_finish(j->prof) != 0) {
    serve_answer_text(rep, 500, "out of memory\n");
    return;
  }
  rep->status = 200;
  FILE *fp = open_memstream(&rep->body, &rep->body_len);
  if (!fp) {
    serve_answer_text(rep, 500, "out of memory\n");
    return;
  }
  char title[320];
  snprintf(title, sizeof title, "%s of process %d (%s)", j->cpu ? "on-CPU time (perf cpu-clock)" : serve_job_names[j->kind],
           j->pid, j->name);
  int rc = 0;
  if (j->kind == JOB_THREADS && j->debug) {
    rep->content_type = "text/plain; charset=utf-8";
    rc = write_threads_text(fp, j);
  } else {
    rep->content_type = "application/octet-stream";
    rc = dnt_profile_write(j->prof, DNT_PROFILE_PPROF, title, fp);
  }
  if (fclose(fp) != 0 || rc != 0) {
    free(rep->body);
    serve_answer_text(rep, 500, "out of memory\n");
  }
}

static void job_kick(struct job *j);

/* Back on the loop after a work item. */
static void after_work(uv_work_t *w, int status) {
  struct job *j = w->data;
  (void)status;
  j->working = 0;
  if (j->released) { /* the client went, or serve stops: the memory goes now */
    job_free_when_idle(j);
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
    serve_job_release(j);
    return;
  }
  if (j->heap && !j->stopped && dnt_heap_analysis_walked(j->heap)) serve_job_timer(&j->timer); /* the walk is over */
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
  } else if (j->ended && (!j->cpu || serve_cpu_recorded(j))) { /* --cpu: and perf has written its file */
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
    dsipc_session_abandon(j->s);
    return;
  }
  if (j->nin + n > j->capin) {
    size_t cap = j->capin ? j->capin : 65536;
    while (cap < j->nin + n) cap *= 2;
    uint8_t *in = realloc(j->in, cap);
    if (!in) {
      j->loop_failed = 1;
      snprintf(j->loop_msg, sizeof j->loop_msg, "out of memory");
      dsipc_session_abandon(j->s);
      return;
    }
    j->in = in, j->capin = cap;
  }
  memcpy(j->in + j->nin, p, n);
  j->nin += n;
  job_kick(j);
}

/* The stream is over (rundown sent, the process gone, or abandoned): the last bytes and the
 * profile are made on the pool, then answered (after_work). */
static void on_job_end(void *ud, const dsipc_status *st) {
  struct job *j = ud;
  (void)st;
  j->ended = 1;
  if (!j->pending && !j->done) {
    serve_job_release(j);
    return;
  }
  if (j->heap && !j->stopped && dnt_heap_analysis_walked(j->heap)) serve_job_timer(&j->timer); /* the walk is over */
  job_kick(j);
}

void serve_job_timer(uv_timer_t *h) {
  struct job *j = h->data;
  if (!j->stopped) { /* the window is over: the runtime sends its rundown, then ends the stream */
    j->stopped = 1;
    if (j->cpu) serve_cpu_stop(j);
    dsipc_session_stop(j->s);
    if (!j->ended) uv_timer_start(&j->timer, serve_job_timer, STOP_GRACE_MS, 0);
    return;
  }
  snprintf(j->loop_msg, sizeof j->loop_msg, "no rundown within %d s of StopTracing", STOP_GRACE_MS / 1000);
  j->loop_failed = 1;
  dsipc_session_abandon(j->s); /* on_job_end answers */
}

/* The window starts once the session has started, and with --cpu once perf records too. */
static void start_window(struct job *j) {
  if (!j->session_up || j->stopped || uv_is_active((uv_handle_t *)&j->timer)) return;
  if (j->cpu && !serve_cpu_recording(j)) return;
  if (j->window_ms) uv_timer_start(&j->timer, serve_job_timer, j->window_ms, 0);
}

void serve_job_progress(struct job *j) {
  if (j->released) {
    job_free_when_idle(j);
    return;
  }
  start_window(j);
  job_kick(j);
}

void serve_job_window_over(struct job *j) {
  if (!j->stopped) serve_job_timer(&j->timer);
}

static void on_job_started(void *ud, const dsipc_status *st) {
  struct job *j = ud;
  j->starting = 0;
  if (st->code) {
    char text[700];
    snprintf(text, sizeof text, "process %d refused the session: %s\n", j->pid, st->msg);
    job_answer_text(j, 502, text);
    if (j->done) {
      struct dnt_http_reply failed = {.status = 502};
      j->done(j, &failed);
    }
    serve_job_release(j);
    return;
  }
  if (j->started) j->started(j);
  j->session_up = 1;
  start_window(j);
}

static void on_job_notice(void *ud, const char *msg) {
  struct job *j = ud;
  serve_say(j->sv, DNT_SAY_WARNING, "process %d: %s", j->pid, msg);
}

static const dsipc_session_cb job_cb = {on_job_started, on_job_data, on_job_end, on_job_notice};

/* --push windows: a sample counts in the window whose span holds its time (the worker's call). */
static int keep_in_window(void *ud, uint64_t thread, uint64_t time_ns) {
  struct job *j = ud;
  (void)thread;
  return time_ns >= j->from_ns && time_ns < __atomic_load_n(&j->until_ns, __ATOMIC_ACQUIRE);
}

size_t serve_target_label_kv(const struct serve *sv, const struct target *t, const char **kv, char *pid_buf) {
  snprintf(pid_buf, 24, "%d", t->pid);
  size_t n = 0;
  kv[n++] = "pid", kv[n++] = pid_buf, kv[n++] = "process", kv[n++] = t->name;
  for (size_t i = 0; i < 2 * sv->c.nlabels; i++) kv[n++] = sv->c.label_kv[i];
  return n / 2;
}

int serve_job_labels(struct serve *sv, const struct target *t, struct dnt_profile *prof) {
  const char *kv[2 * (MAX_LABELS + 2)];
  char pid[24];
  size_t pairs = serve_target_label_kv(sv, t, kv, pid);
  return dnt_profile_set_labels(prof, kv, pairs);
}

/* Starts a job of kind on t for window_ms and defers rep's answer to it. 0, or the HTTP status
 * to answer now (with text written into err). */
int serve_job_start(struct serve *sv, struct target *t, enum job_kind kind, uint64_t window_ms, int debug,
                     struct dnt_http_reply *rep, char *err, size_t cap) {
  int cpu = kind == JOB_PROFILE && sv->c.cpu && rep; /* --push windows stay thread time */
  int refused = cpu ? serve_cpu_check(t, err, cap) : 0;
  if (refused) return refused;
  struct job *j = calloc(1, sizeof *j);
  if (!j) return snprintf(err, cap, "out of memory\n"), 500;
  j->sv = sv;
  j->t = t;
  j->kind = kind;
  j->debug = debug;
  j->window_ms = window_ms;
  j->pid = t->pid;
  snprintf(j->name, sizeof j->name, "%s", t->name);
  ntr_callbacks cb;
  int made;
  if (kind == JOB_HEAP) { /* the walk, read into its graph; the profile is made from it at the end */
    made = (j->heap = dnt_heap_analysis_new()) && (j->prof = dnt_profile_new()) &&
           serve_job_labels(sv, t, j->prof) == 0; /* only its labels: the heap's profile takes them */
    dnt_heap_analysis_callbacks(&cb);
    made = made && ntr_parser_new(&j->parser, &cb, j->heap, NULL) == 0;
  } else {
    made = (j->prof = dnt_profile_new()) != NULL;
    if (made && cpu) dnt_profile_methods_only(j->prof, 1); /* the session's events name perf's frames, no more */
    if (made)
      dnt_profile_set_source(j->prof, kind == JOB_ALLOCS    ? DNT_SOURCE_ALLOCATIONS
                                      : kind == JOB_THREADS ? DNT_SOURCE_THREADS
                                                            : DNT_SOURCE_SAMPLER);
    made = made && serve_job_labels(sv, t, j->prof) == 0;
    dnt_profile_callbacks(&cb);
    made = made && ntr_parser_new(&j->parser, &cb, j->prof, NULL) == 0;
  }
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

  if (!made) {
    snprintf(err, cap, "out of memory\n");
    serve_job_release(j);
    return 500;
  }
  /* the sampler for stacks, or the GC keyword at verbose level for GCAllocationTick with its
   * stack; the method rundown at the end names the frames either way */
  /* --cpu: the method events, for names, as `dntrace perf` asks for them */
  /* a heap: the walk's keywords at verbose level (its start forces the walk's GC); the rundown
   * names the types' modules */
  dsipc_provider prov = cpu ? (dsipc_provider){.name = RUNTIME_PROVIDER, .keywords = METHOD_KEYWORDS, .level = 5, .args = NULL}
                        : kind == JOB_HEAP
                            ? (dsipc_provider){.name = RUNTIME_PROVIDER, .keywords = HEAP_KEYWORDS, .level = 5, .args = NULL}
                        : kind == JOB_ALLOCS
                            ? (dsipc_provider){.name = RUNTIME_PROVIDER, .keywords = 0x1, .level = 5, .args = NULL}
                            : (dsipc_provider){.name = SAMPLE_PROFILER, .keywords = 0, .level = 4, .args = NULL};
  dsipc_session_config cfg = {.buffer_mb = kind == JOB_HEAP ? HEAP_BUFFER_MB : PROFILE_BUFFER_MB, .format = 1,
                              .request_rundown = 1, .rundown_keyword = DSIPC_DEFAULT_RUNDOWN_KEYWORD,
                              .request_stackwalk = !cpu && kind != JOB_HEAP, .providers = &prov, .n_providers = 1};
  dsipc_status st = {0};
  if (dsipc_session_start(sv->loop, t->ep.path, 2, &cfg, REPLY_TIMEOUT_MS, &job_cb, j, &j->s, &st) != 0) {
    snprintf(err, cap, "cannot start a session on process %d: %s\n", t->pid, st.msg);
    serve_job_release(j);
    return 502;
  }
  j->starting = 1;
  if (j->push) {
    t->push->next = j;
    return 0;
  }
  int status = cpu ? serve_cpu_begin(j, t, err, cap) : 0;
  if (status) {
    serve_job_release(j);
    return status;
  }
  if (!(j->pending = dnt_http_defer(rep, on_job_gone, j))) {
    snprintf(err, cap, "out of memory\n");
    serve_job_release(j);
    return 500;
  }
  return 0;
}
