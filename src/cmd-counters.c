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
#include "counters-prom.h"
#include "counters-screen.h"
#include "counters-session.h"
#include "counters-table.h"
#include "counters-view.h"
#include "http-serve.h"
#include "ntr.h"
#include "session.h"
#include "util.h"

const char *const usage_counters[] = {
    "dntrace counters (collect | monitor | serve) (-p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--counters LIST] [--refresh-interval SEC] [--duration TIME] [--format csv|json|prometheus] [-o FILE] [--listen ADDR]",
    "Show, record or serve the EventCounters and Meters of a .NET process, as dotnet-counters",
    "    collect                  write every value to a file (CSV, JSON), or the latest ones (prometheus)",
    "    monitor                  a live table of the latest values (plain lines when not a terminal)",
    "    serve                    answer GET /metrics with the latest values (Prometheus text format)",
    "    list                     print the well-known counters with their units",
    "    ps                       list the .NET processes (as 'dntrace ps')",
    "    -p, --process-id PID     the process, by pid as seen from here",
    "    -n, --name NAME          the process, by name (serve: also the next process of that name)",
    "    --diagnostic-port PATH   a runtime's socket (PATH[,connect]), or PATH,listen to wait for",
    "                             a runtime started with DOTNET_DiagnosticPorts=PATH",
    "    -- CMD [ARGS...]         start CMD, watch it from its start, and exit with its exit code",
    "    --resume-runtime BOOL    with -- or listen: resume the runtime once the session runs",
    "    --counters LIST          provider or provider[c1,c2], comma-separated; an EventCounters\\",
    "                             prefix asks for the EventSource (default System.Runtime)",
    "    --refresh-interval SEC   seconds between values (default 1)",
    "    --duration TIME          stop after dd:hh:mm:ss, or a number with s, m or h (30s, 5m)",
    "    --maxHistograms N        histograms the runtime tracks (default 10)",
    "    --maxTimeSeries N        time series the runtime tracks (default 1000)",
    "    --format FORMAT          collect: csv (default), json or prometheus",
    "    -o, --output FILE        collect: where to write (default counter.csv, .json or .prom)",
    "    --listen ADDR            serve: HOST:PORT to listen on (default 127.0.0.1:9400)",
    "    --plain                  monitor: plain text blocks, also on a terminal",
    "    -h, --help               show this help",
    NULL,
};

#define BUFFER_MB 256

enum mode { MODE_COLLECT, MODE_MONITOR, MODE_SERVE };
enum format { FORMAT_CSV, FORMAT_JSON, FORMAT_PROMETHEUS };
#define DEFAULT_LISTEN "127.0.0.1:9400"
#define RECONNECT_MS 1000

struct options {
  struct dnt_session_target target;
  const char *output;
  enum format format;
  int format_given, max_hist, max_ts, plain, resume;
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
  FILE *out;
  const char *out_path;
  uint64_t rows;
  int write_failed;
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
    dnt_monitor_render(fp, &c->table, c->refresh_s, status_text(c), c->screen.width, c->screen.height, 1);
  } else {
    char ts[40];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    dnt_counter_time((double)now.tv_sec + now.tv_nsec / 1e9, ts);
    fprintf(fp, "[%s] process %d (%s)\n", ts, c->s.target.pid, c->s.target.name);
    dnt_monitor_render(fp, &c->table, c->refresh_s, status_text(c), 100, 0, 0);
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

static int begin(struct counters *c);

/* serve -n NAME: the next process of that name, once there is exactly one. */
static void on_reconnect(uv_timer_t *t) {
  struct counters *c = t->data;
  int pid = dnt_target_find_by_name(c->opts->target.name);
  if (!pid) return;
  uv_timer_stop(&c->reconnect);
  dnt_session_close(&c->s);
  struct dnt_session_target want = {.pid = pid};
  if (dnt_session_open(&c->s, c->loop, &want) != 0 || begin(c) != 0) {
    uv_timer_start(&c->reconnect, on_reconnect, RECONNECT_MS, RECONNECT_MS); /* try again */
    return;
  }
  printf("Following process %d (%s)\n", c->s.target.pid, c->s.target.name);
  fflush(stdout);
}

static void on_end(void *ud) {
  struct counters *c = ud;
  c->live = 0;
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
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", c->out_path);
  FILE *fp = fopen(tmp, "w");
  if (!fp) return -1;
  long n = dnt_counters_prom_write(fp, &c->table);
  int bad = n < 0 || ferror(fp);
  if (fclose(fp) != 0) bad = 1;
  if (bad || rename(tmp, c->out_path) != 0) {
    unlink(tmp);
    return -1;
  }
  c->rows = (uint64_t)n;
  return 0;
}

static void on_tick(uv_timer_t *t) {
  struct counters *c = t->data;
  check_decoder_error(c);
  if (c->mode == MODE_MONITOR) {
    if (c->fullscreen || c->table.generation != c->drawn) draw(c);
  } else if (c->mode == MODE_COLLECT && c->format == FORMAT_PROMETHEUS) {
    if (c->table.generation != c->drawn && !c->write_failed) {
      c->drawn = c->table.generation;
      if (write_prom_file(c) != 0) c->write_failed = 1, stop(c);
    }
  } else if (c->out && fflush(c->out) != 0 && !c->write_failed) {
    c->write_failed = 1;
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
      fprintf(fp, "no session: waiting for a process named '%s'\n",
              c->opts->target.name ? c->opts->target.name : "?");
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

static int parse_bool(const char *s) {
  if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0) return 1;
  if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0) return 0;
  return -1;
}

/* counter.csv / counter.json by default; the extension is added when missing. */
static char *output_name(const char *o, const char *ext) {
  if (!o) o = "counter";
  size_t n = strlen(o), e = strlen(ext);
  int has = n > e && strcasecmp(o + n - e, ext) == 0;
  char *out = dnt_xmalloc(n + e + 1);
  snprintf(out, n + e + 1, "%s%s", o, has ? "" : ext);
  return out;
}


/* Returns 0, or an exit code (the error printed; -1 for --help, which exits 0). */
static int parse_options(enum mode mode, int argc, char **argv, struct options *o) {
  enum { OPT_COUNTERS = 1000, OPT_REFRESH, OPT_DURATION, OPT_FORMAT, OPT_MAXH, OPT_MAXTS, OPT_PLAIN, OPT_PORT,
         OPT_RESUME, OPT_LISTEN };
  static const struct option opts[] = {
      {"process-id", required_argument, NULL, 'p'},
      {"name", required_argument, NULL, 'n'},
      {"output", required_argument, NULL, 'o'},
      {"counters", required_argument, NULL, OPT_COUNTERS},
      {"refresh-interval", required_argument, NULL, OPT_REFRESH},
      {"duration", required_argument, NULL, OPT_DURATION},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"maxHistograms", required_argument, NULL, OPT_MAXH},
      {"maxTimeSeries", required_argument, NULL, OPT_MAXTS},
      {"plain", no_argument, NULL, OPT_PLAIN},
      {"diagnostic-port", required_argument, NULL, OPT_PORT},
      {"dport", required_argument, NULL, OPT_PORT},
      {"resume-runtime", required_argument, NULL, OPT_RESUME},
      {"listen", required_argument, NULL, OPT_LISTEN},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *cmdname = mode == MODE_COLLECT   ? "counters collect"
                        : mode == MODE_MONITOR ? "counters monitor"
                                               : "counters serve";
  char shortopts[64], err[512];
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int opt;
  o->max_hist = 10;
  o->max_ts = 1000;
  o->refresh = 1.0;
  o->resume = 1;
  optind = 1;
  while ((opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (opt) {
    case 'p':
      if ((o->target.pid = dnt_opt_pid(optarg)) < 0) return DNT_EXIT_USAGE;
      break;
    case 'n': o->target.name = optarg; break;
    case 'o': o->output = optarg; break;
    case OPT_COUNTERS:
      if (dnt_counter_specs_parse(&o->specs, optarg, err, sizeof err) < 0)
        return dnt_error("--counters: %s", err), DNT_EXIT_USAGE;
      break;
    case OPT_REFRESH: {
      char *end;
      o->refresh = strtod(optarg, &end);
      if (*end || end == optarg || !(o->refresh >= 0.1) || o->refresh > 86400)
        return dnt_error("--refresh-interval: '%s' is not a number of seconds (0.1 or more)", optarg), DNT_EXIT_USAGE;
      break;
    }
    case OPT_DURATION:
      if (!(o->duration_ms = dnt_parse_duration(optarg)))
        return dnt_error("--duration: '%s' is not dd:hh:mm:ss or a number with s, m or h", optarg), DNT_EXIT_USAGE;
      break;
    case OPT_FORMAT:
      o->format_given = 1;
      if (strcasecmp(optarg, "csv") == 0)
        o->format = FORMAT_CSV;
      else if (strcasecmp(optarg, "json") == 0)
        o->format = FORMAT_JSON;
      else if (strcasecmp(optarg, "prometheus") == 0)
        o->format = FORMAT_PROMETHEUS;
      else
        return dnt_error("--format: '%s' is not csv, json or prometheus", optarg), DNT_EXIT_USAGE;
      break;
    case OPT_MAXH:
      if (parse_positive_int("--maxHistograms", optarg, &o->max_hist) < 0) return DNT_EXIT_USAGE;
      break;
    case OPT_MAXTS:
      if (parse_positive_int("--maxTimeSeries", optarg, &o->max_ts) < 0) return DNT_EXIT_USAGE;
      break;
    case OPT_PLAIN: o->plain = 1; break;
    case OPT_LISTEN: o->listen = optarg; break;
    case OPT_PORT: o->target.port = optarg; break;
    case OPT_RESUME:
      if ((o->resume = parse_bool(optarg)) < 0)
        return dnt_error("--resume-runtime: '%s' is not true or false", optarg), DNT_EXIT_USAGE;
      break;
    case 'h': dnt_print_usage(stdout, usage_counters); return -1;
    default: return dnt_usage_error(cmdname, opt, optopt, argv);
    }
  }
  if (optind < argc && strcmp(argv[optind - 1], "--") == 0)
    o->target.child_argv = argv + optind;
  else if (optind < argc)
    return dnt_error("unexpected argument '%s' (a command to start goes after '--')", argv[optind]), DNT_EXIT_USAGE;
  const struct dnt_session_target *t = &o->target;
  if ((t->pid > 0) + (t->name != NULL) + (t->port != NULL) + (t->child_argv != NULL) != 1)
    return dnt_error("name the process with exactly one of -p PID, -n NAME, --diagnostic-port PATH or -- CMD"),
           DNT_EXIT_USAGE;
  if (mode != MODE_COLLECT && (o->output || o->format_given))
    return dnt_error("-o and --format go with 'counters collect'"), DNT_EXIT_USAGE;
  if (mode != MODE_MONITOR && o->plain) return dnt_error("--plain goes with 'counters monitor'"), DNT_EXIT_USAGE;
  if (mode != MODE_SERVE && o->listen) return dnt_error("--listen goes with 'counters serve'"), DNT_EXIT_USAGE;
  if (!o->listen) o->listen = DEFAULT_LISTEN;
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

/* Starts the session on the opened target, with a fresh parser and decoder (a new process is a
 * new stream). 0, or an exit code with the error printed. */
static int begin(struct counters *c) {
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
  static const dnt_session_cb cb = {on_data, on_end};
  if (dnt_session_start(&c->s, 2, &cfg, &cb, c) != 0) {
    if (dnt_session_interrupted())
      dnt_error("interrupted before a runtime connected");
    else
      dnt_error("process %d refused the session: %s", c->s.target.pid, c->s.reply_msg);
    return DNT_EXIT_FAILURE;
  }
  if (c->opts->resume) dnt_session_resume(&c->s);
  c->live = 1;
  return 0;
}

static const char *default_ext(enum format f) {
  return f == FORMAT_JSON ? ".json" : f == FORMAT_PROMETHEUS ? ".prom" : ".csv";
}

/* Opens what collect writes to, and its first bytes. 0 or -1 (the error printed). */
static int open_collect_output(struct counters *c) {
  if (c->format == FORMAT_PROMETHEUS) return 0; /* written whole at each interval */
  if (!(c->out = fopen(c->out_path, "w"))) return dnt_error("cannot write '%s': %s", c->out_path, strerror(errno));
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

/* The end of collect: the file closed (JSON completed) and checked. 0 or an exit code. */
static int finish_collect_output(struct counters *c) {
  int bad = c->write_failed;
  if (c->format == FORMAT_PROMETHEUS) {
    if (!bad && write_prom_file(c) != 0) bad = 1;
  } else {
    if (c->format == FORMAT_JSON) fputs("\n]}\n", c->out);
    bad |= ferror(c->out);
    if (fclose(c->out) != 0) bad = 1;
    c->out = NULL;
  }
  if (bad) return dnt_error("cannot write '%s'", c->out_path), DNT_EXIT_FAILURE;
  printf("File saved to %s (%llu %s)\n", c->out_path, (unsigned long long)c->rows,
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
  c.loop = uv_default_loop();
  rc = dnt_session_open(&c.s, c.loop, &o.target);
  if (rc) goto out;
  rc = DNT_EXIT_FAILURE;
  if (dnt_counters_wire_build(&wire, &o.specs, o.refresh, o.max_ts, o.max_hist) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (mode == MODE_COLLECT) {
    c.out_path = out_path = output_name(o.output, default_ext(o.format));
    if (open_collect_output(&c) != 0) goto out;
  }
  if (mode == MODE_SERVE && dnt_http_server_start(c.loop, o.listen, on_http, &c, &c.http, err, sizeof err) != 0) {
    dnt_error("%s", err);
    goto out;
  }
  if (begin(&c) != 0) {
    if (c.out) {
      fclose(c.out);
      c.out = NULL;
      unlink(out_path); /* nothing was written: leave no empty file behind */
    }
    goto out;
  }

  if (mode == MODE_COLLECT) {
    printf("Starting a counter session. Press Ctrl+C to stop.\nWriting to %s\n", out_path);
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
  uv_run(c.loop, UV_RUN_DEFAULT);

  check_decoder_error(&c);
  if (c.parse_failed) dnt_warning("the stream does not parse as nettrace: %s", c.parse_error);
  rc = 0;
  if (mode == MODE_MONITOR) {
    if (!o.plain && isatty(1)) /* the last frame, on the normal screen this time */
      dnt_monitor_render(stdout, &c.table, c.refresh_s, status_text(&c), 100, 0, 0);
    else if (c.table.generation != c.drawn)
      draw(&c);
  } else if (mode == MODE_COLLECT) {
    rc = finish_collect_output(&c);
  }
  if (!c.quitting && !c.s.abandoned) printf("The target ended the session (it exited?)\n");
  if (c.s.child_started) {
    int child_rc = dnt_session_wait_child(&c.s);
    if (rc == 0) rc = child_rc; /* as collect: the command's exit code is ours */
  }

out:
  if (c.out) fclose(c.out);
  if (c.loop) {
    dnt_http_server_close(c.http);
    dnt_session_close(&c.s);
    while (uv_run(c.loop, UV_RUN_NOWAIT)) {}
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
    dnt_print_usage(stderr, usage_counters);
    return DNT_EXIT_USAGE;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
    dnt_print_usage(stdout, usage_counters);
    return 0;
  }
  if (strcmp(sub, "collect") == 0) return run(MODE_COLLECT, argc - 1, argv + 1);
  if (strcmp(sub, "monitor") == 0) return run(MODE_MONITOR, argc - 1, argv + 1);
  if (strcmp(sub, "serve") == 0) return run(MODE_SERVE, argc - 1, argv + 1);
  if (strcmp(sub, "list") == 0) return dnt_counters_list();
  if (strcmp(sub, "ps") == 0) return cmd_ps(argc - 1, argv + 1);
  dnt_error("'%s' is not a counters command (collect, monitor, serve, list, ps)", sub);
  return DNT_EXIT_USAGE;
}
