/* An event matched by its provider, name and payload values, as dotnet-trace's stopping event
 * matches it (TraceEvent's EventMonitor): collect's --stopping-event-* options and watch's and
 * serve's event rules. */
#ifndef DNT_EVENT_MATCH_H
#define DNT_EVENT_MATCH_H

#include <stddef.h>

#include "dnt-trace.h"

#define DNT_MATCH_MAX_FILTERS 16

struct dnt_event_match {
  const char *provider, *event; /* borrowed; event NULL: any of the provider's */
  char *filter;                 /* a copy of FIELD:VALUE[,FIELD:VALUE...], cut up in place */
  const char *keys[DNT_MATCH_MAX_FILTERS], *values[DNT_MATCH_MAX_FILTERS];
  size_t nfilters;
  const struct dnt_schema *schema; /* borrowed: layouts of the runtime's own events (NULL: none) */
  dnt_record rec;
};

/* Sets up m (caller's storage; provider, event and schema borrowed, filter copied). 0, or -1 with
 * err saying which pair is not FIELD:VALUE (m released). */
int dnt_event_match_init(struct dnt_event_match *m, const char *provider, const char *event, const char *filter,
                         const struct dnt_schema *schema, char *err, size_t cap);
void dnt_event_match_release(struct dnt_event_match *m);

/* 1 when ev (its payload's pointers pointer_size bytes wide) matches, *name then the event's name
 * (borrowed from the schema or the metadata; NULL when it has none); else 0. */
int dnt_event_match_test(struct dnt_event_match *m, const ntr_event *ev, uint32_t pointer_size, const char **name);

#endif
