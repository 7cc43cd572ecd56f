/* dntrace against a fake runtime that a process of any user could run (the fake IPC server,
 * tests/lib/fake-ipc.c, forked and named as a runtime, playing tests/unit/ipc/cases/hostile-*):
 * ProcessInfo strings full of terminal control sequences must reach the terminal escaped (ps,
 * info), and a session that is refused, dropped or never answered must leave an existing
 * `collect -o FILE` byte for byte as it was. The control: a well-behaved fake, whose session
 * collect stops on a second connection. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/fake-ipc.h"
#include "../lib/run.h"
#include "../lib/target.h"

/* hostile-info.inc's command line: ESC ] title BEL (retitles the window), CR LF and a fake line,
 * C1 CSI (U+009B), DEL; and how dnt_safe_text's rules (src/util.h) write it */
#define EVIL_CMDLINE_SHOWN "evil\\x1b]0;pwned\\x07\\r\\nFAKE LINE\\u009b31m\\x7f"

/* A fake runtime playing case_name with the options o; its pid in pid (may be NULL). */
static fake_ipc *start_case_as(const char *case_name, const fake_ipc_opts *o, char pid[16]) {
  fake_ipc *f;
  char err[1024];
  cr_assert_eq(fake_ipc_start(&f, case_name, o, err, sizeof err), 0, "%s", err);
  if (pid) snprintf(pid, 16, "%d", (int)fake_ipc_pid(f));
  return f;
}

/* ... in its own mount namespace (by default, or with opts), which takes root. */
static fake_ipc *start_case(const char *case_name, const fake_ipc_opts *opts, char pid[16]) {
  if (geteuid() != 0) cr_skip_test("needs root to give the fake runtime its own mount namespace");
  fake_ipc_opts o = {.runtime = 1, .private_tmp = 1};
  return start_case_as(case_name, opts ? opts : &o, pid);
}

/* Stops it; it saw only the requests its case answers. */
static void stop_case(fake_ipc *f) {
  char err[1024];
  int rc = fake_ipc_stop(f, err, sizeof err);
  fake_ipc_free(f);
  cr_assert_eq(rc, 0, "the fake runtime: %s", err);
}

/* No byte of s is a control character other than the newline, nor DEL, nor a C1 control. */
static void assert_no_raw_controls(const char *what, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    cr_assert(!(*p < 0x20 && *p != '\n') && *p != 0x7f, "%s: raw control byte 0x%02x at offset %zu:\n%s", what, *p,
              (size_t)(p - (const unsigned char *)s), s);
    cr_assert(!(p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f), "%s: raw C1 control at offset %zu", what,
              (size_t)(p - (const unsigned char *)s));
  }
}

/* No line of out begins with the text the fake tried to put on a line of its own. */
static void assert_no_forged_line(const char *out) {
  for (const char *l = out; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    cr_assert(strncmp(l, "FAKE LINE", 9) != 0, "a forged line:\n%s", out);
}

Test(hostile, info_escapes_every_runtime_string, .timeout = 60) {
  char pid[16];
  fake_ipc *f = start_case("hostile-refuse.case", NULL, pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", pid, NULL), 0, "%s%s", r.out, r.err);
  assert_no_raw_controls("info", r.out);
  assert_no_forged_line(r.out);
  cr_assert(strstr(r.out, "Command line        : " EVIL_CMDLINE_SHOWN "\n"), "%s", r.out);
  cr_assert(strstr(r.out, "OS                  : Linux\\x1b[2J\n"), "%s", r.out);
  cr_assert(strstr(r.out, "Architecture        : x64\\x08\\x08\n"), "%s", r.out);
  cr_assert(strstr(r.out, "Entry assembly      : App\\x1b[31m\n"), "%s", r.out);
  cr_assert(strstr(r.out, "Runtime version     : 8.0.0\\x07\n"), "%s", r.out);
  cr_assert(strstr(r.out, "Runtime identifier  : linux-x64\\r\n"), "%s", r.out);
  dnt_run_free(&r);

  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", pid, "--json", NULL), 0, "%s%s", r.out, r.err);
  assert_no_raw_controls("info --json", r.out);
  cr_assert(strstr(r.out, "\"commandLine\": \"evil\\u001b]0;pwned\\u0007\\r\\nFAKE LINE\\u009b31m\\u007f\""), "%s",
            r.out);
  dnt_run_free(&r);
  stop_case(f);
}

Test(hostile, ps_escapes_versions_and_command_lines, .timeout = 60) {
  fake_ipc *f = start_case("hostile-refuse.case", NULL, NULL);
  int fpid = (int)fake_ipc_pid(f);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "ps", NULL), 0, "%s", r.err);
  assert_no_raw_controls("ps", r.out);
  assert_no_forged_line(r.out);
  char want[64];
  snprintf(want, sizeof want, "\n%7d  ", fpid);
  const char *line = strstr(r.out, want);
  cr_assert(line, "pid %d listed:\n%s", fpid, r.out);
  const char *end = strchr(line + 1, '\n');
  char *row = strndup(line + 1, end ? (size_t)(end - line - 1) : strlen(line + 1));
  cr_assert(strstr(row, " 8.0.0\\x07 "), "the version, escaped: %s", row);
  cr_assert(strstr(row, EVIL_CMDLINE_SHOWN), "the command line, escaped: %s", row);
  free(row);
  dnt_run_free(&r);
  stop_case(f);
}

/* ---- collect -o EXISTING ---- */

/* The row of `dntrace ps` out for pid, without its newline (heap), or NULL. */
static char *ps_row(const char *out, int pid) {
  char want[32];
  snprintf(want, sizeof want, "\n%7d  ", pid);
  const char *row = strstr(out, want);
  return row ? strndup(row + 1, strcspn(row + 1, "\n")) : NULL;
}

/* Eight runtimes that never answer ProcessInfo: each is listed, without a version (a deadline is
 * no UNKNOWN_COMMAND: nothing to fall back on). How long ps takes for them is a figure for
 * `make bench` (asked at once, the list costs ps's 1 s deadline once); that they are asked at once
 * is ps_asks_every_process_at_once's. */
Test(hostile, ps_lists_silent_runtimes_without_a_version, .timeout = 60) {
  if (geteuid() != 0) cr_skip_test("needs root to give the fake runtime its own mount namespace");
  enum { N = 8 };
  fake_ipc *f[N];
  for (int i = 0; i < N; i++) f[i] = start_case("silent-info.case", NULL, NULL);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "ps", NULL);
  cr_expect_eq(rc, 0, "%s", r.err);
  for (int i = 0; i < N; i++) {
    char *line = ps_row(r.out, (int)fake_ipc_pid(f[i]));
    cr_expect(line, "the silent runtime %d is listed:\n%s", (int)fake_ipc_pid(f[i]), r.out);
    if (!line) continue;
    /* PID, NAME, RUNTIME: no version came (silent-info.case's ProcessInfo2 would say 9.9.9) */
    cr_expect(strstr(line, "  ?  ") && !strstr(line, "9.9.9"), "no version for a silent runtime: '%s'", line);
    free(line);
  }
  cr_log_info("ps of %d silent runtimes: %.2f s (one deadline of 1 s; %s)", N, r.seconds, dnt_run_context(0));
  dnt_run_free(&r);
  for (int i = 0; i < N; i++) stop_case(f[i]);
}

/* A runtime stopped by a signal (SIGSTOP) cannot answer: ps says it is stopped, from its state,
 * rather than asking it (issue 28 item 10). Its row still has its command line (from /proc). */
Test(hostile, ps_says_a_stopped_runtime_is_stopped, .timeout = 60) {
  char pid[16];
  fake_ipc *f = start_case("silent-info.case", NULL, pid);
  kill(fake_ipc_pid(f), SIGSTOP);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "ps", NULL);
  cr_expect_eq(rc, 0, "%s", r.err);
  char *line = ps_row(r.out, (int)fake_ipc_pid(f));
  cr_expect(line && strstr(line, "[stopped] "), "the stopped runtime's row says so:\n%s", r.out);
  free(line);
  cr_log_info("ps beside a stopped runtime: %.2f s", r.seconds);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "ps", "--json", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "\"stopped\": true"), "%s", r.out);
  dnt_run_free(&r);
  kill(fake_ipc_pid(f), SIGCONT);
  stop_case(f);
}

/* Eight runtimes that answer ProcessInfo only once all eight have been asked (a barrier in
 * memory the forked fakes share): asked one after the other, the first would wait for the others
 * forever and no runtime would show its version; asked at once, every row shows it. ps's deadline
 * is raised (DNT_PS_TIMEOUT_MS) so that only a hang reaches it: what decides is whether the eight
 * requests were out at the same time, not how fast the machine made them. */
enum { BARRIER_N = 8 };
struct barrier {
  int arrived[BARRIER_N]; /* set by fake i when ps's request came */
  int requests;           /* every request that came, ps's and any other ps's on the machine */
};
struct barrier_fake {
  struct barrier *b; /* shared (MAP_SHARED) with the forked fakes */
  int index;
};

static const char barrier_case[] =
    "on 04 08\n" /* ProcessInfo3: answered once every fake has been asked */
    "call arrived\n"
    "reply header ff 00\n"
    "payload u32 1 u64 pid hex 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10\n"
    "payload utf16 \"/usr/bin/barrier\" utf16 \"Linux\" utf16 \"x64\" utf16 \"barrier\" utf16 \"7.7.7\" utf16 "
    "\"linux-x64\"\n"
    "on * *\n"
    "reply header ff ff\n"
    "payload u32 0x80131385\n";

/* In fake i: marks its arrival, then waits until all have arrived (at most DNT_HANG_MS: a hang). */
static uint32_t barrier_hook(const char *name, const uint8_t *request, size_t len, void *ud) {
  const struct barrier_fake *bf = ud;
  (void)name, (void)request, (void)len;
  __atomic_add_fetch(&bf->b->requests, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&bf->b->arrived[bf->index], 1, __ATOMIC_SEQ_CST);
  for (int waited = 0; waited < DNT_HANG_MS; waited++) {
    int all = 1;
    for (int i = 0; i < BARRIER_N; i++) all &= __atomic_load_n(&bf->b->arrived[i], __ATOMIC_SEQ_CST);
    if (all) break;
    usleep(1000);
  }
  return 0;
}

Test(hostile, ps_asks_every_process_at_once, .timeout = 180) {
  if (geteuid() != 0) cr_skip_test("needs root to give the fake runtime its own mount namespace");
  struct barrier *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(b, MAP_FAILED);
  memset(b, 0, sizeof *b);
  char dir[] = "/tmp/dnt-barrier-XXXXXX", path[64];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/barrier.case", dir);
  FILE *fp = fopen(path, "w");
  cr_assert(fp);
  fputs(barrier_case, fp);
  fclose(fp);
  static struct barrier_fake bf[BARRIER_N];
  fake_ipc *f[BARRIER_N];
  for (int i = 0; i < BARRIER_N; i++) {
    bf[i] = (struct barrier_fake){b, i};
    fake_ipc_opts o = {.runtime = 1, .private_tmp = 1, .hook = barrier_hook, .ud = &bf[i]};
    f[i] = start_case(path, &o, NULL);
  }
  unlink(path);
  rmdir(dir);
  char *const argv[] = {(char *)dnt_bin(), "ps", NULL};
  const char *const env[] = {"DNT_PS_TIMEOUT_MS=60000", NULL};
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, env, DNT_HANG_MS);
  cr_expect_eq(rc, 0, "ps exit %d (-1: killed after %.0f s, at DNT_HANG_MS): %s", rc, r.seconds, r.err);
  int arrived = 0;
  for (int i = 0; i < BARRIER_N; i++) arrived += __atomic_load_n(&b->arrived[i], __ATOMIC_SEQ_CST);
  cr_expect_eq(arrived, BARRIER_N, "ps asked %d of the %d runtimes (%d requests in all; %s)", arrived, BARRIER_N,
               __atomic_load_n(&b->requests, __ATOMIC_SEQ_CST), dnt_run_context(0));
  for (int i = 0; i < BARRIER_N; i++) {
    char *line = ps_row(r.out, (int)fake_ipc_pid(f[i]));
    cr_expect(line, "the runtime %d is listed:\n%s", (int)fake_ipc_pid(f[i]), r.out);
    if (!line) continue;
    cr_expect(strstr(line, "  7.7.7  ") && strstr(line, "/usr/bin/barrier"),
              "its answer, which came only once all %d were asked: '%s'", BARRIER_N, line);
    free(line);
  }
  cr_log_info("ps of %d runtimes answering together: %.2f s (%s)", BARRIER_N, r.seconds, dnt_run_context(0));
  dnt_run_free(&r);
  for (int i = 0; i < BARRIER_N; i++) stop_case(f[i]);
  munmap(b, sizeof *b);
}

/* A session that carries no counter value, or bytes that are no nettrace: counters collect says
 * so and fails, instead of "File saved (0 values)" and 0. */
static void counters_collect_fails(const char *case_name, const char *says) {
  char dir[] = "/tmp/dnt-hostc-XXXXXX", out[128], pid[16];
  fake_ipc *f = start_case(case_name, NULL, pid);
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/c.csv", dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "-p", pid, "-o", out, "--duration", "10s", NULL);
  cr_expect_eq(rc, 1, "exit 1 (got %d):\n%s%s", rc, r.out, r.err);
  cr_expect(strstr(r.err, says), "says '%s':\n%s", says, r.err);
  cr_expect(!strstr(r.out, "File saved"), "claims nothing was saved:\n%s", r.out);
  dnt_run_free(&r);
  stop_case(f);
  unlink(out);
  rmdir(dir);
}

Test(hostile, counters_collect_of_a_session_ended_at_once_fails, .timeout = 60) {
  counters_collect_fails("hostile-drop.case", "before sending any counter value");
}

Test(hostile, counters_collect_of_garbage_fails, .timeout = 60) {
  counters_collect_fails("hostile-garbage.case", "does not parse as nettrace");
}

/* collect keeps the bytes for a look, but a stream that is no nettrace is a failure */
Test(hostile, collect_of_garbage_fails, .timeout = 60) {
  char dir[] = "/tmp/dnt-hostg-XXXXXX", out[128], pid[16];
  fake_ipc *f = start_case("hostile-garbage.case", NULL, pid);
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/g.nettrace", dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--duration", "10s", NULL);
  cr_expect_eq(rc, 1, "exit 1 (got %d):\n%s%s", rc, r.out, r.err);
  cr_expect(strstr(r.err, "does not parse as nettrace"), "%s", r.err);
  cr_expect(!strstr(r.out, "Trace completed") && !strstr(r.out, "keeps the"), "no trace claimed:\n%s", r.out);
  dnt_run_free(&r);
  stop_case(f);
  unlink(out);
  rmdir(dir);
}

static const unsigned char old_bytes[] = "Nettrace\0an older trace, kept\xff\x01\n";

static void write_old(const char *path) {
  FILE *fp = fopen(path, "wb");
  cr_assert(fp);
  cr_assert_eq(fwrite(old_bytes, 1, sizeof old_bytes, fp), sizeof old_bytes);
  fclose(fp);
}

/* The file holds old_bytes exactly, and it is the only entry of its directory. */
static void assert_kept(const char *dir, const char *path) {
  unsigned char buf[256];
  FILE *fp = fopen(path, "rb");
  cr_assert(fp, "%s still exists", path);
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  cr_assert(n == sizeof old_bytes && memcmp(buf, old_bytes, n) == 0, "%s kept byte for byte (%zu bytes now)", path, n);
  DIR *d = opendir(dir);
  struct dirent *de;
  int entries = 0;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    entries++;
    cr_assert_str_eq(de->d_name, "t.nettrace", "no temporary left beside it");
  }
  closedir(d);
  cr_assert_eq(entries, 1, "no temporary left beside it");
}

/* alone: the refusal with no file there before is the error alone, one line and nothing on
 * stdout (issue 29 item 8: the providers table came first) */
static void collect_keeps_existing(const char *case_name, const char *says, int alone) {
  char dir[] = "/tmp/dnt-keep-XXXXXX", out[64], pid[16];
  fake_ipc *f = start_case(case_name, NULL, pid);
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/t.nettrace", dir);
  write_old(out);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--duration", "5s", NULL), 1, "%s%s", r.out,
               r.err);
  cr_assert(strstr(r.err, says), "says '%s': %s", says, r.err);
  assert_kept(dir, out);
  dnt_run_free(&r);

  /* and with no file there before, none after */
  unlink(out);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--duration", "5s", NULL), 1, "%s%s", r.out,
               r.err);
  if (alone) {
    cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
    cr_assert_str_eq(r.out, "", "nothing before the refusal");
  }
  DIR *d = opendir(dir);
  struct dirent *de;
  while ((de = readdir(d)))
    cr_assert(!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."), "nothing left: %s", de->d_name);
  closedir(d);
  dnt_run_free(&r);
  rmdir(dir);
  stop_case(f);
}

Test(hostile, collect_refused_keeps_an_existing_file, .timeout = 60) {
  collect_keeps_existing("hostile-refuse.case", "refused the session", 1);
}

Test(hostile, collect_ended_at_once_keeps_an_existing_file, .timeout = 60) {
  collect_keeps_existing("hostile-drop.case", "ended the session before sending anything", 0);
}

/* Issue 29 item 5: a runtime that accepts the session and sends nothing on it until it is stopped
 * (not even the stream's header): no trace came, so collect fails and leaves no empty file. */
Test(hostile, collect_of_a_session_that_sent_nothing_fails, .timeout = 60) {
  collect_keeps_existing("hostile-mute.case", "sent nothing on the session, not even the trace's header, before it "
                                              "was stopped", 0);
}

/* ... nor after it (a stopped or hung runtime): collect waits its stop deadline (made short here:
 * nothing will come however long it waits), then fails; it used to keep an empty file, exit 0. */
Test(hostile, collect_of_a_session_silent_after_its_stop_fails, .timeout = 150) {
  setenv("DNT_STOP_TIMEOUT_MS", "2000", 1);
  collect_keeps_existing("hostile-mute-open.case", "sent nothing on the session", 0);
  unsetenv("DNT_STOP_TIMEOUT_MS");
}

/* createdump's text relayed by the runtime, several lines with newlines: one error line, the lines
 * joined, no literal \n (issue 29 item 8). */
Test(hostile, dump_relays_createdumps_lines_as_one, .timeout = 60) {
  char dir[] = "/tmp/dnt-dumperr-XXXXXX", out[128], pid[16];
  fake_ipc *f = start_case("dump-createdump-error.case", NULL, pid);
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/core", dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "dump", "-p", pid, "-o", out, NULL);
  cr_expect_eq(rc, 1, "exit 1 (got %d):\n%s%s", rc, r.out, r.err);
  cr_expect(strstr(r.err, "Gathering state for process 42; [createdump] ReadProcessMemory FAILED"), "%s", r.err);
  cr_expect(!strstr(r.err, "\\n"), "no literal \\n: %s", r.err);
  assert_no_raw_controls("dump", r.err);
  cr_expect_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  dnt_run_free(&r);
  stop_case(f);
  rmdir(dir);
}

/* A runtime that never answers: dntrace gives up after its 30 s reply deadline. */
Test(hostile, collect_unanswered_keeps_an_existing_file, .timeout = 150) {
  collect_keeps_existing("hostile-silent.case", "did not answer the session request", 0);
}

/* A runtime slow to answer ProcessInfo (6 s, past the 5 s info once allowed, as a runtime on a
 * busy machine may be): info waits for the answer, as for any other request of a runtime (30 s),
 * rather than failing. */
static const char slow_info_case[] =
    "on 04 08\n"
    "pause 6000\n"
    "reply header ff 00\n"
    "payload u32 1 u64 pid hex 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10\n"
    "payload utf16 \"/usr/bin/slow\" utf16 \"Linux\" utf16 \"x64\" utf16 \"slow\" utf16 \"8.0.0\" utf16 \"linux-x64\"\n"
    "on * *\n"
    "reply header ff ff\n"
    "payload u32 0x80131385\n";

Test(hostile, info_waits_for_a_slow_runtime, .timeout = 120) {
  char dir[] = "/tmp/dnt-slow-XXXXXX", path[64], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/slow.case", dir);
  FILE *fp = fopen(path, "w");
  cr_assert(fp);
  fputs(slow_info_case, fp);
  fclose(fp);
  fake_ipc_opts o = {.runtime = 1}; /* our /tmp, our uid: no root needed */
  fake_ipc *f = start_case_as(path, &o, pid);
  unlink(path);
  rmdir(dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "info", "-p", pid, NULL);
  stop_case(f);
  cr_assert_eq(rc, 0, "info waited %.1f s for the answer (exit %d):\n%s%s", r.seconds, rc, r.out, r.err);
  cr_assert(strstr(r.out, "Command line        : /usr/bin/slow\n"), "%s", r.out);
  cr_assert(strstr(r.out, "Runtime version     : 8.0.0\n"), "%s", r.out);
  dnt_run_free(&r);
}

/* ---- discovery through a symlinked /tmp ---- */

/* A container whose /tmp is an absolute symlink to D: its socket is in its own D. Through
 * /proc/PID/root a careless lookup follows the link in the host's tree, to the host's D, where a
 * decoy runtime listens under the container's pid number. dntrace must talk to the container's. */
Test(hostile, a_symlinked_tmp_is_followed_inside_the_container, .timeout = 60) {
  if (geteuid() != 0) cr_skip_test("needs root to give the fake runtime its own root");
  char decoy_dir[] = "/var/tmp/dnt-decoy-XXXXXX"; /* not under /tmp: the container's /tmp is the link */
  cr_assert(mkdtemp(decoy_dir));
  char pid[16];
  fake_ipc_opts o = {.runtime = 1, .tmp_link = decoy_dir};
  fake_ipc *f = start_case("container.case", &o, pid);
  fake_ipc_opts od = {.runtime = 1, .sock_dir = decoy_dir, .sock_pid = fake_ipc_pid(f),
                      .sock_key = fake_ipc_starttime(fake_ipc_pid(f))};
  fake_ipc *decoy = start_case("decoy.case", &od, NULL);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "info", "-p", pid, NULL);
  stop_case(decoy);
  stop_case(f);
  rmdir(decoy_dir);
  cr_assert_eq(rc, 0, "%s%s", r.out, r.err);
  cr_assert(strstr(r.out, "Command line        : the container's runtime\n"), "%s", r.out);
  cr_assert_null(strstr(r.out, "DECOY"), "%s", r.out);
  dnt_run_free(&r);
}

/* ---- the control: a well-behaved fake, the conversation as a runtime has it ---- */

/* collect-session.case: the session on one connection; the stream's end-of-stream tag comes only
 * once StopTracing of that session came on a second connection, so a trace that ends with it
 * proves the stop was sent, for the right session, while the stream was open. */
Test(hostile, collect_stops_the_session_on_a_second_connection, .timeout = 60) {
  fake_ipc_opts o = {.runtime = 1}; /* our /tmp, our uid: no root needed */
  char pid[16];
  fake_ipc *f = start_case_as("collect-session.case", &o, pid);
  char dir[] = "/tmp/dnt-hosts-XXXXXX", out[128];
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/s.nettrace", dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--duration", "1s", NULL);
  stop_case(f);
  cr_assert_eq(rc, 0, "%s%s", r.out, r.err);
  /* the stream, written out from wire-formats.md B.2 and B.3: a Trace object and the end */
  uint8_t want[103], got[256];
  size_t n = 0;
  memcpy(want, "Nettrace\x14\0\0\0!FastSerialization.1", 32), n = 32;
  memcpy(want + n, "\x05\x05\x01\x04\0\0\0\x04\0\0\0\x05\0\0\0Trace\x06", 21), n += 21;
  const uint16_t start[8] = {2026, 11, 1, 23, 14, 0, 0, 0};
  for (int i = 0; i < 8; i++) want[n++] = (uint8_t)start[i], want[n++] = (uint8_t)(start[i] >> 8);
  const uint64_t q[2] = {1000, 1000000000};
  for (int i = 0; i < 2; i++)
    for (int b = 0; b < 8; b++) want[n++] = (uint8_t)(q[i] >> (8 * b));
  const uint32_t w[4] = {8, (uint32_t)atoi(pid), 2, 1000000};
  for (int i = 0; i < 4; i++)
    for (int b = 0; b < 4; b++) want[n++] = (uint8_t)(w[i] >> (8 * b));
  want[n++] = 0x06; /* the Trace object ends */
  want[n++] = 0x01; /* the stream ends */
  cr_assert_eq(n, sizeof want);
  FILE *fp = fopen(out, "rb");
  cr_assert(fp, "%s written", out);
  size_t got_n = fread(got, 1, sizeof got, fp);
  fclose(fp);
  cr_assert(got_n == n && memcmp(got, want, n) == 0, "the stream byte for byte (%zu of %zu bytes)", got_n, n);
  cr_assert(strstr(r.out, "Trace completed"), "%s", r.out);
  dnt_run_free(&r);
  unlink(out);
  rmdir(dir);
}

/* collect-at-once.case: the whole stream arrives with the answer to CollectTracing, so that
 * collect reads it before its session has started. With a stopping event to watch for, collect
 * parses the stream as it comes, and its end (or a stopping event that came that early: it
 * crashed collect under CI's load) starts a timer: one set up before the session, not after. */
Test(hostile, collect_of_a_stream_that_comes_with_the_answer, .timeout = 60) {
  fake_ipc_opts o = {.runtime = 1};
  char pid[16];
  fake_ipc *f = start_case_as("collect-at-once.case", &o, pid);
  char dir[] = "/tmp/dnt-hosts-XXXXXX", out[128];
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/s.nettrace", dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "collect", "-p", pid, "-o", out, "--duration", "20s",
                           "--stopping-event-provider-name", "Sample-Load", NULL);
  stop_case(f);
  cr_assert_eq(rc, 0, "%s%s", r.out, r.err);
  cr_assert(strstr(r.out, "Trace completed"), "%s", r.out);
  struct stat st;
  cr_assert_eq(stat(out, &st), 0, "%s written", out);
  cr_assert_eq(st.st_size, 103, "the whole stream, its end tag included: %lld bytes", (long long)st.st_size);
  dnt_run_free(&r);
  unlink(out);
  rmdir(dir);
}

/* stop-at-once.case: bytes that do not parse come with the answer, before the analysis's session
 * has started; the stop they call for must reach the runtime at once (it was dropped, and the
 * session ran to its --duration), and the error is one line. The duration is 600 s: run to its
 * end, gc would be killed at DNT_HANG_MS (run.h) and its exit would not be 1. */
Test(hostile, a_stop_asked_for_before_the_start_returned_is_sent, .timeout = 180) {
  fake_ipc_opts o = {.runtime = 1};
  char pid[16];
  fake_ipc *f = start_case_as("stop-at-once.case", &o, pid);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "gc", "-p", pid, "--duration", "600s", NULL);
  stop_case(f);
  cr_assert_eq(rc, 1, "stopped at once, not at the end of its 600 s (exit %d after %.1f s):\n%s%s", rc, r.seconds,
               r.out, r.err);
  cr_assert(strstr(r.err, "does not parse as nettrace"), "%s", r.err);
  const char *e = strstr(r.err, "dntrace: error: ");
  cr_assert(e && !strstr(e + 1, "dntrace: error: ") && strchr(e, '\n') == r.err + strlen(r.err) - 1,
            "the error is one line, the last: %s", r.err);
  dnt_run_free(&r);
}
