/* One request, one reply, on a fresh connection, under one deadline (the runtime's own
 * IpcSocketDeadline idea): a timer covers connecting, writing and the whole reply, so a runtime
 * that hangs costs at most timeout_ms. Each call runs a private libuv loop, so the CLI can stay
 * synchronous while collect-style streaming shares the same connection code later. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "dsipc-int.h"

struct xact {
  uv_loop_t loop;
  uv_pipe_t pipe;
  uv_timer_t timer;
  uv_connect_t connect_req;
  uv_write_t write_req;
  const dsipc_buf *req;
  dsipc_buf *reply, *cont;
  dsipc_framer framer;
  uint32_t cont_len;
  int cont_known;
  int done, rc;
  uint64_t timeout_ms;
  const char *what; /* the socket path, for messages */
  dsipc_status *st;
  uint8_t readbuf[64 * 1024];
};

static void finish(struct xact *x, int rc) {
  if (x->done) return;
  x->done = 1;
  x->rc = rc;
  uv_read_stop((uv_stream_t *)&x->pipe);
  uv_timer_stop(&x->timer);
}


/* The reply is whole: classify it, and decide whether a continuation follows. */
static int on_reply(struct xact *x) {
  const dsipc_framer *f = &x->framer;
  x->reply->len = 0;
  int rc = dsipc__buf_append(x->reply, f->buf, f->header.size);
  if (rc) return dsipc__fail(x->st, rc, 0, "out of memory");
  const uint8_t *payload = f->buf + DSIPC_HEADER_SIZE;
  size_t n = f->header.size - DSIPC_HEADER_SIZE;
  rc = dsipc_decode_reply(&f->header, payload, n, x->st);
  if (rc || !x->cont) return rc;
  rc = dsipc_decode_env_reply(payload, n, &x->cont_len);
  if (rc) return dsipc__fail(x->st, rc, 0, "malformed continuation header: %s", dsipc_strerror(rc));
  x->cont_known = 1;
  x->cont->len = 0;
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct xact *x = h->data;
  (void)suggested;
  *buf = uv_buf_init((char *)x->readbuf, sizeof x->readbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  struct xact *x = s->data;
  if (x->done) return;
  if (nread < 0) {
    if (nread == UV_EOF) {
      if (!x->framer.complete)
        finish(x, dsipc__fail(x->st, DSIPC_ECLOSED, 0, "'%s' closed the connection after %zu bytes of the reply",
                              x->what, x->framer.have));
      else
        finish(x, dsipc__fail(x->st, DSIPC_ECLOSED, 0,
                              "'%s' closed the connection after %zu of %u bytes of the continuation", x->what,
                              x->cont->len, x->cont_len));
    } else {
      finish(x, dsipc__fail(x->st, -ECONNRESET, 0, "reading from '%s': %s", x->what, uv_strerror((int)nread)));
    }
    return;
  }
  const uint8_t *p = (const uint8_t *)buf->base;
  size_t n = (size_t)nread;
  if (!x->framer.complete) {
    long used = dsipc_framer_feed(&x->framer, p, n);
    if (used < 0) {
      finish(x, dsipc__fail(x->st, (int)used, 0, "bad reply from '%s': %s", x->what, dsipc_strerror((int)used)));
      return;
    }
    p += used;
    n -= (size_t)used;
    if (!x->framer.complete) return;
    int rc = on_reply(x);
    if (rc || !x->cont) {
      finish(x, rc);
      return;
    }
  }
  size_t want = x->cont_len - x->cont->len;
  if (n > want) n = want; /* nothing is supposed to follow; ignore it rather than grow */
  if (n && dsipc__buf_append(x->cont, p, n)) {
    finish(x, dsipc__fail(x->st, DSIPC_ENOMEM, 0, "out of memory"));
    return;
  }
  if (x->cont->len == x->cont_len) finish(x, 0);
}

static void on_write(uv_write_t *w, int status) {
  struct xact *x = w->data;
  if (status < 0 && !x->done)
    finish(x, dsipc__fail(x->st, -EPIPE, 0, "cannot send the request to '%s': %s", x->what, uv_strerror(status)));
}

static void start_exchange(struct xact *x) {
  uv_buf_t b = uv_buf_init((char *)x->req->data, (unsigned)x->req->len);
  x->write_req.data = x;
  int rc = uv_write(&x->write_req, (uv_stream_t *)&x->pipe, &b, 1, on_write);
  if (!rc) rc = uv_read_start((uv_stream_t *)&x->pipe, on_alloc, on_read);
  if (rc) finish(x, dsipc__fail(x->st, -EPIPE, 0, "cannot talk to '%s': %s", x->what, uv_strerror(rc)));
}

static void on_timeout(uv_timer_t *t) {
  struct xact *x = t->data;
  finish(x, dsipc__fail(x->st, DSIPC_ETIMEDOUT, 0, "no answer from '%s' within %llu ms", x->what,
                        (unsigned long long)x->timeout_ms));
}

static int xact_init(struct xact *x, const dsipc_buf *req, uint64_t timeout_ms, dsipc_buf *reply, dsipc_buf *cont,
                     dsipc_status *st, const char *what) {
  memset(x, 0, offsetof(struct xact, readbuf));
  x->req = req;
  x->reply = reply;
  x->cont = cont;
  x->timeout_ms = timeout_ms;
  x->st = st;
  x->what = what;
  dsipc_framer_init(&x->framer);
  if (uv_loop_init(&x->loop)) return dsipc__fail(st, DSIPC_ENOMEM, 0, "cannot create an event loop");
  uv_pipe_init(&x->loop, &x->pipe, 0);
  uv_timer_init(&x->loop, &x->timer);
  x->pipe.data = x->timer.data = x;
  x->connect_req.data = x;
  uv_timer_start(&x->timer, on_timeout, timeout_ms, 0);
  return 0;
}

static int xact_run(struct xact *x) {
  while (!x->done && uv_run(&x->loop, UV_RUN_ONCE)) {}
  if (!x->done) finish(x, dsipc__fail(x->st, DSIPC_ECLOSED, 0, "the exchange with '%s' ended early", x->what));
  uv_close((uv_handle_t *)&x->pipe, NULL);
  uv_close((uv_handle_t *)&x->timer, NULL);
  uv_run(&x->loop, UV_RUN_DEFAULT);
  uv_loop_close(&x->loop);
  dsipc_framer_release(&x->framer);
  if (x->rc == 0) dsipc__ok(x->st);
  return x->rc;
}

/* sun_path holds 108 bytes; a path through /proc/PID/root/... can be longer. Connecting through
 * /proc/self/fd/N of the opened directory keeps the address short without a chdir. */
int dsipc__short_alias(const char *path, char *alias, size_t cap, int *dirfd) {
  *dirfd = -1;
  if (strlen(path) < sizeof(((struct sockaddr_un *)0)->sun_path)) {
    snprintf(alias, cap, "%s", path);
    return 0;
  }
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path) return -ENAMETOOLONG;
  char dir[4096];
  if ((size_t)(slash - path) >= sizeof dir) return -ENAMETOOLONG;
  memcpy(dir, path, (size_t)(slash - path));
  dir[slash - path] = '\0';
  *dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (*dirfd < 0) return -errno;
  int n = snprintf(alias, cap, "/proc/self/fd/%d/%s", *dirfd, slash + 1);
  if (n < 0 || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
    close(*dirfd);
    *dirfd = -1;
    return -ENAMETOOLONG;
  }
  return 0;
}

/* A runtime's listener can refuse for a moment (it recreates its socket after a failed
 * connection; a full backlog says EAGAIN): a few quick retries, ~300 ms in all, before "refused". */
#define CONNECT_TRIES DSIPC__CONNECT_TRIES

/* The pause before connect attempt `attempt` (1 .. CONNECT_TRIES - 1): 20, 40, 80, 160 ms. */
uint64_t dsipc__connect_pause_ms(int attempt) { return 20u << (attempt - 1); }

/* Is CAP_DAC_OVERRIDE (capability 1) in this process's effective set? */
static int have_dac_override(void) {
  FILE *fp = fopen("/proc/self/status", "re");
  if (!fp) return 0;
  char line[256];
  unsigned long long caps = 0;
  while (fgets(line, sizeof line, fp))
    if (sscanf(line, "CapEff: %llx", &caps) == 1) break;
  fclose(fp);
  return (caps >> 1) & 1;
}

/* connect() said EACCES. The runtime makes its socket 0600 for its own user, so the usual cause
 * is a sidecar running as another user, root included once a container drops CAP_DAC_OVERRIDE
 * (a root that "cannot" is confusing without the numbers): one line with the owner, the mode
 * and the fixes, in the words of the places users set them. */
static int denied(const char *path, dsipc_status *st) {
  struct stat sb;
  unsigned me = (unsigned)geteuid();
  if (stat(path, &sb) != 0 || (sb.st_uid == me && (sb.st_mode & S_IWUSR)) || (sb.st_mode & S_IWOTH))
    return dsipc__fail(st, -EACCES, 0, "cannot connect to '%s': permission denied by a security module (AppArmor, "
                                       "SELinux or seccomp)", path);
  unsigned owner = (unsigned)sb.st_uid, mode = (unsigned)(sb.st_mode & 07777);
  if (have_dac_override())
    return dsipc__fail(st, -EACCES, 0, "cannot connect to '%s': permission denied although dntrace has "
                                       "CAP_DAC_OVERRIDE: a security module refuses it (the socket belongs to "
                                       "uid %u, mode %04o)", path, owner, mode);
  return dsipc__fail(st, -EACCES, 0, "cannot connect to '%s': permission denied: the socket belongs to uid %u with "
                                     "mode %04o and dntrace runs as uid %u without CAP_DAC_OVERRIDE; run dntrace as "
                                     "uid %u (podman/docker --user %u, Kubernetes securityContext.runAsUser: %u) or "
                                     "give it CAP_DAC_OVERRIDE", path, owner, mode, me, owner, owner, owner);
}

int dsipc__connect(const char *path, int *out, dsipc_status *st) { return dsipc__connect_tries(path, out, st, CONNECT_TRIES); }

int dsipc__connect_tries(const char *path, int *out, dsipc_status *st, int tries) {
  char alias[128];
  int dirfd;
  *out = -1;
  int rc = dsipc__short_alias(path, alias, sizeof alias, &dirfd);
  if (rc) return dsipc__fail(st, rc, 0, "cannot reach '%s': %s", path, strerror(-rc));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path, alias, strlen(alias) + 1); /* short_alias made it fit */
  int err = 0;
  for (int attempt = 0; attempt < tries; attempt++) {
    if (attempt) {
      uint64_t ms = dsipc__connect_pause_ms(attempt);
      struct timespec pause = {0, (long)(ms * 1000000u)};
      nanosleep(&pause, NULL);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      err = errno;
      break;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
      *out = fd;
      err = 0;
      break;
    }
    err = errno;
    close(fd);
    if (err != ECONNREFUSED && err != EAGAIN && err != ENOENT) break;
  }
  if (dirfd >= 0) close(dirfd);
  if (!err) return 0;
  if (err == EACCES) return denied(path, st);
  const char *hint = err == ECONNREFUSED ? " (the process has exited, or its runtime stopped listening)" : "";
  return dsipc__fail(st, -ECONNREFUSED, 0, "cannot connect to '%s': %s%s", path, strerror(err), hint);
}

static int transact_fd(int fd, const dsipc_buf *req, uint64_t timeout_ms, dsipc_buf *reply, dsipc_buf *cont,
                       dsipc_status *st, const char *what);

int dsipc_transact(const char *path, const dsipc_buf *req, uint64_t timeout_ms, dsipc_buf *reply, dsipc_buf *cont,
                   dsipc_status *st) {
  int fd;
  int rc = dsipc__connect(path, &fd, st);
  if (rc) return rc;
  return transact_fd(fd, req, timeout_ms, reply, cont, st, path);
}

int dsipc_transact_fd(int fd, const dsipc_buf *req, uint64_t timeout_ms, dsipc_buf *reply, dsipc_buf *cont,
                      dsipc_status *st) {
  return transact_fd(fd, req, timeout_ms, reply, cont, st, "the runtime's connection");
}

static int transact_fd(int fd, const dsipc_buf *req, uint64_t timeout_ms, dsipc_buf *reply, dsipc_buf *cont,
                       dsipc_status *st, const char *what) {
  struct xact *x = dsipc__malloc(sizeof *x);
  if (!x) {
    close(fd);
    return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  }
  int rc = xact_init(x, req, timeout_ms, reply, cont, st, what);
  if (rc == 0) {
    rc = uv_pipe_open(&x->pipe, fd);
    if (rc) {
      close(fd);
      finish(x, dsipc__fail(st, -EBADF, 0, "cannot use the runtime's connection: %s", uv_strerror(rc)));
    } else {
      start_exchange(x);
    }
    rc = xact_run(x); /* closing the pipe closes fd */
  } else {
    close(fd);
  }
  dsipc__free(x);
  return rc;
}
