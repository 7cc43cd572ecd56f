/* `dntrace stacks` on the real sample: every thread's managed stack now, named as the sample
 * named its threads and methods (the expectations are the sample's own source: cpu-work runs
 * CpuWork.CountPrimes, blocking-work sleeps in BlockingWork.WaitLoop, idle-N wait in
 * IdleWork.Park), in text and JSON, repeated, and for 500 threads within a second. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

static void start(dnt_target *t, const char *const *args) {
  DNT_REQUIRE_TARGET();
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample: %s", err);
}

/* The frames printed under the thread named name ("Thread (0x..) TID NAME:"), up to the blank
 * line; NULL when the thread is not listed. Points into out. */
static const char *thread_block(const char *out, const char *name, size_t *len) {
  char head[128];
  snprintf(head, sizeof head, " %s:\n", name);
  for (const char *p = out; (p = strstr(p, head)); p++) {
    const char *bol = p;
    while (bol > out && bol[-1] != '\n') bol--;
    if (strncmp(bol, "Thread (0x", 10) != 0) continue;
    const char *body = p + strlen(head), *end = strstr(body, "\n\n");
    *len = end ? (size_t)(end - body) : strlen(body);
    return body;
  }
  return NULL;
}

Test(stacks, every_thread_of_the_sample_now, .timeout = 120) {
  dnt_target t;
  static const char *const args[] = {"--threads", "1", NULL};
  start(&t, args);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "stacks", "-p", pid, NULL), 0, "%s%s", r.out, r.err);
  size_t n;
  const char *cpu = thread_block(r.out, "cpu-work", &n);
  cr_assert(cpu, "a cpu-work thread:\n%s", r.out);
  cr_expect(memmem(cpu, n, "  Sample!Sample.CpuWork.CountPrimes\n", 36) || memmem(cpu, n, "Sample!Sample.CpuWork.Run\n", 26),
            "cpu-work computes:\n%.*s", (int)n, cpu);
  cr_expect(memmem(cpu, n, "System.Threading.Thread.StartCallback", 37), "down to the thread's start:\n%.*s", (int)n, cpu);
  const char *blocking = thread_block(r.out, "blocking-work", &n);
  cr_assert(blocking, "a blocking-work thread:\n%s", r.out);
  cr_expect(memmem(blocking, n, "Sample!Sample.BlockingWork.WaitLoop", 35), "blocking-work waits:\n%.*s", (int)n, blocking);
  /* a thread parked in a wait is in native code: dotnet-stack's marker on top, then its managed
   * caller (blocking-work may be spinning in managed code when sampled) */
  const char *idle = thread_block(r.out, "idle-1", &n);
  cr_assert(idle, "an idle-1 thread:\n%s", r.out);
  cr_expect(strncmp(idle, "  [Native Frames]\n", 18) == 0, "leaf first:\n%.*s", (int)n, idle);
  cr_expect(memmem(idle, n, "Sample!Sample.IdleWork.Park\n", 28), "idle-1 parks:\n%.*s", (int)n, idle);
  /* ids: the main thread's id is the pid */
  char main_head[64];
  snprintf(main_head, sizeof main_head, "Thread (0x%X) %d ", (unsigned)t.pid, (int)t.pid);
  cr_expect(strstr(r.out, main_head), "the main thread %s:\n%s", main_head, r.out);
  unsigned long cpu_tid = dnt_target_thread_named(t.pid, "cpu-work");
  char cpu_head[64];
  snprintf(cpu_head, sizeof cpu_head, "Thread (0x%lX) %lu cpu-work:\n", cpu_tid, cpu_tid);
  cr_expect(strstr(r.out, cpu_head), "cpu-work is thread %lu (/proc):\n%s", cpu_tid, r.out);
  dnt_run_free(&r);

  /* JSON, checked by python's parser against the same facts */
  char dir[] = "/tmp/dnt-stacks-XXXXXX", path[64], cmd[256];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/s.json", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "stacks", "-p", pid, "--format", "json", NULL), 0, "%s", r.err);
  FILE *fp = fopen(path, "w");
  fputs(r.out, fp);
  fclose(fp);
  dnt_run_free(&r);
  static const char check[] =
      "import json, sys\n"
      "lines = open(sys.argv[1]).read().splitlines()\n"
      "assert len(lines) == 1, lines\n"
      "d = json.loads(lines[0])\n"
      "assert d['pid'] == int(sys.argv[2]), d\n"
      "t = {x['name']: x for x in d['threads']}\n"
      "b = t['blocking-work']['frames']\n"
      "assert any(f.endswith('BlockingWork.WaitLoop') for f in b), b\n"
      "c = t['cpu-work']['frames']\n"
      "assert c[-1].endswith('Thread.StartCallback'), c\n"
      "assert any('CpuWork' in f for f in c), c\n";
  char py[64];
  snprintf(py, sizeof py, "%s/check.py", dir);
  fp = fopen(py, "w");
  fputs(check, fp);
  fclose(fp);
  char *argv[] = {"/usr/bin/env", "python3", py, path, pid, NULL};
  cr_expect_eq(dnt_run_argv(&r, argv, NULL, 30000), 0, "the JSON snapshot: %s", r.err);
  dnt_run_free(&r);

  /* dotnet-stack's spelling */
  cr_assert_eq(dnt_run_dntrace(&r, "stacks", "report", "-p", pid, NULL), 0, "%s", r.err);
  cr_expect(thread_block(r.out, "cpu-work", &n), "stacks report lists cpu-work:\n%s", r.out);
  dnt_run_free(&r);

  /* --repeat: as many snapshots, each headed */
  cr_assert_eq(dnt_run_dntrace(&r, "stacks", "-p", pid, "--repeat", "3", "--interval", "100ms", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "# snapshot 1 of 3\n") && strstr(r.out, "# snapshot 3 of 3\n"), "%s", r.out);
  dnt_run_free(&r);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  (void)!system(cmd);
  dnt_target_stop(&t);
}

/* 500 threads of one process within a second; best of three runs, the machine being shared
 * with the other tests */
Test(stacks, five_hundred_threads_within_a_second, .timeout = 120) {
  dnt_target t;
  static const char *const args[] = {"--threads", "500", NULL};
  start(&t, args);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  double best = 1e9;
  for (int i = 0; i < 3; i++) {
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, "stacks", "-p", pid, NULL), 0, "%s", r.err);
    if (r.seconds < best) best = r.seconds;
    int idle = 0;
    for (const char *p = r.out; (p = strstr(p, " idle-")); p++) idle++;
    int parked = 0;
    for (const char *p = r.out; (p = strstr(p, "Sample!Sample.IdleWork.Park\n")); p++) parked++;
    cr_expect_eq(idle, 500, "every idle thread listed (%d)", idle);
    cr_expect_eq(parked, 500, "every idle thread in IdleWork.Park (%d)", parked);
    dnt_run_free(&r);
  }
  cr_expect_leq(best, 1.0, "stacks of 500+ threads took %.2f s at best", best);
  cr_log_info("stacks of 511 threads: %.2f s (best of 3)", best);
  dnt_target_stop(&t);
}

Test(stacks, errors) {
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "stacks", NULL), 2, "no target: %s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "stacks", "-p", "999999999", NULL), 3, "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "stacks", "-p", "1", "--format", "csv", NULL), 2, "%s", r.err);
  cr_expect(strstr(r.err, "--format"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "stacks", "-p", "1", "--repeat", "0", NULL), 2, "%s", r.err);
  dnt_run_free(&r);
  /* a process that is no .NET one */
  char self[16];
  snprintf(self, sizeof self, "%d", (int)getpid());
  cr_expect_eq(dnt_run_dntrace(&r, "stacks", "-p", self, NULL), 3, "%s", r.err);
  cr_expect(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "one line: %s", r.err);
  cr_expect_eq(r.out[0], '\0', "nothing on stdout: %s", r.out);
  dnt_run_free(&r);
}
