/* test-ring.c: collect --ring, the flight recorder (issue 26). The sample runs (its cpu-work
 * thread in CountPrimes all along); a 3 s ring records it; once the sample has counted 5 s of its
 * own (20 of its 'heap-growth' lines, one every 250 ms), SIGUSR1 saves the ring and the recording
 * goes on; Ctrl+C saves the second window and stops. The first file's events begin well after the
 * session did (its start cut to the window), every event with no gap in its thread's numbers, its
 * stacks named (the rundown closes it): report names CountPrimes; TraceEvent reads as many
 * events as dntrace. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/background-cr.h"
#include "../lib/env-cr.h"
#include "../lib/files-cr.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

struct growth {
  int lines;
};

static void on_line(void *ud, const char *line) {
  if (strncmp(line, "heap-growth ", 12) == 0) ((struct growth *)ud)->lines++;
}

static int enough(void *ud) { return ((struct growth *)ud)->lines >= 20; }

/* The files of dir ending in .nettrace, sorted: how many; the first two in a, b. */
static int windows(const char *dir, char *a, char *b, size_t cap) {
  char cmd[4400];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep '\\.nettrace$' | sort", dir);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '\0';
    if (n == 0) snprintf(a, cap, "%s/%s", dir, line);
    if (n == 1) snprintf(b, cap, "%s/%s", dir, line);
    n++;
  }
  pclose(p);
  return n;
}

Test(ring, saves_the_last_seconds_and_goes_on, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  char *dir = dnt_temp_dir("dnt-ring"), pid[32], first[4400], second[4400];
  const char *const args[] = {"--heap", "10:10:100", "--no-blocking", "--no-alloc", "--no-exceptions", NULL};
  dnt_target t;
  dnt_start_sample(&t, args, pid, sizeof pid);
  struct bg b;
  const char *const cargs[] = {"collect", "-p", pid, "--ring", "3s", "-o", dir, NULL};
  bg_start(&b, cargs);
  int up = bg_wait_text(&b, "into a ring of the last 3 s");
  char *err = slurp(b.err);
  cr_assert(up, "collect --ring did not start (status %d): %s", b.status, err);
  free(err);
  /* 5 s of the sample's own time, from now: more than the ring keeps */
  struct lines sl = {.fd = t.stdout_fd};
  struct growth g = {0};
  lines_read(&sl, on_line, &g);
  g.lines = 0;
  cr_assert(lines_until(&sl, on_line, &g, enough), "the sample stopped printing");
  kill(b.pid, SIGUSR1);
  int saved = bg_wait_text(&b, "Recording again into the ring");
  int status = bg_finish(&b, SIGINT);
  char *e = slurp(b.err);
  bg_remove(&b);
  dnt_target_stop(&t);
  cr_assert(saved, "no save on SIGUSR1: %s", e);
  cr_assert_eq(status, 0, "%s", e);
  cr_expect(strstr(e, "its start cut to the window)"), "the first window is the ring's, not the session's: %s", e);
  cr_assert_eq(windows(dir, first, second, sizeof first), 2, "two windows saved: %s", e);
  free(e);
  /* the first window: its events begin seconds after the session's start, none lost */
  double first_at = -1;
  long events = trace_info_events(first, NULL, &first_at);
  cr_expect_geq(first_at, 1.0, "the session ran 5 s, the ring kept 3: the first event at +%.3f s", first_at); /* timing: the trace's own clock */
  struct dnt_run r;
  /* its stacks named (the rundown closed it): the hot method is there */
  cr_assert_eq(dnt_run_dntrace(&r, "report", first, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "Sample.CpuWork.CountPrimes"), "%s", r.out);
  cr_expect_eq(strstr(r.err, "misses"), NULL, "%s", r.err);
  dnt_run_free(&r);
  cr_expect_gt(trace_info_events(second, NULL, NULL), 0, "the second window reads too");
  /* TraceEvent reads the same events */
  long te = te_event_count(te_oracle_or_skip("the flight recorder's files"), first);
  cr_expect_eq(te, events, "TraceEvent %ld, dntrace %ld", te, events);
  dnt_rm_rf(dir);
  free(dir);
}

/* Bad input: --ring-size without --ring; --ring with a conversion. One line, exit 2. */
Test(ring, what_does_not_go_with_it) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--ring-size", "10", NULL), 2);
  cr_expect(strstr(r.err, "--ring-size goes with --ring"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--ring", "10s", "--format", "speedscope", NULL), 2);
  cr_expect(strstr(r.err, "--ring keeps a stream to save later: not with --format"), "%s", r.err);
  dnt_run_free(&r);
}
