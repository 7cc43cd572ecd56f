/* dntrace locks: lock contention, by lock (.NET 8+ names it, its object and its owner) and by
 * waiting stack, with the waits' lengths (analyze/locks.c).
 *
 * From a trace file, or from a live process: then a session with the runtime's Contention keyword
 * (0x4000) at the informational level, a stack with each event (the waiting stack), and the
 * rundown at the end that names the stacks' frames. The report goes to stdout (or -o); the live
 * session's messages to stderr. With a profile format, the waiting stacks weighted by the time
 * waited go to the profile writers instead: a contention flame graph. */
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
#define STACKS_PER_LOCK 3
#define BUFFER_MB 256 /* a stack with every wait */

struct locks_options {
  struct dnt_session_target target;
  const char *trace, *output;
  int format;
  long top;
  uint64_t duration_ms;
};

/* the profile formats but chromium, a timeline of samples (these are waits, not samples in time) */
#define FORMATS                                                                                             \
  (DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON) | DNT_FORMAT_BIT(DNT_FORMAT_FLAMEGRAPH) | \
   DNT_FORMAT_BIT(DNT_FORMAT_SPEEDSCOPE) | DNT_FORMAT_BIT(DNT_FORMAT_FOLDED) | DNT_FORMAT_BIT(DNT_FORMAT_PPROF))

#define O(f) offsetof(struct locks_options, f)
static const struct dnt_option locks_options[] = {
    DNT_OPT_TEXT("FILE", "a trace (.nettrace, .gz, .zip, - for stdin) to analyse, or instead:"),
    DNT_OPT_GROUP(dnt_options_target_pid, O(target)),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_FORMAT("FORMAT", O(format), FORMATS,
                   "text (default: a report), json, or the waiting stacks weighted by\n"
                   "the time waited: flamegraph, speedscope, folded or pprof"),
    DNT_OPT_OUTPUT("FILE", O(output), "write to FILE (default: standard output)"),
    DNT_OPT_TOP(O(top), 1000000, "how many locks to list (default 10)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_locks = {
    .synopsis = "dntrace locks (FILE | -p PID | -n NAME) [--duration TIME] [--format FORMAT] [-o FILE] [--top N]",
    .summary = "Show lock contention, by lock and by waiting stack, with the time waited",
    .options = locks_options,
    .operand = DNT_OPERAND_OR_TARGET,
    .operand_offset = O(trace),
    .no_operand = "name a trace file, or a process with -p PID or -n NAME",
    .many_operands = "one trace file, or one process, at a time",
};
#undef O

int cmd_locks(int argc, char **argv) {
  struct locks_options o = {.top = DEFAULT_TOP};
  int rc = dnt_options_parse(&usage_locks, "locks", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if (o.trace && o.duration_ms) {
    dnt_error("--duration goes with a process (-p or -n), not with a trace file");
    return DNT_EXIT_USAGE;
  }
  int profile = o.format != DNT_FORMAT_TEXT && o.format != DNT_FORMAT_JSON && o.format != DNT_FORMAT_NONE;
  char err[512];
  struct dnt_schema *schema = dnt_schema_new();
  struct dnt_locks_analysis *a = schema ? dnt_locks_analysis_new(schema) : NULL;
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
  const char *ext = profile ? dnt_convert_extension(dnt_format_name(o.format))
                            : o.format == DNT_FORMAT_JSON ? ".json" : ".txt";
  name = dnt_output_name(o.output ? o.output : "-", ext);
  if (strcmp(name, "-") != 0 && dnt_output_check(name, 1) < 0) goto done;

  ntr_callbacks cb;
  dnt_locks_analysis_callbacks(&cb);
  /* the waits (informational), each with its stack, and the rundown that names the frames */
  static const struct dnt_analysis_recording rec = {.what = "the lock contention",
                                                    .providers = "Microsoft-Windows-DotNETRuntime:0x4000:4",
                                                    .stacks = 1, .rundown = 1, .buffer_mb = BUFFER_MB};
  struct dnt_analysis_input in = {.trace = o.trace, .target = &o.target, .duration_ms = o.duration_ms};
  int r = dnt_analysis_feed(&in, &rec, "waits", &cb, a, &damaged);
  if (r) {
    rc = r;
    goto done;
  }
  dnt_locks_analysis_finish(a, STACKS_PER_LOCK);
  if (dnt_locks_analysis_failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  const dnt_locks_summary *s = dnt_locks_get_summary(a);
  if (profile) {
    if (s->waits == 0) { /* an empty flame graph would say nothing */
      dnt_error("no lock contention in this trace: no stacks to write");
      goto done;
    }
    r = dnt_convert_profile(dnt_locks_profile(a), dnt_format_name(o.format), o.trace ? o.trace : "locks",
                            "time waited for locks", name);
    rc = r ? r : damaged ? DNT_EXIT_FAILURE : 0;
    goto done;
  }
  if (dnt_output_open(&out, name, 0) < 0) goto done;
  if (o.format == DNT_FORMAT_JSON)
    dnt_locks_write_json(out.fp, a, (size_t)o.top);
  else
    dnt_locks_write_text(out.fp, a, (size_t)o.top);
  if (dnt_output_commit(&out) < 0) goto done;
  if (s->waits == 0 && s->unpaired)
    fprintf(stderr, "no complete wait for a lock in this trace: %llu contention events without their other half\n",
            (unsigned long long)s->unpaired);
  else if (s->waits == 0)
    fprintf(stderr, "no lock contention in this trace (record it with 'dntrace locks -p PID', or the runtime's "
                    "Contention keyword 0x4000)\n");
  rc = damaged ? DNT_EXIT_FAILURE : 0;
done:
  free(name);
  dnt_locks_analysis_free(a);
  dnt_schema_free(schema);
  return rc;
}
