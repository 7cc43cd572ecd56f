/* A flight recorder's window written as a file (dnt-agent.h): into a hidden new file beside the
 * path (".NAME.XXXXXX": not an incident's file for the disk budget meanwhile), then renamed over
 * it, so that a file at path is only ever a whole trace. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dnt-agent.h"
#include "dnt-trace.h"

int dnt_ring_write_file(const ntr_ring *ring, const char *path, char *err, size_t cap) {
  char *tmp = NULL;
  int fd = dnt_temp_beside(path, &tmp);
  FILE *fp = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!fp) {
    snprintf(err, cap, "cannot write '%s': %s", path, strerror(errno));
    if (fd >= 0) close(fd), unlink(tmp);
    free(tmp);
    return -1;
  }
  int rc = 0;
  if (ntr_ring_write(ring, fp) != 0) {
    snprintf(err, cap, "%s: nothing to save: the session sent no trace header%s", path,
             ntr_ring_failed(ring) ? " (out of memory)" : "");
    rc = -1;
  }
  if (fflush(fp) != 0 || ferror(fp)) {
    if (!rc) snprintf(err, cap, "cannot write '%s': %s", path, strerror(errno));
    rc = -1;
  }
  if (fclose(fp) != 0 && !rc) {
    snprintf(err, cap, "cannot write '%s': %s", path, strerror(errno));
    rc = -1;
  }
  if (!rc && rename(tmp, path) != 0) {
    snprintf(err, cap, "cannot write '%s': %s", path, strerror(errno));
    rc = -1;
  }
  if (rc) unlink(tmp);
  free(tmp);
  return rc;
}
