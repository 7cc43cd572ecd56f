/* dntrace gcdump: a heap snapshot, from the runtime's own heap walk (analyze/heap.c) or a .gcdump
 * file: per type the objects, their bytes and what they retain; or the snapshot itself, written
 * as a .gcdump that dotnet-gcdump and PerfView open.
 *
 * The walk comes from a trace file recorded with `collect --profile gc-heap-snapshot`, or from a
 * live process: a session with the runtime provider at Verbose and the GCHeapSnapshot keywords
 * (0x1980001), whose start makes the runtime force a blocking gen-2 GC and walk the heap during
 * it. `report` and `collect` are dotnet-gcdump's verbs: `collect` (or -o FILE.gcdump, or --format
 * gcdump) writes the snapshot, anything else reports it (to stdout, or -o). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-analyze.h"
#include "dnt-profile.h"
#include "output.h"
#include "target.h"
#include "util.h"

#define DEFAULT_TOP 40
#define DEFAULT_TIMEOUT_MS (120 * 1000)
#define BUFFER_MB 1024 /* the walk is a burst: dotnet-gcdump asks for as much */

struct gcdump_options {
  struct dnt_analysis_options a; /* first: the shared rows' offsets hold */
  uint64_t timeout_ms;
  long buffer_mb;
  const char *paths_to, *diff;
};

#define O(f) offsetof(struct gcdump_options, f)

#define GCDUMP_PROFILES                                                                                        \
  (DNT_FORMAT_BIT(DNT_FORMAT_FLAMEGRAPH) | DNT_FORMAT_BIT(DNT_FORMAT_PPROF) | DNT_FORMAT_BIT(DNT_FORMAT_SPEEDSCOPE) | \
   DNT_FORMAT_BIT(DNT_FORMAT_FOLDED))
#define GCDUMP_FORMATS \
  (DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON) | DNT_FORMAT_BIT(DNT_FORMAT_GCDUMP) | GCDUMP_PROFILES)

static const struct dnt_option gcdump_options[] = {
    DNT_OPT_TEXT("FILE", "a trace with a heap walk (.nettrace, .gz, .zip, - for stdin) or a\n"
                         ".gcdump, or instead:"),
    DNT_OPT_GROUP(dnt_options_target_any, DNT_ANALYSIS_OFFSET(target)),
    DNT_OPT_FLAG(0, "show-child-io", DNT_ANALYSIS_OFFSET(target.show_child_io),
                 "with --: let CMD use this terminal (else its output is discarded)"),
    {.kind = DNT_OPT_DURATION, .long_name = "timeout", .argh = "TIME", .offset = O(timeout_ms),
     .help = "give up on a heap walk that has not ended after TIME (default 120s)"},
    DNT_OPT_COUNT(0, "buffersize", "MB", O(buffer_mb), 65536,
                  "the session's buffer in MB (default 1024): a walk that\n"
                  "overflows it loses events and is refused, so raise it"),
    DNT_OPT_FORMAT("FORMAT", DNT_ANALYSIS_OFFSET(format), GCDUMP_FORMATS,
                   "text (default: a table), json; gcdump: the snapshot itself (what\n"
                   "'collect' and -o FILE.gcdump write); flamegraph, pprof, speedscope\n"
                   "or folded: each object under its dominators' types (a flame\n"
                   "graph of retained bytes; pprof's inuse_space and inuse_objects)"),
    DNT_OPT_OUTPUT("FILE", DNT_ANALYSIS_OFFSET(output),
                   "write to FILE (default: standard output; 'collect' and gcdump:\n"
                   "YYYYMMDD_HHMMSS_PID.gcdump, as dotnet-gcdump names it)"),
    DNT_OPT_STRING(0, "paths-to", "TYPE|ADDR", O(paths_to),
                   "what keeps them alive: the shortest paths from the roots to the\n"
                   "objects of TYPE (or types with TYPE in their name), or to the\n"
                   "object at address ADDR (0x...)"),
    DNT_OPT_STRING(0, "diff", "BASE", O(diff),
                   "what changed since BASE (a .gcdump, or a trace with a heap walk):\n"
                   "per type the objects, bytes and retained bytes grown or shrunk"),
    DNT_ANALYSIS_OPT_TOP("how many types (or paths) to list (default 40)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_gcdump = {
    .synopsis = "dntrace gcdump [collect | report] (FILE | -p PID | -n NAME | --diagnostic-port PATH | -- CMD...) "
                "[--paths-to TYPE|ADDR | --diff BASE] [--format FORMAT] [-o FILE] [--top N] [--timeout TIME] [--buffersize MB]",
    .summary = "Heap snapshots: what fills the managed heap, what keeps it alive, .gcdump files",
    .options = gcdump_options,
    DNT_ANALYSIS_OPERAND,
};

/* No walk, or one that cannot be trusted: the line to say so (references carry no source object,
 * so after a lost event every later object's would be wrong). */
static void say_incomplete(const dnt_heap_summary *s, int live, uint64_t timeout_ms, long buffer_mb) {
  if (!s->walked && live)
    dnt_error("no heap walk came from the process within %.0f s (--timeout)", (double)timeout_ms / 1000);
  else if (!s->walked)
    dnt_error("no heap walk in this trace (record one with 'dntrace gcdump -p PID', or 'dntrace collect --profile "
              "gc-heap-snapshot')");
  else if (s->lost_events && live)
    dnt_error("the heap walk is incomplete: %llu of its object and reference events were lost (the session's buffer "
              "overflowed), so no report: take it again with a larger --buffersize (it was %ld MB)",
              (unsigned long long)s->lost_events, buffer_mb);
  else if (s->lost_events)
    dnt_error("the heap walk is incomplete: %llu of its object and reference events were lost (the session's buffer "
              "overflowed), so no report: record it again with a larger --buffersize",
              (unsigned long long)s->lost_events);
  else if (s->reference_mismatch)
    dnt_error("the heap walk is incomplete: its references do not add up to what its objects said, so no report");
  else if (live)
    dnt_error("the heap walk did not end within %.0f s (--timeout), so no report", (double)timeout_ms / 1000);
  else
    dnt_error("the heap walk is incomplete: the trace ends before its garbage collection does, so no report");
}

static int is_gcdump_file(const char *path) {
  if (strcmp(path, "-") == 0) return 0;
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  unsigned char head[64];
  size_t n = fread(head, 1, sizeof head, fp);
  fclose(fp);
  return dnt_heap_is_gcdump(head, n);
}

static struct dnt_heap *read_gcdump(const char *path, int *rc) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    dnt_error("cannot open '%s': %s", path, strerror(errno));
    *rc = DNT_EXIT_FAILURE;
    return NULL;
  }
  char err[512];
  struct dnt_heap *h = dnt_heap_read_gcdump(fp, err, sizeof err);
  fclose(fp);
  if (!h) {
    dnt_error("'%s': %s", path, err);
    *rc = DNT_EXIT_FAILURE;
  }
  return h;
}

static int walked(const void *a) { return dnt_heap_analysis_walked(a); }

static void walk_progress(const void *a, char *buf, size_t cap) {
  uint64_t objects, references;
  dnt_heap_analysis_progress(a, &objects, &references);
  snprintf(buf, cap, "Walking the heap: %llu objects, %llu references", (unsigned long long)objects,
           (unsigned long long)references);
}

#define NAMING_TRIES 3 /* walks of a live process whose types the runtime left unnamed */

/* The snapshot of a trace file or a live process, one walk: the graph, or NULL with *rc the exit
 * code (the error said); *unnamed: a complete walk's objects whose types the runtime did not name
 * (its graph then NULL, nothing said: the caller tries again or says so). */
static struct dnt_heap *walk_once(const struct gcdump_options *o, int *rc, int *command_exit, int *damaged,
                                  uint64_t *unnamed);

/* The snapshot of a trace file, a .gcdump or a live process: the graph, or NULL with *rc the exit
 * code (the error said). The runtime names each type once, and forgets what it named only when
 * no session has its events on: while another session on the process does (a watch, serve,
 * collect or dotnet-trace), a second snapshot's objects of types named for an earlier one come
 * unnamed. Such a live walk is taken again (a second apart, NAMING_TRIES in all: the other session
 * may end), then refused; a trace's is reported, with a warning. */
static struct dnt_heap *load(const struct gcdump_options *o, int *rc, int *command_exit, int *damaged) {
  const char *file = o->a.trace;
  if (file && is_gcdump_file(file)) return read_gcdump(file, rc);
  /* a command is not started twice, nor a runtime that dials a listener waited for again */
  const char *port = o->a.target.port;
  int again = !o->a.target.child_argv && !(port && strstr(port, ",listen"));
  for (int tries = 1;; tries++) {
    uint64_t unnamed = 0;
    struct dnt_heap *h = walk_once(o, rc, command_exit, damaged, &unnamed);
    if (h || !unnamed) return h;
    if (!again || tries == NAMING_TRIES) {
      dnt_error("the heap walk is incomplete: the runtime named no type for %llu of its objects%s (it does not name "
                "types again for a new snapshot while another session on the process has its events on: stop that "
                "session, or take the snapshot once it has ended), so no report",
                (unsigned long long)unnamed, tries > 1 ? ", every time" : "");
      *rc = DNT_EXIT_FAILURE;
      return NULL;
    }
    dnt_warning("the runtime named no type for %llu objects of the walk (another session on the process has its "
                "events on?): walking the heap again in a second",
                (unsigned long long)unnamed);
    sleep(1);
  }
}

static struct dnt_heap *walk_once(const struct gcdump_options *o, int *rc, int *command_exit, int *damaged,
                                  uint64_t *unnamed) {
  const char *file = o->a.trace;
  const struct dnt_analysis_recording rec = {
      .what = "the heap", .profiles = "gc-heap-snapshot", .buffer_mb = o->buffer_mb ? (unsigned)o->buffer_mb : BUFFER_MB,
      .done = walked, .duration_is_timeout = 1, .progress = walk_progress};
  struct dnt_heap_analysis *a = dnt_heap_analysis_new();
  if (!a) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  ntr_callbacks cb;
  dnt_heap_analysis_callbacks(&cb);
  uint64_t timeout = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
  struct dnt_analysis_input in = {.trace = file, .target = &o->a.target, .duration_ms = file ? 0 : timeout};
  struct dnt_analysis_outcome outcome;
  struct dnt_heap *h = NULL;
  int r = dnt_analysis_feed(&in, &rec, "heap walk events", &cb, a, &outcome);
  if (command_exit && outcome.command_ran) *command_exit = outcome.command_exit;
  if (damaged) *damaged = outcome.damaged; /* what came before the damage is reported, exit 1 */
  if (r) {
    *rc = r;
    goto out;
  }
  if (dnt_heap_analysis_failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_heap_analysis_finish(a);
  if (dnt_heap_analysis_failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  const dnt_heap_summary *s = dnt_heap_analysis_summary(a);
  if (!s->complete) {
    say_incomplete(s, !file, timeout, o->buffer_mb ? o->buffer_mb : BUFFER_MB);
    *rc = DNT_EXIT_FAILURE;
    goto out;
  }
  if (s->unnamed_objects && !file) { /* a live walk: taken again (load) */
    *unnamed = s->unnamed_objects;
    goto out;
  }
  if (s->unnamed_objects)
    dnt_warning("the runtime named no type for %llu objects of this walk: they are reported as (unknown type)",
                (unsigned long long)s->unnamed_objects);
  h = dnt_heap_analysis_take(a);
  if (!h) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (!file) { /* the process, as dotnet-gcdump's file says it */
    char name[256];
    dnt_heap_origin origin = *dnt_heap_get_origin(h);
    if (o->a.target.pid > 0) origin.pid = (uint32_t)o->a.target.pid; /* as seen from here, not from its namespace */
    origin.process = origin.pid ? dnt_process_name((int)origin.pid, name, sizeof name) : NULL;
    origin.time_unix_ns = (int64_t)time(NULL) * 1000000000;
    if (dnt_heap_set_origin(h, &origin) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  }
out:
  dnt_heap_analysis_free(a);
  return h;
}

/* dotnet-gcdump's name for a snapshot: YYYYMMDD_HHMMSS_PID.gcdump, local time. */
static char *default_name(const struct dnt_heap *h) {
  char stamp[32], *name;
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &tm);
  size_t cap = sizeof stamp + 32;
  if (!(name = malloc(cap))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  snprintf(name, cap, "%s_%u.gcdump", stamp, (unsigned)dnt_heap_get_origin(h)->pid);
  return name;
}

static int write_snapshot(struct dnt_heap *h, const char *output) {
  char *name = output ? dnt_output_name(output, ".gcdump") : default_name(h);
  struct dnt_output out = {0};
  int rc = DNT_EXIT_FAILURE;
  if (dnt_output_open(&out, name, 0) < 0) goto done;
  char err[256];
  if (dnt_heap_write_gcdump(out.fp, h, NULL, err, sizeof err) != 0) {
    dnt_output_abort(&out);
    dnt_error("%s", err);
    goto done;
  }
  if (dnt_output_commit(&out) < 0) goto done;
  if (strcmp(name, "-") != 0) { /* counted alone: no retained sizes (their memory) for a file */
    uint64_t objects, bytes;
    dnt_heap_count(h, &objects, &bytes);
    fprintf(stderr, "Wrote %s: %llu objects, %llu bytes\n", name, (unsigned long long)objects,
            (unsigned long long)bytes);
  }
  rc = 0;
done:
  free(name);
  return rc;
}

/* The report: the types, the paths to some objects, or the change from a base snapshot. */
static int write_report(struct dnt_heap *h, struct dnt_heap *base, const struct gcdump_options *o) {
  if (!dnt_heap_summary_of(h) || (base && !dnt_heap_summary_of(base))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  int json = o->a.format == DNT_FORMAT_JSON;
  char *name = dnt_output_name(o->a.output ? o->a.output : "-", json ? ".json" : ".txt");
  struct dnt_output out = {0};
  char err[512];
  int rc = DNT_EXIT_FAILURE;
  if (o->paths_to) { /* nothing to show is said before any file is made */
    int r = dnt_heap_paths_target(h, o->paths_to, err, sizeof err);
    if (r == -2) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    if (r) {
      dnt_error("--paths-to: %s", err);
      goto done;
    }
  }
  if (dnt_output_open(&out, name, 0) < 0) goto done;
  if (o->paths_to) {
    if (dnt_heap_write_paths(out.fp, h, o->paths_to, (size_t)o->a.top, json, err, sizeof err) != 0)
      dnt_die(DNT_EXIT_FAILURE, "out of memory");
  } else if (base) {
    if (dnt_heap_write_diff(out.fp, h, base, (size_t)o->a.top, json) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  } else if (json) {
    dnt_heap_write_json(out.fp, h, (size_t)o->a.top);
  } else {
    dnt_heap_write_text(out.fp, h, (size_t)o->a.top);
  }
  rc = dnt_output_commit(&out) < 0 ? DNT_EXIT_FAILURE : 0;
done:
  free(name);
  return rc;
}

/* The heap as a profile: a flame graph, pprof, speedscope or folded stacks. */
static int write_profile(struct dnt_heap *h, const struct gcdump_options *o) {
  struct dnt_profile *prof = dnt_heap_profile(h);
  if (!prof) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  const char *format = dnt_format_name(o->a.format);
  char *name = dnt_output_name(o->a.output ? o->a.output : "-", dnt_convert_extension(format));
  char title[300];
  const dnt_heap_origin *origin = dnt_heap_get_origin(h);
  if (o->a.trace) snprintf(title, sizeof title, "Heap of %s", o->a.trace);
  else snprintf(title, sizeof title, "Heap of process %u (%s)", (unsigned)origin->pid,
                origin->process ? origin->process : "?");
  int rc = dnt_convert_profile(prof, format, title, "retained bytes", name);
  free(name);
  dnt_profile_free(prof);
  return rc;
}

/* The base of --diff: a file's snapshot (a .gcdump, or a trace with a complete walk). */
static struct dnt_heap *load_base(const char *path, int *rc) {
  struct gcdump_options b = {.a.trace = path};
  return load(&b, rc, NULL, NULL);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

int cmd_gcdump(int argc, char **argv) {
  int collect = 0;
  if (argc > 1 && strcmp(argv[1], "report") == 0) argc--, argv++; /* dotnet-gcdump's verbs */
  else if (argc > 1 && strcmp(argv[1], "collect") == 0) argc--, argv++, collect = 1;
  struct gcdump_options o = {.a.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_gcdump, "gcdump", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if ((o.timeout_ms || o.buffer_mb) && o.a.trace) {
    dnt_error("--%s goes with a process (-p or -n), not with a file", o.timeout_ms ? "timeout" : "buffersize");
    return DNT_EXIT_USAGE;
  }
  if (collect && o.a.format && o.a.format != DNT_FORMAT_GCDUMP) {
    dnt_error("'collect' writes a .gcdump: --format %s goes with 'report'", dnt_format_name(o.a.format));
    return DNT_EXIT_USAGE;
  }
  int snapshot = collect || o.a.format == DNT_FORMAT_GCDUMP ||
                 (!o.a.format && o.a.output && ends_with(o.a.output, ".gcdump"));
  /* the output's file is checked before a session is started for it */
  if (o.a.output && strcmp(o.a.output, "-") != 0) {
    const char *ext = snapshot                           ? ".gcdump"
                      : o.a.format == DNT_FORMAT_JSON    ? ".json"
                      : o.a.format && o.a.format != DNT_FORMAT_TEXT ? dnt_convert_extension(dnt_format_name(o.a.format))
                                                         : ".txt";
    char *name = dnt_output_name(o.a.output, ext);
    int bad = dnt_output_check(name, 1) < 0;
    free(name);
    if (bad) return DNT_EXIT_FAILURE;
  }
  if (o.paths_to && o.diff) {
    dnt_error("--paths-to and --diff are two reports: one at a time");
    return DNT_EXIT_USAGE;
  }
  if (snapshot && (o.paths_to || o.diff)) {
    dnt_error("--%s goes with a report, not with a .gcdump to write", o.paths_to ? "paths-to" : "diff");
    return DNT_EXIT_USAGE;
  }
  int profile = o.a.format && (DNT_FORMAT_BIT(o.a.format) & GCDUMP_PROFILES);
  if (profile && (o.paths_to || o.diff)) {
    dnt_error("--%s is a report (text or json), not --format %s", o.paths_to ? "paths-to" : "diff",
              dnt_format_name(o.a.format));
    return DNT_EXIT_USAGE;
  }
  rc = 0;
  struct dnt_heap *base = NULL, *h = NULL;
  if (o.diff && !(base = load_base(o.diff, &rc))) return rc; /* a bad base is said before a session */
  int command_exit = -1, damaged = 0;
  if ((h = load(&o, &rc, &command_exit, &damaged)))
    rc = snapshot ? write_snapshot(h, o.a.output) : profile ? write_profile(h, &o) : write_report(h, base, &o);
  if (!rc && damaged) rc = DNT_EXIT_FAILURE;
  if (!rc && command_exit >= 0) rc = command_exit; /* dotnet-trace's rule, as collect's: the command's exit code */
  dnt_heap_free(h);
  dnt_heap_free(base);
  return rc;
}
