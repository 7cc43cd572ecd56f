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

#include "../lib/nt-scan.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"
#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

static void start(dnt_target *t) {
  DNT_REQUIRE_TARGET();
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000};
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

/* Waits (up to 60 s: a loaded machine's runtime may take seconds to answer) until the log says
 * the session has started, then 1 s more for its first blocks. */
static void wait_started(const char *log) {
  double deadline = now() + 60;
  for (;;) {
    char *text = access(log, R_OK) == 0 ? slurp(log) : NULL; /* the child may not have made it yet */
    int started = text && strstr(text, "Tracing started");
    free(text);
    if (started) break;
    cr_assert_lt(now(), deadline, "collect did not start tracing in 60 s");
    usleep(50 * 1000);
  }
  sleep(1);
}

static int wait_exit(pid_t pid, int timeout_s) {
  double deadline = now() + timeout_s;
  int st;
  while (now() < deadline) {
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    usleep(20000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
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

Test(collect, default_session_has_samples_of_cpu_work_and_rundown, .timeout = 120) {
  dnt_target t;
  start(&t);
  unsigned long cpu_tid = thread_named(t.pid, "cpu-work");
  char *dir = temp_dir();
  char out[128], pid[16];
  snprintf(out, sizeof out, "%s/trace.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);

  struct dnt_run r;
  double t0 = now();
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--duration", "3s", NULL), 0, "%s%s", r.out, r.err);
  double took = now() - t0;
  cr_assert(strstr(r.out, "0x000000100003801D   Informational(4)   --profile"), "the default profiles are announced:\n%s", r.out);
  cr_assert(strstr(r.out, "Trace completed"), "%s", r.out);
  /* the stop itself is timed by duration_2s_stops_within_a_second; here the rundown and a
   * loaded machine add what they add */
  cr_assert(took >= 3.0 && took < 15, "--duration 3s took %.2f s", took);

  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(out, &s), 0);
  cr_assert(s.magic_ok, "begins with Nettrace");
  cr_assert(s.complete, "ends with the end-of-stream tag: %s", s.problem);
  cr_assert_eq(s.pointer_size, 8);
  uint64_t cpu_samples = nt_scan_count(&s, SAMPLER, 0, cpu_tid);
  cr_assert_gt(cpu_samples, 100, "SampleProfiler samples of cpu-work (tid %lu): %llu", cpu_tid,
               (unsigned long long)cpu_samples);
  cr_assert_gt(nt_scan_count(&s, RUNDOWN, 144, 0), 0, "MethodDCEndVerbose rundown events");
  cr_assert_gt(nt_scan_count(&s, RUNTIME, 80, 0), 0, "exception events (the sample throws every 2 s)");
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  rmdir(dir);
  free(dir);
}

Test(collect, ctrl_c_keeps_a_complete_stream_with_rundown, .timeout = 120) {
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
  kill(d, SIGINT);
  int rc = wait_exit(d, 30);
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

Test(collect, target_killed_mid_session_keeps_a_valid_prefix, .timeout = 120) {
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
  kill(t.pid, SIGKILL);
  int rc = wait_exit(d, 30);
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

/* A full disk: a 256 KiB tmpfs in a private mount namespace. One clear error, exit 1, and the
 * cut file moved aside so it cannot pass for a trace. */
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
  dnt_target_stop(&t);
  unlink(path);
  rmdir(dir);
}

Test(collect, a_full_disk_is_one_clear_error, .timeout = 120) {
  dnt_target t;
  start(&t);
  if (geteuid() != 0) cr_skip_test("needs root to mount a small tmpfs");
  char *dir = temp_dir();
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "mount -t tmpfs -o size=256k tmpfs '%s' && \"$DNT_BIN\" collect -p %d -o '%s/t.nettrace' --duration 10s; "
           "rc=$?; echo \"files: $(ls '%s' | tr '\\n' ' ')\"; exit $rc",
           dir, (int)t.pid, dir, dir);
  char *argv[] = {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", cmd, NULL};
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, NULL, 60000);
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

/* The stop is measured when dntrace says it stops (the rundown that follows depends on the
 * target and the machine's load, not on the timer). */
Test(collect, duration_2s_stops_within_a_second, .timeout = 60) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], log[128], pid[16];
  snprintf(out, sizeof out, "%s/d.nettrace", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char *argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", out, "--duration", "00:00:00:02", NULL};
  fclose(fopen(log, "w")); /* exists before the child opens it */
  double t0 = now(), started = 0, stopped = 0;
  pid_t d = spawn_dntrace(argv, log);
  /* from the session's start (a loaded machine may take a while to get there) to the stop */
  while (!stopped && now() - t0 < 60) {
    char *text = slurp(log);
    if (!started && strstr(text, "Tracing started")) started = now();
    if (started && strstr(text, "Duration reached")) stopped = now() - started;
    free(text);
    usleep(10000);
  }
  cr_assert_eq(wait_exit(d, 60), 0);
  cr_assert(started, "the start is announced");
  cr_assert(stopped >= 1.9 && stopped < 3.0, "stopped %.2f s after the start", stopped);
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

/* Enter stops the trace; the status line stays on the screen once (not once at the Enter, once
 * at the stop message and once at the end). */
Test(collect, enter_stops_and_the_status_line_stays_once, .timeout = 90) {
  if (system("command -v tmux >/dev/null 2>&1") != 0) cr_skip_test("needs tmux (./bootstrap.sh installs it)");
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char cmd[4600], session[32], capture[256], screen_path[160], *screen = NULL;
  snprintf(session, sizeof session, "dnte%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "tmux new-session -d -s %s -x 120 -y 30 \"'%s' collect -p %d -o '%s/enter.nettrace'; echo EXITED $?; sleep 30\"",
           session, dnt_bin(), (int)t.pid, dir);
  cr_assert_eq(system(cmd), 0);
  snprintf(capture, sizeof capture, "tmux capture-pane -p -t %s > '%s/screen'", session, dir);
  snprintf(screen_path, sizeof screen_path, "%s/screen", dir);
  for (int i = 0; i < 150; i++) { /* recording for a second or two */
    free(screen);
    cr_assert_eq(system(capture), 0);
    screen = slurp(screen_path);
    if (strstr(screen, "[00:00:00:01]") || strstr(screen, "[00:00:00:02]")) break;
    usleep(100 * 1000);
  }
  snprintf(cmd, sizeof cmd, "tmux send-keys -t %s Enter", session);
  cr_assert_eq(system(cmd), 0);
  for (int i = 0; i < 300 && !strstr(screen, "EXITED"); i++) {
    usleep(100 * 1000);
    free(screen);
    cr_assert_eq(system(capture), 0);
    screen = slurp(screen_path);
  }
  snprintf(cmd, sizeof cmd, "tmux kill-session -t %s", session);
  cr_assert_eq(system(cmd), 0);
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

/* On a terminal the status line is rewritten in place (tmux is the terminal); to a pipe there
 * is no status line at all. */
Test(collect, status_line_on_a_terminal_only, .timeout = 90) {
  if (system("command -v tmux >/dev/null 2>&1") != 0) cr_skip_test("needs tmux (./bootstrap.sh installs it)");
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char cmd[4600], session[32];
  snprintf(session, sizeof session, "dnt%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "tmux new-session -d -s %s -x 120 -y 30 \"'%s' collect -p %d -o '%s/tty.nettrace' --duration 4s; sleep 30\"",
           session, dnt_bin(), (int)t.pid, dir);
  cr_assert_eq(system(cmd), 0);
  /* the status line ticks once a second: wait (under load, start-up can take a while) until it
   * has ticked twice, then look at the whole screen */
  char capture[256], *screen = NULL;
  char screen_path[160];
  snprintf(capture, sizeof capture, "tmux capture-pane -p -t %s > '%s/screen'", session, dir);
  snprintf(screen_path, sizeof screen_path, "%s/screen", dir);
  for (int i = 0; i < 100; i++) {
    free(screen);
    cr_assert_eq(system(capture), 0);
    screen = slurp(screen_path);
    if (strstr(screen, "[00:00:00:02]") || strstr(screen, "[00:00:00:03]")) break;
    usleep(100 * 1000);
  }
  snprintf(cmd, sizeof cmd, "tmux kill-session -t %s", session);
  cr_assert_eq(system(cmd), 0);
  int lines = 0;
  for (const char *p = screen; (p = strstr(p, "Recording trace")); p++) lines++;
  cr_assert_eq(lines, 1, "one status line, rewritten in place:\n%s", screen);
  cr_assert(strstr(screen, "[00:00:00:02]") || strstr(screen, "[00:00:00:03]"), "elapsed time shown:\n%s", screen);
  cr_assert(strstr(screen, "Press <Enter> or <Ctrl+C> to exit"), "%s", screen);
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
 * DOTNET_DiagnosticPorts=PATH dials it (suspended), the session runs, the runtime is resumed. */
Test(collect, diagnostic_port_listen, .timeout = 120) {
  DNT_REQUIRE_TARGET();
  char *dir = temp_dir();
  char sock[128], spec[160], out[128], log[128];
  snprintf(sock, sizeof sock, "%s/port.sock", dir);
  snprintf(spec, sizeof spec, "%s,listen", sock);
  snprintf(out, sizeof out, "%s/l.nettrace", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  char *argv[] = {(char *)dnt_bin(), "collect", "--diagnostic-port", spec, "-o", out, "--duration", "2s", NULL};
  pid_t d = spawn_dntrace(argv, log);
  struct stat st;
  dnt_target t;
  dnt_start_sample_dialing(&t, sock, 2000, 20000, &st);
  cr_assert_eq(st.st_mode & 0777, 0600);
  int rc = wait_exit(d, 30);
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

/* A target stopped mid-session (SIGSTOP) never writes its rundown nor closes the stream: collect
 * gives the stop a deadline (shortened here through DNT_STOP_TIMEOUT_MS), says so, keeps the
 * bytes and exits. */
Test(collect, a_stopped_target_cannot_hold_the_stop_forever, .timeout = 120) {
  dnt_target t;
  start(&t);
  char *dir = temp_dir();
  char out[128], log[128], pid[16];
  snprintf(out, sizeof out, "%s/stopped.nettrace", dir);
  snprintf(log, sizeof log, "%s/collect.log", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  setenv("DNT_STOP_TIMEOUT_MS", "2000", 1);
  char *const argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", out, "--duration", "3s", NULL};
  pid_t c = spawn_dntrace(argv, log);
  unsetenv("DNT_STOP_TIMEOUT_MS");
  /* the session streams (into the hidden temporary beside out): then the target stops dead */
  int streaming = 0;
  for (int i = 0; i < 600 && !streaming; i++) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      struct stat st;
      char path[400];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (strstr(e->d_name, "stopped") && stat(path, &st) == 0 && st.st_size > 0) streaming = 1;
    }
    if (d) closedir(d);
    usleep(50000);
  }
  cr_assert(streaming, "the session never streamed");
  kill(t.pid, SIGSTOP);
  double t0 = now();
  int rc = wait_exit(c, 60);
  double took = now() - t0;
  kill(t.pid, SIGCONT);
  char *text = slurp(log);
  cr_expect_eq(rc, 0, "collect keeps what it received and exits (rc %d):\n%s", rc, text);
  cr_expect(took < 20, "collect ended %.1f s after the target stopped (duration 3 s + deadline 2 s)", took);
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
Test(collect, stopping_event, .timeout = 180) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  const char *const args[] = {"--event-rate", "500", NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char *dir = temp_dir(), out[128], pid[16];
  snprintf(out, sizeof out, "%s/stop.nettrace", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  double t0 = now();
  int rc = dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--providers", "Sample-Load:0:4", "--duration", "90s",
                           "--stopping-event-provider-name", "Sample-Load", "--stopping-event-event-name", "Tick",
                           "--stopping-event-payload-filter", "s:tick", NULL);
  double took = now() - t0;
  cr_expect_eq(rc, 0, "%s%s", r.out, r.err);
  cr_expect(strstr(r.out, "The stopping event arrived (Sample-Load/Tick)"), "%s", r.out);
  cr_expect_lt(took, 45, "stopped by the event, long before its 90 s (took %.1f s)", took);
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
  t0 = now();
  rc = dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--providers", "Microsoft-Windows-DotNETRuntime:0x8000:4",
                       "--duration", "60s", "--stopping-event-provider-name", "Microsoft-Windows-DotNETRuntime",
                       "--stopping-event-event-name", "Exception/Start", "--stopping-event-payload-filter",
                       "ExceptionType:System.InvalidOperationException", NULL);
  took = now() - t0;
  cr_expect_eq(rc, 0, "%s%s", r.out, r.err);
  cr_expect(strstr(r.out, "The stopping event arrived (Microsoft-Windows-DotNETRuntime/Exception/Start)"), "%s", r.out);
  cr_expect_lt(took, 30, "stopped by the exception, long before 60 s (took %.1f s)", took);
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
