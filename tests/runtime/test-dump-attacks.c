/* dntrace dump against a hostile target: a fake runtime in its own mount namespace (a container
 * with a private /tmp) that, asked for a dump, plants something at the dump path and answers OK
 * (the fake IPC server playing tests/unit/ipc/cases/dump-plant.case, whose `call plant` is the
 * hook below).
 * dntrace must never read through a planted symlink (to a host file, to /dev/zero), never block
 * on a FIFO, never keep a file that is not a core of that process: one error line, exit 1,
 * nothing at the output path, the plant removed. A fake that writes a real core of itself is the
 * control: that one is delivered, byte for byte. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../lib/elf-core.h"
#include "../lib/fake-ipc.h"
#include "../lib/run.h"

static char dir[64], secret[128];

static void setup(void) {
  if (geteuid() != 0) cr_skip_test("needs root to give the fake runtime its own mount namespace");
  snprintf(dir, sizeof dir, "/tmp/dnt-attack-XXXXXX");
  cr_assert(mkdtemp(dir));
  snprintf(secret, sizeof secret, "%s/secret", dir);
  FILE *fp = fopen(secret, "w");
  cr_assert(fp);
  fputs("host secret\n", fp);
  fclose(fp);
}

static void teardown(void) {
  if (!dir[0]) return;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* above DNT_HANG_MS, so that a dntrace that blocks fails at its own assertion */
TestSuite(dump_attack, .init = setup, .fini = teardown, .timeout = 180);

enum plant { SYMLINK_HOST, SYMLINK_ZERO, FIFO, NOT_ELF, OTHER_OWNER, OTHER_PID, HARD_LINK, REAL_CORE };
static enum plant what;

/* dump-plant.case's `call plant`, in the fake: the request's first string is the dump path */
static uint32_t plant(const char *name, const uint8_t *req, size_t len, void *ud) {
  (void)ud;
  if (strcmp(name, "plant") != 0 || len < 20) return 0x80004005u;
  char path[4096];
  fake_ipc_first_string(req + 20, len - 20, path, sizeof path);
  uint8_t core[1024];
  size_t n;
  int fd;
  switch (what) {
  case SYMLINK_HOST: return symlink(secret, path) == 0 ? 0 : 0x80004005u;
  case SYMLINK_ZERO: return symlink("/dev/zero", path) == 0 ? 0 : 0x80004005u;
  case FIFO: return mkfifo(path, 0600) == 0 ? 0 : 0x80004005u;
  case NOT_ELF:
  case OTHER_OWNER:
  case OTHER_PID:
  case HARD_LINK:
  case REAL_CORE:
    n = dnt_test_elf_core(core, sizeof core, what == OTHER_PID ? (uint32_t)getpid() + 7 : (uint32_t)getpid());
    if (what == NOT_ELF) memcpy(core, "#!/bin/sh\n", 10);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || write(fd, core, n) != (ssize_t)n) return 0x80004005u;
    if (what == OTHER_OWNER && fchown(fd, 65534, 65534) != 0) return 0x80004005u;
    close(fd);
    if (what == HARD_LINK) {
      char twin[4200];
      snprintf(twin, sizeof twin, "%s.twin", path);
      if (link(path, twin) != 0) return 0x80004005u;
    }
    return 0;
  }
  return 0x80004005u;
}

static fake_ipc *start_fake(int private_tmp) {
  fake_ipc_opts o = {.runtime = 1, .private_tmp = private_tmp, .hook = plant};
  fake_ipc *f;
  char err[1024];
  cr_assert_eq(fake_ipc_start(&f, "dump-plant.case", &o, err, sizeof err), 0, "%s", err);
  return f;
}

/* Stops it; it saw only the requests its case answers. */
static void stop_fake(fake_ipc *f) {
  char err[1024];
  int rc = fake_ipc_stop(f, err, sizeof err);
  fake_ipc_free(f);
  cr_assert_eq(rc, 0, "the fake runtime: %s", err);
}

/* Names in the fake's /tmp that start with dntrace-dump (what dntrace left or failed to remove). */
static int leftovers(const fake_ipc *f, const char *except) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ls /proc/%d/root/tmp | grep dntrace-dump | grep -v '%s' | grep -q .", (int)fake_ipc_pid(f),
           except ? except : "^$");
  return system(cmd) == 0;
}

static char *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  char *buf = calloc(1, 65536);
  *len = fread(buf, 1, 65535, fp);
  fclose(fp);
  return buf;
}

/* Runs dump against a fake planting `p`; checks the refusal: exit 1, one stderr line with
 * `reason`, no output, the secret intact, no plant left. A dntrace that reads /dev/zero or waits
 * on the FIFO is killed at DNT_HANG_MS (run.h): its status is then -1, not 1. How long a refusal
 * takes is a figure (printed), not a gate. */
static void expect_refused(enum plant p, int private_tmp, const char *reason, const char *extra_opt) {
  what = p;
  fake_ipc *f = start_fake(private_tmp);
  char out[128], gz[140], pid[16];
  snprintf(out, sizeof out, "%s/core", dir);
  snprintf(gz, sizeof gz, "%s.gz", out);
  snprintf(pid, sizeof pid, "%d", (int)fake_ipc_pid(f));
  char *argv[] = {(char *)dnt_bin(), "dump", "-p", pid, "-o", out, (char *)extra_opt, NULL};
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, NULL, DNT_HANG_MS);
  cr_assert_eq(rc, 1, "exit 1, got %d (-1: killed after %.0f s)\nout: %s\nerr: %s", rc, r.seconds, r.out, r.err);
  cr_log_info("refused in %.2f s", r.seconds);
  cr_assert(strstr(r.err, "refusing the runtime's dump"), "%s", r.err);
  cr_assert(strstr(r.err, reason), "says '%s': %s", reason, r.err);
  cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  cr_assert_neq(access(out, F_OK), 0, "no %s", out);
  cr_assert_neq(access(gz, F_OK), 0, "no %s", gz);
  size_t n;
  char *text = slurp(secret, &n);
  cr_assert(text && strcmp(text, "host secret\n") == 0, "the host file is untouched");
  free(text);
  if (private_tmp) cr_assert_not(leftovers(f, p == HARD_LINK ? ".twin" : NULL), "the plant is removed");
  dnt_run_free(&r);
  stop_fake(f);
}

Test(dump_attack, symlink_to_a_host_file) {
  expect_refused(SYMLINK_HOST, 1, "symbolic link", NULL);
}

Test(dump_attack, symlink_to_a_host_file_compressed) {
  expect_refused(SYMLINK_HOST, 1, "symbolic link", "--compress");
}

Test(dump_attack, symlink_to_dev_zero_compressed) {
  expect_refused(SYMLINK_ZERO, 1, "symbolic link", "--compress");
}

Test(dump_attack, fifo) {
  expect_refused(FIFO, 1, "a FIFO", NULL);
}

Test(dump_attack, not_an_elf_file) {
  expect_refused(NOT_ELF, 1, "not an ELF file", NULL);
}

Test(dump_attack, a_file_of_another_user) {
  expect_refused(OTHER_OWNER, 1, "uid 65534", NULL);
}

Test(dump_attack, a_core_of_another_process) {
  expect_refused(OTHER_PID, 1, "not of the target", NULL);
}

Test(dump_attack, a_hard_link) {
  expect_refused(HARD_LINK, 1, "hard links", NULL);
}

/* Same mount namespace: the runtime is told to write at our output path itself; a symlink it
 * leaves there is refused and removed (the link, not the secret). */
Test(dump_attack, symlink_at_the_output_path_itself) {
  expect_refused(SYMLINK_HOST, 0, "symbolic link", NULL);
}

/* ---- the same attacks on a kernel without openat2: dntrace walks the path itself ---- */

/* From here on, this test's process and its children (dntrace, the fake) get ENOSYS for openat2,
 * as on a kernel before 5.6 or under a seccomp profile that does not know it. */
static void forbid_openat2(void) {
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
  cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
  cr_assert_eq(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog), 0, "seccomp: %s", strerror(errno));
  errno = 0;
  cr_assert_eq(syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0), -1);
  cr_assert_eq(errno, ENOSYS, "openat2 is gone");
}

Test(dump_attack, without_openat2_symlink_to_a_host_file) {
  forbid_openat2();
  expect_refused(SYMLINK_HOST, 1, "symbolic link", NULL);
}

Test(dump_attack, without_openat2_symlink_to_dev_zero_compressed) {
  forbid_openat2();
  expect_refused(SYMLINK_ZERO, 1, "symbolic link", "--compress");
}

Test(dump_attack, without_openat2_fifo) {
  forbid_openat2();
  expect_refused(FIFO, 1, "a FIFO", NULL);
}

/* The control: a fake that writes a core of itself gets it delivered as written. */
static void core_is_delivered(void) {
  what = REAL_CORE;
  fake_ipc *f = start_fake(1);
  char out[128], pid[16];
  snprintf(out, sizeof out, "%s/core", dir);
  snprintf(pid, sizeof pid, "%d", (int)fake_ipc_pid(f));
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "-p", pid, "-o", out, NULL), 0, "%s%s", r.out, r.err);
  uint8_t want[1024];
  size_t n = dnt_test_elf_core(want, sizeof want, (uint32_t)fake_ipc_pid(f)), got_n;
  char *got = slurp(out, &got_n);
  cr_assert(got, "%s exists", out);
  cr_assert(got_n == n && memcmp(got, want, n) == 0, "delivered byte for byte (%zu of %zu bytes)", got_n, n);
  cr_assert(strstr(r.out, "2 threads"), "%s", r.out);
  cr_assert_not(leftovers(f, NULL), "the temporary is removed");
  free(got);
  dnt_run_free(&r);
  stop_fake(f);
  unlink(out);
}

Test(dump_attack, a_core_of_the_target_is_delivered) {
  core_is_delivered();
}

Test(dump_attack, without_openat2_a_core_of_the_target_is_delivered) {
  forbid_openat2();
  core_is_delivered();
}
