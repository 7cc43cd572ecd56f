/* A push parser for `perf script` text, and the mappings that turn its offsets into addresses
 * (dnt-perf.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-perf.h"

#define NAMES_CAP (256 * 1024) /* the frames' symbol and dso text of one sample */

struct dnt_perf_script {
  dnt_perf_script_cb cb;
  void *ud;
  char *line; /* the line being assembled */
  size_t len;
  int overlong; /* the current line passed the maximum: skip to its end */
  /* the sample being assembled */
  int in_sample, chain_cut;
  char head[1024]; /* comm \0 event \0 trace */
  const char *comm, *event, *trace;
  int pid, tid;
  uint64_t time_ns, period;
  dnt_perf_frame *frames;
  size_t nframes;
  char *names; /* the frames' strings, back to back */
  size_t names_len;
  struct dnt_perf_script_stats st;
};

dnt_perf_script *dnt_perf_script_new(const dnt_perf_script_cb *cb, void *ud) {
  dnt_perf_script *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->cb = *cb;
  p->ud = ud;
  p->line = malloc(DNT_PERF_MAX_LINE + 1);
  p->frames = malloc(DNT_PERF_MAX_FRAMES * sizeof *p->frames);
  p->names = malloc(NAMES_CAP);
  if (!p->line || !p->frames || !p->names) {
    dnt_perf_script_free(p);
    return NULL;
  }
  return p;
}

void dnt_perf_script_free(dnt_perf_script *p) {
  if (!p) return;
  free(p->line);
  free(p->frames);
  free(p->names);
  free(p);
}

/* "123.000456789" (an integer part, a dot, up to 9 digits) -> ns. 0 or -1. */
static int parse_time(const char *s, size_t n, uint64_t *out) {
  uint64_t sec = 0, frac = 0;
  size_t i = 0, digits = 0;
  for (; i < n && isdigit((unsigned char)s[i]); i++, digits++) {
    if (sec > UINT64_MAX / 10 / 1000000000u) return -1;
    sec = sec * 10 + (uint64_t)(s[i] - '0');
  }
  if (!digits || i == n || s[i] != '.') return -1;
  size_t fd = 0;
  for (i++; i < n && isdigit((unsigned char)s[i]); i++, fd++)
    if (fd < 9) frac = frac * 10 + (uint64_t)(s[i] - '0');
  if (!fd || i != n) return -1;
  for (; fd < 9; fd++) frac *= 10;
  *out = sec * 1000000000u + frac;
  return 0;
}

/* "PID/TID" -> both. 0 or -1. */
static int parse_pid_tid(const char *s, size_t n, int *pid, int *tid) {
  long a = 0, b = 0;
  size_t i = 0, da = 0, db = 0;
  for (; i < n && isdigit((unsigned char)s[i]) && da < 10; i++, da++) a = a * 10 + (s[i] - '0');
  if (!da || i == n || s[i] != '/') return -1;
  for (i++; i < n && isdigit((unsigned char)s[i]) && db < 10; i++, db++) b = b * 10 + (s[i] - '0');
  if (!db || i != n || a > 0x7fffffff || b > 0x7fffffff) return -1;
  *pid = (int)a;
  *tid = (int)b;
  return 0;
}

static int emit_sample(dnt_perf_script *p) {
  if (!p->in_sample) return 0;
  p->in_sample = 0;
  p->st.samples++;
  if (!p->cb.on_sample) return 0;
  dnt_perf_sample s = {.comm = p->comm, .pid = p->pid, .tid = p->tid, .time_ns = p->time_ns,
                       .event = p->event, .period = p->period, .trace = p->trace, .frames = p->frames,
                       .nframes = p->nframes};
  return p->cb.on_sample(p->ud, &s);
}

/* Where `PID/TID TIME: ` starts in a header line (the first such token pair from the left ends
 * COMM, which may hold spaces and digits of its own), its values and the time's ':'; NULL if
 * the line is no header. */
static char *header_ids(char *line, int *pid, int *tid, uint64_t *t, char **time_end) {
  char *tok = line;
  while (*tok) {
    while (*tok == ' ') tok++;
    char *end = strchr(tok, ' ');
    if (!end) break;
    char *next = end;
    while (*next == ' ') next++;
    char *next_end = strchr(next, ':');
    if (next_end && parse_pid_tid(tok, (size_t)(end - tok), pid, tid) == 0 &&
        parse_time(next, (size_t)(next_end - next), t) == 0 && next_end[1] == ' ') {
      *time_end = next_end;
      return tok;
    }
    tok = end;
  }
  return NULL;
}

/* `COMM PID/TID TIME: EVENT: [TRACE]` */
static int sample_header(dnt_perf_script *p, char *line) {
  int pid, tid;
  uint64_t t;
  char *time_end, *tok = header_ids(line, &pid, &tid, &t, &time_end);
  if (!tok) return -1;
  char *comm_end = tok;
  while (comm_end > line && comm_end[-1] == ' ') comm_end--;
  while (*line == ' ' && line < comm_end) line++; /* perf's padding of a right-aligned COMM */
  char *event = time_end + 2;
  while (*event == ' ') event++;
  /* `TIME: PERIOD EVENT:` when the period field was asked for: digits, then a space */
  uint64_t period = 0;
  char *digits = event;
  while (*digits >= '0' && *digits <= '9' && period <= UINT64_MAX / 10) period = period * 10 + (uint64_t)(*digits++ - '0');
  if (digits > event && *digits == ' ') {
    event = digits;
    while (*event == ' ') event++;
  } else {
    period = 0;
  }
  char *event_end = strchr(event, ':');
  /* an event name may hold one ':' of its own (sched:sched_switch): its end is ": " */
  while (event_end && event_end[1] && event_end[1] != ' ') event_end = strchr(event_end + 1, ':');
  if (!event_end || event_end == event) return -1;
  char *trace = event_end + 1;
  while (*trace == ' ') trace++;
  size_t lc = (size_t)(comm_end - line), le = (size_t)(event_end - event), lt = strlen(trace);
  if (lc + le + lt + 3 > sizeof p->head) return -1;
  memcpy(p->head, line, lc);
  p->head[lc] = '\0';
  memcpy(p->head + lc + 1, event, le);
  p->head[lc + 1 + le] = '\0';
  memcpy(p->head + lc + le + 2, trace, lt + 1);
  p->comm = p->head;
  p->event = p->head + lc + 1;
  p->trace = p->head + lc + le + 2;
  p->pid = pid;
  p->tid = tid;
  p->time_ns = t;
  p->period = period;
  p->nframes = 0;
  p->names_len = 0;
  p->in_sample = 1;
  p->chain_cut = 0;
  return 0;
}

static const char *keep_name(dnt_perf_script *p, const char *s, size_t n) {
  if (n == 9 && memcmp(s, "[unknown]", 9) == 0) return NULL;
  if (p->names_len + n + 1 > NAMES_CAP) return NULL; /* an absurd sample: the frame stays unnamed */
  char *out = p->names + p->names_len;
  memcpy(out, s, n);
  out[n] = '\0';
  p->names_len += n + 1;
  return out;
}

/* A hex digit's value, or -1 (no ctype lookups: this runs for every frame of every sample). */
static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* `\t   HEX SYM (DSO)`; SYM may hold spaces and parentheses, DSO is the last group. */
static int frame_line(dnt_perf_script *p, char *line) {
  char *s = line;
  while (*s == ' ' || *s == '\t') s++;
  uint64_t addr = 0;
  size_t digits = 0;
  for (int v; (v = hex_value(*s)) >= 0; s++, digits++) {
    if (digits == 16) return -1;
    addr = addr << 4 | (uint64_t)v;
  }
  if (!digits || *s != ' ') return -1;
  s++;
  size_t n = strlen(s);
  if (n < 3 || s[n - 1] != ')') return -1;
  /* the '(' matching the last ')': a dso such as "/memfd:doublemapper (deleted)" nests one */
  char *open = NULL;
  int depth = 0;
  for (char *q = s + n - 1; q >= s; q--) {
    depth += *q == ')';
    depth -= *q == '(';
    if (depth == 0) {
      open = q;
      break;
    }
  }
  if (!open || open == s || open[-1] != ' ') return -1;
  if (p->nframes == DNT_PERF_MAX_FRAMES) {
    if (!p->chain_cut) p->st.truncated_chains++;
    p->chain_cut = 1;
    return 0; /* the root end of an absurdly deep chain is dropped */
  }
  dnt_perf_frame *f = &p->frames[p->nframes++];
  f->addr = addr;
  f->sym = keep_name(p, s, (size_t)(open - 1 - s));
  f->dso = keep_name(p, open + 1, (size_t)(s + n - 1 - (open + 1)));
  return 0;
}

static int parse_hex(const char **s, uint64_t *out) {
  const char *q = *s;
  if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) q += 2;
  uint64_t v = 0;
  size_t digits = 0;
  for (; isxdigit((unsigned char)*q); q++, digits++) {
    if (digits == 16) return -1;
    v = v << 4 | (uint64_t)(isdigit((unsigned char)*q) ? *q - '0' : (tolower((unsigned char)*q) - 'a' + 10));
  }
  if (!digits) return -1;
  *s = q;
  *out = v;
  return 0;
}

/* `... TIME: PERF_RECORD_MMAP2 PID/TID: [0xSTART(0xLEN) @ PGOFF ...]: PROT FILE` */
static int mmap_line(dnt_perf_script *p, char *line, char *rec) {
  dnt_perf_mmap m = {0};
  char *colon = strchr(line, ':');
  if (colon && colon < rec) {
    char *t = colon;
    while (t > line && (isdigit((unsigned char)t[-1]) || t[-1] == '.')) t--;
    if (parse_time(t, (size_t)(colon - t), &m.time_ns) != 0) m.time_ns = 0;
  }
  char *s = strchr(rec, ' ');
  if (!s) return -1;
  s++;
  char *slash = strchr(s, '/');
  if (!slash) return -1;
  m.pid = atoi(s);
  const char *q = strchr(s, '[');
  if (!q) return -1;
  q++;
  if (parse_hex(&q, &m.start) != 0 || *q++ != '(' || parse_hex(&q, &m.len) != 0 || *q++ != ')') return -1;
  if (strncmp(q, " @ ", 3) != 0) return -1;
  q += 3;
  if (parse_hex(&q, &m.pgoff) != 0) return -1;
  const char *close = strstr(q, "]: ");
  if (!close) return -1;
  char *prot = (char *)close + 3;
  char *space = strchr(prot, ' ');
  if (!space) return -1;
  *space = '\0';
  m.prot = prot;
  m.file = space + 1;
  p->st.mmaps++;
  return p->cb.on_mmap ? p->cb.on_mmap(p->ud, &m) : 0;
}

static int handle_line(dnt_perf_script *p, char *line) {
  if (!line[0]) return emit_sample(p); /* the blank line after a sample */
  /* A frame is tab-led. A space-led line is a frame, or a header whose COMM perf right-aligned:
   * it does that for event types printed with their own -F (trace:...) and no call chain, so
   * such headers follow one another with no blank line between. */
  if (p->in_sample && line[0] == '\t') {
    if (frame_line(p, line) != 0) p->st.malformed_lines++;
    return 0;
  }
  if (p->in_sample && line[0] == ' ') {
    int pid, tid;
    uint64_t t;
    char *time_end;
    if (!header_ids(line, &pid, &tid, &t, &time_end)) {
      if (frame_line(p, line) != 0) p->st.malformed_lines++;
      return 0;
    }
  }
  int rc = emit_sample(p); /* a header without the blank line before it */
  if (rc) return rc;
  char *rec = strstr(line, "PERF_RECORD_MMAP");
  if (rec) {
    rc = mmap_line(p, line, rec);
    if (rc < 0) p->st.malformed_lines++, rc = 0;
    return rc;
  }
  if (sample_header(p, line) != 0) p->st.malformed_lines++;
  return 0;
}

int dnt_perf_script_feed(dnt_perf_script *p, const char *buf, size_t n) {
  p->st.bytes += n;
  while (n) {
    const char *nl = memchr(buf, '\n', n);
    size_t take = nl ? (size_t)(nl - buf) : n;
    if (!p->overlong) {
      if (p->len + take > DNT_PERF_MAX_LINE) {
        p->overlong = 1;
        p->st.malformed_lines++;
      } else {
        memcpy(p->line + p->len, buf, take);
        p->len += take;
      }
    }
    buf += take;
    n -= take;
    if (!nl) break;
    buf++, n--;
    int skip = p->overlong;
    p->line[p->len] = '\0';
    p->len = 0;
    p->overlong = 0;
    if (skip) continue;
    int rc = handle_line(p, p->line);
    if (rc) return rc;
  }
  return 0;
}

int dnt_perf_script_finish(dnt_perf_script *p) {
  int rc = 0;
  if (p->len && !p->overlong) {
    p->line[p->len] = '\0';
    rc = handle_line(p, p->line);
  }
  p->len = 0;
  p->overlong = 0;
  return rc ? rc : emit_sample(p);
}

void dnt_perf_script_stats(const dnt_perf_script *p, struct dnt_perf_script_stats *out) { *out = p->st; }

/* ---- mappings ---- */

struct mapping {
  int pid;
  uint64_t start, len, pgoff;
  char *file;
};

struct dnt_perf_maps {
  struct mapping *v;
  size_t n, cap;
  size_t recent[4]; /* mappings of the last hits + 1: a chain's frames keep to a few */
  unsigned next_recent;
};

dnt_perf_maps *dnt_perf_maps_new(void) { return calloc(1, sizeof(dnt_perf_maps)); }

void dnt_perf_maps_free(dnt_perf_maps *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) free(m->v[i].file);
  free(m->v);
  free(m);
}

int dnt_perf_maps_add(dnt_perf_maps *m, const dnt_perf_mmap *mm) {
  if (!strchr(mm->prot, 'x')) return 0; /* only code is sampled */
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    struct mapping *grown = realloc(m->v, cap * sizeof *grown);
    if (!grown) return -ENOMEM;
    m->v = grown;
    m->cap = cap;
  }
  char *file = strdup(mm->file);
  if (!file) return -ENOMEM;
  m->v[m->n++] = (struct mapping){mm->pid, mm->start, mm->len, mm->pgoff, file};
  return 0;
}

uint64_t dnt_perf_maps_absolute(const dnt_perf_maps *m, int pid, const dnt_perf_frame *f) {
  if (!f->dso || f->dso[0] == '[') return f->addr; /* unknown, [kernel.kallsyms], [vdso]...: as is */
  dnt_perf_maps *cache = (dnt_perf_maps *)m; /* the cache alone changes: lookups stay logically const */
  /* a region remapped larger keeps its start and pgoff, so any mapping that holds the offset
   * gives the same address: a recent hit is as good as the newest */
  for (int k = 0; k < 4; k++) {
    size_t r = m->recent[k];
    if (!r) continue;
    const struct mapping *mp = &m->v[r - 1];
    if (mp->pid == pid && f->addr >= mp->pgoff && f->addr - mp->pgoff < mp->len && strcmp(mp->file, f->dso) == 0)
      return mp->start + (f->addr - mp->pgoff);
  }
  int file_mapped = 0;
  /* the newest mapping wins: a region the runtime remapped larger is recorded again */
  for (size_t i = m->n; i > 0; i--) {
    const struct mapping *mp = &m->v[i - 1];
    if (mp->pid != pid || strcmp(mp->file, f->dso) != 0) continue;
    file_mapped = 1;
    if (f->addr >= mp->pgoff && f->addr - mp->pgoff < mp->len) {
      cache->recent[cache->next_recent++ % 4] = i;
      return mp->start + (f->addr - mp->pgoff);
    }
  }
  return file_mapped ? 0 : f->addr;
}

int dnt_perf_event_is(const char *event, const char *name) {
  size_t n = strlen(name);
  return strncmp(event, name, n) == 0 && (event[n] == '\0' || event[n] == '/');
}
