/* counters/: EventCounters and System.Diagnostics.Metrics. The session configuration and payload
 * decoder, the table of latest values, the views (dotnet-counters' text, CSV, JSON, the live
 * table and its terminal) and the Prometheus text format (the HTTP server that answers it is
 * http/'s). One public header; the library never prints on its own (views write to the FILE *
 * they are given) and never exits. */
#ifndef DNT_COUNTERS_H
#define DNT_COUNTERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <termios.h>
#include <uv.h>

#include "dsipc.h"
#include "ntr.h"

/* ============================================================================================== */
/* What `dntrace counters` asks a runtime for and how it reads the answer: the --counters grammar,
 * the EventPipe providers of a counters session (as dotnet-counters builds them), and a decoder
 * that turns EventCounters and System.Diagnostics.Metrics events into counter values.
 * No libuv, no printing, no exits: the session loop and the output live in cmd-counters.c, so the
 * tests can link this file alone. */

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
  /* A Meter counter's running total as the runtime sent it beside the rate (the `value` field of
   * CounterRateValuePublished, .NET 8+): an ObservableCounter's observed value (the process's own
   * total: GC.CollectionCount(2) for gen2 collections), a Counter's sum since the metrics session
   * began. has_total 0 when not sent (EventCounters' Increment, .NET 6 and 7): then the table sums
   * the increments it sees. */
  double total;
  int has_total;
  /* A histogram's measurements in the interval and their sum (HistogramValuePublished's count and
   * sum, version 1+, .NET 8): the same on each of its percentile values. has_hist 0 when not sent. */
  double hist_count, hist_sum;
  int has_hist;
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

/* Reads a trace file (see the trace input above) through a decoder. Returns dnt_trace_read's status;
 * err as there. */
int dnt_counters_read_trace(const char *path, const struct dnt_counter_specs *specs, dnt_counter_cb cb, void *ud,
                            char *err, size_t errlen);

/* Splits a quantiles string "0.5=x;0.95=y;0.99=z" into at most max (q, v) pairs; the count. */
size_t dnt_parse_quantiles(const char *s, double *q, double *v, size_t max);

/* ============================================================================================== */
/* The latest value of every counter time series of a counters session: what `counters monitor`
 * draws, `counters serve` answers a scrape with and `collect --format prometheus` writes.
 *
 * A series is one (provider, name, tags) triple; rows keep the order in which series first
 * appeared, so a redraw does not reshuffle lines. Lookups go through a hash index: a value costs
 * O(1) however many series the target publishes. No printing, no exits: allocation failures
 * are returned. */

/* One time series. Strings are owned by the table. */
struct dnt_counter_row {
  char *provider, *name, *display_name, *unit;
  char *tags;      /* as delivered: "route=/a,Percentile=95" */
  char *base_tags; /* without the Percentile tag of a histogram: "route=/a" */
  int kind;        /* enum dnt_counter_kind */
  int from_meter;
  double quantile; /* 0..1 for a histogram row, -1 otherwise */
  double value;    /* the latest value (for a sum: the amount of the last interval) */
  double prev;     /* the value before it (has_prev: there was one), for monitor's deltas */
  int has_prev;
  double total;    /* a sum's running total (a Prometheus counter): the runtime's own when it sends
                      one (dnt_counter_value.total), else the amounts added up since the series
                      appeared (compensated summation: no drift from adding many decimals) */
  double total_c;  /* the compensation of that sum */
  double hist_count, hist_sum; /* a histogram row's measurements and their sum since the series
                                  appeared (its intervals' added up: a Prometheus summary's
                                  _count and _sum); has_hist: the runtime sent them */
  int has_hist;
  double time_s;   /* when the latest value was measured (seconds since 1970) */
  double interval_s;
  uint64_t updates;
};

/* Caller-provided storage, zero-initialised (= empty); free with dnt_counter_table_release. */
struct dnt_counter_table {
  struct dnt_counter_row *v;
  size_t n, cap;
  uint32_t *index; /* open addressing: row number + 1, 0 = empty slot */
  size_t index_cap;
  uint64_t generation; /* bumped by every put: "has anything changed since I drew?" */
};

/* Records v (its strings are copied). 0, or -ENOMEM (the table is unchanged). */
int dnt_counter_table_put(struct dnt_counter_table *t, const dnt_counter_value *v);

/* The row of a series, or NULL. */
const struct dnt_counter_row *dnt_counter_table_find(const struct dnt_counter_table *t, const char *provider,
                                                     const char *name, const char *tags);

/* Forgets every series (e.g. the target restarted: its old series are gone). */
void dnt_counter_table_clear(struct dnt_counter_table *t);
void dnt_counter_table_release(struct dnt_counter_table *t);

/* ============================================================================================== */
/* How `dntrace counters` shows values to people: the counter names and numbers as dotnet-counters
 * prints them, the CSV and JSON rows of `collect`, and the live table of `monitor`.
 * Pure formatting (FILE * in, nothing else): the tests render into memory streams. */

/* dotnet-counters' counter label: `name (unit)`, and for an amount per interval
 * `name (unit / N sec)` ("Count" when the unit is empty). Writes into out (caller-owned,
 * truncated to cap) and returns it. */
const char *dnt_counter_label(const char *display_name, const char *unit, int kind, double interval_s, char *out,
                              size_t cap);

/* A value as dotnet-counters shows it: grouped thousands, at most three decimals
 * (`12,345.679`), |v| >= 1e8 as `1.2346e+08` when abbreviate is set. */
const char *dnt_counter_number(double v, int abbreviate, char *out, size_t cap);

/* Timestamps of the rows: "YYYY-MM-DD HH:MM:SS.mmm" UTC. out must hold 40 bytes. */
void dnt_counter_time(double epoch_s, char out[40]);

/* One CSV row (`Timestamp,Provider,Counter Name,Counter Type,Mean/Increment`, tags as
 * `label[k=v;k2=v]`) or one JSON event object (with a leading ",\n" unless first). */
void dnt_counter_csv_header(FILE *fp);
void dnt_counter_csv_row(FILE *fp, const dnt_counter_value *v, double interval_s);
void dnt_counter_json_row(FILE *fp, const dnt_counter_value *v, double interval_s, int first);

/* The live table: on a terminal (erase set) the key hint, then a status line, then per provider `[Provider]`, per counter its label and value,
 * tagged series as indented rows under their counter. Lines are cut to width columns and at most
 * height lines are written (a last line says how many were left out); each line ends with
 * "\033[K\n" when erase is set, so it can be drawn over the previous frame without clearing the
 * screen (no flicker). deltas: a "Last Delta" column beside each value, its change since the
 * series' previous value (dotnet-counters' --showDeltas). Returns the number of lines written. */
size_t dnt_monitor_render(FILE *fp, const struct dnt_counter_table *t, double refresh_s, const char *status,
                          int width, int height, int erase, int deltas);

/* ============================================================================================== */
/* The latest counter values in the Prometheus text exposition format (version 0.0.4), for
 * `counters serve` (GET /metrics) and `counters collect --format prometheus`.
 *
 * Families, from a table row (the table above), so that `promtool check metrics` finds nothing:
 *   name     the counter or instrument name in snake_case: every character outside
 *            [a-zA-Z0-9_:] turned into '_' (runs of them into one), camelCase split, lower case,
 *            a leading digit prefixed with '_': `dotnet.gc.collections` -> `dotnet_gc_collections`,
 *            `cpu-usage` -> `cpu_usage`
 *   unit     appended as a word in the base unit, the values converted: By/B -> bytes,
 *            KB/kB/MB/GB -> bytes (x 1e3, 1e6, 1e9; EventCounters' MB is 1e6 bytes), KiBy/MiBy/GiBy
 *            -> bytes, s -> seconds, ms/us/ns -> seconds (/ 1e3, 1e6, 1e9), min/h -> seconds,
 *            % -> percent, 1 -> ratio; an annotation in braces ({request}) adds nothing; another
 *            unit is sanitised and appended; said once, in the base unit, when the name already
 *            ends with it (`time_ms`, ms -> `time_seconds`)
 *   type     an amount per interval (DNT_COUNTER_SUM) -> `counter`, `_total` appended (once), its
 *            value the running total the runtime sends with each rate (Meters, .NET 8+: an
 *            ObservableCounter's own value, a Counter's sum since the session began), else (EventCounters,
 *            older runtimes) the amounts summed since dntrace started; a level -> `gauge`; a
 *            histogram's percentile rows -> one `summary` with `quantile="0.5"` labels, and its
 *            `_sum` and `_count` (the measurements since the series appeared, where the runtime
 *            sends each interval's: .NET 8+; the sum in the family's unit). A gauge
 *            or summary whose name ends with a suffix Prometheus reserves for another type
 *            (`_total`, `_bucket`, and for a gauge `_count`, `_sum`) gets `_current` appended:
 *            `dotnet.assembly.count` -> `dotnet_assembly_count_current`
 *   labels   provider="<EventSource or Meter>" first, then the series' tags in their order, keys
 *            sanitised like names (a leading "__" is reserved and gets a 'x' prefix), values escaped
 *            (\\, \", \n)
 * Examples: System.Runtime `dotnet.gc.heap.total_allocated` (By, a counter) ->
 * `dotnet_gc_heap_total_allocated_bytes_total{provider="System.Runtime"} 123`;
 * Sample.Meter `sample.latency` (ms, a histogram) ->
 * `sample_latency_seconds{provider="Sample.Meter",quantile="0.95"} 0.0476`;
 * System.Runtime EventCounter `cpu-usage` (%) -> `cpu_usage_percent{provider="System.Runtime"} 3`.
 * A family name that would carry two types (two providers' instruments of one name, one a level,
 * the other a histogram) keeps it for the first type in the order counter, gauge, summary and gets
 * the provider's name in front for the others; a series
 * whose name and labels collide with an earlier one is left out. */

/* Writes the table (borrowed) to fp: HELP and TYPE lines, then each family's samples together.
 * Returns the number of samples written, or -ENOMEM. */
long dnt_counters_prom_write(FILE *fp, const struct dnt_counter_table *t);

/* The same for several tables at once (`serve`: one per target), each series labelled with its
 * table's labels[k] (`pid="7",process="app"`, as dnt_prom_label_pairs makes them; labels or an
 * entry may be NULL: none) after its provider: every family's HELP and TYPE once, its samples
 * from all the tables together. A tag of a series that has a key of its table's labels is left
 * out. Borrowed for the call. Returns the samples written, or -ENOMEM. */
long dnt_counters_prom_write_many(FILE *fp, const struct dnt_counter_table *const *tables, const char *const *labels,
                                  size_t ntables);

/* Label pairs for dnt_counters_prom_write_many from n (key, value) pairs kv[2i], kv[2i+1]: keys
 * sanitised as label names (a leading digit or "__" gets an 'x' in front), values escaped.
 * A heap string (free it), NULL when out of memory. */
char *dnt_prom_label_pairs(const char *const *kv, size_t n);

/* The family name of a row, without the `_total` of a counter or the `_current` of a level
 * (exposed for the tests).
 * Writes into out (caller-owned) and returns it. */
const char *dnt_prom_family_base(const char *name, const char *unit, char *out, size_t cap);

/* v, measured in unit, in the base unit of its family's name (34.8125 "ms" -> 0.0348125). */
double dnt_prom_unit_scale(const char *unit, double v);

/* ============================================================================================== */
/* The terminal of `counters monitor`: the alternate screen (the user's scrollback is left as it
 * was), keys read one at a time without echo (Ctrl+C still raises SIGINT), the size followed
 * through SIGWINCH. Everything is restored on close, and at exit if the program dies first. */

typedef void (*dnt_screen_key_fn)(void *ud, int key);
typedef void (*dnt_screen_resize_fn)(void *ud);

/* Caller-provided storage. */
struct dnt_screen {
  int active, keys_active, raw;
  int in_fd, out_fd;
  struct termios saved;
  int width, height;
  uv_poll_t keys;
  uv_signal_t winch;
  dnt_screen_key_fn on_key;
  dnt_screen_resize_fn on_resize;
  void *ud;
};

/* Enters the alternate screen on out_fd and reads keys from in_fd (when it is a terminal) on
 * loop. Returns 0, or -1 when out_fd is not a terminal (nothing changed). */
int dnt_screen_open(struct dnt_screen *s, uv_loop_t *loop, int in_fd, int out_fd, dnt_screen_key_fn on_key,
                    dnt_screen_resize_fn on_resize, void *ud);

/* Leaves the alternate screen, shows the cursor, restores the terminal mode and closes the
 * handles (their close completes on the loop's next turn). Twice is harmless. */
void dnt_screen_close(struct dnt_screen *s);

#endif
