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
#include "collect-ring.h"
#include "collect-native.h"
#include "collect-stop.h"
#include "dnt-profile.h"
#include "dsipc.h"
#include "ntr.h"
#include "options.h"
#include "output.h"
#include "providers.h"
#include "session.h"
#include "target.h"
#include "util.h"

struct rundown_keyword {
  uint64_t keyword;
  int given;
};

struct collect_options {
  struct dnt_session_target target;
  int resume, rundown, clr_level, native;
  int buffering; /* 0 Drop (the runtime's default), 1 Block: --buffering-mode */
  int format; /* enum dnt_format: a conversion to write beside the .nettrace */
  int weight; /* its weights: 0 time, 1 samples (--weight) */
  uint32_t buffer_mb;
  uint64_t duration_ms;
  struct rundown_keyword rundown_keyword;
  const char *output, *profiles, *clrevents;
  const char *stop_provider, *stop_event, *stop_filter;
  struct dnt_providers providers;
  uint64_t ring_ms; /* --ring: the flight recorder's window */
  long ring_mb;
};

static int parse_providers(void *field, const char *arg) {
  char err[512];
  if (dnt_providers_parse(field, arg, err, sizeof err) < 0) return dnt_error("--providers: %s", err);
  return 0;
}

static int parse_clr_level(void *field, const char *arg) {
  if ((*(int *)field = dnt_parse_level(arg)) < 0) return dnt_error("--clreventlevel: '%s' is not 0-5 or a level name", arg);
  return 0;
}

/* --buffering-mode Drop|Block (dotnet-trace's words, any case; or 0/1) */
static int parse_buffering(void *field, const char *arg) {
  if (strcasecmp(arg, "drop") == 0 || strcmp(arg, "0") == 0) *(int *)field = 0;
  else if (strcasecmp(arg, "block") == 0 || strcmp(arg, "1") == 0) *(int *)field = 1;
  else return dnt_error("--buffering-mode: '%s' is not Drop or Block", arg);
  return 0;
}

static int parse_buffersize(void *field, const char *arg) {
  char *end;
  long v = strtol(arg, &end, 10);
  if (*end || v <= 0 || v > 4096) return dnt_error("--buffersize: '%s' is not a size in MB between 1 and 4096", arg);
  *(uint32_t *)field = (uint32_t)v;
  return 0;
}

static int parse_rundown_keyword(void *field, const char *arg) {
  struct rundown_keyword *rk = field;
  char *end;
  const char *k = strncasecmp(arg, "0x", 2) == 0 ? arg + 2 : arg;
  errno = 0;
  rk->keyword = strtoull(k, &end, 16);
  if (!*k || *end || errno) return dnt_error("--rundown-keyword: '%s' is not a hex number", arg);
  rk->given = 1;
  return 0;
}

static void list_profiles(void) {
  dnt_profiles_print(stdout);
  printf("%-28s %s\n", "thread-time", "the kernel's context switches (dotnet-trace collect-linux's): recorded with perf");
  printf("    %s\n", "beside the session, as --native does (for 'dntrace waits' and 'dntrace compare')");
}

#define O(f) offsetof(struct collect_options, f)
static const struct dnt_option collect_options[] = {
    DNT_OPT_GROUP(dnt_options_target_any, O(target)),
    DNT_OPT_FLAG(0, "show-child-io", O(target.show_child_io), "with --: let CMD use this terminal (else its output is discarded)"),
    DNT_OPT_RESUME(O(resume)),
    DNT_OPT_OUTPUT("FILE", O(output), "where to write (default: <app>_<yyyyMMdd>_<HHmmss>.nettrace)"),
    DNT_OPT_PARSE_MANY(0, "providers", "LIST", O(providers), parse_providers, "Name[:[Keywords][:[Level][:[Args]]]], comma-separated"),
    DNT_OPT_STRING(0, "profile", "LIST", O(profiles), "named provider sets, comma-separated (see --list-profiles)"),
    DNT_OPT_STRING(0, "clrevents", "LIST", O(clrevents), "runtime keywords by name, '+'-separated (gc+jit+loader...)"),
    DNT_OPT_PARSE(0, "clreventlevel", "LEVEL", O(clr_level), parse_clr_level,
                  "level for --clrevents (number or name; default informational)"),
    DNT_OPT_PARSE(0, "buffersize", "MB", O(buffer_mb), parse_buffersize, "the runtime's session buffer (default 256)"),
    DNT_OPT_PARSE(0, "buffering-mode", "MODE", O(buffering), parse_buffering,
                  "Drop (default: a full buffer drops events) or Block (the\n"
                  "threads that write wait: nothing lost; .NET 11 and later,\n"
                  "else Drop with a warning)"),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_BOOL("rundown", "BOOL", O(rundown), "method and module rundown at the end (default true)"),
    DNT_OPT_PARSE(0, "rundown-keyword", "HEX", O(rundown_keyword), parse_rundown_keyword,
                  "a custom rundown keyword (runtime 9 and later)"),
    DNT_OPT_FORMAT("FORMAT", O(format), DNT_FORMAT_BIT(DNT_FORMAT_NETTRACE) | DNT_FORMATS_PROFILE,
                   "nettrace (default), or also speedscope, chromium, flamegraph, folded,\n"
                   "pprof"),
    DNT_OPT_WEIGHT(O(weight), "with --format: time (default) or samples, as in 'dntrace convert'"),
    DNT_OPT_FLAG(0, "native", O(native), "also record the process with Linux perf, for 'dntrace compare'"),
    DNT_OPT_STRING(0, "stopping-event-provider-name", "NAME", O(stop_provider),
                   "stop once an event of this provider arrives"),
    DNT_OPT_STRING(0, "stopping-event-event-name", "NAME", O(stop_event), "... and of this name"),
    DNT_OPT_STRING(0, "stopping-event-payload-filter", "FIELD:VALUE,...", O(stop_filter),
                   "... and with these payload values"),
    {.kind = DNT_OPT_DURATION, .long_name = "ring", .argh = "TIME", .offset = O(ring_ms),
     .help = "a flight recorder: keep the last TIME (60s), save it on SIGUSR1,\nEnter or Ctrl+C into the directory -o (default .)"},
    DNT_OPT_COUNT(0, "ring-size", "MB", O(ring_mb), 1048576, "with --ring: keep at most MB of the stream (default 256)"),
    DNT_OPT_ACTION("list-profiles", list_profiles, "print the profiles and exit"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_collect = {
    .synopsis = "dntrace collect (-p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [-o FILE] [--providers LIST] [--profile LIST] [--duration TIME]",
    .summary = "Record an EventPipe trace of a .NET process into a .nettrace file",
    .options = collect_options,
};
#undef O

#define DEFAULT_BUFFER_MB 256
#define RING_DEFAULT_MB 256

struct collect {
  uv_loop_t *loop;
  dnt_session s;
  const char *output;
  int out_fd;
  char tmp[4200];            /* what out_fd writes: renamed to output once worth keeping; "" after */
  uint64_t bytes;
  ntr_parser *parser;        /* reads along: completeness, event count, dropped events */
  struct dnt_profile *prof;  /* --format: the conversion, built from the stream as it is written */
  struct dnt_stop_event stop_event; /* --stopping-event-*: the event that ends the session */
  ntr_fanout readers;        /* what reads along with the parser */
  int parse_failed;
  char parse_error[256];
  int write_failed;
  char write_error[300];
  uint64_t start_ms, duration_ms;
  int tty;
  uv_signal_t sigint, sigterm;
  uv_timer_t ticker, stopper_timer; /* stopper: --duration, then the stop's deadline */
  int saw_end;
  int handles_closed;                 /* close_handles ran: the stream is over */
  int line_done;                      /* the status line has had its last update */
  struct dnt_enter_watch enter; /* Enter stops, on a terminal */
  int native; /* 0 no, 1 perf set up, 2 its files written */
  struct dnt_native nat;
  char *profiles_copy; /* --profile without thread-time (owned) */
  /* the target's thread names (its /proc, by the ids its events carry), written into the trace
   * at its end; what they need of the stream: its format and last timestamp */
  struct {
    uint64_t *tids;
    char **names;
    size_t n, cap;
  } tn;
  int stream_v4v5;
  uint64_t last_ts;
  struct { /* the threads the stream's events are about: only they are named */
    uint64_t *slot; /* open addressing, 0 empty */
    size_t n, cap, last;
  } seen;
};

static uint64_t now_ms(void) { return uv_hrtime() / 1000000u; }

/* The status line, rewritten in place while recording. final ends it with a newline, once: after
 * the stop it is not drawn again, so it is on the screen one time however the trace stopped. */
static void status_line(struct collect *c, int final) {
  if (!c->tty || c->line_done) return;
  if (final) c->line_done = 1;
  uint64_t s = (now_ms() - c->start_ms) / 1000;
  double mb = (double)c->bytes / (1024.0 * 1024.0);
  printf("\r[%02llu:%02llu:%02llu:%02llu]\tRecording trace %.1f MB   %s", (unsigned long long)(s / 86400),
         (unsigned long long)(s / 3600 % 24), (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60), mb,
         final ? "\n" : "");
  fflush(stdout);
}

/* ---- the session stream ---- */

/* One thread of the target: its latest name kept (a thread names itself once it runs). */
static void note_thread(void *ud, unsigned long long tid, const char *name) {
  struct collect *c = ud;
  if (!*name) return;
  size_t i = 0;
  while (i < c->tn.n && c->tn.tids[i] != tid) i++;
  if (i == c->tn.n) {
    if (c->tn.n == c->tn.cap) {
      c->tn.cap = c->tn.cap ? 2 * c->tn.cap : 32;
      c->tn.tids = dnt_xrealloc(c->tn.tids, c->tn.cap * sizeof *c->tn.tids);
      c->tn.names = dnt_xrealloc(c->tn.names, c->tn.cap * sizeof *c->tn.names);
    }
    c->tn.tids[c->tn.n] = tid;
    c->tn.names[c->tn.n++] = NULL;
  }
  free(c->tn.names[i]);
  c->tn.names[i] = dnt_xstrdup(name);
}

/* The target's threads now (at the start, when asked to stop, at the stream's end): gone ones
 * keep the name they had. */
static void note_threads(struct collect *c) {
  if (c->s.target.pid > 0) dsipc_process_threads(c->s.target.pid, note_thread, c);
}

/* What the stream says that the names need (a reader beside the parser). */
static int seen_trace(void *ud, const ntr_trace *t) {
  ((struct collect *)ud)->stream_v4v5 = t->format == NTR_FORMAT_V4;
  return 0;
}
static size_t seen_slot(const uint64_t *slot, size_t cap, uint64_t tid) {
  size_t i = (size_t)(tid * 0x9e3779b97f4a7c15ull) & (cap - 1);
  while (slot[i] && slot[i] != tid) i = (i + 1) & (cap - 1);
  return i;
}
static int seen_thread(const struct collect *c, uint64_t tid) {
  return c->seen.cap && c->seen.slot[seen_slot(c->seen.slot, c->seen.cap, tid)] == tid;
}
static void see_thread(struct collect *c, uint64_t tid) {
  if (!tid || tid == c->seen.last) return; /* the same thread as the event before: most of them */
  c->seen.last = tid;
  if (2 * (c->seen.n + 1) > c->seen.cap) {
    size_t cap = c->seen.cap ? 2 * c->seen.cap : 64;
    uint64_t *slot = dnt_xrealloc(NULL, cap * sizeof *slot);
    memset(slot, 0, cap * sizeof *slot);
    for (size_t i = 0; i < c->seen.cap; i++)
      if (c->seen.slot[i]) slot[seen_slot(slot, cap, c->seen.slot[i])] = c->seen.slot[i];
    free(c->seen.slot);
    c->seen.slot = slot, c->seen.cap = cap;
  }
  size_t i = seen_slot(c->seen.slot, c->seen.cap, tid);
  if (!c->seen.slot[i]) c->seen.slot[i] = tid, c->seen.n++;
}
static int seen_event(void *ud, const ntr_event *ev) {
  struct collect *c = ud;
  if (ev->timestamp > c->last_ts) c->last_ts = ev->timestamp;
  see_thread(c, ev->thread_id);
  return 0;
}

/* Keeps the names of the threads the trace has events of (the others no view shows). */
static void keep_seen_threads(struct collect *c) {
  size_t kept = 0;
  for (size_t i = 0; i < c->tn.n; i++) {
    if (seen_thread(c, c->tn.tids[i])) {
      c->tn.tids[kept] = c->tn.tids[i];
      c->tn.names[kept++] = c->tn.names[i];
    } else {
      free(c->tn.names[i]);
    }
  }
  c->tn.n = kept;
}

/* Writes the thread names into the finished trace at fd (size bytes, ending with the stream's end
 * tag), as events of our own provider before a new end tag (ntr_names_tail): TraceEvent and
 * dotnet-trace read them as any self-described event, dntrace names the threads with them. A
 * failure leaves the trace as it was. 0, or -1 with the reason in why. */
static int write_names(struct collect *c, int fd, char *why, size_t cap) {
  struct stat st;
  uint8_t last, *tail = NULL;
  size_t len = 0;
  if (fstat(fd, &st) != 0 || st.st_size < 1 || pread(fd, &last, 1, st.st_size - 1) != 1 || last != 1) {
    snprintf(why, cap, "the stream does not end with its end tag");
    return -1;
  }
  if (ntr_names_tail((uint64_t)st.st_size - 1, c->last_ts, c->tn.tids, (const char *const *)c->tn.names, c->tn.n,
                     &tail, &len) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  ssize_t w = pwrite(fd, tail, len, st.st_size - 1);
  int saved = errno;
  free(tail);
  if (w == (ssize_t)len) return 0;
  /* cut back to the trace as it was, its end tag again */
  if (ftruncate(fd, st.st_size) != 0 || pwrite(fd, &last, 1, st.st_size - 1) != 1) {}
  snprintf(why, cap, "%s", w < 0 ? strerror(saved) : "a short write");
  return -1;
}

static void stop_session(struct collect *c, const char *why);
static void on_after_end(uv_timer_t *t);
#define END_GRACE_MS 2000 /* after the end marker, for the runtime to close the stream itself */

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
    if (rc == NTR_EOF && !c->saw_end) {
      /* the trace is whole; a runtime that keeps the connection open past its end marker is
       * given a moment to close it, then left */
      c->saw_end = 1;
      uv_timer_start(&c->stopper_timer, on_after_end, END_GRACE_MS, 0);
    }
  }
  c->bytes += n;
}

/* The stream is over: our handles go so that the loop can end (perf too: its target is done). */
static void close_handles(struct collect *c) {
  if (c->handles_closed) return;
  c->handles_closed = 1;
  uv_close((uv_handle_t *)&c->sigint, NULL);
  uv_close((uv_handle_t *)&c->sigterm, NULL);
  uv_close((uv_handle_t *)&c->ticker, NULL);
  uv_close((uv_handle_t *)&c->stopper_timer, NULL);
  dnt_enter_watch_close(&c->enter);
}

static void on_session_end(void *ud) {
  struct collect *c = ud;
  note_threads(c); /* an ending the target chose (its exit: then /proc has little left) */
  if (c->native) dnt_native_stop(&c->nat, &c->s);
  close_handles(c);
}

/* ---- stopping ---- */

/* How long the runtime may take, after StopTracing, to write its rundown and close the stream:
 * a process stopped (SIGSTOP, a debugger) or hung never does. DNT_STOP_TIMEOUT_MS overrides it
 * (the tests). */
#define STOP_DEADLINE_MS 60000
static uint64_t stop_deadline_ms(void) {
  const char *e = getenv("DNT_STOP_TIMEOUT_MS");
  long v = e ? strtol(e, NULL, 10) : 0;
  return v > 0 ? (uint64_t)v : STOP_DEADLINE_MS;
}

/* What is recorded, from where, to where (dotnet-trace's table and lines). */
static void print_banner(const dnt_session *s, const struct dnt_providers *providers, int default_profiles,
                         const char *output, uint64_t duration_ms) {
  if (default_profiles)
    printf("No providers were given: using the profiles dotnet-common + dotnet-sampled-thread-time.\n");
  dnt_providers_print(stdout, providers);
  if (s->target.pid) {
    char *safe_name = dnt_safe_text(s->target.name); /* its command line's words */
    printf("Process        : %d (%s)\n", s->target.pid, safe_name);
    free(safe_name);
  } else {
    printf("Process        : the first runtime to connect to %s\n", s->target.ep.path);
  }
  printf("Output File    : %s\n", output);
  if (duration_ms) printf("Trace Duration : %llu s\n", (unsigned long long)(duration_ms / 1000));
  fflush(stdout);
}

static void on_stop_deadline(uv_timer_t *t) {
  struct collect *c = t->data;
  if (c->s.ended) return;
  status_line(c, 1);
  if (c->bytes)
    dnt_warning("process %d did not end the stream within %.0f s of the stop (stopped or hung?): keeping the %llu "
                "bytes received",
                c->s.target.pid, (double)stop_deadline_ms() / 1000, (unsigned long long)c->bytes);
  dnt_session_abandon(&c->s);
}

static void on_after_end(uv_timer_t *t) {
  struct collect *c = t->data;
  if (!c->s.ended) dnt_session_abandon(&c->s); /* the end marker is in: nothing more will come */
}

static void stop_session(struct collect *c, const char *why) {
  if (c->s.stopping || c->s.ended) return;
  if (why) {
    status_line(c, 1);
    printf("%s\n", why);
    fflush(stdout);
  }
  note_threads(c); /* while the target lives: the threads the trace will name */
  dnt_session_stop(&c->s); /* perf stops with the stream (on_session_end): it sees the last samples */
  if (!c->saw_end) uv_timer_start(&c->stopper_timer, on_stop_deadline, stop_deadline_ms(), 0);
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
  note_threads(c); /* threads as they appear (and name themselves): a second's reads of /proc */
}

static void on_duration(uv_timer_t *t) { stop_session(t->data, "Duration reached: stopping the trace."); }

static void on_stop_event(void *ud, const char *provider, const char *event) {
  struct collect *c = ud;
  char why[600];
  snprintf(why, sizeof why, "The stopping event arrived (%s%s%s): stopping the trace.", provider, event ? "/" : "",
           event ? event : "");
  stop_session(c, why);
}

static void on_enter(void *ud) {
  struct collect *c = ud;
  c->line_done = 1; /* the terminal echoed the Enter: the line is ended, and kept as it was */
  stop_session(c, "Stopping the trace (Enter). The runtime now writes its rundown.");
}

/* ---- setup ---- */


/* A new path is written in place (created, never through a symlink). An existing one, only when
 * it is a regular file of ours, is replaced by a new hidden file beside it (.NAME.dntrace-XXXXXX)
 * that keep_output renames over it once the session has given something: a session that is
 * refused, times out or ends before its first byte leaves it as it was. Either way the file
 * written is named in tmp (caller's buffer), removed by the caller when nothing came. Returns the
 * fd, or -1 with errno. */
static int open_output(const char *path, char *tmp, size_t cap) {
  struct stat st;
  int exists = lstat(path, &st) == 0;
  if (exists && (!S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
    errno = EEXIST;
    return -1;
  }
  if (!exists && errno == ENOENT) {
    /* a new name is written in place from its first byte, as dotnet-trace writes it: the trace
     * can be followed while it records, and a killed run leaves what came. `tmp` names it all the
     * same: what is removed when nothing came, renamed to .partial when a write failed. */
    if ((size_t)snprintf(tmp, cap, "%s", path) >= cap) {
      tmp[0] = '\0';
      errno = ENAMETOOLONG;
      return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644); /* read: its end tag (write_names) */
    if (fd < 0) tmp[0] = '\0';
    return fd;
  }
  /* an existing file (ours) is replaced only by a whole new one: a hidden temporary beside it */
  const char *slash = strrchr(path, '/');
  int n = slash ? snprintf(tmp, cap, "%.*s/.%s.dntrace-XXXXXX", (int)(slash - path), path, slash + 1)
                : snprintf(tmp, cap, ".%s.dntrace-XXXXXX", path);
  if (n < 0 || (size_t)n >= cap) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    tmp[0] = '\0';
    return -1;
  }
  mode_t mask = umask(0); /* mkostemp makes 0600; a trace is 0644 less the umask, as before */
  umask(mask);
  fchmod(fd, 0644 & ~mask);
  return fd;
}

/* Gives the file written its final name (output, or output.partial): 0, or -1 with the error
 * printed and the file left where it is, named. */
static int keep_output(struct collect *c, const char *name) {
  if (strcmp(c->tmp, name) == 0) { /* written in place: it has its name already */
    c->tmp[0] = '\0';
    return 0;
  }
  if (rename(c->tmp, name) != 0) {
    dnt_error("cannot rename '%s' to '%s': %s (the trace stays there)", c->tmp, name, strerror(errno));
    c->tmp[0] = '\0';
    return -1;
  }
  c->tmp[0] = '\0';
  return 0;
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

/* The profile list without "thread-time" (any case), *native set when it was there: a new string
 * (the caller frees it), NULL when out of memory. */
static char *without_thread_time(const char *list, int *native) {
  char *out = malloc(strlen(list) + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    if (n == 11 && strncasecmp(p, "thread-time", 11) == 0) {
      *native = 1;
    } else if (n) {
      if (o) out[o++] = ',';
      memcpy(out + o, p, n);
      o += n;
    }
    p += n + (p[n] == ',');
  }
  out[o] = '\0';
  return out;
}

int cmd_collect(int argc, char **argv) {
  struct collect_options o = {.resume = 1, .rundown = 1, .clr_level = 4, .buffer_mb = DEFAULT_BUFFER_MB,
                              .rundown_keyword = {.keyword = DSIPC_DEFAULT_RUNDOWN_KEYWORD}};
  int rc = dnt_options_parse(&usage_collect, "collect", argc, argv, &o);
  if (rc) {
    dnt_providers_release(&o.providers);
    return rc == DNT_OPTIONS_DONE ? 0 : rc;
  }
  char err[512];
  int pid = o.target.pid, rundown = o.rundown, custom_rundown = o.rundown_keyword.given, clr_level = o.clr_level;
  uint64_t rundown_keyword = o.rundown_keyword.keyword, duration_ms = o.duration_ms;
  uint32_t buffer_mb = o.buffer_mb;
  const char *name = o.target.name, *output = o.output, *profiles = o.profiles, *clrevents = o.clrevents;
  const char *diag_port = o.target.port;
  const char *format = o.format == DNT_FORMAT_NETTRACE ? NULL : dnt_format_name(o.format);
  int show_child_io = o.target.show_child_io, resume_runtime = o.resume, native = o.native;
  char **child_argv = o.target.child_argv;
  char *default_out = NULL;
  struct dnt_providers providers = o.providers; /* ours now: released at out */
  struct collect c;
  memset(&c, 0, sizeof c);
  c.out_fd = -1;
  rc = DNT_EXIT_USAGE;

  if (show_child_io && !child_argv) {
    dnt_error("--show-child-io goes with a command to start (-- CMD)");
    goto out;
  }
  if (o.weight && !format) {
    dnt_error("--weight goes with a conversion (--format speedscope, chromium, flamegraph or folded)");
    goto out;
  }
  int stopping = dnt_stop_event_init(&c.stop_event, o.stop_provider, o.stop_event, o.stop_filter, on_stop_event, &c);
  if (stopping == DNT_EXIT_USAGE) goto out;
  /* dotnet-trace collect-linux's thread-time profile (the kernel's context switches) is ours with
   * perf beside the session: --native */
  char *rest = profiles ? without_thread_time(profiles, &native) : NULL;
  if (profiles && !rest) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (profiles && native && !o.native)
    fprintf(stderr, "--profile thread-time: the context switches are recorded with perf beside the trace "
                    "(--native; read them with 'dntrace waits' and 'dntrace compare')\n");
  profiles = rest && *rest ? rest : NULL;
  c.profiles_copy = rest;
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
  int default_profiles = providers.n == 0; /* said with the table, once there is a target: a refusal is its error alone */
  if (default_profiles)
    dnt_providers_add_profiles(&providers, "dotnet-common,dotnet-sampled-thread-time", err, sizeof err);
  if (stopping == 1) { /* an event of a provider the session does not enable never comes */
    size_t k = 0;
    while (k < providers.n && strcasecmp(providers.v[k].name, o.stop_provider) != 0) k++;
    if (k == providers.n)
      dnt_warning("--stopping-event-provider-name: '%s' is not among the providers enabled: its event will not "
                  "come to stop the session (add it with --providers)",
                  o.stop_provider);
  }
  if (!custom_rundown && providers.has_rundown_keyword) {
    rundown_keyword = providers.rundown_keyword;
    custom_rundown = 1;
  }
  if (!rundown) {
    rundown_keyword = 0;
    custom_rundown = 0;
  }

  if (o.ring_mb && !o.ring_ms) {
    dnt_error("--ring-size goes with --ring");
    goto out;
  }
  if (o.ring_ms && (format || native || stopping == 1 || child_argv)) {
    dnt_error("--ring keeps a stream to save later: not with %s", format ? "--format" : native ? "--native"
                                                              : child_argv ? "-- CMD" : "a stopping event");
    goto out;
  }
  if (output && strcmp(output, "-") == 0) {
    dnt_error("-o -: collect writes its trace to a file (convert it with 'dntrace convert FILE -o -')");
    rc = DNT_EXIT_USAGE;
    goto out;
  }
  c.loop = uv_default_loop();
  struct dnt_session_target want = {.pid = pid, .name = name, .port = diag_port, .child_argv = child_argv,
                                    .show_child_io = show_child_io};
  rc = dnt_session_open(&c.s, c.loop, &want);
  if (rc) goto out;
  if (o.ring_ms) { /* the flight recorder: -o is the directory of its windows */
    dsipc_provider *rw = dnt_xmalloc(providers.n * sizeof *rw);
    for (size_t i = 0; i < providers.n; i++)
      rw[i] = (dsipc_provider){.name = providers.v[i].name, .keywords = providers.v[i].keywords,
                               .level = providers.v[i].level, .args = providers.v[i].args};
    dsipc_session_config rcfg = {.buffer_mb = buffer_mb, .format = 1, .request_rundown = 1,
                                 .rundown_keyword = rundown_keyword, .request_stackwalk = 1, .providers = rw,
                                 .n_providers = providers.n};
    struct dnt_ring_opts ro = {.window_ms = o.ring_ms,
                               .max_bytes = (uint64_t)(o.ring_mb ? o.ring_mb : RING_DEFAULT_MB) << 20,
                               .duration_ms = duration_ms, .dir = output ? output : "."};
    rc = dnt_collect_ring(&c.s, c.loop, &rcfg, pick_version(custom_rundown), &ro);
    free(rw);
    goto out;
  }
  rc = DNT_EXIT_FAILURE;
  char *chosen = default_output(c.s.target.name), *inside = output ? dnt_output_in_dir(output, chosen) : NULL;
  if (!output) /* the name dotnet-trace chooses; inside a directory given as -o, the same */
    output = default_out = chosen, chosen = NULL;
  else if (inside)
    output = default_out = inside;
  else
    output = default_out = dnt_output_name(output, ".nettrace");
  free(chosen);
  if (dnt_output_check(output, 0) < 0) goto out;
  c.output = output;
  c.out_fd = open_output(output, c.tmp, sizeof c.tmp);
  if (c.out_fd < 0) {
    dnt_error(errno == EEXIST ? "cannot write '%s': it exists and is not a regular file of yours"
                              : "cannot write '%s': %s", output, strerror(errno));
    goto out;
  }

  if (native && c.s.listener) {
    dnt_error("--native needs a running process (-p or -n): perf watches a pid");
    goto out;
  }
  if (native) {
    if (dnt_perf_usable(c.s.target.pid) == 0) {
      dnt_native_begin(&c.nat, &c.s, output, 999, 1);
      c.native = 1;
    } else { /* the line above said why perf cannot run; the managed view is still worth having */
      dnt_warning("recording the EventPipe trace only");
    }
  }
  /* what reads along with the parser: the conversion's profile (the trace is never read back)
   * and the stopping event's watch */
  ntr_callbacks cb;
  ntr_fanout_init(&c.readers);
  if (format) {
    if (!(c.prof = dnt_profile_new())) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    if (dnt_convert_needs_timeline(format)) dnt_profile_keep_timeline(c.prof);
    if (o.weight) dnt_profile_set_weight(c.prof, DNT_WEIGHT_SAMPLES);
    dnt_profile_set_tasks(c.prof, DNT_TASKS_STITCHED); /* as convert makes it of the file */
    dnt_profile_callbacks(&cb);
    ntr_fanout_add(&c.readers, &cb, c.prof);
  }
  if (stopping == 1) {
    dnt_stop_event_callbacks(&cb);
    ntr_fanout_add(&c.readers, &cb, &c.stop_event);
  }
  static const ntr_callbacks seen_cb = {.on_trace = seen_trace, .on_event = seen_event};
  ntr_fanout_add(&c.readers, &seen_cb, &c);
  ntr_fanout_callbacks(&c.readers, &cb);
  if (ntr_parser_new(&c.parser, c.readers.n ? &cb : NULL, &c.readers, NULL) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dsipc_provider *wire = dnt_xmalloc(providers.n * sizeof *wire);
  for (size_t i = 0; i < providers.n; i++)
    wire[i] = (dsipc_provider){.name = providers.v[i].name, .keywords = providers.v[i].keywords,
                               .level = providers.v[i].level, .args = providers.v[i].args};
  dsipc_session_config cfg = {.buffer_mb = buffer_mb, .format = 1, .request_rundown = rundown,
                              .rundown_keyword = rundown_keyword, .request_stackwalk = 1,
                              .buffering_mode = (uint32_t)o.buffering, .providers = wire, .n_providers = providers.n};

  /* waiting for a runtime to connect (a command started, a port listened on): the table first, so
   * that the wait says what it is for; a running process answers at once: the table once it
   * accepted, so that a refusal is its error alone */
  int banner_first = c.s.listener != NULL;
  if (banner_first) print_banner(&c.s, &providers, default_profiles, output, duration_ms);

  c.tty = isatty(1) && !show_child_io;
  c.duration_ms = duration_ms;
  /* perf first: it then sees the session from its first sample */
  if (c.native && dnt_native_start(&c.nat, c.loop, &c.s, NULL, NULL) != 0) {
    dnt_native_abandon(&c.nat, &c.s, c.loop);
    dnt_perf_recorded(&c.nat.perf, c.nat.data); /* perf's own words */
    c.native = 2;
    free(wire);
    rc = DNT_EXIT_FAILURE;
    goto out;
  }
  /* the handles the session's callbacks use exist before it starts: its first bytes can come
   * with the runtime's answer, and a stopping event among them stops it at once */
  uv_signal_init(c.loop, &c.sigint);
  uv_signal_init(c.loop, &c.sigterm);
  c.sigint.data = c.sigterm.data = &c;
  uv_timer_init(c.loop, &c.ticker);
  c.ticker.data = &c;
  uv_timer_init(c.loop, &c.stopper_timer);
  c.stopper_timer.data = &c;
  static const dnt_session_cb session_cb = {on_session_data, on_session_end};
  /* Block buffering is CollectTracing6's alone (.NET 11): a runtime without it records with Drop */
  int src = o.buffering ? dnt_session_start(&c.s, 6, &cfg, &session_cb, &c) : DSIPC_EUNKNOWNCMD;
  if (src == DSIPC_EUNKNOWNCMD) {
    if (o.buffering)
      dnt_warning("this runtime cannot block its writers (Block buffering needs .NET 11): recording with Drop, as "
                  "dotnet-trace does");
    src = dnt_session_start(&c.s, pick_version(custom_rundown), &cfg, &session_cb, &c);
  }
  free(wire);
  if (!src) note_threads(&c);
  if (src) {
    close_handles(&c);
    rc = dnt_session_start_failed(&c.s);
    /* nothing was written: out: removes the temporary, an existing output stays as it was */
    if (c.native) {
      dnt_native_abandon(&c.nat, &c.s, c.loop);
      c.native = 2;
    }
    goto out;
  }
  if (!banner_first) print_banner(&c.s, &providers, default_profiles, output, duration_ms);
  if (resume_runtime) dnt_session_resume(&c.s);

  c.start_ms = now_ms();
  if (!c.handles_closed) { /* else the stream is over already */
    uv_signal_start(&c.sigint, on_signal, SIGINT);
    uv_signal_start(&c.sigterm, on_signal, SIGTERM);
    uv_timer_start(&c.ticker, on_tick, 1000, 1000);
    /* unless it is stopping already (its stop deadline, or the end's grace, holds the timer) */
    if (duration_ms && !c.s.stopping && !c.saw_end) uv_timer_start(&c.stopper_timer, on_duration, duration_ms, 0);
    if (!show_child_io) dnt_enter_watch_start(&c.enter, c.loop, on_enter, &c);
  }
  if (c.tty)
    printf("Press <Enter> or <Ctrl+C> to exit...\n");
  else
    printf("Tracing started. Ctrl+C (SIGINT) or SIGTERM stops it.\n"); /* when, for a script's log */
  fflush(stdout);
  status_line(&c, 0);
  dnt_loop_run(c.loop, UV_RUN_DEFAULT, __func__);
  status_line(&c, 1);

  int native_failed = 0;
  if (c.native == 1) {
    native_failed = dnt_native_end(&c.nat, &c.s) != 0;
    c.native = 2;
    if (!native_failed)
      printf("Native recording: %s (%s)%s%s\n", c.nat.data,
             c.nat.sched ? "cpu-clock, sched_switch and sched_waking" : "cpu-clock only: no readable tracefs",
             c.nat.pm.saved ? ", " : "", c.nat.pm.saved ? c.nat.map : "");
  }
  int complete = 0;
  ntr_stats stats = {0};
  if (c.parser && !c.parse_failed) {
    complete = ntr_parser_finish(c.parser) == 0;
    ntr_parser_stats(c.parser, &stats);
  }
  keep_seen_threads(&c);
  if (complete && c.stream_v4v5 && c.tn.n && !c.write_failed) {
    char why[256];
    if (write_names(&c, c.out_fd, why, sizeof why) == 0) {
      c.bytes = (uint64_t)lseek(c.out_fd, 0, SEEK_END);
      for (size_t i = 0; c.prof && i < c.tn.n; i++) /* and the conversion beside it */
        if (dnt_profile_name_thread(c.prof, c.tn.tids[i], c.tn.names[i]) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    } else {
      dnt_warning("the thread names are not in the trace: %s", why);
    }
  }
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
    if (keep_output(&c, partial) == 0) dnt_error("%s; the incomplete trace is kept as '%s'", c.write_error, partial);
    goto out;
  }
  /* worth keeping: a whole trace, or the bytes of one cut short (not when nothing came: an empty
   * file is no trace, and an existing one stays as it was) */
  if ((complete || c.bytes > 0) && keep_output(&c, output) < 0) goto out;
  if (c.parse_failed) { /* kept for a look, but not called a trace */
    dnt_error("the stream does not parse as nettrace: %s; the %llu bytes received are in '%s'", c.parse_error,
              (unsigned long long)c.bytes, output);
  } else if (complete) {
    printf("Trace completed: %s (%llu bytes, %llu events)\n", output, (unsigned long long)c.bytes,
           (unsigned long long)stats.events);
    rc = 0;
    if (format) {
      fflush(stdout);
      if (dnt_profile_failed(c.prof) || dnt_profile_finish(c.prof) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
      rc = dnt_convert_loaded(c.prof, output, format, NULL);
    }
    if (stats.dropped_events)
      dnt_warning("the runtime dropped %llu events (its buffer was full): raise --buffersize or enable fewer events",
                  (unsigned long long)stats.dropped_events);
  } else if (c.s.abandoned && c.bytes > 0) {
    printf("Rundown abandoned: %s holds the %llu bytes received, without the end of the stream\n", output,
           (unsigned long long)c.bytes);
    rc = 0;
  } else if (c.bytes > 0) {
    printf("The target ended the session early%s%s: %s keeps the %llu bytes received (no end of stream)\n",
           c.s.end_msg[0] ? " - " : "", c.s.end_msg, output, (unsigned long long)c.bytes);
    rc = 0;
  } else if (c.s.abandoned) {
    dnt_error("process %d sent nothing on the session, not even the trace's header, and did not end it within %.0f s "
              "of the stop (stopped or hung?): no trace written",
              c.s.target.pid, (double)stop_deadline_ms() / 1000);
  } else if (c.s.stopping) {
    dnt_error("process %d sent nothing on the session, not even the trace's header, before it was stopped: no trace "
              "written",
              c.s.target.pid);
  } else {
    dnt_error("the target ended the session before sending anything%s%s", c.s.end_msg[0] ? ": " : "", c.s.end_msg);
  }
  if (rc == 0 && native_failed) rc = DNT_EXIT_FAILURE;
  if (rc == 0 && c.native == 2)
    printf("Compare the two views: dntrace compare %s\n", output);
  if (rc == 0 && c.native == 2 && c.nat.sched) printf("Why threads waited, and who woke them: dntrace waits %s\n", output);
  if (c.s.child_started) {
    if (!c.s.child_exited) {
      printf("Waiting for the command (pid %d) to exit...\n", c.s.target.pid);
      fflush(stdout);
    }
    int child_rc = dnt_session_wait_child(&c.s);
    if (rc == 0) rc = child_rc; /* dotnet-trace's rule: the command's exit code is ours */
  }
out:
  if (c.native == 1) dnt_perfmap_off(&c.nat.pm, &c.s, NULL); /* leave the target as it was found */
  dnt_native_release(&c.nat);
  if (c.loop) dnt_session_close(&c.s);
  if (c.out_fd >= 0) close(c.out_fd);
  if (c.tmp[0]) unlink(c.tmp); /* never renamed: the session gave nothing to keep */
  if (c.loop) {
    while (dnt_loop_run(c.loop, UV_RUN_NOWAIT, __func__)) {}
    uv_loop_close(c.loop);
  }
  ntr_parser_free(c.parser);
  dnt_profile_free(c.prof);
  dnt_stop_event_release(&c.stop_event);
  free(c.profiles_copy);
  for (size_t i = 0; i < c.tn.n; i++) free(c.tn.names[i]);
  free(c.tn.names);
  free(c.tn.tids);
  free(c.seen.slot);
  dnt_providers_release(&providers);
  free(default_out);
  return rc;
}
