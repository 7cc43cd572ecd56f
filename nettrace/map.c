/* map.c: u64 -> u64 open-addressing hash map with linear probing.
 * Every table the format defines (metadata, stacks, threads, label lists) is keyed by an id
 * read from the wire, so ids can be sparse or hostile; a hash keeps lookups O(1) without
 * sizing anything from the id itself. A value of 0 marks an empty slot. */
#include "ntr-int.h"

static inline size_t hash64(uint64_t k) {
  /* A multiply-xorshift mix (splitmix64 finaliser): sequential ids spread over the table. */
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}

void ntr__map_release(ntr__map *m) {
  ntr__free(m->keys);
  ntr__free(m->vals);
  memset(m, 0, sizeof(*m));
}

void ntr__map_clear(ntr__map *m) {
  if (m->cap)
    memset(m->vals, 0, m->cap * sizeof(*m->vals));
  m->len = 0;
}

uint64_t *ntr__map_find(const ntr__map *m, uint64_t key) {
  size_t mask, i;
  if (!m->len)
    return NULL;
  mask = m->cap - 1;
  for (i = hash64(key) & mask;; i = (i + 1) & mask) {
    if (!m->vals[i])
      return NULL;
    if (m->keys[i] == key)
      return &m->vals[i];
  }
}

static void raw_put(uint64_t *keys, uint64_t *vals, size_t cap, uint64_t key, uint64_t val) {
  size_t mask = cap - 1, i;
  for (i = hash64(key) & mask; vals[i] && keys[i] != key; i = (i + 1) & mask)
    ;
  keys[i] = key;
  vals[i] = val;
}

static int grow(ntr__map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 16, i;
  uint64_t *nk = ntr__malloc(ncap * sizeof(*nk));
  uint64_t *nv = ntr__calloc(ncap, sizeof(*nv));
  if (!nk || !nv) {
    ntr__free(nk);
    ntr__free(nv);
    return NTR_ENOMEM;
  }
  for (i = 0; i < m->cap; i++)
    if (m->vals[i])
      raw_put(nk, nv, ncap, m->keys[i], m->vals[i]);
  ntr__free(m->keys);
  ntr__free(m->vals);
  m->keys = nk;
  m->vals = nv;
  m->cap = ncap;
  return 0;
}

size_t ntr__map_bytes(size_t len) {
  size_t cap = 16;
  if (!len)
    return 0;
  /* The rule ntr__map_put grows by: a load of at most 1/2. */
  while (len * 2 > cap)
    cap *= 2;
  return cap * 2 * sizeof(uint64_t);
}

int ntr__map_put(ntr__map *m, uint64_t key, uint64_t val) {
  uint64_t *slot = ntr__map_find(m, key);
  if (slot) {
    *slot = val;
    return 0;
  }
  /* Keep the load under 1/2 so probe runs stay short. */
  if ((m->len + 1) * 2 > m->cap && grow(m) < 0)
    return NTR_ENOMEM;
  raw_put(m->keys, m->vals, m->cap, key, val);
  m->len++;
  return 0;
}

uint64_t ntr__map_del(ntr__map *m, uint64_t key) {
  uint64_t *slot = ntr__map_find(m, key), old;
  size_t mask, i, j;
  if (!slot)
    return 0;
  old = *slot;
  mask = m->cap - 1;
  i = (size_t)(slot - m->vals);
  m->vals[i] = 0;
  m->len--;
  /* Backward-shift deletion: re-place the rest of the probe run so finds never stop early. */
  for (j = (i + 1) & mask; m->vals[j]; j = (j + 1) & mask) {
    uint64_t k = m->keys[j], v = m->vals[j];
    m->vals[j] = 0;
    raw_put(m->keys, m->vals, m->cap, k, v);
  }
  return old;
}
