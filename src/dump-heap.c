/* dump analyze's dumpheap: the GC heap's objects as SOS's dumpheap lists them (dotnet-dump's, which
 * is ClrMD's walk): without -stat each object (address, MethodTable, size), then the statistics:
 * a row per MethodTable (count, total size, type name) sorted by total size (or -bycount), ties in
 * the order the walk first met the type, and the totals. -type keeps the types whose name holds
 * the text (case-sensitive, as SOS), -mt one MethodTable. Command-line glue: it prints. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-core.h"
#include "dnt-trace.h"
#include "dump-analyze.h"
#include "util.h"

struct dumpheap_args {
  int stat, short_, bycount;
  const char *type;
  uint64_t mt;
};

static int parse_args(int argc, char **argv, struct dumpheap_args *d) {
  memset(d, 0, sizeof *d);
  for (int i = 1; i < argc; i++) {
    const char *w = argv[i];
    if (strcasecmp(w, "-stat") == 0) {
      d->stat = 1;
    } else if (strcasecmp(w, "-short") == 0) {
      d->short_ = 1;
    } else if (strcasecmp(w, "-bycount") == 0) {
      d->bycount = 1;
    } else if (strcasecmp(w, "-noprogress") == 0) { /* SOS's; the progress line here is on a terminal only */
    } else if (strcasecmp(w, "-type") == 0 && i + 1 < argc) {
      d->type = argv[++i];
    } else if (strcasecmp(w, "-mt") == 0 && i + 1 < argc) {
      char *end;
      const char *v = argv[++i];
      d->mt = strtoull(v + (strncasecmp(v, "0x", 2) == 0 ? 2 : 0), &end, 16);
      if (*end || !d->mt) {
        char *safe = dnt_safe_text(v);
        dnt_error("dumpheap: '%s' is not a MethodTable's address (hex)", safe);
        free(safe);
        return -1;
      }
    } else {
      char *safe = dnt_safe_text(w);
      dnt_error("dumpheap: '%s' is not an option this dumpheap knows (-stat, -type NAME, -mt MT, -short, -bycount)",
                safe);
      free(safe);
      return -1;
    }
  }
  return 0;
}

/* A MethodTable's name as SOS shows it: "Free" for the free-space type, the type's name, or
 * SOS's placeholder when it cannot be named. */
static char *name_of(struct analysis *a, uint64_t mt, uint64_t free_mt) {
  char buf[4096];
  if (mt == free_mt) snprintf(buf, sizeof buf, "Free");
  else if (dnt_clr_type_name(a->clr, mt, buf, sizeof buf) != 0) snprintf(buf, sizeof buf, "<unknown_type_%" PRIx64 ">", mt);
  return strdup(buf);
}

struct row {
  struct dnt_clr_type_stat s;
  char *name;
  size_t seen; /* the order the walk first met it: ties keep it */
};

static int by_size(const void *x, const void *y) {
  const struct row *a = x, *b = y;
  if (a->s.size != b->s.size) return a->s.size < b->s.size ? -1 : 1;
  return a->seen < b->seen ? -1 : a->seen > b->seen;
}

static int by_count(const void *x, const void *y) {
  const struct row *a = x, *b = y;
  if (a->s.count != b->s.count) return a->s.count < b->s.count ? -1 : 1;
  return a->seen < b->seen ? -1 : a->seen > b->seen;
}

/* n with thousands' commas, as .NET's "n0". */
static const char *commas(uint64_t n, char buf[32]) {
  char digits[24];
  int len = snprintf(digits, sizeof digits, "%" PRIu64, n), o = 0;
  for (int i = 0; i < len; i++) {
    if (i && (len - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

static int width_of(uint64_t v, int hex) {
  char b[32];
  return hex ? snprintf(b, sizeof b, "%012" PRIx64, v) : (int)strlen(commas(v, b));
}

#define FRAGMENT_MIN (512u * 1024) /* SOS reports free blocks this large that objects follow */

struct fragment {
  uint64_t free, size, next, next_mt;
};

/* The listing walk: the MethodTables kept (sorted), and the fragmentation SOS reports after the
 * statistics: a free object of 512 KB or more that a (valid, not free) object directly follows,
 * outside the large object heap. */
struct listing {
  const uint64_t *mts;
  size_t n;
  int list, short_, json, any, oom;
  int noted; /* the fragmentation was seen already (by the counting walk) */
  uint64_t free_mt;
  struct dnt_clr_object last_free;
  struct fragment *frags;
  size_t nfrags, capfrags;
};

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

static void note_fragment(struct listing *l, const struct dnt_clr_object *o) {
  const struct dnt_clr_object *f = &l->last_free;
  if (f->size && o->valid && o->mt != l->free_mt && f->address + f->size == o->address && o->region->generation != 3) {
    if (l->nfrags == l->capfrags) {
      size_t cap = l->capfrags ? l->capfrags * 2 : 16;
      struct fragment *v = realloc(l->frags, cap * sizeof *v);
      if (!v) return (void)(l->oom = 1);
      l->frags = v, l->capfrags = cap;
    }
    l->frags[l->nfrags++] = (struct fragment){f->address, f->size, o->address, o->mt};
  }
  if (o->valid && o->mt == l->free_mt && o->size >= FRAGMENT_MIN) l->last_free = *o;
  else l->last_free.size = 0;
}

/* The counting walk's look at every object (no filter): the fragmentation. Keeps them all. */
static int fragment_of(void *ud, const struct dnt_clr_object *o) {
  struct listing *l = ud;
  if (!l->short_) note_fragment(l, o);
  return 1;
}

static int list_object(void *ud, const struct dnt_clr_object *o) {
  struct listing *l = ud;
  if (!bsearch(&o->mt, l->mts, l->n, sizeof *l->mts, cmp_u64)) return 0;
  if (!l->short_ && !l->noted) note_fragment(l, o);
  if (!l->list) return 0;
  if (l->json) {
    printf("%s{\"address\":\"0x%" PRIx64 "\",\"mt\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 "}", l->any ? "," : "",
           o->address, o->mt, o->size);
  } else if (l->short_) {
    printf("%012" PRIx64 "\n", o->address);
  } else {
    char addr[24], table[24], bytes[32];
    if (!l->any) printf("%16s %16s %14s\n", "Address", "MT", "Size");
    snprintf(addr, sizeof addr, "%012" PRIx64, o->address);
    snprintf(table, sizeof table, "%012" PRIx64, o->mt);
    printf("%16s %16s %14s %s\n", addr, table, o->valid ? commas(o->size, bytes) : "",
           o->valid && o->mt == l->free_mt ? "Free" : "");
  }
  l->any = 1;
  return 0;
}

static void print_fragments(struct analysis *a, const struct listing *l, uint64_t free_mt) {
  if (!l->nfrags) return;
  if (a->o->json) {
    printf(",\"fragmentation\":[");
    for (size_t i = 0; i < l->nfrags; i++)
      printf("%s{\"address\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"followedBy\":\"0x%" PRIx64 "\"}", i ? "," : "",
             l->frags[i].free, l->frags[i].size, l->frags[i].next);
    printf("]");
    return;
  }
  printf("\nFragmented blocks larger than 0.5 MB:\n%16s %14s %16s\n", "Address", "Size", "Followed By");
  for (size_t i = 0; i < l->nfrags; i++) {
    char addr[24], next[24], bytes[32];
    char *name = name_of(a, l->frags[i].next_mt, free_mt);
    char *safe = dnt_safe_text(name ? name : "Unknown");
    snprintf(addr, sizeof addr, "%012" PRIx64, l->frags[i].free);
    snprintf(next, sizeof next, "%012" PRIx64, l->frags[i].next);
    printf("%16s %14s %16s %s\n", addr, commas(l->frags[i].size, bytes), next, safe);
    free(safe);
    free(name);
  }
}

int dnt_analyze_dumpheap(struct analysis *a, int argc, char **argv) {
  struct dumpheap_args d;
  if (parse_args(argc, argv, &d) != 0) return 1;
  dnt_clr_heap *h = dnt_analyze_heap(a, "dumpheap");
  if (!h) return 1;
  if (!dnt_clr_heap_valid(h)) {
    dnt_error("dumpheap: the GC heap is not in a valid state for traversal (the core was taken during a collection)");
    return 1;
  }
  uint64_t free_mt = 0, at;
  if (dnt_clr_global(a->clr, "FreeObjectMethodTable", &at) == 0) dnt_core_read_u64(a->core, at, &free_mt);
  struct dnt_clr_type_stat *v;
  struct dnt_clr_walk walk;
  size_t n;
  /* without a filter, the fragmentation is seen in the counting walk: -stat walks once */
  struct listing l = {.short_ = d.short_, .json = a->o->json, .free_mt = free_mt};
  int unfiltered = !d.type && !d.mt;
  if (dnt_clr_heap_stat(h, unfiltered ? fragment_of : NULL, &l, &v, &n, &walk) != 0 || l.oom) {
    dnt_error("dumpheap: out of memory");
    free(l.frags);
    return 1;
  }
  struct row *rows = calloc(n ? n : 1, sizeof *rows);
  uint64_t *kept = calloc(n ? n : 1, sizeof *kept);
  size_t nrows = 0;
  int rc = 0;
  if (!rows || !kept) {
    dnt_error("dumpheap: out of memory");
    rc = 1;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if (d.mt && v[i].mt != d.mt) continue;
    char *name = name_of(a, v[i].mt, free_mt);
    if (!name || (d.type && !strstr(name, d.type))) {
      free(name);
      continue;
    }
    rows[nrows] = (struct row){v[i], name, i};
    kept[nrows++] = v[i].mt;
  }
  /* a second walk: the objects listed, and the fragmentation (with -stat too, as SOS) */
  qsort(kept, nrows, sizeof *kept, cmp_u64);
  l.mts = kept, l.n = nrows, l.list = !d.stat, l.noted = unfiltered;
  if (l.json) printf("{\"command\":\"dumpheap\"%s", l.list ? ",\"objects\":[" : "");
  if (nrows && (l.list || !l.noted) && dnt_clr_heap_walk(h, list_object, &l, &walk) != 0) l.oom = 1;
  if (l.json && l.list) printf("]");
  if (l.oom) {
    if (l.json) printf("}\n");
    dnt_error("dumpheap: out of memory");
    rc = 1;
    goto out;
  }
  if (d.short_) {
    if (l.json) printf("}\n");
    goto out;
  }
  if (l.any && !l.json) printf("\n");
  qsort(rows, nrows, sizeof *rows, d.bycount ? by_count : by_size);
  uint64_t objects = 0, bytes = 0;
  int wcount = 5, wsize = 9, wmt = 2;
  for (size_t i = 0; i < nrows; i++) {
    objects += rows[i].s.count, bytes += rows[i].s.size;
    int w;
    if ((w = width_of(rows[i].s.count, 0)) > wcount) wcount = w;
    if ((w = width_of(rows[i].s.size, 0)) > wsize) wsize = w;
    if ((w = width_of(rows[i].s.mt, 1)) > wmt) wmt = w;
  }
  char b1[32], b2[32];
  if (a->o->json) {
    printf(",\"statistics\":[");
    for (size_t i = 0; i < nrows; i++) {
      printf("%s{\"mt\":\"0x%" PRIx64 "\",\"count\":%" PRIu64 ",\"size\":%" PRIu64 ",\"type\":", i ? "," : "",
             rows[i].s.mt, rows[i].s.count, rows[i].s.size);
      dnt_json_string(stdout, rows[i].name);
      printf("}");
    }
    printf("],\"objects\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"invalid\":%" PRIu64 ",\"unreadableRegions\":%" PRIu64,
           objects, bytes, walk.invalid, walk.missing);
    print_fragments(a, &l, free_mt);
    printf("}\n");
  } else if (nrows) {
    printf("Statistics:\n%*s %*s %*s Class Name\n", wmt, "MT", wcount, "Count", wsize, "TotalSize");
    for (size_t i = 0; i < nrows; i++) {
      char *safe = dnt_safe_text(rows[i].name);
      printf("%*" PRIx64 " %*s %*s %s\n", wmt, rows[i].s.mt, wcount, commas(rows[i].s.count, b1), wsize,
             commas(rows[i].s.size, b2), safe);
      free(safe);
    }
    printf("Total %s objects, %s bytes\n", commas(objects, b1), commas(bytes, b2));
    print_fragments(a, &l, free_mt);
  }
  if (walk.missing)
    dnt_warning("dumpheap: the core does not hold the memory of %" PRIu64 " heap region(s) (a mini dump holds none): "
                "their objects are not counted",
                walk.missing);
out:
  for (size_t i = 0; i < nrows; i++) free(rows[i].name);
  free(rows);
  free(kept);
  free(l.frags);
  free(v);
  return rc;
}

/* ---- eeheap -gc ---- */

#define PAGE_MASK 0xfffull /* a region's committed memory begins on the page its objects do */

static void size_text(uint64_t n, char *buf, size_t cap) {
  if (n) snprintf(buf, cap, "0x%" PRIx64 " (%" PRIu64 ")", n, n);
  else buf[0] = '\0';
}

static uint64_t committed_of(const struct dnt_clr_region *g) {
  uint64_t from = g->start & ~PAGE_MASK;
  return g->committed > from ? g->committed - from : 0;
}

static void segment_header(int w) {
  printf("%16s %16s %16s %16s %-*s %-*s\n", "segment", "begin", "allocated", "committed", w, "allocated size", w,
         "committed size");
}

static void segment_row(const struct dnt_clr_region *g, int w) {
  char seg[24], begin[24], end[24], committed[24], used[48], held[48];
  snprintf(seg, sizeof seg, "%012" PRIx64, g->descriptor);
  snprintf(begin, sizeof begin, "%012" PRIx64, g->start);
  snprintf(end, sizeof end, "%012" PRIx64, g->end);
  snprintf(committed, sizeof committed, "%012" PRIx64, g->committed);
  size_text(g->end - g->start, used, sizeof used);
  size_text(committed_of(g), held, sizeof held);
  printf("%16s %16s %16s %16s %-*s %-*s\n", seg, begin, end, committed, w, used, w, held);
}

/* The regions of heap i of a kind (generation 0..4; -1 the frozen ones), by generation then
 * address, into v (the caller's, room for all). */
static size_t regions_of(const struct dnt_clr_region *all, size_t n, int heap, int kind, const struct dnt_clr_region **v) {
  size_t k = 0;
  for (int gen = kind < 0 ? 2 : kind; gen <= (kind == 0 ? 2 : kind < 0 ? 2 : kind); gen++)
    for (size_t i = 0; i < n; i++) /* all is by address */
      if (all[i].heap == heap && all[i].generation == gen && all[i].frozen == (kind < 0)) v[k++] = &all[i];
  return k;
}

int dnt_analyze_eeheap(struct analysis *a, int argc, char **argv) {
  if (argc != 2 || strcasecmp(argv[1], "-gc") != 0) {
    dnt_error("eeheap: only 'eeheap -gc' is read (the GC's heaps; the loader heaps are not yet)");
    return 1;
  }
  dnt_clr_heap *h = dnt_analyze_heap(a, "eeheap");
  if (!h) return 1;
  const struct dnt_clr_region *all;
  size_t n = dnt_clr_heap_regions(h, &all);
  const struct dnt_clr_region **v = calloc(n ? n : 1, sizeof *v);
  if (!v) {
    dnt_error("eeheap: out of memory");
    return 1;
  }
  int w = 14; /* "allocated size" */
  uint64_t used = 0, held = 0;
  for (size_t i = 0; i < n; i++) {
    char t[48];
    size_text(committed_of(&all[i]), t, sizeof t);
    if ((int)strlen(t) > w) w = strlen(t) > 32 ? 32 : (int)strlen(t);
    used += all[i].end - all[i].start, held += committed_of(&all[i]);
  }
  if (a->o->json) {
    printf("{\"command\":\"eeheap\",\"heaps\":%d,\"regions\":[", dnt_clr_heap_count(h));
    for (size_t i = 0; i < n; i++)
      printf("%s{\"heap\":%d,\"generation\":%d,\"frozen\":%s,\"segment\":\"0x%" PRIx64 "\",\"begin\":\"0x%" PRIx64
             "\",\"allocated\":\"0x%" PRIx64 "\",\"committed\":\"0x%" PRIx64 "\"}",
             i ? "," : "", all[i].heap, all[i].generation, all[i].frozen ? "true" : "false", all[i].descriptor,
             all[i].start, all[i].end, all[i].committed);
    printf("],\"allocated\":%" PRIu64 ",\"committed\":%" PRIu64 "}\n", used, held);
    free(v);
    return 0;
  }
  char datas[16] = "";
  if (dnt_clr_heap_datas(h) >= 0) snprintf(datas, sizeof datas, "%d", dnt_clr_heap_datas(h));
  printf("\nDATAS = %s\n========================================\nNumber of GC Heaps: %d\n"
         "----------------------------------------\n",
         datas, dnt_clr_heap_count(h));
  for (int heap = 0; heap < dnt_clr_heap_count(h); heap++) {
    if (dnt_clr_heap_address(h, heap)) /* server GC, even with one heap */
      printf("Heap %d (%016" PRIx64 ")\n", heap, dnt_clr_heap_address(h, heap));
    printf("Small object heap\n");
    segment_header(w);
    size_t k = regions_of(all, n, heap, 0, v);
    for (size_t i = 0; i < k; i++) {
      if (!i || v[i]->generation != v[i - 1]->generation) printf("generation %d:\n", v[i]->generation);
      segment_row(v[i], w);
    }
    if ((k = regions_of(all, n, heap, -1, v))) {
      printf("NonGC heap\n");
      segment_header(w);
      for (size_t i = 0; i < k; i++) segment_row(v[i], w);
    }
    printf("Large object heap\n");
    segment_header(w);
    k = regions_of(all, n, heap, 3, v);
    for (size_t i = 0; i < k; i++) segment_row(v[i], w);
    if ((k = regions_of(all, n, heap, 4, v))) {
      printf("Pinned object heap\n");
      segment_header(w);
      for (size_t i = 0; i < k; i++) segment_row(v[i], w);
    }
    printf("------------------------------\n");
  }
  char t1[48], t2[48];
  size_text(used, t1, sizeof t1);
  size_text(held, t2, sizeof t2);
  printf("GC Allocated Heap Size:    Size: %s bytes.\nGC Committed Heap Size:    Size: %s bytes.\n", t1, t2);
  free(v);
  return 0;
}
