/* fuzz-perf-script.c: libFuzzer target for the `perf script` reader (the text perf prints, in
 * any split) into a profile and into the CPU states compare uses, then the profile finished
 * (frames named) and the states sorted. Input: [split][text]. Seeds:
 * tests/fuzz/seeds/perf-script, real `perf script` output of the sample target. */
#include <stdint.h>
#include <string.h>

#include "dnt-perf.h"
#include "dnt-profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t split = data[0] ? data[0] : size;
  struct dnt_profile *prof = dnt_profile_new();
  dnt_cpu_states *cs = dnt_cpu_states_new();
  dnt_perf_reader *r = prof ? dnt_perf_reader_new(prof, 0, "cpu-clock", 1.0, NULL) : NULL;
  if (!r || !cs) goto out;
  dnt_perf_reader_observe(r, dnt_cpu_states_observe, cs);
  for (size_t off = 1; off < size;) {
    size_t n = size - off < split ? size - off : split;
    if (dnt_perf_reader_feed(r, (const char *)data + off, n) != 0) goto out;
    off += n;
  }
  if (dnt_perf_reader_finish(r) != 0) goto out;
  dnt_profile_finish(prof);
  for (size_t i = 0; i < dnt_profile_nnames(prof); i++) (void)strlen(dnt_profile_name(prof, (uint32_t)i));
  if (dnt_cpu_states_finish(cs, 0) == 0) (void)dnt_cpu_state_at(cs, 1, 1000);
out:
  dnt_perf_reader_free(r);
  dnt_profile_free(prof);
  dnt_cpu_states_free(cs);
  return 0;
}
