/* fuzz-perfmap.c: libFuzzer target for the files `collect --native` keeps beside a trace and
 * `compare` reads back: the runtime's perf map (`START SIZE NAME` lines: dnt_perfmap_load, the
 * lookups, the frame names) and the `.threads` list (dnt_cpu_states_load_names). The first byte
 * picks the file (even: perf map, odd: threads). Seeds: tests/fuzz/seeds/perfmap, the real perf
 * map and thread list of a `collect --native` of the sample target. */
#include <stdint.h>
#include <string.h>

#include "dnt-perf.h"
#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char path[32], name[512];
  fuzz_file(data + 1, size - 1, path, sizeof path);
  if (data[0] & 1) {
    dnt_cpu_states *cs = dnt_cpu_states_new();
    if (cs && dnt_cpu_states_load_names(cs, path) == 0 && dnt_cpu_states_finish(cs, 0) == 0)
      (void)strlen(dnt_cpu_states_thread(cs, 1, NULL));
    dnt_cpu_states_free(cs);
    return 0;
  }
  struct dnt_symtab t;
  size_t bad = 0;
  memset(&t, 0, sizeof t);
  if (dnt_perfmap_load(&t, path, &bad) == 0) {
    for (size_t i = 0; i < t.n && i < 256; i++) {
      const char *s = dnt_symtab_find(&t, t.v[i].start);
      if (s) dnt_perfmap_frame_name(s, name, sizeof name);
      (void)dnt_symtab_find(&t, t.v[i].end);
    }
  }
  dnt_symtab_release(&t);
  return 0;
}
