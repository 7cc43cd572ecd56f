/* test-ntr-malformed.c: input built to break the parser (libarchive's way), limits, and the
 * out-of-memory sweep. Each case checks the error code and that the message names the byte. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/ntr-transcript.h"
#include "../../lib/ntr-writer.h"
#include "ntr.h"

static const ntrw_trace tr = {0, 1000000000, 8, 42, 4, 1000000, NULL, 0};

/* Parses b whole and split by 1; both must fail alike. Returns the code; msg gets the text. */
static int parse(const uint8_t *b, size_t n, const ntr_limits *lim, char *msg, size_t msz) {
  ntr_transcript t1, t2;
  char m2[256];
  int rc1, rc2;
  ntr_transcript_init(&t1, 0);
  ntr_transcript_init(&t2, 0);
  rc1 = ntr_transcript_run(&t1, b, n, 0, 0, lim, msg, msz);
  rc2 = ntr_transcript_run(&t2, b, n, 1, 0, lim, m2, sizeof(m2));
  cr_assert_eq(rc1, rc2, "whole: %s / bytewise: %s", msg, m2);
  cr_assert_str_eq(msg, m2);
  cr_assert_eq(t1.digest, t2.digest);
  ntr_transcript_release(&t1);
  ntr_transcript_release(&t2);
  return rc1;
}

static void expect(const uint8_t *b, size_t n, const ntr_limits *lim, int code, const char *at,
                   const char *text) {
  char msg[256];
  int rc = parse(b, n, lim, msg, sizeof(msg));
  cr_assert_eq(rc, code, "got %s (%s), want %s", ntr_err_name(rc), msg, ntr_err_name(code));
  if (at)
    cr_assert(strncmp(msg, at, strlen(at)) == 0, "message '%s' should start with '%s'", msg, at);
  cr_assert(strstr(msg, text), "message '%s' should mention '%s'", msg, text);
}

static void v4_start(ntrw *w) {
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &tr);
}

/* Opens an EventBlock object by hand and returns the offset where its blockSize goes. */
static size_t raw_block(ntrw *w, const char *type) {
  size_t at;
  ntrw_u8(w, 5);
  ntrw_u8(w, 5);
  ntrw_u8(w, 1);
  ntrw_u32(w, 2);
  ntrw_u32(w, 2);
  ntrw_u32(w, (uint32_t)strlen(type));
  ntrw_bytes(w, type, strlen(type));
  ntrw_u8(w, 6);
  at = w->len;
  ntrw_u32(w, 0);
  while (w->len % 4)
    ntrw_u8(w, 0);
  return at;
}

static void set32(ntrw *w, size_t at, uint32_t v) {
  w->buf[at] = (uint8_t)v;
  w->buf[at + 1] = (uint8_t)(v >> 8);
  w->buf[at + 2] = (uint8_t)(v >> 16);
  w->buf[at + 3] = (uint8_t)(v >> 24);
}

Test(ntr_malformed, bad_magic) {
  static const uint8_t b[] = "NotTraceXXXXXXXXXXXXXXXXXXXXXXXXX";
  expect(b, sizeof(b) - 1, NULL, NTR_EFORMAT, "byte 0:", "bad magic");
}

/* NetPerf: the FastSerialization preamble without the Nettrace magic, objects begun by tag 4. */
static void netperf_object(ntrw *w, uint32_t version, const char *name) {
  ntrw_bytes(w, "\x04\x04\x01", 3);
  ntrw_u32(w, version);
  ntrw_u32(w, 0);
  ntrw_u32(w, (uint32_t)strlen(name));
  ntrw_bytes(w, name, strlen(name));
  ntrw_u8(w, 0x06);
}

static void netperf_start(ntrw *w, uint32_t trace_version) {
  ntrw_init(w, 0);
  ntrw_u32(w, 20);
  ntrw_bytes(w, "!FastSerialization.1", 20);
  netperf_object(w, trace_version, "Trace");
  for (int i = 0; i < 8; i++) ntrw_u16(w, 1);
  ntrw_u64(w, 1000), ntrw_u64(w, 1000000), ntrw_u32(w, 8), ntrw_u32(w, 7), ntrw_u32(w, 2), ntrw_u32(w, 1000000);
  ntrw_u8(w, 0x06);
}

/* An EventBlock of one V3 event: size (after itself), metadata id, thread, time, two activity
 * ids, payload size, payload, stack size, stack. */
static void netperf_event_block(ntrw *w, uint32_t size, uint32_t payload, uint32_t stack) {
  netperf_object(w, 2, "EventBlock");
  ntrw_u32(w, size + 4);
  while (w->len & 3) ntrw_u8(w, 0);
  ntrw_u32(w, size);
  if (size < 52) { /* too short for its header: zeros */
    for (uint32_t i = 0; i < size; i++) ntrw_u8(w, 0);
  } else {
    ntrw_u32(w, 1), ntrw_u32(w, 9), ntrw_u64(w, 2000);
    for (int i = 0; i < 32; i++) ntrw_u8(w, 0);
    ntrw_u32(w, payload);
    for (uint32_t i = 0; i < size - 52; i++) ntrw_u8(w, 0);
    if (size >= 52 + payload + 4) set32(w, w->len - (size - 52) + payload, stack);
  }
  ntrw_u8(w, 0x06);
}

Test(ntr_malformed, netperf_framing_errors_are_clear) {
  ntrw w;
  ntrw_init(&w, 0);
  ntrw_u32(&w, 20);
  ntrw_bytes(&w, "!FastSerialization.2", 20);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, "byte 8:", "bad FastSerialization preamble");
  ntrw_release(&w);
  /* .NET Core 2.0's first versions */
  ntrw_init(&w, 0);
  ntrw_u32(&w, 20);
  ntrw_bytes(&w, "!FastSerialization.1", 20);
  netperf_object(&w, 2, "Microsoft.DotNet.Runtime.EventPipeFile");
  expect(w.buf, w.len, NULL, NTR_EUNSUPPORTED, NULL, "NetPerf V1/V2 (.NET Core 2.0) traces are not supported");
  ntrw_release(&w);
  netperf_start(&w, 4);
  expect(w.buf, w.len, NULL, NTR_EUNSUPPORTED, NULL, "NetPerf Trace object version 4 is not supported");
  ntrw_release(&w);
  /* a NetPerf stream has no metadata blocks (its metadata come as events) */
  netperf_start(&w, 3);
  netperf_object(&w, 2, "MetadataBlock");
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "a 'MetadataBlock' object in a NetPerf stream");
  ntrw_release(&w);
  /* NetTrace's tag in a NetPerf stream */
  netperf_start(&w, 3);
  ntrw_u8(&w, 0x05);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "bad object tag 0x05 (want 0x04 or 0x01)");
  ntrw_release(&w);
}

Test(ntr_malformed, netperf_event_rows_are_checked) {
  ntrw w;
  netperf_start(&w, 3);
  netperf_event_block(&w, 40, 0, 0); /* shorter than its header */
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "bad event size 40");
  ntrw_release(&w);
  netperf_start(&w, 3);
  netperf_event_block(&w, 60, 6, 0); /* 8 bytes after the header: a 6-byte payload leaves 2 */
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "leaves no room for its stack");
  ntrw_release(&w);
  netperf_start(&w, 3);
  netperf_event_block(&w, 64, 4, 16); /* 4 bytes of stack room, 16 said */
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "bad event stack of 16 bytes");
  ntrw_release(&w);
  netperf_start(&w, 3);
  netperf_event_block(&w, 68, 4, 4); /* not a multiple of the pointer size, 8 */
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "bad event stack of 4 bytes (pointer size 8)");
  ntrw_release(&w);
}

Test(ntr_malformed, bad_preamble_and_tags) {
  ntrw w;
  ntrw_init(&w, 0);
  ntrw_bytes(&w, "Nettrace", 8);
  ntrw_u32(&w, 20);
  ntrw_bytes(&w, "!FastSerialization.2", 20);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, "byte 12:", "preamble");
  ntrw_release(&w);
  v4_start(&w);
  ntrw_u8(&w, 0x07);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "bad object tag 0x07");
  ntrw_release(&w);
  v4_start(&w);
  raw_block(&w, "WhatBlock");
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "unknown object type 'WhatBlock'");
  ntrw_release(&w);
}

Test(ntr_malformed, block_size_beyond_limit) {
  ntrw w;
  ntr_limits lim;
  size_t at;
  char want[32];
  v4_start(&w);
  at = raw_block(&w, "EventBlock");
  set32(&w, at, 0x7ffffff0u);
  snprintf(want, sizeof(want), "byte %zu:", at);
  expect(w.buf, w.len, NULL, NTR_ELIMIT, want, "exceeds the limit of 67108864 bytes");
  /* A smaller configured limit applies too. */
  set32(&w, at, 5000);
  memset(&lim, 0, sizeof(lim));
  lim.max_block_size = 4096;
  expect(w.buf, w.len, &lim, NTR_ELIMIT, want, "exceeds the limit of 4096 bytes");
  /* Negative as i32: garbage, not a limit question. */
  set32(&w, at, 0xfffffff0u);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, want, "block size");
  ntrw_release(&w);
}

Test(ntr_malformed, block_size_beyond_stream_or_lying) {
  ntrw w;
  size_t at;
  v4_start(&w);
  at = raw_block(&w, "EventBlock");
  ntrw_u16(&w, 20);
  ntrw_u16(&w, 1);
  ntrw_u64(&w, 0);
  ntrw_u64(&w, 0);
  /* Claims 1000 bytes, the stream ends after 20: truncated. */
  set32(&w, at, 1000);
  expect(w.buf, w.len, NULL, NTR_ETRUNCATED, NULL, "inside an object");
  /* Claims 16 bytes of 20 and the EndObject tag is not where it should be. */
  ntrw_u8(&w, 6);
  ntrw_u8(&w, 1);
  set32(&w, at, 16);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "missing EndObject after a block");
  ntrw_release(&w);
  /* Shorter than an event block header. */
  v4_start(&w);
  at = raw_block(&w, "EventBlock");
  ntrw_u16(&w, 20);
  ntrw_u16(&w, 1);
  set32(&w, at, 4);
  ntrw_u8(&w, 6);
  ntrw_u8(&w, 1);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "shorter than its header");
  ntrw_release(&w);
}

Test(ntr_malformed, varuint_overlong) {
  ntrw w;
  size_t at, start;
  char want[32];
  int i;
  v4_start(&w);
  at = raw_block(&w, "EventBlock");
  start = w.len;
  ntrw_u16(&w, 20);
  ntrw_u16(&w, 1);
  ntrw_u64(&w, 0);
  ntrw_u64(&w, 0);
  snprintf(want, sizeof(want), "byte %zu:", w.len);
  ntrw_u8(&w, 0x01); /* flags: metadata id follows */
  for (i = 0; i < 6; i++)
    ntrw_u8(&w, 0x80); /* 6 continuation bytes: over the 5 a 32-bit value may take */
  ntrw_u8(&w, 0x01);
  set32(&w, at, (uint32_t)(w.len - start));
  ntrw_u8(&w, 6);
  ntrw_u8(&w, 1);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, want, "overlong varint");
  ntrw_release(&w);

  /* 64-bit: 11 bytes for the timestamp delta. */
  v4_start(&w);
  at = raw_block(&w, "EventBlock");
  start = w.len;
  ntrw_u16(&w, 20);
  ntrw_u16(&w, 1);
  ntrw_u64(&w, 0);
  ntrw_u64(&w, 0);
  ntrw_u8(&w, 0x00);
  for (i = 0; i < 10; i++)
    ntrw_u8(&w, 0xff);
  ntrw_u8(&w, 0x01);
  set32(&w, at, (uint32_t)(w.len - start));
  ntrw_u8(&w, 6);
  ntrw_u8(&w, 1);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, NULL, "overlong varint");
  ntrw_release(&w);
}

/* A MetadataBlock holding one hand-made record payload. */
static void md_with_payload(ntrw *w, const ntrw *rec) {
  ntrw_ev e;
  memset(&e, 0, sizeof(e));
  e.payload = rec->buf;
  e.payload_size = (uint32_t)rec->len;
  v4_start(w);
  ntrw_md_begin(w);
  ntrw_event(w, &e);
  ntrw_block_end(w);
  ntrw_end(w);
}

static void md_head(ntrw *r) {
  ntrw_init(r, 0);
  ntrw_u32(r, 1);
  ntrw_wstr(r, "P");
  ntrw_u32(r, 1);
  ntrw_wstr(r, "E");
  ntrw_u64(r, 0);
  ntrw_u32(r, 0);
  ntrw_u32(r, 4);
}

Test(ntr_malformed, metadata_field_count_huge) {
  ntrw r, w;
  md_head(&r);
  ntrw_u32(&r, 0x10000000u);
  ntrw_u32(&r, 9);
  md_with_payload(&w, &r);
  expect(w.buf, w.len, NULL, NTR_ELIMIT, "byte ", "more than 4096 fields");
  ntrw_release(&w);
  ntrw_release(&r);
  /* Under the limit but more than the bytes can hold. */
  md_head(&r);
  ntrw_u32(&r, 1000);
  ntrw_u32(&r, 9);
  md_with_payload(&w, &r);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, "byte ", "does not fit");
  ntrw_release(&w);
  ntrw_release(&r);
}

Test(ntr_malformed, metadata_nesting_too_deep) {
  ntrw r, w;
  int i;
  md_head(&r);
  for (i = 0; i < 40; i++) {
    ntrw_u32(&r, 1); /* one field ... */
    ntrw_u32(&r, 1); /* ... of type Object, whose list follows */
  }
  ntrw_u32(&r, 0);
  for (i = 0; i < 40; i++)
    ntrw_wstr(&r, "f");
  md_with_payload(&w, &r);
  expect(w.buf, w.len, NULL, NTR_ELIMIT, "byte ", "nested deeper than 16");
  ntrw_release(&w);
  ntrw_release(&r);
}

Test(ntr_malformed, metadata_unterminated_string) {
  ntrw r, w;
  ntrw_init(&r, 0);
  ntrw_u32(&r, 1);
  ntrw_u16(&r, 'P');
  ntrw_u16(&r, 'Q');
  md_with_payload(&w, &r);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, "byte ", "unterminated UTF-16 provider name");
  ntrw_release(&w);
  ntrw_release(&r);
}

Test(ntr_malformed, stack_size_not_multiple_of_pointer) {
  ntrw w;
  size_t at, start;
  char want[32];
  v4_start(&w);
  at = raw_block(&w, "StackBlock");
  start = w.len;
  ntrw_u32(&w, 1);
  ntrw_u32(&w, 1);
  snprintf(want, sizeof(want), "byte %zu:", w.len);
  ntrw_u32(&w, 12); /* 12 bytes of 8-byte IPs */
  ntrw_u64(&w, 1);
  ntrw_u32(&w, 2);
  set32(&w, at, (uint32_t)(w.len - start));
  ntrw_u8(&w, 6);
  ntrw_u8(&w, 1);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, want, "not a multiple of the pointer size 8");
  ntrw_release(&w);
}

Test(ntr_malformed, stack_table_limit) {
  ntrw w;
  ntr_limits lim;
  static const uint64_t f[64] = {1};
  const uint64_t *fr[4] = {f, f, f, f};
  const uint32_t n[4] = {64, 64, 64, 64};
  v4_start(&w);
  ntrw_stacks(&w, 1, 4, fr, n);
  ntrw_end(&w);
  memset(&lim, 0, sizeof(lim));
  lim.max_stack_bytes = 1024; /* 2 stacks of 64 IPs */
  expect(w.buf, w.len, &lim, NTR_ELIMIT, "byte ", "max_stack_bytes");
  ntrw_release(&w);
}

/* ---- the tables' memory ---- */

/* An allocator that counts the bytes the parser holds, for the peak. */
static size_t live_bytes, peak_bytes;

static void *c_malloc(size_t n) {
  size_t *b = malloc(n + 16);
  if (!b)
    return NULL;
  b[0] = n;
  live_bytes += n;
  if (live_bytes > peak_bytes)
    peak_bytes = live_bytes;
  return (char *)b + 16;
}
static void c_free(void *p) {
  size_t *b;
  if (!p)
    return;
  b = (size_t *)(void *)((char *)p - 16);
  live_bytes -= b[0];
  free(b);
}
static void *c_realloc(void *p, size_t n) {
  void *q = c_malloc(n);
  /* old and new live together while a real realloc moves: count that peak too */
  if (q && p) {
    size_t old = ((size_t *)(void *)((char *)p - 16))[0];
    memcpy(q, p, old < n ? old : n);
  }
  if (q)
    c_free(p);
  return q;
}
static void *c_calloc(size_t c, size_t n) {
  void *p = c_malloc(c * n);
  if (p)
    memset(p, 0, c * n);
  return p;
}

/* Parses w whole with the counting allocator; returns the code and the peak in *peak. */
static int parse_counted(const ntrw *w, const ntr_limits *lim, char *msg, size_t msz,
                         size_t *peak) {
  ntr_parser *p;
  int rc;
  cr_assert_eq(ntr_replace_allocator(c_malloc, c_realloc, c_calloc, c_free), 0);
  live_bytes = peak_bytes = 0;
  cr_assert_eq(ntr_parser_new(&p, NULL, NULL, lim), 0);
  rc = ntr_parser_feed(p, w->buf, w->len);
  if (rc == NTR_EOF)
    rc = ntr_parser_finish(p);
  snprintf(msg, msz, "%s", ntr_parser_errmsg(p));
  ntr_parser_free(p);
  cr_assert_eq(live_bytes, 0, "the parser freed everything");
  ntr_replace_allocator(malloc, realloc, calloc, free);
  *peak = peak_bytes;
  return rc;
}

/* A stack block of `count` empty stacks, ids from `first`: 4 bytes each on the wire. */
static void empty_stacks(ntrw *w, uint32_t first, uint32_t count) {
  size_t at;
  uint32_t i;
  /* an empty block, then its count rewritten and the sizes appended (ntrw_stacks would want
   * arrays of `count` entries) */
  ntrw_stacks(w, first, 0, NULL, NULL);
  at = w->len - 1 - 4; /* the block's u32 count, before the EndObject tag */
  w->len--;
  set32(w, at, count);
  for (i = 0; i < count; i++)
    ntrw_u32(w, 0);
  set32(w, w->blk_size_at, (uint32_t)(8 + 4 * (size_t)count));
  ntrw_u8(w, 6);
}

/* Issue 19 item 4: empty stacks cost 4 bytes of input each and used to cost a table entry and
 * a hash slot (~100 bytes) without any bound but the IPs'. 3 Mi of them, 12 MB, must stop at
 * the default max_stacks (1 Mi) holding about 1 Mi x 16 bytes of entries, where the old
 * table took ~3 Mi x 16 (entries) + 8 Mi x 16 (hash) = 176 MiB. */
Test(ntr_limits, empty_stacks_stop_at_max_stacks_with_bounded_memory) {
  const uint32_t count = 3u << 20, max = 1u << 20;
  char msg[256], want[64];
  size_t peak, block_at;
  int rc;
  ntrw w;
  v4_start(&w);
  block_at = w.len;
  empty_stacks(&w, 1, count);
  ntrw_end(&w);
  rc = parse_counted(&w, NULL, msg, sizeof(msg), &peak);
  cr_assert_eq(rc, NTR_ELIMIT, "%s", msg);
  cr_assert(strstr(msg, "more than 1048576 stacks between two sequence points (max_stacks)"),
            "%s", msg);
  /* the stack past the limit: its size field, after the object header, the block size and
   * padding, first id and count, and max sizes before it */
  {
    size_t content = block_at + 1 + 2 + 4 + 4 + 4 + strlen("StackBlock") + 1 + 4;
    while (content % 4)
      content++;
    snprintf(want, sizeof(want), "byte %zu:", content + 8 + 4 * (size_t)max);
  }
  cr_assert(strncmp(msg, want, strlen(want)) == 0, "'%s' should start with '%s'", msg, want);
  /* entries are 16 bytes, in an array that doubles: while it moves from 512 Ki to 1 Mi
   * entries the old one lives beside it (24 MiB); the rest (the parser, no carry on a whole
   * feed, no index for dense ids) is far under 1 MiB */
  cr_assert_leq(peak, (size_t)max * 16 * 3 / 2 + (1u << 20), "peak %zu bytes", peak);
  ntrw_release(&w);
}

/* Sequence points clear the table: the same stacks in runs under the limit are read, and the
 * memory is that of one run. */
Test(ntr_limits, stacks_between_sequence_points_reuse_the_table) {
  const uint32_t run = 1u << 16;
  ntr_limits lim;
  char msg[256];
  size_t peak;
  uint64_t th = 1;
  uint32_t sq = 0;
  int i;
  ntrw w;
  memset(&lim, 0, sizeof(lim));
  lim.max_stacks = run;
  v4_start(&w);
  for (i = 0; i < 8; i++) {
    empty_stacks(&w, 1, run);
    ntrw_sp(&w, 100 + (uint64_t)i, 0, 1, &th, &sq);
  }
  ntrw_end(&w);
  cr_assert_eq(parse_counted(&w, &lim, msg, sizeof(msg), &peak), 0, "%s", msg);
  /* one run's table, as in the test above: 1.5 x 16 bytes per stack while it grows */
  cr_assert_leq(peak, (size_t)run * 16 * 3 / 2 + (256u << 10), "peak %zu bytes", peak);
  ntrw_release(&w);
}

/* Ids out of sequence need the hash index: max_stack_bytes charges it, so a table of empty
 * stacks with scattered ids stops at the byte limit, its memory within twice the limit (the
 * arrays grow by doubling). */
Test(ntr_limits, scattered_stack_ids_charge_the_index) {
  ntr_limits lim;
  char msg[256];
  size_t peak;
  uint32_t i;
  ntrw w;
  memset(&lim, 0, sizeof(lim));
  lim.max_stack_bytes = 1u << 20;
  v4_start(&w);
  for (i = 0; i < 100000; i++)
    empty_stacks(&w, 2 * i + 7, 1); /* never the next id: each one goes in the index */
  ntrw_end(&w);
  cr_assert_eq(parse_counted(&w, &lim, msg, sizeof(msg), &peak), NTR_ELIMIT, "%s", msg);
  cr_assert(strstr(msg, "max_stack_bytes"), "%s", msg);
  cr_assert_leq(peak, 2 * lim.max_stack_bytes + (64u << 10), "peak %zu bytes", peak);
  ntrw_release(&w);
}

static void v6_start(ntrw *w) {
  const ntrw_trace t6 = {0, 1000, 8, 0, 0, 0, NULL, 0};
  ntrw_init(w, 1);
  ntrw_trace_hdr(w, &t6);
}

/* A 2-byte label list (one opcode label) costs a label, an entry and an index slot here:
 * ~100 bytes. 1000 of them are 2 KB of input; max_label_bytes must count it all (the labels
 * alone, 56 KB, would pass a 64 KiB limit). */
Test(ntr_limits, label_lists_charge_entries_and_index) {
  ntr_limits lim;
  uint8_t blk[8 + 2 * 1000];
  char msg[256];
  size_t peak;
  int i;
  ntrw w;
  memset(&lim, 0, sizeof(lim));
  lim.max_label_bytes = 64u << 10;
  blk[0] = 1, blk[1] = blk[2] = blk[3] = 0;                        /* first index 1 */
  blk[4] = 1000 & 0xff, blk[5] = 1000 >> 8, blk[6] = blk[7] = 0;   /* 1000 lists */
  for (i = 0; i < 1000; i++) {
    blk[8 + 2 * i] = 7 | 0x80; /* opcode, the list's last label */
    blk[9 + 2 * i] = 1;
  }
  v6_start(&w);
  ntrw_raw_v6_block(&w, 8, blk, sizeof(blk));
  ntrw_end(&w);
  cr_assert_eq(parse_counted(&w, &lim, msg, sizeof(msg), &peak), NTR_ELIMIT, "%s", msg);
  cr_assert(strstr(msg, "max_label_bytes"), "%s", msg);
  ntrw_release(&w);

  lim.max_label_bytes = 256u << 10; /* room for them: read, within the limit */
  v6_start(&w);
  ntrw_raw_v6_block(&w, 8, blk, sizeof(blk));
  ntrw_end(&w);
  cr_assert_eq(parse_counted(&w, &lim, msg, sizeof(msg), &peak), 0, "%s", msg);
  cr_assert_leq(peak, 2 * lim.max_label_bytes, "peak %zu bytes", peak);
  ntrw_release(&w);
}

/* Thread names are copied out of their rows: max_thread_bytes bounds their sum. A row that
 * redefines a thread replaces its charge instead of adding to it. */
Test(ntr_limits, thread_names_are_bounded) {
  char name[1001], msg[256];
  ntr_limits lim;
  size_t peak;
  uint64_t i;
  ntrw w;
  memset(name, 'n', 1000);
  name[1000] = '\0';
  memset(&lim, 0, sizeof(lim));
  lim.max_thread_bytes = 64u << 10;
  v6_start(&w);
  for (i = 0; i < 500; i++)
    ntrw_thread(&w, 1, 100, name); /* one thread, renamed: 1 KB held */
  ntrw_end(&w);
  cr_assert_eq(parse_counted(&w, &lim, msg, sizeof(msg), &peak), 0, "%s", msg);
  ntrw_release(&w);

  v6_start(&w);
  for (i = 0; i < 500; i++)
    ntrw_thread(&w, i + 1, 100 + i, name); /* 500 threads: 500 KB of names */
  ntrw_end(&w);
  cr_assert_eq(parse_counted(&w, &lim, msg, sizeof(msg), &peak), NTR_ELIMIT, "%s", msg);
  cr_assert(strstr(msg, "thread table exceeds 65536 bytes (max_thread_bytes)"), "%s", msg);
  cr_assert_leq(peak, 2 * lim.max_thread_bytes, "peak %zu bytes", peak);
  ntrw_release(&w);
}

Test(ntr_malformed, v6_unknown_kind_skipped_major7_refused) {
  ntrw w;
  ntr_transcript t;
  static const uint8_t junk[300] = {0xff};
  const ntrw_trace t6 = {0, 1000, 8, 0, 0, 0, NULL, 0};
  ntrw_init(&w, 1);
  ntrw_trace_hdr(&w, &t6);
  ntrw_raw_v6_block(&w, 200, junk, sizeof(junk));
  ntrw_raw_v6_block(&w, 9, junk, 0);
  ntrw_end(&w);
  ntr_transcript_init(&t, 1);
  cr_assert_eq(ntr_transcript_run(&t, w.buf, w.len, 1, 0, NULL, NULL, 0), 0, "%s", t.text);
  cr_assert_eq(t.ends, 1);
  ntr_transcript_release(&t);
  ntrw_release(&w);

  ntrw_init(&w, 1);
  ntrw_bytes(&w, "Nettrace", 8);
  ntrw_u32(&w, 0);
  ntrw_u32(&w, 7);
  ntrw_u32(&w, 0);
  expect(w.buf, w.len, NULL, NTR_EUNSUPPORTED, "byte 12:", "major version 7 is not supported");
  ntrw_release(&w);
}

Test(ntr_malformed, v6_block_before_trace) {
  ntrw w;
  static const uint8_t b[4] = {0};
  ntrw_init(&w, 1);
  ntrw_bytes(&w, "Nettrace", 8);
  ntrw_u32(&w, 0);
  ntrw_u32(&w, 6);
  ntrw_u32(&w, 0);
  ntrw_raw_v6_block(&w, 5, b, 4);
  expect(w.buf, w.len, NULL, NTR_EFORMAT, "byte 24:", "before the Trace block");
  ntrw_release(&w);
}

Test(ntr_malformed, errors_are_sticky) {
  static const uint8_t b[] = "NotTrace";
  ntr_parser *p;
  cr_assert_eq(ntr_parser_new(&p, NULL, NULL, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, b, 8), NTR_EFORMAT);
  cr_assert_eq(ntr_parser_feed(p, b, 8), NTR_EFORMAT);
  cr_assert_eq(ntr_parser_finish(p), NTR_EFORMAT);
  cr_assert(strstr(ntr_parser_errmsg(p), "bad magic"));
  ntr_parser_free(p);
}

/* ---- out of memory ---- */

static long alloc_budget = -1, alloc_count;

static int take(void) {
  if (alloc_budget >= 0 && alloc_count >= alloc_budget)
    return 0;
  alloc_count++;
  return 1;
}
static void *t_malloc(size_t n) { return take() ? malloc(n) : NULL; }
static void *t_realloc(void *p, size_t n) { return take() ? realloc(p, n) : NULL; }
static void *t_calloc(size_t c, size_t n) { return take() ? calloc(c, n) : NULL; }

static void build_rich_v4(ntrw *w) {
  static const ntrw_field pt[] = {{"X", 9, NULL, NULL, 0, 0}, {"Y", 9, NULL, NULL, 0, 0}};
  static const ntrw_field el = {"", 1, NULL, pt, 2, 0};
  static const ntrw_field fs[] = {{"A", 19, &el, NULL, 0, 0}, {"B", 1, NULL, pt, 2, 0}};
  ntrw_md m = {1, "Prov", 1, "Ev", 0, 0, 4, 1, fs, 2, 1, 0};
  static const uint64_t f[3] = {1, 2, 3};
  const uint64_t *fr[2] = {f, f};
  const uint32_t n[2] = {3, 2};
  uint64_t th[2] = {1, 2};
  uint32_t sq[2] = {3, 3};
  ntrw_ev e;
  int i;
  v4_start(w);
  ntrw_md_begin(w);
  ntrw_metadata(w, &m);
  m.id = 2;
  m.v2params = 0;
  m.fields = pt;
  ntrw_metadata(w, &m);
  ntrw_block_end(w);
  ntrw_stacks(w, 1, 2, fr, n);
  ntrw_ev_begin(w, 1);
  memset(&e, 0, sizeof(e));
  for (i = 0; i < 6; i++) {
    e.metadata_id = 1 + i % 2;
    e.capture_thread = e.thread = 1 + i % 2;
    e.seq = 1 + i / 2;
    e.stack_id = 1 + i % 2;
    e.ts += 5;
    ntrw_event(w, &e);
  }
  ntrw_block_end(w);
  ntrw_sp(w, 100, 0, 2, th, sq);
  ntrw_end(w);
}

static void build_rich_v6(ntrw *w) {
  static const char *kv[] = {"ProcessId", "1"};
  const ntrw_trace t6 = {0, 1000, 8, 0, 0, 0, kv, 1};
  static const ntrw_field pt[] = {{"X", 9, NULL, NULL, 0, 0}};
  ntrw_md m = {1, "Prov", 1, "Ev", 0, 0, 4, 1, pt, 1, 0, 0};
  static const uint64_t f[3] = {1, 2, 3};
  const uint64_t *fr[1] = {f};
  const uint32_t n[1] = {3};
  uint8_t act[16] = {1};
  uint64_t th = 1;
  uint32_t sq = 2;
  ntrw_ev e;
  ntrw_init(w, 1);
  ntrw_trace_hdr(w, &t6);
  ntrw_thread(w, 1, 100, "t");
  ntrw_md_begin(w);
  ntrw_metadata(w, &m);
  ntrw_block_end(w);
  ntrw_label_list(w, 1, act, "k", "v");
  ntrw_stacks(w, 1, 1, fr, n);
  ntrw_ev_begin(w, 1);
  memset(&e, 0, sizeof(e));
  e.metadata_id = 1;
  e.capture_thread = e.thread = 1;
  e.seq = 1;
  e.stack_id = 1;
  e.label_list = 1;
  ntrw_event(w, &e);
  e.seq = 2;
  ntrw_event(w, &e);
  ntrw_block_end(w);
  ntrw_sp(w, 100, 3, 1, &th, &sq);
  ntrw_remove_thread(w, 1, 2);
  ntrw_end(w);
}

static void oom_sweep(const ntrw *w, long chunk) {
  long budget;
  int done = 0;
  cr_assert_eq(ntr_replace_allocator(t_malloc, t_realloc, t_calloc, free), 0);
  for (budget = 0; budget < 10000 && !done; budget++) {
    ntr_parser *p = NULL;
    size_t off = 0;
    int rc;
    alloc_budget = budget;
    alloc_count = 0;
    rc = ntr_parser_new(&p, NULL, NULL, NULL);
    if (rc == NTR_ENOMEM) {
      cr_assert_null(p);
      continue;
    }
    cr_assert_eq(rc, 0);
    while (off < w->len) {
      size_t n = chunk ? (size_t)chunk : w->len;
      if (n > w->len - off)
        n = w->len - off;
      rc = ntr_parser_feed(p, w->buf + off, n);
      off += n;
      if (rc < 0 && rc != NTR_EOF)
        break;
    }
    if (rc == NTR_EOF) {
      cr_assert_eq(ntr_parser_finish(p), 0);
      done = 1;
    } else {
      cr_assert_eq(rc, NTR_ENOMEM, "budget %ld: %s (%s)", budget, ntr_err_name(rc),
                   ntr_parser_errmsg(p));
      cr_assert(strstr(ntr_parser_errmsg(p), "out of memory"), "%s", ntr_parser_errmsg(p));
      cr_assert_eq(ntr_parser_feed(p, w->buf, 1), NTR_ENOMEM, "sticky");
      cr_assert_eq(ntr_parser_finish(p), NTR_ENOMEM);
    }
    ntr_parser_free(p);
  }
  alloc_budget = -1;
  ntr_replace_allocator(malloc, realloc, calloc, free);
  cr_assert(done, "never succeeded");
  cr_assert_gt(budget, 5, "the sweep should have met several allocations");
}

Test(ntr_oom, v4_every_allocation_fails_cleanly) {
  ntrw w;
  build_rich_v4(&w);
  oom_sweep(&w, 0);
  oom_sweep(&w, 7);
  ntrw_release(&w);
}

Test(ntr_oom, v6_every_allocation_fails_cleanly) {
  ntrw w;
  build_rich_v6(&w);
  oom_sweep(&w, 0);
  oom_sweep(&w, 3);
  ntrw_release(&w);
}

Test(ntr_oom, replace_allocator_rejects_null) {
  cr_assert_eq(ntr_replace_allocator(NULL, realloc, calloc, free), NTR_EINVAL);
}
