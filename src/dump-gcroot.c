/* dump analyze's gcroot: what keeps an object alive, as dotnet-dump's gcroot prints it: each root
 * that leads to it (the GC's strong and pinned handles, the objects ready for finalization, then
 * each thread's stack slots, frame by frame), the chain of objects from that root to it (a static
 * field named where the chain leaves the runtime's array of statics), and the count of roots
 * found. Command-line glue: it prints. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dnt-core.h"
#include "dnt-trace.h"
#include "dump-analyze.h"
#include "util.h"

struct gcroot_options {
  uint64_t target;
  long limit;
  int nostacks;
};

static int parse(int argc, char **argv, struct gcroot_options *o) {
  memset(o, 0, sizeof *o);
  o->limit = -1;
  for (int i = 1; i < argc; i++) {
    const char *w = argv[i];
    char *end = NULL;
    if (strcasecmp(w, "-nostacks") == 0) {
      o->nostacks = 1;
    } else if (strcasecmp(w, "-limit") == 0 && i + 1 < argc) {
      o->limit = strtol(argv[++i], &end, 10);
      if (*end || o->limit < 0) {
        dnt_error("gcroot: -limit takes a count of roots");
        return -1;
      }
    } else if (w[0] == '-' && w[1] && !(w[1] == '0' || strncasecmp(w, "-0x", 3) == 0)) {
      char *safe = dnt_safe_text(w);
      dnt_error("gcroot: '%s' is not an option this gcroot knows (-nostacks, -limit N)", safe);
      free(safe);
      return -1;
    } else {
      o->target = strtoull(w + (strncasecmp(w, "0x", 2) == 0 ? 2 : 0), &end, 16);
      if (*end || !o->target) {
        char *safe = dnt_safe_text(w);
        dnt_error("gcroot: '%s' is not an object's address (hex)", safe);
        free(safe);
        return -1;
      }
    }
  }
  if (!o->target) {
    dnt_error("gcroot: give an object's address (hex)");
    return -1;
  }
  return 0;
}

/* What SOS calls a root of this kind. */
static const char *kind_name(int kind, char *buf, size_t cap) {
  switch (kind) {
  case DNT_CLR_HANDLE_WEAK_SHORT: return "weak short handle";
  case DNT_CLR_HANDLE_WEAK_LONG: return "weak long handle";
  case DNT_CLR_HANDLE_STRONG: return "strong handle";
  case DNT_CLR_HANDLE_PINNED: return "pinned handle";
  case DNT_CLR_HANDLE_REFCOUNTED: return "ref counted handle";
  case DNT_CLR_HANDLE_DEPENDENT: return "dependent handle";
  case DNT_CLR_HANDLE_ASYNC_PINNED: return "async pinned handle";
  case DNT_CLR_HANDLE_SIZED_REF: return "sized ref handle";
  case DNT_CLR_HANDLE_WEAK_NATIVE_COM: return "weak WinRT handle";
  case DNT_CLR_ROOT_FINALIZER: return "finalizer root";
  default: snprintf(buf, cap, "%d", kind); return buf;
  }
}

static char *type_of(struct analysis *a, uint64_t obj) {
  char buf[4096];
  uint64_t mt;
  if (dnt_clr_object_mt(a->clr, obj, &mt) != 0 || dnt_clr_type_name(a->clr, mt, buf, sizeof buf) != 0)
    snprintf(buf, sizeof buf, "<unknown type>");
  return dnt_safe_text(buf);
}

/* "Class.field" when the path begins at the array of the runtime's statics (an Object[]) and its
 * next object is a static's value: the static's class and name, into buf ("" when not). */
static const char *static_of(struct analysis *a, const uint64_t *path, size_t n, char *buf, size_t cap) {
  char type[4096], field[256], klass[4096];
  uint64_t mt, owner, slot;
  buf[0] = 0;
  if (n < 2 || dnt_clr_object_mt(a->clr, path[0], &mt) != 0 || dnt_clr_type_name(a->clr, mt, type, sizeof type) != 0 ||
      strcmp(type, "System.Object[]") != 0 || !(slot = dnt_clr_reference_slot(a->heap, path[0], path[1])) ||
      dnt_clr_static_at(a->clr, slot, &owner, field, sizeof field) != 0)
    return buf;
  if (dnt_clr_type_name(a->clr, owner, klass, sizeof klass) != 0) snprintf(klass, sizeof klass, "Unknown");
  char *safe = dnt_safe_text(klass), *safe_field = dnt_safe_text(field);
  snprintf(buf, cap, "%s.%s", safe, safe_field);
  free(safe), free(safe_field);
  return buf;
}

static void print_path(struct analysis *a, const uint64_t *path, size_t n, const dnt_clr_gcroot *g) {
  char statics[8192], said[8300];
  static_of(a, path, n, statics, sizeof statics);
  snprintf(said, sizeof said, statics[0] ? "(static variable: %s)" : "%s", statics);
  for (size_t i = 0; i < n; i++) {
    char *type = type_of(a, path[i]);
    int dependent = i && dnt_clr_gcroot_dependent_link(g, path[i - 1], path[i]);
    printf("          -> %-16" PRIx64 " %s %s\n", path[i], type, dependent ? "(dependent handle)" : i == 1 ? said : "");
    free(type);
  }
  printf("\n");
}

static void json_path(struct analysis *a, const uint64_t *path, size_t n, const dnt_clr_gcroot *g) {
  char statics[8192];
  static_of(a, path, n, statics, sizeof statics);
  printf("\"path\":[");
  for (size_t i = 0; i < n; i++) {
    char *type = type_of(a, path[i]);
    printf("%s{\"address\":\"0x%" PRIx64 "\",\"type\":", i ? "," : "", path[i]);
    dnt_json_string(stdout, type);
    if (i == 1 && statics[0]) {
      printf(",\"static\":");
      dnt_json_string(stdout, statics);
    }
    printf("%s}", i && dnt_clr_gcroot_dependent_link(g, path[i - 1], path[i]) ? ",\"dependentHandle\":true" : "");
    free(type);
  }
  printf("]");
}

static void print_root(struct analysis *a, const struct dnt_clr_root *root, const struct dnt_clr_root *last,
                       const uint64_t *path, size_t n, const dnt_clr_gcroot *g, int first) {
  char kind[32];
  int finalizer = root->kind == DNT_CLR_ROOT_FINALIZER;
  if (a->o->json) {
    printf("%s{\"kind\":\"%s\",\"address\":\"0x%" PRIx64 "\",", first ? "" : ",",
           kind_name(root->kind, kind, sizeof kind), root->address);
    json_path(a, path, n, g);
    printf("}");
    return;
  }
  if (!last || (last->kind == DNT_CLR_ROOT_FINALIZER) != finalizer) printf(finalizer ? "Finalizer Queue:\n" : "HandleTable:\n");
  printf("    %016" PRIx64 " (%s)\n", root->address, kind_name(root->kind, kind, sizeof kind));
  print_path(a, path, n, g);
}

/* The object a stack root holds, as ClrMD takes it: an interior pointer's object is the one it
 * points into (or, when it points outside the heap, the one its target holds): 0 when none. */
static uint64_t stack_object(struct analysis *a, const struct dnt_clr_stack_root *s) {
  if (!s->interior) return s->object;
  uint64_t obj, at = s->object, target;
  if (dnt_clr_heap_object_before(a->heap, at, &obj) == 0) return obj;
  if (dnt_core_read_u64(a->core, at, &target) == 0 && dnt_clr_heap_object_before(a->heap, target, &obj) == 0)
    return obj;
  return 0;
}

/* A stack root's lines, as dotnet-dump's: the thread (when it changes), the frame (when it
 * changes: its SP, IP, method and source line), the slot (its register and offset, its
 * address), then the path. */
static void print_stack_root(struct analysis *a, uint32_t os_id, const struct dnt_clr_stack_root *s,
                             const struct dnt_clr_stack_root *last, uint32_t last_os_id, const uint64_t *path, size_t n,
                             const dnt_clr_gcroot *g, int first) {
  char name[2048] = "", file[4096];
  uint64_t md = 0, start;
  uint32_t line = 0;
  int named = dnt_clr_code_method(a->clr, s->ip, &md, &start) == 0 && dnt_clr_method_name(a->clr, md, name, sizeof name) == 0;
  int lined = dnt_clr_source_line(a->clr, s->ip, !s->active, file, sizeof file, &line) == 0;
  if (a->o->json) {
    printf("%s{\"kind\":\"stack\",\"thread\":%u,\"sp\":\"0x%" PRIx64 "\",\"ip\":\"0x%" PRIx64 "\",\"method\":",
           first ? "" : ",", os_id, s->sp, s->ip);
    dnt_json_string(stdout, named ? name : "");
    printf(",\"register\":\"%s\",\"offset\":%d,\"address\":\"0x%" PRIx64 "\",\"interior\":%s,\"pinned\":%s,", s->reg,
           s->offset, s->address, s->interior ? "true" : "false", s->pinned ? "true" : "false");
    json_path(a, path, n, g);
    printf("}");
    return;
  }
  if (!last || last_os_id != os_id) printf("Thread %x:\n", os_id);
  if (!last || last_os_id != os_id || last->sp != s->sp || last->ip != s->ip) {
    printf("    %" PRIx64 " %" PRIx64, s->sp, s->ip);
    if (named) {
      char *safe = dnt_safe_text(name);
      printf(" %s", safe);
      free(safe);
      if (lined) {
        safe = dnt_safe_text(file);
        printf(" [%s @ %u]", safe, line);
        free(safe);
      }
    }
    printf("\n");
  }
  printf("        %s", s->reg);
  if (s->offset > 0) printf("+%x", (unsigned)s->offset);
  else if (s->offset < 0) printf("-%x", (unsigned)-(int64_t)s->offset);
  printf(":");
  if (s->address) printf(" %016" PRIx64, s->address);
  printf("\n");
  print_path(a, path, n, g);
}

/* The roots on the threads' stacks (the live ones, in the thread store's order): 0, or 1 out of
 * memory; *found counts those printed. */
static int stack_roots(struct analysis *a, dnt_clr_gcroot *g, long limit, long *found) {
  struct dnt_clr_threads ts;
  char err[512];
  if (dnt_clr_threads_read(a->clr, &ts, err, sizeof err) != 0) {
    dnt_warning("gcroot: the threads cannot be read (%s): their stacks were not searched", err);
    return 0;
  }
  int rc = 0;
  struct dnt_clr_stack_root last = {0};
  uint32_t last_os_id = 0;
  int any = 0;
  for (size_t i = 0; i < ts.n && !rc && (limit < 0 || *found < limit); i++) {
    const struct dnt_clr_thread *t = &ts.v[i];
    if (t->state & (DNT_CLR_TS_UNSTARTED | DNT_CLR_TS_DEAD)) continue;
    struct dnt_clr_stack_root *v;
    size_t n;
    if (dnt_clr_stack_roots(a->clr, t, &v, &n) != 0) {
      dnt_warning("gcroot: the stack of thread 0x%x cannot be walked: its roots were not searched", t->os_id);
      continue;
    }
    for (size_t k = 0; k < n && (limit < 0 || *found < limit); k++) {
      uint64_t obj = stack_object(a, &v[k]), *path;
      size_t len;
      if (!obj) continue;
      if (dnt_clr_gcroot_path(g, obj, &path, &len) != 0) {
        rc = 1;
        break;
      }
      if (len) {
        print_stack_root(a, t->os_id, &v[k], any ? &last : NULL, last_os_id, path, len, g, *found == 0);
        last = v[k], last_os_id = t->os_id, any = 1;
        ++*found;
      }
      free(path);
    }
    free(v);
  }
  dnt_clr_threads_release(&ts);
  return rc;
}

int dnt_analyze_gcroot(struct analysis *a, int argc, char **argv) {
  struct gcroot_options o;
  if (parse(argc, argv, &o) != 0) return 1;
  dnt_clr_heap *h = dnt_analyze_heap(a, "gcroot");
  if (!h) return 1;
  char err[512];
  struct dnt_clr_root *handles = NULL, *finalizer = NULL;
  size_t nhandles = 0, nfinalizer = 0;
  if (dnt_clr_handles(h, &handles, &nhandles, err, sizeof err) != 0) {
    dnt_error("gcroot: %s", err);
    return 1;
  }
  dnt_clr_gcroot *g = NULL;
  if (dnt_clr_finalizer_roots(h, &finalizer, &nfinalizer) != 0 ||
      dnt_clr_gcroot_new(&g, h, o.target, handles, nhandles) != 0) {
    free(handles), free(finalizer);
    dnt_error("gcroot: out of memory");
    return 1;
  }
  uint64_t mt, size;
  int valid = dnt_clr_heap_object(h, o.target, &mt, &size) == 0;
  if (!valid && !a->o->json) printf("Warning: %" PRIx64 " is not a valid object\n", o.target);
  if (a->o->json)
    printf("{\"command\":\"gcroot\",\"target\":\"0x%" PRIx64 "\",\"valid\":%s,\"roots\":[", o.target, valid ? "true" : "false");
  long found = 0;
  int rc = 0;
  const struct dnt_clr_root *last = NULL;
  for (size_t i = 0; i < nhandles + nfinalizer && (o.limit < 0 || found < o.limit); i++) {
    const struct dnt_clr_root *root = i < nhandles ? &handles[i] : &finalizer[i - nhandles];
    if (!dnt_clr_root_is_strong(root->kind)) continue;
    uint64_t *path;
    size_t n;
    if (dnt_clr_gcroot_path(g, root->object, &path, &n) != 0) {
      rc = 1;
      break;
    }
    if (n) print_root(a, root, last, path, n, g, found == 0), found++, last = root;
    free(path);
  }
  if (!rc && !o.nostacks) rc = stack_roots(a, g, o.limit, &found);
  if (a->o->json) printf("],\"found\":%ld,\"stacksSearched\":%s}\n", found, o.nostacks ? "false" : "true");
  else printf("Found %ld unique roots.\n", found);
  fflush(stdout);
  if (rc) dnt_error("gcroot: out of memory");
  dnt_clr_gcroot_free(g);
  free(handles), free(finalizer);
  return rc;
}
