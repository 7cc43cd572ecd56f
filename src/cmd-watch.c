/* dntrace watch: rules on a live process (agent/: their grammar and when they fire); this file
 * runs the session that feeds them and the actions they call for. One EventPipe session carries
 * what the rules need: the counters they name (counters/'s providers and decoder), and the
 * runtime's exception and GC events when a rule wants them. A firing's actions run one after the
 * other as this program's own commands (dump, gcdump, stacks, collect) or a shell command, each a
 * child process watched by the loop, its file named after the process, the rule and the time; a
 * line says what fired and what was written. Command-line glue: it prints. */
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

#define BUFFER_MB 16
#define REFRESH_S 1.0

struct options {
  struct dnt_session_target target;
  struct dnt_strlist rules;
  const char *rules_file, *output_dir;
  int format;
  uint64_t duration_ms, limit_ms, cooldown_ms, ring_ms;
  long max_fires, ring_mb, max_disk_mb;
  const char *ring_profile;
};

#define O(f) offsetof(struct options, f)

static const struct dnt_option watch_options[] = {
    DNT_OPT_GROUP(dnt_options_target_pid, O(target)),
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
    .synopsis = "dntrace watch (-p PID | -n NAME) (--rule RULE... | --rules FILE) [-o DIR] [--format FORMAT] "
                "[--max-actions N] [--limit-window TIME] [--cooldown TIME] [--max-disk MB] "
                "[--ring TIME [--ring-size MB] [--ring-profile LIST]] "
                "[--duration TIME]",
    .summary = "Act when a rule holds: a counter past a value, a burst of exceptions, a long GC pause, an event",
    .options = watch_options,
};

struct watch {
  const struct options *o;
  uv_loop_t *loop;
  dnt_session s;
  ntr_parser *parser;
  ntr_fanout fan;  /* the parser's consumers: the rules' decoding, and the ring */
  ntr_ring *ring;  /* --ring: the stream's last blocks, for save-ring */
  int ring_saving; /* a save-ring under way: the session stops, then starts again */
  char *ring_path; /* ... into this file */
  uv_timer_t restart;
  dsipc_session_config cfg;
  const char *session_id;
  struct dnt_rule_feed feed; /* the rules and the counters' decoder, fed by the parser */
  struct dnt_counter_specs specs;
  struct dnt_providers wanted; /* the events the rules want */
  struct dnt_rules *rules;
  struct dnt_incidents *incidents;
  uv_signal_t sigint, sigterm;
  uv_timer_t stopper, unseen;
  int stream_over, stopping, handles_closed;
  int pid;
};

static void on_fired(void *ud, const struct dnt_firing *f) {
  struct watch *w = ud;
  dnt_incidents_fire(w->incidents, f, w->s.target.pid, w->s.target.name);
}

/* save-ring (incidents.h): the session stops; its end saves the window and starts the next. */
static int save_ring(void *ud, const char *path) {
  struct watch *w = ud;
  if (!w->ring || w->stopping || !w->s.running || w->ring_saving) return -1;
  free(w->ring_path);
  w->ring_path = dnt_xstrdup(path);
  w->ring_saving = 1;
  ntr_ring_hold(w->ring);
  dnt_session_stop(&w->s);
  return 0;
}

/* ---- the session ---- */

static int on_value(void *ud, const dnt_counter_value *v) {
  struct watch *w = ud;
  dnt_rule_feed_value(&w->feed, v);
  return 0;
}

static void close_handles(struct watch *w) {
  if (w->handles_closed) return;
  w->handles_closed = 1;
  uv_close((uv_handle_t *)&w->sigint, NULL);
  uv_close((uv_handle_t *)&w->sigterm, NULL);
  uv_close((uv_handle_t *)&w->stopper, NULL);
  uv_close((uv_handle_t *)&w->unseen, NULL);
  uv_close((uv_handle_t *)&w->restart, NULL);
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct watch *w = ud;
  if (w->ring) ntr_ring_now(w->ring, uv_now(w->loop));
  int rc = ntr_parser_feed(w->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    dnt_error("the stream does not parse as nettrace: %s", ntr_parser_errmsg(w->parser));
    dnt_session_abandon(&w->s);
  }
}

static const dnt_session_cb session_cb;

/* A fresh parser for a new session's stream: the rules' decoding and, with --ring, a new ring. */
static void make_parser(struct watch *w) {
  ntr_parser_free(w->parser);
  dnt_counters_decoder_free(w->feed.decoder);
  dnt_rule_feed_release(&w->feed);
  ntr_ring_free(w->ring);
  w->parser = NULL, w->ring = NULL;
  w->feed = (struct dnt_rule_feed){.rules = w->rules};
  w->feed.decoder = dnt_counters_decoder_new(&w->specs, w->session_id, on_value, w);
  if (!w->feed.decoder) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  ntr_fanout_init(&w->fan);
  ntr_fanout_add(&w->fan, dnt_rule_feed_callbacks(), &w->feed);
  if (w->o->ring_ms) {
    uint64_t mb = w->o->ring_mb ? (uint64_t)w->o->ring_mb : 256;
    if (!(w->ring = ntr_ring_new(w->o->ring_ms, mb << 20))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    ntr_callbacks rcb;
    ntr_ring_callbacks(&rcb);
    ntr_fanout_add(&w->fan, &rcb, w->ring);
  }
  ntr_callbacks fcb;
  ntr_fanout_callbacks(&w->fan, &fcb);
  if (ntr_parser_new(&w->parser, &fcb, &w->fan, NULL) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
}

static void on_restarted(void *ud, int rc) {
  struct watch *w = ud;
  if (rc) {
    dnt_error("process %d refused the next session: %s", w->s.target.pid, w->s.reply_msg);
    close_handles(w);
  }
}

/* After a save-ring's session ended (a timer: not inside the session's callback): the window
 * saved as the action's file, the action done, then the next session. */
static void on_restart(uv_timer_t *t) {
  struct watch *w = t->data;
  struct dnt_output out = {0};
  int ok = dnt_output_open(&out, w->ring_path, DNT_OUTPUT_REPLACE) == 0;
  if (ok && ntr_ring_write(w->ring, out.fp) != 0) {
    dnt_output_abort(&out);
    ok = 0;
  } else if (ok && dnt_output_commit(&out) < 0) {
    ok = 0;
  }
  w->ring_saving = 0;
  if (w->stopping || w->stream_over) {
    close_handles(w);
  } else {
    dnt_session_close(&w->s);
    struct dnt_session_target want = {.pid = w->pid};
    make_parser(w);
    if (dnt_session_open(&w->s, w->loop, &want) != 0 ||
        dnt_session_start_async(&w->s, 2, &w->cfg, &session_cb, w, on_restarted) != 0) {
      dnt_error("cannot start the next session on process %d", w->pid);
      close_handles(w);
    }
  }
  dnt_incidents_saved(w->incidents, ok);
}

static void on_end(void *ud) {
  struct watch *w = ud;
  if (w->ring_saving && !w->handles_closed) { /* a save-ring: the session's end closed the window */
    uv_timer_start(&w->restart, on_restart, 0, 0);
    return;
  }
  w->stream_over = 1;
  close_handles(w); /* the actions under way finish; the loop ends after them */
}

static const dnt_session_cb session_cb = {on_data, on_end};

static void stop(struct watch *w) {
  if (w->stopping) {
    dnt_session_abandon(&w->s);
    return;
  }
  w->stopping = 1;
  dnt_session_stop(&w->s);
}

static void on_signal(uv_signal_t *h, int signum) {
  (void)signum;
  stop(h->data);
}

static void on_stopper(uv_timer_t *t) { stop(t->data); }

/* After a few intervals: the counter rules whose counter has said nothing (a name misspelt?). */
static void on_unseen(uv_timer_t *t) {
  struct watch *w = t->data;
  for (size_t i = 0; i < dnt_rules_count(w->rules); i++) {
    const struct dnt_rule *r = dnt_rules_get(w->rules, i);
    if (r->kind == DNT_TRIGGER_COUNTER && !dnt_rules_counter_seen(w->rules, i))
      dnt_warning("rule %zu: counter '%s' of '%s' has not reported after %.0f s: is it named right?", i + 1, r->counter,
                  r->provider, 3 * REFRESH_S);
  }
}

/* ---- the rules ---- */

/* A rule that parsed, to the engine. */
static int take_rule(void *ud, struct dnt_rule *r, const char *text, const char *where) {
  (void)text, (void)where;
  struct watch *w = ud;
  if (dnt_rules_add(w->rules, r) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  return 0;
}

static int read_rules(struct watch *w, const struct options *o) {
  int rc = dnt_rules_read(&o->rules, o->rules_file, &w->specs, &w->wanted, take_rule, w);
  if (rc) return rc;
  if (!dnt_rules_count(w->rules)) {
    dnt_error("no rule: give --rule 'TRIGGER => ACTION' or --rules FILE");
    return DNT_EXIT_USAGE;
  }
  return 0;
}

int cmd_watch(int argc, char **argv) {
  struct options o = {0};
  int rc = dnt_options_parse(&usage_watch, "watch", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  struct watch w = {.o = &o};
  if (!(w.rules = dnt_rules_new(on_fired, &w))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_rules_set_limits(w.rules, o.max_fires ? (uint32_t)o.max_fires : 1, o.limit_ms ? o.limit_ms : 600000, o.cooldown_ms);
  struct dnt_counters_wire wire = {0};
  struct dnt_providers extra = {0};
  dsipc_provider *providers = NULL;
  if ((rc = read_rules(&w, &o)) != 0) goto out;
  if (o.output_dir && mkdir(o.output_dir, 0755) != 0 && errno != EEXIST) {
    dnt_error("cannot make '%s': %s", o.output_dir, strerror(errno));
    rc = DNT_EXIT_FAILURE;
    goto out;
  }
  w.loop = uv_default_loop();
  struct dnt_incident_opts io = {.dir = o.output_dir, .json = o.format == DNT_FORMAT_JSON, .max_disk_mb = o.max_disk_mb};
  if (!(w.incidents = dnt_incidents_new(w.loop, &io, save_ring, &w)))
    dnt_die(DNT_EXIT_FAILURE, "cannot find this program's own file: %s", strerror(errno));
  if ((rc = dnt_session_open(&w.s, w.loop, &o.target)) != 0) goto out;
  w.pid = w.s.target.pid;
  /* the counters' providers, then the runtime's events the rules want, and what the ring records */
  if (w.specs.n && dnt_counters_wire_build(&wire, &w.specs, REFRESH_S, 1000, 10) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  w.session_id = wire.session_id[0] ? wire.session_id : NULL;
  char err[512];
  if (o.ring_ms &&
      dnt_providers_add_profiles(&extra, o.ring_profile ? o.ring_profile : "dotnet-common,dotnet-sampled-thread-time",
                                 err, sizeof err) != 0) {
    dnt_error("--ring-profile: %s", err);
    rc = DNT_EXIT_USAGE;
    goto out;
  }
  if (dnt_providers_merge(&extra, &w.wanted, err, sizeof err) != 0) /* with the ring's, when it has them */
    dnt_die(DNT_EXIT_FAILURE, "%s", err);
  providers = dnt_xmalloc((wire.n + extra.n + 1) * sizeof *providers);
  size_t np = 0;
  for (size_t i = 0; i < wire.n; i++) providers[np++] = wire.v[i];
  for (size_t i = 0; i < extra.n; i++)
    providers[np++] = (dsipc_provider){.name = extra.v[i].name, .keywords = extra.v[i].keywords,
                                       .level = extra.v[i].level, .args = extra.v[i].args};
  make_parser(&w);
  w.cfg = (dsipc_session_config){.buffer_mb = o.ring_ms ? 256 : BUFFER_MB, .format = 1, .request_rundown = o.ring_ms != 0,
                                 .request_stackwalk = o.ring_ms != 0, .providers = providers, .n_providers = np};
  if (dnt_session_start(&w.s, 2, &w.cfg, &session_cb, &w) != 0) {
    rc = dnt_session_start_failed(&w.s);
    goto out;
  }
  uv_signal_init(w.loop, &w.sigint);
  uv_signal_init(w.loop, &w.sigterm);
  w.sigint.data = w.sigterm.data = &w;
  uv_signal_start(&w.sigint, on_signal, SIGINT);
  uv_signal_start(&w.sigterm, on_signal, SIGTERM);
  uv_timer_init(w.loop, &w.stopper);
  uv_timer_init(w.loop, &w.unseen);
  uv_timer_init(w.loop, &w.restart);
  w.stopper.data = w.unseen.data = w.restart.data = &w;
  if (o.duration_ms) uv_timer_start(&w.stopper, on_stopper, o.duration_ms, 0);
  if (w.specs.n) uv_timer_start(&w.unseen, on_unseen, (uint64_t)(3000 * REFRESH_S), 0);
  char *name = dnt_safe_text(w.s.target.name);
  fprintf(stderr, "Watching process %d (%s) with %zu rule%s", w.s.target.pid, name, dnt_rules_count(w.rules),
          dnt_rules_count(w.rules) == 1 ? "" : "s");
  if (o.ring_ms) fprintf(stderr, ", keeping the last %.0f s for save-ring", (double)o.ring_ms / 1000);
  fprintf(stderr, ": Ctrl+C stops\n");
  free(name);
  dnt_loop_run(w.loop, UV_RUN_DEFAULT, __func__);
  for (size_t i = 0; i < dnt_rules_count(w.rules); i++) { /* what each rule did, and what the limits held back */
    uint64_t fired, held;
    dnt_rules_totals(w.rules, i, &fired, &held);
    fprintf(stderr, "rule %zu: fired %llu time%s, %llu more held back by the limits\n", i + 1,
            (unsigned long long)fired, fired == 1 ? "" : "s", (unsigned long long)held);
  }
  rc = 0;
out:
  dnt_session_close(&w.s);
  if (w.loop) {
    while (dnt_loop_run(w.loop, UV_RUN_NOWAIT, __func__)) {}
    uv_loop_close(w.loop);
  }
  ntr_parser_free(w.parser);
  dnt_counters_decoder_free(w.feed.decoder);
  dnt_rule_feed_release(&w.feed);
  ntr_ring_free(w.ring);
  dnt_providers_release(&extra);
  dnt_providers_release(&w.wanted);
  dnt_counters_wire_release(&wire);
  dnt_counter_specs_release(&w.specs);
  free(providers);
  dnt_rules_free(w.rules);
  dnt_incidents_free(w.incidents);
  free(w.ring_path);
  free(o.rules.v);
  return rc;
}
