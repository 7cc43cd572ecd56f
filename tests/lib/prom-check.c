/* A strict checker of the Prometheus text format, for the tests (prom-check.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "prom-check.h"

#define MAX_FAMILIES 4096
#define MAX_SERIES 65536

struct family {
  char name[256];
  char type[16]; /* "" when no TYPE line */
  int help, samples, closed;
};

struct state {
  struct family fam[MAX_FAMILIES];
  size_t nfam;
  struct family *current; /* the family whose samples come now */
  char **series;          /* "name{sorted labels}" seen so far */
  size_t nseries;
  char *err;
  size_t errlen;
  int line;
};

static int fail(struct state *s, const char *why, const char *detail) {
  snprintf(s->err, s->errlen, "line %d: %s%s%s", s->line, why, detail ? ": " : "", detail ? detail : "");
  return -1;
}

static int is_name_start(int c) { return isalpha(c) || c == '_' || c == ':'; }
static int is_name_char(int c) { return isalnum(c) || c == '_' || c == ':'; }

/* A metric name at *p; copies it into out and advances. 0 or -1. */
static int read_name(const char **p, char *out, size_t cap, int label) {
  const char *q = *p;
  if (!(label ? (isalpha((unsigned char)*q) || *q == '_') : is_name_start((unsigned char)*q))) return -1;
  size_t n = 0;
  while (label ? (isalnum((unsigned char)*q) || *q == '_') : is_name_char((unsigned char)*q)) {
    if (n + 1 >= cap) return -1;
    out[n++] = *q++;
  }
  out[n] = '\0';
  *p = q;
  return 0;
}

/* Go's ParseFloat as Prometheus uses it, without hex: [+-]digits[.digits][e[+-]digits] or
 * NaN / [+-]Inf. The whole token must be consumed. */
static int valid_number(const char *t) {
  if (strcmp(t, "NaN") == 0 || strcmp(t, "+Inf") == 0 || strcmp(t, "-Inf") == 0 || strcmp(t, "Inf") == 0) return 1;
  const char *p = t;
  if (*p == '+' || *p == '-') p++;
  int digits = 0;
  while (isdigit((unsigned char)*p)) p++, digits++;
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p)) p++, digits++;
  }
  if (!digits) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
  }
  return *p == '\0';
}

static struct family *find_family(struct state *s, const char *name) {
  for (size_t i = 0; i < s->nfam; i++)
    if (strcmp(s->fam[i].name, name) == 0) return &s->fam[i];
  return NULL;
}

static struct family *add_family(struct state *s, const char *name) {
  if (s->nfam == MAX_FAMILIES) return NULL;
  struct family *f = &s->fam[s->nfam++];
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  return f;
}

static int has_tail(const char *name, const char *tail) {
  size_t n = strlen(name), t = strlen(tail);
  return n > t && strcmp(name + n - t, tail) == 0;
}

/* The naming rules of Prometheus's linter (promtool check metrics) for a typed family: suffixes
 * kept for other types, base units, snake_case. */
static int naming(struct state *s, const struct family *f) {
  static const char *const not_base[] = {"milliseconds", "microseconds", "nanoseconds", "minutes", "hours",
                                         "kilobytes",    "megabytes",    "gigabytes",   "bits"};
  const char *n = f->name, *t = f->type;
  int counter = !strcmp(t, "counter"), summary = !strcmp(t, "summary"), histogram = !strcmp(t, "histogram");
  if (!strcmp(t, "untyped")) return 0;
  if (counter != has_tail(n, "_total")) return fail(s, counter ? "a counter not named *_total" : "a non-counter named *_total", n);
  if (!summary && !histogram && (has_tail(n, "_count") || has_tail(n, "_sum")))
    return fail(s, "a gauge or counter named *_count or *_sum", n);
  if (!histogram && has_tail(n, "_bucket")) return fail(s, "a non-histogram named *_bucket", n);
  for (const char *w = n; *w;) {
    size_t len = strcspn(w, "_");
    for (size_t i = 0; i < sizeof not_base / sizeof not_base[0]; i++)
      if (len == strlen(not_base[i]) && strncmp(w, not_base[i], len) == 0) return fail(s, "not a base unit", not_base[i]);
    w += len;
    if (*w) w++;
  }
  for (const char *c = n; c[0] && c[1]; c++)
    if (islower((unsigned char)c[0]) && isupper((unsigned char)c[1])) return fail(s, "a camelCase name", n);
  return 0;
}

static int comment(struct state *s, const char *line) {
  const char *p = line + 1;
  if (*p != ' ') return 0; /* "#..." is a plain comment */
  p++;
  int help = strncmp(p, "HELP ", 5) == 0, type = strncmp(p, "TYPE ", 5) == 0;
  if (!help && !type) return 0;
  p += 5;
  char name[256];
  if (read_name(&p, name, sizeof name, 0) < 0) return fail(s, "bad metric name in HELP/TYPE", line);
  if (*p != ' ' && !(help && *p == '\0')) return fail(s, "HELP/TYPE name not followed by a space", line);
  if (*p == ' ') p++;
  struct family *f = find_family(s, name);
  if (f && f->samples) return fail(s, "HELP/TYPE after the family's samples", name);
  if (!f && !(f = add_family(s, name))) return fail(s, "too many families", NULL);
  if (help) {
    if (f->help++) return fail(s, "a second HELP", name);
    for (const char *q = p; *q; q++)
      if (*q == '\\' && q[1] != '\\' && q[1] != 'n') return fail(s, "bad escape in HELP", line);
      else if (*q == '\\') q++;
    return 0;
  }
  if (f->type[0]) return fail(s, "a second TYPE", name);
  if (strcmp(p, "counter") && strcmp(p, "gauge") && strcmp(p, "summary") && strcmp(p, "histogram") &&
      strcmp(p, "untyped"))
    return fail(s, "unknown type", p);
  snprintf(f->type, sizeof f->type, "%s", p);
  return naming(s, f);
}

/* The family a sample name belongs to, given the TYPE lines seen: name_sum / name_count /
 * name_bucket belong to a summary or histogram `name` declared earlier. */
static struct family *family_of(struct state *s, const char *name, const char **suffix) {
  static const char *const tails[] = {"_sum", "_count", "_bucket"};
  *suffix = "";
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(name), t = strlen(tails[i]);
    if (n > t && strcmp(name + n - t, tails[i]) == 0) {
      char base[256];
      snprintf(base, sizeof base, "%.*s", (int)(n - t), name);
      struct family *f = find_family(s, base);
      if (f && (strcmp(f->type, "summary") == 0 || strcmp(f->type, "histogram") == 0)) {
        *suffix = tails[i];
        return f;
      }
    }
  }
  return find_family(s, name);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int sample(struct state *s, const char *line) {
  const char *p = line;
  char name[256], label[256], *labels[64];
  size_t nlabels = 0;
  int quantile = 0, le = 0, rc = -1;
  if (read_name(&p, name, sizeof name, 0) < 0) return fail(s, "bad metric name", line);
  if (*p == '{') {
    p++;
    while (*p != '}') {
      if (read_name(&p, label, sizeof label, 1) < 0) { fail(s, "bad label name", line); goto out; }
      if (strncmp(label, "__", 2) == 0) { fail(s, "reserved label name", label); goto out; }
      if (p[0] != '=' || p[1] != '"') { fail(s, "label without =\"value\"", line); goto out; }
      p += 2;
      const char *v = p;
      while (*p && *p != '"') {
        if (*p == '\\') {
          if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') { fail(s, "bad escape in a label value", line); goto out; }
          p++;
        }
        p++;
      }
      if (*p != '"') { fail(s, "unterminated label value", line); goto out; }
      quantile |= strcmp(label, "quantile") == 0;
      le |= strcmp(label, "le") == 0;
      if (nlabels == 64) { fail(s, "too many labels", line); goto out; }
      size_t n = strlen(label) + (size_t)(p - v) + 4;
      labels[nlabels] = malloc(n);
      snprintf(labels[nlabels++], n, "%s=\"%.*s\"", label, (int)(p - v), v);
      p++;
      if (*p == ',') p++;
      else if (*p != '}') { fail(s, "labels not separated by commas", line); goto out; }
    }
    p++;
  }
  if (*p != ' ') { fail(s, "no space before the value", line); goto out; }
  p++;
  char value[64];
  size_t vn = strcspn(p, " ");
  if (vn == 0 || vn >= sizeof value) { fail(s, "no value", line); goto out; }
  snprintf(value, sizeof value, "%.*s", (int)vn, p);
  if (!valid_number(value)) { fail(s, "not a number", value); goto out; }
  p += vn;
  if (*p == ' ') { /* a timestamp: an integer */
    p++;
    if (*p == '-') p++;
    if (!isdigit((unsigned char)*p)) { fail(s, "bad timestamp", line); goto out; }
    while (isdigit((unsigned char)*p)) p++;
  }
  if (*p) { fail(s, "text after the value", line); goto out; }
  qsort(labels, nlabels, sizeof *labels, cmp_str);
  for (size_t i = 1; i < nlabels; i++) {
    size_t k = strcspn(labels[i], "=");
    if (strncmp(labels[i], labels[i - 1], k) == 0 && labels[i - 1][k] == '=') {
      fail(s, "a label given twice", line);
      goto out;
    }
  }

  const char *suffix;
  struct family *f = family_of(s, name, &suffix);
  if (!f && !(f = add_family(s, name))) { fail(s, "too many families", NULL); goto out; }
  if (f != s->current) {
    if (f->closed) { fail(s, "the family's samples are not together", f->name); goto out; }
    if (s->current) s->current->closed = 1;
    s->current = f;
  }
  f->samples++;
  const char *type = f->type;
  if (strcmp(type, "counter") == 0 && !(strlen(name) > 6 && strcmp(name + strlen(name) - 6, "_total") == 0)) {
    fail(s, "a counter sample not named *_total", name);
    goto out;
  }
  if (strcmp(type, "summary") == 0 && !suffix[0] && !quantile) { fail(s, "a summary sample without quantile", line); goto out; }
  if (strcmp(type, "summary") == 0 && strcmp(suffix, "_bucket") == 0) { fail(s, "_bucket in a summary", line); goto out; }
  if (strcmp(type, "histogram") == 0 && (!suffix[0] || (!strcmp(suffix, "_bucket") && !le))) {
    fail(s, "a histogram sample that is not _bucket{le}, _sum or _count", line);
    goto out;
  }
  /* the series key: name and sorted labels */
  size_t klen = strlen(name) + 3;
  for (size_t i = 0; i < nlabels; i++) klen += strlen(labels[i]) + 1;
  char *key = malloc(klen);
  size_t o = (size_t)snprintf(key, klen, "%s{", name);
  for (size_t i = 0; i < nlabels; i++) o += (size_t)snprintf(key + o, klen - o, "%s,", labels[i]);
  snprintf(key + o, klen - o, "}");
  for (size_t i = 0; i < s->nseries; i++)
    if (strcmp(s->series[i], key) == 0) {
      free(key);
      fail(s, "a duplicate series", line);
      goto out;
    }
  if (s->nseries == MAX_SERIES) { free(key); fail(s, "too many series", NULL); goto out; }
  s->series[s->nseries++] = key;
  rc = 0;
out:
  for (size_t i = 0; i < nlabels; i++) free(labels[i]);
  return rc;
}

int prom_check(const char *text, size_t *samples, char *err, size_t errlen) {
  struct state *s = calloc(1, sizeof *s);
  if (!s) return snprintf(err, errlen, "out of memory"), -1;
  s->series = calloc(MAX_SERIES, sizeof *s->series);
  s->err = err;
  s->errlen = errlen;
  int rc = 0;
  size_t n = strlen(text);
  if (n && text[n - 1] != '\n') {
    s->line = 0;
    rc = fail(s, "the text does not end with a newline", NULL);
  }
  for (const char *p = text; !rc && *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    char *line = strndup(p, len);
    s->line++;
    if (strchr(line, '\r')) rc = fail(s, "a carriage return", NULL);
    else if (line[0] == '#') rc = comment(s, line);
    else if (line[0]) rc = sample(s, line);
    free(line);
    p += len + (nl ? 1 : 0);
  }
  if (samples) *samples = s->nseries;
  for (size_t i = 0; i < s->nseries; i++) free(s->series[i]);
  free(s->series);
  free(s);
  return rc;
}

int prom_value(const char *text, const char *series, double *v) {
  size_t n = strlen(series);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, series, n) == 0 && p[n] == ' ') {
      *v = strtod(p + n + 1, NULL);
      return 0;
    }
  }
  return -1;
}

int promtool_check(const char *text, const char *dir, char *out, size_t cap) {
  char path[300], cmd[700];
  out[0] = '\0';
  snprintf(path, sizeof path, "%s/scrape.txt", dir);
  FILE *fp = fopen(path, "w");
  if (!fp) {
    snprintf(out, cap, "cannot write %s", path);
    return -1;
  }
  fputs(text, fp);
  fclose(fp);
  snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' 2>&1", path);
  FILE *p = popen(cmd, "r");
  if (!p) {
    snprintf(out, cap, "cannot run promtool");
    return -1;
  }
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
