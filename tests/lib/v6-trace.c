/* The V6 test trace of v6-trace.h, written with the tests' own encoder (ntr-writer). */
#include <stdint.h>
#include <stdio.h>

#include "ntr-writer.h"
#include "v6-trace.h"

#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

int dnt_write_v6_trace(const char *path) {
  static const char *kv[] = {"ProcessId", "4321", "HardwareThreadCount", "6", "ExpectedCPUSamplingRate", "2000000"};
  ntrw_trace t = {1000, 1000000000, 8, 0, 0, 0, kv, 3};
  ntrw_md md[] = {
      {1, SAMPLER, 0, "ThreadSample", 0, 0, 0, -1, NULL, 0, 0, 0},
      {2, "My-Provider", 7, "Tick", 0, 0, 4, -1, NULL, 0, 0, 0},
  };
  ntrw w;
  ntrw_init(&w, 1);
  ntrw_trace_hdr(&w, &t);
  ntrw_thread(&w, 1, 4001, "cpu-work");
  ntrw_thread(&w, 2, 4002, "blocking-work");
  ntrw_thread(&w, 3, 4003, NULL);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &md[0]);
  ntrw_metadata(&w, &md[1]);
  ntrw_block_end(&w);
  static const uint64_t a[] = {0x1100, 0x9000}, b[] = {0x2200, 0x9000}; /* leaf first */
  const uint64_t *const frames[] = {a, b};
  const uint32_t nframes[] = {2, 2};
  ntrw_stacks(&w, 1, 2, frames, nframes);
  ntrw_ev_begin(&w, 1);
  static const uint8_t managed[4] = {2, 0, 0, 0};
  static const int order[10] = {2, 0, 4, 1, 3, 5, 6, 7, 8, 9};
  static const uint32_t stack_of[10] = {1, 2, 1, 1, 2, 2, 2, 2, 0, 0};
  uint32_t seq[4] = {0};
  for (int i = 0; i < 10; i++) {
    int k = order[i];
    uint64_t th = k < 5 ? 1 : k < 8 ? 2 : 3;
    ntrw_ev ev = {.metadata_id = th == 3 ? 2 : 1, .seq = ++seq[th], .thread = th, .capture_thread = th,
                  .stack_id = stack_of[k], .ts = 2000 + (uint64_t)k * 2000000, .payload = th == 3 ? NULL : managed,
                  .payload_size = th == 3 ? 0 : 4};
    ntrw_event(&w, &ev);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  FILE *fp = fopen(path, "wb");
  int rc = fp && fwrite(w.buf, 1, w.len, fp) == w.len ? 0 : -1;
  if (fp && fclose(fp) != 0) rc = -1;
  ntrw_release(&w);
  return rc;
}
