/* Opening a file of another process's filesystem, through /proc/PID/root, without ever leaving
 * that filesystem.
 *
 * A plain open("/proc/PID/root/tmp/x") walks the target's tree, but a symlink met there is
 * resolved against *our* root: a target that plants /tmp/x -> /etc/shadow makes us open the
 * host's file. openat2(RESOLVE_IN_ROOT) makes the kernel treat the directory we pass as "/" for
 * every absolute link and "..". Kernels before 5.6 (and seccomp filters that refuse openat2)
 * get the same walk done here, one component at a time with O_NOFOLLOW, symlinks read and
 * spliced into the rest of the path by hand, and ".." popped from our own stack of directories
 * so that it stops at the root as the kernel's version does. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dsipc-int.h"

#if defined(__has_include)
#if __has_include(<linux/openat2.h>) && defined(SYS_openat2)
#include <linux/openat2.h>
#define HAVE_OPENAT2 1
#endif
#endif

#define MAX_LINKS 40  /* the kernel's own limit on symlinks in one lookup (ELOOP beyond) */
#define MAX_DEPTH 256 /* directories deep; a TMPDIR deeper than this is not a real one */

/* Splits the next component off *rest (skipping slashes) into name; 0 when none is left. */
static int next_component(const char **rest, char *name, size_t cap) {
  const char *p = *rest;
  while (*p == '/') p++;
  if (!*p) {
    *rest = p;
    return 0;
  }
  size_t n = strcspn(p, "/");
  if (n >= cap) return -ENAMETOOLONG;
  memcpy(name, p, n);
  name[n] = '\0';
  *rest = p + n;
  return 1;
}

static int only_slashes(const char *p) {
  while (*p == '/') p++;
  return *p == '\0';
}

/* The walk. With canon (cap bytes), also spells the directory it ends in as a path from the
 * root with no symlink, "." or ".." in it ("" for the root itself). */
static int walk(int root_fd, const char *path, int flags, unsigned mode, char *canon, size_t cap) {
  int stack[MAX_DEPTH];
  size_t ends[MAX_DEPTH]; /* canon's length at each depth */
  int depth = 0, links = 0, rc;
  stack[0] = -1;
  ends[0] = 0;
  if (canon) canon[0] = '\0';
  /* the rest of the path to walk; a symlink's target is put in front of what remained */
  char *todo = dsipc__malloc(2 * PATH_MAX), *spare = dsipc__malloc(2 * PATH_MAX);
  char name[NAME_MAX + 1];
  if (!todo || !spare) {
    rc = -ENOMEM;
    goto out;
  }
  if (strlen(path) >= 2 * PATH_MAX) {
    rc = -ENAMETOOLONG;
    goto out;
  }
  strcpy(todo, path);
  stack[0] = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (stack[0] < 0) {
    rc = -errno;
    goto out;
  }
  const char *rest = todo;
  for (;;) {
    int got = next_component(&rest, name, sizeof name);
    if (got < 0) {
      rc = got;
      goto out;
    }
    int last = got == 0 || only_slashes(rest);
    if (got == 0) strcpy(name, "."); /* "/" or "dir/..": the directory itself */
    if (strcmp(name, "..") == 0) {
      if (depth > 0) close(stack[depth--]); /* never above the root, as RESOLVE_IN_ROOT */
      if (canon) canon[ends[depth]] = '\0';
      if (!last) continue;
      strcpy(name, ".");
    }
    if (strcmp(name, ".") == 0 && !last) continue;
    if (last) {
      /* the final open: O_NOFOLLOW, so a symlink here is ELOOP, never followed */
      int fd = openat(stack[depth], name, flags | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
      rc = fd < 0 ? -errno : fd;
      goto out;
    }
    int fd = openat(stack[depth], name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      rc = -errno;
      goto out;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
      rc = -errno;
      close(fd);
      goto out;
    }
    if (S_ISDIR(st.st_mode)) {
      if (depth + 1 >= MAX_DEPTH) {
        close(fd);
        rc = -ENAMETOOLONG;
        goto out;
      }
      stack[++depth] = fd;
      if (canon) {
        size_t len = ends[depth - 1];
        if (len + 1 + strlen(name) + 1 > cap) {
          rc = -ENAMETOOLONG;
          goto out;
        }
        canon[len] = '/';
        strcpy(canon + len + 1, name);
        ends[depth] = len + 1 + strlen(name);
      }
      continue;
    }
    if (!S_ISLNK(st.st_mode)) {
      close(fd);
      rc = -ENOTDIR;
      goto out;
    }
    /* a symlink in the middle: read it and walk its target inside the root */
    char target[PATH_MAX];
    ssize_t n = readlinkat(fd, "", target, sizeof target);
    close(fd);
    if (n < 0 || (size_t)n >= sizeof target) {
      rc = n < 0 ? -errno : -ENAMETOOLONG;
      goto out;
    }
    target[n] = '\0';
    if (++links > MAX_LINKS) {
      rc = -ELOOP;
      goto out;
    }
    if (target[0] == '/') {
      while (depth > 0) close(stack[depth--]); /* absolute: from the target's root, not ours */
      if (canon) canon[0] = '\0';
    }
    if ((size_t)n + 1 + strlen(rest) + 1 > 2 * PATH_MAX) {
      rc = -ENAMETOOLONG;
      goto out;
    }
    strcpy(spare, target);
    strcat(spare, "/");
    strcat(spare, rest);
    char *swap = todo;
    todo = spare;
    spare = swap;
    rest = todo;
  }
out:
  for (int i = depth; i >= 0 && stack[i] >= 0; i--) close(stack[i]);
  dsipc__free(todo);
  dsipc__free(spare);
  return rc;
}

int dsipc__open_in_root_walk(int root_fd, const char *path, int flags, unsigned mode) {
  return walk(root_fd, path, flags, mode, NULL, 0);
}

int dsipc_resolve_in_root(int root_fd, const char *path, char *out, size_t cap) {
  if (!path || !*path || cap < 2) return -EINVAL;
  size_t n = strlen(path);
  char *dot = dsipc__malloc(n + 3);
  if (!dot) return -ENOMEM;
  memcpy(dot, path, n);
  memcpy(dot + n, "/.", 3); /* so that a symlink at the end is followed too: we want the directory */
  int fd = walk(root_fd, dot, O_PATH | O_DIRECTORY, 0, out, cap);
  dsipc__free(dot);
  if (fd < 0) return fd;
  close(fd);
  if (!out[0]) strcpy(out, "/");
  return 0;
}

int dsipc_open_in_root(int root_fd, const char *path, int flags, unsigned mode) {
  if (!path || !*path) return -EINVAL;
#ifdef HAVE_OPENAT2
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC);
  /* O_TMPFILE holds O_DIRECTORY's bit: test it whole, or O_DIRECTORY alone would pass a mode */
  how.mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  for (int tries = 0; tries < 8; tries++) {
    long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof how);
    if (fd >= 0) return (int)fd;
    if (errno == EAGAIN) continue; /* a rename raced the lookup: the kernel asks to retry */
    /* ENOSYS: kernel before 5.6; EPERM: a seccomp filter that does not know openat2 */
    if (errno != ENOSYS && errno != EPERM) return -errno;
    break;
  }
#endif
  return dsipc__open_in_root_walk(root_fd, path, flags, mode);
}
