/* Strings a target or a trace chose (method and type names, exception messages, thread names, a
 * command line), made safe for a terminal: the one set of rules for every text view. */
#include <stdio.h>
#include <string.h>

#include "dnt-trace.h"

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 when p does not start one. Strict
 * (no overlong forms, no surrogates): a lenient terminal could read E0 82 9B as the C1 CSI. */
static size_t utf8_len(const unsigned char *p) {
  size_t n = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
         : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) || (p[0] == 0xf0 && p[1] < 0x90) ||
      (p[0] == 0xf4 && p[1] > 0x8f))
    return 0;
  return n;
}

/* The character at p (not NUL) as printed: into piece (8 bytes), its length; *used: the bytes of
 * p it stands for. */
static size_t escape_one(const unsigned char *p, char piece[8], size_t *used) {
  size_t n = utf8_len(p);
  *used = 1;
  if (*p == '\n' || *p == '\r' || *p == '\t') {
    piece[0] = '\\';
    piece[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
    return 2;
  }
  if (*p < 0x20 || *p == 0x7f || n == 0) return (size_t)snprintf(piece, 8, "\\x%02x", *p);
  if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* C1: some terminals' 8-bit CSI and OSC */
    *used = 2;
    return (size_t)snprintf(piece, 8, "\\u%04x", p[1]);
  }
  memcpy(piece, p, n);
  *used = n;
  return n;
}

size_t dnt_text_escape(char *out, size_t cap, const char *s) {
  size_t need = 0, at = 0;
  int cut = 0;
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    char piece[8];
    size_t used, n = escape_one(p, piece, &used);
    p += used;
    if (!cut && at + n < cap) {
      memcpy(out + at, piece, n);
      at += n;
    } else {
      cut = 1; /* a piece never splits: out ends at a whole character or escape */
    }
    need += n;
  }
  if (cap) out[at] = '\0';
  return need;
}

void dnt_text_put(FILE *fp, const char *s) {
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    char piece[8];
    size_t used, n = escape_one(p, piece, &used);
    fwrite(piece, 1, n, fp);
    p += used;
  }
}

void dnt_text_put_quoted(FILE *fp, const char *s) {
  fputc('"', fp);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    char piece[8];
    size_t used, n;
    if (*p == '"' || *p == '\\') {
      piece[0] = '\\';
      piece[1] = (char)*p;
      n = 2, used = 1;
    } else {
      n = escape_one(p, piece, &used);
    }
    fwrite(piece, 1, n, fp);
    p += used;
  }
  fputc('"', fp);
}
