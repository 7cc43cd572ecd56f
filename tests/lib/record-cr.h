/* Criterion glue: the sample recorded until its trace holds what a test needs (issue 23): a
 * starved sample makes the recording longer, never the verdict different. */
#ifndef DNT_TEST_RECORD_CR_H
#define DNT_TEST_RECORD_CR_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nt-scan.h"
#include "run.h"
#include "target.h"

/* Waits until the sample's thread `name` has run cpu_s seconds of CPU (the kernel's count, from
 * /proc): then it is in its loop (cpu-work: in CountPrimes, jitted), however busy the machine is.
 * Returns its tid; the test fails only when a hang keeps it from running (DNT_HANG_MS). */
static inline pid_t dnt_wait_thread_ran(pid_t pid, const char *name, double cpu_s) {
  pid_t tid = 0;
  double used = -1;
  for (int i = 0; i < DNT_HANG_MS / 10; i++) {
    if (!tid) tid = (pid_t)dnt_target_thread_named(pid, name);
    if (tid && (used = dnt_cpu_seconds(pid, tid)) >= cpu_s) return tid;
    usleep(10000);
  }
  cr_assert_fail("thread %s (tid %d) ran %.3f s of CPU, not %.3f s, within the hang ceiling: %s", name, (int)tid,
                 used, cpu_s, dnt_run_context(pid));
  return 0;
}

/* `dntrace collect -p PID -o TRACE [EXTRA...]` for 2 s, then again for twice as long while the
 * trace holds fewer than min events of provider (event_id, or any when < 0) on thread tid (any
 * when 0), as the independent reader counts them (into s): a starved sample makes the recording
 * longer, never the verdict different, and the verdict is taken on the one trace that has them.
 * Only a hang reaches 126 s of recording. */
static inline void dnt_collect_until(pid_t pid, const char *trace, const char *const *extra, const char *provider,
                                     long event_id, pid_t tid, uint64_t min, struct nt_scan *s) {
  char pids[16];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  uint64_t got = 0;
  for (int secs = 2; secs <= 64; secs *= 2) {
    char dur[16];
    snprintf(dur, sizeof dur, "%ds", secs);
    const char *argv[24] = {dnt_bin(), "collect", "-p", pids, "-o", trace, "--duration", dur};
    size_t n = 8;
    for (const char *const *e = extra; e && *e && n + 1 < sizeof argv / sizeof argv[0]; e++) argv[n++] = *e;
    argv[n] = NULL;
    struct dnt_run r;
    int rc = dnt_run_argv(&r, (char *const *)argv, NULL, secs * 1000 + DNT_HANG_MS);
    cr_assert_eq(rc, 0, "collect: %s%s", r.out, r.err);
    dnt_run_free(&r);
    memset(s, 0, sizeof *s);
    cr_assert_eq(nt_scan_file(trace, s), 0);
    got = nt_scan_count(s, provider, event_id, (uint64_t)tid);
    if (got >= min) return;
    cr_log_info("%s: %llu %s events on thread %d, fewer than %llu: recording again, for longer (%s)", dur,
                (unsigned long long)got, provider, (int)tid, (unsigned long long)min, dnt_run_context(pid));
  }
  cr_assert_fail("126 s of recording hold %llu %s events on thread %d, fewer than %llu: %s", (unsigned long long)got,
                 provider, (int)tid, (unsigned long long)min, dnt_run_context(pid));
}

#endif
