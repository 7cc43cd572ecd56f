/* fuzz-perfdata.c: libFuzzer target for the perf.data reader compare uses for the scheduler's
 * tracepoints (dnt_perfdata_sched): the header, attrs and ids, the tracing data's sched formats
 * (field offsets, prev_state's mask from the print format), the sample records. Input: a
 * perf.data file. Properties: the check alone and the reading agree (same counts, the samples
 * handed over are those counted, all or none), every sample is a sched one, decoded, and the
 * same bytes read from a file (dnt_perfdata_sched_fd, on a memfd) give the same answer; and the
 * mending of a cut file (dnt_perfdata_mend) writes no more than it read. Seeds:
 * tests/fuzz/seeds/perfdata, a real recording of switches and wake-ups. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dnt-perf.h"

struct seen {
  dnt_cpu_states *cs;
  uint64_t switches, wakings;
};

static void observe(void *ud, const dnt_perf_sample *s) {
  struct seen *v = ud;
  if (!s->decoded || s->nframes || s->trace[0]) __builtin_trap();
  if (!strcmp(s->event, "sched:sched_switch")) v->switches++;
  else if (!strcmp(s->event, "sched:sched_waking")) v->wakings++;
  else __builtin_trap();
  dnt_cpu_states_observe(v->cs, s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* a copy of exactly size bytes: a read past the end is seen */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  char msg[256];
  struct dnt_perfdata_stats checked, read;
  struct seen v = {.cs = dnt_cpu_states_new()};
  int rc = dnt_perfdata_sched(buf, size, NULL, NULL, &checked, msg, sizeof msg);
  if (v.cs) {
    int rc2 = dnt_perfdata_sched(buf, size, observe, &v, &read, msg, sizeof msg);
    if (rc2 != -ENOMEM && rc2 != rc) __builtin_trap();
    if (rc2 == 0 && (read.switches != checked.switches || read.wakings != checked.wakings ||
                     v.switches != read.switches || v.wakings != read.wakings))
      __builtin_trap();
    if (rc2 != 0 && (v.switches || v.wakings)) __builtin_trap(); /* all or nothing */
    if (dnt_cpu_states_finish(v.cs, 0) == 0) (void)dnt_cpu_state_at(v.cs, 1, 1000);
  }
  if (rc != 0 && !msg[0]) __builtin_trap(); /* a refusal says why */
  int fd = memfd_create("perf.data", MFD_CLOEXEC);
  if (fd >= 0 && write(fd, buf, size) == (ssize_t)size) {
    struct dnt_perfdata_stats from_file;
    int rc3 = dnt_perfdata_sched_fd(fd, NULL, NULL, &from_file, msg, sizeof msg);
    if (rc3 != -ENOMEM && rc != -ENOMEM &&
        (rc3 != rc || (rc == 0 && (from_file.switches != checked.switches || from_file.wakings != checked.wakings))))
      __builtin_trap();
    /* the mending of a cut file: a copy no longer than the file, holding only whole records, its
     * header within the file's */
    int out = memfd_create("mended", MFD_CLOEXEC);
    uint64_t kept, claimed;
    int rc4 = out >= 0 ? dnt_perfdata_mend(fd, out, &kept, &claimed, msg, sizeof msg) : 1;
    off_t mended = out >= 0 ? lseek(out, 0, SEEK_END) : 0;
    if (rc4 == 0 && ((uint64_t)mended > size || kept >= claimed)) __builtin_trap();
    if (rc4 == 1 && mended != 0) __builtin_trap(); /* not cut: nothing written */
    if (rc4 < 0 && !msg[0]) __builtin_trap();
    if (out >= 0) close(out);
  }
  if (fd >= 0) close(fd);
  dnt_cpu_states_free(v.cs);
  free(buf);
  return 0;
}
