/* fuzz-gc.c: libFuzzer target for the GC analysis (analyze/gc.c): a nettrace stream's runtime GC
 * events paired into GCs, held for time order between sequence points, finished, and written as
 * text and JSON. Properties: the summary counts exactly the complete rows, per generation and in
 * all. Seeds: tests/fuzz/seeds/traces (the sample's runtime events, GCs among them), the public
 * corpus when DNT_CORPUS is set. Needs DNT_DATADIR (the run sets it) for the schema. */
#define FUZZ_NAME "fuzz-gc"
#include "fuzz-analysis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct dnt_gc_analysis *a = dnt_gc_analysis_new(schema);
  if (!a) return 0;
  fuzz_analysis_feed(data, size, dnt_gc_analysis_callbacks, a);
  dnt_gc_analysis_finish(a);
  if (!dnt_gc_analysis_failed(a)) {
    size_t n, complete = 0, per_gen[3] = {0};
    const dnt_gc *g = dnt_gc_list(a, &n);
    for (size_t i = 0; i < n; i++)
      if (g[i].complete) complete++, per_gen[g[i].generation]++;
    const dnt_gc_summary *s = dnt_gc_get_summary(a);
    if (s->all.count != complete || s->incomplete != n - complete) abort();
    for (int k = 0; k < 3; k++)
      if (s->gen[k].count != per_gen[k]) abort();
    dnt_gc_write_text(sink, a, 5, DNT_GC_ALL);
    dnt_gc_write_json(sink, a, 5);
  }
  dnt_gc_analysis_free(a);
  return 0;
}
