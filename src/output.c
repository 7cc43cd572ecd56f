/* Opening the files the commands write: one policy for every command. See output.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "dnt-trace.h"
#include "output.h"
#include "util.h"

static int no_clobber;

void dnt_output_set_no_clobber(int on) { no_clobber = on; }

char *dnt_output_name(const char *name, const char *ext) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  /* "out" and ".hidden" have no extension; "out.txt" has one */
  struct stat st;
  int has = strcmp(name, "-") == 0 || !ext || !*ext || strchr(base + (base[0] == '.'), '.') != NULL;
  /* a name that is already something else (/dev/stdout, a directory) is kept, to be refused as
   * itself rather than create /dev/stdout.json beside it */
  if (!has && lstat(name, &st) == 0 && !S_ISREG(st.st_mode)) has = 1;
  size_t n = strlen(name), e = has ? 0 : strlen(ext);
  char *out = dnt_xmalloc(n + e + 1);
  memcpy(out, name, n);
  memcpy(out + n, has ? "" : ext, e + 1);
  return out;
}

char *dnt_output_in_dir(const char *name, const char *file) {
  struct stat st;
  if (strcmp(name, "-") == 0 || stat(name, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  size_t n = strlen(name);
  while (n > 1 && name[n - 1] == '/') n--; /* "out/" and "out" alike */
  char *out = dnt_xmalloc(n + strlen(base) + 2);
  sprintf(out, "%.*s/%s", (int)n, name, base);
  return out;
}

int dnt_output_check(const char *path, int quiet) {
  struct stat st;
  if (strcmp(path, "-") == 0) return 0;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return 0;
    return dnt_error("cannot write '%s': %s", path, strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) return dnt_error("cannot write '%s': it is a symbolic link", path);
  if (!S_ISREG(st.st_mode)) return dnt_error("cannot write '%s': it exists and is not a regular file", path);
  if (st.st_uid != geteuid()) /* root tricked into replacing someone's file in a shared directory */
    return dnt_error("cannot write '%s': it belongs to another user", path);
  if (no_clobber) return dnt_error("cannot write '%s': it exists (--no-clobber)", path);
  if (!quiet) fprintf(stderr, "overwriting '%s'\n", path);
  return 0;
}

int dnt_output_open(struct dnt_output *out, const char *path, int flags) {
  memset(out, 0, sizeof *out);
  if (strcmp(path, "-") == 0) {
    out->fp = stdout;
    out->path = dnt_xstrdup(path);
    return 0;
  }
  if (!(flags & DNT_OUTPUT_REPLACE) && dnt_output_check(path, 0) < 0) return -1;
  int fd;
  if (flags & DNT_OUTPUT_STREAM) {
    /* O_NOFOLLOW: a link put there since the check is refused, not followed */
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | (no_clobber ? O_EXCL : 0), 0666);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
      close(fd);
      errno = EEXIST;
      fd = -1;
    }
  } else {
    fd = dnt_temp_beside(path, &out->tmp);
  }
  if (fd < 0 && errno == ELOOP) return dnt_error("cannot write '%s': it is a symbolic link", path);
  if (fd < 0) return dnt_error("cannot write '%s': %s", path, strerror(errno));
  if (!(out->fp = fdopen(fd, "w"))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  out->path = dnt_xstrdup(path);
  return 0;
}

static void release(struct dnt_output *out) {
  free(out->path);
  free(out->tmp);
  memset(out, 0, sizeof *out);
}

int dnt_output_commit(struct dnt_output *out) {
  int rc = 0;
  if (out->fp == stdout) {
    if ((fflush(stdout) != 0 || ferror(stdout)) && !dnt_stdout_closed())
      rc = dnt_error("cannot write to standard output: %s", strerror(errno ? errno : EIO));
    release(out);
    return rc;
  }
  int bad = out->fp ? ferror(out->fp) : 0;
  if (out->fp && fclose(out->fp) != 0) bad = 1;
  out->fp = NULL;
  if (bad) {
    rc = dnt_error("cannot write '%s': %s", out->path, strerror(errno ? errno : EIO));
    unlink(out->tmp ? out->tmp : out->path);
  } else if (out->tmp && rename(out->tmp, out->path) != 0) {
    rc = dnt_error("cannot write '%s': %s", out->path, strerror(errno));
    unlink(out->tmp);
  }
  release(out);
  return rc;
}

void dnt_output_abort(struct dnt_output *out) {
  int ours = out->fp && out->fp != stdout; /* a STREAM file we opened (and truncated) */
  if (ours) fclose(out->fp);
  if (out->tmp)
    unlink(out->tmp); /* also when the caller closed fp to write the temporary by name */
  else if (ours)
    unlink(out->path);
  release(out);
}
