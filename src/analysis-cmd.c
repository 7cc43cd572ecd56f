/* The body of every analysis command (analysis-cmd.h). */
#include <stdlib.h>
#include <string.h>

#include "analysis-cmd.h"
#include "builtin.h"
#include "dnt-profile.h"
#include "dnt-trace.h"
#include "output.h"
#include "util.h"

static int is_report(int format) {
  return format == DNT_FORMAT_NONE || format == DNT_FORMAT_TEXT || format == DNT_FORMAT_JSON;
}

static int write_report(const struct dnt_analysis_cmd *cmd, const void *a, const struct dnt_analysis_options *o,
                        const char *name) {
  struct dnt_output out = {0};
  if (dnt_output_open(&out, name, 0) < 0) return DNT_EXIT_FAILURE;
  if (cmd->write(out.fp, a, o) < 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  return dnt_output_commit(&out) < 0 ? DNT_EXIT_FAILURE : 0;
}

/* The report, or the profile: 0, or the exit code with the error printed. */
static int write_output(const struct dnt_analysis_cmd *cmd, const void *a, const struct dnt_analysis_options *o,
                        const char *name) {
  if (is_report(o->format)) return write_report(cmd, a, o, name);
  /* the analysis's profile is its own, finished: narrowed here, written once */
  uint64_t before = dnt_profile_samples(cmd->profile(a));
  dnt_view_apply((struct dnt_profile *)cmd->profile(a), &o->view);
  if (before && !dnt_profile_samples(cmd->profile(a))) {
    dnt_error("no stack of the %s is in the view --thread, --focus, --exclude and --hide-idle asked for", cmd->noun);
    return DNT_EXIT_FAILURE;
  }
  return dnt_convert_profile(cmd->profile(a), dnt_format_name(o->format), o->trace ? o->trace : cmd->profile_title,
                             cmd->profile_measure, name);
}

int dnt_analysis_run(const struct dnt_analysis_cmd *cmd, const struct dnt_analysis_options *o) {
  if (o->trace && o->duration_ms) {
    dnt_error("--duration goes with a process (-p or -n), not with a trace file");
    return DNT_EXIT_USAGE;
  }
  if (o->target.show_child_io && !o->target.child_argv) {
    dnt_error("--show-child-io goes with a command to start (-- CMD)");
    return DNT_EXIT_USAGE;
  }
  char err[512];
  struct dnt_schema *schema = dnt_schema_new();
  void *a = schema ? cmd->create(schema, o) : NULL;
  if (!a) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  char *name = NULL;
  struct dnt_analysis_outcome outcome = {0};
  int rc = DNT_EXIT_FAILURE;
  if (dnt_schema_load_default(schema, err, sizeof err) < 0) {
    dnt_error("cannot read the runtime's event layouts: %s", err);
    goto done;
  }
  /* the output's file is checked before a session is started for it */
  const char *ext = o->format == DNT_FORMAT_JSON ? ".json"
                    : is_report(o->format)       ? ".txt"
                                                 : dnt_convert_extension(dnt_format_name(o->format));
  name = dnt_output_name(o->output ? o->output : "-", ext);
  if (strcmp(name, "-") != 0 && dnt_output_check(name, 1) < 0) goto done;

  ntr_callbacks cb;
  cmd->callbacks(&cb);
  if (cmd->before_feed) cmd->before_feed(a, o);
  struct dnt_analysis_input in = {.trace = o->trace, .target = &o->target, .duration_ms = o->duration_ms};
  int r = dnt_analysis_feed(&in, cmd->rec, cmd->noun, &cb, a, &outcome);
  if (r) {
    rc = r;
    goto done;
  }
  if (cmd->failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  cmd->finish(a);
  if (cmd->failed(a)) dnt_die(DNT_EXIT_FAILURE, "out of memory");

  char line[512];
  const char *nothing = cmd->nothing(a, o, line, sizeof line);
  if (nothing) { /* one line, whatever the format (an empty output would say less), exit 1 in
                   * every analysis, as report and convert: nothing to analyse is no answer */
    dnt_error("%s", nothing);
    goto done;
  }
  r = write_output(cmd, a, o, name);
  if (r) {
    rc = r;
    goto done;
  }
  rc = outcome.damaged ? DNT_EXIT_FAILURE : 0;
  if (outcome.command_ran) rc = outcome.command_exit; /* dotnet-trace's rule, as collect's: the command's exit code */
done:
  free(name);
  cmd->destroy(a);
  dnt_schema_free(schema);
  return rc;
}
