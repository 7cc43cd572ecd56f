/* lines.c: a frame's source line (dnt-core.h), as SOS's clrstack finds it: the native offset
 * mapped to an IL offset by the method's debug info, then the IL offset to a line by the
 * portable PDB beside the module's file (profile/'s reader).
 *
 * The JIT's debug info (its RealCodeHeader's first field, .NET 10's layout): a flag byte (0x1: a
 * patchpoint's info follows, 40 bytes and 4 a local; 0x2: rich info, a u32 size and its bytes),
 * then nibble-coded sizes (0xFFFFFFFF first: a second, instrumented table's size follows), then
 * the bounds: a count and two bit widths (nibble-coded), and at the next byte the entries, each
 * 2 bits of source type, the native offset's delta and the IL offset plus 3 (0 the epilog, 1 the
 * prolog, 2 no mapping), packed from the low bit up. A nibble stream takes each byte's low half
 * first; a number is 3-bit groups, most significant first, each with 0x8 when more follows. */
#include <stdio.h>
#include <string.h>

#include "core-int.h"
#include "dnt-profile.h"

#define FLAG_PATCHPOINT 0x1
#define FLAG_RICH 0x2
#define PATCHPOINT_SIZE 40
#define PATCHPOINT_LOCALS 16
#define MORE_TABLES 0xFFFFFFFFu
#define IL_EPILOG 0xFFFFFFFDu
#define IL_PROLOG 0xFFFFFFFEu
#define IL_NONE 0xFFFFFFFFu
#define MAX_BOUNDS 100000

struct nibbles {
  const dnt_core *c;
  uint64_t at; /* the byte */
  int high;    /* its high half next */
  int bad;
};

static unsigned nibble(struct nibbles *n) {
  uint8_t b;
  if (dnt_core_read(n->c, n->at, &b, 1) != 0) return n->bad = 1, 0;
  unsigned v = n->high ? b >> 4 : b & 0xf;
  if (n->high) n->at++;
  n->high = !n->high;
  return v;
}

static uint32_t number(struct nibbles *n) {
  uint32_t v = 0;
  for (int i = 0; i < 11 && !n->bad; i++) {
    unsigned x = nibble(n);
    v = v << 3 | (x & 7);
    if (!(x & 8)) return v;
  }
  n->bad = 1;
  return 0;
}

/* The next whole byte after what n has read. */
static uint64_t byte_after(const struct nibbles *n) { return n->at + (n->high ? 1 : 0); }

/* The IL offset at native offset off of the method whose debug info is at info: 0; 1 when the
 * offset maps to no IL (no line then); -1 when the map does not read. */
static int il_offset(const dnt_core *c, uint64_t info, uint64_t off, uint32_t *il) {
  uint8_t flags;
  if (!info || dnt_core_read(c, info, &flags, 1) != 0) return -1;
  uint64_t at = info + 1;
  if (flags & FLAG_PATCHPOINT) {
    uint32_t locals;
    if (dnt_core_read_u32(c, at + PATCHPOINT_LOCALS, &locals) != 0 || locals > 65536) return -1;
    at += PATCHPOINT_SIZE + 4ull * locals;
  }
  if (flags & FLAG_RICH) {
    uint32_t size;
    if (dnt_core_read_u32(c, at, &size) != 0) return -1;
    at += 4ull + size;
  }
  struct nibbles n = {c, at, 0, 0};
  uint32_t bounds = number(&n);
  if (bounds == MORE_TABLES) bounds = number(&n), number(&n);
  number(&n); /* the variables' size */
  if (n.bad || !bounds) return -1;
  struct nibbles b = {c, byte_after(&n), 0, 0};
  uint32_t count = number(&b), native_bits = number(&b) + 1, il_bits = number(&b) + 1;
  uint32_t width = 2 + native_bits + il_bits;
  if (b.bad || count > MAX_BOUNDS || width > 64) return -1;
  uint64_t bits = byte_after(&b), native = 0;
  uint32_t found = IL_NONE, highest = IL_NONE;
  int hit = 0;
  for (uint32_t k = 0; k < count; k++) {
    uint64_t e = 0, first = (uint64_t)k * width;
    uint8_t buf[9] = {0};
    if (dnt_core_read(c, bits + first / 8, buf, (size_t)((first % 8 + width + 7) / 8)) != 0) return -1;
    for (uint32_t i = 0; i < width; i++) {
      uint64_t bit = first % 8 + i;
      e |= (uint64_t)(buf[bit / 8] >> (bit % 8) & 1) << i;
    }
    native += (e >> 2) & ((1ull << native_bits) - 1);
    uint32_t value = (uint32_t)(e >> (2 + native_bits)) - 3u;
    if (value < IL_EPILOG && (highest == IL_NONE || value > highest)) highest = value;
    if (native <= off) found = value, hit = 1; /* the last entry at or before the offset */
  }
  if (!hit) return -1;
  if (found == IL_NONE) return 1;
  if (found == IL_PROLOG) found = 0;
  if (found == IL_EPILOG) {
    if (highest == IL_NONE) return -1;
    found = highest;
  }
  *il = found;
  return 0;
}

int dnt_clr_source_line(const dnt_clr *r, uint64_t ip, int caller, char *file, size_t cap, uint32_t *line) {
  const dnt_core *c = dnt__clr_core(r);
  uint64_t md, start, info, mt;
  uint32_t token, il = 0;
  struct dnt__code_unwind u;
  if (dnt__clr_code(r, ip, &md, &start, &u) != 0) return -1;
  /* a caller's frame points after its call: the call's own line is the byte before */
  if (caller && ip >= start + 1) ip -= 1;
  int mapped = u.header && dnt_core_read_u64(c, u.header, &info) == 0 ? il_offset(c, info, ip - start, &il) : -1;
  if (mapped == 1) return -1; /* code of no IL offset */
  if (mapped < 0) il = 0;      /* as SOS: no map, the method's first line */
  char path[4096];
  if (dnt_clr_method_desc(r, md, &mt, &token) != 0 || dnt_clr_method_module(r, md, path, sizeof path) != 0) return -1;
  /* its symbols: the portable PDB beside the module's file */
  char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  if (!dot || (slash && dot < slash) || (size_t)(dot - path) + 5 > sizeof path) return -1;
  memcpy(dot, ".pdb", 5);
  return dnt_pdb_line(path, token & 0xffffff, il, file, cap, line) ? 0 : -1;
}
