/* fuzz-exclocks.c: libFuzzer target for the exceptions and contention analyses (analyze/
 * exceptions.c, locks.c, event-stacks.c): a nettrace stream's runtime events decoded by the
 * schema's layouts, paired per thread, their stacks kept in a profile with a leaf frame per key,
 * finished (frames named, stacks merged across threads), written as text and JSON. Properties:
 * every throw ends handled, unhandled or unknown exactly once, and each group's stacks count its
 * throws; each lock's waits are its stacks' waits; the summaries are the sums of the rows. Seeds:
 * tests/fuzz/seeds/traces, the public corpus when DNT_CORPUS is set. Needs DNT_DATADIR (the run
 * sets it) for the schema. */
#define FUZZ_NAME "fuzz-exclocks"
#include "fuzz-analysis.h"

static void exceptions(const uint8_t *data, size_t size) {
  struct dnt_exceptions_analysis *a = dnt_exceptions_analysis_new(schema);
  if (!a) return;
  fuzz_analysis_feed(data, size, dnt_exceptions_analysis_callbacks, a);
  dnt_exceptions_analysis_finish(a, 3);
  if (!dnt_exceptions_analysis_failed(a)) {
    size_t n;
    const dnt_exception_group *g = dnt_exceptions_list(a, &n);
    const dnt_exception_summary *s = dnt_exceptions_get_summary(a);
    uint64_t thrown = 0, per_sec = 0;
    for (size_t i = 0; i < n; i++) {
      if (g[i].handled + g[i].unhandled + g[i].unknown != g[i].thrown) abort();
      uint64_t stacked = g[i].other_stacks;
      for (size_t k = 0; k < g[i].nstacks; k++) stacked += g[i].stacks[k].count;
      if (stacked != g[i].thrown) abort();
      thrown += g[i].thrown;
    }
    for (size_t i = 0; i < s->seconds; i++) per_sec += s->per_sec_counts[i];
    if (thrown != s->thrown || s->groups != n || per_sec > thrown) abort();
    dnt_exceptions_write_text(sink, a, 5);
    dnt_exceptions_write_json(sink, a, 5);
  }
  dnt_exceptions_analysis_free(a);
}

static void locks(const uint8_t *data, size_t size) {
  struct dnt_locks_analysis *a = dnt_locks_analysis_new(schema);
  if (!a) return;
  fuzz_analysis_feed(data, size, dnt_locks_analysis_callbacks, a);
  dnt_locks_analysis_finish(a, 3);
  if (!dnt_locks_analysis_failed(a)) {
    size_t n;
    const dnt_lock *l = dnt_locks_list(a, &n);
    const dnt_locks_summary *s = dnt_locks_get_summary(a);
    uint64_t waits = 0;
    for (size_t i = 0; i < n; i++) {
      uint64_t stacked = l[i].other_stacks;
      for (size_t k = 0; k < l[i].nstacks; k++) stacked += l[i].stacks[k].count;
      if (stacked != l[i].waits || !(l[i].max_wait_ms <= l[i].wait_ms)) abort();
      waits += l[i].waits;
    }
    if (waits != s->waits || s->locks != n) abort();
    dnt_locks_write_text(sink, a, 5);
    dnt_locks_write_json(sink, a, 5);
  }
  dnt_locks_analysis_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  exceptions(data, size);
  locks(data, size);
  return 0;
}
