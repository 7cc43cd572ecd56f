/* Layouts of events whose metadata has no field list (the runtime's own providers), read from
 * XML files in dntrace's schema format (data/runtime-events.xml, installed in $(pkgdatadir)),
 * so that `dntrace events` can show their fields by name. */
#ifndef DNT_SCHEMA_H
#define DNT_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "ntr.h"

struct dnt_schema;

/* An empty schema; NULL when out of memory. Free with dnt_schema_free (NULL is fine). */
struct dnt_schema *dnt_schema_new(void);
void dnt_schema_free(struct dnt_schema *s);

/* Adds the events of an XML schema file; an event already known is replaced. 0, or -1 with a
 * one-line reason in err ("file:line: ..."). */
int dnt_schema_load(struct dnt_schema *s, const char *path, char *err, size_t errlen);

/* Loads runtime-events.xml from $DNT_DATADIR, else from the installed data directory.
 * 0, or -1 with a reason in err. */
int dnt_schema_load_default(struct dnt_schema *s, char *err, size_t errlen);

/* The layout of (provider, event id) at that event version: its name, and the fields present
 * in that version (*nfields of them). NULL when the schema does not know the event. The fields
 * belong to the schema. */
const ntr_field *dnt_schema_lookup(const struct dnt_schema *s, const char *provider, uint32_t event_id,
                                   uint32_t version, const char **name, uint32_t *nfields);

#endif
