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
#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-analyze.h"

#define DEFAULT_TOP 20
#define BUFFER_MB 64 /* enqueue and dequeue events can be many */

static const struct dnt_option threadpool_options[] = {
    DNT_ANALYSIS_OPT_REPORT("how many of the last adjustments to list in the text report (default 20)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_threadpool = {
    .synopsis = "dntrace threadpool (FILE | -p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--duration TIME] [--format FORMAT] [-o FILE] [--top N]",
    .summary = "Show the thread pool's threads, hill climbing's adjustments and starvation, from a trace or a live process",
    .options = threadpool_options,
    DNT_ANALYSIS_OPERAND,
};

/* ---- the analysis, as the runner sees it ---- */

static void *tp_new(const struct dnt_schema *schema, const struct dnt_analysis_options *o) {
  (void)o;
  return dnt_tp_analysis_new(schema);
}
static void tp_free(void *a) { dnt_tp_analysis_free(a); }
static int tp_failed(const void *a) { return dnt_tp_analysis_failed(a); }
static void tp_finish(void *a) { dnt_tp_analysis_finish(a); }

static int tp_write(FILE *fp, const void *a, const struct dnt_analysis_options *o) {
  if (o->format == DNT_FORMAT_JSON)
    dnt_tp_write_json(fp, a, (size_t)o->top);
  else
    dnt_tp_write_text(fp, a, (size_t)o->top);
  return 0;
}

static const char *tp_nothing(const void *a, const struct dnt_analysis_options *o, char *buf, size_t size) {
  (void)o;
  const dnt_tp_summary *s = dnt_tp_get_summary(a);
  if (s->events) return NULL;
  snprintf(buf, size,
           "no thread-pool event in this trace%s (it needs the runtime's ThreadPool keyword 0x10000: record one "
           "with 'dntrace threadpool -p PID')",
           s->has_queue_length || s->has_completed ? ", only System.Runtime's counters" : "");
  return buf;
}

/* ---- the command ---- */

int cmd_threadpool(int argc, char **argv) {
  struct dnt_analysis_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_threadpool, "threadpool", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  /* ThreadPool (0x10000), verbose: worker threads, hill climbing, IO threads, enqueue/dequeue; and
   * System.Runtime's counters each second: the queue length, which no event carries since .NET 7 */
  static const struct dnt_analysis_recording rec = {
      .what = "the thread pool",
      .providers = "Microsoft-Windows-DotNETRuntime:0x10000:5,System.Runtime:0:4:EventCounterIntervalSec=1",
      .buffer_mb = BUFFER_MB};
  static const struct dnt_analysis_cmd threadpool = {
      .noun = "thread-pool events", .rec = &rec, .create = tp_new, .destroy = tp_free,
      .callbacks = dnt_tp_analysis_callbacks, .failed = tp_failed, .finish = tp_finish,
      .write = tp_write, .nothing = tp_nothing};
  return dnt_analysis_run(&threadpool, &o);
}
