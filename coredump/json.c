/* json.c: a JSON text read into a tree (core-int.h). The text is copied once; strings are cut in
 * place in the copy (their closing quote becomes a NUL; \" and \\ are read, other escapes kept as
 * written: the descriptor's names are plain ASCII). A recursive descent with a depth bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define MAX_DEPTH 32
#define MAX_NODES 1000000

struct reader {
  struct json_tree *t;
  char *p, *end;
  char *err;
  size_t cap;
};

static int fail(struct reader *r, const char *what) {
  snprintf(r->err, r->cap, "the runtime's descriptor is not JSON: %s at byte %zu", what,
           (size_t)(r->p - r->t->text));
  return -1;
}

static void blanks(struct reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int32_t node(struct reader *r, enum json_kind kind) {
  struct json_tree *t = r->t;
  if (t->n == MAX_NODES) return -1;
  if (t->n == t->cap) {
    size_t k = t->cap ? t->cap * 2 : 256;
    struct json *v = realloc(t->v, k * sizeof *v);
    if (!v) return -1;
    t->v = v, t->cap = k;
  }
  t->v[t->n] = (struct json){kind, NULL, NULL, 0, -1, -1};
  return (int32_t)t->n++;
}

/* A string at r->p (its opening quote): cut in place, its start returned (NULL: a failure). */
static const char *string(struct reader *r) {
  char *s = ++r->p, *w = s;
  while (r->p < r->end && *r->p != '"') {
    if (*r->p == '\\' && r->p + 1 < r->end && (r->p[1] == '"' || r->p[1] == '\\')) r->p++;
    else if ((unsigned char)*r->p < 0x20) return NULL;
    *w++ = *r->p++;
  }
  if (r->p >= r->end) return NULL;
  r->p++;
  *w = '\0'; /* w is before the closing quote or at it */
  return s;
}

static int32_t value(struct reader *r, int depth);

/* Members or elements until close, linked as children of node i. */
static int children(struct reader *r, int32_t i, char close, int depth) {
  int32_t last = -1;
  r->p++;
  blanks(r);
  if (r->p < r->end && *r->p == close) return r->p++, 0;
  for (;;) {
    const char *key = NULL;
    blanks(r);
    if (close == '}') {
      if (r->p >= r->end || *r->p != '"' || !(key = string(r))) return fail(r, "a member's name expected");
      blanks(r);
      if (r->p >= r->end || *r->p != ':') return fail(r, "':' expected");
      r->p++;
    }
    int32_t c = value(r, depth + 1);
    if (c < 0) return -1;
    r->t->v[c].key = key;
    if (last < 0) r->t->v[i].child = c;
    else r->t->v[last].next = c;
    last = c;
    blanks(r);
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      continue;
    }
    if (r->p < r->end && *r->p == close) return r->p++, 0;
    return fail(r, close == '}' ? "',' or '}' expected" : "',' or ']' expected");
  }
}

static int32_t value(struct reader *r, int depth) {
  if (depth > MAX_DEPTH) return fail(r, "nested too deep");
  blanks(r);
  if (r->p >= r->end) return fail(r, "a value expected");
  char ch = *r->p;
  int32_t i;
  if (ch == '{' || ch == '[') {
    if ((i = node(r, ch == '{' ? JSON_OBJECT : JSON_ARRAY)) < 0) return fail(r, "too many values");
    return children(r, i, ch == '{' ? '}' : ']', depth) == 0 ? i : -1;
  }
  if (ch == '"') {
    if ((i = node(r, JSON_STRING)) < 0) return fail(r, "too many values");
    const char *s = string(r);
    if (!s) return fail(r, "a string that does not end");
    r->t->v[i].text = s;
    return i;
  }
  static const struct {
    const char *word;
    enum json_kind kind;
    double v;
  } words[] = {{"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
  for (size_t k = 0; k < 3; k++) {
    size_t len = strlen(words[k].word);
    if ((size_t)(r->end - r->p) >= len && memcmp(r->p, words[k].word, len) == 0) {
      if ((i = node(r, words[k].kind)) < 0) return fail(r, "too many values");
      r->t->v[i].number = words[k].v;
      r->p += len;
      return i;
    }
  }
  /* a number: the copy ends in a NUL, so strtod stops there at the latest */
  char *after;
  double v = strtod(r->p, &after);
  if (after == r->p || after > r->end) return fail(r, "a value expected");
  if ((i = node(r, JSON_NUMBER)) < 0) return fail(r, "too many values");
  r->t->v[i].number = v;
  r->p = after;
  return i;
}

int dnt__json_parse(struct json_tree *t, const char *text, size_t n, char *err, size_t cap) {
  memset(t, 0, sizeof *t);
  if (!(t->text = malloc(n + 1))) return snprintf(err, cap, "out of memory"), -1;
  memcpy(t->text, text, n);
  t->text[n] = '\0';
  struct reader r = {t, t->text, t->text + n, err, cap};
  if (value(&r, 0) != 0) return -1; /* the root is node 0 */
  blanks(&r);
  if (r.p != r.end && *r.p != '\0') return fail(&r, "text after the value");
  return 0;
}

void dnt__json_free(struct json_tree *t) {
  free(t->v);
  free(t->text);
  memset(t, 0, sizeof *t);
}

int32_t dnt__json_member(const struct json_tree *t, int32_t i, const char *key) {
  if (i < 0 || (size_t)i >= t->n || t->v[i].kind != JSON_OBJECT) return -1;
  for (int32_t c = t->v[i].child; c >= 0; c = t->v[c].next)
    if (t->v[c].key && strcmp(t->v[c].key, key) == 0) return c;
  return -1;
}
