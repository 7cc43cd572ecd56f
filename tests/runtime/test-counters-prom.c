/* The Prometheus side of `counters`: the strict checker itself, the text writer on hand-built
 * tables and on the counter traces of the corpus, the HTTP server driven by curl and by raw
 * sockets, and `counters serve` / `collect --format prometheus` against the real sample, checked
 * by Prometheus's own promtool and scraped by a real Prometheus server (Debian's `prometheus`). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "dnt-counters.h"
#include "dnt-http.h"
#include "../lib/http-thread.h"
#include "../lib/loopback.h"
#include "../lib/prom-check.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

/* ---- the checker must catch each kind of defect ---- */

Test(prom_check, accepts_the_format) {
  const char *good = "# HELP a_total Things (P, {thing})\n# TYPE a_total counter\n"
                     "a_total{provider=\"P\",k=\"v \\\"q\\\" \\\\ \\n\"} 1.5e+03\n"
                     "a_total{provider=\"Q\"} 0\n"
                     "# TYPE s summary\ns{quantile=\"0.5\"} 3\ns{quantile=\"0.99\"} NaN\ns_sum 10\ns_count 2\n"
                     "# TYPE g gauge\ng -Inf\ng{x=\"1\"} +Inf 1700000000000\n# a plain comment\nuntyped_one 7\n";
  char err[256];
  size_t n = 0;
  cr_assert_eq(prom_check(good, &n, err, sizeof err), 0, "%s", err);
  cr_expect_eq(n, 9);
}

Test(prom_check, rejects_each_defect) {
  static const char *const bad[] = {
      "a 1",                                                     /* no final newline */
      "9a 1\n",                                                  /* bad name */
      "a{b=\"1\" 2\n",                                           /* unterminated labels */
      "a{b=1} 2\n",                                              /* unquoted value */
      "a{__b=\"1\"} 2\n",                                        /* reserved label */
      "a{b=\"\\x\"} 2\n",                                        /* bad escape */
      "a{b=\"1\",b=\"2\"} 2\n",                                  /* label twice */
      "a one\n",                                                 /* not a number */
      "a 1 2 3\n",                                               /* junk after the value */
      "a 1\na 2\n",                                              /* duplicate series */
      "a 1\nb 1\na{x=\"1\"} 1\n",                                /* family not together */
      "# TYPE a counter\na 1\n",                                 /* counter without _total */
      "# TYPE a gauge\n# TYPE a gauge\na 1\n",                   /* TYPE twice */
      "a 1\n# TYPE a gauge\n",                                   /* TYPE after samples */
      "# TYPE a summary\na 1\n",                                 /* summary sample without quantile */
      "# TYPE a histogram\na_bucket 1\n",                        /* bucket without le */
      "# TYPE a meter\na 1\n",                                   /* unknown type */
      "# HELP a x\n# HELP a y\na 1\n",                           /* HELP twice */
      "a 1\r\n",                                                 /* CR */
      "a 1 12.5\n",                                              /* fractional timestamp */
      "# TYPE a_count gauge\na_count 1\n",                       /* a gauge named *_count */
      "# TYPE a_sum gauge\na_sum 1\n",                           /* a gauge named *_sum */
      "# TYPE a_total gauge\na_total 1\n",                       /* a gauge named *_total */
      "# TYPE a_bucket summary\na_bucket{quantile=\"0.5\"} 1\n", /* a summary named *_bucket */
      "# TYPE a_milliseconds gauge\na_milliseconds 1\n",         /* not a base unit */
      "# TYPE a_megabytes_total counter\na_megabytes_total 1\n", /* not a base unit */
      "# TYPE aB gauge\naB 1\n",                                 /* camelCase */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char err[256] = "";
    cr_expect_neq(prom_check(bad[i], NULL, err, sizeof err), 0, "case %zu accepted: %s", i, bad[i]);
  }
}

/* ---- the writer ---- */

static void put(struct dnt_counter_table *t, const char *provider, const char *name, const char *unit,
                const char *tags, int kind, double value) {
  dnt_counter_value v = {.provider = provider, .name = name, .display_name = name, .unit = unit, .tags = tags,
                         .kind = kind, .from_meter = 1, .value = value, .interval_s = 1};
  cr_assert_eq(dnt_counter_table_put(t, &v), 0);
}

static char *render(const struct dnt_counter_table *t, long *samples) {
  char *text = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&text, &len);
  cr_assert(fp);
  *samples = dnt_counters_prom_write(fp, t);
  fclose(fp);
  return text;
}

/* The table as Prometheus text, which the format checker accepts whole: every sample written is
 * one it counts (heap, caller-owned). */
static char *render_checked(const struct dnt_counter_table *t) {
  long samples;
  char *text = render(t, &samples);
  char err[256];
  size_t checked;
  cr_assert_eq(prom_check(text, &checked, err, sizeof err), 0, "%s\n%s", err, text);
  cr_expect_eq((size_t)samples, checked);
  return text;
}

static void expect_value(const char *text, const char *series, double want) {
  double v;
  cr_assert_eq(prom_value(text, series, &v), 0, "no line '%s' in:\n%s", series, text);
  if (isnan(want))
    cr_expect(isnan(v), "%s is NaN", series);
  else
    cr_expect_eq(v, want, "%s = %.17g, not %.17g", series, v, want);
}

Test(prom_writer, names_types_units_labels) {
  struct dnt_counter_table t = {0};
  put(&t, "System.Runtime", "dotnet.gc.heap.total_allocated", "By", "", DNT_COUNTER_SUM, 100);
  put(&t, "System.Runtime", "dotnet.gc.heap.total_allocated", "By", "", DNT_COUNTER_SUM, 50); /* summed */
  put(&t, "System.Runtime", "cpu-usage", "%", "", DNT_COUNTER_MEAN, 3.5);
  put(&t, "Sample.Meter", "sample.requests", "{request}", "route=/a", DNT_COUNTER_SUM, 4);
  put(&t, "Sample.Meter", "sample.latency", "ms", "route=/a,Percentile=50", DNT_COUNTER_HISTOGRAM, 10);
  put(&t, "Sample.Meter", "sample.latency", "ms", "route=/a,Percentile=95", DNT_COUNTER_HISTOGRAM, 34.8125);
  put(&t, "Sample.Meter", "odd", "", "q=a\"b\\c\nd,__k=1,9x=2", DNT_COUNTER_MEAN, NAN);
  put(&t, "Sample.Meter", "9lives", "s", "", DNT_COUNTER_MEAN, 1e300);
  put(&t, "Sample.Meter", "pause.time.seconds", "s", "", DNT_COUNTER_MEAN, 0.25);
  put(&t, "Sample.Meter", "weird unit", "kB/s", "", DNT_COUNTER_MEAN, 2);
  char *text = render_checked(&t);
  expect_value(text, "dotnet_gc_heap_total_allocated_bytes_total{provider=\"System.Runtime\"}", 150);
  expect_value(text, "cpu_usage_percent{provider=\"System.Runtime\"}", 3.5);
  expect_value(text, "sample_requests_total{provider=\"Sample.Meter\",route=\"/a\"}", 4);
  /* milliseconds in the base unit: seconds, divided exactly */
  expect_value(text, "sample_latency_seconds{provider=\"Sample.Meter\",route=\"/a\",quantile=\"0.5\"}", 0.01);
  expect_value(text, "sample_latency_seconds{provider=\"Sample.Meter\",route=\"/a\",quantile=\"0.95\"}", 0.0348125);
  cr_expect(strstr(text, "quantile=\"0.95\"} 0.0348125\n"), "printed as the shortest decimal:\n%s", text);
  expect_value(text, "odd{provider=\"Sample.Meter\",q=\"a\\\"b\\\\c\\nd\",x_k=\"1\",x9x=\"2\"}", NAN);
  expect_value(text, "_9lives_seconds{provider=\"Sample.Meter\"}", 1e300);
  expect_value(text, "pause_time_seconds{provider=\"Sample.Meter\"}", 0.25);
  expect_value(text, "weird_unit_kb_per_s{provider=\"Sample.Meter\"}", 2);
  cr_expect(strstr(text, "# TYPE sample_latency_seconds summary\n"), "%s", text);
  cr_expect(strstr(text, "# TYPE sample_requests_total counter\n"), "%s", text);
  cr_expect(strstr(text, "# TYPE cpu_usage_percent gauge\n"), "%s", text);
  cr_expect(!strstr(text, "milliseconds"), "%s", text);
  cr_expect(strstr(text, "# HELP sample_latency_seconds sample.latency (Sample.Meter, ms, exported in seconds)\n"),
            "%s", text);
  free(text);
  dnt_counter_table_release(&t);
}

/* What promtool's linter asks of names (issue 18 item 9): base units with the values converted,
 * no `_count`/`_sum`/`_bucket`/`_total` on a gauge, `_total` once on a counter, snake_case. */
/* A histogram's summary ends with its _sum and _count, as the exposition format expects (issue
 * 28 item 8): the runtime sends each interval's count and sum with the percentiles; the summary's
 * are their totals since the series appeared (two intervals: 3 measurements of 30 ms in all,
 * then 2 of 20 ms), the sum in seconds as the quantiles. A runtime that sends none (.NET 6-7)
 * gets quantiles alone. Read back by the format checker. */
static void put_hist(struct dnt_counter_table *t, const char *name, const char *tags, double value, double count,
                     double sum, int has) {
  dnt_counter_value v = {.provider = "Sample.Meter", .name = name, .display_name = name, .unit = "ms", .tags = tags,
                         .kind = DNT_COUNTER_HISTOGRAM, .from_meter = 1, .value = value, .interval_s = 1,
                         .hist_count = count, .hist_sum = sum, .has_hist = has};
  cr_assert_eq(dnt_counter_table_put(t, &v), 0);
}

Test(prom_writer, summaries_have_their_sum_and_count) {
  struct dnt_counter_table t = {0};
  put_hist(&t, "sample.latency", "route=/a,Percentile=50", 10, 3, 30, 1);
  put_hist(&t, "sample.latency", "route=/a,Percentile=95", 12, 3, 30, 1);
  put_hist(&t, "sample.latency", "route=/a,Percentile=50", 9, 2, 20, 1);
  put_hist(&t, "sample.latency", "route=/a,Percentile=95", 11, 2, 20, 1);
  put_hist(&t, "old.latency", "Percentile=50", 5, 0, 0, 0);
  char *text = render_checked(&t);
  expect_value(text, "sample_latency_seconds_sum{provider=\"Sample.Meter\",route=\"/a\"}", 0.05);
  expect_value(text, "sample_latency_seconds_count{provider=\"Sample.Meter\",route=\"/a\"}", 5);
  expect_value(text, "sample_latency_seconds{provider=\"Sample.Meter\",route=\"/a\",quantile=\"0.95\"}", 0.011);
  cr_expect(!strstr(text, "old_latency_seconds_sum") && !strstr(text, "old_latency_seconds_count"),
            "nothing made up where the runtime sent none:\n%s", text);
  free(text);
  dnt_counter_table_release(&t);
}

Test(prom_writer, base_units_and_reserved_suffixes) {
  struct dnt_counter_table t = {0};
  put(&t, "System.Runtime", "dotnet.assembly.count", "{assembly}", "", DNT_COUNTER_MEAN, 14);
  put(&t, "System.Runtime", "dotnet.process.cpu.count", "{cpu}", "", DNT_COUNTER_MEAN, 2);
  put(&t, "System.Runtime", "dotnet.timer.count", "{timer}", "", DNT_COUNTER_MEAN, 3);
  put(&t, "System.Runtime", "threadpool-thread-count", "", "", DNT_COUNTER_MEAN, 4);
  put(&t, "P", "bytes.sum", "By", "", DNT_COUNTER_MEAN, 5);
  put(&t, "P", "latency.bucket", "", "", DNT_COUNTER_MEAN, 6);
  put(&t, "P", "total-requests", "", "", DNT_COUNTER_MEAN, 7);  /* `total` first: no clash */
  put(&t, "P", "requests.total", "", "", DNT_COUNTER_MEAN, 8);  /* a level named *_total */
  put(&t, "Q", "requests.total", "", "", DNT_COUNTER_SUM, 9);   /* an amount named *_total */
  put(&t, "System.Runtime", "working-set", "MB", "", DNT_COUNTER_MEAN, 63.5);
  put(&t, "System.Runtime", "time-in-jit", "ms", "", DNT_COUNTER_SUM, 125);
  put(&t, "P", "gc.pause.ms", "ms", "", DNT_COUNTER_MEAN, 2);
  put(&t, "P", "wait", "us", "", DNT_COUNTER_MEAN, 1500);
  put(&t, "P", "spin", "ns", "", DNT_COUNTER_MEAN, 250);
  put(&t, "P", "uptime", "min", "", DNT_COUNTER_MEAN, 2);
  put(&t, "P", "queueSize", "", "routeName=/x", DNT_COUNTER_MEAN, 10);
  long samples;
  char *text = render(&t, &samples);
  char err[256];
  cr_assert_eq(prom_check(text, NULL, err, sizeof err), 0, "%s\n%s", err, text);
  expect_value(text, "dotnet_assembly_count_current{provider=\"System.Runtime\"}", 14);
  expect_value(text, "dotnet_process_cpu_count_current{provider=\"System.Runtime\"}", 2);
  expect_value(text, "dotnet_timer_count_current{provider=\"System.Runtime\"}", 3);
  expect_value(text, "threadpool_thread_count_current{provider=\"System.Runtime\"}", 4);
  expect_value(text, "bytes_sum_bytes{provider=\"P\"}", 5); /* the unit last: no _sum at the end */
  expect_value(text, "latency_bucket_current{provider=\"P\"}", 6);
  expect_value(text, "total_requests{provider=\"P\"}", 7);
  expect_value(text, "requests_total_current{provider=\"P\"}", 8);
  expect_value(text, "requests_total{provider=\"Q\"}", 9);
  cr_expect(strstr(text, "# TYPE requests_total counter\n"), "%s", text);
  expect_value(text, "working_set_bytes{provider=\"System.Runtime\"}", 63500000);
  expect_value(text, "time_in_jit_seconds_total{provider=\"System.Runtime\"}", 0.125);
  expect_value(text, "gc_pause_seconds{provider=\"P\"}", 0.002);
  expect_value(text, "wait_seconds{provider=\"P\"}", 0.0015);
  expect_value(text, "spin_seconds{provider=\"P\"}", 2.5e-7);
  expect_value(text, "uptime_seconds{provider=\"P\"}", 120);
  expect_value(text, "queue_size{provider=\"P\",route_name=\"/x\"}", 10);
  free(text);
  dnt_counter_table_release(&t);
}

/* A Meter counter's value is the running total the runtime sends with each rate, not our sum of
 * the rates (issue 18 item 10); without one (EventCounters) the increments are summed without
 * drift. */
Test(prom_writer, counter_totals) {
  struct dnt_counter_table t = {0};
  dnt_counter_value v = {.provider = "System.Runtime", .name = "dotnet.gc.collections", .display_name = "x",
                         .unit = "{collection}", .tags = "gc.heap.generation=gen2", .kind = DNT_COUNTER_SUM,
                         .from_meter = 1, .interval_s = 1};
  /* dntrace joins a process that has done 348 gen2 collections; two more come */
  v.value = 0, v.total = 348, v.has_total = 1;
  cr_assert_eq(dnt_counter_table_put(&t, &v), 0);
  v.value = 2, v.total = 350;
  cr_assert_eq(dnt_counter_table_put(&t, &v), 0);
  /* an ObservableCounter that is really a level: 3 threads, unchanged */
  dnt_counter_value th = v;
  th.name = "dotnet.thread_pool.thread.count", th.unit = "{thread}", th.tags = "";
  th.value = 0, th.total = 3;
  cr_assert_eq(dnt_counter_table_put(&t, &th), 0);
  /* the runtime's decimal total, printed as the runtime has it */
  dnt_counter_value pause = th;
  pause.name = "dotnet.gc.pause.time", pause.unit = "s";
  pause.value = 0.00101, pause.total = 0.01828;
  cr_assert_eq(dnt_counter_table_put(&t, &pause), 0);
  /* an EventCounter's increments: 0.1 ten times is 1, not 0.9999999999999999 */
  dnt_counter_value ec = {.provider = "Old", .name = "time-in-gc-total", .display_name = "x", .unit = "s",
                          .tags = "", .kind = DNT_COUNTER_SUM, .interval_s = 1, .value = 0.1};
  for (int i = 0; i < 10; i++) cr_assert_eq(dnt_counter_table_put(&t, &ec), 0);
  long samples;
  char *text = render(&t, &samples);
  char err[256];
  cr_assert_eq(prom_check(text, NULL, err, sizeof err), 0, "%s\n%s", err, text);
  expect_value(text, "dotnet_gc_collections_total{provider=\"System.Runtime\",gc_heap_generation=\"gen2\"}", 350);
  expect_value(text, "dotnet_thread_pool_thread_count_total{provider=\"System.Runtime\"}", 3);
  cr_expect(strstr(text, "dotnet_gc_pause_time_seconds_total{provider=\"System.Runtime\"} 0.01828\n"), "%s", text);
  cr_expect(strstr(text, "time_in_gc_total_seconds_total{provider=\"Old\"} 1\n"), "%s", text);
  free(text);
  dnt_counter_table_release(&t);
}

Test(prom_writer, one_type_per_family_and_no_duplicates) {
  struct dnt_counter_table t = {0};
  /* one family name from two providers, a level in one, a histogram in the other */
  put(&t, "A", "lag", "", "Percentile=50", DNT_COUNTER_HISTOGRAM, 1);
  put(&t, "B", "lag", "", "", DNT_COUNTER_MEAN, 2);
  /* two names that sanitise alike, same labels: one series survives */
  put(&t, "A", "x.y", "", "", DNT_COUNTER_MEAN, 3);
  put(&t, "A", "x-y", "", "", DNT_COUNTER_MEAN, 4);
  long samples;
  char *text = render(&t, &samples);
  char err[256];
  cr_assert_eq(prom_check(text, NULL, err, sizeof err), 0, "%s\n%s", err, text);
  /* the types in order counter, gauge, summary: the first keeps the name */
  expect_value(text, "lag{provider=\"B\"}", 2);
  expect_value(text, "a_lag{provider=\"A\",quantile=\"0.5\"}", 1);
  cr_expect_eq(samples, 3, "%s", text);
  free(text);
  dnt_counter_table_release(&t);
}

Test(prom_writer, empty_table_and_many_series) {
  struct dnt_counter_table t = {0};
  long samples;
  char *text = render(&t, &samples);
  cr_expect_eq(samples, 0);
  cr_expect_str_eq(text, "");
  free(text);
  char tags[64];
  for (int i = 0; i < 3000; i++) { /* the index grows several times */
    snprintf(tags, sizeof tags, "n=%d", i);
    put(&t, "P", i % 2 ? "odd" : "even", "By", tags, DNT_COUNTER_MEAN, i);
  }
  cr_expect_eq(t.n, 3000);
  cr_assert_not_null(dnt_counter_table_find(&t, "P", "odd", "n=2999"));
  cr_expect_null(dnt_counter_table_find(&t, "P", "odd", "n=2998"));
  text = render(&t, &samples);
  char err[256];
  cr_assert_eq(prom_check(text, NULL, err, sizeof err), 0, "%s", err);
  cr_expect_eq(samples, 3000);
  expect_value(text, "odd_bytes{provider=\"P\",n=\"2999\"}", 2999);
  free(text);
  dnt_counter_table_release(&t);
}

static int into_table(void *ud, const dnt_counter_value *v) { return dnt_counter_table_put(ud, v); }

/* Every counter trace of the corpus, through the decoder, gives a valid exposition. */
Test(prom_writer, corpus_counter_traces) {
  const char *d = getenv("DNT_CORPUS");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", d ? d : "../shared/corpus");
  if (access(dir, R_OK) != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("no corpus at %s (CI=true: a missing corpus is a failure)", dir);
    cr_skip_test("no corpus at %s (set DNT_CORPUS)", dir);
  }
  static const char *const files[] = {"console-net8.nettrace", "aspnet-net9.nettrace", "generic-net10.nettrace",
                                      "aspnet-net10-loaded.nettrace"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[4400], err[512];
    snprintf(path, sizeof path, "%s/tbbuck__countercow/%s", dir, files[i]);
    struct dnt_counter_table t = {0};
    cr_assert_eq(dnt_counters_read_trace(path, NULL, into_table, &t, err, sizeof err), 0, "%s: %s", path, err);
    long samples;
    char *text = render(&t, &samples);
    cr_expect_eq(prom_check(text, NULL, err, sizeof err), 0, "%s: %s", files[i], err);
    cr_expect_gt(samples, 10, "%s: %ld samples", files[i], samples);
    cr_expect(strstr(text, "cpu_usage_percent{provider=\"System.Runtime\"}"), "%s: cpu-usage", files[i]);
    free(text);
    dnt_counter_table_release(&t);
  }
}

/* ---- the HTTP server, on a loop in a thread of its own ---- */

/* Sends req in pieces of `chunk` bytes and returns what came back (heap string). */
static char *raw_request(int port, const char *req, size_t len, size_t chunk) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  for (size_t off = 0; off < len; off += chunk) {
    size_t n = len - off < chunk ? len - off : chunk;
    if (write(fd, req + off, n) != (ssize_t)n) break; /* the server may close early (431) */
    if (chunk < len) usleep(2000);
  }
  char *out = calloc(1, 65536);
  size_t have = 0;
  ssize_t n;
  while (have < 65535 && (n = read(fd, out + have, 65535 - have)) > 0) have += (size_t)n;
  close(fd);
  return out;
}

Test(http_serve, answers_curl_and_every_bad_request, .timeout = 60) {
  struct server_thread s;
  server_start(&s);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "curl -sf http://127.0.0.1:%d/metrics", s.port);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  char body[256] = "";
  size_t n = fread(body, 1, sizeof body - 1, p);
  body[n] = '\0';
  cr_expect_eq(pclose(p), 0, "curl succeeded");
  cr_expect_str_eq(body, "# TYPE up gauge\nup 1\n");

  const char *get = "GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n";
  char *r = raw_request(s.port, get, strlen(get), 1); /* a byte at a time */
  cr_expect(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0 && strstr(r, "\r\n\r\n# TYPE up gauge\nup 1\n"), "%s", r);
  cr_expect(strstr(r, "Content-Length: 21\r\n") && strstr(r, "Connection: close\r\n"), "%s", r);
  free(r);
  const char *head = "HEAD /metrics HTTP/1.0\r\n\r\n";
  r = raw_request(s.port, head, strlen(head), 5);
  cr_expect(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0 && !strstr(r, "up 1"), "HEAD has no body: %s", r);
  free(r);
  static const struct { const char *req; const char *status; } cases[] = {
      {"GET /nope HTTP/1.1\r\n\r\n", "404"},   {"POST /metrics HTTP/1.1\r\n\r\n", "405"},
      {"GARBAGE\r\n\r\n", "400"},               {"GET metrics HTTP/1.1\r\n\r\n", "400"},
      {"GET /metrics HTTP/2.0\r\n\r\n", "400"}, {"GET  /metrics HTTP/1.1\r\n\r\n", "400"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    r = raw_request(s.port, cases[i].req, strlen(cases[i].req), 3);
    char want[32];
    snprintf(want, sizeof want, "HTTP/1.1 %s ", cases[i].status);
    cr_expect(strncmp(r, want, strlen(want)) == 0, "'%s' -> %s, got: %s", cases[i].req, cases[i].status, r);
    free(r);
  }
  /* a head that never ends within the cap */
  size_t big = DNT_HTTP_MAX_HEADER + 100;
  char *huge = malloc(big + 1);
  memcpy(huge, "GET /metrics HTTP/1.1\r\nX: ", 26);
  memset(huge + 26, 'a', big - 26);
  huge[big] = '\0';
  r = raw_request(s.port, huge, big, 4096);
  cr_expect(strncmp(r, "HTTP/1.1 431 ", 13) == 0, "%s", r);
  free(r);
  free(huge);
  server_stop(&s);
}

Test(http_serve, refuses_a_bad_address) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  dnt_http_server *srv = NULL;
  char err[256];
  cr_expect_neq(dnt_http_server_start(&loop, "nonsense", server_thread_answer, NULL, &srv, err, sizeof err), 0);
  cr_expect_neq(dnt_http_server_start(&loop, "127.0.0.1:99999", server_thread_answer, NULL, &srv, err, sizeof err), 0);
  cr_expect_neq(dnt_http_server_start(&loop, "example.com:80", server_thread_answer, NULL, &srv, err, sizeof err), 0);
  cr_expect(strstr(err, "numeric"), "%s", err);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
}

/* ---- the request parser alone ---- */

static int parse(const char *req) {
  struct dnt_http_request r;
  return dnt_http_request_parse(req, strlen(req), &r);
}

Test(http_parse, statuses_by_the_rules) {
  static const struct { const char *req; int status; } cases[] = {
      {"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 200},
      {"HEAD / HTTP/1.0\n\n", 200},
      {"GET /a?b=c HTTP/1.1\r\n\r\n", 200},
      {"GET /metrics HTTP/1.1\r\nHost: x\r\n", 0},     /* the empty line has not come */
      {"GET /metrics HTTP/1.1\r\n", 0},
      {"", 0},
      {"POST /metrics HTTP/1.1\r\n\r\n", 405},
      {"get /metrics HTTP/1.1\r\n\r\n", 405},           /* methods are case-sensitive */
      {"GETX /metrics HTTP/1.1\r\n\r\n", 405},
      {"GET metrics HTTP/1.1\r\n\r\n", 400},            /* origin-form only */
      {"GET  /metrics HTTP/1.1\r\n\r\n", 400},
      {"GET /metrics  HTTP/1.1\r\n\r\n", 400},
      {"GET /metrics HTTP/1.1 x\r\n\r\n", 400},
      {"GET /metrics HTTP/2.0\r\n\r\n", 400},
      {"GET /metrics HTTP/1.10\r\n\r\n", 400},
      {"GET /metrics HTTP/1.\r\n\r\n", 400},
      {"GET /metrics\r\n\r\n", 400},
      {" /metrics HTTP/1.1\r\n\r\n", 400},
      {"GET /me\ttrics HTTP/1.1\r\n\r\n", 400},
      {"GET /me\rtrics HTTP/1.1\r\n\r\n", 400},
      {"\r\n\r\n", 400},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect_eq(parse(cases[i].req), cases[i].status, "case %zu", i);
  cr_expect_eq(dnt_http_request_parse("GET /\0 HTTP/1.1\r\n\r\n", 20, &(struct dnt_http_request){0}), 400);
  cr_expect_eq(dnt_http_request_parse("GET /x\0", 7, &(struct dnt_http_request){0}), 400, "a NUL before the end");
}

Test(http_parse, every_prefix_waits_and_the_whole_head_is_found) {
  const char *req = "HEAD /metrics?name=a%20b HTTP/1.1\r\nHost: 127.0.0.1:9400\r\nAccept: */*\r\n\r\nBODY";
  size_t head_len = strlen(req) - 4;
  struct dnt_http_request r;
  for (size_t n = 0; n < head_len; n++)
    cr_expect_eq(dnt_http_request_parse(req, n, &r), 0, "prefix of %zu bytes", n);
  for (size_t n = head_len; n <= strlen(req); n++) {
    cr_assert_eq(dnt_http_request_parse(req, n, &r), 200, "%zu bytes", n);
    cr_expect_eq(r.head, 1);
    cr_expect_eq(r.head_len, head_len);
    cr_expect_eq(r.target_len, strlen("/metrics?name=a%20b"));
    cr_expect(r.target == req + 5);
  }
}

Test(http_parse, head_cap) {
  size_t n = DNT_HTTP_MAX_HEADER + 10;
  char *big = malloc(n);
  memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
  memset(big + 19, 'a', n - 19);
  struct dnt_http_request r;
  cr_expect_eq(dnt_http_request_parse(big, DNT_HTTP_MAX_HEADER - 1, &r), 0);
  cr_expect_eq(dnt_http_request_parse(big, DNT_HTTP_MAX_HEADER, &r), 431);
  cr_expect_eq(dnt_http_request_parse(big, n, &r), 431);
  /* an end of head just past the cap is still too large */
  memcpy(big + DNT_HTTP_MAX_HEADER - 1, "\r\n\r\n", 4);
  cr_expect_eq(dnt_http_request_parse(big, DNT_HTTP_MAX_HEADER + 3, &r), 431);
  free(big);
}

/* ---- slow clients: deadlines and caps ---- */

/* The ceiling of a wait, DNT_HANG_MS from now: only a hang reaches it. */
static double hang_deadline(void) { return dnt_now_ms() + DNT_HANG_MS; } /* timing: a hang's ceiling */

/* 1 while a wait may go on: its ceiling (hang_deadline) is not reached. */
static int waiting(double end) { return dnt_now_ms() < end; } /* timing: a hang's ceiling */

/* A connection from src (127.0.0.x) that has sent the start of a request and no more. */
static int slow_client(int port, const char *src) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_geq(fd, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  inet_pton(AF_INET, src, &a.sin_addr);
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "bind %s", src);
  a.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(send(fd, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL), 23);
  return fd;
}

/* 1 when the server has closed fd (EOF or reset) within ms milliseconds. */
static int closed_within(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, ms) <= 0) return 0;
  char b[64];
  ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* The request deadline and the idle time, each alone: the other is set far beyond anything the
 * test waits for, so that whichever closes the connection is the one tested, however slowly the
 * test itself runs. Times are taken before the connection is made: the server's clock for it
 * starts at its accept, later, so what the test measures is at least the server's limit. */
Test(http_slow, a_trickling_client_meets_the_request_deadline, .timeout = 300) {
  struct server_thread s;
  struct dnt_http_limits lim = {.request_ms = 1500, .idle_ms = 10 * DNT_HANG_MS};
  server_start_limited(&s, &lim);
  double t0 = dnt_now_ms(), closed_at = 0; /* timing: a lower bound (the deadline) */
  int fd = slow_client(s.port, "127.0.0.1");
  /* a byte every 100 ms, until the server closes the connection */
  for (double end = hang_deadline(); waiting(end);) {
    if (closed_within(fd, 100)) {
      closed_at = dnt_now_ms() - t0; /* timing: a lower bound (the deadline) */
      break;
    }
    send(fd, "X", 1, MSG_NOSIGNAL);
  }
  close(fd);
  server_stop(&s);
  cr_expect(closed_at > 0, "the trickling client is closed (still open after %d s)", DNT_HANG_MS / 1000);
  cr_expect_geq(closed_at, 1500 - 20, "closed after %.0f ms, not before its deadline (1500 ms; %s)", closed_at,
                dnt_run_context(0));
  cr_expect_eq(s.timed_out, 1, "closed by a deadline (%llu)", s.timed_out);
  cr_log_info("a trickling client closed %.0f ms after it connected (deadline 1500 ms)", closed_at);
}

Test(http_slow, a_silent_client_meets_the_idle_time, .timeout = 300) {
  struct server_thread s;
  struct dnt_http_limits lim = {.request_ms = 10 * DNT_HANG_MS, .idle_ms = 400};
  server_start_limited(&s, &lim);
  double t0 = dnt_now_ms(); /* timing: a lower bound (the idle time) */
  int fd = slow_client(s.port, "127.0.0.1");
  int closed = closed_within(fd, DNT_HANG_MS);
  double idle = dnt_now_ms() - t0; /* timing: a lower bound (the idle time) */
  close(fd);
  server_stop(&s);
  cr_expect(closed, "a silent client is closed");
  /* its deadline is 20 minutes away: a close within the hang ceiling is the idle time's */
  cr_expect_geq(idle, 400 - 20, "silent client closed after %.0f ms, not before the idle time (400 ms; %s)", idle,
                dnt_run_context(0));
  cr_expect_eq(s.timed_out, 1, "closed by a deadline (%llu)", s.timed_out);
  cr_log_info("a silent client closed %.0f ms after it connected (idle time 400 ms)", idle);
}

/* The caps alone: no deadline or idle time closes a connection while the test runs. */
Test(http_slow, caps_per_address_and_overall_close_the_oldest, .timeout = 300) {
  struct server_thread s;
  struct dnt_http_limits lim = {.max_clients = 5, .max_per_addr = 3, .request_ms = 10 * DNT_HANG_MS,
                                .idle_ms = 10 * DNT_HANG_MS};
  server_start_limited(&s, &lim);
  int a[5], b[3];
  for (int i = 0; i < 5; i++) {
    a[i] = slow_client(s.port, "127.0.0.1");
    usleep(20000); /* accepted in this order */
  }
  /* 127.0.0.1 may hold 3: its two oldest are closed for the newer ones */
  cr_expect(closed_within(a[0], DNT_HANG_MS), "a0 closed");
  cr_expect(closed_within(a[1], DNT_HANG_MS), "a1 closed");
  for (int i = 2; i < 5; i++) cr_expect(!closed_within(a[i], 200), "a%d still open", i);
  /* another address gets its own share, up to 5 connections in all: the oldest of all go */
  for (int i = 0; i < 3; i++) {
    b[i] = slow_client(s.port, "127.0.0.2");
    usleep(20000);
  }
  cr_expect(closed_within(a[2], DNT_HANG_MS), "a2 closed for the 6th connection");
  for (int i = 3; i < 5; i++) cr_expect(!closed_within(a[i], 200), "a%d still open", i);
  for (int i = 0; i < 3; i++) cr_expect(!closed_within(b[i], 200), "b%d still open", i);
  /* a scrape from a third address is answered: the oldest slow one (a3) makes room */
  int fd = slow_client(s.port, "127.0.0.3");
  cr_assert_eq(send(fd, "\r\n", 2, MSG_NOSIGNAL), 2);
  struct timeval tv = {.tv_sec = DNT_HANG_MS / 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char reply[512] = "";
  size_t have = 0;
  ssize_t n;
  while (have < sizeof reply - 1 && (n = read(fd, reply + have, sizeof reply - 1 - have)) > 0) have += (size_t)n;
  reply[have] = '\0';
  close(fd);
  cr_expect(strncmp(reply, "HTTP/1.1 200 OK\r\n", 17) == 0 && strstr(reply, "up 1\n"), "%s", reply);
  cr_expect(closed_within(a[3], DNT_HANG_MS), "a3 closed for the scrape");
  server_stop(&s);
  for (int i = 0; i < 5; i++) close(a[i]);
  for (int i = 0; i < 3; i++) close(b[i]);
  cr_expect_eq(s.evicted, 4);
}

/* ---- the real runtime ---- */

/* The sample under a name of its own (a symlink to its apphost): `-n` then finds this test's
 * process only, whatever else runs at the same time. */
static void start_named(dnt_target *t, const char *exe) {
  DNT_REQUIRE_TARGET();
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .exe = exe, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
}

/* GET url with curl (DNT_HANG_MS at most): the HTTP status (0 when no answer) and the body
 * (heap) in *body. */
static int http_get(const char *url, const char *dir, char **body) {
  char cmd[1024], path[300];
  snprintf(path, sizeof path, "%s/body", dir);
  snprintf(cmd, sizeof cmd, "curl -s -m %d -o '%s' -w '%%{http_code}' '%s'", DNT_HANG_MS / 1000, path, url);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  int code = 0;
  if (fscanf(p, "%d", &code) != 1) code = 0;
  pclose(p);
  *body = NULL;
  FILE *fp = fopen(path, "r");
  if (fp) {
    *body = calloc(1, 1 << 20);
    size_t n = fread(*body, 1, (1 << 20) - 1, fp);
    (*body)[n] = '\0';
    fclose(fp);
  }
  if (!*body) *body = calloc(1, 1);
  return code;
}

/* Polls url until it answers `status` with a body holding `want` (NULL: any), DNT_HANG_MS at
 * most: that status, else the last answer's (its body in *body either way). */
static int poll_until(const char *url, const char *dir, int status, const char *want, char **body) {
  for (double end = hang_deadline();; usleep(100 * 1000)) {
    int code = http_get(url, dir, body);
    if ((code == status && (!want || strstr(*body, want))) || !waiting(end)) return code;
    free(*body);
    *body = NULL;
  }
}

static pid_t spawn_dntrace(char *const args[], const char *log) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    FILE *fp = freopen(log, "w", stdout);
    (void)fp;
    dup2(1, 2);
    int devnull = open("/dev/null", O_RDONLY); /* no terminal to watch for keys */
    if (devnull >= 0) dup2(devnull, 0);
    execv(dnt_bin(), args);
    _exit(127);
  }
  return pid;
}

Test(counters_serve, scrapes_and_follows_a_restart, .timeout = 300) {
  char dir[] = "/tmp/dnt-serve-XXXXXX", exe[128], name[32], url[128], log[160], listen[64];
  cr_assert(mkdtemp(dir));
  snprintf(name, sizeof name, "dnts%d", (int)getpid() % 100000);
  snprintf(exe, sizeof exe, "%s/%s", dir, name);
  cr_assert_eq(symlink(dnt_target_exe(), exe), 0);
  dnt_target t;
  start_named(&t, exe);
  int port = dnt_free_port();
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *const args[] = {"dntrace", "counters", "serve", "-n", name, "--counters",
                        "Sample-Counters,Sample.Meter,System.Runtime", "--listen", listen, NULL};
  pid_t serve = spawn_dntrace(args, log);

  char *body = NULL, err[256];
  int code = poll_until(url, dir, 200, "sample_latency_seconds{", &body);
  cr_assert_eq(code, 200, "serve answers (HTTP %d): %s", code, body);
  cr_expect_eq(prom_check(body, NULL, err, sizeof err), 0, "%s\n%s", err, body);
  double v;
  cr_expect_eq(prom_value(body, "sample_latency_seconds{provider=\"Sample.Meter\",quantile=\"0.95\"}", &v), 0,
               "%s", body);
  cr_expect(v >= 0.005 && v <= 0.05, "p95 latency %g s is within the 5..50 ms the sample records", v);
  /* its _count and _sum, from the runtime's own count and sum (.NET 8+): the mean lies within the
   * same 5..50 ms (issue 28 item 8) */
  double count = 0, sum = 0;
  cr_expect_eq(prom_value(body, "sample_latency_seconds_count{provider=\"Sample.Meter\"}", &count), 0, "%s", body);
  cr_expect_eq(prom_value(body, "sample_latency_seconds_sum{provider=\"Sample.Meter\"}", &sum), 0, "%s", body);
  cr_expect(count > 0 && sum / count >= 0.005 && sum / count <= 0.05, "%g measurements, %g s in all", count, sum);
  free(body);
  /* each instrument reports on its own first interval: wait for the counter too */
  code = poll_until(url, dir, 200, "sample_requests_total{", &body);
  cr_expect(strstr(body, "sample_requests_total{provider=\"Sample.Meter\",route=\"/"), "%s", body);
  cr_expect(strstr(body, "# TYPE sample_requests_total counter"), "%s", body);
  cr_expect_eq(prom_check(body, NULL, err, sizeof err), 0, "%s\n%s", err, body);
  free(body);
  /* the EventCounter and the runtime's own Meter arrive on their own schedules */
  code = poll_until(url, dir, 200, "dotnet_process_cpu_time_seconds_total{", &body);
  cr_expect(strstr(body, "dotnet_process_cpu_time_seconds_total{provider=\"System.Runtime\",cpu_mode=\"user\"}"),
            "%s", body);
  free(body);
  /* the EventCounter's mean over an interval: at least 1 once the sample's metrics thread has
   * reported in it (0 for an interval in which a loaded machine did not run that thread) */
  v = 0;
  for (double end = hang_deadline(); !(v > 0) && waiting(end); usleep(100 * 1000)) {
    code = poll_until(url, dir, 200, "work_items{", &body); /* unit "items": already the last word */
    int found = prom_value(body, "work_items{provider=\"Sample-Counters\"}", &v);
    cr_assert_eq(found, 0, "%s", body);
    cr_expect_geq(v, 0, "work-items %g", v);
    free(body);
  }
  cr_expect_gt(v, 0, "work-items %g (%s)", v, dnt_run_context(t.pid));

  /* the target goes: 503 until the next process of that name, which serve then follows */
  dnt_target_stop(&t);
  code = poll_until(url, dir, 503, NULL, &body);
  cr_expect_eq(code, 503, "no target: 503 (got %d): %s", code, body);
  free(body);
  dnt_target t2;
  start_named(&t2, exe);
  code = poll_until(url, dir, 200, "sample_latency_seconds{", &body);
  cr_expect_eq(code, 200, "the restarted target is served (HTTP %d): %s", code, body);
  cr_expect_eq(prom_check(body, NULL, err, sizeof err), 0, "%s", err);
  free(body);

  kill(serve, SIGINT);
  int status;
  cr_assert_eq(waitpid(serve, &status, 0), serve);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "serve ends with 0 on Ctrl+C (status %d)", status);
  dnt_target_stop(&t2);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* What path holds (heap, NUL-terminated), or NULL when it is not there. */
static char *read_text(const char *path) {
  FILE *fp = fopen(path, "r");
  if (!fp) return NULL;
  char *text = calloc(1, 1 << 20);
  cr_assert(text);
  size_t n = fread(text, 1, (1 << 20) - 1, fp);
  text[n] = '\0';
  fclose(fp);
  return text;
}

static int stop_child(pid_t pid, int sig);

/* collect --format prometheus keeps one whole snapshot in its file, rewritten at each interval:
 * every read of it while collect runs is a valid exposition; the test waits for one holding the
 * sample's latency, then stops collect (Ctrl+C), whose last snapshot stays, alone in its folder. */
Test(counters_serve, collect_prometheus_file, .timeout = 300) {
  dnt_target t;
  start_named(&t, NULL);
  char dir[] = "/tmp/dnt-prom-XXXXXX", base[128], path[160], pid[16], log[160];
  cr_assert(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/snap", dir);
  snprintf(path, sizeof path, "%s.prom", base);
  snprintf(log, sizeof log, "%s.log", dir); /* beside the folder, which must hold the snapshot only */
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char *const args[] = {"dntrace", "counters", "collect", "-p", pid, "--counters", "Sample.Meter", "--format",
                        "prometheus", "-o", base, NULL};
  pid_t collect = spawn_dntrace(args, log);
  const char *latency = "sample_latency_seconds{provider=\"Sample.Meter\",quantile=\"0.5\"}";
  char *text = NULL, err[256] = "";
  int reads = 0, whole = 1;
  for (double end = hang_deadline(); waiting(end); usleep(50 * 1000)) {
    free(text);
    if (!(text = read_text(path))) continue;
    reads++;
    if (prom_check(text, NULL, err, sizeof err) != 0) {
      whole = 0;
      break;
    }
    if (strstr(text, latency)) break;
  }
  cr_expect(whole, "every snapshot read is whole and valid (read %d): %s\n%s", reads, err, text);
  cr_expect(text && strstr(text, latency), "a snapshot with the sample's latency (%s):\n%s", dnt_run_context(t.pid),
            text ? text : "(no file)");
  free(text);
  int status = stop_child(collect, SIGINT);
  char *said = read_text(log);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "collect ends with 0 on Ctrl+C (status %d):\n%s", status,
            said ? said : "");
  free(said);
  unlink(log);
  /* the last snapshot stays, whole, the latency in it */
  text = read_text(path);
  cr_assert(text, "%s written", path);
  cr_expect_eq(prom_check(text, NULL, err, sizeof err), 0, "%s\n%s", err, text);
  cr_expect(strstr(text, latency), "%s", text);
  cr_log_info("collect --format prometheus: the latency in snapshot read %d", reads);
  DIR *d = opendir(dir); /* the snapshot alone: no temporary left beside it, whatever its name */
  cr_assert(d);
  int others = 0;
  for (struct dirent *e; (e = readdir(d));)
    others += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strcmp(e->d_name, "snap.prom") != 0;
  closedir(d);
  cr_expect_eq(others, 0, "no temporary file left beside %s", path);
  free(text);
  unlink(path);
  rmdir(dir);
  dnt_target_stop(&t);
}

/* ---- Prometheus's own tools on a live `serve` (issue 18 items 9 and 10) ---- */

/* Skips when `tool` is not installed; under CI=true a failure: the bootstrap installs it. */
#define REQUIRE_TOOL(tool)                                                                         \
  do {                                                                                             \
    if (system("command -v " tool " >/dev/null 2>&1") != 0) {                                     \
      const char *ci_ = getenv("CI");                                                              \
      if (ci_ && strcmp(ci_, "true") == 0)                                                         \
        cr_assert_fail(tool " is not installed (CI=true: ./bootstrap.sh installs 'prometheus')");  \
      cr_skip_test(tool " is not installed (apt-get install prometheus)");                         \
    }                                                                                              \
  } while (0)

/* Like spawn_dntrace for any program on PATH; the child dies with this test's process, so a
 * failed assertion leaves no server behind. */
static pid_t spawn_logged(const char *prog, char *const args[], const char *log) {
  pid_t parent = getpid(), pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    FILE *fp = freopen(log, "w", stdout);
    (void)fp;
    dup2(1, 2);
    execvp(prog, args);
    _exit(127);
  }
  return pid;
}

/* Ends a child with sig and reaps it (SIGKILL when it hangs); its exit status. */
static int stop_child(pid_t pid, int sig) {
  int status = -1;
  kill(pid, sig);
  for (double end = hang_deadline(); waiting(end); usleep(100 * 1000))
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

static void rm_rf(const char *dir) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

/* Item 9: what serve answers for the runtime's Meter, the sample's Meter and its EventCounter
 * passes promtool's checks (its exit status was 3: gauges named *_count, milliseconds). */
Test(counters_serve, promtool_accepts_a_live_scrape, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  REQUIRE_TOOL("promtool");
  dnt_target t;
  start_named(&t, NULL);
  char dir[] = "/tmp/dnt-promtool-XXXXXX", pid[16], listen[64], url[128], log[160];
  cr_assert(mkdtemp(dir));
  int port = dnt_free_port();
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *const args[] = {"dntrace", "counters", "serve", "-p", pid, "--counters",
                        "Sample-Counters,Sample.Meter,System.Runtime", "--listen", listen, NULL};
  pid_t serve = spawn_dntrace(args, log);
  /* each instrument reports from its own first interval: wait until all kinds are in one scrape */
  static const char *const wanted[] = {"sample_latency_seconds{", "sample_requests_total{", "work_items{",
                                       "dotnet_assembly_count_current{", "dotnet_gc_collections_total{"};
  char *body = NULL;
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
    free(body);
    int code = poll_until(url, dir, 200, wanted[i], &body);
    cr_expect_eq(code, 200, "serve answers %s (HTTP %d): %s", wanted[i], code, body);
  }
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
    cr_expect(strstr(body, wanted[i]), "%s in the scrape:\n%s", wanted[i], body);
  char said[4096];
  int rc = promtool_check(body, dir, said, sizeof said);
  cr_expect_eq(rc, 0, "promtool check metrics exits %d:\n%s\non:\n%s", rc, said, body);
  /* the names the issue quotes are gone, the latency is in seconds */
  cr_expect(!strstr(body, "\ndotnet_assembly_count{") && !strstr(body, "\ndotnet_timer_count{") &&
                !strstr(body, "milliseconds"),
            "%s", body);
  double v;
  cr_expect_eq(prom_value(body, "sample_latency_seconds{provider=\"Sample.Meter\",quantile=\"0.5\"}", &v), 0);
  cr_expect(v >= 0.005 && v <= 0.05, "median latency %g s within the 5..50 ms the sample records", v);
  free(body);
  int status = stop_child(serve, SIGINT);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "serve ends with 0 on Ctrl+C (status %d)", status);
  dnt_target_stop(&t);
  rm_rf(dir);
}

/* An instant query through Prometheus's HTTP API: 0 and the value of its first series, -1 when
 * the result is empty (or no answer). */
static int prom_query(int port, const char *query, double *v) {
  char cmd[1024], out[8192];
  snprintf(cmd, sizeof cmd, "curl -s -m %d -G 'http://127.0.0.1:%d/api/v1/query' --data-urlencode 'query=%s'",
           DNT_HANG_MS / 1000, port, query);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  pclose(p);
  /* {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},"value":[T,"V"]}]}} */
  const char *at = strstr(out, "\"value\":[");
  if (!strstr(out, "\"status\":\"success\"") || !at) return -1;
  at = strchr(at, ',');
  if (!at || at[1] != '"') return -1;
  char *end;
  *v = strtod(at + 2, &end);
  return end == at + 2 ? -1 : 0;
}

/* The sample's "gen2 N" lines so far (GC.CollectionCount(2) read inside the process): each count
 * seen is marked in seen[] (counts up to max). */
struct gen2_seen {
  unsigned char *seen;
  size_t max;
};

static void on_gen2_line(void *ud, const char *line) {
  struct gen2_seen *g = ud;
  unsigned long c;
  if (sscanf(line, "gen2 %lu", &c) == 1 && c < g->max) g->seen[c] = 1;
}

static void read_gen2_lines(int fd, unsigned char *seen, size_t max, char *carry, size_t carry_cap) {
  struct gen2_seen g = {seen, max};
  dnt_target_read_lines(fd, carry, carry_cap, on_gen2_line, &g);
}

/* Item 10: a real Prometheus server scrapes serve every second; what its query API returns for
 * the gen2 collections is the runtime's own count (GC.CollectionCount(2), printed by the sample),
 * not the gen2 collections seen since dntrace started (none: the sample forces 40 before serve
 * starts, and allocates nothing afterwards). */
Test(counters_serve, prometheus_scrapes_the_runtimes_own_gen2_count, .timeout = 400) {
  DNT_REQUIRE_TARGET();
  REQUIRE_TOOL("prometheus");
  REQUIRE_TOOL("promtool");
  const char *const sample_args[] = {"--gen2", "40", "--no-alloc", NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = sample_args, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  dnt_target t;
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  unsigned char seen[100000] = {0};
  char carry[8192] = "";

  char dir[] = "/tmp/dnt-prometheus-XXXXXX", pid[16], listen[64], url[128], log[160], conf[200], data[200],
       plog[200], web[64];
  cr_assert(mkdtemp(dir));
  int port = dnt_free_port(), prom_port = dnt_free_port();
  cr_assert_neq(port, prom_port);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *const args[] = {"dntrace", "counters", "serve", "-p", pid, "--counters", "System.Runtime",
                        "--listen", listen, NULL};
  pid_t serve = spawn_dntrace(args, log);
  const char *gen2 = "dotnet_gc_collections_total{provider=\"System.Runtime\",gc_heap_generation=\"gen2\"}";
  char *body = NULL;
  int code = poll_until(url, dir, 200, gen2, &body);
  cr_expect_eq(code, 200, "serve answers the gen2 count (HTTP %d): %s", code, body);
  char said[4096];
  int rc = promtool_check(body, dir, said, sizeof said);
  cr_expect_eq(rc, 0, "promtool check metrics exits %d:\n%s\non:\n%s", rc, said, body);
  free(body);

  /* Prometheus on loopback, one static target: serve */
  snprintf(conf, sizeof conf, "%s/prometheus.yml", dir);
  snprintf(data, sizeof data, "--storage.tsdb.path=%s/data", dir);
  snprintf(plog, sizeof plog, "%s/prometheus.log", dir);
  snprintf(web, sizeof web, "--web.listen-address=127.0.0.1:%d", prom_port);
  FILE *fp = fopen(conf, "w");
  cr_assert(fp);
  fprintf(fp,
          "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
          "scrape_configs:\n  - job_name: dntrace\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
          port);
  fclose(fp);
  char config_flag[240];
  snprintf(config_flag, sizeof config_flag, "--config.file=%s", conf);
  char *const pargs[] = {"prometheus", config_flag, data, web, NULL};
  pid_t prom = spawn_logged("prometheus", pargs, plog);

  /* a few scrapes stored: at least 3 samples of the series within the last minute */
  char query[256];
  snprintf(query, sizeof query, "count_over_time(dotnet_gc_collections_total{gc_heap_generation=\"gen2\"}[1m])");
  double scrapes = 0;
  for (double end = hang_deadline(); !(prom_query(prom_port, query, &scrapes) == 0 && scrapes >= 3) && waiting(end);) {
    read_gen2_lines(t.stdout_fd, seen, sizeof seen, carry, sizeof carry);
    usleep(100 * 1000);
  }
  cr_expect_geq(scrapes, 3, "Prometheus stored %g scrapes of the gen2 series (log: %s)", scrapes, plog);
  double value = -1;
  int qrc = prom_query(prom_port, "dotnet_gc_collections_total{gc_heap_generation=\"gen2\"}", &value);
  read_gen2_lines(t.stdout_fd, seen, sizeof seen, carry, sizeof carry);
  cr_expect_eq(qrc, 0, "the query answers a value");
  size_t counts = 0, lowest = sizeof seen;
  for (size_t c = 0; c < sizeof seen; c++)
    if (seen[c]) counts++, lowest = c < lowest ? c : lowest;
  cr_expect_gt(counts, 0, "the sample printed its gen2 count");
  cr_expect_geq(lowest, 40, "the 40 forced gen2 collections are in the runtime's count (%zu)", lowest);
  cr_expect(value >= 0 && value < (double)sizeof seen && value == (double)(size_t)value && seen[(size_t)value],
            "Prometheus returns %g gen2 collections; the runtime counted %zu (and %zu other values meanwhile)", value,
            lowest, counts - 1);

  int pstatus = stop_child(prom, SIGTERM);
  cr_expect(WIFEXITED(pstatus) && WEXITSTATUS(pstatus) == 0, "prometheus stops cleanly (status %d)", pstatus);
  int status = stop_child(serve, SIGINT);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "serve ends with 0 on Ctrl+C (status %d)", status);
  dnt_target_stop(&t);
  rm_rf(dir);
}
