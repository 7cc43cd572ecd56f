/* test-rules.c: the rules of `dntrace watch` (agent/dnt-agent.h). What each part of the grammar
 * reads as, and the column a mistake is said at; when a counter, exception or GC rule fires on
 * values and events stamped with times the test chooses; the limits (once in 10 minutes by
 * default, a cooldown) and what they hold back. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "dnt-agent.h"

static struct dnt_rule parse_ok(const char *text) {
  struct dnt_rule r;
  char err[200];
  size_t col;
  cr_assert_eq(dnt_rule_parse(text, &r, err, sizeof err, &col), 0, "'%s': column %zu: %s", text, col, err);
  return r;
}

static void parse_bad(const char *text, size_t column, const char *what) {
  struct dnt_rule r;
  char err[200];
  size_t col;
  cr_assert_eq(dnt_rule_parse(text, &r, err, sizeof err, &col), -1, "'%s' parsed", text);
  cr_expect_eq(col, column, "'%s': column %zu (%s), not %zu", text, col, err, column);
  cr_expect(strstr(err, what), "'%s': '%s' in '%s'", text, what, err);
  dnt_rule_release(&r);
}

Test(rules, a_counter_rule_reads_as_written) {
  struct dnt_rule r = parse_ok("System.Runtime/cpu-usage > 80 for 30s => stacks, dump mini");
  cr_expect_eq(r.kind, DNT_TRIGGER_COUNTER);
  cr_expect_str_eq(r.provider, "System.Runtime");
  cr_expect_str_eq(r.counter, "cpu-usage");
  cr_expect_eq(r.op, '>');
  cr_expect_eq(r.threshold, 80);
  cr_expect_eq(r.for_ms, 30000);
  cr_assert_eq(r.nactions, 2);
  cr_expect_eq(r.actions[0].kind, DNT_ACTION_STACKS);
  cr_expect_eq(r.actions[1].kind, DNT_ACTION_DUMP);
  cr_expect_str_eq(r.actions[1].arg, "mini");
  char buf[200];
  cr_expect_str_eq(dnt_rule_trigger_text(&r, buf, sizeof buf), "System.Runtime/cpu-usage > 80 for 30 s");
  dnt_rule_release(&r);
  /* no provider: System.Runtime; a unit; no space before the comparison; collect's profile; exec's rest */
  r = parse_ok("gc-heap-size>=500MB => collect 30s gc-verbose, exec echo $DNTRACE_FILE, done");
  cr_expect_str_eq(r.provider, "System.Runtime");
  cr_expect_str_eq(r.counter, "gc-heap-size");
  cr_expect_eq(r.op, 'G');
  cr_expect_str_eq(r.unit, "MB");
  cr_expect_eq(r.for_ms, 0);
  cr_assert_eq(r.nactions, 2);
  cr_expect_eq(r.actions[0].duration_ms, 30000);
  cr_expect_str_eq(r.actions[0].arg, "gc-verbose");
  cr_expect_str_eq(r.actions[1].arg, "echo $DNTRACE_FILE, done");
  dnt_rule_release(&r);
  r = parse_ok("exception Sample.SampleException 5 in 10s => dump mini");
  cr_expect_eq(r.kind, DNT_TRIGGER_EXCEPTION);
  cr_expect_str_eq(r.type, "Sample.SampleException");
  cr_expect_eq(r.count, 5);
  cr_expect_eq(r.window_ms, 10000);
  dnt_rule_release(&r);
  r = parse_ok("exception 3 in 1m => gcdump");
  cr_expect_null(r.type);
  cr_expect_eq(r.window_ms, 60000);
  cr_expect_eq(r.actions[0].kind, DNT_ACTION_GCDUMP);
  dnt_rule_release(&r);
  r = parse_ok("gc-pause > 200ms => collect 10s");
  cr_expect_eq(r.kind, DNT_TRIGGER_GC_PAUSE);
  cr_expect_eq(r.threshold, 200);
  dnt_rule_release(&r);
}

Test(rules, a_histograms_percentile_is_named) {
  struct dnt_rule r = parse_ok("Sample.Meter/sample.latency[p95] > 40ms for 2s => stacks");
  cr_expect_str_eq(r.provider, "Sample.Meter");
  cr_expect_str_eq(r.counter, "sample.latency");
  cr_expect_eq(r.percentile, 95);
  char buf[200];
  cr_expect_str_eq(dnt_rule_trigger_text(&r, buf, sizeof buf), "Sample.Meter/sample.latency[p95] > 40ms for 2 s");
  dnt_rule_release(&r);
  r = parse_ok("x/lat[p99.9]>1 => stacks");
  cr_expect_eq(r.percentile, 99.9);
  cr_expect_eq(r.op, '>');
  dnt_rule_release(&r);
  parse_bad("lat[q9] > 1 => stacks", 4, "a percentile");
  parse_bad("lat[p95 > 1 => stacks", 4, "a percentile");
  parse_bad("lat[p100] > 1 => stacks", 4, "a percentile");
}

/* An event rule: the provider ends at the first '/', the event's name (TraceEvent's, with its own
 * slashes) after it; a payload filter is one word of FIELD:VALUE pairs; a count and window, or
 * none (each event). */
Test(rules, an_event_rule_reads_as_written) {
  struct dnt_rule r = parse_ok("event Microsoft-Windows-DotNETRuntime/GC/Start Reason:1,Depth:2 3 in 1m => stacks");
  cr_expect_eq(r.kind, DNT_TRIGGER_EVENT);
  cr_expect_str_eq(r.provider, "Microsoft-Windows-DotNETRuntime");
  cr_expect_str_eq(r.event, "GC/Start");
  cr_expect_str_eq(r.filter, "Reason:1,Depth:2");
  cr_expect_eq(r.count, 3);
  cr_expect_eq(r.window_ms, 60000);
  char buf[200];
  cr_expect_str_eq(dnt_rule_trigger_text(&r, buf, sizeof buf),
                   "event Microsoft-Windows-DotNETRuntime/GC/Start Reason:1,Depth:2 3 in 60 s");
  dnt_rule_release(&r);
  r = parse_ok("event Sample-Load=>exec true");
  cr_expect_str_eq(r.provider, "Sample-Load");
  cr_expect_null(r.event);
  cr_expect_null(r.filter);
  cr_expect_eq(r.count, 1);
  cr_expect_eq(r.window_ms, 0);
  cr_expect_str_eq(dnt_rule_trigger_text(&r, buf, sizeof buf), "event Sample-Load");
  dnt_rule_release(&r);
  r = parse_ok("event Sample-Load/Tick s:a=b,n:7 => stacks");
  cr_expect_str_eq(r.event, "Tick");
  cr_expect_str_eq(r.filter, "s:a=b,n:7");
  dnt_rule_release(&r);
  parse_bad("event => stacks", 7, "a provider's name");
  parse_bad("event /GC => stacks", 7, "a provider's name");
  parse_bad("event P/ => stacks", 9, "an event's name after '/'");
  parse_bad("event P n:1 => stacks", 9, "an event's name before a payload filter");
  parse_bad("event P/E n:1,m => stacks", 15, "FIELD:VALUE");
  parse_bad("event P/E n:1, => stacks", 14, "another FIELD:VALUE");
  parse_bad("event P/E :1 => stacks", 11, "FIELD:VALUE");
  parse_bad("event P/E 3 => stacks", 13, "'in'");
  parse_bad("event P/E 0 in 1s => stacks", 11, "a count of events");
  parse_bad("event P?x => stacks", 8, "a provider's name");
}

Test(rules, a_mistake_is_said_at_its_column) {
  parse_bad("", 1, "a trigger");
  parse_bad("cpu-usage 80 => stacks", 11, "a comparison");
  parse_bad("cpu-usage > lots => stacks", 13, "a number");
  parse_bad("cpu-usage > 80 for ever => stacks", 20, "a time after 'for'");
  parse_bad("cpu-usage > 80 stacks", 16, "'=>'");
  parse_bad("cpu-usage > 80 =>", 18, "an action");
  parse_bad("cpu-usage > 80 => reboot", 19, "an action");
  parse_bad("cpu-usage > 80 => dump huge", 24, "a dump's type");
  parse_bad("cpu-usage > 80 => collect", 26, "how long to collect");
  parse_bad("cpu-usage > 80 => stacks gcdump", 26, "',' and another action");
  parse_bad("exception X in 10s => stacks", 13, "a count");
  parse_bad("exception 5 10s => stacks", 13, "'in'");
  parse_bad("gc-pause 200ms => stacks", 10, "'>'");
  parse_bad("cpu usage > 80 => stacks", 5, "a comparison");
  parse_bad("cpu-usage > 80 => exec", 23, "a command after 'exec'");
}

/* ---- firing ---- */

struct fired {
  int n;
  size_t index[16];
  uint64_t time[16], held[16];
  char why[16][256];
};

static void on_fired(void *ud, const struct dnt_firing *f) {
  struct fired *x = ud;
  if (x->n < 16) {
    x->index[x->n] = f->index, x->time[x->n] = f->time_ms, x->held[x->n] = f->held_back;
    snprintf(x->why[x->n], sizeof x->why[0], "%s", f->why);
  }
  x->n++;
}

static struct dnt_rules *engine(struct fired *x, const char *const *rules, size_t n) {
  memset(x, 0, sizeof *x);
  struct dnt_rules *e = dnt_rules_new(on_fired, x);
  cr_assert(e);
  for (size_t i = 0; i < n; i++) {
    struct dnt_rule r = parse_ok(rules[i]);
    cr_assert_eq(dnt_rules_add(e, &r), 0);
  }
  return e;
}

Test(rules, a_counter_fires_once_it_held_long_enough) {
  struct fired x;
  const char *const rules[] = {"cpu-usage > 80 for 3s => stacks"};
  struct dnt_rules *e = engine(&x, rules, 1);
  /* 90 at 1 s, 2 s; 50 at 3 s breaks it; 90 from 4 s: held 3 s at 7 s */
  double v[] = {90, 90, 50, 90, 91, 92, 93, 94};
  for (int i = 0; i < 8; i++) dnt_rules_counter(e, "System.Runtime", "cpu-usage", "%", v[i], 1000 * (uint64_t)(i + 1));
  cr_assert_eq(x.n, 1, "%d firings", x.n);
  cr_expect_eq(x.time[0], 7000);
  cr_expect(strstr(x.why[0], "cpu-usage > 80 for 3 s (cpu-usage = 93 %)"), "%s", x.why[0]);
  cr_expect(dnt_rules_counter_seen(e, 0));
  /* another counter, another provider: not this rule's */
  dnt_rules_counter(e, "Other", "cpu-usage", "%", 99, 20000);
  dnt_rules_counter(e, "System.Runtime", "working-set", "MB", 99, 20000);
  cr_expect_eq(x.n, 1);
  dnt_rules_free(e);
}

Test(rules, units_are_converted_to_the_counters) {
  struct fired x;
  const char *const rules[] = {"gc-heap-size > 500MB => gcdump", "Meter/heap > 1GB => gcdump", "x/lat > 1s => stacks"};
  struct dnt_rules *e = engine(&x, rules, 3);
  dnt_rules_counter(e, "System.Runtime", "gc-heap-size", "MB", 499, 1000);
  dnt_rules_counter(e, "Meter", "heap", "By", 999999999, 1000);
  dnt_rules_counter(e, "x", "lat", "ms", 1000, 1000);
  cr_expect_eq(x.n, 0);
  dnt_rules_counter(e, "System.Runtime", "gc-heap-size", "MB", 501, 2000);
  dnt_rules_counter(e, "Meter", "heap", "By", 1000000001, 2000);
  dnt_rules_counter(e, "x", "lat", "ms", 1001, 2000);
  cr_expect_eq(x.n, 3);
  dnt_rules_free(e);
}

/* A histogram's values come one per percentile: a rule takes the one it names, p50 by default. */
Test(rules, percentiles_go_to_the_rules_that_name_them) {
  struct fired x;
  const char *const rules[] = {"m/lat[p95] > 40 => stacks", "m/lat > 40 => stacks", "m/plain[p95] > 0 => stacks"};
  struct dnt_rules *e = engine(&x, rules, 3);
  dnt_rules_counter_tagged(e, "m", "lat", "route=/a,Percentile=50", "ms", 30, 1000);
  dnt_rules_counter_tagged(e, "m", "lat", "route=/a,Percentile=95", "ms", 45, 1000);
  dnt_rules_counter_tagged(e, "m", "lat", "route=/a,Percentile=99", "ms", 49, 1000);
  dnt_rules_counter_tagged(e, "m", "plain", "", "ms", 10, 1000); /* no percentile: not a p95 */
  cr_assert_eq(x.n, 1, "%d firings", x.n);
  cr_expect_eq(x.index[0], 0);
  cr_expect(!dnt_rules_counter_seen(e, 2));
  dnt_rules_counter_tagged(e, "m", "lat", "route=/a,Percentile=50", "ms", 41, 2000);
  cr_assert_eq(x.n, 2);
  cr_expect_eq(x.index[1], 1);
  dnt_rules_free(e);
}

Test(rules, exceptions_fire_on_count_within_the_window) {
  struct fired x;
  const char *const rules[] = {"exception Sample.SampleException 5 in 10s => dump mini"};
  struct dnt_rules *e = engine(&x, rules, 1);
  /* 4 in the first 10 s, one every 3 s after: never 5 within 10 s */
  for (int i = 0; i < 4; i++) dnt_rules_exception(e, "Sample.SampleException", 1000 * (uint64_t)i);
  for (int i = 0; i < 5; i++) dnt_rules_exception(e, "Sample.SampleException", 13000 + 3000 * (uint64_t)i);
  dnt_rules_exception(e, "System.Other", 30000);
  cr_expect_eq(x.n, 0);
  /* then 5 within a second */
  for (int i = 0; i < 5; i++) dnt_rules_exception(e, "Sample.SampleException", 40000 + 100 * (uint64_t)i);
  cr_assert_eq(x.n, 1);
  cr_expect_eq(x.time[0], 40400);
  /* 5 more at once, within 10 minutes of it: held back, counted on the next firing */
  for (int i = 0; i < 5; i++) dnt_rules_exception(e, "Sample.SampleException", 50000 + (uint64_t)i);
  cr_expect_eq(x.n, 1);
  for (int i = 0; i < 5; i++) dnt_rules_exception(e, "Sample.SampleException", 700000 + (uint64_t)i);
  cr_assert_eq(x.n, 2);
  cr_expect_eq(x.held[1], 1);
  dnt_rules_free(e);
}

/* The caller matches events; the engine counts them: each one (no window), or COUNT within the
 * window, and a rule's index is the only thing that ties a match to it. */
Test(rules, events_fire_each_or_on_count_within_the_window) {
  struct fired x;
  const char *const rules[] = {"event P/E => stacks", "event P/E 3 in 1s => stacks", "exception 1 in 1s => stacks"};
  struct dnt_rules *e = engine(&x, rules, 3);
  dnt_rules_set_limits(e, 100, 600000, 0);
  dnt_rules_event(e, 0, "E", 1000);
  cr_assert_eq(x.n, 1);
  cr_expect_eq(x.index[0], 0);
  cr_expect(strstr(x.why[0], "event P/E (E)"), "%s", x.why[0]);
  dnt_rules_event(e, 0, NULL, 1100);
  cr_assert_eq(x.n, 2);
  cr_expect(strstr(x.why[1], "(an event)"), "%s", x.why[1]);
  /* rule 1: two in the first second, the third 1.5 s after the first: no; two more within it */
  dnt_rules_event(e, 1, "E", 1000);
  dnt_rules_event(e, 1, "E", 1400);
  dnt_rules_event(e, 1, "E", 2500);
  cr_expect_eq(x.n, 2);
  dnt_rules_event(e, 1, "E", 2600);
  cr_expect_eq(x.n, 2, "1400, 2500, 2600: 1.2 s");
  dnt_rules_event(e, 1, "E", 2700);
  cr_assert_eq(x.n, 3);
  cr_expect_eq(x.index[2], 1);
  cr_expect(strstr(x.why[2], "(3 E in 0.200 s)"), "%s", x.why[2]);
  /* an index that is not an event rule's, or out of range: nothing */
  dnt_rules_event(e, 2, "E", 3000);
  dnt_rules_event(e, 9, "E", 3000);
  cr_expect_eq(x.n, 3);
  cr_expect(dnt_rules_want(e, DNT_TRIGGER_EVENT));
  dnt_rules_free(e);
}

/* process-start: the rules of that kind fire when the caller says the process is followed; the
 * limits hold as for any rule. */
Test(rules, process_start_fires_its_rules_only) {
  struct fired x;
  const char *const rules[] = {"cpu-usage > 1 => stacks", "process-start => exec true"};
  struct dnt_rules *e = engine(&x, rules, 2);
  cr_expect_eq(dnt_rules_get(e, 1)->kind, DNT_TRIGGER_PROCESS_START);
  char buf[64];
  cr_expect_str_eq(dnt_rule_trigger_text(dnt_rules_get(e, 1), buf, sizeof buf), "process-start");
  dnt_rules_process_start(e, 5000);
  cr_assert_eq(x.n, 1);
  cr_expect_eq(x.index[0], 1);
  cr_expect_eq(x.time[0], 5000);
  dnt_rules_process_start(e, 6000); /* within its limit window: held back */
  cr_expect_eq(x.n, 1);
  parse_bad("process-start now => stacks", 15, "'=>'");
  dnt_rules_free(e);
}

Test(rules, limits_and_cooldown) {
  struct fired x;
  const char *const rules[] = {"gc-pause > 100ms => stacks"};
  struct dnt_rules *e = engine(&x, rules, 1);
  dnt_rules_set_limits(e, 2, 60000, 5000);
  uint64_t t[] = {1000, 3000, 7000, 9000, 30000, 61001, 68000};
  /* fires at 1 s; 3 s within the cooldown; 7 s (second of 2 in a minute); 9 s and 30 s: 2 in the
   * minute already; 61.001 s: 1 s left the minute, 7 s alone is in it; 68 s: 7 s left it too, and
   * the cooldown after 61.001 s is over */
  for (int i = 0; i < 7; i++) dnt_rules_gc_pause(e, 150, t[i]);
  dnt_rules_gc_pause(e, 50, 200000); /* not past the threshold */
  cr_assert_eq(x.n, 4, "%d firings", x.n);
  cr_expect_eq(x.time[0], 1000);
  cr_expect_eq(x.time[1], 7000);
  cr_expect_eq(x.time[2], 61001);
  cr_expect_eq(x.held[1], 1);
  cr_expect_eq(x.held[2], 2);
  cr_expect_eq(x.time[3], 68000);
  cr_expect(strstr(x.why[3], "a pause of 150.0 ms"), "%s", x.why[3]);
  dnt_rules_free(e);
}
