/* The reverse direction: with DOTNET_DiagnosticPorts=<path>,connect the runtime dials us, sends a
 * 34-byte ADVR_V1 advertise, then waits for one command on that connection; after each command
 * it dials again. The socket lives in a fresh 0700 directory and is itself 0600, so no other
 * user can connect to it or swap it.
 *
 * Accepting comes in two flavours that share the connection and advertise code below: a blocking
 * one with poll(2) for simple callers, and one on the caller's libuv loop (uv_poll on the raw
 * fds, so the accepted connection can be handed over as a plain fd afterwards). */
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
#include <uv.h>

#include "dsipc-int.h"

struct accept_op;

struct dsipc_listener {
  int fd;
  struct accept_op *op; /* the pending async accept, if any */
  char dir[4096];
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* Binds l->path (born 0600) and listens. On failure l->path is cleared if nothing was created. */
static int bind_and_listen(dsipc_listener *l, dsipc_status *st) {
  int rc;
  size_t n = strlen(l->path);
  l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l->fd < 0) {
    rc = dsipc__fail(st, -errno, 0, "socket: %s", strerror(errno));
    return rc;
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
    return rc;
  }
  if (listen(l->fd, 8) < 0) {
    rc = dsipc__fail(st, -errno, 0, "cannot listen on '%s': %s", l->path, strerror(errno));
    return rc;
  }
  return 0;
}

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
  if ((rc = bind_and_listen(l, st)) != 0) goto fail;
  dsipc__ok(st);
  *out = l;
  return 0;
fail:
  dsipc_listener_close(l);
  return rc;
}

int dsipc_listener_open_at(dsipc_listener **out, const char *path, dsipc_status *st) {
  *out = NULL;
  if (!path || path[0] != '/') return dsipc__fail(st, DSIPC_EINVAL, 0, "'%s' is not an absolute socket path", path ? path : "");
  dsipc_listener *l = dsipc__calloc(1, sizeof *l);
  if (!l) return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  l->fd = -1;
  int rc;
  if (strlen(path) >= sizeof l->path) {
    rc = dsipc__fail(st, -ENAMETOOLONG, 0, "socket path '%s' is too long", path);
    goto fail;
  }
  memcpy(l->path, path, strlen(path) + 1);
  if ((rc = bind_and_listen(l, st)) != 0) goto fail;
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

/* Takes one pending connection, non-blocking so a peer that sends less than an advertise cannot
 * stall us: 0 with *c, 1 when there was none after all, or -errno. */
static int take_connection(dsipc_listener *l, int *c) {
  *c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (*c >= 0) return 0;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return 1;
  return -errno;
}

/* Reads what is there of the 34-byte advertise, never a byte more (the command exchange follows
 * on this connection): 1 when complete, 0 for "wait for more", DSIPC_ECLOSED or -errno. */
static int read_advertise(int c, uint8_t *buf, size_t *have) {
  while (*have < DSIPC_ADVERTISE_SIZE) {
    ssize_t n = read(c, buf + *have, DSIPC_ADVERTISE_SIZE - *have);
    if (n > 0) {
      *have += (size_t)n;
    } else if (n == 0) {
      return DSIPC_ECLOSED;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    } else if (errno != EINTR) {
      return -errno;
    }
  }
  return 1;
}

static int advertise_failed(dsipc_listener *l, dsipc_status *st, int rc, size_t have, uint64_t timeout_ms) {
  if (rc == DSIPC_ETIMEDOUT)
    return dsipc__fail(st, rc, 0, "a peer connected to '%s' but sent %zu of the %d advertise bytes within %llu ms",
                       l->path, have, DSIPC_ADVERTISE_SIZE, (unsigned long long)timeout_ms);
  if (rc == DSIPC_ECLOSED)
    return dsipc__fail(st, rc, 0, "the peer on '%s' closed the connection after %zu advertise bytes", l->path, have);
  if (rc == DSIPC_EBADMAGIC || rc == DSIPC_EPROTO)
    return dsipc__fail(st, rc, 0, "the peer on '%s' did not send an ADVR_V1 advertise", l->path);
  return dsipc__fail(st, rc, 0, "reading the advertise on '%s': %s", l->path, strerror(-rc));
}

static int no_runtime(dsipc_listener *l, dsipc_status *st, uint64_t timeout_ms) {
  return dsipc__fail(st, DSIPC_ETIMEDOUT, 0, "no runtime connected to '%s' within %llu ms", l->path,
                     (unsigned long long)timeout_ms);
}

int dsipc_listener_accept(dsipc_listener *l, uint64_t timeout_ms, dsipc_advertise *adv, int *fd, dsipc_status *st) {
  *fd = -1;
  if (l->op) return dsipc__fail(st, -EBUSY, 0, "an accept is already pending on '%s'", l->path);
  int64_t deadline = now_ms() + (int64_t)timeout_ms;
  int c = -1, rc;
  do {
    rc = wait_readable(l->fd, deadline);
    if (rc == DSIPC_ETIMEDOUT) return no_runtime(l, st, timeout_ms);
    if (rc) return dsipc__fail(st, rc, 0, "waiting on '%s': %s", l->path, strerror(-rc));
    rc = take_connection(l, &c);
    if (rc < 0) return dsipc__fail(st, rc, 0, "accept on '%s': %s", l->path, strerror(-rc));
  } while (rc > 0);

  uint8_t buf[DSIPC_ADVERTISE_SIZE];
  size_t have = 0;
  while ((rc = read_advertise(c, buf, &have)) == 0)
    if ((rc = wait_readable(c, deadline)) != 0) break;
  if (rc == 1) rc = dsipc_decode_advertise(buf, sizeof buf, adv);
  if (rc) {
    advertise_failed(l, st, rc, have, timeout_ms);
    close(c);
    return rc;
  }
  dsipc__ok(st);
  *fd = c;
  return 0;
}

/* ---- the same on the caller's loop ---- */

struct accept_op {
  dsipc_listener *l; /* NULL once finished or cancelled */
  uv_poll_t lpoll, cpoll;
  uv_timer_t timer;
  int cfd, cpoll_open, open_handles, closing;
  uint8_t buf[DSIPC_ADVERTISE_SIZE];
  size_t have;
  uint64_t timeout_ms;
  dsipc_advertise adv;
  dsipc_accept_cb cb;
  void *ud;
  dsipc_status st;
};

static void op_closed(uv_handle_t *h) {
  struct accept_op *op = h->data;
  if (--op->open_handles == 0) dsipc__free(op);
}

/* Detaches op from its listener and closes everything it still holds; op itself goes when
 * libuv has closed the handles, so it stays valid for the rest of the current callback. */
static void op_release(struct accept_op *op) {
  if (op->closing) return;
  op->closing = 1;
  if (op->l) op->l->op = NULL;
  op->l = NULL;
  uv_close((uv_handle_t *)&op->timer, op_closed);
  uv_close((uv_handle_t *)&op->lpoll, op_closed);
  if (op->cpoll_open) uv_close((uv_handle_t *)&op->cpoll, op_closed); /* stops polling cfd now */
  if (op->cfd >= 0) close(op->cfd);
  op->cfd = -1;
}

static void op_finish(struct accept_op *op, int code) {
  int fd = -1;
  if (code == 0) {
    fd = op->cfd; /* handed over: op_release must not close it */
    op->cfd = -1;
  }
  op_release(op);
  op->cb(op->ud, &op->st, code ? NULL : &op->adv, fd);
}

static void on_conn_ready(uv_poll_t *h, int status, int events) {
  struct accept_op *op = h->data;
  (void)events;
  if (op->closing) return;
  int rc = status < 0 ? status : read_advertise(op->cfd, op->buf, &op->have);
  if (rc == 0) return;
  if (rc == 1) rc = dsipc_decode_advertise(op->buf, sizeof op->buf, &op->adv);
  if (rc) {
    op_finish(op, advertise_failed(op->l, &op->st, rc, op->have, op->timeout_ms));
    return;
  }
  dsipc__ok(&op->st);
  op_finish(op, 0);
}

static void on_listen_ready(uv_poll_t *h, int status, int events) {
  struct accept_op *op = h->data;
  (void)events;
  if (op->closing) return;
  int c = -1;
  int rc = status < 0 ? status : take_connection(op->l, &c);
  if (rc > 0) return;
  if (rc < 0) {
    op_finish(op, dsipc__fail(&op->st, rc, 0, "accept on '%s': %s", op->l->path, strerror(-rc)));
    return;
  }
  uv_poll_stop(&op->lpoll); /* one connection per accept; later ones wait in the backlog */
  op->cfd = c;
  if ((rc = uv_poll_init(h->loop, &op->cpoll, c)) != 0) {
    op_finish(op, dsipc__fail(&op->st, rc, 0, "cannot watch the connection on '%s': %s", op->l->path,
                              uv_strerror(rc)));
    return;
  }
  op->cpoll.data = op;
  op->cpoll_open = 1;
  op->open_handles++;
  if ((rc = uv_poll_start(&op->cpoll, UV_READABLE, on_conn_ready)) != 0)
    op_finish(op, dsipc__fail(&op->st, rc, 0, "cannot watch the connection on '%s': %s", op->l->path,
                              uv_strerror(rc)));
}

static void on_accept_timeout(uv_timer_t *t) {
  struct accept_op *op = t->data;
  if (op->closing) return;
  if (op->cfd >= 0)
    op_finish(op, advertise_failed(op->l, &op->st, DSIPC_ETIMEDOUT, op->have, op->timeout_ms));
  else
    op_finish(op, no_runtime(op->l, &op->st, op->timeout_ms));
}

int dsipc_listener_accept_start(dsipc_listener *l, struct uv_loop_s *loop, uint64_t timeout_ms, dsipc_accept_cb cb,
                                void *ud, dsipc_status *st) {
  if (!l || !loop || !cb) return dsipc__fail(st, DSIPC_EINVAL, 0, "invalid argument");
  if (l->op) return dsipc__fail(st, -EBUSY, 0, "an accept is already pending on '%s'", l->path);
  struct accept_op *op = dsipc__calloc(1, sizeof *op);
  if (!op) return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  op->cfd = -1;
  op->timeout_ms = timeout_ms;
  op->cb = cb;
  op->ud = ud;
  int rc = uv_poll_init(loop, &op->lpoll, l->fd);
  if (rc) {
    dsipc__free(op);
    return dsipc__fail(st, rc, 0, "cannot watch '%s': %s", l->path, uv_strerror(rc));
  }
  uv_timer_init(loop, &op->timer);
  op->lpoll.data = op->timer.data = op;
  op->open_handles = 2;
  op->l = l;
  l->op = op;
  if ((rc = uv_poll_start(&op->lpoll, UV_READABLE, on_listen_ready)) != 0) {
    op_release(op);
    return dsipc__fail(st, rc, 0, "cannot watch '%s': %s", l->path, uv_strerror(rc));
  }
  if (timeout_ms) {
    uv_update_time(loop); /* the loop's clock is as old as its last turn: count from now */
    uv_timer_start(&op->timer, on_accept_timeout, timeout_ms, 0);
  }
  dsipc__ok(st);
  return 0;
}

void dsipc_listener_accept_cancel(dsipc_listener *l) {
  if (l && l->op) op_release(l->op);
}

void dsipc_listener_close(dsipc_listener *l) {
  if (!l) return;
  dsipc_listener_accept_cancel(l); /* before the fd goes: the poll must not outlive it */
  if (l->fd >= 0) close(l->fd);
  if (l->path[0]) unlink(l->path);
  if (l->dir[0]) rmdir(l->dir);
  dsipc__free(l);
}
