/* Runs the dntrace binary (or any program) as a child and captures what it prints. */
#ifndef DNT_TEST_RUN_H
#define DNT_TEST_RUN_H

#include <stddef.h>

/* The ceiling of every wait in the tests (issue 23): a test waits for the thing itself (a line
 * printed, a socket present, an exit), and only a hang reaches this. The helpers raise any
 * shorter ceiling they are given to it, so no test's verdict depends on how busy the machine is.
 * tests/timing-rules.sh checks the tests for clocks read outside these helpers. */
#define DNT_HANG_MS 120000
static inline int dnt_ceiling_ms(int asked) { return asked > DNT_HANG_MS ? asked : DNT_HANG_MS; }

struct dnt_run {
  int status;      /* exit code, or 128+signal; -1 if it could not run or timed out */
  double seconds;  /* wall time */
  long maxrss_kb;  /* the child's peak resident set (wait4's ru_maxrss), KiB */
  char *out;       /* stdout, NUL-terminated; owned by the struct, freed by dnt_run_free */
  char *err;       /* stderr, likewise */
};

/* Runs argv (argv[0] is a path) with an optional extra environment (NULL-terminated
 * "NAME=value" list, may be NULL), killing it after timeout_ms (at least DNT_HANG_MS: a hang).
 * Returns r->status. r->seconds is a figure to print, never to compare with a bound. */
int dnt_run_argv(struct dnt_run *r, char *const argv[], const char *const *env, int timeout_ms);

/* Runs $DNT_BIN with the given arguments (NULL-terminated), killed after DNT_HANG_MS. */
int dnt_run_dntrace(struct dnt_run *r, ...);

void dnt_run_free(struct dnt_run *r);

/* Starts `sleep 600` as uid and gid `uid` (the caller must be root), in a mount namespace of its
 * own when new_mount_ns, and returns its pid once it runs sleep: only then is /proc/PID that
 * user's (between setuid and exec it is root's, the process not dumpable). -1 if it failed. The
 * caller kills and reaps it. */
int dnt_spawn_sleeper_as(unsigned uid, int new_mount_ns);

/* Path of the dntrace binary under test ($DNT_BIN, else ./dntrace). */
const char *dnt_bin(void);

#endif
