/* Every request encoder against bytes written out by hand from the protocol description
 * (wire-formats.md A.2-A.8), never against the encoder's own output. */
#include <criterion/criterion.h>
#include <string.h>

#include "dsipc.h"

#define HDR(size_lo, size_hi, set, id) \
  'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0, size_lo, size_hi, set, id, 0, 0

static void expect_bytes(const dsipc_buf *b, const uint8_t *want, size_t n) {
  cr_assert_eq(b->len, n, "length %zu, expected %zu", b->len, n);
  for (size_t i = 0; i < n; i++) cr_assert_eq(b->data[i], want[i], "byte %zu is 0x%02x, expected 0x%02x", i, b->data[i], want[i]);
}

Test(encode, header_only_commands) {
  static const struct {
    uint8_t set, id;
  } cmds[] = {{4, 0}, {4, 1}, {4, 2}, {4, 4}, {4, 6}, {4, 8}};
  dsipc_buf b;
  dsipc_buf_init(&b);
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    const uint8_t want[] = {HDR(0x14, 0x00, cmds[i].set, cmds[i].id)};
    cr_assert_eq(dsipc_encode_command(&b, cmds[i].set, cmds[i].id), 0);
    expect_bytes(&b, want, sizeof want);
  }
  dsipc_buf_release(&b);
}

Test(encode, stop_tracing) {
  const uint8_t want[] = {HDR(0x1c, 0x00, 0x02, 0x01), 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_stop_tracing(&b, 0x1122334455667788ull), 0);
  expect_bytes(&b, want, sizeof want);
  dsipc_buf_release(&b);
}

/* The worked example of wire-formats.md A.5: 135 bytes. */
Test(encode, collect_tracing2_worked_example) {
  uint8_t want[135] = {HDR(0x87, 0x00, 0x02, 0x03),
                       0x00, 0x01, 0x00, 0x00, /* 256 MB */
                       0x01, 0x00, 0x00, 0x00, /* format 1: nettrace */
                       0x00,                   /* no rundown */
                       0x01, 0x00, 0x00, 0x00, /* one provider */
                       0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, /* keywords */
                       0x04, 0x00, 0x00, 0x00, /* level */
                       0x0f, 0x00, 0x00, 0x00};
  size_t n = 20 + 4 + 4 + 1 + 4 + 8 + 4 + 4;
  const char *name = "System.Runtime", *args = "EventCounterIntervalSec=1";
  for (const char *c = name; *c; c++) want[n++] = (uint8_t)*c, want[n++] = 0;
  want[n++] = 0, want[n++] = 0;
  want[n++] = 0x1a, want[n++] = 0, want[n++] = 0, want[n++] = 0;
  for (const char *c = args; *c; c++) want[n++] = (uint8_t)*c, want[n++] = 0;
  want[n++] = 0, want[n++] = 0;
  cr_assert_eq(n, 135);

  dsipc_provider p = {.name = name, .keywords = 0xffffffff, .level = 4, .args = args};
  dsipc_session_config cfg = {.buffer_mb = 256, .format = 1, .request_rundown = 0, .providers = &p, .n_providers = 1};
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 2, &cfg), 0);
  expect_bytes(&b, want, sizeof want);
  dsipc_buf_release(&b);
}

/* The fields each version adds, in the order the runtime parses them. */
Test(encode, collect_tracing_versions) {
  dsipc_provider p = {.name = "A", .keywords = 0x10, .level = 5};
  dsipc_session_config cfg = {.buffer_mb = 64, .format = 1, .request_rundown = 1, .rundown_keyword = 0x80020139ull,
                              .request_stackwalk = 1, .buffering_mode = 1, .providers = &p, .n_providers = 1};
  /* provider: keywords u64, level u32, name "A" (count 2), args (count 0) = 8+4+4+4+4 */
  const uint8_t prov[] = {0x10, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 'A', 0, 0, 0, 0, 0, 0, 0};
  const uint8_t filter_none[] = {0, 0, 0, 0, 0};
  struct {
    int version;
    uint8_t id;
    uint8_t head[40];
    size_t head_len;
    int filter, trailer;
  } cases[] = {
      {1, 0x02, {64, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}, 12, 0, 0},
      {2, 0x03, {64, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0}, 13, 0, 0},
      {3, 0x04, {64, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0}, 14, 0, 0},
      {4, 0x05, {64, 0, 0, 0, 1, 0, 0, 0, 0x39, 0x01, 0x02, 0x80, 0, 0, 0, 0, 1, 1, 0, 0, 0}, 21, 0, 0},
      {5, 0x06, {0, 0, 0, 0, 64, 0, 0, 0, 1, 0, 0, 0, 0x39, 0x01, 0x02, 0x80, 0, 0, 0, 0, 1, 1, 0, 0, 0}, 25, 1, 0},
      {6, 0x07, {0, 0, 0, 0, 64, 0, 0, 0, 1, 0, 0, 0, 0x39, 0x01, 0x02, 0x80, 0, 0, 0, 0, 1, 1, 0, 0, 0}, 25, 1, 1},
  };
  dsipc_buf b;
  dsipc_buf_init(&b);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t want[128];
    size_t n = 20;
    memcpy(want + n, cases[i].head, cases[i].head_len), n += cases[i].head_len;
    memcpy(want + n, prov, sizeof prov), n += sizeof prov;
    if (cases[i].filter) memcpy(want + n, filter_none, sizeof filter_none), n += sizeof filter_none;
    if (cases[i].trailer) want[n++] = 1, want[n++] = 0, want[n++] = 0, want[n++] = 0;
    const uint8_t hdr[] = {HDR((uint8_t)n, 0, 0x02, cases[i].id)};
    memcpy(want, hdr, 20);
    cr_assert_eq(dsipc_encode_collect_tracing(&b, cases[i].version, &cfg), 0, "v%d", cases[i].version);
    expect_bytes(&b, want, n);
  }
  dsipc_buf_release(&b);
}

Test(encode, collect_tracing5_event_filter) {
  const uint32_t ids[] = {7, 0x01020304};
  dsipc_provider p = {.name = "A", .level = 4, .filter_enable = 1, .event_ids = ids, .n_event_ids = 2};
  dsipc_session_config cfg = {.buffer_mb = 1, .format = 1, .providers = &p, .n_providers = 1};
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 5, &cfg), 0);
  const uint8_t tail[] = {1, 2, 0, 0, 0, 7, 0, 0, 0, 4, 3, 2, 1};
  cr_assert(b.len > sizeof tail);
  cr_assert_eq(memcmp(b.data + b.len - sizeof tail, tail, sizeof tail), 0);
  /* a filter cannot be expressed before v5: refused, not silently dropped */
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 4, &cfg), DSIPC_EINVAL);
  dsipc_buf_release(&b);
}

Test(encode, collect_tracing_refuses_bad_configs) {
  dsipc_provider p = {.name = "A", .level = 4};
  dsipc_provider bad_level = {.name = "A", .level = 6};
  dsipc_provider no_name = {.name = "", .level = 4};
  dsipc_session_config cfg = {.buffer_mb = 1, .format = 1, .providers = &p, .n_providers = 1};
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 0, &cfg), DSIPC_EINVAL);
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 7, &cfg), DSIPC_EINVAL);
  cfg.buffer_mb = 0;
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 2, &cfg), DSIPC_EINVAL);
  cfg.buffer_mb = 1;
  cfg.providers = &bad_level;
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 2, &cfg), DSIPC_EINVAL);
  cfg.providers = &no_name;
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 2, &cfg), DSIPC_EINVAL);
  cfg.n_providers = 0;
  cr_assert_eq(dsipc_encode_collect_tracing(&b, 2, &cfg), DSIPC_EINVAL);
  dsipc_buf_release(&b);
}

Test(encode, set_environment_variable) {
  /* "AB" -> count 3, 'A' 0 'B' 0 0 0; "é" (U+00E9) -> count 2, e9 00 00 00 */
  /* size: 20 + 4 + 6 + 4 + 4 = 38 */
  const uint8_t want[] = {HDR(38, 0x00, 0x04, 0x03), 3, 0, 0, 0, 'A', 0, 'B', 0, 0, 0, 2, 0, 0, 0, 0xe9, 0, 0, 0};
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_set_env(&b, "AB", "\xc3\xa9"), 0);
  expect_bytes(&b, want, sizeof want);
  cr_assert_eq(dsipc_encode_set_env(&b, "A=B", "x"), DSIPC_EINVAL);
  cr_assert_eq(dsipc_encode_set_env(&b, "", "x"), DSIPC_EINVAL);
  dsipc_buf_release(&b);
}

Test(encode, utf16_surrogate_pair_and_bad_utf8) {
  /* U+1F600 is D83D DE00 in UTF-16 */
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_set_env(&b, "E", "\xf0\x9f\x98\x80"), 0);
  const uint8_t value[] = {3, 0, 0, 0, 0x3d, 0xd8, 0x00, 0xde, 0, 0};
  cr_assert_eq(memcmp(b.data + b.len - sizeof value, value, sizeof value), 0);
  cr_assert_eq(dsipc_encode_set_env(&b, "E", "\xc3"), DSIPC_EINVAL, "truncated sequence");
  cr_assert_eq(dsipc_encode_set_env(&b, "E", "\xc0\xaf"), DSIPC_EINVAL, "overlong");
  cr_assert_eq(dsipc_encode_set_env(&b, "E", "\xed\xa0\x80"), DSIPC_EINVAL, "encoded surrogate");
  dsipc_buf_release(&b);
}

Test(encode, perfmap_and_dump) {
  const uint8_t perf[] = {HDR(0x18, 0x00, 0x04, 0x05), 3, 0, 0, 0};
  dsipc_buf b;
  dsipc_buf_init(&b);
  cr_assert_eq(dsipc_encode_enable_perfmap(&b, 3), 0);
  expect_bytes(&b, perf, sizeof perf);
  cr_assert_eq(dsipc_encode_enable_perfmap(&b, 4), DSIPC_EINVAL);

  /* GenerateCoreDump3 "/c": count 3, '/' 0 'c' 0 0 0, type 4, flags 5 -> 20 + 10 + 8 = 38 */
  const uint8_t dump[] = {HDR(38, 0, 0x01, 0x03), 3, 0, 0, 0, '/', 0, 'c', 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0};
  cr_assert_eq(dsipc_encode_dump(&b, 3, "/c", 4, 5), 0);
  expect_bytes(&b, dump, sizeof dump);
  cr_assert_eq(dsipc_encode_dump(&b, 1, "/c", 4, 2), DSIPC_EINVAL, "v1 has only on/off logging");
  cr_assert_eq(dsipc_encode_dump(&b, 2, "/c", 5, 0), DSIPC_EINVAL, "no dump type 5");
  dsipc_buf_release(&b);
}

Test(encode, too_big_is_refused_not_truncated) {
  static char huge[40000];
  memset(huge, 'x', sizeof huge - 1);
  dsipc_buf b;
  dsipc_buf_init(&b);
  /* 40 000 UTF-16 units are 80 000 bytes: more than a message can hold */
  cr_assert_eq(dsipc_encode_set_env(&b, "BIG", huge), DSIPC_ETOOBIG);
  cr_assert_eq(b.len, 0);
  huge[30000] = '\0'; /* 60 000 bytes of string + header: still fits */
  cr_assert_eq(dsipc_encode_set_env(&b, "BIG", huge), 0);
  cr_assert_eq(b.data[14] | b.data[15] << 8, (int)b.len);
  dsipc_buf_release(&b);
}
