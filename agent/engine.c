/* engine.c: when rules fire. Every value and event comes with its own time (the runtime's
 * timestamps), so what fires depends on what the process did, not on when it was read. A counter
 * rule holds from its first value past the threshold and fires once it has held `for` long (each
 * value in between past it too); an exception or event rule fires when `count` matching ones fall
 * within its window (their times kept, at most count of them); a GC rule on one pause past its
 * threshold. A firing then passes the limits (max_fires in limit_ms, cooldown_ms after the last)
 * or is counted as held back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-agent.h"

struct state {
  struct dnt_rule rule;
  int seen;           /* a counter rule: its counter has reported */
  uint64_t since;     /* a counter rule: when its condition began to hold; 0 none (times are +1) */
  double last;        /* ... its last value */
  uint64_t *times;    /* an exception rule: the latest matching exceptions' times, a ring of count */
  uint32_t ntimes, head;
  uint64_t *fires;    /* the firings' times in the limit window, a ring of max_fires */
  uint32_t nfires, fhead;
  int fired_once;
  uint64_t last_fire;
  uint64_t held_back;             /* since the last firing */
  uint64_t fired_total, held_total;
};

struct dnt_rules {
  struct state *v;
  size_t n, cap;
  uint32_t max_fires;
  uint64_t limit_ms, cooldown_ms;
  dnt_rule_fired_fn fired;
  void *ud;
};

struct dnt_rules *dnt_rules_new(dnt_rule_fired_fn fired, void *ud) {
  struct dnt_rules *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->fired = fired, e->ud = ud;
  e->max_fires = 1, e->limit_ms = 600000, e->cooldown_ms = 0;
  return e;
}

void dnt_rules_free(struct dnt_rules *e) {
  if (!e) return;
  for (size_t i = 0; i < e->n; i++) {
    dnt_rule_release(&e->v[i].rule);
    free(e->v[i].times), free(e->v[i].fires);
  }
  free(e->v);
  free(e);
}

int dnt_rules_add(struct dnt_rules *e, struct dnt_rule *r) {
  if (e->n == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 8;
    struct state *v = realloc(e->v, cap * sizeof *v);
    if (!v) {
      dnt_rule_release(r);
      return -1;
    }
    e->v = v, e->cap = cap;
  }
  struct state *s = &e->v[e->n];
  memset(s, 0, sizeof *s);
  if ((r->kind == DNT_TRIGGER_EXCEPTION || r->kind == DNT_TRIGGER_EVENT) && !(s->times = calloc(r->count, sizeof *s->times))) {
    dnt_rule_release(r);
    return -1;
  }
  s->rule = *r;
  memset(r, 0, sizeof *r);
  e->n++;
  return 0;
}

size_t dnt_rules_count(const struct dnt_rules *e) { return e->n; }
const struct dnt_rule *dnt_rules_get(const struct dnt_rules *e, size_t i) { return i < e->n ? &e->v[i].rule : NULL; }

void dnt_rules_set_limits(struct dnt_rules *e, uint32_t max_fires, uint64_t limit_ms, uint64_t cooldown_ms) {
  e->max_fires = max_fires ? max_fires : 1;
  e->limit_ms = limit_ms, e->cooldown_ms = cooldown_ms;
  for (size_t i = 0; i < e->n; i++) { /* the rings are made again at the next firing */
    free(e->v[i].fires);
    e->v[i].fires = NULL, e->v[i].nfires = e->v[i].fhead = 0;
  }
}

int dnt_rules_counter_seen(const struct dnt_rules *e, size_t i) { return i < e->n && e->v[i].seen; }

void dnt_rules_totals(const struct dnt_rules *e, size_t i, uint64_t *fired, uint64_t *held_back) {
  *fired = i < e->n ? e->v[i].fired_total : 0;
  *held_back = i < e->n ? e->v[i].held_total : 0;
}

int dnt_rules_want(const struct dnt_rules *e, enum dnt_trigger_kind kind) {
  for (size_t i = 0; i < e->n; i++)
    if (e->v[i].rule.kind == kind) return 1;
  return 0;
}

/* The rule fires, if the limits let it: 1, or 0 (held back, counted). */
static int fire(struct dnt_rules *e, size_t i, uint64_t t, const char *why) {
  struct state *s = &e->v[i];
  if (!s->fires && !(s->fires = calloc(e->max_fires, sizeof *s->fires))) return 0;
  /* the firings still in the window (the oldest first in the ring) */
  while (s->nfires && t - s->fires[s->fhead] >= e->limit_ms) s->fhead = (s->fhead + 1) % e->max_fires, s->nfires--;
  if (s->nfires >= e->max_fires || (s->fired_once && t - s->last_fire < e->cooldown_ms)) {
    s->held_back++, s->held_total++;
    return 0;
  }
  s->fired_total++;
  s->fires[(s->fhead + s->nfires++) % e->max_fires] = t;
  s->fired_once = 1, s->last_fire = t;
  struct dnt_firing f = {&s->rule, i, t, "", s->held_back};
  snprintf(f.why, sizeof f.why, "%s", why);
  s->held_back = 0;
  e->fired(e->ud, &f);
  return 1;
}

/* The threshold in the counter's unit: a byte size, a time or a percentage written with its
 * unit is converted when the counter's own unit is of the same kind. */
static double scale_of(const char *unit, int *kind) {
  static const struct {
    const char *unit;
    int kind;
    double scale;
  } known[] = {{"B", 1, 1}, {"By", 1, 1}, {"bytes", 1, 1}, {"KB", 1, 1e3}, {"MB", 1, 1e6}, {"GB", 1, 1e9},
               {"ms", 2, 1e-3}, {"s", 2, 1}, {"%", 3, 1}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(unit, known[i].unit) == 0) return *kind = known[i].kind, known[i].scale;
  *kind = 0;
  return 1;
}

static double threshold_in(const struct dnt_rule *r, const char *unit) {
  int k1, k2;
  double s1 = scale_of(r->unit, &k1), s2 = scale_of(unit ? unit : "", &k2);
  return r->unit[0] && k1 && k1 == k2 ? r->threshold * s1 / s2 : r->threshold;
}

static int holds(int op, double v, double t) {
  return op == '>' ? v > t : op == 'G' ? v >= t : op == '<' ? v < t : v <= t;
}

/* The percentile a value's tags give (Percentile=NN), 0 when none. */
static double percentile_of(const char *tags) {
  const char *p = tags ? strstr(tags, "Percentile=") : NULL;
  return p ? strtod(p + 11, NULL) : 0;
}

void dnt_rules_counter(struct dnt_rules *e, const char *provider, const char *name, const char *unit, double value,
                       uint64_t time_ms) {
  dnt_rules_counter_tagged(e, provider, name, NULL, unit, value, time_ms);
}

void dnt_rules_counter_tagged(struct dnt_rules *e, const char *provider, const char *name, const char *tags,
                              const char *unit, double value, uint64_t time_ms) {
  uint64_t t = time_ms + 1; /* 0 is "not holding" */
  double pct = percentile_of(tags);
  for (size_t i = 0; i < e->n; i++) {
    struct state *s = &e->v[i];
    const struct dnt_rule *r = &s->rule;
    if (r->kind != DNT_TRIGGER_COUNTER || strcmp(r->counter, name) != 0 || strcmp(r->provider, provider) != 0)
      continue;
    /* a histogram's values: the one percentile the rule names (p50 when it names none) */
    if (pct > 0 ? fabs(pct - (r->percentile > 0 ? r->percentile : 50)) > 1e-9 : r->percentile > 0) continue;
    s->seen = 1;
    s->last = value;
    double th = threshold_in(r, unit);
    if (!holds(r->op, value, th)) {
      s->since = 0;
      continue;
    }
    if (!s->since) s->since = t;
    if (t - s->since < r->for_ms) continue;
    char why[256], trig[160];
    snprintf(why, sizeof why, "%s (%s = %g%s%s)", dnt_rule_trigger_text(r, trig, sizeof trig), name, value,
             unit && *unit ? " " : "", unit ? unit : "");
    s->since = 0; /* another firing needs the condition to hold as long again */
    fire(e, i, time_ms, why);
  }
}

/* One more of what rule i counts (an exception, an event: what) at time_ms: the ring keeps the
 * latest `count` times; the rule fires when the oldest of them is within its window (a rule with
 * no window: each one). */
static void count_one(struct dnt_rules *e, size_t i, const char *what, uint64_t time_ms) {
  struct state *s = &e->v[i];
  const struct dnt_rule *r = &s->rule;
  if (s->ntimes < r->count) s->times[(s->head + s->ntimes++) % r->count] = time_ms;
  else s->times[s->head] = time_ms, s->head = (s->head + 1) % r->count;
  uint64_t oldest = s->times[s->head];
  if (s->ntimes < r->count || (r->window_ms && time_ms - oldest >= r->window_ms)) return;
  char why[256], trig[160];
  if (r->window_ms)
    snprintf(why, sizeof why, "%s (%u %s in %.3f s)", dnt_rule_trigger_text(r, trig, sizeof trig), r->count, what,
             (double)(time_ms - oldest) / 1000);
  else
    snprintf(why, sizeof why, "%s (%s)", dnt_rule_trigger_text(r, trig, sizeof trig), what);
  s->ntimes = s->head = 0; /* another firing needs as many again */
  fire(e, i, time_ms, why);
}

void dnt_rules_exception(struct dnt_rules *e, const char *type, uint64_t time_ms) {
  for (size_t i = 0; i < e->n; i++) {
    const struct dnt_rule *r = &e->v[i].rule;
    if (r->kind == DNT_TRIGGER_EXCEPTION && (!r->type || strcmp(r->type, type) == 0)) count_one(e, i, type, time_ms);
  }
}

void dnt_rules_process_start(struct dnt_rules *e, uint64_t time_ms) {
  for (size_t i = 0; i < e->n; i++)
    if (e->v[i].rule.kind == DNT_TRIGGER_PROCESS_START) fire(e, i, time_ms, "process-start (followed from now)");
}

void dnt_rules_event(struct dnt_rules *e, size_t i, const char *name, uint64_t time_ms) {
  if (i < e->n && e->v[i].rule.kind == DNT_TRIGGER_EVENT) count_one(e, i, name && *name ? name : "an event", time_ms);
}

void dnt_rules_gc_pause(struct dnt_rules *e, double pause_ms, uint64_t time_ms) {
  for (size_t i = 0; i < e->n; i++) {
    struct state *s = &e->v[i];
    const struct dnt_rule *r = &s->rule;
    if (r->kind != DNT_TRIGGER_GC_PAUSE || !(pause_ms > r->threshold)) continue;
    char why[256], trig[160];
    snprintf(why, sizeof why, "%s (a pause of %.1f ms)", dnt_rule_trigger_text(r, trig, sizeof trig), pause_ms);
    fire(e, i, time_ms, why);
  }
}
