/* `counters serve -n NAME` follows a restarted process without ever making a scrape wait: the
 * new session starts on the loop while /metrics keeps answering, 503 until the new process's
 * session has started. The runtime takes hundreds of milliseconds to seconds to answer that
 * start (it enables its EventSources); here it takes as long as the test looks: the new process
 * is stopped (SIGSTOP) before serve finds it, so serve has asked for its session and cannot have
 * the answer until the test continues it. Scrapes begun meanwhile must be answered (503). A
 * scraper thread asks every 10 ms; how long its scrapes take is printed, not asserted (a figure
 * for tests/bench.sh). Every wait is for the thing itself, DNT_HANG_MS at most. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/loopback.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

#define SCRAPE_EVERY_MS 10

/* The ceiling of a wait, DNT_HANG_MS from now: only a hang reaches it. */
static double hang_deadline(void) { return dnt_now_ms() + DNT_HANG_MS; } /* timing: a hang's ceiling */

/* 1 while a wait may go on: its ceiling (hang_deadline) is not reached. */
static int waiting(double end) { return dnt_now_ms() < end; } /* timing: a hang's ceiling */

/* Polls path until the answer has status and holds want (NULL: anything): 1, or 0 when that
 * hangs. */
static int wait_for(int port, const char *path, int status, const char *want) {
  for (double end = hang_deadline(); waiting(end); usleep(100 * 1000)) {
    char *body;
    int code = dnt_http_request(port, "GET", path, DNT_HANG_MS / 1000, &body);
    int hit = code == status && (!want || (body && strstr(body, want)));
    free(body);
    if (hit) return 1;
  }
  return 0;
}

/* The sample under a name of its own (a symlink to its apphost), so that -n finds this test's
 * process only. */
static void start_named(dnt_target *t, const char *exe) {
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .exe = exe, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
}

/* A count of the scraper's, read while its thread runs. */
static int counted(int *n) { return __atomic_load_n(n, __ATOMIC_SEQ_CST); }

/* Waits until the scraper has answered a scrape it began after this call (the one on its way now
 * may have begun before it: two more answers): 1, or 0 when that hangs. */
static int scrape_answered_from_now(struct dnt_scraper *sc) {
  int from = counted(&sc->answered);
  for (double end = hang_deadline(); waiting(end); usleep(2000))
    if (counted(&sc->answered) >= from + 2) return 1;
  return 0;
}

/* The state letter of /proc/PID/stat ('T': stopped), or '?'. */
static char proc_state(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

/* What path holds now (heap, NUL-terminated; "" when it cannot be read). */
static char *slurp(const char *path) {
  char *text = calloc(1, 1 << 16);
  cr_assert(text);
  FILE *fp = fopen(path, "r");
  if (fp) {
    size_t n = fread(text, 1, (1 << 16) - 1, fp);
    text[n] = '\0';
    fclose(fp);
  }
  return text;
}

/* SIGINT, then the exit status (as waitpid gives it); -1 (and SIGKILL) when it hangs. */
static int interrupt(pid_t pid) {
  kill(pid, SIGINT);
  int status;
  for (double end = hang_deadline(); waiting(end); usleep(50 * 1000))
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

Test(serve_restart, scrapes_never_wait_while_serve_follows_a_new_process, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-follow-XXXXXX", exe[128], name[32], listen[64], log[160], pidtext[64], following[64];
  cr_assert(mkdtemp(dir));
  snprintf(name, sizeof name, "dntf%d", (int)getpid() % 100000);
  snprintf(exe, sizeof exe, "%s/%s", dir, name);
  cr_assert_eq(symlink(dnt_target_exe(), exe), 0);
  dnt_target first;
  start_named(&first, exe);
  int port = dnt_free_port();
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(log, sizeof log, "%s/serve.log", dir);
  pid_t serve = fork();
  cr_assert_geq(serve, 0);
  if (serve == 0) {
    if (!freopen(log, "w", stdout)) _exit(127);
    dup2(1, 2);
    execl(dnt_bin(), "dntrace", "counters", "serve", "-n", name, "--counters", "Sample.Meter,System.Runtime",
          "--listen", listen, (char *)NULL);
    _exit(127);
  }
  cr_assert(wait_for(port, "/metrics", 200, "sample_requests_total{"), "serve answers with the first process");

  struct dnt_scraper sc = {.port = port, .every_ms = SCRAPE_EVERY_MS, .phase = "serving the first process"};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, dnt_scrape_loop, &sc), 0);
  int served_first = scrape_answered_from_now(&sc);

  /* the next process of that name starts, and is stopped, while the first still runs (two of that
   * name: serve looks for another only once the first has gone) */
  sc.phase = "starting the second process";
  dnt_target second;
  start_named(&second, exe);
  cr_assert_eq(kill(second.pid, SIGSTOP), 0);
  int stopped = 0;
  for (double end = hang_deadline(); !(stopped = proc_state(second.pid) == 'T') && waiting(end);)
    usleep(10 * 1000);
  cr_assert(stopped, "the second process %d is stopped (state %c)", (int)second.pid, proc_state(second.pid));

  /* the first goes: 503, then serve finds the second and asks for its session, which the stopped
   * runtime cannot answer */
  sc.phase = "stopping the first process";
  dnt_target_stop(&first);
  sc.phase = "serve looking for the next process of that name";
  int gone = wait_for(port, "/metrics", 503, NULL);
  snprintf(pidtext, sizeof pidtext, "process %d ", (int)second.pid);
  int asked = wait_for(port, "/", 200, pidtext);
  sc.phase = "serve waiting for the stopped second process to start its session";
  int unavailable_before = counted(&sc.unavailable);
  int scraped_meanwhile = scrape_answered_from_now(&sc);
  int unavailable_meanwhile = counted(&sc.unavailable) - unavailable_before;
  int status_meanwhile = dnt_http_request(port, "GET", "/metrics", DNT_HANG_MS / 1000, NULL);
  snprintf(following, sizeof following, "Following process %d ", (int)second.pid);
  char *said = slurp(log);
  int started_meanwhile = strstr(said, following) != NULL;
  free(said);

  /* the second runs on: its session starts, its values are served */
  sc.phase = "serve following the second process";
  cr_assert_eq(kill(second.pid, SIGCONT), 0);
  int values = wait_for(port, "/metrics", 200, "sample_requests_total{");
  sc.phase = "serving the second process";
  int served_second = scrape_answered_from_now(&sc);
  sc.stop = 1;
  pthread_join(th, NULL);
  said = slurp(log);

  cr_expect(served_first, "scrapes answered while the first process is served (%d of %d)", sc.answered, sc.scrapes);
  cr_expect(gone, "503 while no process of that name runs");
  cr_expect(asked, "serve opens the next process of that name, %d (its index says so)", (int)second.pid);
  cr_expect(!started_meanwhile, "no session on the stopped process %d yet:\n%s", (int)second.pid, said);
  cr_expect(scraped_meanwhile, "a scrape begun while serve waits for the stopped runtime is answered (%d of %d "
            "answered)", sc.answered, sc.scrapes);
  cr_expect_gt(unavailable_meanwhile, 0, "those scrapes are answered 503 (%d x 503 meanwhile)", unavailable_meanwhile);
  cr_expect_eq(status_meanwhile, 503, "/metrics answers 503 while the new session has not started");
  cr_expect(strstr(said, following), "serve follows the new process %d once it runs:\n%s", (int)second.pid, said);
  cr_expect(values, "the new process's values are served");
  cr_expect(served_second, "scrapes answered while the second process is served (%d of %d)", sc.answered, sc.scrapes);
  cr_expect_eq(sc.unanswered, 0, "%d of %d scrapes got no answer", sc.unanswered, sc.scrapes);
  cr_expect_gt(sc.ok, 0, "200s seen");
  /* a figure (tests/bench.sh), not a verdict: a loaded machine makes any scrape slow */
  cr_log_info("counters serve: %d scrapes every %d ms through the restart: slowest %.1f ms (%s), %d x 503, %d x 200; "
              "%s",
              sc.scrapes, SCRAPE_EVERY_MS, sc.max_ms, /* timing: a figure, printed */
              sc.slowest_in ? sc.slowest_in : "-", sc.unavailable, sc.ok,
              dnt_run_context(serve));
  free(said);

  int status = interrupt(serve);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "serve ends with 0 on Ctrl+C (status %d)", status);
  dnt_target_stop(&second);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* serve -p PID: that process will not come back, but the endpoint stays, answering 503 (the
 * README's promise), until serve is stopped. */
Test(serve_restart, by_pid_it_answers_503_after_the_process_ends, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512], listen[64], pid[16], log[] = "/tmp/dnt-serve-p-XXXXXX";
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  int logfd = mkstemp(log);
  cr_assert_geq(logfd, 0);
  int port = dnt_free_port();
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  pid_t serve = fork();
  cr_assert_geq(serve, 0);
  if (serve == 0) {
    dup2(logfd, 1);
    dup2(logfd, 2);
    execl(dnt_bin(), "dntrace", "counters", "serve", "-p", pid, "--counters", "System.Runtime", "--listen", listen,
          (char *)NULL);
    _exit(127);
  }
  close(logfd);
  cr_assert(wait_for(port, "/metrics", 200, NULL), "serve answers");
  dnt_target_stop(&t);
  cr_expect(wait_for(port, "/metrics", 503, NULL), "503 once the process has ended");
  usleep(1000 * 1000); /* a lower bound: serve stays at least that long */
  int status;
  cr_expect_eq(waitpid(serve, &status, WNOHANG), 0, "serve is still there");
  cr_expect(wait_for(port, "/metrics", 503, NULL), "and still answers 503");
  status = interrupt(serve);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "serve ends with 0 on Ctrl+C (status %d)", status);
  unlink(log);
}
