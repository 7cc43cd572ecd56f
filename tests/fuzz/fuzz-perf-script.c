/* fuzz-perf-script.c: libFuzzer target for the `perf script` reader (the text perf prints, in
 * any split) into a profile and into the CPU states compare uses, then the profile finished
 * (frames named) and the states sorted; and the same text into the waits analysis (`dntrace
 * waits`: switches and wake-ups paired, a profile of the waits, its table and JSON). Input:
 * [split][text]. Seeds: tests/fuzz/seeds/perf-script, real `perf script` output of the sample
 * target (sample-chains: the tracepoints with their call chains, as waits reads them). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dnt-perf.h"
#include "dnt-profile.h"

/* text fed in pieces of split bytes; 0 or the reader's error */
static int feed(dnt_perf_reader *r, const uint8_t *data, size_t size, size_t split) {
  for (size_t off = 1; off < size;) {
    size_t n = size - off < split ? size - off : split;
    if (dnt_perf_reader_feed(r, (const char *)data + off, n) != 0) return -1;
    off += n;
  }
  return dnt_perf_reader_finish(r);
}

static void waits(const uint8_t *data, size_t size, size_t split) {
  struct dnt_profile *prof = dnt_profile_new();
  dnt_waits *w = dnt_waits_new();
  struct dnt_symtab perfmap;
  memset(&perfmap, 0, sizeof perfmap);
  dnt_perf_reader *r = prof && w ? dnt_waits_reader(w, prof, &perfmap) : NULL;
  if (!r || feed(r, data, size, split) != 0) goto out;
  const char *names[] = {"Sample!Sample.Program.Main", DNT_UNMANAGED_FRAME};
  if (dnt_waits_managed_sample(w, 1, 1000, names, 2) != 0) goto out;
  struct dnt_waits_filter f = {.min_ms = 0};
  struct dnt_waits_info info;
  if (dnt_waits_finish(w, prof, &f, &info) != 0 || dnt_profile_finish(prof) != 0) goto out;
  if (info.kept > info.intervals) __builtin_trap(); /* kept waits are among the waits ended */
  FILE *fp = fopen("/dev/null", "w");
  if (fp) {
    dnt_waits_write_table(prof, 0, fp);
    dnt_waits_write_json(prof, 0, fp);
    fclose(fp);
  }
out:
  dnt_perf_reader_free(r);
  dnt_waits_free(w);
  dnt_profile_free(prof);
  dnt_symtab_release(&perfmap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t split = data[0] ? data[0] : size;
  struct dnt_profile *prof = dnt_profile_new();
  dnt_cpu_states *cs = dnt_cpu_states_new();
  dnt_perf_reader *r = prof ? dnt_perf_reader_new(prof, 0, "cpu-clock", 1.0, NULL) : NULL;
  if (!r || !cs) goto out;
  dnt_perf_reader_observe(r, dnt_cpu_states_observe, cs);
  if (feed(r, data, size, split) != 0) goto out;
  dnt_profile_finish(prof);
  for (size_t i = 0; i < dnt_profile_nnames(prof); i++) (void)strlen(dnt_profile_name(prof, (uint32_t)i));
  if (dnt_cpu_states_finish(cs, 0) == 0) (void)dnt_cpu_state_at(cs, 1, 1000);
out:
  dnt_perf_reader_free(r);
  dnt_profile_free(prof);
  dnt_cpu_states_free(cs);
  waits(data, size, split);
  return 0;
}
