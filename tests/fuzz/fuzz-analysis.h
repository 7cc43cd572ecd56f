/* fuzz-analysis.h: what the fuzz targets of analyze/ (fuzz-gc, fuzz-allocs, fuzz-jitpool,
 * fuzz-exclocks) share: the runtime's schema loaded once by LLVMFuzzerInitialize (from
 * DNT_DATADIR, which the run sets), a sink for the views' output, and an input fed to one
 * analysis through its callbacks. Each target keeps its analyses' own steps: new, finish, the
 * properties it checks, the views it writes. Define FUZZ_NAME (the target's name, for the message)
 * before including it. */
#ifndef DNT_FUZZ_ANALYSIS_H
#define DNT_FUZZ_ANALYSIS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dnt-analyze.h"
#include "fuzz-ntr.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct dnt_schema *schema;
static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char err[512] = "";
  (void)argc, (void)argv;
  schema = dnt_schema_new();
  sink = fopen("/dev/null", "w");
  if (!schema || !sink || dnt_schema_load_default(schema, err, sizeof err) != 0) {
    fprintf(stderr, FUZZ_NAME ": no schema (set DNT_DATADIR to the source tree's data/): %s\n", err);
    abort();
  }
  return 0;
}

/* The input, whole, fed to the analysis a through the callbacks that callbacks() fills. */
static inline void fuzz_analysis_feed(const uint8_t *data, size_t size, void (*callbacks)(ntr_callbacks *cb), void *a) {
  ntr_callbacks cb;
  callbacks(&cb);
  fuzz_ntr_run(data, size, 0, &cb, a);
}

#endif
