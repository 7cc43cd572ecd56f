/* heap.c: the GC heap of a core (dnt-core.h). .NET 10's data contracts have no GC contract yet
 * (it comes with .NET 11), so the heap is found through the GC's own interface to debuggers:
 * GcDacVars, a strictly versioned struct (gcinterface.dac.h) whose address is in the runtime's
 * exported g_dacTable (the addresses of its debugger-visible variables; the GC's is entry 19 in
 * .NET 10, and any entry that does not lead to a GcDacVars of a known major version is refused):
 *
 *   u8 major, u8 minor, size_t generation_size, size_t total_generation_count, then pointers to
 *   the GC's variables in gcinterface.dacvars.def's order (the ones read here named below).
 *
 * A heap (one, or one per core with server GC) has a generation table; each generation a list of
 * regions (dac_heap_segment: allocated, committed, reserved, used, mem, flags, next, ...) whose
 * objects run from mem to allocated, or to the heap's alloc_allocated for its ephemeral region.
 * An object: its MethodTable (low bits are flags), then for arrays and strings a u32 count; its
 * size is BaseSize plus the count times the component size, and the next object is at that size
 * aligned to 8. The allocation contexts (each thread's, and each heap's generation 0's) are
 * unfilled gaps: the walk steps over them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define GC_TABLE_INDEX 19     /* g_dacTable's entry for g_gcDacGlobals in .NET 10 */
#define GC_MAJOR 2            /* the GcDacVars layout read here */
#define MAX_GENERATIONS 8
#define MAX_HEAPS 1024
#define MAX_REGIONS (1u << 20) /* 4 TB of 4 MB regions; a list longer than that is damage */
#define MAX_GAPS (1u << 20)
#define MT_HAS_COMPONENT_SIZE 0x80000000u
#define MIN_OBJECT_SIZE 24
#define FORGET_EVERY (16u << 20)
#define MIN_BASE_SIZE 16 /* a String's is 22: its header, MethodTable, length and terminator */

/* GcDacVars' pointers, by their index after its four leading values (gcinterface.dacvars.def). */
enum {
  V_GENERATION_TABLE = 3, V_EPHEMERAL_SEGMENT = 7, V_ALLOC_ALLOCATED = 12, V_FINALIZE_QUEUE = 15, V_N_HEAPS = 19,
  V_G_HEAPS = 20, V_GC_STRUCTURES_INVALID = 21, V_HANDLE_TABLE_MAP = 26, V_GC_HEAP_FIELD_OFFSETS = 27, V_GENERATION_FIELD_OFFSETS = 28, V_COUNT = 29,
  V_DYNAMIC_ADAPTATION = 37, V_COUNT_2_4 = 38 /* from version 2.4: DATAS's mode (server GC's) */
};
/* gc_heap_field_offsets' indexes (dac_gcheap_fields.h), and generation_field_offsets'. */
enum { H_ALLOC_ALLOCATED = 0, H_EPHEMERAL_SEGMENT = 1, H_FINALIZE_QUEUE = 2, H_GENERATION_TABLE = 18, H_COUNT = 19 };
enum { G_ALLOCATION_CONTEXT = 0, G_START_SEGMENT = 1 };
/* dac_heap_segment's fields */
enum { S_ALLOCATED = 0, S_COMMITTED = 8, S_MEM = 32, S_FLAGS = 40, S_NEXT = 48, S_SIZE = 56 };
#define SEGMENT_READONLY 1 /* a frozen segment (string literals and other objects never collected) */

struct gap {
  uint64_t start, end;
};

struct mt_info {
  uint64_t mt;
  uint32_t base_size, flags;
  int readable;
};

struct dnt_clr_heap {
  const dnt_clr *r;
  const dnt_core *c;
  struct dnt_clr_region *regions;
  size_t nregions;
  struct gap *gaps; /* allocation contexts, by start */
  size_t ngaps;
  uint64_t unmask, num_components, free_mt;
  int heaps, valid;
  int datas;             /* DATAS's mode, -1 when the GC does not say */
  uint64_t *addresses;   /* each heap's gc_heap (server GC), else NULL */
  uint64_t *finalize_queues; /* each heap's CFinalize (0 where the core does not say) */
  uint64_t handle_map, gen_count; /* the GC's g_HandleTableMap; its count of generations */
  struct mt_info *mts; /* the MethodTables met, open addressing */
  size_t nmts, capmts;
};

static int fail(char *err, size_t cap, const char *what) {
  snprintf(err, cap, "%s", what);
  return -1;
}

/* GcDacVars at at, if it looks like one this reader knows: 0, or -1. */
static int gc_vars_at(const dnt_core *c, uint64_t at, uint64_t v[V_COUNT_2_4], uint64_t *gen_size, uint64_t *gen_count) {
  uint8_t head[24];
  if (!at || dnt_core_read(c, at, head, sizeof head) != 0 || head[0] != GC_MAJOR) return -1;
  *gen_size = dnt__u64(head + 8), *gen_count = dnt__u64(head + 16);
  if (*gen_size < 16 || *gen_size > 4096 || *gen_count < 3 || *gen_count > MAX_GENERATIONS) return -1;
  memset(v, 0, V_COUNT_2_4 * sizeof *v);
  for (int i = 0; i < (head[1] >= 4 ? V_COUNT_2_4 : V_COUNT); i++)
    if (dnt_core_read_u64(c, at + 24 + 8ull * i, &v[i]) != 0) return -1;
  /* workstation GC has one generation table; server GC one in each of its heaps */
  return v[V_GENERATION_FIELD_OFFSETS] && (v[V_GENERATION_TABLE] || (v[V_N_HEAPS] && v[V_G_HEAPS])) ? 0 : -1;
}

/* The GC's variables: entry 19 of g_dacTable, or failing that the one entry of it that leads to a
 * GcDacVars this reader knows. */
static int find_gc_vars(const dnt_clr *r, uint64_t v[V_COUNT_2_4], uint64_t *gen_size, uint64_t *gen_count, char *err,
                        size_t cap) {
  const dnt_core *c = dnt__clr_core(r);
  uint64_t size, table = dnt__clr_dac_table(r, &size), var, at;
  if (!table) return fail(err, cap, "the runtime's library exports no g_dacTable: its GC heap cannot be found");
  if (dnt_core_read_u64(c, table + 8 * GC_TABLE_INDEX, &var) == 0 && dnt_core_read_u64(c, var, &at) == 0 &&
      gc_vars_at(c, at, v, gen_size, gen_count) == 0)
    return 0;
  for (uint64_t i = 0; i < size / 8 && i < 4096; i++)
    if (dnt_core_read_u64(c, table + 8 * i, &var) == 0 && dnt_core_read_u64(c, var, &at) == 0 && gc_vars_at(c, at, v, gen_size, gen_count) == 0)
      return 0;
  return fail(err, cap, "the core does not hold the GC's variables in a layout this reader knows (GcDacVars 2.x); a "
                        "mini or triage dump holds no heap");
}

static int add_gap(struct dnt_clr_heap *h, uint64_t start, uint64_t end) {
  if (!start || end <= start) return 0;
  if (h->ngaps == MAX_GAPS) return -1;
  if ((h->ngaps & (h->ngaps - 1)) == 0) {
    struct gap *g = realloc(h->gaps, (h->ngaps ? h->ngaps * 2 : 16) * sizeof *g);
    if (!g) return -1;
    h->gaps = g;
  }
  h->gaps[h->ngaps++] = (struct gap){start, end};
  return 0;
}

static int add_region(struct dnt_clr_heap *h, struct dnt_clr_region reg) {
  if (h->nregions == MAX_REGIONS) return -1;
  if ((h->nregions & (h->nregions - 1)) == 0) {
    struct dnt_clr_region *v = realloc(h->regions, (h->nregions ? h->nregions * 2 : 64) * sizeof *v);
    if (!v) return -1;
    h->regions = v;
  }
  h->regions[h->nregions++] = reg;
  return 0;
}

/* One heap's generations: their regions and their allocation contexts. gen_table is the address
 * of its generation table; ephemeral the region that ends at alloc_allocated. */
static int read_generations(struct dnt_clr_heap *h, int heap, uint64_t gen_table, uint64_t gen_size, uint64_t gen_count,
                            const int32_t gen_fields[2], uint64_t ephemeral, uint64_t alloc_allocated, char *err,
                            size_t cap) {
  for (uint64_t g = 0; g < gen_count; g++) {
    uint64_t gen = gen_table + g * gen_size, seg, ctx_ptr, ctx_limit;
    if (g == 0 && gen_fields[G_ALLOCATION_CONTEXT] >= 0 && /* the heap's own allocation context */
        dnt_core_read_u64(h->c, gen + (uint64_t)gen_fields[G_ALLOCATION_CONTEXT], &ctx_ptr) == 0 &&
        dnt_core_read_u64(h->c, gen + (uint64_t)gen_fields[G_ALLOCATION_CONTEXT] + 8, &ctx_limit) == 0 &&
        add_gap(h, ctx_ptr, ctx_limit) != 0)
      return fail(err, cap, "out of memory");
    if (dnt_core_read_u64(h->c, gen + (uint64_t)gen_fields[G_START_SEGMENT], &seg) != 0)
      return fail(err, cap, "the core does not hold the GC's generation table");
    for (size_t n = 0; seg; n++) {
      uint8_t s[S_SIZE];
      if (n == MAX_REGIONS || h->nregions == MAX_REGIONS)
        return fail(err, cap, "the GC's list of regions does not end (it is damaged)");
      if (dnt_core_read(h->c, seg, s, sizeof s) != 0)
        return fail(err, cap, "the core does not hold the GC's list of regions (a triage dump holds none of the heap), "
                                "or the list is damaged");
      struct dnt_clr_region reg = {.start = dnt__u64(s + S_MEM), .end = dnt__u64(s + S_ALLOCATED),
                                   .committed = dnt__u64(s + S_COMMITTED),
                                   .descriptor = seg, .generation = (int)g, .heap = heap,
                                   .frozen = (dnt__u64(s + S_FLAGS) & SEGMENT_READONLY) != 0};
      if (seg == ephemeral) reg.end = alloc_allocated;
      if (reg.end < reg.start) reg.end = reg.start; /* listed (eeheap), walked empty */
      if (add_region(h, reg) != 0) return fail(err, cap, "out of memory");
      seg = dnt__u64(s + S_NEXT);
    }
  }
  return 0;
}

/* dotnet-dump's order, which dumpheap's ties keep: by address, whatever the heap (checked on
 * workstation and server GC cores, with a frozen segment whose record is malloc'ed below the
 * regions' and whose objects lie above them: it comes last). */
static int walk_order(const void *a, const void *b) {
  uint64_t x = ((const struct dnt_clr_region *)a)->start, y = ((const struct dnt_clr_region *)b)->start;
  return x < y ? -1 : x > y;
}

static int gap_by_start(const void *a, const void *b) {
  uint64_t x = ((const struct gap *)a)->start, y = ((const struct gap *)b)->start;
  return x < y ? -1 : x > y;
}

static int read_heaps(struct dnt_clr_heap *h, char *err, size_t cap) {
  uint64_t v[V_COUNT_2_4], gen_size, gen_count;
  if (find_gc_vars(h->r, v, &gen_size, &gen_count, err, cap) != 0) return -1;
  h->handle_map = v[V_HANDLE_TABLE_MAP], h->gen_count = gen_count;
  int32_t gen_fields[2];
  if (dnt_core_read(h->c, v[V_GENERATION_FIELD_OFFSETS], gen_fields, sizeof gen_fields) != 0 || gen_fields[1] < 0 ||
      (uint64_t)gen_fields[1] + 8 > gen_size || gen_fields[0] + 16 > (int64_t)gen_size)
    return fail(err, cap, "the GC's generation layout is not in the core");
  int32_t invalid = 0, datas;
  h->datas = v[V_DYNAMIC_ADAPTATION] && dnt_core_read(h->c, v[V_DYNAMIC_ADAPTATION], &datas, 4) == 0 ? datas : -1;
  h->valid = !v[V_GC_STRUCTURES_INVALID] || (dnt_core_read(h->c, v[V_GC_STRUCTURES_INVALID], &invalid, 4) == 0 && !invalid);
  uint32_t n_heaps = 0;
  if (v[V_N_HEAPS] && v[V_G_HEAPS]) dnt_core_read_u32(h->c, v[V_N_HEAPS], &n_heaps);
  if (n_heaps == 0) { /* workstation GC: the heap's fields are the GC's variables */
    uint64_t ephemeral = 0, alloc_allocated = 0;
    if (dnt_core_read_u64(h->c, v[V_EPHEMERAL_SEGMENT], &ephemeral) || dnt_core_read_u64(h->c, v[V_ALLOC_ALLOCATED], &alloc_allocated))
      return fail(err, cap, "the core does not hold the GC's ephemeral region");
    h->heaps = 1;
    if (!(h->finalize_queues = calloc(1, sizeof *h->finalize_queues))) return fail(err, cap, "out of memory");
    dnt_core_read_u64(h->c, v[V_FINALIZE_QUEUE], &h->finalize_queues[0]);
    return read_generations(h, 0, v[V_GENERATION_TABLE], gen_size, gen_count, gen_fields, ephemeral, alloc_allocated,
                            err, cap);
  }
  /* server GC: one gc_heap per core, its fields where gc_heap_field_offsets says */
  int32_t heap_fields[H_COUNT];
  uint64_t heaps;
  if (n_heaps > MAX_HEAPS || !v[V_GC_HEAP_FIELD_OFFSETS] ||
      dnt_core_read(h->c, v[V_GC_HEAP_FIELD_OFFSETS], heap_fields, sizeof heap_fields) != 0 ||
      heap_fields[H_ALLOC_ALLOCATED] < 0 || heap_fields[H_EPHEMERAL_SEGMENT] < 0 || heap_fields[H_GENERATION_TABLE] < 0 ||
      dnt_core_read_u64(h->c, v[V_G_HEAPS], &heaps) != 0)
    return fail(err, cap, "the core does not hold the server GC's heaps");
  h->heaps = (int)n_heaps;
  if (!(h->addresses = calloc(n_heaps, sizeof *h->addresses)) ||
      !(h->finalize_queues = calloc(n_heaps, sizeof *h->finalize_queues)))
    return fail(err, cap, "out of memory");
  for (uint32_t i = 0; i < n_heaps; i++) {
    uint64_t heap, ephemeral, alloc_allocated;
    if (dnt_core_read_u64(h->c, heaps + 8ull * i, &heap) || dnt_core_read_u64(h->c, heap + (uint64_t)heap_fields[H_EPHEMERAL_SEGMENT], &ephemeral) ||
        dnt_core_read_u64(h->c, heap + (uint64_t)heap_fields[H_ALLOC_ALLOCATED], &alloc_allocated))
      return fail(err, cap, "the core does not hold the server GC's heaps");
    h->addresses[i] = heap;
    if (heap_fields[H_FINALIZE_QUEUE] >= 0)
      dnt_core_read_u64(h->c, heap + (uint64_t)heap_fields[H_FINALIZE_QUEUE], &h->finalize_queues[i]);
    if (read_generations(h, (int)i, heap + (uint64_t)heap_fields[H_GENERATION_TABLE], gen_size, gen_count, gen_fields,
                         ephemeral, alloc_allocated, err, cap) != 0)
      return -1;
  }
  return 0;
}

int dnt_clr_heap_open(dnt_clr_heap **out, const dnt_clr *r, char *err, size_t cap) {
  *out = NULL;
  struct dnt_clr_heap *h = calloc(1, sizeof *h);
  if (!h) return fail(err, cap, "out of memory");
  h->r = r, h->c = dnt__clr_core(r), h->unmask = 7;
  dnt_clr_global(r, "ObjectToMethodTableUnmask", &h->unmask);
  uint64_t at;
  if (dnt_clr_global(r, "FreeObjectMethodTable", &at) == 0) dnt_core_read_u64(h->c, at, &h->free_mt);
  int rc = dnt_clr_field(r, "Array", "m_NumComponents", &h->num_components) != 0
               ? fail(err, cap, "the runtime's descriptor does not place an array's length")
               : read_heaps(h, err, cap);
  struct dnt_clr_threads ts;
  if (!rc && dnt_clr_threads_read(r, &ts, err, cap) != 0) rc = -1;
  if (!rc) {
    for (size_t i = 0; i < ts.n && !rc; i++)
      if (add_gap(h, ts.v[i].alloc_ptr, ts.v[i].alloc_limit) != 0) rc = fail(err, cap, "out of memory");
    dnt_clr_threads_release(&ts);
  }
  if (rc) {
    dnt_clr_heap_close(h);
    return -1;
  }
  qsort(h->regions, h->nregions, sizeof *h->regions, walk_order);
  qsort(h->gaps, h->ngaps, sizeof *h->gaps, gap_by_start);
  *out = h;
  return 0;
}

void dnt_clr_heap_close(dnt_clr_heap *h) {
  if (!h) return;
  free(h->regions);
  free(h->addresses);
  free(h->finalize_queues);
  free(h->gaps);
  free(h->mts);
  free(h);
}

size_t dnt_clr_heap_regions(const dnt_clr_heap *h, const struct dnt_clr_region **v) {
  *v = h->regions;
  return h->nregions;
}

int dnt_clr_heap_count(const dnt_clr_heap *h) { return h->heaps; }
int dnt_clr_heap_valid(const dnt_clr_heap *h) { return h->valid; }
int dnt_clr_heap_datas(const dnt_clr_heap *h) { return h->datas; }
uint64_t dnt_clr_heap_address(const dnt_clr_heap *h, int i) { return h->addresses && i >= 0 && i < h->heaps ? h->addresses[i] : 0; }

const dnt_clr *dnt__heap_clr(const dnt_clr_heap *h) { return h->r; }
uint64_t dnt__heap_handle_map(const dnt_clr_heap *h) { return h->handle_map; }
uint64_t dnt__heap_finalize_queue(const dnt_clr_heap *h, int i, uint64_t *gen_count) {
  *gen_count = h->gen_count;
  return h->finalize_queues && i >= 0 && i < h->heaps ? h->finalize_queues[i] : 0;
}

/* A MethodTable is valid when its class's record points back at its canonical MethodTable (the
 * check the runtime's debugger interface makes before it describes one); the free-space type has
 * no class. */
static int valid_mt(const struct dnt_clr_heap *h, uint64_t mt, uint32_t base_size) {
  uint64_t canon_off, class_mt_off, v, canon, klass, back;
  if (base_size < MIN_BASE_SIZE) return 0;
  if (mt == h->free_mt) return 1;
  if (dnt_clr_field(h->r, "MethodTable", "EEClassOrCanonMT", &canon_off) != 0 ||
      dnt_clr_field(h->r, "EEClass", "MethodTable", &class_mt_off) != 0 || dnt_core_read_u64(h->c, mt + canon_off, &v) != 0)
    return 0;
  canon = mt;
  if (v & 1) { /* not canonical: the canonical one holds the class */
    canon = v & ~1ull;
    if (dnt_core_read_u64(h->c, canon + canon_off, &v) != 0 || (v & 1)) return 0;
  }
  klass = v;
  return klass && dnt_core_read_u64(h->c, klass + class_mt_off, &back) == 0 && back == canon;
}

/* What the walk needs of a MethodTable, read once. NULL when out of memory. */
static const struct mt_info *mt_info(struct dnt_clr_heap *h, uint64_t mt) {
  if (h->nmts * 2 >= h->capmts) {
    size_t cap = h->capmts ? h->capmts * 2 : 1024;
    struct mt_info *v = calloc(cap, sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < h->capmts; i++)
      if (h->mts[i].mt) {
        size_t k = (size_t)(h->mts[i].mt >> 3) * 0x9E3779B97F4A7C15ull & (cap - 1);
        while (v[k].mt) k = (k + 1) & (cap - 1);
        v[k] = h->mts[i];
      }
    free(h->mts);
    h->mts = v, h->capmts = cap;
  }
  size_t k = (size_t)((mt >> 3) * 0x9E3779B97F4A7C15ull) & (h->capmts - 1);
  while (h->mts[k].mt && h->mts[k].mt != mt) k = (k + 1) & (h->capmts - 1);
  struct mt_info *m = &h->mts[k];
  if (!m->mt) {
    uint8_t b[8] = {0};
    m->mt = mt, h->nmts++;
    m->readable = dnt_core_read(h->c, mt, b, sizeof b) == 0;
    m->flags = (uint32_t)dnt__u64(b), m->base_size = (uint32_t)(dnt__u64(b) >> 32);
    m->readable = m->readable && valid_mt(h, mt, m->base_size);
  }
  return m;
}

/* The allocation context that begins at at, or NULL. */
static const struct gap *gap_at(const struct dnt_clr_heap *h, uint64_t at) {
  size_t lo = 0, hi = h->ngaps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (h->gaps[mid].start < at) lo = mid + 1;
    else hi = mid;
  }
  return lo < h->ngaps && h->gaps[lo].start == at ? &h->gaps[lo] : NULL;
}

/* Past the allocation contexts that begin at at: an unfilled context keeps room after its limit
 * for the free object that fills it when it is given up. 0 when that leaves the region. */
static uint64_t past_contexts(const struct dnt_clr_heap *h, const struct dnt_clr_region *reg, uint64_t at) {
  for (const struct gap *g; (g = gap_at(h, at));) {
    uint64_t next = g->end + MIN_OBJECT_SIZE;
    if (next <= at || next >= reg->end) return 0;
    at = next;
  }
  return at;
}

/* After something not an object at at: the next word that holds a valid MethodTable (stepping
 * over allocation contexts), 0 when none in the region. */
static uint64_t next_valid(struct dnt_clr_heap *h, const struct dnt_clr_region *reg, uint64_t at, int skips) {
  for (;;) {
    const struct gap *g = skips ? gap_at(h, at) : NULL;
    at = g ? g->end + MIN_OBJECT_SIZE : at + 8;
    uint64_t word;
    if (at >= reg->end || dnt_core_read_u64(h->c, at, &word) != 0) return 0;
    uint64_t mt = word & ~1ull;
    if (mt > 0x1000) {
      const struct mt_info *m = mt_info(h, mt & ~h->unmask);
      if (m && m->readable) return at;
    }
  }
}

int dnt__heap_object(dnt_clr_heap *h, uint64_t obj, uint64_t *mt, uint32_t *flags, uint64_t *size) {
  uint64_t word;
  uint32_t count = 0;
  if (!obj || dnt_core_read_u64(h->c, obj, &word) != 0 || !(word & ~h->unmask)) return -1;
  const struct mt_info *m = mt_info(h, word & ~h->unmask);
  if (!m || !m->readable || ((m->flags & MT_HAS_COMPONENT_SIZE) && dnt_core_read_u32(h->c, obj + h->num_components, &count) != 0))
    return -1;
  *mt = m->mt, *flags = m->flags;
  *size = m->base_size + (m->flags & MT_HAS_COMPONENT_SIZE ? (uint64_t)(m->flags & 0xffff) * count : 0);
  if (*size < MIN_OBJECT_SIZE) *size = MIN_OBJECT_SIZE;
  return 0;
}

int dnt_clr_heap_object(dnt_clr_heap *h, uint64_t obj, uint64_t *mt, uint64_t *size) {
  uint32_t flags;
  return dnt__heap_object(h, obj, mt, &flags, size);
}

/* One region's objects: 0, 1 when fn stopped the walk, -1 out of memory. */
static int walk_region(dnt_clr_heap *h, const struct dnt_clr_region *reg, dnt_clr_object_fn fn, void *ud,
                       struct dnt_clr_walk *w) {
  int skips = reg->generation != 3 && !reg->frozen; /* no allocation context in the LOH or a frozen one */
  uint64_t forgotten = reg->start;
  for (uint64_t at = reg->start; at && at < reg->end;) {
    uint64_t word;
    if (dnt_core_read_u64(h->c, at, &word) != 0) { /* the core lacks the rest of the region */
      w->missing++;
      break;
    }
    uint64_t mt = word & ~h->unmask;
    const struct mt_info *m = mt ? mt_info(h, mt) : NULL;
    if (mt && !m) return -1;
    struct dnt_clr_object o = {.address = at, .mt = mt, .region = reg};
    uint32_t count = 0;
    if (m && m->readable && (!(m->flags & MT_HAS_COMPONENT_SIZE) ||
                             dnt_core_read_u32(h->c, at + h->num_components, &count) == 0)) {
      o.valid = 1;
      o.size = m->base_size + (m->flags & MT_HAS_COMPONENT_SIZE ? (uint64_t)(m->flags & 0xffff) * count : 0);
      if (o.size < MIN_OBJECT_SIZE) o.size = MIN_OBJECT_SIZE; /* "" is 22 bytes but takes 24, as SOS counts */
    } else { /* not an object: said, then the next one looked for */
      o.mt = word;
      w->invalid++;
    }
    if (fn(ud, &o)) return 1;
    if (!o.valid) {
      at = next_valid(h, reg, at, skips);
      continue;
    }
    uint64_t next = at + ((o.size + 7) & ~7ull);
    if (next <= at) break; /* a size past the end of memory: damage */
    at = skips ? past_contexts(h, reg, next) : next;
    if (at > forgotten && at - forgotten >= FORGET_EVERY) { /* what is walked need not stay in memory */
      dnt_core_forget(h->c, forgotten, at - forgotten);
      forgotten = at;
    }
  }
  if (forgotten < reg->end) dnt_core_forget(h->c, forgotten, reg->end - forgotten);
  return 0;
}

int dnt_clr_heap_walk(dnt_clr_heap *h, dnt_clr_object_fn fn, void *ud, struct dnt_clr_walk *w) {
  memset(w, 0, sizeof *w);
  for (size_t i = 0; i < h->nregions; i++) {
    int rc = walk_region(h, &h->regions[i], fn, ud, w);
    if (rc) return rc < 0 ? -1 : 0;
  }
  return 0;
}

struct containing {
  uint64_t addr, found;
};

static int stop_past(void *ud, const struct dnt_clr_object *o) {
  struct containing *c = ud;
  if (o->address > c->addr) return 1;
  if (o->valid) c->found = o->address;
  return 0;
}

int dnt_clr_heap_object_before(dnt_clr_heap *h, uint64_t addr, uint64_t *obj) {
  struct dnt_clr_walk w;
  memset(&w, 0, sizeof w);
  for (size_t i = 0; i < h->nregions; i++) {
    const struct dnt_clr_region *reg = &h->regions[i];
    if (addr < reg->start || addr >= reg->end) continue;
    struct containing c = {addr, 0};
    if (walk_region(h, reg, stop_past, &c, &w) < 0) return -1;
    *obj = c.found;
    return c.found ? 0 : -1;
  }
  return -1;
}

/* ---- dumpheap -stat ---- */

struct stat_walk {
  struct dnt_clr_type_stat *v;
  size_t n, cap;
  size_t *index; /* open addressing over v, by MethodTable: v's position + 1, 0 empty */
  size_t icap;
  int (*keep)(void *ud, const struct dnt_clr_object *o);
  void *ud;
  int oom;
};

static size_t slot_of(const struct stat_walk *w, uint64_t mt) {
  size_t k = (size_t)((mt >> 3) * 0x9E3779B97F4A7C15ull) & (w->icap - 1);
  while (w->index[k] && w->v[w->index[k] - 1].mt != mt) k = (k + 1) & (w->icap - 1);
  return k;
}

static int count_object(void *ud, const struct dnt_clr_object *o) {
  struct stat_walk *w = ud;
  uint64_t mt = o->mt;
  if (w->keep && !w->keep(w->ud, o)) return 0;
  if (w->n * 2 >= w->icap) { /* grow the index (and rebuild it) */
    size_t icap = w->icap ? w->icap * 2 : 1024;
    size_t *index = calloc(icap, sizeof *index);
    if (!index) return w->oom = 1;
    free(w->index);
    w->index = index, w->icap = icap;
    for (size_t i = 0; i < w->n; i++) w->index[slot_of(w, w->v[i].mt)] = i + 1;
  }
  size_t k = slot_of(w, mt);
  if (!w->index[k]) {
    if (w->n == w->cap) {
      size_t cap = w->cap ? w->cap * 2 : 256;
      struct dnt_clr_type_stat *v = realloc(w->v, cap * sizeof *v);
      if (!v) return w->oom = 1;
      w->v = v, w->cap = cap;
    }
    w->v[w->n++] = (struct dnt_clr_type_stat){mt, 0, 0};
    w->index[k] = w->n;
  }
  struct dnt_clr_type_stat *s = &w->v[w->index[k] - 1];
  s->count++, s->size += o->size;
  return 0;
}

int dnt_clr_heap_stat(dnt_clr_heap *h, int (*keep)(void *ud, const struct dnt_clr_object *o), void *ud,
                      struct dnt_clr_type_stat **v, size_t *n, struct dnt_clr_walk *walk) {
  struct stat_walk w = {.keep = keep, .ud = ud};
  int rc = dnt_clr_heap_walk(h, count_object, &w, walk);
  free(w.index);
  if (rc || w.oom) {
    free(w.v);
    *v = NULL, *n = 0;
    return -1;
  }
  *v = w.v, *n = w.n;
  return 0;
}
