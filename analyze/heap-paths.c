/* heap-paths.c: what keeps objects alive: the shortest paths from a heap graph's root to the
 * objects of a type, or to one object. A breadth-first walk from the root gives each object its
 * parent on a shortest path; the objects asked for are grouped by the path of types that leads to
 * them (a type repeated in a row, a linked list's nodes, shown once), so 3,000 cache entries held
 * the same way are one path with 3,000 objects. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"
#include "dnt-trace.h"

/* The target: an address ("0x...") or a type's name: exact, else every type whose name holds
 * it. want[t] set per type; *address set (nonzero) for an address. 0, or -1 when nothing
 * matches. */
static int match(const struct dnt_heap *h, const char *target, uint8_t *want, uint64_t *address) {
  *address = 0;
  if ((target[0] == '0' && (target[1] == 'x' || target[1] == 'X')) && target[2]) {
    char *end;
    errno = 0;
    unsigned long long a = strtoull(target + 2, &end, 16);
    if (!*end && !errno && a) {
      *address = a;
      return 0;
    }
  }
  int any = 0;
  for (uint32_t t = 0; t < h->ntypes; t++)
    if (!h->types[t].synthetic && strcmp(h->types[t].name, target) == 0) want[t] = 1, any = 1;
  if (any) return 0;
  for (uint32_t t = 0; t < h->ntypes; t++)
    if (!h->types[t].synthetic && strstr(h->types[t].name, target)) want[t] = 1, any = 1;
  return any ? 0 : -1;
}

struct found {
  uint64_t objects, bytes, reached;
  uint32_t node; /* an address's object, DNT__NO_NODE for a type */
  uint32_t *parent;
  struct dnt__type_paths paths;
  struct ranked *order; /* the paths with objects at their end, most objects first */
  size_t norder;
};

struct ranked {
  uint64_t objects, bytes;
  uint32_t path;
};

static int by_objects(const void *x, const void *y) {
  const struct ranked *a = x, *b = y;
  if (a->objects != b->objects) return a->objects > b->objects ? -1 : 1;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  return a->path < b->path ? -1 : 1;
}

/* The walk and the grouping. 0; -1 when nothing matches (err says so); -2 when out of memory. */
static int find(struct dnt_heap *h, const char *target, struct found *f, char *err, size_t cap) {
  uint32_t n = h->nnodes;
  memset(f, 0, sizeof *f);
  f->node = DNT__NO_NODE;
  uint8_t *want = calloc(h->ntypes ? h->ntypes : 1, 1);
  uint32_t *queue = malloc((n ? n : 1) * sizeof *queue), *pathid = malloc((n ? n : 1) * sizeof *pathid);
  f->parent = malloc((n ? n : 1) * sizeof *f->parent);
  int rc = -2;
  if (!want || !queue || !pathid || !f->parent) goto out;
  uint64_t address;
  if (match(h, target, want, &address) != 0) {
    snprintf(err, cap, "no type named '%s' (or with it in its name) in the snapshot", target);
    rc = -1;
    goto out;
  }
  if (address) {
    for (uint32_t v = 0; v < n && f->node == DNT__NO_NODE; v++)
      if (h->address[v] == address && !h->types[h->type[v]].synthetic) f->node = v;
    if (f->node == DNT__NO_NODE) {
      snprintf(err, cap, "no object at %s in the snapshot", target);
      rc = -1;
      goto out;
    }
  }
  for (uint32_t v = 0; v < n; v++) f->parent[v] = DNT__NO_NODE;
  size_t head = 0, tail = 0;
  if (n) {
    queue[tail++] = h->root;
    f->parent[h->root] = h->root;
    if ((pathid[h->root] = dnt__path_of(&f->paths, UINT32_MAX, h->type[h->root])) == UINT32_MAX) goto out;
  }
  while (head < tail) {
    uint32_t v = queue[head++];
    for (uint64_t e = h->start[v]; e < h->start[v + 1]; e++) {
      uint32_t w = h->succ[e];
      if (w >= n || f->parent[w] != DNT__NO_NODE) continue;
      f->parent[w] = v;
      queue[tail++] = w;
      uint32_t p = pathid[v];
      if (f->paths.v[p].type != h->type[w] && (p = dnt__path_of(&f->paths, p, h->type[w])) == UINT32_MAX) goto out;
      pathid[w] = p;
    }
  }
  /* the asked-for objects, at the ends of their paths */
  for (uint32_t v = 0; v < n; v++) {
    int wanted = f->node != DNT__NO_NODE ? v == f->node : want[h->type[v]];
    if (!wanted) continue;
    f->objects++, f->bytes += dnt__heap_size(h, v);
    if (f->parent[v] == DNT__NO_NODE) continue;
    f->reached++;
    f->paths.v[pathid[v]].objects++;
    f->paths.v[pathid[v]].bytes += dnt__heap_size(h, v);
  }
  if (!(f->order = malloc((f->paths.n ? f->paths.n : 1) * sizeof *f->order))) goto out;
  for (size_t i = 0; i < f->paths.n; i++)
    if (f->paths.v[i].objects) f->order[f->norder++] = (struct ranked){f->paths.v[i].objects, f->paths.v[i].bytes, (uint32_t)i};
  if (f->norder) qsort(f->order, f->norder, sizeof *f->order, by_objects);
  rc = 0;
out:
  free(want), free(queue), free(pathid);
  return rc;
}

static void found_release(struct found *f) {
  free(f->parent), free(f->order);
  dnt__type_paths_release(&f->paths);
}

/* The types of path p, root first, into buf (room for cap); how many. */
static size_t path_types(const struct dnt__type_paths *ps, uint32_t p, uint32_t *buf, size_t cap) {
  size_t k = 0;
  for (uint32_t q = p; q != UINT32_MAX; q = ps->v[q].parent) k++;
  size_t len = k < cap ? k : cap, i = k;
  for (uint32_t q = p; q != UINT32_MAX; q = ps->v[q].parent)
    if (--i < len) buf[i] = ps->v[q].type;
  return len;
}

static void put_name(FILE *fp, const struct dnt_heap *h, uint32_t type, int json) {
  if (json) dnt_json_string(fp, h->types[type].name);
  else dnt_text_put(fp, h->types[type].name);
}

int dnt_heap_paths_target(const struct dnt_heap *h, const char *target, char *err, size_t cap) {
  uint8_t *want = calloc(h->ntypes ? h->ntypes : 1, 1);
  uint64_t address;
  if (!want) {
    snprintf(err, cap, "out of memory");
    return -2;
  }
  int rc = match(h, target, want, &address);
  free(want);
  if (rc) {
    snprintf(err, cap, "no type named '%s' (or with it in its name) in the snapshot", target);
    return -1;
  }
  for (uint32_t v = 0; address && v < h->nnodes; v++)
    if (h->address[v] == address && !h->types[h->type[v]].synthetic) return 0;
  if (address) snprintf(err, cap, "no object at %s in the snapshot", target);
  return address ? -1 : 0;
}

#define MAX_SHOWN 4096 /* types shown of one path */

int dnt_heap_write_paths(FILE *fp, struct dnt_heap *h, const char *target, size_t top, int json, char *err,
                         size_t cap) {
  struct found f;
  int rc = find(h, target, &f, err, cap);
  if (rc) {
    found_release(&f);
    if (rc == -2) snprintf(err, cap, "out of memory");
    return rc;
  }
  uint32_t *types = malloc(MAX_SHOWN * sizeof *types);
  if (!types) {
    found_release(&f);
    snprintf(err, cap, "out of memory");
    return -2;
  }
  if (json) {
    fputs("{\"target\":", fp);
    dnt_json_string(fp, target);
    fprintf(fp, ",\"objects\":%llu,\"bytes\":%llu,\"reached\":%llu,\"paths\":[", (unsigned long long)f.objects,
            (unsigned long long)f.bytes, (unsigned long long)f.reached);
  } else {
    fprintf(fp, "%llu object%s (%llu bytes) of ", (unsigned long long)f.objects, f.objects == 1 ? "" : "s",
            (unsigned long long)f.bytes);
    dnt_text_put(fp, target);
    fprintf(fp, "; %llu reached from the roots%s\n", (unsigned long long)f.reached,
            f.reached < f.objects ? " (the others are garbage the walk saw)" : "");
  }
  for (size_t i = 0; i < f.norder && i < top; i++) {
    const struct dnt__type_path *p = &f.paths.v[f.order[i].path];
    if (json) fprintf(fp, "%s{\"objects\":%llu,\"bytes\":%llu,\"path\":[", i ? "," : "",
                      (unsigned long long)p->objects, (unsigned long long)p->bytes);
    else fprintf(fp, "\n%llu object%s, %llu bytes, held through:\n", (unsigned long long)p->objects,
                 p->objects == 1 ? "" : "s", (unsigned long long)p->bytes);
    if (f.node != DNT__NO_NODE) { /* one object: its own path, each node with its address */
      uint32_t *nodes = types; /* the object's, then up to the root */
      size_t k = 0;
      for (uint32_t v = f.node;; v = f.parent[v]) {
        if (k < MAX_SHOWN) nodes[k++] = v;
        if (v == h->root) break;
      }
      for (size_t j = k; j-- > 0;) {
        uint32_t v = nodes[j];
        if (json) {
          fputs(j + 1 < k ? ",{\"type\":" : "{\"type\":", fp);
          put_name(fp, h, h->type[v], 1);
          if (h->address[v]) fprintf(fp, ",\"address\":\"0x%llx\"", (unsigned long long)h->address[v]);
          fputc('}', fp);
        } else {
          fputs("    ", fp);
          if (h->address[v]) fprintf(fp, "0x%llx ", (unsigned long long)h->address[v]);
          put_name(fp, h, h->type[v], 0);
          fputc('\n', fp);
        }
      }
    } else {
      size_t k = path_types(&f.paths, f.order[i].path, types, MAX_SHOWN);
      for (size_t j = 0; j < k; j++) {
        if (json) {
          fputs(j ? ",{\"type\":" : "{\"type\":", fp);
          put_name(fp, h, types[j], 1);
          fputc('}', fp);
        } else {
          fputs("    ", fp);
          put_name(fp, h, types[j], 0);
          fputc('\n', fp);
        }
      }
    }
    if (json) fputs("]}", fp);
  }
  if (json) fputs("]}\n", fp);
  free(types);
  found_release(&f);
  return 0;
}
