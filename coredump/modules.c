/* modules.c: whether a module's file on this machine is the one the process loaded. Names, fields
 * and source lines are read from the assemblies' files (the path the runtime kept); a file
 * replaced since (a redeployed app) would name everything wrongly and silently. The PE headers
 * the core holds at the module's base (the image as loaded: COFF header, the image's size and
 * checksum, the section table) are compared with the file's; a file that differs is not used (its
 * names are not shown) and is listed for the command to say. Where the core holds no headers (a
 * heap or mini dump keeps few image pages), the file is trusted. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core-int.h"

#define MAX_HEADERS 4096 /* NT headers and section table, read from both */

struct dnt__module_checks {
  struct checked {
    uint64_t module;
    int stale;
  } *v;
  size_t n, cap;
  char **stale; /* the files found stale, in order */
  size_t nstale;
};

struct dnt__module_checks *dnt__module_checks_new(void) { return calloc(1, sizeof(struct dnt__module_checks)); }

void dnt__module_checks_free(struct dnt__module_checks *m) {
  if (!m) return;
  for (size_t i = 0; i < m->nstale; i++) free(m->stale[i]);
  free(m->stale);
  free(m->v);
  free(m);
}


/* The parts of the headers that say which build an image is, from img (n bytes): into out, their
 * length; 0 when img is no PE image. ImageBase is left out (a loader may write the address it
 * chose there). */
static size_t identity(const uint8_t *img, size_t n, uint8_t *out) {
  if (n < 64 || img[0] != 'M' || img[1] != 'Z') return 0;
  uint32_t pe = dnt__u32(img + 0x3c);
  if (pe > n || n - pe < 24 || memcmp(img + pe, "PE\0\0", 4) != 0) return 0;
  const uint8_t *coff = img + pe + 4;
  uint16_t nsections = dnt__u16(coff + 2), optsize = dnt__u16(coff + 16);
  size_t opt = pe + 24, sections = opt + optsize, end = sections + (size_t)nsections * 40;
  if (optsize < 68 || end > n || 28 + (end - sections) > MAX_HEADERS) return 0;
  size_t k = 0;
  memcpy(out + k, coff, 20), k += 20;               /* machine, sections, TimeDateStamp, sizes */
  memcpy(out + k, img + opt + 56, 4), k += 4;       /* SizeOfImage */
  memcpy(out + k, img + opt + 64, 4), k += 4;       /* CheckSum */
  memcpy(out + k, img + sections, end - sections);  /* the section table */
  return k + (end - sections);
}

/* 1 when path's headers differ from those the core holds at base; 0 when they match or either
 * cannot be read (nothing to compare: the file is trusted). */
static int differs(const dnt_core *c, uint64_t base, const char *path) {
  uint8_t mem[MAX_HEADERS], file[MAX_HEADERS], a[MAX_HEADERS], b[MAX_HEADERS];
  size_t nmem = 0;
  while (nmem < MAX_HEADERS && dnt__core_read_dumped(c, base + nmem, mem + nmem, 512) == 0) nmem += 512;
  size_t ka = identity(mem, nmem, a);
  if (!ka) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got = pread(fd, file, sizeof file, 0);
  close(fd);
  if (got <= 0) return 0;
  size_t kb = identity(file, (size_t)got, b);
  return kb != ka || memcmp(a, b, ka) != 0;
}

int dnt__module_stale(const dnt_clr *r, struct dnt__module_checks *m, uint64_t module, const char *path) {
  for (size_t i = 0; i < m->n; i++)
    if (m->v[i].module == module) return m->v[i].stale;
  uint64_t off, base = 0;
  int stale = 0;
  if (clr_field(r, "Module", "Base", &off) == 0 && clr_u64(r, module + off, &base) == 0 && base)
    stale = differs(dnt__clr_core(r), base, path);
  if (m->n == m->cap) {
    struct checked *v = realloc(m->v, (m->cap = m->cap ? 2 * m->cap : 16) * sizeof *v);
    if (!v) return stale; /* out of memory: checked again next time */
    m->v = v;
  }
  m->v[m->n++] = (struct checked){module, stale};
  if (stale) {
    char **v = realloc(m->stale, (m->nstale + 1) * sizeof *v);
    char *copy = strdup(path);
    if (v) m->stale = v;
    if (v && copy) m->stale[m->nstale++] = copy;
    else free(copy);
  }
  return stale;
}

size_t dnt__module_stale_files(const struct dnt__module_checks *m, const char *const **files) {
  *files = (const char *const *)m->stale;
  return m->nstale;
}
