/* An exception's message with what differs between throws of one place folded (dnt-analyze.h):
 * "order 1003 is not in a state to ship" and "order 1007 ..." are one message, "order {n} ...". */
#include <ctype.h>
#include <string.h>

#include "dnt-analyze.h"

static int word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* The length of a GUID at s (8-4-4-4-12 hex digits), else 0. */
static size_t guid_len(const char *s) {
  static const int groups[] = {8, 4, 4, 4, 12};
  size_t n = 0;
  for (int g = 0; g < 5; g++) {
    for (int i = 0; i < groups[g]; i++, n++)
      if (!isxdigit((unsigned char)s[n])) return 0;
    if (g < 4 && s[n++] != '-') return 0;
  }
  return word_char(s[n]) ? 0 : n;
}

/* The length of a path at s ("/var/x", "C:\x"), else 0: up to the next space, quote or bracket. */
static size_t path_len(const char *s) {
  int posix = s[0] == '/' && (isalnum((unsigned char)s[1]) || s[1] == '.' || s[1] == '_');
  int drive = isalpha((unsigned char)s[0]) && s[1] == ':' && s[2] == '\\';
  if (!posix && !drive) return 0;
  size_t n = 0;
  while (s[n] && !isspace((unsigned char)s[n]) && !strchr("'\"()[]{}<>,;", s[n])) n++;
  while (n && strchr(".:", s[n - 1])) n--; /* the sentence's own punctuation */
  return n;
}

/* The kind of the word at s (its length in *n): 'n' a number (digits, with '.' or ',' between
 * digits), 'x' 0x... or a hex id of 8 digits or more with a digit in it, 0 a word to keep. */
static int number_kind(const char *s, size_t *n) {
  size_t len = 0;
  while (word_char(s[len])) len++;
  *n = len;
  if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    for (size_t i = 2; i < len; i++)
      if (!isxdigit((unsigned char)s[i])) return 0;
    return 'x';
  }
  size_t digits = 0, hex = 0;
  for (size_t i = 0; i < len; i++) digits += isdigit((unsigned char)s[i]) != 0, hex += isxdigit((unsigned char)s[i]) != 0;
  if (digits == len) { /* 3.14, 1,234,567 */
    while ((s[len] == '.' || s[len] == ',') && isdigit((unsigned char)s[len + 1])) {
      len++;
      while (isdigit((unsigned char)s[len])) len++;
    }
    *n = len;
    return 'n';
  }
  return hex == len && len >= 8 && digits ? 'x' : 0;
}

void dnt_exc_fold_message(const char *message, char *out, size_t cap) {
  size_t o = 0;
  if (!cap) return;
  for (const char *s = message; *s && o + 1 < cap;) {
    int at_start = s == message || !word_char(s[-1]);
    size_t n = 0;
    const char *put = NULL;
    if (at_start && (n = guid_len(s))) {
      put = "{guid}";
    } else if ((s == message || strchr(" \t'\"(=:", s[-1])) && (n = path_len(s))) {
      put = "{path}";
    } else if (at_start && word_char(*s)) {
      int kind = number_kind(s, &n);
      put = kind == 'n' ? "{n}" : kind == 'x' ? "{hex}" : NULL;
    }
    if (!put) {
      if (!n) n = 1; /* a character, or a word kept as it is */
      size_t room = cap - 1 - o;
      if (n > room) n = room;
      memcpy(out + o, s, n);
      o += n;
      s += n;
      continue;
    }
    size_t len = strlen(put);
    if (o + len >= cap) break;
    memcpy(out + o, put, len);
    o += len;
    s += n;
  }
  out[o] = '\0';
}
