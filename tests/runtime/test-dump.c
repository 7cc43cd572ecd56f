/* dntrace dump against the real sample target: every dump type gives an ELF core whose thread
 * notes match the target's threads; a target in a private mount namespace delivers to our path;
 * --compress gives a gzip of a core; bad destinations are one clear error. The cores are read
 * here with the test's own ELF walk, not the product's checker (tested below on its own). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
  dnt_target_opts o = {.mode = mode, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
}

static int task_count(pid_t pid) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  cr_assert(d);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Counts NT_PRSTATUS notes of an ELF core held in memory; -1 if it is not one. */
static int prstatus_notes(const uint8_t *p, size_t n) {
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
      if (nh->n_type == NT_PRSTATUS) count++;
      q += sizeof *nh + ((nh->n_namesz + 3u) & ~3u) + ((nh->n_descsz + 3u) & ~3u);
    }
  }
  return count;
}

static int file_prstatus_notes(const char *path) {
  int fd = open(path, O_RDONLY);
  cr_assert_geq(fd, 0, "%s exists", path);
  struct stat st;
  fstat(fd, &st);
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  cr_assert_neq(m, MAP_FAILED);
  int n = prstatus_notes(m, (size_t)st.st_size);
  munmap(m, (size_t)st.st_size);
  close(fd);
  return n;
}

static char *temp_dir(void) {
  char *d = strdup("/tmp/dnt-dump-XXXXXX");
  cr_assert(mkdtemp(d));
  return d;
}

Test(dump, every_type_is_a_core_with_the_targets_threads, .timeout = 240) {
  dnt_target t;
  start(&t, DNT_TARGET_PLAIN);
  sleep(1); /* let the sample's threads settle */
  char *dir = temp_dir();
  static const char *types[] = {"triage", "mini", "heap", "full"};
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  for (size_t i = 0; i < 4; i++) {
    char out[128];
    snprintf(out, sizeof out, "%s/core-%s", dir, types[i]);
    int before = task_count(t.pid);
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, "dump", "-p", pid, "--type", types[i], "-o", out, NULL), 0, "%s: %s%s", types[i],
                 r.out, r.err);
    int after = task_count(t.pid);
    int notes = file_prstatus_notes(out);
    int lo = before < after ? before : after, hi = before < after ? after : before;
    cr_assert(notes >= lo && notes <= hi, "%s: %d thread notes, the process had %d..%d threads", types[i], notes, lo, hi);
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
  gzFile f = gzopen(gz, "rb");
  cr_assert(f, "%s exists", gz);
  size_t cap = 64u << 20, n = 0;
  uint8_t *buf = malloc(cap);
  int got;
  while ((got = gzread(f, buf + n, (unsigned)(cap - n))) > 0) n += (size_t)got;
  cr_assert_eq(gzclose(f), Z_OK, "the gzip stream is whole");
  cr_assert_gt(prstatus_notes(buf, n), 0, "it decompresses to a core");
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

/* The product's own checker, on a core built here: two threads, then every truncation. */
/* A stopped process (SIGSTOP) cannot answer: dump says so and gives up instead of waiting its
 * 30 minutes for a reply that cannot come. */
Test(dump, a_stopped_target_is_one_clear_error, .timeout = 90) {
  dnt_target t;
  start(&t, DNT_TARGET_PLAIN);
  char *dir = temp_dir(), out[128], pid[16];
  snprintf(out, sizeof out, "%s/core", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  kill(t.pid, SIGSTOP);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "dump", "-p", pid, "-o", out, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  kill(t.pid, SIGCONT);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  cr_expect_eq(rc, 1, "exit 1: %s%s", r.out, r.err);
  cr_expect(strstr(r.err, "is stopped"), "says the process is stopped:\n%s", r.err);
  cr_expect(secs < 30, "gave up after %.1f s", secs);
  cr_expect_neq(access(out, F_OK), 0, "no dump file");
  dnt_run_free(&r);
  dnt_target_stop(&t);
  rmdir(dir);
  free(dir);
}

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
