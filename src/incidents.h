/* The incidents of `watch` and `serve --rules`: a rule's firing (agent/) and its actions, run one
 * after the other on the caller's libuv loop as this program's own commands (dump, gcdump,
 * stacks, collect: children watched by the loop), a shell command, or the caller's save-ring; a
 * line (or a JSON object) per incident once its actions are done, kept for a listing too; the
 * output directory held under a budget. Command-line glue: it prints (the log on stdout, the
 * budget's removals and failures to start on stderr). */
#ifndef DNT_INCIDENTS_H
#define DNT_INCIDENTS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "dnt-agent.h"
#include "dnt-counters.h"
#include "ntr.h"
#include "options.h"
#include "providers.h"

struct dnt_incidents;

struct dnt_incident_opts {
  const char *dir;  /* where the files go ("." when NULL) */
  int json;         /* the log as JSON objects, a line each */
  long max_disk_mb; /* the files of the directory kept under this (0: no bound) */
};

/* save-ring, the caller's: starts writing the ring of process pid to path and calls
 * dnt_incidents_saved once done; 0, or -1 when it cannot (no ring, no session): the action fails
 * at once. */
typedef int (*dnt_save_ring_fn)(void *ud, int pid, const char *path);

/* Writes the window ring holds to path (atomically: a file there is replaced only once this one
 * is whole). 0, or -1 with the error said. */
int dnt_ring_save(const ntr_ring *ring, const char *path);

/* A runner on loop (borrowed), with o (copied; its strings borrowed). save may be NULL. NULL when
 * the program's own file cannot be found. */
struct dnt_incidents *dnt_incidents_new(uv_loop_t *loop, const struct dnt_incident_opts *o, dnt_save_ring_fn save,
                                        void *ud);
/* Frees it; call once the loop has run its children out (dnt_incidents_idle). */
void dnt_incidents_free(struct dnt_incidents *r);

/* A firing of process pid (process: its name), queued; its actions start when those of the ones
 * before it are done. f is borrowed for the call (the incident reads its rule again from the
 * rule's text: the engine may be gone before the actions are done). */
void dnt_incidents_fire(struct dnt_incidents *r, const struct dnt_firing *f, int pid, const char *process);
/* The caller's save-ring is over: ok, the file written. */
void dnt_incidents_saved(struct dnt_incidents *r, int ok);
/* 1 when nothing is queued or running. */
int dnt_incidents_idle(const struct dnt_incidents *r);

/* The incidents done so far (the newest last, at most the last 1000), each as its JSON object,
 * borrowed until the next call into the runner. */
size_t dnt_incidents_done(const struct dnt_incidents *r);
const char *dnt_incidents_json(const struct dnt_incidents *r, size_t i);
/* Whether path (a name inside the output directory, no '/') is a file an incident wrote: 1 or 0. */
int dnt_incidents_wrote(const struct dnt_incidents *r, const char *name);
const char *dnt_incidents_dir(const struct dnt_incidents *r);

/* ---- the rules of a command line ---- */

/* Takes a rule that parsed (r, the callee's: added to an engine or released), with its text and
 * where it was given ("--rule '...'" or "FILE:N"). 0, or DNT_EXIT_USAGE with one error line printed. */
typedef int (*dnt_rule_take_fn)(void *ud, struct dnt_rule *r, const char *text, const char *where);

/* Each of texts (borrowed), then each line of file (NULL: none; blank and '#' lines skipped),
 * parsed; the counter of a counter rule added to specs, the events another rule wants to
 * providers (the runtime's keywords for exceptions, GC pauses and its named events; every event
 * of another provider); then given to take. The first that does not parse, whose counter specs
 * refuses, whose event cannot be asked for, or that take refuses stops the reading with one
 * error line ("WHERE, column N: expected ..."). 0 or DNT_EXIT_USAGE. */
int dnt_rules_read(const struct dnt_strlist *texts, const char *file, struct dnt_counter_specs *specs,
                   struct dnt_providers *providers, dnt_rule_take_fn take, void *ud);

#endif
