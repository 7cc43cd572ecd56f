/* The analysis commands (gc, jit, threadpool, allocs, exceptions, locks): one body for them all.
 * Each reads a trace file or records a live process (analysis-input.h), streams the events into
 * its analysis (analyze/), and writes a text or JSON report, or for some a profile of the stacks,
 * to stdout or -o. What differs is described by a struct dnt_analysis_cmd; the options they share
 * are the rows below, so each cmd-*.c lists only its own. Command-line glue: it prints. */
#ifndef DNT_ANALYSIS_CMD_H
#define DNT_ANALYSIS_CMD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis-input.h"
#include "ntr.h"
#include "options.h"
#include "view.h"
#include "session.h"

struct dnt_profile;
struct dnt_schema;

/* The options of every analysis command. A command with more puts this first in its own struct
 * (so that a pointer to one is a pointer to the other, and the rows' offsets hold for both). */
struct dnt_analysis_options {
  struct dnt_session_target target;
  const char *trace, *output; /* trace: the FILE operand, NULL for a process */
  int format;                 /* enum dnt_format; DNT_FORMAT_NONE: text */
  long top;
  uint64_t duration_ms;
  struct dnt_view_opts view; /* a profile format's --thread, --focus, --exclude, --hide-idle */
  int no_async;              /* a profile format's --no-async */
};

#define DNT_ANALYSIS_OFFSET(f) offsetof(struct dnt_analysis_options, f)

/* FILE, or a process (-p, -n, --diagnostic-port, -- CMD), and --duration */
#define DNT_ANALYSIS_OPT_INPUT()                                                                                  \
  DNT_OPT_TEXT("FILE", "a trace (.nettrace, .gz, .zip, - for stdin) to analyse, or instead:"),                    \
      DNT_OPT_GROUP(dnt_options_target_any, DNT_ANALYSIS_OFFSET(target)),                                         \
      DNT_OPT_FLAG(0, "show-child-io", DNT_ANALYSIS_OFFSET(target.show_child_io),                                 \
                   "with --: let CMD use this terminal (else its output is discarded)"),                          \
      DNT_OPT_GROUP(dnt_options_duration, DNT_ANALYSIS_OFFSET(duration_ms))

#define DNT_ANALYSIS_OPT_TOP(help) DNT_OPT_TOP(DNT_ANALYSIS_OFFSET(top), 1000000, help)

/* A report only: --format text|json, -o, --top (top_help: what --top counts, and its default) */
#define DNT_ANALYSIS_OPT_REPORT(top_help)                                                                         \
  DNT_ANALYSIS_OPT_INPUT(),                                                                                       \
      DNT_OPT_FORMAT("FORMAT", DNT_ANALYSIS_OFFSET(format),                                                       \
                     DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON),                           \
                     "text (default: a table) or json"),                                                          \
      DNT_OPT_OUTPUT("FILE", DNT_ANALYSIS_OFFSET(output), "write the report to FILE (default: standard output)"), \
      DNT_ANALYSIS_OPT_TOP(top_help)

/* A report or a profile of stacks: every profile format but chromium, a timeline of samples in
 * time (what these weigh are events, not samples) */
#define DNT_ANALYSIS_FORMATS_PROFILE                                                                              \
  (DNT_FORMAT_BIT(DNT_FORMAT_TEXT) | DNT_FORMAT_BIT(DNT_FORMAT_JSON) | DNT_FORMAT_BIT(DNT_FORMAT_FLAMEGRAPH) |    \
   DNT_FORMAT_BIT(DNT_FORMAT_SPEEDSCOPE) | DNT_FORMAT_BIT(DNT_FORMAT_FOLDED) | DNT_FORMAT_BIT(DNT_FORMAT_PPROF))
#define DNT_ANALYSIS_OPT_PROFILE(format_help)                                                                     \
  DNT_ANALYSIS_OPT_INPUT(),                                                                                       \
      DNT_OPT_FORMAT("FORMAT", DNT_ANALYSIS_OFFSET(format), DNT_ANALYSIS_FORMATS_PROFILE, format_help),           \
      DNT_OPT_OUTPUT("FILE", DNT_ANALYSIS_OFFSET(output), "write to FILE (default: standard output)"),            \
      DNT_OPT_FLAG(0, "no-async", DNT_ANALYSIS_OFFSET(no_async),                                                  \
                   "the stacks of events in async tasks as taken, on the pool's\n"                                 \
                   "threads (by default, with the task library's events in the\n"                                  \
                   "trace, under the code that awaited or started the task)"),                                    \
      DNT_OPT_GROUP(dnt_options_view, DNT_ANALYSIS_OFFSET(view))

/* The operand rules of a struct dnt_usage: a trace file, or a process */
#define DNT_ANALYSIS_OPERAND                                                                                      \
  .operand = DNT_OPERAND_OR_TARGET, .operand_offset = DNT_ANALYSIS_OFFSET(trace),                                 \
  .no_operand = "name a trace file, or a process with -p PID, -n NAME, --diagnostic-port PATH or -- CMD",         \
  .many_operands = "one trace file, or one process, at a time"

/* What an analysis command does besides the common body. The analysis is a void * here: each
 * command adapts its analysis's functions (small static functions in its cmd-*.c). o is the
 * command's options (its own struct, which begins with struct dnt_analysis_options). */
struct dnt_analysis_cmd {
  const char *noun;                          /* "GCs": what the warnings say was cut or dropped */
  const struct dnt_analysis_recording *rec;  /* what a live process is asked for */
  /* A new analysis (owned by the caller, freed with destroy), or NULL when out of memory. */
  void *(*create)(const struct dnt_schema *schema, const struct dnt_analysis_options *o);
  void (*destroy)(void *a);
  void (*callbacks)(ntr_callbacks *cb);
  void (*before_feed)(void *a, const struct dnt_analysis_options *o); /* or NULL */
  int (*failed)(const void *a);  /* nonzero: memory ran out (sticky) */
  void (*finish)(void *a);
  /* The text or JSON report (o->format) to fp: 0, or -1 when out of memory. */
  int (*write)(FILE *fp, const void *a, const struct dnt_analysis_options *o);
  /* The line to say that the analysis found nothing (buf is there to format it in), or NULL when
   * it found something. Finding nothing is an error in every analysis, whatever the format: the
   * line alone, exit 1, nothing written. */
  const char *(*nothing)(const void *a, const struct dnt_analysis_options *o, char *buf, size_t size);
  /* The profile formats (NULL if its --format has none): the profile (owned by the analysis),
   * the title when the input is a process, and what its weight measures. */
  const struct dnt_profile *(*profile)(const void *a);
  const char *profile_title, *profile_measure;
};

/* The command's body after its options are parsed into o (cmd and o stay the caller's): the exit
 * code, the errors printed. Dies (exit 1) when out of memory, as the commands did. */
int dnt_analysis_run(const struct dnt_analysis_cmd *cmd, const struct dnt_analysis_options *o);

#endif
