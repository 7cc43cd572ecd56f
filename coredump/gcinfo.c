/* gcinfo.c: the JIT's GC info of an x64 method (version 4, .NET 10), read to say which of its
 * frame's slots hold references at a code offset (core-int.h). The format (gcinfoencoder.cpp's,
 * read as the runtime's GcInfoDecoder reads it):
 *
 * a bit stream, least significant bit of each byte first. Numbers are "var-length": with base b,
 * chunks of b+1 bits, the top bit of each saying another chunk follows (signed ones sign-extend
 * their last chunk). A header: slim (bit 0 = 0: a stack base register or not, the code length) or
 * fat (10 flag bits, the code length, prolog/epilog sizes, the GS cookie, generics context,
 * stack base register, edit-and-continue, reverse P/Invoke slots, the outgoing argument area).
 * Then the safe points (the return addresses of calls; each a fixed width of ceil(log2(code
 * length)) bits), the interruptible ranges (delta-encoded), the slot table (registers, tracked
 * stack slots, untracked stack slots; each with 2 flag bits: interior, pinned; a stack slot
 * relative to the caller's SP, the SP or the frame register), and the live state: one bit vector
 * per safe point (possibly through an offset table, possibly run-length encoded), then for the
 * interruptible ranges, chunks of 64 code offsets each with the slots that could be live, their
 * state at the chunk's start and the offsets where each changes. */
#include <string.h>

#include "core-int.h"

#define CODE_LENGTH_BASE 8
#define NORM_PROLOG_BASE 5
#define NORM_EPILOG_BASE 3
#define GS_COOKIE_BASE 6
#define GENERICS_CONTEXT_BASE 6
#define STACK_BASE_REGISTER_BASE 3
#define ENC_PRESERVED_BASE 4
#define REVERSE_PINVOKE_BASE 6
#define STACK_AREA_BASE 3
#define NUM_SAFE_POINTS_BASE 2
#define NUM_RANGES_BASE 1
#define RANGE_DELTA1_BASE 6
#define RANGE_DELTA2_BASE 6
#define NUM_REGISTERS_BASE 2
#define NUM_STACK_SLOTS_BASE 2
#define NUM_UNTRACKED_BASE 1
#define REGISTER_BASE 3
#define REGISTER_DELTA_BASE 2
#define STACK_SLOT_BASE 6
#define STACK_SLOT_DELTA_BASE 4
#define POINTER_SIZE_BASE 3
#define RLE_RUN_BASE 2
#define RLE_SKIP_BASE 4
#define CHUNK_OFFSETS 64
#define CHUNK_OFFSETS_LOG2 6

#define FLAG_GS_COOKIE 0x4
#define FLAG_GENERICS_MASK 0x30
#define FLAG_STACK_BASE_REGISTER 0x40
#define FLAG_REPORT_ONLY_LEAF 0x80
#define FLAG_EDIT_AND_CONTINUE 0x100
#define FLAG_REVERSE_PINVOKE 0x200

#define MAX_GCINFO_BYTES (1u << 20)
#define WINDOW 512

struct bits {
  dnt__read_fn read;
  const void *ud;
  uint64_t base;        /* the stream's first byte */
  uint64_t pos;         /* in bits */
  uint8_t window[WINDOW];
  uint64_t window_at;   /* the byte the window begins at (relative), ~0 none */
  int bad;              /* a read past what the core holds, or past the bound */
};

static int byte_at(struct bits *b, uint64_t at, uint8_t *v) {
  if (at >= MAX_GCINFO_BYTES) return -1;
  if (b->window_at == ~0ull || at < b->window_at || at >= b->window_at + WINDOW) {
    /* the window ends where the core's memory may end: read what there is, a byte at a time past
     * a failing page */
    b->window_at = at;
    if (b->read(b->ud, b->base + at, b->window, WINDOW) != 0) {
      size_t n = 0;
      while (n < WINDOW && b->read(b->ud, b->base + at + n, b->window + n, 1) == 0) n++;
      if (!n) return b->window_at = ~0ull, -1;
      memset(b->window + n, 0, WINDOW - n);
    }
  }
  *v = b->window[at - b->window_at];
  return 0;
}

/* n bits (at most 64), the first the least significant. */
static uint64_t read_bits(struct bits *b, unsigned n) {
  uint64_t v = 0;
  if (n > 64) b->bad = 1;
  for (unsigned i = 0; i < n && !b->bad;) {
    uint8_t byte;
    uint64_t at = b->pos >> 3;
    unsigned shift = b->pos & 7, take = 8 - shift < n - i ? 8 - shift : n - i;
    if (byte_at(b, at, &byte) != 0) {
      b->bad = 1;
      break;
    }
    v |= (uint64_t)((byte >> shift) & ((1u << take) - 1)) << i;
    i += take, b->pos += take;
  }
  return b->bad ? 0 : v;
}

static uint64_t var_unsigned(struct bits *b, unsigned base) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift + base <= 64 && !b->bad; shift += base) {
    uint64_t chunk = read_bits(b, base + 1);
    v |= (chunk & ((1ull << base) - 1)) << shift;
    if (!(chunk & (1ull << base))) return v;
  }
  b->bad = 1;
  return 0;
}

static int64_t var_signed(struct bits *b, unsigned base) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift + base <= 64 && !b->bad; shift += base) {
    uint64_t chunk = read_bits(b, base + 1);
    v |= (chunk & ((1ull << base) - 1)) << shift;
    if (!(chunk & (1ull << base))) {
      unsigned used = shift + base;
      return used >= 64 ? (int64_t)v : (int64_t)(v << (64 - used)) >> (64 - used);
    }
  }
  b->bad = 1;
  return 0;
}

static unsigned ceil_log2(uint64_t x) {
  unsigned n = 0;
  while (n < 64 && (1ull << n) < x) n++;
  return n;
}

/* The slot table, all of it (registers, tracked stack slots, untracked ones). */
static int read_slots(struct bits *b, struct dnt__gc_slot *slots, size_t cap, uint32_t *nregs, uint32_t *ntracked,
                      uint32_t *nslots) {
  uint32_t regs = read_bits(b, 1) ? (uint32_t)var_unsigned(b, NUM_REGISTERS_BASE) : 0, stack = 0, untracked = 0;
  if (read_bits(b, 1)) {
    stack = (uint32_t)var_unsigned(b, NUM_STACK_SLOTS_BASE);
    untracked = (uint32_t)var_unsigned(b, NUM_UNTRACKED_BASE);
  }
  if (b->bad || (uint64_t)regs + stack + untracked > cap) return -1;
  uint32_t flags = 0, reg = 0;
  for (uint32_t i = 0; i < regs; i++) {
    if (i == 0 || flags) {
      reg = (uint32_t)var_unsigned(b, REGISTER_BASE);
      flags = (uint32_t)read_bits(b, 2);
    } else {
      reg += (uint32_t)var_unsigned(b, REGISTER_DELTA_BASE) + 1;
    }
    slots[i] = (struct dnt__gc_slot){.is_register = 1, .reg = reg, .flags = flags};
  }
  /* the tracked stack slots, then the untracked: each list restarts its deltas */
  for (int part = 0; part < 2; part++) {
    uint32_t first = part ? regs + stack : regs, count = part ? untracked : stack;
    uint64_t norm = 0; /* unsigned: damaged info may overflow it, harmlessly */
    for (uint32_t i = 0; i < count; i++) {
      uint32_t base = (uint32_t)read_bits(b, 2);
      if (i == 0 || flags) {
        norm = (uint64_t)var_signed(b, STACK_SLOT_BASE);
        flags = (uint32_t)read_bits(b, 2);
      } else {
        norm += var_unsigned(b, STACK_SLOT_DELTA_BASE);
      }
      slots[first + i] = (struct dnt__gc_slot){.base = base, .offset = (int32_t)(uint32_t)(norm << 3), .flags = flags,
                                               .untracked = part};
    }
  }
  *nregs = regs, *ntracked = regs + stack, *nslots = regs + stack + untracked;
  return b->bad ? -1 : 0;
}

/* Reads a run-length encoded bit vector of n slots: calls take(slot) for each set one. */
static void read_rle(struct bits *b, uint32_t n, void (*take)(void *ud, uint32_t slot), void *ud) {
  int skip = read_bits(b, 1) == 0, report = 1;
  uint32_t done = (uint32_t)var_unsigned(b, skip ? RLE_SKIP_BASE : RLE_RUN_BASE);
  skip = !skip;
  while (done < n && !b->bad) {
    uint32_t count = (uint32_t)var_unsigned(b, skip ? RLE_SKIP_BASE : RLE_RUN_BASE) + 1;
    if (report)
      for (uint32_t s = done; s < done + count && s < n; s++) take(ud, s);
    done += count, skip = !skip, report = !report;
  }
}

struct marks {
  struct dnt__gc_slot *slots;
  uint32_t n;
  int could; /* marks could-be-live, else live */
};

static void mark(void *ud, uint32_t slot) {
  struct marks *m = ud;
  if (slot < m->n) {
    if (m->could) m->slots[slot].could = 1;
    else m->slots[slot].live = 1;
  }
}

static int core_read(const void *ud, uint64_t at, void *buf, size_t n) { return dnt_core_read(ud, at, buf, n); }

int dnt__gcinfo_read(const dnt_core *c, uint64_t at, uint32_t offset, int flags, struct dnt__gcinfo *g) {
  return dnt__gcinfo_decode(core_read, c, at, offset, flags, g);
}

int dnt__gcinfo_decode(dnt__read_fn read, const void *ud, uint64_t at, uint32_t offset, int flags, struct dnt__gcinfo *g) {
  memset(g, 0, sizeof *g);
  struct bits b = {.read = read, .ud = ud, .base = at, .window_at = ~0ull};
  g->stack_base_register = ~0u;
  uint32_t header = 0, slim = read_bits(&b, 1) == 0;
  if (slim) {
    if (read_bits(&b, 1)) header = FLAG_STACK_BASE_REGISTER, g->stack_base_register = 0 ^ 5;
    g->code_length = (uint32_t)var_unsigned(&b, CODE_LENGTH_BASE);
  } else {
    header = (uint32_t)read_bits(&b, 10);
    g->code_length = (uint32_t)var_unsigned(&b, CODE_LENGTH_BASE);
    if (header & FLAG_GS_COOKIE) {
      var_unsigned(&b, NORM_PROLOG_BASE);
      var_unsigned(&b, NORM_EPILOG_BASE);
    } else if (header & FLAG_GENERICS_MASK) {
      var_unsigned(&b, NORM_PROLOG_BASE);
    }
    if (header & FLAG_GS_COOKIE) var_signed(&b, GS_COOKIE_BASE);
    if (header & FLAG_GENERICS_MASK) var_signed(&b, GENERICS_CONTEXT_BASE);
    if (header & FLAG_STACK_BASE_REGISTER) g->stack_base_register = (uint32_t)var_unsigned(&b, STACK_BASE_REGISTER_BASE) ^ 5;
    if (header & FLAG_EDIT_AND_CONTINUE) var_unsigned(&b, ENC_PRESERVED_BASE);
    if (header & FLAG_REVERSE_PINVOKE) var_signed(&b, REVERSE_PINVOKE_BASE);
    g->outgoing_area = (uint32_t)var_unsigned(&b, STACK_AREA_BASE) * 8;
  }
  g->report_only_leaf = (header & FLAG_REPORT_ONLY_LEAF) != 0;
  uint32_t safe_points = (uint32_t)var_unsigned(&b, NUM_SAFE_POINTS_BASE);
  uint32_t ranges = slim ? 0 : (uint32_t)var_unsigned(&b, NUM_RANGES_BASE);
  if (b.bad || g->code_length == 0 || safe_points > g->code_length || ranges > g->code_length) return -1;
  /* the safe point at offset, if any */
  unsigned width = ceil_log2(g->code_length);
  uint32_t safe_index = safe_points;
  for (uint32_t i = 0; i < safe_points && !b.bad; i++) {
    uint32_t sp = (uint32_t)read_bits(&b, width);
    if (sp == offset && safe_index == safe_points) safe_index = i;
  }
  int aborted = (flags & DNT__GC_ABORTED) != 0;
  /* the interruptible ranges: where offset lies among them, counted in interruptible offsets */
  uint32_t pseudo = 0, interruptible = 0, last_stop = 0, in_range = 0;
  for (uint32_t i = 0; i < ranges && !b.bad; i++) {
    uint32_t start = last_stop + (uint32_t)var_unsigned(&b, RANGE_DELTA1_BASE);
    uint32_t length = (uint32_t)var_unsigned(&b, RANGE_DELTA2_BASE) + 1, stop = start + length;
    if (offset >= start && offset < stop) pseudo = interruptible + offset - start, in_range = 1;
    interruptible += length, last_stop = stop;
  }
  g->interruptible = in_range;
  g->safe_point = safe_index < safe_points;
  uint32_t nregs, ntracked;
  if (read_slots(&b, g->slots, DNT__GC_MAX_SLOTS, &nregs, &ntracked, &g->nslots) != 0) return -1;
  int use_safe_point = !aborted && safe_index < safe_points;
  if (aborted && !in_range) return g->nslots = 0, 0; /* execution will not resume here: nothing is live */
  struct marks live = {g->slots, ntracked, 0};
  if (ntracked) {
    uint32_t offset_bits = 0;
    if (safe_points && read_bits(&b, 1)) offset_bits = (uint32_t)var_unsigned(&b, POINTER_SIZE_BASE) + 1;
    if (use_safe_point) {
      if (offset_bits) { /* an offset table into the states, which may be run-length encoded */
        uint64_t table = b.pos;
        b.pos = table + (uint64_t)safe_index * offset_bits;
        uint64_t state = read_bits(&b, offset_bits);
        b.pos = ((table + (uint64_t)safe_points * offset_bits + 7) & ~7ull) + state;
        if (read_bits(&b, 1)) {
          read_rle(&b, ntracked, mark, &live);
          goto untracked;
        }
      } else {
        b.pos += (uint64_t)safe_index * ntracked;
      }
      for (uint32_t s = 0; s < ntracked && !b.bad; s++) g->slots[s].live = (int)read_bits(&b, 1);
      goto untracked;
    }
    b.pos += (uint64_t)safe_points * ntracked;
    if (!ranges || !in_range) goto untracked;
    /* fully interruptible: the chunk holding offset, or the last earlier one with data */
    uint32_t chunks = (interruptible + CHUNK_OFFSETS - 1) / CHUNK_OFFSETS, at_chunk = pseudo / CHUNK_OFFSETS;
    uint32_t pointer_bits = (uint32_t)var_unsigned(&b, POINTER_SIZE_BASE);
    if (!pointer_bits || pointer_bits > 32 || b.bad) goto untracked;
    uint64_t table = b.pos, chunk_pointer = 0;
    uint32_t chunk = at_chunk;
    for (;;) {
      b.pos = table + (uint64_t)chunk * pointer_bits;
      if ((chunk_pointer = read_bits(&b, pointer_bits)) || b.bad) break;
      if (chunk-- == 0) goto untracked;
    }
    b.pos = ((table + (uint64_t)chunks * pointer_bits + 7) & ~7ull) + chunk_pointer - 1;
    /* which slots could be live in the chunk: a bit vector, or run-length encoded */
    struct marks could = {g->slots, ntracked, 1};
    uint32_t could_count = 0;
    if (read_bits(&b, 1)) {
      read_rle(&b, ntracked, mark, &could);
    } else {
      for (uint32_t s = 0; s < ntracked && !b.bad; s++) g->slots[s].could = (int)read_bits(&b, 1);
    }
    for (uint32_t s = 0; s < ntracked; s++) could_count += (uint32_t)g->slots[s].could;
    struct bits final_state = b; /* their states at the chunk's end, then each one's transitions */
    b.pos += could_count;
    uint32_t delta = pseudo % CHUNK_OFFSETS;
    for (uint32_t s = 0; s < ntracked && !b.bad; s++) {
      if (!g->slots[s].could) continue;
      uint32_t state = (uint32_t)read_bits(&final_state, 1);
      if (chunk == at_chunk)
        while (read_bits(&b, 1) && !b.bad)
          if ((uint32_t)read_bits(&b, CHUNK_OFFSETS_LOG2) > delta) state ^= 1;
      g->slots[s].live = (int)state;
    }
  }
untracked:
  if (b.bad) return -1;
  /* untracked slots are live throughout, but for a funclet's parent or a filter */
  for (uint32_t s = ntracked; s < g->nslots; s++) g->slots[s].live = !(flags & DNT__GC_NO_UNTRACKED);
  return 0;
}
