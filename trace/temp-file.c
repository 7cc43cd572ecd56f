/* A file written whole (dnt-trace.h): its temporary beside it, to be renamed over it once
 * complete, so that the path only ever names a whole file. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dnt-trace.h"

int dnt_temp_beside(const char *path, char **tmp) {
  const char *slash = strrchr(path, '/');
  size_t dir = slash ? (size_t)(slash - path) + 1 : 0, n = strlen(path);
  char *t = malloc(n + 10);
  if (!t) return -1;
  memcpy(t, path, dir);
  t[dir] = '.';
  memcpy(t + dir + 1, path + dir, n - dir);
  memcpy(t + n + 1, ".XXXXXX", 8);
  int fd = mkostemp(t, O_CLOEXEC);
  if (fd < 0) {
    free(t);
    return -1;
  }
  mode_t mask = umask(0); /* mkostemp makes 0600; the file is 0666 less the umask, as fopen's */
  umask(mask);
  if (fchmod(fd, 0666 & ~mask) != 0) { /* not fatal: the file is only more private */ }
  *tmp = t;
  return fd;
}
