/* fuzz-gcdump.c: libFuzzer target for the .gcdump reader (analyze/gcdump-file.c): FastSerialization's
 * header and type objects, the type table, the node labels and blob (compressed integers, children
 * as differences), the addresses and the process's fields, every length and index checked. A file
 * read is reported (types and retained sizes, paths, the profile) and written again; properties:
 * what is written reads back with the same objects, bytes and references, and writes again to the
 * same bytes. Seeds: tests/fuzz/seeds/gcdump (dntrace's own files of a walk written by hand and
 * of the sample's --heap). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-analyze.h"
#include "dnt-profile.h"

static FILE *sink;

static int same_bytes(const struct dnt_heap *a, const struct dnt_heap *b) {
  char *p = NULL, *q = NULL;
  size_t n = 0, m = 0;
  FILE *x = open_memstream(&p, &n), *y = open_memstream(&q, &m);
  char err[128];
  int same = 1;
  if (x && y && dnt_heap_write_gcdump(x, a, NULL, err, sizeof err) == 0 &&
      dnt_heap_write_gcdump(y, b, NULL, err, sizeof err) == 0) {
    fflush(x), fflush(y);
    same = n == m && memcmp(p, q, n) == 0;
  }
  if (x) fclose(x);
  if (y) fclose(y);
  free(p), free(q);
  return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!sink) sink = fopen("/dev/null", "w");
  FILE *fp = fmemopen((void *)data, size ? size : 1, "rb");
  if (!fp) return 0;
  if (!size) fgetc(fp); /* an empty file: fmemopen wants a byte */
  char err[256];
  struct dnt_heap *h = dnt_heap_read_gcdump(fp, err, sizeof err);
  fclose(fp);
  if (!h) return 0;
  const dnt_heap_summary *s = dnt_heap_summary_of(h);
  if (s) {
    if (s->reachable > s->objects) abort();
    dnt_heap_write_text(sink, h, 10);
    dnt_heap_write_json(sink, h, 10);
    dnt_heap_write_paths(sink, h, "System", 5, 0, err, sizeof err);
    struct dnt_profile *p = dnt_heap_profile(h);
    if (p) dnt_profile_write(p, DNT_PROFILE_FOLDED, "heap", sink);
    dnt_profile_free(p);
    /* written and read again: the same graph */
    char *buf = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&buf, &n);
    if (out && dnt_heap_write_gcdump(out, h, NULL, err, sizeof err) == 0) {
      fflush(out);
      FILE *in = fmemopen(buf, n ? n : 1, "rb");
      struct dnt_heap *back = in ? dnt_heap_read_gcdump(in, err, sizeof err) : NULL;
      if (in) fclose(in);
      if (in && !back && strcmp(err, "out of memory") != 0) abort(); /* our own file refused */
      const dnt_heap_summary *t = back ? dnt_heap_summary_of(back) : NULL;
      if (t && (t->objects != s->objects || t->bytes != s->bytes || t->references != s->references)) abort();
      if (back && !same_bytes(h, back)) abort();
      dnt_heap_free(back);
    }
    if (out) fclose(out);
    free(buf);
  }
  dnt_heap_free(h);
  return 0;
}
