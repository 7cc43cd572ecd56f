/* fuzz-schema.c: libFuzzer target for the XML schema of event layouts (dnt_schema_load through
 * libxml2, then lookups of every event id the file could name, at several versions, and each
 * layout found decoding the input's own bytes as a payload at both pointer sizes: counted
 * arrays and structs, Binary, AnsiString, Pointer). Seeds: data/runtime-events.xml (the run
 * passes data/ as a corpus directory). */
#include <stdint.h>
#include <string.h>

#include "dnt-trace.h"
#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[32], err[512];
  fuzz_file(data, size, path, sizeof path);
  struct dnt_schema *s = dnt_schema_new();
  if (!s) return 0;
  dnt_record r;
  dnt_record_init(&r);
  if (dnt_schema_load(s, path, err, sizeof err) == 0) {
    static const char *const providers[] = {"Microsoft-Windows-DotNETRuntime", "Microsoft-Windows-DotNETRuntimeRundown",
                                            "Microsoft-DotNETCore-SampleProfiler", "P"};
    for (size_t p = 0; p < sizeof providers / sizeof providers[0]; p++)
      for (uint32_t id = 0; id < 320; id++)
        for (uint32_t v = 0; v < 3; v++) {
          const char *name = NULL;
          uint32_t n = 0;
          const ntr_field *f = dnt_schema_lookup(s, providers[p], id, v, &name, &n);
          if (f && n) (void)strlen(f[n - 1].name);
          if (name) (void)strlen(name);
          const dnt_schema_event *e = dnt_schema_find(s, providers[p], id, v, &n);
          if (e && v == 0) {
            (void)strlen(e->symbol), (void)strlen(e->task), (void)strlen(e->opcode);
            dnt_record_decode_layout(&r, e->fields, n, 4, data, size);
            dnt_record_decode_layout(&r, e->fields, n, 8, data, size);
          }
        }
  }
  dnt_record_release(&r);
  dnt_schema_free(s);
  return 0;
}
