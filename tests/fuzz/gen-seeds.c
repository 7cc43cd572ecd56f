/* gen-seeds.c: writes the fuzzer's seed corpus with tests/lib/ntr-writer.c. Not built by
 * make; regenerate with:
 *   cc -I tests -I nettrace tests/fuzz/gen-seeds.c tests/lib/ntr-writer.c -o /tmp/gen-seeds
 *   /tmp/gen-seeds tests/fuzz/seeds/ntr
 * Each seed starts with the fuzzer's split byte. */
#include <stdio.h>
#include <string.h>

#include "lib/ntr-writer.h"

static void save(const char *dir, const char *name, uint8_t split, const ntrw *w) {
  char path[1024];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (!f)
    return;
  fwrite(&split, 1, 1, f);
  fwrite(w->buf, 1, w->len, f);
  fclose(f);
}

/* empty_stacks: the stack block holds only empty stacks, as the runtime's first one often does
 * (a NULL frame pool there was undefined behaviour; issue 19). */
static void stream(ntrw *w, int v6, int compressed, int empty_stacks) {
  static const char *kv[] = {"ProcessId", "12"};
  ntrw_trace t = {10, 1000000000, 8, 12, 2, 1000000, kv, 1};
  static const ntrw_field pt[] = {{"X", 9, NULL, NULL, 0, 0}, {"S", 18, NULL, NULL, 0, 0}};
  static const ntrw_field el = {"", 1, NULL, pt, 2, 0};
  static const ntrw_field fs[] = {{"A", 19, &el, NULL, 0, 0}, {"B", 1, NULL, pt, 2, 0}};
  ntrw_md m = {1, "Seed-Provider", 3, "SeedEvent", 0x10, 1, 4, 2, fs, 2, 1, 0};
  static const uint64_t fr[3] = {0x1000, 0x2000, 0x3000};
  const uint64_t *fp[2] = {fr, fr};
  const uint32_t nf[2] = {empty_stacks ? 0 : 3, empty_stacks ? 0 : 1};
  uint64_t th[2] = {1, 2};
  uint32_t sq[2] = {3, 3};
  uint8_t payload[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  uint8_t act[16] = {7};
  ntrw_ev e;
  int i;
  ntrw_init(w, v6);
  ntrw_trace_hdr(w, &t);
  if (v6)
    ntrw_thread(w, 1, 501, "main");
  ntrw_md_begin(w);
  ntrw_metadata(w, &m);
  m.id = 2;
  m.v2params = 0;
  m.fields = pt;
  ntrw_metadata(w, &m);
  ntrw_block_end(w);
  if (v6)
    ntrw_label_list(w, 1, act, "k", "v");
  ntrw_stacks(w, 1, 2, fp, nf);
  ntrw_ev_begin(w, compressed);
  memset(&e, 0, sizeof(e));
  for (i = 0; i < 6; i++) {
    e.metadata_id = 1 + i % 2;
    e.capture_thread = e.thread = 1 + i % 2;
    e.seq = 1 + i / 2;
    e.stack_id = (uint32_t)(i % 3);
    e.ts += 17;
    e.label_list = v6 ? 1 : 0;
    e.payload = payload;
    e.payload_size = (uint32_t)(i * 2);
    e.sorted = i == 0;
    ntrw_event(w, &e);
  }
  ntrw_block_end(w);
  ntrw_sp(w, 1000, v6 ? 3 : 0, 2, th, sq);
  if (v6)
    ntrw_remove_thread(w, 1, 3);
  ntrw_end(w);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  ntrw w;
  stream(&w, 0, 1, 0);
  save(dir, "v4-compressed", 0, &w);
  save(dir, "v4-compressed-split7", 7, &w);
  ntrw_release(&w);
  stream(&w, 0, 0, 0);
  save(dir, "v4-uncompressed", 0, &w);
  ntrw_release(&w);
  stream(&w, 1, 1, 0);
  save(dir, "v6-compressed", 0, &w);
  save(dir, "v6-compressed-split3", 3, &w);
  ntrw_release(&w);
  stream(&w, 1, 0, 0);
  save(dir, "v6-uncompressed", 0, &w);
  ntrw_release(&w);
  stream(&w, 0, 1, 1);
  save(dir, "v4-empty-stacks", 0, &w);
  ntrw_release(&w);
  return 0;
}
