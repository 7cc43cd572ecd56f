/* dntrace allocs: what a process allocates, by type and by allocating stack (analyze/), as a
 * table, JSON, or an allocation flame graph in any profile format (weighed in bytes).
 *
 * From a trace file, or from a live process: then a session with the runtime's GC keyword at the
 * verbose level (GCAllocationTick is a verbose event) and its AllocationSampling keyword (.NET 10;
 * older runtimes ignore it; with it on, .NET 10 writes no GCAllocationTick), with stacks, and the
 * loader and JIT keywords and the rundown to name their frames. dotnet-trace's gc-verbose profile asks for the GC keyword at the same level, but also for
 * the GC handle and exception events, which this does not need. The events stream into the
 * analysis; nothing is kept but the types and the distinct stacks. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis-input.h"
#include "builtin.h"
#include "dnt-analyze.h"
#include "dnt-profile.h"
#include "dnt-trace.h"
#include "ntr.h"
#include "options.h"
#include "output.h"
#include "util.h"

#define DEFAULT_TOP 20
/* GC (0x1), Loader (0x8) and JIT (0x10: the methods and modules named as they load, should the
 * rundown not come) at verbose, and AllocationSampling (0x80000000000) */
#define ALLOCS_PROVIDERS "Microsoft-Windows-DotNETRuntime:0x80000000019:5"

struct allocs_options {
  struct dnt_session_target target;
  const char *trace, *output;
  int format;
  long top;
  uint64_t duration_ms;
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

#define FORMATS \
  (DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON) | DNT_FORMAT_BIT(DNT_FORMAT_FOLDED) | \
   DNT_FORMAT_BIT(DNT_FORMAT_SPEEDSCOPE) | DNT_FORMAT_BIT(DNT_FORMAT_FLAMEGRAPH) | DNT_FORMAT_BIT(DNT_FORMAT_PPROF))

#define O(f) offsetof(struct allocs_options, f)
static const struct dnt_option allocs_options[] = {
    DNT_OPT_TEXT("FILE", "a trace (.nettrace, .gz, .zip, - for stdin) to analyse, or instead:"),
    DNT_OPT_GROUP(dnt_options_target_pid, O(target)),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_FORMAT("FORMAT", O(format), FORMATS,
                   "text (default: a table), json, or the allocation flame graph\n"
                   "weighed in bytes: flamegraph (SVG), speedscope, folded or pprof"),
    DNT_OPT_OUTPUT("FILE", O(output), "write to FILE (default: standard output)"),
    DNT_OPT_TOP(O(top), 1000000, "how many types or stacks to list (default 20)"),
    DNT_OPT_PARSE(0, "by", "WHAT", O(by_stack), parse_by,
                  "text: the table by type (default) or by allocating stack"),
    DNT_OPT_PARSE(0, "source", "EVENTS", O(source), parse_source,
                  "auto (default: AllocationSampled when the trace has any, else\n"
                  "GCAllocationTick), tick or sampled"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_allocs = {
    .synopsis = "dntrace allocs (FILE | -p PID | -n NAME) [--duration TIME] [--format FORMAT] [-o FILE] [--top N] "
                "[--by WHAT] [--source EVENTS]",
    .summary = "Show what is allocated, by type and by stack, from a trace or a live process",
    .options = allocs_options,
    .operand = DNT_OPERAND_OR_TARGET,
    .operand_offset = O(trace),
    .no_operand = "name a trace file, or a process with -p PID or -n NAME",
    .many_operands = "one trace file, or one process, at a time",
};
#undef O

/* ---- the command ---- */

static int write_report(const struct allocs_options *o, const struct dnt_allocs_analysis *a, const char *name) {
  struct dnt_output out = {0};
  if (dnt_output_open(&out, name, 0) < 0) return DNT_EXIT_FAILURE;
  int r = o->format == DNT_FORMAT_JSON ? dnt_allocs_write_json(out.fp, a, (size_t)o->top)
                                       : dnt_allocs_write_text(out.fp, a, (size_t)o->top, o->by_stack);
  if (r < 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  return dnt_output_commit(&out) < 0 ? DNT_EXIT_FAILURE : 0;
}

int cmd_allocs(int argc, char **argv) {
  struct allocs_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_allocs, "allocs", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if (o.trace && o.duration_ms) {
    dnt_error("--duration goes with a process (-p or -n), not with a trace file");
    return DNT_EXIT_USAGE;
  }
  int report = !o.format || o.format == DNT_FORMAT_TEXT || o.format == DNT_FORMAT_JSON;
  char err[512];
  struct dnt_schema *schema = dnt_schema_new();
  struct dnt_allocs_analysis *a = schema ? dnt_allocs_analysis_new(schema, o.source) : NULL;
  if (!a) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  char *name = NULL;
  int damaged = 0;
  rc = DNT_EXIT_FAILURE;
  if (dnt_schema_load_default(schema, err, sizeof err) < 0) {
    dnt_error("cannot read the runtime's event layouts: %s", err);
    goto done;
  }
  /* the output's file is checked before a session is started for it */
  const char *ext = o.format == DNT_FORMAT_JSON ? ".json"
                    : report                    ? ".txt"
                                                : dnt_convert_extension(dnt_format_name(o.format));
  name = dnt_output_name(o.output ? o.output : "-", ext);
  if (strcmp(name, "-") != 0 && dnt_output_check(name, 1) < 0) goto done;

  ntr_callbacks cb;
  dnt_allocs_analysis_callbacks(&cb);
  static const struct dnt_analysis_recording rec = {
      .what = "the allocations", .providers = ALLOCS_PROVIDERS, .stacks = 1, .rundown = 1};
  struct dnt_analysis_input in = {.trace = o.trace, .target = &o.target, .duration_ms = o.duration_ms};
  int r = dnt_analysis_feed(&in, &rec, "allocations", &cb, a, &damaged);
  if (r) {
    rc = r;
    goto done;
  }
  if (dnt_allocs_analysis_failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_allocs_analysis_finish(a);
  if (dnt_allocs_analysis_failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  const dnt_allocs_summary *s = dnt_allocs_get_summary(a);
  if (s->samples == 0) {
    /* one line, whatever the format: an empty table or flame graph would say less */
    if (o.trace)
      dnt_error("no allocation events in this trace (record them with 'dntrace allocs -p PID', or the "
                "runtime's GC keyword at verbose level)");
    else
      dnt_error("no allocation events came from the process (did it allocate while it was recorded?)");
    goto done;
  }
  if (report)
    r = write_report(&o, a, name);
  else
    r = dnt_convert_profile(dnt_allocs_profile(a), dnt_format_name(o.format), o.trace ? o.trace : "allocations",
                            "allocated bytes", name);
  if (r) {
    rc = r;
    goto done;
  }
  rc = damaged ? DNT_EXIT_FAILURE : 0;
done:
  free(name);
  dnt_allocs_analysis_free(a);
  dnt_schema_free(schema);
  return rc;
}
