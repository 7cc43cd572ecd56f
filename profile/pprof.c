/* The pprof writer: the profile as google/pprof's profile.proto, gzip-compressed, as `go tool
 * pprof` and every pprof consumer read it.
 *
 * What goes where:
 * - sample_type: [samples/count, wall/nanoseconds] for the SampleProfiler's thread time, or
 *   [samples/count, cpu/nanoseconds] for a CPU sampler's (perf); the time is the default. An
 *   allocation profile: [samples/count, alloc_space/bytes] for an analysis weighing its events in
 *   bytes (DNT_WEIGHT_BYTES: `allocs`), its period the runtime's mean 102400 bytes between
 *   allocation events; [alloc_objects/count, alloc_space/bytes] for serve's allocs endpoint
 *   (DNT_SOURCE_ALLOCATIONS), the space the default, as Go's allocs profile; a threads profile:
 *   [threads/count] (Go's goroutine profile has [goroutine/count]); a heap snapshot:
 *   [inuse_objects/count, inuse_space/bytes], Go's heap profile's names, the space the default,
 *   period 1 (no object left out), no thread label.
 *   The blocked time of `waits` (one sample a wait, weighing its length) is wall time too.
 * - sample: one per distinct (thread, stack) of the profile, locations leaf first, the labels
 *   thread_id (a number) and thread_name where the profile knows it (perf's comm, the names
 *   compare shows; an EventPipe trace names no thread).
 * - location and function: one per function name, as `dntrace report` prints it (the profile
 *   names its frames by function, not by address: the address is left out). name is that name;
 *   system_name the method without its module ("Namespace.Type.Method"), which also keeps pprof
 *   from "simplifying" name: pprof takes a name equal to its system_name for demangled C++ and
 *   cuts what is between < and > (`<Main>b__0_0`, `<Run>d__21` of lambdas and async methods);
 *   a name without a module (a runtime stub, UNMANAGED_CODE_TIME) has none ("") for that reason;
 *   filename is the module, so `pprof -files` groups by module.
 * - mapping: one per module (the name's part before '!'), file-less: memory_start and limit are
 *   0, filename is the module's name, has_functions is set (the names are final, nothing to
 *   symbolize). UNMANAGED_CODE_TIME and `?!0x...` frames have no module, hence no mapping.
 * - period_type/period: the sampling interval; time_nanos: the trace's start; duration_nanos:
 *   from there to the last sample.
 *
 * Written in one pass over the stacks in the order of profile.proto's field numbers, each
 * top-level element deflated as soon as it is encoded: memory follows the distinct stacks and
 * names, never the file. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile-int.h"
#include "protobuf-int.h"

/* profile.proto's field numbers */
enum {
  PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
  PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10,
  PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12, PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
  VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2,
  SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
  LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3,
  MAPPING_ID = 1, MAPPING_FILENAME = 5, MAPPING_HAS_FUNCTIONS = 7,
  LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_LINE = 4,
  LINE_FUNCTION_ID = 1,
  FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
};

/* The string table: these first, then the thread names, the modules, the function names by id,
 * and the system names of the functions that have a module, in id order. */
enum { S_EMPTY, S_SAMPLES, S_COUNT, S_TIME, S_NANOSECONDS, S_THREAD_ID, S_THREAD_NAME, S_TITLE, S_WHAT, S_FIXED };

struct thread {
  uint64_t id;
  const char *name; /* NULL: none known */
  int64_t str;      /* its string index */
};

struct module {
  const char *name; /* a function's name: the module is its first len bytes */
  size_t len;
  uint32_t fn;      /* that function's id */
};

struct pprof {
  const struct dnt_profile *prof;
  FILE *fp;
  z_stream z;
  int zerr;
  struct dnt__pb msg, sub, head; /* a top-level element, a nested message, a key and length */
  uint64_t *ids;                 /* a sample's location ids, leaf first */
  size_t capids;
  uint8_t *used;                 /* per function id: on some sample's stack */
  uint32_t *mapping_of;          /* per function id: its mapping's id, 0 for none */
  struct module *mods;           /* the distinct modules, by name; mapping id = index + 1 */
  size_t nmods;
  struct thread *threads;        /* by id, for bsearch */
  size_t nthreads;
  int64_t mod0;                  /* the first module's string index */
  int64_t label0;                /* the profile's labels' first string index (key, value, ...) */
  uint32_t main_fn;              /* the root frame named *.Main of the heaviest such stack, + 1 */
  uint64_t main_samples;
  double sample_ms;
  int nvalues; /* sample types: 2, or 1 for a threads profile */
  int bytes;   /* the second value is bytes (an allocation profile): [.., alloc_space/bytes] */
  int oom;
  uint8_t out[65536];
};

/* Deflates n bytes into fp (flush: Z_FINISH for the end of the file). */
static void deflate_out(struct pprof *w, const void *data, size_t n, int flush) {
  const uint8_t *p = data;
  do {
    size_t chunk = n > (1u << 30) ? (1u << 30) : n; /* avail_in is a uInt */
    w->z.next_in = (Bytef *)(uintptr_t)p;
    w->z.avail_in = (uInt)chunk;
    p += chunk;
    n -= chunk;
    int f = n ? Z_NO_FLUSH : flush;
    for (;;) {
      if (w->zerr) return;
      w->z.next_out = w->out;
      w->z.avail_out = sizeof w->out;
      int rc = deflate(&w->z, f);
      size_t have = sizeof w->out - w->z.avail_out;
      if (rc == Z_STREAM_ERROR || (have && fwrite(w->out, 1, have, w->fp) != have)) {
        w->zerr = 1; /* a write error is the caller's to see on fp */
        return;
      }
      if (f == Z_FINISH ? rc == Z_STREAM_END : w->z.avail_out != 0) break;
    }
  } while (n);
}

/* Writes the top-level element in w->msg as field, then empties it. */
static void emit(struct pprof *w, uint32_t field) {
  dnt__pb_reset(&w->head);
  dnt__pb_key(&w->head, field, DNT__PB_LEN);
  dnt__pb_varint(&w->head, w->msg.len);
  if (w->msg.oom || w->head.oom) w->oom = 1;
  if (w->oom) return;
  deflate_out(w, w->head.buf, w->head.len, Z_NO_FLUSH);
  deflate_out(w, w->msg.buf, w->msg.len, Z_NO_FLUSH);
  dnt__pb_reset(&w->msg);
}

static void emit_string(struct pprof *w, const char *s, size_t n) {
  dnt__pb_bytes(&w->msg, PROFILE_STRING_TABLE, s, n);
  if (w->msg.oom) w->oom = 1;
  if (w->oom) return;
  deflate_out(w, w->msg.buf, w->msg.len, Z_NO_FLUSH);
  dnt__pb_reset(&w->msg);
}

/* A ValueType {type, unit} as field of the element being built. */
static void value_type(struct pprof *w, struct dnt__pb *into, uint32_t field, int64_t type, int64_t unit) {
  dnt__pb_reset(&w->sub);
  dnt__pb_int(&w->sub, VALUE_TYPE_TYPE, type);
  dnt__pb_int(&w->sub, VALUE_TYPE_UNIT, unit);
  dnt__pb_message(into, field, &w->sub);
}

/* A stack's time in ns, as the profile weighs its samples (dnt-profile.h: each the time to its
 * thread's next sample; perf's, the period): rounded, never negative. */
static int64_t stack_time_ns(double ms) { return ms > 0 ? (int64_t)(ms * 1e6 + 0.5) : 0; }

static int by_thread(const void *a, const void *b) {
  const struct thread *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The profile's threads by id, with their names' string indexes (from S_FIXED on); the next
 * free string index. -1 when out of memory. */
static int64_t find_threads(struct pprof *w) {
  size_t n = dnt_profile_nthreads(w->prof);
  w->threads = malloc((n ? n : 1) * sizeof *w->threads);
  if (!w->threads) return -1;
  for (size_t t = 0; t < n; t++) {
    uint64_t id = dnt_profile_thread_id(w->prof, t);
    w->threads[t] = (struct thread){id, dnt_profile_thread_name(w->prof, id), 0};
  }
  w->nthreads = n;
  if (n) qsort(w->threads, n, sizeof *w->threads, by_thread);
  int64_t str = S_FIXED;
  for (size_t t = 0; t < n; t++)
    if (w->threads[t].name) w->threads[t].str = str++;
  return str;
}

/* A program's entry point at the root of a stack: Main, or what the C# compiler makes of
 * top-level statements (`Program.<Main>$`) and of an async Main (`Program.<Main>`, which calls the
 * user's). */
static int is_main(const char *name) {
  static const char *const ends[] = {".Main", ".<Main>$", ".<Main>"};
  size_t len = strlen(name);
  for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
    size_t n = strlen(ends[i]);
    if (len > n && strcmp(name + len - n, ends[i]) == 0) return 1;
  }
  return 0;
}

/* A module of the platform rather than of the program: the runtime's and ASP.NET Core's
 * assemblies, the dynamic methods' made-up assembly, native libraries and the kernel. */
static int platform_module(const char *name, size_t len) {
  static const char *const starts[] = {"System.", "Microsoft.", "mscorlib", "netstandard", "Anonymously Hosted",
                                       "lib", "[", "dotnet", "WindowsBase"};
  for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
    if (len >= strlen(starts[i]) && strncmp(name, starts[i], strlen(starts[i])) == 0) return 1;
  return memmem(name, len, ".so", 3) != NULL;
}

static void sample(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct pprof *w = ud;
  if (w->oom) return;
  if (n > w->capids) {
    uint64_t *ids = realloc(w->ids, n * sizeof *ids);
    if (!ids) {
      w->oom = 1;
      return;
    }
    w->ids = ids;
    w->capids = n;
  }
  if (samples > w->main_samples) { /* the program's Main at the root of a stack */
    if (is_main(dnt_profile_name(w->prof, frames[0]))) {
      w->main_fn = frames[0] + 1;
      w->main_samples = samples;
    }
  }
  for (size_t i = 0; i < n; i++) { /* frames come root first; pprof wants the leaf first */
    w->ids[i] = (uint64_t)frames[n - 1 - i] + 1;
    w->used[frames[i]] = 1;
  }
  uint64_t values[2] = {samples, w->bytes ? (ms > 0 && ms < 9e18 ? (uint64_t)(ms + 0.5) : ms > 0 ? INT64_MAX : 0)
                                          : (uint64_t)stack_time_ns(ms)};
  dnt__pb_packed(&w->msg, SAMPLE_LOCATION_ID, w->ids, n);
  dnt__pb_packed(&w->msg, SAMPLE_VALUE, values, (size_t)w->nvalues);
  if (dnt_profile_source(w->prof) != DNT_SOURCE_HEAP) { /* a heap's objects are no thread's */
    dnt__pb_reset(&w->sub);
    dnt__pb_int(&w->sub, LABEL_KEY, S_THREAD_ID);
    dnt__pb_int(&w->sub, LABEL_NUM, (int64_t)thread);
    dnt__pb_message(&w->msg, SAMPLE_LABEL, &w->sub);
  }
  struct thread key = {.id = thread}, *t = bsearch(&key, w->threads, w->nthreads, sizeof key, by_thread);
  if (t && t->name) {
    dnt__pb_reset(&w->sub);
    dnt__pb_int(&w->sub, LABEL_KEY, S_THREAD_NAME);
    dnt__pb_int(&w->sub, LABEL_STR, t->str);
    dnt__pb_message(&w->msg, SAMPLE_LABEL, &w->sub);
  }
  for (size_t i = 0; i < dnt_profile_nlabels(w->prof); i++) {
    dnt__pb_reset(&w->sub);
    dnt__pb_int(&w->sub, LABEL_KEY, w->label0 + 2 * (int64_t)i);
    dnt__pb_int(&w->sub, LABEL_STR, w->label0 + 2 * (int64_t)i + 1);
    dnt__pb_message(&w->msg, SAMPLE_LABEL, &w->sub);
  }
  emit(w, PROFILE_SAMPLE);
}

/* The length of the module part of a function's name ("Module!Type.Method", "lib.so!sym",
 * "[kernel]!sym"), 0 for a frame with none (UNMANAGED_CODE_TIME, `?!0x...`). */
static size_t module_len(const char *name) {
  const char *bang = strchr(name, '!');
  if (!bang || bang == name || strncmp(name, "?!", 2) == 0) return 0;
  return (size_t)(bang - name);
}

static int by_module(const void *a, const void *b) {
  const struct module *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->name, y->name, n);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

/* The distinct modules of the functions used, sorted by name, and each function's mapping; the
 * main program's first (profile.proto: "mapping[0] will be the main binary"): the module of the
 * Main at the root of the heaviest stack that has one at its root, else the first module that is
 * not the platform's (never the dynamic methods' assembly, which sorts first by name). */
static int find_modules(struct pprof *w, size_t nnames) {
  struct module *all = malloc((nnames ? nnames : 1) * sizeof *all);
  if (!all) return -1;
  size_t n = 0;
  for (size_t f = 0; f < nnames; f++) {
    const char *name = dnt_profile_name(w->prof, (uint32_t)f);
    size_t len = w->used[f] ? module_len(name) : 0;
    if (len) all[n++] = (struct module){name, len, (uint32_t)f};
  }
  if (n) qsort(all, n, sizeof *all, by_module);
  struct module main = {NULL, 0, 0};
  if (w->main_fn) {
    main.name = dnt_profile_name(w->prof, w->main_fn - 1);
    main.len = module_len(main.name);
  }
  for (size_t i = 0; i < n && !main.name; i++) /* no Main sampled: the first of the program's own */
    if (!platform_module(all[i].name, all[i].len)) main = all[i];
  for (size_t i = 0; i < n && main.name; i++) {
    if (by_module(&all[i], &main) != 0) continue;
    size_t j = i; /* move this module's run of entries to the front, keeping the order of the rest */
    while (j < n && by_module(&all[j], &all[i]) == 0) j++;
    struct module *tmp = malloc((j - i) * sizeof *tmp);
    if (!tmp) {
      free(all);
      return -1;
    }
    memcpy(tmp, all + i, (j - i) * sizeof *tmp);
    memmove(all + (j - i), all, i * sizeof *all);
    memcpy(all, tmp, (j - i) * sizeof *tmp);
    free(tmp);
    break;
  }
  w->mods = malloc((n ? n : 1) * sizeof *w->mods);
  if (!w->mods) {
    free(all);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    if (!w->nmods || by_module(&w->mods[w->nmods - 1], &all[i]) != 0) w->mods[w->nmods++] = all[i];
    w->mapping_of[all[i].fn] = (uint32_t)w->nmods;
  }
  free(all);
  return 0;
}

static int write_pprof(struct pprof *w, const char *title) {
  const struct dnt_profile *prof = w->prof;
  size_t nnames = dnt_profile_nnames(prof);
  int kind = dnt_profile_cpu_samples(prof), cpu = kind == DNT_SAMPLES_CPU;
  enum dnt_profile_source source = dnt_profile_source(prof);
  w->sample_ms = dnt_profile_sample_ms(prof);
  w->nvalues = source == DNT_SOURCE_THREADS ? 1 : 2;
  w->bytes = source == DNT_SOURCE_ALLOCATIONS || source == DNT_SOURCE_HEAP || dnt_profile_weight(prof) == DNT_WEIGHT_BYTES;
  w->used = calloc(nnames ? nnames : 1, 1);
  w->mapping_of = calloc(nnames ? nnames : 1, sizeof *w->mapping_of);
  if (!w->used || !w->mapping_of) return -1;

  dnt__pb_int(&w->msg, VALUE_TYPE_TYPE, S_SAMPLES);
  dnt__pb_int(&w->msg, VALUE_TYPE_UNIT, S_COUNT);
  emit(w, PROFILE_SAMPLE_TYPE);
  if (w->nvalues == 2) {
    dnt__pb_int(&w->msg, VALUE_TYPE_TYPE, S_TIME);
    dnt__pb_int(&w->msg, VALUE_TYPE_UNIT, S_NANOSECONDS);
    emit(w, PROFILE_SAMPLE_TYPE);
  }

  if ((w->label0 = find_threads(w)) < 0) return -1;
  w->mod0 = w->label0 + 2 * (int64_t)dnt_profile_nlabels(prof);
  if (dnt_profile_each_stack(prof, sample, w) != 0 || w->oom) return -1;
  if (find_modules(w, nnames) != 0) return -1;

  for (size_t m = 0; m < w->nmods; m++) {
    dnt__pb_uint(&w->msg, MAPPING_ID, m + 1);
    dnt__pb_int(&w->msg, MAPPING_FILENAME, w->mod0 + (int64_t)m);
    dnt__pb_bool(&w->msg, MAPPING_HAS_FUNCTIONS, 1);
    emit(w, PROFILE_MAPPING);
  }
  for (size_t f = 0; f < nnames; f++) {
    if (!w->used[f]) continue;
    dnt__pb_uint(&w->msg, LOCATION_ID, f + 1);
    dnt__pb_uint(&w->msg, LOCATION_MAPPING_ID, w->mapping_of[f]);
    dnt__pb_reset(&w->sub);
    dnt__pb_uint(&w->sub, LINE_FUNCTION_ID, f + 1);
    dnt__pb_message(&w->msg, LOCATION_LINE, &w->sub);
    emit(w, PROFILE_LOCATION);
  }
  int64_t fn0 = w->mod0 + (int64_t)w->nmods; /* the first function name's string index */
  int64_t sys = fn0 + (int64_t)nnames;          /* the next system name's (the string table's order) */
  for (size_t f = 0; f < nnames; f++) {
    if (!w->used[f]) continue;
    dnt__pb_uint(&w->msg, FUNCTION_ID, f + 1);
    dnt__pb_int(&w->msg, FUNCTION_NAME, fn0 + (int64_t)f);
    /* a name with no module has no system name ("", index 0): were it its own, pprof would cut
     * what is between its < and > (a runtime stub's `[stub] ReportStubBlock<MethodCallThunk>`) */
    dnt__pb_int(&w->msg, FUNCTION_SYSTEM_NAME, w->mapping_of[f] ? sys++ : 0);
    if (w->mapping_of[f]) dnt__pb_int(&w->msg, FUNCTION_FILENAME, w->mod0 + w->mapping_of[f] - 1);
    emit(w, PROFILE_FUNCTION);
  }

  /* the string table, in the order of the indexes used above */
  static const char *const fixed[S_TITLE] = {"", "samples", "count", NULL, "nanoseconds", "thread_id", "thread_name"};
  for (int i = 0; i < S_TITLE; i++) {
    const char *s = i == S_TIME ? (source == DNT_SOURCE_HEAP ? "inuse_space" : w->bytes ? "alloc_space" : cpu ? "cpu" : "wall")
                    : i == S_NANOSECONDS && w->bytes ? "bytes" : fixed[i];
    if (source == DNT_SOURCE_ALLOCATIONS && i == S_SAMPLES) s = "alloc_objects";
    else if (source == DNT_SOURCE_HEAP && i == S_SAMPLES) s = "inuse_objects";
    else if (source == DNT_SOURCE_THREADS && i == S_SAMPLES) s = "threads";
    emit_string(w, s, strlen(s));
  }
  emit_string(w, title ? title : "", title ? strlen(title) : 0);
  const char *what = cpu ? "dntrace " PACKAGE_VERSION ": time on a CPU, from perf's samples"
                     : source == DNT_SOURCE_ALLOCATIONS
                         ? "dntrace " PACKAGE_VERSION ": allocations, from the runtime's GCAllocationTick events (one per ~100 KB)"
                     : source == DNT_SOURCE_THREADS
                         ? "dntrace " PACKAGE_VERSION ": every managed thread's stack, from its first SampleProfiler sample"
                     : source == DNT_SOURCE_HEAP
                         ? "dntrace " PACKAGE_VERSION ": the managed heap, each object under the types that keep it alive (its dominators)"
                     : w->bytes ? "dntrace " PACKAGE_VERSION ": allocated bytes, from the runtime's allocation events"
                     : kind == DNT_SAMPLES_BLOCKED
                         ? "dntrace " PACKAGE_VERSION ": blocked time of waits, from perf's scheduler records"
                         : "dntrace " PACKAGE_VERSION ": thread time, from the runtime's SampleProfiler samples";
  char described[512];
  if (dnt_profile_description(prof)) { /* the events of an analysis, not a sampler's samples */
    snprintf(described, sizeof described, "dntrace " PACKAGE_VERSION ": %s", dnt_profile_description(prof));
    what = described;
  }
  emit_string(w, what, strlen(what));
  for (size_t t = 0; t < w->nthreads; t++) /* the thread names, in their indexes' order */
    if (w->threads[t].name) emit_string(w, w->threads[t].name, strlen(w->threads[t].name));
  for (size_t i = 0; i < 2 * dnt_profile_nlabels(prof); i++) /* the labels: key, value, ... */
    emit_string(w, dnt_profile_label(prof, i), strlen(dnt_profile_label(prof, i)));
  for (size_t m = 0; m < w->nmods; m++) emit_string(w, w->mods[m].name, w->mods[m].len);
  for (size_t f = 0; f < nnames; f++) {
    /* every id keeps its index, used or not: an unused name is an unreferenced string */
    const char *name = w->used[f] ? dnt_profile_name(prof, (uint32_t)f) : "";
    emit_string(w, name, strlen(name));
  }
  for (size_t f = 0; f < nnames; f++) { /* the system names, in the order the functions took them */
    if (!w->used[f] || !w->mapping_of[f]) continue;
    const char *name = dnt_profile_name(prof, (uint32_t)f) + module_len(dnt_profile_name(prof, (uint32_t)f)) + 1;
    emit_string(w, name, strlen(name));
  }
  int64_t space = sys; /* the last string: an allocation or heap profile's period type */
  if (source == DNT_SOURCE_ALLOCATIONS || source == DNT_SOURCE_HEAP) emit_string(w, "space", 5);

  int64_t start_ns;
  uint64_t duration_ns;
  dnt_profile_span(prof, &start_ns, &duration_ns);
  dnt__pb_int(&w->msg, PROFILE_TIME_NANOS, start_ns);
  dnt__pb_int(&w->msg, PROFILE_DURATION_NANOS, (int64_t)duration_ns);
  if (source == DNT_SOURCE_ALLOCATIONS) { /* the runtime's tick: about every 100 KB allocated */
    value_type(w, &w->msg, PROFILE_PERIOD_TYPE, space, S_NANOSECONDS); /* space/bytes, as Go's */
    dnt__pb_int(&w->msg, PROFILE_PERIOD, 100 * 1024);
  } else if (source == DNT_SOURCE_HEAP) { /* every object, none sampled */
    value_type(w, &w->msg, PROFILE_PERIOD_TYPE, space, S_NANOSECONDS);
    dnt__pb_int(&w->msg, PROFILE_PERIOD, 1);
  } else if (source == DNT_SOURCE_THREADS) {
    value_type(w, &w->msg, PROFILE_PERIOD_TYPE, S_SAMPLES, S_COUNT);
    dnt__pb_int(&w->msg, PROFILE_PERIOD, 1);
  } else {
    value_type(w, &w->msg, PROFILE_PERIOD_TYPE, S_TIME, S_NANOSECONDS);
    /* an allocation analysis's period: the runtime's mean 100 KB between allocation events */
    dnt__pb_int(&w->msg, PROFILE_PERIOD, w->bytes ? 102400 : (int64_t)(w->sample_ms * 1e6 + 0.5));
  }
  uint64_t comments[2] = {S_TITLE, S_WHAT};
  int titled = title && *title;
  dnt__pb_packed(&w->msg, PROFILE_COMMENT, comments + !titled, titled ? 2 : 1);
  /* what pprof shows first: what the profile weighs (an analysis counting events weighs counts) */
  dnt__pb_int(&w->msg, PROFILE_DEFAULT_SAMPLE_TYPE,
              w->nvalues == 2 && dnt_profile_weight(prof) != DNT_WEIGHT_SAMPLES ? S_TIME : S_SAMPLES);
  if (w->msg.oom) return -1;
  deflate_out(w, w->msg.buf, w->msg.len, Z_FINISH);
  return 0;
}

int dnt__pprof_write(const struct dnt_profile *prof, const char *title, FILE *fp) {
  struct pprof *w = calloc(1, sizeof *w);
  if (!w) return -1;
  w->prof = prof;
  w->fp = fp;
  /* 15 + 16: a gzip wrapper, as pprof files are (header time 0: the same profile, the same bytes) */
  if (deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    free(w);
    return -1;
  }
  int rc = write_pprof(w, title) != 0 || w->oom ? -1 : 0;
  if (w->zerr && !ferror(fp)) rc = -1; /* zlib itself failed, not the writes */
  deflateEnd(&w->z);
  dnt__pb_release(&w->msg);
  dnt__pb_release(&w->sub);
  dnt__pb_release(&w->head);
  free(w->ids);
  free(w->used);
  free(w->mapping_of);
  free(w->mods);
  free(w->threads);
  free(w);
  return rc;
}
