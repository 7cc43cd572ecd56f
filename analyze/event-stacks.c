/* The stacks of the events an analysis counts, in a profile with a leaf frame per key
 * (analyze-int.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"

/* The made-up addresses of the leaf frames: the top of the 64-bit kernel's half, where no
 * managed code is ever loaded (and past any 32-bit address). */
#define LEAF_BASE 0xffffffffff000000ull
#define MAX_KEYS 0xfffffeull
#define LABEL_MAX 1024

double dnt__ms_of(uint64_t ts, uint64_t sync_qpc, uint64_t qpc_freq) {
  return qpc_freq ? (double)(int64_t)(ts - sync_qpc) * 1000.0 / (double)qpc_freq : 0.0;
}

uint64_t dnt__record_u64(const dnt_record *r, const char *name) {
  const dnt_value *v = dnt_record_get(r, name);
  if (!v) return 0;
  switch (v->kind) {
  case DNT_VALUE_UINT: return v->u;
  case DNT_VALUE_INT: return (uint64_t)v->i;
  default: return 0;
  }
}

const ntr_field *dnt__layout(struct dnt__layouts *c, const struct dnt_schema *schema, const ntr_metadata *md,
                             uint32_t *nfields) {
  for (size_t i = 0; i < c->n; i++)
    if (c->v[i].id == md->event_id && c->v[i].version == md->version) {
      *nfields = c->v[i].nfields;
      return c->v[i].fields;
    }
  const char *name;
  const ntr_field *f = dnt_schema_lookup(schema, DNT__RUNTIME_PROVIDER, md->event_id, md->version, &name, nfields);
  if (!f) *nfields = 0;
  if (c->n < DNT__LAYOUTS) /* a hostile trace's many versions are looked up each time */
    c->v[c->n].id = md->event_id, c->v[c->n].version = md->version, c->v[c->n].nfields = *nfields,
    c->v[c->n++].fields = f;
  return f;
}

static int name_leaf(void *ud, uint64_t ip, int leaf, char *buf, size_t cap) {
  struct dnt__event_stacks *s = ud;
  (void)leaf;
  if (ip < LEAF_BASE || ip - LEAF_BASE > MAX_KEYS) return 0;
  s->label(s->ud, (size_t)(ip - LEAF_BASE), buf, cap < LABEL_MAX ? cap : LABEL_MAX);
  return 1;
}

int dnt__event_stacks_init(struct dnt__event_stacks *s, dnt__stack_label_fn label, void *ud, int by_time,
                           const char *what) {
  memset(s, 0, sizeof *s);
  s->label = label;
  s->ud = ud;
  if (!(s->prof = dnt_profile_new())) return -ENOMEM;
  dnt_profile_methods_only(s->prof, 1); /* its own samples are not what is counted */
  dnt_profile_set_weight(s->prof, by_time ? DNT_WEIGHT_TIME : DNT_WEIGHT_SAMPLES);
  dnt_profile_add_resolver(s->prof, name_leaf, s);
  dnt_profile_describe(s->prof, what);
  return 0;
}

int dnt__event_stacks_on_trace(struct dnt__event_stacks *s, const ntr_trace *t) {
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  return cb.on_trace(s->prof, t);
}

int dnt__event_stacks_on_event(struct dnt__event_stacks *s, const ntr_event *ev) {
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  return cb.on_event(s->prof, ev);
}

int dnt__event_stacks_on_thread(struct dnt__event_stacks *s, const ntr_thread *t) {
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  return cb.on_thread(s->prof, t);
}

void dnt__event_stacks_add(struct dnt__event_stacks *s, size_t key, uint64_t thread, uint64_t time,
                           const uint64_t *frames, size_t n, double ms) {
  if (s->oom || key > MAX_KEYS) return;
  if (n + 1 > s->cap) {
    size_t cap = n + 1 < 64 ? 64 : n + 1;
    uint64_t *b = realloc(s->buf, cap * sizeof *b);
    if (!b) {
      s->oom = 1;
      return;
    }
    s->buf = b;
    s->cap = cap;
  }
  s->buf[0] = LEAF_BASE + key;
  if (n) memcpy(s->buf + 1, frames, n * sizeof *frames);
  dnt_profile_add_stack(s->prof, thread, time, s->buf, n + 1, ms);
}

/* ---- after the trace: each key's stacks, merged across threads ---- */

struct entry {
  size_t key;  /* SIZE_MAX: a frame of no key's (cannot happen unless labels collide) */
  size_t off;  /* into the pool of frame ids: root first, without the leaf frame */
  size_t n;
  uint64_t count;
  double ms;
};

struct gather {
  struct dnt__event_stacks *s;
  const struct dnt_profile *prof;
  size_t *key_of_name; /* per name id: its key, or SIZE_MAX */
  struct entry *e;
  size_t ne, cape;
  uint32_t *pool;
  size_t npool, cappool;
  int oom;
  int by_time;
};

static void gather_stack(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct gather *g = ud;
  (void)thread;
  if (g->oom || n == 0) return;
  size_t key = g->key_of_name[frames[n - 1]];
  if (key == SIZE_MAX) return;
  if (g->ne == g->cape) {
    size_t cap = g->cape ? g->cape * 2 : 256;
    struct entry *e = realloc(g->e, cap * sizeof *e);
    if (!e) return (void)(g->oom = 1);
    g->e = e;
    g->cape = cap;
  }
  if (g->npool + n > g->cappool) {
    size_t cap = g->cappool ? g->cappool * 2 : 4096;
    while (cap < g->npool + n) cap *= 2;
    uint32_t *p = realloc(g->pool, cap * sizeof *p);
    if (!p) return (void)(g->oom = 1);
    g->pool = p;
    g->cappool = cap;
  }
  memcpy(g->pool + g->npool, frames, (n - 1) * sizeof *frames);
  g->e[g->ne++] = (struct entry){key, g->npool, n - 1, samples, ms};
  g->npool += n - 1;
}

static const struct gather *sorting; /* qsort has no user data: the gather being sorted */

static int by_frames(const struct entry *x, const struct entry *y) {
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(sorting->pool + x->off, sorting->pool + y->off, n * sizeof(uint32_t));
  if (c) return c;
  return (x->n > y->n) - (x->n < y->n);
}

static int by_key_frames(const void *a, const void *b) {
  const struct entry *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return by_frames(x, y);
}

static int by_frames_only(const void *a, const void *b) { return by_frames(a, b); }

static int heaviest_first(const void *a, const void *b) {
  const struct entry *x = a, *y = b;
  double wx = sorting->by_time ? x->ms : (double)x->count, wy = sorting->by_time ? y->ms : (double)y->count;
  if (wx != wy) return wx > wy ? -1 : 1;
  return by_frames(x, y); /* a stable order between equals */
}

/* Merges runs of equal stacks (of one key when keyed) in e[0..n), in place; returns the new n. */
static size_t merge(struct entry *e, size_t n, int keyed) {
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    if (out && (!keyed || e[out - 1].key == e[i].key) && by_frames(&e[out - 1], &e[i]) == 0) {
      e[out - 1].count += e[i].count;
      e[out - 1].ms += e[i].ms;
    } else {
      e[out++] = e[i];
    }
  }
  return out;
}

/* The `top` heaviest of e[0..n) (sorted here) as named stacks, the rest summed. */
static int keep_top(struct gather *g, struct entry *e, size_t n, size_t top, struct dnt__key_stacks *ks) {
  if (n) qsort(e, n, sizeof *e, heaviest_first);
  size_t k = n < top ? n : top;
  ks->v = k ? calloc(k, sizeof *ks->v) : NULL;
  if (k && !ks->v) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if (i >= k) {
      ks->other_count += e[i].count;
      ks->other_weight += e[i].ms;
      continue;
    }
    dnt_analysis_stack *st = &ks->v[ks->n];
    st->frames = e[i].n ? calloc(e[i].n, sizeof *st->frames) : NULL;
    if (e[i].n && !st->frames) return -ENOMEM;
    for (size_t f = 0; f < e[i].n; f++) /* leaf first */
      st->frames[f] = dnt_profile_name(g->prof, g->pool[e[i].off + e[i].n - 1 - f]);
    st->nframes = e[i].n;
    st->count = e[i].count;
    st->weight_ms = e[i].ms;
    ks->n++;
  }
  return 0;
}

/* Which name is which key's leaf frame: each key's label looked up among the names. */
static int map_leaves(struct gather *g, size_t nkeys) {
  size_t nnames = dnt_profile_nnames(g->prof);
  g->key_of_name = malloc((nnames ? nnames : 1) * sizeof *g->key_of_name);
  size_t cap = 16;
  while (cap < nkeys * 2) cap *= 2;
  size_t *table = calloc(cap, sizeof *table); /* key + 1, 0: empty */
  char **labels = calloc(nkeys ? nkeys : 1, sizeof *labels);
  int rc = -ENOMEM;
  if (!g->key_of_name || !table || !labels) goto out;
  char buf[LABEL_MAX];
  for (size_t k = 0; k < nkeys; k++) {
    g->s->label(g->s->ud, k, buf, sizeof buf);
    if (!(labels[k] = strdup(buf))) goto out;
    uint32_t h = 2166136261u;
    for (const char *c = buf; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
    size_t j = h & (cap - 1);
    while (table[j] && strcmp(labels[table[j] - 1], buf) != 0) j = (j + 1) & (cap - 1);
    if (!table[j]) table[j] = k + 1; /* two keys of one label: the first one's */
  }
  for (size_t id = 0; id < nnames; id++) {
    const char *name = dnt_profile_name(g->prof, (uint32_t)id);
    uint32_t h = 2166136261u;
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
    size_t j = h & (cap - 1);
    while (table[j] && strcmp(labels[table[j] - 1], name) != 0) j = (j + 1) & (cap - 1);
    g->key_of_name[id] = table[j] ? table[j] - 1 : SIZE_MAX;
  }
  rc = 0;
out:
  if (labels)
    for (size_t k = 0; k < nkeys; k++) free(labels[k]);
  free(labels);
  free(table);
  return rc;
}

int dnt__event_stacks_finish(struct dnt__event_stacks *s, size_t nkeys, size_t top, int by_time) {
  if (s->oom || dnt_profile_finish(s->prof) != 0) return -ENOMEM;
  struct gather g = {.s = s, .prof = s->prof, .by_time = by_time};
  int rc = -ENOMEM;
  s->nkeys = nkeys;
  s->by_key = calloc(nkeys ? nkeys : 1, sizeof *s->by_key);
  if (!s->by_key || map_leaves(&g, nkeys) != 0) goto out;
  if (dnt_profile_each_stack(s->prof, gather_stack, &g) != 0 || g.oom) goto out;
  sorting = &g;
  /* per key: sorted by key then frames, equal stacks merged, each key's run cut to its top */
  if (g.ne) qsort(g.e, g.ne, sizeof *g.e, by_key_frames);
  size_t n = merge(g.e, g.ne, 1);
  struct entry *all = malloc((n ? n : 1) * sizeof *all);
  if (!all) goto out;
  if (n) memcpy(all, g.e, n * sizeof *all);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && g.e[j].key == g.e[i].key) j++;
    if (keep_top(&g, g.e + i, j - i, top, &s->by_key[g.e[i].key]) != 0) {
      free(all);
      goto out;
    }
    i = j;
  }
  /* all keys together: the same stacks below different leaves are one */
  if (n) qsort(all, n, sizeof *all, by_frames_only);
  size_t na = merge(all, n, 0);
  rc = keep_top(&g, all, na, top, &s->all);
  free(all);
out:
  sorting = NULL;
  free(g.key_of_name);
  free(g.e);
  free(g.pool);
  if (rc) s->oom = 1;
  return rc;
}

static void release_key(struct dnt__key_stacks *k) {
  for (size_t i = 0; i < k->n; i++) free(k->v[i].frames);
  free(k->v);
}

void dnt__event_stacks_release(struct dnt__event_stacks *s) {
  if (s->by_key)
    for (size_t k = 0; k < s->nkeys; k++) release_key(&s->by_key[k]);
  release_key(&s->all);
  free(s->by_key);
  free(s->buf);
  dnt_profile_free(s->prof);
  memset(s, 0, sizeof *s);
}

int dnt__stacked_init(struct dnt__stacked *s, const struct dnt_schema *schema, dnt__stack_label_fn label, void *ud,
                      int by_time, const char *what) {
  s->schema = schema;
  dnt_record_init(&s->rec);
  return dnt__event_stacks_init(&s->stacks, label, ud, by_time, what);
}

void dnt__stacked_release(struct dnt__stacked *s) {
  dnt_record_release(&s->rec);
  dnt__event_stacks_release(&s->stacks);
}

int dnt__stacked_on_trace(void *ud, const ntr_trace *t) {
  struct dnt__stacked *s = ud;
  dnt__clock_on_trace(&s->clock, t);
  return dnt__event_stacks_on_trace(&s->stacks, t) ? 1 : 0;
}

int dnt__stacked_on_thread(void *ud, const ntr_thread *t) {
  struct dnt__stacked *s = ud;
  if (dnt__event_stacks_on_thread(&s->stacks, t) != 0) return s->failed = 1, 1;
  return 0;
}

int dnt__stacked_on_event(struct dnt__stacked *s, const ntr_event *ev) {
  if (s->failed) return -1;
  dnt__clock_see(&s->clock, ev->timestamp);
  if (dnt__event_stacks_on_event(&s->stacks, ev) != 0) return s->failed = 1, -1; /* the method table */
  if (!ev->metadata) return 0;
  return dnt__is_runtime(&s->runtime_md, ev->metadata);
}
