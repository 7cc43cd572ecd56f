/* Why threads wait: off-CPU intervals, their blocked stacks and their wakers (dnt-perf.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf-int.h"

/* Frames that are names, not addresses (EventPipe's managed frames, the `[woken by X]` frame):
 * a non-canonical x86-64 address, which no code runs at, plus the name's index. */
#define NAME_BASE 0x4e00000000000000ull
#define NAME_MASK 0xff00000000000000ull

enum ev_kind { EV_WAKE, EV_RUN, EV_OUT }; /* at one time: a wake-up before a run before a switch-out */

struct wev {
  uint64_t t;
  uint32_t tid, other; /* EV_WAKE: the waker (0: none in the process, an interrupt) */
  uint32_t stack;      /* the blocked or waker stack, + 1; 0: none */
  uint32_t seq;        /* the order perf gave, for equal times */
  uint8_t kind, complete; /* EV_OUT: perf's chain reaches the thread's start */
};

/* EventPipe's samples of managed threads: their managed stacks as name ids, root first */
struct msample {
  uint64_t t;
  uint32_t tid, stack; /* stack + 1 in the managed stacks; 0: empty */
};

/* Interned sequences of 64-bit values (perf's addresses, or name ids). */
struct seqs {
  uint64_t *v;
  size_t n, cap;
  struct seq {
    size_t off;
    uint32_t n, hash;
  } *s;
  size_t ns, caps;
  uint32_t *table; /* index + 1 */
  size_t table_cap;
};

struct names {
  char **v;
  size_t n, cap;
  uint32_t *table; /* index + 1 */
  size_t table_cap;
};

struct tname {
  uint32_t tid;
  uint32_t name; /* id + 1 in names */
  int from_perf; /* perf's comm: a given name replaces it */
};

struct dnt_waits {
  dnt_perf_reader *reader;
  uint64_t *ips;
  struct wev *ev;
  size_t nev, capev;
  struct msample *ms;
  size_t nms, capms;
  struct seqs stacks, mstacks;
  struct names names;
  struct tname *threads;
  size_t nthreads, capthreads, last_thread; /* index + 1 of the last one looked up */
  uint64_t switches, wakings, interrupt_wakings;
  int oom;
};

int dnt__waits_grow(void **arr, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 0;
  size_t want = *cap ? 2 * *cap : 256;
  void *grown = realloc(*arr, want * size);
  if (!grown) return -ENOMEM;
  *arr = grown;
  *cap = want;
  return 0;
}

uint32_t dnt__waits_hash_u64s(const uint64_t *v, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ v[i]) * 1099511628211ull;
  return (uint32_t)(h ^ h >> 32);
}

uint32_t dnt__waits_hash_str(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static int seqs_rehash(struct seqs *q) {
  size_t cap = q->table_cap ? 2 * q->table_cap : 1024;
  uint32_t *t = calloc(cap, sizeof *t);
  if (!t) return -ENOMEM;
  for (size_t i = 0; i < q->ns; i++) {
    size_t j = q->s[i].hash & (cap - 1);
    while (t[j]) j = (j + 1) & (cap - 1);
    t[j] = (uint32_t)i + 1;
  }
  free(q->table);
  q->table = t;
  q->table_cap = cap;
  return 0;
}

/* The id + 1 of the sequence v[0..n), added if new; 0 when out of memory. */
static uint32_t seqs_intern(struct seqs *q, const uint64_t *v, size_t n) {
  if ((q->ns + 1) * 2 > q->table_cap && seqs_rehash(q)) return 0;
  uint32_t h = dnt__waits_hash_u64s(v, n);
  size_t j = h & (q->table_cap - 1);
  for (; q->table[j]; j = (j + 1) & (q->table_cap - 1)) {
    const struct seq *s = &q->s[q->table[j] - 1];
    if (s->hash == h && s->n == n && (!n || memcmp(q->v + s->off, v, n * sizeof *v) == 0)) return q->table[j];
  }
  while (q->n + n > q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 4096;
    uint64_t *grown = realloc(q->v, cap * sizeof *grown);
    if (!grown) return 0;
    q->v = grown;
    q->cap = cap;
  }
  if (dnt__waits_grow((void **)&q->s, &q->caps, q->ns, sizeof *q->s)) return 0;
  if (n) memcpy(q->v + q->n, v, n * sizeof *v);
  q->s[q->ns] = (struct seq){q->n, (uint32_t)n, h};
  q->n += n;
  q->table[j] = (uint32_t)++q->ns;
  return (uint32_t)q->ns;
}

static void seqs_release(struct seqs *q) {
  free(q->v);
  free(q->s);
  free(q->table);
}

/* The id + 1 of name, added if new; 0 when out of memory. */
static uint32_t name_id(struct names *t, const char *name) {
  if ((t->n + 1) * 2 > t->table_cap) {
    size_t cap = t->table_cap ? 2 * t->table_cap : 1024;
    uint32_t *tab = calloc(cap, sizeof *tab);
    if (!tab) return 0;
    for (size_t i = 0; i < t->n; i++) {
      size_t j = dnt__waits_hash_str(t->v[i]) & (cap - 1);
      while (tab[j]) j = (j + 1) & (cap - 1);
      tab[j] = (uint32_t)i + 1;
    }
    free(t->table);
    t->table = tab;
    t->table_cap = cap;
  }
  size_t j = dnt__waits_hash_str(name) & (t->table_cap - 1);
  for (; t->table[j]; j = (j + 1) & (t->table_cap - 1))
    if (strcmp(t->v[t->table[j] - 1], name) == 0) return t->table[j];
  if (dnt__waits_grow((void **)&t->v, &t->cap, t->n, sizeof *t->v)) return 0;
  if (!(t->v[t->n] = strdup(name))) return 0;
  t->table[j] = (uint32_t)++t->n;
  return (uint32_t)t->n;
}

dnt_waits *dnt_waits_new(void) {
  dnt_waits *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  if (!(w->ips = malloc((DNT_PERF_MAX_FRAMES + 1) * sizeof *w->ips))) {
    free(w);
    return NULL;
  }
  return w;
}

void dnt_waits_free(dnt_waits *w) {
  if (!w) return;
  free(w->ips);
  free(w->ev);
  free(w->ms);
  seqs_release(&w->stacks);
  seqs_release(&w->mstacks);
  for (size_t i = 0; i < w->names.n; i++) free(w->names.v[i]);
  free(w->names.v);
  free(w->names.table);
  free(w->threads);
  free(w);
}

static struct tname *thread_entry(dnt_waits *w, uint32_t tid) {
  /* every record names its thread: runs of one thread's records skip the search */
  if (w->last_thread && w->threads[w->last_thread - 1].tid == tid) return &w->threads[w->last_thread - 1];
  for (size_t i = 0; i < w->nthreads; i++) /* tens to hundreds of threads */
    if (w->threads[i].tid == tid) return &w->threads[(w->last_thread = i + 1) - 1];
  if (dnt__waits_grow((void **)&w->threads, &w->capthreads, w->nthreads, sizeof *w->threads)) return NULL;
  w->threads[w->nthreads] = (struct tname){.tid = tid};
  w->last_thread = w->nthreads + 1;
  return &w->threads[w->nthreads++];
}

static int name_thread(dnt_waits *w, uint64_t tid, const char *name, int from_perf) {
  struct tname *t = thread_entry(w, (uint32_t)tid);
  if (!t) return -ENOMEM;
  if (from_perf && t->name) return 0;
  uint32_t id = name_id(&w->names, name);
  if (!id) return -ENOMEM;
  t->name = id;
  t->from_perf = from_perf;
  return 0;
}

int dnt_waits_name_thread(dnt_waits *w, uint64_t tid, const char *name) { return name_thread(w, tid, name, 0); }

static int name_waits_thread(void *ud, uint64_t tid, const char *name) { return dnt_waits_name_thread(ud, tid, name); }

int dnt_waits_load_names(dnt_waits *w, const char *path) { return dnt_threads_file_each(path, name_waits_thread, w); }

static const char *thread_name(const dnt_waits *w, uint32_t tid) {
  for (size_t i = 0; i < w->nthreads; i++)
    if (w->threads[i].tid == tid && w->threads[i].name) return w->names.v[w->threads[i].name - 1];
  return NULL;
}

static int add_event(dnt_waits *w, struct wev e) {
  if (dnt__waits_grow((void **)&w->ev, &w->capev, w->nev, sizeof *w->ev)) return -ENOMEM;
  e.seq = (uint32_t)w->nev;
  w->ev[w->nev++] = e;
  return 0;
}

/* "... prev_state=S ==> next_comm=NAME next_pid=N next_prio=N": the state (the field directly
 * followed by " ==> ": a name may hold any text) and the thread switched in. */
static int parse_switch(const char *trace, char *state, uint32_t *next) {
  const char *arrow = NULL;
  for (const char *p = strstr(trace, " prev_state="); p; p = strstr(p + 1, " prev_state=")) {
    size_t len = strcspn(p + 12, " ");
    if (len && strncmp(p + 12 + len, " ==> ", 5) == 0) {
      *state = p[12];
      arrow = p + 12 + len;
      break;
    }
  }
  if (!arrow) return -1;
  *next = 0;
  /* the last " next_pid=" followed by digits and " next_prio=" */
  for (const char *p = strstr(arrow, " next_pid="); p; p = strstr(p + 1, " next_pid=")) {
    char *end;
    unsigned long v = strtoul(p + 10, &end, 10);
    if (end != p + 10 && strncmp(end, " next_prio=", 11) == 0 && v <= UINT32_MAX) *next = (uint32_t)v;
  }
  return 0;
}

/* "comm=NAME pid=N prio=N target_cpu=N": the woken thread (the name comes first and may hold
 * anything: the last "pid=" starting a field and followed by digits and " prio="). 0: none. */
static uint32_t woken(const char *trace) {
  uint32_t found = 0;
  for (const char *p = strstr(trace, "pid="); p; p = strstr(p + 1, "pid=")) {
    if (p != trace && p[-1] != ' ') continue;
    char *end;
    unsigned long v = strtoul(p + 4, &end, 10);
    if (end != p + 4 && strncmp(end, " prio=", 6) == 0 && v <= UINT32_MAX) found = (uint32_t)v;
  }
  return found;
}

static int is_kernel(const dnt_perf_frame *f) { return f->dso && f->dso[0] == '[' && strstr(f->dso, "kernel"); }

/* A wake-up made by an interrupt (a timer ending a sleep, a device), in whatever thread it hit:
 * its kernel frames pass through an interrupt's entry. */
static int from_interrupt(const dnt_perf_sample *s) {
  static const char *const entries[] = {"asm_sysvec_", "asm_common_interrupt", "sysvec_", "hrtimer_interrupt",
                                        "__do_softirq", "handle_softirqs", "irq_exit", "do_IRQ"};
  for (size_t i = 0; i < s->nframes; i++) {
    const dnt_perf_frame *f = &s->frames[i];
    if (!is_kernel(f) || !f->sym) continue;
    for (size_t k = 0; k < sizeof entries / sizeof *entries; k++)
      if (strncmp(f->sym, entries[k], strlen(entries[k])) == 0) return 1;
  }
  return 0;
}

/* Whether a chain reaches its thread's start: else frame-pointer-less code (glibc) cut it. */
static int reaches_start(const dnt_perf_sample *s) {
  if (!s->nframes) return 0;
  const char *root = s->frames[s->nframes - 1].sym;
  return root && (strcmp(root, "start_thread") == 0 || strncmp(root, "__clone", 7) == 0 ||
                  strcmp(root, "_start") == 0 || strcmp(root, "__libc_start_main") == 0);
}

/* The sample's chain interned: its stack + 1, 0 for none, or -1 when out of memory. */
static int64_t chain_of(dnt_waits *w, const dnt_perf_sample *s) {
  if (!s->nframes) return 0;
  int n = dnt_perf_reader_addresses(w->reader, s, w->ips);
  if (n < 0) return -1;
  uint32_t id = seqs_intern(&w->stacks, w->ips, (size_t)n);
  return id ? (int64_t)id : -1;
}

static int observe(dnt_waits *w, const dnt_perf_sample *s) {
  uint32_t tid = (uint32_t)s->tid;
  if (!tid) return 0; /* the idle task */
  if (s->comm[0] && s->comm[0] != ':' && name_thread(w, tid, s->comm, 1)) return -ENOMEM;
  if (dnt_perf_event_is(s->event, "sched:sched_switch")) {
    char state;
    uint32_t next;
    if (parse_switch(s->trace, &state, &next) != 0) return 0;
    w->switches++;
    if (next && add_event(w, (struct wev){.t = s->time_ns, .tid = next, .kind = EV_RUN})) return -ENOMEM;
    if (state == 'R') /* preempted: runnable, not blocked; it ran until now */
      return add_event(w, (struct wev){.t = s->time_ns, .tid = tid, .kind = EV_RUN});
    int64_t stack = chain_of(w, s);
    if (stack < 0) return -ENOMEM;
    return add_event(w, (struct wev){.t = s->time_ns, .tid = tid, .kind = EV_OUT, .stack = (uint32_t)stack,
                                     .complete = (uint8_t)reaches_start(s)});
  }
  if (dnt_perf_event_is(s->event, "sched:sched_waking")) {
    uint32_t wakee = woken(s->trace);
    if (!wakee) return 0;
    w->wakings++;
    /* the record is made in the waker's context: it is running */
    if (add_event(w, (struct wev){.t = s->time_ns, .tid = tid, .kind = EV_RUN})) return -ENOMEM;
    if (wakee == tid) return 0;
    if (from_interrupt(s)) {
      w->interrupt_wakings++;
      return add_event(w, (struct wev){.t = s->time_ns, .tid = wakee, .kind = EV_WAKE});
    }
    int64_t stack = chain_of(w, s);
    if (stack < 0) return -ENOMEM;
    return add_event(w, (struct wev){.t = s->time_ns, .tid = wakee, .other = tid, .kind = EV_WAKE,
                                     .stack = (uint32_t)stack});
  }
  /* any other sample (cpu-clock) is made while its thread runs */
  return add_event(w, (struct wev){.t = s->time_ns, .tid = tid, .kind = EV_RUN});
}

static void on_perf_sample(void *ud, const dnt_perf_sample *s) {
  dnt_waits *w = ud;
  if (!w->oom && observe(w, s) != 0) w->oom = 1;
}

/* The chain's last links: names of the frames that are names (the managed frames of EventPipe,
 * the waker frames). */
static int name_of(void *ud, uint64_t ip, int leaf, char *buf, size_t cap) {
  const dnt_waits *w = ud;
  (void)leaf;
  if ((ip & NAME_MASK) != NAME_BASE) return 0;
  uint64_t id = ip & ~NAME_MASK;
  if (id >= w->names.n) return 0;
  snprintf(buf, cap, "%s", w->names.v[id]);
  return 1;
}

dnt_perf_reader *dnt_waits_reader(dnt_waits *w, struct dnt_profile *prof, struct dnt_symtab *perfmap) {
  dnt_perf_reader *r = dnt_perf_reader_new(prof, 0, "", 1.0, perfmap);
  if (!r || dnt_profile_add_resolver(prof, name_of, w) != 0) {
    dnt_perf_reader_free(r);
    return NULL;
  }
  w->reader = r;
  dnt_perf_reader_observe(r, on_perf_sample, w);
  return r;
}

dnt_perf_reader *dnt_waits_load(dnt_waits *w, struct dnt_profile *prof, const char *data, const char *map,
                                struct dnt_symtab *perfmap, struct dnt_perf_load_info *info) {
  memset(info, 0, sizeof *info);
  dnt_perf_reader *r = dnt_waits_reader(w, prof, perfmap);
  if (!r) {
    snprintf(info->error, sizeof info->error, "out of memory");
    return NULL;
  }
  int rc = dnt_perf_reader_run(r, data, map, info);
  if (rc == 0 && w->oom) {
    snprintf(info->error, sizeof info->error, "out of memory reading perf script");
    rc = -1;
  }
  if (rc != 0) {
    dnt_perf_reader_free(r);
    return NULL;
  }
  return r;
}

int dnt_waits_managed_sample(dnt_waits *w, uint64_t tid, uint64_t t_ns, const char *const *names, size_t n) {
  uint64_t ids[DNT_PERF_MAX_FRAMES];
  size_t k = 0;
  for (size_t i = 0; i < n && k < DNT_PERF_MAX_FRAMES; i++) {
    if (strcmp(names[i], DNT_UNMANAGED_FRAME) == 0) continue;
    uint32_t id = name_id(&w->names, names[i]);
    if (!id) return -ENOMEM;
    ids[k++] = id - 1;
  }
  uint32_t stack = k ? seqs_intern(&w->mstacks, ids, k) : 0;
  if (k && !stack) return -ENOMEM;
  if (dnt__waits_grow((void **)&w->ms, &w->capms, w->nms, sizeof *w->ms)) return -ENOMEM;
  w->ms[w->nms++] = (struct msample){t_ns, (uint32_t)tid, stack};
  return 0;
}

static int by_thread_time(const void *a, const void *b) {
  const struct wev *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

static int by_msample(const void *a, const void *b) {
  const struct msample *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return (x->t > y->t) - (x->t < y->t);
}

/* The first EventPipe sample of tid in [from, to], or NULL. */
static const struct msample *managed_in(const dnt_waits *w, uint32_t tid, uint64_t from, uint64_t to) {
  size_t lo = 0, hi = w->nms;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const struct msample *m = &w->ms[mid];
    if (m->tid < tid || (m->tid == tid && m->t < from)) lo = mid + 1;
    else hi = mid;
  }
  return lo < w->nms && w->ms[lo].tid == tid && w->ms[lo].t <= to ? &w->ms[lo] : NULL;
}

static int is_managed(const dnt_waits *w, uint32_t tid) {
  return managed_in(w, tid, 0, UINT64_MAX) != NULL;
}

static int keep_thread(const dnt_waits *w, uint32_t tid, const struct dnt_waits_filter *f) {
  if (w->nms && !is_managed(w, tid)) return 0;
  if (!f) return 1;
  if (f->tid) return tid == f->tid;
  if (f->name) {
    const char *name = thread_name(w, tid);
    return name && strcmp(name, f->name) == 0;
  }
  return 1;
}

/* The frame of a name (added to the names if new); 0 when out of memory. */
static uint64_t name_frame(dnt_waits *w, const char *name) {
  uint32_t id = name_id(&w->names, name);
  return id ? NAME_BASE | (id - 1) : 0;
}

/* One interval as a sample of prof: leaf first, the waker's chain, the separator, the blocked
 * chain, the blocked thread's managed stack below it when perf's chain stopped short. */
static int add_interval(dnt_waits *w, struct dnt_profile *prof, const struct wev *out, const struct wev *wake,
                        uint64_t end) {
  uint64_t *ips = w->ips;
  size_t n = 0, room = DNT_PERF_MAX_FRAMES;
  if (wake && wake->other && wake->stack) {
    const struct seq *s = &w->stacks.s[wake->stack - 1];
    for (size_t i = 0; i < s->n && n < room / 2; i++) ips[n++] = w->stacks.v[s->off + i];
  }
  char sep[96];
  const char *waker = wake && wake->other ? thread_name(w, wake->other) : NULL;
  if (!wake || !wake->other)
    snprintf(sep, sizeof sep, "[no waker in the process]");
  else if (waker)
    snprintf(sep, sizeof sep, "[woken by %.64s]", waker);
  else
    snprintf(sep, sizeof sep, "[woken by thread %u]", (unsigned)wake->other);
  if (!(ips[n++] = name_frame(w, sep))) return -ENOMEM;
  if (out->stack) {
    const struct seq *s = &w->stacks.s[out->stack - 1];
    for (size_t i = 0; i < s->n && n < room; i++) ips[n++] = w->stacks.v[s->off + i];
  }
  const struct msample *m = out->complete ? NULL : managed_in(w, out->tid, out->t, end);
  if (m && m->stack) {
    const struct seq *s = &w->mstacks.s[m->stack - 1];
    for (size_t i = s->n; i > 0 && n < room; i--) ips[n++] = NAME_BASE | w->mstacks.v[s->off + i - 1];
  }
  dnt_profile_add_ips_ms(prof, out->tid, out->t, ips, n, (double)(end - out->t) / 1e6);
  return dnt_profile_failed(prof) ? -ENOMEM : 0;
}

int dnt_waits_finish(dnt_waits *w, struct dnt_profile *prof, const struct dnt_waits_filter *f,
                     struct dnt_waits_info *info) {
  struct dnt_waits_info in = {.switches = w->switches, .wakings = w->wakings,
                              .interrupt_wakings = w->interrupt_wakings};
  if (w->oom) return -ENOMEM;
  if (w->nev) qsort(w->ev, w->nev, sizeof *w->ev, by_thread_time);
  if (w->nms) qsort(w->ms, w->nms, sizeof *w->ms, by_msample);
  uint64_t first = UINT64_MAX;
  for (size_t i = 0; i < w->nev; i++)
    if (w->ev[i].t < first) first = w->ev[i].t;
  dnt_profile_set_clock(prof, 1.0, 1000000000u, first == UINT64_MAX ? 0 : first);
  int rc = 0;
  for (size_t i = 0; i < w->nev && rc == 0;) {
    uint32_t tid = w->ev[i].tid;
    size_t end = i;
    while (end < w->nev && w->ev[end].tid == tid) end++;
    int keep = keep_thread(w, tid, f);
    const struct wev *out = NULL, *wake = NULL;
    for (size_t k = i; k < end && rc == 0; k++) {
      const struct wev *e = &w->ev[k];
      if (e->kind == EV_WAKE) {
        if (out) wake = e;
        continue;
      }
      /* a run, or a switch-out (it ran before it): the end of a pending interval */
      if (out && e->t >= out->t) {
        in.intervals++;
        double ms = (double)(e->t - out->t) / 1e6;
        if (keep && (!f || ms >= f->min_ms)) {
          in.kept++;
          in.kept_ms += ms;
          rc = add_interval(w, prof, out, wake, e->t);
        }
      }
      out = e->kind == EV_OUT ? e : NULL;
      wake = NULL;
    }
    if (out) in.unended++;
    if (keep && rc == 0) {
      const char *name = thread_name(w, tid);
      if (name && dnt_profile_name_thread(prof, tid, name) != 0) rc = -ENOMEM;
    }
    i = end;
  }
  w->reader = NULL; /* perf's part is over: the caller may free the reader */
  if (info) *info = in;
  return rc;
}

void dnt_waits_each_thread(const dnt_waits *w, void (*fn)(void *ud, uint64_t tid, const char *name), void *ud) {
  for (size_t i = 0; i < w->nev; i++) /* sorted by thread by dnt_waits_finish */
    if ((i == 0 || w->ev[i].tid != w->ev[i - 1].tid) && keep_thread(w, w->ev[i].tid, NULL))
      fn(ud, w->ev[i].tid, thread_name(w, w->ev[i].tid));
}
