/* dntrace counters: live counter values of a .NET process, as dotnet-counters collect/monitor.
 *
 * One EventPipe session (EventCounters providers plus System.Diagnostics.Metrics, no rundown)
 * read as it streams: the nettrace parser hands events to the counters decoder
 * (counters-session.c), which hands values to the output: rows of a CSV/JSON file, or the table
 * of latest values (counters-table.c) that `monitor` draws. Stopping (q, Ctrl+C, --duration)
 * sends StopTracing and reads to the end of the stream, so a file is always complete. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "builtin.h"
#include "dnt-counters.h"
#include "dnt-http.h"
#include "dnt-trace.h"
#include "ntr.h"
#include "options.h"
#include "output.h"
#include "session.h"
#include "util.h"


#define BUFFER_MB 256

enum mode { MODE_COLLECT, MODE_MONITOR, MODE_SERVE };
enum format { FORMAT_CSV, FORMAT_JSON, FORMAT_PROMETHEUS };
#define DEFAULT_LISTEN "127.0.0.1:9400"
#define RECONNECT_MS 1000

struct options {
  struct dnt_session_target target;
  const char *output;
  enum format format;
  int format_given, max_hist, max_ts, plain, resume, deltas;
  int format_opt; /* enum dnt_format, as --format gave it */
  const char *listen;
  double refresh;
  uint64_t duration_ms;
  struct dnt_counter_specs specs;
};

struct counters {
  uv_loop_t *loop;
  dnt_session s;
  enum mode mode;
  enum format format;
  FILE *out;            /* collect: the CSV or JSON being written (output's fp) */
  struct dnt_output output;
  const char *out_path; /* collect: the file's name, "-" for stdout */
  FILE *msg;            /* where collect's own lines go: stderr when the values go to stdout */
  uint64_t rows;
  int write_failed;
  int write_errno;     /* why the first write failed (ENOSPC...); 0 if unknown */
  double refresh_s;
  ntr_parser *parser;
  dnt_counters_decoder *decoder;
  int parse_failed;
  char parse_error[256];
  uv_signal_t sigint, sigterm;
  uv_timer_t ticker, stopper_timer;
  int handles_open;
  /* monitor */
  struct dnt_counter_table table;
  struct dnt_screen screen;
  int fullscreen, paused;
  uint64_t drawn;  /* the table generation last drawn */
  int warned;
  /* serve */
  const struct options *opts;
  struct dnt_counters_wire *wire;
  dnt_http_server *http;
  uv_timer_t reconnect;
  int live, quitting, waiting_said;
};

/* ---- values ---- */

static int on_value(void *ud, const dnt_counter_value *v) {
  struct counters *c = ud;
  if (c->mode != MODE_COLLECT || c->format == FORMAT_PROMETHEUS) { /* the latest values only */
    if (!c->paused && dnt_counter_table_put(&c->table, v) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    return 0;
  }
  if (c->write_failed) return 0;
  /* the series seen (latest values), so that the end can say which asked-for counter sent none */
  if (dnt_counter_table_put(&c->table, v) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (c->format == FORMAT_JSON)
    dnt_counter_json_row(c->out, v, c->refresh_s, c->rows == 0);
  else
    dnt_counter_csv_row(c->out, v, c->refresh_s);
  c->rows++;
  return 0;
}

/* ---- monitor output ---- */

static const char *status_text(const struct counters *c) {
  if (c->s.ended) return c->s.stopping ? "Stopped" : "The target process exited";
  if (c->paused) return "Paused";
  return c->table.n ? "Running" : "Waiting for initial payload...";
}

/* A whole frame is built in memory and written at once: the terminal never shows half of one. */
static void draw(struct counters *c) {
  char *frame = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&frame, &len);
  if (!fp) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (c->fullscreen) {
    fputs("\033[H", fp);
    dnt_monitor_render(fp, &c->table, c->refresh_s, status_text(c), c->screen.width, c->screen.height, 1,
                       c->opts->deltas);
  } else {
    char ts[40];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    dnt_counter_time((double)now.tv_sec + now.tv_nsec / 1e9, ts);
    fprintf(fp, "[%s] process %d (%s)\n", ts, c->s.target.pid, c->s.target.name);
    dnt_monitor_render(fp, &c->table, c->refresh_s, status_text(c), 100, 0, 0, c->opts->deltas);
    fputc('\n', fp);
  }
  fclose(fp);
  fwrite(frame, 1, len, stdout);
  fflush(stdout);
  free(frame);
  c->drawn = c->table.generation;
}

static void on_resize(void *ud) { draw(ud); }

static void stop(struct counters *c);
static int write_prom_file(struct counters *c);

static void on_key(void *ud, int key) {
  struct counters *c = ud;
  switch (key) {
  case 'q': case 'Q': stop(c); break;
  case 'p': case 'P': c->paused = 1; draw(c); break;
  case 'r': case 'R': c->paused = 0; draw(c); break;
  default: break;
  }
}

/* ---- the session ---- */

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct counters *c = ud;
  if (c->parse_failed) return;
  int rc = ntr_parser_feed(c->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    c->parse_failed = 1;
    snprintf(c->parse_error, sizeof c->parse_error, "%s", ntr_parser_errmsg(c->parser));
  }
}

static void close_handles(struct counters *c) {
  if (!c->handles_open) return;
  c->handles_open = 0;
  uv_close((uv_handle_t *)&c->sigint, NULL);
  uv_close((uv_handle_t *)&c->sigterm, NULL);
  uv_close((uv_handle_t *)&c->ticker, NULL);
  uv_close((uv_handle_t *)&c->stopper_timer, NULL);
  uv_close((uv_handle_t *)&c->reconnect, NULL);
  dnt_http_server_close(c->http);
  c->http = NULL;
  if (c->fullscreen) { /* the screen's handles go too, or the loop would wait for keys forever */
    dnt_screen_close(&c->screen);
    c->fullscreen = 0;
  }
}

static dsipc_session_config prepare(struct counters *c);
static void on_restarted(void *ud, int rc);
static const dnt_session_cb session_cb;

/* serve -n NAME: the next process of that name, once there is exactly one. The session starts
 * without waiting (the runtime may take seconds to answer while it enables its EventSources):
 * the loop goes on answering scrapes, 503 until on_restarted. */
static void on_reconnect(uv_timer_t *t) {
  struct counters *c = t->data;
  int pid = dnt_target_find_by_name(c->opts->target.name);
  if (!pid) return;
  uv_timer_stop(&c->reconnect);
  dnt_session_close(&c->s);
  struct dnt_session_target want = {.pid = pid};
  if (dnt_session_open(&c->s, c->loop, &want) != 0) {
    uv_timer_start(&c->reconnect, on_reconnect, RECONNECT_MS, RECONNECT_MS); /* try again */
    return;
  }
  dsipc_session_config cfg = prepare(c);
  if (dnt_session_start_async(&c->s, 2, &cfg, &session_cb, c, on_restarted) != 0) {
    dnt_warning("cannot start a session on process %d: %s; trying again", pid, c->s.reply_msg);
    uv_timer_start(&c->reconnect, on_reconnect, RECONNECT_MS, RECONNECT_MS);
  }
}

static void on_end(void *ud) {
  struct counters *c = ud;
  c->live = 0;
  if (c->mode == MODE_SERVE && !c->quitting && !c->opts->target.name) {
    /* -p: that process will not come back, but the endpoint stays: 503 (Prometheus marks the
     * target down) until serve is stopped */
    dnt_counter_table_clear(&c->table);
    printf("Process %d ended the session; /metrics answers 503 until serve is stopped\n", c->s.target.pid);
    fflush(stdout);
    return;
  }
  if (c->mode == MODE_SERVE && !c->quitting && c->opts->target.name) {
    /* a sidecar outlives restarts: answer 503 until the next process of that name runs */
    dnt_counter_table_clear(&c->table);
    printf("Process %d ended the session; waiting for the next process named '%s'\n", c->s.target.pid,
           c->opts->target.name);
    fflush(stdout);
    uv_timer_start(&c->reconnect, on_reconnect, RECONNECT_MS, RECONNECT_MS);
    return;
  }
  close_handles(c);
}

static void stop(struct counters *c) {
  c->quitting = 1;
  if (c->s.starting) dnt_session_close(&c->s); /* serve: a start still unanswered is dropped */
  if (c->live && !c->s.ended)
    dnt_session_stop(&c->s);
  else
    close_handles(c); /* serve between two processes: nothing to stop */
}

static void on_signal(uv_signal_t *h, int signum) {
  struct counters *c = h->data;
  (void)signum;
  if (!c->quitting)
    stop(c);
  else
    dnt_session_abandon(&c->s); /* a second Ctrl+C: go now */
}

static void check_decoder_error(struct counters *c) {
  const char *e = dnt_counters_decoder_error(c->decoder);
  if (e[0] && !c->warned) {
    c->warned = 1;
    if (c->fullscreen) dnt_screen_close(&c->screen), c->fullscreen = 0;
    dnt_warning("%s", e);
  }
}

/* collect --format prometheus: the file always holds one whole snapshot (written aside, then
 * renamed over it), as node_exporter's textfile collector wants. */
static int write_prom_file(struct counters *c) {
  struct dnt_output out;
  if (dnt_output_open(&out, c->out_path, DNT_OUTPUT_REPLACE) < 0) return -1;
  long n = dnt_counters_prom_write(out.fp, &c->table);
  if (n < 0) {
    dnt_output_abort(&out);
    return dnt_error("cannot write '%s': out of memory", c->out_path);
  }
  if (dnt_output_commit(&out) < 0) return -1;
  c->rows = (uint64_t)n;
  return 0;
}

static void on_tick(uv_timer_t *t) {
  struct counters *c = t->data;
  check_decoder_error(c);
  if (c->mode == MODE_MONITOR) {
    if (c->fullscreen || c->table.generation != c->drawn) draw(c);
  } else if (c->mode == MODE_COLLECT && c->format == FORMAT_PROMETHEUS) {
    if (c->table.generation != c->drawn && !c->write_failed && strcmp(c->out_path, "-") != 0) {
      c->drawn = c->table.generation;
      if (write_prom_file(c) != 0) c->write_failed = 1, stop(c);
    }
  } else if (c->out && !c->write_failed && fflush(c->out) != 0) {
    c->write_failed = 1;
    c->write_errno = errno;
    dnt_error("cannot write '%s': %s", c->out_path, strerror(c->write_errno ? c->write_errno : EIO));
    stop(c);
  }
}

/* ---- serve ---- */

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static void on_http(void *ud, const char *path, struct dnt_http_reply *rep) {
  struct counters *c = ud;
  FILE *fp = open_memstream(&rep->body, &rep->body_len);
  if (!fp) {
    rep->status = 503;
    return;
  }
  if (strncmp(path, "/metrics", 8) == 0 && (!path[8] || path[8] == '?')) {
    if (c->live) {
      rep->status = 200;
      rep->content_type = PROM_CONTENT_TYPE;
      if (dnt_counters_prom_write(fp, &c->table) < 0) rep->status = 503;
    } else {
      rep->status = 503; /* Prometheus marks the target down (up == 0) */
      if (c->opts->target.name)
        fprintf(fp, "no session: waiting for a process named '%s'\n", c->opts->target.name);
      else
        fprintf(fp, "no session: process %d has ended\n", c->s.target.pid);
    }
  } else if (strcmp(path, "/") == 0) {
    rep->status = 200;
    fprintf(fp, "dntrace counters serve: the counters of process %d (%s) are at /metrics\n", c->s.target.pid,
            c->s.target.name);
  } else {
    rep->status = 404;
    fputs("not found: the counters are at /metrics\n", fp);
  }
  if (fclose(fp) != 0) rep->status = 503;
}

static void on_duration(uv_timer_t *t) { stop(t->data); }

/* ---- options ---- */

static int parse_positive_int(const char *opt, const char *s, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || end == s || v <= 0 || v > 1000000) return dnt_error("%s: '%s' is not a positive number", opt, s);
  *out = (int)v;
  return 0;
}

static int parse_max_histograms(void *field, const char *arg) { return parse_positive_int("--maxHistograms", arg, field); }
static int parse_max_time_series(void *field, const char *arg) { return parse_positive_int("--maxTimeSeries", arg, field); }

static int parse_refresh(void *field, const char *arg) {
  char *end;
  double *refresh = field;
  *refresh = strtod(arg, &end);
  if (*end || end == arg || !(*refresh >= 0.1) || *refresh > 86400)
    return dnt_error("--refresh-interval: '%s' is not a number of seconds (0.1 or more)", arg);
  return 0;
}

static int parse_counters(void *field, const char *arg) {
  char err[512];
  if (dnt_counter_specs_parse(field, arg, err, sizeof err) < 0) return dnt_error("--counters: %s", err);
  return 0;
}

#define O(f) offsetof(struct options, f)
/* the rows every subcommand has: the target, the counters, their pace, the runtime's limits */
#define COMMON_ROWS                                                                                                 \
  DNT_OPT_GROUP(dnt_options_target_any, O(target)), DNT_OPT_RESUME(O(resume)),                                    \
      DNT_OPT_PARSE_MANY(0, "counters", "LIST", O(specs), parse_counters,                                         \
                         "provider or provider[c1,c2], comma-separated; an EventCounters\n"                     \
                         "prefix asks for the EventSource (default System.Runtime)"),                             \
      DNT_OPT_PARSE(0, "refresh-interval", "SEC", O(refresh), parse_refresh, "seconds between values (default 1)"), \
      DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),                                                       \
      DNT_OPT_PARSE(0, "maxHistograms", "N", O(max_hist), parse_max_histograms,                                   \
                    "histograms the runtime tracks (default 10)"),                                               \
      DNT_OPT_PARSE(0, "maxTimeSeries", "N", O(max_ts), parse_max_time_series,                                    \
                    "time series the runtime tracks (default 1000)")
#define COLLECT_ROWS                                                                                                \
  DNT_OPT_FORMAT("FORMAT", O(format_opt), DNT_FORMATS_COUNTERS, "collect: csv (default), json or prometheus"),    \
      DNT_OPT_OUTPUT("FILE", O(output),                                                                           \
                     "collect: where to write (- for stdout; .csv, .json or .prom is added\n"                     \
                     "when FILE has no extension; default counter.csv)")
#define SERVE_ROWS DNT_OPT_STRING(0, "listen", "ADDR", O(listen), "serve: HOST:PORT to listen on (default 127.0.0.1:9400)")
#define MONITOR_ROWS                                                                                                \
  DNT_OPT_FLAG(0, "plain", O(plain), "monitor: plain text blocks, also on a terminal"),                             \
      DNT_OPT_FLAG(0, "showDeltas", O(deltas), "monitor: a column with each value's change since the last")

static const struct dnt_option counters_options[] = {
    DNT_OPT_TEXT("collect", "write every value to a file (CSV, JSON), or the latest ones (prometheus)"),
    DNT_OPT_TEXT("monitor", "a live table of the latest values (plain lines when not a terminal)"),
    DNT_OPT_TEXT("serve", "answer GET /metrics with the latest values (Prometheus text format);\n"
                          "with -n, also the next process of that name"),
    DNT_OPT_TEXT("list", "print the well-known counters with their units"),
    DNT_OPT_TEXT("ps", "list the .NET processes (as 'dntrace ps')"),
    COMMON_ROWS, COLLECT_ROWS, SERVE_ROWS, MONITOR_ROWS,
    DNT_OPT_END(),
};

/* each subcommand's own help: its rows alone */
static const struct dnt_option collect_options[] = {COMMON_ROWS, COLLECT_ROWS, DNT_OPT_END()};
static const struct dnt_option monitor_options[] = {COMMON_ROWS, MONITOR_ROWS, DNT_OPT_END()};
static const struct dnt_option serve_options[] = {COMMON_ROWS, SERVE_ROWS, DNT_OPT_END()};
#undef O

const struct dnt_usage usage_counters = {
    .synopsis = "dntrace counters (collect | monitor | serve) (-p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--counters LIST] [--refresh-interval SEC] [--duration TIME] [--format csv|json|prometheus] [-o FILE] [--listen ADDR]",
    .summary = "Show, record or serve the EventCounters and Meters of a .NET process, as dotnet-counters",
    .options = counters_options,
};

#define TARGET_SYNOPSIS "(-p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--counters LIST] [--refresh-interval SEC] [--duration TIME]"
static const struct dnt_usage counters_collect_usage = {
    .synopsis = "dntrace counters collect " TARGET_SYNOPSIS " [--format csv|json|prometheus] [-o FILE]",
    .summary = "Write every value of the counters to a file (CSV, JSON), or their latest ones (prometheus)",
    .options = collect_options,
};
static const struct dnt_usage counters_monitor_usage = {
    .synopsis = "dntrace counters monitor " TARGET_SYNOPSIS " [--plain] [--showDeltas]",
    .summary = "Show the counters' latest values in a live table (plain lines when not a terminal)",
    .options = monitor_options,
};
static const struct dnt_usage counters_serve_usage = {
    .synopsis = "dntrace counters serve " TARGET_SYNOPSIS " [--listen ADDR]",
    .summary = "Answer GET /metrics with the counters' latest values, in the Prometheus text format",
    .options = serve_options,
};

/* Returns 0, or an exit code (the error printed; -1 for --help, which exits 0). */
static int parse_options(enum mode mode, int argc, char **argv, struct options *o) {
  const char *cmdname = mode == MODE_COLLECT   ? "counters collect"
                        : mode == MODE_MONITOR ? "counters monitor"
                                               : "counters serve";
  char err[512];
  o->max_hist = 10;
  o->max_ts = 1000;
  o->refresh = 1.0;
  o->resume = 1;
  const struct dnt_usage *usage = mode == MODE_COLLECT   ? &counters_collect_usage
                                 : mode == MODE_MONITOR ? &counters_monitor_usage
                                                        : &counters_serve_usage;
  int rc = dnt_options_parse(usage, cmdname, argc, argv, o);
  if (rc) return rc;
  o->format_given = o->format_opt != DNT_FORMAT_NONE;
  o->format = o->format_opt == DNT_FORMAT_JSON ? FORMAT_JSON : o->format_opt == DNT_FORMAT_PROMETHEUS ? FORMAT_PROMETHEUS : FORMAT_CSV;
  if (mode != MODE_COLLECT && (o->output || o->format_given))
    return dnt_error("-o and --format go with 'counters collect'"), DNT_EXIT_USAGE;
  if (mode != MODE_MONITOR && o->plain) return dnt_error("--plain goes with 'counters monitor'"), DNT_EXIT_USAGE;
  if (mode != MODE_MONITOR && o->deltas)
    return dnt_error("--showDeltas goes with 'counters monitor'"), DNT_EXIT_USAGE;
  if (mode != MODE_SERVE && o->listen) return dnt_error("--listen goes with 'counters serve'"), DNT_EXIT_USAGE;
  if (!o->listen) o->listen = DEFAULT_LISTEN;
  char why[300];
  if (mode == MODE_SERVE && dnt_http_addr_check(o->listen, why, sizeof why) != 0)
    return dnt_error("--listen: %s", why), DNT_EXIT_USAGE;
  if (o->specs.n == 0 && dnt_counter_specs_parse(&o->specs, DNT_COUNTERS_DEFAULT, err, sizeof err) < 0)
    return DNT_EXIT_FAILURE;
  return 0;
}

/* ---- the command ---- */

static void start_handles(struct counters *c, uint64_t duration_ms) {
  uv_signal_init(c->loop, &c->sigint);
  uv_signal_init(c->loop, &c->sigterm);
  c->sigint.data = c->sigterm.data = c;
  uv_signal_start(&c->sigint, on_signal, SIGINT);
  uv_signal_start(&c->sigterm, on_signal, SIGTERM);
  uv_timer_init(c->loop, &c->ticker);
  c->ticker.data = c;
  uint64_t tick = (uint64_t)(c->refresh_s * 1000);
  uv_timer_start(&c->ticker, on_tick, c->mode == MODE_MONITOR && c->fullscreen ? 250 : tick, tick);
  uv_timer_init(c->loop, &c->stopper_timer);
  c->stopper_timer.data = c;
  if (duration_ms) uv_timer_start(&c->stopper_timer, on_duration, duration_ms, 0);
  uv_timer_init(c->loop, &c->reconnect);
  c->reconnect.data = c;
  c->handles_open = 1;
}

/* A fresh parser and decoder (a new process is a new stream), and the session's configuration. */
static dsipc_session_config prepare(struct counters *c) {
  ntr_parser_free(c->parser);
  dnt_counters_decoder_free(c->decoder);
  c->parser = NULL;
  c->parse_failed = 0;
  const char *sid = c->wire->session_id[0] ? c->wire->session_id : NULL;
  c->decoder = dnt_counters_decoder_new(&c->opts->specs, sid, on_value, c);
  if (!c->decoder || ntr_parser_new(&c->parser, dnt_counters_decoder_callbacks(), c->decoder, NULL) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dsipc_session_config cfg = {.buffer_mb = BUFFER_MB, .format = 1, .request_rundown = 0, .rundown_keyword = 0,
                              .request_stackwalk = 0, .providers = c->wire->v, .n_providers = c->wire->n};
  return cfg;
}

static const dnt_session_cb session_cb = {on_data, on_end};

/* serve: the session on a restarted process has started, or not; /metrics answered meanwhile. */
static void on_restarted(void *ud, int rc) {
  struct counters *c = ud;
  if (rc) {
    dnt_warning("process %d refused the session: %s; trying again", c->s.target.pid, c->s.reply_msg);
    uv_timer_start(&c->reconnect, on_reconnect, RECONNECT_MS, RECONNECT_MS);
    return;
  }
  c->live = 1;
  printf("Following process %d (%s)\n", c->s.target.pid, c->s.target.name);
  fflush(stdout);
}

/* Starts the session on the opened target and waits for the runtime's answer (not from a
 * callback). 0, or an exit code with the error printed. */
static int begin(struct counters *c) {
  dsipc_session_config cfg = prepare(c);
  if (dnt_session_start(&c->s, 2, &cfg, &session_cb, c) != 0) return dnt_session_start_failed(&c->s);
  if (c->opts->resume) dnt_session_resume(&c->s);
  c->live = 1;
  return 0;
}

static const char *default_ext(enum format f) {
  return f == FORMAT_JSON ? ".json" : f == FORMAT_PROMETHEUS ? ".prom" : ".csv";
}

/* Opens what collect writes to, and its first bytes. 0 or -1 (the error printed). */
static int open_collect_output(struct counters *c) {
  if (c->format == FORMAT_PROMETHEUS) return dnt_output_check(c->out_path, 0); /* written whole at each interval */
  if (dnt_output_open(&c->output, c->out_path, DNT_OUTPUT_STREAM) < 0) return -1;
  c->out = c->output.fp;
  if (c->format == FORMAT_JSON) {
    char ts[40];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    dnt_counter_time((double)now.tv_sec + now.tv_nsec / 1e9, ts);
    fputs("{\"TargetProcess\": ", c->out);
    dnt_json_string(c->out, c->s.target.name);
    fputs(", \"StartTime\": ", c->out);
    dnt_json_string(c->out, ts);
    fputs(", \"Events\": [", c->out);
  } else {
    dnt_counter_csv_header(c->out);
  }
  return 0;
}

/* The providers asked for, comma-separated, into buf (for the line that says none sent anything). */
static const char *asked_for(const struct counters *c, char *buf, size_t cap) {
  size_t o = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < c->opts->specs.n && o + 1 < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", c->opts->specs.v[i].provider);
  return buf;
}

/* The end of collect: the file closed (JSON completed) and checked. 0 or an exit code. */
static int finish_collect_output(struct counters *c) {
  int bad = c->write_failed; /* its error is printed */
  if (!bad && c->quitting && c->rows == 0 && c->table.n == 0) {
    /* stopped with nothing to save: a name the target does not publish (dotnet-counters says
     * nothing, with exit 0, and writes an empty file) */
    char names[512];
    if (c->format != FORMAT_PROMETHEUS) {
      c->out = NULL;
      dnt_output_abort(&c->output);
    } else if (strcmp(c->out_path, "-") != 0) {
      unlink(c->out_path);
    }
    dnt_error("no counter value came from %s: the process publishes none of them ('dntrace counters list' shows the "
              "well-known counters); no file written",
              asked_for(c, names, sizeof names));
    return DNT_EXIT_FAILURE;
  }
  for (size_t i = 0; !bad && c->quitting && i < c->opts->specs.n; i++) { /* some came: say which did not */
    const struct dnt_counter_spec *sp = &c->opts->specs.v[i];
    int any = 0;
    for (size_t r = 0; r < c->table.n && !any; r++) any = strcasecmp(c->table.v[r].provider, sp->provider) == 0;
    if (!any) {
      dnt_warning("no counter value came from %s ('dntrace counters list' shows the well-known counters)",
                  sp->provider);
      continue;
    }
    for (size_t k = 0; k < sp->nnames; k++) {
      int seen = 0;
      for (size_t r = 0; r < c->table.n && !seen; r++)
        seen = strcasecmp(c->table.v[r].provider, sp->provider) == 0 && strcmp(c->table.v[r].name, sp->names[k]) == 0;
      if (!seen) dnt_warning("no value of %s[%s] came", sp->provider, sp->names[k]);
    }
  }
  if (c->format == FORMAT_PROMETHEUS) {
    if (!bad && write_prom_file(c) != 0) bad = 1;
  } else {
    if (c->format == FORMAT_JSON) fputs("\n]}\n", c->out);
    c->out = NULL;
    if (!c->quitting && c->rows == 0) { /* the target went before its first value: no file, and run() says so */
      dnt_output_abort(&c->output);
      return bad ? DNT_EXIT_FAILURE : 0;
    }
    if (bad) { /* said once, when the write failed: what was written is dropped, an older file stays */
      dnt_output_abort(&c->output);
      return DNT_EXIT_FAILURE;
    }
    if (dnt_output_commit(&c->output) < 0) bad = 1;
  }
  if (bad) return DNT_EXIT_FAILURE;
  if (!c->quitting && c->rows == 0) {
    if (strcmp(c->out_path, "-") != 0) unlink(c->out_path);
    return 0;
  }
  if (strcmp(c->out_path, "-") != 0)
    fprintf(c->msg, "File saved to %s (%llu %s)\n", c->out_path, (unsigned long long)c->rows,
            c->format == FORMAT_PROMETHEUS ? "series" : "values");
  return 0;
}

static int run(enum mode mode, int argc, char **argv) {
  struct options o;
  memset(&o, 0, sizeof o);
  struct dnt_counters_wire wire = {0};
  struct counters c;
  memset(&c, 0, sizeof c);
  c.mode = mode;
  c.msg = stdout;
  c.opts = &o;
  c.wire = &wire;
  char *out_path = NULL, err[512];
  int rc = parse_options(mode, argc, argv, &o);
  if (rc) {
    rc = rc < 0 ? 0 : rc;
    goto out;
  }
  c.format = o.format;
  c.refresh_s = o.refresh;
  if (mode == MODE_COLLECT) { /* a file that cannot be written is said before the target is looked for */
    c.out_path = out_path = dnt_output_name(o.output ? o.output : "counter", default_ext(o.format));
    if (strcmp(out_path, "-") == 0) c.msg = stderr;
    if (dnt_output_check(out_path, 1) < 0) {
      rc = DNT_EXIT_FAILURE;
      goto out;
    }
  }
  c.loop = uv_default_loop();
  rc = dnt_session_open(&c.s, c.loop, &o.target);
  if (rc) goto out;
  rc = DNT_EXIT_FAILURE;
  if (dnt_counters_wire_build(&wire, &o.specs, o.refresh, o.max_ts, o.max_hist) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (mode == MODE_COLLECT) {
    if (open_collect_output(&c) != 0) goto out;
  }
  if (mode == MODE_SERVE && dnt_http_server_start(c.loop, o.listen, on_http, &c, &c.http, err, sizeof err) != 0) {
    dnt_error("%s", err);
    goto out;
  }
  if ((rc = begin(&c)) != 0) {
    if (c.out) {
      c.out = NULL;
      dnt_output_abort(&c.output); /* nothing was written: leave no empty file behind */
    }
    goto out;
  }

  if (mode == MODE_COLLECT) {
    fprintf(c.msg, "Starting a counter session. Press Ctrl+C to stop.\nWriting to %s\n",
            c.msg == stderr ? "standard output" : out_path);
  } else if (mode == MODE_SERVE) {
    const char *colon = strrchr(o.listen, ':');
    printf("Serving the counters of process %d (%s) at http://%.*s:%d/metrics\nPress Ctrl+C to stop.\n",
           c.s.target.pid, c.s.target.name, (int)(colon - o.listen), colon == o.listen ? "127.0.0.1" : o.listen,
           dnt_http_server_port(c.http));
  } else if (!o.plain && dnt_screen_open(&c.screen, c.loop, 0, 1, on_key, on_resize, &c) == 0) {
    c.fullscreen = 1;
  } else {
    printf("Press Ctrl+C to stop. Values appear every %g s.\n", o.refresh);
  }
  fflush(stdout);
  start_handles(&c, o.duration_ms);
  if (c.fullscreen) draw(&c);
  dnt_loop_run(c.loop, UV_RUN_DEFAULT, __func__);

  check_decoder_error(&c);
  rc = 0;
  if (c.parse_failed) {
    dnt_error("the stream does not parse as nettrace: %s", c.parse_error);
    rc = DNT_EXIT_FAILURE;
  }
  if (mode == MODE_MONITOR) {
    if (!o.plain && isatty(1)) /* the last frame, on the normal screen this time */
      dnt_monitor_render(stdout, &c.table, c.refresh_s, status_text(&c), 100, 0, 0, o.deltas);
    else if (c.table.generation != c.drawn)
      draw(&c);
  } else if (mode == MODE_COLLECT) {
    int wrote = finish_collect_output(&c);
    if (!rc) rc = wrote;
    if (!rc && !c.quitting && c.rows == 0) { /* not "saved": there was nothing to save */
      dnt_error("process %d ended the session before sending any counter value", c.s.target.pid);
      rc = DNT_EXIT_FAILURE;
    }
  }
  if (!c.quitting && !c.s.abandoned) fprintf(c.msg, "The target ended the session (it exited?)\n");
  if (c.s.child_started) {
    int child_rc = dnt_session_wait_child(&c.s);
    if (rc == 0) rc = child_rc; /* as collect: the command's exit code is ours */
  }

out:
  if (c.out) dnt_output_abort(&c.output);
  if (c.loop) {
    dnt_http_server_close(c.http);
    dnt_session_close(&c.s);
    while (dnt_loop_run(c.loop, UV_RUN_NOWAIT, __func__)) {}
    uv_loop_close(c.loop);
  }
  ntr_parser_free(c.parser);
  dnt_counters_decoder_free(c.decoder);
  dnt_counter_table_release(&c.table);
  dnt_counters_wire_release(&wire);
  dnt_counter_specs_release(&o.specs);
  free(out_path);
  return rc;
}

int cmd_counters(int argc, char **argv) {
  if (argc < 2) {
    dnt_options_usage(stderr, &usage_counters);
    return DNT_EXIT_USAGE;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
    dnt_options_usage(stdout, &usage_counters);
    return 0;
  }
  if (strcmp(sub, "collect") == 0) return run(MODE_COLLECT, argc - 1, argv + 1);
  if (strcmp(sub, "monitor") == 0) return run(MODE_MONITOR, argc - 1, argv + 1);
  if (strcmp(sub, "serve") == 0) return run(MODE_SERVE, argc - 1, argv + 1);
  if (strcmp(sub, "list") == 0) {
    if (argc > 2 && (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0)) {
      printf("usage: dntrace counters list\n\nPrint the well-known counters (System.Runtime's meters and EventCounters, "
             "ASP.NET Core's...) with their kinds, units and descriptions\n");
      return 0;
    }
    return dnt_counters_list();
  }
  if (strcmp(sub, "ps") == 0) return cmd_ps(argc - 1, argv + 1);
  static const char *const subs[] = {"collect", "monitor", "serve", "list", "ps"};
  const char *near = dnt_nearest(sub, subs, sizeof subs / sizeof subs[0]);
  if (near)
    dnt_error("'%s' is not a counters command; did you mean '%s'?", sub, near);
  else
    dnt_error("'%s' is not a counters command (collect, monitor, serve, list, ps)", sub);
  return DNT_EXIT_USAGE;
}
