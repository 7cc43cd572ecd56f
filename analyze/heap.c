/* heap.c: a heap snapshot from the runtime's heap walk (issue 24), as the events stream. A
 * session with the runtime provider at Verbose and the GCHeapSnapshot keywords makes the runtime
 * force a blocking gen-2 GC and, during it only, send its objects (GCBulkNode: address, size,
 * type, how many references), their references in the same order (GCBulkEdge: the targets, read
 * EdgeCount at a time per object), the roots (GCBulkRootEdge, the ConditionalWeakTable's entries,
 * GCBulkRootStaticVar) and the types (BulkType: id and name). ../shared/reference/heap-snapshots.md
 * has the recipe and the layouts.
 *
 * Held: per object its address, size, type id and reference count (32 bytes), per reference its
 * target (8 bytes), per root its object, per type its name; never the events. At the end, for the
 * retained sizes, about 50 bytes more an object for a moment (retain()). Edges carry no source:
 * one lost node or edge event shifts every later object's references, so the walk is complete
 * only when the node and edge events' indexes run without a gap, the edges add up to the
 * objects' counts, and the forced GC's end arrived. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"
#include "dnt-trace.h"

enum {
  EV_GC_START = 1, EV_GC_END = 2, EV_BULK_TYPE = 15, EV_ROOT_EDGE = 16, EV_CWT = 17, EV_NODE = 18, EV_EDGE = 19,
  EV_STATIC = 38
};

struct node {
  uint64_t address, size, type;
  uint32_t edges;
};

struct type_row {
  uint64_t id;
  char *name;
};

struct dnt_heap_analysis {
  uint32_t pointer_size;
  int walking, complete, failed, finished;
  uint32_t gc; /* the forced GC's Count */
  struct node *nodes;
  size_t nnodes, capnodes;
  uint64_t *edges; /* targets, in the nodes' order */
  size_t nedges, capedges;
  uint64_t edges_wanted; /* the nodes' EdgeCounts, added */
  struct type_row *types;
  size_t ntypes, captypes;
  uint32_t next_node_index, next_edge_index; /* the indexes the next events should carry */
  uint64_t lost_node_events, lost_edge_events, roots, statics;
  uint64_t *root_addrs; /* what the roots hold (weak ones left out), as PerfView's graph takes them */
  size_t nroot_addrs, caproot_addrs;
  dnt_heap_type *rows; /* after finish */
  size_t nrows;
  dnt_heap_summary summary;
};

struct dnt_heap_analysis *dnt_heap_analysis_new(void) { return calloc(1, sizeof(struct dnt_heap_analysis)); }

void dnt_heap_analysis_free(struct dnt_heap_analysis *a) {
  if (!a) return;
  for (size_t i = 0; i < a->ntypes; i++) free(a->types[i].name);
  free(a->types);
  free(a->nodes);
  free(a->edges);
  free(a->root_addrs);
  free(a->rows);
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

static uint64_t le(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

/* A type's name as dotnet-gcdump and PerfView show it, in place: the generic arity dropped
 * ("List`1[T]" is "List<T>"), brackets as angle brackets but for arrays' ("T[]" stays). */
static void pretty(char *name) {
  char *o = name;
  for (const char *c = name; *c;) {
    if (*c == '`' && c[1] >= '0' && c[1] <= '9') {
      for (c++; *c >= '0' && *c <= '9';) c++;
      continue;
    }
    if (*c == '[' && c[1] == ']') { /* an array: kept */
      *o++ = '[', *o++ = ']', c += 2;
      continue;
    }
    if (*c == '[' && c[1] == ',') { /* a multi-dimensional array's rank: kept */
      for (; *c && *c != ']'; c++) *o++ = *c;
      if (*c) *o++ = *c++;
      continue;
    }
    *o++ = *c == '[' ? '<' : *c == ']' ? '>' : *c;
    c++;
  }
  *o = '\0';
}

/* BulkType: Count (u32), ClrInstanceID (u16), then per type TypeID (u64), ModuleID (u64),
 * TypeNameID (u32), Flags (u32), CorElementType (u8), Name (UTF-16, NUL-ended),
 * TypeParameterCount (u32), that many u64. A record cut short ends the event. */
static int on_bulk_type(struct dnt_heap_analysis *a, const uint8_t *p, size_t n) {
  ntr_payload c;
  uint32_t count, params;
  ntr_payload_init(&c, p, n);
  if (ntr_payload_u32(&c, &count) || ntr_payload_skip(&c, 2)) return 0;
  for (uint32_t k = 0; k < count; k++) {
    uint64_t id;
    size_t len;
    ntr_payload name_at;
    if (ntr_payload_u64(&c, &id) || ntr_payload_skip(&c, 17)) return 0; /* to the name */
    name_at = c;
    if (ntr_payload_utf16z(&c, NULL, 0, &len)) return 0;
    if (ntr_payload_u32(&c, &params) || params > ntr_payload_left(&c) / 8 || ntr_payload_skip(&c, (size_t)params * 8))
      return 0;
    char *name = malloc(len + 1);
    if (!name) return -1;
    ntr_payload_utf16z(&name_at, name, len + 1, NULL);
    pretty(name);
    if (grow((void **)&a->types, &a->captypes, a->ntypes, sizeof *a->types) != 0) {
      free(name);
      return -1;
    }
    a->types[a->ntypes++] = (struct type_row){id, name};
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
      if (grow((void **)&a->nodes, &a->capnodes, a->nnodes, sizeof *a->nodes) != 0) return -1;
      uint64_t edges = le(v + ptr + 16, 8);
      a->nodes[a->nnodes++] = (struct node){le(v, ptr), le(v + ptr, 8), le(v + ptr + 8, 8),
                                             edges > UINT32_MAX ? UINT32_MAX : (uint32_t)edges};
      a->edges_wanted += edges;
    } else {
      if (grow((void **)&a->edges, &a->capedges, a->nedges, sizeof *a->edges) != 0) return -1;
      a->edges[a->nedges++] = le(v, ptr);
    }
  }
  return 0;
}

static int add_root(struct dnt_heap_analysis *a, uint64_t address) {
  if (!address) return 0;
  if (grow((void **)&a->root_addrs, &a->caproot_addrs, a->nroot_addrs, sizeof *a->root_addrs) != 0) return -1;
  a->root_addrs[a->nroot_addrs++] = address;
  return 0;
}

/* The roots: GCBulkRootEdge (Index, Count, ClrInstanceID; per root its object, kind (u8), flags
 * (u32: 2 a weak reference, left out), id), the ConditionalWeakTable's entries (Index, Count,
 * ClrInstanceID; per entry key, value, id: the value is held while its key lives, taken as a
 * root as PerfView's "[Dependent Handles]"), the statics (Count, AppDomainID, ClrInstanceID; per
 * static its id, object, type, flags, field name). */
static int on_roots(struct dnt_heap_analysis *a, int id, const uint8_t *p, size_t n) {
  uint32_t ptr = a->pointer_size == 4 ? 4 : 8;
  if (id == EV_STATIC) {
    ntr_payload c;
    uint32_t count;
    ntr_payload_init(&c, p, n);
    if (ntr_payload_u32(&c, &count) || ntr_payload_skip(&c, 10)) return 0;
    for (uint32_t k = 0; k < count; k++) {
      uint64_t object;
      if (ntr_payload_skip(&c, 8) || ntr_payload_u64(&c, &object) || ntr_payload_skip(&c, 12) ||
          ntr_payload_utf16z(&c, NULL, 0, NULL))
        return 0;
      a->statics++;
      if (add_root(a, object) != 0) return -1;
    }
    return 0;
  }
  if (n < 10) return 0;
  uint32_t count = (uint32_t)le(p + 4, 4);
  size_t each = id == EV_ROOT_EDGE ? ptr + 5 + ptr : 3 * (size_t)ptr;
  if (count > (n - 10) / each) return 0;
  for (uint32_t k = 0; k < count; k++) {
    const uint8_t *v = p + 10 + (size_t)k * each;
    a->roots++;
    if (id == EV_ROOT_EDGE && (le(v + ptr + 1, 4) & 2)) continue; /* weak */
    if (id == EV_CWT && !le(v, ptr)) continue;                     /* an entry without a key */
    if (add_root(a, le(v + (id == EV_ROOT_EDGE ? 0 : ptr), ptr)) != 0) return -1;
  }
  return 0;
}

static int heap_on_trace(void *ud, const ntr_trace *t) {
  ((struct dnt_heap_analysis *)ud)->pointer_size = t->pointer_size;
  return 0;
}

static int heap_on_event(void *ud, const ntr_event *ev) {
  struct dnt_heap_analysis *a = ud;
  const ntr_metadata *md = ev->metadata;
  if (a->failed || !md || strcmp(md->provider, DNT__RUNTIME_PROVIDER) != 0) return a->failed;
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
  case EV_CWT:
  case EV_STATIC: rc = a->walking ? on_roots(a, (int)md->event_id, p, n) : 0; break;
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

static int by_id(const void *x, const void *y) {
  uint64_t a = ((const struct type_row *)x)->id, b = ((const struct type_row *)y)->id;
  return a < b ? -1 : a > b;
}

static int by_bytes(const void *x, const void *y) {
  const dnt_heap_type *a = x, *b = y;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return strcmp(a->name, b->name);
}

struct by_address {
  uint64_t address;
  uint32_t node;
};

static int cmp_address(const void *x, const void *y) {
  uint64_t a = ((const struct by_address *)x)->address, b = ((const struct by_address *)y)->address;
  return a < b ? -1 : a > b;
}

/* The object at address: its index, DNT__NO_NODE for none (a reference outside the walk). */
static uint32_t node_at(const struct by_address *v, size_t n, uint64_t address) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (v[mid].address < address) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && v[lo].address == address ? v[lo].node : DNT__NO_NODE;
}

/* Retained sizes, into the rows (row[i]: node i's): the references and roots resolved to
 * objects, the dominator tree over them; an object's retained bytes are its own and those of
 * the objects it dominates (kept alive only through it); a type's are those of its objects that
 * no object of the same type dominates, so a list's nodes are counted once. Unreached objects
 * (garbage the walk saw) retain nothing. 0, or -1 when out of memory. */
static int retain(struct dnt_heap_analysis *a, const uint32_t *row) {
  size_t n = a->nnodes;
  if (n >= DNT__NO_NODE || a->nedges != a->edges_wanted) return 0; /* beyond ids, or a walk not whole */
  struct by_address *at = malloc((n ? n : 1) * sizeof *at);
  uint64_t *start = malloc((n + 1) * sizeof *start), *ret = calloc(n ? n : 1, sizeof *ret);
  uint32_t *succ = malloc((a->nedges ? a->nedges : 1) * sizeof *succ);
  uint32_t *roots = malloc((a->nroot_addrs ? a->nroot_addrs : 1) * sizeof *roots);
  uint32_t *idom = malloc((n ? n : 1) * sizeof *idom), *order = malloc((n ? n : 1) * sizeof *order);
  uint32_t *cstart = calloc(n + 2, sizeof *cstart), *child = malloc((n ? n : 1) * sizeof *child);
  uint32_t *inside = calloc(a->ntypes + 1, sizeof *inside);
  struct walk {
    uint32_t v, next;
  } *stack = malloc((n + 1) * sizeof *stack);
  int rc = -1;
  if (!at || !start || !ret || !succ || !roots || !idom || !order || !cstart || !child || !inside || !stack) goto out;
  for (size_t i = 0; i < n; i++) at[i] = (struct by_address){a->nodes[i].address, (uint32_t)i};
  qsort(at, n, sizeof *at, cmp_address);
  start[0] = 0;
  for (size_t i = 0; i < n; i++) start[i + 1] = start[i] + a->nodes[i].edges;
  for (size_t i = 0; i < a->nedges; i++) succ[i] = node_at(at, n, a->edges[i]);
  for (size_t i = 0; i < a->nroot_addrs; i++) roots[i] = node_at(at, n, a->root_addrs[i]);
  free(at);
  at = NULL;
  uint32_t reached = 0;
  if (dnt__dominators((uint32_t)n, start, succ, roots, a->nroot_addrs, idom, order, &reached) != 0) goto out;
  /* an object's own bytes, then (dominated before dominators, backwards) up to its dominator */
  for (uint32_t k = 0; k < reached; k++) ret[order[k]] = a->nodes[order[k]].size;
  for (uint32_t k = reached; k-- > 0;) {
    uint32_t v = order[k];
    if (idom[v] < n) ret[idom[v]] += ret[v];
  }
  /* the dominator tree's children (the virtual root's at index n), walked depth first with a
   * count per type of the objects of that type on the path */
  for (uint32_t k = 0; k < reached; k++) cstart[(idom[order[k]] < n ? idom[order[k]] : n) + 1]++;
  for (size_t v = 0; v <= n; v++) cstart[v + 1] += cstart[v];
  for (uint32_t k = 0; k < reached; k++) {
    uint32_t v = order[k], d = idom[v] < n ? idom[v] : (uint32_t)n;
    child[cstart[d]++] = v;
  }
  for (size_t v = n + 1; v > 0; v--) cstart[v] = cstart[v - 1];
  cstart[0] = 0;
  size_t depth = 0;
  stack[depth++] = (struct walk){(uint32_t)n, cstart[n]};
  while (depth) {
    struct walk *w = &stack[depth - 1];
    if (w->next < cstart[w->v + 1]) {
      uint32_t c = child[w->next++];
      if (!inside[row[c]]) a->rows[row[c]].retained += ret[c];
      inside[row[c]]++;
      stack[depth++] = (struct walk){c, cstart[c]};
      continue;
    }
    if (w->v < n) inside[row[w->v]]--;
    depth--;
  }
  a->summary.reachable = reached;
  rc = 0;
out:
  free(at);
  free(start);
  free(ret);
  free(succ);
  free(roots);
  free(idom);
  free(order);
  free(cstart);
  free(child);
  free(inside);
  free(stack);
  return rc;
}

void dnt_heap_analysis_finish(struct dnt_heap_analysis *a) {
  if (a->finished || a->failed) return;
  a->finished = 1;
  /* the types by id (a type logged twice keeps its first name) */
  if (a->ntypes) qsort(a->types, a->ntypes, sizeof *a->types, by_id);
  a->rows = calloc(a->ntypes + 1, sizeof *a->rows);
  if (!a->rows) {
    a->failed = 1;
    return;
  }
  size_t unknown = a->ntypes; /* the row of objects whose type no BulkType named */
  for (size_t i = 0; i < a->ntypes; i++) a->rows[i].name = a->types[i].name;
  a->rows[unknown].name = "(unknown type)";
  dnt_heap_summary *s = &a->summary;
  uint32_t *row = malloc((a->nnodes ? a->nnodes : 1) * sizeof *row); /* each object's */
  if (!row) {
    a->failed = 1;
    return;
  }
  for (size_t i = 0; i < a->nnodes; i++) {
    const struct node *nd = &a->nodes[i];
    size_t lo = 0, hi = a->ntypes;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (a->types[mid].id < nd->type) lo = mid + 1;
      else hi = mid;
    }
    size_t r = lo < a->ntypes && a->types[lo].id == nd->type ? lo : unknown;
    row[i] = (uint32_t)r;
    a->rows[r].count++;
    a->rows[r].bytes += nd->size;
    s->objects++;
    s->bytes += nd->size;
  }
  s->references = a->nedges;
  s->roots = a->roots + a->statics;
  s->lost_events = a->lost_node_events + a->lost_edge_events;
  s->walked = a->complete || a->walking || a->nnodes;
  s->complete = a->complete && s->lost_events == 0 && a->nedges == a->edges_wanted;
  s->reference_mismatch = a->nedges != a->edges_wanted;
  if (s->complete && retain(a, row) != 0) a->failed = 1;
  free(row);
  /* the rows with objects, most bytes first */
  size_t out = 0;
  for (size_t i = 0; i <= a->ntypes; i++)
    if (a->rows[i].count) a->rows[out++] = a->rows[i];
  a->nrows = out;
  if (out) qsort(a->rows, out, sizeof *a->rows, by_bytes);
}

const dnt_heap_summary *dnt_heap_get_summary(const struct dnt_heap_analysis *a) { return &a->summary; }

const dnt_heap_type *dnt_heap_types(const struct dnt_heap_analysis *a, size_t *n) {
  *n = a->nrows;
  return a->rows;
}

/* ---- views ---- */

static const char *state_of(const dnt_heap_summary *s) {
  return s->complete ? "complete" : s->walked ? "incomplete" : "no heap walk";
}

void dnt_heap_write_text(FILE *fp, const struct dnt_heap_analysis *a, size_t top) {
  const dnt_heap_summary *s = &a->summary;
  fprintf(fp, "Heap snapshot: %llu objects, %llu bytes, %llu references, %llu roots (%s)\n",
          (unsigned long long)s->objects, (unsigned long long)s->bytes, (unsigned long long)s->references,
          (unsigned long long)s->roots, state_of(s));
  fprintf(fp, "%llu objects reached from the roots; a type's retained bytes are what only its objects keep alive\n",
          (unsigned long long)s->reachable);
  fprintf(fp, "\n%15s %15s %12s  %s\n", "Bytes", "Retained", "Objects", "Type");
  for (size_t i = 0; i < a->nrows && i < top; i++) {
    fprintf(fp, "%15llu %15llu %12llu  ", (unsigned long long)a->rows[i].bytes, (unsigned long long)a->rows[i].retained,
            (unsigned long long)a->rows[i].count);
    dnt_text_put(fp, a->rows[i].name);
    fputc('\n', fp);
  }
}

void dnt_heap_write_json(FILE *fp, const struct dnt_heap_analysis *a, size_t top) {
  const dnt_heap_summary *s = &a->summary;
  fprintf(fp, "{\"objects\":%llu,\"bytes\":%llu,\"references\":%llu,\"roots\":%llu,\"reachable\":%llu,"
              "\"lostEvents\":%llu,\"state\":\"%s\",\"types\":[",
          (unsigned long long)s->objects, (unsigned long long)s->bytes, (unsigned long long)s->references,
          (unsigned long long)s->roots, (unsigned long long)s->reachable, (unsigned long long)s->lost_events,
          state_of(s));
  for (size_t i = 0; i < a->nrows && i < top; i++) {
    fputs(i ? ",{\"type\":" : "{\"type\":", fp);
    dnt_json_string(fp, a->rows[i].name);
    fprintf(fp, ",\"count\":%llu,\"bytes\":%llu,\"retainedBytes\":%llu}", (unsigned long long)a->rows[i].count,
            (unsigned long long)a->rows[i].bytes, (unsigned long long)a->rows[i].retained);
  }
  fputs("]}\n", fp);
}
