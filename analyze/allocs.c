/* Allocations by type and by allocating stack, estimated from the runtime's two allocation events
 * (dnt-analyze.h says which one is used when):
 *
 *   GCAllocationTick (V0-V4)  fires when a heap's allocations since its previous tick pass about
 *                             100 KB (per kind: small, large, pinned); AllocationAmount(64) is those
 *                             bytes, all charged to the type of the object that crossed the mark
 *                             (TypeName, V2 on), as PerfView's GC Heap Alloc view charges them.
 *                             V4's ObjectSize gives an object count: the amount over the size.
 *   AllocationSampled (.NET 10, keyword 0x80000000000)  each byte allocated is a Bernoulli trial of
 *                             p = 1/102400, and an object is sampled at its first success. The
 *                             runtime's design note (dotnet/runtime, docs/design/features/
 *                             RandomizedAllocationSampling.md, "weighted samples") makes each
 *                             sample of an object of ObjectSize bytes stand for
 *                             ObjectSize / (1 - q^ObjectSize) bytes (q = 1 - p), that is
 *                             1 / (1 - q^ObjectSize) objects: unbiased estimates, summed per type.
 *
 * The type table grows with the distinct types, the stacks with the distinct stacks (the profile
 * model of profile/, weighed in bytes), never with the events. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"

enum { EV_ALLOCATION_TICK = 10, EV_ALLOCATION_SAMPLED = 303 };
enum { TICK, SAMPLED, SOURCES };

#define SAMPLING_P (1.0 / 102400.0)
#define MAX_TYPE_NAME 1024      /* longer names are cut (a hostile trace's string) */
#define MAX_EVENT_BYTES 17592186044416.0 /* 2^44: an event claiming more is no runtime's */
#define UNKNOWN_TYPE "(unknown type)" /* AllocationTick before V2 names no type */

struct type_entry {
  dnt_alloc_type t;
  uint8_t *key;  /* the name as the event carries it: UTF-16LE, no terminator */
  size_t keylen;
  uint32_t hash;
  int sized; /* every tick of it carried an ObjectSize (objects are known) */
};

struct table {
  struct type_entry *v;
  size_t n, cap;
  uint32_t *index; /* open addressing: entry + 1, 0 = empty */
  size_t index_cap;
  uint64_t events;
};

/* How to read one kind of allocation event (a metadata record), worked out once from its schema
 * layout: each top-level field's place and what it is to the analysis. The events are then read
 * with a payload cursor, field by field, without building a record (the generic decoder, kept for
 * layouts with other kinds of fields, cost more than the rest of the analysis together). */
enum role { R_OTHER, R_AMOUNT, R_AMOUNT64, R_KIND, R_TYPE_NAME, R_OBJECT_SIZE, R_ROLES };
#define PLAN_FIELDS 16
#define PLANS 8
struct plan {
  const ntr_metadata *md; /* the cache's key, with the three below */
  uint32_t id, event_id, version;
  const ntr_field *fields;
  uint32_t nfields;
  int fast;               /* every field a fixed-size integer, a pointer or a string */
  uint8_t role[PLAN_FIELDS];
  uint8_t size[PLAN_FIELDS]; /* bytes; 0: a UTF-16 string */
};

/* One allocation event's numbers, read either way. */
struct fields {
  double v[R_ROLES]; /* by role; -1: absent */
  const uint8_t *type; /* TypeName in the payload: UTF-16LE, type_len bytes without the NUL */
  size_t type_len;
};

/* The bytes of the NUL-terminated UTF-16LE string at p (at most n bytes there), without the
 * terminator, cut at 2 * (MAX_TYPE_NAME - 1); *used: the bytes it takes with its terminator.
 * -1 when no terminator comes before n. */
static long utf16_span(const uint8_t *p, size_t n, size_t *used) {
  for (size_t i = 0; i + 1 < n; i += 2)
    if (p[i] == 0 && p[i + 1] == 0) {
      *used = i + 2;
      return (long)(i < 2 * (MAX_TYPE_NAME - 1) ? i : 2 * (MAX_TYPE_NAME - 1));
    }
  return -1;
}

struct dnt_allocs_analysis {
  const struct dnt_schema *schema;
  struct plan plans[PLANS];
  size_t nplans;
  enum dnt_allocs_source wanted;
  dnt_record rec;
  struct dnt__clock clock;
  struct table tables[SOURCES];
  struct dnt_profile *profiles[SOURCES]; /* the allocating stacks, weighed in bytes, each under a
                                            leaf frame of its type ("Type System.String") */
  struct type_leaves {
    const struct table *table;
  } leaves[SOURCES];
  ntr_callbacks pcb;                     /* the profiles' own callbacks, fed the same stream */
  int failed, finished, chosen;
  dnt_allocs_summary summary;
  dnt_alloc_type *sorted; /* after finish: the chosen source's types, most bytes first */
};

/* The leaf frame of an allocation's stack: its type, as PerfView's GC Heap Alloc view puts it
 * (an address the trace's methods cannot cover, named here). */
#define TYPE_LEAF_BASE 0xfffffffffe000000ull

static int name_type(void *ud, uint64_t ip, int leaf, char *buf, size_t cap) {
  const struct type_leaves *l = ud;
  (void)leaf;
  if (ip < TYPE_LEAF_BASE || ip - TYPE_LEAF_BASE >= l->table->n) return 0;
  snprintf(buf, cap, "%s%s", DNT_ALLOC_TYPE_FRAME, l->table->v[ip - TYPE_LEAF_BASE].t.name);
  for (char *c = buf; *c; c++)
    if (*c == ';' || (unsigned char)*c < 0x20) *c = ' '; /* one frame of folded stacks */
  return 1;
}

struct dnt_allocs_analysis *dnt_allocs_analysis_new(const struct dnt_schema *schema, enum dnt_allocs_source source) {
  struct dnt_allocs_analysis *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->schema = schema;
  a->wanted = source;
  dnt_record_init(&a->rec);
  dnt_profile_callbacks(&a->pcb);
  for (int s = 0; s < SOURCES; s++) {
    if (!(a->profiles[s] = dnt_profile_new())) {
      dnt_allocs_analysis_free(a);
      return NULL;
    }
    dnt_profile_methods_only(a->profiles[s], 1); /* its samples are the allocations given to it */
    dnt_profile_set_tasks(a->profiles[s], DNT_TASKS_STITCHED); /* an async task's under its creator */
    dnt_profile_set_weight(a->profiles[s], DNT_WEIGHT_BYTES);
    a->leaves[s].table = &a->tables[s];
    dnt_profile_add_resolver(a->profiles[s], name_type, &a->leaves[s]);
  }
  return a;
}

void dnt_allocs_analysis_free(struct dnt_allocs_analysis *a) {
  if (!a) return;
  dnt_record_release(&a->rec);
  for (int s = 0; s < SOURCES; s++) {
    for (size_t i = 0; i < a->tables[s].n; i++) {
      free((char *)a->tables[s].v[i].t.name);
      free(a->tables[s].v[i].key);
    }
    free(a->tables[s].v);
    free(a->tables[s].index);
    dnt_profile_free(a->profiles[s]);
  }
  free(a->sorted);
  free(a);
}

int dnt_allocs_analysis_failed(const struct dnt_allocs_analysis *a) {
  if (a->failed) return -ENOMEM;
  for (int s = 0; s < SOURCES; s++)
    if (dnt_profile_failed(a->profiles[s])) return -ENOMEM;
  return 0;
}

/* ---- the type tables ---- */

/* Eight bytes at a time: every allocation event hashes its type's name. */
static uint32_t hash_key(const uint8_t *k, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, k + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
  }
  uint64_t w = 0;
  if (i < n) memcpy(&w, k + i, n - i);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  return (uint32_t)(h ^ h >> 32);
}

/* The UTF-8 name of a UTF-16LE key (n bytes, no terminator), cut at MAX_TYPE_NAME - 1 bytes;
 * NULL when out of memory. */
static char *key_name(const uint8_t *k, size_t n) {
  if (n == 0) return strdup(UNKNOWN_TYPE);
  uint8_t *z = malloc(n + 2);
  char *name = malloc(MAX_TYPE_NAME);
  if (z && name) {
    ntr_payload c;
    memcpy(z, k, n);
    z[n] = z[n + 1] = 0;
    ntr_payload_init(&c, z, n + 2);
    ntr_payload_utf16z(&c, name, MAX_TYPE_NAME, NULL);
  } else {
    free(name);
    name = NULL;
  }
  free(z);
  return name;
}

static int grow_index(struct table *t) {
  size_t cap = t->index_cap ? t->index_cap * 2 : 64;
  uint32_t *idx = calloc(cap, sizeof *idx);
  if (!idx) return -1;
  for (size_t i = 0; i < t->n; i++) {
    size_t j = t->v[i].hash & (cap - 1);
    while (idx[j]) j = (j + 1) & (cap - 1);
    idx[j] = (uint32_t)i + 1;
  }
  free(t->index);
  t->index = idx;
  t->index_cap = cap;
  return 0;
}

/* The entry of the type whose UTF-16 name is key (n bytes; created empty), or NULL when out of
 * memory. Types are told apart by the bytes the events carry, converted once. */
static struct type_entry *type_of(struct table *t, const uint8_t *key, size_t n) {
  uint32_t h = hash_key(key, n);
  if ((t->n + 1) * 2 > t->index_cap && grow_index(t) != 0) return NULL;
  size_t j = h & (t->index_cap - 1);
  for (; t->index[j]; j = (j + 1) & (t->index_cap - 1)) {
    struct type_entry *e = &t->v[t->index[j] - 1];
    if (e->hash == h && e->keylen == n && (n == 0 || memcmp(e->key, key, n) == 0)) return e;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct type_entry *v = realloc(t->v, cap * sizeof *v);
    if (!v) return NULL;
    t->v = v;
    t->cap = cap;
  }
  char *name = key_name(key, n);
  uint8_t *copy = malloc(n ? n : 1);
  if (!name || !copy) {
    free(name);
    free(copy);
    return NULL;
  }
  if (n) memcpy(copy, key, n);
  struct type_entry *e = &t->v[t->n];
  memset(e, 0, sizeof *e);
  e->t.name = name;
  e->key = copy;
  e->keylen = n;
  e->hash = h;
  e->sized = 1;
  t->index[j] = (uint32_t)++t->n;
  return e;
}

/* ---- the stream ---- */

static int allocs_on_event(void *ud, const ntr_event *ev);
static int allocs_on_sequence_point(void *ud, const ntr_sequence_point *sp);
static int allocs_on_thread(void *ud, const ntr_thread *t);
static int allocs_on_trace(void *ud, const ntr_trace *t);

void dnt_allocs_analysis_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = allocs_on_trace;
  cb->on_thread = allocs_on_thread;
  cb->on_event = allocs_on_event;
  cb->on_sequence_point = allocs_on_sequence_point;
}

static int allocs_on_trace(void *ud, const ntr_trace *t) {
  struct dnt_allocs_analysis *a = ud;
  dnt__clock_on_trace(&a->clock, t);
  for (int s = 0; s < SOURCES; s++) a->pcb.on_trace(a->profiles[s], t);
  return 0;
}

static int allocs_on_thread(void *ud, const ntr_thread *t) {
  struct dnt_allocs_analysis *a = ud;
  int rc = 0;
  for (int s = 0; s < SOURCES; s++) rc |= a->pcb.on_thread(a->profiles[s], t);
  return rc ? 1 : 0;
}

static int allocs_on_sequence_point(void *ud, const ntr_sequence_point *sp) {
  struct dnt_allocs_analysis *a = ud;
  for (int s = 0; s < SOURCES; s++) a->pcb.on_sequence_point(a->profiles[s], sp);
  return 0;
}

static const char *const role_names[R_ROLES] = {NULL, "AllocationAmount", "AllocationAmount64", "AllocationKind",
                                                "TypeName", "ObjectSize"};

/* The plan of md's events (made on first sight); NULL when the schema does not know them. */
static const struct plan *plan_of(struct dnt_allocs_analysis *a, const ntr_metadata *md) {
  for (size_t i = 0; i < a->nplans; i++) {
    const struct plan *p = &a->plans[i];
    if (p->md == md && p->id == md->id && p->event_id == md->event_id && p->version == md->version)
      return p->fields ? p : NULL;
  }
  struct plan p = {.md = md, .id = md->id, .event_id = md->event_id, .version = md->version};
  const char *name;
  /* another provider's event of the same id: a plan of no fields, never read */
  if (strcmp(md->provider, DNT__RUNTIME_PROVIDER) == 0)
    p.fields = dnt_schema_lookup(a->schema, md->provider, md->event_id, md->version, &name, &p.nfields);
  p.fast = p.nfields <= PLAN_FIELDS;
  for (uint32_t i = 0; i < p.nfields && p.fast; i++) {
    const ntr_field *f = &p.fields[i];
    size_t size = f->type == DNT_TYPE_POINTER ? dnt__clock_ptr(&a->clock) : ntr_field_fixed_size(f);
    int integer = f->type == DNT_TYPE_POINTER || (f->type >= NTR_TYPE_INT16 && f->type <= NTR_TYPE_UINT64);
    if (f->type == NTR_TYPE_STRING) p.size[i] = 0;
    else if (size > 0 && size <= 8) p.size[i] = (uint8_t)size;
    else p.fast = 0;
    for (int r = 1; r < R_ROLES; r++)
      if (strcmp(f->name, role_names[r]) == 0 && (r == R_TYPE_NAME ? f->type == NTR_TYPE_STRING : integer))
        p.role[i] = (uint8_t)r;
  }
  if (a->nplans == PLANS) a->nplans = 0; /* more kinds than any runtime writes: start over */
  a->plans[a->nplans] = p;
  return p.fields ? &a->plans[a->nplans++] : (a->nplans++, NULL);
}

/* Reads the fields of ev by its plan. A short payload keeps the fields read before the fault
 * (the rest are absent). */
static void read_fast(const struct plan *p, const ntr_event *ev, struct fields *out) {
  ntr_payload c;
  ntr_payload_init(&c, ev->payload, ev->payload_size);
  for (uint32_t i = 0; i < p->nfields; i++) {
    size_t left = ntr_payload_left(&c), used;
    if (p->size[i] == 0) {
      long len = utf16_span(c.cur, left, &used);
      if (len < 0) return;
      if (p->role[i] == R_TYPE_NAME) out->type = c.cur, out->type_len = (size_t)len;
      ntr_payload_skip(&c, used);
      continue;
    }
    if (left < p->size[i]) return;
    if (p->role[i] != R_OTHER) {
      uint64_t v = 0;
      for (uint8_t k = p->size[i]; k > 0; k--) v = v << 8 | c.cur[k - 1]; /* little-endian */
      out->v[p->role[i]] = (double)v;
    }
    ntr_payload_skip(&c, p->size[i]);
  }
}

/* The same through the generic decoder, for layouts the fast path does not take. */
static int read_record(struct dnt_allocs_analysis *a, const struct plan *p, const ntr_event *ev, struct fields *out) {
  if (dnt_record_decode_layout(&a->rec, p->fields, p->nfields, dnt__clock_ptr(&a->clock), ev->payload,
                               ev->payload_size) == NTR_ENOMEM)
    return -1;
  for (int r = 1; r < R_ROLES; r++) {
    double v;
    if (r == R_TYPE_NAME) {
      const dnt_value *s = dnt_record_get(&a->rec, role_names[r]);
      size_t used;
      long len = s && s->kind == DNT_VALUE_STRING && s->raw ? utf16_span(s->raw, s->rawlen, &used) : -1;
      if (len < 0 && s && s->kind == DNT_VALUE_STRING && s->raw) /* its bytes without the terminator */
        len = (long)((s->rawlen < 2 * (MAX_TYPE_NAME - 1) ? s->rawlen : 2 * (MAX_TYPE_NAME - 1)) & ~(size_t)1);
      if (len >= 0) out->type = s->raw, out->type_len = (size_t)len;
    } else if (dnt_record_num(&a->rec, role_names[r], &v) == 0 && isfinite(v) && v >= 0) {
      out->v[r] = v;
    }
  }
  return 0;
}

/* One allocation event, decoded: its estimated bytes and objects charged to its type and stack. */
static int on_allocation(struct dnt_allocs_analysis *a, const ntr_event *ev, int src) {
  const struct plan *p = plan_of(a, ev->metadata);
  if (!p) return 0;
  struct fields fl;
  for (int r = 0; r < R_ROLES; r++) fl.v[r] = -1;
  fl.type = NULL;
  fl.type_len = 0;
  if (p->fast) read_fast(p, ev, &fl);
  else if (read_record(a, p, ev, &fl) != 0) return -1;
  double bytes, objects = 0, size = fl.v[R_OBJECT_SIZE] > 0 ? fl.v[R_OBJECT_SIZE] : 0;
  if (src == TICK) {
    bytes = fl.v[R_AMOUNT64] >= 0 ? fl.v[R_AMOUNT64] : fl.v[R_AMOUNT] >= 0 ? fl.v[R_AMOUNT] : 0;
    if (size > 0) objects = bytes / size;
  } else {
    if (!(size > 0)) return 0; /* no size, no estimate (not a runtime's event) */
    double sampled = -expm1(size * log1p(-SAMPLING_P)); /* 1 - q^size, the chance it is sampled */
    objects = 1.0 / sampled;
    bytes = size * objects;
  }
  if (!(bytes <= MAX_EVENT_BYTES) || !(size <= MAX_EVENT_BYTES)) return 0;
  struct table *t = &a->tables[src];
  struct type_entry *e = type_of(t, fl.type, fl.type_len); /* none (before V2): UNKNOWN_TYPE */
  if (!e) return -1;
  t->events++;
  e->t.bytes += bytes;
  e->t.objects += objects;
  e->t.samples++;
  if (!(size > 0)) e->sized = 0;
  uint32_t kind = dnt__u32_of(fl.v[R_KIND]); /* 0 small, 1 large, 2 pinned */
  if (kind == 1) e->t.large_bytes += bytes, e->t.large_objects += objects, e->t.large_samples++;
  else if (kind == 2) e->t.pinned_bytes += bytes, e->t.pinned_objects += objects, e->t.pinned_samples++;
  if (dnt_profile_add_stack_under(a->profiles[src], ev->thread_id, ev->timestamp,
                                  TYPE_LEAF_BASE + (uint64_t)(e - t->v), ev->stack ? ev->stack->frames : NULL,
                                  ev->stack ? ev->stack->nframes : 0, bytes) == UINT32_MAX)
    return -1;
  return 0;
}

static int allocs_on_event(void *ud, const ntr_event *ev) {
  struct dnt_allocs_analysis *a = ud;
  if (a->failed) return 1;
  dnt__clock_see(&a->clock, ev->timestamp);
  /* the method table of both profiles (they ignore the SampleProfiler's samples) */
  int rc = 0;
  for (int s = 0; s < SOURCES; s++) rc |= a->pcb.on_event(a->profiles[s], ev);
  if (rc) return 1;
  const ntr_metadata *md = ev->metadata;
  if (!md || (md->event_id != EV_ALLOCATION_TICK && md->event_id != EV_ALLOCATION_SAMPLED)) return 0;
  if (on_allocation(a, ev, md->event_id == EV_ALLOCATION_TICK ? TICK : SAMPLED) != 0) {
    a->failed = 1;
    return 1;
  }
  return 0;
}

/* ---- after the trace ---- */

static int by_bytes_desc(const void *x, const void *y) {
  const dnt_alloc_type *a = x, *b = y;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  return strcmp(a->name, b->name);
}

void dnt_allocs_analysis_finish(struct dnt_allocs_analysis *a) {
  if (a->finished) return;
  a->finished = 1;
  dnt_allocs_summary *s = &a->summary;
  memset(s, 0, sizeof *s);
  s->tick_events = a->tables[TICK].events;
  s->sampled_events = a->tables[SAMPLED].events;
  /* the randomized samples when there are any (the runtime's design prefers them: AllocationTick's
   * fixed stride can alias with a periodic allocation pattern), unless told otherwise */
  int src = a->wanted == DNT_ALLOCS_TICK      ? TICK
            : a->wanted == DNT_ALLOCS_SAMPLED ? SAMPLED
            : s->sampled_events                ? SAMPLED
                                               : TICK;
  a->chosen = src;
  const struct table *t = &a->tables[src];
  s->source = t->events == 0 ? "none" : src == SAMPLED ? "AllocationSampled" : "GCAllocationTick";
  s->samples = t->events;
  s->objects_known = t->n > 0;
  const struct dnt__clock *c = &a->clock;
  s->trace_ms = dnt__clock_session_ms(c); /* the session's seconds, the quiet ones too */
  a->sorted = malloc((t->n ? t->n : 1) * sizeof *a->sorted);
  if (!a->sorted) {
    a->failed = 1;
    return;
  }
  for (size_t i = 0; i < t->n; i++) {
    a->sorted[i] = t->v[i].t;
    if (src == TICK && !t->v[i].sized) {
      a->sorted[i].objects = 0; /* some ticks carried no object size (before V4): unknown */
      s->objects_known = 0;
    }
    s->bytes += t->v[i].t.bytes;
    s->objects += a->sorted[i].objects;
  }
  s->types = t->n;
  if (t->n) qsort(a->sorted, t->n, sizeof *a->sorted, by_bytes_desc);
  if (dnt_profile_finish(a->profiles[src]) != 0) a->failed = 1;
}

const dnt_alloc_type *dnt_allocs_types(const struct dnt_allocs_analysis *a, size_t *n) {
  *n = a->sorted ? a->summary.types : 0;
  return a->sorted;
}

const dnt_allocs_summary *dnt_allocs_get_summary(const struct dnt_allocs_analysis *a) { return &a->summary; }

const struct dnt_profile *dnt_allocs_profile(const struct dnt_allocs_analysis *a) { return a->profiles[a->chosen]; }

void dnt_allocs_analysis_stitch(struct dnt_allocs_analysis *a, int on) {
  for (int s = 0; s < SOURCES; s++) dnt_profile_set_tasks(a->profiles[s], on ? DNT_TASKS_STITCHED : DNT_TASKS_IGNORED);
}
