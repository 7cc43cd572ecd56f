/* heap-profile.c: a heap snapshot as a profile (profile/'s model, so every profile writer draws
 * it): each object reached from the roots under the path of types of its dominators, from the
 * root's node down (a flame graph's width is then what each path retains), counted as a sample
 * of its bytes. A type met again on the way folds the path back to where it was first, so a
 * linked list of a million nodes is one frame, not a million, and the paths stay as few as the
 * types' arrangements. */
#include <stdlib.h>

#include "analyze-int.h"
#include "dnt-analyze.h"
#include "dnt-profile.h"

#define TYPE_FRAME 0x1000 /* a frame's "address": the type's index above this */

static int name_type(void *ud, uint64_t ip, int leaf, char *buf, size_t cap) {
  const struct dnt_heap *h = ud;
  (void)leaf;
  if (ip < TYPE_FRAME || ip - TYPE_FRAME >= h->ntypes) return 0;
  snprintf(buf, cap, "%s", h->types[ip - TYPE_FRAME].name);
  return 1;
}

/* The path of v, given its dominator's: the dominator's with v's type, or, when that type is on
 * the dominator's path already, the path up to it. */
static uint32_t fold(struct dnt__type_paths *ps, uint32_t under, uint32_t type) {
  for (uint32_t q = under; q != UINT32_MAX; q = ps->v[q].parent)
    if (ps->v[q].type == type) return q;
  return dnt__path_of(ps, under, type);
}

struct dnt_profile *dnt_heap_profile(struct dnt_heap *h) {
  struct dnt_profile *p = dnt_profile_new();
  uint32_t *idom = NULL, *order = NULL, reached = 0, n = h->nnodes;
  uint32_t *path = malloc((n ? n : 1) * sizeof *path);
  uint64_t *ips = NULL;
  struct dnt__type_paths ps = {0};
  int ok = 0;
  if (!p || !path || dnt__heap_dominators(h, &idom, &order, &reached) != 0) goto out;
  dnt_profile_set_source(p, DNT_SOURCE_HEAP);
  dnt_profile_set_weight(p, DNT_WEIGHT_BYTES);
  if (dnt_profile_add_resolver(p, name_type, h) != 0) goto out;
  /* order[] has a dominator before what it dominates: each path from its dominator's */
  for (uint32_t k = 0; k < reached; k++) {
    uint32_t v = order[k], d = idom[v];
    uint32_t q = fold(&ps, d < n ? path[d] : UINT32_MAX, h->type[v]);
    if (q == UINT32_MAX) goto out;
    path[v] = q;
    if (!h->types[h->type[v]].synthetic) ps.v[q].objects++, ps.v[q].bytes += dnt__heap_size(h, v);
  }
  size_t depth = 1;
  for (size_t i = 0; i < ps.n; i++) { /* the deepest path, for the frames' buffer */
    size_t d = 0;
    for (uint32_t q = (uint32_t)i; q != UINT32_MAX; q = ps.v[q].parent) d++;
    if (d > depth) depth = d;
  }
  if (!(ips = malloc(depth * sizeof *ips))) goto out;
  for (size_t i = 0; i < ps.n; i++) {
    if (!ps.v[i].objects) continue;
    size_t k = 0;
    for (uint32_t q = (uint32_t)i; q != UINT32_MAX; q = ps.v[q].parent) ips[k++] = TYPE_FRAME + ps.v[q].type;
    dnt_profile_add_objects(p, ips, k, ps.v[i].objects, (double)ps.v[i].bytes);
  }
  ok = dnt_profile_finish(p) == 0 && !dnt_profile_failed(p);
out:
  free(idom), free(order), free(path), free(ips);
  dnt__type_paths_release(&ps);
  if (!ok) {
    dnt_profile_free(p);
    return NULL;
  }
  return p;
}
