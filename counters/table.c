/* The latest value of every counter series (see dnt-counters.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-counters.h"

/* FNV-1a over the three key strings, each with its terminator so "ab","c" != "a","bc". */
static uint64_t key_hash(const char *provider, const char *name, const char *tags) {
  uint64_t h = 1469598103934665603ull;
  const char *parts[3] = {provider, name, tags};
  for (int i = 0; i < 3; i++) {
    const unsigned char *s = (const unsigned char *)parts[i];
    do {
      h ^= *s;
      h *= 1099511628211ull;
    } while (*s++);
  }
  return h;
}

static int row_is(const struct dnt_counter_row *r, const char *provider, const char *name, const char *tags) {
  return strcmp(r->name, name) == 0 && strcmp(r->tags, tags) == 0 && strcmp(r->provider, provider) == 0;
}

static size_t slot_of(const struct dnt_counter_table *t, const char *provider, const char *name, const char *tags) {
  size_t mask = t->index_cap - 1, i = (size_t)key_hash(provider, name, tags) & mask;
  while (t->index[i] && !row_is(&t->v[t->index[i] - 1], provider, name, tags)) i = (i + 1) & mask;
  return i;
}

/* Keeps the index at most half full; rebuilt from the rows when it grows. */
static int grow_index(struct dnt_counter_table *t) {
  size_t cap = t->index_cap ? 2 * t->index_cap : 64;
  uint32_t *index = calloc(cap, sizeof *index);
  if (!index) return -ENOMEM;
  free(t->index);
  t->index = index;
  t->index_cap = cap;
  for (size_t r = 0; r < t->n; r++) {
    const struct dnt_counter_row *row = &t->v[r];
    t->index[slot_of(t, row->provider, row->name, row->tags)] = (uint32_t)(r + 1);
  }
  return 0;
}

const struct dnt_counter_row *dnt_counter_table_find(const struct dnt_counter_table *t, const char *provider,
                                                     const char *name, const char *tags) {
  if (!t->index_cap) return NULL;
  uint32_t r = t->index[slot_of(t, provider, name, tags)];
  return r ? &t->v[r - 1] : NULL;
}

/* The decoder appends a histogram's percentile as the last tag: "k=v,Percentile=95". */
static const char *percentile_tag(const char *tags) {
  const char *p = strstr(tags, "Percentile=");
  while (p) {
    const char *next = strstr(p + 1, "Percentile=");
    if (!next) break;
    p = next;
  }
  if (p && p != tags && p[-1] != ',') return NULL;
  return p;
}

static void free_row(struct dnt_counter_row *r) {
  free(r->provider);
  free(r->name);
  free(r->display_name);
  free(r->unit);
  free(r->tags);
  free(r->base_tags);
}

static int new_row(struct dnt_counter_table *t, const dnt_counter_value *v, struct dnt_counter_row **out) {
  if (t->n + 1 > t->index_cap / 2 && grow_index(t) != 0) return -ENOMEM;
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 32;
    struct dnt_counter_row *grown = realloc(t->v, cap * sizeof *grown);
    if (!grown) return -ENOMEM;
    t->v = grown;
    t->cap = cap;
  }
  struct dnt_counter_row r = {0};
  r.quantile = -1;
  const char *pct = v->kind == DNT_COUNTER_HISTOGRAM ? percentile_tag(v->tags) : NULL;
  size_t base_len = pct ? (size_t)(pct - v->tags) - (pct != v->tags) : strlen(v->tags);
  if (pct) r.quantile = strtod(pct + strlen("Percentile="), NULL) / 100.0;
  r.provider = strdup(v->provider);
  r.name = strdup(v->name);
  r.display_name = strdup(v->display_name ? v->display_name : v->name);
  r.unit = strdup(v->unit);
  r.tags = strdup(v->tags);
  r.base_tags = strndup(v->tags, base_len);
  if (!r.provider || !r.name || !r.display_name || !r.unit || !r.tags || !r.base_tags) {
    free_row(&r);
    return -ENOMEM;
  }
  r.kind = v->kind;
  r.from_meter = v->from_meter;
  t->v[t->n] = r;
  t->index[slot_of(t, v->provider, v->name, v->tags)] = (uint32_t)(t->n + 1);
  *out = &t->v[t->n++];
  return 0;
}

int dnt_counter_table_put(struct dnt_counter_table *t, const dnt_counter_value *v) {
  struct dnt_counter_row *r = (struct dnt_counter_row *)dnt_counter_table_find(t, v->provider, v->name, v->tags);
  if (!r) {
    int rc = new_row(t, v, &r);
    if (rc) return rc;
  }
  if (r->updates) { /* what the value was, for the change monitor --showDeltas shows */
    r->prev = r->value;
    r->has_prev = 1;
  }
  r->value = v->value;
  if (v->kind == DNT_COUNTER_HISTOGRAM && v->has_hist && v->hist_count >= 0 && v->hist_sum == v->hist_sum) {
    r->hist_count += v->hist_count; /* each interval's measurements: a summary's count grows */
    r->hist_sum += v->hist_sum;
    r->has_hist = 1;
  }
  if (v->kind == DNT_COUNTER_SUM && v->has_total && v->total == v->total) {
    r->total = v->total; /* the runtime's own running total */
    r->total_c = 0;
  } else if (v->kind == DNT_COUNTER_SUM && v->value == v->value) { /* NaN adds nothing */
    /* Neumaier's compensated sum: the low bits each addition loses are kept in total_c */
    double sum = r->total + v->value;
    if (fabs(r->total) >= fabs(v->value))
      r->total_c += (r->total - sum) + v->value;
    else
      r->total_c += (v->value - sum) + r->total;
    r->total = sum;
  }
  r->time_s = v->time_s;
  r->interval_s = v->interval_s;
  r->updates++;
  t->generation++;
  return 0;
}

void dnt_counter_table_clear(struct dnt_counter_table *t) {
  for (size_t i = 0; i < t->n; i++) free_row(&t->v[i]);
  t->n = 0;
  if (t->index) memset(t->index, 0, t->index_cap * sizeof *t->index);
  t->generation++;
}

void dnt_counter_table_release(struct dnt_counter_table *t) {
  dnt_counter_table_clear(t);
  free(t->v);
  free(t->index);
  memset(t, 0, sizeof *t);
}
