/* fuzz-coredump.c: libFuzzer target for `dntrace dump analyze`'s readers (coredump/): an input
 * that begins with '{' is the runtime's JSON descriptor (json.c), anything else a core file
 * (core.c: ELF header, program headers, notes; reads of its memory), and the runtime looked for
 * in it (clr.c: its mapped files, the library's symbol table, the descriptor) with the managed
 * threads, their exceptions (objects.c) and stacks (stack.c, code.c: the code map, unwind data,
 * Frames, MethodDescs; stackroots.c, gcinfo.c: their roots), and the heap (heap.c: the GC's variables, its regions, the walk, the
 * types' names; fields.c: their fields and the types of those; roots.c, gcroot.c, statics.c: the
 * handles, the finalizer queue, gcroot's search and the statics it names) when one is found. Seeds: tests/fuzz/seeds/elfcore (real cores without memory) and
 * tests/fuzz/seeds/coredump (descriptor-shaped JSON written here). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"
#include "fuzz-file.h"

static void json(const uint8_t *data, size_t size) {
  struct json_tree t;
  char err[256];
  if (dnt__json_parse(&t, (const char *)data, size, err, sizeof err) == 0) {
    if (!t.n) abort();
    for (size_t i = 0; i < t.n; i++) /* every link stays inside the tree */
      if ((t.v[i].child >= 0 && (size_t)t.v[i].child >= t.n) || (t.v[i].next >= 0 && (size_t)t.v[i].next >= t.n))
        abort();
    (void)dnt__json_member(&t, 0, "types");
  }
  dnt__json_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size && data[0] == '{') {
    json(data, size);
    return 0;
  }
  char path[32], err[512];
  int fd = fuzz_file(data, size, path, sizeof path);
  (void)fd;
  dnt_core *c;
  if (dnt_core_open(&c, path, err, sizeof err) != 0) return 0;
  const struct dnt_core_mapping *maps;
  size_t n = dnt_core_mappings(c, &maps);
  for (size_t i = 0; i < n; i++) {
    uint8_t b[16];
    if (!maps[i].path) abort();
    (void)dnt_core_read(c, maps[i].start, b, sizeof b);
    (void)dnt_core_read(c, maps[i].end - 8, b, sizeof b);
  }
  dnt_clr *r;
  if (dnt_clr_open(&r, c, NULL, err, sizeof err) == 0) {
    struct dnt_clr_threads ts;
    if (dnt_clr_threads_read(r, &ts, err, sizeof err) == 0) {
      for (size_t i = 0; i < ts.n; i++) { /* the exceptions on them, as clrthreads and pe read them */
        struct dnt_clr_exception e;
        if (ts.v[i].last_thrown && dnt_clr_exception_read(r, ts.v[i].last_thrown, &e, err, sizeof err) == 0)
          dnt_clr_exception_release(&e);
        struct dnt_clr_frame *f; /* its stack, as clrstack walks and names it */
        size_t nf;
        char name[512];
        if (dnt_clr_stack_walk(r, &ts.v[i], &f, &nf) == 0) {
          for (size_t k = 0; k < nf; k++)
            if (f[k].method) (void)dnt_clr_method_name(r, f[k].method, name, sizeof name);
          free(f);
        }
        struct dnt_clr_stack_root *roots; /* its roots, as gcroot reads them (GC info, saved registers) */
        size_t nr;
        if (dnt_clr_stack_roots(r, &ts.v[i], &roots, &nr) == 0) {
          for (size_t k = 0; k < nr; k++)
            if (!roots[k].object) abort(); /* a slot holding nothing is no root */
          free(roots);
        }
      }
      dnt_clr_threads_release(&ts);
    }
    dnt_clr_heap *h; /* the heap, counted and its types named as dumpheap -stat does */
    if (dnt_clr_heap_open(&h, r, err, sizeof err) == 0) {
      struct dnt_clr_type_stat *v;
      struct dnt_clr_walk w;
      size_t nv;
      if (dnt_clr_heap_stat(h, NULL, NULL, &v, &nv, &w) == 0) {
        char name[512];
        for (size_t i = 0; i < nv && i < 64; i++) (void)dnt_clr_type_name(r, v[i].mt, name, sizeof name);
        for (size_t i = 0; i < nv && i < 8; i++) { /* their fields, as dumpobj reads them */
          struct dnt_clr_field *f;
          size_t nf;
          if (dnt_clr_fields(r, v[i].mt, 0, &f, &nf) == 0) {
            struct dnt_clr_threads all; /* a thread static's storage on each thread */
            if (dnt_clr_threads_read(r, &all, err, sizeof err) == 0) {
              for (size_t k = 0; k < nf; k++)
                for (size_t t = 0; f[k].thread_static && t < all.n && t < 8; t++) {
                  uint64_t at;
                  (void)dnt_clr_thread_static(r, f[k].enclosing, &f[k], all.v[t].address, &at);
                }
              dnt_clr_threads_release(&all);
            }
            free(f);
          }
        }
        free(v);
      }
      struct dnt_clr_root *hs = NULL, *fs = NULL; /* the roots, and gcroot's search from them */
      size_t nh = 0, nfs = 0;
      if (dnt_clr_handles(h, &hs, &nh, err, sizeof err) == 0 && dnt_clr_finalizer_roots(h, &fs, &nfs) == 0) {
        dnt_clr_gcroot *g;
        if (nh && dnt_clr_gcroot_new(&g, h, hs[nh - 1].object, hs, nh) == 0) {
          for (size_t i = 0; i < nh && i < 16; i++) {
            uint64_t *chain, owner;
            size_t np;
            char field[256];
            if (dnt_clr_gcroot_path(g, hs[i].object, &chain, &np) == 0) {
              if (np && chain[np - 1] != hs[nh - 1].object) abort(); /* a path ends at the target */
              if (np > 1) (void)dnt_clr_static_at(r, dnt_clr_reference_slot(h, chain[0], chain[1]), &owner, field, sizeof field);
              free(chain);
            }
          }
          dnt_clr_gcroot_free(g);
        }
      }
      free(hs), free(fs);
      dnt_clr_heap_close(h);
    }
    dnt_clr_close(r);
  }
  dnt_core_close(c);
  return 0;
}
