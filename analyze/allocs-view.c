/* The allocation analysis written out: the types (and the allocating stacks) as a text table, or
 * one JSON object with both. The stacks are the profile's, merged across threads by their names. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"
#include "dnt-profile.h"

#define TEXT_FRAMES 12 /* frames of a stack the text table shows (from the leaf) */

/* ---- the stacks, merged by name ---- */

struct named_stack {
  size_t off;   /* into frames; root first */
  size_t n;
  uint32_t hash;
  uint64_t samples;
  double bytes;
};

struct stacks {
  uint32_t *frames;
  size_t nframes, capframes;
  struct named_stack *v;
  size_t n, cap;
  uint32_t *index; /* open addressing: entry + 1 */
  size_t index_cap;
  int oom;
};

static uint32_t hash_frames(const uint32_t *f, size_t n) {
  uint32_t h = 2166136261u ^ (uint32_t)n;
  for (size_t i = 0; i < n; i++) h = (h ^ f[i]) * 16777619u;
  return h;
}

static int grow_index(struct stacks *s) {
  size_t cap = s->index_cap ? s->index_cap * 2 : 256;
  uint32_t *idx = calloc(cap, sizeof *idx);
  if (!idx) return -1;
  for (size_t i = 0; i < s->n; i++) {
    size_t j = s->v[i].hash & (cap - 1);
    while (idx[j]) j = (j + 1) & (cap - 1);
    idx[j] = (uint32_t)i + 1;
  }
  free(s->index);
  s->index = idx;
  s->index_cap = cap;
  return 0;
}

static void merge(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double bytes) {
  struct stacks *s = ud;
  (void)thread;
  if (s->oom) return;
  if ((s->n + 1) * 2 > s->index_cap && grow_index(s) != 0) goto oom;
  uint32_t h = hash_frames(frames, n);
  size_t j = h & (s->index_cap - 1);
  for (; s->index[j]; j = (j + 1) & (s->index_cap - 1)) {
    struct named_stack *e = &s->v[s->index[j] - 1];
    if (e->hash == h && e->n == n && (n == 0 || memcmp(s->frames + e->off, frames, n * sizeof *frames) == 0)) {
      e->samples += samples;
      e->bytes += bytes;
      return;
    }
  }
  if (s->nframes + n > s->capframes) {
    size_t cap = s->capframes ? s->capframes : 1024;
    while (s->nframes + n > cap) cap *= 2;
    uint32_t *f = realloc(s->frames, cap * sizeof *f);
    if (!f) goto oom;
    s->frames = f;
    s->capframes = cap;
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    struct named_stack *v = realloc(s->v, cap * sizeof *v);
    if (!v) goto oom;
    s->v = v;
    s->cap = cap;
  }
  if (n) memcpy(s->frames + s->nframes, frames, n * sizeof *frames);
  s->v[s->n] = (struct named_stack){s->nframes, n, h, samples, bytes};
  s->nframes += n;
  s->index[j] = (uint32_t)++s->n;
  return;
oom:
  s->oom = 1;
}

static int by_bytes_desc(const void *x, const void *y) {
  const struct named_stack *a = x, *b = y;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  return a->off < b->off ? -1 : a->off > b->off;
}

/* The profile's stacks merged by name, most bytes first; 0, or -1 when out of memory. */
/* The stacks of the table by stack: those of the profile without their type leaf (the table is
 * by allocating stack, whatever the type). */
struct stacks_load {
  struct stacks *s;
  const struct dnt_profile *p;
};

static void merge_untyped(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double bytes) {
  const struct stacks_load *l = ud;
  if (n && strncmp(dnt_profile_name(l->p, frames[n - 1]), DNT_ALLOC_TYPE_FRAME, strlen(DNT_ALLOC_TYPE_FRAME)) == 0) n--;
  merge(l->s, thread, frames, n, samples, bytes);
}

static int load_stacks(const struct dnt_allocs_analysis *a, struct stacks *s) {
  memset(s, 0, sizeof *s);
  struct stacks_load l = {s, dnt_allocs_profile(a)};
  if (dnt_profile_each_stack(l.p, merge_untyped, &l) != 0 || s->oom) return -1;
  if (s->n) qsort(s->v, s->n, sizeof *s->v, by_bytes_desc);
  return 0;
}

static void free_stacks(struct stacks *s) {
  free(s->frames);
  free(s->v);
  free(s->index);
}

/* The innermost frame of the program's own code, else the innermost managed frame, else "?". */
static const char *first_user_frame(const struct dnt_profile *p, const uint32_t *frames, size_t n) {
  for (size_t i = n; i > 0; i--)
    if (dnt__user_frame(dnt_profile_name(p, frames[i - 1]))) return dnt_profile_name(p, frames[i - 1]);
  for (size_t i = n; i > 0; i--)
    if (dnt__managed_frame(dnt_profile_name(p, frames[i - 1]))) return dnt_profile_name(p, frames[i - 1]);
  return "?";
}

/* ---- text ---- */

static double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

/* The part of a type's row on one heap, under it. */
static void heap_row(FILE *fp, double bytes, double all, uint64_t samples, double objects, int objects_known,
                     const char *heap) {
  char count[32] = "?";
  if (objects_known) snprintf(count, sizeof count, "%.0f", objects);
  fprintf(fp, "%16.0f %6.2f%% %10llu %14s    %s\n", bytes, pct(bytes, all), (unsigned long long)samples, count, heap);
}

static void text_types(FILE *fp, const struct dnt_allocs_analysis *a, size_t top) {
  size_t n;
  const dnt_alloc_type *t = dnt_allocs_types(a, &n);
  const dnt_allocs_summary *s = dnt_allocs_get_summary(a);
  fprintf(fp, "%16s %7s %10s %14s  %s\n", "Bytes (est.)", "%", "Samples", "Objects (est.)", "Type");
  for (size_t i = 0; i < n && i < top; i++) {
    char objects[32] = "?";
    if (s->objects_known) snprintf(objects, sizeof objects, "%.0f", t[i].objects);
    fprintf(fp, "%16.0f %6.2f%% %10llu %14s  ", t[i].bytes, pct(t[i].bytes, s->bytes),
            (unsigned long long)t[i].samples, objects);
    dnt_text_put(fp, t[i].name); /* the trace's words, as the frames below */
    /* the kind of heap when all of the type's objects went there; else the share that did, a row
     * of its own (13,998 strings, of them 2,000 large, read as 13,998 large strings) */
    int all_large = t[i].large_samples && t[i].large_samples == t[i].samples;
    int all_pinned = t[i].pinned_samples && t[i].pinned_samples == t[i].samples;
    fputs(all_large ? " (large objects)\n" : all_pinned ? " (pinned objects)\n" : "\n", fp);
    if (t[i].large_samples && !all_large)
      heap_row(fp, t[i].large_bytes, s->bytes, t[i].large_samples, t[i].large_objects, s->objects_known,
               "on the large object heap");
    if (t[i].pinned_samples && !all_pinned)
      heap_row(fp, t[i].pinned_bytes, s->bytes, t[i].pinned_samples, t[i].pinned_objects, s->objects_known,
               "on the pinned object heap");
  }
  if (n > top) fprintf(fp, "%16s %7s %10s %14s  (%zu more types; --top N shows more)\n", "", "", "", "", n - top);
}

static int text_stacks(FILE *fp, const struct dnt_allocs_analysis *a, size_t top) {
  struct stacks st;
  const struct dnt_profile *p = dnt_allocs_profile(a);
  const dnt_allocs_summary *s = dnt_allocs_get_summary(a);
  int rc = load_stacks(a, &st);
  for (size_t i = 0; rc == 0 && i < st.n && i < top; i++) {
    const struct named_stack *e = &st.v[i];
    const uint32_t *f = e->n ? st.frames + e->off : NULL; /* a stack of its type alone: no frames */
    fprintf(fp, "%s%.0f bytes (%.2f%%), %llu samples, from ", i ? "\n" : "", e->bytes, pct(e->bytes, s->bytes),
            (unsigned long long)e->samples);
    dnt_text_put(fp, first_user_frame(p, f, e->n));
    fputc('\n', fp);
    for (size_t k = 0; k < e->n && k < TEXT_FRAMES; k++) {
      fputs("    ", fp);
      dnt_text_put(fp, dnt_profile_name(p, f[e->n - 1 - k]));
      fputc('\n', fp);
    }
    if (e->n > TEXT_FRAMES) fprintf(fp, "    ... %zu more frames\n", e->n - TEXT_FRAMES);
  }
  if (rc == 0 && st.n > top) fprintf(fp, "\n(%zu more stacks; --top N shows more)\n", st.n - top);
  free_stacks(&st);
  return rc;
}

int dnt_allocs_write_text(FILE *fp, const struct dnt_allocs_analysis *a, size_t top, int by_stack) {
  const dnt_allocs_summary *s = dnt_allocs_get_summary(a);
  fprintf(fp, "Allocated: %.0f bytes (%.3f MB) estimated", s->bytes, s->bytes / 1e6);
  if (s->objects_known) fprintf(fp, ", %.0f objects", s->objects);
  fprintf(fp, ", %zu %s, from %llu %s events", s->types, s->types == 1 ? "type" : "types",
          (unsigned long long)s->samples, s->source);
  if (s->trace_ms > 0) fprintf(fp, " in %.3f s (%.3f MB/s)", s->trace_ms / 1000, s->bytes / 1e3 / s->trace_ms);
  fputs("\n\n", fp);
  if (by_stack) return text_stacks(fp, a, top);
  text_types(fp, a, top);
  return 0;
}

/* ---- JSON ---- */

static void jnum(FILE *fp, double v) { fprintf(fp, "%.10g", isfinite(v) ? v : 0.0); }

int dnt_allocs_write_json(FILE *fp, const struct dnt_allocs_analysis *a, size_t top) {
  const dnt_allocs_summary *s = dnt_allocs_get_summary(a);
  const struct dnt_profile *p = dnt_allocs_profile(a);
  size_t n;
  const dnt_alloc_type *t = dnt_allocs_types(a, &n);
  fputs("{\"source\":", fp);
  dnt_json_string(fp, s->source);
  fputs(",\"bytes\":", fp);
  jnum(fp, s->bytes);
  fputs(",\"objects\":", fp);
  if (s->objects_known) jnum(fp, s->objects);
  else fputs("null", fp);
  fprintf(fp, ",\"samples\":%llu,\"allocationTickEvents\":%llu,\"allocationSampledEvents\":%llu,\"traceMSec\":",
          (unsigned long long)s->samples, (unsigned long long)s->tick_events, (unsigned long long)s->sampled_events);
  jnum(fp, s->trace_ms);
  fputs(",\"types\":[", fp);
  for (size_t i = 0; i < n && i < top; i++) {
    fputs(i ? ",{\"type\":" : "{\"type\":", fp);
    dnt_json_string(fp, t[i].name);
    fputs(",\"bytes\":", fp);
    jnum(fp, t[i].bytes);
    fputs(",\"percent\":", fp);
    jnum(fp, pct(t[i].bytes, s->bytes));
    fprintf(fp, ",\"samples\":%llu,\"objects\":", (unsigned long long)t[i].samples);
    if (s->objects_known) jnum(fp, t[i].objects);
    else fputs("null", fp);
    fputs(",\"largeBytes\":", fp);
    jnum(fp, t[i].large_bytes);
    fputs(",\"pinnedBytes\":", fp);
    jnum(fp, t[i].pinned_bytes);
    fprintf(fp, ",\"largeSamples\":%llu,\"pinnedSamples\":%llu,\"largeObjects\":",
            (unsigned long long)t[i].large_samples, (unsigned long long)t[i].pinned_samples);
    if (s->objects_known) jnum(fp, t[i].large_objects);
    else fputs("null", fp);
    fputs(",\"pinnedObjects\":", fp);
    if (s->objects_known) jnum(fp, t[i].pinned_objects);
    else fputs("null", fp);
    fputc('}', fp);
  }
  fputs("],\"stacks\":[", fp);
  struct stacks st;
  int rc = load_stacks(a, &st);
  for (size_t i = 0; rc == 0 && i < st.n && i < top; i++) {
    const struct named_stack *e = &st.v[i];
    const uint32_t *f = e->n ? st.frames + e->off : NULL; /* a stack of its type alone: no frames */
    fputs(i ? ",{\"bytes\":" : "{\"bytes\":", fp);
    jnum(fp, e->bytes);
    fputs(",\"percent\":", fp);
    jnum(fp, pct(e->bytes, s->bytes));
    fprintf(fp, ",\"samples\":%llu,\"firstUserFrame\":", (unsigned long long)e->samples);
    dnt_json_string(fp, first_user_frame(p, f, e->n));
    fputs(",\"frames\":[", fp); /* leaf first */
    for (size_t k = 0; k < e->n; k++) {
      if (k) fputc(',', fp);
      dnt_json_string(fp, dnt_profile_name(p, f[e->n - 1 - k]));
    }
    fputs("]}", fp);
  }
  free_stacks(&st);
  fputs("]}\n", fp);
  return rc;
}
