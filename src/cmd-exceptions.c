/* dntrace exceptions: the exceptions a process threw, by type and message, with their throw stacks,
 * where they were caught and how often (analyze/exceptions.c).
 *
 * From a trace file, or from a live process: then a session with the runtime's Exception keyword
 * (0x8000) at the informational level (the throws, and the catches, filters and finallys that say
 * whether each was handled), a stack with each event, and the rundown at the end that names the
 * stacks' frames. The events stream into the analysis; nothing is kept but one row per type,
 * message and stack. The report goes to stdout (or -o); the live session's messages to
 * stderr. Groups are by type and throw site unless --by says otherwise. With a profile format, the throw stacks (one sample per throw) go to the profile
 * writers instead: a flame graph of where exceptions come from. */
#include <stddef.h>

#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-analyze.h"
#include "util.h"

#define DEFAULT_TOP 10
#define STACKS_PER_GROUP 3
#define BUFFER_MB 256 /* a stack with every throw: a busy process fills a small buffer */

struct exc_options {
  struct dnt_analysis_options common; /* first: the shared rows' offsets hold here too */
  int by;                             /* dnt_exc_grouping */
};

static int parse_by(void *field, const char *value) {
  dnt_exc_grouping by;
  if (dnt_exc_grouping_parse(value, &by) != 0)
    return dnt_error("--by: '%s' is not site, type, message or stack", value);
  *(int *)field = (int)by;
  return 0;
}

#define O(f) offsetof(struct exc_options, f)
static const struct dnt_option exc_options[] = {
    DNT_ANALYSIS_OPT_PROFILE("text (default: a report), json, or the throw stacks as a profile:\n"
                             "flamegraph, speedscope, folded or pprof"),
    DNT_ANALYSIS_OPT_TOP("how many groups to list (default 10)"),
    DNT_OPT_PARSE(0, "by", "WHAT", O(by), parse_by,
                  "what makes a group: site (default: the type and the innermost frame\n"
                  "of the program's own code that threw it, its messages shown with\n"
                  "ids and numbers folded), type, message (each exact message) or stack"),
    DNT_OPT_END(),
};
#undef O

const struct dnt_usage usage_exceptions = {
    .synopsis = "dntrace exceptions (FILE | -p PID | -n NAME | --diagnostic-port PATH | -- CMD...) [--duration TIME] [--format FORMAT] [-o FILE] [--top N] [--by WHAT]",
    .summary = "Show the exceptions thrown, by type and throw site, with their messages, stacks and catches",
    .options = exc_options,
    DNT_ANALYSIS_OPERAND,
};

/* ---- the analysis, as the runner sees it ---- */

static void *exc_new(const struct dnt_schema *schema, const struct dnt_analysis_options *o) {
  struct dnt_exceptions_analysis *a = dnt_exceptions_analysis_new(schema);
  if (a) dnt_exceptions_analysis_group_by(a, (dnt_exc_grouping)((const struct exc_options *)o)->by);
  if (a) dnt_exceptions_analysis_stitch(a, !o->no_async);
  return a;
}
static void exc_free(void *a) { dnt_exceptions_analysis_free(a); }
static int exc_failed(const void *a) { return dnt_exceptions_analysis_failed(a); }
static void exc_finish(void *a) { dnt_exceptions_analysis_finish(a, STACKS_PER_GROUP); }
static const struct dnt_profile *exc_profile(const void *a) { return dnt_exceptions_profile(a); }

/* a live session asks for the catches (below): a trace file may not have them */
static void exc_before_feed(void *a, const struct dnt_analysis_options *o) {
  if (!o->trace) dnt_exceptions_analysis_catches_recorded(a);
}

static int exc_write(FILE *fp, const void *a, const struct dnt_analysis_options *o) {
  if (o->format == DNT_FORMAT_JSON)
    dnt_exceptions_write_json(fp, a, (size_t)o->top);
  else
    dnt_exceptions_write_text(fp, a, (size_t)o->top);
  return 0;
}

static const char *exc_nothing(const void *a, const struct dnt_analysis_options *o, char *buf, size_t size) {
  (void)o, (void)buf, (void)size;
  return dnt_exceptions_get_summary(a)->thrown
             ? NULL
             : "no exception thrown in this trace (record them with 'dntrace exceptions -p PID', or the runtime's "
               "Exception keyword 0x8000)";
}

/* ---- the command ---- */

int cmd_exceptions(int argc, char **argv) {
  struct exc_options opts = {.common.top = DEFAULT_TOP, .by = DNT_EXC_BY_SITE};
  int rc = dnt_options_parse(&usage_exceptions, "exceptions", argc, argv, &opts);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  /* throws, catches, filters and finallys (informational), each with its stack, and the rundown
   * that names the frames */
  static const struct dnt_analysis_recording rec = {.what = "the exceptions",
                                                    .providers = "Microsoft-Windows-DotNETRuntime:0x8000:4",
                                                    .stacks = 1, .rundown = 1, .buffer_mb = BUFFER_MB};
  static const struct dnt_analysis_cmd exceptions = {
      .noun = "exceptions", .rec = &rec, .create = exc_new, .destroy = exc_free,
      .callbacks = dnt_exceptions_analysis_callbacks, .before_feed = exc_before_feed, .failed = exc_failed,
      .finish = exc_finish, .write = exc_write, .nothing = exc_nothing,
      .profile = exc_profile, .profile_title = "exceptions", .profile_measure = "exceptions thrown"};
  rc = dnt_analysis_run(&exceptions, &opts.common);
  dnt_view_release(&opts.common.view);
  return rc;
}
