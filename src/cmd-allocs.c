/* dntrace allocs: what a process allocates, by type and by allocating stack (analyze/), as a
 * table, JSON, or an allocation flame graph in any profile format (weighed in bytes).
 *
 * From a trace file, or from a live process: then a session with the runtime's GC keyword at the
 * verbose level (GCAllocationTick is a verbose event) and its AllocationSampling keyword (.NET 10;
 * older runtimes ignore it; with it on, .NET 10 writes no GCAllocationTick), with stacks, and the
 * loader and JIT keywords and the rundown to name their frames. dotnet-trace's gc-verbose profile asks for the GC keyword at the same level, but also for
 * the GC handle and exception events, which this does not need. The events stream into the
 * analysis; nothing is kept but the types and the distinct stacks. */
#include <string.h>
#include <strings.h>

#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-analyze.h"
#include "util.h"

#define DEFAULT_TOP 20
/* GC (0x1), Loader (0x8) and JIT (0x10: the methods and modules named as they load, should the
 * rundown not come) at verbose, and AllocationSampling (0x80000000000) */
#define ALLOCS_PROVIDERS "Microsoft-Windows-DotNETRuntime:0x80000000019:5"

struct allocs_options {
  struct dnt_analysis_options common; /* first: the shared rows' offsets hold here too */
  int by_stack;
  int source; /* enum dnt_allocs_source */
};

static int parse_by(void *field, const char *value) {
  if (strcasecmp(value, "type") == 0) *(int *)field = 0;
  else if (strcasecmp(value, "stack") == 0) *(int *)field = 1;
  else return dnt_error("--by: '%s' is not type or stack", value);
  return 0;
}

static int parse_source(void *field, const char *value) {
  if (strcasecmp(value, "auto") == 0) *(int *)field = DNT_ALLOCS_AUTO;
  else if (strcasecmp(value, "tick") == 0) *(int *)field = DNT_ALLOCS_TICK;
  else if (strcasecmp(value, "sampled") == 0) *(int *)field = DNT_ALLOCS_SAMPLED;
  else return dnt_error("--source: '%s' is not auto, tick or sampled", value);
  return 0;
}

#define O(f) offsetof(struct allocs_options, f)
static const struct dnt_option allocs_options[] = {
    DNT_ANALYSIS_OPT_PROFILE("text (default: a table), json, or the allocation flame graph\n"
                             "weighed in bytes: flamegraph (SVG), speedscope, folded or pprof"),
    DNT_ANALYSIS_OPT_TOP("how many types or stacks to list (default 20)"),
    DNT_OPT_PARSE(0, "by", "WHAT", O(by_stack), parse_by,
                  "text: the table by type (default) or by allocating stack"),
    DNT_OPT_PARSE(0, "source", "EVENTS", O(source), parse_source,
                  "auto (default: AllocationSampled when the trace has any, else\n"
                  "GCAllocationTick), tick or sampled"),
    DNT_OPT_END(),
};
#undef O

const struct dnt_usage usage_allocs = {
    .synopsis = "dntrace allocs (FILE | -p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--duration TIME] [--format FORMAT] [-o FILE] [--top N] "
                "[--by WHAT] [--source EVENTS]",
    .summary = "Show what is allocated, by type and by stack, from a trace or a live process",
    .options = allocs_options,
    DNT_ANALYSIS_OPERAND,
};

/* ---- the analysis, as the runner sees it (o is a struct allocs_options) ---- */

static void *allocs_new(const struct dnt_schema *schema, const struct dnt_analysis_options *o) {
  struct dnt_allocs_analysis *a = dnt_allocs_analysis_new(schema, ((const struct allocs_options *)o)->source);
  if (a) dnt_allocs_analysis_stitch(a, !o->no_async);
  return a;
}
static void allocs_free(void *a) { dnt_allocs_analysis_free(a); }
static int allocs_failed(const void *a) { return dnt_allocs_analysis_failed(a); }
static void allocs_finish(void *a) { dnt_allocs_analysis_finish(a); }
static const struct dnt_profile *allocs_profile(const void *a) { return dnt_allocs_profile(a); }

static int allocs_write(FILE *fp, const void *a, const struct dnt_analysis_options *o) {
  if (o->format == DNT_FORMAT_JSON) return dnt_allocs_write_json(fp, a, (size_t)o->top);
  return dnt_allocs_write_text(fp, a, (size_t)o->top, ((const struct allocs_options *)o)->by_stack);
}

static const char *allocs_nothing(const void *a, const struct dnt_analysis_options *o, char *buf, size_t size) {
  (void)buf, (void)size;
  if (dnt_allocs_get_summary(a)->samples) return NULL;
  if (o->trace)
    return "no allocation events in this trace (record them with 'dntrace allocs -p PID', or the runtime's GC "
           "keyword at verbose level)";
  return "no allocation events came from the process (did it allocate while it was recorded?)";
}

/* ---- the command ---- */

int cmd_allocs(int argc, char **argv) {
  struct allocs_options o = {.common.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_allocs, "allocs", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  static const struct dnt_analysis_recording rec = {
      .what = "the allocations", .providers = ALLOCS_PROVIDERS, .stacks = 1, .rundown = 1};
  static const struct dnt_analysis_cmd allocs = {
      .noun = "allocations", .rec = &rec, .create = allocs_new, .destroy = allocs_free,
      .callbacks = dnt_allocs_analysis_callbacks, .failed = allocs_failed, .finish = allocs_finish,
      .write = allocs_write, .nothing = allocs_nothing,
      .profile = allocs_profile, .profile_title = "allocations", .profile_measure = "allocated bytes"};
  rc = dnt_analysis_run(&allocs, &o.common);
  dnt_view_release(&o.common.view);
  return rc;
}
