/* dntrace locks: lock contention, by lock (.NET 8+ names it, its object and its owner) and by
 * waiting stack, with the waits' lengths (analyze/locks.c).
 *
 * From a trace file, or from a live process: then a session with the runtime's Contention keyword
 * (0x4000) at the informational level, a stack with each event (the waiting stack), and the
 * rundown at the end that names the stacks' frames. The report goes to stdout (or -o); the live
 * session's messages to stderr. With a profile format, the waiting stacks weighted by the time
 * waited go to the profile writers instead: a contention flame graph. */
#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-analyze.h"

#define DEFAULT_TOP 10
#define STACKS_PER_LOCK 3
#define BUFFER_MB 256 /* a stack with every wait */

static const struct dnt_option locks_options[] = {
    DNT_ANALYSIS_OPT_PROFILE("text (default: a report), json, or the waiting stacks weighted by\n"
                             "the time waited: flamegraph, speedscope, folded or pprof"),
    DNT_ANALYSIS_OPT_TOP("how many locks to list (default 10)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_locks = {
    .synopsis = "dntrace locks (FILE | -p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--duration TIME] [--format FORMAT] [-o FILE] [--top N]",
    .summary = "Show lock contention, by lock and by waiting stack, with the time waited",
    .options = locks_options,
    DNT_ANALYSIS_OPERAND,
};

/* ---- the analysis, as the runner sees it ---- */

static void *locks_new(const struct dnt_schema *schema, const struct dnt_analysis_options *o) {
  struct dnt_locks_analysis *a = dnt_locks_analysis_new(schema);
  if (a) dnt_locks_analysis_stitch(a, !o->no_async);
  return a;
}
static void locks_free(void *a) { dnt_locks_analysis_free(a); }
static int locks_failed(const void *a) { return dnt_locks_analysis_failed(a); }
static void locks_finish(void *a) { dnt_locks_analysis_finish(a, STACKS_PER_LOCK); }
static const struct dnt_profile *locks_profile(const void *a) { return dnt_locks_profile(a); }

static int locks_write(FILE *fp, const void *a, const struct dnt_analysis_options *o) {
  if (o->format == DNT_FORMAT_JSON)
    dnt_locks_write_json(fp, a, (size_t)o->top);
  else
    dnt_locks_write_text(fp, a, (size_t)o->top);
  return 0;
}

static const char *locks_nothing(const void *a, const struct dnt_analysis_options *o, char *buf, size_t size) {
  (void)o;
  const dnt_locks_summary *s = dnt_locks_get_summary(a);
  if (s->waits) return NULL;
  if (!s->unpaired)
    return "no lock contention in this trace (record it with 'dntrace locks -p PID', or the runtime's "
           "Contention keyword 0x4000)";
  snprintf(buf, size, "no complete wait for a lock in this trace: %llu contention events without their other half",
           (unsigned long long)s->unpaired);
  return buf;
}

/* ---- the command ---- */

int cmd_locks(int argc, char **argv) {
  struct dnt_analysis_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_locks, "locks", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  /* the waits (informational), each with its stack, and the rundown that names the frames */
  static const struct dnt_analysis_recording rec = {.what = "the lock contention",
                                                    .providers = "Microsoft-Windows-DotNETRuntime:0x4000:4",
                                                    .stacks = 1, .rundown = 1, .buffer_mb = BUFFER_MB};
  static const struct dnt_analysis_cmd locks = {
      .noun = "waits", .rec = &rec, .create = locks_new, .destroy = locks_free,
      .callbacks = dnt_locks_analysis_callbacks, .failed = locks_failed, .finish = locks_finish,
      .write = locks_write, .nothing = locks_nothing,
      .profile = locks_profile, .profile_title = "locks", .profile_measure = "time waited for locks"};
  rc = dnt_analysis_run(&locks, &o);
  dnt_view_release(&o.view);
  return rc;
}
