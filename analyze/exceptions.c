/* Exceptions thrown, grouped by type and message, with their throw stacks, whether a catch took
 * them, and their rate. The rules, event by event (all are the runtime provider's, keyword
 * Exception 0x8000; each thread's events arrive in the order it logged them, which is all the
 * rules need: they never look across threads):
 *
 *   ExceptionThrown (80)       V1 names the type, message, HRESULT and flags. Every one is a
 *                              first-chance exception (the runtime logs it as dispatch begins),
 *                              counted in its (type, message) group with its stack. On its
 *                              thread it becomes the innermost exception in flight, above those
 *                              not yet caught (an exception thrown from a finally or a filter
 *                              while another is dispatched); those already caught are done and
 *                              leave. V0 (.NET Framework 4.0) has no payload: type "(unknown)".
 *   ExceptionCatchStart (250)  a catch begins on the thread: the innermost exception in flight is
 *                              handled, by MethodName (the catching method).
 *   ExceptionFilterStart (254), ExceptionFinallyStart (252)
 *                              only say that the trace has these events (the informational level):
 *                              a filter may decline, a finally does not catch.
 *   ExceptionThrownStop (256)  the innermost exception's dispatch is over (.NET 5+): if no catch
 *                              began for it, it is unhandled.
 *   the trace's end            an exception still in flight, never caught, is unhandled when the
 *                              trace has catch events at all or was recorded at the informational
 *                              level (a live session says so), else unknown (recorded at the Error
 *                              level, where only ExceptionThrown is logged).
 *
 * So an exception escaping a thread's last frame (which kills the process) is unhandled, and so
 * is one a finally's own exception replaced: no catch ever took it. A `throw;` in a catch block is
 * a new ExceptionThrown with the ReThrown flag: the first throw was handled (its catch began), the
 * rethrow is counted again, as the runtime dispatches it again.
 *
 * Memory grows with the groups (capped: past MAX_GROUPS distinct messages, a type's new messages
 * share one group), the threads and their stacks, never with the events. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"

enum {
  EV_THROWN = 80,
  EV_CATCH_START = 250,
  EV_FINALLY_START = 252,
  EV_FILTER_START = 254,
  EV_THROWN_STOP = 256
};
enum { FLAG_NESTED = 0x02, FLAG_RETHROWN = 0x04 };

#define MAX_GROUPS 100000
#define OTHER_MESSAGES "(more distinct messages than dntrace keeps)"
#define IN_FLIGHT_MAX 16              /* exceptions in flight per thread */
#define MAX_SECONDS (7 * 24 * 3600)   /* per-second counts kept for a week of trace */

/* What the events are counted under: (type, message, stack). The message is folded unless the
 * grouping is by message; the stack is the hash of its addresses when the grouping needs it (site,
 * stack), else 0. The groups shown are made of these once the frames have names (finish). */
struct group {
  dnt_exception_group g;
  char *type, *message;
  uint64_t stack_hash;
  uint32_t hash;
  char *catch_names[DNT_EXC_CATCHES];
  uint64_t catch_ids[DNT_EXC_CATCHES]; /* their MethodIDs (0: not said) */
};

struct in_flight {
  size_t group;
  int caught;
};

/* The bytes of an ExceptionThrown's two UTF-16 strings (type and message, with their NULs) and
 * the group they decoded to: a type and message seen before are not decoded again. */
struct raw_name {
  uint8_t *bytes;
  size_t len;
  uint32_t hash;
  size_t group;
};

struct thread {
  uint64_t tid;
  struct in_flight v[IN_FLIGHT_MAX];
  size_t n;
};

struct dnt_exceptions_analysis {
  struct dnt__stacked base; /* first: the callbacks take the analysis for it */
  struct group *groups;
  size_t ngroups, capgroups;
  size_t *table; /* group index + 1, 0: empty */
  size_t table_cap;
  struct thread *threads;
  size_t nthreads, capthreads;
  size_t *ttable;
  size_t ttable_cap;
  uint64_t *per_sec;
  size_t nsec, capsec;
  struct raw_name *raw; /* ExceptionThrown's strings as the runtime wrote them: their group */
  size_t nraw, capraw;
  size_t *rtable; /* raw index + 1, 0: empty */
  size_t rtable_cap;
  const ntr_metadata *thrown_md; /* the last ExceptionThrown's metadata, and its EIP's size (0: */
  size_t thrown_eip;             /* not laid out as thrown_raw reads it) */
  dnt_exc_grouping by;
  /* after finish: the groups shown, each the sum of the counted groups whose key (below) is its */
  struct shown {
    dnt_exception_group g;
    char *key;  /* the type, a newline, and the site, the message or the stack's frame ids */
    char *site;
    uint32_t hash;
  } *shown;
  size_t nshown;
  dnt_exception_group *sorted;
  dnt_exception_summary summary;
};

static void label(void *ud, size_t key, char *buf, size_t cap) {
  struct dnt_exceptions_analysis *a = ud;
  if (key >= a->ngroups) {
    snprintf(buf, cap, "Throw(?)");
    return;
  }
  const struct group *g = &a->groups[key];
  /* a frame's name: one line, no ';' (folded stacks' separator), the type and message cut; a
   * label that is not the type and message as they are gets the group's number, so that no two
   * groups share a frame (the stacks are told apart by it) */
  int n = snprintf(buf, cap, "Throw(%.400s) %.200s", g->type, g->message);
  int changed = strlen(g->type) > 400 || strlen(g->message) > 200 || n < 0 || (size_t)n >= cap;
  for (char *c = buf; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == ';') *c = ' ', changed = 1;
  if (changed && cap > 32) {
    size_t len = strlen(buf);
    if (len > cap - 24) len = cap - 24;
    snprintf(buf + len, cap - len, "... (#%zu)", key + 1);
  }
}

struct dnt_exceptions_analysis *dnt_exceptions_analysis_new(const struct dnt_schema *schema) {
  struct dnt_exceptions_analysis *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  if (dnt__stacked_init(&a->base, schema, label, a, 0,
                             "exceptions thrown, one sample per ExceptionThrown event, at its stack") != 0) {
    dnt_exceptions_analysis_free(a);
    return NULL;
  }
  return a;
}

void dnt_exceptions_analysis_free(struct dnt_exceptions_analysis *a) {
  if (!a) return;
  for (size_t i = 0; i < a->ngroups; i++) {
    free(a->groups[i].type);
    free(a->groups[i].message);
    for (int k = 0; k < DNT_EXC_CATCHES; k++) free(a->groups[i].catch_names[k]);
  }
  free(a->groups);
  free(a->table);
  free(a->threads);
  free(a->ttable);
  free(a->per_sec);
  for (size_t i = 0; i < a->nraw; i++) free(a->raw[i].bytes);
  free(a->raw);
  free(a->rtable);
  for (size_t i = 0; i < a->nshown; i++) {
    free(a->shown[i].key);
    free(a->shown[i].site);
  }
  free(a->shown);
  free(a->sorted);
  dnt__stacked_release(&a->base);
  free(a);
}

int dnt_exceptions_analysis_failed(const struct dnt_exceptions_analysis *a) { return a->base.failed ? -ENOMEM : 0; }

void dnt_exceptions_analysis_catches_recorded(struct dnt_exceptions_analysis *a) { a->summary.catch_events = 1; }

void dnt_exceptions_analysis_group_by(struct dnt_exceptions_analysis *a, dnt_exc_grouping by) { a->by = by; }

int dnt_exc_grouping_parse(const char *word, dnt_exc_grouping *out) {
  static const char *const words[] = {"site", "type", "message", "stack"};
  for (int i = 0; i < 4; i++)
    if (strcmp(word, words[i]) == 0) return *out = (dnt_exc_grouping)i, 0;
  return -1;
}

static uint32_t hash_str(uint32_t h, const char *s) {
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

/* The index of the group of (type, message), created when new; -1 when out of memory. */
static long group_of(struct dnt_exceptions_analysis *a, const char *type, const char *message, uint64_t stack_hash) {
  if (a->ngroups >= MAX_GROUPS) message = OTHER_MESSAGES, stack_hash = 0;
  uint32_t h = hash_str(hash_str(2166136261u, type) * 31 + 1, message) ^ (uint32_t)(stack_hash ^ (stack_hash >> 32));
  if ((a->ngroups + 1) * 2 > a->table_cap) {
    size_t cap = a->table_cap ? a->table_cap * 2 : 64;
    size_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < a->ngroups; i++) {
      size_t j = a->groups[i].hash & (cap - 1);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = i + 1;
    }
    free(a->table);
    a->table = t;
    a->table_cap = cap;
  }
  size_t j = h & (a->table_cap - 1);
  for (; a->table[j]; j = (j + 1) & (a->table_cap - 1)) {
    const struct group *g = &a->groups[a->table[j] - 1];
    if (g->hash == h && g->stack_hash == stack_hash && strcmp(g->type, type) == 0 && strcmp(g->message, message) == 0)
      return (long)a->table[j] - 1;
  }
  /* copied first: type and message may be another group's, which growing the array moves */
  char *type_copy = strdup(type), *message_copy = strdup(message);
  if (!type_copy || !message_copy) {
    free(type_copy);
    free(message_copy);
    return -1;
  }
  if (a->ngroups == a->capgroups) {
    size_t cap = a->capgroups ? a->capgroups * 2 : 32;
    struct group *g = realloc(a->groups, cap * sizeof *g);
    if (!g) {
      free(type_copy);
      free(message_copy);
      return -1;
    }
    a->groups = g;
    a->capgroups = cap;
  }
  struct group *g = &a->groups[a->ngroups];
  memset(g, 0, sizeof *g);
  g->type = type_copy;
  g->message = message_copy;
  g->hash = h;
  g->stack_hash = stack_hash;
  a->table[j] = ++a->ngroups;
  return (long)a->ngroups - 1;
}

/* The thread's state, created empty; NULL when out of memory. */
static struct thread *thread_of(struct dnt_exceptions_analysis *a, uint64_t tid) {
  uint32_t h = (uint32_t)((tid * 0x9E3779B97F4A7C15ull) >> 32);
  if ((a->nthreads + 1) * 2 > a->ttable_cap) {
    size_t cap = a->ttable_cap ? a->ttable_cap * 2 : 64;
    size_t *t = calloc(cap, sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < a->nthreads; i++) {
      size_t j = (uint32_t)((a->threads[i].tid * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = i + 1;
    }
    free(a->ttable);
    a->ttable = t;
    a->ttable_cap = cap;
  }
  size_t j = h & (a->ttable_cap - 1);
  for (; a->ttable[j]; j = (j + 1) & (a->ttable_cap - 1))
    if (a->threads[a->ttable[j] - 1].tid == tid) return &a->threads[a->ttable[j] - 1];
  if (a->nthreads == a->capthreads) {
    size_t cap = a->capthreads ? a->capthreads * 2 : 16;
    struct thread *t = realloc(a->threads, cap * sizeof *t);
    if (!t) return NULL;
    a->threads = t;
    a->capthreads = cap;
  }
  struct thread *t = &a->threads[a->nthreads];
  t->tid = tid;
  t->n = 0;
  a->ttable[j] = ++a->nthreads;
  return t;
}

/* An exception that left its thread's list without a catch. */
static void uncaught(struct dnt_exceptions_analysis *a, const struct in_flight *f, int known) {
  if (known)
    a->groups[f->group].g.unhandled++;
  else
    a->groups[f->group].g.unknown++;
}

/* Room for second s in the per-second counts (zeros): 0, or -1 when out of memory. */
static int grow_seconds(struct dnt_exceptions_analysis *a, size_t s) {
  if (s < a->capsec) return 0;
  size_t cap = a->capsec ? a->capsec : 64;
  while (cap <= s) cap *= 2;
  uint64_t *v = realloc(a->per_sec, cap * sizeof *v);
  if (!v) return -1;
  memset(v + a->capsec, 0, (cap - a->capsec) * sizeof *v);
  a->per_sec = v;
  a->capsec = cap;
  return 0;
}

static int count_second(struct dnt_exceptions_analysis *a, double ms) {
  if (ms >= (double)MAX_SECONDS * 1000.0) return 0;
  size_t s = ms > 0 ? (size_t)(ms / 1000.0) : 0;
  if (grow_seconds(a, s) != 0) return -1;
  a->per_sec[s]++;
  if (s + 1 > a->nsec) a->nsec = s + 1;
  return 0;
}

/* The group, flags and HRESULT of an ExceptionThrown from its decoded record; -1 when out of
 * memory. */
static long thrown_decoded(struct dnt_exceptions_analysis *a, const ntr_event *ev, uint64_t stack_hash,
                           uint64_t *flags, uint64_t *hresult) {
  const char *type = "(unknown)", *message = "";
  *flags = *hresult = 0;
  if (ev->metadata->version >= 1) {
    const char *t = dnt_record_str(&a->base.rec, "ExceptionType");
    const char *m = dnt_record_str(&a->base.rec, "ExceptionMessage");
    if (t && *t) type = t;
    if (m) message = m;
    *flags = dnt__record_u64(&a->base.rec, "ExceptionFlags");
    *hresult = dnt__record_u64(&a->base.rec, "ExceptionHRESULT");
  }
  if (a->by == DNT_EXC_BY_MESSAGE) return group_of(a, type, message, stack_hash);
  char folded[1024];
  dnt_exc_fold_message(message, folded, sizeof folded);
  return group_of(a, type, folded, stack_hash);
}

/* The stack's addresses hashed, when the grouping tells stacks apart (else 0). */
static uint64_t stack_hash_of(const struct dnt_exceptions_analysis *a, const ntr_event *ev) {
  if (a->by != DNT_EXC_BY_SITE && a->by != DNT_EXC_BY_STACK) return 0;
  size_t n = ev->stack ? ev->stack->nframes : 0;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ ev->stack->frames[i]) * 0xff51afd7ed558ccdull;
    h ^= h >> 31;
  }
  return h | 1; /* never 0: that is "not told apart" */
}

static int on_thrown(struct dnt_exceptions_analysis *a, const ntr_event *ev, long gi, uint64_t flags,
                     uint64_t hresult) {
  struct thread *t = thread_of(a, ev->thread_id);
  if (gi < 0 || !t) return -1;
  double ms = dnt__clock_ms(&a->base.clock, ev->timestamp);
  dnt_exception_group *g = &a->groups[gi].g;
  if (g->thrown == 0) {
    g->first_ms = ms;
    g->hresult = (uint32_t)hresult;
  }
  if (ms > g->last_ms || g->thrown == 0) g->last_ms = ms;
  g->thrown++;
  if (flags & FLAG_RETHROWN) g->rethrown++;
  if (flags & FLAG_NESTED) g->nested++;
  if (count_second(a, ms) != 0) return -1;
  while (t->n && t->v[t->n - 1].caught) t->n--; /* caught ones are done */
  if (t->n == IN_FLIGHT_MAX) {                  /* the oldest can no longer be told apart */
    uncaught(a, &t->v[0], 0);
    memmove(t->v, t->v + 1, (IN_FLIGHT_MAX - 1) * sizeof *t->v);
    t->n--;
  }
  t->v[t->n++] = (struct in_flight){(size_t)gi, 0};
  dnt__event_stacks_add(&a->base.stacks, (size_t)gi, ev->thread_id, ev->timestamp, ev->stack ? ev->stack->frames : NULL,
                        ev->stack ? ev->stack->nframes : 0, 0);
  return a->base.stacks.oom ? -1 : 0;
}

/* The catch's method: its MethodID (a method's runtime handle) when the group has it already, so
 * that the name, a long string, is decoded once per method, not per catch; else by name. */
static int on_catch(struct dnt_exceptions_analysis *a, const ntr_event *ev, const ntr_field *f, uint32_t nfields) {
  struct thread *t = thread_of(a, ev->thread_id);
  if (!t) return -1;
  if (t->n == 0 || t->v[t->n - 1].caught) return 0; /* its throw came before the trace */
  struct in_flight *fl = &t->v[t->n - 1];
  fl->caught = 1;
  struct group *g = &a->groups[fl->group];
  g->g.handled++;
  uint32_t before = 0; /* the fields before MethodName: EntryEIP, MethodID */
  while (f && before < nfields && strcmp(f[before].name, "MethodName") != 0) before++;
  uint32_t ptr = dnt__clock_ptr(&a->base.clock);
  if (dnt_record_decode_layout(&a->base.rec, f, before, ptr, ev->payload, ev->payload_size) == NTR_ENOMEM) return -1;
  uint64_t id = dnt__record_u64(&a->base.rec, "MethodID");
  if (id != 0)
    for (int k = 0; k < DNT_EXC_CATCHES && g->catch_names[k]; k++)
      if (g->catch_ids[k] == id) {
        g->g.catches[k].count++;
        return 0;
      }
  if (dnt_record_decode_layout(&a->base.rec, f, f ? nfields : 0, ptr, ev->payload, ev->payload_size) == NTR_ENOMEM)
    return -1;
  const char *method = dnt_record_str(&a->base.rec, "MethodName");
  if (!method || !*method) method = "(unknown)";
  for (int k = 0; k < DNT_EXC_CATCHES; k++) {
    if (!g->catch_names[k]) {
      if (!(g->catch_names[k] = strdup(method))) return -1;
      g->catch_ids[k] = id;
      g->g.catches[k].count = 1;
      return 0;
    }
    if (strcmp(g->catch_names[k], method) == 0) {
      g->g.catches[k].count++;
      return 0;
    }
  }
  g->g.other_catches++;
  return 0;
}

static void on_stop(struct dnt_exceptions_analysis *a, const ntr_event *ev) {
  struct thread *t = thread_of(a, ev->thread_id);
  if (!t || t->n == 0) return;
  struct in_flight *f = &t->v[--t->n];
  if (!f->caught) uncaught(a, f, 1);
}

static void exc_callbacks(ntr_callbacks *cb);

/* A short or odd payload keeps the fields decoded before the fault; a missing one reads as
 * absent; an event the schema does not know decodes as none. 0, or -1 when out of memory. */
static int decode_thrown(struct dnt_exceptions_analysis *a, const ntr_event *ev, const ntr_field *f, uint32_t nfields) {
  return dnt_record_decode_layout(&a->base.rec, f, f ? nfields : 0, dnt__clock_ptr(&a->base.clock), ev->payload,
                                  ev->payload_size) == NTR_ENOMEM
             ? -1
             : 0;
}

/* Converting the UTF-16 type and message to UTF-8 took most of the analysis's time (a program
 * throws the same few exceptions again and again): an ExceptionThrown whose payload is laid out
 * as the runtime writes it is looked up by the strings' bytes, decoded only when new. */
struct thrown_raw {
  const uint8_t *bytes; /* the two strings with their NULs */
  size_t len;
  uint32_t hash;
  uint64_t flags, hresult;
};

/* The length in bytes of the UTF-16 string at p (without its NUL), or -1 when [p, end) holds no
 * NUL. */
static long utf16z_len(const uint8_t *p, const uint8_t *end) {
  for (const uint8_t *q = p; end - q >= 2; q += 2)
    if (q[0] == 0 && q[1] == 0) return q - p;
  return -1;
}

/* A hash of n bytes, eight at a time (the strings are long and the same ones come again). */
static uint32_t hash_bytes(const uint8_t *p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
  for (; n >= 8; p += 8, n -= 8) {
    memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  w = 0;
  memcpy(&w, p, n);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  return (uint32_t)(h ^ (h >> 29));
}

static int field_is(const ntr_field *f, const char *name, uint32_t type) {
  return f->type == type && strcmp(f->name, name) == 0;
}

/* The size of ExceptionEIP when layout f is ExceptionThrown_V1's as the runtime writes it, else 0. */
static size_t thrown_v1_eip(const struct dnt_exceptions_analysis *a, const ntr_field *f, uint32_t n) {
  if (!f || n < 5 || !field_is(&f[0], "ExceptionType", NTR_TYPE_STRING) ||
      !field_is(&f[1], "ExceptionMessage", NTR_TYPE_STRING) || strcmp(f[2].name, "ExceptionEIP") != 0 ||
      !field_is(&f[3], "ExceptionHRESULT", NTR_TYPE_UINT32) || !field_is(&f[4], "ExceptionFlags", NTR_TYPE_UINT16))
    return 0;
  if (f[2].type == DNT_TYPE_POINTER) return dnt__clock_ptr(&a->base.clock);
  return f[2].type == NTR_TYPE_UINT64 ? 8 : 0;
}

/* Whether ev's payload (layout f) is ExceptionThrown_V1's, whole: raw filled in. */
static int thrown_raw(struct dnt_exceptions_analysis *a, const ntr_field *f, uint32_t n, const ntr_event *ev,
                      struct thrown_raw *raw) {
  if (a->ngroups >= MAX_GROUPS) return 0;
  if (ev->metadata != a->thrown_md) { /* the check once per metadata record, not per event */
    a->thrown_md = ev->metadata;
    a->thrown_eip = thrown_v1_eip(a, f, n);
  }
  size_t eip = a->thrown_eip;
  if (!eip) return 0;
  const uint8_t *p = ev->payload, *end = p + ev->payload_size;
  long type_len = utf16z_len(p, end);
  if (type_len < 0) return 0;
  long msg_len = utf16z_len(p + type_len + 2, end);
  if (msg_len < 0) return 0;
  size_t strings = (size_t)type_len + 2 + (size_t)msg_len + 2;
  if (ev->payload_size - strings < eip + 4 + 2) return 0;
  const uint8_t *fixed = p + strings + eip;
  uint32_t hr;
  uint16_t fl;
  memcpy(&hr, fixed, 4); /* little endian, as every trace dntrace reads */
  memcpy(&fl, fixed + 4, 2);
  *raw = (struct thrown_raw){.bytes = p, .len = strings, .hash = hash_bytes(p, strings), .flags = fl, .hresult = hr};
  return 1;
}

/* The group of raw's bytes when seen before, else -2. */
static long raw_group(const struct dnt_exceptions_analysis *a, const struct thrown_raw *raw) {
  if (!a->rtable_cap) return -2;
  for (size_t j = raw->hash & (a->rtable_cap - 1); a->rtable[j]; j = (j + 1) & (a->rtable_cap - 1)) {
    const struct raw_name *r = &a->raw[a->rtable[j] - 1];
    if (r->hash == raw->hash && r->len == raw->len && memcmp(r->bytes, raw->bytes, raw->len) == 0)
      return (long)r->group;
  }
  return -2;
}

/* Keeps raw's bytes as the name of group (at most one per group and as many again: two byte
 * strings decode alike only when they hold bad UTF-16). 0, or -1 when out of memory. */
static int raw_remember(struct dnt_exceptions_analysis *a, const struct thrown_raw *raw, size_t group) {
  if (a->nraw >= 2 * (size_t)MAX_GROUPS) return 0;
  if ((a->nraw + 1) * 2 > a->rtable_cap) {
    size_t cap = a->rtable_cap ? a->rtable_cap * 2 : 64;
    size_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < a->nraw; i++) {
      size_t j = a->raw[i].hash & (cap - 1);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = i + 1;
    }
    free(a->rtable);
    a->rtable = t;
    a->rtable_cap = cap;
  }
  if (a->nraw == a->capraw) {
    size_t cap = a->capraw ? a->capraw * 2 : 32;
    struct raw_name *r = realloc(a->raw, cap * sizeof *r);
    if (!r) return -1;
    a->raw = r;
    a->capraw = cap;
  }
  uint8_t *copy = malloc(raw->len);
  if (!copy) return -1;
  memcpy(copy, raw->bytes, raw->len);
  a->raw[a->nraw] = (struct raw_name){copy, raw->len, raw->hash, group};
  size_t j = raw->hash & (a->rtable_cap - 1);
  while (a->rtable[j]) j = (j + 1) & (a->rtable_cap - 1);
  a->rtable[j] = ++a->nraw;
  return 0;
}

void dnt_exceptions_analysis_callbacks(ntr_callbacks *cb) { exc_callbacks(cb); }

static int exc_on_event(void *ud, const ntr_event *ev) {
  struct dnt_exceptions_analysis *a = ud;
  int look = dnt__stacked_on_event(&a->base, ev);
  if (look <= 0) return look < 0;
  const ntr_metadata *md = ev->metadata;
  switch (md->event_id) {
  case EV_THROWN: case EV_CATCH_START: break;
  case EV_FINALLY_START: case EV_FILTER_START: a->summary.catch_events = 1; return 0;
  case EV_THROWN_STOP:
    a->summary.catch_events = 1;
    on_stop(a, ev);
    return 0;
  default: return 0;
  }
  uint32_t nfields;
  const ntr_field *f = dnt__layout(&a->base.layouts, a->base.schema, md, &nfields);
  if (md->event_id == EV_CATCH_START) {
    a->summary.catch_events = 1;
    return on_catch(a, ev, f, nfields) ? (a->base.failed = 1, 1) : 0;
  }
  uint64_t flags, hresult, sh = stack_hash_of(a, ev);
  struct thrown_raw raw;
  long gi;
  if (md->version >= 1 && thrown_raw(a, f, nfields, ev, &raw)) {
    flags = raw.flags;
    hresult = raw.hresult;
    gi = raw_group(a, &raw);
    if (gi == -2) { /* new: decoded once, then known by its bytes */
      if (decode_thrown(a, ev, f, nfields) != 0) return a->base.failed = 1, 1;
      gi = thrown_decoded(a, ev, sh, &flags, &hresult);
      if (gi >= 0 && raw_remember(a, &raw, (size_t)gi) != 0) gi = -1;
    } else if (a->groups[gi].stack_hash != sh) { /* the same strings from another stack */
      gi = group_of(a, a->groups[gi].type, a->groups[gi].message, sh);
    }
  } else {
    if (decode_thrown(a, ev, f, nfields) != 0) return a->base.failed = 1, 1;
    gi = thrown_decoded(a, ev, sh, &flags, &hresult);
  }
  if (on_thrown(a, ev, gi, flags, hresult) != 0) return a->base.failed = 1, 1;
  return 0;
}

static void exc_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = dnt__stacked_on_trace;
  cb->on_thread = dnt__stacked_on_thread;
  cb->on_sequence_point = dnt__stacked_on_sequence_point;
  cb->on_event = exc_on_event;
}

/* ---- after the trace ---- */

static int by_thrown(const void *x, const void *y) {
  const dnt_exception_group *a = x, *b = y;
  if (a->thrown != b->thrown) return a->thrown > b->thrown ? -1 : 1;
  int c = strcmp(a->type, b->type);
  if (c) return c;
  if (a->site && b->site && (c = strcmp(a->site, b->site))) return c;
  return strcmp(a->message, b->message);
}

static int by_string(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

static void sort_catches(dnt_exception_group *g) {
  for (int i = 1; i < DNT_EXC_CATCHES; i++) /* insertion sort, most frequent first */
    for (int j = i; j > 0 && g->catches[j].method && g->catches[j].count > g->catches[j - 1].count; j--) {
      const char *m = g->catches[j].method;
      uint64_t c = g->catches[j].count;
      g->catches[j] = g->catches[j - 1];
      g->catches[j - 1].method = m;
      g->catches[j - 1].count = c;
    }
}

/* The throw site: the innermost frame of the program's own code, else the innermost managed
 * frame that is not the runtime's dispatch of the exception. */
static const char *site_of(const struct dnt_profile *p, const uint32_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (dnt__user_frame(dnt_profile_name(p, ids[i]))) return dnt_profile_name(p, ids[i]);
  for (size_t i = 0; i < n; i++) {
    const char *name = dnt_profile_name(p, ids[i]);
    if (dnt__managed_frame(name) && !strstr(name, "!System.Runtime.EH.")) return name;
  }
  return n ? "(no managed frame)" : "(no stack)";
}

/* What a stack contributes to a shown group's key, worked out once per distinct stack (groups
 * of one site share their stack: a deep one is walked once, not once per group): the site's
 * name (profile-owned) by site, the frame ids as text (owned) by stack. */
struct stack_part {
  uint32_t stack;
  const char *site;
  char *ids;
};

static int by_stack_part(const void *x, const void *y) {
  uint32_t a = ((const struct stack_part *)x)->stack, b = ((const struct stack_part *)y)->stack;
  return (a > b) - (a < b);
}

/* The parts of the distinct stacks of stack_of (sorted by stack; *n of them): NULL when out of
 * memory. UINT32_MAX, a group without a stack, has its part too. */
static struct stack_part *stack_parts(const struct dnt_exceptions_analysis *a, const uint32_t *stack_of, size_t *n) {
  struct stack_part *v = calloc(a->ngroups ? a->ngroups : 1, sizeof *v);
  if (!v) return NULL;
  for (size_t i = 0; i < a->ngroups; i++) v[i].stack = stack_of[i];
  if (a->ngroups) qsort(v, a->ngroups, sizeof *v, by_stack_part);
  size_t k = 0;
  for (size_t i = 0; i < a->ngroups; i++)
    if (k == 0 || v[k - 1].stack != v[i].stack) v[k++] = v[i];
  *n = k;
  const struct dnt_profile *p = a->base.stacks.prof;
  for (size_t i = 0; i < k; i++) {
    size_t nf = v[i].stack == UINT32_MAX ? 0 : dnt_profile_stack_names(p, v[i].stack, NULL);
    uint32_t *ids = nf > 1 ? malloc(nf * sizeof *ids) : NULL;
    if (nf > 1 && !ids) goto oom;
    if (ids) dnt_profile_stack_names(p, v[i].stack, ids);
    const uint32_t *frames = ids ? ids + 1 : NULL; /* the key's own frame left out */
    size_t n_frames = nf > 1 ? nf - 1 : 0;
    if (a->by == DNT_EXC_BY_SITE) {
      v[i].site = site_of(p, frames, n_frames);
    } else {
      size_t len = 0;
      FILE *mem = open_memstream(&v[i].ids, &len);
      if (!mem) {
        free(ids);
        goto oom;
      }
      for (size_t f = 0; f < n_frames; f++) fprintf(mem, "%x,", frames[f]);
      if (fclose(mem) != 0) {
        free(ids);
        goto oom;
      }
    }
    free(ids);
  }
  return v;
oom:
  for (size_t i = 0; i < k; i++) free(v[i].ids);
  free(v);
  return NULL;
}

/* The key of the group shown for raw group gi: malloc'ed, NULL when out of memory; *site the
 * site's name when grouped by site. */
static char *shown_key(const struct dnt_exceptions_analysis *a, const struct stack_part *parts, size_t nparts,
                       uint32_t stack, size_t gi, const char **site) {
  const struct group *g = &a->groups[gi];
  char *key = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&key, &len);
  if (!mem) return NULL;
  fprintf(mem, "%s\n", g->type);
  *site = NULL;
  if (a->by == DNT_EXC_BY_MESSAGE) {
    fputs(g->message, mem);
  } else if (a->by != DNT_EXC_BY_TYPE) {
    struct stack_part want = {.stack = stack};
    const struct stack_part *part = bsearch(&want, parts, nparts, sizeof *parts, by_stack_part);
    if (part && a->by == DNT_EXC_BY_SITE) fputs(*site = part->site, mem);
    else if (part && part->ids) fputs(part->ids, mem);
  }
  if (fclose(mem) != 0) {
    free(key);
    return NULL;
  }
  return key;
}

/* The shown group of key (created when new, taking key; else key is freed): its index, or -1 when
 * out of memory. */
static long shown_of(struct dnt_exceptions_analysis *a, char *key, const char *site, size_t **table, size_t *cap) {
  uint32_t h = hash_str(2166136261u, key);
  if ((a->nshown + 1) * 2 > *cap) {
    size_t ncap = *cap ? *cap * 2 : 64;
    size_t *t = calloc(ncap, sizeof *t);
    if (!t) return free(key), -1;
    for (size_t i = 0; i < a->nshown; i++) {
      size_t j = a->shown[i].hash & (ncap - 1);
      while (t[j]) j = (j + 1) & (ncap - 1);
      t[j] = i + 1;
    }
    free(*table);
    *table = t;
    *cap = ncap;
  }
  size_t j = h & (*cap - 1);
  for (; (*table)[j]; j = (j + 1) & (*cap - 1)) {
    struct shown *sh = &a->shown[(*table)[j] - 1];
    if (sh->hash == h && strcmp(sh->key, key) == 0) return free(key), (long)(*table)[j] - 1;
  }
  struct shown *sh = &a->shown[a->nshown]; /* room for every raw group was made */
  memset(sh, 0, sizeof *sh);
  sh->key = key;
  sh->hash = h;
  if (site && !(sh->site = strdup(site))) return -1;
  (*table)[j] = ++a->nshown;
  return (long)a->nshown - 1;
}

/* A raw group's catches added to its shown group's, by method name. */
static void add_catches(dnt_exception_group *to, const dnt_exception_group *from) {
  to->other_catches += from->other_catches;
  for (int k = 0; k < DNT_EXC_CATCHES && from->catches[k].method; k++) {
    int m = 0;
    while (m < DNT_EXC_CATCHES && to->catches[m].method && strcmp(to->catches[m].method, from->catches[k].method))
      m++;
    if (m == DNT_EXC_CATCHES) {
      to->other_catches += from->catches[k].count;
      continue;
    }
    if (!to->catches[m].method) to->catches[m].method = from->catches[k].method;
    to->catches[m].count += from->catches[k].count;
  }
}

/* A message with its count among the shown group's examples (most frequent kept). */
static void add_example(dnt_exception_group *g, const char *message, uint64_t count) {
  int k = 0;
  while (k < DNT_EXC_EXAMPLES && g->examples[k].message && strcmp(g->examples[k].message, message)) k++;
  if (k < DNT_EXC_EXAMPLES && g->examples[k].message) {
    g->examples[k].count += count;
  } else if (k < DNT_EXC_EXAMPLES) {
    g->examples[k].message = message;
    g->examples[k].count = count;
  } else if (count > g->examples[DNT_EXC_EXAMPLES - 1].count) { /* it takes the last one's place */
    g->other_examples += g->examples[DNT_EXC_EXAMPLES - 1].count;
    g->examples[k = DNT_EXC_EXAMPLES - 1].message = message;
    g->examples[k].count = count;
  } else {
    g->other_examples += count;
    return;
  }
  for (; k > 0 && g->examples[k].count > g->examples[k - 1].count; k--) { /* most frequent first */
    const char *m = g->examples[k].message;
    uint64_t c = g->examples[k].count;
    g->examples[k] = g->examples[k - 1];
    g->examples[k - 1].message = m;
    g->examples[k - 1].count = c;
  }
}

/* A raw group's counts added to its shown group. */
static void add_group(dnt_exception_group *to, const struct group *from) {
  const dnt_exception_group *g = &from->g;
  if (to->thrown == 0 || (g->thrown && g->first_ms < to->first_ms)) {
    to->first_ms = g->first_ms;
    to->hresult = g->hresult;
  }
  if (g->last_ms > to->last_ms) to->last_ms = g->last_ms;
  to->type = from->type;
  to->thrown += g->thrown;
  to->handled += g->handled;
  to->unhandled += g->unhandled;
  to->unknown += g->unknown;
  to->rethrown += g->rethrown;
  to->nested += g->nested;
  dnt_exception_group named = *g;
  for (int k = 0; k < DNT_EXC_CATCHES; k++) named.catches[k].method = from->catch_names[k];
  add_catches(to, &named);
  add_example(to, from->message, g->thrown);
}

/* The groups shown, made of the raw ones by the grouping's key, and the stacks counted under
 * them; 0, or -1 when out of memory. */
static int make_shown(struct dnt_exceptions_analysis *a, size_t top_stacks) {
  struct dnt__event_stacks *st = &a->base.stacks;
  int named = !st->oom && dnt_profile_finish(st->prof) == 0; /* the frames' names */
  uint32_t *stack_of = malloc((a->ngroups ? a->ngroups : 1) * sizeof *stack_of);
  long *shown_ix = malloc((a->ngroups ? a->ngroups : 1) * sizeof *shown_ix);
  size_t *table = NULL, cap = 0, nparts = 0;
  struct stack_part *parts = NULL;
  int rc = -1;
  a->shown = calloc(a->ngroups ? a->ngroups : 1, sizeof *a->shown);
  if (!stack_of || !shown_ix || !a->shown) goto out;
  for (size_t i = 0; i < a->ngroups; i++) stack_of[i] = UINT32_MAX;
  for (size_t i = 0; named && i < st->npairs; i++) /* a raw group's stack is one (by its hash), or any */
    if (st->pairs[i].key < a->ngroups && stack_of[st->pairs[i].key] == UINT32_MAX)
      stack_of[st->pairs[i].key] = st->pairs[i].stack;
  parts = a->by == DNT_EXC_BY_SITE || a->by == DNT_EXC_BY_STACK ? stack_parts(a, stack_of, &nparts) : NULL;
  if ((a->by == DNT_EXC_BY_SITE || a->by == DNT_EXC_BY_STACK) && !parts) goto out;
  for (size_t i = 0; i < a->ngroups; i++) {
    const char *site;
    char *key = shown_key(a, parts, nparts, stack_of[i], i, &site);
    if (!key || (shown_ix[i] = shown_of(a, key, site, &table, &cap)) < 0) goto out;
    add_group(&a->shown[shown_ix[i]].g, &a->groups[i]);
  }
  if (named) {
    for (size_t i = 0; i < st->npairs; i++) st->pairs[i].key = (size_t)shown_ix[st->pairs[i].key];
    rc = dnt__event_stacks_finish(st, a->nshown, top_stacks, 0) == 0 ? 0 : -1;
  }
out:
  for (size_t i = 0; parts && i < nparts; i++) free(parts[i].ids);
  free(parts);
  free(stack_of);
  free(shown_ix);
  free(table);
  return rc;
}

void dnt_exceptions_analysis_finish(struct dnt_exceptions_analysis *a, size_t top_stacks) {
  if (a->base.finished) return;
  a->base.finished = 1;
  dnt_exception_summary *s = &a->summary;
  s->grouping = a->by;
  for (size_t i = 0; i < a->nthreads; i++) /* still in flight when the trace ended */
    for (size_t k = 0; k < a->threads[i].n; k++)
      if (!a->threads[i].v[k].caught) uncaught(a, &a->threads[i].v[k], s->catch_events);
  int stacks_ok = make_shown(a, top_stacks) == 0;
  if (!stacks_ok) a->base.failed = 1;
  if (!a->shown || !(a->sorted = calloc(a->nshown ? a->nshown : 1, sizeof *a->sorted))) {
    a->base.failed = 1;
    a->nshown = 0;
    return;
  }
  for (size_t i = 0; i < a->nshown; i++) {
    dnt_exception_group *g = &a->shown[i].g;
    g->message = g->examples[0].message ? g->examples[0].message : "";
    g->site = a->shown[i].site;
    sort_catches(g);
    if (stacks_ok) {
      const struct dnt__key_stacks *ks = &a->base.stacks.by_key[i];
      g->stacks = ks->v;
      g->nstacks = ks->n;
      g->other_stacks = ks->other_count;
    }
    a->sorted[i] = *g;
    s->thrown += g->thrown;
    s->handled += g->handled;
    s->unhandled += g->unhandled;
    s->unknown += g->unknown;
  }
  qsort(a->sorted, a->nshown, sizeof *a->sorted, by_thrown);
  s->groups = a->nshown;
  const char **types = malloc((a->nshown ? a->nshown : 1) * sizeof *types); /* distinct types */
  if (!types) {
    a->base.failed = 1;
  } else {
    for (size_t i = 0; i < a->nshown; i++) types[i] = a->shown[i].g.type;
    qsort(types, a->nshown, sizeof *types, by_string);
    for (size_t i = 0; i < a->nshown; i++) s->types += i == 0 || strcmp(types[i], types[i - 1]) != 0;
    free(types);
  }
  const struct dnt__clock *c = &a->base.clock;
  s->trace_ms = dnt__clock_session_ms(c);
  if (s->trace_ms > 0) s->per_second = (double)s->thrown * 1000.0 / s->trace_ms;
  /* every second of the session, the quiet ones after the last throw too */
  /* (a session's clock can run backwards in a damaged trace: no seconds then) */
  if (s->trace_ms > 0 && s->trace_ms < (double)MAX_SECONDS * 1000.0 &&
      grow_seconds(a, (size_t)(s->trace_ms / 1000.0)) == 0)
    a->nsec = (size_t)((s->trace_ms + 999.999) / 1000.0);
  s->per_sec_counts = a->per_sec;
  s->seconds = a->nsec;
  for (size_t i = 0; i < a->nsec; i++)
    if ((double)a->per_sec[i] > s->max_per_second) s->max_per_second = (double)a->per_sec[i];
}

const dnt_exception_group *dnt_exceptions_list(const struct dnt_exceptions_analysis *a, size_t *n) {
  *n = a->sorted ? a->nshown : 0;
  return a->sorted;
}

const dnt_exception_summary *dnt_exceptions_get_summary(const struct dnt_exceptions_analysis *a) {
  return &a->summary;
}

const dnt_analysis_stack *dnt_exceptions_stacks(const struct dnt_exceptions_analysis *a, size_t *n) {
  *n = a->base.failed ? 0 : a->base.stacks.all.n;
  return a->base.stacks.all.v;
}

const struct dnt_profile *dnt_exceptions_profile(const struct dnt_exceptions_analysis *a) {
  return a->base.stacks.prof;
}

void dnt_exceptions_analysis_stitch(struct dnt_exceptions_analysis *a, int on) {
  dnt__event_stacks_stitch(&a->base.stacks, on);
}
