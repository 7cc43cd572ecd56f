/* gen-seeds.c: writes the fuzzer's seed corpus with tests/lib/ntr-writer.c. Not built by
 * make; regenerate with:
 *   cc -I tests -I nettrace tests/fuzz/gen-seeds.c tests/lib/ntr-writer.c -o /tmp/gen-seeds
 *   /tmp/gen-seeds tests/fuzz/seeds/ntr tests/fuzz/seeds/traces
 * Each seed of the first folder starts with the fuzzer's split byte; the second folder gets the
 * analyses' seeds (whole traces). */
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

static void put16(uint8_t *p, size_t *n, uint16_t v) { p[(*n)++] = (uint8_t)v, p[(*n)++] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, size_t *n, uint32_t v) { put16(p, n, (uint16_t)v), put16(p, n, (uint16_t)(v >> 16)); }
static void put64(uint8_t *p, size_t *n, uint64_t v) { put32(p, n, (uint32_t)v), put32(p, n, (uint32_t)(v >> 32)); }
static void putws(uint8_t *p, size_t *n, const char *s) {
  for (; *s; s++) put16(p, n, (uint8_t)*s);
  put16(p, n, 0);
}

/* Issue 29's shapes for the analyses: many keys (exception messages, locks) over one deep stack
 * (the memory amplification of event-stacks.c), their names full of terminal controls. */
static void hostile_keys(const char *dir) {
  ntrw w;
  ntrw_trace t = {1000, 1000000, 8, 42, 2, 1000000, NULL, 0};
  ntrw_md md[] = {
      {1, "Microsoft-Windows-DotNETRuntime", 80, "", 0x8000, 1, 2, -1, NULL, 0, 0, 1},
      {2, "Microsoft-Windows-DotNETRuntime", 81, "", 0x4000, 2, 4, -1, NULL, 0, 0, 1},
      {3, "Microsoft-Windows-DotNETRuntime", 91, "", 0x4000, 1, 4, -1, NULL, 0, 0, 1},
  };
  static uint64_t frames[300];
  for (int i = 0; i < 300; i++) frames[i] = 0x7f0000100000ull + 0x40ull * (uint64_t)i;
  const uint64_t *fp[1] = {frames};
  const uint32_t nf[1] = {300};
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  for (int i = 0; i < 3; i++) ntrw_metadata(&w, &md[i]);
  ntrw_block_end(&w);
  ntrw_stacks(&w, 1, 1, fp, nf);
  ntrw_ev_begin(&w, 1);
  uint32_t seq = 0;
  for (uint32_t k = 0; k < 20; k++) {
    uint8_t p[256];
    size_t n = 0;
    char msg[64];
    snprintf(msg, sizeof msg, "bad\r\x1b[1A request %u\x07", k);
    putws(p, &n, "Evil\x1b[31mException"), putws(p, &n, msg), put64(p, &n, 0x1234), put32(p, &n, 0x80131500);
    put16(p, &n, 0), put16(p, &n, 0);
    ntrw_ev e = {.metadata_id = 1, .seq = ++seq, .thread = 7, .capture_thread = 7, .stack_id = 1,
                 .ts = 2000 + 10 * k, .payload = p, .payload_size = (uint32_t)n};
    ntrw_event(&w, &e);
    n = 0;
    p[n++] = 0, put16(p, &n, 0), put64(p, &n, 0x10000 + 0x20ull * k), put64(p, &n, 0x20000), put64(p, &n, 8);
    e = (ntrw_ev){.metadata_id = 2, .seq = ++seq, .thread = 7, .capture_thread = 7, .stack_id = 1,
                  .ts = 2001 + 10 * k, .payload = p, .payload_size = (uint32_t)n};
    ntrw_event(&w, &e);
    n = 0;
    double ns = 1e6;
    uint64_t bits;
    memcpy(&bits, &ns, 8);
    p[n++] = 0, put16(p, &n, 0), put64(p, &n, bits);
    e = (ntrw_ev){.metadata_id = 3, .seq = ++seq, .thread = 7, .capture_thread = 7, .stack_id = 1,
                  .ts = 2002 + 10 * k, .payload = p, .payload_size = (uint32_t)n};
    ntrw_event(&w, &e);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  char path[1024];
  snprintf(path, sizeof path, "%s/hostile-keys-one-stack", dir);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(w.buf, 1, w.len, f);
    fclose(f);
  }
  ntrw_release(&w);
}

/* A NetPerf V3 stream (.NET Core 2.x): no Nettrace magic, objects begun by tag 4, a Trace of
 * version 3, one EventBlock of V3 rows: a metadata record (metadata id 0), then two events of it
 * on two threads, the first with a two-frame stack. */
static void v3_row(ntrw *w, uint32_t meta, uint32_t thread, uint64_t ts, const uint8_t *payload, uint32_t n,
                   const uint64_t *frames, uint32_t nframes) {
  uint8_t zero[32] = {0};
  ntrw_u32(w, 52 + n + 4 + 8 * nframes);
  ntrw_u32(w, meta), ntrw_u32(w, thread), ntrw_u64(w, ts);
  ntrw_bytes(w, zero, 32);
  ntrw_u32(w, n);
  ntrw_bytes(w, payload, n);
  ntrw_u32(w, 8 * nframes);
  for (uint32_t i = 0; i < nframes; i++) ntrw_u64(w, frames[i]);
}

static void netperf(ntrw *w) {
  static const uint64_t frames[] = {0x7f0000001010, 0x7f0000002020};
  uint8_t md[256], ev[8] = {1, 0, 0, 0, 2, 0, 0, 0};
  size_t n = 0;
  ntrw_init(w, 0);
  ntrw_u32(w, 20);
  ntrw_bytes(w, "!FastSerialization.1", 20);
  ntrw_bytes(w, "\x04\x04\x01", 3), ntrw_u32(w, 3), ntrw_u32(w, 0), ntrw_u32(w, 5), ntrw_bytes(w, "Trace", 5);
  ntrw_u8(w, 6);
  for (int i = 0; i < 8; i++) ntrw_u16(w, (uint16_t)(i == 0 ? 2018 : 1));
  ntrw_u64(w, 1000), ntrw_u64(w, 1000000000), ntrw_u32(w, 8), ntrw_u32(w, 77), ntrw_u32(w, 2), ntrw_u32(w, 1000000);
  ntrw_u8(w, 6);
  put32(md, &n, 1), putws(md, &n, "Seed-Provider"), put32(md, &n, 3), putws(md, &n, "SeedEvent");
  put64(md, &n, 0x10), put32(md, &n, 1), put32(md, &n, 4), put32(md, &n, 0);
  ntrw_bytes(w, "\x04\x04\x01", 3), ntrw_u32(w, 2), ntrw_u32(w, 0), ntrw_u32(w, 10), ntrw_bytes(w, "EventBlock", 10);
  ntrw_u8(w, 6);
  size_t size_at = w->len;
  ntrw_u32(w, 0);
  while (w->len & 3) ntrw_u8(w, 0);
  size_t start = w->len;
  v3_row(w, 0, 5, 1100, md, (uint32_t)n, NULL, 0);
  v3_row(w, 1, 5, 1200, ev, 8, frames, 2);
  v3_row(w, 1, 6, 1300, ev, 8, NULL, 0);
  uint32_t size = (uint32_t)(w->len - start);
  for (int i = 0; i < 4; i++) w->buf[size_at + (size_t)i] = (uint8_t)(size >> (8 * i));
  ntrw_u8(w, 6);
  ntrw_u8(w, 1);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  if (argc > 2) hostile_keys(argv[2]);
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
  netperf(&w);
  save(dir, "netperf-v3", 0, &w);
  save(dir, "netperf-v3-split5", 5, &w);
  ntrw_release(&w);
  return 0;
}
