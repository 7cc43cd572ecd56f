/* fields.c: an event payload decoded by its metadata field tree (dnt-trace.h).
 *
 * Values go into a growable array and their text (names, strings) into one growable arena.
 * While decoding, the arena may move, so names and strings are kept as offsets (r->offs) and
 * turned into pointers once, at the end. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-trace.h"

#define MAX_NESTING 64 /* besides ntr_limits.max_depth: our own recursion bound */
#define NOFF 3         /* offsets per value: name, key, s */

struct dec {
  dnt_record *r;
  ntr_payload c;
  const uint8_t *base;
  size_t len;
  char *path; /* the dotted name being built */
  size_t plen, pcap;
  int rc;
  int layout;   /* a schema layout: the dnt_layout_type codes are allowed */
  uint32_t ptr; /* pointer size for DNT_TYPE_POINTER */
};

static const char *const type_names[] = {
    [NTR_TYPE_OBJECT] = "Object",     [NTR_TYPE_BOOLEAN] = "Boolean",        [NTR_TYPE_CHAR] = "Char",
    [NTR_TYPE_SBYTE] = "SByte",       [NTR_TYPE_BYTE] = "Byte",              [NTR_TYPE_INT16] = "Int16",
    [NTR_TYPE_UINT16] = "UInt16",     [NTR_TYPE_INT32] = "Int32",            [NTR_TYPE_UINT32] = "UInt32",
    [NTR_TYPE_INT64] = "Int64",       [NTR_TYPE_UINT64] = "UInt64",          [NTR_TYPE_SINGLE] = "Single",
    [NTR_TYPE_DOUBLE] = "Double",     [NTR_TYPE_DECIMAL] = "Decimal",        [NTR_TYPE_DATETIME] = "DateTime",
    [NTR_TYPE_GUID] = "Guid",         [NTR_TYPE_STRING] = "String",          [NTR_TYPE_ARRAY] = "Array",
    [NTR_TYPE_VARINT] = "VarInt",     [NTR_TYPE_VARUINT] = "VarUInt",        [NTR_TYPE_FIXED_ARRAY] = "FixedArray",
    [NTR_TYPE_UTF8_CHAR] = "UTF8Char", [NTR_TYPE_RELLOC] = "RelLoc",         [NTR_TYPE_DATALOC] = "DataLoc",
    [NTR_TYPE_BOOLEAN8] = "Boolean8",
};

const char *dnt_type_name(uint32_t type) {
  switch (type) {
  case DNT_TYPE_POINTER: return "Pointer";
  case DNT_TYPE_ANSI: return "AnsiString";
  case DNT_TYPE_BINARY: return "Binary";
  case DNT_TYPE_COUNTED: return "Array";
  default: break;
  }
  if (type < sizeof type_names / sizeof type_names[0] && type_names[type]) return type_names[type];
  return "Unknown";
}

/* ---- text forms ------------------------------------------------------------------------- */

/* Days since 1970-01-01 to a civil date (H. Hinnant's algorithm). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  unsigned doe = (unsigned)(z - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

void dnt_format_filetime(uint64_t ft, char out[40]) {
  uint64_t secs = ft / 10000000u;
  unsigned frac = (unsigned)(ft % 10000000u);
  int64_t days = (int64_t)(secs / 86400u) - 134774; /* 1601-01-01 to 1970-01-01 */
  unsigned sod = (unsigned)(secs % 86400u), mo, d;
  int64_t y;
  civil_from_days(days, &y, &mo, &d);
  snprintf(out, 40, "%04lld-%02u-%02uT%02u:%02u:%02u.%07uZ", (long long)y, mo, d, sod / 3600, sod / 60 % 60, sod % 60,
           frac);
}

void dnt_format_guid(const uint8_t g[16], char out[37]) {
  snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", g[3], g[2], g[1], g[0], g[5],
           g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
}

/* System.Decimal as .NET Core lays it out: i32 flags (scale in bits 16-23, sign in bit 31),
 * u32 hi, u64 lo. -1 when the flags are not those of a decimal. */
static int format_decimal(const uint8_t *p, char out[48]) {
  uint32_t flags = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
  uint64_t lo = 0;
  for (int k = 7; k >= 0; k--) lo = lo << 8 | p[8 + k];
  unsigned scale = (flags >> 16) & 0xff;
  if ((flags & 0x7f00ffffu) || scale > 28) return -1;
  unsigned __int128 v = (unsigned __int128)hi << 64 | lo;
  char digits[48];
  int n = 0;
  do {
    digits[n++] = (char)('0' + (int)(v % 10));
    v /= 10;
  } while (v);
  while (n <= (int)scale) digits[n++] = '0';
  int o = 0;
  if (flags >> 31) out[o++] = '-';
  for (int k = n - 1; k >= 0; k--) {
    out[o++] = digits[k];
    if (k == (int)scale && scale) out[o++] = '.';
  }
  out[o] = '\0';
  return 0;
}

static size_t format_double(double f, int single, char *buf, size_t cap) {
  if (isnan(f)) return (size_t)snprintf(buf, cap, "NaN");
  if (isinf(f)) return (size_t)snprintf(buf, cap, f > 0 ? "Infinity" : "-Infinity");
  char tmp[40];
  const int tries[2][2] = {{15, 17}, {6, 9}};
  for (int k = 0; k < 2; k++) {
    snprintf(tmp, sizeof tmp, "%.*g", tries[single][k], f);
    double back = strtod(tmp, NULL);
    if (single ? (float)back == (float)f : back == f) break;
  }
  return (size_t)snprintf(buf, cap, "%s", tmp);
}

size_t dnt_value_format(const dnt_value *v, char *buf, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  switch (v->kind) {
  case DNT_VALUE_INT: return (size_t)snprintf(buf, cap, "%lld", (long long)v->i);
  case DNT_VALUE_UINT: return (size_t)snprintf(buf, cap, "%llu", (unsigned long long)v->u);
  case DNT_VALUE_FLOAT: return format_double(v->f, v->type == NTR_TYPE_SINGLE, buf, cap);
  case DNT_VALUE_BOOL: return (size_t)snprintf(buf, cap, "%s", v->b ? "true" : "false");
  case DNT_VALUE_STRING: return (size_t)snprintf(buf, cap, "%s", v->s ? v->s : "");
  case DNT_VALUE_OBJECT: return (size_t)snprintf(buf, cap, "{%u}", v->count);
  case DNT_VALUE_ARRAY: return (size_t)snprintf(buf, cap, "[%u]", v->count);
  case DNT_VALUE_BYTES: {
    size_t k, w = 0;
    for (k = 0; k < v->rawlen; k++) {
      if (w + 2 < cap) {
        buf[w] = hex[v->raw[k] >> 4];
        buf[w + 1] = hex[v->raw[k] & 15];
        buf[w + 2] = '\0';
        w += 2;
      }
    }
    if (cap && w == 0) buf[0] = '\0';
    return 2 * v->rawlen;
  }
  default:
    if (cap) buf[0] = '\0';
    return 0;
  }
}

/* ---- the record ------------------------------------------------------------------------- */

void dnt_record_init(dnt_record *r) { memset(r, 0, sizeof *r); }

void dnt_record_release(dnt_record *r) {
  free(r->values);
  free(r->offs);
  free(r->text);
  memset(r, 0, sizeof *r);
}

static int fail(struct dec *d, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct dec *d, int rc, const char *fmt, ...) {
  va_list ap;
  if (d->rc) return d->rc;
  va_start(ap, fmt);
  vsnprintf(d->r->err, sizeof d->r->err, fmt, ap);
  va_end(ap);
  d->rc = rc;
  return rc;
}

static size_t pos(const struct dec *d) { return (size_t)(d->c.cur - d->base); }

static const char *cur_name(const struct dec *d) { return d->plen ? d->path : "(payload)"; }

/* Room for n more text bytes; 0 or an error. */
static int text_room(struct dec *d, size_t n) {
  dnt_record *r = d->r;
  if (n > DNT_FIELDS_MAX_TEXT - r->text_len)
    return fail(d, NTR_ELIMIT, "field '%s': more than %zu bytes of names and strings", cur_name(d),
                (size_t)DNT_FIELDS_MAX_TEXT);
  if (r->text_len + n <= r->text_cap) return 0;
  size_t cap = r->text_cap ? r->text_cap : 1024;
  while (cap < r->text_len + n) cap *= 2;
  char *t = realloc(r->text, cap);
  if (!t) return fail(d, NTR_ENOMEM, "out of memory");
  r->text = t;
  r->text_cap = cap;
  return 0;
}

static int text_add(struct dec *d, const char *s, size_t n, size_t *off) {
  if (text_room(d, n + 1)) return d->rc;
  *off = d->r->text_len;
  memcpy(d->r->text + d->r->text_len, s, n);
  d->r->text[d->r->text_len + n] = '\0';
  d->r->text_len += n + 1;
  return 0;
}

/* Appends a value named by the current path, with `key`; NULL on error. */
static dnt_value *add(struct dec *d, int kind, const ntr_field *f, const char *key, uint32_t depth, uint32_t index) {
  dnt_record *r = d->r;
  if (r->nvalues >= DNT_FIELDS_MAX_VALUES) {
    fail(d, NTR_ELIMIT, "field '%s': more than %u values in one payload", cur_name(d), DNT_FIELDS_MAX_VALUES);
    return NULL;
  }
  if (r->nvalues == r->cap_values) {
    size_t cap = r->cap_values ? 2 * r->cap_values : 32;
    dnt_value *v = realloc(r->values, cap * sizeof *v);
    if (!v) {
      fail(d, NTR_ENOMEM, "out of memory");
      return NULL;
    }
    r->values = v;
    size_t *o = realloc(r->offs, cap * NOFF * sizeof *o);
    if (!o) {
      fail(d, NTR_ENOMEM, "out of memory");
      return NULL;
    }
    r->offs = o;
    r->cap_values = cap;
  }
  size_t *o = r->offs + NOFF * r->nvalues;
  if (text_add(d, d->path ? d->path : "", d->plen, &o[0]) || text_add(d, key, strlen(key), &o[1])) return NULL;
  o[2] = (size_t)-1;
  dnt_value *v = &r->values[r->nvalues++];
  memset(v, 0, sizeof *v);
  v->kind = kind;
  v->type = f->type;
  v->depth = depth;
  v->index = index;
  v->offset = pos(d);
  v->raw = d->c.cur;
  return v;
}

/* Path handling: push a ".key" or "[i]" component, pop it back to a saved length. */
static int path_push(struct dec *d, const char *key, int is_index, uint32_t index) {
  char idx[16];
  const char *part = key;
  size_t n, sep;
  if (is_index) {
    snprintf(idx, sizeof idx, "[%u]", index);
    part = idx;
  }
  n = strlen(part);
  sep = !is_index && d->plen ? 1 : 0;
  if (d->plen + sep + n + 1 > d->pcap) {
    size_t cap = d->pcap ? d->pcap : 128;
    while (cap < d->plen + sep + n + 1) cap *= 2;
    if (cap > DNT_FIELDS_MAX_TEXT) return fail(d, NTR_ELIMIT, "field name longer than %zu bytes", (size_t)DNT_FIELDS_MAX_TEXT);
    char *p = realloc(d->path, cap);
    if (!p) return fail(d, NTR_ENOMEM, "out of memory");
    d->path = p;
    d->pcap = cap;
  }
  if (sep) d->path[d->plen++] = '.';
  memcpy(d->path + d->plen, part, n + 1);
  d->plen += n;
  return 0;
}

static void path_pop(struct dec *d, size_t len) {
  d->plen = len;
  if (d->path) d->path[len] = '\0';
}

static int short_payload(struct dec *d, const ntr_field *f, size_t need) {
  return fail(d, NTR_ETRUNCATED, "field '%s' (%s) at payload byte %zu: needs %zu bytes, %zu left", cur_name(d),
              dnt_type_name(f->type), pos(d), need, ntr_payload_left(&d->c));
}

static int value(struct dec *d, const ntr_field *f, const char *key, uint32_t depth, uint32_t index, const size_t *sib,
                 uint32_t nsib);

/* `count` elements of f->element, each named "[i]", between an ARRAY and its END. */
static int elements(struct dec *d, const ntr_field *f, uint32_t count, uint32_t depth) {
  for (uint32_t k = 0; k < count; k++) {
    size_t saved = d->plen;
    if (path_push(d, "", 1, k) || value(d, f->element, "", depth, k, NULL, 0)) return d->rc;
    path_pop(d, saved);
  }
  return 0;
}

static int scalar(struct dec *d, const ntr_field *f, dnt_value *v) {
  ntr_payload *c = &d->c;
  size_t size = ntr_field_fixed_size(f);
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  if (size && ntr_payload_left(c) < size) return short_payload(d, f, size);
  switch (f->type) {
  case NTR_TYPE_BOOLEAN:
    ntr_payload_u32(c, &u32);
    v->kind = DNT_VALUE_BOOL, v->u = u32, v->b = u32 != 0;
    break;
  case NTR_TYPE_BOOLEAN8:
    ntr_payload_u8(c, &u8);
    v->kind = DNT_VALUE_BOOL, v->u = u8, v->b = u8 != 0;
    break;
  case NTR_TYPE_SBYTE: ntr_payload_u8(c, &u8), v->kind = DNT_VALUE_INT, v->i = (int8_t)u8; break;
  case NTR_TYPE_BYTE: ntr_payload_u8(c, &u8), v->kind = DNT_VALUE_UINT, v->u = u8; break;
  case NTR_TYPE_INT16: ntr_payload_u16(c, &u16), v->kind = DNT_VALUE_INT, v->i = (int16_t)u16; break;
  case NTR_TYPE_UINT16: ntr_payload_u16(c, &u16), v->kind = DNT_VALUE_UINT, v->u = u16; break;
  case NTR_TYPE_INT32: ntr_payload_u32(c, &u32), v->kind = DNT_VALUE_INT, v->i = (int32_t)u32; break;
  case NTR_TYPE_UINT32: ntr_payload_u32(c, &u32), v->kind = DNT_VALUE_UINT, v->u = u32; break;
  case NTR_TYPE_INT64: ntr_payload_u64(c, &u64), v->kind = DNT_VALUE_INT, v->i = (int64_t)u64; break;
  case NTR_TYPE_UINT64: ntr_payload_u64(c, &u64), v->kind = DNT_VALUE_UINT, v->u = u64; break;
  case NTR_TYPE_SINGLE: {
    float x;
    ntr_payload_f32(c, &x);
    v->kind = DNT_VALUE_FLOAT, v->f = x;
    break;
  }
  case NTR_TYPE_DOUBLE: ntr_payload_f64(c, &v->f), v->kind = DNT_VALUE_FLOAT; break;
  case NTR_TYPE_VARINT:
  case NTR_TYPE_VARUINT: {
    int rc = f->type == NTR_TYPE_VARINT ? ntr_payload_varint(c, &v->i) : ntr_payload_varuint(c, &v->u);
    if (rc == NTR_ETRUNCATED)
      return fail(d, rc, "field '%s' (%s) at payload byte %zu: the varint runs past the payload's end", cur_name(d),
                  dnt_type_name(f->type), pos(d));
    if (rc) return fail(d, rc, "field '%s' at payload byte %zu: overlong varint", cur_name(d), pos(d));
    v->kind = f->type == NTR_TYPE_VARINT ? DNT_VALUE_INT : DNT_VALUE_UINT;
    break;
  }
  default: return fail(d, NTR_EINVAL, "field '%s': not a scalar type", cur_name(d));
  }
  return 0;
}

/* The text of a STRING-kind value: stored in the arena, offset kept for the fix-up. */
static int set_text(struct dec *d, const char *s, size_t n) {
  size_t off;
  if (text_add(d, s, n, &off)) return d->rc;
  dnt_record *r = d->r;
  r->offs[NOFF * (r->nvalues - 1) + 2] = off;
  r->values[r->nvalues - 1].slen = n;
  return 0;
}

static void utf8_encode(uint32_t cp, char *out, size_t *n) {
  if (cp < 0x80) {
    out[0] = (char)cp, *n = 1;
  } else if (cp < 0x800) {
    out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), *n = 2;
  } else {
    out[0] = (char)(0xe0 | cp >> 12), out[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), out[2] = (char)(0x80 | (cp & 0x3f));
    *n = 3;
  }
}

/* count UTF-16 code units of the payload as one string value (index vi): TraceEvent reads an
 * EventSource's char[] so. A pair of surrogates is one character, a lone one U+FFFD. */
static int utf16_units(struct dec *d, const ntr_field *f, size_t vi, uint32_t count) {
  ntr_payload *c = &d->c;
  if ((size_t)count * 2 > ntr_payload_left(c)) return short_payload(d, f, (size_t)count * 2);
  if (text_room(d, (size_t)count * 3 + 1)) return d->rc; /* 3 bytes a unit at most (4 a pair) */
  dnt_record *r = d->r;
  char *start = r->text + r->text_len, *o = start;
  for (uint32_t k = 0; k < count; k++) {
    uint16_t u, lo = 0;
    ntr_payload_u16(c, &u);
    ntr_payload probe = *c;
    if (u >= 0xd800 && u < 0xdc00 && k + 1 < count && ntr_payload_u16(&probe, &lo) == 0 && lo >= 0xdc00 &&
        lo < 0xe000) {
      uint32_t cp = 0x10000 + ((uint32_t)(u - 0xd800) << 10) + (uint32_t)(lo - 0xdc00);
      ntr_payload_skip(c, 2);
      k++;
      *o++ = (char)(0xf0 | cp >> 18), *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
      *o++ = (char)(0x80 | ((cp >> 6) & 0x3f)), *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
      size_t n;
      utf8_encode(u >= 0xd800 && u <= 0xdfff ? 0xfffd : u, o, &n);
      o += n;
    }
  }
  *o = '\0';
  r->offs[NOFF * vi + 2] = r->text_len;
  r->values[vi].slen = (size_t)(o - start);
  r->values[vi].kind = DNT_VALUE_STRING;
  r->text_len += (size_t)(o - start) + 1;
  return 0;
}

/* The count an earlier sibling holds (layouts: DNT_TYPE_COUNTED, DNT_TYPE_BINARY); 0 or an error. */
static int sibling_count(struct dec *d, const ntr_field *f, const size_t *sib, uint32_t nsib, uint64_t *out) {
  const dnt_value *c = f->fixed_count < nsib && sib ? &d->r->values[sib[f->fixed_count]] : NULL;
  if (!c || (c->kind != DNT_VALUE_UINT && (c->kind != DNT_VALUE_INT || c->i < 0)))
    return fail(d, NTR_EFORMAT, "field '%s': its count is not an earlier unsigned field", cur_name(d));
  *out = c->kind == DNT_VALUE_UINT ? c->u : (uint64_t)c->i;
  return 0;
}

/* The types only schema layouts have; 1 when f is not one of them. */
static int layout_value(struct dec *d, const ntr_field *f, dnt_value *v, size_t vi, uint32_t depth, const size_t *sib,
                        uint32_t nsib) {
  ntr_payload *c = &d->c;
  uint64_t n;
  switch (f->type) {
  case DNT_TYPE_POINTER:
    if (ntr_payload_left(c) < d->ptr) return short_payload(d, f, d->ptr);
    if (d->ptr == 4) {
      uint32_t u32;
      ntr_payload_u32(c, &u32);
      v->u = u32;
    } else {
      ntr_payload_u64(c, &v->u);
    }
    v->kind = DNT_VALUE_UINT;
    return 0;
  case DNT_TYPE_ANSI: {
    const uint8_t *nul = memchr(c->cur, 0, ntr_payload_left(c));
    if (!nul)
      return fail(d, NTR_ETRUNCATED, "field '%s' (AnsiString) at payload byte %zu: no terminating NUL before the payload's end",
                  cur_name(d), pos(d));
    size_t len = (size_t)(nul - c->cur), need = 0;
    for (size_t k = 0; k < len; k++) need += c->cur[k] < 0x80 ? 1 : 2; /* Latin-1 as UTF-8 */
    if (text_room(d, need + 1)) return d->rc;
    dnt_record *r = d->r;
    char *o = r->text + r->text_len;
    for (size_t k = 0; k < len; k++) {
      uint8_t b = c->cur[k];
      if (b < 0x80) {
        *o++ = (char)b;
      } else {
        *o++ = (char)(0xc0 | b >> 6);
        *o++ = (char)(0x80 | (b & 0x3f));
      }
    }
    *o = '\0';
    r->offs[NOFF * vi + 2] = r->text_len;
    r->values[vi].slen = need;
    r->text_len += need + 1;
    ntr_payload_skip(c, len + 1);
    r->values[vi].kind = DNT_VALUE_STRING;
    return 0;
  }
  case DNT_TYPE_BINARY:
    if (sibling_count(d, f, sib, nsib, &n)) return d->rc;
    if (n > ntr_payload_left(c)) return short_payload(d, f, n > SIZE_MAX ? SIZE_MAX : (size_t)n);
    v->kind = DNT_VALUE_BYTES;
    v->raw = c->cur;
    v->rawlen = (size_t)n;
    ntr_payload_skip(c, (size_t)n);
    return 0;
  case DNT_TYPE_COUNTED:
    if (sibling_count(d, f, sib, nsib, &n)) return d->rc;
    if (!f->element) return fail(d, NTR_EFORMAT, "field '%s': an array without an element type", cur_name(d));
    if (n > DNT_FIELDS_MAX_VALUES)
      return fail(d, NTR_ELIMIT, "field '%s': %llu elements, more than %u", cur_name(d), (unsigned long long)n,
                  DNT_FIELDS_MAX_VALUES);
    v->kind = DNT_VALUE_ARRAY;
    v->count = (uint32_t)n;
    return elements(d, f, (uint32_t)n, depth + 1);
  default: return 1;
  }
}

/* The fields of one level (the payload's, an object's), each knowing its earlier siblings. */
static int level(struct dec *d, const ntr_field *fields, uint32_t nfields, uint32_t depth) {
  size_t *sib = NULL;
  if (d->layout && nfields && !(sib = malloc(nfields * sizeof *sib))) return fail(d, NTR_ENOMEM, "out of memory");
  for (uint32_t k = 0; k < nfields && !d->rc; k++) {
    size_t saved = d->plen;
    if (sib) sib[k] = d->r->nvalues;
    if (path_push(d, fields[k].name, 0, 0) || value(d, &fields[k], fields[k].name, depth, 0, sib, k)) break;
    path_pop(d, saved);
  }
  free(sib);
  return d->rc;
}

static int value(struct dec *d, const ntr_field *f, const char *key, uint32_t depth, uint32_t index, const size_t *sib,
                 uint32_t nsib) {
  ntr_payload *c = &d->c;
  if (depth > MAX_NESTING) return fail(d, NTR_EFORMAT, "field '%s': nested deeper than %d", cur_name(d), MAX_NESTING);
  dnt_value *v = add(d, 0, f, key, depth, index);
  if (!v) return d->rc;
  size_t vi = d->r->nvalues - 1, start = pos(d);
  /* `v` may move when the array grows: re-fetch by index after nested adds */
  switch (f->type) {
  case NTR_TYPE_OBJECT:
    v->kind = DNT_VALUE_OBJECT;
    v->count = f->nfields;
    if (level(d, f->fields, f->nfields, depth + 1)) return d->rc;
    break;
  case NTR_TYPE_ARRAY:
  case NTR_TYPE_FIXED_ARRAY: {
    uint32_t count = f->fixed_count;
    if (!f->element) return fail(d, NTR_EFORMAT, "field '%s': an array without an element type", cur_name(d));
    if (f->type == NTR_TYPE_ARRAY) {
      uint16_t n16;
      if (ntr_payload_u16(c, &n16)) return short_payload(d, f, 2);
      count = n16;
    }
    if (f->element->type == NTR_TYPE_CHAR) { /* a char[]: one string, as TraceEvent shows it */
      if (utf16_units(d, f, vi, count)) return d->rc;
      d->r->values[vi].rawlen = pos(d) - start;
      return 0; /* a string: no end marker */
    }
    v->kind = DNT_VALUE_ARRAY;
    v->count = count;
    if (elements(d, f, count, depth + 1)) return d->rc;
    break;
  }
  case NTR_TYPE_STRING: {
    ntr_payload probe = *c;
    size_t need;
    if (ntr_payload_utf16z(&probe, NULL, 0, &need))
      return fail(d, NTR_ETRUNCATED, "field '%s' (String) at payload byte %zu: no terminating NUL before the payload's end",
                  cur_name(d), pos(d));
    if (text_room(d, need + 1)) return d->rc;
    dnt_record *r = d->r;
    ntr_payload_utf16z(c, r->text + r->text_len, need + 1, NULL);
    r->offs[NOFF * vi + 2] = r->text_len;
    r->values[vi].slen = need;
    r->text_len += need + 1;
    v->kind = DNT_VALUE_STRING;
    break;
  }
  case NTR_TYPE_CHAR:
  case NTR_TYPE_UTF8_CHAR: {
    char s[4];
    size_t n;
    if (f->type == NTR_TYPE_CHAR) {
      uint16_t u;
      if (ntr_payload_u16(c, &u)) return short_payload(d, f, 2);
      v->u = u;
      utf8_encode(u >= 0xd800 && u <= 0xdfff ? 0xfffd : u, s, &n);
    } else {
      uint8_t u;
      if (ntr_payload_u8(c, &u)) return short_payload(d, f, 1);
      v->u = u;
      utf8_encode(u < 0x80 ? u : 0xfffd, s, &n);
    }
    v->kind = DNT_VALUE_STRING;
    if (set_text(d, s, n)) return d->rc;
    break;
  }
  case NTR_TYPE_GUID: {
    char s[37];
    if (ntr_payload_left(c) < 16) return short_payload(d, f, 16);
    dnt_format_guid(c->cur, s);
    ntr_payload_skip(c, 16);
    v->kind = DNT_VALUE_STRING;
    if (set_text(d, s, 36)) return d->rc;
    break;
  }
  case NTR_TYPE_DATETIME: {
    char s[40];
    uint64_t ft;
    if (ntr_payload_u64(c, &ft)) return short_payload(d, f, 8);
    v->u = ft;
    v->kind = DNT_VALUE_STRING;
    dnt_format_filetime(ft, s);
    if (set_text(d, s, strlen(s))) return d->rc;
    break;
  }
  case NTR_TYPE_DECIMAL: {
    char s[48];
    if (ntr_payload_left(c) < 16) return short_payload(d, f, 16);
    if (format_decimal(c->cur, s))
      return fail(d, NTR_EFORMAT, "field '%s' at payload byte %zu: not a Decimal (bad flags)", cur_name(d), pos(d));
    ntr_payload_skip(c, 16);
    v->kind = DNT_VALUE_STRING;
    if (set_text(d, s, strlen(s))) return d->rc;
    break;
  }
  case NTR_TYPE_RELLOC:
  case NTR_TYPE_DATALOC: {
    /* u32: high 16 bits the size, low 16 the offset: from the end of this field (RelLoc, as in
     * the kernel's __rel_loc) or from the payload's start (DataLoc) */
    uint32_t w;
    if (ntr_payload_u32(c, &w)) return short_payload(d, f, 4);
    size_t size = w >> 16, off = (w & 0xffff) + (f->type == NTR_TYPE_RELLOC ? pos(d) : 0);
    if (off > d->len || size > d->len - off)
      return fail(d, NTR_EFORMAT, "field '%s' (%s): %zu bytes at payload byte %zu lie outside the %zu-byte payload",
                  cur_name(d), dnt_type_name(f->type), size, off, d->len);
    v->kind = DNT_VALUE_BYTES;
    v->u = w;
    v->raw = d->base + off;
    v->rawlen = size;
    return 0;
  }
  default:
    if (d->layout && f->type >= DNT_TYPE_POINTER && f->type <= DNT_TYPE_COUNTED) {
      if (layout_value(d, f, v, vi, depth, sib, nsib)) return d->rc;
      if (f->type == DNT_TYPE_BINARY) return 0; /* rawlen set: the bytes, not their place */
      break;
    }
    if (!ntr_field_fixed_size(f) && f->type != NTR_TYPE_VARINT && f->type != NTR_TYPE_VARUINT)
      return fail(d, NTR_EFORMAT, "field '%s' has type code %u, which has no known size", cur_name(d), f->type);
    if (scalar(d, f, v)) return d->rc;
    break;
  }
  dnt_record *r = d->r;
  r->values[vi].rawlen = pos(d) - start;
  if (f->type == NTR_TYPE_OBJECT || f->type == NTR_TYPE_ARRAY || f->type == NTR_TYPE_FIXED_ARRAY ||
      (d->layout && f->type == DNT_TYPE_COUNTED)) {
    dnt_value *e = add(d, DNT_VALUE_END, f, key, depth, index);
    if (!e) return d->rc;
  }
  return 0;
}

/* Offsets to pointers, for every value added so far. */
static void fix_up(dnt_record *r) {
  for (size_t k = 0; k < r->nvalues; k++) {
    const size_t *o = r->offs + NOFF * k;
    r->values[k].name = r->text + o[0];
    r->values[k].key = r->text + o[1];
    r->values[k].s = o[2] == (size_t)-1 ? NULL : r->text + o[2];
  }
}

static int decode(dnt_record *r, const ntr_field *fields, uint32_t nfields, int layout, uint32_t ptr,
                  const uint8_t *payload, size_t len) {
  struct dec d;
  memset(&d, 0, sizeof d);
  d.layout = layout;
  d.ptr = ptr == 4 ? 4 : 8;
  d.r = r;
  d.base = payload;
  d.len = payload ? len : 0;
  ntr_payload_init(&d.c, payload, d.len);
  r->nvalues = 0;
  r->text_len = 0;
  r->trailing = 0;
  r->err[0] = '\0';
  level(&d, fields, nfields, 0);
  if (!d.rc) r->trailing = ntr_payload_left(&d.c);
  while (r->nvalues && r->values[r->nvalues - 1].kind == 0) r->nvalues--; /* the one that failed */
  fix_up(r);
  free(d.path);
  return d.rc;
}

int dnt_record_decode(dnt_record *r, const ntr_field *fields, uint32_t nfields, const uint8_t *payload, size_t len) {
  return decode(r, fields, nfields, 0, 8, payload, len);
}

int dnt_record_decode_layout(dnt_record *r, const ntr_field *fields, uint32_t nfields, uint32_t pointer_size,
                             const uint8_t *payload, size_t len) {
  return decode(r, fields, nfields, 1, pointer_size, payload, len);
}

int dnt_record_decode_event(dnt_record *r, const ntr_event *ev) {
  if (!ev->metadata) {
    r->nvalues = 0;
    r->trailing = ev->payload_size;
    snprintf(r->err, sizeof r->err, "metadata id %u was never defined", ev->metadata_id);
    return NTR_EINVAL;
  }
  return dnt_record_decode(r, ev->metadata->fields, ev->metadata->nfields, ev->payload, ev->payload_size);
}

const dnt_value *dnt_record_get(const dnt_record *r, const char *name) {
  for (size_t k = 0; k < r->nvalues; k++)
    if (r->values[k].kind != DNT_VALUE_END && strcmp(r->values[k].name, name) == 0) return &r->values[k];
  return NULL;
}

const char *dnt_record_str(const dnt_record *r, const char *name) {
  const dnt_value *v = dnt_record_get(r, name);
  return v && v->kind == DNT_VALUE_STRING ? v->s : NULL;
}

int dnt_record_num(const dnt_record *r, const char *name, double *out) {
  const dnt_value *v = dnt_record_get(r, name);
  if (!v) return -1;
  switch (v->kind) {
  case DNT_VALUE_INT: *out = (double)v->i; return 0;
  case DNT_VALUE_UINT: *out = (double)v->u; return 0;
  case DNT_VALUE_FLOAT: *out = v->f; return 0;
  case DNT_VALUE_BOOL: *out = v->b; return 0;
  default: return -1;
  }
}
