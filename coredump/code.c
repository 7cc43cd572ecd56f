/* code.c: which method a code address belongs to (dnt-core.h), as the ExecutionManager contract
 * (version 2) says. The global ExecutionManagerCodeRangeMapAddress is a radix tree over the
 * address: five levels of 256 slots (bits 56..17 of the address, 8 a level; bit 0 of every
 * pointer a tag), its leaves lists of fragments [RangeBegin, RangeEndOpen) naming a
 * RangeSection. A section is a code heap of the JIT (whose nibble map finds where the method
 * holding the address begins; the pointer just before that start is its RealCodeHeader, which
 * names the MethodDesc) or a ReadyToRun image (its sorted RUNTIME_FUNCTIONs find the function;
 * the module's EntryPointToMethodDescMap, a hash map keyed by the function's start, names the
 * MethodDesc). A MethodDesc lives in a chunk just after the chunk's header; the chunk names the
 * MethodTable and the high bits of the method's token, the MethodDesc the low ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define LEVELS 5
#define LEVEL_BITS 8
#define LOW_BITS 17
#define MAX_FRAGMENTS 4096
#define SECTION_CODEHEAP 0x2
#define SECTION_INTERPRETER 0x8
#define RUNTIME_FUNCTION_SIZE 12
#define MAX_BUCKETS (1u << 26)


/* The RangeSection holding ip, 0 when none. */
static uint64_t section_of(const dnt_clr *r, uint64_t ip) {
  uint64_t map, top, begin, end, next, rs_off, p, v;
  if (dnt_clr_global(r, "ExecutionManagerCodeRangeMapAddress", &map) != 0 ||
      clr_field(r, "RangeSectionMap", "TopLevelData", &top) || clr_field(r, "RangeSectionFragment", "RangeBegin", &begin) ||
      clr_field(r, "RangeSectionFragment", "RangeEndOpen", &end) || clr_field(r, "RangeSectionFragment", "RangeSection", &rs_off) ||
      clr_field(r, "RangeSectionFragment", "Next", &next))
    return 0;
  p = map + top;
  for (int level = LEVELS; level >= 1; level--) {
    uint64_t index = (ip >> (LOW_BITS + LEVEL_BITS * (level - 1))) & 0xff;
    if (clr_u64(r, p + 8 * index, &v) != 0 || !(v &= ~1ull)) return 0;
    p = v;
  }
  for (int n = 0; p && n < MAX_FRAGMENTS; n++) {
    uint64_t b, e, s;
    if (clr_u64(r, p + begin, &b) || clr_u64(r, p + end, &e) || clr_u64(r, p + rs_off, &s)) return 0;
    if (b <= ip && ip < e) return s;
    if (clr_u64(r, p + next, &p) != 0) return 0;
    p &= ~1ull;
  }
  return 0;
}

/* The start of the method whose code holds ip in a code heap (the version 2 nibble map: a nibble
 * for every 32 bytes, the 4-byte-aligned offset + 1 of a method starting in them; a word that a
 * method covers whole holds its start instead). 0 when none. */
static uint64_t method_start(const dnt_clr *r, uint64_t heap, uint64_t ip) {
  uint64_t start_off, end_off, base_off, map_off, start, end, base, map;
  if (clr_field(r, "CodeHeapListNode", "StartAddress", &start_off) || clr_field(r, "CodeHeapListNode", "EndAddress", &end_off) ||
      clr_field(r, "CodeHeapListNode", "MapBase", &base_off) || clr_field(r, "CodeHeapListNode", "HeaderMap", &map_off) ||
      clr_u64(r, heap + start_off, &start) || clr_u64(r, heap + end_off, &end) || clr_u64(r, heap + base_off, &base) ||
      clr_u64(r, heap + map_off, &map) || ip < start || ip > end || ip < base)
    return 0;
  uint64_t delta = ip - base, pos = delta >> 5;
  uint32_t offset = (uint32_t)((delta & 31) >> 2) + 1, d, t;
  if (clr_u32(r, map + 4 * (pos >> 3), &d) != 0) return 0;
  if ((d & 0xf) > 8) return base + (d & ~0xfu) + (((d & 0xf) - 9) << 2);
  t = d >> (28 - ((pos & 7) << 2));
  if ((t & 0xf) && (t & 0xf) <= offset) return base + (pos << 5) + (((t & 0xf) - 1) << 2);
  t >>= 4;
  if (t) {
    pos--;
    while (!(t & 0xf)) t >>= 4, pos--;
    return base + (pos << 5) + (((t & 0xf) - 1) << 2);
  }
  if (pos < 8) return 0;
  pos = ((pos >> 3) << 3) - 1;
  if (clr_u32(r, map + 4 * (pos >> 3), &d) != 0 || !d) return 0;
  if ((d & 0xf) > 8) return base + (d & ~0xfu) + (((d & 0xf) - 9) << 2);
  for (t = d; !(t & 0xf);) t >>= 4, pos--;
  return base + (pos << 5) + (((t & 0xf) - 1) << 2);
}

/* A PtrHashMap's value for key (the runtime's HashMap: open addressing over buckets of 4 keys and
 * values, double hashing; the value stored shifted right by one), 0 when none. */
static uint64_t hash_lookup(const dnt_clr *r, uint64_t map, uint64_t key) {
  uint64_t buckets_off, keys_off, values_off, bucket_size, buckets, slots = 4, mask = ~0ull >> 1;
  uint64_t size64;
  if (clr_field(r, "HashMap", "Buckets", &buckets_off) || clr_field(r, "Bucket", "Keys", &keys_off) ||
      clr_field(r, "Bucket", "Values", &values_off) || clr_field(r, "Bucket", "!", &bucket_size) ||
      clr_u64(r, map + buckets_off, &buckets) || !buckets || clr_u64(r, buckets, &size64))
    return 0;
  dnt_clr_global(r, "HashMapSlotsPerBucket", &slots);
  dnt_clr_global(r, "HashMapValueMask", &mask);
  uint32_t size = (uint32_t)size64;
  if (size < 2 || size > MAX_BUCKETS || slots == 0 || slots > 16) return 0;
  if (key <= 1) key += 100;
  uint32_t seed = (uint32_t)(key >> 2), incr = 1 + (((uint32_t)(key >> 5) + 1) % (size - 1));
  for (uint32_t n = 0; n < size; n++) {
    uint64_t b = buckets + bucket_size * (1 + seed % size), k, v, first = 0;
    for (uint64_t s = 0; s < slots; s++) {
      if (clr_u64(r, b + keys_off + 8 * s, &k) || clr_u64(r, b + values_off + 8 * s, &v)) return 0;
      if (s == 0) first = v;
      if (k == key) return (v & mask) << 1;
    }
    if ((first & ~mask) == 0) return 0;
    seed += incr;
  }
  return 0;
}

/* In a ReadyToRun image at base: the function holding ip, and the MethodDesc of the method it
 * (or the nearest function before it: a funclet has none of its own) begins. 0 when none. */
static uint64_t r2r_method(const dnt_clr *r, uint64_t module, uint64_t base, uint64_t ip, uint64_t *start,
                           struct dnt__code_unwind *u) {
  uint64_t info_off, composite_off, n_off, fns_off, thunks_off, map_off, info, composite, fns, thunks;
  uint32_t n;
  if (clr_field(r, "Module", "ReadyToRunInfo", &info_off) || clr_field(r, "ReadyToRunInfo", "CompositeInfo", &composite_off) ||
      clr_field(r, "ReadyToRunInfo", "NumRuntimeFunctions", &n_off) || clr_field(r, "ReadyToRunInfo", "RuntimeFunctions", &fns_off) ||
      clr_field(r, "ReadyToRunInfo", "DelayLoadMethodCallThunks", &thunks_off) ||
      clr_field(r, "ReadyToRunInfo", "EntryPointToMethodDescMap", &map_off) || clr_u64(r, module + info_off, &info) || !info ||
      clr_u64(r, info + composite_off, &composite) || clr_u32(r, info + n_off, &n) || clr_u64(r, info + fns_off, &fns) ||
      clr_u64(r, info + thunks_off, &thunks))
    return 0;
  uint64_t rva = ip - base;
  uint32_t va, vsize;
  if (thunks && clr_u32(r, thunks, &va) == 0 && clr_u32(r, thunks + 4, &vsize) == 0 && va <= rva && rva - va < vsize)
    return 0; /* a call thunk, no method's */
  uint32_t lo = 0, hi = n; /* the last function that begins at or before rva */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2, begin;
    if (clr_u32(r, fns + (uint64_t)mid * RUNTIME_FUNCTION_SIZE, &begin) != 0) return 0;
    if (begin <= rva) lo = mid + 1;
    else hi = mid;
  }
  uint32_t fn[3];
  if (lo == 0 || dnt_core_read(dnt__clr_core(r), fns + (uint64_t)(lo - 1) * RUNTIME_FUNCTION_SIZE, fn, sizeof fn) != 0 ||
      rva >= fn[1])
    return 0;
  u->begin = base + fn[0], u->info = base + fn[2], u->base = base;
  for (uint32_t i = lo; i > 0; i--) {
    uint32_t begin;
    if (clr_u32(r, fns + (uint64_t)(i - 1) * RUNTIME_FUNCTION_SIZE, &begin) != 0) return 0;
    uint64_t md = hash_lookup(r, (composite ? composite : info) + map_off, base + begin);
    uint32_t unwind;
    if (md) { /* the method's own function: its unwind data is followed by the method's GC info */
      if (clr_u32(r, fns + (uint64_t)(i - 1) * RUNTIME_FUNCTION_SIZE + 8, &unwind) == 0) u->method_info = base + unwind;
      return *start = base + begin, md;
    }
    if (lo - i > 64) break; /* a method's funclets are few */
  }
  return 0;
}

int dnt__clr_code(const dnt_clr *r, uint64_t ip, uint64_t *md, uint64_t *start, struct dnt__code_unwind *u) {
  uint64_t flags_off, heap_off, r2r_off, begin_off, del_off, section = section_of(r, ip), next_delete, heap, module,
                                                                                  begin;
  uint32_t flags;
  *md = 0, *start = 0;
  memset(u, 0, sizeof *u);
  if (!section || clr_field(r, "RangeSection", "Flags", &flags_off) || clr_field(r, "RangeSection", "HeapList", &heap_off) ||
      clr_field(r, "RangeSection", "R2RModule", &r2r_off) || clr_field(r, "RangeSection", "RangeBegin", &begin_off) ||
      clr_field(r, "RangeSection", "NextForDelete", &del_off) || clr_u32(r, section + flags_off, &flags) ||
      clr_u64(r, section + heap_off, &heap) || clr_u64(r, section + r2r_off, &module) ||
      clr_u64(r, section + begin_off, &begin) || clr_u64(r, section + del_off, &next_delete) || next_delete ||
      (flags & SECTION_INTERPRETER))
    return -1;
  if (module) {
    *md = r2r_method(r, module, begin, ip, start, u);
    return *md ? 0 : -1;
  }
  if (!(flags & SECTION_CODEHEAP)) return -1; /* stubs */
  uint64_t code = method_start(r, heap, ip), header, last = 0xf, md_off, n_off, infos_off;
  uint32_t n;
  dnt_clr_global(r, "StubCodeBlockLast", &last);
  if (!code || clr_u64(r, code - 8, &header) || header <= last || clr_field(r, "RealCodeHeader", "MethodDesc", &md_off) ||
      clr_u64(r, header + md_off, md) || !*md)
    return -1;
  *start = code;
  u->header = header;
  /* its functions (the body, then funclets), RVAs from the section's start: the last one that
   * begins at or before ip */
  if (clr_field(r, "RealCodeHeader", "NumUnwindInfos", &n_off) == 0 &&
      clr_field(r, "RealCodeHeader", "UnwindInfos", &infos_off) == 0 && clr_u32(r, header + n_off, &n) == 0 && n < 4096)
    for (uint32_t i = 0; i < n; i++) {
      uint32_t fn[3];
      if (dnt_core_read(dnt__clr_core(r), header + infos_off + (uint64_t)i * RUNTIME_FUNCTION_SIZE, fn, sizeof fn) != 0)
        break;
      if (begin + fn[0] <= ip && ip < begin + fn[1]) u->begin = begin + fn[0], u->info = begin + fn[2], u->base = begin;
    }
  return 0;
}

int dnt_clr_code_method(const dnt_clr *r, uint64_t ip, uint64_t *md, uint64_t *start) {
  struct dnt__code_unwind u;
  return dnt__clr_code(r, ip, md, start, &u);
}

/* ---- MethodDescs ---- */

int dnt_clr_method_desc(const dnt_clr *r, uint64_t md, uint64_t *mt, uint32_t *token) {
  uint64_t index_off, rem_off, chunk_size, chunk_mt_off, range_off, align = 8, bits = 12;
  uint8_t index;
  uint16_t rem, range;
  const dnt_core *c = dnt__clr_core(r);
  dnt_clr_global(r, "MethodDescAlignment", &align);
  dnt_clr_global(r, "MethodDescTokenRemainderBitCount", &bits);
  if (clr_field(r, "MethodDesc", "ChunkIndex", &index_off) || clr_field(r, "MethodDesc", "Flags3AndTokenRemainder", &rem_off) ||
      clr_field(r, "MethodDescChunk", "!", &chunk_size) || clr_field(r, "MethodDescChunk", "MethodTable", &chunk_mt_off) ||
      clr_field(r, "MethodDescChunk", "FlagsAndTokenRange", &range_off) || bits == 0 || bits > 23 ||
      dnt_core_read(c, md + index_off, &index, 1) != 0 || dnt_core_read(c, md + rem_off, &rem, 2) != 0)
    return -1;
  uint64_t chunk = md - chunk_size - (uint64_t)index * align;
  if (clr_u64(r, chunk + chunk_mt_off, mt) != 0 || dnt_core_read(c, chunk + range_off, &range, 2) != 0 || !*mt)
    return -1;
  *token = 0x06000000u | ((uint32_t)(range & (0xffffffu >> bits)) << bits) | (rem & (0xffffffu >> (24 - bits)));
  return 0;
}
