/* dntrace serve --cpu: /debug/pprof/profile answered with perf's on-CPU profile (serve.h).
 *
 * The request goes through four steps, none of which makes the loop wait:
 *   1. thread pool: the runtime's perf map turned on (two IPC round trips to the target), so that
 *      its JIT code has names;
 *   2. loop: `perf record -e cpu-clock -g -p PID` started as a child (dnt_perf_record_start_async:
 *      its ack fifo watched by the loop), stopped by the window's timer;
 *   3. loop: perf has exited and its handles are closed;
 *   4. thread pool: `perf script` read as a stream into a profile (dnt_perf_load, as `dntrace
 *      perf` reads it: JIT frames named from the perf map, native and kernel ones from perf's
 *      symbols), the perf map turned off again, the pprof written, perf.data removed.
 * Memory is bounded by what the profile keeps: one row per distinct stack, never per sample;
 * perf.data (on disk, in a directory of ours that a later run removes if we are killed) holds the
 * samples. A client that leaves, or serve stopping, stops perf early; step 4 then only turns the
 * perf map off and cleans up. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "builtin.h"
#include "collect-native.h"
#include "serve.h"
#include "util.h"

static void on_cpu_timer_closed(uv_handle_t *h) {
  struct job *j = h->data;
  dnt_profile_free(j->prof);
  free(j->answer.body);
  free(j->cpu);
  free(j);
}

/* Ends the request: its slot on the target now, its memory once the timer is closed (perf's
 * handles are closed and no work item runs by then: see the callers). */
static void cpu_release(struct job *j) {
  if (j->released) return;
  j->released = 1;
  if (j->t) j->t->jobs[j->kind] = NULL;
  j->sv->njobs--;
  uv_close((uv_handle_t *)&j->timer, on_cpu_timer_closed);
}

/* ---- step 4, on the thread pool ---- */

static void set_text(struct dnt_http_reply *rep, int status, const char *text) {
  rep->status = status;
  rep->body = dnt_xstrdup(text);
  rep->body_len = strlen(rep->body);
}

/* The profile from perf.data into j->answer (or why not). */
static void make_profile(struct job *j) {
  struct cpu_run *c = j->cpu;
  struct dnt_http_reply *rep = &j->answer;
  char text[1200];
  if (!c->perf_ok) { /* perf's own words, when it said any */
    const char *words = c->perf.err_len && !strstr(c->perf.msg, c->perf.err_text) ? c->perf.err_text : "";
    snprintf(text, sizeof text, "process %d: %.500s%s%.600s\n", j->pid, c->perf.msg, words[0] ? ": " : "", words);
    set_text(rep, 502, text);
    return;
  }
  struct dnt_symtab perfmap = {0};
  struct dnt_perf_load_info info;
  int have_map = c->pm.was_on || c->pm.we_enabled;
  dnt_perf_reader *r = dnt_perf_load(j->prof, c->data, have_map ? c->pm.path : NULL, 1000.0 / CPU_HZ, &perfmap, NULL,
                                     NULL, &info);
  uint64_t used = 0;
  if (r) {
    struct dnt_perf_script_stats st;
    dnt_perf_reader_stats(r, &st, &used);
    dnt_perf_name_threads(j->prof, j->pid);
  }
  if (!r) {
    snprintf(text, sizeof text, "process %d: %s\n", j->pid, info.error);
    set_text(rep, 502, text);
  } else if (used == 0) {
    snprintf(text, sizeof text, "perf recorded no samples of process %d (idle all along, or gone?)\n", j->pid);
    set_text(rep, 502, text);
  } else if (dnt_profile_failed(j->prof) || dnt_profile_finish(j->prof) != 0) {
    set_text(rep, 500, "out of memory\n");
  } else {
    FILE *fp = open_memstream(&rep->body, &rep->body_len);
    if (!fp) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    char title[320];
    snprintf(title, sizeof title, "on-CPU time (perf cpu-clock) of process %d (%s)", j->pid, j->name);
    int rc = dnt_profile_write(j->prof, DNT_PROFILE_PPROF, title, fp);
    if (fclose(fp) != 0 || rc != 0) {
      free(rep->body);
      set_text(rep, 500, "out of memory\n");
    } else {
      rep->status = 200;
      rep->content_type = "application/octet-stream";
    }
  }
  dnt_perf_reader_free(r); /* after the profile: it named the frames */
  dnt_symtab_release(&perfmap);
}

static void work_cpu_finish(uv_work_t *w) {
  struct job *j = w->data;
  struct cpu_run *c = j->cpu;
  if (c->wanted) make_profile(j);
  dnt_perfmap_end(&c->pm, c->ep_path, 0, NULL); /* its warning is lost: a target that exited cannot be told */
  if (c->data[0]) unlink(c->data);
  if (c->dir[0]) rmdir(c->dir);
}

static void after_cpu_finish(uv_work_t *w, int status) {
  struct job *j = w->data;
  (void)status;
  j->working = 0;
  if (j->pending) {
    dnt_http_pending_answer(j->pending, &j->answer); /* takes the body */
    j->pending = NULL;
    j->answer.body = NULL;
  }
  cpu_release(j);
}

static void queue_finish(struct job *j) {
  j->cpu->wanted = j->pending != NULL; /* the worker's copy: on_cpu_gone may clear pending meanwhile */
  j->working = 1;
  j->work.data = j;
  uv_queue_work(j->sv->loop, &j->work, work_cpu_finish, after_cpu_finish);
}

/* ---- steps 2 and 3, on the loop ---- */

/* perf has exited and its handles are closed: step 4. */
static void on_perf_closed(void *ud) {
  struct job *j = ud;
  struct cpu_run *c = j->cpu;
  c->recording = 0;
  c->perf_ok = c->perf.started && dnt_perf_record_ok(&c->perf, c->data);
  queue_finish(j);
}

static void on_cpu_window(uv_timer_t *h) { dnt_perf_record_stop(&((struct job *)h->data)->cpu->perf); }

static void on_perf_started(void *ud, int rc) {
  struct job *j = ud;
  if (rc) { /* on_perf_closed comes next, and answers with perf's words */
    j->cpu->perf.started = 0;
    return;
  }
  if (!j->pending) { /* the client left while perf was starting */
    dnt_perf_record_stop(&j->cpu->perf);
    return;
  }
  uv_timer_start(&j->timer, on_cpu_window, j->window_ms, 0);
}

/* The client left (or serve stops): perf stops now; step 4 cleans up without a profile. */
static void on_cpu_gone(void *ud) {
  struct job *j = ud;
  j->pending = NULL;
  uv_timer_stop(&j->timer);
  if (j->cpu->recording) dnt_perf_record_stop(&j->cpu->perf);
}

/* ---- step 1, on the thread pool ---- */

static void work_perfmap_on(uv_work_t *w) {
  struct job *j = w->data;
  dnt_perfmap_begin(&j->cpu->pm, j->pid, j->cpu->ns_pid, j->cpu->ep_path);
}

static void after_perfmap_on(uv_work_t *w, int status) {
  struct job *j = w->data;
  struct cpu_run *c = j->cpu;
  (void)status;
  j->working = 0;
  if (!j->pending) { /* gone meanwhile: the perf map off again */
    queue_finish(j);
    return;
  }
  c->recording = 1;
  dnt_perf_record_start_async(&c->perf, j->sv->loop, j->pid, CPU_HZ, c->data, on_perf_started, on_perf_closed, j);
}

int serve_cpu_start(struct serve *sv, struct target *t, uint64_t window_ms, struct dnt_http_reply *rep, char *err,
                    size_t cap) {
  char why[512];
  if (dnt_perf_check(t->pid, why, sizeof why) < 0) return snprintf(err, cap, "%s\n", why), 503;
  struct job *j = calloc(1, sizeof *j);
  struct cpu_run *c = calloc(1, sizeof *c);
  if (!j || !c) {
    free(j);
    free(c);
    return snprintf(err, cap, "out of memory\n"), 500;
  }
  const char *tmp = getenv("TMPDIR");
  /* named as perf's control directories, so that a run after a killed serve removes it */
  snprintf(c->dir, sizeof c->dir, "%s/dntrace-perf-%d-XXXXXX", tmp && *tmp ? tmp : "/tmp", (int)getpid());
  if (!mkdtemp(c->dir)) {
    snprintf(err, cap, "cannot make a directory for perf.data in '%s': %s\n", tmp && *tmp ? tmp : "/tmp",
             strerror(errno));
    free(j);
    free(c);
    return 500;
  }
  snprintf(c->data, sizeof c->data, "%s/perf.data", c->dir);
  snprintf(c->ep_path, sizeof c->ep_path, "%s", t->s.target.ep.path);
  c->ns_pid = t->s.target.ep.ns_pid;
  j->cpu = c;
  j->sv = sv;
  j->t = t;
  j->kind = JOB_PROFILE;
  j->window_ms = window_ms;
  j->pid = t->pid;
  snprintf(j->name, sizeof j->name, "%s", t->name);
  if (!(j->prof = dnt_profile_new())) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  serve_job_labels(sv, t, j->prof);
  uv_timer_init(sv->loop, &j->timer);
  j->timer.data = j;
  t->jobs[JOB_PROFILE] = j;
  sv->njobs++;
  if (!(j->pending = dnt_http_defer(rep, on_cpu_gone, j))) {
    rmdir(c->dir);
    c->dir[0] = c->data[0] = '\0';
    cpu_release(j);
    return snprintf(err, cap, "out of memory\n"), 500;
  }
  j->working = 1;
  j->work.data = j;
  uv_queue_work(sv->loop, &j->work, work_perfmap_on, after_perfmap_on);
  return 0;
}
