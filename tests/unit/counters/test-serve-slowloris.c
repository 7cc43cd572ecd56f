/* `counters serve` under a slowloris attack (issue 19, item 6): 300 clients that connect, send
 * part of a request and then one byte now and then, reconnecting when the server drops them,
 * while every normal scrape must still be answered. The server runs with a low fd limit (128),
 * which 300 held connections would exhaust: without caps, libuv then drops every new
 * connection, the scrapes' too. The scrapes' latency is a figure, printed (for `make bench`),
 * not asserted: it measures the machine as much as the server. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dnt-counters.h"
#include "../../lib/http-thread.h"
#include "../../lib/loopback.h"
#include "../../lib/run.h"
#include "../../lib/target.h"

#define SLOW_CLIENTS 300
#define SCRAPES 40
#define SERVER_FD_LIMIT 128

/* The attacker, in a child process (its own fd table): never returns. */
static void slow_clients(int port, int ready_fd) {
  static int fd[SLOW_CLIENTS];
  static double closed_at[SLOW_CLIENTS];
  static const char start[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  int connected = 0;
  for (int i = 0; i < SLOW_CLIENTS; i++) {
    fd[i] = dnt_connect_loopback(port);
    if (fd[i] >= 0 && send(fd[i], start, sizeof start - 1, MSG_NOSIGNAL) > 0) connected++;
  }
  char c = (char)(connected == SLOW_CLIENTS);
  if (write(ready_fd, &c, 1) != 1) _exit(1);
  close(ready_fd);
  for (;;) {
    /* a byte every 50 ms on each; one the server closed comes back a second later */
    for (int i = 0; i < SLOW_CLIENTS; i++) {
      if (fd[i] < 0) {
        /* timing: the attacker's pace (a closed client comes back after a second), no verdict */
        if (dnt_now_ms() - closed_at[i] < 1000) continue;
        fd[i] = dnt_connect_loopback(port);
        if (fd[i] >= 0) send(fd[i], start, sizeof start - 1, MSG_NOSIGNAL);
        continue;
      }
      char b[16];
      ssize_t n = recv(fd[i], b, sizeof b, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
          send(fd[i], "a", 1, MSG_NOSIGNAL) != 1) {
        close(fd[i]);
        fd[i] = -1;
        /* timing: as above */
        closed_at[i] = dnt_now_ms();
      }
    }
    usleep(50000);
  }
}

/* One scrape: connect, GET /metrics, read to the end (each read waits up to DNT_HANG_MS: only a
 * server that never answers reaches it). Its time in ms, or -1 if not a 200. */
static double scrape(int port) {
  /* timing: a scrape's time, printed as a figure, not asserted */
  double t0 = dnt_now_ms();
  int fd = dnt_connect_loopback(port);
  if (fd < 0) return -1;
  static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n";
  if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
    close(fd);
    return -1;
  }
  char reply[1024];
  size_t have = 0;
  ssize_t n;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  while (have < sizeof reply - 1 && poll(&p, 1, DNT_HANG_MS) == 1 &&
         (n = read(fd, reply + have, sizeof reply - 1 - have)) > 0)
    have += (size_t)n;
  close(fd);
  reply[have] = '\0';
  if (strncmp(reply, "HTTP/1.1 200 OK\r\n", 17) != 0 || !strstr(reply, "\r\n\r\n# TYPE up gauge\nup 1\n")) return -1;
  /* timing: as above */
  return dnt_now_ms() - t0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

Test(serve_slowloris, scrapes_are_answered_beside_300_slow_clients, .timeout = 300) {
  struct rlimit orig, low;
  cr_assert_eq(getrlimit(RLIMIT_NOFILE, &orig), 0);
  cr_assert(orig.rlim_max == RLIM_INFINITY || orig.rlim_max >= SLOW_CLIENTS + 64, "the attacker needs 364 fds");
  low = orig;
  low.rlim_cur = SERVER_FD_LIMIT;
  cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);

  struct server_thread s;
  server_start(&s);

  int ready[2];
  cr_assert_eq(pipe(ready), 0);
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    close(ready[0]);
    struct rlimit mine = orig;
    if (mine.rlim_cur != RLIM_INFINITY && mine.rlim_cur < SLOW_CLIENTS + 64) mine.rlim_cur = SLOW_CLIENTS + 64;
    if (setrlimit(RLIMIT_NOFILE, &mine) != 0) _exit(1);
    slow_clients(s.port, ready[1]);
    _exit(0);
  }
  close(ready[1]);
  char ok = 0;
  cr_assert_eq(read(ready[0], &ok, 1), 1, "the slow clients started");
  close(ready[0]);
  cr_expect_eq(ok, 1, "all %d slow clients connected and sent a partial request", SLOW_CLIENTS);

  double t[SCRAPES];
  int failed = 0;
  usleep(300000); /* the trickle under way */
  for (int i = 0; i < SCRAPES; i++) {
    t[i] = scrape(s.port);
    if (t[i] < 0) failed++;
    usleep(50000);
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  server_stop(&s);
  setrlimit(RLIMIT_NOFILE, &orig);

  qsort(t, SCRAPES, sizeof t[0], cmp_double);
  cr_log_info("%d scrapes beside %d slow clients: median %.2f ms, max %.2f ms; %llu connections evicted, %llu timed out",
              SCRAPES, SLOW_CLIENTS, t[SCRAPES / 2], t[SCRAPES - 1], s.evicted, s.timed_out);
  fprintf(stderr, "# scrape latency: median %.2f ms, max %.2f ms (%d scrapes); evicted %llu, timed out %llu\n",
          t[SCRAPES / 2], t[SCRAPES - 1], SCRAPES, s.evicted, s.timed_out);
  cr_expect_eq(failed, 0, "%d of %d scrapes were not answered (%s)", failed, SCRAPES, dnt_run_context(getpid()));
  /* the scrapes came after the 300 in the accept queue: the server took them all in, past its
   * cap, so it must have closed some */
  cr_expect_gt(s.evicted, 0, "the slow clients were made to give way");
}
