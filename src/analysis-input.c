/* A trace file, or a live recording, streamed into an analysis (analysis-input.h). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "analysis-input.h"
#include "builtin.h"
#include "dnt-trace.h"
#include "dsipc.h"
#include "providers.h"
#include "util.h"

#define DEFAULT_BUFFER_MB 64
#define MAX_PROVIDERS 16

/* ---- a trace file ---- */

static int read_file(const char *trace, const char *noun, const ntr_callbacks *cb, void *ud,
                     struct dnt_analysis_outcome *out) {
  char err[512];
  ntr_stats st;
  if (dnt_trace_zip_note(trace, err, sizeof err) > 0) dnt_warning("%s", err);
  int r = dnt_trace_read(trace, cb, ud, &st, err, sizeof err);
  if (r < 0) {
    dnt_error("%s", err);
    return DNT_EXIT_FAILURE;
  } else if (r == DNT_TRACE_DAMAGED) { /* reported, with what came before the damage; exit 1 */
    dnt_error("%s: the %s before it are shown", err, noun);
    out->damaged = 1;
  } else if (r == DNT_TRACE_TRUNCATED) {
    dnt_warning("%s: the %s before the cut are shown", err, noun);
  }
  if (st.dropped_events)
    dnt_warning("the trace misses %llu events that its writer dropped: some %s may be incomplete",
                (unsigned long long)st.dropped_events, noun);
  return 0;
}

/* ---- a live process ---- */

struct live {
  uv_loop_t *loop;
  dnt_session s;
  ntr_parser *parser;
  int parse_failed;
  char parse_error[256];
  uv_signal_t sigint, sigterm;
  uv_timer_t duration;
  int handles_closed; /* on_end ran: the stream is over */
  const struct dnt_analysis_recording *rec;
  const void *analysis; /* the callbacks' ud, for rec->done */
  int show_progress;    /* rec->progress, on a terminal */
  uint64_t progress_at; /* the loop's ms of the last progress line, 0: none shown */
};

/* The progress line, rewritten in place (at most twice a second, and once more at the end). */
static void progress(struct live *l, int last) {
  if (!l->show_progress) return;
  uint64_t now = uv_now(l->loop);
  if (!last && l->progress_at && now - l->progress_at < 500) return;
  if (last && !l->progress_at) return;
  char line[200];
  l->rec->progress(l->analysis, line, sizeof line);
  fprintf(stderr, "\r%s\033[K%s", line, last ? "\n" : "");
  l->progress_at = now ? now : 1;
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct live *l = ud;
  if (l->parse_failed) return;
  int rc = ntr_parser_feed(l->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    l->parse_failed = 1;
    snprintf(l->parse_error, sizeof l->parse_error, "%s", ntr_parser_errmsg(l->parser));
    dnt_session_stop(&l->s);
  } else if (l->rec->done && !l->s.stopping && l->rec->done(l->analysis)) {
    dnt_session_stop(&l->s); /* the analysis has what it came for */
  }
  progress(l, 0);
}

static void on_end(void *ud) {
  struct live *l = ud;
  if (l->handles_closed) return;
  l->handles_closed = 1;
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

static int session_config(const struct dnt_analysis_recording *rec, struct dnt_providers *providers,
                          dsipc_provider *wire, dsipc_session_config *cfg, int *version) {
  char err[512];
  if (rec->providers && dnt_providers_parse(providers, rec->providers, err, sizeof err) < 0) {
    dnt_error("%s", err);
    return -1;
  }
  if (rec->profiles && dnt_providers_add_profiles(providers, rec->profiles, err, sizeof err) < 0) {
    dnt_error("%s", err);
    return -1;
  }
  size_t n = providers->n < MAX_PROVIDERS ? providers->n : MAX_PROVIDERS;
  for (size_t i = 0; i < n; i++)
    wire[i] = (dsipc_provider){.name = providers->v[i].name, .keywords = providers->v[i].keywords,
                               .level = providers->v[i].level, .args = providers->v[i].args};
  *cfg = (dsipc_session_config){.buffer_mb = rec->buffer_mb ? rec->buffer_mb : DEFAULT_BUFFER_MB,
                                .format = 1, .request_stackwalk = rec->stacks, .providers = wire,
                                .n_providers = n};
  if (rec->rundown) {
    /* the default rundown, which every runtime takes (CollectTracing2) */
    cfg->request_rundown = 1;
    *version = 2;
  } else if (providers->has_rundown_keyword) {
    /* the profile's own small rundown (GC settings) on a runtime that takes a rundown keyword
     * (9+); none before: the whole default rundown would only slow the stop */
    cfg->rundown_keyword = providers->rundown_keyword;
    *version = 4;
  } else {
    *version = 2;
  }
  return 0;
}

static int record(const struct dnt_analysis_input *in, const struct dnt_analysis_recording *rec, const char *noun,
                  ntr_parser *p, const void *analysis, struct dnt_analysis_outcome *out) {
  struct live l;
  memset(&l, 0, sizeof l);
  l.parser = p;
  l.rec = rec;
  l.analysis = analysis;
  l.loop = uv_default_loop();
  struct dnt_providers providers = {0};
  dsipc_provider wire[MAX_PROVIDERS];
  dsipc_session_config cfg;
  int version;
  int rc = dnt_session_open(&l.s, l.loop, in->target);
  if (rc) goto out;
  rc = DNT_EXIT_FAILURE;
  if (session_config(rec, &providers, wire, &cfg, &version) < 0) goto out;
  static const dnt_session_cb cb = {on_data, on_end};
  /* on_end closes these three whenever the stream ends, even with the runtime's answer */
  uv_signal_init(l.loop, &l.sigint);
  uv_signal_init(l.loop, &l.sigterm);
  uv_timer_init(l.loop, &l.duration);
  l.sigint.data = l.sigterm.data = l.duration.data = &l;
  if (dnt_session_start(&l.s, version, &cfg, &cb, &l) != 0) {
    on_end(&l);
    rc = dnt_session_start_failed(&l.s);
    goto out;
  }
  /* Ctrl+C is ours before "Recording" says it stops the recording: a signal sent on that line
   * ends the session with a report, it does not kill the process */
  if (!l.handles_closed) { /* else the stream is over already */
    uv_signal_start(&l.sigint, on_signal, SIGINT);
    uv_signal_start(&l.sigterm, on_signal, SIGTERM);
  }
  dnt_session_resume(&l.s); /* a command, or a runtime that dialled a listener, waits for this */
  char *safe_name = dnt_safe_text(l.s.target.name);
  if (in->duration_ms)
    fprintf(stderr, "Recording %s of process %d (%s) for %s%.0f s (Ctrl+C stops sooner)\n", rec->what,
            l.s.target.pid, safe_name, rec->duration_is_timeout ? "at most " : "", (double)in->duration_ms / 1000);
  else
    fprintf(stderr, "Recording %s of process %d (%s): Ctrl+C stops\n", rec->what, l.s.target.pid, safe_name);
  free(safe_name);
  if (in->duration_ms && !l.handles_closed) uv_timer_start(&l.duration, on_duration, in->duration_ms, 0);
  l.show_progress = rec->progress && isatty(STDERR_FILENO);
  dnt_loop_run(l.loop, UV_RUN_DEFAULT, __func__);
  progress(&l, 1);
  rc = 0;
  if (l.parse_failed) {
    dnt_error("the stream does not parse as nettrace: %s", l.parse_error);
    rc = DNT_EXIT_FAILURE;
  } else if (ntr_parser_finish(p) != 0 && !l.s.abandoned) {
    dnt_warning("the session ended before the end of its stream%s%s: the %s received are shown",
                l.s.end_msg[0] ? ": " : "", l.s.end_msg, noun);
  }
  ntr_stats st;
  ntr_parser_stats(p, &st);
  if (st.dropped_events)
    dnt_warning("the runtime dropped %llu events (its buffer was full): some %s may be incomplete",
                (unsigned long long)st.dropped_events, noun);
  if (l.s.child_started) { /* stopped by --duration or Ctrl+C: the command goes on, as collect's does */
    if (!l.s.child_exited) fprintf(stderr, "Waiting for the command (pid %d) to exit...\n", l.s.target.pid);
    out->command_exit = dnt_session_wait_child(&l.s);
    out->command_ran = 1;
  }
out:
  dnt_session_close(&l.s);
  while (dnt_loop_run(l.loop, UV_RUN_NOWAIT, __func__)) {}
  uv_loop_close(l.loop);
  dnt_providers_release(&providers);
  return rc;
}

int dnt_analysis_feed(const struct dnt_analysis_input *in, const struct dnt_analysis_recording *rec,
                      const char *noun, const ntr_callbacks *cb, void *ud, struct dnt_analysis_outcome *out) {
  memset(out, 0, sizeof *out);
  if (in->trace) return read_file(in->trace, noun, cb, ud, out);
  ntr_parser *p;
  if (ntr_parser_new(&p, cb, ud, NULL) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  int rc = record(in, rec, noun, p, ud, out);
  ntr_parser_free(p);
  return rc;
}
