/* Events held until the next sequence point and handled in time order: analyze-int.h. */
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"

void dnt__held_init(struct dnt__held *h, size_t size, size_t max) {
  memset(h, 0, sizeof *h);
  h->size = size;
  h->max = max;
}

void dnt__held_release(struct dnt__held *h) {
  free(h->v);
  h->v = NULL;
  h->n = h->cap = 0;
}

void *dnt__held_slot(struct dnt__held *h, uint64_t ts, dnt__held_fn handle, void *ud) {
  if (h->n == h->cap) {
    if (h->n >= h->max && dnt__held_flush(h, handle, ud)) return NULL;
    if (h->n == h->cap) {
      size_t cap = h->cap ? h->cap * 2 : 256;
      void *v = realloc(h->v, cap * h->size);
      if (!v) return NULL;
      h->v = v;
      h->cap = cap;
    }
  }
  struct dnt__held_key *k = (void *)((char *)h->v + h->n * h->size);
  memset(k, 0, h->size);
  k->ts = ts;
  k->order = h->order++;
  return k;
}

static int by_time(const void *x, const void *y) {
  const struct dnt__held_key *a = x, *b = y;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return (a->order > b->order) - (a->order < b->order);
}

int dnt__held_flush(struct dnt__held *h, dnt__held_fn handle, void *ud) {
  if (h->n == 0) return 0;
  qsort(h->v, h->n, h->size, by_time);
  int rc = 0;
  for (size_t i = 0; i < h->n && rc == 0; i++) rc = handle(ud, (char *)h->v + i * h->size);
  h->n = 0;
  return rc;
}
