/* profile/: a small encoder of the protocol buffers wire format, for the pprof writer.
 *
 * Why our own and not protobuf-c: writing needs no schema compiler and no generated code, only
 * varints, length-delimited fields and packed repeated fields (about 150 lines); reading pprof
 * is never done here. Messages are built bottom-up: a nested message is encoded into a buffer
 * of its own, then appended to its parent as a length-delimited field.
 *
 * proto3 rules kept by the callers' choice of function: a scalar field equal to 0 (its default)
 * is omitted (dnt__pb_uint, dnt__pb_int, dnt__pb_bool), while an element of a repeated string
 * is always written, empty or not (dnt__pb_bytes): string_table[0] must be "". */
#ifndef DNT_PROTOBUF_INT_H
#define DNT_PROTOBUF_INT_H

#include <stddef.h>
#include <stdint.h>

/* A growable buffer. Out of memory is sticky: the buffer stops growing, every later call does
 * nothing, and oom stays set (checked once, at the end). Zero it to start; free with
 * dnt__pb_release. */
struct dnt__pb {
  uint8_t *buf;
  size_t len, cap;
  int oom;
};

enum { DNT__PB_VARINT = 0, DNT__PB_LEN = 2 }; /* the wire types used here */

void dnt__pb_release(struct dnt__pb *b);
void dnt__pb_reset(struct dnt__pb *b); /* empties it, keeping its memory (oom stays) */

/* Bytes a varint of v takes (1 to 10). */
size_t dnt__pb_varint_size(uint64_t v);
/* The raw varint: 7 bits a byte, low first, the high bit saying more follow. */
void dnt__pb_varint(struct dnt__pb *b, uint64_t v);
/* A field's key: (field << 3) | wire type. */
void dnt__pb_key(struct dnt__pb *b, uint32_t field, int wire);

/* Scalar fields, omitted when 0 (proto3). int64 is written as its two's complement in 64 bits
 * (a negative number takes 10 bytes), as protobuf does for int64. */
void dnt__pb_uint(struct dnt__pb *b, uint32_t field, uint64_t v);
void dnt__pb_int(struct dnt__pb *b, uint32_t field, int64_t v);
void dnt__pb_bool(struct dnt__pb *b, uint32_t field, int v);

/* A length-delimited field: bytes (a string), always written, even empty. data borrowed. */
void dnt__pb_bytes(struct dnt__pb *b, uint32_t field, const void *data, size_t n);
/* A nested message encoded in sub, always written (an empty message still counts as one element
 * of a repeated field). */
void dnt__pb_message(struct dnt__pb *b, uint32_t field, const struct dnt__pb *sub);
/* A packed repeated field of varints (uint64, or int64 as two's complement); omitted when n is
 * 0. v borrowed. */
void dnt__pb_packed(struct dnt__pb *b, uint32_t field, const uint64_t *v, size_t n);

#endif
