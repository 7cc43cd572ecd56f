/* heap-graph.c: a heap's object graph (struct dnt_heap, analyze-int.h), however it came: per type
 * its objects, bytes and retained bytes. Retained sizes come from the dominator tree
 * (dominators.c) over the graph from its root: an object retains its own bytes and those of the
 * objects it dominates (kept alive only through it); a type, those of its objects that no object
 * of the same type dominates, so a list's nodes are counted once. */
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"

struct dnt_heap *dnt__heap_new(void) {
  struct dnt_heap *h = calloc(1, sizeof *h);
  if (h) h->pointer_size = 8;
  return h;
}

uint32_t dnt__heap_add_type(struct dnt_heap *h, const char *name, const char *module, int synthetic) {
  if (h->ntypes == UINT32_MAX - 1) return UINT32_MAX;
  if (h->ntypes == 0 || (h->ntypes >= 64 && (h->ntypes & (h->ntypes - 1)) == 0)) { /* 64, 128, ...: full */
    size_t cap = h->ntypes ? (size_t)h->ntypes * 2 : 64;
    struct dnt__heap_type_info *t = realloc(h->types, cap * sizeof *t);
    if (!t) return UINT32_MAX;
    h->types = t;
  }
  struct dnt__heap_type_info *t = &h->types[h->ntypes];
  t->name = strdup(name);
  t->module = module ? strdup(module) : NULL;
  t->synthetic = synthetic;
  if (!t->name || (module && !t->module)) {
    free(t->name), free(t->module);
    return UINT32_MAX;
  }
  return h->ntypes++;
}

void dnt_heap_free(struct dnt_heap *h) {
  if (!h) return;
  free(h->type), free(h->size), free(h->address), free(h->start), free(h->succ), free(h->big);
  for (uint32_t i = 0; i < h->ntypes; i++) free(h->types[i].name), free(h->types[i].module);
  free(h->types);
  free(h->process_name);
  free(h->rows);
  free(h);
}

int dnt_heap_set_origin(struct dnt_heap *h, const dnt_heap_origin *origin) {
  char *name = origin->process ? strdup(origin->process) : NULL;
  if (origin->process && !name) return -1;
  free(h->process_name);
  h->process_name = name;
  h->origin = *origin;
  h->origin.process = name;
  return 0;
}

const dnt_heap_origin *dnt_heap_get_origin(const struct dnt_heap *h) { return &h->origin; }

int dnt_heap_failed(const struct dnt_heap *h) { return h->failed; }

uint64_t dnt__heap_big_size(const struct dnt_heap *h, uint32_t v) {
  size_t lo = 0, hi = h->nbig;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (h->big[mid].node < v) lo = mid + 1;
    else hi = mid;
  }
  return lo < h->nbig && h->big[lo].node == v ? h->big[lo].size : UINT32_MAX;
}

void dnt_heap_count(const struct dnt_heap *h, uint64_t *objects, uint64_t *bytes) {
  *objects = *bytes = 0;
  for (uint32_t v = 0; v < h->nnodes; v++)
    if (!h->types[h->type[v]].synthetic) ++*objects, *bytes += dnt__heap_size(h, v);
}

static size_t path_hash(uint32_t parent, uint32_t type, size_t mask) {
  return (size_t)((((uint64_t)parent << 32 | type) * 0x9E3779B97F4A7C15ull) >> 20) & mask;
}

/* The path `parent` + type (parent UINT32_MAX: a path of one type): its index, UINT32_MAX when out
 * of memory. */
uint32_t dnt__path_of(struct dnt__type_paths *p, uint32_t parent, uint32_t type) {
  if ((p->n + 1) * 2 > p->nslots) {
    size_t ns = p->nslots ? p->nslots * 2 : 1024;
    uint32_t *slot = calloc(ns, sizeof *slot);
    if (!slot) return UINT32_MAX;
    for (size_t i = 0; i < p->n; i++) {
      size_t j = path_hash(p->v[i].parent, p->v[i].type, ns - 1);
      while (slot[j]) j = (j + 1) & (ns - 1);
      slot[j] = (uint32_t)i + 1;
    }
    free(p->slot);
    p->slot = slot, p->nslots = ns;
  }
  size_t j = path_hash(parent, type, p->nslots - 1);
  for (; p->slot[j]; j = (j + 1) & (p->nslots - 1)) {
    const struct dnt__type_path *q = &p->v[p->slot[j] - 1];
    if (q->parent == parent && q->type == type) return p->slot[j] - 1;
  }
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 1024;
    struct dnt__type_path *v = realloc(p->v, cap * sizeof *v);
    if (!v) return UINT32_MAX;
    p->v = v, p->cap = cap;
  }
  if (p->n >= UINT32_MAX - 1) return UINT32_MAX;
  p->v[p->n] = (struct dnt__type_path){parent, type, 0, 0};
  p->slot[j] = (uint32_t)++p->n;
  return (uint32_t)p->n - 1;
}

void dnt__type_paths_release(struct dnt__type_paths *p) {
  free(p->v), free(p->slot);
  memset(p, 0, sizeof *p);
}

int dnt__heap_dominators(const struct dnt_heap *h, uint32_t **idom, uint32_t **order, uint32_t *reached) {
  uint32_t n = h->nnodes, root = h->root;
  *idom = malloc((n ? n : 1) * sizeof **idom);
  *order = malloc((n ? n : 1) * sizeof **order);
  *reached = 0;
  if (*idom && *order && dnt__dominators(n, h->start, h->succ, &root, n ? 1 : 0, *idom, *order, reached) == 0)
    return 0;
  free(*idom), free(*order);
  *idom = *order = NULL;
  return -1;
}

struct by_name {
  const char *name;
  uint32_t type;
};

static int cmp_name(const void *x, const void *y) {
  const struct by_name *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  return c ? c : (a->type > b->type) - (a->type < b->type);
}

static int by_bytes(const void *x, const void *y) {
  const dnt_heap_type *a = x, *b = y;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* Retained bytes into rows (row_of_type: each type's row, nrows for a synthetic one, whose row is
 * a scratch one past the end). 0, or -1 when out of memory. */
static int retain(struct dnt_heap *h, const uint32_t *row_of_type, size_t nrows) {
  uint32_t n = h->nnodes;
  uint64_t *ret = calloc(n ? n : 1, sizeof *ret);
  uint32_t *idom = NULL, *order = NULL, reached = 0;
  uint32_t *cstart = calloc((size_t)n + 2, sizeof *cstart), *child = malloc((n ? n : 1) * sizeof *child);
  uint32_t *inside = calloc(nrows + 1, sizeof *inside);
  struct walk {
    uint32_t v, next;
  } *stack = malloc(((size_t)n + 1) * sizeof *stack);
  int rc = -1;
  if (!ret || !cstart || !child || !inside || !stack || dnt__heap_dominators(h, &idom, &order, &reached) != 0) goto out;
  /* an object's own bytes, then (dominated before dominators, backwards) up to its dominator */
  for (uint32_t k = 0; k < reached; k++) ret[order[k]] = dnt__heap_size(h, order[k]);
  for (uint32_t k = reached; k-- > 0;) {
    uint32_t v = order[k];
    if (idom[v] < n) ret[idom[v]] += ret[v];
  }
  /* the dominator tree's children (the virtual root's at index n), walked depth first with a
   * count per row of the objects of that row on the path */
  for (uint32_t k = 0; k < reached; k++) cstart[(idom[order[k]] < n ? idom[order[k]] : n) + 1]++;
  for (size_t v = 0; v <= n; v++) cstart[v + 1] += cstart[v];
  for (uint32_t k = 0; k < reached; k++) {
    uint32_t v = order[k], d = idom[v] < n ? idom[v] : n;
    child[cstart[d]++] = v;
  }
  for (size_t v = (size_t)n + 1; v > 0; v--) cstart[v] = cstart[v - 1];
  cstart[0] = 0;
  size_t depth = 0;
  stack[depth++] = (struct walk){n, cstart[n]};
  uint64_t objects_reached = 0;
  while (depth) {
    struct walk *w = &stack[depth - 1];
    if (w->next < cstart[w->v + 1]) {
      uint32_t c = child[w->next++];
      uint32_t r = row_of_type[h->type[c]];
      if (r < nrows) {
        if (!inside[r]) h->rows[r].retained += ret[c];
        objects_reached++;
      }
      inside[r]++;
      stack[depth++] = (struct walk){c, cstart[c]};
      continue;
    }
    if (w->v < n) inside[row_of_type[h->type[w->v]]]--;
    depth--;
  }
  h->summary.reachable = objects_reached;
  rc = 0;
out:
  free(ret), free(idom), free(order), free(cstart), free(child), free(inside), free(stack);
  return rc;
}

/* The rows: one per type name (a name twice, a type split by sizes in a .gcdump, is one row). */
static int make_rows(struct dnt_heap *h) {
  dnt_heap_summary *s = &h->summary;
  memset(s, 0, sizeof *s);
  s->walked = s->complete = 1;
  struct by_name *names = malloc((h->ntypes ? h->ntypes : 1) * sizeof *names);
  uint32_t *row_of_type = malloc((h->ntypes ? h->ntypes : 1) * sizeof *row_of_type);
  int rc = -1;
  if (!names || !row_of_type) goto out;
  size_t nnames = 0;
  for (uint32_t t = 0; t < h->ntypes; t++)
    if (!h->types[t].synthetic) names[nnames++] = (struct by_name){h->types[t].name, t};
  if (nnames) qsort(names, nnames, sizeof *names, cmp_name);
  size_t nrows = 0;
  for (uint32_t t = 0; t < h->ntypes; t++) row_of_type[t] = UINT32_MAX;
  for (size_t i = 0; i < nnames; i++) {
    if (i && strcmp(names[i - 1].name, names[i].name) != 0) nrows++;
    row_of_type[names[i].type] = (uint32_t)nrows;
  }
  if (nnames) nrows++;
  for (uint32_t t = 0; t < h->ntypes; t++)
    if (row_of_type[t] == UINT32_MAX) row_of_type[t] = (uint32_t)nrows; /* synthetic: the scratch row */
  h->rows = calloc(nrows + 1, sizeof *h->rows);
  if (!h->rows) goto out;
  for (size_t i = 0; i < nnames; i++) h->rows[row_of_type[names[i].type]].name = names[i].name;
  for (uint32_t v = 0; v < h->nnodes; v++) {
    uint32_t r = row_of_type[h->type[v]];
    uint64_t refs = h->start[v + 1] - h->start[v];
    if (r == nrows) { /* a root's node: its references to objects are roots */
      for (uint64_t e = h->start[v]; e < h->start[v + 1]; e++)
        if (h->succ[e] < h->nnodes && !h->types[h->type[h->succ[e]]].synthetic) s->roots++;
      continue;
    }
    h->rows[r].count++;
    uint64_t size = dnt__heap_size(h, v);
    h->rows[r].bytes += size;
    s->objects++;
    s->bytes += size;
    s->references += refs;
  }
  if (retain(h, row_of_type, nrows) != 0) goto out;
  /* the rows with objects, most bytes first */
  size_t out = 0;
  for (size_t i = 0; i < nrows; i++)
    if (h->rows[i].count) h->rows[out++] = h->rows[i];
  h->nrows = out;
  if (out) qsort(h->rows, out, sizeof *h->rows, by_bytes);
  rc = 0;
out:
  free(names);
  free(row_of_type);
  return rc;
}

static int rows_ready(struct dnt_heap *h) {
  if (!h->rows_done && !h->failed) {
    h->rows_done = 1;
    if (make_rows(h) != 0) {
      h->failed = 1;
      free(h->rows);
      h->rows = NULL, h->nrows = 0;
    }
  }
  return !h->failed;
}

const dnt_heap_summary *dnt_heap_summary_of(struct dnt_heap *h) { return rows_ready(h) ? &h->summary : NULL; }

const dnt_heap_type *dnt_heap_types(struct dnt_heap *h, size_t *n) {
  *n = rows_ready(h) ? h->nrows : 0;
  return h->rows;
}
