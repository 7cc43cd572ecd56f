/* fuzz-jitpool.c: libFuzzer target for the JIT and thread-pool analyses (analyze/jit.c,
 * analyze/threadpool.c): a nettrace stream's runtime events paired into compilations (per thread,
 * the open row stack) and taken in time order into the pool's rows, finished, and written as text
 * and JSON. Properties: the JIT summary counts exactly its rows (completed and not, by tier); the
 * pool's adjustments by reason add up to all of them, and starvation is its reason's count.
 * Seeds: tests/fuzz/seeds/traces, the public corpus when DNT_CORPUS is set (its JIT and thread-pool
 * traces). Needs DNT_DATADIR (the run sets it) for the schema. */
#define FUZZ_NAME "fuzz-jitpool"
#include "fuzz-analysis.h"

static void jit(const uint8_t *data, size_t size) {
  struct dnt_jit_analysis *a = dnt_jit_analysis_new(schema);
  if (!a) return;
  fuzz_analysis_feed(data, size, dnt_jit_analysis_callbacks, a);
  dnt_jit_analysis_finish(a);
  if (!dnt_jit_analysis_failed(a)) {
    size_t n, done = 0, tiers = 0, completions = 0, timeline = 0;
    const dnt_jit_method *m = dnt_jit_list(a, &n);
    for (size_t i = 0; i < n; i++) done += m[i].completed > 0, completions += (size_t)m[i].completed;
    const dnt_jit_summary *s = dnt_jit_get_summary(a);
    for (int t = 0; t < DNT_JIT_TIERS; t++) tiers += s->tier_count[t];
    for (size_t i = 0; i < s->n_timeline; i++) timeline += s->timeline[i].methods;
    if (s->methods != n || s->incomplete != n - done || tiers != done || s->completions != completions ||
        s->foreground + s->background != done || timeline != n)
      abort();
    dnt_jit_write_text(sink, a, 10);
    dnt_jit_write_json(sink, a, 10);
  }
  dnt_jit_analysis_free(a);
}

static void pool(const uint8_t *data, size_t size) {
  struct dnt_tp_analysis *a = dnt_tp_analysis_new(schema);
  if (!a) return;
  fuzz_analysis_feed(data, size, dnt_tp_analysis_callbacks, a);
  dnt_tp_analysis_finish(a);
  if (!dnt_tp_analysis_failed(a)) {
    size_t n, reasons = 0;
    dnt_tp_adjustments(a, &n);
    const dnt_tp_summary *s = dnt_tp_get_summary(a);
    for (int r = 0; r <= DNT_TP_REASONS; r++) reasons += s->by_reason[r];
    if (s->adjustments != n || reasons != n || s->starvation != s->by_reason[DNT_TP_STARVATION] ||
        s->blocking != s->by_reason[DNT_TP_COOPERATIVE_BLOCKING] || (s->has_workers && s->workers_min > s->workers_max))
      abort();
    dnt_tp_write_text(sink, a, 20);
    dnt_tp_write_json(sink, a, 20);
  }
  dnt_tp_analysis_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  jit(data, size);
  pool(data, size);
  return 0;
}
