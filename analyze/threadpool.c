/* The thread pool from the runtime's ThreadPool keyword (0x10000) events. TraceEvent has no
 * analysis of them, so the numbers are the events' own fields, taken in time order:
 *
 *   ThreadPoolWorkerThreadStart/Stop/Wait, ...Retirement Start/Stop
 *                          ActiveWorkerThreadCount: the worker threads at that moment.
 *   ThreadPoolWorkerThreadAdjustment/Adjustment
 *                          hill climbing set its goal to NewWorkerThreadCount for Reason (Warmup,
 *                          Initializing, RandomMove, ClimbingMove, ChangePoint, Stabilizing,
 *                          Starvation: the gate thread saw queued work make no progress and added
 *                          a thread; ThreadTimedOut; CooperativeBlocking: threads added because
 *                          others block on work that is not done).
 *   IOThreadCreation/Retirement Start/Stop
 *                          IOThreadCount (Windows' IO completion threads; the portable pool of
 *                          .NET 7+ on Linux has none and writes none).
 *   ThreadPoolEnqueue/Dequeue   counted (verbose).
 *   ThreadPoolWorkingThreadCount  Count (verbose): threads running work items.
 *   ThreadPoolMinMaxThreads     the configured worker minimum and maximum (.NET 7+).
 *   System.Runtime's EventCounters  threadpool-queue-length (its mean over the interval: the work
 *                          items waiting) and threadpool-completed-items-count (its increment):
 *                          the queue, which no runtime event carries since .NET 7.
 *
 * Events come thread by thread within a block, not in time order: like the GC analysis, they are
 * held until the next sequence point and taken in time order. What is kept is one row per
 * adjustment and one per second of trace (what is reported), never one per event. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"


enum {
  EV_IO_CREATE = 44, EV_IO_TERMINATE = 45, EV_IO_RETIRE = 46, EV_IO_UNRETIRE = 47,
  EV_WORKER_START = 50, EV_WORKER_STOP = 51, EV_RETIRE_START = 52, EV_RETIRE_STOP = 53,
  EV_ADJ_SAMPLE = 54, EV_ADJUSTMENT = 55, EV_WORKER_WAIT = 57, EV_MIN_MAX = 59,
  EV_WORKING_COUNT = 60, EV_ENQUEUE = 61, EV_DEQUEUE = 62,
  /* System.Runtime's counters, numbered here */
  EV_QUEUE_LENGTH = 100000, EV_COMPLETED_ITEMS
};

#define COUNTERS_PROVIDER "System.Runtime"

#define PENDING_MAX 65536   /* handled early past this many (a trace without sequence points) */
#define SECONDS_MAX 1000000 /* a hostile timestamp cannot make the per-second table huge */

struct pending {
  struct dnt__held_key key;
  uint32_t id;
  double v[3];
};

struct dnt_tp_analysis {
  const struct dnt_schema *schema;
  struct dnt__layouts layouts; /* the schema's layouts of the events read, remembered */
  dnt_record rec;
  struct dnt__clock clock;
  int failed, finished;
  struct dnt__held held; /* of struct pending */
  dnt_tp_adjustment *adj;
  size_t nadj, cap_adj;
  dnt_tp_second *sec;
  size_t nsec, cap_sec;
  double sec0_ms; /* the first second's start */
  int has_sec;
  uint32_t workers, goal, io; /* the latest values */
  double queue;               /* -1: none yet */
  dnt_tp_summary s;
};

struct dnt_tp_analysis *dnt_tp_analysis_new(const struct dnt_schema *schema) {
  struct dnt_tp_analysis *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->schema = schema;
  dnt_record_init(&a->rec);
  a->queue = -1;
  dnt__held_init(&a->held, sizeof(struct pending), PENDING_MAX);
  return a;
}

void dnt_tp_analysis_free(struct dnt_tp_analysis *a) {
  if (!a) return;
  dnt_record_release(&a->rec);
  dnt__held_release(&a->held);
  free(a->adj);
  free(a->sec);
  free(a);
}

int dnt_tp_analysis_failed(const struct dnt_tp_analysis *a) { return a->failed ? -ENOMEM : 0; }

static int tp_on_event(void *ud, const ntr_event *ev);
static int tp_on_sequence_point(void *ud, const ntr_sequence_point *sp);
static int tp_on_trace(void *ud, const ntr_trace *t);

void dnt_tp_analysis_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = tp_on_trace;
  cb->on_event = tp_on_event;
  cb->on_sequence_point = tp_on_sequence_point;
}

static int tp_on_trace(void *ud, const ntr_trace *t) {
  struct dnt_tp_analysis *a = ud;
  dnt__clock_on_trace(&a->clock, t);
  return 0;
}

/* A count from the trace as an unsigned 32-bit number (anything else: 0). */
static uint32_t count_of(double v) { return v >= 0 && v <= 4294967295.0 ? (uint32_t)v : 0; }

/* The row of the second holding ms, the seconds before it filled with the latest values; NULL when
 * out of memory or too far from the first (a hostile timestamp). */
static dnt_tp_second *second_at(struct dnt_tp_analysis *a, double ms) {
  if (!a->has_sec) {
    a->sec0_ms = floor(ms / 1000.0) * 1000.0;
    a->has_sec = 1;
  }
  double k = floor((ms - a->sec0_ms) / 1000.0);
  if (!(k >= 0)) k = 0; /* before the first (events taken early past PENDING_MAX): the first */
  if (k >= SECONDS_MAX) return NULL;
  size_t want = (size_t)k + 1;
  if (want > a->cap_sec) {
    size_t cap = a->cap_sec ? a->cap_sec : 64;
    while (cap < want) cap *= 2;
    dnt_tp_second *s = realloc(a->sec, cap * sizeof *s);
    if (!s) {
      a->failed = 1;
      return NULL;
    }
    a->sec = s;
    a->cap_sec = cap;
  }
  while (a->nsec < want) {
    dnt_tp_second *s = &a->sec[a->nsec];
    memset(s, 0, sizeof *s);
    s->start_ms = a->sec0_ms + 1000.0 * (double)a->nsec;
    s->workers = s->workers_max = a->workers;
    s->goal = a->goal;
    s->io_threads = a->io;
    s->queue_length = a->queue;
    a->nsec++;
  }
  return &a->sec[(size_t)k];
}

static void workers_seen(struct dnt_tp_analysis *a, dnt_tp_second *sec, uint32_t n) {
  dnt_tp_summary *s = &a->s;
  if (!s->has_workers) s->workers_first = s->workers_min = n;
  s->has_workers = 1;
  s->workers_last = n;
  if (n < s->workers_min) s->workers_min = n;
  if (n > s->workers_max) s->workers_max = n;
  a->workers = n;
  if (sec) {
    sec->workers = n;
    if (n > sec->workers_max) sec->workers_max = n;
  }
}

static int on_adjustment(struct dnt_tp_analysis *a, dnt_tp_second *sec, const struct pending *e, double ms) {
  dnt_tp_summary *s = &a->s;
  if (a->nadj == a->cap_adj) {
    size_t cap = a->cap_adj ? a->cap_adj * 2 : 64;
    dnt_tp_adjustment *p = realloc(a->adj, cap * sizeof *p);
    if (!p) return -ENOMEM;
    a->adj = p;
    a->cap_adj = cap;
  }
  uint32_t count = count_of(e->v[1]), reason = count_of(e->v[2]);
  a->adj[a->nadj++] = (dnt_tp_adjustment){.ms = ms, .new_count = count, .reason = reason,
                                          .throughput = isfinite(e->v[0]) ? e->v[0] : 0};
  if (reason == DNT_TP_STARVATION) {
    if (s->starvation == 0) {
      /* the goal before it: the previous adjustment's, else the workers seen, else one fewer */
      s->starvation_from = s->adjustments ? a->goal : s->has_workers ? a->workers : (count ? count - 1 : 0);
      s->starvation_first_ms = ms;
      s->starvation_to = count;
    }
    s->starvation++;
    s->starvation_last_ms = ms;
    if (count > s->starvation_to) s->starvation_to = count;
  }
  if (reason == DNT_TP_COOPERATIVE_BLOCKING) s->blocking++;
  s->by_reason[reason < DNT_TP_REASONS ? reason : DNT_TP_REASONS]++;
  if (s->adjustments == 0) s->goal_first = count;
  s->adjustments++;
  s->goal_last = count;
  if (count > s->goal_max) s->goal_max = count;
  a->goal = count;
  if (sec) {
    sec->goal = count;
    sec->adjustments++;
  }
  return 0;
}

/* One event, in time order. */
/* An increment of the completed-items counter, measured over interval_s before ms, shared among
 * the seconds that interval overlaps by how much of it each holds. */
static void spread_completed(struct dnt_tp_analysis *a, double ms, double interval_s, double count) {
  double span = interval_s > 0 && interval_s < 3600 ? interval_s * 1000.0 : 0, from = ms - span;
  if (span == 0) {
    dnt_tp_second *sec = second_at(a, ms);
    if (sec) sec->completed += count;
    return;
  }
  while (from < ms) {
    double edge = a->has_sec ? a->sec0_ms + (floor((from - a->sec0_ms) / 1000.0) + 1) * 1000.0 : ms;
    double to = edge < ms ? edge : ms;
    if (!(to > from)) to = ms; /* no progress (a huge ms): the rest at once */
    dnt_tp_second *sec = second_at(a, from);
    if (sec) sec->completed += count * (to - from) / span;
    from = to;
  }
}

static int handle(void *ud, void *event) {
  struct dnt_tp_analysis *a = ud;
  const struct pending *e = event;
  double ms = dnt__clock_ms(&a->clock, e->key.ts);
  dnt_tp_summary *s = &a->s;
  dnt_tp_second *sec = second_at(a, ms);
  if (a->failed) return -ENOMEM;
  if (e->id < EV_QUEUE_LENGTH) s->events++;
  switch (e->id) {
  case EV_WORKER_START: s->worker_starts++; workers_seen(a, sec, count_of(e->v[0])); break;
  case EV_WORKER_STOP: s->worker_stops++; workers_seen(a, sec, count_of(e->v[0])); break;
  case EV_WORKER_WAIT: s->worker_waits++; workers_seen(a, sec, count_of(e->v[0])); break;
  case EV_RETIRE_START: case EV_RETIRE_STOP: workers_seen(a, sec, count_of(e->v[0])); break;
  case EV_ADJUSTMENT: return on_adjustment(a, sec, e, ms);
  case EV_IO_CREATE: case EV_IO_TERMINATE: case EV_IO_RETIRE: case EV_IO_UNRETIRE:
    if (e->id == EV_IO_CREATE) s->io_creates++;
    if (e->id == EV_IO_RETIRE) s->io_retires++;
    a->io = count_of(e->v[0]);
    s->has_io = 1;
    if (a->io > s->io_max) s->io_max = a->io;
    if (sec) sec->io_threads = a->io;
    break;
  case EV_ENQUEUE: s->enqueued++; if (sec) sec->enqueued++; break;
  case EV_DEQUEUE: s->dequeued++; if (sec) sec->dequeued++; break;
  case EV_WORKING_COUNT:
    if (count_of(e->v[0]) > s->working_max) s->working_max = count_of(e->v[0]);
    break;
  case EV_MIN_MAX:
    s->min_threads = count_of(e->v[0]);
    s->max_threads = count_of(e->v[1]);
    break;
  case EV_QUEUE_LENGTH:
    a->queue = e->v[0];
    if (!s->has_queue_length || e->v[0] > s->queue_length_max) s->queue_length_max = e->v[0];
    s->queue_length_last = e->v[0];
    s->has_queue_length = 1;
    if (sec) sec->queue_length = e->v[0];
    break;
  case EV_COMPLETED_ITEMS:
    s->has_completed = 1;
    s->completed += dnt__u64_of(e->v[0]);
    spread_completed(a, ms, e->v[1], e->v[0]); /* sec is not used after: this may move the seconds */
    break;
  }
  return 0;
}

static int flush(struct dnt_tp_analysis *a) {
  int rc = dnt__held_flush(&a->held, handle, a);
  if (rc) a->failed = 1;
  return rc;
}

static int tp_on_sequence_point(void *ud, const ntr_sequence_point *sp) {
  (void)sp;
  return flush(ud) ? 1 : 0;
}

/* The numbers each handler reads, by name, into e->v. */
static void take(struct dnt_tp_analysis *a, struct pending *e) {
  static const char *const workers[] = {"ActiveWorkerThreadCount"}, *const io[] = {"IOThreadCount"},
                           *const adj[] = {"AverageThroughput", "NewWorkerThreadCount", "Reason"},
                           *const working[] = {"Count"}, *const minmax[] = {"MinWorkerThreads", "MaxWorkerThreads"};
  const char *const *names = NULL;
  size_t n = 0;
  switch (e->id) {
  case EV_WORKER_START: case EV_WORKER_STOP: case EV_WORKER_WAIT: case EV_RETIRE_START: case EV_RETIRE_STOP:
    names = workers, n = 1;
    break;
  case EV_IO_CREATE: case EV_IO_TERMINATE: case EV_IO_RETIRE: case EV_IO_UNRETIRE: names = io, n = 1; break;
  case EV_ADJUSTMENT: names = adj, n = 3; break;
  case EV_WORKING_COUNT: names = working, n = 1; break;
  case EV_MIN_MAX: names = minmax, n = 2; break;
  default: return;
  }
  for (size_t k = 0; k < n; k++) {
    double v;
    e->v[k] = dnt_record_num(&a->rec, names[k], &v) == 0 ? v : 0;
  }
}

/* A new event to hold (held once dnt__held_keep says so), or NULL when out of memory. */
static struct pending *hold(struct dnt_tp_analysis *a, const ntr_event *ev, uint32_t id) {
  struct pending *e = dnt__held_slot(&a->held, ev->timestamp, handle, a);
  if (!e) {
    a->failed = 1;
    return NULL;
  }
  e->id = id;
  return e;
}

/* System.Runtime's EventCounters events (their fields are in the trace's metadata): the two the
 * queue is read from. */
static int on_counter(struct dnt_tp_analysis *a, const ntr_event *ev) {
  if (!ev->metadata->event_name || strcmp(ev->metadata->event_name, "EventCounters") != 0) return 0;
  int rc = dnt_record_decode_event(&a->rec, ev);
  if (rc == NTR_ENOMEM) {
    a->failed = 1;
    return 1;
  }
  const char *name = dnt_record_str(&a->rec, "Payload.Name");
  if (!name) return 0;
  uint32_t id;
  const char *field;
  if (strcmp(name, "threadpool-queue-length") == 0)
    id = EV_QUEUE_LENGTH, field = "Payload.Mean";
  else if (strcmp(name, "threadpool-completed-items-count") == 0)
    id = EV_COMPLETED_ITEMS, field = "Payload.Increment";
  else
    return 0;
  double v, interval;
  if (dnt_record_num(&a->rec, field, &v) != 0 || !(v >= 0 && v < 1e15)) return 0;
  if (dnt_record_num(&a->rec, "Payload.IntervalSec", &interval) != 0) interval = 0;
  struct pending *e = hold(a, ev, id);
  if (!e) return 1;
  e->v[0] = v;
  e->v[1] = interval;
  dnt__held_keep(&a->held);
  return 0;
}

static int tp_on_event(void *ud, const ntr_event *ev) {
  struct dnt_tp_analysis *a = ud;
  const ntr_metadata *md = ev->metadata;
  dnt__clock_see(&a->clock, ev->timestamp);
  if (a->failed || !md) return 0;
  if (strcmp(md->provider, COUNTERS_PROVIDER) == 0) return on_counter(a, ev);
  if (strcmp(md->provider, DNT__RUNTIME_PROVIDER) != 0) return 0;
  switch (md->event_id) {
  case EV_IO_CREATE: case EV_IO_TERMINATE: case EV_IO_RETIRE: case EV_IO_UNRETIRE: case EV_WORKER_START:
  case EV_WORKER_STOP: case EV_RETIRE_START: case EV_RETIRE_STOP: case EV_ADJUSTMENT: case EV_WORKER_WAIT:
  case EV_MIN_MAX: case EV_WORKING_COUNT: case EV_ENQUEUE: case EV_DEQUEUE:
    break;
  default: return 0;
  }
  struct pending *e = hold(a, ev, md->event_id);
  if (!e) return 1;
  if (md->event_id != EV_ENQUEUE && md->event_id != EV_DEQUEUE) { /* counted: no field read */
    uint32_t nfields;
    const ntr_field *f = dnt__layout(&a->layouts, a->schema, md, &nfields);
    if (!f) return 0;
    /* a short or odd payload keeps the fields decoded before the fault; a missing one reads as 0 */
    if (dnt_record_decode_layout(&a->rec, f, nfields, dnt__clock_ptr(&a->clock), ev->payload,
                                 ev->payload_size) == NTR_ENOMEM) {
      a->failed = 1;
      return 1;
    }
    take(a, e);
  }
  dnt__held_keep(&a->held);
  return 0;
}

void dnt_tp_analysis_finish(struct dnt_tp_analysis *a) {
  if (a->finished) return;
  a->finished = 1;
  flush(a);
  a->s.trace_ms = dnt__clock_span_ms(&a->clock);
  a->s.seconds = a->sec;
  a->s.n_seconds = a->nsec;
}

const dnt_tp_adjustment *dnt_tp_adjustments(const struct dnt_tp_analysis *a, size_t *n) {
  *n = a->nadj;
  return a->adj;
}

const dnt_tp_summary *dnt_tp_get_summary(const struct dnt_tp_analysis *a) { return &a->s; }

const char *dnt_tp_reason_name(uint32_t reason, char buf[24]) {
  static const char *const names[DNT_TP_REASONS] = {"Warmup",      "Initializing", "RandomMove",
                                                    "ClimbingMove", "ChangePoint", "Stabilizing",
                                                    "Starvation",  "ThreadTimedOut", "CooperativeBlocking"};
  if (reason < DNT_TP_REASONS) return names[reason];
  snprintf(buf, 24, "Reason(%u)", reason);
  return buf;
}
