/* dntrace threadpool: the thread pool of a trace: worker and IO thread counts over time, hill
 * climbing's adjustments with their reasons, starvation and blocking called out, queue traffic
 * (analyze/threadpool.c).
 *
 * From a trace file, or from a live process: then a session with the runtime provider's ThreadPool
 * keyword (0x10000) at the verbose level (the enqueue and dequeue events and the working thread
 * count are verbose), read as it streams into the analysis. The portable thread pool of .NET 7+
 * writes the same events from the same provider; the queue's length comes from System.Runtime's
 * EventCounters, enabled beside it each second. The report goes to stdout (or -o); the session's
 * messages to stderr. */
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

#define DEFAULT_TOP 20
#define BUFFER_MB 64 /* enqueue and dequeue events can be many */

struct threadpool_options {
  struct dnt_session_target target;
  const char *trace, *output;
  int format;
  long top;
  uint64_t duration_ms;
};

#define O(f) offsetof(struct threadpool_options, f)
static const struct dnt_option threadpool_options[] = {
    DNT_OPT_TEXT("FILE", "a trace (.nettrace, .gz, .zip, - for stdin) to analyse, or instead:"),
    DNT_OPT_GROUP(dnt_options_target_pid, O(target)),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_FORMAT("FORMAT", O(format), DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON),
                   "text (default: a table) or json"),
    DNT_OPT_OUTPUT("FILE", O(output), "write the report to FILE (default: standard output)"),
    DNT_OPT_TOP(O(top), 1000000, "how many of the last adjustments to list in the text report (default 20)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_threadpool = {
    .synopsis = "dntrace threadpool (FILE | -p PID | -n NAME) [--duration TIME] [--format FORMAT] [-o FILE] [--top N]",
    .summary = "Show the thread pool's threads, hill climbing's adjustments and starvation, from a trace or a live process",
    .options = threadpool_options,
    .operand = DNT_OPERAND_OR_TARGET,
    .operand_offset = O(trace),
    .no_operand = "name a trace file, or a process with -p PID or -n NAME",
    .many_operands = "one trace file, or one process, at a time",
};
#undef O

/* ---- the command ---- */

int cmd_threadpool(int argc, char **argv) {
  struct threadpool_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_threadpool, "threadpool", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if (o.trace && o.duration_ms) {
    dnt_error("--duration goes with a process (-p or -n), not with a trace file");
    return DNT_EXIT_USAGE;
  }
  char err[512];
  struct dnt_schema *schema = dnt_schema_new();
  struct dnt_tp_analysis *a = schema ? dnt_tp_analysis_new(schema) : NULL;
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
  dnt_tp_analysis_callbacks(&cb);
  /* ThreadPool (0x10000), verbose: worker threads, hill climbing, IO threads, enqueue/dequeue; and
   * System.Runtime's counters each second: the queue length, which no event carries since .NET 7 */
  static const struct dnt_analysis_recording rec = {
      .what = "the thread pool",
      .providers = "Microsoft-Windows-DotNETRuntime:0x10000:5,System.Runtime:0:4:EventCounterIntervalSec=1",
      .buffer_mb = BUFFER_MB};
  struct dnt_analysis_input in = {.trace = o.trace, .target = &o.target, .duration_ms = o.duration_ms};
  int r = dnt_analysis_feed(&in, &rec, "thread-pool events", &cb, a, &damaged);
  if (r) {
    rc = r;
    goto done;
  }
  if (dnt_tp_analysis_failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_tp_analysis_finish(a);
  if (dnt_output_open(&out, name, 0) < 0) goto done;
  if (o.format == DNT_FORMAT_JSON)
    dnt_tp_write_json(out.fp, a, (size_t)o.top);
  else
    dnt_tp_write_text(out.fp, a, (size_t)o.top);
  if (dnt_output_commit(&out) < 0) goto done;
  const dnt_tp_summary *s = dnt_tp_get_summary(a);
  if (s->events == 0)
    fprintf(stderr, "no thread-pool event in this trace%s (it needs the runtime's ThreadPool keyword 0x10000: record "
                    "one with 'dntrace threadpool -p PID')\n",
            s->has_queue_length || s->has_completed ? ", only System.Runtime's counters" : "");
  rc = damaged ? DNT_EXIT_FAILURE : 0;
done:
  free(name);
  dnt_tp_analysis_free(a);
  dnt_schema_free(schema);
  return rc;
}
