/* fuzz-heap.c: libFuzzer target for the heap snapshot analysis (analyze/heap.c): a nettrace
 * stream's heap walk (BulkType, GCBulkNode, GCBulkEdge, roots, the forced GC's start and end)
 * decoded with every length checked, made a graph when complete, and written as text and JSON.
 * Properties: the types' objects and bytes add up to the summary's, and a complete walk's to
 * what the walk said; a complete walk lost nothing. Seeds: tests/fuzz/seeds/traces (a walk of the
 * sample's --heap among them), the public corpus when DNT_CORPUS is set. */
#define FUZZ_NAME "fuzz-heap"
#include "fuzz-analysis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct dnt_heap_analysis *a = dnt_heap_analysis_new();
  if (!a) return 0;
  fuzz_analysis_feed(data, size, dnt_heap_analysis_callbacks, a);
  dnt_heap_analysis_finish(a);
  const dnt_heap_summary *walk = dnt_heap_analysis_summary(a);
  if (walk->complete && (walk->lost_events || walk->reference_mismatch)) abort();
  struct dnt_heap *h = dnt_heap_analysis_take(a);
  if (h) {
    size_t n;
    uint64_t objects = 0, bytes = 0;
    const dnt_heap_type *t = dnt_heap_types(h, &n);
    for (size_t i = 0; i < n; i++) objects += t[i].count, bytes += t[i].bytes;
    const dnt_heap_summary *s = dnt_heap_summary_of(h);
    if (s && (objects != s->objects || bytes != s->bytes || s->objects != walk->objects || s->bytes != walk->bytes))
      abort();
    if (s && s->reachable > s->objects) abort();
    dnt_heap_write_text(sink, h, 10);
    dnt_heap_write_json(sink, h, 10);
    dnt_heap_free(h);
  }
  dnt_heap_analysis_free(a);
  return 0;
}
