/* heap-view.c: a heap snapshot's reports: the summary and the types by bytes, as a text table or
 * one JSON object. */
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"
#include "dnt-trace.h"

void dnt_heap_write_text(FILE *fp, struct dnt_heap *h, size_t top) {
  size_t n;
  const dnt_heap_type *rows = dnt_heap_types(h, &n);
  const dnt_heap_summary *s = &h->summary;
  fprintf(fp, "Heap snapshot: %llu objects, %llu bytes, %llu references, %llu roots (complete)\n",
          (unsigned long long)s->objects, (unsigned long long)s->bytes, (unsigned long long)s->references,
          (unsigned long long)s->roots);
  fprintf(fp, "%llu objects reached from the roots; a type's retained bytes are what only its objects keep alive\n",
          (unsigned long long)s->reachable);
  fprintf(fp, "\n%15s %15s %12s  %s\n", "Bytes", "Retained", "Objects", "Type");
  for (size_t i = 0; i < n && i < top; i++) {
    fprintf(fp, "%15llu %15llu %12llu  ", (unsigned long long)rows[i].bytes, (unsigned long long)rows[i].retained,
            (unsigned long long)rows[i].count);
    dnt_text_put(fp, rows[i].name);
    fputc('\n', fp);
  }
}

void dnt_heap_write_json(FILE *fp, struct dnt_heap *h, size_t top) {
  size_t n;
  const dnt_heap_type *rows = dnt_heap_types(h, &n);
  const dnt_heap_summary *s = &h->summary;
  fprintf(fp, "{\"objects\":%llu,\"bytes\":%llu,\"references\":%llu,\"roots\":%llu,\"reachable\":%llu,"
              "\"state\":\"complete\",\"types\":[",
          (unsigned long long)s->objects, (unsigned long long)s->bytes, (unsigned long long)s->references,
          (unsigned long long)s->roots, (unsigned long long)s->reachable);
  for (size_t i = 0; i < n && i < top; i++) {
    fputs(i ? ",{\"type\":" : "{\"type\":", fp);
    dnt_json_string(fp, rows[i].name);
    fprintf(fp, ",\"count\":%llu,\"bytes\":%llu,\"retainedBytes\":%llu}", (unsigned long long)rows[i].count,
            (unsigned long long)rows[i].bytes, (unsigned long long)rows[i].retained);
  }
  fputs("]}\n", fp);
}

/* ---- two snapshots ---- */

struct change {
  const char *name;
  const dnt_heap_type *now, *then; /* either may be NULL: a type new or gone */
  int64_t count, bytes, retained;  /* now - then */
};

static int by_name_ptr(const void *x, const void *y) {
  return strcmp((*(const dnt_heap_type *const *)x)->name, (*(const dnt_heap_type *const *)y)->name);
}

static int by_growth(const void *x, const void *y) {
  const struct change *a = x, *b = y;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int64_t minus(uint64_t a, uint64_t b) { return a >= b ? (int64_t)(a - b) : -(int64_t)(b - a); }

/* The rows of rows[0..n) by name, into a new array (NULL when out of memory). */
static const dnt_heap_type **sorted_by_name(const dnt_heap_type *rows, size_t n) {
  const dnt_heap_type **v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return NULL;
  for (size_t i = 0; i < n; i++) v[i] = &rows[i];
  if (n) qsort(v, n, sizeof *v, by_name_ptr);
  return v;
}

int dnt_heap_write_diff(FILE *fp, struct dnt_heap *h, struct dnt_heap *base, size_t top, int json) {
  size_t n, m;
  const dnt_heap_type *now = dnt_heap_types(h, &n), *then = dnt_heap_types(base, &m);
  if (h->failed || base->failed) return -1;
  const dnt_heap_type **a = sorted_by_name(now, n), **b = sorted_by_name(then, m);
  struct change *c = malloc((n + m ? n + m : 1) * sizeof *c);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return -1;
  }
  size_t nc = 0, i = 0, j = 0;
  while (i < n || j < m) {
    int cmp = i == n ? 1 : j == m ? -1 : strcmp(a[i]->name, b[j]->name);
    const dnt_heap_type *x = cmp <= 0 ? a[i++] : NULL, *y = cmp >= 0 ? b[j++] : NULL;
    struct change ch = {x ? x->name : y->name, x, y, 0, 0, 0};
    ch.count = minus(x ? x->count : 0, y ? y->count : 0);
    ch.bytes = minus(x ? x->bytes : 0, y ? y->bytes : 0);
    ch.retained = minus(x ? x->retained : 0, y ? y->retained : 0);
    if (ch.count || ch.bytes || ch.retained) c[nc++] = ch;
  }
  if (nc) qsort(c, nc, sizeof *c, by_growth);
  const dnt_heap_summary *s = &h->summary, *t = &base->summary;
  if (json) {
    fprintf(fp, "{\"objects\":%llu,\"bytes\":%llu,\"baseObjects\":%llu,\"baseBytes\":%llu,\"types\":[",
            (unsigned long long)s->objects, (unsigned long long)s->bytes, (unsigned long long)t->objects,
            (unsigned long long)t->bytes);
  } else {
    fprintf(fp, "Heap change from the base snapshot: %llu -> %llu objects (%+lld), %llu -> %llu bytes (%+lld)\n",
            (unsigned long long)t->objects, (unsigned long long)s->objects, (long long)minus(s->objects, t->objects),
            (unsigned long long)t->bytes, (unsigned long long)s->bytes, (long long)minus(s->bytes, t->bytes));
    fprintf(fp, "%llu types changed, most bytes grown first\n", (unsigned long long)nc);
    fprintf(fp, "\n%15s %15s %12s %15s %12s  %s\n", "Bytes change", "Retained change", "Objects", "Bytes now",
            "Objects now", "Type");
  }
  for (size_t k = 0; k < nc && k < top; k++) {
    const struct change *ch = &c[k];
    if (json) {
      fputs(k ? ",{\"type\":" : "{\"type\":", fp);
      dnt_json_string(fp, ch->name);
      fprintf(fp, ",\"count\":%llu,\"bytes\":%llu,\"retainedBytes\":%llu,\"countChange\":%lld,\"bytesChange\":%lld,"
                  "\"retainedBytesChange\":%lld}",
              (unsigned long long)(ch->now ? ch->now->count : 0), (unsigned long long)(ch->now ? ch->now->bytes : 0),
              (unsigned long long)(ch->now ? ch->now->retained : 0), (long long)ch->count, (long long)ch->bytes,
              (long long)ch->retained);
    } else {
      fprintf(fp, "%+15lld %+15lld %+12lld %15llu %12llu  ", (long long)ch->bytes, (long long)ch->retained,
              (long long)ch->count, (unsigned long long)(ch->now ? ch->now->bytes : 0),
              (unsigned long long)(ch->now ? ch->now->count : 0));
      dnt_text_put(fp, ch->name);
      fputc('\n', fp);
    }
  }
  if (json) fputs("]}\n", fp);
  free(a), free(b), free(c);
  return 0;
}
