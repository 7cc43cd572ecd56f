/* The flight recorder's ring (nettrace/ring.c): a stream of 10 event blocks, 3 threads writing 4
 * events each into each, arriving at times 1..10; a 3-ms window keeps the blocks of times 7..10,
 * and what it writes reads whole: the metadata, every kept event with its stack, and no event
 * counted lost (the threads' numbers carried over by the sequence point written first). A real
 * sequence point in the middle clears the stacks: those before it go when no kept event needs
 * them. A byte bound keeps fewer blocks still. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/ntr-writer.h"
#include "ntr.h"

#define BLOCKS 10
#define THREADS 3
#define PER 4

struct built {
  ntrw w;
  size_t ends[BLOCKS + 4]; /* the stream's length after the header and after each block */
  size_t nends;
};

/* Block i (1..BLOCKS): stacks then events; a sequence point after block 5 (stack ids restart). */
static void build(struct built *b) {
  static const ntrw_md md = {.id = 1, .provider = "Ring-Test", .event_id = 3, .name = "Tick", .opcode = -1,
                             .no_fields = 1};
  static const uint64_t f1[] = {0x1000, 0x2000}, f2[] = {0x3000};
  static const uint64_t *const frames[] = {f1, f2};
  static const uint32_t nframes[] = {2, 1};
  ntrw_trace t = {1000, 1000000000, 8, 42, 2, 1000000, NULL, 0};
  memset(b, 0, sizeof *b);
  ntrw_init(&b->w, 0);
  ntrw_trace_hdr(&b->w, &t);
  ntrw_md_begin(&b->w);
  ntrw_metadata(&b->w, &md);
  ntrw_block_end(&b->w);
  b->ends[b->nends++] = b->w.len;
  uint32_t seq[THREADS] = {0}, stack_base = 1;
  for (int i = 1; i <= BLOCKS; i++) {
    if (i == 6) { /* a sequence point: the stacks start again at 1 */
      uint64_t threads[THREADS];
      uint32_t seqs[THREADS];
      for (int k = 0; k < THREADS; k++) threads[k] = 100 + (uint64_t)k, seqs[k] = seq[k];
      ntrw_sp(&b->w, 2000 + 100 * (uint64_t)i - 1, 0, THREADS, threads, seqs);
      stack_base = 1;
    }
    uint32_t first = stack_base;
    ntrw_stacks(&b->w, first, 2, frames, nframes);
    stack_base += 2;
    ntrw_ev_begin(&b->w, 1);
    for (int e = 0; e < PER; e++)
      for (int k = 0; k < THREADS; k++) {
        ntrw_ev ev = {.metadata_id = 1, .seq = ++seq[k], .thread = 100 + (uint64_t)k, .capture_thread = 100 + (uint64_t)k,
                      .stack_id = first + (uint32_t)(e % 2), .ts = 2000 + 100 * (uint64_t)i + (uint64_t)e};
        ntrw_event(&b->w, &ev);
      }
    ntrw_block_end(&b->w);
    b->ends[b->nends++] = b->w.len;
  }
  ntrw_end(&b->w);
}

/* The built stream fed to a ring, block i arriving at time i; then written and read back. */
struct read_back {
  int events, with_stack, metadata;
  uint64_t min_ts, max_ts;
};

static int rb_metadata(void *ud, const ntr_metadata *md) {
  (void)md;
  ((struct read_back *)ud)->metadata++;
  return 0;
}

static int rb_event(void *ud, const ntr_event *ev) {
  struct read_back *r = ud;
  r->events++;
  r->with_stack += ev->stack && ev->stack->nframes > 0;
  if (!r->min_ts || ev->timestamp < r->min_ts) r->min_ts = ev->timestamp;
  if (ev->timestamp > r->max_ts) r->max_ts = ev->timestamp;
  return 0;
}

static void through_ring(uint64_t window, uint64_t max_bytes, struct read_back *rb, ntr_stats *st, ntr_ring_info *info) {
  struct built b;
  build(&b);
  ntr_ring *ring = ntr_ring_new(window, max_bytes);
  cr_assert(ring);
  ntr_callbacks cb;
  ntr_ring_callbacks(&cb);
  ntr_parser *p;
  cr_assert_eq(ntr_parser_new(&p, &cb, ring, NULL), 0);
  size_t at = 0;
  for (size_t i = 0; i < b.nends; i++) {
    ntr_ring_now(ring, i);
    cr_assert_geq(ntr_parser_feed(p, b.w.buf + at, b.ends[i] - at), 0);
    at = b.ends[i];
  }
  int rc = ntr_parser_feed(p, b.w.buf + at, b.w.len - at);
  cr_assert(rc >= 0 || rc == NTR_EOF, "%s", ntr_parser_errmsg(p));
  cr_assert_eq(ntr_parser_finish(p), 0);
  ntr_parser_free(p);
  ntr_ring_stats(ring, info);
  char *out = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&out, &len);
  cr_assert_eq(ntr_ring_write(ring, fp), 0);
  fclose(fp);
  ntr_ring_free(ring);
  ntrw_release(&b.w);
  memset(rb, 0, sizeof *rb);
  ntr_callbacks rcb = {.on_metadata = rb_metadata, .on_event = rb_event};
  cr_assert_eq(ntr_parser_new(&p, &rcb, rb, NULL), 0);
  rc = ntr_parser_feed(p, (const uint8_t *)out, len);
  cr_assert(rc >= 0 || rc == NTR_EOF, "%s", ntr_parser_errmsg(p));
  cr_assert_eq(ntr_parser_finish(p), 0, "the ring's stream is whole: %s", ntr_parser_errmsg(p));
  ntr_parser_stats(p, st);
  ntr_parser_free(p);
  free(out);
}

Test(ring, the_last_blocks_read_whole) {
  struct read_back rb;
  ntr_stats st;
  ntr_ring_info info;
  /* blocks arrive at 1..10: a window of 3 at time 10 keeps those of 7..10 */
  through_ring(3, 0, &rb, &st, &info);
  cr_expect_eq(info.event_blocks, 4);
  cr_expect_eq(info.oldest_ms, 7);
  cr_expect_eq(rb.metadata, 1);
  cr_expect_eq(rb.events, 4 * THREADS * PER);
  cr_expect_eq(rb.with_stack, rb.events, "every kept event has its stack");
  cr_expect_eq(rb.min_ts, 2700);
  cr_expect_eq(rb.max_ts, 3000 + PER - 1);
  cr_expect_eq(st.dropped_events, 0, "no event counted lost");
  /* a window over the whole stream: all of it, nothing cut */
  through_ring(100, 0, &rb, &st, &info);
  cr_expect_eq(rb.events, BLOCKS * THREADS * PER);
  cr_expect_eq(info.threads_cut, 0);
  cr_expect_eq(st.dropped_events, 0);
  /* a window that cuts before the sequence point: the stacks of both segments */
  through_ring(7, 0, &rb, &st, &info);
  cr_expect_eq(rb.events, 8 * THREADS * PER);
  cr_expect_eq(rb.with_stack, rb.events);
  cr_expect_eq(st.dropped_events, 0);
}

Test(ring, a_byte_bound_keeps_fewer) {
  struct read_back rb;
  ntr_stats st;
  ntr_ring_info info;
  through_ring(100, 1, &rb, &st, &info); /* too small for any event block: the metadata alone */
  cr_expect_eq(info.event_blocks, 0);
  cr_expect_eq(rb.events, 0);
  cr_expect_eq(rb.metadata, 1);
  through_ring(100, 600, &rb, &st, &info); /* a few blocks: the newest ones */
  cr_expect_gt(info.event_blocks, 0);
  cr_expect_lt(info.event_blocks, BLOCKS);
  cr_expect_leq(info.bytes, 600);
  cr_expect_eq(rb.events, (int)info.event_blocks * THREADS * PER);
  cr_expect_eq(rb.max_ts, 3000 + PER - 1);
  cr_expect_eq(st.dropped_events, 0);
}
