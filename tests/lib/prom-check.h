/* A strict checker of the Prometheus text exposition format (0.0.4), independent of the writer
 * in counters/prom.c, for the tests: line grammar, HELP/TYPE placement, contiguous families,
 * the sample names each type allows, label syntax and escapes, number syntax, duplicates; and for
 * typed families the naming rules of promtool's linter (`_total` exactly on counters, no
 * `_count`/`_sum` on gauges and counters, no `_bucket` outside histograms, base units, no
 * camelCase). And promtool itself, run on a text. */
#ifndef DNT_TEST_PROM_CHECK_H
#define DNT_TEST_PROM_CHECK_H

#include <stddef.h>

/* 0 when text (NUL-terminated) is valid; otherwise -1 with "line N: why" in err (caller-owned).
 * *samples (may be NULL) receives the number of sample lines. */
int prom_check(const char *text, size_t *samples, char *err, size_t errlen);

/* The value of the sample whose line starts with `series` (name and labels exactly as written,
 * e.g. `x_total{provider="P"}`); 0 and *v set, or -1 when there is no such line. */
int prom_value(const char *text, const char *series, double *v);

/* The reference checker: `promtool check metrics` on text (written to DIR/scrape.txt first). Its
 * exit status (-1: it could not run); what it said in out (caller-owned, cap bytes). */
int promtool_check(const char *text, const char *dir, char *out, size_t cap);

#endif
