/* What perf saw each thread do, and a thread's state at any moment (dnt-perf.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-perf.h"

/* A change of a thread's state that perf saw. */
enum change_kind { SWITCHED_OUT_ASLEEP, SWITCHED_OUT_PREEMPTED, WOKEN };

struct state_change {
  uint64_t t;
  enum change_kind kind;
};

struct thread_seen {
  uint64_t tid;
  uint64_t *running; /* times perf saw it on a CPU: cpu-clock samples, then switch-outs; ns */
  size_t nrunning, caprunning;
  struct state_change *changes;
  size_t nchanges, capchanges;
  uint64_t cpu_samples, last_clock;
  uint64_t cpu_ns; /* its samples' periods added up: the CPU time perf measured */
  char name[32];
};

/* Gaps between a thread's consecutive cpu-clock samples, in 10 us steps up to 20 ms: their
 * median is perf's real period (the frequency asked for is a target, not a promise). */
#define GAP_STEP_NS 10000u
#define GAP_STEPS 2000u

struct dnt_cpu_states {
  struct thread_seen *v;
  size_t n, cap, last;
  int sorted, has_switches, oom;
  uint64_t cpu_samples, first_ns, last_ns, window_ns;
  double period_ms, window_ms;
  uint64_t gaps[GAP_STEPS], ngaps;
};

dnt_cpu_states *dnt_cpu_states_new(void) { return calloc(1, sizeof(dnt_cpu_states)); }

void dnt_cpu_states_free(dnt_cpu_states *cs) {
  if (!cs) return;
  for (size_t i = 0; i < cs->n; i++) {
    free(cs->v[i].running);
    free(cs->v[i].changes);
  }
  free(cs->v);
  free(cs);
}

/* Grows an array by doubling; 0 or -ENOMEM. */
static int reserve(void **arr, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 0;
  size_t want = *cap ? 2 * *cap : 256;
  void *grown = realloc(*arr, want * size);
  if (!grown) return -ENOMEM;
  *arr = grown;
  *cap = want;
  return 0;
}

static int add_running(struct thread_seen *t, uint64_t at) {
  if (reserve((void **)&t->running, &t->caprunning, t->nrunning, sizeof *t->running)) return -ENOMEM;
  t->running[t->nrunning++] = at;
  return 0;
}

static int add_change(struct thread_seen *t, uint64_t at, enum change_kind kind) {
  if (reserve((void **)&t->changes, &t->capchanges, t->nchanges, sizeof *t->changes)) return -ENOMEM;
  t->changes[t->nchanges++] = (struct state_change){at, kind};
  return 0;
}

static struct thread_seen *thread_of(dnt_cpu_states *cs, uint64_t tid) {
  /* few threads (tens to hundreds), most samples on the one of the sample before */
  if (cs->last < cs->n && cs->v[cs->last].tid == tid) return &cs->v[cs->last];
  for (size_t i = 0; i < cs->n; i++)
    if (cs->v[i].tid == tid) return &cs->v[cs->last = i];
  if (reserve((void **)&cs->v, &cs->cap, cs->n, sizeof *cs->v)) return NULL;
  memset(&cs->v[cs->n], 0, sizeof cs->v[cs->n]);
  cs->v[cs->n].tid = tid;
  cs->sorted = 0;
  cs->last = cs->n;
  return &cs->v[cs->n++];
}

/* The state a switch-out left its thread in, from "... prev_state=S ==> next_comm=...": R (and
 * R+) preempted, anything else (S, D, ...) asleep. A thread name may hold any text, so the field
 * is the one directly followed by " ==> ". -1 when there is none. */
static int switch_kind(const char *trace) {
  for (const char *p = strstr(trace, " prev_state="); p; p = strstr(p + 1, " prev_state=")) {
    const char *v = p + 12;
    size_t len = strcspn(v, " ");
    if (len && strncmp(v + len, " ==> ", 5) == 0) return v[0] == 'R' ? SWITCHED_OUT_PREEMPTED : SWITCHED_OUT_ASLEEP;
  }
  return -1;
}

/* The woken thread of "comm=NAME pid=N prio=N target_cpu=N": the last "pid=" that starts a
 * field and is followed by digits and " prio=" (the name comes first and may hold anything).
 * 0 when there is none. */
static uint64_t woken_tid(const char *trace) {
  uint64_t found = 0;
  for (const char *p = strstr(trace, "pid="); p; p = strstr(p + 1, "pid=")) {
    if (p != trace && p[-1] != ' ') continue;
    char *end;
    unsigned long long v = strtoull(p + 4, &end, 10);
    if (end != p + 4 && strncmp(end, " prio=", 6) == 0) found = v;
  }
  return found;
}

static void note_time(dnt_cpu_states *cs, uint64_t t) {
  if (!cs->first_ns || t < cs->first_ns) cs->first_ns = t;
  if (t > cs->last_ns) cs->last_ns = t;
}

int dnt_cpu_states_add(dnt_cpu_states *cs, const dnt_perf_sample *s) {
  struct thread_seen *t;
  if (dnt_perf_event_is(s->event, "cpu-clock")) {
    if (!(t = thread_of(cs, (uint64_t)s->tid)) || add_running(t, s->time_ns)) return -ENOMEM;
    if (!t->name[0]) snprintf(t->name, sizeof t->name, "%s", s->comm);
    /* consecutive samples of a thread that stays on its CPU are one period apart */
    if (t->cpu_samples++ && s->time_ns > t->last_clock && s->time_ns - t->last_clock < GAP_STEP_NS * GAP_STEPS) {
      cs->gaps[(s->time_ns - t->last_clock) / GAP_STEP_NS]++;
      cs->ngaps++;
    }
    t->last_clock = s->time_ns;
    t->cpu_ns += s->period;
    cs->cpu_samples++;
  } else if (dnt_perf_event_is(s->event, "sched:sched_switch")) {
    int kind = s->decoded ? (s->left_runnable ? SWITCHED_OUT_PREEMPTED : SWITCHED_OUT_ASLEEP) : switch_kind(s->trace);
    if (kind < 0) return 0;
    /* recorded on the thread switched out */
    if (!(t = thread_of(cs, (uint64_t)s->tid)) || add_change(t, s->time_ns, (enum change_kind)kind)) return -ENOMEM;
    cs->has_switches = 1;
  } else if (dnt_perf_event_is(s->event, "sched:sched_waking")) {
    uint64_t tid = s->decoded ? s->woken_tid : woken_tid(s->trace);
    if (!tid) return 0;
    if (!(t = thread_of(cs, tid)) || add_change(t, s->time_ns, WOKEN)) return -ENOMEM;
  } else {
    return 0;
  }
  note_time(cs, s->time_ns);
  return 0;
}

void dnt_cpu_states_observe(void *ud, const dnt_perf_sample *s) {
  dnt_cpu_states *cs = ud;
  if (dnt_cpu_states_add(cs, s) != 0) cs->oom = 1;
}

int dnt_cpu_states_name(dnt_cpu_states *cs, uint64_t tid, const char *name) {
  struct thread_seen *t = thread_of(cs, tid);
  if (!t) return -ENOMEM;
  snprintf(t->name, sizeof t->name, "%s", name);
  return 0;
}

int dnt_threads_file_each(const char *path, int (*fn)(void *ud, uint64_t tid, const char *name), void *ud) {
  FILE *fp = fopen(path, "re");
  if (!fp) return -errno;
  char line[256];
  int rc = 0, in_long_line = 0;
  while (rc == 0 && fgets(line, sizeof line, fp)) {
    size_t n = strlen(line);
    int ends = n && line[n - 1] == '\n';
    int last = !ends && feof(fp); /* the file's last line, without its newline */
    if (in_long_line || (!ends && !last)) { /* a piece of a line longer than the buffer */
      in_long_line = !ends;
      continue;
    }
    if (ends) line[n - 1] = '\0';
    /* "TID<TAB>NAME": digits, then a tab */
    char *tab = line;
    uint64_t tid = 0;
    int digits = 0;
    for (; *tab >= '0' && *tab <= '9' && digits < 10; tab++, digits++) tid = tid * 10 + (uint64_t)(*tab - '0');
    if (!digits || *tab != '\t' || !tid || tid > UINT32_MAX) continue;
    rc = fn(ud, tid, tab + 1);
  }
  if (rc == 0 && ferror(fp)) rc = -EIO;
  fclose(fp);
  return rc;
}

static int name_state_thread(void *ud, uint64_t tid, const char *name) { return dnt_cpu_states_name(ud, tid, name); }

int dnt_cpu_states_load_names(dnt_cpu_states *cs, const char *path) {
  return dnt_threads_file_each(path, name_state_thread, cs);
}

static int by_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static int by_change_time(const void *a, const void *b) {
  uint64_t x = ((const struct state_change *)a)->t, y = ((const struct state_change *)b)->t;
  return (x > y) - (x < y);
}

static int by_tid(const void *a, const void *b) {
  uint64_t x = ((const struct thread_seen *)a)->tid, y = ((const struct thread_seen *)b)->tid;
  return (x > y) - (x < y);
}

/* The first index of a sorted array whose value is >= v. */
static size_t lower_bound(const uint64_t *a, size_t n, uint64_t v) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The SampleProfiler suspends every running managed thread to walk its stack: each sample of a
 * busy thread sits in a brief sleep that the sampling itself caused, often just after a brief
 * preemption (the sampler taking the thread's CPU). Off-CPU spells up to the window long are
 * taken out of the thread's changes, so that it keeps the state it had before: preemptions, and
 * sleeps a thread of the process ended (the sampler resuming it); a sleep nothing in the process
 * ended is a real one. A sleep ends at
 * the thread's wake-up, or where perf saw it run again when something outside the target woke it
 * (perf records only the target's own wake-ups); a preemption ends where perf saw it run again.
 * The switch-outs that remain prove the thread ran until then and join the cpu-clock samples as
 * evidence of running. The cost: any other spell shorter than the window counts as time in the
 * state before it. */
static int drop_short_spells(struct thread_seen *th, uint64_t window_ns) {
  /* (an empty array may be NULL, which qsort must not see) */
  if (th->nchanges) qsort(th->changes, th->nchanges, sizeof *th->changes, by_change_time);
  /* every sign of running: the cpu-clock samples so far, and every switch-out */
  size_t nseen = th->nrunning;
  uint64_t *seen = malloc((th->nrunning + th->nchanges + 1) * sizeof *seen);
  if (!seen) return -ENOMEM;
  if (th->nrunning) memcpy(seen, th->running, th->nrunning * sizeof *seen);
  for (size_t i = 0; i < th->nchanges; i++)
    if (th->changes[i].kind != WOKEN) seen[nseen++] = th->changes[i].t;
  if (nseen) qsort(seen, nseen, sizeof *seen, by_u64);
  size_t kept = 0;
  int rc = 0;
  for (size_t i = 0; i < th->nchanges; i++) {
    const struct state_change c = th->changes[i];
    if (c.kind != WOKEN) {
      size_t run = lower_bound(seen, nseen, c.t + 1);
      uint64_t end = run < nseen ? seen[run] : UINT64_MAX;
      int woken = c.kind == SWITCHED_OUT_ASLEEP && i + 1 < th->nchanges && th->changes[i + 1].kind == WOKEN &&
                  th->changes[i + 1].t < end;
      if (woken) end = th->changes[i + 1].t;
      /* a sleep that no thread of the process ended (perf saw no wake-up: a timer, a device or
       * another process woke it) is not the sampler's: it stays a sleep however short (a loop of
       * Thread.Sleep(1) is blocked, not on a CPU) */
      int from_outside = c.kind == SWITCHED_OUT_ASLEEP && !woken;
      if (end - c.t <= window_ns && !from_outside) {
        if (woken) i++; /* its wake-up goes with it */
        continue;
      }
      if ((rc = add_running(th, c.t))) break;
    }
    th->changes[kept++] = c;
  }
  free(seen);
  if (rc) return rc;
  th->nchanges = kept;
  if (th->nrunning) qsort(th->running, th->nrunning, sizeof *th->running, by_u64);
  return 0;
}

int dnt_cpu_states_finish(dnt_cpu_states *cs, double window_ms) {
  if (cs->oom) return -ENOMEM;
  cs->period_ms = 1.0;
  if (cs->ngaps > 10) {
    uint64_t below = 0;
    size_t step = 0;
    while (step < GAP_STEPS - 1 && (below += cs->gaps[step]) < cs->ngaps / 2) step++;
    cs->period_ms = (step + 0.5) * GAP_STEP_NS / 1e6;
  }
  cs->window_ms = window_ms > 0 ? window_ms : 1.5 * cs->period_ms;
  cs->window_ns = (uint64_t)(cs->window_ms * 1e6);
  if (cs->n) qsort(cs->v, cs->n, sizeof *cs->v, by_tid);
  cs->sorted = 1;
  cs->last = 0;
  for (size_t i = 0; i < cs->n; i++)
    if (drop_short_spells(&cs->v[i], cs->window_ns)) return -ENOMEM;
  return 0;
}

static const struct thread_seen *find(const dnt_cpu_states *cs, uint64_t tid) {
  if (!cs->sorted) return NULL;
  struct thread_seen key = {.tid = tid};
  return cs->n ? bsearch(&key, cs->v, cs->n, sizeof key, by_tid) : NULL;
}

/* - before perf saw the thread change state: on a CPU when perf saw it run within the window
 *   around t (the only rule without sched_switch records);
 * - after it went to sleep: blocked, unless perf saw it run since (woken from outside);
 * - after it was preempted or woken: on a CPU once perf saw it run again, runnable until then.
 *   It got its CPU somewhere in between: at most one period of CPU time before perf saw it, as
 *   cpu-clock samples a running thread once a period. */
enum dnt_cpu_state dnt_cpu_state_at(const dnt_cpu_states *cs, uint64_t tid, uint64_t t) {
  if (t < cs->first_ns || t > cs->last_ns) return DNT_UNCOVERED;
  const struct thread_seen *th = find(cs, tid);
  if (!th) return DNT_OFF_BLOCKED; /* perf never saw it run nor change state */
  size_t lo = 0, hi = th->nchanges;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (th->changes[mid].t <= t) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) {
    uint64_t from = t > cs->window_ns ? t - cs->window_ns : 0;
    size_t i = lower_bound(th->running, th->nrunning, from);
    return i < th->nrunning && th->running[i] <= t + cs->window_ns ? DNT_ON_CPU : DNT_OFF_BLOCKED;
  }
  const struct state_change *last = &th->changes[lo - 1];
  size_t i = lower_bound(th->running, th->nrunning, last->t + 1); /* the first run after it */
  if (i < th->nrunning && th->running[i] <= t) return DNT_ON_CPU;
  return last->kind == SWITCHED_OUT_ASLEEP ? DNT_OFF_BLOCKED : DNT_OFF_RUNNABLE;
}

void dnt_cpu_states_info(const dnt_cpu_states *cs, struct dnt_cpu_states_info *out) {
  out->period_ms = cs->period_ms;
  out->window_ms = cs->window_ms;
  out->cpu_samples = cs->cpu_samples;
  out->first_ns = cs->first_ns;
  out->last_ns = cs->last_ns;
  out->has_switches = cs->has_switches;
  out->incomplete = cs->oom;
}

uint64_t dnt_cpu_states_thread_cpu_ns(const dnt_cpu_states *cs, uint64_t tid) {
  const struct thread_seen *th = find(cs, tid);
  return th ? th->cpu_ns : 0;
}

const char *dnt_cpu_states_thread(const dnt_cpu_states *cs, uint64_t tid, uint64_t *cpu_samples) {
  const struct thread_seen *th = find(cs, tid);
  if (cpu_samples) *cpu_samples = th ? th->cpu_samples : 0;
  return th ? th->name : "";
}
