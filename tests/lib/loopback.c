/* HTTP on 127.0.0.1 for the tests of dntrace's servers: loopback.h. */
#include "loopback.h"
#include "run.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

double dnt_now_ms(void) {
  struct timespec ts;
  /* timing: the scraper's figures (printed) and waits under DNT_HANG_MS */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int dnt_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0;
  close(fd);
  return ok ? ntohs(a.sin_port) : -1;
}

int dnt_connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int dnt_http_request(int port, const char *method, const char *path, int timeout_s, char **answer) {
  if (answer) *answer = NULL;
  int fd = dnt_connect_loopback(port);
  if (fd < 0) return 0;
  struct timeval tv = {.tv_sec = timeout_s};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char req[512];
  int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", method, path);
  if (n < 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n) {
    close(fd);
    return 0;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  ssize_t got;
  while (buf && (got = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)got;
    if (len + 1 == cap) {
      char *grown = realloc(buf, cap *= 2);
      if (!grown) break;
      buf = grown;
    }
  }
  close(fd);
  if (!buf) return 0;
  buf[len] = '\0';
  int status = 0;
  if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) status = 0;
  if (answer) *answer = buf;
  else free(buf);
  return status;
}

void *dnt_scrape_loop(void *scraper) {
  struct dnt_scraper *s = scraper;
  while (!s->stop) {
    double t0 = dnt_now_ms();
    int status = dnt_http_request(s->port, "GET", "/metrics", DNT_HANG_MS / 1000, NULL);
    double took = dnt_now_ms() - t0;
    s->scrapes++;
    if (status) s->answered++;
    else s->unanswered++;
    if (status == 200) s->ok++;
    if (status == 503) s->unavailable++;
    if (took > s->max_ms) {
      s->max_ms = took;
      s->slowest_in = (const char *)s->phase;
    }
    usleep((useconds_t)s->every_ms * 1000);
  }
  return NULL;
}
