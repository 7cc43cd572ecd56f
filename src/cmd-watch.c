/* dntrace watch: rules on live processes. agent/ holds the rules, follows each process (one
 * EventPipe session carrying what the rules need: the counters they name, the runtime's exception
 * and GC events, the events named when a rule wants them, and with --ring what the flight
 * recorder keeps; each process with its own engine of the rules) and runs what a firing calls
 * for (its actions one after the other as this program's own commands or a shell command, a line
 * for each incident). This file chooses the processes (with --all every .NET process this user
 * can see, new ones as a rescan finds them) and prints. Command-line glue. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "builtin.h"
#include "dnt-agent.h"
#include "dnt-counters.h"
#include "dnt-trace.h"
#include "agent-cli.h"
#include "options.h"
#include "output.h"
#include "providers.h"
#include "session.h"
#include "target.h"
#include "util.h"

#define DEFAULT_RESCAN_MS 5000

#define BUFFER_MB 16
#define REFRESH_S 1.0

struct options {
  struct dnt_session_target target;
  int all;
  uint64_t rescan_ms;
  struct dnt_strlist rules;
  const char *rules_file, *output_dir;
  int format;
  uint64_t duration_ms, limit_ms, cooldown_ms, ring_ms;
  long max_fires, ring_mb, max_disk_mb;
  const char *ring_profile;
};

#define O(f) offsetof(struct options, f)

static const struct dnt_option watch_options[] = {
    {.kind = DNT_OPT_PID, .short_name = 'p', .long_name = "process-id", .argh = "PID",
     .help = "the process, by pid as seen from here", .offset = O(target.pid)},
    DNT_OPT_STRING('n', "name", "NAME", O(target.name), "the process, by name (an error if several match)"),
    DNT_OPT_FLAG(0, "all", O(all), "every .NET process this user can see, and each new one (rules\nrun on each process on its own)"),
    {.kind = DNT_OPT_DURATION, .long_name = "rescan", .argh = "TIME", .offset = O(rescan_ms),
     .help = "with --all: look for new processes every TIME (default 5s)"},
    DNT_OPT_LIST(0, "rule", "RULE", O(rules),
                 "'TRIGGER => ACTION[, ACTION]...' (see dntrace-watch(1)); repeatable"),
    DNT_OPT_STRING(0, "rules", "FILE", O(rules_file), "rules from FILE, one a line ('#' starts a comment)"),
    DNT_OPT_STRING('o', "output", "DIR", O(output_dir), "where the actions' files go (default: the current directory)"),
    DNT_OPT_FORMAT("FORMAT", O(format), DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON),
                   "text (default: a line per firing) or json (an object a line)"),
    DNT_OPT_COUNT(0, "max-actions", "N", O(max_fires), 1000, "a rule fires at most N times per --limit-window (default 1)"),
    {.kind = DNT_OPT_DURATION, .long_name = "limit-window", .argh = "TIME", .offset = O(limit_ms),
     .help = "the window of --max-actions (default 10m)"},
    {.kind = DNT_OPT_DURATION, .long_name = "cooldown", .argh = "TIME", .offset = O(cooldown_ms),
     .help = "no firing of a rule within TIME of its last (default none)"},
    DNT_OPT_COUNT(0, "max-disk", "MB", O(max_disk_mb), 16777216,
                  "keep the actions' files in -o under MB in all: the oldest\nincidents' files go first (the newest stays)"),
    {.kind = DNT_OPT_DURATION, .long_name = "ring", .argh = "TIME", .offset = O(ring_ms),
     .help = "keep the last TIME of a recording, for the save-ring action"},
    DNT_OPT_COUNT(0, "ring-size", "MB", O(ring_mb), 1048576, "with --ring: at most MB of it (default 256)"),
    DNT_OPT_STRING(0, "ring-profile", "LIST", O(ring_profile),
                   "with --ring: what it records (default dotnet-common,\ndotnet-sampled-thread-time, as collect's)"),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_END(),
};

const struct dnt_usage usage_watch = {
    .synopsis = "dntrace watch (-p PID | -n NAME | --all [--rescan TIME]) (--rule RULE... | --rules FILE) [-o DIR] "
                "[--format FORMAT] "
                "[--max-actions N] [--limit-window TIME] [--cooldown TIME] [--max-disk MB] "
                "[--ring TIME [--ring-size MB] [--ring-profile LIST]] "
                "[--duration TIME]",
    .summary = "Act when a rule holds: a counter past a value, a burst of exceptions, a long GC pause, an event",
    .options = watch_options,
};

struct watch;

/* One process followed (agent/'s dnt_follow: its session, its rules, its ring). */
struct watched {
  struct watch *w;
  struct watched *next;
  int pid;
  unsigned long long key; /* --all: its socket's (a pid used again is another process) */
  char name[256];
  struct dnt_follow *f;
  char *ring_path; /* a save-ring under way writes here */
  int ended, seen;
};

struct watch {
  const struct options *o;
  uv_loop_t *loop;
  struct dnt_follow_config fc;
  struct dnt_counter_specs specs;
  struct dnt_providers wanted; /* the events the rules want */
  char **rule_texts;           /* each process's engine is made from them */
  size_t nrules;
  uint64_t *fired, *held; /* per rule, of the processes no longer followed */
  struct dnt_incidents *incidents;
  struct watched *targets;
  uv_signal_t sigint, sigterm;
  uv_timer_t stopper, rescan;
  int stopping, handles_closed;
  int exit_code; /* -p, -n: the process refused the session */
};

static struct watched *find_live(struct watch *w, int pid) {
  for (struct watched *t = w->targets; t; t = t->next)
    if (t->pid == pid && t->f && dnt_follow_live(t->f)) return t;
  return NULL;
}

/* save-ring (dnt-agent.h, dnt_save_ring_fn): the process's session stops; its end hands the window to on_window. */
static int save_ring(void *ud, int pid, const char *path) {
  struct watch *w = ud;
  struct watched *t = find_live(w, pid);
  if (!t || w->stopping || dnt_follow_save_ring(t->f) != 0) return -1;
  free(t->ring_path);
  t->ring_path = dnt_xstrdup(path);
  return 0;
}

static void close_handles(struct watch *w);

/* The process is followed no more. Without --all, or once stopping, the watch ends with the last
 * of them (the actions under way finish first). */
static void target_ended(struct watched *t) {
  struct watch *w = t->w;
  t->ended = 1;
  if (w->o->all && !w->stopping) return;
  for (struct watched *u = w->targets; u; u = u->next)
    if (!u->ended) return;
  close_handles(w);
}

/* ---- what a followed process says (agent/) ---- */

static void on_started(void *ud, struct dnt_follow *f, int rc, const char *msg) {
  (void)f;
  struct watched *t = ud;
  struct watch *w = t->w;
  if (rc && w->o->all) {
    dnt_warning("process %d refused the session: %s", t->pid, msg);
  } else if (rc) {
    w->exit_code = dnt_session_refused(t->pid, rc, msg);
  } else {
    char *name = dnt_safe_text(t->name);
    if (w->o->all) {
      fprintf(stderr, "Following process %d (%s)\n", t->pid, name);
    } else {
      fprintf(stderr, "Watching process %d (%s) with %zu rule%s", t->pid, name, w->nrules, w->nrules == 1 ? "" : "s");
      if (w->o->ring_ms) fprintf(stderr, ", keeping the last %.0f s for save-ring", (double)w->o->ring_ms / 1000);
      fprintf(stderr, ": Ctrl+C stops\n");
    }
    free(name);
    return;
  }
  target_ended(t);
}

static void on_fired(void *ud, struct dnt_follow *f, const struct dnt_firing *firing) {
  (void)f;
  struct watched *t = ud;
  dnt_incidents_fire(t->w->incidents, firing, t->pid, t->name);
}

/* A save-ring's window, closed: the action's file. */
static void on_window(void *ud, struct dnt_follow *f, const ntr_ring *ring) {
  (void)f;
  struct watched *t = ud;
  char err[600];
  int ok = dnt_ring_write_file(ring, t->ring_path, err, sizeof err) == 0;
  if (!ok) dnt_error("%s", err);
  dnt_incidents_saved(t->w->incidents, ok);
}

static void on_ended(void *ud, struct dnt_follow *f, const char *msg) {
  (void)f;
  struct watched *t = ud;
  if (msg) dnt_error("process %d: %s", t->pid, msg);
  target_ended(t);
}

static void on_notice(void *ud, struct dnt_follow *f, const char *msg) {
  (void)f;
  struct watched *t = ud;
  if (t->w->o->all) dnt_warning("process %d: %s", t->pid, msg);
  else dnt_warning("%s", msg);
}

static const struct dnt_follow_cb follow_cb = {
    .on_started = on_started, .on_fired = on_fired, .on_window = on_window, .on_ended = on_ended,
    .on_notice = on_notice};

/* Follows a process from its diagnostic socket: put first in the list (ended at once when its
 * session cannot be asked for). */
static struct watched *target_new(struct watch *w, int pid, unsigned long long key, const char *path) {
  struct watched *t = dnt_xmalloc(sizeof *t);
  memset(t, 0, sizeof *t);
  t->w = w, t->pid = pid, t->key = key;
  dnt_process_name(pid, t->name, sizeof t->name);
  t->next = w->targets;
  w->targets = t;
  char err[512];
  int rc = dnt_follow_start(&w->fc, path, t, &t->f, err, sizeof err);
  if (rc) {
    if (w->o->all) dnt_warning("cannot start a session on process %d: %s", pid, err);
    else w->exit_code = dnt_session_refused(pid, rc, err);
    t->ended = 1;
  }
  return t;
}

static void target_free(struct watch *w, struct watched *t) {
  if (t->f) {
    for (size_t i = 0; i < w->nrules; i++) { /* what its rules did, for the totals */
      uint64_t fired, held;
      dnt_rules_totals(dnt_follow_rules(t->f), i, &fired, &held);
      w->fired[i] += fired, w->held[i] += held;
    }
  }
  dnt_follow_close(t->f);
  free(t->ring_path);
  free(t);
}

/* ---- --all ---- */

static int on_endpoint(const dsipc_endpoint *ep, void *ud) {
  struct watch *w = ud;
  for (struct watched *t = w->targets; t; t = t->next)
    if (t->pid == ep->host_pid && t->key == ep->key) {
      t->seen = 1;
      return 0;
    }
  target_new(w, ep->host_pid, ep->key, ep->path)->seen = 1;
  return 0;
}

/* Every process with a diagnostic socket; those no longer followed are let go. */
static void on_rescan(uv_timer_t *h) {
  struct watch *w = h->data;
  for (struct watched *t = w->targets; t; t = t->next) t->seen = 0;
  dsipc_endpoint_list(on_endpoint, w);
  for (struct watched **pp = &w->targets; *pp;) {
    struct watched *t = *pp;
    if (t->ended && !t->seen) {
      *pp = t->next;
      target_free(w, t);
    } else {
      pp = &t->next;
    }
  }
}

/* ---- the watch ---- */

static void close_handles(struct watch *w) {
  if (w->handles_closed) return;
  w->handles_closed = 1;
  uv_close((uv_handle_t *)&w->sigint, NULL);
  uv_close((uv_handle_t *)&w->sigterm, NULL);
  uv_close((uv_handle_t *)&w->stopper, NULL);
  uv_close((uv_handle_t *)&w->rescan, NULL);
}

/* Every process's session stops (a second time: given up at once); the watch ends with the last. */
static void stop(struct watch *w) {
  w->stopping = 1;
  uv_timer_stop(&w->rescan);
  int running = 0;
  for (struct watched *t = w->targets; t; t = t->next) {
    if (t->ended) continue;
    dnt_follow_stop(t->f);
    running |= !t->ended;
  }
  if (!running) close_handles(w);
}

static void on_signal(uv_signal_t *h, int signum) {
  (void)signum;
  stop(h->data);
}

static void on_stopper(uv_timer_t *h) { stop(h->data); }

/* ---- the rules ---- */

/* A rule that parsed: its text kept for each process's engine. */
static int take_rule(void *ud, struct dnt_rule *r, const char *text, const char *where) {
  (void)where;
  struct watch *w = ud;
  dnt_rule_release(r);
  w->rule_texts = dnt_xrealloc(w->rule_texts, (w->nrules + 1) * sizeof *w->rule_texts);
  w->rule_texts[w->nrules++] = dnt_xstrdup(text);
  return 0;
}

static int read_rules(struct watch *w, const struct options *o) {
  int rc = dnt_rules_read(&o->rules, o->rules_file, &w->specs, &w->wanted, take_rule, w);
  if (rc) return rc;
  if (!w->nrules) {
    dnt_error("no rule: give --rule 'TRIGGER => ACTION' or --rules FILE");
    return DNT_EXIT_USAGE;
  }
  return 0;
}

/* -p or -n: the one process (a refusal is the command's exit code). */
static int start_one(struct watch *w, const struct options *o) {
  struct dnt_target target;
  int rc = dnt_target_resolve(o->target.pid, o->target.name, &target);
  if (rc) return rc;
  target_new(w, target.pid, 0, target.ep.path);
  return w->exit_code;
}

int cmd_watch(int argc, char **argv) {
  struct options o = {0};
  int rc = dnt_options_parse(&usage_watch, "watch", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if ((o.target.pid > 0) + (o.target.name != NULL) + o.all != 1 || (o.rescan_ms && !o.all)) {
    dnt_error(o.rescan_ms && !o.all ? "--rescan goes with --all"
                                    : "name the processes with exactly one of -p PID, -n NAME or --all");
    free(o.rules.v);
    return DNT_EXIT_USAGE;
  }
  struct watch w = {.o = &o};
  struct dnt_counters_wire wire = {0};
  struct dnt_providers extra = {0};
  dsipc_provider *providers = NULL;
  if ((rc = read_rules(&w, &o)) != 0) goto out;
  w.fired = dnt_xmalloc(w.nrules * sizeof *w.fired);
  w.held = dnt_xmalloc(w.nrules * sizeof *w.held);
  memset(w.fired, 0, w.nrules * sizeof *w.fired);
  memset(w.held, 0, w.nrules * sizeof *w.held);
  if (o.output_dir && mkdir(o.output_dir, 0755) != 0 && errno != EEXIST) {
    dnt_error("cannot make '%s': %s", o.output_dir, strerror(errno));
    rc = DNT_EXIT_FAILURE;
    goto out;
  }
  char err[512];
  if (o.ring_ms &&
      dnt_providers_add_profiles(&extra, o.ring_profile ? o.ring_profile : "dotnet-common,dotnet-sampled-thread-time",
                                 err, sizeof err) != 0) {
    dnt_error("--ring-profile: %s", err);
    rc = DNT_EXIT_USAGE;
    goto out;
  }
  w.loop = uv_default_loop();
  struct dnt_incident_opts io = {.dir = o.output_dir, .json = o.format == DNT_FORMAT_JSON, .max_disk_mb = o.max_disk_mb,
                                 .say = dnt_agent_print};
  if (!(w.incidents = dnt_incidents_new(w.loop, &io, save_ring, &w)))
    dnt_die(DNT_EXIT_FAILURE, "cannot find this program's own file: %s", strerror(errno));
  /* the counters' providers, then the events the rules want, and what the ring records */
  if (w.specs.n && dnt_counters_wire_build(&wire, &w.specs, REFRESH_S, 1000, 10) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  w.fc.counters_session_id = wire.session_id[0] ? wire.session_id : NULL;
  if (dnt_providers_merge(&extra, &w.wanted, err, sizeof err) != 0) /* with the ring's, when it has them */
    dnt_die(DNT_EXIT_FAILURE, "%s", err);
  providers = dnt_xmalloc((wire.n + extra.n + 1) * sizeof *providers);
  size_t np = 0;
  for (size_t i = 0; i < wire.n; i++) providers[np++] = wire.v[i];
  for (size_t i = 0; i < extra.n; i++)
    providers[np++] = (dsipc_provider){.name = extra.v[i].name, .keywords = extra.v[i].keywords,
                                       .level = extra.v[i].level, .args = extra.v[i].args};
  w.fc.session = (dsipc_session_config){.buffer_mb = o.ring_ms ? 256 : BUFFER_MB, .format = 1,
                                        .request_rundown = o.ring_ms != 0, .request_stackwalk = o.ring_ms != 0,
                                        .providers = providers, .n_providers = np};
  w.fc.loop = w.loop, w.fc.specs = &w.specs, w.fc.cb = &follow_cb;
  w.fc.rules = w.rule_texts, w.fc.nrules = w.nrules;
  w.fc.max_fires = (uint32_t)o.max_fires, w.fc.limit_ms = o.limit_ms, w.fc.cooldown_ms = o.cooldown_ms;
  w.fc.ring_ms = o.ring_ms, w.fc.ring_bytes = (uint64_t)(o.ring_mb ? o.ring_mb : 256) << 20;
  w.fc.unseen_ms = (uint64_t)(3000 * REFRESH_S);
  uv_signal_init(w.loop, &w.sigint);
  uv_signal_init(w.loop, &w.sigterm);
  uv_timer_init(w.loop, &w.stopper);
  uv_timer_init(w.loop, &w.rescan);
  w.sigint.data = w.sigterm.data = w.stopper.data = w.rescan.data = &w;
  if (!o.all && (rc = start_one(&w, &o)) != 0) {
    close_handles(&w);
    goto out;
  }
  uv_signal_start(&w.sigint, on_signal, SIGINT);
  uv_signal_start(&w.sigterm, on_signal, SIGTERM);
  if (o.duration_ms) uv_timer_start(&w.stopper, on_stopper, o.duration_ms, 0);
  if (o.all) uv_timer_start(&w.rescan, on_rescan, 0, o.rescan_ms ? o.rescan_ms : DEFAULT_RESCAN_MS);
  if (o.all) {
    fprintf(stderr, "Watching every .NET process with %zu rule%s", w.nrules, w.nrules == 1 ? "" : "s");
    if (o.ring_ms) fprintf(stderr, ", keeping the last %.0f s for save-ring", (double)o.ring_ms / 1000);
    fprintf(stderr, ": Ctrl+C stops\n");
  }
  dnt_loop_run(w.loop, UV_RUN_DEFAULT, __func__);
  for (struct watched *t; (t = w.targets);) w.targets = t->next, target_free(&w, t);
  rc = w.exit_code;
  for (size_t i = 0; i < w.nrules && !rc; i++) /* what each rule did, and what the limits held back */
    fprintf(stderr, "rule %zu: fired %llu time%s, %llu more held back by the limits\n", i + 1,
            (unsigned long long)w.fired[i], w.fired[i] == 1 ? "" : "s", (unsigned long long)w.held[i]);
out:
  if (w.loop) {
    while (dnt_loop_run(w.loop, UV_RUN_NOWAIT, __func__)) {}
  }
  for (struct watched *t; (t = w.targets);) w.targets = t->next, target_free(&w, t);
  if (w.loop) {
    while (dnt_loop_run(w.loop, UV_RUN_NOWAIT, __func__)) {}
    uv_loop_close(w.loop);
  }
  dnt_providers_release(&extra);
  dnt_providers_release(&w.wanted);
  dnt_counters_wire_release(&wire);
  dnt_counter_specs_release(&w.specs);
  free(providers);
  dnt_incidents_free(w.incidents);
  for (size_t i = 0; i < w.nrules; i++) free(w.rule_texts[i]);
  free(w.rule_texts);
  free(w.fired), free(w.held);
  free(o.rules.v);
  return rc;
}
