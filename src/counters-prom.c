/* Counter values in the Prometheus text format (see counters-prom.h for the naming rules). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "counters-prom.h"

/* Appends s to out[*o] sanitised as a metric-name word: [a-zA-Z0-9_:], other runs -> '_'. */
static void put_word(char *out, size_t cap, size_t *o, const char *s) {
  for (; *s && *o + 1 < cap; s++) {
    unsigned char ch = (unsigned char)*s;
    int ok = isalnum(ch) || ch == '_' || ch == ':';
    if (!ok && (*o == 0 || out[*o - 1] == '_')) continue;
    if (ok && ch == '_' && *o > 0 && out[*o - 1] == '_') continue; /* no "__" */
    out[(*o)++] = ok && ch < 0x80 ? (char)ch : '_';
  }
  out[*o] = '\0';
}

static const char *unit_word(const char *unit, char *buf, size_t cap) {
  static const struct { const char *unit, *word; } words[] = {
      {"By", "bytes"}, {"B", "bytes"}, {"s", "seconds"}, {"ms", "milliseconds"}, {"us", "microseconds"},
      {"ns", "nanoseconds"}, {"%", "percent"}, {"MB", "megabytes"}, {"KB", "kilobytes"}, {"1", "ratio"},
  };
  if (!unit[0] || unit[0] == '{') return "";
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (strcmp(unit, words[i].unit) == 0) return words[i].word;
  size_t o = 0;
  put_word(buf, cap, &o, unit);
  while (o && buf[o - 1] == '_') buf[--o] = '\0';
  return buf;
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  return t && n >= t && strcmp(s + n - t, tail) == 0 && (n == t || s[n - t - 1] == '_');
}

const char *dnt_prom_family_base(const char *name, const char *unit, char *out, size_t cap) {
  size_t o = 0;
  out[0] = '\0';
  if (isdigit((unsigned char)name[0])) out[o++] = '_';
  put_word(out, cap, &o, name);
  while (o && out[o - 1] == '_') out[--o] = '\0';
  if (!o) put_word(out, cap, &o, "unnamed");
  char ubuf[64];
  const char *u = unit_word(unit, ubuf, sizeof ubuf);
  if (u[0] && !ends_with(out, u)) {
    put_word(out, cap, &o, "_");
    put_word(out, cap, &o, u);
  }
  return out;
}

/* ---- one series, ready to sort ---- */

struct series {
  const struct dnt_counter_row *row;
  char family[340]; /* the full name, `_total` included */
  const char *type; /* "counter", "gauge", "summary" */
  char *labels;     /* `provider="X",k="v"` without braces; quantile added when written */
};

static void put_label_value(FILE *fp, const char *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (v[i] == '\\') fputs("\\\\", fp);
    else if (v[i] == '"') fputs("\\\"", fp);
    else if (v[i] == '\n') fputs("\\n", fp);
    else fputc(v[i], fp);
  }
}

/* provider="X" then each k=v of tags (comma-separated, the key up to the first '='). */
static char *make_labels(const struct dnt_counter_row *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&buf, &len);
  if (!fp) return NULL;
  fputs("provider=\"", fp);
  put_label_value(fp, r->provider, strlen(r->provider));
  fputc('"', fp);
  for (const char *p = r->base_tags; *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    const char *eq = memchr(p, '=', n);
    size_t klen = eq ? (size_t)(eq - p) : n;
    char key[128], raw[128];
    snprintf(raw, sizeof raw, "%.*s", (int)(klen < sizeof raw ? klen : sizeof raw - 1), p);
    size_t o = 0;
    if (isdigit((unsigned char)raw[0]) || (raw[0] == '_' && raw[1] == '_')) key[o++] = 'x';
    put_word(key, sizeof key, &o, raw);
    if (o && strcmp(key, "provider") != 0 && strcmp(key, "quantile") != 0) {
      fprintf(fp, ",%s=\"", key);
      if (eq) put_label_value(fp, eq + 1, n - klen - 1);
      fputc('"', fp);
    }
    p += n;
    if (*p == ',') p++;
  }
  if (fclose(fp) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

static int by_family(const void *a, const void *b) {
  const struct series *x = a, *y = b;
  int c = strcmp(x->family, y->family);
  if (!c) c = strcmp(x->type, y->type);
  if (!c) c = strcmp(x->labels, y->labels);
  if (!c) c = (x->row->quantile > y->row->quantile) - (x->row->quantile < y->row->quantile);
  if (!c) c = (x->row > y->row) - (x->row < y->row); /* total order: qsort is not stable */
  return c;
}

static void name_series(struct series *s, int with_provider) {
  const struct dnt_counter_row *r = s->row;
  char base[320], prefixed[300];
  dnt_prom_family_base(r->name, r->unit, base, sizeof base);
  if (with_provider) {
    size_t o = 0;
    put_word(prefixed, sizeof prefixed, &o, r->provider);
    put_word(prefixed, sizeof prefixed, &o, "_");
    put_word(prefixed, sizeof prefixed, &o, base);
    snprintf(base, sizeof base, "%s", prefixed);
  }
  s->type = r->kind == DNT_COUNTER_SUM ? "counter" : r->quantile >= 0 ? "summary" : "gauge";
  snprintf(s->family, sizeof s->family, "%s%s", base, r->kind == DNT_COUNTER_SUM ? "_total" : "");
}

static void put_number(FILE *fp, double v) {
  if (v != v) {
    fputs("NaN", fp);
  } else if (isinf(v)) {
    fputs(v > 0 ? "+Inf" : "-Inf", fp);
  } else {
    char buf[64];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    fputs(buf, fp);
  }
}

static void put_help(FILE *fp, const struct series *s) {
  const struct dnt_counter_row *r = s->row;
  fprintf(fp, "# HELP %s ", s->family);
  char text[600];
  snprintf(text, sizeof text, "%s (%s%s%s)", r->display_name, r->provider, r->unit[0] ? ", " : "", r->unit);
  for (const char *p = text; *p; p++) {
    if (*p == '\\') fputs("\\\\", fp);
    else if (*p == '\n') fputs("\\n", fp);
    else fputc(*p, fp);
  }
  fprintf(fp, "\n# TYPE %s %s\n", s->family, s->type);
}

long dnt_counters_prom_write(FILE *fp, const struct dnt_counter_table *t) {
  long written = 0;
  struct series *v = t->n ? calloc(t->n, sizeof *v) : NULL;
  if (t->n && !v) return -ENOMEM;
  for (size_t i = 0; i < t->n; i++) {
    v[i].row = &t->v[i];
    if (!(v[i].labels = make_labels(&t->v[i]))) {
      written = -ENOMEM;
      goto out;
    }
    name_series(&v[i], 0);
  }
  if (t->n) qsort(v, t->n, sizeof *v, by_family);
  /* a family with two types: every type after the first moves under a provider-prefixed name */
  int renamed = 0;
  for (size_t i = 1; i < t->n; i++)
    if (strcmp(v[i].family, v[i - 1].family) == 0 && strcmp(v[i].type, v[i - 1].type) != 0) {
      for (size_t k = i; k < t->n && strcmp(v[k].family, v[i - 1].family) == 0; k++) {
        if (strcmp(v[k].type, v[i - 1].type) != 0) name_series(&v[k], 1), renamed = 1;
      }
    }
  if (renamed && t->n) qsort(v, t->n, sizeof *v, by_family);
  for (size_t i = 0; i < t->n; i++) {
    const struct series *s = &v[i], *prev = i ? &v[i - 1] : NULL;
    int same_family = prev && strcmp(prev->family, s->family) == 0;
    if (same_family && strcmp(prev->type, s->type) != 0) continue; /* still two types: keep the first */
    if (same_family && strcmp(prev->labels, s->labels) == 0 && prev->row->quantile == s->row->quantile)
      continue; /* two names that sanitise alike: one series */
    if (!same_family) put_help(fp, s);
    fprintf(fp, "%s{%s", s->family, s->labels);
    if (s->row->quantile >= 0) fprintf(fp, ",quantile=\"%g\"", s->row->quantile);
    fputs("} ", fp);
    put_number(fp, s->row->kind == DNT_COUNTER_SUM ? s->row->total : s->row->value);
    fputc('\n', fp);
    written++;
  }
out:
  for (size_t i = 0; i < t->n; i++) free(v[i].labels);
  free(v);
  return written;
}
