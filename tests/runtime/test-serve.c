/* `dntrace serve` (issue 14): the agent's endpoints read by their real consumers (`go tool
 * pprof` over HTTP, promtool and the strict checker on /metrics), against the real sample:
 * - /debug/pprof/profile?seconds=3 names Sample.CpuWork.CountPrimes (the sample's CPU-bound
 *   thread, by construction); while a profile request runs, /metrics is answered (a scrape begun
 *   after the request is answered before it) and a second profile request for the same pid gets
 *   429; a client that leaves frees its slot. How long scrapes take is printed, not asserted
 *   (tests/bench-serve.sh measures it);
 * - /debug/pprof/threads lists the `cpu-work` thread with its loop (CountPrimes above it, or not: one sample) (pprof and
 *   ?debug=1 text); /debug/pprof/allocs has alloc_space samples in AllocWork.Allocate, each
 *   standing for at least the runtime's 100 KiB allocation tick;
 * - every profile and series carries the pid, process and --label labels;
 * - `serve --all` with two samples, one restarted: both labelled on /metrics, the restarted one
 *   followed under its new pid, promtool's check passing;
 * - `serve --cpu`: /debug/pprof/profile is perf's on-CPU time (cpu/nanoseconds, the period set,
 *   the sample's spinning thread holding what its own CPU time over the request says it must, a
 *   total under 3 s per CPU), CountPrimes on top, scrapes answered meanwhile, 429 for a second
 *   request, nothing left behind (perf's directories, the perf map) when a client leaves, once
 *   answered, and on Ctrl+C mid-recording; without perf, one line and exit 2;
 * - the query-string parser on cases written from RFC 3986 and HTML's form encoding.
 * Every wait is for the thing itself, with DNT_HANG_MS (tests/lib/run.h) as its ceiling. */
#include <arpa/inet.h>
#include <errno.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dnt-counters.h"
#include "dnt-http.h"
#include "../lib/env-cr.h"
#include "../lib/loopback.h"
#include "../lib/pod-cr.h"
#include "../lib/prom-check.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

#define SCRAPE_EVERY_MS 10

static void require_tool(const char *tool, const char *package) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
  if (system(cmd) == 0) return;
  if (in_ci()) cr_assert_fail("'%s' is not installed (CI=true: ./bootstrap.sh installs %s)", tool, package);
  cr_skip_test("needs %s (apt-get install %s)", tool, package);
}

/* The ceiling of a wait, DNT_HANG_MS from now: only a hang reaches it. */
static double hang_deadline(void) { return dnt_now_ms() + DNT_HANG_MS; } /* timing: a hang's ceiling */

/* 1 while a wait may go on: its ceiling (hang_deadline) is not reached. */
static int waiting(double end) { return dnt_now_ms() < end; } /* timing: a hang's ceiling */

/* One request on 127.0.0.1:port (DNT_HANG_MS for an answer), the whole answer read: its status
 * (0: no answer); the answer (heap, NUL-terminated, headers included) in *body when body is not
 * NULL. */
static int request(int port, const char *method, const char *path, char **body) {
  return dnt_http_request(port, method, path, DNT_HANG_MS / 1000, body);
}

static int get(int port, const char *path, char **body) { return request(port, "GET", path, body); }

/* The body of an answer (past its empty line). */
static const char *body_of(const char *answer) {
  const char *p = answer ? strstr(answer, "\r\n\r\n") : NULL;
  return p ? p + 4 : "";
}

/* Polls path until the answer has status and its body holds want (NULL: anything): 1, or 0 when
 * that hangs. */
static int wait_for(int port, const char *path, int status, const char *want) {
  for (double end = hang_deadline(); waiting(end); usleep(100 * 1000)) {
    char *ans;
    int code = get(port, path, &ans);
    int hit = code == status && (!want || strstr(body_of(ans), want));
    free(ans);
    if (hit) return 1;
  }
  return 0;
}

/* GET path on a connection of its own, sent now, its answer left to come (answer_begun): the
 * connection, which the caller closes. */
static int send_get(int port, const char *path) {
  int fd = dnt_connect_loopback(port);
  cr_assert_geq(fd, 0, "cannot connect to serve on port %d", port);
  char req[512];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
  cr_assert_eq(write(fd, req, (size_t)n), n);
  return fd;
}

/* 1 when something of the answer on fd (or its end) is there to read now. */
static int answer_begun(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return poll(&p, 1, 0) > 0;
}

/* The scraper's count of answered scrapes, read while its thread runs. */
static int scrapes_answered(struct dnt_scraper *sc) { return __atomic_load_n(&sc->answered, __ATOMIC_SEQ_CST); }

/* Waits until the scraper has answered a scrape it began after this call (the one on its way now
 * may have begun before it: two more answers): 1, or 0 when that hangs. */
static int scrape_answered_from_now(struct dnt_scraper *sc) {
  int from = scrapes_answered(sc);
  for (double end = hang_deadline(); waiting(end); usleep(2000))
    if (scrapes_answered(sc) >= from + 2) return 1;
  return 0;
}

/* `dntrace ARGS...` in the background, its output in log; it dies with the test. */
static pid_t spawn_dntrace(const char *log, char *const argv[]) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (!freopen(log, "w", stdout)) _exit(127);
    dup2(1, 2);
    execv(dnt_bin(), argv);
    _exit(127);
  }
  return pid;
}

/* SIGINT, then its exit status (128 + signal when killed); -1 (and SIGKILL) when it hangs. */
static int stop_serve(pid_t pid) {
  kill(pid, SIGINT);
  int status;
  for (double end = hang_deadline(); waiting(end); usleep(50 * 1000))
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

/* `go tool pprof ARGS... SOURCE` with HOME, GOCACHE and PPROF_TMPDIR in dir; its stdout (caller
 * frees). It must succeed. Over HTTP its own ceiling is DNT_HANG_MS too (pprof waits 1.5 times
 * the profile's seconds, plus 5 s, by default: a loaded machine makes serve --cpu take longer). */
static char *go_pprof(const char *dir, const char *a1, const char *a2, const char *source) {
  char home[300], cache[300], tmp[300], timeout[32];
  snprintf(home, sizeof home, "HOME=%s", dir);
  snprintf(cache, sizeof cache, "GOCACHE=%s/gocache", dir);
  snprintf(tmp, sizeof tmp, "PPROF_TMPDIR=%s", dir);
  snprintf(timeout, sizeof timeout, "-timeout=%d", DNT_HANG_MS / 1000);
  const char *env[] = {home, cache, tmp, NULL};
  char *argv[10] = {"/usr/bin/env", "go", "tool", "pprof"};
  int n = 4;
  if (strncmp(source, "http://", 7) == 0) argv[n++] = timeout;
  if (a1) argv[n++] = (char *)a1;
  if (a2) argv[n++] = (char *)a2;
  argv[n++] = (char *)source;
  argv[n] = NULL;
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, env, DNT_HANG_MS);
  cr_assert_eq(rc, 0, "go tool pprof %s %s: exit %d: %s", a1 ? a1 : "", source, rc, r.err);
  char *out = r.out;
  r.out = NULL;
  dnt_run_free(&r);
  return out;
}

static void rm_rf(const char *dir) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* The first line of `pprof -traces` text that shows label key with value ("   env:  test"), or
 * NULL. */
static const char *trace_label(const char *traces, const char *key, const char *value) {
  for (const char *p = traces; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    char k[64], v[128];
    if (sscanf(p, " %63[^: \n]: %127[^\n]", k, v) == 2 && strcmp(k, key) == 0 && strcmp(v, value) == 0) return p;
  }
  return NULL;
}

/* `dntrace serve -p PID --label env=test` on a free port (*port), its log in dir, once it answers
 * /metrics with the target's pid. */
static pid_t serve_one(const char *dir, const char *pid, int *port) {
  *port = dnt_free_port();
  char listen[64], log[300], pidlabel[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", *port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *argv[] = {"dntrace", "serve", "-p", (char *)pid, "--label", "env=test", "--listen", listen, NULL};
  pid_t serve = spawn_dntrace(log, argv);
  snprintf(pidlabel, sizeof pidlabel, "pid=\"%s\"", pid);
  cr_assert(wait_for(*port, "/metrics", 200, pidlabel), "serve answers /metrics with the sample's pid");
  return serve;
}

/* ---- one sample, every endpoint ---- */

Test(serve, profiles_threads_and_allocs_of_the_sample_while_metrics_are_answered, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  require_tool("go", "golang-go");
  char dir[] = "/tmp/dnt-serve-XXXXXX";
  cr_assert(mkdtemp(dir));
  dnt_target t;
  char pid[16];
  dnt_start_sample(&t, NULL, pid, sizeof pid);
  /* the sample's CPU hog yields to serve and to the tests beside this one (its thread time,
   * CountPrimes, is the same) */
  unsigned long hog = 0;
  for (double end = hang_deadline(); !(hog = dnt_target_thread_named(t.pid, "cpu-work")) && waiting(end);)
    usleep(50 * 1000);
  cr_assert(hog, "the sample has a cpu-work thread");
  cr_assert_eq(setpriority(PRIO_PROCESS, (id_t)hog, 19), 0, "%s", strerror(errno));
  int port;
  char url[256], path[128];
  pid_t serve = serve_one(dir, pid, &port);

  /* scrapes without a profile, a figure to print beside the ones during profiles (bench) */
  struct dnt_scraper base = {.port = port, .every_ms = SCRAPE_EVERY_MS, .phase = "no profile"};
  pthread_t scr;
  cr_assert_eq(pthread_create(&scr, NULL, dnt_scrape_loop, &base), 0);
  for (int i = 0; i < 20; i++) scrape_answered_from_now(&base);
  base.stop = 1;
  pthread_join(scr, NULL);

  /* a profile request that stays (300 s): while it runs, a scrape begun after it is answered,
   * and a second profile request for the same pid gets 429 */
  struct dnt_scraper sc = {.port = port, .every_ms = SCRAPE_EVERY_MS, .phase = "a 300 s profile request running"};
  cr_assert_eq(pthread_create(&scr, NULL, dnt_scrape_loop, &sc), 0);
  snprintf(path, sizeof path, "/debug/pprof/profile?seconds=300&pid=%s", pid);
  int stay = send_get(port, path);
  int scraped = scrape_answered_from_now(&sc);
  char again[128];
  snprintf(again, sizeof again, "/debug/pprof/profile?seconds=1&pid=%s", pid);
  int second = get(port, again, NULL);
  int scraped_after = scrape_answered_from_now(&sc);
  int running = !answer_begun(stay);
  cr_expect(scraped && scraped_after, "scrapes begun after the profile request are answered (%d of %d answered)",
            sc.answered, sc.scrapes);
  cr_expect_eq(second, 429, "a second profile request for pid %s while one runs gets 429 (got %d)", pid, second);
  cr_expect(running, "the 300 s profile request is still running, unanswered, after those scrapes and the 429");

  /* its client leaves before its profile is made: the slot is free again, the next request runs */
  sc.phase = "a profile request after one whose client left";
  close(stay);
  int next = 0;
  for (double end = hang_deadline(); (next = get(port, again, NULL)) == 429 && waiting(end);)
    usleep(100 * 1000);
  cr_expect_eq(next, 200, "after the client left, a profile request runs (got %d)", next);

  /* the profile, through go tool pprof (its answer frees the slot before it is sent) */
  sc.phase = "go tool pprof's 3 s profile";
  snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/profile?seconds=3", port);
  char *top = go_pprof(dir, "-top", NULL, url);
  sc.stop = 1;
  pthread_join(scr, NULL);
  cr_expect(strstr(top, "Sample.CpuWork.CountPrimes"), "the profile names the sample's hot method:\n%s", top);
  cr_expect(strstr(top, "Type: wall"), "a thread-time profile:\n%s", top);
  cr_expect_eq(sc.unanswered, 0, "%d of %d scrapes got no answer", sc.unanswered, sc.scrapes);
  cr_expect_eq(sc.ok, sc.scrapes, "every scrape answered 200 (%d of %d)", sc.ok, sc.scrapes);
  /* figures for tests/bench-serve.sh, not a verdict: a loaded machine makes any scrape slow */
  cr_log_info("serve: %d scrapes every %d ms without a profile: slowest %.1f ms; %d during profiles: slowest "
              "%.1f ms (%s); %s",
              base.scrapes, SCRAPE_EVERY_MS, base.max_ms, /* timing: figures, printed */
              sc.scrapes, sc.max_ms, sc.slowest_in ? sc.slowest_in : "-", /* timing: figures, printed */
              dnt_run_context(serve));
  free(top);

  /* threads: the cpu-work thread's stack has its loop; every sample is labelled */
  snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/threads", port);
  char *traces = go_pprof(dir, "-traces", NULL, url);
  const char *cpu = trace_label(traces, "thread_name", "cpu-work");
  cr_expect(cpu, "a thread named cpu-work:\n%s", traces);
  if (cpu) {
    const char *end = strstr(cpu, "-----------");
    const char *hot = strstr(cpu, "Sample.CpuWork.Run"); /* under CountPrimes, or its leaf between calls */
    cr_expect(hot && (!end || hot < end), "cpu-work's stack has its loop, CpuWork.Run:\n%s", traces);
  }
  cr_expect(strstr(traces, "Type: threads"), "%s", traces);
  cr_expect(trace_label(traces, "pid", pid), "samples labelled pid %s:\n%s", pid, traces);
  cr_expect(trace_label(traces, "env", "test"), "samples labelled env test:\n%s", traces);
  cr_expect(trace_label(traces, "process", "Sample"), "samples labelled process Sample:\n%s", traces);
  free(traces);
  char *text;
  snprintf(path, sizeof path, "/debug/pprof/threads?pid=%s&debug=1", pid);
  cr_expect_eq(get(port, path, &text), 200);
  /* one sample of cpu-work: inside CountPrimes, or (a moment between two calls) in its loop */
  const char *line = strstr(body_of(text), " cpu-work:\n");
  const char *leaf = line ? strchr(line, '\n') + 1 : NULL;
  cr_expect(leaf && (strncmp(leaf, "  Sample!Sample.CpuWork.CountPrimes\n", 36) == 0 ||
                     strncmp(leaf, "  Sample!Sample.CpuWork.Run\n", 28) == 0),
            "debug=1: cpu-work's leaf frame is CountPrimes or its loop, CpuWork.Run:\n%s", body_of(text));
  free(text);

  /* allocs: alloc_space samples where the sample allocates, each at least one 100 KiB tick */
  snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/allocs?seconds=2&pid=%s", port, pid);
  char *raw = go_pprof(dir, "-raw", NULL, url);
  cr_expect(strstr(raw, "alloc_objects/count alloc_space/bytes"), "the allocs sample types:\n%.2000s", raw);
  unsigned long long objects = 0, bytes = 0, o1, b1;
  for (const char *p = strstr(raw, "Samples:"); p && (p = strchr(p, '\n'));) {
    p++;
    if (sscanf(p, " %llu %llu:", &o1, &b1) == 2) objects += o1, bytes += b1;
    if (strncmp(p, "Locations", 9) == 0) break;
  }
  /* the sample's alloc-work thread allocates about 200 KB, then sleeps 5 ms, in a loop: two turns
   * in the 2 s make a tick however little CPU it gets */
  cr_expect_gt(objects, 0, "allocation ticks in 2 s of the sample (%s):\n%.2000s", dnt_run_context(t.pid), raw);
  /* the runtime fires GCAllocationTick once a thread has allocated 100 KiB since its last one */
  cr_expect_geq(bytes, objects * 100 * 1024, "%llu bytes in %llu ticks", bytes, objects);
  free(raw);
  char *allocs_top = go_pprof(dir, "-sample_index=alloc_space", "-top", url);
  cr_expect(strstr(allocs_top, "Sample.AllocWork.Allocate"), "the allocating method:\n%s", allocs_top);
  free(allocs_top);

  /* the index, errors */
  char *index;
  cr_expect_eq(get(port, "/debug/pprof/", &index), 200);
  cr_expect(strstr(body_of(index), pid), "the index lists the target:\n%s", body_of(index));
  free(index);
  cr_expect_eq(get(port, "/debug/pprof/nothing", NULL), 404);
  cr_expect_eq(request(port, "POST", "/debug/pprof/profile", NULL), 405);
  cr_expect_eq(get(port, "/debug/pprof/profile?seconds=301", NULL), 400);
  cr_expect_eq(get(port, "/debug/pprof/profile?seconds=x", NULL), 400);
  cr_expect_eq(get(port, "/debug/pprof/profile?seconds=1&pid=1", NULL), 404);

  cr_expect_eq(stop_serve(serve), 0, "serve ends with 0 on Ctrl+C");
  dnt_target_stop(&t);
  rm_rf(dir);
}

/* ---- a heap snapshot ----
 * /debug/pprof/heap of the sample's --heap 3000:500: a heap profile go tool pprof reads, each
 * object under its dominators' types, labelled as every profile; the 3,000 cache entries exact;
 * /metrics answered after it. */
Test(serve, heap_is_a_pprof_heap_profile_of_the_walk, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  require_tool("go", "golang-go");
  char dir[] = "/tmp/dnt-serve-XXXXXX";
  cr_assert(mkdtemp(dir));
  dnt_target t;
  char pid[16];
  const char *const args[] = {"--heap", "3000:500", "--no-cpu", "--no-blocking", "--no-alloc", "--no-exceptions", NULL};
  dnt_start_sample(&t, args, pid, sizeof pid);
  int port;
  char url[256], pidlabel[64];
  pid_t serve = serve_one(dir, pid, &port);
  snprintf(pidlabel, sizeof pidlabel, "pid=\"%s\"", pid);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/heap?pid=%s", port, pid);
  char *top = go_pprof(dir, "-top", "-sample_index=inuse_objects", url);
  cr_expect(strstr(top, "Type: inuse_objects"), "%s", top);
  /* CacheEntry's own 3,000 (flat), and under them their arrays (cum) but the first one's, which a
   * pinning handle holds too */
  const char *row = strstr(top, "  Sample.CacheEntry\n");
  const char *line = row;
  while (line && line > top && line[-1] != '\n') line--;
  unsigned long flat = 0, cum = 0;
  cr_expect(line && sscanf(line, " %lu %*s %*s %lu", &flat, &cum) == 2 && flat == 3000 && cum == 5999,
            "Sample.CacheEntry: 3000 objects, and their arrays under them:\n%s", top);
  /* every object reached is under the root's node */
  cr_expect(strstr(top, "100%  [.NET Roots]\n"), "the root holds all:\n%s", top);
  free(top);
  char *traces = go_pprof(dir, "-traces", NULL, url);
  cr_expect(strstr(traces, "Type: inuse_space"), "the space by default:\n%s", traces);
  cr_expect(trace_label(traces, "pid", pid), "samples labelled pid %s:\n%s", pid, traces);
  cr_expect(trace_label(traces, "env", "test"), "samples labelled env test:\n%s", traces);
  free(traces);
  cr_expect(wait_for(port, "/metrics", 200, pidlabel), "/metrics still answered");
  char *index;
  cr_expect_eq(get(port, "/debug/pprof/", &index), 200);
  cr_expect(strstr(body_of(index), "/debug/pprof/heap"), "the index lists heap:\n%s", body_of(index));
  free(index);
  cr_expect_eq(stop_serve(serve), 0, "serve ends with 0 on Ctrl+C");
  dnt_target_stop(&t);
  rm_rf(dir);
}

/* With a rule that wants the runtime's events, serve's own session keeps them on: the runtime
 * names the heap's types for the first snapshot only (dntrace-gcdump(1)), so a second heap
 * request is answered 502 with why, never a profile of unnamed types. */
Test(serve, a_heap_the_runtime_leaves_unnamed_is_502, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-serve-XXXXXX";
  cr_assert(mkdtemp(dir));
  dnt_target t;
  char pid[16];
  const char *const args[] = {"--heap", "300:100", "--no-cpu", "--no-blocking", "--no-alloc", "--no-exceptions", NULL};
  dnt_start_sample(&t, args, pid, sizeof pid);
  int port = dnt_free_port();
  char listen[64], log[300], pidlabel[64], path[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *argv[] = {"dntrace", "serve", "-p", pid, "--listen", listen, "-o", dir, "--rule",
                  "exception 5 in 1h => stacks", NULL};
  pid_t serve = spawn_dntrace(log, argv);
  snprintf(pidlabel, sizeof pidlabel, "pid=\"%s\"", pid);
  snprintf(path, sizeof path, "/debug/pprof/heap?pid=%s", pid);
  cr_assert(wait_for(port, "/metrics", 200, pidlabel), "serve answers /metrics with the sample's pid");
  cr_expect_eq(get(port, path, NULL), 200, "the first snapshot is named");
  char *answer;
  cr_expect_eq(get(port, path, &answer), 502, "%s", answer);
  cr_expect(strstr(body_of(answer), "the runtime named no type for "), "%s", answer);
  free(answer);
  cr_expect_eq(stop_serve(serve), 0, "serve ends with 0 on Ctrl+C");
  dnt_target_stop(&t);
  rm_rf(dir);
}

/* ---- rules in the agent ----
 * serve --rule on the sample, which throws 50 exceptions once its start file is there: the rule
 * fires once; /debug/dntrace/incidents lists it with its file, which is served from there (and
 * nothing else is); /metrics answered meanwhile. */
Test(serve, rules_fire_and_their_files_are_served, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-serve-XXXXXX";
  cr_assert(mkdtemp(dir));
  char go[128], out[128];
  snprintf(go, sizeof go, "%s/go", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  dnt_target t;
  char pid[16];
  const char *const args[] = {"--throw", "100", "--throw-count", "50", "--start-file", go, "--no-cpu", "--no-blocking",
                              "--no-alloc", "--no-exceptions", NULL};
  dnt_start_sample(&t, args, pid, sizeof pid);
  int port = dnt_free_port();
  char listen[64], log[300], pidlabel[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *argv[] = {"dntrace", "serve", "-p", pid, "--listen", listen, "-o", out, "--rule",
                  "exception Sample.SampleException 5 in 10s => stacks", NULL};
  pid_t serve = spawn_dntrace(log, argv);
  snprintf(pidlabel, sizeof pidlabel, "pid=\"%s\"", pid);
  cr_assert(wait_for(port, "/metrics", 200, pidlabel), "serve answers /metrics with the sample's pid");
  int fd = open(go, O_WRONLY | O_CREAT | O_EXCL, 0644);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert(wait_for(port, "/debug/dntrace/incidents", 200, "\"status\":0}"), "an incident, its stacks written");
  char *list;
  cr_assert_eq(get(port, "/debug/dntrace/incidents", &list), 200);
  const char *body = body_of(list);
  cr_expect(strstr(body, "\"rules\":[\"exception Sample.SampleException 5 in 10s => stacks\"]"), "%s", body);
  cr_expect(strstr(body, "\"why\":\"exception Sample.SampleException 5 in 10 s (5 Sample.SampleException in "), "%s",
            body);
  const char *file = strstr(body, "\"file\":\"");
  cr_assert(file, "%s", body);
  file += 8;
  const char *slash = strrchr(file, '/'), *q = strchr(file, '"');
  cr_assert(slash && q && slash < q, "%s", body);
  char path[600];
  snprintf(path, sizeof path, "/debug/dntrace/incidents/%.*s", (int)(q - slash - 1), slash + 1);
  free(list);
  char *stacks;
  cr_expect_eq(get(port, path, &stacks), 200, "%s", path);
  cr_expect(strstr(body_of(stacks), "managed threads"), "the stacks file: %s", body_of(stacks));
  free(stacks);
  cr_expect_eq(get(port, "/debug/dntrace/incidents/serve.log", NULL), 404, "only the incidents' files are served");
  cr_expect_eq(get(port, "/debug/dntrace/incidents/..%2Fserve.log", NULL), 404);
  cr_expect(wait_for(port, "/metrics", 200, pidlabel), "/metrics still answered");
  cr_expect_eq(stop_serve(serve), 0, "serve ends with 0 on Ctrl+C");
  dnt_target_stop(&t);
  static char text[65536];
  FILE *lf = fopen(log, "r");
  cr_assert(lf);
  text[fread(text, 1, sizeof text - 1, lf)] = '\0';
  fclose(lf);
  cr_expect(strstr(text, " rule 1 fired on process "), "the log line: %s", text);
  rm_rf(dir);
}

/* serve --ring: each target's last seconds kept; a rule's save-ring writes the window (the
 * session stops, its rundown closes the window, the next one starts) and the file is served
 * with the incident. The sample's spike comes 8 s after its start file: the 6 s ring has cut the
 * session's start, spans the window, holds the spike's hot method, and reads in TraceEvent; the
 * target's counters are answered again from the next session. */
Test(serve, ring_saved_by_a_rule_is_served, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-serve-XXXXXX";
  cr_assert(mkdtemp(dir));
  char go[128], out[128];
  snprintf(go, sizeof go, "%s/go", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  dnt_target t;
  char pid[16];
  const char *const args[] = {"--spike-at", "8", "--start-file", go, "--no-cpu", "--no-blocking", "--no-alloc",
                              "--no-exceptions", NULL};
  dnt_start_sample(&t, args, pid, sizeof pid);
  int port = dnt_free_port();
  char listen[64], log[300], pidlabel[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *argv[] = {"dntrace", "serve", "-p", pid, "--listen", listen, "-o", out, "--ring", "6s", "--rule",
                  "exception Sample.SampleException 5 in 10s => save-ring", "--rule", "process-start => exec true",
                  NULL};
  pid_t serve = spawn_dntrace(log, argv);
  snprintf(pidlabel, sizeof pidlabel, "pid=\"%s\"", pid);
  cr_assert(wait_for(port, "/metrics", 200, pidlabel), "serve answers /metrics with the sample's pid");
  int fd = open(go, O_WRONLY | O_CREAT | O_EXCL, 0644);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert(wait_for(port, "/debug/dntrace/incidents", 200, "\"action\":\"save-ring\",\"file\":\""),
            "an incident, its window written");
  char *list;
  cr_assert_eq(get(port, "/debug/dntrace/incidents", &list), 200);
  const char *body = body_of(list), *file = strstr(body, "\"action\":\"save-ring\",\"file\":\"");
  cr_assert(file, "%s", body);
  file += strlen("\"action\":\"save-ring\",");
  cr_expect(strstr(file, "\"status\":0}"), "saved: %s", body);
  /* the process-start rule fired once, as the target was followed */
  const char *started = strstr(body, "\"why\":\"process-start (followed from now)\"");
  cr_expect(started && !strstr(started + 1, "\"why\":\"process-start"), "process-start once: %s", body);
  file += 8;
  const char *q = strchr(file, '"'), *slash = q ? memrchr(file, '/', (size_t)(q - file)) : NULL;
  cr_assert(slash && q - file < 400, "%s", body);
  char url[600], ring[600];
  snprintf(url, sizeof url, "/debug/dntrace/incidents/%.*s", (int)(q - slash - 1), slash + 1);
  snprintf(ring, sizeof ring, "%.*s", (int)(q - file), file);
  free(list);
  /* the file served is the file written, whole */
  char *served;
  cr_expect_eq(get(port, url, &served), 200, "%s", url);
  struct stat st;
  cr_assert_eq(stat(ring, &st), 0, "%s", ring);
  const char *len = strcasestr(served, "Content-Length: ");
  cr_expect(len && strtoll(len + 16, NULL, 10) == (long long)st.st_size, "%s is %lld bytes: %.300s", ring,
            (long long)st.st_size, served);
  free(served);
  cr_expect(wait_for(port, "/metrics", 200, pidlabel), "/metrics answered from the next session");
  cr_expect_eq(stop_serve(serve), 0, "serve ends with 0 on Ctrl+C");
  dnt_target_stop(&t);
  expect_spike_window(ring, "serve's save-ring");
  rm_rf(dir);
}

/* A rule that does not parse, save-ring without --ring: one line, exit 2. */
Test(serve, rules_that_cannot_run_are_refused) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "serve", "-p", "1", "--rule", "cpu-usage > => stacks", NULL), 2);
  cr_expect(strstr(r.err, "--rule 'cpu-usage > => stacks', column 13: expected a number"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "serve", "-p", "1", "--rule", "exception 5 in 10s => save-ring", NULL), 2);
  cr_expect(strstr(r.err, "save-ring needs a ring"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "serve", "-p", "1", "--max-disk", "10", NULL), 2);
  cr_expect(strstr(r.err, "go with --rule or --rules"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "serve", "-p", "1", "--ring", "60s", NULL), 2);
  cr_expect(strstr(r.err, "go with --rule or --rules"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "serve", "-p", "1", "--ring", "60s", "--ring-profile", "no-such", "--rule",
                               "exception 5 in 10s => save-ring", NULL), 2);
  cr_expect(strstr(r.err, "--ring-profile: "), "%s", r.err);
  dnt_run_free(&r);
}

/* ---- serve --cpu ---- */

/* The directories named dntrace-perf-PID-* in $TMPDIR or /tmp (perf's control fifos, serve's
 * perf.data). */
static int perf_dirs_of(pid_t pid) {
  char cmd[400];
  const char *tmp = getenv("TMPDIR");
  snprintf(cmd, sizeof cmd, "ls -d '%s'/dntrace-perf-%d-* 2>/dev/null | wc -l", tmp && *tmp ? tmp : "/tmp", (int)pid);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  int n = -1;
  if (fscanf(p, "%d", &n) != 1) n = -1;
  pclose(p);
  return n;
}

/* The perf directories of serve and the perf map of the target: 1 when both are as wanted
 * (dirs directories; the map there or not), waited for; 0 when that hangs. */
static int wait_perf_state(pid_t serve, const char *map, int dirs, int map_there) {
  for (double end = hang_deadline(); waiting(end); usleep(100 * 1000))
    if (perf_dirs_of(serve) == dirs && (access(map, F_OK) == 0) == map_there) return 1;
  return 0;
}

/* --cpu: the profile is perf's on-CPU time. The sample's cpu-work thread spins in CountPrimes all
 * along; what perf saw of it is at least its own CPU time over the whole request (from /proc)
 * less what it can have run outside the 3 s window (one CPU for the rest of the request), and the
 * whole process holds at most 3 s for each CPU of the machine; go tool pprof reads the sample
 * types from the profile itself. */
Test(serve, cpu_profile_is_perfs_on_cpu_time_with_jit_frames_named, .timeout = 300) {
  DNT_REQUIRE_PERF();
  require_tool("go", "golang-go");
  char dir[] = "/tmp/dnt-serve-cpu-XXXXXX";
  cr_assert(mkdtemp(dir));
  dnt_target t;
  char pid[16];
  dnt_start_sample(&t, NULL, pid, sizeof pid);
  char map[64];
  snprintf(map, sizeof map, "/tmp/perf-%d.map", (int)t.pid);
  cr_assert_neq(access(map, F_OK), 0, "the sample starts with its perf map off");
  unsigned long hog = 0;
  for (double end = hang_deadline(); !(hog = dnt_target_thread_named(t.pid, "cpu-work")) && waiting(end);)
    usleep(50 * 1000);
  cr_assert(hog, "the sample has a cpu-work thread");
  int port = dnt_free_port();
  char listen[64], log[300], url[256], path[128], again[128], pidlabel[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  char *argv[] = {"dntrace", "serve", "--cpu", "-p", pid, "--label", "env=cpu", "--listen", listen, NULL};
  pid_t serve = spawn_dntrace(log, argv);
  snprintf(pidlabel, sizeof pidlabel, "pid=\"%s\"", pid);
  cr_assert(wait_for(port, "/metrics", 200, pidlabel), "serve --cpu answers /metrics with the sample's pid");

  /* a profile request that stays (300 s): once perf records, a scrape begun then is answered, and
   * a second profile request for the same pid gets 429 */
  struct dnt_scraper sc = {.port = port, .every_ms = SCRAPE_EVERY_MS, .phase = "perf starting for a 300 s request"};
  pthread_t scr;
  cr_assert_eq(pthread_create(&scr, NULL, dnt_scrape_loop, &sc), 0);
  snprintf(path, sizeof path, "/debug/pprof/profile?seconds=300&pid=%s", pid);
  int stay = send_get(port, path);
  int recording = wait_perf_state(serve, map, 2, 1);
  cr_expect(recording, "perf records (its control directory and serve's for perf.data: %d), the perf map on",
            perf_dirs_of(serve));
  sc.phase = "perf recording for a 300 s request";
  int scraped = scrape_answered_from_now(&sc);
  snprintf(again, sizeof again, "/debug/pprof/profile?seconds=1&pid=%s", pid);
  int second = get(port, again, NULL);
  int scraped_after = scrape_answered_from_now(&sc);
  int running = !answer_begun(stay);
  cr_expect(scraped && scraped_after, "scrapes begun while perf records are answered (%d of %d scrapes answered)",
            sc.answered, sc.scrapes);
  cr_expect_eq(second, 429, "a second profile request for pid %s while one runs gets 429 (got %d)", pid, second);
  cr_expect(running, "the 300 s profile request is still running, unanswered, after those scrapes and the 429");

  /* its client leaves mid-recording: perf stops, nothing is left (the job's slot goes first) */
  sc.phase = "perf stopping for a client that left";
  close(stay);
  cr_expect(wait_perf_state(serve, map, 0, 0), "serve's perf directories removed (%d) and the perf map off after the "
            "client left", perf_dirs_of(serve));

  /* the profile, through go tool pprof, with the cpu-work thread's CPU time measured around it */
  sc.phase = "go tool pprof's 3 s --cpu profile";
  snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/profile?seconds=3", port);
  /* timing: the request's length bounds what the thread can have run outside the window (below) */
  double cpu0 = dnt_cpu_seconds(t.pid, (pid_t)hog), t0 = dnt_now_ms();
  char *top = go_pprof(dir, "-top", NULL, url);
  /* timing: as above, and a figure */
  double took = (dnt_now_ms() - t0) / 1000, cpu1 = dnt_cpu_seconds(t.pid, (pid_t)hog);
  sc.stop = 1;
  pthread_join(scr, NULL);
  cr_expect(strstr(top, "Type: cpu"), "an on-CPU profile:\n%s", top);
  /* the first row of -top is the function with the most flat time: the sample's spinning one */
  const char *row = strstr(top, "flat%");
  row = row ? strchr(row, '\n') : NULL;
  const char *eol = row ? strchr(row + 1, '\n') : NULL;
  const char *hot = strstr(top, "Sample!Sample.CpuWork.CountPrimes");
  cr_expect(hot && row && eol && hot < eol, "CountPrimes, a JIT-compiled method, named and on top:\n%s", top);
  cr_expect_eq(sc.unanswered, 0, "%d of %d scrapes got no answer", sc.unanswered, sc.scrapes);
  cr_expect_eq(sc.ok, sc.scrapes, "every scrape answered 200 (%d of %d)", sc.ok, sc.scrapes);
  /* figures for tests/bench-serve.sh, not a verdict */
  cr_log_info("serve --cpu: a 3 s profile answered to go tool pprof in %.1f s; %d scrapes every %d ms, slowest %.1f ms "
              "(%s); %s",
              took, sc.scrapes, SCRAPE_EVERY_MS, sc.max_ms, /* timing: figures, printed */
              sc.slowest_in ? sc.slowest_in : "-", dnt_run_context(serve));
  free(top);

  /* the profile go tool pprof fetched, kept in PPROF_TMPDIR: its sample types, period, total, labels */
  char saved[400];
  snprintf(saved, sizeof saved, "ls %s/pprof.*.pb.gz 2>/dev/null | head -1", dir);
  FILE *ls = popen(saved, "r");
  cr_assert(ls);
  cr_assert(fgets(saved, sizeof saved, ls), "go tool pprof saved the profile it fetched in %s", dir);
  pclose(ls);
  saved[strcspn(saved, "\n")] = '\0';
  char *raw = go_pprof(dir, "-raw", NULL, saved);
  cr_expect(strstr(raw, "samples/count cpu/nanoseconds[dflt]"), "the sample types:\n%.1500s", raw);
  cr_expect(strstr(raw, "PeriodType: cpu nanoseconds"), "%.1500s", raw);
  long long period = 0;
  const char *pl = strstr(raw, "\nPeriod: ");
  cr_expect(pl && sscanf(pl, "\nPeriod: %lld", &period) == 1 && period > 0, "a period:\n%.1500s", raw);
  /* each sample's line, then a line of its labels ("   pid:[123] thread_name:[cpu-work] ...") */
  unsigned long long count = 0, ns = 0, work_ns = 0, c1 = 0, n1 = 0;
  int in_sample = 0;
  for (const char *p = strstr(raw, "Samples:"); p && (p = strchr(p, '\n'));) {
    p++;
    if (strncmp(p, "Locations", 9) == 0) break;
    const char *end = strchr(p, '\n');
    if (sscanf(p, " %llu %llu:", &c1, &n1) == 2) {
      count += c1, ns += n1, in_sample = 1;
    } else if (in_sample) {
      const char *name = strstr(p, "thread_name:[cpu-work]");
      if (name && (!end || name < end)) work_ns += n1;
      in_sample = 0;
    }
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  /* the thread ran cpu1 - cpu0 over the request, of which at most took - 3 s outside the window
   * perf recorded; 0.5 s for the loop's timer and perf's start and stop around it */
  double ran = cpu1 - cpu0, outside = took > 3 ? took - 3 : 0, want = ran - outside - 0.5;
  cr_expect(work_ns > 0 && (double)work_ns / 1e9 >= want,
            "perf saw cpu-work on a CPU for %.2f s; its own CPU time over the %.1f s request was %.2f s, at most "
            "%.1f s of it outside the 3 s window: at least %.2f s expected (%s)",
            (double)work_ns / 1e9, took, ran, outside, want, dnt_run_context(t.pid));
  /* perf's samples come at its period on each CPU: a few over 3 s are the sampler's jitter */
  cr_expect_leq(ns, 3300000000ull * (unsigned long long)cpus, "at most 3 s x %ld CPUs: %llu ns (%s)", cpus, ns,
                dnt_run_context(t.pid));
  cr_log_info("serve --cpu: perf saw %.2f s of the process on a CPU, %.2f s of cpu-work, whose own CPU time over the "
              "%.1f s request was %.2f s",
              (double)ns / 1e9, (double)work_ns / 1e9, took, ran);
  /* each sample weighs perf's period (the period written in whole ns: within 1 ns a sample) */
  unsigned long long by_period = count * (unsigned long long)period;
  cr_expect(ns >= by_period && ns - by_period <= count, "%llu samples of %lld ns: %llu ns", count, period, ns);
  char want_pid[64];
  snprintf(want_pid, sizeof want_pid, "pid:[%s]", pid);
  cr_expect(strstr(raw, want_pid), "labelled %s:\n%.1500s", want_pid, raw);
  cr_expect(strstr(raw, "env:[cpu]"), "labelled with --label:\n%.1500s", raw);
  cr_expect(strstr(raw, "thread_name:[cpu-work]"), "the sample's thread named:\n%.1500s", raw);
  free(raw);

  /* once answered, nothing is left: perf's and serve's directories gone, the perf map off again
   * (the runtime had it off: its file removed) */
  cr_expect(wait_perf_state(serve, map, 0, 0), "serve's perf directories removed (%d) and the perf map turned off "
            "again, its file removed", perf_dirs_of(serve));

  /* Ctrl+C during a recording: perf stops with serve, which ends with 0 and leaves nothing */
  snprintf(path, sizeof path, "/debug/pprof/profile?seconds=300&pid=%s", pid);
  int fd = send_get(port, path);
  cr_expect(wait_perf_state(serve, map, 2, 1), "perf records (its control directory and serve's for perf.data: %d)",
            perf_dirs_of(serve));
  cr_expect_eq(stop_serve(serve), 0, "serve ends with 0 on Ctrl+C while perf records");
  close(fd);
  cr_expect_eq(perf_dirs_of(serve), 0, "nothing left behind");
  cr_expect_neq(access(map, F_OK), 0, "the perf map off again");
  dnt_target_stop(&t);
  rm_rf(dir);
}

/* Where perf cannot run, --cpu says so at start-up in one line and serve does not start. */
Test(serve_cpu, without_perf_one_line_and_exit_2) {
  struct dnt_run r;
  char *const argv[] = {(char *)dnt_bin(), "serve", "--cpu", "-p", "1", "--listen", "127.0.0.1:0", NULL};
  const char *const env[] = {"PATH=/nonexistent", NULL};
  cr_expect_eq(dnt_run_argv(&r, argv, env, 20000), 2, "%s", r.err);
  cr_expect(strstr(r.err, "perf is not installed"), "says why: %s", r.err);
  cr_expect_eq(strchr(r.err, '\n') ? strchr(r.err, '\n')[1] : 1, '\0', "in one line: %s", r.err);
  cr_expect(!strstr(r.out, "Serving"), "does not serve: %s", r.out);
  dnt_run_free(&r);
}

/* ---- serve --all ---- */

/* The series line of /metrics text for counter family with label pid, or NULL. */
static const char *series_of(const char *text, const char *family, int pid) {
  char want[64];
  snprintf(want, sizeof want, "pid=\"%d\"", pid);
  for (const char *p = text; (p = strstr(p, family)); p++) {
    if (p != text && p[-1] != '\n') continue;
    const char *eol = strchr(p, '\n');
    const char *l = strstr(p, want);
    if (l && (!eol || l < eol)) return p;
  }
  return NULL;
}

Test(serve, all_follows_two_samples_and_a_restart, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  require_tool("promtool", "prometheus");
  require_tool("unshare", "util-linux");
  char dir[] = "/tmp/dnt-serve-all-XXXXXX", exe_a[128], exe_b[128], listen[64], log[300];
  cr_assert(mkdtemp(dir));
  snprintf(exe_a, sizeof exe_a, "%s/dnta%d", dir, (int)getpid() % 100000);
  snprintf(exe_b, sizeof exe_b, "%s/dntb%d", dir, (int)getpid() % 100000);
  char *real = realpath(dnt_target_exe(), NULL);
  cr_assert(real, "no sample at %s", dnt_target_exe());
  cr_assert_eq(symlink(real, exe_a), 0);
  cr_assert_eq(symlink(real, exe_b), 0);
  free(real);
  int port = dnt_free_port();
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  cr_assert_geq(logfd, 0);
  char *tail[] = {exe_a, exe_b, (char *)dnt_bin(), "serve", "--all", "--rescan", "1s", "--label", "pod=p1",
                  "--counters", "EventCounters\\System.Runtime", "--listen", listen, NULL};
  struct pod pod;
  pod_start(&pod, logfd, tail);
  close(logfd);
  int a = pod_hear(&pod, "up");
  cr_assert_gt(a, 0, "the pod starts the first sample: %s", pod.last);
  int b = pod_hear(&pod, "up");
  cr_assert_gt(b, 0, "the pod starts the second sample: %s", pod.last);
  cr_assert_gt(pod_hear(&pod, "started"), 0, "the pod starts serve: %s", pod.last);
  const char *family = "cpu_usage_percent{";
  int both = 0;
  char *ans = NULL;
  for (double end = hang_deadline(); !both && waiting(end);) {
    free(ans);
    get(port, "/metrics", &ans);
    both = series_of(body_of(ans), family, a) && series_of(body_of(ans), family, b);
    if (!both) usleep(100 * 1000);
  }
  cr_assert(both, "both samples (%d, %d) on /metrics:\n%s", a, b, body_of(ans));
  const char *line = series_of(body_of(ans), family, a);
  char name_a[64];
  snprintf(name_a, sizeof name_a, "process=\"%s\"", strrchr(exe_a, '/') + 1);
  const char *eol = strchr(line, '\n');
  cr_expect(strstr(line, name_a) && strstr(line, name_a) < eol, "the process label: %.*s", (int)(eol - line), line);
  cr_expect(strstr(line, "pod=\"p1\"") && strstr(line, "pod=\"p1\"") < eol, "the --label: %.*s", (int)(eol - line),
            line);
  char said[4096], perr[256];
  cr_expect_eq(prom_check(body_of(ans), NULL, perr, sizeof perr), 0, "%s", perr);
  int rc = promtool_check(body_of(ans), dir, said, sizeof said);
  cr_expect_eq(rc, 0, "promtool check metrics exits %d:\n%s", rc, said);
  free(ans);
  ans = NULL;

  /* the pod's two samples are all serve sees, whatever runs beside this test */
  char *index;
  cr_expect_eq(get(port, "/debug/pprof/", &index), 200);
  int targets = 0;
  for (const char *p = body_of(index); (p = strstr(p, "\n  pid ")); p++) targets++;
  cr_expect_eq(targets, 2, "serve --all in the pod sees its two samples only:\n%s", body_of(index));
  free(index);

  /* profiles need pid= now that there are several targets */
  char *why;
  cr_expect_eq(get(port, "/debug/pprof/profile?seconds=1", &why), 400);
  cr_expect(strstr(body_of(why), "pid="), "the 400 says why: %s", body_of(why));
  free(why);

  /* b restarts: its old pid goes, its new one comes, a stays */
  int old_b = b;
  pod_say(&pod, "restart-b");
  int b2 = pod_hear(&pod, "up");
  cr_assert_gt(b2, 0, "the pod restarts the second sample: %s", pod.last);
  int followed = 0, gone = 0, kept = 0;
  for (double end = hang_deadline(); !(followed && gone && kept) && waiting(end);) {
    free(ans);
    get(port, "/metrics", &ans);
    followed = series_of(body_of(ans), family, b2) != NULL;
    gone = series_of(body_of(ans), family, old_b) == NULL;
    kept = series_of(body_of(ans), family, a) != NULL;
    if (!(followed && gone && kept)) usleep(100 * 1000);
  }
  cr_expect(followed, "the restarted sample's new pid %d is served", b2);
  cr_expect(gone, "the old pid %d is dropped", old_b);
  cr_expect(kept, "the other sample %d stays", a);
  rc = promtool_check(body_of(ans), dir, said, sizeof said);
  cr_expect_eq(rc, 0, "promtool check metrics exits %d after the restart:\n%s", rc, said);
  free(ans);

  pod_say(&pod, "stop");
  int code = pod_hear(&pod, "ended");
  cr_expect_eq(code, 0, "serve ends with 0 on Ctrl+C (%s)", pod.last);
  pod_end(&pod);
  rm_rf(dir);
}

/* ---- serve --push ---- */

/* A Pyroscope stand-in on loopback: every POST's request line and body kept (the first 64),
 * answered 200; while `away`, every POST is answered 503 and forgotten, as a Pyroscope behind its
 * load balancer answers while it is down (closing the port instead would leave it to the kernel
 * whether it can be bound again at once). */
struct receiver {
  int port, fd;
  pthread_t th;
  volatile int stop, away;
  pthread_mutex_t mu;
  int n;
  char *line[64], *body[64];
  size_t len[64];
};

static void *receive_loop(void *arg) {
  struct receiver *r = arg;
  while (!r->stop) {
    struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
    if (poll(&pfd, 1, 100) <= 0) continue;
    int c = accept(r->fd, NULL, NULL);
    if (c < 0) continue;
    struct timeval tv = {.tv_sec = DNT_HANG_MS / 1000};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t cap = 1 << 20, got = 0;
    char *buf = malloc(cap + 1);
    char *end = NULL;
    long want = -1;
    ssize_t n;
    while (got < cap && (n = read(c, buf + got, cap - got)) > 0) {
      got += (size_t)n;
      buf[got] = '\0';
      if (!end && (end = strstr(buf, "\r\n\r\n"))) {
        const char *cl = strcasestr(buf, "Content-Length:");
        want = cl ? strtol(cl + 15, NULL, 10) : 0;
      }
      if (end && (long)(got - (size_t)(end + 4 - buf)) >= want) break;
    }
    if (end && r->away) {
      const char *no = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      if (write(c, no, strlen(no)) < 0) {}
    } else if (end) {
      const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      if (write(c, ok, strlen(ok)) < 0) {}
      pthread_mutex_lock(&r->mu);
      if (r->n < 64) {
        r->line[r->n] = strndup(buf, strcspn(buf, "\r\n"));
        size_t blen = got - (size_t)(end + 4 - buf);
        r->body[r->n] = malloc(blen + 1);
        memcpy(r->body[r->n], end + 4, blen);
        r->len[r->n] = blen;
        r->n++;
      }
      pthread_mutex_unlock(&r->mu);
    }
    free(buf);
    close(c);
  }
  return NULL;
}

/* A port below the kernel's ephemeral range: a client connecting to it while nothing listens can
 * never be handed the same port as its own (a TCP self-connect would then hold it). */
static int quiet_port(void) {
  int lo = 32768, hi;
  FILE *fp = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (fp && fscanf(fp, "%d %d", &lo, &hi) != 2) lo = 32768;
  if (fp) fclose(fp);
  for (int port = 10000 + (int)(getpid() * 7 % 9000); port < lo; port += 97) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    if (ok) return port;
  }
  cr_assert_fail("no free port below %d", lo);
  return 0;
}

static void receiver_start(struct receiver *r) {
  r->fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = -1;
  for (int i = 0; i < 50 && (rc = bind(r->fd, (struct sockaddr *)&a, sizeof a)) != 0; i++) usleep(100 * 1000);
  if (rc) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ss -tanpe | grep ':%d ' >&2", r->port);
    if (system(cmd)) {}
  }
  cr_assert_eq(rc, 0, "the receiver cannot bind port %d: %s", r->port, strerror(errno));
  cr_assert_eq(listen(r->fd, 16), 0);
  r->stop = 0;
  cr_assert_eq(pthread_create(&r->th, NULL, receive_loop, r), 0);
}

static void receiver_stop(struct receiver *r) {
  r->stop = 1;
  pthread_join(r->th, NULL);
  close(r->fd); /* connections are refused from now on */
}

static int received(struct receiver *r) {
  pthread_mutex_lock(&r->mu);
  int n = r->n;
  pthread_mutex_unlock(&r->mu);
  return n;
}

/* The push figures of the index's line for the target. */
struct push_state {
  unsigned long long sent, dropped, failed;
  int waiting;
};

static int push_state_of(const char *index, struct push_state *ps) {
  const char *p = strstr(index, "push: ");
  return p && sscanf(p, "push: %llu sent, %llu dropped, %llu failed attempts, %d waiting", &ps->sent, &ps->dropped,
                     &ps->failed, &ps->waiting) == 4;
}

/* A query parameter of a request line, percent-decoded into out. */
static int line_param(const char *line, const char *key, char *out, size_t cap) {
  char target[4096];
  if (sscanf(line, "POST %4095s", target) != 1) return -1;
  return dnt_http_query_get(target, key, out, cap);
}

Test(serve, push_sends_windows_to_a_receiver_and_stays_flat_while_it_is_away, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  require_tool("go", "golang-go");
  char dir[] = "/tmp/dnt-serve-push-XXXXXX";
  cr_assert(mkdtemp(dir));
  dnt_target t;
  char pid[16];
  dnt_start_sample(&t, NULL, pid, sizeof pid);
  struct receiver r = {.port = quiet_port()};
  pthread_mutex_init(&r.mu, NULL);
  receiver_start(&r);
  int port = dnt_free_port();
  char listen[64], log[300], url[128];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(url, sizeof url, "http://127.0.0.1:%d", r.port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  /* ASan keeps freed memory aside (its quarantine): memory would grow with what is freed */
  const char *asan = getenv("ASAN_OPTIONS");
  char asan_opts[512];
  snprintf(asan_opts, sizeof asan_opts, "%s%squarantine_size_mb=1", asan ? asan : "", asan && *asan ? ":" : "");
  setenv("ASAN_OPTIONS", asan_opts, 1);
  char *argv[] = {"dntrace", "serve", "-p", pid, "--label", "env=push", "--listen", listen, "--push", url,
                  "--push-interval", "1s", NULL};
  pid_t serve = spawn_dntrace(log, argv);
  for (double end = hang_deadline(); received(&r) < 3 && waiting(end);) usleep(100 * 1000);
  cr_assert_geq(received(&r), 3, "three windows reach the receiver");

  /* the query string: the name with the labels, the windows end to end */
  pthread_mutex_lock(&r.mu);
  char name[512], from[32], until[32], format[16], prev_until[32] = "";
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(strncmp(r.line[i], "POST /ingest?", 13), 0, "%s", r.line[i]);
    cr_expect_gt(line_param(r.line[i], "name", name, sizeof name), 0, "%s", r.line[i]);
    char want[128];
    snprintf(want, sizeof want, "Sample{pid=%s,process=Sample,env=push}", pid);
    cr_expect_str_eq(name, want, "the application name with its labels");
    cr_expect_gt(line_param(r.line[i], "from", from, sizeof from), 0);
    cr_expect_gt(line_param(r.line[i], "until", until, sizeof until), 0);
    cr_expect_gt(line_param(r.line[i], "format", format, sizeof format), 0);
    cr_expect_str_eq(format, "pprof");
    cr_expect_leq(atoll(from), atoll(until));
    if (prev_until[0]) cr_expect_str_eq(from, prev_until, "a window starts where the one before ended");
    snprintf(prev_until, sizeof prev_until, "%s", until);
  }
  /* the multipart body's profile part, read by go tool pprof */
  const char *b = r.body[1];
  size_t blen = r.len[1];
  const char *disp = memmem(b, blen, "name=\"profile\"", 14);
  const char *start = disp ? memmem(disp, blen - (size_t)(disp - b), "\r\n\r\n", 4) : NULL;
  cr_assert(start, "a part named profile");
  start += 4;
  const char *stop = memmem(start, blen - (size_t)(start - b), "\r\n--", 4);
  cr_assert(stop, "the part ends with the boundary");
  cr_expect(memmem(b, blen, "name=\"sample_type_config\"", 25), "a sample_type_config part");
  char file[320];
  snprintf(file, sizeof file, "%s/window.pb.gz", dir);
  FILE *fp = fopen(file, "wb");
  fwrite(start, 1, (size_t)(stop - start), fp);
  fclose(fp);
  pthread_mutex_unlock(&r.mu);
  char *top = go_pprof(dir, "-top", NULL, file);
  cr_expect(strstr(top, "Sample.CpuWork.CountPrimes"), "a window names the sample's hot method:\n%s", top);
  cr_expect(strstr(top, "Type: wall"), "%s", top);
  free(top);

  /* the receiver goes away: windows wait, two at most, the ones after are dropped, and serve's
   * memory stays flat while five more are made and dropped; then it sends again */
  r.away = 1;
  int before = received(&r);
  long rss0 = dnt_proc_status_kb(serve, "VmRSS"), rss_full = -1, rss_max = -1;
  struct push_state ps = {0};
  unsigned long long dropped_full = 0;
  int most_waiting = 0, seen = 0;
  char *index = NULL;
  for (double end = hang_deadline(); waiting(end); usleep(200 * 1000)) {
    free(index);
    if (get(port, "/debug/pprof/", &index) != 200 || !push_state_of(body_of(index), &ps)) continue;
    seen = 1;
    if (ps.waiting > most_waiting) most_waiting = ps.waiting;
    long kb = dnt_proc_status_kb(serve, "VmRSS");
    if (rss_full < 0) { /* the queue full: what it may hold is held */
      if (ps.waiting == 2) rss_full = rss_max = kb, dropped_full = ps.dropped;
    } else if (kb > rss_max) {
      rss_max = kb;
    }
    if (rss_full >= 0 && ps.dropped >= dropped_full + 5) break;
  }
  cr_expect(seen, "the index shows the push queue:\n%s", body_of(index));
  cr_expect(rss_full >= 0 && ps.dropped >= dropped_full + 5 && ps.dropped >= 1,
            "windows wait (2) and are then dropped while the server is away (%llu dropped, %llu failed attempts):\n%s",
            ps.dropped, ps.failed, body_of(index));
  /* what bounds memory: at most two windows wait (the ones after are dropped, counted above) */
  cr_expect(most_waiting <= 2, "at most 2 windows wait (%d seen):\n%s", most_waiting, body_of(index));
  free(index);
  /* a gross check only (ASan's allocator keeps what it frees for a while): windows are ~10 KB */
  cr_expect_leq(rss_max - rss_full, 8192, "serve's RSS from %ld KB (its queue full) grew to %ld KB while 5 windows "
                "were dropped (%s)", rss_full, rss_max, dnt_run_context(serve));
  cr_log_info("push outage: RSS %ld KB at its start, %ld KB with the queue full, at most %ld KB after", rss0, rss_full,
              rss_max);
  r.away = 0;
  for (double end = hang_deadline(); received(&r) == before && waiting(end);) usleep(100 * 1000);
  cr_expect_gt(received(&r), before, "serve sends again once the receiver is back");

  int code = stop_serve(serve);
  receiver_stop(&r);
  pthread_mutex_lock(&r.mu);
  for (int i = 0; i < r.n; i++) free(r.line[i]), free(r.body[i]);
  pthread_mutex_unlock(&r.mu);
  dnt_target_stop(&t);
  char said[16384];
  FILE *lp = fopen(log, "r");
  size_t ln = lp ? fread(said, 1, sizeof said - 1, lp) : 0;
  said[ln] = '\0';
  if (lp) fclose(lp);
  cr_expect(strstr(said, "trying again") && strstr(said, "takes profiles again"), "serve says so:\n%s", said);
  cr_expect_eq(code, 0, "serve ends with 0 on Ctrl+C:\n%s", said);
  rm_rf(dir);
}

/* ---- the query string ---- */

Test(serve_query, values_decoded_as_forms_encode_them) {
  char v[32];
  cr_expect_eq(dnt_http_query_get("/p?seconds=3&pid=7", "pid", v, sizeof v), 1);
  cr_expect_str_eq(v, "7");
  cr_expect_eq(dnt_http_query_get("/p?seconds=3&pid=7", "seconds", v, sizeof v), 1);
  cr_expect_str_eq(v, "3");
  cr_expect_eq(dnt_http_query_get("/p?seconds=3", "pid", v, sizeof v), -1, "absent");
  cr_expect_eq(dnt_http_query_get("/p", "pid", v, sizeof v), -1, "no query at all");
  cr_expect_eq(dnt_http_query_get("/p?xpid=1&pid=2", "pid", v, sizeof v), 1, "a longer key is another key");
  cr_expect_str_eq(v, "2");
  cr_expect_eq(dnt_http_query_get("/p?pid=1&pid=2", "pid", v, sizeof v), 1);
  cr_expect_str_eq(v, "1", "the first occurrence wins");
  cr_expect_eq(dnt_http_query_get("/p?debug&pid=2", "debug", v, sizeof v), 0, "a key without '=' is empty");
  cr_expect_eq(dnt_http_query_get("/p?a=x%20y+z", "a", v, sizeof v), 5);
  cr_expect_str_eq(v, "x y z", "%%20 and + are spaces");
  cr_expect_eq(dnt_http_query_get("/p?a=%7e%7E", "a", v, sizeof v), 2);
  cr_expect_str_eq(v, "~~", "hex digits in either case");
  cr_expect_eq(dnt_http_query_get("/p?a=%2", "a", v, sizeof v), -2, "a cut %%XX");
  cr_expect_eq(dnt_http_query_get("/p?a=%zz", "a", v, sizeof v), -2, "not hex");
  cr_expect_eq(dnt_http_query_get("/p?a=%00", "a", v, sizeof v), -2, "a NUL");
  cr_expect_eq(dnt_http_query_get("/p?a=12345", "a", v, 5), -2, "too long for the buffer");
  cr_expect_eq(dnt_http_query_get("/p?a=1#a=2", "a", v, sizeof v), 1, "the fragment ends the query");
  cr_expect_str_eq(v, "1");
  cr_expect_eq(dnt_http_path_len("/debug/pprof/profile?seconds=3"), 20);
  cr_expect_eq(dnt_http_path_len("/metrics"), 8);
}

/* What serve --push reads: its URL and its server's status line (RFC 9112: HTTP-version SP
 * 3DIGIT SP reason). */
Test(serve_query, push_url_and_status_line) {
  char host[64], path[64];
  int port;
  cr_expect_eq(dnt_http_url_parse("http://pyroscope:4040", host, sizeof host, &port, path, sizeof path), 0);
  cr_expect_str_eq(host, "pyroscope");
  cr_expect_eq(port, 4040);
  cr_expect_str_eq(path, "");
  cr_expect_eq(dnt_http_url_parse("http://10.0.0.5/pyro/", host, sizeof host, &port, path, sizeof path), 0);
  cr_expect_eq(port, 80, "the scheme's port");
  cr_expect_str_eq(path, "/pyro/");
  cr_expect_eq(dnt_http_url_parse("https://x:1", host, sizeof host, &port, path, sizeof path), -EINVAL, "no TLS");
  cr_expect_eq(dnt_http_url_parse("http://:4040", host, sizeof host, &port, path, sizeof path), -EINVAL);
  cr_expect_eq(dnt_http_url_parse("http://x:0", host, sizeof host, &port, path, sizeof path), -EINVAL);
  cr_expect_eq(dnt_http_url_parse("http://x:65536", host, sizeof host, &port, path, sizeof path), -EINVAL);
  cr_expect_eq(dnt_http_url_parse("http://x:12a", host, sizeof host, &port, path, sizeof path), -EINVAL);
  const char *ok = "HTTP/1.1 204 No Content\r\n";
  cr_expect_eq(dnt_http_status_parse(ok, strlen(ok)), 204);
  cr_expect_eq(dnt_http_status_parse(ok, 10), 0, "not a whole line yet");
  cr_expect_eq(dnt_http_status_parse("HTTP/1.0 503\r\n", 14), 503, "no reason phrase");
  cr_expect_eq(dnt_http_status_parse("HTTP/2 200\r\n", 12), -1);
  cr_expect_eq(dnt_http_status_parse("HTTP/1.1 20 OK\r\n", 16), -1);
  cr_expect_eq(dnt_http_status_parse("HTTP/1.1 2000 OK\r\n", 18), -1);
  cr_expect_eq(dnt_http_status_parse("HTTP/1.1 099 X\r\n", 16), -1);
  cr_expect_eq(dnt_http_status_parse("GET / HTTP/1.1\r\n", 16), -1, "a request is no answer");
}
