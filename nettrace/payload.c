/* payload.c: bounds-checked readers for event payloads, UTF-16 to UTF-8, field sizes. */
#include "ntr-int.h"

size_t ntr__utf16_to_utf8(const uint8_t *s, size_t n, char *out, size_t outsz) {
  size_t i, len = 0;
  for (i = 0; i < n; i++) {
    uint32_t cp = ntr__le16(s + 2 * i);
    uint8_t buf[4];
    size_t k, w;
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < n) {
      uint32_t lo = ntr__le16(s + 2 * (i + 1));
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        i++;
      } else {
        cp = 0xfffd;
      }
    } else if (cp >= 0xd800 && cp <= 0xdfff) {
      cp = 0xfffd; /* unpaired surrogate */
    }
    if (cp < 0x80) {
      buf[0] = (uint8_t)cp;
      w = 1;
    } else if (cp < 0x800) {
      buf[0] = (uint8_t)(0xc0 | (cp >> 6));
      buf[1] = (uint8_t)(0x80 | (cp & 0x3f));
      w = 2;
    } else if (cp < 0x10000) {
      buf[0] = (uint8_t)(0xe0 | (cp >> 12));
      buf[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
      buf[2] = (uint8_t)(0x80 | (cp & 0x3f));
      w = 3;
    } else {
      buf[0] = (uint8_t)(0xf0 | (cp >> 18));
      buf[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
      buf[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
      buf[3] = (uint8_t)(0x80 | (cp & 0x3f));
      w = 4;
    }
    if (out && len + w <= outsz)
      for (k = 0; k < w; k++)
        out[len + k] = (char)buf[k];
    else if (out)
      out = NULL; /* stop writing at a character boundary, keep counting */
    len += w;
  }
  return len;
}

void ntr_payload_init(ntr_payload *c, const uint8_t *buf, size_t len) {
  c->cur = buf;
  c->end = buf ? buf + len : buf;
}

size_t ntr_payload_left(const ntr_payload *c) { return (size_t)(c->end - c->cur); }

#define NEED(c, n)               \
  if (ntr_payload_left(c) < (n)) \
    return NTR_ETRUNCATED;

int ntr_payload_u8(ntr_payload *c, uint8_t *v) {
  NEED(c, 1);
  *v = *c->cur++;
  return 0;
}
int ntr_payload_u16(ntr_payload *c, uint16_t *v) {
  NEED(c, 2);
  *v = ntr__le16(c->cur);
  c->cur += 2;
  return 0;
}
int ntr_payload_u32(ntr_payload *c, uint32_t *v) {
  NEED(c, 4);
  *v = ntr__le32(c->cur);
  c->cur += 4;
  return 0;
}
int ntr_payload_u64(ntr_payload *c, uint64_t *v) {
  NEED(c, 8);
  *v = ntr__le64(c->cur);
  c->cur += 8;
  return 0;
}
int ntr_payload_f32(ntr_payload *c, float *v) {
  uint32_t u;
  int rc = ntr_payload_u32(c, &u);
  if (!rc)
    memcpy(v, &u, 4);
  return rc;
}
int ntr_payload_f64(ntr_payload *c, double *v) {
  uint64_t u;
  int rc = ntr_payload_u64(c, &u);
  if (!rc)
    memcpy(v, &u, 8);
  return rc;
}
int ntr_payload_skip(ntr_payload *c, size_t n) {
  NEED(c, n);
  c->cur += n;
  return 0;
}
int ntr_payload_varuint(ntr_payload *c, uint64_t *v) {
  ntr__cur k = {c->cur, c->end};
  int rc = ntr__varu64(&k, v);
  if (rc)
    return rc == -1 ? NTR_ETRUNCATED : NTR_EFORMAT;
  c->cur = k.p;
  return 0;
}
int ntr_payload_varint(ntr_payload *c, int64_t *v) {
  uint64_t u;
  int rc = ntr_payload_varuint(c, &u);
  if (!rc)
    *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
  return rc;
}
int ntr_payload_utf16z(ntr_payload *c, char *out, size_t outsz, size_t *needed) {
  size_t n = 0, max = ntr_payload_left(c) / 2, len;
  while (n < max && (c->cur[2 * n] | c->cur[2 * n + 1]))
    n++;
  if (n == max)
    return NTR_ETRUNCATED;
  len = ntr__utf16_to_utf8(c->cur, n, NULL, 0);
  if (needed)
    *needed = len;
  if (out && outsz) {
    size_t w = ntr__utf16_to_utf8(c->cur, n, out, outsz - 1);
    /* w counts everything; find how much was actually written by re-walking with the cap. */
    if (w > outsz - 1) {
      /* Cut at a character boundary: back up over continuation bytes. */
      size_t cut = outsz - 1;
      size_t wrote = 0, i;
      for (i = 0; i < n && wrote <= cut; i++) {
        size_t one = ntr__utf16_to_utf8(c->cur + 2 * i, 1, NULL, 0);
        uint32_t u = ntr__le16(c->cur + 2 * i);
        if (u >= 0xd800 && u <= 0xdbff && i + 1 < n) {
          one = ntr__utf16_to_utf8(c->cur + 2 * i, 2, NULL, 0);
          if (one == 4)
            i++;
        }
        if (wrote + one > cut)
          break;
        wrote += one;
      }
      out[wrote] = '\0';
    } else {
      out[w] = '\0';
    }
  }
  c->cur += 2 * (n + 1);
  return 0;
}

size_t ntr_field_fixed_size(const ntr_field *f) {
  size_t s = 0, i;
  switch (f->type) {
  case NTR_TYPE_SBYTE: case NTR_TYPE_BYTE: case NTR_TYPE_UTF8_CHAR: case NTR_TYPE_BOOLEAN8:
    return 1;
  case NTR_TYPE_CHAR: case NTR_TYPE_INT16: case NTR_TYPE_UINT16:
    return 2;
  case NTR_TYPE_BOOLEAN: case NTR_TYPE_INT32: case NTR_TYPE_UINT32: case NTR_TYPE_SINGLE:
  case NTR_TYPE_RELLOC: case NTR_TYPE_DATALOC:
    return 4;
  case NTR_TYPE_INT64: case NTR_TYPE_UINT64: case NTR_TYPE_DOUBLE: case NTR_TYPE_DATETIME:
    return 8;
  case NTR_TYPE_DECIMAL: case NTR_TYPE_GUID:
    return 16;
  case NTR_TYPE_OBJECT:
    for (i = 0; i < f->nfields; i++) {
      size_t k = ntr_field_fixed_size(&f->fields[i]);
      if (!k)
        return 0;
      s += k;
    }
    return s;
  case NTR_TYPE_FIXED_ARRAY:
    return f->element ? ntr_field_fixed_size(f->element) * f->fixed_count : 0;
  default:
    return 0;
  }
}
