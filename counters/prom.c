/* Counter values in the Prometheus text format (see dnt-counters.h for the naming rules). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-counters.h"

/* Appends s to out[*o] sanitised as a snake_case metric-name word: [a-z0-9_:], other runs -> '_',
 * camelCase split ("requestCount" -> "request_count") and lowered, as Prometheus names are. */
static void put_word(char *out, size_t cap, size_t *o, const char *s) {
  for (; *s && *o + 1 < cap; s++) {
    unsigned char ch = (unsigned char)*s;
    int ok = ch < 0x80 && (isalnum(ch) || ch == '_' || ch == ':');
    if (!ok && (*o == 0 || out[*o - 1] == '_')) continue;
    if (ok && ch == '_' && *o > 0 && out[*o - 1] == '_') continue; /* no "__" */
    if (ok && isupper(ch) && *o > 0 && (islower((unsigned char)out[*o - 1]) || isdigit((unsigned char)out[*o - 1])) &&
        *o + 2 < cap)
      out[(*o)++] = '_';
    out[(*o)++] = ok ? (char)tolower(ch) : '_';
  }
  out[*o] = '\0';
}

/* The units Prometheus wants in base units (seconds, bytes): the word appended to the name, the
 * factor a value is multiplied (mul) or divided (div) by, and the spellings of the same unit a
 * name may already end with. Dividing by an exact power of ten rounds once, so 34.8125 ms
 * becomes exactly 0.0348125 s. EventCounters' MB is 1,000,000 bytes (RuntimeEventSource divides
 * Environment.WorkingSet by 1_000_000). */
struct unit_rule {
  const char *unit, *word;
  double mul, div;
  const char *alias[3];
};

static const struct unit_rule unit_rules[] = {
    {"By", "bytes", 1, 1, {"bytes", "b"}},
    {"B", "bytes", 1, 1, {"bytes", "b"}},
    {"KB", "bytes", 1000, 1, {"kb", "kilobytes"}},
    {"kB", "bytes", 1000, 1, {"kb", "kilobytes"}},
    {"kBy", "bytes", 1000, 1, {"kb", "kilobytes"}},
    {"MB", "bytes", 1e6, 1, {"mb", "megabytes"}},
    {"MBy", "bytes", 1e6, 1, {"mb", "megabytes"}},
    {"GB", "bytes", 1e9, 1, {"gb", "gigabytes"}},
    {"KiBy", "bytes", 1024, 1, {"kib", "kibibytes"}},
    {"MiBy", "bytes", 1048576, 1, {"mib", "mebibytes"}},
    {"GiBy", "bytes", 1073741824, 1, {"gib", "gibibytes"}},
    {"s", "seconds", 1, 1, {"seconds", "s", "sec"}},
    {"ms", "seconds", 1, 1e3, {"ms", "milliseconds"}},
    {"us", "seconds", 1, 1e6, {"us", "microseconds"}},
    {"\xc2\xb5s", "seconds", 1, 1e6, {"us", "microseconds"}},
    {"ns", "seconds", 1, 1e9, {"ns", "nanoseconds"}},
    {"min", "seconds", 60, 1, {"min", "minutes"}},
    {"h", "seconds", 3600, 1, {"h", "hours"}},
    {"%", "percent", 1, 1, {"percent"}},
    {"1", "ratio", 1, 1, {"ratio"}},
};

static const struct unit_rule *unit_rule(const char *unit) {
  for (size_t i = 0; i < sizeof unit_rules / sizeof unit_rules[0]; i++)
    if (strcmp(unit, unit_rules[i].unit) == 0) return &unit_rules[i];
  return NULL;
}

/* The word of a unit without a rule: sanitised, '/' read as "per" ("kB/s" -> "kb_per_s"); none
 * for an annotation in braces ({request}). */
static const char *unit_word(const char *unit, char *buf, size_t cap) {
  const struct unit_rule *u = unit_rule(unit);
  if (u) return u->word;
  if (!unit[0] || unit[0] == '{') return "";
  size_t o = 0;
  for (const char *p = unit; *p && o + 1 < cap; p++) {
    char one[2] = {(char)tolower((unsigned char)*p), '\0'};
    put_word(buf, cap, &o, *p == '/' ? "_per_" : one);
  }
  while (o && buf[o - 1] == '_') buf[--o] = '\0';
  return buf;
}

/* The length of s without its last word when that word is tail ("a_b_ms", "ms" -> 3); 0 when not. */
static size_t strip_word(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  if (!t || n <= t || strcmp(s + n - t, tail) != 0 || s[n - t - 1] != '_') return 0;
  return n - t - 1;
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
  if (!u[0]) return out;
  /* a name that already ends with the unit says it once, in the base unit: "time_ms" (ms) ->
   * "time_seconds", "pause_time_seconds" (s) stays */
  const struct unit_rule *rule = unit_rule(unit);
  size_t keep = strip_word(out, u);
  for (size_t i = 0; rule && !keep && i < 3 && rule->alias[i]; i++) keep = strip_word(out, rule->alias[i]);
  if (keep) out[o = keep] = '\0';
  put_word(out, cap, &o, "_");
  put_word(out, cap, &o, u);
  return out;
}

double dnt_prom_unit_scale(const char *unit, double v) {
  const struct unit_rule *u = unit_rule(unit);
  if (!u || (u->mul == 1 && u->div == 1)) return v;
  return u->div != 1 ? v / u->div : v * u->mul;
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

/* Whether labels (`a="x",b="y"`) has key. */
static int has_label(const char *labels, const char *key) {
  size_t n = strlen(key);
  for (const char *p = labels; p && *p;) {
    if (strncmp(p, key, n) == 0 && p[n] == '=') return 1;
    /* the next pair: past this value's closing quote (escaped quotes skipped) */
    const char *q = strchr(p, '"');
    if (!q) break;
    for (q++; *q && *q != '"'; q++)
      if (*q == '\\' && q[1]) q++;
    if (!*q) break;
    p = q[1] == ',' ? q + 2 : q + 1;
  }
  return 0;
}

/* provider="X", the target's labels (extra, may be NULL), then each k=v of tags (comma-separated,
 * the key up to the first '='; one the target's labels already have is left out). */
static char *make_labels(const struct dnt_counter_row *r, const char *extra) {
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&buf, &len);
  if (!fp) return NULL;
  fputs("provider=\"", fp);
  put_label_value(fp, r->provider, strlen(r->provider));
  fputc('"', fp);
  if (extra && *extra) fprintf(fp, ",%s", extra);
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
    if (o && strcmp(key, "provider") != 0 && strcmp(key, "quantile") != 0 && !has_label(extra, key)) {
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

/* Does name end with a suffix that Prometheus reserves for another type? `_total` for counters,
 * `_count`/`_sum` for summaries and histograms, `_bucket` for histograms. */
static int reserved_tail(const char *name, const char *type) {
  static const char *const tails[] = {"total", "count", "sum", "bucket"};
  int summary = strcmp(type, "summary") == 0;
  for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
    if (summary && (i == 1 || i == 2)) continue;
    if (strip_word(name, tails[i])) return 1;
  }
  return 0;
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
  const char *tail = "";
  if (r->kind == DNT_COUNTER_SUM)
    tail = strip_word(base, "total") ? "" : "_total"; /* `requests.total` -> requests_total, once */
  else if (reserved_tail(base, s->type))
    tail = "_current"; /* dotnet.assembly.count, a level -> dotnet_assembly_count_current */
  snprintf(s->family, sizeof s->family, "%s%s", base, tail);
}

static void put_number(FILE *fp, double v) {
  if (v != v) {
    fputs("NaN", fp);
  } else if (isinf(v)) {
    fputs(v > 0 ? "+Inf" : "-Inf", fp);
  } else {
    char buf[64];
    /* the shortest of 15, 16 and 17 digits that reads back as v */
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.16g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    fputs(buf, fp);
  }
}

static void put_help(FILE *fp, const struct series *s) {
  const struct dnt_counter_row *r = s->row;
  fprintf(fp, "# HELP %s ", s->family);
  char text[600];
  const struct unit_rule *u = unit_rule(r->unit);
  int converted = u && (u->mul != 1 || u->div != 1);
  snprintf(text, sizeof text, "%s (%s%s%s%s%s)", r->display_name, r->provider, r->unit[0] ? ", " : "", r->unit,
           converted ? ", exported in " : "", converted ? u->word : "");
  for (const char *p = text; *p; p++) {
    if (*p == '\\') fputs("\\\\", fp);
    else if (*p == '\n') fputs("\\n", fp);
    else fputc(*p, fp);
  }
  fprintf(fp, "\n# TYPE %s %s\n", s->family, s->type);
}

long dnt_counters_prom_write(FILE *fp, const struct dnt_counter_table *t) {
  return dnt_counters_prom_write_many(fp, &t, NULL, 1);
}

char *dnt_prom_label_pairs(const char *const *kv, size_t n) {
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&buf, &len);
  if (!fp) return NULL;
  for (size_t i = 0; i < n; i++) {
    char key[128];
    size_t o = 0;
    const char *k = kv[2 * i], *v = kv[2 * i + 1];
    if (isdigit((unsigned char)k[0]) || (k[0] == '_' && k[1] == '_')) key[o++] = 'x';
    put_word(key, sizeof key, &o, k);
    fprintf(fp, "%s%s=\"", i ? "," : "", key);
    put_label_value(fp, v, strlen(v));
    fputc('"', fp);
  }
  if (fclose(fp) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

long dnt_counters_prom_write_many(FILE *fp, const struct dnt_counter_table *const *tables, const char *const *labels,
                                  size_t ntables) {
  long written = 0;
  struct dnt_counter_table all = {0}; /* only its n: the series of every table */
  for (size_t k = 0; k < ntables; k++) all.n += tables[k]->n;
  const struct dnt_counter_table *t = &all;
  struct series *v = t->n ? calloc(t->n, sizeof *v) : NULL;
  if (t->n && !v) return -ENOMEM;
  for (size_t k = 0, i = 0; k < ntables; k++)
    for (size_t r = 0; r < tables[k]->n; r++, i++) {
      v[i].row = &tables[k]->v[r];
      if (!(v[i].labels = make_labels(v[i].row, labels ? labels[k] : NULL))) {
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
    double x = s->row->kind == DNT_COUNTER_SUM ? s->row->total + s->row->total_c : s->row->value;
    put_number(fp, dnt_prom_unit_scale(s->row->unit, x));
    fputc('\n', fp);
    written++;
    /* a summary's series ends with its _sum and _count, after its last quantile */
    const struct series *next = i + 1 < t->n ? &v[i + 1] : NULL;
    int last_of_series = !next || strcmp(next->family, s->family) != 0 || strcmp(next->labels, s->labels) != 0;
    if (s->row->quantile >= 0 && s->row->has_hist && last_of_series) {
      fprintf(fp, "%s_sum{%s} ", s->family, s->labels);
      put_number(fp, dnt_prom_unit_scale(s->row->unit, s->row->hist_sum));
      fprintf(fp, "\n%s_count{%s} ", s->family, s->labels);
      put_number(fp, s->row->hist_count);
      fputc('\n', fp);
      written += 2;
    }
  }
out:
  for (size_t i = 0; i < t->n; i++) free(v[i].labels);
  free(v);
  return written;
}
