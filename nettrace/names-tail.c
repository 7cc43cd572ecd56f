/* Thread names written into a NetTrace V4/V5 stream (ntr.h): a MetadataBlock and an EventBlock
 * of our own provider, in the FastSerialization framing the runtime writes (every block's content
 * aligned on 4 bytes of the file, event headers compressed), then the end tag. */
#include <string.h>

#include "ntr-int.h"

#define NAMES_METADATA_ID 0x7ffffff0u /* far above the runtime's ids, which count from 1 */
#define CAPTURE_THREAD 0xfffffff0ull /* no thread has it: the events' sequence numbers are their own */

struct out {
  uint8_t *b;
  size_t len, cap;
  uint64_t base; /* the file offset of b[0] */
  int oom;
};

static void put(struct out *o, const void *p, size_t n) {
  if (o->oom) return;
  if (o->len + n > o->cap) {
    size_t cap = o->cap ? o->cap * 2 : 1024;
    while (cap < o->len + n) cap *= 2;
    uint8_t *b = ntr__realloc(o->b, cap);
    if (!b) {
      o->oom = 1;
      return;
    }
    o->b = b, o->cap = cap;
  }
  memcpy(o->b + o->len, p, n);
  o->len += n;
}
static void u8(struct out *o, uint8_t v) { put(o, &v, 1); }
static void u16(struct out *o, uint16_t v) {
  uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  put(o, b, 2);
}
static void u32(struct out *o, uint32_t v) {
  u16(o, (uint16_t)v);
  u16(o, (uint16_t)(v >> 16));
}
static void u64(struct out *o, uint64_t v) {
  u32(o, (uint32_t)v);
  u32(o, (uint32_t)(v >> 32));
}
static void set32(struct out *o, size_t at, uint32_t v) {
  if (o->oom) return;
  for (int i = 0; i < 4; i++) o->b[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}
static void align4(struct out *o) {
  while ((o->base + o->len) % 4) u8(o, 0);
}

/* The next code point of UTF-8 at *s (advanced), U+FFFD for a byte that starts none. */
static uint32_t next_code_point(const unsigned char **s) {
  const unsigned char *p = *s;
  uint32_t c = p[0];
  int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
  uint32_t cp = n == 0 ? c : n == 1 ? (c & 0x1f) : n == 2 ? (c & 0x0f) : (c & 0x07);
  for (int i = 1; n > 0 && i <= n; i++) {
    if ((p[i] & 0xc0) != 0x80) {
      n = -1;
      break;
    }
    cp = cp << 6 | (p[i] & 0x3f);
  }
  static const uint32_t least[] = {0, 0x80, 0x800, 0x10000};
  if (n < 0 || cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    *s = p + 1;
    return 0xfffd;
  }
  *s = p + 1 + n;
  return cp;
}

/* s as UTF-16LE with its NUL. */
static void wstr(struct out *o, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    uint32_t cp = next_code_point(&p);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      u16(o, (uint16_t)(0xd800 | (cp >> 10)));
      u16(o, (uint16_t)(0xdc00 | (cp & 0x3ff)));
    } else {
      u16(o, (uint16_t)cp);
    }
  }
  u16(o, 0);
}

/* A block object's framing up to its content: where its size goes, and where its content starts
 * (after the padding that aligns it), for block_end. */
struct block {
  size_t size_at, start;
};

static struct block block_begin(struct out *o, const char *type) {
  u8(o, 5), u8(o, 5), u8(o, 1); /* BeginPrivateObject, its type: BeginPrivateObject, NullReference */
  u32(o, 2), u32(o, 2);         /* version, minimum reader version */
  u32(o, (uint32_t)strlen(type));
  put(o, type, strlen(type));
  u8(o, 6); /* EndObject (the type) */
  struct block b = {o->len, 0};
  u32(o, 0);
  align4(o);
  b.start = o->len;
  return b;
}

static void block_end(struct out *o, struct block b) {
  set32(o, b.size_at, (uint32_t)(o->len - b.start));
  u8(o, 6); /* EndObject */
}

/* A block's header: its size, flags 1 (headers compressed, as the runtime writes them: readers
 * know that form best), the timestamps' span. */
static void block_header(struct out *o, uint64_t ts) {
  u16(o, 20), u16(o, 1), u64(o, ts), u64(o, ts);
}

static void varuint(struct out *o, uint64_t v) {
  do {
    u8(o, (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
    v >>= 7;
  } while (v);
}

/* The previous event's header within the block, from which the next is compressed. */
struct prev {
  uint32_t metadata_id, seq, payload_size;
  uint64_t thread, capture, ts;
  uint32_t proc;
};

/* One event, its header compressed against the previous one's (flags: 0x01 metadata id, 0x02
 * sequence, capture thread and processor, 0x04 thread, 0x40 sorted, 0x80 payload size; the
 * timestamp's delta always), then its payload. */
static void event(struct out *o, struct prev *pv, uint32_t metadata_id, uint32_t seq, uint64_t thread, uint64_t capture,
                  uint32_t proc, uint64_t ts, const struct out *payload) {
  uint32_t implied = pv->seq + (metadata_id != 0 ? 1 : 0);
  uint8_t f = 0x40;
  if (metadata_id != pv->metadata_id) f |= 0x01;
  if (seq != implied || capture != pv->capture || proc != pv->proc) f |= 0x02;
  if (thread != pv->thread) f |= 0x04;
  if (payload->len != pv->payload_size) f |= 0x80;
  u8(o, f);
  if (f & 0x01) varuint(o, metadata_id);
  if (f & 0x02) varuint(o, (uint32_t)(seq - pv->seq - 1)), varuint(o, capture), varuint(o, proc);
  if (f & 0x04) varuint(o, thread);
  varuint(o, ts - pv->ts);
  if (f & 0x80) varuint(o, payload->len);
  put(o, payload->b, payload->len);
  *pv = (struct prev){metadata_id, seq, (uint32_t)payload->len, thread, capture, ts, proc};
}

int ntr_names_tail(uint64_t offset, uint64_t timestamp, const uint64_t *tids, const char *const *names, size_t n,
                   uint8_t **out, size_t *len) {
  if (!out || !len || (n && (!tids || !names))) return NTR_EINVAL;
  struct out o = {.base = offset}, md = {0}, pl = {0};
  /* the metadata record: id, provider, event id, name, keywords, version, level, fields */
  u32(&md, NAMES_METADATA_ID);
  wstr(&md, NTR_NAMES_PROVIDER);
  u32(&md, 1);
  wstr(&md, NTR_NAMES_EVENT);
  u64(&md, 0), u32(&md, 0), u32(&md, 4);
  u32(&md, 2);
  u32(&md, NTR_TYPE_UINT64), wstr(&md, "ThreadId");
  u32(&md, NTR_TYPE_STRING), wstr(&md, "Name");
  struct block at = block_begin(&o, "MetadataBlock");
  block_header(&o, timestamp);
  struct prev pv = {0};
  event(&o, &pv, 0, 0, 0, 0, 0, timestamp, &md);
  block_end(&o, at);
  at = block_begin(&o, "EventBlock");
  block_header(&o, timestamp);
  memset(&pv, 0, sizeof pv); /* each block's first header is compressed against zeros */
  for (size_t i = 0; i < n; i++) {
    pl.len = 0;
    u64(&pl, tids[i]);
    wstr(&pl, names[i] ? names[i] : "");
    event(&o, &pv, NAMES_METADATA_ID, (uint32_t)i + 1, tids[i], CAPTURE_THREAD, 0xffffffffu, timestamp, &pl);
  }
  block_end(&o, at);
  u8(&o, 1); /* NullReference: the stream's end */
  int oom = o.oom || md.oom || pl.oom;
  ntr__free(md.b);
  ntr__free(pl.b);
  if (oom) {
    ntr__free(o.b);
    return NTR_ENOMEM;
  }
  *out = o.b;
  *len = o.len;
  return 0;
}
