/* fuzz-allocs.c: libFuzzer target for the allocation analysis (analyze/allocs.c): a nettrace
 * stream's GCAllocationTick and AllocationSampled events decoded, estimated, charged to their
 * types and stacks (a profile weighed in bytes), finished, and written as text (by type and by
 * stack), JSON and folded stacks. Properties: the types' bytes and events sum to the summary's;
 * every estimate is finite and not negative. The input's length modulo 3 picks the source (auto,
 * tick, sampled), so that the seeds stay plain traces. Seeds: tests/fuzz/seeds/traces (the sample allocating: sample-allocs-tick,
 * sample-allocs-sampled), the public corpus when DNT_CORPUS is set. Needs DNT_DATADIR (the run
 * sets it) for the schema. */
#include <math.h>

#include "dnt-profile.h"

#define FUZZ_NAME "fuzz-allocs"
#include "fuzz-analysis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct dnt_allocs_analysis *a = dnt_allocs_analysis_new(schema, (enum dnt_allocs_source)(size % 3));
  if (!a) return 0;
  fuzz_analysis_feed(data, size, dnt_allocs_analysis_callbacks, a);
  dnt_allocs_analysis_finish(a);
  if (!dnt_allocs_analysis_failed(a)) {
    size_t n;
    const dnt_alloc_type *t = dnt_allocs_types(a, &n);
    const dnt_allocs_summary *s = dnt_allocs_get_summary(a);
    double bytes = 0;
    uint64_t samples = 0;
    for (size_t i = 0; i < n; i++) {
      if (!isfinite(t[i].bytes) || t[i].bytes < 0 || !isfinite(t[i].objects) || t[i].objects < 0) abort();
      bytes += t[i].bytes;
      samples += t[i].samples;
    }
    if (n != s->types || samples != s->samples || fabs(bytes - s->bytes) > 1e-6 * (bytes + 1)) abort();
    dnt_allocs_write_text(sink, a, 5, 0);
    dnt_allocs_write_text(sink, a, 5, 1);
    dnt_allocs_write_json(sink, a, 5);
    dnt_profile_write(dnt_allocs_profile(a), DNT_PROFILE_FOLDED, "fuzz", sink);
  }
  dnt_allocs_analysis_free(a);
  return 0;
}
