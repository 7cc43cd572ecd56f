/* dntrace gc: every garbage collection of a trace, and PerfView's GCStats summary (analyze/).
 *
 * From a trace file, or from a live process: then a session with the runtime's GC keyword at the
 * informational level, as dotnet-trace's gc-collect profile asks (src/providers.c), read as it
 * streams: the events go straight into the analysis, nothing is kept but one row per GC. The
 * report goes to stdout (or -o); what the live session says goes to stderr. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "builtin.h"
#include "dnt-analyze.h"
#include "dnt-trace.h"
#include "dsipc.h"
#include "ntr.h"
#include "options.h"
#include "output.h"
#include "providers.h"
#include "session.h"
#include "util.h"

#define DEFAULT_TOP 5
#define BUFFER_MB 64 /* GC events are few: a small session buffer is plenty */

struct gc_options {
  struct dnt_session_target target;
  const char *trace, *output;
  int format;
  long top;
  uint64_t duration_ms;
};

#define O(f) offsetof(struct gc_options, f)
static const struct dnt_option gc_options[] = {
    DNT_OPT_TEXT("FILE", "a trace (.nettrace, .gz, .zip, - for stdin) to analyse, or instead:"),
    DNT_OPT_GROUP(dnt_options_target_pid, O(target)),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_FORMAT("FORMAT", O(format), DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON),
                   "text (default: a table) or json"),
    DNT_OPT_OUTPUT("FILE", O(output), "write the report to FILE (default: standard output)"),
    DNT_OPT_TOP(O(top), 1000000, "how many of the longest pauses to list (default 5)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_gc = {
    .synopsis = "dntrace gc (FILE | -p PID | -n NAME) [--duration TIME] [--format FORMAT] [-o FILE] [--top N]",
    .summary = "Show every garbage collection and a GCStats summary, from a trace or a live process",
    .options = gc_options,
    .operand = DNT_OPERAND_OR_TARGET,
    .operand_offset = O(trace),
    .no_operand = "name a trace file, or a process with -p PID or -n NAME",
    .many_operands = "one trace file, or one process, at a time",
};
#undef O

/* ---- a live process ---- */

struct live {
  uv_loop_t *loop;
  dnt_session s;
  ntr_parser *parser;
  int parse_failed;
  char parse_error[256];
  uint64_t bytes;
  uv_signal_t sigint, sigterm;
  uv_timer_t duration;
};

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct live *l = ud;
  l->bytes += n;
  if (l->parse_failed) return;
  int rc = ntr_parser_feed(l->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    l->parse_failed = 1;
    snprintf(l->parse_error, sizeof l->parse_error, "%s", ntr_parser_errmsg(l->parser));
    dnt_session_stop(&l->s);
  }
}

static void on_end(void *ud) {
  struct live *l = ud;
  uv_close((uv_handle_t *)&l->sigint, NULL);
  uv_close((uv_handle_t *)&l->sigterm, NULL);
  uv_close((uv_handle_t *)&l->duration, NULL);
}

static void on_signal(uv_signal_t *h, int signum) {
  struct live *l = h->data;
  (void)signum;
  if (!l->s.stopping)
    dnt_session_stop(&l->s);
  else
    dnt_session_abandon(&l->s); /* a second Ctrl+C: what came is analysed */
}

static void on_duration(uv_timer_t *t) {
  struct live *l = t->data;
  dnt_session_stop(&l->s);
}

/* Records the target's GC events into the parser p until --duration, Ctrl+C or the process's
 * end. 0 or an exit code (the error printed). */
static int record(const struct gc_options *o, ntr_parser *p) {
  struct live l;
  memset(&l, 0, sizeof l);
  l.parser = p;
  l.loop = uv_default_loop();
  struct dnt_providers providers = {0};
  char err[512];
  int rc = dnt_session_open(&l.s, l.loop, &o->target);
  if (rc) goto out;
  rc = DNT_EXIT_FAILURE;
  if (dnt_providers_add_profiles(&providers, "gc-collect", err, sizeof err) < 0) {
    dnt_error("%s", err);
    goto out;
  }
  dsipc_provider wire[8];
  size_t n = providers.n < 8 ? providers.n : 8;
  for (size_t i = 0; i < n; i++)
    wire[i] = (dsipc_provider){.name = providers.v[i].name, .keywords = providers.v[i].keywords,
                               .level = providers.v[i].level, .args = providers.v[i].args};
  /* the profile's own rundown (GC settings) on a runtime that takes a rundown keyword (9+);
   * none before: the whole default rundown would only slow the stop */
  dsipc_session_config cfg = {.buffer_mb = BUFFER_MB, .format = 1, .request_rundown = 0,
                              .rundown_keyword = providers.has_rundown_keyword ? providers.rundown_keyword : 0,
                              .request_stackwalk = 0, .providers = wire, .n_providers = n};
  static const dnt_session_cb cb = {on_data, on_end};
  if (dnt_session_start(&l.s, 4, &cfg, &cb, &l) != 0) {
    rc = dnt_session_start_failed(&l.s);
    goto out;
  }
  char *safe_name = dnt_safe_text(l.s.target.name);
  if (o->duration_ms)
    fprintf(stderr, "Recording the GCs of process %d (%s) for %.0f s (Ctrl+C stops sooner)\n", l.s.target.pid,
            safe_name, (double)o->duration_ms / 1000);
  else
    fprintf(stderr, "Recording the GCs of process %d (%s): Ctrl+C stops\n", l.s.target.pid, safe_name);
  free(safe_name);
  uv_signal_init(l.loop, &l.sigint);
  uv_signal_init(l.loop, &l.sigterm);
  l.sigint.data = l.sigterm.data = &l;
  uv_signal_start(&l.sigint, on_signal, SIGINT);
  uv_signal_start(&l.sigterm, on_signal, SIGTERM);
  uv_timer_init(l.loop, &l.duration);
  l.duration.data = &l;
  if (o->duration_ms) uv_timer_start(&l.duration, on_duration, o->duration_ms, 0);
  dnt_loop_run(l.loop, UV_RUN_DEFAULT, __func__);
  rc = 0;
  if (l.parse_failed) {
    dnt_error("the stream does not parse as nettrace: %s", l.parse_error);
    rc = DNT_EXIT_FAILURE;
  } else if (ntr_parser_finish(p) != 0 && !l.s.abandoned) {
    dnt_warning("the session ended before the end of its stream%s%s: the GCs received are shown",
                l.s.end_msg[0] ? ": " : "", l.s.end_msg);
  }
  ntr_stats st;
  ntr_parser_stats(p, &st);
  if (st.dropped_events)
    dnt_warning("the runtime dropped %llu events (its buffer was full): some GCs may be incomplete",
                (unsigned long long)st.dropped_events);
out:
  dnt_session_close(&l.s);
  while (dnt_loop_run(l.loop, UV_RUN_NOWAIT, __func__)) {}
  uv_loop_close(l.loop);
  dnt_providers_release(&providers);
  return rc;
}

/* ---- the command ---- */

int cmd_gc(int argc, char **argv) {
  struct gc_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_gc, "gc", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if (o.trace && o.duration_ms) {
    dnt_error("--duration goes with a process (-p or -n), not with a trace file");
    return DNT_EXIT_USAGE;
  }
  char err[512];
  struct dnt_schema *schema = dnt_schema_new();
  struct dnt_gc_analysis *a = schema ? dnt_gc_analysis_new(schema) : NULL;
  if (!a) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  struct dnt_output out = {0};
  char *name = NULL;
  int damaged = 0;
  rc = DNT_EXIT_FAILURE;
  if (dnt_schema_load_default(schema, err, sizeof err) < 0) {
    dnt_error("cannot read the runtime's event layouts: %s", err);
    goto done;
  }
  /* the report's file is checked before a session is started for it */
  name = dnt_output_name(o.output ? o.output : "-", o.format == DNT_FORMAT_JSON ? ".json" : ".txt");
  if (strcmp(name, "-") != 0 && dnt_output_check(name, 1) < 0) goto done;

  ntr_callbacks cb;
  dnt_gc_analysis_callbacks(&cb);
  if (o.trace) {
    ntr_stats st;
    if (dnt_trace_zip_note(o.trace, err, sizeof err) > 0) dnt_warning("%s", err);
    int r = dnt_trace_read(o.trace, &cb, a, &st, err, sizeof err);
    if (r < 0) {
      dnt_error("%s", err);
      goto done;
    } else if (r == DNT_TRACE_DAMAGED) { /* reported, the GCs before the damage too; exit 1 */
      dnt_error("%s: the GCs before it are shown", err);
      damaged = 1;
    } else if (r == DNT_TRACE_TRUNCATED) {
      dnt_warning("%s: the GCs before the cut are shown", err);
    }
    if (st.dropped_events)
      dnt_warning("the trace misses %llu events that its writer dropped: some GCs may be incomplete",
                  (unsigned long long)st.dropped_events);
  } else {
    ntr_parser *p;
    if (ntr_parser_new(&p, &cb, a, NULL) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    int r = record(&o, p);
    ntr_parser_free(p);
    if (r) {
      rc = r;
      goto done;
    }
  }
  if (dnt_gc_analysis_failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_gc_analysis_finish(a);
  if (dnt_output_open(&out, name, 0) < 0) goto done;
  if (o.format == DNT_FORMAT_JSON)
    dnt_gc_write_json(out.fp, a, (size_t)o.top);
  else
    dnt_gc_write_text(out.fp, a, (size_t)o.top);
  if (dnt_output_commit(&out) < 0) goto done;
  size_t n;
  dnt_gc_list(a, &n);
  if (n == 0) fprintf(stderr, "no GC in this trace (record one with 'dntrace gc -p PID' or the gc-collect profile)\n");
  rc = damaged ? DNT_EXIT_FAILURE : 0;
done:
  free(name);
  dnt_gc_analysis_free(a);
  dnt_schema_free(schema);
  return rc;
}
