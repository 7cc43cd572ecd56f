/* backing.c: what a core leaves out, read from the files the process had mapped (a heap, mini or
 * triage dump keeps no read-only pages: libcoreclr.so's descriptor, its JSON and pointers among
 * them). A mapped file's page is the file's bytes at the mapping's offset, as the loader left it:
 * its RELATIVE relocations applied (the load address plus their addend), which is all a
 * position-independent library's read-only data gets. Pages the process wrote are in the core
 * itself; what a file cannot give is an error. The caller checks that the file is the build the
 * process loaded (clr.c compares the GNU build ids). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core-int.h"

#define SHT_RELA 4
#define R_X86_64_RELATIVE 8
#define MAX_BACKINGS 64
#define MAX_RELOCS (16u << 20)


static int by_at(const void *a, const void *b) {
  const struct reloc *x = a, *y = b;
  return x->at < y->at ? -1 : x->at > y->at;
}

/* The file's RELATIVE relocations from its SHT_RELA sections, sorted. */
static void read_relocs(struct backing *b) {
  const uint8_t *f = b->f;
  if (b->size < 64 || memcmp(f, "\177ELF", 4) != 0 || f[4] != 2) return;
  uint64_t shoff = dnt__u64(f + 40);
  uint32_t shentsize = (uint32_t)(f[58] | f[59] << 8), shnum = (uint32_t)(f[60] | f[61] << 8);
  if (shentsize < 64 || shoff > b->size || (uint64_t)shnum * shentsize > b->size - shoff) return;
  size_t cap = 0;
  for (uint32_t i = 0; i < shnum; i++) {
    const uint8_t *sh = f + shoff + (uint64_t)i * shentsize;
    uint64_t off = dnt__u64(sh + 24), size = dnt__u64(sh + 32), entsize = dnt__u64(sh + 56);
    if (dnt__u32(sh + 4) != SHT_RELA || entsize < 24 || off > b->size || size > b->size - off) continue;
    for (uint64_t k = 0; k + entsize <= size && b->nrels < MAX_RELOCS; k += entsize) {
      const uint8_t *r = f + off + k;
      if (dnt__u32(r + 8) != R_X86_64_RELATIVE) continue;
      if (b->nrels == cap) {
        size_t want = cap ? cap * 2 : 1024;
        struct reloc *v = realloc(b->rels, want * sizeof *v);
        if (!v) return;
        b->rels = v, cap = want;
      }
      b->rels[b->nrels++] = (struct reloc){dnt__u64(r), dnt__u64(r + 16)};
    }
  }
  if (b->nrels) qsort(b->rels, b->nrels, sizeof *b->rels, by_at);
}

/* The backing of path, opened once (NULL when the cache is full or out of memory). */
static struct backing *backing_of(dnt_core *c, const char *path) {
  for (size_t i = 0; i < c->nbackings; i++)
    if (strcmp(c->backings[i].path, path) == 0) return &c->backings[i];
  if (c->nbackings == MAX_BACKINGS) return NULL;
  if (!c->backings && !(c->backings = calloc(MAX_BACKINGS, sizeof *c->backings))) return NULL;
  struct backing *b = &c->backings[c->nbackings++];
  memset(b, 0, sizeof *b);
  b->path = path;
  for (size_t i = 0; i < c->nmaps; i++) /* where its address 0 lies */
    if (c->maps[i].offset == 0 && strcmp(c->maps[i].path, path) == 0) {
      b->bias = c->maps[i].start;
      break;
    }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a core may name a fifo: never wait on it */
  struct stat st;
  if (fd < 0) return b;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) b->f = m, b->size = (uint64_t)st.st_size;
  }
  close(fd);
  if (b->f) read_relocs(b);
  return b;
}

int dnt__backing_read(dnt_core *c, uint64_t addr, uint8_t *to, size_t n) {
  const struct dnt_core_mapping *m = NULL;
  for (size_t i = 0; i < c->nmaps && !m; i++)
    if (addr >= c->maps[i].start && addr < c->maps[i].end && n <= c->maps[i].end - addr) m = &c->maps[i];
  if (!m) return -1;
  struct backing *b = backing_of(c, m->path);
  uint64_t off = addr - m->start + m->offset;
  if (!b || !b->f || off < m->offset || off > b->size || n > b->size - off) return -1;
  memcpy(to, b->f + off, n);
  if (!b->bias || addr < b->bias) return 0; /* no load address known: nothing to relocate */
  /* the relocations that fall in [addr, addr + n): the first at or after addr - 7 */
  uint64_t lo_at = addr - b->bias > 7 ? addr - b->bias - 7 : 0, end = addr - b->bias + n;
  size_t lo = 0, hi = b->nrels;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b->rels[mid].at < lo_at) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo; i < b->nrels && b->rels[i].at < end; i++) {
    uint8_t v[8];
    uint64_t value = b->bias + b->rels[i].addend;
    for (int k = 0; k < 8; k++) v[k] = (uint8_t)(value >> (8 * k));
    for (int k = 0; k < 8; k++) { /* the bytes of it inside the read */
      uint64_t at = b->bias + b->rels[i].at + (uint64_t)k;
      if (at >= addr && at - addr < n) to[at - addr] = v[k];
    }
  }
  return 0;
}

void dnt__backings_free(dnt_core *c) {
  for (size_t i = 0; i < c->nbackings; i++) {
    if (c->backings[i].f) munmap((void *)c->backings[i].f, (size_t)c->backings[i].size);
    free(c->backings[i].rels);
  }
  free(c->backings);
  c->backings = NULL, c->nbackings = 0;
}
