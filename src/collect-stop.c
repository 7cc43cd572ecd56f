/* collect's stopping event (collect-stop.h). Matching is TraceEvent's EventMonitor's: the
 * provider by name, then the event by name, then each payload field's value as text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
  se->provider = provider;
  se->event = event;
  se->on_match = on_match;
  se->ud = ud;
  dnt_record_init(&se->rec);
  if (filter) {
    se->filter = dnt_xstrdup(filter);
    for (char *pair = se->filter; pair && *pair;) {
      char *next = strchr(pair, ',');
      if (next) *next++ = '\0';
      char *colon = strchr(pair, ':');
      if (!colon || colon == pair || se->nfilters == DNT_STOP_MAX_FILTERS) {
        dnt_error("--stopping-event-payload-filter: '%s' is not FIELD:VALUE (at most %d, comma-separated)", pair,
                  DNT_STOP_MAX_FILTERS);
        dnt_stop_event_release(se);
        return DNT_EXIT_USAGE;
      }
      *colon = '\0';
      se->keys[se->nfilters] = pair;
      se->values[se->nfilters++] = colon + 1;
      pair = next;
    }
  }
  /* the runtime's own events carry no field list: their names and layouts are in the schema */
  struct dnt_schema *schema = dnt_schema_new();
  char err[512];
  if (schema && dnt_schema_load_default(schema, err, sizeof err) == 0) se->schema = schema;
  else dnt_schema_free(schema);
  return 1;
}

void dnt_stop_event_release(struct dnt_stop_event *se) {
  free(se->filter);
  dnt_schema_free(se->schema);
  dnt_record_release(&se->rec);
  memset(se, 0, sizeof *se);
}

static int on_event(void *ud, const ntr_event *ev) {
  struct dnt_stop_event *se = ud;
  const ntr_metadata *md = ev->metadata;
  if (se->fired || !md || strcasecmp(md->provider, se->provider) != 0) return 0;
  const ntr_field *fields = md->fields;
  uint32_t nfields = md->nfields;
  const char *name = md->event_name;
  const dnt_schema_event *known = NULL;
  if (nfields == 0 && se->schema) {
    uint32_t n;
    /* TraceEvent's names ("GC/Start"), as dotnet-trace's EventMonitor matches them */
    if ((known = dnt_schema_find(se->schema, md->provider, md->event_id, md->version, &n)))
      fields = known->fields, nfields = n, name = known->name;
  }
  char te_name[512];
  /* dotnet-trace matches TraceEvent's name ("Request/Start"); the metadata's ("RequestStart") too */
  if (se->event && (!name || strcmp(name, se->event) != 0) &&
      (known || strcmp(dnt_event_te_name(md, te_name, sizeof te_name, NULL), se->event) != 0))
    return 0;
  if (se->nfilters) {
    int rc = known ? dnt_record_decode_layout(&se->rec, fields, nfields, se->pointer_size, ev->payload, ev->payload_size)
                   : dnt_record_decode(&se->rec, fields, nfields, ev->payload, ev->payload_size);
    if (rc != 0) return 0;
    for (size_t i = 0; i < se->nfilters; i++) {
      const dnt_value *v = dnt_record_get(&se->rec, se->keys[i]);
      char text[1024];
      if (!v) return 0;
      dnt_value_format(v, text, sizeof text);
      if (strcmp(text, se->values[i]) != 0) return 0;
    }
  }
  se->fired = 1;
  se->on_match(se->ud, md->provider, name && *name ? name : NULL);
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
