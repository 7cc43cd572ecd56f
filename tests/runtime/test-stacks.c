/* `dntrace stacks` on the real sample: every thread's managed stack now, named as the sample
 * named its threads and methods (the expectations are the sample's own source: cpu-work runs
 * CpuWork.CountPrimes, blocking-work sleeps in BlockingWork.WaitLoop, idle-N wait in
 * IdleWork.Park), in text and JSON, repeated, and for 500 threads; and against a fake runtime whose
 * sampler runs late. How long a snapshot of 500 threads takes is a figure for `make bench`, not a
 * gate. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/fake-ipc.h"
#include "../lib/ntr-writer.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

static void start(dnt_target *t, const char *const *args) {
  DNT_REQUIRE_TARGET();
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
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
  cr_expect_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "the JSON snapshot: %s", r.err);
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

/* 500 threads of one process: every one listed, every one parked where the sample parks it. The
 * time it takes is printed (a figure for `make bench`: the machine is shared with the other
 * tests). */
Test(stacks, five_hundred_threads_every_one_listed, .timeout = 120) {
  dnt_target t;
  static const char *const args[] = {"--threads", "500", NULL};
  start(&t, args);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "stacks", "-p", pid, NULL), 0, "%s", r.err);
  int idle = 0;
  for (const char *p = r.out; (p = strstr(p, " idle-")); p++) idle++;
  int parked = 0;
  for (const char *p = r.out; (p = strstr(p, "Sample!Sample.IdleWork.Park\n")); p++) parked++;
  cr_expect_eq(idle, 500, "every idle thread listed (%d of 500; %s)", idle, dnt_run_context(t.pid));
  cr_expect_eq(parked, 500, "every idle thread in IdleWork.Park (%d of 500; %s)", parked, dnt_run_context(t.pid));
  cr_log_info("stacks of 500+ threads: %.2f s (%s)", r.seconds, dnt_run_context(t.pid));
  dnt_run_free(&r);
  dnt_target_stop(&t);
}

/* A stopped process (SIGSTOP) cannot answer: stacks says so (and how to go on) instead of waiting
 * for a session reply that cannot come (issue 29 item 8). Then, continued, it is read as ever. */
Test(stacks, a_stopped_target_is_one_clear_error, .timeout = 180) {
  dnt_target t;
  start(&t, NULL);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  kill(t.pid, SIGSTOP);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "stacks", "-p", pid, NULL);
  kill(t.pid, SIGCONT);
  cr_expect_eq(rc, 1, "exit 1 (got %d): %s%s", rc, r.out, r.err);
  cr_expect(strstr(r.err, "is stopped (SIGSTOP") && strstr(r.err, "kill -CONT"), "names the stop:\n%s", r.err);
  cr_expect_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  cr_log_info("stacks gave up on a stopped process after %.1f s", r.seconds);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "stacks", "-p", pid, NULL), 0, "once continued: %s", r.err);
  cr_assert(strstr(r.out, "Thread (0x"), "%s", r.out);
  dnt_run_free(&r);
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

/* ---- a sampler that runs late ----
 * A fake runtime (tests/lib/fake-ipc.c, forked, our user) whose session's first samples come
 * 500 ms after the session started, long past the snapshot's 10 ms window, as a runtime's sampler
 * does on a machine too busy to run it. A runtime whose session was stopped samples no more: a
 * stop that comes before the samples cuts the stream (the hook), so the snapshot succeeds only if
 * stacks waited for them. Written by construction (tests/lib/ntr-writer.h): threads 4001 and
 * 4002, stacks A = 0x9000 -> 0x1100 and B = 0x9000 -> 0x2200 (root first, no rundown: frames are
 * named by address). */

static const char late_case[] =
    "on 04 08\n" /* ProcessInfo3 */
    "reply header ff 00\n"
    "payload u32 1 u64 pid hex 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10\n"
    "payload utf16 \"/usr/bin/late\" utf16 \"Linux\" utf16 \"x64\" utf16 \"late\" utf16 \"8.0.0\" utf16 \"linux-x64\"\n"
    "on 02 01 payload u64 42\n" /* StopTracing of session 42 */
    "call stop\n"
    "reply header ff 00\n"
    "payload u64 42\n"
    "signal stopped\n"
    "on 02 * payload ...\n" /* CollectTracing */
    "reply header ff 00\n"
    "payload u64 42\n"
    "stream file head.bin\n" /* the header and the sampler's metadata */
    "pause 500\n"            /* the sampler runs late */
    "call sampler\n"
    "stream file samples.bin\n"
    "wait stopped\n"
    "stream file end.bin\n"
    "close\n"
    "on * *\n" /* anything else: UNKNOWN_COMMAND */
    "reply header ff ff\n"
    "payload u32 0x80131385\n";

/* In the fake: its connections are threads of one process, which share this. */
static int late_stopped;

static uint32_t late_hook(const char *name, const uint8_t *request, size_t len, void *ud) {
  (void)request, (void)len, (void)ud;
  if (strcmp(name, "stop") == 0) {
    __atomic_store_n(&late_stopped, 1, __ATOMIC_SEQ_CST);
    return 0;
  }
  /* "sampler": stopped already, a runtime would send no sample; E_FAIL cuts the stream */
  return __atomic_load_n(&late_stopped, __ATOMIC_SEQ_CST) ? 0x80004005u : 0;
}

static void write_part(const char *dir, const char *name, const uint8_t *p, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *fp = fopen(path, "wb");
  cr_assert(fp, "%s", path);
  cr_assert_eq(fwrite(p, 1, n, fp), n);
  fclose(fp);
}

/* The stream in three files: head.bin, samples.bin, end.bin. */
static void write_late_stream(const char *dir) {
  ntrw w;
  ntrw_trace tr = {.sync_qpc = 1000, .freq = 1000000, .pointer_size = 8, .pid = 1, .cpus = 2, .sampling_ns = 1000000};
  ntrw_md md = {.id = 1, .provider = "Microsoft-DotNETCore-SampleProfiler", .event_id = 0, .name = "", .opcode = -1,
                .no_fields = 1};
  static const uint64_t a[] = {0x1100, 0x9000}, b[] = {0x2200, 0x9000}; /* leaf first, as a stack block has it */
  const uint64_t *const frames[] = {a, b};
  const uint32_t nframes[] = {2, 2};
  const uint32_t managed = 2;
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &tr);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &md);
  ntrw_block_end(&w);
  size_t head = w.len;
  ntrw_stacks(&w, 1, 2, frames, nframes);
  ntrw_ev_begin(&w, 1);
  ntrw_ev e1 = {.metadata_id = 1, .seq = 1, .thread = 4001, .capture_thread = 4001, .stack_id = 1, .ts = 2000,
                .payload = (const uint8_t *)&managed, .payload_size = 4};
  ntrw_ev e2 = {.metadata_id = 1, .seq = 1, .thread = 4002, .capture_thread = 4002, .stack_id = 2, .ts = 2000,
                .payload = (const uint8_t *)&managed, .payload_size = 4};
  ntrw_event(&w, &e1);
  ntrw_event(&w, &e2);
  ntrw_block_end(&w);
  size_t samples = w.len;
  ntrw_end(&w);
  write_part(dir, "head.bin", w.buf, head);
  write_part(dir, "samples.bin", w.buf + head, samples - head);
  write_part(dir, "end.bin", w.buf + samples, w.len - samples);
  ntrw_release(&w);
}

Test(stacks, waits_for_a_sampler_that_runs_late, .timeout = 60) {
  char dir[] = "/tmp/dnt-late-XXXXXX", path[64], pid[16], err[1024];
  cr_assert(mkdtemp(dir));
  write_late_stream(dir);
  snprintf(path, sizeof path, "%s/late.case", dir);
  FILE *fp = fopen(path, "w");
  cr_assert(fp);
  fputs(late_case, fp);
  fclose(fp);
  fake_ipc_opts o = {.runtime = 1, .hook = late_hook}; /* our /tmp, our user: no root needed */
  fake_ipc *f;
  cr_assert_eq(fake_ipc_start(&f, path, &o, err, sizeof err), 0, "%s", err);
  snprintf(pid, sizeof pid, "%d", (int)fake_ipc_pid(f));
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "stacks", "-p", pid, NULL);
  int verdict = fake_ipc_stop(f, err, sizeof err);
  fake_ipc_free(f);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  (void)!system(cmd);
  cr_assert_eq(rc, 0, "stacks waits past its window for the first samples (exit %d):\n%s%s", rc, r.out, r.err);
  cr_assert_eq(verdict, 0, "the fake runtime: %s", err);
  cr_assert(strstr(r.out, ": 2 managed threads\n"), "%s", r.out);
  cr_assert(strstr(r.out, "\nThread (0xFA1) 4001:\n  ?!0x1100\n  ?!0x9000\n\n"), "thread 4001, leaf first:\n%s", r.out);
  cr_assert(strstr(r.out, "\nThread (0xFA2) 4002:\n  ?!0x2200\n  ?!0x9000\n\n"), "thread 4002, leaf first:\n%s", r.out);
  dnt_run_free(&r);
}
