/* dntrace perf: what a .NET process runs on the CPU, native and kernel frames included, with
 * its JIT-compiled frames named.
 *
 * Three things run side by side: `perf record -e cpu-clock -g -k CLOCK_MONOTONIC` on the target
 * (a child under libuv, argv only), the runtime's perf map turned on through the diagnostic IPC
 * (and off again afterwards if it was off), and an EventPipe session with the runtime's method
 * load events and rundown, whose exact code ranges name JIT and ReadyToRun code. After the stop,
 * `perf script` is read as a stream into the profile that `report` and `convert` use. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "builtin.h"
#include "dsipc.h"
#include "perf-profile.h"
#include "perf-record.h"
#include "profile.h"
#include "session.h"
#include "util.h"

const char *const usage_perf[] = {
    "dntrace perf (-p PID | -n NAME) [--duration TIME] [-F HZ] [-o BASE] [--format FORMAT] [--top N] [--threads]",
    "Record what a .NET process runs on the CPU with Linux perf, JIT-compiled frames named",
    "    -p, --process-id PID     the process, by pid as seen from here",
    "    -n, --name NAME          the process, by name (an error if several match)",
    "    --duration TIME          stop after dd:hh:mm:ss, or a number with s, m or h (default: Ctrl+C)",
    "    -F, --frequency HZ       samples per second and CPU (default 999)",
    "    -o, --output BASE        BASE.perf.data, BASE.nettrace (method names) and conversions",
    "                             (default <app>_<yyyyMMdd>_<HHmmss>)",
    "    --format FORMAT          also write folded, speedscope, chromium or flamegraph",
    "    --top N                  functions in the report (default 10)",
    "    --threads                the report per thread too",
    "    -h, --help               show this help",
    NULL,
};

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define METHOD_KEYWORDS 0x18 /* Loader | Jit: MethodLoadVerbose, ModuleLoad */

struct perf_run {
  uv_loop_t *loop;
  dnt_session s;
  FILE *trace; /* BASE.nettrace: the method events */
  int trace_failed;
  struct dnt_perf_record perf;
  uv_signal_t sigint, sigterm;
  uv_timer_t duration;
  int handles_open, stopping;
};

/* ---- the two recorders ---- */

static void close_handles(struct perf_run *r) {
  if (!r->handles_open || r->perf.running || !r->s.ended) return; /* both must be over */
  r->handles_open = 0;
  uv_close((uv_handle_t *)&r->sigint, NULL);
  uv_close((uv_handle_t *)&r->sigterm, NULL);
  uv_close((uv_handle_t *)&r->duration, NULL);
}

static void stop_all(struct perf_run *r) {
  if (r->stopping) return;
  r->stopping = 1;
  dnt_perf_record_stop(&r->perf); /* perf writes its file and exits */
  dnt_session_stop(&r->s);
  close_handles(r);
}

static void on_perf_exit(void *ud) {
  struct perf_run *r = ud;
  stop_all(r); /* perf ended by itself (the target exited, an error): the session goes too */
  close_handles(r);
}

static void on_trace_data(void *ud, const uint8_t *p, size_t n) {
  struct perf_run *r = ud;
  if (!r->trace_failed && fwrite(p, 1, n, r->trace) != n) r->trace_failed = 1;
}

static void on_trace_end(void *ud) {
  struct perf_run *r = ud;
  stop_all(r); /* the target ended the session: perf has nothing left to watch */
  close_handles(r);
}

static void on_signal(uv_signal_t *h, int sig) {
  struct perf_run *r = h->data;
  (void)sig;
  if (!r->stopping) {
    printf("Stopping: perf writes its file, the runtime its method rundown. Ctrl+C again abandons the rundown.\n");
    fflush(stdout);
    stop_all(r);
    return;
  }
  dnt_session_abandon(&r->s);
  close_handles(r);
}

static void on_duration(uv_timer_t *t) { stop_all(t->data); }

static char *default_base(const char *app) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &tm);
  size_t n = strlen(app) + strlen(stamp) + 2;
  char *out = dnt_xmalloc(n);
  snprintf(out, n, "%s_%s", app, stamp);
  return out;
}

static char *with_ext(const char *base, const char *ext) {
  size_t n = strlen(base) + strlen(ext) + 1;
  char *out = dnt_xmalloc(n);
  snprintf(out, n, "%s%s", base, ext);
  return out;
}

/* ---- the command ---- */

int cmd_perf(int argc, char **argv) {
  enum { OPT_DURATION = 1000, OPT_FORMAT, OPT_TOP, OPT_THREADS };
  static const struct option opts[] = {
      {"process-id", required_argument, NULL, 'p'},
      {"name", required_argument, NULL, 'n'},
      {"duration", required_argument, NULL, OPT_DURATION},
      {"frequency", required_argument, NULL, 'F'},
      {"output", required_argument, NULL, 'o'},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"top", required_argument, NULL, OPT_TOP},
      {"threads", no_argument, NULL, OPT_THREADS},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  char shortopts[64];
  struct dnt_perfmap_run pm = {0};
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int pid = 0, opt, rc = DNT_EXIT_USAGE, hz = 999, threads = 0;
  long top = 10;
  uint64_t duration_ms = 0;
  const char *name = NULL, *output = NULL, *format = NULL;
  char *base = NULL, *data = NULL, *trace = NULL, *map = NULL;
  struct dnt_symtab perfmap = {0};
  struct dnt_profile *prof = NULL;
  dnt_perf_reader *reader = NULL;
  struct perf_run r;
  memset(&r, 0, sizeof r);

  optind = 1;
  while ((opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (opt) {
    case 'p':
      if ((pid = dnt_opt_pid(optarg)) < 0) goto out;
      break;
    case 'n': name = optarg; break;
    case 'o': output = optarg; break;
    case 'F': {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (*end || v < 1 || v > 100000) {
        dnt_error("-F: '%s' is not a frequency in Hz (1 to 100000)", optarg);
        goto out;
      }
      hz = (int)v;
      break;
    }
    case OPT_DURATION:
      if (!(duration_ms = dnt_parse_duration(optarg))) {
        dnt_error("--duration: '%s' is not dd:hh:mm:ss or a number with s, m or h", optarg);
        goto out;
      }
      break;
    case OPT_FORMAT:
      if (dnt_convert_check_format(optarg) != 0) goto out;
      format = optarg;
      break;
    case OPT_TOP:
      if (dnt_parse_count("--top", optarg, 100000, &top) != 0) goto out;
      break;
    case OPT_THREADS: threads = 1; break;
    case 'h': dnt_print_usage(stdout, usage_perf); rc = 0; goto out;
    default: rc = dnt_usage_error("perf", opt, optopt, argv); goto out;
    }
  }
  if (optind < argc) {
    dnt_error("unexpected argument '%s'", argv[optind]);
    goto out;
  }
  if ((pid > 0) + (name != NULL) != 1) {
    dnt_error("name the process with exactly one of -p PID or -n NAME");
    goto out;
  }
  rc = DNT_EXIT_FAILURE;
  if (dnt_perf_check() < 0) goto out;
  r.loop = uv_default_loop();
  struct dnt_session_target want = {.pid = pid, .name = name};
  if ((rc = dnt_session_open(&r.s, r.loop, &want)) != 0) goto out;
  rc = DNT_EXIT_FAILURE;
  base = output ? dnt_xstrdup(output) : default_base(r.s.target.name);
  data = with_ext(base, ".perf.data");
  trace = with_ext(base, ".nettrace");
  map = with_ext(base, ".perf.map");
  dnt_perfmap_begin(&pm, &r.s); /* names for JIT code the method events do not cover */

  /* the method events, as an EventPipe session of its own */
  if (!(r.trace = fopen(trace, "wb"))) {
    dnt_error("cannot write '%s': %s", trace, strerror(errno));
    goto disable;
  }
  dsipc_provider runtime = {.name = RUNTIME_PROVIDER, .keywords = METHOD_KEYWORDS, .level = 5, .args = NULL};
  dsipc_session_config cfg = {.buffer_mb = 64, .format = 1, .request_rundown = 1,
                              .rundown_keyword = DSIPC_DEFAULT_RUNDOWN_KEYWORD, .request_stackwalk = 0,
                              .providers = &runtime, .n_providers = 1};
  static const dnt_session_cb cb = {on_trace_data, on_trace_end};
  if (dnt_session_start(&r.s, 2, &cfg, &cb, &r) != 0) {
    dnt_error("process %d refused the session: %s", r.s.target.pid, r.s.reply_msg);
    goto disable;
  }
  if (dnt_perf_record_start(&r.perf, r.loop, r.s.target.pid, hz, 0, data, on_perf_exit, &r) != 0) {
    dnt_session_abandon(&r.s);
    goto disable;
  }
  uv_signal_init(r.loop, &r.sigint);
  uv_signal_init(r.loop, &r.sigterm);
  r.sigint.data = r.sigterm.data = &r;
  uv_signal_start(&r.sigint, on_signal, SIGINT);
  uv_signal_start(&r.sigterm, on_signal, SIGTERM);
  uv_timer_init(r.loop, &r.duration);
  r.duration.data = &r;
  if (duration_ms) uv_timer_start(&r.duration, on_duration, duration_ms, 0);
  r.handles_open = 1;
  printf("Recording process %d (%s) with perf at %d Hz%s%s\n", r.s.target.pid, r.s.target.name, hz,
         duration_ms ? "" : ". Press Ctrl+C to stop", pm.we_enabled ? " (its perf map turned on for the run)" : "");
  fflush(stdout);
  uv_run(r.loop, UV_RUN_DEFAULT);

  if (fclose(r.trace) != 0) r.trace_failed = 1;
  r.trace = NULL;
  if (r.trace_failed) dnt_warning("cannot write '%s': managed frames may stay unnamed", trace);
  dnt_perfmap_end(&pm, &r.s, map);
  if (!dnt_perf_record_ok(&r.perf, data)) goto out;

  prof = dnt_profile_new();
  if (!prof) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (format && strcasecmp(format, "chromium") == 0) dnt_profile_keep_timeline(prof);
  if (!(reader = dnt_perf_load(prof, data, trace, map, 1000.0 / hz, &perfmap, NULL, NULL))) goto out;
  uint64_t used;
  struct dnt_perf_script_stats ps;
  dnt_perf_reader_stats(reader, &ps, &used);
  if (used == 0) {
    dnt_error("perf recorded no samples of process %d (was it idle, or gone?)", r.s.target.pid);
    goto out;
  }
  printf("\n%llu samples on %zu threads, %.2f ms each: time on a CPU (perf cpu-clock)\n\n",
         (unsigned long long)used, dnt_profile_nthreads(prof), 1000.0 / hz);
  dnt_report_tables(prof, (size_t)top, 0, threads);
  printf("\nWrote %s, %s and %s\n", data, trace, map);
  rc = 0;
  if (format) {
    char *conv = with_ext(base, dnt_convert_extension(format));
    fflush(stdout);
    rc = dnt_convert_profile(prof, format, base, conv);
    free(conv);
  }
  goto out;

disable:
  dnt_perfmap_end(&pm, &r.s, NULL); /* leave the target as it was found */
out:
  if (r.trace) fclose(r.trace);
  if (r.loop) {
    dnt_session_close(&r.s);
    while (uv_run(r.loop, UV_RUN_NOWAIT)) {}
    uv_loop_close(r.loop);
  }
  dnt_perf_reader_free(reader);
  dnt_profile_free(prof);
  dnt_symtab_release(&perfmap);
  free(base);
  free(data);
  free(trace);
  free(map);
  return rc;
}
