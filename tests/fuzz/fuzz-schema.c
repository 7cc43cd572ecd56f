/* fuzz-schema.c: libFuzzer target for the XML schema of event layouts (dnt_schema_load through
 * libxml2, then lookups of every event id the file could name). Seeds: data/runtime-events.xml
 * (the run passes data/ as a corpus directory). */
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
  if (dnt_schema_load(s, path, err, sizeof err) == 0) {
    static const char *const providers[] = {"Microsoft-Windows-DotNETRuntime", "Microsoft-Windows-DotNETRuntimeRundown",
                                            "Microsoft-DotNETCore-SampleProfiler"};
    for (size_t p = 0; p < sizeof providers / sizeof providers[0]; p++)
      for (uint32_t id = 0; id < 320; id++)
        for (uint32_t v = 0; v < 3; v++) {
          const char *name = NULL;
          uint32_t n = 0;
          const ntr_field *f = dnt_schema_lookup(s, providers[p], id, v, &name, &n);
          if (f && n) (void)strlen(f[n - 1].name);
          if (name) (void)strlen(name);
        }
  }
  dnt_schema_free(s);
  return 0;
}
