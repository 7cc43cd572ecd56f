/* The server's --cpu: /debug/pprof/profile answered with perf's on-CPU profile (serve-int.h), made
 * as `dntrace perf` makes it. The request is a job of serve-job.c whose EventPipe session carries
 * the runtime's method events and rundown (the names of JIT and ReadyToRun code, parsed on the
 * thread pool as the stream comes); beside it:
 *   1. thread pool: the runtime's perf map turned on (two IPC round trips to the target): names
 *      for the JIT code the method events miss;
 *   2. loop: `perf record -e cpu-clock -g -p PID` started as a child, its ack fifo watched by the
 *      loop (dnt_perf_record_start_async), stopped when the window is over;
 *   3. thread pool, once perf has exited and the rundown is parsed (the job's last work item):
 *      `perf script` read as a stream into the profile (dnt_perf_load), which is then finished
 *      and written as for thread time;
 *   4. thread pool, when the job goes: the perf map off again, perf.data removed.
 * Memory is bounded by what the profile keeps: one row per distinct stack, never per sample;
 * perf.data (on disk, in a directory that a later run removes should we be killed) holds the
 * samples. The loop never waits for perf, the runtime or perf script. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "serve-int.h"

enum { CPU_MAP_ON = 1, CPU_STARTING, CPU_RECORDING, CPU_CLOSED };

/* ---- perf record, on the loop ---- */

static void on_perf_closed(void *ud) {
  struct job *j = ud;
  struct cpu_run *c = j->cpu;
  c->state = CPU_CLOSED;
  c->perf_ok = c->perf.started && dnt_perf_record_ok(&c->perf, c->data);
  serve_job_progress(j);
}

static void on_perf_started(void *ud, int rc) {
  struct job *j = ud;
  struct cpu_run *c = j->cpu;
  if (rc) { /* on_perf_closed comes next; the window ends now, the answer says why */
    c->perf.started = 0;
    serve_job_window_over(j);
    return;
  }
  c->state = CPU_RECORDING;
  if (j->released || j->stopped) {
    dnt_perf_record_stop(&c->perf);
    return;
  }
  serve_job_progress(j); /* the window starts once the session has started too */
}

static void after_perfmap_on(uv_work_t *w, int status) {
  struct job *j = w->data;
  struct cpu_run *c = j->cpu;
  (void)status;
  c->working = 0;
  if (j->released || j->stopped) { /* gone meanwhile, or the session failed: no perf */
    snprintf(c->perf.msg, sizeof c->perf.msg, "the request ended before perf started");
    c->state = CPU_CLOSED;
    serve_job_progress(j);
    return;
  }
  c->state = CPU_STARTING;
  dnt_perf_record_start_async(&c->perf, j->sv->loop, j->pid, CPU_HZ, c->data, on_perf_started, on_perf_closed, j);
}

static void work_perfmap_on(uv_work_t *w) {
  struct job *j = w->data;
  dnt_perfmap_begin(&j->cpu->pm, j->pid, j->cpu->ns_pid, j->cpu->ep_path);
}

int serve_cpu_check(const struct target *t, char *err, size_t cap) {
  char why[512];
  if (dnt_perf_check(t->pid, why, sizeof why) < 0) return snprintf(err, cap, "%s\n", why), 503;
  return 0;
}

int serve_cpu_begin(struct job *j, const struct target *t, char *err, size_t cap) {
  struct cpu_run *c = calloc(1, sizeof *c);
  if (!c) return snprintf(err, cap, "out of memory\n"), 500;
  const char *tmp = getenv("TMPDIR");
  tmp = tmp && *tmp ? tmp : "/tmp";
  /* named as perf's control directories, so that a run after a killed serve removes it */
  snprintf(c->dir, sizeof c->dir, "%s/dntrace-perf-%d-XXXXXX", tmp, (int)getpid());
  if (!mkdtemp(c->dir)) {
    snprintf(err, cap, "cannot make a directory for perf.data in '%s': %s\n", tmp, strerror(errno));
    free(c);
    return 500;
  }
  snprintf(c->data, sizeof c->data, "%s/perf.data", c->dir);
  snprintf(c->ep_path, sizeof c->ep_path, "%s", t->ep.path);
  c->ns_pid = t->ep.ns_pid;
  c->state = CPU_MAP_ON;
  c->working = 1;
  c->work.data = j;
  j->cpu = c;
  uv_queue_work(j->sv->loop, &c->work, work_perfmap_on, after_perfmap_on);
  return 0;
}

int serve_cpu_recording(const struct job *j) { return j->cpu->state == CPU_RECORDING; }

int serve_cpu_recorded(const struct job *j) { return j->cpu->state == CPU_CLOSED; }

void serve_cpu_stop(struct job *j) {
  if (j->cpu->state == CPU_RECORDING || j->cpu->state == CPU_STARTING) dnt_perf_record_stop(&j->cpu->perf);
}

/* ---- the profile, on the thread pool (the job's last work item) ---- */

int serve_cpu_profile(struct job *j, struct dnt_http_reply *rep) {
  struct cpu_run *c = j->cpu;
  char text[1200];
  if (!c->perf_ok) { /* perf's own words, when it said any */
    const char *words = c->perf.err_len && !strstr(c->perf.msg, c->perf.err_text) ? c->perf.err_text : "";
    snprintf(text, sizeof text, "process %d: %.500s%s%.600s\n", j->pid, c->perf.msg, words[0] ? ": " : "", words);
    serve_answer_text(rep, 502, text);
    return -1;
  }
  dnt_profile_methods_only(j->prof, 0); /* the method table is in; perf's samples count */
  struct dnt_perf_load_info info;
  int have_map = c->pm.was_on || c->pm.we_enabled;
  c->reader = dnt_perf_load(j->prof, c->data, have_map ? c->pm.path : NULL, 1000.0 / CPU_HZ, &c->perfmap, NULL, NULL,
                            &info);
  if (!c->reader) {
    snprintf(text, sizeof text, "process %d: %s\n", j->pid, info.error);
    serve_answer_text(rep, 502, text);
    return -1;
  }
  struct dnt_perf_script_stats st;
  uint64_t used = 0;
  dnt_perf_reader_stats(c->reader, &st, &used);
  if (used == 0) {
    snprintf(text, sizeof text, "perf recorded no samples of process %d (idle all along, or gone?)\n", j->pid);
    serve_answer_text(rep, 502, text);
    return -1;
  }
  if (dnt_perf_name_threads(j->prof, j->pid) != 0) {
    serve_answer_text(rep, 500, "out of memory\n");
    return -1;
  }
  return 0;
}

/* ---- the end: the perf map off and perf.data removed, on the thread pool ---- */

static void work_cleanup(uv_work_t *w) {
  struct cpu_run *c = ((struct job *)w->data)->cpu;
  dnt_perfmap_end(&c->pm, c->ep_path, 0, NULL); /* a target that exited cannot be told: no warning kept */
  unlink(c->data);
  rmdir(c->dir);
}

static void after_cleanup(uv_work_t *w, int status) {
  struct job *j = w->data;
  (void)status;
  j->cpu->working = 0;
  j->cpu->cleaned = 1;
  serve_job_progress(j);
}

int serve_cpu_idle(struct job *j) {
  struct cpu_run *c = j->cpu;
  if (c->working) return 0; /* its after-work callback comes back here */
  if (c->state != CPU_CLOSED) {
    serve_cpu_stop(j); /* on_perf_closed comes back here */
    return 0;
  }
  if (!c->cleaned) {
    c->working = 1;
    uv_queue_work(j->sv->loop, &c->work, work_cleanup, after_cleanup);
    return 0;
  }
  return 1;
}

void serve_cpu_free(struct cpu_run *c) {
  if (!c) return;
  dnt_perf_reader_free(c->reader);
  dnt_symtab_release(&c->perfmap);
  free(c);
}
