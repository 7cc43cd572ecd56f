/* dntrace serve: one long-running agent for one process, a list, or every .NET process it can
 * see, with the endpoints a Go program has (net/http/pprof) and Prometheus' /metrics, so that
 * Grafana Alloy, Pyroscope, Parca and Prometheus scrape it as they scrape Go services.
 *
 * Everything runs on one libuv loop, never run from inside a callback: each target followed by
 * agent/ (its session: counters decoded into a table /metrics answers from memory, the rules
 * and their flight recorder); per profile request an EventPipe session of its own, started
 * asynchronously, read into a profile (profile/) as the stream arrives, and answered (gzip pprof)
 * when the runtime has sent its rundown, through the HTTP server's deferred replies. A profile
 * request therefore never holds up /metrics. With --cpu, /debug/pprof/profile is perf's: perf
 * record runs beside that session, a child watched by the loop, and perf script is read on the
 * thread pool (serve-cpu.c).
 *
 *   targets   -p PID[,PID..] (kept, 503 once gone), -n NAME (the next process of that name after
 *             a restart), --all (every process with a diagnostic socket; a rescan every
 *             --rescan adds new ones, exited ones are dropped)
 *   labels    pid, process and each --label k=v, on every series and every profile's samples
 *   bounds    one profile, one allocs, one threads and one heap request per target at a time (429),
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
#include <sys/stat.h>
#include <uv.h>

#include "builtin.h"
#include "collect-native.h"
#include "dnt-trace.h"
#include "serve.h"
#include "target.h"
#include "util.h"

/* ---- each target, followed (agent/): its counters, its rules, its ring ---- */

static void on_value(void *ud, struct dnt_follow *f, const dnt_counter_value *v) {
  (void)f;
  struct target *t = ud;
  if (dnt_counter_table_put(&t->table, v) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
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
    dnt_warning("process %d refused the counters session: %s", t->pid, msg);
    t->ended = 1;
    return;
  }
  t->live = 1;
  printf("Following process %d (%s)\n", t->pid, t->name);
  fflush(stdout);
  serve_push_roll(t->sv, t); /* --push: its first window */
}

/* A save-ring's window, closed: the action's file (the target's next session starts after). */
static void on_window(void *ud, struct dnt_follow *f, const ntr_ring *ring) {
  (void)f;
  struct target *t = ud;
  dnt_incidents_saved(t->sv->incidents, dnt_ring_save(ring, t->ring_path) == 0);
}

static void on_ended(void *ud, struct dnt_follow *f, const char *msg) {
  (void)f;
  struct target *t = ud;
  t->live = 0;
  t->ended = 1;
  dnt_counter_table_clear(&t->table);
  if (t->sv->quitting) return;
  if (msg) dnt_warning("process %d: %s", t->pid, msg);
  printf("Process %d (%s) ended its session\n", t->pid, t->name);
  fflush(stdout); /* -n: on_reconnect finds the next one; --all: on_rescan drops it */
}

static void on_notice(void *ud, struct dnt_follow *f, const char *msg) {
  (void)f;
  struct target *t = ud;
  dnt_warning("process %d: %s", t->pid, msg);
}

static const struct dnt_follow_cb follow_cb = {on_started, on_value, on_fired, on_window, on_ended, on_notice};

/* save-ring (dnt-agent.h, dnt_save_ring_fn): the target's session stops; its end hands the window to on_window. */
static int save_ring(void *ud, int pid, const char *path) {
  struct serve *sv = ud;
  for (struct target *t = sv->targets; t; t = t->next) {
    if (t->pid != pid || !t->live || sv->quitting || dnt_follow_save_ring(t->f) != 0) continue;
    free(t->ring_path);
    t->ring_path = dnt_xstrdup(path);
    return 0;
  }
  return -1;
}

/* The target's labels for /metrics (pid, process, --label pairs). */
static void make_prom_labels(struct serve *sv, struct target *t) {
  const char *kv[2 * (MAX_LABELS + 2)];
  char pid[24];
  size_t pairs = serve_target_label_kv(sv, t, kv, pid);
  free(t->prom_labels);
  if (!(t->prom_labels = dnt_prom_label_pairs(kv, pairs))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
}

/* Opens pid as a target and starts following it without waiting. NULL when it cannot be reached
 * (said; under --all a process may be gone by now). */
static struct target *target_add(struct serve *sv, int pid, unsigned long long key) {
  struct target *t = calloc(1, sizeof *t);
  if (!t) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  t->sv = sv;
  t->pid = pid;
  t->key = key;
  if (dnt_target_resolve(pid, NULL, &t->where) != 0) {
    free(t);
    return NULL;
  }
  snprintf(t->name, sizeof t->name, "%s", t->where.name);
  char err[512];
  if (dnt_follow_start(&sv->fc, pid, t->where.ep.path, t, &t->f, err, sizeof err) != 0) {
    dnt_warning("cannot start a session on process %d: %s", pid, err);
    free(t);
    return NULL;
  }
  make_prom_labels(sv, t);
  if (sv->o->push) {
    t->push = serve_pusher_new(sv);
    t->push->retry.data = t;
  }
  t->next = sv->targets;
  sv->targets = t;
  sv->ntargets++;
  return t;
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
        sv->o->cpu ? "time on a CPU (perf cpu-clock), JIT frames named" : "thread time of managed stacks");
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

/* /debug/dntrace/incidents: what the rules fired and the files they wrote, as JSON. */
#define INCIDENT_FILES "/debug/dntrace/incidents/"
#define MAX_INCIDENT_FILE (1024L << 20) /* a file answered whole, from memory: larger ones are fetched otherwise */

static void write_incidents(struct serve *sv, FILE *fp, struct dnt_http_reply *rep) {
  rep->content_type = "application/json";
  fputs("{\"rules\":[", fp);
  for (size_t i = 0; i < sv->nrules; i++) {
    if (i) fputc(',', fp);
    dnt_json_string(fp, sv->rule_texts[i]);
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
    DNT_OPT_PARSE_MANY(0, "counters", "LIST", O(specs), parse_counters,
                  "the counters of /metrics, as 'counters' takes them (default\nSystem.Runtime)"),
    DNT_OPT_PARSE(0, "refresh-interval", "SEC", O(refresh), parse_refresh, "seconds between counter values (default 1)"),
    DNT_OPT_FLAG(0, "cpu", O(cpu), "/debug/pprof/profile is perf's on-CPU profile (perf cpu-clock,\n"
                                   "JIT frames named), not thread time"),
    DNT_OPT_STRING(0, "push", "URL", O(push), "send thread-time windows to Pyroscope at URL (http://HOST:PORT)"),
    {.kind = DNT_OPT_DURATION, .long_name = "push-interval", .argh = "TIME", .offset = O(push_interval_ms),
     .help = "--push: the length of a window (default 10s)"},
    DNT_OPT_LIST(0, "rule", "RULE", O(rules), "a rule of 'dntrace watch' on every target (repeatable); what\n"
                                             "fired is at /debug/dntrace/incidents"),
    DNT_OPT_STRING(0, "rules", "FILE", O(rules_file), "rules from FILE, one a line"),
    DNT_OPT_STRING('o', "output", "DIR", O(output_dir), "where the rules' actions write (default: the current directory)"),
    DNT_OPT_COUNT(0, "max-actions", "N", O(max_fires), 1000, "a rule fires at most N times in 10 minutes per target (default 1)"),
    DNT_OPT_COUNT(0, "max-disk", "MB", O(max_disk_mb), 16777216, "keep the actions' files under MB in all (see dntrace-watch(1))"),
    {.kind = DNT_OPT_DURATION, .long_name = "ring", .argh = "TIME", .offset = O(ring_ms),
     .help = "keep each target's last TIME of a recording, for the save-ring action"},
    DNT_OPT_COUNT(0, "ring-size", "MB", O(ring_mb), 1048576, "with --ring: at most MB of it per target (default 256)"),
    DNT_OPT_STRING(0, "ring-profile", "LIST", O(ring_profile),
                   "with --ring: what it records (default dotnet-common,\ndotnet-sampled-thread-time, as collect's)"),
    DNT_OPT_END(),
};
#undef O

const struct dnt_usage usage_serve = {
    .synopsis = "dntrace serve (-p PID[,PID..] | -n NAME | --all) [--label KEY=VALUE]... [--listen ADDR] [--counters LIST] [--refresh-interval SEC] [--rescan TIME] [--cpu] [--push URL [--push-interval TIME]] [--rule RULE... | --rules FILE [-o DIR] [--max-actions N] [--max-disk MB] [--ring TIME [--ring-size MB] [--ring-profile LIST]]]",
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
    if (sv->o->push && strpbrk(eq + 1, ",{}=")) { /* Pyroscope's name=APP{k=v,...} could not hold it */
      dnt_error("--label: with --push, a value has no ',', '{', '}' or '=' ('%s')", l->v[i]);
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

/* ---- the rules ---- */

/* A rule that parsed: its text kept for every target's engine (save-ring refused without --ring). */
static int take_rule(void *ud, struct dnt_rule *r, const char *text, const char *where) {
  struct serve *sv = ud;
  int rc = 0;
  for (size_t i = 0; !rc && i < r->nactions; i++)
    if (r->actions[i].kind == DNT_ACTION_SAVE_RING && !sv->o->ring_ms) {
      dnt_error("%s: save-ring needs a ring: give --ring TIME (each process's last TIME kept)", where);
      rc = DNT_EXIT_USAGE;
    }
  dnt_rule_release(r);
  if (rc) return rc;
  sv->rule_texts = dnt_xrealloc(sv->rule_texts, (sv->nrules + 1) * sizeof *sv->rule_texts);
  sv->rule_texts[sv->nrules++] = dnt_xstrdup(text);
  return 0;
}

/* The rules, and the events they want into wanted. */
static int read_rules(struct serve *sv, struct serve_options *o, struct dnt_providers *wanted) {
  int rc = dnt_rules_read(&o->rules, o->rules_file, &o->specs, wanted, take_rule, sv);
  if (rc) return rc;
  if (!sv->nrules && (o->output_dir || o->max_disk_mb || o->max_fires || o->ring_ms || o->ring_mb || o->ring_profile)) {
    dnt_error("-o, --max-actions, --max-disk and --ring go with --rule or --rules");
    return DNT_EXIT_USAGE;
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
  for (struct target *t = sv->targets; t; t = t->next) serve_pusher_free(t); /* windows unsent are dropped */
  uv_close((uv_handle_t *)&sv->sigint, NULL);
  uv_close((uv_handle_t *)&sv->sigterm, NULL);
  for (struct target *t = sv->targets; t; t = t->next) {
    dnt_follow_close(t->f); /* no rundown waited for */
    t->f = NULL;
  }
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
  /* --cpu where perf cannot run: said once, now, rather than on every request */
  if (o.cpu && dnt_perf_usable(0) < 0) {
    rc = DNT_EXIT_USAGE;
    goto out;
  }
  rc = DNT_EXIT_FAILURE;
  if (o.specs.n == 0 && dnt_counter_specs_parse(&o.specs, DNT_COUNTERS_DEFAULT, err, sizeof err) < 0) goto out;
  if ((rc = read_rules(&sv, &o, &sv.wanted)) != 0) goto out;
  rc = DNT_EXIT_FAILURE;
  if (dnt_counters_wire_build(&sv.wire, &o.specs, o.refresh, 1000, 10) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (o.ring_ms && dnt_providers_add_profiles(&sv.extra, o.ring_profile ? o.ring_profile
                                                                         : "dotnet-common,dotnet-sampled-thread-time",
                                              err, sizeof err) != 0) {
    dnt_error("--ring-profile: %s", err);
    rc = DNT_EXIT_USAGE;
    goto out;
  }
  if (dnt_providers_merge(&sv.extra, &sv.wanted, err, sizeof err) != 0) dnt_die(DNT_EXIT_FAILURE, "%s", err);
  sv.providers = dnt_xmalloc((sv.wire.n + sv.extra.n + 1) * sizeof *sv.providers);
  for (size_t i = 0; i < sv.wire.n; i++) sv.providers[sv.nproviders++] = sv.wire.v[i];
  for (size_t i = 0; i < sv.extra.n; i++)
    sv.providers[sv.nproviders++] = (dsipc_provider){.name = sv.extra.v[i].name, .keywords = sv.extra.v[i].keywords,
                                                     .level = sv.extra.v[i].level, .args = sv.extra.v[i].args};
  sv.loop = uv_default_loop();
  /* the targets' session: the counters, the events the rules want and, with --ring, what it
   * records (its rundown then names the window's stacks) */
  sv.fc = (struct dnt_follow_config){
      .loop = sv.loop,
      .session = {.buffer_mb = o.ring_ms ? 256 : COUNTERS_BUFFER_MB, .format = 1, .request_rundown = o.ring_ms != 0,
                  .request_stackwalk = o.ring_ms != 0, .providers = sv.providers, .n_providers = sv.nproviders},
      .specs = &o.specs,
      .counters_session_id = sv.wire.session_id[0] ? sv.wire.session_id : NULL,
      .rules = sv.rule_texts,
      .nrules = sv.nrules,
      .max_fires = (uint32_t)o.max_fires,
      .ring_ms = o.ring_ms,
      .ring_bytes = (uint64_t)(o.ring_mb ? o.ring_mb : 256) << 20,
      .unseen_ms = sv.nrules ? 3000 : 0,
      .cb = &follow_cb};
  if (sv.nrules) {
    struct dnt_incident_opts io = {.dir = o.output_dir, .json = 0, .max_disk_mb = o.max_disk_mb,
                                   .say = dnt_incidents_print};
    if (o.output_dir && mkdir(o.output_dir, 0755) != 0 && errno != EEXIST) {
      dnt_error("cannot make '%s': %s", o.output_dir, strerror(errno));
      goto out;
    }
    if (!(sv.incidents = dnt_incidents_new(sv.loop, &io, o.ring_ms ? save_ring : NULL, &sv)))
      dnt_die(DNT_EXIT_FAILURE, "cannot find this program's own file: %s", strerror(errno));
  }
#if defined(__GLIBC__)
  /* the thread pool's workers would each get a malloc arena of their own, and an agent's RSS
   * would creep up for minutes (10.2 MB after 2 min of 1 s push windows, 8.4 MB with one arena) */
  mallopt(M_ARENA_MAX, 1);
#endif

  /* the command line first (a bad --listen is a usage error), then the targets named, before
   * anything listens: a wrong pid is an error at once */
  if (dnt_http_addr_check(o.listen ? o.listen : DEFAULT_LISTEN, err, sizeof err) != 0) {
    dnt_error("--listen: %s", err);
    rc = DNT_EXIT_USAGE;
    goto out;
  }
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
    uv_timer_start(&sv.push_tick, serve_push_tick, 0, every);
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
  free(sv.providers);
  dnt_providers_release(&sv.wanted);
  dnt_providers_release(&sv.extra);
  dnt_incidents_free(sv.incidents);
  for (size_t i = 0; i < sv.nrules; i++) free(sv.rule_texts[i]);
  free(sv.rule_texts);
  free(o.rules.v);
  int out = dnt_finish_stdout();
  return rc ? rc : out;
}
