/* The latest value of every counter time series of a counters session: what `counters monitor`
 * draws, `counters serve` answers a scrape with and `collect --format prometheus` writes.
 *
 * A series is one (provider, name, tags) triple; rows keep the order in which series first
 * appeared, so a redraw does not reshuffle lines. Lookups go through a hash index: a value costs
 * O(1) however many series the target publishes. No printing, no exits: allocation failures
 * are returned. */
#ifndef DNT_COUNTERS_TABLE_H
#define DNT_COUNTERS_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "counters-session.h"

/* One time series. Strings are owned by the table. */
struct dnt_counter_row {
  char *provider, *name, *display_name, *unit;
  char *tags;      /* as delivered: "route=/a,Percentile=95" */
  char *base_tags; /* without the Percentile tag of a histogram: "route=/a" */
  int kind;        /* enum dnt_counter_kind */
  int from_meter;
  double quantile; /* 0..1 for a histogram row, -1 otherwise */
  double value;    /* the latest value (for a sum: the amount of the last interval) */
  double total;    /* a sum's amounts added up since the series appeared (a Prometheus counter) */
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

#endif
