/* An event's match (dnt-trace.h). The provider by name (any case); the event by TraceEvent's
 * name ("GC/Start", from the schema for the runtime's own events, which carry no field list) or
 * the metadata's ("RequestStart"); then each payload field's value as text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dnt-trace.h"

int dnt_event_match_init(struct dnt_event_match *m, const char *provider, const char *event, const char *filter,
                         const struct dnt_schema *schema, char *err, size_t cap) {
  memset(m, 0, sizeof *m);
  m->provider = provider;
  m->event = event;
  m->schema = schema;
  dnt_record_init(&m->rec);
  if (!filter) return 0;
  if (!(m->filter = strdup(filter))) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  for (char *pair = m->filter; pair && *pair;) {
    char *next = strchr(pair, ',');
    if (next) *next++ = '\0';
    char *colon = strchr(pair, ':');
    if (!colon || colon == pair || m->nfilters == DNT_MATCH_MAX_FILTERS) {
      snprintf(err, cap, "'%s' is not FIELD:VALUE (at most %d, comma-separated)", pair, DNT_MATCH_MAX_FILTERS);
      dnt_event_match_release(m);
      return -1;
    }
    *colon = '\0';
    m->keys[m->nfilters] = pair;
    m->values[m->nfilters++] = colon + 1;
    pair = next;
  }
  return 0;
}

void dnt_event_match_release(struct dnt_event_match *m) {
  free(m->filter);
  dnt_record_release(&m->rec);
  memset(m, 0, sizeof *m);
}

int dnt_event_match_test(struct dnt_event_match *m, const ntr_event *ev, uint32_t pointer_size, const char **name) {
  const ntr_metadata *md = ev->metadata;
  if (!md || strcasecmp(md->provider, m->provider) != 0) return 0;
  const ntr_field *fields = md->fields;
  uint32_t nfields = md->nfields;
  const char *own = md->event_name;
  const dnt_schema_event *known = NULL;
  if (nfields == 0 && m->schema) {
    uint32_t n;
    if ((known = dnt_schema_find(m->schema, md->provider, md->event_id, md->version, &n)))
      fields = known->fields, nfields = n, own = known->name;
  }
  char te_name[512];
  /* dotnet-trace matches TraceEvent's name ("Request/Start"); the metadata's ("RequestStart") too */
  if (m->event && (!own || strcmp(own, m->event) != 0) &&
      (known || strcmp(dnt_event_te_name(md, te_name, sizeof te_name, NULL), m->event) != 0))
    return 0;
  if (m->nfilters) {
    int rc = known ? dnt_record_decode_layout(&m->rec, fields, nfields, pointer_size, ev->payload, ev->payload_size)
                   : dnt_record_decode(&m->rec, fields, nfields, ev->payload, ev->payload_size);
    if (rc != 0) return 0;
    for (size_t i = 0; i < m->nfilters; i++) {
      const dnt_value *v = dnt_record_get(&m->rec, m->keys[i]);
      char text[1024];
      if (!v) return 0;
      dnt_value_format(v, text, sizeof text);
      if (strcmp(text, m->values[i]) != 0) return 0;
    }
  }
  *name = own && *own ? own : NULL;
  return 1;
}
