#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "profile-int.h"
#include "dnt-trace.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"
#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"
#define EVENTPIPE "Microsoft-DotNETCore-EventPipe"
#define TPL "System.Threading.Tasks.TplEventSource"

/* Out of memory is sticky: p->oom is set, every later call does nothing, the load reports it and
 * the queries answer as for an empty profile. */

/* A tiny growable array `arr` of `n` items with room for `cap`; on failure p->oom is set and the
 * enclosing function returns (with `...` as its value, if any). */
#define GROW(p, arr, n, cap, ...)                                              \
  do {                                                                         \
    if ((n) == (cap)) {                                                        \
      size_t cap_ = (cap) ? (cap) * 2 : 64;                                    \
      void *grown_ = realloc((arr), cap_ * sizeof *(arr));                     \
      if (!grown_) {                                                           \
        (p)->oom = 1;                                                          \
        return __VA_ARGS__;                                                    \
      }                                                                        \
      (arr) = grown_;                                                          \
      (cap) = cap_;                                                            \
    }                                                                          \
  } while (0)

static uint32_t hash_bytes(const void *p, size_t n, uint32_t h) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

struct dnt_profile *dnt_profile_new(void) {
  struct dnt_profile *p = calloc(1, sizeof *p);
  if (p) p->sample_ms = 1.0;
  return p;
}

void dnt_profile_free(struct dnt_profile *p) {
  if (!p) return;
  dnt__methods_release(&p->methods);
  dnt__thread_names_release(&p->thread_names);
  for (size_t i = 0; i < p->nnames; i++) free(p->names[i]);
  free(p->frames);
  free(p->stacks);
  free(p->stack_table);
  free(p->counts);
  free(p->count_table);
  free(p->names);
  free(p->name_table);
  free(p->frame_names);
  free(p->threads);
  free(p->thread_samples);
  free(p->timeline);
  free(p->pend);
  free(p->stack_cache);
  free(p->command_line);
  for (size_t i = 0; i < 2 * p->nlabels; i++) free(p->labels[i]);
  free(p->labels);
  free(p->tstates);
  free(p->tstate_table);
  free(p->thread_ms);
  dnt__acts_release(&p->acts);
  free(p);
}

/* ---- interning ---- */

static int rehash_stacks(struct dnt_profile *p) {
  size_t cap = p->stack_table_cap ? p->stack_table_cap * 2 : 1024;
  uint32_t *t = calloc(cap, sizeof *t);
  if (!t) return p->oom = 1, -1;
  for (size_t i = 0; i < p->nstacks; i++) {
    size_t j = p->stacks[i].hash & (cap - 1);
    while (t[j]) j = (j + 1) & (cap - 1);
    t[j] = (uint32_t)i + 1;
  }
  free(p->stack_table);
  p->stack_table = t;
  p->stack_table_cap = cap;
  return 0;
}

/* A hash of a stack's addresses a word at a time: analyses intern deep stacks once an event. */
static uint32_t hash_ips(const uint64_t *ips, uint32_t n, uint32_t h) {
  for (uint32_t i = 0; i < n; i++) {
    h = (h ^ (uint32_t)ips[i]) * 16777619u;
    h = (h ^ (uint32_t)(ips[i] >> 32)) * 16777619u;
  }
  return h;
}

/* The index of the stack of frames (n, leaf first) on top of stack below (index + 1, 0: none);
 * under: it is itself only below other stacks. 0 when out of memory (p->oom: the caller adds
 * nothing). */
static uint32_t intern_chain(struct dnt_profile *p, const uint64_t *frames, uint32_t n, uint32_t below, int under) {
  if (p->oom) return 0;
  if (p->nstacks >= UINT32_MAX - 1) return p->oom = 1, 0; /* ids are 32-bit, below is id + 1 */
  if ((p->nstacks + 1) * 2 > p->stack_table_cap && rehash_stacks(p) != 0) return 0;
  uint32_t h = hash_ips(frames, n, (2166136261u ^ n) + below * 2654435761u + (under ? 0x9e3779b9u : 0));
  size_t j = h & (p->stack_table_cap - 1);
  while (p->stack_table[j]) {
    const struct stack *s = &p->stacks[p->stack_table[j] - 1];
    /* an empty stack has no frames to compare: frames may be NULL (unresolvable stack id), and
     * memcmp with NULL is undefined even for 0 bytes */
    if (s->hash == h && s->n == n && s->below == below && s->under == (uint32_t)under &&
        (n == 0 || memcmp(p->frames + s->off, frames, n * sizeof *frames) == 0))
      return p->stack_table[j] - 1;
    j = (j + 1) & (p->stack_table_cap - 1);
  }
  size_t capframes = p->capframes;
  while (p->nframes + n > capframes) capframes = capframes ? capframes * 2 : 4096;
  if (capframes != p->capframes) {
    uint64_t *f = realloc(p->frames, capframes * sizeof *f);
    if (!f) return p->oom = 1, 0;
    p->frames = f;
    p->capframes = capframes;
  }
  GROW(p, p->stacks, p->nstacks, p->capstacks, 0);
  if (n) memcpy(p->frames + p->nframes, frames, n * sizeof *frames);
  size_t total = n + (below ? p->stacks[below - 1].total : 0);
  p->stacks[p->nstacks] = (struct stack){p->nframes, n, h, below, under ? 1u : 0u, total};
  p->nframes += n;
  p->stack_table[j] = (uint32_t)++p->nstacks;
  return (uint32_t)p->nstacks - 1;
}

uint32_t dnt__profile_intern_chain(struct dnt_profile *p, const uint64_t *frames, uint32_t n, uint32_t below, int under) {
  return intern_chain(p, frames, n, below, under);
}

static uint32_t intern_stack(struct dnt_profile *p, const uint64_t *frames, uint32_t n) {
  return intern_chain(p, frames, n, 0, 0);
}

static uint32_t count_hash(uint64_t thread, uint32_t stack, uint32_t external, uint32_t node) {
  return hash_bytes(&thread, sizeof thread, (stack * 2654435761u ^ external) + node * 0x9e3779b9u);
}

static int rehash_counts(struct dnt_profile *p) {
  size_t cap = p->count_table_cap ? p->count_table_cap * 2 : 1024;
  uint32_t *t = calloc(cap, sizeof *t);
  if (!t) return p->oom = 1, -1;
  for (size_t i = 0; i < p->ncounts; i++) {
    const struct count *c = &p->counts[i];
    uint32_t h = count_hash(c->thread, c->stack, c->external, c->node);
    size_t j = h & (cap - 1);
    while (t[j]) j = (j + 1) & (cap - 1);
    t[j] = (uint32_t)i + 1;
  }
  free(p->count_table);
  p->count_table = t;
  p->count_table_cap = cap;
  return 0;
}

/* Counts `count` samples weighing ms in all (node: the task they ran for, 0 for none); returns its entry's
 * index + 1, or 0 when out of memory. */
static uint32_t add_samples(struct dnt_profile *p, uint64_t thread, uint32_t stack, uint32_t external, uint32_t node,
                            uint64_t count, double ms) {
  if (p->oom) return 0;
  if ((p->ncounts + 1) * 2 > p->count_table_cap && rehash_counts(p) != 0) return 0;
  uint32_t h = count_hash(thread, stack, external, node);
  size_t j = h & (p->count_table_cap - 1);
  while (p->count_table[j]) {
    struct count *c = &p->counts[p->count_table[j] - 1];
    if (c->thread == thread && c->stack == stack && c->external == external && c->node == node) {
      c->samples += count;
      c->ms += ms;
      p->samples += count;
      return p->count_table[j];
    }
    j = (j + 1) & (p->count_table_cap - 1);
  }
  GROW(p, p->counts, p->ncounts, p->capcounts, 0);
  p->counts[p->ncounts] = (struct count){thread, stack, external, node, count, ms};
  p->count_table[j] = (uint32_t)++p->ncounts;
  p->samples += count;
  return (uint32_t)p->ncounts;
}

static uint32_t add_sample(struct dnt_profile *p, uint64_t thread, uint32_t stack, uint32_t external, uint32_t node,
                           double ms) {
  return add_samples(p, thread, stack, external, node, 1, ms);
}

static uint32_t hash_thread(uint64_t thread) { return (uint32_t)((thread * 0x9E3779B97F4A7C15ull) >> 32); }

/* The state of thread, created empty (count 0, n 0) on its first sample; NULL when out of memory.
 * Valid until the next call. */
static struct thread_state *thread_state(struct dnt_profile *p, uint64_t thread) {
  if (p->last_tstate && p->tstates[p->last_tstate - 1].thread == thread) return &p->tstates[p->last_tstate - 1];
  uint32_t h = hash_thread(thread);
  if (p->tstate_table_cap) {
    size_t j = h & (p->tstate_table_cap - 1);
    for (; p->tstate_table[j]; j = (j + 1) & (p->tstate_table_cap - 1))
      if (p->tstates[p->tstate_table[j] - 1].thread == thread) {
        p->last_tstate = p->tstate_table[j];
        return &p->tstates[p->tstate_table[j] - 1];
      }
  }
  if ((p->ntstates + 1) * 2 > p->tstate_table_cap) {
    size_t cap = p->tstate_table_cap ? p->tstate_table_cap * 2 : 64;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return p->oom = 1, NULL;
    for (size_t i = 0; i < p->ntstates; i++) {
      size_t j = hash_thread(p->tstates[i].thread) & (cap - 1);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = (uint32_t)i + 1;
    }
    free(p->tstate_table);
    p->tstate_table = t;
    p->tstate_table_cap = cap;
  }
  GROW(p, p->tstates, p->ntstates, p->captstates, NULL);
  size_t j = h & (p->tstate_table_cap - 1);
  while (p->tstate_table[j]) j = (j + 1) & (p->tstate_table_cap - 1);
  p->tstates[p->ntstates] = (struct thread_state){.thread = thread};
  p->tstate_table[j] = (uint32_t)++p->ntstates;
  p->last_tstate = p->ntstates;
  return &p->tstates[p->ntstates - 1];
}

/* A sample of s's thread at ts: the thread's pending sample gets its weight (the time up to ts),
 * and this one, if counted (count: its entry + 1, else 0), waits for its own. */
static void weigh(struct dnt_profile *p, struct thread_state *s, uint64_t ts, uint32_t count) {
  if (s->n == 0) s->first = ts;
  /* ts >= s->ts: a thread's events come in its own order; a later one out of order weighs 0 */
  if (s->count && s->n && ts > s->ts && s->ts > p->sync_qpc && p->qpc_frequency) {
    double ms = (double)(ts - s->ts) * 1000.0 / (double)p->qpc_frequency;
    p->counts[s->count - 1].ms += ms;
    p->total_ms += ms;
    if (s->timeline) p->timeline[s->timeline - 1].ms = ms;
  }
  s->ts = ts;
  s->count = count;
  s->timeline = 0;
  s->n++;
}

/* The name's id; 0 when out of memory (p->oom). */
static uint32_t intern_name(struct dnt_profile *p, const char *name) {
  if (p->oom) return 0;
  if ((p->nnames + 1) * 2 > p->name_table_cap) {
    size_t cap = p->name_table_cap ? p->name_table_cap * 2 : 1024;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return p->oom = 1, 0;
    for (size_t i = 0; i < p->nnames; i++) {
      size_t j = hash_bytes(p->names[i], strlen(p->names[i]), 2166136261u) & (cap - 1);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = (uint32_t)i + 1;
    }
    free(p->name_table);
    p->name_table = t;
    p->name_table_cap = cap;
  }
  size_t j = hash_bytes(name, strlen(name), 2166136261u) & (p->name_table_cap - 1);
  while (p->name_table[j]) {
    if (strcmp(p->names[p->name_table[j] - 1], name) == 0) return p->name_table[j] - 1;
    j = (j + 1) & (p->name_table_cap - 1);
  }
  GROW(p, p->names, p->nnames, p->capnames, 0);
  if (!(p->names[p->nnames] = strdup(name))) return p->oom = 1, 0;
  p->name_table[j] = (uint32_t)++p->nnames;
  return (uint32_t)p->nnames - 1;
}

uint32_t dnt__profile_intern_name(struct dnt_profile *p, const char *name) { return intern_name(p, name); }

uint32_t dnt__profile_add_count(struct dnt_profile *p, uint64_t thread, uint32_t stack, uint32_t external,
                                uint32_t node, double ms) {
  return add_sample(p, thread, stack, external, node, ms);
}

/* ---- events ---- */

/* A SYSTEMTIME (UTC: year, month, day of week, day, h, m, s, ms) as ns since 1970, or 0 when a
 * field is out of range (the header is the trace's bytes; ns since 1970 fit 64 bits until 2262).
 * Days from the civil date by the usual shift of the year to start in March, so that the leap day
 * ends it. */
static int64_t systemtime_ns(const uint16_t st[8]) {
  int64_t y = st[0], m = st[1], d = st[3];
  if (y < 1970 || y > 2261 || m < 1 || m > 12 || d < 1 || d > 31 || st[4] > 23 || st[5] > 59 || st[6] > 60 ||
      st[7] > 999)
    return 0;
  y -= m <= 2;
  int64_t era = y / 400, yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t days = era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
  return ((days * 86400 + st[4] * 3600 + st[5] * 60 + st[6]) * 1000 + st[7]) * 1000000;
}

static int profile_on_trace(void *ud, const ntr_trace *t) {
  struct dnt_profile *p = ud;
  p->pid = t->process_id;
  p->start_unix_ns = systemtime_ns(t->start_time);
  /* a trace read for its methods only (a perf profile) leaves perf's period and clock alone */
  if (p->methods_only && p->samples) return 0;
  if (t->sampling_interval_ns) p->sample_ms = t->sampling_interval_ns / 1e6;
  p->qpc_frequency = t->qpc_frequency;
  p->sync_qpc = t->sync_time_qpc;
  p->pointer_size = t->pointer_size;
  return 0;
}

enum {
  KIND_OTHER, KIND_SAMPLE, KIND_METHOD, KIND_MODULE, KIND_PROCESS, KIND_ALLOC, KIND_THREAD_NAME, KIND_LOGGED,
  KIND_TASK, /* the task library's (TplEventSource 7-12) */
  KIND_POOL  /* the thread pool's work items and its workers' waits (runtime 57, 61-65) */
};

/* what a pending sample is: the sampler's, an event counted as one, an analysis's stack with its
 * own weight (dnt_profile_add_stack_under of a stitched profile: its id holds the weight's
 * bits), else an enum dnt__act_op */
enum { OP_SAMPLE = 100, OP_LOGGED, OP_WEIGHED };

static int kind_of(const struct dnt_profile *p, const ntr_metadata *md) {
  int allocs = p->source == DNT_SOURCE_ALLOCATIONS;
  if (md->event_id == 0 && strcmp(md->provider, SAMPLER) == 0) return allocs ? KIND_OTHER : KIND_SAMPLE;
  int runtime = strcmp(md->provider, RUNTIME) == 0, rundown = strcmp(md->provider, RUNDOWN) == 0;
  /* GCAllocationTick (10), GCSampledObjectAllocationHigh/Low (20, 32): TraceEvent's thread time
   * counts each as a sample of managed code running, on the event's stack */
  if (runtime && md->event_id == 10) return allocs ? KIND_ALLOC : KIND_LOGGED;
  if (runtime && (md->event_id == 20 || md->event_id == 32)) return allocs ? KIND_OTHER : KIND_LOGGED;
  if ((runtime && md->event_id == 143) || (rundown && (md->event_id == 143 || md->event_id == 144)))
    return KIND_METHOD;
  if ((runtime && md->event_id == 152) || (rundown && (md->event_id == 153 || md->event_id == 154)))
    return KIND_MODULE;
  if (md->event_id == 1 && strcmp(md->provider, EVENTPIPE) == 0) return KIND_PROCESS;
  if (p->tasks && !allocs && p->source == DNT_SOURCE_SAMPLER) {
    if (md->event_id >= 7 && md->event_id <= 12 && strcmp(md->provider, TPL) == 0) return KIND_TASK;
    if (p->tasks == DNT_TASKS_STITCHED && runtime && (md->event_id == 57 || (md->event_id >= 61 && md->event_id <= 65)))
      return KIND_POOL;
  }
  if (strcmp(md->provider, NTR_NAMES_PROVIDER) == 0 && strcmp(md->event_name, NTR_NAMES_EVENT) == 0)
    return KIND_THREAD_NAME; /* dntrace collect's names of the target's threads */
  return KIND_OTHER;
}

/* The interned index of an event's stack; most samples reuse a stack id already seen. */
static uint32_t stack_of(struct dnt_profile *p, const ntr_event *ev) {
  if (!ev->stack) return intern_stack(p, NULL, 0);
  uint32_t id = ev->stack_id;
  /* ids are dense from 1 and a table holds at most max_stacks (1 Mi) of them; a wild one just
   * skips the cache, which stays under 4 MiB (at 1 << 24 one stack id cost 64 MiB) */
  if (id < (1u << 20)) {
    if (id >= p->stack_cache_cap) {
      size_t cap = p->stack_cache_cap ? p->stack_cache_cap : 1024;
      while (cap <= id) cap *= 2;
      uint32_t *c = realloc(p->stack_cache, cap * sizeof *c);
      if (!c) return p->oom = 1, 0;
      memset(c + p->stack_cache_cap, 0, (cap - p->stack_cache_cap) * sizeof *c);
      p->stack_cache = c;
      p->stack_cache_cap = cap;
    }
    if (!p->stack_cache[id]) {
      uint32_t s = intern_stack(p, ev->stack->frames, ev->stack->nframes);
      if (p->oom) return 0;
      p->stack_cache[id] = s + 1;
    }
    return p->stack_cache[id] - 1;
  }
  return intern_stack(p, ev->stack->frames, ev->stack->nframes);
}

/* An await ended: the time its code waited, as a sample of its own (TraceEvent's AWAIT_TIME) on
 * the stack that awaited, beside the threads' time. */
static void add_await(struct dnt_profile *p, const struct dnt__await *aw) {
  uint64_t leaf = DNT__FRAME_AWAIT_TIME;
  uint32_t stack = intern_stack(p, &leaf, 1);
  if (p->oom || !p->qpc_frequency) return;
  double ms = aw->started > aw->created ? (double)(aw->started - aw->created) * 1000.0 / (double)p->qpc_frequency : 0;
  if (!add_sample(p, aw->thread, stack, DNT__NO_FRAMES, aw->node, ms)) return;
  p->total_ms += ms;
  if (p->keep_timeline) {
    GROW(p, p->timeline, p->ntimeline, p->captimeline);
    p->timeline[p->ntimeline++] = (struct sample){aw->thread, aw->created, stack, DNT__NO_FRAMES, aw->node, ms};
  }
}

/* A task event, in time order: what it does to its thread's task (stitched), and whether it is a
 * sample (TraceEvent's thread time logs a task's scheduling, start and waits as running code): 1
 * with *stack and *external set, else 0. */
static int task_event(struct dnt_profile *p, const struct pending *e, uint32_t *stack, uint32_t *external) {
  int stitch = p->tasks == DNT_TASKS_STITCHED;
  if (stitch) {
    struct dnt__act_event ae = {e->thread, e->ts, e->id, e->stack, e->op, e->behavior};
    struct dnt__await aw;
    if (dnt__acts_on(&p->acts, &ae, &aw) != 0) return p->oom = 1, 0;
    if (aw.node && !p->methods_only) add_await(p, &aw);
  }
  if (p->methods_only) return 0; /* an analysis's profile: its samples are its events */
  switch (e->op) {
  case DNT__OP_TASK_SCHEDULED:
  case DNT__OP_TASK_STARTED:
  case DNT__OP_WAIT_BEGIN:
  case DNT__OP_WAIT_END:
  case DNT__OP_AWAIT_SCHEDULED: break;
  default: return 0;
  }
  *external = 0;
  *stack = e->stack;
  if (stitch && e->op == DNT__OP_WAIT_END) { /* the continuation's start: its creation alone */
    *stack = DNT__NO_STACK;
    *external = DNT__NO_FRAMES;
  }
  if (*stack == DNT__NO_STACK) *stack = intern_stack(p, NULL, 0);
  return !p->oom;
}

/* An analysis's event, in time order: counted with its own weight under its thread's task. */
static void take_weighed(struct dnt_profile *p, const struct pending *e) {
  uint32_t node = 0;
  double w;
  memcpy(&w, &e->id, sizeof w);
  if (dnt__acts_current_node(&p->acts, e->thread, &node) != 0 || !add_sample(p, e->thread, e->stack, 0, node, w)) {
    p->oom = 1;
    return;
  }
  p->total_ms += w;
  if (e->ts > p->last_ts) p->last_ts = e->ts;
}

/* One sample, in its thread's time order: weighs the one before it (weigh), counts it. */
static void take(struct dnt_profile *p, const struct pending *e) {
  uint32_t stack = e->stack, external = e->external, node = 0;
  if (e->op == OP_WEIGHED) return take_weighed(p, e);
  if (e->op != OP_SAMPLE && e->op != OP_LOGGED && !task_event(p, e, &stack, &external)) return;
  if (p->tasks == DNT_TASKS_STITCHED && dnt__acts_current_node(&p->acts, e->thread, &node) != 0) {
    p->oom = 1;
    return;
  }
  if (p->source == DNT_SOURCE_THREADS) { /* a thread's first sample only */
    struct thread_state *s = thread_state(p, e->thread);
    if (!s || s->n) return;
  }
  if (p->keep) {
    uint64_t hz = p->qpc_frequency;
    uint64_t ns = hz == 1000000000u || !hz ? e->ts : (uint64_t)((double)e->ts * 1e9 / (double)hz);
    if (!p->keep(p->keep_ud, e->thread, ns)) {
      struct thread_state *s = thread_state(p, e->thread);
      if (s) weigh(p, s, e->ts, 0); /* it still ends the time of the sample before */
      return;
    }
  }
  if (e->ts > p->last_ts) p->last_ts = e->ts;
  struct thread_state *s = thread_state(p, e->thread);
  if (!s || p->oom) return;
  if (e->op == OP_SAMPLE) {
    if (!s->sampled) s->sampled_first = e->ts;
    s->sampled_last = e->ts;
    s->sampled++;
  }
  uint32_t count;
  if (s->count && s->stack == stack && s->external == external && s->node == node) { /* as the thread's last */
    count = s->count;
    p->counts[count - 1].samples++;
    p->samples++;
  } else {
    count = add_sample(p, e->thread, stack, external, node, 0);
  }
  weigh(p, s, e->ts, count);
  s->stack = stack;
  s->external = external;
  s->node = node;
  if (p->keep_timeline && !p->oom) {
    GROW(p, p->timeline, p->ntimeline, p->captimeline);
    p->timeline[p->ntimeline++] = (struct sample){e->thread, e->ts, stack, external, node, 0};
    s->timeline = p->ntimeline;
  }
}

static int by_time_then_order(const void *a, const void *b) {
  const struct pending *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The samples since the last sequence point, in time order (the runtime flushes every buffer
 * before one, so nothing later can be earlier than them), then forgotten. */
static void profile_flush(struct dnt_profile *p) {
  if (p->npend > 1) qsort(p->pend, p->npend, sizeof *p->pend, by_time_then_order);
  for (size_t i = 0; i < p->npend && !p->oom; i++) take(p, &p->pend[i]);
  p->npend = 0;
}

static int profile_on_sequence_point(void *ud, const ntr_sequence_point *sp) {
  struct dnt_profile *p = ud;
  (void)sp;
  profile_flush(p);
  if (p->stack_cache) memset(p->stack_cache, 0, p->stack_cache_cap * sizeof *p->stack_cache);
  return 0;
}

/* What a task library or thread pool event does (e->op), and its task or work item (e->id): 1, or
 * 0 for an event of no use or too short to say. */
static int task_op(const struct dnt_profile *p, int tpl, const ntr_event *ev, struct pending *e) {
  uint32_t id = ev->metadata->event_id;
  if (tpl) { /* OriginatingTaskSchedulerID, OriginatingTaskID, then TaskID (ContinuationId for 12) */
    static const uint8_t ops[] = {DNT__OP_TASK_SCHEDULED, DNT__OP_TASK_STARTED, DNT__OP_TASK_COMPLETED,
                                  DNT__OP_WAIT_BEGIN,     DNT__OP_WAIT_END,     DNT__OP_AWAIT_SCHEDULED};
    uint32_t task, behavior = 0;
    if (ev->payload_size < 12) return 0;
    memcpy(&task, ev->payload + 8, 4);
    if (id == 10 && ev->payload_size >= 16) memcpy(&behavior, ev->payload + 12, 4); /* 1: a blocking wait */
    e->op = ops[id - 7];
    e->id = task;
    e->behavior = (uint8_t)(behavior == 1);
    return 1;
  }
  if (id == 57) return e->op = DNT__OP_WORKER_WAIT, 1;
  /* WorkID (62, 61) or NativeOverlapped (63-65) first: a pointer of the trace's width */
  uint32_t width = p->pointer_size == 4 ? 4 : 8;
  if (ev->payload_size < width) return 0;
  uint64_t work = 0;
  memcpy(&work, ev->payload, width);
  e->id = work;
  e->op = id == 61 ? DNT__OP_POOL_ENQUEUE : id == 62 ? DNT__OP_POOL_DEQUEUE : id == 64 ? DNT__OP_IO_DEQUEUE
                                                                                       : DNT__OP_IO_ENQUEUE;
  return 1;
}

static int profile_on_event(void *ud, const ntr_event *ev) {
  struct dnt_profile *p = ud;
  const ntr_metadata *md = ev->metadata;
  if (!md) return 0;
  if (md != p->last_md) {
    p->last_md = md;
    p->last_kind = kind_of(p, md);
  }
  switch (p->last_kind) {
  case KIND_ALLOC: {
    if (p->methods_only) break;
    /* GCAllocationTick: AllocationAmount (u32), AllocationKind (u32), ClrInstanceID (u16), then
     * from version 2 AllocationAmount64 (u64): the bytes allocated since the thread's last tick */
    uint32_t amount = 0;
    uint64_t bytes;
    if (ev->payload_size >= 4) memcpy(&amount, ev->payload, 4);
    bytes = amount;
    if (ev->payload_size >= 18) memcpy(&bytes, ev->payload + 10, 8);
    uint32_t stack = stack_of(p, ev);
    if (p->oom) break;
    add_sample(p, ev->thread_id, stack, 0, 0, (double)bytes);
    p->total_ms += (double)bytes;
    if (ev->timestamp > p->last_ts) p->last_ts = ev->timestamp;
    break;
  }
  case KIND_LOGGED:
  case KIND_SAMPLE: {
    if (p->methods_only) break;
    if (p->last_kind == KIND_LOGGED && p->source != DNT_SOURCE_SAMPLER) break; /* threads: the sampler's */
    /* the payload's type: 1 External (native code or waiting), 2 Managed; TraceEvent counts
     * only 2 as running managed code (0, Error, as native); a payload too short for it is taken
     * as managed code, as before (the runtime always writes it); an allocation is managed code */
    uint32_t kind = 2;
    if (p->last_kind == KIND_SAMPLE && ev->payload_size >= 4) memcpy(&kind, ev->payload, 4);
    uint32_t stack = stack_of(p, ev);
    if (p->oom) break;
    GROW(p, p->pend, p->npend, p->cappend, -1);
    p->pend[p->npend++] = (struct pending){ev->thread_id, ev->timestamp, 0, stack, p->pend_seq++, kind != 2,
                                           p->last_kind == KIND_LOGGED ? OP_LOGGED : OP_SAMPLE, 0};
    break;
  }
  case KIND_TASK:
  case KIND_POOL: { /* an analysis's profile (methods_only) follows the tasks too */
    struct pending e = {ev->thread_id, ev->timestamp, 0, DNT__NO_STACK, 0, 0, DNT__OP_NONE, 0};
    if (!task_op(p, p->last_kind == KIND_TASK, ev, &e)) break;
    if (ev->stack && ev->stack->nframes) e.stack = stack_of(p, ev); /* an empty one is none, as TraceEvent has it */
    if (p->oom) break;
    e.seq = p->pend_seq++;
    GROW(p, p->pend, p->npend, p->cappend, -1);
    p->pend[p->npend++] = e;
    break;
  }
  case KIND_METHOD:
    if (dnt__methods_on_method(&p->methods, ev) != 0) p->oom = 1;
    break;
  case KIND_MODULE:
    if (dnt__methods_on_module(&p->methods, ev) != 0) p->oom = 1;
    break;
  case KIND_PROCESS: { /* ProcessInfo: the command line first (UTF-16), then the OS and arch */
    ntr_payload c;
    char line[1024];
    ntr_payload_init(&c, ev->payload, ev->payload_size);
    if (p->command_line || ntr_payload_utf16z(&c, line, sizeof line, NULL) != 0) break;
    if (!(p->command_line = strdup(line))) p->oom = 1;
    break;
  }
  case KIND_THREAD_NAME: { /* ThreadId (UInt64), Name (String) */
    ntr_payload c;
    uint64_t tid;
    char name[256];
    ntr_payload_init(&c, ev->payload, ev->payload_size);
    if (ntr_payload_u64(&c, &tid) != 0 || ntr_payload_utf16z(&c, name, sizeof name, NULL) != 0 || !name[0]) break;
    if (dnt__thread_names_set(&p->thread_names, tid, name) != 0) p->oom = 1;
    break;
  }
  default: break;
  }
  return p->oom ? -1 : 0; /* out of memory stops the parser */
}

void dnt_profile_keep_timeline(struct dnt_profile *p) { p->keep_timeline = 1; }

int dnt_profile_set_labels(struct dnt_profile *p, const char *const *kv, size_t n) {
  char **v = calloc(2 * n + 1, sizeof *v);
  if (!v) return -1;
  for (size_t i = 0; i < 2 * n; i++)
    if (!(v[i] = strdup(kv[i]))) {
      for (size_t k = 0; k < i; k++) free(v[k]);
      free(v);
      return -1;
    }
  for (size_t i = 0; i < 2 * p->nlabels; i++) free(p->labels[i]);
  free(p->labels);
  p->labels = v;
  p->nlabels = n;
  return 0;
}

size_t dnt_profile_nlabels(const struct dnt_profile *p) { return p->nlabels; }
const char *dnt_profile_label(const struct dnt_profile *p, size_t i) { return p->labels[i]; }

void dnt_profile_set_source(struct dnt_profile *p, enum dnt_profile_source source) { p->source = source; }
enum dnt_profile_source dnt_profile_source(const struct dnt_profile *p) { return p->source; }
void dnt_profile_set_tasks(struct dnt_profile *p, enum dnt_profile_tasks tasks) { p->tasks = tasks; }

void dnt_profile_fold_native(struct dnt_profile *p, int on) { p->fold_native = on; }

void dnt_profile_methods_only(struct dnt_profile *p, int on) { p->methods_only = on; }

void dnt_profile_set_filter(struct dnt_profile *p, dnt_profile_keep_fn keep, void *ud) {
  p->keep = keep;
  p->keep_ud = ud;
}

void dnt_profile_set_clock(struct dnt_profile *p, double sample_ms, uint64_t clock_hz, uint64_t start) {
  p->sample_ms = sample_ms;
  p->qpc_frequency = clock_hz;
  p->sync_qpc = start;
}

void dnt_profile_add_ips(struct dnt_profile *p, uint64_t thread, uint64_t time, const uint64_t *ips, size_t n) {
  dnt_profile_add_ips_ms(p, thread, time, ips, n, p->sample_ms); /* perf's period: a sample stands for it */
  p->cpu_samples = DNT_SAMPLES_CPU;
}

/* One stack counted with its own weight. An analysis's events (bytes, throws, waits for a lock)
 * stay off the timeline, whose writers weigh a sample by the time to its thread's next. */
static void add_weighed(struct dnt_profile *p, uint64_t thread, uint64_t time, uint32_t stack, double ms,
                        int on_timeline) {
  if (p->oom || !add_sample(p, thread, stack, 0, 0, ms)) return;
  p->total_ms += ms;
  if (time > p->last_ts) p->last_ts = time;
  if (on_timeline && p->keep_timeline) {
    GROW(p, p->timeline, p->ntimeline, p->captimeline);
    p->timeline[p->ntimeline++] = (struct sample){thread, time, stack, 0, 0, ms};
  }
}

void dnt_profile_add_stack(struct dnt_profile *p, uint64_t thread, uint64_t time, const uint64_t *ips, size_t n,
                           double ms) {
  if (n > UINT32_MAX) n = UINT32_MAX;
  add_weighed(p, thread, time, intern_stack(p, ips, (uint32_t)n), ms, 0);
}

uint32_t dnt_profile_add_stack_under(struct dnt_profile *p, uint64_t thread, uint64_t time, uint64_t leaf,
                                     const uint64_t *ips, size_t n, double ms) {
  if (n > UINT32_MAX) n = UINT32_MAX;
  uint32_t below = intern_chain(p, ips, (uint32_t)n, 0, 1);
  if (p->oom) return UINT32_MAX;
  uint32_t stack = intern_chain(p, &leaf, 1, below + 1, 0);
  if (p->oom) return UINT32_MAX;
  if (p->tasks == DNT_TASKS_STITCHED) { /* counted in time order, under the task it ran for */
    struct pending e = {thread, time, 0, stack, p->pend_seq++, 0, OP_WEIGHED, 0};
    memcpy(&e.id, &ms, sizeof ms);
    GROW(p, p->pend, p->npend, p->cappend, UINT32_MAX);
    p->pend[p->npend++] = e;
    return below;
  }
  add_weighed(p, thread, time, stack, ms, 0);
  return p->oom ? UINT32_MAX : below;
}

void dnt_profile_add_objects(struct dnt_profile *p, const uint64_t *ips, size_t n, uint64_t objects, double bytes) {
  if (n > UINT32_MAX) n = UINT32_MAX;
  uint32_t stack = intern_stack(p, ips, (uint32_t)n);
  if (p->oom || !add_samples(p, 0, stack, 0, 0, objects, bytes)) return;
  p->total_ms += bytes;
}

void dnt_profile_add_ips_ms(struct dnt_profile *p, uint64_t thread, uint64_t time, const uint64_t *ips, size_t n,
                            double ms) {
  if (n > UINT32_MAX) n = UINT32_MAX;
  add_weighed(p, thread, time, intern_stack(p, ips, (uint32_t)n), ms, 1);
  p->cpu_samples = DNT_SAMPLES_BLOCKED;
}

void dnt_profile_add_event(struct dnt_profile *p, const ntr_event *ev, double weight) {
  uint32_t stack = stack_of(p, ev);
  add_weighed(p, ev->thread_id, ev->timestamp, stack, weight, 0);
}

void dnt_profile_describe(struct dnt_profile *p, const char *what) { p->description = what; }
const char *dnt_profile_description(const struct dnt_profile *p) { return p->description; }

int dnt_profile_add_resolver(struct dnt_profile *p, dnt_profile_namer fn, void *ud) {
  if (p->nresolvers == DNT_PROFILE_MAX_RESOLVERS) return -1;
  p->resolvers[p->nresolvers].fn = fn;
  p->resolvers[p->nresolvers].ud = ud;
  p->nresolvers++;
  return 0;
}

static int by_thread_time(const void *a, const void *b) {
  const struct sample *x = a, *y = b;
  if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* A V6 thread row: the name of the thread its events carry (its OS id, else its index). */
static int profile_on_thread(void *ud, const ntr_thread *t) {
  struct dnt_profile *p = ud;
  if (p->oom) return -1;
  if (!t->name || !t->name[0]) return 0;
  uint64_t id = t->has_os_thread_id ? t->os_thread_id : t->index;
  if (dnt__thread_names_set(&p->thread_names, id, t->name) != 0) return p->oom = 1, -1;
  return 0;
}

const char *dnt_profile_command_line(const struct dnt_profile *p) { return p->command_line; }

void dnt_profile_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = profile_on_trace;
  cb->on_thread = profile_on_thread;
  cb->on_event = profile_on_event;
  cb->on_sequence_point = profile_on_sequence_point;
}

/* ---- naming ---- */

/* A frame's name from the first link of the chain that knows its address, else `?!0xADDR`. */
static void resolve(struct dnt_profile *p, uint64_t ip, int leaf, char *name, size_t cap) {
  if (ip == DNT__FRAME_STARTING_TASK || ip == DNT__FRAME_AWAIT_TIME) {
    snprintf(name, cap, "%s", ip == DNT__FRAME_AWAIT_TIME ? "AWAIT_TIME" : "STARTING TASK");
    return;
  }
  if (dnt__methods_name(&p->methods, ip, leaf, name, cap)) return;
  for (size_t r = 0; r < p->nresolvers; r++)
    if (p->resolvers[r].fn(p->resolvers[r].ud, ip, leaf, name, cap)) return;
  snprintf(name, cap, "?!0x%llx", (unsigned long long)ip);
}

/* The threads, in order of first appearance, with their sample counts and times. */
static void collect_threads(struct dnt_profile *p) {
  p->threads = calloc(p->ncounts ? p->ncounts : 1, sizeof *p->threads);
  p->thread_samples = calloc(p->ncounts ? p->ncounts : 1, sizeof *p->thread_samples);
  p->thread_ms = calloc(p->ncounts ? p->ncounts : 1, sizeof *p->thread_ms);
  if (!p->threads || !p->thread_samples || !p->thread_ms) {
    p->oom = 1;
    return;
  }
  for (size_t i = 0; i < p->ncounts; i++) {
    size_t t = 0;
    while (t < p->nthreads && p->threads[t] != p->counts[i].thread) t++;
    if (t == p->nthreads) p->threads[p->nthreads++] = p->counts[i].thread;
    p->thread_samples[t] += p->counts[i].samples;
    p->thread_ms[t] += p->counts[i].ms;
  }
}

int dnt_profile_finish(struct dnt_profile *p) {
  if (p->finished) return p->oom ? -1 : 0;
  profile_flush(p); /* the samples after the last sequence point */
  p->finished = 1;
  p->unmanaged_name = intern_name(p, DNT_UNMANAGED_FRAME);
  p->frame_names = malloc((p->capframes ? p->capframes : 1) * sizeof *p->frame_names);
  if (!p->frame_names) p->oom = 1;
  for (size_t s = 0; s < p->nstacks && !p->oom; s++) {
    const struct stack *st = &p->stacks[s];
    for (uint32_t i = 0; i < st->n; i++) {
      char name[1200];
      resolve(p, p->frames[st->off + i], i == 0 && !st->under, name, sizeof name);
      p->frame_names[st->off + i] = intern_name(p, name);
    }
  }
  if (!p->oom && dnt__profile_stitch(p) != 0) p->oom = 1;
  if (p->ntimeline) qsort(p->timeline, p->ntimeline, sizeof *p->timeline, by_thread_time);
  if (!p->oom) collect_threads(p);
  if (p->oom) { /* answer as an empty profile from here on */
    p->ncounts = p->ntimeline = p->nthreads = 0;
    return -1;
  }
  return 0;
}

int dnt_profile_failed(const struct dnt_profile *p) { return p->oom; }


uint64_t dnt_profile_samples(const struct dnt_profile *p) { return p->samples + p->npend; } /* while reading: those not yet in order too */
uint32_t dnt_profile_pid(const struct dnt_profile *p) { return p->pid; }
double dnt_profile_sample_ms(const struct dnt_profile *p) { return p->sample_ms; }

double dnt_profile_measured_ms(const struct dnt_profile *p) {
  const struct thread_state *best = NULL;
  for (size_t i = 0; i < p->ntstates; i++) /* the sampler's pace, on its busiest thread */
    if (!best || p->tstates[i].sampled > best->sampled) best = &p->tstates[i];
  if (!best || best->sampled < 10 || !p->qpc_frequency || best->sampled_last <= best->sampled_first) return 0;
  return (double)(best->sampled_last - best->sampled_first) / (double)(best->sampled - 1) * 1000.0 /
         (double)p->qpc_frequency;
}
double dnt_profile_total_ms(const struct dnt_profile *p) { return p->oom ? 0 : p->total_ms; }
double dnt_profile_thread_ms(const struct dnt_profile *p, size_t t) { return p->thread_ms[t]; }
void dnt_profile_set_weight(struct dnt_profile *p, enum dnt_profile_weight w) { p->weight = w; }
enum dnt_profile_weight dnt_profile_weight(const struct dnt_profile *p) { return p->weight; }
size_t dnt_profile_nthreads(const struct dnt_profile *p) { return p->nthreads; }
uint64_t dnt_profile_thread_id(const struct dnt_profile *p, size_t t) { return p->threads[t]; }
uint64_t dnt_profile_thread_samples(const struct dnt_profile *p, size_t t) { return p->thread_samples[t]; }

static const struct stack *below_of(const struct dnt_profile *p, const struct stack *st) {
  return st->below ? &p->stacks[st->below - 1] : NULL;
}

/* The name of a stack's leaf frame (its total must not be 0). */
static uint32_t first_name(const struct dnt_profile *p, const struct stack *st) {
  while (st->n == 0) st = below_of(p, st);
  return p->frame_names[st->off];
}

/* A stack's frames as name ids, leaf first, into ids (room for st->total). */
static void name_ids(const struct dnt_profile *p, const struct stack *st, uint32_t *ids) {
  size_t k = 0;
  for (; st; st = below_of(p, st))
    for (uint32_t f = 0; f < st->n; f++) ids[k++] = p->frame_names[st->off + f];
}

struct rank {
  uint32_t name;
  double key;
};

static int by_key_desc(const void *a, const void *b) {
  const struct rank *x = a, *y = b;
  if (x->key != y->key) return x->key > y->key ? -1 : 1;
  return x->name < y->name ? -1 : x->name > y->name;
}

size_t dnt_profile_top(const struct dnt_profile *p, size_t t, int by_inclusive, struct dnt_profile_row *rows,
                       size_t max) {
  size_t nn = p->nnames ? p->nnames : 1;
  uint64_t *excl = calloc(nn, sizeof *excl), *incl = calloc(nn, sizeof *incl);
  double *excl_ms = calloc(nn, sizeof *excl_ms), *incl_ms = calloc(nn, sizeof *incl_ms);
  uint32_t *seen = calloc(nn, sizeof *seen); /* which count last touched a name */
  struct rank *r = malloc(nn * sizeof *r);
  size_t out = 0;
  if (!excl || !incl || !excl_ms || !incl_ms || !seen || !r) {
    out = (size_t)-1;
    goto done;
  }
  for (size_t i = 0; i < p->ncounts; i++) {
    const struct count *c = &p->counts[i];
    if (t != (size_t)-1 && c->thread != p->threads[t]) continue;
    const struct stack *st = &p->stacks[c->stack];
    uint32_t first = st->total ? first_name(p, st) : p->unmanaged_name;
    uint32_t leaf = c->external ? p->unmanaged_name : first;
    /* folded: the managed frame that called into native code waits there (a stack without any
     * managed frame has no caller to charge and keeps the native row) */
    if (p->fold_native && st->total > 0) leaf = first;
    excl[leaf] += c->samples;
    excl_ms[leaf] += c->ms;
    /* inclusive: once per function per stack, however often recursion repeats it */
    incl[leaf] += c->samples;
    incl_ms[leaf] += c->ms;
    seen[leaf] = (uint32_t)i + 1;
    for (const struct stack *part = st; part; part = below_of(p, part))
      for (uint32_t f = 0; f < part->n; f++) {
        uint32_t n = p->frame_names[part->off + f];
        if (seen[n] == (uint32_t)i + 1) continue;
        seen[n] = (uint32_t)i + 1;
        incl[n] += c->samples;
        incl_ms[n] += c->ms;
      }
  }
  /* ranked by what the profile weighs (time, or samples); a function with samples but no time
   * (only threads' last samples) ranks last in time */
  int by_time = p->weight == DNT_WEIGHT_TIME;
  size_t n = 0;
  for (size_t i = 0; i < p->nnames; i++)
    if (incl[i])
      r[n++] = (struct rank){(uint32_t)i, by_inclusive ? (by_time ? incl_ms[i] : (double)incl[i])
                                                       : (by_time ? excl_ms[i] : (double)excl[i])};
  if (n) qsort(r, n, sizeof *r, by_key_desc);
  for (size_t i = 0; i < n && out < max; i++) {
    uint32_t k = r[i].name;
    if (!by_inclusive && excl[k] == 0) break;
    rows[out++] = (struct dnt_profile_row){p->names[k], excl[k], incl[k], excl_ms[k], incl_ms[k]};
  }
done:
  free(r);
  free(excl);
  free(incl);
  free(excl_ms);
  free(incl_ms);
  free(seen);
  return out;
}

size_t dnt_profile_nnames(const struct dnt_profile *p) { return p->nnames; }
const char *dnt_profile_name(const struct dnt_profile *p, uint32_t id) { return id < p->nnames ? p->names[id] : "?"; }

/* The frames of a stack as function ids, root first, with the UNMANAGED_CODE_TIME leaf when the
 * thread was in native code; *buf grows as needed (the caller frees it). (size_t)-1 when out of
 * memory. */
static size_t stack_frames(const struct dnt_profile *p, uint32_t stack, uint32_t external, uint32_t **buf, size_t *cap) {
  const struct stack *st = &p->stacks[stack];
  if (st->total + 1 > *cap) {
    uint32_t *grown = realloc(*buf, (st->total + 1) * sizeof **buf);
    if (!grown) return (size_t)-1;
    *buf = grown;
    *cap = st->total + 1;
  }
  size_t n = st->total;
  for (const struct stack *part = st; part; part = below_of(p, part))
    for (uint32_t f = 0; f < part->n; f++) (*buf)[--n] = p->frame_names[part->off + f];
  n = st->total;
  if (external || n == 0) (*buf)[n++] = p->unmanaged_name;
  return n;
}

size_t dnt_profile_stack_names(const struct dnt_profile *p, uint32_t id, uint32_t *ids) {
  if (!p->finished || p->oom || id >= p->nstacks) return 0;
  const struct stack *st = &p->stacks[id];
  if (ids) name_ids(p, st, ids);
  return st->total;
}

int dnt_profile_each_stack(const struct dnt_profile *p, dnt_profile_stack_fn fn, void *ud) {
  size_t cap = 0;
  uint32_t *frames = NULL;
  int rc = 0;
  for (size_t i = 0; i < p->ncounts && !rc; i++) {
    const struct count *c = &p->counts[i];
    size_t n = stack_frames(p, c->stack, c->external, &frames, &cap);
    if (n == (size_t)-1) rc = -1;
    else fn(ud, c->thread, frames, n, c->samples, c->ms);
  }
  free(frames);
  return rc;
}

int dnt_profile_each_sample(const struct dnt_profile *p, dnt_profile_sample_fn fn, void *ud) {
  size_t cap = 0;
  uint32_t *frames = NULL;
  int rc = 0;
  for (size_t i = 0; i < p->ntimeline && !rc; i++) {
    const struct sample *s = &p->timeline[i];
    int64_t ticks0 = (int64_t)(s->ts - p->sync_qpc);
    if (s->external & HIDDEN) { /* hidden by the view: it only ends the sample before it */
      fn(ud, s->thread, p->qpc_frequency && ticks0 > 0 ? (double)ticks0 * 1e6 / (double)p->qpc_frequency : 0, 0, NULL,
         0);
      continue;
    }
    size_t n = stack_frames(p, s->stack, s->external, &frames, &cap);
    if (n == (size_t)-1) {
      rc = -1;
      break;
    }
    /* a sample the runtime stamped before the trace's start (buffered as the session began) is
     * put at the start, as TraceEvent puts any event (QPCTimeToRelMSec): it stands for no time */
    int64_t ticks = (int64_t)(s->ts - p->sync_qpc);
    double t_us = p->qpc_frequency && ticks > 0 ? (double)ticks * 1e6 / (double)p->qpc_frequency : 0;
    fn(ud, s->thread, t_us, s->ms, frames, n);
  }
  free(frames);
  return rc;
}

int dnt_profile_load(struct dnt_profile *prof, const char *path, char *msg, size_t cap) {
  return dnt_profiles_load(&prof, 1, 1, path, msg, cap);
}

int dnt_profiles_load(struct dnt_profile *const *profs, size_t n, size_t nfinish, const char *path, char *msg,
                      size_t cap) {
  ntr_fanout fan;
  ntr_fanout_init(&fan);
  ntr_callbacks cb;
  dnt_profile_callbacks(&cb);
  for (size_t i = 0; i < n; i++)
    if (ntr_fanout_add(&fan, &cb, profs[i]) != 0) {
      snprintf(msg, cap, "at most %d profiles in one pass", NTR_FANOUT_MAX);
      return -1;
    }
  void *ud = profs[0]; /* one profile: its own callbacks, no forwarding */
  if (n > 1) {
    ntr_fanout_callbacks(&fan, &cb);
    ud = &fan;
  }
  ntr_stats st = {0};
  char err[512] = "";
  int rc = dnt_trace_read(path, &cb, ud, &st, err, sizeof err);
  int oom = 0;
  for (size_t i = 0; i < n; i++) oom |= profs[i]->oom;
  if (oom) {
    snprintf(msg, cap, "out of memory reading '%s'", path);
    return -1;
  }
  if (rc < 0 || (rc != DNT_TRACE_COMPLETE && st.events == 0)) {
    snprintf(msg, cap, "%s", err[0] ? err : "cannot read the trace");
    return -1;
  }
  for (size_t i = 0; i < nfinish && i < n; i++)
    if (dnt_profile_finish(profs[i]) != 0) {
      snprintf(msg, cap, "out of memory naming the frames of '%s'", path);
      return -1;
    }
  if (rc == DNT_TRACE_COMPLETE) return 0;
  snprintf(msg, cap, "%s: what came before is used; methods named only by the final rundown may show as addresses",
           err);
  return 1;
}

void dnt_profile_clock(const struct dnt_profile *p, uint64_t *hz, uint64_t *start) {
  *hz = p->qpc_frequency;
  *start = p->sync_qpc;
}

void dnt_profile_span(const struct dnt_profile *p, int64_t *start_unix_ns, uint64_t *duration_ns) {
  *start_unix_ns = p->start_unix_ns;
  *duration_ns = 0;
  if (p->qpc_frequency && p->last_ts > p->sync_qpc)
    *duration_ns = (uint64_t)((double)(p->last_ts - p->sync_qpc) * 1e9 / (double)p->qpc_frequency + 0.5);
}

int dnt_profile_cpu_samples(const struct dnt_profile *p) { return p->cpu_samples; }

int dnt_profile_name_thread(struct dnt_profile *p, uint64_t thread, const char *name) {
  return dnt__thread_names_set(&p->thread_names, thread, name);
}

const char *dnt_profile_thread_name(const struct dnt_profile *p, uint64_t thread) {
  return dnt__thread_names_get(&p->thread_names, thread);
}


int dnt_frame_kind(const char *name) {
  if (strcmp(name, DNT_UNMANAGED_FRAME) == 0) return 'N';
  if (strncmp(name, "[kernel]!", 9) == 0) return 'K';
  if (strncmp(name, "?!", 2) == 0) return '?';
  const char *bang = strchr(name, '!');
  if (!bang) return '?';
  /* native: a shared object or an executable file name before the '!' */
  if (strstr(name, ".so") && strstr(name, ".so") < bang) return 'N';
  if (strncmp(name, "[stub]", 6) == 0) return 'N';
  return 'M';
}

/* ---- a view: the samples a user narrowed the profile to ---- */

static int name_has(const struct dnt_profile *p, uint32_t name, const char *part) {
  return strstr(p->names[name], part) != NULL;
}

/* Whether a stack (and its sample's kind) has a frame whose name holds part. */
static int stack_has(const struct dnt_profile *p, uint32_t stack, uint32_t external, const char *part) {
  const struct stack *st = &p->stacks[stack];
  if ((external || st->total == 0) && name_has(p, p->unmanaged_name, part)) return 1;
  for (; st; st = below_of(p, st))
    for (uint32_t f = 0; f < st->n; f++)
      if (name_has(p, p->frame_names[st->off + f], part)) return 1;
  return 0;
}

static int is_busy(const uint64_t *busy, size_t n, uint64_t thread) {
  for (size_t k = 0; k < n; k++)
    if (busy[k] == thread) return 1;
  return 0;
}

static int stack_shown(const struct dnt_profile *p, const struct dnt_profile_view *v, uint8_t *memo, uint32_t stack,
                       uint32_t external) {
  uint8_t *m = &memo[2 * (size_t)stack + (external ? 1 : 0)];
  if (!*m)
    *m = (!v->focus || stack_has(p, stack, external, v->focus)) && (!v->exclude || !stack_has(p, stack, external, v->exclude))
             ? 1
             : 2;
  return *m == 1;
}

static int thread_wanted(const struct dnt_profile *p, const struct dnt_profile_view *v, uint64_t thread) {
  if (!v->nthreads) return 1;
  const char *name = dnt_profile_thread_name(p, thread);
  for (size_t i = 0; i < v->nthreads; i++) {
    char *end;
    unsigned long long id = strtoull(v->threads[i], &end, 10);
    if ((*v->threads[i] && !*end && id == thread) || (name && strcmp(name, v->threads[i]) == 0)) return 1;
  }
  return 0;
}

int dnt_profile_set_view(struct dnt_profile *p, const struct dnt_profile_view *v) {
  if (!p->finished || p->oom) return p->oom ? -1 : 0;
  uint8_t *shown = calloc(p->nstacks ? p->nstacks * 2 : 1, 1); /* per (stack, external): 0 unknown, 1 shown, 2 not */
  uint64_t *busy = calloc(p->nthreads ? p->nthreads : 1, sizeof *busy); /* threads with a sample in managed code */
  size_t nbusy = 0;
  if (!shown || !busy) {
    free(shown);
    free(busy);
    return p->oom = 1, -1;
  }
  for (size_t i = 0; i < p->ncounts; i++)
    if (!p->counts[i].external && p->stacks[p->counts[i].stack].total) {
      size_t k = 0;
      while (k < nbusy && busy[k] != p->counts[i].thread) k++;
      if (k == nbusy) busy[nbusy++] = p->counts[i].thread;
    }
  /* the predicate, per sample: its thread, then its stack */
#define SHOWN(thread, stack, ext)                                                                                    \
  (thread_wanted(p, v, thread) && (!v->hide_idle || is_busy(busy, nbusy, thread)) &&                              \
   stack_shown(p, v, shown, stack, ext))
  size_t out = 0;
  for (size_t i = 0; i < p->ncounts; i++)
    if (SHOWN(p->counts[i].thread, p->counts[i].stack, p->counts[i].external)) p->counts[out++] = p->counts[i];
  p->ncounts = out;
  for (size_t i = 0; i < p->ntimeline; i++) {
    struct sample *sm = &p->timeline[i];
    if (!SHOWN(sm->thread, sm->stack, sm->external & ~HIDDEN)) sm->external |= HIDDEN;
  }
#undef SHOWN
  free(shown);
  free(busy);
  /* the totals and threads of what is shown */
  free(p->threads);
  free(p->thread_samples);
  free(p->thread_ms);
  p->nthreads = 0;
  p->samples = 0;
  p->total_ms = 0;
  for (size_t i = 0; i < p->ncounts; i++) p->samples += p->counts[i].samples, p->total_ms += p->counts[i].ms;
  collect_threads(p);
  return p->oom ? -1 : 0;
}

double dnt_profile_external_ms(const struct dnt_profile *p) {
  double ms = 0;
  for (size_t i = 0; i < p->ncounts; i++)
    if (p->counts[i].external || p->stacks[p->counts[i].stack].total == 0) ms += p->counts[i].ms;
  return ms;
}
