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
#include "collect-native.h"
#include "dsipc.h"
#include "dnt-perf.h"
#include "dnt-profile.h"
#include "options.h"
#include "output.h"
#include "session.h"
#include "util.h"

struct perf_options {
  struct dnt_session_target target;
  uint64_t duration_ms;
  int hz, format, threads; /* format: enum dnt_format */
  const char *output;
  long top;
};

static int parse_frequency(void *field, const char *arg) {
  char *end;
  long v = strtol(arg, &end, 10);
  if (*end || v < 1 || v > 100000) return dnt_error("-F: '%s' is not a frequency in Hz (1 to 100000)", arg);
  *(int *)field = (int)v;
  return 0;
}

/* --cleanup: what a dntrace killed mid-run left (perf maps still on, temporary files) */
static void cleanup(void) { dnt_perf_leftovers(1); }

#define O(f) offsetof(struct perf_options, f)
static const struct dnt_option perf_options[] = {
    DNT_OPT_GROUP(dnt_options_target_pid, O(target)),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_PARSE('F', "frequency", "HZ", O(hz), parse_frequency, "samples per second and CPU (default 999)"),
    DNT_OPT_OUTPUT("BASE", O(output),
                   "BASE.perf.data, BASE.nettrace (method names) and conversions\n"
                   "(default <app>_<yyyyMMdd>_<HHmmss>)"),
    DNT_OPT_FORMAT("FORMAT", O(format), DNT_FORMATS_PROFILE, "also write folded, speedscope, chromium, flamegraph or pprof"),
    DNT_OPT_TOP(O(top), 100000, "functions in the report (default 10)"),
    DNT_OPT_FLAG(0, "threads", O(threads), "the report per thread too"),
    DNT_OPT_ACTION("cleanup", cleanup,
                   "turn off perf maps left on by a dntrace that was killed, and\nremove its temporary files "
                   "(every run also does this first)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_perf = {
    .synopsis = "dntrace perf (-p PID | -n NAME) [--duration TIME] [-F HZ] [-o BASE] [--format FORMAT] [--top N] [--threads]",
    .summary = "Record what a .NET process runs on the CPU with Linux perf, JIT-compiled frames named",
    .options = perf_options,
};
#undef O

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define METHOD_KEYWORDS 0x18 /* Loader | Jit: MethodLoadVerbose, ModuleLoad */

struct perf_run {
  uv_loop_t *loop;
  dnt_session s;
  FILE *trace; /* BASE.nettrace: the method events */
  int trace_failed;
  struct dnt_native nat; /* perf record and the perf map: collect --native's pipeline */
  uv_signal_t sigint, sigterm;
  uv_timer_t duration, ticker;
  struct dnt_enter_watch enter; /* Enter stops, on a terminal */
  int tty, line_done;
  uint64_t start_ms, trace_bytes;
  int handles_open, stopping;
};

/* On a terminal, one line rewritten every second while perf records (as collect's); ended once,
 * at the stop. */
static void status_line(struct perf_run *r, int final) {
  if (!r->tty || r->line_done) return;
  if (final) r->line_done = 1;
  uint64_t s = (uv_now(r->loop) - r->start_ms) / 1000;
  printf("\r[%02llu:%02llu:%02llu]\tRecording with perf; method events %.1f MB   %s", (unsigned long long)(s / 3600),
         (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60), (double)r->trace_bytes / (1024.0 * 1024.0),
         final ? "\n" : "");
  fflush(stdout);
}

static void on_tick(uv_timer_t *t) { status_line(t->data, 0); }

/* ---- the two recorders ---- */

static void close_handles(struct perf_run *r) {
  if (!r->handles_open || r->nat.perf.running || !r->s.ended) return; /* both must be over */
  r->handles_open = 0;
  uv_close((uv_handle_t *)&r->sigint, NULL);
  uv_close((uv_handle_t *)&r->sigterm, NULL);
  uv_close((uv_handle_t *)&r->duration, NULL);
  uv_close((uv_handle_t *)&r->ticker, NULL);
  dnt_enter_watch_close(&r->enter);
}

static void stop_all(struct perf_run *r) {
  if (r->stopping) return;
  r->stopping = 1;
  status_line(r, 1);
  dnt_native_stop(&r->nat, &r->s); /* perf writes its file and exits */
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
  r->trace_bytes += n;
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
    status_line(r, 1);
    printf("Stopping: perf writes its file, the runtime its method rundown. Ctrl+C again abandons the rundown.\n");
    fflush(stdout);
    stop_all(r);
    return;
  }
  dnt_session_abandon(&r->s);
  close_handles(r);
}

static void on_duration(uv_timer_t *t) { stop_all(t->data); }

static void on_enter(void *ud) {
  struct perf_run *r = ud;
  if (r->stopping) return;
  r->line_done = 1; /* the terminal echoed the Enter: the status line is ended as it was */
  printf("Stopping (Enter): perf writes its file, the runtime its method rundown.\n");
  fflush(stdout);
  stop_all(r);
}

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
  struct perf_options o = {.hz = 999, .top = 10};
  int rc = dnt_options_parse(&usage_perf, "perf", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  int hz = o.hz, threads = o.threads;
  long top = o.top;
  uint64_t duration_ms = o.duration_ms;
  const char *output = o.output, *format = dnt_format_name(o.format);
  char *base = NULL, *trace = NULL;
  struct dnt_symtab perfmap = {0};
  struct dnt_profile *prof = NULL;
  dnt_perf_reader *reader = NULL;
  struct perf_run r;
  memset(&r, 0, sizeof r);

  rc = DNT_EXIT_FAILURE;
  if (dnt_perf_usable(0) < 0) goto out;
  r.loop = uv_default_loop();
  if ((rc = dnt_session_open(&r.s, r.loop, &o.target)) != 0) goto out;
  rc = DNT_EXIT_FAILURE;
  if (dnt_perf_may_watch(r.s.target.pid) < 0) goto out; /* at paranoid 2 it depends on whose it is */
  base = output ? dnt_xstrdup(output) : default_base(r.s.target.name);
  trace = with_ext(base, ".nettrace");
  /* the files, checked before anything is turned on: never through a link, overwriting said */
  {
    char *data = with_ext(base, ".perf.data"), *map = with_ext(base, ".perf.map");
    int ok = dnt_output_check(data, 0) == 0 && dnt_output_check(trace, 0) == 0 && dnt_output_check(map, 0) == 0;
    free(data);
    free(map);
    if (!ok) goto out;
  }
  /* BASE.perf.data and BASE.perf.map, the perf map on for the run: names for JIT code the method
   * events do not cover */
  dnt_native_begin(&r.nat, &r.s, trace, hz, 0);

  /* the method events, as an EventPipe session of its own */
  struct dnt_output tout; /* checked above; opened in place, never through a link */
  if (dnt_output_open(&tout, trace, DNT_OUTPUT_STREAM | DNT_OUTPUT_REPLACE) < 0) goto out;
  r.trace = tout.fp;
  tout.fp = NULL;
  dnt_output_abort(&tout); /* its strings only: r.trace is ours now */
  dsipc_provider runtime = {.name = RUNTIME_PROVIDER, .keywords = METHOD_KEYWORDS, .level = 5, .args = NULL};
  dsipc_session_config cfg = {.buffer_mb = 64, .format = 1, .request_rundown = 1,
                              .rundown_keyword = DSIPC_DEFAULT_RUNDOWN_KEYWORD, .request_stackwalk = 0,
                              .providers = &runtime, .n_providers = 1};
  static const dnt_session_cb cb = {on_trace_data, on_trace_end};
  /* perf first, as collect --native: recording before the session begins */
  if (dnt_native_start(&r.nat, r.loop, &r.s, on_perf_exit, &r) != 0) goto out;
  if (dnt_session_start(&r.s, 2, &cfg, &cb, &r) != 0) {
    rc = dnt_session_start_failed(&r.s);
    goto out;
  }
  uv_signal_init(r.loop, &r.sigint);
  uv_signal_init(r.loop, &r.sigterm);
  r.sigint.data = r.sigterm.data = &r;
  uv_signal_start(&r.sigint, on_signal, SIGINT);
  uv_signal_start(&r.sigterm, on_signal, SIGTERM);
  uv_timer_init(r.loop, &r.duration);
  r.duration.data = &r;
  if (duration_ms) uv_timer_start(&r.duration, on_duration, duration_ms, 0);
  r.tty = isatty(1);
  r.start_ms = uv_now(r.loop);
  uv_timer_init(r.loop, &r.ticker);
  r.ticker.data = &r;
  if (r.tty) uv_timer_start(&r.ticker, on_tick, 1000, 1000);
  dnt_enter_watch_start(&r.enter, r.loop, on_enter, &r);
  r.handles_open = 1;
  printf("Recording process %d (%s) with perf at %d Hz%s%s\n", r.s.target.pid, r.s.target.name, hz,
         duration_ms ? "" : r.enter.active ? ". Press <Enter> or <Ctrl+C> to stop" : ". Press Ctrl+C to stop",
         r.nat.pm.we_enabled ? " (its perf map turned on for the run)" : "");
  fflush(stdout);
  dnt_loop_run(r.loop, UV_RUN_DEFAULT, __func__);

  if (fclose(r.trace) != 0) r.trace_failed = 1;
  r.trace = NULL;
  if (r.trace_failed) dnt_warning("cannot write '%s': managed frames may stay unnamed", trace);
  if (dnt_native_end(&r.nat, &r.s) != 0) goto out;

  prof = dnt_profile_new();
  if (!prof) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (format && dnt_convert_needs_timeline(format)) dnt_profile_keep_timeline(prof);
  if (!(reader = dnt_perf_read(prof, r.nat.data, trace, r.nat.map, 1000.0 / hz, &perfmap, NULL, NULL))) goto out;
  if (dnt_perf_name_threads(prof, r.s.target.pid) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
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
  if (r.nat.pm.saved)
    printf("\nWrote %s, %s and %s\n", r.nat.data, trace, r.nat.map);
  else /* the map could not be copied (the process is gone): not claimed */
    printf("\nWrote %s and %s\n", r.nat.data, trace);
  rc = 0;
  if (format) {
    char *conv = with_ext(base, dnt_convert_extension(format));
    fflush(stdout);
    rc = dnt_convert_profile(prof, format, base, "on-CPU time (perf cpu-clock)", conv);
    free(conv);
  }
out:
  if (r.nat.began) { /* it did not get to the end: perf stopped, the target left as it was found */
    dnt_session_abandon(&r.s);
    dnt_native_abandon(&r.nat, &r.s, r.loop);
  }
  if (r.trace) fclose(r.trace);
  if (r.loop) {
    dnt_session_close(&r.s);
    while (dnt_loop_run(r.loop, UV_RUN_NOWAIT, __func__)) {}
    uv_loop_close(r.loop);
  }
  dnt_perf_reader_free(reader);
  dnt_profile_free(prof);
  dnt_symtab_release(&perfmap);
  dnt_native_release(&r.nat);
  free(base);
  free(trace);
  return rc;
}
