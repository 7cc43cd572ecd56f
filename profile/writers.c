/* The profile's text writers: folded stacks, speedscope and the Chromium trace format, streamed
 * to a FILE * (dnt-profile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile-int.h"
#include "dnt-trace.h"

struct writer {
  FILE *fp;
  const struct dnt_profile *prof;
  uint64_t thread; /* speedscope: the thread being written */
  int by_time;     /* weights in time (ms) or bytes (DNT_WEIGHT_BYTES), else in samples */
  int first;
  int pass;        /* speedscope: 0 samples, 1 weights */
};

/* speedscope's unit of the profile's weights */
static const char *unit_name(const struct dnt_profile *prof) {
  switch (dnt_profile_weight(prof)) {
  case DNT_WEIGHT_TIME: return "milliseconds";
  case DNT_WEIGHT_BYTES: return "bytes";
  default: return "none";
  }
}

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
 * The value is an integer (flamegraph.pl, inferno): microseconds of thread time, bytes, or samples. A
 * stack whose time rounds to 0 (threads' last samples, which stand for no time) is left out. */
static void folded_line(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct writer *w = ud;
  int bytes = dnt_profile_weight(w->prof) == DNT_WEIGHT_BYTES;
  double v = bytes ? ms + 0.5 : ms * 1000.0 + 0.5;
  /* a weight past what an integer holds (a hostile trace's amounts) is written as the largest */
  uint64_t value = !w->by_time ? samples : v < 1.8e19 ? (uint64_t)v : UINT64_MAX;
  if (value == 0) return;
  int heap = dnt_profile_source(w->prof) == DNT_SOURCE_HEAP; /* no thread: the heap's root first */
  if (!heap) fprintf(w->fp, "Thread %llu", (unsigned long long)thread);
  for (size_t i = 0; i < n; i++) {
    if (i || !heap) fputc(';', w->fp);
    /* ';' separates frames, ' ' ends them and a newline the stack: keep names from breaking the
     * format (and a terminal reading it from acting on them) */
    char name[4 * 1200 + 1];
    dnt_text_escape(name, sizeof name, dnt_profile_name(w->prof, frames[i]));
    for (const char *c = name; *c; c++) fputc(*c == ';' ? ':' : *c == ' ' ? '_' : *c, w->fp);
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
static void chromium_sample(void *ud, uint64_t thread, double t_us, double ms, const uint32_t *frames, size_t n) {
  struct chromium *c = ud;
  if (c->oom) return;
  if (c->have) {
    if (c->held_thread == thread) chromium_apply(c, c->held_thread, c->held_us, c->held, c->nheld);
    else chromium_close(c, 0, c->held_us);
  }
  if (!frames) { /* a sample the view hides: the held one's frames end here */
    if (c->have && c->held_thread == thread) chromium_close(c, 0, t_us);
    c->have = 0;
    return;
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

/* What viewers call the process: its program's file name from the command line the runtime
 * reported (ProcessInfo), else the title's file name (the trace's). */
static void process_name(const struct dnt_profile *prof, const char *title, char *out, size_t cap) {
  const char *cmd = dnt_profile_command_line(prof);
  if (!cmd || !*cmd) {
    const char *slash = title ? strrchr(title, '/') : NULL;
    snprintf(out, cap, "%s", slash && slash[1] ? slash + 1 : title ? title : "");
    return;
  }
  const char *start = cmd, *end;
  if (*start == '"') { /* a quoted program path */
    start++;
    end = strchr(start, '"');
  } else {
    end = strchr(start, ' ');
  }
  if (!end) end = start + strlen(start);
  for (const char *c = start; c < end; c++)
    if (*c == '/' || *c == '\\') start = c + 1;
  snprintf(out, cap, "%.*s", (int)(end - start), start);
}

/* A thread's name for people: the trace's name for it, else "Thread TID". */
static const char *thread_label(const struct dnt_profile *prof, uint64_t thread, char *buf, size_t cap) {
  const char *name = dnt_profile_thread_name(prof, thread);
  if (name && *name) return name;
  snprintf(buf, cap, "Thread %llu", (unsigned long long)thread);
  return buf;
}

/* A speedscope profile's name: "NAME (TID)" (speedscope lists names alone, and a pool has forty
 * threads of one name), else "Thread TID". */
static const char *profile_label(const struct dnt_profile *prof, uint64_t thread, char *buf, size_t cap) {
  const char *name = dnt_profile_thread_name(prof, thread);
  if (name && *name) snprintf(buf, cap, "%s (%llu)", name, (unsigned long long)thread);
  else snprintf(buf, cap, "Thread %llu", (unsigned long long)thread);
  return buf;
}

/* Metadata ("M") events: the names viewers show for the process and each thread. */
static void chromium_names(FILE *fp, const struct dnt_profile *prof, uint32_t pid, const char *title) {
  char name[1024], buf[64];
  process_name(prof, title, name, sizeof name);
  fprintf(fp, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":", pid);
  dnt_json_string(fp, name);
  fputs("}}", fp);
  for (size_t t = 0; t < dnt_profile_nthreads(prof); t++) {
    uint64_t thread = dnt_profile_thread_id(prof, t);
    fprintf(fp, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%llu,\"args\":{\"name\":", pid,
            (unsigned long long)thread);
    dnt_json_string(fp, thread_label(prof, thread, buf, sizeof buf));
    fputs("}}", fp);
  }
}

static int write_chromium(FILE *fp, const struct dnt_profile *prof, uint32_t pid, const char *title) {
  struct chromium c = {.fp = fp, .prof = prof, .first = 0, .pid = pid};
  fputs("{\"traceEvents\":[\n", fp);
  chromium_names(fp, prof, pid, title);
  int rc = dnt_profile_each_sample(prof, chromium_sample, &c);
  if (c.have) chromium_close(&c, 0, c.held_us); /* the last thread's end */
  fputs("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"dntrace " PACKAGE_VERSION "\"}}\n", fp);
  free(c.open);
  free(c.since);
  free(c.held);
  return rc || c.oom ? -1 : 0;
}

/* speedscope, from the timeline: one sampled profile per thread whose samples are in time order
 * (speedscope's "time order" view draws them left to right as they came), a run of samples with
 * the same stack written as one sample of their summed weight. A sample weighs what the model
 * gave it (dnt-profile.h: the time to its thread's next; a thread's last stands for none, and a
 * run that stands for no time is left out, as a thread with none is), or 1 with --weight samples.
 * The timeline is sorted by thread, then time; a run is written once the next sample has ended
 * it, its weight in the list after the profile's samples. */
struct timeline {
  FILE *fp;
  const struct dnt_profile *prof;
  int by_time;
  int open;          /* a profile is open, for thread */
  size_t nprofiles;
  /* the run not yet written: its thread, stack and weight so far */
  int pending;
  uint64_t thread;
  uint32_t *run;
  size_t nrun, caprun;
  double weight;
  double *weights;   /* of the open profile's samples, written after them */
  size_t nweights, capweights;
  double start_ms;   /* the open profile's first sample, from the trace's start (by time) */
  int started;       /* a thread's samples have begun (thread is theirs) */
  double best;       /* the heaviest profile so far, shown first (activeProfileIndex) */
  size_t best_index;
  int oom;
};

/* Writes the pending run into its thread's profile (opened by its first run). */
static void timeline_flush(struct timeline *t) {
  if (!t->pending) return;
  t->pending = 0;
  if (t->by_time && !(t->weight > 0)) return;
  if (!t->open) {
    char buf[600];
    fputs(t->nprofiles++ ? ",{\"type\":\"sampled\",\"name\":" : "{\"type\":\"sampled\",\"name\":", t->fp);
    dnt_json_string(t->fp, profile_label(t->prof, t->thread, buf, sizeof buf));
    /* by time, a thread's profile starts where its first sample is in the trace, as TraceEvent's
     * speedscope files place them: threads line up in time */
    fprintf(t->fp, ",\"unit\":\"%s\",\"startValue\":%.9g,\"samples\":[", unit_name(t->prof),
            t->by_time ? t->start_ms : 0.0);
    t->open = 1;
  }
  if (t->nweights == t->capweights) {
    size_t cap = t->capweights ? t->capweights * 2 : 1024;
    double *g = realloc(t->weights, cap * sizeof *g);
    if (!g) return (void)(t->oom = 1);
    t->weights = g;
    t->capweights = cap;
  }
  fputs(t->nweights ? ",[" : "[", t->fp);
  for (size_t i = 0; i < t->nrun; i++) fprintf(t->fp, "%s%u", i ? "," : "", t->run[i]);
  fputc(']', t->fp);
  t->weights[t->nweights++] = t->weight;
}

/* Ends the open profile: its weights, and their sum as its endValue. */
static void timeline_close(struct timeline *t) {
  timeline_flush(t);
  if (!t->open) return;
  double total = 0;
  fputs("],\"weights\":[", t->fp);
  for (size_t i = 0; i < t->nweights; i++) {
    fprintf(t->fp, "%s%.9g", i ? "," : "", t->weights[i]);
    total += t->weights[i];
  }
  fprintf(t->fp, "],\"endValue\":%.9g}", (t->by_time ? t->start_ms : 0.0) + total);
  if (total > t->best) t->best = total, t->best_index = t->nprofiles - 1;
  t->open = 0;
  t->nweights = 0;
}

static void timeline_sample(void *ud, uint64_t thread, double t_us, double ms, const uint32_t *frames, size_t n) {
  struct timeline *t = ud;
  if (t->oom) return;
  if (!t->started || thread != t->thread) {
    timeline_close(t); /* another thread: its profile begins at its first sample shown */
    t->thread = thread;
    t->started = 1;
    t->start_ms = -1;
  }
  if (!frames) return; /* a sample the view hides: it ended the one before, and stands for nothing */
  double w = t->by_time ? ms : 1;
  if (t->pending && n == t->nrun && memcmp(frames, t->run, n * sizeof *frames) == 0) { /* the run goes on */
    t->weight += w;
    return;
  }
  timeline_flush(t);
  if (t->start_ms < 0) t->start_ms = t_us > 0 ? t_us / 1000.0 : 0;
  if (n > t->caprun) {
    uint32_t *g = realloc(t->run, n * 2 * sizeof *g);
    if (!g) return (void)(t->oom = 1);
    t->run = g;
    t->caprun = n * 2;
  }
  if (n) memcpy(t->run, frames, n * sizeof *frames);
  t->nrun = n;
  t->weight = w;
  t->pending = 1;
}

/* Counts the samples of the timeline (0 when the profile keeps none). */
static void count_sample(void *ud, uint64_t thread, double t_us, double ms, const uint32_t *frames, size_t n) {
  (void)thread, (void)t_us, (void)ms, (void)n;
  if (frames) ++*(size_t *)ud;
}

static int write_speedscope(FILE *fp, const struct dnt_profile *prof, const char *name) {
  int rc = 0;
  int by_time = dnt_profile_weight(prof) != DNT_WEIGHT_SAMPLES;
  struct writer w = {fp, prof, 0, by_time, 1, 0};
  size_t timed = 0;
  if (dnt_profile_each_sample(prof, count_sample, &timed) != 0) return -1;
  fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":[", fp);
  for (size_t i = 0; i < dnt_profile_nnames(prof); i++) {
    fputs(i ? ",{\"name\":" : "{\"name\":", fp);
    dnt_json_string(fp, dnt_profile_name(prof, (uint32_t)i));
    fputc('}', fp);
  }
  fputs("]},\"profiles\":[", fp);
  size_t active = 0; /* the busiest thread's profile is the one shown first, not the idle main thread's */
  if (timed) {
    struct timeline t = {.fp = fp, .prof = prof, .by_time = by_time};
    rc = dnt_profile_each_sample(prof, timeline_sample, &t);
    timeline_close(&t);
    active = t.best_index;
    free(t.run);
    free(t.weights);
    rc = rc || t.oom ? -1 : 0;
  } else { /* no timeline kept: each distinct stack once, in the order first seen */
    size_t written = 0;
    double best = 0;
    for (size_t t = 0; t < dnt_profile_nthreads(prof); t++) {
      /* a thread with no time (one sample: it stands for none) would be an empty profile */
      if (by_time && !(dnt_profile_thread_ms(prof, t) > 0)) continue;
      char buf[600];
      w.thread = dnt_profile_thread_id(prof, t);
      double weight = by_time ? dnt_profile_thread_ms(prof, t) : (double)dnt_profile_thread_samples(prof, t);
      if (weight > best) best = weight, active = written;
      fputs(written++ ? ",{\"type\":\"sampled\",\"name\":" : "{\"type\":\"sampled\",\"name\":", fp);
      dnt_json_string(fp, profile_label(prof, w.thread, buf, sizeof buf));
      /* endValue: the thread's total, its time (ms) or its samples (speedscope's unit "none") */
      fprintf(fp, ",\"unit\":\"%s\",\"startValue\":0,", unit_name(prof));
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
  }
  fputs("],\"name\":", fp);
  dnt_json_string(fp, name);
  fprintf(fp, ",\"activeProfileIndex\":%zu,\"exporter\":\"dntrace " PACKAGE_VERSION "\"}\n", active);
  return rc ? -1 : 0;
}

int dnt_profile_write(const struct dnt_profile *prof, enum dnt_profile_format format, const char *title, FILE *fp) {
  switch (format) {
  case DNT_PROFILE_SPEEDSCOPE: return write_speedscope(fp, prof, title);
  case DNT_PROFILE_CHROMIUM: return write_chromium(fp, prof, dnt_profile_pid(prof), title);
  case DNT_PROFILE_PPROF: return dnt__pprof_write(prof, title, fp);
  case DNT_PROFILE_FOLDED: {
    struct writer w = {fp, prof, 0, dnt_profile_weight(prof) != DNT_WEIGHT_SAMPLES, 1, 0};
    return each_named_stack(prof, folded_line, &w);
  }
  }
  return -1;
}
