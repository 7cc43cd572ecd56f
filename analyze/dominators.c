/* dominators.c: the dominator tree of an object graph, for retained sizes (heap.c). Cooper,
 * Harvey and Kennedy's iterative algorithm ("A Simple, Fast Dominance Algorithm", 2001): in
 * reverse postorder, each node's dominator is the nearest common dominator of its processed
 * predecessors, until nothing changes; a few passes on a heap's graph. Iterative throughout (a
 * linked list of a million objects is a million deep). */
#include <stdlib.h>

#include "analyze-int.h"

/* The successors of v: the roots for the virtual root n, else its references. */
#define SUCC_BEGIN(v) ((v) == n ? 0 : start[v])
#define SUCC_END(v) ((v) == n ? nroots : start[(v) + 1])
#define SUCC(v, i) ((v) == n ? roots[i] : succ[i])

int dnt__dominators(uint32_t n, const uint64_t *start, const uint32_t *succ, const uint32_t *roots, uint64_t nroots,
                    uint32_t *idom, uint32_t *order, uint32_t *nreached) {
  uint32_t *po = malloc(((size_t)n + 1) * sizeof *po); /* postorder numbers; DNT__NO_NODE: not reached */
  struct frame {
    uint32_t v;
    uint64_t next;
  } *stack = malloc(((size_t)n + 1) * sizeof *stack);
  uint64_t *pstart = calloc((size_t)n + 2, sizeof *pstart);
  uint32_t *preds = NULL;
  int rc = -1;
  if (!po || !stack || !pstart) goto out;
  for (uint32_t v = 0; v <= n; v++) po[v] = DNT__NO_NODE;
  /* postorder by an explicit stack; order[] gets the nodes as they finish */
  uint32_t finished = 0, depth = 0;
  stack[depth++] = (struct frame){n, SUCC_BEGIN(n)};
  po[n] = 0; /* visited; numbered when it finishes */
  while (depth) {
    struct frame *f = &stack[depth - 1];
    uint32_t v = f->v;
    if (f->next < SUCC_END(v)) {
      uint32_t w = SUCC(v, f->next);
      f->next++;
      if (w < n && po[w] == DNT__NO_NODE) {
        po[w] = 0;
        stack[depth++] = (struct frame){w, SUCC_BEGIN(w)};
      }
      continue;
    }
    po[v] = finished;
    if (v != n) order[finished] = v;
    finished++;
    depth--;
  }
  uint32_t reached = finished - 1; /* the virtual root aside */
  /* order[] is postorder: reversed, a dominator comes before what it dominates */
  for (uint32_t i = 0; i < reached / 2; i++) {
    uint32_t t = order[i];
    order[i] = order[reached - 1 - i];
    order[reached - 1 - i] = t;
  }
  /* the predecessors of the reached nodes, among the reached (the virtual root's included) */
  for (uint32_t k = 0; k <= reached; k++) {
    uint32_t v = k == reached ? n : order[k];
    for (uint64_t i = SUCC_BEGIN(v); i < SUCC_END(v); i++) {
      uint32_t w = SUCC(v, i);
      if (w < n && po[w] != DNT__NO_NODE) pstart[w + 1]++;
    }
  }
  for (uint32_t v = 0; v <= n; v++) pstart[v + 1] += pstart[v];
  preds = malloc((pstart[n + 1] ? pstart[n + 1] : 1) * sizeof *preds);
  if (!preds) goto out;
  /* pstart[w] is w's cursor while filling, which leaves it at w + 1's start: shifted back after */
  for (uint32_t k = 0; k <= reached; k++) {
    uint32_t v = k == reached ? n : order[k];
    for (uint64_t i = SUCC_BEGIN(v); i < SUCC_END(v); i++) {
      uint32_t w = SUCC(v, i);
      if (w < n && po[w] != DNT__NO_NODE) preds[pstart[w]++] = v;
    }
  }
  for (uint32_t v = n + 1; v > 0; v--) pstart[v] = pstart[v - 1];
  pstart[0] = 0;
  for (uint32_t v = 0; v < n; v++) idom[v] = DNT__NO_NODE;
  /* the virtual root dominates itself; idom[] of it is kept apart (n is its index) */
  for (int changed = 1; changed;) {
    changed = 0;
    for (uint32_t k = 0; k < reached; k++) {
      uint32_t b = order[k], new_idom = DNT__NO_NODE;
      for (uint64_t i = pstart[b]; i < pstart[b + 1]; i++) {
        uint32_t p = preds[i];
        if (p != n && idom[p] == DNT__NO_NODE) continue; /* not processed yet */
        if (new_idom == DNT__NO_NODE) {
          new_idom = p;
          continue;
        }
        uint32_t f1 = p, f2 = new_idom; /* intersect, up the tree by postorder numbers */
        while (f1 != f2) {
          while (po[f1] < po[f2]) f1 = idom[f1];
          while (po[f2] < po[f1]) f2 = idom[f2];
        }
        new_idom = f1;
      }
      if (new_idom != DNT__NO_NODE && idom[b] != new_idom) {
        idom[b] = new_idom;
        changed = 1;
      }
    }
  }
  *nreached = reached;
  rc = 0;
out:
  free(po);
  free(stack);
  free(pstart);
  free(preds);
  return rc;
}
