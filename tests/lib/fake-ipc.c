/* The fake diagnostics server: plays a case (fake-case.h) on each connection, in a thread of the
 * test or in a forked child named as a runtime. What it reads is bounded by the header's u16 size;
 * what it checks is only what the case says, so a mismatch names the case's line. */
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
#define STOP_GRACE_MS 5000     /* how long fake_ipc_stop lets a `connection` case finish */
#define DIAL_MS 2000           /* how long dialing retries a refused connect */

struct fake_ipc {
  fake_case *c;
  fake_ipc_opts o;
  char socket[4200];
  char dir[64];        /* a directory made for the socket, removed at the end ("" if none) */
  int own_socket;      /* the socket is ours to unlink */
  int lfd;             /* listening socket (thread) */
  int stop[2];         /* thread: a byte in stop[1] says stop; -1 in a runtime child */
  pthread_t thread;
  int running;
  pid_t pid;           /* runtime child */
  int report;          /* runtime: read end of the child's pipe (socket path, then failures) */
  int report_w;        /* in the child: its write end */
  char failure[1024];
  int failed;
  size_t played;       /* `connection` sections whose connection came */
  const struct fake_section *at; /* the section being played */
  int playing, finished;
  int stopped;         /* a wait saw the stop (the fake's own thread) */  /* a connection is being played; the thread is done (atomics) */
  uint8_t *log[MAX_LOG];
  size_t log_len[MAX_LOG], nlog;
  uint8_t last[65536]; /* the request read last, for matching and hooks */
  size_t last_len;
  uint8_t *out;        /* bytes waiting for a flush */
  size_t out_n, out_cap;
  size_t piece, piece_ms;
};

/* Records the first difference, "FILE:LINE: what", FILE the case or the include that says it. */
static void mismatch(struct fake_ipc *f, int file, int line, const char *fmt, ...) {
  if (f->failed) return;
  f->failed = 1;
  char what[500];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (line)
    snprintf(f->failure, sizeof f->failure, "%s:%d: %s", f->c->files[file], line, what);
  else
    snprintf(f->failure, sizeof f->failure, "%s: %s", f->c->files[file], what);
  if (f->report_w >= 0 && write(f->report_w, f->failure, strlen(f->failure)) < 0) {} /* the parent reads it at stop */
}

/* ---- waiting, interruptible by fake_ipc_stop ---- */

enum { READY = 1, TIMEOUT = 0, STOPPED = -1 };

/* Waits for fd to be readable (fd -1: only the time), at most ms (-1: forever). */
static int wait_for(struct fake_ipc *f, int fd, long ms) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    struct pollfd p[2] = {{.fd = f->stop[0], .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    long left = -1;
    if (ms >= 0) {
      struct timespec t1;
      clock_gettime(CLOCK_MONOTONIC, &t1);
      long spent = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
      left = ms - spent;
      if (left <= 0) return TIMEOUT;
    }
    int rc = poll(p, 2, (int)(left > 600000 ? 600000 : left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || p[0].revents) {
      f->stopped = 1;
      return STOPPED;
    }
    if (p[1].revents) return READY;
  }
}

/* Reads up to n bytes, fewer when the peer hangs up or the fake is stopped. */
static size_t read_upto(struct fake_ipc *f, int c, uint8_t *b, size_t n) {
  size_t have = 0;
  while (have < n) {
    if (wait_for(f, c, -1) != READY) break;
    ssize_t r = read(c, b + have, n - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
  }
  return have;
}

/* Reads one request into f->last: the header, then what its size says. Returns its length
 * (0: the peer hung up, or the fake stopped, before a byte). */
static size_t read_request(struct fake_ipc *f, int c) {
  size_t n = read_upto(f, c, f->last, 20);
  if (n == 20) {
    size_t size = (size_t)(f->last[14] | f->last[15] << 8);
    if (size > 20) n += read_upto(f, c, f->last + 20, size - 20);
  }
  f->last_len = n;
  if (n && f->nlog < MAX_LOG) {
    uint8_t *copy = malloc(n);
    if (copy) {
      memcpy(copy, f->last, n);
      f->log[f->nlog] = copy;
      f->log_len[f->nlog++] = n;
    }
  }
  return n;
}

/* ---- writing: what the case sends goes out at the next wait, in one write or in pieces ---- */

static void queue(struct fake_ipc *f, const struct fake_action *a) {
  if (f->out_n + a->n > f->out_cap) {
    size_t cap = f->out_cap ? f->out_cap : 4096;
    while (cap < f->out_n + a->n) cap *= 2;
    uint8_t *nb = realloc(f->out, cap);
    if (!nb) {
      mismatch(f, a->file, a->line, "out of memory");
      return;
    }
    f->out = nb;
    f->out_cap = cap;
  }
  uint8_t *p = f->out + f->out_n;
  memcpy(p, a->bytes, a->n);
  uint64_t pid = (uint64_t)getpid();
  for (int i = 0; i < a->npatch; i++)
    for (int k = 0; k < a->patch[i].width; k++) p[a->patch[i].at + (size_t)k] = (uint8_t)(pid >> (8 * k));
  f->out_n += a->n;
}

/* Writes what is queued. 0, or -1 when the peer is gone or the fake stopped (nothing more to send). */
static int flush(struct fake_ipc *f, int c) {
  size_t done = 0;
  int rc = 0;
  while (done < f->out_n) {
    size_t n = f->out_n - done;
    if (f->piece && n > f->piece) n = f->piece;
    if (done && f->piece && f->piece_ms && wait_for(f, -1, (long)f->piece_ms) == STOPPED) {
      rc = -1;
      break;
    }
    ssize_t w = send(c, f->out + done, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { /* the client may be gone: what the case meant to send no longer matters */
      rc = -1;
      break;
    }
    done += (size_t)w;
  }
  f->out_n = 0;
  return rc;
}

/* ---- the checks ---- */

static int byte_matches(int want, uint8_t got) { return want == FAKE_ANY || want == got; }

/* Whether the request in f->last is what a (an expect) wants; a mismatch says why. */
static int check_request(struct fake_ipc *f, const struct fake_action *a, size_t conn) {
  const uint8_t *r = f->last;
  size_t n = f->last_len;
  if (n == 0 && f->stopped) return -1; /* stopped before the client wrote: not the client's fault */
  if (n == 0) {
    mismatch(f, a->file, a->line, "connection %zu: the peer hung up before a request", conn);
    return -1;
  }
  if (n < 20 || memcmp(r, "DOTNET_IPC_V1", 14) != 0) {
    mismatch(f, a->file, a->line, "connection %zu: %zu bytes that are no IPC request (no DOTNET_IPC_V1 header)", conn, n);
    return -1;
  }
  size_t size = (size_t)(r[14] | r[15] << 8);
  if (size != n) {
    mismatch(f, a->file, a->line, "connection %zu: the header says %zu bytes, %zu came", conn, size, n);
    return -1;
  }
  if (!byte_matches(a->set, r[16]) || !byte_matches(a->id, r[17])) {
    mismatch(f, a->file, a->line, "connection %zu: request %02x %02x, expected %02x %02x", conn, r[16], r[17], a->set & 0xff,
             a->id & 0xff);
    return -1;
  }
  if (r[18] || r[19]) {
    mismatch(f, a->file, a->line, "connection %zu: reserved header bytes %02x %02x are not 0", conn, r[18], r[19]);
    return -1;
  }
  size_t pn = n - 20;
  if (a->prefix ? pn < a->n : pn != a->n) {
    mismatch(f, a->file, a->line, "connection %zu: a payload of %zu bytes, expected %s%zu", conn, pn, a->prefix ? "at least " : "",
             a->n);
    return -1;
  }
  for (size_t i = 0; i < a->n; i++)
    if (r[20 + i] != a->bytes[i]) {
      mismatch(f, a->file, a->line, "connection %zu: payload byte %zu is 0x%02x, expected 0x%02x", conn, i, r[20 + i], a->bytes[i]);
      return -1;
    }
  return 0;
}

/* ---- one connection ---- */

/* Plays s on c (conn counts from 1, for messages). An `on` section's request is in f->last. */
static void play(struct fake_ipc *f, int c, const struct fake_section *s, size_t conn) {
  f->at = s;
  __atomic_store_n(&f->playing, 1, __ATOMIC_SEQ_CST);
  f->piece = 0;
  f->piece_ms = 0;
  f->out_n = 0;
  for (size_t i = 0; i < s->nacts; i++) {
    const struct fake_action *a = &s->acts[i];
    uint8_t b;
    switch (a->op) {
    case FAKE_EXPECT:
      if (flush(f, c)) goto out;
      read_request(f, c);
      if (check_request(f, a, conn)) goto out;
      break;
    case FAKE_EXPECT_CLOSE:
      if (flush(f, c)) goto out;
      if (read_upto(f, c, &b, 1) == 1)
        mismatch(f, a->file, a->line, "connection %zu: bytes came (0x%02x first) where the peer should hang up", conn, b);
      goto out;
    case FAKE_SEND: queue(f, a); break;
    case FAKE_PAUSE:
      if (flush(f, c) || wait_for(f, -1, a->num) == STOPPED) goto out;
      break;
    case FAKE_PIECES:
      if (flush(f, c)) goto out;
      f->piece = (size_t)a->num;
      f->piece_ms = (size_t)a->num2;
      break;
    case FAKE_HANG:
      if (flush(f, c)) goto out;
      while (read_upto(f, c, &b, 1) == 1) {} /* whatever comes, until the peer hangs up */
      goto out;
    case FAKE_CLOSE: goto flush_out;
    case FAKE_CALL: {
      if (flush(f, c)) goto out;
      if (!f->o.hook) {
        mismatch(f, a->file, a->line, "'call %s' but the test gave no hook", a->name);
        goto out;
      }
      uint32_t hr = f->o.hook(a->name, f->last, f->last_len, f->o.ud);
      if (hr) {
        uint8_t e[24] = "DOTNET_IPC_V1";
        e[14] = 24, e[16] = 0xff, e[17] = 0xff;
        for (int k = 0; k < 4; k++) e[20 + k] = (uint8_t)(hr >> (8 * k));
        struct fake_action err = {.op = FAKE_SEND, .bytes = e, .n = sizeof e};
        queue(f, &err);
        goto flush_out;
      }
      break;
    }
    }
  }
flush_out:
  flush(f, c);
out:
  __atomic_store_n(&f->playing, 0, __ATOMIC_SEQ_CST);
}

/* The `on` section for the request in f->last, or NULL. */
static const struct fake_section *dispatch(struct fake_ipc *f) {
  if (f->last_len < 20) return NULL;
  for (size_t i = 0; i < f->c->nsecs; i++) {
    const struct fake_section *s = &f->c->secs[i];
    if (byte_matches(s->set, f->last[16]) && byte_matches(s->id, f->last[17])) return s;
  }
  return NULL;
}

/* Accepts the next connection; -1 when stopped. */
static int next_connection(struct fake_ipc *f) {
  for (;;) {
    if (wait_for(f, f->lfd, -1) != READY) return -1;
    int c = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c >= 0) return c;
    if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) return -1;
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
    if (waited >= DIAL_MS || wait_for(f, -1, 20) == STOPPED) {
      mismatch(f, s->file, s->line, "cannot dial '%s': %s", f->o.socket, strerror(e));
      return -1;
    }
  }
}

static void serve(struct fake_ipc *f) {
  if (f->c->on) {
    for (size_t conn = 1;; conn++) {
      int c = next_connection(f);
      if (c < 0) return;
      if (read_request(f, c)) { /* a connection closed before a request (a probe) is let go */
        const struct fake_section *s = dispatch(f);
        if (s)
          play(f, c, s, conn);
        else
          mismatch(f, 0, 0, "connection %zu: no 'on' section for request %02x %02x", conn,
                   f->last_len >= 18 ? f->last[16] : 0, f->last_len >= 18 ? f->last[17] : 0);
      }
      close(c);
    }
  }
  for (size_t i = 0; i < f->c->nsecs; i++) {
    const struct fake_section *s = &f->c->secs[i];
    int c = f->o.dial ? dial(f, s) : next_connection(f);
    if (c < 0) return;
    f->played++;
    play(f, c, s, i + 1);
    close(c);
  }
}

static void *thread_main(void *arg) {
  struct fake_ipc *f = arg;
  serve(f);
  __atomic_store_n(&f->finished, 1, __ATOMIC_SEQ_CST);
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
    /* a connection being played ends by itself once the client is done: give it a moment; a
     * fake waiting for a connection that no client makes is stopped at once */
    int stuck = 0;
    for (int waited = 0; !__atomic_load_n(&f->finished, __ATOMIC_SEQ_CST); waited += 5) {
      if (!__atomic_load_n(&f->playing, __ATOMIC_SEQ_CST)) break;
      if (waited >= STOP_GRACE_MS) {
        stuck = 1;
        break;
      }
      struct timespec ms5 = {0, 5000000};
      nanosleep(&ms5, NULL);
    }
    if (write(f->stop[1], "x", 1) < 0) {}
    pthread_join(f->thread, NULL);
    if (stuck && !f->failed)
      mismatch(f, f->at->file, f->at->line, "connection still playing when the test ended (%d s later)", STOP_GRACE_MS / 1000);
  }
  if (f->running && !f->o.runtime && !f->c->on && !f->failed && f->played < f->c->nsecs)
    mismatch(f, f->c->secs[f->played].file, f->c->secs[f->played].line, "connection %zu of %zu never came", f->played + 1, f->c->nsecs);
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
  free(f->out);
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
