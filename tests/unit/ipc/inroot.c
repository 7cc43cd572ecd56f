/* dsipc_open_in_root and its walk for kernels without openat2, on a tree built here that plays a
 * container's root: absolute and relative links, ".." above the root, a link to a host file, a
 * link loop, a FIFO. Each case goes through both implementations; what they open is compared by
 * inode with the file the case means, found with plain stat() on the real paths. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsipc-int.h"
#include "dsipc.h"

static char root[64], host_file[128];
static int root_fd = -1;

static void make(const char *rel, const char *link_to) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  if (!link_to)
    cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s", p);
  else
    cr_assert_eq(symlink(link_to, p), 0, "symlink %s", p);
}

static void setup(void) {
  snprintf(root, sizeof root, "/tmp/dnt-inroot-XXXXXX");
  cr_assert(mkdtemp(root));
  make("tmp", NULL);
  make("tmp/sub", NULL);
  char p[256];
  snprintf(p, sizeof p, "%s/tmp/file", root);
  FILE *fp = fopen(p, "w");
  cr_assert(fp);
  fputs("inside", fp);
  fclose(fp);
  snprintf(p, sizeof p, "%s/tmp/fifo", root);
  cr_assert_eq(mkfifo(p, 0600), 0);
  /* a host file outside the root, the target of the escape attempts */
  snprintf(host_file, sizeof host_file, "%s-host", root);
  fp = fopen(host_file, "w");
  cr_assert(fp);
  fputs("host secret", fp);
  fclose(fp);
  make("tmp/abs", "/tmp/file");            /* absolute: the root's /tmp/file, not ours */
  make("tmp/escape", host_file);           /* absolute, to a path that exists only on the host */
  make("tmp/up", "../../../../../../tmp/file");  /* climbs far above the root */
  make("tmpdir", "/tmp");                  /* a directory link in the middle of a path */
  make("reldir", "tmp/sub/..");            /* relative, with ".." inside the link */
  make("tmp/loop", "loop");
  make("tmp/dev", "/dev/zero");
  root_fd = open(root, O_PATH | O_DIRECTORY);
  cr_assert_geq(root_fd, 0);
}

static void teardown(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", root, host_file);
  cr_assert_eq(system(cmd), 0);
  close(root_fd);
}

typedef int (*opener)(int, const char *, int, unsigned);
static const struct {
  const char *name;
  opener fn;
} impls[] = {{"openat2 or walk", dsipc_open_in_root}, {"walk", dsipc__open_in_root_walk}};

/* Opens path under the root with each implementation; both must open the file rel (relative to
 * the root, checked by inode), or both fail with want_errno. */
static void expect(const char *path, int flags, const char *rel, int want_errno) {
  struct stat want = {0};
  if (rel) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    cr_assert_eq(lstat(p, &want), 0, "%s", p);
  }
  for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
    int fd = impls[i].fn(root_fd, path, flags, 0);
    if (!rel) {
      cr_assert_eq(fd, -want_errno, "%s: '%s' gives %d (%s), expected -%s", impls[i].name, path, fd,
                   fd < 0 ? strerror(-fd) : "an fd", strerror(want_errno));
      continue;
    }
    cr_assert_geq(fd, 0, "%s: '%s': %s", impls[i].name, path, strerror(-fd));
    struct stat got;
    cr_assert_eq(fstat(fd, &got), 0);
    cr_assert(got.st_ino == want.st_ino && got.st_dev == want.st_dev, "%s: '%s' opened another file than %s",
              impls[i].name, path, rel);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC, "close-on-exec");
    close(fd);
  }
}

TestSuite(inroot, .init = setup, .fini = teardown);

Test(inroot, plain_paths) {
  expect("/tmp/file", O_RDONLY, "tmp/file", 0);
  expect("tmp/file", O_RDONLY, "tmp/file", 0);
  expect("//tmp//./sub/../file", O_RDONLY, "tmp/file", 0);
  expect("/tmp/nope", O_RDONLY, NULL, ENOENT);
  expect("/tmp/file/x", O_RDONLY, NULL, ENOTDIR);
  expect("/", O_PATH, ".", 0);
  /* a mode without O_CREAT is ignored, as open(2) does (O_DIRECTORY shares a bit with O_TMPFILE) */
  int fd = dsipc_open_in_root(root_fd, "/tmp", O_RDONLY | O_DIRECTORY, 0644);
  cr_assert_geq(fd, 0, "%s", strerror(-fd));
  close(fd);
}

Test(inroot, absolute_links_stay_in_the_root) {
  expect("/tmpdir/file", O_RDONLY, "tmp/file", 0);
  expect("/tmpdir/sub/../file", O_RDONLY, "tmp/file", 0);
  expect("/reldir/file", O_RDONLY, "tmp/file", 0);
  /* the host file's path names nothing inside the root: not found, never the host's file */
  expect(host_file, O_RDONLY, NULL, ENOENT);
}

Test(inroot, dotdot_stops_at_the_root) {
  expect("/../../../tmp/file", O_RDONLY, "tmp/file", 0);
  expect("/tmp/../../..", O_PATH, ".", 0);
}

Test(inroot, the_last_component_is_never_followed) {
  expect("/tmp/abs", O_RDONLY, NULL, ELOOP);
  expect("/tmp/escape", O_RDONLY, NULL, ELOOP);
  expect("/tmp/dev", O_RDONLY | O_NONBLOCK, NULL, ELOOP);
  expect("/tmp/up", O_RDONLY, NULL, ELOOP);
  expect("/tmp/abs", O_PATH, "tmp/abs", 0); /* O_PATH: the link itself, never its target */
}

Test(inroot, links_in_the_middle_are_followed_inside) {
  /* the same links as directories in the middle of a path: an escape ends at ENOTDIR/ENOENT */
  expect("/tmp/escape/x", O_RDONLY, NULL, ENOENT);
  expect("/tmp/abs/x", O_RDONLY, NULL, ENOTDIR);
  expect("/tmp/loop/x", O_RDONLY, NULL, ELOOP);
}

Test(inroot, a_fifo_opens_without_blocking) {
  expect("/tmp/fifo", O_RDONLY | O_NONBLOCK, "tmp/fifo", 0);
}

Test(inroot, create_inside_the_root) {
  for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
    int fd = impls[i].fn(root_fd, "/tmpdir/new", O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0, "%s: %s", impls[i].name, strerror(-fd));
    close(fd);
    char p[256];
    snprintf(p, sizeof p, "%s/tmp/new", root);
    struct stat st;
    cr_assert_eq(lstat(p, &st), 0, "%s: created inside the root", impls[i].name);
    cr_assert(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
    unlink(p);
  }
}

Test(inroot, bad_arguments) {
  cr_assert_eq(dsipc_open_in_root(root_fd, "", O_RDONLY, 0), -EINVAL);
  cr_assert_eq(dsipc_open_in_root(root_fd, NULL, O_RDONLY, 0), -EINVAL);
  char *deep = malloc(3 * 4096);
  memset(deep, 'a', 3 * 4096 - 1);
  deep[3 * 4096 - 1] = '\0';
  cr_assert_eq(dsipc__open_in_root_walk(root_fd, deep, O_RDONLY, 0), -ENAMETOOLONG);
  free(deep);
}

/* dsipc_resolve_in_root: the directory spelt from the root without any link in it */
static void expect_dir(const char *path, const char *want, int want_errno) {
  char got[256];
  int rc = dsipc_resolve_in_root(root_fd, path, got, sizeof got);
  if (!want) {
    cr_assert_eq(rc, -want_errno, "'%s' gives %d, expected -%s", path, rc, strerror(want_errno));
    return;
  }
  cr_assert_eq(rc, 0, "'%s': %s", path, strerror(-rc));
  cr_assert_str_eq(got, want, "'%s'", path);
}

Test(inroot, resolve_spells_a_directory_without_links) {
  expect_dir("/tmp", "/tmp", 0);
  expect_dir("/tmpdir", "/tmp", 0);       /* an absolute link, as the target reads it */
  expect_dir("/tmpdir/sub", "/tmp/sub", 0);
  expect_dir("/reldir", "/tmp", 0);       /* relative, with ".." inside */
  expect_dir("/tmp/sub/../..", "/", 0);
  expect_dir("/../..", "/", 0);
  expect_dir("/tmp/file", NULL, ENOTDIR);
  expect_dir("/tmp/escape", NULL, ENOENT); /* a host directory is not the target's */
  expect_dir("/tmp/loop", NULL, ELOOP);
  char small[4];
  cr_assert_eq(dsipc_resolve_in_root(root_fd, "/tmp/sub", small, sizeof small), -ENAMETOOLONG);
}
