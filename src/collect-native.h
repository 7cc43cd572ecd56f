/* `collect --native`: Linux perf recording the same process while the EventPipe session runs,
 * for `dntrace compare`. Beside TRACE.nettrace it writes TRACE.perf.data (cpu-clock samples
 * with call chains, and the scheduler's switches where tracefs can be read), TRACE.perf.map (the
 * runtime's perf map, turned on for the run) and TRACE.threads (`tid<TAB>name` of the target's
 * threads), all on CLOCK_MONOTONIC like EventPipe's timestamps. */
#ifndef DNT_COLLECT_NATIVE_H
#define DNT_COLLECT_NATIVE_H

#include "perf-record.h"
#include "session.h"

struct dnt_native {
  int sched, hz;
  struct dnt_perf_record perf;
  struct dnt_perfmap_run pm;
  char *data, *map, *threads; /* the files written */
  char *names;                /* the threads seen so far: "tid\tname\n" lines */
  size_t names_len;
};

/* Checks perf and turns the perf map on. trace: the .nettrace path (borrowed). 0, or -1 with the
 * reason printed (nothing is left turned on). */
int dnt_native_begin(struct dnt_native *n, const dnt_session *s, const char *trace, int hz);
/* Starts perf on loop; on_exit(ud) once it has exited. 0 or -1 (printed). */
int dnt_native_start(struct dnt_native *n, uv_loop_t *loop, const dnt_session *s, void (*on_exit)(void *), void *ud);
/* Notes the target's thread names (while it lives) and asks perf to stop. */
void dnt_native_stop(struct dnt_native *n, const dnt_session *s);
/* After the loop: the files written, the perf map off again. 0, or -1 when perf failed (printed). */
int dnt_native_end(struct dnt_native *n, const dnt_session *s);
/* The run ends before the session began (perf or the session failed to start): perf stopped
 * and the loop run until it has exited (its words are then in n->perf), the perf map off again,
 * its recording removed. */
void dnt_native_abandon(struct dnt_native *n, const dnt_session *s, uv_loop_t *loop);
void dnt_native_release(struct dnt_native *n);
/* TRACE.nettrace's sibling TRACE<ext> (".perf.data"...); a path without .nettrace gets ext added.
 * Returns a new string: the caller frees it. */
char *dnt_native_sibling(const char *trace, const char *ext);

#endif
