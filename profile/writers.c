/* The profile's text writers: folded stacks, speedscope and the Chromium trace format, streamed
 * to a FILE * (dnt-profile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-profile.h"
#include "dnt-trace.h"

struct writer {
  FILE *fp;
  const struct dnt_profile *prof;
  uint64_t thread; /* speedscope: the thread being written */
  int by_time;     /* weights in time (ms), else in samples */
  int first;
  int pass;        /* speedscope: 0 samples, 1 weights */
};

/* ---- stacks by name ----
 * The profile counts stacks by address: two addresses in one method are two stacks with the same
 * names. Folded stacks and speedscope want one entry per distinct named stack: merged here, in
 * the order first seen (memory: the distinct stacks, never the samples). */

struct named {
  uint64_t thread, samples;
  double ms;
  size_t off; /* into frames */
  uint32_t n, hash;
};

struct merged {
  struct named *v;
  size_t n, cap;
  uint32_t *frames;
  size_t nframes, capframes;
  uint32_t *table; /* index + 1, 0 empty */
  size_t tcap;
  int oom;
};

static uint32_t hash_stack(uint64_t thread, const uint32_t *frames, size_t n) {
  uint32_t h = 2166136261u ^ (uint32_t)thread ^ (uint32_t)(thread >> 32);
  for (size_t i = 0; i < n; i++) h = (h ^ frames[i]) * 16777619u;
  return h;
}

static int rehash(struct merged *m) {
  size_t cap = m->tcap ? m->tcap * 2 : 1024;
  uint32_t *t = calloc(cap, sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < m->n; i++) {
    size_t j = m->v[i].hash & (cap - 1);
    while (t[j]) j = (j + 1) & (cap - 1);
    t[j] = (uint32_t)i + 1;
  }
  free(m->table);
  m->table = t;
  m->tcap = cap;
  return 0;
}

static void merge_stack(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct merged *m = ud;
  if (m->oom) return;
  if ((m->n + 1) * 2 > m->tcap && rehash(m) != 0) {
    m->oom = 1;
    return;
  }
  uint32_t h = hash_stack(thread, frames, n);
  size_t j = h & (m->tcap - 1);
  for (; m->table[j]; j = (j + 1) & (m->tcap - 1)) {
    struct named *e = &m->v[m->table[j] - 1];
    if (e->hash == h && e->thread == thread && e->n == n &&
        (n == 0 || memcmp(m->frames + e->off, frames, n * sizeof *frames) == 0)) {
      e->samples += samples;
      e->ms += ms;
      return;
    }
  }
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 256;
    struct named *v = realloc(m->v, cap * sizeof *v);
    if (!v) {
      m->oom = 1;
      return;
    }
    m->v = v;
    m->cap = cap;
  }
  if (m->nframes + n > m->capframes) {
    size_t cap = m->capframes ? m->capframes : 4096;
    while (cap < m->nframes + n) cap *= 2;
    uint32_t *f = realloc(m->frames, cap * sizeof *f);
    if (!f) {
      m->oom = 1;
      return;
    }
    m->frames = f;
    m->capframes = cap;
  }
  if (n) memcpy(m->frames + m->nframes, frames, n * sizeof *frames);
  m->v[m->n] = (struct named){thread, samples, ms, m->nframes, (uint32_t)n, h};
  m->nframes += n;
  m->table[j] = (uint32_t)++m->n;
}

static void merged_release(struct merged *m) {
  free(m->v);
  free(m->frames);
  free(m->table);
}

/* Calls fn once per distinct (thread, named stack), in the order first seen. 0, or -1 when out of
 * memory. */
static int each_named_stack(const struct dnt_profile *prof, dnt_profile_stack_fn fn, void *ud) {
  struct merged m = {0};
  int rc = dnt_profile_each_stack(prof, merge_stack, &m);
  if (!rc && !m.oom)
    for (size_t i = 0; i < m.n; i++)
      fn(ud, m.v[i].thread, m.frames + m.v[i].off, m.v[i].n, m.v[i].samples, m.v[i].ms);
  rc = rc || m.oom ? -1 : 0;
  merged_release(&m);
  return rc;
}

/* folded: "thread;root;...;leaf value" per line; the thread keeps threads apart in a flame graph.
 * The value is an integer (flamegraph.pl, inferno): microseconds of thread time, or samples. A
 * stack whose time rounds to 0 (threads' last samples, which stand for no time) is left out. */
static void folded_line(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct writer *w = ud;
  uint64_t value = w->by_time ? (uint64_t)(ms * 1000.0 + 0.5) : samples;
  if (value == 0) return;
  fprintf(w->fp, "Thread %llu", (unsigned long long)thread);
  for (size_t i = 0; i < n; i++) {
    fputc(';', w->fp);
    /* ';' separates frames and ' ' ends them: keep names from breaking the format */
    for (const char *c = dnt_profile_name(w->prof, frames[i]); *c; c++)
      fputc(*c == ';' ? ':' : *c == ' ' ? '_' : *c, w->fp);
  }
  fprintf(w->fp, " %llu\n", (unsigned long long)value);
}

/* speedscope: a stack of the thread being written, in the pass's list (its frames, or its
 * weight); stacks that stand for no time are left out of both */
static void speedscope_item(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct writer *w = ud;
  if (thread != w->thread || (w->by_time && ms <= 0) || samples == 0) return;
  fputs(w->first ? "" : ",", w->fp);
  w->first = 0;
  if (w->pass == 1) {
    if (w->by_time) fprintf(w->fp, "%.9g", ms);
    else fprintf(w->fp, "%llu", (unsigned long long)samples);
    return;
  }
  fputc('[', w->fp);
  for (size_t i = 0; i < n; i++) fprintf(w->fp, "%s%u", i ? "," : "", frames[i]);
  fputc(']', w->fp);
}

/* Chromium trace events: per thread, a frame opens when it first appears on the sampled stack
 * and closes when a later sample no longer has it at that depth ("X" complete events). */
struct chromium {
  FILE *fp;
  const struct dnt_profile *prof;
  uint64_t thread;
  uint32_t *open;    /* the frames open now, root first */
  double *since;     /* when each opened */
  size_t nopen, cap;
  int first;
  uint32_t pid;
  int oom;
  /* the sample held back until the next (see chromium_sample) */
  int have;
  uint64_t held_thread;
  double held_us;
  uint32_t *held;
  size_t nheld, capheld;
};

/* Closes the frames open deeper than keep. Outer frames are written first: a parent and a child
 * that opened and close together have the same start and length, and viewers break that tie by
 * file order (leaf first would show the leaf as the root). A frame that lasted no time (opened
 * by a thread's last sample, which stands for no time) is left out. */
static void chromium_close(struct chromium *c, size_t keep, double t_us) {
  for (size_t i = keep; i < c->nopen; i++) {
    if (t_us <= c->since[i]) continue;
    fprintf(c->fp, "%s{\"name\":", c->first ? "" : ",\n");
    c->first = 0;
    dnt_json_string(c->fp, dnt_profile_name(c->prof, c->open[i]));
    fprintf(c->fp, ",\"cat\":\"sample\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,\"tid\":%llu}", c->since[i],
            t_us - c->since[i], c->pid, (unsigned long long)c->thread);
  }
  if (c->nopen > keep) c->nopen = keep;
}

/* One sample that is not its thread's last: frames that differ from the open ones close, new
 * ones open. */
static void chromium_apply(struct chromium *c, uint64_t thread, double t_us, const uint32_t *frames, size_t n) {
  c->thread = thread;
  size_t same = 0;
  while (same < n && same < c->nopen && c->open[same] == frames[same]) same++;
  chromium_close(c, same, t_us);
  if (c->oom) return;
  if (n > c->cap) {
    uint32_t *open = realloc(c->open, n * 2 * sizeof *c->open);
    if (open) c->open = open;
    double *since = open ? realloc(c->since, n * 2 * sizeof *c->since) : NULL;
    if (since) c->since = since;
    if (!open || !since) {
      c->oom = 1;
      return;
    }
    c->cap = n * 2;
  }
  for (size_t i = same; i < n; i++) {
    c->open[i] = frames[i];
    c->since[i] = t_us;
  }
  c->nopen = n;
}

/* Samples come a thread at a time, in time order; each is held until the next shows whether it
 * was its thread's last. The last one stands for no time (the weights' rule, dnt-profile.h): the
 * thread's frames all end at it, in one go, so that frames ending together are written outer
 * first (closing the leaf first at that instant would make it a parent's twin, written before
 * it). */
static void chromium_sample(void *ud, uint64_t thread, double t_us, const uint32_t *frames, size_t n) {
  struct chromium *c = ud;
  if (c->oom) return;
  if (c->have) {
    if (c->held_thread == thread) chromium_apply(c, c->held_thread, c->held_us, c->held, c->nheld);
    else chromium_close(c, 0, c->held_us);
  }
  if (n > c->capheld) {
    uint32_t *h = realloc(c->held, n * 2 * sizeof *h);
    if (!h) {
      c->oom = 1;
      return;
    }
    c->held = h;
    c->capheld = n * 2;
  }
  if (n) memcpy(c->held, frames, n * sizeof *frames);
  c->nheld = n;
  c->held_thread = thread;
  c->held_us = t_us;
  c->have = 1;
}

static int write_chromium(FILE *fp, const struct dnt_profile *prof, uint32_t pid) {
  struct chromium c = {.fp = fp, .prof = prof, .first = 1, .pid = pid};
  fputs("{\"traceEvents\":[\n", fp);
  int rc = dnt_profile_each_sample(prof, chromium_sample, &c);
  if (c.have) chromium_close(&c, 0, c.held_us); /* the last thread's end */
  fputs("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"dntrace " PACKAGE_VERSION "\"}}\n", fp);
  free(c.open);
  free(c.since);
  free(c.held);
  return rc || c.oom ? -1 : 0;
}

static int write_speedscope(FILE *fp, const struct dnt_profile *prof, const char *name) {
  int rc = 0;
  int by_time = dnt_profile_weight(prof) == DNT_WEIGHT_TIME;
  struct writer w = {fp, prof, 0, by_time, 1, 0};
  fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":[", fp);
  for (size_t i = 0; i < dnt_profile_nnames(prof); i++) {
    fputs(i ? ",{\"name\":" : "{\"name\":", fp);
    dnt_json_string(fp, dnt_profile_name(prof, (uint32_t)i));
    fputc('}', fp);
  }
  fputs("]},\"profiles\":[", fp);
  size_t written = 0;
  for (size_t t = 0; t < dnt_profile_nthreads(prof); t++) {
    /* a thread with no time (one sample: it stands for none) would be an empty profile */
    if (by_time && !(dnt_profile_thread_ms(prof, t) > 0)) continue;
    w.thread = dnt_profile_thread_id(prof, t);
    /* endValue: the thread's total, its time (ms) or its samples (speedscope's unit "none") */
    fprintf(fp, "%s{\"type\":\"sampled\",\"name\":\"Thread %llu\",\"unit\":\"%s\",\"startValue\":0,",
            written++ ? "," : "", (unsigned long long)w.thread, by_time ? "milliseconds" : "none");
    if (by_time) fprintf(fp, "\"endValue\":%.9g,\"samples\":[", dnt_profile_thread_ms(prof, t));
    else fprintf(fp, "\"endValue\":%llu,\"samples\":[", (unsigned long long)dnt_profile_thread_samples(prof, t));
    w.first = 1;
    w.pass = 0;
    rc |= dnt_profile_each_stack(prof, speedscope_item, &w);
    fputs("],\"weights\":[", fp);
    w.first = 1;
    w.pass = 1;
    rc |= dnt_profile_each_stack(prof, speedscope_item, &w);
    fputs("]}", fp);
  }
  fputs("],\"name\":", fp);
  dnt_json_string(fp, name);
  fputs(",\"activeProfileIndex\":0,\"exporter\":\"dntrace " PACKAGE_VERSION "\"}\n", fp);
  return rc ? -1 : 0;
}

int dnt_profile_write(const struct dnt_profile *prof, enum dnt_profile_format format, const char *title, FILE *fp) {
  switch (format) {
  case DNT_PROFILE_SPEEDSCOPE: return write_speedscope(fp, prof, title);
  case DNT_PROFILE_CHROMIUM: return write_chromium(fp, prof, dnt_profile_pid(prof));
  case DNT_PROFILE_FOLDED: {
    struct writer w = {fp, prof, 0, dnt_profile_weight(prof) == DNT_WEIGHT_TIME, 1, 0};
    return each_named_stack(prof, folded_line, &w);
  }
  }
  return -1;
}
