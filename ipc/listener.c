/* The reverse direction: with DOTNET_DiagnosticPorts=<path>,connect the runtime dials us, sends a
 * 34-byte ADVR_V1 advertise, then waits for one command on that connection; after each command
 * it dials again. The socket lives in a fresh 0700 directory and is itself 0600, so no other
 * user can connect to it or swap it. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dsipc-int.h"

struct dsipc_listener {
  int fd;
  char dir[4096];
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

int dsipc_listener_open(dsipc_listener **out, const char *dir_template, const char *name, dsipc_status *st) {
  *out = NULL;
  if (!name || !*name || strchr(name, '/'))
    return dsipc__fail(st, DSIPC_EINVAL, 0, "invalid socket name '%s'", name ? name : "");
  dsipc_listener *l = dsipc__calloc(1, sizeof *l);
  if (!l) return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  l->fd = -1;
  int rc;
  snprintf(l->dir, sizeof l->dir, "%s", dir_template ? dir_template : "/tmp/dntrace-XXXXXX");
  if (!mkdtemp(l->dir)) { /* mkdtemp creates it 0700 */
    rc = dsipc__fail(st, -errno, 0, "cannot create a private directory from '%s': %s", l->dir, strerror(errno));
    l->dir[0] = '\0';
    goto fail;
  }
  int n = snprintf(l->path, sizeof l->path, "%s/%s", l->dir, name);
  if (n < 0 || (size_t)n >= sizeof l->path) {
    rc = dsipc__fail(st, -ENAMETOOLONG, 0, "socket path '%s/%s' is too long", l->dir, name);
    l->path[0] = '\0';
    goto fail;
  }
  l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l->fd < 0) {
    rc = dsipc__fail(st, -errno, 0, "socket: %s", strerror(errno));
    goto fail;
  }
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path, l->path, (size_t)n + 1);
  mode_t old = umask(0177); /* the socket is born 0600: no window where it is wider */
  int bound = bind(l->fd, (struct sockaddr *)&sa, sizeof sa);
  int bind_errno = errno;
  umask(old);
  if (bound < 0) {
    rc = dsipc__fail(st, -bind_errno, 0, "cannot listen on '%s': %s", l->path, strerror(bind_errno));
    l->path[0] = '\0';
    goto fail;
  }
  if (listen(l->fd, 8) < 0) {
    rc = dsipc__fail(st, -errno, 0, "cannot listen on '%s': %s", l->path, strerror(errno));
    goto fail;
  }
  dsipc__ok(st);
  *out = l;
  return 0;
fail:
  dsipc_listener_close(l);
  return rc;
}

const char *dsipc_listener_path(const dsipc_listener *l) { return l->path; }

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for fd to become readable before the deadline: 0, DSIPC_ETIMEDOUT or -errno. */
static int wait_readable(int fd, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return DSIPC_ETIMEDOUT;
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -errno;
  }
}

int dsipc_listener_accept(dsipc_listener *l, uint64_t timeout_ms, dsipc_advertise *adv, int *fd, dsipc_status *st) {
  *fd = -1;
  int64_t deadline = now_ms() + (int64_t)timeout_ms;
  int rc = wait_readable(l->fd, deadline);
  if (rc == DSIPC_ETIMEDOUT)
    return dsipc__fail(st, rc, 0, "no runtime connected to '%s' within %llu ms", l->path,
                       (unsigned long long)timeout_ms);
  if (rc) return dsipc__fail(st, rc, 0, "waiting on '%s': %s", l->path, strerror(-rc));
  int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
  if (c < 0) return dsipc__fail(st, -errno, 0, "accept on '%s': %s", l->path, strerror(errno));

  uint8_t buf[DSIPC_ADVERTISE_SIZE];
  size_t have = 0;
  while (have < sizeof buf) {
    rc = wait_readable(c, deadline);
    if (rc) {
      dsipc__fail(st, rc == DSIPC_ETIMEDOUT ? rc : rc, 0, "the runtime connected but sent %zu of the %d advertise bytes",
                  have, DSIPC_ADVERTISE_SIZE);
      goto fail;
    }
    ssize_t n = read(c, buf + have, sizeof buf - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      rc = dsipc__fail(st, DSIPC_ECLOSED, 0, "the runtime closed the connection after %zu advertise bytes", have);
      goto fail;
    }
    have += (size_t)n;
  }
  rc = dsipc_decode_advertise(buf, sizeof buf, adv);
  if (rc) {
    dsipc__fail(st, rc, 0, "the peer on '%s' did not send an ADVR_V1 advertise", l->path);
    goto fail;
  }
  dsipc__ok(st);
  *fd = c;
  return 0;
fail:
  close(c);
  return st ? st->code : rc;
}

void dsipc_listener_close(dsipc_listener *l) {
  if (!l) return;
  if (l->fd >= 0) close(l->fd);
  if (l->path[0]) unlink(l->path);
  if (l->dir[0]) rmdir(l->dir);
  dsipc__free(l);
}
