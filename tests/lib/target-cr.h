/* Criterion glue for tests that need the sample .NET target. */
#ifndef DNT_TEST_TARGET_CR_H
#define DNT_TEST_TARGET_CR_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"
#include "target.h"

/* Skips (with the reason) when no target can be started; under CI=true that is a failure, so a
 * CI run can never pass by skipping the runtime tests. */
#define DNT_REQUIRE_TARGET()                                                                       \
  do {                                                                                             \
    const char *why_ = dnt_target_unavailable();                                                   \
    if (why_) {                                                                                    \
      const char *ci_ = getenv("CI");                                                              \
      if (ci_ && strcmp(ci_, "true") == 0)                                                         \
        cr_assert_fail("needs a .NET runtime: %s (CI=true: a missing runtime is a failure)", why_);      \
      cr_skip_test("needs a .NET runtime: %s", why_);                                              \
    }                                                                                              \
  } while (0)

/* Skips (with the reason) when perf cannot record here; under CI=true a failure, as above. */
#define DNT_REQUIRE_PERF()                                                                         \
  do {                                                                                             \
    DNT_REQUIRE_TARGET();                                                                          \
    const char *ci_ = getenv("CI");                                                                \
    int in_ci_ = ci_ && strcmp(ci_, "true") == 0;                                                  \
    if (system("perf --version >/dev/null 2>&1") != 0) {                                           \
      if (in_ci_) cr_assert_fail("perf is not installed (CI=true: ./bootstrap.sh installs linux-perf)"); \
      cr_skip_test("SKIP: perf is not installed (apt-get install linux-perf)");                    \
    }                                                                                              \
    if (system("perf record -e cpu-clock -o /dev/null -- true >/dev/null 2>&1") != 0) {           \
      if (in_ci_) cr_assert_fail("perf cannot record here (CI=true)");                             \
      cr_skip_test("SKIP: perf cannot record here (perf_event_paranoid, no permission)");          \
    }                                                                                              \
  } while (0)

/* Starts the sample plainly with args (extra arguments, NULL-terminated), waits for its
 * diagnostic socket, and writes its pid as text into pid (cap bytes); the test fails when it
 * cannot start. */
static inline void dnt_start_sample(dnt_target *t, const char *const *args, char *pid, size_t cap) {
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "%s", err);
  snprintf(pid, cap, "%d", (int)t->pid);
}

/* dntrace listening at sock (--diagnostic-port SOCK,listen): its socket, waited for up to
 * wait_ms, stat'ed into st; then the sample started to dial it (DOTNET_DiagnosticPorts) and
 * resumed by dntrace within ready_ms. The test fails when any step does not happen. */
static inline void dnt_start_sample_dialing(dnt_target *t, const char *sock, int wait_ms, int ready_ms,
                                            struct stat *st) {
  int found = 0;
  wait_ms = dnt_ceiling_ms(wait_ms);
  for (int i = 0; i < wait_ms / 10 && !(found = stat(sock, st) == 0); i++) usleep(10000);
  cr_assert(found && S_ISSOCK(st->st_mode), "dntrace listens on %s", sock);
  char env[300];
  snprintf(env, sizeof env, "DOTNET_DiagnosticPorts=%s", sock);
  const char *const envs[] = {env, NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .env = envs, .no_wait = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "%s", err);
  cr_assert_eq(dnt_target_wait_ready(t, ready_ms, err, sizeof err), 0, "dntrace resumed the runtime: %s", err);
}

/* A 3 s trace of the sample (started plainly, stopped once recorded) by `dntrace collect -p PID
 * -o DIR/t.nettrace`, DIR a new folder made from the mkdtemp template dir; the trace's path into
 * trace (cap bytes). The caller removes both. */
static inline void dnt_collect_sample_trace(char *dir, char *trace, size_t cap) {
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000};
  char err[512], pid[16];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  cr_assert(mkdtemp(dir));
  snprintf(trace, cap, "%s/t.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", trace, "--duration", "3s", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
}

#endif
