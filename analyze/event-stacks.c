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

int dnt__managed_frame(const char *name) {
  if (strncmp(name, "?!", 2) == 0) return strncmp(name, "?!0x", 4) != 0;
  return dnt_frame_kind(name) == 'M';
}

int dnt__user_frame(const char *name) {
  if (!dnt__managed_frame(name)) return 0;
  static const char *const framework[] = {"System.", "Microsoft.", "System!", "mscorlib!", "netstandard!",
                                          "Anonymously Hosted DynamicMethods Assembly!"};
  const char *method = strchr(name, '!') + 1;
  for (size_t i = 0; i < sizeof framework / sizeof framework[0]; i++) {
    size_t n = strlen(framework[i]);
    if (strncmp(name, framework[i], n) == 0) return 0;
    if (name[0] == '?' && framework[i][n - 1] == '.' && strncmp(method, framework[i], n) == 0) return 0;
  }
  return 1;
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
  dnt_profile_set_tasks(s->prof, DNT_TASKS_STITCHED); /* an async task's events under its creator */
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

void dnt__event_stacks_stitch(struct dnt__event_stacks *s, int on) {
  dnt_profile_set_tasks(s->prof, on ? DNT_TASKS_STITCHED : DNT_TASKS_IGNORED);
}

int dnt__event_stacks_on_sequence_point(struct dnt__event_stacks *s, const ntr_sequence_point *sp) {
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  return cb.on_sequence_point(s->prof, sp);
}

int dnt__event_stacks_on_thread(struct dnt__event_stacks *s, const ntr_thread *t) {
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  return cb.on_thread(s->prof, t);
}

static int grow_pairs(struct dnt__event_stacks *s) {
  size_t cap = s->table_cap ? s->table_cap * 2 : 256;
  size_t *t = calloc(cap, sizeof *t);
  struct dnt__key_stack *v = realloc(s->pairs, cap / 2 * sizeof *v);
  if (!t || !v) {
    free(t);
    if (v) s->pairs = v;
    return -1;
  }
  s->pairs = v;
  s->cappairs = cap / 2;
  for (size_t i = 0; i < s->npairs; i++) {
    size_t j = (s->pairs[i].key * 2654435761u ^ s->pairs[i].stack * 40503u) & (cap - 1);
    while (t[j]) j = (j + 1) & (cap - 1);
    t[j] = i + 1;
  }
  free(s->table);
  s->table = t;
  s->table_cap = cap;
  return 0;
}

void dnt__event_stacks_add(struct dnt__event_stacks *s, size_t key, uint64_t thread, uint64_t time,
                           const uint64_t *frames, size_t n, double ms) {
  if (s->oom || key > MAX_KEYS) return;
  uint32_t stack = dnt_profile_add_stack_under(s->prof, thread, time, LEAF_BASE + key, frames, n, ms);
  if (stack == UINT32_MAX || (s->npairs == s->cappairs && grow_pairs(s) != 0)) {
    s->oom = 1;
    return;
  }
  size_t j = (key * 2654435761u ^ stack * 40503u) & (s->table_cap - 1);
  for (; s->table[j]; j = (j + 1) & (s->table_cap - 1)) {
    struct dnt__key_stack *e = &s->pairs[s->table[j] - 1];
    if (e->key == key && e->stack == stack) {
      e->count++;
      e->ms += ms;
      return;
    }
  }
  s->pairs[s->npairs] = (struct dnt__key_stack){key, stack, 1, ms};
  s->table[j] = ++s->npairs;
}

/* ---- after the trace: each key's stacks, merged across threads ----
 * A pair's stack becomes a slot: the index of its stack among the distinct stacks counted (their
 * ids sorted), then the slot of the first of them with the same frame names (two addresses in
 * one method are one frame by name, as the profile's writers merge them). */

struct gather {
  struct dnt__event_stacks *s;
  uint32_t *ids; /* the distinct stacks, by id */
  size_t nids;
  uint32_t *buf, *buf2; /* frame names, for comparing stacks */
  size_t cap;
  int by_time;
};

static int by_id(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static size_t slot_of(const struct gather *g, uint32_t id) {
  const uint32_t *at = bsearch(&id, g->ids, g->nids, sizeof *g->ids, by_id);
  return (size_t)(at - g->ids); /* every pair's stack is there */
}

/* The frame names of stack id, leaf first, into g's buffer `which` (0: buf, 1: buf2); *n of them.
 * 0, or -1 when out of memory. */
static int fill(struct gather *g, uint32_t id, int which, size_t *n) {
  *n = dnt_profile_stack_names(g->s->prof, id, NULL);
  if (*n > g->cap) {
    uint32_t *a = realloc(g->buf, *n * sizeof *a);
    if (!a) return -1;
    g->buf = a;
    uint32_t *b = realloc(g->buf2, *n * sizeof *b);
    if (!b) return -1;
    g->buf2 = b;
    g->cap = *n;
  }
  if (*n) dnt_profile_stack_names(g->s->prof, id, which ? g->buf2 : g->buf);
  return 0;
}

/* The distinct stacks of the pairs, and each pair's stack made a slot (see above). */
static int slots(struct gather *g) {
  struct dnt__event_stacks *s = g->s;
  g->ids = malloc((s->npairs ? s->npairs : 1) * sizeof *g->ids);
  if (!g->ids) return -1;
  for (size_t i = 0; i < s->npairs; i++) g->ids[i] = s->pairs[i].stack;
  if (s->npairs) qsort(g->ids, s->npairs, sizeof *g->ids, by_id);
  for (size_t i = 0; i < s->npairs; i++)
    if (g->nids == 0 || g->ids[g->nids - 1] != g->ids[i]) g->ids[g->nids++] = g->ids[i];
  size_t cap = 16;
  while (cap < g->nids * 2) cap *= 2;
  size_t *table = calloc(cap, sizeof *table); /* slot + 1 of a first stack of its names */
  size_t *canon = malloc((g->nids ? g->nids : 1) * sizeof *canon);
  int rc = -1;
  if (!table || !canon) goto out;
  for (size_t k = 0; k < g->nids; k++) {
    size_t n, m;
    if (fill(g, g->ids[k], 0, &n) != 0) goto out;
    uint32_t h = 2166136261u ^ (uint32_t)n;
    for (size_t f = 0; f < n; f++) h = (h ^ g->buf[f]) * 16777619u;
    size_t j = h & (cap - 1);
    for (; table[j]; j = (j + 1) & (cap - 1)) {
      if (fill(g, g->ids[table[j] - 1], 1, &m) != 0) goto out;
      if (m == n && (n == 0 || memcmp(g->buf, g->buf2, n * sizeof *g->buf) == 0)) break;
    }
    if (!table[j]) table[j] = k + 1;
    canon[k] = table[j] - 1;
  }
  for (size_t i = 0; i < s->npairs; i++) s->pairs[i].stack = (uint32_t)canon[slot_of(g, s->pairs[i].stack)];
  rc = 0;
out:
  free(table);
  free(canon);
  return rc;
}

static const struct gather *sorting; /* qsort has no user data: the gather being sorted */

static int by_key_slot(const void *a, const void *b) {
  const struct dnt__key_stack *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->stack > y->stack) - (x->stack < y->stack);
}

static int by_slot(const void *a, const void *b) {
  const struct dnt__key_stack *x = a, *y = b;
  return (x->stack > y->stack) - (x->stack < y->stack);
}

static int heaviest_first(const void *a, const void *b) {
  const struct dnt__key_stack *x = a, *y = b;
  double wx = sorting->by_time ? x->ms : (double)x->count, wy = sorting->by_time ? y->ms : (double)y->count;
  if (wx != wy) return wx > wy ? -1 : 1;
  return by_slot(a, b); /* between equals: the stack counted first */
}

/* Merges runs of one stack (of one key when keyed) in e[0..n), in place; returns the new n. */
static size_t merge(struct dnt__key_stack *e, size_t n, int keyed) {
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    if (out && (!keyed || e[out - 1].key == e[i].key) && e[out - 1].stack == e[i].stack) {
      e[out - 1].count += e[i].count;
      e[out - 1].ms += e[i].ms;
    } else {
      e[out++] = e[i];
    }
  }
  return out;
}

/* The names of a slot's frames, leaf first: made once, shared by every key that has the stack. */
static const char **names_of(struct gather *g, size_t slot, size_t *n) {
  struct dnt__event_stacks *s = g->s;
  *n = dnt_profile_stack_names(s->prof, g->ids[slot], NULL);
  if (*n == 0 || s->names[slot]) return s->names[slot];
  if (fill(g, g->ids[slot], 0, n) != 0) return NULL;
  const char **v = malloc(*n * sizeof *v);
  if (!v) return NULL;
  for (size_t f = 0; f < *n; f++) v[f] = dnt_profile_name(s->prof, g->buf[f]);
  return s->names[slot] = v;
}

/* The `top` heaviest of e[0..n) (sorted here) as named stacks, the rest summed. */
static int keep_top(struct gather *g, struct dnt__key_stack *e, size_t n, size_t top, struct dnt__key_stacks *ks) {
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
    st->frames = names_of(g, e[i].stack, &st->nframes);
    if (st->nframes && !st->frames) return -ENOMEM;
    st->count = e[i].count;
    st->weight_ms = e[i].ms;
    ks->n++;
  }
  return 0;
}

int dnt__event_stacks_finish(struct dnt__event_stacks *s, size_t nkeys, size_t top, int by_time) {
  if (s->oom || dnt_profile_finish(s->prof) != 0) return -ENOMEM;
  struct gather g = {.s = s, .by_time = by_time};
  struct dnt__key_stack *all = NULL;
  int rc = -ENOMEM;
  s->nkeys = nkeys;
  s->by_key = calloc(nkeys ? nkeys : 1, sizeof *s->by_key);
  if (!s->by_key || slots(&g) != 0) goto out;
  s->nnames = g.nids;
  if (!(s->names = calloc(g.nids ? g.nids : 1, sizeof *s->names))) goto out;
  sorting = &g;
  /* per key: sorted by key then stack, equal stacks merged, each key's run cut to its top */
  struct dnt__key_stack *e = s->pairs;
  size_t n = s->npairs;
  if (n) qsort(e, n, sizeof *e, by_key_slot);
  n = merge(e, n, 1);
  if (!(all = malloc((n ? n : 1) * sizeof *all))) goto out;
  if (n) memcpy(all, e, n * sizeof *all);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && e[j].key == e[i].key) j++;
    if (e[i].key < nkeys && keep_top(&g, e + i, j - i, top, &s->by_key[e[i].key]) != 0) goto out;
    i = j;
  }
  /* all keys together: the same stacks below different leaves are one */
  if (n) qsort(all, n, sizeof *all, by_slot);
  rc = keep_top(&g, all, merge(all, n, 0), top, &s->all);
out:
  sorting = NULL;
  free(all);
  free(g.ids);
  free(g.buf);
  free(g.buf2);
  /* the pairs were sorted and merged in place: their table is of no more use */
  free(s->table);
  s->table = NULL;
  s->table_cap = 0;
  if (rc) s->oom = 1;
  return rc;
}

static void release_key(struct dnt__key_stacks *k) { free(k->v); }

void dnt__event_stacks_release(struct dnt__event_stacks *s) {
  if (s->by_key)
    for (size_t k = 0; k < s->nkeys; k++) release_key(&s->by_key[k]);
  release_key(&s->all);
  if (s->names)
    for (size_t i = 0; i < s->nnames; i++) free(s->names[i]);
  free(s->names);
  free(s->by_key);
  free(s->pairs);
  free(s->table);
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

int dnt__stacked_on_sequence_point(void *ud, const ntr_sequence_point *sp) {
  struct dnt__stacked *s = ud;
  return dnt__event_stacks_on_sequence_point(&s->stacks, sp) ? 1 : 0;
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
