/* core.c: an ELF core file (dnt-core.h), mapped read-only. Its memory is its PT_LOAD segments
 * (sorted by address, found by bisection; the part of a segment past its file size was not
 * dumped); its notes give the threads (NT_PRSTATUS: x86-64's register set) and the mapped files
 * (NT_FILE). Every offset and count is checked against the file's size before it is used. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core-int.h"

#define PT_LOAD 1
#define PT_NOTE 4
#define NT_PRSTATUS 1
#define NT_FILE 0x46494c45
#define EM_X86_64 62
#define PRSTATUS_SIZE 336 /* x86-64's struct elf_prstatus */
#define PRSTATUS_PID 32
#define PRSTATUS_REGS 112 /* 27 registers: r15 r14 r13 r12 rbp rbx r11 ... rip(16) cs eflags rsp(19) */
#define MAX_SEGMENTS 1000000
#define MAX_THREADS 100000

static int fail(char *err, size_t cap, const char *what) {
  snprintf(err, cap, "%s", what);
  return -1;
}

uint16_t dnt__u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
uint32_t dnt__u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
uint64_t dnt__u64(const uint8_t *p) { return (uint64_t)dnt__u32(p) | (uint64_t)dnt__u32(p + 4) << 32; }

/* Whether [off, off + n) lies in a file of size bytes. */
static int inside(uint64_t size, uint64_t off, uint64_t n) { return off <= size && n <= size - off; }

static int by_address(const void *a, const void *b) {
  const struct segment *x = a, *y = b;
  return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* NT_FILE: count, page size, count (start, end, page) triples, then count names. */
static int read_files(dnt_core *c, const uint8_t *d, uint64_t n, char *err, size_t cap) {
  if (c->nmaps) return 0; /* one is enough */
  if (n < 16) return fail(err, cap, "a mapped-files note cut short");
  uint64_t count = dnt__u64(d), page = dnt__u64(d + 8);
  if (count > (n - 16) / 24) return fail(err, cap, "a mapped-files note with more files than it holds");
  if (!count) return 0;
  c->maps = calloc(count, sizeof *c->maps);
  if (!c->maps) return fail(err, cap, "out of memory");
  const char *name = (const char *)d + 16 + count * 24, *end = (const char *)d + n;
  for (uint64_t i = 0; i < count; i++) {
    const uint8_t *t = d + 16 + i * 24;
    const char *nul = memchr(name, '\0', (size_t)(end - name));
    if (!nul) return fail(err, cap, "a mapped file's name runs past its note");
    uint64_t pg = dnt__u64(t + 16);
    c->maps[i] = (struct dnt_core_mapping){dnt__u64(t), dnt__u64(t + 8), page && pg <= UINT64_MAX / page ? pg * page : 0,
                                           name};
    name = nul + 1;
  }
  c->nmaps = (size_t)count;
  return 0;
}

static int read_thread(dnt_core *c, const uint8_t *d, uint64_t n, char *err, size_t cap) {
  if (n < PRSTATUS_SIZE) return fail(err, cap, "a thread's note cut short");
  if (c->nthreads == MAX_THREADS) return fail(err, cap, "more threads than a process has");
  if (c->nthreads == c->capthreads) {
    size_t k = c->capthreads ? c->capthreads * 2 : 64;
    struct dnt_core_thread *v = realloc(c->threads, k * sizeof *v);
    if (!v) return fail(err, cap, "out of memory");
    c->threads = v, c->capthreads = k;
  }
  const uint8_t *regs = d + PRSTATUS_REGS;
  /* the general registers in the processor's numbering (rax rcx rdx rbx rsp rbp rsi rdi r8..r15),
   * from user_regs_struct's order */
  static const int slot[16] = {10, 11, 12, 5, 19, 4, 13, 14, 9, 8, 7, 6, 3, 2, 1, 0};
  struct dnt_core_thread *t = &c->threads[c->nthreads++];
  *t = (struct dnt_core_thread){dnt__u32(d + PRSTATUS_PID), dnt__u64(regs + 16 * 8), dnt__u64(regs + 19 * 8),
                                dnt__u64(regs + 4 * 8), {0}};
  for (int i = 0; i < 16; i++) t->gpr[i] = dnt__u64(regs + 8 * slot[i]);
  return 0;
}

static int read_notes(dnt_core *c, uint64_t off, uint64_t size, char *err, size_t cap) {
  const uint8_t *p = c->base + off, *end = p + size;
  while (end - p >= 12) {
    uint32_t namesz = dnt__u32(p), descsz = dnt__u32(p + 4), type = dnt__u32(p + 8);
    uint64_t name_pad = ((uint64_t)namesz + 3) & ~3ull, desc_pad = ((uint64_t)descsz + 3) & ~3ull;
    if (name_pad > (uint64_t)(end - p - 12) || descsz > (uint64_t)(end - p - 12) - name_pad)
      return fail(err, cap, "a note runs past its segment");
    const uint8_t *desc = p + 12 + name_pad;
    int core = namesz >= 4 && memcmp(p + 12, "CORE", 4) == 0;
    if (core && type == NT_PRSTATUS && read_thread(c, desc, descsz, err, cap) != 0) return -1;
    if (core && type == NT_FILE && read_files(c, desc, descsz, err, cap) != 0) return -1;
    uint64_t step = 12 + name_pad + desc_pad;
    if (step > (uint64_t)(end - p)) break;
    p += step;
  }
  return 0;
}

static int parse(dnt_core *c, char *err, size_t cap) {
  const uint8_t *h = c->base;
  if (c->size < 64 || memcmp(h, "\177ELF", 4) != 0) return fail(err, cap, "not an ELF file");
  if (h[4] != 2 || h[5] != 1) return fail(err, cap, "not a 64-bit little-endian ELF file");
  if (dnt__u16(h + 16) != 4) return fail(err, cap, "an ELF file, but not a core dump");
  if (dnt__u16(h + 18) != EM_X86_64) return fail(err, cap, "a core of another machine than x86-64 (not read yet)");
  uint64_t phoff = dnt__u64(h + 32);
  uint16_t phentsize = dnt__u16(h + 54);
  uint32_t phnum = dnt__u16(h + 56);
  if (phnum == 0xffff) return fail(err, cap, "more program headers than this reader takes");
  if (phentsize < 56 || !inside(c->size, phoff, (uint64_t)phnum * phentsize))
    return fail(err, cap, "its program headers lie outside the file (cut short?)");
  if (phnum > MAX_SEGMENTS) return fail(err, cap, "too many segments");
  c->segs = calloc(phnum ? phnum : 1, sizeof *c->segs);
  if (!c->segs) return fail(err, cap, "out of memory");
  for (uint32_t i = 0; i < phnum; i++) {
    const uint8_t *ph = h + phoff + (uint64_t)i * phentsize;
    uint32_t type = dnt__u32(ph);
    uint64_t off = dnt__u64(ph + 8), vaddr = dnt__u64(ph + 16), filesz = dnt__u64(ph + 32);
    if (type == PT_NOTE) {
      if (!inside(c->size, off, filesz)) return fail(err, cap, "its notes lie outside the file (cut short?)");
      if (read_notes(c, off, filesz, err, cap) != 0) return -1;
    } else if (type == PT_LOAD && filesz) {
      /* a segment the file holds only in part (a core cut short) keeps that part */
      if (off >= c->size) continue;
      if (filesz > c->size - off) filesz = c->size - off, c->cut = 1;
      if (vaddr > UINT64_MAX - filesz) continue;
      c->segs[c->nsegs++] = (struct segment){vaddr, filesz, off};
    }
  }
  if (!c->nthreads) return fail(err, cap, "a core without threads (no NT_PRSTATUS note)");
  qsort(c->segs, c->nsegs, sizeof *c->segs, by_address);
  return 0;
}

int dnt_core_open(dnt_core **out, const char *path, char *err, size_t cap) {
  *out = NULL;
  dnt_core *c = calloc(1, sizeof *c);
  if (!c) return fail(err, cap, "out of memory");
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  errno = 0;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, cap, "cannot open '%s': %s", path, errno ? strerror(errno) : "not a file");
    if (fd >= 0) close(fd);
    free(c);
    return -1;
  }
  c->size = (uint64_t)st.st_size;
  if (c->size) c->base = mmap(NULL, (size_t)c->size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (!c->size || c->base == MAP_FAILED) {
    c->base = NULL;
    snprintf(err, cap, "%s", c->size ? "cannot map the file" : "an empty file");
    dnt_core_close(c);
    return -1;
  }
  /* a core is read here and there (a heap walk, a thread's stack): no readahead around a read,
   * which would fill memory with pages never looked at */
  (void)madvise((void *)c->base, (size_t)c->size, MADV_RANDOM);
  if (parse(c, err, cap) != 0) {
    dnt_core_close(c);
    return -1;
  }
  *out = c;
  return 0;
}

void dnt_core_close(dnt_core *c) {
  if (!c) return;
  if (c->base) munmap((void *)c->base, (size_t)c->size);
  dnt__backings_free(c);
  free(c->segs), free(c->maps), free(c->threads);
  free(c);
}

size_t dnt_core_mappings(const dnt_core *c, const struct dnt_core_mapping **v) {
  *v = c->maps;
  return c->nmaps;
}

size_t dnt_core_threads(const dnt_core *c, const struct dnt_core_thread **v) {
  *v = c->threads;
  return c->nthreads;
}

/* The segment holding addr, NULL when none does; *next: where the next segment after addr
 * begins (UINT64_MAX when none does). */
static const struct segment *segment_at(const dnt_core *c, uint64_t addr, uint64_t *next) {
  size_t lo = 0, hi = c->nsegs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->segs[mid].vaddr <= addr) lo = mid + 1;
    else hi = mid;
  }
  *next = lo < c->nsegs ? c->segs[lo].vaddr : UINT64_MAX;
  if (!lo) return NULL;
  const struct segment *s = &c->segs[lo - 1];
  return addr - s->vaddr < s->filesz ? s : NULL;
}

/* The piece of [addr, addr + n) that begins at addr and lies in one segment (*s) or in none (*s
 * NULL: up to the next segment): its length, at least 1 when n is. */
static uint64_t piece(const dnt_core *c, uint64_t addr, uint64_t n, const struct segment **s) {
  uint64_t next;
  *s = segment_at(c, addr, &next);
  if (*s) {
    uint64_t in = addr - (*s)->vaddr;
    return (*s)->filesz - in < n ? (*s)->filesz - in : n;
  }
  return next - addr < n ? next - addr : n;
}

int dnt__core_read_dumped(const dnt_core *c, uint64_t addr, void *buf, size_t n) {
  uint8_t *to = buf;
  while (n) {
    const struct segment *s;
    uint64_t k = piece(c, addr, n, &s);
    if (!s) return -1;
    memcpy(to, c->base + s->offset + (addr - s->vaddr), (size_t)k);
    to += k, n -= (size_t)k;
    if (n && addr > UINT64_MAX - k) return -1;
    addr += k;
  }
  return 0;
}

void dnt_core_forget(const dnt_core *c, uint64_t addr, uint64_t n) {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  while (n) {
    const struct segment *s;
    uint64_t k = piece(c, addr, n, &s);
    if (s) { /* the whole pages of the file inside [addr, addr + k) */
      uint64_t at = s->offset + (addr - s->vaddr), mask = (uint64_t)page - 1;
      uint64_t from = (at + mask) & ~mask, to = (at + k) & ~mask;
      if (to > from) (void)madvise((void *)(c->base + from), (size_t)(to - from), MADV_DONTNEED);
    }
    if (!k || addr > UINT64_MAX - k) return;
    n -= k;
    addr += k;
  }
}

/* Memory the core holds, else (up to the next segment) the bytes of the file mapped there. */
int dnt_core_read(const dnt_core *c, uint64_t addr, void *buf, size_t n) {
  uint8_t *to = buf;
  while (n) {
    const struct segment *s;
    uint64_t k = piece(c, addr, n, &s);
    if (s) memcpy(to, c->base + s->offset + (addr - s->vaddr), (size_t)k);
    else if (dnt__backing_read((dnt_core *)c, addr, to, (size_t)k) != 0) return -1; /* its cache of files grows */
    to += k, n -= (size_t)k;
    if (n && addr > UINT64_MAX - k) return -1;
    addr += k;
  }
  return 0;
}

int dnt_core_read_u64(const dnt_core *c, uint64_t addr, uint64_t *v) {
  uint8_t b[8];
  if (dnt_core_read(c, addr, b, 8) != 0) return -1;
  *v = dnt__u64(b);
  return 0;
}

int dnt_core_read_u32(const dnt_core *c, uint64_t addr, uint32_t *v) {
  uint8_t b[4];
  if (dnt_core_read(c, addr, b, 4) != 0) return -1;
  *v = dnt__u32(b);
  return 0;
}
