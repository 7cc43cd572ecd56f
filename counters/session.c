/* The --counters grammar, the providers of a counters session and the decoding of counter
 * events (see dnt-counters.h). Wire facts: EventCounters payloads are one `Payload` object
 * whose fields are read by name; MetricsEventSource events carry their values as invariant
 * culture strings, with the session id first. */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "dnt-counters.h"
#include "dnt-trace.h"

/* ---- the --counters grammar ---- */

static void spec_release(struct dnt_counter_spec *s) {
  for (size_t i = 0; i < s->nnames; i++) free(s->names[i]);
  free(s->names);
  free(s->provider);
}

void dnt_counter_specs_release(struct dnt_counter_specs *l) {
  for (size_t i = 0; i < l->n; i++) spec_release(&l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = 0;
}

static char *dup_trimmed(const char *s, size_t n) {
  while (n && isspace((unsigned char)*s)) s++, n--;
  while (n && isspace((unsigned char)s[n - 1])) n--;
  char *out = malloc(n + 1);
  if (!out) return NULL;
  memcpy(out, s, n);
  out[n] = '\0';
  return out;
}

/* Merges `s` (whose strings move into the list) into l. -1 when out of memory. */
static int specs_add(struct dnt_counter_specs *l, struct dnt_counter_spec *s) {
  for (size_t i = 0; i < l->n; i++) {
    struct dnt_counter_spec *e = &l->v[i];
    if (strcmp(e->provider, s->provider) != 0 || e->eventcounters_only != s->eventcounters_only) continue;
    if (e->nnames == 0 || s->nnames == 0) { /* "all" wins */
      for (size_t k = 0; k < e->nnames; k++) free(e->names[k]);
      free(e->names);
      e->names = NULL;
      e->nnames = 0;
    } else {
      char **grown = realloc(e->names, (e->nnames + s->nnames) * sizeof *grown);
      if (!grown) return -1;
      e->names = grown;
      for (size_t k = 0; k < s->nnames; k++) {
        int dup = 0;
        for (size_t j = 0; j < e->nnames && !dup; j++) dup = strcmp(e->names[j], s->names[k]) == 0;
        if (dup) {
          free(s->names[k]);
        } else {
          e->names[e->nnames++] = s->names[k];
        }
        s->names[k] = NULL;
      }
      s->nnames = 0;
    }
    spec_release(s);
    memset(s, 0, sizeof *s);
    return 0;
  }
  struct dnt_counter_spec *grown = realloc(l->v, (l->n + 1) * sizeof *grown);
  if (!grown) return -1;
  l->v = grown;
  l->v[l->n++] = *s;
  memset(s, 0, sizeof *s);
  return 0;
}

#define EC_PREFIX "EventCounters\\"

int dnt_counter_specs_parse(struct dnt_counter_specs *l, const char *spec, char *err, size_t errlen) {
  const char *p = spec;
  struct dnt_counter_spec s;
  memset(&s, 0, sizeof s);
  for (;;) {
    size_t n = strcspn(p, ",[]");
    if (p[n] == ']') {
      snprintf(err, errlen, "']' without '[' at position %zu in '%s'", (size_t)(p + n - spec) + 1, spec);
      goto fail;
    }
    s.provider = dup_trimmed(p, n);
    if (!s.provider) goto nomem;
    if (strncmp(s.provider, EC_PREFIX, strlen(EC_PREFIX)) == 0) {
      s.eventcounters_only = 1;
      memmove(s.provider, s.provider + strlen(EC_PREFIX), strlen(s.provider) - strlen(EC_PREFIX) + 1);
    }
    if (!s.provider[0]) {
      snprintf(err, errlen, "empty provider name at position %zu in '%s'", (size_t)(p - spec) + 1, spec);
      goto fail;
    }
    p += n;
    if (*p == '[') {
      const char *close = strchr(p, ']');
      const char *reopen = strchr(p + 1, '[');
      if (!close || (reopen && reopen < close)) {
        snprintf(err, errlen, "unbalanced '[' after '%s' in '%s'", s.provider, spec);
        goto fail;
      }
      p++;
      while (p <= close) {
        size_t m = strcspn(p, ",]");
        char *name = dup_trimmed(p, m);
        if (!name) goto nomem;
        if (!name[0]) {
          free(name);
          snprintf(err, errlen, "empty counter name in '%s[...]'", s.provider);
          goto fail;
        }
        char **grown = realloc(s.names, (s.nnames + 1) * sizeof *grown);
        if (!grown) {
          free(name);
          goto nomem;
        }
        s.names = grown;
        s.names[s.nnames++] = name;
        p += m + 1;
      }
      while (isspace((unsigned char)*p)) p++;
      if (*p && *p != ',') {
        snprintf(err, errlen, "unexpected '%c' after '%s[...]' (expected ',')", *p, s.provider);
        goto fail;
      }
    }
    if (specs_add(l, &s) < 0) goto nomem;
    if (!*p) return 0;
    p++; /* the ',' */
  }
nomem:
  snprintf(err, errlen, "out of memory");
fail:
  spec_release(&s);
  return -1;
}

int dnt_counter_specs_match(const struct dnt_counter_specs *l, const char *provider, const char *name) {
  if (!l || l->n == 0) return 1;
  for (size_t i = 0; i < l->n; i++) {
    const struct dnt_counter_spec *s = &l->v[i];
    if (strcmp(s->provider, provider) != 0) continue;
    if (s->nnames == 0) return 1;
    for (size_t k = 0; k < s->nnames; k++)
      if (strcmp(s->names[k], name) == 0) return 1;
  }
  return 0;
}

/* ---- the session's providers ---- */

static void random_id(char out[40]) {
  unsigned char b[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
  if (fd >= 0) close(fd);
  if (got != (ssize_t)sizeof b) {
    unsigned long long x = (unsigned long long)time(NULL) * 6364136223846793005ull ^ (unsigned long long)getpid();
    for (size_t i = 0; i < sizeof b; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      b[i] = (unsigned char)(x >> 56);
    }
  }
  snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
           b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static char *keep(struct dnt_counters_wire *w, char *s) {
  if (!s) return NULL;
  char **grown = realloc(w->strings, (w->nstrings + 1) * sizeof *grown);
  if (!grown) {
    free(s);
    return NULL;
  }
  w->strings = grown;
  w->strings[w->nstrings++] = s;
  return s;
}

/* Appends to a heap string; NULL (and *s freed) when out of memory. */
static char *append(char **s, size_t *len, const char *add) {
  size_t n = strlen(add);
  char *grown = realloc(*s, *len + n + 1);
  if (!grown) {
    free(*s);
    *s = NULL;
    return NULL;
  }
  memcpy(grown + *len, add, n + 1);
  *len += n;
  *s = grown;
  return grown;
}

void dnt_counters_wire_release(struct dnt_counters_wire *w) {
  for (size_t i = 0; i < w->nstrings; i++) free(w->strings[i]);
  free(w->strings);
  free(w->v);
  memset(w, 0, sizeof *w);
}

int dnt_counters_wire_build(struct dnt_counters_wire *w, const struct dnt_counter_specs *l, double refresh_s,
                            int max_time_series, int max_histograms) {
  memset(w, 0, sizeof *w);
  w->v = calloc(l->n + 1, sizeof *w->v);
  if (!w->v) return -1;
  char buf[64];
  snprintf(buf, sizeof buf, "EventCounterIntervalSec=%g", refresh_s);
  char *interval = keep(w, strdup(buf));
  if (!interval) goto nomem;
  char *metrics = NULL;
  size_t mlen = 0;
  for (size_t i = 0; i < l->n; i++) {
    const struct dnt_counter_spec *s = &l->v[i];
    w->v[w->n++] = (dsipc_provider){.name = s->provider, .keywords = 0, .level = 4, .args = interval};
    if (s->eventcounters_only) continue;
    if (s->nnames == 0) {
      if ((mlen && !append(&metrics, &mlen, ",")) || !append(&metrics, &mlen, s->provider)) goto nomem;
    }
    for (size_t k = 0; k < s->nnames; k++) {
      if ((mlen && !append(&metrics, &mlen, ",")) || !append(&metrics, &mlen, s->provider) ||
          !append(&metrics, &mlen, "\\") || !append(&metrics, &mlen, s->names[k]))
        goto nomem;
    }
  }
  if (metrics) {
    char client[40];
    random_id(w->session_id);
    random_id(client);
    size_t n = strlen(metrics) + 256;
    char *args = malloc(n);
    if (!args) {
      free(metrics);
      goto nomem;
    }
    snprintf(args, n, "SessionId=%s;Metrics=%s;RefreshInterval=%g;MaxTimeSeries=%d;MaxHistograms=%d;ClientId=%s",
             w->session_id, metrics, refresh_s, max_time_series, max_histograms, client);
    free(metrics);
    if (!keep(w, args)) goto nomem;
    w->v[w->n++] = (dsipc_provider){.name = DNT_METRICS_PROVIDER, .keywords = 0x2, .level = 4, .args = args};
  }
  return 0;
nomem:
  dnt_counters_wire_release(w);
  return -1;
}

/* ---- decoding ---- */

struct dnt_counters_decoder {
  const struct dnt_counter_specs *specs;
  const char *session_id;
  dnt_counter_cb cb;
  void *ud;
  dnt_record rec;
  double start_epoch; /* the trace's start_time as Unix seconds */
  uint64_t sync_qpc, qpc_freq;
  char **meters; /* meters seen: their EventCounters twins are dropped */
  size_t nmeters;
  uint64_t count;
  char error[512];
};

dnt_counters_decoder *dnt_counters_decoder_new(const struct dnt_counter_specs *specs, const char *session_id,
                                               dnt_counter_cb cb, void *ud) {
  dnt_counters_decoder *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->specs = specs;
  d->session_id = session_id;
  d->cb = cb;
  d->ud = ud;
  d->qpc_freq = 1;
  dnt_record_init(&d->rec);
  return d;
}

void dnt_counters_decoder_free(dnt_counters_decoder *d) {
  if (!d) return;
  dnt_record_release(&d->rec);
  for (size_t i = 0; i < d->nmeters; i++) free(d->meters[i]);
  free(d->meters);
  free(d);
}

const char *dnt_counters_decoder_error(const dnt_counters_decoder *d) { return d->error; }
uint64_t dnt_counters_decoder_count(const dnt_counters_decoder *d) { return d->count; }

static int meter_seen(const dnt_counters_decoder *d, const char *name) {
  for (size_t i = 0; i < d->nmeters; i++)
    if (strcmp(d->meters[i], name) == 0) return 1;
  return 0;
}

static void note_meter(dnt_counters_decoder *d, const char *name) {
  if (!name || !name[0] || meter_seen(d, name)) return;
  char **grown = realloc(d->meters, (d->nmeters + 1) * sizeof *grown);
  if (!grown) return;
  d->meters = grown;
  if ((d->meters[d->nmeters] = strdup(name))) d->nmeters++;
}

/* Does the user want the EventCounters of provider, or only its Meter? */
static int eventcounters_only(const dnt_counters_decoder *d, const char *provider) {
  if (!d->specs) return 0;
  for (size_t i = 0; i < d->specs->n; i++)
    if (d->specs->v[i].eventcounters_only && strcmp(d->specs->v[i].provider, provider) == 0) return 1;
  return 0;
}

static int on_trace(void *ud, const ntr_trace *t) {
  dnt_counters_decoder *d = ud;
  struct tm tm = {0};
  tm.tm_year = t->start_time[0] - 1900;
  tm.tm_mon = t->start_time[1] - 1;
  tm.tm_mday = t->start_time[3];
  tm.tm_hour = t->start_time[4];
  tm.tm_min = t->start_time[5];
  tm.tm_sec = t->start_time[6];
  d->start_epoch = (double)timegm(&tm) + t->start_time[7] / 1000.0;
  d->sync_qpc = t->sync_time_qpc;
  d->qpc_freq = t->qpc_frequency ? t->qpc_frequency : 1;
  return 0;
}

static double event_time(const dnt_counters_decoder *d, uint64_t ts) {
  double delta = ts >= d->sync_qpc ? (double)(ts - d->sync_qpc) : -(double)(d->sync_qpc - ts);
  return d->start_epoch + delta / (double)d->qpc_freq;
}

static int deliver(dnt_counters_decoder *d, dnt_counter_value *v) {
  if (!dnt_counter_specs_match(d->specs, v->provider, v->name)) return 0;
  d->count++;
  return d->cb ? d->cb(d->ud, v) : 0;
}

static const char *str_or(const dnt_record *r, const char *name, const char *dflt) {
  const char *s = dnt_record_str(r, name);
  return s ? s : dflt;
}

static int on_eventcounters(dnt_counters_decoder *d, const ntr_event *ev) {
  const dnt_record *r = &d->rec;
  const char *provider = ev->metadata->provider;
  const char *name = dnt_record_str(r, "Payload.Name");
  if (!name) return 0;
  if (!eventcounters_only(d, provider) && meter_seen(d, provider)) return 0; /* the Meter wins */
  const char *type = str_or(r, "Payload.CounterType", "");
  dnt_counter_value v = {.provider = provider, .name = name, .from_meter = 0, .tags = ""};
  v.display_name = str_or(r, "Payload.DisplayName", name);
  if (!v.display_name[0]) v.display_name = name;
  v.unit = str_or(r, "Payload.DisplayUnits", "");
  double x;
  if (strcmp(type, "Sum") == 0 || (!type[0] && dnt_record_get(r, "Payload.Increment"))) {
    v.kind = DNT_COUNTER_SUM;
    if (dnt_record_num(r, "Payload.Increment", &x) != 0) return 0;
  } else {
    v.kind = DNT_COUNTER_MEAN;
    if (dnt_record_num(r, "Payload.Mean", &x) != 0) return 0;
  }
  v.value = x;
  if (dnt_record_num(r, "Payload.IntervalSec", &x) == 0) v.interval_s = x;
  v.time_s = event_time(d, ev->timestamp);
  return deliver(d, &v);
}

size_t dnt_parse_quantiles(const char *s, double *q, double *v, size_t max) {
  size_t n = 0;
  while (s && *s && n < max) {
    char *end;
    double qq = strtod(s, &end);
    if (end == s || *end != '=') break;
    s = end + 1;
    double vv = strtod(s, &end);
    if (end == s) break;
    q[n] = qq;
    v[n] = vv;
    n++;
    s = end;
    if (*s == ';') s++;
  }
  return n;
}

enum { MEV_RATE = 4, MEV_GAUGE = 5, MEV_HISTOGRAM = 6, MEV_BEGIN = 7, MEV_ERROR = 9, MEV_PUBLISHED = 11,
       MEV_MULTIPLE = 15, MEV_UPDOWN = 16, MEV_MISCONFIGURED = 17 };

static int metrics_event_id(const ntr_metadata *md) {
  static const struct { const char *name; int id; } names[] = {
      {"CounterRateValuePublished", MEV_RATE}, {"GaugeValuePublished", MEV_GAUGE},
      {"HistogramValuePublished", MEV_HISTOGRAM}, {"BeginInstrumentReporting", MEV_BEGIN},
      {"Error", MEV_ERROR}, {"InstrumentPublished", MEV_PUBLISHED},
      {"MultipleSessionsNotSupportedError", MEV_MULTIPLE}, {"UpDownCounterRateValuePublished", MEV_UPDOWN},
      {"MultipleSessionsConfiguredIncorrectlyError", MEV_MISCONFIGURED},
  };
  if (md->event_name && md->event_name[0]) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (strcmp(md->event_name, names[i].name) == 0) return names[i].id;
    return 0;
  }
  return (int)md->event_id;
}

/* A number from an invariant-culture string; -1 when empty or not a number. */
static int parse_number(const char *s, double *out) {
  if (!s || !*s) return -1;
  char *end;
  *out = strtod(s, &end);
  return end == s ? -1 : 0;
}

/* Instruments that count what exists now, not what happened, yet which the runtime declares as
 * ObservableCounter (.NET 9 and 10's System.Runtime meter): as rates they read 0 per second with
 * 3 threads, and as Prometheus counters they "reset" whenever the pool shrinks. They are shown
 * and exported as gauges of their observed value, as dotnet-counters 10 shows them. */
static int current_value_counter(const char *meter, const char *name) {
  return strcmp(meter, "System.Runtime") == 0 &&
         (strcmp(name, "dotnet.thread_pool.thread.count") == 0 || strcmp(name, "dotnet.thread_pool.queue.length") == 0);
}

static int on_metrics(dnt_counters_decoder *d, const ntr_event *ev) {
  const dnt_record *r = &d->rec;
  int id = metrics_event_id(ev->metadata);
  if (id == MEV_MULTIPLE) {
    /* naming our own session: the runtime saw a command for the provider that is not ours to
     * judge (seen as the session is torn down); only another tool's session is a problem */
    const char *running = dnt_record_str(r, "runningSessionId");
    if (running && d->session_id && strcmp(running, d->session_id) == 0) return 0;
    snprintf(d->error, sizeof d->error, "another tool already has a metrics session with this process (%s)",
             str_or(r, "runningSessionId", "?"));
    return 0;
  }
  if (id == MEV_MISCONFIGURED) {
    snprintf(d->error, sizeof d->error, "the process's shared metrics session is configured differently");
    return 0;
  }
  const char *sid = dnt_record_str(r, "sessionId");
  if (d->session_id && (!sid || strcmp(sid, d->session_id) != 0)) return 0;
  if (id == MEV_ERROR) {
    snprintf(d->error, sizeof d->error, "metrics session error: %s", str_or(r, "errorMessage", "?"));
    return 0;
  }
  const char *meter = dnt_record_str(r, "meterName");
  if (!meter) return 0;
  note_meter(d, meter);
  if (id != MEV_RATE && id != MEV_GAUGE && id != MEV_HISTOGRAM && id != MEV_UPDOWN) return 0;
  dnt_counter_value v = {.provider = meter, .from_meter = 1};
  v.name = str_or(r, "instrumentName", "");
  v.display_name = v.name;
  v.unit = str_or(r, "unit", "");
  v.tags = str_or(r, "tags", "");
  v.time_s = event_time(d, ev->timestamp);
  double x;
  switch (id) {
  case MEV_RATE:
    if (current_value_counter(meter, v.name)) { /* a gauge, whatever the runtime declared */
      v.kind = DNT_COUNTER_MEAN;
      if (parse_number(dnt_record_str(r, "value"), &x) != 0) return 0;
      break;
    }
    v.kind = DNT_COUNTER_SUM;
    /* an empty rate: an ObservableCounter's first interval (nothing to subtract yet) or a
     * callback that reported nothing; dotnet-counters drops it too */
    if (parse_number(dnt_record_str(r, "rate"), &x) != 0) return 0;
    /* the running total beside it (version 1+, .NET 8): ours is the runtime's own */
    v.has_total = parse_number(dnt_record_str(r, "value"), &v.total) == 0;
    break;
  case MEV_UPDOWN:
    v.kind = DNT_COUNTER_MEAN;
    if (parse_number(dnt_record_str(r, "value"), &x) != 0 && parse_number(dnt_record_str(r, "rate"), &x) != 0) return 0;
    break;
  case MEV_GAUGE:
    v.kind = DNT_COUNTER_MEAN;
    if (parse_number(dnt_record_str(r, "lastValue"), &x) != 0) return 0;
    break;
  default: { /* histogram: one value per percentile */
    double q[16], val[16];
    size_t n = dnt_parse_quantiles(dnt_record_str(r, "quantiles"), q, val, 16);
    v.kind = DNT_COUNTER_HISTOGRAM;
    /* the interval's measurements and their sum (version 1+): numbers, or invariant strings */
    v.has_hist = (dnt_record_num(r, "count", &v.hist_count) == 0 ||
                  parse_number(dnt_record_str(r, "count"), &v.hist_count) == 0) &&
                 (dnt_record_num(r, "sum", &v.hist_sum) == 0 || parse_number(dnt_record_str(r, "sum"), &v.hist_sum) == 0);
    const char *base = v.tags;
    for (size_t i = 0; i < n; i++) {
      char tags[1024];
      snprintf(tags, sizeof tags, "%s%sPercentile=%g", base, base[0] ? "," : "", q[i] * 100.0);
      v.tags = tags;
      v.value = val[i];
      int rc = deliver(d, &v);
      if (rc) return rc;
    }
    return 0;
  }
  }
  v.value = x;
  return deliver(d, &v);
}

static int on_event(void *ud, const ntr_event *ev) {
  dnt_counters_decoder *d = ud;
  const ntr_metadata *md = ev->metadata;
  if (!md || !md->provider) return 0;
  int metrics = strcmp(md->provider, DNT_METRICS_PROVIDER) == 0;
  int counters = md->event_name && strcmp(md->event_name, "EventCounters") == 0;
  if (!metrics && !counters) return 0;
  if (dnt_record_decode_event(&d->rec, ev) != 0) return 0; /* a malformed payload: skip it */
  return metrics ? on_metrics(d, ev) : on_eventcounters(d, ev);
}

const ntr_callbacks *dnt_counters_decoder_callbacks(void) {
  static const ntr_callbacks cb = {.on_trace = on_trace, .on_event = on_event};
  return &cb;
}

int dnt_counters_read_trace(const char *path, const struct dnt_counter_specs *specs, dnt_counter_cb cb, void *ud,
                            char *err, size_t errlen) {
  dnt_counters_decoder *d = dnt_counters_decoder_new(specs, NULL, cb, ud);
  if (!d) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = dnt_trace_read(path, dnt_counters_decoder_callbacks(), d, NULL, err, errlen);
  dnt_counters_decoder_free(d);
  return rc;
}
