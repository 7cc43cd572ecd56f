/* dntrace jit: every method the JIT compiled in a trace, with its tier, IL size and JIT time, the
 * totals by tier, the slowest methods and the startup timeline (analyze/jit.c: TraceEvent's rules).
 *
 * From a trace file, or from a live process: then a session with the runtime provider's JIT (0x10)
 * and Loader (0x8) keywords at the verbose level, which MethodJittingStarted needs (dotnet-trace has
 * no profile for JIT), read as it streams into the analysis. Only the methods compiled while the
 * session runs are seen: a process's startup is in a trace recorded from its first instruction
 * (`dntrace collect --providers Microsoft-Windows-DotNETRuntime:0x18:5 -- CMD`), since `jit`, like
 * `gc`, takes -p and -n only. The report goes to stdout (or -o); the session's messages to stderr. */
#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-analyze.h"

#define DEFAULT_TOP 10
#define BUFFER_MB 64 /* one event or two per method compiled */

static const struct dnt_option jit_options[] = {
    DNT_ANALYSIS_OPT_REPORT("how many of the slowest methods to list (default 10)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_jit = {
    .synopsis = "dntrace jit (FILE | -p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--duration TIME] [--format FORMAT] [-o FILE] [--top N]",
    .summary = "Show the methods the JIT compiled, their tiers and JIT times, from a trace or a live process",
    .options = jit_options,
    DNT_ANALYSIS_OPERAND,
};

/* ---- the analysis, as the runner sees it ---- */

static void *jit_new(const struct dnt_schema *schema, const struct dnt_analysis_options *o) {
  (void)o;
  return dnt_jit_analysis_new(schema);
}
static void jit_free(void *a) { dnt_jit_analysis_free(a); }
static int jit_failed(const void *a) { return dnt_jit_analysis_failed(a); }
static void jit_finish(void *a) { dnt_jit_analysis_finish(a); }

static int jit_write(FILE *fp, const void *a, const struct dnt_analysis_options *o) {
  if (o->format == DNT_FORMAT_JSON)
    dnt_jit_write_json(fp, a, (size_t)o->top);
  else
    dnt_jit_write_text(fp, a, (size_t)o->top);
  return 0;
}

static const char *jit_nothing(const void *a, const struct dnt_analysis_options *o, char *buf, size_t size) {
  (void)o, (void)buf, (void)size;
  size_t n;
  dnt_jit_list(a, &n);
  return n ? NULL
           : "no JIT compilation in this trace (it needs the runtime's JIT keyword 0x10 at level 5: record one "
             "with 'dntrace jit -p PID')";
}

/* ---- the command ---- */

int cmd_jit(int argc, char **argv) {
  struct dnt_analysis_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_jit, "jit", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  /* JIT (0x10: MethodJittingStarted at verbose, MethodLoadVerbose) and Loader (0x8: the modules) */
  static const struct dnt_analysis_recording rec = {
      .what = "the JIT compilations", .providers = "Microsoft-Windows-DotNETRuntime:0x18:5", .buffer_mb = BUFFER_MB};
  static const struct dnt_analysis_cmd jit = {
      .noun = "methods", .rec = &rec, .create = jit_new, .destroy = jit_free,
      .callbacks = dnt_jit_analysis_callbacks, .failed = jit_failed, .finish = jit_finish,
      .write = jit_write, .nothing = jit_nothing};
  return dnt_analysis_run(&jit, &o);
}
