/* Starts the sample .NET target for a test: plainly, in a private mount namespace with its own
 * /tmp, or in a new PID namespace, and waits until its diagnostic socket is there. */
#ifndef DNT_TEST_TARGET_H
#define DNT_TEST_TARGET_H

#include <stddef.h>
#include <sys/types.h>

typedef enum { DNT_TARGET_PLAIN, DNT_TARGET_MOUNTNS_PRIVATE_TMP, DNT_TARGET_PIDNS } dnt_target_mode;

typedef struct dnt_target_opts {
  dnt_target_mode mode;
  const char *exe;             /* the program to start; NULL for the sample's apphost */
  const char *const *args;     /* extra arguments (NULL-terminated) or NULL */
  const char *const *env;      /* extra "NAME=value" entries, or NULL */
  int wait_socket;             /* 1: wait for the diagnostic socket; 0: only for the "ready" line */
  int timeout_ms;              /* ceiling on the start, at least DNT_HANG_MS (run.h) */
  int no_wait;                 /* 1: return once started (for a runtime suspended at startup);
                                  dnt_target_wait_ready() waits for it later */
  unsigned uid;                /* nonzero: run as this user (and its group of the same number),
                                  another user's process; needs root */
} dnt_target_opts;

typedef struct dnt_target {
  pid_t pid;              /* host pid of the .NET process itself (not of a wrapper) */
  pid_t ns_pid;           /* its pid inside its own PID namespace */
  pid_t wrapper_pid;      /* the unshare wrapper to reap, or 0 */
  char socket_path[4096]; /* its socket as reachable from here ("" when not waited for) */
  int stdout_fd;          /* read end of its stdout (after "ready"), or -1 */
} dnt_target;

/* Path of the built apphost: $DNT_BUILDDIR/tests/targets/sample/out/Sample. */
const char *dnt_target_exe(void);
/* NULL when the sample can be started, else why not. */
const char *dnt_target_unavailable(void);
/* 0, or -1 with a reason in err. Nothing is left running on failure. */
int dnt_target_start(dnt_target *t, const dnt_target_opts *o, char *err, size_t errlen);
/* After no_wait: waits for the "ready" line (at most max(timeout_ms, DNT_HANG_MS), less when the
 * target exits). 0, or -1 with a reason in err. */
int dnt_target_wait_ready(dnt_target *t, int timeout_ms, char *err, size_t errlen);
/* The OS thread id of pid's thread named name (its /proc/PID/task/TID/comm), or 0. */
unsigned long dnt_target_thread_named(pid_t pid, const char *name);
/* A "Field: N kB" line of /proc/PID/status (pid 0: this process's own), e.g. "VmRSS" or
 * "RssFile": its kB, or -1 when it cannot be read. */
long dnt_proc_status_kb(pid_t pid, const char *field);
/* Reads what is there to read on fd (the target's stdout) without waiting, and calls fn with each
 * whole line (NUL-terminated, its newline dropped; borrowed for the call); the start of a line not
 * yet ended is kept in carry (cap bytes, NUL-terminated, "" at first) for the next call. */
void dnt_target_read_lines(int fd, char *carry, size_t cap, void (*fn)(void *ud, const char *line), void *ud);
/* CPU time (user + system, seconds) the kernel charged to thread tid of pid (tid 0: the whole
 * process), from /proc; -1 when it cannot be read. What a test expects of a thread's share of
 * the CPU comes from this, measured in the same run, not from what the thread was asked to do. */
double dnt_cpu_seconds(pid_t pid, pid_t tid);
/* The run's context for an assertion's message: the load average, and pid's CPU time when pid is
 * not 0 ("load 3.10 2.05 1.20, 2 CPUs; pid 123 used 4.56 s CPU"). A static buffer, overwritten by
 * the next call. */
const char *dnt_run_context(pid_t pid);
/* SIGTERM, a bounded wait, then SIGKILL; reaps everything. Returns the exit status or -1. */
int dnt_target_stop(dnt_target *t);
/* Waits up to timeout_ms for the target to exit on its own; returns its exit code, or -1. */
int dnt_target_wait(dnt_target *t, int timeout_ms);

#endif
