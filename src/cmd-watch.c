/* dntrace watch: rules on live processes (agent/: their grammar and when they fire); this file
 * runs the sessions that feed them and the actions they call for. Per process one EventPipe
 * session carries what the rules need: the counters they name (counters/'s providers and
 * decoder), the runtime's exception and GC events and the events named when a rule wants them,
 * and with --ring what the flight recorder keeps. Each process has its own engine of the rules;
 * with --all every .NET process this user can see is followed, new ones as a rescan finds them. A
 * firing's actions run one after the other as this program's own commands (dump, gcdump, stacks,
 * collect) or a shell command, each a child process watched by the loop, its file named after the
 * process, the rule and the time; a line says what fired and what was written. Command-line glue:
 * it prints. */
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
#include "incidents.h"
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

/* One process followed: its session, and the stream's parser feeding its rules (and its ring). */
struct watched {
  struct watch *w;
  struct watched *next;
  int pid;
  unsigned long long key; /* --all: its socket's (a pid used again is another process) */
  char name[256];
  dnt_session s;
  ntr_parser *parser;
  ntr_fanout fan;  /* the parser's consumers: the rules' decoding, and the ring */
  ntr_ring *ring;  /* --ring: the stream's last blocks, for save-ring */
  int ring_saving; /* a save-ring under way: the session stops, then starts again */
  char *ring_path; /* ... into this file */
  uv_timer_t restart, unseen;
  int open_timers; /* of restart and unseen, not closed yet */
  int closing;     /* ... their closing begun */
  struct dnt_rule_feed feed; /* its rules and its counters' decoder, fed by the parser */
  struct dnt_rules *rules;
  int starting, live, ended, seen;
};

struct watch {
  const struct options *o;
  uv_loop_t *loop;
  dsipc_session_config cfg;
  const char *session_id;
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
};

static void on_fired(void *ud, const struct dnt_firing *f) {
  struct watched *t = ud;
  dnt_incidents_fire(t->w->incidents, f, t->pid, t->name);
}

/* The process's own engine of the rules (they were checked when they were read). */
static struct dnt_rules *target_rules(struct watched *t) {
  const struct options *o = t->w->o;
  struct dnt_rules *e = dnt_rules_new(on_fired, t);
  if (!e) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  for (size_t i = 0; i < t->w->nrules; i++) {
    struct dnt_rule r;
    char err[200];
    size_t col;
    if (dnt_rule_parse(t->w->rule_texts[i], &r, err, sizeof err, &col) != 0 || dnt_rules_add(e, &r) != 0)
      dnt_die(DNT_EXIT_FAILURE, "out of memory");
  }
  dnt_rules_set_limits(e, o->max_fires ? (uint32_t)o->max_fires : 1, o->limit_ms ? o->limit_ms : 600000,
                       o->cooldown_ms);
  return e;
}

static struct watched *find_live(struct watch *w, int pid) {
  for (struct watched *t = w->targets; t; t = t->next)
    if (t->pid == pid && t->live) return t;
  return NULL;
}

/* save-ring (incidents.h): the session stops; its end saves the window and starts the next. */
static int save_ring(void *ud, int pid, const char *path) {
  struct watch *w = ud;
  struct watched *t = find_live(w, pid);
  if (!t || !t->ring || w->stopping || !t->s.running || t->ring_saving) return -1;
  free(t->ring_path);
  t->ring_path = dnt_xstrdup(path);
  t->ring_saving = 1;
  ntr_ring_hold(t->ring);
  dnt_session_stop(&t->s);
  return 0;
}

/* ---- a process's session ---- */

static int on_value(void *ud, const dnt_counter_value *v) {
  struct watched *t = ud;
  dnt_rule_feed_value(&t->feed, v);
  return 0;
}

static void close_handles(struct watch *w);

static void on_timer_closed(uv_handle_t *h) {
  struct watched *t = h->data;
  t->open_timers--;
}

static void close_timers(struct watched *t) {
  if (t->closing) return;
  t->closing = 1;
  uv_close((uv_handle_t *)&t->restart, on_timer_closed);
  uv_close((uv_handle_t *)&t->unseen, on_timer_closed);
}

/* The process's session is over (its end, a refusal, a failed restart). Without --all, or once
 * stopping, the watch ends with the last of them (the actions under way finish first). */
static void target_ended(struct watched *t) {
  struct watch *w = t->w;
  t->ended = 1, t->live = 0, t->starting = 0;
  close_timers(t);
  if (w->o->all && !w->stopping) return;
  for (struct watched *u = w->targets; u; u = u->next)
    if (!u->ended) return;
  close_handles(w);
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct watched *t = ud;
  if (t->ring) ntr_ring_now(t->ring, uv_now(t->w->loop));
  int rc = ntr_parser_feed(t->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    dnt_error("process %d: the stream does not parse as nettrace: %s", t->pid, ntr_parser_errmsg(t->parser));
    dnt_session_abandon(&t->s);
  }
}

static const dnt_session_cb session_cb;

/* A fresh parser for a new session's stream: the rules' decoding and, with --ring, a new ring. */
static void make_parser(struct watched *t) {
  const struct options *o = t->w->o;
  ntr_parser_free(t->parser);
  dnt_counters_decoder_free(t->feed.decoder);
  dnt_rule_feed_release(&t->feed);
  ntr_ring_free(t->ring);
  t->parser = NULL, t->ring = NULL;
  t->feed = (struct dnt_rule_feed){.rules = t->rules};
  t->feed.decoder = dnt_counters_decoder_new(&t->w->specs, t->w->session_id, on_value, t);
  if (!t->feed.decoder) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  ntr_fanout_init(&t->fan);
  ntr_fanout_add(&t->fan, dnt_rule_feed_callbacks(), &t->feed);
  if (o->ring_ms) {
    uint64_t mb = o->ring_mb ? (uint64_t)o->ring_mb : 256;
    if (!(t->ring = ntr_ring_new(o->ring_ms, mb << 20))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    ntr_callbacks rcb;
    ntr_ring_callbacks(&rcb);
    ntr_fanout_add(&t->fan, &rcb, t->ring);
  }
  ntr_callbacks fcb;
  ntr_fanout_callbacks(&t->fan, &fcb);
  if (ntr_parser_new(&t->parser, &fcb, &t->fan, NULL) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
}

static void on_restarted(void *ud, int rc) {
  struct watched *t = ud;
  if (rc) {
    dnt_error("process %d refused the next session: %s", t->pid, t->s.reply_msg);
    target_ended(t);
  }
}

/* After a save-ring's session ended (a timer: not inside the session's callback): the window
 * saved as the action's file, the action done, then the next session. */
static void on_restart(uv_timer_t *h) {
  struct watched *t = h->data;
  struct watch *w = t->w;
  int ok = dnt_ring_save(t->ring, t->ring_path) == 0;
  t->ring_saving = 0;
  if (w->stopping) {
    target_ended(t);
  } else {
    dnt_session_close(&t->s);
    struct dnt_session_target want = {.pid = t->pid};
    make_parser(t);
    if (dnt_session_open(&t->s, w->loop, &want) != 0 ||
        dnt_session_start_async(&t->s, 2, &w->cfg, &session_cb, t, on_restarted) != 0) {
      dnt_error("cannot start the next session on process %d", t->pid);
      target_ended(t);
    }
  }
  dnt_incidents_saved(w->incidents, ok);
}

static void on_end(void *ud) {
  struct watched *t = ud;
  if (t->ring_saving && !t->ended) { /* a save-ring: the session's end closed the window */
    uv_timer_start(&t->restart, on_restart, 0, 0);
    return;
  }
  target_ended(t);
}

static const dnt_session_cb session_cb = {on_data, on_end};

/* After a few intervals: the counter rules whose counter has said nothing (a name misspelt?). */
static void on_unseen(uv_timer_t *h) {
  struct watched *t = h->data;
  char process[48] = ""; /* with --all, whose */
  if (t->w->o->all) snprintf(process, sizeof process, "process %d: ", t->pid);
  for (size_t i = 0; i < dnt_rules_count(t->rules); i++) {
    const struct dnt_rule *r = dnt_rules_get(t->rules, i);
    if (r->kind == DNT_TRIGGER_COUNTER && !dnt_rules_counter_seen(t->rules, i))
      dnt_warning("%srule %zu: counter '%s' of '%s' has not reported after %.0f s: is it named right?", process,
                  i + 1, r->counter, r->provider, 3 * REFRESH_S);
  }
}

/* The session runs: the process is followed from now (its process-start rules fire). */
static void target_live(struct watched *t) {
  struct watch *w = t->w;
  t->live = 1, t->starting = 0;
  if (w->specs.n) uv_timer_start(&t->unseen, on_unseen, (uint64_t)(3000 * REFRESH_S), 0);
  if (w->o->all) {
    char *name = dnt_safe_text(t->name);
    fprintf(stderr, "Following process %d (%s)\n", t->pid, name);
    free(name);
  }
  dnt_rules_process_start(t->rules, dnt_unix_ms());
}

static void on_started(void *ud, int rc) {
  struct watched *t = ud;
  if (rc) {
    dnt_warning("process %d refused the session: %s", t->pid, t->s.reply_msg);
    target_ended(t);
  } else if (t->w->stopping) {
    t->live = 1;
    dnt_session_stop(&t->s);
  } else {
    target_live(t);
  }
}

/* A process to follow (its session opened from want, or from pid): its state, put first in the
 * list. */
static struct watched *target_new(struct watch *w, int pid, unsigned long long key) {
  struct watched *t = dnt_xmalloc(sizeof *t);
  memset(t, 0, sizeof *t);
  t->w = w, t->pid = pid, t->key = key;
  t->rules = target_rules(t);
  uv_timer_init(w->loop, &t->restart);
  uv_timer_init(w->loop, &t->unseen);
  t->restart.data = t->unseen.data = t;
  t->open_timers = 2;
  make_parser(t);
  t->next = w->targets;
  w->targets = t;
  return t;
}

static void target_free(struct watch *w, struct watched *t) {
  for (size_t i = 0; i < w->nrules; i++) { /* what its rules did, for the totals */
    uint64_t fired, held;
    dnt_rules_totals(t->rules, i, &fired, &held);
    w->fired[i] += fired, w->held[i] += held;
  }
  dnt_session_close(&t->s);
  ntr_parser_free(t->parser);
  dnt_counters_decoder_free(t->feed.decoder);
  dnt_rule_feed_release(&t->feed);
  ntr_ring_free(t->ring);
  dnt_rules_free(t->rules);
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
  struct watched *t = target_new(w, ep->host_pid, ep->key);
  t->seen = 1;
  struct dnt_session_target want = {.pid = ep->host_pid};
  if (dnt_session_open(&t->s, w->loop, &want) != 0) { /* gone already, or not ours: quietly */
    target_ended(t);
    return 0;
  }
  snprintf(t->name, sizeof t->name, "%s", t->s.target.name);
  t->starting = 1;
  if (dnt_session_start_async(&t->s, 2, &w->cfg, &session_cb, t, on_started) != 0) {
    dnt_warning("cannot start a session on process %d: %s", t->pid, t->s.reply_msg);
    target_ended(t);
  }
  return 0;
}

/* Every process with a diagnostic socket; those no longer followed are let go. */
static void on_rescan(uv_timer_t *h) {
  struct watch *w = h->data;
  for (struct watched *t = w->targets; t; t = t->next) t->seen = 0;
  dsipc_endpoint_list(on_endpoint, w);
  for (struct watched **pp = &w->targets; *pp;) {
    struct watched *t = *pp;
    if (t->ended && !t->open_timers && !t->seen) {
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
  for (struct watched *t = w->targets; t; t = t->next) close_timers(t);
}

static void stop(struct watch *w) {
  if (w->stopping) {
    for (struct watched *t = w->targets; t; t = t->next)
      if (!t->ended) dnt_session_abandon(&t->s);
    return;
  }
  w->stopping = 1;
  uv_timer_stop(&w->rescan);
  int running = 0;
  for (struct watched *t = w->targets; t; t = t->next) {
    if (t->live && !t->ring_saving) dnt_session_stop(&t->s);
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

/* -p or -n: the one process, its session started here (a refusal is the command's exit code). */
static int start_one(struct watch *w, const struct options *o) {
  struct watched *t = target_new(w, 0, 0);
  int rc = dnt_session_open(&t->s, w->loop, &o->target);
  if (rc) {
    t->ended = 1;
    return rc;
  }
  t->pid = t->s.target.pid;
  snprintf(t->name, sizeof t->name, "%s", t->s.target.name);
  if (dnt_session_start(&t->s, 2, &w->cfg, &session_cb, t) != 0) {
    t->ended = 1;
    return dnt_session_start_failed(&t->s);
  }
  target_live(t);
  return 0;
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
  struct dnt_incident_opts io = {.dir = o.output_dir, .json = o.format == DNT_FORMAT_JSON, .max_disk_mb = o.max_disk_mb};
  if (!(w.incidents = dnt_incidents_new(w.loop, &io, save_ring, &w)))
    dnt_die(DNT_EXIT_FAILURE, "cannot find this program's own file: %s", strerror(errno));
  /* the counters' providers, then the events the rules want, and what the ring records */
  if (w.specs.n && dnt_counters_wire_build(&wire, &w.specs, REFRESH_S, 1000, 10) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  w.session_id = wire.session_id[0] ? wire.session_id : NULL;
  if (dnt_providers_merge(&extra, &w.wanted, err, sizeof err) != 0) /* with the ring's, when it has them */
    dnt_die(DNT_EXIT_FAILURE, "%s", err);
  providers = dnt_xmalloc((wire.n + extra.n + 1) * sizeof *providers);
  size_t np = 0;
  for (size_t i = 0; i < wire.n; i++) providers[np++] = wire.v[i];
  for (size_t i = 0; i < extra.n; i++)
    providers[np++] = (dsipc_provider){.name = extra.v[i].name, .keywords = extra.v[i].keywords,
                                       .level = extra.v[i].level, .args = extra.v[i].args};
  w.cfg = (dsipc_session_config){.buffer_mb = o.ring_ms ? 256 : BUFFER_MB, .format = 1, .request_rundown = o.ring_ms != 0,
                                 .request_stackwalk = o.ring_ms != 0, .providers = providers, .n_providers = np};
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
  } else {
    char *name = dnt_safe_text(w.targets->name);
    fprintf(stderr, "Watching process %d (%s) with %zu rule%s", w.targets->pid, name, w.nrules, w.nrules == 1 ? "" : "s");
    free(name);
  }
  if (o.ring_ms) fprintf(stderr, ", keeping the last %.0f s for save-ring", (double)o.ring_ms / 1000);
  fprintf(stderr, ": Ctrl+C stops\n");
  dnt_loop_run(w.loop, UV_RUN_DEFAULT, __func__);
  for (struct watched *t; (t = w.targets);) w.targets = t->next, target_free(&w, t);
  for (size_t i = 0; i < w.nrules; i++) /* what each rule did, and what the limits held back */
    fprintf(stderr, "rule %zu: fired %llu time%s, %llu more held back by the limits\n", i + 1,
            (unsigned long long)w.fired[i], w.fired[i] == 1 ? "" : "s", (unsigned long long)w.held[i]);
  rc = 0;
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
