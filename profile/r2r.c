/* A ReadyToRun image (r2r-int.h): the PE headers, the CLI header, its ReadyToRun header and two
 * of its sections: RuntimeFunctions (every function's code range, sorted) and
 * MethodDefEntryPoints (a NativeArray from each MethodDef to the runtime function of its entry).
 * The formats: the PE/COFF specification, ECMA-335 II.25, and the runtime's readytorun.h and
 * NativeFormat, as dotnet/runtime's R2RDump reads them. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dnt-profile.h"

#include "r2r-int.h"

enum { SECTION_RUNTIME_FUNCTIONS = 102, SECTION_METHODDEF_ENTRY_POINTS = 103 };

struct dnt__r2r {
  uint8_t *bytes;
  size_t len;
  int mapped; /* bytes are a mapping of the file (munmap), else malloc'ed (free) */
  uint32_t image_size;
  const uint8_t *sections; /* the PE section table */
  uint32_t nsections;
  const uint8_t *funcs; /* RuntimeFunctions, func_size bytes each */
  uint32_t nfuncs, func_size;
  uint32_t *entry_rid; /* per runtime function: the MethodDef whose entry it is, 0: none */
  size_t entries_at;   /* MethodDefEntryPoints' file offset */
  struct dnt__ecma md;
};

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }

/* The file offset of [rva, rva + size) when one section's file bytes hold it all, else -1. */
static long file_offset(const struct dnt__r2r *r, uint32_t rva, uint32_t size) {
  for (uint32_t i = 0; i < r->nsections; i++) {
    const uint8_t *s = r->sections + 40 * (size_t)i;
    uint32_t va = rd32(s + 12), raw_size = rd32(s + 16), raw = rd32(s + 20);
    if (rva < va || rva - va > raw_size || size > raw_size - (rva - va)) continue;
    uint64_t off = (uint64_t)raw + (rva - va);
    if (off > r->len || size > r->len - off) return -1;
    return (long)off;
  }
  return -1;
}

/* NativeFormat's variable-length unsigned number at *at (advanced past it): 0, or -1 past the
 * end or in a form that is not one. */
static int decode_unsigned(const struct dnt__r2r *r, size_t *at, uint32_t *v) {
  const uint8_t *p = r->bytes + *at;
  size_t left = *at < r->len ? r->len - *at : 0;
  if (left < 1) return -1;
  uint32_t b = p[0];
  size_t n = (b & 1) == 0 ? 1 : (b & 2) == 0 ? 2 : (b & 4) == 0 ? 3 : (b & 8) == 0 ? 4 : (b & 16) == 0 ? 5 : 0;
  if (n == 0 || left < n) return -1;
  switch (n) {
  case 1: *v = b >> 1; break;
  case 2: *v = b >> 2 | (uint32_t)p[1] << 6; break;
  case 3: *v = b >> 3 | (uint32_t)p[1] << 5 | (uint32_t)p[2] << 13; break;
  case 4: *v = b >> 4 | (uint32_t)p[1] << 4 | (uint32_t)p[2] << 12 | (uint32_t)p[3] << 20; break;
  default: *v = rd32(p + 1); break;
  }
  *at += n;
  return 0;
}

/* NativeArray element `index` of the array at base: the file offset of its value, or 0 when it
 * has none (blocks of 16 elements, each a little tree of nodes whose low bits say which child
 * is there). */
static size_t native_array_at(const struct dnt__r2r *r, size_t base, uint32_t index) {
  size_t at = base;
  uint32_t header;
  if (decode_unsigned(r, &at, &header) != 0 || index >= header >> 2) return 0;
  uint32_t width = header & 3, block = index / 16;
  if (width > 2) return 0;
  size_t entry = at + (size_t)(1u << width) * block;
  if (entry >= r->len || (1u << width) > r->len - entry) return 0;
  uint32_t rel = width == 0 ? r->bytes[entry] : width == 1 ? rd16(r->bytes + entry) : rd32(r->bytes + entry);
  size_t off = at + rel;
  for (uint32_t bit = 8; bit > 0; bit >>= 1) {
    size_t next = off;
    uint32_t val;
    if (decode_unsigned(r, &next, &val) != 0) return 0;
    if (index & bit) {
      if (val & 2) {
        if ((val >> 2) == 0) return 0; /* a jump of nothing would loop */
        off += val >> 2;
        continue;
      }
    } else if (val & 1) {
      off = next;
      continue;
    }
    if ((val & 3) == 0 && (val >> 2) == (index & 15)) return next; /* a leaf of this element */
    return 0;
  }
  return off;
}

/* The runtime function of a method entry's value at off (its fixups are not needed). */
static int entry_function(const struct dnt__r2r *r, size_t off, uint32_t *func) {
  uint32_t id;
  if (off == 0 || decode_unsigned(r, &off, &id) != 0) return -1;
  *func = id & 1 ? id >> 2 : id >> 1;
  return 0;
}

/* Whether machine (OS-salted, as ReadyToRun writes it) is x64 or arm64: the size of a
 * RuntimeFunctions entry, else 0. */
static uint32_t function_size(uint32_t machine) {
  static const uint32_t salts[] = {0, 0x7B79 /* Linux */, 0x4644 /* Apple */, 0xADC4 /* FreeBSD */,
                                   0x1993 /* NetBSD */, 0x1992 /* SunOS */};
  for (size_t i = 0; i < sizeof salts / sizeof salts[0]; i++) {
    if ((machine ^ salts[i]) == 0x8664) return 12; /* begin, end, unwind */
    if ((machine ^ salts[i]) == 0xAA64) return 8;  /* begin, unwind */
  }
  return 0;
}

/* The PE headers: the section table, the image's size, the CLI header's RVA. 0, or -1. */
static int read_pe(struct dnt__r2r *r, uint32_t *cli_rva) {
  if (r->len < 64 || r->bytes[0] != 'M' || r->bytes[1] != 'Z') return -1;
  uint32_t pe = rd32(r->bytes + 0x3C);
  if (pe > r->len || r->len - pe < 24 || memcmp(r->bytes + pe, "PE\0\0", 4) != 0) return -1;
  const uint8_t *coff = r->bytes + pe + 4;
  r->func_size = function_size(rd16(coff)); /* 0: IL only (an AnyCPU image is I386's), metadata alone */
  uint32_t nsections = rd16(coff + 2), opt_size = rd16(coff + 16);
  size_t opt = pe + 24;
  if (opt_size < 96 || opt_size > r->len - opt) return -1;
  uint32_t magic = rd16(r->bytes + opt);
  size_t dirs = opt + (magic == 0x20b ? 112 : 96), ndirs_at = opt + (magic == 0x20b ? 108 : 92);
  if ((magic != 0x20b && magic != 0x10b) || dirs + 15 * 8 > opt + opt_size || rd32(r->bytes + ndirs_at) < 15) return -1;
  r->image_size = rd32(r->bytes + opt + 56);
  *cli_rva = rd32(r->bytes + dirs + 14 * 8);
  size_t table = opt + opt_size;
  if (nsections > (r->len - table) / 40) return -1;
  r->sections = r->bytes + table;
  r->nsections = nsections;
  return 0;
}

/* The metadata the CLI header names: 0, or -1. */
static int read_metadata(struct dnt__r2r *r, uint32_t cli_rva) {
  long cli = file_offset(r, cli_rva, 72);
  if (cli < 0 || rd32(r->bytes + cli) < 72) return -1;
  uint32_t md_rva = rd32(r->bytes + cli + 8), md_size = rd32(r->bytes + cli + 12);
  long md = file_offset(r, md_rva, md_size);
  return md < 0 || dnt__ecma_open(&r->md, r->bytes + md, md_size) != 0 ? -1 : 0;
}

/* The ReadyToRun header's two sections and the metadata: 0, or -1. */
static int read_r2r(struct dnt__r2r *r, uint32_t cli_rva) {
  long cli = file_offset(r, cli_rva, 72);
  if (cli < 0 || rd32(r->bytes + cli) < 72 || read_metadata(r, cli_rva) != 0) return -1;
  uint32_t native_rva = rd32(r->bytes + cli + 64);
  long h = file_offset(r, native_rva, 16);
  if (h < 0 || rd32(r->bytes + h) != 0x00525452) return -1; /* "RTR" */
  uint32_t n = rd32(r->bytes + h + 12);
  long list = file_offset(r, native_rva + 16, 0);
  if (list < 0 || n > (r->len - (size_t)list) / 12) return -1;
  long funcs = -1, entries = -1;
  uint32_t funcs_size = 0;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *s = r->bytes + list + 12 * (size_t)i;
    uint32_t type = rd32(s), rva = rd32(s + 4), size = rd32(s + 8);
    if (type == SECTION_RUNTIME_FUNCTIONS) funcs = file_offset(r, rva, size), funcs_size = size;
    if (type == SECTION_METHODDEF_ENTRY_POINTS) entries = file_offset(r, rva, size);
  }
  if (funcs < 0 || entries < 0) return -1; /* a component of a composite image has no code */
  r->funcs = r->bytes + funcs;
  r->nfuncs = funcs_size / r->func_size;
  r->entries_at = (size_t)entries;
  return 0;
}

static uint32_t func_begin(const struct dnt__r2r *r, uint32_t i) { return rd32(r->funcs + (size_t)i * r->func_size); }

/* The end of function i's code: its own (x64), else where the next begins. */
static uint32_t func_end(const struct dnt__r2r *r, uint32_t i) {
  if (r->func_size == 12) return rd32(r->funcs + (size_t)i * r->func_size + 4);
  return i + 1 < r->nfuncs ? func_begin(r, i + 1) : r->image_size;
}

struct dnt__r2r *dnt__r2r_open(uint8_t *bytes, size_t len, int mapped) {
  struct dnt__r2r *r = calloc(1, sizeof *r);
  if (!r) {
    if (mapped) munmap(bytes, len);
    else free(bytes);
    return NULL;
  }
  r->bytes = bytes, r->len = len, r->mapped = mapped;
  uint32_t cli_rva, count;
  size_t at = 0;
  if (read_pe(r, &cli_rva) != 0 || !r->func_size || read_r2r(r, cli_rva) != 0 || r->nfuncs == 0 ||
      !(r->entry_rid = calloc(r->nfuncs, sizeof *r->entry_rid))) {
    dnt__r2r_free(r);
    return NULL;
  }
  at = r->entries_at;
  count = decode_unsigned(r, &at, &count) == 0 ? count >> 2 : 0;
  if (count > r->md.nmethods) count = r->md.nmethods;
  for (uint32_t rid = 1; rid <= count; rid++) {
    uint32_t f;
    if (entry_function(r, native_array_at(r, r->entries_at, rid - 1), &f) == 0 && f < r->nfuncs) r->entry_rid[f] = rid;
  }
  return r;
}

uint32_t dnt__r2r_image_size(const struct dnt__r2r *r) { return r->image_size; }

uint32_t dnt__r2r_method_rva(const struct dnt__r2r *r, uint32_t token) {
  uint32_t f;
  if (token >> 24 != 0x06 || (token & 0xffffff) == 0) return 0;
  if (entry_function(r, native_array_at(r, r->entries_at, (token & 0xffffff) - 1), &f) != 0 || f >= r->nfuncs) return 0;
  return func_begin(r, f);
}

int dnt__r2r_name(const struct dnt__r2r *r, uint32_t rva, char *buf, size_t cap) {
  uint32_t lo = 0, hi = r->nfuncs; /* the last function that begins at or before rva */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (func_begin(r, mid) <= rva) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || rva >= func_end(r, lo - 1) || !r->entry_rid[lo - 1]) return 0;
  return dnt__ecma_method_name(&r->md, r->entry_rid[lo - 1], buf, cap);
}

void dnt__r2r_free(struct dnt__r2r *r) {
  if (!r) return;
  free(r->entry_rid);
  if (r->mapped) munmap(r->bytes, r->len);
  else free(r->bytes);
  free(r);
}

/* A TypeDef's (what 0) or a MethodDef's (1) name, or a MethodDef's parameters (2), in the
 * assembly at path: 1, or 0. */
/* The assembly at path mapped and its metadata read into *r (unmap with munmap): 0 or -1. */
static int open_assembly(const char *path, struct dnt__r2r *r) {
  size_t len;
  uint8_t *bytes = dnt__map_file(path, DNT__MAX_IMAGE, &len);
  if (!bytes) return -1;
  *r = (struct dnt__r2r){.bytes = bytes, .len = len, .mapped = 1};
  uint32_t cli_rva;
  if (read_pe(r, &cli_rva) == 0 && read_metadata(r, cli_rva) == 0) return 0;
  munmap(bytes, len);
  return -1;
}

/* A TypeDef's (what 0) or a MethodDef's (1) name, or a MethodDef's parameters (2), in the
 * assembly at path: 1, or 0. */
static int assembly_name(const char *path, int what, uint32_t rid, const struct dnt_generic_names *inst, char *buf,
                         size_t cap) {
  struct dnt__r2r r;
  if (!rid || open_assembly(path, &r) != 0) return 0;
  int ok = what == 2   ? dnt__ecma_method_params(&r.md, rid, inst, buf, cap)
           : what == 1 ? rid <= r.md.nmethods && dnt__ecma_method_name(&r.md, rid, buf, cap)
                       : rid <= r.md.ntypedefs && dnt__ecma_type_name(&r.md, rid, buf, cap);
  munmap(r.bytes, r.len);
  return ok;
}

int dnt_assembly_type_name(const char *path, uint32_t rid, char *buf, size_t cap) {
  return assembly_name(path, 0, rid, NULL, buf, cap);
}

int dnt_assembly_field(const char *path, uint32_t rid, char *name, size_t cap, uint8_t *element, uint32_t *token,
                       uint8_t *sig, size_t sigcap, size_t *siglen) {
  struct dnt__r2r r;
  if (open_assembly(path, &r) != 0) return 0;
  int ok = dnt__ecma_field(&r.md, rid, name, cap, element, token, sig, sigcap, siglen);
  munmap(r.bytes, r.len);
  return ok;
}

uint32_t dnt_assembly_find_type(const char *path, const char *ns, const char *name) {
  struct dnt__r2r r;
  if (open_assembly(path, &r) != 0) return 0;
  uint32_t td = dnt__ecma_find_type(&r.md, ns, name);
  munmap(r.bytes, r.len);
  return td;
}

int dnt_assembly_method_name(const char *path, uint32_t rid, char *buf, size_t cap) {
  return assembly_name(path, 1, rid, NULL, buf, cap);
}

int dnt_assembly_method_params(const char *path, uint32_t rid, const struct dnt_generic_names *inst, char *buf,
                               size_t cap) {
  return assembly_name(path, 2, rid, inst, buf, cap);
}
