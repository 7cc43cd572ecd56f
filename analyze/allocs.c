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

#include "dnt-analyze.h"
#include "dnt-profile.h"

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
enum { EV_ALLOCATION_TICK = 10, EV_ALLOCATION_SAMPLED = 303 };
enum { TICK, SAMPLED, SOURCES };

#define SAMPLING_P (1.0 / 102400.0)
#define MAX_TYPE_NAME 1024      /* longer names are cut (a hostile trace's string) */
#define MAX_EVENT_BYTES 17592186044416.0 /* 2^44: an event claiming more is no runtime's */
#define UNKNOWN_TYPE "(unknown type)" /* AllocationTick before V2 names no type */

struct type_entry {
  dnt_alloc_type t;
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

struct dnt_allocs_analysis {
  const struct dnt_schema *schema;
  enum dnt_allocs_source wanted;
  dnt_record rec;
  uint32_t pointer_size;
  uint64_t qpc_freq, first_ts, last_ts;
  int have_time;
  struct table tables[SOURCES];
  struct dnt_profile *profiles[SOURCES]; /* the allocating stacks, weighed in bytes */
  ntr_callbacks pcb;                     /* the profiles' own callbacks, fed the same stream */
  int failed, finished, chosen;
  dnt_allocs_summary summary;
  dnt_alloc_type *sorted; /* after finish: the chosen source's types, most bytes first */
};

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
    dnt_profile_set_weight(a->profiles[s], DNT_WEIGHT_BYTES);
  }
  return a;
}

void dnt_allocs_analysis_free(struct dnt_allocs_analysis *a) {
  if (!a) return;
  dnt_record_release(&a->rec);
  for (int s = 0; s < SOURCES; s++) {
    for (size_t i = 0; i < a->tables[s].n; i++) free((char *)a->tables[s].v[i].t.name);
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

static uint32_t hash_name(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
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

/* The entry of the type named name (created empty), or NULL when out of memory. */
static struct type_entry *type_of(struct table *t, const char *name) {
  uint32_t h = hash_name(name);
  if ((t->n + 1) * 2 > t->index_cap && grow_index(t) != 0) return NULL;
  size_t j = h & (t->index_cap - 1);
  for (; t->index[j]; j = (j + 1) & (t->index_cap - 1)) {
    struct type_entry *e = &t->v[t->index[j] - 1];
    if (e->hash == h && strcmp(e->t.name, name) == 0) return e;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct type_entry *v = realloc(t->v, cap * sizeof *v);
    if (!v) return NULL;
    t->v = v;
    t->cap = cap;
  }
  char *copy = strdup(name);
  if (!copy) return NULL;
  struct type_entry *e = &t->v[t->n];
  memset(e, 0, sizeof *e);
  e->t.name = copy;
  e->hash = h;
  e->sized = 1;
  t->index[j] = (uint32_t)++t->n;
  return e;
}

/* ---- the stream ---- */

void dnt_allocs_analysis_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = dnt_allocs_on_trace;
  cb->on_thread = dnt_allocs_on_thread;
  cb->on_event = dnt_allocs_on_event;
  cb->on_sequence_point = dnt_allocs_on_sequence_point;
}

int dnt_allocs_on_trace(void *ud, const ntr_trace *t) {
  struct dnt_allocs_analysis *a = ud;
  a->pointer_size = t->pointer_size;
  a->qpc_freq = t->qpc_frequency;
  for (int s = 0; s < SOURCES; s++) a->pcb.on_trace(a->profiles[s], t);
  return 0;
}

int dnt_allocs_on_thread(void *ud, const ntr_thread *t) {
  struct dnt_allocs_analysis *a = ud;
  int rc = 0;
  for (int s = 0; s < SOURCES; s++) rc |= a->pcb.on_thread(a->profiles[s], t);
  return rc ? 1 : 0;
}

int dnt_allocs_on_sequence_point(void *ud, const ntr_sequence_point *sp) {
  struct dnt_allocs_analysis *a = ud;
  for (int s = 0; s < SOURCES; s++) a->pcb.on_sequence_point(a->profiles[s], sp);
  return 0;
}

static double num(const struct dnt_allocs_analysis *a, const char *name, double dflt) {
  double v;
  return dnt_record_num(&a->rec, name, &v) == 0 && isfinite(v) && v >= 0 ? v : dflt;
}

/* One allocation event, decoded: its estimated bytes and objects charged to its type and stack. */
static int on_allocation(struct dnt_allocs_analysis *a, const ntr_event *ev, int src) {
  const ntr_metadata *md = ev->metadata;
  const char *name;
  uint32_t nfields;
  const ntr_field *f = dnt_schema_lookup(a->schema, md->provider, md->event_id, md->version, &name, &nfields);
  if (!f) return 0;
  /* a short or odd payload keeps the fields decoded before the fault; a missing one reads as 0 */
  if (dnt_record_decode_layout(&a->rec, f, nfields, a->pointer_size == 4 ? 4 : 8, ev->payload, ev->payload_size) ==
      NTR_ENOMEM)
    return -1;
  double bytes, objects = 0, size = num(a, "ObjectSize", 0);
  if (src == TICK) {
    bytes = num(a, "AllocationAmount64", -1);
    if (bytes < 0) bytes = num(a, "AllocationAmount", 0);
    if (size > 0) objects = bytes / size;
  } else {
    if (!(size > 0)) return 0; /* no size, no estimate (not a runtime's event) */
    double sampled = -expm1(size * log1p(-SAMPLING_P)); /* 1 - q^size, the chance it is sampled */
    objects = 1.0 / sampled;
    bytes = size * objects;
  }
  if (!(bytes <= MAX_EVENT_BYTES) || !(size <= MAX_EVENT_BYTES)) return 0;
  const char *type = dnt_record_str(&a->rec, "TypeName");
  char cut[MAX_TYPE_NAME];
  if (!type || !*type) {
    type = UNKNOWN_TYPE;
  } else if (strlen(type) >= sizeof cut) {
    memcpy(cut, type, sizeof cut - 1);
    cut[sizeof cut - 1] = 0;
    type = cut;
  }
  struct table *t = &a->tables[src];
  struct type_entry *e = type_of(t, type);
  if (!e) return -1;
  t->events++;
  e->t.bytes += bytes;
  e->t.objects += objects;
  e->t.samples++;
  if (!(size > 0)) e->sized = 0;
  uint32_t kind = (uint32_t)num(a, "AllocationKind", 0); /* 0 small, 1 large, 2 pinned */
  if (kind == 1) e->t.large_bytes += bytes;
  else if (kind == 2) e->t.pinned_bytes += bytes;
  dnt_profile_add_event(a->profiles[src], ev, bytes);
  return 0;
}

int dnt_allocs_on_event(void *ud, const ntr_event *ev) {
  struct dnt_allocs_analysis *a = ud;
  if (a->failed) return 1;
  if (!a->have_time || ev->timestamp < a->first_ts) a->first_ts = ev->timestamp;
  if (!a->have_time || ev->timestamp > a->last_ts) a->last_ts = ev->timestamp;
  a->have_time = 1;
  /* the method table of both profiles (they ignore the SampleProfiler's samples) */
  int rc = 0;
  for (int s = 0; s < SOURCES; s++) rc |= a->pcb.on_event(a->profiles[s], ev);
  if (rc) return 1;
  const ntr_metadata *md = ev->metadata;
  if (!md || (md->event_id != EV_ALLOCATION_TICK && md->event_id != EV_ALLOCATION_SAMPLED) ||
      strcmp(md->provider, RUNTIME_PROVIDER) != 0)
    return 0;
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
  if (a->qpc_freq && a->have_time) s->trace_ms = (double)(a->last_ts - a->first_ts) * 1000.0 / (double)a->qpc_freq;
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
