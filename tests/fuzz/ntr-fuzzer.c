/* ntr-fuzzer.c: libFuzzer target for the nettrace parser (--enable-fuzzing, clang).
 * The first input byte picks how the rest is split across feeds, so the carry-buffer paths
 * are fuzzed as well as the decoders. Small limits keep each run cheap. Beside it, the flight
 * recorder's ring (a window of two feeds): when the stream reads whole, what the ring writes
 * must read whole too. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntr.h"

static int on_event(void *ud, const ntr_event *e) {
  size_t *sum = ud;
  /* Touch what the parser hands out so ASan sees any bad pointer. */
  if (e->payload_size)
    *sum += e->payload[0] + e->payload[e->payload_size - 1];
  if (e->stack && e->stack->nframes)
    *sum += (size_t)e->stack->frames[e->stack->nframes - 1];
  if (e->metadata && e->metadata->nfields)
    *sum += strlen(e->metadata->fields[0].name);
  return 0;
}

/* Whether bytes read whole as a stream. */
static int reads_whole(const uint8_t *data, size_t size, const ntr_limits *lim) {
  static const ntr_callbacks cb = {NULL, NULL, NULL, on_event, NULL, NULL, NULL, NULL};
  ntr_parser *p;
  size_t sum = 0;
  if (ntr_parser_new(&p, &cb, &sum, lim) < 0) return 1;
  int rc = ntr_parser_feed(p, data, size);
  int whole = (rc >= 0 || rc == NTR_EOF) && ntr_parser_finish(p) == 0;
  ntr_parser_free(p);
  return whole;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const ntr_callbacks cb = {NULL, NULL, NULL, on_event, NULL, NULL, NULL, NULL};
  ntr_limits lim;
  ntr_parser *p;
  size_t sum = 0, chunk, off = 1;
  int rc = 0;

  if (size < 1)
    return 0;
  chunk = data[0] ? data[0] : size;
  memset(&lim, 0, sizeof(lim));
  lim.max_block_size = 1 << 20;
  lim.max_metadata_bytes = 4 << 20;
  lim.max_stack_bytes = 4 << 20;
  lim.max_label_bytes = 1 << 20;
  lim.max_threads = 4096;
  ntr_ring *ring = ntr_ring_new(2, 1 << 16);
  ntr_fanout fan;
  ntr_callbacks rcb, fcb;
  ntr_fanout_init(&fan);
  ntr_fanout_add(&fan, &cb, &sum);
  if (ring) {
    ntr_ring_callbacks(&rcb);
    ntr_fanout_add(&fan, &rcb, ring);
  }
  ntr_fanout_callbacks(&fan, &fcb);
  if (ntr_parser_new(&p, &fcb, &fan, &lim) < 0) {
    ntr_ring_free(ring);
    return 0;
  }
  uint64_t now = 0;
  while (off < size) {
    size_t n = size - off < chunk ? size - off : chunk;
    if (ring) ntr_ring_now(ring, now++);
    rc = ntr_parser_feed(p, data + off, n);
    off += n;
    if (rc < 0 && rc != NTR_EOF)
      break;
  }
  int whole = (rc >= 0 || rc == NTR_EOF) && ntr_parser_finish(p) == 0;
  ntr_parser_free(p);
  if (ring && whole && !ntr_ring_failed(ring)) {
    char *out = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);
    if (fp && ntr_ring_write(ring, fp) == 0) {
      fflush(fp);
      if (!reads_whole((const uint8_t *)out, len, &lim)) abort();
    }
    if (fp) fclose(fp);
    free(out);
  }
  ntr_ring_free(ring);
  return 0;
}
