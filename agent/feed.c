/* A followed process's stream to its rules (agent-int.h): counters through the counters decoder,
 * exceptions and GC pauses from the runtime's own events, and the events the event rules match,
 * each at its own time on the trace's clock. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent-int.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define EV_RESTART_END 3   /* GCRestartEEEnd */
#define EV_SUSPEND_BEGIN 9 /* GCSuspendEEBegin */
#define EV_EXCEPTION 80    /* ExceptionThrown_V1 */

static int64_t unix_ms_of(const struct dnt__feed *f, uint64_t ts) {
  if (!f->freq) return 0;
  double d = ((double)ts - (double)f->sync_qpc) * 1000.0 / (double)f->freq;
  return f->start_unix_ms + (int64_t)d;
}

void dnt__feed_release(struct dnt__feed *f) {
  for (size_t i = 0; i < f->nmatches; i++) dnt_event_match_release(&f->matches[i]);
  free(f->matches);
  dnt_schema_free(f->schema);
  f->matches = NULL, f->nmatches = 0, f->schema = NULL;
}

/* The event rules' matches, made once (their filters parsed when the rule was read). */
static void make_matches(struct dnt__feed *f) {
  size_t n = dnt_rules_count(f->rules);
  if (f->matches || !dnt_rules_want(f->rules, DNT_TRIGGER_EVENT)) return;
  if (!(f->matches = calloc(n, sizeof *f->matches))) return; /* out of memory: the event rules see nothing */
  f->nmatches = n;
  char err[512];
  if ((f->schema = dnt_schema_new()) && dnt_schema_load_default(f->schema, err, sizeof err) != 0) {
    dnt_schema_free(f->schema);
    f->schema = NULL;
  }
  for (size_t i = 0; i < n; i++) {
    const struct dnt_rule *r = dnt_rules_get(f->rules, i);
    if (r->kind == DNT_TRIGGER_EVENT)
      dnt_event_match_init(&f->matches[i], r->provider, r->event, r->filter, f->schema, err, sizeof err);
  }
}

static int feed_on_trace(void *ud, const ntr_trace *t) {
  struct dnt__feed *f = ud;
  f->sync_qpc = t->sync_time_qpc, f->freq = t->qpc_frequency, f->suspend_ts = 0;
  f->pointer_size = t->pointer_size;
  make_matches(f);
  struct tm tm = {.tm_year = t->start_time[0] - 1900, .tm_mon = t->start_time[1] - 1, .tm_mday = t->start_time[3],
                  .tm_hour = t->start_time[4], .tm_min = t->start_time[5], .tm_sec = t->start_time[6]};
  f->start_unix_ms = (int64_t)timegm(&tm) * 1000 + t->start_time[7];
  return dnt_counters_decoder_callbacks()->on_trace(f->decoder, t);
}

static int feed_on_metadata(void *ud, const ntr_metadata *md) {
  struct dnt__feed *f = ud;
  const ntr_callbacks *cb = dnt_counters_decoder_callbacks();
  return cb->on_metadata ? cb->on_metadata(f->decoder, md) : 0;
}

static int feed_on_event(void *ud, const ntr_event *ev) {
  struct dnt__feed *f = ud;
  const ntr_metadata *md = ev->metadata;
  for (size_t i = 0; i < f->nmatches; i++) {
    const char *name;
    if (f->matches[i].provider && dnt_event_match_test(&f->matches[i], ev, f->pointer_size, &name))
      dnt_rules_event(f->rules, i, name, (uint64_t)unix_ms_of(f, ev->timestamp));
  }
  if (md && strcmp(md->provider, RUNTIME) == 0) {
    if (md->event_id == EV_EXCEPTION) { /* ExceptionType (UTF-16z) first */
      ntr_payload c;
      char type[512];
      ntr_payload_init(&c, ev->payload, ev->payload_size);
      if (ntr_payload_utf16z(&c, type, sizeof type, NULL) == 0)
        dnt_rules_exception(f->rules, type, (uint64_t)unix_ms_of(f, ev->timestamp));
    } else if (md->event_id == EV_SUSPEND_BEGIN) {
      f->suspend_ts = ev->timestamp;
    } else if (md->event_id == EV_RESTART_END && f->suspend_ts && f->freq && ev->timestamp >= f->suspend_ts) {
      double pause = (double)(ev->timestamp - f->suspend_ts) * 1000.0 / (double)f->freq;
      f->suspend_ts = 0;
      dnt_rules_gc_pause(f->rules, pause, (uint64_t)unix_ms_of(f, ev->timestamp));
    }
    return 0;
  }
  return dnt_counters_decoder_callbacks()->on_event(f->decoder, ev);
}

const ntr_callbacks *dnt__feed_callbacks(void) {
  static const ntr_callbacks cb = {.on_trace = feed_on_trace, .on_metadata = feed_on_metadata,
                                   .on_event = feed_on_event};
  return &cb;
}

void dnt__feed_value(struct dnt__feed *f, const dnt_counter_value *v) {
  dnt_rules_counter_tagged(f->rules, v->provider, v->name, v->tags, v->unit, v->value, (uint64_t)(v->time_s * 1000.0));
}
