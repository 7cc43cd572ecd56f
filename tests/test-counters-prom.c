/* The Prometheus side of `counters`: the strict checker itself, the text writer on hand-built
 * tables and on the counter traces of the corpus, the HTTP server driven by curl and by raw
 * sockets, and `counters serve` / `collect --format prometheus` against the real sample. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "counters-prom.h"
#include "counters-table.h"
#include "http-serve.h"
#include "lib/prom-check.h"
#include "lib/run.h"
#include "lib/target-cr.h"
#include "lib/target.h"

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
  put(&t, "Sample.Meter", "sample.latency", "ms", "route=/a,Percentile=95", DNT_COUNTER_HISTOGRAM, 20);
  put(&t, "Sample.Meter", "odd", "", "q=a\"b\\c\nd,__k=1,9x=2", DNT_COUNTER_MEAN, NAN);
  put(&t, "Sample.Meter", "9lives", "s", "", DNT_COUNTER_MEAN, 1e300);
  put(&t, "Sample.Meter", "pause.time.seconds", "s", "", DNT_COUNTER_MEAN, 0.25);
  put(&t, "Sample.Meter", "weird unit", "kB/s", "", DNT_COUNTER_MEAN, 2);
  long samples;
  char *text = render(&t, &samples);
  char err[256];
  size_t checked;
  cr_assert_eq(prom_check(text, &checked, err, sizeof err), 0, "%s\n%s", err, text);
  cr_expect_eq((size_t)samples, checked);
  expect_value(text, "dotnet_gc_heap_total_allocated_bytes_total{provider=\"System.Runtime\"}", 150);
  expect_value(text, "cpu_usage_percent{provider=\"System.Runtime\"}", 3.5);
  expect_value(text, "sample_requests_total{provider=\"Sample.Meter\",route=\"/a\"}", 4);
  expect_value(text, "sample_latency_milliseconds{provider=\"Sample.Meter\",route=\"/a\",quantile=\"0.5\"}", 10);
  expect_value(text, "sample_latency_milliseconds{provider=\"Sample.Meter\",route=\"/a\",quantile=\"0.95\"}", 20);
  expect_value(text, "odd{provider=\"Sample.Meter\",q=\"a\\\"b\\\\c\\nd\",x_k=\"1\",x9x=\"2\"}", NAN);
  expect_value(text, "_9lives_seconds{provider=\"Sample.Meter\"}", 1e300);
  expect_value(text, "pause_time_seconds{provider=\"Sample.Meter\"}", 0.25);
  expect_value(text, "weird_unit_kB_s{provider=\"Sample.Meter\"}", 2);
  cr_expect(strstr(text, "# TYPE sample_latency_milliseconds summary\n"), "%s", text);
  cr_expect(strstr(text, "# TYPE sample_requests_total counter\n"), "%s", text);
  cr_expect(strstr(text, "# TYPE cpu_usage_percent gauge\n"), "%s", text);
  free(text);
  dnt_counter_table_release(&t);
}

Test(prom_writer, one_type_per_family_and_no_duplicates) {
  struct dnt_counter_table t = {0};
  /* one family name from two providers, a level in one, an amount (+ _total) in the other */
  put(&t, "A", "hits.total", "", "", DNT_COUNTER_MEAN, 1);
  put(&t, "B", "hits", "", "", DNT_COUNTER_SUM, 2);
  /* two names that sanitise alike, same labels: one series survives */
  put(&t, "A", "x.y", "", "", DNT_COUNTER_MEAN, 3);
  put(&t, "A", "x-y", "", "", DNT_COUNTER_MEAN, 4);
  long samples;
  char *text = render(&t, &samples);
  char err[256];
  cr_assert_eq(prom_check(text, NULL, err, sizeof err), 0, "%s\n%s", err, text);
  /* the types in order counter, gauge, summary: the first keeps the name */
  expect_value(text, "hits_total{provider=\"B\"}", 2);
  expect_value(text, "A_hits_total{provider=\"A\"}", 1);
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

struct server_thread {
  pthread_t thread;
  uv_loop_t loop;
  uv_async_t stop;
  dnt_http_server *server;
  int port;
  pthread_mutex_t lock;
  pthread_cond_t ready;
  int started;
};

static void answer(void *ud, const char *path, struct dnt_http_reply *r) {
  (void)ud;
  if (strcmp(path, "/metrics") == 0) {
    r->status = 200;
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
    r->body = strdup("# TYPE up gauge\nup 1\n");
    r->body_len = strlen(r->body);
  } else {
    r->status = 404;
  }
}

static void on_stop(uv_async_t *a) {
  struct server_thread *s = a->data;
  dnt_http_server_close(s->server);
  uv_close((uv_handle_t *)a, NULL);
}

static void *serve(void *ud) {
  struct server_thread *s = ud;
  char err[256];
  uv_loop_init(&s->loop);
  uv_async_init(&s->loop, &s->stop, on_stop);
  s->stop.data = s;
  int rc = dnt_http_server_start(&s->loop, "127.0.0.1:0", answer, s, &s->server, err, sizeof err);
  pthread_mutex_lock(&s->lock);
  s->port = rc ? -1 : dnt_http_server_port(s->server);
  s->started = 1;
  pthread_cond_signal(&s->ready);
  pthread_mutex_unlock(&s->lock);
  if (!rc) uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  return NULL;
}

static void server_start(struct server_thread *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->ready, NULL);
  cr_assert_eq(pthread_create(&s->thread, NULL, serve, s), 0);
  pthread_mutex_lock(&s->lock);
  while (!s->started) pthread_cond_wait(&s->ready, &s->lock);
  pthread_mutex_unlock(&s->lock);
  cr_assert_gt(s->port, 0);
}

static void server_stop(struct server_thread *s) {
  uv_async_send(&s->stop);
  pthread_join(s->thread, NULL);
}

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
  cr_expect_neq(dnt_http_server_start(&loop, "nonsense", answer, NULL, &srv, err, sizeof err), 0);
  cr_expect_neq(dnt_http_server_start(&loop, "127.0.0.1:99999", answer, NULL, &srv, err, sizeof err), 0);
  cr_expect_neq(dnt_http_server_start(&loop, "example.com:80", answer, NULL, &srv, err, sizeof err), 0);
  cr_expect(strstr(err, "numeric"), "%s", err);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
}

/* ---- the real runtime ---- */

/* The sample under a name of its own (a symlink to its apphost): `-n` then finds this test's
 * process only, whatever else runs at the same time. */
static void start_named(dnt_target *t, const char *exe) {
  DNT_REQUIRE_TARGET();
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .exe = exe, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &len);
  close(fd);
  return ntohs(a.sin_port);
}

/* GET url with curl: the HTTP status (0 when no answer) and the body (heap) in *body. */
static int http_get(const char *url, const char *dir, char **body) {
  char cmd[1024], path[300];
  snprintf(path, sizeof path, "%s/body", dir);
  snprintf(cmd, sizeof cmd, "curl -s -m 5 -o '%s' -w '%%{http_code}' '%s'", path, url);
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

/* Polls url until it answers `status` with a body holding `want` (NULL: any); 20 s at most. */
static int poll_until(const char *url, const char *dir, int status, const char *want, char **body) {
  for (int i = 0; i < 200; i++) {
    int code = http_get(url, dir, body);
    if (code == status && (!want || strstr(*body, want))) return code;
    free(*body);
    *body = NULL;
    usleep(100 * 1000);
  }
  return http_get(url, dir, body);
}

static pid_t spawn_dntrace(char *const args[], const char *log) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    FILE *fp = freopen(log, "w", stdout);
    (void)fp;
    dup2(1, 2);
    execv(dnt_bin(), args);
    _exit(127);
  }
  return pid;
}

Test(counters_serve, scrapes_and_follows_a_restart, .timeout = 150) {
  char dir[] = "/tmp/dnt-serve-XXXXXX", exe[128], name[32], url[128], log[160], listen[64];
  cr_assert(mkdtemp(dir));
  snprintf(name, sizeof name, "dnts%d", (int)getpid() % 100000);
  snprintf(exe, sizeof exe, "%s/%s", dir, name);
  cr_assert_eq(symlink(dnt_target_exe(), exe), 0);
  dnt_target t;
  start_named(&t, exe);
  int port = free_port();
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *const args[] = {"dntrace", "counters", "serve", "-n", name, "--counters",
                        "Sample-Counters,Sample.Meter,System.Runtime", "--listen", listen, NULL};
  pid_t serve = spawn_dntrace(args, log);

  char *body = NULL, err[256];
  int code = poll_until(url, dir, 200, "sample_latency_milliseconds{", &body);
  cr_assert_eq(code, 200, "serve answers (HTTP %d): %s", code, body);
  cr_expect_eq(prom_check(body, NULL, err, sizeof err), 0, "%s\n%s", err, body);
  double v;
  cr_expect_eq(prom_value(body, "sample_latency_milliseconds{provider=\"Sample.Meter\",quantile=\"0.95\"}", &v), 0,
               "%s", body);
  cr_expect(v >= 5 && v <= 50, "p95 latency %g ms is within the 5..50 the sample records", v);
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
  code = poll_until(url, dir, 200, "work_items{", &body); /* unit "items": already the last word */
  cr_expect_eq(prom_value(body, "work_items{provider=\"Sample-Counters\"}", &v), 0, "%s", body);
  cr_expect_gt(v, 0, "work-items %g", v);
  free(body);

  /* the target goes: 503 until the next process of that name, which serve then follows */
  dnt_target_stop(&t);
  code = poll_until(url, dir, 503, NULL, &body);
  cr_expect_eq(code, 503, "no target: 503 (got %d): %s", code, body);
  free(body);
  dnt_target t2;
  start_named(&t2, exe);
  code = poll_until(url, dir, 200, "sample_latency_milliseconds{", &body);
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

Test(counters_serve, collect_prometheus_file, .timeout = 90) {
  dnt_target t;
  start_named(&t, NULL);
  char dir[] = "/tmp/dnt-prom-XXXXXX", base[128], path[160], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/snap", dir);
  snprintf(path, sizeof path, "%s.prom", base);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "-p", pid, "--counters", "Sample.Meter", "--format",
                           "prometheus", "-o", base, "--duration", "3s", NULL);
  cr_assert_eq(rc, 0, "%s%s", r.out, r.err);
  dnt_run_free(&r);
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "%s written", path);
  char *text = calloc(1, 1 << 20);
  size_t n = fread(text, 1, (1 << 20) - 1, fp);
  text[n] = '\0';
  fclose(fp);
  char err[256];
  cr_expect_eq(prom_check(text, NULL, err, sizeof err), 0, "%s\n%s", err, text);
  cr_expect(strstr(text, "sample_latency_milliseconds{provider=\"Sample.Meter\",quantile=\"0.5\"}"), "%s", text);
  char tmp[200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  cr_expect_neq(access(tmp, F_OK), 0, "no temporary file left");
  free(text);
  unlink(path);
  rmdir(dir);
  dnt_target_stop(&t);
}
