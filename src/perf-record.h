/* Linux perf beside an EventPipe session, for `dntrace perf` and `collect --native`: the checks
 * that say in one line why perf cannot run, `perf record` as a child on the caller's libuv loop
 * (argv, never a shell), and the runtime's perf map turned on for the run and off again. CLI
 * code: errors are printed. */
#ifndef DNT_PERF_RECORD_H
#define DNT_PERF_RECORD_H

#include <stddef.h>
#include <uv.h>

#include "session.h"

/* perf on PATH and allowed to watch another process; 0, or -1 with the fix printed. */
int dnt_perf_check(void);

/* Whether perf may record the scheduler's switches here (tracefs readable). */
int dnt_perf_can_trace_sched(void);

struct dnt_perf_record {
  uv_process_t proc;
  uv_pipe_t err;
  int running, status, signal, started;
  char err_text[16 * 1024];
  size_t err_len;
  char ctl_dir[256], ctl_arg[600]; /* perf's control fifos, removed when it exits */
  int ctl_fd, ack_fd;
  void (*on_exit)(void *ud);
  void *ud;
};

/* Starts `perf record -e cpu-clock/freq=hz/ [-e sched:sched_switch -e sched:sched_waking] -g
 * -k CLOCK_MONOTONIC -D -1 --control fifo:... -p pid -o out` and returns once perf records (its
 * events turned on through the control fifo and acknowledged), so that what follows is all in
 * the recording. on_exit(ud) is called once perf has exited. pr: caller-owned, lives until then.
 * 0 or -1 (the error printed; a perf that started is being stopped: run the loop to its exit). */
int dnt_perf_record_start(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, int sched, const char *out,
                          void (*on_exit)(void *ud), void *ud);
/* Asks perf to stop (SIGINT: it writes its file, then exits). */
void dnt_perf_record_stop(struct dnt_perf_record *pr);
/* After exit: whether perf did its job; if not, prints why (its own words). */
int dnt_perf_record_ok(struct dnt_perf_record *pr, const char *out);

/* The runtime's perf map for the length of a run: on through IPC unless the environment had it
 * on already, off again (and its file removed if the run made it) at the end. */
struct dnt_perfmap_run {
  int was_on, we_enabled, existed;
  char path[2200]; /* the map as seen from here, through /proc/PID/root */
};
void dnt_perfmap_begin(struct dnt_perfmap_run *m, const dnt_session *s);
/* Copies the map to save_to (if not NULL; a warning when it cannot), then turns it off. */
void dnt_perfmap_end(struct dnt_perfmap_run *m, const dnt_session *s, const char *save_to);

#endif
