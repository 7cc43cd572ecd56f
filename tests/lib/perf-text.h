/* Made-up recordings as `perf script` prints them, written line by line by the tests of perf/'s
 * readers (test-compare, test-waits): a buffer of text and printf into it. Static helpers, one
 * copy per test program. */
#ifndef DNT_TEST_PERF_TEXT_H
#define DNT_TEST_PERF_TEXT_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>

struct text {
  char buf[1 << 20];
  size_t len;
};

static inline void line(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void line(struct text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
  va_end(ap);
  cr_assert(n > 0 && (size_t)n < sizeof t->buf - t->len, "test text too long");
  t->len += (size_t)n;
}

#endif
