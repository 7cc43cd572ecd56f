/* dntrace waits: why a recording's managed threads waited, and who woke them (perf/waits.c).
 *
 * On a `collect --native` recording: perf's scheduler records with their call chains (the
 * switch-outs give the blocked stacks, the wake-ups the wakers' stacks) read in one run of perf
 * script, then the trace in one pass for its method table (which names perf's managed frames)
 * and its SampleProfiler samples (which threads are managed, and their managed stacks while
 * blocked). The report is blocked time by (blocked stack, waker stack): a table, JSON, or a
 * profile with the waker's frames above the waiter's, as PerfView's ready-thread view draws it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "collect-native.h"
#include "dnt-perf.h"
#include "dnt-profile.h"
#include "dnt-trace.h"
#include "options.h"
#include "output.h"
#include "util.h"

#define DEFAULT_TOP 10

struct waits_options {
  const char *trace, *thread, *output;
  double min_ms;
  long top;
  int format; /* enum dnt_format */
};

static int parse_min_ms(void *field, const char *arg) {
  char *end;
  double *ms = field;
  *ms = strtod(arg, &end);
  if (end == arg || *end || !(*ms >= 0) || *ms > 1e9) return dnt_error("--min-ms: '%s' is not a number of milliseconds", arg);
  return 0;
}

#define WAITS_FORMATS \
  (DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON) | DNT_FORMAT_BIT(DNT_FORMAT_FOLDED) | \
   DNT_FORMAT_BIT(DNT_FORMAT_SPEEDSCOPE) | DNT_FORMAT_BIT(DNT_FORMAT_FLAMEGRAPH) | DNT_FORMAT_BIT(DNT_FORMAT_PPROF))

#define O(f) offsetof(struct waits_options, f)
static const struct dnt_option waits_options[] = {
    DNT_OPT_TEXT("TRACE", "the .nettrace of 'dntrace collect --native' (its .perf.data beside it)"),
    DNT_OPT_STRING(0, "thread", "NAME|TID", O(thread), "only the waits of this thread (its name or id)"),
    DNT_OPT_PARSE(0, "min-ms", "MS", O(min_ms), parse_min_ms, "leave out waits shorter than MS milliseconds"),
    DNT_OPT_TOP(O(top), 1000000, "rows of the table (default 10) and of json (default all)"),
    DNT_OPT_FORMAT("FORMAT", O(format), WAITS_FORMATS,
                   "text (default: a table), json, or the blocked time as a profile,\n"
                   "the waker's frames above the waiter's: folded, speedscope,\n"
                   "flamegraph or pprof"),
    DNT_OPT_OUTPUT("FILE", O(output), "write to FILE (default: standard output)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_waits = {
    .synopsis = "dntrace waits TRACE [--thread NAME|TID] [--min-ms MS] [--top N] [--format FORMAT] [-o FILE]",
    .summary = "Show why threads waited and who woke them (on a 'collect --native' recording)",
    .options = waits_options,
    .operand = 1,
    .operand_offset = O(trace),
    .no_operand = "name the trace of 'dntrace collect --native'",
    .many_operands = "one trace at a time",
};
#undef O

/* One line of the threads a --thread could name. */
static void say_thread(void *ud, uint64_t tid, const char *name) {
  (void)ud;
  fprintf(stderr, "  %llu", (unsigned long long)tid);
  if (name) {
    fputs("  ", stderr);
    dnt_text_put(stderr, name);
  }
  fputc('\n', stderr);
}

/* EventPipe's samples into the analysis: which threads are managed, their managed stacks */
struct managed_feed {
  dnt_waits *w;
  const struct dnt_profile *ep;
  uint64_t start_ns;
  double ns_per_us;
  int failed;
};

static void feed_sample(void *ud, uint64_t tid, double t_us, double ms, const uint32_t *frames, size_t n) {
  struct managed_feed *m = ud;
  (void)ms;
  const char *names[DNT_PERF_MAX_FRAMES];
  if (n > DNT_PERF_MAX_FRAMES) frames += n - DNT_PERF_MAX_FRAMES, n = DNT_PERF_MAX_FRAMES; /* keep the leaf end */
  for (size_t i = 0; i < n; i++) names[i] = dnt_profile_name(m->ep, frames[i]);
  uint64_t t = m->start_ns + (uint64_t)(t_us > 0 ? t_us * 1e3 : 0);
  if (!m->failed && dnt_waits_managed_sample(m->w, tid, t, names, n) != 0) m->failed = 1;
}

static int is_tid(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

static int profile_format(int format) {
  return format != DNT_FORMAT_NONE && format != DNT_FORMAT_TEXT && format != DNT_FORMAT_JSON;
}

/* The file the report goes to (heap; "-" for stdout). */
static char *report_name(const struct waits_options *o) {
  const char *ext = profile_format(o->format)          ? dnt_convert_extension(dnt_format_name(o->format))
                    : o->format == DNT_FORMAT_JSON ? ".json"
                                                   : ".txt";
  return dnt_output_name(o->output ? o->output : "-", ext);
}

/* The report to its output: the table or JSON, or a profile format. */
static int write_report(const struct waits_options *o, const struct dnt_profile *prof, const char *trace) {
  const char *format = dnt_format_name(o->format);
  if (profile_format(o->format)) {
    char title[512];
    snprintf(title, sizeof title, "waits of %s", trace);
    return dnt_convert_profile(prof, format, title, "blocked time", o->output ? o->output : "-");
  }
  int json = o->format == DNT_FORMAT_JSON;
  char *name = report_name(o);
  struct dnt_output out;
  int rc = DNT_EXIT_FAILURE;
  if (dnt_output_open(&out, name, 0) < 0) goto done;
  size_t top = o->top ? (size_t)o->top : json ? 0 : DEFAULT_TOP;
  if ((json ? dnt_waits_write_json : dnt_waits_write_table)(prof, top, out.fp) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (dnt_output_commit(&out) < 0) goto done;
  rc = 0;
done:
  free(name);
  return rc;
}

int cmd_waits(int argc, char **argv) {
  struct waits_options o = {0};
  int rc = dnt_options_parse(&usage_waits, "waits", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  struct dnt_symtab perfmap = {0};
  struct dnt_profile *prof = NULL, *ep = NULL;
  dnt_waits *w = NULL;
  dnt_perf_reader *reader = NULL;
  char *trace = dnt_native_sibling(o.trace, ".nettrace");
  char *data = dnt_native_sibling(trace, ".perf.data");
  char *map = dnt_native_sibling(trace, ".perf.map");
  char *threads = dnt_native_sibling(trace, ".threads");
  rc = DNT_EXIT_FAILURE;
  char *out_name = report_name(&o); /* refused before the work rather than after it */
  int refused = strcmp(out_name, "-") != 0 && dnt_output_check(out_name, 1) < 0;
  free(out_name);
  if (refused) goto out;
  if (access(trace, R_OK) != 0) {
    dnt_error("cannot read '%s': %s", trace, strerror(errno));
    goto out;
  }
  if (access(data, R_OK) != 0) {
    dnt_error("no '%s' beside the trace: record with 'dntrace collect --native'", data);
    goto out;
  }
  if (!(prof = dnt_profile_new()) || !(ep = dnt_profile_new()) || !(w = dnt_waits_new()))
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  /* perf's part first (the whole record is needed to pair switches and wake-ups), then the trace */
  struct dnt_perf_load_info li;
  reader = dnt_waits_load(w, prof, data, map, &perfmap, &li);
  for (const char *s = li.warnings; *s;) {
    size_t n = strcspn(s, "\n");
    dnt_warning("%.*s", (int)n, s);
    s += n + (s[n] == '\n');
  }
  if (!reader) {
    dnt_error("%s", li.error);
    goto out;
  }
  int nr = dnt_waits_load_names(w, threads); /* /proc's names beat perf's comm; none: perf's */
  if (nr == -ENOMEM) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_profile_keep_timeline(ep);
  dnt_profile_methods_only(prof, 1);
  struct dnt_profile *const both[] = {ep, prof};
  if (dnt_report_loads(both, 2, 1, trace) < 0) goto out;
  dnt_profile_methods_only(prof, 0);
  uint64_t hz, start;
  dnt_profile_clock(ep, &hz, &start);
  struct managed_feed feed = {.w = w, .ep = ep, .start_ns = hz ? (uint64_t)((double)start * (1e9 / (double)hz)) : 0};
  if (dnt_profile_each_sample(ep, feed_sample, &feed) != 0 || feed.failed) dnt_die(DNT_EXIT_FAILURE, "out of memory");

  struct dnt_waits_filter f = {.min_ms = o.min_ms};
  if (o.thread && is_tid(o.thread)) f.tid = strtoull(o.thread, NULL, 10);
  else f.name = o.thread;
  struct dnt_waits_info wi;
  if (dnt_waits_finish(w, prof, &f, &wi) != 0 || dnt_profile_finish(prof) != 0)
    dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (!wi.switches) {
    dnt_error("'%s' has no scheduler switches (tracefs was not readable when it was recorded)", data);
    goto out;
  }
  if (o.thread && !wi.kept) {
    dnt_error("no waits of thread '%s' in '%s'; its threads:", o.thread, trace);
    dnt_waits_each_thread(w, say_thread, NULL);
    goto out;
  }
  fprintf(stderr, "%llu of %llu waits kept (%s%s), %.1f ms blocked; %llu wake-ups recorded, %llu by an interrupt\n",
          (unsigned long long)wi.kept, (unsigned long long)wi.intervals, o.thread ? "thread " : "managed threads",
          o.thread ? o.thread : "", wi.kept_ms, (unsigned long long)wi.wakings, (unsigned long long)wi.interrupt_wakings);
  rc = write_report(&o, prof, trace);
out:
  dnt_perf_reader_free(reader);
  dnt_waits_free(w);
  dnt_profile_free(prof);
  dnt_profile_free(ep);
  dnt_symtab_release(&perfmap);
  free(trace);
  free(data);
  free(map);
  free(threads);
  return rc;
}
