/* activities.c: which task each thread is running, as TraceEvent's ActivityComputer tracks it
 * (docs/async-stacks.md has the rules). Events come in time order (profile.c puts them back in
 * order between sequence points). An activity is reduced to its *node*: the creator's node and
 * the stack that created it, interned, so a sample is counted under (node, its own stack) and the
 * stitched stack is made once per pair when names are known (profile.c, at the end). */
#include <stdlib.h>
#include <string.h>

#include "profile-int.h"

/* kinds, as TraceEvent numbers them where it matters: the waits end implicitly */
enum { K_INITIAL, K_TASK, K_AWAIT_SCHEDULED, K_POOL, K_IO_POOL, K_IMPLIED, K_WAIT, K_WAIT_SYNC, K_FREE };

/* Memory: an activity lives while something refers to it (the map of ids, a thread's current
 * one, the one above it on its thread, a wait of its own not yet ended), then its slot is reused.
 * TraceEvent keeps every activity, and a pool thread's stack of them grows by two every time it
 * waits for work and then runs a continuation (the wait's implied activity, then the
 * continuation's, above the last continuation, which nothing ends): those below the newest
 * MAX_DEPTH of a thread are forgotten (their ids too), as only a task's end walks that deep, and
 * a run of implied activities is one, as they are alike for every rule. */
#define MAX_DEPTH 256

struct dnt__act {
  uint64_t id;         /* the key it is known by (type << 60 ^ id); 0 for a thread's own */
  uint64_t thread;     /* where it started (the Initial one: its thread) */
  uint64_t created, started;
  uint32_t prev;       /* the activity below it on its thread: index + 1, 0 = none */
  uint32_t creator;    /* index + 1; 0: none (Initial, Implied) */
  uint32_t node;       /* its stitching node: 0 when it has no creator */
  uint32_t waits_gen;  /* its creator's wait list generation when it joined it (a wait) */
  uint32_t gen;        /* its own wait list: the generation, bumped when the list is cleared */
  uint32_t refs;       /* see "Memory" above; a free slot's prev is the next free one */
  uint8_t kind, in_waits;
};

struct dnt__act_thread {
  uint64_t thread;
  uint32_t cur;        /* index + 1; 0: null (TraceEvent's "use the thread's Initial one") */
  uint32_t initial;    /* index + 1, made on first use */
  uint32_t depth;      /* of cur on the thread's stack of activities, about */
};

struct dnt__act_node {
  uint64_t thread;     /* the creating thread */
  uint32_t parent;     /* the creator's node (0: the creator had no creator) */
  uint32_t stack;      /* the creating event's stack (DNT__NO_STACK: none) */
  uint32_t hash;
};

static uint32_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (uint32_t)x;
}

void dnt__acts_release(struct dnt__acts *a) {
  free(a->v);
  free(a->threads);
  free(a->thread_table);
  free(a->map);
  free(a->nodes);
  free(a->node_table);
  memset(a, 0, sizeof *a);
}

/* ---- the tables: rows in a growing array, found by an open-addressing index (row + 1) ---- */

/* Room for one more row in *rows (n of them in *cap): 0, or -1 when out of memory. */
static int grow_rows(void **rows, size_t *cap, size_t n, size_t size, size_t first) {
  if (n < *cap) return 0;
  size_t want = *cap ? *cap * 2 : first;
  void *g = realloc(*rows, want * size);
  if (!g) return -1;
  *rows = g;
  *cap = want;
  return 0;
}

/* The index of n rows rebuilt with twice the slots when it would be over half full, each row at
 * its hash's slot (hash_of: row i's hash): 0, or -1 when out of memory. */
static int reindex(uint32_t **table, size_t *cap, size_t n, const struct dnt__acts *a,
                   uint32_t (*hash_of)(const struct dnt__acts *a, size_t i)) {
  if ((n + 1) * 2 <= *cap) return 0;
  size_t want = *cap ? *cap * 2 : 64;
  uint32_t *t = calloc(want, sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < n; i++) {
    size_t j = hash_of(a, i) & (want - 1);
    while (t[j]) j = (j + 1) & (want - 1);
    t[j] = (uint32_t)i + 1;
  }
  free(*table);
  *table = t;
  *cap = want;
  return 0;
}

/* ---- the threads ---- */

static uint32_t thread_hash(const struct dnt__acts *a, size_t i) { return mix64(a->threads[i].thread); }

static struct dnt__act_thread *thread_of(struct dnt__acts *a, uint64_t thread) {
  if (a->thread_table_cap) {
    size_t j = mix64(thread) & (a->thread_table_cap - 1);
    for (; a->thread_table[j]; j = (j + 1) & (a->thread_table_cap - 1))
      if (a->threads[a->thread_table[j] - 1].thread == thread) return &a->threads[a->thread_table[j] - 1];
  }
  if (reindex(&a->thread_table, &a->thread_table_cap, a->nthreads, a, thread_hash) != 0 ||
      grow_rows((void **)&a->threads, &a->capthreads, a->nthreads, sizeof *a->threads, 64) != 0)
    return NULL;
  size_t j = mix64(thread) & (a->thread_table_cap - 1);
  while (a->thread_table[j]) j = (j + 1) & (a->thread_table_cap - 1);
  a->threads[a->nthreads] = (struct dnt__act_thread){thread, 0, 0, 0};
  a->thread_table[j] = (uint32_t)++a->nthreads;
  return &a->threads[a->nthreads - 1];
}

/* A new activity, referred to by nothing yet: its index + 1, 0 when out of memory. */
static uint32_t new_act(struct dnt__acts *a, int kind) {
  if (a->free) {
    uint32_t i = a->free;
    a->free = a->v[i - 1].prev;
    a->v[i - 1] = (struct dnt__act){.kind = (uint8_t)kind};
    return i;
  }
  if (grow_rows((void **)&a->v, &a->cap, a->n, sizeof *a->v, 256) != 0) return 0;
  a->v[a->n] = (struct dnt__act){.kind = (uint8_t)kind};
  return (uint32_t)++a->n;
}

static void ref(struct dnt__acts *a, uint32_t i) {
  if (i) a->v[i - 1].refs++;
}

/* One reference fewer; an activity with none is freed, and so its own references go. */
static void unref(struct dnt__acts *a, uint32_t i) {
  while (i) {
    struct dnt__act *x = &a->v[i - 1];
    if (--x->refs) return;
    uint32_t below = x->prev, creator = x->creator;
    x->kind = K_FREE;
    x->prev = a->free;
    a->free = i;
    /* a creator held is a running activity, whose own creator went when it started: one level */
    if (creator) unref(a, creator);
    i = below;
  }
}

/* The thread's current activity becomes i (0: none), at the given depth. */
static void set_cur(struct dnt__acts *a, struct dnt__act_thread *t, uint32_t i, uint32_t depth) {
  uint32_t old = t->cur;
  ref(a, i);
  t->cur = i;
  t->depth = depth;
  unref(a, old);
}

/* TraceEvent's GetCurrentActivity: the thread's activity, its Initial one made current when it
 * has none. Index + 1, 0 when out of memory. */
static uint32_t current(struct dnt__acts *a, uint64_t thread) {
  struct dnt__act_thread *t = thread_of(a, thread);
  if (!t) return 0;
  if (t->cur) return t->cur;
  if (!t->initial) {
    uint32_t i = new_act(a, K_INITIAL);
    if (!i) return 0;
    a->v[i - 1].thread = thread;
    ref(a, i); /* the thread's for good */
    t->initial = i;
  }
  set_cur(a, t, t->initial, 1);
  return t->cur;
}

/* ---- the map of ids to activities (open addressing, deletion by backward shift) ---- */

static size_t map_find(const struct dnt__acts *a, uint64_t id) {
  if (!a->map_cap) return (size_t)-1;
  for (size_t j = mix64(id) & (a->map_cap - 1); a->map[j]; j = (j + 1) & (a->map_cap - 1))
    if (a->v[a->map[j] - 1].id == id) return j;
  return (size_t)-1;
}

static int map_put(struct dnt__acts *a, uint64_t id, uint32_t act) {
  size_t j = map_find(a, id);
  if (j != (size_t)-1) { /* overwritten: the older one is no longer found by its id */
    uint32_t old = a->map[j];
    ref(a, act);
    a->map[j] = act;
    unref(a, old);
    return 0;
  }
  if ((a->map_n + 1) * 2 > a->map_cap) {
    size_t cap = a->map_cap ? a->map_cap * 2 : 256;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < a->map_cap; i++)
      if (a->map[i]) {
        size_t k = mix64(a->v[a->map[i] - 1].id) & (cap - 1);
        while (t[k]) k = (k + 1) & (cap - 1);
        t[k] = a->map[i];
      }
    free(a->map);
    a->map = t;
    a->map_cap = cap;
  }
  j = mix64(id) & (a->map_cap - 1);
  while (a->map[j]) j = (j + 1) & (a->map_cap - 1);
  ref(a, act);
  a->map[j] = act;
  a->map_n++;
  return 0;
}

static void map_remove(struct dnt__acts *a, uint64_t id) {
  size_t j = map_find(a, id);
  if (j == (size_t)-1) return;
  uint32_t gone = a->map[j];
  a->map[j] = 0;
  a->map_n--;
  /* shift back the entries of the run after j that would no longer be found */
  for (size_t k = (j + 1) & (a->map_cap - 1); a->map[k]; k = (k + 1) & (a->map_cap - 1)) {
    size_t home = mix64(a->v[a->map[k] - 1].id) & (a->map_cap - 1);
    int reachable = j <= k ? (home <= j || home > k) : (home <= j && home > k);
    if (reachable) {
      a->map[j] = a->map[k];
      a->map[k] = 0;
      j = k;
    }
  }
  unref(a, gone);
}

/* ---- nodes ---- */

static uint32_t node_hash(uint32_t parent, uint32_t stack, uint64_t thread) {
  return mix64(((uint64_t)parent << 32 | stack) ^ (thread * 0x9E3779B97F4A7C15ull));
}

static uint32_t node_row_hash(const struct dnt__acts *a, size_t i) { return a->nodes[i].hash; }

/* The node of an activity created on thread by the stack, its creator's node being parent:
 * id + 1, 0 when out of memory. */
static uint32_t intern_node(struct dnt__acts *a, uint32_t parent, uint32_t stack, uint64_t thread) {
  /* an async loop creates each turn's task from the last with the same stack: its stitched stack
   * is its parent's (the recursion guard of docs/async-stacks.md), so it is its parent's node,
   * and the nodes stay as many as the distinct paths, not the turns */
  if (parent && stack != DNT__NO_STACK) {
    const struct dnt__act_node *pn = &a->nodes[parent - 1];
    if (pn->parent && pn->stack == stack && pn->thread == thread) return parent;
  }
  uint32_t h = node_hash(parent, stack, thread);
  if (a->node_table_cap) {
    for (size_t j = h & (a->node_table_cap - 1); a->node_table[j]; j = (j + 1) & (a->node_table_cap - 1)) {
      const struct dnt__act_node *n = &a->nodes[a->node_table[j] - 1];
      if (n->hash == h && n->parent == parent && n->stack == stack && n->thread == thread) return a->node_table[j];
    }
  }
  if (reindex(&a->node_table, &a->node_table_cap, a->nnodes, a, node_row_hash) != 0 ||
      grow_rows((void **)&a->nodes, &a->capnodes, a->nnodes, sizeof *a->nodes, 256) != 0)
    return 0;
  size_t j = h & (a->node_table_cap - 1);
  while (a->node_table[j]) j = (j + 1) & (a->node_table_cap - 1);
  a->nodes[a->nnodes] = (struct dnt__act_node){thread, parent, stack, h};
  a->node_table[j] = (uint32_t)++a->nnodes;
  return (uint32_t)a->nnodes;
}

void dnt__acts_node(const struct dnt__acts *a, uint32_t node, uint32_t *parent, uint32_t *stack, uint64_t *thread) {
  const struct dnt__act_node *n = &a->nodes[node - 1];
  *parent = n->parent;
  *stack = n->stack;
  *thread = n->thread;
}

size_t dnt__acts_nnodes(const struct dnt__acts *a) { return a->nnodes; }

/* ---- the rules ---- */

static int needs_implicit_end(int kind) { return kind == K_WAIT || kind == K_WAIT_SYNC; }

/* TraceEvent's OnCreated: an activity made by the thread's current one. 0, -1 out of memory. */
static int create(struct dnt__acts *a, const struct dnt__act_event *e, int kind, uint64_t id) {
  uint32_t creator = current(a, e->thread);
  if (!creator) return -1;
  const struct dnt__act *c = &a->v[creator - 1];
  uint32_t node = intern_node(a, c->node, e->stack, e->thread);
  if (!node) return -1;
  uint32_t i = new_act(a, kind);
  if (!i) return -1;
  struct dnt__act *x = &a->v[i - 1];
  x->node = node;
  x->created = e->ts;
  x->id = id;
  if (kind == K_WAIT || kind == K_WAIT_SYNC) { /* remembered by its creator: the first to end is awaited */
    x->creator = creator;
    ref(a, creator);
    x->in_waits = 1;
    x->waits_gen = a->v[creator - 1].gen;
  }
  if (map_put(a, id, i) == 0) return 0;
  ref(a, i), unref(a, i); /* not kept: freed */
  return -1;
}

/* TraceEvent's OnStop: pops the thread's activities down to act (0: an unknown one, popping
 * nothing unless the walk finds no Initial activity). An activity first started on an empty
 * thread may be started again (TraceEvent's rule: its prev is still none), which can make a
 * thread's activities a loop: a walk longer than there are activities ends at the thread's own. */
static void stop(struct dnt__acts *a, uint64_t thread, uint32_t act) {
  struct dnt__act_thread *t = thread_of(a, thread);
  if (!t) return;
  /* its id, read now: popping may free it when the map no longer holds it */
  int keyed = act && a->v[act - 1].kind != K_INITIAL && a->v[act - 1].kind != K_IMPLIED;
  uint64_t id = keyed ? a->v[act - 1].id : 0;
  if (act) ref(a, act); /* kept while it is walked to */
  uint32_t c = t->cur;
  for (size_t steps = 0;; steps++) {
    if (steps > a->n) c = 0;
    if (!c) {
      set_cur(a, t, 0, 0);
      break;
    }
    if (c == act) {
      set_cur(a, t, a->v[c - 1].prev, t->depth ? t->depth - 1 : 0);
      break;
    }
    if (a->v[c - 1].kind == K_INITIAL) break;
    if (act) {
      stop(a, thread, c); /* pops c: it is the current one */
      c = t->cur;
    } else {
      c = a->v[c - 1].prev;
    }
  }
  /* whatever holds its key now goes, even a newer activity of that id (TraceEvent's rule) */
  if (keyed) map_remove(a, id);
  if (act) unref(a, act);
}

/* Pushes i on the thread's activities; those below the newest MAX_DEPTH are forgotten, in
 * MAX_DEPTH at a time (see "Memory" above). */
static void push(struct dnt__acts *a, struct dnt__act_thread *t, uint32_t i) {
  struct dnt__act *x = &a->v[i - 1];
  x->prev = t->cur;
  ref(a, x->prev);
  set_cur(a, t, i, t->depth + 1);
  if (t->depth <= 2 * MAX_DEPTH) return;
  uint32_t keep = t->cur;
  for (int d = 1; d < MAX_DEPTH && a->v[keep - 1].prev; d++) keep = a->v[keep - 1].prev;
  uint32_t cut = a->v[keep - 1].prev;
  a->v[keep - 1].prev = 0;
  t->depth = MAX_DEPTH;
  for (uint32_t c = cut, n = 0; c && n <= a->n; c = a->v[c - 1].prev, n++) {
    size_t j = map_find(a, a->v[c - 1].id);
    if (j != (size_t)-1 && a->map[j] == c && a->v[c - 1].kind != K_INITIAL) {
      ref(a, c);
      map_remove(a, a->v[c - 1].id);
      a->v[c - 1].id = 0;
      unref(a, c);
    }
  }
  unref(a, cut);
}

/* TraceEvent's OnStart; await_end: a TaskWaitEnd, which may say how long its creator waited. */
static int start(struct dnt__acts *a, const struct dnt__act_event *e, uint64_t id, int await_end,
                 struct dnt__await *aw) {
  struct dnt__act_thread *t = thread_of(a, e->thread);
  if (!t) return -1;
  if (await_end && t->cur && needs_implicit_end(a->v[t->cur - 1].kind)) stop(a, e->thread, t->cur);
  size_t j = map_find(a, id);
  if (j == (size_t)-1) return 0; /* created before the trace began: dropped */
  uint32_t i = a->map[j];
  struct dnt__act *x = &a->v[i - 1];
  if (x->prev) return 0; /* started twice */
  x->started = e->ts;
  x->thread = e->thread;
  if (await_end && x->creator) {
    struct dnt__act *c = &a->v[x->creator - 1];
    if (x->in_waits && x->waits_gen == c->gen) { /* the first of its creator's waits to end */
      aw->node = x->node;
      aw->created = x->created;
      aw->started = x->started;
      aw->thread = e->thread;
      c->gen++; /* the list is cleared */
    }
  }
  uint32_t creator = x->creator; /* no longer needed */
  x->creator = 0;
  push(a, t, i);
  unref(a, creator);
  if (a->v[i - 1].kind == K_WAIT_SYNC) stop(a, e->thread, i);
  return 0;
}

/* ThreadPoolWorkerThreadWait: the worker waits for work; a fresh activity without creator. */
static int implied(struct dnt__acts *a, const struct dnt__act_event *e) {
  struct dnt__act_thread *t = thread_of(a, e->thread);
  if (!t) return -1;
  if (t->cur && a->v[t->cur - 1].kind == K_IMPLIED) return 0; /* one is as good as two */
  uint32_t i = new_act(a, K_IMPLIED);
  if (!i) return -1;
  struct dnt__act *x = &a->v[i - 1];
  x->created = x->started = e->ts;
  x->thread = e->thread;
  push(a, t, i);
  return 0;
}

/* ids: the task library's tasks and continuations, the pool's work items and I/O packets */
#define ID(type, v) ((uint64_t)(type) << 60 ^ (v))
enum { T_CONTINUATION = 1, T_TASK = 2, T_IO = 4, T_POOL = 5 };

int dnt__acts_on(struct dnt__acts *a, const struct dnt__act_event *e, struct dnt__await *aw) {
  aw->node = 0;
  switch (e->op) {
  case DNT__OP_TASK_SCHEDULED:
    if (map_find(a, ID(T_TASK, e->id)) != (size_t)-1) return 0; /* already made, by its continuation */
    return create(a, e, K_TASK, ID(T_TASK, e->id));
  case DNT__OP_AWAIT_SCHEDULED: return create(a, e, K_AWAIT_SCHEDULED, ID(T_TASK, e->id));
  case DNT__OP_WAIT_BEGIN:
    return create(a, e, e->behavior == 1 ? K_WAIT_SYNC : K_WAIT, ID(T_CONTINUATION, e->id));
  case DNT__OP_TASK_STARTED: return start(a, e, ID(T_TASK, e->id), 0, aw);
  case DNT__OP_WAIT_END: return start(a, e, ID(T_CONTINUATION, e->id), 1, aw);
  case DNT__OP_TASK_COMPLETED: {
    size_t j = map_find(a, ID(T_TASK, e->id));
    stop(a, e->thread, j == (size_t)-1 ? 0 : a->map[j]);
    return 0;
  }
  case DNT__OP_POOL_ENQUEUE: return create(a, e, K_POOL, ID(T_POOL, e->id));
  case DNT__OP_POOL_DEQUEUE: return start(a, e, ID(T_POOL, e->id), 0, aw);
  case DNT__OP_IO_ENQUEUE: return create(a, e, K_IO_POOL, ID(T_IO, e->id));
  case DNT__OP_IO_DEQUEUE: return start(a, e, ID(T_IO, e->id), 0, aw);
  case DNT__OP_WORKER_WAIT: return implied(a, e);
  default: return 0;
  }
}

int dnt__acts_current_node(struct dnt__acts *a, uint64_t thread, uint32_t *node) {
  uint32_t c = current(a, thread);
  if (!c) return -1;
  *node = a->v[c - 1].node;
  return 0;
}
