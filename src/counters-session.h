/* What `dntrace counters` asks a runtime for and how it reads the answer: the --counters grammar,
 * the EventPipe providers of a counters session (as dotnet-counters builds them), and a decoder
 * that turns EventCounters and System.Diagnostics.Metrics events into counter values.
 * No libuv, no printing, no exits: the session loop and the output live in cmd-counters.c, so the
 * tests can link this file alone. */
#ifndef DNT_COUNTERS_SESSION_H
#define DNT_COUNTERS_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "dsipc.h"
#include "ntr.h"

#define DNT_COUNTERS_DEFAULT "System.Runtime"
#define DNT_METRICS_PROVIDER "System.Diagnostics.Metrics"

/* One provider of --counters: all its counters (nnames == 0) or the ones named. */
struct dnt_counter_spec {
  char *provider;
  char **names;          /* nnames heap strings */
  size_t nnames;
  int eventcounters_only; /* written `EventCounters\Provider`: no Meter of that name */
};

/* A parsed --counters list. Caller-owned struct, zero-initialised; free with
 * dnt_counter_specs_release. */
struct dnt_counter_specs {
  struct dnt_counter_spec *v;
  size_t n;
};

void dnt_counter_specs_release(struct dnt_counter_specs *l);

/* Adds a --counters value: `provider` or `provider[c1,c2]`, comma-separated (commas inside
 * brackets separate counters), an optional `EventCounters\` prefix. A provider named twice is
 * merged: the union of its counters, "all" winning. Returns 0, or -1 with a message in err
 * (unbalanced bracket, empty name, text after `]`). */
int dnt_counter_specs_parse(struct dnt_counter_specs *l, const char *spec, char *err, size_t errlen);

/* Whether counter `name` of `provider` was asked for (a provider asked for whole: every name). */
int dnt_counter_specs_match(const struct dnt_counter_specs *l, const char *provider, const char *name);

/* The providers of the session: one EventSource provider per spec (keywords 0, Informational,
 * `EventCounterIntervalSec=<refresh>`), then System.Diagnostics.Metrics (keyword 0x2,
 * Informational, SessionId/Metrics/RefreshInterval/MaxTimeSeries/MaxHistograms/ClientId) when
 * any spec may name a Meter. Owned by the struct: free with dnt_counters_wire_release. */
struct dnt_counters_wire {
  dsipc_provider *v;
  size_t n;
  char **strings; /* what v[].name/args point to */
  size_t nstrings;
  char session_id[40];
};
int dnt_counters_wire_build(struct dnt_counters_wire *w, const struct dnt_counter_specs *l, double refresh_s,
                            int max_time_series, int max_histograms);
void dnt_counters_wire_release(struct dnt_counters_wire *w);

/* ---- decoding ---- */

enum dnt_counter_kind {
  DNT_COUNTER_MEAN = 1, /* EventCounter / PollingCounter, Gauge, UpDownCounter: a level */
  DNT_COUNTER_SUM,      /* Incrementing*Counter, Counter<T>: an amount per interval */
  DNT_COUNTER_HISTOGRAM /* one value per percentile (tags carry Percentile=NN) */
};

/* One value of one counter at one time. Every string is valid only during the callback. */
typedef struct dnt_counter_value {
  const char *provider;     /* EventSource or Meter name */
  const char *name;         /* "cpu-usage", "dotnet.gc.collections" */
  const char *display_name; /* EventCounters' DisplayName; the name for Meters */
  const char *unit;         /* "%", "MB", "ms", "{request}"; "" when none */
  const char *tags;         /* "route=/a,Percentile=95" (k=v comma-separated); "" when none */
  int kind;                 /* enum dnt_counter_kind */
  int from_meter;           /* 1: System.Diagnostics.Metrics, 0: EventCounters */
  double value;             /* Mean, Increment (per interval), rate, last value, percentile */
  double interval_s;        /* the counter's interval (0 when unknown) */
  double time_s;            /* seconds since 1970-01-01 UTC, from the event's timestamp */
} dnt_counter_value;

typedef int (*dnt_counter_cb)(void *ud, const dnt_counter_value *v);

/* A decoder: the nettrace callbacks to hand to a parser with the decoder as user data. Keeps
 * which meters the session has seen so that, as dotnet-counters does, a provider that exists
 * both as a Meter and as an EventSource is shown from the Meter only. */
typedef struct dnt_counters_decoder dnt_counters_decoder;

/* specs (may be NULL: everything) and session_id (NULL: any) are borrowed, must outlive it. */
dnt_counters_decoder *dnt_counters_decoder_new(const struct dnt_counter_specs *specs, const char *session_id,
                                               dnt_counter_cb cb, void *ud);
void dnt_counters_decoder_free(dnt_counters_decoder *d);
/* The callbacks (on_trace, on_event); pass the decoder as their ud. Static. */
const ntr_callbacks *dnt_counters_decoder_callbacks(void);
/* A Meter error the runtime reported (MultipleSessionsNotSupported, Error...), or "". */
const char *dnt_counters_decoder_error(const dnt_counters_decoder *d);
/* Values delivered so far. */
uint64_t dnt_counters_decoder_count(const dnt_counters_decoder *d);

/* Reads a trace file (see trace-input.h) through a decoder. Returns dnt_trace_read's status;
 * err as there. */
int dnt_counters_read_trace(const char *path, const struct dnt_counter_specs *specs, dnt_counter_cb cb, void *ud,
                            char *err, size_t errlen);

/* Splits a quantiles string "0.5=x;0.95=y;0.99=z" into at most max (q, v) pairs; the count. */
size_t dnt_parse_quantiles(const char *s, double *q, double *v, size_t max);

#endif
