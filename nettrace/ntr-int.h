/* ntr-int.h: what the nettrace/ sources share and nobody else sees.
 *
 * Two levels of parsing (style item 16):
 *  1. parser.c: the outer framing, a resumable state machine. Each state names how many bytes it
 *     needs (`need`); feed() hands a step exactly that many contiguous bytes, straight from the
 *     caller's buffer when they are all there (zero-copy), else from the carry buffer once it
 *     has been topped up. A whole block is one step, so block decoders never see a partial block.
 *  2. block.c / metadata.c / v6.c: decoders of one complete block with bounds-checked cursors.
 *
 * States of the outer machine (each "waiting for ..."):
 *
 *   MAGIC ──"Nettrace"──▶ HEADER_WORD ──20──▶ FAST_NAME ──▶ OBJ_TAG ◀────────────────┐
 *     │                       │                           ▲    │ 0x05          0x01 │
 *     │ "\x14\0\0\0!Fas"      │ 0                         │    ▼ (NetPerf 0x04) (DONE) │
 *     ▼ (NetPerf)             ▼                           │ OBJ_TYPE                 │
 *   NETPERF_NAME ─────────────┼───────────────────────────┘    │                    │
 *                        V6_VERSION                           │                    │
 *                             │                           OBJ_NAME                  │
 *                             ▼                      "Trace" │   │ *Block           │
 *                        V6_BLOCK_HDR ◀──┐             ▼          ▼                 │
 *                         │  kind 0    │           TRACE_BODY  BLOCK_SIZE           │
 *                         │  ─▶ DONE   │               │          │                 │
 *                         ▼            │               │          ▼                 │
 *                        V6_BLOCK_BODY─┘               │     BLOCK_BODY             │
 *                                                      └──────────┴─────────────────┘
 *   any state ──error──▶ FAILED (sticky)      any callback ≠ 0 ──▶ STOPPED (sticky)
 *
 * Checklist: adding a block type
 *  1. V4/V5: recognise its type name in parser.c (object_kind()); V6: add the kind to
 *     enum v6_kind in v6.c and a case in ntr__v6_block().
 *  2. Write its decoder with the cursor helpers below; check every length against bytes left
 *     and against a member of ntr_limits before using it.
 *  3. If it feeds a table, bound that table and say when the format lets us clear it. Bound
 *     its memory, not only what the stream spells out: entries and index too (ntr__map_bytes),
 *     or a row of a few bytes can cost a hundred here.
 *  4. Add a callback to ntr_callbacks only if consumers need it; document ownership.
 *  5. Teach tests/lib/ntr-writer.c to write it; add a split, truncation and malformed case.
 *  6. Describe it in docs/nettrace-format.md.
 */
#ifndef NTR_INT_H
#define NTR_INT_H

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "ntr.h"

/* ---- allocator (error.c) ---- */
void *ntr__malloc(size_t n);
void *ntr__realloc(void *ptr, size_t n);
void *ntr__calloc(size_t count, size_t size);
void ntr__free(void *ptr);

/* ---- id maps (map.c): u64 key -> nonzero u64 value, open addressing ---- */
typedef struct ntr__map {
  uint64_t *keys;
  uint64_t *vals; /* 0 = empty slot */
  size_t cap;     /* power of two, or 0 */
  size_t len;
} ntr__map;

void ntr__map_release(ntr__map *m);
void ntr__map_clear(ntr__map *m);
/* Returns the slot of key's value, or NULL. The pointer is valid until the next insert. */
uint64_t *ntr__map_find(const ntr__map *m, uint64_t key);
/* Inserts or replaces; val must be nonzero. 0 or NTR_ENOMEM. */
int ntr__map_put(ntr__map *m, uint64_t key, uint64_t val);
/* Removes key if present; returns its value or 0. */
uint64_t ntr__map_del(ntr__map *m, uint64_t key);
/* Bytes a map needs to hold `len` entries under its growth rule: what the limits charge for a
 * table's index (a function of the entries, so the charge does not depend on history). */
size_t ntr__map_bytes(size_t len);

/* ---- outer states ---- */
/* Starts at a non-zero value so a zeroed or foreign struct is not mistaken for a parser. */
enum ntr__state {
  NTR_S_MAGIC = 0x4e54,  /* waiting for the 8-byte "Nettrace" magic */
  NTR_S_HEADER_WORD,     /* waiting for the u32 after the magic: 20 (V4/V5) or 0 (V6) */
  NTR_S_FAST_NAME,       /* waiting for "!FastSerialization.1" (20 bytes) */
  NTR_S_NETPERF_NAME,    /* NetPerf: waiting for the rest of it, "tSerialization.1" (16 bytes) */
  NTR_S_OBJ_TAG,         /* waiting for BeginPrivateObject (0x05) or the NullReference end tag */
  NTR_S_OBJ_TYPE,        /* waiting for 05 01 version minReader nameLen (14 bytes) */
  NTR_S_OBJ_NAME,        /* waiting for the type name and its EndObject tag */
  NTR_S_TRACE_BODY,      /* waiting for the 48-byte Trace payload and EndObject */
  NTR_S_BLOCK_SIZE,      /* waiting for a block's i32 blockSize */
  NTR_S_BLOCK_BODY,      /* waiting for padding, blockSize bytes and EndObject */
  NTR_S_V6_VERSION,      /* waiting for V6 major and minor versions (8 bytes) */
  NTR_S_V6_BLOCK_HDR,    /* waiting for a V6 block header (u24 size, u8 kind) */
  NTR_S_V6_BLOCK_BODY,   /* waiting for a V6 block's payload */
  NTR_S_DONE,            /* end-of-stream read; later bytes are ignored */
  NTR_S_FAILED,          /* a sticky error; p->err says which */
  NTR_S_MAX
};

enum ntr__obj { NTR_OBJ_TRACE = 1, NTR_OBJ_EVENT, NTR_OBJ_METADATA, NTR_OBJ_STACK, NTR_OBJ_SP, NTR_OBJ_NETPERF_OLD };

#define NTR__PARSER_MAGIC 0x6e747270u /* "ntrp" */

struct ntr__stack_ent { uint64_t off; uint32_t n; uint32_t id; };
struct ntr__label_ent { const ntr_label *labels; uint32_t n; };
struct ntr__thread_ent { ntr_thread t; char *name; };

struct ntr_parser {
  uint32_t magic;
  int state;
  int err;               /* sticky error code when state == NTR_S_FAILED */
  int in_callback;
  int finished;
  ntr_callbacks cb;
  void *ud;
  ntr_limits lim;

  uint64_t offset;       /* absolute offset of the first byte not yet consumed */
  size_t need;           /* bytes the current state wants */
  uint8_t *carry;        /* partial step, kept between feeds */
  size_t carry_len, carry_cap;

  int obj_kind;          /* enum ntr__obj of the object being read */
  uint32_t block_size;   /* of the block being read */
  uint32_t pad;          /* alignment bytes before it */
  uint32_t v6_kind;

  int have_trace;
  int netperf;           /* a NetPerf V3 stream (no Nettrace magic, BeginObject tags) */
  uint32_t obj_version;  /* the version in the type of the object being read */
  ntr_trace trace;
  ntr_keyvalue *trace_kv; /* V6 key/values, one allocation with their strings */

  /* metadata table: id -> ntr_metadata * (one allocation each) */
  ntr__map md;
  size_t md_bytes;
  uint32_t md_last_id;
  const ntr_metadata *md_last;

  /* stack table: id -> index+1 into stacks; frames in one u64 pool. Cleared at SPs. */
  ntr__map st;
  struct ntr__stack_ent *stacks;
  size_t nstacks, stacks_cap;
  uint64_t *frames;
  size_t nframes, frames_cap;
  ntr_stack st_cur;      /* the stack handed to on_event */

  /* sequence tracking: thread key -> (1<<32 | last seq). A small direct-mapped cache of
   * slots spares the hash lookup when events alternate between a few threads; slot pointers
   * die with any insert/delete/clear, so those reset it (ntr__seq_cache_reset). */
  ntr__map seq;
  struct { uint64_t key; uint64_t *slot; } seq_cache[16];

  /* V6 thread table: index -> index+1 into threads */
  ntr__map thr;
  struct ntr__thread_ent *threads;
  size_t nthreads, threads_cap;
  size_t thread_bytes;   /* rows and names, for max_thread_bytes */

  /* V6 label lists: id -> index+1 into ll_ent; each LabelList block is one allocation
   * (labels and their strings) kept in ll_blocks until the next sequence point. */
  ntr__map ll;
  struct ntr__label_ent *ll_ent;
  size_t nll, ll_cap;
  void **ll_blocks;
  size_t nll_blocks, ll_blocks_cap;
  size_t label_bytes;

  ntr_stats stats;
  char errmsg[256];
};

/* ---- errors (error.c) ---- */
/* Records a sticky error at absolute offset `off`; returns code. */
int ntr__fail(ntr_parser *p, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Called a callback that returned nonzero: records NTR_ESTOPPED and returns it. */
int ntr__stopped(ntr_parser *p, uint64_t off, const char *what);

#define NTR__CALL(p, fn, ...) ((p)->cb.fn ? (p)->cb.fn((p)->ud, __VA_ARGS__) : 0)

/* ---- block decoders ---- */
/* V4/V5 object payloads and V6 blocks share these; `off` is the absolute offset of data[0]. */
int ntr__event_block(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off, int metadata);
/* A NetPerf V3 EventBlock: events and metadata records, each event with its stack. */
int ntr__event_block_v3(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off);
int ntr__stack_block(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off);
int ntr__sp_block_v4(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off);
int ntr__trace_v4(ntr_parser *p, const uint8_t *data, uint64_t off);
int ntr__v6_block(ntr_parser *p, uint32_t kind, const uint8_t *data, size_t len, uint64_t off);

/* metadata.c */
int ntr__metadata_v5(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off);
int ntr__metadata_v6(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off);
void ntr__metadata_clear(ntr_parser *p);
static inline const ntr_metadata *ntr__metadata_get(ntr_parser *p, uint32_t id) {
  uint64_t *v;
  if (id == p->md_last_id && p->md_last)
    return p->md_last;
  v = ntr__map_find(&p->md, id);
  if (!v)
    return NULL;
  p->md_last_id = id;
  p->md_last = (const ntr_metadata *)(uintptr_t)*v;
  return p->md_last;
}

/* tables shared by V4/V5 and V6 (block.c) */
void ntr__stacks_clear(ntr_parser *p);
void ntr__labels_clear(ntr_parser *p);
void ntr__threads_clear(ntr_parser *p);
/* Compares a thread's sequence number with the last one seen, counting a gap as drops.
 * `is_sp`: the number is the last the thread tried to write (SP/RemoveThread) rather than an
 * event's own. Returns 0 or an error. */
int ntr__seq_check(ntr_parser *p, uint64_t key, uint32_t seq, int is_sp, uint64_t off);
static inline void ntr__seq_cache_reset(ntr_parser *p) {
  memset(p->seq_cache, 0, sizeof(p->seq_cache));
}
/* A thread table value: this bit (a thread seen) and its last sequence number. */
#define NTR__SEQ_USED ((uint64_t)1 << 32)
/* The slot of the direct-mapped cache in front of the thread table (a Fibonacci hash: thread
 * ids and indexes are often consecutive). */
static inline size_t ntr__seq_cache_index(uint64_t key) {
  return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 60);
}
/* An event's sequence number: the common case (the cached thread's next number) inline, the
 * rest in ntr__seq_check. */
static inline int ntr__seq_event(ntr_parser *p, uint64_t key, uint32_t seq, uint64_t off) {
  size_t ci = ntr__seq_cache_index(key);
  uint64_t *slot = p->seq_cache[ci].slot;
  if (slot && p->seq_cache[ci].key == key && seq - (uint32_t)*slot == 1) {
    *slot = NTR__SEQ_USED | seq;
    return 0;
  }
  return ntr__seq_check(p, key, seq, 0, off);
}

/* UTF-16LE (n code units) -> UTF-8. Writes at most outsz bytes (no NUL) when out != NULL;
 * returns the full UTF-8 length. */
size_t ntr__utf16_to_utf8(const uint8_t *s, size_t n, char *out, size_t outsz);

/* ---- cursor helpers: never read past `end` ---- */
typedef struct ntr__cur {
  const uint8_t *p, *end;
} ntr__cur;

static inline uint16_t ntr__le16(const uint8_t *b) { return (uint16_t)(b[0] | (b[1] << 8)); }
static inline uint32_t ntr__le32(const uint8_t *b) {
  return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}
static inline uint64_t ntr__le64(const uint8_t *b) {
  return (uint64_t)ntr__le32(b) | ((uint64_t)ntr__le32(b + 4) << 32);
}
static inline size_t ntr__left(const ntr__cur *c) { return (size_t)(c->end - c->p); }
static inline int ntr__u8(ntr__cur *c, uint8_t *v) {
  if (c->p >= c->end)
    return -1;
  *v = *c->p++;
  return 0;
}
static inline int ntr__u16(ntr__cur *c, uint16_t *v) {
  if (ntr__left(c) < 2)
    return -1;
  *v = ntr__le16(c->p);
  c->p += 2;
  return 0;
}
static inline int ntr__u32(ntr__cur *c, uint32_t *v) {
  if (ntr__left(c) < 4)
    return -1;
  *v = ntr__le32(c->p);
  c->p += 4;
  return 0;
}
static inline int ntr__u64(ntr__cur *c, uint64_t *v) {
  if (ntr__left(c) < 8)
    return -1;
  *v = ntr__le64(c->p);
  c->p += 8;
  return 0;
}
static inline int ntr__skip(ntr__cur *c, size_t n) {
  if (ntr__left(c) < n)
    return -1;
  c->p += n;
  return 0;
}
/* LEB128 of at most `maxbytes` bytes (5 for 32-bit values, 10 for 64-bit); -1 past the end,
 * -2 when overlong or the value does not fit. */
static inline int ntr__varuint(ntr__cur *c, uint64_t *v, int maxbytes) {
  const uint8_t *q = c->p;
  /* Most header fields are small: one byte, no loop. */
  if (q < c->end && *q < 0x80) {
    *v = *q;
    c->p = q + 1;
    return 0;
  }
  uint64_t r = 0;
  int shift = 0, i;
  for (i = 0; i < maxbytes; i++) {
    uint8_t b;
    if (q >= c->end)
      return -1;
    b = *q++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (maxbytes == 5 && r > 0xffffffffu)
        return -2;
      if (maxbytes == 10 && i == 9 && b > 1)
        return -2;
      c->p = q;
      *v = r;
      return 0;
    }
    shift += 7;
  }
  return -2;
}
static inline int ntr__varu32(ntr__cur *c, uint32_t *v) {
  uint64_t x = 0;
  int rc = ntr__varuint(c, &x, 5);
  *v = (uint32_t)x;
  return rc;
}
static inline int ntr__varu64(ntr__cur *c, uint64_t *v) { return ntr__varuint(c, v, 10); }

#endif /* NTR_INT_H */
