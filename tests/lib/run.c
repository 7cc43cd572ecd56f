#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

const char *dnt_bin(void) {
  const char *b = getenv("DNT_BIN");
  return b && *b ? b : "./dntrace";
}

static double now(void) {
  struct timespec ts;
  /* timing: the run's ceiling (>= DNT_HANG_MS) and its printed wall time */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct sink {
  char *buf;
  size_t len, cap;
};

static void sink_read(struct sink *s, int fd, int *open_fd) {
  if (s->len + 4096 + 1 > s->cap) {
    s->cap = (s->cap ? s->cap * 2 : 8192) + 4096;
    s->buf = realloc(s->buf, s->cap);
    if (!s->buf) abort();
  }
  ssize_t n = read(fd, s->buf + s->len, s->cap - s->len - 1);
  if (n > 0)
    s->len += (size_t)n;
  else if (n == 0 || (errno != EINTR && errno != EAGAIN))
    *open_fd = 0;
  s->buf[s->len] = '\0';
}

int dnt_run_argv(struct dnt_run *r, char *const argv[], const char *const *env, int timeout_ms) {
  memset(r, 0, sizeof *r);
  r->status = -1;
  timeout_ms = dnt_ceiling_ms(timeout_ms);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) return -1;
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    for (const char *const *e = env; e && *e; e++) putenv((char *)*e);
    execv(argv[0], argv);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  struct sink so = {0}, se = {0};
  int out_open = 1, err_open = 1, timed_out = 0;
  while (out_open || err_open) {
    struct pollfd p[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    int left = timeout_ms - (int)((now() - t0) * 1000);
    if (left <= 0) {
      timed_out = 1;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(p, 2, left) < 0 && errno != EINTR) break;
    if (p[0].revents) sink_read(&so, out[0], &out_open);
    if (p[1].revents) sink_read(&se, err[0], &err_open);
  }
  close(out[0]);
  close(err[0]);
  int st;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {}
  r->maxrss_kb = ru.ru_maxrss;
  r->seconds = now() - t0;
  r->out = so.buf ? so.buf : strdup("");
  r->err = se.buf ? se.buf : strdup("");
  if (timed_out)
    r->status = -1;
  else if (WIFEXITED(st))
    r->status = WEXITSTATUS(st);
  else if (WIFSIGNALED(st))
    r->status = 128 + WTERMSIG(st);
  return r->status;
}

int dnt_run_dntrace(struct dnt_run *r, ...) {
  char *argv[64];
  int n = 0;
  argv[n++] = (char *)dnt_bin();
  va_list ap;
  va_start(ap, r);
  const char *a;
  while (n < 63 && (a = va_arg(ap, const char *)) != NULL) argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;
  return dnt_run_argv(r, argv, NULL, DNT_HANG_MS);
}

void dnt_run_free(struct dnt_run *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

int dnt_spawn_sleeper_as(unsigned uid, int new_mount_ns) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return -1;
  pid_t child = fork();
  if (child < 0) {
    close(ready[0]);
    close(ready[1]);
    return -1;
  }
  if (child == 0) {
    close(ready[0]);
    if (new_mount_ns && unshare(CLONE_NEWNS) != 0) _exit(1);
    if (setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0) _exit(1);
    execl("/bin/sleep", "sleep", "600", (char *)NULL);
    _exit(1);
  }
  close(ready[1]);
  char byte;
  ssize_t n;
  while ((n = read(ready[0], &byte, 1)) < 0 && errno == EINTR) {
  }
  close(ready[0]);
  /* EOF came with the exec, or with the child's death: tell them apart */
  int status;
  if (waitpid(child, &status, WNOHANG) != 0) return -1;
  return (int)child;
}
