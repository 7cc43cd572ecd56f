/* What the analyses' tests (tests/runtime/test-gc.c, test-jit.c, test-threadpool.c,
 * test-exceptions.c, test-locks.c) share (static helpers, one copy per test program): runtime
 * events made here and fed to an analysis's callbacks, and counting a UTF-16 string's occurrences
 * in a file (an answer derived from the trace's bytes, not from dntrace's parser); the corpus,
 * python3 and the oracle come from env-cr.h. */
#ifndef DNT_TEST_ANALYSIS_FEED_H
#define DNT_TEST_ANALYSIS_FEED_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-analyze.h"
#include "env-cr.h"

#define RT "Microsoft-Windows-DotNETRuntime"

struct feed {
  struct dnt_schema *schema;
  ntr_callbacks cb;
  void *a;
  uint8_t buf[1024];
  size_t len;
};

/* 1 tick = 1 us, so a timestamp of 12000 is 12 ms. */
static inline void feed_init(struct feed *f, const ntr_callbacks *cb, void *a, struct dnt_schema *schema) {
  memset(f, 0, sizeof *f);
  f->schema = schema;
  f->cb = *cb;
  f->a = a;
  ntr_trace t = {.sync_time_qpc = 0, .qpc_frequency = 1000000, .pointer_size = 8};
  cr_assert_eq(f->cb.on_trace(a, &t), 0);
}

static inline struct dnt_schema *schema_or_fail(void) {
  char err[256];
  struct dnt_schema *s = dnt_schema_new();
  cr_assert(s);
  cr_assert_eq(dnt_schema_load_default(s, err, sizeof err), 0, "%s", err);
  return s;
}

static inline void put(struct feed *f, const void *p, size_t n) {
  cr_assert(f->len + n <= sizeof f->buf);
  memcpy(f->buf + f->len, p, n);
  f->len += n;
}
static inline void put8(struct feed *f, uint8_t v) { put(f, &v, 1); }
static inline void put16(struct feed *f, uint16_t v) { put(f, &v, 2); }
static inline void put32(struct feed *f, uint32_t v) { put(f, &v, 4); }
static inline void put64(struct feed *f, uint64_t v) { put(f, &v, 8); }
static inline void putd(struct feed *f, double v) { put(f, &v, 8); }
/* a NUL-terminated UTF-16LE string, from ASCII */
static inline void putstr(struct feed *f, const char *s) {
  for (; *s; s++) put16(f, (uint16_t)(unsigned char)*s);
  put16(f, 0);
}

/* One event of the runtime provider at ms on thread tid, its payload built in f->buf, with a stack
 * of nframes made-up addresses (0: none). */
static inline void send_stack(struct feed *f, uint32_t id, uint32_t version, double ms, uint64_t tid, uint32_t nframes) {
  ntr_metadata md = {0};
  md.provider = RT;
  md.event_id = id;
  md.version = version;
  uint64_t frames[8];
  for (uint32_t i = 0; i < nframes && i < 8; i++) frames[i] = 0x10000 + 0x100 * i;
  ntr_stack st = {.id = 1, .nframes = nframes < 8 ? nframes : 8, .frames = frames};
  ntr_event ev = {0};
  ev.metadata = &md;
  ev.thread_id = tid;
  ev.timestamp = (uint64_t)llround(ms * 1000);
  ev.payload = f->buf;
  ev.payload_size = (uint32_t)f->len;
  if (nframes) {
    ev.stack_id = 1;
    ev.stack = &st;
  }
  cr_assert_eq(f->cb.on_event(f->a, &ev), 0);
  f->len = 0;
}
static inline void send(struct feed *f, uint32_t id, uint32_t version, double ms, uint64_t tid) {
  send_stack(f, id, version, ms, tid, 0);
}

/* How many times the UTF-16LE form of ascii occurs in the file at path. */
static inline size_t count_utf16(const char *path, const char *ascii) {
  FILE *fp = fopen(path, "rb");
  cr_assert(fp, "cannot open %s", path);
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)size);
  cr_assert(b && fread(b, 1, (size_t)size, fp) == (size_t)size);
  fclose(fp);
  size_t n = strlen(ascii), count = 0;
  unsigned char *needle = malloc(2 * n);
  for (size_t i = 0; i < n; i++) needle[2 * i] = (unsigned char)ascii[i], needle[2 * i + 1] = 0;
  for (size_t i = 0; i + 2 * n <= (size_t)size; i++)
    if (b[i] == needle[0] && memcmp(b + i, needle, 2 * n) == 0) count++;
  free(needle);
  free(b);
  return count;
}

#endif
