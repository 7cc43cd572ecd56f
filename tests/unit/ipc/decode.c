/* Every reply decoder against replies written by hand, good and malformed: short, wrong magic,
 * sizes that lie, string counts past the end, strings without their NUL, lone surrogates. Run
 * under ASan, an over-read is a failure even where the result looks right. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dsipc.h"

/* A reply builder for the tests: bytes appended by hand, in wire order. */
struct msg {
  uint8_t b[4096];
  size_t n;
};
static void u8(struct msg *m, uint8_t v) { m->b[m->n++] = v; }
static void u16(struct msg *m, uint16_t v) { u8(m, (uint8_t)v), u8(m, (uint8_t)(v >> 8)); }
static void u32(struct msg *m, uint32_t v) { u16(m, (uint16_t)v), u16(m, (uint16_t)(v >> 16)); }
static void u64(struct msg *m, uint64_t v) { u32(m, (uint32_t)v), u32(m, (uint32_t)(v >> 32)); }
static void wstr(struct msg *m, const char *ascii) {
  u32(m, (uint32_t)strlen(ascii) + 1);
  for (const char *c = ascii; *c; c++) u16(m, (uint16_t)*c);
  u16(m, 0);
}
static void header(struct msg *m, uint8_t set, uint8_t id) {
  memcpy(m->b, "DOTNET_IPC_V1", 14);
  m->n = 14;
  u16(m, 0);
  u8(m, set), u8(m, id), u16(m, 0);
}
static void seal(struct msg *m) { m->b[14] = (uint8_t)m->n, m->b[15] = (uint8_t)(m->n >> 8); }

static const uint8_t cookie[16] = {0x78, 0x56, 0x34, 0x12, 0xbc, 0x9a, 0xf0, 0xde, 1, 2, 3, 4, 5, 6, 7, 8};

static void info_payload(struct msg *m, int version) {
  m->n = 0;
  if (version == 3) u32(m, 1);
  u64(m, 4242);
  memcpy(m->b + m->n, cookie, 16), m->n += 16;
  wstr(m, "/app/Sample --seconds 5");
  wstr(m, "Linux");
  wstr(m, "x64");
  if (version >= 2) wstr(m, "Sample"), wstr(m, "10.0.12");
  if (version == 3) wstr(m, "linux-x64");
}

Test(decode, header) {
  struct msg m;
  header(&m, 0xff, 0x00);
  seal(&m);
  dsipc_header h;
  cr_assert_eq(dsipc_decode_header(m.b, m.n, &h), 0);
  cr_assert_eq(h.size, 20);
  cr_assert_eq(h.set, 0xff);
  cr_assert_eq(dsipc_decode_header(m.b, 19, &h), DSIPC_EPROTO, "short");
  m.b[3] = 'X';
  cr_assert_eq(dsipc_decode_header(m.b, m.n, &h), DSIPC_EBADMAGIC);
  m.b[3] = 'N';
  m.b[14] = 19;
  cr_assert_eq(dsipc_decode_header(m.b, m.n, &h), DSIPC_EPROTO, "a size below the header's own");
}

Test(decode, process_info_all_versions) {
  for (int v = 1; v <= 3; v++) {
    struct msg m;
    info_payload(&m, v);
    dsipc_process_info pi;
    cr_assert_eq(dsipc_decode_process_info(m.b, m.n, v, &pi), 0, "v%d", v);
    cr_assert_eq(pi.info_version, v);
    cr_assert_eq(pi.process_id, 4242);
    cr_assert_eq(memcmp(pi.runtime_cookie, cookie, 16), 0);
    cr_assert_str_eq(pi.command_line, "/app/Sample --seconds 5");
    cr_assert_str_eq(pi.os, "Linux");
    cr_assert_str_eq(pi.arch, "x64");
    if (v >= 2) {
      cr_assert_str_eq(pi.managed_entrypoint_assembly_name, "Sample");
      cr_assert_str_eq(pi.clr_product_version, "10.0.12");
    } else {
      cr_assert_null(pi.clr_product_version);
    }
    if (v == 3)
      cr_assert_str_eq(pi.runtime_identifier, "linux-x64");
    else
      cr_assert_null(pi.runtime_identifier);
    dsipc_process_info_release(&pi);
  }
}

Test(decode, process_info3_inner_version_0_has_no_rid) {
  struct msg m;
  info_payload(&m, 3);
  m.b[0] = 0; /* layout version 0: the RID that follows is not part of it */
  dsipc_process_info pi;
  cr_assert_eq(dsipc_decode_process_info(m.b, m.n, 3, &pi), 0);
  cr_assert_null(pi.runtime_identifier);
  dsipc_process_info_release(&pi);
}

Test(decode, process_info_every_truncation_fails_cleanly) {
  struct msg m;
  info_payload(&m, 3);
  for (size_t cut = 0; cut < m.n; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees any over-read */
    memcpy(copy, m.b, cut);
    dsipc_process_info pi;
    cr_assert_eq(dsipc_decode_process_info(copy, cut, 3, &pi), DSIPC_EPROTO, "cut at %zu", cut);
    cr_assert_null(pi.command_line);
    free(copy);
  }
}

Test(decode, strings_that_lie) {
  struct msg m;
  dsipc_process_info pi;
  /* count larger than the bytes */
  info_payload(&m, 1);
  m.b[24] = 0xff;
  cr_assert_eq(dsipc_decode_process_info(m.b, m.n, 1, &pi), DSIPC_EPROTO);
  /* count 0xffffffff */
  info_payload(&m, 1);
  memset(m.b + 24, 0xff, 4);
  cr_assert_eq(dsipc_decode_process_info(m.b, m.n, 1, &pi), DSIPC_EPROTO);
  /* the last unit is not the NUL */
  info_payload(&m, 1);
  size_t cmdlen = strlen("/app/Sample --seconds 5") + 1;
  m.b[28 + 2 * (cmdlen - 1)] = 'x';
  cr_assert_eq(dsipc_decode_process_info(m.b, m.n, 1, &pi), DSIPC_EPROTO);
  /* a NUL in the middle */
  info_payload(&m, 1);
  m.b[28 + 2] = 0;
  cr_assert_eq(dsipc_decode_process_info(m.b, m.n, 1, &pi), DSIPC_EPROTO);
}

Test(decode, odd_utf16) {
  static const uint16_t cases[][3] = {
      {0xd800, 'a', 0}, /* high surrogate then a letter */
      {0xdc00, 'a', 0}, /* a lone low surrogate */
      {'a', 0xd83d, 0}, /* high surrogate at the end */
  };
  for (size_t i = 0; i < 3; i++) {
    struct msg m = {.n = 0};
    u32(&m, 4);
    u32(&m, 1);
    u32(&m, 3);
    for (int k = 0; k < 3; k++) u16(&m, cases[i][k]);
    char **env;
    size_t count;
    cr_assert_eq(dsipc_decode_env_block(m.b + 4, m.n - 4, &env, &count), DSIPC_EPROTO, "case %zu", i);
  }
  /* a proper pair decodes to 4 bytes of UTF-8 */
  struct msg m = {.n = 0};
  u32(&m, 1);
  u32(&m, 3);
  u16(&m, 0xd83d), u16(&m, 0xde00), u16(&m, 0);
  char **env;
  size_t count;
  cr_assert_eq(dsipc_decode_env_block(m.b, m.n, &env, &count), 0);
  cr_assert_str_eq(env[0], "\xf0\x9f\x98\x80");
  dsipc_env_free(env, count);
}

Test(decode, environment) {
  struct msg m = {.n = 0};
  u32(&m, 120), u16(&m, 0);
  uint32_t len;
  cr_assert_eq(dsipc_decode_env_reply(m.b, m.n, &len), 0);
  cr_assert_eq(len, 120);
  cr_assert_eq(dsipc_decode_env_reply(m.b, 5, &len), DSIPC_EPROTO);
  m.n = 0;
  u32(&m, 0x7fffffff), u16(&m, 0);
  cr_assert_eq(dsipc_decode_env_reply(m.b, m.n, &len), DSIPC_ETOOBIG, "a 2 GiB environment is refused");

  m.n = 0;
  u32(&m, 3);
  wstr(&m, "A=1");
  wstr(&m, "PATH=/bin");
  u32(&m, 0); /* an empty string */
  char **env;
  size_t count;
  cr_assert_eq(dsipc_decode_env_block(m.b, m.n, &env, &count), 0);
  cr_assert_eq(count, 3);
  cr_assert_str_eq(env[0], "A=1");
  cr_assert_str_eq(env[1], "PATH=/bin");
  cr_assert_str_eq(env[2], "");
  dsipc_env_free(env, count);

  m.b[0] = 200; /* more entries than the bytes could hold */
  cr_assert_eq(dsipc_decode_env_block(m.b, m.n, &env, &count), DSIPC_EPROTO);
  cr_assert_null(env);
  memset(m.b, 0xff, 4);
  cr_assert_eq(dsipc_decode_env_block(m.b, m.n, &env, &count), DSIPC_EPROTO);
}

Test(decode, replies_ok_error_and_dump3_message) {
  struct msg m;
  dsipc_header h;
  dsipc_status st;
  header(&m, 0xff, 0x00);
  u32(&m, 0);
  seal(&m);
  cr_assert_eq(dsipc_decode_header(m.b, m.n, &h), 0);
  cr_assert_eq(dsipc_decode_reply(&h, m.b + 20, m.n - 20, &st), 0);
  cr_assert_eq(st.code, 0);

  header(&m, 0xff, 0xff);
  u32(&m, 0x80131385);
  seal(&m);
  dsipc_decode_header(m.b, m.n, &h);
  cr_assert_eq(dsipc_decode_reply(&h, m.b + 20, m.n - 20, &st), DSIPC_EUNKNOWNCMD);
  cr_assert_eq(st.hresult, 0x80131385);
  cr_assert(strstr(st.msg, "0x80131385") && strstr(st.msg, "unknown command"), "%s", st.msg);

  header(&m, 0xff, 0xff);
  u32(&m, 0x80004005);
  wstr(&m, "ptrace denied");
  seal(&m);
  dsipc_decode_header(m.b, m.n, &h);
  cr_assert_eq(dsipc_decode_reply(&h, m.b + 20, m.n - 20, &st), DSIPC_ESERVER);
  cr_assert(strstr(st.msg, ": ptrace denied"), "%s", st.msg);

  header(&m, 0xff, 0xff);
  seal(&m);
  dsipc_decode_header(m.b, m.n, &h);
  cr_assert_eq(dsipc_decode_reply(&h, m.b + 20, 0, &st), DSIPC_EPROTO, "error without HRESULT");
  header(&m, 0x04, 0x00);
  seal(&m);
  dsipc_decode_header(m.b, m.n, &h);
  cr_assert_eq(dsipc_decode_reply(&h, m.b + 20, 0, &st), DSIPC_EPROTO, "not a server reply");
}

Test(decode, session_id_and_advertise) {
  struct msg m = {.n = 0};
  u64(&m, 0xdeadbeefcafef00dull);
  uint64_t id;
  cr_assert_eq(dsipc_decode_session_id(m.b, m.n, &id), 0);
  cr_assert_eq(id, 0xdeadbeefcafef00dull);
  cr_assert_eq(dsipc_decode_session_id(m.b, 7, &id), DSIPC_EPROTO);

  m.n = 0;
  memcpy(m.b, "ADVR_V1", 8), m.n = 8;
  memcpy(m.b + m.n, cookie, 16), m.n += 16;
  u64(&m, 77), u16(&m, 0);
  cr_assert_eq(m.n, 34);
  dsipc_advertise adv;
  cr_assert_eq(dsipc_decode_advertise(m.b, m.n, &adv), 0);
  cr_assert_eq(adv.pid, 77);
  char guid[37];
  dsipc_format_guid(adv.cookie, guid);
  cr_assert_str_eq(guid, "12345678-9abc-def0-0102-030405060708");
  cr_assert_eq(dsipc_decode_advertise(m.b, 33, &adv), DSIPC_EPROTO);
  m.b[0] = 'B';
  cr_assert_eq(dsipc_decode_advertise(m.b, m.n, &adv), DSIPC_EBADMAGIC);
}

/* The framer gives the same message for every split of the bytes, and leaves what follows. */
Test(decode, framer_any_split) {
  struct msg m;
  header(&m, 0xff, 0x00);
  u32(&m, 7), u16(&m, 0);
  seal(&m);
  size_t msg_len = m.n;
  memcpy(m.b + m.n, "TAIL", 4), m.n += 4;
  for (size_t split = 1; split <= m.n; split++) {
    dsipc_framer f;
    dsipc_framer_init(&f);
    size_t off = 0;
    while (!f.complete && off < m.n) {
      size_t chunk = split < m.n - off ? split : m.n - off;
      long used = dsipc_framer_feed(&f, m.b + off, chunk);
      cr_assert_geq(used, 0);
      off += (size_t)used;
      if ((size_t)used < chunk) break;
    }
    cr_assert(f.complete, "split %zu", split);
    cr_assert_eq(off, msg_len, "split %zu consumed %zu", split, off);
    cr_assert_eq(f.header.size, msg_len);
    cr_assert_eq(memcmp(f.buf, m.b, msg_len), 0);
    dsipc_framer_release(&f);
  }
}

Test(decode, framer_rejects_bad_headers) {
  dsipc_framer f;
  dsipc_framer_init(&f);
  uint8_t junk[20] = "HTTP/1.1 200 OK\r\n";
  cr_assert_eq(dsipc_framer_feed(&f, junk, sizeof junk), DSIPC_EBADMAGIC);
  dsipc_framer_release(&f);
}

Test(decode, errors_have_names_and_messages) {
  cr_assert_str_eq(dsipc_err_name(DSIPC_ETIMEDOUT), "DSIPC_ETIMEDOUT");
  cr_assert_str_eq(dsipc_strerror(DSIPC_EUNSAFE), "socket not owned by the target's user");
  cr_assert_str_eq(dsipc_strerror(-2), "No such file or directory");
  cr_assert(strstr(dsipc_hresult_message(0x80131384), "decode"));
  cr_assert_str_eq(dsipc_hresult_message(0x12345678), "unknown error");
}
