/* The trace's method table: the first link of the profile's naming chain (profile-int.h). The
 * links after it (perf maps, perf's symbols) are the caller's, added with
 * dnt_profile_add_resolver. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "profile-int.h"

struct dnt__method {
  uint64_t start, end, module_id;
  char *name;
  uint32_t seq; /* load order: a later load of the same range wins */
};

struct dnt__module {
  uint64_t id;
  char *name;
};

/* A UTF-16 string of the payload as a new string; NULL when it is not there (*oom: or no memory). */
static char *read_wstr(ntr_payload *c, int *oom) {
  char buf[1024];
  if (ntr_payload_utf16z(c, buf, sizeof buf, NULL) != 0) return NULL;
  char *s = strdup(buf);
  if (!s) *oom = 1;
  return s;
}

/* MethodLoadVerbose / MethodDCStartVerbose / MethodDCEndVerbose (version 1 and 2 layout). */
int dnt__methods_on_method(struct dnt__methods *t, const ntr_event *ev) {
  ntr_payload c;
  ntr_payload_init(&c, ev->payload, ev->payload_size);
  uint64_t method_id, module_id, start;
  uint32_t size, token, flags;
  if (ntr_payload_u64(&c, &method_id) || ntr_payload_u64(&c, &module_id) || ntr_payload_u64(&c, &start) ||
      ntr_payload_u32(&c, &size) || ntr_payload_u32(&c, &token) || ntr_payload_u32(&c, &flags))
    return 0;
  int oom = 0;
  char *ns = read_wstr(&c, &oom), *name = read_wstr(&c, &oom), *full = NULL;
  if (ns && name && size) {
    size_t n = strlen(ns) + strlen(name) + 2;
    if ((full = malloc(n))) snprintf(full, n, "%s%s%s", ns, *ns ? "." : "", name);
    if (full && t->n == t->cap) {
      size_t cap = t->cap ? 2 * t->cap : 64;
      struct dnt__method *v = realloc(t->v, cap * sizeof *v);
      if (v) t->v = v, t->cap = cap;
    }
    if (full && t->n < t->cap) {
      t->v[t->n] = (struct dnt__method){start, start + size, module_id, full, (uint32_t)t->n};
      t->n++;
      t->sorted = 0;
      full = NULL;
    } else {
      oom = 1;
    }
  }
  free(full);
  free(ns);
  free(name);
  return oom ? -ENOMEM : 0;
}

/* ModuleLoad / ModuleDCStart / ModuleDCEnd: the module's IL path names its frames. */
int dnt__methods_on_module(struct dnt__methods *t, const ntr_event *ev) {
  ntr_payload c;
  ntr_payload_init(&c, ev->payload, ev->payload_size);
  uint64_t module_id, assembly_id;
  uint32_t flags, reserved;
  if (ntr_payload_u64(&c, &module_id) || ntr_payload_u64(&c, &assembly_id) || ntr_payload_u32(&c, &flags) ||
      ntr_payload_u32(&c, &reserved))
    return 0;
  int oom = 0;
  char *path = read_wstr(&c, &oom);
  if (!path) return oom ? -ENOMEM : 0;
  char native[1024];
  if (ntr_payload_utf16z(&c, native, sizeof native, NULL) == 0 && strcmp(native, path) == 0) {
    /* CoreCLR's NGEN image logged as its own IL image ("Foo.ni.dll" as both paths, the Tizen
     * traces): the module is the assembly Foo, as TraceEvent names it (when the two paths are
     * the same, it drops the ".ni" of a ".ni." within the path's last 7 characters). */
    size_t len = strlen(path), from = len > 7 ? len - 7 : 0;
    for (size_t i = len >= 4 ? len - 4 + 1 : 0; i-- > from;)
      if (strncasecmp(path + i, ".ni.", 4) == 0) {
        memmove(path + i, path + i + 3, len - i - 3 + 1);
        break;
      }
  }
  const char *base = strrchr(path, '/');
  if (!base) base = strrchr(path, '\\');
  base = base ? base + 1 : path;
  /* the file name without its directory and .dll/.exe, in place */
  size_t len = strlen(base);
  memmove(path, base, len + 1);
  if (len > 4 && (strcasecmp(path + len - 4, ".dll") == 0 || strcasecmp(path + len - 4, ".exe") == 0))
    path[len - 4] = '\0';
  if (t->nmods == t->capmods) {
    size_t cap = t->capmods ? 2 * t->capmods : 64;
    struct dnt__module *v = realloc(t->mods, cap * sizeof *v);
    if (!v) {
      free(path);
      return -ENOMEM;
    }
    t->mods = v;
    t->capmods = cap;
  }
  t->mods[t->nmods++] = (struct dnt__module){module_id, path};
  t->sorted = 0;
  return 0;
}

static int by_start(const void *a, const void *b) {
  const struct dnt__method *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int by_module_id(const void *a, const void *b) {
  const struct dnt__module *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}

static const char *module_name(const struct dnt__methods *t, uint64_t id) {
  size_t lo = 0, hi = t->nmods;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->mods[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < t->nmods && t->mods[lo].id == id ? t->mods[lo].name : NULL;
}

/* The method whose code holds ip: the last-loaded of those starting at or before it. */
static const struct dnt__method *find_method(const struct dnt__methods *t, uint64_t ip) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->v[mid].start <= ip) lo = mid + 1;
    else hi = mid;
  }
  /* walk back over the few ranges that start before ip; stop at the first that covers it */
  for (size_t i = lo, steps = 0; i > 0 && steps < 8; i--, steps++)
    if (ip < t->v[i - 1].end) return &t->v[i - 1];
  return NULL;
}

int dnt__methods_name(struct dnt__methods *t, uint64_t ip, int leaf, char *buf, size_t cap) {
  if (!t->sorted) {
    if (t->n) qsort(t->v, t->n, sizeof *t->v, by_start);
    if (t->nmods) qsort(t->mods, t->nmods, sizeof *t->mods, by_module_id);
    t->sorted = 1;
  }
  /* a caller frame holds a return address: the call itself is the byte before */
  const struct dnt__method *m = find_method(t, leaf ? ip : ip - 1);
  if (!m) return 0;
  const char *mod = module_name(t, m->module_id);
  snprintf(buf, cap, "%s!%s", mod ? mod : "?", m->name);
  return 1;
}

void dnt__methods_release(struct dnt__methods *t) {
  for (size_t i = 0; i < t->n; i++) free(t->v[i].name);
  for (size_t i = 0; i < t->nmods; i++) free(t->mods[i].name);
  free(t->v);
  free(t->mods);
  memset(t, 0, sizeof *t);
}
