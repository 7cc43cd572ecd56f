/* What encode.c and decode.c leave out: GenerateCoreDump's exact bytes, the event-id deny
 * list, a sticky framer, replies with trailing bytes or future fields, and an allocation-failure
 * sweep (every allocation made to fail in turn: a clean DSIPC_ENOMEM, nothing leaked).
 * Expected bytes are written from wire-formats.md A.2-A.8, not from the encoder's output. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dsipc.h"

#define MAGIC 'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0
#define HDR(size, set, id) MAGIC, (size) & 0xff, (size) >> 8, set, id, 0, 0

static void expect_bytes(const dsipc_buf *b, const uint8_t *want, size_t n) {
  cr_assert_eq(b->len, n, "length %zu, expected %zu", b->len, n);
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(b->data[i], want[i], "byte %zu is 0x%02x, expected 0x%02x", i, b->data[i], want[i]);
}

/* string "/tmp/d": count 7 (6 + NUL), 14 bytes of UTF-16LE */
#define PATH_TMP_D 7, 0, 0, 0, '/', 0, 't', 0, 'm', 0, 'p', 0, '/', 0, 'd', 0, 0, 0

Test(protocol, generate_core_dump_each_version) {
  /* 20 header + 18 path + 4 type + 4 flags = 46 = 0x2e */
  const uint8_t v1[] = {HDR(46, 0x01, 0x01), PATH_TMP_D, 4, 0, 0, 0, 1, 0, 0, 0};
  const uint8_t v2[] = {HDR(46, 0x01, 0x02), PATH_TMP_D, 2, 0, 0, 0, 0x05, 0, 0, 0};
  const uint8_t v3[] = {HDR(46, 0x01, 0x03), PATH_TMP_D, 3, 0, 0, 0, 0x07, 0, 0, 0};
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_dump(&b, 1, "/tmp/d", DSIPC_DUMP_FULL, 1), 0);
  expect_bytes(&b, v1, sizeof v1);
  cr_assert_eq(dsipc_encode_dump(&b, 2, "/tmp/d", DSIPC_DUMP_HEAP, DSIPC_DUMP_LOGGING | DSIPC_DUMP_CRASHREPORT), 0);
  expect_bytes(&b, v2, sizeof v2);
  cr_assert_eq(dsipc_encode_dump(&b, 3, "/tmp/d", DSIPC_DUMP_TRIAGE, 7), 0);
  expect_bytes(&b, v3, sizeof v3);
  cr_assert_eq(dsipc_encode_dump(&b, 3, "", DSIPC_DUMP_FULL, 0), DSIPC_EINVAL, "the runtime needs a path");
  cr_assert_eq(dsipc_encode_dump(&b, 4, "/tmp/d", DSIPC_DUMP_FULL, 0), DSIPC_EINVAL);
  dsipc_buf_release(&b);
}

/* enable = 0 with ids is a deny list (A.5); CollectTracing6 then ends with the buffering mode. */
Test(protocol, collect_tracing6_deny_list) {
  const uint32_t ids[] = {3};
  dsipc_provider p = {.name = "P", .keywords = 1, .level = 2, .args = "a=b", .filter_enable = 0,
                      .event_ids = ids, .n_event_ids = 1};
  dsipc_session_config cfg = {.buffer_mb = 16, .format = 1, .rundown_keyword = 0, .request_stackwalk = 0,
                              .buffering_mode = 0, .providers = &p, .n_providers = 1};
  const uint8_t want[] = {
      HDR(20 + 25 + 8 + 4 + 8 + 12 + 9 + 4, 0x02, 0x07),
      0, 0, 0, 0,             /* session type: streaming */
      16, 0, 0, 0,            /* buffer MB */
      1, 0, 0, 0,             /* format NetTrace */
      0, 0, 0, 0, 0, 0, 0, 0, /* rundown keyword 0: no rundown */
      0,                      /* stackwalk off */
      1, 0, 0, 0,             /* one provider */
      1, 0, 0, 0, 0, 0, 0, 0, /* keywords */
      2, 0, 0, 0,             /* level */
      2, 0, 0, 0, 'P', 0, 0, 0,
      4, 0, 0, 0, 'a', 0, '=', 0, 'b', 0, 0, 0,
      0, 1, 0, 0, 0, 3, 0, 0, 0, /* enable 0, one id: 3 */
      0, 0, 0, 0,                /* buffering: drop */
  };
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 6, &cfg), 0);
  expect_bytes(&b, want, sizeof want);
  dsipc_buf_release(&b);
}

Test(protocol, a_failed_framer_stays_failed) {
  const uint8_t bad[] = {'D', 'O', 'T', 'N', 'E', 'X', '_', 'I', 'P', 'C', '_', 'V', '1', 0, 24, 0, 0xff, 0, 0, 0};
  const uint8_t good[] = {HDR(24, 0xff, 0x00), 0, 0, 0, 0};
  dsipc_framer f;
  dsipc_framer_init(&f);
  cr_assert_eq(dsipc_framer_feed(&f, bad, sizeof bad), DSIPC_EBADMAGIC);
  cr_assert_eq(dsipc_framer_feed(&f, good, sizeof good), DSIPC_EBADMAGIC, "no resync on garbage");
  cr_assert_not(f.complete);
  dsipc_framer_release(&f);

  const uint8_t small[] = {HDR(19, 0xff, 0x00)};
  dsipc_framer_init(&f);
  cr_assert_eq(dsipc_framer_feed(&f, small, 10), 10);
  cr_assert_eq(dsipc_framer_feed(&f, small + 10, 10), DSIPC_EPROTO);
  cr_assert_eq(dsipc_framer_feed(&f, good, 4), DSIPC_EPROTO);
  dsipc_framer_release(&f);
}

/* The framer stops at the end of the message: what follows is the continuation's. */
Test(protocol, framer_leaves_the_continuation) {
  const uint8_t bytes[] = {HDR(28, 0xff, 0x00), 0x2a, 0, 0, 0, 0, 0, 0, 0, 'N', 'e', 't', 't', 'r'};
  for (size_t split = 0; split <= sizeof bytes; split++) {
    dsipc_framer f;
    dsipc_framer_init(&f);
    long a = dsipc_framer_feed(&f, bytes, split);
    cr_assert_geq(a, 0);
    long b = dsipc_framer_feed(&f, bytes + a, sizeof bytes - (size_t)a);
    cr_assert_geq(b, 0);
    cr_assert(f.complete, "split %zu", split);
    cr_assert_eq(a + b, 28, "split %zu: consumed %ld", split, a + b);
    uint64_t id;
    cr_assert_eq(dsipc_decode_session_id(f.buf + 20, 8, &id), 0);
    cr_assert_eq(id, 42);
    dsipc_framer_release(&f);
  }
}

Test(protocol, error_replies) {
  dsipc_status st;
  dsipc_header h = {.size = 24, .set = 0xff, .id = 0xff};
  const uint8_t nohr[] = {0x05, 0x40, 0x00};
  cr_assert_eq(dsipc_decode_reply(&h, nohr, sizeof nohr, &st), DSIPC_EPROTO, "3 bytes are no HRESULT");
  /* a v3 message whose count overruns: the HRESULT still counts, the text is dropped */
  const uint8_t lying[] = {0x05, 0x40, 0x00, 0x80, 9, 0, 0, 0, 'x', 0};
  cr_assert_eq(dsipc_decode_reply(&h, lying, sizeof lying, &st), DSIPC_ESERVER);
  cr_assert_eq(st.hresult, 0x80004005u);
  cr_assert_str_eq(st.msg, "runtime replied 0x80004005 (the operation failed in the runtime)");
  h.id = 0x01;
  cr_assert_eq(dsipc_decode_reply(&h, NULL, 0, &st), DSIPC_EPROTO, "server id 1 is neither OK nor error");
  h.set = 0x04;
  h.id = 0x00;
  cr_assert_eq(dsipc_decode_reply(&h, NULL, 0, &st), DSIPC_EPROTO, "a request is not a reply");
}

/* ProcessInfo3 fields only ever get appended: a newer layout with more after the RID is fine. */
Test(protocol, process_info3_from_the_future) {
  const uint8_t payload[] = {
      2, 0, 0, 0,                                             /* inner version 2 */
      7, 0, 0, 0, 0, 0, 0, 0,                                 /* pid */
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, /* cookie */
      2, 0, 0, 0, 'c', 0, 0, 0,                               /* command line */
      0, 0, 0, 0,                                             /* os: empty */
      2, 0, 0, 0, 'a', 0, 0, 0,                               /* arch */
      2, 0, 0, 0, 'e', 0, 0, 0,                               /* entry assembly */
      2, 0, 0, 0, '9', 0, 0, 0,                               /* version */
      2, 0, 0, 0, 'r', 0, 0, 0,                               /* RID */
      2, 0, 0, 0, 'z', 0, 0, 0,                               /* a field we do not know yet */
  };
  dsipc_process_info pi;
  cr_assert_eq(dsipc_decode_process_info(payload, sizeof payload, 3, &pi), 0);
  cr_assert_eq(pi.process_id, 7);
  cr_assert_eq(pi.runtime_cookie[15], 16);
  cr_assert_null(pi.os, "count 0 is no string");
  cr_assert_str_eq(pi.runtime_identifier, "r");
  dsipc_process_info_release(&pi);
}

Test(protocol, environment_limits) {
  uint32_t len;
  const uint8_t huge[] = {0x01, 0x00, 0x00, 0x04, 0, 0}; /* 64 MiB + 1 */
  cr_assert_eq(dsipc_decode_env_reply(huge, sizeof huge, &len), DSIPC_ETOOBIG);
  const uint8_t exact[] = {0x00, 0x00, 0x00, 0x04, 0, 0};
  cr_assert_eq(dsipc_decode_env_reply(exact, sizeof exact, &len), 0);
  cr_assert_eq(len, 64u << 20);
  cr_assert_eq(dsipc_decode_env_reply(exact, 5, &len), DSIPC_EPROTO, "the u16 is part of it");
  char **env;
  size_t n;
  const uint8_t many[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
  cr_assert_eq(dsipc_decode_env_block(many, sizeof many, &env, &n), DSIPC_EPROTO, "4 billion entries in 4 bytes");
  cr_assert_null(env);
  const uint8_t empty[] = {0, 0, 0, 0};
  cr_assert_eq(dsipc_decode_env_block(empty, sizeof empty, &env, &n), 0);
  cr_assert_eq(n, 0);
  dsipc_env_free(env, n);
}

Test(protocol, advertise) {
  const uint8_t adv[] = {'A', 'D', 'V', 'R', '_', 'V', '1', 0, 0x78, 0x56, 0x34, 0x12, 0xbc, 0x9a, 0xf0, 0xde,
                         1, 2, 3, 4, 5, 6, 7, 8, 0x39, 0x30, 0, 0, 0, 0, 0, 0, 0, 0};
  dsipc_advertise a;
  cr_assert_eq(dsipc_decode_advertise(adv, sizeof adv, &a), 0);
  cr_assert_eq(a.pid, 12345);
  char guid[37];
  dsipc_format_guid(a.cookie, guid);
  cr_assert_str_eq(guid, "12345678-9abc-def0-0102-030405060708");
  cr_assert_eq(dsipc_decode_advertise(adv, 33, &a), DSIPC_EPROTO);
  uint8_t v2[sizeof adv];
  memcpy(v2, adv, sizeof adv);
  v2[6] = '2';
  cr_assert_eq(dsipc_decode_advertise(v2, sizeof v2, &a), DSIPC_EBADMAGIC);
}

/* ---- allocation failures ---- */

static long alloc_budget = -1; /* allocations left before failing; -1 = unlimited */
static long live;              /* allocations not yet freed */

static int spend(void) {
  if (alloc_budget == 0) return 0;
  if (alloc_budget > 0) alloc_budget--;
  return 1;
}
static void *t_malloc(size_t n) {
  void *p = spend() ? malloc(n) : NULL;
  live += p != NULL;
  return p;
}
static void *t_calloc(size_t n, size_t s) {
  void *p = spend() ? calloc(n, s) : NULL;
  live += p != NULL;
  return p;
}
static void *t_realloc(void *old, size_t n) {
  if (!spend()) return NULL;
  void *p = realloc(old, n);
  live += p && !old;
  return p;
}
static void t_free(void *p) {
  live -= p != NULL;
  free(p);
}

static void wstr(uint8_t *b, size_t *n, const char *s) {
  uint32_t c = (uint32_t)strlen(s) + 1;
  memcpy(b + *n, &c, 4); /* the test host is little-endian, as is the wire */
  *n += 4;
  for (; *s; s++) b[(*n)++] = (uint8_t)*s, b[(*n)++] = 0;
  b[(*n)++] = 0, b[(*n)++] = 0;
}

/* Runs op with 0, 1, 2, ... allocations allowed until it succeeds: each failure must be
 * DSIPC_ENOMEM with every allocation given back. */
static void sweep(const char *what, int (*op)(void)) {
  cr_assert_eq(dsipc_replace_allocator(t_malloc, t_realloc, t_calloc, t_free), 0);
  int rc = DSIPC_ENOMEM;
  long budget;
  for (budget = 0; budget < 100 && rc == DSIPC_ENOMEM; budget++) {
    alloc_budget = budget;
    live = 0;
    rc = op();
    cr_assert(rc == 0 || rc == DSIPC_ENOMEM, "%s with %ld allocations: %s", what, budget, dsipc_strerror(rc));
    cr_assert_eq(live, 0, "%s with %ld allocations leaks %ld", what, budget, live);
  }
  cr_assert_eq(rc, 0, "%s never succeeds", what);
  cr_assert_gt(budget, 1, "%s must allocate at least once", what);
  alloc_budget = -1;
  dsipc_replace_allocator(malloc, realloc, calloc, free);
}

static int op_env(void) {
  uint8_t b[256];
  size_t n = 4;
  uint32_t count = 3;
  memcpy(b, &count, 4);
  wstr(b, &n, "A=1");
  wstr(b, &n, "B=");
  wstr(b, &n, "PATH=/usr/bin");
  char **env;
  size_t k;
  int rc = dsipc_decode_env_block(b, n, &env, &k);
  if (!rc) dsipc_env_free(env, k);
  return rc;
}

static int op_info(void) {
  uint8_t b[256];
  size_t n = 24; /* ProcessInfo2: pid 0 and a zero cookie, then five strings */
  memset(b, 0, n);
  wstr(b, &n, "/app x");
  wstr(b, &n, "Linux");
  wstr(b, &n, "x64");
  wstr(b, &n, "app");
  wstr(b, &n, "10.0.0");
  dsipc_process_info pi;
  int rc = dsipc_decode_process_info(b, n, 2, &pi);
  if (!rc) dsipc_process_info_release(&pi);
  return rc;
}

static int op_collect(void) {
  dsipc_provider p[2] = {{.name = "Microsoft-Windows-DotNETRuntime", .level = 4, .args = "x=y"},
                         {.name = "\xc3\xa9v\xc3\xa9nement", .level = 5}};
  dsipc_session_config cfg = {.buffer_mb = 256, .format = 1, .providers = p, .n_providers = 2};
  dsipc_buf b;
  dsipc_buf_init(&b);
  int rc = dsipc_encode_collect_tracing(&b, 5, &cfg);
  dsipc_buf_release(&b);
  return rc;
}

static int op_framer(void) {
  const uint8_t ok[] = {HDR(24, 0xff, 0x00), 0, 0, 0, 0};
  dsipc_framer f;
  dsipc_framer_init(&f);
  long rc = dsipc_framer_feed(&f, ok, sizeof ok);
  dsipc_framer_release(&f);
  return rc < 0 ? (int)rc : 0;
}

static int op_v3_error(void) {
  uint8_t b[64] = {0x05, 0x40, 0x00, 0x80};
  size_t n = 4;
  wstr(b, &n, "no space");
  dsipc_header h = {.size = (uint16_t)(20 + n), .set = 0xff, .id = 0xff};
  dsipc_status st;
  int rc = dsipc_decode_reply(&h, b, n, &st);
  /* out of memory for the text is not fatal: the HRESULT is what matters */
  if (rc != DSIPC_ESERVER) return rc;
  return strstr(st.msg, "no space") ? 0 : DSIPC_ENOMEM;
}

Test(protocol, out_of_memory_sweep) {
  sweep("environment block", op_env);
  sweep("ProcessInfo2", op_info);
  sweep("CollectTracing5", op_collect);
  sweep("framer", op_framer);
  sweep("GenerateCoreDump3 error text", op_v3_error);
}

Test(protocol, replace_allocator_wants_all_four) {
  cr_assert_eq(dsipc_replace_allocator(malloc, NULL, calloc, free), DSIPC_EINVAL);
}
