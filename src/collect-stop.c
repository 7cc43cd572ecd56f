/* collect's stopping event (collect-stop.h): the options checked as dotnet-trace checks them,
 * the matching is trace/event-match.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "collect-stop.h"
#include "util.h"

int dnt_stop_event_init(struct dnt_stop_event *se, const char *provider, const char *event, const char *filter,
                        void (*on_match)(void *ud, const char *provider, const char *event), void *ud) {
  memset(se, 0, sizeof *se);
  if (!provider && !event && !filter) return 0;
  if (!provider)
    return dnt_error("--stopping-event-event-name and --stopping-event-payload-filter need "
                     "--stopping-event-provider-name"),
           DNT_EXIT_USAGE;
  if (filter && !event)
    return dnt_error("--stopping-event-payload-filter needs --stopping-event-event-name"), DNT_EXIT_USAGE;
  se->on_match = on_match;
  se->ud = ud;
  /* the runtime's own events carry no field list: their names and layouts are in the schema */
  struct dnt_schema *schema = dnt_schema_new();
  char err[512];
  if (schema && dnt_schema_load_default(schema, err, sizeof err) == 0) se->schema = schema;
  else dnt_schema_free(schema);
  if (dnt_event_match_init(&se->match, provider, event, filter, se->schema, err, sizeof err) != 0) {
    dnt_error("--stopping-event-payload-filter: %s", err);
    dnt_stop_event_release(se);
    return DNT_EXIT_USAGE;
  }
  return 1;
}

void dnt_stop_event_release(struct dnt_stop_event *se) {
  dnt_event_match_release(&se->match);
  dnt_schema_free(se->schema);
  memset(se, 0, sizeof *se);
}

static int on_event(void *ud, const ntr_event *ev) {
  struct dnt_stop_event *se = ud;
  const char *name;
  if (se->fired || !dnt_event_match_test(&se->match, ev, se->pointer_size, &name)) return 0;
  se->fired = 1;
  se->on_match(se->ud, ev->metadata->provider, name);
  return 0;
}

static int on_trace(void *ud, const ntr_trace *t) {
  struct dnt_stop_event *se = ud;
  se->pointer_size = t->pointer_size;
  return 0;
}

void dnt_stop_event_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = on_trace;
  cb->on_event = on_event;
}
