/* ntr-fuzzer.c: libFuzzer target for the nettrace parser (--enable-fuzzing, clang).
 * The first input byte picks how the rest is split across feeds, so the carry-buffer paths
 * are fuzzed as well as the decoders. Small limits keep each run cheap. */
#include <stddef.h>
#include <stdint.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const ntr_callbacks cb = {NULL, NULL, NULL, on_event, NULL, NULL, NULL};
  ntr_limits lim;
  ntr_parser *p;
  size_t sum = 0, chunk, off = 1;

  if (size < 1)
    return 0;
  chunk = data[0] ? data[0] : size;
  memset(&lim, 0, sizeof(lim));
  lim.max_block_size = 1 << 20;
  lim.max_metadata_bytes = 4 << 20;
  lim.max_stack_bytes = 4 << 20;
  lim.max_label_bytes = 1 << 20;
  lim.max_threads = 4096;
  if (ntr_parser_new(&p, &cb, &sum, &lim) < 0)
    return 0;
  while (off < size) {
    size_t n = size - off < chunk ? size - off : chunk;
    int rc = ntr_parser_feed(p, data + off, n);
    off += n;
    if (rc < 0 && rc != NTR_EOF)
      break;
  }
  ntr_parser_finish(p);
  ntr_parser_free(p);
  return 0;
}
