/* threads.c: the managed threads (dnt-core.h), as the Thread contract (version 1) walks them: the
 * ThreadStore global holds the address of the store's pointer; the store's FirstThreadLink is the
 * first thread's link, and a link is the field LinkNext inside a Thread, so the Thread is the link
 * less that offset; each Thread's LinkNext is the next link, 0 at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define MAX_LIST 100000

struct offsets {
  uint64_t first, count, unstarted, background, pending, dead;
  uint64_t id, os_id, state, gc_disabled, locals, frame, last_thrown, link;
  uint64_t alloc_context, gc_context, ptr, limit;
};

static int offsets_of(const dnt_clr *r, struct offsets *o, char *err, size_t cap) {
  static const struct {
    const char *type, *field;
    size_t at;
  } want[] = {
      {"ThreadStore", "FirstThreadLink", offsetof(struct offsets, first)},
      {"ThreadStore", "ThreadCount", offsetof(struct offsets, count)},
      {"ThreadStore", "UnstartedCount", offsetof(struct offsets, unstarted)},
      {"ThreadStore", "BackgroundCount", offsetof(struct offsets, background)},
      {"ThreadStore", "PendingCount", offsetof(struct offsets, pending)},
      {"ThreadStore", "DeadCount", offsetof(struct offsets, dead)},
      {"Thread", "Id", offsetof(struct offsets, id)},
      {"Thread", "OSId", offsetof(struct offsets, os_id)},
      {"Thread", "State", offsetof(struct offsets, state)},
      {"Thread", "PreemptiveGCDisabled", offsetof(struct offsets, gc_disabled)},
      {"Thread", "RuntimeThreadLocals", offsetof(struct offsets, locals)},
      {"Thread", "Frame", offsetof(struct offsets, frame)},
      {"Thread", "LastThrownObject", offsetof(struct offsets, last_thrown)},
      {"Thread", "LinkNext", offsetof(struct offsets, link)},
      {"RuntimeThreadLocals", "AllocContext", offsetof(struct offsets, alloc_context)},
      {"EEAllocContext", "GCAllocationContext", offsetof(struct offsets, gc_context)},
      {"GCAllocContext", "Pointer", offsetof(struct offsets, ptr)},
      {"GCAllocContext", "Limit", offsetof(struct offsets, limit)},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (dnt_clr_field(r, want[i].type, want[i].field, (uint64_t *)((char *)o + want[i].at)) != 0) {
      snprintf(err, cap, "the runtime's descriptor has no %s.%s", want[i].type, want[i].field);
      return -1;
    }
  return 0;
}


static int one(const dnt_clr *r, const struct offsets *o, uint64_t t, struct dnt_clr_thread *th) {
  memset(th, 0, sizeof *th);
  th->address = t;
  th->dbg = -1;
  uint32_t disabled = 0;
  uint64_t locals = 0, handle = 0;
  if (clr_u32(r, t + o->id, &th->id) || clr_u32(r, t + o->os_id, &th->os_id) || clr_u32(r, t + o->state, &th->state) ||
      clr_u32(r, t + o->gc_disabled, &disabled) || clr_u64(r, t + o->frame, &th->frame) ||
      clr_u64(r, t + o->locals, &locals))
    return -1;
  th->cooperative = disabled & 1;
  uint64_t ctx = locals + o->alloc_context + o->gc_context;
  if (locals && (clr_u64(r, ctx + o->ptr, &th->alloc_ptr) || clr_u64(r, ctx + o->limit, &th->alloc_limit)))
    th->alloc_ptr = th->alloc_limit = 0; /* a context the core lacks: shown empty */
  /* the last thrown object: a handle, the address of the slot holding the object */
  if (clr_u64(r, t + o->last_thrown, &handle) == 0 && handle && clr_u64(r, handle, &th->last_thrown) != 0)
    th->last_thrown = 0;
  return 0;
}

int dnt_clr_threads_read(const dnt_clr *r, struct dnt_clr_threads *ts, char *err, size_t cap) {
  memset(ts, 0, sizeof *ts);
  if (dnt_clr_contract(r, "Thread") != 1) {
    snprintf(err, cap, "the runtime's Thread contract is version %d, not the 1 this reader knows",
             dnt_clr_contract(r, "Thread"));
    return -1;
  }
  struct offsets o;
  if (offsets_of(r, &o, err, cap) != 0) return -1;
  uint64_t store_at, store, link, finalizer_at, finalizer = 0, gc_at, gc = 0, domain_at;
  if (dnt_clr_global(r, "ThreadStore", &store_at) != 0 || clr_u64(r, store_at, &store) != 0 || !store) {
    snprintf(err, cap, "the core does not hold the runtime's thread store");
    return -1;
  }
  if (clr_u32(r, store + o.count, &ts->count) || clr_u32(r, store + o.unstarted, &ts->unstarted) ||
      clr_u32(r, store + o.background, &ts->background) || clr_u32(r, store + o.pending, &ts->pending) ||
      clr_u32(r, store + o.dead, &ts->dead) || clr_u64(r, store + o.first, &link)) {
    snprintf(err, cap, "the core does not hold the runtime's thread store");
    return -1;
  }
  if (dnt_clr_global(r, "FinalizerThread", &finalizer_at) == 0) clr_u64(r, finalizer_at, &finalizer);
  if (dnt_clr_global(r, "GCThread", &gc_at) == 0) clr_u64(r, gc_at, &gc);
  if (dnt_clr_global(r, "AppDomain", &domain_at) == 0) clr_u64(r, domain_at, &ts->domain);
  const struct dnt_core_thread *os;
  size_t nos = dnt_core_threads(dnt__clr_core(r), &os);
  size_t capv = 0;
  while (link) {
    if (ts->n == MAX_LIST || link < o.link) {
      snprintf(err, cap, "the runtime's thread list does not end (or is damaged)");
      dnt_clr_threads_release(ts);
      return -1;
    }
    uint64_t t = link - o.link;
    if (ts->n == capv) {
      capv = capv ? capv * 2 : 32;
      struct dnt_clr_thread *v = realloc(ts->v, capv * sizeof *v);
      if (!v) {
        snprintf(err, cap, "out of memory");
        dnt_clr_threads_release(ts);
        return -1;
      }
      ts->v = v;
    }
    struct dnt_clr_thread *th = &ts->v[ts->n];
    if (one(r, &o, t, th) != 0 || clr_u64(r, t + o.link, &link) != 0) {
      snprintf(err, cap, "the core does not hold the runtime's thread at 0x%llx", (unsigned long long)t);
      dnt_clr_threads_release(ts);
      return -1;
    }
    th->finalizer = t == finalizer;
    th->gc = gc && t == gc;
    for (size_t k = 0; k < nos; k++)
      if (os[k].tid == th->os_id) {
        th->dbg = (int)k;
        break;
      }
    ts->n++;
  }
  return 0;
}

void dnt_clr_threads_release(struct dnt_clr_threads *t) {
  free(t->v);
  memset(t, 0, sizeof *t);
}
