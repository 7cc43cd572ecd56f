/* ntr-transcript.h: turns every parser callback into a line of text, so two runs can be
 * compared. For big inputs keep only a digest (FNV-1a 64 of the text) and the counts. */
#ifndef NTR_TRANSCRIPT_H
#define NTR_TRANSCRIPT_H

#include <stddef.h>
#include <stdint.h>

#include "ntr.h"

typedef struct ntr_transcript {
  int keep_text;  /* store the text, not just the digest */
  char *text;
  size_t len, cap;
  uint64_t digest;
  uint64_t events, metadata, stacks, sps, threads, traces, ends;
  long stop_after_events; /* >0: on_event returns 1 after this many events */
  ntr_trace trace;        /* copy of the last trace header (pointers not kept) */
} ntr_transcript;

void ntr_transcript_init(ntr_transcript *t, int keep_text);
void ntr_transcript_release(ntr_transcript *t);
/* A callback table writing into the transcript passed as ud. */
const ntr_callbacks *ntr_transcript_callbacks(void);

/* Parses buf[0..len) fed in chunks: chunk > 0 fixed size, chunk == 0 whole, chunk < 0 random
 * sizes 1..-chunk from a fixed seed. Writes the final feed/finish results into the transcript
 * and returns finish()'s result. `lim` may be NULL. */
int ntr_transcript_run(ntr_transcript *t, const uint8_t *buf, size_t len, long chunk,
                       unsigned seed, const ntr_limits *lim, char *errmsg, size_t errsz);

#endif
