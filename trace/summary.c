/* A trace's summary for `dntrace info TRACE`: its header, how many events of which provider and
 * kind, on which threads, over what time. A consumer of the parser's callbacks: memory grows with
 * the distinct metadata records, providers and threads, never with the events. */
#include <stdlib.h>
#include <string.h>

#include "dnt-trace.h"

#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"
#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"

/* Open addressing from a 64-bit key to an index + 1 (0: empty). */
struct dnt__summary_map {
  uint64_t *keys;
  uint32_t *vals;
  size_t cap, n;
};

static uint32_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (uint32_t)k;
}

static uint32_t hash_str(const char *s, uint32_t h) {
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

/* The slot of key: where it is, or the empty slot where it would go. */
static size_t map_slot(const struct dnt__summary_map *m, uint64_t key) {
  size_t j = mix64(key) & (m->cap - 1);
  while (m->vals[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
  return j;
}

/* The value of key, or 0. */
static uint32_t map_get(const struct dnt__summary_map *m, uint64_t key) {
  return m->cap ? m->vals[map_slot(m, key)] : 0;
}

/* Sets key to val (an index + 1). 0, or -1 when out of memory. */
static int map_put(struct dnt__summary_map *m, uint64_t key, uint32_t val) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 256;
    struct dnt__summary_map g = {calloc(cap, sizeof *g.keys), calloc(cap, sizeof *g.vals), cap, m->n};
    if (!g.keys || !g.vals) {
      free(g.keys);
      free(g.vals);
      return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->vals[i]) {
        size_t j = map_slot(&g, m->keys[i]);
        g.keys[j] = m->keys[i];
        g.vals[j] = m->vals[i];
      }
    free(m->keys);
    free(m->vals);
    *m = g;
  }
  size_t j = map_slot(m, key);
  if (!m->vals[j]) m->n++;
  m->keys[j] = key;
  m->vals[j] = val;
  return 0;
}

static void map_release(struct dnt__summary_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

void dnt_summary_init(dnt_summary *s) {
  memset(s, 0, sizeof *s);
  s->maps = calloc(4, sizeof *s->maps);
  if (!s->maps) s->oom = 1;
}

void dnt_summary_release(dnt_summary *s) {
  for (size_t i = 0; i < s->nproviders; i++) free(s->providers[i].name);
  for (size_t i = 0; i < s->nkinds; i++) free(s->kinds[i].name);
  for (size_t i = 0; i < s->nthreads; i++) free(s->threads[i].name);
  free(s->providers);
  free(s->kinds);
  free(s->threads);
  free(s->runtime.path);
  if (s->maps)
    for (int i = 0; i < 4; i++) map_release(&s->maps[i]);
  free(s->maps);
  memset(s, 0, sizeof *s);
}

enum { MAP_METADATA, MAP_KIND, MAP_PROVIDER, MAP_THREAD };

/* Grows an array of n items with room for cap by one; 0, or -1 (s->oom) when out of memory. */
static int grow(dnt_summary *s, void **arr, size_t n, size_t *cap, size_t size) {
  if (n < *cap) return 0;
  size_t c = *cap ? *cap * 2 : 16;
  void *g = realloc(*arr, c * size);
  if (!g) return s->oom = 1, -1;
  *arr = g;
  *cap = c;
  return 0;
}

/* The index of provider name, added when new; (size_t)-1 when out of memory. Names collide in
 * the hash only by bad luck: the chain is walked by comparing names (keys are hash + probe). */
static size_t provider_of(dnt_summary *s, const char *name) {
  uint32_t h = hash_str(name, 2166136261u);
  for (uint64_t probe = 0;; probe++) {
    uint32_t v = map_get(&s->maps[MAP_PROVIDER], (uint64_t)h | probe << 32);
    if (!v) break;
    if (strcmp(s->providers[v - 1].name, name) == 0) return v - 1;
  }
  if (grow(s, (void **)&s->providers, s->nproviders, &s->capproviders, sizeof *s->providers)) return (size_t)-1;
  char *copy = strdup(name);
  if (!copy) return s->oom = 1, (size_t)-1;
  uint64_t probe = 0;
  while (map_get(&s->maps[MAP_PROVIDER], (uint64_t)h | probe << 32)) probe++;
  if (map_put(&s->maps[MAP_PROVIDER], (uint64_t)h | probe << 32, (uint32_t)s->nproviders + 1)) {
    free(copy);
    return s->oom = 1, (size_t)-1;
  }
  s->providers[s->nproviders] = (dnt_summary_provider){copy, 0};
  return s->nproviders++;
}

/* The index of the kind (provider, event id, name), added when new; (size_t)-1 when out of
 * memory. */
static size_t kind_of(dnt_summary *s, const char *provider, uint32_t event_id, const char *name) {
  size_t p = provider_of(s, provider);
  if (p == (size_t)-1) return p;
  uint32_t h = hash_str(name, (uint32_t)p * 2654435761u ^ event_id);
  for (uint64_t probe = 0;; probe++) {
    uint32_t v = map_get(&s->maps[MAP_KIND], (uint64_t)h | probe << 32);
    if (!v) break;
    const dnt_summary_kind *k = &s->kinds[v - 1];
    if (k->provider_index == p && k->event_id == event_id && strcmp(k->name, name) == 0) return v - 1;
  }
  if (grow(s, (void **)&s->kinds, s->nkinds, &s->capkinds, sizeof *s->kinds)) return (size_t)-1;
  char *copy = strdup(name);
  if (!copy) return s->oom = 1, (size_t)-1;
  uint64_t probe = 0;
  while (map_get(&s->maps[MAP_KIND], (uint64_t)h | probe << 32)) probe++;
  if (map_put(&s->maps[MAP_KIND], (uint64_t)h | probe << 32, (uint32_t)s->nkinds + 1)) {
    free(copy);
    return s->oom = 1, (size_t)-1;
  }
  s->kinds[s->nkinds] = (dnt_summary_kind){NULL, p, event_id, copy, 0};
  return s->nkinds++;
}

static dnt_summary_thread *thread_of(dnt_summary *s, uint64_t id) {
  uint32_t v = map_get(&s->maps[MAP_THREAD], id);
  if (v) return &s->threads[v - 1];
  if (grow(s, (void **)&s->threads, s->nthreads, &s->capthreads, sizeof *s->threads)) return NULL;
  if (map_put(&s->maps[MAP_THREAD], id, (uint32_t)s->nthreads + 1)) return s->oom = 1, NULL;
  s->threads[s->nthreads] = (dnt_summary_thread){id, NULL, 0, 0};
  return &s->threads[s->nthreads++];
}

static int on_trace(void *ud, const ntr_trace *t) {
  dnt_summary *s = ud;
  s->header = *t;
  s->header.nkeyvalues = 0; /* the parser's, valid during the call only */
  s->header.keyvalues = NULL;
  s->has_header = 1;
  return 0;
}

static int on_metadata(void *ud, const ntr_metadata *md) {
  dnt_summary *s = ud;
  if (s->oom) return -1;
  char name[512]; /* as TraceEvent names it ("Request/Start"), as `events` shows it */
  size_t k = kind_of(s, md->provider ? md->provider : "", md->event_id, dnt_event_te_name(md, name, sizeof name, NULL));
  if (k == (size_t)-1 || map_put(&s->maps[MAP_METADATA], md->id, (uint32_t)k + 1)) return s->oom = 1, -1;
  return 0;
}

static int on_thread(void *ud, const ntr_thread *t) {
  dnt_summary *s = ud;
  if (s->oom) return -1;
  if (!t->name || !t->name[0]) return 0;
  /* events name V6 threads by their OS id when the row has one (ntr_event.thread_id) */
  dnt_summary_thread *th = thread_of(s, t->has_os_thread_id ? t->os_thread_id : t->index);
  if (!th) return -1;
  char *copy = strdup(t->name);
  if (!copy) return s->oom = 1, -1;
  free(th->name);
  th->name = copy;
  return 0;
}

/* RuntimeInformation (event 187 of the runtime and of its rundown): ClrInstanceID, Sku, the BCL's
 * and the VM's major.minor.build.qfe (u16 each), StartupFlags (u32), StartupMode (u8),
 * CommandLine, ComObjectGuid, RuntimeDllPath. The first one that decodes is kept. */
static void runtime_info(dnt_summary *s, const ntr_event *ev) {
  ntr_payload c;
  uint16_t v[10];
  uint32_t flags;
  uint8_t mode;
  char cmdline[1024], path[1024];
  size_t cmdlen = 0, pathlen = 0;
  ntr_payload_init(&c, ev->payload, ev->payload_size);
  for (int i = 0; i < 10; i++)
    if (ntr_payload_u16(&c, &v[i])) return;
  if (ntr_payload_u32(&c, &flags) || ntr_payload_u8(&c, &mode) ||
      ntr_payload_utf16z(&c, cmdline, sizeof cmdline, &cmdlen) || ntr_payload_skip(&c, 16) ||
      ntr_payload_utf16z(&c, path, sizeof path, &pathlen))
    return;
  char *p = strdup(path);
  if (!p) {
    s->oom = 1;
    return;
  }
  for (int i = 0; i < 4; i++) {
    s->runtime.bcl[i] = v[2 + i];
    s->runtime.vm[i] = v[6 + i];
  }
  s->runtime.path = p;
  s->has_runtime = 1;
}

/* A ThreadName event (ThreadId UInt64, Name String) names a thread the trace has events of. */
static void thread_name(dnt_summary *s, const ntr_event *ev) {
  ntr_payload c;
  uint64_t tid;
  char name[256];
  ntr_payload_init(&c, ev->payload, ev->payload_size);
  if (ntr_payload_u64(&c, &tid) || ntr_payload_utf16z(&c, name, sizeof name, NULL) || !name[0]) return;
  uint32_t v = map_get(&s->maps[MAP_THREAD], tid);
  if (!v) return;
  char *copy = strdup(name);
  if (!copy) {
    s->oom = 1;
    return;
  }
  free(s->threads[v - 1].name);
  s->threads[v - 1].name = copy;
}

static int on_event(void *ud, const ntr_event *ev) {
  dnt_summary *s = ud;
  if (s->oom) return -1;
  if (s->events == 0 || ev->timestamp < s->first_timestamp) s->first_timestamp = ev->timestamp;
  if (s->events == 0 || ev->timestamp > s->last_timestamp) s->last_timestamp = ev->timestamp;
  s->events++;
  uint32_t k = ev->metadata ? map_get(&s->maps[MAP_METADATA], ev->metadata_id) : 0;
  if (k) {
    dnt_summary_kind *kind = &s->kinds[k - 1];
    kind->count++;
    s->providers[kind->provider_index].events++;
  } else {
    s->unknown_events++;
  }
  const ntr_metadata *md = ev->metadata;
  if (md && md->provider && md->event_name && strcmp(md->provider, NTR_NAMES_PROVIDER) == 0 &&
      strcmp(md->event_name, NTR_NAMES_EVENT) == 0) { /* dntrace collect's names: not the thread's events */
    thread_name(s, ev);
    return s->oom ? -1 : 0;
  }
  dnt_summary_thread *th = thread_of(s, ev->thread_id);
  if (!th) return -1;
  th->events++;
  if (md && md->event_id == 0 && md->provider && strcmp(md->provider, SAMPLER) == 0) {
    th->samples++;
    s->samples++;
  } else if (md && md->event_id == 187 && !s->has_runtime && md->provider &&
             (strcmp(md->provider, RUNTIME) == 0 || strcmp(md->provider, RUNDOWN) == 0)) {
    runtime_info(s, ev);
  }
  return s->oom ? -1 : 0;
}

void dnt_summary_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = on_trace;
  cb->on_metadata = on_metadata;
  cb->on_thread = on_thread;
  cb->on_event = on_event;
}

static int providers_by_count(const void *a, const void *b) {
  const dnt_summary_provider *x = a, *y = b;
  if (x->events != y->events) return x->events > y->events ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int kinds_by_count(const void *a, const void *b) {
  const dnt_summary_kind *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  int c = strcmp(x->provider, y->provider);
  if (c) return c;
  if (x->event_id != y->event_id) return x->event_id < y->event_id ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int threads_by_samples(const void *a, const void *b) {
  const dnt_summary_thread *x = a, *y = b;
  if (x->samples != y->samples) return x->samples > y->samples ? -1 : 1;
  if (x->events != y->events) return x->events > y->events ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

int dnt_summary_finish(dnt_summary *s) {
  if (s->oom) return -1;
  for (size_t i = 0; i < s->nkinds; i++) s->kinds[i].provider = s->providers[s->kinds[i].provider_index].name;
  if (s->nproviders) qsort(s->providers, s->nproviders, sizeof *s->providers, providers_by_count);
  if (s->nkinds) qsort(s->kinds, s->nkinds, sizeof *s->kinds, kinds_by_count);
  if (s->nthreads) qsort(s->threads, s->nthreads, sizeof *s->threads, threads_by_samples);
  /* the indexes above are positions before the sort: no more events from here */
  for (int i = 0; i < 4; i++) map_release(&s->maps[i]);
  for (size_t i = 0; i < s->nkinds; i++) s->kinds[i].provider_index = (size_t)-1;
  return 0;
}
