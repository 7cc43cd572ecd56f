/* test-readers.c: coredump/'s readers on bytes written here. The JSON reader on the descriptor's
 * shapes (members, [offset, type] pairs, [[index], type] globals, escapes) and on what is not
 * JSON; the core reader on an ELF core built here: its threads (NT_PRSTATUS), mapped files
 * (NT_FILE) and memory (PT_LOAD, reads across two segments, outside them refused), then the same
 * core cut at every length: an error or a core, never a read past the file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core-int.h"

static struct json_tree parse_ok(const char *text) {
  struct json_tree t;
  char err[256];
  cr_assert_eq(dnt__json_parse(&t, text, strlen(text), err, sizeof err), 0, "%s: %s", text, err);
  return t;
}

Test(json, the_descriptors_shapes) {
  struct json_tree t = parse_ok(" {\"types\": {\"Thread\": {\"Id\": 16, \"LinkNext\": [112, \"pointer\"], \"!\": 600}},"
                                " \"globals\": {\"ThreadStore\": [[3], \"pointer\"], \"Size\": \"0x8\", \"Esc\": \"a\\\"b\\\\c\"},"
                                " \"contracts\": {\"Thread\": 1}, \"flag\": true, \"none\": null, \"neg\": -2.5e1} ");
  int32_t types = dnt__json_member(&t, 0, "types"), thread = dnt__json_member(&t, types, "Thread");
  int32_t id = dnt__json_member(&t, thread, "Id"), link = dnt__json_member(&t, thread, "LinkNext");
  cr_assert(id >= 0 && link >= 0);
  cr_expect_eq(t.v[id].number, 16);
  cr_expect_eq(t.v[link].kind, JSON_ARRAY);
  cr_expect_eq(t.v[t.v[link].child].number, 112);
  cr_expect_str_eq(t.v[t.v[t.v[link].child].next].text, "pointer");
  int32_t globals = dnt__json_member(&t, 0, "globals");
  cr_expect_str_eq(t.v[dnt__json_member(&t, globals, "Esc")].text, "a\"b\\c");
  cr_expect_str_eq(t.v[dnt__json_member(&t, globals, "Size")].text, "0x8");
  cr_expect_eq(t.v[dnt__json_member(&t, 0, "neg")].number, -25);
  cr_expect_eq(t.v[dnt__json_member(&t, 0, "flag")].kind, JSON_BOOL);
  cr_expect_eq(t.v[dnt__json_member(&t, 0, "none")].kind, JSON_NULL);
  cr_expect_eq(dnt__json_member(&t, 0, "missing"), -1);
  cr_expect_eq(dnt__json_member(&t, id, "x"), -1, "a number has no members");
  dnt__json_free(&t);
}

Test(json, what_is_not_json_is_an_error) {
  const char *bad[] = {"", "{", "{\"a\" 1}", "{\"a\": }", "[1, 2", "\"open", "{\"a\": 1} x", "{a: 1}",
                       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "{\"a\": \"\x01\"}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct json_tree t;
    char err[256] = "";
    cr_expect_neq(dnt__json_parse(&t, bad[i], strlen(bad[i]), err, sizeof err), 0, "'%s' read", bad[i]);
    cr_expect(strstr(err, "is not JSON"), "'%s': %s", bad[i], err);
    dnt__json_free(&t);
  }
}

/* ---- an ELF core built here ---- */

static size_t put(uint8_t *b, size_t at, const void *p, size_t n) {
  memcpy(b + at, p, n);
  return at + n;
}
static void u16_at(uint8_t *b, size_t at, uint16_t v) { memcpy(b + at, &v, 2); }
static void u32_at(uint8_t *b, size_t at, uint32_t v) { memcpy(b + at, &v, 4); }
static void u64_at(uint8_t *b, size_t at, uint64_t v) { memcpy(b + at, &v, 8); }

/* A core of two threads (tids 100, 101; rip 0x1111, rsp 0x2222), one mapped file
 * /x/libcoreclr.so at 0x10000, and two adjacent segments: 0x10000..+16 "ABCDEFGHIJKLMNOP" and
 * 0x10010..+16 "abcdefghijklmnop". Its size in *n. */
static uint8_t *make_core(size_t *n) {
  uint8_t *b = calloc(1, 4096);
  cr_assert(b);
  memcpy(b, "\177ELF\2\1\1", 7);
  u16_at(b, 16, 4), u16_at(b, 18, 62);
  u64_at(b, 32, 64), u16_at(b, 54, 56), u16_at(b, 56, 3); /* 3 program headers at 64 */
  size_t notes = 64 + 3 * 56, at = notes;
  for (int k = 0; k < 2; k++) { /* NT_PRSTATUS */
    u32_at(b, at, 5), u32_at(b, at + 4, 336), u32_at(b, at + 8, 1);
    at = put(b, at + 12, "CORE\0\0\0", 8);
    u32_at(b, at + 32, 100 + (uint32_t)k);
    u64_at(b, at + 112 + 16 * 8, 0x1111), u64_at(b, at + 112 + 19 * 8, 0x2222);
    at += 336;
  }
  const char path[] = "/x/libcoreclr.so";
  size_t desc = 16 + 24 + sizeof path, pad = (desc + 3) & ~(size_t)3; /* NT_FILE */
  u32_at(b, at, 5), u32_at(b, at + 4, (uint32_t)desc), u32_at(b, at + 8, 0x46494c45);
  at = put(b, at + 12, "CORE\0\0\0", 8);
  u64_at(b, at, 1), u64_at(b, at + 8, 4096), u64_at(b, at + 16, 0x10000), u64_at(b, at + 24, 0x11000), u64_at(b, at + 32, 0);
  put(b, at + 40, path, sizeof path);
  at += pad;
  size_t data = at;
  put(b, data, "ABCDEFGHIJKLMNOPabcdefghijklmnop", 32);
  uint8_t *ph = b + 64;
  u32_at(ph, 0, 4), u64_at(ph, 8, notes), u64_at(ph, 32, data - notes); /* PT_NOTE */
  ph += 56;
  u32_at(ph, 0, 1), u64_at(ph, 8, data + 16), u64_at(ph, 16, 0x10010), u64_at(ph, 32, 16); /* the second first */
  ph += 56;
  u32_at(ph, 0, 1), u64_at(ph, 8, data), u64_at(ph, 16, 0x10000), u64_at(ph, 32, 16);
  *n = data + 32;
  return b;
}

static char *write_temp(const uint8_t *b, size_t n) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/dnt-core-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, b, n), (ssize_t)n);
  close(fd);
  return path;
}

Test(core, threads_files_and_memory) {
  size_t n;
  uint8_t *b = make_core(&n);
  char *path = write_temp(b, n), err[256];
  dnt_core *c;
  cr_assert_eq(dnt_core_open(&c, path, err, sizeof err), 0, "%s", err);
  const struct dnt_core_thread *th;
  cr_assert_eq(dnt_core_threads(c, &th), 2);
  cr_expect(th[0].tid == 100 && th[1].tid == 101 && th[0].rip == 0x1111 && th[0].rsp == 0x2222);
  const struct dnt_core_mapping *m;
  cr_assert_eq(dnt_core_mappings(c, &m), 1);
  cr_expect_str_eq(m[0].path, "/x/libcoreclr.so");
  cr_expect(m[0].start == 0x10000 && m[0].end == 0x11000 && m[0].offset == 0);
  char got[33] = "";
  cr_expect_eq(dnt_core_read(c, 0x10008, got, 16), 0, "a read across the two segments");
  cr_expect_str_eq(got, "IJKLMNOPabcdefgh");
  cr_expect_eq(dnt_core_read(c, 0x10018, got, 16), -1, "past the second segment");
  cr_expect_eq(dnt_core_read(c, 0xfff8, got, 16), -1, "before the first");
  cr_expect_eq(dnt_core_read(c, UINT64_MAX - 4, got, 16), -1);
  dnt_clr *r;
  cr_expect_eq(dnt_clr_open(&r, c, "/nonexistent", err, sizeof err), -1);
  cr_expect(strstr(err, "cannot open '/nonexistent/libcoreclr.so'"), "%s", err);
  dnt_core_close(c);
  unlink(path);
  free(b);
}

/* What the core left out comes from the file mapped there: the core's mapping renamed to a file
 * written here (a name as long as the one it replaces), its bytes at the mapping's offset; outside
 * any mapping, nothing. */
Test(core, what_the_core_left_out_comes_from_the_mapped_file) {
  size_t n;
  uint8_t *b = make_core(&n);
  char lib[] = "/tmp/dntlbXXXXXX"; /* 17 bytes with its NUL, as "/x/libcoreclr.so" */
  cr_assert_eq(sizeof lib, sizeof "/x/libcoreclr.so");
  int fd = mkstemp(lib);
  cr_assert_geq(fd, 0);
  uint8_t page[0x1000];
  for (size_t i = 0; i < sizeof page; i++) page[i] = (uint8_t)(i * 7);
  cr_assert_eq(write(fd, page, sizeof page), (ssize_t)sizeof page);
  close(fd);
  uint8_t *at = memmem(b, n, "/x/libcoreclr.so", sizeof lib);
  cr_assert(at);
  memcpy(at, lib, sizeof lib);
  char *path = write_temp(b, n), err[256];
  dnt_core *c;
  cr_assert_eq(dnt_core_open(&c, path, err, sizeof err), 0, "%s", err);
  uint8_t got[8];
  cr_expect_eq(dnt_core_read(c, 0x10000 + 0x800, got, sizeof got), 0, "past the segments, from the file");
  cr_expect_eq(memcmp(got, page + 0x800, sizeof got), 0);
  char mixed[24];
  cr_expect_eq(dnt_core_read(c, 0x10018, mixed, 16), 0, "the core's last 8 bytes, then the file's");
  cr_expect_eq(memcmp(mixed, "ijklmnop", 8), 0);
  cr_expect_eq(memcmp(mixed + 8, page + 0x20, 8), 0);
  cr_expect_eq(dnt_core_read(c, 0x11000 - 4, got, 8), -1, "past the mapping's end");
  dnt_core_close(c);
  unlink(path);
  unlink(lib);
  free(b);
}

Test(core, every_cut_is_an_error_or_a_core) {
  size_t n;
  uint8_t *b = make_core(&n);
  for (size_t k = 0; k < n; k++) {
    char *path = write_temp(b, k), err[256] = "";
    dnt_core *c;
    if (dnt_core_open(&c, path, err, sizeof err) == 0) {
      char got[16];
      (void)dnt_core_read(c, 0x10000, got, sizeof got);
      dnt_core_close(c);
    } else {
      cr_expect(err[0], "cut at %zu: no reason given", k);
    }
    unlink(path);
  }
  free(b);
}
