/* The latest counter values in the Prometheus text exposition format (version 0.0.4), for
 * `counters serve` (GET /metrics) and `counters collect --format prometheus`.
 *
 * Families, from a table row (counters-table.h):
 *   name     the counter or instrument name, every character outside [a-zA-Z0-9_:] turned into
 *            '_' (runs of them into one), a leading digit prefixed with '_', lower case kept as
 *            written: `dotnet.gc.collections` -> `dotnet_gc_collections`, `cpu-usage` -> `cpu_usage`
 *   unit     appended as a word, as OpenTelemetry's Prometheus exporter does: By/B -> bytes,
 *            s -> seconds, ms -> milliseconds, us -> microseconds, % -> percent, MB -> megabytes,
 *            1 -> ratio; an annotation in braces ({request}) adds nothing; another unit is
 *            sanitised and appended; never twice when the name already ends with it
 *   type     an amount per interval (DNT_COUNTER_SUM) -> `counter`, `_total` appended, its value
 *            the amounts summed since dntrace started; a level -> `gauge`; a histogram's
 *            percentile rows -> one `summary` with `quantile="0.5"` labels (no _sum/_count: the
 *            runtime does not publish them to out-of-process listeners)
 *   labels   provider="<EventSource or Meter>" first, then the series' tags in their order, keys
 *            sanitised like names (a leading "__" is reserved and gets a 'x' prefix), values escaped
 *            (\\, \", \n)
 * Examples: System.Runtime `dotnet.gc.heap.total_allocated` (By, a counter) ->
 * `dotnet_gc_heap_total_allocated_bytes_total{provider="System.Runtime"} 123`;
 * Sample.Meter `sample.latency` (ms, a histogram) ->
 * `sample_latency_milliseconds{provider="Sample.Meter",quantile="0.95"} 47.6`;
 * System.Runtime EventCounter `cpu-usage` (%) -> `cpu_usage_percent{provider="System.Runtime"} 3`.
 * A family name that would carry two types (two providers' counters of one name, one a level,
 * the other an amount) keeps it for the first type in the order counter, gauge, summary and gets
 * the provider's name in front for the others; a series
 * whose name and labels collide with an earlier one is left out. */
#ifndef DNT_COUNTERS_PROM_H
#define DNT_COUNTERS_PROM_H

#include <stddef.h>
#include <stdio.h>

#include "counters-table.h"

/* Writes the table (borrowed) to fp: HELP and TYPE lines, then each family's samples together.
 * Returns the number of samples written, or -ENOMEM. */
long dnt_counters_prom_write(FILE *fp, const struct dnt_counter_table *t);

/* The family name of a row, without the `_total` of a counter (exposed for the tests).
 * Writes into out (caller-owned) and returns it. */
const char *dnt_prom_family_base(const char *name, const char *unit, char *out, size_t cap);

#endif
