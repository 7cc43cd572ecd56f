/* gcroot.c: an object's references and the paths from roots to an object (dnt-core.h).
 *
 * References: a type that holds references has a GCDesc just below its MethodTable: a count of
 * series at -8; with n > 0, n series below it, the highest first at -24, each {size, offset}: the
 * references from offset to offset + size + the object's size. With n < 0 (an array of structs
 * holding references), one offset at -16 and |n| pairs {references, bytes to skip} repeated along
 * the array from -24 down.
 *
 * Paths are searched as ClrMD's GCRoot searches them, so that gcroot names the same path when
 * several lead to the object: depth first from the root; an object's unexplored references kept
 * in small lists of at most 32 bytes (a pointer takes 5, 6 or 8 of them, as its value needs), the
 * object's later lists explored before its earlier ones; a reference already met in this or any
 * earlier search is not explored again (unless the search that met it ended before reaching it);
 * an object known to lead to the target joins the path found before. */
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define MT_CONTAINS_POINTERS 0x01000000u
#define MAX_SERIES 65536
#define MAX_OBJECT_BYTES 0x7fffffffu
#define LIST_BYTES 32

/* ---- a map of addresses (linear probing, deletion by shifting back) ---- */

struct map {
  uint64_t *keys;
  int64_t *values;
  size_t n, cap;
};

static size_t slot(const struct map *m, uint64_t key) {
  size_t k = (size_t)((key >> 3) * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
  while (m->keys[k] && m->keys[k] != key) k = (k + 1) & (m->cap - 1);
  return k;
}

static int map_get(const struct map *m, uint64_t key, int64_t *value) {
  if (!m->cap || !key) return 0;
  size_t k = slot(m, key);
  if (!m->keys[k]) return 0;
  if (value) *value = m->values[k];
  return 1;
}

static int map_put(struct map *m, uint64_t key, int64_t value) {
  if (!key) return 0;
  if ((m->n + 1) * 2 > m->cap) {
    struct map g = {.cap = m->cap ? m->cap * 2 : 1024};
    if (!(g.keys = calloc(g.cap, sizeof *g.keys)) || !(g.values = malloc(g.cap * sizeof *g.values)))
      return free(g.keys), -1;
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        size_t k = slot(&g, m->keys[i]);
        g.keys[k] = m->keys[i], g.values[k] = m->values[i], g.n++;
      }
    free(m->keys), free(m->values);
    *m = g;
  }
  size_t k = slot(m, key);
  if (!m->keys[k]) m->n++;
  m->keys[k] = key, m->values[k] = value;
  return 0;
}

static void map_remove(struct map *m, uint64_t key) {
  if (!m->cap || !key) return;
  size_t k = slot(m, key);
  if (!m->keys[k]) return;
  m->keys[k] = 0, m->n--;
  for (size_t j = (k + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
    size_t home = (size_t)((m->keys[j] >> 3) * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
    /* move it back when its home is not in (k, j] */
    if ((j > k && (home <= k || home > j)) || (j < k && home <= k && home > j)) {
      m->keys[k] = m->keys[j], m->values[k] = m->values[j], m->keys[j] = 0;
      k = j;
    }
  }
}

static void map_free(struct map *m) {
  free(m->keys), free(m->values);
  memset(m, 0, sizeof *m);
}

/* ---- references ---- */

struct refs {
  uint64_t *v, *at; /* the values and the slots holding them */
  size_t n, cap;
};

static int ref_add(struct refs *r, uint64_t value, uint64_t at) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    uint64_t *v = realloc(r->v, cap * sizeof *v);
    if (!v) return -1;
    r->v = v;
    uint64_t *a = realloc(r->at, cap * sizeof *a);
    if (!a) return -1;
    r->at = a, r->cap = cap;
  }
  r->v[r->n] = value, r->at[r->n++] = at;
  return 0;
}

/* The nonzero references of the object at obj in its GCDesc's order into r (emptied first): 0, or
 * -1 out of memory. An object the core does not hold, or without references, has none. */
static int object_refs(dnt_clr_heap *h, uint64_t obj, struct refs *r) {
  const dnt_core *c = dnt__clr_core(dnt__heap_clr(h));
  uint64_t mt, size, count, v;
  uint32_t flags;
  r->n = 0;
  if (dnt__heap_object(h, obj, &mt, &flags, &size) != 0 || !(flags & MT_CONTAINS_POINTERS) || size > MAX_OBJECT_BYTES ||
      dnt_core_read_u64(c, mt - 8, &count) != 0)
    return 0;
  int64_t series = (int64_t)count;
  if (series > 0 && series <= MAX_SERIES) {
    for (int64_t i = 0; i < series; i++) { /* the highest series first */
      uint64_t at = mt - 24 - 16 * (uint64_t)i, ssize, off;
      if (dnt_core_read_u64(c, at, &ssize) != 0 || dnt_core_read_u64(c, at + 8, &off) != 0) return 0;
      int64_t stop = (int64_t)off + (int64_t)ssize + (int64_t)size;
      if ((int64_t)off < 0 || stop > (int64_t)size) continue; /* not within the object: damage */
      for (int64_t o = (int64_t)off; o < stop; o += 8)
        if (dnt_core_read_u64(c, obj + (uint64_t)o, &v) == 0 && v && ref_add(r, v, obj + (uint64_t)o) != 0) return -1;
    }
  } else if (series < 0 && series >= -MAX_SERIES) {
    uint64_t off;
    if (dnt_core_read_u64(c, mt - 16, &off) != 0 || off >= size) return 0;
    for (int64_t o = (int64_t)off; o < (int64_t)size - 8;) {
      for (int64_t i = 0; i > series; i--) {
        uint32_t pair[2];
        if (dnt_core_read(c, mt - 24 + 8 * (uint64_t)i, pair, sizeof pair) != 0 || (int32_t)pair[1] < 0)
          return 0; /* a skip backwards is damage (and would never end) */
        int64_t stop = o + 8 * (int64_t)pair[0];
        do {
          if (o + 8 > (int64_t)size) return 0;
          if (dnt_core_read_u64(c, obj + (uint64_t)o, &v) == 0 && v && ref_add(r, v, obj + (uint64_t)o) != 0) return -1;
          o += 8;
        } while (o < stop);
        o += (int32_t)pair[1];
      }
    }
  }
  return 0;
}

uint64_t dnt_clr_reference_slot(dnt_clr_heap *h, uint64_t obj, uint64_t ref) {
  struct refs r = {0};
  uint64_t at = 0;
  if (object_refs(h, obj, &r) == 0)
    for (size_t i = 0; i < r.n && !at; i++)
      if (r.v[i] == ref) at = r.at[i];
  free(r.v), free(r.at);
  return at;
}

/* ---- the references met: a bit per 8 bytes of each region of the heap (a region's bits made
 * when first needed), a map for any address outside them ---- */

struct seen {
  const struct dnt_clr_region *regions; /* by address */
  size_t nregions;
  uint64_t **bits;                      /* each region's, NULL until needed */
  struct map others;
};

/* Where a region's memory ends: its committed end, or its objects' if beyond (a frozen one). */
static uint64_t limit_of(const struct dnt_clr_region *r) { return r->committed > r->end ? r->committed : r->end; }

/* The region holding addr, or nregions. */
static size_t region_of(const struct seen *s, uint64_t addr) {
  size_t lo = 0, hi = s->nregions;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->regions[mid].start <= addr) lo = mid + 1;
    else hi = mid;
  }
  return lo && addr < limit_of(&s->regions[lo - 1]) ? lo - 1 : s->nregions;
}

static int seen_has(const struct seen *s, uint64_t addr) {
  size_t r = region_of(s, addr);
  if (r == s->nregions) return map_get(&s->others, addr, NULL);
  uint64_t bit = (addr - s->regions[r].start) >> 3;
  return s->bits[r] && (s->bits[r][bit >> 6] >> (bit & 63) & 1);
}

/* 0, or -1 out of memory. */
static int seen_add(struct seen *s, uint64_t addr) {
  size_t r = region_of(s, addr);
  if (r == s->nregions) return map_put(&s->others, addr, 0);
  uint64_t bit = (addr - s->regions[r].start) >> 3;
  if (!s->bits[r]) {
    uint64_t words = ((limit_of(&s->regions[r]) - s->regions[r].start) / 8 + 63) / 64;
    if (!(s->bits[r] = calloc(words ? words : 1, sizeof **s->bits))) return -1;
  }
  s->bits[r][bit >> 6] |= 1ull << (bit & 63);
  return 0;
}

static void seen_remove(struct seen *s, uint64_t addr) {
  size_t r = region_of(s, addr);
  if (r == s->nregions) return map_remove(&s->others, addr);
  uint64_t bit = (addr - s->regions[r].start) >> 3;
  if (s->bits[r]) s->bits[r][bit >> 6] &= ~(1ull << (bit & 63));
}

static void seen_free(struct seen *s) {
  for (size_t i = 0; s->bits && i < s->nregions; i++) free(s->bits[i]);
  free(s->bits);
  map_free(&s->others);
}

/* ---- the search ---- */

struct dependent {
  uint64_t source, target;
};

/* A list of references still to explore, and the object (and its parent) they are of. */
struct list {
  uint64_t object, parent;
  uint64_t refs[LIST_BYTES / 5];
  unsigned n, next, bytes;
};

struct link {
  uint64_t object;
  int64_t next; /* the link after it toward the target, -1 at the target */
};

struct dnt_clr_gcroot {
  dnt_clr_heap *h;
  uint64_t target;
  struct dependent *dependents; /* by source, in the handles' order among equals */
  size_t ndependents;
  struct map found; /* object -> its link */
  struct seen seen; /* references met and not to be explored again */
  struct link *links;
  size_t nlinks, caplinks;
  struct list *stack;
  size_t depth, capdepth;
  struct refs refs;
};

/* The bytes a pointer takes in a list, as its value needs. */
static unsigned width(uint64_t p) { return p <= 0xFFFFFFFFFFull ? 5 : p <= 0xFFFFFFFFFFFFull ? 6 : 8; }

static void list_start(struct list *l, uint64_t object, uint64_t parent) {
  memset(l, 0, sizeof *l);
  l->object = object & ~3ull, l->parent = parent & ~3ull;
  l->bytes = 1 + width(l->object) + (l->parent ? width(l->parent) : 0);
}

/* 0, or -1 when the list has no room for ref. */
static int list_store(struct list *l, uint64_t ref) {
  ref &= ~3ull;
  if (!ref) return 0;
  if (l->bytes + width(ref) > LIST_BYTES) return -1;
  l->refs[l->n++] = ref, l->bytes += width(ref);
  return 0;
}

static uint64_t list_next(struct list *l) { return l->next < l->n ? l->refs[l->next++] : 0; }

/* A list's parent as ClrMD reads it back: without a parent stored, its first reference. */
static uint64_t list_parent(const struct list *l) { return l->parent ? l->parent : l->n ? l->refs[0] : 0; }

static int push(dnt_clr_gcroot *g, const struct list *l) {
  if (g->depth == g->capdepth) {
    size_t cap = g->capdepth ? g->capdepth * 2 : 256;
    struct list *v = realloc(g->stack, cap * sizeof *v);
    if (!v) return -1;
    g->stack = v, g->capdepth = cap;
  }
  g->stack[g->depth++] = *l;
  return 0;
}

/* A new link: its index, or -1 out of memory. */
static int64_t new_link(dnt_clr_gcroot *g, uint64_t object, int64_t next) {
  if (g->nlinks == g->caplinks) {
    size_t cap = g->caplinks ? g->caplinks * 2 : 256;
    struct link *v = realloc(g->links, cap * sizeof *v);
    if (!v) return -1;
    g->links = v, g->caplinks = cap;
  }
  g->links[g->nlinks] = (struct link){object, next};
  return (int64_t)g->nlinks++;
}

static int by_source(const void *a, const void *b) {
  const struct dependent *x = a, *y = b;
  if (x->source != y->source) return x->source < y->source ? -1 : 1;
  return x < y ? -1 : x > y; /* qsort is not stable: the handles' order among equals, by position */
}

int dnt_clr_gcroot_new(dnt_clr_gcroot **out, dnt_clr_heap *h, uint64_t target, const struct dnt_clr_root *handles,
                       size_t nhandles) {
  dnt_clr_gcroot *g = calloc(1, sizeof *g);
  if (!g) return -1;
  g->h = h, g->target = target;
  g->seen.nregions = dnt_clr_heap_regions(h, &g->seen.regions);
  if (!(g->seen.bits = calloc(g->seen.nregions ? g->seen.nregions : 1, sizeof *g->seen.bits))) return free(g), -1;
  size_t n = 0;
  for (size_t i = 0; i < nhandles; i++) n += handles[i].kind == DNT_CLR_HANDLE_DEPENDENT && handles[i].dependent;
  if (n && !(g->dependents = malloc(n * sizeof *g->dependents))) return dnt_clr_gcroot_free(g), -1;
  for (size_t i = 0; i < nhandles; i++)
    if (handles[i].kind == DNT_CLR_HANDLE_DEPENDENT && handles[i].dependent)
      g->dependents[g->ndependents++] = (struct dependent){handles[i].object, handles[i].dependent};
  if (g->ndependents) qsort(g->dependents, g->ndependents, sizeof *g->dependents, by_source);
  *out = g;
  return 0;
}

void dnt_clr_gcroot_free(dnt_clr_gcroot *g) {
  if (!g) return;
  map_free(&g->found), seen_free(&g->seen);
  free(g->dependents), free(g->links), free(g->stack), free(g->refs.v), free(g->refs.at);
  free(g);
}

/* The first dependent handle of source, or ndependents. */
static size_t first_dependent(const dnt_clr_gcroot *g, uint64_t source) {
  size_t lo = 0, hi = g->ndependents;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->dependents[mid].source < source) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int dnt_clr_gcroot_dependent_link(const dnt_clr_gcroot *g, uint64_t from, uint64_t to) {
  for (size_t i = first_dependent(g, from); i < g->ndependents && g->dependents[i].source == from; i++)
    if (g->dependents[i].target == to) return 1;
  return 0;
}

/* What an object references, its dependent handles' secondaries first, into g->refs. */
static int references(dnt_clr_gcroot *g, uint64_t obj) {
  struct refs gcdesc = g->refs;
  if (object_refs(g->h, obj, &gcdesc) != 0) return g->refs = gcdesc, -1;
  g->refs = gcdesc;
  size_t first = first_dependent(g, obj), k = 0;
  for (size_t i = first; i < g->ndependents && g->dependents[i].source == obj; i++) k++;
  if (!k) return 0;
  for (size_t i = 0; i < k; i++)
    if (ref_add(&g->refs, 0, 0) != 0) return -1;
  memmove(g->refs.v + k, g->refs.v, (g->refs.n - k) * sizeof *g->refs.v);
  memmove(g->refs.at + k, g->refs.at, (g->refs.n - k) * sizeof *g->refs.at);
  for (size_t i = 0; i < k; i++) g->refs.v[i] = g->dependents[first + i].target, g->refs.at[i] = 0;
  return 0;
}

static int holds_references(dnt_clr_gcroot *g, uint64_t obj) {
  uint64_t mt, size;
  uint32_t flags;
  return dnt__heap_object(g->h, obj, &mt, &flags, &size) == 0 && (flags & MT_CONTAINS_POINTERS);
}

/* Steps onto curr (reached from parent): its link when it is the target or references an object
 * known to lead there (*link; its unexplored references pushed), else -1 in *link and its
 * references pushed. 0, or -1 out of memory. */
static int walk_object(dnt_clr_gcroot *g, uint64_t parent, uint64_t curr, int64_t *link) {
  *link = -1;
  if (curr == g->target) {
    if ((*link = new_link(g, curr, -1)) < 0 || map_put(&g->found, curr, *link) != 0) return -1;
    return 0;
  }
  if (!holds_references(g, curr)) return 0;
  if (references(g, curr) != 0) return -1;
  struct list l;
  int open = 0;
  for (size_t i = 0; i < g->refs.n; i++) {
    uint64_t ref = g->refs.v[i];
    int64_t known;
    if (map_get(&g->found, ref, &known)) {
      if ((*link = new_link(g, curr, known)) < 0 || map_put(&g->found, curr, *link) != 0) return -1;
      return open ? push(g, &l) : 0;
    }
    if (seen_has(&g->seen, ref)) continue;
    if (seen_add(&g->seen, ref) != 0) return -1;
    if (!open) list_start(&l, curr, parent), open = 1;
    if (list_store(&l, ref) != 0) {
      if (push(g, &l) != 0) return -1;
      list_start(&l, curr, parent);
      list_store(&l, ref);
    }
  }
  return open ? push(g, &l) : 0;
}

/* Lets the references no search explored be met again. */
static void drain(dnt_clr_gcroot *g) {
  for (size_t i = 0; i < g->depth; i++)
    for (uint64_t child; (child = list_next(&g->stack[i]));) seen_remove(&g->seen, child);
  g->depth = 0;
}

/* The object's link: an existing one, or a new one before link. -1 out of memory. */
static int64_t add_link(dnt_clr_gcroot *g, int64_t link, uint64_t obj) {
  int64_t next;
  if (!map_get(&g->found, obj, &next) && ((next = new_link(g, obj, link)) < 0 || map_put(&g->found, obj, next) != 0))
    return -1;
  seen_remove(&g->seen, obj);
  return next;
}

/* The path found from the list at index top: its objects back to the root linked, the rest let go. */
static int64_t found_from(dnt_clr_gcroot *g, int64_t link, size_t top) {
  uint64_t obj = g->stack[top].object, parent = list_parent(&g->stack[top]);
  if ((link = add_link(g, link, obj)) < 0) return -1;
  for (size_t i = g->depth; i-- > 0;) {
    const struct list *l = &g->stack[i];
    if (l->object == obj) continue;
    obj = l->object;
    if (l->object == parent) {
      if ((link = add_link(g, link, obj)) < 0) return -1;
      parent = list_parent(l);
    } else {
      seen_remove(&g->seen, l->object);
    }
  }
  drain(g);
  return link;
}

/* The search from start: its link, -1 none, -2 out of memory. */
static int64_t search(dnt_clr_gcroot *g, uint64_t start) {
  int64_t link;
  if (map_get(&g->found, start, &link)) return link;
  if (start == g->target) {
    if ((link = new_link(g, start, -1)) < 0 || map_put(&g->found, start, link) != 0) return -2;
    return link;
  }
  if (!holds_references(g, start)) return -1;
  g->depth = 0;
  if (walk_object(g, 0, start, &link) != 0) return -2;
  if (link >= 0) {
    drain(g);
    return link;
  }
  while (g->depth) {
    size_t top = g->depth - 1;
    uint64_t child = list_next(&g->stack[top]);
    if (!child) {
      g->depth--;
      continue;
    }
    if (walk_object(g, g->stack[top].object, child, &link) != 0) return -2;
    if (link >= 0) return (link = found_from(g, link, top)) < 0 ? -2 : link;
  }
  return -1;
}

int dnt_clr_gcroot_path(dnt_clr_gcroot *g, uint64_t from, uint64_t **path, size_t *n) {
  *path = NULL, *n = 0;
  int64_t link = search(g, from);
  if (link == -2) return -1;
  size_t len = 0;
  for (int64_t i = link; i >= 0 && len <= g->nlinks; i = g->links[i].next) len++;
  if (!len) return 0;
  if (!(*path = malloc(len * sizeof **path))) return -1;
  for (int64_t i = link; i >= 0 && *n < len; i = g->links[i].next) (*path)[(*n)++] = g->links[i].object;
  return 0;
}
