/* dntrace counters: live counter values of a .NET process, as dotnet-counters collect/monitor.
 *
 * One EventPipe session (EventCounters providers plus System.Diagnostics.Metrics, no rundown)
 * read as it streams: the nettrace parser hands events to the counters decoder
 * (counters-session.c), which hands values to the writer of the chosen output. Stopping
 * (Ctrl+C, --duration) sends StopTracing on a second connection and reads to the end of the
 * stream, so the output is always complete (the JSON closed). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "builtin.h"
#include "counters-session.h"
#include "dsipc.h"
#include "ntr.h"
#include "target.h"
#include "util.h"

const char *const usage_counters[] = {
    "dntrace counters (collect | monitor) (-p PID | -n NAME) [--counters LIST] [--refresh-interval SEC] [--duration TIME] [--format csv|json] [-o FILE]",
    "Show or record the EventCounters and Meters of a .NET process, as dotnet-counters",
    "    collect                  write every value to a file (CSV or JSON)",
    "    monitor                  print the latest values every interval",
    "    list                     print the well-known System.Runtime counters",
    "    ps                       list the .NET processes (as 'dntrace ps')",
    "    -p, --process-id PID     the process, by pid as seen from here",
    "    -n, --name NAME          the process, by name (an error if several match)",
    "    --diagnostic-port PATH   a runtime's socket, named directly",
    "    --counters LIST          provider or provider[c1,c2], comma-separated; an EventCounters\\",
    "                             prefix asks for the EventSource (default System.Runtime)",
    "    --refresh-interval SEC   seconds between values (default 1)",
    "    --duration TIME          stop after dd:hh:mm:ss, or a number with s, m or h (30s, 5m)",
    "    --maxHistograms N        histograms the runtime tracks (default 10)",
    "    --maxTimeSeries N        time series the runtime tracks (default 1000)",
    "    --format FORMAT          collect: csv (default) or json",
    "    -o, --output FILE        collect: where to write (default counter.csv / counter.json)",
    "    --plain                  monitor: plain text blocks, also on a terminal",
    "    -h, --help               show this help",
    NULL,
};

#define REPLY_TIMEOUT_MS 10000
#define BUFFER_MB 256

/* ---- the latest value of every counter (monitor) ---- */

struct entry {
  char *provider, *name, *unit, *tags;
  int kind;
  double value;
};

struct table {
  struct entry *v;
  size_t n, cap;
  int dirty;
};

static void table_put(struct table *t, const dnt_counter_value *cv) {
  struct entry *e = NULL;
  for (size_t i = 0; i < t->n && !e; i++)
    if (strcmp(t->v[i].provider, cv->provider) == 0 && strcmp(t->v[i].name, cv->name) == 0 &&
        strcmp(t->v[i].tags, cv->tags) == 0)
      e = &t->v[i];
  if (!e) {
    if (t->n == t->cap) {
      t->cap = t->cap ? 2 * t->cap : 32;
      struct entry *grown = realloc(t->v, t->cap * sizeof *grown);
      if (!grown) dnt_die(DNT_EXIT_FAILURE, "out of memory");
      t->v = grown;
    }
    e = &t->v[t->n++];
    e->provider = dnt_xstrdup(cv->provider);
    e->name = dnt_xstrdup(cv->name);
    e->unit = dnt_xstrdup(cv->unit);
    e->tags = dnt_xstrdup(cv->tags);
  }
  e->kind = cv->kind;
  e->value = cv->value;
  t->dirty = 1;
}

static void table_release(struct table *t) {
  for (size_t i = 0; i < t->n; i++) {
    free(t->v[i].provider);
    free(t->v[i].name);
    free(t->v[i].unit);
    free(t->v[i].tags);
  }
  free(t->v);
  memset(t, 0, sizeof *t);
}

/* ---- the session ---- */

enum mode { MODE_COLLECT, MODE_MONITOR };

struct counters {
  uv_loop_t *loop;
  struct dnt_target target;
  enum mode mode;
  int json, tty, plain;
  FILE *out;
  const char *output;
  uint64_t rows;
  int write_failed;
  double refresh_s;
  ntr_parser *parser;
  dnt_counters_decoder *decoder;
  int parse_failed;
  char parse_error[256];
  dsipc_stream *session, *stopper;
  uint64_t session_id;
  int replied, reply_code;
  char reply_msg[320];
  int ended, stopping, abandoned;
  uv_signal_t sigint, sigterm;
  uv_timer_t ticker, stopper_timer;
  struct table table;
  int warned;
};

static void format_time(double t, char out[40]) {
  time_t s = (time_t)t; /* times are after 1970: the cast floors */
  int ms = (int)((t - (double)s) * 1000.0);
  if (ms < 0) ms = 0;
  if (ms > 999) ms = 999;
  struct tm tm;
  gmtime_r(&s, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(out, 40, "%s.%03d", base, ms);
}

/* The shortest of %.15g / %.17g that reads back exactly (145.1, not 145.09999999999999). */
static void print_number(FILE *fp, double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, fp);
}

static const char *counter_type(int kind) { return kind == DNT_COUNTER_SUM ? "Rate" : "Metric"; }

/* CSV cells hold no commas or quotes of ours: a field that has them is quoted. */
static void csv_cell(FILE *fp, const char *s) {
  if (!strpbrk(s, ",\"\n")) {
    fputs(s, fp);
    return;
  }
  fputc('"', fp);
  for (; *s; s++) {
    if (*s == '"') fputc('"', fp);
    fputc(*s, fp);
  }
  fputc('"', fp);
}

static int on_value(void *ud, const dnt_counter_value *v) {
  struct counters *c = ud;
  if (c->mode == MODE_MONITOR) {
    table_put(&c->table, v);
    return 0;
  }
  if (c->write_failed) return 0;
  char ts[40];
  format_time(v->time_s, ts);
  FILE *fp = c->out;
  if (c->json) {
    fprintf(fp, "%s\n    {\"timestamp\": ", c->rows ? "," : "");
    dnt_json_string(fp, ts);
    fputs(", \"provider\": ", fp);
    dnt_json_string(fp, v->provider);
    fputs(", \"name\": ", fp);
    dnt_json_string(fp, v->name);
    fputs(", \"displayName\": ", fp);
    dnt_json_string(fp, v->display_name);
    fputs(", \"unit\": ", fp);
    dnt_json_string(fp, v->unit);
    fputs(", \"tags\": ", fp);
    dnt_json_string(fp, v->tags);
    fprintf(fp, ", \"counterType\": \"%s\", \"value\": ", counter_type(v->kind));
    if (v->value == v->value && v->value - v->value == 0) /* finite */
      print_number(fp, v->value), fputc('}', fp);
    else
      fputs("null}", fp);
  } else {
    /* dotnet-counters' columns; tags as name[k=v;k2=v] */
    fprintf(fp, "%s,", ts);
    csv_cell(fp, v->provider);
    fputc(',', fp);
    size_t n = strlen(v->name) + strlen(v->tags) + 3;
    char *name = dnt_xmalloc(n);
    if (v->tags[0]) {
      snprintf(name, n, "%s[%s]", v->name, v->tags);
      for (char *p = name + strlen(v->name); *p; p++)
        if (*p == ',') *p = ';';
    } else {
      snprintf(name, n, "%s", v->name);
    }
    csv_cell(fp, name);
    free(name);
    fprintf(fp, ",%s,", counter_type(v->kind));
    print_number(fp, v->value);
    fputc('\n', fp);
  }
  c->rows++;
  return 0;
}

static void print_block(struct counters *c) {
  if (!c->table.dirty) return;
  c->table.dirty = 0;
  char ts[40];
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  format_time((double)now.tv_sec + now.tv_nsec / 1e9, ts);
  if (c->tty && !c->plain) printf("\033[H\033[J");
  printf("[%s] process %d (%s)\n", ts, c->target.pid, c->target.name);
  for (size_t i = 0; i < c->table.n; i++) {
    const struct entry *e = &c->table.v[i];
    printf("%s / %s", e->provider, e->name);
    if (e->unit[0]) printf(" (%s%s)", e->unit, e->kind == DNT_COUNTER_SUM ? " / interval" : "");
    if (e->tags[0]) printf(" [%s]", e->tags);
    printf(" %.6g\n", e->value);
  }
  printf("\n");
  fflush(stdout);
}

/* ---- the streams ---- */

static void on_session_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  struct counters *c = ud;
  c->replied = 1;
  c->reply_code = st->code;
  snprintf(c->reply_msg, sizeof c->reply_msg, "%s", st->msg);
  if (st->code == 0 && dsipc_decode_session_id(payload, n, &c->session_id) != 0) {
    c->reply_code = DSIPC_EPROTO;
    snprintf(c->reply_msg, sizeof c->reply_msg, "the runtime's reply has no session id");
  }
}

static void on_session_data(void *ud, const uint8_t *p, size_t n) {
  struct counters *c = ud;
  if (c->parse_failed) return;
  int rc = ntr_parser_feed(c->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    c->parse_failed = 1;
    snprintf(c->parse_error, sizeof c->parse_error, "%s", ntr_parser_errmsg(c->parser));
  }
}

static void close_everything(struct counters *c) {
  uv_close((uv_handle_t *)&c->sigint, NULL);
  uv_close((uv_handle_t *)&c->sigterm, NULL);
  uv_close((uv_handle_t *)&c->ticker, NULL);
  uv_close((uv_handle_t *)&c->stopper_timer, NULL);
  dsipc_stream_close(c->session);
  dsipc_stream_close(c->stopper);
  c->session = c->stopper = NULL;
}

static void on_session_end(void *ud, const dsipc_status *st) {
  struct counters *c = ud;
  (void)st;
  c->ended = 1;
  close_everything(c);
}

static void on_stop_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  (void)ud, (void)payload, (void)n;
  if (st->code) dnt_warning("StopTracing: %s", st->msg);
}

static void on_stop_end(void *ud, const dsipc_status *st) { (void)ud, (void)st; }

static void stop_session(struct counters *c) {
  if (c->stopping || c->ended) return;
  c->stopping = 1;
  dsipc_buf req;
  dsipc_buf_init(&req);
  dsipc_status st;
  st.msg[0] = '\0';
  static const dsipc_stream_cb cb = {on_stop_reply, NULL, on_stop_end};
  if (dsipc_encode_stop_tracing(&req, c->session_id) != 0 ||
      dsipc_stream_open(c->loop, c->target.ep.path, -1, &req, REPLY_TIMEOUT_MS, &cb, c, &c->stopper, &st) != 0) {
    dnt_warning("cannot send StopTracing: %s; closing the session", st.msg);
    c->ended = 1;
    c->abandoned = 1;
    close_everything(c);
  }
  dsipc_buf_release(&req);
}

static void on_signal(uv_signal_t *h, int signum) {
  struct counters *c = h->data;
  (void)signum;
  if (!c->stopping) {
    stop_session(c);
    return;
  }
  c->abandoned = 1;
  c->ended = 1;
  close_everything(c);
}

static void check_decoder_error(struct counters *c) {
  const char *e = dnt_counters_decoder_error(c->decoder);
  if (e[0] && !c->warned) {
    c->warned = 1;
    dnt_warning("%s", e);
  }
}

static void on_tick(uv_timer_t *t) {
  struct counters *c = t->data;
  check_decoder_error(c);
  if (c->mode == MODE_MONITOR) {
    print_block(c);
  } else if (c->out && fflush(c->out) != 0 && !c->write_failed) {
    c->write_failed = 1;
    stop_session(c);
  }
}

static void on_duration(uv_timer_t *t) { stop_session(t->data); }

static int start_session(struct counters *c, int version, const dsipc_session_config *cfg) {
  dsipc_buf req;
  dsipc_buf_init(&req);
  dsipc_status st;
  static const dsipc_stream_cb cb = {on_session_reply, on_session_data, on_session_end};
  int rc = dsipc_encode_collect_tracing(&req, version, cfg);
  if (rc) {
    dsipc_buf_release(&req);
    snprintf(c->reply_msg, sizeof c->reply_msg, "cannot encode the session request: %s", dsipc_strerror(rc));
    return rc;
  }
  c->replied = c->ended = 0;
  rc = dsipc_stream_open(c->loop, c->target.ep.path, -1, &req, REPLY_TIMEOUT_MS, &cb, c, &c->session, &st);
  dsipc_buf_release(&req);
  if (rc) {
    snprintf(c->reply_msg, sizeof c->reply_msg, "%s", st.msg);
    return rc;
  }
  while (!c->replied && uv_run(c->loop, UV_RUN_ONCE)) {}
  if (!c->replied) c->reply_code = DSIPC_ECLOSED;
  if (c->reply_code) {
    dsipc_stream_close(c->session);
    c->session = NULL;
    while (uv_run(c->loop, UV_RUN_NOWAIT)) {}
  }
  return c->reply_code;
}

/* ---- options ---- */


static int parse_positive_int(const char *opt, const char *s, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || end == s || v <= 0 || v > 1000000) {
    dnt_error("%s: '%s' is not a positive number", opt, s);
    return -1;
  }
  *out = (int)v;
  return 0;
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

static int run(enum mode mode, int argc, char **argv) {
  enum { OPT_COUNTERS = 1000, OPT_REFRESH, OPT_DURATION, OPT_FORMAT, OPT_MAXH, OPT_MAXTS, OPT_PLAIN, OPT_PORT };
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
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *cmdname = mode == MODE_COLLECT ? "counters collect" : "counters monitor";
  char shortopts[64], err[512];
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int pid = 0, opt, rc = DNT_EXIT_USAGE, max_hist = 10, max_ts = 1000, plain = 0, json = 0;
  const char *name = NULL, *output = NULL, *port = NULL;
  double refresh = 1.0;
  uint64_t duration_ms = 0;
  char *out_path = NULL;
  struct dnt_counter_specs specs = {0};
  struct dnt_counters_wire wire = {0};
  struct counters c;
  memset(&c, 0, sizeof c);
  c.mode = mode;

  optind = 1;
  while ((opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (opt) {
    case 'p':
      if ((pid = dnt_opt_pid(optarg)) < 0) goto out;
      break;
    case 'n': name = optarg; break;
    case 'o': output = optarg; break;
    case OPT_COUNTERS:
      if (dnt_counter_specs_parse(&specs, optarg, err, sizeof err) < 0) {
        dnt_error("--counters: %s", err);
        goto out;
      }
      break;
    case OPT_REFRESH: {
      char *end;
      refresh = strtod(optarg, &end);
      if (*end || end == optarg || !(refresh >= 0.1) || refresh > 86400) {
        dnt_error("--refresh-interval: '%s' is not a number of seconds (0.1 or more)", optarg);
        goto out;
      }
      break;
    }
    case OPT_DURATION:
      if (!(duration_ms = dnt_parse_duration(optarg))) {
        dnt_error("--duration: '%s' is not dd:hh:mm:ss or a number with s, m or h", optarg);
        goto out;
      }
      break;
    case OPT_FORMAT:
      if (strcasecmp(optarg, "csv") == 0) {
        json = 0;
      } else if (strcasecmp(optarg, "json") == 0) {
        json = 1;
      } else {
        dnt_error("--format: '%s' is not csv or json", optarg);
        goto out;
      }
      break;
    case OPT_MAXH:
      if (parse_positive_int("--maxHistograms", optarg, &max_hist) < 0) goto out;
      break;
    case OPT_MAXTS:
      if (parse_positive_int("--maxTimeSeries", optarg, &max_ts) < 0) goto out;
      break;
    case OPT_PLAIN: plain = 1; break;
    case OPT_PORT: port = optarg; break;
    case 'h': dnt_print_usage(stdout, usage_counters); rc = 0; goto out;
    default: rc = dnt_usage_error(cmdname, opt, optopt, argv); goto out;
    }
  }
  if (optind < argc) {
    dnt_error("unexpected argument '%s'", argv[optind]);
    goto out;
  }
  if ((pid > 0) + (name != NULL) + (port != NULL) != 1) {
    dnt_error("name the process with exactly one of -p PID, -n NAME or --diagnostic-port PATH");
    goto out;
  }
  if (mode == MODE_MONITOR && (output || json)) {
    dnt_error("-o and --format go with 'counters collect'");
    goto out;
  }
  if (specs.n == 0 && dnt_counter_specs_parse(&specs, DNT_COUNTERS_DEFAULT, err, sizeof err) < 0) goto out;
  rc = port ? dnt_target_from_port(port, &c.target) : dnt_target_resolve(pid, name, &c.target);
  if (rc) goto out;
  rc = DNT_EXIT_FAILURE;
  if (dnt_counters_wire_build(&wire, &specs, refresh, max_ts, max_hist) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");

  c.json = json;
  c.plain = plain;
  c.tty = isatty(1);
  c.refresh_s = refresh;
  if (mode == MODE_COLLECT) {
    out_path = output_name(output, json ? ".json" : ".csv");
    c.output = out_path;
    if (!(c.out = fopen(out_path, "w"))) {
      dnt_error("cannot write '%s': %s", out_path, strerror(errno));
      goto out;
    }
  }
  c.loop = uv_default_loop();
  c.decoder = dnt_counters_decoder_new(&specs, wire.session_id[0] ? wire.session_id : NULL, on_value, &c);
  if (!c.decoder || ntr_parser_new(&c.parser, dnt_counters_decoder_callbacks(), c.decoder, NULL) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");

  dsipc_session_config cfg = {.buffer_mb = BUFFER_MB, .format = 1, .request_rundown = 0, .rundown_keyword = 0,
                              .request_stackwalk = 0, .providers = wire.v, .n_providers = wire.n};
  int src = start_session(&c, 2, &cfg);
  if (src == DSIPC_EUNKNOWNCMD) src = start_session(&c, 1, &cfg);
  if (src) {
    dnt_error("process %d refused the session: %s", c.target.pid, c.reply_msg);
    if (c.out) {
      fclose(c.out);
      c.out = NULL;
      unlink(out_path);
    }
    goto out;
  }

  if (mode == MODE_COLLECT) {
    if (json) {
      char ts[40];
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      format_time((double)now.tv_sec + now.tv_nsec / 1e9, ts);
      fputs("{\"TargetProcess\": ", c.out);
      dnt_json_string(c.out, c.target.name);
      fputs(", \"StartTime\": ", c.out);
      dnt_json_string(c.out, ts);
      fputs(", \"Events\": [", c.out);
    } else {
      fputs("Timestamp,Provider,Counter Name,Counter Type,Mean/Increment\n", c.out);
    }
    printf("Starting a counter session. Press Ctrl+C to stop.\nWriting to %s\n", out_path);
  } else {
    printf("Press Ctrl+C to stop. Values appear every %g s.\n", refresh);
  }
  fflush(stdout);

  uv_signal_init(c.loop, &c.sigint);
  uv_signal_init(c.loop, &c.sigterm);
  c.sigint.data = c.sigterm.data = &c;
  uv_signal_start(&c.sigint, on_signal, SIGINT);
  uv_signal_start(&c.sigterm, on_signal, SIGTERM);
  uv_timer_init(c.loop, &c.ticker);
  c.ticker.data = &c;
  uint64_t tick = (uint64_t)(refresh * 1000);
  uv_timer_start(&c.ticker, on_tick, tick, tick);
  uv_timer_init(c.loop, &c.stopper_timer);
  c.stopper_timer.data = &c;
  if (duration_ms) uv_timer_start(&c.stopper_timer, on_duration, duration_ms, 0);
  uv_run(c.loop, UV_RUN_DEFAULT);

  check_decoder_error(&c);
  if (c.parse_failed) dnt_warning("the stream does not parse as nettrace: %s", c.parse_error);
  rc = 0;
  if (mode == MODE_MONITOR) {
    print_block(&c);
  } else {
    if (json) fputs("\n]}\n", c.out);
    int bad = ferror(c.out) | c.write_failed;
    if (fclose(c.out) != 0) bad = 1;
    c.out = NULL;
    if (bad) {
      dnt_error("cannot write '%s'", out_path);
      rc = DNT_EXIT_FAILURE;
    } else {
      printf("File saved to %s (%llu values)\n", out_path, (unsigned long long)c.rows);
    }
  }
  if (!c.stopping && !c.abandoned) printf("The target ended the session (it exited?)\n");

out:
  if (c.out) fclose(c.out);
  if (c.loop) {
    while (uv_run(c.loop, UV_RUN_NOWAIT)) {}
    uv_loop_close(c.loop);
  }
  ntr_parser_free(c.parser);
  dnt_counters_decoder_free(c.decoder);
  table_release(&c.table);
  dnt_counters_wire_release(&wire);
  dnt_counter_specs_release(&specs);
  free(out_path);
  return rc;
}

/* ---- list ---- */

/* The System.Runtime counters a user sees first: Meter instruments (.NET 9+) and the older
 * EventCounters, with their units. Our own summary of the runtime's documentation. */
static const struct {
  const char *kind, *name, *unit, *what;
} known[] = {
    {"Meter", "dotnet.process.cpu.time", "s", "CPU time used, by cpu.mode (user, system)"},
    {"Meter", "dotnet.process.cpu.count", "{cpu}", "processors available to the process"},
    {"Meter", "dotnet.process.memory.working_set", "By", "physical memory mapped to the process"},
    {"Meter", "dotnet.gc.collections", "{collection}", "garbage collections, by gc.heap.generation"},
    {"Meter", "dotnet.gc.heap.total_allocated", "By", "bytes allocated on the managed heap"},
    {"Meter", "dotnet.gc.last_collection.memory.committed_size", "By", "memory committed by the GC"},
    {"Meter", "dotnet.gc.last_collection.heap.size", "By", "heap size after the last GC, by generation"},
    {"Meter", "dotnet.gc.last_collection.heap.fragmentation.size", "By", "heap fragmentation, by generation"},
    {"Meter", "dotnet.gc.pause.time", "s", "time paused in GC"},
    {"Meter", "dotnet.jit.compiled_il.size", "By", "IL bytes compiled by the JIT"},
    {"Meter", "dotnet.jit.compiled_methods", "{method}", "methods compiled by the JIT"},
    {"Meter", "dotnet.jit.compilation.time", "s", "time spent in the JIT"},
    {"Meter", "dotnet.monitor.lock_contentions", "{contention}", "contended Monitor lock acquisitions"},
    {"Meter", "dotnet.thread_pool.thread.count", "{thread}", "thread-pool threads"},
    {"Meter", "dotnet.thread_pool.work_item.count", "{work_item}", "work items completed by the thread pool"},
    {"Meter", "dotnet.thread_pool.queue.length", "{work_item}", "work items waiting in the thread pool"},
    {"Meter", "dotnet.timer.count", "{timer}", "active timers"},
    {"Meter", "dotnet.assembly.count", "{assembly}", "assemblies loaded"},
    {"Meter", "dotnet.exceptions", "{exception}", "exceptions thrown, by error.type"},
    {"EventCounter", "cpu-usage", "%", "CPU usage"},
    {"EventCounter", "working-set", "MB", "working set"},
    {"EventCounter", "gc-heap-size", "MB", "GC heap size"},
    {"EventCounter", "gen-0-gc-count", "", "gen 0 collections per interval"},
    {"EventCounter", "gen-1-gc-count", "", "gen 1 collections per interval"},
    {"EventCounter", "gen-2-gc-count", "", "gen 2 collections per interval"},
    {"EventCounter", "threadpool-thread-count", "", "thread-pool threads"},
    {"EventCounter", "monitor-lock-contention-count", "", "lock contentions per interval"},
    {"EventCounter", "threadpool-queue-length", "", "thread-pool queue length"},
    {"EventCounter", "threadpool-completed-items-count", "", "work items completed per interval"},
    {"EventCounter", "alloc-rate", "B", "bytes allocated per interval"},
    {"EventCounter", "active-timer-count", "", "active timers"},
    {"EventCounter", "gc-fragmentation", "%", "GC heap fragmentation"},
    {"EventCounter", "gc-committed", "MB", "memory committed by the GC"},
    {"EventCounter", "exception-count", "", "exceptions per interval"},
    {"EventCounter", "time-in-gc", "%", "time in GC since the last GC"},
    {"EventCounter", "gen-0-size", "B", "gen 0 heap size"},
    {"EventCounter", "gen-1-size", "B", "gen 1 heap size"},
    {"EventCounter", "gen-2-size", "B", "gen 2 heap size"},
    {"EventCounter", "loh-size", "B", "large object heap size"},
    {"EventCounter", "poh-size", "B", "pinned object heap size"},
    {"EventCounter", "assembly-count", "", "assemblies loaded"},
    {"EventCounter", "il-bytes-jitted", "B", "IL bytes compiled by the JIT"},
    {"EventCounter", "methods-jitted-count", "", "methods compiled by the JIT"},
    {"EventCounter", "time-in-jit", "ms", "time in the JIT per interval"},
};

static int list(void) {
  printf("System.Runtime (a Meter on .NET 9 and later, EventCounters before and still published)\n");
  printf("  %-13s %-50s %-13s %s\n", "Kind", "Name", "Unit", "Description");
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    printf("  %-13s %-50s %-13s %s\n", known[i].kind, known[i].name, known[i].unit[0] ? known[i].unit : "-",
           known[i].what);
  return 0;
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
  if (strcmp(sub, "list") == 0) return list();
  if (strcmp(sub, "ps") == 0) return cmd_ps(argc - 1, argv + 1);
  dnt_error("'%s' is not a counters command (collect, monitor, list, ps)", sub);
  return DNT_EXIT_USAGE;
}
