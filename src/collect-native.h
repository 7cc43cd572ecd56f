/* Linux perf beside an EventPipe session: the one pipeline of `dntrace perf` and `collect
 * --native`. Beside TRACE.nettrace it writes TRACE.perf.data (cpu-clock samples with call chains,
 * and for collect --native the scheduler's switches where tracefs can be read), TRACE.perf.map
 * (the runtime's perf map, turned on for the run) and, for collect --native, TRACE.threads
 * (`tid<TAB>name` of the target's threads), all on CLOCK_MONOTONIC like EventPipe's timestamps.
 * Command-line glue: messages are printed. */
#ifndef DNT_COLLECT_NATIVE_H
#define DNT_COLLECT_NATIVE_H

#include "dnt-perf.h"
#include "session.h"

/* The perf library on a session, its messages printed: dntrace perf and collect --native. */

/* perf usable here, for pid (0: any target; dnt_perf_check): 0, or -1 with the fix printed.
 * Also starts perf through a helper that makes it die with us, and puts right what a killed
 * earlier run left (dnt_perf_leftovers). */
int dnt_perf_usable(int pid);

/* perf may watch pid (dnt_perf_check: whose process it is matters at paranoid 2): 0, or -1 with
 * the fix printed; a warning is printed when it may watch only part (no kernel frames). */
int dnt_perf_may_watch(int pid);
/* Turns off perf maps a killed dntrace left on (a warning for each) and removes its temporary
 * directories; verbose: a line with the counts. */
void dnt_perf_leftovers(int verbose);
/* The target's perf map on for the run, and off again (copied to save_to first, if not NULL). */
void dnt_perfmap_on(struct dnt_perfmap_run *m, const dnt_session *s);
void dnt_perfmap_off(struct dnt_perfmap_run *m, const dnt_session *s, const char *save_to);
/* dnt_perf_record_start, its error printed. */
int dnt_perf_start(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, int sched, const char *out,
                   void (*on_exit)(void *ud), void *ud);
/* dnt_perf_record_ok, perf's words printed when it failed. */
int dnt_perf_recorded(struct dnt_perf_record *pr, const char *out);

/* dnt_perf_load, its warnings and error printed, and the speed it read perf script's text at;
 * then, when trace is not NULL, that trace's method table read and prof finished (when it is
 * NULL, both are the caller's to do). */
dnt_perf_reader *dnt_perf_read(struct dnt_profile *prof, const char *data, const char *trace, const char *map,
                               double sample_ms, struct dnt_symtab *perfmap, dnt_perf_observe_fn fn, void *ud);


struct dnt_native {
  int sched, hz;
  int began; /* the perf map may be on: end or abandon puts it back */
  struct dnt_perf_record perf;
  struct dnt_perfmap_run pm;
  char *data, *map, *threads; /* the files written (threads NULL: not kept) */
  char *names;                /* the threads seen so far: "tid\tname\n" lines */
  size_t names_len;
};

/* Names the files from trace (borrowed: the .nettrace path) and turns the perf map on (call
 * dnt_perf_usable first). sched_and_threads: record the scheduler's switches where tracefs
 * allows (a warning where not) and keep the thread names (collect --native, for compare). */
void dnt_native_begin(struct dnt_native *n, const dnt_session *s, const char *trace, int hz, int sched_and_threads);
/* Starts perf on loop; on_exit(ud) once it has exited. 0 or -1 (printed). */
int dnt_native_start(struct dnt_native *n, uv_loop_t *loop, const dnt_session *s, void (*on_exit)(void *), void *ud);
/* Notes the target's thread names (while it lives) and asks perf to stop. */
void dnt_native_stop(struct dnt_native *n, const dnt_session *s);
/* After the loop: the files written, the perf map off again (n->pm.saved: its copy is there).
 * 0, or -1 when perf failed (printed). */
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
