/* dntrace events, and the two pieces it is built on: src/fields.c (payloads decoded by their
 * metadata) and src/trace-input.c (plain, gzip and zip trace files streamed into the parser).
 * Expected values come from what the tests wrote (hand-built payloads, tests/lib/ntr-writer.c),
 * from the sample target's source, or from the corpus files read independently (strings -el). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dnt-trace.h"
#include "../lib/record-cr.h"
#include "../lib/bytes-cr.h"
#include "../lib/files-cr.h"
#include "../lib/env-cr.h"
#include "../lib/nt-scan.h"
#include "../lib/ntr-writer.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"
#include "ntr.h"

/* ---- small helpers ---------------------------------------------------------------------- */

static char *temp_dir(void) { return dnt_temp_dir("dnt-events"); }

/* ---- a strict JSON checker (RFC 8259 values; enough to validate --json lines) ------------- */

static const char *js_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
  return p;
}
static const char *js_value(const char *p, int depth);
static const char *js_string(const char *p) {
  if (*p++ != '"') return NULL;
  while (*p != '"') {
    unsigned char c = (unsigned char)*p;
    if (c < 0x20) return NULL;
    if (c == '\\') {
      p++;
      if (*p == 'u') {
        for (int k = 1; k <= 4; k++)
          if (!isxdigit((unsigned char)p[k])) return NULL;
        p += 5;
        continue;
      }
      if (!strchr("\"\\/bfnrt", *p) || !*p) return NULL;
    }
    p++;
  }
  return p + 1;
}
static const char *js_number(const char *p) {
  if (*p == '-') p++;
  if (*p == '0')
    p++;
  else if (isdigit((unsigned char)*p))
    while (isdigit((unsigned char)*p)) p++;
  else
    return NULL;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p)) p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p)) p++;
  }
  return p;
}
static const char *js_value(const char *p, int depth) {
  if (depth > 100) return NULL;
  p = js_ws(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = js_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        p = js_string(js_ws(p));
        if (!p) return NULL;
        p = js_ws(p);
        if (*p++ != ':') return NULL;
      }
      p = js_value(p, depth + 1);
      if (!p) return NULL;
      p = js_ws(p);
      if (*p == close) return p + 1;
      if (*p++ != ',') return NULL;
    }
  }
  if (*p == '"') return js_string(p);
  if (!strncmp(p, "true", 4)) return p + 4;
  if (!strncmp(p, "false", 5)) return p + 5;
  if (!strncmp(p, "null", 4)) return p + 4;
  return js_number(p);
}
/* 1 if line (without its newline) is exactly one JSON object. */
static int json_object_line(const char *line, size_t len) {
  char *s = strndup(line, len);
  const char *end = js_ws(s)[0] == '{' ? js_value(s, 0) : NULL;
  int ok = end && *js_ws(end) == '\0';
  free(s);
  return ok;
}

Test(events, json_checker_is_strict) {
  const char *good = "{\"a\":[1,2.5e3,-0.1,\"x\\n\",{}],\"b\":null}";
  cr_assert(json_object_line(good, strlen(good)));
  const char *bad[] = {"{\"a\":}", "{\"a\":1,}", "{\"a\":NaN}", "{\"a\":\"\x01\"}", "[1]", "{\"a\":01}", "{} x"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    cr_assert_not(json_object_line(bad[k], strlen(bad[k])), "%s", bad[k]);
}

/* ---- fields.c: payloads built by hand --------------------------------------------------- */

static const ntr_field f_int_el = {.name = "", .type = NTR_TYPE_INT32};
static const ntr_field f_point[] = {{.name = "x", .type = NTR_TYPE_INT16}, {.name = "tag", .type = NTR_TYPE_STRING}};
static const ntr_field f_point_el = {.name = "", .type = NTR_TYPE_OBJECT, .nfields = 2, .fields = f_point};
static const ntr_field f_counter[] = {{.name = "Name", .type = NTR_TYPE_STRING},
                                      {.name = "Mean", .type = NTR_TYPE_DOUBLE},
                                      {.name = "Count", .type = NTR_TYPE_INT32}};
static const ntr_field f_every[] = {
    {.name = "b", .type = NTR_TYPE_BOOLEAN},
    {.name = "c", .type = NTR_TYPE_CHAR},
    {.name = "sb", .type = NTR_TYPE_SBYTE},
    {.name = "by", .type = NTR_TYPE_BYTE},
    {.name = "i16", .type = NTR_TYPE_INT16},
    {.name = "u16", .type = NTR_TYPE_UINT16},
    {.name = "i32", .type = NTR_TYPE_INT32},
    {.name = "u32", .type = NTR_TYPE_UINT32},
    {.name = "i64", .type = NTR_TYPE_INT64},
    {.name = "u64", .type = NTR_TYPE_UINT64},
    {.name = "f", .type = NTR_TYPE_SINGLE},
    {.name = "d", .type = NTR_TYPE_DOUBLE},
    {.name = "dec", .type = NTR_TYPE_DECIMAL},
    {.name = "dt", .type = NTR_TYPE_DATETIME},
    {.name = "g", .type = NTR_TYPE_GUID},
    {.name = "s", .type = NTR_TYPE_STRING},
    {.name = "Payload", .type = NTR_TYPE_OBJECT, .nfields = 3, .fields = f_counter},
    {.name = "arr", .type = NTR_TYPE_ARRAY, .element = &f_int_el},
    {.name = "pts", .type = NTR_TYPE_ARRAY, .element = &f_point_el},
    {.name = "last", .type = NTR_TYPE_STRING},
};
#define NEVERY (sizeof f_every / sizeof f_every[0])

static void build_every(struct bytes *b) {
  b->n = 0;
  put32(b, 1);                               /* b */
  put16(b, 0xe9);                            /* c: é */
  put8(b, 0xfe);                             /* sb: -2 */
  put8(b, 200);                              /* by */
  put16(b, 0x8000);                          /* i16: -32768 */
  put16(b, 65535);                           /* u16 */
  put32(b, (uint32_t)-123456);               /* i32 */
  put32(b, 4000000000u);                     /* u32 */
  put64(b, (uint64_t)INT64_MIN);             /* i64 */
  put64(b, UINT64_MAX);                      /* u64 */
  putf32(b, 0.1f);                           /* f */
  putf64(b, 0.25);                           /* d */
  put32(b, 2u << 16 | 0x80000000u);          /* dec: flags: scale 2, negative */
  put32(b, 0);                               /* hi */
  put64(b, 12345);                           /* lo: -123.45 */
  put64(b, 133486382451234567ull);           /* dt: 2024-01-02T03:04:05.1234567Z */
  for (int k = 0; k < 16; k++) put8(b, (uint8_t)k); /* g */
  put16(b, 'h'), put16(b, 0xd83d), put16(b, 0xde00), put16(b, 0xdc00), put16(b, 0); /* s: h😀� */
  putws(b, "cpu-usage");                     /* Payload.Name */
  putf64(b, 1.5);                            /* Payload.Mean */
  put32(b, 7);                               /* Payload.Count */
  put16(b, 3), put32(b, 10), put32(b, 20), put32(b, (uint32_t)-30); /* arr */
  put16(b, 2);                               /* pts */
  put16(b, 1), putws(b, "a");
  put16(b, 2), putws(b, "b c");
  putws(b, "");                              /* last */
}

static const char *fmt(const dnt_value *v) {
  static char buf[256];
  cr_assert(v);
  dnt_value_format(v, buf, sizeof buf);
  return buf;
}

static const char *get(const dnt_record *r, const char *name) {
  const dnt_value *v = dnt_record_get(r, name);
  cr_assert(v, "no field %s", name);
  return fmt(v);
}

Test(fields, every_type) {
  static struct bytes b;
  build_every(&b);
  dnt_record r;
  dnt_record_init(&r);
  cr_assert_eq(dnt_record_decode(&r, f_every, NEVERY, b.b, b.n), 0, "%s", r.err);
  cr_assert_eq(r.trailing, 0);
  cr_assert_str_eq(get(&r, "b"), "true");
  cr_assert_eq(dnt_record_get(&r, "b")->kind, DNT_VALUE_BOOL);
  cr_assert_str_eq(get(&r, "c"), "\xc3\xa9");
  cr_assert_str_eq(get(&r, "sb"), "-2");
  cr_assert_str_eq(get(&r, "by"), "200");
  cr_assert_str_eq(get(&r, "i16"), "-32768");
  cr_assert_str_eq(get(&r, "u16"), "65535");
  cr_assert_str_eq(get(&r, "i32"), "-123456");
  cr_assert_str_eq(get(&r, "u32"), "4000000000");
  cr_assert_str_eq(get(&r, "i64"), "-9223372036854775808");
  cr_assert_str_eq(get(&r, "u64"), "18446744073709551615");
  cr_assert_str_eq(get(&r, "f"), "0.1");
  cr_assert_str_eq(get(&r, "d"), "0.25");
  cr_assert_str_eq(get(&r, "dec"), "-123.45");
  cr_assert_str_eq(get(&r, "dt"), "2024-01-02T03:04:05.1234567Z");
  cr_assert_eq(dnt_record_get(&r, "dt")->u, 133486382451234567ull);
  cr_assert_str_eq(get(&r, "g"), "03020100-0504-0706-0809-0a0b0c0d0e0f");
  cr_assert_str_eq(get(&r, "s"), "h\xf0\x9f\x98\x80\xef\xbf\xbd");
  cr_assert_str_eq(dnt_record_str(&r, "Payload.Name"), "cpu-usage");
  double mean = 0, count = 0;
  cr_assert_eq(dnt_record_num(&r, "Payload.Mean", &mean), 0);
  cr_assert_eq(mean, 1.5);
  cr_assert_eq(dnt_record_num(&r, "Payload.Count", &count), 0);
  cr_assert_eq(count, 7);
  cr_assert_eq(dnt_record_num(&r, "Payload.Name", &mean), -1, "a string is not a number");
  cr_assert_null(dnt_record_get(&r, "Payload.Missing"));
  cr_assert_null(dnt_record_str(&r, "Payload.Mean"));
  const dnt_value *p = dnt_record_get(&r, "Payload");
  cr_assert_eq(p->kind, DNT_VALUE_OBJECT);
  cr_assert_eq(p->count, 3);
  cr_assert_str_eq(dnt_record_get(&r, "Payload.Mean")->key, "Mean");
  cr_assert_eq(dnt_record_get(&r, "Payload.Mean")->depth, 1);
  cr_assert_eq(dnt_record_get(&r, "arr")->count, 3);
  cr_assert_str_eq(get(&r, "arr[0]"), "10");
  cr_assert_str_eq(get(&r, "arr[2]"), "-30");
  cr_assert_eq(dnt_record_get(&r, "arr[2]")->index, 2);
  cr_assert_str_eq(get(&r, "pts[0].x"), "1");
  cr_assert_str_eq(get(&r, "pts[1].tag"), "b c");
  cr_assert_str_eq(get(&r, "last"), "");
  cr_assert_eq(dnt_record_get(&r, "last")->slen, 0);

  /* the flat list nests: every OBJECT/ARRAY is closed by an END, in order */
  int depth = 0, ends = 0;
  for (size_t k = 0; k < r.nvalues; k++) {
    if (r.values[k].kind == DNT_VALUE_OBJECT || r.values[k].kind == DNT_VALUE_ARRAY) depth++;
    if (r.values[k].kind == DNT_VALUE_END) depth--, ends++;
    cr_assert_geq(depth, 0);
  }
  cr_assert_eq(depth, 0);
  cr_assert_eq(ends, 5, "Payload, arr, pts and its two points");

  /* the record is reusable: a second decode replaces the first */
  static struct bytes b2;
  put32(&b2, 0);
  cr_assert_eq(dnt_record_decode(&r, f_every, 1, b2.b, b2.n), 0);
  cr_assert_eq(r.nvalues, 1);
  cr_assert_str_eq(get(&r, "b"), "false");
  dnt_record_release(&r);
}

/* An array of chars (an EventSource's char[]) is one string, as TraceEvent shows it: each code
 * unit a character, a surrogate pair one, a lone surrogate U+FFFD; no element values, no end
 * marker; cut short, an error. */
Test(fields, char_array_is_one_string) {
  static const ntr_field unit = {.name = "", .type = NTR_TYPE_CHAR};
  static const ntr_field fs[] = {{.name = "chars", .type = NTR_TYPE_ARRAY, .element = &unit},
                                 {.name = "after", .type = NTR_TYPE_INT32}};
  /* count 5: 'a', U+00E9, U+1F600 as a pair, a lone high surrogate; then after = 7 */
  static const uint8_t pl[] = {5, 0, 'a', 0, 0xe9, 0, 0x3d, 0xd8, 0x00, 0xde, 0x00, 0xd8, 7, 0, 0, 0};
  dnt_record r;
  dnt_record_init(&r);
  cr_assert_eq(dnt_record_decode(&r, fs, 2, pl, sizeof pl), 0, "%s", r.err);
  cr_assert_eq(r.nvalues, 2, "one string, then the next field");
  cr_assert_eq(dnt_record_get(&r, "chars")->kind, DNT_VALUE_STRING);
  cr_assert_str_eq(dnt_record_str(&r, "chars"), "a\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbd");
  cr_assert_str_eq(get(&r, "after"), "7");
  cr_assert_eq(r.trailing, 0);
  for (size_t cut = 0; cut < 12; cut++)
    cr_assert_neq(dnt_record_decode(&r, fs, 2, pl, cut), 0, "cut at %zu", cut);
  dnt_record_release(&r);
}

/* Every cut of the payload is an error, never a read past its end (the copy is exactly as long
 * as the cut, so ASan sees any over-read). */
Test(fields, every_truncation_is_an_error) {
  static struct bytes b;
  build_every(&b);
  dnt_record r;
  dnt_record_init(&r);
  for (size_t n = 0; n < b.n; n++) {
    uint8_t *cut = malloc(n ? n : 1);
    memcpy(cut, b.b, n);
    int rc = dnt_record_decode(&r, f_every, NEVERY, n ? cut : NULL, n);
    cr_assert_eq(rc, NTR_ETRUNCATED, "a %zu-byte cut of %zu: rc %d", n, b.n, rc);
    cr_assert(strstr(r.err, "field '"), "%s", r.err);
    cr_assert(strstr(r.err, "payload byte"), "%s", r.err);
    for (size_t k = 0; k < r.nvalues; k++) cr_assert_neq(r.values[k].kind, 0, "no half-decoded value is kept");
    free(cut);
  }
  /* a trailing byte is no error but is counted */
  b.b[b.n++] = 0x55;
  cr_assert_eq(dnt_record_decode(&r, f_every, NEVERY, b.b, b.n), 0);
  cr_assert_eq(r.trailing, 1);
  dnt_record_release(&r);
}

Test(fields, truncation_messages_name_the_field) {
  static struct bytes b;
  build_every(&b);
  dnt_record r;
  dnt_record_init(&r);
  /* cut inside Payload.Mean: after b..s, Payload.Name */
  size_t mean_at = 0;
  cr_assert_eq(dnt_record_decode(&r, f_every, NEVERY, b.b, b.n), 0);
  mean_at = dnt_record_get(&r, "Payload.Mean")->offset;
  cr_assert_eq(dnt_record_decode(&r, f_every, NEVERY, b.b, mean_at + 3), NTR_ETRUNCATED);
  cr_assert_str_eq(r.err, "field 'Payload.Mean' (Double) at payload byte 118: needs 8 bytes, 3 left");
  cr_assert_eq(mean_at, 118, "88 bytes of fixed-size fields, 10 of s, 20 of Payload.Name");
  cr_assert_str_eq(dnt_record_str(&r, "Payload.Name"), "cpu-usage", "what came before is kept");
  dnt_record_release(&r);
}

Test(fields, v6_types) {
  static const ntr_field u8_el = {.name = "", .type = NTR_TYPE_BYTE};
  static const ntr_field f[] = {
      {.name = "vi", .type = NTR_TYPE_VARINT},
      {.name = "vu", .type = NTR_TYPE_VARUINT},
      {.name = "fa", .type = NTR_TYPE_FIXED_ARRAY, .element = &u8_el, .fixed_count = 3},
      {.name = "u8c", .type = NTR_TYPE_UTF8_CHAR},
      {.name = "b8", .type = NTR_TYPE_BOOLEAN8},
      {.name = "rl", .type = NTR_TYPE_RELLOC, .element = &u8_el},
      {.name = "dl", .type = NTR_TYPE_DATALOC, .element = &u8_el},
  };
  static struct bytes b;
  put8(&b, 5);                    /* vi: zigzag(-3) */
  put8(&b, 0xac), put8(&b, 0x02); /* vu: 300 */
  put8(&b, 1), put8(&b, 2), put8(&b, 3);
  put8(&b, 'A');
  put8(&b, 1);
  put32(&b, 2u << 16 | 8); /* rl: 2 bytes, 8 after the end of this field */
  put32(&b, 1u << 16 | 0); /* dl: 1 byte at the payload's start */
  put32(&b, 0);
  put8(&b, 0xde), put8(&b, 0xad);
  dnt_record r;
  dnt_record_init(&r);
  cr_assert_eq(dnt_record_decode(&r, f, 7, b.b, b.n), 0, "%s", r.err);
  cr_assert_str_eq(get(&r, "vi"), "-3");
  cr_assert_str_eq(get(&r, "vu"), "300");
  cr_assert_str_eq(get(&r, "fa[2]"), "3");
  cr_assert_str_eq(get(&r, "u8c"), "A");
  cr_assert_str_eq(get(&r, "b8"), "true");
  cr_assert_str_eq(get(&r, "rl"), "dead");
  cr_assert_str_eq(get(&r, "dl"), "05");
  for (size_t n = 0; n < b.n; n++) {
    uint8_t *cut = malloc(n ? n : 1);
    memcpy(cut, b.b, n);
    cr_assert_neq(dnt_record_decode(&r, f, 7, cut, n), 0, "cut at %zu", n);
    free(cut);
  }
  /* a location outside the payload */
  b.b[14] = 0xff;
  cr_assert_eq(dnt_record_decode(&r, f, 7, b.b, b.n), NTR_EFORMAT);
  cr_assert(strstr(r.err, "field 'dl'"), "%s", r.err);
  dnt_record_release(&r);
}

Test(fields, malformed_descriptions_and_values) {
  dnt_record r;
  dnt_record_init(&r);
  static const uint8_t zeros[32];
  static const ntr_field unknown[] = {{.name = "u", .type = 99}};
  cr_assert_eq(dnt_record_decode(&r, unknown, 1, zeros, sizeof zeros), NTR_EFORMAT);
  cr_assert(strstr(r.err, "'u'") && strstr(r.err, "99"), "%s", r.err);
  static const ntr_field noel[] = {{.name = "a", .type = NTR_TYPE_ARRAY}};
  cr_assert_eq(dnt_record_decode(&r, noel, 1, zeros, sizeof zeros), NTR_EFORMAT);
  static const ntr_field vu[] = {{.name = "v", .type = NTR_TYPE_VARUINT}};
  static const uint8_t overlong[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  cr_assert_eq(dnt_record_decode(&r, vu, 1, overlong, sizeof overlong), NTR_EFORMAT);
  static const uint8_t unterminated[2] = {0xff, 0xff};
  cr_assert_eq(dnt_record_decode(&r, vu, 1, unterminated, sizeof unterminated), NTR_ETRUNCATED);
  static const ntr_field dec[] = {{.name = "m", .type = NTR_TYPE_DECIMAL}};
  static const uint8_t baddec[16] = {1, 0, 30, 0};
  cr_assert_eq(dnt_record_decode(&r, dec, 1, baddec, sizeof baddec), NTR_EFORMAT);
  static const ntr_field s[] = {{.name = "s", .type = NTR_TYPE_STRING}};
  static const uint8_t odd[3] = {'a', 0, 0}; /* the terminator's second byte is missing */
  cr_assert_eq(dnt_record_decode(&r, s, 1, odd, sizeof odd), NTR_ETRUNCATED);
  cr_assert(strstr(r.err, "terminating NUL"), "%s", r.err);
  /* no fields, no payload: an empty record */
  cr_assert_eq(dnt_record_decode(&r, NULL, 0, NULL, 0), 0);
  cr_assert_eq(r.nvalues, 0);
  dnt_record_release(&r);
}

Test(fields, value_count_is_bounded) {
  /* arrays of arrays of empty objects: two bytes a count, ~4 billion values if unbounded */
  static const ntr_field empty = {.name = "", .type = NTR_TYPE_OBJECT};
  static const ntr_field inner = {.name = "", .type = NTR_TYPE_ARRAY, .element = &empty};
  static const ntr_field outer[] = {{.name = "a", .type = NTR_TYPE_ARRAY, .element = &inner}};
  static struct bytes b;
  put16(&b, 65535);
  for (int k = 0; k < 65535; k++) put16(&b, 65535);
  dnt_record r;
  dnt_record_init(&r);
  cr_assert_eq(dnt_record_decode(&r, outer, 1, b.b, b.n), NTR_ELIMIT);
  cr_assert(strstr(r.err, "values"), "%s", r.err);
  cr_assert_leq(r.nvalues, DNT_FIELDS_MAX_VALUES);
  dnt_record_release(&r);
}

Test(fields, text_forms) {
  char s[40];
  dnt_format_filetime(0, s);
  cr_assert_str_eq(s, "1601-01-01T00:00:00.0000000Z");
  dnt_format_filetime(116444736000000000ull, s);
  cr_assert_str_eq(s, "1970-01-01T00:00:00.0000000Z");
  dnt_format_filetime(125911584000000000ull + 9999999, s); /* 2000-01-01 + 0.9999999 s */
  cr_assert_str_eq(s, "2000-01-01T00:00:00.9999999Z");
  dnt_format_filetime(UINT64_MAX, s);
  cr_assert_str_eq(s, "60056-05-28T05:36:10.9551615Z");
  dnt_value v = {.kind = DNT_VALUE_FLOAT, .type = NTR_TYPE_DOUBLE, .f = NAN};
  cr_assert_str_eq(fmt(&v), "NaN");
  v.f = -INFINITY;
  cr_assert_str_eq(fmt(&v), "-Infinity");
  v.f = 1.0 / 3;
  cr_assert_str_eq(fmt(&v), "0.33333333333333331");
  v.f = 1e300;
  cr_assert_str_eq(fmt(&v), "1e+300");
  v.type = NTR_TYPE_SINGLE, v.f = (float)(1.0 / 3);
  cr_assert_str_eq(fmt(&v), "0.333333343");
  cr_assert_str_eq(dnt_type_name(NTR_TYPE_GUID), "Guid");
  cr_assert_str_eq(dnt_type_name(2), "Unknown");
  cr_assert_str_eq(dnt_type_name(1000), "Unknown");
  /* a too-small buffer: cut, NUL-terminated, the full length returned */
  dnt_value str = {.kind = DNT_VALUE_STRING, .s = "abcdef"};
  char small[4];
  cr_assert_eq(dnt_value_format(&str, small, sizeof small), 6);
  cr_assert_str_eq(small, "abc");
}

/* ---- a trace written by tests/lib/ntr-writer.c ------------------------------------------ */

static const ntrw_field w_int_el = {"", NTR_TYPE_INT32, NULL, NULL, 0, 0};
static const ntrw_field w_payload[] = {{"Name", NTR_TYPE_STRING, NULL, NULL, 0, 0},
                                       {"Mean", NTR_TYPE_DOUBLE, NULL, NULL, 0, 0}};
static const ntrw_field w_fields[] = {
    {"n", NTR_TYPE_INT32, NULL, NULL, 0, 0},
    {"s", NTR_TYPE_STRING, NULL, NULL, 0, 0},
    {"Payload", NTR_TYPE_OBJECT, NULL, w_payload, 2, 0},
    {"arr", NTR_TYPE_ARRAY, &w_int_el, NULL, 0, 0},
};

#define QPC0 1000000ull
#define FREQ 1000000ull

/* A V5 trace: a self-describing "Test-Provider/Every" event (n, s, Payload{Name, Mean}, arr;
 * keywords 0x10, level 4, opcode 1; the first on processor 3 with activity ids), a native
 * runtime event without fields, and a second Every event. */
static void build_trace(ntrw *w, int complete) {
  ntrw_trace t = {QPC0, FREQ, 8, 4321, 4, 1000000, NULL, 0};
  ntrw_md md[] = {
      {1, "Test-Provider", 7, "Every", 0x10, 0, 4, 1, w_fields, 4, 1, 0},
      /* an id the built-in schema does not describe: shown by number and size */
      {2, "Microsoft-Windows-DotNETRuntime", 9999, "", 0x8000, 0, 2, -1, NULL, 0, 0, 1},
  };
  static struct bytes p1, p2, p3;
  p1.n = p2.n = p3.n = 0;
  put32(&p1, (uint32_t)-5), putws(&p1, "a b"), putws(&p1, "cpu-usage"), putf64(&p1, 0.25);
  put16(&p1, 2), put32(&p1, 1), put32(&p1, 2);
  put32(&p2, 0xdeadbeef);
  put32(&p3, 6), putws(&p3, "q\"\\\n"), putws(&p3, ""), putf64(&p3, NAN), put16(&p3, 0);
  ntrw_ev ev[3] = {
      {.metadata_id = 1, .seq = 1, .thread = 77, .capture_thread = 77, .proc = 3, .ts = QPC0 + 1500000,
       .activity = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff},
       .related = {0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00},
       .payload = p1.b, .payload_size = (uint32_t)p1.n},
      {.metadata_id = 2, .seq = 2, .thread = 77, .capture_thread = 77, .ts = QPC0 + 2000000, .payload = p2.b,
       .payload_size = (uint32_t)p2.n},
      {.metadata_id = 1, .seq = 3, .thread = 78, .capture_thread = 77, .ts = QPC0 + 2000001, .payload = p3.b,
       .payload_size = (uint32_t)p3.n},
  };
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &t);
  ntrw_md_begin(w);
  for (int k = 0; k < 2; k++) ntrw_metadata(w, &md[k]);
  ntrw_block_end(w);
  ntrw_ev_begin(w, 1);
  for (int k = 0; k < 3; k++) ntrw_event(w, &ev[k]);
  ntrw_block_end(w);
  if (complete) ntrw_end(w);
}

/* Columns: time, thread, processor, level, keywords, opcode, provider, name (TraceEvent's: the
 * metadata's opcode 1 after a slash); fields; activity ids last (a GUID's first three groups
 * little endian, as .NET prints it). */
static const char *const EXPECT_TEXT =
    "1.500000 77 3 4 0x10 1 Test-Provider Every/Start n=-5 s=\"a b\" Payload.Name=cpu-usage Payload.Mean=0.25 arr[0]=1 "
    "arr[1]=2 @activity=33221100-5544-7766-8899-aabbccddeeff @related=ccddeeff-aabb-8899-7766-554433221100\n"
    "2.000000 77 0 2 0x8000 0 Microsoft-Windows-DotNETRuntime Event(9999) size=4\n"
    "2.000001 78 0 4 0x10 1 Test-Provider Every/Start n=6 s=\"q\\\"\\\\\\n\" Payload.Name=\"\" Payload.Mean=NaN arr=[]\n";

static void gzip_file(const char *path, const uint8_t *p, size_t n) {
  gzFile gz = gzopen(path, "wb");
  cr_assert(gz);
  cr_assert_eq(gzwrite(gz, p, (unsigned)n), (int)n);
  cr_assert_eq(gzclose(gz), Z_OK);
}

/* A zip archive by hand: an unrelated first member, then `name` stored or deflated. */
static size_t make_zip(uint8_t *out, size_t cap, const char *name, const uint8_t *p, size_t n, int deflated) {
  static struct bytes z;
  uint8_t *comp = malloc(n + 1024);
  uLongf clen = (uLongf)(n + 1024);
  if (deflated) {
    z_stream s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    s.next_in = (Bytef *)(uintptr_t)p;
    s.avail_in = (uInt)n;
    s.next_out = comp;
    s.avail_out = (uInt)clen;
    cr_assert_eq(deflate(&s, Z_FINISH), Z_STREAM_END);
    clen = s.total_out;
    deflateEnd(&s);
  } else {
    memcpy(comp, p, n);
    clen = n;
  }
  uint32_t crc = (uint32_t)crc32(0, p, (uInt)n);
  const char *other = "readme.txt";
  z.n = 0;
  /* member 1: readme.txt, stored, 2 bytes */
  put32(&z, 0x04034b50), put16(&z, 20), put16(&z, 0), put16(&z, 0), put32(&z, 0);
  put32(&z, (uint32_t)crc32(0, (const Bytef *)"hi", 2)), put32(&z, 2), put32(&z, 2);
  put16(&z, (uint16_t)strlen(other)), put16(&z, 0), put(&z, other, strlen(other)), put(&z, "hi", 2);
  uint32_t local2 = (uint32_t)z.n;
  put32(&z, 0x04034b50), put16(&z, 20), put16(&z, 0), put16(&z, deflated ? 8 : 0), put32(&z, 0);
  put32(&z, crc), put32(&z, (uint32_t)clen), put32(&z, (uint32_t)n);
  put16(&z, (uint16_t)strlen(name)), put16(&z, 4), put(&z, name, strlen(name)), put32(&z, 0xcafe0000);
  put(&z, comp, clen);
  uint32_t cd = (uint32_t)z.n;
  put32(&z, 0x02014b50), put16(&z, 20), put16(&z, 20), put16(&z, 0), put16(&z, 0), put32(&z, 0);
  put32(&z, (uint32_t)crc32(0, (const Bytef *)"hi", 2)), put32(&z, 2), put32(&z, 2);
  put16(&z, (uint16_t)strlen(other)), put16(&z, 0), put16(&z, 0), put16(&z, 0), put16(&z, 0), put32(&z, 0),
      put32(&z, 0);
  put(&z, other, strlen(other));
  put32(&z, 0x02014b50), put16(&z, 20), put16(&z, 20), put16(&z, 0), put16(&z, deflated ? 8 : 0), put32(&z, 0);
  put32(&z, crc), put32(&z, (uint32_t)clen), put32(&z, (uint32_t)n);
  put16(&z, (uint16_t)strlen(name)), put16(&z, 0), put16(&z, 0), put16(&z, 0), put16(&z, 0), put32(&z, 0),
      put32(&z, local2);
  put(&z, name, strlen(name));
  uint32_t cdlen = (uint32_t)z.n - cd;
  put32(&z, 0x06054b50), put16(&z, 0), put16(&z, 0), put16(&z, 2), put16(&z, 2), put32(&z, cdlen), put32(&z, cd);
  put16(&z, 3), put(&z, "zip", 3);
  free(comp);
  cr_assert_leq(z.n, cap);
  memcpy(out, z.b, z.n);
  return z.n;
}

struct collect {
  uint64_t events;
  dnt_record rec;
  char first_s[64];
};

static int count_event(void *ud, const ntr_event *ev) {
  struct collect *c = ud;
  if (c->events++ == 0 && dnt_record_decode_event(&c->rec, ev) == 0)
    snprintf(c->first_s, sizeof c->first_s, "%s", dnt_record_str(&c->rec, "s"));
  return 0;
}

static int read_path(const char *path, struct collect *c, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  dnt_record_init(&c->rec);
  ntr_callbacks cb = {.on_event = count_event};
  ntr_stats st;
  int rc = dnt_trace_read(path, &cb, c, &st, err, errlen);
  cr_assert_eq(st.events, c->events);
  dnt_record_release(&c->rec);
  return rc;
}

Test(trace_input, plain_gzip_and_zip_read_alike) {
  ntrw w;
  build_trace(&w, 1);
  char *dir = temp_dir();
  char path[256], err[512];
  static uint8_t zip[1 << 16];
  struct collect c;
  struct {
    const char *name;
    int kind; /* 0 plain, 1 gzip, 2 zip stored, 3 zip deflated */
  } files[] = {{"t.nettrace", 0}, {"t.nettrace.gz", 1}, {"stored.zip", 2}, {"deflated.zip", 3}, {"no-suffix", 1}};
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[k].name);
    if (files[k].kind == 0) dnt_write_file(path, w.buf, w.len);
    if (files[k].kind == 1) gzip_file(path, w.buf, w.len);
    if (files[k].kind >= 2) dnt_write_file(path, zip, make_zip(zip, sizeof zip, "dir/trace.nettrace", w.buf, w.len, files[k].kind == 3));
    cr_assert_eq(read_path(path, &c, err, sizeof err), DNT_TRACE_COMPLETE, "%s: %s", files[k].name, err);
    cr_assert_eq(c.events, 3, "%s", files[k].name);
    cr_assert_str_eq(c.first_s, "a b");
  }
  /* through the command, by its output */
  snprintf(path, sizeof path, "%s/deflated.zip", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, NULL), 0, "%s", r.err);
  cr_assert_str_eq(r.out, EXPECT_TEXT);
  cr_assert(strstr(r.err, "3 events shown (of 3 in the trace)"), "%s", r.err);
  dnt_run_free(&r);
  ntrw_release(&w);
  dnt_rm_rf(dir);
  free(dir);
}

/* A zip of stored members, written here from the format's description (APPNOTE 4.3.7, 4.3.12,
 * 4.3.16), independently of make_zip: names[i] holds data[i] of len[i] bytes. */
static size_t stored_zip(uint8_t *out, size_t cap, size_t k, const char *const *names, const void *const *data,
                         const size_t *len) {
  static struct bytes z;
  uint32_t local[8];
  cr_assert_leq(k, 8);
  z.n = 0;
  for (size_t i = 0; i < k; i++) {
    local[i] = (uint32_t)z.n;
    uint32_t crc = (uint32_t)crc32(0, data[i], (uInt)len[i]);
    put32(&z, 0x04034b50), put16(&z, 20), put16(&z, 0), put16(&z, 0), put32(&z, 0);
    put32(&z, crc), put32(&z, (uint32_t)len[i]), put32(&z, (uint32_t)len[i]);
    put16(&z, (uint16_t)strlen(names[i])), put16(&z, 0), put(&z, names[i], strlen(names[i]));
    put(&z, data[i], len[i]);
  }
  uint32_t cd = (uint32_t)z.n;
  for (size_t i = 0; i < k; i++) {
    uint32_t crc = (uint32_t)crc32(0, data[i], (uInt)len[i]);
    put32(&z, 0x02014b50), put16(&z, 20), put16(&z, 20), put16(&z, 0), put16(&z, 0), put32(&z, 0);
    put32(&z, crc), put32(&z, (uint32_t)len[i]), put32(&z, (uint32_t)len[i]);
    put16(&z, (uint16_t)strlen(names[i])), put16(&z, 0), put16(&z, 0), put16(&z, 0), put16(&z, 0), put32(&z, 0),
        put32(&z, local[i]);
    put(&z, names[i], strlen(names[i]));
  }
  uint32_t cdlen = (uint32_t)z.n - cd;
  put32(&z, 0x06054b50), put16(&z, 0), put16(&z, 0), put16(&z, (uint16_t)k), put16(&z, (uint16_t)k);
  put32(&z, cdlen), put32(&z, cd), put16(&z, 0);
  cr_assert_leq(z.n, cap);
  memcpy(out, z.b, z.n);
  return z.n;
}

/* A zip with several .nettrace members: the one read is named, not chosen silently. */
Test(trace_input, zip_with_several_traces_says_which_it_reads) {
  ntrw w;
  build_trace(&w, 1);
  char *dir = temp_dir();
  char path[256];
  static uint8_t zip[1 << 16];
  static const char junk[] = "not a trace at all";
  const char *names[] = {"notes.txt", "run1/app.nettrace", "run2/app.nettrace", "run3/app.nettrace"};
  const void *data[] = {"hi", w.buf, junk, junk};
  size_t len[] = {2, w.len, sizeof junk, sizeof junk};
  snprintf(path, sizeof path, "%s/two.zip", dir);
  dnt_write_file(path, zip, stored_zip(zip, sizeof zip, 3, names, data, len));
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, NULL), 0, "%s", r.err);
  cr_assert_str_eq(r.out, EXPECT_TEXT); /* the first trace member, the only readable one, was read */
  char want[512];
  snprintf(want, sizeof want,
           "dntrace: warning: '%s' holds 2 .nettrace members: reading 'run1/app.nettrace', the first (not "
           "'run2/app.nettrace')\n", path);
  cr_assert(strstr(r.err, want), "%s", r.err);
  dnt_run_free(&r);
  /* report goes through the profile reader: the same line (then it finds no samples to show) */
  dnt_run_dntrace(&r, "report", path, NULL);
  cr_assert(strstr(r.err, want), "%s", r.err);
  dnt_run_free(&r);
  /* three: the others are mentioned */
  snprintf(path, sizeof path, "%s/three.zip", dir);
  dnt_write_file(path, zip, stored_zip(zip, sizeof zip, 4, names, data, len));
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.err, "holds 3 .nettrace members: reading 'run1/app.nettrace', the first (not "
                          "'run2/app.nettrace' and the others)"), "%s", r.err);
  dnt_run_free(&r);
  /* one trace member beside other files: nothing to say */
  snprintf(path, sizeof path, "%s/one.zip", dir);
  dnt_write_file(path, zip, stored_zip(zip, sizeof zip, 2, names, data, len));
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, NULL), 0, "%s", r.err);
  cr_assert_str_eq(r.out, EXPECT_TEXT);
  cr_assert_not(strstr(r.err, "warning"), "%s", r.err);
  dnt_run_free(&r);
  ntrw_release(&w);
  dnt_rm_rf(dir);
  free(dir);
}

Test(trace_input, damaged_containers) {
  ntrw w;
  build_trace(&w, 1);
  char *dir = temp_dir();
  char path[256], err[512];
  static uint8_t zip[1 << 16];
  struct collect c;
  size_t n = make_zip(zip, sizeof zip, "t.nettrace", w.buf, w.len, 1);
  snprintf(path, sizeof path, "%s/z.zip", dir);

  /* every cut of the archive: an error or a truncation, never a crash or a success */
  for (size_t cut = 4; cut < n; cut++) {
    dnt_write_file(path, zip, cut);
    int rc = read_path(path, &c, err, sizeof err);
    cr_assert(rc < 0 || rc == DNT_TRACE_TRUNCATED || rc == DNT_TRACE_DAMAGED, "cut %zu: rc %d", cut, rc);
    cr_assert(err[0], "cut %zu has a message", cut);
  }
  /* the central directory's offset pointing past the file */
  static uint8_t bad[1 << 16];
  memcpy(bad, zip, n);
  bad[n - 22 - 3 + 16] = 0xff, bad[n - 22 - 3 + 19] = 0x7f;
  dnt_write_file(path, bad, n);
  cr_assert_lt(read_path(path, &c, err, sizeof err), 0);
  cr_assert(strstr(err, "central directory"), "%s", err);
  /* a flipped bit in the compressed data */
  memcpy(bad, zip, n);
  bad[100] ^= 0x10;
  dnt_write_file(path, bad, n);
  int rc = read_path(path, &c, err, sizeof err);
  cr_assert(rc < 0 || rc == DNT_TRACE_DAMAGED || rc == DNT_TRACE_TRUNCATED, "rc %d: %s", rc, err);
  /* no .nettrace member */
  n = make_zip(zip, sizeof zip, "t.txt", w.buf, w.len, 0);
  dnt_write_file(path, zip, n);
  cr_assert_lt(read_path(path, &c, err, sizeof err), 0);
  cr_assert(strstr(err, "no .nettrace member"), "%s", err);

  /* a gzip file cut in the middle: the events before the cut */
  static uint8_t gz[1 << 16];
  snprintf(path, sizeof path, "%s/t.gz", dir);
  gzip_file(path, w.buf, w.len);
  FILE *fp = fopen(path, "rb");
  size_t gn = fread(gz, 1, sizeof gz, fp);
  fclose(fp);
  dnt_write_file(path, gz, gn - 12);
  rc = read_path(path, &c, err, sizeof err);
  cr_assert(rc == DNT_TRACE_TRUNCATED || rc < 0, "rc %d: %s", rc, err);
  if (rc == DNT_TRACE_TRUNCATED) cr_assert(strstr(err, "compressed data ends early"), "%s", err);
  ntrw_release(&w);
  dnt_rm_rf(dir);
  free(dir);
}

Test(trace_input, truncated_stream_every_cut) {
  ntrw w;
  build_trace(&w, 1);
  char *dir = temp_dir();
  char path[256], err[512];
  struct collect c;
  snprintf(path, sizeof path, "%s/t.nettrace", dir);
  size_t header_end = 0;
  for (size_t cut = 0; cut < w.len; cut++) {
    dnt_write_file(path, w.buf, cut);
    int rc = read_path(path, &c, err, sizeof err);
    if (rc == DNT_TRACE_TRUNCATED) {
      if (!header_end) header_end = cut;
      cr_assert(strstr(err, "is truncated at byte "), "%s", err);
    } else {
      cr_assert_eq(rc, -1, "cut %zu: rc %d (%s)", cut, rc, err);
      cr_assert_not(header_end, "once the header is read, a cut is a truncation (cut %zu)", cut);
      if (cut == 0) cr_assert(strstr(err, "is empty"), "%s", err);
    }
  }
  cr_assert(header_end > 0 && header_end < 200);
  dnt_write_file(path, w.buf, w.len);
  cr_assert_eq(read_path(path, &c, err, sizeof err), DNT_TRACE_COMPLETE);
  ntrw_release(&w);
  dnt_rm_rf(dir);
  free(dir);
}

Test(trace_input, stdin_and_stop) {
  ntrw w;
  build_trace(&w, 1);
  char *dir = temp_dir();
  char path[256], cmd[600];
  snprintf(path, sizeof path, "%s/t.nettrace.gz", dir);
  gzip_file(path, w.buf, w.len);
  /* a pipe on stdin, gzip recognised by its bytes */
  snprintf(cmd, sizeof cmd, "cat '%s' | '%s' events - --json -n 2 > '%s/out' 2>'%s/err'", path, dnt_bin(), dir, dir);
  cr_assert_eq(system(cmd), 0);
  snprintf(path, sizeof path, "%s/out", dir);
  FILE *fp = fopen(path, "r");
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, fp)) {
    cr_assert(json_object_line(line, strcspn(line, "\n")), "%s", line);
    n++;
  }
  fclose(fp);
  cr_assert_eq(n, 2, "-n 2 stops after two events");
  ntrw_release(&w);
  dnt_rm_rf(dir);
  free(dir);
}

/* ---- the command ------------------------------------------------------------------------ */

Test(events, text_json_and_filters_on_a_written_trace) {
  ntrw w;
  build_trace(&w, 1);
  char *dir = temp_dir();
  char path[256];
  snprintf(path, sizeof path, "%s/t.nettrace", dir);
  dnt_write_file(path, w.buf, w.len);
  struct dnt_run r;

  cr_assert_eq(dnt_run_dntrace(&r, "events", path, NULL), 0, "%s", r.err);
  cr_assert_str_eq(r.out, EXPECT_TEXT);
  dnt_run_free(&r);

  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--json", "--verbose", NULL), 0, "%s", r.err);
  cr_assert_eq(count_lines(r.out), 3);
  for (const char *l = r.out; *l; l = strchr(l, '\n') + 1)
    cr_assert(json_object_line(l, strcspn(l, "\n")), "%.*s", (int)strcspn(l, "\n"), l);
  /* the fields are members of the event's object, beside its header */
  cr_assert(strstr(r.out, "{\"timestamp\":1.500000,\"thread\":77,\"processor\":3,\"provider\":\"Test-Provider\","
                          "\"event\":\"Every/Start\",\"eventId\":7,\"version\":0,\"level\":4,\"keywords\":\"0x10\",\"opcode\":1,"
                          "\"activityId\":\"33221100-5544-7766-8899-aabbccddeeff\","
                          "\"relatedActivityId\":\"ccddeeff-aabb-8899-7766-554433221100\","
                          "\"n\":-5,\"s\":\"a b\",\"Payload\":{\"Name\":\"cpu-usage\",\"Mean\":0.25},\"arr\":[1,2]}\n"),
            "%s", r.out);
  cr_assert(strstr(r.out, "\"event\":\"Event(9999)\",\"eventId\":9999,\"version\":0,\"level\":2,\"keywords\":\"0x8000\","
                          "\"opcode\":0,\"payloadSize\":4,\"payload\":\"efbeadde\"}"),
            "%s", r.out);
  cr_assert(strstr(r.out, "\"s\":\"q\\\"\\\\\\n\",\"Payload\":{\"Name\":\"\",\"Mean\":\"NaN\"},\"arr\":[]"), "%s",
            r.out);
  dnt_run_free(&r);

  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--provider", "test-provider", NULL), 0);
  cr_assert_eq(count_lines(r.out), 2);
  cr_assert(strstr(r.err, "2 events shown (of 3 in the trace)"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--provider", "Test", "--provider", "nope", NULL), 0);
  cr_assert_eq(count_lines(r.out), 0, "exact, not a prefix");
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--provider", "nope", "--provider",
                               "MICROSOFT-WINDOWS-DOTNETRUNTIME", NULL),
               0);
  cr_assert_str_eq(r.out, "2.000000 77 0 2 0x8000 0 Microsoft-Windows-DotNETRuntime Event(9999) size=4\n");
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--name", "event(9999)", "-v", NULL), 0);
  cr_assert_str_eq(r.out, "2.000000 77 0 2 0x8000 0 Microsoft-Windows-DotNETRuntime Event(9999) size=4 payload=efbeadde\n");
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--name", "Every", "-n", "1", NULL), 0);
  cr_assert_eq(count_lines(r.out), 1);
  cr_assert(strstr(r.out, "n=-5"), "%s", r.out);
  dnt_run_free(&r);

  /* truncated inside the event block: what came before, a warning, exit 0 */
  ntrw_release(&w);
  build_trace(&w, 0);
  dnt_write_file(path, w.buf, w.len - 5);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.err, "is truncated at byte"), "%s", r.err);
  cr_assert(strstr(r.err, "warning:"), "%s", r.err);
  dnt_run_free(&r);
  ntrw_release(&w);
  dnt_rm_rf(dir);
  free(dir);
}

/* One clear line on stderr (git style) and exit 1; nothing on stdout. */
static void expect_unreadable(const char *path, const char *what) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, NULL), 1, "%s: %s", path, r.err);
  cr_assert_str_eq(r.out, "");
  cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
  cr_assert(strncmp(r.err, "dntrace: error: ", 16) == 0, "%s", r.err);
  cr_assert(strstr(r.err, what), "'%s' in %s", what, r.err);
  dnt_run_free(&r);
}

Test(events, bad_input) {
  char *dir = temp_dir();
  char path[256], msg[400];
  snprintf(path, sizeof path, "%s/missing.nettrace", dir);
  snprintf(msg, sizeof msg, "cannot open '%s': No such file or directory", path);
  expect_unreadable(path, msg);
  snprintf(path, sizeof path, "%s/empty.nettrace", dir);
  dnt_write_file(path, "", 0);
  expect_unreadable(path, "is empty");
  snprintf(path, sizeof path, "%s/text.nettrace", dir);
  dnt_write_file(path, "hello, world\n", 13);
  snprintf(msg, sizeof msg, "'%s' is not a nettrace file", path);
  expect_unreadable(path, msg);
  snprintf(path, sizeof path, "%s/short", dir);
  dnt_write_file(path, "Net", 3);
  expect_unreadable(path, "truncated at byte 3, before its trace header");
  expect_unreadable(dir, "Is a directory");
  /* a FIFO nobody writes to: refused at once, not waited on (the run would time out) */
  snprintf(path, sizeof path, "%s/fifo", dir);
  cr_assert_eq(mkfifo(path, 0600), 0, "%s", strerror(errno));
  snprintf(msg, sizeof msg, "cannot read '%s': not a regular file", path);
  expect_unreadable(path, msg);
  expect_unreadable("/dev/null", "not a regular file");
  static const uint8_t v7[20] = {'N', 'e', 't', 't', 'r', 'a', 'c', 'e', 0, 0, 0, 0, 7, 0, 0, 0};
  snprintf(path, sizeof path, "%s/v7.nettrace", dir);
  dnt_write_file(path, v7, sizeof v7);
  expect_unreadable(path, "major version 7 is not supported");

  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", NULL), 2);
  cr_assert(strstr(r.err, "name the trace file"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", "a", "b", NULL), 2);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "-n", "0", NULL), 2);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "-n", "x", NULL), 2);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--bogus", NULL), 2);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--provider", NULL), 2);
  cr_assert(strstr(r.err, "needs a value"), "%s", r.err);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* ---- the public corpus ------------------------------------------------------------------ */

static char corpus[4096];

static void need_corpus(void) { corpus_dir(corpus, sizeof corpus); }

/* The counters named here were found in the files with `strings -el`, not with dntrace. */
/* .timeout: above one DNT_HANG_MS ceiling (only a hang reaches it; a failed step ends the test)
 * and a loaded healthy run */
Test(events_corpus, countercow_event_counters, .timeout = 240) {
  need_corpus();
  static const struct {
    const char *file, *counters[4];
  } files[] = {
      {"tbbuck__countercow/console-net8.nettrace", {"cpu-usage", "working-set", "gc-heap-size", NULL}},
      {"tbbuck__countercow/aspnet-net9.nettrace", {"cpu-usage", "requests-per-second", "total-connections", NULL}},
      {"tbbuck__countercow/generic-net10.nettrace", {"cpu-usage", "gc-heap-size", NULL}},
  };
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    struct dnt_run r;
    cr_assert_eq(corpus_events(&r, corpus, files[k].file, "--name", "EventCounters", NULL), 0, "%s: %s", files[k].file,
                 r.err);
    cr_assert_gt(count_lines(r.out), 10, "%s", files[k].file);
    for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) {
      size_t len = strcspn(l, "\n");
      char *line = strndup(l, len);
      cr_assert(strstr(line, " EventCounters Payload.Name="), "%s", line);
      cr_assert(strstr(line, " Payload.DisplayName="), "%s", line);
      cr_assert(strstr(line, " Payload.DisplayUnits="), "%s", line);
      cr_assert(strstr(line, " Payload.Mean=") || strstr(line, " Payload.Increment="), "%s", line);
      free(line);
    }
    for (int c = 0; files[k].counters[c]; c++) {
      char want[128];
      snprintf(want, sizeof want, "System.Runtime EventCounters Payload.Name=%s ", files[k].counters[c]);
      if (!strcmp(files[k].counters[c], "requests-per-second") || !strcmp(files[k].counters[c], "total-connections"))
        snprintf(want, sizeof want, " EventCounters Payload.Name=%s ", files[k].counters[c]);
      cr_assert(strstr(r.out, want), "%s: no '%s'", files[k].file, want);
    }
    dnt_run_free(&r);
  }
  /* the decoded values, through --json: cpu-usage is a Mean counter in percent */
  struct dnt_run r;
  cr_assert_eq(
      corpus_events(&r, corpus, "tbbuck__countercow/console-net8.nettrace", "--name", "EventCounters", "--json", NULL), 0);
  for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) cr_assert(json_object_line(l, strcspn(l, "\n")));
  cr_assert(strstr(r.out, "\"Name\":\"cpu-usage\",\"DisplayName\":\"CPU Usage\",\"Mean\":"), "%s", r.out);
  cr_assert(strstr(r.out, "\"CounterType\":\"Mean\""), "%s", r.out);
  cr_assert(strstr(r.out, "\"DisplayUnits\":\"%\""), "%s", r.out);
  dnt_run_free(&r);
}

/* The arraytypes trace's TestEvent3 carries a char[] of five code units (05 00, then a3 e7 af 33
 * 8d 96 ef 1c e4 8b in the file): one string, as TraceEvent reads it. */
Test(events_corpus, char_array_is_a_string, .timeout = 120) {
  need_corpus();
  struct dnt_run r;
  cr_assert_eq(corpus_events(&r, corpus, "microsoft__perfview/eventpipe-dotnetcore5.0-win-x64-arraytypes.nettrace",
                             "--provider", "TestEventSource0", "--name", "TestEvent3", NULL),
               0, "%s", r.err);
  cr_assert(strstr(r.out, " TestEvent3/24 arg0=\xee\x9e\xa3\xe3\x8e\xaf\xe9\x9a\x8d\xe1\xb3\xaf\xe8\xaf\xa4\n"),
            "%s", r.out);
  dnt_run_free(&r);
}

Test(events_corpus, zipped_voicememo, .timeout = 180) {
  need_corpus();
  struct dnt_run r;
  cr_assert_eq(corpus_events(&r, corpus, "microsoft__perfview/VoiceMemo.23092.nettrace.zip", "-n", "50000", NULL), 0,
               "%s", r.err);
  cr_assert_eq(count_lines(r.out), 50000);
  /* a 32-bit process's trace: its samples decode too */
  cr_assert(strstr(r.out, " Microsoft-DotNETCore-SampleProfiler Thread/Sample Type="), "%.400s", r.out);
  cr_assert_null(strstr(r.out, "Event("), "%.400s", strstr(r.out, "Event("));
  dnt_run_free(&r);
  /* every event, counted independently of the command by the parser on the same bytes */
  char path[4400], err[512];
  struct collect c;
  snprintf(path, sizeof path, "%s/microsoft__perfview/VoiceMemo.23092.nettrace.zip", corpus);
  cr_assert_eq(read_path(path, &c, err, sizeof err), DNT_TRACE_COMPLETE, "%s", err);
  cr_assert_gt(c.events, 100000);
}

/* .timeout: above one DNT_HANG_MS ceiling (only a hang reaches it; a failed step ends the test)
 * and a loaded healthy run */
Test(events_corpus, truncated_trace_is_shown_and_reported, .timeout = 240) {
  need_corpus();
  struct dnt_run r;
  cr_assert_eq(corpus_events(&r, corpus, "dotnet__diagnostics/trace.nettrace", NULL), 0, "%s", r.err);
  cr_assert_gt(count_lines(r.out), 1000);
  cr_assert(strstr(r.err, "dntrace: warning: '") && strstr(r.err, "trace.nettrace' is truncated at byte 4174144"), "%s",
            r.err);
  cr_assert(strstr(r.out, "System.Runtime EventCounters Payload.Name=cpu-usage "), "events before the cut are decoded");
  dnt_run_free(&r);
  /* a NetPerf one (.NET Core 2.1, zipped), read whole: its samples decoded (their count is held
   * to an independent reader's in tests/unit/nettrace/test-ntr-corpus.c, to TraceEvent's in
   * tests/cli/test-weights.c) */
  cr_assert_eq(
      corpus_events(&r, corpus, "microsoft__perfview/eventpipe-dotnetcore2.1-win-x86-objver3.netperf.zip", NULL), 0,
      "%s", r.err);
  cr_expect_null(strstr(r.err, "warning"), "read whole, without a warning: %s", r.err);
  cr_expect(strstr(r.out, " Microsoft-DotNETCore-SampleProfiler Thread/Sample Type=1\n"), "%.400s", r.out);
  cr_expect(strstr(r.out, " Microsoft-Windows-DotNETRuntimeRundown "), "%.400s", r.out);
  dnt_run_free(&r);
}

/* ---- against the real runtime ----------------------------------------------------------- */

/* The trace's clock origin (the Trace object's SyncTimeQPC), read from the file's first object
 * as the format lays it out (the FastSerialization header, then "Trace" and its SYSTEMTIME). */
static uint64_t trace_sync_qpc(const char *path) {
  static const uint8_t head[] = "Nettrace\x14\0\0\0!FastSerialization.1\x05\x05\x01";
  uint8_t b[80];
  FILE *fp = fopen(path, "rb");
  cr_assert(fp, "%s", path);
  size_t n = fread(b, 1, sizeof b, fp);
  fclose(fp);
  cr_assert(n == sizeof b && memcmp(b, head, 35) == 0 && memcmp(b + 43, "\x05\0\0\0Trace\x06", 10) == 0,
            "%s starts with the Trace object", path);
  uint64_t q = 0;
  for (int i = 7; i >= 0; i--) q = q << 8 | b[53 + 16 + i];
  return q;
}

/* The sample's Sample-Load ticks (--event-rate 1000), recorded until the trace holds 100 of them:
 * `events` shows each one the independent reader counts, in order, at the trace's own times. The
 * inner ceilings: the sample's start (DNT_HANG_MS), at most 126 s of recording, then dntrace on the
 * trace (DNT_HANG_MS each; a failed step ends the test). */
Test(events_runtime, sample_load_ticks, .timeout = 480) {
  DNT_REQUIRE_TARGET();
  static const char *const args[] = {"--event-rate", "1000", NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1};
  dnt_target t;
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char *dir = temp_dir();
  char out[128];
  snprintf(out, sizeof out, "%s/trace.nettrace", dir);
  static const char *const providers[] = {"--providers", "Sample-Load:0:4", NULL};
  static struct nt_scan scan;
  dnt_collect_until(t.pid, out, providers, "Sample-Load", -1, 0, 100, &scan);
  dnt_target_stop(&t);
  uint64_t ticks = nt_scan_count(&scan, "Sample-Load", -1, 0);
  /* the trace's own clock, read independently: its origin, and the first and last ticks' times
   * since then, in seconds */
  uint64_t first = UINT64_MAX, last = 0, sync = trace_sync_qpc(out);
  for (int i = 0; i < scan.ncounts; i++) {
    if (strcmp(scan.counts[i].provider, "Sample-Load") != 0) continue;
    if (scan.counts[i].first_ts < first) first = scan.counts[i].first_ts;
    if (scan.counts[i].last_ts > last) last = scan.counts[i].last_ts;
  }
  cr_assert(scan.qpc_frequency > 0 && first >= sync && last >= first, "sync %llu, ticks %llu to %llu at %llu Hz",
            (unsigned long long)sync, (unsigned long long)first, (unsigned long long)last,
            (unsigned long long)scan.qpc_frequency);
  double first_s = (double)(first - sync) / (double)scan.qpc_frequency,
         last_s = (double)(last - sync) / (double)scan.qpc_frequency;

  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", out, "--provider", "Sample-Load", NULL), 0, "%s", r.err);
  size_t lines = count_lines(r.out);
  cr_assert_eq(lines, ticks, "every tick of the trace: %zu shown, the independent reader counts %llu", lines,
               (unsigned long long)ticks);
  long prev = -1;
  double prev_t = -1, min_t = INFINITY, max_t = -INFINITY;
  for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) {
    double ts;
    unsigned long tid;
    long n;
    char s[16];
    /* time, thread, then processor, level, keywords, opcode */
    cr_assert_eq(sscanf(l, "%lf %lu %*d %*u %*s %*u Sample-Load Tick n=%ld s=%15s", &ts, &tid, &n, s), 4, "%.200s", l);
    cr_assert_str_eq(s, "tick");
    cr_assert_gt(n, prev, "n increases: %ld after %ld", n, prev);
    cr_assert_geq(ts, prev_t - 0.05, "time goes forward (within a block's reordering)");
    if (ts < min_t) min_t = ts;
    if (ts > max_t) max_t = ts;
    prev = n, prev_t = ts;
  }
  /* seconds since the trace's start, to the microsecond the text shows: the earliest and the
   * latest tick where the trace's own clock puts them */
  cr_assert(min_t >= first_s - 1e-6 && min_t <= first_s + 1e-6 && max_t >= last_s - 1e-6 && max_t <= last_s + 1e-6,
            "ticks shown from %.6f to %.6f s, the trace's clock has them from %.7f to %.7f s", min_t, max_t, first_s,
            last_s);
  cr_log_info("%zu ticks over %.3f s of the trace (%.0f a second; the sample was asked for 1000)", lines,
              last_s - first_s, last_s > first_s ? (double)lines / (last_s - first_s) : 0.0);
  cr_assert(strstr(r.err, "events shown"), "%s", r.err);
  dnt_run_free(&r);

  cr_assert_eq(dnt_run_dntrace(&r, "events", out, "--provider", "SAMPLE-LOAD", "--json", NULL), 0, "%s", r.err);
  cr_assert_eq(count_lines(r.out), lines);
  for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) {
    size_t len = strcspn(l, "\n");
    cr_assert(json_object_line(l, len), "%.*s", (int)len, l);
    cr_assert(strstr(l, "\"event\":\"Tick\"") && strstr(l, ",\"s\":\"tick\"}\n"), "%.*s", (int)len, l);
  }
  dnt_run_free(&r);

  cr_assert_eq(dnt_run_dntrace(&r, "events", out, "--name", "tick", "-n", "5", NULL), 0, "%s", r.err);
  cr_assert_eq(count_lines(r.out), 5);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", out, "--name", "NoSuchEvent", NULL), 0, "%s", r.err);
  cr_assert_str_eq(r.out, "");
  dnt_run_free(&r);

  /* EventPipe's own ProcessInfo event carries the command line */
  cr_assert_eq(dnt_run_dntrace(&r, "events", out, "--provider", "Microsoft-DotNETCore-EventPipe", "--name", "ProcessInfo",
                               "--json", NULL),
               0, "%s", r.err);
  cr_assert_eq(count_lines(r.out), 1, "%s", r.out);
  cr_assert(strstr(r.out, "\"CommandLine\":\""), "%s", r.out);
  cr_assert(strstr(r.out, dnt_target_exe()), "the command line names %s: %s", dnt_target_exe(), r.out);
  dnt_run_free(&r);
  unlink(out);
  rmdir(dir);
  free(dir);
}

/* The runtime's own events carry no field list: their layouts come from data/runtime-events.xml.
 * The sample throws InvalidOperationException("sample exception, thrown on purpose") every 2 s:
 * the trace is recorded until the first of them arrives (collect's stopping event), and only once
 * cpu-work has run (CountPrimes jitted, for the rundown), so both are in it however slow the
 * machine. The inner ceilings: the sample's start, cpu-work's first 0.1 s of CPU and the
 * recording (DNT_HANG_MS each, only a hang), then dntrace on the trace. */
Test(schema, runtime_events_by_field_name, .timeout = 480) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-schema-XXXXXX", trace[64], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  dnt_target t;
  dnt_start_sample(&t, NULL, pid, sizeof pid);
  dnt_wait_thread_ran(t.pid, "cpu-work", 0.1);
  struct dnt_run c;
  int rc = dnt_run_dntrace(&c, "collect", "-p", pid, "-o", trace, "--stopping-event-provider-name",
                           "Microsoft-Windows-DotNETRuntime", "--stopping-event-event-name", "Exception/Start",
                           "--stopping-event-payload-filter", "ExceptionType:System.InvalidOperationException", NULL);
  dnt_target_stop(&t);
  cr_assert_eq(rc, 0, "collect: %s%s", c.out, c.err);
  cr_assert(strstr(c.out, "The stopping event arrived"), "%s", c.out);
  dnt_run_free(&c);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", trace, "--name", "ExceptionThrown", NULL), 0, "%s", r.err);
  /* --name takes the manifest's symbol (ExceptionThrown_V1) as well as TraceEvent's name */
  cr_assert(strstr(r.out, " Microsoft-Windows-DotNETRuntime Exception/Start ExceptionType=System.InvalidOperationException "
                          "ExceptionMessage=\"sample exception, thrown on purpose\""),
            "%s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", trace, "--name", "MethodDCEndVerbose", "-n", "50", NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, "MethodNamespace=Sample.CpuWork MethodName=CountPrimes"), "rundown names CountPrimes:\n%.2000s",
            r.out);
  dnt_run_free(&r);

  /* a schema of one's own replaces a built-in layout */
  char schema[80];
  snprintf(schema, sizeof schema, "%s/mine.xml", dir);
  FILE *fp = fopen(schema, "w");
  fputs("<dntrace-schema version=\"1\"><provider name=\"Microsoft-Windows-DotNETRuntime\">"
        "<event id=\"80\" name=\"MyThrow\"><field name=\"What\" type=\"String\"/></event>"
        "</provider></dntrace-schema>\n",
        fp);
  fclose(fp);
  cr_assert_eq(dnt_run_dntrace(&r, "events", trace, "--schema", schema, "--name", "MyThrow", "-n", "1", NULL), 0, "%s",
               r.err);
  cr_assert(strstr(r.out, " MyThrow What=System.InvalidOperationException"), "%s", r.out);
  dnt_run_free(&r);

  /* a broken schema: one line naming the file and the line */
  fp = fopen(schema, "w");
  fputs("<dntrace-schema version=\"1\">\n<provider name=\"P\">\n<event id=\"1\" name=\"E\">\n"
        "<field name=\"x\" type=\"Float128\"/></event></provider></dntrace-schema>\n",
        fp);
  fclose(fp);
  cr_assert_eq(dnt_run_dntrace(&r, "events", trace, "--schema", schema, NULL), 1, "bad input, as a bad trace: %s",
               r.out);
  char want[128];
  snprintf(want, sizeof want, "%s:4: unknown field type Float128", schema);
  cr_assert(strstr(r.err, want), "%s", r.err);
  dnt_run_free(&r);
  /* a missing one: our own line (not libxml2's "failed to load external entity"), exit 1 */
  cr_assert_eq(dnt_run_dntrace(&r, "events", trace, "--schema", "/missing.xml", NULL), 1, "%s", r.out);
  cr_assert_str_eq(r.err, "dntrace: error: --schema: cannot read '/missing.xml': No such file or directory\n");
  dnt_run_free(&r);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* ---- hostile traces through the binary: memory and undefined behaviour (issue 19) ------- */

/* Appends a stack block of `count` empty stacks, ids from `first`: 4 bytes a stack. */
static void w_empty_stacks(ntrw *w, uint32_t first, uint32_t count) {
  uint32_t *sizes = calloc(count, sizeof *sizes);
  const uint64_t **frames = calloc(count, sizeof *frames);
  cr_assert(sizes && frames);
  ntrw_stacks(w, first, count, frames, sizes);
  free(sizes);
  free(frames);
}

/* Lines of stderr that say "error:". */
static int error_lines(const char *err) {
  int n = 0;
  for (const char *l = err; l && *l;) {
    const char *e = strchr(l, '\n');
    size_t len = e ? (size_t)(e - l) : strlen(l);
    if (memmem(l, len, "error:", 6)) n++;
    l = e ? e + 1 : l + len;
  }
  return n;
}

/* The peak RSS of `dntrace CMD file` on the little trace of build_trace: what the process
 * needs before any table (libraries, the schema, buffers; ASan's own in the sanitizer build). */
static long baseline_rss_kb(const char *dir, const char *cmd) {
  char path[256];
  ntrw w;
  struct dnt_run r;
  build_trace(&w, 1);
  snprintf(path, sizeof path, "%s/small.nettrace", dir);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);
  /* report finds no samples in it and says so (status 1): the trace was read all the same */
  int st = dnt_run_dntrace(&r, cmd, path, NULL);
  cr_assert(st == 0 || st == 1, "%d: %s", st, r.err);
  long kb = r.maxrss_kb;
  dnt_run_free(&r);
  cr_assert_gt(kb, 0);
  return kb;
}

/* The bound on what a trace may add to dntrace's peak RSS in these tests. The parser holds at
 * most max_stacks (1 Mi) stacks at 16 bytes: 16 MiB, 24 MiB while the array doubles; under
 * ASan the freed smaller arrays wait in its quarantine (16 MiB more) and the shadow adds 1/8.
 * Measured: the first trace below (16 MB of empty stacks) adds ~42 MiB to the sanitizer
 * build (~14 MiB without it) and ~20 MiB at -O2 (~6 MiB); before the fix, 233 MiB at -O2. */
#define RSS_BOUND_KB (64L * 1024)

/* Issue 19 item 4: 16 MB of empty stacks, no sequence point. dntrace stops at max_stacks
 * with one error line naming the limit, in bounded memory. */
Test(hostile, empty_stacks_fail_clearly_in_bounded_memory, .timeout = 240) {
  char *dir = temp_dir();
  char path[256];
  ntrw w;
  ntrw_trace t = {QPC0, FREQ, 8, 4321, 4, 1000000, NULL, 0};
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  for (uint32_t k = 0; k < 4; k++) w_empty_stacks(&w, 1 + (k << 20), 1u << 20);
  ntrw_end(&w);
  snprintf(path, sizeof path, "%s/empty-stacks.nettrace", dir);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);
  static const char *const cmds[] = {"events", "report"};
  for (int c = 0; c < 2; c++) {
    long base = baseline_rss_kb(dir, cmds[c]);
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, cmds[c], path, NULL), 1, "%s: %s", cmds[c], r.err);
    cr_assert_eq(error_lines(r.err), 1, "%s: one error line: %s", cmds[c], r.err);
    cr_assert(strstr(r.err, "more than 1048576 stacks between two sequence points (max_stacks)"), "%s: %s",
              cmds[c], r.err);
    cr_assert(strstr(r.err, "reader limit"), "%s: %s", cmds[c], r.err);
    cr_assert_leq(r.maxrss_kb - base, RSS_BOUND_KB, "%s: peak RSS %ld KiB, %ld KiB without the trace", cmds[c],
                  r.maxrss_kb, base);
    dnt_run_free(&r);
  }
  dnt_rm_rf(dir);
  free(dir);
}

/* The same number of stacks in runs between sequence points is a trace like any other: read,
 * in the memory of one run. */
Test(hostile, empty_stacks_between_sequence_points_are_read, .timeout = 240) {
  char *dir = temp_dir();
  char path[256];
  ntrw w;
  ntrw_trace t = {QPC0, FREQ, 8, 4321, 4, 1000000, NULL, 0};
  uint64_t th = 77;
  uint32_t sq = 0;
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  for (int k = 0; k < 8; k++) {
    w_empty_stacks(&w, 1, 1u << 19);
    ntrw_sp(&w, QPC0 + (uint64_t)k, 0, 1, &th, &sq);
  }
  ntrw_end(&w);
  snprintf(path, sizeof path, "%s/runs.nettrace", dir);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);
  long base = baseline_rss_kb(dir, "events");
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, NULL), 0, "%s", r.err);
  cr_assert_eq(error_lines(r.err), 0, "%s", r.err);
  cr_assert_leq(r.maxrss_kb - base, RSS_BOUND_KB, "peak RSS %ld KiB, %ld KiB without the trace", r.maxrss_kb, base);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* Issue 19 item 7: samples whose stack id names no stack (a bit flip, a lost stack block)
 * beside a sample with an empty stack: both are a thread in native code, no frames. The
 * profile compared them with memcmp(NULL, ..., 0), undefined (gcc's UBSan aborted report and
 * convert). 4 samples written, so 4 counted, all UNMANAGED_CODE_TIME. */
Test(hostile, unresolvable_and_empty_stacks_in_a_profile) {
  char *dir = temp_dir();
  char path[256];
  ntrw w;
  ntrw_trace t = {QPC0, FREQ, 8, 4321, 4, 1000000, NULL, 0};
  ntrw_md md = {1, "Microsoft-DotNETCore-SampleProfiler", 0, "", 0, 0, 4, -1, NULL, 0, 0, 1};
  static const uint8_t managed[4] = {2, 0, 0, 0};
  const uint32_t ids[4] = {1, 9, 9, 10}; /* stack 1 is empty; 9 and 10 were never written */
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &md);
  ntrw_block_end(&w);
  w_empty_stacks(&w, 1, 1);
  ntrw_ev_begin(&w, 1);
  for (uint32_t k = 0; k < 4; k++) {
    ntrw_ev e = {.metadata_id = 1, .seq = k + 1, .thread = 500, .capture_thread = 600, .stack_id = ids[k],
                 .ts = QPC0 + 1000 * (k + 1), .payload = managed, .payload_size = 4};
    ntrw_event(&w, &e);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  snprintf(path, sizeof path, "%s/unresolvable.nettrace", dir);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);

  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "report", path, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, "UNMANAGED_CODE_TIME"), "%s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", path, "--format", "folded", "--weight", "samples", "-o", "-", NULL), 0,
               "%s", r.err);
  unsigned long total = 0;
  for (char *l = r.out; *l;) {
    char *e = strchr(l, '\n');
    cr_assert(e, "unterminated line: %s", l);
    *e = '\0';
    char *sp = strrchr(l, ' ');
    cr_assert(sp, "no count: %s", l);
    *sp = '\0';
    cr_assert(strlen(l) >= 19 && strcmp(l + strlen(l) - 19, "UNMANAGED_CODE_TIME") == 0, "leaf: %s", l);
    total += strtoul(sp + 1, NULL, 10);
    l = e + 1;
  }
  cr_assert_eq(total, 4, "%s", r.out);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* A stack with a wild id (a bit flip, or a writer's choice): the profile's cache of stacks by
 * id must not grow with the id. One 8-byte stack numbered 0xFFFFF0 made report allocate and
 * clear a 64 MiB cache; now a wild id skips the cache. The sample still counts. */
Test(hostile, wild_stack_id_costs_no_memory) {
  char *dir = temp_dir();
  char path[256];
  ntrw w;
  ntrw_trace t = {QPC0, FREQ, 8, 4321, 4, 1000000, NULL, 0};
  ntrw_md md = {1, "Microsoft-DotNETCore-SampleProfiler", 0, "", 0, 0, 4, -1, NULL, 0, 0, 1};
  static const uint8_t managed[4] = {2, 0, 0, 0};
  uint64_t ip[1] = {0x7f0012345678};
  const uint64_t *fr[1] = {ip};
  const uint32_t n[1] = {1};
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &md);
  ntrw_block_end(&w);
  ntrw_stacks(&w, 0xFFFFF0, 1, fr, n);
  ntrw_ev_begin(&w, 1);
  ntrw_ev e = {.metadata_id = 1, .seq = 1, .thread = 500, .capture_thread = 600, .stack_id = 0xFFFFF0,
               .ts = QPC0 + 1000, .payload = managed, .payload_size = 4};
  ntrw_event(&w, &e);
  ntrw_block_end(&w);
  ntrw_end(&w);
  snprintf(path, sizeof path, "%s/wild.nettrace", dir);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);
  long base = baseline_rss_kb(dir, "report");
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", path, "--format", "folded", "--weight", "samples", "-o", "-", NULL), 0,
               "%s", r.err);
  /* the frame is named by its address: no method covers it (one sample: counted in samples, it
   * stands for no time) */
  cr_assert(strstr(r.out, "?!0x7f0012345678 1\n"), "%s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "report", path, NULL), 0, "%s", r.err);
  /* 16 MiB: a quarter of what the old cache alone took, far over what one sample needs */
  cr_assert_leq(r.maxrss_kb - base, 16L * 1024, "peak RSS %ld KiB, %ld KiB without the trace", r.maxrss_kb, base);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* --provider that the trace does not have: its providers listed (issue 28 item 18): those
 * the independent reader (nt-scan) finds events of in the same file. One it has, in another case:
 * its events, and no such line. */
Test(events_corpus, a_provider_the_trace_lacks_lists_those_it_has) {
  need_corpus();
  char path[4400];
  snprintf(path, sizeof path, "%s/tbbuck__countercow/runtime-net10-loaded.nettrace", corpus);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--provider", "No.Such.Provider", NULL), 0, "%s", r.err);
  cr_assert_str_empty(r.out);
  const char *line = strstr(r.err, "warning: no provider 'No.Such.Provider' in this trace; its providers: ");
  cr_assert(line, "%s", r.err);
  /* every provider with events, by the independent reader, is named, and nothing else */
  static struct nt_scan sc;
  memset(&sc, 0, sizeof sc);
  cr_assert_eq(nt_scan_file(path, &sc), 0);
  int named = 0;
  for (int i = 0; i < sc.nmeta; i++) {
    int first = 1;
    for (int j = 0; j < i; j++) first &= strcmp(sc.meta[j].provider, sc.meta[i].provider) != 0;
    if (!first || !sc.meta[i].provider[0]) continue;
    int has_events = 0;
    for (int k = 0; k < sc.ncounts; k++) has_events |= strcmp(sc.counts[k].provider, sc.meta[i].provider) == 0;
    if (!has_events) continue;
    named++;
    cr_assert(strstr(line, sc.meta[i].provider), "%s is not named: %s", sc.meta[i].provider, line);
  }
  int commas = 0;
  for (const char *c = line; *c && *c != '\n'; c++) commas += *c == ',';
  cr_assert_eq(commas + 1, named, "%s", line);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "events", path, "--provider", "microsoft-windows-dotnetruntime", "-n", "5", NULL),
               0, "%s", r.err);
  cr_assert_null(strstr(r.err, "no provider"), "%s", r.err);
  dnt_run_free(&r);
}
