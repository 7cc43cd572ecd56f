/* `counters serve -n NAME` follows a restarted process without ever making a scrape wait: the
 * new session starts on the loop (its start takes the runtime hundreds of milliseconds to
 * seconds while it enables its EventSources) while /metrics keeps answering, 503 until the new
 * process's values arrive. A scraper thread asks every 10 ms over a raw socket and times each
 * whole answer. */
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
#define SCRAPE_LIMIT_MS 50.0

/* Polls path until the answer has status and holds want (NULL: anything): 1, or 0 after 30 s. */
static int wait_for(int port, const char *path, int status, const char *want) {
  for (int i = 0; i < 300; i++) {
    char *body;
    int code = dnt_http_request(port, "GET", path, 5, &body);
    int hit = code == status && (!want || (body && strstr(body, want)));
    free(body);
    if (hit) return 1;
    usleep(100 * 1000);
  }
  return 0;
}

/* The sample under a name of its own (a symlink to its apphost), so that -n finds this test's
 * process only. */
static void start_named(dnt_target *t, const char *exe) {
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .exe = exe, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
}

Test(serve_restart, scrapes_never_wait_while_serve_follows_a_new_process, .timeout = 180) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-follow-XXXXXX", exe[128], name[32], listen[64], log[160], pidtext[64];
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
  sc.phase = "stopping the first process";
  dnt_target_stop(&first);
  sc.phase = "waiting for 503";
  int gone = wait_for(port, "/metrics", 503, NULL);
  dnt_target second;
  sc.phase = "starting the second process";
  start_named(&second, exe);
  sc.phase = "serve following the second process";
  /* the new process's own values: its pid on the index page and its instruments in /metrics */
  snprintf(pidtext, sizeof pidtext, "process %d ", (int)second.pid);
  int followed = wait_for(port, "/", 200, pidtext);
  int values = wait_for(port, "/metrics", 200, "sample_requests_total{");
  sc.phase = "serving the second process";
  usleep(500 * 1000); /* a few more scrapes with the new session running */
  sc.stop = 1;
  pthread_join(th, NULL);

  cr_expect(gone, "503 while no process of that name runs");
  cr_expect(followed, "serve follows the new process %d", (int)second.pid);
  cr_expect(values, "the new process's values are served");
  cr_expect_gt(sc.scrapes, 50, "the scraper ran through the restart (%d scrapes)", sc.scrapes);
  cr_expect_eq(sc.unanswered, 0, "%d of %d scrapes got no answer", sc.unanswered, sc.scrapes);
  cr_expect_gt(sc.unavailable, 0, "503s seen between the processes");
  cr_expect_gt(sc.ok, 0, "200s seen");
  cr_expect_leq(sc.max_ms, SCRAPE_LIMIT_MS, "the slowest of %d scrapes took %.1f ms, %s (the loop was blocked)",
                sc.scrapes, sc.max_ms, sc.slowest_in);
  cr_log_info("%d scrapes every %d ms through the restart: slowest %.1f ms, %d x 503, %d x 200", sc.scrapes,
              SCRAPE_EVERY_MS, sc.max_ms, sc.unavailable, sc.ok);

  kill(serve, SIGINT);
  int status;
  cr_assert_eq(waitpid(serve, &status, 0), serve);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "serve ends with 0 on Ctrl+C (status %d)", status);
  dnt_target_stop(&second);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* serve -p PID: that process will not come back, but the endpoint stays, answering 503 (the
 * README's promise), until serve is stopped. */
Test(serve_restart, by_pid_it_answers_503_after_the_process_ends, .timeout = 120) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000};
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
  usleep(1000 * 1000);
  int status;
  cr_expect_eq(waitpid(serve, &status, WNOHANG), 0, "serve is still there");
  cr_expect(wait_for(port, "/metrics", 503, NULL), "and still answers 503");
  kill(serve, SIGINT);
  cr_assert_eq(waitpid(serve, &status, 0), serve);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "serve ends with 0 on Ctrl+C (status %d)", status);
  unlink(log);
}
