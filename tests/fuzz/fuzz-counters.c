/* fuzz-counters.c: libFuzzer target for the counters decoder (EventCounters payloads and the
 * System.Diagnostics.Metrics events: rates, gauges, histograms with their quantiles, tags, the
 * runtime's error events), on a nettrace stream as `counters` reads a session. Seeds:
 * tests/fuzz/seeds/traces (a counters session of the sample target: System.Runtime and its
 * Meter), the public corpus's counter traces when DNT_CORPUS is set. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dnt-counters.h"
#include "fuzz-ntr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static double sink;

static int on_value(void *ud, const dnt_counter_value *v) {
  (void)ud;
  if (!isnan(v->value)) sink += v->value + v->interval_s + v->time_s;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dnt_counters_decoder *d = dnt_counters_decoder_new(NULL, NULL, on_value, NULL);
  if (!d) return 0;
  fuzz_ntr_run(data, size, 0, dnt_counters_decoder_callbacks(), d);
  (void)strlen(dnt_counters_decoder_error(d));
  dnt_counters_decoder_free(d);
  return 0;
}
