/* clr.c: the runtime in a core (dnt-core.h). libcoreclr.so is among the core's mapped files; its
 * load address is where its mapping of file offset 0 begins. The descriptor's address is that
 * plus its symbol's value in the library's .dynsym, read from the library's file (the core does
 * not keep section headers). The descriptor (x86-64):
 *
 *   u64 magic "DNCCDAC\0", u32 flags (bit 0 always; bit 1: a 32-bit target), u32 JSON size,
 *   u64 JSON address, u32 pointer count, u32 padding, u64 pointers' address
 *
 * and the JSON: {"version", "baseline", "types": {TYPE: {FIELD: OFFSET | [OFFSET, TYPE], "!":
 * SIZE}}, "globals": {NAME: VALUE | [VALUE, TYPE]}, "contracts": {NAME: VERSION}}, where a VALUE
 * is a number, a "0x..." string, or [INDEX]: the INDEX-th of the pointers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core-int.h"

#define MAGIC 0x0043414443434e44ull
#define MAX_JSON (16u << 20)
#define MAX_POINTERS 65536
#define SHT_DYNSYM 11
#define LIBRARY "libcoreclr.so"
#define SYMBOL "DotNetRuntimeContractDescriptor"

struct dnt_clr {
  const dnt_core *c;
  char *library, version[64];
  uint64_t base;
  struct json_tree json;
  int32_t types, globals, contracts;
  uint64_t *pointers;
  uint32_t npointers;
  uint64_t dac_table, dac_table_size; /* g_dacTable in the core, 0 when the library has none */
  char file_version[160]; /* "10.0.1226.42308 @Commit: ...", from the library's own stamp; "" */
  struct dnt__module_checks *modules; /* which modules' files are the loaded ones (modules.c) */
};

static int fail(char *err, size_t cap, const char *what) {
  snprintf(err, cap, "%s", what);
  return -1;
}

/* ---- the GNU build id, of the library in the core and of its file ---- */

#define PT_NOTE 4
#define NT_GNU_BUILD_ID 3
#define MAX_ID 64

/* Reads n bytes at off of an image (the library in the core's memory from its base, or its file):
 * 0 or -1. */
typedef int (*image_read_fn)(const void *ud, uint64_t off, void *buf, size_t n);

static int core_image_read(const void *ud, uint64_t off, void *buf, size_t n) {
  const dnt_clr *r = ud;
  return dnt_core_read(r->c, r->base + off, buf, n);
}

struct file_image {
  const uint8_t *f;
  uint64_t size;
};

static int file_image_read(const void *ud, uint64_t off, void *buf, size_t n) {
  const struct file_image *fi = ud;
  if (off > fi->size || n > fi->size - off) return -1;
  memcpy(buf, fi->f + off, n);
  return 0;
}

/* The build id of an ELF image: its PT_NOTE segments' NT_GNU_BUILD_ID (at their vaddr in memory,
 * their offset in the file: the same for a library's first segment). Its length, 0 when none. */
static size_t build_id(image_read_fn rd, const void *ud, int in_memory, uint8_t id[MAX_ID]) {
  uint8_t h[64];
  if (rd(ud, 0, h, sizeof h) != 0 || memcmp(h, "\177ELF", 4) != 0) return 0;
  uint64_t phoff = dnt__u64(h + 32);
  uint16_t phentsize = (uint16_t)(h[54] | h[55] << 8), phnum = (uint16_t)(h[56] | h[57] << 8);
  if (phentsize < 56 || phnum > 256) return 0;
  for (uint16_t i = 0; i < phnum; i++) {
    uint8_t ph[56];
    if (rd(ud, phoff + (uint64_t)i * phentsize, ph, sizeof ph) != 0) return 0;
    uint32_t type = (uint32_t)(ph[0] | ph[1] << 8 | ph[2] << 16 | (uint32_t)ph[3] << 24);
    uint64_t at = dnt__u64(ph + (in_memory ? 16 : 8)), size = dnt__u64(ph + 32);
    if (type != PT_NOTE || size > 65536) continue;
    uint8_t notes[65536];
    if (rd(ud, at, notes, (size_t)size) != 0) continue;
    for (uint64_t p = 0; p + 12 <= size;) {
      uint32_t namesz = (uint32_t)dnt__u64(notes + p), descsz = (uint32_t)(dnt__u64(notes + p) >> 32);
      uint32_t nt = (uint32_t)(notes[p + 8] | notes[p + 9] << 8 | notes[p + 10] << 16 | (uint32_t)notes[p + 11] << 24);
      uint64_t name_pad = ((uint64_t)namesz + 3) & ~3ull, desc_pad = ((uint64_t)descsz + 3) & ~3ull;
      if (name_pad > size - p - 12 || descsz > size - p - 12 - name_pad) break;
      if (nt == NT_GNU_BUILD_ID && namesz == 4 && memcmp(notes + p + 12, "GNU", 4) == 0 && descsz && descsz <= MAX_ID) {
        memcpy(id, notes + p + 12 + name_pad, descsz);
        return descsz;
      }
      p += 12 + name_pad + desc_pad;
    }
  }
  return 0;
}

static void hex(const uint8_t *id, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", id[i]);
  out[2 * n] = '\0';
}

/* The symbol's value in the ELF file at path (a shared library's .dynsym), once the file is
 * known to be the build the core's process loaded (their GNU build ids equal; a core that does
 * not hold the library's notes is taken on trust): 0, or -1 with err. */
static int symbol_value(const dnt_clr *r, const char *path, const char *name, uint64_t *value, uint64_t *sym_size,
                        char *err, size_t cap) {
  errno = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a core may name a fifo: never wait on it */
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, cap, "cannot open '%s': %s", path, errno ? strerror(errno) : "not a file");
    if (fd >= 0) close(fd);
    return -1;
  }
  uint64_t size = (uint64_t)st.st_size;
  const uint8_t *f = size >= 64 ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  close(fd);
  if (f == MAP_FAILED) return snprintf(err, cap, "'%s' cannot be read as a library", path), -1;
  int rc = -1;
  uint8_t want[MAX_ID], have[MAX_ID];
  struct file_image fi = {f, size};
  size_t nwant = build_id(core_image_read, r, 1, want), nhave = build_id(file_image_read, &fi, 0, have);
  if (nwant && (nwant != nhave || memcmp(want, have, nwant) != 0)) {
    char a[2 * MAX_ID + 1], b[2 * MAX_ID + 1];
    hex(want, nwant, a), hex(have, nhave, b);
    snprintf(err, cap, "'%s' is another build than the core's runtime (build id %s, the core's %s): give the "
             "matching runtime's folder with --runtime-dir", path, nhave ? b : "none", a);
    goto out;
  }
  uint64_t shoff = dnt__u64(f + 40);
  uint16_t shentsize = (uint16_t)(f[58] | f[59] << 8), shnum = (uint16_t)(f[60] | f[61] << 8);
  if (memcmp(f, "\177ELF", 4) != 0 || f[4] != 2 || shentsize < 64 || shoff > size ||
      (uint64_t)shnum * shentsize > size - shoff) {
    snprintf(err, cap, "'%s' is not a 64-bit ELF library with section headers", path);
    goto out;
  }
  for (uint16_t i = 0; i < shnum && rc; i++) {
    const uint8_t *sh = f + shoff + (uint64_t)i * shentsize;
    uint32_t type = (uint32_t)(sh[4] | sh[5] << 8 | sh[6] << 16 | (uint32_t)sh[7] << 24);
    if (type != SHT_DYNSYM) continue;
    uint64_t off = dnt__u64(sh + 24), n = dnt__u64(sh + 32), entsize = dnt__u64(sh + 56);
    uint32_t link = (uint32_t)(sh[40] | sh[41] << 8 | sh[42] << 16 | (uint32_t)sh[43] << 24);
    if (link >= shnum || entsize < 24 || off > size || n > size - off) break;
    const uint8_t *strh = f + shoff + (uint64_t)link * shentsize;
    uint64_t stroff = dnt__u64(strh + 24), strn = dnt__u64(strh + 32);
    if (stroff > size || strn > size - stroff) break;
    for (uint64_t k = 0; k + entsize <= n; k += entsize) {
      const uint8_t *sym = f + off + k;
      uint32_t at = (uint32_t)(sym[0] | sym[1] << 8 | sym[2] << 16 | (uint32_t)sym[3] << 24);
      size_t len = strlen(name);
      if (at < strn && strn - at > len && memcmp(f + stroff + at, name, len + 1) == 0) {
        *value = dnt__u64(sym + 8);
        *sym_size = dnt__u64(sym + 16);
        rc = 0;
        break;
      }
    }
  }
  if (rc) snprintf(err, cap, "'%s' exports no %s: a runtime before .NET 9 (dump analyze reads .NET 9 and later)", path,
                   name);
out:
  munmap((void *)f, (size_t)size);
  return rc;
}

/* The library's own version stamp ("@(#)Version 10.0.1226.42308 @Commit: HASH", as the runtime
 * writes it into its binaries) from its file into buf, "" when it has none. */
static void read_file_version(const char *path, char *buf, size_t cap) {
  static const char mark[] = "@(#)Version ";
  buf[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0) return;
  const uint8_t *f = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0
                         ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                         : MAP_FAILED;
  close(fd);
  if (f == MAP_FAILED) return;
  const uint8_t *at = memmem(f, (size_t)st.st_size, mark, sizeof mark - 1);
  if (at) {
    const uint8_t *p = at + sizeof mark - 1, *end = f + st.st_size;
    size_t n = 0;
    while (p + n < end && n + 1 < cap && p[n] >= 0x20 && p[n] < 0x7f) n++;
    memcpy(buf, p, n);
    buf[n] = '\0';
  }
  munmap((void *)f, (size_t)st.st_size);
}

/* A value of the JSON: a number, or a "0x..." (or decimal) string. */
static int number_of(const struct json *v, uint64_t *out) {
  if (v->kind == JSON_NUMBER && v->number >= 0 && v->number < 1.8e19) return *out = (uint64_t)v->number, 0;
  if (v->kind != JSON_STRING) return -1;
  char *end;
  errno = 0;
  *out = strtoull(v->text, &end, 0);
  return errno || end == v->text || *end ? -1 : 0;
}

static int read_descriptor(dnt_clr *r, uint64_t at, char *err, size_t cap) {
  uint8_t d[40];
  if (dnt_core_read(r->c, at, d, sizeof d) != 0)
    return fail(err, cap, "neither the core nor the runtime's library holds the runtime's descriptor");
  uint64_t magic = dnt__u64(d);
  uint32_t flags = (uint32_t)dnt__u64(d + 8), size = (uint32_t)(dnt__u64(d + 8) >> 32);
  uint64_t json_at = dnt__u64(d + 16), ptrs_at = dnt__u64(d + 32);
  uint32_t nptrs = (uint32_t)dnt__u64(d + 24);
  if (magic != MAGIC) return fail(err, cap, "the runtime's descriptor has not its magic number");
  if (!(flags & 1) || (flags & 2)) return fail(err, cap, "the runtime's descriptor is not a 64-bit one");
  if (!size || size > MAX_JSON || nptrs > MAX_POINTERS) return fail(err, cap, "the runtime's descriptor has bad sizes");
  char *json = malloc(size);
  r->pointers = calloc(nptrs ? nptrs : 1, sizeof *r->pointers);
  if (!json || !r->pointers) {
    free(json);
    return fail(err, cap, "out of memory");
  }
  r->npointers = nptrs;
  int rc = 0;
  if (dnt_core_read(r->c, json_at, json, size) != 0) rc = fail(err, cap, "the core does not hold the descriptor's JSON");
  for (uint32_t i = 0; !rc && i < nptrs; i++)
    if (dnt_core_read_u64(r->c, ptrs_at + 8ull * i, &r->pointers[i]) != 0)
      rc = fail(err, cap, "the core does not hold the descriptor's pointers");
  if (!rc) rc = dnt__json_parse(&r->json, json, size, err, cap);
  free(json);
  if (rc) return -1;
  r->types = dnt__json_member(&r->json, 0, "types");
  r->globals = dnt__json_member(&r->json, 0, "globals");
  r->contracts = dnt__json_member(&r->json, 0, "contracts");
  if (r->types < 0 || r->globals < 0 || r->contracts < 0)
    return fail(err, cap, "the runtime's descriptor lacks its types, globals or contracts");
  return 0;
}

int dnt_clr_open(dnt_clr **out, const dnt_core *c, const char *runtime_dir, char *err, size_t cap) {
  *out = NULL;
  const struct dnt_core_mapping *maps;
  size_t n = dnt_core_mappings(c, &maps);
  const struct dnt_core_mapping *lib = NULL;
  for (size_t i = 0; i < n && !lib; i++) {
    const char *slash = strrchr(maps[i].path, '/');
    if (strcmp(slash ? slash + 1 : maps[i].path, LIBRARY) == 0 && maps[i].offset == 0) lib = &maps[i];
  }
  if (!lib) return fail(err, cap, "not a .NET process: libcoreclr.so is not among the core's mapped files");
  dnt_clr *r = calloc(1, sizeof *r);
  if (!r) return fail(err, cap, "out of memory");
  r->c = c;
  r->base = lib->start;
  r->library = strdup(lib->path);
  r->modules = dnt__module_checks_new();
  if (!r->library || !r->modules) {
    dnt__module_checks_free(r->modules);
    free(r->library);
    free(r);
    return fail(err, cap, "out of memory");
  }
  /* the version: the runtime's folder, .../Microsoft.NETCore.App/10.0.12/libcoreclr.so */
  const char *slash = strrchr(r->library, '/'), *prev = slash;
  while (prev && prev > r->library && prev[-1] != '/') prev--;
  if (slash && prev && slash > prev && (size_t)(slash - prev) < sizeof r->version)
    snprintf(r->version, sizeof r->version, "%.*s", (int)(slash - prev), prev);
  char path[4200];
  if (runtime_dir) snprintf(path, sizeof path, "%s/%s", runtime_dir, LIBRARY);
  else snprintf(path, sizeof path, "%s", r->library);
  uint64_t value, size;
  if (symbol_value(r, path, SYMBOL, &value, &size, err, cap) != 0) {
    if (!runtime_dir && access(path, F_OK) != 0)
      snprintf(err, cap, "the core's runtime (.NET %s) is not on this machine: %s is missing (install that runtime, "
               "or give its folder with --runtime-dir)", r->version[0] ? r->version : "?", path);
    dnt_clr_close(r);
    return -1;
  }
  if (read_descriptor(r, r->base + value, err, cap) != 0) {
    dnt_clr_close(r);
    return -1;
  }
  /* the runtime's table of its debugger-visible variables: where the GC's own interface is found
   * (heap.c); a runtime without it reads all but the heap */
  read_file_version(path, r->file_version, sizeof r->file_version);
  char ignored[512];
  if (symbol_value(r, path, "g_dacTable", &value, &size, ignored, sizeof ignored) == 0)
    r->dac_table = r->base + value, r->dac_table_size = size;
  *out = r;
  return 0;
}

void dnt_clr_close(dnt_clr *r) {
  if (!r) return;
  dnt__json_free(&r->json);
  dnt__module_checks_free(r->modules);
  free(r->pointers);
  free(r->library);
  free(r);
}

struct dnt__module_checks *dnt__clr_module_checks(const dnt_clr *r) { return r->modules; }

size_t dnt_clr_stale_files(const dnt_clr *r, const char *const **files) {
  return dnt__module_stale_files(r->modules, files);
}

const char *dnt_clr_version(const dnt_clr *r) { return r->version; }
const char *dnt_clr_file_version(const dnt_clr *r) { return r->file_version; }
const dnt_core *dnt__clr_core(const dnt_clr *r) { return r->c; }
uint64_t dnt__clr_dac_table(const dnt_clr *r, uint64_t *size) { return *size = r->dac_table_size, r->dac_table; }
const char *dnt_clr_library(const dnt_clr *r) { return r->library; }

int dnt_clr_contract(const dnt_clr *r, const char *name) {
  int32_t v = dnt__json_member(&r->json, r->contracts, name);
  return v >= 0 && r->json.v[v].kind == JSON_NUMBER ? (int)r->json.v[v].number : 0;
}

int dnt_clr_field(const dnt_clr *r, const char *type, const char *field, uint64_t *offset) {
  int32_t f = dnt__json_member(&r->json, dnt__json_member(&r->json, r->types, type), field);
  if (f < 0) return -1;
  const struct json *v = &r->json.v[f];
  if (v->kind == JSON_ARRAY && v->child >= 0) v = &r->json.v[v->child]; /* [OFFSET, TYPE] */
  return number_of(v, offset);
}

int dnt_clr_global(const dnt_clr *r, const char *name, uint64_t *value) {
  int32_t g = dnt__json_member(&r->json, r->globals, name);
  if (g < 0) return -1;
  const struct json *v = &r->json.v[g];
  if (v->kind == JSON_ARRAY && v->child >= 0) v = &r->json.v[v->child]; /* [VALUE, TYPE] */
  if (v->kind == JSON_ARRAY) { /* [INDEX]: one of the pointers */
    uint64_t i;
    if (v->child < 0 || number_of(&r->json.v[v->child], &i) != 0 || i >= r->npointers) return -1;
    *value = r->pointers[i];
    return 0;
  }
  return number_of(v, value);
}
