/* dntrace info TRACE: what a trace file holds, from one pass of trace/'s summary: its header,
 * the runtime that wrote it, its time span, its providers, threads and event kinds, drops and
 * truncation. Text for people, --json for scripts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "collect-native.h"
#include "dnt-perf.h"
#include "dnt-trace.h"
#include "util.h"

/* Threads shown without -v; the rest are counted on one line. */
#define INFO_THREADS 20

struct view {
  const char *path;
  const dnt_summary *s;
  const ntr_stats *st;
  int status;      /* enum dnt_trace_status */
  const char *msg; /* why it is truncated or damaged */
  struct dnt_schema *schema; /* names for the runtime's unnamed events (NULL: none) */
  char version[64];          /* the runtime's version, "" when the trace does not say */
};

static const char *status_word(int status) {
  return status == DNT_TRACE_COMPLETE ? "complete" : status == DNT_TRACE_TRUNCATED ? "truncated" : "damaged";
}

/* The runtime's version: the folder its library was loaded from (.../Microsoft.NETCore.App/8.0.10/
 * libcoreclr.so) says it exactly; else the BCL version the event carries (.NET Core 3.x still
 * reports the 4.0 of the .NET Framework there, which is why the folder comes first). */
static void runtime_version(const dnt_summary *s, char *out, size_t cap) {
  out[0] = '\0';
  if (!s->has_runtime) return;
  const char *app = strstr(s->runtime.path, "Microsoft.NETCore.App");
  if (app && (app[21] == '/' || app[21] == '\\')) {
    const char *v = app + 22;
    size_t n = strcspn(v, "/\\");
    if (n && n < cap && v[0] >= '0' && v[0] <= '9' && v[n]) {
      memcpy(out, v, n);
      out[n] = '\0';
      return;
    }
  }
  snprintf(out, cap, "%u.%u.%u", s->runtime.bcl[0], s->runtime.bcl[1], s->runtime.bcl[2]);
}

/* An unnamed event's name from the runtime's schema, else "Event(ID)" ("" when named). */
static const char *kind_name(const struct view *v, const dnt_summary_kind *k, char *buf, size_t cap) {
  if (k->name[0]) return k->name;
  const char *name = NULL;
  uint32_t nfields;
  if (v->schema && dnt_schema_lookup(v->schema, k->provider, k->event_id, 0, &name, &nfields) && name) return name;
  snprintf(buf, cap, "Event(%u)", k->event_id);
  return buf;
}

static double seconds(const dnt_summary *s, uint64_t ticks) {
  return s->header.qpc_frequency ? (double)ticks / (double)s->header.qpc_frequency : 0;
}

/* The header's SYSTEMTIME (year, month, day of week, day, h, m, s, ms) as ISO 8601 UTC. */
static void sync_time(const ntr_trace *h, char *out, size_t cap) {
  const uint16_t *t = h->start_time;
  snprintf(out, cap, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", t[0], t[1], t[3], t[4], t[5], t[6], t[7]);
}

/* before, the text escaped (it is the trace's word: no control sequence reaches the terminal),
 * after */
static void print_safe(const char *before, const char *text, const char *after) {
  char *safe = dnt_safe_text(text);
  printf("%s%s%s", before, safe, after);
  free(safe);
}

static void print_text(const struct view *v, int verbose) {
  const dnt_summary *s = v->s;
  const ntr_trace *h = &s->header;
  char when[64];
  print_safe("Trace               : ", v->path, "\n");
  if (h->format == NTR_FORMAT_V6)
    printf("Format              : NetTrace V6.%u\n", h->minor_version);
  else if (h->format == NTR_FORMAT_NETPERF)
    printf("Format              : NetPerf V3 (.NET Core 2.x)\n");
  else
    printf("Format              : NetTrace V4/V5 (FastSerialization)\n");
  printf("Pointer size        : %u bytes\n", h->pointer_size);
  if (h->process_id)
    printf("Process ID          : %u\n", h->process_id);
  else
    printf("Process ID          : (not in the trace)\n");
  if (v->version[0]) {
    printf("Runtime version     : %s\n", v->version);
    print_safe("Runtime library     : ", s->runtime.path, "\n");
  } else {
    printf("Runtime version     : (not in the trace: no rundown)\n");
  }
  if (h->cpu_count) printf("CPUs                : %u\n", h->cpu_count);
  if (h->sampling_interval_ns)
    printf("Sampling interval   : %.3f ms (the runtime's expected CPU sampling interval)\n",
           h->sampling_interval_ns / 1e6);
  printf("Clock frequency     : %llu Hz\n", (unsigned long long)h->qpc_frequency);
  sync_time(h, when, sizeof when);
  printf("Sync time (UTC)     : %s (clock %llu)\n", when, (unsigned long long)h->sync_time_qpc);
  if (s->events)
    printf("Duration            : %.6f s (first to last event; the first at +%.6f s)\n",
           seconds(s, s->last_timestamp - s->first_timestamp),
           seconds(s, s->first_timestamp - h->sync_time_qpc));
  printf("Events              : %llu", (unsigned long long)s->events);
  if (s->unknown_events) printf(" (%llu without metadata)", (unsigned long long)s->unknown_events);
  printf("\nSamples             : %llu (SampleProfiler)\n", (unsigned long long)s->samples);
  printf("Dropped events      : %llu (gaps in the writers' sequence numbers)\n",
         (unsigned long long)v->st->dropped_events);
  printf("State               : %s", status_word(v->status));
  if (v->status != DNT_TRACE_COMPLETE) print_safe(": ", v->msg, "");
  putchar('\n');

  printf("\nProviders (%zu):\n  %12s  %s\n", s->nproviders, "Events", "Provider");
  for (size_t i = 0; i < s->nproviders; i++) {
    printf("  %12llu  ", (unsigned long long)s->providers[i].events);
    print_safe("", s->providers[i].name, "\n");
  }

  printf("\nThreads (%zu):\n  %12s  %12s  %s\n", s->nthreads, "Samples", "Events", "Thread");
  size_t shown = verbose || s->nthreads <= INFO_THREADS ? s->nthreads : INFO_THREADS;
  for (size_t i = 0; i < shown; i++) {
    const dnt_summary_thread *t = &s->threads[i];
    printf("  %12llu  %12llu  %llu", (unsigned long long)t->samples, (unsigned long long)t->events,
           (unsigned long long)t->id);
    if (t->name) print_safe(" (", t->name, ")");
    putchar('\n');
  }
  if (shown < s->nthreads) printf("  ... %zu more threads (-v shows them all)\n", s->nthreads - shown);

  if (!verbose) return;
  printf("\nEvents by kind (%zu):\n  %12s  %6s  %s\n", s->nkinds, "Events", "ID", "Provider/Name");
  for (size_t i = 0; i < s->nkinds; i++) {
    const dnt_summary_kind *k = &s->kinds[i];
    char buf[32];
    printf("  %12llu  %6u  ", (unsigned long long)k->count, k->event_id);
    print_safe("", k->provider, "/");
    print_safe("", kind_name(v, k, buf, sizeof buf), "\n");
  }
}

static void json_key(const char *key, int first) { printf("%s\n  \"%s\": ", first ? "" : ",", key); }

static void json_u64(const char *key, uint64_t n) {
  json_key(key, 0);
  printf("%llu", (unsigned long long)n);
}

static void print_json(const struct view *v) {
  const dnt_summary *s = v->s;
  const ntr_trace *h = &s->header;
  char when[64];
  fputs("{", stdout);
  json_key("trace", 1);
  dnt_json_string(stdout, v->path);
  json_u64("format", (uint64_t)h->format);
  json_u64("minorVersion", h->minor_version);
  json_u64("pointerSize", h->pointer_size);
  json_key("processId", 0);
  h->process_id ? printf("%u", h->process_id) : fputs("null", stdout);
  json_key("runtimeVersion", 0);
  v->version[0] ? dnt_json_string(stdout, v->version) : (void)fputs("null", stdout);
  json_key("runtimeLibrary", 0);
  s->has_runtime ? dnt_json_string(stdout, s->runtime.path) : (void)fputs("null", stdout);
  json_key("cpuCount", 0);
  h->cpu_count ? printf("%u", h->cpu_count) : fputs("null", stdout);
  json_key("samplingIntervalNs", 0);
  h->sampling_interval_ns ? printf("%u", h->sampling_interval_ns) : fputs("null", stdout);
  json_u64("clockFrequency", h->qpc_frequency);
  json_u64("syncTimeClock", h->sync_time_qpc);
  sync_time(h, when, sizeof when);
  json_key("syncTimeUtc", 0);
  dnt_json_string(stdout, when);
  json_u64("events", s->events);
  json_u64("eventsWithoutMetadata", s->unknown_events);
  json_key("firstEventClock", 0);
  s->events ? printf("%llu", (unsigned long long)s->first_timestamp) : fputs("null", stdout);
  json_key("lastEventClock", 0);
  s->events ? printf("%llu", (unsigned long long)s->last_timestamp) : fputs("null", stdout);
  json_key("durationSeconds", 0);
  s->events ? printf("%.9f", seconds(s, s->last_timestamp - s->first_timestamp)) : fputs("null", stdout);
  json_u64("samples", s->samples);
  json_u64("droppedEvents", v->st->dropped_events);
  json_key("state", 0);
  dnt_json_string(stdout, status_word(v->status));
  json_key("stateMessage", 0);
  v->status != DNT_TRACE_COMPLETE ? dnt_json_string(stdout, v->msg) : (void)fputs("null", stdout);

  json_key("providers", 0);
  fputs("[", stdout);
  for (size_t i = 0; i < s->nproviders; i++) {
    fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", stdout);
    dnt_json_string(stdout, s->providers[i].name);
    printf(", \"events\": %llu}", (unsigned long long)s->providers[i].events);
  }
  fputs(s->nproviders ? "\n  ]" : "]", stdout);

  json_key("threads", 0);
  fputs("[", stdout);
  for (size_t i = 0; i < s->nthreads; i++) {
    const dnt_summary_thread *t = &s->threads[i];
    printf("%s\n    {\"id\": %llu, \"name\": ", i ? "," : "", (unsigned long long)t->id);
    t->name ? dnt_json_string(stdout, t->name) : (void)fputs("null", stdout);
    printf(", \"events\": %llu, \"samples\": %llu}", (unsigned long long)t->events, (unsigned long long)t->samples);
  }
  fputs(s->nthreads ? "\n  ]" : "]", stdout);

  json_key("eventKinds", 0);
  fputs("[", stdout);
  for (size_t i = 0; i < s->nkinds; i++) {
    const dnt_summary_kind *k = &s->kinds[i];
    char buf[32];
    fputs(i ? ",\n    {\"provider\": " : "\n    {\"provider\": ", stdout);
    dnt_json_string(stdout, k->provider);
    printf(", \"id\": %u, \"name\": ", k->event_id);
    dnt_json_string(stdout, kind_name(v, k, buf, sizeof buf));
    printf(", \"events\": %llu}", (unsigned long long)k->count);
  }
  fputs(s->nkinds ? "\n  ]\n}\n" : "]\n}\n", stdout);
}

static int name_summary_thread(void *ud, uint64_t tid, const char *name) {
  dnt_summary *s = ud;
  for (size_t i = 0; i < s->nthreads; i++)
    if (s->threads[i].id == tid) {
      char *copy = strdup(name);
      if (!copy) return -ENOMEM;
      free(s->threads[i].name); /* the summary's, freed with it: the file's name wins */
      s->threads[i].name = copy;
    }
  return 0;
}

int dnt_info_trace(const char *path, int json, int verbose) {
  char msg[1024];
  if (dnt_trace_zip_note(path, msg, sizeof msg) > 0) dnt_warning("%s", msg);
  dnt_summary s;
  dnt_summary_init(&s);
  ntr_callbacks cb;
  dnt_summary_callbacks(&cb);
  ntr_stats st = {0};
  int rc = dnt_trace_read(path, &cb, &s, &st, msg, sizeof msg);
  if (rc < 0 || dnt_summary_finish(&s) != 0 || !s.has_header) {
    if (s.oom)
      dnt_error("out of memory reading '%s'", path);
    else if (rc < 0 && path[strspn(path, "0123456789")] == '\0')
      dnt_error("%s (for the process %s: dntrace info -p %s)", msg, path, path);
    else
      dnt_error("%s", rc < 0 ? msg : "the trace has no header");
    dnt_summary_release(&s);
    return DNT_EXIT_FAILURE;
  }
  /* a `collect --native` recording's thread names, beside the trace (its target's /proc) */
  char *names = strcmp(path, "-") != 0 ? dnt_native_sibling(path, ".threads") : NULL;
  if (names && dnt_threads_file_each(names, name_summary_thread, &s) == -ENOMEM) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  free(names);
  struct view v = {path, &s, &st, rc, msg, NULL, ""};
  runtime_version(&s, v.version, sizeof v.version);
  char err[512];
  if (json || verbose) { /* names for the runtime's events, where the schema is installed */
    v.schema = dnt_schema_new();
    if (v.schema && dnt_schema_load_default(v.schema, err, sizeof err) != 0) {
      dnt_schema_free(v.schema);
      v.schema = NULL;
    }
  }
  if (json)
    print_json(&v);
  else
    print_text(&v, verbose);
  dnt_schema_free(v.schema);
  dnt_summary_release(&s);
  return 0;
}
