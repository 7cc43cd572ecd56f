/* The case-file parser (format: tests/unit/ipc/cases/README.md). Test code, but it reads files
 * anyone may edit: every line, token, number and file is bounded, and a bad line is an error
 * naming the file and line, so a typo in a case never turns into a test that checks nothing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake-case.h"

#define MAX_LINE 8192          /* bytes of one line */
#define MAX_TOKENS 1024        /* tokens of one line */
#define MAX_DATA (64u << 20)   /* bytes of one send or expect (a `file` included) */
#define MAX_CASE (1u << 20)    /* bytes of one case file */
#define MAX_INCLUDE_DEPTH 4

const char *fake_case_dir(void) {
  static char dir[4096];
  const char *src = getenv("DNT_SRCDIR");
  if (src && *src)
    snprintf(dir, sizeof dir, "%s/tests/unit/ipc/cases", src);
  else
    snprintf(dir, sizeof dir, "%s", DNT_FAKE_CASES_DIR);
  return dir;
}

/* ---- parser state and errors ---- */

struct token {
  char *s;    /* into the line copy (quoted: unescaped, may hold NULs) */
  size_t n;
  int quoted;
};

struct parse {
  fake_case *c;
  const char *file, *dir;
  int file_index;       /* file in c->files */
  int line, depth;
  char *err;
  size_t errlen;
};

static int fail(struct parse *p, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(p->err, p->errlen, "%s:%d: %s", p->file, p->line, what);
  return -1;
}

/* ---- growing byte buffers, bounded ---- */

struct bytes {
  uint8_t *b;
  size_t n, cap;
};

static int put(struct parse *p, struct bytes *d, const void *src, size_t n) {
  if (n > MAX_DATA - d->n) return fail(p, "more than %u bytes in one message", MAX_DATA);
  if (d->n + n > d->cap) {
    size_t cap = d->cap ? d->cap : 64;
    while (cap < d->n + n) cap *= 2;
    uint8_t *nb = realloc(d->b, cap);
    if (!nb) return fail(p, "out of memory");
    d->b = nb;
    d->cap = cap;
  }
  if (n) memcpy(d->b + d->n, src, n);
  d->n += n;
  return 0;
}

static int put_le(struct parse *p, struct bytes *d, uint64_t v, int width) {
  uint8_t le[8];
  for (int i = 0; i < width; i++) le[i] = (uint8_t)(v >> (8 * i));
  return put(p, d, le, (size_t)width);
}

/* ---- tokens ---- */

static int hexval(int ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Splits line (modified in place) into tokens: blanks separate, '#' outside quotes ends the
 * line, "..." is one token with \\ \" \n \r \t \a \b \0 and \xHH (exactly two digits). */
static int tokenize(struct parse *p, char *line, struct token *t, int *nt) {
  *nt = 0;
  char *r = line;
  for (;;) {
    while (*r == ' ' || *r == '\t' || *r == '\r') r++;
    if (!*r || *r == '#') return 0;
    if (*nt == MAX_TOKENS) return fail(p, "more than %d words on a line", MAX_TOKENS);
    struct token *k = &t[(*nt)++];
    if (*r != '"') {
      k->s = r;
      while (*r && *r != ' ' && *r != '\t' && *r != '\r' && *r != '#') r++;
      k->n = (size_t)(r - k->s);
      k->quoted = 0;
      if (*r == '#') {
        *r = '\0';
        return 0;
      }
      if (*r) *r++ = '\0';
      continue;
    }
    char *w = ++r; /* unescaped in place: never longer than the source */
    k->s = w;
    k->quoted = 1;
    for (;;) {
      if (!*r) return fail(p, "a string without its closing quote");
      if (*r == '"') break;
      if (*r != '\\') {
        *w++ = *r++;
        continue;
      }
      r++;
      switch (*r) {
      case '\\': *w++ = '\\'; break;
      case '"': *w++ = '"'; break;
      case 'n': *w++ = '\n'; break;
      case 'r': *w++ = '\r'; break;
      case 't': *w++ = '\t'; break;
      case 'a': *w++ = '\a'; break;
      case 'b': *w++ = '\b'; break;
      case '0': *w++ = '\0'; break;
      case 'x': {
        int hi = hexval(r[1]), lo = hi < 0 ? -1 : hexval(r[2]);
        if (lo < 0) return fail(p, "\\x wants two hex digits");
        *w++ = (char)(hi << 4 | lo);
        r += 2;
        break;
      }
      default: return fail(p, "unknown escape '\\%c'", *r ? *r : ' ');
      }
      r++;
    }
    k->n = (size_t)(w - k->s);
    r++; /* the closing quote */
    if (*r && *r != ' ' && *r != '\t' && *r != '\r' && *r != '#') return fail(p, "a string runs into '%c'", *r);
  }
}

static int is(const struct token *k, const char *word) {
  return !k->quoted && k->n == strlen(word) && !memcmp(k->s, word, k->n);
}

/* A byte in hex ("04", "ff"), or `*` when any is allowed. */
static int parse_byte(struct parse *p, const struct token *k, int any_ok, const char *what, int *out) {
  if (any_ok && is(k, "*")) {
    *out = FAKE_ANY;
    return 0;
  }
  int hi = k->n == 2 && !k->quoted ? hexval(k->s[0]) : -1, lo = hi < 0 ? -1 : hexval(k->s[1]);
  if (lo < 0)
    return fail(p, "%s '%.*s' is not a byte in hex (two digits%s)", what, (int)k->n, k->s, any_ok ? " or *" : "");
  *out = hi << 4 | lo;
  return 0;
}

/* A count: decimal, or 0x hex; at most max. */
static int parse_num(struct parse *p, const struct token *k, uint64_t max, const char *what, uint64_t *out) {
  if (k->quoted || !k->n || k->s[0] == '-' || k->s[0] == '+')
    return fail(p, "%s '%.*s' is not a number", what, (int)k->n, k->s);
  char *end;
  errno = 0;
  unsigned long long v = strtoull(k->s, &end, 0);
  if (errno || end != k->s + k->n) return fail(p, "%s '%.*s' is not a number", what, (int)k->n, k->s);
  if (v > max) return fail(p, "%s %llu is more than %llu", what, v, (unsigned long long)max);
  *out = v;
  return 0;
}

/* Bytes in hex, two digits each, written together or apart ("4e65" or "4e 65"). */
static int is_hex(const struct token *k) {
  if (k->quoted || !k->n || k->n % 2) return 0;
  for (size_t j = 0; j < k->n; j++)
    if (hexval(k->s[j]) < 0) return 0;
  return 1;
}

/* ---- data: hex, text, utf16, u8..u64, file ---- */

static int read_file(struct parse *p, const char *name, struct bytes *d) {
  char path[4200];
  if (name[0] == '/')
    snprintf(path, sizeof path, "%s", name);
  else
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
  FILE *fp = fopen(path, "rb");
  if (!fp) return fail(p, "cannot open '%s': %s", path, strerror(errno));
  uint8_t buf[65536];
  size_t n;
  int rc = 0;
  while (rc == 0 && (n = fread(buf, 1, sizeof buf, fp)) > 0) rc = put(p, d, buf, n);
  if (rc == 0 && ferror(fp)) rc = fail(p, "cannot read '%s'", path);
  fclose(fp);
  return rc;
}

/* Appends the data forms t[i..nt) to d (pid patches into a). `...` ends it when prefix_ok. */
static int parse_data(struct parse *p, struct token *t, int i, int nt, struct bytes *d, struct fake_action *a,
                      int prefix_ok) {
  if (i >= nt) return fail(p, "no data (hex, text, utf16, u8, u16, u32, u64, file)");
  while (i < nt) {
    struct token *k = &t[i++];
    if (is(k, "...")) {
      if (!prefix_ok || i != nt) return fail(p, "'...' only ends what a request's payload begins with");
      a->prefix = 1;
      return 0;
    }
    if (is(k, "hex")) {
      int any = 0;
      for (; i < nt && is_hex(&t[i]); i++) {
        for (size_t j = 0; j < t[i].n; j += 2) {
          uint8_t b = (uint8_t)(hexval(t[i].s[j]) << 4 | hexval(t[i].s[j + 1]));
          if (put(p, d, &b, 1)) return -1;
        }
        any = 1;
      }
      if (!any) return fail(p, "'hex' with no bytes after it");
      continue;
    }
    if (!(is(k, "text") || is(k, "utf16") || is(k, "u8") || is(k, "u16") || is(k, "u32") || is(k, "u64") ||
          is(k, "file")))
      return fail(p, "'%.*s' is no data form (hex, text, utf16, u8, u16, u32, u64, file)", (int)k->n, k->s);
    if (i >= nt) return fail(p, "'%.*s' wants a value after it", (int)k->n, k->s);
    struct token *v = &t[i++];
    if (is(k, "text")) {
      if (!v->quoted) return fail(p, "text wants a \"quoted string\"");
      if (put(p, d, v->s, v->n)) return -1;
    } else if (is(k, "utf16")) {
      /* count of UTF-16 units with the NUL, the units, the NUL: each byte one unit (Latin-1) */
      if (!v->quoted) return fail(p, "utf16 wants a \"quoted string\"");
      if (put_le(p, d, v->n + 1, 4)) return -1;
      for (size_t j = 0; j <= v->n; j++) {
        uint8_t unit[2] = {j < v->n ? (uint8_t)v->s[j] : 0, 0};
        if (put(p, d, unit, 2)) return -1;
      }
    } else if (is(k, "u8") || is(k, "u16") || is(k, "u32") || is(k, "u64")) {
      int width = k->s[1] == '8' ? 1 : k->s[1] == '1' ? 2 : k->s[1] == '3' ? 4 : 8;
      if (is(v, "pid")) {
        if (width < 4) return fail(p, "pid wants u32 or u64");
        if (a->npatch == FAKE_MAX_PATCHES) return fail(p, "more than %d pids in one message", FAKE_MAX_PATCHES);
        a->patch[a->npatch++] = (struct fake_patch){d->n, width};
        if (put_le(p, d, 0, width)) return -1;
        continue;
      }
      uint64_t max = width == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * width)) - 1, n;
      if (parse_num(p, v, max, k->s, &n) || put_le(p, d, n, width)) return -1;
    } else { /* file */
      char name[4096];
      if (v->n >= sizeof name || memchr(v->s, '\0', v->n)) return fail(p, "a file name too long or with a NUL");
      memcpy(name, v->s, v->n);
      name[v->n] = '\0';
      if (read_file(p, name, d)) return -1;
    }
  }
  return 0;
}

/* ---- sections and actions ---- */

static struct fake_section *cur(struct parse *p) { return p->c->nsecs ? &p->c->secs[p->c->nsecs - 1] : NULL; }

static int new_section(struct parse *p, int on, int set, int id) {
  fake_case *c = p->c;
  if (c->nsecs && c->on != on) return fail(p, "a case has 'connection' sections or 'on' sections, not both");
  c->on = on;
  if (c->nsecs == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    struct fake_section *ns = realloc(c->secs, cap * sizeof *ns);
    if (!ns) return fail(p, "out of memory");
    c->secs = ns;
    c->cap = cap;
  }
  c->secs[c->nsecs++] = (struct fake_section){.file = p->file_index, .line = p->line, .on = on, .set = set, .id = id};
  return 0;
}

static struct fake_action *new_action(struct parse *p, enum fake_op op) {
  struct fake_section *s = cur(p);
  if (!s) {
    fail(p, "an action before any 'connection' or 'on' line");
    return NULL;
  }
  if (s->nacts) {
    enum fake_op last = s->acts[s->nacts - 1].op;
    if (last == FAKE_CLOSE || last == FAKE_HANG || last == FAKE_EXPECT_CLOSE) {
      fail(p, "nothing can follow 'close', 'hang' or 'expect close' on a connection");
      return NULL;
    }
  }
  if (s->nacts == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 8;
    struct fake_action *na = realloc(s->acts, cap * sizeof *na);
    if (!na) {
      fail(p, "out of memory");
      return NULL;
    }
    s->acts = na;
    s->cap = cap;
  }
  struct fake_action *a = &s->acts[s->nacts++];
  *a = (struct fake_action){.op = op, .file = p->file_index, .line = p->line};
  return a;
}

/* The last action, when it is a send that `payload` may extend. */
static struct fake_action *last_send(struct parse *p) {
  struct fake_section *s = cur(p);
  if (!s || !s->nacts || s->acts[s->nacts - 1].op != FAKE_SEND) return NULL;
  return &s->acts[s->nacts - 1];
}

static int append_data(struct parse *p, struct fake_action *a, struct token *t, int i, int nt, int prefix_ok) {
  struct bytes d = {a->bytes, a->n, a->n};
  int rc = parse_data(p, t, i, nt, &d, a, prefix_ok);
  a->bytes = d.b;
  a->n = d.n;
  return rc;
}

static int parse_text(struct parse *p, const char *text);

static int include(struct parse *p, const struct token *k) {
  if (p->depth >= MAX_INCLUDE_DEPTH) return fail(p, "includes nested more than %d deep", MAX_INCLUDE_DEPTH);
  if (!k->n || k->quoted || memchr(k->s, '/', k->n)) return fail(p, "include wants a case file's name (no '/')");
  char path[4200];
  snprintf(path, sizeof path, "%s/%.*s", p->dir, (int)k->n, k->s);
  FILE *fp = fopen(path, "rb");
  if (!fp) return fail(p, "cannot open '%s': %s", path, strerror(errno));
  char *text = malloc(MAX_CASE + 1);
  size_t n = text ? fread(text, 1, MAX_CASE + 1, fp) : 0;
  fclose(fp);
  if (!text) return fail(p, "out of memory");
  if (n > MAX_CASE) {
    free(text);
    return fail(p, "'%s' is more than %u bytes", path, MAX_CASE);
  }
  text[n] = '\0';
  struct parse sub = *p;
  char file[64];
  snprintf(file, sizeof file, "%.*s", (int)k->n, k->s);
  sub.file = file;
  sub.line = 0;
  if (p->c->nfiles == FAKE_MAX_FILES) {
    free(text);
    return fail(p, "more than %d files included", FAKE_MAX_FILES);
  }
  sub.file_index = p->c->nfiles;
  snprintf(p->c->files[p->c->nfiles++], sizeof p->c->files[0], "%s", file);
  sub.depth++;
  int rc = parse_text(&sub, text);
  free(text);
  return rc;
}

static int parse_line(struct parse *p, struct token *t, int nt) {
  struct token *k = &t[0];
  struct fake_action *a;
  int set, id;
  uint64_t n, m;
  if (k->quoted) return fail(p, "a line begins with a word, not a string");
  if (is(k, "include")) {
    if (nt != 2) return fail(p, "include NAME");
    return include(p, &t[1]);
  }
  if (is(k, "connection")) {
    if (nt != 1) return fail(p, "'connection' takes nothing after it");
    return new_section(p, 0, 0, 0);
  }
  if (is(k, "on")) {
    if (nt < 3 || (nt > 3 && !is(&t[3], "payload")) || nt == 4) return fail(p, "on SET ID [payload DATA [...]]");
    if (parse_byte(p, &t[1], 1, "set", &set) || parse_byte(p, &t[2], 1, "id", &id)) return -1;
    if (new_section(p, 1, set, id)) return -1;
    if (nt == 3) return 0;
    /* the payload is checked like an expect's, on the request that chose the section */
    if (!(a = new_action(p, FAKE_EXPECT))) return -1;
    a->set = set, a->id = id, a->read_already = 1;
    return append_data(p, a, t, 4, nt, 1);
  }
  if (is(k, "expect")) {
    if (nt == 2 && is(&t[1], "close")) return new_action(p, FAKE_EXPECT_CLOSE) ? 0 : -1;
    if (nt < 3) return fail(p, "expect SET ID [payload DATA [...]], or expect close");
    if (!(a = new_action(p, FAKE_EXPECT))) return -1;
    if (parse_byte(p, &t[1], 1, "set", &a->set) || parse_byte(p, &t[2], 1, "id", &a->id)) return -1;
    if (nt == 3) return 0; /* a bare header: no payload */
    if (!is(&t[3], "payload")) return fail(p, "after expect SET ID comes 'payload', not '%.*s'", (int)t[3].n, t[3].s);
    if (nt == 5 && is(&t[4], "...")) {
      a->prefix = 1; /* any payload */
      return 0;
    }
    return append_data(p, a, t, 4, nt, 1);
  }
  if (is(k, "reply") && nt >= 2 && is(&t[1], "header")) {
    if (nt != 4 && nt != 5) return fail(p, "reply header SET ID [SIZE]");
    if (parse_byte(p, &t[2], 0, "set", &set) || parse_byte(p, &t[3], 0, "id", &id)) return -1;
    if (!(a = new_action(p, FAKE_SEND))) return -1;
    uint8_t h[20] = "DOTNET_IPC_V1";
    h[16] = (uint8_t)set, h[17] = (uint8_t)id;
    if (nt == 5) {
      if (parse_num(p, &t[4], 0xffff, "size", &n)) return -1;
      h[14] = (uint8_t)n, h[15] = (uint8_t)(n >> 8); /* as written: it may lie */
    } else {
      a->size_from_body = 1;
    }
    struct bytes d = {0};
    if (put(p, &d, h, sizeof h)) return -1;
    a->bytes = d.b;
    a->n = d.n;
    return 0;
  }
  if (is(k, "payload")) {
    if (!(a = last_send(p))) return fail(p, "'payload' follows a 'reply' or 'send' line");
    return append_data(p, a, t, 1, nt, 0);
  }
  if (is(k, "reply") || is(k, "send") || is(k, "stream")) {
    if (!(a = new_action(p, FAKE_SEND))) return -1;
    return append_data(p, a, t, 1, nt, 0);
  }
  if (is(k, "garbage")) {
    /* bytes no IPC message nor nettrace stream begins with: readable text, repeated */
    static const char junk[] = "HTTP/1.1 200 OK\r\n\r\nthis is not a nettrace stream at all, just words";
    if (nt != 2 || parse_num(p, &t[1], MAX_DATA, "garbage", &n)) return nt != 2 ? fail(p, "garbage N") : -1;
    if (!(a = new_action(p, FAKE_SEND))) return -1;
    struct bytes d = {0};
    for (uint64_t done = 0; done < n;) {
      size_t take = n - done < sizeof junk - 1 ? (size_t)(n - done) : sizeof junk - 1;
      if (put(p, &d, junk, take)) {
        free(d.b);
        return -1;
      }
      done += take;
    }
    a->bytes = d.b;
    a->n = d.n;
    return 0;
  }
  if (is(k, "send-in-pieces")) {
    if (nt != 2 && !(nt == 4 && is(&t[2], "pause"))) return fail(p, "send-in-pieces N [pause MS]");
    if (parse_num(p, &t[1], MAX_DATA, "piece size", &n)) return -1;
    m = 0;
    if (nt == 4 && parse_num(p, &t[3], 60000, "pause", &m)) return -1;
    if (!(a = new_action(p, FAKE_PIECES))) return -1;
    a->num = (long)n, a->num2 = (long)m;
    return 0;
  }
  if (is(k, "pause")) {
    if (nt != 2 || parse_num(p, &t[1], 600000, "pause", &n)) return nt != 2 ? fail(p, "pause MS") : -1;
    if (!(a = new_action(p, FAKE_PAUSE))) return -1;
    a->num = (long)n;
    return 0;
  }
  if (is(k, "hang") || is(k, "close")) {
    if (nt != 1) return fail(p, "'%s' takes nothing after it", k->s);
    return new_action(p, is(k, "hang") ? FAKE_HANG : FAKE_CLOSE) ? 0 : -1;
  }
  if (is(k, "signal") || is(k, "wait")) {
    if (nt != 2 || t[1].quoted || t[1].n == 0 || t[1].n >= sizeof a->name)
      return fail(p, "%s NAME (a short word)", k->s);
    if (!(a = new_action(p, is(k, "wait") ? FAKE_WAIT : FAKE_SIGNAL))) return -1;
    memcpy(a->name, t[1].s, t[1].n);
    return 0;
  }
  if (is(k, "call")) {
    if (nt != 2 || t[1].quoted || t[1].n == 0 || t[1].n >= sizeof a->name)
      return fail(p, "call NAME (a short word)");
    if (!(a = new_action(p, FAKE_CALL))) return -1;
    memcpy(a->name, t[1].s, t[1].n);
    return 0;
  }
  return fail(p, "unknown line '%.*s'", (int)k->n, k->s);
}

static int parse_text(struct parse *p, const char *text) {
  char *line = malloc(MAX_LINE + 1);
  struct token *t = malloc(MAX_TOKENS * sizeof *t);
  if (!line || !t) {
    free(line);
    free(t);
    return fail(p, "out of memory");
  }
  int rc = 0;
  for (const char *s = text; rc == 0 && *s;) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    p->line++;
    if (len > MAX_LINE) {
      rc = fail(p, "a line longer than %d bytes", MAX_LINE);
      break;
    }
    memcpy(line, s, len);
    line[len] = '\0';
    int nt;
    rc = tokenize(p, line, t, &nt);
    if (rc == 0 && nt) rc = parse_line(p, t, nt);
    s = nl ? nl + 1 : s + len;
  }
  free(line);
  free(t);
  return rc;
}

/* After the whole file: sizes patched, and a case that says something. */
static int finish(struct parse *p) {
  fake_case *c = p->c;
  if (!c->nsecs) return fail(p, "no 'connection' or 'on' section");
  for (size_t i = 0; i < c->nsecs; i++) {
    struct fake_section *s = &c->secs[i];
    for (size_t j = 0; j < s->nacts; j++) {
      struct fake_action *a = &s->acts[j];
      if (!a->size_from_body) continue;
      if (a->n > 0xffff) {
        p->line = a->line;
        p->file = c->files[a->file];
        return fail(p, "a message of %zu bytes: the header's size is a u16", a->n);
      }
      a->bytes[14] = (uint8_t)a->n, a->bytes[15] = (uint8_t)(a->n >> 8);
    }
  }
  return 0;
}

void fake_case_free(fake_case *c) {
  if (!c) return;
  for (size_t i = 0; i < c->nsecs; i++) {
    for (size_t j = 0; j < c->secs[i].nacts; j++) free(c->secs[i].acts[j].bytes);
    free(c->secs[i].acts);
  }
  free(c->secs);
  free(c);
}

int fake_case_parse(fake_case **out, const char *text, const char *name, const char *dir, char *err, size_t errlen) {
  *out = NULL;
  fake_case *c = calloc(1, sizeof *c);
  struct parse p = {.c = c, .file = name, .dir = dir ? dir : fake_case_dir(), .err = err, .errlen = errlen};
  if (!c) return fail(&p, "out of memory");
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(c->files[0], sizeof c->files[0], "%s", name);
  c->nfiles = 1;
  if (parse_text(&p, text) || finish(&p)) {
    fake_case_free(c);
    return -1;
  }
  *out = c;
  return 0;
}

int fake_case_load(fake_case **out, const char *name, char *err, size_t errlen) {
  *out = NULL;
  char path[8400], dir[4200];
  if (strchr(name, '/')) {
    snprintf(path, sizeof path, "%s", name);
    snprintf(dir, sizeof dir, "%s", name);
    *strrchr(dir, '/') = '\0';
  } else {
    snprintf(dir, sizeof dir, "%s", fake_case_dir());
    snprintf(path, sizeof path, "%s/%s", dir, name);
  }
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errlen, "cannot open the case '%s': %s", path, strerror(errno));
    return -1;
  }
  char *text = malloc(MAX_CASE + 1);
  size_t n = text ? fread(text, 1, MAX_CASE + 1, fp) : 0;
  fclose(fp);
  if (!text || n > MAX_CASE) {
    snprintf(err, errlen, "%s: %s", path, text ? "more than 1 MiB" : "out of memory");
    free(text);
    return -1;
  }
  text[n] = '\0';
  if (memchr(text, '\0', n)) {
    snprintf(err, errlen, "%s: a NUL byte in a case file", path);
    free(text);
    return -1;
  }
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  int rc = fake_case_parse(out, text, base, dir, err, errlen);
  free(text);
  return rc;
}
