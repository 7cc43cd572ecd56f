#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
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

void dnt_json_string(FILE *fp, const char *s) {
  fputc('"', fp);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", fp); break;
    case '\\': fputs("\\\\", fp); break;
    case '\n': fputs("\\n", fp); break;
    case '\r': fputs("\\r", fp); break;
    case '\t': fputs("\\t", fp); break;
    default:
      if (*p < 0x20)
        fprintf(fp, "\\u%04x", *p);
      else
        fputc(*p, fp);
    }
  }
  fputc('"', fp);
}

void dnt_print_usage(FILE *fp, const char *const *usage) {
  fprintf(fp, "usage: %s\n", usage[0]);
  if (!usage[1]) return;
  fprintf(fp, "\n%s\n", usage[1]);
  if (usage[2]) fputc('\n', fp);
  for (const char *const *l = usage + 2; *l; l++) fprintf(fp, "%s\n", *l);
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
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v > 0) || v > 1e9) return 0;
  double mult = *end == '\0' || strcmp(end, "s") == 0 ? 1 : strcmp(end, "m") == 0 ? 60 : strcmp(end, "h") == 0 ? 3600 : -1;
  if (mult < 0) return 0;
  return (uint64_t)(v * mult * 1000);
}

void dnt_shortopts(const struct option *opts, char *out, size_t cap) {
  size_t n = 0;
  out[n++] = ':';
  for (; opts->name && n + 3 < cap; opts++) {
    if (opts->flag || opts->val <= 0 || opts->val > 127) continue;
    out[n++] = (char)opts->val;
    if (opts->has_arg == required_argument) out[n++] = ':';
    if (opts->has_arg == optional_argument) {
      out[n++] = ':';
      out[n++] = ':';
    }
  }
  out[n] = '\0';
}

int dnt_usage_error(const char *cmd, int opt, int optopt, char **argv) {
  const char *arg = argv[optind - 1];
  if (opt == ':')
    dnt_error("option '%s' needs a value", arg);
  else if (optopt && optopt < 128 && optopt > ' ')
    dnt_error("unknown option '-%c'", optopt);
  else
    dnt_error("unknown option '%s'", arg);
  fprintf(stderr, "see 'dntrace %s --help'\n", cmd);
  return DNT_EXIT_USAGE;
}

int dnt_finish_stdout(void) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    int e = errno;
    if (e == EPIPE) return DNT_EXIT_OK; /* `dntrace ps | head` is not an error */
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
