/* Private to agent/: what a followed process's stream feeds its rules (feed.c), for follow.c. */
#ifndef DNT_AGENT_INT_H
#define DNT_AGENT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "dnt-agent.h"
#include "dnt-counters.h"
#include "dnt-trace.h"
#include "ntr.h"

/* What a rules engine is fed from a session's stream: its counters through a counters decoder,
 * the runtime's ExceptionThrown and GC suspension events, and the events its event rules match,
 * each on the trace's own clock (Unix ms). Caller-owned, zeroed; rules and decoder set by the
 * caller (the decoder's on_value calls dnt__feed_value). For a new stream, release it and set
 * it up again. */
struct dnt__feed {
  struct dnt_rules *rules;
  dnt_counters_decoder *decoder;
  uint64_t sync_qpc, freq;
  int64_t start_unix_ms;
  uint64_t suspend_ts;
  uint32_t pointer_size;
  struct dnt_event_match *matches; /* one per rule (made at the stream's start); unused: no provider */
  size_t nmatches;
  struct dnt_schema *schema;       /* the runtime's event layouts, for the event rules' filters */
};
/* The parser's callbacks, with the feed as their ud. */
const ntr_callbacks *dnt__feed_callbacks(void);
/* A counter's value (the decoder's on_value) to the rules. */
void dnt__feed_value(struct dnt__feed *f, const dnt_counter_value *v);
/* Frees what the feed made (its event matches); rules and decoder stay the caller's. */
void dnt__feed_release(struct dnt__feed *f);

/* The wall clock, Unix ms (follow.c): when a process began to be followed, a --push window's span. */
uint64_t dnt__unix_ms(void);

/* Formats a line and hands it to say (incidents.c, serve.c: the caller's say of their options). */
void dnt__say(void (*say)(void *ud, enum dnt_say_kind kind, const char *line), void *ud, enum dnt_say_kind kind,
              const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
