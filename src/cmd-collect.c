/* dntrace collect: an EventPipe session streamed to a .nettrace file, as dotnet-trace collect.
 *
 * The stream goes to the file as libuv reads it, so memory stays flat however long the session.
 * Stopping (Enter, Ctrl+C, --duration) sends StopTracing on a second connection and keeps
 * reading until the runtime has written its rundown and closed the stream; a second Ctrl+C
 * abandons the rundown but keeps every byte already received. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "builtin.h"
#include "collect-native.h"
#include "dsipc.h"
#include "ntr.h"
#include "providers.h"
#include "session.h"
#include "target.h"
#include "util.h"

const char *const usage_collect[] = {
    "dntrace collect (-p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [-o FILE] [--providers LIST] [--profile LIST] [--duration TIME]",
    "Record an EventPipe trace of a .NET process into a .nettrace file",
    "    -p, --process-id PID     the process, by pid as seen from here",
    "    -n, --name NAME          the process, by name (an error if several match)",
    "    --diagnostic-port PATH   a runtime's socket (PATH[,connect]), or PATH,listen to wait for",
    "                             a runtime started with DOTNET_DiagnosticPorts=PATH",
    "    -- CMD [ARGS...]         start CMD suspended, trace it from its first instruction, and exit",
    "                             with its exit code",
    "    --show-child-io          with --: let CMD use this terminal (else its output is discarded)",
    "    --resume-runtime BOOL    with -- or listen: resume the runtime once the session runs",
    "    -o, --output FILE        where to write (default: <app>_<yyyyMMdd>_<HHmmss>.nettrace)",
    "    --providers LIST         Name[:[Keywords][:[Level][:[Args]]]], comma-separated",
    "    --profile LIST           named provider sets, comma-separated (see --list-profiles)",
    "    --clrevents LIST         runtime keywords by name, '+'-separated (gc+jit+loader...)",
    "    --clreventlevel LEVEL    level for --clrevents (number or name; default informational)",
    "    --buffersize MB          the runtime's session buffer (default 256)",
    "    --duration TIME          stop after dd:hh:mm:ss, or a number with s, m or h (30s, 5m)",
    "    --rundown BOOL           method and module rundown at the end (default true)",
    "    --rundown-keyword HEX    a custom rundown keyword (runtime 9 and later)",
    "    --format FORMAT          nettrace (default), or also speedscope, chromium, flamegraph, folded",
    "    --native                 also record the process with Linux perf, for 'dntrace compare'",
    "    --list-profiles          print the profiles and exit",
    "    -h, --help               show this help",
    NULL,
};

#define DEFAULT_BUFFER_MB 256

struct collect {
  uv_loop_t *loop;
  dnt_session s;
  const char *output;
  int out_fd;
  uint64_t bytes;
  ntr_parser *parser;        /* reads along: completeness, event count, dropped events */
  int parse_failed;
  char parse_error[256];
  int write_failed;
  char write_error[300];
  uint64_t start_ms, duration_ms;
  int tty;
  uv_signal_t sigint, sigterm;
  uv_timer_t ticker, stopper_timer;
  uv_poll_t stdin_poll;
  int stdin_polling;
  int native; /* 0 no, 1 perf set up, 2 its files written */
  struct dnt_native nat;
};

static uint64_t now_ms(void) { return uv_hrtime() / 1000000u; }

static void status_line(struct collect *c, int final) {
  if (!c->tty) return;
  uint64_t s = (now_ms() - c->start_ms) / 1000;
  double mb = (double)c->bytes / (1024.0 * 1024.0);
  printf("\r[%02llu:%02llu:%02llu:%02llu]\tRecording trace %.1f MB   %s", (unsigned long long)(s / 86400),
         (unsigned long long)(s / 3600 % 24), (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60), mb,
         final ? "\n" : "");
  fflush(stdout);
}

/* ---- the session stream ---- */

static void stop_session(struct collect *c, const char *why);

static void on_session_data(void *ud, const uint8_t *p, size_t n) {
  struct collect *c = ud;
  if (c->write_failed) return;
  size_t done = 0;
  while (done < n) {
    uv_fs_t req;
    uv_buf_t b = uv_buf_init((char *)p + done, (unsigned)(n - done));
    int w = uv_fs_write(c->loop, &req, c->out_fd, &b, 1, -1, NULL); /* no callback: synchronous */
    uv_fs_req_cleanup(&req);
    if (w < 0) {
      c->write_failed = 1;
      snprintf(c->write_error, sizeof c->write_error, "cannot write '%s': %s", c->output, strerror(-w));
      stop_session(c, NULL);
      return;
    }
    done += (size_t)w;
  }
  if (c->parser && !c->parse_failed) {
    int rc = ntr_parser_feed(c->parser, p, n);
    if (rc < 0 && rc != NTR_EOF) {
      c->parse_failed = 1;
      snprintf(c->parse_error, sizeof c->parse_error, "%s", ntr_parser_errmsg(c->parser));
    }
  }
  c->bytes += n;
}

/* The stream is over: our handles go so that the loop can end (perf too: its target is done). */
static void on_session_end(void *ud) {
  struct collect *c = ud;
  if (c->native) dnt_native_stop(&c->nat, &c->s);
  uv_close((uv_handle_t *)&c->sigint, NULL);
  uv_close((uv_handle_t *)&c->sigterm, NULL);
  uv_close((uv_handle_t *)&c->ticker, NULL);
  uv_close((uv_handle_t *)&c->stopper_timer, NULL);
  if (c->stdin_polling) uv_close((uv_handle_t *)&c->stdin_poll, NULL);
}

/* ---- stopping ---- */

static void stop_session(struct collect *c, const char *why) {
  if (c->s.stopping || c->s.ended) return;
  if (why) {
    status_line(c, 1);
    printf("%s\n", why);
    fflush(stdout);
  }
  dnt_session_stop(&c->s); /* perf stops with the stream (on_session_end): it sees the last samples */
}

static void on_signal(uv_signal_t *h, int signum) {
  struct collect *c = h->data;
  (void)signum;
  if (!c->s.stopping) {
    stop_session(c, "Stopping the trace. The runtime now writes its rundown; Ctrl+C again abandons it.");
    return;
  }
  dnt_session_abandon(&c->s); /* a second Ctrl+C: keep what we have and go */
}

static void on_tick(uv_timer_t *t) {
  struct collect *c = t->data;
  status_line(c, 0);
}

static void on_duration(uv_timer_t *t) { stop_session(t->data, "Duration reached: stopping the trace."); }

static void on_stdin(uv_poll_t *p, int status, int events) {
  struct collect *c = p->data;
  (void)events;
  char buf[256];
  ssize_t n = status < 0 ? 0 : read(0, buf, sizeof buf);
  if (n <= 0) { /* closed or unreadable: stop watching, Ctrl+C still works */
    uv_poll_stop(p);
    return;
  }
  if (memchr(buf, '\n', (size_t)n)) stop_session(c, "Stopping the trace (Enter). The runtime now writes its rundown.");
}

/* ---- setup ---- */


/* Opens the output without following a symlink; an existing file is only replaced when it is a
 * regular file of ours. */
static int open_output(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0 || errno != EEXIST) return fd;
  struct stat st;
  if (lstat(path, &st) < 0) return -1;
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    errno = EEXIST;
    return -1;
  }
  return open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
}

static char *default_output(const char *app) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &tm);
  size_t n = strlen(app) + strlen(stamp) + 16;
  char *out = dnt_xmalloc(n);
  snprintf(out, n, "%s_%s.nettrace", app, stamp);
  return out;
}

/* The oldest CollectTracing that can say what was asked (as dotnet-trace picks it): 2 for the
 * default rundown on/off, 4 for a custom rundown keyword. */
static int pick_version(int custom_rundown) { return custom_rundown ? 4 : 2; }

static int parse_bool(const char *s) {
  if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0 || strcasecmp(s, "on") == 0) return 1;
  if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0 || strcasecmp(s, "off") == 0) return 0;
  return -1;
}

int cmd_collect(int argc, char **argv) {
  enum {
    OPT_PROVIDERS = 1000, OPT_PROFILE, OPT_CLREVENTS, OPT_CLRLEVEL, OPT_BUFFERSIZE, OPT_DURATION, OPT_RUNDOWN,
    OPT_RUNDOWN_KEYWORD, OPT_FORMAT, OPT_LIST_PROFILES, OPT_DIAG_PORT, OPT_SHOW_CHILD_IO, OPT_RESUME, OPT_NATIVE
  };
  static const struct option opts[] = {
      {"process-id", required_argument, NULL, 'p'},
      {"name", required_argument, NULL, 'n'},
      {"output", required_argument, NULL, 'o'},
      {"providers", required_argument, NULL, OPT_PROVIDERS},
      {"profile", required_argument, NULL, OPT_PROFILE},
      {"clrevents", required_argument, NULL, OPT_CLREVENTS},
      {"clreventlevel", required_argument, NULL, OPT_CLRLEVEL},
      {"buffersize", required_argument, NULL, OPT_BUFFERSIZE},
      {"duration", required_argument, NULL, OPT_DURATION},
      {"rundown", required_argument, NULL, OPT_RUNDOWN},
      {"rundown-keyword", required_argument, NULL, OPT_RUNDOWN_KEYWORD},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"list-profiles", no_argument, NULL, OPT_LIST_PROFILES},
      {"diagnostic-port", required_argument, NULL, OPT_DIAG_PORT},
      {"dport", required_argument, NULL, OPT_DIAG_PORT},
      {"show-child-io", no_argument, NULL, OPT_SHOW_CHILD_IO},
      {"resume-runtime", required_argument, NULL, OPT_RESUME},
      {"native", no_argument, NULL, OPT_NATIVE},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  char shortopts[64], err[512];
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int pid = 0, c_opt, rc = DNT_EXIT_USAGE, rundown = 1, custom_rundown = 0, clr_level = 4;
  uint64_t rundown_keyword = DSIPC_DEFAULT_RUNDOWN_KEYWORD, duration_ms = 0;
  uint32_t buffer_mb = DEFAULT_BUFFER_MB;
  const char *name = NULL, *output = NULL, *profiles = NULL, *clrevents = NULL, *diag_port = NULL;
  const char *format = NULL; /* a conversion to write beside the .nettrace */
  int show_child_io = 0, resume_runtime = 1, native = 0;
  char **child_argv = NULL;
  char *default_out = NULL;
  struct dnt_providers providers = {0};
  struct collect c;
  memset(&c, 0, sizeof c);
  c.out_fd = -1;

  optind = 1;
  while ((c_opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (c_opt) {
    case 'p':
      if ((pid = dnt_opt_pid(optarg)) < 0) goto out;
      break;
    case 'n': name = optarg; break;
    case 'o': output = optarg; break;
    case OPT_PROVIDERS:
      if (dnt_providers_parse(&providers, optarg, err, sizeof err) < 0) {
        dnt_error("--providers: %s", err);
        goto out;
      }
      break;
    case OPT_PROFILE: profiles = optarg; break;
    case OPT_CLREVENTS: clrevents = optarg; break;
    case OPT_CLRLEVEL:
      if ((clr_level = dnt_parse_level(optarg)) < 0) {
        dnt_error("--clreventlevel: '%s' is not 0-5 or a level name", optarg);
        goto out;
      }
      break;
    case OPT_BUFFERSIZE: {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (*end || v <= 0 || v > 4096) {
        dnt_error("--buffersize: '%s' is not a size in MB between 1 and 4096", optarg);
        goto out;
      }
      buffer_mb = (uint32_t)v;
      break;
    }
    case OPT_DURATION:
      if (!(duration_ms = dnt_parse_duration(optarg))) {
        dnt_error("--duration: '%s' is not dd:hh:mm:ss or a number with s, m or h", optarg);
        goto out;
      }
      break;
    case OPT_RUNDOWN:
    case OPT_RESUME: {
      int v = parse_bool(optarg);
      if (v < 0) {
        dnt_error("--%s: '%s' is not true or false", c_opt == OPT_RUNDOWN ? "rundown" : "resume-runtime", optarg);
        goto out;
      }
      *(c_opt == OPT_RUNDOWN ? &rundown : &resume_runtime) = v;
      break;
    }
    case OPT_DIAG_PORT: diag_port = optarg; break;
    case OPT_SHOW_CHILD_IO: show_child_io = 1; break;
    case OPT_NATIVE: native = 1; break;
    case OPT_RUNDOWN_KEYWORD: {
      char *end;
      const char *k = strncasecmp(optarg, "0x", 2) == 0 ? optarg + 2 : optarg;
      errno = 0;
      rundown_keyword = strtoull(k, &end, 16);
      if (!*k || *end || errno) {
        dnt_error("--rundown-keyword: '%s' is not a hex number", optarg);
        goto out;
      }
      custom_rundown = 1;
      break;
    }
    case OPT_FORMAT:
      if (strcasecmp(optarg, "nettrace") == 0) {
        format = NULL;
      } else if (strcasecmp(optarg, "speedscope") == 0 || strcasecmp(optarg, "folded") == 0 ||
                 strcasecmp(optarg, "flamegraph") == 0 || strcasecmp(optarg, "chromium") == 0) {
        format = optarg;
      } else {
        dnt_error("--format: '%s' is not nettrace, speedscope, chromium, folded or flamegraph", optarg);
        goto out;
      }
      break;
    case OPT_LIST_PROFILES: dnt_profiles_print(stdout); rc = 0; goto out;
    case 'h': dnt_print_usage(stdout, usage_collect); rc = 0; goto out;
    default: rc = dnt_usage_error("collect", c_opt, optopt, argv); goto out;
    }
  }
  if (optind < argc && strcmp(argv[optind - 1], "--") == 0) {
    child_argv = argv + optind;
  } else if (optind < argc) {
    dnt_error("unexpected argument '%s' (a command to start goes after '--')", argv[optind]);
    goto out;
  }
  if ((pid > 0) + (name != NULL) + (diag_port != NULL) + (child_argv != NULL) != 1) {
    dnt_error("name the process with exactly one of -p PID, -n NAME, --diagnostic-port PATH or -- CMD");
    goto out;
  }
  if (show_child_io && !child_argv) {
    dnt_error("--show-child-io goes with a command to start (-- CMD)");
    goto out;
  }
  if (profiles && dnt_providers_add_profiles(&providers, profiles, err, sizeof err) < 0) {
    dnt_error("--profile: %s", err);
    goto out;
  }
  if (clrevents) {
    int ignored;
    if (dnt_providers_add_clrevents(&providers, clrevents, (uint32_t)clr_level, &ignored, err, sizeof err) < 0) {
      dnt_error("--clrevents: %s", err);
      goto out;
    }
    if (ignored) dnt_warning("--clrevents is ignored: %s is already enabled by --providers or --profile", DNT_RUNTIME_PROVIDER);
  }
  if (providers.n == 0) {
    printf("No providers were given: using the profiles dotnet-common + dotnet-sampled-thread-time.\n");
    dnt_providers_add_profiles(&providers, "dotnet-common,dotnet-sampled-thread-time", err, sizeof err);
  }
  if (!custom_rundown && providers.has_rundown_keyword) {
    rundown_keyword = providers.rundown_keyword;
    custom_rundown = 1;
  }
  if (!rundown) {
    rundown_keyword = 0;
    custom_rundown = 0;
  }

  c.loop = uv_default_loop();
  struct dnt_session_target want = {.pid = pid, .name = name, .port = diag_port, .child_argv = child_argv,
                                    .show_child_io = show_child_io};
  rc = dnt_session_open(&c.s, c.loop, &want);
  if (rc) goto out;
  rc = DNT_EXIT_FAILURE;
  if (!output) output = default_out = default_output(c.s.target.name);
  c.output = output;
  c.out_fd = open_output(output);
  if (c.out_fd < 0) {
    dnt_error(errno == EEXIST ? "cannot write '%s': it exists and is not a regular file of yours"
                              : "cannot write '%s': %s", output, strerror(errno));
    goto out;
  }

  if (native && c.s.listener) {
    dnt_error("--native needs a running process (-p or -n): perf watches a pid");
    close(c.out_fd);
    c.out_fd = -1;
    unlink(output);
    goto out;
  }
  if (native) {
    if (dnt_native_begin(&c.nat, &c.s, output, 999) == 0)
      c.native = 1;
    else /* the line above said why perf cannot run; the managed view is still worth having */
      dnt_warning("recording the EventPipe trace only");
  }
  if (ntr_parser_new(&c.parser, NULL, NULL, NULL) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dsipc_provider *wire = dnt_xmalloc(providers.n * sizeof *wire);
  for (size_t i = 0; i < providers.n; i++)
    wire[i] = (dsipc_provider){.name = providers.v[i].name, .keywords = providers.v[i].keywords,
                               .level = providers.v[i].level, .args = providers.v[i].args};
  dsipc_session_config cfg = {.buffer_mb = buffer_mb, .format = 1, .request_rundown = rundown,
                              .rundown_keyword = rundown_keyword, .request_stackwalk = 1,
                              .providers = wire, .n_providers = providers.n};

  dnt_providers_print(stdout, &providers);
  if (c.s.target.pid)
    printf("Process        : %d (%s)\n", c.s.target.pid, c.s.target.name);
  else
    printf("Process        : the first runtime to connect to %s\n", c.s.target.ep.path);
  printf("Output File    : %s\n", output);
  if (duration_ms) printf("Trace Duration : %llu s\n", (unsigned long long)(duration_ms / 1000));
  fflush(stdout);

  c.tty = isatty(1) && !show_child_io;
  c.duration_ms = duration_ms;
  /* perf first: it then sees the session from its first sample */
  if (c.native && dnt_native_start(&c.nat, c.loop, &c.s, NULL, NULL) != 0) {
    dnt_native_abandon(&c.nat, &c.s, c.loop);
    dnt_perf_record_ok(&c.nat.perf, c.nat.data); /* perf's own words */
    c.native = 2;
    free(wire);
    close(c.out_fd);
    c.out_fd = -1;
    unlink(output);
    rc = DNT_EXIT_FAILURE;
    goto out;
  }
  static const dnt_session_cb session_cb = {on_session_data, on_session_end};
  int src = dnt_session_start(&c.s, pick_version(custom_rundown), &cfg, &session_cb, &c);
  free(wire);
  if (src) {
    if (dnt_session_interrupted())
      dnt_error("interrupted before a runtime connected");
    else
      dnt_error("process %d refused the session: %s", c.s.target.pid, c.s.reply_msg);
    close(c.out_fd);
    c.out_fd = -1;
    unlink(output); /* nothing was written: leave no empty file behind */
    if (c.native) {
      dnt_native_abandon(&c.nat, &c.s, c.loop);
      c.native = 2;
    }
    goto out;
  }
  if (resume_runtime) dnt_session_resume(&c.s);

  c.start_ms = now_ms();
  uv_signal_init(c.loop, &c.sigint);
  uv_signal_init(c.loop, &c.sigterm);
  c.sigint.data = c.sigterm.data = &c;
  uv_signal_start(&c.sigint, on_signal, SIGINT);
  uv_signal_start(&c.sigterm, on_signal, SIGTERM);
  uv_timer_init(c.loop, &c.ticker);
  c.ticker.data = &c;
  uv_timer_start(&c.ticker, on_tick, 1000, 1000);
  uv_timer_init(c.loop, &c.stopper_timer);
  c.stopper_timer.data = &c;
  if (duration_ms) uv_timer_start(&c.stopper_timer, on_duration, duration_ms, 0);
  if (isatty(0) && !show_child_io && uv_poll_init(c.loop, &c.stdin_poll, 0) == 0) {
    c.stdin_poll.data = &c;
    c.stdin_polling = 1;
    uv_poll_start(&c.stdin_poll, UV_READABLE, on_stdin);
  }
  if (c.tty)
    printf("Press <Enter> or <Ctrl+C> to exit...\n");
  else
    printf("Tracing started. Ctrl+C (SIGINT) or SIGTERM stops it.\n"); /* when, for a script's log */
  fflush(stdout);
  status_line(&c, 0);
  uv_run(c.loop, UV_RUN_DEFAULT);
  status_line(&c, 1);

  int native_failed = 0;
  if (c.native == 1) {
    native_failed = dnt_native_end(&c.nat, &c.s) != 0;
    c.native = 2;
  }
  int complete = 0;
  ntr_stats stats = {0};
  if (c.parser && !c.parse_failed) {
    complete = ntr_parser_finish(c.parser) == 0;
    ntr_parser_stats(c.parser, &stats);
  }
  if (c.parse_failed) dnt_warning("the stream does not parse as nettrace: %s", c.parse_error);
  if (uv_fs_fsync(NULL, &(uv_fs_t){0}, c.out_fd, NULL) < 0 && !c.write_failed) {}
  if (close(c.out_fd) < 0 && !c.write_failed) {
    c.write_failed = 1;
    snprintf(c.write_error, sizeof c.write_error, "cannot write '%s': %s", output, strerror(errno));
  }
  c.out_fd = -1;
  if (c.write_failed) {
    /* a cut file must not pass for a trace: move it aside */
    char partial[4200];
    snprintf(partial, sizeof partial, "%s.partial", output);
    int moved = rename(output, partial) == 0;
    if (moved)
      dnt_error("%s; the incomplete trace is kept as '%s'", c.write_error, partial);
    else
      dnt_error("%s; the trace is incomplete", c.write_error);
    goto out;
  }
  if (complete) {
    printf("Trace completed: %s (%llu bytes, %llu events)\n", output, (unsigned long long)c.bytes,
           (unsigned long long)stats.events);
    rc = 0;
    if (format) {
      fflush(stdout);
      rc = dnt_convert(output, format, NULL);
    }
    if (stats.dropped_events)
      dnt_warning("the runtime dropped %llu events (its buffer was full): raise --buffersize or enable fewer events",
                  (unsigned long long)stats.dropped_events);
  } else if (c.s.abandoned) {
    printf("Rundown abandoned: %s holds the %llu bytes received, without the end of the stream\n", output,
           (unsigned long long)c.bytes);
    rc = 0;
  } else if (c.bytes > 0) {
    printf("The target ended the session early%s%s: %s keeps the %llu bytes received (no end of stream)\n",
           c.s.end_msg[0] ? " - " : "", c.s.end_msg, output, (unsigned long long)c.bytes);
    rc = 0;
  } else {
    dnt_error("the target ended the session before sending anything%s%s", c.s.end_msg[0] ? ": " : "", c.s.end_msg);
    unlink(output);
  }
  if (rc == 0 && native_failed) rc = DNT_EXIT_FAILURE;
  if (rc == 0 && c.native == 2)
    printf("Compare the two views: dntrace compare %s\n", output);
  if (c.s.child_started) {
    if (!c.s.child_exited) {
      printf("Waiting for the command (pid %d) to exit...\n", c.s.target.pid);
      fflush(stdout);
    }
    int child_rc = dnt_session_wait_child(&c.s);
    if (rc == 0) rc = child_rc; /* dotnet-trace's rule: the command's exit code is ours */
  }
out:
  if (c.native == 1) dnt_perfmap_end(&c.nat.pm, &c.s, NULL); /* leave the target as it was found */
  dnt_native_release(&c.nat);
  if (c.loop) dnt_session_close(&c.s);
  if (c.out_fd >= 0) close(c.out_fd);
  if (c.loop) {
    while (uv_run(c.loop, UV_RUN_NOWAIT)) {}
    uv_loop_close(c.loop);
  }
  ntr_parser_free(c.parser);
  dnt_providers_release(&providers);
  free(default_out);
  return rc;
}
