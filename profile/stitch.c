/* stitch.c: a task's samples put under the stack that made the task, as TraceEvent's activity
 * computer renders them (docs/async-stacks.md, "A sample's stack"). While reading, a sample was
 * counted under its task's node (activities.c); here, with every frame named, each node becomes
 * its stitched stack once, and each counted (node, stack) pair its stitched stack, filed under
 * the thread at the root of the chain of creators. Stitched stacks are chains of interned
 * stacks (profile.c) whose frames are copied with their names, so a deep creation stack is held
 * once however many tasks and samples stand on it. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "profile-int.h"

/* what TraceEvent's activity computer sees in a frame */
enum { C_UNKNOWN, C_OTHER, C_RUN, C_RUN_HELPER, C_NO_METHOD };

struct full {
  uint32_t chain;  /* the stitched stack: index + 1, 0 for none (no frames) */
  uint64_t thread; /* whose profile it is in */
  int done;
};

struct stitcher {
  struct dnt_profile *p;
  uint8_t *cls;         /* per name id */
  size_t ncls;
  struct full *full;    /* per node */
  uint64_t *addrs;      /* scratch: a stack's frames, leaf first */
  uint32_t *names;
  size_t cap;
  uint32_t *todo;       /* scratch: nodes whose creators' stacks are made first */
  size_t ntodo, captodo;
  size_t names_cap;     /* p->frame_names' room, in frames */
};

/* The frame as TraceEvent's FindThreadPoolTransition classes it: the task library's running
 * code (ExecutionContext.Run*, AwaitTaskContinuation.Run*, Task.Execute*), the helper that calls
 * the task's delegate (Task.InnerInvoke), or a frame without a method (an address the trace's
 * methods do not name). Only the core library's methods count. */
static int class_of(const char *name) {
  const char *bang = strchr(name, '!');
  if (!bang || strstr(bang, "!0x") == bang) return C_NO_METHOD;
  size_t mlen = (size_t)(bang - name);
  int corelib = strncasecmp(name, "mscorlib", 8) == 0;
  for (size_t i = 0; !corelib && i + 22 <= mlen; i++) corelib = strncasecmp(name + i, "system.private.corelib", 22) == 0;
  if (!corelib) return C_OTHER;
  const char *m = bang + 1;
  if (strncmp(m, "System.Threading.ExecutionContext.Run", 37) == 0 ||
      strncmp(m, "System.Threading.Tasks.AwaitTaskContinuation.Run", 48) == 0 ||
      strncmp(m, "System.Threading.Tasks.Task.Execute", 35) == 0)
    return C_RUN;
  if (strstr(m, "System.Threading.Tasks.Task") && strstr(m, ".InnerInvoke")) return C_RUN_HELPER;
  return C_OTHER;
}

static int frame_class(struct stitcher *s, uint32_t name) {
  if (name >= s->ncls) return C_OTHER;
  if (!s->cls[name]) s->cls[name] = (uint8_t)class_of(dnt_profile_name(s->p, name));
  return s->cls[name];
}

/* Room for n frames in the scratch arrays: 0, or -1 when out of memory. */
static int reserve(struct stitcher *s, size_t n) {
  if (n <= s->cap) return 0;
  uint64_t *a = realloc(s->addrs, n * sizeof *a);
  if (a) s->addrs = a;
  uint32_t *nm = realloc(s->names, n * sizeof *nm);
  if (nm) s->names = nm;
  if (!a || !nm) return -1;
  s->cap = n;
  return 0;
}

/* A stack's frames into the scratch arrays, leaf first: how many, or -1 when out of memory. */
static long flatten(struct stitcher *s, uint32_t stack) {
  const struct dnt_profile *p = s->p;
  size_t total = p->stacks[stack].total;
  if (reserve(s, total)) return -1;
  size_t k = 0;
  for (const struct stack *st = &p->stacks[stack]; st; st = st->below ? &p->stacks[st->below - 1] : NULL)
    for (uint32_t f = 0; f < st->n; f++, k++) {
      s->addrs[k] = p->frames[st->off + f];
      s->names[k] = p->frame_names[st->off + f];
    }
  return (long)total;
}

/* Where a task's own code begins on a stack of n frames: the index (from the leaf) of the frame
 * it is cut at, or -1 when the stack is not running a task. */
static long transition(struct stitcher *s, size_t n) {
  long helper = -1;
  for (size_t i = 0; i < n; i++) {
    int c = frame_class(s, s->names[i]);
    if (c == C_RUN) return helper >= 0 ? helper : (long)i;
    if (c == C_RUN_HELPER) helper = (long)i;
    else if (c == C_NO_METHOD) helper = -1;
  }
  return -1;
}

/* TraceEvent's recursion guard: the t frames leafward of the cut are the leaf frames of the
 * creator's stitched stack, just above its STARTING TASK (an async loop's next turn). */
static int recursive(const struct stitcher *s, size_t t, uint32_t chain) {
  if (!chain) return 0;
  const struct dnt_profile *p = s->p;
  size_t k = 0;
  for (const struct stack *st = &p->stacks[chain - 1]; st; st = st->below ? &p->stacks[st->below - 1] : NULL)
    for (uint32_t f = 0; f < st->n; f++, k++) {
      uint64_t ip = p->frames[st->off + f];
      if (k == t) return ip == DNT__FRAME_STARTING_TASK;
      if (ip != s->addrs[k]) return 0;
    }
  return 0;
}

/* The first n scratch frames (leaf first), then STARTING TASK if marker, on top of chain: the
 * stack's index + 1, 0 when out of memory. The frames keep the names they had. */
static uint32_t push(struct stitcher *s, size_t n, int marker, uint32_t chain) {
  struct dnt_profile *p = s->p;
  if (marker) {
    if (reserve(s, n + 1)) return 0;
    s->addrs[n] = DNT__FRAME_STARTING_TASK;
    s->names[n] = dnt__profile_intern_name(p, "STARTING TASK");
    n++;
  }
  if (n > UINT32_MAX) return 0;
  size_t before = p->nstacks;
  uint32_t id = dnt__profile_intern_chain(p, s->addrs, (uint32_t)n, chain, 2);
  if (p->oom) return 0;
  if (p->nstacks > before) { /* new: its frames are named as they were where they came from */
    if (p->capframes > s->names_cap) {
      uint32_t *g = realloc(p->frame_names, p->capframes * sizeof *g);
      if (!g) return p->oom = 1, 0;
      p->frame_names = g;
      s->names_cap = p->capframes;
    }
    memcpy(p->frame_names + p->stacks[id].off, s->names, n * sizeof *s->names);
  }
  return id + 1;
}

/* A node's stitched stack (its creator's, STARTING TASK, its creation stack from the cut), made
 * after its creator's: 0, or -1 when out of memory. */
static int make_full(struct stitcher *s, uint32_t node) {
  struct dnt__acts *a = &s->p->acts;
  /* the creators not yet made, from this one up, then made root first */
  s->ntodo = 0;
  for (uint32_t x = node; x && !s->full[x - 1].done;) {
    if (s->ntodo == s->captodo) {
      size_t cap = s->captodo ? s->captodo * 2 : 64;
      uint32_t *g = realloc(s->todo, cap * sizeof *g);
      if (!g) return -1;
      s->todo = g;
      s->captodo = cap;
    }
    s->todo[s->ntodo++] = x;
    uint32_t parent, stack;
    uint64_t thread;
    dnt__acts_node(a, x, &parent, &stack, &thread);
    x = parent;
  }
  while (s->ntodo) {
    uint32_t x = s->todo[--s->ntodo], parent, stack;
    uint64_t thread;
    dnt__acts_node(a, x, &parent, &stack, &thread);
    struct full *f = &s->full[x - 1];
    f->thread = thread;
    f->done = 1;
    long nf = stack == DNT__NO_STACK ? 0 : flatten(s, stack);
    if (nf < 0) return -1;
    if (!parent) { /* made by a thread's own code: that code's stack, on that thread */
      f->chain = nf ? push(s, (size_t)nf, 0, 0) : 0;
      if (nf && !f->chain) return -1;
      continue;
    }
    const struct full *up = &s->full[parent - 1];
    if (nf == 0) { /* no stack (or an empty one, which TraceEvent has as none): only the marker */
      f->thread = up->thread;
      if (!(f->chain = push(s, 0, 1, up->chain))) return -1;
      continue;
    }
    long t = transition(s, (size_t)nf);
    if (t < 0) { /* its creation stack runs no task: as it is, on its thread */
      f->chain = nf ? push(s, (size_t)nf, 0, 0) : 0;
      if (nf && !f->chain) return -1;
      continue;
    }
    f->thread = up->thread;
    if (recursive(s, (size_t)t, up->chain)) f->chain = up->chain;
    else if (!(f->chain = push(s, (size_t)t, 1, up->chain))) return -1;
  }
  return 0;
}

/* A sample counted under node (0: none) with stack: its stitched stack and thread, into *stack
 * and *thread (left as they are when it stays a plain sample). 0, or -1 when out of memory. */
static int stitch_one(struct stitcher *s, uint32_t node, int no_frames, uint32_t *stack, uint64_t *thread) {
  if (!node) return 0;
  if (make_full(s, node) != 0) return -1;
  const struct full *f = &s->full[node - 1];
  long n = flatten(s, *stack);
  if (n < 0) return -1;
  uint32_t chain;
  if (no_frames || n == 0) { /* the frames as they are (AWAIT_TIME, or none) on the marker */
    chain = push(s, (size_t)n, 1, f->chain);
  } else {
    long t = transition(s, (size_t)n);
    if (t < 0) return 0; /* not running the task: a plain sample of its own thread */
    chain = recursive(s, (size_t)t, f->chain) ? f->chain : push(s, (size_t)t, 1, f->chain);
  }
  if (!chain) return -1;
  *stack = chain - 1;
  *thread = f->thread;
  return 0;
}

int dnt__profile_stitch(struct dnt_profile *p) {
  size_t nnodes = dnt__acts_nnodes(&p->acts);
  int any = nnodes > 0;
  for (size_t i = 0; !any && i < p->ncounts; i++) any = (p->counts[i].external & DNT__NO_FRAMES) != 0;
  if (!any) return 0;
  struct stitcher s = {.p = p, .names_cap = p->capframes};
  s.ncls = p->nnames + 2;
  s.cls = calloc(s.ncls, 1);
  s.full = calloc(nnodes ? nnodes : 1, sizeof *s.full);
  int rc = !s.cls || !s.full ? -1 : 0;
  /* the counts again, each under its stitched stack and thread (several may become one) */
  struct count *old = p->counts;
  size_t nold = p->ncounts;
  if (!rc) {
    p->counts = NULL;
    p->ncounts = p->capcounts = 0;
    free(p->count_table);
    p->count_table = NULL;
    p->count_table_cap = 0;
    uint64_t samples = p->samples;
    for (size_t i = 0; i < nold && !rc; i++) {
      struct count c = old[i];
      if (stitch_one(&s, c.node, (c.external & DNT__NO_FRAMES) != 0, &c.stack, &c.thread) != 0) rc = -1;
      uint32_t e = rc ? 0 : dnt__profile_add_count(p, c.thread, c.stack, c.external & 1, 0, c.ms);
      if (!e) rc = -1;
      else p->counts[e - 1].samples += c.samples - 1;
    }
    p->samples = samples;
  }
  for (size_t i = 0; i < p->ntimeline && !rc; i++) {
    struct sample *sm = &p->timeline[i];
    if (stitch_one(&s, sm->node, (sm->external & DNT__NO_FRAMES) != 0, &sm->stack, &sm->thread) != 0) rc = -1;
    sm->external &= 1;
    sm->node = 0;
  }
  if (p->counts != old) free(old);
  free(s.cls);
  free(s.full);
  free(s.addrs);
  free(s.names);
  free(s.todo);
  if (rc) p->oom = 1;
  return rc;
}
