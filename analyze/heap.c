/* heap.c: a heap snapshot from the runtime's heap walk (issue 24), as the events stream. A
 * session with the runtime provider at Verbose and the GCHeapSnapshot keywords makes the runtime
 * force a blocking gen-2 GC and, during it only, send its objects (GCBulkNode: address, size,
 * type, how many references), their references in the same order (GCBulkEdge: the targets, read
 * EdgeCount at a time per object), the roots (GCBulkRootEdge, the ConditionalWeakTable's entries,
 * GCBulkRootStaticVar) and the types (BulkType: id and name). ../shared/reference/heap-snapshots.md
 * has the recipe and the layouts.
 *
 * Held while reading: per object its address, size, type and reference count (20 bytes), per
 * reference its target (8 bytes), per root its object; never the events. At the end the graph
 * (struct dnt_heap) is made in the same arrays: the references resolved to object indexes in
 * place (4 bytes each), the roots put under the nodes that name them as PerfView's graphs do.
 * Edges carry no source: one lost node or edge event shifts every later object's references, so
 * the walk is complete only when the node and edge events' indexes run without a gap, the edges
 * add up to the objects' counts, and the forced GC's end arrived. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"
#include "dnt-trace.h"

enum {
  EV_GC_START = 1, EV_GC_END = 2, EV_BULK_TYPE = 15, EV_ROOT_EDGE = 16, EV_CWT = 17, EV_NODE = 18, EV_EDGE = 19,
  EV_STATIC = 38, EV_MODULE_LOAD = 152
};

/* The nodes that name the roots, as dotnet-gcdump's graph has them (DotNetHeapDumpGraphReader),
 * in its order: the root, its groups, and under each group the objects its roots hold. A static's
 * own node ("[static var T.f]", T its object's type as the event names it) is one per name, under
 * "[static vars]". */
enum group {
  G_ROOT, G_STATICS, G_LOCALS, G_THREAD_STATICS, G_OTHER, G_FINALIZER, G_STRONG, G_PINNING, G_OTHER_HANDLES,
  G_DEPENDENT, GROUPS
};
static const struct {
  const char *name;
  enum group parent; /* always before it */
} groups[GROUPS] = {
    [G_ROOT] = {"[.NET Roots]", G_ROOT},
    [G_STATICS] = {"[static vars]", G_ROOT},
    [G_LOCALS] = {"[local vars]", G_ROOT},
    [G_THREAD_STATICS] = {"[thread static vars]", G_ROOT},
    [G_OTHER] = {"[other roots]", G_ROOT},
    [G_FINALIZER] = {"[finalizer Handles]", G_OTHER},
    [G_STRONG] = {"[strong Handles]", G_OTHER},
    [G_PINNING] = {"[pinning Handles]", G_OTHER},
    [G_OTHER_HANDLES] = {"[other Handles]", G_OTHER},
    [G_DEPENDENT] = {"[Dependent Handles]", G_OTHER},
};

struct wtype {
  uint64_t id, module;
  char *name; /* NULL until a BulkType names it */
};

struct wmodule {
  uint64_t id;
  char *file; /* the module's file name, without its directory */
};

struct wroot {
  uint64_t object;
  uint32_t group;
  uint32_t var; /* a static's index in statics[] (G_STATICS, G_THREAD_STATICS) */
};

struct wstatic {
  uint64_t type; /* its object's type's runtime id (the event's TypeID) */
  char *field;
  char *name; /* at the end: "[static var T.field]" */
};

struct dnt_heap_analysis {
  uint32_t pointer_size;
  int walking, complete, failed, finished;
  uint32_t gc; /* the forced GC's Count */
  /* the objects, in the walk's order */
  uint64_t *address;
  uint32_t *size; /* UINT32_MAX: in big[] (an object of 4 GiB or more) */
  uint32_t *type, *refs;
  struct dnt__big_size *big;
  size_t nbig, capbig;
  size_t nnodes, capnodes;
  uint64_t *edges; /* targets, in the objects' order */
  size_t nedges, capedges;
  uint64_t edges_wanted; /* the objects' EdgeCounts, added */
  /* the types by runtime id: an open-addressed table of index + 1 */
  struct wtype *types;
  size_t ntypes, captypes;
  uint32_t *type_slots;
  size_t nslots;
  struct wroot *roots;
  size_t nroots, caproots;
  struct wstatic *statics;
  size_t nstatics, capstatics;
  struct wmodule *modules;
  size_t nmodules, capmodules;
  uint32_t next_node_index, next_edge_index; /* the indexes the next events should carry */
  uint64_t lost_node_events, lost_edge_events, root_values;
  uint32_t pid;
  int64_t start_unix_ns;
  dnt_heap_summary summary;
  struct dnt_heap *graph; /* after finish, a complete walk's */
};

struct dnt_heap_analysis *dnt_heap_analysis_new(void) { return calloc(1, sizeof(struct dnt_heap_analysis)); }

static void free_walk(struct dnt_heap_analysis *a) {
  free(a->address), free(a->size), free(a->type), free(a->refs), free(a->edges), free(a->big);
  a->address = a->edges = NULL;
  a->size = a->type = a->refs = NULL;
  a->big = NULL;
  a->nbig = a->capbig = 0;
  for (size_t i = 0; i < a->ntypes; i++) free(a->types[i].name);
  free(a->types), free(a->type_slots), free(a->roots);
  a->types = NULL, a->type_slots = NULL, a->roots = NULL;
  for (size_t i = 0; i < a->nstatics; i++) free(a->statics[i].field), free(a->statics[i].name);
  free(a->statics);
  a->statics = NULL;
  for (size_t i = 0; i < a->nmodules; i++) free(a->modules[i].file);
  free(a->modules);
  a->modules = NULL;
  a->nmodules = a->capmodules = 0;
  a->nnodes = a->capnodes = a->nedges = a->capedges = a->ntypes = a->captypes = a->nslots = 0;
  a->nroots = a->caproots = a->nstatics = a->capstatics = 0;
}

void dnt_heap_analysis_free(struct dnt_heap_analysis *a) {
  if (!a) return;
  free_walk(a);
  dnt_heap_free(a->graph);
  free(a);
}

int dnt_heap_analysis_failed(const struct dnt_heap_analysis *a) { return a->failed ? -ENOMEM : 0; }

static int grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 0;
  size_t want = *cap ? *cap * 2 : 1024;
  void *g = realloc(*v, want * size);
  if (!g) return -1;
  *v = g;
  *cap = want;
  return 0;
}

/* The objects' arrays, grown together. */
static int grow_nodes(struct dnt_heap_analysis *a) {
  if (a->nnodes < a->capnodes) return 0;
  size_t want = a->capnodes ? a->capnodes * 2 : 4096;
  uint64_t *address = realloc(a->address, want * sizeof *address);
  if (address) a->address = address;
  uint32_t *size = realloc(a->size, want * sizeof *size);
  if (size) a->size = size;
  uint32_t *type = realloc(a->type, want * sizeof *type);
  if (type) a->type = type;
  uint32_t *refs = realloc(a->refs, want * sizeof *refs);
  if (refs) a->refs = refs;
  if (!address || !size || !type || !refs) return -1;
  a->capnodes = want;
  return 0;
}

static uint64_t le(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

static size_t hash64(uint64_t v, size_t mask) { return (size_t)((v * 0x9E3779B97F4A7C15ull) >> 17) & mask; }

/* The index of the type with runtime id `id`, added unnamed when new; UINT32_MAX when out of
 * memory. */
static uint32_t type_index(struct dnt_heap_analysis *a, uint64_t id) {
  if ((a->ntypes + 1) * 2 > a->nslots) {
    size_t n = a->nslots ? a->nslots * 2 : 1024;
    uint32_t *slots = calloc(n, sizeof *slots);
    if (!slots) return UINT32_MAX;
    for (size_t i = 0; i < a->ntypes; i++) {
      size_t j = hash64(a->types[i].id, n - 1);
      while (slots[j]) j = (j + 1) & (n - 1);
      slots[j] = (uint32_t)i + 1;
    }
    free(a->type_slots);
    a->type_slots = slots, a->nslots = n;
  }
  size_t j = hash64(id, a->nslots - 1);
  for (; a->type_slots[j]; j = (j + 1) & (a->nslots - 1))
    if (a->types[a->type_slots[j] - 1].id == id) return a->type_slots[j] - 1;
  if (grow((void **)&a->types, &a->captypes, a->ntypes, sizeof *a->types) != 0) return UINT32_MAX;
  a->types[a->ntypes] = (struct wtype){id, 0, NULL};
  a->type_slots[j] = (uint32_t)++a->ntypes;
  return (uint32_t)a->ntypes - 1;
}

/* A type's name as dotnet-gcdump and PerfView show it, in place, by their rules: the generic
 * arity dropped, brackets made angle brackets, then "<>" made "[]" again ("List`1[System.String[]]"
 * is "List<System.String[]>", a closure class "<>c" is "[]c", "Int32[,]" is "Int32<,>"). */
static void pretty(char *name) {
  char *o = name;
  for (const char *c = name; *c;) {
    if (*c == '`' && c[1] >= '0' && c[1] <= '9') {
      for (c++; *c >= '0' && *c <= '9';) c++;
      continue;
    }
    *o++ = *c == '[' ? '<' : *c == ']' ? '>' : *c;
    c++;
  }
  *o = '\0';
  for (char *c = name; (c = strstr(c, "<>")) != NULL; c += 2) c[0] = '[', c[1] = ']';
}

/* BulkType: Count (u32), ClrInstanceID (u16), then per type TypeID (u64), ModuleID (u64),
 * TypeNameID (u32), Flags (u32), CorElementType (u8), Name (UTF-16, NUL-ended),
 * TypeParameterCount (u32), that many u64. A record cut short ends the event. A type logged
 * twice keeps its first name. */
static int on_bulk_type(struct dnt_heap_analysis *a, const uint8_t *p, size_t n) {
  ntr_payload c;
  uint32_t count, params;
  ntr_payload_init(&c, p, n);
  if (ntr_payload_u32(&c, &count) || ntr_payload_skip(&c, 2)) return 0;
  for (uint32_t k = 0; k < count; k++) {
    uint64_t id, module;
    size_t len;
    ntr_payload name_at;
    if (ntr_payload_u64(&c, &id) || ntr_payload_u64(&c, &module) || ntr_payload_skip(&c, 9)) return 0; /* to the name */
    name_at = c;
    if (ntr_payload_utf16z(&c, NULL, 0, &len)) return 0;
    if (ntr_payload_u32(&c, &params) || params > ntr_payload_left(&c) / 8 || ntr_payload_skip(&c, (size_t)params * 8))
      return 0;
    uint32_t t = type_index(a, id);
    if (t == UINT32_MAX) return -1;
    if (a->types[t].name) continue;
    a->types[t].module = module;
    char *name = malloc(len + 1);
    if (!name) return -1;
    ntr_payload_utf16z(&name_at, name, len + 1, NULL);
    pretty(name);
    a->types[t].name = name;
  }
  return 0;
}

/* GCBulkNode and GCBulkEdge: Index (u32), Count (u32), ClrInstanceID (u16), then Count values. A
 * gap in the indexes is events lost (counted); an event shorter than its count says is lost too. */
static int on_bulk(struct dnt_heap_analysis *a, int node, const uint8_t *p, size_t n) {
  uint32_t ptr = a->pointer_size == 4 ? 4 : 8;
  size_t each = node ? ptr + 24 : ptr + 4;
  uint32_t *next = node ? &a->next_node_index : &a->next_edge_index;
  uint64_t *lost = node ? &a->lost_node_events : &a->lost_edge_events;
  if (n < 10) return ++*lost, 0;
  uint32_t index = (uint32_t)le(p, 4), count = (uint32_t)le(p + 4, 4);
  if (index != *next) *lost += index > *next ? index - *next : 1;
  *next = index + 1;
  if (count > (n - 10) / each) return ++*lost, 0;
  for (uint32_t k = 0; k < count; k++) {
    const uint8_t *v = p + 10 + (size_t)k * each;
    if (node) {
      if (grow_nodes(a) != 0) return -1;
      uint64_t edges = le(v + ptr + 16, 8);
      uint32_t t = type_index(a, le(v + ptr + 8, 8));
      if (t == UINT32_MAX) return -1;
      size_t i = a->nnodes++;
      uint64_t size = le(v + ptr, 8);
      a->address[i] = le(v, ptr), a->type[i] = t;
      a->size[i] = size < UINT32_MAX ? (uint32_t)size : UINT32_MAX;
      if (size >= UINT32_MAX) { /* a very large array: its size beside */
        if (grow((void **)&a->big, &a->capbig, a->nbig, sizeof *a->big) != 0) return -1;
        a->big[a->nbig++] = (struct dnt__big_size){(uint32_t)i, size};
      }
      a->refs[i] = edges > UINT32_MAX ? UINT32_MAX : (uint32_t)edges;
      a->edges_wanted += edges;
    } else {
      if (grow((void **)&a->edges, &a->capedges, a->nedges, sizeof *a->edges) != 0) return -1;
      a->edges[a->nedges++] = le(v, ptr);
    }
  }
  return 0;
}

static int add_root(struct dnt_heap_analysis *a, uint64_t object, enum group g, uint32_t var) {
  if (!object) return 0;
  if (grow((void **)&a->roots, &a->caproots, a->nroots, sizeof *a->roots) != 0) return -1;
  a->roots[a->nroots++] = (struct wroot){object, (uint32_t)g, var};
  return 0;
}

/* GCBulkRootEdge's kind (Stack 0, Finalizer 1, Handle 2, Older 3, SizedRef 4, Overflow 5) and
 * flags (Pinning 1, WeakRef 2, Interior 4, RefCounted 8): the group its object goes under, or
 * GROUPS for a weak reference (it keeps nothing alive: left out, as PerfView leaves it). */
static enum group root_group(uint32_t kind, uint32_t flags) {
  if (flags & 2) return GROUPS;
  if (kind == 0) return G_LOCALS;
  if (kind == 1) return G_FINALIZER;
  if (kind == 2) return flags & 1 ? G_PINNING : flags & 8 ? G_OTHER_HANDLES : G_STRONG;
  return G_OTHER_HANDLES;
}

/* GCBulkRootStaticVar: Count, AppDomainID (u64), ClrInstanceID; per static its GCRootID (u64),
 * object (u64), declaring type (u64), flags (u32: 1 thread-local), field name (UTF-16z). */
static int on_statics(struct dnt_heap_analysis *a, const uint8_t *p, size_t n) {
  ntr_payload c;
  uint32_t count, flags;
  ntr_payload_init(&c, p, n);
  if (ntr_payload_u32(&c, &count) || ntr_payload_skip(&c, 10)) return 0;
  for (uint32_t k = 0; k < count; k++) {
    uint64_t object, type;
    size_t len;
    if (ntr_payload_skip(&c, 8) || ntr_payload_u64(&c, &object) || ntr_payload_u64(&c, &type) ||
        ntr_payload_u32(&c, &flags))
      return 0;
    ntr_payload name_at = c;
    if (ntr_payload_utf16z(&c, NULL, 0, &len)) return 0;
    a->root_values++;
    if (!object) continue;
    if (grow((void **)&a->statics, &a->capstatics, a->nstatics, sizeof *a->statics) != 0) return -1;
    char *field = malloc(len + 1);
    if (!field) return -1;
    ntr_payload_utf16z(&name_at, field, len + 1, NULL);
    a->statics[a->nstatics] = (struct wstatic){type, field, NULL};
    if (add_root(a, object, flags & 1 ? G_THREAD_STATICS : G_STATICS, (uint32_t)a->nstatics++) != 0) return -1;
  }
  return 0;
}

/* GCBulkRootEdge (Index, Count, ClrInstanceID; per root its object, kind (u8), flags (u32), id)
 * and the ConditionalWeakTable's entries (Index, Count, ClrInstanceID; per entry key, value, id:
 * the value is held while its key lives, taken as a root as PerfView's "[Dependent Handles]"). */
static int on_roots(struct dnt_heap_analysis *a, int id, const uint8_t *p, size_t n) {
  uint32_t ptr = a->pointer_size == 4 ? 4 : 8;
  if (n < 10) return 0;
  uint32_t count = (uint32_t)le(p + 4, 4);
  size_t each = id == EV_ROOT_EDGE ? ptr + 5 + ptr : 3 * (size_t)ptr;
  if (count > (n - 10) / each) return 0;
  for (uint32_t k = 0; k < count; k++) {
    const uint8_t *v = p + 10 + (size_t)k * each;
    a->root_values++;
    if (id == EV_ROOT_EDGE) {
      enum group g = root_group(v[ptr], (uint32_t)le(v + ptr + 1, 4));
      if (g != GROUPS && add_root(a, le(v, ptr), g, 0) != 0) return -1;
    } else if (le(v, ptr) && add_root(a, le(v + ptr, ptr), G_DEPENDENT, 0) != 0) { /* an entry with a key */
      return -1;
    }
  }
  return 0;
}

/* ModuleLoad (the runtime's 152) and the rundown's ModuleDCStart/End (153, 154): ModuleID (u64),
 * AssemblyID (u64), flags (u32), a reserved u32, the IL file's path (UTF-16z), ...: which file a
 * type's module is, as dotnet-gcdump's rows say it. The first path of a module is kept. */
static int on_module(struct dnt_heap_analysis *a, const uint8_t *p, size_t n) {
  ntr_payload c;
  uint64_t id;
  size_t len;
  ntr_payload_init(&c, p, n);
  if (ntr_payload_u64(&c, &id) || ntr_payload_skip(&c, 16)) return 0;
  ntr_payload path_at = c;
  if (ntr_payload_utf16z(&c, NULL, 0, &len) || !len) return 0;
  for (size_t i = 0; i < a->nmodules; i++)
    if (a->modules[i].id == id) return 0;
  if (grow((void **)&a->modules, &a->capmodules, a->nmodules, sizeof *a->modules) != 0) return -1;
  char *path = malloc(len + 1);
  if (!path) return -1;
  ntr_payload_utf16z(&path_at, path, len + 1, NULL);
  const char *file = path;
  for (const char *q = path; *q; q++)
    if (*q == '/' || *q == '\\') file = q + 1;
  memmove(path, file, strlen(file) + 1);
  a->modules[a->nmodules++] = (struct wmodule){id, path};
  return 0;
}

static const char *module_file(const struct dnt_heap_analysis *a, uint64_t id) {
  for (size_t i = 0; id && i < a->nmodules; i++)
    if (a->modules[i].id == id) return a->modules[i].file;
  return NULL;
}

static int heap_on_trace(void *ud, const ntr_trace *t) {
  struct dnt_heap_analysis *a = ud;
  a->pointer_size = t->pointer_size;
  a->pid = t->process_id;
  return 0;
}

static int heap_on_event(void *ud, const ntr_event *ev) {
  struct dnt_heap_analysis *a = ud;
  const ntr_metadata *md = ev->metadata;
  if (a->failed || !md) return a->failed;
  if (strcmp(md->provider, DNT__RUNTIME_PROVIDER) != 0) {
    if ((md->event_id == 153 || md->event_id == 154) && strcmp(md->provider, DNT__RUNDOWN_PROVIDER) == 0 &&
        on_module(a, ev->payload, ev->payload_size) != 0)
      a->failed = 1;
    return a->failed;
  }
  const uint8_t *p = ev->payload;
  size_t n = ev->payload_size;
  int rc = 0;
  switch (md->event_id) {
  case EV_GC_START: /* Count, Depth, Reason, Type: the forced walk is a blocking, induced gen 2 */
    if (n >= 16 && !a->walking && !a->complete && le(p + 4, 4) == 2 && le(p + 8, 4) == 1 && le(p + 12, 4) == 0) {
      a->walking = 1;
      a->gc = (uint32_t)le(p, 4);
    }
    break;
  case EV_GC_END:
    if (n >= 4 && a->walking && le(p, 4) == a->gc) a->walking = 0, a->complete = 1;
    break;
  case EV_BULK_TYPE: rc = on_bulk_type(a, p, n); break;
  case EV_NODE: rc = a->walking ? on_bulk(a, 1, p, n) : 0; break;
  case EV_EDGE: rc = a->walking ? on_bulk(a, 0, p, n) : 0; break;
  case EV_ROOT_EDGE:
  case EV_CWT: rc = a->walking ? on_roots(a, (int)md->event_id, p, n) : 0; break;
  case EV_STATIC: rc = a->walking ? on_statics(a, p, n) : 0; break;
  case EV_MODULE_LOAD: rc = on_module(a, p, n); break;
  default: break;
  }
  if (rc) a->failed = 1;
  return a->failed;
}

void dnt_heap_analysis_callbacks(ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  cb->on_trace = heap_on_trace;
  cb->on_event = heap_on_event;
}

int dnt_heap_analysis_walked(const struct dnt_heap_analysis *a) { return a->complete; }

void dnt_heap_analysis_progress(const struct dnt_heap_analysis *a, uint64_t *objects, uint64_t *references) {
  *objects = a->nnodes, *references = a->nedges;
}

/* ---- the graph ---- */

/* The object at each address: an open-addressed table of index + 1, half again as many slots as
 * objects (6 bytes an object, for the moment the references are resolved); a slot from the
 * hash's high bits scaled to the table (no power of two to round up to). */
struct address_table {
  uint32_t *slot;
  size_t cap;
  const uint64_t *address;
};

static size_t table_slot(const struct address_table *t, uint64_t address) {
  uint32_t h = (uint32_t)((address * 0x9E3779B97F4A7C15ull) >> 32);
  return (size_t)(((uint64_t)h * t->cap) >> 32);
}

static int table_build(struct address_table *t, const uint64_t *address, size_t n) {
  t->cap = n + n / 2 + 1024;
  t->slot = calloc(t->cap, sizeof *t->slot);
  if (!t->slot) return -1;
  t->address = address;
  for (size_t i = 0; i < n; i++) {
    size_t j = table_slot(t, address[i]);
    for (; t->slot[j]; j = j + 1 == t->cap ? 0 : j + 1)
      if (address[t->slot[j] - 1] == address[i]) break; /* an address twice: the first object */
    if (!t->slot[j]) t->slot[j] = (uint32_t)i + 1;
  }
  return 0;
}

static uint32_t table_find(const struct address_table *t, uint64_t address) {
  for (size_t j = table_slot(t, address); t->slot[j]; j = j + 1 == t->cap ? 0 : j + 1)
    if (t->address[t->slot[j] - 1] == address) return t->slot[j] - 1;
  return DNT__NO_NODE;
}

static int by_root_place(const void *x, const void *y) {
  const struct wroot *a = x, *b = y;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  return a->var < b->var ? -1 : a->var > b->var;
}

struct named {
  const char *name;
  uint32_t i;
};

static int by_static_name(const void *x, const void *y) {
  const struct named *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* Each static's node name, "[static var T.field]", and its roots moved to the first static of
 * that name (one node a name, as dotnet-gcdump makes them). 0, or -1 when out of memory. */
static int name_statics(struct dnt_heap_analysis *a) {
  for (size_t i = 0; i < a->nstatics; i++) {
    struct wstatic *st = &a->statics[i];
    uint32_t t = type_index(a, st->type); /* known, or added unnamed */
    const char *tn = t != UINT32_MAX && a->types[t].name ? a->types[t].name : "?";
    size_t len = strlen(tn) + strlen(st->field) + 16;
    if (!(st->name = malloc(len))) return -1;
    snprintf(st->name, len, "[static var %s.%s]", tn, st->field);
  }
  struct named *order = malloc((a->nstatics ? a->nstatics : 1) * sizeof *order);
  uint32_t *first = malloc((a->nstatics ? a->nstatics : 1) * sizeof *first);
  if (!order || !first) {
    free(order), free(first);
    return -1;
  }
  for (size_t i = 0; i < a->nstatics; i++) order[i] = (struct named){a->statics[i].name, (uint32_t)i};
  if (a->nstatics) qsort(order, a->nstatics, sizeof *order, by_static_name);
  for (size_t k = 0; k < a->nstatics; k++)
    first[order[k].i] = k && strcmp(order[k].name, order[k - 1].name) == 0 ? first[order[k - 1].i] : order[k].i;
  for (size_t r = 0; r < a->nroots; r++)
    if (a->roots[r].group == G_STATICS || a->roots[r].group == G_THREAD_STATICS) a->roots[r].var = first[a->roots[r].var];
  free(order), free(first);
  return 0;
}

/* The graph, from a complete walk: the objects (nodes 0..n-1, the walk's arrays handed over),
 * their references resolved in place (a target outside the walk, a frozen string literal, left
 * out), then the nodes naming the roots: the groups present, each static's own. 0, or -1 when
 * out of memory. */
static int build_graph(struct dnt_heap_analysis *a) {
  size_t n = a->nnodes;
  if (n + GROUPS + a->nstatics >= DNT__NO_NODE) return 0; /* beyond the node ids: no graph (said as incomplete) */
  struct dnt_heap *h = dnt__heap_new();
  if (!h) return -1;
  h->pointer_size = a->pointer_size == 4 ? 4 : 8;
  struct address_table at = {0};
  int rc = -1;
  /* the types: the walk's, then one per group and per static */
  for (size_t i = 0; i < a->ntypes; i++)
    if (dnt__heap_add_type(h, a->types[i].name ? a->types[i].name : "(unknown type)",
                           module_file(a, a->types[i].module), 0) == UINT32_MAX)
      goto out;
  /* the references, resolved: succ[] over the edges' own memory, each object's count kept */
  if (table_build(&at, a->address, n) != 0) goto out;
  uint32_t *succ = (uint32_t *)a->edges; /* written behind where it reads: index k's 4 bytes at k*4 <= k*8 */
  size_t e = 0, kept = 0;
  for (size_t v = 0; v < n; v++) {
    uint32_t wanted = a->refs[v], resolved = 0;
    for (uint32_t k = 0; k < wanted; k++, e++) {
      uint32_t w = table_find(&at, a->edges[e]);
      if (w != DNT__NO_NODE) succ[kept++] = w, resolved++;
    }
    a->refs[v] = resolved;
  }
  uint32_t *shrunk = realloc(a->edges, (kept ? kept : 1) * sizeof *shrunk); /* half of it, given back now */
  if (shrunk) a->edges = (uint64_t *)shrunk;
  if (name_statics(a) != 0) goto out;
  /* the roots, sorted by their place (group, static); each resolved, or dropped */
  if (a->nroots) qsort(a->roots, a->nroots, sizeof *a->roots, by_root_place);
  size_t nroots = 0;
  for (size_t r = 0; r < a->nroots; r++) {
    uint32_t w = table_find(&at, a->roots[r].object);
    if (w == DNT__NO_NODE) continue;
    a->roots[nroots] = a->roots[r];
    a->roots[nroots++].object = w;
  }
  free(at.slot);
  at.slot = NULL;
  /* which groups and statics have something: a group has its roots or a present child group */
  uint32_t present[GROUPS] = {0}, node_of[GROUPS];
  for (size_t r = 0; r < nroots; r++) present[a->roots[r].group] = 1;
  for (int g = GROUPS - 1; g > 0; g--)
    if (present[g]) present[groups[g].parent] = 1;
  present[G_ROOT] = 1;
  size_t nsynthetic = 0;
  for (int g = 0; g < GROUPS; g++) node_of[g] = present[g] ? (uint32_t)(n + nsynthetic++) : DNT__NO_NODE;
  /* a node per static holding something (the roots of one static are together, sorted) */
  size_t nstatic_nodes = 0;
  for (size_t r = 0; r < nroots; r++)
    if ((a->roots[r].group == G_STATICS || a->roots[r].group == G_THREAD_STATICS) &&
        (r == 0 || a->roots[r - 1].var != a->roots[r].var || a->roots[r - 1].group != a->roots[r].group))
      nstatic_nodes++;
  size_t total = n + nsynthetic + nstatic_nodes;
  /* the arrays, grown for the synthetic nodes; the edges for their children */
  size_t sedges = nroots + nsynthetic + nstatic_nodes; /* each root, group and static under its parent */
  uint64_t *address = realloc(a->address, (total ? total : 1) * sizeof *address);
  if (address) a->address = address;
  uint32_t *size = realloc(a->size, (total ? total : 1) * sizeof *size);
  if (size) a->size = size;
  uint32_t *type = realloc(a->type, (total ? total : 1) * sizeof *type);
  if (type) a->type = type;
  uint32_t *edges = realloc(a->edges, (kept + sedges ? kept + sedges : 1) * sizeof *edges);
  if (edges) a->edges = (uint64_t *)edges;
  uint64_t *start = malloc((total + 1) * sizeof *start);
  if (!address || !size || !type || !edges || !start) {
    free(start);
    goto out;
  }
  start[0] = 0;
  for (size_t v = 0; v < n; v++) start[v + 1] = start[v] + a->refs[v];
  free(a->refs);
  a->refs = NULL;
  uint32_t group_type[GROUPS];
  for (int g = 0; g < GROUPS; g++)
    if (present[g] && (group_type[g] = dnt__heap_add_type(h, groups[g].name, NULL, 1)) == UINT32_MAX) goto out_start;
  /* the synthetic nodes' children, in node order: a group's child groups, its statics' nodes,
   * its roots; a static's node, its roots */
  size_t out_e = kept;
  uint32_t static_node = (uint32_t)(n + nsynthetic);
  size_t v = n;
  for (int g = 0; g < GROUPS; g++) {
    if (!present[g]) continue;
    a->address[v] = 0, a->size[v] = 0, a->type[v] = group_type[g];
    for (int c = 1; c < GROUPS; c++)
      if (present[c] && groups[c].parent == (enum group)g && c != g) edges[out_e++] = node_of[c];
    for (size_t r = 0; r < nroots; r++) {
      if (a->roots[r].group != (uint32_t)g) continue;
      int is_static = g == G_STATICS || g == G_THREAD_STATICS;
      if (!is_static) edges[out_e++] = (uint32_t)a->roots[r].object;
      else if (r == 0 || a->roots[r - 1].var != a->roots[r].var || a->roots[r - 1].group != a->roots[r].group)
        edges[out_e++] = static_node++;
    }
    start[++v] = out_e;
  }
  for (size_t r = 0; r < nroots; r++) { /* each static's node, its object(s) under it */
    if (a->roots[r].group != G_STATICS && a->roots[r].group != G_THREAD_STATICS) continue;
    int first = r == 0 || a->roots[r - 1].var != a->roots[r].var || a->roots[r - 1].group != a->roots[r].group;
    if (first) {
      uint32_t st = dnt__heap_add_type(h, a->statics[a->roots[r].var].name, NULL, 1);
      if (st == UINT32_MAX) goto out_start;
      a->address[v] = 0, a->size[v] = 0, a->type[v] = st;
      v++;
    }
    edges[out_e++] = (uint32_t)a->roots[r].object;
    start[v] = out_e;
  }
  h->nnodes = (uint32_t)total;
  h->root = node_of[G_ROOT];
  h->address = a->address, h->size = a->size, h->type = a->type, h->start = start, h->succ = edges;
  h->big = a->big, h->nbig = a->nbig;
  a->address = a->edges = NULL;
  a->size = a->type = NULL;
  a->big = NULL;
  a->nbig = 0;
  a->graph = h;
  h = NULL;
  rc = 0;
  goto out;
out_start:
  free(start);
out:
  free(at.slot);
  dnt_heap_free(h);
  return rc;
}

void dnt_heap_analysis_finish(struct dnt_heap_analysis *a) {
  if (a->finished || a->failed) return;
  a->finished = 1;
  dnt_heap_summary *s = &a->summary;
  s->objects = a->nnodes;
  for (size_t i = 0; i < a->nnodes; i++) s->bytes += a->size[i];
  for (size_t i = 0; i < a->nbig; i++) s->bytes += a->big[i].size - UINT32_MAX;
  s->references = a->nedges;
  s->roots = a->root_values;
  s->lost_events = a->lost_node_events + a->lost_edge_events;
  s->walked = a->complete || a->walking || a->nnodes;
  s->reference_mismatch = a->nedges != a->edges_wanted;
  for (size_t i = 0; i < a->nnodes; i++) /* objects of types the walk never named (before the graph takes the walk) */
    if (a->type[i] < a->ntypes && !a->types[a->type[i]].name) s->unnamed_objects++;
  s->complete = a->complete && s->lost_events == 0 && !s->reference_mismatch;
  if (s->complete) {
    if (build_graph(a) != 0) a->failed = 1;
    else if (!a->graph) s->complete = 0; /* more objects than a graph's ids */
  }
  if (a->graph) {
    dnt_heap_origin o = {a->pid, NULL, 0};
    if (dnt_heap_set_origin(a->graph, &o) != 0) a->failed = 1;
  }
  free_walk(a);
}

const dnt_heap_summary *dnt_heap_analysis_summary(const struct dnt_heap_analysis *a) { return &a->summary; }

struct dnt_heap *dnt_heap_analysis_take(struct dnt_heap_analysis *a) {
  struct dnt_heap *h = a->failed ? NULL : a->graph;
  if (h) a->graph = NULL;
  return h;
}
