/* roots.c: the GC's handles and its finalizer queue's roots in a core (dnt-core.h), read from the
 * GC's own structures (handletablepriv.h; the runtime's debugger interface compiles the same code).
 *
 * g_HandleTableMap: {buckets, next map, max index}; a map's 10 buckets each {tables, index}: one
 * handle table per heap (server GC: per processor). A table begins with its types' flags (a u32
 * each) then its list of segments. A segment is 64 KB: a packed 4 KB header (for each of its 120
 * blocks: the allocation chain's next block, the handle type, the block of its user data), then
 * 120 blocks of 64 handles. A type's blocks form a ring through the allocation links; its tail
 * block's link is its first. A handle of 0 is free. A dependent handle's secondary is its user
 * data: the same index in the block its header names.
 *
 * The finalize queue (CFinalize) begins with its fill pointers: segment i of the queue ends at
 * fill pointer i; after one segment per generation come the two that are ready for finalization
 * (critical and normal): their slots are roots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define MAP_BUCKETS 10
#define MAX_MAPS 64
#define MAX_SLOTS 1024      /* handle tables per bucket: one per processor at most */
#define MAX_SEGMENTS 65536  /* 4 GB of handles: a longer list is damage */
#define SEGMENT_HEADER 0x1000
#define BLOCKS 120
#define HANDLES_PER_BLOCK 64
#define NO_BLOCK 0xFF
#define MAX_FINALIZE_SLOTS (1u << 26)

/* The header's fields, by the number of handle types the runtime was built with (12, or 13 from
 * .NET 10's cross-reference handles): its per-type arrays move what follows them. */
enum { SH_ALLOCATION = 480, SH_BLOCK_TYPE = 1560, SH_USER_DATA = 1680, SH_TAIL = 1920 };
static uint64_t next_segment_at(int types) { return SH_TAIL + 6u * (unsigned)types; }
static uint64_t segment_list_at(int types) { return (4u * (unsigned)types + 7) & ~7u; }

struct handles {
  dnt_clr_heap *h;
  const dnt_core *c;
  struct dnt_clr_root *v;
  size_t n, cap;
  int oom;
};

static int add(struct handles *w, struct dnt_clr_root r) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 256;
    struct dnt_clr_root *v = realloc(w->v, cap * sizeof *v);
    if (!v) return w->oom = 1, -1;
    w->v = v, w->cap = cap;
  }
  w->v[w->n++] = r;
  return 0;
}

/* The number of handle types of the table at table: the one whose first segment points back at
 * it; 0 when neither (not a handle table). */
static int table_types(const dnt_core *c, uint64_t table) {
  for (int types = 13; types >= 12; types--) {
    uint64_t seg, back;
    if (dnt_core_read_u64(c, table + segment_list_at(types), &seg) == 0 && seg &&
        dnt_core_read_u64(c, seg + next_segment_at(types) + 8, &back) == 0 && back == table)
      return types;
  }
  return 0;
}

/* One block's handles of kind type. */
static int walk_block(struct handles *w, uint64_t seg, const uint8_t *header, unsigned block, int type) {
  uint64_t values[HANDLES_PER_BLOCK], extra[HANDLES_PER_BLOCK] = {0};
  uint64_t base = seg + SEGMENT_HEADER;
  if (dnt_core_read(w->c, base + block * HANDLES_PER_BLOCK * 8ull, values, sizeof values) != 0) return 0;
  unsigned data = header[SH_USER_DATA + block];
  if (type == DNT_CLR_HANDLE_DEPENDENT && data < BLOCKS)
    dnt_core_read(w->c, base + data * HANDLES_PER_BLOCK * 8ull, extra, sizeof extra);
  for (unsigned k = 0; k < HANDLES_PER_BLOCK; k++)
    if (values[k] && add(w, (struct dnt_clr_root){.address = base + (block * HANDLES_PER_BLOCK + k) * 8ull,
                                                  .object = values[k], .dependent = extra[k], .kind = type}) != 0)
      return -1;
  return 0;
}

/* A table's handles: type by type, segment by segment, each type's chain of blocks. */
static int walk_table(struct handles *w, uint64_t table, int types) {
  for (int type = 0; type < types - 1; type++) { /* the last type is the user data's blocks */
    uint64_t seg;
    if (dnt_core_read_u64(w->c, table + segment_list_at(types), &seg) != 0) return 0;
    for (size_t nseg = 0; seg && nseg < MAX_SEGMENTS; nseg++) {
      uint8_t header[SH_TAIL + 6 * 13 + 16];
      if (dnt_core_read(w->c, seg, header, next_segment_at(types) + 8) != 0) break;
      unsigned tail = header[SH_TAIL + type];
      if (tail < BLOCKS) {
        unsigned head = header[SH_ALLOCATION + tail], block = head, steps = 0;
        do {
          if (block >= BLOCKS) break;
          if (header[SH_BLOCK_TYPE + block] == type && walk_block(w, seg, header, block, type) != 0) return -1;
          block = header[SH_ALLOCATION + block];
        } while (block != head && ++steps < BLOCKS);
      }
      seg = dnt__u64(header + next_segment_at(types));
    }
  }
  return 0;
}

int dnt_clr_handles(dnt_clr_heap *h, struct dnt_clr_root **v, size_t *n, char *err, size_t cap) {
  struct handles w = {.h = h, .c = dnt__clr_core(dnt__heap_clr(h))};
  *v = NULL, *n = 0;
  uint64_t map = dnt__heap_handle_map(h);
  int server = dnt_clr_heap_address(h, 0) != 0, tables = 0;
  for (int m = 0; map && m < MAX_MAPS; m++) {
    uint64_t buckets, next;
    if (dnt_core_read_u64(w.c, map, &buckets) != 0 || dnt_core_read_u64(w.c, map + 8, &next) != 0) break;
    for (int i = 0; buckets && i < MAP_BUCKETS; i++) {
      uint64_t bucket, slots;
      if (dnt_core_read_u64(w.c, buckets + 8ull * i, &bucket) != 0 || !bucket ||
          dnt_core_read_u64(w.c, bucket, &slots) != 0 || !slots)
        continue;
      /* one table per processor with server GC: as many as lead to a handle table */
      for (int j = 0; j < (server ? MAX_SLOTS : 1); j++) {
        uint64_t table;
        int types;
        if (dnt_core_read_u64(w.c, slots + 8ull * j, &table) != 0 || !table || !(types = table_types(w.c, table))) break;
        tables++;
        if (walk_table(&w, table, types) != 0) {
          free(w.v);
          snprintf(err, cap, "out of memory");
          return -1;
        }
      }
    }
    map = next;
  }
  if (!tables) {
    free(w.v);
    snprintf(err, cap, "the core does not hold the GC's handle tables (a mini or triage dump holds none), or "
                       "they are in a layout this reader does not know");
    return -1;
  }
  *v = w.v, *n = w.n;
  return 0;
}

int dnt_clr_finalizer_roots(dnt_clr_heap *h, struct dnt_clr_root **v, size_t *n) {
  struct handles w = {.h = h, .c = dnt__clr_core(dnt__heap_clr(h))};
  *v = NULL, *n = 0;
  for (int i = 0; i < dnt_clr_heap_count(h); i++) {
    uint64_t gens, queue = dnt__heap_finalize_queue(h, i, &gens), start, end, mt, size;
    uint32_t flags;
    if (!queue || gens < 1 || dnt_core_read_u64(w.c, queue + 8 * (gens - 1), &start) != 0 ||
        dnt_core_read_u64(w.c, queue + 8 * (gens + 1), &end) != 0 || end < start ||
        (end - start) / 8 > MAX_FINALIZE_SLOTS)
      continue;
    for (uint64_t at = start; at < end; at += 8) {
      uint64_t obj;
      if (dnt_core_read_u64(w.c, at, &obj) != 0) break;
      if (obj && dnt__heap_object(h, obj, &mt, &flags, &size) == 0 &&
          add(&w, (struct dnt_clr_root){.address = at, .object = obj, .kind = DNT_CLR_ROOT_FINALIZER}) != 0) {
        free(w.v);
        return -1;
      }
    }
  }
  *v = w.v, *n = w.n;
  return 0;
}

int dnt_clr_root_is_strong(int kind) {
  switch (kind) {
  case DNT_CLR_HANDLE_STRONG:
  case DNT_CLR_HANDLE_PINNED:
  case DNT_CLR_HANDLE_VARIABLE:
  case DNT_CLR_HANDLE_ASYNC_PINNED:
  case DNT_CLR_HANDLE_SIZED_REF:
  case DNT_CLR_ROOT_FINALIZER:
    return 1;
  default:
    return 0;
  }
}
