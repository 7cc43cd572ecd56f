/* fuzz-trace-read.c: libFuzzer target for trace files as `report`, `events` and `convert` open
 * them (dnt_trace_read): the container recognised by its first bytes (gzip, zip with stored or
 * deflated members, plain nettrace), inflated, and fed to the parser. Seeds:
 * tests/fuzz/seeds/traces (recordings of the sample target, plain, gzipped and zipped), the
 * public corpus (zips among them) when DNT_CORPUS is set. */
#include <stdint.h>

#include "dnt-trace.h"
#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t sum;

static int on_event(void *ud, const ntr_event *e) {
  (void)ud;
  if (e->payload_size) sum += e->payload[0];
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const ntr_callbacks cb = {.on_event = on_event};
  char path[32], err[512];
  ntr_stats stats;
  fuzz_file(data, size, path, sizeof path);
  dnt_trace_read(path, &cb, NULL, &stats, err, sizeof err);
  return 0;
}
