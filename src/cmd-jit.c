/* dntrace jit: every method the JIT compiled in a trace, with its tier, IL size and JIT time, the
 * totals by tier, the slowest methods and the startup timeline (analyze/jit.c: TraceEvent's rules).
 *
 * From a trace file, or from a live process: then a session with the runtime provider's JIT (0x10)
 * and Loader (0x8) keywords at the verbose level, which MethodJittingStarted needs (dotnet-trace has
 * no profile for JIT), read as it streams into the analysis. Only the methods compiled while the
 * session runs are seen: a process's startup is in a trace recorded from its first instruction
 * (`dntrace collect --providers Microsoft-Windows-DotNETRuntime:0x18:5 -- CMD`), since `jit`, like
 * `gc`, takes -p and -n only. The report goes to stdout (or -o); the session's messages to stderr. */
#include <stdlib.h>
#include <string.h>

#include "analysis-input.h"
#include "builtin.h"
#include "dnt-analyze.h"
#include "dnt-trace.h"
#include "ntr.h"
#include "options.h"
#include "output.h"
#include "util.h"

#define DEFAULT_TOP 10
#define BUFFER_MB 64 /* one event or two per method compiled */

struct jit_options {
  struct dnt_session_target target;
  const char *trace, *output;
  int format;
  long top;
  uint64_t duration_ms;
};

#define O(f) offsetof(struct jit_options, f)
static const struct dnt_option jit_options[] = {
    DNT_OPT_TEXT("FILE", "a trace (.nettrace, .gz, .zip, - for stdin) to analyse, or instead:"),
    DNT_OPT_GROUP(dnt_options_target_pid, O(target)),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_FORMAT("FORMAT", O(format), DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON),
                   "text (default: a table) or json"),
    DNT_OPT_OUTPUT("FILE", O(output), "write the report to FILE (default: standard output)"),
    DNT_OPT_TOP(O(top), 1000000, "how many of the slowest methods to list (default 10)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_jit = {
    .synopsis = "dntrace jit (FILE | -p PID | -n NAME) [--duration TIME] [--format FORMAT] [-o FILE] [--top N]",
    .summary = "Show the methods the JIT compiled, their tiers and JIT times, from a trace or a live process",
    .options = jit_options,
    .operand = DNT_OPERAND_OR_TARGET,
    .operand_offset = O(trace),
    .no_operand = "name a trace file, or a process with -p PID or -n NAME",
    .many_operands = "one trace file, or one process, at a time",
};
#undef O

/* ---- the command ---- */

int cmd_jit(int argc, char **argv) {
  struct jit_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_jit, "jit", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if (o.trace && o.duration_ms) {
    dnt_error("--duration goes with a process (-p or -n), not with a trace file");
    return DNT_EXIT_USAGE;
  }
  char err[512];
  struct dnt_schema *schema = dnt_schema_new();
  struct dnt_jit_analysis *a = schema ? dnt_jit_analysis_new(schema) : NULL;
  if (!a) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  struct dnt_output out = {0};
  char *name = NULL;
  int damaged = 0;
  rc = DNT_EXIT_FAILURE;
  if (dnt_schema_load_default(schema, err, sizeof err) < 0) {
    dnt_error("cannot read the runtime's event layouts: %s", err);
    goto done;
  }
  /* the report's file is checked before a session is started for it */
  name = dnt_output_name(o.output ? o.output : "-", o.format == DNT_FORMAT_JSON ? ".json" : ".txt");
  if (strcmp(name, "-") != 0 && dnt_output_check(name, 1) < 0) goto done;

  ntr_callbacks cb;
  dnt_jit_analysis_callbacks(&cb);
  /* JIT (0x10: MethodJittingStarted at verbose, MethodLoadVerbose) and Loader (0x8: the modules) */
  static const struct dnt_analysis_recording rec = {.what = "the JIT compilations", .providers = "Microsoft-Windows-DotNETRuntime:0x18:5",
                                                    .buffer_mb = BUFFER_MB};
  struct dnt_analysis_input in = {.trace = o.trace, .target = &o.target, .duration_ms = o.duration_ms};
  int r = dnt_analysis_feed(&in, &rec, "methods", &cb, a, &damaged);
  if (r) {
    rc = r;
    goto done;
  }
  if (dnt_jit_analysis_failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_jit_analysis_finish(a);
  if (dnt_output_open(&out, name, 0) < 0) goto done;
  if (o.format == DNT_FORMAT_JSON)
    dnt_jit_write_json(out.fp, a, (size_t)o.top);
  else
    dnt_jit_write_text(out.fp, a, (size_t)o.top);
  if (dnt_output_commit(&out) < 0) goto done;
  size_t n;
  dnt_jit_list(a, &n);
  if (n == 0)
    fprintf(stderr, "no JIT compilation in this trace (it needs the runtime's JIT keyword 0x10 at level 5: record one "
                    "with 'dntrace jit -p PID')\n");
  rc = damaged ? DNT_EXIT_FAILURE : 0;
done:
  free(name);
  dnt_jit_analysis_free(a);
  dnt_schema_free(schema);
  return rc;
}
