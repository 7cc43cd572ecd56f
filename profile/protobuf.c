/* The protocol buffers wire format, for writing only (protobuf-int.h says why it is ours). */
#include <stdlib.h>
#include <string.h>

#include "protobuf-int.h"

void dnt__pb_release(struct dnt__pb *b) {
  free(b->buf);
  *b = (struct dnt__pb){0};
}

void dnt__pb_reset(struct dnt__pb *b) { b->len = 0; }

/* Room for n more bytes; 0, or -1 (sticky) when memory ran out. */
static int reserve(struct dnt__pb *b, size_t n) {
  if (b->oom) return -1;
  if (n <= b->cap - b->len) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < n) {
    if (cap > SIZE_MAX / 2) return b->oom = 1, -1;
    cap *= 2;
  }
  uint8_t *grown = realloc(b->buf, cap);
  if (!grown) return b->oom = 1, -1;
  b->buf = grown;
  b->cap = cap;
  return 0;
}

static void append(struct dnt__pb *b, const void *data, size_t n) {
  if (n == 0 || reserve(b, n) != 0) return;
  memcpy(b->buf + b->len, data, n);
  b->len += n;
}

size_t dnt__pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

void dnt__pb_varint(struct dnt__pb *b, uint64_t v) {
  uint8_t tmp[10]; /* 64 bits, 7 a byte */
  size_t n = 0;
  while (v >= 0x80) {
    tmp[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  tmp[n++] = (uint8_t)v;
  append(b, tmp, n);
}

void dnt__pb_key(struct dnt__pb *b, uint32_t field, int wire) { dnt__pb_varint(b, (uint64_t)field << 3 | (unsigned)wire); }

void dnt__pb_uint(struct dnt__pb *b, uint32_t field, uint64_t v) {
  if (!v) return;
  dnt__pb_key(b, field, DNT__PB_VARINT);
  dnt__pb_varint(b, v);
}

void dnt__pb_int(struct dnt__pb *b, uint32_t field, int64_t v) { dnt__pb_uint(b, field, (uint64_t)v); }

void dnt__pb_bool(struct dnt__pb *b, uint32_t field, int v) { dnt__pb_uint(b, field, v ? 1 : 0); }

void dnt__pb_bytes(struct dnt__pb *b, uint32_t field, const void *data, size_t n) {
  dnt__pb_key(b, field, DNT__PB_LEN);
  dnt__pb_varint(b, n);
  append(b, data, n);
}

void dnt__pb_message(struct dnt__pb *b, uint32_t field, const struct dnt__pb *sub) {
  if (sub->oom) b->oom = 1;
  dnt__pb_bytes(b, field, sub->buf, sub->len);
}

void dnt__pb_packed(struct dnt__pb *b, uint32_t field, const uint64_t *v, size_t n) {
  if (!n) return;
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++) bytes += dnt__pb_varint_size(v[i]);
  dnt__pb_key(b, field, DNT__PB_LEN);
  dnt__pb_varint(b, bytes);
  if (reserve(b, bytes) != 0) return;
  for (size_t i = 0; i < n; i++) dnt__pb_varint(b, v[i]);
}
