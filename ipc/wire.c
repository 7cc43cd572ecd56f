/* Little-endian writer, bounds-checked reader, and UTF-8 <-> UTF-16LE for protocol strings. */
#include <string.h>

#include "dsipc-int.h"

static const uint8_t magic[14] = "DOTNET_IPC_V1"; /* 13 letters and the NUL */

void dsipc_buf_init(dsipc_buf *b) { memset(b, 0, sizeof *b); }

void dsipc_buf_release(dsipc_buf *b) {
  dsipc__free(b->data);
  dsipc_buf_init(b);
}

static int reserve(dsipc_buf *b, size_t more) {
  if (b->len + more <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more) cap *= 2;
  uint8_t *p = dsipc__realloc(b->data, cap);
  if (!p) return DSIPC_ENOMEM;
  b->data = p;
  b->cap = cap;
  return 0;
}

int dsipc__buf_append(dsipc_buf *b, const void *p, size_t n) {
  int rc = reserve(b, n);
  if (rc) return rc;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

void dsipc__w_bytes(struct dsipc__writer *w, const void *p, size_t n) {
  if (w->err) return;
  if (w->b->len + n > DSIPC_MAX_MESSAGE + 1) { /* stop growing once it cannot fit anyway */
    w->err = DSIPC_ETOOBIG;
    return;
  }
  if ((w->err = reserve(w->b, n)) != 0) return;
  if (n) memcpy(w->b->data + w->b->len, p, n);
  w->b->len += n;
}

void dsipc__w_u8(struct dsipc__writer *w, uint8_t v) { dsipc__w_bytes(w, &v, 1); }

void dsipc__w_u16(struct dsipc__writer *w, uint16_t v) {
  uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  dsipc__w_bytes(w, b, 2);
}

void dsipc__w_u32(struct dsipc__writer *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  dsipc__w_bytes(w, b, 4);
}

void dsipc__w_u64(struct dsipc__writer *w, uint64_t v) {
  dsipc__w_u32(w, (uint32_t)v);
  dsipc__w_u32(w, (uint32_t)(v >> 32));
}

void dsipc__w_begin(struct dsipc__writer *w, dsipc_buf *b, uint8_t set, uint8_t id) {
  w->b = b;
  w->err = 0;
  b->len = 0;
  dsipc__w_bytes(w, magic, sizeof magic);
  dsipc__w_u16(w, 0); /* size, patched by dsipc__w_end */
  dsipc__w_u8(w, set);
  dsipc__w_u8(w, id);
  dsipc__w_u16(w, 0); /* reserved */
}

int dsipc__w_end(struct dsipc__writer *w) {
  if (!w->err && w->b->len > DSIPC_MAX_MESSAGE) w->err = DSIPC_ETOOBIG;
  if (w->err) {
    w->b->len = 0;
    return w->err;
  }
  w->b->data[14] = (uint8_t)w->b->len;
  w->b->data[15] = (uint8_t)(w->b->len >> 8);
  return 0;
}

void dsipc__w_string(struct dsipc__writer *w, const char *utf8) {
  if (w->err) return;
  if (!utf8 || !*utf8) {
    dsipc__w_u32(w, 0);
    return;
  }
  uint16_t *u = NULL;
  size_t units = 0;
  int rc = dsipc__utf8_to_utf16(utf8, &u, &units);
  if (rc) {
    w->err = rc;
    return;
  }
  if (units + 1 > DSIPC_MAX_MESSAGE) { /* cannot fit in any message */
    dsipc__free(u);
    w->err = DSIPC_ETOOBIG;
    return;
  }
  dsipc__w_u32(w, (uint32_t)units + 1);
  for (size_t i = 0; i < units; i++) dsipc__w_u16(w, u[i]);
  dsipc__w_u16(w, 0);
  dsipc__free(u);
}

int dsipc__r_bytes(struct dsipc__reader *r, void *out, size_t n) {
  if (r->left < n) return DSIPC_EPROTO;
  if (out) memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
  return 0;
}

int dsipc__r_u8(struct dsipc__reader *r, uint8_t *v) { return dsipc__r_bytes(r, v, 1); }

int dsipc__r_u16(struct dsipc__reader *r, uint16_t *v) {
  uint8_t b[2];
  int rc = dsipc__r_bytes(r, b, 2);
  if (!rc) *v = (uint16_t)(b[0] | b[1] << 8);
  return rc;
}

int dsipc__r_u32(struct dsipc__reader *r, uint32_t *v) {
  uint8_t b[4];
  int rc = dsipc__r_bytes(r, b, 4);
  if (!rc) *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
  return rc;
}

int dsipc__r_u64(struct dsipc__reader *r, uint64_t *v) {
  uint32_t lo, hi;
  int rc = dsipc__r_u32(r, &lo);
  if (!rc) rc = dsipc__r_u32(r, &hi);
  if (!rc) *v = (uint64_t)hi << 32 | lo;
  return rc;
}

int dsipc__r_string(struct dsipc__reader *r, char **out) {
  uint32_t count;
  *out = NULL;
  if (dsipc__r_u32(r, &count)) return DSIPC_EPROTO;
  if (count == 0) return 0;
  if (count > DSIPC__MAX_STRING_UNITS || (size_t)count * 2 > r->left) return DSIPC_EPROTO;
  const uint8_t *s = r->p;
  if (s[2 * (count - 1)] != 0 || s[2 * (count - 1) + 1] != 0) return DSIPC_EPROTO;
  int rc = dsipc__utf16le_to_utf8(s, count - 1, out);
  if (rc) return rc;
  r->p += (size_t)count * 2;
  r->left -= (size_t)count * 2;
  return 0;
}

/* Decodes one UTF-8 sequence; -1 on anything malformed (overlong, surrogate, > U+10FFFF). */
static int utf8_next(const unsigned char **s, uint32_t *cp) {
  const unsigned char *p = *s;
  uint32_t c = p[0];
  int len;
  uint32_t min;
  if (c < 0x80) {
    *cp = c;
    *s = p + 1;
    return 0;
  } else if ((c & 0xe0) == 0xc0) {
    len = 2, c &= 0x1f, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3, c &= 0x0f, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4, c &= 0x07, min = 0x10000;
  } else {
    return -1;
  }
  for (int i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) return -1;
    c = c << 6 | (p[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return -1;
  *cp = c;
  *s = p + len;
  return 0;
}

int dsipc__utf8_to_utf16(const char *s, uint16_t **out, size_t *units) {
  size_t n = strlen(s);
  uint16_t *u = dsipc__malloc((n + 1) * sizeof *u); /* never more units than bytes */
  if (!u) return DSIPC_ENOMEM;
  size_t k = 0;
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    uint32_t cp;
    if (utf8_next(&p, &cp) < 0) {
      dsipc__free(u);
      return DSIPC_EINVAL;
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      u[k++] = (uint16_t)(0xd800 | cp >> 10);
      u[k++] = (uint16_t)(0xdc00 | (cp & 0x3ff));
    } else {
      u[k++] = (uint16_t)cp;
    }
  }
  *out = u;
  *units = k;
  return 0;
}

int dsipc__utf16le_to_utf8(const uint8_t *p, size_t units, char **out) {
  char *s = dsipc__malloc(units * 3 + 1); /* a unit makes at most 3 bytes; a pair makes 4 from 2 */
  if (!s) return DSIPC_ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < units; i++) {
    uint32_t c = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
    if (c == 0) goto bad; /* a NUL inside would cut the string short when used */
    if (c >= 0xd800 && c <= 0xdbff) {
      if (i + 1 >= units) goto bad;
      uint32_t lo = (uint32_t)p[2 * i + 2] | (uint32_t)p[2 * i + 3] << 8;
      if (lo < 0xdc00 || lo > 0xdfff) goto bad;
      c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      goto bad;
    }
    if (c < 0x80) {
      s[k++] = (char)c;
    } else if (c < 0x800) {
      s[k++] = (char)(0xc0 | c >> 6);
      s[k++] = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      s[k++] = (char)(0xe0 | c >> 12);
      s[k++] = (char)(0x80 | ((c >> 6) & 0x3f));
      s[k++] = (char)(0x80 | (c & 0x3f));
    } else {
      s[k++] = (char)(0xf0 | c >> 18);
      s[k++] = (char)(0x80 | ((c >> 12) & 0x3f));
      s[k++] = (char)(0x80 | ((c >> 6) & 0x3f));
      s[k++] = (char)(0x80 | (c & 0x3f));
    }
  }
  s[k] = '\0';
  *out = s;
  return 0;
bad:
  dsipc__free(s);
  return DSIPC_EPROTO;
}
