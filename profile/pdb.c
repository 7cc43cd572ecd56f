/* pdb.c: source lines from a portable PDB (dnt-profile.h), as SOS finds them. A portable PDB is
 * an ECMA-335 metadata root of its own: its #Pdb stream (id, entry point, the type-system tables
 * it refers to and their row counts), its #~ tables (Document 0x30: name blob, hash algorithm
 * guid, hash blob, language guid; MethodDebugInformation 0x31: document, sequence points blob,
 * a row per MethodDef), its #Blob heap. A document's name is a blob: a separator byte, then the
 * blob offsets of its parts (UTF-8). Sequence points: a local signature, the first document when
 * the row names none, then records (IL offset delta, a change of document when the delta is 0
 * after the first, lines and columns deltas; both 0: a hidden point). SOS takes the last
 * visible point at or before the IL offset. Untrusted bytes: every offset and length checked. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "dnt-profile.h"
#include "r2r-int.h"

#define T_DOCUMENT 0x30
#define T_METHOD_DEBUG 0x31
#define HIDDEN_LINE 0xfeefee

struct reader {
  const uint8_t *p, *end;
  int bad;
};

static uint32_t unsigned_of(struct reader *r, int *bytes) {
  if (r->p >= r->end) return r->bad = 1, 0;
  uint8_t b = r->p[0];
  if (!(b & 0x80)) return *bytes = 1, r->p++, b;
  if ((b & 0xC0) == 0x80) {
    if (r->end - r->p < 2) return r->bad = 1, 0;
    uint32_t v = (uint32_t)(b & 0x3F) << 8 | r->p[1];
    return *bytes = 2, r->p += 2, v;
  }
  if ((b & 0xE0) != 0xC0 || r->end - r->p < 4) return r->bad = 1, 0;
  uint32_t v = (uint32_t)(b & 0x1F) << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
  return *bytes = 4, r->p += 4, v;
}

static uint32_t unsigned_(struct reader *r) {
  int n;
  return unsigned_of(r, &n);
}

/* A compressed signed integer: the sign in the low bit, the rest sign-extended by its size. */
static int32_t signed_(struct reader *r) {
  int n = 1;
  uint32_t u = unsigned_of(r, &n), v = u >> 1;
  if (u & 1) v |= n == 1 ? 0xFFFFFFC0u : n == 2 ? 0xFFFFE000u : 0xF0000000u;
  return (int32_t)v;
}

static uint32_t u16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t u32(const uint8_t *p) { return u16(p) | u16(p + 2) << 16; }
static uint32_t index_at(const uint8_t *p, int size) { return size == 2 ? u16(p) : u32(p); }

struct pdb {
  const uint8_t *blobs;
  uint32_t blobs_len;
  const uint8_t *docs, *methods;
  uint32_t ndocs, nmethods, doc_row, method_row;
  int blob_size, doc_index;
};

/* A blob of the #Blob heap: its bytes in *r (0 when out of the heap). */
static int blob(const struct pdb *d, uint32_t at, struct reader *r) {
  if (at >= d->blobs_len) return -1;
  struct reader h = {d->blobs + at, d->blobs + d->blobs_len, 0};
  uint32_t n = unsigned_(&h);
  if (h.bad || n > (uint32_t)(h.end - h.p)) return -1;
  *r = (struct reader){h.p, h.p + n, 0};
  return 0;
}

static int open_pdb(struct pdb *d, const uint8_t *f, size_t len) {
  uint32_t tlen, blen, plen;
  const uint8_t *t = dnt__ecma_stream(f, len, "#~", &tlen), *b = dnt__ecma_stream(f, len, "#Blob", &blen),
                *pdb = dnt__ecma_stream(f, len, "#Pdb", &plen);
  if (!t || !b || !pdb || tlen < 24) return -1;
  uint8_t heaps = t[6];
  uint64_t valid = (uint64_t)u32(t + 8) | (uint64_t)u32(t + 12) << 32;
  uint32_t rows[64] = {0};
  size_t p = 24;
  for (int i = 0; i < 64; i++) {
    if (!(valid >> i & 1)) continue;
    if (tlen - p < 4) return -1;
    rows[i] = u32(t + p);
    p += 4;
  }
  if (heaps & 0x40) p += 4;
  if (valid & ((1ull << T_DOCUMENT) - 1)) return -1; /* a PDB's tables are the debug ones only */
  int blob_size = heaps & 4 ? 4 : 2, guid_size = heaps & 2 ? 4 : 2;
  d->blobs = b, d->blobs_len = blen, d->blob_size = blob_size;
  d->doc_index = rows[T_DOCUMENT] < 0x10000 ? 2 : 4;
  d->doc_row = (uint32_t)(2 * blob_size + 2 * guid_size), d->method_row = (uint32_t)(d->doc_index + blob_size);
  d->ndocs = rows[T_DOCUMENT], d->nmethods = rows[T_METHOD_DEBUG];
  if (p > tlen || (uint64_t)d->ndocs * d->doc_row > tlen - p) return -1;
  d->docs = t + p;
  p += (size_t)d->ndocs * d->doc_row;
  if ((uint64_t)d->nmethods * d->method_row > tlen - p) return -1;
  d->methods = t + p;
  return 0;
}

/* Document row doc's name into buf: 0, or -1. */
static int document_name(const struct pdb *d, uint32_t doc, char *buf, size_t cap) {
  struct reader r;
  if (!doc || doc > d->ndocs || !cap) return -1;
  if (blob(d, index_at(d->docs + (size_t)(doc - 1) * d->doc_row, d->blob_size), &r) != 0 || r.p >= r.end) return -1;
  uint8_t sep = *r.p++;
  if (sep > 0x7F) return -1;
  size_t o = 0;
  buf[0] = '\0';
  for (int first = 1; r.p < r.end; first = 0) {
    uint32_t part = unsigned_(&r);
    struct reader text = {NULL, NULL, 0};
    if (r.bad || (part && blob(d, part, &text) != 0)) return -1;
    size_t n = (size_t)(text.end - text.p) + (!first && sep ? 1 : 0);
    if (o + n >= cap) return -1;
    if (!first && sep) buf[o++] = (char)sep;
    if (text.p) memcpy(buf + o, text.p, (size_t)(text.end - text.p)), o += (size_t)(text.end - text.p);
    buf[o] = '\0';
  }
  return 0;
}

/* The line of il in MethodDef rid: 0 with *doc and *line, or -1. */
static int point_for(const struct pdb *d, uint32_t rid, uint32_t il, uint32_t *doc_out, uint32_t *line_out) {
  if (!rid || rid > d->nmethods) return -1;
  const uint8_t *row = d->methods + (size_t)(rid - 1) * d->method_row;
  uint32_t doc = index_at(row, d->doc_index), points = index_at(row + d->doc_index, d->blob_size);
  struct reader r;
  if (!points || blob(d, points, &r) != 0) return -1;
  unsigned_(&r); /* the local signature */
  if (!doc) doc = unsigned_(&r);
  uint32_t offset = 0, line = 0, column = 0, found = 0;
  int first = 1, visible = 0;
  while (r.p < r.end && !r.bad) {
    uint32_t delta = unsigned_(&r);
    while (!first && delta == 0 && r.p < r.end && !r.bad) { /* a change of document */
      doc = unsigned_(&r);
      delta = unsigned_(&r);
    }
    offset = first ? delta : offset + delta;
    first = 0;
    uint32_t dlines = unsigned_(&r);
    int32_t dcolumns = dlines == 0 ? (int32_t)unsigned_(&r) : signed_(&r);
    if (r.bad) break;
    if (offset > il) break;
    if (dlines == 0 && dcolumns == 0) continue; /* hidden */
    if (!visible) {
      line = unsigned_(&r), column = unsigned_(&r);
    } else {
      line += (uint32_t)signed_(&r), column += (uint32_t)signed_(&r);
    }
    visible = 1;
    if (r.bad) break;
    if (line != 0 && line != HIDDEN_LINE) *doc_out = doc, *line_out = line, found = 1;
  }
  return found ? 0 : -1;
}

int dnt_pdb_line(const char *path, uint32_t rid, uint32_t il, char *file, size_t cap, uint32_t *line) {
  size_t len;
  const uint8_t *f = dnt__map_file(path, DNT__MAX_IMAGE, &len);
  if (!f) return 0;
  struct pdb d;
  uint32_t doc = 0;
  int ok = open_pdb(&d, f, len) == 0 && point_for(&d, rid, il, &doc, line) == 0 && document_name(&d, doc, file, cap) == 0;
  munmap((void *)f, len);
  return ok;
}
