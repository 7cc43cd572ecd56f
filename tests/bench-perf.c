/* Throughput of the perf script parser and the offset-to-address mapping, on text generated here
 * in the shape perf prints (deep JIT and native chains, one mapping per region). Figures only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dnt-perf.h"

struct counts {
  dnt_perf_maps *maps;
  unsigned long long samples, frames, resolved;
};

static int on_sample(void *ud, const dnt_perf_sample *s) {
  struct counts *c = ud;
  c->samples++;
  for (size_t i = 0; i < s->nframes; i++) {
    c->frames++;
    c->resolved += dnt_perf_maps_absolute(c->maps, s->pid, &s->frames[i]) != 0;
  }
  return 0;
}

static int on_mmap(void *ud, const dnt_perf_mmap *m) { return dnt_perf_maps_add(((struct counts *)ud)->maps, m); }

int main(int argc, char **argv) {
  size_t target = (argc > 1 ? (size_t)atol(argv[1]) : 200) * 1000 * 1000;
  char *text = malloc(target + 4096);
  if (!text) return 1;
  size_t o = 0;
  for (int m = 0; m < 64; m++)
    o += (size_t)sprintf(text + o,
                         "Sample 0/0 0.000000000: PERF_RECORD_MMAP2 100/100: [0x%llx(0x100000) @ 0x%x 00:01 1 0]: r-xs /memfd:doublemapper (deleted)\n",
                         0x7f0000000000ull + (unsigned long long)m * 0x200000, m * 0x100000);
  unsigned seed = 1;
  unsigned long long t = 1000000000ull;
  while (o < target) {
    o += (size_t)sprintf(text + o, ".NET TP Worker 100/%u %llu.%09llu: cpu-clock: \n", 101 + seed % 16, t / 1000000000ull,
                         t % 1000000000ull);
    t += 1001001;
    int depth = 8 + (int)(seed % 40);
    for (int f = 0; f < depth; f++) {
      seed = seed * 1103515245u + 12345u;
      if (f % 3 == 2)
        o += (size_t)sprintf(text + o, "\t    %x MethodDesc::DoPrestub(MethodTable*) (/usr/lib/libcoreclr.so)\n", seed % 0x600000);
      else
        o += (size_t)sprintf(text + o, "\t    %x [unknown] (/memfd:doublemapper (deleted))\n", seed % 0x4000000);
    }
    text[o++] = '\n';
  }
  struct counts c = {dnt_perf_maps_new(), 0, 0, 0};
  static const dnt_perf_script_cb cb = {on_sample, on_mmap};
  dnt_perf_script *p = dnt_perf_script_new(&cb, &c);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (size_t off = 0; off < o; off += 65536) dnt_perf_script_feed(p, text + off, o - off < 65536 ? o - off : 65536);
  dnt_perf_script_finish(p);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("perf script parse + address mapping: %.0f MB in %.2f s = %.0f MB/s (%llu samples, %llu frames, %llu mapped)\n",
         (double)o / 1e6, s, (double)o / 1e6 / s, c.samples, c.frames, c.resolved);
  dnt_perf_script_free(p);
  dnt_perf_maps_free(c.maps);
  free(text);
  return 0;
}
