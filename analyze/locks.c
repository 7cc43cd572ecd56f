/* Lock contention: each wait of a thread for a lock, by lock and by waiting stack. The rules
 * (the runtime provider's Contention keyword 0x4000, informational; a thread logs both events of
 * its wait, in order, so a wait is paired on its own thread):
 *
 *   ContentionStart (81)  a thread begins to wait. V2 (.NET 8+) names the lock (LockID), the
 *                         object locked (AssociatedObjectID) and the thread owning it
 *                         (LockOwnerThreadID); before, the lock is not named. Its stack is the
 *                         waiting stack. A Start while the thread already waits replaces that
 *                         wait, counted unpaired (its Stop was lost).
 *   ContentionStop (91)   the wait is over: its length is V1's DurationNs (.NET 8+, measured by
 *                         the runtime), else the Stop's time less the Start's. Both are kept: the
 *                         timestamps' sum beside the runtime's says how far they agree. A Stop
 *                         with no Start on its thread (the wait began before the trace) is
 *                         counted unpaired.
 *   ContentionFlags       1: a native lock of the runtime's own, else a managed one (Monitor,
 *                         System.Threading.Lock).
 *   ContentionLockCreated (90)  counted (a lock object made for contention, .NET 8+).
 *
 * A wait still open when the trace ends is unpaired. Memory grows with the locks, the threads and
 * their stacks, never with the events. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"

enum { EV_START = 81, EV_LOCK_CREATED = 90, EV_STOP = 91 };
#define MAX_LOCKS 1000000 /* past this many, new locks share the unnamed lock's row */
#define OWNERS 4

struct lock {
  dnt_lock l;
  struct {
    uint64_t tid, n;
  } owners[OWNERS];
};

struct waiter {
  uint64_t tid;
  int waiting;
  uint64_t ts, lock_id, object_id, owner;
  int native;
  uint64_t *frames; /* the waiting stack, copied: the parser's is gone by the Stop */
  size_t nframes, cap;
};

struct dnt_locks_analysis {
  struct dnt__stacked base; /* first: the callbacks take the analysis for it */
  struct lock *locks;
  size_t nlocks, caplocks;
  size_t *table;
  size_t table_cap;
  struct waiter *threads;
  size_t nthreads, capthreads;
  size_t *ttable;
  size_t ttable_cap;
  dnt_lock *sorted;
  dnt_locks_summary summary;
};

static void label(void *ud, size_t key, char *buf, size_t cap) {
  struct dnt_locks_analysis *a = ud;
  const dnt_lock *l = key < a->nlocks ? &a->locks[key].l : NULL;
  if (!l || !l->lock_id)
    snprintf(buf, cap, "Contention (lock not named: the runtime names it from .NET 8)");
  else if (l->object_id)
    snprintf(buf, cap, "Contention on lock 0x%llx (object 0x%llx)", (unsigned long long)l->lock_id,
             (unsigned long long)l->object_id);
  else
    snprintf(buf, cap, "Contention on lock 0x%llx", (unsigned long long)l->lock_id);
}

struct dnt_locks_analysis *dnt_locks_analysis_new(const struct dnt_schema *schema) {
  struct dnt_locks_analysis *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  if (dnt__stacked_init(&a->base, schema, label, a, 1,
                             "time waited for locks, one sample per wait (ContentionStart to Stop) at its stack") != 0) {
    dnt_locks_analysis_free(a);
    return NULL;
  }
  return a;
}

void dnt_locks_analysis_free(struct dnt_locks_analysis *a) {
  if (!a) return;
  for (size_t i = 0; i < a->nthreads; i++) free(a->threads[i].frames);
  free(a->threads);
  free(a->ttable);
  free(a->locks);
  free(a->table);
  free(a->sorted);
  dnt__stacked_release(&a->base);
  free(a);
}

int dnt_locks_analysis_failed(const struct dnt_locks_analysis *a) { return a->base.failed ? -ENOMEM : 0; }

static uint32_t hash64(uint64_t v) { return (uint32_t)((v * 0x9E3779B97F4A7C15ull) >> 32); }

/* Grows an open-addressing table of index + 1 for one more item; -1 when out of memory. */
static int table_room(size_t **table, size_t *cap, size_t n, uint64_t (*key)(const void *, size_t), const void *items) {
  if ((n + 1) * 2 <= *cap) return 0;
  size_t c = *cap ? *cap * 2 : 64;
  size_t *t = calloc(c, sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < n; i++) {
    size_t j = hash64(key(items, i)) & (c - 1);
    while (t[j]) j = (j + 1) & (c - 1);
    t[j] = i + 1;
  }
  free(*table);
  *table = t;
  *cap = c;
  return 0;
}

static uint64_t lock_key(const void *items, size_t i) { return ((const struct lock *)items)[i].l.lock_id; }
static uint64_t thread_key(const void *items, size_t i) { return ((const struct waiter *)items)[i].tid; }

/* The index of the lock, created when new; -1 when out of memory. */
static long lock_of(struct dnt_locks_analysis *a, uint64_t id, uint64_t object_id) {
  if (a->nlocks >= MAX_LOCKS) id = 0;
  if (table_room(&a->table, &a->table_cap, a->nlocks, lock_key, a->locks) != 0) return -1;
  size_t j = hash64(id) & (a->table_cap - 1);
  for (; a->table[j]; j = (j + 1) & (a->table_cap - 1))
    if (a->locks[a->table[j] - 1].l.lock_id == id) return (long)a->table[j] - 1;
  if (a->nlocks == a->caplocks) {
    size_t cap = a->caplocks ? a->caplocks * 2 : 32;
    struct lock *l = realloc(a->locks, cap * sizeof *l);
    if (!l) return -1;
    a->locks = l;
    a->caplocks = cap;
  }
  struct lock *l = &a->locks[a->nlocks];
  memset(l, 0, sizeof *l);
  l->l.lock_id = id;
  l->l.object_id = id ? object_id : 0;
  a->table[j] = ++a->nlocks;
  return (long)a->nlocks - 1;
}

static struct waiter *thread_of(struct dnt_locks_analysis *a, uint64_t tid) {
  if (table_room(&a->ttable, &a->ttable_cap, a->nthreads, thread_key, a->threads) != 0) return NULL;
  size_t j = hash64(tid) & (a->ttable_cap - 1);
  for (; a->ttable[j]; j = (j + 1) & (a->ttable_cap - 1))
    if (a->threads[a->ttable[j] - 1].tid == tid) return &a->threads[a->ttable[j] - 1];
  if (a->nthreads == a->capthreads) {
    size_t cap = a->capthreads ? a->capthreads * 2 : 16;
    struct waiter *t = realloc(a->threads, cap * sizeof *t);
    if (!t) return NULL;
    a->threads = t;
    a->capthreads = cap;
  }
  struct waiter *t = &a->threads[a->nthreads];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  a->ttable[j] = ++a->nthreads;
  return t;
}

static int on_start(struct dnt_locks_analysis *a, const ntr_event *ev) {
  struct waiter *t = thread_of(a, ev->thread_id);
  if (!t) return -1;
  if (t->waiting) a->summary.unpaired++;
  t->waiting = 1;
  t->ts = ev->timestamp;
  t->native = dnt__record_u64(&a->base.rec, "ContentionFlags") == 1;
  t->lock_id = dnt__record_u64(&a->base.rec, "LockID");
  t->object_id = dnt__record_u64(&a->base.rec, "AssociatedObjectID");
  t->owner = dnt__record_u64(&a->base.rec, "LockOwnerThreadID");
  t->nframes = 0;
  size_t n = ev->stack ? ev->stack->nframes : 0;
  if (n > t->cap) {
    uint64_t *f = realloc(t->frames, n * sizeof *f);
    if (!f) return -1;
    t->frames = f;
    t->cap = n;
  }
  if (n) memcpy(t->frames, ev->stack->frames, n * sizeof *t->frames);
  t->nframes = n;
  return 0;
}

static int on_stop(struct dnt_locks_analysis *a, const ntr_event *ev) {
  struct waiter *t = thread_of(a, ev->thread_id);
  if (!t) return -1;
  if (!t->waiting) {
    a->summary.unpaired++;
    return 0;
  }
  t->waiting = 0;
  double ts_ms = ev->timestamp > t->ts && a->base.clock.qpc_freq
                     ? (double)(ev->timestamp - t->ts) * 1000.0 / (double)a->base.clock.qpc_freq
                     : 0;
  double ns, ms = ts_ms;
  int measured = dnt_record_num(&a->base.rec, "DurationNs", &ns) == 0 && ns >= 0 && ns < 1e15; /* NaN fails too */
  if (measured) ms = ns / 1e6, a->summary.with_duration++;
  long li = lock_of(a, t->lock_id, t->object_id);
  if (li < 0) return -1;
  struct lock *l = &a->locks[li];
  l->l.waits++;
  l->l.wait_ms += ms;
  l->l.ts_wait_ms += ts_ms;
  if (ms > l->l.max_wait_ms) l->l.max_wait_ms = ms;
  if (t->native) l->l.native++;
  if (t->owner) {
    int k = 0;
    while (k < OWNERS && l->owners[k].n && l->owners[k].tid != t->owner) k++;
    if (k < OWNERS) l->owners[k].tid = t->owner, l->owners[k].n++;
  }
  dnt__event_stacks_add(&a->base.stacks, (size_t)li, t->tid, t->ts, t->frames, t->nframes, ms);
  return a->base.stacks.oom ? -1 : 0;
}

static int locks_on_event(void *ud, const ntr_event *ev) {
  struct dnt_locks_analysis *a = ud;
  int look = dnt__stacked_on_event(&a->base, ev);
  if (look <= 0) return look < 0;
  const ntr_metadata *md = ev->metadata;
  switch (md->event_id) {
  case EV_START: case EV_STOP: break;
  case EV_LOCK_CREATED: a->summary.locks_created++; return 0;
  default: return 0;
  }
  uint32_t nfields;
  const ntr_field *f = dnt__layout(&a->base.layouts, a->base.schema, md, &nfields);
  /* a short or odd payload keeps the fields decoded before the fault; a missing one reads as absent */
  if (dnt_record_decode_layout(&a->base.rec, f, f ? nfields : 0, dnt__clock_ptr(&a->base.clock), ev->payload,
                               ev->payload_size) == NTR_ENOMEM)
    return a->base.failed = 1, 1;
  int rc = md->event_id == EV_START ? on_start(a, ev) : on_stop(a, ev);
  if (rc) return a->base.failed = 1, 1;
  return 0;
}

void dnt_locks_analysis_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = dnt__stacked_on_trace;
  cb->on_thread = dnt__stacked_on_thread;
  cb->on_sequence_point = dnt__stacked_on_sequence_point;
  cb->on_event = locks_on_event;
}

/* ---- after the trace ---- */

static int by_wait(const void *x, const void *y) {
  const dnt_lock *a = x, *b = y;
  if (a->wait_ms != b->wait_ms) return a->wait_ms > b->wait_ms ? -1 : 1;
  return (a->lock_id > b->lock_id) - (a->lock_id < b->lock_id);
}

void dnt_locks_analysis_finish(struct dnt_locks_analysis *a, size_t top_stacks) {
  if (a->base.finished) return;
  a->base.finished = 1;
  dnt_locks_summary *s = &a->summary;
  for (size_t i = 0; i < a->nthreads; i++) {
    if (a->threads[i].waiting) s->unpaired++; /* still waiting when the trace ended */
    s->threads++;
  }
  if (dnt__event_stacks_finish(&a->base.stacks, a->nlocks, top_stacks, 1) != 0) a->base.failed = 1;
  a->sorted = calloc(a->nlocks ? a->nlocks : 1, sizeof *a->sorted);
  if (!a->sorted) {
    a->base.failed = 1;
    return;
  }
  for (size_t i = 0; i < a->nlocks; i++) {
    struct lock *l = &a->locks[i];
    size_t best = 0;
    for (size_t k = 1; k < OWNERS; k++)
      if (l->owners[k].n > l->owners[best].n) best = k;
    l->l.owner_thread = l->owners[best].tid;
    l->l.owner_name = l->l.owner_thread ? dnt_profile_thread_name(a->base.stacks.prof, l->l.owner_thread) : NULL;
    if (!a->base.failed) {
      const struct dnt__key_stacks *ks = &a->base.stacks.by_key[i];
      l->l.stacks = ks->v;
      l->l.nstacks = ks->n;
      l->l.other_stacks = ks->other_count;
    }
    a->sorted[i] = l->l;
    s->waits += l->l.waits;
    s->wait_ms += l->l.wait_ms;
    s->ts_wait_ms += l->l.ts_wait_ms;
    if (l->l.max_wait_ms > s->max_wait_ms) s->max_wait_ms = l->l.max_wait_ms;
  }
  qsort(a->sorted, a->nlocks, sizeof *a->sorted, by_wait);
  s->locks = a->nlocks;
  const struct dnt__clock *c = &a->base.clock;
  s->trace_ms = dnt__clock_session_ms(c);
}

const dnt_lock *dnt_locks_list(const struct dnt_locks_analysis *a, size_t *n) {
  *n = a->sorted ? a->nlocks : 0;
  return a->sorted;
}

const dnt_locks_summary *dnt_locks_get_summary(const struct dnt_locks_analysis *a) { return &a->summary; }

const dnt_analysis_stack *dnt_locks_stacks(const struct dnt_locks_analysis *a, size_t *n) {
  *n = a->base.failed ? 0 : a->base.stacks.all.n;
  return a->base.stacks.all.v;
}

const struct dnt_profile *dnt_locks_profile(const struct dnt_locks_analysis *a) { return a->base.stacks.prof; }

void dnt_locks_analysis_stitch(struct dnt_locks_analysis *a, int on) { dnt__event_stacks_stitch(&a->base.stacks, on); }
