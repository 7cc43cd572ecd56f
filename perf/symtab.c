/* Code address ranges and their names (dnt-perf.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-perf.h"

#define MAX_LINE 8192
#define WALK_BACK 32 /* ranges that start before an address and may still hold it */

int dnt_symtab_add(struct dnt_symtab *t, uint64_t start, uint64_t size, const char *name) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 1024;
    struct dnt_symbol *grown = realloc(t->v, cap * sizeof *grown);
    if (!grown) return -ENOMEM;
    t->v = grown;
    t->cap = cap;
  }
  char *copy = strdup(name);
  if (!copy) return -ENOMEM;
  uint64_t end = start + size < start ? UINT64_MAX : start + size;
  t->v[t->n] = (struct dnt_symbol){start, end, (uint32_t)t->n, copy};
  t->n++;
  t->sorted = 0;
  return 0;
}

static int by_start(const void *a, const void *b) {
  const struct dnt_symbol *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

const char *dnt_symtab_find(struct dnt_symtab *t, uint64_t addr) {
  if (!t->n) return NULL;
  if (!t->sorted) {
    qsort(t->v, t->n, sizeof *t->v, by_start);
    t->sorted = 1;
  }
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->v[mid].start <= addr) lo = mid + 1;
    else hi = mid;
  }
  /* the closest start that still covers addr: a method inside a larger stub block wins */
  for (size_t i = lo, steps = 0; i > 0 && steps < WALK_BACK; i--, steps++)
    if (addr < t->v[i - 1].end) return t->v[i - 1].name;
  return NULL;
}

void dnt_symtab_release(struct dnt_symtab *t) {
  for (size_t i = 0; i < t->n; i++) free(t->v[i].name);
  free(t->v);
  memset(t, 0, sizeof *t);
}

static int hex_field(const char **s, uint64_t *out) {
  const char *q = *s;
  if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) q += 2;
  uint64_t v = 0;
  size_t n = 0;
  for (; isxdigit((unsigned char)*q); q++, n++) {
    if (n == 16) return -1;
    v = v << 4 | (uint64_t)(isdigit((unsigned char)*q) ? *q - '0' : tolower((unsigned char)*q) - 'a' + 10);
  }
  if (!n || *q != ' ') return -1;
  *s = q + 1;
  *out = v;
  return 0;
}

int dnt_perfmap_load(struct dnt_symtab *t, const char *path, size_t *bad) {
  FILE *fp = fopen(path, "re");
  if (!fp) return -errno;
  char *line = malloc(MAX_LINE);
  size_t bad_lines = 0;
  int rc = line ? 0 : -ENOMEM;
  while (!rc && fgets(line, MAX_LINE, fp)) {
    size_t n = strlen(line);
    if (n && line[n - 1] != '\n' && !feof(fp)) { /* too long: skip the rest of it */
      int ch;
      while ((ch = fgetc(fp)) != EOF && ch != '\n') {}
      bad_lines++;
      continue;
    }
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    const char *s = line;
    uint64_t start, size;
    if (hex_field(&s, &start) != 0 || hex_field(&s, &size) != 0 || !*s || size == 0) {
      bad_lines += n > 0;
      continue;
    }
    rc = dnt_symtab_add(t, start, size, s);
  }
  if (!rc && ferror(fp)) rc = -EIO;
  free(line);
  fclose(fp);
  if (bad) *bad = bad_lines;
  return rc;
}

const char *dnt_perfmap_frame_name(const char *raw, char *out, size_t cap) {
  if (strncmp(raw, "stub ", 5) == 0) {
    snprintf(out, cap, "[stub] %s", raw + 5);
    return out;
  }
  /* "RET [MODULE] NS.TYPE::METHOD(ARGS)[TIER]": the return type goes, the module leads */
  const char *open = strchr(raw, '[');
  const char *close = open ? strchr(open, ']') : NULL;
  if (!open || !close || close[1] != ' ') {
    snprintf(out, cap, "%s", raw);
    return out;
  }
  const char *method = close + 2;
  size_t mlen = strcspn(method, "(");
  size_t o = (size_t)snprintf(out, cap, "%.*s!", (int)(close - open - 1), open + 1);
  for (size_t i = 0; i < mlen && o + 1 < cap; i++) {
    if (method[i] == ':' && method[i + 1] == ':') {
      out[o++] = '.';
      i++;
    } else {
      out[o++] = method[i];
    }
  }
  if (o >= cap) o = cap - 1;
  out[o] = '\0';
  return out;
}
