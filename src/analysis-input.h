/* The input of an analysis command (gc, and the analyses that follow its shape): a trace file, or
 * a live process recorded for --duration with just the events the analysis needs. Either way the
 * events stream into the analysis's parser callbacks; nothing is kept on disk. Messages (errors,
 * warnings, the status line) go to stderr, as every command's do. */
#ifndef DNT_ANALYSIS_INPUT_H
#define DNT_ANALYSIS_INPUT_H

#include <stdint.h>

#include "ntr.h"
#include "session.h"

/* What to ask a live runtime for. */
struct dnt_analysis_recording {
  const char *what;      /* "the GCs": the status line says "Recording the GCs of process ..." */
  const char *profiles;  /* dotnet-trace profile names, comma-separated (src/providers.c), or NULL */
  const char *providers; /* a --providers spec added to them, or NULL */
  int stacks;            /* a stack with each event (allocations, exceptions, contention) */
  int rundown;           /* the method and module rundown at the end, to name the stacks' frames */
  unsigned buffer_mb;    /* the session's buffer; 0: 64 MB */
  /* when set, asked after each piece of the stream with the analysis (the callbacks' ud): 1 when
   * it has what it came for (a heap walk's end), and the session stops (its rundown follows) */
  int (*done)(const void *analysis);
  int duration_is_timeout; /* with done: the input's duration is how long to wait for it at most */
  /* when set, and stderr is a terminal: what the analysis has so far, written into buf (cap
   * bytes), shown on one line rewritten twice a second while the session runs */
  void (*progress)(const void *analysis, char *buf, size_t cap);
};

struct dnt_analysis_input {
  const char *trace;                       /* a trace file ("-": stdin), or NULL for a process: */
  const struct dnt_session_target *target; /* -p, -n, --diagnostic-port or -- CMD */
  uint64_t duration_ms;                    /* 0: until Ctrl+C or the process's end */
};

/* How the input ended, beside what the analysis saw. */
struct dnt_analysis_outcome {
  int damaged;      /* the trace file is damaged part-way: what came before is reported, exit 1 */
  int command_ran;  /* -- CMD was started ... */
  int command_exit; /* ... and exited with this (128 + signal when killed) */
};

/* Feeds cb/ud with every event of in (see above), recording as rec asks from a live process;
 * a command (-- CMD) is started suspended, resumed once the session runs, and waited for after
 * it (the analysis's session ends with the command, or at --duration or Ctrl+C). Returns 0 when
 * the analysis has something to report, *out filled; else the exit code, the error printed.
 * `noun` names what the analysis reports ("GCs") in the warnings. */
int dnt_analysis_feed(const struct dnt_analysis_input *in, const struct dnt_analysis_recording *rec,
                      const char *noun, const ntr_callbacks *cb, void *ud, struct dnt_analysis_outcome *out);

#endif
