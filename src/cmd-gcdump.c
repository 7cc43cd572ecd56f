/* dntrace gcdump: a heap snapshot, from the runtime's own heap walk (analyze/heap.c): per type
 * the objects and their bytes.
 *
 * From a trace file recorded with `collect --profile gc-heap-snapshot`, or from a live process:
 * a session with the runtime provider at Verbose and the GCHeapSnapshot keywords (0x1980001),
 * whose start makes the runtime force a blocking gen-2 GC and walk the heap during it. `report`
 * is dotnet-gcdump's verb and may be given first. The report goes to stdout (or -o). */
#include <string.h>

#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-analyze.h"

#define DEFAULT_TOP 40
#define BUFFER_MB 1024 /* the walk is a burst: dotnet-gcdump asks for as much */

static const struct dnt_option gcdump_options[] = {
    DNT_ANALYSIS_OPT_REPORT("how many types to list (default 40)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_gcdump = {
    .synopsis = "dntrace gcdump [report] (FILE | -p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--duration TIME] [--format FORMAT] [-o FILE] [--top N]",
    .summary = "Show what fills the managed heap, by type, from the runtime's heap walk",
    .options = gcdump_options,
    DNT_ANALYSIS_OPERAND,
};

static void *heap_new(const struct dnt_schema *schema, const struct dnt_analysis_options *o) {
  (void)schema, (void)o;
  return dnt_heap_analysis_new();
}
static void heap_free(void *a) { dnt_heap_analysis_free(a); }
static int heap_failed(const void *a) { return dnt_heap_analysis_failed(a); }
static void heap_finish(void *a) { dnt_heap_analysis_finish(a); }
static int heap_walked(const void *a) { return dnt_heap_analysis_walked(a); }

static int heap_write(FILE *fp, const void *a, const struct dnt_analysis_options *o) {
  if (o->format == DNT_FORMAT_JSON) dnt_heap_write_json(fp, a, (size_t)o->top);
  else dnt_heap_write_text(fp, a, (size_t)o->top);
  return 0;
}

/* No walk, or one that cannot be trusted: one line, exit 1, no report (references carry no
 * source object, so after a lost event every later object's would be wrong). */
static const char *heap_nothing(const void *a, const struct dnt_analysis_options *o, char *buf, size_t size) {
  (void)o;
  const dnt_heap_summary *s = dnt_heap_get_summary(a);
  if (s->complete) return NULL;
  if (!s->walked)
    snprintf(buf, size, "no heap walk in this trace (record one with 'dntrace gcdump -p PID', or 'dntrace collect "
                        "--profile gc-heap-snapshot')");
  else if (s->lost_events)
    snprintf(buf, size, "the heap walk is incomplete: %llu of its object and reference events were lost (the "
                        "session's buffer overflowed), so no report",
             (unsigned long long)s->lost_events);
  else if (s->reference_mismatch)
    snprintf(buf, size, "the heap walk is incomplete: its references do not add up to what its objects said, so no "
                        "report");
  else
    snprintf(buf, size, "the heap walk is incomplete: the trace ends before its garbage collection does, so no report");
  return buf;
}

int cmd_gcdump(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "report") == 0) argc--, argv++; /* dotnet-gcdump's verb */
  struct dnt_analysis_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_gcdump, "gcdump", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  static const struct dnt_analysis_recording rec = {
      .what = "the heap", .profiles = "gc-heap-snapshot", .buffer_mb = BUFFER_MB,
      .done = heap_walked};
  static const struct dnt_analysis_cmd gcdump = {
      .noun = "heap walk events", .rec = &rec, .create = heap_new, .destroy = heap_free,
      .callbacks = dnt_heap_analysis_callbacks, .failed = heap_failed, .finish = heap_finish,
      .write = heap_write, .nothing = heap_nothing};
  return dnt_analysis_run(&gcdump, &o);
}
