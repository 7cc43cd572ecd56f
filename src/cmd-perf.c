/* dntrace perf: what a .NET process runs on the CPU, native and kernel frames included, with
 * its JIT-compiled frames named.
 *
 * Three things run side by side: `perf record -e cpu-clock -g -k CLOCK_MONOTONIC` on the target
 * (a child under libuv, argv only), the runtime's perf map turned on through the diagnostic IPC
 * (and off again afterwards if it was off), and an EventPipe session with the runtime's method
 * load events and rundown, whose exact code ranges name JIT and ReadyToRun code. After the stop,
 * `perf script` is read as a stream into the profile that `report` and `convert` use. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "builtin.h"
#include "dsipc.h"
#include "perf-profile.h"
#include "profile.h"
#include "session.h"
#include "trace-input.h"
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
#define STDERR_CAP (16 * 1024)

struct perf_run {
  uv_loop_t *loop;
  dnt_session s;
  FILE *trace; /* BASE.nettrace: the method events */
  int trace_failed;
  uv_process_t perf;
  int perf_running, perf_status, perf_signal;
  uv_pipe_t perf_err;
  char err_text[STDERR_CAP];
  size_t err_len;
  uv_signal_t sigint, sigterm;
  uv_timer_t duration;
  int handles_open, stopping, interrupted;
};

/* ---- the two recorders ---- */

static void close_handles(struct perf_run *r) {
  if (!r->handles_open || r->perf_running || !r->s.ended) return; /* both must be over */
  r->handles_open = 0;
  uv_close((uv_handle_t *)&r->sigint, NULL);
  uv_close((uv_handle_t *)&r->sigterm, NULL);
  uv_close((uv_handle_t *)&r->duration, NULL);
}

static void stop_all(struct perf_run *r) {
  if (r->stopping) return;
  r->stopping = 1;
  if (r->perf_running) uv_process_kill(&r->perf, SIGINT); /* perf writes its file and exits */
  dnt_session_stop(&r->s);
  close_handles(r);
}

static void on_perf_exit(uv_process_t *p, int64_t status, int sig) {
  struct perf_run *r = p->data;
  r->perf_running = 0;
  r->perf_status = (int)status;
  r->perf_signal = sig;
  uv_close((uv_handle_t *)p, NULL);
  stop_all(r); /* perf ended by itself (the target exited, an error): the session goes too */
  close_handles(r);
}

static void on_err_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char chunk[4096];
  (void)h, (void)suggested;
  *buf = uv_buf_init(chunk, sizeof chunk);
}

static void on_err_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct perf_run *r = s->data;
  if (n < 0) {
    uv_close((uv_handle_t *)s, NULL);
    return;
  }
  size_t room = sizeof r->err_text - 1 - r->err_len, take = (size_t)n < room ? (size_t)n : room;
  memcpy(r->err_text + r->err_len, buf->base, take);
  r->err_len += take;
  r->err_text[r->err_len] = '\0';
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
    r->interrupted = 1;
    stop_all(r);
    return;
  }
  dnt_session_abandon(&r->s);
  close_handles(r);
}

static void on_duration(uv_timer_t *t) { stop_all(t->data); }

/* ---- the environment ---- */

/* perf on PATH, or the one line that says how to get it. */
static int find_perf(void) {
  const char *path = getenv("PATH");
  char buf[4096];
  for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
    size_t n = strcspn(p, ":");
    snprintf(buf, sizeof buf, "%.*s/perf", (int)n, p);
    if (access(buf, X_OK) == 0) return 0;
    p += n + (p[n] == ':');
  }
  return dnt_error("perf is not installed (Debian: apt-get install linux-perf); 'dntrace collect' still gives "
                   "the managed view");
}

/* Whether this user may watch another process: root, or a permissive perf_event_paranoid. */
static int check_paranoid(void) {
  if (geteuid() == 0) return 0;
  FILE *fp = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
  int level = 2;
  if (fp) {
    if (fscanf(fp, "%d", &level) != 1) level = 2;
    fclose(fp);
  }
  if (level <= 1) return 0;
  return dnt_error("kernel.perf_event_paranoid is %d: perf may not watch other processes; run as root or "
                   "'sysctl kernel.perf_event_paranoid=1'", level);
}

/* The runtime's perf map was already on (DOTNET_PerfMapEnabled set and not 0)? Also finds where
 * the runtime writes it (its TMPDIR, else /tmp), as it sees its own file system. */
static int perfmap_was_on(const dnt_session *s, char *tmpdir, size_t cap) {
  char **env = NULL;
  size_t n = 0;
  dsipc_status st;
  int on = 0;
  snprintf(tmpdir, cap, "/tmp");
  if (dsipc_process_env_get(s->target.ep.path, 10000, &env, &n, &st) != 0) return 0;
  for (size_t i = 0; i < n; i++) {
    const char *e = env[i];
    if (strncmp(e, "DOTNET_PerfMapEnabled=", 22) == 0 || strncmp(e, "COMPlus_PerfMapEnabled=", 23) == 0) {
      const char *v = strchr(e, '=') + 1;
      on = v[0] && strcmp(v, "0") != 0;
    } else if (strncmp(e, "TMPDIR=", 7) == 0 && e[7]) {
      snprintf(tmpdir, cap, "%s", e + 7);
    }
  }
  dsipc_env_free(env, n);
  return on;
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

/* ---- after the stop ---- */

/* `perf script` on the recording, its output read as it comes (never a shell: argv). Fills prof
 * through the reader; prints the post-processing figures. 0 or -1 (error printed). */
static int read_perf_script(const char *data, dnt_perf_reader *reader) {
  int fds[2];
  if (pipe(fds) != 0) return dnt_error("cannot create a pipe: %s", strerror(errno));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0) return dnt_error("cannot start perf script: %s", strerror(errno));
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    char *const argv[] = {"perf", "script", "-i", (char *)data, "--ns", "--show-mmap-events",
                          "-F", "comm,pid,tid,time,event,ip,sym,dso,trace", NULL};
    execvp("perf", argv);
    _exit(127);
  }
  close(fds[1]);
  static char buf[256 * 1024];
  ssize_t n;
  uint64_t bytes = 0;
  int rc = 0;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) {
    bytes += (uint64_t)n;
    if (!rc && dnt_perf_reader_feed(reader, buf, (size_t)n) != 0) rc = dnt_error("out of memory reading perf script");
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!rc && dnt_perf_reader_finish(reader) != 0) rc = dnt_error("out of memory reading perf script");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (!rc && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
    return dnt_error("perf script failed on '%s' (exit %d)", data, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  printf("Read %.1f MB of perf script in %.2f s (%.0f MB/s, perf script included)\n", (double)bytes / 1e6, secs,
         secs > 0 ? (double)bytes / 1e6 / secs : 0);
  return rc;
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
  char shortopts[64], tmpdir[1024], map_path[2200];
  int map_existed = 1;
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int pid = 0, opt, rc = DNT_EXIT_USAGE, hz = 999, threads = 0, perfmap_on = 0, we_enabled = 0;
  long top = 10;
  uint64_t duration_ms = 0;
  const char *name = NULL, *output = NULL, *format = NULL;
  char *base = NULL, *data = NULL, *trace = NULL;
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
      if (strcasecmp(optarg, "folded") && strcasecmp(optarg, "speedscope") && strcasecmp(optarg, "flamegraph") &&
          strcasecmp(optarg, "chromium")) {
        dnt_error("--format: '%s' is not folded, speedscope, chromium or flamegraph", optarg);
        goto out;
      }
      format = optarg;
      break;
    case OPT_TOP: {
      char *end;
      top = strtol(optarg, &end, 10);
      if (*end || top <= 0 || top > 100000) {
        dnt_error("--top: '%s' is not a count", optarg);
        goto out;
      }
      break;
    }
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
  if (find_perf() < 0 || check_paranoid() < 0) goto out;
  r.loop = uv_default_loop();
  struct dnt_session_target want = {.pid = pid, .name = name};
  if ((rc = dnt_session_open(&r.s, r.loop, &want)) != 0) goto out;
  rc = DNT_EXIT_FAILURE;
  base = output ? dnt_xstrdup(output) : default_base(r.s.target.name);
  data = with_ext(base, ".perf.data");
  trace = with_ext(base, ".nettrace");

  /* the perf map: names for JIT code when the method events cannot give them; read as the
   * target wrote it, through its root (a container's /tmp is not ours) */
  dsipc_status st = {0};
  perfmap_on = perfmap_was_on(&r.s, tmpdir, sizeof tmpdir);
  snprintf(map_path, sizeof map_path, "/proc/%d/root%s/perf-%d.map", r.s.target.pid, tmpdir,
           r.s.target.ep.ns_pid ? r.s.target.ep.ns_pid : r.s.target.pid);
  map_existed = access(map_path, F_OK) == 0;
  if (!perfmap_on) {
    int e = dsipc_perfmap_enable(r.s.target.ep.path, DSIPC_PERFMAP_PERFMAP, 10000, &st);
    if (e == 0)
      we_enabled = 1;
    else if (e == DSIPC_EUNKNOWNCMD)
      dnt_warning("this runtime (before .NET 8) cannot turn its perf map on; JIT frames are named from the "
                  "method events only (or start the app with DOTNET_PerfMapEnabled=1)");
    else
      dnt_warning("cannot turn the perf map on: %s", st.msg);
  }

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

  /* perf itself */
  char freq[16], target_pid[16];
  snprintf(freq, sizeof freq, "%d", hz);
  snprintf(target_pid, sizeof target_pid, "%d", r.s.target.pid);
  char *perf_argv[] = {"perf", "record", "-e", "cpu-clock", "-g", "-k", "CLOCK_MONOTONIC", "-F", freq,
                       "-p", target_pid, "-o", data, "--quiet", NULL};
  uv_pipe_init(r.loop, &r.perf_err, 0);
  r.perf_err.data = &r;
  uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE}, {.flags = UV_IGNORE},
                                   {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r.perf_err}};
  uv_process_options_t po = {.exit_cb = on_perf_exit, .file = "perf", .args = perf_argv, .stdio_count = 3, .stdio = stdio};
  r.perf.data = &r;
  int e = uv_spawn(r.loop, &r.perf, &po);
  if (e) {
    uv_close((uv_handle_t *)&r.perf_err, NULL);
    dnt_error("cannot start perf: %s", uv_strerror(e));
    dnt_session_abandon(&r.s);
    goto disable;
  }
  r.perf_running = 1;
  uv_read_start((uv_stream_t *)&r.perf_err, on_err_alloc, on_err_read);
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
         duration_ms ? "" : ". Press Ctrl+C to stop", we_enabled ? " (its perf map turned on for the run)" : "");
  fflush(stdout);
  uv_run(r.loop, UV_RUN_DEFAULT);

  int perf_ok = r.perf_status == 0 || (r.perf_signal == 0 && r.perf_status == 130) || r.perf_signal == SIGINT;
  if (fclose(r.trace) != 0) r.trace_failed = 1;
  r.trace = NULL;
  if (r.trace_failed) dnt_warning("cannot write '%s': managed frames may stay unnamed", trace);
  if (!perf_ok || access(data, R_OK) != 0) {
    while (r.err_len && (r.err_text[r.err_len - 1] == '\n')) r.err_text[--r.err_len] = '\0';
    dnt_error("perf record failed (exit %d%s%s)%s%s", r.perf_status, r.perf_signal ? ", signal " : "",
              r.perf_signal ? strsignal(r.perf_signal) : "", r.err_len ? ":\n" : "", r.err_text);
    goto disable;
  }

  size_t bad = 0;
  int mrc = dnt_perfmap_load(&perfmap, map_path, &bad);
  if (mrc < 0 && (perfmap_on || we_enabled))
    dnt_warning("cannot read the perf map '%s': %s", map_path, strerror(-mrc));

  prof = dnt_profile_new();
  if (!prof) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  ntr_callbacks pcb;
  dnt_profile_callbacks(&pcb);
  char err[512] = "";
  if (dnt_trace_read(trace, &pcb, prof, NULL, err, sizeof err) < 0) dnt_warning("%s: %s", trace, err);
  if (format && strcasecmp(format, "chromium") == 0) dnt_profile_keep_timeline(prof);
  reader = dnt_perf_reader_new(prof, r.s.target.pid, "cpu-clock", 1000.0 / hz, &perfmap);
  if (!reader) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (read_perf_script(data, reader) < 0) goto disable;
  dnt_profile_finish(prof);
  uint64_t used;
  struct dnt_perf_script_stats ps;
  dnt_perf_reader_stats(reader, &ps, &used);
  if (used == 0) {
    dnt_error("perf recorded no samples of process %d (was it idle, or gone?)", r.s.target.pid);
    goto disable;
  }
  printf("\n%llu samples on %zu threads, %.2f ms each: time on a CPU (perf cpu-clock)\n\n",
         (unsigned long long)used, dnt_profile_nthreads(prof), 1000.0 / hz);
  dnt_report_tables(prof, (size_t)top, 0, threads);
  printf("\nWrote %s and %s\n", data, trace);
  rc = 0;
  if (format) {
    char *conv = with_ext(base, dnt_convert_extension(format));
    fflush(stdout);
    rc = dnt_convert_profile(prof, format, base, conv);
    free(conv);
  }

disable:
  /* leave the target as it was found */
  if (we_enabled && dsipc_perfmap_disable(r.s.target.ep.path, 10000, &st) != 0 && !r.s.ended)
    dnt_warning("cannot turn the perf map off again: %s", st.msg);
  if (we_enabled && !map_existed) unlink(map_path); /* the file our run made the runtime write */
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
  return rc;
}
