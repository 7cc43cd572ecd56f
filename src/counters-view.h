/* How `dntrace counters` shows values to people: the counter names and numbers as dotnet-counters
 * prints them, the CSV and JSON rows of `collect`, and the live table of `monitor`.
 * Pure formatting (FILE * in, nothing else): the tests render into memory streams. */
#ifndef DNT_COUNTERS_VIEW_H
#define DNT_COUNTERS_VIEW_H

#include <stddef.h>
#include <stdio.h>

#include "counters-session.h"
#include "counters-table.h"

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
 * screen (no flicker). Returns the number of lines written. */
size_t dnt_monitor_render(FILE *fp, const struct dnt_counter_table *t, double refresh_s, const char *status,
                          int width, int height, int erase);

#endif
