/* fuzz-ntr.h: a nettrace parser for the fuzz targets that read traces, with limits small enough
 * that one input stays cheap, fed one buffer in pieces of `split` bytes (0: whole). */
#ifndef DNT_FUZZ_NTR_H
#define DNT_FUZZ_NTR_H

#include <stdint.h>
#include <string.h>

#include "ntr.h"

static inline void fuzz_ntr_run(const uint8_t *p, size_t n, size_t split, const ntr_callbacks *cb, void *ud) {
  ntr_limits lim;
  ntr_parser *parser;
  memset(&lim, 0, sizeof lim);
  lim.max_block_size = 1 << 20;
  lim.max_metadata_bytes = 4 << 20;
  lim.max_stack_bytes = 4 << 20;
  lim.max_label_bytes = 1 << 20;
  lim.max_threads = 4096;
  if (ntr_parser_new(&parser, cb, ud, &lim) < 0) return;
  if (!split) split = n ? n : 1;
  for (size_t off = 0; off < n;) {
    size_t k = n - off < split ? n - off : split;
    int rc = ntr_parser_feed(parser, p + off, k);
    off += k;
    if (rc < 0 && rc != NTR_EOF) break;
  }
  ntr_parser_finish(parser);
  ntr_parser_free(parser);
}

#endif
