/* The scheduler's tracepoints read from a perf.data file itself (dnt-perf.h).
 *
 * `perf script` spends most of its time on a recording of switches printing each tracepoint
 * through its format string; compare needs two numbers of each. The layout (perf's
 * tools/perf/Documentation/perf.data-file-format.txt, the kernel's perf_event.h):
 *
 *   header: "PERFILE2", its size, attr_size, then (offset, size) of the attrs and of the data,
 *           the event types (unused), and a bitmap of the feature sections that follow the data
 *   attrs:  attr_size bytes each: a perf_event_attr (type, size, config, period, sample_type...)
 *           and the (offset, size) of the event ids it was recorded with
 *   data:   records, each `u32 type, u16 misc, u16 size`; a PERF_RECORD_SAMPLE (9) holds the fields
 *           its event's sample_type names, in a fixed order
 *   feature HEADER_TRACING_DATA (bit 1): the tracepoints' formats, as tracefs gave them (field
 *           offsets, and the print format perf prints prev_state with)
 *
 * Every offset and length is checked against the bytes that hold it. A file in any other shape
 * (pipe mode, another byte order, compressed or AUX records, samples with read values, no
 * tracing data) is refused with DNT_PERFDATA_UNSUPPORTED, and the caller has perf print it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dnt-perf.h"

#define MAGIC "PERFILE2"
#define HEADER_SIZE 104
#define ATTR_MIN 48 /* perf_event_attr up to its flags word */
#define MAX_ATTRS 4096
#define MAX_IDS (1u << 20)

#define TYPE_TRACEPOINT 2
#define RECORD_SAMPLE 9
#define RECORD_AUXTRACE 71
#define RECORD_COMPRESSED 81
#define FEATURE_TRACING_DATA 1
#define WINDOW (8u << 20)        /* a file's data is read this much at a time */
#define MAX_SECTION (64u << 20)  /* the most of the attrs, ids or tracing data a file may have */
#define MAX_RECORD 65535u        /* a record's size is a u16 */

enum {
  S_IP = 1u << 0, S_TID = 1u << 1, S_TIME = 1u << 2, S_ADDR = 1u << 3, S_READ = 1u << 4,
  S_CALLCHAIN = 1u << 5, S_ID = 1u << 6, S_CPU = 1u << 7, S_PERIOD = 1u << 8, S_STREAM_ID = 1u << 9,
  S_RAW = 1u << 10, S_IDENTIFIER = 1u << 16,
};

/* where a tracepoint's field lies in its raw data */
struct field {
  uint32_t offset, size;
};

struct tracepoint {
  uint64_t id; /* the format's ID, an attr's config */
  struct field f;
  uint64_t state_mask; /* sched_switch: prev_state bits that print as flags; none set prints "R" */
  int found;
};

struct attr {
  uint32_t type;
  uint64_t config, sample_type;
  int kind; /* 0 other, 1 sched_switch, 2 sched_waking */
};

struct id_of {
  uint64_t id;
  uint32_t attr;
};

struct scan {
  const uint8_t *buf; /* the whole file, or NULL: read from fd */
  int fd;
  uint8_t *win; /* fd: the window both walks read the data into */
  uint64_t len;
  char *msg;
  size_t cap;
  struct attr *attrs;
  size_t nattrs;
  struct id_of *ids;
  size_t nids;
  struct tracepoint sw, wk;
  struct dnt_perfdata_stats st;
};

static int fail(struct scan *s, int rc, const char *what) {
  snprintf(s->msg, s->cap, "%s", what);
  return rc;
}

static uint64_t u64_at(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint32_t u32_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Whether [off, off + n) lies inside the file. */
static int inside(const struct scan *s, uint64_t off, uint64_t n) { return off <= s->len && n <= s->len - off; }

/* n bytes at off from fd; 0, or -1 when the file ends first (it was cut while it was read) or
 * cannot be read. */
static int read_at(int fd, uint8_t *b, size_t n, uint64_t off) {
  while (n) {
    ssize_t got = pread(fd, b, n, (off_t)off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    b += got, n -= (size_t)got, off += (uint64_t)got;
  }
  return 0;
}

/* [off, off + n) of the file, which inside() has checked: in the caller's buffer, or read from
 * the file into *copy (the caller frees it; freed here first). 0, or the error fail() returns. */
static int bytes_at(struct scan *s, uint64_t off, uint64_t n, const uint8_t **out, uint8_t **copy) {
  free(*copy);
  *copy = NULL;
  if (s->buf) {
    *out = s->buf + off;
    return 0;
  }
  if (n > MAX_SECTION) return fail(s, DNT_PERFDATA_UNSUPPORTED, "a header section larger than dntrace reads");
  if (!(*copy = malloc(n ? (size_t)n : 1))) return fail(s, -ENOMEM, "out of memory");
  if (read_at(s->fd, *copy, (size_t)n, off) != 0)
    return fail(s, DNT_PERFDATA_UNSUPPORTED, "the file was cut, or could not be read, while it was read");
  *out = *copy;
  return 0;
}

/* ---- the tracepoints' formats ---- */

/* A constant expression of the print format: numbers, parentheses, + - << & |, as the kernel
 * writes TASK_REPORT_MAX's mask. 0, or -1 for anything else. */
struct expr {
  const char *p, *end;
};

static void skip_blanks(struct expr *e) {
  while (e->p < e->end && *e->p == ' ') e->p++;
}

static int or_expr(struct expr *e, uint64_t *v, int depth);

static int primary(struct expr *e, uint64_t *v, int depth) {
  skip_blanks(e);
  if (e->p == e->end) return -1;
  if (*e->p == '(') {
    e->p++;
    if (or_expr(e, v, depth + 1) != 0) return -1;
    skip_blanks(e);
    if (e->p == e->end || *e->p != ')') return -1;
    e->p++;
    return 0;
  }
  uint64_t x = 0;
  int base = 10, digits = 0;
  if (e->end - e->p > 2 && e->p[0] == '0' && (e->p[1] == 'x' || e->p[1] == 'X')) {
    base = 16;
    e->p += 2;
  }
  for (; e->p < e->end; e->p++, digits++) {
    char c = *e->p;
    int d = c >= '0' && c <= '9' ? c - '0' : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
            : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) break;
    if (digits == 16) return -1;
    x = x * (uint64_t)base + (uint64_t)d;
  }
  while (e->p < e->end && (*e->p == 'U' || *e->p == 'L' || *e->p == 'u' || *e->p == 'l')) e->p++;
  *v = x;
  return digits ? 0 : -1;
}

static int add_expr(struct expr *e, uint64_t *v, int depth) {
  if (primary(e, v, depth) != 0) return -1;
  for (;;) {
    skip_blanks(e);
    if (e->p == e->end || (*e->p != '+' && *e->p != '-')) return 0;
    char op = *e->p++;
    uint64_t r;
    if (primary(e, &r, depth) != 0) return -1;
    *v = op == '+' ? *v + r : *v - r;
  }
}

static int shift_expr(struct expr *e, uint64_t *v, int depth) {
  if (add_expr(e, v, depth) != 0) return -1;
  for (;;) {
    skip_blanks(e);
    if (e->end - e->p < 2 || e->p[0] != '<' || e->p[1] != '<') return 0;
    e->p += 2;
    uint64_t r;
    if (add_expr(e, &r, depth) != 0 || r > 63) return -1;
    *v <<= r;
  }
}

static int and_expr(struct expr *e, uint64_t *v, int depth) {
  if (shift_expr(e, v, depth) != 0) return -1;
  for (;;) {
    skip_blanks(e);
    if (e->p == e->end || *e->p != '&' || (e->end - e->p > 1 && e->p[1] == '&')) return 0;
    e->p++;
    uint64_t r;
    if (shift_expr(e, &r, depth) != 0) return -1;
    *v &= r;
  }
}

static int or_expr(struct expr *e, uint64_t *v, int depth) {
  if (depth > 32 || and_expr(e, v, depth) != 0) return -1;
  for (;;) {
    skip_blanks(e);
    if (e->p == e->end || *e->p != '|' || (e->end - e->p > 1 && e->p[1] == '|')) return 0;
    e->p++;
    uint64_t r;
    if (and_expr(e, &r, depth) != 0) return -1;
    *v |= r;
  }
}

/* The first occurrence of needle in [p, end), or NULL. */
static const char *find(const char *p, const char *end, const char *needle) {
  size_t n = strlen(needle);
  for (; p && (size_t)(end - p) >= n; p++) {
    p = memchr(p, needle[0], (size_t)(end - p) - n + 1);
    if (!p) return NULL;
    if (memcmp(p, needle, n) == 0) return p;
  }
  return NULL;
}

/* "\tfield:TYPE NAME;\toffset:O;\tsize:S;..." for NAME in a format's text. 0 or -1. */
static int field_of(const char *text, const char *end, const char *name, struct field *f) {
  char key[64];
  snprintf(key, sizeof key, " %s;\toffset:", name);
  const char *at = find(text, end, key);
  if (!at) return -1;
  const char *p = at + strlen(key);
  unsigned long o = 0, n = 0;
  int digits = 0;
  for (; p < end && *p >= '0' && *p <= '9' && digits < 9; p++, digits++) o = o * 10 + (unsigned long)(*p - '0');
  if (!digits || end - p < 7 || memcmp(p, ";\tsize:", 7) != 0) return -1;
  digits = 0;
  for (p += 7; p < end && *p >= '0' && *p <= '9' && digits < 9; p++, digits++) n = n * 10 + (unsigned long)(*p - '0');
  if (!digits || p == end || *p != ';' || (n != 4 && n != 8)) return -1;
  f->offset = (uint32_t)o;
  f->size = (uint32_t)n;
  return 0;
}

/* The mask of prev_state's bits that perf prints as letters: the print format reads
 * `REC->prev_state & (MASK) ? __print_flags(...) : "R"` (older kernels: a plain
 * `REC->prev_state ? ...`, every bit a letter). 0 or -1. */
static int state_mask(const char *text, const char *end, uint64_t *mask) {
  const char *fmt = find(text, end, "print fmt:");
  if (!fmt) return -1;
  const char *at = find(fmt, end, "REC->prev_state & ");
  if (!at) {
    if (!find(fmt, end, "REC->prev_state ?")) return -1;
    *mask = UINT64_MAX;
    return 0;
  }
  struct expr e = {at + strlen("REC->prev_state & "), end};
  skip_blanks(&e);
  if (e.p == end || *e.p != '(') return -1;
  return primary(&e, mask, 0);
}

/* One event's format: "name: NAME\nID: N\nformat:\n..." (not NUL-terminated). */
static void read_format(struct scan *s, const char *text, size_t n) {
  const char *end = text + n;
  struct tracepoint *tp;
  if (n > 19 && memcmp(text, "name: sched_switch\n", 19) == 0) tp = &s->sw;
  else if (n > 19 && memcmp(text, "name: sched_waking\n", 19) == 0) tp = &s->wk;
  else return;
  const char *id = find(text, end, "\nID: ");
  if (!id) return;
  uint64_t v = 0;
  int digits = 0;
  for (id += 5; id < end && *id >= '0' && *id <= '9' && digits < 18; id++, digits++) v = v * 10 + (uint64_t)(*id - '0');
  if (!digits) return;
  tp->id = v;
  if (tp == &s->sw) {
    if (field_of(text, end, "prev_state", &tp->f) != 0 || state_mask(text, end, &tp->state_mask) != 0) return;
  } else if (field_of(text, end, "pid", &tp->f) != 0) {
    return;
  }
  tp->found = 1;
}

/* A cursor over the tracing data section. */
struct cursor {
  const uint8_t *p;
  size_t left;
};

static int take(struct cursor *c, size_t n, const uint8_t **out) {
  if (n > c->left) return -1;
  if (out) *out = c->p;
  c->p += n;
  c->left -= n;
  return 0;
}

static int take_u32(struct cursor *c, uint32_t *v) {
  const uint8_t *p;
  if (take(c, 4, &p)) return -1;
  *v = u32_at(p);
  return 0;
}

static int take_u64(struct cursor *c, uint64_t *v) {
  const uint8_t *p;
  if (take(c, 8, &p)) return -1;
  *v = u64_at(p);
  return 0;
}

/* A NUL-terminated string of at most max bytes. */
static int take_string(struct cursor *c, size_t max, const char **out) {
  size_t n = c->left < max ? c->left : max;
  const uint8_t *nul = memchr(c->p, '\0', n);
  if (!nul) return -1;
  *out = (const char *)c->p;
  return take(c, (size_t)(nul - c->p) + 1, NULL);
}

/* perf's trace-event-read.c order: magic, version, byte order, long size, page size, the
 * header_page and header_event files, the ftrace formats, then the events' formats by system. */
static int tracing_data(struct scan *s, const uint8_t *data, uint64_t size);

static int read_tracing_data(struct scan *s, uint64_t off, uint64_t size) {
  if (!inside(s, off, size)) return fail(s, DNT_PERFDATA_UNSUPPORTED, "the tracing data lies outside the file");
  const uint8_t *data;
  uint8_t *copy = NULL;
  int rc = bytes_at(s, off, size, &data, &copy);
  if (rc == 0) rc = tracing_data(s, data, size);
  free(copy);
  return rc;
}

static int tracing_data(struct scan *s, const uint8_t *data, uint64_t size) {
  struct cursor c = {data, (size_t)size};
  const uint8_t *p;
  const char *str;
  uint32_t count, systems;
  uint64_t n;
  if (take(&c, 10, &p) || memcmp(p, "\027\010\104tracing", 10) != 0 || take_string(&c, 16, &str) ||
      take(&c, 2, &p) || p[0] != 0 /* little endian */ || take(&c, 4, NULL))
    return fail(s, DNT_PERFDATA_UNSUPPORTED, "tracing data of an unknown form");
  if (take(&c, 12, &p) || memcmp(p, "header_page", 12) != 0 || take_u64(&c, &n) || take(&c, n, NULL) ||
      take(&c, 13, &p) || memcmp(p, "header_event", 13) != 0 || take_u64(&c, &n) || take(&c, n, NULL) ||
      take_u32(&c, &count))
    return fail(s, DNT_PERFDATA_UNSUPPORTED, "tracing data of an unknown form");
  for (uint32_t i = 0; i < count; i++)
    if (take_u64(&c, &n) || take(&c, n, NULL)) return fail(s, DNT_PERFDATA_UNSUPPORTED, "tracing data cut short");
  if (take_u32(&c, &systems)) return fail(s, DNT_PERFDATA_UNSUPPORTED, "tracing data cut short");
  for (uint32_t i = 0; i < systems; i++) {
    if (take_string(&c, 256, &str) || take_u32(&c, &count)) return fail(s, DNT_PERFDATA_UNSUPPORTED, "tracing data cut short");
    int sched = strcmp(str, "sched") == 0;
    for (uint32_t j = 0; j < count; j++) {
      if (take_u64(&c, &n) || take(&c, n, &p)) return fail(s, DNT_PERFDATA_UNSUPPORTED, "tracing data cut short");
      if (sched) read_format(s, (const char *)p, (size_t)n);
    }
  }
  return 0;
}

/* ---- header, attrs, ids ---- */

static int by_id(const void *a, const void *b) {
  uint64_t x = ((const struct id_of *)a)->id, y = ((const struct id_of *)b)->id;
  return (x > y) - (x < y);
}

static int read_ids(struct scan *s, uint64_t attr_size, size_t n, const uint8_t *attrs, const uint8_t **ids,
                    uint8_t **copy);

static int read_attrs(struct scan *s, uint64_t attr_size, uint64_t off, uint64_t size) {
  if (attr_size < ATTR_MIN + 16 || attr_size > 4096 || !inside(s, off, size) || size % attr_size)
    return fail(s, DNT_PERFDATA_UNSUPPORTED, "attrs of an unknown form");
  size_t n = (size_t)(size / attr_size);
  if (!n || n > MAX_ATTRS) return fail(s, DNT_PERFDATA_UNSUPPORTED, "no attrs, or too many");
  s->attrs = calloc(n, sizeof *s->attrs);
  if (!s->attrs) return fail(s, -ENOMEM, "out of memory");
  s->nattrs = n;
  const uint8_t *attrs, *ids;
  uint8_t *attrs_copy = NULL, *ids_copy = NULL;
  int rc = bytes_at(s, off, size, &attrs, &attrs_copy);
  if (rc == 0) rc = read_ids(s, attr_size, n, attrs, &ids, &ids_copy);
  free(attrs_copy);
  free(ids_copy);
  if (rc == 0 && s->nids) qsort(s->ids, s->nids, sizeof *s->ids, by_id);
  return rc;
}

/* The event ids of n attrs (attr_size bytes each, at attrs), into s->ids. */
static int read_ids(struct scan *s, uint64_t attr_size, size_t n, const uint8_t *attrs, const uint8_t **ids,
                    uint8_t **copy) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *a = attrs + i * attr_size;
    uint64_t ids_size = u64_at(a + attr_size - 8), ids_off = u64_at(a + attr_size - 16);
    if (!inside(s, ids_off, ids_size) || ids_size % 8 || ids_size / 8 > MAX_IDS - total)
      return fail(s, DNT_PERFDATA_UNSUPPORTED, "event ids outside the file");
    total += (size_t)(ids_size / 8);
  }
  s->ids = malloc((total ? total : 1) * sizeof *s->ids);
  if (!s->ids) return fail(s, -ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    const uint8_t *a = attrs + i * attr_size;
    struct attr *at = &s->attrs[i];
    at->type = u32_at(a);
    at->config = u64_at(a + 8);
    at->sample_type = u64_at(a + 24);
    uint64_t ids_size = u64_at(a + attr_size - 8), ids_off = u64_at(a + attr_size - 16);
    int rc = bytes_at(s, ids_off, ids_size, ids, copy);
    if (rc) return rc;
    for (uint64_t k = 0; k < ids_size / 8; k++) s->ids[s->nids++] = (struct id_of){u64_at(*ids + 8 * k), (uint32_t)i};
  }
  return 0;
}

static const struct attr *attr_of_id(const struct scan *s, uint64_t id) {
  struct id_of key = {.id = id};
  const struct id_of *hit = s->nids ? bsearch(&key, s->ids, s->nids, sizeof key, by_id) : NULL;
  return hit ? &s->attrs[hit->attr] : NULL;
}

/* ---- samples ---- */

/* One sample record's body (after its 8-byte header): its event, tid, time and raw data. 1 for a
 * sched_switch, 2 for a sched_waking (out filled in), 0 for any other sample, -1 when it does not
 * hold together. */
static int sample_of(const struct scan *s, const uint8_t *p, size_t n, dnt_perf_sample *out) {
  const struct attr *a;
  size_t at = 0;
  if (s->nattrs == 1) {
    a = &s->attrs[0];
    if (a->sample_type & S_IDENTIFIER) at += 8;
  } else {
    if (n < 8) return -1;
    a = attr_of_id(s, u64_at(p));
    if (!a) return 0; /* an event the header does not name: perf skips it too */
    at += 8;
  }
  if (!a->kind) return 0;
  uint64_t t = a->sample_type;
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0, nr;
#define NEED(k) \
  do { \
    if (at > n || (k) > n - at) return -1; \
  } while (0)
  if (t & S_IP) at += 8;
  if (t & S_TID) {
    NEED(8);
    pid = u32_at(p + at);
    tid = u32_at(p + at + 4);
    at += 8;
  }
  if (t & S_TIME) {
    NEED(8);
    time = u64_at(p + at);
    at += 8;
  }
  at += (t & S_ADDR ? 8 : 0) + (t & S_ID ? 8 : 0) + (t & S_STREAM_ID ? 8 : 0) + (t & S_CPU ? 8 : 0) +
        (t & S_PERIOD ? 8 : 0);
  if (t & S_CALLCHAIN) {
    NEED(8);
    nr = u64_at(p + at);
    at += 8;
    if (nr > (n - at) / 8) return -1;
    at += (size_t)nr * 8;
  }
  NEED(4);
  uint32_t raw_size = u32_at(p + at);
  at += 4;
  NEED(raw_size);
  const uint8_t *raw = p + at;
#undef NEED
  const struct tracepoint *tp = a->kind == 1 ? &s->sw : &s->wk;
  if (tp->f.offset > raw_size || tp->f.size > raw_size - tp->f.offset) return -1;
  uint64_t v = tp->f.size == 8 ? u64_at(raw + tp->f.offset) : u32_at(raw + tp->f.offset);
  if (pid > 0x7fffffff || tid > 0x7fffffff) return -1;
  *out = (dnt_perf_sample){.comm = "", .pid = (int)pid, .tid = (int)tid, .time_ns = time, .trace = "",
                           .decoded = 1};
  if (a->kind == 1) {
    out->event = "sched:sched_switch";
    out->left_runnable = (v & tp->state_mask) == 0;
  } else {
    out->event = "sched:sched_waking";
    /* pid_t: a negative one is no thread */
    out->woken_tid = tp->f.size == 4 ? ((int32_t)(uint32_t)v > 0 ? v : 0) : ((int64_t)v > 0 ? v : 0);
  }
  return a->kind;
}

/* The whole records of [p, end): each sched sample to fn (NULL: the check alone). *stop: where
 * a record cut by end begins (end when none is). 0, or the error fail() returns. */
static int records(struct scan *s, const uint8_t *p, const uint8_t *end, dnt_perf_observe_fn fn, void *ud,
                   const uint8_t **stop) {
  while (end - p >= 8) {
    uint32_t type = u32_at(p);
    uint16_t rsize;
    memcpy(&rsize, p + 6, 2);
    if (rsize < 8) return fail(s, DNT_PERFDATA_UNSUPPORTED, "a record of a bad size");
    if (rsize > end - p) break;
    if (type == RECORD_AUXTRACE || type == RECORD_COMPRESSED)
      return fail(s, DNT_PERFDATA_UNSUPPORTED, "AUX or compressed records");
    if (type == RECORD_SAMPLE) {
      dnt_perf_sample smp;
      int rc = sample_of(s, p + 8, rsize - 8u, &smp);
      if (rc < 0) return fail(s, DNT_PERFDATA_UNSUPPORTED, "a sample of a bad layout");
      if (rc > 0) {
        if (rc == 1) s->st.switches++;
        else s->st.wakings++;
        if (fn) fn(ud, &smp);
      }
    }
    p += rsize;
  }
  *stop = p;
  return 0;
}

/* Walks the data section: checks it (fn NULL) or hands every sched sample to fn. A file is read a
 * window at a time (memory flat in its size), a record cut by a window's end carried over. */
static int walk(struct scan *s, uint64_t off, uint64_t size, dnt_perf_observe_fn fn, void *ud) {
  if (!inside(s, off, size)) return fail(s, DNT_PERFDATA_UNSUPPORTED, "the data lies outside the file");
  const uint8_t *stop;
  if (s->buf) {
    int rc = records(s, s->buf + off, s->buf + off + size, fn, ud, &stop);
    if (rc == 0 && stop != s->buf + off + size) rc = fail(s, DNT_PERFDATA_UNSUPPORTED, "a record cut short");
    return rc;
  }
  if (!s->win && !(s->win = malloc(WINDOW + MAX_RECORD))) return fail(s, -ENOMEM, "out of memory");
  uint8_t *win = s->win;
  size_t carried = 0;
  int rc = 0;
  while (rc == 0 && size) {
    size_t n = size < WINDOW ? (size_t)size : WINDOW;
    if (read_at(s->fd, win + carried, n, off) != 0) {
      rc = fail(s, DNT_PERFDATA_UNSUPPORTED, "the file was cut, or could not be read, while it was read");
      break;
    }
    off += n, size -= n;
    if ((rc = records(s, win, win + carried + n, fn, ud, &stop)) != 0) break;
    carried = (size_t)(win + carried + n - stop);
    memmove(win, stop, carried); /* less than a record: at most MAX_RECORD bytes */
  }
  if (rc == 0 && carried) rc = fail(s, DNT_PERFDATA_UNSUPPORTED, "a record cut short");
  return rc;
}

static int sched(const uint8_t *file, int fd, uint64_t len, dnt_perf_observe_fn fn, void *ud,
                 struct dnt_perfdata_stats *stats, char *msg, size_t cap) {
  struct scan s = {.buf = file, .fd = fd, .len = len, .msg = msg, .cap = cap};
  int rc = 0;
  uint8_t header[HEADER_SIZE], *feature = NULL;
  const uint8_t *buf = file, *sec_bytes;
  if (cap) msg[0] = '\0';
  if (!file && len >= HEADER_SIZE && read_at(fd, header, HEADER_SIZE, 0) != 0) {
    rc = fail(&s, DNT_PERFDATA_UNSUPPORTED, "the file could not be read");
    goto out;
  }
  if (!file) buf = header;
  if (len < HEADER_SIZE || memcmp(buf, MAGIC, 8) != 0 || u64_at(buf + 8) != HEADER_SIZE) {
    rc = fail(&s, DNT_PERFDATA_UNSUPPORTED, "not a perf.data file perf wrote to a file (PERFILE2, little endian)");
    goto out;
  }
  uint64_t attr_size = u64_at(buf + 16), attrs_off = u64_at(buf + 24), attrs_size = u64_at(buf + 32);
  uint64_t data_off = u64_at(buf + 40), data_size = u64_at(buf + 48);
  uint64_t features = u64_at(buf + 72);
  if (!data_size) { /* perf did not finish the file: perf script reads to its end regardless */
    rc = fail(&s, DNT_PERFDATA_UNSUPPORTED, "a perf.data whose writing did not finish");
    goto out;
  }
  if ((rc = read_attrs(&s, attr_size, attrs_off, attrs_size)) != 0) goto out;
  int any_sched = 0;
  for (size_t i = 0; i < s.nattrs; i++) any_sched |= s.attrs[i].type == TYPE_TRACEPOINT;
  if (any_sched) {
    /* the feature sections follow the data, one (offset, size) per bit set, in bit order */
    if (!(features & (1u << FEATURE_TRACING_DATA))) {
      rc = fail(&s, DNT_PERFDATA_UNSUPPORTED, "tracepoints without their formats");
      goto out;
    }
    uint64_t sec = data_off + data_size + 16 * (features & 1); /* bit 0 is reserved: skipped if set */
    if (sec < data_off || !inside(&s, sec, 16)) {
      rc = fail(&s, DNT_PERFDATA_UNSUPPORTED, "feature sections outside the file");
      goto out;
    }
    if ((rc = bytes_at(&s, sec, 16, &sec_bytes, &feature)) != 0 ||
        (rc = read_tracing_data(&s, u64_at(sec_bytes), u64_at(sec_bytes + 8))) != 0)
      goto out;
  }
  for (size_t i = 0; i < s.nattrs; i++) {
    struct attr *a = &s.attrs[i];
    if (a->type != TYPE_TRACEPOINT) continue;
    s.st.tracepoint_events++;
    if (s.sw.found && a->config == s.sw.id) a->kind = 1;
    else if (s.wk.found && a->config == s.wk.id) a->kind = 2;
    else {
      s.st.other_tracepoint_events++;
      continue;
    }
    /* what sample_of reads: the fields before RAW, RAW, and the event's id first when several */
    uint64_t t = a->sample_type;
    if ((t & S_READ) || !(t & S_RAW) || !(t & S_TID) || !(t & S_TIME) || (s.nattrs > 1 && !(t & S_IDENTIFIER))) {
      rc = fail(&s, DNT_PERFDATA_UNSUPPORTED, "sched samples of an unknown layout");
      goto out;
    }
  }
  if (s.nattrs > 1)
    for (size_t i = 0; i < s.nattrs; i++)
      if (!(s.attrs[i].sample_type & S_IDENTIFIER)) { /* the event of a sample could not be told */
        rc = fail(&s, DNT_PERFDATA_UNSUPPORTED, "samples without their event's id");
        goto out;
      }
  int any_kind = 0;
  for (size_t i = 0; i < s.nattrs; i++) any_kind |= s.attrs[i].kind;
  if (!any_kind) goto out; /* no samples to read (dntrace perf records none) */
  /* checked whole first, so that fn sees all of it or nothing */
  if ((rc = walk(&s, data_off, data_size, NULL, NULL)) != 0) goto out;
  if (fn) {
    s.st.switches = s.st.wakings = 0;
    rc = walk(&s, data_off, data_size, fn, ud);
  }
out:
  free(feature);
  free(s.win);
  if (stats) *stats = s.st;
  free(s.attrs);
  free(s.ids);
  return rc;
}

int dnt_perfdata_sched(const uint8_t *buf, size_t len, dnt_perf_observe_fn fn, void *ud,
                       struct dnt_perfdata_stats *stats, char *msg, size_t cap) {
  return sched(buf, -1, len, fn, ud, stats, msg, cap);
}

int dnt_perfdata_sched_fd(int fd, dnt_perf_observe_fn fn, void *ud, struct dnt_perfdata_stats *stats, char *msg,
                          size_t cap) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (stats) memset(stats, 0, sizeof *stats);
    snprintf(msg, cap, "not a regular file");
    return DNT_PERFDATA_UNSUPPORTED;
  }
  return sched(NULL, fd, (uint64_t)st.st_size, fn, ud, stats, msg, cap);
}
