/* The trace's method table: the first link of the profile's naming chain (profile-int.h). The
 * links after it (perf maps, perf's symbols) are the caller's, added with
 * dnt_profile_add_resolver. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile-int.h"
#include "r2r-int.h"

/* the largest image read (CoreLib's is 15 MB): how far from its methods an address can be in it */
#define IMAGE_MAX (64ull << 20)

struct dnt__method {
  uint64_t start, end, module_id;
  char *name;
  uint32_t seq;   /* load order: a later load of the same range wins */
  int in_image;   /* precompiled code, in its module's image: neither jitted nor dynamic */
  uint32_t token; /* its MethodDef token */
};

/* The part of a module's image its precompiled methods span, lowest start to highest end, and
 * the image itself once read from its file (r2r-int.h): where the runtime mapped it, found from
 * a method the rundown named (its start less its RVA in the file). */
struct dnt__image_span {
  uint64_t lo, hi, module_id;
  int state;                       /* 0: not read yet, 1: read, -1: cannot be */
  struct dnt__r2r *image;
  uint64_t base, end;
};

enum { METHOD_DYNAMIC = 0x1, METHOD_JITTED = 0x8, METHOD_JIT_HELPER = 0x10 };

struct dnt__module {
  uint64_t id;
  char *name;
  char *path; /* as the trace gives it */
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
      int in_image = !(flags & (METHOD_DYNAMIC | METHOD_JITTED | METHOD_JIT_HELPER));
      t->v[t->n] = (struct dnt__method){start, start + size, module_id, full, (uint32_t)t->n, in_image, token};
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
  char *full = strdup(path);
  if (!full) {
    free(path);
    return -ENOMEM;
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
      free(full);
      return -ENOMEM;
    }
    t->mods = v;
    t->capmods = cap;
  }
  t->mods[t->nmods++] = (struct dnt__module){module_id, path, full};
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

static const struct dnt__module *module_of(const struct dnt__methods *t, uint64_t id) {
  size_t lo = 0, hi = t->nmods;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->mods[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < t->nmods && t->mods[lo].id == id ? &t->mods[lo] : NULL;
}

static const char *module_name(const struct dnt__methods *t, uint64_t id) {
  const struct dnt__module *m = module_of(t, id);
  return m ? m->name : NULL;
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

static int by_span_module(const void *a, const void *b) {
  const struct dnt__image_span *x = a, *y = b;
  return x->module_id < y->module_id ? -1 : x->module_id > y->module_id;
}

static int by_span_start(const void *a, const void *b) {
  const struct dnt__image_span *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Each module's image span, from its precompiled methods (none when out of memory: the frames
 * stay unnamed); spans that overlap another module's are dropped (they cannot be told apart). */
static void make_spans(struct dnt__methods *t) {
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++) n += t->v[i].in_image;
  if (!n || !(t->spans = malloc(n * sizeof *t->spans))) return;
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].in_image)
      t->spans[t->nspans++] = (struct dnt__image_span){.lo = t->v[i].start, .hi = t->v[i].end, .module_id = t->v[i].module_id};
  qsort(t->spans, t->nspans, sizeof *t->spans, by_span_module);
  size_t out = 0;
  for (size_t i = 0; i < t->nspans; i++) {
    if (out && t->spans[out - 1].module_id == t->spans[i].module_id) {
      if (t->spans[i].lo < t->spans[out - 1].lo) t->spans[out - 1].lo = t->spans[i].lo;
      if (t->spans[i].hi > t->spans[out - 1].hi) t->spans[out - 1].hi = t->spans[i].hi;
    } else {
      t->spans[out++] = t->spans[i];
    }
  }
  qsort(t->spans, out, sizeof *t->spans, by_span_start);
  size_t kept = 0;
  for (size_t i = 0; i < out; i++) {
    int overlaps = (i > 0 && t->spans[i - 1].hi > t->spans[i].lo) || (i + 1 < out && t->spans[i].hi > t->spans[i + 1].lo);
    if (!overlaps) t->spans[kept++] = t->spans[i];
  }
  t->nspans = kept;
}

static int image_names = 1; /* dnt_profile_image_names */

void dnt_profile_image_names(int on) { image_names = on; }

/* (r2r-int.h) A mapping costs memory only for the pages the lookups touch: the headers, the
 * tables, the names (a file cut while mapped would fault; the runtime's images are replaced, never
 * written in place). */
uint8_t *dnt__map_file(const char *path, size_t max, size_t *len) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return NULL;
  struct stat st;
  void *m = MAP_FAILED;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= max) {
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    *len = (size_t)st.st_size;
  }
  close(fd);
  return m == MAP_FAILED ? NULL : m;
}

/* Reads span's image from its module's file and finds where the runtime mapped it: every
 * precompiled method the trace named (up to 16) must sit at the same distance from its RVA in
 * the file, else the file is not the image the process ran. */
static void read_image(struct dnt__methods *t, struct dnt__image_span *sp) {
  sp->state = -1;
  const struct dnt__module *m = module_of(t, sp->module_id);
  size_t len;
  uint8_t *bytes = m && m->path ? dnt__map_file(m->path, DNT__MAX_IMAGE, &len) : NULL;
  struct dnt__r2r *r = bytes ? dnt__r2r_open(bytes, len, 1) : NULL;
  if (!r) return;
  uint64_t base = 0;
  int agree = 0;
  for (size_t i = 0; i < t->n && agree < 16; i++) {
    const struct dnt__method *x = &t->v[i];
    if (!x->in_image || x->module_id != sp->module_id) continue;
    uint32_t rva = dnt__r2r_method_rva(r, x->token);
    if (!rva) continue;
    if (agree && x->start - rva != base) {
      dnt__r2r_free(r);
      return;
    }
    base = x->start - rva, agree++;
  }
  if (!agree || sp->lo < base || sp->hi - base > dnt__r2r_image_size(r)) {
    dnt__r2r_free(r);
    return;
  }
  sp->image = r, sp->base = base, sp->end = base + dnt__r2r_image_size(r), sp->state = 1;
}

/* The name of ip in a module's image read from its file (`Module!Type.Method`, or
 * `Module!0xADDR` in code that is no MethodDef's): 1, or 0 when no image holds it. The images
 * near ip are read the first time an address there needs them. */
static int name_from_image(struct dnt__methods *t, uint64_t ip, char *buf, size_t cap) {
  for (size_t i = 0; i < t->nspans; i++) {
    struct dnt__image_span *sp = &t->spans[i];
    /* an image holds its methods' span: ip is in it only when within an image's size of them */
    if (sp->state == 0 && ip + IMAGE_MAX >= sp->hi && ip <= sp->lo + IMAGE_MAX) read_image(t, sp);
    if (sp->state != 1 || ip < sp->base || ip >= sp->end) continue;
    const char *mod = module_name(t, sp->module_id);
    char method[1024];
    if (dnt__r2r_name(sp->image, (uint32_t)(ip - sp->base), method, sizeof method))
      snprintf(buf, cap, "%s!%s", mod ? mod : "?", method);
    else
      snprintf(buf, cap, "%s!0x%llx", mod ? mod : "?", (unsigned long long)ip);
    return 1;
  }
  return 0;
}

/* The module whose image span holds ip, or NULL. */
static const struct dnt__image_span *find_span(const struct dnt__methods *t, uint64_t ip) {
  size_t lo = 0, hi = t->nspans;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->spans[mid].lo <= ip) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && ip < t->spans[lo - 1].hi ? &t->spans[lo - 1] : NULL;
}

int dnt__methods_name(struct dnt__methods *t, uint64_t ip, int leaf, char *buf, size_t cap) {
  if (!t->sorted) {
    if (t->n) qsort(t->v, t->n, sizeof *t->v, by_start);
    if (t->nmods) qsort(t->mods, t->nmods, sizeof *t->mods, by_module_id);
    for (size_t i = 0; i < t->nspans; i++) dnt__r2r_free(t->spans[i].image);
    free(t->spans);
    t->spans = NULL;
    t->nspans = 0;
    make_spans(t);
    t->sorted = 1;
  }
  /* a caller frame holds a return address: the call itself is the byte before */
  const struct dnt__method *m = find_method(t, leaf ? ip : ip - 1);
  if (!m) {
    if (!image_names) return 0;
    if (name_from_image(t, leaf ? ip : ip - 1, buf, cap)) return 1;
    const struct dnt__image_span *sp = find_span(t, leaf ? ip : ip - 1);
    const char *mod = sp ? module_name(t, sp->module_id) : NULL;
    if (!mod) return 0;
    snprintf(buf, cap, "%s!0x%llx", mod, (unsigned long long)ip);
    return 1;
  }
  const char *mod = module_name(t, m->module_id);
  snprintf(buf, cap, "%s!%s", mod ? mod : "?", m->name);
  return 1;
}

void dnt__methods_release(struct dnt__methods *t) {
  for (size_t i = 0; i < t->n; i++) free(t->v[i].name);
  for (size_t i = 0; i < t->nmods; i++) free(t->mods[i].name), free(t->mods[i].path);
  for (size_t i = 0; i < t->nspans; i++) dnt__r2r_free(t->spans[i].image);
  free(t->v);
  free(t->mods);
  free(t->spans);
  memset(t, 0, sizeof *t);
}
