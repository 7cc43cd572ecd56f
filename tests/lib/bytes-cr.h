/* Payloads made byte by byte in little-endian order, as a trace holds them, for the tests of the
 * field decoder (tests/cli/test-events.c, test-runtime-events.c); and counting lines of output.
 * Static helpers, one copy per test program. */
#ifndef DNT_TEST_BYTES_CR_H
#define DNT_TEST_BYTES_CR_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

struct bytes {
  uint8_t b[1 << 18];
  size_t n;
};

static inline void put(struct bytes *b, const void *p, size_t n) {
  cr_assert_leq(b->n + n, sizeof b->b);
  memcpy(b->b + b->n, p, n);
  b->n += n;
}
static inline void put8(struct bytes *b, uint8_t v) { put(b, &v, 1); }
static inline void put16(struct bytes *b, uint16_t v) { put8(b, (uint8_t)v), put8(b, (uint8_t)(v >> 8)); }
static inline void put32(struct bytes *b, uint32_t v) { put16(b, (uint16_t)v), put16(b, (uint16_t)(v >> 16)); }
static inline void put64(struct bytes *b, uint64_t v) { put32(b, (uint32_t)v), put32(b, (uint32_t)(v >> 32)); }
static inline void putf32(struct bytes *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put32(b, u);
}
static inline void putf64(struct bytes *b, double f) {
  uint64_t u;
  memcpy(&u, &f, 8);
  put64(b, u);
}
/* ASCII as UTF-16LE with its NUL */
static inline void putws(struct bytes *b, const char *s) {
  for (; *s; s++) put16(b, (uint8_t)*s);
  put16(b, 0);
}

static inline size_t count_lines(const char *s) {
  size_t n = 0;
  for (; s && *s; s++) n += *s == '\n';
  return n;
}

#endif
