/* The server, `dntrace serve`'s engine (dnt-agent.h "The server"): its targets, each followed
 * (agent/'s dnt_follow: counters into a table /metrics answers from memory, rules, ring), found
 * by pid, by name (the next one after a restart) or all of them (a rescan adds new ones, drops
 * ended ones); its HTTP answers (/metrics, the index, the pprof endpoints, the incidents); its
 * profile requests (serve-job.c, --cpu's serve-cpu.c) and --push windows (serve-push.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "dnt-trace.h"
#include "serve-int.h"

/* ---- each target, followed (agent/): its counters, its rules, its ring ---- */

static void on_value(void *ud, struct dnt_follow *f, const dnt_counter_value *v) {
  (void)f;
  struct target *t = ud;
  if (dnt_counter_table_put(&t->table, v) != 0 && !t->table_full) { /* out of memory: said once */
    t->table_full = 1;
    serve_say(t->sv, DNT_SAY_WARNING, "process %d: out of memory: some of its counters are not kept", t->pid);
  }
}

/* --rule: a rule of this target fired; its actions run among every target's (agent/incidents.c). */
static void on_fired(void *ud, struct dnt_follow *f, const struct dnt_firing *firing) {
  (void)f;
  struct target *t = ud;
  dnt_incidents_fire(t->sv->incidents, firing, t->pid, t->name);
}

static void on_started(void *ud, struct dnt_follow *f, int rc, const char *msg) {
  (void)f;
  struct target *t = ud;
  if (rc) {
    serve_say(t->sv, DNT_SAY_WARNING, "process %d refused the counters session: %s", t->pid, msg);
    t->ended = 1;
    return;
  }
  t->live = 1;
  serve_say(t->sv, DNT_SAY_LOG, "Following process %d (%s)", t->pid, t->name);
  serve_push_roll(t->sv, t); /* --push: its first window */
}

/* A save-ring's window, closed: the action's file (the target's next session starts after). */
static void on_window(void *ud, struct dnt_follow *f, const ntr_ring *ring) {
  (void)f;
  struct target *t = ud;
  char err[600];
  int ok = dnt_ring_write_file(ring, t->ring_path, err, sizeof err) == 0;
  if (!ok) serve_say(t->sv, DNT_SAY_WARNING, "%s", err);
  dnt_incidents_saved(t->sv->incidents, ok);
}

static void on_ended(void *ud, struct dnt_follow *f, const char *msg) {
  (void)f;
  struct target *t = ud;
  t->live = 0;
  t->ended = 1;
  dnt_counter_table_clear(&t->table);
  if (t->sv->quitting) return;
  if (msg) serve_say(t->sv, DNT_SAY_WARNING, "process %d: %s", t->pid, msg);
  /* -n: on_reconnect finds the next one; --all: on_rescan drops it */
  serve_say(t->sv, DNT_SAY_LOG, "Process %d (%s) ended its session", t->pid, t->name);
}

static void on_notice(void *ud, struct dnt_follow *f, const char *msg) {
  (void)f;
  struct target *t = ud;
  serve_say(t->sv, DNT_SAY_WARNING, "process %d: %s", t->pid, msg);
}

static const struct dnt_follow_cb follow_cb = {on_started, on_value, on_fired, on_window, on_ended, on_notice};

/* save-ring (dnt-agent.h, dnt_save_ring_fn): the target's session stops; its end hands the window to on_window. */
static int save_ring(void *ud, int pid, const char *path) {
  struct serve *sv = ud;
  for (struct target *t = sv->targets; t; t = t->next) {
    if (t->pid != pid || !t->live || sv->quitting) continue;
    char *copy = strdup(path);
    if (!copy || dnt_follow_save_ring(t->f) != 0) {
      free(copy);
      continue;
    }
    free(t->ring_path);
    t->ring_path = copy;
    return 0;
  }
  return -1;
}

/* The target's labels for /metrics (pid, process, --label pairs). 0, or -1 when out of memory. */
static int make_prom_labels(struct serve *sv, struct target *t) {
  const char *kv[2 * (MAX_LABELS + 2)];
  char pid[24];
  size_t pairs = serve_target_label_kv(sv, t, kv, pid);
  free(t->prom_labels);
  return (t->prom_labels = dnt_prom_label_pairs(kv, pairs)) ? 0 : -1;
}

/* Follows the process at ep (its socket) as a target, without waiting. NULL when it cannot be
 * (said; under --all a process may be gone by now). */
static struct target *target_add(struct serve *sv, const dsipc_endpoint *ep) {
  struct target *t = calloc(1, sizeof *t);
  if (!t) {
    serve_say(sv, DNT_SAY_WARNING, "process %d: out of memory: not followed", ep->host_pid);
    return NULL;
  }
  t->sv = sv;
  t->pid = ep->host_pid;
  t->key = ep->key;
  t->ep = *ep;
  sv->c.process_name(t->pid, t->name, sizeof t->name);
  char err[512];
  if (make_prom_labels(sv, t) != 0 || (sv->c.push_host && !(t->push = serve_pusher_new(sv)))) {
    snprintf(err, sizeof err, "out of memory");
  } else if (dnt_follow_start(&sv->fc, t->ep.path, t, &t->f, err, sizeof err) == 0) {
    if (t->push) t->push->retry.data = t;
    t->next = sv->targets;
    sv->targets = t;
    return t;
  }
  serve_say(sv, DNT_SAY_WARNING, "cannot start a session on process %d: %s", t->pid, err);
  serve_pusher_free(t);
  free(t->prom_labels);
  free(t);
  return NULL;
}

static void target_free(struct target *t) {
  for (int k = 0; k < JOB_KINDS; k++)
    if (t->jobs[k]) t->jobs[k]->t = NULL, t->jobs[k] = NULL; /* see job_release: the slot is gone */
  serve_pusher_free(t);
  dnt_follow_close(t->f); /* its incidents under way keep their own copy of their rule */
  free(t->ring_path);
  dnt_counter_table_release(&t->table);
  free(t->prom_labels);
  free(t);
}

/* Drops the targets whose process has ended (--all, -n) and has no request running. */
static void drop_ended(struct serve *sv) {
  for (struct target **pp = &sv->targets; *pp;) {
    struct target *t = *pp;
    int busy = 0;
    for (int k = 0; k < JOB_KINDS; k++) busy |= t->jobs[k] != NULL;
    if (t->ended && !busy) {
      *pp = t->next;
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
  dsipc_endpoint ep;
  int pid = sv->c.find_by_name(sv->c.name);
  if (pid && dsipc_endpoint_find(pid, &ep) == 0) target_add(sv, &ep);
}

static int on_endpoint(const dsipc_endpoint *ep, void *ud) {
  struct serve *sv = ud;
  for (struct target *t = sv->targets; t; t = t->next)
    if (t->pid == ep->host_pid && t->key == ep->key) {
      t->seen = 1;
      return 0;
    }
  struct target *t = target_add(sv, ep);
  if (t) t->seen = 1;
  return 0;
}

/* --all: every process with a diagnostic socket; the ones gone are dropped. */
static void on_rescan(uv_timer_t *h) {
  struct serve *sv = h->data;
  for (struct target *t = sv->targets; t; t = t->next) t->seen = 0;
  dsipc_endpoint_list(on_endpoint, sv);
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
    if (sv->c.name) fprintf(fp, "no session: waiting for a process named '%s'\n", sv->c.name);
    else fputs("no session: no target process is running\n", fp);
    return;
  }
  rep->status = 200;
  rep->content_type = PROM_CONTENT_TYPE;
  if (dnt_counters_prom_write_many(fp, tables, labels, n) < 0) rep->status = 500;
}

static void write_index(struct serve *sv, FILE *fp) {
  fprintf(fp, "dntrace serve: the endpoints of a Go program (net/http/pprof) for .NET processes\n\n"
        "/metrics                                  the counters of every target (Prometheus text)\n"
        "/debug/pprof/profile?seconds=N&pid=P      %s over N s (pprof; default 30, at most 300)\n"
        "/debug/pprof/allocs?seconds=N&pid=P       allocation samples with stacks over N s (pprof; default 5)\n"
        "/debug/pprof/threads?pid=P[&debug=1]      every managed thread's stack now (pprof, or text with debug=1)\n"
        "/debug/pprof/goroutine                    the same as threads (the name Go's scrapers ask for)\n"
        "/debug/pprof/heap?pid=P                   a heap snapshot: every object under its dominators' types\n"
        "                                          (pprof inuse_space, inuse_objects), one at a time per target\n"
        "/debug/dntrace/incidents                  what --rule fired, and the files it wrote (JSON; each file\n"
        "                                          at /debug/dntrace/incidents/NAME)\n\n"
        "pid= may be left out when there is one target.\n\ntargets:\n",
        sv->c.cpu ? "time on a CPU (perf cpu-clock), JIT frames named" : "thread time of managed stacks");
  for (struct target *t = sv->targets; t; t = t->next) {
    fprintf(fp, "  pid %d  %s  %s", t->pid, t->name, t->live ? "running" : t->ended ? "ended" : "starting");
    if (t->push)
      fprintf(fp, "  push: %llu sent, %llu dropped, %llu failed attempts, %zu waiting", t->push->sent,
              t->push->dropped, t->push->failed, t->push->nq);
    fputc('\n', fp);
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

/* /debug/dntrace/incidents: what the rules fired and the files they wrote, as JSON. */
#define INCIDENT_FILES "/debug/dntrace/incidents/"
#define MAX_INCIDENT_FILE (1024L << 20) /* a file answered whole, from memory: larger ones are fetched otherwise */

static void write_incidents(struct serve *sv, FILE *fp, struct dnt_http_reply *rep) {
  rep->content_type = "application/json";
  fputs("{\"rules\":[", fp);
  for (size_t i = 0; i < sv->c.nrules; i++) {
    if (i) fputc(',', fp);
    dnt_json_string(fp, sv->c.rules[i]);
  }
  fprintf(fp, "],\"files\":\"%s\",\"incidents\":[", INCIDENT_FILES);
  size_t n = sv->incidents ? dnt_incidents_done(sv->incidents) : 0;
  for (size_t i = 0; i < n; i++) fprintf(fp, "%s%s", i ? "," : "", dnt_incidents_json(sv->incidents, i));
  fputs("]}\n", fp);
}

/* /debug/dntrace/incidents/NAME: a file an incident wrote (a name in the output directory). */
static void write_incident_file(struct serve *sv, const char *rest, FILE *fp, struct dnt_http_reply *rep) {
  char name[1024];
  size_t len = strcspn(rest, "?");
  snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), rest);
  if (!dnt_incidents_wrote(sv->incidents, name)) {
    rep->status = 404;
    fputs("not a file an incident wrote: see /debug/dntrace/incidents\n", fp);
    return;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dnt_incidents_dir(sv->incidents), name);
  FILE *in = fopen(path, "rb");
  struct stat st;
  if (!in || fstat(fileno(in), &st) != 0) {
    if (in) fclose(in);
    rep->status = 404;
    fprintf(fp, "%s is gone (the disk budget, or removed by hand)\n", name);
    return;
  }
  if (st.st_size > MAX_INCIDENT_FILE) {
    fclose(in);
    rep->status = 413;
    fprintf(fp, "%s is %lld MB: fetch it from %s on the host\n", name, (long long)st.st_size >> 20, path);
    return;
  }
  rep->content_type = "application/octet-stream";
  char buf[65536];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, fp);
  fclose(in);
}

static void on_http(void *ud, const char *path, struct dnt_http_reply *rep) {
  struct serve *sv = ud;
  FILE *fp = open_memstream(&rep->body, &rep->body_len);
  if (!fp) { /* out of memory: the server answers 500 */
    rep->status = 500;
    return;
  }
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
  } else if (path_is(path, "/debug/pprof/heap")) {
    kind = JOB_HEAP;
  } else if (path_is(path, "/debug/dntrace/incidents")) {
    write_incidents(sv, fp, rep);
  } else if (strncmp(path, INCIDENT_FILES, strlen(INCIDENT_FILES)) == 0 && sv->incidents) {
    write_incident_file(sv, path + strlen(INCIDENT_FILES), fp, rep);
  } else {
    rep->status = 404;
    fputs("not found: see /debug/pprof/ for the endpoints\n", fp);
  }
  if (kind != JOB_KINDS) {
    int status = 0;
    long seconds = kind == JOB_THREADS || kind == JOB_HEAP ? 0 /* a snapshot: no window */
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
      fprintf(fp, "a %s request for process %d is already running\n", serve_job_names[kind], t->pid);
    } else if (sv->njobs >= MAX_JOBS) {
      rep->status = 429;
      fprintf(fp, "%d profile requests are already running\n", MAX_JOBS);
    } else {
      char err[700];
      uint64_t window = kind == JOB_THREADS ? THREADS_WINDOW_MS
                        : kind == JOB_HEAP  ? HEAP_TIMEOUT_MS /* stopped sooner: when the walk is over */
                                            : (uint64_t)seconds * 1000;
      status = serve_job_start(sv, t, kind, window, debug, rep, err, sizeof err);
      if (status) {
        rep->status = status;
        fputs(err, fp);
      } else {
        deferred = 1;
      }
    }
  }
  if (fclose(fp) != 0) { /* out of memory */
    free(rep->body);
    rep->body = NULL, rep->body_len = 0;
    if (!deferred) rep->status = 500;
  }
  if (deferred) { /* the job answers; the server sends nothing now */
    free(rep->body);
    rep->body = NULL;
    rep->body_len = 0;
  }
}

void dnt_server_stop(struct serve *sv) {
  if (sv->quitting) return;
  sv->quitting = 1;
  dnt_http_server_close(sv->http); /* every deferred request's job is abandoned with it */
  sv->http = NULL;
  if (sv->timers) {
    uv_close((uv_handle_t *)&sv->reconnect, NULL);
    uv_close((uv_handle_t *)&sv->rescan, NULL);
    uv_close((uv_handle_t *)&sv->push_tick, NULL);
  }
  for (struct target *t = sv->targets; t; t = t->next) serve_pusher_free(t); /* windows unsent are dropped */
  for (struct target *t = sv->targets; t; t = t->next) {
    dnt_follow_close(t->f); /* no rundown waited for */
    t->f = NULL;
  }
}


static void on_incident_line(void *ud, enum dnt_say_kind kind, const char *line) {
  const struct serve *sv = ud;
  sv->c.say(sv->c.say_ud, kind, line);
}

int dnt_server_start(const struct dnt_server_config *c, const dsipc_endpoint *targets, size_t ntargets,
                     struct dnt_server **out, char *err, size_t cap) {
  *out = NULL;
  struct serve *sv = calloc(1, sizeof *sv);
  if (!sv) return snprintf(err, cap, "out of memory"), -1;
  sv->c = *c;
  sv->loop = c->loop;
  sv->fc = (struct dnt_follow_config){
      .loop = sv->loop,
      .session = {.buffer_mb = c->ring_ms ? 256 : COUNTERS_BUFFER_MB, .format = 1, .request_rundown = c->ring_ms != 0,
                  .request_stackwalk = c->ring_ms != 0, .providers = c->providers, .n_providers = c->nproviders},
      .specs = c->specs,
      .counters_session_id = c->counters_session_id,
      .rules = c->rules,
      .nrules = c->nrules,
      .max_fires = c->max_fires,
      .ring_ms = c->ring_ms,
      .ring_bytes = c->ring_bytes,
      .unseen_ms = c->nrules ? 3000 : 0,
      .cb = &follow_cb};
  if (c->nrules) {
    struct dnt_incident_opts io = c->incidents;
    io.say = on_incident_line, io.say_ud = sv;
    if (!(sv->incidents = dnt_incidents_new(sv->loop, &io, c->ring_ms ? save_ring : NULL, sv))) {
      free(sv);
      return snprintf(err, cap, "cannot find this program's own file: %s", strerror(errno)), -1;
    }
  }
  if (dnt_http_server_start(sv->loop, c->listen, on_http, sv, &sv->http, err, cap) != 0) {
    dnt_incidents_free(sv->incidents);
    free(sv);
    return -1;
  }
  for (size_t i = 0; i < ntargets; i++) target_add(sv, &targets[i]);
  uv_timer_init(sv->loop, &sv->reconnect);
  uv_timer_init(sv->loop, &sv->rescan);
  uv_timer_init(sv->loop, &sv->push_tick);
  sv->timers = 1;
  sv->reconnect.data = sv->rescan.data = sv->push_tick.data = sv;
  if (c->push_host) uv_timer_start(&sv->push_tick, serve_push_tick, 0, c->push_interval_ms ? c->push_interval_ms : 10000);
  if (c->name) uv_timer_start(&sv->reconnect, on_reconnect, RECONNECT_MS, RECONNECT_MS);
  if (c->all) uv_timer_start(&sv->rescan, on_rescan, 0, c->rescan_ms ? c->rescan_ms : DEFAULT_RESCAN_MS);
  *out = sv;
  return 0;
}

int dnt_server_port(const struct dnt_server *sv) { return dnt_http_server_port(sv->http); }

void dnt_server_free(struct dnt_server *sv) {
  if (!sv) return;
  if (!sv->quitting) dnt_http_server_close(sv->http);
  for (struct target *t = sv->targets, *next; t; t = next) {
    next = t->next;
    target_free(t);
  }
  dnt_incidents_free(sv->incidents);
  free(sv);
}
