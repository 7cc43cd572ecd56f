/* fuzz-heap.c: libFuzzer target for the heap snapshot analysis (analyze/heap.c): a nettrace
 * stream's heap walk (BulkType, GCBulkNode, GCBulkEdge, roots, the forced GC's start and end)
 * decoded with every length checked, finished, and written as text and JSON. Properties: the
 * types' objects and bytes add up to the summary's; a complete walk lost nothing. Seeds:
 * tests/fuzz/seeds/traces (a walk of the sample's --heap among them), the public corpus when
 * DNT_CORPUS is set. */
#define FUZZ_NAME "fuzz-heap"
#include "fuzz-analysis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct dnt_heap_analysis *a = dnt_heap_analysis_new();
  if (!a) return 0;
  fuzz_analysis_feed(data, size, dnt_heap_analysis_callbacks, a);
  dnt_heap_analysis_finish(a);
  if (!dnt_heap_analysis_failed(a)) {
    size_t n;
    uint64_t objects = 0, bytes = 0;
    const dnt_heap_type *t = dnt_heap_types(a, &n);
    for (size_t i = 0; i < n; i++) objects += t[i].count, bytes += t[i].bytes;
    const dnt_heap_summary *s = dnt_heap_get_summary(a);
    if (objects != s->objects || bytes != s->bytes) abort();
    if (s->complete && (s->lost_events || s->reference_mismatch)) abort();
    dnt_heap_write_text(sink, a, 10);
    dnt_heap_write_json(sink, a, 10);
  }
  dnt_heap_analysis_free(a);
  return 0;
}
