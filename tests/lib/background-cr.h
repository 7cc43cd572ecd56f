/* Criterion glue: dntrace running in the background while a test waits for what it prints, and
 * the sample's stdout read line by line as it comes. A test waits for the things themselves (a
 * line printed, a session running), never for a fixed time; only a hang reaches DNT_HANG_MS. */
#ifndef DNT_TEST_BACKGROUND_CR_H
#define DNT_TEST_BACKGROUND_CR_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

/* dntrace running in the background, its stdout and stderr in files of a folder of its own: a test
 * waits for what it prints (its session runs), and ends it as a user would (Ctrl+C) once the
 * sample has done, while it recorded, what the test needs. */
struct bg {
  pid_t pid;
  int status; /* as dnt_run's: the exit code, 128 + signal, or -1 while it runs (or hung) */
  char dir[32], out[64], err[64];
};

static inline int bg_decode(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

/* Starts `dntrace ARGS...` (args NULL-terminated). */
static inline void bg_start(struct bg *b, const char *const *args) {
  memset(b, 0, sizeof *b);
  b->status = -1;
  snprintf(b->dir, sizeof b->dir, "/tmp/dnt-bg-XXXXXX");
  cr_assert(mkdtemp(b->dir));
  snprintf(b->out, sizeof b->out, "%s/out", b->dir);
  snprintf(b->err, sizeof b->err, "%s/err", b->dir);
  char *argv[32];
  int n = 0;
  argv[n++] = (char *)dnt_bin();
  for (; *args && n < 31; args++) argv[n++] = (char *)*args;
  argv[n] = NULL;
  b->pid = fork();
  cr_assert_geq(b->pid, 0);
  if (b->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that fails leaves nothing running */
    int o = open(b->out, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(b->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) _exit(127);
    dup2(o, 1), dup2(e, 2), dup2(in, 0);
    execv(argv[0], argv);
    _exit(127);
  }
}

/* The text of the file at path (malloc'ed), "" when there is none. */
static inline char *slurp(const char *path) {
  FILE *fp = fopen(path, "r");
  char *text = NULL;
  size_t len = 0;
  if (fp) {
    FILE *mem = open_memstream(&text, &len);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) fwrite(buf, 1, n, mem);
    fclose(mem);
    fclose(fp);
  }
  return text ? text : strdup("");
}

/* Waits for dntrace to print text (on stdout or stderr): 1; 0 when it exited first (b->status
 * says how) or only a hang could take this long (DNT_HANG_MS). */
static inline int bg_wait_text(struct bg *b, const char *text) {
  for (int i = 0; i < DNT_HANG_MS / 10; i++) {
    char *o = slurp(b->out), *e = slurp(b->err);
    int hit = strstr(o, text) || strstr(e, text);
    free(o);
    free(e);
    if (hit) return 1;
    int st;
    if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
      b->status = bg_decode(st);
      b->pid = 0;
      return 0;
    }
    usleep(10 * 1000);
  }
  return 0;
}

/* Sends sig (0: none) and waits for dntrace to exit, killing it after DNT_HANG_MS (a hang):
 * its status, as dnt_run's. SIGINT (Ctrl+C) may come as soon as dntrace has said its session
 * runs: it handles the signal before it says so (test-gc's ctrl_c_on_the_recording_line). */
static inline int bg_finish(struct bg *b, int sig) {
  if (b->pid <= 0) return b->status;
  int st, i, exited = 0;
  if (sig) kill(b->pid, sig);
  for (i = 0; !exited && i < DNT_HANG_MS / 10; i++)
    if (!(exited = waitpid(b->pid, &st, WNOHANG) == b->pid)) usleep(10 * 1000);
  if (exited) {
    b->status = bg_decode(st);
  } else {
    kill(b->pid, SIGKILL);
    waitpid(b->pid, NULL, 0);
    b->status = -1;
  }
  b->pid = 0;
  return b->status;
}

static inline void bg_remove(struct bg *b) {
  if (b->pid > 0) bg_finish(b, SIGKILL);
  unlink(b->out);
  unlink(b->err);
  rmdir(b->dir);
}

/* The sample's stdout, line by line as it comes. */
struct lines {
  int fd, eof;
  size_t len;
  char buf[8192];
};

/* Calls fn with each whole line the sample printed so far, without waiting: 0 once its stdout is
 * closed, else 1. */
static inline int lines_read(struct lines *l, void (*fn)(void *ud, const char *line), void *ud) {
  while (!l->eof) {
    struct pollfd p = {l->fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) break;
    ssize_t n = read(l->fd, l->buf + l->len, sizeof l->buf - 1 - l->len);
    if (n <= 0) {
      l->eof = 1;
      break;
    }
    l->len += (size_t)n;
    l->buf[l->len] = '\0';
    char *line = l->buf, *nl;
    while ((nl = strchr(line, '\n'))) {
      *nl = '\0';
      fn(ud, line);
      line = nl + 1;
    }
    l->len -= (size_t)(line - l->buf);
    memmove(l->buf, line, l->len + 1);
    if (l->len == sizeof l->buf - 1) l->len = 0; /* a line too long to be one of ours */
  }
  return !l->eof;
}

/* Reads the sample's lines into fn until done(ud): 1; 0 when its stdout closed first, or only a
 * hang could take this long (DNT_HANG_MS). */
static inline int lines_until(struct lines *l, void (*fn)(void *ud, const char *line), void *ud, int (*done)(void *ud)) {
  for (int i = 0; i < DNT_HANG_MS / 10; i++) {
    int open_ = lines_read(l, fn, ud);
    if (done(ud)) return 1;
    if (!open_) return 0;
    usleep(10 * 1000);
  }
  return 0;
}

#endif
