/* The fake diagnostics server: plays a case (fake-case.h) on each connection, each connection in
 * a thread of its own (a session's stream stays open while StopTracing comes on another), in a
 * thread of the test or in a forked child named as a runtime. What it reads is bounded by the
 * header's u16 size; what it checks is only what the case says, so a mismatch names the case's
 * line. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake-ipc.h"

#define MAX_LOG 64             /* requests kept for fake_ipc_request */
#define MAX_EVENTS 64          /* names raised by `signal` or fake_ipc_raise */
/* How long fake_ipc_stop lets connections being played finish, and how long dialing retries a
 * refused connect: ceilings that only a hang reaches (a busy machine can hold a thread for
 * seconds), never a pace the test must keep. */
#define STOP_GRACE_MS 60000
#define DIAL_MS 60000

struct fake_ipc;

/* One connection being played, in its own thread. */
struct conn {
  struct fake_ipc *f;
  int fd;
  size_t index;               /* from 1, in the order accepted (for messages) */
  const struct fake_section *s; /* NULL for an `on` case until its first request chose one */
  pthread_t thread;
  int stopped;                /* a wait of this connection saw the stop */
  uint8_t last[65536];        /* the request read last, for matching and hooks */
  size_t last_len;
  uint8_t *out;               /* bytes waiting for a flush */
  size_t out_n, out_cap;
  size_t piece, piece_ms;
  int done;                   /* its thread has finished (atomic) */
  struct conn *next;
};

struct fake_ipc {
  fake_case *c;
  fake_ipc_opts o;
  char socket[4200];
  char dir[64];        /* a directory made for the socket, removed at the end ("" if none) */
  int own_socket;      /* the socket is ours to unlink */
  int lfd;             /* listening socket */
  int stop[2];         /* a byte in stop[1] says stop (every wait polls stop[0]) */
  pthread_t thread;    /* the acceptor (or dialer) */
  int running;
  pid_t pid;           /* runtime child */
  int report;          /* runtime: read end of the child's pipe (socket path, then failures) */
  int report_w;        /* in the child: its write end */
  pthread_mutex_t mu;  /* guards what follows */
  char failure[1024];
  int failed;
  size_t played;       /* `connection` sections whose connection came */
  struct conn *conns;  /* every connection's thread, joined at stop */
  int active;          /* connections being played */
  char events[MAX_EVENTS][32];
  int nevents;
  uint8_t *log[MAX_LOG];
  size_t log_len[MAX_LOG], nlog;
};

/* Records the first difference, "FILE:LINE: what", FILE the case or the include that says it. */
static void mismatch(struct fake_ipc *f, int file, int line, const char *fmt, ...) {
  char what[500];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&f->mu);
  if (!f->failed) {
    f->failed = 1;
    if (line)
      snprintf(f->failure, sizeof f->failure, "%s:%d: %s", f->c->files[file], line, what);
    else
      snprintf(f->failure, sizeof f->failure, "%s: %s", f->c->files[file], what);
    /* a runtime's parent reads it at stop */
    if (f->report_w >= 0 && write(f->report_w, f->failure, strlen(f->failure)) < 0) {}
  }
  pthread_mutex_unlock(&f->mu);
}

/* ---- waiting, interruptible by fake_ipc_stop ---- */

enum { READY = 1, TIMEOUT = 0, STOPPED = -1 };

/* Waits for fd to be readable (fd -1: only the time), at most ms (-1: forever). k (may be NULL)
 * remembers a stop. A connection reads what is there before it sees the stop: a client that sent
 * and hung up before the stop came is judged on what it sent, whichever thread ran first (the
 * stop may even come before this connection's thread first polls). */
static int wait_for(struct fake_ipc *f, struct conn *k, int fd, long ms) {
  struct timespec t0;
  /* timing: the fake's pauses, and its waits under 60 s ceilings (a hang) */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    struct pollfd p[2] = {{.fd = f->stop[0], .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    long left = -1;
    if (ms >= 0) {
      struct timespec t1;
      /* timing: as above */
      clock_gettime(CLOCK_MONOTONIC, &t1);
      long spent = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
      left = ms - spent;
      if (left <= 0) return TIMEOUT;
    }
    int rc = poll(p, 2, (int)(left > 600000 ? 600000 : left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc > 0 && k && fd >= 0 && p[1].revents) return READY;
    if (rc < 0 || p[0].revents) {
      if (k) k->stopped = 1;
      return STOPPED;
    }
    if (p[1].revents) return READY;
  }
}

/* Reads up to n bytes, fewer when the peer hangs up or the fake is stopped. */
static size_t read_upto(struct conn *k, uint8_t *b, size_t n) {
  size_t have = 0;
  while (have < n) {
    if (wait_for(k->f, k, k->fd, -1) != READY) break;
    ssize_t r = read(k->fd, b + have, n - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
  }
  return have;
}

/* Reads one request into k->last: the header, then what its size says. Returns its length
 * (0: the peer hung up, or the fake stopped, before a byte). */
static size_t read_request(struct conn *k) {
  struct fake_ipc *f = k->f;
  size_t n = read_upto(k, k->last, 20);
  if (n == 20) {
    size_t size = (size_t)(k->last[14] | k->last[15] << 8);
    if (size > 20) n += read_upto(k, k->last + 20, size - 20);
  }
  k->last_len = n;
  pthread_mutex_lock(&f->mu);
  if (n && f->nlog < MAX_LOG) {
    uint8_t *copy = malloc(n);
    if (copy) {
      memcpy(copy, k->last, n);
      f->log[f->nlog] = copy;
      f->log_len[f->nlog++] = n;
    }
  }
  pthread_mutex_unlock(&f->mu);
  return n;
}

/* ---- writing: what the case sends goes out at the next wait, in one write or in pieces ---- */

static void queue(struct conn *k, const struct fake_action *a) {
  if (k->out_n + a->n > k->out_cap) {
    size_t cap = k->out_cap ? k->out_cap : 4096;
    while (cap < k->out_n + a->n) cap *= 2;
    uint8_t *nb = realloc(k->out, cap);
    if (!nb) {
      mismatch(k->f, a->file, a->line, "out of memory");
      return;
    }
    k->out = nb;
    k->out_cap = cap;
  }
  uint8_t *p = k->out + k->out_n;
  memcpy(p, a->bytes, a->n);
  uint64_t pid = (uint64_t)getpid();
  for (int i = 0; i < a->npatch; i++)
    for (int b = 0; b < a->patch[i].width; b++) p[a->patch[i].at + (size_t)b] = (uint8_t)(pid >> (8 * b));
  k->out_n += a->n;
}

/* Writes what is queued. 0, or -1 when the peer is gone or the fake stopped (nothing more to send). */
static int flush(struct conn *k) {
  size_t done = 0;
  int rc = 0;
  while (done < k->out_n) {
    size_t n = k->out_n - done;
    if (k->piece && n > k->piece) n = k->piece;
    if (done && k->piece && k->piece_ms && wait_for(k->f, k, -1, (long)k->piece_ms) == STOPPED) {
      rc = -1;
      break;
    }
    ssize_t w = send(k->fd, k->out + done, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { /* the client may be gone: what the case meant to send no longer matters */
      rc = -1;
      break;
    }
    done += (size_t)w;
  }
  k->out_n = 0;
  return rc;
}

/* ---- the checks ---- */

static int byte_matches(int want, uint8_t got) { return want == FAKE_ANY || want == got; }

/* Whether the request in k->last is what a (an expect) wants; a mismatch says why. */
static int check_request(struct conn *k, const struct fake_action *a) {
  struct fake_ipc *f = k->f;
  const uint8_t *r = k->last;
  size_t n = k->last_len, conn = k->index;
  if (n == 0 && k->stopped) return -1; /* stopped before the client wrote: not the client's fault */
  if (n == 0) {
    mismatch(f, a->file, a->line, "connection %zu: the peer hung up before a request", conn);
    return -1;
  }
  if (n < 20 || memcmp(r, "DOTNET_IPC_V1", 14) != 0) {
    mismatch(f, a->file, a->line, "connection %zu: %zu bytes that are no IPC request (no DOTNET_IPC_V1 header)", conn,
             n);
    return -1;
  }
  size_t size = (size_t)(r[14] | r[15] << 8);
  if (size != n) {
    mismatch(f, a->file, a->line, "connection %zu: the header says %zu bytes, %zu came", conn, size, n);
    return -1;
  }
  if (!byte_matches(a->set, r[16]) || !byte_matches(a->id, r[17])) {
    mismatch(f, a->file, a->line, "connection %zu: request %02x %02x, expected %02x %02x", conn, r[16], r[17],
             a->set & 0xff, a->id & 0xff);
    return -1;
  }
  if (r[18] || r[19]) {
    mismatch(f, a->file, a->line, "connection %zu: reserved header bytes %02x %02x are not 0", conn, r[18], r[19]);
    return -1;
  }
  size_t pn = n - 20;
  if (a->prefix ? pn < a->n : pn != a->n) {
    mismatch(f, a->file, a->line, "connection %zu: a payload of %zu bytes, expected %s%zu", conn, pn,
             a->prefix ? "at least " : "", a->n);
    return -1;
  }
  for (size_t i = 0; i < a->n; i++)
    if (r[20 + i] != a->bytes[i]) {
      mismatch(f, a->file, a->line, "connection %zu: payload byte %zu is 0x%02x, expected 0x%02x", conn, i, r[20 + i],
               a->bytes[i]);
      return -1;
    }
  return 0;
}

/* ---- events between connections ---- */

/* Raises name (once: raising it again changes nothing). -1 when MAX_EVENTS are raised already. */
static int raise_event(struct fake_ipc *f, const char *name) {
  int rc = 0, have = 0;
  pthread_mutex_lock(&f->mu);
  for (int i = 0; i < f->nevents && !have; i++) have = strcmp(f->events[i], name) == 0;
  if (!have && f->nevents < MAX_EVENTS)
    snprintf(f->events[f->nevents++], sizeof f->events[0], "%s", name);
  else if (!have)
    rc = -1;
  pthread_mutex_unlock(&f->mu);
  return rc;
}

static int raised(struct fake_ipc *f, const char *name) {
  int yes = 0;
  pthread_mutex_lock(&f->mu);
  for (int i = 0; i < f->nevents && !yes; i++) yes = strcmp(f->events[i], name) == 0;
  pthread_mutex_unlock(&f->mu);
  return yes;
}

/* ---- one connection ---- */

/* Plays k->s on k->fd. An `on` section's request is in k->last already. */
static void play(struct conn *k) {
  struct fake_ipc *f = k->f;
  const struct fake_section *s = k->s;
  for (size_t i = 0; i < s->nacts; i++) {
    const struct fake_action *a = &s->acts[i];
    uint8_t b;
    switch (a->op) {
    case FAKE_EXPECT:
      if (flush(k)) return;
      if (!a->read_already) read_request(k);
      if (check_request(k, a)) return;
      break;
    case FAKE_EXPECT_CLOSE:
      if (flush(k)) return;
      if (read_upto(k, &b, 1) == 1)
        mismatch(f, a->file, a->line, "connection %zu: bytes came (0x%02x first) where the peer should hang up",
                 k->index, b);
      return;
    case FAKE_SEND: queue(k, a); break;
    case FAKE_PAUSE:
      if (flush(k) || wait_for(f, k, -1, a->num) == STOPPED) return;
      break;
    case FAKE_PIECES:
      if (flush(k)) return;
      k->piece = (size_t)a->num;
      k->piece_ms = (size_t)a->num2;
      break;
    case FAKE_HANG:
      if (flush(k)) return;
      while (read_upto(k, &b, 1) == 1) {} /* whatever comes, until the peer hangs up */
      return;
    case FAKE_CLOSE: flush(k); return;
    case FAKE_SIGNAL:
      if (raise_event(f, a->name)) mismatch(f, a->file, a->line, "more than %d events raised", MAX_EVENTS);
      break;
    case FAKE_WAIT:
      if (flush(k)) return;
      while (!raised(f, a->name))
        if (wait_for(f, k, -1, 5) == STOPPED) return;
      break;
    case FAKE_CALL: {
      if (flush(k)) return;
      if (!f->o.hook) {
        mismatch(f, a->file, a->line, "'call %s' but the test gave no hook", a->name);
        return;
      }
      uint32_t hr = f->o.hook(a->name, k->last, k->last_len, f->o.ud);
      if (hr) {
        uint8_t e[24] = "DOTNET_IPC_V1";
        e[14] = 24, e[16] = 0xff, e[17] = 0xff;
        for (int j = 0; j < 4; j++) e[20 + j] = (uint8_t)(hr >> (8 * j));
        struct fake_action err = {.op = FAKE_SEND, .bytes = e, .n = sizeof e};
        queue(k, &err);
        flush(k);
        return;
      }
      break;
    }
    }
  }
  flush(k);
}

/* The `on` section for the request in k->last, or NULL. */
static const struct fake_section *dispatch(struct conn *k) {
  if (k->last_len < 20) return NULL;
  for (size_t i = 0; i < k->f->c->nsecs; i++) {
    const struct fake_section *s = &k->f->c->secs[i];
    if (byte_matches(s->set, k->last[16]) && byte_matches(s->id, k->last[17])) return s;
  }
  return NULL;
}

static void *conn_main(void *arg) {
  struct conn *k = arg;
  struct fake_ipc *f = k->f;
  if (!k->s) { /* an `on` case: the first request chooses the section */
    if (read_request(k)) { /* a connection closed before a request (a probe) is let go */
      k->s = dispatch(k);
      if (!k->s)
        mismatch(f, 0, 0, "connection %zu: no 'on' section for request %02x %02x", k->index,
                 k->last_len >= 18 ? k->last[16] : 0, k->last_len >= 18 ? k->last[17] : 0);
    }
  }
  if (k->s) play(k);
  close(k->fd);
  k->fd = -1;
  free(k->out);
  k->out = NULL;
  __atomic_store_n(&k->done, 1, __ATOMIC_SEQ_CST);
  __atomic_sub_fetch(&f->active, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* Plays section s (NULL: chosen by the first request) on fd in a thread of its own. */
static void start_conn(struct fake_ipc *f, int fd, size_t index, const struct fake_section *s) {
  struct conn *k = calloc(1, sizeof *k);
  if (!k) {
    mismatch(f, 0, 0, "connection %zu: out of memory", index);
    close(fd);
    return;
  }
  k->f = f, k->fd = fd, k->index = index, k->s = s;
  __atomic_add_fetch(&f->active, 1, __ATOMIC_SEQ_CST);
  if (pthread_create(&k->thread, NULL, conn_main, k) != 0) {
    __atomic_sub_fetch(&f->active, 1, __ATOMIC_SEQ_CST);
    mismatch(f, 0, 0, "connection %zu: cannot start a thread", index);
    close(fd);
    free(k);
    return;
  }
  pthread_mutex_lock(&f->mu);
  k->next = f->conns;
  f->conns = k;
  pthread_mutex_unlock(&f->mu);
}

/* Accepts the next connection; -1 when stopped and none is queued. A connection the client made
 * before the stop came but this thread had not run yet (a busy machine: the client may even have
 * given up on its deadline) is still accepted, *late set: it came, and what it sent is checked. */
static int next_connection(struct fake_ipc *f, int *late) {
  *late = 0;
  for (;;) {
    if (wait_for(f, NULL, f->lfd, -1) != READY) {
      struct pollfd p = {.fd = f->lfd, .events = POLLIN};
      int rc;
      while ((rc = poll(&p, 1, 0)) < 0 && errno == EINTR) {}
      if (rc != 1 || !(p.revents & POLLIN)) return -1;
      *late = 1;
    }
    int c = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c >= 0) return c;
    if (*late || (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)) return -1;
  }
}

/* Connects to the socket (a runtime dialing a diagnostic port); -1 when stopped or refused. */
static int dial(struct fake_ipc *f, const struct fake_section *s) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->o.socket);
  for (int waited = 0;; waited += 20) {
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c >= 0 && connect(c, (struct sockaddr *)&sa, sizeof sa) == 0) return c;
    int e = errno;
    if (c >= 0) close(c);
    if (waited >= DIAL_MS || wait_for(f, NULL, -1, 20) == STOPPED) {
      mismatch(f, s->file, s->line, "cannot dial '%s': %s", f->o.socket, strerror(e));
      return -1;
    }
  }
}

/* Accepts (or dials) connections and starts each one's thread. */
static void serve(struct fake_ipc *f) {
  int late = 0;
  if (f->c->on) {
    for (size_t index = 1;; index++) {
      int c = next_connection(f, &late);
      if (c < 0) return;
      start_conn(f, c, index, NULL);
    }
  }
  for (size_t i = 0; i < f->c->nsecs; i++) {
    const struct fake_section *s = &f->c->secs[i];
    int c = f->o.dial ? dial(f, s) : next_connection(f, &late);
    if (c < 0) return;
    pthread_mutex_lock(&f->mu);
    f->played++;
    pthread_mutex_unlock(&f->mu);
    start_conn(f, c, i + 1, s);
  }
}

static void *thread_main(void *arg) {
  serve(arg);
  return NULL;
}

/* ---- a runtime: a forked child ---- */

unsigned long long fake_ipc_starttime(pid_t pid) {
  char path[64], stat[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, stat, sizeof stat - 1);
  if (fd >= 0) close(fd);
  if (n <= 0) return 0;
  stat[n] = '\0';
  char *p = strrchr(stat, ')');
  if (!p) return 0;
  p += 2; /* field 3 */
  for (int field = 3; field < 22 && p; field++) {
    p = strchr(p, ' ');
    if (p) p++;
  }
  return p ? strtoull(p, NULL, 10) : 0;
}

/* Its own root: a tmpfs on /mnt (private to its mount namespace) holding link_to as a directory
 * and /tmp as an absolute symlink to it; then chroot there. */
static int chroot_with_tmp_link(const char *link_to) {
  char dir[4200];
  if (mount("tmpfs", "/mnt", "tmpfs", 0, "mode=755") != 0) return -1;
  for (const char *p = link_to + 1;; p++) { /* mkdir -p /mnt<link_to> */
    if (*p != '/' && *p) continue;
    snprintf(dir, sizeof dir, "/mnt%.*s", (int)(p - link_to), link_to);
    if (mkdir(dir, 01777) != 0 && errno != EEXIST) return -1;
    if (!*p) break;
  }
  chmod(dir, 01777);
  if (symlink(link_to, "/mnt/tmp") != 0 || chroot("/mnt") != 0 || chdir("/") != 0) return -1;
  return 0;
}

static void runtime_main(struct fake_ipc *f) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const fake_ipc_opts *o = &f->o;
  unsigned long long key = o->sock_pid ? o->sock_key : fake_ipc_starttime(getpid());
  if (o->private_tmp || o->tmp_link) {
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) _exit(92);
    if (o->tmp_link ? chroot_with_tmp_link(o->tmp_link) != 0 : mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777") != 0)
      _exit(92);
  }
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/dotnet-diagnostic-%d-%llu-socket", o->sock_dir ? o->sock_dir : "/tmp",
           o->sock_pid ? (int)o->sock_pid : (int)getpid(), key);
  f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(f->lfd, 16) != 0) _exit(93);
  if (write(f->report_w, sa.sun_path, strlen(sa.sun_path) + 1) < 0) _exit(94);
  serve(f);
  for (;;) pause(); /* the case is played: it stays there until killed */
}

static int run_runtime(struct fake_ipc *f, char *err, size_t errlen) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  f->pid = fork();
  if (f->pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (f->pid == 0) {
    close(p[0]);
    f->report_w = p[1];
    runtime_main(f);
  }
  close(p[1]);
  f->report = p[0];
  size_t n = 0; /* the socket path, up to its NUL; failures come after it */
  while (n + 1 < sizeof f->socket) {
    char ch;
    ssize_t r = read(f->report, &ch, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || ch == '\0') break;
    f->socket[n++] = ch;
  }
  f->socket[n] = '\0';
  if (!n) {
    int st = 0;
    waitpid(f->pid, &st, 0);
    snprintf(err, errlen, "the fake runtime did not start (exit %d: 92 mount namespace, 93 socket)",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    f->pid = 0;
    return -1;
  }
  f->own_socket = !f->o.private_tmp && !f->o.tmp_link;
  f->running = 1;
  return 0;
}

/* ---- a thread ---- */

static int run_thread(struct fake_ipc *f, char *err, size_t errlen) {
  if (!f->o.dial) {
    if (!f->o.socket) {
      snprintf(f->dir, sizeof f->dir, "/tmp/dnt-fake-XXXXXX");
      if (!mkdtemp(f->dir)) {
        snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
        f->dir[0] = '\0';
        return -1;
      }
      snprintf(f->socket, sizeof f->socket, "%s/sock", f->dir);
      f->own_socket = 1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(f->socket) >= sizeof sa.sun_path) {
      snprintf(err, errlen, "'%s' is too long for a socket", f->socket);
      return -1;
    }
    memcpy(sa.sun_path, f->socket, strlen(f->socket) + 1);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(f->lfd, 16) != 0) {
      snprintf(err, errlen, "cannot listen at '%s': %s", f->socket, strerror(errno));
      return -1;
    }
  }
  if (pthread_create(&f->thread, NULL, thread_main, f) != 0) {
    snprintf(err, errlen, "pthread_create failed");
    return -1;
  }
  f->running = 1;
  return 0;
}

/* ---- the interface ---- */

int fake_ipc_new(fake_ipc **out, const char *case_name, const fake_ipc_opts *o, char *err, size_t errlen) {
  *out = NULL;
  struct fake_ipc *f = calloc(1, sizeof *f);
  if (!f) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  f->o = *o;
  pthread_mutex_init(&f->mu, NULL);
  f->lfd = f->report = f->report_w = f->stop[0] = f->stop[1] = -1;
  if ((o->dial || o->runtime) && (o->dial ? !o->socket || o->runtime : o->socket != NULL)) {
    snprintf(err, errlen, "fake_ipc: dial wants a socket path, a runtime names its own");
    free(f);
    return -1;
  }
  if (o->socket) snprintf(f->socket, sizeof f->socket, "%s", o->socket);
  if (fake_case_load(&f->c, case_name, err, errlen) != 0) {
    free(f);
    return -1;
  }
  if (o->dial && f->c->on) {
    snprintf(err, errlen, "%s: a fake that dials plays 'connection' sections, not 'on'", f->c->name);
    fake_case_free(f->c);
    free(f);
    return -1;
  }
  if (pipe2(f->stop, O_CLOEXEC) != 0) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    fake_case_free(f->c);
    free(f);
    return -1;
  }
  *out = f;
  return 0;
}

int fake_ipc_run(fake_ipc *f, char *err, size_t errlen) {
  if (f->running) {
    snprintf(err, errlen, "fake_ipc_run: already running");
    return -1;
  }
  return f->o.runtime ? run_runtime(f, err, errlen) : run_thread(f, err, errlen);
}

int fake_ipc_start(fake_ipc **out, const char *case_name, const fake_ipc_opts *o, char *err, size_t errlen) {
  if (fake_ipc_new(out, case_name, o, err, errlen) != 0) return -1;
  if (fake_ipc_run(*out, err, errlen) != 0) {
    fake_ipc_free(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

const char *fake_ipc_socket(const fake_ipc *f) { return f->socket; }

pid_t fake_ipc_pid(const fake_ipc *f) { return f->o.runtime ? f->pid : getpid(); }

int fake_ipc_stop(fake_ipc *f, char *err, size_t errlen) {
  if (f->running && f->o.runtime) {
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
    ssize_t n = read(f->report, f->failure, sizeof f->failure - 1); /* what the child found wrong */
    if (n > 0) {
      f->failure[n] = '\0';
      f->failed = 1;
    }
    close(f->report);
    f->report = -1;
  } else if (f->running) {
    /* connections being played end by themselves once the client is done: give them a moment;
     * a fake only waiting for a connection that no client makes is stopped at once */
    int waited = 0;
    while (__atomic_load_n(&f->active, __ATOMIC_SEQ_CST) > 0 && waited < STOP_GRACE_MS) {
      struct timespec ms5 = {0, 5000000};
      nanosleep(&ms5, NULL);
      waited += 5;
    }
    const struct fake_section *stuck = NULL;
    pthread_mutex_lock(&f->mu);
    for (struct conn *k = f->conns; k; k = k->next)
      if (!__atomic_load_n(&k->done, __ATOMIC_SEQ_CST) && k->s) stuck = k->s;
    pthread_mutex_unlock(&f->mu);
    if (write(f->stop[1], "x", 1) < 0) {}
    pthread_join(f->thread, NULL);
    while (f->conns) {
      struct conn *k = f->conns;
      f->conns = k->next;
      pthread_join(k->thread, NULL);
      free(k);
    }
    if (stuck)
      mismatch(f, stuck->file, stuck->line, "a connection still playing %d s after the test was done",
               STOP_GRACE_MS / 1000);
    if (!f->c->on && f->played < f->c->nsecs)
      mismatch(f, f->c->secs[f->played].file, f->c->secs[f->played].line, "connection %zu of %zu never came",
               f->played + 1, f->c->nsecs);
  }
  f->running = 0;
  if (f->lfd >= 0) close(f->lfd);
  f->lfd = -1;
  if (f->own_socket) unlink(f->socket);
  f->own_socket = 0;
  if (f->dir[0]) rmdir(f->dir);
  f->dir[0] = '\0';
  if (f->failed) {
    snprintf(err, errlen, "%s", f->failure);
    return -1;
  }
  return 0;
}

int fake_ipc_raise(fake_ipc *f, const char *name) {
  if (f->o.runtime || !name || !*name || strlen(name) >= sizeof f->events[0]) return -1;
  return raise_event(f, name);
}

const uint8_t *fake_ipc_request(const fake_ipc *f, size_t i, size_t *len) {
  if (i >= f->nlog) {
    *len = 0;
    return NULL;
  }
  *len = f->log_len[i];
  return f->log[i];
}

void fake_ipc_free(fake_ipc *f) {
  if (!f) return;
  char err[8];
  if (f->running) fake_ipc_stop(f, err, sizeof err);
  for (size_t i = 0; i < f->nlog; i++) free(f->log[i]);
  if (f->stop[0] >= 0) close(f->stop[0]), close(f->stop[1]);
  pthread_mutex_destroy(&f->mu);
  fake_case_free(f->c);
  free(f);
}

void fake_ipc_first_string(const uint8_t *p, size_t n, char *out, size_t cap) {
  out[0] = '\0';
  if (n < 4 || !cap) return;
  uint32_t units = p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
  size_t i;
  for (i = 0; i < units && i + 1 < cap && 4 + 2 * i + 1 < n; i++) out[i] = (char)p[4 + 2 * i];
  out[i] = '\0';
}
