/* dntrace gc: every garbage collection of a trace, and PerfView's GCStats summary (analyze/).
 *
 * From a trace file, or from a live process: then a session with the runtime's GC keyword at the
 * informational level, as dotnet-trace's gc-collect profile asks (src/providers.c), read as it
 * streams: the events go straight into the analysis, nothing is kept but one row per GC. The
 * report goes to stdout (or -o); what the live session says goes to stderr. */
#include <stddef.h>

#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-analyze.h"

#define DEFAULT_TOP 5
#define BUFFER_MB 64 /* GC events are few: a small session buffer is plenty */

struct gc_options {
  struct dnt_analysis_options common; /* first: the shared rows' offsets hold here too */
  int summary;
};

/* a live session's table longer than this many rows gets its summary first, in sight */
#define SCREEN_ROWS 40

#define O(f) offsetof(struct gc_options, f)
static const struct dnt_option gc_options[] = {
    DNT_ANALYSIS_OPT_REPORT("how many of the longest pauses to list (default 5)"),
    DNT_OPT_FLAG(0, "summary", O(summary), "text: the summary alone, not every GC"),
    DNT_OPT_END(),
};
#undef O

const struct dnt_usage usage_gc = {
    .synopsis = "dntrace gc (FILE | -p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--duration TIME] [--format FORMAT] [-o FILE] [--top N] [--summary]",
    .summary = "Show every garbage collection and a GCStats summary, from a trace or a live process",
    .options = gc_options,
    DNT_ANALYSIS_OPERAND,
};

/* ---- the analysis, as the runner sees it ---- */

static void *gc_new(const struct dnt_schema *schema, const struct dnt_analysis_options *o) {
  (void)o;
  return dnt_gc_analysis_new(schema);
}
static void gc_free(void *a) { dnt_gc_analysis_free(a); }
static int gc_failed(const void *a) { return dnt_gc_analysis_failed(a); }
static void gc_finish(void *a) { dnt_gc_analysis_finish(a); }

static int gc_write(FILE *fp, const void *a, const struct dnt_analysis_options *o) {
  if (o->format == DNT_FORMAT_JSON)
    dnt_gc_write_json(fp, a, (size_t)o->top);
  else {
    size_t n;
    dnt_gc_list(a, &n);
    int parts = ((const struct gc_options *)o)->summary ? DNT_GC_SUMMARY_ONLY
                : !o->trace && n > SCREEN_ROWS        ? DNT_GC_SUMMARY_FIRST
                                                      : DNT_GC_ALL;
    dnt_gc_write_text(fp, a, (size_t)o->top, parts);
  }
  return 0;
}

static const char *gc_nothing(const void *a, const struct dnt_analysis_options *o, char *buf, size_t size) {
  (void)o, (void)buf, (void)size;
  size_t n;
  dnt_gc_list(a, &n);
  return n ? NULL : "no GC in this trace (record one with 'dntrace gc -p PID' or the gc-collect profile)";
}

/* ---- the command ---- */

int cmd_gc(int argc, char **argv) {
  struct gc_options o = {.common.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_gc, "gc", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  /* the runtime's GC keyword at the informational level, as dotnet-trace's gc-collect profile */
  static const struct dnt_analysis_recording rec = {.what = "the GCs", .profiles = "gc-collect",
                                                    .buffer_mb = BUFFER_MB};
  static const struct dnt_analysis_cmd gc = {
      .noun = "GCs", .rec = &rec, .create = gc_new, .destroy = gc_free,
      .callbacks = dnt_gc_analysis_callbacks, .failed = gc_failed, .finish = gc_finish,
      .write = gc_write, .nothing = gc_nothing};
  return dnt_analysis_run(&gc, &o.common);
}
