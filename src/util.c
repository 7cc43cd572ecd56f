#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "builtin.h"
#include "dnt-trace.h"
#include "util.h"

static void vreport(const char *prefix, const char *fmt, va_list ap) {
  fflush(stdout);
  fprintf(stderr, "dntrace: %s", prefix);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

int dnt_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("error: ", fmt, ap);
  va_end(ap);
  return -1;
}

void dnt_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("warning: ", fmt, ap);
  va_end(ap);
}

void dnt_die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("fatal: ", fmt, ap);
  va_end(ap);
  exit(code);
}

void *dnt_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) dnt_die(DNT_EXIT_FAILURE, "out of memory allocating %zu bytes", n);
  return p;
}

void *dnt_xrealloc(void *p, size_t n) {
  void *grown = realloc(p, n ? n : 1);
  if (!grown) dnt_die(DNT_EXIT_FAILURE, "out of memory allocating %zu bytes", n);
  return grown;
}

char *dnt_xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(dnt_xmalloc(n), s, n);
}

uint64_t dnt_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

char *dnt_safe_text(const char *s) {
  if (!s) return NULL;
  size_t n = dnt_text_escape(NULL, 0, s) + 1;
  char *out = dnt_xmalloc(n);
  dnt_text_escape(out, n, s);
  return out;
}

int dnt_parse_pid(const char *s) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v <= 0 || v > 0x3fffffff) return -1;
  return (int)v;
}

int dnt_opt_pid(const char *arg) {
  int pid = dnt_parse_pid(arg);
  if (pid < 0) dnt_error("'%s' is not a process id", arg);
  return pid;
}

uint64_t dnt_parse_duration(const char *s) {
  unsigned long long f[4];
  char tail;
  if (sscanf(s, "%llu:%llu:%llu:%llu%c", &f[0], &f[1], &f[2], &f[3], &tail) == 4 && f[1] < 24 && f[2] < 60 &&
      f[3] < 60)
    return ((f[0] * 24 + f[1]) * 3600 + f[2] * 60 + f[3]) * 1000;
  if (sscanf(s, "%llu:%llu:%llu%c", &f[0], &f[1], &f[2], &tail) == 3 && f[1] < 60 && f[2] < 60)
    return (f[0] * 3600 + f[1] * 60 + f[2]) * 1000;
  if (sscanf(s, "%llu:%llu%c", &f[0], &f[1], &tail) == 2 && f[1] < 60) /* hh:mm, as .NET's TimeSpan reads it */
    return (f[0] * 3600 + f[1] * 60) * 1000;
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v > 0) || v > 1e9) return 0;
  double mult = *end == '\0' || strcmp(end, "s") == 0 ? 1
                : strcmp(end, "ms") == 0                ? 0.001
                : strcmp(end, "m") == 0                 ? 60
                : strcmp(end, "h") == 0                 ? 3600
                                                        : -1;
  if (mult < 0) return 0;
  return (uint64_t)(v * mult * 1000);
}

int dnt_stdout_closed(void) {
  struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLERR); /* a pipe whose reader is gone */
}

int dnt_finish_stdout(void) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    int e = errno;
    if (e == EPIPE || dnt_stdout_closed()) return DNT_EXIT_OK; /* `dntrace ps | head` is not an error */
    fprintf(stderr, "dntrace: error: cannot write to standard output: %s\n", strerror(e ? e : EIO));
    return DNT_EXIT_FAILURE;
  }
  return DNT_EXIT_OK;
}

int dnt_parse_count(const char *opt, const char *arg, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(arg, &end, 10);
  if (end == arg || *end || errno || v <= 0 || v > max) return dnt_error("%s: '%s' is not a count", opt, arg);
  *out = v;
  return 0;
}

/* Levenshtein distance of a and b, or more than limit (then limit + 1). */
static size_t distance(const char *a, const char *b, size_t limit) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return limit + 1;
  size_t prev[65], cur[65];
  for (size_t j = 0; j <= lb; j++) prev[j] = j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    size_t best = cur[0];
    for (size_t j = 1; j <= lb; j++) {
      size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
      /* a swap of two neighbours counts as one mistake, as people make it */
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev[j - 2] + 1 < cur[j])
        cur[j] = prev[j - 2] + 1;
      if (cur[j] < best) best = cur[j];
    }
    if (best > limit) return limit + 1;
    memcpy(prev, cur, (lb + 1) * sizeof *prev);
  }
  return prev[lb];
}

const char *dnt_nearest(const char *word, const char *const *candidates, size_t n) {
  /* close enough to be a slip: 1 mistake in a short word, 2 in a longer one */
  size_t limit = strlen(word) <= 4 ? 1 : 2, best = limit + 1;
  const char *found = NULL;
  for (size_t i = 0; i < n; i++) {
    if (!candidates[i]) continue;
    size_t d = distance(word, candidates[i], limit);
    if (d < best) {
      best = d;
      found = candidates[i];
    }
  }
  return found;
}
