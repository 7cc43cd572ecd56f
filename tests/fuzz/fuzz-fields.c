/* fuzz-fields.c: libFuzzer target for payload decoding by name: every event of a trace decoded
 * into a dnt_record, by the field list of its metadata (EventSource, TraceLogging, EventPipe's
 * own events) or, when the metadata has none, by the layout data/runtime-events.xml gives the
 * runtime's events (pointers 4 or 8 bytes wide; arrays and structs counted by earlier fields,
 * Binary and AnsiString fields), and every value formatted as `dntrace events` prints it. Input: a nettrace
 * stream. Seeds: tests/fuzz/seeds/traces (recordings of the sample target), the public corpus
 * when DNT_CORPUS is set. Needs DNT_DATADIR (the run sets it) for the schema. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-trace.h"
#include "fuzz-ntr.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct dnt_schema *schema;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char err[512];
  (void)argc, (void)argv;
  schema = dnt_schema_new();
  if (!schema || dnt_schema_load_default(schema, err, sizeof err) != 0) {
    fprintf(stderr, "fuzz-fields: no schema (set DNT_DATADIR to the source tree's data/): %s\n", err);
    abort();
  }
  return 0;
}

static int on_event(void *ud, const ntr_event *e) {
  dnt_record *r = ud;
  const ntr_metadata *m = e->metadata;
  char text[256];
  if (!m) return 0;
  if (m->nfields) {
    dnt_record_decode_event(r, e);
  } else {
    uint32_t n;
    const dnt_schema_event *se = dnt_schema_find(schema, m->provider, m->event_id, m->version, &n);
    if (!se) return 0;
    /* both pointer sizes: a 32-bit trace's layouts differ (the sequence number picks one) */
    dnt_record_decode_layout(r, se->fields, n, e->sequence & 1 ? 4 : 8, e->payload, e->payload_size);
  }
  for (size_t i = 0; i < r->nvalues; i++) {
    size_t len = dnt_value_format(&r->values[i], text, sizeof text);
    if (len < sizeof text && strlen(text) != len) abort(); /* the length it claims is the text's */
  }
  if (r->nvalues) (void)dnt_record_get(r, "Count");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const ntr_callbacks cb = {.on_event = on_event};
  dnt_record r;
  dnt_record_init(&r);
  fuzz_ntr_run(data, size, 0, &cb, &r);
  dnt_record_release(&r);
  return 0;
}
