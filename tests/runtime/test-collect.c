/* dntrace collect against the real sample target: a default session, --duration, Ctrl+C with
 * rundown, the target killed mid-session, and output that must not be written. The files are
 * checked with an independent structural reader (tests/lib/nt-scan.c). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/env-cr.h"
#include "../lib/nt-scan.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"
#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

static void start(dnt_target *t) {
  DNT_REQUIRE_TARGET();
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
}

static unsigned long thread_named(pid_t pid, const char *name) {
  unsigned long tid = dnt_target_thread_named(pid, name);
  cr_assert(tid, "the target has a thread named %s", name);
  return tid;
}

static char *temp_dir(void) {
  char *d = strdup("/tmp/dnt-collect-XXXXXX");
  cr_assert(mkdtemp(d));
  return d;
}

static double now(void) {
  struct timespec ts;
  /* timing: waits under DNT_HANG_MS, and one lower bound (--duration did not stop early) */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts dntrace with stdout/stderr to files; returns its pid. */
static pid_t spawn_dntrace(char *const argv[], const char *log) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

static char *slurp(const char *path);

/* Waits until the log says the session has started (a loaded machine's runtime may take seconds
 * to answer; only a hang reaches DNT_HANG_MS). */
static void wait_started(const char *log) {
  double deadline = now() + DNT_HANG_MS / 1000.0;
  for (;;) {
    char *text = access(log, R_OK) == 0 ? slurp(log) : NULL; /* the child may not have made it yet */
    int started = text && strstr(text, "Tracing started");
    free(text);
    if (started) break;
    cr_assert_lt(now(), deadline, "collect did not start tracing in %d s (%s)", DNT_HANG_MS / 1000,
                 dnt_run_context(0));
    usleep(50 * 1000);
  }
}

/* Its exit code (128 + signal), or -1 when it did not exit within DNT_HANG_MS (then killed). */
static int wait_exit(pid_t pid) {
  double deadline = now() + DNT_HANG_MS / 1000.0;
  int st;
  while (now() < deadline) {
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    usleep(20000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

/* The trace collect is writing into dir (a new name: the output itself, NAME; one that existed:
 * the hidden temporary beside it, .NAME.dntrace-X; name a part of NAME), scanned as far as it goes:
 * 1, or 0 when there is none (yet, or any more). */
static int scan_so_far(const char *dir, const char *name, struct nt_scan *s) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[512] = "", tmp[512] = "";
  while (d && (e = readdir(d))) {
    if (!strstr(e->d_name, name)) continue;
    if (e->d_name[0] == '.' && strstr(e->d_name, ".dntrace-"))
      snprintf(tmp, sizeof tmp, "%s/%s", dir, e->d_name);
    else if (e->d_name[0] != '.' && !strstr(e->d_name, ".partial"))
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
  }
  if (tmp[0]) snprintf(path, sizeof path, "%s", tmp); /* an old file is being replaced: the new one */
  if (d) closedir(d);
  memset(s, 0, sizeof *s);
  return path[0] && nt_scan_file(path, s) == 0;
}

/* Waits (every 100 ms, up to DNT_HANG_MS: only a hang) until the trace being written holds what
 * enough() wants; the test fails, saying what, if it never does. */
static void wait_for_trace(const char *dir, const char *name, int (*enough)(const struct nt_scan *s, void *ud),
                           void *ud, const char *what) {
  static struct nt_scan s;
  double deadline = now() + DNT_HANG_MS / 1000.0;
  int have = 0;
  while (!(have = scan_so_far(dir, name, &s) && enough(&s, ud)) && now() < deadline) usleep(100 * 1000);
  cr_assert(have, "the trace being written never held %s (%d blocks, %llu events so far; %s)", what, s.blocks,
            (unsigned long long)s.events, dnt_run_context(0));
}

static int has_a_block(const struct nt_scan *s, void *ud) {
  (void)ud;
  return s->blocks > 0;
}

/* The whole file, NUL-terminated (heap). */
static char *slurp(const char *path) {
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "%s", path);
  size_t cap = 65536, len = 0, n;
  char *buf = malloc(cap);
  cr_assert(buf);
  while ((n = fread(buf + len, 1, cap - len - 1, fp)) > 0) {
    len += n;
    if (len + 1 == cap) cr_assert(buf = realloc(buf, cap *= 2));
  }
  buf[len] = '\0';
  fclose(fp);
  return buf;
}

/* The default session holds what its profiles ask for: samples of every managed thread, the
 * runtime's exception events (the sample throws every 2 s) and, once stopped, the method rundown.
 * Stopped (Ctrl+C) once the trace being written holds a sample of cpu-work and an exception event:
 * what the machine's load delays, the test waits for. (--duration's own stop is
 * duration_2s_stops_at_its_duration's.) */
struct default_wants {
  unsigned long cpu_tid;
};

static int has_cpu_sample_and_exception(const struct nt_scan *s, void *ud) {
  const struct default_wants *w = ud;
  return nt_scan_count(s, SAMPLER, 0, w->cpu_tid) > 0 && nt_scan_count(s, RUNTIME, 80, 0) > 0;
}

Test(collect, default_session_has_samples_of_cpu_work_and_rundown, .timeout = 180) {
  dnt_target t;
  start(&t);
  struct default_wants w = {thread_named(t.pid, "cpu-work")};
  unsigned long blocking_tid = thread_named(t.pid, "blocking-work");
  char *dir = temp_dir();
  char out[128], log[128], pid[16];
  snprintf(out, sizeof out, "%s/trace.nettrace", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char *argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", out, NULL};
  pid_t d = spawn_dntrace(argv, log);
  wait_started(log);
  wait_for_trace(dir, "trace.nettrace", has_cpu_sample_and_exception, &w,
                 "a sample of cpu-work and an exception event");
  kill(d, SIGINT);
  int rc = wait_exit(d);
  char *text = slurp(log);
  cr_assert_eq(rc, 0, "%s", text);
  cr_assert(strstr(text, "0x000000100003801D   Informational(4)   --profile"), "the default profiles are announced:\n%s", text);
  cr_assert(strstr(text, "Trace completed"), "%s", text);

  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.magic_ok, "begins with Nettrace");
  cr_assert(s.complete, "ends with the end-of-stream tag: %s", s.problem);
  cr_assert_eq(s.pointer_size, 8);
  /* the sampler samples every managed thread each time it runs, busy or waiting: cpu-work, which
   * never waits, as often as blocking-work, which mostly does (half: slack for the rounds at the
   * edges) */
  uint64_t cpu_samples = nt_scan_count(&s, SAMPLER, 0, w.cpu_tid);
  uint64_t blocking_samples = nt_scan_count(&s, SAMPLER, 0, blocking_tid);
  cr_assert(cpu_samples > 0 && 2 * cpu_samples >= blocking_samples,
            "SampleProfiler samples of cpu-work (tid %lu): %llu, of blocking-work (tid %lu): %llu (%s)", w.cpu_tid,
            (unsigned long long)cpu_samples, blocking_tid, (unsigned long long)blocking_samples,
            dnt_run_context(t.pid));
  cr_log_info("samples of cpu-work %llu, of blocking-work %llu", (unsigned long long)cpu_samples,
              (unsigned long long)blocking_samples);
  cr_assert_gt(nt_scan_count(&s, RUNDOWN, 144, 0), 0, "MethodDCEndVerbose rundown events");
  cr_assert_gt(nt_scan_count(&s, RUNTIME, 80, 0), 0, "exception events");
  free(text);
  dnt_target_stop(&t);
  unlink(out);
  unlink(log);
  rmdir(dir);
  free(dir);
}

Test(collect, ctrl_c_keeps_a_complete_stream_with_rundown, .timeout = 180) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], log[128], pid[16];
  snprintf(out, sizeof out, "%s/t.nettrace", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char *argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", out, NULL};
  pid_t d = spawn_dntrace(argv, log);
  wait_started(log);
  wait_for_trace(dir, "t.nettrace", has_a_block, NULL, "a block"); /* the session streams */
  kill(d, SIGINT);
  int rc = wait_exit(d);
  char *text = slurp(log);
  cr_assert_eq(rc, 0, "%s", text);
  cr_assert(strstr(text, "Stopping the trace"), "%s", text);
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.complete, "%s", s.problem);
  cr_assert_gt(nt_scan_count(&s, RUNDOWN, 144, 0), 0, "rundown after Ctrl+C");
  free(text);
  dnt_target_stop(&t);
  unlink(out);
  unlink(log);
  rmdir(dir);
  free(dir);
}

/* Killed once the trace being written holds a block: data arrived, so the exit is 0. */
Test(collect, target_killed_mid_session_keeps_a_valid_prefix, .timeout = 180) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], log[128], pid[16];
  snprintf(out, sizeof out, "%s/t.nettrace", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char *argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", out, NULL};
  pid_t d = spawn_dntrace(argv, log);
  wait_started(log);
  wait_for_trace(dir, "t.nettrace", has_a_block, NULL, "a block");
  /* a new name is written in place while it records (issue 28 item 9): the file under its own
   * name holds the block, and there is no hidden temporary beside it */
  static struct nt_scan live;
  cr_assert_eq(nt_scan_file(out, &live), 0, "%s exists while collect records", out);
  cr_assert_gt(live.blocks, 0, "%s holds what came so far", out);
  DIR *dd = opendir(dir);
  for (struct dirent *de; dd && (de = readdir(dd));)
    cr_assert(!strstr(de->d_name, ".dntrace-"), "no temporary: %s", de->d_name);
  if (dd) closedir(dd);
  kill(t.pid, SIGKILL);
  int rc = wait_exit(d);
  dnt_target_stop(&t);
  char *text = slurp(log);
  cr_assert_eq(rc, 0, "data arrived, so the exit is 0: %s", text);
  cr_assert(strstr(text, "ended the session early"), "%s", text);
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.magic_ok);
  cr_assert_not(s.complete);
  cr_assert(strstr(s.problem, "truncated at"), "a prefix of a valid stream, not garbage: %s", s.problem);
  cr_assert_gt(s.blocks, 0);
  free(text);
  unlink(out);
  unlink(log);
  rmdir(dir);
  free(dir);
}

Test(collect, output_is_never_written_through_a_symlink, .timeout = 60) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char victim[128], link[128], pid[16];
  snprintf(victim, sizeof victim, "%s/victim", dir);
  snprintf(link, sizeof link, "%s/t.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  FILE *fp = fopen(victim, "w");
  fputs("precious", fp);
  fclose(fp);
  cr_assert_eq(symlink(victim, link), 0);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", link, "--duration", "1s", NULL), 1, "%s", r.out);
  cr_assert(strstr(r.err, "cannot write"), "%s", r.err);
  char *text = slurp(victim);
  cr_assert_str_eq(text, "precious");
  free(text);
  dnt_run_free(&r);

  char bad[160];
  snprintf(bad, sizeof bad, "%s/no/such/dir/t.nettrace", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", bad, "--duration", "1s", NULL), 1, "%s", r.out);
  cr_assert(strstr(r.err, "No such file or directory"), "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(link);
  unlink(victim);
  rmdir(dir);
  free(dir);
}

/* The output policy of dntrace(1): .nettrace is added to a name without an extension, an
 * existing trace is overwritten and said so, and --no-clobber refuses it. */
Test(collect, output_names_and_overwriting, .timeout = 90) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char base[128], path[160], pid[16], want[200];
  snprintf(base, sizeof base, "%s/run", dir);
  snprintf(path, sizeof path, "%s.nettrace", base);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", base, "--duration", "1s", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(access(path, F_OK), 0, "-o %s writes %s", base, path);
  cr_expect_neq(access(base, F_OK), 0, "and not %s", base);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", path, "--duration", "1s", NULL), 0, "%s", r.err);
  snprintf(want, sizeof want, "overwriting '%s'\n", path);
  cr_expect(strstr(r.err, want), "says '%s':\n%s", want, r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", path, "--duration", "1s", "--no-clobber", NULL), 1);
  cr_expect(strstr(r.err, "exists (--no-clobber)") && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
            "one error line:\n%s", r.err);
  dnt_run_free(&r);
  unlink(path);
  /* -o DIR: the name collect chooses (dotnet-trace's NAME_yyyyMMdd_HHmmss.nettrace), inside it
   * (issue 28 item 22: it was refused as "not a regular file") */
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", dir, "--duration", "1s", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -qx 'Sample_[0-9]\\{8\\}_[0-9]\\{6\\}\\.nettrace'", dir);
  cr_expect_eq(system(cmd), 0, "a trace named as collect names it, inside %s", dir);
  snprintf(cmd, sizeof cmd, "rm -f '%s'/Sample_*.nettrace", dir);
  cr_assert_eq(system(cmd), 0);
  dnt_target_stop(&t);
  rmdir(dir);
}

/* A full disk: a 256 KiB tmpfs in a private mount namespace, filled up (.fill) before collect
 * starts, so that its first write fails whatever the machine's load. One clear error, exit 1, and
 * the cut file moved aside so it cannot pass for a trace; nothing else left (no temporary). The
 * duration is 600 s: a collect that did not stop at the error would be killed at DNT_HANG_MS
 * (run.h), its exit not 1. */
Test(collect, a_full_disk_is_one_clear_error, .timeout = 180) {
  dnt_target t;
  start(&t);
  if (geteuid() != 0) cr_skip_test("needs root to mount a small tmpfs");
  char *dir = temp_dir();
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "mount -t tmpfs -o size=256k tmpfs '%s' && { cat /dev/zero > '%s/.fill' 2>/dev/null; true; } && "
           "\"$DNT_BIN\" collect -p %d -o '%s/t.nettrace' --duration 600s; "
           "rc=$?; echo \"files: $(ls -A '%s' | grep -vx .fill | tr '\\n' ' ')\"; exit $rc",
           dir, dir, (int)t.pid, dir, dir);
  char *argv[] = {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", cmd, NULL};
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, NULL, DNT_HANG_MS);
  cr_assert_eq(rc, 1, "out: %s err: %s", r.out, r.err);
  cr_assert(strstr(r.err, "No space left on device"), "%s", r.err);
  cr_assert(strstr(r.out, "\nfiles: t.nettrace.partial \n"), "only the cut file, renamed: %s", r.out);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  rmdir(dir);
  free(dir);
}

/* `-- CMD` where CMD is no .NET program: it exits without its runtime ever dialling, which is
 * no usable target (exit 3), said as such; not "refused the session" (exit 1). */
Test(collect, a_command_that_is_not_dotnet_is_no_target) {
  char *dir = temp_dir();
  char out[256];
  snprintf(out, sizeof out, "%s/t.nettrace", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-o", out, "--", "/bin/true", NULL), 3, "%s", r.err);
  cr_assert_str_eq(r.err, "dntrace: error: 'true' exited (exit code 0) before its runtime connected: not a .NET "
                          "program, or its diagnostics are disabled\n");
  cr_assert_neq(access(out, F_OK), 0, "no trace file");
  dnt_run_free(&r);
  snprintf(out, sizeof out, "%s/c", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "counters", "collect", "-o", out, "--", "/bin/false", NULL), 3, "%s", r.err);
  cr_assert_str_eq(r.err, "dntrace: error: 'false' exited (exit code 1) before its runtime connected: not a .NET "
                          "program, or its diagnostics are disabled\n");
  dnt_run_free(&r);
  rmdir(dir);
  free(dir);
}

Test(collect, usage_errors) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--providers", "A::9", NULL), 2);
  cr_assert(strstr(r.err, "level '9'"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--duration", "soon", NULL), 2);
  cr_assert(strstr(r.err, "--duration"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--profile", "nope", NULL), 2);
  cr_assert(strstr(r.err, "unknown profile 'nope'"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--format", "pdf", NULL), 2);
  dnt_run_free(&r);
  /* --weight: a conversion's, one of two words */
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--weight", "samples", NULL), 2);
  cr_assert(strstr(r.err, "--weight goes with a conversion"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--format", "folded", "--weight", "ticks", NULL), 2);
  cr_assert_str_eq(r.err, "dntrace: error: --weight: 'ticks' is not time or samples\n");
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "--list-profiles", NULL), 0);
  cr_assert(strstr(r.out, "dotnet-sampled-thread-time") && strstr(r.out, "0x0000F00000000000"), "%s", r.out);
  dnt_run_free(&r);
}

/* `-- CMD`: the command starts suspended, the session begins before its first managed code, so
 * the JIT events for Main are in the trace; dntrace exits with the command's exit code. */
Test(collect, launch_mode_traces_from_startup, .timeout = 120) {
  DNT_REQUIRE_TARGET();
  char *dir = temp_dir();
  char out[128];
  snprintf(out, sizeof out, "%s/launch.nettrace", dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "collect", "-o", out, "--providers", "Microsoft-Windows-DotNETRuntime:0x10:5", "--",
                           dnt_target_exe(), "--seconds", "1", "--exit-code", "7", NULL);
  cr_assert_eq(rc, 7, "the command's exit code: %s%s", r.out, r.err);
  static struct nt_scan s;
  snprintf(s.needle, sizeof s.needle, "Main");
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.complete, "%s", s.problem);
  cr_assert_gt(nt_scan_needle_hits(&s, RUNTIME, 143), 0, "MethodLoadVerbose for Main");
  cr_assert_gt(nt_scan_needle_hits(&s, RUNTIME, 145), 0, "MethodJittingStarted for Main");
  dnt_run_free(&r);
  unlink(out);
  rmdir(dir);
  free(dir);
}

Test(collect, launch_mode_command_not_found) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-o", "/tmp/never.nettrace", "--", "/no/such/program", NULL), 1);
  cr_assert(strstr(r.err, "cannot start '/no/such/program'"), "%s", r.err);
  cr_assert_neq(access("/tmp/never.nettrace", F_OK), 0, "no empty trace left behind");
  dnt_run_free(&r);
}

/* --duration stops the trace, and not before its time: dntrace says the duration is reached no
 * sooner than 2 s after it was started (the session starts later still; the test may see the
 * words late, never early). From the start it announced to the stop, as the test saw them, is a
 * figure (printed), not a gate: a loaded machine delays what the test sees. */
Test(collect, duration_2s_stops_at_its_duration, .timeout = 180) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], log[128], pid[16];
  snprintf(out, sizeof out, "%s/d.nettrace", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char *argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", out, "--duration", "00:00:00:02", NULL};
  fclose(fopen(log, "w")); /* exists before the child opens it */
  double t0 = now(), started = -1, stopped = -1; /* when the test saw the words, from dntrace's start */
  pid_t d = spawn_dntrace(argv, log);
  while (stopped < 0 && now() - t0 < DNT_HANG_MS / 1000.0) {
    char *text = slurp(log);
    if (started < 0 && strstr(text, "Tracing started")) started = now() - t0;
    if (started >= 0 && strstr(text, "Duration reached")) stopped = now() - t0;
    free(text);
    usleep(10000);
  }
  cr_assert_eq(wait_exit(d), 0);
  cr_assert_geq(started, 0, "the start is announced");
  cr_assert_geq(stopped, 0, "the duration is reached and said so");
  cr_assert_geq(stopped, 2.0, "the duration was reached %.2f s after dntrace started, before its 2 s (%s)", stopped,
                dnt_run_context(t.pid));
  cr_log_info("--duration 2s: stopped %.2f s after the start it announced (as seen)", stopped - started);
  dnt_target_stop(&t);
  unlink(out);
  unlink(log);
  rmdir(dir);
  free(dir);
}

Test(collect, diagnostic_port_connect, .timeout = 60) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], port[4200];
  snprintf(out, sizeof out, "%s/p.nettrace", dir);
  snprintf(port, sizeof port, "%s,connect", t.socket_path);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "--diagnostic-port", port, "-o", out, "--duration", "1s",
                               "--profile", "gc-collect", NULL), 0, "%s", r.err);
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.complete, "%s", s.problem);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  rmdir(dir);
  free(dir);
}

/* The most elapsed time a status line on screen shows ("[00:00:MM:SS]"), in seconds; -1 if none. */
static int elapsed_shown(const char *screen) {
  int most = -1;
  for (const char *p = screen; (p = strstr(p, "[00:00:")); p++) {
    unsigned m, sec;
    char close;
    if (sscanf(p, "[00:00:%2u:%2u%c", &m, &sec, &close) == 3 && close == ']' && (int)(m * 60 + sec) > most)
      most = (int)(m * 60 + sec);
  }
  return most;
}

/* Captures the tmux pane of session into dir/screen until it shows what until() wants, or
 * DNT_HANG_MS passed (only a hang); the last screen (heap). */
static char *capture_until(const char *session, const char *dir, int (*until)(const char *screen)) {
  char capture[256], screen_path[160], *screen = NULL;
  snprintf(capture, sizeof capture, "tmux capture-pane -p -t %s > '%s/screen'", session, dir);
  snprintf(screen_path, sizeof screen_path, "%s/screen", dir);
  for (double deadline = now() + DNT_HANG_MS / 1000.0;;) {
    free(screen);
    cr_assert_eq(system(capture), 0);
    screen = slurp(screen_path);
    if (until(screen) || now() > deadline) return screen;
    usleep(100 * 1000);
  }
}

static int ticked(const char *screen) { return elapsed_shown(screen) >= 1; }
static int exited(const char *screen) { return strstr(screen, "EXITED") != NULL; }

/* Enter stops the trace; the status line stays on the screen once (not once at the Enter, once
 * at the stop message and once at the end). Enter is pressed once the status line has ticked. */
Test(collect, enter_stops_and_the_status_line_stays_once, .timeout = 180) {
  if (system("command -v tmux >/dev/null 2>&1") != 0) cr_skip_test("needs tmux (./bootstrap.sh installs it)");
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char cmd[4600], session[32], *screen;
  snprintf(session, sizeof session, "dnte%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "tmux new-session -d -s %s -x 120 -y 30 \"'%s' collect -p %d -o '%s/enter.nettrace'; echo EXITED $?; sleep 600\"",
           session, dnt_bin(), (int)t.pid, dir);
  cr_assert_eq(system(cmd), 0);
  screen = capture_until(session, dir, ticked); /* recording for a second or more */
  int shown = elapsed_shown(screen);
  if (shown >= 1) {
    snprintf(cmd, sizeof cmd, "tmux send-keys -t %s Enter", session);
    cr_assert_eq(system(cmd), 0);
    free(screen);
    screen = capture_until(session, dir, exited);
  }
  snprintf(cmd, sizeof cmd, "tmux kill-session -t %s", session);
  cr_assert_eq(system(cmd), 0);
  cr_assert_geq(shown, 1, "the status line ticked before Enter (%s):\n%s", dnt_run_context(t.pid), screen);
  int lines = 0;
  for (const char *p = screen; (p = strstr(p, "Recording trace")); p++) lines++;
  cr_expect(strstr(screen, "EXITED 0"), "collect stopped on Enter and succeeded:\n%s", screen);
  cr_expect(strstr(screen, "Stopping the trace (Enter)"), "%s", screen);
  cr_expect_eq(lines, 1, "the status line once:\n%s", screen);
  free(screen);
  dnt_target_stop(&t);
  char rm[256];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  cr_assert_eq(system(rm), 0);
  free(dir);
}

/* On a terminal the status line is rewritten in place (tmux is the terminal): once it has ticked
 * (shows a second or more), the screen holds it once; Enter then stops the trace. To a pipe there
 * is no status line at all. */
Test(collect, status_line_on_a_terminal_only, .timeout = 180) {
  if (system("command -v tmux >/dev/null 2>&1") != 0) cr_skip_test("needs tmux (./bootstrap.sh installs it)");
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char cmd[4600], session[32];
  snprintf(session, sizeof session, "dnt%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "tmux new-session -d -s %s -x 120 -y 30 \"'%s' collect -p %d -o '%s/tty.nettrace'; echo EXITED $?; sleep 600\"",
           session, dnt_bin(), (int)t.pid, dir);
  cr_assert_eq(system(cmd), 0);
  /* the status line ticks once a second: wait (under load, start-up can take a while) until it
   * has ticked, then look at the whole screen */
  char *screen = capture_until(session, dir, ticked);
  int lines = 0;
  for (const char *p = screen; (p = strstr(p, "Recording trace")); p++) lines++;
  int shown = elapsed_shown(screen);
  char *exit_screen = NULL;
  if (shown >= 1) { /* stop it as a user does */
    snprintf(cmd, sizeof cmd, "tmux send-keys -t %s Enter", session);
    cr_assert_eq(system(cmd), 0);
    exit_screen = capture_until(session, dir, exited);
  }
  snprintf(cmd, sizeof cmd, "tmux kill-session -t %s", session);
  cr_assert_eq(system(cmd), 0);
  cr_assert_geq(shown, 1, "elapsed time shown, a second or more (%s):\n%s", dnt_run_context(t.pid), screen);
  cr_assert_eq(lines, 1, "one status line, rewritten in place:\n%s", screen);
  cr_assert(strstr(screen, "Press <Enter> or <Ctrl+C> to exit"), "%s", screen);
  cr_assert(strstr(exit_screen, "EXITED 0"), "Enter stopped it:\n%s", exit_screen);
  free(exit_screen);
  free(screen);

  struct dnt_run r;
  char out[160], pid[16];
  snprintf(out, sizeof out, "%s/pipe.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--duration", "2s", NULL), 0);
  cr_assert_null(strstr(r.out, "Recording trace"), "no status line into a pipe:\n%s", r.out);
  cr_assert_null(strchr(r.out, '\r'), "no carriage returns into a pipe");
  dnt_run_free(&r);
  dnt_target_stop(&t);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
  free(dir);
}

/* --diagnostic-port PATH,listen: dntrace waits on PATH, a runtime started with
 * DOTNET_DiagnosticPorts=PATH dials it (suspended), the session runs, the runtime is resumed.
 * Stopped (Ctrl+C) once the trace being written holds a sample. */
static int has_a_sample(const struct nt_scan *s, void *ud) {
  (void)ud;
  return nt_scan_count(s, SAMPLER, 0, 0) > 0;
}

Test(collect, diagnostic_port_listen, .timeout = 180) {
  DNT_REQUIRE_TARGET();
  char *dir = temp_dir();
  char sock[128], spec[160], out[128], log[128];
  snprintf(sock, sizeof sock, "%s/port.sock", dir);
  snprintf(spec, sizeof spec, "%s,listen", sock);
  snprintf(out, sizeof out, "%s/l.nettrace", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  char *argv[] = {(char *)dnt_bin(), "collect", "--diagnostic-port", spec, "-o", out, NULL};
  pid_t d = spawn_dntrace(argv, log);
  struct stat st;
  dnt_target t;
  dnt_start_sample_dialing(&t, sock, DNT_HANG_MS, DNT_HANG_MS, &st);
  cr_assert_eq(st.st_mode & 0777, 0600);
  wait_started(log);
  wait_for_trace(dir, "l.nettrace", has_a_sample, NULL, "a SampleProfiler sample");
  kill(d, SIGINT);
  int rc = wait_exit(d);
  char *text = slurp(log);
  cr_assert_eq(rc, 0, "%s", text);
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.complete, "%s", s.problem);
  cr_assert_gt(nt_scan_count(&s, SAMPLER, 0, 0), 0);
  cr_assert_neq(stat(sock, &st), 0, "the socket is removed at the end");
  free(text);
  dnt_target_stop(&t);
  unlink(out);
  unlink(log);
  rmdir(dir);
  free(dir);
}

/* --format speedscope: the .nettrace as usual, and the conversion beside it once complete. */
Test(collect, format_speedscope_writes_both_files, .timeout = 90) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], ss[160], pid[16];
  snprintf(out, sizeof out, "%s/f.nettrace", dir);
  snprintf(ss, sizeof ss, "%s/f.speedscope.json", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  char opens[160], opens_env[200];
  snprintf(opens, sizeof opens, "%s/opens", dir);
  snprintf(opens_env, sizeof opens_env, "DNT_TRACE_OPENS=%s", opens);
  const char *const env[] = {opens_env, NULL};
  char *const argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", out, "--duration", "1s", "--format",
                        "speedscope", NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, env, 60000), 0, "%s%s", r.out, r.err);
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.complete, "%s", s.problem);
  char *json = slurp(ss);
  cr_assert(strncmp(json, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\"", 62) == 0, "%.80s", json);
  /* built from the stream as it was written: the trace is never opened again */
  char *n = slurp(opens);
  cr_expect_str_eq(n, "0\n", "collect --format opened the trace it wrote (%s times)", n);
  free(n);
  /* the conversion holds the samples the trace holds: the same SampleProfiler count as convert's */
  struct dnt_run c;
  char again[160];
  snprintf(again, sizeof again, "%s/again.speedscope.json", dir);
  cr_assert_eq(dnt_run_dntrace(&c, "convert", out, "--format", "speedscope", "-o", again, NULL), 0, "%s", c.err);
  char *json2 = slurp(again);
  cr_expect_str_eq(json, json2, "collect --format and convert write the same speedscope file");
  free(json2);
  dnt_run_free(&c);
  unlink(again);
  unlink(opens);
  free(json);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  unlink(ss);
  rmdir(dir);
  free(dir);
}

/* --native where perf cannot run: one line says why, and the EventPipe trace is still written. */
Test(collect, native_without_perf_still_writes_the_trace, .timeout = 120) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir(), out[128], data[128], pid[16];
  snprintf(out, sizeof out, "%s/t.nettrace", dir);
  snprintf(data, sizeof data, "%s/t.perf.data", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char *const argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "--native", "--duration", "2s", "-o", out, NULL};
  const char *const env[] = {"PATH=/nonexistent", NULL};
  struct dnt_run r;
  cr_expect_eq(dnt_run_argv(&r, argv, env, 60000), 0, "%s%s", r.out, r.err);
  cr_expect(strstr(r.err, "perf is not installed"), "says why: %s", r.err);
  cr_expect(strstr(r.err, "EventPipe trace only"), "and what it does instead: %s", r.err);
  struct stat st;
  cr_expect(stat(out, &st) == 0 && st.st_size > 1000, "the trace is written");
  cr_expect_neq(access(data, F_OK), 0, "no perf recording");
  dnt_run_free(&r);
  dnt_target_stop(&t);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
  free(dir);
}

/* --native where perf fails after its checks passed (a wrapper that makes perf record exit at
 * once, a fault the machine cannot be made to produce): perf's own words, exit 1, no files. */
Test(collect, native_perf_failing_to_start_is_one_error, .timeout = 120) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir(), out[128], wrapper[160], env_path[4200], pid[16];
  snprintf(out, sizeof out, "%s/t.nettrace", dir);
  snprintf(wrapper, sizeof wrapper, "%s/perf", dir);
  FILE *fp = fopen(wrapper, "w");
  cr_assert(fp);
  fputs("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in -D) echo 'perf: made to fail' >&2; exit 1;; esac; done\n"
        "exec perf-not-here \"$@\"\n",
        fp);
  fclose(fp);
  cr_assert_eq(chmod(wrapper, 0755), 0);
  snprintf(env_path, sizeof env_path, "PATH=%s:%s", dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char *const argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "--native", "--duration", "2s", "-o", out, NULL};
  const char *const env[] = {env_path, NULL};
  struct dnt_run r;
  cr_expect_eq(dnt_run_argv(&r, argv, env, 60000), 1, "%s%s", r.out, r.err);
  cr_expect(strstr(r.err, "perf: made to fail"), "perf's own words: %s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(wrapper);
  DIR *d = opendir(dir);
  cr_assert(d);
  struct dirent *e;
  int left = 0;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') {
      left++;
      cr_log_error("left behind: %s", e->d_name);
    }
  closedir(d);
  cr_expect_eq(left, 0);
  rmdir(dir);
  free(dir);
}

/* Waits (up to DNT_HANG_MS) until pid is stopped (its state in /proc/PID/stat is T). */
static int wait_stopped_state(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  for (double deadline = now() + DNT_HANG_MS / 1000.0; now() < deadline; usleep(10000)) {
    char *text = slurp(path), *paren = strrchr(text, ')');
    int stopped = paren && paren[1] == ' ' && paren[2] == 'T';
    free(text);
    if (stopped) return 1;
  }
  return 0;
}

/* A target stopped mid-session (SIGSTOP) never writes its rundown nor closes the stream: collect
 * gives the stop (Ctrl+C, once the target is stopped) a deadline (shortened here through
 * DNT_STOP_TIMEOUT_MS), says so, keeps the bytes and exits. */
Test(collect, a_stopped_target_cannot_hold_the_stop_forever, .timeout = 180) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], log[128], pid[16];
  snprintf(out, sizeof out, "%s/stopped.nettrace", dir);
  snprintf(log, sizeof log, "%s/collect.log", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  setenv("DNT_STOP_TIMEOUT_MS", "2000", 1);
  char *const argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", out, NULL};
  pid_t c = spawn_dntrace(argv, log);
  unsetenv("DNT_STOP_TIMEOUT_MS");
  /* the session streams (into the hidden temporary beside out): then the target stops dead, and
   * only then is the trace stopped */
  wait_for_trace(dir, "stopped.nettrace", has_a_block, NULL, "a block");
  kill(t.pid, SIGSTOP);
  int stopped = wait_stopped_state(t.pid);
  kill(c, SIGINT);
  int rc = wait_exit(c);
  kill(t.pid, SIGCONT);
  cr_assert(stopped, "the target stopped (SIGSTOP)");
  char *text = slurp(log);
  cr_expect_eq(rc, 0, "collect keeps what it received and exits (rc %d):\n%s", rc, text);
  cr_expect(strstr(text, "did not end the stream within 2 s"), "says why it gave up:\n%s", text);
  struct stat st;
  cr_expect(stat(out, &st) == 0 && st.st_size > 0, "the bytes received are kept in %s", out);
  free(text);
  dnt_target_stop(&t);
  unlink(out);
  unlink(log);
  rmdir(dir);
  free(dir);
}

/* dotnet-trace's stopping event: the session ends once a matching event arrives (provider, name,
 * payload values as text); a filter that matches nothing leaves the session to its duration. */
/* Each stopping event's session has a 600 s duration: one that the event did not stop would be
 * killed at DNT_HANG_MS (run.h), its exit not 0. */
Test(collect, stopping_event, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  const char *const args[] = {"--event-rate", "500", NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char *dir = temp_dir(), out[128], pid[16];
  snprintf(out, sizeof out, "%s/stop.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--providers", "Sample-Load:0:4", "--duration", "600s",
                           "--stopping-event-provider-name", "Sample-Load", "--stopping-event-event-name", "Tick",
                           "--stopping-event-payload-filter", "s:tick", NULL);
  cr_expect_eq(rc, 0, "%s%s", r.out, r.err);
  cr_expect(strstr(r.out, "The stopping event arrived (Sample-Load/Tick)") && !strstr(r.out, "Duration reached"),
            "stopped by the event, not by its 600 s (after %.1f s):\n%s", r.seconds, r.out);
  static struct nt_scan s;
  cr_expect_eq(nt_scan_file(out, &s), 0);
  cr_expect(s.complete, "a whole trace, rundown included: %s", s.problem);
  dnt_run_free(&r);
  /* a value no Tick has: the duration ends it */
  rc = dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--providers", "Sample-Load:0:4", "--duration", "3s",
                       "--stopping-event-provider-name", "Sample-Load", "--stopping-event-event-name", "Tick",
                       "--stopping-event-payload-filter", "s:nope", NULL);
  cr_expect_eq(rc, 0, "%s%s", r.out, r.err);
  cr_expect(strstr(r.out, "Duration reached") && !strstr(r.out, "stopping event arrived"), "%s", r.out);
  dnt_run_free(&r);
  /* a runtime event (no field list in its metadata) by TraceEvent's name, as dotnet-trace takes
   * it, its payload decoded by the schema: the sample throws this exception every 2 s */
  rc = dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--providers", "Microsoft-Windows-DotNETRuntime:0x8000:4",
                       "--duration", "600s", "--stopping-event-provider-name", "Microsoft-Windows-DotNETRuntime",
                       "--stopping-event-event-name", "Exception/Start", "--stopping-event-payload-filter",
                       "ExceptionType:System.InvalidOperationException", NULL);
  cr_expect_eq(rc, 0, "%s%s", r.out, r.err);
  cr_expect(strstr(r.out, "The stopping event arrived (Microsoft-Windows-DotNETRuntime/Exception/Start)") &&
                !strstr(r.out, "Duration reached"),
            "stopped by the exception, not by its 600 s (after %.1f s):\n%s", r.seconds, r.out);
  dnt_run_free(&r);
  /* dotnet-trace's rules for the three options */
  cr_expect_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "--stopping-event-event-name", "Tick", NULL), 2);
  cr_expect(strstr(r.err, "need --stopping-event-provider-name"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "--stopping-event-provider-name", "P",
                               "--stopping-event-payload-filter", "a:b", NULL),
               2);
  cr_expect(strstr(r.err, "needs --stopping-event-event-name"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "--stopping-event-provider-name", "P",
                               "--stopping-event-event-name", "E", "--stopping-event-payload-filter", "novalue", NULL),
               2);
  cr_expect(strstr(r.err, "is not FIELD:VALUE"), "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  rmdir(dir);
  free(dir);
}

/* --buffering-mode Block (issue 28 item 11): CollectTracing6, which .NET 10 does not know: one
 * warning line, then the session with Drop buffering, a complete trace. The sample's runtime says
 * its version: a runtime of 11 or later takes Block without a word. */
Test(collect, block_buffering_falls_back_to_drop_with_one_warning, .timeout = 180) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], pid[16];
  snprintf(out, sizeof out, "%s/b.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", pid, NULL), 0, "%s", r.err);
  const char *v = strstr(r.out, "Runtime version     : ");
  cr_assert(v, "%s", r.out);
  int net10 = atoi(v + 22) < 11;
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "--buffering-mode", "block", "--duration", "1s", "-o", out,
                               NULL),
               0, "%s", r.err);
  const char *warned = strstr(r.err, "warning: this runtime cannot block its writers (Block buffering needs .NET 11)");
  cr_assert_eq(warned != NULL, net10, "%s", r.err);
  if (warned) cr_assert_null(strstr(warned + 1, "warning: this runtime cannot block"), "once: %s", r.err);
  dnt_run_free(&r);
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.complete, "%s", s.problem);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "--buffering-mode", "Sometimes", NULL), 2);
  cr_assert(strstr(r.err, "--buffering-mode: 'Sometimes' is not Drop or Block"), "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  rmdir(dir);
  free(dir);
}

/* --profile thread-time (dotnet-trace collect-linux's context switches, issue 28 item 11): perf
 * beside the session, as --native, said in one line; with another profile, that profile's
 * providers; the list of profiles names it. */
Test(collect, thread_time_profile_is_native, .timeout = 180) {
  DNT_REQUIRE_PERF();
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], data[128], pid[16];
  snprintf(out, sizeof out, "%s/tt.nettrace", dir);
  snprintf(data, sizeof data, "%s/tt.perf.data", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "--profile", "gc-collect,Thread-Time", "--duration", "1s",
                               "-o", out, NULL),
               0, "%s", r.err);
  cr_assert(strstr(r.err, "--profile thread-time: the context switches are recorded with perf beside the trace"),
            "%s", r.err);
  cr_assert(strstr(r.out, "Microsoft-Windows-DotNETRuntimePrivate"), "gc-collect's providers: %s", r.out);
  cr_assert_null(strstr(r.out, "Microsoft-DotNETCore-SampleProfiler"), "no default profiles: %s", r.out);
  dnt_run_free(&r);
  struct stat st;
  cr_assert_eq(stat(data, &st), 0, "perf's recording beside the trace");
  cr_assert_gt(st.st_size, 0);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "--list-profiles", NULL), 0);
  cr_assert(strstr(r.out, "\nthread-time "), "%s", r.out);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
  free(dir);
}

/* The target's thread names go into the trace (issue 27): events of dntrace's own provider after
 * the runtime's, which every view then uses; the sample's threads as /proc names them. */
Test(collect, thread_names_are_written_into_the_trace, .timeout = 180) {
  const char *te = te_oracle_or_skip("collect's thread names");
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], pid[16], want[96];
  snprintf(out, sizeof out, "%s/names.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  unsigned long cpu = dnt_target_thread_named(t.pid, "cpu-work"), blocking = dnt_target_thread_named(t.pid, "blocking-work");
  cr_assert(cpu && blocking);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "--duration", "1s", "-o", out, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.complete, "the stream is whole after the names: %s", s.problem);
  cr_assert_gt(nt_scan_count(&s, "dntrace", 1, 0), 1, "ThreadName events, read by the independent reader");
  cr_assert_eq(dnt_run_dntrace(&r, "events", out, "--provider", "dntrace", NULL), 0, "%s", r.err);
  snprintf(want, sizeof want, " dntrace ThreadName ThreadId=%lu Name=cpu-work\n", cpu);
  cr_assert(strstr(r.out, want), "%s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", out, "--threads", NULL), 0, "%s", r.err);
  snprintf(want, sizeof want, "\nThread %lu (cpu-work, ", cpu);
  cr_assert(strstr(r.out, want), "%s", r.out);
  snprintf(want, sizeof want, "\nThread %lu (blocking-work, ", blocking);
  cr_assert(strstr(r.out, want), "%s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "info", out, NULL), 0, "%s", r.err);
  snprintf(want, sizeof want, "  %lu (cpu-work)\n", cpu);
  cr_assert(strstr(r.out, want), "%s", r.out);
  dnt_run_free(&r);
  /* the formats' own places for a thread's name: speedscope's profile, Chromium's thread_name
   * metadata, pprof's thread_name label (read back by go tool pprof) */
  char conv[160];
  snprintf(conv, sizeof conv, "%s/names.speedscope.json", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", out, "--format", "speedscope", "-o", conv, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  char *json = slurp(conv);
  snprintf(want, sizeof want, "\"name\":\"cpu-work (%lu)\"", cpu);
  cr_assert(json && strstr(json, want), "speedscope: %s", want);
  free(json);
  unlink(conv);
  snprintf(conv, sizeof conv, "%s/names.chromium.json", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", out, "--format", "chromium", "-o", conv, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  json = slurp(conv);
  snprintf(want, sizeof want, "\"tid\":%lu,\"args\":{\"name\":\"blocking-work\"}", blocking);
  cr_assert(json && strstr(json, want), "chromium: %s", want);
  free(json);
  unlink(conv);
  snprintf(conv, sizeof conv, "%s/names.pb.gz", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", out, "--format", "pprof", "-o", conv, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  char home[200], cache[200], tmp[200];
  snprintf(home, sizeof home, "HOME=%s", dir);
  snprintf(cache, sizeof cache, "GOCACHE=%s/gocache", dir);
  snprintf(tmp, sizeof tmp, "PPROF_TMPDIR=%s", dir);
  const char *genv[] = {home, cache, tmp, NULL};
  char *pargv[] = {"/usr/bin/env", "go", "tool", "pprof", "-raw", conv, NULL};
  cr_assert_eq(dnt_run_argv(&r, pargv, genv, DNT_HANG_MS), 0, "go tool pprof: %s", r.err);
  cr_assert(strstr(r.out, "thread_name:[cpu-work]"), "%.3000s", r.out);
  dnt_run_free(&r);
  unlink(conv);
  /* TraceEvent reads them as a self-described event of their own (its Dynamic parser) */
  cr_assert_eq(te_run(&r, te, out, "names"), 0, "%s", r.err);
  cr_assert(strstr(r.out, "\ndntrace\t1\t0\tThreadName\n"), "TraceEvent's event names:\n%s", r.out);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  char rm[160];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir); /* and go's cache */
  cr_assert_eq(system(rm), 0);
  free(dir);
}

/* One TaskWaitBegin of `dntrace events`: thread, task, behaviour (1 a wait, 2 an await), and the
 * task that continues it. */
struct wait_begin {
  unsigned long thread;
  long task, behavior, next;
};

static size_t wait_begins(const char *text, struct wait_begin *v, size_t cap) {
  size_t n = 0;
  for (const char *line = text; line && *line && n < cap; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    double ts;
    struct wait_begin w;
    const char *f = strstr(line, " TaskWaitBegin/Transfer ");
    const char *eol = strchr(line, '\n');
    if (!f || (eol && f > eol)) continue;
    if (sscanf(line, "%lf %lu", &ts, &w.thread) == 2 &&
        sscanf(f, " TaskWaitBegin/Transfer OriginatingTaskSchedulerID=%*d OriginatingTaskID=%*d TaskID=%ld Behavior=%ld "
                  "ContinueWithTaskID=%ld",
               &w.task, &w.behavior, &w.next) == 3)
      v[n++] = w;
  }
  return n;
}

/* The async-tasks profile records what stitching async stacks needs (issue 27): on the sample's
 * --async chain (Outer awaits Middle awaits Inner awaits Task.Delay, all waited for by
 * async-driver), its four waits in a row on the driver, each continued by the next (awaits
 * 2, 2, 2, then the driver's blocking wait 1), and the innermost await ended on another thread:
 * Inner's continuation runs on the pool. Recorded for 2 s, longer if that held no whole chain. */
Test(collect, async_tasks_profile_records_the_awaits, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  const char *const args[] = {"--async", "--no-cpu", "--no-blocking", "--no-alloc", "--no-exceptions", "--no-counters",
                              NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  unsigned long driver = thread_named(t.pid, "async-driver");
  char *dir = temp_dir(), out[128], pid[16];
  snprintf(out, sizeof out, "%s/async.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  static struct wait_begin w[200000];
  int chain = 0;
  long inner = 0;
  for (int secs = 2; secs <= 32 && !chain; secs *= 2) {
    char dur[16];
    snprintf(dur, sizeof dur, "%ds", secs);
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--profile", "async-tasks", "--duration", dur,
                                 NULL),
                 0, "%s%s", r.out, r.err);
    dnt_run_free(&r);
    static struct nt_scan s;
    cr_assert_eq(nt_scan_file(out, &s), 0);
    cr_assert(s.complete, "%s", s.problem);
    uint64_t begins = nt_scan_count(&s, "System.Threading.Tasks.TplEventSource", 10, driver);
    cr_assert_eq(dnt_run_dntrace(&r, "events", out, "--provider", "System.Threading.Tasks.TplEventSource", "--name",
                                 "TaskWaitBegin", NULL),
                 0, "%s", r.err);
    size_t n = wait_begins(r.out, w, sizeof w / sizeof w[0]);
    size_t on_driver = 0;
    for (size_t i = 0; i < n; i++) on_driver += w[i].thread == driver;
    cr_assert_eq(on_driver, begins, "dntrace events and the independent reader count the driver's waits alike");
    for (size_t i = 0; i + 3 < n && !chain; i++) {
      const struct wait_begin *a = &w[i];
      int ok = 1;
      for (int k = 0; k < 4; k++) {
        long want_behavior = k < 3 ? 2 : 1, want_next = k < 3 ? a[k].task + 1 : 0;
        ok &= a[k].thread == driver && a[k].task == a[0].task + k && a[k].behavior == want_behavior &&
              a[k].next == want_next;
      }
      if (ok) chain = 1, inner = a[2].task;
    }
    dnt_run_free(&r);
    if (!chain) cr_log_info("%s: no whole chain among %zu waits: recording again, for longer", dur, n);
  }
  cr_assert(chain, "the four waits of one Outer chain, in a row on async-driver (tid %lu)", driver);
  /* Inner's await of Task.Delay (the third wait) ends on a pool thread, not on the driver */
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", out, "--provider", "System.Threading.Tasks.TplEventSource", "--name",
                               "TaskWaitEnd", NULL),
               0, "%s", r.err);
  char want[64];
  snprintf(want, sizeof want, " TaskID=%ld\n", inner);
  const char *end = strstr(r.out, want);
  cr_assert(end, "the end of the wait on task %ld", inner);
  const char *line = end;
  while (line > r.out && line[-1] != '\n') line--;
  double ts;
  unsigned long thread = 0;
  cr_assert_eq(sscanf(line, "%lf %lu", &ts, &thread), 2, "%.200s", line);
  cr_assert_neq(thread, driver, "Inner's continuation runs on a pool thread, not on the driver");
  char comm[64];
  snprintf(comm, sizeof comm, "/proc/%d/task/%lu/comm", (int)t.pid, thread);
  FILE *fp = fopen(comm, "r");
  char name[64] = "";
  if (fp) {
    if (!fgets(name, sizeof name, fp)) name[0] = '\0';
    fclose(fp);
  }
  cr_expect(!fp || strncmp(name, ".NET TP Worker", 14) == 0, "thread %lu is %s", thread, name);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  rmdir(dir);
  free(dir);
}
