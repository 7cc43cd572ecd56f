/* Counter names, numbers, CSV/JSON rows and the live table (dnt-counters.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dnt-counters.h"
#include "dnt-trace.h"

const char *dnt_counter_label(const char *display_name, const char *unit, int kind, double interval_s, char *out,
                              size_t cap) {
  if (kind == DNT_COUNTER_SUM)
    snprintf(out, cap, "%s (%s / %g sec)", display_name, unit[0] ? unit : "Count", interval_s > 0 ? interval_s : 1);
  else if (unit[0])
    snprintf(out, cap, "%s (%s)", display_name, unit);
  else
    snprintf(out, cap, "%s", display_name);
  return out;
}

/* The interval a rate is named by: the one the session asked for, as dotnet-counters names it,
 * not the one the runtime measured (0.997214 s, then 1.00417 s: one counter became a new CSV name,
 * and monitor's label changed, at every interval); without one, the measured one to two digits. */
static double named_interval(double asked_s, double measured_s) {
  if (asked_s > 0) return asked_s;
  if (measured_s <= 0) return 1;
  char digits[32];
  snprintf(digits, sizeof digits, "%.2g", measured_s);
  return atof(digits);
}

const char *dnt_counter_number(double v, int abbreviate, char *out, size_t cap) {
  if (v != v) return snprintf(out, cap, "NaN"), out;
  if (isinf(v)) return snprintf(out, cap, "%s", v < 0 ? "-Infinity" : "Infinity"), out;
  if (abbreviate && fabs(v) >= 1e8) return snprintf(out, cap, "%.4e", v), out;
  char digits[64];
  snprintf(digits, sizeof digits, "%.3f", fabs(v));
  char *dot = strchr(digits, '.');
  /* drop trailing zeros of the fraction, and the dot when nothing is left */
  size_t end = strlen(digits);
  while (end > (size_t)(dot - digits) + 1 && digits[end - 1] == '0') end--;
  if (end == (size_t)(dot - digits) + 1) end--;
  digits[end] = '\0';
  size_t int_len = (size_t)(dot - digits), o = 0;
  char buf[96];
  int negative = v < 0 && strcmp(digits, "0") != 0;
  if (negative) buf[o++] = '-';
  for (size_t i = 0; i < int_len; i++) {
    if (i && (int_len - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  snprintf(buf + o, sizeof buf - o, "%s", digits + int_len);
  snprintf(out, cap, "%s", buf);
  return out;
}

void dnt_counter_time(double t, char out[40]) {
  time_t s = (time_t)t; /* times are after 1970: the cast floors */
  int ms = (int)((t - (double)s) * 1000.0);
  if (ms < 0) ms = 0;
  if (ms > 999) ms = 999;
  struct tm tm;
  gmtime_r(&s, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(out, 40, "%s.%03d", base, ms);
}

/* The shortest of %.15g / %.17g that reads back exactly (145.1, not 145.09999999999999). */
static void print_number(FILE *fp, double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, fp);
}

static const char *counter_type(int kind) { return kind == DNT_COUNTER_SUM ? "Rate" : "Metric"; }

/* A CSV cell holding a comma, a quote or a line break is quoted. */
static void csv_cell(FILE *fp, const char *s) {
  if (!strpbrk(s, ",\"\n")) {
    fputs(s, fp);
    return;
  }
  fputc('"', fp);
  for (; *s; s++) {
    if (*s == '"') fputc('"', fp);
    fputc(*s, fp);
  }
  fputc('"', fp);
}

/* The cell `label[tags]`, the tags' commas written as semicolons (as dotnet-counters does), quoted
 * as csv_cell would quote the whole. */
static void csv_tagged_cell(FILE *fp, const char *label, const char *tags) {
  int quote = strpbrk(label, ",\"\n") || strpbrk(tags, "\"\n");
  if (quote) fputc('"', fp);
  for (const char *s = label; *s; s++) {
    if (quote && *s == '"') fputc('"', fp);
    fputc(*s, fp);
  }
  fputc('[', fp);
  for (const char *s = tags; *s; s++) {
    if (quote && *s == '"') fputc('"', fp);
    fputc(*s == ',' ? ';' : *s, fp);
  }
  fputc(']', fp);
  if (quote) fputc('"', fp);
}

void dnt_counter_csv_header(FILE *fp) { fputs("Timestamp,Provider,Counter Name,Counter Type,Mean/Increment\n", fp); }

void dnt_counter_csv_row(FILE *fp, const dnt_counter_value *v, double interval_s) {
  char ts[40], label[1024];
  dnt_counter_time(v->time_s, ts);
  dnt_counter_label(v->display_name, v->unit, v->kind, named_interval(interval_s, v->interval_s), label,
                    sizeof label);
  fprintf(fp, "%s,", ts);
  csv_cell(fp, v->provider);
  fputc(',', fp);
  if (v->tags[0]) /* dotnet-counters: label[k=v;k2=v] */
    csv_tagged_cell(fp, label, v->tags);
  else
    csv_cell(fp, label);
  fprintf(fp, ",%s,", counter_type(v->kind));
  print_number(fp, v->value);
  fputc('\n', fp);
}

void dnt_counter_json_row(FILE *fp, const dnt_counter_value *v, double interval_s, int first) {
  char ts[40], label[1024];
  dnt_counter_time(v->time_s, ts);
  dnt_counter_label(v->display_name, v->unit, v->kind, named_interval(interval_s, v->interval_s), label,
                    sizeof label);
  fprintf(fp, "%s\n    {\"timestamp\": ", first ? "" : ",");
  dnt_json_string(fp, ts);
  fputs(", \"provider\": ", fp);
  dnt_json_string(fp, v->provider);
  fputs(", \"name\": ", fp);
  dnt_json_string(fp, v->name);
  fputs(", \"displayName\": ", fp);
  dnt_json_string(fp, label);
  fputs(", \"unit\": ", fp);
  dnt_json_string(fp, v->unit);
  fputs(", \"tags\": ", fp);
  dnt_json_string(fp, v->tags);
  fprintf(fp, ", \"counterType\": \"%s\", \"value\": ", counter_type(v->kind));
  if (isfinite(v->value))
    print_number(fp, v->value);
  else
    fputs("null", fp); /* JSON has no NaN */
  fputc('}', fp);
}

/* ---- the live table ---- */

static const struct dnt_counter_table *sort_table;

/* Providers, then counters, alphabetically; a counter's series by tags, percentiles by number:
 * a redraw never reshuffles the lines. */
static int by_place(const void *a, const void *b) {
  const struct dnt_counter_row *x = &sort_table->v[*(const size_t *)a], *y = &sort_table->v[*(const size_t *)b];
  int c = strcmp(x->provider, y->provider);
  if (!c) c = strcmp(x->name, y->name);
  if (!c) c = strcmp(x->base_tags, y->base_tags);
  if (!c) c = (x->quantile > y->quantile) - (x->quantile < y->quantile);
  if (!c) c = strcmp(x->tags, y->tags);
  return c;
}

struct screen {
  FILE *fp;
  int width, height, erase;
  size_t lines, skipped;
  int value_cols; /* the right column(s): VALUE_COLS, twice that with the deltas */
};

#define VALUE_COLS 16 /* a right-aligned value and the space before it */
#define MAX_COLS 100    /* wider terminals: the values stay near their names */

/* Writes left cut to the columns left of the value (UTF-8 aware: a column per character), then
 * right right-aligned, and ends the line. */
static void line(struct screen *s, const char *left, const char *right) {
  if (s->height > 0 && (int)s->lines >= s->height - 1) { /* keep the last line for "N more" */
    s->skipped++;
    return;
  }
  int w = s->width > MAX_COLS ? MAX_COLS : s->width;
  int room = right ? w - s->value_cols : w, cols = 0;
  char safe[1024], buf[1024];
  dnt_text_escape(safe, sizeof safe, left); /* names, units and tags are the target's words */
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)safe; *p && o < sizeof buf - 1; p++) {
    int starts_char = (*p & 0xC0) != 0x80;
    if (starts_char && cols >= room) break;
    cols += starts_char;
    buf[o++] = (char)*p;
  }
  buf[o] = '\0';
  if (right)
    fprintf(s->fp, "%s%*s%*s", buf, room - cols, "", s->value_cols - 1, right);
  else
    fputs(buf, s->fp);
  fprintf(s->fp, "%s\n", s->erase ? "\033[K" : "");
  s->lines++;
}

/* Columns of n bytes of UTF-8 (a column per character), and the bytes of its first `cols`. */
static size_t cols_of(const char *p, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)p[i] & 0xC0) != 0x80;
  return c;
}
static size_t bytes_of_cols(const char *p, size_t n, size_t cols) {
  size_t i = 0, c = 0;
  for (; i < n; i++) {
    int starts_char = ((unsigned char)p[i] & 0xC0) != 0x80;
    if (starts_char && c == cols) break;
    c += starts_char;
  }
  return i;
}

/* A tag set ("k=v,k2=v2") in `room` columns: whole when it fits; else the keys are cut ("gc.h…=gen0")
 * or left out, never the values, which are what tells a counter's rows apart. */
static void fit_tags(const char *tags, int room, char *out, size_t cap) {
  size_t len = strlen(tags), o = 0;
  if (room < 1 || (int)cols_of(tags, len) <= room) {
    snprintf(out, cap, "%s", tags);
    return;
  }
  int npairs = 0, nkeys = 0, fixed = 0;
  for (const char *p = tags; p <= tags + len;) {
    size_t n = strcspn(p, ",");
    const char *eq = memchr(p, '=', n);
    npairs++;
    if (eq) nkeys++;
    fixed += (int)cols_of(eq ? eq + 1 : p, eq ? n - (size_t)(eq + 1 - p) : n);
    p += n + 1;
  }
  fixed += npairs - 1;                             /* the commas */
  int per_key = nkeys ? (room - fixed) / nkeys : 0; /* columns for each "key=" */
  out[0] = '\0';
  for (const char *p = tags; p <= tags + len && o + 1 < cap;) {
    size_t n = strcspn(p, ",");
    const char *eq = memchr(p, '=', n);
    const char *val = eq ? eq + 1 : p;
    size_t vlen = eq ? n - (size_t)(eq + 1 - p) : n, klen = eq ? (size_t)(eq - p) : 0;
    int w;
    if (p != tags) out[o++] = ',';
    if (eq && (int)cols_of(p, klen) + 1 <= per_key) /* the whole key */
      w = snprintf(out + o, cap - o, "%.*s=", (int)klen, p);
    else if (eq && per_key >= 3) /* its start, an ellipsis and "=" */
      w = snprintf(out + o, cap - o, "%.*s\u2026=", (int)bytes_of_cols(p, klen, (size_t)per_key - 2), p);
    else
      w = 0; /* no room for keys: the values alone */
    if (w < 0 || (size_t)w >= cap - o) break;
    o += (size_t)w;
    w = snprintf(out + o, cap - o, "%.*s", (int)vlen, val);
    if (w < 0 || (size_t)w >= cap - o) break;
    o += (size_t)w;
    p += n + 1;
  }
  out[o < cap ? o : cap - 1] = '\0';
}

/* The value column, and with deltas the change since the row's previous value beside it. */
static void value_text(const struct dnt_counter_row *r, int deltas, char *out, size_t cap) {
  char num[64], delta[64] = "";
  dnt_counter_number(r->value, 1, num, sizeof num);
  if (deltas && r->has_prev) dnt_counter_number(r->value - r->prev, 1, delta, sizeof delta);
  if (deltas)
    snprintf(out, cap, "%s%*s", num, VALUE_COLS, delta);
  else
    snprintf(out, cap, "%s", num);
}

size_t dnt_monitor_render(FILE *fp, const struct dnt_counter_table *t, double refresh_s, const char *status,
                          int width, int height, int erase, int deltas) {
  struct screen s = {fp, width < 20 ? 20 : width, height, erase, 0, 0, deltas ? 2 * VALUE_COLS : VALUE_COLS};
  char text[1200], num[160];
  if (erase) line(&s, "Press p to pause, r to resume, q to quit.", NULL); /* keys work on a terminal only */
  snprintf(text, sizeof text, "    Status: %s", status);
  line(&s, text, NULL);
  line(&s, "", NULL);
  if (deltas) {
    snprintf(num, sizeof num, "Current Value%*s", VALUE_COLS, "Last Delta");
    line(&s, "Name", num);
  } else {
    line(&s, "Name", "Current Value");
  }
  size_t *order = t->n ? malloc(t->n * sizeof *order) : NULL;
  if (t->n && !order) { /* out of memory: say so on the screen rather than draw a wrong table */
    line(&s, "(out of memory)", NULL);
    return s.lines;
  }
  for (size_t i = 0; i < t->n; i++) order[i] = i;
  sort_table = t;
  if (t->n) qsort(order, t->n, sizeof *order, by_place);
  const struct dnt_counter_row *prev = NULL;
  for (size_t k = 0; k < t->n; k++) {
    const struct dnt_counter_row *r = &t->v[order[k]];
    int new_provider = !prev || strcmp(prev->provider, r->provider) != 0;
    int new_counter = new_provider || strcmp(prev->name, r->name) != 0;
    if (new_provider) {
      snprintf(text, sizeof text, "[%s]", r->provider);
      line(&s, text, NULL);
    }
    char label[1024];
    dnt_counter_label(r->display_name, r->unit, r->kind, named_interval(refresh_s, r->interval_s), label,
                      sizeof label);
    value_text(r, deltas, num, sizeof num);
    if (!r->tags[0]) {
      snprintf(text, sizeof text, "    %s", label);
      line(&s, text, num);
    } else {
      if (new_counter) {
        snprintf(text, sizeof text, "    %s", label);
        line(&s, text, NULL);
      }
      char fitted[1024];
      int w = s.width > MAX_COLS ? MAX_COLS : s.width;
      fit_tags(r->tags, w - s.value_cols - 8, fitted, sizeof fitted);
      snprintf(text, sizeof text, "        %s", fitted);
      line(&s, text, num);
    }
    prev = r;
  }
  free(order);
  if (s.skipped) {
    fprintf(fp, "... %zu more line%s: enlarge the terminal%s\n", s.skipped, s.skipped == 1 ? "" : "s",
            erase ? "\033[K" : "");
    s.lines++;
  }
  if (erase) fputs("\033[J", fp); /* what the previous, longer frame left below */
  return s.lines;
}
