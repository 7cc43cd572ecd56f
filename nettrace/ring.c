/* ring.c: the flight recorder's memory (issue 26): the blocks of a NetTrace V4/V5 stream as the
 * parser passes them (on_block), of which the last window_ms are kept (by when they arrived, the
 * caller's clock) and at most max_bytes; written out as a stream of its own that every reader
 * takes whole.
 *
 * What a reader needs of a stream cut at the front, and how it is kept:
 * - the metadata of every event: all metadata blocks are kept (they are few), written first;
 * - the stacks events refer to: stack ids restart after each sequence point, so the stack blocks
 *   since the last sequence point before the oldest event kept are kept with it;
 * - sequence numbers without a gap: each thread's events are numbered; a reader that meets a
 *   jump counts events lost. Each event block remembers the last number of each thread in it;
 *   when blocks are dropped, those numbers are kept, and the stream written begins with a
 *   sequence point that says them (a reader then expects the next ones, and clears its stacks:
 *   the kept stack blocks come after it).
 * Every block is framed again on the way out: the padding before a block's content aligns it on
 * the offset in the stream, which is another in the file written. */
#include <stdlib.h>
#include <string.h>

#include "ntr-int.h"

struct seq {
  uint64_t thread;
  uint32_t seq;
};

struct block {
  int kind;      /* enum ntr_block_kind */
  int dropped;   /* an event block given up (its body freed) */
  uint32_t seg;  /* sequence points before it */
  uint64_t ms;   /* when it arrived */
  uint64_t min_ts;
  uint8_t *body;
  size_t n;
  struct seq *seqs; /* an event block's threads, each with its last sequence number in it */
  uint32_t nseqs;
};

struct ntr_ring {
  uint64_t window_ms, max_bytes, now;
  int held; /* ntr_ring_hold: nothing more dropped for its age */
  uint8_t trace[48];
  int have_trace, failed;
  struct block *meta;
  size_t nmeta, capmeta;
  struct block *q; /* stack, event and SP blocks, in the stream's order, from head */
  size_t head, n, cap;
  uint32_t seg;
  uint64_t bytes;
  struct seq *cur; /* the block being read: its events' threads */
  uint32_t ncur, capcur;
  uint64_t cur_min_ts;
  struct seq *gone; /* the threads' last numbers in the blocks dropped */
  size_t ngone, capgone;
};

ntr_ring *ntr_ring_new(uint64_t window_ms, uint64_t max_bytes) {
  ntr_ring *r = ntr__calloc(1, sizeof *r);
  if (!r) return NULL;
  r->window_ms = window_ms, r->max_bytes = max_bytes ? max_bytes : UINT64_MAX;
  r->cur_min_ts = UINT64_MAX;
  return r;
}

static void block_free(struct block *b) {
  ntr__free(b->body), ntr__free(b->seqs);
  b->body = NULL, b->seqs = NULL;
}

void ntr_ring_free(ntr_ring *r) {
  if (!r) return;
  for (size_t i = 0; i < r->nmeta; i++) block_free(&r->meta[i]);
  for (size_t i = r->head; i < r->n; i++) block_free(&r->q[i]);
  ntr__free(r->meta), ntr__free(r->q), ntr__free(r->cur), ntr__free(r->gone);
  ntr__free(r);
}

void ntr_ring_now(ntr_ring *r, uint64_t ms) { r->now = ms; }

void ntr_ring_hold(ntr_ring *r) { r->held = 1; }

int ntr_ring_failed(const ntr_ring *r) { return r->failed; }

static int grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 0;
  size_t want = *cap ? *cap * 2 : 64;
  void *g = ntr__realloc(*v, want * size);
  if (!g) return -1;
  *v = g, *cap = want;
  return 0;
}

/* thread's entry in v[0..*n) (added when new): NULL when out of memory. */
static struct seq *seq_of(struct seq **v, size_t *n, size_t *cap, uint64_t thread) {
  for (size_t i = 0; i < *n; i++)
    if ((*v)[i].thread == thread) return &(*v)[i];
  if (grow((void **)v, cap, *n, sizeof **v) != 0) return NULL;
  (*v)[*n] = (struct seq){thread, 0};
  return &(*v)[(*n)++];
}

static int ring_on_event(void *ud, const ntr_event *ev) {
  ntr_ring *r = ud;
  size_t n = r->ncur, cap = r->capcur;
  struct seq *s = seq_of(&r->cur, &n, &cap, ev->capture_thread_id);
  r->ncur = (uint32_t)n, r->capcur = (uint32_t)cap;
  if (!s) return r->failed = 1, 0; /* the ring stops keeping; the parse goes on */
  s->seq = ev->sequence;
  if (ev->timestamp < r->cur_min_ts) r->cur_min_ts = ev->timestamp;
  return 0;
}

/* The first event block kept, from head: its index, r->n when none. */
static size_t first_event(const ntr_ring *r) {
  size_t i = r->head;
  while (i < r->n && (r->q[i].kind != NTR_BLOCK_EVENT || r->q[i].dropped)) i++;
  return i;
}

static void drop(ntr_ring *r, struct block *b) {
  for (uint32_t k = 0; k < b->nseqs; k++) {
    struct seq *g = seq_of(&r->gone, &r->ngone, &r->capgone, b->seqs[k].thread);
    if (!g) {
      r->failed = 1;
      return;
    }
    g->seq = b->seqs[k].seq;
  }
  r->bytes -= b->n;
  block_free(b);
  b->dropped = 1;
}

/* Event blocks out from the oldest while too old or too many bytes; then the stack and sequence
 * point blocks no kept event needs (those of a segment before the oldest kept event's). */
static void prune(ntr_ring *r) {
  uint64_t cutoff = r->now > r->window_ms ? r->now - r->window_ms : 0;
  for (;;) {
    size_t f = first_event(r);
    if (f == r->n || (r->bytes <= r->max_bytes && (r->held || r->q[f].ms >= cutoff))) break;
    drop(r, &r->q[f]);
    if (r->failed) return;
  }
  size_t f = first_event(r);
  uint32_t keep_from = f < r->n ? r->q[f].seg : r->seg;
  while (r->head < r->n) {
    struct block *b = &r->q[r->head];
    int needed = b->kind == NTR_BLOCK_EVENT ? !b->dropped : b->seg >= keep_from && b->kind == NTR_BLOCK_STACK;
    if (needed) break;
    if (!b->dropped) r->bytes -= b->n;
    block_free(b);
    r->head++;
  }
  if (r->head > 64 && r->head * 2 > r->n) { /* the dropped front given back */
    memmove(r->q, r->q + r->head, (r->n - r->head) * sizeof *r->q);
    r->n -= r->head, r->head = 0;
  }
}

static int ring_on_block(void *ud, int kind, const uint8_t *body, size_t n) {
  ntr_ring *r = ud;
  if (r->failed) return 0;
  if (kind == NTR_BLOCK_TRACE) {
    memcpy(r->trace, body, n < 48 ? n : 48);
    r->have_trace = 1;
    return 0;
  }
  struct block b = {kind, 0, r->seg, r->now, r->cur_min_ts, ntr__malloc(n ? n : 1), n, NULL, 0};
  if (!b.body) return r->failed = 1, 0;
  memcpy(b.body, body, n);
  if (kind == NTR_BLOCK_EVENT && r->ncur) {
    b.seqs = r->cur, b.nseqs = r->ncur;
    r->cur = NULL, r->ncur = r->capcur = 0;
  }
  r->ncur = 0;
  r->cur_min_ts = UINT64_MAX;
  int bad = kind == NTR_BLOCK_METADATA ? grow((void **)&r->meta, &r->capmeta, r->nmeta, sizeof *r->meta)
                                       : grow((void **)&r->q, &r->cap, r->n, sizeof *r->q);
  if (bad) {
    block_free(&b);
    return r->failed = 1, 0;
  }
  if (kind == NTR_BLOCK_METADATA) r->meta[r->nmeta++] = b;
  else r->q[r->n++] = b;
  r->bytes += n;
  if (kind == NTR_BLOCK_SP) r->seg++;
  prune(r);
  return 0;
}

void ntr_ring_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_event = ring_on_event;
  cb->on_block = ring_on_block;
}

void ntr_ring_stats(const ntr_ring *r, ntr_ring_info *info) {
  memset(info, 0, sizeof *info);
  info->bytes = r->bytes;
  for (size_t i = r->head; i < r->n; i++)
    if (r->q[i].kind == NTR_BLOCK_EVENT && !r->q[i].dropped) {
      if (!info->event_blocks) info->oldest_ms = r->q[i].ms;
      info->event_blocks++;
    }
  for (size_t i = r->head; i < r->n; i++) info->dropped_blocks += r->q[i].dropped;
  info->threads_cut = r->ngone;
}

/* ---- writing ---- */

struct out {
  FILE *fp;
  uint64_t at;
};

static void put(struct out *w, const void *p, size_t n) {
  fwrite(p, 1, n, w->fp);
  w->at += n;
}
static void put_u8(struct out *w, uint8_t v) { put(w, &v, 1); }
static void put_u32(struct out *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  put(w, b, 4);
}

/* An object: its type (name, version and minimum reader version), then the body; a block's with
 * its size and the padding that aligns its content on the file's offset. */
static void put_object(struct out *w, const char *name, uint32_t version, int sized, const uint8_t *body, size_t n) {
  put_u8(w, 5), put_u8(w, 5), put_u8(w, 1);
  put_u32(w, version), put_u32(w, version);
  put_u32(w, (uint32_t)strlen(name));
  put(w, name, strlen(name));
  put_u8(w, 6);
  if (sized) {
    put_u32(w, (uint32_t)n);
    static const uint8_t zeros[4];
    put(w, zeros, (size_t)((4 - (w->at & 3)) & 3));
  }
  put(w, body, n);
  put_u8(w, 6);
}

static const char *block_name(int kind) {
  return kind == NTR_BLOCK_EVENT ? "EventBlock" : kind == NTR_BLOCK_METADATA ? "MetadataBlock"
         : kind == NTR_BLOCK_STACK ? "StackBlock" : "SPBlock";
}

int ntr_ring_write(const ntr_ring *r, FILE *fp) {
  if (!r->have_trace || r->failed) return -1;
  struct out w = {fp, 0};
  put(&w, "Nettrace", 8);
  put_u32(&w, 20);
  put(&w, "!FastSerialization.1", 20);
  put_object(&w, "Trace", 4, 0, r->trace, 48);
  for (size_t i = 0; i < r->nmeta; i++) put_object(&w, "MetadataBlock", 2, 1, r->meta[i].body, r->meta[i].n);
  if (r->ngone) { /* the numbers of the threads whose first events were dropped, as a sequence point */
    uint64_t ts = UINT64_MAX;
    for (size_t i = r->head; i < r->n; i++)
      if (r->q[i].kind == NTR_BLOCK_EVENT && !r->q[i].dropped && r->q[i].min_ts < ts) ts = r->q[i].min_ts;
    size_t n = 12 + 12 * r->ngone;
    uint8_t *sp = ntr__malloc(n);
    if (!sp) return -1;
    uint64_t v = ts == UINT64_MAX || !ts ? 0 : ts - 1;
    for (int k = 0; k < 8; k++) sp[k] = (uint8_t)(v >> (8 * k));
    for (int k = 0; k < 4; k++) sp[8 + k] = (uint8_t)((uint32_t)r->ngone >> (8 * k));
    for (size_t t = 0; t < r->ngone; t++) {
      uint8_t *e = sp + 12 + 12 * t;
      for (int k = 0; k < 8; k++) e[k] = (uint8_t)(r->gone[t].thread >> (8 * k));
      for (int k = 0; k < 4; k++) e[8 + k] = (uint8_t)(r->gone[t].seq >> (8 * k));
    }
    put_object(&w, "SPBlock", 2, 1, sp, n);
    ntr__free(sp);
  }
  for (size_t i = r->head; i < r->n; i++)
    if (!r->q[i].dropped) put_object(&w, block_name(r->q[i].kind), 2, 1, r->q[i].body, r->q[i].n);
  put_u8(&w, 1); /* the end of the stream */
  return 0;
}
