/* dntrace dump against the real sample target: every dump type gives an ELF core whose thread
 * notes match the target's threads; a target in a private mount namespace delivers to our path;
 * --compress gives a gzip of a core; bad destinations are one clear error. The cores are read
 * here with the test's own ELF walk, not the product's checker (tested below on its own). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "elfcore.h"
#include "../lib/elf-core.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

static void start(dnt_target *t, dnt_target_mode mode) {
  DNT_REQUIRE_TARGET();
  dnt_target_opts o = {.mode = mode, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
}

#define MAX_TIDS 1024

/* The thread ids of pid now (/proc/PID/task), at most MAX_TIDS; their number. */
static int task_ids(pid_t pid, int *tids) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  cr_assert(d);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < MAX_TIDS)
    if (de->d_name[0] != '.') tids[n++] = atoi(de->d_name);
  closedir(d);
  return n;
}

static int has_tid(const int *tids, int n, int tid) {
  for (int i = 0; i < n; i++)
    if (tids[i] == tid) return 1;
  return 0;
}

/* Counts NT_PRSTATUS notes of an ELF core held in memory, and writes each one's thread id (its
 * pr_pid) into tids (at most MAX_TIDS; may be NULL); -1 if it is not a core. */
static int prstatus_notes_tids(const uint8_t *p, size_t n, int *tids) {
  if (n < sizeof(Elf64_Ehdr)) return -1;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)p;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_type != ET_CORE) return -1;
  int count = 0;
  for (int i = 0; i < eh->e_phnum; i++) {
    size_t off = eh->e_phoff + (size_t)i * sizeof(Elf64_Phdr);
    if (off + sizeof(Elf64_Phdr) > n) return -1;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(p + off);
    if (ph->p_type != PT_NOTE) continue;
    if (ph->p_offset + ph->p_filesz > n) return -1;
    for (size_t q = 0; q + sizeof(Elf64_Nhdr) <= ph->p_filesz;) {
      const Elf64_Nhdr *nh = (const Elf64_Nhdr *)(p + ph->p_offset + q);
      size_t desc = ph->p_offset + q + sizeof *nh + ((nh->n_namesz + 3u) & ~3u);
      if (nh->n_type == NT_PRSTATUS) {
        if (tids && count < MAX_TIDS && nh->n_descsz >= sizeof(struct elf_prstatus) &&
            desc + sizeof(struct elf_prstatus) <= n) {
          struct elf_prstatus ps;
          memcpy(&ps, p + desc, sizeof ps);
          tids[count] = ps.pr_pid;
        }
        count++;
      }
      q += sizeof *nh + ((nh->n_namesz + 3u) & ~3u) + ((nh->n_descsz + 3u) & ~3u);
    }
  }
  return count;
}

static int prstatus_notes(const uint8_t *p, size_t n) { return prstatus_notes_tids(p, n, NULL); }

static int file_prstatus_notes_tids(const char *path, int *tids) {
  int fd = open(path, O_RDONLY);
  cr_assert_geq(fd, 0, "%s exists", path);
  struct stat st;
  fstat(fd, &st);
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  cr_assert_neq(m, MAP_FAILED);
  int n = prstatus_notes_tids(m, (size_t)st.st_size, tids);
  munmap(m, (size_t)st.st_size);
  close(fd);
  return n;
}

static int file_prstatus_notes(const char *path) { return file_prstatus_notes_tids(path, NULL); }

static char *temp_dir(void) {
  char *d = strdup("/tmp/dnt-dump-XXXXXX");
  cr_assert(mkdtemp(d));
  return d;
}

/* Threads may come and go while the dump is taken (the runtime's own, the thread pool's): every
 * thread the process had both before and after the dump is in the core, and the core's count is
 * the one dntrace reports. */
Test(dump, every_type_is_a_core_with_the_targets_threads, .timeout = 240) {
  dnt_target t;
  start(&t, DNT_TARGET_PLAIN);
  char *dir = temp_dir();
  static const char *types[] = {"triage", "mini", "heap", "full"};
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  for (size_t i = 0; i < 4; i++) {
    char out[128];
    snprintf(out, sizeof out, "%s/core-%s", dir, types[i]);
    static int before[MAX_TIDS], after[MAX_TIDS], in_core[MAX_TIDS];
    int nbefore = task_ids(t.pid, before);
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, "dump", "-p", pid, "--type", types[i], "-o", out, NULL), 0, "%s: %s%s", types[i],
                 r.out, r.err);
    int nafter = task_ids(t.pid, after);
    int notes = file_prstatus_notes_tids(out, in_core);
    cr_assert_gt(notes, 0, "%s: a core with thread notes", types[i]);
    cr_assert(has_tid(in_core, notes, (int)t.pid), "%s: the main thread %d is in the core", types[i], (int)t.pid);
    for (int k = 0; k < nbefore; k++)
      if (has_tid(after, nafter, before[k]))
        cr_assert(has_tid(in_core, notes, before[k]),
                  "%s: thread %d, there before and after the dump, is not among the core's %d (the process had %d, "
                  "then %d threads)",
                  types[i], before[k], notes, nbefore, nafter);
    char want[64];
    snprintf(want, sizeof want, "%d threads, type %s", notes, types[i]);
    cr_assert(strstr(r.out, want), "dntrace reports '%s': %s", want, r.out);
    dnt_run_free(&r);
    unlink(out);
  }
  dnt_target_stop(&t);
  rmdir(dir);
  free(dir);
}

Test(dump, from_outside_a_private_mount_namespace, .timeout = 120) {
  dnt_target t;
  start(&t, DNT_TARGET_MOUNTNS_PRIVATE_TMP);
  char *dir = temp_dir();
  char out[128], pid[16];
  snprintf(out, sizeof out, "%s/core", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "-p", pid, "--type", "mini", "-o", out, NULL), 0, "%s%s", r.out, r.err);
  cr_assert_gt(file_prstatus_notes(out), 0, "a core at the caller's path");
  /* the temporary inside the target's /tmp is gone */
  char inside[128];
  snprintf(inside, sizeof inside, "/proc/%d/root/tmp", (int)t.pid);
  DIR *d = opendir(inside);
  cr_assert(d);
  struct dirent *de;
  while ((de = readdir(d))) cr_assert_null(strstr(de->d_name, "dntrace-dump"), "left behind: %s", de->d_name);
  closedir(d);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  rmdir(dir);
  free(dir);
}

Test(dump, compressed_dump_decompresses_to_a_core, .timeout = 120) {
  dnt_target t;
  start(&t, DNT_TARGET_PLAIN);
  char *dir = temp_dir();
  char out[128], gz[140], pid[16];
  snprintf(out, sizeof out, "%s/core", dir);
  snprintf(gz, sizeof gz, "%s.gz", out);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "-p", pid, "--type", "mini", "--compress", "-o", out, NULL), 0, "%s%s",
               r.out, r.err);
  /* the same check report as an uncompressed dump (issue 28 item 26) */
  unsigned threads = 0, segments = 0;
  const char *line = strstr(r.out, "Dump written: ");
  cr_assert(line && sscanf(strstr(line, "uncompressed, "), "uncompressed, %u threads, type mini, %u memory segments",
                           &threads, &segments) == 2,
            "%s", r.out);
  gzFile f = gzopen(gz, "rb");
  cr_assert(f, "%s exists", gz);
  size_t cap = 64u << 20, n = 0;
  uint8_t *buf = malloc(cap);
  int got;
  while ((got = gzread(f, buf + n, (unsigned)(cap - n))) > 0) n += (size_t)got;
  cr_assert_eq(gzclose(f), Z_OK, "the gzip stream is whole");
  cr_assert_gt(prstatus_notes(buf, n), 0, "it decompresses to a core");
  cr_expect_eq((unsigned)prstatus_notes(buf, n), threads, "the threads said are the core's");
  free(buf);
  cr_assert_neq(access(out, F_OK), 0, "no uncompressed copy left");
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(gz);
  rmdir(dir);
  free(dir);
}

Test(dump, unwritable_destination_is_one_clear_error, .timeout = 60) {
  dnt_target t;
  start(&t, DNT_TARGET_PLAIN);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "-p", pid, "-o", "/proc/no-such-dir/core", NULL), 1, "%s", r.out);
  cr_assert(strstr(r.err, "cannot write '/proc/no-such-dir/core'"), "%s", r.err);
  cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "-p", pid, "--type", "huge", NULL), 2);
  dnt_run_free(&r);
  dnt_target_stop(&t);
}

/* Root's dump of another user's process (issue 29 item 3, issue 28 item 1): createdump runs as
 * that user, so its file would fail in a directory only root can write and, anywhere else, end up
 * that user's to rewrite. The dump goes through the target's TMPDIR instead and is delivered by
 * dntrace: into a mode-700 directory of root's, and owned by root (mode 0600) in a mode-777 one. */
Test(dump, another_users_process_is_dumped_where_root_wants_it, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  if (geteuid() != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("needs root to start a process of another user (CI=true)");
    cr_skip_test("needs root to start a process of another user");
  }
  /* the sample copied where that user can read it (a build tree may lie in a mode-700 directory) */
  char *copy = temp_dir(), cmd[1024], exe[160];
  snprintf(cmd, sizeof cmd, "cp -r \"$(dirname '%s')\"/. '%s/' && chmod -R a+rX '%s'", dnt_target_exe(), copy, copy);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  snprintf(exe, sizeof exe, "%s/%s", copy, strrchr(dnt_target_exe(), '/') + 1);
  static const char *const env[] = {"HOME=/tmp", "DOTNET_CLI_HOME=/tmp", NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .exe = exe, .wait_socket = 1, .timeout_ms = DNT_HANG_MS,
                       .uid = 65534, .env = env};
  dnt_target t;
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample as uid 65534: %s", err);
  char *dir = temp_dir(), pid[16], out[160];
  cr_assert_eq(chmod(dir, 0700), 0);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  for (int open_dir = 0; open_dir < 2; open_dir++) {
    if (open_dir) cr_assert_eq(chmod(dir, 0777), 0); /* a directory that user could write too */
    snprintf(out, sizeof out, "%s/core%d", dir, open_dir);
    struct dnt_run r;
    int rc = dnt_run_dntrace(&r, "dump", "-p", pid, "--type", "mini", "-o", out, NULL);
    cr_assert_eq(rc, 0, "%s directory: exit %d\n%s%s", open_dir ? "a mode-777" : "root's mode-700", rc, r.out, r.err);
    struct stat st;
    cr_assert_eq(stat(out, &st), 0, "%s", out);
    cr_assert_eq(st.st_uid, 0, "%s is root's, not the target's user's (uid %u)", out, (unsigned)st.st_uid);
    cr_assert_eq(st.st_mode & 0777, 0600, "%s: mode %o", out, (unsigned)(st.st_mode & 0777));
    cr_assert(strstr(r.out, "Dump written:") && strstr(r.out, "threads"), "checked as a core:\n%s", r.out);
    dnt_run_free(&r);
    unlink(out);
  }
  dnt_target_stop(&t);
  rmdir(dir);
  free(dir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", copy);
  cr_assert_eq(system(cmd), 0);
  free(copy);
}

/* `dump --compress` into a full disk (a filled 64 KiB tmpfs, mounted in a private mount namespace
 * so that the dump takes the route through the target's TMPDIR): exit 1 and one error line, and
 * the runtime's whole core in the target's TMPDIR (which in a container may be its memory) is
 * removed, unless --keep-on-error (issue 29 item 7). The TMPDIR is the one dntrace names when it
 * keeps the file; the default run must leave nothing there. */
static int dump_into_full_disk(const char *dir, int pid, int keep, struct dnt_run *r) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "mount -t tmpfs -o size=64k tmpfs '%s' && { cat /dev/zero > '%s/.fill' 2>/dev/null; true; } && "
           "\"$DNT_BIN\" dump -p %d --type mini --compress %s -o '%s/core'",
           dir, dir, pid, keep ? "--keep-on-error" : "", dir);
  char *argv[] = {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", cmd, NULL};
  return dnt_run_argv(r, argv, NULL, DNT_HANG_MS);
}

/* The files of dir whose names begin with prefix. */
static int files_named(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  cr_assert(d, "%s", dir);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d))) n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

Test(dump, a_compressed_dump_into_a_full_disk_leaves_nothing_behind, .timeout = 240) {
  dnt_target t;
  start(&t, DNT_TARGET_PLAIN);
  if (geteuid() != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("needs root to mount a small tmpfs (CI=true)");
    cr_skip_test("needs root to mount a small tmpfs");
  }
  char *dir = temp_dir();
  struct dnt_run r;
  int rc = dump_into_full_disk(dir, (int)t.pid, 1, &r);
  cr_assert_eq(rc, 1, "out: %s err: %s", r.out, r.err);
  cr_assert(strstr(r.err, "No space left on device"), "%s", r.err);
  char *at = strstr(r.err, "stays at '");
  cr_assert(at, "--keep-on-error says where the runtime's dump stays: %s", r.err);
  char kept[512];
  snprintf(kept, sizeof kept, "%.*s", (int)strcspn(at + 10, "'"), at + 10);
  struct stat st;
  cr_assert_eq(stat(kept, &st), 0, "%s is kept", kept);
  cr_assert_gt(st.st_size, 0);
  unlink(kept);
  *strrchr(kept, '/') = '\0'; /* the target's TMPDIR, through its root */
  dnt_run_free(&r);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "dntrace-dump-%d-", (int)t.pid);
  cr_assert_eq(files_named(kept, prefix), 0);

  rc = dump_into_full_disk(dir, (int)t.pid, 0, &r);
  cr_assert_eq(rc, 1, "out: %s err: %s", r.out, r.err);
  cr_assert(strstr(r.err, "is removed (--keep-on-error keeps it)"), "%s", r.err);
  cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  cr_assert_eq(files_named(kept, prefix), 0, "nothing left in %s", kept);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  rmdir(dir);
  free(dir);
}

/* A stopped process (SIGSTOP) cannot answer: dump says so and gives up instead of waiting its
 * 30 minutes for a reply that cannot come (a dntrace that waits is killed at DNT_HANG_MS: its
 * status is then -1, not 1). */
Test(dump, a_stopped_target_is_one_clear_error, .timeout = 180) {
  dnt_target t;
  start(&t, DNT_TARGET_PLAIN);
  char *dir = temp_dir(), out[128], pid[16];
  snprintf(out, sizeof out, "%s/core", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  kill(t.pid, SIGSTOP);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "dump", "-p", pid, "-o", out, NULL);
  kill(t.pid, SIGCONT);
  cr_expect_eq(rc, 1, "exit 1 (got %d after %.1f s): %s%s", rc, r.seconds, r.out, r.err);
  cr_expect(strstr(r.err, "is stopped"), "says the process is stopped:\n%s", r.err);
  cr_log_info("dump gave up on a stopped process after %.1f s", r.seconds);
  cr_expect_neq(access(out, F_OK), 0, "no dump file");
  dnt_run_free(&r);
  dnt_target_stop(&t);
  rmdir(dir);
  free(dir);
}

/* The product's own checker, on a core built here: two threads, then every truncation. */
Test(elfcore, counts_threads_and_survives_truncation) {
  uint8_t core[1024];
  size_t q = dnt_test_elf_core(core, sizeof core, 4242);
  char path[] = "/tmp/dnt-elf-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(write(fd, core, q) == (ssize_t)q);
  struct dnt_core_info info;
  char why[256];
  cr_assert_eq(dnt_core_check(fd, &info, why, sizeof why), 0, "%s", why);
  cr_assert_eq(info.threads, 2);
  cr_assert_eq(info.first_pid, 4242);
  for (size_t cut = 0; cut < q; cut++) {
    cr_assert_eq(ftruncate(fd, (off_t)cut), 0);
    cr_assert_eq(dnt_core_check(fd, &info, why, sizeof why), -1, "cut at %zu is refused", cut);
  }
  close(fd);
  unlink(path);
}
